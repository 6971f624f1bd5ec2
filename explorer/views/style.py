"""One place for how every figure looks: colour scales, token labels, escaping, axes.

Every view takes its colour scales from here, so scores always look like scores and weights
always look like weights, on every panel and every page:

    SCORES   diverging, centred at 0 (RdBu reversed: red > 0, blue < 0), for anything signed
    WEIGHTS  sequential (Viridis), for softmax weights in [0, 1]
    LAYERS   sequential (Viridis), for a layer index on markers (how deep a head sits)

Both are colour-blind safe. Masked cells are never coloured as a number: they are NaN (drawn as
the grey plot background) with a "×" marker and the hover text "masked".

User text may contain HTML, and plotly renders some tags in titles, tick labels and hover
labels, so every user-derived string goes through ``esc`` (or ``token_label``) before it enters
a figure.
"""
from __future__ import annotations

import html
import unicodedata
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer import fastpath, i18n
from explorer.fastpath import trace

SCORES = "RdBu_r"  # diverging, for scores, Q/K/V, encodings, outputs (centred at 0)
WEIGHTS = "Viridis"  # sequential, for softmax weights (0 .. 1)
LAYERS = "Viridis"  # sequential, for a layer index (0 .. n_layers - 1) coloured on markers
MASKED_BG = "#d4d4d4"  # what a masked (NaN) cell looks like: the plot background shows through
MASKED_MARK = "#6b6b6b"
PAD_COLOUR = "#bdbdbd"
# mask categories (Okabe–Ito): allowed, blocked by padding, blocked by causality, blocked by both
MASK_COLOURS = ("#f7f7f7", "#E69F00", "#0072B2", "#D55E00")
# Okabe & Ito (2008): safe for every common colour-vision deficiency; lines skip its yellow
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
LINE_COLOURS = tuple(c for c in OKABE_ITO if c != "#F0E442")
# Noto Sans CJK KR (Debian: fonts-noto-cjk) has Hangul and Latin glyphs; the rest are fallbacks for
# machines (macOS, Windows) that open an SVG without it
FONT = '"Noto Sans CJK KR", "Noto Sans KR", "Malgun Gothic", "Apple SD Gothic Neo", "DejaVu Sans", sans-serif'
MAX_TICKS = 64  # beyond this many positions, label every k-th one
CELL_TEXT_MAX = 20  # write numbers inside heatmap cells up to this many rows and columns
# Cell numbers fit their cells, whatever the screen: a heatmap's text has no font size of its own,
# so plotly.js (heatmap/plot.js, "auto" textfont size) sizes it to the narrowest cell (its width over
# the longest text's characters, its height over the lines), never above the layout's font size;
# numbers never overlap. On a narrow screen that size can drop below what anyone reads; the page's
# stylesheet (CELL_TEXT_CSS, explorer/main.py) hides cell text drawn smaller than CELL_TEXT_MIN_PX
# (plotly writes the size into the text element's style as "font-size: Npx").
CELL_TEXT_MIN_PX = 7
CELL_TEXT_CSS = ("<style>" + ", ".join(
    f'.js-plotly-plot g.heatmap-label text[style*="font-size: {n}px"]' for n in range(1, CELL_TEXT_MIN_PX))
    + " { display: none; }</style>")
# the page's top margin: Streamlit's 6rem above the first element, cut to just under its toolbar, so
# the chosen stage's figure starts higher on a laptop's screen (constant CSS, no user text)
PAGE_CSS = "<style>.stMainBlockContainer { padding-top: 3.5rem; }</style>"
# up to this many cells (the app's biggest query x key matrix: 72 x 72), a heatmap's hover names
# the tokens (per-cell labels); beyond, the hover gives positions and the value, values travel as
# float32 and the axes carry the tokens: a 512-token matrix is ~1.6 MB of JSON instead of ~10 MB,
# and per-cell labels are what makes figures slow to build and send (measured by `python -m bench`)
HOVER_CELLS_MAX = 6_000

_VISIBLE = {" ": "␣", "\n": "⏎", "\r": "␍", "\t": "⇥", "\u00a0": "⍽", "\u3000": "␣␣"}


def esc(text: object) -> str:
    """Escape ``& < >`` so plotly shows user text literally (never as markup)."""
    return html.escape(str(text), quote=False)


