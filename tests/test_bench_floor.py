"""`python -m bench --only floor` and `--only soak` in short. In a file of its own, so that the
suite's two workers share the bench's long tests (a test file stays on one worker). Speed is not asserted here: the full `python -m bench` reports it."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_bench import ours

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_the_floor_measure_in_short(tmp_path):
    """`--only floor --quick`: one round, a fresh bare Streamlit app and a fresh explorer, each timed to
    its first figure in chromium and clicked through the websocket protocol; the ratios printed.
    Asserted: every run saw the reruns it asked for, without an error, and every figure is finite and
    positive (how fast is the full run's business: `python -m bench --only floor`)."""
    import math

    out = tmp_path / "floor.json"
    r = subprocess.run([sys.executable, "-m", "bench", "--only", "floor", "--quick", "--json", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in ours(r.stderr), r.stderr[-3000:]
    res = json.loads(out.read_text())
    f = res["floor"]
    print("\n" + r.stdout)
    assert f["rounds"] == 1 and f["changes_per_kind"] == 3
    runs = {row["app"]: row for row in f["runs"]}
    assert set(runs) == {"bare", "current"}
    # a first load, then twice (the warm-up pass, the measured one): a reset and every change
    assert runs["bare"]["reruns_expected"] == 1 + 2 * (1 + f["bare_reruns"])
    assert runs["current"]["reruns_expected"] == 1 + 2 * (1 + 3 * f["changes_per_kind"])
    for row in runs.values():
        assert row["errors"] == [], row.get("log_tail", row)
        assert row["reruns_ok"] == row["reruns_expected"]
        assert row["first_load"]["charts"] >= 1
        assert 0 < row["health_s"] < row["first_figure_s"]
        assert all(math.isfinite(v) and v > 0 for v in row["cpu_ms"].values()), row["cpu_ms"]
    assert runs["bare"]["charts_per_rerun"] == {"rerun": 1.0}
    assert set(runs["current"]["cpu_ms"]) == {"layer", "head", "block", "all"}
    cur = f["summary"]["current"]
    for kind in ("layer", "head", "block", "all"):
        v = cur["ratio"][kind]["median"]
        assert math.isfinite(v) and v > 0
        assert f"{v:.2f}" in r.stdout
    v = cur["first_figure_ratio"]["median"]
    assert math.isfinite(v) and v > 0 and f"{v:.2f}" in r.stdout
    assert all(0 < f["python_ms"][k] < math.inf for k in ("start", "end"))
    assert "pure-Python" in r.stdout
    assert set(res["targets"]) == {"floor.click_cpu_ratio", "floor.first_figure_ratio"}


def test_the_soak_in_short(tmp_path):
    """`--only soak --soak-minutes 0.5 --soak-learners 4 --act 1,2`: the workshop-length soak's short form
    (half a minute, its learners acting every 1-2 s so that both five-second windows see clicks). Asserted:
    the report's structure, every figure finite, every learner acted, RSS sampled in both windows (the
    run's first and last sixth), no error, every action in the CSV beside the JSON. How the numbers
    compare with the floors is the 30-minute run's business (`python -m bench --only soak`)."""
    import csv
    import math

    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, "-m", "bench", "--only", "soak", "--soak-minutes", "0.5", "--soak-learners", "4",
                        "--act", "1,2", "--arrival", "2", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in ours(r.stderr), r.stderr[-3000:]
    print("\n" + r.stdout)
    s = json.loads(out.read_text())["soak"]
    assert s["learners"] == 4 and s["seconds"] == 30 and s["window_s"] == 5 and s["window_scaled"]
    assert "first and last sixth" in r.stdout
    assert s["errors"] == 0 and s["server_alive"], s["error_messages"]
    assert s["learners_acted"] == 4 and all(n > 0 for n in s["actions_per_learner"]), s["actions_per_learner"]
    assert s["actions"] == sum(s["actions_per_learner"]) >= s["actions_in_window"] > 0
    for w in (s["first"], s["last"]):
        assert w["rss_samples"] > 0 and w["rss_median_mb"] > 0
        assert w["click"]["n"] > 0 and w["click"]["p95_s"] > 0
    for v in (s["rss_growth"], s["click_p95_drift"], s["rss_mb_per_min"], s["rss_idle_mb"], s["rss_warm_mb"],
              s["rss_max_mb"], s["click"]["p95_s"], s["burst"]["p95_s"], s["cold_start_s"]):
        assert v is not None and math.isfinite(v), v
    assert len(s["rss_samples"]) >= s["seconds"] / 2 and all(mb > 0 for _, mb in s["rss_samples"])
    assert len(s["bins"]) == 30
    assert f"{s['rss_growth']:+.1%}" in r.stdout and f"{s['click_p95_drift']:+.1%}" in r.stdout
    assert re.search(r"RSS MB \(median\).*(PASS|MISS)", r.stdout) and re.search(r"click p95 s .*(PASS|MISS)", r.stdout)
    res = json.loads(out.read_text())
    assert set(res["targets"]) == {"soak.rss_growth", "soak.click_p95_drift", "soak.errors"}
    rows = list(csv.DictReader(open(tmp_path / "soak-actions.csv")))
    assert len(rows) == s["actions"] and {int(row["learner"]) for row in rows} == {0, 1, 2, 3}
    assert all(float(row["latency_s"]) > 0 for row in rows)
