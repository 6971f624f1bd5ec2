"""``python -m bench --only floor``: the explorer against Streamlit's own floor, side by side in one run.

Two apps, each started afresh (``streamlit run``, OMP_NUM_THREADS=1 as the hosted replicas run) for
every measurement, alternating (bare, explorer, explorer, bare, ...):

- the bare app (bench/bare_app.py): one 64×64 plotly heatmap of random data under a slider;
- the explorer (``streamlit run explorer/app.py``): its default page, the seed model.

For each start it measures
 (b) the seconds from starting ``streamlit run`` to the first plotly figure drawn in headless chromium
     (Playwright; the first ``.js-plotly-plot .main-svg`` visible, in a fresh browser context), and then,
     with the browser closed and the server's CPU quiet again,
 (a) the server process's CPU seconds (psutil, before and after) for a series of widget changes sent
     by one simulated visitor through Streamlit's websocket protocol (bench/server.py's ``Session``, the
     workshop learners' client): on the explorer, N layer changes, N head changes and N block changes;
     on the bare app, 3N slider changes. Each series runs twice from the same widget state: the first
     pass fills the app's caches (the figure memo), the second is the one measured.

The ratios (explorer / the bare app of the same round) are summarised by their median over the rounds
and a bootstrap interval (the rounds resampled), against the floors: (a) <= 3, (b) <= 1.5. The machine's
pure-Python speed (``python_speed``) is measured at the start and at the end, beside the absolute figures.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import server as sv

ROOT = sv.ROOT
BARE_SCRIPT = "bench/bare_app.py"
EXPLORER_SCRIPT = "explorer/app.py"
CLICK_FLOOR = 3.0
FIRST_FIGURE_FLOOR = 1.5
KINDS = ("layer", "head", "block")
FIGURE = ".js-plotly-plot .main-svg"  # plotly's drawn figure (tests/test_e2e.py waits for .js-plotly-plot with data)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking"]
TAIL_S = 0.3  # after a series' last run: the server's work after script_finished is counted too
BARE_PER_CHANGE = 6  # the bare app's reruns per explorer change of one kind: psutil counts CPU in 10 ms ticks


# --- the machine's pure-Python speed -------------------------------------------------------------

class _Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y

    def moved(self, d):
        return _Point(self.x + d, self.y - d)


def _python_work(n: int = 60_000) -> int:
    """A fixed mix of what interpreted code does: calls, attribute reads, small objects, dicts, lists,
    string formatting, integer arithmetic."""
    seen: dict[str, int] = {}
    items: list[_Point] = []
    acc = 0
    for i in range(n):
        p = _Point(i, i % 97).moved(i & 7)
        items.append(p)
        key = f"k{i % 251}"
        seen[key] = seen.get(key, 0) + p.x - p.y
        acc = (acc + p.x * 31 + len(key)) % 1_000_003
        if len(items) > 64:
            items.clear()
    return acc + len(seen)


def python_speed(repeat: int = 5) -> float:
    """Milliseconds for ``_python_work()`` (best of ``repeat``): lower is a faster machine."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        _python_work()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


# --- one fresh `streamlit run` ---------------------------------------------------------------------

