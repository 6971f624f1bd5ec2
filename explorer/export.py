"""Static export of the explorer's figures: PNG, SVG, PDF, CSV, and one-click ZIP bundles.

Pure Python (no Streamlit). Images come from plotly.js running in Debian's chromium through
kaleido; one chromium is started on the first export and kept warm for the rest of the process,
so repeated exports take a fraction of a second. Nothing here ever downloads a browser: when
chromium is missing, every image export raises ``ExportUnavailable`` with the command that
installs it, and CSV export keeps working.

    png = figure_bytes(fig, "png", scale=2)                  # bytes
    data = bundle_zip(cache, info, sel, model_name="seed", text="...", formats=("png", "pdf"))

Command line (the same figure code as the app):

    python -m explorer.export --model seed --text "hello world" --layer 0 --head 1 \\
        --stages all --format png,svg,pdf --out slides/
"""
from __future__ import annotations

import argparse
import asyncio
import atexit
import functools
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import unicodedata
import zipfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import plotly.graph_objects as go

from explorer.views.theme import DEFAULT_THEME, THEME_NAMES, apply_theme, get_theme

IMAGE_FORMATS = ("png", "svg", "pdf")
FORMATS = (*IMAGE_FORMATS, "csv")
MIME = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf",
        "csv": "text/csv", "zip": "application/zip", "json": "application/json"}
INSTALL_COMMAND = "apt-get install -y chromium fonts-noto-cjk"
# Where a browser is looked for, in order (BROWSER_PATH, the variable choreographer and kaleido
# honour, overrides them all).
BROWSER_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome",
                      "google-chrome-stable")
RENDER_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0


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
    try:
        import kaleido  # noqa: F401
    except ImportError:
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

    @property
    def warm(self) -> bool:
        return self._kaleido is not None

    def _start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise reason
        path = browser_path()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="explorer-export", daemon=True)
        thread.start()
        try:
            k = _kaleido_class()(path=path, n=1, mathjax=False, timeout=RENDER_TIMEOUT_S)
            asyncio.run_coroutine_threadsafe(k.open(), loop).result(START_TIMEOUT_S)
        except Exception as e:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            if isinstance(e, ExportUnavailable):
                raise
            raise ExportUnavailable(f"chromium at {path} could not be started ({type(e).__name__}: "
                                    f"{e}).") from None
        self._loop, self._thread, self._kaleido, self._path = loop, thread, k, path

    def ensure_started(self) -> None:
        with self._lock:
            if self._kaleido is None or (self._path != os.environ.get("BROWSER_PATH", self._path)):
                self._stop_locked()
                self._start()

    def render(self, fig: dict, opts: dict) -> bytes:
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
            future = asyncio.run_coroutine_threadsafe(k.calc_fig(fig, opts=opts), loop)
            try:
                return _wait(future, k)
            except ExportError as e:
                error = e
            except Exception as e:  # a crashed browser or a figure plotly.js refused
                error = ExportError(f"{opts.get('format', '?')} export failed: "
                                    f"{type(e).__name__}: {e}")
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


def _kaleido_class():
    """kaleido.Kaleido, returning each used tab to the pool in the background.

    kaleido reloads the page after every render so that each figure starts clean; stock kaleido
    makes the caller wait for that reload. Here the image is returned at once and the reload
    runs while the user looks at it (the next render waits for the tab, as before).
    """
    import kaleido

    base = kaleido.Kaleido
    if not hasattr(base, "_return_kaleido_tab"):  # another kaleido version: keep its behaviour
        return base

    class _Kaleido(base):
        broken = False

        async def _return_kaleido_tab(self, tab) -> None:
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

    return _Kaleido


_RENDERER = _Renderer()
atexit.register(_RENDERER.stop)


def warm_up() -> None:
    """Start chromium now (e.g. when the app starts) so the first export is already fast."""
    _RENDERER.ensure_started()


def shutdown() -> None:
    """Close the warm chromium (the next export starts a new one)."""
    _RENDERER.stop()


def is_warm() -> bool:
    return _RENDERER.warm


# ---------------------------------------------------------------------------------------------
# Figures to bytes
# ---------------------------------------------------------------------------------------------

def export_size(fig: go.Figure, theme: str = DEFAULT_THEME, width: int | None = None,
                height: int | None = None) -> tuple[int, int]:
    """Layout size of the exported figure.

    Explicit arguments win; then the presentation theme's fixed 16:9 slide size; then the
    figure's own size (as on screen); then the theme's default.
    """
    t = get_theme(theme)
    if t.fixed_size:
        return int(width or t.width), int(height or t.height)
    return (int(width or fig.layout.width or t.width), int(height or fig.layout.height or t.height))


