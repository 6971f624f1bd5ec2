"""A class answers through the real balancer, one replica killed in the middle: ``python -m bench --only poll``.

``scripts/serve.sh --replicas 2`` (nginx, sticky sessions, supervised replicas, hosted mode), the
answers in one store every replica opens (``--poll-store sqlite``: a SQLite file, the default of a
machine; ``redis``: a real ``redis-server`` started here). Everyone speaks Streamlit's websocket
protocol as a browser does (bench/server.py's ``Session``):

- **The presenter** opens the explorer's default page in presenter mode, gives the presenter key,
  opens "which token does this head attend to?" from its view (the buttons of the page, as clicked),
  then re-runs the count's fragment on the page's own timer (explorer/poll_ui.py's
  ``PRESENTER_REFRESH_S``; a tick that comes during a run is run right after it, as the browser's
  setInterval and Streamlit's coalesced reruns do), and takes the count at the moment its element
  arrives (when a browser draws it). If its replica is the one killed, its page reconnects and is
  drawn again (the poll comes back from its URL) as a browser's does.
- **60 learners** (``--poll-learners``) open the learner link (``?poll=<id>&me=<their id>``, a
  quarter in Korean), re-run their fragment every 3 s as the page's timer does, and each taps a
  choice at a random moment of the same 10 s window (``--poll-window``); 30 % change their mind a
  moment later. Half way through the window one replica's streamlit process is killed (SIGKILL:
  ``--poll-kill presenter``, the presenter's own replica, the harder case; ``other``, the other one); a
  page whose websocket closes notices at once, as a browser's does (also while idle), and after
  ``RECONNECT_S`` reconnects through the balancer (to the other replica), draws the page again from
  its URL (same learner id) and sends its last tap again if that tap's run had not answered.
- **Other learners** (``--poll-others``, 10) use the explorer at the same time, clicking a layer
  or head every 3-6 s, reconnecting the same way.

Measured and printed: whether every learner's last choice is the one stored and the total is the
number of learners (each counted once); how soon the presenter's count showed each first answer
after its tap was sent (p50/p95/max; floor 2 s), and after the store held it (the store's total read
from here every ``STORE_EVERY_S``); the presenter's timed runs and whole-page runs; if the presenter's
own replica was the one killed, when its page saw that, reconnected and showed a count again; the
learners' tap latencies; the other learners'
click p95 against the workshop floor (bench/stats.py); reconnects and errors. Writes
bench/results/poll-<date>.json unless --json says where.
"""
from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from explorer.poll_ui import LEARNER_REFRESH_S, PRESENTER_REFRESH_S

from . import server as sv
from . import stats as bstats

ROOT = Path(__file__).resolve().parent.parent
# the pages' own timers: the presenter's count, a learner's page (explorer/poll_ui.py)
PRESENTER_EVERY_S, LEARNER_EVERY_S = PRESENTER_REFRESH_S, LEARNER_REFRESH_S
KEY = "bench-presenter-key"
TEXT = "the cat sat on the mat"
RECONNECT_S = 0.1  # a page whose websocket closed asks the server again at once, then after 100 ms (Streamlit's client)
STORE_EVERY_S = 0.05  # the bench reads the store's total this often (the resolution of "stored")
COUNT_FLOOR_S = 2.0


