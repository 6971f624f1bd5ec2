"""Serving a class: a short workshop against a real hosted server (any error fails), and the real
balancer (scripts/serve.sh: two replicas behind nginx) with real browsers — every session sticks to
one replica, so its page, its websocket and a download made on the page all work. serve.sh's edges:
a code it generates (printed once, in no log, and it opens the page in a real browser while a wrong
one is counted in the replicas' shared store under the client's real address, told by a trusted
proxy), uploads refused and bodies bounded through the balancer, and a server that was asked for a
code and given none refuses to start (serve.sh and `streamlit run` alike)."""
from __future__ import annotations

import contextlib
import http.client
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench import server as sv

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]
HAVE_NGINX = bool(shutil.which("nginx") or Path("/usr/sbin/nginx").exists())
ROOT = Path(__file__).resolve().parent.parent
CODE_LINE = re.compile(r"^Access code \(made for this run, shown only here\): ([a-km-np-z2-9]{5}(?:-[a-km-np-z2-9]{5}){3})$")
PRESENTER_LINE = re.compile(r"^Presenter key \(opens Ask the class in presenter mode; made for this run, shown only "
                            r"here\): ([a-km-np-z2-9]{5}(?:-[a-km-np-z2-9]{5}){2})$")


def test_a_short_workshop_runs_without_a_single_error():
    """Four learners clicking every half second to a second (layer, head, block, view, new
    sentences), then a burst: every action answers, none with an error."""
    with sv.Server(hosted=True) as srv:
        _, errors = sv.warm_up(srv)
        assert errors == []
        r = sv.workshop_test(srv.port, [srv.proc.pid], learners=4, seconds=8, think=(0.5, 1.0), p_sentence=0.3,
                             arrival=1.0, run_timeout=60)
        assert srv.proc.poll() is None, srv.log_tail()
    assert r.errors == [], r.errors
    assert len(r.burst) == 4 and r.actions >= 12
    assert r.latencies.get("sentence") and sum(len(r.latencies.get(k, [])) for k in sv.CLICKS) >= 6
    assert r.cpu_s > 0