def figure_bytes(fig: go.Figure, fmt: str, *, scale: float = 2, width: int | None = None,
                 height: int | None = None) -> bytes:
    """Render ``fig`` as png, svg or pdf. PNG pixel size = (width, height) × scale; SVG and PDF
    are vector, at the layout size."""
    fmt = fmt.lower()
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {fmt!r}; choose from {', '.join(IMAGE_FORMATS)}")
    if not scale or scale <= 0:
        raise ValueError("scale must be positive")
    w, h = export_size(fig, width=width, height=height)
    if fmt != "png":
        scale = 1  # vector: the page keeps the layout size (1600×900 px → 1200×675 pt)
    return _RENDERER.render(fig.to_dict(), {"format": fmt, "width": w, "height": h, "scale": scale})


def table_bytes(df) -> bytes:
    """CSV (UTF-8 with a byte-order mark, so spreadsheet programs read Korean tokens correctly)."""
    return df.to_csv(index=True).encode("utf-8-sig")


# ---------------------------------------------------------------------------------------------
# Captions and file names
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ExportMeta:
    """What a figure shows: it becomes the caption, the file name and the manifest entry."""

    model: str
    sentence: int
    text: str
    block: str
    layer: int
    head: int
    stage: str
    stage_title: str = ""
    stage_index: int | None = None  # position in the pipeline, so files sort in order

    def as_dict(self) -> dict:
        return {"model": self.model, "sentence": self.sentence, "text": self.text,
                "block": self.block, "layer": self.layer, "head": self.head, "stage": self.stage,
                "stage_title": self.stage_title}


