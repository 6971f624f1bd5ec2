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

Besides reloading, the noisy address does the expensive work (issue 38, item 5): ``work_tabs`` of its pages
(opened first, kept open) each hammer one kind, back to back with half a second between attempts, on
``work_model`` (SmolLM2 when fetched: the issue's 2-2.7 s lens and 7-14 s patching), in turn:
exports (the Decoding view: a new head each time, then its GIF and PDF asked for at once, as two clicks),
the logit lens (``?stage=logit_lens``, a new sentence each time) and patching (``?view=compare``, a new
pair of sentences each time, then its button). Reported per kind: asked, served, refused (busy: one already
in flight; rate: over the page's quota), failed, and the refusals' words. The quotas are serve.sh's
hosted defaults (explorer/quota.py).
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
WORK_KINDS = ("export", "lens", "patching")
WORK_PAUSE_S = 0.5  # between two attempts of a work tab (the bench's client shares the server's cores)
# single-token words (in SmolLM2's and the seed's vocabularies alike) that make a patching pair of equal length
SWAPS = (("cat", "dog"), ("red", "big"), ("man", "boy"), ("sun", "sea"), ("car", "bus"), ("hot", "old"))


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


async def _noisy(port: int, tabs: int, seconds: float, seed: int, work_tabs: int = 3, work_model: str = "seed") -> dict:
    n = dict.fromkeys(("pages_served", "pages_refused", "pages_other", "websockets_served", "websockets_refused",
                       "websockets_other", "reruns", "failed", "open", "open_max"), 0)
    errors: list[str] = []
    rng = random.Random(seed)
    stop_at = time.monotonic() + seconds
    work = {kind: dict.fromkeys(("asked", "served", "busy", "rate", "failed", "connect_refused"), 0) | {"said": [],
                                                                                                    "seconds": []}
            for kind in WORK_KINDS}
    workers = [asyncio.create_task(_work_tab(j, WORK_KINDS[j % len(WORK_KINDS)], port, stop_at, work, errors,
                                             random.Random(rng.random()), work_model)) for j in range(work_tabs)]
    await asyncio.sleep(min(5.0, seconds / 4) if work_tabs else 0)  # the work tabs' pages are open first
    await asyncio.gather(*(_tab(k, port, stop_at, n, errors, random.Random(rng.random())) for k in range(tabs)),
                         *workers)
    n.pop("open")
    for w in work.values():
        w["said"] = sorted(set(w["said"]))[:4]
        w["seconds"] = bstats.stats(w["seconds"])
    return dict(n, tabs=tabs, seconds=seconds, address=NOISY_FROM, errors=len(errors), error_messages=errors[:10],
                work=work, work_tabs=work_tabs, work_model=work_model)


# --- the noisy visitor's expensive work ---------------------------------------------------------------------

class _Wire:
    """A Session's websocket, seen through: the download buttons' deferred file ids by widget key, the
    backend operations' answers by request id, and a button's click (``click``: widget ids) written into
    the next rerun's widget states as the browser sends it (a trigger)."""

    def __init__(self, ws) -> None:
        self.ws, self.deferred, self.answers, self.click, self.session = ws, {}, {}, set(), ""

    async def send(self, raw: bytes) -> None:
        if self.click:
            from streamlit.proto.BackMsg_pb2 import BackMsg

            back = BackMsg()
            back.ParseFromString(raw)
            for w in back.rerun_script.widget_states.widgets:
                if w.id in self.click:
                    w.trigger_value = True
            self.click = set()
            raw = back.SerializeToString()
        await self.ws.send(raw)

    async def recv(self):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        raw = await self.ws.recv()
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        kind = msg.WhichOneof("type")
        if kind == "new_session" and msg.new_session.initialize.session_id:
            self.session = msg.new_session.initialize.session_id  # a backend operation names it
        elif kind == "backend_operation_response":
            self.answers[msg.backend_operation_response.request_id] = msg.backend_operation_response
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element" \
                and msg.delta.new_element.WhichOneof("type") == "download_button":
            b = msg.delta.new_element.download_button
            if b.deferred_file_id and b.id.count("-") >= 2:
                self.deferred[b.id.split("-", 2)[2]] = b.deferred_file_id
        return raw

    async def close(self) -> None:
        await self.ws.close()


async def _downloads(wire: _Wire, keys: list[str], timeout: float) -> list:
    """Click the download buttons ``keys`` at once (each a backend operation asking for its deferred
    file, as the browser sends it) and wait for every answer (None: no answer within ``timeout``)."""
    import uuid

    from streamlit.proto.BackMsg_pb2 import BackMsg

    ids = []
    for key in keys:
        back = BackMsg()
        req = back.backend_operation_request
        req.request_id = uuid.uuid4().hex
        req.session_id = wire.session
        req.deferred_file.file_id = wire.deferred[key]
        ids.append(req.request_id)
        await wire.send(back.SerializeToString())
    deadline = time.monotonic() + timeout
    while not all(i in wire.answers for i in ids) and time.monotonic() < deadline:
        try:
            await asyncio.wait_for(wire.recv(), max(0.1, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            break
    return [wire.answers.pop(i, None) for i in ids]


def _refusal_words() -> dict[str, tuple[str, str]]:
    """kind -> (the start of its "over the quota" words, of its "one in flight" words), in English."""
    from explorer import i18n, quota

    def start(key: str, **kw) -> str:
        return i18n.t(key, "en", **kw).split("(")[0].split(".")[0][:40]

    return {kind: (start(quota.WORDS[kind, False], s=0, n=0), start(quota.WORDS[kind, True]))
            for kind in WORK_KINDS}


def _count(w: dict, words: tuple[str, str], said: str | None, failed: str | None = None) -> None:
    """One attempt: served, refused (rate or busy, by the words the page said) or failed."""
    w["asked"] += 1
    if said and said.startswith(words[0]):
        w["rate"] += 1
        w["said"].append(said[:160])
    elif said and said.startswith(words[1]):
        w["busy"] += 1
        w["said"].append(said[:160])
    elif failed or said:
        w["failed"] += 1
        w["said"].append(f"failed: {(failed or said)[:150]}")
    else:
        w["served"] += 1


def _pair(rng: random.Random, tag: str) -> tuple[str, str]:
    """Two sentences that differ in one word of the same length (a patching pair), unique by ``tag``."""
    a, b = rng.choice(SWAPS)
    head = rng.choice(("The", "A", "One", "That"))
    return f"{head} {a} saw {tag} today", f"{head} {b} saw {tag} today"


def _tag(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))


async def _work_tab(j: int, kind: str, port: int, stop_at: float, work: dict, errors: list[str],
                    rng: random.Random, model: str) -> None:
    """One of the noisy visitor's pages doing ``kind`` over and over until ``stop_at`` (reopened when its
    connection is refused or drops)."""
    from urllib.parse import urlencode

    from websockets.exceptions import InvalidStatus

    SOURCE.set(NOISY_FROM)
    w, words = work[kind], _refusal_words()[kind]
    attempt = 0
    while time.monotonic() < stop_at:
        clean, corrupted = _pair(rng, _tag(rng))
        query = urlencode({"model": model, "text": clean, **(
            {"view": "decoding"} if kind == "export" else {"stage": "logit_lens"} if kind == "lens"
            else {"view": "compare", "compare": corrupted})})
        try:
            async with sv.Session(port, query=query, sticky=True, run_timeout=120) as s:
                wire = s.ws = _Wire(s.ws)
                first = await s.rerun()
                errors += [f"work {kind} first run: {e}" for e in first.errors[:1]]
                while time.monotonic() < stop_at:
                    attempt += 1
                    t0 = time.perf_counter()
                    if kind == "export":
                        # another head (4: the seed has 4, SmolLM2 9), and every 4th time a new sentence (its
                        # decoding traced once): a figure not exported yet, so not a kept file
                        change = {"head": float(attempt % 4)} if "head" in s.widget_ids else {}
                        if attempt % 4 == 0:
                            change["text"] = _pair(rng, _tag(rng))[0]
                        await s.rerun(change)
                        keys = [k for k in ("decoding-dl-steps-gif", "decoding-dl-steps-pdf") if k in wire.deferred]
                        if not keys:
                            _count(w, words, None, failed="no GIF/PDF button on the page")
                        for answer in await _downloads(wire, keys, timeout=180):
                            _count(w, words, answer.error_msg if answer is not None else None,
                                   failed=None if answer is not None else "no answer in 180 s")
                    elif kind == "lens":
                        r = await s.rerun({"text": " ".join(_pair(rng, _tag(rng))[:1])})
                        said = next((x for x in r.warnings if x.startswith(words)), None)
                        _count(w, words, said, failed=r.errors[0] if r.errors else None)
                    else:
                        clean, corrupted = _pair(rng, _tag(rng))
                        r = await s.rerun({"text": clean, "compare": corrupted})
                        if "patch_go" in s.widget_ids:
                            wire.click = {s.widget_ids["patch_go"]}
                            r = await s.rerun({"patch_go": 1.0})
                            said = next((x for x in r.warnings if x.startswith(words)), None)
                            _count(w, words, said, failed=r.errors[0] if r.errors else None)
                        else:
                            _count(w, words, None, failed="no patching button (token counts differ?)")
                    w["seconds"].append(time.perf_counter() - t0)
                    await asyncio.sleep(WORK_PAUSE_S)
        except (urllib.error.HTTPError, InvalidStatus):
            w["connect_refused"] += 1
            await asyncio.sleep(REFUSED_PAUSE_S)
        except Exception as e:  # a dropped connection, a timeout
            errors.append(f"work {kind} {j}: {type(e).__name__}: {str(e)[:120]}")
            await asyncio.sleep(REFUSED_PAUSE_S)


def noisy_visitor(port: int, tabs: int = 100, seconds: float = 70.0, seed: int = 1, work_tabs: int = 3,
                  work_model: str = "seed") -> dict:
    """The noisy visitor, run to the end (in a process of its own: see ``section_noisy``)."""
    with bound_sources(), asyncio.Runner(loop_factory=SourceLoop) as runner:
        return runner.run(_noisy(port, tabs, seconds, seed, work_tabs, work_model))


# --- the measurement ---------------------------------------------------------------------------------

def default_work_model() -> str:
    """SmolLM2 when its weights are here (the lens and patching cost seconds, as the issue measured), else
    the seed."""
    try:
        from model import fetch

        return "smollm2" if fetch.is_fetched("smollm2") else "seed"
    except Exception:
        return "seed"


def section_noisy(*, learners: int = 30, tabs: int = 100, seconds: float = 60.0, act=(3.0, 6.0),
                  p_sentence: float = 0.2, arrival: float = 10.0, bounds: bool = True, seed: int = 0,
                  work_tabs: int = 3, work_model: str | None = None) -> dict:
    """``learners`` (each from its own address) through ``scripts/serve.sh --replicas 2`` with its
    default per-client bounds (``bounds=False``: none), while the noisy visitor runs from the end of
    the learners' arrival to the end of the burst (the window plus 10 s): ``tabs`` pages reloading and
    ``work_tabs`` pages hammering exports, the lens and patching on ``work_model``."""
    work_model = work_model or default_work_model()
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
                noise = asyncio.get_running_loop().run_in_executor(pool, noisy_visitor, bal.port, tabs, seconds + 10.0,
                                                                   seed + 1, work_tabs, work_model)
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
    work = {kind: w for kind, w in z.get("work", {}).items() if w["asked"]}
    out = {}
    if work:  # every kind asked for was refused at some point, in clear words, and none failed
        out[f"{name}.work"] = {
            "value": {kind: {k: w[k] for k in ("asked", "served", "busy", "rate", "failed")} for kind, w in work.items()},
            "target": "each kind refused past the page's quota (busy or rate), no failure",
            "ok": all(w["busy"] + w["rate"] > 0 and w["failed"] == 0 for w in work.values())}
    return out | {f"{name}.class": {"value": {"errors": w["errors"], "click_p95": w["click"]["p95_s"],
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
        for kind, k in z.get("work", {}).items():
            L.append(f"    noisy {kind} on {z['work_model']}: asked {k['asked']}, served {k['served']}, refused busy "
                     f"{k['busy']} / rate {k['rate']}, failed {k['failed']}, connections refused {k['connect_refused']}")
            for said in k["said"][:2]:
                L.append(f"        said: {said}")
        for e in w["error_messages"][:3]:
            L.append(f"    learner error: {e[:150]}")
        for e in z["error_messages"][:3]:
            L.append(f"    noisy: {e[:150]}")
    return "\n".join(L)


def main(argv=None) -> None:
    """``python -m bench.noisy``: the section alone (a smoke run: ``--learners 3 --seconds 20 --tabs 4``)."""
    import argparse
    import json

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--learners", type=int, default=30)
    p.add_argument("--tabs", type=int, default=100, help="the noisy address's reloading pages")
    p.add_argument("--work-tabs", type=int, default=3, help="its pages hammering exports, the lens and patching")
    p.add_argument("--work-model", default=None, help="the model of the work tabs (default: smollm2 when fetched)")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--arrival", type=float, default=10.0)
    p.add_argument("--json", default=None, help="write the result here")
    a = p.parse_args(argv)
    res = section_noisy(learners=a.learners, tabs=a.tabs, seconds=a.seconds, arrival=a.arrival, work_tabs=a.work_tabs,
                        work_model=a.work_model)
    print(format_table([res]))
    for name, t in targets(res).items():
        print(f"{'ok ' if t['ok'] else 'MISSED'} {name}: {t['value']} (target: {t['target']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"noisy": [res], "targets": targets(res)}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
