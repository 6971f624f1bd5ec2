"""An optional access code for a hosted demo: ``ATTENTION_EXPLORER_ACCESS_CODE``.

Set (and not empty after stripping spaces): every page asks for the code once per session before
anything of the page runs (``explorer/main.py: main()`` returns early while ``granted()`` is False:
no model loaded, no run, nothing of the page drawn). Unset or empty: ``granted()`` is True and the
app is exactly as without this module. The variable is read on every call, never at import.

- **Constant time**: the typed code and the configured one are compared by ``hmac.compare_digest``
  on the SHA-256 digests of their UTF-8 bytes (NFC-normalised, surrounding spaces stripped), so
  neither the content nor the length of the code shows in the time a check takes.
- **Rate-limited**: per session (``SESSION``: 3 wrong codes free, then a wait of 5 s, doubling with
  every further wrong code, at most 15 min) and per process per client address (``ADDRESSES``: 30
  wrong codes free from one address, then 2 s doubling up to 5 min; an address is forgotten an
  hour after its last wrong code). A whole class behind one NAT shares an address, hence its larger
  allowance. While a wait runs, an attempt is refused without being compared or counted, and the
  page says how long to wait. The client address is the connection's peer, or, when that peer is a
  proxy on this machine or a private network (the balancer of scripts/serve.sh, compose, an
  ingress), the last address of ``X-Forwarded-For`` (the one that proxy appended).
- **Never kept, never shown**: the input is a password field inside a form whose key is not in
  the app's URL state; the callback that checks it removes the widget's value from the session
  before anything else (the form clears the field in the browser), and only the boolean
  ``GRANTED`` stays in the session. The code is never logged,
  never put in the URL and never rendered.

The pure parts (``matches``, ``Backoff``, ``AddressLimits``) need no Streamlit; ``granted()`` and
the form are the wiring.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import os
import threading
import time
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass

log = logging.getLogger("attention_explorer")

ENV = "ATTENTION_EXPLORER_ACCESS_CODE"
GRANTED = "_access_granted"  # the only thing a session keeps: True once the right code was given
INPUT = "_access_code"  # the password field's key (never in explorer/main.py's KEEP, never in the URL)
LIMIT = "_access_limit"  # the session's Backoff
NOTICE = "_access_notice"  # what the last attempt gave: "wrong", "wait", "empty" (no input in it)
MAX_CHARS = 256

clock = time.monotonic  # the tests move time forward by replacing it


# --- the pure parts -------------------------------------------------------------------------------

def configured(environ=None) -> str:
    """The access code the server asks for ("" = none: the app is open)."""
    env = os.environ if environ is None else environ
    return _normal(env.get(ENV) or "")


def _normal(text: str) -> str:
    return unicodedata.normalize("NFC", str(text)).strip()


def _digest(text: str) -> bytes:
    return hashlib.sha256(_normal(text).encode("utf-8", "surrogatepass")).digest()


def matches(given: str, code: str) -> bool:
    """Whether ``given`` is ``code``, in constant time: both are hashed to 32 bytes first, then
    compared with ``hmac.compare_digest``. An empty code matches nothing (no code = no gate)."""
    if not _normal(code):
        return False
    return hmac.compare_digest(_digest(given or ""), _digest(code))


@dataclass
class Backoff:
    """Wrong attempts of one party: ``free`` of them cost nothing, then each wrong attempt starts a
    wait of ``base`` seconds doubled per wrong attempt past the free ones, at most ``cap``; the count
    is forgotten ``forget`` seconds after the last wrong attempt."""

    free: int = 3
    base: float = 5.0
    cap: float = 900.0
    forget: float = 3600.0
    failures: int = 0
    until: float = 0.0
    last: float = -math.inf

    def wait(self, now: float) -> float:
        """Seconds before the next attempt may be checked (0: now)."""
        return max(0.0, self.until - now)

    def failed(self, now: float) -> float:
        """Count a wrong attempt at ``now``; returns the wait it starts (0 within the free ones)."""
        if now - self.last > self.forget:
            self.failures = 0
        self.failures += 1
        self.last = now
        past = self.failures - self.free
        if past >= 0:
            self.until = now + min(self.cap, self.base * 2.0 ** min(past, 60))
        return self.wait(now)

    def reset(self) -> None:
        self.failures, self.until, self.last = 0, 0.0, -math.inf


class AddressLimits:
    """One ``Backoff`` per client address, for the whole process (every session of the address),
    thread-safe and bounded: at most ``max_entries`` addresses, the least recently failed first out."""

    def __init__(self, free: int = 30, base: float = 2.0, cap: float = 300.0, forget: float = 3600.0,
                 max_entries: int = 10_000):
        self.free, self.base, self.cap, self.forget, self.max_entries = free, base, cap, forget, max_entries
        self._lock = threading.Lock()
        self._by: OrderedDict[str, Backoff] = OrderedDict()

    def wait(self, address: str | None, now: float) -> float:
        if not address:
            return 0.0
        with self._lock:
            b = self._by.get(address)
            return b.wait(now) if b is not None else 0.0

    def failed(self, address: str | None, now: float) -> float:
        if not address:
            return 0.0
        with self._lock:
            b = self._by.pop(address, None)
            if b is None:
                b = Backoff(self.free, self.base, self.cap, self.forget)
            self._by[address] = b  # now the most recent
            while len(self._by) > self.max_entries:
                self._by.popitem(last=False)
            return b.failed(now)

    def clear(self) -> None:
        with self._lock:
            self._by.clear()

    def __len__(self) -> int:
        return len(self._by)


ADDRESSES = AddressLimits()


def forwarded_client(peer: str | None, forwarded_for: str | None) -> str | None:
    """The client's address from the connection's ``peer`` (None: loopback or unknown) and the
    ``X-Forwarded-For`` header: the header's last address only when the peer is a proxy of ours
    (loopback or a private network), since anyone can send that header."""
    trusted = peer is None
    if peer is not None:
        try:
            ip = ipaddress.ip_address(peer)
            trusted = ip.is_loopback or ip.is_private
        except ValueError:
            return None
    if trusted and forwarded_for:
        last = forwarded_for.split(",")[-1].strip()
        try:
            return str(ipaddress.ip_address(last))
        except ValueError:
            pass
    return peer


def wait_text(seconds: float) -> str:
    """A wait as the page says it: whole seconds, rounded up (never "0")."""
    return str(max(1, math.ceil(seconds)))


# --- the wiring (Streamlit) -----------------------------------------------------------------------

def client_address() -> str | None:
    """This session's client address (see ``forwarded_client``); None when it cannot be told."""
    import streamlit as st  # noqa: PLC0415

    try:
        peer = st.context.ip_address
        headers = st.context.headers
        forwarded = headers.get("X-Forwarded-For") if headers is not None else None
        return forwarded_client(peer, forwarded)
    except Exception:  # no client context (AppTest) or an odd header: per-session limits only
        return None


