"""Long inputs (issue 34): a run that keeps what grows with T (q and k per layer), never T×T, and the
patterns and summaries rebuilt from it on demand, a block of queries at a time.

    lr = long_run(m, text, max_tokens=4096)     # one forward pass of the input-side stack, no readout
    lr.q[layer]   (nh, T, hs)   lr.k[layer]   (nkv, T, hs)      # the hooks' q and k (after rotary)
    rows = pattern_rows(lr, layer, head, q0, q1)                # (q1-q0, T): that head's softmax rows
    grid = block_grid(lr, layer, head, cells=512)               # (n, n) the largest weight of each block
    s = summaries(lr)                                           # per layer, head and query position

Every number is the model's own: the scores are made as ``parts.Attention.forward`` makes them (the
same scale, applied to q when it is a power of two, the same soft-cap), the mask is the stack's rule
(causal, and the sliding window on the layers that use it), and a row's softmax runs over every key
that row may see. ``tests/test_long.py`` checks the rows against ``run_with_cache``'s ``hook_pattern``.

What is held: q and k of every layer, (nh + nkv)·T·hs floats a layer (Gemma 3 270M, the one fetched
here, at 4,096 tokens: 18 × (4 + 1) × 4,096 × 256 × 4 B = 377 MB), against 18 × 4 × 4,096² × 4 B = 4.8
GB for the patterns alone. A pattern or summary holds one block of queries (``ROWS``) × the keys it may
see × the heads of one layer at a time. The forward pass itself still makes each layer's (nh, T, T)
scores once, as any pass does; they are dropped when the layer is done. The readout (T × vocabulary
logits: 4.3 GB for Gemma 3 at 4,096 tokens) is never computed.

Not for a stack with a learned position bias added to the scores (T5): ``LongInputError`` says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from model.runtime import memory
from model.runtime.errors import RunTooLarge
from model.runtime.hooks import hooks
from model.runtime.limits import check_texts, cut_to_limit

ROWS = 256  # queries per block: (nh, ROWS, T) floats at a time (Gemma 3 at 4,096 tokens: 16 MB)
MAX_LONG_TOKENS = 4096  # the most a long run takes (a host may set fewer: explorer/inputs.py)
REFERENCE_WINDOW = 512  # "inside the window" for a model without one: Gemma 3's window, for comparison


class LongInputError(ValueError):
    """A model or input the long view cannot take; the message says why and what to do, ``reason`` names
    the case ("position_bias", "not_parts", "empty", "bound") for a page that says it in its own words."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class LayerRule:
    """How one layer makes its scores and mask (read from its ``parts.Attention`` and block)."""

    scale: float
    scale_q: bool  # the scale multiplies q before the product (a power of two: exact either way)
    softcap: float  # 0: none
    causal: bool
    window: int  # keys a query sees, itself included; 0: every key the causal rule allows


@dataclass
class LongRun:
    """One text's run on the input-side stack, keeping q and k per layer."""

    name: str
    text: str  # as run (after any cut)
    stack: str  # "encoder" or "decoder"
    tokens: list[str]
    ids: list[int]
    q: list[torch.Tensor]  # per layer (nh, T, hs)
    k: list[torch.Tensor]  # per layer (nkv, T, hs): one per K/V head (the GQA repeat is not kept)
    rules: list[LayerRule]
    n_given: int  # tokens the text had before any cut
    limit: int  # the bound it was cut to
    window: int  # the model's sliding window (0: none)
    window_layers: tuple[int, ...] = field(default=())

    @property
    def T(self) -> int:
        return len(self.ids)

    @property
    def cut(self) -> bool:
        return self.n_given > self.T

    @property
    def n_layers(self) -> int:
        return len(self.q)

    @property
    def n_heads(self) -> int:
        return int(self.q[0].shape[0])

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.q, *self.k))

    def kv_head(self, head: int) -> int:
        return head // (self.n_heads // int(self.k[0].shape[0]))


def _stack(m):
    kind = m.info.kind
    name = "decoder" if kind == "decoder" else "encoder"
    stack = getattr(m, name, None)
    if stack is None or not hasattr(stack, "blocks"):
        raise LongInputError(f"{m.info.name} is not built from model/arch/parts.py's Stack; the long view "
                             f"needs its blocks", "not_parts")
    if getattr(stack, "position_bias", None) is not None:
        raise LongInputError(f"{m.info.name} adds a learned position bias to its scores (T5's relative "
                             f"buckets); the long view rebuilds patterns from q and k alone, so it does not "
                             f"take this model: choose a rotary or sinusoidal model", "position_bias")
    return name, stack


