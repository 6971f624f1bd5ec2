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

from explorer import access, i18n, state, store

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
    b = access.SESSION.fresh()  # 3 free, then 5 s doubling, at most 900 s, forgotten after an hour
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


def test_the_address_back_off_is_per_address_and_kept_in_the_store():
    limits = access.AddressLimits(free=2, base=2.0, cap=60.0, store=store.MemoryStore(max_entries=3))
    assert limits.failed("203.0.113.7", 0.0) == 0.0
    assert limits.failed("203.0.113.7", 0.0) == 2.0
    assert limits.wait("203.0.113.7", 1.0) == 1.0
    assert limits.wait("198.51.100.1", 1.0) == 0.0  # another address is not held back
    assert limits.failed(None, 0.0) == 0.0 and limits.wait(None, 0.0) == 0.0  # unknown: no entry
    for i in range(10):
        limits.failed(f"192.0.2.{i}", 2.0)
    assert len(limits.store) == 3 and limits.wait("203.0.113.7", 1.5) == 0.0  # the oldest went first


def test_x_forwarded_for_is_read_only_from_a_configured_proxy_rightmost_untrusted_first(monkeypatch):
    monkeypatch.delenv(access.TRUSTED_ENV, raising=False)
    fc = access.forwarded_client
    # default: no proxy is trusted, the header is anyone's to write
    assert fc("93.184.216.34", "203.0.113.7") == "93.184.216.34"
    assert fc("10.0.0.3", "203.0.113.7") == "10.0.0.3"  # a private peer is no longer trusted by default
    assert fc(None, "203.0.113.7") == "127.0.0.1"  # loopback (Streamlit reports None) is not either
    # behind scripts/serve.sh: its nginx on loopback, which appends the address it saw
    local = "127.0.0.1"
    assert fc(None, "203.0.113.7", local) == "203.0.113.7"
    assert fc(None, "6.6.6.6, 203.0.113.7", local) == "203.0.113.7"  # a client's own forged entry is left of it
    assert fc(None, "203.0.113.7, 127.0.0.1", local) == "203.0.113.7"  # a tunnel on this machine: skipped
    assert fc(None, None, local) == "127.0.0.1" and fc(None, "", local) == "127.0.0.1"
    assert fc(None, "<b>, junk", local) == "127.0.0.1"  # junk: the proxy's own view stays
    assert fc(None, "junk, 203.0.113.7", local) == "203.0.113.7"
    # compose or an ingress: configured by range
    assert fc("172.18.0.5", "203.0.113.7", "172.16.0.0/12") == "203.0.113.7"
    assert fc("172.18.0.5", "203.0.113.7, 172.18.0.9", "172.16.0.0/12, 127.0.0.1") == "203.0.113.7"
    assert fc("93.184.216.34", "203.0.113.7", "172.16.0.0/12") == "93.184.216.34"  # not a proxy of ours
    assert fc("172.18.0.5", "10.1.2.3, 172.18.0.9", "172.16.0.0/12") == "10.1.2.3"
    monkeypatch.setenv(access.TRUSTED_ENV, "127.0.0.1, not-an-address, ::1")  # read from the environment
    assert fc(None, "203.0.113.7") == "203.0.113.7"
    assert fc("not an address", "203.0.113.7") is None
    assert access.wait_text(0.2) == "1" and access.wait_text(5.0) == "5" and access.wait_text(9.01) == "10"


def test_ipv6_clients_are_counted_per_64_and_ipv4_per_address():
    fc = access.forwarded_client
    assert fc("2001:db8:1:2::1", None, "") == "2001:db8:1:2::/64"
    assert fc("2001:db8:1:2:aaaa:bbbb:cccc:dddd", None, "") == "2001:db8:1:2::/64"  # same household
    assert fc("2001:db8:1:3::1", None, "") == "2001:db8:1:3::/64"  # the next /64: another
    assert fc(None, "2001:db8:1:2::99", "127.0.0.1") == "2001:db8:1:2::/64"
    assert fc("::ffff:203.0.113.7", None, "") == "203.0.113.7"  # IPv4 in an IPv6 socket: the IPv4 address
    assert fc("203.0.113.7", None, "") != fc("203.0.113.8", None, "")
    limits = access.AddressLimits(free=1, store=store.MemoryStore())
    limits.failed(fc("2001:db8:1:2::1", None, ""), 0.0)
    assert limits.wait(fc("2001:db8:1:2::ffff", None, ""), 0.5) > 0  # a new address in the /64 waits too
    assert limits.wait(fc("2001:db8:9::1", None, ""), 0.5) == 0


