"""Every edge a browser can reach, behind an allow-list: an ASGI middleware for explorer/app.py.

The access code (explorer/access.py) is checked inside the page script, so it guards only what the
script does. Streamlit's server also answers HTTP routes and websocket "back messages" of its own,
handled before and outside any script: a ``clear_cache`` message from any session empties every
cache of the process (every learner's model is loaded again), and ``/_stcore/upload_file`` stores
what it is sent in memory, though this app has no file uploader. This middleware sits in front of
all of it and, whenever the server is *guarded* (hosted, ``ATTENTION_EXPLORER_HOSTED=1``, or an
access code is set), lets through only what a page of this app needs:

HTTP (``ROUTES``): the page itself and its assets (GET/HEAD), ``/_stcore/health`` (probes),
``/_stcore/host-config`` (read by the page as it starts), ``/media/…`` (the downloads a page made,
named by unguessable ids). Every other ``/_stcore/…`` route (uploads, metrics, the agent API,
components, the script health check), the auth routes and every method but GET and HEAD answer
403 with one line of text, before Streamlit sees the request.

Websocket back messages (``ALLOWED_BACK``): ``rerun_script`` (every action on the page, and the
access form itself), ``stop_script``, ``app_heartbeat``, and the two backend operations a page of
this app starts (``deferred_file``: a download button's file made on click; ``dataframe_chunk``:
a table's rows). ``clear_cache``, ``set_run_on_save``, ``load_git_info``, ``file_urls_request``
(uploads), the ``debug_*`` messages and the skills-install operations are dropped and logged; the
connection stays open (a page of this app never sends them, so nothing a learner does is lost).

A laptop (not hosted, no code) gets Streamlit unchanged: the menu's "Clear cache" works there.
The table of every route and message, with what guards each and the test that proves it, is in
the README ("Every edge behind the gate"). Tests: tests/test_edges.py (a real server, a real
websocket client, HTTP requests from a session that never gave the code).
"""
from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("attention_explorer")

# back messages a page of this app sends (BackMsg's "type" oneof)
ALLOWED_BACK = frozenset({"rerun_script", "stop_script", "app_heartbeat", "backend_operation_request"})
# backend operations (BackendOperationRequest's "payload" oneof) a page of this app starts
ALLOWED_OPERATIONS = frozenset({"deferred_file", "dataframe_chunk"})

# (path prefix after the base URL, what it is); a path under "_stcore/" not listed here is refused
STCORE_ALLOWED = ("_stcore/health", "_stcore/host-config", "_stcore/stream")
REFUSED_PREFIXES = ("_stcore/", "component/", "auth/", "oauth2callback", "app/static/")
METHODS = ("GET", "HEAD")

REFUSAL = b"Not available on this server.\n"


def guarded(environ=None) -> bool:
    """Whether the allow-list applies: a hosted server, or any server that asks for an access code."""
    from explorer import access  # noqa: PLC0415

    env = os.environ if environ is None else environ
    hosted = (env.get("ATTENTION_EXPLORER_HOSTED") or "").strip().lower() in ("1", "true", "yes", "on")
    return hosted or bool(access.configured(env))


def _relative(path: str, root: str = "") -> str:
    """The path below the server's base URL, without leading slashes."""
    base = "/" + root.strip("/") if root.strip("/") else ""
    if base and (path == base or path.startswith(base + "/")):
        path = path[len(base):]
    return path.lstrip("/")


def http_allowed(method: str, path: str, root: str = "") -> bool:
    """Whether an HTTP request may reach Streamlit on a guarded server (``ROUTES`` in the README)."""
    if method not in METHODS:
        return False
    rel = _relative(path, root)
    if any(rel == p or rel.startswith(p + "/") for p in STCORE_ALLOWED):
        return True
    return not any(rel == p.rstrip("/") or rel.startswith(p) for p in REFUSED_PREFIXES)


