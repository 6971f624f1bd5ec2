"""One sentence's token-by-token decoding as plain numpy arrays (picklable): what the Decoding view
draws, made once from ``m.generate_with_cache`` and read at any step without running the model again.

    tr = trace_data(m, "hello world")            # seed: the encoder once, then one step per token
    run = stages.run_data(m, ["hello world"]).with_trace(tr)
    fig, df = stages.stage_figure("decoding", run, m.info, sel, step=3)

Only what the view needs is kept, for every decoder layer and head: the softmax rows of the decoder's
self-attention (one new row per step, on top of the prompt's rows for a decoder-only model), the
final key and value caches (a step's cache is the first ``query[t] + 1`` columns of it: entries
already written never change), the cross-attention rows into the encoder's memory (seed), and
each step's top next tokens and the one chosen. Under grouped-query attention K and V are kept once
per K/V head (``kv_group`` query heads share one).

Sizes: SmolLM2 (30 layers × 9 heads, 3 K/V heads of 64), a 16-token prompt and 40 new tokens:
about 5 MB; the seed model and a 30-character sentence: about 0.2 MB.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the most tokens a decoder-only model writes in the app and the exporter; the seed model writes at
# most its source length + 8 (its own default, as run_with_cache)
DECODER_MAX_NEW_TOKENS = 40
DECODER_KINDS = ("decoder", "encoder-decoder")


@dataclass(frozen=True, eq=False)
class TraceData:
    """One sentence decoded step by step. Columns are the decoder's input positions 0..T-1: the
    prompt then what was written (decoder-only), or <s> then what was written (seed). Step t runs
    the decoder on column ``query[t]`` and chooses the token at column ``query[t] + 1``."""

    text: str  # the sentence (the run's text: the builder checks the trace belongs to it)
    kind: str  # "decoder" | "encoder-decoder"
    input_tokens: list[str]  # the encoder's tokens (seed) or the prompt's tokens
    tokens: list[str]  # the decoder's columns (T): the prompt / <s>, then every token written
    query: np.ndarray  # (steps,) int: the column step t runs on
    n_prompt_rows: int  # decoder-only: the prompt's rows read at once before step 0 (P - 1); seed: 0
    self_pattern: np.ndarray  # (layers, heads, T, T) float32: row i = the weights of the query at
    # column i over the keys 0..i; NaN where that row was never computed or the key is later
    self_allowed: np.ndarray  # (T, T) bool: the mask the hooks saw (True = allowed), False elsewhere
    k_cache: np.ndarray  # (layers, kv_heads, T - 1, d_head) float32: the last step's key cache
    v_cache: np.ndarray  # (layers, kv_heads, T - 1, d_head) float32
    kv_group: int  # query heads per K/V head (1 without grouped-query attention)
    cross_pattern: np.ndarray | None  # (layers, heads, T, S) float32 (seed), NaN rows not computed
    top_ids: np.ndarray  # (steps, n) int32, most likely first
    top_probs: np.ndarray  # (steps, n) float32 (softmax, temperature 1)
    top_tokens: list[list[str]]  # (steps, n) as people read them
    chosen_ids: np.ndarray  # (steps,) int32: the token written at each step (greedy)
    chosen_probs: np.ndarray  # (steps,) float32
    chosen_tokens: list[str]
    generated: str  # the text written (without the end token)
    finished: bool  # True: it wrote its end token; False: it stopped at max_new_tokens
    max_new_tokens: int
    # sampling (empty: greedy): (temperature, top_k or None, top_p or None, seed)
    sampling: tuple = ()
    cut_by: list[list[str]] | None = None  # (steps, n) sampling: "" | "top_k" | "top_p" per candidate
    sampled_probs: np.ndarray | None = None  # (steps, n) float32 sampling: the probabilities drawn from

    @property
    def n_steps(self) -> int:
        return int(self.query.shape[0])

    @property
    def n_layers(self) -> int:
        return int(self.self_pattern.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.self_pattern.shape[1])

    @property
    def nbytes(self) -> int:
        arrays = (self.self_pattern, self.self_allowed, self.k_cache, self.v_cache, self.top_ids,
                  self.top_probs, self.query, self.chosen_ids, self.chosen_probs)
        return sum(a.nbytes for a in arrays) + (0 if self.cross_pattern is None else self.cross_pattern.nbytes)


def decoder_layers(info) -> int:
    get = info.get if isinstance(info, dict) else (lambda k, d=None: getattr(info, k, d))
    return int(get("n_decoder_layers") or 0) if get("kind") == "encoder-decoder" else int(get("n_layers"))


def hook_names(info) -> list[str]:
    """The hooks a trace keeps: every decoder layer's self-attention K, V, weights and mask, and
    (seed) its cross-attention weights."""
    kind = info["kind"] if isinstance(info, dict) else info.kind
    names = []
    for i in range(decoder_layers(info)):
        a = f"decoder.blocks.{i}"
        names += [f"{a}.self_attn.hook_{h}" for h in ("k", "v", "mask", "pattern")]
        if kind == "encoder-decoder":
            names.append(f"{a}.cross_attn.hook_pattern")
    return names


def max_new_tokens_for(info) -> int | None:
    """The app's bound on new tokens: DECODER_MAX_NEW_TOKENS for a decoder-only model; None (the
    model's own default: source length + 8) for the seed encoder–decoder."""
    kind = info["kind"] if isinstance(info, dict) else info.kind
    return DECODER_MAX_NEW_TOKENS if kind == "decoder" else None


