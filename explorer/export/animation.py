"""Figures with animation frames (the Decoding view's timeline) as files for slides and handouts: one
static figure per frame, an animated GIF (Pillow) and a PDF with one page per frame (pypdf).

    pages = step_figures(fig)                    # [go.Figure] one static figure per frame
    gif = gif_bytes(fig, scale=1)                # every frame, FRAME_MS apart, looping
    pdf = pdf_pages_bytes(fig)                   # one vector page per frame

A static figure is the figure's first state with one frame applied (its traces' new values and its
layout merged in), without the slider and the play/pause buttons, which mean nothing on paper.
Every frame is rendered by the same warm chromium as any other export (renderer.figure_bytes), so a
40-step timeline takes 40 renders. A figure without frames gives a one-frame GIF / one-page PDF.
"""
from __future__ import annotations

import copy
import io
from collections.abc import Callable

import plotly.graph_objects as go

from .renderer import figure_bytes

GIF_FRAME_MS = 900  # a step every 0.9 s (the app plays faster: a GIF on a slide is read, not scrubbed)
GIF_LAST_MS = 2500  # the last step stays a little longer before the loop starts again

Progress = Callable[[int, int], None]  # (done, total)


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


def gif_bytes(fig: go.Figure, *, scale: float = 1, frame_ms: int = GIF_FRAME_MS,
              progress: Progress | None = None) -> bytes:
    """An animated GIF of every frame (looping), from PNGs rendered at ``scale``."""
    from PIL import Image

    pages = step_figures(fig)
    images = []
    for i, page in enumerate(pages):
        png = figure_bytes(page, "png", scale=scale)
        images.append(Image.open(io.BytesIO(png)).convert("RGB"))
        if progress:
            progress(i + 1, len(pages))
    # one palette for every frame (the first frame's colours plus what the others add is close enough
    # for heatmaps; an adaptive palette per frame makes unchanged cells flicker)
    first = images[0].quantize(colors=255, method=Image.Quantize.MEDIANCUT)
    frames = [first] + [im.quantize(palette=first, dither=Image.Dither.NONE) for im in images[1:]]
    durations = [frame_ms] * (len(frames) - 1) + [max(frame_ms, GIF_LAST_MS)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=durations, loop=0,
                   optimize=False, disposal=1)
    return buf.getvalue()


def pdf_pages_bytes(fig: go.Figure, *, progress: Progress | None = None) -> bytes:
    """One PDF page per frame (vector: text stays text), in order."""
    from pypdf import PdfReader, PdfWriter

    pages = step_figures(fig)
    writer = PdfWriter()
    for i, page in enumerate(pages):
        for p in PdfReader(io.BytesIO(figure_bytes(page, "pdf"))).pages:
            writer.add_page(p)
        if progress:
            progress(i + 1, len(pages))
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()
