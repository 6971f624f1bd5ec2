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


def interpreter_env(env: dict | None = None) -> dict[str, str]:
    """The environment for a child that runs this project's Python (serve.sh and its replicas, a
    streamlit server): this interpreter passed through. ``PYTHON`` is the interpreter serve.sh runs
    for every python it starts, and this interpreter's folder comes first on PATH (belt and braces,
    for anything that runs a bare ``python``). Started by a virtual environment's interpreter without
    activating it, the replicas then run that environment's Python, not whichever ``python`` PATH
    finds first ("No module named streamlit"). The folder is the one ``sys.executable`` names, not
    the file it links to: a venv's ``bin/python`` links to the base interpreter, without the venv's
    packages. ``env`` (the caller's) wins."""
    here = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    return {**os.environ, "PYTHON": sys.executable, "PATH": here + (os.pathsep + path if path else ""),
            **(env or {})}


def tail(path: str | Path, n: int = 40, limit: int = 256 << 10) -> str:
    """The last ``n`` lines of a log file that a child writes, read by its name (at most its last
    ``limit`` bytes). Nothing is flushed: the parent never writes to these files, and the file object
    may be closed by then. A missing or unreadable file is said, never raised: this text goes into
    the message of a failure, which must name that failure's cause."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError as e:
        return f"(no log at {path}: {e.strerror or e})"
    return "\n".join(data.decode(errors="replace").splitlines()[-n:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _sticky_cookie(url: str, timeout: float = 10.0) -> str:
    """GET the page as a browser's first request does; return the cookies it set ("a=b; c=d")."""
    assert url.startswith(f"http://{HOST}:"), url
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as r:
        r.read()
        return "; ".join(c.split(";", 1)[0] for c in r.headers.get_all("Set-Cookie") or [])


def _local_get(url: str, timeout: float = 5.0) -> bytes:
    """GET a 127.0.0.1 URL, never through a proxy."""
    assert url.startswith(f"http://{HOST}:"), url
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as r:
        return r.read()


class Server:
    """``streamlit run explorer/app.py`` on 127.0.0.1 and a free port, from the repository root
    (so ``.streamlit/config.toml`` applies), in hosted mode unless told otherwise."""

    def __init__(self, *, hosted: bool = True, env: dict | None = None, start_timeout: float = 90,
                 root: Path = ROOT):
        self.root = root  # the checkout whose app runs (another revision's, for a side-by-side run)
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="bench-streamlit-", suffix=".log", delete=False)
        self.env = interpreter_env(env)
        if hosted:
            self.env["ATTENTION_EXPLORER_HOSTED"] = "1"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Server":
        cmd = [sys.executable, "-m", "streamlit", "run", "explorer/app.py", "--server.address", HOST,
               "--server.port", str(self.port), "--server.headless", "true"]
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
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
        return tail(self.log.name, n)

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / 2**20


