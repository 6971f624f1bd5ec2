"""The export browser: Debian's chromium driven by kaleido, found (never downloaded), started on the
first export and kept warm for the rest of the process; figures to PNG/SVG/PDF bytes, tables to CSV.

    png = figure_bytes(fig, "png", scale=2)         # bytes
    unavailable_reason()                            # None, or why image export cannot work here

When chromium is missing every image export raises ``ExportUnavailable`` with the command that
installs it; CSV export keeps working.

Chromium starts with a scrubbed environment (``browser_env``): only what it and the small Python wrapper
that starts it need (PATH, HOME, TMPDIR, the locale, fontconfig's and XDG's folders, the interpreter's
PYTHONPATH), never the server's secrets (the access code, the cookie secret, tokens). kaleido's browser
(choreographer's ``Chromium``) would pass ``os.environ.copy()``; the renderer gives kaleido a subclass
whose ``get_env`` returns ``browser_env()`` instead (``_chromium_class``).
"""
from __future__ import annotations

import asyncio
import atexit
import base64
import functools
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from model.runtime import limits
from explorer.fastpath import plain_dict
from explorer.views.theme import DEFAULT_THEME, get_theme

from .frames import current_figure

log = logging.getLogger("attention_explorer.export")


@functools.cache
def _kaleido():
    """The kaleido module, imported on first use, or None when it is not installed (image export then
    says how to install it; CSV still works). Not at import time: it took ~0.12 s of every process's
    first page, which renders nothing (issue 23, `python -m bench --only floor`)."""
    try:
        import kaleido
    except ImportError:
        return None
    return kaleido


def _kaleido_devtools():
    """kaleido's helper that runs a function in a tab (``exec_js_fn``), or None in a kaleido without it
    (PNG is then drawn by plotly as any other format: ``png_and_svg``)."""
    try:
        from kaleido._kaleido_tab import _devtools_utils
    except ImportError:
        return None
    return _devtools_utils if hasattr(_devtools_utils, "exec_js_fn") else None


def _has_kaleido() -> bool:
    return importlib.util.find_spec("kaleido") is not None

IMAGE_FORMATS = ("png", "svg", "pdf")
FORMATS = (*IMAGE_FORMATS, "csv")
ANIMATED_FORMATS = ("gif",)  # explorer/export/animation.py: every frame of a timeline (the exporter's --format)
MIME = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf",
        "csv": "text/csv", "zip": "application/zip", "json": "application/json", "gif": "image/gif"}
INSTALL_COMMAND = "apt-get install -y chromium fonts-noto-cjk"
# Where a browser is looked for, in order (BROWSER_PATH, the variable choreographer and kaleido
# honour, overrides them all).
BROWSER_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome",
                      "google-chrome-stable")
RENDER_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0


# What the export browser is given of the server's environment (an allow-list: anything else, the
# access code and cookie secret included, stays out); LC_* variables are passed too.
BROWSER_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "FONTCONFIG_FILE", "FONTCONFIG_PATH",
               "FONTCONFIG_SYSROOT", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_DATA_DIRS",
               "XDG_RUNTIME_DIR", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE",
               "VIRTUAL_ENV", "BROWSER_PATH")


def browser_env(environ=None) -> dict[str, str]:
    """The environment chromium starts with: the allowed variables of ``environ`` (os.environ), and a
    PATH and TMPDIR always (a read-only root filesystem keeps its writable folder in TMPDIR)."""
    env = os.environ if environ is None else environ
    out = {k: env[k] for k in BROWSER_ENV if env.get(k)}
    out.update({k: v for k, v in env.items() if k.startswith("LC_") and v})
    out.setdefault("PATH", os.defpath)
    out.setdefault("TMPDIR", tempfile.gettempdir())
    return out


