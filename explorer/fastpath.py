"""The fast path from a view's arrays to the JSON Streamlit sends: one module, no Streamlit import.

A page shows about twenty figures and every session reruns it on every click, so how a figure is
built and serialised is most of the server's time. Three things make it cheap:

1. **Figures from plain dicts** (``make_figure``): a view builds its traces and layout as plain
   dicts; ``Figure`` keeps them and makes plotly's object tree only when something reads it
   (tests, export, themes). plotly's per-property validation was ~20x the cost of the figure.
2. **The wire dict once** (``plain_dict``): what ``Figure.to_dict()`` would give, made from the
   plain dicts (numpy arrays as plotly's base64 typed arrays) without a deep copy.
3. **The JSON once per shared figure** (``share`` + ``install``): a memoised figure is sent by
   every session on every rerun; its dict and JSON are made once, by orjson (``to_json``).

What it relies on, checked by ``tests/test_fastpath.py`` (which fails loudly, never silently
slower or corrupt, when an upgrade changes any of it):

- plotly 7.1: ``go.Figure.__init__(data=..., layout=..., _validate=False)`` accepts plain dicts;
  ``Figure.to_dict()`` writes numeric numpy arrays as ``{"dtype", "bdata"[, "shape"]}`` with 64-bit
  integers narrowed; the default template is the dict ``go.Figure().to_dict()["layout"]["template"]``;
  named colour scales are expanded by validation (``colour_scale`` expands them here).
- Streamlit 1.67: ``st.plotly_chart(fig)`` calls ``fig.to_dict()`` (for a ``BaseFigure``) and then
  ``plotly.io.to_json(that_dict, validate=False)``.

``install()`` is the one replacement of a library function in the project: it wraps
``plotly.io.to_json`` so that a shared figure's dict (a ``Frozen``) is answered with the JSON made
when it was shared. There is no local call that does the same: ``st.plotly_chart`` calls
``plotly.io.to_json`` itself. Measured by ``python -m bench`` (stages section, "serialise"):
serialising a default page's figures costs 10-40 ms a figure on every rerun without it, and
nothing with it. Every other call of ``plotly.io.to_json`` goes through unchanged.
"""
from __future__ import annotations

import base64
import sys
import threading
from json.encoder import encode_basestring_ascii

import numpy as np
import orjson
import plotly.graph_objects as go
import plotly.io as pio

# plotly.io.to_json's engine for what the app does not share (the standard library's: plotly's own
# orjson engine first walks the whole figure in Python to clean it, 3-8x slower on figures with
# per-cell hover labels)
JSON_ENGINE = "json"
_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
# what plotly escapes in the JSON it makes, so that it can sit inside an HTML <script> as it is
# (U+2028 and U+2029 too, which _ascii writes as \u escapes)
_HTML_SAFE = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"))


def trace(kind: str, **props) -> dict:
    """A plotly trace as a plain dict, e.g. ``trace("heatmap", z=z, ...)``; None values are left out
    (as plotly leaves out unset properties). Nested properties are dicts: ``marker=dict(color=c)``."""
    out = {"type": kind}
    out.update((k, v) for k, v in props.items() if v is not None)
    return out


_SCALES: dict[str, list] = {}


def colour_scale(name: str) -> list:
    """A named scale as the [position, colour] list plotly would send (figures are built without
    plotly's validation, which is what expands names; plotly.js knows only a few names)."""
    if name not in _SCALES:
        _SCALES[name] = [list(stop) for stop in go.layout.Coloraxis(colorscale=name).colorscale]
    return _SCALES[name]


def make_figure(traces, layout: dict, frames: list[dict] | None = None) -> "Figure":
    """One figure from plain trace dicts (``trace``) and a plain layout, without validation.
    The default template is added as plotly would (shared, never copied). ``frames``: plotly
    animation frames as plain dicts (``{"name", "data", "traces", "layout"}``), or None."""
    data = [t if isinstance(t, dict) else t.to_plotly_json() for t in traces]
    lay = dict(layout)
    template = _template()
    if template is not None and "template" not in lay:
        lay["template"] = template
    return Figure(data, lay, _lazy=True, _frames=list(frames) if frames else None)


class Figure(go.Figure):
    """A go.Figure whose plotly objects are made the first time anything reads them.

    The app never does: it sends ``plain_dict``, so a page's twenty figures skip plotly's object
    tree. Tests, export and the themes read ``fig.data``, ``fig.layout``..., which make it then
    (once, under a lock: memoised figures are shared by sessions). A shared figure (``share``)
    answers ``to_dict()`` with its wire dict, made once."""

    _making = threading.RLock()

    def __init__(self, data=None, layout=None, *args, _lazy: bool = False, _frames=None, **kwargs) -> None:
        if not _lazy:  # e.g. a copy or an unpickled figure: as go.Figure
            super().__init__(data, layout, *args, **kwargs)
            return
        self._plain = (data, layout, _frames)
        self._pending = (data, layout, _frames)

    def __getattr__(self, name: str):  # only for what the instance does not have (yet)
        if name.startswith("__") or name in ("_pending", "_plain", "_frozen"):
            raise AttributeError(name)
        with Figure._making:
            pending = self.__dict__.pop("_pending", None)
            if pending is not None:
                go.Figure.__init__(self, data=pending[0], layout=pending[1], frames=pending[2], _validate=False)
        return object.__getattribute__(self, name)

    def to_dict(self) -> dict:
        frozen = self.__dict__.get("_frozen")
        return frozen if frozen is not None else super().to_dict()


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
    if plain[2]:  # as to_dict: the key only when there are frames
        out["frames"] = _copy(plain[2])
    template = out["layout"].pop("template", None)
    _to_base64(out)
    if template is not None:
        out["layout"]["template"] = template
    return out