class App:
    """``streamlit run SCRIPT`` from ``root`` (its .streamlit/config.toml applies) on 127.0.0.1 and a
    free port, in its own process group; ``t0`` is taken just before the process is started."""

    def __init__(self, script: str, root: Path, env: dict, log_dir: Path, name: str):
        self.script, self.root, self.env = script, root, env
        self.port = sv.free_port()
        self.url = f"http://{sv.HOST}:{self.port}"
        self.log_path = log_dir / f"{name}-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.t0 = 0.0

    def __enter__(self) -> "App":
        cmd = [sys.executable, "-m", "streamlit", "run", self.script, "--server.address", sv.HOST,
               "--server.port", str(self.port), "--server.headless", "true"]
        self._log = open(self.log_path, "w")
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    def wait_healthy(self, timeout: float) -> float:
        """Seconds from the start until /_stcore/health answers ok."""
        deadline = self.t0 + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.script} exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if sv._local_get(f"{self.url}/_stcore/health", 2).strip() == b"ok":
                    return time.perf_counter() - self.t0
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.script} did not answer in {timeout:.0f} s:\n{self.log_tail()}")

    def cpu(self) -> float:
        """CPU seconds of the server process and any process it started."""
        import psutil

        try:
            kids = [k.pid for k in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            kids = []
        return sv.cpu_seconds([self.proc.pid, *kids])

    def settle(self, quiet: float = 1.0, idle: float = 0.02, timeout: float = 60.0) -> float:
        """Wait until the server used less than ``idle`` CPU seconds in the last ``quiet`` seconds;
        returns the seconds waited."""
        t0 = time.perf_counter()
        samples = [(t0, self.cpu())]
        while time.perf_counter() - t0 < timeout:
            time.sleep(0.25)
            now, c = time.perf_counter(), self.cpu()
            samples.append((now, c))
            older = [s for s in samples if now - s[0] >= quiet]
            if older and c - older[-1][1] < idle:
                break
        return time.perf_counter() - t0

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()

    def log_tail(self, n: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


# --- what a visitor changes ----------------------------------------------------------------------

@dataclass
class Plan:
    """The widget changes of one app: a reset to the starting state, then a series per kind."""

    reset: dict
    series: dict[str, list[dict]]

    @classmethod
    def explorer(cls, page: sv.Page, n: int) -> "Plan":
        sizes = {"layer": page.layers, "head": page.heads, "block": len(page.blocks)}
        series = {}
        for kind in KINDS:
            if sizes[kind] < 2:
                continue
            series[kind] = [{kind: page.blocks[(i + 1) % sizes[kind]] if kind == "block"
                             else float((i + 1) % sizes[kind])} for i in range(n)]
        return cls(reset={"layer": 0.0, "head": 0.0, "block": page.blocks[0]}, series=series)

    @classmethod
    def bare(cls, n: int) -> "Plan":
        return cls(reset={"value": 0.0}, series={"rerun": [{"value": float(i % 100 + 1)} for i in range(n)]})


async def _changes(app: App, plan: Plan, query: str = "") -> dict:
    """One visitor: opens the page, then per pass (a warm-up pass, then the measured one): resets the
    widgets, and for each kind sends its series back to back, the server's CPU read before and after."""
    out = {"cpu_ms": {}, "first_pass_cpu_ms": {}, "wall_ms": {}, "reruns_ok": 0, "reruns_expected": 0,
           "charts_per_rerun": {}, "errors": []}

    def check(r: sv.RunResult, what: str) -> None:
        out["reruns_expected"] += 1
        if r.status == "FINISHED_SUCCESSFULLY" and not r.errors:
            out["reruns_ok"] += 1
        else:
            out["errors"] += [f"{what}: {e}" for e in (r.errors or [f"status {r.status or 'none'}"])][:3]

    async with sv.Session(app.port, query=query, run_timeout=180) as s:
        first = await s.rerun()
        check(first, "first load")
        out["first_load"] = {"status": first.status, "charts": first.charts, "bytes": first.bytes,
                             "refs": first.refs, "widgets": len(s.widget_ids)}
        missing = sorted({k for w in (plan.reset, *(x for v in plan.series.values() for x in v)) for k in w}
                         - set(s.widget_ids))
        if missing:
            out["errors"].append(f"the page has no widget with key {', '.join(missing)} "
                                 f"(first load: {first.status}, {first.charts} charts, {len(s.widget_ids)} widgets)")
            return out
        for measured in (False, True):
            check(await s.rerun(plan.reset), "reset")
            for kind, changes in plan.series.items():
                await asyncio.sleep(TAIL_S)
                c0, w0, charts = app.cpu(), time.perf_counter(), 0
                for i, widgets in enumerate(changes):
                    r = await s.rerun(widgets)
                    check(r, f"{kind} {i}")
                    charts += r.charts
                wall = time.perf_counter() - w0
                await asyncio.sleep(TAIL_S)
                ms = (app.cpu() - c0) * 1000 / len(changes)
                if measured:
                    out["cpu_ms"][kind] = ms
                    out["wall_ms"][kind] = wall * 1000 / len(changes)
                    out["charts_per_rerun"][kind] = charts / len(changes)
                else:
                    out["first_pass_cpu_ms"][kind] = ms
    n = {k: len(v) for k, v in plan.series.items()}
    total = sum(n.values())
    for key in ("cpu_ms", "first_pass_cpu_ms", "wall_ms"):
        if out[key]:
            out[key]["all"] = sum(out[key][k] * n[k] for k in n) / total
    return out


def _in_thread(coro):
    """asyncio.run on a thread of its own (Playwright's sync API holds this thread's event loop)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _first_figure(browser, app: App, timeout: float) -> dict:
    health_s = app.wait_healthy(timeout)
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ctx.new_page()
        left = max(1.0, timeout - (time.perf_counter() - app.t0))
        page.goto(app.url, wait_until="commit", timeout=left * 1000)
        left = max(1.0, timeout - (time.perf_counter() - app.t0))
        page.wait_for_selector(FIGURE, state="visible", timeout=left * 1000)
        first_s = time.perf_counter() - app.t0
        app.settle(timeout=60)  # the browser's first run finishes before the page closes
    finally:
        ctx.close()
    return {"health_s": health_s, "first_figure_s": first_s}


def measure_one(browser, name: str, script: str, root: Path, env: dict, plan: Plan, log_dir: Path,
                timeout: float = 240.0) -> dict:
    """Start ``script`` afresh, time its first figure in chromium, then its CPU per change."""
    with App(script, root, env, log_dir, name) as app:
        row: dict = {"errors": []}
        try:
            row.update(_first_figure(browser, app, timeout))
            row["settle_s"] = app.settle(timeout=60)
            row.update(_in_thread(_changes(app, plan)))
        except Exception as e:  # noqa: BLE001 - the run goes on; the row says what failed
            row["errors"] = [*row["errors"], f"{type(e).__name__}: {str(e)[:300]}"]
        if row["errors"]:
            row["log_tail"] = app.log_tail()
        row["rss_mb"] = _rss_mb(app)
    return row


def _rss_mb(app: App) -> float | None:
    import psutil

    try:
        return psutil.Process(app.proc.pid).memory_info().rss / 2**20
    except psutil.NoSuchProcess:
        return None


# --- statistics ----------------------------------------------------------------------------------

def bootstrap_median(xs: list[float], n: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap interval of the median of ``xs`` (resampled with replacement)."""
    if len(xs) < 2:
        return (xs[0], xs[0]) if xs else (math.nan, math.nan)
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    lo = meds[int((1 - level) / 2 * n)]
    hi = meds[min(n - 1, int((1 + level) / 2 * n))]
    return lo, hi


def summary(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return {"n": 0, "median": None, "lo": None, "hi": None}
    lo, hi = bootstrap_median(xs)
    return {"n": len(xs), "median": statistics.median(xs), "lo": lo, "hi": hi, "values": xs}


def summarise(runs: list[dict], codes: list[str]) -> dict:
    """Per code: the explorer's absolute figures and its ratios to the same round's bare app."""
    bare = {r["round"]: r for r in runs if r["app"] == "bare" and not r["errors"]}
    out = {"bare": {"cpu_ms": summary([r["cpu_ms"].get("rerun") for r in bare.values()]),
                    "first_figure_s": summary([r["first_figure_s"] for r in bare.values()])}}
    for code in codes:
        mine = [r for r in runs if r["app"] == code and not r["errors"] and r["round"] in bare]
        kinds = [k for k in (*KINDS, "all") if any(k in r["cpu_ms"] for r in mine)]
        out[code] = {
            "cpu_ms": {k: summary([r["cpu_ms"].get(k) for r in mine]) for k in kinds},
            "first_pass_cpu_ms": {k: summary([r["first_pass_cpu_ms"].get(k) for r in mine]) for k in kinds},
            "ratio": {k: summary([r["cpu_ms"][k] / bare[r["round"]]["cpu_ms"]["rerun"] for r in mine
                                  if k in r["cpu_ms"] and bare[r["round"]]["cpu_ms"]["rerun"] > 0]) for k in kinds},
            "first_figure_s": summary([r["first_figure_s"] for r in mine]),
            "first_figure_ratio": summary([r["first_figure_s"] / bare[r["round"]]["first_figure_s"] for r in mine]),
            "health_s": summary([r["health_s"] for r in mine]),
        }
    return out


# --- the run -------------------------------------------------------------------------------------

def code_state() -> dict:
    """The checkout the explorer runs from: its commit and the app's files changed in the working tree
    (others may be editing while the bench runs)."""
    def git(*args):
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
        return r.stdout if r.returncode == 0 else None


    changed = git("status", "--porcelain", "--", "explorer", "model", ".streamlit")
    head = git("rev-parse", "--short", "HEAD")
    # porcelain lines are "XY path": the status's two columns, a space, the path (no strip: a
    # leading space is the X column of a file changed but not staged)
    return {"head": head.strip() if head else None,
            "changed": [line[3:] for line in changed.splitlines() if line.strip()] if changed else []}


def run(rounds: int = 5, changes: int = 15, warmup: bool = True, hosted: bool = True,
        baseline: tuple[str, Path] | None = None, log=print) -> dict:
    """The whole measure: ``rounds`` rounds of (bare, explorer[, baseline explorer]), the order
    reversed every other round; ``baseline`` = (revision, worktree) adds that revision's explorer."""
    from playwright.sync_api import sync_playwright

    page = sv.Page.of("seed")
    plans = {"bare": Plan.bare(changes * BARE_PER_CHANGE), "explorer": Plan.explorer(page, changes)}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if hosted:
        env["ATTENTION_EXPLORER_HOSTED"] = "1"
    else:
        env.pop("ATTENTION_EXPLORER_HOSTED", None)
    apps = {"bare": (BARE_SCRIPT, ROOT), "current": (EXPLORER_SCRIPT, ROOT)}
    if baseline:
        apps[f"baseline {baseline[0]}"] = (EXPLORER_SCRIPT, baseline[1])
    codes = [c for c in apps if c != "bare"]
    order = list(apps)
    res: dict = {"rounds": rounds, "changes_per_kind": changes, "bare_reruns": changes * BARE_PER_CHANGE,
                 "hosted": hosted, "warmup": warmup, "python_ms": {"start": python_speed()},
                 "floors": {"cpu_ratio": CLICK_FLOOR, "first_figure_ratio": FIRST_FIGURE_FLOOR},
                 "page": {"layers": page.layers, "heads": page.heads, "blocks": page.blocks}, "runs": [], "warmup_runs": []}
    res["code_start"] = code_state()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            if warmup:  # chromium, the disk cache and Python's bytecode warmed once; not counted
                for name in order:
                    script, root = apps[name]
                    row = measure_one(browser, name.split()[0], script, root, env,
                                      plans["bare" if name == "bare" else "explorer"], Path(tmp))
                    res["warmup_runs"].append(dict(row, app=name))
                    log(f"  floor warm-up {name}: first figure {row.get('first_figure_s', math.nan):.1f} s")
            for rnd in range(rounds):
                for name in (order if rnd % 2 == 0 else order[::-1]):
                    script, root = apps[name]
                    row = measure_one(browser, name.split()[0], script, root, env,
                                      plans["bare" if name == "bare" else "explorer"], Path(tmp))
                    row.update(app=name, round=rnd, at=time.strftime("%H:%M:%S"),
                               load_avg=" ".join(f"{x:.1f}" for x in os.getloadavg()))
                    res["runs"].append(row)
                    cpu = row.get("cpu_ms", {}).get("all" if name != "bare" else "rerun", math.nan)
                    log(f"  floor round {rnd + 1}/{rounds} {name}: first figure "
                        f"{row.get('first_figure_s', math.nan):.1f} s, CPU {cpu:.1f} ms per change"
                        + (f", errors: {row['errors'][:2]}" if row["errors"] else ""))
        finally:
            browser.close()
    res["python_ms"]["end"] = python_speed()
    res["code_end"] = code_state()
    res["wall_s"] = time.perf_counter() - t_start
    res["summary"] = summarise(res["runs"], codes)
    return res


# --- the report ----------------------------------------------------------------------------------

def _cell(s: dict, fmt: str = ".1f") -> str:
    if not s or s["median"] is None:
        return "—"
    return f"{s['median']:{fmt}} [{s['lo']:{fmt}}, {s['hi']:{fmt}}]"


def verdict(value: float | None, floor: float) -> str:
    return "—" if value is None else ("PASS" if value <= floor else "MISS")


def targets(res: dict) -> dict:
    cur = res["summary"].get("current", {})
    click = cur.get("ratio", {}).get("all", {}).get("median")
    first = cur.get("first_figure_ratio", {}).get("median")
    return {"floor.click_cpu_ratio": {"value": click, "target": f"<= {CLICK_FLOOR}",
                                      "ok": click is not None and click <= CLICK_FLOOR},
            "floor.first_figure_ratio": {"value": first, "target": f"<= {FIRST_FIGURE_FLOOR}",
                                         "ok": first is not None and first <= FIRST_FIGURE_FLOOR}}


def table(res: dict) -> str:
    s = res["summary"]
    py = res["python_ms"]
    L = [f"floor: the explorer's default page (seed model, {'hosted' if res['hosted'] else 'local'} mode) against a bare "
         f"Streamlit app (one 64×64 plotly heatmap under a slider); a fresh `streamlit run` (OMP_NUM_THREADS=1) "
         f"per measurement, {res['rounds']} round(s), alternating; medians over the rounds [95% bootstrap interval]",
         f"machine: pure-Python reference loop {py['start']:.1f} ms at the start, {py['end']:.1f} ms at the end "
         f"(bench/floor.py python_speed, best of 5; lower is faster)"]
    for when in ("start", "end"):
        c = res.get(f"code_{when}") or {}
        L.append(f"current code at the {when}: {c.get('head')}"
                 + (f" with the working tree's changes to {', '.join(c['changed'][:6])}" if c.get("changed") else ", clean"))
    b = s["bare"]
    L.append(f"bare app: server CPU {_cell(b['cpu_ms'])} ms per slider rerun ({res['bare_reruns']} reruns); "
             f"first figure {_cell(b['first_figure_s'], '.2f')} s after `streamlit run`")
    for code, e in s.items():
        if code == "bare":
            continue
        L.append("")
        L.append(f"explorer ({code}): server CPU per change, {res['changes_per_kind']} changes per kind, "
                 "caches warm (the first pass in parentheses)")
        L.append(f"{'change':<8}{'CPU ms':>26}{'(first pass)':>14}{'/ bare rerun':>26}{'floor':>8}  ")
        for k, v in e["cpu_ms"].items():
            ratio = e["ratio"].get(k, {})
            L.append(f"{k:<8}{_cell(v):>26}{(e['first_pass_cpu_ms'][k]['median'] or math.nan):>14.1f}"
                     f"{_cell(ratio, '.2f'):>26}{'≤ ' + format(CLICK_FLOOR, 'g'):>8}  "
                     f"{verdict(ratio.get('median'), CLICK_FLOOR) if code == 'current' else ''}")
        L.append(f"first figure: {_cell(e['first_figure_s'], '.2f')} s (server answering after "
                 f"{_cell(e['health_s'], '.2f')} s); / bare: {_cell(e['first_figure_ratio'], '.2f')}  floor ≤ "
                 f"{FIRST_FIGURE_FLOOR:g}  {verdict(e['first_figure_ratio']['median'], FIRST_FIGURE_FLOOR) if code == 'current' else ''}")
    bad = [r for r in res["runs"] if r["errors"]]
    for r in bad[:5]:
        L.append(f"  error, round {r['round'] + 1} {r['app']}: {'; '.join(r['errors'][:2])[:200]}")
    return "\n".join(L)
