"""Views for what only the real checkpoints have: learned position embeddings (BERT), rotary
frequencies (Llama), grouped-query attention (which query heads share a K/V head) and the
decoder's next-token predictions. Pure functions: arrays in, (go.Figure, DataFrame) out.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from model.arch.positional import rotary_frequencies

from . import style
from .data import kv_groups, kv_head_of
from .positional import position_similarity

_lab = style.with_labels


# --- learned position embeddings -------------------------------------------------------------

def cosine_matrix(x: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row with every other (a zero row gives 0, never NaN)."""
    x = np.asarray(x, dtype=np.float64)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    unit = np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)
    return np.clip(unit @ unit.T, -1.0, 1.0)


def learned_similarity(pe: np.ndarray, tokens: Sequence[str] | None = None, *,
                       title: str = "position similarity (cosine)",
                       labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Cosine similarity between the learned position embeddings of every pair of positions:
    a trained table has no formula, so this shows what training made of 'nearby'."""
    L = _lab(labels)
    return position_similarity(cosine_matrix(pe), tokens, title=title, value_name=L["cosine"],
                               colour_range=1.0, labels=labels)


# --- rotary ------------------------------------------------------------------------------------

def rotary_frequencies_figure(d_head: int, base: float, *, title: str = "rotary frequencies",
                              labels: dict | None = None, theta=None) -> tuple[go.Figure, pd.DataFrame]:
    """θ_i = base^(−2i/d_head) for each rotated pair (dims i and i + d_head/2), on a log scale:
    the first pairs turn by about a radian per position, the last ones barely move. ``theta``: the
    model's own frequencies when its rope is scaled (model/arch/parts.py rope_frequencies)."""
    L = _lab(labels)
    theta = rotary_frequencies(int(d_head), float(base)).numpy() if theta is None else np.asarray(theta, dtype=np.float64)
    i = np.arange(len(theta))
    wave = 2 * math.pi / theta
    hover = [f"{style.esc(L['pair'])} = {k} ({style.esc(L['dims'])} {k}, {k + d_head // 2})<br>θ = {t:.3g}<br>"
             f"{style.esc(L['wavelength'])} = {w:,.1f}" for k, t, w in zip(i, theta, wave)]
    trace = style.trace("scatter", x=i, y=theta, mode="lines+markers", name="θ_i", text=hover, hoverinfo="text",
                       line=dict(color=style.LINE_COLOURS[0]))
    fig = style.make_figure([trace], dict(
        xaxis=dict(title=dict(text=style.esc(L["pair"]))),
        yaxis=dict(type="log", title=dict(text=style.esc(L["theta"]))),
        plot_bgcolor="white"), title=title, height=380)
    df = pd.DataFrame({L["dims"]: [f"{k}, {k + d_head // 2}" for k in i], L["theta_col"]: theta,
                       L["wavelength_col"]: wave},
                      index=pd.Index(i, name=L["pair"]))
    return fig, df


# --- grouped-query attention --------------------------------------------------------------------

def gqa_figure(n_heads: int, n_kv_heads: int, selected: int | None = None, *,
               title: str = "grouped-query attention", labels: dict | None = None
               ) -> tuple[go.Figure, pd.DataFrame]:
    """K/V head (rows) × query head (columns): a filled cell where the query head reads that K/V
    head. The selected head's column is outlined."""
    L = _lab(labels)
    groups = kv_groups(n_heads, n_kv_heads)
    z = np.full((len(groups), n_heads), np.nan)
    text = np.full((len(groups), n_heads), "", dtype=object)
    for g, heads in enumerate(groups):
        for h in heads:
            z[g, h] = g
            text[g, h] = f"Q{h}"
    hover = [[f"{style.esc(L['query_head'])} {h} → {style.esc(L['kv_head'])} {kv_head_of(h, n_heads, n_kv_heads)}"
              for h in range(n_heads)] for _ in groups]
    palette = style.LINE_COLOURS
    n_g = len(groups)
    scale = [[k / max(1, n_g - 1), palette[k % len(palette)]] for k in range(n_g)] if n_g > 1 \
        else [[0, palette[0]], [1, palette[0]]]
    trace = style.trace("heatmap", z=z, x=list(range(n_heads)), y=list(range(n_g)), text=text, texttemplate="%{text}",
                       customdata=hover, hovertemplate="%{customdata}<extra></extra>", colorscale=scale,
                       zmin=0, zmax=max(1, n_g - 1), showscale=False, xgap=2, ygap=2, name="GQA")
    shapes = []
    if selected is not None and 0 <= int(selected) < n_heads:
        s = int(selected)
        shapes.append(dict(type="rect", x0=s - 0.5, x1=s + 0.5, y0=-0.5, y1=n_g - 0.5,
                           line=dict(color="black", width=3)))
    fig = style.make_figure([trace], dict(
        xaxis=dict(title=dict(text=style.esc(L["query_head"])), tickmode="array",
                   tickvals=list(range(n_heads)), ticktext=[str(h) for h in range(n_heads)]),
        yaxis=dict(title=dict(text=style.esc(L["kv_head"])), tickmode="array", autorange="reversed",
                   tickvals=list(range(n_g)), ticktext=[str(g) for g in range(n_g)]),
        shapes=shapes, plot_bgcolor="white"), title=title, height=max(220, 120 + 50 * n_g))
    df = pd.DataFrame({
        L["kv_head"]: [kv_head_of(h, n_heads, n_kv_heads) for h in range(n_heads)],
        L["shared_with"]: [", ".join(str(o) for o in groups[kv_head_of(h, n_heads, n_kv_heads)] if o != h) or "—"
                        for h in range(n_heads)],
    }, index=pd.Index(range(n_heads), name=L["query_head"]))
    return fig, df


# --- next-token predictions ---------------------------------------------------------------------

def top_k(logits: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(ids, probabilities) of the k most likely next tokens at every position.

    logits: (..., vocab) -> ids (..., k) int32, probs (..., k) float32, most likely first."""
    x = np.asarray(logits, dtype=np.float64)
    k = min(int(k), x.shape[-1])
    idx = np.argpartition(-x, k - 1, axis=-1)[..., :k]
    part = np.take_along_axis(x, idx, axis=-1)
    order = np.argsort(-part, axis=-1, kind="stable")
    idx = np.take_along_axis(idx, order, axis=-1)
    m = x.max(axis=-1, keepdims=True)
    log_z = m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    probs = np.exp(np.take_along_axis(x, idx, axis=-1) - log_z)
    return idx.astype(np.int32), probs.astype(np.float32)


def next_token_figure(ids: Sequence[int], probs: Sequence[float], token_texts: Sequence[str], *,
                      context: str = "", title: str = "next-token predictions",
                      labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The k most likely next tokens as horizontal bars (most likely on top), with a table."""
    L = _lab(labels)
    probs = np.asarray(probs, dtype=float)
    shown = [style.esc(style.visible(t)) for t in token_texts]
    y = [f"{r + 1}. {s}" for r, s in enumerate(shown)]
    trace = style.trace("bar", x=probs, y=y, orientation="h", marker=dict(color=style.LINE_COLOURS[0]),
                   text=[f"{p:.1%}" for p in probs], textposition="outside", cliponaxis=False,
                   customdata=[int(i) for i in ids],
                   hovertemplate="%{y} (id %{customdata})<br>p = %{x:.4f}<extra></extra>", name="p")
    full = f"{title} — {context}" if context else title
    fig = style.make_figure([trace], dict(
        xaxis=dict(title=dict(text=style.esc(L["probability"])), range=[0, min(1.0, float(probs.max(initial=0)) * 1.25 + 0.02)],
                   tickformat=".0%"),
        yaxis=dict(autorange="reversed", type="category", title=dict(text=style.esc(L["token"]))),
        plot_bgcolor="white", bargap=0.25), title=full, height=max(300, 90 + 30 * len(y)))
    df = pd.DataFrame({L["token"]: list(token_texts), "id": [int(i) for i in ids], L["probability"]: probs},
                      index=pd.Index(range(1, len(probs) + 1), name=L["rank"]))
    return fig, df
