"""The parts every family is built from (model/arch/family.py says which): norms, feed-forwards,
positions, the attention written out step by step, three kinds of block, and a stack.

    Norm        LayerNorm | RMSNorm | Gemma's RMSNorm with (1 + w)
    FeedForward act(x W_in) W_out, or gated: act(x W_gate) * (x W_in) W_out (SwiGLU, GeGLU)
    Rotary      cos/sin tables for positions: half-split or interleaved pairs, possibly partial
    RelativeBias T5's learned bias per head and bucket of distance
    Attention   q, k, v → [QK-norm] → [rotary] → q·kᵀ·scale → [softcap] → [+ position bias]
                → mask (−inf) → softmax → ·v → W_O, every step through a HookPoint
    PostNormBlock x = Norm(x + f(x))         (2017, BERT, Marian)
    PreNormBlock  x = x + f(Norm(x))         (GPT-2, Llama, T5)
    SandwichBlock x = x + Norm(f(Norm(x)))   (Gemma)
    Stack       embeddings, positions, blocks, final norm

Shapes: B batch, T positions (Tq queries, Tk keys), d model width, nh heads, nkv key/value
heads, hs head width. Nothing here keeps per-run state: a run's masks, tables and key/value
caches are made by the caller and passed in.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from model.arch.family import Family, Rope
from model.arch.positional import sinusoidal
from model.runtime.hooks import HookPoint, active

def embedding(n: int, d: int) -> nn.Embedding:
    """``nn.Embedding(n, d)``; on the meta device (a loader's empty model, filled from a file next)
    without its N(0, 1) start: torch's meta ``normal_`` imports torch._dynamo, 1.3-1.4 CPU-s on the
    first load of every process (the app's, a notebook's), for values that are thrown away."""
    if torch.empty(0).is_meta:  # the default device is meta (``with torch.device("meta")``)
        return nn.Embedding(n, d, _weight=torch.empty(n, d))
    return nn.Embedding(n, d)


# --- masks and the key/value cache --------------------------------------------------------------
def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """True where the key is a real token. ids: (B, T) -> (B, 1, 1, T)."""
    return (ids != pad_id)[:, None, None, :]


def causal_mask(t: int, device=None) -> torch.Tensor:
    """The subsequent mask: query i may see keys 0..i. -> (1, 1, T, T)."""
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()[None, None]


class Mask:
    """A boolean attention mask, True where attention is allowed, and what the attention derives
    from it: whether it allows every key, the additive form (0 / −inf), the rows with no allowed
    key. A stack wraps its mask once per forward pass (``Mask.of``) and every layer reads these
    from it, computed on first use: the 30 layers of SmolLM2 share one mask, so they share the
    passes over it too. Made per call, never kept on a module (many threads run one model).
    """

    def __init__(self, allowed: torch.Tensor) -> None:
        self.allowed = allowed  # broadcastable to (B, 1, Tq, Tk)
        self._everywhere: bool | None = None
        self._bias: dict[torch.dtype, torch.Tensor] = {}
        self._empty: torch.Tensor | None = None
        self._empty_known = False

    @classmethod
    def of(cls, mask: "torch.Tensor | Mask | None") -> "Mask | None":
        return mask if mask is None or isinstance(mask, Mask) else cls(mask)

    @property
    def everywhere(self) -> bool:
        """Every key allowed for every query: there is nothing to apply."""
        if self._everywhere is None:
            self._everywhere = bool(self.allowed.all())
        return self._everywhere

    def bias(self, dtype: torch.dtype) -> torch.Tensor:
        """0 where allowed, −inf elsewhere (the mask's own shape): scores + bias = the masked scores."""
        if dtype not in self._bias:
            self._bias[dtype] = torch.zeros(self.allowed.shape, dtype=dtype,
                                            device=self.allowed.device).masked_fill_(~self.allowed, float("-inf"))
        return self._bias[dtype]

    @property
    def empty(self) -> torch.Tensor | None:
        """(.., Tq, 1) True for a query with no allowed key (its pattern row is zeros); None if none."""
        if not self._empty_known:
            e = ~self.allowed.any(-1, keepdim=True)
            self._empty, self._empty_known = (e if bool(e.any()) else None), True
        return self._empty


class KVCache:
    """The keys and values one attention layer has computed so far in one decoding call.

    Incremental decoding runs the decoder on the new token only; its attention needs the keys and
    values of every earlier token, which this cache keeps. It belongs to the call (the caller makes
    one per layer and drops it afterwards), never to the module: many threads may decode with the
    same model at once. Keys and values are kept as they enter the dot product (after rotary,
    repeated per query head), in a buffer that doubles when full; ``append`` returns views of it,
    so what a hook saw at an earlier step stays valid (entries already written never change).
    ``fixed`` (cross-attention): the keys/values of the encoder output are computed once, at the
    first step, and reused as they are.
    """

    def __init__(self, capacity: int = 0, fixed: bool = False) -> None:
        self.capacity, self.fixed = capacity, fixed
        self.k: torch.Tensor | None = None  # (B, nh, capacity, hs)
        self.v: torch.Tensor | None = None  # (B, nh, capacity, hs)
        self.length = 0  # positions written so far

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v (B, nh, T, hs) after the ones so far; return all of them (B, nh, length, hs)."""
        B, nh, T, hs = k.shape
        if self.fixed:  # written once, kept as it is
            self.k, self.v, self.length = k, v, T
            return k, v
        end = self.length + T
        if self.k is None or end > self.k.shape[2]:  # grow: a new buffer, the old one is left as is
            size = max(self.capacity, 2 * end)
            k_buf, v_buf = k.new_empty(B, nh, size, hs), v.new_empty(B, nh, size, hs)
            if self.k is not None:
                k_buf[:, :, : self.length] = self.k[:, :, : self.length]
                v_buf[:, :, : self.length] = self.v[:, :, : self.length]
            self.k, self.v = k_buf, v_buf
        self.k[:, :, self.length : end] = k
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]


ACT = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


class Norm(nn.Module):
    """LayerNorm ("layer"), RMSNorm ("rms": x / rms(x) · w) or Gemma's ("rms1p": x / rms(x) · (1 + w))."""

    def __init__(self, d: int, kind: str, eps: float) -> None:
        super().__init__()
        self.d, self.kind, self.eps = d, kind, eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if kind == "layer" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "layer":
            return F.layer_norm(x, (self.d,), self.weight, self.bias, self.eps)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * (1.0 + self.weight) if self.kind == "rms1p" else x * self.weight


class FeedForward(nn.Module):
    """act(x W_in) W_out, or gated: (act(x W_gate) * x W_in) W_out."""

    def __init__(self, d: int, d_ff: int, act: str, gated: bool, bias: bool) -> None:
        super().__init__()
        self.act = ACT[act]
        self.W_gate = nn.Linear(d, d_ff, bias=bias) if gated else None
        self.W_in = nn.Linear(d, d_ff, bias=bias)  # W_up of a gated feed-forward
        self.W_out = nn.Linear(d_ff, d, bias=bias)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        if self.W_gate is None:
            return self.act(self.W_in(x))  # (B, T, d_ff)
        return self.act(self.W_gate(x)) * self.W_in(x)  # (B, T, d_ff)

    def project(self, h: torch.Tensor) -> torch.Tensor:
        return self.W_out(h)  # (B, T, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(self.hidden(x))


def _adjacent(parts: list[torch.Tensor]) -> torch.Tensor | None:
    """The one tensor ``parts`` are consecutive row blocks of (same storage and strides, each
    starting where the one before ends), as a view; None if they are not."""
    first = parts[0]
    at = first.storage_offset()
    for t in parts:
        if t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr() or t.stride() != first.stride() \
                or t.shape[1:] != first.shape[1:] or t.storage_offset() != at:
            return None
        at += t.shape[0] * t.stride(0)
    return first.as_strided((sum(t.shape[0] for t in parts), *first.shape[1:]), first.stride(), first.storage_offset())


def numpy_owned(shape: tuple[int, ...]) -> torch.Tensor:
    """An empty float32 tensor in memory numpy allocates: numpy asks the kernel for huge pages from
    4 MB on (model/files/float_cache.py says why that matters to a large weight)."""
    return torch.from_numpy(np.empty(shape, dtype=np.float32))


# --- positions ---------------------------------------------------------------------------------
def sinusoidal_table(f: Family) -> torch.Tensor:
    """The family's sinusoidal table (max_len, d): interleaved (the paper) or split halves (Marian)."""
    make = sinusoidal_split if f.sinusoidal_split else sinusoidal
    return make(f.max_len, f.d_model, f.sinusoidal_base)


def sinusoidal_split(max_len: int, d: int, base: float = 10000.0) -> torch.Tensor:
    """Marian's table: sin(pos·θ_i) in the first half of the columns, cos(pos·θ_i) in the second
    (the paper interleaves them: positional.sinusoidal). (max_len, d) float32."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    angle = pos / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (T, ceil(d/2))
    return torch.cat([angle.sin(), angle.cos()[:, : d // 2]], dim=-1).float()  # (T, d)


def rope_frequencies(rope: Rope, dims: int) -> torch.Tensor:
    """θ_i = base^(-2i/dims), i < dims/2, after the rope's scaling (float64)."""
    theta = 1.0 / rope.base ** (torch.arange(0, dims, 2, dtype=torch.float64) / dims)
    if rope.scaling == "linear":
        return theta / rope.factor
    if rope.scaling == "llama3":  # long wavelengths slowed by factor, short kept, a smooth ramp between
        wavelen = 2 * math.pi / theta
        low, high = rope.original_max_len / rope.low_freq_factor, rope.original_max_len / rope.high_freq_factor
        smooth = (rope.original_max_len / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
        slowed = torch.where(wavelen > low, theta / rope.factor, theta)
        mid = (wavelen >= high) & (wavelen <= low)
        return torch.where(mid, (1 - smooth) * slowed / rope.factor + smooth * slowed, slowed)
    return theta


class Rotary:
    """The rotation of one run's positions: ``apply(x)`` rotates the first ``dims`` of each head.

    Half-split ("rotate half", Hugging Face's layout): pairs (x_i, x_{i+dims/2}); interleaved:
    pairs (x_{2i}, x_{2i+1}). Made per call (positions differ per run), never kept on a module."""

    def __init__(self, positions: torch.Tensor, rope: Rope, dims: int, interleaved: bool = False) -> None:
        angle = positions.to(torch.float64)[..., None] * rope_frequencies(rope, dims)  # (.., T, dims/2)
        angle = angle.repeat_interleave(2, dim=-1) if interleaved else torch.cat([angle, angle], dim=-1)
        self.cos, self.sin = angle.cos().float(), angle.sin().float()  # (.., T, dims)
        if self.cos.dim() == 3:  # per-sentence positions (B, T, dims): the same for every head
            self.cos, self.sin = self.cos[:, None], self.sin[:, None]  # (B, 1, T, dims)
        self.dims, self.interleaved = dims, interleaved

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, n, T, hs) -> the same with its first ``dims`` rotated by each position's angles."""
        r, rest = x[..., : self.dims], x[..., self.dims:]
        if self.interleaved:
            turned = torch.stack([-r[..., 1::2], r[..., 0::2]], dim=-1).flatten(-2)  # (-x1, x0, -x3, x2, ..)
        else:
            half = self.dims // 2
            turned = torch.cat([-r[..., half:], r[..., :half]], dim=-1)  # (-x_{h..}, x_{..h})
        r = r * self.cos + turned * self.sin
        return r if rest.shape[-1] == 0 else torch.cat([r, rest], dim=-1)


def relative_buckets(relative: torch.Tensor, bidirectional: bool, n_buckets: int, max_distance: int) -> torch.Tensor:
    """T5's bucket of each relative position (key − query): exact for small distances, then
    logarithmic up to max_distance; a bidirectional stack gives later keys buckets of their own."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        n_buckets //= 2
        buckets += (relative > 0).long() * n_buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)  # later keys (masked anyway) share bucket 0
    exact = n_buckets // 2
    far = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                   * (n_buckets - exact)).long()
    far = far.clamp(max=n_buckets - 1)
    return buckets + torch.where(distance < exact, distance, far)


class RelativeBias(nn.Module):
    """T5: a learned scalar per head and bucket of distance, added to every layer's scores."""

    def __init__(self, n_buckets: int, n_heads: int, max_distance: int, bidirectional: bool) -> None:
        super().__init__()
        self.embed = embedding(n_buckets, n_heads)
        self.n_buckets, self.max_distance, self.bidirectional = n_buckets, max_distance, bidirectional

    def forward(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """q_pos (Tq,), k_pos (Tk,) -> (1, nh, Tq, Tk)."""
        bucket = relative_buckets(k_pos[None, :] - q_pos[:, None], self.bidirectional,
                                  self.n_buckets, self.max_distance)  # (Tq, Tk)
        return self.embed(bucket).permute(2, 0, 1)[None]  # (1, nh, Tq, Tk)


# --- attention ---------------------------------------------------------------------------------
class Attention(nn.Module):
    """Multi-head attention, written out; optional QK-norm, rotary, softcap, position bias, GQA."""

    def __init__(self, f: Family, scale: float, *, position_bias: bool = False) -> None:
        super().__init__()
        d, self.n_heads, self.n_kv_heads, self.d_head = f.d_model, f.n_heads, f.n_kv_heads, f.d_head
        self.scale, self.softcap = scale, f.attn_softcap
        self.scale_q = scale > 0 and math.frexp(scale)[0] == 0.5  # a power of two: see forward
        self.W_Q = nn.Linear(d, f.n_heads * f.d_head, bias=f.qkv_bias)
        self.W_K = nn.Linear(d, f.n_kv_heads * f.d_head, bias=f.qkv_bias)
        self.W_V = nn.Linear(d, f.n_kv_heads * f.d_head, bias=f.qkv_bias)
        self.W_O = nn.Linear(f.n_heads * f.d_head, d, bias=f.out_bias)
        self.q_norm = Norm(f.d_head, f.norm, f.norm_eps) if f.qk_norm else None
        self.k_norm = Norm(f.d_head, f.norm, f.norm_eps) if f.qk_norm else None
        if f.qk_norm:
            self.hook_q_normed = HookPoint()  # (B, nh, Tq, hs) Norm(q), before rotary
            self.hook_k_normed = HookPoint()  # (B, nkv, Tk, hs) Norm(k), before rotary and the GQA repeat
        self.hook_q = HookPoint()  # (B, nh, Tq, hs)
        self.hook_k = HookPoint()  # (B, nh, Tk, hs)
        self.hook_v = HookPoint()  # (B, nh, Tk, hs)
        self.hook_scores = HookPoint()  # (B, nh, Tq, Tk) q·kᵀ·scale
        if f.attn_softcap:
            self.hook_capped_scores = HookPoint()  # (B, nh, Tq, Tk) c·tanh(scores / c)
        if position_bias:
            self.hook_position_bias = HookPoint()  # (1, nh, Tq, Tk) added to the scores (T5)
        self.hook_mask = HookPoint()  # (B, 1, Tq, Tk) bool, True = allowed
        self.hook_masked_scores = HookPoint()  # (B, nh, Tq, Tk) −inf where not allowed
        self.hook_pattern = HookPoint()  # (B, nh, Tq, Tk)
        self.hook_z = HookPoint()  # (B, nh, Tq, hs)
        self.hook_out = HookPoint()  # (B, Tq, d)
        self.qkv_weight: torch.Tensor | None = None  # set by fuse(): W_Q, W_K, W_V as one matrix
        self.qkv_bias: torch.Tensor | None = None

    def fuse(self) -> None:
        """One matrix product for q, k and v in self-attention, as GPT-2's ``c_attn`` does: W_Q, W_K
        and W_V become views of one ((nh + 2 nkv)·hs, d) weight, so the numbers and the parameters'
        names stay what they were. Three products of a third the width cost more than one (GPT-2 at
        128 tokens: 216 products where transformers makes 144, 5 % more time in them, by the torch
        profiler). The seed rebuilt from the parts keeps three: its weights are the seed's."""
        linears = (self.W_Q, self.W_K, self.W_V)
        weight = _adjacent([lin.weight.detach() for lin in linears])  # GPT-2's c_attn: already one
        if weight is None:
            weight = torch.cat([lin.weight.detach() for lin in linears], out=numpy_owned(  # ((nh + 2 nkv) hs, d)
                (sum(lin.weight.shape[0] for lin in linears), self.W_Q.weight.shape[1])))
        bias = None
        if self.W_Q.bias is not None:
            bias = _adjacent([lin.bias.detach() for lin in linears])
            if bias is None:
                bias = torch.cat([lin.bias.detach() for lin in linears])
        at = 0
        for lin in linears:
            n = lin.weight.shape[0]
            lin.weight = nn.Parameter(weight[at: at + n], requires_grad=False)
            if bias is not None:
                lin.bias = nn.Parameter(bias[at: at + n], requires_grad=False)
            at += n
        self.qkv_weight, self.qkv_bias = weight, bias

    def _heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, n, self.d_head).transpose(1, 2)  # (B, n, T, hs)

    def forward(self, x: torch.Tensor, mask: Mask, kv: torch.Tensor | None = None,
                rotary: Rotary | None = None, bias: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """x (B, Tq, d) queries; kv (B, Tk, d) keys/values (default x); mask: a ``Mask`` of
        (B or 1, 1, Tq or 1, Tk); rotary: the positions of x (and of kv: self-attention only);
        bias (1, nh, Tq, Tk) added to the scores; cache: this call's earlier keys/values."""
        B, Tq, _ = x.shape
        fused = None
        if self.qkv_weight is not None and kv is None:  # self-attention: q, k, v from one product
            n_q, n_kv = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
            fused = F.linear(x, self.qkv_weight, self.qkv_bias).split([n_q, n_kv, n_kv], dim=-1)
        q = self._heads(self.W_Q(x) if fused is None else fused[0], self.n_heads)  # (B, nh, Tq, hs)
        if self.q_norm is not None:
            q = self.hook_q_normed(self.q_norm(q))
        if rotary is not None:
            q = rotary.apply(q)
        if cache is not None and cache.fixed and cache.k is not None:
            k, v = cache.k, cache.v  # cross-attention: the encoder's keys/values, from the first step
        else:
            src = x if kv is None else kv
            k = self._heads(self.W_K(src) if fused is None else fused[1], self.n_kv_heads)  # (B, nkv, Tk, hs)
            v = self._heads(self.W_V(src) if fused is None else fused[2], self.n_kv_heads)  # (B, nkv, Tk, hs)
            if self.k_norm is not None:
                k = self.hook_k_normed(self.k_norm(k))
            if rotary is not None:
                k = rotary.apply(k)
            group = self.n_heads // self.n_kv_heads
            if group > 1:  # grouped-query attention: each K/V head serves `group` query heads
                k = k.repeat_interleave(group, dim=1)  # (B, nh, Tk, hs)
                v = v.repeat_interleave(group, dim=1)  # (B, nh, Tk, hs)
            if cache is not None:
                k, v = cache.append(k, v)  # (B, nh, Tk, hs): every key and value so far
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        Tk = k.shape[2]

        # The (B, nh, Tq, Tk) scores are made once and, where no hook can see them, scaled, masked and
        # softmaxed in place; out of place when autograd records the run.
        # A scale that is a power of two (head size 16, 64, 256; Gemma 3's 1/16) scales q instead:
        # (q·s)·kᵀ is q·kᵀ·s bit for bit (s only moves exponents), on hs/Tk of the numbers (Qwen-sized at
        # 512 tokens: one multiply of 14 × 512 × 64 instead of 14 × 512 × 512 per layer).
        watched = active()
        inplace = not (torch.is_grad_enabled() and q.requires_grad)
        if self.scale == 1.0:  # T5: no scale
            scores = q @ k.transpose(-2, -1)  # (B, nh, Tq, Tk)
        elif self.scale_q:
            scores = (q * self.scale) @ k.transpose(-2, -1)
        else:
            scores = q @ k.transpose(-2, -1)
            scores = scores.mul_(self.scale) if inplace else scores * self.scale
        scores = self.hook_scores(scores)
        owner = self.hook_scores.name  # the hook `scores` is the tensor of (None: a tensor of our own)
        if self.softcap:
            scores = self.hook_capped_scores(torch.tanh(scores / self.softcap) * self.softcap)
            owner = self.hook_capped_scores.name
        if bias is not None:
            scores, owner = scores + self.hook_position_bias(bias), None
        shown = mask.allowed.expand(B, 1, Tq, Tk)
        allowed = self.hook_mask(shown)  # (B, 1, Tq, Tk)
        # + 0 where allowed, + −inf elsewhere: the mask's additive form, made once per forward pass and
        # shared by the layers (Mask.bias); a where() per layer cost 2-3 % at 512 tokens
        additive = mask.bias(scores.dtype) if allowed is shown else Mask(allowed).bias(scores.dtype)
        free = inplace and owner not in watched
        masked = self.hook_masked_scores(scores.add_(additive) if free else scores + additive)
        if inplace and self.hook_masked_scores.name not in watched:  # nobody else holds `masked`
            pattern = torch.softmax(masked, dim=-1, out=masked)  # (B, nh, Tq, Tk)
        else:
            pattern = torch.softmax(masked, dim=-1)
        empty = mask.empty if allowed is shown else Mask(allowed).empty  # a hook may change the mask
        if empty is not None:  # a query with no allowed key (a pad of a left-padded prompt): zeros, not NaN
            pattern = pattern.masked_fill(empty, 0.0)
        pattern = self.hook_pattern(pattern)
        z = self.hook_z(pattern @ v)  # (B, nh, Tq, hs)
        z = z.transpose(1, 2).reshape(B, Tq, self.n_heads * self.d_head)  # (B, Tq, nh*hs)
        return self.hook_out(self.W_O(z))  # (B, Tq, d)


# --- blocks ------------------------------------------------------------------------------------
class Context:
    """What a block needs besides its input, for one call: masks, rotary, position bias, memory."""

    def __init__(self, mask: Mask, window_mask: Mask | None = None, rotary: Rotary | None = None,
                 rotary_local: Rotary | None = None, bias: torch.Tensor | None = None,
                 memory: torch.Tensor | None = None, cross_mask: Mask | None = None) -> None:
        self.mask, self.window_mask = mask, window_mask
        self.rotary, self.rotary_local = rotary, rotary_local
        self.bias, self.memory, self.cross_mask = bias, memory, cross_mask


class Block(nn.Module):
    """What every block has: self-attention, optional cross-attention, a feed-forward; ``layer``
    chooses its scale (GPT-2) and whether it uses the sliding window and the local rotary."""

    def __init__(self, f: Family, layer: int, cross: bool, windowed: bool) -> None:
        super().__init__()
        self.windowed, self.cross = windowed, cross
        self.scale = f.layer_scale(layer)
        self.relative = f.positions == "relative"

    def _self_attn(self, x: torch.Tensor, c: Context, cache: KVCache | None) -> torch.Tensor:
        mask = c.window_mask if self.windowed and c.window_mask is not None else c.mask
        rotary = c.rotary_local if self.windowed and c.rotary_local is not None else c.rotary
        return self.self_attn(x, mask, rotary=rotary, bias=c.bias, cache=cache)

    def _cross_attn(self, x: torch.Tensor, c: Context, cache: KVCache | None) -> torch.Tensor:
        return self.cross_attn(x, c.cross_mask, kv=c.memory, cache=cache)

    def _ffn(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_ffn_out(self.ffn.project(self.hook_ffn_hidden(self.ffn.hidden(x))))

    def _norm_then_attention(self, f: Family, attn: Attention) -> None:
        """The first parts of a block that norms what its attention reads (pre-norm, sandwich)."""
        self.hook_resid_pre = HookPoint()  # (B, T, d) the stream entering the block
        self.ln1 = Norm(f.d_model, f.norm, f.norm_eps)
        self.hook_attn_normed = HookPoint()  # (B, T, d) Norm(x): what the attention reads
        self.self_attn = attn

    def _norm_then_ffn(self, f: Family, ffn: FeedForward) -> None:
        """The feed-forward of a block that norms what it reads (pre-norm, sandwich)."""
        self.ln2 = Norm(f.d_model, f.norm, f.norm_eps)
        self.hook_ffn_normed = HookPoint()  # (B, T, d) Norm(x): what the feed-forward reads
        self.ffn = ffn
        self.hook_ffn_hidden = HookPoint()  # (B, T, d_ff)
        self.hook_ffn_out = HookPoint()  # (B, T, d)

    def _parts(self, f: Family) -> tuple[Attention, Attention | None, FeedForward]:
        return (Attention(f, self.scale, position_bias=self.relative),
                Attention(f, self.scale) if self.cross else None,  # T5: no position bias across stacks
                FeedForward(f.d_model, f.d_ff, f.act, f.gated, f.mlp_bias))


class PostNormBlock(Block):
    """x = Norm(x + Attn(x)); [x = Norm(x + CrossAttn(x, memory))]; x = Norm(x + FFN(x))."""

    def __init__(self, f: Family, layer: int, cross: bool = False, windowed: bool = False) -> None:
        super().__init__(f, layer, cross, windowed)
        attn, cross_attn, ffn = self._parts(f)
        self.hook_resid_pre = HookPoint()  # (B, T, d) the stream entering the block
        self.self_attn = attn
        self.hook_attn_sum = HookPoint()  # (B, T, d) x + Attn(x), before ln1
        self.ln1 = Norm(f.d_model, f.norm, f.norm_eps)
        self.hook_resid_mid = HookPoint()  # (B, T, d) after ln1
        if cross:
            self.cross_attn = cross_attn
            self.hook_cross_sum = HookPoint()  # (B, T, d) x + CrossAttn(x, memory), before ln_cross
            self.ln_cross = Norm(f.d_model, f.norm, f.norm_eps)
            self.hook_resid_mid_cross = HookPoint()  # (B, T, d) after ln_cross
        self.ffn = ffn
        self.hook_ffn_hidden = HookPoint()  # (B, T, d_ff)
        self.hook_ffn_out = HookPoint()  # (B, T, d)
        self.hook_ffn_sum = HookPoint()  # (B, T, d) x + FFN(x), before ln2
        self.ln2 = Norm(f.d_model, f.norm, f.norm_eps)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x: torch.Tensor, c: Context, kv: tuple | None = None) -> torch.Tensor:
        self_kv, cross_kv = kv or (None, None)
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(self.ln1(self.hook_attn_sum(x + self._self_attn(x, c, self_kv))))
        if self.cross:
            x = self.hook_resid_mid_cross(self.ln_cross(self.hook_cross_sum(x + self._cross_attn(x, c, cross_kv))))
        x = self.ln2(self.hook_ffn_sum(x + self._ffn(x)))
        return self.hook_resid_post(x)


class PreNormBlock(Block):
    """x = x + Attn(Norm(x)); [x = x + CrossAttn(Norm(x), memory)]; x = x + FFN(Norm(x))."""

    def __init__(self, f: Family, layer: int, cross: bool = False, windowed: bool = False) -> None:
        super().__init__(f, layer, cross, windowed)
        attn, cross_attn, ffn = self._parts(f)
        self._norm_then_attention(f, attn)
        self.hook_resid_mid = HookPoint()  # (B, T, d) x + Attn(Norm(x))
        if cross:
            self.ln_cross = Norm(f.d_model, f.norm, f.norm_eps)
            self.hook_cross_normed = HookPoint()  # (B, T, d) Norm(x): what the cross-attention reads
            self.cross_attn = cross_attn
            self.hook_resid_mid_cross = HookPoint()  # (B, T, d) x + CrossAttn(Norm(x), memory)
        self._norm_then_ffn(f, ffn)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x: torch.Tensor, c: Context, kv: tuple | None = None) -> torch.Tensor:
        self_kv, cross_kv = kv or (None, None)
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self._self_attn(self.hook_attn_normed(self.ln1(x)), c, self_kv))
        if self.cross:
            x = self.hook_resid_mid_cross(x + self._cross_attn(self.hook_cross_normed(self.ln_cross(x)), c, cross_kv))
        x = x + self._ffn(self.hook_ffn_normed(self.ln2(x)))
        return self.hook_resid_post(x)


class SandwichBlock(Block):
    """Gemma: x = x + Norm(Attn(Norm(x))); x = x + Norm(FFN(Norm(x)))."""

    def __init__(self, f: Family, layer: int, cross: bool = False, windowed: bool = False) -> None:
        super().__init__(f, layer, False, windowed)
        attn, _, ffn = self._parts(f)
        self._norm_then_attention(f, attn)
        self.ln1_post = Norm(f.d_model, f.norm, f.norm_eps)
        self.hook_attn_out_normed = HookPoint()  # (B, T, d) Norm(Attn(..)): what is added to the stream
        self.hook_resid_mid = HookPoint()  # (B, T, d)
        self._norm_then_ffn(f, ffn)
        self.ln2_post = Norm(f.d_model, f.norm, f.norm_eps)
        self.hook_ffn_out_normed = HookPoint()  # (B, T, d) Norm(FFN(..)): what is added to the stream
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x: torch.Tensor, c: Context, kv: tuple | None = None) -> torch.Tensor:
        self_kv, _ = kv or (None, None)
        x = self.hook_resid_pre(x)
        a = self._self_attn(self.hook_attn_normed(self.ln1(x)), c, self_kv)
        x = self.hook_resid_mid(x + self.hook_attn_out_normed(self.ln1_post(a)))
        h = self._ffn(self.hook_ffn_normed(self.ln2(x)))
        x = x + self.hook_ffn_out_normed(self.ln2_post(h))
        return self.hook_resid_post(x)


