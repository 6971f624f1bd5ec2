"""Positional information: sinusoidal (the paper), learned (BERT) and rotary (Llama)."""
from __future__ import annotations

import math

import torch


def sinusoidal(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)).

    Returns a [max_len, d_model] float32 table. An odd d_model keeps the last sin column.
    """
    if max_len < 0 or d_model < 1 or base <= 1:
        raise ValueError("need max_len >= 0, d_model >= 1 and base > 1")
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),)
    angle = pos / base ** (two_i / d_model)  # (T, ceil(d/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def rotary_frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """θ_i = base^(-2i/d_head) for i < d_head/2: the angle per position of each pair."""
    return 1.0 / base ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)


def rotary_tables(
    positions: torch.Tensor, d_head: int, base: float = 10000.0, theta: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables [.., T, d_head] for the half-split ("rotate_half") layout; ``theta`` (d_head/2,):
    the frequencies to use instead of base^(-2i/d_head) (a scaled rope's: model/arch/parts.py rope_frequencies)."""
    freqs = rotary_frequencies(d_head, base) if theta is None else theta.to(torch.float64)
    angle = positions.to(torch.float64).unsqueeze(-1) * freqs
    angle = torch.cat([angle, angle], dim=-1)  # (.., T, d_head)
    return angle.cos().float(), angle.sin().float()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x_i, x_{i+d/2}) by the position's angle. x: (B, nh, T, hs)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def rotary_score_by_distance(
    d_head: int, base: float, max_distance: int, seed: int = 0, theta: torch.Tensor | None = None
) -> torch.Tensor:
    """Score q·k between two fixed random vectors as their relative distance grows.

    Rotary makes the score depend only on the distance m - n; this shows how.
    Returns [max_distance + 1] scores (distance 0..max_distance).
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(d_head, generator=g)
    k = q.clone()  # the same content at both ends: what distance alone does
    dist = torch.arange(max_distance + 1)
    cos, sin = rotary_tables(dist, d_head, base, theta)
    k_rot = apply_rotary(k.expand(len(dist), d_head), cos, sin)
    q_rot = apply_rotary(q.unsqueeze(0), cos[:1], sin[:1])
    return (k_rot @ q_rot.squeeze(0)) / math.sqrt(d_head)
