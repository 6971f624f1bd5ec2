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
    r = subprocess.run([sys.executable, "-m", "bench", "--quick", "--json", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=540)
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


def test_a_workshop_side_by_side_with_another_revision(tmp_path):
    """--baseline REV runs each workshop configuration on REV's app too (a throwaway git worktree):
    baseline, current, current, baseline, every row saying which code it ran, the ratios printed,
    only the current code held to the floors, and the worktree gone afterwards."""
    inside = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if inside.returncode:
        pytest.skip("not a git checkout: no revision to compare with")
    out = tmp_path / "side.json"
    r = subprocess.run([sys.executable, "-m", "bench", "--only", "workshop", "--quick", "--baseline", "HEAD",
                        "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert [w["code"] for w in res["workshop"]] == ["baseline HEAD", "current", "current", "baseline HEAD"]
    assert all(w["errors"] == 0 and w["actions"] > 0 for w in res["workshop"]), [w["error_messages"] for w in res["workshop"]]
    (ratio,) = res["workshop_baseline"]
    cpu = [w["cpu_s_per_action"] for w in res["workshop"]]
    assert ratio["cpu_s_per_action"] == pytest.approx((cpu[0] + cpu[3]) / (cpu[1] + cpu[2]))  # medians of two
    assert f"cpu_s_per_action {ratio['cpu_s_per_action']:.2f}" in r.stdout
    assert set(res["targets"]) == {"workshop.3_learners.direct", "workshop.3_learners.direct+"}
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "bench-baseline-" not in worktrees


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
    """`--only soak --soak-minutes 1 --soak-learners 4`: the workshop-length soak's short form. Asserted:
    the report's structure, every figure finite, every learner acted, RSS sampled in both windows (a
    minute's first and last sixth), no error, every action in the CSV beside the JSON. How the numbers
    compare with the floors is the 30-minute run's business (`python -m bench --only soak`)."""
    import csv
    import math

    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, "-m", "bench", "--only", "soak", "--soak-minutes", "1", "--soak-learners", "4",
                        "--arrival", "2", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in ours(r.stderr), r.stderr[-3000:]
    print("\n" + r.stdout)
    s = json.loads(out.read_text())["soak"]
    assert s["learners"] == 4 and s["seconds"] == 60 and s["window_s"] == 10 and s["window_scaled"]
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
    assert len(s["rss_samples"]) >= 30 and all(mb > 0 for _, mb in s["rss_samples"])
    assert len(s["bins"]) == 30
    assert f"{s['rss_growth']:+.1%}" in r.stdout and f"{s['click_p95_drift']:+.1%}" in r.stdout
    assert re.search(r"RSS MB \(median\).*(PASS|MISS)", r.stdout) and re.search(r"click p95 s .*(PASS|MISS)", r.stdout)
    res = json.loads(out.read_text())
    assert set(res["targets"]) == {"soak.rss_growth", "soak.click_p95_drift", "soak.errors"}
    rows = list(csv.DictReader(open(tmp_path / "soak-actions.csv")))
    assert len(rows) == s["actions"] and {int(row["learner"]) for row in rows} == {0, 1, 2, 3}
    assert all(float(row["latency_s"]) > 0 for row in rows)
