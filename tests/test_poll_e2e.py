"""Ask the class in headless Debian chromium, on both stores:

- **Redis, one server** (a real `streamlit run explorer/app.py` and a real redis-server): a presenter
  page (presenter mode, a wrong presenter key then the right one) opens "which token does this head
  attend to?" from its view; three learner pages (two in English, one in Korean) answer, one changes
  its answer, and the presenter's live count follows; close (the learners' buttons are disabled and
  say so), reveal (every learner sees the class's histogram beside the model's weights, in their
  language), the CSV, ask again (reset: answers cleared), and a learner page reloaded (a reconnect)
  answers as the same learner, counted once; a browser with the balancer's cookie gets its learner id
  from it.
- **SQLite, through the balancer** (scripts/serve.sh: two replicas behind the real nginx, the answers
  in its default store, the SQLite file every replica shares): the presenter and a Korean learner on
  one replica, an English learner on the other (their sticky cookies chosen so); the English learner
  answers and changes its answer, then its replica is killed (SIGKILL) in the middle of the poll: its
  answer is kept, its page reconnects to the other replica and answers again (the answer replaces,
  never adds), the Korean learner answers, and the presenter's count is exact throughout; then close,
  reveal (in both languages) and ask again.

Question, sentence and tokens stay text.

    pytest -m e2e tests/test_poll_e2e.py -s

(60 learners through the balancer, a replica killed, the presenter's count timed: ``python -m bench
--only poll``.)
"""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from helpers import streamlit_server
from redisd import REDIS, RedisServer
from test_e2e import ARTIFACTS, browser, no_exception, wait_for_plots  # noqa: F401 (browser: the fixture)
from test_supervise import NGINX, Sockets, replica_pid, sessions_on, wait_for

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


@pytest.fixture(scope="module")
def balancer(tmp_path_factory):
    """scripts/serve.sh, two replicas behind nginx; the answers in the default store (nothing set: the
    SQLite file in the state folder the replicas share). Yields (balancer, the store's URL)."""
    from bench import server as sv

    if NGINX is None:
        pytest.skip("nginx is not installed (sh scripts/setup.sh --dev installs it)")
    state = tmp_path_factory.mktemp("state")
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ATTENTION_EXPLORER_STATE_DIR": str(state),
           "ATTENTION_EXPLORER_PRESENTER_KEY": KEY, poll.STORE_ENV: ""}
    with sv.Balancer(2, env=env) as bal:
        m = re.search(r"logs in (\S+);", bal.log_tail(200))
        assert m, bal.log_tail()
        bal.run_dir = Path(m.group(1))  # its replicas' pid files
        yield bal, poll.default_url({"ATTENTION_EXPLORER_STATE_DIR": str(state)})


def open_poll(presenter, url: str, *, wrong_key_first: bool) -> str:
    """The presenter page (presenter mode, English) gives the key and opens its view's question;
    returns the learner link shown (which holds no key)."""
    presenter.goto(f"{url}/?present=1&lang=en&view=tokens&text={quote(TEXT)}", wait_until="domcontentloaded")
    wait_for_plots(presenter, 1)
    presenter.get_by_role("button", name=i18n.t("poll.ask", "en")).click()
    if wrong_key_first:
        presenter.locator("input[type=password]").fill("not the key")
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
    assert metric(presenter) == "0"
    return link


def learner_page(context, link: str, lang: str, watch=None):
    """A phone's page of the learner link in ``lang``; ``watch(page)`` is called before it is opened."""
    page = context.new_page()
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    if watch is not None:
        watch(page)
    page.goto(link.replace("lang=en", f"lang={lang}"), wait_until="domcontentloaded")
    return page


def me_of(page) -> str:
    return parse_qs(urlsplit(page.url).query)["me"][0]


def sees_the_reveal(page, lang: str, n: int) -> None:
    wait_for_plots(page, 1, timeout=15)
    text = page.locator(".js-plotly-plot").first.inner_text()
    assert i18n.t("fig.poll_model", lang) in text and i18n.t("fig.poll_class_n", lang, n=n) in text
    no_exception(page)


