"""End to end (issue 26, item 8): the lessons on the analyses in a real `streamlit run` server and headless
Debian chromium: "what each layer predicts" (the logit lens), "heads with jobs" (previous-token and
induction heads) and "attention sinks: weight is not influence" (value norms), each predicted and
revealed, the figures that give the answer away drawn only after the reveal; and the explorer's
"beyond one head" view in Korean. The right answers come from the lessons' own live runs
(tests/test_analysis.py checks them against the model's tensors).

    pytest -m e2e tests/test_analysis_e2e.py -s
"""
from __future__ import annotations

import time

import pytest
from test_e2e import browser, no_exception, server, wait_for_plots  # noqa: F401 (fixtures)
from test_lessons_e2e import MAIN, open_lesson, question, reveal

from explorer import i18n
from explorer.lessons import catalog
from explorer.views import stages
from model import fetch

pytestmark = [pytest.mark.e2e, pytest.mark.weights, pytest.mark.timeout(900)]
playwright = pytest.importorskip("playwright.sync_api")

LESSONS = {"lens": "lesson.lens.title", "roles": "lesson.roles.title", "sinks": "lesson.sinks.title"}


def number(which: str) -> int:
    return next(x.number for x in catalog.LESSONS if x.title == LESSONS[which])


@pytest.fixture(scope="module", autouse=True)
def smollm2_here():
    if not fetch.is_fetched("smollm2"):
        pytest.skip("smollm2 is not fetched (python -m model.fetch smollm2)")


@pytest.mark.parametrize("which,lang", [("lens", "en"), ("roles", "ko"), ("sinks", "en")])
def test_a_lesson_on_the_analyses_is_predicted_and_revealed(server, browser, which, lang):  # noqa: F811
    n = number(which)
    q = question(n, lang)
    lesson = catalog.lesson(n)
    drawn = sum(len(p.stages) for p in lesson.parts)
    page = open_lesson(server, browser, n, lang, drawn)
    time.sleep(1.0)
    assert page.evaluate("() => document.querySelectorAll('.js-plotly-plot').length") == drawn  # nothing revealed
    page.locator(f'{MAIN} [data-testid="stRadioOption"]').nth(q.answer).click()
    time.sleep(0.5)
    reveal(page, lang)
    page.get_by_text(i18n.t("lessons.right", lang, answer=q.answer_text()), exact=True).wait_for(timeout=120_000)
    page.wait_for_function(f"() => decodeURIComponent(location.search).includes('answers={n}:{q.answer}')",
                           timeout=30_000)
    wait_for_plots(page, drawn + sum(len(p.reveal) for p in lesson.parts), timeout=180)
    page.get_by_text(q.why, exact=True).wait_for(timeout=30_000)
    no_exception(page)
    page.close()


def test_the_beyond_view_draws_every_analysis_in_korean(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(f"{server}/?model=smollm2&view=beyond&lang=ko&text=Harry%20Potter%20met%20Harry%20Potter",
              wait_until="domcontentloaded")
    ids = ["logit_lens", "rollout", "value_norms", "qk_map", "head_roles"]
    wait_for_plots(page, len(ids), timeout=300)
    for sid in ids:
        page.get_by_text(stages.stage_title(sid, "ko"), exact=True).first.wait_for(timeout=60_000)
    no_exception(page)
    page.close()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_rotary_bands_of_smollm2s_previous_token_head(server, browser, lang):  # noqa: F811
    """Issue 35: rope_bands by link on SmolLM2's previous-token head (L16 H0): the band × key row and
    the bands' pulls, in English and Korean."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(f"{server}/?model=smollm2&stage=rope_bands&lang={lang}&block=decoder.self_attn&layer=16&head=0"
              f"&query=5&key=4&text=The%20quick%20brown%20fox%20jumps%20over%20the%20lazy%20dog",
              wait_until="domcontentloaded")
    page.wait_for_selector('h3[id="rope_bands"]', timeout=300_000)
    wait_for_plots(page, 1, timeout=300)
    assert stages.stage_title("rope_bands", lang) in page.locator('h3[id="rope_bands"]').inner_text()
    kinds = page.evaluate("() => document.querySelector('.js-plotly-plot').data.map(t => t.type)")
    assert "heatmap" in kinds and "bar" in kinds
    bars = page.evaluate("() => document.querySelector('.js-plotly-plot')._fullData.find(t => t.type === 'bar').x.length")
    assert bars == 32  # SmolLM2: d_head 64, every dimension rotated
    no_exception(page)
    page.close()
