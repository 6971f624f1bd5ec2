"""A head that learns (issue 35): the seed's training, replayed. A pure function: the run's record
(model/files/seed_checkpoints.py: ``training_record``) in, one small figure out; no model runs here.

    loss_curve(record, step=400, head="L1H2", labels=i18n.fig_labels("ko"))
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from . import style

_lab = style.with_labels
CURVE_POINTS = 200  # the training loss as means over this many spans of steps (4100 single steps are noise)


def reversing_head(record: dict) -> str:
    """The cross-attention head ("L{layer}H{head}") that puts the most weight on the anti-diagonal at
    the last checkpoint: the head that reverses."""
    last = record["heads"][str(record["steps"][-1])]
    return max(last, key=lambda k: last[k]["anti_diagonal"])


def smoothed(losses, points: int = CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(steps, means): the per-step losses (index i = step i + 1) averaged over ``points`` equal spans,
    each placed at its last step."""
    y = np.asarray([np.nan if v is None else v for v in losses], dtype=np.float64)
    n = len(y)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    edges = np.unique(np.linspace(0, n, min(points, n) + 1).round().astype(int))
    means = np.array([np.mean(v[np.isfinite(v)]) if np.isfinite(v).any() else np.nan
                      for v in (y[a:b] for a, b in zip(edges[:-1], edges[1:]))])
    return edges[1:].astype(np.float64), means


def loss_curve(record: dict, step: int | None, *, head: str | None = None, title: str = "",
               labels: dict | None = None, height: int = 300) -> go.Figure:
    """The training loss along the run (means over spans of steps, where the record has it), each checkpoint's recorded
    loss on the evaluation inputs, and the reversing head's weight on the anti-diagonal at each
    checkpoint (right axis, 0..1); the checkpoint ``step`` marked (None: no step of this run, e.g. the
    shipped weights when the run replayed here does not end on them), the second stage's start dotted."""
    L = _lab(labels)
    steps = [int(s) for s in record["steps"]]
    head = head or reversing_head(record)
    xs, ys = smoothed(record["train_loss"])
    ev = [record["eval"][str(s)]["loss"] for s in steps]
    diag = [record["heads"][str(s)][head]["anti_diagonal"] for s in steps]
    layer, h = head[1:].split("H")
    head_name = L["train_head"].format(layer=layer, head=h)
    traces = [  # the training loss, where the run kept it (a replayed part may not have)
        style.trace("scatter", x=xs, y=ys, mode="lines", name=L["train_loss"], line=dict(color="#9e9e9e", width=1.5),
                    hovertemplate=f"{style.esc(L['train_step'])} %{{x}}<br>{style.esc(L['train_loss'])} %{{y:.3f}}"
                                  "<extra></extra>")] if np.isfinite(ys).any() else []
    traces += [
        style.trace("scatter", x=steps, y=ev, mode="lines+markers", name=L["eval_loss"],
                    line=dict(color=style.OKABE_ITO[0], width=2), marker=dict(size=7),
                    hovertemplate=f"{style.esc(L['train_step'])} %{{x}}<br>{style.esc(L['eval_loss'])} %{{y:.4f}}"
                                  "<extra></extra>"),
        style.trace("scatter", x=steps, y=diag, mode="lines+markers", name=head_name, yaxis="y2",
                    line=dict(color=style.OKABE_ITO[3], width=2, dash="dash"), marker=dict(size=7, symbol="diamond"),
                    hovertemplate=f"{style.esc(L['train_step'])} %{{x}}<br>{style.esc(head_name)} %{{y:.3f}}"
                                  "<extra></extra>"),
    ]
    if step in steps:  # the checkpoint shown: its two numbers ringed
        i = steps.index(step)
        ring = dict(size=16, color="rgba(0,0,0,0)", line=dict(width=2.5, color="#000000"))
        traces += [style.trace("scatter", x=[step], y=[y], yaxis=axis, mode="markers", showlegend=False,
                               hoverinfo="skip", marker=ring) for y, axis in ((ev[i], "y"), (diag[i], "y2"))]
    shapes = [dict(type="line", xref="x", yref="paper", x0=step, x1=step, y0=0, y1=1,
                   line=dict(color="#000000", width=1.5))] if step is not None else []
    stages = [int(s) for s in record.get("stages", [])[1:]]
    shapes += [dict(type="line", xref="x", yref="paper", x0=s, x1=s, y0=0, y1=1,
                    line=dict(color="#6b6b6b", width=1, dash="dot")) for s in stages]
    top = max([float(v) for v in ys if np.isfinite(v)] + ev) * 1.05
    small = dict(size=11)
    layout = dict(  # narrow (a sidebar): short ticks (1k, 2k), the legend under the axis title
        xaxis=dict(title=dict(text=style.esc(L["train_step"]), font=small, standoff=4), zeroline=False,
                   range=[-0.01 * steps[-1], steps[-1] * 1.01], tickformat="~s", tickangle=0, nticks=6),
        yaxis=dict(title=dict(text=style.esc(L["loss_nats"]), font=small, standoff=2), range=[0, top],
                   zeroline=False, nticks=5),
        yaxis2=dict(title=dict(text=style.esc(L["train_diag"]), font=small, standoff=2), overlaying="y",
                    side="right", range=[0, 1.04], tickvals=[0, 0.5, 1], showgrid=False, zeroline=False),
        shapes=shapes, plot_bgcolor="#ffffff", showlegend=True, font=small, margin=dict(l=40, r=40, t=40, b=30),
        legend=dict(orientation="h", x=0, y=-0.32, xanchor="left", yanchor="top", font=dict(size=10)),
    )
    return style.make_figure(traces, layout, title=title, height=height)