def visible(token: str) -> str:
    """Make whitespace and control characters visible: ' ' -> '␣', '\\n' -> '⏎', '\\x07' -> '␇'."""
    if token == "":
        return "∅"
    out = []
    for ch in token:
        if ch in _VISIBLE:
            out.append(_VISIBLE[ch])
        elif ord(ch) < 0x20:
            out.append(chr(0x2400 + ord(ch)))  # the Control Pictures block
        elif ord(ch) == 0x7F:
            out.append("␡")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"):
            out.append(f"U+{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def token_label(token: str) -> str:
    """A token as it appears on an axis or in a hover: visible and escaped."""
    return esc(visible(token))


def token_labels(tokens: Sequence[str]) -> list[str]:
    return [token_label(t) for t in tokens]


# characters that reorder the text around them (bidirectional embeddings, overrides, isolates, marks):
# echoed raw they flip what a reader sees; shown as U+XXXX they say what they are
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def plain_text(text: str, n: int | None = None) -> str:
    """User text for a caption, a code block or a table (not escaped): control characters and
    bidirectional controls made visible, shortened."""
    text = "".join(visible(c) if (ord(c) < 0x20 or ord(c) == 0x7F or c in BIDI_CONTROLS) else c for c in text)
    if n is not None and len(text) > n:
        text = text[: n - 1] + "…"
    return text


def tick_positions(n: int) -> list[int]:
    step = max(1, int(np.ceil(n / MAX_TICKS)))
    return list(range(0, n, step))


def token_axis(tokens: Sequence[str], title: str = "") -> dict:
    """Axis settings for token positions: integer positions, token labels (duplicates are fine)."""
    n = len(tokens)
    vals = tick_positions(n)
    labels = token_labels(tokens)
    longest = max((len(visible(t)) for t in tokens), default=0)
    return dict(tickmode="array", tickvals=vals, ticktext=[labels[i] for i in vals],
                tickangle=0 if (longest <= 2 and n <= 40) else -50,
                title=dict(text=esc(title)), range=[-0.5, n - 0.5], showgrid=False, zeroline=False)


def index_axis(n: int, title: str = "") -> dict:
    return dict(title=dict(text=esc(title)), range=[-0.5, n - 0.5], showgrid=False, zeroline=False)


def symmetric_range(*arrays: np.ndarray) -> float:
    """max |x| over finite values (at least a tiny positive number)."""
    m = 0.0
    for a in arrays:
        a = np.asarray(a, dtype=float)
        finite = a[np.isfinite(a)]
        if finite.size:
            m = max(m, float(np.abs(finite).max()))
    return m or 1e-9


def scores_axis(zmax: float, title: str = "") -> dict:
    """A layout ``coloraxis`` for signed values: diverging, centred at 0."""
    return dict(colorscale=fastpath.colour_scale(SCORES), cmin=-float(zmax), cmax=float(zmax), cmid=0,
                colorbar=dict(title=dict(text=esc(title)), thickness=12))


def weights_axis(title: str = "", cmax: float = 1.0) -> dict:
    """A layout ``coloraxis`` for softmax weights: sequential, 0 .. 1."""
    return dict(colorscale=fastpath.colour_scale(WEIGHTS), cmin=0.0, cmax=float(cmax),
                colorbar=dict(title=dict(text=esc(title)), thickness=12))


def fmt_cells(z: np.ndarray, digits: int = 3) -> np.ndarray:
    """``fmt`` of every cell, as an object array of z's shape (one pass, no numpy call per cell)."""
    z = np.asarray(z, dtype=float)
    inf = float("inf")
    out = [("—" if x != x else "−∞" if x == -inf else "+∞" if x == inf
            else f"{x:.{digits}f}".replace("-", "−")) for x in z.ravel().tolist()]
    return strings(out).reshape(z.shape)


def strings(values) -> np.ndarray:
    """Per-cell strings (hover labels, cell text) as a fixed-width unicode array, not an object array:
    plotly deep-copies a figure's arrays when it builds it, element by element for object arrays."""
    return np.asarray(values, dtype=str)


def fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "—"
    if np.isneginf(x):
        return "−∞"
    if np.isposinf(x):
        return "+∞"
    return f"{x:.{digits}f}".replace("-", "−")


def with_labels(labels: dict | None) -> dict:
    """The figure words (English unless ``labels`` says otherwise: ``i18n.fig_labels(lang)``)."""
    return {**i18n.fig_labels("en"), **(labels or {})}


def layout_defaults(title: str, height: int | None = None) -> dict:
    lay = dict(title=dict(text=esc(title), x=0.0, xanchor="left"), font=dict(family=FONT),
               plot_bgcolor=MASKED_BG, margin=dict(l=60, r=30, t=70, b=50),
               hoverlabel=dict(font=dict(family=FONT)))
    if height:
        lay["height"] = int(height)
    return lay


def make_figure(traces, layout: dict, *, title: str = "", height: int | None = None,
                subtitle: str | None = None, frames: list[dict] | None = None) -> go.Figure:
    """One figure from plain trace dicts (``trace``) and a plain layout, our look underneath
    (``layout_defaults``); built without plotly's validation (explorer/fastpath.py). ``frames``:
    plotly animation frames (plain dicts), played in the browser."""
    lay = layout_defaults(title, height)
    if subtitle is not None:
        lay["title"]["subtitle"] = dict(text=subtitle)
    for k, v in layout.items():
        if isinstance(v, dict) and isinstance(lay.get(k), dict):
            lay[k] = {**lay[k], **v}
        else:
            lay[k] = v
    return fastpath.make_figure(traces, lay, frames)


def masked_markers(mask_blocked: np.ndarray, *, xaxis: str = "x", yaxis: str = "y",
                   name: str = "masked") -> dict | None:
    """A "×" on every masked cell (a hatch that survives any colour scale and print)."""
    ys, xs = np.nonzero(mask_blocked)
    if ys.size == 0 or ys.size > 6000:
        return None
    return trace("scatter", x=xs, y=ys, mode="markers", name=name, showlegend=False,
                      marker=dict(symbol="x-thin", size=7, line=dict(width=1, color=MASKED_MARK)),
                      hoverinfo="skip", xaxis=xaxis, yaxis=yaxis)
