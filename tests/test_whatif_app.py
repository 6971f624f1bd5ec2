"""What if, two sentences and click to drill in the app (issue 15): Streamlit's AppTest for the wiring
(URL state `edit` and `compare`, the controls, messages, one model run per sentence and edits, the
ZIP's manifest), then a real `streamlit run` in headless Debian chromium (Playwright) for what only a
browser does: typing edits, and clicking a heatmap cell or an overview thumbnail."""
from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers import app, ok, streamlit_server
from streamlit.testing.v1 import AppTest

import model
from explorer import i18n, state
from explorer.views import stages
from model import fetch

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.timeout(900)


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def subtitle(spec: dict) -> str:
    return (spec["layout"]["title"].get("subtitle") or {}).get("text", "")


def notices(at: AppTest) -> list[str]:
    return [a["text"] for s in charts(at) for a in s["layout"].get("annotations", []) if "xref" in a
            and a.get("showarrow") is False and not s["data"]]


def qp(at: AppTest, name: str):
    v = at.query_params.get(name)
    return v[-1] if isinstance(v, list) else v


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


KINDS = [
    ("seed", "ablate=decoder.cross_attn:1:*", "en", "first difference at character"),
    ("seed", "no_causal", "ko", "처음 달라지는 곳"),
    pytest.param("minilm", "ablate=encoder.self_attn:0:*", "en", "cos(①, ②) = 0.", marks=pytest.mark.weights),
    pytest.param("minilm", "no_position", "ko", "cos(①, ②) = 0.", marks=pytest.mark.weights),
    pytest.param("smollm2", "no_causal", "en", "KL(① ‖ ②) = ", marks=pytest.mark.weights),
    pytest.param("smollm2", "temperature=2", "ko", "KL(① ‖ ②) = ", marks=pytest.mark.weights),
]


@pytest.mark.parametrize("name, edit, lang, output", KINDS)
def test_the_what_if_view_for_every_model_kind_from_a_link(name, edit, lang, output):
    if name != "seed" and not fetch.is_fetched(name):
        pytest.skip(f"{name} not fetched (run `{fetch.fetch_command(name)}`)")
    at = app(model=name, view="whatif", edit=edit, lang=lang, text="The cat sat on the mat.\nHi")
    ok(at)
    specs = charts(at)
    titles = [s["layout"]["title"]["text"] for s in specs]
    assert [t.split(" — ")[0] for t in titles] == [i18n.t(f"stage.{sid}.title", lang) for sid in
                                                    ("whatif_pattern", "whatif_entropy", "whatif_output")]
    words = i18n.t("whatif.caption_edits", lang, edits=edit)
    assert all(words in subtitle(s) for s in specs), [subtitle(s) for s in specs]
    assert output in subtitle(specs[2])
    assert qp(at, "edit") == edit and at.session_state["edit"] == edit
    assert not warnings(at)


def test_the_url_follows_the_controls_and_the_controls_follow_typed_edits():
    at = app(view="whatif", edit="no_causal")
    ok(at)
    assert at.multiselect(key="whatif_flags").value == ["no_causal"]
    at.multiselect(key="whatif_flags").select("no_padding").run()
    ok(at)
    assert qp(at, "edit") == "no_padding,no_causal"  # canonical order
    at.number_input(key="whatif_temperature").set_value(2.0).run()
    assert qp(at, "edit") == "temperature=2,no_padding,no_causal"
    assert at.text_input(key="whatif_text").value == "temperature=2,no_padding,no_causal"
    assert "edits: temperature=2,no_padding,no_causal" in subtitle(charts(at)[0])

    at.text_input(key="whatif_text").input("ablate=decoder.cross_attn:1:0, scale=0.5").run()
    ok(at)
    assert qp(at, "edit") == "scale=0.5,ablate=decoder.cross_attn:1:0"
    assert at.multiselect(key="whatif_flags").value == []
    assert at.number_input(key="whatif_scale").value == 0.5
    assert at.number_input(key="whatif_temperature").value is None
    assert at.multiselect(key="whatif_ablations").value == ["ablate=decoder.cross_attn:1:0"]

    at.selectbox(key="whatif_ab_kind").set_value("ablate_mean")
    at.selectbox(key="whatif_ab_block").set_value("encoder.self_attn").run()
    at.selectbox(key="whatif_ab_layer").set_value(1)
    at.selectbox(key="whatif_ab_head").set_value(2)
    at.button(key="whatif_add").click().run()
    ok(at)
    assert qp(at, "edit") == "scale=0.5,ablate=decoder.cross_attn:1:0,ablate_mean=encoder.self_attn:1:2"
    at.multiselect(key="whatif_ablations").unselect("ablate=decoder.cross_attn:1:0").run()
    at.number_input(key="whatif_scale").set_value(None).run()
    assert qp(at, "edit") == "ablate_mean=encoder.self_attn:1:2"
    at.multiselect(key="whatif_ablations").unselect("ablate_mean=encoder.self_attn:1:2").run()
    ok(at)
    assert qp(at, "edit") is None and at.session_state["edit"] == ""
    assert notices(at) == [i18n.t("whatif.choose")] * 3


