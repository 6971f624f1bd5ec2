"""End to end: a real `streamlit run explorer/app.py` server driven by headless Debian chromium.

Loads a URL with parameters, types a Korean sentence, changes layer and head and checks that the
figures change (their plotly data), saves a screenshot (tests/artifacts/; the README's docs/screenshot.png is copied from it by hand),
and records how long the first page and a layer/head change take (tests/artifacts/e2e_timings.json).

    pytest -m e2e tests/test_e2e.py -s
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import quote

import pytest


ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} not found (Debian: apt-get install chromium)", allow_module_level=True)
playwright = pytest.importorskip("playwright.sync_api")

PLOTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(d => d.data && d.data.length).length"""
DATA_JS = """() => JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot'))
    .map(d => (d.data || []).map(t => t.z || t.y || null)))"""


@pytest.fixture(scope="module")
def server(shared_server):
    """The test process's one streamlit server (tests/conftest.py), shared by every browser test file."""
    return shared_server


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def wait_for_plots(page, n: int, timeout: float = 180) -> float:
    t0 = time.time()
    page.wait_for_function(f"() => ({PLOTS_JS})() >= {n}", timeout=timeout * 1000)
    return time.time() - t0


def wait_for_change(page, before: str, timeout: float = 120) -> float:
    """Seconds until the figures' data differ from ``before``."""
    t0 = time.time()
    page.wait_for_function(f"(before) => ({DATA_JS})() !== before", arg=before, timeout=timeout * 1000)
    return time.time() - t0


def settle(page, quiet: float = 0.6, timeout: float = 60) -> None:
    """Wait until the figures stop changing (the rerun has finished drawing)."""
    deadline = time.time() + timeout
    last, since = page.evaluate(DATA_JS), time.time()
    while time.time() < deadline:
        time.sleep(0.2)
        now = page.evaluate(DATA_JS)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Traceback" not in page.content()


def test_first_page_and_layer_head_changes(server, browser):
    timings: dict[str, float] = {}
    page = browser.new_page(viewport={"width": 1440, "height": 1000})

    # the default page, one stage (cold: the server loads the model and runs it)
    t0 = time.time()
    page.goto(server, wait_until="domcontentloaded")
    wait_for_plots(page, 1)
    timings["first_page_first_figure_cold_s"] = round(time.time() - t0, 2)
    no_exception(page)
    page.wait_for_function("() => location.search.includes('stage=softmax')", timeout=30_000)

    # a shared link with parameters
    text = "hello world\n안녕하세요"
    link = (f"{server}/?model=seed&view=scores&layer=0&head=0&block=encoder.self_attn&lang=en"
            f"&text={quote(text)}")
    t0 = time.time()
    page.goto(link, wait_until="domcontentloaded")
    wait_for_plots(page, 5)
    timings["link_with_params_s"] = round(time.time() - t0, 2)
    settle(page)
    no_exception(page)
    assert page.locator('[data-testid="stText"]').first.inner_text().strip() == "hello world"

    # type a Korean sentence
    before = page.evaluate(DATA_JS)
    area = page.locator('section[data-testid="stSidebar"] textarea').first
    area.fill("나는 학교에 간다\n오늘 날씨가 참 좋다")
    area.press("Control+Enter")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-testid=\"stText\"]'))"
        ".some(e => e.innerText.includes('나는 학교에 간다'))", timeout=120_000)
    wait_for_change(page, before)
    settle(page)
    no_exception(page)
    assert "text=" in page.url and quote("나는") in page.url

    # layer, then head: the figures change, and the URL follows
    def slider(label: str):
        return page.locator(f'section[data-testid="stSidebar"] input[type="range"][aria-label="{label}"]')

    for name, label in (("layer", "Layer"), ("head", "Head")):
        before = page.evaluate(DATA_JS)
        slider(label).focus()
        t0 = time.time()
        slider(label).press("ArrowRight")
        wait_for_change(page, before)
        timings[f"{name}_change_s"] = round(time.time() - t0, 2)
        settle(page)
        assert page.evaluate(DATA_JS) != before
        page.wait_for_function(f"() => location.search.includes('{name}=1')", timeout=30_000)
    no_exception(page)

    # back to a layer already seen (the figures are cached)
    before = page.evaluate(DATA_JS)
    slider("Layer").focus()
    t0 = time.time()
    slider("Layer").press("ArrowLeft")
    wait_for_change(page, before)
    timings["layer_change_seen_before_s"] = round(time.time() - t0, 2)
    settle(page)

    # screenshot for the README: the decoder's masks (padding, causal and both) for the shorter
    # sentence of a two-sentence batch, then its masked scores
    shot = (f"{server}/?model=seed-sort&view=scores&block=decoder.self_attn&layer=0&head=0&sentence=1"
            f"&lang=en&text={quote('hello world' + chr(10) + 'dcba')}")
    page.set_viewport_size({"width": 1440, "height": 1150})
    page.goto(shot, wait_until="domcontentloaded")
    wait_for_plots(page, 5)
    settle(page)
    no_exception(page)
    page.evaluate("() => document.getElementById('mask').scrollIntoView({block: 'start'})")
    time.sleep(1.5)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "screenshot.png"))  # the README's docs/screenshot.png is taken from here
    assert (ARTIFACTS / "screenshot.png").stat().st_size > 20_000

    (ARTIFACTS / "e2e_timings.json").write_text(json.dumps(timings, indent=2))
    print("\nE2E timings:", json.dumps(timings))
    page.close()