def _np(x) -> np.ndarray:
    return x.detach().cpu().float().numpy() if x.dtype.is_floating_point else x.detach().cpu().numpy()


def trace_data(m, text: str, *, max_new_tokens: int | None = None, temperature: float = 0.0,
               top_k: int | None = None, top_p: float | None = None, seed: int = 0) -> TraceData:
    """Decode ``text`` with ``m.generate_with_cache`` (greedy; ``temperature > 0`` samples, with
    ``top_k``, ``top_p`` and ``seed`` as there) and keep what the Decoding view draws.

    Raises TypeError for an encoder-only model (it has no decoder that writes text)."""
    info = m.info
    if info.kind not in DECODER_KINDS:
        raise TypeError(f"{info.name} is an {info.kind} model: the Decoding view is for models with a "
                        f"decoder (seed, seed-sort, smollm2)")
    limit = max_new_tokens if max_new_tokens is not None else max_new_tokens_for(info)
    sampling = (float(temperature), top_k, top_p, int(seed)) if temperature else ()
    tr = m.generate_with_cache([text], limit, names=hook_names(info),
                               **(dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
                                  if sampling else {}))
    n_layers = decoder_layers(info)
    tokens = list(tr.decoder_tokens[0])
    T = len(tokens)
    query = np.asarray(tr.query, dtype=np.int64)  # (steps,)
    H, n_kv = int(info.n_heads), int(info.n_kv_heads or info.n_heads)
    group = max(1, H // n_kv)
    pattern = np.full((n_layers, H, T, T), np.nan, dtype=np.float32)
    allowed = np.zeros((T, T), dtype=bool)
    P1 = 0
    pre = "decoder.blocks.{}.self_attn.hook_{}"
    if tr.prompt and pre.format(0, "pattern") in tr.prompt:  # a decoder-only prompt's rows, read at once
        P1 = int(tr.prompt[pre.format(0, "pattern")].shape[-2])
        allowed[:P1, :P1] = _np(tr.prompt[pre.format(0, "mask")][0, 0])
        for i in range(n_layers):
            pattern[i, :, :P1, :P1] = _np(tr.prompt[pre.format(i, "pattern")][0])
    for t, step in enumerate(tr.steps):
        q = int(query[t])
        allowed[q, : q + 1] = _np(step[pre.format(0, "mask")][0, 0, 0])
        for i in range(n_layers):
            pattern[i, :, q, : q + 1] = _np(step[pre.format(i, "pattern")][0, :, 0])
    upper = ~np.tril(np.ones((T, T), dtype=bool))
    pattern[:, :, upper] = np.nan  # later keys do not exist yet at that row
    last = tr.steps[-1]
    k = np.stack([_np(last[pre.format(i, "k")][0, ::group]) for i in range(n_layers)])  # (L, n_kv, T-1, hs)
    v = np.stack([_np(last[pre.format(i, "v")][0, ::group]) for i in range(n_layers)])
    cross = None
    if info.kind == "encoder-decoder":
        S = int(last["decoder.blocks.0.cross_attn.hook_pattern"].shape[-1])
        cross = np.full((n_layers, H, T, S), np.nan, dtype=np.float32)
        for t, step in enumerate(tr.steps):
            for i in range(n_layers):
                cross[i, :, int(query[t])] = _np(step[f"decoder.blocks.{i}.cross_attn.hook_pattern"][0, :, 0])
    eos = getattr(m.tokenizer, "eos_id", None)
    finished = bool(tr.token_ids[0]) and eos is not None and tr.token_ids[0][-1] == eos
    return TraceData(
        text=text, kind=info.kind, input_tokens=list(tr.input_tokens[0]), tokens=tokens, query=query,
        n_prompt_rows=P1, self_pattern=pattern, self_allowed=allowed,
        k_cache=np.ascontiguousarray(k), v_cache=np.ascontiguousarray(v), kv_group=group, cross_pattern=cross,
        top_ids=np.stack([_np(s.ids[0]) for s in tr.top]).astype(np.int32),
        top_probs=np.stack([_np(s.probs[0]) for s in tr.top]).astype(np.float32),
        top_tokens=[list(s.tokens[0]) for s in tr.top],
        chosen_ids=np.asarray([int(s.chosen[0]) for s in tr.top], dtype=np.int32),
        chosen_probs=np.asarray([float(s.chosen_prob[0]) for s in tr.top], dtype=np.float32),
        chosen_tokens=[s.chosen_token[0] for s in tr.top], generated=tr.generated[0], finished=finished,
        max_new_tokens=int(limit if limit is not None else min(len(tr.input_tokens[0]) + 8, info.max_len - 1)),
        sampling=sampling, cut_by=[list(s.cut_by[0]) for s in tr.top] if sampling else None,
        sampled_probs=np.stack([_np(s.sampled_from[0]) for s in tr.top]).astype(np.float32) if sampling else None)
