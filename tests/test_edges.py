"""Every edge behind the gate (explorer/edges.py): Streamlit's own routes and websocket messages, tried
from a session that never gave the access code, against a real server and a real websocket client.

- the allow-list itself, for every route and every back message Streamlit 1.67 knows (a message type
  added by a newer Streamlit fails ``test_every_back_message_is_decided`` until it is decided here and
  in the README's table);
- a ``clear_cache`` message from another session leaves a guarded server's cache alone, and empties it
  on an unguarded one (the control: the same steps, the guard off, the cache loads again);
- the real app with an access code: refused routes answer 403 before Streamlit sees them, 40 uploads of
  1 MB store nothing, the session that never gave the code gets the code's form and nothing computed,
  dropped messages leave its connection working, and a 24 MB message is refused without the server's
  memory growing by more than 50 MB.
"""
from __future__ import annotations

import asyncio
import http.client
import os
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from explorer import edges
from helpers import streamlit_process

websockets = pytest.importorskip("websockets")
BackMsg = pytest.importorskip("streamlit.proto.BackMsg_pb2").BackMsg
ForwardMsg = pytest.importorskip("streamlit.proto.ForwardMsg_pb2").ForwardMsg

CODE = "edge-test-code-7"


# --- the allow-list ------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path,allowed", [
    ("GET", "/", True), ("HEAD", "/", True), ("GET", "/lessons", True),
    ("GET", "/static/js/index.abc.js", True), ("GET", "/_stcore/health", True),
    ("GET", "/_stcore/host-config", True), ("GET", "/_stcore/stream", True),
    ("GET", "/media/0123abcd.csv", True),
    ("PUT", "/_stcore/upload_file/s/f", False), ("GET", "/_stcore/upload_file/s/f", False),
    ("DELETE", "/_stcore/upload_file/s/f", False), ("OPTIONS", "/_stcore/upload_file/s/f", False),
    ("GET", "/_stcore/metrics", False), ("GET", "/_stcore/script-health-check", False),
    ("GET", "/_stcore/agent/openapi.json", False), ("POST", "/_stcore/agent/interact", False),
    ("POST", "/_stcore/agent/mcp", False), ("GET", "/_stcore/bidi-components/x/y.js", False),
    ("GET", "/_stcore/anything-new", False), ("GET", "/component/x/index.html", False),
    ("GET", "/auth/login", False), ("GET", "/auth/logout", False), ("GET", "/oauth2callback", False),
    ("GET", "/app/static/x.png", False), ("POST", "/", False), ("PUT", "/media/x.csv", False),
    ("GET", "//_stcore/metrics", False),
])
def test_routes(method, path, allowed):
    assert edges.http_allowed(method, path) is allowed


def test_routes_under_a_base_url():
    assert edges.http_allowed("PUT", "/demo/_stcore/upload_file/s/f", root="/demo") is False
    assert edges.http_allowed("GET", "/demo/_stcore/health", root="/demo") is True
    assert edges.http_allowed("GET", "/demo/lessons", root="demo") is True


def _back(kind: str, operation: str | None = None) -> bytes:
    msg = BackMsg()
    if kind == "backend_operation_request":
        req = msg.backend_operation_request
        req.request_id = "r1"
        getattr(req, operation).SetInParent()
    else:
        field = BackMsg.DESCRIPTOR.fields_by_name[kind]
        if field.message_type is None:
            setattr(msg, kind, True)
        else:
            getattr(msg, kind).SetInParent()
    return msg.SerializeToString()


DECIDED = {
    "rerun_script": True, "stop_script": True, "app_heartbeat": True,
    "clear_cache": False, "set_run_on_save": False, "load_git_info": False, "file_urls_request": False,
    "debug_disconnect_websocket": False, "debug_shutdown_runtime": False,
}
OPERATIONS = {"deferred_file": True, "dataframe_chunk": True, "install_skills": False,
              "dismiss_skills_nudge": False}


