"""Ask the class (issue 36): the presenter's controls and the learners' page, wired to Streamlit.

**The presenter** (presenter mode, ``?present=1``): the bar has an "Ask the class" button
(explorer/main.py calls ``begin`` after ``presenter.begin`` and ``end`` after ``presenter.end``). It opens the
page's questions (``offer_view``: "which token does this head attend to?" from the explorer's
selection; ``offer_lesson``: the lesson's question with choices) as a poll in the shared store
(explorer/poll.py), then shows the poll above the page, drawn before the page itself (so a page drawn
again, after a reconnect or a change of view, shows it before its figures): a large QR code and the
short link of the learner page, the live count of answers, and buttons to close, reveal, ask again
(reset) and end. The count is a fragment of its own that reads the counts and nothing else, re-run by
the page's timer every ``PRESENTER_REFRESH_S`` (bench/poll.py measures how soon it shows an answer).
Only the presenter can: where
``ATTENTION_EXPLORER_PRESENTER_KEY`` is set (scripts/serve.sh makes one and prints it), the
controls ask for it once per session (compared in constant time, wrong keys slowed as wrong access
codes are: explorer/access.py); a hosted server without a key offers no poll and says what to set;
a laptop (not hosted, no access code) needs no key. The key is never in a URL: the learner link
holds only the poll's id (and the presenter's language).

**The learners** (``?poll=<id>``, ``learner_page``): explorer/main.py serves it instead of the
explorer, after the access code where one is set, without loading a model: the question, the
sentence, one button a choice (tokens as buttons), one tap to answer and a tap to change it while
the poll is open; then the reveal: the class's histogram beside the model's weights for that query
(explorer/views/poll.py), in the learner's language. Each browser's page has an anonymous learner id
(``me`` in its URL, made on its first run: from the balancer's sticky cookie where there is one, so a
second tab of the same browser is the same learner), so a page that reconnects, or is drawn again by
another replica after its own was killed, answers as the same learner: its answer replaces, never adds.
Answers are bounded per page (explorer/quota.py, kind "answer") and per poll (``poll.MAX_LEARNERS``).

Question, choices and sentence are user text: escaped for markdown (``md``), plain text elsewhere,
escaped in figures; never HTML.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import re
import time

import streamlit as st

from explorer import access, failures, i18n, poll, presenter, quota
from explorer.poll_questions import Ask, answer_of, weights_of
from explorer.views import poll as poll_view
from explorer.views import style

log = logging.getLogger("attention_explorer")

PARAM = "poll"
LEARNER_PARAM = "me"
ASKED = "asked"  # the presenter page's URL: the poll it shows (an id learners have too; never the key)
KEY_ENV = "ATTENTION_EXPLORER_PRESENTER_KEY"
PRESENTER_REFRESH_S = 0.5  # the presenter's count is read again this often (one read of the counts a time)
LEARNER_REFRESH_S = 3.0  # a learner's page sees a close, a reveal or a reset this soon
QR_PX = 420  # the learner link's QR code, large enough to scan from the back of a room

LIVE = "_poll_live"  # the poll the presenter shows
GRANTED = "_poll_presenter"  # True once this session gave the presenter key
OFFERS = "_poll_offers"  # the questions this page run can open: {name: (what, make)}
KEY_INPUT = "_poll_key"  # the key's password field (never kept: popped by the check)
KEY_LIMIT = "_poll_key_limit"
KEY_NOTICE = "_poll_key_notice"
NOTICE = "_poll_notice"  # a learner's refused answer, or the presenter's failed change
ME = "_poll_me"

# the words of each refusal (poll.PollError.code) and each state of a poll
REFUSED = {"unknown": "poll.refused.unknown", "closed": "poll.refused.closed", "stale": "poll.refused.stale",
           "choice": "poll.refused.choice", "full": "poll.refused.full", "learner": "poll.refused.learner"}
STATE_WORDS = {"open": "poll.state_open", "closed": "poll.state_closed", "revealed": "poll.state_revealed"}
_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=])")
# constant CSS (no user text): the learner's page fits a phone; the poll panel's downloads are shown in
# presenter mode (whose CSS hides the figures' own)
LEARNER_CSS = """<style>
.stMainBlockContainer { max-width: 46rem; padding-top: 1.5rem; }
.st-key-poll-choices button { min-height: 3rem; font-size: 1.1rem; }
</style>"""
PANEL_CSS = """<style>
.st-key-poll-panel [data-testid="stDownloadButton"] { display: block; }
.st-key-poll-qr img { image-rendering: pixelated; }
</style>"""


def md(text: str) -> str:
    """User text for a markdown element (a heading, a button's label): every markdown character escaped."""
    return _MD.sub(r"\\\1", str(text))


def _lang() -> str:
    return access.page_lang()


def _t(key: str, **kw) -> str:
    return i18n.t(key, _lang(), **kw)


def _store():
    return poll.shared()


def _failed(what: str) -> None:
    """The store failed: a log id on the page, the details in the log."""
    st.error(_t("poll.store_failed", id=failures.logged(log, "polls: %s failed", what)), icon="⚠️")


# --- the learner's page -----------------------------------------------------------------------------

def wanted() -> bool:
    """Whether this run is a learner's page (``?poll=`` in the URL)."""
    try:
        return bool(st.query_params.get(PARAM))
    except Exception:
        return False


_COOKIE_RE = re.compile(r"[A-Za-z0-9]{16,128}")


def browser_learner(pid: str, cookie) -> str | None:
    """The learner id of a browser that carries the balancer's sticky cookie (``ae_replica``: a random
    value nginx gives each browser, scripts/serve.sh and deploy/nginx.conf): a hash of it and the
    poll, so a second tab or a second scan of the QR code is the same learner, and the cookie itself
    is never stored. None without such a cookie (a laptop)."""
    if not isinstance(cookie, str) or not _COOKIE_RE.fullmatch(cookie):
        return None
    digest = hashlib.sha256(f"attention-explorer-poll:{pid}:{cookie}".encode()).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def learner_id(pid: str) -> str:
    """This browser page's anonymous id: the URL's (``me``) when it has one, else the browser's (its
    sticky cookie, ``browser_learner``), else a new random one; kept in the session and in the URL,
    so that a page drawn again after a reconnect, on any replica, answers as the same learner."""
    me = st.session_state.get(ME)
    if not poll.valid_learner(me):
        given = st.query_params.get(LEARNER_PARAM)
        if poll.valid_learner(given):
            me = given
        else:
            try:
                cookie = st.context.cookies.get("ae_replica")
            except Exception:
                cookie = None
            me = browser_learner(pid, cookie) or poll.new_learner_id()
        st.session_state[ME] = me
    if st.query_params.get(LEARNER_PARAM) != me:
        st.query_params[LEARNER_PARAM] = me
    return me


def _answer(pid: str, me: str, choice: int, rnd: int) -> None:
    """A choice's button: the answer, stored (or a refusal, said on the page)."""
    st.session_state.pop(NOTICE, None)
    try:
        quota.charge("answer")
        poll.shared().answer(pid, me, choice, round=rnd)
    except quota.Refused as e:
        st.session_state[NOTICE] = ("quota", e.message(_lang()))
    except poll.PollError as e:
        st.session_state[NOTICE] = ("refused", e.code)
    except Exception:
        st.session_state[NOTICE] = ("failed", failures.logged(log, "polls: an answer failed"))


def _notice() -> None:
    got = st.session_state.pop(NOTICE, None)
    if not got:
        return
    kind, value = got
    if kind == "quota":
        st.warning(value, icon="⏳")
    elif kind == "refused":
        st.warning(_t(REFUSED.get(value, "poll.refused.unknown")), icon="✋")
    else:
        st.error(_t("poll.store_failed", id=value), icon="⚠️")


def learner_page() -> None:
    """The whole page of ``?poll=<id>``. Never raises (a log id instead of a traceback)."""
    try:
        st.html(LEARNER_CSS)
        if "lang" not in st.session_state:
            st.session_state["lang"] = _lang()
        st.radio(i18n.t("language", _lang()), i18n.LANGS, key="lang", horizontal=True,
                 format_func=lambda x: i18n.LANG_NAMES[x], label_visibility="collapsed")
        if st.query_params.get("lang") != _lang():
            st.query_params["lang"] = _lang()
        pid = str(st.query_params.get(PARAM) or "")
        if not poll.valid_id(pid):
            st.warning(_t("poll.refused.unknown"), icon="🔎")
            return
        me = learner_id(pid)
        st.fragment(run_every=LEARNER_REFRESH_S)(_learner_body)(pid, me)
    except Exception as e:  # no traceback ever reaches a learner
        st.error(i18n.t("crash", _lang(), kind=type(e).__name__, id=failures.logged(log, "the poll page failed")))


def _learner_body(pid: str, me: str) -> None:
    lg = _lang()
    try:
        store = _store()
        p = store.get(pid)
        mine = store.mine(pid, me)
        counts = store.counts(pid) if p.revealed else None
    except poll.UnknownPoll:
        st.warning(_t("poll.refused.unknown"), icon="🔎")
        return
    except Exception:
        _failed("reading a poll")
        return
    st.caption(_t("poll.learner_title"))
    st.subheader(md(p.question_in(lg)), anchor=False)
    sentence = p.meta.get("sentence")
    if isinstance(sentence, str) and sentence:
        st.text(style.plain_text(sentence, 400))
    choices = p.choices_in(lg)
    row = st.container(key="poll-choices", horizontal=True, gap="small")
    for i, c in enumerate(choices):
        row.button(md(c), key=f"poll_choice_{i}", type="primary" if mine == i else "secondary",
                   disabled=not p.is_open, on_click=_answer, args=(pid, me, i, p.round))
    _notice()
    if p.is_open:
        if mine is None:
            st.info(_t("poll.tap"), icon="👆")
        else:
            st.success(md(_t("poll.yours_open", choice=choices[mine])), icon="✅")
        return
    if mine is not None:
        st.caption(md(_t("poll.yours_closed", choice=choices[mine])))
    if not p.revealed:
        st.info(_t("poll.closed_wait"), icon="⏳")
        return
    _reveal(p, counts, lg, key=f"poll-learner-fig-{p.round}")


def _figure(p: poll.Poll, counts: dict, lg: str):
    return poll_view.class_and_model(p.choices_in(lg), counts, weights=weights_of(p), answer=answer_of(p),
                                     labels=i18n.fig_labels(lg), title=p.question_in(lg)[:120])


def _reveal(p: poll.Poll, counts: dict, lg: str, key: str, presented: bool = False) -> None:
    fig = _figure(p, counts, lg)
    st.plotly_chart(presenter.presented(fig) if presented else fig, width="stretch", key=key,
                    config={"displaylogo": False, "displayModeBar": False})
    ans = answer_of(p)
    if p.meta.get("kind") == "token" and ans is not None:
        st.markdown(md(_t("poll.model_says", choice=p.choices_in(lg)[ans], w=f"{weights_of(p)[ans]:.2f}",
                          l=p.meta.get("layer", 0), h=p.meta.get("head", 0))))
    elif ans is not None:
        st.markdown(md(_t("poll.lesson_says", choice=p.choices_in(lg)[ans])))
        why = p.meta.get("why", {})
        if isinstance(why, dict) and isinstance(why.get(lg) or why.get("en"), str):
            st.caption(md(why.get(lg) or why.get("en")))


# --- the presenter: what the page offers ------------------------------------------------------------

def begin(token) -> None:
    """After ``presenter.begin`` (explorer/main.py): in presenter mode, the "Ask the class" button in
    the presenter's bar, and the poll on show above the page, drawn now, before the page. Never raises."""
    if token is None or not getattr(token, "on", False) or getattr(token, "bar", None) is None:
        return
    try:
        start_run()
        token.ask = token.bar.popover(_t("poll.ask"), icon=":material/how_to_vote:").empty()
        token.panel = st.container(key="poll-panel")
    except Exception:
        log.exception("polls: the presenter's button failed")
        return
    show_live(token.panel)


def end(token) -> None:
    """After the page and ``presenter.end``: the button's contents (the questions the page offered).
    Never raises."""
    if token is not None and getattr(token, "on", False):
        presenter_controls(getattr(token, "ask", None))


def start_run() -> None:
    """At the start of a presenter page's run (presenter.begin): no offers until the page makes them;
    the poll on show comes back from the URL (``asked``) to a page drawn again after a reconnect (its
    replica killed): the count and the QR code at once, the controls after the presenter key."""
    st.session_state[OFFERS] = {}
    if not st.session_state.get(LIVE):
        try:
            asked = st.query_params.get(ASKED)
        except Exception:
            asked = None
        if poll.valid_id(asked):
            st.session_state[LIVE] = asked


def offer(name: str, what: str, make) -> None:
    """The page offers a question: ``what`` (its words for the presenter, in the page's language),
    ``make(query)`` -> an Ask (or None). Only in presenter mode; never raises."""
    try:
        if presenter.active():
            st.session_state.setdefault(OFFERS, {})[name] = (what, make)
    except Exception:
        log.exception("polls: an offer failed")


def offer_view(run, sel, texts) -> None:
    """The explorer's selection: which token does this head attend to (the query chosen in the controls)."""
    if not presenter.active():
        return
    from explorer.poll_questions import queries, token_question

    try:
        qs = queries(run, sel.block, sel.sentence, sel.layer)
    except Exception:
        log.exception("polls: the view's queries failed")
        return
    if not qs:
        return

    def make(query: int) -> Ask | None:
        return token_question(run, model=sel.model, block=sel.block, layer=sel.layer, head=sel.head,
                              sentence=sel.sentence, query=query, text=texts[sel.sentence])

    st.session_state.setdefault(OFFERS, {})["view"] = (_t("poll.offer_view", l=sel.layer, h=sel.head), make, qs,
                                                       min(max(int(sel.query), 0), len(qs) - 1))


def offer_lesson(lesson, runs, texts) -> None:
    """The lesson's question (with choices) on the lessons page."""
    if not presenter.active():
        return
    from explorer.poll_questions import lesson_question

    def make(_query=None) -> Ask | None:
        return lesson_question(lesson, runs, "\n".join(texts))

    offer("lesson", _t("poll.offer_lesson", n=lesson.number), make)


# --- the presenter: the key ---------------------------------------------------------------------------

def presenter_key(environ=None) -> str:
    env = os.environ if environ is None else environ
    return (env.get(KEY_ENV) or "").strip()


def may_ask(environ=None) -> str:
    """"yes" (no key needed: a laptop), "key" (the session must give the key), "no" (a hosted server
    without a key: polls cannot be opened)."""
    from explorer import edges

    if presenter_key(environ):
        return "key"
    return "no" if edges.guarded(environ) else "yes"


def _check_key() -> None:
    given = st.session_state.pop(KEY_INPUT, None)
    key = presenter_key()
    if not key:
        return
    limit = st.session_state.get(KEY_LIMIT)
    if not isinstance(limit, access.Backoff):
        limit = st.session_state[KEY_LIMIT] = access.SESSION.fresh()
    outcome, pause = access.attempt(given, key, limit, access.client_address(), access.clock())
    del given
    if outcome == "granted":
        st.session_state[GRANTED] = True
        st.session_state.pop(KEY_NOTICE, None)
        log.info("polls: the presenter key was given")
        return
    st.session_state[KEY_NOTICE] = outcome
    if outcome == "wrong":
        log.warning("polls: a wrong presenter key")
        access.sleep(pause)


def _granted() -> bool:
    how = may_ask()
    return how == "yes" or (how == "key" and st.session_state.get(GRANTED) is True)


# --- the presenter: opening and running a poll -----------------------------------------------------

def _open(name: str) -> None:
    got = st.session_state.get(OFFERS, {}).get(name)
    st.session_state.pop(NOTICE, None)
    if not got or not _granted():
        return
    make = got[1]
    query = st.session_state.get("poll_query")
    try:
        ask = make(int(query) if query is not None else None)
        if ask is None:
            st.session_state[NOTICE] = ("cannot", "")
            return
        st.session_state[LIVE] = poll.shared().create(ask.question, ask.choices, meta=ask.meta)
    except Exception:
        st.session_state[NOTICE] = ("failed", failures.logged(log, "polls: opening a poll failed"))


def _change(pid: str, how: str) -> None:
    if not _granted():
        return
    try:
        if how == "end":
            st.session_state.pop(LIVE, None)
            return
        getattr(poll.shared(), how)(pid)
    except Exception:
        st.session_state[NOTICE] = ("failed", failures.logged(log, "polls: %s failed", how))


def _sync_url() -> None:
    """The presenter page's URL names the poll on show (``asked``), so a page drawn again shows it."""
    live = st.session_state.get(LIVE)
    try:
        if live and st.query_params.get(ASKED) != live:
            st.query_params[ASKED] = live
        elif not live and ASKED in st.query_params:
            del st.query_params[ASKED]
    except Exception:
        log.exception("polls: the presenter's URL")


def presenter_controls(where) -> None:
    """After the page: the ask button's contents (``where``: the questions the page offered). Never raises."""
    if where is None:
        return
    try:
        with where.container():
            _ask_controls()
    except Exception:
        log.exception("polls: the presenter's controls failed")
    _sync_url()


def show_live(panel) -> None:
    """The poll on show (if any) in ``panel``: a fragment (its buttons re-run it, not the page) with the
    count in a fragment of its own, which the page's timer re-runs. Never raises."""
    if panel is None or not st.session_state.get(LIVE):
        return
    try:
        with panel:
            st.html(PANEL_CSS)
            st.fragment(_live)()
    except Exception:
        log.exception("polls: the presenter's panel failed")


def _ask_controls() -> None:
    how = may_ask()
    if how == "no":
        st.info(_t("poll.no_key", env=KEY_ENV), icon="🔑")
        return
    if how == "key" and st.session_state.get(GRANTED) is not True:
        notice = st.session_state.get(KEY_NOTICE)
        if notice == "wrong":
            st.error(_t("poll.key_wrong"), icon="🔒")
        with st.form("poll-key-form", clear_on_submit=True, enter_to_submit=True, border=False):
            st.text_input(_t("poll.key_label"), type="password", key=KEY_INPUT, max_chars=access.MAX_CHARS,
                          autocomplete="off", help=_t("poll.key_help"))
            st.form_submit_button(_t("poll.key_submit"), on_click=_check_key, key="poll_key_submit")
        return
    offers = st.session_state.get(OFFERS) or {}
    if not offers:
        st.caption(_t("poll.nothing"))
        return
    if "view" in offers:
        what, _make, qs, default = offers["view"]
        if st.session_state.get("poll_query") not in range(len(qs)):
            st.session_state["poll_query"] = default
        st.selectbox(_t("poll.query"), list(range(len(qs))), key="poll_query", format_func=lambda i: qs[i])
        st.button(what, key="poll_open_view", on_click=_open, args=("view",), type="primary", icon=":material/how_to_vote:")
    if "lesson" in offers:
        st.button(offers["lesson"][0], key="poll_open_lesson", on_click=_open, args=("lesson",), type="primary",
                  icon=":material/how_to_vote:")
    got = st.session_state.get(NOTICE)
    if got and got[0] == "cannot":
        st.warning(_t("poll.cannot", n=poll.MAX_CHOICES), icon="✋")
    elif got and got[0] == "failed":
        st.error(_t("poll.store_failed", id=got[1]), icon="⚠️")


def learner_url(pid: str, lang: str) -> str:
    """The learner link: the app's root with ``?poll=<id>`` (and the language); no key, no state."""
    url = presenter.current_url()
    base = url.split("?", 1)[0]
    page = presenter.page_path(base)
    if page and base.rstrip("/").endswith("/" + page):
        base = base.rstrip("/")[: -len(page) - 1] + "/"
    return presenter.share_url(base, [(PARAM, pid), ("lang", lang)])


@functools.lru_cache(maxsize=32)
def _qr(url: str):
    """The learner link's QR code (made once a link, not at each of the panel's runs)."""
    return presenter.qr_png(url, width=QR_PX)


def _count(pid: str) -> None:
    """The live count: one read of the counts and one element, re-run every ``PRESENTER_REFRESH_S`` by
    the page's timer (nothing else of the page or the panel runs then)."""
    try:
        total = sum(_store().counts(pid).values())
    except Exception:
        _failed("the presenter's count")
        return
    st.metric(_t("poll.count_label"), total, help=_t("poll.count_help", s=f"{PRESENTER_REFRESH_S:g}"))


def _live() -> None:
    pid = st.session_state.get(LIVE)
    _sync_url()  # "end" (a button of this fragment) hides the poll: the URL no longer names it
    if not pid:
        return
    lg = _lang()
    left, right = st.columns([2, 3], vertical_alignment="top")
    title = right.empty()  # the question, above the count
    with right:  # the count first: a page drawn again (a reconnect) shows it before the rest
        st.fragment(run_every=PRESENTER_REFRESH_S)(_count)(pid)
    try:
        store = _store()
        p = store.get(pid)
        counts = store.counts(pid) if p.revealed else None
    except Exception:
        _failed("the presenter's poll")
        return
    title.subheader(md(p.question_in(lg)), anchor=False)
    right.caption(_t(STATE_WORDS.get(p.state, "poll.state_closed")))
    url = learner_url(pid, lg)
    qr = _qr(url)
    with left.container(key="poll-qr"):
        if qr is not None:
            st.image(qr.png, width=qr.scale * qr.modules)
    left.code(url, language=None, wrap_lines=True)
    if not _granted():  # a page drawn again after a reconnect: the controls after the key (the ask button)
        right.caption(_t("poll.key_again"))
        return
    row = right.container(horizontal=True, gap="small", key="poll-actions")
    row.button(_t("poll.close"), key="poll_close", on_click=_change, args=(pid, "close"), disabled=not p.is_open)
    row.button(_t("poll.reveal"), key="poll_reveal", on_click=_change, args=(pid, "reveal"), disabled=p.revealed,
               type="primary")
    row.button(_t("poll.reset"), key="poll_reset", on_click=_change, args=(pid, "reset"))
    row.button(_t("poll.end"), key="poll_end", on_click=_change, args=(pid, "end"))
    got = st.session_state.get(NOTICE)
    if got and got[0] == "failed":
        right.error(_t("poll.store_failed", id=got[1]), icon="⚠️")
    if p.revealed:
        _reveal(p, counts, lg, key=f"poll-presenter-fig-{pid}-{p.round}", presented=True)
        downloads(p, counts, lg)


def downloads(p: poll.Poll, counts: dict, lg: str) -> None:
    """The poll for the teacher: a CSV (question, choice, count; no learner ids) and the reveal's
    figure for slides (PNG, SVG), made when clicked."""
    from explorer.export import renderer

    row = st.container(horizontal=True, gap="small")
    stamp = time.strftime("%Y%m%d-%H%M")
    table = poll_view.class_table(p.question_in(lg), p.choices_in(lg), counts, labels=i18n.fig_labels(lg))
    row.download_button(_t("poll.csv"), data=renderer.table_bytes(table), file_name=f"poll-{p.id}-{stamp}.csv",
                        mime="text/csv", key=f"poll_csv_{p.id}", on_click="ignore", icon=":material/table:")
    reason = renderer.unavailable_reason()
    for fmt, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
        def data(fmt=fmt) -> bytes:
            return renderer.figure_bytes(_figure(p, counts, lg), fmt)

        row.download_button(fmt.upper(), data=data, file_name=f"poll-{p.id}-{stamp}.{fmt}", mime=mime,
                            key=f"poll_{fmt}_{p.id}", on_click="ignore", disabled=reason is not None,
                            help=_t("poll.figure_help") if reason is None else reason.reason)