class Watch(sv.Session):
    """A Session that keeps what a poll page shows: the fragment its buttons (or its count) are in,
    the count, the learner link, the alerts."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.fragment = ""  # the fragment a learner's buttons are in (its taps and its timer rerun it)
        self.count_fragment = ""  # the fragment the presenter's count is in (its timer reruns it)
        self.metric: str | None = None
        self.shown: list[tuple[float, int]] = []  # (monotonic time the count arrived, the count): as a browser shows it
        self.code: str | None = None
        self.alerts: list[str] = []

    def seen(self, delta, element) -> None:
        kind = element.WhichOneof("type")
        if kind == "metric":
            self.metric = element.metric.body
            self.shown.append((time.monotonic(), int(self.metric)))
            self.count_fragment = delta.fragment_id or self.count_fragment
        elif kind == "button" and delta.fragment_id:
            self.fragment = delta.fragment_id
        elif kind == "code" and "poll=" in element.code.code_text:  # the learner link (not the page's own URL)
            self.code = element.code.code_text
        elif kind == "alert":
            self.alerts.append(element.alert.body)

    async def idle(self, seconds: float, stop: asyncio.Event) -> bool:
        """Wait ``seconds`` as a page with nothing to do, noticing at once (as a browser's page does) when
        its websocket closes: ConnectionError then. True if the run is over (``stop``)."""
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.ws.wait_closed())]
        try:
            done, _ = await asyncio.wait(waits, timeout=max(0.0, seconds), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if stop.is_set():
            return True
        if waits[1] in done:
            raise ConnectionError("the page's websocket closed")
        return False


async def presenter(port: int, out: dict, stop: asyncio.Event, opened: asyncio.Future) -> None:
    """The presenter's browser page: opens the poll, then reruns the count's fragment on the page's own
    timer (``PRESENTER_EVERY_S``, as setInterval does: a tick that comes while a run is still going is
    run right after it, never queued twice); reconnects (a full run of the page) when its replica dies.
    The count is taken at the moment its element arrives (a browser draws it then), not at the run's end."""
    query = f"present=1&lang=en&text={quote(TEXT)}"
    t_open = None
    s = None
    while not stop.is_set():
        try:
            s = Watch(port, query=query, run_timeout=60, sticky=True)
            s.shown = out["seen"]  # every count the page showed, across reconnects
            await s.__aenter__()
            t0 = time.monotonic()
            out["connected_at"].append(t0)
            r = await s.rerun()
            out["page_s"].append(time.monotonic() - t0)
            out["errors"] += [f"presenter: {e}" for e in r.errors]
            if not opened.done():
                r = await s.rerun({"_poll_key": KEY, "poll_key_submit": True})
                t_open = time.monotonic()
                r = await s.rerun({"poll_open_view": True})
                out["open_s"] = time.monotonic() - t_open
                link = s.code or ""
                pid = parse_qs(urlsplit(link).query).get("poll", [""])[0]
                if not pid:
                    raise RuntimeError(f"the presenter's page showed no learner link ({s.alerts[-3:]})")
                out["learner_link"] = link
                opened.set_result(pid)
            query = s.query  # its URL: the poll it shows (asked=...)
            tick = time.monotonic()
            while not stop.is_set():
                tick += PRESENTER_EVERY_S
                now = time.monotonic()
                if tick > now:
                    if await s.idle(tick - now, stop):
                        break
                else:  # the timer fired during the last run: this run starts now, the timer keeps its beat
                    tick += PRESENTER_EVERY_S * int((now - tick) // PRESENTER_EVERY_S)
                t0 = time.monotonic()
                r = await s.rerun(fragment_id=s.count_fragment or s.fragment)
                out["refresh_s"].append(time.monotonic() - t0)
                out["errors"] += [f"presenter: {e}" for e in r.errors]
        except Exception as e:  # its replica killed: the page reconnects, as a browser's does
            if not opened.done():
                opened.set_exception(e)
                return
            out["reconnects"] += 1
            out["reconnect_at"].append(time.monotonic())
            await asyncio.sleep(RECONNECT_S)
        finally:
            if s is not None:
                await s.__aexit__(None, None, None)


async def stored(store, pid: str, out: list, stop: asyncio.Event) -> None:
    """The store's own total, read every ``STORE_EVERY_S`` from here: (monotonic time, total) at each change."""
    last = None
    while not stop.is_set():
        try:
            total = sum((await asyncio.to_thread(store.counts, pid)).values())
        except Exception:
            total = last
        if total != last:
            out.append((time.monotonic(), total))
            last = total
        try:
            await asyncio.wait_for(stop.wait(), STORE_EVERY_S)
        except asyncio.TimeoutError:
            pass


async def learner(i: int, port: int, pid: str, n: int, plan: dict, out: dict, stop: asyncio.Event) -> None:
    """Open the learner page, refresh every 3 s, tap at the planned moments; reconnect and replay."""
    me = f"bench-learner-{i:04d}"
    query = f"poll={pid}&lang={'ko' if i % 4 == 0 else 'en'}&me={me}"
    taps = list(plan["taps"])  # (monotonic time, choice)
    last: int | None = None
    pending = False  # a tap sent whose answer the page has not confirmed
    while not stop.is_set():
        s = Watch(port, query=query, run_timeout=60, sticky=True)
        try:
            await s.__aenter__()
            r = await s.rerun()
            out["errors"] += [f"learner {i}: {e}" for e in r.errors]
            if pending and last is not None:  # the replay: the same tap, on whichever replica answers now
                t0 = time.monotonic()
                r = await s.rerun({f"poll_choice_{last}": True}, fragment_id=s.fragment)
                out["replays"] += 1
                out["tap_s"].append(time.monotonic() - t0)
                plan.setdefault("done", []).append(time.monotonic())
                pending = False
            next_refresh = time.monotonic() + LEARNER_EVERY_S
            while not stop.is_set():
                now = time.monotonic()
                if taps and taps[0][0] <= now:
                    _, last = taps.pop(0)
                    pending = True
                    t0 = time.monotonic()
                    plan.setdefault("sent", []).append(t0)
                    r = await s.rerun({f"poll_choice_{last}": True}, fragment_id=s.fragment)
                    pending = False
                    out["tap_s"].append(time.monotonic() - t0)
                    plan.setdefault("done", []).append(time.monotonic())
                    out["errors"] += [f"learner {i} tap: {e}" for e in r.errors]
                    if any("not counted" in a or "Try again" in a for a in s.alerts[-2:]):
                        out["refused"].append((i, s.alerts[-1][:120]))
                elif now >= next_refresh:
                    r = await s.rerun(fragment_id=s.fragment)
                    next_refresh = time.monotonic() + LEARNER_EVERY_S
                    out["refreshes"] += 1
                    out["errors"] += [f"learner {i} refresh: {e}" for e in r.errors]
                else:
                    wake = min([next_refresh] + [t for t, _ in taps[:1]])
                    if await s.idle(max(0.01, wake - now), stop):
                        break
        except Exception as e:
            out["reconnects"] += 1
            out["dropped"].append(f"learner {i}: {type(e).__name__}")
            await asyncio.sleep(RECONNECT_S)
        finally:
            await s.__aexit__(None, None, None)
    plan["last"] = last


async def other(i: int, port: int, page: "sv.Page", out: dict, stop: asyncio.Event, rng: random.Random) -> None:
    """A learner on the explorer, clicking a layer or head every 3-6 s; reconnects when dropped."""
    state = {"layer": 0, "head": 0}
    while not stop.is_set():
        s = sv.Session(port, run_timeout=60, sticky=True)
        try:
            await s.__aenter__()
            r = await s.rerun()
            out["errors"] += [f"other {i}: {e}" for e in r.errors]
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), rng.uniform(3.0, 6.0))
                    break
                except asyncio.TimeoutError:
                    pass
                kind = rng.choice(("layer", "head"))
                n = page.layers if kind == "layer" else page.heads
                if n <= 1:
                    continue
                state[kind] = sv._other(rng, n, state[kind])
                r = await s.rerun({kind: float(state[kind])})
                out["clicks"].append(r.seconds)
                out["errors"] += [f"other {i} {kind}: {e}" for e in r.errors]
        except Exception as e:
            out["reconnects"] += 1
            out["dropped"].append(f"other {i}: {type(e).__name__}")
            await asyncio.sleep(rng.uniform(0.2, 1.0))
        finally:
            await s.__aexit__(None, None, None)


