"""Activation patching as a figure: a layer × position (or layer × head) heatmap of log p(answer).

    fig, df = patching_figure(result, title="...", words={...}, labels=i18n.fig_labels("ko"))

``result`` is a ``model.analysis.patching.PatchResult`` (computed outside: by the app, cached, with a progress
bar; by the exporter): rows are layers, columns the positions (their tokens on the axis, the clean
sentence's, the corrupted one's in the hover) or the heads. Each cell: log p of the clean run's
answer at the scored position when that one cell of the corrupted run is taken from the clean run.
The colour runs from the corrupted run's log p (nothing restored) to the clean run's (all restored).

The table has the columns ``layer``, ``position`` (``head`` for the heads variant) and ``logp``, one
row per cell (in Korean their catalogue words: 레이어, 위치 / 헤드, 로그확률).
Every token and the answer go through ``style.token_label`` / ``style.esc``: nothing typed is markup.
No Streamlit here.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style

CELL_TEXT_MAX_ROWS = 40  # write the numbers in the cells up to this many layers (and style.CELL_TEXT_MAX columns)


def patching_table(result, labels: dict | None = None) -> pd.DataFrame:
    """One row per cell: ``layer``, ``position`` (or ``head``), ``logp`` (in ``labels``' language)."""
    L = style.with_labels(labels)
    col = L["position"] if result.kind == "positions" else L["head"]
    rows = result.rows()
    return pd.DataFrame({L["layer"]: np.array([r[0] for r in rows], dtype=np.int64),
                         col: np.array([r[1] for r in rows], dtype=np.int64),
                         L["col_logp"]: np.array([r[2] for r in rows], dtype=np.float64)})


def patching_figure(result, *, title: str = "patching", words: dict, labels: dict | None = None,
                    ) -> tuple[go.Figure, pd.DataFrame]:
    """The heatmap and its table. ``words``: "colour" (the colour bar's title), "subtitle" (with
    {answer}, {clean}, {corrupted}, {scored}, {n}), "clean", "corrupted" (hover: the two tokens)."""
    L = style.with_labels(labels)
    z = np.asarray(result.logp, dtype=np.float32)  # (layers, columns)
    n_layers, n_cols = z.shape
    heads = result.kind == "heads"
    layer_name = style.esc(L["layer"])
    if heads:
        x_axis = dict(title=dict(text=style.esc(L["head"])), tickmode="array", tickvals=list(range(n_cols)),
                      range=[-0.5, n_cols - 0.5], showgrid=False, zeroline=False)
        custom = None
        hover = f"{layer_name} %{{y}}, {style.esc(L['head'])} %{{x}}<br>log p = %{{z:.3f}}<extra></extra>"
    else:
        clean = list(result.clean_tokens)
        x_axis = style.token_axis(clean, L["position"])
        pairs = [f"{style.token_label(a)}" + ("" if a == b else f" ← {style.token_label(b)}")
                 for a, b in zip(clean, result.corrupted_tokens)]
        custom = style.strings([pairs] * n_layers)
        hover = (f"{layer_name} %{{y}}, {style.esc(L['position'])} %{{x}}: %{{customdata}}<br>"
                 f"log p = %{{z:.3f}}<extra></extra>")
    lo = float(min(result.corrupted_logp, np.nanmin(z)))
    hi = float(max(result.clean_logp, np.nanmax(z)))
    if hi - lo < 1e-6:
        lo -= 0.5
        hi += 0.5
    small = n_cols <= style.CELL_TEXT_MAX and n_layers <= CELL_TEXT_MAX_ROWS
    trace = dict(z=z, x=np.arange(n_cols), y=np.arange(n_layers), coloraxis="coloraxis", xgap=1, ygap=1,
                 name=style.esc(words["colour"]), hovertemplate=hover)
    if custom is not None:
        trace["customdata"] = custom
    if small:
        trace.update(text=style.fmt_cells(z, 2), texttemplate="%{text}", textfont=dict(size=10))
    ctx = list(result.context)
    scored = ctx[result.scored] if 0 <= result.scored < len(ctx) else ""
    subtitle = style.esc(words["subtitle"].format(
        answer=style.visible(result.answer), clean=f"{result.clean_logp:.2f}",
        corrupted=f"{result.corrupted_logp:.2f}", scored=f"{result.scored} “{style.visible(scored)}”",
        n=result.forwards))
    lay = dict(
        xaxis=x_axis,
        yaxis=dict(title=dict(text=layer_name), tickmode="array", tickvals=style.tick_positions(n_layers),
                   range=[n_layers - 0.5, -0.5], showgrid=False, zeroline=False),
        coloraxis=dict(colorscale=style.WEIGHTS, cmin=lo, cmax=hi,
                       colorbar=dict(title=dict(text=style.esc(words["colour"])))),
        plot_bgcolor="white",
    )
    height = int(min(1000, max(380, 150 + 22 * n_layers)))
    fig = style.make_figure([style.trace("heatmap", **trace)], lay, title=title, height=height, subtitle=subtitle)
    return fig, patching_table(result, labels)
