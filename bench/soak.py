"""A workshop-length soak: ``python -m bench --only soak``.

The workshop of ``bench/server.py`` (its ``_workshop`` and ``_learner``, unchanged: learners arrive
within ``--arrival`` seconds, each acts every 3-6 s, a layer, head, block or view change or, one
action in five, a new sentence; then the burst) runs against one ``streamlit run explorer/app.py``
(hosted mode, seed model, warmed up as a host does) with 30 learners for 30 minutes
(``--soak-learners``, ``--soak-minutes``). Meanwhile the server's resident memory is sampled every
few seconds (every 5 s for a 30-minute run, every second for a run of 6 minutes or less), and every
action's latency is kept with the time it was sent (``WorkshopResult.timeline``).

The clock starts when the class is in (the end of the arrival), as the workshop's window does.
Compared: the first and the last five minutes of the clicking; a run shorter than 30 minutes
compares its first and last sixth. Floors: RSS growth (median of the last window / median of the
first - 1) <= 10 %, click p95 drift (p95 of the last window's clicks / the first's - 1) <= 20 %,
no error (warm-up, learners, the server still running at the end).

The JSON (``bench/results/soak-<date>.json`` unless ``--json`` says where) has the summary, the RSS
samples and thirty bins over the run; every action (time, learner, kind, latency) goes beside it
as CSV (``<json stem>-actions.csv``).
"""
from __future__ import annotations

import asyncio
import collections
import csv
import math
import statistics
import time
from pathlib import Path

from . import server as sv
from . import stats as bstats

MINUTES = 30.0
LEARNERS = 30
WINDOW_S = 300.0  # the first and last five minutes; a shorter run compares its first and last sixth
RSS_GROWTH_FLOOR = 0.10
P95_DRIFT_FLOOR = 0.20
BINS = 30


def window_s(seconds: float) -> float:
    return min(WINDOW_S, seconds / 6)


def rss_every_s(seconds: float) -> float:
    return min(5.0, max(1.0, seconds / 360))


def run(*, minutes: float = MINUTES, learners: int = LEARNERS, act=(3.0, 6.0), p_sentence: float = 0.2,
        arrival: float = 10.0, seed: int = 0, run_timeout: float = 120.0) -> tuple[dict, list[tuple]]:
    """The soak; returns (the summary, every action as (s since the clicking began, learner, kind,
    latency s))."""
    import psutil

    seconds = minutes * 60.0
    window, every = window_s(seconds), rss_every_s(seconds)
    hard_limit = arrival + seconds + 2 * run_timeout + 60.0
    page = sv.Page.of("seed")
    t_wall = time.perf_counter()
    with sv.Server(hosted=True) as srv:
        proc = psutil.Process(srv.proc.pid)
        rss_idle = srv.rss_mb()
        cold_s, cold_errors = sv.warm_up(srv)
        rss_warm = srv.rss_mb()

        async def soak():
            origin = time.monotonic() + arrival  # _workshop's window starts when the class is in
            samples: list[tuple[float, float]] = []
            problems: list[str] = []
            work = asyncio.create_task(sv._workshop(srv.port, [srv.proc.pid], page, learners, seconds, tuple(act),
                                                    p_sentence, seed, run_timeout, arrival, False, hard_limit))
            while not work.done():
                try:
                    samples.append((time.monotonic() - origin, proc.memory_info().rss / 2**20))
                except psutil.NoSuchProcess:
                    problems.append("the server process exited during the soak")
                    break
                await asyncio.wait([work], timeout=every)
            return await work, origin, samples, problems

        r, origin, samples, problems = asyncio.run(soak())
        alive = srv.proc.poll() is None
        if not alive and not problems:
            problems.append(f"the server process exited ({srv.proc.returncode})")
        errors = [f"warm-up: {e}" for e in cold_errors] + r.errors + problems
        log = srv.log_tail(15) if errors else ""
    actions = sorted((t - origin, i, kind, s) for t, i, kind, s in r.timeline)
    return summarise(actions, samples, seconds=seconds, learners=learners, window=window, every=every,
                     errors=errors, burst=r.burst, first_load=r.first_load_s,
                     extra={"act_every_s": list(act), "p_sentence": p_sentence, "arrival_s": arrival,
                            "cold_start_s": cold_s, "rss_idle_mb": rss_idle, "rss_warm_mb": rss_warm,
                            "server_alive": alive, "wall_s": time.perf_counter() - t_wall,
                            "server_log_tail": log}), actions