def sessions_on(port: int) -> int:
    """Established connections into a replica's port (nginx opens one per open page: its websocket)."""
    import psutil

    return sum(1 for c in psutil.net_connections(kind="tcp")
               if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port)


def replica_pid(bal, i: int) -> int | None:
    """Replica ``i``'s streamlit pid, from the pid file in serve.sh's run folder."""
    m = re.search(r"logs in (\S+);", bal.log_tail(200))
    try:
        return int((Path(m.group(1)) / f"replica-{i}.pid").read_text()) if m else None
    except (OSError, ValueError):
        return None


async def _run(bal, learners: int, window: float, others: int, seed: int, store_url: str,
               kill: str = "presenter") -> dict:
    from explorer import poll

    rng = random.Random(seed)
    out = {"errors": [], "seen": [], "reconnects": 0, "reconnect_at": [], "connected_at": [], "page_s": [],
           "refresh_s": []}
    lout = {"errors": [], "tap_s": [], "replays": 0, "reconnects": 0, "dropped": [], "refreshes": 0, "refused": []}
    oout = {"errors": [], "clicks": [], "reconnects": 0, "dropped": []}
    stop = asyncio.Event()
    opened = asyncio.get_running_loop().create_future()
    p_task = asyncio.create_task(presenter(bal.port, out, stop, opened))
    pid = await asyncio.wait_for(opened, 300)
    # the presenter's replica: the one its page's websocket is on (no other page is open yet)
    on = [i for i in range(1, bal.replicas + 1) if sessions_on(bal.port + i)]
    home = on[0] if len(on) == 1 else None
    target = None if home is None else home if kill == "presenter" else 1 + home % bal.replicas
    store = poll.open_store(store_url)
    n = store.get(pid).n_choices
    totals: list[tuple[float, int]] = []
    s_task = asyncio.create_task(stored(store, pid, totals, stop))
    page = sv.Page.of()
    o_tasks = [asyncio.create_task(other(i, bal.port, page, oout, stop, random.Random(rng.random())))
               for i in range(others)]
    # the learners arrive within 8 s, then the window starts: every tap in the same `window` seconds
    t_arrive = time.monotonic()
    start = t_arrive + 10.0
    plans = []
    for i in range(learners):
        first = (start + rng.uniform(0, window - 2.0), rng.randrange(n))
        taps = [first]
        if rng.random() < 0.3:
            taps.append((first[0] + rng.uniform(0.5, 1.5), (first[1] + rng.randrange(1, n)) % n))
        plans.append({"taps": taps})
    l_tasks = []
    for i in range(learners):
        l_tasks.append(asyncio.create_task(learner(i, bal.port, pid, n, plans[i], lout, stop)))
        await asyncio.sleep(8.0 / learners)
    await asyncio.sleep(max(0.0, start + window / 2 - time.monotonic()))
    killed = (replica_pid(bal, target) if target else None) or bal.pids[0]
    t_kill = time.monotonic()
    os.kill(killed, signal.SIGKILL)
    await asyncio.sleep(max(0.0, start + window + 8.0 - time.monotonic()))  # the window, then the replays
    stop.set()
    await asyncio.gather(p_task, s_task, *l_tasks, *o_tasks, return_exceptions=True)

    counts = store.counts(pid)
    wrong = []
    for i, plan in enumerate(plans):
        want = plan["taps"][-1][1]
        got = store.mine(pid, f"bench-learner-{i:04d}")
        if got != want:
            wrong.append((i, want, got))
    # how soon the presenter's count showed the k-th first answer, from the moment its tap was sent
    firsts = sorted(plan["sent"][0] for plan in plans if plan.get("sent"))
    seen = out["seen"]
    delays = []
    for k, t_sent in enumerate(firsts, start=1):
        t_seen = next((t for t, v in seen if v >= k and t >= t_sent), None)
        delays.append(None if t_seen is None else t_seen - t_sent)
    shown = [d for d in delays if d is not None]
    # ... and from the moment the tap's run had answered (its answer committed by then: a lower bound)
    dones = sorted(plan["done"][0] for plan in plans if plan.get("done"))
    after_done = []
    for k, t_done in enumerate(dones, start=1):
        t_seen = next((t for t, v in seen if v >= k and t >= t_done), None)
        if t_seen is not None:
            after_done.append(t_seen - t_done)
    # the same, for the first answers sent over 1.5 s before the kill (no reconnect in their way)
    before = []
    for k, t_sent in enumerate(firsts, start=1):
        if t_sent < t_kill - 1.5:
            t_seen = next((t for t, v in seen if v >= k and t >= t_sent), None)
            if t_seen is not None:
                before.append(t_seen - t_sent)
    # ... and from the moment the store held the k-th answer (read from here every STORE_EVERY_S): the
    # presenter's own part, whatever the learner's tap went through
    after_stored, after_stored_past_kill = [], []
    for k in range(1, learners + 1):
        t_stored = next((t for t, v in totals if v is not None and v >= k), None)
        if t_stored is None:
            continue
        t_seen = next((t for t, v in seen if v >= k and t >= t_stored), None)
        if t_seen is not None:
            (after_stored if t_stored < t_kill else after_stored_past_kill).append(t_seen - t_stored)
    # the presenter's page around the kill: when it saw its websocket close, when its new one opened,
    # when it showed a count again (seconds after the kill; none if its replica was not the one killed)
    after_kill = {"dropped_s": next((t - t_kill for t in out["reconnect_at"] if t >= t_kill), None),
                  "connected_s": next((t - t_kill for t in out["connected_at"] if t >= t_kill), None)}
    if after_kill["dropped_s"] is not None:
        after_kill["count_shown_s"] = next((t - t_kill for t, _ in seen if t >= t_kill + after_kill["dropped_s"]), None)
    # the taps whose run spanned the kill (sent before it, answered after it, or replayed)
    spanned = sum(1 for plan in plans for t in plan.get("sent", []) if t <= t_kill <= t + 5.0)
    return {
        "learners": learners, "window_s": window, "others": others, "store": store.kind,
        "learner_refresh_s": LEARNER_EVERY_S,
        "killed_replica_pid": killed, "killed_at_s_into_window": round(t_kill - start, 2), "kill": kill,
        "presenter_replica": home, "killed_replica": target,
        "counts": {str(k): v for k, v in counts.items()}, "total": sum(counts.values()),
        "every_answer_once": not wrong and sum(counts.values()) == learners, "wrong": wrong[:10],
        "changed_minds": sum(1 for p in plans if len(p["taps"]) > 1),
        "taps_in_window_s": [round(min(t for p in plans for t, _ in p["taps"]) - start, 2),
                             round(max(t for p in plans for t, _ in p["taps"]) - start, 2)],
        "presenter_count_delay": bstats.stats(shown), "presenter_count_missed": sum(1 for d in delays if d is None),
        "presenter_count_delay_after_answered": bstats.stats(after_done),
        "presenter_count_delay_before_kill": bstats.stats(before), "taps_sent_within_5s_before_kill": spanned,
        "presenter_count_delay_after_stored": bstats.stats(after_stored + after_stored_past_kill),
        "presenter_count_delay_after_stored_before_kill": bstats.stats(after_stored),
        "presenter_count_delay_after_stored_after_kill": bstats.stats(after_stored_past_kill),
        "presenter_refresh_every_s": PRESENTER_EVERY_S, "presenter_refresh_run": bstats.stats(out["refresh_s"]),
        "presenter_page_run": bstats.stats(out["page_s"]), "store_read_every_s": STORE_EVERY_S,
        "presenter_reconnects": out["reconnects"], "presenter_after_kill": after_kill,
        "presenter_open_s": out.get("open_s"),
        "tap": bstats.stats(lout["tap_s"]), "learner_reconnects": lout["reconnects"], "replays": lout["replays"],
        "learner_refreshes": lout["refreshes"], "refused": lout["refused"][:10],
        "other_clicks": bstats.stats(oout["clicks"]), "other_reconnects": oout["reconnects"],
        "errors": len(out["errors"] + lout["errors"] + oout["errors"]),
        "error_messages": (out["errors"] + lout["errors"] + oout["errors"])[:10],
    }


