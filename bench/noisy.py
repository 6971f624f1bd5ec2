"""One noisy visitor against a class: ``python -m bench --only noisy``.

The workshop of ``bench/server.py`` (30 learners acting every 3-6 s, then a burst) runs through
``scripts/serve.sh --replicas 2``, each learner from its own loopback address (127.0.0.2,
127.0.0.3, ...), while one more address (127.0.0.200) opens 100 pages at once and, in each,
reloads and reruns as fast as the server answers: a new sentence after another, a reload every
few reruns, and one second's pause after a refusal or a failure (so the bench's own client, on
the same two cores as the server, stays a small part of the load). Reported: the learners' click, sentence and
burst latencies and errors, and how many of the noisy visitor's page loads and websockets nginx
refused (429) or served, and how many of its reruns ran.

The learners are ``bench.server``'s own (``_workshop`` and ``_learner``, unchanged); only where
their connections come from is set here: a context variable holds a task's source address, and
while the bench runs, the event loop's ``create_connection`` (websockets) and
``socket.create_connection`` (the first page request, made in a thread that inherits the context)
bind to it. Only 127.0.0.0/8 is ever contacted. The noisy visitor runs in a process of its own.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import multiprocessing
import random
import socket
import time
import urllib.error
from concurrent.futures import ProcessPoolExecutor
from unittest import mock

from . import server as sv
from . import stats as bstats

SOURCE: contextvars.ContextVar[str | None] = contextvars.ContextVar("bench_source_address", default=None)
LEARNERS_FROM = "127.0.0.{}"  # learner i connects from 127.0.0.(2 + i)
NOISY_FROM = "127.0.0.200"
REFUSED_PAUSE_S = 1.0
RERUNS_PER_LOAD = 5


class SourceLoop(asyncio.SelectorEventLoop):
    """An event loop whose outgoing TCP connections leave from the task's ``SOURCE`` address."""

    async def create_connection(self, *args, **kwargs):
        src = SOURCE.get()
        if src and kwargs.get("sock") is None and kwargs.get("local_addr") is None:
            kwargs["local_addr"] = (src, 0)
        return await super().create_connection(*args, **kwargs)


@contextlib.contextmanager
def bound_sources():
    """``socket.create_connection`` (urllib's) binds to ``SOURCE`` while the block runs."""
    plain = socket.create_connection

    def create_connection(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None, **kwargs):
        src = SOURCE.get()
        if src and source_address is None:
            source_address = (src, 0)
        return plain(address, timeout, source_address, **kwargs)

    with mock.patch.object(socket, "create_connection", create_connection):
        yield


def _learner_from_own_address(learner):
    async def run(i, *args, **kwargs):
        SOURCE.set(LEARNERS_FROM.format(2 + i))
        return await learner(i, *args, **kwargs)
    return run


# --- the noisy visitor (its own process) -----------------------------------------------------------

async def _tab(k: int, port: int, stop_at: float, n: dict, errors: list[str], rng: random.Random) -> None:
    """One of the noisy visitor's pages: load, rerun back to back, reload; again until ``stop_at``."""
    from websockets.exceptions import InvalidStatus

    SOURCE.set(NOISY_FROM)
    load = 0
    while time.monotonic() < stop_at:
        load += 1
        pause = True  # after a refusal or a failure; a page served reloads at once
        try:
            async with sv.Session(port, sticky=True, run_timeout=60) as s:  # GET the page, then the websocket
                n["pages_served"] += 1
                n["websockets_served"] += 1
                n["open"] += 1
                n["open_max"] = max(n["open_max"], n["open"])
                try:
                    first = await s.rerun()
                    n["reruns"] += 1
                    for j in range(RERUNS_PER_LOAD):
                        if time.monotonic() >= stop_at or "text" not in s.widget_ids:
                            break
                        r = await s.rerun({"text": sv.sentence(rng, f"noisy{k}l{load}r{j}")})
                        n["reruns"] += 1
                        errors += [f"tab {k}: {e}" for e in r.errors[:1]]
                    errors += [f"tab {k} first run: {e}" for e in first.errors[:1]]
                finally:
                    n["open"] -= 1
            pause = False
        except urllib.error.HTTPError as e:
            refused = e.code == 429
            n["pages_refused" if refused else "pages_other"] += 1
        except InvalidStatus as e:
            n["pages_served"] += 1
            refused = e.response.status_code == 429
            n["websockets_refused" if refused else "websockets_other"] += 1
        except Exception as e:  # a dropped connection, a timeout
            n["failed"] += 1
            errors.append(f"tab {k}: {type(e).__name__}: {str(e)[:120]}")
        if pause:
            await asyncio.sleep(REFUSED_PAUSE_S)


async def _noisy(port: int, tabs: int, seconds: float, seed: int) -> dict:
    n = dict.fromkeys(("pages_served", "pages_refused", "pages_other", "websockets_served", "websockets_refused",
                       "websockets_other", "reruns", "failed", "open", "open_max"), 0)
    errors: list[str] = []
    rng = random.Random(seed)
    stop_at = time.monotonic() + seconds
    await asyncio.gather(*(_tab(k, port, stop_at, n, errors, random.Random(rng.random())) for k in range(tabs)))
    n.pop("open")
    return dict(n, tabs=tabs, seconds=seconds, address=NOISY_FROM, errors=len(errors), error_messages=errors[:10])


def noisy_visitor(port: int, tabs: int = 100, seconds: float = 70.0, seed: int = 1) -> dict:
    """The noisy visitor, run to the end (in a process of its own: see ``section_noisy``)."""
    with bound_sources(), asyncio.Runner(loop_factory=SourceLoop) as runner:
        return runner.run(_noisy(port, tabs, seconds, seed))


