"""The data the views read: one run of a model, as plain numpy arrays and lists (picklable).

    run = run_data(m, ["hello", "안녕"])         # run the model and convert
    run = from_cache(cache, out)                 # or convert a model.Cache you already have
    run.tensors["encoder.blocks.0.self_attn.hook_pattern"]   # np.ndarray (B, nh, q, k)

``weights`` (optional) maps ``"{stack}.blocks.{i}.{attn}.W_Q"`` (and W_K, W_V, W_O, b_Q, ...)
to numpy arrays in the torch layout (out_features, in_features); ``weights_of(m)`` makes them
from a loaded model without copying.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from model.runtime.base import BLOCKS_OF_KIND

BLOCKS = BLOCKS_OF_KIND["encoder-decoder"]  # every block there is, in pipeline order
PAD = "<pad>"
TOP_K = 10
STORED = ("hook_embed", "hook_pos_embed", "hook_q", "hook_k", "hook_v", "hook_scores",
          "hook_mask", "hook_masked_scores", "hook_pattern", "hook_z", "hook_out",
          # the rest of the block (the residual stream, its sums and norms, the feed-forward)
          "hook_resid_pre", "hook_attn_sum", "hook_resid_mid", "hook_cross_sum", "hook_resid_mid_cross",
          "hook_attn_normed", "hook_ffn_normed", "hook_ffn_hidden", "hook_ffn_out", "hook_ffn_sum",
          "hook_resid_post",
          # what some families add (issue 24): QK-norm, T5's position bias, a softcap, Gemma's and T5's norms
          "hook_q_normed", "hook_k_normed", "hook_position_bias", "hook_capped_scores", "hook_cross_normed",
          "hook_attn_out_normed", "hook_ffn_out_normed")


@dataclass
class RunData:
    tensors: dict[str, np.ndarray]
    tokens: list[list[str]]
    token_ids: list[list[int]]
    offsets: list[list[tuple[int, int]]]
    decoder_tokens: list[list[str]] = field(default_factory=list)
    decoder_token_ids: list[list[int]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    generated: list[str] | None = None
    truncated: list[bool] = field(default_factory=list)
    kind: str = "encoder-decoder"
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)
    # decoder-only models: the TOP_K most likely next tokens at every position (not the full
    # vocabulary's logits: a few KB instead of ~100 MB); top_text reads the ids in top_ids
    top_ids: np.ndarray | None = None  # (B, T, k) int32, most likely first
    top_probs: np.ndarray | None = None  # (B, T, k) float32 softmax probabilities
    top_text: dict[int, str] = field(default_factory=dict)
    # or (``run_data(..., next_tokens="last")``, the app's runs) only after each sentence's last real
    # token: (B, k) each, top_ids None; ``next_top`` reads either, ``with_top`` attaches every position's
    last_top_ids: np.ndarray | None = None
    last_top_probs: np.ndarray | None = None
    # the Decoding view's token-by-token trace of one of the sentences (explorer/views/trace.py:
    # TraceData, whose ``text`` says which): attached with ``with_trace``, never by run_data
    trace: object | None = None
    # the what-if edits this run was made under (model.edits' canonical string; "" = intact)
    edits: str = ""
    # what the what-if view compares between an intact and an edited run: decoder-only models, the
    # log-softmax of the next token after each sentence's last real token (B, vocab) float32;
    # encoder-only models, the sentence embedding (mean over real tokens of the last stream,
    # normalised, as sentence-transformers does) (B, d_model) float32
    final_logprobs: np.ndarray | None = None
    embedding: np.ndarray | None = None
    # the analyses beyond one head (issue 26), made once and attached, never by run_data: the logit
    # lens of one sentence (LensData: ``with_lens(lens_data(m, run, s))``, its ``text`` says which)
    # and each self-attention block's induction scores (layers, heads) on a repeated random sequence
    # (``with_induction(induction_scores(m))``)
    lens: object | None = None
    induction: Mapping[str, np.ndarray] | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"no hook named {name!r} in this run") from None

    def __contains__(self, name: object) -> bool:
        return name in self.tensors

    @property
    def n_sentences(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        """The memory of the run's arrays (its hooks, next tokens and output; not the weights)."""
        arrays = [*self.tensors.values(), self.top_ids, self.top_probs, self.last_top_ids, self.last_top_probs,
                  self.final_logprobs, self.embedding]
        return sum(a.nbytes for a in arrays if a is not None)

    def next_top(self, sentence: int, pos: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(ids, probabilities) of the TOP_K most likely tokens after position ``pos`` of ``sentence``,
        most likely first; None where this run has not read that position out (see ``last_top_ids``)."""
        if self.top_ids is not None:
            return self.top_ids[sentence, pos], self.top_probs[sentence, pos]
        if self.last_top_ids is not None and pos == len(self.token_ids[sentence]) - 1:
            return self.last_top_ids[sentence], self.last_top_probs[sentence]
        return None

    def with_top(self, top: Mapping) -> "RunData":
        """This run with every position's next tokens attached (``next_top_every(m, run)``)."""
        return replace(self, top_ids=top["top_ids"], top_probs=top["top_probs"],
                       top_text={**self.top_text, **top["top_text"]})

    def with_weights(self, weights: Mapping[str, np.ndarray]) -> "RunData":
        return replace(self, weights=weights)

    def with_trace(self, trace) -> "RunData":
        """This run with a decoding trace attached (a TraceData: ``trace_data(m, text)``)."""
        return replace(self, trace=trace)

    def with_lens(self, lens) -> "RunData":
        """This run with one sentence's logit lens attached (a LensData: ``lens_data(m, run, s)``)."""
        return replace(self, lens=lens)

    def with_induction(self, scores: Mapping[str, np.ndarray] | None) -> "RunData":
        """This run with the model's induction scores attached (``induction_scores(m)``)."""
        return replace(self, induction=scores)


def _np(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if x.dtype.is_floating_point:
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def _top_of(logits: torch.Tensor, token_text) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """logits (..., V) -> the TOP_K most likely tokens' ids (..., k) int32, softmax probabilities
    (..., k) float32 and readable text."""
    logits = logits.detach().float()
    top, i = logits.topk(min(TOP_K, logits.shape[-1]), dim=-1)  # (..., k)
    p = (top - torch.logsumexp(logits, dim=-1, keepdim=True)).exp()  # softmax, without a (..., V) copy
    ids = i.to(torch.int32).numpy()
    text = {int(t): (token_text(int(t)) if token_text is not None else str(int(t))) for t in np.unique(ids)}
    return ids, p.numpy().astype(np.float32), text


def _top(out, kind: str, token_text) -> dict:
    """A decoder's top-k next tokens at every position (ids, probabilities, readable text): the
    decoder-only model's, or the encoder–decoder's generator over its teacher-forced decoder input."""
    if out is None or getattr(out, "logits", None) is None or kind not in ("decoder", "encoder-decoder"):
        return {}
    ids, p, text = _top_of(out.logits, token_text)  # (B, T, k)
    return dict(top_ids=ids, top_probs=p, top_text=text)


def _last_readout(m, out, cache) -> dict:
    """A decoder-only run read out after each sentence's last real token alone (``run_with_cache(...,
    logits=False)``): its top next tokens (RunData.last_top_ids, .last_top_probs) and the log-softmax
    the what-if view compares (.final_logprobs): a (B, vocab) product instead of (B, T, vocab)."""
    lengths = torch.tensor([len(t) for t in cache.token_ids])  # (B,) right-padded
    h = out.hidden[torch.arange(len(lengths)), (lengths - 1).clamp(min=0)]  # (B, d)
    with torch.inference_mode():
        rows = m.readout(h).detach().float()  # (B, V)
        ids, p, text = _top_of(rows, getattr(m, "token_text", None))  # (B, k)
        return dict(last_top_ids=ids, last_top_probs=p, top_text=text,
                    final_logprobs=torch.log_softmax(rows, dim=-1).numpy())


def next_top_every(m, run: "RunData") -> dict:
    """Every position's top next tokens of a run made with ``next_tokens="last"`` (``run.with_top``
    attaches them): the model's readout of the last block's stream, which is the run's own output."""
    name = f"decoder.blocks.{layers_for(m.info, 'decoder.self_attn') - 1}.hook_resid_post"
    with torch.inference_mode():
        logits = m.readout(torch.tensor(run[name]))  # (B, T, V); a copy: the app's runs are read-only
        ids, p, text = _top_of(logits, getattr(m, "token_text", None))
    return dict(top_ids=ids, top_probs=p, top_text=text)


def _final(out, cache, kind: str) -> dict:
    """A run's output in the form the what-if view compares (see RunData.final_logprobs, .embedding)."""
    if out is None:
        return {}
    lengths = torch.tensor([len(t) for t in cache.token_ids])  # (B,) right-padded
    if kind == "decoder" and getattr(out, "logits", None) is not None:
        rows = out.logits.detach().float()[torch.arange(len(lengths)), (lengths - 1).clamp(min=0)]  # (B, V)
        return dict(final_logprobs=torch.log_softmax(rows, dim=-1).numpy())
    if kind == "encoder" and getattr(out, "hidden", None) is not None:
        h = out.hidden.detach().float()  # (B, T, d)
        real = (torch.arange(h.shape[1])[None, :] < lengths[:, None]).to(h.dtype)  # (B, T)
        mean = (h * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp(min=1)  # (B, d)
        return dict(embedding=torch.nn.functional.normalize(mean, dim=-1).numpy())
    return {}


def from_cache(cache, out=None, *, kind: str | None = None, keep=STORED, token_text=None) -> RunData:
    """Convert a ``model.Cache`` (and the run's ``model.Output``) into a RunData.

    ``token_text`` (e.g. ``m.token_text``) makes the decoder's top next tokens readable."""
    if isinstance(cache, RunData):
        return cache
    tensors = {n: _np(t) for n, t in cache.tensors.items() if n.rsplit(".", 1)[-1] in keep}
    if kind is None:
        has_enc = any(n.startswith("encoder.") for n in tensors)
        has_dec = any(n.startswith("decoder.") for n in tensors)
        kind = "encoder-decoder" if has_enc and has_dec else "encoder" if has_enc else "decoder"
    return RunData(
        tensors=tensors,
        tokens=[list(t) for t in cache.tokens],
        token_ids=[list(map(int, t)) for t in cache.token_ids],
        offsets=[[tuple(map(int, o)) for o in s] for s in cache.offsets],
        decoder_tokens=[list(t) for t in getattr(cache, "decoder_tokens", [])],
        decoder_token_ids=[list(map(int, t)) for t in getattr(cache, "decoder_token_ids", [])],
        texts=list(getattr(cache, "texts", [])),
        generated=list(out.generated) if out is not None and out.generated is not None else None,
        truncated=list(out.truncated) if out is not None else [],
        kind=kind,
        **_top(out, kind, token_text),
        edits=str(getattr(cache, "edits", "") or ""),
        **_final(out, cache, kind),
    )


def as_run(obj) -> RunData:
    """A RunData from a RunData or a model.Cache."""
    return obj if isinstance(obj, RunData) else from_cache(obj)


def weights_of(m) -> dict[str, np.ndarray]:
    """Every attention module's W_Q, W_K, W_V, W_O (and biases), as zero-copy numpy views; and every
    norm's ``{name}.weight`` (and ``.bias``) with its ``{name}.eps`` (a 0-d array), e.g.
    ``encoder.ln_embed.weight``, ``decoder.blocks.0.ln1.eps``: what a norm before attention is
    linearised with (the score split, qk_terms)."""
    from model.arch.parts import Norm

    out: dict[str, np.ndarray] = {}
    for name, mod in m.named_modules():
        if isinstance(mod, Norm):
            out[f"{name}.weight"] = mod.weight.detach().numpy()
            if mod.bias is not None:
                out[f"{name}.bias"] = mod.bias.detach().numpy()
            out[f"{name}.eps"] = np.asarray(float(mod.eps))
            continue
        if all(hasattr(mod, w) for w in ("W_Q", "W_K", "W_V", "W_O")) and hasattr(mod, "n_heads"):
            for w in ("Q", "K", "V", "O"):
                lin = getattr(mod, f"W_{w}")
                out[f"{name}.W_{w}"] = lin.weight.detach().numpy()
                if getattr(lin, "bias", None) is not None:
                    out[f"{name}.b_{w}"] = lin.bias.detach().numpy()
    return out


def run_data(m, texts: list[str], *, with_weights: bool = True, edits=None, next_tokens: str = "every") -> RunData:
    """Run ``m`` on a batch and return everything the views need (the weights optionally).

    ``edits`` (model.edits: a string such as ``"no_causal"``, or ``Edits``): the what-if run; its
    canonical string is ``RunData.edits``. An edit that does not fit the model raises EditError.
    ``next_tokens="last"`` (a decoder-only model; others ignore it): the next tokens after each
    sentence's last real token only (``RunData.last_top_ids``), not at every position: the readout over
    the vocabulary once per sentence (Gemma 3: 262,144 entries) instead of once per position."""
    if next_tokens not in ("every", "last"):
        raise ValueError(f"next_tokens is 'every' or 'last', not {next_tokens!r}")
    last = next_tokens == "last" and m.info.kind == "decoder"
    out, cache = m.run_with_cache(texts, edits=edits, **({"logits": False} if last else {}))
    run = from_cache(cache, out, kind=m.info.kind, token_text=getattr(m, "token_text", None))
    if last:
        run = replace(run, **_last_readout(m, out, cache))
    return run.with_weights(weights_of(m)) if with_weights else run


# --- reading one selection out of a run --------------------------------------------------

def stack_of(block: str) -> str:
    return block.split(".")[0]


def prefix(block: str, layer: int) -> str:
    stack, attn = block.split(".")
    return f"{stack}.blocks.{layer}.{attn}"


def blocks_for(info) -> list[str]:
    """The attention blocks a model has (``ModelInfo.blocks``; ``info`` may be its dict)."""
    return list(BLOCKS_OF_KIND[info["kind"] if isinstance(info, Mapping) else info.kind])


def layers_for(info, block: str) -> int:
    get = (lambda k: info[k]) if isinstance(info, Mapping) else (lambda k: getattr(info, k))
    if get("kind") == "encoder-decoder" and stack_of(block) == "decoder":
        return int(get("n_decoder_layers"))
    return int(get("n_layers"))


def stack_tokens(run: RunData, stack: str, sentence: int) -> list[str]:
    """The unpadded tokens entering ``stack`` for one sentence."""
    if stack == "decoder" and run.kind == "encoder-decoder":
        return list(run.decoder_tokens[sentence])
    return list(run.tokens[sentence])


def padded(tokens: list[str], length: int, pad: str = PAD) -> list[str]:
    return list(tokens[:length]) + [pad] * max(0, length - len(tokens))


def axis_tokens(run: RunData, block: str, sentence: int, layer: int = 0) -> tuple[list[str], list[str], int, int]:
    """(query tokens, key tokens, real queries, real keys), padded to the tensors' lengths."""
    p = prefix(block, layer)
    scores = run[f"{p}.hook_scores"]
    tq, tk = scores.shape[-2], scores.shape[-1]
    q = stack_tokens(run, stack_of(block), sentence)
    k = stack_tokens(run, "encoder", sentence) if block.endswith("cross_attn") else q
    return padded(q, tq), padded(k, tk), min(len(q), tq), min(len(k), tk)


def kv_head_of(head: int, n_heads: int, n_kv_heads: int) -> int:
    """The K/V head a query head reads under grouped-query attention: h // (n_heads // n_kv_heads)
    (model/arch/parts.py repeats each K/V head for that many consecutive query heads)."""
    return int(head) // max(1, int(n_heads) // max(1, int(n_kv_heads)))


def kv_groups(n_heads: int, n_kv_heads: int) -> list[list[int]]:
    """For each K/V head, the query heads that share it."""
    groups: list[list[int]] = [[] for _ in range(max(1, int(n_kv_heads)))]
    for h in range(int(n_heads)):
        groups[kv_head_of(h, n_heads, n_kv_heads)].append(h)
    return groups


def head_weights(weights: Mapping[str, np.ndarray], p: str, head: int, n_heads: int,
                 d_head: int) -> dict[str, np.ndarray]:
    """This head's slices: W_Q, W_K, W_V as (d_model, d_head) (x·W orientation) and
    W_O as (d_head, d_model) (z·W orientation). K/V follow grouped-query sharing."""
    wq = weights[f"{p}.W_Q"]
    n_kv = weights[f"{p}.W_K"].shape[0] // d_head
    kv = kv_head_of(head, n_heads, n_kv)
    q_rows = slice(head * d_head, (head + 1) * d_head)
    kv_rows = slice(kv * d_head, (kv + 1) * d_head)
    out = {
        "W_Q": wq[q_rows].T, "W_K": weights[f"{p}.W_K"][kv_rows].T,
        "W_V": weights[f"{p}.W_V"][kv_rows].T, "W_O": weights[f"{p}.W_O"][:, q_rows].T,
        "kv_head": kv,
    }
    for w, rows in (("Q", q_rows), ("K", kv_rows), ("V", kv_rows)):
        b = weights.get(f"{p}.b_{w}")
        out[f"b_{w}"] = None if b is None else b[rows]
    return out


# --- beyond one head (issue 26): what the analyses need besides the run's hooks ----------------------
# Each is made once (the app caches them: explorer/state.py) and attached to the run; a stage's
# builder only reads them.

@dataclass(frozen=True)
class LensData:
    """The logit lens of one sentence: at every layer and real position of the stack that has an
    output head, the top token of softmax(m.readout(hook_resid_post)) and its probability."""
    text: str
    stack: str
    ids: np.ndarray  # (layers, T) int32
    probs: np.ndarray  # (layers, T) float32
    token_text: dict[int, str]


def lens_data(m, run: RunData, sentence: int) -> LensData:
    """Read every layer's residual stream of one sentence through the model's own readout (final
    norm, then output projection: ``m.readout``), one layer at a time (a (T, vocab) matrix each).
    It runs no forward pass, but it is as costly as one: SmolLM2, 30 × 64 positions × 49,152 × 576."""
    stack, n_layers = "decoder", layers_for(m.info, "decoder.self_attn")
    n = len(stack_tokens(run, stack, sentence))
    ids = np.zeros((n_layers, n), np.int32)
    probs = np.zeros((n_layers, n), np.float32)
    with torch.inference_mode():
        for layer in range(n_layers):
            resid = torch.tensor(run[f"{stack}.blocks.{layer}.hook_resid_post"][sentence, :n])  # (T, d), a copy
            logits = m.readout(resid).float()  # (T, vocab)
            top, i = logits.max(-1)  # (T,)
            ids[layer] = i.numpy()
            probs[layer] = (top - torch.logsumexp(logits, -1)).exp().numpy()  # softmax at the top token
    text = {int(t): m.token_text(int(t)) for t in np.unique(ids)}
    return LensData(run.texts[sentence] if sentence < len(run.texts) else "", stack, ids, probs, text)


INDUCTION_TOKENS = 40  # distinct random tokens, written twice
INDUCTION_SEED = 0


def induction_text(m, n_tokens: int = INDUCTION_TOKENS, seed: int = INDUCTION_SEED) -> str:
    """A sequence of ``n_tokens`` distinct random vocabulary entries (each one token alone, letters
    only), written twice: the second copy can be predicted only by looking back at the first."""
    rng = np.random.default_rng(seed)
    tt = m.tokenizer
    order = rng.permutation(int(m.info.vocab_size))
    # byte-level vocabularies have whole words with their space (" cat"): those, written one after another
    spaced = any(m.token_text(int(i)).startswith(" ") and m.token_text(int(i))[1:].isalpha() for i in order[:500])
    chosen: list[str] = []
    seen: set[str] = set()
    for i in order:
        piece = m.token_text(int(i))
        word = piece.strip()
        if (not (word.isascii() and word.isalpha()) or word.lower() in seen or piece.startswith("##")
                or (spaced and piece != " " + word)):
            continue
        enc = tt.encode([piece], add_special_tokens=False)[0]
        if len(enc.ids) != 1 or int(enc.ids[0]) != int(i):
            continue
        seen.add(word.lower())
        chosen.append(piece)
        if len(chosen) == n_tokens:
            break
    once = ("" if spaced else " ").join(chosen)
    return once + ("" if spaced else " ") + once


def induction_scores(m, n_tokens: int = INDUCTION_TOKENS, seed: int = INDUCTION_SEED) -> dict[str, np.ndarray]:
    """Every self-attention block's induction score per layer and head, (layers, heads): on
    ``induction_text`` (one forward pass of its own), the mean weight from each token of the second
    copy to the token after that token's occurrence in the first copy (Olsson et al. 2022). Only
    tokens that occur once in the first copy count. The seed decoder reads its own output, not the
    text: its blocks get no score."""
    n_tokens = max(2, min(n_tokens, (int(getattr(m.info, "max_tokens", 0) or m.info.max_len) - 4) // 2))
    text = induction_text(m, n_tokens, seed)
    blocks = [b for b in m.info.blocks if b.endswith("self_attn")
              and not (m.info.kind == "encoder-decoder" and b.startswith("decoder"))]
    names = [f"{prefix(b, i)}.hook_pattern" for b in blocks for i in range(layers_for(m.info, b))]
    _, cache = m.run_with_cache([text], names=names)
    ids = list(cache.token_ids[0])
    half = len(ids) // 2
    first: dict[int, list[int]] = {}
    for j, t in enumerate(ids[:half]):
        first.setdefault(t, []).append(j)
    pairs = [(q, first[t][0] + 1) for q, t in enumerate(ids) if q >= half and len(first.get(t, ())) == 1
             and first[t][0] + 1 < q]
    out = {}
    for b in blocks:
        pats = np.stack([_np(cache[f"{prefix(b, i)}.hook_pattern"])[0] for i in range(layers_for(m.info, b))])
        if not pairs:
            out[b] = np.full(pats.shape[:2], np.nan, np.float32)
            continue
        q, k = np.array(pairs).T
        out[b] = pats[:, :, q, k].mean(-1).astype(np.float32)  # (layers, heads)
    return out
