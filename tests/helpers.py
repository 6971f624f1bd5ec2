"""Small helpers shared by the tests (pytest puts this folder on sys.path: ``from helpers import ...``)."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import numpy as np

# repeated tokens ("l", "l"), HTML, Korean, emoji: the views' and the fast path's sentences
VIEW_TEXTS = ["hello <b>&", "안녕하세요 여러분 🙂"]

# the only markup a figure may carry is the views' own (plotly's subset); user text is escaped, so every
# "<" in a figure's strings opens one of these tags (tests/test_hostile.py, tests/test_fuzz.py)
RAW_MARKUP = re.compile(r"<(?!/?(?:br|b|i|em|sup|sub|span|extra)\b)", re.IGNORECASE)


def strings(obj):
    """Every string inside a plotly figure's JSON-able dict (object arrays included)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from strings(v)
    elif isinstance(obj, np.ndarray) and obj.dtype == object:
        for v in obj.ravel():
            yield from strings(v)


# --- the app, driven in process (AppTest), from the command line, and as a real server ---------

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "explorer" / "main.py")  # the page every session runs (explorer/app.py serves it)
CHROMIUM = "/usr/bin/chromium"


def app(timeout: float = 300, **params):
    """The app run once through Streamlit's AppTest with these URL query parameters."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def ok(at, *, strict: bool = False) -> None:
    """No exception on the page; no error at all (``strict``) or none saying a figure failed."""
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    if not strict:
        errors = [e for e in errors if "could not be drawn" in e or "went wrong" in e]
    assert not errors, errors


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m explorer.export ARGS`` from the repository root, one thread."""
    return subprocess.run([sys.executable, "-m", "explorer.export", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})})


def cli(*args: str) -> subprocess.CompletedProcess:
    """The exporter's command line run in this process: ``explorer.cli.export.main(ARGS)`` with its
    stdout and stderr captured, its exit status as ``returncode`` (``parser.error`` exits with 2).

    The same code as ``python -m explorer.export ARGS`` (``explorer/export/__main__.py`` only calls
    ``main``) without a new interpreter's ~4 CPU-s of imports and its own chromium per call; the
    tests that need a real process (its environment, its entry point) use ``run_cli``."""
    import contextlib
    import io

    from explorer.cli.export import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # as the interpreter does: a message goes to stderr with status 1
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            code = 1 if isinstance(e.code, str) else e.code
    return subprocess.CompletedProcess(["python", "-m", "explorer.export", *args], code or 0,
                                       out.getvalue(), err.getvalue())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(proc: subprocess.Popen, port: int, seconds: float) -> bytes:
    """b"ok" once the local server ``proc`` answers so on /_stcore/health within ``seconds``, else b""
    (it exited, or never answered ok)."""
    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return b"ok"
        except OSError:
            pass
        time.sleep(0.3)
    return b""


@contextmanager
def streamlit_process(log: Path | None = None, env: dict | None = None, script: str = "explorer/app.py"):
    """``streamlit run SCRIPT`` on a free local port until the block ends; yields (its URL, the process)
    once /_stcore/health answers (fails the test if it does not within 120 s)."""
    import pytest

    port = free_port()
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        if health(proc, port, 120) != b"ok":
            pytest.fail(f"streamlit did not become healthy (exit code {proc.poll()}; log: {log})")
        yield url, proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        if log:
            out.close()


@contextmanager
def streamlit_server(log: Path | None = None, env: dict | None = None):
    """``streamlit run explorer/app.py`` on a free local port until the block ends; yields its URL
    once /_stcore/health answers (fails the test if it does not within 120 s)."""
    with streamlit_process(log, env) as (url, _proc):
        yield url
