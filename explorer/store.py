"""Counts of wrong access codes shared by the replicas of one host (explorer/access.py uses it).

One small interface, ``Store``: ``get(key)``, ``failed(key, now, policy)`` (count a wrong attempt,
atomically, and return the new record), ``clear(key=None)``. Three backends:

- ``SQLiteStore``: one file (stdlib ``sqlite3``, WAL journal, a 5 s busy timeout) that every
  process of the host opens; a count is read, changed and written inside one ``BEGIN IMMEDIATE``
  transaction, so two replicas counting at once never lose a count. Rows are forgotten
  ``policy.forget`` seconds after their last wrong attempt (pruned as new failures come in). The
  file and its folder are private to the server's user (0600 / 0700): they hold client addresses.
- ``RedisStore``: one Redis server for replicas on several machines
  (``ATTENTION_EXPLORER_REDIS_URL=redis://[:password@]host:port/db``): a count is changed by one
  Lua script, atomic on the server, and each key expires ``policy.forget`` seconds after its last
  wrong attempt. The client is redis-py (the ``redis`` package): short timeouts, one retry on a new
  connection, so a server out of reach costs only the address count (explorer/access.py logs it).
- ``MemoryStore``: the same in this process's memory (bounded, least recently failed first out),
  for a server that cannot write a file; its counts are per process.

``shared()`` is the process's store, opened on first use from the environment: Redis when
``ATTENTION_EXPLORER_REDIS_URL`` is set, else ``$ATTENTION_EXPLORER_STATE_DIR/limits.sqlite3``
(scripts/serve.sh sets it to its run folder), else ``$ATTENTION_EXPLORER_CACHE/state`` or
``~/.cache/attention-explorer/state``; a folder that cannot be written gives a ``MemoryStore``
(logged once).

Times are wall-clock seconds (``time.time()``): they are compared between processes.
"""
from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
import urllib.parse
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

log = logging.getLogger("attention_explorer")

STATE_ENV = "ATTENTION_EXPLORER_STATE_DIR"
REDIS_ENV = "ATTENTION_EXPLORER_REDIS_URL"
CACHE_ENV = "ATTENTION_EXPLORER_CACHE"  # the model cache's folder (model/fetch.py), whose state/ is the default
FILENAME = "limits.sqlite3"


@dataclass
class Backoff:
    """Wrong attempts of one party: ``free`` of them cost nothing, then each wrong attempt starts a
    wait of ``base`` seconds doubled per wrong attempt past the free ones, at most ``cap``; the count
    is forgotten ``forget`` seconds after the last wrong attempt. A record and its own policy: a
    store keeps ``failures``, ``until`` and ``last`` and takes the rest from the policy it is given."""

    free: int = 3
    base: float = 5.0
    cap: float = 900.0
    forget: float = 3600.0
    failures: int = 0
    until: float = 0.0
    last: float = -math.inf

    def wait(self, now: float) -> float:
        """Seconds of the wait still running at ``now`` (0: none)."""
        return max(0.0, self.until - now)

    def failed(self, now: float) -> float:
        """Count a wrong attempt at ``now``; returns the wait it starts (0 within the free ones)."""
        if now - self.last > self.forget:
            self.failures, self.until = 0, 0.0
        self.failures += 1
        self.last = now
        past = self.failures - self.free
        if past >= 0:
            self.until = max(self.until, now + min(self.cap, self.base * 2.0 ** min(past, 60)))
        return self.wait(now)

    def reset(self) -> None:
        self.failures, self.until, self.last = 0, 0.0, -math.inf

    def fresh(self) -> "Backoff":
        """The policy alone: a record with no failures."""
        return replace(self, failures=0, until=0.0, last=-math.inf)


class Store(Protocol):
    def get(self, key: str, policy: Backoff) -> Backoff: ...

    def failed(self, key: str, now: float, policy: Backoff) -> Backoff: ...

    def clear(self, key: str | None = None) -> None: ...