@pytest.mark.parametrize("bad, why", [
    ("no_causl", "did you mean no_causal?"),
    ("temperature=hot", "not a number"),
    ("<b>bold</b>", "unknown edit"),
    ("scale=2,no_scale", "give one scale only"),
])
def test_a_malformed_edit_in_the_link_gives_a_warning_and_the_intact_page(bad, why):
    at = app(view="whatif", edit=bad, text="hello")
    ok(at)
    shown = warnings(at)
    assert f"`{bad}`" in shown and why in shown and "showing the intact run" in shown
    assert at.session_state["edit"] == "" and qp(at, "edit") is None
    assert notices(at) == [i18n.t("whatif.choose")] * 3  # the intact run, nothing edited
    assert at.text[0].value == "hello"
    for md in at.markdown:
        assert "<b>bold" not in md.value


def test_a_malformed_typed_edit_gives_a_warning_and_the_intact_run():
    at = app(view="whatif", edit="no_causal")
    at.text_input(key="whatif_text").input("temperature=0").run()
    ok(at)
    assert "out of bounds" in warnings(at) and at.session_state["edit"] == "" and qp(at, "edit") is None
    assert at.text_input(key="whatif_text").value == "temperature=0"  # kept, to be fixed
    assert at.multiselect(key="whatif_flags").value == []


def test_an_edit_that_does_not_fit_the_model_says_so_and_keeps_the_intact_run():
    at = app(view="whatif", edit="ablate=decoder.cross_attn:5:0")
    ok(at)
    assert "layer 5 is out of range" in warnings(at) and notices(at) == [i18n.t("whatif.choose")] * 3


def test_the_model_runs_once_per_sentence_and_edits(monkeypatch):
    calls = []
    real = state.run_data

    def counting(m, texts, **kw):
        calls.append((tuple(texts), kw.get("edits")))
        return real(m, texts, **kw)

    monkeypatch.setattr(state, "run_data", counting)
    state._run.clear()
    at = app(view="whatif", text="run once per edit")
    ok(at)
    assert calls == [(("run once per edit",), None)]
    at.multiselect(key="whatif_flags").select("no_causal").run()
    assert calls[-1] == (("run once per edit",), "no_causal") and len(calls) == 2
    at.sidebar.slider(key="head").set_value(2).run()
    at.sidebar.selectbox(key="block").set_value("decoder.cross_attn").run()
    at.multiselect(key="whatif_flags").unselect("no_causal").run()
    at.multiselect(key="whatif_flags").select("no_causal").run()
    at.selectbox(key="nav").set_value("view:scores").run()
    ok(at)
    assert len(calls) == 2  # the intact and the edited run both stayed cached