class Balancer:
    """``sh scripts/serve.sh --replicas N --port P``: N app processes behind nginx with sticky
    sessions, as a host would start them (hosted mode); ``pids`` are the app processes."""

    def __init__(self, replicas: int, *, env: dict | None = None, start_timeout: float = 180, root: Path = ROOT):
        self.replicas = replicas
        self.root = root
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="bench-serve-", suffix=".log", delete=False)
        self.env = {**interpreter_env(env), "ATTENTION_EXPLORER_HOSTED": "1"}
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.pids: list[int] = []
        self._runs_before: set[str] = set()

    def __enter__(self) -> "Balancer":
        import psutil

        self._runs_before = set(self._run_folders())
        self.proc = subprocess.Popen(["sh", "scripts/serve.sh", "--replicas", str(self.replicas), "--port",
                                      str(self.port)], cwd=self.root, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve.sh exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if _local_get(f"{self.url}/_stcore/health", 2).strip() == b"ok":
                    kids = psutil.Process(self.proc.pid).children(recursive=True)
                    self.pids = [k.pid for k in kids if "streamlit" in " ".join(k.cmdline())]
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        replicas = self.replica_log_tails()  # before serve.sh stops: it removes its run folder
        self.__exit__(None, None, None)
        raise RuntimeError(f"the balancer did not start in {self.start_timeout:.0f} s:\n{self.log_tail()}{replicas}")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(5)
        self.log.close()

    def log_tail(self, n: int = 40) -> str:
        """The last lines serve.sh printed (its own messages; a replica that did not start: its log)."""
        return tail(self.log.name, n)

    def _run_folders(self) -> list[str]:
        """serve.sh's run folders (``mktemp -d $TMPDIR/attention-explorer-serve.XXXXXX``)."""
        import glob

        return glob.glob(os.path.join(self.env.get("TMPDIR") or "/tmp", "attention-explorer-serve.*"))

    def replica_log_tails(self, n: int = 20) -> str:
        """The replicas' own logs (their tracebacks), from the run folder serve.sh made for this
        balancer (the one that appeared after it started), while serve.sh still runs."""
        parts = []
        for run in sorted(set(self._run_folders()) - self._runs_before):
            for log in sorted(Path(run).glob("replica-*.log")):
                parts.append(f"\n--- {log} ---\n{tail(log, n)}")
        return "".join(parts)

    def warm_up(self, run_timeout: float = 180.0, query: str = "") -> tuple[float, list[str]]:
        """Open the page (``?query``) once on every replica (directly: serve.sh puts replica i on
        port + i), as a host does before the class comes. Returns (seconds of the slowest, errors)."""
        async def once(port: int):
            async with Session(port, query=query, run_timeout=run_timeout) as s:
                return await s.rerun()

        async def all_of():
            return await asyncio.gather(*(once(self.port + i) for i in range(1, self.replicas + 1)))
        runs = asyncio.run(all_of())
        return max(r.seconds for r in runs), [e for r in runs for e in r.errors]


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

    def __init__(self, port: int, *, query: str = "", run_timeout: float = 60.0, sticky: bool = False):
        self.port, self.query, self.run_timeout, self.sticky = port, query, run_timeout, sticky
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

        headers = {}
        if self.sticky:  # through the balancer: first the page, whose answer sets the sticky cookie
            cookie = await asyncio.to_thread(_sticky_cookie, f"http://{HOST}:{self.port}/")
            if cookie:
                headers["Cookie"] = cookie
        self.ws = await connect(f"ws://{HOST}:{self.port}/_stcore/stream", subprotocols=["streamlit"],
                                origin=f"http://{HOST}:{self.port}", proxy=None, max_size=None,
                                open_timeout=self.run_timeout, additional_headers=headers)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()

    def seen(self, delta, element) -> None:
        """Every new element the server sends (``delta``: its Delta, whose ``fragment_id`` names the
        fragment it belongs to): nothing here; bench/poll.py reads the poll's words and count."""

    async def rerun(self, widgets: dict[str, str | float | bool] | None = None, *, fragment_id: str = "") -> RunResult:
        """Ask for a script run (with the text area set to ``widgets["text"]``, etc.) and read
        everything the server sends until the run finishes. A widget's value is what the browser
        sends: a string for text, select boxes and radios (the option as shown), a number for a
        slider, True for a button's click. ``fragment_id``: a fragment's own rerun (what the browser
        sends for a widget inside a fragment, or at the fragment's ``run_every``)."""
        from streamlit.proto.Alert_pb2 import Alert
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        back = BackMsg()
        cs = back.rerun_script
        cs.query_string = self.query
        cs.page_script_hash = self.page_hash
        if fragment_id:
            cs.fragment_id = fragment_id
        known = self.cached
        cs.cached_message_hashes.extend(sorted(known))  # the server may send references
        self.recent.append(set())
        for key, value in (widgets or {}).items():
            if key not in self.widget_ids:
                raise KeyError(f"the page has no widget with key {key!r} (yet)")
            w = cs.widget_states.widgets.add()
            w.id = self.widget_ids[key]
            if value is True:  # a button's click
                w.trigger_value = True
            elif isinstance(value, (int, float)):
                w.double_array_value.data.append(float(value))
            else:
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
                self.seen(msg.delta, el)
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


def warm_up(server: Server, run_timeout: float = 120.0, query: str = "") -> tuple[float, list[str]]:
    """What a host does before the workshop: open the page (``?query``) once (the server imports,
    loads the model and draws the page). Returns (seconds, errors)."""
    async def once():
        async with Session(server.port, query=query, run_timeout=run_timeout) as s:
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


# --- a workshop: thirty learners clicking freely -------------------------------------------------

CLICKS = ("layer", "head", "block", "view")


@dataclass
class Page:
    """What a learner can click on the default page of the model the server shows (labels as the
    browser sends them: the options as shown, in English)."""

    layers: int
    heads: int
    blocks: list[str]
    views: list[str]  # a "view" click's places: the navigation's entries as shown (key "nav")
    old_views: list[str] = field(default_factory=list)  # the same places on the old "view" radio
    clicks: tuple[str, ...] = CLICKS  # what a learner's click changes (--workshop-clicks)

    @classmethod
    def of(cls, name: str = "seed") -> "Page":
        import model
        from explorer import i18n, inputs, navigation

        info = model.load(name).info if name in model.available() else model.load("seed", random=True).info
        ids = navigation.pipeline(info, info.blocks[0])
        # the default stage, then every page: the places the old view radio offered, so that a
        # workshop clicks the same pages on this revision and on one before the one control
        # (--baseline), where the radio's first option was "One stage"
        places = [navigation.value("stage", inputs.DEFAULT_STAGE)] + [f"view:{v}" for v in inputs.VIEWS if v != "stage"]
        return cls(layers=info.n_layers, heads=info.n_heads,
                   blocks=[i18n.t(f"blocks.{b}", "en") for b in info.blocks],
                   views=[navigation.label(p, ids, "en") for p in places],
                   old_views=["One stage"] + [i18n.t(f"section_{v}", "en") for v in inputs.VIEWS if v != "stage"])


@dataclass
class WorkshopResult:
    learners: int
    seconds: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    first_load_s: list[float] = field(default_factory=list)
    burst: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    actions: int = 0
    cpu_s: float = 0.0  # server CPU seconds in the window (every server process)
    burst_cpu_s: float = 0.0
    rss_mb: list[float] = field(default_factory=list)
    # every action between a learner's first load and the burst, as ``latencies`` has them:
    # (time.monotonic() when it was sent, learner, kind, latency s); bench/soak.py windows them by time
    timeline: list[tuple[float, int, str, float]] = field(default_factory=list)


def _other(rng: random.Random, n: int, current: int) -> int:
    return rng.choice([i for i in range(n) if i != current]) if n > 1 else current


async def _learner(i: int, port: int, page: Page, out: WorkshopResult, *, stop_at: float, think, p_sentence: float,
                   rng: random.Random, run_timeout: float, arrive: float, sticky: bool, burst_at: asyncio.Event,
                   burst_out: list, ready: list[int], query: str = "") -> None:
    """One learner: opens the page, then every ``think`` seconds clicks (a layer, head, block or view
    change) or, with probability ``p_sentence``, types a new sentence; then joins the burst."""
    await asyncio.sleep(rng.uniform(0, arrive))
    state = {"layer": 0, "head": 0, "block": 0, "view": 0}
    try:
        async with Session(port, query=query, run_timeout=run_timeout, sticky=sticky) as s:
            first = await s.rerun()
            out.first_load_s.append(first.seconds)
            out.errors += [f"learner {i} first load: {e}" for e in first.errors]
            k = 0
            while True:
                await asyncio.sleep(rng.uniform(*think))
                if time.monotonic() >= stop_at:
                    break
                k += 1
                if rng.random() < p_sentence:
                    kind, widgets = "sentence", {"text": sentence(rng, f"w{i}n{k}")}
                else:
                    kind = rng.choice(page.clicks)
                    n = {"layer": page.layers, "head": page.heads, "block": len(page.blocks),
                         "view": len(page.views)}[kind]
                    state[kind] = _other(rng, n, state[kind])
                    value = state[kind]
                    widgets = {kind: page.blocks[value] if kind == "block" else float(value)}
                    if kind == "view":  # the one navigation control, or the radio before it (--baseline)
                        widgets = {"nav": page.views[value]} if "nav" in s.widget_ids else {"view": page.old_views[value]}
                    if kind in ("layer", "head") and n <= 1:
                        continue
                r = await s.rerun(widgets)
                out.latencies[kind].append(r.seconds)
                out.timeline.append((time.monotonic() - r.seconds, i, kind, r.seconds))
                out.actions += 1
                out.errors += [f"learner {i} {kind} {k}: {e}" for e in r.errors]
            ready[0] += 1
            await burst_at.wait()
            await asyncio.sleep(rng.uniform(0, 1.0))  # every learner sends a sentence within one second
            r = await s.rerun({"text": sentence(rng, f"w{i}burst")})
            burst_out.append(r.seconds)
            out.errors += [f"learner {i} burst: {e}" for e in r.errors]
    except Exception as e:  # a dropped connection is an error of the server under load
        out.errors.append(f"learner {i}: {type(e).__name__}: {e}")


def cpu_seconds(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


async def _workshop(port: int, pids: list[int], page: Page, learners: int, seconds: float, think, p_sentence: float,
                    seed: int, run_timeout: float, arrival: float, sticky: bool, hard_limit: float,
                    query: str = "") -> WorkshopResult:
    import psutil

    out = WorkshopResult(learners=learners, seconds=seconds)
    rng = random.Random(seed)
    burst_at = asyncio.Event()
    burst: list[float] = []
    ready = [0]
    t0 = time.monotonic()
    stop_at = t0 + arrival + seconds
    tasks = [asyncio.create_task(_learner(i, port, page, out, stop_at=stop_at, think=think, p_sentence=p_sentence,
                                          rng=random.Random(rng.random()), run_timeout=run_timeout,
                                          arrive=arrival, sticky=sticky, burst_at=burst_at, burst_out=burst,
                                          ready=ready, query=query))
             for i in range(learners)]
    await asyncio.sleep(arrival)  # the window starts once everyone is in
    cpu0 = cpu_seconds(pids)
    actions0 = out.actions
    while time.monotonic() < stop_at:
        out.rss_mb.append(sum(psutil.Process(p).memory_info().rss for p in pids if psutil.pid_exists(p)) / 2**20)
        await asyncio.sleep(min(1.0, max(0.0, stop_at - time.monotonic())))
    # wait for the last actions of the window to finish before the burst
    deadline = time.monotonic() + run_timeout
    while time.monotonic() < deadline and ready[0] + sum(1 for t in tasks if t.done()) < learners:
        await asyncio.sleep(0.2)
    out.cpu_s = cpu_seconds(pids) - cpu0
    out.actions -= actions0
    cpu1 = cpu_seconds(pids)
    burst_at.set()
    _done, pending = await asyncio.wait(tasks, timeout=max(1.0, hard_limit - (time.monotonic() - t0)))
    for t in pending:
        t.cancel()
        out.errors.append("a learner was still running at the bench's hard time limit")
    out.burst_cpu_s = cpu_seconds(pids) - cpu1
    out.burst = burst
    out.latencies = dict(out.latencies)
    return out


def workshop_test(port: int, pids: list[int], *, page: Page | None = None, learners: int = 30, seconds: float = 60.0,
                  think=(3.0, 6.0), p_sentence: float = 0.2, seed: int = 0, run_timeout: float = 120.0,
                  arrival: float = 10.0, sticky: bool = False, hard_limit: float = 1800.0,
                  query: str = "") -> WorkshopResult:
    """``learners`` arrive within ``arrival`` seconds and open the page ``?query`` (default: the
    default page, every stage; ``model=smollm2`` for another model's); then for
    ``seconds`` each acts every ``think`` seconds (uniform): a layer, head, block or view change, or
    with probability ``p_sentence`` a new sentence; then all send a new sentence within one second
    (the burst). ``pids``: the server processes whose CPU and memory are measured."""
    return asyncio.run(_workshop(port, pids, page or Page.of(), learners, seconds, tuple(think), p_sentence, seed,
                                 run_timeout, arrival, sticky, hard_limit, query))