def test_a_required_code_that_is_missing_stops_the_server_with_a_clear_message():
    for env in ({access.REQUIRE_ENV: "1"}, {access.REQUIRE_ENV: "true", access.ENV: "   "},
                {access.REQUIRE_ENV: " yes ", access.ENV: ""}):
        with pytest.raises(SystemExit) as stop:
            access.check_required(env)
        msg = str(stop.value.code)
        assert access.REQUIRE_ENV in msg and access.ENV in msg and "--access-code generate" in msg
        assert "\n" not in msg  # one paragraph
    for env in ({}, {access.REQUIRE_ENV: "0"}, {access.REQUIRE_ENV: ""}, {access.ENV: "x"},
                {access.REQUIRE_ENV: "1", access.ENV: CODE}):
        access.check_required(env)  # nothing to say


def test_misspelt_trusted_proxies_stop_the_server_with_a_clear_message():
    placeholder = "REPLACE-with-the-ingress-controller-pod-range"  # as deploy/k8s/deployment.yaml ships it
    for spec in (placeholder, "127.0.0.1, 10.0.0.0/33", "10.0.0.0/8,example.org"):
        with pytest.raises(SystemExit) as stop:
            access.check_required({access.TRUSTED_ENV: spec})
        msg = str(stop.value.code)
        assert access.TRUSTED_ENV in msg and "CIDR" in msg and "\n" not in msg
    assert placeholder in str(access.bad_proxies({access.TRUSTED_ENV: placeholder}))
    for spec in ("", "127.0.0.1", "10.244.0.0/16, ::1, 2001:db8::/32"):
        access.check_required({access.TRUSTED_ENV: spec})


def test_a_code_with_fast_reruns_on_is_a_warning_at_start(monkeypatch, caplog):
    from streamlit import config

    caplog.set_level(logging.WARNING, logger="attention_explorer")
    monkeypatch.setattr(config, "get_option", lambda key: key == "runner.fastReruns")
    access.check_required({access.ENV: CODE})
    assert "runner.fastReruns is on" in caplog.text and CODE not in caplog.text
    caplog.clear()
    monkeypatch.setattr(config, "get_option", lambda key: False)
    access.check_required({access.ENV: CODE})
    access.check_required({})
    assert "fastReruns" not in caplog.text


def test_every_attempt_is_compared_and_a_right_code_opens_whatever_waits_run():
    limits = access.AddressLimits(store=store.MemoryStore())
    addr = "203.0.113.7"
    for _ in range(60):  # the address deep in its wait
        limits.failed(addr, 0.0)
    session = access.SESSION.fresh()
    for _ in range(10):  # and this very session too
        assert access.attempt("guess", CODE, session, addr, 1.0, limits)[0] == "wrong"
    assert session.wait(1.0) > 0 and limits.wait(addr, 1.0) > 0
    assert access.attempt(f" {CODE} ", CODE, session, addr, 1.0, limits) == ("granted", 0.0)
    assert session.failures == 0  # the session starts afresh; the address keeps its count
    assert limits.wait(addr, 1.0) > 0
    assert access.attempt("  ", CODE, access.SESSION.fresh(), addr, 1.0, limits) == ("empty", 0.0)


