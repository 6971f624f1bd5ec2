"""Fixtures shared by the view tests: an untrained seed Transformer and its run on VIEW_TEXTS."""
from __future__ import annotations

import functools
import os

import pytest
import torch
from helpers import VIEW_TEXTS

import model
from explorer.views import stages

if os.environ.get("PYTEST_XDIST_WORKER"):
    # The suite runs in one process per core (pytest-xdist, `-n 2` in pyproject.toml): one torch
    # thread each, for the servers and command lines the tests start too. Two processes with two
    # threads each on two cores slow each other down many times over. An OMP_NUM_THREADS given on
    # the command line wins (`OMP_NUM_THREADS=2 python -m pytest`: the suite's results must not
    # depend on the thread count; the README records both).
    threads = os.environ.get("OMP_NUM_THREADS") or "1"
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = threads
    torch.set_num_threads(int(threads))

# Streamlit's AppTest scans every installed distribution's metadata for v2 components each time a new
# AppTest first runs (streamlit/testing/v1/app_test.py → manifest_scanner.scan_component_manifests):
# ~150 packages, about 0.3 CPU-s per AppTest (tests/test_fuzz.py's link test, 43 AppTests: 39.7 CPU-s
# with the scan each time, 26.7 with one). The installed packages do not change while the tests run, and
# this app has no such components: the scan is made once per test process. (`streamlit run` scans once
# per server anyway.)
from streamlit.components.v2 import manifest_scanner  # noqa: E402

manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)

# And each AppTest run makes a new ScriptCache, so the page's scripts are read, parsed for Streamlit's
# "magic" and compiled again on every run (found with cProfile on tests/test_lessons.py). Their
# bytecode is kept for the process, keyed by path and modification time: an edited script is compiled
# afresh.
from streamlit.runtime.scriptrunner.script_cache import ScriptCache  # noqa: E402

_compiled: dict = {}
_get_bytecode = ScriptCache.get_bytecode


def _cached_bytecode(self, script_path: str):
    key = (os.path.abspath(script_path), os.stat(script_path).st_mtime_ns)
    if key not in _compiled:
        _compiled[key] = _get_bytecode(self, script_path)
    return _compiled[key]


ScriptCache.get_bytecode = _cached_bytecode

# Playwright polls a `wait_for_function` condition on every animation frame unless told otherwise:
# sixty evaluations a second, each with a frame drawn, measured at 0.13 CPU-s of chromium per second of
# waiting against 0.006 when polled every 250 ms. The browser tests' waits poll every 100 ms instead
# (a wait may end up to 0.1 s later; no test times anything that short).
try:
    from playwright.sync_api import Frame, Page
except ImportError:  # the browser tests skip themselves
    pass
else:
    def _polled(wait):
        @functools.wraps(wait)
        def wait_for_function(self, expression, *, polling=None, **kw):
            return wait(self, expression, polling=100 if polling is None else polling, **kw)
        return wait_for_function

    Page.wait_for_function = _polled(Page.wait_for_function)
    Frame.wait_for_function = _polled(Frame.wait_for_function)

# A host's shell may carry a hosted demo's access code (explorer/access.py); the app's tests start
# without one, and tests/test_access.py sets its own.
os.environ.pop("ATTENTION_EXPLORER_ACCESS_CODE", None)


# The order in which the suite's two workers take the test files (pyproject.toml: --dist loadfile with
# --no-loadscope-reorder; pytest-xdist would otherwise hand out the files with the most tests first,
# which leaves the long browser and server files, with one or a few tests each, for last, one worker
# finishing them while the other idles). The longest files go first (the longest-processing-time rule),
# by their summed time in a full quiet run (bench/results/suite-time-20261128.txt); every other file
# follows in its usual order. A renamed file only loses its place.
LONGEST_FIRST = [
    "test_e2e.py", "test_export.py", "test_fuzz.py", "test_serve.py", "test_bench_floor.py", "test_poll_e2e.py",
    "test_lessons.py", "test_lessons_e2e.py", "test_analysis_e2e.py", "test_e2e_phone.py", "test_screenshots.py",
    "test_bench_baseline.py", "test_patching_e2e.py", "test_app_block.py", "test_bench.py",
    "test_decoding_export.py", "test_supervise.py", "test_whatif_app.py", "test_patching.py", "test_faults.py",
    "test_long_e2e.py", "test_offline.py", "test_analysis.py", "test_sampling.py", "test_decoding.py",
    "test_decoding_e2e.py", "test_family_words.py", "test_docs.py", "test_presenter_e2e.py", "test_notebooks.py",
]


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


@pytest.fixture(scope="module")
def seed():
    return model.load("seed", random=True)


@pytest.fixture(scope="module")
def run(seed):
    return stages.run_data(seed, VIEW_TEXTS)


@pytest.fixture(scope="session")
def shared_server():
    """One ``streamlit run explorer/app.py`` per test process, shared by the browser tests' files
    (tests/test_e2e.py's ``server``): a server's start and its models' loads are paid once per worker,
    not once per file. Its log: tests/artifacts/streamlit-<worker>.log."""
    from helpers import ROOT, streamlit_server

    artifacts = ROOT / "tests" / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with streamlit_server(log=artifacts / f"streamlit-{worker}.log") as url:
        yield url
