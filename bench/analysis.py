"""Issue 26, item 9: the analyses' build times at 64 tokens (SmolLM2 by default), from a cached run.

    OMP_NUM_THREADS=1 python -m bench.analysis [--model smollm2] [--tokens 64] [--repeat 5]

A stage's build reads the run (and what is attached to it): the floor is 50 ms at 64 tokens. Two
analyses need more than the hooks, made once and attached, and are timed apart: the logit lens of
one sentence (every layer through ``m.readout``: as costly as a forward pass) and the induction
scores (a forward pass of their own, once per model). The forward pass itself is printed beside
them as the unit."""
from __future__ import annotations

import argparse
import statistics
import time

import model
from explorer.views import data, stages

STAGES = ("logit_lens", "rollout", "value_norms", "qk_map", "head_roles")
FLOOR_MS = 50.0


def text_of(m, n_tokens: int) -> str:
    """A sentence of exactly ``n_tokens`` tokens for this model (ordinary words, repeated)."""
    words = "the quick brown fox jumps over the lazy dog and then it runs back home again".split()
    text, i = "", 0
    while True:
        nxt = (text + " " + words[i % len(words)]).strip()
        if len(m.tokenizer.encode([nxt])[0].ids) > n_tokens:
            return text
        text, i = nxt, i + 1


def best_ms(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t))
    return min(times), statistics.median(times)


def measure(name: str = "smollm2", n_tokens: int = 64, repeat: int = 5) -> dict[str, tuple[float, float]]:
    m = model.load(name)
    text = text_of(m, n_tokens)
    out: dict[str, tuple[float, float]] = {}
    out["forward (run_data, the unit)"] = best_ms(lambda: stages.run_data(m, [text]), max(1, repeat // 2))
    run = stages.run_data(m, [text])
    if stages.applies("logit_lens", m.info):
        out["logit lens, made once per sentence"] = best_ms(lambda: data.lens_data(m, run, 0), max(1, repeat // 2))
        run = run.with_lens(data.lens_data(m, run, 0))
    out["induction scores, made once per model"] = best_ms(lambda: data.induction_scores(m), 1)
    run = run.with_induction(data.induction_scores(m))
    block = m.info.blocks[0]
    sel = stages.Selection(name, 0, m.info.n_layers // 2, 1, block)
    for sid in STAGES:
        if stages.applies(sid, m.info, block):
            out[f"stage {sid} (figure + table + words)"] = best_ms(
                lambda sid=sid: (stages.stage_figure(sid, run, m.info, sel),
                                 stages.stage_words(sid, run, m.info, sel, "en")), repeat)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    res = measure(a.model, a.tokens, a.repeat)
    print(f"{a.model}, {a.tokens} tokens: best / median of {a.repeat} (ms); stage floor {FLOOR_MS:.0f} ms")
    for what, (best, med) in res.items():
        mark = "" if not what.startswith("stage") else ("  ok" if best <= FLOOR_MS else "  over the floor")
        print(f"  {what:48s} {best:9.1f} {med:9.1f}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
