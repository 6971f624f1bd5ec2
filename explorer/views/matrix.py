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
    xaxis: str = "x",
    yaxis: str = "y",
) -> list[dict]:
    """A heatmap at integer positions (0..n-1 on both axes); tokens only ever appear as labels.

    ``blocked`` cells become NaN (the grey background shows through), get a "×" marker and the
    hover text ``blocked_text`` — never a big number.
    """
    z = np.asarray(z, dtype=float)
    r, c = z.shape
    shown = z.astype(np.float32)  # what the browser draws (the tables keep the exact values)
    if blocked is not None:
        blocked = np.asarray(blocked, dtype=bool)
        shown[blocked] = np.nan
    if r * c > style.HOVER_CELLS_MAX and not cell_text:
        return _lean_heatmap(shown, row_name, col_name, value_name, coloraxis, digits, name, xaxis, yaxis)
    if cell_text is None:
        cell_text = r <= style.CELL_TEXT_MAX and c <= style.CELL_TEXT_MAX
    numbers = style.fmt_cells(z, digits) if (cell_text or blocked is not None) else None
    text = None
    if cell_text:
        text = numbers if blocked is None else np.where(blocked, blocked_cell, numbers)
    rname, cname, vname = style.esc(row_name), style.esc(col_name), style.esc(value_name)
    rl = style.strings(labels_or_index(rows, r))
    cl = style.strings(labels_or_index(cols, c))
    if blocked is not None:  # hover needs a per-cell word for masked cells: keep it in customdata
        custom = np.stack(np.broadcast_arrays(rl[:, None], cl[None, :],
                                              np.where(blocked, style.esc(blocked_text), numbers)), axis=-1)
        hover = (f"{rname} %{{y}} <b>%{{customdata[0]}}</b><br>{cname} %{{x}} <b>%{{customdata[1]}}</b><br>"
                 f"{vname} = %{{customdata[2]}}<extra></extra>")
    else:  # labels only where they are tokens; the value straight from z (keeps figures small)
        value = f"{vname} = %{{z:.{digits + 1}f}}<extra></extra>"
        if rows is not None and cols is not None:
            custom = np.stack(np.broadcast_arrays(rl[:, None], cl[None, :]), axis=-1)
            hover = (f"{rname} %{{y}} <b>%{{customdata[0]}}</b><br>{cname} %{{x}} <b>%{{customdata[1]}}</b><br>"
                     + value)
        elif rows is not None or cols is not None:  # one label per cell: a 2-D customdata
            custom = np.ascontiguousarray(np.broadcast_to(rl[:, None] if rows is not None else cl[None, :], (r, c)))
            hover = (f"{rname} %{{y}}" + (" <b>%{customdata}</b>" if rows is not None else "") + "<br>"
                     f"{cname} %{{x}}" + (" <b>%{customdata}</b>" if cols is not None else "") + "<br>" + value)
        else:
            custom = None
            hover = f"{rname} %{{y}}<br>{cname} %{{x}}<br>" + value
    gap = 0.5 if max(r, c) <= 64 else 0
    traces = [style.trace(
        "heatmap", z=shown, x=np.arange(c), y=np.arange(r), coloraxis=coloraxis, name=style.esc(name),
        customdata=custom, text=text, texttemplate="%{text}" if cell_text else None,
        hoverongaps=True, xgap=gap, ygap=gap, hovertemplate=hover, xaxis=xaxis,
        yaxis=yaxis,  # no textfont size: plotly fits the numbers to the cells (style.CELL_TEXT_CSS)
    )]
    if blocked is not None and not (cell_text and blocked_cell):  # the cell's "−∞" says it already
        marks = style.masked_markers(blocked, name=f"{name} ×", xaxis=xaxis, yaxis=yaxis)
        if marks is not None:
            traces.append(marks)
    return traces


def _lean_heatmap(shown: np.ndarray, row_name: str, col_name: str, value_name: str, coloraxis: str,
                  digits: int, name: str, xaxis: str, yaxis: str) -> list[dict]:
    """A big matrix (more than style.HOVER_CELLS_MAX cells): float32 values, no per-cell hover
    labels (positions and value only; the axes name the tokens), masked cells have no hover."""
    r, c = shown.shape
    hover = (f"{style.esc(row_name)} %{{y}}<br>{style.esc(col_name)} %{{x}}<br>"
             f"{style.esc(value_name)} = %{{z:.{digits + 1}f}}<extra></extra>")
    return [style.trace("heatmap", z=shown.astype(np.float32), x=np.arange(c, dtype=np.int32),
                        y=np.arange(r, dtype=np.int32), coloraxis=coloraxis, name=style.esc(name),
                        hoverongaps=False, hovertemplate=hover, xaxis=xaxis, yaxis=yaxis)]


