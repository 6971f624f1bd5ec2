"""One place for how every figure looks: colour scales, token labels, escaping, axes.

Every view takes its colour scales from here, so scores always look like scores and weights
always look like weights, on every panel and every page:

    SCORES   diverging, centred at 0 (RdBu reversed: red > 0, blue < 0), for anything signed
    WEIGHTS  sequential (Viridis), for softmax weights in [0, 1]

Both are colour-blind safe. Masked cells are never coloured as a number: they are NaN (drawn as
the grey plot background) with a "×" marker and the hover text "masked".

User text may contain HTML, and plotly renders some tags in titles, tick labels and hover
labels, so every user-derived string goes through ``esc`` (or ``token_label``) before it enters
a figure.
"""
from __future__ import annotations

import base64
import html
import threading
import unicodedata
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

SCORES = "RdBu_r"  # diverging, for scores, Q/K/V, encodings, outputs (centred at 0)
WEIGHTS = "Viridis"  # sequential, for softmax weights (0 .. 1)
MASKED_BG = "#d4d4d4"  # what a masked (NaN) cell looks like: the plot background shows through
MASKED_MARK = "#6b6b6b"
PAD_COLOUR = "#bdbdbd"
# mask categories (Okabe–Ito): allowed, blocked by padding, blocked by causality, blocked by both
MASK_COLOURS = ("#f7f7f7", "#E69F00", "#0072B2", "#D55E00")
LINE_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
FONT = '"Noto Sans CJK KR", "Noto Sans KR", "Malgun Gothic", "Apple SD Gothic Neo", sans-serif'
MAX_TICKS = 64  # beyond this many positions, label every k-th one
CELL_TEXT_MAX = 20  # write numbers inside heatmap cells up to this many rows and columns
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


def plain_text(text: str, n: int | None = None) -> str:
    """User text for a caption (not escaped): control characters made visible, shortened."""
    text = "".join(visible(c) if (ord(c) < 0x20 or ord(c) == 0x7F) else c for c in text)
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


_SCALES: dict[str, list] = {}


def colour_scale(name: str) -> list:
    """A named scale as the [position, colour] list plotly would send (figures are built without
    plotly's validation, which is what expands names; plotly.js knows only a few names)."""
    if name not in _SCALES:
        _SCALES[name] = [list(stop) for stop in go.layout.Coloraxis(colorscale=name).colorscale]
    return _SCALES[name]


def scores_axis(zmax: float, title: str = "") -> dict:
    """A layout ``coloraxis`` for signed values: diverging, centred at 0."""
    return dict(colorscale=colour_scale(SCORES), cmin=-float(zmax), cmax=float(zmax), cmid=0,
                colorbar=dict(title=dict(text=esc(title)), thickness=12))


def weights_axis(title: str = "", cmax: float = 1.0) -> dict:
    """A layout ``coloraxis`` for softmax weights: sequential, 0 .. 1."""
    return dict(colorscale=colour_scale(WEIGHTS), cmin=0.0, cmax=float(cmax),
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


def layout_defaults(title: str, height: int | None = None) -> dict:
    lay = dict(title=dict(text=esc(title), x=0.0, xanchor="left"), font=dict(family=FONT),
               plot_bgcolor=MASKED_BG, margin=dict(l=60, r=30, t=70, b=50),
               hoverlabel=dict(font=dict(family=FONT)))
    if height:
        lay["height"] = int(height)
    return lay


def trace(kind: str, **props) -> dict:
    """A plotly trace as a plain dict, e.g. ``trace("heatmap", z=z, ...)``; None values are left out
    (as plotly leaves out unset properties). Nested properties are dicts: ``marker=dict(color=c)``."""
    out = {"type": kind}
    out.update((k, v) for k, v in props.items() if v is not None)
    return out


def make_figure(traces, layout: dict, *, title: str = "", height: int | None = None,
                subtitle: str | None = None) -> go.Figure:
    """One go.Figure from plain trace dicts (``trace``) and a plain layout (our defaults underneath).

    The figure is built without plotly's per-property validation (most of a figure's cost: ~20x),
    and remembers the plain dicts it was built from, so ``plain_dict`` (what the app sends) needs no
    deep copy. Figures are never changed after they are built; tests/test_views.py checks that every
    stage's plain dict is what validated plotly makes of it."""
    lay = layout_defaults(title, height)
    if subtitle is not None:
        lay["title"]["subtitle"] = dict(text=subtitle)
    for k, v in layout.items():
        if isinstance(v, dict) and isinstance(lay.get(k), dict):
            lay[k] = {**lay[k], **v}
        else:
            lay[k] = v
    data = [t if isinstance(t, dict) else t.to_plotly_json() for t in traces]
    template = _template()
    if template is not None and "template" not in lay:
        lay["template"] = template
    return _Figure(data, lay, _lazy=True)


class _Figure(go.Figure):
    """A go.Figure whose plotly objects are made the first time anything reads them.

    The app never does: it sends ``plain_dict`` (explorer/state.py), so a page's twenty figures
    skip plotly's object tree (a tenth of a new sentence's server time). Tests, export and the
    themes read ``fig.data``, ``fig.layout``, ``fig.to_dict()``..., which make it then (once, under
    a lock: cached figures are shared by sessions)."""

    _making = threading.RLock()

    def __init__(self, data=None, layout=None, *args, _lazy: bool = False, **kwargs) -> None:
        if not _lazy:  # e.g. a copy or an unpickled figure: as go.Figure
            super().__init__(data, layout, *args, **kwargs)
            return
        self._plain = (data, layout)
        self._pending = (data, layout)

    def __getattr__(self, name: str):  # only for what the instance does not have (yet)
        if name.startswith("__") or name in ("_pending", "_plain"):
            raise AttributeError(name)
        with _Figure._making:
            pending = self.__dict__.pop("_pending", None)
            if pending is not None:
                go.Figure.__init__(self, data=pending[0], layout=pending[1], _validate=False)
        return object.__getattribute__(self, name)


def _copy(x):
    """dicts, lists and tuples copied (arrays and strings shared: nothing mutates them)."""
    if isinstance(x, _Shared):
        return x
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_copy(v) for v in x]
    return x