def _rules(stack) -> list[LayerRule]:
    f = stack.f
    out = []
    for block in stack.blocks:
        a = block.self_attn
        out.append(LayerRule(scale=float(a.scale), scale_q=bool(a.scale_q), softcap=float(a.softcap or 0.0),
                             causal=bool(stack.causal), window=int(f.window) if block.windowed else 0))
    return out


def token_count(m, text: str) -> int:
    """Tokens of ``text`` as the long run reads it (specials included)."""
    return len(m.tokenizer.encode(check_texts(text))[0].ids)


@torch.inference_mode()
def long_run(m, text: str, max_tokens: int = MAX_LONG_TOKENS) -> LongRun:
    """Run ``text`` (one sequence: line breaks are part of it) through the model's input-side stack
    (a decoder-only model's decoder, otherwise the encoder), keeping q and k of every layer's
    self-attention. Cut at a token boundary to ``max_tokens`` (at most the model's positions and
    ``MAX_LONG_TOKENS``); ``LongRun.cut`` says whether it was."""
    (text,) = check_texts(text)
    name, stack = _stack(m)
    limit = int(min(max_tokens, m.info.max_len, MAX_LONG_TOKENS))
    if limit < 1:
        raise LongInputError(f"max_tokens must be at least 1, not {max_tokens!r}", "bound")
    tok = m.tokenizer
    enc = tok.encode([text])[0]
    n_given = len(enc.ids)
    if not text.strip():
        raise LongInputError("the text is empty; type or load a text", "empty")
    if n_given > limit:
        text, _ = cut_to_limit(text, enc, tok, limit)
    encs, _ = m._tokens([text], keep_last=name == "encoder")
    ids, real = m._batch(encs)  # (1, T)
    rules = _rules(stack)
    kv = stack.blocks[0].self_attn.n_kv_heads
    nh = stack.blocks[0].self_attn.n_heads
    group = nh // kv
    check_memory(m.info, len(rules), nh, kv, ids.shape[1])
    # q and k of every layer, made before the forward pass and filled by its hooks. Copies made inside
    # it (clone) were carved out of the layer before's freed (nh, T, T) scores, so the next layer's
    # scores no longer fitted there and took new memory: with the app's malloc settings
    # (model/runtime/malloc.py: big blocks kept in the heap) SmolLM2 at 4,096 tokens peaked at 6.3 and
    # 17 GB instead of 2.5 (bench/results/long-20261128.txt).
    T, hs = ids.shape[1], stack.blocks[0].self_attn.d_head
    q_store = {i: torch.empty((nh, T, hs)) for i in range(len(stack.blocks))}
    k_store = {i: torch.empty((kv, T, hs)) for i in range(len(stack.blocks))}

    def keep(store, every):
        def save(x: torch.Tensor, hook: str) -> None:
            layer = int(hook.split(".")[2])
            store[layer].copy_(x[0, ::every] if every > 1 else x[0])  # (n, T, hs)
            filled.add((id(store), layer))
        return save

    filled: set = set()

    fns = {}
    for i in range(len(stack.blocks)):
        fns[f"{name}.blocks.{i}.self_attn.hook_q"] = keep(q_store, 1)
        fns[f"{name}.blocks.{i}.self_attn.hook_k"] = keep(k_store, group)
    with hooks(fns):
        if name == "decoder":
            m.decode(ids, real)
        else:
            m.encode(ids, real)
    n = len(stack.blocks)
    if len(filled) != 2 * n:  # every layer's q and k came through its hooks, or the run is not what it says
        raise RuntimeError(f"the long run saw q and k of {len(filled)} of {2 * n} layer hooks")
    return LongRun(name=m.info.name, text=text, stack=name, tokens=m.tokens_text(encs[0].ids), ids=list(encs[0].ids),
                   q=[q_store[i] for i in range(n)], k=[k_store[i] for i in range(n)], rules=rules,
                   n_given=n_given, limit=limit, window=int(stack.f.window or 0),
                   window_layers=tuple(i for i, r in enumerate(rules) if r.window))


