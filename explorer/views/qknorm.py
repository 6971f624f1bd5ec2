"""QK-norm (Qwen3, Gemma 3): one head's q and its K/V head's k before and after their norm, and
what the norm does to the scores. Arrays in, ``(figure, table)`` out; no Streamlit.

    fig, df = qk_norm_figure(q_before, q_after, k_before, k_after, s_before, s_after, tokens,
                             kv_head=0, head=1, labels=i18n.fig_labels("ko"))

``*_before`` may be None (the projection weights were not given): only the normed side is drawn.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .matrix import Grid

_lab = style.with_labels
BEFORE, AFTER = style.OKABE_ITO[1], style.OKABE_ITO[0]  # orange, blue


def rms_rows(x: np.ndarray | None) -> np.ndarray | None:
    """(T, d) -> (T,) the root mean square of each row."""
    return None if x is None else np.sqrt((np.asarray(x, dtype=np.float64) ** 2).mean(-1))


def largest_rows(s: np.ndarray | None) -> np.ndarray | None:
    """(Tq, Tk) scores -> (Tq,) each query's largest |score| over the keys up to it (causal)."""
    if s is None:
        return None
    s = np.abs(np.asarray(s, dtype=np.float64))
    keep = np.tril(np.ones(s.shape, dtype=bool))
    return np.where(keep, s, 0.0).max(-1)


def qk_norm_figure(q_before, q_after, k_before, k_after, s_before, s_after, tokens: Sequence[str], *,
                   kv_head: int, head: int, title: str = "QK-norm",
                   labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Three panels over the positions: rms of q (head ``head``), rms of k (K/V head ``kv_head``),
    each query's largest |score| (scale included, rotary left out: it keeps lengths); bars before
    (orange) and after (blue) the norm. The table: one row per position with the six numbers."""
    L = _lab(labels)
    n = len(q_after)
    ticks = style.strings(style.token_labels(list(tokens)[:n]))
    x = np.arange(n)
    panels = [(f"{L['qk_q_panel']} (h {head})", rms_rows(q_before), rms_rows(q_after), L["qk_rms"]),
              (f"{L['qk_k_panel']} (K/V {kv_head})", rms_rows(k_before), rms_rows(k_after), L["qk_rms"]),
              (L["qk_scores_panel"], largest_rows(s_before), largest_rows(s_after), L["qk_largest"])]
    g = Grid(cols=3, titles=[style.esc(p[0]) for p in panels], hspace=0.08, title_size=12)
    traces = []
    for c, (_, before, after, what) in enumerate(panels):
        for side, values, colour in ((L["qk_before"], before, BEFORE), (L["qk_after"], after, AFTER)):
            if values is None:
                continue
            traces.append(style.trace(
                "bar", x=x, y=values, name=style.esc(side), marker=dict(color=colour), showlegend=c == 0,
                legendgroup=style.esc(side), customdata=ticks, xaxis=g.x(0, c), yaxis=g.y(0, c),
                hovertemplate=f"%{{customdata}}<br>{style.esc(what)} = %{{y:.3f}}<extra>{style.esc(side)}</extra>"))
        g.axes(0, c, x=dict(tickmode="array", tickvals=list(x), ticktext=list(ticks), title=style.esc(L["position"])),
               y=dict(title=style.esc(what) if c in (0, 2) else "", rangemode="tozero"))
    fig = g.figure(traces, title=title, height=380, barmode="group", plot_bgcolor="white", showlegend=True,
                   legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left"),
                   margin=dict(b=110))
    cols = {L["position"]: x, L["token"]: list(tokens)[:n]}
    for (_, before, after, what), name in zip(panels, ("q", "k", "|q·k|")):
        if before is not None:
            cols[f"{what} {name} ({L['qk_before']})"] = before
        cols[f"{what} {name} ({L['qk_after']})"] = after
    return fig, pd.DataFrame(cols)
