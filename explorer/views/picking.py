"""Click to drill: clickable copies of figures, and what a click chose.

Plotly heatmaps cannot be selected (plotly.js has no point selection for them), and Streamlit 1.67
reports a click on a chart only as a selection (``st.plotly_chart(..., on_select=...,
selection_mode="points")``: plotly's ``clickmode="event+select"``). So the page draws a copy of the
figure with invisible, selectable targets on top (``pickable``):

    cell   one marker at every cell centre of the first heatmap (the query × key matrix): a click
           chooses (query, key) for the one-cell derivation
    head   one marker in the middle of every thumbnail of the all-heads overview (traces named
           "L{layer} H{head}"): a click chooses (layer, head)

The targets are small transparent scatter markers, and the copy's layout has ``hoverdistance=-1``
(no cut-off), so the target nearest the pointer is the one hovered and clicked: the cell under the
pointer, whatever the cells' size. (plotly.js measures a marker's distance from its edge and treats
everything inside the marker as equally near, so a marker must stay smaller than a cell.) The hover
text moves from the heatmap to the targets (plotly shows the closest point's only): the copy's heatmap
is not hoverable and hands its per-cell labels to them, so they are sent once, not twice. The input figure, which the app
memoises and shares between sessions, is never changed: the copy shares its arrays and adds traces.
Export uses the figure without targets.

    fig2 = pickable(fig, "cell", "en")
    choice = picked(selection_points, fig2)  # ("cell", query, key) | ("head", layer, head) | None
    apply(st.session_state, choice)          # the page's state follows (no Streamlit import here)
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping

import numpy as np
import plotly.graph_objects as go

from explorer import fastpath, i18n

from . import style

KINDS = ("cell", "head")
_HEAD_NAME = re.compile(r"L(\d+) H(\d+)")
_Z_IN_HOVER = re.compile(r"%\{z(:[^}]*)?\}")


def _plain(fig: go.Figure) -> tuple[list, dict]:
    plain = getattr(fig, "_plain", None)
    if plain is not None:
        return list(plain[0]), plain[1]
    d = fig.to_dict()
    return list(d["data"]), d["layout"]


def _target(kind: str, **props) -> dict:
    """An invisible, selectable scatter (selected or not, it stays invisible)."""
    return fastpath.trace("scatter", mode="markers", meta=f"pick-{kind}", showlegend=False,
                          selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0)),
                          **props)


def cell_targets(heat: Mapping, lang: str = "en") -> dict:
    """A target at every cell centre of the heatmap trace ``heat`` (a plain trace dict), with the
    heatmap's hover: its per-cell labels (customdata), and its values as the markers' colours
    (``%{z}`` becomes ``%{marker.color}``; the markers are transparent)."""
    z = np.asarray(heat["z"], dtype=np.float32)
    r, c = z.shape
    small = np.int8 if max(r, c) <= 127 else np.int32  # positions travel as 1-byte typed arrays
    ys, xs = (a.astype(small) for a in np.divmod(np.arange(r * c), c))  # row-major, as z
    hover = str(heat.get("hovertemplate") or "%{y}, %{x}")
    colour = "#000000"
    if _Z_IN_HOVER.search(hover):  # the value came from z
        colour = z.ravel()
        hover = _Z_IN_HOVER.sub(lambda m: "%{marker.color" + (m.group(1) or "") + "}", hover)
    custom = heat.get("customdata")
    if custom is not None:
        custom = np.asarray(custom)
        custom = custom.reshape(r * c, *custom.shape[2:])  # (r, c[, k]) -> one row per target (a view)
    click = style.esc(i18n.t("whatif.click_cell", lang))
    hover = hover.replace("<extra></extra>", "") + f"<br><i>{click}</i><extra></extra>"
    return _target("cell", x=xs, y=ys, customdata=custom, hovertemplate=hover,
                   marker=dict(size=6, opacity=0, color=colour),
                   xaxis=heat.get("xaxis", "x"), yaxis=heat.get("yaxis", "y"))


def head_targets(traces: Iterable[Mapping], lang: str = "en") -> list[dict]:
    """A target in the middle of every overview thumbnail ("L{layer} H{head}" heatmaps)."""
    click = style.esc(i18n.t("whatif.click_head", lang))
    out = []
    for t in traces:
        m = _HEAD_NAME.fullmatch(str(t.get("name", "")))
        if t.get("type") != "heatmap" or not m:
            continue
        x, y = np.asarray(t["x"], dtype=float), np.asarray(t["y"], dtype=float)
        li, h = int(m.group(1)), int(m.group(2))
        out.append(_target("head", x=[float(x.min() + x.max()) / 2], y=[float(y.min() + y.max()) / 2],
                           customdata=[[li, h]], marker=dict(size=6, opacity=0, color="#000000"),
                           hovertemplate=f"L{li} H{h}<br><i>{click}</i><extra></extra>",
                           xaxis=t.get("xaxis", "x"), yaxis=t.get("yaxis", "y")))
    return out


def pickable(fig: go.Figure, kind: str, lang: str = "en") -> go.Figure:
    """A new figure: ``fig``'s traces and layout (shared, unchanged) with click targets on top."""
    if kind not in KINDS:
        raise ValueError(f"unknown pick kind {kind!r}; choose from {', '.join(KINDS)}")
    data, layout = _plain(fig)
    if kind == "cell":
        i = next((i for i, t in enumerate(data) if t.get("type") == "heatmap"), None)
        targets = [] if i is None else [cell_targets(data[i], lang)]
        if i is not None:  # its hover now comes from the targets
            data[i] = {**{k: v for k, v in data[i].items() if k not in ("customdata", "hovertemplate")},
                       "hoverinfo": "skip"}
    else:
        targets = head_targets(data, lang)
    # other selectable traces (e.g. the "×" on masked cells) keep their look when something is selected
    kept = [{**t, "selected": dict(marker=dict(opacity=1)), "unselected": dict(marker=dict(opacity=1))}
            if t.get("type") == "scatter" else t for t in data]
    return fastpath.make_figure(kept + targets, {**layout, "hoverdistance": -1})


