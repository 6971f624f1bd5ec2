"""Ask the class in a real `streamlit run explorer/app.py` server and headless Debian chromium, the
answers in a real redis-server: a presenter page (presenter mode, the presenter key) opens "which
token does this head attend to?" from its view; three learner pages (two in English, one in Korean)
answer, one changes its answer, and the presenter's live count follows; close (the learners' buttons
are disabled and say so), reveal (every learner sees the class's histogram beside the model's
weights, in their language), ask again (reset: answers cleared), and a learner page reloaded (a
reconnect) answers as the same learner, counted once; a browser with the balancer's cookie gets its
learner id from it. Question, sentence
and tokens stay text.

    pytest -m e2e tests/test_poll_e2e.py -s

(The same poll through two replicas behind nginx with one replica killed, 60 learners:
``python -m bench --only poll``.)
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from helpers import streamlit_server
from redisd import REDIS, RedisServer
from test_e2e import ARTIFACTS, browser, no_exception, wait_for_plots  # noqa: F401 (browser: the fixture)

from explorer import i18n, poll, poll_ui

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
playwright = pytest.importorskip("playwright.sync_api")
KEY = "pk-for-the-tests-7"
TEXT = "the <b>cat</b> sat"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    if REDIS is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield srv.url
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(redis_url):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with streamlit_server(log=ARTIFACTS / "streamlit-test_poll_e2e.log",
                          env={poll.STORE_ENV: redis_url, "ATTENTION_EXPLORER_PRESENTER_KEY": KEY}) as url:
        yield url


def metric(page) -> str:
    return page.locator('.st-key-poll-panel [data-testid="stMetricValue"]').inner_text().strip()


def wait_count(page, n: int) -> None:
    page.wait_for_function(
        """(n) => { const m = document.querySelector('.st-key-poll-panel [data-testid="stMetricValue"]');
                    return m && m.innerText.trim() === String(n); }""", arg=n, timeout=15_000)


def choices(page):
    return page.locator(".st-key-poll-choices button")


def chosen(page) -> list[int]:
    """The indexes of the learner's chosen button (drawn as primary)."""
    kinds = choices(page).evaluate_all("bs => bs.map(b => b.getAttribute('data-testid'))")
    return [i for i, k in enumerate(kinds) if k == "stBaseButton-primary"]


def tap(page, i: int) -> None:
    choices(page).nth(i).click()
    page.wait_for_function("(i) => { const b = document.querySelectorAll('.st-key-poll-choices button')[i];"
                           " return b && b.getAttribute('data-testid') === 'stBaseButton-primary'; }", arg=i,
                           timeout=15_000)


