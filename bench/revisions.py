"""The model code of this tree against another revision's, side by side: the same models, texts and
calls, each revision in fresh processes, taking turns (baseline, current, current, baseline, ...), so
that a machine that slows down or speeds up during the run weighs on both alike.

    python -m bench.revisions --baseline e0d1ef7                 # seed, seed-sort, minilm, smollm2, gemma3
    python -m bench.revisions --baseline REV --models seed --rounds 8 --json bench/results/x.json

What one process measures, per model (medians of ``--reps`` calls after one warm-up call):
    hooks     run_with_cache(TEXTS): every hook kept (what the app's first run of a sentence does)
    plain     run(TEXTS): no hooks
    decode    generate_with_cache(TEXTS[:2], 8): token-by-token decoding with the key/value cache
              (decoders and encoder-decoders)
    load      model.load(name): from the float cache / the seed's file (the first, converting load of
              each side is made before the rounds and not counted)

Each measure's ratio is current / baseline per round pair (a round runs both sides once); printed
with the median and the range over the rounds. ≤ 1: the current code is as fast or faster. Both sides
compute the same numbers in float32 (tests/test_pinned.py holds the current code to the baseline's
outputs), so a ratio near 1 at the matrix products is a tie, not a win. The baseline reads its own
copy of each GGUF (in a temporary cache folder): the two revisions' float caches differ in format, and
sharing the file would convert it again on every turn.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("seed", "seed-sort", "minilm", "smollm2", "gemma3")
TEXTS = ["The cat sat on the mat because it was tired, and the dog did not mind at all.",
         "나는 오늘 아침에 학교에 가서 친구들과 함께 공부를 했다.",
         "Attention is all you need."]

CHILD = """
    import json, statistics, sys, time
    import torch
    torch.set_num_threads(1)
    import model
    names, reps, texts = sys.argv[1].split(","), int(sys.argv[2]), json.loads(sys.argv[3])

    def timed(fn):
        fn()  # warm-up
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return statistics.median(out)

    res = {}
    for name in names:
        t0 = time.perf_counter()
        m = model.load(name)
        row = {"load": time.perf_counter() - t0}
        row["hooks"] = timed(lambda: m.run_with_cache(texts))
        row["plain"] = timed(lambda: m.run(texts))
        if m.info.kind != "encoder":
            row["decode"] = timed(lambda: m.generate_with_cache(texts[:2], 8))
        res[name] = row
        del m
    print("RESULT " + json.dumps(res), flush=True)
"""


def child(tree: Path, names: list[str], reps: int, cache: Path | None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if cache is not None:
        env["ATTENTION_EXPLORER_CACHE"] = str(cache)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), ",".join(names), str(reps), json.dumps(TEXTS)],
                       cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    if r.returncode or line is None:
        raise SystemExit(f"a run in {tree} failed (exit {r.returncode}): {r.stderr[-2000:]}")
    return json.loads(line[len("RESULT "):])


def baseline_cache(names: list[str], folder: Path) -> Path:
    """A cache folder of the fetched models' files, copied (not linked: a float cache lives beside
    the resolved GGUF), without their float caches."""
    from model import fetch

    for name in names:
        if name not in fetch.SOURCES:
            continue
        src, dst = fetch.model_dir(name), folder / name
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.is_file() and not f.name.endswith(".f32.safetensors"):
                shutil.copy2(f, dst / f.name)
    return folder


def ratios(rounds: list[dict[str, dict]]) -> dict:
    """Per model and measure: current / baseline of each round, their median, min and max."""
    out: dict = {}
    for name in rounds[0]["current"]:
        for measure in rounds[0]["current"][name]:
            rs = [r["current"][name][measure] / r["baseline"][name][measure] for r in rounds]
            out.setdefault(name, {})[measure] = {"median": statistics.median(rs), "min": min(rs), "max": max(rs),
                                                 "current_s": statistics.median(r["current"][name][measure] for r in rounds),
                                                 "baseline_s": statistics.median(r["baseline"][name][measure] for r in rounds)}
    return out


def main(argv: list[str] | None = None) -> int:
    from bench.__main__ import checkout
    from bench.floor import python_speed
    from model import fetch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", required=True, help="the git revision to compare with")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--rounds", type=int, default=4, help="round pairs (each runs both sides once)")
    p.add_argument("--reps", type=int, default=5, help="timed calls per measure in one process")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    names = [n for n in a.models.split(",") if n not in fetch.SOURCES or fetch.is_fetched(n)]
    skipped = sorted(set(a.models.split(",")) - set(names))
    speed_start = python_speed()
    rounds: list[dict] = []
    with checkout(a.baseline) as tree, tempfile.TemporaryDirectory(prefix="bench-revisions-") as tmp:
        cache = baseline_cache(names, Path(tmp) / "cache")
        child(tree, names, 1, cache)  # the baseline's first loads convert its GGUF copies (not counted)
        child(ROOT, names, 1, None)
        for i in range(a.rounds):
            order = ("baseline", "current") if i % 2 == 0 else ("current", "baseline")
            got = {}
            for side in order:
                got[side] = child(tree, names, a.reps, cache) if side == "baseline" else child(ROOT, names, a.reps, None)
            rounds.append(got)
            print(f"round {i + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    speed_end = python_speed()
    res = {"baseline": a.baseline, "rounds": a.rounds, "reps": a.reps, "texts": TEXTS, "skipped": skipped,
           "python_ms": {"start": speed_start, "end": speed_end}, "ratios": ratios(rounds), "runs": rounds,
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"current / baseline {a.baseline} (median of {a.rounds} round pairs, [min, max]); "
          f"pure-Python {speed_start:.0f} / {speed_end:.0f} ms (start / end)")
    print(f"{'model':<10} {'measure':<7} {'baseline s':>11} {'current s':>10} {'ratio':>6}  range")
    for name, measures in res["ratios"].items():
        for measure, r in measures.items():
            print(f"{name:<10} {measure:<7} {r['baseline_s']:>11.4f} {r['current_s']:>10.4f} {r['median']:>6.3f}  "
                  f"[{r['min']:.3f}, {r['max']:.3f}]")
    if skipped:
        print(f"not fetched, skipped: {', '.join(skipped)}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
