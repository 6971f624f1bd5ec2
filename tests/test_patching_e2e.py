"""End to end: activation patching in a real `streamlit run` server and headless chromium. The button
runs the experiment with a progress bar; Cancel stops it mid-way (a click reruns the page, which stops
the running script at its next progress update) and nothing is kept; run again, the map is drawn.

    pytest -m e2e tests/test_patching_e2e.py -s
"""
from __future__ import annotations

import urllib.parse

import pytest
from test_e2e import browser, no_exception, server  # noqa: F401 (fixtures)

from explorer import i18n
from model import fetch

pytestmark = [pytest.mark.e2e, pytest.mark.weights, pytest.mark.timeout(900)]
playwright = pytest.importorskip("playwright.sync_api")

# about 20 tokens each: 30 layers × 20 positions = 600 patched forwards, long enough to cancel
CLEAN = "When Mary and John went to the store on a sunny morning, John gave a drink to"
CORRUPTED = "When Mary and John went to the store on a sunny morning, Mary gave a drink to"


def test_patching_runs_with_progress_cancels_and_runs_again(server, browser):  # noqa: F811
    if not fetch.is_fetched("smollm2"):
        pytest.skip("smollm2 not fetched")
    q = urllib.parse.urlencode({"model": "smollm2", "view": "compare", "text": CLEAN, "compare": CORRUPTED})
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(f"{server}/?{q}", wait_until="domcontentloaded")
    run = page.get_by_role("button", name="Run patching")
    run.wait_for(timeout=180_000)
    run.click()
    page.get_by_text("Patching: ", exact=False).first.wait_for(timeout=120_000)  # the progress bar's text
    page.get_by_role("button", name=i18n.t("patching.cancel")).click()
    page.get_by_text(i18n.t("patching.cancelled"), exact=True).wait_for(timeout=120_000)
    assert page.get_by_text(i18n.t("patching.not_run"), exact=True).count() >= 1  # nothing was kept
    no_exception(page)
    page.get_by_role("button", name="Run patching").click()
    page.get_by_text("patched forward passes", exact=False).first.wait_for(timeout=600_000)  # the map's subtitle
    no_exception(page)
    page.close()
