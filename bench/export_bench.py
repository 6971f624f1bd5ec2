"""Cold vs warm static export, per format, measured side by side in one run.

    python -m bench.export_bench            # n=5 warm repeats per format
    python -m bench.export_bench --n 10

"cold" = a fresh chromium is started and renders the figure (what the first export of a
process costs); "warm" = the same chromium renders it again (every later export).
The figure is a real stage figure (softmax weights of the seed model on a Korean + English
sentence, presentation theme, caption) when the views and weights are there, else a heatmap of
the same size.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import plotly.graph_objects as go

from explorer import export as ex

TEXT = "안녕하세요, attention!"


def bench_figure(theme: str = "presentation") -> tuple[go.Figure, str]:
    """The figure to time, and where it came from."""
    try:
        import model
        from explorer.views import stages

        try:
            m = model.load("seed")
            source = "seed"
        except model.WeightsError:
            m = model.load("seed", random=True)
            source = "seed (untrained)"
        cache = stages.run_data(m, [TEXT])
        block = stages.blocks_for(m.info)[0]
        sel = stages.Selection(model="seed", sentence=0, layer=0, head=0, block=block)
        ids = ex.stage_ids()
        sid = "softmax" if "softmax" in ids else ids[len(ids) // 2]
        item = ex.stage_items(cache, m.info, sel, model_name=source, text=TEXT, stages=[sid],
                              theme=theme)[0]
        return item.fig, f"stage '{sid}' of {source}"
    except ImportError:
        toks = list(TEXT) + ["</s>"]
        z = np.random.default_rng(0).random((len(toks), len(toks)))
        fig = go.Figure(go.Heatmap(z=z, x=toks, y=toks, texttemplate="%{z:.2f}"))
        meta = ex.ExportMeta("synthetic", 0, TEXT, "encoder.self_attn", 0, 0, "pattern",
                             "softmax weights")
        return ex.prepare(fig, meta, theme=theme), "synthetic heatmap"


def _median_time(fn, n: int, pause: float) -> tuple[float, float]:
    times = []
    for _ in range(n):
        if pause:
            time.sleep(pause)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times)


def export_times(n: int = 5, formats=ex.IMAGE_FORMATS, scale: float = 2,
                 pause: float = 0.5) -> dict:
    """Seconds per export for each format, measured side by side in one run:

    cold_s         a fresh chromium starts, then renders (the first export of a process)
    warm_*_s       the same chromium renders again, ``pause`` s after the last export (a user
                   clicking download buttons); median and max of ``n``
    back_to_back_s the same, with no pause (an "Export all" bundle), median of ``n``
    """
    fig, source = bench_figure()
    results: dict = {"_figure": source, "_n": n, "_pause_s": pause, "_load": _load()}
    for fmt in formats:
        ex.shutdown()  # cold: no chromium running
        t0 = time.perf_counter()
        data = ex.figure_bytes(fig, fmt, scale=scale)
        cold = time.perf_counter() - t0
        render = lambda: ex.figure_bytes(fig, fmt, scale=scale)  # noqa: E731
        warm, warm_max = _median_time(render, n, pause)
        b2b, _ = _median_time(render, n, 0.0)
        results[fmt] = {"cold_s": cold, "warm_median_s": warm, "warm_max_s": warm_max,
                        "back_to_back_s": b2b, "bytes": len(data), "cold_over_warm": cold / warm}
    ex.shutdown()
    return results


def _load() -> str:
    try:
        import os

        return " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "unknown"


def format_table(r: dict) -> str:
    lines = [f"static export: {r['_figure']}, presentation theme, PNG at 2x (3200x1800 px)",
             f"warm = n={r['_n']} exports {r['_pause_s']} s apart; load average {r['_load']}",
             f"{'format':<7}{'cold s':>8}{'warm median s':>15}{'warm max s':>12}"
             f"{'back-to-back s':>16}{'cold/warm':>11}{'bytes':>10}"]
    for fmt, v in r.items():
        if fmt.startswith("_"):
            continue
        lines.append(f"{fmt:<7}{v['cold_s']:>8.2f}{v['warm_median_s']:>15.3f}"
                     f"{v['warm_max_s']:>12.3f}{v['back_to_back_s']:>16.3f}"
                     f"{v['cold_over_warm']:>10.1f}x{v['bytes']:>10}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.export_bench", description=__doc__)
    p.add_argument("--n", type=int, default=5, help="warm repeats per format")
    a = p.parse_args(argv)
    try:
        r = export_times(a.n)
    except ex.ExportUnavailable as e:
        print(f"export benchmark skipped: {e}")
        return 0
    print(format_table(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
