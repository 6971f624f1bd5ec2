"""The page's chart library fetched while the server works: an ASGI middleware for explorer/app.py.

Streamlit's frontend loads the code of each kind of element the first time a script sends one. Its
plotly chart (the ``PlotlyChart`` chunk: plotly.js, about 4.7 MB) is the largest, and it was the
last thing on the first figure's path: the browser asked for it only once the first run's chart
arrived, then spent about a second fetching and evaluating it (issue 23, `python -m bench --only
floor`; the timeline in the README). Every page of this app draws plotly figures, so the page asks
for that chunk as soon as it has started, while the server is still running the first script:

    <script type="module">import("./static/js/PlotlyChart.<hash>.js")</script>

is added to the HTML page Streamlit serves (``index.html``, at ``/`` and every page's path). The
frontend's own lazy ``import()`` of the same URL then finds the module already evaluated (a module
is evaluated once per URL). The chunk's name is read from Streamlit's installed static folder at
start; if it is not found (another layout), the page is served unchanged.

Only HTML pages are touched: static files, ``/_stcore`` (health, websocket) and media pass through
byte for byte. The page is served uncompressed (about 20 kB), so that the insertion never has to
undo Streamlit's gzip.
"""
from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("attention_explorer")

CHUNKS = ("PlotlyChart",)  # the element kinds every page of this app draws


def streamlit_static() -> Path:
    import streamlit

    return Path(streamlit.__file__).resolve().parent / "static"


def chunk_names(static: Path | None = None, kinds: tuple[str, ...] = CHUNKS) -> list[str]:
    """The hashed file names of these element kinds' chunks (``PlotlyChart.D9Z0_fxz.js``)."""
    folder = (static or streamlit_static()) / "static" / "js"
    out = []
    for kind in kinds:
        found = sorted(p.name for p in folder.glob(f"{kind}.*.js") if p.name.count(".") == 2)
        if len(found) == 1:  # exactly one build of it: otherwise we cannot know which one the frontend asks for
            out.append(found[0])
    return out


def snippet(names: list[str]) -> bytes:
    """What goes before ``</head>``: start each chunk's import once the page's own module has run."""
    if not names:
        return b""
    imports = "".join(f'import("./static/js/{n}");' for n in names)
    return (f'<script type="module" crossorigin>{imports}</script>').encode()


def _is_page(scope) -> bool:
    if scope.get("type") != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    path = scope.get("path", "")
    last = path.rsplit("/", 1)[-1]
    return "/static/" not in path and "/_stcore" not in path and "/media/" not in path \
        and "/component/" not in path and "." not in last  # a page's path, not a file


class PreloadCharts:
    """ASGI middleware: insert ``snippet`` before ``</head>`` of the HTML pages the server sends."""

    def __init__(self, app, names: list[str] | None = None):
        self.app = app
        try:
            self.insert = snippet(chunk_names() if names is None else names)
        except OSError:
            self.insert = b""
        if not self.insert:
            log.info("preload: no chart chunk found; pages are served unchanged")

    async def __call__(self, scope, receive, send):
        if not self.insert or not _is_page(scope):
            await self.app(scope, receive, send)
            return
        # ask the inner app (Streamlit's gzip) for an uncompressed page
        scope = dict(scope, headers=[(k, v) for k, v in scope.get("headers", []) if k.lower() != b"accept-encoding"])
        start: dict | None = None
        body = bytearray()

        async def capture(message):
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            headers = [(k, v) for k, v in start.get("headers", [])]
            ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
            encoded = any(k.lower() == b"content-encoding" for k, _ in headers)
            out = bytes(body)
            if start.get("status") == 200 and ctype.startswith(b"text/html") and not encoded and b"</head>" in out:
                out = out.replace(b"</head>", self.insert + b"</head>", 1)
                headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(out)).encode()))
            await send(dict(start, headers=headers))
            await send({"type": "http.response.body", "body": out if scope["method"] == "GET" else b"",
                        "more_body": False})

        await self.app(scope, receive, capture)
