"""Long inputs (issue 34): the figures of one head at up to 4,096 tokens and the long-context summaries.
Pure functions (arrays in, plotly figures or bytes out); the arrays come from model/analysis/long.py.

    fig = overview_figure(grid, block, tokens, window=512, causal=True, zoom=(q0, k0, n))
    fig = zoom_figure(weights, allowed, q0, k0, tokens)          # exact values, token labels
    fig = summary_figure(first, distance, inside, window_layers, layer=, head=, window=512)
    for chunk in cells_csv(model.analysis.long.nonzero_cells(lr, layer, head)): ...

The overview is a heatmap of a downsampled grid: each drawn cell is the **largest** weight in its
block × block square of the pattern (block = 1 when T ≤ the grid's cells: then every cell is one
weight). The largest, not the mean, so that one strong key (a sink, a previous-token head's diagonal)
stays visible at 4,096 tokens; the colour bar runs from 0 to the largest value drawn and says which of
the two it is. Squares the mask hides entirely are NaN: the grey background shows the causal edge and
the end of the window's band. The grid travels as a float32 typed array (``fastpath``): 512 × 512
cells ≈ 1.4 MB of JSON.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer import i18n

from . import style
from .matrix import Grid, heatmap

GRID_CELLS = 512  # cells per side of the overview (a 4,096-token pattern: 8 × 8 tokens a cell)
ZOOM = 20  # rows and columns of the zoom (style.CELL_TEXT_MAX: every value written in its cell)
SUMMARY_POINTS = 512  # query positions drawn per line of the summaries (means of neighbouring queries)
N_TICKS = 16


def _lab(labels: dict | None) -> dict:
    return style.with_labels(labels)


def position_label(i: int, token: str, n: int = 12) -> str:
    """"37:␣cat": the position first (tokens repeat), the token visible, shortened, escaped."""
    return f"{i}:" + style.esc(style.plain_text(style.visible(token), n))


def _ticks(tokens: Sequence[str]) -> dict:
    """Axis ticks at about N_TICKS positions, each labelled with its position and token."""
    T = len(tokens)
    step = max(1, int(np.ceil(T / N_TICKS)))
    vals = list(range(0, T, step))
    return dict(tickmode="array", tickvals=vals, ticktext=[position_label(i, tokens[i]) for i in vals],
                showgrid=False, zeroline=False)


def overview_figure(grid: np.ndarray, block: int, tokens: Sequence[str], *, window: int = 0, causal: bool = True,
                    zoom: tuple[int, int, int] | None = None, title: str = "", labels: dict | None = None,
                    height: int = 760) -> go.Figure:
    """The whole pattern of one head: ``grid`` (n, n) from ``model.analysis.long.block_grid`` (NaN where
    every cell of the square is masked), drawn at token positions (a cell spans ``block`` positions);
    the causal edge and, with ``window``, the window's far edge as dashed lines; ``zoom`` (q0, k0, size)
    framed."""
    L = _lab(labels)
    T = len(tokens)
    z = np.asarray(grid, dtype=np.float32)
    finite = z[np.isfinite(z)]
    zmax = float(finite.max()) if finite.size else 1.0
    centre = (block - 1) / 2
    if block == 1:
        value = L["weight"]
        hover = (f"{style.esc(L['query'])} %{{y:.0f}}<br>{style.esc(L['key'])} %{{x:.0f}}<br>"
                 f"{style.esc(value)} = %{{z:.4f}}<extra></extra>")
    else:
        value = L["long_block_max"].format(b=block)
        hover = (f"{style.esc(L['query'])} ≈ %{{y:.1f}}<br>{style.esc(L['key'])} ≈ %{{x:.1f}}"
                 f"<br>{style.esc(value)} = %{{z:.4f}}<extra></extra>")  # the block's centre
    traces = [style.trace("heatmap", z=z, x0=centre, dx=block, y0=centre, dy=block, coloraxis="coloraxis",
                          hoverongaps=False, hovertemplate=hover, name=style.esc(value))]
    edge = dict(color="white", width=1, dash="dot")
    if causal:
        traces.append(style.trace("scatter", x=[0, T - 1], y=[0, T - 1], mode="lines", line=edge,
                                  name=style.esc(L["long_causal_edge"]), hoverinfo="skip", showlegend=False))
        if window and window < T:
            traces.append(style.trace("scatter", x=[0, T - window], y=[window - 1, T - 1], mode="lines",
                                      line={**edge, "dash": "dash"}, hoverinfo="skip", showlegend=False,
                                      name=style.esc(L["long_window_edge"].format(w=window))))
    shapes = []
    if zoom is not None:
        q0, k0, n = zoom
        shapes.append(dict(type="rect", x0=k0 - 0.5, x1=k0 + n - 0.5, y0=q0 - 0.5, y1=q0 + n - 0.5,
                           line=dict(color="#D55E00", width=2), xref="x", yref="y"))
    xa = {**_ticks(tokens), "title": dict(text=style.esc(L["key"])), "range": [-0.5, T - 0.5],
          "tickangle": -50, "constrain": "domain"}
    ya = {**_ticks(tokens), "title": dict(text=style.esc(L["query"])), "range": [T - 0.5, -0.5],
          "scaleanchor": "x", "constrain": "domain"}
    return style.make_figure(traces, dict(xaxis=xa, yaxis=ya, shapes=shapes,
                                          coloraxis=style.weights_axis(value, cmax=zmax)),
                             title=title, height=height)


def zoom_figure(weights: np.ndarray, allowed: np.ndarray, q0: int, k0: int, tokens: Sequence[str], *,
                title: str = "", labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """A region of the pattern at full resolution: every weight exact, written in its cell (up to 20 ×
    20), rows and columns labelled with their positions and tokens; masked cells grey with a ×."""
    L = _lab(labels)
    w = np.asarray(weights, dtype=np.float32)
    r, c = w.shape
    rows = [f"{q0 + i}:{tokens[q0 + i]}" for i in range(r)]
    cols = [f"{k0 + j}:{tokens[k0 + j]}" for j in range(c)]
    blocked = ~np.asarray(allowed, dtype=bool)
    traces = heatmap(w, rows=rows, cols=cols, row_name=L["query"], col_name=L["key"], value_name=L["weight"],
                     blocked=blocked, blocked_text=f"{L['masked']} (0)", name=L["weight"], digits=3)
    xa = {**style.token_axis(cols, L["key"]), "tickangle": -50}
    ya = {**style.token_axis(rows, L["query"]), "range": [r - 0.5, -0.5], "tickangle": 0}
    finite = w[~blocked]
    fig = style.make_figure(traces, dict(xaxis=xa, yaxis=ya, coloraxis=style.weights_axis(
        L["weight"], cmax=float(finite.max()) if finite.size and finite.max() > 0 else 1.0)),
        title=title, height=max(420, 120 + 26 * r))
    df = pd.DataFrame(np.where(blocked, 0.0, w), index=pd.Index([str(q0 + i) for i in range(r)], dtype=object),
                      columns=pd.Index([str(k0 + j) for j in range(c)], dtype=object))
    df.index.name, df.columns.name = L["query"], L["key"]
    return fig, df


def _thin(a: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): ``a`` (..., T) averaged over runs of neighbouring queries so at most ``points`` remain;
    x is each run's mean position."""
    T = a.shape[-1]
    step = max(1, int(np.ceil(T / points)))
    n = -(-T // step)
    pad = n * step - T
    x = np.arange(T, dtype=np.float64)
    if pad:
        a = np.concatenate([a, np.full((*a.shape[:-1], pad), np.nan)], axis=-1)
        x = np.concatenate([x, np.full(pad, np.nan)])
    return (np.nanmean(x.reshape(n, step), axis=-1).astype(np.float32),
            np.nanmean(a.reshape(*a.shape[:-1], n, step), axis=-1).astype(np.float32))


def summary_figure(first: np.ndarray, distance: np.ndarray, inside: np.ndarray, window_layers: Sequence[int], *,
                   layer: int, head: int, window: int, own_window: bool, title: str = "",
                   labels: dict | None = None, points: int = SUMMARY_POINTS) -> go.Figure:
    """Three panels against query position: the weight on the first token, the mean distance to the
    keys attended, the weight within ``window`` keys of the query. One line per layer (the mean over
    its heads), local (sliding-window) layers in one colour, global layers in another; the selected
    head drawn in black."""
    L = _lab(labels)
    n_layers = first.shape[0]
    local = set(window_layers)
    names = [L["long_first"], L["long_distance"], L["long_inside"].format(w=window)]
    g = Grid(rows=3, cols=1, vspace=0.07, titles=[style.esc(n) for n in names])
    colours = {True: style.LINE_COLOURS[1], False: style.LINE_COLOURS[0]}
    kinds = {True: L["long_local"].format(w=window), False: L["long_global"] if own_window or local
             else L["long_all_layers"]}
    traces, legend_done = [], set()
    for r, arr in enumerate((first, distance, inside)):
        for li in range(n_layers):
            x, y = _thin(arr[li].mean(axis=0), points)
            is_local = li in local
            show = r == 0 and is_local not in legend_done
            if show:
                legend_done.add(is_local)
            traces.append(style.trace(
                "scatter", x=x, y=y, mode="lines", line=dict(color=colours[is_local], width=1),
                opacity=0.75, name=style.esc(kinds[is_local]), legendgroup=str(is_local), showlegend=show,
                hovertemplate=f"{style.esc(L['layer'])} {li}<br>{style.esc(L['query'])} %{{x:.0f}}<br>%{{y:.3f}}<extra></extra>",
                xaxis=g.x(r, 0), yaxis=g.y(r, 0)))
        x, y = _thin(arr[layer, head][None], points)
        traces.append(style.trace(
            "scatter", x=x, y=y[0], mode="lines", line=dict(color="#000000", width=2),
            name=style.esc(L["long_selected"].format(layer=layer, head=head)), legendgroup="sel", showlegend=r == 0,
            hovertemplate=f"L{layer} H{head}<br>{style.esc(L['query'])} %{{x:.0f}}<br>%{{y:.3f}}<extra></extra>",
            xaxis=g.x(r, 0), yaxis=g.y(r, 0)))
        xa = dict(title=dict(text=style.esc(L["long_query_position"]) if r == 2 else ""), showgrid=True,
                  zeroline=False)
        if r:
            xa["matches"] = "x"
        g.axes(r, 0, x=xa,
               y=dict(title=dict(text=style.esc(L["long_distance_unit"] if r == 1 else L["weight"])),
                      showgrid=True, zeroline=False, rangemode="tozero"))
    return g.figure(traces, title=title, height=820, plot_bgcolor="#ffffff",
                    legend=dict(orientation="h", y=-0.08, x=0, yanchor="top"))


def summary_table(first: np.ndarray, distance: np.ndarray, inside: np.ndarray, window_layers: Sequence[int],
                  labels: dict | None = None) -> pd.DataFrame:
    """Every layer, head and query position: the three summaries, and whether the layer is local."""
    L, H, T = first.shape
    lay, hd, q = np.meshgrid(np.arange(L), np.arange(H), np.arange(T), indexing="ij")
    local = np.isin(lay, list(window_layers))
    return pd.DataFrame({"layer": lay.ravel(), "head": hd.ravel(), "query": q.ravel(),
                         "local": local.ravel(), "first_token": first.ravel(), "mean_distance": distance.ravel(),
                         "inside_window": inside.ravel()})


def layer_means(first: np.ndarray, distance: np.ndarray, inside: np.ndarray, window_layers: Sequence[int],
                start: int = 0) -> pd.DataFrame:
    """Per layer and head, each summary's mean over the queries from ``start`` on (e.g. past the window,
    where local and global layers differ)."""
    L, H, _ = first.shape
    rows = []
    for li in range(L):
        for h in range(H):
            rows.append({"layer": li, "head": h, "local": li in set(window_layers),
                         "first_token": float(first[li, h, start:].mean()),
                         "mean_distance": float(distance[li, h, start:].mean()),
                         "inside_window": float(inside[li, h, start:].mean())})
    return pd.DataFrame(rows)


def cells_csv(cells: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Iterable[bytes]:
    """CSV (query,key,weight; CRLF) of every nonzero cell, a block of rows at a time: the header, then
    one chunk per block. Only numbers, none negative: no cell a spreadsheet would run as a formula.
    Weights with 9 significant digits (a float32 read back exactly)."""
    yield b"query,key,weight\r\n"
    for qi, kj, w in cells:
        if len(w):
            yield "".join(f"{a},{b},{x:.9g}\r\n" for a, b, x in zip(qi.tolist(), kj.tolist(), w.tolist())).encode()


# --- the words around the figures (both languages, from the run's facts) --------------------------------

def layer_kind(window: int, layer_window: int, causal: bool, lang: str = "en") -> str:
    """What the layer's mask is: local (its window), global (the model has local layers, not this one),
    causal (no window anywhere), or bidirectional (an encoder)."""
    if layer_window:
        return i18n.t("long.kind.local", lang, w=layer_window)
    if not causal:
        return i18n.t("long.kind.bidirectional", lang)
    return i18n.t("long.kind.global" if window else "long.kind.causal", lang)


def overview_note(block: int, zmax: float, layer_window: int, causal: bool, T: int, lang: str = "en",
                  zoom: bool = True) -> str:
    """The sentences under the whole pattern: what a cell is, what grey and the lines are (``zoom``: a
    zoom with every weight follows, as on the long page)."""
    parts = [i18n.t("long.note.cells", lang, max=style.fmt(zmax, 4)) if block == 1
             else i18n.t("long.note.block", lang, b=block, max=style.fmt(zmax, 4))]
    if block > 1 and zoom:
        parts.append(i18n.t("long.note.zoom", lang))
    parts.append(i18n.t("long.note.causal", lang) if causal else i18n.t("long.note.full", lang))
    if layer_window and layer_window < T:
        parts.append(i18n.t("long.note.window", lang, w=layer_window))
    return " ".join(parts)


def summary_note(window: int, own_window: bool, heads: int, layer: int, head: int, lang: str = "en") -> str:
    which = i18n.t("long.which.own" if own_window else "long.which.reference", lang, w=window)
    return i18n.t("long.summary_note", lang, w=window, which=which, heads=heads, layer=layer, head=head)


def compare_note(first: np.ndarray, distance: np.ndarray, window_layers: Sequence[int], window: int,
                 lang: str = "en") -> str | None:
    """Local against global layers past the window (the mean over their heads and queries), or None when
    the model has not both kinds or the text does not reach past the window."""
    L, _, T = first.shape
    local = [i for i in range(L) if i in set(window_layers)]
    glob = [i for i in range(L) if i not in set(window_layers)]
    if not local or not glob or T <= window:
        return None
    f = lambda a, ls: float(a[ls, :, window:].mean())  # noqa: E731
    return i18n.t("long.compare", lang, start=window, lf=style.fmt(f(first, local), 3), ld=style.fmt(f(distance, local), 1),
                  gf=style.fmt(f(first, glob), 3), gd=style.fmt(f(distance, glob), 1))
