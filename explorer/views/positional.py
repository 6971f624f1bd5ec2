"""Positional encoding views: the sinusoidal table for this sentence, its dimensions as waves,
position-to-position similarity, embedding + encoding, and the base comparison n=10000 vs n=100.

The table itself always comes from ``model.arch.positional.sinusoidal`` (the model's own function).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
import plotly.graph_objects as go

from model.arch.positional import rotary_score_by_distance, sinusoidal

from . import style
from .matrix import Grid, heatmap, matrix_df, token_axes

_lab = style.with_labels


def sinusoidal_table(n_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """PE as a (positions, d_model) numpy array, from the model's own function."""
    return sinusoidal(int(n_positions), int(d_model), float(base)).numpy()


def pe_heatmap(pe: np.ndarray, tokens: Sequence[str] | None = None, *, title: str = "positional encoding",
               labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Position × dimension, on the diverging scale (sin/cos lie in [−1, 1])."""
    L = _lab(labels)
    g = Grid()
    traces = heatmap(pe, rows=tokens, row_name=L["position"], col_name=L["dim"], value_name="PE", name="PE",
                     cell_text=False)
    x, y = token_axes(rows=tokens, cols=None, n_rows=pe.shape[0], n_cols=pe.shape[1],
                      row_title=L["position"], col_title=L["dim"])
    g.axes(0, 0, x=x, y=y)
    fig = g.figure(traces, title=title, height=max(320, 100 + 18 * pe.shape[0]),
                   coloraxis=style.scores_axis(max(1.0, style.symmetric_range(pe)), "PE"))
    return fig, matrix_df(pe, tokens, None, row_name=L["position"], col_name=L["dim"])


def default_dims(d_model: int) -> list[int]:
    """A few dimension pairs from fast to slow waves: 0,1, 4,5 ... and one near the end."""
    dims = [0, 1, 4, 5, d_model // 2, d_model // 2 + 1]
    return sorted({d for d in dims if 0 <= d < d_model})


def pe_curves(n_positions: int, d_model: int, base: float = 10000.0, dims: Sequence[int] | None = None,
              tokens: Sequence[str] | None = None, *, title: str = "dimensions as waves",
              labels: dict | None = None, samples_per_position: int = 12) -> tuple[go.Figure, pd.DataFrame]:
    """Chosen dimensions of PE as continuous sin (even) / cos (odd) curves over positions, with
    the values the sentence's positions actually get marked on them."""
    L = _lab(labels)
    dims = [int(d) for d in (default_dims(d_model) if not dims else dims) if 0 <= int(d) < d_model]
    n = max(1, int(n_positions))
    pe = sinusoidal_table(n, d_model, base)
    x = np.linspace(0, n - 1, max(2, (n - 1) * samples_per_position + 1))
    traces = []
    for idx, d in enumerate(dims):
        i2 = d - d % 2
        freq = 1.0 / base ** (i2 / d_model)
        y = np.sin(x * freq) if d % 2 == 0 else np.cos(x * freq)
        colour = style.LINE_COLOURS[idx % len(style.LINE_COLOURS)]
        fn = "sin" if d % 2 == 0 else "cos"
        name = f"{L['dim_short']} {d}: {fn}(pos / {base:g}^({i2}/{d_model}))"
        traces.append(style.trace("scatter", x=x, y=y, mode="lines", name=style.esc(name), legendgroup=str(d),
                                 line=dict(color=colour, dash="solid" if d % 2 == 0 else "dash"),
                                 hoverinfo="skip"))
        hover = style.token_labels(tokens[:n]) if tokens is not None else [str(i) for i in range(n)]
        hover = hover + [""] * (n - len(hover))
        traces.append(style.trace("scatter", x=list(range(n)), y=pe[:, d], mode="markers", legendgroup=str(d),
                                 showlegend=False, marker=dict(color=colour, size=8),
                                 customdata=hover, name=f"{L['dim_short']} {d}",
                                 hovertemplate=(f"{style.esc(L['position'])} %{{x}} %{{customdata}}<br>"
                                                f"{style.esc(L['dim_short'])} {d} = %{{y:.4f}}<extra></extra>")))
    ax = style.token_axis(tokens[:n], L["position"]) if tokens is not None else style.index_axis(n, L["position"])
    fig = style.make_figure(traces, dict(xaxis=ax, yaxis=dict(range=[-1.1, 1.1], title=dict(text=style.esc(L["value"]))),
                                         plot_bgcolor="white", legend=dict(orientation="h", y=-0.25)),
                            title=title, height=440)
    df = pd.DataFrame(pe[:, dims], index=pd.Index(range(n), name=L["position"]),
                      columns=[f"{L['dim_short']} {d}" for d in dims])
    return fig, df


def pe_similarity(pe: np.ndarray, tokens: Sequence[str] | None = None, *, title: str = "PE·PE",
                  labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Dot products of every position's encoding with every other's: large near the diagonal,
    falling off with distance — the same for every pair at the same distance."""
    L = _lab(labels)
    sim = pe @ pe.T
    return position_similarity(sim, tokens, title=title, value_name=L["similarity"],
                               colour_range=style.symmetric_range(sim), labels=labels)


def position_similarity(sim: np.ndarray, tokens: Sequence[str] | None, *, title: str, value_name: str,
                        colour_range: float, labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """A position × position similarity matrix (any measure) as a heatmap and a table."""
    L = _lab(labels)
    g = Grid()
    traces = heatmap(sim, rows=tokens, cols=tokens, row_name=L["position"], col_name=L["position"],
                     value_name=value_name, name=value_name, digits=2)
    x, y = token_axes(rows=tokens, cols=tokens, n_rows=sim.shape[0], n_cols=sim.shape[1],
                      row_title=L["position"], col_title=L["position"])
    g.axes(0, 0, x=x, y=y)
    fig = g.figure(traces, title=title, height=max(380, 110 + 24 * sim.shape[0]),
                   coloraxis=style.scores_axis(colour_range, value_name))
    return fig, matrix_df(sim, tokens, tokens, row_name=L["position"], col_name=L["position"])


def embedding_sum(embed: np.ndarray, pe: np.ndarray | None, tokens: Sequence[str], *,
                  title: str = "embedding + positional encoding", labels: dict | None = None,
                  names: Sequence[str] | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The token embeddings, the encoding and their sum (what enters the first block), one
    diverging scale for all three so their sizes compare."""
    L = _lab(labels)
    names = list(names or (L["embedding"], L["encoding"], L["sum"]))
    mats = [embed] if pe is None else [embed, pe, embed + pe]
    g = Grid(cols=len(mats), titles=[style.esc(n) for n in names[: len(mats)]], hspace=0.06)
    traces = []
    for c, m in enumerate(mats):
        traces += heatmap(m, rows=tokens, row_name=L["position"], col_name=L["dim"], value_name=names[c],
                          name=names[c], cell_text=False, xaxis=g.x(0, c), yaxis=g.y(0, c))
        x, y = token_axes(rows=tokens, cols=None, n_rows=m.shape[0], n_cols=m.shape[1], col_title=L["dim"])
        y["showticklabels"] = c == 0
        g.axes(0, c, x=x, y=y)
    fig = g.figure(traces, title=title, height=max(340, 100 + 18 * embed.shape[0]),
                   coloraxis=style.scores_axis(style.symmetric_range(*mats)))
    return fig, matrix_df(mats[-1], tokens, None, row_name=L["position"], col_name=L["dim"])


def pe_compare(n_positions: int, d_model: int, bases: Sequence[float] = (10000.0, 100.0),
               tokens: Sequence[str] | None = None, *, title: str = "n = 10000 vs n = 100",
               labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """For each base n: the encoding (top) and its PE·PE similarity (bottom), side by side."""
    L = _lab(labels)
    n = max(1, int(n_positions))
    toks = list(tokens[:n]) if tokens is not None and len(tokens) >= n else None
    tables = [sinusoidal_table(n, d_model, b) for b in bases]
    sims = [t @ t.T for t in tables]
    titles = [f"PE, n = {b:g}" for b in bases] + [f"{L['similarity']}, n = {b:g}" for b in bases]
    g = Grid(rows=2, cols=len(bases), titles=[style.esc(t) for t in titles], vspace=0.12, hspace=0.08)
    smax = style.symmetric_range(*sims)
    traces = []
    for c, (t, s) in enumerate(zip(tables, sims)):
        traces += heatmap(t, rows=toks, row_name=L["position"], col_name=L["dim"], value_name="PE",
                          name=f"PE n={bases[c]:g}", cell_text=False, xaxis=g.x(0, c), yaxis=g.y(0, c))
        x, y = token_axes(rows=toks, cols=None, n_rows=n, n_cols=d_model, col_title=L["dim"])
        g.axes(0, c, x=x, y=y)
        traces += heatmap(s, rows=toks, cols=toks, row_name=L["position"], col_name=L["position"],
                          value_name=L["similarity"], coloraxis="coloraxis2", name=f"PE·PE n={bases[c]:g}",
                          cell_text=False, xaxis=g.x(1, c), yaxis=g.y(1, c))
        x, y = token_axes(rows=toks, cols=toks, n_rows=n, n_cols=n, col_title=L["position"])
        g.axes(1, c, x=x, y=y)
    a1 = style.scores_axis(1.0, "PE")
    a1["colorbar"].update(y=0.78, len=0.4)
    a2 = style.scores_axis(smax, L["similarity"])
    a2["colorbar"].update(y=0.22, len=0.4)
    fig = g.figure(traces, title=title, height=820, coloraxis=a1, coloraxis2=a2)
    cols = {}
    for b, t in zip(bases, tables):
        for d in range(min(d_model, 8)):
            cols[f"n={b:g} {L['dim_short']} {d}"] = t[:, d]
    df = pd.DataFrame(cols, index=pd.Index(range(n), name=L["position"]))
    return fig, df


def rotary_figure(d_head: int, base: float, max_distance: int = 64, *, title: str = "rotary",
                  labels: dict | None = None, theta=None) -> tuple[go.Figure, pd.DataFrame]:
    """Rotary models add no encoding: they rotate q and k, so q·k depends on the distance m − n.
    ``theta``: the model's own frequencies (after its rope's scaling), else base^(−2i/d_head)."""
    L = _lab(labels)
    s = rotary_score_by_distance(d_head, base, max_distance,
                                 theta=None if theta is None else torch.as_tensor(theta)).numpy()
    trace = style.trace("scatter", x=list(range(len(s))), y=s, mode="lines+markers", name="q·k",
                       line=dict(color=style.LINE_COLOURS[0]))
    fig = style.make_figure([trace], dict(xaxis=dict(title=dict(text=style.esc(L["distance"]))),
                                          yaxis=dict(title=dict(text=style.esc(L["score"]))),
                                          plot_bgcolor="white"), title=title, height=380)
    return fig, pd.DataFrame({L["score"]: s}, index=pd.Index(range(len(s)), name=L["distance"]))