def test_every_back_message_is_decided():
    kinds = [f.name for f in BackMsg.DESCRIPTOR.oneofs_by_name["type"].fields]
    assert set(kinds) == set(DECIDED) | {"backend_operation_request"}, \
        "Streamlit's BackMsg changed: decide the new types in explorer/edges.py, this test and the README"
    ops = [f.name for f in BackMsg().backend_operation_request.DESCRIPTOR.oneofs_by_name["payload"].fields]
    assert set(ops) == set(OPERATIONS)
    for kind, allowed in DECIDED.items():
        assert edges.back_allowed(edges.back_message_kind(_back(kind))) is allowed, kind
    for op, allowed in OPERATIONS.items():
        got = edges.back_message_kind(_back("backend_operation_request", op))
        assert got == f"backend_operation_request:{op}"
        assert edges.back_allowed(got) is allowed, op
    assert edges.back_allowed(edges.back_message_kind(b"\xff\xfe not a protobuf")) is True  # Streamlit closes it


def test_guarded_when_hosted_or_with_a_code():
    assert edges.guarded({}) is False
    assert edges.guarded({"ATTENTION_EXPLORER_ACCESS_CODE": "  "}) is False
    assert edges.guarded({"ATTENTION_EXPLORER_ACCESS_CODE": "x"}) is True
    assert edges.guarded({"ATTENTION_EXPLORER_HOSTED": "1"}) is True
    assert edges.guarded({"ATTENTION_EXPLORER_HOSTED": "0"}) is False


# --- a real server and a real websocket client -------------------------------------------------------

@contextmanager
def server(script: str, log: Path, env: dict):
    """``streamlit run SCRIPT`` (tests/helpers.py: streamlit_process) on one thread; yields (port, pid)."""
    with streamlit_process(log, {"OMP_NUM_THREADS": "1", **env}, script=script) as (url, proc):
        yield int(url.rsplit(":", 1)[1]), proc.pid


def rerun_msg(**widgets) -> BackMsg:
    msg = BackMsg()
    msg.rerun_script.query_string = ""
    for wid, value in widgets.items():
        w = msg.rerun_script.widget_states.widgets.add()
        w.id = wid
        w.string_value = value
    return msg


async def _session(port: int, phases: list[tuple[list[bytes], str]], wait: float):
    """Open a page's websocket; for each phase, send its messages and read ForwardMsgs until one of
    its ``until`` type (or ``wait`` seconds pass, or the connection closes). Returns (the messages'
    types, the new elements' types, the close code)."""
    types, elements, code = [], [], None
    async with websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],
                                  origin=f"http://127.0.0.1:{port}", max_size=2**28) as ws:
        try:
            for messages, until in phases:
                for data in messages:
                    await ws.send(data)
                deadline = time.monotonic() + wait
                try:
                    while time.monotonic() < deadline:
                        raw = await asyncio.wait_for(ws.recv(), timeout=max(0.1, deadline - time.monotonic()))
                        fwd = ForwardMsg()
                        fwd.ParseFromString(raw)
                        kind = fwd.WhichOneof("type")
                        types.append(kind)
                        if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                            elements.append(fwd.delta.new_element.WhichOneof("type"))
                        if kind == until:
                            break
                except asyncio.TimeoutError:
                    pass  # nothing more came: the caller looks at what did
        except websockets.ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd is not None else None
    return types, elements, code


def _bytes(messages):
    return [m if isinstance(m, bytes) else m.SerializeToString() for m in messages]


def session(port, messages, *, until: str = "script_finished", wait: float = 60.0, then=None):
    """``messages`` until ``until``; then, on the same connection, each (messages, until) of ``then``."""
    phases = [(_bytes(messages), until)] + [(_bytes(m), u) for m, u in (then or [])]
    return asyncio.run(_session(port, phases, wait))


def _loads(counter: Path) -> int:
    return int(counter.read_text())


