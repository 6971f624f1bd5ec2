"""Why a head attends where it does: one head's scores split into parts that add up to them exactly.

    terms = qk_terms(content, position, norms, W_Q, b_Q, W_K, b_K, scale)   # added positions, layer 0
    terms["content·content"] + ... + terms["bias"] == scale · q·kᵀ           # the model's hook_scores
    bands = rope_bands(q, k, rotary_dims, interleaved, scale)                # rotary: one part a frequency
    bands.sum(0) == scale · q·kᵀ

**Added positions** (the paper's sinusoids, BERT's and GPT-2's learned rows): the first block's input
is x_i = e_i + p_i (token embedding, with anything else added to it, and position). A norm between it
and the attention (BERT's embedding LayerNorm, GPT-2's ln_1) is a linear map once its statistics are
fixed: LayerNorm(x) = γ ⊙ (x − μ(x)) / σ(x) + β, with σ(x) = √(var(x) + ε) the token's own; with μ and
σ read from the token's real input, γ ⊙ (u − mean(u)) / σ is linear in u, so the norm of e + p is
that of e, plus that of p, plus β (as the logit lens linearises the final norm). RMSNorm the same
without μ and β. Then q_i = ê_i W_Q + p̂_i W_Q + (β W_Q + b_Q), the same for k_j, and

    s · q_i·k_j = s (q^e_i·k^e_j + q^e_i·k^p_j + q^p_i·k^e_j + q^p_i·k^p_j) + s (every product with a bias part)

exactly. After the first block the stream is no longer e + p: attention has mixed positions and the
feed-forward is not linear, so the split holds in layer 0 only.

**Rotary positions**: q and k are rotated pair of dimensions by pair, each pair at its own frequency
θ_b, so q·k = Σ_b (q_a k_a + q_b k_b) over the pairs (a, b) (half-split: (i, i + r/2); interleaved:
(2i, 2i + 1)), plus the dimensions not rotated (partial rotary). Each band's part depends on the two
positions only through θ_b (i − j): ``rope_band_relative`` computes it from q and k before the
rotation, which checks the frequencies and the pairing (tests/test_why.py).

Everything here is numpy in float64 (the hooks' float32 values, exactly widened): the parts are
computed more precisely than the model computed the score they add up to.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

TERMS = ("content·content", "content·position", "position·content", "position·position", "bias")


@dataclass(frozen=True)
class NormStep:
    """One norm on the way from e + p to the attention's input, with its parameters: ``kind`` "layer"
    (LayerNorm), "rms" (x / rms · w) or "rms1p" (x / rms · (1 + w), Gemma)."""

    kind: str
    weight: np.ndarray
    bias: np.ndarray | None
    eps: float


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def linearise(parts: Mapping[str, np.ndarray], step: NormStep) -> dict[str, np.ndarray]:
    """The norm applied to a sum of parts (each (T, d)), as a sum of parts: each part through the
    norm's linear map at the statistics of the whole (every part's sum, the token's real input), the
    norm's own bias β added to the part "bias" (made if absent)."""
    x = sum(_f64(v) for v in parts.values())  # (T, d) the norm's real input
    w = _f64(step.weight) + (1.0 if step.kind == "rms1p" else 0.0)  # (d,)
    if step.kind == "layer":
        sigma = np.sqrt(x.var(-1, keepdims=True) + step.eps)  # (T, 1) the token's own σ
        out = {k: w * (_f64(v) - _f64(v).mean(-1, keepdims=True)) / sigma for k, v in parts.items()}
    else:
        rms = np.sqrt((x ** 2).mean(-1, keepdims=True) + step.eps)  # (T, 1)
        out = {k: w * _f64(v) / rms for k, v in parts.items()}
    if step.bias is not None:
        out["bias"] = out.get("bias", 0.0) + _f64(step.bias)
    return out