def test_a_wrong_code_is_counted_and_answered_after_a_pause_longer_while_a_wait_runs():
    limits = access.AddressLimits(store=store.MemoryStore())
    session = access.SESSION.fresh()
    answers = [access.attempt("guess", CODE, session, "198.51.100.1", 0.0, limits) for _ in range(4)]
    assert answers[:2] == [("wrong", access.WRONG_DELAY)] * 2  # within the session's free three
    assert answers[2] == ("wrong", 5.0) and answers[3] == ("wrong", access.WAIT_DELAY)  # wait 5, then 10 s
    assert session.failures == 4 and limits.record("198.51.100.1").failures == 4
    short = access.AddressLimits(free=1, base=2.0, cap=3.0, store=store.MemoryStore())  # waits of 2 s, then 3
    assert access.attempt("guess", CODE, access.SESSION.fresh(), "x", 0.0, short) == ("wrong", 2.0)
    assert access.attempt("guess", CODE, access.SESSION.fresh(), "x", 0.0, short) == ("wrong", 3.0)


def simulate_class_behind_one_address(seed: int = 38) -> tuple[int, int]:
    """The issue's scenario, through the form's own callback (``access._check``, Streamlit's bare
    session state; every attempt from a fresh session, a reload): from a class's shared NAT address,
    one wrong code every 300 s for a day, and 1000 learners of that address who each type the right
    code once, at random times after the first four hours (the address's wait runs by then).
    Returns (right codes accepted, learners who arrived while the address's wait ran)."""
    import random

    import streamlit as st

    rng = random.Random(seed)
    events = [(float(t), "wrong-guess") for t in range(0, 24 * 3600, 300)]
    events += [(rng.uniform(4 * 3600, 24 * 3600), CODE) for _ in range(1000)]
    accepted = during_wait = 0
    for now, typed in sorted(events):
        access.clock = lambda now=now: now
        if typed == CODE:
            during_wait += access.ADDRESSES.wait("203.0.113.7", now) > 0
        st.session_state.clear()
        st.session_state[access.INPUT] = typed
        access._check()
        accepted += typed == CODE and st.session_state.get(access.GRANTED) is True
    st.session_state.clear()
    return accepted, during_wait


def test_a_wrong_code_every_300_s_from_a_class_address_keeps_no_right_code_out(monkeypatch):
    monkeypatch.setenv(access.ENV, CODE)
    monkeypatch.setattr(access, "ADDRESSES", access.AddressLimits(store=store.MemoryStore()))
    monkeypatch.setattr(access, "client_address", lambda: "203.0.113.7")
    monkeypatch.setattr(access, "clock", access.clock)  # restored after the simulation moves it
    monkeypatch.setattr(access, "sleep", lambda s: None)
    accepted, during_wait = simulate_class_behind_one_address()
    assert during_wait == 1000  # every learner came while the address waited (the scenario holds)
    assert accepted == 1000


def hammer(sessions: int, seconds: float, limits, fresh: bool = False) -> int:
    """Wrong codes that ``sessions`` pages of one address get answered in ``seconds``, each page
    sending its next code the moment the last is answered (one check at a time per session, as
    Streamlit runs a session's script with runner.fastReruns off); ``fresh``: every code from a new
    session (a reload each time), which only the address's count remembers."""
    import heapq

    pages = [(0.0, i, access.SESSION.fresh()) for i in range(sessions)]
    heapq.heapify(pages)
    answered = 0
    while True:
        t, i, session = heapq.heappop(pages)
        if t >= seconds:
            return answered
        outcome, pause = access.attempt(f"guess {answered}", CODE, session, "203.0.113.7", t, limits)
        assert outcome == "wrong" and pause >= access.WRONG_DELAY
        answered += 1
        heapq.heappush(pages, (t + pause, i, access.SESSION.fresh() if fresh else session))


def test_the_pause_bounds_the_guesses_of_a_page_and_of_an_address():
    hour = 3600.0
    one = hammer(1, hour, access.AddressLimits(store=store.MemoryStore()))
    assert one <= hour / access.WAIT_DELAY + 3  # 720 an hour, and the free ones
    eight = hammer(8, hour, access.AddressLimits(store=store.MemoryStore()))  # serve.sh's 8 pages per address
    assert eight <= 8 * (hour / access.WAIT_DELAY) + 30
    reloading = hammer(8, hour, access.AddressLimits(store=store.MemoryStore()), fresh=True)
    assert reloading <= 8 * (hour / access.WAIT_DELAY) + 30 + 8 * 4
    print(f"wrong codes answered in an hour: one page {one}, eight pages of one address {eight}, "
          f"eight pages reloaded for every code {reloading}")