@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "control-unguarded"])
def test_clear_cache_from_another_session(tmp_path, guard):
    counter = tmp_path / "loads"
    env = {"EDGES_COUNTER": str(counter), "ATTENTION_EXPLORER_ACCESS_CODE": CODE if guard else "",
           "ATTENTION_EXPLORER_HOSTED": ""}
    with server("tests/data/edges/app.py", tmp_path / "server.log", env) as (port, _pid):
        session(port, [rerun_msg()])
        assert _loads(counter) == 1
        session(port, [_back("clear_cache")], until="never", wait=2.0)  # another page, the menu's message
        session(port, [rerun_msg()])
        log = (tmp_path / "server.log").read_text()
    if guard:
        assert _loads(counter) == 1, "a page's clear_cache emptied a guarded server's cache"
        assert "dropped a clear_cache message" in log
    else:
        assert _loads(counter) == 2  # the control: without the guard, the same message clears the cache


@pytest.fixture(scope="module")
def guarded_app(tmp_path_factory):
    folder = tmp_path_factory.mktemp("edges-app")
    with server("explorer/app.py", folder / "server.log", {"ATTENTION_EXPLORER_ACCESS_CODE": CODE}) as (port, pid):
        yield port, pid, folder / "server.log"


def _status(url: str, method: str = "GET", data: bytes | None = None) -> int:
    """The status a request gets. A refusal may come before the body is read (the server then closes
    the connection while the body is still being sent): the answer is read all the same."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest(method, parts.path or "/")
        conn.putheader("Content-Length", str(len(data or b"")))
        conn.endheaders()
        try:
            if data:
                conn.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.slow
def test_routes_of_the_real_app(guarded_app):
    port, _pid, log = guarded_app
    base = f"http://127.0.0.1:{port}"
    for path in ("/", "/lessons", "/_stcore/health", "/_stcore/host-config"):
        assert _status(base + path) == 200, path
    for method, path in [("GET", "/_stcore/metrics"), ("GET", "/_stcore/agent/openapi.json"),
                         ("POST", "/_stcore/agent/interact"), ("GET", "/_stcore/script-health-check"),
                         ("GET", "/component/x/index.html"), ("GET", "/auth/login"), ("POST", "/")]:
        assert _status(base + path, method, b"{}" if method == "POST" else None) == 403, (method, path)
    assert "edges: refused GET _stcore/metrics" in log.read_text()


def _upload(port: int, session_id: str, xsrf: str, i: int, part: bytes) -> int:
    """A file upload as a page's uploader makes it: multipart, the XSRF cookie and header."""
    boundary = "edgesboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f{i}.bin\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + part + f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("PUT", f"/_stcore/upload_file/{session_id}/file-{i}")
        for k, v in {"Content-Type": f"multipart/form-data; boundary={boundary}", "Content-Length": str(len(body)),
                     "X-Xsrftoken": xsrf, "Cookie": f"_streamlit_xsrf={xsrf}",
                     "Origin": f"http://127.0.0.1:{port}"}.items():
            conn.putheader(k, v)
        conn.endheaders()
        try:
            conn.send(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was read
        return conn.getresponse().status
    finally:
        conn.close()


async def _uploads_from_a_live_session(port: int, n: int) -> list[int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=30) as r:  # as the page does
        cookies = r.headers.get_all("Set-Cookie") or []
    xsrf = next(c.split(";")[0].split("=", 1)[1] for c in cookies if c.startswith("_streamlit_xsrf="))
    async with websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],
                                  origin=f"http://127.0.0.1:{port}", max_size=2**28) as ws:
        await ws.send(rerun_msg().SerializeToString())
        session_id = None
        while session_id is None:
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=60))
            if fwd.WhichOneof("type") == "new_session":
                session_id = fwd.new_session.initialize.session_id
        part = os.urandom(1_000_000)  # within server.maxUploadSize (1 MB): what the server would keep
        return [await asyncio.to_thread(_upload, port, session_id, xsrf, i, part) for i in range(n)]


