"""A figure with animation frames (the Decoding view's timeline) as static figures: the figure's first
state with one frame applied (its traces' new values and its layout merged in), without the slider
and the play/pause buttons, which mean nothing on paper. Pure figure manipulation: the renderer
draws ``current_figure`` and explorer/export/animation.py every ``step_figures`` page.
"""
from __future__ import annotations

import copy

import plotly.graph_objects as go


def has_frames(fig: go.Figure) -> bool:
    return bool(fig.frames)


def _parts(fig: go.Figure) -> tuple[list[dict], dict, list[dict]]:
    """(data, layout, frames) as plain dicts, numpy arrays kept as they are."""
    return ([t.to_plotly_json() for t in fig.data], fig.layout.to_plotly_json(),
            [f.to_plotly_json() for f in fig.frames])


def _merge(base, update):
    """``update`` merged into ``base`` (dicts recursively; anything else, lists included, replaced)."""
    if not isinstance(base, dict) or not isinstance(update, dict):
        return copy.deepcopy(update)
    out = dict(base)
    for k, v in update.items():
        out[k] = _merge(base.get(k), v) if isinstance(v, dict) and isinstance(base.get(k), dict) else copy.deepcopy(v)
    return out


def _static(data: list[dict], layout: dict, frame: dict | None) -> go.Figure:
    data = [dict(t) for t in data]
    layout = dict(layout)
    if frame is not None:
        targets = frame.get("traces") or list(range(len(frame.get("data", []))))
        for i, tr in zip(targets, frame.get("data", [])):
            data[i] = _merge(data[i], tr)
        layout = _merge(layout, frame.get("layout", {}))
    if layout.pop("sliders", None) is not None:  # and the room the slider took below the plots
        layout["margin"] = {**layout.get("margin", {}), "b": min(layout.get("margin", {}).get("b", 80), 80)}
    layout.pop("updatemenus", None)
    return go.Figure(data=data, layout=layout)


def step_figures(fig: go.Figure) -> list[go.Figure]:
    """One static figure per animation frame, in order (the figure itself, static, if it has none)."""
    data, layout, frames = _parts(fig)
    return [_static(data, layout, f) for f in frames or [None]]


def current_figure(fig: go.Figure) -> go.Figure:
    """The static figure of the step the figure opens at (its slider's ``active`` step)."""
    if not fig.frames:
        return fig
    data, layout, frames = _parts(fig)
    sliders = layout.get("sliders") or [{}]
    active = int(sliders[0].get("active") or 0)
    return _static(data, layout, frames[min(max(active, 0), len(frames) - 1)])