def run_bytes(info, n_layers: int, nh: int, nkv: int, T: int) -> int:
    """Bytes a long run needs: q and k of every layer, kept, plus one layer's working memory (its
    (nh, T, T) scores, masked scores and pattern, the stream's copies and the feed-forward's hidden
    layer), with the allocator's room (model/runtime/memory.py's OVERHEAD). No logits: no readout."""
    kept = n_layers * (nh + nkv) * T * info.d_head * memory.FLOAT
    working = 3 * nh * T * T * memory.FLOAT + 16 * T * info.d_model * memory.FLOAT
    return int((kept + working) * memory.OVERHEAD)


def check_memory(info, n_layers: int, nh: int, nkv: int, T: int) -> int:
    """``run_bytes``; ``RunTooLarge`` before the run when it exceeds the memory budget."""
    need = run_bytes(info, n_layers, nh, nkv, T)
    allowed = memory.budget()
    if allowed is not None and need > allowed:
        raise RunTooLarge(f"a long run of {T} tokens on {info.name} needs about {need / 2**20:.0f} MB and "
                          f"{allowed / 2**20:.0f} MB may be used; shorten the text or set "
                          f"{memory.BUDGET_ENV}", estimate=need, budget=allowed)
    return need


def key_span(rule: LayerRule, T: int, q0: int, q1: int) -> tuple[int, int]:
    """The keys [k0, k1) any query in [q0, q1) may see under the layer's rule."""
    if not rule.causal:
        return 0, T
    return (max(0, q0 - rule.window + 1) if rule.window else 0), q1


def allowed(rule: LayerRule, q0: int, q1: int, k0: int, k1: int) -> torch.Tensor:
    """(q1-q0, k1-k0) bool: True where the rule lets the query see the key."""
    qi = torch.arange(q0, q1)[:, None]
    kj = torch.arange(k0, k1)[None, :]
    ok = torch.ones(q1 - q0, k1 - k0, dtype=torch.bool)
    if rule.causal:
        ok &= kj <= qi
        if rule.window:
            ok &= kj > qi - rule.window
    return ok


def _scores(lr: LongRun, layer: int, heads: slice | list[int], q0: int, q1: int, k0: int, k1: int) -> torch.Tensor:
    """(h, q1-q0, k1-k0) masked scores of the heads, as parts.Attention.forward makes them."""
    rule = lr.rules[layer]
    q = lr.q[layer][heads, q0:q1]  # (h, rows, hs)
    kv = torch.tensor([lr.kv_head(h) for h in range(lr.n_heads)])[heads]
    k = lr.k[layer][kv, k0:k1]  # (h, keys, hs)
    if rule.scale == 1.0:
        s = q @ k.transpose(-2, -1)
    elif rule.scale_q:
        s = (q * rule.scale) @ k.transpose(-2, -1)
    else:
        s = (q @ k.transpose(-2, -1)) * rule.scale
    if rule.softcap:
        s = torch.tanh(s / rule.softcap) * rule.softcap
    ok = allowed(rule, q0, q1, k0, k1)
    return s.masked_fill(~ok, float("-inf"))


