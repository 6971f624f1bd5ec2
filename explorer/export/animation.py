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

import io
from collections.abc import Callable

import plotly.graph_objects as go

from .frames import current_figure, has_frames, step_figures
from .renderer import figure_bytes

__all__ = ["current_figure", "has_frames", "step_figures", "gif_bytes", "pdf_pages_bytes"]

GIF_FRAME_MS = 900  # a step every 0.9 s (the app plays faster: a GIF on a slide is read, not scrubbed)
GIF_LAST_MS = 2500  # the last step stays a little longer before the loop starts again

Progress = Callable[[int, int], None]  # (done, total)


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
