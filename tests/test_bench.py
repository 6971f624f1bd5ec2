"""`python -m bench --quick` runs end to end: the table, the JSON with the same figures, a real
server that served every simulated session without an error. Speed is not asserted here (the
machine is shared): the full `python -m bench` reports it against the targets."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# kaleido's browser channel (choreographer 1.4) logs a message from chromium it cannot parse, with
# its traceback, and goes on without it ("JSONError decoding message. Ignoring"); seen once, under
# the full suite's load, with the export's figures all made
_IGNORED_BY_CHOREOGRAPHER = re.compile(
    r"JSONError decoding message\. Ignoring\n(?:.*\n)*?choreographer\.channels\._errors\.JSONError[^\n]*\n?")


def ours(stderr: str) -> str:
    """stderr without what kaleido's browser channel logs and ignores."""
    return _IGNORED_BY_CHOREOGRAPHER.sub("", stderr)


def test_quick_bench_prints_the_table_and_writes_the_same_figures(tmp_path):
    out = tmp_path / "bench.json"
    # the workshop clicks for 4 s and the concurrency test changes sentences for 6 s (quick: 10 and 12)
    r = subprocess.run([sys.executable, "-m", "bench", "--quick", "--window", "4", "--seconds", "6", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in ours(r.stderr), r.stderr[-3000:]
    res = json.loads(out.read_text())
    table = r.stdout

    hook = res["hook_overhead"]["seed"]
    assert hook["run_s"] > 0 and hook["run_with_cache_s"] > 0
    assert f"{hook['ratio']:.3f}" in table

    st = res["stages"]["seed"]["16"]
    assert st["tokens"] == 16 and st["layer_change_s"] > 0 and st["new_sentence_s"] > 0
    assert set(st["payload_bytes"]) >= {"tokens", "softmax", "mask", "overview"}
    assert st["heatmap_max_bytes"] < 2_000_000
    assert f"{st['new_over_change']:.2f}" in table

    assert "export" in res and ("skipped" in res["export"] or res["export"]["png"]["warm_median_s"] > 0)

    c = res["concurrency"]
    assert c["sessions"] == 3 and c["server_alive"]
    assert c["errors"] == 0, c["error_messages"]
    assert c["changes"] >= 3 and c["p95_s"] > 0 and c["rss_end_mb"] > 0
    assert f"{c['p95_s']:.2f}" in table
    assert set(res["targets"]) >= {"hook_overhead.seed", "concurrency"}


def test_bench_refuses_bad_arguments():
    r = subprocess.run([sys.executable, "-m", "bench", "--only", "nonsense"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "unknown sections: nonsense" in r.stderr
    r = subprocess.run([sys.executable, "-m", "bench", "--think", "5"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--think" in r.stderr
