"""The optional access code of a hosted demo (explorer/access.py, ATTENTION_EXPLORER_ACCESS_CODE).

Pure parts without Streamlit: the comparison (right, wrong, empty, Unicode, never raising), the
session's and the address's back-off, the client address behind a proxy. Then the app through
AppTest with the variable set (monkeypatch, read at run time): nothing of a page (no model loaded,
no run, no title, no figure) before the code, on the explorer and on /lessons; a wrong code is a
message and still nothing; the right code opens the page for the rest of the session; the code is
never in the URL, the session state or the log, and the typed text is never drawn; the back-off
stops attempts (per session and per address) and says how long to wait; unset or empty: the page
as without the gate."""
from __future__ import annotations

import logging

import pytest
from helpers import APP
from streamlit.testing.v1 import AppTest

from explorer import access, i18n, state

pytestmark = pytest.mark.timeout(600)

CODE = "워크숍-2026 tiger"  # Hangul, a digit, a space inside: what a host might choose


# --- the pure parts ---------------------------------------------------------------------------------

def test_the_comparison_takes_the_right_code_only():
    assert access.matches(CODE, CODE)
    assert access.matches(f"  {CODE}\n", CODE)  # spaces around a pasted code do not count
    for wrong in ("", " ", "워크숍-2026", CODE + "x", CODE.upper(), CODE[:-1], "tiger", "\x00" + CODE):
        assert not access.matches(wrong, CODE), wrong
    assert not access.matches("", "") and not access.matches("x", "  ")  # no code: nothing matches
    assert not access.matches(None, CODE)


def test_the_comparison_of_unicode_is_by_canonical_form_and_never_raises():
    import unicodedata

    nfd = unicodedata.normalize("NFD", CODE)  # Hangul as jamo (a keyboard on another system)
    assert nfd != CODE and access.matches(nfd, CODE) and access.matches(CODE, nfd)
    assert access.matches("café", "cafe\u0301")
    assert not access.matches("cafe", "café")
    assert not access.matches("\ud800", CODE)  # a lone surrogate: compared, no exception
    assert access.matches("🔑" * 200, "🔑" * 200) and not access.matches("🔑" * 199, "🔑" * 200)


def test_the_code_is_read_from_the_environment_at_each_call(monkeypatch):
    monkeypatch.delenv(access.ENV, raising=False)
    assert access.configured() == ""
    monkeypatch.setenv(access.ENV, f" {CODE} ")
    assert access.configured() == CODE
    monkeypatch.setenv(access.ENV, "   ")
    assert access.configured() == ""
    assert access.configured({access.ENV: "abc"}) == "abc"


def test_the_session_back_off_frees_three_then_doubles_up_to_its_cap_and_forgets():
    b = access.Backoff()  # 3 free, then 5 s doubling, at most 900 s, forgotten after an hour
    assert [b.failed(0.0) for _ in range(2)] == [0.0, 0.0] and b.wait(0.0) == 0
    assert b.failed(0.0) == 5.0  # the third wrong code starts a wait
    assert b.wait(4.0) == 1.0 and b.wait(5.0) == 0.0
    assert b.failed(5.0) == 10.0 and b.failed(15.0) == 20.0 and b.failed(35.0) == 40.0
    for _ in range(20):
        b.failed(1000.0)
    assert b.wait(1000.0) == 900.0  # capped
    assert b.failed(1000.0 + 900 + 3601) == 0.0  # an hour quiet: a fresh count
    b.reset()
    assert b.failures == 0 and b.wait(0.0) == 0


