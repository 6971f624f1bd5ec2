"""The docs' pictures of the page, taken from the running app in headless chromium (Playwright).

    python scripts/screenshots.py                     starts the app (attention-explorer) on a free
                                                      port, writes docs/images/*.png and docs/screenshot.png
    python scripts/screenshots.py --url http://127.0.0.1:8501   an app already running (the current code)
    python scripts/screenshots.py --only explorer-ko  one picture

The pictures: the default page (one stage), a lesson and presenter mode, in English and Korean
(docs/images/NAME-LANG.png: the docs' pages show those of their language), and the README's
picture (docs/screenshot.png: the decoder's masks for the shorter sentence of a padded batch).
tests/test_screenshots.py takes them again from the current code and compares them with the
committed files (``difference``), so a picture that no longer shows the page fails the suite: run
this script and commit the pictures when the page changes.

Chromium is Debian's (/usr/bin/chromium); nothing is downloaded (never `playwright install`).
"""
from __future__ import annotations

import argparse
import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync", "--hide-scrollbars", "--font-render-hinting=none"]
# no caret blinking in a text box, no transitions: what is on screen does not depend on when it is taken
STILL_CSS = "*, *::before, *::after { caret-color: transparent !important; animation: none !important; " \
            "transition: none !important; }"
PLOTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(d => d.data && d.data.length).length"""
# what must stop changing before a picture is taken: the figures' data, their geometry as plotly last
# laid them out (a margin pushed by a colour bar moves the plot area after the first draw), and the text
STATE_JS = """() => JSON.stringify([Array.from(document.querySelectorAll('.js-plotly-plot'))
    .map(d => [(d.data || []).map(t => t.z || t.y || null),
               d._fullLayout && d._fullLayout._size ? [d._fullLayout.width, d._fullLayout.height,
                   d._fullLayout._size.l, d._fullLayout._size.r, d._fullLayout._size.t, d._fullLayout._size.b] : null]),
    document.body.innerText.length])"""


@dataclass(frozen=True)
class Shot:
    """One picture: the page at ``path`` (below the app's address) in a window of ``size``,
    scrolled to the element ``scroll_to`` (an id) if given."""

    name: str
    path: str
    size: tuple[int, int]
    scroll_to: str | None = None

    @property
    def file(self) -> Path:
        return DOCS / "screenshot.png" if self.name == "screenshot" else DOCS / "images" / f"{self.name}.png"


def shots() -> list[Shot]:
    out = []
    for lang in ("en", "ko"):
        out += [Shot(f"explorer-{lang}", f"/?model=seed&lang={lang}", (1440, 900)),
                Shot(f"lesson-{lang}", f"/lessons?lesson=5&lang={lang}", (1440, 900)),
                Shot(f"presenter-{lang}", f"/?model=seed&lang={lang}&present=1", (1600, 900))]
    text = quote("hello world\ndcba")
    out.append(Shot("screenshot", f"/?model=seed-sort&view=scores&block=decoder.self_attn&layer=0&head=0"
                                  f"&sentence=1&lang=en&text={text}", (1440, 1150), scroll_to="mask"))
    return out


def _settle(page, quiet: float = 0.8, timeout: float = 60) -> None:
    """Until the figures and the page's text have stopped changing for ``quiet`` seconds and
    Streamlit has finished its run."""
    deadline = time.time() + timeout
    last, since = page.evaluate(STATE_JS), time.time()
    while time.time() < deadline:
        time.sleep(0.2)
        now = page.evaluate(STATE_JS)
        running = page.locator('[data-testid="stStatusWidget"]').count() > 0
        if now != last or running:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return
    raise TimeoutError(f"the page did not settle within {timeout} s")


def take(browser, url: str, shot: Shot) -> bytes:
    """The picture ``shot`` of the app at ``url``, as PNG bytes."""
    page = browser.new_page(viewport={"width": shot.size[0], "height": shot.size[1]}, device_scale_factor=1)
    try:
        page.goto(url.rstrip("/") + shot.path, wait_until="domcontentloaded")
        page.wait_for_function(f"() => ({PLOTS_JS})() >= 1", timeout=180_000, polling=100)
        page.add_style_tag(content=STILL_CSS)
        _settle(page)
        if page.locator('[data-testid="stException"]').count():
            raise RuntimeError(f"{shot.name}: the page shows an exception")
        if shot.scroll_to:
            page.evaluate(f"() => document.getElementById({shot.scroll_to!r}).scrollIntoView({{block: 'start'}})")
            _settle(page, quiet=0.5)
        page.evaluate("() => document.fonts.ready")
        page.mouse.move(0, 0)
        time.sleep(0.3)
        return page.screenshot()
    finally:
        page.close()


def difference(a: bytes, b: bytes, threshold: int = 32) -> float:
    """The share of pixels (0..1) whose colour differs by more than ``threshold`` (of 255) in some
    channel between the PNG images ``a`` and ``b``; 1.0 when their sizes differ."""
    import numpy as np
    from PIL import Image

    x = np.asarray(Image.open(io.BytesIO(a)).convert("RGB"), dtype=np.int16)
    y = np.asarray(Image.open(io.BytesIO(b)).convert("RGB"), dtype=np.int16)
    if x.shape != y.shape:
        return 1.0
    return float((np.abs(x - y).max(axis=2) > threshold).mean())


@contextmanager
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@contextmanager
def app():
    """``attention-explorer`` (explorer/cli/main.py) on a free local port; yields its URL once healthy."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "explorer.cli.main", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"the app did not start (exit status {proc.poll()})") from None
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/screenshots.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="an app already running (default: start one)")
    p.add_argument("--only", action="append", help="a picture's name (repeat); default every one")
    p.add_argument("--out", type=Path, default=None, help="write into this folder instead of docs/")
    a = p.parse_args(argv)
    wanted = [s for s in shots() if not a.only or s.name in a.only]
    if not wanted:
        p.error(f"--only: choose from {', '.join(s.name for s in shots())}")
    with (app() if a.url is None else _given(a.url)) as url, browser() as b:
        for shot in wanted:
            target = shot.file if a.out is None else a.out / shot.file.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(take(b, url, shot))
            print(f"wrote {target}")
    return 0


@contextmanager
def _given(url: str):
    yield url


if __name__ == "__main__":
    sys.exit(main())
