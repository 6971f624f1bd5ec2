"""The rest of the block around attention, and the shapes of everything: the feed-forward network,
the residual stream with its adds and norms, the encoder–decoder's generator (logits), and the chain
of tensors with their real shapes. Pure functions: arrays in, ``(go.Figure, DataFrame)`` out.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .matrix import Grid, heatmap, matrix_df, row_labels, token_axes

_lab = style.with_labels


# --- the feed-forward network -------------------------------------------------------------------

def ffn_figure(hidden: np.ndarray, out: np.ndarray, tokens: Sequence[str], *, title: str = "feed-forward",
               labels: dict | None = None, names: Sequence[str] = ("hidden", "FFN(x)"),
               subtitle: str | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The hidden activation (positions × d_ff) above the output (positions × d_model), each on its
    own diverging scale; the table holds the hidden activation."""
    L = _lab(labels)
    n = hidden.shape[0]
    panel = max(110, 40 + 16 * n)
    g = Grid(rows=2, cols=1, titles=[style.esc(names[0]), style.esc(names[1])], vspace=min(0.25, 90 / (2 * panel + 90)))
    traces = heatmap(hidden, rows=tokens, row_name=L["position"], col_name=L["d_ff"], value_name=names[0],
                     name=names[0], cell_text=False, xaxis=g.x(0, 0), yaxis=g.y(0, 0))
    x, y = token_axes(rows=tokens, cols=None, n_rows=n, n_cols=hidden.shape[1], col_title=L["d_ff"])
    g.axes(0, 0, x=x, y=y)
    traces += heatmap(out, rows=tokens, row_name=L["position"], col_name=L["d_model"], value_name=names[1],
                      name=names[1], cell_text=False, coloraxis="coloraxis2", xaxis=g.x(1, 0), yaxis=g.y(1, 0))
    x, y = token_axes(rows=tokens, cols=None, n_rows=n, n_cols=out.shape[1], col_title=L["d_model"])
    g.axes(1, 0, x=x, y=y)
    a1 = style.scores_axis(style.symmetric_range(hidden), names[0])
    a1["colorbar"].update(y=0.78, len=0.42)
    a2 = style.scores_axis(style.symmetric_range(out), names[1])
    a2["colorbar"].update(y=0.22, len=0.42)
    fig = g.figure(traces, title=title, height=2 * panel + 170, coloraxis=a1, coloraxis2=a2, subtitle=subtitle)
    return fig, matrix_df(hidden, tokens, None, row_name=L["position"], col_name=L["d_ff"])


# --- the residual stream, its adds and its norms -------------------------------------------------

STAT_WORDS = {"mean": "stat_mean", "std": "stat_std", "rms": "stat_rms"}  # their figure words


def norm_stats(x: np.ndarray, kind: str) -> dict[str, np.ndarray]:
    """Per position (rows of x), what the norm computes from its input: LayerNorm the mean and the
    standard deviation (over d_model, as LayerNorm does: the population one), RMSNorm the root mean
    square."""
    x = np.asarray(x, dtype=np.float64)
    if kind == "rms":
        return {"rms": np.sqrt((x ** 2).mean(-1))}
    return {"mean": x.mean(-1), "std": x.std(-1)}


def robust_range(arrays: Sequence[np.ndarray], q: float = 99.0) -> float:
    """The q-th percentile of |x| over all arrays: the stream of a pre-norm model has a few huge
    entries (hundreds, at the first token) that would leave every other cell white on a max scale.
    Beyond it the colour saturates; the hover and the table keep the exact values."""
    a = np.concatenate([np.abs(np.asarray(x, dtype=np.float64)).ravel() for x in arrays])
    a = a[np.isfinite(a)]
    return float(np.percentile(a, q)) if a.size and np.percentile(a, q) > 0 else style.symmetric_range(*arrays)