@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "control-unguarded"])
def test_uploads_store_nothing(tmp_path, guard):
    env = {"EDGES_COUNTER": str(tmp_path / "loads"), "ATTENTION_EXPLORER_ACCESS_CODE": CODE if guard else "",
           "ATTENTION_EXPLORER_HOSTED": ""}
    with server("tests/data/edges/app.py", tmp_path / "server.log", env) as (port, pid):
        proc = psutil.Process(pid)
        before = proc.memory_info().rss
        codes = asyncio.run(_uploads_from_a_live_session(port, 40))
        grown = (proc.memory_info().rss - before) / 2**20
    if guard:
        assert set(codes) == {403}, codes
        assert grown < 20, f"40 refused uploads of 1 MB grew the server by {grown:.1f} MB"
    else:  # the control: Streamlit alone keeps every part in memory
        assert set(codes) == {204}, codes
        assert grown > 30, grown


@pytest.mark.slow
def test_a_page_without_the_code_gets_the_form_and_nothing_else(guarded_app):
    port, _pid, log = guarded_app
    refused = [_back(k) for k, ok in DECIDED.items() if not ok and k != "debug_disconnect_websocket"]
    refused += [_back("backend_operation_request", op) for op, ok in OPERATIONS.items() if not ok]
    # the first run; then every refused message and a heartbeat: its answer shows the connection still works
    types, elements, code = session(port, [rerun_msg()], then=[(refused + [_back("app_heartbeat")], "heartbeat_ack")])
    assert code is None and "heartbeat_ack" in types, types
    assert "text_input" in elements  # the access code's field
    assert "plotly_chart" not in elements and "arrow_data_frame" not in elements
    text = log.read_text()
    for kind in ("clear_cache", "set_run_on_save", "load_git_info", "file_urls_request",
                 "debug_shutdown_runtime", "backend_operation_request:install_skills"):
        assert f"dropped a {kind} message" in text, kind
    assert _status(f"http://127.0.0.1:{port}/_stcore/health") == 200  # debug_shutdown_runtime did nothing


def _quiet_rss(proc: psutil.Process, timeout: float = 180.0) -> int:
    """The server's RSS once its own start-up work is over. The warm-up (explorer/warm.py) loads the
    default model in a background thread, and on a busy machine it can still be loading when the test
    begins: beside two CPU burners, 69.6 MB "grown" that was the model arriving, not the messages. Quiet
    means a whole second in which the server used under 0.05 CPU-s and its RSS moved under 1 MB."""
    deadline = time.monotonic() + timeout
    cpu, rss = sum(proc.cpu_times()[:2]), proc.memory_info().rss
    while time.monotonic() < deadline:
        time.sleep(1.0)
        cpu_now, rss_now = sum(proc.cpu_times()[:2]), proc.memory_info().rss
        if cpu_now - cpu < 0.05 and abs(rss_now - rss) < 2**20:
            return rss_now
        cpu, rss = cpu_now, rss_now
    raise AssertionError(f"the server did not go quiet within {timeout} s")


@pytest.mark.slow
def test_a_24_mb_message_is_refused_without_the_memory(guarded_app):
    port, pid, log = guarded_app
    session(port, [rerun_msg()])
    proc = psutil.Process(pid)
    before = _quiet_rss(proc)
    big = rerun_msg(text="a" * 24_000_000)
    codes = [session(port, [big], wait=30)[2] for _ in range(3)]
    grown = (proc.memory_info().rss - before) / 2**20
    print(f"three 24 MB messages: the server grew {grown:.1f} MB")
    assert codes == [1009, 1009, 1009], codes
    assert grown <= 50, f"three 24 MB messages grew the server by {grown:.1f} MB"
    # refused from the frame's length (explorer/edges.py: bound_frames), not read whole first: Streamlit's
    # own check, which runs on a whole frame, never saw one
    assert "exceeds the limit" not in log.read_text()
    types, _, _ = session(port, [rerun_msg()])  # the server still serves pages
    assert "script_finished" in types
