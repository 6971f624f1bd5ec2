"""What every architecture shares: its description, its outputs, and run_with_cache."""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import ContextManager

import torch
from torch import nn

from model.files.tokenizer import TextTokenizer
from model.runtime import limits
from model.runtime.edits import Edits, as_edits, hook_fns
from model.runtime.hooks import Cache, active, capture, compose, hooks, name_hook_points
from model.runtime.limits import Prepared


# the attention blocks of each kind of model, in pipeline order ("{stack}.{attn}")
BLOCKS_OF_KIND = {
    "encoder-decoder": ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
    "encoder": ("encoder.self_attn",),
    "decoder": ("decoder.self_attn",),
}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    kind: str  # "encoder-decoder" | "encoder" | "decoder"
    n_layers: int  # layers of the first stack (the encoder, or the decoder of a decoder-only model)
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    positional: str  # "sinusoidal" | "learned" | "rotary"
    vocab_size: int
    max_len: int  # the most positions one sentence may take
    n_decoder_layers: int = 0  # encoder–decoder only
    positional_base: float | None = None  # sinusoidal base n, or the rotary base
    description: str = ""
    # what the words on screen need (defaults: the paper's Transformer)
    embed_scale: float = 1.0  # token embeddings are multiplied by this before anything is added (√d_model or 1)
    embed_norm: bool = False  # a LayerNorm follows embedding + position, before block 0 (BERT)
    norm: str = "post-LayerNorm"  # "post-LayerNorm" (x = Norm(x + f(x))) | "pre-RMSNorm" (x = x + f(Norm(x)))
    final_norm: bool = False  # a norm follows the last block (pre-norm models)
    ffn: str = "ReLU"  # the feed-forward's activation: "ReLU" | "GELU" | "GELU (tanh)" | "SwiGLU"
    d_ff: int = 0  # the feed-forward's hidden width
    qkv_bias: bool = True  # W_Q, W_K, W_V have a bias b_Q, b_K, b_V
    out_bias: bool = True  # W_O has a bias b_O
    ffn_bias: bool = True  # the feed-forward's projections have biases
    tied_output: bool = False  # the output projection is the token embedding matrix (transposed)
    # families read from a checkpoint folder (model/arch/family.py); the defaults describe the others
    family: str = ""  # config.json's model_type ("gpt2", "llama", "t5", ...); "" for the built-in classes
    attn_scale: float = 0.0  # scores = q·kᵀ · attn_scale; 0: 1/√d_head (T5: 1, Gemma: query_pre_attn_scalar^-½)
    qk_norm: bool = False  # q and k of each head are normed before rotary (hook_q_normed, hook_k_normed)
    sliding_window: int = 0  # keys a query may see, itself included, on the layers in window_layers; 0: none
    window_layers: tuple[int, ...] = ()  # the layers that use the sliding window
    positional_base_local: float | None = None  # the rotary base of the sliding-window layers, if different
    rotary_dims: int = 0  # rotated dimensions per head (partial rotary); 0: all of d_head
    rotary_interleaved: bool = False  # rotary pairs (2i, 2i+1); else (i, i + rotary_dims/2) ("rotate half")
    attn_softcap: float = 0.0  # scores -> c·tanh(scores / c) (hook_capped_scores); 0: none
    final_softcap: float = 0.0  # logits -> c·tanh(logits / c); 0: none
    rope_scaling: tuple = ()  # rotary of the full-attention layers: (kind, factor, low_freq_factor,
    #                            high_freq_factor, original_max_len) of its scaling ("linear", "llama3"); (): none
    rope_scaling_local: tuple = ()  # the same for the sliding-window layers' rotary, when it has its own
    pos_offset: int = 0  # learned positions: position i reads row pos_offset + i (RoBERTa: pad id + 1)
    token_types: int = 0  # token-type embeddings (BERT, RoBERTa: every token is type 0); 0: none
    sinusoidal_split: bool = False  # sinusoids: sin in the first half of the columns, cos in the second (Marian)
    logit_scale: float = 1.0  # the last stream × this before the output projection (T5 with tied output: d^-½)
    output_bias: bool = False  # the output projection adds a bias (Marian's final_logits_bias, MLM heads)

    max_tokens: int = 0  # the most tokens one sentence may have in a run (model/runtime/limits.py);
    #                      0 here: 512, or max_len if smaller

    def __post_init__(self) -> None:
        if not self.max_tokens:
            object.__setattr__(self, "max_tokens", min(limits.DEFAULT_MAX_TOKENS, self.max_len))

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def blocks(self) -> tuple[str, ...]:
        return BLOCKS_OF_KIND[self.kind]

    @property
    def stacks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.split(".")[0] for b in self.blocks))


