"""An optional access code for a hosted demo: ``ATTENTION_EXPLORER_ACCESS_CODE``.

Set (and not empty after stripping spaces): every page asks for the code once per session before
anything of the page runs (``explorer/main.py: main()`` returns early while ``granted()`` is False:
no model loaded, no run, nothing of the page drawn). Unset or empty: ``granted()`` is True and the
app is exactly as without this module. The variable is read on every call, never at import.
``ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE=1`` makes a missing code an error at start
(``check_required``: explorer/app.py and scripts/serve.sh call it).

- **Constant time**: the typed code and the configured one are compared by ``hmac.compare_digest``
  on the SHA-256 digests of their UTF-8 bytes (NFC-normalised, surrounding spaces stripped), so
  neither the content nor the length of the code shows in the time a check takes.
- **A right code always opens**: every attempt is compared, whatever waits run, and the right code
  is accepted at once. Nothing a wrong code does (from this tab, another tab, another learner
  behind the same address) can keep a right code out.
- **Wrong codes are slowed, never the right one**: each wrong code is counted for its session
  (``SESSION``: 3 free, then a wait of 5 s doubling up to 15 min) and for its client address
  (``ADDRESSES``: 30 free, then 2 s doubling up to 5 min; forgotten an hour after the last wrong
  code), and is answered only after a pause: ``WRONG_DELAY`` (1 s), or ``WAIT_DELAY`` (5 s, at
  most the rest of the wait) while a wait of the session or its address runs. A session runs one
  check at a time when Streamlit's ``runner.fastReruns`` is off (scripts/serve.sh sets it; with it
  on, ``check_required`` logs a warning), so the pause bounds the guesses a page can make: at most
  720 an hour once a wait runs (README: the bound per address, and why a generated code makes
  guessing hopeless).
- **Shared by the replicas**: the address counts live in ``explorer.store`` (SQLite in
  ``$ATTENTION_EXPLORER_STATE_DIR`` for one host, Redis for several), so a new websocket, a
  reload, or a request sent to another replica (the ``ae_replica`` cookie) meets the same count. A
  store out of reach costs the address's count only (logged), never a page or a right code.
- **The client address**: the connection's peer, unless that peer is a configured proxy
  (``ATTENTION_EXPLORER_TRUSTED_PROXIES``: addresses or CIDR ranges, comma-separated; default
  none; scripts/serve.sh sets 127.0.0.1, its nginx): then the rightmost address of
  ``X-Forwarded-For`` that is not a trusted proxy. IPv6 clients are counted per /64 (one
  household or host), IPv4 per address. (Streamlit's server, uvicorn, already replaces a
  127.0.0.1 peer by its X-Forwarded-For client before the app sees it: uvicorn's
  ``FORWARDED_ALLOW_IPS``.)
- **Never kept, never shown**: the input is a password field inside a form whose key is not in
  the app's URL state; the callback that checks it removes the widget's value from the session
  before anything else (the form clears the field in the browser), and only the boolean
  ``GRANTED`` stays in the session. The code is never logged,
  never put in the URL and never rendered.

The pure parts (``matches``, ``attempt``, ``AddressLimits``, ``forwarded_client``,
``check_required``) need no Streamlit; ``granted()`` and the form are the wiring.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import logging
import math
import os
import time
import unicodedata

from explorer import store as _store
from explorer.store import Backoff

log = logging.getLogger("attention_explorer")

ENV = "ATTENTION_EXPLORER_ACCESS_CODE"
REQUIRE_ENV = "ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE"
TRUSTED_ENV = "ATTENTION_EXPLORER_TRUSTED_PROXIES"
GRANTED = "_access_granted"  # the only thing a session keeps: True once the right code was given
INPUT = "_access_code"  # the password field's key (never in explorer/main.py's KEEP, never in the URL)
LIMIT = "_access_limit"  # the session's Backoff
NOTICE = "_access_notice"  # what the last attempt gave: "wrong", "empty" (no input in it)
MAX_CHARS = 256
SESSION = Backoff(free=3, base=5.0, cap=900.0, forget=3600.0)  # the policy of a session's count
WRONG_DELAY = 1.0  # seconds before a wrong code is answered
WAIT_DELAY = 5.0  # ... while a wait of the session or its address runs (at most the wait's rest)

clock = time.time  # wall clock: the shared store compares times between processes; tests replace it
sleep = time.sleep  # the pause before a wrong code's answer; tests replace it


# --- the pure parts -------------------------------------------------------------------------------

def configured(environ=None) -> str:
    """The access code the server asks for ("" = none: the app is open)."""
    env = os.environ if environ is None else environ
    return _normal(env.get(ENV) or "")


def required(environ=None) -> bool:
    """Whether the host asked for a code (``ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE`` = 1/true/yes/on)."""
    env = os.environ if environ is None else environ
    return str(env.get(REQUIRE_ENV) or "").strip().lower() in {"1", "true", "yes", "on"}


MISSING = (
    "Attention Explorer will not start: {require}=1 says this server must ask for an access code, "
    "but {env} is unset or empty, so the demo would be open to anyone who finds its address. Set "
    "the code before starting (with scripts/serve.sh: `read -rs {env} && export {env}`, or let it "
    "make one: `sh scripts/serve.sh --access-code generate`; with compose: ACCESS_CODE=...; with "
    "Kubernetes: the Secret the Deployment reads), or, to serve without a code on purpose, unset "
    "{require}."
)


BAD_PROXIES = (
    "Attention Explorer will not start: {env} holds {bad}, which is not an address or a CIDR range "
    "(e.g. 10.244.0.0/16 or 127.0.0.1). Name the proxies in front of this server whose "
    "X-Forwarded-For it may believe (with Kubernetes: the ingress controller's pod range), or unset "
    "{env} to believe none. Started as it is, every visitor would be counted as the proxy's one address."
)


def bad_proxies(environ=None) -> list[str]:
    """The entries of ``ATTENTION_EXPLORER_TRUSTED_PROXIES`` that are no address or CIDR range."""
    env = os.environ if environ is None else environ
    bad = []
    for item in str(env.get(TRUSTED_ENV) or "").split(","):
        item = item.strip()
        if item:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                bad.append(item)
    return bad


def check_required(environ=None) -> None:
    """Raise SystemExit with a one-paragraph message when a code is required and none is set, or when
    the trusted proxies are misspelt (a placeholder left in a manifest). With
    a code set, warn (log) when Streamlit's ``runner.fastReruns`` is on: a page can then have a new
    check start beside one that is still pausing, and the pause no longer bounds its guesses."""
    if required(environ) and not configured(environ):
        raise SystemExit(MISSING.format(require=REQUIRE_ENV, env=ENV))
    bad = bad_proxies(environ)
    if bad:  # a placeholder left in a manifest: every visitor would be counted as the proxy's address
        raise SystemExit(BAD_PROXIES.format(env=TRUSTED_ENV, bad=", ".join(repr(b[:60]) for b in bad[:3])))
    if configured(environ) and _fast_reruns():
        log.warning("an access code is set but runner.fastReruns is on: wrong codes sent without waiting "
                    "for their answer are each checked on a thread of their own, so the pause after a wrong "
                    "code does not bound guessing; run with --runner.fastReruns false (scripts/serve.sh does)")


def _fast_reruns() -> bool:
    try:
        from streamlit import config  # noqa: PLC0415

        return bool(config.get_option("runner.fastReruns"))
    except Exception:  # no Streamlit, or its options not loaded: nothing to say
        return False


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


class AddressLimits:
    """One ``Backoff`` per client address, for every session of the address on every replica that
    shares ``store`` (default: ``explorer.store.shared()``, opened on first use)."""

    def __init__(self, free: int = 30, base: float = 2.0, cap: float = 300.0, forget: float = 3600.0,
                 store: _store.Store | None = None):
        self.policy = Backoff(free, base, cap, forget)
        self._store = store

    @property
    def store(self) -> _store.Store:
        return self._store if self._store is not None else _store.shared()

    def record(self, address: str | None) -> Backoff:
        if not address:
            return self.policy.fresh()
        try:
            return self.store.get(f"addr:{address}", self.policy)
        except Exception as e:  # a store out of reach: no address count, never a page that fails
            _store_failed(e)
            return self.policy.fresh()

    def wait(self, address: str | None, now: float) -> float:
        return self.record(address).wait(now) if address else 0.0

    def failed(self, address: str | None, now: float) -> float:
        if not address:
            return 0.0
        try:
            return self.store.failed(f"addr:{address}", now, self.policy).wait(now)
        except Exception as e:
            _store_failed(e)
            return 0.0

    def clear(self) -> None:
        self.store.clear()


ADDRESSES = AddressLimits()
_last_store_error = [-math.inf]


def _store_failed(e: Exception) -> None:
    """Log that the shared store failed (at most once a minute): the session's count and the pause
    still hold; only the address's count is missing meanwhile."""
    now = time.monotonic()
    if now - _last_store_error[0] >= 60:
        _last_store_error[0] = now
        log.error("access limits: the shared store failed (%s: %s); counting per session only until it answers",
                  type(e).__name__, str(e)[:200])