def test_two_sentences_from_a_link_and_the_url_follows_the_second_sentence():
    at = app(view="compare", compare="hello word", text="hello world", lang="ko")
    ok(at)
    spec, _patching = charts(at)  # the two sentences' head, then activation patching (tests/test_patching.py)
    assert spec["layout"]["title"]["text"] == i18n.t("stage.compare_pattern.title", "ko")
    assert "hello word" in subtitle(spec)
    at.text_input(key="compare").input("hello, world").run()
    ok(at)
    assert qp(at, "compare") == "hello, world" and "hello, world" in subtitle(charts(at)[0])
    at.text_input(key="compare").input("x" * 500 + "\nsecond line").run()
    ok(at)
    assert any(i18n.t("compare.cut", "ko", c=400, t=64) == i.value for i in at.info)
    assert qp(at, "compare") == "x" * 400
    at.text_input(key="compare").input("hello word").run()
    at.selectbox(key="nav").set_value("view:scores").run()
    at.sidebar.slider(key="head").set_value(1).run()
    at.selectbox(key="nav").set_value("view:compare").run()
    ok(at)
    assert qp(at, "compare") == "hello word" and at.text_input(key="compare").value == "hello word"
    at.text_input(key="compare").input("").run()
    assert qp(at, "compare") is None
    assert notices(at) == [i18n.t("compare.choose", "ko"), i18n.t("patching.choose", "ko")]


def test_the_everything_page_leaves_out_what_if_and_two_sentences():
    at = app()
    ok(at)
    titles = {s["layout"]["title"]["text"] for s in charts(at)}
    assert not titles & {i18n.t(f"stage.{sid}.title") for sid in stages.STAGE_IDS if stages.REGISTRY[sid].needs}


def test_score_and_weight_heatmaps_and_the_overview_are_clickable_and_the_url_keeps_query_and_key():
    at = app(view="scores", text="hello")
    ok(at)
    clickable = {json.loads(c.proto.spec)["layout"]["title"]["text"]: bool(c.proto.selection_mode)
                 for c in at.get("plotly_chart")}
    # the titles as the page draws them for this model and block (the mask's follows the block's masks)
    m = model.load("seed")
    run, sel = stages.run_data(m, ["hello"]), stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    # qk_terms (the score split, on the same page) picks its cell with its own query/key controls
    assert clickable == {stages.stage_figure(s, run, m.info, sel)[0].layout.title.text: s not in ("mask", "qk_terms")
                         for s in ("qk", "scaled", "mask", "masked", "softmax", "qk_terms")}
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        assert bool(c.proto.selection_mode) == any(t.get("meta") == "pick-cell" for t in spec["data"])
    at = app(view="overview", text="hello")
    (chart,) = at.get("plotly_chart")
    assert chart.proto.selection_mode and sum(t.get("meta") == "pick-head" for t in
                                              json.loads(chart.proto.spec)["data"]) == 2 * 4
    at = app(view="cell", query="2", key="1", text="hello")
    ok(at)
    assert (qp(at, "query"), qp(at, "key")) == ("2", "1")
    at.selectbox(key="key").set_value(4).run()
    assert qp(at, "key") == "4"


def test_export_all_carries_the_edits_into_file_names_and_the_manifest(monkeypatch, tmp_path):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))  # CSV only: no browser needed
    at = app(view="whatif", edit="no_causal", text="hello")
    ok(at)
    at.sidebar.toggle(key="export_open").set_value(True).run()  # the export section, opened
    at.sidebar.button(key="export_all_prepare").click().run()
    ok(at)
    _ident, data = at.session_state["_export_zip"]
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        doc = json.loads(zf.read("manifest.json"))
    assert doc["edits"] == "no_causal"
    whatif = [f["name"] for f in doc["files"] if f["stage"].startswith("whatif")]
    assert len(whatif) == 3 and all("_E-no_causal_" in n for n in whatif)
    assert not any("_E-" in f["name"] for f in doc["files"] if not f["stage"].startswith("whatif"))
    assert not any(f["stage"] == "compare_pattern" for f in doc["files"])  # never shown with a sentence


# --- in a real browser ------------------------------------------------------------------------------