def residual_figure(steps: Sequence[tuple[str, np.ndarray]], norms: Sequence[tuple[str, np.ndarray, str]],
                    tokens: Sequence[str], *, title: str = "residual stream", labels: dict | None = None,
                    subtitle: str | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The stream through one block, one panel per step in forward order (positions × d_model, one
    diverging scale for all, so that a norm's effect on the size shows), and at the bottom each
    norm's statistics per position; the colour scale ends at the 99th percentile of |x| (robust_range).
    ``steps``: (name, (T, d)); ``norms``: (name, its input (T, d),
    "layer" | "rms"). The table: the statistics, one row per position."""
    L = _lab(labels)
    n = steps[0][1].shape[0]
    panel = max(70, 26 + 13 * n)
    stats_h = 230
    k = len(steps)
    heights = [panel] * k + [stats_h]
    total = sum(heights) + 42 * (k + 1)
    g = Grid(rows=k + 1, cols=1, row_heights=heights[::-1], vspace=42 / total,  # Grid: the first weight is the bottom row
             titles=[style.esc(name) for name, _ in steps] + [style.esc(L["norm_stats"])])
    traces = []
    for r, (name, m) in enumerate(steps):
        traces += heatmap(m, rows=tokens, row_name=L["position"], col_name=L["d_model"], value_name=name,
                          name=name, cell_text=False, xaxis=g.x(r, 0), yaxis=g.y(r, 0))
        x, y = token_axes(rows=tokens, cols=None, n_rows=n, n_cols=m.shape[1], col_title="")
        g.axes(r, 0, x=x, y=y)
    cols: dict[str, np.ndarray] = {}
    c = 0
    pos = list(range(n))
    for name, x_in, kind in norms:
        for stat, values in norm_stats(x_in, kind).items():
            label = f"{name} {L[STAT_WORDS[stat]]}"
            cols[label] = values
            traces.append(style.trace("scatter", x=pos, y=values, mode="lines+markers", name=style.esc(label),
                                      line=dict(color=style.LINE_COLOURS[c % len(style.LINE_COLOURS)],
                                                dash="solid" if stat != "mean" else "dot"),
                                      xaxis=g.x(k, 0), yaxis=g.y(k, 0),
                                      hovertemplate=f"{style.esc(label)}: %{{y:.4f}}<extra></extra>"))
            c += 1
    g.axes(k, 0, x=style.token_axis(tokens, L["position"]), y=dict(title=dict(text=style.esc(L["value"]))))
    fig = g.figure(traces, title=title, height=total + 150, subtitle=subtitle, plot_bgcolor="white",
                   coloraxis=style.scores_axis(robust_range([m for _, m in steps]), "≤ p99 |x|"),
                   legend=dict(orientation="h", y=-0.04, yanchor="top"), margin=dict(b=110))
    df = pd.DataFrame(cols, index=pd.Index(row_labels(tokens, n), name=L["position"], dtype=object))
    return fig, df


# --- the generator: logits -> softmax over the vocabulary -----------------------------------------

def logits_figure(inputs: Sequence[str], top_tokens: Sequence[Sequence[str]], top_probs: np.ndarray,
                  chosen: Sequence[str], chosen_probs: Sequence[float], *, title: str = "generator",
                  labels: dict | None = None, subtitle: str | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Rows: decoder positions (labelled by the token each one reads); columns: the k most likely
    next tokens, coloured by their softmax probability, each cell showing the token and its
    probability; the token the model wrote is outlined."""
    L = _lab(labels)
    probs = np.asarray(top_probs, dtype=float)
    n, k = probs.shape
    cells = style.strings([[f"{style.token_label(t)}<br>{p:.2f}" for t, p in zip(row, pr)]
                           for row, pr in zip(top_tokens, probs)])
    custom = style.strings([[style.token_label(t) for t in row] for row in top_tokens])
    trace = style.trace("heatmap", z=probs.astype(np.float32), x=list(range(k)), y=list(range(n)), coloraxis="coloraxis",
                        text=cells, texttemplate="%{text}", customdata=custom, xgap=1, ygap=1, name=L["probability"],
                        hovertemplate=(f"{style.esc(L['position'])} %{{y}}<br>{style.esc(L['rank'])} %{{x}}: "
                                       f"<b>%{{customdata}}</b><br>p = %{{z:.4f}}<extra></extra>"))
    shapes = []
    for r in range(n):
        for c in range(k):
            if top_tokens[r][c] == chosen[r]:
                shapes.append(dict(type="rect", x0=c - 0.5, x1=c + 0.5, y0=r - 0.5, y1=r + 0.5,
                                   line=dict(color="#D55E00", width=3)))
                break
    ya = style.token_axis([f"{i}:{t}" for i, t in enumerate(inputs)], L["decoder_input"])
    ya.update(range=[n - 0.5, -0.5], tickangle=0)
    xa = dict(title=dict(text=style.esc(L["rank"])), tickmode="array", tickvals=list(range(k)),
              ticktext=[str(i + 1) for i in range(k)], range=[-0.5, k - 0.5], showgrid=False, zeroline=False)
    fig = style.make_figure([trace], dict(xaxis=xa, yaxis=ya, shapes=shapes, plot_bgcolor="white",
                                          coloraxis=style.weights_axis(L["probability"])),
                            title=title, height=max(300, 120 + 34 * n), subtitle=subtitle)
    rows = {L["decoder_input"]: list(inputs), L["chosen"]: list(chosen),
            f"p({L['chosen']})": np.asarray(chosen_probs, dtype=float)}
    for c in range(k):
        rows[f"{L['rank']} {c + 1}"] = [row[c] for row in top_tokens]
        rows[f"p {c + 1}"] = probs[:, c]
    return fig, pd.DataFrame(rows, index=pd.Index(range(n), name=L["position"]))


# --- shapes: the chain of tensors ------------------------------------------------------------------

def chain_figure(rows: Sequence[tuple[str, str, str]], *, title: str = "shapes", labels: dict | None = None,
                 highlight: Sequence[bool] | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The tensors of the model and block as a vertical chain of boxes, one per step: what it is (bold)
    and its shape with named dimensions, arrows between them. ``rows``: (step, shape text, hook name
    or ""). Highlighted boxes are the attention block itself. Narrow screens read it top to bottom."""
    L = _lab(labels)
    n = len(rows)
    hl = list(highlight) if highlight is not None else [False] * n
    box_h, gap = 1.0, 0.45
    shapes, anns = [], []
    for i, (what, shape, _hook) in enumerate(rows):
        top = i * (box_h + gap)
        shapes.append(dict(type="rect", xref="paper", x0=0.0, x1=1.0, yref="y", y0=top, y1=top + box_h,
                           line=dict(color="#0072B2" if hl[i] else "#6b6b6b", width=2 if hl[i] else 1),
                           fillcolor="#e8f1f8" if hl[i] else "#f7f7f7", layer="below"))
        anns.append(dict(text=f"<b>{style.esc(what)}</b><br>{style.esc(shape)}", xref="paper", x=0.02, yref="y",
                         y=top + box_h / 2, xanchor="left", yanchor="middle", showarrow=False, align="left",
                         font=dict(size=12)))
        if i < n - 1:
            anns.append(dict(text="↓", xref="paper", x=0.5, yref="y", y=top + box_h + gap / 2, showarrow=False,
                             xanchor="center", yanchor="middle", font=dict(size=13, color="#6b6b6b")))
    span = n * (box_h + gap) - gap
    layout = dict(xaxis=dict(visible=False, range=[0, 1]),
                  yaxis=dict(visible=False, range=[span + 0.1, -0.1]), shapes=shapes, annotations=anns,
                  plot_bgcolor="white", margin=dict(l=10, r=10, t=70, b=20))
    fig = style.make_figure([style.trace("scatter", x=[], y=[], mode="markers", hoverinfo="skip", showlegend=False)],
                            layout, title=title, height=int(90 + 58 * n))
    df = pd.DataFrame({L["step"]: [r[0] for r in rows], L["shape"]: [r[1] for r in rows],
                       L["hook"]: [r[2] for r in rows]}, index=pd.Index(range(1, n + 1), name="#"))
    return fig, df