@dataclass
class Output:
    logits: torch.Tensor | None = None  # (B, T, vocab): encoder–decoder and decoder predictions
    generated: list[str] | None = None  # encoder–decoder: what it wrote, greedily
    hidden: torch.Tensor | None = None  # (B, T, d) the last stream (the encoder's, for BERT)
    truncated: list[bool] = field(default_factory=list)


HookScope = Callable[[], ContextManager]
EditsLike = str | Edits | Iterable | None


@dataclass
class StepTop:
    """The next-token distribution of one decoding step: the most likely tokens, and the one written."""

    ids: torch.Tensor  # (B, n) the n most likely next tokens, most likely first
    probs: torch.Tensor  # (B, n) their probabilities: softmax of the logits (temperature 1)
    tokens: list[list[str]]  # (B, n) as people read them (``model.token_text``)
    chosen: torch.Tensor  # (B,) the token written (the pad token for a sentence already finished)
    chosen_prob: torch.Tensor  # (B,) its probability under the model (temperature 1)
    chosen_token: list[str]  # (B,)
    sampled_from: torch.Tensor | None = None  # (B, n) sampling only: the probabilities of ``ids``
    # in the distribution the token was drawn from (temperature, top-k and top-p applied)
    cut_by: list[list[str]] | None = None  # (B, n) sampling only: per candidate of ``ids``, "" when
    # it could be drawn, "top_k" or "top_p" when that rule cut it (top-k is applied first)


@dataclass
class Trace:
    """Token-by-token decoding with a key/value cache, and what the hooks saw at every step.

    Step t runs the decoder on one token (the one at column ``query[t]`` of the decoder input)
    and chooses the token written next. Decoder self-attention hooks at step t have query length 1
    and key length = the tokens so far (``query[t] + 1``); cross-attention (seed) has key length =
    the source length. ``prompt`` holds the hooks of the pass that reads the input once, before
    step 0: the encoder (seed), or the prompt without its last token (Llama; empty when the prompt
    is one token). Llama prompts are left-padded, so that every sentence's new token sits in the
    same column; each sentence keeps its own positions (``positions``: 0 at its first real token),
    so its numbers are those of the sentence alone.
    """

    texts: list[str]
    generated: list[str]  # per sentence, the text written (without the end token)
    tokens: list[list[str]]  # per sentence, the tokens written, in order (an end token included)
    token_ids: list[list[int]]
    steps: list[dict[str, torch.Tensor]]  # steps[t][hook name]: what the hook saw at step t
    top: list[StepTop]  # per step, the next-token candidates and the choice
    prompt: dict[str, torch.Tensor]  # hooks of reading the input, once before step 0
    input_tokens: list[list[str]]  # per sentence (unpadded): the encoder's tokens / the prompt's
    input_token_ids: list[list[int]]
    decoder_tokens: list[list[str]]  # per sentence, the decoder input as laid out in the tensors
    decoder_token_ids: list[list[int]]  # (pads included); step t's keys are [:query[t] + 1]
    query: list[int]  # per step, the column of the decoder input it runs on
    positions: torch.Tensor  # (B, T) the position of each decoder column (rotary / sinusoidal)
    active: torch.Tensor  # (steps, B) bool: the sentence was still writing at that step
    use_cache: bool = True  # False: every step recomputed every earlier position (full-length hooks)

    def __len__(self) -> int:
        return len(self.steps)