def qk_terms(content: np.ndarray, position: np.ndarray, norms: Sequence[NormStep], W_Q: np.ndarray,
             b_Q: np.ndarray | None, W_K: np.ndarray, b_K: np.ndarray | None, scale: float,
             ) -> dict[str, np.ndarray]:
    """The scores of one head of a first self-attention layer, split in the five parts of ``TERMS``
    (each (T, T): query × key), from the input's content e (T, d) and position p (T, d), the norms
    between them and the attention (in order), W_Q, W_K (d, d_head: x·W) and the biases b_Q, b_K.
    They add up to scale · q·kᵀ."""
    parts: dict[str, np.ndarray] = {"content": _f64(content), "position": _f64(position)}
    for step in norms:
        parts = linearise(parts, step)
    Wq, Wk = _f64(W_Q), _f64(W_K)
    q = {k: v @ Wq for k, v in parts.items() if k != "bias"}  # (T, d_head) each
    k = {k: v @ Wk for k, v in parts.items() if k != "bias"}
    T, dh = parts["content"].shape[0], Wq.shape[1]
    qb = (parts["bias"] @ Wq if "bias" in parts else np.zeros(dh)) + (0.0 if b_Q is None else _f64(b_Q))
    kb = (parts["bias"] @ Wk if "bias" in parts else np.zeros(dh)) + (0.0 if b_K is None else _f64(b_K))
    qb, kb = np.broadcast_to(qb, (T, dh)), np.broadcast_to(kb, (T, dh))
    out = {"content·content": scale * q["content"] @ k["content"].T,
           "content·position": scale * q["content"] @ k["position"].T,
           "position·content": scale * q["position"] @ k["content"].T,
           "position·position": scale * q["position"] @ k["position"].T}
    q_all, k_all = q["content"] + q["position"], k["content"] + k["position"]
    out["bias"] = scale * (qb @ (k_all + kb).T + q_all @ kb.T)
    return out


def qk_bound(content: np.ndarray, position: np.ndarray, norms: Sequence[NormStep], W_Q: np.ndarray,
             b_Q: np.ndarray | None, W_K: np.ndarray, b_K: np.ndarray | None, scale: float) -> np.ndarray:
    """(T, T) a bound on |float32 score − exact score|, cell by cell, for the model's own float32 pass.

    The model rounds at each step with unit roundoff u = 2⁻²⁴: the sum e + p (relative u), each norm
    (its mean, variance, square root and division: a few u relative, taken as (d + 8) u for the
    mean and variance sums over d, the same for an RMS), q = x·W + b and k (a sum of d products:
    γ_{d+1} |x|·|W| + |b|, γ_n = n u / (1 − n u)), then q·kᵀ (γ_{d_head} |q|·|k|) and the scale (u).
    First-order in u: |δ(q·k)| ≤ |δq|·|k| + |q|·|δk| + γ_{d_head} |q|·|k|, with |q|, |k| the magnitudes
    |x̂|·|W| + |b| (x̂ the normed input in absolute value). The bound is rigorous for the products and
    sums; for the norm it assumes the usual backward-stable kernels (PyTorch's layer_norm accumulates
    in float32 too)."""
    u = 2.0 ** -24
    x = _f64(content) + _f64(position)  # (T, d)
    d = x.shape[-1]
    rel = u  # relative error of the norm's input (the float32 sum e + p)
    xa = np.abs(x)
    for step in norms:
        w = np.abs(_f64(step.weight) + (1.0 if step.kind == "rms1p" else 0.0))
        if step.kind == "layer":
            sigma = np.sqrt(x.var(-1, keepdims=True) + step.eps)
            y = (_f64(step.weight) + 0.0) * (x - x.mean(-1, keepdims=True)) / sigma
            # the centred input's error: its own plus the mean's (d u |x| on average), over σ
            xa = w * (np.abs(x - x.mean(-1, keepdims=True)) + (d + 8) * u * np.abs(x).mean(-1, keepdims=True)) / sigma
        else:
            rms = np.sqrt((x ** 2).mean(-1, keepdims=True) + step.eps)
            y = _f64(step.weight) * x / rms
            xa = w * np.abs(x) / rms
        rel = rel + (d + 8) * u  # the statistics' sums and the division
        if step.bias is not None:
            y = y + _f64(step.bias)
            xa = xa + np.abs(_f64(step.bias))
        x = y
    gamma = lambda n: n * u / (1 - n * u)  # noqa: E731
    Wq, Wk = np.abs(_f64(W_Q)), np.abs(_f64(W_K))
    qa = xa @ Wq + (0.0 if b_Q is None else np.abs(_f64(b_Q)))  # (T, dh) |q| bound
    ka = xa @ Wk + (0.0 if b_K is None else np.abs(_f64(b_K)))
    dq = (gamma(d + 1) + rel) * qa  # the error of each q element
    dk = (gamma(d + 1) + rel) * ka
    dh = Wq.shape[1]
    return abs(scale) * (dq @ ka.T + qa @ dk.T + (gamma(dh) + u) * qa @ ka.T)