def run(*, learners: int = 60, window: float = 10.0, others: int = 10, store: str = "sqlite", seed: int = 0,
        kill: str = "presenter", log=print) -> dict:
    t0 = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="bench-poll-"))
    redis = None
    if store == "redis":
        sys.path.insert(0, str(ROOT / "tests"))
        from redisd import REDIS, RedisServer  # the tests' own redis-server helper

        if REDIS is None:
            raise SystemExit("--poll-store redis: redis-server is not installed (sh scripts/setup.sh --dev)")
        redis = RedisServer(folder).start()
        url = redis.url
    else:
        url = f"sqlite://{folder}/polls.sqlite3"
    env = {"ATTENTION_EXPLORER_POLL_STORE": url, "ATTENTION_EXPLORER_PRESENTER_KEY": KEY}
    try:
        with sv.Balancer(2, env=env) as bal:
            log(f"poll: 2 replicas on :{bal.port}, the answers in {store}; warming up")
            _, errors = bal.warm_up()
            res = asyncio.run(_run(bal, learners, window, others, seed, url, kill))
            res["warm_up_errors"] = errors
            res["replica_log_tail"] = bal.replica_log_tails(10) if res["errors"] else ""
    finally:
        if redis is not None:
            redis.stop()
    res["wall_s"] = time.perf_counter() - t0
    return res