class _Shared(dict):
    """A dict every figure shares as it is (plotly's deep copies included): the default template."""

    def __deepcopy__(self, memo):
        return self


_TEMPLATES: dict[str, _Shared | None] = {}


def _template() -> _Shared | None:
    """The default template as plotly puts it in every figure (applying it anew is ~2 ms a figure)."""
    import plotly.io as pio

    name = str(pio.templates.default)
    if name not in _TEMPLATES:
        t = go.Figure().to_dict()["layout"].get("template")
        _TEMPLATES[name] = None if t is None else _Shared(t)
    return _TEMPLATES[name]


_TYPED = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
          "float32": "f4", "float64": "f8"}
_NOT_TYPED = ("geojson", "layer", "layers", "range")  # keys plotly never turns into typed arrays


def _typed_array(a: np.ndarray):
    """plotly's typed-array spec for a numeric array ({"dtype", "bdata"[, "shape"]}, 64-bit ints
    narrowed as plotly does), without plotly's defensive copy; other arrays as they are."""
    if a.size == 0:
        return a
    if a.dtype == np.int64:
        lo, hi = a.min(), a.max()
        for t in (np.int8, np.int16, np.int32):
            if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
                a = a.astype(t)
                break
        else:
            return a
    code = _TYPED.get(a.dtype.name)
    if code is None or a.dtype.byteorder == ">":
        return a
    spec = {"dtype": code, "bdata": base64.b64encode(np.ascontiguousarray(a)).decode("ascii")}
    if a.ndim > 1:
        spec["shape"] = str(a.shape)[1:-1]
    return spec


def _to_base64(obj) -> None:
    """plotly's convert_to_base64 (numpy arrays -> typed arrays, in place) for our plain dicts."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _NOT_TYPED:
                continue
            if isinstance(v, np.ndarray):
                obj[k] = _typed_array(v)
            else:
                _to_base64(v)
    elif isinstance(obj, list):
        for v in obj:
            _to_base64(v)


def plain_dict(fig: go.Figure) -> dict:
    """``fig.to_dict()`` (what st.plotly_chart sends): for figures from ``make_figure``, made from the
    plain dicts they were built from (a shallow structural copy instead of a deep copy of plotly's
    objects; numpy arrays become plotly's base64 typed arrays, as in ``to_dict``)."""
    plain = getattr(fig, "_plain", None)
    if plain is None:
        return fig.to_dict()
    out = {"data": _copy(plain[0]), "layout": _copy(plain[1])}
    template = out["layout"].pop("template", None)
    _to_base64(out)
    if template is not None:
        out["layout"]["template"] = template
    return out


def masked_markers(mask_blocked: np.ndarray, *, xaxis: str = "x", yaxis: str = "y",
                   name: str = "masked") -> dict | None:
    """A "×" on every masked cell (a hatch that survives any colour scale and print)."""
    ys, xs = np.nonzero(mask_blocked)
    if ys.size == 0 or ys.size > 6000:
        return None
    return trace("scatter", x=xs, y=ys, mode="markers", name=name, showlegend=False,
                      marker=dict(symbol="x-thin", size=7, line=dict(width=1, color=MASKED_MARK)),
                      hoverinfo="skip", xaxis=xaxis, yaxis=yaxis)