def _part(actions, samples, lo: float, hi: float) -> dict:
    """The actions sent and the RSS sampled in [lo, hi]."""
    mine = [a for a in actions if lo <= a[0] <= hi]
    rss = [mb for t, mb in samples if lo <= t <= hi]
    return {"from_s": lo, "to_s": hi, "actions": len(mine),
            "click": bstats.stats([s for _, _, k, s in mine if k in sv.CLICKS]),
            "sentence": bstats.stats([s for _, _, k, s in mine if k == "sentence"]),
            "rss_median_mb": statistics.median(rss) if rss else None, "rss_samples": len(rss)}


def _ratio(last, first) -> float | None:
    if last is None or not first or not math.isfinite(first) or not math.isfinite(last):
        return None
    return last / first - 1


def summarise(actions: list[tuple], samples: list[tuple[float, float]], *, seconds: float, learners: int,
              window: float, every: float, errors: list[str], burst: list[float], first_load: list[float],
              extra: dict | None = None) -> dict:
    first = _part(actions, samples, 0.0, window)
    last = _part(actions, samples, seconds - window, seconds)
    inside = [a for a in actions if 0 <= a[0] <= seconds]
    per_learner = collections.Counter(i for _, i, _, _ in actions)
    during = [(t, mb) for t, mb in samples if 0 <= t <= seconds]
    slope = None
    if len(during) >= 3 and during[-1][0] > during[0][0]:
        mx, my = statistics.fmean(t for t, _ in during), statistics.fmean(mb for _, mb in during)
        slope = 60 * (sum((t - mx) * (mb - my) for t, mb in during) / sum((t - mx) ** 2 for t, _ in during))
    width = seconds / BINS
    bins = []
    for b in range(BINS):
        p = _part(actions, samples, b * width, (b + 1) * width)
        bins.append({"from_s": round(p["from_s"], 2), "actions": p["actions"], "click_p95_s": p["click"]["p95_s"],
                     "rss_median_mb": p["rss_median_mb"]})
    return {
        "minutes": seconds / 60, "seconds": seconds, "learners": learners, **(extra or {}),
        "window_s": window, "window_scaled": window < WINDOW_S, "rss_every_s": every,
        "first": first, "last": last,
        "rss_growth": _ratio(last["rss_median_mb"], first["rss_median_mb"]),
        "click_p95_drift": _ratio(last["click"]["p95_s"], first["click"]["p95_s"]),
        "errors": len(errors), "error_messages": errors[:10],
        "actions": len(actions), "actions_in_window": len(inside),
        "actions_per_learner": [per_learner.get(i, 0) for i in range(learners)],
        "learners_acted": sum(1 for i in range(learners) if per_learner.get(i)),
        "click": bstats.stats([s for _, _, k, s in inside if k in sv.CLICKS]),
        "sentence": bstats.stats([s for _, _, k, s in inside if k == "sentence"]),
        "burst": bstats.stats(burst), "first_load": bstats.stats(first_load),
        "rss_mb_per_min": slope, "rss_max_mb": max((mb for _, mb in samples), default=None),
        "rss_samples": [[round(t, 2), round(mb, 1)] for t, mb in samples],
        "bins": bins,
    }


def write_actions(path: Path, actions: list[tuple]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "learner", "kind", "latency_s"])
        w.writerows([f"{t:.3f}", i, kind, f"{s:.4f}"] for t, i, kind, s in actions)


