"""The building block of most views: a labelled heatmap trace, and the same matrix as a table."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style


def labels_or_index(labels: Sequence[str] | None, n: int) -> list[str]:
    """Escaped, visible labels; plain indices when ``labels`` is None."""
    return style.token_labels(labels) if labels is not None else [str(i) for i in range(n)]


def heatmap(
    z: np.ndarray,
    *,
    rows: Sequence[str] | None = None,
    cols: Sequence[str] | None = None,
    row_name: str = "row",
    col_name: str = "column",
    value_name: str = "value",
    blocked: np.ndarray | None = None,
    blocked_text: str = "masked",
    blocked_cell: str = "",
    coloraxis: str = "coloraxis",
    digits: int = 3,
    cell_text: bool | None = None,
    name: str = "",
) -> list[go.BaseTraceType]:
    """A heatmap at integer positions (0..n-1 on both axes); tokens only ever appear as labels.

    ``blocked`` cells become NaN (the grey background shows through), get a "×" marker and the
    hover text ``blocked_text`` — never a big number.
    """
    z = np.asarray(z, dtype=float)
    r, c = z.shape
    rl, cl = labels_or_index(rows, r), labels_or_index(cols, c)
    shown = z.copy()
    if blocked is not None:
        blocked = np.asarray(blocked, dtype=bool)
        shown[blocked] = np.nan
    if cell_text is None:
        cell_text = r <= style.CELL_TEXT_MAX and c <= style.CELL_TEXT_MAX
    text = None
    if cell_text or blocked is not None:
        text = np.empty((r, c), dtype=object)
        for i in range(r):
            for j in range(c):
                text[i, j] = (blocked_cell if blocked is not None and blocked[i, j]
                              else style.fmt(z[i, j], digits))
    rname, cname, vname = style.esc(row_name), style.esc(col_name), style.esc(value_name)
    if blocked is not None:  # hover needs a per-cell word for masked cells: keep it in customdata
        custom = np.empty((r, c, 3), dtype=object)
        custom[..., 0] = np.asarray(rl, dtype=object)[:, None]
        custom[..., 1] = np.asarray(cl, dtype=object)[None, :]
        custom[..., 2] = np.where(blocked, style.esc(blocked_text), text)
        hover = (f"{rname} %{{y}} <b>%{{customdata[0]}}</b><br>{cname} %{{x}} <b>%{{customdata[1]}}</b><br>"
                 f"{vname} = %{{customdata[2]}}<extra></extra>")
    else:  # labels only where they are tokens; the value straight from z (keeps figures small)
        custom = np.empty((r, c, 2), dtype=object)
        custom[..., 0] = np.asarray(rl if rows is not None else [""] * r, dtype=object)[:, None]
        custom[..., 1] = np.asarray(cl if cols is not None else [""] * c, dtype=object)[None, :]
        if rows is None and cols is None:
            custom = None
        hover = (f"{rname} %{{y}}" + (" <b>%{customdata[0]}</b>" if rows is not None else "") + "<br>"
                 f"{cname} %{{x}}" + (" <b>%{customdata[1]}</b>" if cols is not None else "") + "<br>"
                 f"{vname} = %{{z:.{digits + 1}f}}<extra></extra>")
    trace = go.Heatmap(
        z=shown, x=list(range(c)), y=list(range(r)), coloraxis=coloraxis, name=style.esc(name),
        customdata=custom, text=text, texttemplate="%{text}" if cell_text else None,
        textfont=dict(size=9), hoverongaps=True, xgap=0.5 if max(r, c) <= 64 else 0,
        ygap=0.5 if max(r, c) <= 64 else 0, hovertemplate=hover,
    )
    traces: list[go.BaseTraceType] = [trace]
    if blocked is not None:
        marks = style.masked_markers(blocked, name=f"{name} masked")
        if marks is not None:
            traces.append(marks)
    return traces


def add(fig: go.Figure, traces, row: int | None = None, col: int | None = None) -> None:
    for t in traces:
        if row is None:
            fig.add_trace(t)
        else:
            fig.add_trace(t, row=row, col=col)


def set_axes(fig: go.Figure, *, rows: Sequence[str] | None, cols: Sequence[str] | None,
             n_rows: int, n_cols: int, row_title: str = "", col_title: str = "",
             row: int | None = None, col: int | None = None) -> None:
    """Token or index axes for one panel; rows run top to bottom like a matrix."""
    kw = {} if row is None else dict(row=row, col=col)
    xa = style.token_axis(cols, col_title) if cols is not None else style.index_axis(n_cols, col_title)
    ya = style.token_axis(rows, row_title) if rows is not None else style.index_axis(n_rows, row_title)
    ya["range"] = [n_rows - 0.5, -0.5]
    fig.update_xaxes(**xa, **kw)
    fig.update_yaxes(**ya, **kw)


def row_labels(tokens: Sequence[str] | None, n: int) -> list[str]:
    """Unique, readable labels for a table: '3:l' (tokens repeat, so the position comes first)."""
    if tokens is None:
        return [str(i) for i in range(n)]
    return [f"{i}:{style.visible(t)}" for i, t in enumerate(tokens)]


def matrix_df(z: np.ndarray, rows: Sequence[str] | None = None, cols: Sequence[str] | None = None,
              *, row_name: str = "row", col_name: str = "column") -> pd.DataFrame:
    """The matrix as a table (the exact values, −inf included), labelled by position:token."""
    z = np.asarray(z)
    df = pd.DataFrame(z, index=row_labels(rows, z.shape[0]), columns=row_labels(cols, z.shape[1]))
    df.index.name = row_name
    df.columns.name = col_name
    return df
