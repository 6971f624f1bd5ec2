"""The page asks for the chart library at once (explorer/preload.py): the middleware on its own,
with a small ASGI app standing in for Streamlit's server. The real server and browser: tests/test_e2e.py
(one request for the chunk, so the frontend's own import found the module the page had started).
"""
from __future__ import annotations

import asyncio
import gzip

import pytest

from explorer import preload

PAGE = b"<!DOCTYPE html><html><head><title>Streamlit</title></head><body><div id=root></div></body></html>"


def asgi_app(body: bytes, ctype: bytes = b"text/html", status: int = 200, chunks: int = 1, seen: list | None = None):
    """Serves ``body`` (gzipped when the request accepts it, as Streamlit's middleware does), in
    ``chunks`` pieces; records the request headers in ``seen``."""
    async def app(scope, receive, send):
        headers = dict(scope.get("headers", []))
        if seen is not None:
            seen.append(headers)
        out, extra = body, []
        if b"gzip" in headers.get(b"accept-encoding", b""):
            out, extra = gzip.compress(body), [(b"content-encoding", b"gzip")]
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(out)).encode()), *extra]})
        step = max(1, -(-len(out) // chunks))
        pieces = [out[i:i + step] for i in range(0, len(out), step)] or [b""]
        for i, piece in enumerate(pieces):
            await send({"type": "http.response.body", "body": piece, "more_body": i < len(pieces) - 1})
    return app


def call(app, path: str = "/", method: str = "GET"):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(b"accept-encoding", b"gzip, deflate"), (b"host", b"x")]}
    asyncio.run(app(scope, receive, send))
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


def test_the_installed_streamlit_has_one_chart_chunk():
    names = preload.chunk_names()
    assert len(names) == 1 and names[0].startswith("PlotlyChart.") and names[0].endswith(".js")
    # the frontend imports exactly this file: its name is in the main bundle
    main = (preload.streamlit_static() / "index.html").read_text()
    bundle = main.split('src="./static/js/', 1)[1].split('"', 1)[0]
    assert names[0] in (preload.streamlit_static() / "static" / "js" / bundle).read_text(errors="replace")


@pytest.mark.parametrize("path", ["/", "/lessons", "/base/path/"])
@pytest.mark.parametrize("chunks", [1, 3])
def test_a_page_gets_the_import_and_a_right_length(path, chunks):
    seen: list = []
    mw = preload.PreloadCharts(asgi_app(PAGE, chunks=chunks, seen=seen), names=["PlotlyChart.abc.js"])
    status, headers, body = call(mw, path)
    assert status == 200
    assert body.count(b'import("./static/js/PlotlyChart.abc.js")') == 1
    assert body.index(b"PlotlyChart.abc.js") < body.index(b"</head>")
    assert int(headers[b"content-length"]) == len(body)
    assert b"content-encoding" not in headers  # the page was asked for uncompressed
    assert b"accept-encoding" not in seen[0]
    assert body.replace(preload.snippet(["PlotlyChart.abc.js"]), b"") == PAGE  # nothing else changed


@pytest.mark.parametrize("path", ["/static/js/index.js", "/_stcore/health", "/media/x.png", "/favicon.png",
                                  "/component/x/index.html"])
def test_files_and_streamlit_endpoints_pass_untouched(path):
    seen: list = []
    mw = preload.PreloadCharts(asgi_app(PAGE, seen=seen), names=["PlotlyChart.abc.js"])
    status, headers, body = call(mw, path)
    assert headers.get(b"content-encoding") == b"gzip" and gzip.decompress(body) == PAGE
    assert seen[0][b"accept-encoding"] == b"gzip, deflate"


def test_not_html_not_ok_or_not_found_pass_untouched():
    for app in (asgi_app(b'{"a": "</head>"}', ctype=b"application/json"), asgi_app(PAGE, status=404)):
        mw = preload.PreloadCharts(app, names=["PlotlyChart.abc.js"])
        status, headers, body = call(mw, "/x")
        assert body in (PAGE, b'{"a": "</head>"}')
        assert int(headers[b"content-length"]) == len(body)


def test_no_chunk_found_serves_the_page_unchanged(tmp_path):
    (tmp_path / "static" / "js").mkdir(parents=True)
    assert preload.chunk_names(tmp_path) == []
    (tmp_path / "static" / "js" / "PlotlyChart.a.js").write_text("")
    (tmp_path / "static" / "js" / "PlotlyChart.b.js").write_text("")
    assert preload.chunk_names(tmp_path) == []  # two builds: which one the frontend asks for is unknown
    mw = preload.PreloadCharts(asgi_app(PAGE), names=[])
    assert gzip.decompress(call(mw, "/")[2]) == PAGE  # passed through as Streamlit sent it


def test_head_requests_get_no_body():
    mw = preload.PreloadCharts(asgi_app(b""), names=["PlotlyChart.abc.js"])
    status, headers, body = call(mw, "/", method="HEAD")
    assert body == b""