def band_pairs(dims: int, interleaved: bool) -> list[tuple[int, int]]:
    """The rotated pairs of dimensions, band b turning at θ_b: half-split (b, b + dims/2) ("rotate
    half", Hugging Face's layout) or interleaved (2b, 2b + 1)."""
    half = dims // 2
    return [(2 * b, 2 * b + 1) if interleaved else (b, b + half) for b in range(half)]


def rope_bands(q: np.ndarray, k: np.ndarray, dims: int, interleaved: bool, scale: float) -> np.ndarray:
    """(bands, Tq, Tk): each rotated pair's part of scale · q·kᵀ, from q (Tq, d_head) and k (Tk, d_head)
    as they enter the dot product (after the rotation); with partial rotary (dims < d_head) one more,
    last band: the dimensions not rotated. They add up to scale · q·kᵀ."""
    q, k = _f64(q), _f64(k)
    out = [scale * (np.outer(q[:, a], k[:, a]) + np.outer(q[:, b], k[:, b])) for a, b in band_pairs(dims, interleaved)]
    if dims < q.shape[-1]:
        out.append(scale * q[:, dims:] @ k[:, dims:].T)
    return np.stack(out)


def rope_band_relative(q0: np.ndarray, k0: np.ndarray, theta: np.ndarray, q_pos: np.ndarray, k_pos: np.ndarray,
                       interleaved: bool, scale: float) -> np.ndarray:
    """(bands, Tq, Tk) the rotated bands' parts computed from q and k *before* the rotation: a pair
    (x_a, x_b) of q at position m is turned by θ m, of k at n by θ n, so their product is
    cos(θ (n − m)) (q_a k_a + q_b k_b) + sin(θ (n − m)) (q_b k_a − q_a k_b). Equal to ``rope_bands`` of the
    rotated q and k only with the model's own frequencies ``theta`` and pairing."""
    q0, k0, theta = _f64(q0), _f64(k0), _f64(theta)
    dims = 2 * len(theta)
    delta = _f64(k_pos)[None, :] - _f64(q_pos)[:, None]  # (Tq, Tk) n − m
    out = []
    for (a, b), th in zip(band_pairs(dims, interleaved), theta):
        same = np.outer(q0[:, a], k0[:, a]) + np.outer(q0[:, b], k0[:, b])
        cross = np.outer(q0[:, b], k0[:, a]) - np.outer(q0[:, a], k0[:, b])
        out.append(scale * (np.cos(th * delta) * same + np.sin(th * delta) * cross))
    return np.stack(out)


def pull(parts: np.ndarray, pattern: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(parts,) how much each part raises the scores of the keys the head attends to above the
    row's average: mean over queries with an allowed key of Σ_j A_ij (c_ij − mean_{j allowed} c_ij).
    Softmax ignores what a part adds to a whole row, so only this difference moves weight; the
    parts' pulls add up to the scores' own."""
    parts, A, M = _f64(parts), _f64(pattern), np.asarray(allowed, dtype=bool)
    rows = M.any(-1)
    if not rows.any():
        return np.zeros(parts.shape[0])
    n = M.sum(-1, keepdims=True).clip(min=1)
    mean = np.where(M, parts, 0.0).sum(-1, keepdims=True) / n  # (P, Tq, 1)
    centred = np.where(M, parts - mean, 0.0)
    return (A[None] * centred).sum(-1)[:, rows].mean(-1)