def test_the_address_back_off_is_per_address_thread_safe_and_bounded():
    limits = access.AddressLimits(free=2, base=2.0, cap=60.0, max_entries=3)
    assert limits.failed("203.0.113.7", 0.0) == 0.0
    assert limits.failed("203.0.113.7", 0.0) == 2.0
    assert limits.wait("203.0.113.7", 1.0) == 1.0
    assert limits.wait("198.51.100.1", 1.0) == 0.0  # another address is not held back
    assert limits.failed(None, 0.0) == 0.0 and limits.wait(None, 0.0) == 0.0  # unknown: no entry
    for i in range(10):
        limits.failed(f"192.0.2.{i}", 2.0)
    assert len(limits) == 3 and limits.wait("203.0.113.7", 1.5) == 0.0  # the oldest went first

    import threading

    many = access.AddressLimits(free=1000)
    threads = [threading.Thread(target=lambda: [many.failed("a", 0.0) for _ in range(200)]) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert many._by["a"].failures == 800


def test_the_client_address_trusts_x_forwarded_for_from_a_local_or_private_proxy_only():
    # behind scripts/serve.sh: the replica's peer is nginx on loopback (st.context gives None)
    assert access.forwarded_client(None, "10.9.8.7, 203.0.113.7") == "203.0.113.7"
    assert access.forwarded_client("172.18.0.5", "203.0.113.7") == "203.0.113.7"  # compose, an ingress
    assert access.forwarded_client("93.184.216.34", "203.0.113.7") == "93.184.216.34"  # a public peer: its own
    assert access.forwarded_client("93.184.216.34", None) == "93.184.216.34"
    assert access.forwarded_client(None, None) is None
    assert access.forwarded_client(None, "not an address") is None
    assert access.forwarded_client("10.0.0.3", "<b>, junk") == "10.0.0.3"
    assert access.forwarded_client(None, "2001:db8::1") == "2001:db8::1"
    assert access.wait_text(0.2) == "1" and access.wait_text(5.0) == "5" and access.wait_text(9.01) == "10"


# --- the app (AppTest) ------------------------------------------------------------------------------

@pytest.fixture
def calls(monkeypatch):
    """The code is set; a fresh process-wide address table; a clock that the test moves; and a
    count of what must not happen before the code: the process's preparation, a model load, a run."""
    monkeypatch.setenv(access.ENV, CODE)
    monkeypatch.setattr(access, "ADDRESSES", access.AddressLimits())
    now = [1000.0]
    monkeypatch.setattr(access, "clock", lambda: now[0])
    seen = {"prepare": 0, "load": 0, "run": 0, "now": now}
    for name, key in (("prepare_process", "prepare"), ("load_model", "load"), ("run", "run")):
        real = getattr(state, name)

        def counting(*a, _real=real, _key=key, **kw):
            seen[_key] += 1
            return _real(*a, **kw)

        monkeypatch.setattr(state, name, counting)
    return seen


def new_app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def gate_shown(at: AppTest, lang: str = "en") -> bool:
    return [h.value for h in at.header] == [i18n.t("access.heading", lang)] and len(at.text_input) == 1


def assert_nothing_of_the_page(at: AppTest, calls: dict) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert gate_shown(at) or gate_shown(at, "ko")
    assert len(at.get("plotly_chart")) == 0 and len(at.title) == 0 and len(at.text) == 0
    assert len(at.sidebar.children) == 0  # no navigation drawn, no controls
    assert (calls["prepare"], calls["load"], calls["run"]) == (0, 0, 0)


def enter(at: AppTest, code: str) -> AppTest:
    field = at.text_input(key=access.INPUT)
    assert field.proto.type == field.proto.PASSWORD
    field.input(code)
    [submit] = [b for b in at.button if b.label in (i18n.t("access.submit", "en"), i18n.t("access.submit", "ko"))]
    return submit.click().run()


def assert_code_kept_nowhere(at: AppTest, *codes: str) -> None:
    """Not in the URL, nowhere in the session's state (user values, widget values, internal layers
    included: the field's value is gone after a check), and not on the page. ``codes`` are checked
    literally; "tiger", which every code typed in these tests holds in ASCII, also in the state's
    repr (a serialized widget value escapes Hangul)."""
    for name, value in dict(at.query_params).items():
        assert not any(c in f"{name}={value}" for c in codes), name
    assert at.session_state.get(access.INPUT, "") == ""
    assert not any(isinstance(v, str) and any(c in v for c in codes) for v in at.session_state.values())
    inner = at._session_state._state  # SessionState: _old_state, _new_session_state, _new_widget_state
    layers = repr((inner._old_state, inner._new_session_state, inner._new_widget_state))
    assert "tiger" not in layers and not any(c in layers for c in codes)
    shown = [str(e.value) for kind in ("title", "header", "subheader", "markdown", "caption", "text", "code",
                                       "error", "warning", "info", "success") for e in at.get(kind)]
    assert not any(c in s for s in shown for c in codes)


def test_unset_or_empty_the_page_is_as_without_the_gate(monkeypatch):
    for value in (None, "", "   "):
        if value is None:
            monkeypatch.delenv(access.ENV, raising=False)
        else:
            monkeypatch.setenv(access.ENV, value)
        at = new_app(view="scores")
        assert not at.exception
        assert at.title[0].value == "Attention Explorer" and len(at.get("plotly_chart")) >= 1
        assert not any(h.value == i18n.t("access.heading") for h in at.header)
        assert access.GRANTED not in at.session_state


def test_nothing_of_the_page_before_the_code_a_wrong_code_is_a_message_the_right_one_opens_it(calls, caplog):
    caplog.set_level(logging.DEBUG)
    at = new_app(view="scores", model="seed")
    assert_nothing_of_the_page(at, calls)
    assert not at.error and not at.warning

    wrong = "<b>tiger</b> **x** [a](javascript:1)"  # markup that must never be drawn
    at = enter(at, wrong)
    assert_nothing_of_the_page(at, calls)
    assert [e.value for e in at.error] == [i18n.t("access.wrong")]
    assert_code_kept_nowhere(at, wrong, CODE)
    assert at.session_state.get(access.GRANTED) is not True

    at = enter(at, "   ")  # nothing typed: said, not counted
    assert_nothing_of_the_page(at, calls)
    assert [i.value for i in at.info] == [i18n.t("access.empty")]
    assert at.session_state[access.LIMIT].failures == 1

    at = enter(at, f" {CODE} ")
    assert not at.exception and not at.error
    assert at.title[0].value == "Attention Explorer" and len(at.get("plotly_chart")) >= 1
    assert calls["prepare"] >= 1 and calls["run"] >= 1
    assert not gate_shown(at)
    assert at.session_state[access.GRANTED] is True
    assert access.INPUT not in at.session_state  # the field is gone, and its value with it
    assert at.query_params["view"] in ("scores", ["scores"])  # the URL's state survived the gate
    assert_code_kept_nowhere(at, wrong, CODE)

    # the rest of the session: reruns and changes, never asked again
    at.run()
    at.sidebar.slider(key="head").set_value(2).run()
    assert not at.exception and not gate_shown(at) and len(at.get("plotly_chart")) >= 1
    assert at.session_state["head"] == 2
    assert_code_kept_nowhere(at, wrong, CODE)

    assert CODE not in caplog.text and "tiger" not in caplog.text  # the log says what happened, not what was typed
    assert "a wrong access code" in caplog.text


def test_the_gate_speaks_the_urls_language(calls):
    at = new_app(lang="ko")
    assert gate_shown(at, "ko")
    at = enter(at, "틀림")
    assert [e.value for e in at.error] == [i18n.t("access.wrong", "ko")]
    assert_nothing_of_the_page(at, calls)


def test_the_lessons_page_is_gated_too_and_is_the_page_shown_after_the_code(calls):
    at = new_app(lesson="2")
    assert_nothing_of_the_page(at, calls)
    at.switch_page("lessons/page.py").run()  # /lessons, registered (hidden) by the gate
    assert_nothing_of_the_page(at, calls)
    at = enter(at, "nope")
    assert_nothing_of_the_page(at, calls)
    at = enter(at, CODE)
    assert not at.exception and not at.error
    assert at.title[0].value == i18n.t("lessons.title")
    heading = i18n.t("lessons.heading", "en", n=2, title=i18n.t("lesson.2.title"))
    assert heading in [h.value for h in at.header]
    assert_code_kept_nowhere(at, CODE)


def test_after_three_wrong_codes_the_session_waits_and_is_told_how_long(calls):
    at = new_app()
    for _ in range(3):
        at = enter(at, "guess")
        assert [e.value for e in at.error] == [i18n.t("access.wrong")]
    assert [w.value for w in at.warning] == [i18n.t("access.wait", s="5")]  # with the third "wrong"

    calls["now"][0] += 2.0
    at = enter(at, CODE)  # even the right code is not checked while the wait runs
    assert_nothing_of_the_page(at, calls)
    assert not at.error  # refused, not "wrong"
    assert [w.value for w in at.warning] == [i18n.t("access.wait", s="3")]
    assert at.session_state[access.LIMIT].failures == 3  # refused, not counted

    calls["now"][0] += 3.0
    at = enter(at, "guess again")  # the fourth wrong code: 10 s
    assert [w.value for w in at.warning] == [i18n.t("access.wait", s="10")]
    calls["now"][0] += 10.0
    at.run()
    assert not at.warning  # the wait is over
    at = enter(at, CODE)
    assert not at.exception and at.title[0].value == "Attention Explorer"


def test_an_address_that_guesses_from_many_sessions_waits_in_every_one(calls, monkeypatch):
    monkeypatch.setattr(access, "ADDRESSES", access.AddressLimits(free=4, base=30.0))
    monkeypatch.setattr(access, "client_address", lambda: "203.0.113.7")
    for _ in range(2):  # two sessions (two reloads), two wrong codes each: below a session's own limit
        at = new_app()
        for _ in range(2):
            at = enter(at, "guess")
    assert [w.value for w in at.warning] == [i18n.t("access.wait", s="30")]
    fresh = new_app()  # a new session from the same address waits too, and is told so at once
    assert [w.value for w in fresh.warning] == [i18n.t("access.wait", s="30")]
    fresh = enter(fresh, CODE)
    assert_nothing_of_the_page(fresh, calls)

    monkeypatch.setattr(access, "client_address", lambda: "198.51.100.1")  # another learner
    other = enter(new_app(), CODE)
    assert not other.exception and other.title[0].value == "Attention Explorer"