@pytest.mark.skipif(not HAVE_NGINX, reason="nginx is not installed (sh scripts/setup.sh --dev installs it)")
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found")
def test_the_balancer_keeps_each_browser_on_one_replica_downloads_included(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sv.Balancer(2) as bal:
        assert len(bal.pids) == 2
        _, errors = bal.warm_up()  # both replicas have drawn a page once, as before a class
        assert errors == []
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            cookies = set()
            for i in range(6):  # six browsers: with a non-sticky balancer, a download fails half the time
                ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
                page = ctx.new_page()
                page.goto(f"{bal.url}/?view=tokens&lang=en&text=hi%20{i}", wait_until="domcontentloaded")
                switch = page.get_by_text("Download (PNG · SVG · PDF · CSV)").first
                switch.wait_for(timeout=180_000)
                switch.click()
                csv_button = page.get_by_role("button", name="CSV", exact=True).first
                csv_button.wait_for(timeout=60_000)
                with page.expect_download(timeout=60_000) as dl:
                    csv_button.click()
                path = tmp_path / f"{i}-{dl.value.suggested_filename}"
                dl.value.save_as(path)
                assert f"hi-{i}" in path.name  # this session's own sentence
                assert path.read_text(encoding="utf-8-sig").startswith("position,token,shown as,id")
                cookies |= {c["value"] for c in ctx.cookies() if c["name"] == "ae_replica"}
                ctx.close()
            browser.close()
        assert len(cookies) == 6  # each browser got its own sticky cookie from the balancer
        assert all(p_alive(pid) for pid in bal.pids)


def p_alive(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


# --- serve.sh's edges: the generated code, uploads, bodies, a trusted proxy --------------------------

@contextlib.contextmanager
def serve(*args: str, env: dict | None = None, timeout: float = 300):
    """``sh scripts/serve.sh --replicas 1 --port P *args``, its stdout and stderr read line by line;
    yields (port, stdout lines, stderr lines, run folder) once the balancer answers its health check."""
    port = sv.free_port()
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHON": sys.executable,
                "PATH": "/usr/sbin:/usr/bin:/bin", **(env or {})}  # no `python` on the path but $PYTHON
    full_env.pop("ATTENTION_EXPLORER_ACCESS_CODE", None)
    full_env.pop("ATTENTION_EXPLORER_PRESENTER_KEY", None)
    proc = subprocess.Popen(["sh", "scripts/serve.sh", "--replicas", "1", "--port", str(port), *args], cwd=ROOT,
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    out: list[str] = []
    err: list[str] = []
    readers = [threading.Thread(target=lambda f=f, to=to: [to.append(line.rstrip("\n")) for line in f], daemon=True)
               for f, to in ((proc.stdout, out), (proc.stderr, err))]
    for r in readers:
        r.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"serve.sh exited ({proc.returncode}): {out} {err[-20:]}"
            assert time.monotonic() < deadline, f"serve.sh did not start: {out} {err[-20:]}"
            try:
                if sv._local_get(f"http://127.0.0.1:{port}/_stcore/health", 2).strip() == b"ok":
                    break
            except OSError:
                pass
            time.sleep(0.5)
        m = next(re.search(r"logs in (\S+);", line) for line in out if "logs in" in line)
        yield port, out, err, Path(m.group(1))
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        for r in readers:
            r.join(5)


async def wrong_codes(port: int, forwarded_for: str, *, seconds: float = 0.0, blast: int = 0) -> list[float]:
    """One page (a websocket through the balancer, from ``forwarded_for`` behind the trusted proxy)
    that submits wrong codes: for ``seconds``, each the moment the last is answered (returns the
    times of the answers), or ``blast`` of them at once without waiting (then returns one time: the
    seconds from the first of them until the end of the 8 s given the server to answer them)."""
    import asyncio

    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.asyncio.client import connect

    cookie = await asyncio.to_thread(sv._sticky_cookie, f"http://127.0.0.1:{port}/")
    async with connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"], proxy=None,
                       origin=f"http://127.0.0.1:{port}", max_size=None,
                       additional_headers={"Cookie": cookie, "X-Forwarded-For": forwarded_for}) as ws:
        ids: dict[str, str] = {}
        page_hash = ""

        async def send(typed: str | None) -> None:
            back = BackMsg()
            back.rerun_script.query_string, back.rerun_script.page_script_hash = "lang=en", page_hash
            if typed is not None:
                w = back.rerun_script.widget_states.widgets.add()
                w.id, w.string_value = ids["text_input"], typed
                w = back.rerun_script.widget_states.widgets.add()
                w.id, w.trigger_value = ids["button"], True
            await ws.send(back.SerializeToString())

        async def answered() -> None:
            nonlocal page_hash
            while True:
                m = ForwardMsg()
                m.ParseFromString(await ws.recv())
                kind = m.WhichOneof("type")
                if kind == "new_session":
                    page_hash = m.new_session.page_script_hash
                elif kind == "delta" and m.delta.WhichOneof("type") == "new_element":
                    el = m.delta.new_element
                    wid = getattr(getattr(el, el.WhichOneof("type")), "id", "")
                    if isinstance(wid, str) and wid.startswith("$$ID-"):
                        ids[el.WhichOneof("type")] = wid
                elif kind == "script_finished" and m.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    return

        await send(None)
        await answered()
        t_blast = time.monotonic()
        for i in range(blast):
            await send(f"blast-{i}")
        times: list[float] = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            await send(f"guess-{len(times)}")
            await answered()
            times.append(time.monotonic() - t0)
        if blast:
            await asyncio.sleep(8)
            return [time.monotonic() - t_blast]
        return times


def request(port: int, method: str, path: str, *, headers: dict | None = None, body: bytes | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


@pytest.mark.skipif(not HAVE_NGINX, reason="nginx is not installed (sh scripts/setup.sh --dev installs it)")
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found")
def test_serve_sh_generates_a_code_shown_once_that_opens_the_page_and_guards_its_edges(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    wrapper = tmp_path / "bin" / "python-of-this-test"  # every python serve.sh runs is $PYTHON
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >>{tmp_path}/python-calls\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    with serve("--access-code", "generate", "--trusted-proxy", "127.0.0.1",
               env={"PYTHON": str(wrapper)}) as (port, out, err, run):
        calls = (tmp_path / "python-calls").read_text()
        assert "-m streamlit run explorer/app.py" in calls and "check_required" in calls and "secrets" in calls
        codes = [m.group(1) for m in map(CODE_LINE.match, out) if m]
        assert len(codes) == 1, out  # printed once, on serve.sh's own output
        code = codes[0]
        assert len(code.replace("-", "")) == 20  # 20 characters from 32: 100 bits
        assert sum(code in line for line in out + err) == 1
        keys = [m.group(1) for m in map(PRESENTER_LINE.match, out) if m]  # the class polls' presenter key
        assert len(keys) == 1 and sum(keys[0] in line for line in out + err) == 1, out

        # uploads refused by the balancer, whatever the path and method; bodies bounded
        for method in ("PUT", "POST"):
            status, text = request(port, method, "/_stcore/upload_file/some-session/some-file",
                                   body=b"x" * 1000, headers={"Content-Type": "application/octet-stream"})
            assert status == 403 and "This app takes no file uploads." in text  # nginx, not the app
        status, _ = request(port, "POST", "/", body=b"x" * 200_000, headers={"Content-Type": "text/plain"})
        assert status == 413

        # a real browser behind a proxy of ours (the header its tunnel would add): a wrong code is
        # refused and counted under the client's real address, the generated code opens the page
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            ctx = browser.new_context(extra_http_headers={"X-Forwarded-For": "203.0.113.9"})
            page = ctx.new_page()
            page.goto(f"http://127.0.0.1:{port}/?lang=en", wait_until="domcontentloaded")
            field = page.locator("input[type=password]")
            field.wait_for(timeout=180_000)
            field.fill("not-the-code")
            field.press("Enter")
            page.get_by_text("That is not the code").wait_for(timeout=60_000)
            field.fill(code)
            field.press("Enter")
            page.get_by_role("heading", name="Attention Explorer").first.wait_for(timeout=180_000)
            browser.close()
        with sqlite3.connect(run / "state" / "limits.sqlite3") as db:
            rows = dict(db.execute("SELECT key, n FROM failures").fetchall())
        assert rows == {"addr:203.0.113.9": 1}, rows

        # nginx's per-client bounds see the client behind the trusted proxy: one that reloads too
        # fast is refused, while this machine itself (exempt) is not
        told = [request(port, "GET", "/", headers={"X-Forwarded-For": "198.51.100.4"})[0] for _ in range(30)]
        assert 429 in told and told[0] == 200
        assert all(request(port, "GET", "/")[0] == 200 for _ in range(30))

        # the pause bounds a page's guesses on the real server: answers after 1 s, 1 s, then 5 s
        # each (one script thread per session); codes sent without waiting are not compared one by one
        import asyncio

        times = asyncio.run(wrong_codes(port, "192.0.2.61", seconds=12.0))
        gaps = [b - a for a, b in zip([0.0] + times, times)]
        assert 3 <= len(times) <= 4, times
        assert all(g >= 0.95 for g in gaps[:2]) and all(g >= 4.9 for g in gaps[2:]), gaps
        # A hundred sent at once: one compared at a time, each after the last one's pause, the waiting
        # ones folded into one rerun. So no more are compared than the pauses let start within the
        # blast's time: the one-by-one page above started its comparisons at 0 and at each answer
        # (about 0, 1, 2, 7, 12 s). Quiet, the hundred reach the server within a second and two or
        # three are compared; beside two CPU burners they trickle in for longer and four were (a
        # bound of 3 failed there). Compared one by one on threads of their own (fastReruns on),
        # the count would be near 100.
        (blast_s,) = asyncio.run(wrong_codes(port, "192.0.2.62", blast=100))
        starts = [0.0] + times
        with sqlite3.connect(run / "state" / "limits.sqlite3") as db:
            rows = dict(db.execute("SELECT key, n FROM failures").fetchall())
        assert rows["addr:192.0.2.61"] == len(times), rows
        assert 1 <= rows["addr:192.0.2.62"] <= sum(s <= blast_s for s in starts), (rows, blast_s, starts)

        conf = (run / "nginx.conf").read_text()
        assert "set_real_ip_from 127.0.0.1;" in conf and "real_ip_recursive on;" in conf
        # the code is in no file of the run: serve.log, the replica's log, nginx's, the config
        for f in run.rglob("*"):
            if f.is_file() and not f.name.startswith("limits.sqlite3"):
                assert code not in f.read_text(errors="replace") and keys[0] not in f.read_text(errors="replace"), f


def test_serve_sh_asked_for_a_code_and_given_none_stops_at_once(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE": "1",
           "ATTENTION_EXPLORER_ACCESS_CODE": "  "}
    t0 = time.monotonic()
    r = subprocess.run(["sh", "scripts/serve.sh", "--port", str(sv.free_port())], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and time.monotonic() - t0 < 30
    assert "ATTENTION_EXPLORER_ACCESS_CODE is unset or empty" in r.stderr and "--access-code generate" in r.stderr
    assert r.stdout == ""  # nothing started

    # an interpreter without the app's packages: said at once, not hidden in a replica's log
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=120)
    env = {**os.environ, "PYTHON": str(tmp_path / "bare" / "bin" / "python")}
    env.pop("ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE", None)
    r = subprocess.run(["sh", "scripts/serve.sh", "--port", str(sv.free_port())], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cannot import streamlit" in r.stderr and r.stdout == ""
    r = subprocess.run(["sh", "scripts/serve.sh"], cwd=ROOT, env={**env, "PYTHON": str(tmp_path / "none")},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no interpreter" in r.stderr


def test_streamlit_run_asked_for_a_code_and_given_none_exits_with_the_message():
    env = {**os.environ, "ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("ATTENTION_EXPLORER_ACCESS_CODE", None)
    port = sv.free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "explorer/app.py", "--server.headless",
                             "true", "--server.port", str(port), "--server.address", "127.0.0.1"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"the server kept running without the code it was asked for: {out[-500:]} {err[-500:]}")
    assert proc.returncode != 0
    assert time.monotonic() - t0 < 60
    assert "ATTENTION_EXPLORER_ACCESS_CODE is unset or empty" in err, (out[-500:], err[-1500:])