def targets(res: dict) -> dict:
    g, d = res["rss_growth"], res["click_p95_drift"]
    return {"soak.rss_growth": {"value": g, "target": f"<= {RSS_GROWTH_FLOOR:.0%}",
                                "ok": g is not None and g <= RSS_GROWTH_FLOOR},
            "soak.click_p95_drift": {"value": d, "target": f"<= {P95_DRIFT_FLOOR:.0%}",
                                     "ok": d is not None and d <= P95_DRIFT_FLOOR},
            "soak.errors": {"value": res["errors"], "target": "0", "ok": res["errors"] == 0}}


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _num(v, fmt: str) -> str:
    return "—" if v is None or not math.isfinite(v) else format(v, fmt)


def _span(s: float) -> str:
    return f"{s / 60:g} min" if s >= 60 and s % 60 == 0 else f"{s:g} s"


def format_table(res: dict) -> str:
    t = targets(res)
    first, last, w = res["first"], res["last"], res["window_s"]
    lo, hi = res["act_every_s"]
    L = ["", f"soak: {res['learners']} learners on one `streamlit run` process (hosted, seed model) for "
             f"{_span(res['seconds'])} after arriving within {res['arrival_s']:g} s, each acting every {lo:g}-{hi:g} s "
             f"({res['p_sentence']:.0%} of actions a new sentence), then a burst; server RSS every {res['rss_every_s']:g} s"]
    if res["window_scaled"]:
        L.append(f"windows: the run is shorter than {WINDOW_S * 6 / 60:g} min, so the first and last sixth of it "
                 f"({_span(w)} each) stand for the first and last five minutes")
    else:
        L.append(f"windows: the first and last {_span(w)} of the clicking (after the warm-up and the class's arrival)")
    L.append(f"{'':<22}{'first':>10}{'last':>10}{'change':>10}{'floor':>9}")
    L.append(f"{'RSS MB (median)':<22}{_num(first['rss_median_mb'], '.1f'):>10}{_num(last['rss_median_mb'], '.1f'):>10}"
             f"{_num(res['rss_growth'], '+.1%'):>10}{'≤ ' + format(RSS_GROWTH_FLOOR, '.0%'):>9}  "
             f"{_verdict(t['soak.rss_growth']['ok'])}")
    L.append(f"{'click p95 s':<22}{_num(first['click']['p95_s'], '.3f'):>10}{_num(last['click']['p95_s'], '.3f'):>10}"
             f"{_num(res['click_p95_drift'], '+.1%'):>10}{'≤ ' + format(P95_DRIFT_FLOOR, '.0%'):>9}  "
             f"{_verdict(t['soak.click_p95_drift']['ok'])}")
    L.append(f"{'  (clicks)':<22}{first['click']['n']:>10}{last['click']['n']:>10}")
    L.append(f"{'sentence p95 s':<22}{_num(first['sentence']['p95_s'], '.3f'):>10}"
             f"{_num(last['sentence']['p95_s'], '.3f'):>10}")
    L.append(f"{'errors':<22}{res['errors']:>10}{'':>20}{'0':>9}  {_verdict(t['soak.errors']['ok'])}")
    per = res["actions_per_learner"]

    def cell(st):
        return "—" if not st["n"] else f"{st['p50_s']:.2f}/{st['p95_s']:.2f}/{st['max_s']:.2f}"
    L.append(f"actions: {res['actions']} ({res['learners_acted']} of {res['learners']} learners acted, "
             f"{min(per, default=0)}-{max(per, default=0)} each); whole run p50/p95/max s: click {cell(res['click'])}, "
             f"sentence {cell(res['sentence'])}, burst {cell(res['burst'])}")
    L.append(f"RSS: {res['rss_idle_mb']:.0f} MB idle, {res['rss_warm_mb']:.0f} MB after the warm-up, "
             f"max {_num(res['rss_max_mb'], '.0f')} MB, trend {_num(res['rss_mb_per_min'], '+.2f')} MB/min "
             f"({len(res['rss_samples'])} samples)")
    width = _span(res["seconds"] / BINS)
    L.append(f"per {width}: RSS MB " + " ".join(_num(b["rss_median_mb"], ".0f") for b in res["bins"]))
    L.append(f"per {width}: click p95 s " + " ".join(_num(b["click_p95_s"], ".2f") for b in res["bins"]))
    for e in res["error_messages"][:5]:
        L.append(f"    error: {e[:150]}")
    return "\n".join(L)
