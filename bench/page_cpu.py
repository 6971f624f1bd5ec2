"""CPU seconds per page action, and where they go: ``python -m bench.page_cpu``.

The page (explorer/main.py) driven in process by Streamlit's AppTest, as one learner of the workshop
(bench/server.py) drives it: a new sentence, then layer and head clicks on the default page of
``--model``. Each action's CPU is the process's (``time.process_time``: the script thread, torch and
AppTest's reading of the messages), one torch thread.

    python -m bench.page_cpu --model gemma3 --rounds 5                  # CPU per action, this tree
    python -m bench.page_cpu --model gemma3 --baseline /tmp/i34b        # ... and another tree's, alternating
    python -m bench.page_cpu --model gemma3 --profile click             # cProfile of the script thread

Each tree runs in a child process of its own (its ``explorer`` and ``model`` first on the path); with
``--baseline`` the children take turns round by round, so both see the same load. The sentences are
the workshop's (bench/server.py: ``sentence``), new every round, the same for both trees.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROFILE_FILE = os.path.join(tempfile.gettempdir(), "bench-page-cpu.prof.txt")


def _child(root: str, model: str, clicks: int, profile: str) -> None:
    """One tree: the page opened on ``model``; then, for each line of texts read from stdin, for each
    text a new sentence and ``clicks`` layer and head clicks each; one JSON line per action (kind,
    cpu_s, wall_s), then "done"; at the end of stdin, the profile (if asked) in PROFILE_FILE."""
    sys.path.insert(0, root)
    os.chdir(root)
    import torch
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import AppTest

    torch.set_num_threads(1)
    prof = cProfile.Profile() if profile else None
    want = {"on": False}
    original = script_runner.ScriptRunner._run_script

    def run_script(self, *a, **kw):  # the script thread: profiled only for the actions asked for
        if prof is not None and want["on"]:
            prof.enable()
            try:
                return original(self, *a, **kw)
            finally:
                prof.disable()
        return original(self, *a, **kw)

    script_runner.ScriptRunner._run_script = run_script
    # a server compiles the page once; AppTest makes a new ScriptCache every run (tests/conftest.py)
    compiled: dict = {}
    get_bytecode = ScriptCache.get_bytecode

    def cached_bytecode(self, script_path: str):
        if script_path not in compiled:
            compiled[script_path] = get_bytecode(self, script_path)
        return compiled[script_path]

    ScriptCache.get_bytecode = cached_bytecode
    at = AppTest.from_file(str(Path(root) / "explorer" / "main.py"), default_timeout=600)
    at.query_params["model"] = model
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    layers, heads = at.sidebar.slider(key="layer").max + 1, at.sidebar.slider(key="head").max + 1
    rng = random.Random(0)
    print("ready", flush=True)
    for line in sys.stdin:
        for text in json.loads(line):
            steps = [("sentence", lambda t=text: at.sidebar.text_area(key="text").set_value(t))]
            for _ in range(clicks):
                steps.append(("layer", lambda: at.sidebar.slider(key="layer").set_value(
                    (int(at.sidebar.slider(key="layer").value) + rng.randrange(1, int(layers))) % int(layers))))
                steps.append(("head", lambda: at.sidebar.slider(key="head").set_value(
                    (int(at.sidebar.slider(key="head").value) + rng.randrange(1, int(heads))) % int(heads))))
            for kind, act in steps:
                act()
                want["on"] = profile == kind
                c0, w0 = time.process_time(), time.perf_counter()
                at.run()
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                want["on"] = False
                assert not at.exception, [e.value for e in at.exception]
                print(json.dumps({"kind": kind, "cpu_s": cpu, "wall_s": wall}), flush=True)
        print("done", flush=True)
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(70)
        out.write("\n--- by own time ---\n")
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(40)
        Path(PROFILE_FILE).write_text(out.getvalue())


def _spawn(root: Path, a, profile: str = "") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(root), "--model", a.model,
           "--clicks", str(a.clicks)]
    if profile:
        cmd += ["--profile", profile]
    proc = subprocess.Popen(cmd, env=env, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"the page on {root} did not open")
    return proc


def _round(proc: subprocess.Popen, texts: list[str]) -> list[dict]:
    proc.stdin.write(json.dumps(texts) + "\n")
    proc.stdin.flush()
    rows = []
    for line in proc.stdout:
        if line.strip() == "done":
            return rows
        rows.append(json.loads(line))
    raise SystemExit("a page process ended early")


def _summary(rows: list[dict]) -> dict:
    out = {}
    for kind in sorted({r["kind"] for r in rows}):
        cpu = [r["cpu_s"] for r in rows if r["kind"] == kind]
        out[kind] = {"n": len(cpu), "cpu_median_s": statistics.median(cpu), "cpu_mean_s": statistics.fmean(cpu),
                     "cpu_max_s": max(cpu)}
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="gemma3")
    p.add_argument("--rounds", type=int, default=5, help="new sentences (each followed by the clicks)")
    p.add_argument("--clicks", type=int, default=3, help="layer clicks and head clicks after each sentence")
    p.add_argument("--tree", default=str(ROOT), help="the tree measured as 'current' (default: this one)")
    p.add_argument("--baseline", default="", help="another tree (e.g. a worktree of the commit before)")
    p.add_argument("--profile", choices=("sentence", "layer", "head"), default="",
                   help="print the cProfile of these actions (this tree only)")
    p.add_argument("--lines", type=int, default=0,
                   help="each new text this many of the workshop's sentences, one a line (default: the workshop's 1-2)")
    p.add_argument("--json", default="", help="write the rows and summaries here")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _child(a.child, a.model, a.clicks, a.profile)
        return
    sys.path.insert(0, str(ROOT))
    from bench.server import sentence

    rng = random.Random(1)
    trees = {"current": Path(a.tree).resolve()} | ({"baseline": Path(a.baseline).resolve()} if a.baseline else {})
    rows: dict[str, list[dict]] = {k: [] for k in trees}
    load = os.getloadavg()
    procs = {name: _spawn(root, a, a.profile if name == "current" else "") for name, root in trees.items()}
    for r in range(a.rounds):
        text = sentence(rng, f"cpu{r}")
        if a.lines:
            text = "\n".join((text.splitlines() + [sentence(rng, f"cpu{r}.{i}") for i in range(a.lines)])[:a.lines])
        texts = [text]
        order = list(procs.items()) if r % 2 == 0 else list(reversed(procs.items()))
        for name, proc in order:  # the same texts, the trees taking turns
            rows[name] += _round(proc, texts)
    for name, proc in procs.items():
        proc.stdin.close()
        proc.wait()
    if a.profile:
        print(Path(PROFILE_FILE).read_text())
    result = {"model": a.model, "rounds": a.rounds, "clicks": a.clicks, "lines": a.lines, "load_before": load,
              "load_after": os.getloadavg(), "trees": {k: str(v) for k, v in trees.items()},
              "summary": {k: _summary(v) for k, v in rows.items()}, "rows": rows}
    for name, summ in result["summary"].items():
        for kind, s in summ.items():
            print(f"{name:9s} {kind:9s} n={s['n']:3d}  CPU median {s['cpu_median_s']:.3f} s  "
                  f"mean {s['cpu_mean_s']:.3f} s  max {s['cpu_max_s']:.3f} s")
    print(f"load average before {load[0]:.2f}, after {result['load_after'][0]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