def _chromium_class():
    """choreographer's Chromium, started with ``browser_env()`` instead of a copy of ``os.environ``."""
    try:
        from choreographer.browsers.chromium import Chromium
    except ImportError:
        Chromium = None
    if Chromium is None or not hasattr(Chromium, "get_env"):
        raise ExportUnavailable("This kaleido cannot start chromium with a scrubbed environment (the "
                                "server's secrets would reach the browser).", install="pip install 'kaleido==1.5.0'")

    nice = shutil.which("nice")

    class ScrubbedChromium(Chromium):
        def get_env(self):
            return browser_env()

        def get_cli(self):
            # the browser renders at a lower CPU priority (nice 10; `nice` execs it in place): on a shared
            # replica, the other learners' clicks go first while an export draws (model/runtime/limits.py)
            cli = list(super().get_cli())
            return [nice, "-n", str(limits.BACKGROUND_NICE), *cli] if nice else cli

    return ScrubbedChromium


class ExportError(RuntimeError):
    """A figure could not be exported."""


class ExportUnavailable(ExportError):
    """Image export is impossible on this machine (no chromium, no kaleido); CSV still works."""

    def __init__(self, reason: str, install: str = INSTALL_COMMAND) -> None:
        self.reason = reason
        self.install = install
        super().__init__(f"{reason} Install it with: {install}")


# ---------------------------------------------------------------------------------------------
# The browser: found, never downloaded
# ---------------------------------------------------------------------------------------------

def browser_path() -> str:
    """The chromium executable to use; raises ExportUnavailable when there is none."""
    override = os.environ.get("BROWSER_PATH")
    if override:
        if Path(override).is_file() and os.access(override, os.X_OK):
            return override
        raise ExportUnavailable(f"No browser at BROWSER_PATH={override!r} (unset it to use "
                                f"the system chromium).")
    for name in BROWSER_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise ExportUnavailable("Image export (PNG, SVG, PDF) needs chromium, which is not installed.")


def unavailable_reason() -> ExportUnavailable | None:
    """Cheap check (no browser is started): None when image export should work."""
    if not _has_kaleido():
        return ExportUnavailable("Image export needs the kaleido package.",
                                 install="pip install 'kaleido==1.5.0'")
    try:
        browser_path()
    except ExportUnavailable as e:
        return e
    return None


