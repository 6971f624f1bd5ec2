"""Work that may wait runs at a lower CPU priority (model/runtime/limits.py: lower_this_thread): the logit lens and
patching on the analysis threads of explorer/state.py, the export browser under `nice`. A learner's
forward pass on the same core then goes first (bench/noisy.py measures the class beside such work)."""
from __future__ import annotations

import threading

import pytest

from explorer import state
from model.runtime import limits


def test_a_lowered_thread_is_lowered_alone():
    seen = {}

    def work():
        seen["ok"] = limits.lower_this_thread()
        seen["nice"] = limits.thread_nice()

    before = limits.thread_nice()
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == {"ok": True, "nice": max(before, limits.BACKGROUND_NICE)}
    assert limits.thread_nice() == before  # the caller's thread keeps its priority


def test_analyses_run_on_lowered_threads_and_their_errors_come_back():
    tids = []

    def probe(x):
        tids.append(threading.get_native_id())
        return x * 2, limits.thread_nice()

    doubled, nice = state.in_background(probe, 21)
    assert doubled == 42 and nice >= limits.BACKGROUND_NICE
    assert tids[0] != threading.get_native_id() and limits.thread_nice() < limits.BACKGROUND_NICE

    def fails():
        raise ValueError("from the analysis thread")

    with pytest.raises(ValueError, match="from the analysis thread"):
        state.in_background(fails)


def test_the_export_browser_starts_under_nice(monkeypatch):
    from explorer.export import renderer

    try:
        cls = renderer._chromium_class()
    except renderer.ExportUnavailable as e:
        pytest.skip(str(e))
    parent = cls.__mro__[1]  # choreographer's Chromium: its command line, as it would start the browser
    monkeypatch.setattr(parent, "get_cli", lambda self: ["python", "wrapper.py", "/usr/bin/chromium", "--headless"])
    cli = cls.get_cli(object.__new__(cls))
    assert cli[0].endswith("nice") and cli[1:3] == ["-n", str(limits.BACKGROUND_NICE)]
    assert cli[3:] == ["python", "wrapper.py", "/usr/bin/chromium", "--headless"]
