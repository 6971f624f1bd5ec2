"""At phone width (390 px), in headless Debian chromium against a real `streamlit run`: no two numbers
printed in heatmap cells overlap (plotly fits them to their cells; those that would be drawn smaller
than style.CELL_TEXT_MIN_PX are hidden), none that is shown is smaller than that, and the mask
panels' titles do not run into each other. Measured on the bounding boxes the browser gives.

    pytest -m e2e tests/test_e2e_phone.py -s
"""
from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
from test_e2e import ARTIFACTS, browser, no_exception, server, settle, wait_for_plots  # noqa: F401 (fixtures)

from explorer.views import style

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

# every heatmap's cell texts and every panel title, with their boxes, per figure
MEASURE_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(plot => {
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const shown = el => getComputedStyle(el).display !== 'none' && el.getBoundingClientRect().width > 0;
  const cells = Array.from(plot.querySelectorAll('g.heatmap-label text'));
  return {
    title: ((plot.layout && plot.layout.title && plot.layout.title.text) || '').replace(/<[^>]*>/g, ''),
    cells: cells.length,
    shown: cells.filter(shown).map(el => ({box: box(el), size: parseFloat(getComputedStyle(el).fontSize),
                                          text: el.textContent})),
    titles: Array.from(plot.querySelectorAll('g.annotation-text-g text.annotation-text'))
      .filter(shown).map(el => ({box: box(el), text: el.textContent})),
  };
})"""


def overlaps(items: list[dict], tol: float = 0.5) -> list[tuple[str, str]]:
    out = []
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            (l1, t1, r1, b1), (l2, t2, r2, b2) = a["box"], b["box"]
            if min(r1, r2) - max(l1, l2) > tol and min(b1, b2) - max(t1, t2) > tol:
                out.append((a["text"], b["text"]))
    return out


def measure(page, url: str, n_plots: int) -> list[dict]:
    page.goto(url, wait_until="domcontentloaded")
    wait_for_plots(page, n_plots)
    settle(page)
    no_exception(page)
    time.sleep(1.0)  # plotly finishes its text layout after the data arrives
    return page.evaluate(MEASURE_JS)


PAGES = [  # (what, query, plots at least)
    ("scores, decoder (causal)", "view=scores&block=decoder.self_attn&text=" + quote("hello world\nhi"), 5),
    ("scores, a long sentence", "view=scores&text=" + quote("attention is all you need"), 5),
    ("positions", "view=position&text=" + quote("hello"), 4),
    ("the block", "view=block&block=decoder.self_attn&text=" + quote("hello"), 4),
]


def test_phone_width_cell_numbers_and_panel_titles(server, browser):  # noqa: F811
    report, masks = {}, []
    for width in (390, 1440):
        page = browser.new_page(viewport={"width": width, "height": 844 if width == 390 else 1000})
        for what, query, n in PAGES:
            plots = measure(page, f"{server}/?model=seed&lang=en&{query}", n)
            shown = sum(len(p["shown"]) for p in plots)
            report[f"{width}px {what}"] = {"cells with text": sum(p["cells"] for p in plots), "shown": shown,
                                           "smallest shown": min((c["size"] for p in plots for c in p["shown"]),
                                                                 default=None)}
            for p in plots:
                assert overlaps(p["shown"]) == [], (width, what, p["title"], overlaps(p["shown"])[:3])
                assert all(c["size"] >= style.CELL_TEXT_MIN_PX for c in p["shown"]), (width, what, p["title"])
                if p["title"].startswith("Masks"):  # three panels side by side: their titles stay apart
                    assert len(p["titles"]) == 3 and overlaps(p["titles"]) == [], (width, p["titles"])
                    masks.append(width)
                    right = max(t["box"][2] for t in p["titles"])
                    assert right <= width, (width, "a panel title runs off the screen")
            if width == 390 and what.startswith("scores, decoder"):
                page.evaluate("() => document.getElementById('mask').scrollIntoView({block: 'start'})")
                time.sleep(1.0)
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "phone-390-mask.png"))
        page.close()
    print("\nphone width:", json.dumps(report, indent=1))
    assert masks == [390, 1440]  # the three-panel mask figure was measured at both widths
    # on a desktop the numbers are there; on a phone, a 5-token mask still shows its ✓ and ×
    assert report["1440px scores, decoder (causal)"]["shown"] > 100
    assert report["390px scores, decoder (causal)"]["shown"] > 0
    (ARTIFACTS / "phone_width.json").write_text(json.dumps(report, indent=1))