class MemoryStore:
    """Records in this process's memory: thread-safe, at most ``max_entries`` keys (the least
    recently failed first out)."""

    kind = "memory"

    def __init__(self, max_entries: int = 10_000):
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._by: OrderedDict[str, tuple[int, float, float]] = OrderedDict()

    def get(self, key: str, policy: Backoff) -> Backoff:
        with self._lock:
            row = self._by.get(key)
        return _record(policy, row)

    def failed(self, key: str, now: float, policy: Backoff) -> Backoff:
        with self._lock:
            b = _record(policy, self._by.pop(key, None))
            b.failed(now)
            self._by[key] = (b.failures, b.until, b.last)  # now the most recent
            while len(self._by) > self.max_entries:
                self._by.popitem(last=False)
            return b

    def clear(self, key: str | None = None) -> None:
        with self._lock:
            if key is None:
                self._by.clear()
            else:
                self._by.pop(key, None)

    def __len__(self) -> int:
        return len(self._by)


class SQLiteStore:
    """Records in one SQLite file shared by every process that opens it (WAL mode)."""

    kind = "sqlite"
    PRUNE_EVERY = 64  # failures between two sweeps of forgotten rows

    def __init__(self, path: str | os.PathLike, max_entries: int = 100_000):
        self.path = Path(path)
        self.max_entries = max_entries
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # private before sqlite writes a byte
        os.close(fd)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=5.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("CREATE TABLE IF NOT EXISTS failures (key TEXT PRIMARY KEY, n INTEGER NOT NULL, "
                         "until REAL NOT NULL, last REAL NOT NULL)")
        self._db.execute("CREATE INDEX IF NOT EXISTS failures_last ON failures (last)")
        self._since_prune = 0

    def get(self, key: str, policy: Backoff) -> Backoff:
        with self._lock:
            row = self._db.execute("SELECT n, until, last FROM failures WHERE key = ?", (key,)).fetchone()
        return _record(policy, row)

    def failed(self, key: str, now: float, policy: Backoff) -> Backoff:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # the write lock first: no other process counts in between
            try:
                row = self._db.execute("SELECT n, until, last FROM failures WHERE key = ?", (key,)).fetchone()
                b = _record(policy, row)
                b.failed(now)
                self._db.execute("INSERT OR REPLACE INTO failures (key, n, until, last) VALUES (?, ?, ?, ?)",
                                 (key, b.failures, b.until, b.last))
                self._since_prune += 1
                if self._since_prune >= self.PRUNE_EVERY:
                    self._since_prune = 0
                    self._prune(now, policy.forget)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return b

    def _prune(self, now: float, forget: float) -> None:
        self._db.execute("DELETE FROM failures WHERE last < ?", (now - forget,))
        (n,) = self._db.execute("SELECT count(*) FROM failures").fetchone()
        if n > self.max_entries:
            self._db.execute("DELETE FROM failures WHERE key IN (SELECT key FROM failures ORDER BY last LIMIT ?)",
                             (n - self.max_entries,))

    def clear(self, key: str | None = None) -> None:
        with self._lock:
            if key is None:
                self._db.execute("DELETE FROM failures")
            else:
                self._db.execute("DELETE FROM failures WHERE key = ?", (key,))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM failures").fetchone()[0]


# Backoff.failed on the server, atomically: KEYS[1]; ARGV: now, free, base, cap, forget. The record
# is a hash (n, until, last) that expires `forget` seconds after the last wrong attempt.
FAILED_LUA = """
local now, free, base, cap, forget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local r = redis.call('HMGET', KEYS[1], 'n', 'until', 'last')
local n, untl, last = tonumber(r[1]) or 0, tonumber(r[2]) or 0, tonumber(r[3])
if last == nil or now - last > forget then n, untl = 0, 0 end
n = n + 1
local past = n - free
if past >= 0 then untl = math.max(untl, now + math.min(cap, base * 2 ^ math.min(past, 60))) end
local u, l = string.format('%.6f', untl), string.format('%.6f', now)
redis.call('HSET', KEYS[1], 'n', n, 'until', u, 'last', l)
redis.call('PEXPIRE', KEYS[1], math.ceil(forget * 1000))
return {n, u, l}
"""