# --- the app (AppTest) ------------------------------------------------------------------------------

@pytest.fixture
def calls(monkeypatch):
    """The code is set; a fresh address table (in memory); a clock that the test moves, and the pause
    before a wrong code's answer recorded and added to it; and a count of what must not happen
    before the code: the process's preparation, a model load, a run."""
    monkeypatch.setenv(access.ENV, CODE)
    monkeypatch.setattr(access, "ADDRESSES", access.AddressLimits(store=store.MemoryStore()))
    now = [1000.0]
    pauses: list[float] = []
    monkeypatch.setattr(access, "clock", lambda: now[0])

    def pause(seconds):
        pauses.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(access, "sleep", pause)
    seen = {"prepare": 0, "load": 0, "run": 0, "now": now, "pauses": pauses}
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


def test_after_three_wrong_codes_the_session_is_slowed_and_told_yet_the_right_code_opens_at_once(calls):
    at = new_app()
    for _ in range(2):
        at = enter(at, "guess")
        assert [e.value for e in at.error] == [i18n.t("access.wrong")] and not at.warning
    assert calls["pauses"] == [access.WRONG_DELAY] * 2  # each wrong code answered after a second
    at = enter(at, "guess")  # the third: a wait of 5 s starts, and the answer came after it
    assert calls["pauses"][-1] == 5.0
    assert [e.value for e in at.error] == [i18n.t("access.wrong")]
    at = enter(at, "guess")  # the fourth: a 10 s wait; answered after 5 s, 5 s left
    assert calls["pauses"][-1] == access.WAIT_DELAY
    assert [w.value for w in at.warning] == [i18n.t("access.wait", s="5")]
    assert at.session_state[access.LIMIT].failures == 4  # every wrong code counted

    calls["now"][0] += 1.0  # the wait still runs (4 s left) ...
    at.run()
    assert [w.value for w in at.warning] == [i18n.t("access.wait", s="4")]
    before = len(calls["pauses"])
    at = enter(at, CODE)  # ... and the right code is checked and opens the page at once
    assert len(calls["pauses"]) == before
    assert not at.exception and at.title[0].value == "Attention Explorer"


def test_an_address_that_guesses_from_many_sessions_is_slowed_in_every_one_never_kept_out(calls, monkeypatch):
    monkeypatch.setattr(access, "ADDRESSES", access.AddressLimits(free=4, base=30.0, store=store.MemoryStore()))
    monkeypatch.setattr(access, "client_address", lambda: "203.0.113.7")
    for _ in range(2):  # two sessions (two reloads), two wrong codes each: below a session's own limit
        at = new_app()
        for _ in range(2):
            at = enter(at, "guess")
    assert calls["pauses"][-1] == access.WAIT_DELAY  # the address's fourth: a 30 s wait, 5 s of it paused
    assert [w.value for w in at.warning] == [i18n.t("access.wait", s="25")]
    fresh = new_app()  # a new session (a new websocket) of the address sees the wait at once
    assert [w.value for w in fresh.warning] == [i18n.t("access.wait", s="25")]
    fresh = enter(fresh, "guess")  # its first wrong code is slowed by the address's wait
    assert calls["pauses"][-1] == access.WAIT_DELAY
    fresh = enter(fresh, CODE)  # and the right code opens it
    assert not fresh.exception and fresh.title[0].value == "Attention Explorer"

    monkeypatch.setattr(access, "client_address", lambda: "198.51.100.1")  # another learner: no wait
    other = new_app()
    assert not other.warning
    other = enter(other, "typo")
    assert calls["pauses"][-1] == access.WRONG_DELAY
    other = enter(other, CODE)
    assert not other.exception and other.title[0].value == "Attention Explorer"
