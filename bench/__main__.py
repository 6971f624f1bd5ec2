"""Attention Explorer's benchmark: ``python -m bench`` prints a table; ``--json PATH`` also writes
the same figures; ``--quick`` is a short smoke run (the seed model, 16 tokens, a tiny load test).

    python -m bench                         # everything (about 10-15 minutes on 2 cores)
    python -m bench --json bench/results/bench.json
    python -m bench --quick
    python -m bench --only hooks,stages     # sections: hooks, stages, decoding, export, concurrency
    python -m bench --malloc default        # glibc's malloc defaults instead of the app's (model/runtime/malloc.py)
    python -m bench peers --threads 2 --check   # against transformers, TransformerLens, BertViz (bench/peers.py)
    python -m bench --only workshop --workshop 60:2 --baseline 9d4b5dc   # this code against another revision's
    python -m bench --only floor            # the explorer against a bare Streamlit app (bench/floor.py)
    python -m bench --only floor --baseline main   # ... and another revision's explorer, same run
    python -m bench --only noisy            # 30 learners and one noisy address through serve.sh (bench/noisy.py)
    python -m bench --only soak             # 30 learners on one process for 30 minutes: RSS growth, p95 drift (bench/soak.py)
    python -m bench --only poll             # 60 learners answer a class poll through serve.sh, a replica killed (bench/poll.py)
    python -m bench --only long             # long inputs: the long view / a bare forward pass, 1k-4k tokens (bench/long.py)

Figures (each a ratio of two things measured side by side in one run, where a ratio fits):
  hook_overhead   run_with_cache / run (same batch, no hooks), per model; target <= 1.15
  stages          a layer/head change (every stage's figure from the cached run, serialised as
                  the app sends it) vs a new sentence (model run + the same), per model, at
                  16/128/512 tokens; the figures' payload (JSON bytes); target: a 512-token
                  heatmap < 2 MB
  decoding        greedy decoding with the key/value cache vs without (every step recomputes
                  every earlier position), alternating, the same tokens written: the seed model at
                  64/128/512 input characters (as run_with_cache decodes), SmolLM2 writing 64 tokens
  export          cold and warm static export per format (bench/export_bench.py)
  concurrency     N simulated sessions against a real `streamlit run explorer/app.py` (hosted
                  mode, seed model), speaking Streamlit's websocket protocol: errors, p95 of a
                  sentence change; target 20 sessions for 60 s, 0 errors, p95 <= 2 s; then the
                  server's resident memory across 1000 reruns (flat: < 10% growth once warm)
  workshop        learners with a class's rhythm against one process or replicas behind nginx
                  (--workshop learners:replicas,...): click, sentence and burst latencies, server CPU
                  per action, RSS; with --baseline REV, every configuration also runs on REV's app
                  (baseline, current, current, baseline) and the table prints baseline / current
  floor           (only when asked: --only floor) the explorer's default page against a bare Streamlit
                  app (one 64x64 plotly heatmap under a slider), each a fresh `streamlit run`,
                  alternating: server CPU per layer/head/block change / the bare app's per rerun
                  (floor <= 3), and `streamlit run` to the first figure drawn in headless chromium,
                  explorer / bare (floor <= 1.5); with --baseline REV, REV's explorer too. Writes
                  bench/results/floor-<date>.json unless --json says where
  soak            (only when asked: --only soak) the workshop's learners (--soak-learners, 30) on one
                  `streamlit run` process for --soak-minutes (30), the server's RSS sampled every few
                  seconds, every action's latency kept with its time: RSS growth (medians) and click
                  p95 drift between the first and the last five minutes (a shorter run: its first and
                  last sixth); floors: growth <= 10 %, drift <= 20 %, 0 errors. Writes
                  bench/results/soak-<date>.json (and every action, -actions.csv) unless --json says where
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .stats import (BALANCED_CLICK_P95, BURST_P95, CLICK_P95, SENTENCE_P95,  # noqa: F401 (re-exported)
                    p95, stats as _stats)

ROOT = Path(__file__).resolve().parent.parent

HOOK_TARGET = 1.15
HEATMAP_LIMIT = 2_000_000
P95_TARGET = 2.0
RSS_GROWTH_LIMIT = 0.10
RSS_WARM_RERUNS = 300  # every cache is full by then (32 runs, 256 figures)




def section_hooks(models: dict, quick: bool) -> dict:
    from . import models as mb

    out = {}
    for name, (m, note) in models.items():
        texts = [mb.text_of(m, 16 if quick else 64), mb.text_of(m, 10 if quick else 40)]
        r = mb.hook_overhead(m, texts, n=3 if quick else 7)
        fwd = None if quick else mb.hook_overhead_forward(m, texts)
        if fwd:
            r["forward_only"] = fwd
        r["note"] = note
        out[name] = r
    return out


def section_stages(models: dict, lengths: list[int], quick: bool) -> dict:
    from . import models as mb

    out = {}
    for name, (m, note) in models.items():
        out[name] = {}
        for n in lengths:
            if n > m.info.max_len:
                continue
            reps = 3 if quick else {16: 5, 128: 3}.get(n, 1)
            out[name][str(n)] = mb.stage_costs(m, name, n, reps)
    return out


DECODING_REPS = {64: 7, 128: 5, 512: 3}  # per input length; the uncached 512 takes ~10 s a run


def section_decoding(models: dict, quick: bool) -> dict:
    from . import models as mb

    out = {}
    if "seed" in models:
        m, note = models["seed"]
        lengths = [64] if quick else list(DECODING_REPS)
        out["seed"] = {"note": note, "runs": [mb.seed_decoding(m, n, 3 if quick else DECODING_REPS[n])
                                              for n in lengths]}
    if "smollm2" in models:
        m, note = models["smollm2"]
        out["smollm2"] = {"note": note, "runs": [mb.llama_decoding(m, 16 if quick else 64, 3)]}
    return out


def section_export(quick: bool) -> dict:
    from explorer import export as ex

    from . import export_bench

    try:
        r = export_bench.export_times(1 if quick else 5, formats=("png",) if quick else ex.IMAGE_FORMATS)
    except ex.ExportUnavailable as e:
        return {"skipped": str(e)}
    return r


def section_concurrency(sessions: int, seconds: float, think: tuple[float, float], reruns: int,
                        arrival: float) -> dict:
    from . import server as sv

    t0 = time.perf_counter()
    with sv.Server(hosted=True) as srv:
        rss_idle = srv.rss_mb()
        cold_s, cold_errors = sv.warm_up(srv)
        r = sv.load_test(srv, sessions=sessions, seconds=seconds, think=think, until_reruns=reruns,
                         arrival=arrival)
        alive = srv.proc.poll() is None
        log = srv.log_tail(15) if r.errors else ""
    lat = r.latencies
    warm_at = RSS_WARM_RERUNS if r.reruns >= 1000 else max(1, r.reruns // 3)
    after = [(n, mb) for n, mb in r.rss if n >= warm_at]
    rss_warm = after[0][1] if after else float("nan")
    rss_end = r.rss[-1][1] if r.rss else float("nan")
    slope = None
    if len(after) >= 3 and after[-1][0] > after[0][0]:
        xs, ys = [n for n, _ in after], [mb for _, mb in after]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = 100 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    timed_end = [mb for n, mb in r.rss if n <= r.timed_reruns]
    errors = [f"warm-up: {e}" for e in cold_errors] + r.errors
    return {
        "sessions": sessions, "seconds": seconds, "think_s": list(think), "arrival_s": arrival,
        "cold_start_s": cold_s, "changes": len(lat), "errors": len(errors), "error_messages": errors[:10],
        "p50_s": statistics.median(lat) if lat else None, "p95_s": p95(lat), "max_s": max(lat) if lat else None,
        "changes_per_s": len(lat) / seconds, "first_load_p50_s": statistics.median(r.first_load_s) if r.first_load_s else None,
        "first_load_p95_s": p95(r.first_load_s), "server_alive": alive, "timed_reruns": r.timed_reruns,
        "reruns": r.reruns, "memory_phase": f"4 sessions on ?view=tokens, back to back, to {reruns} reruns",
        "rss_idle_mb": rss_idle, "rss_after_timed_mb": timed_end[-1] if timed_end else None,
        "rss_warm_mb": rss_warm, "rss_warm_at_reruns": warm_at, "rss_end_mb": rss_end,
        "rss_growth": (rss_end - rss_warm) / rss_warm if after else None,
        "rss_mb_per_100_reruns": slope, "rss_max_mb": max(mb for _, mb in r.rss) if r.rss else None,
        "rss_samples": r.rss[:: max(1, len(r.rss) // 80)], "wall_s": time.perf_counter() - t0,
        "server_log_tail": log,
    }




@contextlib.contextmanager
def checkout(rev: str):
    """A throwaway `git worktree` of ``rev`` (the shipped seed weights come with it), removed after."""
    folder = Path(tempfile.mkdtemp(prefix="bench-baseline-")) / "tree"
    run = functools.partial(subprocess.run, cwd=ROOT, capture_output=True, text=True, timeout=120)
    made = run(["git", "worktree", "add", "--detach", str(folder), rev])
    if made.returncode:
        raise SystemExit(f"--baseline {rev}: git worktree add failed: {made.stderr.strip()[:300]}")
    try:
        yield folder
    finally:
        run(["git", "worktree", "remove", "--force", str(folder)])
        shutil.rmtree(folder.parent, ignore_errors=True)


def section_workshop(configs: list[tuple[int, int]], seconds: float, act: tuple[float, float], p_sentence: float,
                     arrival: float, model_name: str = "seed", baseline: str | None = None,
                     clicks: tuple[str, ...] | None = None) -> list[dict]:
    """A workshop's rhythm against a real hosted server: for each (learners, replicas), replicas = 0
    is one `streamlit run` process, N >= 1 is scripts/serve.sh (N processes behind nginx). Every
    learner opens ``model_name``'s page (``?model=...``; the default page for the seed model).

    ``baseline`` (a git revision): each configuration also runs on that revision's app (a worktree),
    side by side: the baseline, then this checkout, then this checkout again and the baseline
    (the order flipped, as the host's pace drifts); every row says which code it ran."""
    from . import server as sv

    page = sv.Page.of(model_name)
    if clicks:
        unknown = set(clicks) - set(sv.CLICKS)
        if unknown:
            raise SystemExit(f"--workshop-clicks: unknown {sorted(unknown)}; choose among {', '.join(sv.CLICKS)}")
        page = dataclasses.replace(page, clicks=tuple(clicks))
    if baseline is None:
        return [dict(_workshop_run(learners, replicas, seconds, act, p_sentence, arrival, model_name, page),
                     code="current", clicks=",".join(page.clicks)) for learners, replicas in configs]
    out = []
    with checkout(baseline) as tree:
        for learners, replicas in configs:
            for code, root in (("baseline", tree), ("current", ROOT), ("current", ROOT), ("baseline", tree)):
                row = _workshop_run(learners, replicas, seconds, act, p_sentence, arrival, model_name, page, root)
                out.append(dict(row, code=code if code == "current" else f"baseline {baseline}",
                                clicks=",".join(page.clicks)))
    return out


def _workshop_run(learners: int, replicas: int, seconds: float, act: tuple[float, float], p_sentence: float,
                  arrival: float, model_name: str, page, root: Path = ROOT) -> dict:
    from . import server as sv

    query = "" if model_name == "seed" else f"model={model_name}"
    t0 = time.perf_counter()
    ctx = sv.Server(hosted=True, root=root) if replicas == 0 else sv.Balancer(replicas, root=root)
    with ctx as srv:
        pids = [srv.proc.pid] if replicas == 0 else srv.pids
        # every replica imports, loads the model and draws the page once, as a host would
        cold_s, cold_errors = sv.warm_up(srv, query=query) if replicas == 0 else srv.warm_up(query=query)
        r = sv.workshop_test(srv.port, pids, page=page, learners=learners, seconds=seconds, think=act,
                             p_sentence=p_sentence, arrival=arrival, sticky=replicas > 0, query=query)
        log = srv.log_tail(15) if r.errors else ""
    clicks = [x for k in sv.CLICKS for x in r.latencies.get(k, [])]
    errors = [f"warm-up: {e}" for e in cold_errors] + r.errors
    return {
        "model": model_name, "learners": learners, "replicas": replicas, "seconds": seconds, "act_every_s": list(act),
        "p_sentence": p_sentence, "arrival_s": arrival, "actions": r.actions,
        "actions_per_s": r.actions / seconds, "errors": len(errors), "error_messages": errors[:10],
        "click": _stats(clicks), "sentence": _stats(r.latencies.get("sentence", [])),
        "burst": _stats(r.burst), "first_load": _stats(r.first_load_s),
        "per_kind": {k: _stats(v) for k, v in r.latencies.items()},
        "cpu_s": r.cpu_s, "cpu_s_per_action": r.cpu_s / r.actions if r.actions else None,
        "cpu_s_per_s": r.cpu_s / seconds, "burst_cpu_s": r.burst_cpu_s,
        "rss_max_mb": max(r.rss_mb) if r.rss_mb else None, "wall_s": time.perf_counter() - t0,
        "server_log_tail": log,
    }


def baseline_ratios(rows: list[dict]) -> list[dict]:
    """Per configuration run side by side (``--baseline``): baseline / current of the medians of
    each code's runs, for the click, sentence and burst p95 and the CPU seconds per action (> 1:
    the current code is faster)."""
    out = []
    for key in dict.fromkeys((w["model"], w["learners"], w["replicas"]) for w in rows if w["code"] != "current"):
        mine = [w for w in rows if (w["model"], w["learners"], w["replicas"]) == key]
        ratio = {}
        for name, get in (("click_p95", lambda w: w["click"]["p95_s"]), ("sentence_p95", lambda w: w["sentence"]["p95_s"]),
                          ("burst_p95", lambda w: w["burst"]["p95_s"]), ("cpu_s_per_action", lambda w: w["cpu_s_per_action"])):
            base = [get(w) for w in mine if w["code"] != "current" and get(w)]
            cur = [get(w) for w in mine if w["code"] == "current" and get(w)]
            ratio[name] = statistics.median(base) / statistics.median(cur) if base and cur else None
        out.append({"model": key[0], "learners": key[1], "replicas": key[2], **ratio})
    return out


def targets(res: dict, full: bool) -> dict:
    t = {}
    for name, r in res.get("hook_overhead", {}).items():
        t[f"hook_overhead.{name}"] = {"value": r["ratio"], "target": f"<= {HOOK_TARGET}",
                                      "ok": r["ratio"] <= HOOK_TARGET}
    for name, per in res.get("stages", {}).items():
        if "512" in per:
            v = per["512"]["heatmap_max_bytes"]
            t[f"heatmap_512_bytes.{name}"] = {"value": v, "target": f"< {HEATMAP_LIMIT}", "ok": v < HEATMAP_LIMIT}
    runs = [r for per in res.get("decoding", {}).values() for r in per["runs"]]
    if runs:
        t["decoding.same_tokens"] = {"value": all(r["same_output"] for r in runs),
                                     "target": "cached and uncached decoding write the same tokens",
                                     "ok": all(r["same_output"] for r in runs)}
    if res.get("floor"):
        from . import floor

        t.update(floor.targets(res["floor"]))
    for w in res.get("workshop", []):
        if w.get("model", "seed") != "seed":  # the floors are the seed model's default page; others: capacity
            continue
        if w.get("code", "current") != "current":  # a --baseline run: compared, not held to the floors
            continue
        name = f"workshop.{w['learners']}_learners.{'direct' if w['replicas'] == 0 else str(w['replicas']) + '_replicas'}"
        while name in t:  # the same configuration run again (--baseline): each run is held to the floors
            name += "+"
        if w["replicas"] >= 2 and w["learners"] >= 60:
            ok = w["errors"] == 0 and (w["click"]["p95_s"] or 0) <= BALANCED_CLICK_P95
            target = f"0 errors, click p95 <= {BALANCED_CLICK_P95}"
        else:
            ok = (w["errors"] == 0 and (w["click"]["p95_s"] or 0) <= CLICK_P95
                  and (w["sentence"]["p95_s"] or 0) <= SENTENCE_P95 and (w["burst"]["p95_s"] or 0) <= BURST_P95)
            target = f"0 errors, click p95 <= {CLICK_P95}, sentence p95 <= {SENTENCE_P95}, burst p95 <= {BURST_P95}"
        t[name] = {"value": {"errors": w["errors"], "click_p95": w["click"]["p95_s"],
                             "sentence_p95": w["sentence"]["p95_s"], "burst_p95": w["burst"]["p95_s"]},
                   "target": target, "ok": ok}
    c = res.get("concurrency")
    if c and "errors" in c:
        ok = c["errors"] == 0 and c["p95_s"] <= P95_TARGET and c["server_alive"]
        if full:
            ok = ok and c["sessions"] >= 20 and c["seconds"] >= 60
        t["concurrency"] = {"value": {"sessions": c["sessions"], "errors": c["errors"], "p95_s": c["p95_s"]},
                            "target": f"20 sessions, 60 s, 0 errors, p95 <= {P95_TARGET}", "ok": ok}
        if c.get("rss_growth") is not None and c["reruns"] > c["timed_reruns"]:  # a memory phase ran
            g = c["rss_growth"]
            t["rss_flat"] = {"value": {"reruns": c["reruns"], "growth": g},
                             "target": f"< {RSS_GROWTH_LIMIT:.0%} after {c['rss_warm_at_reruns']} reruns",
                             "ok": g < RSS_GROWTH_LIMIT and (c["reruns"] >= 1000 or not full)}
    return t


# --- the table ---------------------------------------------------------------------------------

def fmt_mb(b: float) -> str:
    return f"{b / 1e6:.2f}"


def table(res: dict) -> str:
    L = []
    meta = res["meta"]
    L.append(f"Attention Explorer benchmark · {meta['date']} · {'quick' if meta['quick'] else 'full'} · "
             f"{meta['cpus']} CPUs, load {meta['load_avg']} · torch threads {meta['torch_threads']} · "
             f"nice {meta['nice']}" + "".join(f" · {k}={v}" for k, v in meta["env"].items())
             + (" · malloc: glibc defaults" if "default" in meta.get("malloc", {})
                else f" · malloc: the app's ({', '.join(f'{k}={v}' for k, v in meta.get('malloc', {}).items())})"
                if meta.get("malloc") else ""))
    for note in meta["notes"]:
        L.append(f"  note: {note}")
    if "hook_overhead" in res:
        L.append("")
        L.append(f"hook_overhead: run_with_cache / run, same batch, medians (target ≤ {HOOK_TARGET})")
        L.append(f"{'model':<10}{'tokens':>10}{'run s':>10}{'cached s':>10}{'ratio':>8}  ok")
        for name, r in res["hook_overhead"].items():
            ok = "yes" if r["ratio"] <= HOOK_TARGET else "NO"
            L.append(f"{name:<10}{','.join(map(str, r['tokens'])):>10}{r['run_s']:>10.3f}"
                     f"{r['run_with_cache_s']:>10.3f}{r['ratio']:>8.3f}  {ok}")
            f = r.get("forward_only")
            if f:
                L.append(f"{'  forward':<10}{'':>10}{f['forward_s']:>10.3f}{f['forward_hooked_s']:>10.3f}"
                         f"{f['ratio']:>8.3f}  (the hooked forward alone, without greedy decoding)")
    if "stages" in res:
        L.append("")
        L.append("layer/head change (every stage's figure from the cached run, serialised) vs new sentence "
                 "(model run + the same), medians; payload = figures' JSON")
        L.append(f"{'model':<10}{'tokens':>7}{'n':>3}{'change s':>10}{'new s':>9}{'new/chg':>9}"
                 f"{'all MB':>8}{'heatmap MB':>12}  {'(stage)':<9}{'<2MB':>5}")
        for name, per in res["stages"].items():
            for _n, r in per.items():
                ok = "yes" if r["heatmap_max_bytes"] < HEATMAP_LIMIT else "NO"
                L.append(f"{name:<10}{r['tokens']:>7}{r['n']:>3}{r['layer_change_s']:>10.3f}{r['new_sentence_s']:>9.3f}"
                         f"{r['new_over_change']:>9.2f}{fmt_mb(r['payload_total_bytes']):>8}"
                         f"{fmt_mb(r['heatmap_max_bytes']):>12}  {r['heatmap_max_stage']:<9}{ok:>5}")
    if res.get("workshop"):
        L.append("")
        L.append("workshop: learners act every {}-{} s (a layer/head/block/view click, or a new sentence), then a burst "
                 "(every learner sends a sentence within 1 s); latencies p50/p95/max s".format(*res["workshop"][0]["act_every_s"]))
        L.append("(learners/core by CPU: one core's second divided by the CPU seconds a learner costs per second, "
                 "i.e. the mean time between a learner's actions / CPU s per action)")
        L.append(f"{'model':>8}{'learners':>9}{'server':>12}{'actions/s':>10}{'click':>20}{'sentence':>20}{'burst':>20}"
                 f"{'CPU s/action':>13}{'CPU s/s':>8}{'learners/core':>14}{'RSS MB':>8}{'errors':>7}  code")
        for w in res["workshop"]:
            srv = "1 process" if w["replicas"] == 0 else f"{w['replicas']}×nginx"

            def cell(st):
                return "—" if not st["n"] else f"{st['p50_s']:.2f}/{st['p95_s']:.2f}/{st['max_s']:.2f}"
            per_core = (sum(w["act_every_s"]) / 2 / w["cpu_s_per_action"]) if w["cpu_s_per_action"] else 0
            L.append(f"{w.get('model', 'seed'):>8}{w['learners']:>9}{srv:>12}{w['actions_per_s']:>10.2f}"
                     f"{cell(w['click']):>20}{cell(w['sentence']):>20}{cell(w['burst']):>20}"
                     f"{(w['cpu_s_per_action'] or 0):>13.3f}{w['cpu_s_per_s']:>8.2f}{per_core:>14.0f}"
                     f"{(w['rss_max_mb'] or 0):>8.0f}{w['errors']:>7}  {w.get('code', 'current')}")
            for e in w["error_messages"][:3]:
                L.append(f"    error: {e[:150]}")
        for r in res.get("workshop_baseline", []):
            srv = "1 process" if r["replicas"] == 0 else f"{r['replicas']}×nginx"
            cells = "  ".join(f"{k} {'—' if r[k] is None else format(r[k], '.2f')}"
                              for k in ("click_p95", "sentence_p95", "burst_p95", "cpu_s_per_action"))
            L.append(f"  baseline / current, {r['model']}, {r['learners']} learners, {srv} (> 1: current faster): {cells}")
    if res.get("decoding"):
        L.append("")
        L.append("decoding: greedy with the key/value cache vs recomputing every earlier position at every "
                 "step (uncached), alternating, medians")
        L.append(f"{'model':<10}{'input':>14}{'written':>9}{'n':>3}{'cached s':>10}{'uncached s':>12}"
                 f"{'uncached/cached':>17}  same tokens")
        for name, per in res["decoding"].items():
            for r in per["runs"]:
                inp = (f"{r['chars']} chars" if "chars" in r else f"{r['prompt_tokens']} tokens")
                L.append(f"{name:<10}{inp:>14}{r['written']:>9}{r['n']:>3}{r['cached_s']:>10.3f}"
                         f"{r['uncached_s']:>12.3f}{r['speedup']:>17.2f}  {'yes' if r['same_output'] else 'NO'}")
    if "export" in res:
        L.append("")
        e = res["export"]
        if "skipped" in e:
            L.append(f"export: skipped ({e['skipped']})")
        else:
            from .export_bench import format_table

            L.append(format_table(e))
    c = res.get("concurrency")
    if c:
        L.append("")
        if "skipped" in c:
            L.append(f"concurrency: skipped ({c['skipped']})")
        else:
            L.append(f"concurrency: {c['sessions']} websocket sessions vs a real server (hosted, seed; first page "
                     f"load after start {c['cold_start_s']:.1f} s, done before the visitors come), "
                     f"arriving within {c['arrival_s']:g} s, {c['seconds']:.0f} s, a new sentence every "
                     f"{c['think_s'][0]:g}-{c['think_s'][1]:g} s each "
                     f"(target: 20 sessions, 60 s, 0 errors, p95 ≤ {P95_TARGET} s)")
            L.append(f"{'sessions':>8}{'changes':>9}{'per s':>7}{'errors':>8}{'p50 s':>8}{'p95 s':>8}{'max s':>8}"
                     f"{'1st load p50/p95 s':>20}")
            L.append(f"{c['sessions']:>8}{c['changes']:>9}{c['changes_per_s']:>7.2f}{c['errors']:>8}"
                     f"{(c['p50_s'] or float('nan')):>8.2f}{c['p95_s']:>8.2f}{(c['max_s'] or float('nan')):>8.2f}"
                     f"{(c['first_load_p50_s'] or float('nan')):>14.2f}/{c['first_load_p95_s']:.2f}")
            for msg in c["error_messages"][:5]:
                L.append(f"  error: {msg}")
            if c.get("rss_growth") is not None and c["reruns"] > c["timed_reruns"]:
                slope = c["rss_mb_per_100_reruns"]
                L.append(f"memory: server RSS {c['rss_idle_mb']:.0f} MB idle, {c['rss_after_timed_mb'] or 0:.0f} MB "
                         f"after the timed window ({c['timed_reruns']} reruns), {c['rss_warm_mb']:.0f} MB after "
                         f"{c['rss_warm_at_reruns']} reruns, {c['rss_end_mb']:.0f} MB after {c['reruns']} "
                         f"(max {c['rss_max_mb']:.0f}); growth {c['rss_growth']:+.1%} "
                         f"({'n/a' if slope is None else f'{slope:+.1f} MB'} per 100 reruns; flat = < "
                         f"{RSS_GROWTH_LIMIT:.0%}); reruns after the window: {c['memory_phase']}")
    if res.get("floor"):
        from . import floor

        L.append("")
        L.append(floor.table(res["floor"]))
    if res.get("targets"):
        L.append("")
        L.append("targets: " + ", ".join(f"{k} {'ok' if v['ok'] else 'MISSED'}" for k, v in res["targets"].items()))
    return "\n".join(L)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["peers"]:  # the project against transformers, TransformerLens, BertViz (bench/peers.py)
        from .peers import main as peers_main

        return peers_main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    p.add_argument("--quick", action="store_true", help="a short smoke run")
    p.add_argument("--only", default="hooks,stages,decoding,export,workshop,concurrency",
                   help="comma-separated sections (hooks, stages, decoding, export, workshop, concurrency; "
                        "and floor, noisy, soak, poll, long, only when named)")
    p.add_argument("--long-models", default="gemma3,smollm2", help="long: the models (bench/long.py)")
    p.add_argument("--long-lengths", default="1024,2048,4096", help="long: tokens of the text")
    p.add_argument("--noisy-bounds", choices=("on", "off", "both"), default="on",
                   help="noisy: serve.sh with its per-client bounds, without them, or both runs")
    p.add_argument("--soak-minutes", type=float, default=30.0,
                   help="soak: minutes of clicking (the first and last five compared; a shorter run: its first and last sixth)")
    p.add_argument("--soak-learners", type=int, default=30, help="soak: learners on the one server process")
    p.add_argument("--poll-learners", type=int, default=60, help="poll: learners answering within the window")
    p.add_argument("--poll-window", type=float, default=10.0, help="poll: seconds in which every learner taps")
    p.add_argument("--poll-others", type=int, default=10, help="poll: other learners clicking the explorer meanwhile")
    p.add_argument("--poll-store", choices=("sqlite", "redis"), default="sqlite",
                   help="poll: the store the replicas share (a SQLite file, or a redis-server started here)")
    p.add_argument("--poll-kill", choices=("presenter", "other"), default="presenter",
                   help="poll: the replica killed mid-poll, the presenter's own (its page reconnects) or the other")
    p.add_argument("--models", default="seed,minilm,smollm2")
    p.add_argument("--lengths", default="16,128,512")
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--think", default="20,40", help="seconds between a session's sentence changes: lo,hi")
    p.add_argument("--reruns", type=int, default=1000, help="reruns in total for the memory check")
    p.add_argument("--arrival", type=float, default=10.0, help="visitors open the page within this many seconds")
    p.add_argument("--workshop", default="30:0,30:2,60:2",
                   help="workshop runs, learners:replicas (0 replicas: one streamlit process; N: scripts/serve.sh)")
    p.add_argument("--window", type=float, default=60.0, help="workshop: seconds of clicking after everyone is in")
    p.add_argument("--act", default="3,6", help="workshop: seconds between a learner's actions: lo,hi")
    p.add_argument("--p-sentence", type=float, default=0.2, help="workshop: share of actions that are a new sentence")
    p.add_argument("--workshop-model", default="seed", help="workshop: the model every learner opens (seed, smollm2, ...)")
    p.add_argument("--workshop-clicks", default=",".join(("layer", "head", "block", "view")),
                   help="workshop: what a click changes, among layer,head,block,view (layer,head,block: the "
                        "harsher profile, every learner stays on the default page)")
    p.add_argument("--baseline", default=None, metavar="REV",
                   help="workshop: also run every configuration on this git revision's app (a throwaway worktree), "
                        "side by side: baseline, current, current, baseline; prints baseline / current ratios; "
                        "floor: REV's explorer measured in every round too")
    p.add_argument("--floor-rounds", type=int, default=5, help="floor: rounds (a fresh start of each app per round)")
    p.add_argument("--floor-changes", type=int, default=15,
                   help="floor: layer, head and block changes each per round (the bare app: 6x as many reruns)")
    p.add_argument("--floor-local", action="store_true",
                   help="floor: the explorer as on a laptop (not ATTENTION_EXPLORER_HOSTED=1, as the replicas run)")
    p.add_argument("--malloc", choices=("app", "default"), default="app",
                   help="glibc malloc settings for this process and the server: the app's (model/runtime/malloc.py, applied by `import model`, "
                        "as the app runs) or glibc's defaults")
    a = p.parse_args(argv)
    only = {s.strip() for s in a.only.split(",") if s.strip()}
    unknown = only - {"hooks", "stages", "decoding", "export", "workshop", "concurrency", "floor", "noisy", "soak", "poll",
                      "long"}
    if unknown:
        p.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if not (a.soak_minutes > 0 and a.soak_learners >= 1):
        p.error("--soak-minutes wants a positive number, --soak-learners at least 1")
    try:
        think = tuple(float(x) for x in a.think.split(","))
        assert len(think) == 2 and 0 <= think[0] <= think[1]
    except (ValueError, AssertionError):
        p.error("--think wants two numbers lo,hi with 0 <= lo <= hi")
    try:
        act = tuple(float(x) for x in a.act.split(","))
        assert len(act) == 2 and 0 <= act[0] <= act[1]
        configs = [tuple(int(x) for x in c.split(":")) for c in a.workshop.split(",") if c.strip()]
        assert configs and all(len(c) == 2 and c[0] >= 1 and 0 <= c[1] <= 8 for c in configs)
        assert 0 <= a.p_sentence <= 1
    except (ValueError, AssertionError):
        p.error("--act wants lo,hi; --workshop wants learners:replicas pairs (replicas 0..8); --p-sentence 0..1")
    names = ["seed"] if a.quick else [m.strip() for m in a.models.split(",") if m.strip()]
    lengths = [16] if a.quick else [int(x) for x in a.lengths.split(",")]
    if a.quick:
        a.sessions, a.seconds, think, a.reruns, a.arrival = min(a.sessions, 3), min(a.seconds, 12.0), (0.5, 1.0), 0, 1.0
        configs, a.window, act = [(3, 0)], min(a.window, 10.0), (0.5, 1.0)
        a.soak_minutes, a.soak_learners = min(a.soak_minutes, 1.0), min(a.soak_learners, 4)
        a.poll_learners, a.poll_others = min(a.poll_learners, 6), min(a.poll_others, 2)

    if a.malloc == "app":
        from model.runtime import malloc as model_malloc  # `import model` applies them; tune() says what it did

        malloc = model_malloc.tune()
    else:
        malloc = {"default": 1}
        os.environ["ATTENTION_EXPLORER_MALLOC"] = "default"  # the server too; before `import model`

    import torch

    from . import models as mb

    res: dict = {"meta": {"date": dt.datetime.now().isoformat(timespec="seconds"), "quick": a.quick,
                          "cpus": os.cpu_count(), "load_avg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
                          "torch_threads": torch.get_num_threads(), "python": sys.version.split()[0],
                          "nice": os.nice(0), "notes": [], "malloc": malloc,
                          "env": {k: v for k, v in os.environ.items()
                                  if k.startswith(("MALLOC_", "ATTENTION_EXPLORER_")) or k == "LD_PRELOAD"}}}
    models = {}
    if only & {"hooks", "stages", "decoding"}:
        models, notes = mb.load_models(names)
        res["meta"]["notes"] += notes
        res["meta"]["models"] = {n: dict(m.info.as_dict(), note=note) for n, (m, note) in models.items()}
    if "hooks" in only:
        res["hook_overhead"] = section_hooks(models, a.quick)
    if "stages" in only:
        res["stages"] = section_stages(models, lengths, a.quick)
    if "decoding" in only:
        res["decoding"] = section_decoding(models, a.quick)
    if "export" in only:
        res["export"] = section_export(a.quick)
    if "workshop" in only:
        res["workshop"] = section_workshop(configs, a.window, act, a.p_sentence, a.arrival, a.workshop_model,
                                           a.baseline, clicks=tuple(a.workshop_clicks.split(",")))
        if a.baseline:
            res["workshop_baseline"] = baseline_ratios(res["workshop"])
    if "concurrency" in only:
        res["concurrency"] = section_concurrency(a.sessions, a.seconds, think, a.reruns, a.arrival)
    if "floor" in only:
        from . import floor

        kw = dict(rounds=1 if a.quick else max(1, a.floor_rounds), changes=min(3, max(1, a.floor_changes)) if a.quick else max(1, a.floor_changes),
                  warmup=not a.quick, hosted=not a.floor_local, log=lambda m: print(m, file=sys.stderr, flush=True))
        if a.baseline:
            with checkout(a.baseline) as tree:
                res["floor"] = floor.run(baseline=(a.baseline, tree), **kw)
        else:
            res["floor"] = floor.run(**kw)
        if a.json is None:
            a.json = ROOT / "bench" / "results" / f"floor-{dt.datetime.now():%Y%m%d-%H%M}.json"
    if "noisy" in only:
        from . import noisy

        res["noisy"] = [noisy.section_noisy(bounds=b == "on", seconds=a.window, act=act, p_sentence=a.p_sentence,
                                            arrival=a.arrival, learners=4 if a.quick else 30, tabs=20 if a.quick else 100)
                        for b in (("on", "off") if a.noisy_bounds == "both" else (a.noisy_bounds,))]
    soak_actions = None
    if "soak" in only:
        from . import soak

        res["soak"], soak_actions = soak.run(minutes=a.soak_minutes, learners=a.soak_learners, act=act,
                                             p_sentence=a.p_sentence, arrival=a.arrival)
        if a.json is None:
            a.json = ROOT / "bench" / "results" / f"soak-{dt.datetime.now():%Y%m%d-%H%M}.json"
    if "poll" in only:
        from . import poll

        res["poll"] = poll.run(learners=a.poll_learners, window=a.poll_window, others=a.poll_others, store=a.poll_store,
                               kill=a.poll_kill,
                               log=lambda m: print(m, file=sys.stderr, flush=True))
        if a.json is None:
            a.json = ROOT / "bench" / "results" / f"poll-{a.poll_store}-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    if "long" in only:
        from . import long as long_bench

        res["long"] = long_bench.run([x.strip() for x in a.long_models.split(",") if x.strip()],
                                     [int(x) for x in a.long_lengths.split(",")],
                                     log=lambda m: print(m, file=sys.stderr, flush=True))
        if a.json is None:
            a.json = ROOT / "bench" / "results" / f"long-{dt.datetime.now():%Y%m%d-%H%M}.json"
    res["targets"] = targets(res, full=not a.quick)
    if res.get("long"):
        res["targets"].update(long_bench.targets(res["long"]))
    if res.get("poll"):
        res["targets"].update(poll.targets(res["poll"]))
    for r in res.get("noisy", []):
        res["targets"].update(noisy.targets(r))
    if res.get("soak"):
        res["targets"].update(soak.targets(res["soak"]))
    res["meta"]["load_avg_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(table(res))
    if res.get("noisy"):
        print(noisy.format_table(res["noisy"]))
    if res.get("soak"):
        print(soak.format_table(res["soak"]))
    if res.get("poll"):
        print(poll.format_table(res["poll"]))
    if res.get("long"):
        print(long_bench.format_table(res["long"]))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1, ensure_ascii=False, default=float) + "\n")
        print(f"\nwrote {a.json}")
        if soak_actions is not None:
            path = a.json.with_name(f"{a.json.stem}-actions.csv")
            soak.write_actions(path, soak_actions)
            print(f"wrote {path} (every action of the soak: time, learner, kind, latency)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