@functools.lru_cache(maxsize=1)
def cjk_font_missing() -> bool:
    """True when fontconfig knows no Noto Sans CJK font (Korean would print as empty boxes).

    False when it cannot tell (no fc-list): never a false alarm.
    """
    fc_list = shutil.which("fc-list")
    if not fc_list:
        return False
    try:
        out = subprocess.run([fc_list, ":lang=ko", "family"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "Noto Sans CJK" not in out


def has_cjk(text: str) -> bool:
    return any("\u1100" <= ch <= "\u11ff" or "\u3000" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7a3"
               for ch in text)


class _Renderer:
    """One warm kaleido/chromium, driven from an asyncio loop on a daemon thread.

    Thread-safe: any thread (a Streamlit session, a deferred download) submits a render with
    ``asyncio.run_coroutine_threadsafe``. kaleido's own ``start_sync_server`` is not used because
    its call/return queues are shared without a lock, so two concurrent callers could receive
    each other's images.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kaleido = None
        self._path: str | None = None

    def _start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise reason
        path = browser_path()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="explorer-export", daemon=True)
        thread.start()
        try:
            k = _kaleido_class()(path=path, n=1, mathjax=False, timeout=RENDER_TIMEOUT_S,
                                 browser_cls=_chromium_class())
            asyncio.run_coroutine_threadsafe(k.open(), loop).result(START_TIMEOUT_S)
        except Exception as e:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            if isinstance(e, ExportUnavailable):
                raise
            # chromium is there (browser_path found it): it stopped or hung while starting
            raise ExportError(f"the export browser ({Path(path).name}) stopped while starting "
                              f"({type(e).__name__}: {str(e)[:200]})") from None
        self._loop, self._thread, self._kaleido, self._path = loop, thread, k, path

    def ensure_started(self) -> None:
        """A warm browser, started now if needed; a failed cold start is retried once (a browser
        killed while starting is not a reason to give up), and reported as what it was."""
        with self._lock:
            if self._kaleido is not None and self._path == os.environ.get("BROWSER_PATH", self._path):
                return
            self._stop_locked()
            try:
                self._start()
            except ExportUnavailable:
                raise
            except ExportError as first:
                log.warning("%s; starting it once more", first)
                try:
                    self._start()
                except ExportError as second:
                    raise ExportError(f"{second} (twice; image export is unavailable until it starts)") from None

    def render(self, fig: dict, opts: dict) -> bytes:
        return self._call(lambda k: k.calc_fig(fig, opts=opts), opts.get("format", "?"))

    def rasterize(self, svg: bytes, width: int, height: int, scale: float) -> bytes | None:
        """The PNG of an SVG this browser drew (``png_and_svg``); None when this kaleido cannot."""
        self.ensure_started()
        if not hasattr(self._kaleido, "rasterize"):
            return None
        return self._call(lambda k: k.rasterize(svg.decode("utf-8"), width, height, scale), "png")

    def _call(self, make, fmt: str) -> bytes:
        """``make(kaleido)``'s coroutine run on the warm browser: started if needed, and once more on a
        fresh browser when the first attempt fails."""
        error: Exception = ExportError("the export browser stopped unexpectedly")
        for _attempt in (1, 2):
            self.ensure_started()
            with self._lock:
                loop, k = self._loop, self._kaleido
            if getattr(k, "broken", False) or not _alive(k):  # chromium died since last time
                self.stop()
                continue
            if loop is None or k is None:
                continue
            future = asyncio.run_coroutine_threadsafe(make(k), loop)
            try:
                return _wait(future, k)
            except ExportError as e:
                error = e
            except Exception as e:  # a crashed browser or a figure plotly.js refused
                error = ExportError(f"{fmt} export failed: {type(e).__name__}: {e}")
            # the browser may be broken: start a fresh one and try once more
            self.stop()
        raise error

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        loop, k, thread = self._loop, self._kaleido, self._thread
        self._loop = self._kaleido = self._thread = None
        if loop is None:
            return
        if k is not None:
            try:
                if hasattr(k, "settle"):
                    asyncio.run_coroutine_threadsafe(k.settle(), loop).result(15)
                asyncio.run_coroutine_threadsafe(k.close(), loop).result(15)
            except Exception:  # already dead: nothing left to close
                pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(5)


def _alive(k) -> bool:
    proc = getattr(k, "subprocess", None)
    return proc is None or proc.poll() is None


def _wait(future, k) -> bytes:
    """The render's result; gives up early when chromium dies, else after the timeout."""
    deadline = time.monotonic() + RENDER_TIMEOUT_S + 5
    while True:
        try:
            return future.result(0.25)
        except (FutureTimeout, asyncio.TimeoutError):
            if not _alive(k):
                future.cancel()
                raise ExportError("chromium stopped during the export") from None
            if time.monotonic() > deadline:
                future.cancel()
                raise ExportError(f"rendering took longer than {RENDER_TIMEOUT_S:.0f} s") from None


RELOAD_EVERY = 16  # renders a tab serves before it is reloaded (see _kaleido_class)

# plotly.js's PNG export (Plotly.toImage) draws the figure, serialises it as SVG and paints that SVG on
# a canvas (Plotly.Snapshot.svgToImg). This is its last step, for the SVG export of the same figure,
# less the viewBox attribute that only the SVG export adds (png_and_svg).
_RASTERIZE_JS = r"""function(svg, width, height, scale) {
  svg = svg.replace(/^(<svg[^>]*?) viewBox="[^"]*"/, '$1');
  return Plotly.Snapshot.svgToImg({format: 'png', svg: svg, width: width, height: height, scale: scale,
                                   canvas: document.createElement('canvas'), promise: true})
    .then(function (url) { return url.replace(/^data:image\/png;base64,/, ''); });
}"""


def _kaleido_class():
    """kaleido.Kaleido, reloading each tab once every ``RELOAD_EVERY`` renders, in the background.

    Stock kaleido reloads the page after every render, so that each figure starts clean, and makes
    the caller wait for it. The reload re-parses plotly.js: measured here it is half of chromium's
    CPU per image (0.52 → 0.28 CPU-s per SVG of a stage figure), so a bundle of 40 stages took
    twice as long as its drawing. The page keeps no state between renders (``Plotly.toImage`` draws
    into its own div and purges it; the PDF print sets its page style each time): the 43 stage PNGs
    of the seed, rendered on one tab without a reload, were byte for byte those rendered with one
    (``tests/test_export.py`` checks six PNGs and their SVGs' text). What does build up is memory (about 0.5 MB per render), so a tab is
    still reloaded after ``RELOAD_EVERY`` renders; that reload runs in the background while the user
    looks at the image (the next render waits for the tab, as before). A failed render does not
    reuse the page: ``Renderer.render`` starts a fresh browser for its second attempt.
    """
    base = _kaleido().Kaleido
    if not hasattr(base, "_return_kaleido_tab"):  # another kaleido version: keep its behaviour
        return base
    _devtools = _kaleido_devtools() if hasattr(base, "_get_kaleido_tab") else None

    class _Kaleido(base):
        broken = False

        async def _return_kaleido_tab(self, tab) -> None:
            served = self.__dict__.setdefault("_served", {})
            served[id(tab)] = served.get(id(tab), 0) + 1
            if served[id(tab)] < RELOAD_EVERY:
                await self.tabs_ready.put(tab)
                return
            served[id(tab)] = 0
            pending = self.__dict__.setdefault("_pending", set())
            task = asyncio.get_running_loop().create_task(self._reload(tab))
            pending.add(task)
            task.add_done_callback(pending.discard)

        async def _reload(self, tab) -> None:
            try:
                await super()._return_kaleido_tab(tab)
            except Exception:  # the browser is gone: the renderer starts a new one
                self.broken = True

        async def settle(self) -> None:
            await asyncio.gather(*self.__dict__.get("_pending", ()), return_exceptions=True)

        if _devtools is not None:
            async def rasterize(self, svg: str, width: int, height: int, scale: float) -> bytes:
                """``svg`` drawn on a canvas of (width, height) × scale, as PNG (``png_and_svg``)."""
                tab = await self._get_kaleido_tab()
                try:
                    result = await asyncio.wait_for(_devtools.exec_js_fn(
                        tab.tab, tab._current_js_id, _RASTERIZE_JS, svg, width, height, scale), self._timeout)
                finally:
                    await self._return_kaleido_tab(tab)
                found = result.get("result", {})
                value = found.get("result", {}).get("value")
                if "error" in result or "exceptionDetails" in found or not isinstance(value, str):
                    raise ExportError(f"png export failed: {str(result)[:300]}")
                return base64.b64decode(value)

    return _Kaleido


_RENDERER = _Renderer()
atexit.register(_RENDERER.stop)


def warm_up() -> None:
    """Start chromium now (e.g. when the app starts) so the first export is already fast."""
    _RENDERER.ensure_started()


def shutdown() -> None:
    """Close the warm chromium (the next export starts a new one)."""
    _RENDERER.stop()


# ---------------------------------------------------------------------------------------------
# Figures to bytes
# ---------------------------------------------------------------------------------------------

def export_size(fig: go.Figure, theme: str = DEFAULT_THEME, width: int | None = None,
                height: int | None = None) -> tuple[int, int]:
    """Layout size of the exported figure.

    Explicit arguments win; then the presentation theme's fixed 16:9 slide size; then the
    figure's own size (as on screen); then the theme's default.
    """
    return _size(fig.layout.width, fig.layout.height, theme, width, height)


def _size(own_width, own_height, theme: str, width: int | None, height: int | None) -> tuple[int, int]:
    t = get_theme(theme)
    if t.fixed_size:
        return int(width or t.width), int(height or t.height)
    return int(width or own_width or t.width), int(height or own_height or t.height)


def _spec(fig: go.Figure, scale: float, width: int | None, height: int | None) -> tuple[dict, int, int]:
    """The figure's dict as sent to the browser (a timeline: the step it opens at) and its size."""
    if not scale or scale <= 0:
        raise ValueError("scale must be positive")
    d = plain_dict(fig)  # a figure of plain dicts (explorer/fastpath.py, bundles.prepare) is not copied
    if d.get("frames"):
        d = plain_dict(current_figure(fig))
    layout = d.get("layout") or {}
    w, h = _size(layout.get("width"), layout.get("height"), DEFAULT_THEME, width, height)
    return d, w, h


def figure_bytes(fig: go.Figure, fmt: str, *, scale: float = 2, width: int | None = None,
                 height: int | None = None) -> bytes:
    """Render ``fig`` as png, svg or pdf. PNG pixel size = (width, height) × scale; SVG and PDF
    are vector, at the layout size. A figure with animation frames (a timeline) is drawn at the step
    it opens at, without its slider and buttons (every step: explorer/export/animation.py)."""
    fmt = fmt.lower()
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {fmt!r}; choose from {', '.join(IMAGE_FORMATS)}")
    spec, w, h = _spec(fig, scale, width, height)
    if fmt != "png":
        scale = 1  # vector: the page keeps the layout size (1600×900 px → 1200×675 pt)
    return _RENDERER.render(spec, {"format": fmt, "width": w, "height": h, "scale": scale})


# Trace types plotly.js draws in SVG alone: a WebGL one (scattergl, 3-D, maps) is drawn on a canvas at
# a pixel ratio that depends on the export's scale, so its PNG is drawn for itself (png_and_svg).
SVG_TRACES = frozenset({"bar", "box", "contour", "funnel", "heatmap", "histogram", "histogram2d",
                        "histogram2dcontour", "image", "indicator", "pie", "scatter", "table", "violin",
                        "waterfall"})


def png_and_svg(fig: go.Figure, *, scale: float = 2, width: int | None = None,
                height: int | None = None) -> dict[str, bytes]:
    """``{"png": figure_bytes(fig, "png", ...), "svg": figure_bytes(fig, "svg", ...)}`` with the figure
    drawn once instead of twice.

    plotly.js's PNG export draws the figure, serialises it as SVG and paints that SVG on a canvas; the
    PNG here paints the SVG export's own drawing (``_RASTERIZE_JS``). The drawing is most of either
    render: measured on the seed's 43 stage figures, their PNGs took 17.8 CPU-s drawn and 6.3 CPU-s
    painted from their SVGs, and were byte for byte the same PNGs (``tests/test_export.py`` compares
    them). A teacher's ZIP or the exporter's default formats (PNG, SVG and PDF) draw each figure
    twice instead of three times. Figures with WebGL traces, and a kaleido without the means
    (``_kaleido_class``), get their PNG drawn by plotly as before."""
    spec, w, h = _spec(fig, scale, width, height)
    svg = _RENDERER.render(spec, {"format": "svg", "width": w, "height": h, "scale": 1})
    png = None
    if all(trace.get("type", "scatter") in SVG_TRACES for trace in spec.get("data") or ()):
        png = _RENDERER.rasterize(svg, w, h, scale)
    if png is None:
        png = _RENDERER.render(spec, {"format": "png", "width": w, "height": h, "scale": scale})
    return {"png": png, "svg": svg}


# A cell a spreadsheet would run as a formula starts with one of these (OWASP, "CSV Injection")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """A text cell that a spreadsheet would evaluate, made inert with a leading apostrophe (the usual
    practice); numbers and other cells unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def table_bytes(df) -> bytes:
    """CSV (UTF-8 with a byte-order mark, so spreadsheet programs read Korean tokens correctly), with
    every text cell and label that a spreadsheet would evaluate (leading = + - @, tab, carriage
    return) neutralised; numeric columns stay numbers."""
    safe = df.copy()
    for col in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[col]):
            safe[col] = safe[col].map(spreadsheet_safe)
    safe.index = safe.index.map(spreadsheet_safe)
    safe.columns = safe.columns.map(spreadsheet_safe)
    safe.index.name = spreadsheet_safe(df.index.name)
    safe.columns.name = spreadsheet_safe(df.columns.name)
    # CRLF ends records (RFC 4180), so a cell holding a carriage return is quoted, not split
    return safe.to_csv(index=True, lineterminator="\r\n").encode("utf-8-sig")