class Grid:
    """Panels in rows and columns, laid out as plain dicts (10× faster than make_subplots).

        g = Grid(cols=3, titles=["Q", "K", "V"])
        traces += heatmap(q, xaxis=g.x(0, 0), yaxis=g.y(0, 0), ...)
        g.axes(0, 0, x=token_axis(...), y=...)
        fig = g.figure(traces, title="...", coloraxis=...)
    """

    def __init__(self, rows: int = 1, cols: int = 1, *, col_widths: Sequence[float] | None = None,
                 row_heights: Sequence[float] | None = None, hspace: float = 0.08, vspace: float = 0.12,
                 titles: Sequence[str] | None = None, title_size: int = 13) -> None:
        self.rows, self.cols = rows, cols
        self.x_domains = self._domains(cols, col_widths, hspace)
        self.y_domains = self._domains(rows, row_heights, vspace)[::-1]  # row 0 at the top
        self.titles = list(titles or [])
        self.title_size = title_size
        self.layout: dict = {}
        for r in range(rows):
            for c in range(cols):
                self.layout[self._name("xaxis", r, c)] = dict(domain=self.x_domains[c],
                                                              anchor=self.y(r, c))
                self.layout[self._name("yaxis", r, c)] = dict(domain=self.y_domains[r],
                                                              anchor=self.x(r, c))

    @staticmethod
    def _domains(n: int, weights: Sequence[float] | None, space: float) -> list[list[float]]:
        w = np.asarray(weights if weights is not None else [1.0] * n, dtype=float)
        usable = 1.0 - space * (n - 1)
        w = w / w.sum() * usable
        out, a = [], 0.0
        for wi in w:
            out.append([round(a, 6), round(min(1.0, a + wi), 6)])
            a += wi + space
        return out

    def index(self, r: int, c: int) -> int:
        return r * self.cols + c + 1

    def _name(self, kind: str, r: int, c: int) -> str:
        i = self.index(r, c)
        return kind if i == 1 else f"{kind}{i}"

    def x(self, r: int = 0, c: int = 0) -> str:
        i = self.index(r, c)
        return "x" if i == 1 else f"x{i}"

    def y(self, r: int = 0, c: int = 0) -> str:
        i = self.index(r, c)
        return "y" if i == 1 else f"y{i}"

    def axes(self, r: int, c: int, *, x: dict | None = None, y: dict | None = None) -> None:
        self.layout[self._name("xaxis", r, c)].update(x or {})
        self.layout[self._name("yaxis", r, c)].update(y or {})

    def title_annotations(self, size: int | None = None) -> list[dict]:
        size = size or self.title_size
        anns = []
        for k, text in enumerate(self.titles):
            if not text:
                continue
            r, c = divmod(k, self.cols)
            if r >= self.rows:
                break
            x0, x1 = self.x_domains[c]
            anns.append(dict(text=text, x=(x0 + x1) / 2, y=self.y_domains[r][1], xref="paper", yref="paper",
                             xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=size)))
        return anns

    def figure(self, traces, *, title: str = "", height: int | None = None, subtitle: str | None = None,
               **layout) -> go.Figure:
        lay = {**self.layout, **layout}
        anns = self.title_annotations() + list(layout.get("annotations", []))
        if anns:
            lay["annotations"] = anns
        return style.make_figure(traces, lay, title=title, height=height, subtitle=subtitle)


def token_axes(*, rows: Sequence[str] | None, cols: Sequence[str] | None, n_rows: int, n_cols: int,
               row_title: str = "", col_title: str = "") -> tuple[dict, dict]:
    """(x, y) axis dicts for one matrix panel: tokens or indices; rows run top to bottom."""
    xa = style.token_axis(cols, col_title) if cols is not None else style.index_axis(n_cols, col_title)
    ya = style.token_axis(rows, row_title) if rows is not None else style.index_axis(n_rows, row_title)
    ya["range"] = [n_rows - 0.5, -0.5]
    ya["tickangle"] = 0  # row labels always read horizontally
    return xa, ya


def row_labels(tokens: Sequence[str] | None, n: int) -> list[str]:
    """Unique, readable labels for a table: '3:l' (tokens repeat, so the position comes first)."""
    if tokens is None:
        return [str(i) for i in range(n)]
    return [f"{i}:{style.visible(t)}" for i, t in enumerate(tokens)]


def matrix_df(z: np.ndarray, rows: Sequence[str] | None = None, cols: Sequence[str] | None = None,
              *, row_name: str = "row", col_name: str = "column") -> pd.DataFrame:
    """The matrix as a table (the exact values, −inf included), labelled by position:token."""
    z = np.asarray(z)
    df = pd.DataFrame(z, index=pd.Index(row_labels(rows, z.shape[0]), dtype=object),
                      columns=pd.Index(row_labels(cols, z.shape[1]), dtype=object))
    df.index.name = row_name
    df.columns.name = col_name
    return df