Targets = tuple[tuple[str | None, tuple[tuple[int, int], ...]], ...]


def targets(fig: go.Figure) -> Targets:
    """What ``picked`` needs of ``pickable``'s figure, and nothing more: per trace, its ``meta`` and,
    for a head target, its (layer, head). The page's click callback keeps this, not the figure:
    Streamlit keeps every chart's callback for the rest of the session (a chart's id changes with
    its figure), so a callback holding the figure kept every figure a visitor had seen alive (the
    soak's memory growth, `python -m bench --only soak`)."""
    data, _ = _plain(fig)
    return tuple((t.get("meta"), tuple((int(li), int(h)) for li, h in t["customdata"])
                  if t.get("meta") == "pick-head" else ()) for t in data)


def picked(points: Iterable[Mapping], fig: "go.Figure | Targets") -> tuple[str, int, int] | None:
    """What a selection (Streamlit's ``event.selection.points``) on ``pickable``'s figure chose:
    ("cell", query, key), ("head", layer, head), or None (no target among the points). ``fig``: the
    figure, or its ``targets``."""
    data = fig if isinstance(fig, tuple) else targets(fig)
    for p in reversed(list(points or [])):
        i = p.get("curve_number")
        if not isinstance(i, int) or not 0 <= i < len(data):
            continue
        (meta, heads), n = data[i], p.get("point_index", p.get("point_number"))
        if meta == "pick-cell" and p.get("x") is not None and p.get("y") is not None:
            return "cell", int(round(float(p["y"]))), int(round(float(p["x"])))
        if meta == "pick-head" and isinstance(n, int) and 0 <= n < len(heads):
            li, h = heads[n]
            return "head", li, h
    return None


def apply(session: MutableMapping, choice: tuple[str, int, int] | None) -> None:
    """Drill where a click pointed (``session``: the page's state, e.g. st.session_state): a cell
    sets the one-cell derivation's query and key (and shows it: view "cell" unless the page shows
    everything); a thumbnail of the overview opens that head's scores (layer, head, view "scores")."""
    if choice is None:
        return
    kind, a, b = choice
    if kind == "cell":
        session["query"], session["key"] = a, b
        if session.get("view") not in ("all", "cell"):
            session["view"] = "cell"
    elif kind == "head":
        session["layer"], session["head"] = a, b
        session["view"] = "scores"