REDIS_SCHEMES = ("redis", "rediss", "unix")


class RedisStore:
    """Records in one Redis server, for replicas on several machines. Keys are ``prefix + key``.

    The client is redis-py (``redis`` on PyPI, imported only when this store is used): a thread-safe
    connection pool, the URL's password, user, database and TLS (``rediss://``), and the script run
    by its digest and loaded again when a restarted server no longer knows it. Short socket timeouts
    and one immediate retry on a new connection (a server restarted since the last call): a server
    out of reach costs a call at most about ``2 * timeout`` seconds, then raises (explorer/access.py
    logs it and counts per session), never the client's default of ten retries with back-off."""

    kind = "redis"

    def __init__(self, url: str, prefix: str = "attention-explorer:limits:", timeout: float = 1.0):
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        u = urllib.parse.urlsplit(url)
        if u.scheme not in REDIS_SCHEMES:
            raise ValueError(f"{REDIS_ENV} must be redis://[:password@]host[:port][/db] (or rediss://, unix://), "
                             f"not {u.scheme}://")
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 6379  # for messages (never the password)
        self.prefix, self.timeout = prefix, timeout
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 1),
            decode_responses=True, health_check_interval=30, client_name="attention-explorer")
        self._failed = self.client.register_script(FAILED_LUA)

    def close(self) -> None:
        self.client.close()

    # --- the store ---
    def get(self, key: str, policy: Backoff) -> Backoff:
        n, until, last = self.client.hmget(self.prefix + key, "n", "until", "last")
        return _record(policy, None if n is None else (n, until, last))

    def failed(self, key: str, now: float, policy: Backoff) -> Backoff:
        row = self._failed(keys=[self.prefix + key], args=[repr(float(now)), policy.free, repr(float(policy.base)),
                                                          repr(float(policy.cap)), repr(float(policy.forget))])
        return _record(policy, row)

    def _keys(self):
        return self.client.scan_iter(match=self.prefix + "*", count=1000)

    def clear(self, key: str | None = None) -> None:
        if key is not None:
            self.client.delete(self.prefix + key)
            return
        batch = []
        for k in self._keys():
            batch.append(k)
            if len(batch) >= 1000:
                self.client.delete(*batch)
                batch = []
        if batch:
            self.client.delete(*batch)

    def __len__(self) -> int:
        return sum(1 for _ in self._keys())


def _record(policy: Backoff, row) -> Backoff:
    b = policy.fresh()
    if row is not None:
        b.failures, b.until, b.last = int(row[0]), float(row[1]), float(row[2])
    return b


def state_dir(environ=None) -> Path:
    """Where the shared file lives: $ATTENTION_EXPLORER_STATE_DIR, else the cache folder's state/."""
    env = os.environ if environ is None else environ
    if env.get(STATE_ENV):
        return Path(env[STATE_ENV]).expanduser()
    cache = env.get(CACHE_ENV)
    return (Path(cache).expanduser() if cache else Path.home() / ".cache" / "attention-explorer") / "state"


def open_store(environ=None) -> Store:
    """Redis when ``ATTENTION_EXPLORER_REDIS_URL`` is set, else the SQLite store in ``state_dir()``,
    or a MemoryStore when that folder cannot be written."""
    env = os.environ if environ is None else environ
    if env.get(REDIS_ENV):
        return RedisStore(env[REDIS_ENV])  # connected on first use; explorer/access.py logs failures
    folder = state_dir(environ)
    try:
        return SQLiteStore(folder / FILENAME)
    except (OSError, sqlite3.Error) as e:
        log.warning("access limits kept in this process only: %s is not writable (%s); set %s to a writable "
                    "folder to share them between replicas", folder, type(e).__name__, STATE_ENV)
        return MemoryStore()


_shared: Store | None = None
_shared_lock = threading.Lock()


def shared() -> Store:
    """This process's store, opened from the environment on first use."""
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = open_store()
    return _shared
