"""The Long text view in a browser (issue 34): the page's example button loads the shipped English and
Korean text (explorer/examples/long/ko_en.txt, 2,003 Gemma 3 tokens, four times the 512-token window) into the
text box of the test process's one streamlit server (tests/conftest.py); on Gemma 3 it shows the sliding
window's band on a local layer (grey beyond it: the mask hides those squares), and the summaries show the
global layers attending past the window where the local ones cannot."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer import i18n
from model import fetch

CHROMIUM = "/usr/bin/chromium"

pytestmark = [pytest.mark.e2e, pytest.mark.weights, pytest.mark.timeout(600)]

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} not found (Debian: apt-get install chromium)", allow_module_level=True)
if not fetch.is_fetched("gemma3"):
    pytest.skip("the gemma3 weights are not fetched: run `python -m model.fetch gemma3`", allow_module_level=True)
pytest.importorskip("playwright.sync_api")
from test_e2e import browser  # noqa: E402,F401 (the browser fixture of the e2e tests: one chromium per file)

# the overview's heatmap as plotly.js drew it (its calcdata: rows of numbers, a gap where the grid is NaN):
# per row of squares, the first and last column drawn, and the square size
ROWS_JS = """() => {
  const gd = document.querySelectorAll('.js-plotly-plot')[0];
  const z = gd.calcdata[0][0].z, out = [];
  for (let i = 0; i < z.length; i++) {
    let first = -1, last = -1;
    for (let j = 0; j < z[i].length; j++) {
      const v = z[i][j];
      if (typeof v === 'number' && Number.isFinite(v)) { if (first < 0) first = j; last = j; }
    }
    out.push([first, last]);
  }
  return {rows: out, dx: gd.data[0].dx, title: gd.layout.title.text};
}"""
# the summaries' first panel: every local and global layer's line (name, y values)
FIRST_JS = """() => {
  const gd = document.querySelectorAll('.js-plotly-plot')[2];
  const arr = v => Array.from(v && v._inputArray ? v._inputArray : (v || []));  // a typed array as sent, decoded
  return gd.data.filter(t => t.xaxis === 'x' || t.xaxis === undefined)
    .map(t => [t.legendgroup, arr(t.x), arr(t.y)]);
}"""


def test_the_band_on_a_long_real_text_on_gemma3(shared_server, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(f"{shared_server}/?view=long&model=gemma3&layer=0&head=1&lang=en", wait_until="domcontentloaded")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=180_000)
    page.get_by_role("button", name=i18n.t("long.example", "en")).click()  # the shipped text, about 2,000 tokens
    page.wait_for_function(
        "() => { const p = document.querySelectorAll('.js-plotly-plot');"
        " return p.length >= 3 && /whole pattern, [0-9]{3,}/.test((p[0].layout || {title: {}}).title.text || '')"
        " && !document.body.innerText.includes('Running the long text'); }", timeout=300_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    got = page.evaluate(ROWS_JS)
    assert "local layer, window 512" in got["title"], got["title"]
    T = int(re.search(r"× (\d+)", got["title"]).group(1))
    b = int(got["dx"])
    assert T > 3 * 512 and b == -(-T // 512)  # the example: about 2,000 tokens, 4 tokens a square
    # the band: in the last rows of squares the first square drawn is the window's far edge, not key 0
    first, last = got["rows"][-1]
    assert abs(first * b - (T - 512)) <= 2 * b and last == len(got["rows"]) - 1, (first, last, T, b)
    assert got["rows"][0] == [0, 0]  # the first row of squares: the causal edge
    # the summaries (once drawn for this text): past the window local layers put nothing on the first token,
    # global layers do
    page.wait_for_function("(T) => { const p = document.querySelectorAll('.js-plotly-plot');"
                           " return p.length >= 3 && ((p[2].layout || {}).title || {}).text.includes(`(${T} tokens)`); }",
                           arg=T, timeout=120_000)
    lines = page.evaluate(FIRST_JS)  # (x: the mean position of the queries averaged into each point)
    local = [y for g, xs, ys in lines if g == "True" for x, y in zip(xs, ys) if x > 530]
    glob = [y for g, xs, ys in lines if g == "False" for x, y in zip(xs, ys) if x > 530]
    assert local and glob and max(local) == 0 and sum(glob) / len(glob) > 0.01
    # the last layer (global on Gemma 3): full causal attention, no band: every row of squares from key 0 to
    # the diagonal
    layer = page.locator(f'section[data-testid="stSidebar"] input[type="range"][aria-label="{i18n.t("layer", "en")}"]')
    layer.focus()
    layer.press("End")
    page.wait_for_function("() => { const p = document.querySelectorAll('.js-plotly-plot');"
                           " return p.length >= 3 && /Layer 17, head 1 \\(global layer\\)/.test((p[0].layout || {title: {}}).title.text || '')"
                           " && !document.body.innerText.includes('Running the long text'); }", timeout=120_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    rows = page.evaluate(ROWS_JS)["rows"]
    assert rows == [[0, i] for i in range(len(rows))], [r for i, r in enumerate(rows) if r != [0, i]][:5]