def _lang() -> str:
    import streamlit as st  # noqa: PLC0415

    from explorer import i18n  # noqa: PLC0415

    lg = st.session_state.get("lang")
    if lg not in i18n.LANGS:
        try:
            lg = st.query_params.get("lang")
        except Exception:
            lg = None
    return i18n.lang_or_default(lg)


def _session_limit() -> Backoff:
    import streamlit as st  # noqa: PLC0415

    limit = st.session_state.get(LIMIT)
    if not isinstance(limit, Backoff):
        limit = st.session_state[LIMIT] = Backoff()
    return limit


def _wait(now: float) -> float:
    return max(_session_limit().wait(now), ADDRESSES.wait(client_address(), now))


def _check() -> None:
    """The form's callback (runs before the script): take the typed code out of the session, then
    refuse (a wait runs), grant, or count a wrong attempt."""
    import streamlit as st  # noqa: PLC0415

    given = st.session_state.get(INPUT)
    st.session_state.pop(INPUT, None)  # the typed code is not kept, whatever follows
    given = given if isinstance(given, str) else ""
    code = configured()
    if not code:
        return
    now = clock()
    if _wait(now) > 0:
        st.session_state[NOTICE] = "wait"
        return
    if not _normal(given):
        st.session_state[NOTICE] = "empty"
        return
    if matches(given, code):
        st.session_state[GRANTED] = True
        st.session_state.pop(NOTICE, None)
        st.session_state.pop(LIMIT, None)
        log.info("access code accepted for a session")
        return
    limit = _session_limit()
    limit.failed(now)
    ADDRESSES.failed(client_address(), now)
    st.session_state[NOTICE] = "wrong"
    log.warning("a wrong access code (%d in this session)", limit.failures)


def _form() -> None:
    """The page before the code: a heading, a line of explanation, the notice of the last attempt
    (or of a wait still running), and the password field in a form."""
    import streamlit as st  # noqa: PLC0415

    from explorer import i18n  # noqa: PLC0415

    lg = _lang()
    st.header(i18n.t("access.heading", lg))
    st.caption(i18n.t("access.explain", lg))
    wait = _wait(clock())
    notice = st.session_state.get(NOTICE)
    if notice == "wrong":
        st.error(i18n.t("access.wrong", lg), icon="🔒")
    elif notice == "empty" and wait == 0:
        st.info(i18n.t("access.empty", lg))
    if wait > 0:
        st.warning(i18n.t("access.wait", lg, s=wait_text(wait)), icon="⏳")
    with st.form("access-form", clear_on_submit=True, enter_to_submit=True, border=False):
        st.text_input(i18n.t("access.label", lg), type="password", key=INPUT, max_chars=MAX_CHARS,
                      autocomplete="off")
        st.form_submit_button(i18n.t("access.submit", lg), type="primary", on_click=_check)


def granted(pages=None) -> bool:
    """True when the page may run: no code is configured, or this session gave it. Otherwise draws
    the access form (and nothing else) and returns False. Never raises: a failure here keeps the
    page closed with a short message.

    ``pages`` (the app's ``st.navigation`` pages, or a function giving them): registered, hidden and
    not run, while the form is shown, so that the page the URL names (``/lessons``) is the one shown
    after the code, rather than the default page."""
    if not configured():
        return True
    import streamlit as st  # noqa: PLC0415

    try:
        if st.session_state.get(GRANTED) is True:
            return True
        if pages is not None:
            st.navigation(pages() if callable(pages) else pages, position="hidden")
        _form()
    except Exception as e:  # Streamlit's rerun and stop are BaseExceptions: they pass through
        log.error("the access form failed: %s", type(e).__name__)  # no traceback: it may quote input
        from explorer import i18n  # noqa: PLC0415

        st.error(i18n.t("access.failed", _lang()))
    return False