def attempt(given, code: str, session: Backoff, address: str | None, now: float,
            limits: AddressLimits | None = None) -> tuple[str, float]:
    """Check one attempt: ("granted" | "wrong" | "empty", seconds to pause before answering).

    The attempt is always compared (a right code opens whatever waits run); a wrong one is counted
    for the session and the address, and answered after ``WRONG_DELAY``, or, while a wait of either
    runs, after the rest of that wait, at most ``WAIT_DELAY``."""
    limits = ADDRESSES if limits is None else limits
    given = given if isinstance(given, str) else ""
    right = matches(given, code)  # first, and always: nothing below can keep a right code out
    if right:
        session.reset()
        return "granted", 0.0
    if not _normal(given):
        return "empty", 0.0
    session.failed(now)
    wait = max(session.wait(now), limits.failed(address, now))
    return "wrong", min(WAIT_DELAY, wait) if wait > 0 else WRONG_DELAY


# --- the client address ---------------------------------------------------------------------------

_LOOPBACK = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


@functools.lru_cache(maxsize=8)
def _networks(spec: str) -> tuple:
    nets = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            log.warning("%s: %r is not an address or CIDR range; ignored", TRUSTED_ENV, item)
    return tuple(nets)


def trusted_proxies(environ=None) -> tuple:
    """The configured proxies (``ATTENTION_EXPLORER_TRUSTED_PROXIES``) as networks; default none."""
    env = os.environ if environ is None else environ
    return _networks(env.get(TRUSTED_ENV) or "")


