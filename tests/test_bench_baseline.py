"""`python -m bench --only workshop --baseline REV`: the workshop side by side with another revision.
In a file of its own, so that the suite's two workers share the bench's long tests (a test file
stays on one worker). Speed is not asserted here: the full `python -m bench` reports it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_workshop_side_by_side_with_another_revision(tmp_path):
    """--baseline REV runs each workshop configuration on REV's app too (a throwaway git worktree):
    baseline, current, current, baseline, every row saying which code it ran, the ratios printed,
    only the current code held to the floors, and the worktree gone afterwards."""
    inside = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if inside.returncode:
        pytest.skip("not a git checkout: no revision to compare with")
    out = tmp_path / "side.json"
    # four workshops (two per revision), each clicking for 4 s: every row still acts, error-free
    r = subprocess.run([sys.executable, "-m", "bench", "--only", "workshop", "--quick", "--window", "4",
                        "--baseline", "HEAD", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=540)
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
