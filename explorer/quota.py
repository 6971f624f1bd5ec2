"""Quotas on expensive work, per page (a Streamlit session): the logit lens, activation patching and
image export.

    with quota.spend("lens"):              # Refused: this page is over its quota (or already busy)
        made = lens_data(...)
    quota.charge("export", cost=40)        # a token bucket only (no in-flight mark)
    with quota.flight("export"):           # one in flight per page, no rate

Each page has a token bucket per kind of work: ``burst`` tokens at most, refilled at ``per_minute``
tokens a minute; work that is already cached costs nothing (the caller asks only for work it will
compute). A page also has at most one piece of each kind in flight: a second export clicked while
the first renders is refused, not rendered beside it. A refusal (``Refused``) says in the page's
language what happened and when to try again.

Applied when the server is shared (``ATTENTION_EXPLORER_HOSTED=1``, or an access code is set:
explorer/access.py); a laptop is not bounded. ``ATTENTION_EXPLORER_QUOTAS=1`` applies them
anywhere, ``=0`` nowhere. Per kind, ``ATTENTION_EXPLORER_<KIND>_PER_MINUTE`` and
``ATTENTION_EXPLORER_<KIND>_BURST`` (0 per minute: no bound) replace the defaults in ``DEFAULTS``.

Per page, never per address: a class behind one NAT shares an address, and a noisy page must not
cost its neighbours their quota (issue 38, item 4). What bounds a noisy address's many pages is the
balancer's connection bound per address (scripts/serve.sh) and the analysis slots
(explorer/state.py: the lens and patching never take the last run slot).

Pure Python: Streamlit is asked only for the current session's id (``session_id``); outside a page
(the exporter, the benchmarks, a notebook) there is no session and nothing is bounded.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from explorer import i18n

QUOTAS_ENV = "ATTENTION_EXPLORER_QUOTAS"
# kind -> (per minute, burst): what one page may ask for before it waits
DEFAULTS = {
    "lens": (6.0, 6.0),  # the logit lens of a new sentence: about a forward pass (2-2.7 s on SmolLM2)
    "patching": (2.0, 2.0),  # one experiment: layers x positions forward passes (7-14 s)
    "export": (20.0, 40.0),  # rendered images (a PNG: 1; a GIF or PDF of a timeline: 1 per step, up to 40)
    "answer": (30.0, 15.0),  # a learner's taps on a class poll (explorer/poll_ui.py): a change of mind, not a flood
    "long": (4.0, 4.0),  # a new text in the Long text view (explorer/long_ui.py): a forward pass of up to the host's bound
}
ENV_NAMES = {"lens": "LENS", "patching": "PATCH", "export": "EXPORT_RENDERS", "answer": "POLL_ANSWERS", "long": "LONG_RUNS"}
# (kind, busy) -> the words (explorer/i18n.py): "busy" a second one while one runs, else over the rate
WORDS = {("lens", False): "quota.lens_wait", ("lens", True): "quota.lens_busy",
         ("patching", False): "quota.patching_wait", ("patching", True): "quota.patching_busy",
         ("export", False): "quota.export_wait", ("export", True): "quota.export_busy",
         ("answer", False): "quota.answer_wait", ("long", False): "quota.long_wait", ("long", True): "quota.long_busy"}
MAX_PAGES = 10_000  # pages remembered at once (the least recently charged forgotten first)
FORGET_S = 3600.0  # a page idle this long is forgotten (its buckets would be full again anyway)

clock = time.monotonic  # the tests move time forward by replacing it


def _truthy(raw: str) -> bool:
    return raw.strip().lower() in ("1", "true", "yes", "on")


def enabled(environ=None) -> bool:
    """Whether quotas apply here: ``ATTENTION_EXPLORER_QUOTAS`` if set, else on a hosted server or
    one with an access code."""
    env = os.environ if environ is None else environ
    raw = (env.get(QUOTAS_ENV) or "").strip()
    if raw:
        return _truthy(raw)
    from explorer import edges

    return edges.guarded(env)  # the servers whose every edge is guarded: hosted, or with an access code


@dataclass(frozen=True)
class Limit:
    per_minute: float  # refill rate; 0: no bound
    burst: float  # the bucket's size: what a page may use at once


def limit(kind: str, environ=None) -> Limit:
    """The configured limit of ``kind`` (the defaults, or the environment's)."""
    env = os.environ if environ is None else environ
    per_minute, burst = DEFAULTS[kind]
    name = ENV_NAMES[kind]
    values = []
    for suffix, default in (("PER_MINUTE", per_minute), ("BURST", None)):
        var = f"ATTENTION_EXPLORER_{name}_{suffix}"
        raw = (env.get(var) or "").strip()
        if not raw:
            values.append(default)
            continue
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{var}={raw!r} is not a number") from None
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"{var}={raw!r}: give a number >= 0")
        values.append(value)
    per_minute, burst_set = values
    if burst_set is None:  # the default burst with the default rate, else a minute's worth
        burst_set = burst if per_minute == DEFAULTS[kind][0] else per_minute
    return Limit(per_minute, max(burst_set, 1.0))