def _ip(text):
    ip = ipaddress.ip_address(str(text).strip())
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _trusted(ip, nets) -> bool:
    return any(ip.version == n.version and ip in n for n in nets)


def address_key(ip) -> str:
    """How a client is counted: an IPv4 address alone, an IPv6 address by its /64."""
    ip = _ip(ip)
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def forwarded_client(peer: str | None, forwarded_for: str | None, trusted: str | None = None) -> str | None:
    """The client, as counted (``address_key``), from the connection's ``peer`` (None: loopback,
    as Streamlit reports it) and the ``X-Forwarded-For`` header. The header is read only when the
    peer is a trusted proxy (``trusted``, default ``trusted_proxies()``): from its right end, the
    first address that is not a trusted proxy (the one the outermost proxy of ours saw). None when
    the peer cannot be read."""
    nets = trusted_proxies() if trusted is None else _networks(trusted)
    try:
        hop = _ip(peer) if peer is not None else None
    except ValueError:
        return None
    if hop is None:
        near = any(_trusted(ip, nets) for ip in _LOOPBACK)
    else:
        near = _trusted(hop, nets)
    hop = _LOOPBACK[0] if hop is None else hop
    if near and forwarded_for:
        for item in reversed(str(forwarded_for).split(",")):
            try:
                ip = _ip(item)
            except ValueError:
                break  # junk only a client can have written: keep the last proxy-given address
            hop = ip
            if not _trusted(ip, nets):
                break
    return address_key(hop)


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
    except Exception:  # no client context or an odd header: per-session limits only
        return None


def page_lang() -> str:
    """The page's language: the session's choice, else the URL's ``lang``, else the default."""
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
        limit = st.session_state[LIMIT] = SESSION.fresh()
    return limit


def _wait(now: float) -> float:
    """The longest wait running for this session or its address (0: none)."""
    return max(_session_limit().wait(now), ADDRESSES.wait(client_address(), now))


def _check() -> None:
    """The form's callback (runs before the script): take the typed code out of the session, then
    compare it (always): grant, or count a wrong attempt and pause before answering."""
    import streamlit as st  # noqa: PLC0415

    given = st.session_state.get(INPUT)
    st.session_state.pop(INPUT, None)  # the typed code is not kept, whatever follows
    code = configured()
    if not code:
        return
    limit = _session_limit()
    outcome, pause = attempt(given, code, limit, client_address(), clock())
    del given
    if outcome == "granted":
        st.session_state[GRANTED] = True
        st.session_state.pop(NOTICE, None)
        st.session_state.pop(LIMIT, None)
        log.info("access code accepted for a session")
        return
    st.session_state[NOTICE] = outcome
    if outcome == "wrong":
        log.warning("a wrong access code (%d in this session)", limit.failures)
        sleep(pause)  # this session's next attempt is checked after it (one script thread per session)


def _form() -> None:
    """The page before the code: a heading, a line of explanation, the notice of the last attempt
    (or of a wait still running), and the password field in a form."""
    import streamlit as st  # noqa: PLC0415

    from explorer import i18n  # noqa: PLC0415

    lg = page_lang()
    st.header(i18n.t("access.heading", lg))
    st.caption(i18n.t("access.explain", lg))
    wait = _wait(clock())
    notice = st.session_state.get(NOTICE)
    if notice == "wrong":
        st.error(i18n.t("access.wrong", lg), icon="🔒")
    elif notice == "empty":
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

        st.error(i18n.t("access.failed", page_lang()))
    return False
