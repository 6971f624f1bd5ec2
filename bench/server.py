"""A real ``streamlit run explorer/app.py`` server, and simulated sessions that talk to it.

Each simulated session speaks Streamlit's own websocket protocol, as the browser does: it
connects to ``/_stcore/stream`` (same origin, subprotocol "streamlit"), asks for a script run
with a ``BackMsg.rerun_script`` carrying the page's query string and widget states, and reads
``ForwardMsg``s (deltas, page info, ...) until ``script_finished``. Typing a new sentence is a
rerun whose widget states carry the text area's new value, exactly what the frontend sends.
What it does not do is what the browser does after the bytes arrive (plotly drawing the
figures): that costs the visitor's machine, not the server. Why not headless chromium: twenty
chromium pages drawing the figures would need more than the 2 cores the server itself runs on,
so they would measure the browsers, not the server.

Only 127.0.0.1 is ever contacted; every session and the whole run are bounded in time.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
ARRIVAL_S = 10.0  # visitors open the page within this many seconds of each other
MESSAGE_AGE = 2  # script runs a browser keeps a cached message for (Streamlit's maxCachedMessageAge)

SENTENCES = [
    "The cat sat on the mat.", "Attention is all you need.", "I love learning about transformers!",
    "Where is the nearest train station?", "She sells sea shells by the sea shore.",
    "Every head looks at the sentence differently.", "The model reads one token at a time.",
    "Padding keeps a batch rectangular.", "A small dog chased the red ball.",
    "안녕하세요 여러분", "나는 학교에 간다.", "어텐션이 전부다.", "오늘 날씨가 참 좋네요.",
    "트랜스포머는 문장을 한꺼번에 읽는다.", "hello world", "stressed desserts",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _local_get(url: str, timeout: float = 5.0) -> bytes:
    """GET a 127.0.0.1 URL, never through a proxy."""
    assert url.startswith(f"http://{HOST}:"), url
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as r:
        return r.read()


class Server:
    """``streamlit run explorer/app.py`` on 127.0.0.1 and a free port, from the repository root
    (so ``.streamlit/config.toml`` applies), in hosted mode unless told otherwise."""

    def __init__(self, *, hosted: bool = True, env: dict | None = None, start_timeout: float = 90):
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="bench-streamlit-", suffix=".log", delete=False)
        self.env = {**os.environ, **(env or {})}
        if hosted:
            self.env["ATTENTION_EXPLORER_HOSTED"] = "1"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Server":
        cmd = [sys.executable, "-m", "streamlit", "run", "explorer/app.py", "--server.address", HOST,
               "--server.port", str(self.port), "--server.headless", "true"]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the streamlit server exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if _local_get(f"{self.url}/_stcore/health", 2).strip() == b"ok":
                    return self
            except OSError:
                pass
            time.sleep(0.3)
        self.__exit__(None, None, None)
        raise RuntimeError(f"the streamlit server did not start in {self.start_timeout:.0f} s:\n{self.log_tail()}")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def log_tail(self, n: int = 40) -> str:
        self.log.flush()
        lines = Path(self.log.name).read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / 2**20


@dataclass
class RunResult:
    seconds: float
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    charts: int = 0
    chart_bytes: int = 0
    bytes: int = 0
    refs: int = 0  # messages the session already had (sent as a reference, as to a browser)
    status: str = ""


class Session:
    """One visitor: a websocket to the server, and the widget values the page currently has."""

    def __init__(self, port: int, *, query: str = "", run_timeout: float = 60.0):
        self.port, self.query, self.run_timeout = port, query, run_timeout
        self.ws = None
        self.widget_ids: dict[str, str] = {}  # user key -> widget id
        self.page_hash = ""
        # the browser's message cache: hashes of cacheable messages it received or was referred to
        # in the last MESSAGE_AGE runs (older ones are dropped, as the frontend does)
        self.recent: collections.deque[set[str]] = collections.deque([set()], maxlen=MESSAGE_AGE)

    @property
    def cached(self) -> set[str]:
        return set().union(*self.recent)

    async def __aenter__(self) -> "Session":
        from websockets.asyncio.client import connect

        self.ws = await connect(f"ws://{HOST}:{self.port}/_stcore/stream", subprotocols=["streamlit"],
                                origin=f"http://{HOST}:{self.port}", proxy=None, max_size=None,
                                open_timeout=self.run_timeout)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()

    async def rerun(self, widgets: dict[str, str] | None = None) -> RunResult:
        """Ask for a script run (with the text area set to ``widgets["text"]``, etc.) and read
        everything the server sends until the run finishes."""
        from streamlit.proto.Alert_pb2 import Alert
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        back = BackMsg()
        cs = back.rerun_script
        cs.query_string = self.query
        cs.page_script_hash = self.page_hash
        known = self.cached
        cs.cached_message_hashes.extend(sorted(known))  # the server may send references
        self.recent.append(set())
        for key, value in (widgets or {}).items():
            if key not in self.widget_ids:
                raise KeyError(f"the page has no widget with key {key!r} (yet)")
            w = cs.widget_states.widgets.add()
            w.id = self.widget_ids[key]
            w.string_value = value
        t0 = time.perf_counter()
        await self.ws.send(back.SerializeToString())
        res = RunResult(seconds=0.0)
        deadline = t0 + self.run_timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                res.errors.append(f"timeout: no script_finished within {self.run_timeout:.0f} s")
                break
            try:
                raw = await asyncio.wait_for(self.ws.recv(), left)
            except asyncio.TimeoutError:
                continue
            res.bytes += len(raw)
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if msg.metadata.cacheable and msg.hash:
                self.recent[-1].add(msg.hash)
            if kind == "ref_hash":
                res.refs += 1
                self.recent[-1].add(msg.ref_hash)
                if msg.ref_hash not in known:
                    res.errors.append("the server referred to a message this session never had")
            if kind == "new_session":
                self.page_hash = msg.new_session.page_script_hash
            elif kind == "page_info_changed":
                self.query = msg.page_info_changed.query_string
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                ek = el.WhichOneof("type")
                if ek == "exception":
                    res.errors.append(f"exception: {el.exception.type}: {el.exception.message[:200]}")
                elif ek == "alert":
                    body = el.alert.body[:200]
                    if el.alert.format == Alert.ERROR:
                        res.errors.append(f"st.error: {body}")
                    elif el.alert.format == Alert.WARNING:
                        res.warnings.append(body)
                    else:
                        res.infos.append(body)
                elif ek == "plotly_chart":
                    res.charts += 1
                    res.chart_bytes += len(el.plotly_chart.spec)
                else:
                    wid = getattr(getattr(el, ek), "id", "") if ek else ""
                    if isinstance(wid, str) and wid.startswith("$$ID-") and wid.count("-") >= 2:
                        self.widget_ids[wid.split("-", 2)[2]] = wid  # "$$ID-<hash>-<user key>"
            elif kind == "script_finished":
                status = ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)
                if status == "FINISHED_EARLY_FOR_RERUN":
                    continue  # a callback asked for another run: keep reading
                res.status = status
                if status == "FINISHED_WITH_COMPILE_ERROR":
                    res.errors.append("script compile error")
                break
        res.seconds = time.perf_counter() - t0
        return res


def sentence(rng: random.Random, tag: str) -> str:
    """A new batch of one or two natural sentences, unique (so the run cache never answers it)."""
    lines = [rng.choice(SENTENCES) for _ in range(rng.choice((1, 1, 2)))]
    lines[0] = f"{lines[0]} {tag}"
    return "\n".join(lines)


@dataclass
class LoadResult:
    sessions: int
    seconds: float
    first_load_s: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)  # sentence changes inside the timed window
    errors: list[str] = field(default_factory=list)
    reruns: int = 0
    timed_reruns: int = 0  # reruns of the timed window (first loads + sentence changes)
    rss: list[tuple[int, float]] = field(default_factory=list)  # (reruns so far, MB)


async def _visitor(i: int, server: Server, out: LoadResult, *, stop_at: float, think, rng: random.Random,
                   counter: list[int], run_timeout: float, until_reruns: int = 0, query: str = "",
                   arrive: float = ARRIVAL_S) -> None:
    """One visitor: loads the page, then changes the sentence every ``think`` seconds until
    ``stop_at`` (think=None: no pause, until ``until_reruns`` reruns in all)."""
    await asyncio.sleep(rng.uniform(0, arrive))
    try:
        async with Session(server.port, query=query, run_timeout=run_timeout) as s:
            first = await s.rerun()
            counter[0] += 1
            if think is not None:
                out.first_load_s.append(first.seconds)
            out.errors += [f"session {i} first load: {e}" for e in first.errors]
            k = 0
            while True:
                if think is not None:
                    await asyncio.sleep(rng.uniform(*think))
                    if time.monotonic() >= stop_at:  # only changes that start inside the window
                        break
                elif counter[0] >= until_reruns:
                    break
                k += 1
                r = await s.rerun({"text": sentence(rng, f"s{i}n{k}")})
                counter[0] += 1
                if think is not None:
                    out.latencies.append(r.seconds)
                out.errors += [f"session {i} run {k}: {e}" for e in r.errors]
    except Exception as e:  # a dropped connection is an error of the server under load
        out.errors.append(f"session {i}: {type(e).__name__}: {e}")


async def _sample_rss(server: Server, out: LoadResult, counter: list[int], done: asyncio.Event,
                      every: float = 1.0) -> None:
    while not done.is_set():
        out.rss.append((counter[0], server.rss_mb()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(done.wait(), every)
    out.rss.append((counter[0], server.rss_mb()))


async def _gather(tasks, out: LoadResult, limit: float) -> None:
    _done, pending = await asyncio.wait(tasks, timeout=max(1.0, limit))
    for t in pending:
        t.cancel()
        out.errors.append("a session was still running at the bench's hard time limit")


async def _load(server: Server, sessions: int, seconds: float, think: tuple[float, float], seed: int,
                run_timeout: float, until_reruns: int, memory_sessions: int, memory_query: str,
                hard_limit: float, arrival: float) -> LoadResult:
    out = LoadResult(sessions=sessions, seconds=seconds)
    counter = [0]
    rng = random.Random(seed)
    t0 = time.monotonic()
    stop_at = t0 + seconds
    done = asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(server, out, counter, done))
    timed = [asyncio.create_task(_visitor(i, server, out, stop_at=stop_at, think=think, counter=counter,
                                          rng=random.Random(rng.random()), run_timeout=run_timeout,
                                          arrive=arrival))
             for i in range(sessions)]
    await _gather(timed, out, hard_limit)
    out.timed_reruns = counter[0]
    if counter[0] < until_reruns:  # the memory check: more reruns, back to back
        more = [asyncio.create_task(_visitor(sessions + i, server, out, stop_at=stop_at, think=None,
                                             counter=counter, rng=random.Random(rng.random()),
                                             run_timeout=run_timeout, until_reruns=until_reruns,
                                             query=memory_query, arrive=1.0))
                for i in range(memory_sessions)]
        await _gather(more, out, hard_limit - (time.monotonic() - t0))
    done.set()
    await sampler
    out.reruns = counter[0]
    return out


def warm_up(server: Server, run_timeout: float = 120.0) -> tuple[float, list[str]]:
    """What a host does before the workshop: open the page once (the server imports, loads the
    model and draws the default page). Returns (seconds, errors)."""
    async def once():
        async with Session(server.port, run_timeout=run_timeout) as s:
            return await s.rerun()
    r = asyncio.run(once())
    return r.seconds, r.errors


def load_test(server: Server, *, sessions: int = 20, seconds: float = 60.0, think=(20.0, 40.0),
              seed: int = 0, run_timeout: float = 60.0, until_reruns: int = 0, memory_sessions: int = 4,
              memory_query: str = "view=tokens", hard_limit: float = 3600.0,
              arrival: float = ARRIVAL_S) -> LoadResult:
    """``sessions`` visitors arrive within ``arrival`` seconds, each loads the page (the default view:
    every stage), then changes the sentence every ``think`` seconds (uniform) until ``seconds``
    have passed. Latencies are of the sentence changes that start in that window.

    Then, if ``until_reruns`` is more than the reruns so far, ``memory_sessions`` visitors
    (page ``?{memory_query}``) change sentences back to back until that many reruns in all: the
    server's memory is sampled every second throughout."""
    return asyncio.run(_load(server, sessions, seconds, tuple(think), seed, run_timeout, until_reruns,
                             memory_sessions, memory_query, hard_limit, arrival))