def back_message_kind(data: bytes) -> str | None:
    """What a websocket frame asks for: the BackMsg type, with the operation for a backend
    operation (``backend_operation_request:deferred_file``); None when it is no BackMsg (Streamlit
    itself closes the connection on those)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: PLC0415  (Streamlit's own protobuf)

    msg = BackMsg()
    try:
        msg.ParseFromString(data)
    except Exception:
        return None
    kind = msg.WhichOneof("type")
    if kind == "backend_operation_request":
        return f"{kind}:{msg.backend_operation_request.WhichOneof('payload')}"
    return kind


def frame_bound() -> int:
    """The largest websocket frame a page may send: Streamlit's own bound on what it accepts from a
    page (``server.maxWidgetStateSize``, 1 MB in .streamlit/config.toml)."""
    from streamlit.runtime import runtime_util  # noqa: PLC0415

    return runtime_util.get_max_widget_state_size_bytes()


def bound_frames() -> bool:
    """Refuse a larger frame at its header, before it is read. Called while uvicorn imports the app.

    Streamlit 1.67 gives its websocket transport (uvicorn's ``ws_max_size``) the bound of the messages
    it *sends* (``server.maxMessageSize``, 50 MB here: a page's figures), and checks what a page sends
    against maxWidgetStateSize only once the whole frame is in memory. A 24 MB frame was read whole,
    then closed (1009): three of them left the server 47-59 MB larger. With the transport's bound set
    to what Streamlit accepts anyway, the frame is refused from its length (the same 1009) and its
    bytes are never kept. Nothing a page of this app sends comes near it (a full text box is ~26 kB).

    ``streamlit run`` makes uvicorn's Config first, then uvicorn imports this app from it
    (``Config.load``); each new connection reads ``config.ws_max_size``. The Config is the ``self`` of
    a frame that is importing us. Not found (AppTest, a plain import): False, nothing changed.
    tests/test_edges.py proves the bound on a real server (no whole-frame warning in its log)."""
    import uvicorn  # noqa: PLC0415  (Streamlit's own server)

    frame = sys._getframe(1)
    while frame is not None:
        config = frame.f_locals.get("self")
        if isinstance(config, uvicorn.Config):
            config.ws_max_size = min(config.ws_max_size, frame_bound())
            return True
        frame = frame.f_back
    return False


def back_allowed(kind: str | None) -> bool:
    if kind is None:
        return True  # not a BackMsg: Streamlit refuses it (closes the connection with 1002)
    base, _, operation = kind.partition(":")
    if base not in ALLOWED_BACK:
        return False
    return base != "backend_operation_request" or operation in ALLOWED_OPERATIONS


class Edges:
    """ASGI middleware: the allow-list above, in front of Streamlit's routes and websocket."""

    def __init__(self, app, environ=None):
        self.app = app
        self.environ = environ  # None: read os.environ at each request (the tests set it per server)

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket") or not guarded(self.environ):
            await self.app(scope, receive, send)
            return
        if kind == "http":
            if http_allowed(scope.get("method", "GET"), scope.get("path", ""), scope.get("root_path", "")):
                await self.app(scope, receive, send)
                return
            log.warning("edges: refused %s %s", scope.get("method"), _relative(scope.get("path", ""))[:80])
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(REFUSAL)).encode()),
                                    (b"cache-control", b"no-store")]})
            await send({"type": "http.response.body", "body": REFUSAL if scope.get("method") != "HEAD" else b""})
            return
        await self.app(scope, self._filtered(receive), send)

    @staticmethod
    def _filtered(receive):
        refused: set[str] = set()

        async def filtered():
            while True:
                message = await receive()
                if message.get("type") != "websocket.receive" or message.get("bytes") is None:
                    return message
                if len(message["bytes"]) > frame_bound():
                    return message  # not parsed here: Streamlit closes it (1009) before it parses it
                what = back_message_kind(message["bytes"])
                if back_allowed(what):
                    return message
                if what not in refused:  # one line per kind and connection: a flood does not flood the log
                    refused.add(what)
                    log.warning("edges: dropped a %s message from a page", what)

        return filtered
