"""End to end: the Decoding view in a real `streamlit run` server and headless Debian chromium. The
figure plays (▶) and scrubs (its slider) in the browser: the step on screen changes while the page
sends nothing to the server (no rerun); the server-side step widget and the URL's `step` still work.

    pytest -m e2e tests/test_decoding_e2e.py -s
"""
from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
from test_e2e import ARTIFACTS, browser, no_exception, server  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
playwright = pytest.importorskip("playwright.sync_api")

# the timeline's state as plotly.js holds it: the slider's step and the new row's outline
STATE_JS = """() => {
    const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(d => d._fullLayout
        && d._fullLayout.sliders && d._fullLayout.sliders.length);
    if (!gd) return null;
    const row = (gd.layout.shapes || []).find(s => s.xref === 'x' && s.fillcolor === 'rgba(0,0,0,0)');
    return JSON.stringify({step: gd._fullLayout.sliders[0].active, row: row ? row.y0 : null,
                           frames: (gd._transitionData && gd._transitionData._frames || []).length});
}"""


def state(page) -> dict:
    s = page.evaluate(STATE_JS)
    return json.loads(s) if s else {}


def test_the_timeline_plays_and_scrubs_in_the_browser_without_a_rerun(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1440, "height": 1100})
    sent: list[int] = []  # every websocket message the page sends to the server (a rerun is one)
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(len(payload))))
    text = "attention is all you need"
    page.goto(f"{server}/?model=seed&view=decoding&lang=en&step=2&text={quote(text)}", wait_until="domcontentloaded")
    page.wait_for_function(f"() => ({STATE_JS})() !== null", timeout=180_000)
    time.sleep(1.5)  # let the first run finish drawing
    no_exception(page)
    first = state(page)
    assert first["step"] == 2 and first["row"] == 1.5 and first["frames"] == 26  # ?step=2: row 2 outlined
    assert "step=2" in page.url

    # ▶: the steps advance in the browser, and nothing goes to the server
    sent.clear()
    page.locator(".updatemenu-button").first.click()
    page.wait_for_function(f"() => JSON.parse(({STATE_JS})()).step >= 5", timeout=30_000)
    page.locator(".updatemenu-button").nth(1).click()  # ❚❚
    time.sleep(1.0)
    page.wait_for_function(f"() => {{ const s = JSON.parse(({STATE_JS})()); return s.row === s.step - 0.5; }}",
                           timeout=30_000)
    paused = state(page)
    assert paused["step"] >= 5 and paused["row"] == paused["step"] - 0.5  # the outline follows the step
    time.sleep(1.5)
    assert state(page)["step"] == paused["step"]  # paused
    assert sent == [], f"the page sent {len(sent)} message(s) to the server while playing"

    # the slider: a click near its end jumps there, in the browser
    rail = page.locator(".slider-rail-rect").first.bounding_box()
    page.mouse.click(rail["x"] + rail["width"] * 0.98, rail["y"] + rail["height"] / 2)
    # the step changes first; the outline follows when the frame's transition ends: wait for both
    page.wait_for_function(f"() => {{ const s = JSON.parse(({STATE_JS})()); "
                           f"return s.step >= 23 && s.row === s.step - 0.5; }}", timeout=30_000)
    end = state(page)
    assert end["row"] == end["step"] - 0.5
    assert sent == [], f"the page sent {len(sent)} message(s) to the server while scrubbing"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "decoding.png"))

    # the server-side step (for the link and the downloads): a rerun, and the URL follows
    handle = page.locator('input[type="range"][aria-label="Step (for the link, the table and the downloads)"]')
    handle.focus()
    handle.press("ArrowRight")
    page.wait_for_function("() => location.search.includes('step=3')", timeout=60_000)
    # the rerun redraws the figure: wait until it is there again, at step 3
    page.wait_for_function(f"() => {{ const s = ({STATE_JS})(); return s !== null && JSON.parse(s).step === 3; }}",
                           timeout=60_000)
    assert len(sent) >= 1
    no_exception(page)
    page.close()