def test_bad_link_shows_messages_not_tracebacks(server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/?model=..%2F..%2Fetc%2Fpasswd&layer=999&head=-3&view=scores"
              f"&text={quote('<script>alert(1)</script>')}", wait_until="domcontentloaded")
    wait_for_plots(page, 5)
    no_exception(page)
    alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
    joined = "\n".join(alerts)
    assert "model=" in joined and "layer=999" in joined and "head=-3" in joined
    assert page.locator('[data-testid="stText"]').first.inner_text().strip() == "<script>alert(1)</script>"
    assert page.evaluate("() => document.querySelectorAll('script:not([src])').length") >= 0
    assert page.locator("text=alert(1)").count() >= 1
    page.close()


def test_every_stage_is_reachable_by_click_and_by_link(server, browser):
    """The default page shows one stage; from the first stage, the forward button opens every stage
    of the pipeline in turn (its heading, a figure, and the URL follow) until it is disabled at the
    last; the select box opens a stage by its name; and a link naming a stage opens it."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(f"{server}/?model=seed&lang=en&stage=tokens", wait_until="domcontentloaded")
    wait_for_plots(page, 1)
    page.wait_for_selector('h3[id="tokens"]', timeout=60_000)
    forward = page.locator('.st-key-nav_forward button').first  # (Streamlit draws a hidden copy too)
    stage_js = "() => new URL(location).searchParams.get('stage')"
    seen = ["tokens"]
    settle(page)
    while forward.is_enabled():  # in order: each click opens another stage than the one shown
        before = page.evaluate(stage_js)
        forward.click()
        page.wait_for_function(f"(b) => ({stage_js})() !== b", arg=before, timeout=60_000)
        sid = page.evaluate(stage_js)
        page.wait_for_selector(f'h3[id="{sid}"]', timeout=60_000)
        wait_for_plots(page, 1)
        settle(page)
        no_exception(page)
        seen.append(sid)
        assert len(seen) < 60, seen
    assert len(set(seen)) == len(seen) >= 15 and "qk" in seen and "overview" in seen
    # the select box: typed into, a stage chosen by its title
    box = page.locator('.st-key-nav input').first
    box.click()
    box.fill("Scores Q")  # the list narrows to the stages whose titles hold it; the first is Q·Kᵀ
    page.get_by_role("option").first.click()
    page.wait_for_function(f"() => ({stage_js})() === 'qk'", timeout=60_000)
    page.wait_for_selector('h3[id="qk"]', timeout=60_000)
    for sid in ("tokens", "mask", "cell", "logits"):
        page.goto(f"{server}/?model=seed&lang=ko&stage={sid}", wait_until="domcontentloaded")
        page.wait_for_selector(f'h3[id="{sid}"]', timeout=60_000)
        wait_for_plots(page, 1)
        no_exception(page)
    page.close()


# where the chosen stage's figure lands: its box on screen, and the viewport's height
FIGURE_BOX_JS = """() => { const p = document.querySelector('.js-plotly-plot');
    const r = p.getBoundingClientRect(); return [r.top, r.bottom, innerHeight]; }"""


@pytest.mark.parametrize("query, viewport, whole", [
    ("model=seed&lang=en", (1366, 768), True),  # a laptop: the default page's figure, whole
    ("model=seed&lang=ko&present=1", (1920, 1080), True),  # a projector, presenter mode
    ("model=smollm2&lang=en&stage=qk", (1366, 768), False),  # taller than the screen: it starts high
    ("model=smollm2&lang=ko&present=1", (1920, 1080), False),
])
def test_the_chosen_stage_is_on_screen_without_scrolling(server, browser, query, viewport, whole):
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    page.goto(f"{server}/?{query}", wait_until="domcontentloaded")
    wait_for_plots(page, 1)
    settle(page)
    no_exception(page)
    top, bottom, height = page.evaluate(FIGURE_BOX_JS)
    assert page.evaluate("() => scrollY") == 0
    if whole:
        assert 0 <= top and bottom <= height, (top, bottom, height)
    else:  # the figure is taller than what the page leaves it: its top in the screen's upper 40 %
        assert 0 <= top <= 0.4 * height < bottom, (top, bottom, height)
    page.close()


def test_the_page_starts_the_chart_library_at_once_and_it_is_fetched_once(server, browser):
    """explorer/preload.py: the HTML page imports Streamlit's plotly chunk as soon as it runs; the
    frontend's own lazy import of it then finds that module, so the chunk is fetched exactly once (a
    second fetch would mean the page imported another URL, i.e. the preload does nothing), and it is
    asked for before the first run's chart has arrived."""
    from urllib.request import urlopen

    from explorer import preload

    names = preload.chunk_names()
    assert names, "no PlotlyChart chunk in the installed Streamlit"
    with urlopen(server, timeout=30) as r:
        html = r.read().decode()
    assert f'import("./static/js/{names[0]}")' in html
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ctx.new_page()
        fetched, frames = [], []
        page.on("request", lambda req: fetched.append(time.time()) if names[0] in req.url else None)
        page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append((time.time(), len(f)))))
        page.goto(server, wait_until="commit")
        wait_for_plots(page, 1)
        settle(page)
        no_exception(page)
        assert len(fetched) == 1, f"the chart chunk was fetched {len(fetched)} times"
        # the first run's messages (the chart among them) come after the chunk was asked for
        big = [t for t, n in frames if n > 2000]
        assert big and fetched[0] < big[0], "the chunk was asked for only after the page's data arrived"
    finally:
        ctx.close()