def _softmax(s: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(s, dim=-1)
    return torch.nan_to_num(p, nan=0.0)  # a row with no key it may see (none in one sequence): zeros


@torch.inference_mode()
def pattern_rows(lr: LongRun, layer: int, head: int, q0: int, q1: int) -> np.ndarray:
    """(q1-q0, T) float32: the head's attention weights for queries q0..q1-1, every key (0 where the
    mask hides it)."""
    T = lr.T
    q0, q1 = max(0, q0), min(T, q1)
    out = np.zeros((max(0, q1 - q0), T), dtype=np.float32)
    for a in range(q0, q1, ROWS):
        b = min(q1, a + ROWS)
        k0, k1 = key_span(lr.rules[layer], T, a, b)
        out[a - q0: b - q0, k0:k1] = _softmax(_scores(lr, layer, [head], a, b, k0, k1))[0].numpy()
    return out


def region(lr: LongRun, layer: int, head: int, q0: int, q1: int, k0: int, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights, allowed) of the cells [q0, q1) × [k0, k1), each (rows, cols); weights exact."""
    w = pattern_rows(lr, layer, head, q0, q1)[:, k0:k1]
    ok = allowed(lr.rules[layer], q0, q1, k0, k1).numpy()
    return w, ok


def grid_cells(T: int, cells: int) -> tuple[int, int]:
    """(block, n): queries and keys per drawn cell (1 when T fits), and cells per side."""
    block = max(1, -(-T // max(1, cells)))
    return block, -(-T // block)


@torch.inference_mode()
def block_grid(lr: LongRun, layer: int, head: int, cells: int = 512) -> tuple[np.ndarray, int]:
    """((n, n) float32, block): the largest weight in each block × block square of the head's pattern
    (NaN where the mask hides every cell of the square), made a row of squares at a time."""
    T = lr.T
    block, n = grid_cells(T, cells)
    grid = np.full((n, n), np.nan, dtype=np.float32)
    rule = lr.rules[layer]
    pad = n * block - T
    step = max(block, (ROWS // block) * block)
    for a in range(0, T, step):
        b = min(T, a + step)
        k0, k1 = key_span(rule, T, a, b)
        p = _softmax(_scores(lr, layer, [head], a, b, k0, k1))[0]  # (rows, keys)
        ok = allowed(rule, a, b, k0, k1)
        full = torch.full((b - a, T + pad), float("-inf"))
        full[:, k0:k1] = torch.where(ok, p, torch.tensor(float("-inf")))
        if b == T and pad:
            full = torch.cat([full, torch.full((pad, T + pad), float("-inf"))])
        rows = full.shape[0] // block
        m = full.reshape(rows, block, n, block).amax(dim=(1, 3))  # (rows, n)
        grid[a // block: a // block + rows] = torch.where(torch.isinf(m), torch.tensor(float("nan")), m).numpy()
    return grid, block


@dataclass
class Summaries:
    """Per layer, head and query position (each (L, H, T) float32): the weight on the first token,
    the mean distance from query to key (Σ_k p·|q − k|), and the weight on the ``window`` keys up to the
    query (itself included)."""

    first: np.ndarray
    distance: np.ndarray
    inside: np.ndarray
    window: int  # the window "inside" counts (the model's own, else REFERENCE_WINDOW)
    own_window: bool  # the model has that sliding window
    window_layers: tuple[int, ...]  # layers that use it
    causal: bool


@torch.inference_mode()
def summaries(lr: LongRun, window: int | None = None) -> Summaries:
    """Every head's summaries, a block of ``ROWS`` queries × the keys it may see × one layer's heads at
    a time (never a layer's whole T×T)."""
    L, H, T = lr.n_layers, lr.n_heads, lr.T
    W = int(window or lr.window or REFERENCE_WINDOW)
    first, dist, inside = (np.zeros((L, H, T), dtype=np.float32) for _ in range(3))
    heads = list(range(H))
    for layer in range(L):
        rule = lr.rules[layer]
        for a in range(0, T, ROWS):
            b = min(T, a + ROWS)
            k0, k1 = key_span(rule, T, a, b)
            p = _softmax(_scores(lr, layer, heads, a, b, k0, k1)).double()  # (H, rows, keys)
            qi = torch.arange(a, b, dtype=torch.float64)[:, None]
            kj = torch.arange(k0, k1, dtype=torch.float64)[None, :]
            gap = (qi - kj).abs()  # (rows, keys)
            first[layer, :, a:b] = (p[..., 0] if k0 == 0 else torch.zeros(H, b - a, dtype=torch.float64)).numpy()
            dist[layer, :, a:b] = (p * gap).sum(-1).numpy()
            near = (kj <= qi) & (kj > qi - W)
            inside[layer, :, a:b] = (p * near).sum(-1).numpy()
    return Summaries(first, dist, inside, W, bool(lr.window) and W == lr.window, lr.window_layers,
                     all(r.causal for r in lr.rules))


def nonzero_cells(lr: LongRun, layer: int, head: int):
    """(query, key, weight) arrays of every nonzero weight of the head, a block of queries at a time
    (a generator: the CSV of a 4,096-token head is written without holding it)."""
    T = lr.T
    for a in range(0, T, ROWS):
        b = min(T, a + ROWS)
        rows = pattern_rows(lr, layer, head, a, b)
        qi, kj = np.nonzero(rows)
        yield qi + a, kj, rows[qi, kj]