def test_a_whole_poll_presenter_and_learners_in_english_and_korean(server, browser, redis_url):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    presenter = ctx.new_page()
    t0 = time.time()
    timings = {}
    link = open_poll(presenter, server, wrong_key_first=True)  # the presenter key (a wrong one first)
    pid = parse_qs(urlsplit(link).query)["poll"][0]
    store = poll.open_store(redis_url)
    p = store.get(pid)
    assert p.meta["kind"] == "token" and p.meta["sentence"] == TEXT and abs(sum(p.meta["weights"]) - 1) < 1e-4

    timings["poll_opened_s"] = round(time.time() - t0, 1)
    # three learners: two in English, one in Korean; the Korean one in a browser of its own that carries
    # the balancer's sticky cookie, as behind serve.sh's nginx: its learner id comes from the cookie
    # (the same for a second tab or a second scan), never the cookie itself
    other = browser.new_context(viewport={"width": 390, "height": 844})
    cookie = "0123456789abcdef0123456789abcdef"
    other.add_cookies([{"name": "ae_replica", "value": cookie, "url": server}])
    learners = [learner_page(context, link, lang) for context, lang in ((ctx, "en"), (ctx, "en"), (other, "ko"))]
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
        sees_the_reveal(page, lang, 3)
    wait_for_plots(presenter, 2, timeout=15)  # the view's figure and the reveal's
    with presenter.expect_download(timeout=30_000) as dl:  # the class's answers for the teacher: no learner id
        presenter.get_by_role("button", name=i18n.t("poll.csv", "en")).click()
    rows = Path(dl.value.path()).read_bytes().decode("utf-8-sig").strip().split("\r\n")  # CRLF, RFC 4180
    assert rows[0] == "question,choice,count" and len(rows) == 1 + p.n_choices
    assert [int(r.rsplit(",", 1)[1]) for r in rows[1:]] == [store.counts(pid)[i] for i in range(p.n_choices)]
    assert not any(x in "".join(rows) for x in ("learner", me_of(en)))

    timings["revealed_s"] = round(time.time() - t0, 1)
    # ask again: answers cleared, the learners' pages open again; a reloaded page is the same learner
    presenter.get_by_role("button", name=i18n.t("poll.reset", "en"), exact=True).click()
    wait_count(presenter, 0)
    en.get_by_text(i18n.t("poll.tap", "en")).wait_for(timeout=15_000)
    me = me_of(en)
    tap(en, 1)
    en.reload(wait_until="domcontentloaded")
    choices(en).first.wait_for(timeout=30_000)
    assert me_of(en) == me and chosen(en) == [1]  # its answer, kept
    tap(en, 2)
    wait_count(presenter, 1)
    assert store.counts(pid)[2] == 1 and store.mine(pid, me) == 2
    assert me_of(ko) == poll_ui.browser_learner(pid, cookie)
    for page in [presenter, *learners]:
        no_exception(page)
    timings["done_s"] = round(time.time() - t0, 1)
    print("\npoll timings:", timings)
    other.close()
    ctx.close()


def replica_of(bal, cookie: str) -> int:
    """The replica (1 or 2) nginx sends a browser with this sticky cookie to: a websocket opened with it
    through the balancer, found on that replica's port (nothing else is connected)."""
    from websockets.sync.client import connect

    ports = {i: bal.port + i for i in (1, 2)}
    assert wait_for(lambda: not any(sessions_on(p) for p in ports.values()), 10, 0.05)
    with connect(f"ws://127.0.0.1:{bal.port}/_stcore/stream", subprotocols=["streamlit"], origin=bal.url,
                 additional_headers={"Cookie": f"ae_replica={cookie}"}, open_timeout=60, proxy=None):
        on = wait_for(lambda: [i for i, p in ports.items() if sessions_on(p)], 10, 0.05)
    assert len(on) == 1, on
    return on[0]