class Bucket:
    """A token bucket: ``burst`` tokens, refilled at ``per_minute`` a minute (continuously)."""

    def __init__(self, lim: Limit, now: float) -> None:
        self.limit = lim
        self.tokens = lim.burst
        self.at = now

    def _refill(self, now: float) -> None:
        rate = self.limit.per_minute / 60.0
        self.tokens = min(self.limit.burst, self.tokens + max(0.0, now - self.at) * rate)
        self.at = now

    def take(self, cost: float, now: float) -> float:
        """Take ``cost`` tokens (at most the bucket's size: one large piece of work is always
        possible from a full bucket); returns 0, or the seconds until they would be there (nothing
        taken)."""
        if self.limit.per_minute <= 0:
            return 0.0
        self._refill(now)
        cost = min(float(cost), self.limit.burst)
        if self.tokens + 1e-9 >= cost:
            self.tokens -= cost
            return 0.0
        return (cost - self.tokens) * 60.0 / self.limit.per_minute

    def full(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= self.limit.burst


class Refused(Exception):
    """A page asked for more than its quota (``wait_s`` > 0: when to try again) or asked while the
    same kind of work of that page was still running (``busy``)."""

    def __init__(self, kind: str, wait_s: float = 0.0, busy: bool = False, lim: Limit | None = None) -> None:
        self.kind, self.wait_s, self.busy, self.limit = kind, float(wait_s), busy, lim
        super().__init__(self.message("en"))

    @property
    def seconds(self) -> int:
        """Whole seconds to wait (at least 1)."""
        return max(1, math.ceil(self.wait_s))

    def message(self, lang: str = "en") -> str:
        """What the page says, in ``lang``."""
        if self.busy:
            return i18n.t(WORDS[self.kind, True], lang)
        n = self.limit.per_minute if self.limit is not None else DEFAULTS[self.kind][0]
        return i18n.t(WORDS[self.kind, False], lang, s=self.seconds, n=f"{n:g}")


class Quotas:
    """Every page's buckets and in-flight marks, for the whole process (thread-safe, bounded)."""

    def __init__(self, max_pages: int = MAX_PAGES, forget_s: float = FORGET_S) -> None:
        self.max_pages, self.forget_s = max_pages, forget_s
        self._lock = threading.Lock()
        self._pages: OrderedDict[str, dict[str, Bucket]] = OrderedDict()
        self._flying: set[tuple[str, str]] = set()
        self.refused = 0  # how many refusals (a counter for the benchmarks and the logs)

    def charge(self, session: str, kind: str, cost: float = 1.0, lim: Limit | None = None) -> None:
        """Take ``cost`` of ``kind`` from the page's bucket, or raise Refused (nothing taken)."""
        lim = lim or limit(kind)
        now = clock()
        with self._lock:
            buckets = self._pages.get(session)
            if buckets is None:
                buckets = self._pages[session] = {}
            self._pages.move_to_end(session)
            bucket = buckets.get(kind)
            if bucket is None or bucket.limit != lim:
                bucket = buckets[kind] = Bucket(lim, now)
            wait = bucket.take(cost, now)
            self._trim(now)
            if wait > 0:
                self.refused += 1
                raise Refused(kind, wait, lim=lim)

    def _trim(self, now: float) -> None:
        while len(self._pages) > self.max_pages:
            self._pages.popitem(last=False)
        # the oldest first: stop at the first page used recently
        for session in list(self._pages)[:64]:
            buckets = self._pages[session]
            if all(now - b.at >= self.forget_s for b in buckets.values()):
                del self._pages[session]
            else:
                break

    @contextlib.contextmanager
    def flight(self, session: str, kind: str):
        """The page's one ``kind`` in flight while the block runs; Refused(busy) if one already is."""
        key = (session, kind)
        with self._lock:
            if key in self._flying:
                self.refused += 1
                raise Refused(kind, busy=True)
            self._flying.add(key)
        try:
            yield
        finally:
            with self._lock:
                self._flying.discard(key)

    def in_flight(self, session: str, kind: str) -> bool:
        with self._lock:
            return (session, kind) in self._flying

    def clear(self) -> None:
        with self._lock:
            self._pages.clear()
            self._flying.clear()
            self.refused = 0

    def __len__(self) -> int:
        return len(self._pages)


QUOTAS = Quotas()


def session_id() -> str | None:
    """The current page's session id (None outside a Streamlit script run)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:
        return None
    ctx = get_script_run_ctx(suppress_warning=True)
    return getattr(ctx, "session_id", None) if ctx is not None else None


def _session(session: str | None) -> str | None:
    """The page to bound: ``session`` or the current one; None when quotas do not apply here."""
    if not enabled():
        return None
    return session if session is not None else session_id()


def charge(kind: str, cost: float = 1.0, session: str | None = None) -> None:
    """Charge the current page (or ``session``) ``cost`` of ``kind``; Refused when over its quota.
    Nothing happens where quotas do not apply or outside a page."""
    s = _session(session)
    if s is not None:
        QUOTAS.charge(s, kind, cost)


@contextlib.contextmanager
def flight(kind: str, session: str | None = None):
    """One ``kind`` in flight per page (where quotas apply); Refused(busy) for a second one."""
    s = _session(session)
    if s is None:
        yield
        return
    with QUOTAS.flight(s, kind):
        yield


@contextlib.contextmanager
def spend(kind: str, cost: float = 1.0, session: str | None = None):
    """``flight`` and ``charge`` together: the work of one page, one at a time and within its rate
    (the in-flight check first: a refused second click costs nothing)."""
    s = _session(session)
    if s is None:
        yield
        return
    with QUOTAS.flight(s, kind):
        QUOTAS.charge(s, kind, cost)
        yield