def shorten(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def default_caption(meta: ExportMeta) -> str:
    stage = meta.stage_title or meta.stage
    return (f"{meta.model} · sentence {meta.sentence} “{shorten(meta.text)}” · {meta.block} · "
            f"layer {meta.layer} · head {meta.head} · {stage}")


def with_caption(fig: go.Figure, caption: str, *, theme: str = DEFAULT_THEME) -> go.Figure:
    """A copy of ``fig`` with ``caption`` as the title's subtitle (always visible, never clipped).

    The caption is plain text: anything that looks like markup is escaped.
    """
    out = go.Figure(fig)
    t = get_theme(theme)
    safe = html.escape(caption, quote=False)
    title = out.layout.title
    existing = title.subtitle.text if title.subtitle and title.subtitle.text else ""
    subtitle = f"{existing}<br>{safe}" if existing else safe
    title_text = title.text or " "
    base_px = out.layout.font.size or 12
    title_px = (title.font.size if title.font and title.font.size else None) or t.title_size or 17
    # Room for the title, every caption line and any panel titles that sit above the plot
    # (subplot titles), computed: no automargin, because kaleido can capture a frame in which
    # tick labels have not yet followed an automargin redraw.
    lines = subtitle.count("<br>") + 1
    above = [a for a in out.layout.annotations or ()
             if a.yref == "paper" and a.y is not None and a.y >= 0.99 and a.text]
    panel = max((1.35 * (a.font.size or base_px) * (a.text.count("<br>") + 1) for a in above),
                default=0)
    top = 16 + 1.35 * title_px + 8 + 1.45 * t.caption_size * lines + 16 + panel
    out.update_layout(title={"text": title_text, "y": 1, "yref": "container", "yanchor": "top",
                             "pad": {"t": 16, "l": 20}, "automargin": False,
                             "subtitle": {"text": subtitle, "font": {"size": t.caption_size}}},
                      margin={"t": int(max(top, out.layout.margin.t or 0))})
    return out


_UNSAFE = re.compile(r"[^\w.-]+", flags=re.UNICODE)


def slugify(value: object, max_len: int = 40) -> str:
    """A file-name-safe slug: letters (Hangul included), digits, '-', '_' and '.' only.

    No path separators, no leading dots, never empty.
    """
    text = unicodedata.normalize("NFC", str(value))
    text = _UNSAFE.sub("-", text.replace("/", "-").replace("\\", "-"))
    text = re.sub(r"-{2,}", "-", text).strip("-._")
    if len(text) > max_len:
        cut = text[:max_len]
        if "-" in cut[max_len // 2:] and text[max_len] != "-":  # end on a whole word
            cut = cut[: cut.rfind("-")]
        text = cut.strip("-._")
    return text or "x"


def file_stem(meta: ExportMeta) -> str:
    """e.g. ``seed_s0-hello-world_encoder.self_attn_L0_H1_05-scores``."""
    is_path = "/" in meta.model or "\\" in meta.model
    model = slugify(Path(meta.model.replace("\\", "/")).stem if is_path else meta.model)
    stage = slugify(meta.stage)
    if meta.stage_index is not None:
        stage = f"{meta.stage_index:02d}-{stage}"
    return "_".join([model, f"s{meta.sentence}-{slugify(meta.text, 24)}", slugify(meta.block),
                     f"L{meta.layer}", f"H{meta.head}", stage])


def prepare(fig: go.Figure, meta: ExportMeta | None, *, theme: str = DEFAULT_THEME,
            caption: str | None = None) -> go.Figure:
    """The figure as it is exported: themed, with its caption, at the export size."""
    out = apply_theme(fig, theme)
    if meta is not None or caption:
        out = with_caption(out, caption or default_caption(meta), theme=theme)  # type: ignore[arg-type]
    w, h = export_size(fig, theme)
    out.update_layout(width=w, height=h)
    return out


# ---------------------------------------------------------------------------------------------
# Bundles
# ---------------------------------------------------------------------------------------------

@dataclass
class Item:
    """One figure to export: the prepared figure, its matrix, and what it shows."""

    fig: go.Figure
    df: object | None  # pandas.DataFrame | None
    meta: ExportMeta


@dataclass
class Written:
    name: str
    stage: str
    format: str
    bytes: int


def app_version() -> str:
    try:
        from importlib.metadata import version

        return version("attention-explorer")
    except Exception:  # not installed: read the checkout's pyproject
        pass
    try:
        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]
    except Exception:
        return "unknown"


Progress = Callable[[int, int, str], None]  # (done, total, what)


def render_items(items: Sequence[Item], formats: Iterable[str], *, scale: float = 2,
                 progress: Progress | None = None) -> Iterable[tuple[str, ExportMeta, str, bytes]]:
    """Yield (file name, meta, format, bytes) for every item and format, in order."""
    formats = check_formats(formats)
    total = sum(1 for it in items for f in formats if f != "csv" or it.df is not None)
    done = 0
    for it in items:
        stem = file_stem(it.meta)
        for fmt in formats:
            if fmt == "csv":
                if it.df is None:
                    continue
                data = table_bytes(it.df)
            else:
                data = figure_bytes(it.fig, fmt, scale=scale)
            done += 1
            if progress:
                progress(done, total, f"{stem}.{fmt}")
            yield f"{stem}.{fmt}", it.meta, fmt, data


def check_formats(formats: Iterable[str]) -> list[str]:
    out: list[str] = []
    for f in formats:
        f = f.strip().lower()
        if f not in FORMATS:
            raise ValueError(f"unknown format {f!r}; choose from {', '.join(FORMATS)}")
        if f not in out:
            out.append(f)
    if not out:
        raise ValueError("choose at least one format")
    return out


def manifest(meta: ExportMeta, written: list[Written], *, theme: str, scale: float,
             lang: str) -> dict:
    return {
        "app": "Attention Explorer", "app_version": app_version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": meta.model, "sentence": meta.sentence, "text": meta.text, "block": meta.block,
        "layer": meta.layer, "head": meta.head, "theme": theme, "scale": scale, "lang": lang,
        "files": [w.__dict__ for w in written],
    }


def zip_items(items: Sequence[Item], formats: Iterable[str], *, theme: str = DEFAULT_THEME,
              scale: float = 2, lang: str = "en", progress: Progress | None = None) -> bytes:
    """One ZIP with every item in every format, plus ``manifest.json`` listing every file."""
    if not items:
        raise ValueError("nothing to export")
    buf = io.BytesIO()
    written: list[Written] = []
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, meta, fmt, data in render_items(items, formats, scale=scale, progress=progress):
            zf.writestr(name, data)
            written.append(Written(name, meta.stage, fmt, len(data)))
        doc = manifest(items[0].meta, written, theme=theme, scale=scale, lang=lang)
        zf.writestr("manifest.json", json.dumps(doc, ensure_ascii=False, indent=2))
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# From a selection: the same stage figures as the app
# ---------------------------------------------------------------------------------------------

def _stages_module():
    from explorer.views import stages

    return stages


def stage_ids() -> list[str]:
    return [sid for sid, _ in _stages_module().STAGES]


def stage_title(stage_id: str, lang: str = "en") -> str:
    for sid, titles in _stages_module().STAGES:
        if sid == stage_id:
            return titles.get(lang) or titles.get("en") or sid
    raise ValueError(f"unknown stage {stage_id!r}")


def stage_item(stage_id: str, cache, info, sel, *, model_name: str, text: str,
               theme: str = DEFAULT_THEME, lang: str = "en", fig: go.Figure | None = None,
               df=None, **options) -> Item:
    """One stage, ready to export: the app's figure (built here unless given), themed, captioned.

    ``options`` go to ``stage_figure`` unchanged (weights=, pe_base=, ...), so the export shows
    exactly what the app shows.
    """
    views = _stages_module()
    order = stage_ids()
    if stage_id not in order:
        raise ValueError(f"unknown stage {stage_id!r}; choose from {', '.join(order)}")
    if fig is None:
        fig, df = views.stage_figure(stage_id, cache, info, sel, lang=lang, **options)
    meta = ExportMeta(model=model_name, sentence=sel.sentence, text=text, block=sel.block,
                      layer=sel.layer, head=sel.head, stage=stage_id,
                      stage_title=stage_title(stage_id, lang), stage_index=order.index(stage_id) + 1)
    cap = views.caption(model_name, text, sel, stage_id, lang=lang)
    return Item(prepare(fig, meta, theme=theme, caption=cap), df, meta)


def stage_items(cache, info, sel, *, model_name: str, text: str,
                stages: Sequence[str] | None = None, theme: str = DEFAULT_THEME,
                lang: str = "en", **options) -> list[Item]:
    """Every requested stage (default: all, in pipeline order) of one selection."""
    order = stage_ids()
    wanted = order if stages is None else list(stages)
    unknown = [s for s in wanted if s not in order]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(order)}")
    return [stage_item(sid, cache, info, sel, model_name=model_name, text=text, theme=theme,
                       lang=lang, **options) for sid in wanted]