BLOCKS = {"post": PostNormBlock, "pre": PreNormBlock, "sandwich": SandwichBlock}


# --- a stack ----------------------------------------------------------------------------------
class Stack(nn.Module):
    """Token embedding (× embed_scale), positions, blocks, final norm: the encoder or the decoder."""

    def __init__(self, f: Family, n_layers: int, causal: bool, cross: bool = False) -> None:
        super().__init__()
        self.f, self.causal = f, causal
        d = f.d_model
        self.embed = embedding(f.vocab_size, d)
        self.type_embed = embedding(f.type_vocab_size, d) if f.type_vocab_size else None
        self.hook_embed = HookPoint()  # (B, T, d) token embeddings (× embed_scale; + token type 0)
        if f.positions == "learned":
            self.pos_embed = embedding(f.max_len + f.pos_offset, d)
        if f.positions == "sinusoidal":
            self.register_buffer("pe", sinusoidal_table(f), persistent=False)  # (max_len, d)
        if f.positions in ("learned", "sinusoidal"):
            self.hook_pos_embed = HookPoint()  # (1, T, d) the positions' vectors
        self.ln_embed = Norm(d, f.norm, f.norm_eps) if f.embed_norm else None
        self.position_bias = (RelativeBias(f.relative_buckets, f.n_heads, f.relative_max_distance,
                                           bidirectional=not causal)
                              if f.positions == "relative" else None)
        windowed = [causal and i < len(f.window_layers) and f.windowed(i) for i in range(n_layers)]
        self.blocks = nn.ModuleList(BLOCKS[f.placement](f, i, cross, windowed[i]) for i in range(n_layers))
        self.ln_final = Norm(d, f.norm, f.norm_eps) if f.final_norm else None

    def embed_tokens(self, ids: torch.Tensor, start: int = 0, positions: torch.Tensor | None = None,
                     vectors: torch.Tensor | None = None) -> torch.Tensor:
        """ids (B, T) holding positions start..start+T-1, or each sentence's own ``positions`` (B, T)
        (a left-padded batch) -> the stream entering block 0 (B, T, d). ``vectors`` (B, T, d): the
        tokens' embedding rows when the caller has them (training's sampled softmax: model/train.py)."""
        f, T = self.f, ids.shape[1]
        pos = torch.arange(start, start + T)[None] if positions is None else positions  # (1 or B, T)
        x = self.embed(ids) if vectors is None else vectors
        if f.embed_scale != 1.0:
            x = x * torch.tensor(f.embed_scale, dtype=x.dtype)
        if self.type_embed is not None:  # one sentence per row: every token is of type 0
            x = x + self.type_embed.weight[0]
        x = self.hook_embed(x)  # (B, T, d)
        if f.positions == "learned":
            x = x + self.hook_pos_embed(self.pos_embed(pos + f.pos_offset))  # (1 or B, T, d)
        elif f.positions == "sinusoidal":
            x = x + self.hook_pos_embed(self.pe[pos])  # (1 or B, T, d)
        return x if self.ln_embed is None else self.ln_embed(x)

    def context(self, real: torch.Tensor, q_cols: torch.Tensor, positions: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, memory_real: torch.Tensor | None = None) -> Context:
        """The masks, rotary tables and position bias of one call.

        real (B, Tk) True for real key tokens; q_cols (Tq,) the key columns the queries sit at
        (0..T-1, or the new ones of a decoding step); positions (B, Tq) each query's position
        (rotary; default its column); memory (B, S, d) and memory_real (B, S): cross-attention."""
        f, Tk = self.f, real.shape[1]
        k_cols = torch.arange(Tk)
        allowed = real[:, None, None, :]  # (B, 1, 1, Tk) padding
        if self.causal:
            allowed = allowed & (k_cols[None, :] <= q_cols[:, None])[None, None]  # (B, 1, Tq, Tk)
        window = None
        if self.causal and f.window and any(b.windowed for b in self.blocks):
            near = (k_cols[None, :] > q_cols[:, None] - f.window)[None, None]  # (1, 1, Tq, Tk)
            window = Mask(allowed & near)
        rotary = rotary_local = None
        if f.positions == "rotary":
            pos = q_cols if positions is None else positions
            dims = f.rope_dims or f.d_head
            rotary = Rotary(pos, f.rope, dims, f.rope_interleaved)
            if f.rope_local is not None:
                rotary_local = Rotary(pos, f.rope_local, dims, f.rope_interleaved)
        bias = None if self.position_bias is None else self.position_bias(q_cols, k_cols)  # (1, nh, Tq, Tk)
        cross_mask = None if memory_real is None else Mask(memory_real[:, None, None, :])
        return Context(Mask(allowed), window, rotary, rotary_local, bias, memory, cross_mask)

    def forward(self, x: torch.Tensor, c: Context, kv: list | None = None) -> torch.Tensor:
        """x (B, T, d) the embedded tokens -> the last block's stream (B, T, d), before ln_final."""
        for i, block in enumerate(self.blocks):
            x = block(x, c, None if kv is None else kv[i])
        return x

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """The final norm, if the family has one."""
        return x if self.ln_final is None else self.ln_final(x)

    def new_kv(self, capacity: int = 0) -> list[tuple[KVCache, KVCache]]:
        """Empty key/value caches for one decoding call: per block, (self-attention, cross-attention)."""
        return [(KVCache(capacity), KVCache(fixed=True)) for _ in self.blocks]
