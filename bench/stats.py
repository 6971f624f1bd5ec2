"""The workshop's floors and the latency summary, shared by the bench's sections (bench/__main__.py,
bench/noisy.py) without either importing the other."""
from __future__ import annotations

import statistics

CLICK_P95 = 1.0
SENTENCE_P95 = 2.5
BURST_P95 = 5.0
BALANCED_CLICK_P95 = 2.0


def p95(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(0.95 * len(xs) + 0.5)) - 1))]


def stats(xs: list[float]) -> dict:
    return {"n": len(xs), "p50_s": statistics.median(xs) if xs else None, "p95_s": p95(xs) if xs else None,
            "max_s": max(xs) if xs else None}