def bundle_zip(cache, info, sel, *, model_name: str, text: str,
               formats: Iterable[str] = IMAGE_FORMATS + ("csv",), stages: Sequence[str] | None = None,
               theme: str = DEFAULT_THEME, lang: str = "en", scale: float = 2,
               progress: Progress | None = None, **options) -> bytes:
    """"Export all" for one selection: every stage's figure in ``formats`` + CSVs + manifest.

    ``options`` go to ``stage_figure`` (weights=, pe_base=, ...).
    """
    items = stage_items(cache, info, sel, model_name=model_name, text=text, stages=stages,
                        theme=theme, lang=lang, **options)
    return zip_items(items, formats, theme=theme, scale=scale, lang=lang, progress=progress)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def fetch_hint(name: str) -> str:
    from model.registry import FETCHED, SEED_WEIGHTS

    if name in FETCHED:
        return f"fetch the weights with `python -m model.fetch {name}`"
    if name in SEED_WEIGHTS:
        return "reinstall the project, or retrain with `python -m model.train reverse`"
    return "check the path, or use one of: " + ", ".join([*SEED_WEIGHTS, *FETCHED])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m explorer.export",
        description="Export every stage of attention as slide-ready figures (PNG, SVG, PDF) and "
                    "matrices (CSV), with the same figure code as the app.",
        epilog='example: python -m explorer.export --model seed --text "hello world" '
               "--layer 0 --head 1 --stages all --format png,svg,pdf --out slides/")
    p.add_argument("--model", default="seed", help="seed, seed-sort, minilm, smollm2 or a path")
    p.add_argument("--text", action="append", required=True,
                   help="a sentence (repeat for a padded batch)")
    p.add_argument("--sentence", type=int, default=0, help="which --text to show (default 0)")
    p.add_argument("--block", default=None,
                   help="encoder.self_attn, decoder.self_attn or decoder.cross_attn "
                        "(default: the model's first)")
    p.add_argument("--layer", type=int, default=0)
    p.add_argument("--head", type=int, default=0)
    p.add_argument("--query", type=int, default=0, help="query position for per-row stages")
    p.add_argument("--key", type=int, default=0, help="key position for per-column stages")
    p.add_argument("--stages", default="all", help="'all' or a comma-separated list of stage ids")
    p.add_argument("--format", default="png,svg,pdf",
                   help="comma-separated: png, svg, pdf, csv (default png,svg,pdf)")
    p.add_argument("--out", default="slides", help="output folder (created if missing)")
    p.add_argument("--theme", choices=THEME_NAMES, default="presentation")
    p.add_argument("--lang", choices=("en", "ko"), default="en")
    p.add_argument("--scale", type=float, default=2.0, help="PNG pixels per layout pixel")
    p.add_argument("--zip", action="store_true",
                   help="write one ZIP (all files + manifest.json) into --out instead")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)

    # cheap checks first, before any model is loaded
    try:
        formats = check_formats(_split(a.format))
    except ValueError as e:
        parser.error(f"--format: {e}")
    if a.scale <= 0 or a.scale > 10:
        parser.error("--scale must be in (0, 10]")
    order = stage_ids()
    stages = order if a.stages.strip().lower() == "all" else _split(a.stages)
    unknown = [s for s in stages if s not in order]
    if unknown or not stages:
        parser.error(f"--stages: unknown stage {', '.join(unknown) or '(none given)'}; "
                     f"use 'all' or some of: {', '.join(order)}")
    if not 0 <= a.sentence < len(a.text):
        parser.error(f"--sentence {a.sentence} is out of range: {len(a.text)} sentence(s) given, "
                     f"so use 0..{len(a.text) - 1}")
    if any(f in IMAGE_FORMATS for f in formats) and (reason := unavailable_reason()):
        parser.exit(3, f"{parser.prog}: error: {reason}\n"
                       f"(CSV still works: --format csv)\n")

    if any(f in IMAGE_FORMATS for f in formats) and has_cjk(" ".join(a.text)) and cjk_font_missing():
        print(f"warning: no CJK font is installed, so Korean text will show as empty boxes; "
              f"install it with: {INSTALL_COMMAND}", file=sys.stderr)

    import model
    from explorer.views import stages as views

    try:
        m = model.load(a.model)
    except model.WeightsError as e:
        msg = str(e)
        hint = fetch_hint(a.model)
        known = "`" in msg or "use one of" in msg  # the loader already says how to fix it
        parser.error(f"--model {a.model}: {msg}" + ("" if known else f"; {hint}"))
    except (OSError, ValueError) as e:
        parser.error(f"--model {a.model}: {e}; {fetch_hint(a.model)}")
    info = m.info
    blocks = list(views.blocks_for(info))
    block = a.block or blocks[0]
    if block not in blocks:
        parser.error(f"--block {block} does not exist in {info.name} ({info.kind}); "
                     f"choose from {', '.join(blocks)}")
    n_layers = views.layers_for(info, block)
    if not 0 <= a.layer < n_layers:
        parser.error(f"--layer {a.layer} is out of range: {info.name} has {n_layers} layer(s) in "
                     f"{block.split('.')[0]}, so use 0..{n_layers - 1}")
    if not 0 <= a.head < info.n_heads:
        parser.error(f"--head {a.head} is out of range: {info.name} has {info.n_heads} heads, "
                     f"so use 0..{info.n_heads - 1}")

    if a.stages.strip().lower() == "all":  # every stage this model has (as the app's ZIP)
        stages = [s for s in stages if views.applies(s, info)]
    cache = views.run_data(m, a.text)  # what the app caches: hook tensors and the weights
    name = a.model if a.model in model.available() else Path(a.model).stem  # no home paths
    sel = views.Selection(model=a.model, sentence=a.sentence, layer=a.layer, head=a.head,
                          block=block, query=a.query, key=a.key)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = a.text[a.sentence]
    try:
        items = stage_items(cache, info, sel, model_name=name, text=text, stages=stages,
                            theme=a.theme, lang=a.lang)
        bar = _progress_bar(a.quiet, total=sum(
            1 for it in items for f in formats if f != "csv" or it.df is not None))
        if a.zip:
            data = zip_items(items, formats, theme=a.theme, scale=a.scale, lang=a.lang,
                             progress=bar.step)
            target = out_dir / (f"{slugify(name)}_s{a.sentence}-{slugify(text, 24)}_"
                                f"{slugify(block)}_L{a.layer}_H{a.head}.zip")
            target.write_bytes(data)
            written = [target]
        else:
            written = []
            for name, _meta, _fmt, data in render_items(items, formats, scale=a.scale,
                                                        progress=bar.step):
                (out_dir / name).write_bytes(data)
                written.append(out_dir / name)
        bar.close()
    except ExportUnavailable as e:
        parser.exit(3, f"{parser.prog}: error: {e}\n")
    except ExportError as e:
        parser.exit(1, f"{parser.prog}: error: {e}\n")
    finally:
        shutdown()
    print(f"wrote {len(written)} file(s) to {out_dir}/")
    return 0


class _progress_bar:
    """tqdm when available and wanted; a silent stand-in otherwise."""

    def __init__(self, quiet: bool, total: int) -> None:
        self._bar = None
        if not quiet:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, unit="file", desc="exporting")
            except ImportError:
                pass

    def step(self, done: int, total: int, what: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(what[-40:], refresh=False)
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


if __name__ == "__main__":
    sys.exit(main())