def test_a_whole_poll_presenter_and_learners_in_english_and_korean(server, browser, redis_url):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    presenter = ctx.new_page()
    t0 = time.time()
    timings = {}
    presenter.goto(f"{server}/?present=1&lang=en&view=tokens&text={quote(TEXT)}", wait_until="domcontentloaded")
    wait_for_plots(presenter, 1)
    timings["presenter_page_s"] = round(time.time() - t0, 1)

    # the presenter key, then the view's question
    presenter.get_by_role("button", name=i18n.t("poll.ask", "en")).click()
    field = presenter.locator("input[type=password]")
    field.fill("not the key")
    presenter.get_by_role("button", name=i18n.t("poll.key_submit", "en")).click()
    presenter.get_by_text(i18n.t("poll.key_wrong", "en")).wait_for(timeout=15_000)
    presenter.locator("input[type=password]").fill(KEY)
    presenter.get_by_role("button", name=i18n.t("poll.key_submit", "en")).click()
    ask = presenter.get_by_role("button", name=re.compile(r"^Ask: which token"))
    ask.wait_for(timeout=15_000)
    ask.click()
    presenter.locator(".st-key-poll-qr img").wait_for(timeout=15_000)
    link = presenter.locator('.st-key-poll-panel [data-testid="stCode"]').inner_text().strip()
    q = parse_qs(urlsplit(link).query)
    assert set(q) == {"poll", "lang"} and poll.valid_id(q["poll"][0])  # no key, no state, in the learner link
    assert KEY not in link and KEY not in presenter.url
    pid = q["poll"][0]
    store = poll.open_store(redis_url)
    p = store.get(pid)
    assert p.meta["kind"] == "token" and p.meta["sentence"] == TEXT and abs(sum(p.meta["weights"]) - 1) < 1e-4
    assert metric(presenter) == "0"

    timings["poll_opened_s"] = round(time.time() - t0, 1)
    # three learners: two in English, one in Korean; the Korean one in a browser of its own that carries
    # the balancer's sticky cookie, as behind serve.sh's nginx: its learner id comes from the cookie
    # (the same for a second tab or a second scan), never the cookie itself
    other = browser.new_context(viewport={"width": 390, "height": 844})
    cookie = "0123456789abcdef0123456789abcdef"
    other.add_cookies([{"name": "ae_replica", "value": cookie, "url": server}])
    learners = []
    for context, lang in ((ctx, "en"), (ctx, "en"), (other, "ko")):  # opened together, as a class does
        page = context.new_page()
        page.set_viewport_size({"width": 390, "height": 844})  # a phone
        page.goto(link.replace("lang=en", f"lang={lang}"), wait_until="domcontentloaded")
        learners.append(page)
    for page in learners:
        choices(page).first.wait_for(timeout=30_000)
        no_exception(page)
    timings["learners_loaded_s"] = round(time.time() - t0, 1)
    en, en2, ko = learners
    assert choices(en).count() == p.n_choices
    assert en.locator("b").count() == 0 and "<b>cat</b>" in en.locator('[data-testid="stText"]').first.inner_text()
    assert ko.get_by_text(i18n.t("poll.learner_title", "ko")).count() == 1
    assert "which token" in en.locator("h3").first.inner_text() and "어느 토큰" in ko.locator("h3").first.inner_text()

    tap(en, 0)
    tap(en2, 1)
    tap(en2, 0)  # a change of mind replaces the answer
    tap(ko, p.n_choices - 1)
    assert chosen(en2) == [0]
    timings["tapped_s"] = round(time.time() - t0, 1)
    wait_count(presenter, 3)
    assert store.counts(pid)[0] == 2 and sum(store.counts(pid).values()) == 3

    timings["answered_s"] = round(time.time() - t0, 1)
    # close: the learners' buttons are disabled and they are told; reveal: the figure, in each language
    presenter.get_by_role("button", name=i18n.t("poll.close", "en"), exact=True).click()
    en.get_by_text(i18n.t("poll.closed_wait", "en")).wait_for(timeout=15_000)
    assert all(choices(en).nth(i).is_disabled() for i in range(p.n_choices))
    with pytest.raises(poll.PollClosed):
        store.answer(pid, "late-learner-123", 0)
    presenter.get_by_role("button", name=i18n.t("poll.reveal", "en"), exact=True).click()
    for page, lang in ((en, "en"), (ko, "ko")):
        wait_for_plots(page, 1, timeout=15)
        text = page.locator(".js-plotly-plot").first.inner_text()
        assert i18n.t("fig.poll_model", lang) in text and i18n.t("fig.poll_class_n", lang, n=3) in text
        no_exception(page)
    wait_for_plots(presenter, 2, timeout=15)  # the view's figure and the reveal's
    with presenter.expect_download(timeout=30_000) as dl:  # the class's answers for the teacher: no learner id
        presenter.get_by_role("button", name=i18n.t("poll.csv", "en")).click()
    rows = Path(dl.value.path()).read_bytes().decode("utf-8-sig").strip().split("\r\n")  # CRLF, RFC 4180
    assert rows[0] == "question,choice,count" and len(rows) == 1 + p.n_choices
    assert [int(r.rsplit(",", 1)[1]) for r in rows[1:]] == [store.counts(pid)[i] for i in range(p.n_choices)]
    assert not any(x in "".join(rows) for x in ("learner", parse_qs(urlsplit(en.url).query)["me"][0]))

    timings["revealed_s"] = round(time.time() - t0, 1)
    # ask again: answers cleared, the learners' pages open again; a reloaded page is the same learner
    presenter.get_by_role("button", name=i18n.t("poll.reset", "en"), exact=True).click()
    wait_count(presenter, 0)
    en.get_by_text(i18n.t("poll.tap", "en")).wait_for(timeout=15_000)
    me = parse_qs(urlsplit(en.url).query)["me"][0]
    tap(en, 1)
    en.reload(wait_until="domcontentloaded")
    choices(en).first.wait_for(timeout=30_000)
    assert parse_qs(urlsplit(en.url).query)["me"][0] == me and chosen(en) == [1]  # its answer, kept
    tap(en, 2)
    wait_count(presenter, 1)
    assert store.counts(pid)[2] == 1 and store.mine(pid, me) == 2
    assert parse_qs(urlsplit(ko.url).query)["me"][0] == poll_ui.browser_learner(pid, cookie)
    for page in [presenter, *learners]:
        no_exception(page)
    timings["done_s"] = round(time.time() - t0, 1)
    print("\npoll timings:", timings)
    other.close()
    ctx.close()