class Recorder:
    """One ``generate_with_cache`` call's hook capture and token choice (never on the model)."""

    def __init__(self, model: "HookedModel", names: list[str], temperature: float = 0.0,
                 top_k: int | None = None, seed: int = 0, n_top: int = 5, top_p: float | None = None) -> None:
        self.model, self.names, self.order = model, names, model.hook_names
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.n_top = min(n_top, model.info.vocab_size)
        # sampling draws from this call's own generator, never from the global one
        self.generator = torch.Generator().manual_seed(seed) if temperature > 0 else None
        self.prompt_store: dict[str, torch.Tensor] = {}
        self.steps: list[dict[str, torch.Tensor]] = []
        self.top: list[StepTop] = []
        self.active: list[torch.Tensor] = []

    def prompt(self) -> ContextManager:
        """Capture the hooks of the pass that reads the input."""
        return hooks(capture(self.names, self.prompt_store))

    def step(self) -> ContextManager:
        """Capture the hooks of the next step into a dict of its own."""
        self.steps.append({})
        return hooks(capture(self.names, self.steps[-1]))

    def choose(self, logits: torch.Tensor, active: torch.Tensor, pad_id: int) -> torch.Tensor:
        """logits (B, V) of the step -> the token each sentence writes (B,); pad where finished."""
        logits = logits.float()
        probs = torch.softmax(logits, dim=-1)  # (B, V)
        top_p, top_i = probs.topk(self.n_top, dim=-1)  # (B, n)
        sampled_from = cut_by = None
        if self.temperature == 0:
            chosen = logits.argmax(-1)  # (B,) greedy
        else:
            z = logits / self.temperature
            cut_k = cut_p = torch.zeros_like(z, dtype=torch.bool)  # (B, V)
            if self.top_k is not None:  # keep the k most likely, drop the rest
                kth = z.topk(min(self.top_k, z.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
                cut_k = z < kth
                z = z.masked_fill(cut_k, float("-inf"))
            if self.top_p is not None and self.top_p < 1:
                cut_p = nucleus_cut(torch.softmax(z, dim=-1), self.top_p) & ~cut_k
                z = z.masked_fill(cut_p, float("-inf"))
            p = torch.softmax(z, dim=-1)  # (B, V) the distribution drawn from
            chosen = torch.multinomial(p, 1, generator=self.generator).squeeze(-1)  # (B,)
            sampled_from = p.gather(-1, top_i)
            k_of, p_of = cut_k.gather(-1, top_i).tolist(), cut_p.gather(-1, top_i).tolist()
            cut_by = [["top_k" if a else "top_p" if b else "" for a, b in zip(ra, rb)] for ra, rb in zip(k_of, p_of)]
        chosen = torch.where(active, chosen, torch.full_like(chosen, pad_id))
        text = self.model.token_text
        self.top.append(StepTop(
            ids=top_i, probs=top_p, tokens=[[text(i) for i in row] for row in top_i.tolist()],
            chosen=chosen, chosen_prob=probs.gather(-1, chosen[:, None]).squeeze(-1),
            chosen_token=[text(i) for i in chosen.tolist()], sampled_from=sampled_from, cut_by=cut_by))
        self.active.append(active.clone())
        return chosen

    def ordered(self, store: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {n: store[n] for n in self.order if n in store}

    def trace(self, batch: int, **fields) -> Trace:
        """The Trace of this call: the steps, choices and prompt recorded here, plus ``fields``."""
        active = torch.stack(self.active) if self.active else torch.zeros(0, batch, dtype=torch.bool)
        return Trace(steps=[self.ordered(s) for s in self.steps], top=self.top,
                     prompt=self.ordered(self.prompt_store), active=active, **fields)


class HookedModel(nn.Module):
    """An architecture whose every intermediate tensor passes through a named HookPoint."""

    info: ModelInfo
    tokenizer: TextTokenizer

    def setup_hooks(self) -> None:
        """Call once, at the end of __init__: names come from attribute paths."""
        self.hook_names: list[str] = name_hook_points(self)

    def _run(self, texts: list[str], scope: HookScope, *, readout: bool = True) -> tuple[Output, Cache]:
        """Tokenize, pad and run; enter ``scope()`` around the forward pass to be shown. ``readout=False``:
        a decoder-only or encoder model leaves ``Output.logits`` None (``Output.hidden`` is there)."""
        raise NotImplementedError

    def token_text(self, token_id: int) -> str:
        """A vocabulary entry as people should read it (as in ``cache.tokens``)."""
        return self.tokenizer.id_to_token(token_id)

    _check_texts = staticmethod(limits.check_texts)

    # --- what may enter a run (model/runtime/limits.py) -------------------------------------
    def set_max_tokens(self, n: int | None = None) -> None:
        """``info.max_tokens`` = n, else $ATTENTION_EXPLORER_MAX_TOKENS, else unchanged."""
        n = limits.token_limit(self.info, n)
        if n is not None:
            self.info = dataclasses.replace(self.info, max_tokens=n)

    def prepare_texts(self, texts: str | Iterable[str], *, truncate: bool = False) -> Prepared:
        """Sentences checked against the token limit, before any run: over ``info.max_tokens``
        raises ``InputTooLong``, or with ``truncate=True`` is cut at a token boundary (marked in
        ``.truncated``); lone surrogates become U+FFFD. Every entry point calls this first."""
        return limits.prepare(texts, self.tokenizer, self.info, truncate=truncate)

    def check_memory(self, n_sentences: int, n_tokens: int, names: Iterable[str] = ()) -> int:
        """Raise ``RunTooLarge`` when such a run would need more memory than it may take."""
        return limits.check_memory(self.info, n_sentences, n_tokens, names)

    def _edit_scope(self, edit_fns: dict) -> ContextManager:
        """The edits, active for the whole run (greedy decoding included), on top of any hooks
        the caller has active; nothing at all when there are no edits."""
        return hooks(compose(edit_fns, active())) if edit_fns else contextlib.nullcontext()

    @torch.inference_mode()
    def run(self, texts: str | Sequence[str], edits: EditsLike = None, *, truncate: bool = False) -> Output:
        """The same forward pass with no hooks at all, or with ``edits`` (see model.edits).

        At most ``info.max_tokens`` tokens per sentence (else ``InputTooLong``, or cut with
        ``truncate=True``); a run too large for memory raises ``RunTooLarge`` before it starts."""
        prep = self.prepare_texts(texts, truncate=truncate)
        self.check_memory(len(prep.texts), prep.longest)
        with self._edit_scope(hook_fns(self, edits)):
            out, _ = self._run(prep.texts, contextlib.nullcontext)
        out.truncated = [a or b for a, b in zip(prep.truncated, out.truncated or [False] * len(prep.truncated))]
        return out

    def _generate(self, texts: list[str], max_new_tokens: int | None, rec: Recorder,
                  use_cache: bool) -> Trace:
        """Decode token by token, entering ``rec.prompt()`` / ``rec.step()`` around each pass."""
        raise TypeError(f"{self.info.name} is an {self.info.kind} model: it has no decoder that "
                        f"writes text; generate with the seed model or a Llama decoder (smollm2)")

    @torch.inference_mode()
    def generate_with_cache(
        self, texts: str | Sequence[str], max_new_tokens: int | None = None, *,
        names: Iterable[str] | None = None, temperature: float = 0.0, top_k: int | None = None,
        seed: int = 0, n_top: int = 5, use_cache: bool = True, truncate: bool = False,
        top_p: float | None = None,
    ) -> Trace:
        """Write up to ``max_new_tokens`` tokens per sentence, one decoder step at a time, and
        record what the hooks saw at every step (``trace.steps[t][name]``).

        Each step runs the decoder on the new token only and keeps every layer's keys and values
        in a key/value cache (``use_cache=False`` recomputes every earlier position at every step
        instead, as decoding without a cache does; its hooks then have full length). Greedy by
        default; ``temperature > 0`` samples (optionally from the ``top_k`` most likely tokens, then
        from the nucleus ``top_p``: the smallest set of the most likely tokens whose probabilities,
        after temperature and top-k, sum to at least ``top_p``) with a generator seeded by ``seed``,
        so a call is reproducible; ``trace.top[t].cut_by`` says which candidates each rule cut. ``n_top`` candidates per
        step are kept in ``trace.top``. ``max_new_tokens`` defaults to the source length + 8
        (seed, as ``run_with_cache``) or 32 (Llama), and is cut to what the model's positions allow.
        The input obeys the token limit as in ``run_with_cache`` (``InputTooLong``, or ``truncate``),
        and a run too large for memory raises ``RunTooLarge`` before it starts.
        """
        prep = self.prepare_texts(texts, truncate=truncate)
        texts = prep.texts
        self.check_memory(len(texts), prep.longest + (max_new_tokens or prep.longest + 8))
        wanted = self.hook_names if names is None else list(names)
        unknown = set(wanted) - set(self.hook_names)
        if unknown:
            raise KeyError(f"unknown hook names: {sorted(unknown)[:5]}")
        if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)
                                           or max_new_tokens < 1):
            raise ValueError(f"max_new_tokens must be a whole number >= 1, not {max_new_tokens!r}")
        if not (isinstance(temperature, (int, float)) and 0 <= temperature < float("inf")):
            raise ValueError(f"temperature must be >= 0 (0 = greedy), not {temperature!r}")
        if top_k is not None and (temperature == 0 or not isinstance(top_k, int) or top_k < 1):
            raise ValueError("top_k must be a whole number >= 1 and needs temperature > 0 (sampling)")
        if top_p is not None and (temperature == 0 or isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                                  or not 0 < top_p <= 1):
            raise ValueError("top_p must be a number in (0, 1] and needs temperature > 0 (sampling)")
        if not isinstance(n_top, int) or n_top < 1:
            raise ValueError(f"n_top must be a whole number >= 1, not {n_top!r}")
        rec = Recorder(self, wanted, float(temperature), top_k, seed, n_top,
                       None if top_p is None else float(top_p))
        return self._generate(texts, max_new_tokens, rec, use_cache)

    @torch.inference_mode()
    def run_with_cache(
        self, texts: str | Sequence[str], names: Iterable[str] | None = None,
        edits: EditsLike = None, *, truncate: bool = False, logits: bool = True,
    ) -> tuple[Output, Cache]:
        """Run a padded batch and return (output, cache of hook tensors).

        ``logits=False``: a decoder-only or encoder model skips its readout over every position
        (Output.logits is None; ``readout(Output.hidden[b, t])`` gives any position's logits, e.g. the
        last one's alone: the vocabulary × every position is most of a short run's cost on a large
        vocabulary). An encoder–decoder's logits come with its decoding and are always there.

        ``edits`` (a string such as ``"no_causal,temperature=2"``, an ``Edits``, or a list of
        edits) change this run only; the cache then holds the edited tensors. At most
        ``info.max_tokens`` tokens per sentence (else ``InputTooLong``, or cut with
        ``truncate=True``); a run too large for memory raises ``RunTooLarge`` before it starts.
        """
        wanted = self.hook_names if names is None else list(names)
        unknown = set(wanted) - set(self.hook_names)
        if unknown:
            raise KeyError(f"unknown hook names: {sorted(unknown)[:5]}")
        prep = self.prepare_texts(texts, truncate=truncate)
        self.check_memory(len(prep.texts), prep.longest, wanted)
        edits = as_edits(edits)
        edit_fns = hook_fns(self, edits)
        store: dict[str, torch.Tensor] = {}
        fns = compose(edit_fns, capture(wanted, store))  # the capture sees the edited tensors
        with self._edit_scope(edit_fns):
            out, cache = self._run(prep.texts, lambda: hooks(fns), readout=logits)
        out.truncated = [a or b for a, b in zip(prep.truncated, out.truncated or [False] * len(prep.truncated))]
        cache.tensors = {n: store[n] for n in self.hook_names if n in store}
        cache.texts = prep.texts
        cache.edits = str(edits)
        return out, cache


def nucleus_cut(p: torch.Tensor, top_p: float) -> torch.Tensor:
    """(B, V) probabilities -> (B, V) True where top-p cuts: outside the smallest set of the most likely
    tokens whose probabilities sum to at least ``top_p`` (the most likely token is always kept)."""
    sp, order = p.sort(dim=-1, descending=True)  # (B, V)
    before = sp.cumsum(-1) - sp  # (B, V) the mass of the tokens more likely than each
    cut_sorted = before >= top_p  # the set already reached top_p without this token
    return torch.zeros_like(cut_sorted).scatter(-1, order, cut_sorted)


def pad_batch(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad lists of ids into a (B, T) tensor."""
    t = max(len(s) for s in seqs)
    out = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out