def targets(r: dict) -> dict:
    delay = r["presenter_count_delay"]["max_s"]
    floor = bstats.CLICK_P95
    return {
        "poll.every_answer_once": {"value": {"total": r["total"], "learners": r["learners"], "wrong": len(r["wrong"])},
                                   "target": "every learner's last choice stored, each counted once",
                                   "ok": r["every_answer_once"]},
        "poll.presenter_count_s": {"value": delay, "target": f"max <= {COUNT_FLOOR_S}",
                                   "ok": delay is not None and delay <= COUNT_FLOOR_S and not r["presenter_count_missed"]},
        "poll.other_learners_click_p95": {"value": r["other_clicks"]["p95_s"], "target": f"<= {floor}",
                                          "ok": (r["other_clicks"]["p95_s"] or 0) <= floor},
    }


def format_table(r: dict) -> str:
    def cell(st):
        return "—" if not st["n"] else f"{st['p50_s']:.2f}/{st['p95_s']:.2f}/{st['max_s']:.2f} (n={st['n']})"

    lines = [
        "",
        f"poll: {r['learners']} learners answer within {r['window_s']:.0f} s through 2 replicas behind nginx "
        f"({r['store']} store); replica {r['killed_replica']} (pid {r['killed_replica_pid']}; the presenter's: "
        f"{r['presenter_replica']}) killed {r['killed_at_s_into_window']} s into the window",
        f"  answers: total {r['total']} of {r['learners']} learners, every last choice stored once: "
        f"{'yes' if r['every_answer_once'] else 'NO ' + str(r['wrong'])}; {r['changed_minds']} changed their mind; "
        f"counts {r['counts']}",
        f"  presenter's count after a tap was sent, p50/p95/max s: {cell(r['presenter_count_delay'])}; "
        f"missed {r['presenter_count_missed']}; presenter reconnects {r['presenter_reconnects']} "
        f"({', '.join(f'{k} {v:.2f}' for k, v in r['presenter_after_kill'].items() if v is not None) or 'not killed'})",
        f"  ... after the tap's run had answered (a lower bound): {cell(r['presenter_count_delay_after_answered'])}; "
        f"taps sent in the 5 s before the kill: {r['taps_sent_within_5s_before_kill']}",
        f"  ... first answers sent over 1.5 s before the kill: {cell(r['presenter_count_delay_before_kill'])}",
        f"  ... after the store held it (read every {r['store_read_every_s']} s): before the kill "
        f"{cell(r['presenter_count_delay_after_stored_before_kill'])}, after it "
        f"{cell(r['presenter_count_delay_after_stored_after_kill'])}",
        f"  presenter's count timer {r['presenter_refresh_every_s']} s; one timed run p50/p95/max s: "
        f"{cell(r['presenter_refresh_run'])}; a whole page's run: {cell(r['presenter_page_run'])}",
        f"  learners' taps p50/p95/max s: {cell(r['tap'])}; reconnects {r['learner_reconnects']}, replays "
        f"{r['replays']}, refreshes {r['learner_refreshes']}",
        f"  other learners' clicks p50/p95/max s: {cell(r['other_clicks'])} (floor p95 <= {bstats.CLICK_P95}); "
        f"reconnects {r['other_reconnects']}",
        f"  errors {r['errors']}" + "".join(f"\n    {e[:150]}" for e in r["error_messages"][:5]),
    ]
    return "\n".join(lines)