PLOTS_JS = "() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(d => d.data && d.data.length).length"
SUBTITLES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .map(d => ((d.layout.title || {}).subtitle || {}).text || '')"""


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found (Debian: apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        pg = browser.new_page(viewport={"width": 1440, "height": 1000})
        yield pg
        browser.close()


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Traceback" not in page.content()


@pytest.mark.e2e
def test_what_if_in_the_browser(server, page):
    text = "hello world\n안녕하세요"
    page.goto(f"{server}/?view=whatif&lang=en&edit=no_causal&block=decoder.self_attn&text={quote(text)}",
              wait_until="domcontentloaded")
    page.wait_for_function(f"() => ({PLOTS_JS})() >= 3", timeout=300_000)
    page.wait_for_function(f"() => ({SUBTITLES_JS})().filter(s => s.includes('edits: no_causal')).length == 3",
                           timeout=60_000)
    no_exception(page)
    box = page.locator("input[aria-label=\"The edits as text (the link's edit=)\"]")
    box.fill("temperature=2, no_causal")
    box.press("Enter")
    page.wait_for_function("() => new URLSearchParams(location.search).get('edit') == 'temperature=2,no_causal'",
                           timeout=60_000)
    page.wait_for_function(f"() => ({SUBTITLES_JS})().filter(s => s.includes('edits: temperature=2,no_causal'))"
                           ".length == 3", timeout=60_000)
    box.fill("temperature=hot")
    box.press("Enter")
    page.wait_for_function("() => !new URLSearchParams(location.search).has('edit')", timeout=60_000)
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="not a number")
    alert.wait_for(timeout=60_000)
    assert "showing the intact run" in alert.inner_text()
    no_exception(page)


def cell_centre(page, title: str, q: int, k: int) -> dict:
    return page.evaluate("""([title, q, k]) => {
        const d = Array.from(document.querySelectorAll('.js-plotly-plot'))
            .find(d => (d.layout.title.text || '').includes(title));
        const xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis, r = d.getBoundingClientRect();
        return {x: r.left + xa._offset + xa.d2p(k), y: r.top + ya._offset + ya.d2p(q)}; }""", [title, q, k])


@pytest.mark.e2e
def test_click_a_cell_to_derive_it_and_a_thumbnail_to_open_its_head(server, page):
    page.goto(f"{server}/?view=scores&lang=en&text=hello%20world", wait_until="domcontentloaded")
    page.wait_for_function(f"() => ({PLOTS_JS})() >= 5", timeout=300_000)
    title = "Scaled scores"
    page.evaluate("""(title) => Array.from(document.querySelectorAll('.js-plotly-plot'))
        .find(d => (d.layout.title.text || '').includes(title)).scrollIntoView({block: 'center'})""", title)
    time.sleep(1)
    q, k = 3, 5
    pos = cell_centre(page, title, q, k)
    page.mouse.move(pos["x"] + 4, pos["y"] - 4)  # off the centre, inside the cell
    page.mouse.click(pos["x"] + 4, pos["y"] - 4)
    page.wait_for_function(f"() => {{ const u = new URLSearchParams(location.search); return u.get('view') == 'cell'"
                           f" && u.get('query') == '{q}' && u.get('key') == '{k}'; }}", timeout=60_000)
    query_box = page.locator('input[aria-label="Query token (row i)"]')
    key_box = page.locator('input[aria-label="Key token (column j)"]')
    query_box.wait_for(timeout=60_000)
    assert query_box.input_value() == "3: l" and key_box.input_value() == "5: ␣"  # "hello world": l, space
    no_exception(page)

    page.goto(f"{server}/?view=overview&lang=en&text=hello", wait_until="domcontentloaded")
    page.wait_for_function(f"() => ({PLOTS_JS})() >= 1", timeout=300_000)
    page.evaluate("() => document.querySelector('.js-plotly-plot').scrollIntoView({block: 'start'})")
    time.sleep(1)
    pos = page.evaluate("""() => { const d = document.querySelector('.js-plotly-plot');
        const xa = d._fullLayout.xaxis7, ya = d._fullLayout.yaxis7, r = d.getBoundingClientRect();
        return {x: r.left + xa._offset + xa._length * 0.8, y: r.top + ya._offset + ya._length * 0.2}; }""")
    page.mouse.move(pos["x"], pos["y"])
    page.mouse.click(pos["x"], pos["y"])  # thumbnail 7: layer 1, head 2 (4 heads a row)
    page.wait_for_function("() => { const u = new URLSearchParams(location.search); return u.get('view') == "
                           "'scores' && u.get('layer') == '1' && u.get('head') == '2'; }", timeout=60_000)
    no_exception(page)