def test_a_poll_through_the_balancer_on_sqlite_with_a_replica_killed(balancer, browser):
    bal, url = balancer
    t0 = time.time()
    timings = {}
    # two browsers' sticky cookies, one a replica: the presenter and the Korean learner stay, the English
    # learner's replica is killed
    stay = f"presenterbrowser{0:04d}"
    home = replica_of(bal, stay)
    cookie = next(c for c in (f"learnerbrowser{i:04d}" for i in range(40)) if replica_of(bal, c) != home)
    killed = 3 - home
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_cookies([{"name": "ae_replica", "value": stay, "url": bal.url}])
    phone = browser.new_context(viewport={"width": 390, "height": 844})
    phone.add_cookies([{"name": "ae_replica", "value": cookie, "url": bal.url}])
    presenter = ctx.new_page()
    link = open_poll(presenter, bal.url, wrong_key_first=False)
    pid = parse_qs(urlsplit(link).query)["poll"][0]
    store = poll.open_store(url)
    assert store.kind == "sqlite" and store.get(pid).is_open
    n = store.get(pid).n_choices
    timings["poll_opened_s"] = round(time.time() - t0, 1)

    seen = []  # the English page's websockets, watched from before it opens: the first, then its reconnect
    en = learner_page(phone, link, "en", watch=lambda page: seen.append(Sockets(page)))
    sockets = seen[0]
    ko = learner_page(ctx, link, "ko")
    for page in (en, ko):
        choices(page).first.wait_for(timeout=60_000)
    assert sessions_on(bal.port + killed) >= 1 and len(sockets.frames) == 1  # the English page, on its replica
    timings["learners_loaded_s"] = round(time.time() - t0, 1)
    me = me_of(en)
    assert me == poll_ui.browser_learner(pid, cookie) and me_of(ko) == poll_ui.browser_learner(pid, stay)
    tap(en, 0)
    tap(en, 1)  # a change of mind
    wait_count(presenter, 1)

    # the English learner's replica killed in the middle of the poll: its answer is kept, its page
    # reconnects through nginx to the other replica, is drawn again from its URL (the same learner)
    old = replica_pid(bal, killed)
    os.kill(old, signal.SIGKILL)
    t_kill = time.time()
    assert store.mine(pid, me) == 1 and sum(store.counts(pid).values()) == 1
    assert wait_for(lambda: sockets.answered(2), 60, 0.2, en), sockets.frames
    en.wait_for_function("() => document.querySelectorAll('.st-key-poll-choices button').length > 0", timeout=30_000)
    timings["reconnected_after_kill_s"] = round(time.time() - t_kill, 1)
    assert chosen(en) == [1] and me_of(en) == me
    tap(en, 2)  # answers again, on the other replica: the answer replaces
    tap(ko, n - 1)
    # the count shows 2 only once the Korean answer is in, and the English one was stored before it:
    # an answer counted twice would show 3
    wait_count(presenter, 2)
    presenter.wait_for_timeout(3 * poll_ui.PRESENTER_REFRESH_S * 1000)  # three more reads of the count
    assert metric(presenter) == "2"
    counts = store.counts(pid)
    assert sum(counts.values()) == 2 and counts[2] == 1 and counts[n - 1] == 1 and store.mine(pid, me) == 2
    timings["answered_s"] = round(time.time() - t0, 1)

    # close, reveal in both languages, ask again (the learners' side of a close and of a reset is seen in
    # the Redis test: here the store's, without waiting for the learners' timer twice more)
    close = presenter.get_by_role("button", name=i18n.t("poll.close", "en"), exact=True)
    close.click()
    presenter.wait_for_function("() => [...document.querySelectorAll('.st-key-poll-actions button')]"
                                f".some(b => b.innerText.trim() === {i18n.t('poll.close', 'en')!r} && b.disabled)",
                                timeout=15_000)
    with pytest.raises(poll.PollClosed):
        store.answer(pid, me, 0)
    presenter.get_by_role("button", name=i18n.t("poll.reveal", "en"), exact=True).click()
    for page, lang in ((en, "en"), (ko, "ko")):
        sees_the_reveal(page, lang, 2)
        assert all(choices(page).nth(i).is_disabled() for i in range(n))
    presenter.get_by_role("button", name=i18n.t("poll.reset", "en"), exact=True).click()
    wait_count(presenter, 0)
    assert sum(store.counts(pid).values()) == 0 and store.get(pid).is_open
    for page in (presenter, en, ko):
        no_exception(page)
    assert replica_pid(bal, killed) != old  # serve.sh started it again
    timings["done_s"] = round(time.time() - t0, 1)
    print("\npoll through the balancer, timings:", timings)
    phone.close()
    ctx.close()
