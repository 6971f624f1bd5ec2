"""The one explicit attention of the project, shared by every architecture.

Written out step by step (never the fused ``scaled_dot_product_attention``), because the
intermediate tensors are exactly what the explorer shows:

    q, k, v = x W_Q, x W_K, x W_V          (split into heads; rotary if any)
    scores   = q kᵀ / √d_k
    masked   = scores where mask else −inf
    pattern  = softmax(masked)             (disallowed entries exactly 0)
    z        = pattern v
    out      = concat(z) W_O
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .hooks import HookPoint, active
from .positional import apply_rotary


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


class Attention(nn.Module):
    """Multi-head attention with separate W_Q, W_K, W_V, W_O; optional grouped K/V heads."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        d_head: int | None = None,
        bias: bool = True,
        out_bias: bool | None = None,
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        if n_heads % self.n_kv_heads:
            raise ValueError("n_heads must be a multiple of n_kv_heads")
        self.d_head = d_head or d_model // n_heads
        self.W_Q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.W_K = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.W_V = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.W_O = nn.Linear(n_heads * self.d_head, d_model, bias=bias if out_bias is None else out_bias)
        self.hook_q = HookPoint()  # (B, nh, Tq, hs)
        self.hook_k = HookPoint()  # (B, nh, Tk, hs)
        self.hook_v = HookPoint()  # (B, nh, Tk, hs)
        self.hook_scores = HookPoint()  # (B, nh, Tq, Tk)
        self.hook_mask = HookPoint()  # (B, 1, Tq, Tk) bool, True = allowed
        self.hook_masked_scores = HookPoint()  # (B, nh, Tq, Tk)
        self.hook_pattern = HookPoint()  # (B, nh, Tq, Tk)
        self.hook_z = HookPoint()  # (B, nh, Tq, hs)
        self.hook_out = HookPoint()  # (B, Tq, d_model)

    def _heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, n, self.d_head).transpose(1, 2)  # (B, n, T, hs)

    def forward(
        self,
        x: torch.Tensor,
        kv: torch.Tensor | None = None,
        mask: "torch.Tensor | Mask | None" = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """x: (B, Tq, d) queries; kv: (B, Tk, d) keys/values (default x); mask broadcastable
        to (B, 1, Tq, Tk), True where allowed, or a ``Mask`` of it (shared by a stack's layers);
        rotary: (cos, sin) tables for the positions of x ((Tq, hs), or (B, 1, Tq, hs) for
        per-sentence positions); cache: the keys/values of this call's earlier steps: the new
        ones are appended and the attention reads them all (then Tk = earlier + new, and the mask
        covers every key so far)."""
        kv = x if kv is None else kv
        B, Tq, _ = x.shape
        q = self._heads(self.W_Q(x), self.n_heads)  # (B, nh, Tq, hs)
        if rotary is not None:
            q = apply_rotary(q, *rotary)
        if cache is not None and cache.fixed and cache.k is not None:
            k, v = cache.k, cache.v  # cross-attention: the encoder's keys/values, from the first step
        else:
            k = self._heads(self.W_K(kv), self.n_kv_heads)  # (B, nkv, Tk, hs)
            v = self._heads(self.W_V(kv), self.n_kv_heads)  # (B, nkv, Tk, hs)
            if rotary is not None:
                k = apply_rotary(k, *rotary)
            group = self.n_heads // self.n_kv_heads
            if group > 1:  # grouped-query attention: each K/V head serves `group` query heads
                k = k.repeat_interleave(group, dim=1)  # (B, nh, Tk, hs)
                v = v.repeat_interleave(group, dim=1)  # (B, nh, Tk, hs)
            if cache is not None:
                k, v = cache.append(k, v)  # (B, nh, Tk, hs): every key and value so far
        Tk = k.shape[2]
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)

        # The (B, nh, Tq, Tk) score tensor is allocated once and, where nothing else can see it,
        # reused in place: the division by √d_k always (the same numbers as q @ kᵀ / √d_k); the
        # mask fill when no hook holds the scores; the softmax when no hook holds the masked
        # scores. A mask that allows every key is not applied at all (the masked scores are then
        # the scores themselves). Out of place whenever autograd records the run (training).
        scores = self.hook_scores((q @ k.transpose(-2, -1)).div_(math.sqrt(self.d_head)))  # (B, nh, Tq, Tk)
        watched = active()
        inplace = not (torch.is_grad_enabled() and scores.requires_grad)
        given = Mask.of(mask) or Mask(torch.ones(1, 1, Tq, Tk, dtype=torch.bool, device=x.device))
        shown = given.allowed.expand(B, 1, Tq, Tk)
        seen = self.hook_mask(shown)  # (B, 1, Tq, Tk)
        m = given if seen is shown else Mask(seen)  # a hook changed the mask: derive from its mask
        if m.everywhere:
            masked = self.hook_masked_scores(scores)
        else:
            held = inplace and self.hook_scores.name not in watched
            if held:  # nobody else sees the scores: add 0 / −inf in place (the same numbers as a
                # fill, for finite scores; a broadcast add is about twice as fast as masked_fill_)
                masked = scores.add_(m.bias(scores.dtype))
            else:  # the scores are kept as they are: one pass into a new tensor
                masked = torch.where(m.allowed, scores, float("-inf"))
            masked = self.hook_masked_scores(masked)
        if inplace and masked is not scores and self.hook_masked_scores.name not in watched:
            pattern = torch.softmax(masked, dim=-1, out=masked)  # nobody else holds `masked`
        elif inplace and masked is scores and not ({self.hook_scores.name, self.hook_masked_scores.name} & watched.keys()):
            pattern = torch.softmax(masked, dim=-1, out=masked)
        else:
            pattern = torch.softmax(masked, dim=-1)
        # a row with no allowed key (a pad query of a left-padded prompt, in generation) gives zeros, not NaN
        if not m.everywhere and m.empty is not None:
            pattern = pattern.masked_fill_(m.empty, 0.0)
        pattern = self.hook_pattern(pattern)
        z = self.hook_z(pattern @ v)  # (B, nh, Tq, hs)
        z = z.transpose(1, 2).reshape(B, Tq, self.n_heads * self.d_head)  # (B, Tq, nh*hs)
        return self.hook_out(self.W_O(z))  # (B, Tq, d)