# --- the measurement ---------------------------------------------------------------------------------

def section_noisy(*, learners: int = 30, tabs: int = 100, seconds: float = 60.0, act=(3.0, 6.0),
                  p_sentence: float = 0.2, arrival: float = 10.0, bounds: bool = True, seed: int = 0) -> dict:
    """``learners`` (each from its own address) through ``scripts/serve.sh --replicas 2`` with its
    default per-client bounds (``bounds=False``: none), while the noisy visitor runs from the end of
    the learners' arrival to the end of the burst (the window plus 10 s)."""
    env = {} if bounds else {"ATTENTION_EXPLORER_PER_CLIENT_CONNECTIONS": "0", "ATTENTION_EXPLORER_PER_CLIENT_RATE": "0"}
    page = sv.Page.of("seed")
    t0 = time.perf_counter()
    with sv.Balancer(2, env=env) as bal:
        cold_s, cold_errors = bal.warm_up()
        first_line = bal.log_tail(50)
        with (ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool, bound_sources(),
              mock.patch.object(sv, "_learner", _learner_from_own_address(sv._learner)),
              asyncio.Runner(loop_factory=SourceLoop) as runner):
            pool.submit(int, 0).result()  # the process is up before the class arrives

            async def both():
                work = asyncio.create_task(sv._workshop(bal.port, bal.pids, page, learners, seconds, tuple(act),
                                                        p_sentence, seed, 120.0, arrival, True, 1800.0))
                await asyncio.sleep(arrival)  # the class is in: the noisy visitor starts
                noise = asyncio.get_running_loop().run_in_executor(pool, noisy_visitor, bal.port, tabs, seconds + 10.0)
                return await work, await noise
            r, noisy = runner.run(both())
        log = bal.log_tail(15) if r.errors else ""
    clicks = [x for k in sv.CLICKS for x in r.latencies.get(k, [])]
    errors = [f"warm-up: {e}" for e in cold_errors] + r.errors
    learners_row = {
        "learners": learners, "from": f"{LEARNERS_FROM.format(2)}..{LEARNERS_FROM.format(1 + learners)}",
        "actions": r.actions, "errors": len(errors), "error_messages": errors[:10],
        "click": bstats.stats(clicks), "sentence": bstats.stats(r.latencies.get("sentence", [])), "burst": bstats.stats(r.burst),
        "first_load": bstats.stats(r.first_load_s), "cpu_s": r.cpu_s,
    }
    return {"replicas": 2, "bounds": _bounds(first_line) if bounds else "none", "seconds": seconds,
            "arrival_s": arrival, "act_every_s": list(act), "p_sentence": p_sentence, "cold_start_s": cold_s,
            "learners": learners_row, "noisy": noisy, "wall_s": time.perf_counter() - t0, "server_log_tail": log}


def _bounds(serve_output: str) -> str:
    """The per-client bounds serve.sh printed when it started."""
    for line in serve_output.splitlines():
        if "per client address" in line:
            return line.split("per client address: ", 1)[1].split(";", 1)[0].replace(" (0 = no bound)", "")
    return "?"


def targets(res: dict) -> dict:
    """The class keeps its workshop floors and sees no error; the noisy visitor is refused."""
    w, z = res["learners"], res["noisy"]
    ok_class = (w["errors"] == 0 and (w["click"]["p95_s"] or 0) <= bstats.CLICK_P95
                and (w["sentence"]["p95_s"] or 0) <= bstats.SENTENCE_P95 and (w["burst"]["p95_s"] or 0) <= bstats.BURST_P95)
    refused = z["pages_refused"] + z["websockets_refused"]
    name = "noisy" if res["bounds"] != "none" else "noisy.unbounded"
    return {f"{name}.class": {"value": {"errors": w["errors"], "click_p95": w["click"]["p95_s"],
                                        "sentence_p95": w["sentence"]["p95_s"], "burst_p95": w["burst"]["p95_s"]},
                              "target": f"0 errors, click p95 <= {bstats.CLICK_P95}, sentence p95 <= {bstats.SENTENCE_P95}, "
                                        f"burst p95 <= {bstats.BURST_P95}", "ok": ok_class},
            f"{name}.refused": {"value": refused, "target": "the noisy address refused (429)",
                                "ok": refused > 0 or res["bounds"] == "none"}}


def format_table(rows: list[dict]) -> str:
    def cell(st):
        return "—" if not st["n"] else f"{st['p50_s']:.2f}/{st['p95_s']:.2f}/{st['max_s']:.2f}"

    L = ["", f"noisy: learners (each from its own address) through serve.sh --replicas 2 while one address opens "
         f"{rows[0]['noisy']['tabs']} pages and reloads and reruns in each as fast as it is answered; "
         "latencies p50/p95/max s"]
    L.append(f"{'bounds':<46}{'learners':>9}{'click':>17}{'sentence':>17}{'burst':>17}{'errors':>7}  noisy: pages served/"
             "refused, websockets served/refused, reruns, open at most, other failures")
    for res in rows:
        w, z = res["learners"], res["noisy"]
        L.append(f"{res['bounds']:<46}{w['learners']:>9}{cell(w['click']):>17}{cell(w['sentence']):>17}"
                 f"{cell(w['burst']):>17}{w['errors']:>7}  {z['pages_served']}/{z['pages_refused']}, "
                 f"{z['websockets_served']}/{z['websockets_refused']}, {z['reruns']}, {z['open_max']}, "
                 f"{z['failed'] + z['pages_other'] + z['websockets_other']}")
        for e in w["error_messages"][:3]:
            L.append(f"    learner error: {e[:150]}")
        for e in z["error_messages"][:3]:
            L.append(f"    noisy: {e[:150]}")
    return "\n".join(L)
