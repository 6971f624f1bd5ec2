"""The page works with no internet at all: every request the page makes goes to the server itself.

A real ``streamlit run explorer/app.py`` (hosted mode, as a workshop runs it) and headless
chromium (Debian's, never a downloaded one). Every request of the page, its workers and its
websocket is recorded; anything not for 127.0.0.1/localhost is recorded and refused, so a
CDN dependency fails this test even on a machine that is online.
"""
from __future__ import annotations

import shutil
from urllib.parse import urlsplit

import pytest

CHROMIUM = "/usr/bin/chromium"
LOCAL = {"127.0.0.1", "localhost"}

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about") or parts.hostname in LOCAL


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


def test_every_request_of_the_page_stays_on_the_server(browser):
    from bench.server import Server
    from explorer import i18n

    requests: list[str] = []
    refused: list[str] = []
    with Server(hosted=True) as srv:
        context = browser.new_context(service_workers="block")

        def gate(route):
            url = route.request.url
            if is_local(url):
                route.continue_()
            else:
                refused.append(url)
                route.abort()

        context.route("**/*", gate)
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("websocket", lambda ws: requests.append(ws.url))
        page.on("worker", lambda w: requests.append(w.url))
        page.goto(f"{srv.url}/?text=%EC%95%88%EB%85%95%20offline&view=all", wait_until="domcontentloaded")
        page.wait_for_selector(".js-plotly-plot", timeout=180_000)
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 10", timeout=180_000)
        # lazily loaded parts of the page: a table inside an expander, the LaTeX of a formula
        page.get_by_text(i18n.t("table", "en"), exact=True).first.click()
        page.wait_for_selector("[data-testid='stDataFrame']", timeout=60_000)
        page.wait_for_selector(".katex", timeout=60_000)
        page.wait_for_load_state("networkidle", timeout=60_000)
        context.close()
    assert requests, "the page made no requests at all?"
    outside = sorted({u for u in requests + refused if not is_local(u)})
    assert not outside, f"the page tried to reach the internet: {outside[:10]}"
    assert any(u.startswith("ws://127.0.0.1") for u in requests), "no websocket to the server"
    print(f"{len(requests)} requests, all to the server")