def _unlisted(obj):
    """orjson's fallback for what it does not write itself: text arrays (hover labels) as lists."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"not JSON: {type(obj).__name__}")


def _surrogates(hex8: str) -> str:
    return encode_basestring_ascii(chr(int(hex8, 16)))[1:-1]  # "\\ud83d\\ude00"


# what Python's backslashreplace writes that JSON has no escape for -> what JSON writes instead
_NOT_JSON = {"\\x": lambda rest: "\\u00" + rest, "\\U": lambda rest: _surrogates(rest[:8]) + rest[8:]}


def _json_escapes(out: str, marker: str) -> str:
    """``out`` with each ``marker`` escape (\\x.., \\U........) that backslashreplace wrote rewritten
    as JSON's \\u form; one after an odd run of backslashes is the text's own (an escaped "\\")."""
    parts = out.split(marker)
    fixed = [parts[0]]
    for before, rest in zip(parts, parts[1:]):
        if (len(before) - len(before.rstrip("\\"))) % 2:
            fixed.append(marker + rest)
        else:
            fixed.append(_NOT_JSON[marker](rest))
    return "".join(fixed)


def _ascii(out: str) -> str:
    """JSON text with every character outside ASCII written as a \\u escape, as plotly writes it:
    a Python string of ASCII takes a byte a character, and one with a single "−" or Hangul
    syllable two (one with an emoji four), which the figure memo would hold for every figure."""
    if out.isascii():
        return out
    out = out.encode("ascii", "backslashreplace").decode("ascii")  # \uXXXX, and \xXX, \UXXXXXXXX
    for marker in _NOT_JSON:  # Latin-1 characters (·, ×, é) and astral ones (emoji)
        if marker in out:
            out = _json_escapes(out, marker)
    return out


def to_json(fig_dict: dict) -> str:
    """The JSON plotly makes of a figure's dict (``plotly.io.to_json(d, validate=False)``): the same
    values (non-finite numbers as null, numeric arrays as plotly's typed arrays, ``<``, ``>``, ``/``
    escaped, only ASCII), written by orjson directly: 1.5x faster than plotly's standard-library
    engine on a default page's figures in English and Korean, the ASCII escapes included (orjson
    alone is 5x faster; ``tests/test_fastpath.py`` checks that both parse to the same)."""
    out = _ascii(orjson.dumps(fig_dict, default=_unlisted, option=_ORJSON_OPTIONS).decode())
    for char, escaped in _HTML_SAFE:
        if char in out:
            out = out.replace(char, escaped)
    return out


class Frozen(dict):
    """A shared figure's ``to_dict()``, made once, with its JSON made once too."""

    __slots__ = ("json",)


def share(fig: go.Figure) -> go.Figure:
    """Make ``fig`` cheap to send again and again: its wire dict and JSON are made now, once.
    Safe because shared figures are never mutated (copies, e.g. for export, start from the
    figure's traces). Returns ``fig``."""
    frozen = Frozen(plain_dict(fig))
    frozen.json = to_json(frozen)
    if isinstance(fig, Figure):
        fig._frozen = frozen
    return fig


def json_bytes(fig: go.Figure) -> int:
    """How much memory the JSON of ``fig`` takes (made once for a shared figure; ASCII, so about a
    byte a character): what the figure memo counts."""
    frozen = getattr(fig, "__dict__", {}).get("_frozen")
    return sys.getsizeof(frozen.json if frozen is not None else to_json(plain_dict(fig)))


_library_to_json = pio.to_json
_installed = False
_install_lock = threading.Lock()


def _to_json_once(fig, *args, **kwargs):
    """``plotly.io.to_json``, answering a shared figure's dict (what st.plotly_chart passes) with the
    JSON made when it was shared; anything else goes to plotly unchanged."""
    if type(fig) is Frozen and not args and kwargs == {"validate": False}:
        return fig.json
    return _library_to_json(fig, *args, **kwargs)


def install() -> None:
    """Use the standard-library JSON engine and answer shared figures' JSON from memory (see the
    module's docstring for why this one replacement exists). Idempotent; the app calls it once."""
    global _installed
    with _install_lock:
        if _installed:
            return
        pio.json.config.default_engine = JSON_ENGINE
        pio.to_json = _to_json_once
        _installed = True