def test_a_long_paste_is_cut_with_notices_and_a_too_long_one_is_refused(server, browser):
    """A pasted article (50,000 characters) is taken and cut to the sentence limits with notices; a
    paste longer than the box holds (150,000) is refused by the box, which keeps what it had."""
    from explorer import inputs

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/?view=tokens", wait_until="domcontentloaded")
    wait_for_plots(page, 1)
    settle(page)
    area = page.locator('section[data-testid="stSidebar"] textarea').first
    line = "가나다 hello world " * 30 + "\n"  # 511 characters
    area.fill("")
    page.keyboard.insert_text(line * 98)  # a paste of 50,078 characters
    assert len(area.input_value()) == len(line) * 98
    area.press("Control+Enter")
    page.wait_for_function(
        f"() => document.body.innerText.includes('first {inputs.MAX_SENTENCES} sentences')", timeout=120_000)
    settle(page)
    no_exception(page)
    joined = "\n".join(page.locator('[data-testid="stAlert"]').all_inner_texts())
    assert f"cut to {inputs.MAX_CHARS} characters" in joined
    taken = area.input_value()
    page.keyboard.insert_text(line * 300)  # 153,300 more characters: past the box's bound
    assert area.input_value() == taken
    no_exception(page)
    page.close()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_why_this_head_attends_here_in_both_languages(server, browser, lang):
    """Issue 35's stages on the seed by link: the score split (five heatmaps and the cell's bars) and
    attention against effect (the ablations run on opening: 8 heads; a point per head, two named)."""
    from explorer.views import stages

    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(f"{server}/?model=seed&lang={lang}&stage=qk_terms&layer=0&head=1&query=3&key=2",
              wait_until="domcontentloaded")
    page.wait_for_selector('h3[id="qk_terms"]', timeout=60_000)
    wait_for_plots(page, 1)
    assert stages.stage_title("qk_terms", lang) in page.locator('h3[id="qk_terms"]').inner_text()
    kinds = page.evaluate("() => document.querySelector('.js-plotly-plot').data.map(t => t.type)")
    assert kinds.count("heatmap") == 5 and "bar" in kinds
    no_exception(page)
    page.goto(f"{server}/?model=seed&lang={lang}&stage=attention_vs_effect&block=decoder.cross_attn&layer=1"
              f"&head=0&query=1&key=9", wait_until="domcontentloaded")
    page.wait_for_selector('h3[id="attention_vs_effect"]', timeout=60_000)
    page.wait_for_function("() => { const p = document.querySelector('.js-plotly-plot');"
                           " return p && p.data && p.data.length && p.data[0].type === 'scatter'; }", timeout=120_000)
    n = page.evaluate("() => document.querySelector('.js-plotly-plot')._fullData[0].x.length")
    assert n == 8  # 2 decoder layers x 4 heads
    assert page.evaluate("() => document.querySelector('.js-plotly-plot').layout.annotations.length") >= 1
    page.wait_for_function("() => decodeURIComponent(location.search).includes('query=1')", timeout=30_000)
    no_exception(page)
    page.close()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_seed_training_replayed_in_both_languages(server, browser, lang):
    """Issue 35, item 4: a link to the first training step shows the reversing head (by link, or by the button
    under the curve) near-uniform and, in the sidebar, the loss curve with its words; the slider's last step shows the
    anti-diagonal (the link then names no step); a step there is not is named in a message (in Korean)."""
    from explorer import i18n
    from explorer.views import training
    from model.files import seed_checkpoints

    record = seed_checkpoints.training_record("seed")
    steps, head = record["steps"], training.reversing_head(record)
    layer, h = head[1:].split("H")
    text = "abcdefghijkl"  # L = 12 characters, then </s>
    n = len(text)
    main = '[data-testid="stMain"] .js-plotly-plot'
    side = 'section[data-testid="stSidebar"] .js-plotly-plot'
    rows_js = f"""() => {{ const p = document.querySelector('{main}');
        const t = p && p._fullData && p._fullData.find(t => t.type === 'heatmap');
        return t ? Array.from(t.z).slice(0, {n}).map(r => Array.from(r).slice(0, {n + 1})) : null; }}"""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    link = f"{server}/?model=seed&lang={lang}&stage=softmax&text={text}"
    if lang == "ko":  # the head by link; in English by the button under the curve
        link += f"&block=decoder.cross_attn&layer={layer}&head={h}"
    page.goto(f"{link}&train_step={steps[0]}", wait_until="domcontentloaded")
    page.wait_for_function(f"() => document.querySelector('{side}') && ({rows_js})()", timeout=120_000)
    settle(page)
    no_exception(page)
    if lang == "en":
        page.locator(".st-key-train_show_head button").first.click()
        page.wait_for_function(f"() => decodeURIComponent(location.search).includes('block=decoder.cross_attn')"
                               f" && location.search.includes('layer={layer}') && location.search.includes('head={h}')",
                               timeout=60_000)
        settle(page)
    rows = page.evaluate(rows_js)  # near-uniform: no weight far above 1/(L+1)
    assert max(max(r) for r in rows) < 2.5 / (n + 1)
    assert i18n.t("train.title", lang) in page.evaluate(f"() => document.querySelector('{side}').layout.title.text")
    words = i18n.t("train.caption", lang, step=steps[0], total=steps[-1], n=len(record["eval_inputs"]), loss="",
                   layer=layer, head=h, diag="", entropy="")
    captions = page.locator('section[data-testid="stSidebar"] [data-testid="stCaptionContainer"]').all_inner_texts()
    assert any(c.startswith(words.split(":")[0]) for c in captions), captions
    before = json.dumps(rows)
    handle = page.locator(f'section[data-testid="stSidebar"] input[type="range"][aria-label="{i18n.t("train.step", lang)}"]')
    handle.focus()
    handle.press("End")
    page.wait_for_function(f"(b) => JSON.stringify(({rows_js})()) !== b", arg=before, timeout=120_000)
    settle(page)
    page.wait_for_function("() => !location.search.includes('train_step')", timeout=30_000)
    rows = page.evaluate(rows_js)  # the anti-diagonal: output position t reads character L-1-t
    assert all(max(range(n + 1), key=r.__getitem__) == n - 1 - t for t, r in enumerate(rows))
    no_exception(page)
    if lang == "en":
        page.close()
        return
    page.goto(f"{link}&train_step={steps[1] + 1}", wait_until="domcontentloaded")
    page.wait_for_function(f"() => ({rows_js})()", timeout=120_000)
    alerts = "\n".join(page.locator('[data-testid="stAlert"]').all_inner_texts())
    assert "train_step" in alerts and str(steps[1] + 1) in alerts and str(steps[1]) in alerts
    no_exception(page)
    page.close()
