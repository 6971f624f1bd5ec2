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
  wrong attempt. A small client of Redis's own protocol (RESP) over one socket: no package needed.
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
import socket
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


class RedisError(RuntimeError):
    """Redis answered with an error, or the connection failed."""


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


class RedisStore:
    """Records in one Redis server, for replicas on several machines. Keys are ``prefix + key``."""

    kind = "redis"

    def __init__(self, url: str, prefix: str = "attention-explorer:limits:", timeout: float = 2.0):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "redis":
            raise ValueError(f"{REDIS_ENV} must be redis://[:password@]host[:port][/db], not {u.scheme}://")
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 6379
        self.password = urllib.parse.unquote(u.password) if u.password else None
        self.username = urllib.parse.unquote(u.username) if u.username else None
        self.db = int(u.path.strip("/") or 0)
        self.prefix, self.timeout = prefix, timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._buf = b""
        self._sha = ""  # the script's digest, known once it is loaded (connected on first use)

    # --- RESP, the Redis protocol ---
    def _connect(self) -> None:
        self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""
        if self.password is not None:
            self._call_locked("AUTH", *([self.username] if self.username else []), self.password)
        if self.db:
            self._call_locked("SELECT", self.db)
        self._sha = self._call_locked("SCRIPT", "LOAD", FAILED_LUA).decode()

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise RedisError("the connection was closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self._buf) < n + 2:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise RedisError("the connection was closed")
            self._buf += chunk
        data, self._buf = self._buf[:n], self._buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RedisError(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RedisError(f"an answer this client does not read: {line[:40]!r}")

    def _call_locked(self, *args):
        parts = [str(a).encode() if not isinstance(a, bytes) else a for a in args]
        self._sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        return self._reply()

    def _call(self, *args):
        with self._lock:
            for retry in (True, False):  # one new connection after a broken one (a restarted server)
                try:
                    if self._sock is None:
                        self._connect()
                    return self._call_locked(*args)
                except (OSError, RedisError) as e:
                    if isinstance(e, RedisError) and "NOSCRIPT" not in str(e) and "closed" not in str(e):
                        raise
                    self.close_locked()
                    if not retry:
                        raise RedisError(f"Redis at {self.host}:{self.port}: {type(e).__name__}") from e

    def close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def close(self) -> None:
        with self._lock:
            self.close_locked()

    # --- the store ---
    def get(self, key: str, policy: Backoff) -> Backoff:
        n, until, last = self._call("HMGET", self.prefix + key, "n", "until", "last")
        return _record(policy, None if n is None else (n, until, last))

    def failed(self, key: str, now: float, policy: Backoff) -> Backoff:
        if not self._sha:
            self._call("PING")  # connects, which loads the script
        n, until, last = self._call("EVALSHA", self._sha, 1, self.prefix + key, repr(float(now)), policy.free,
                                    repr(float(policy.base)), repr(float(policy.cap)), repr(float(policy.forget)))
        return _record(policy, (n, until, last))

    def clear(self, key: str | None = None) -> None:
        if key is not None:
            self._call("DEL", self.prefix + key)
            return
        cursor = b"0"
        while True:
            cursor, keys = self._call("SCAN", cursor, "MATCH", self.prefix + "*", "COUNT", 1000)
            if keys:
                self._call("DEL", *keys)
            if cursor in (b"0", 0):
                return

    def __len__(self) -> int:
        n, cursor = 0, b"0"
        while True:
            cursor, keys = self._call("SCAN", cursor, "MATCH", self.prefix + "*", "COUNT", 1000)
            n += len(keys)
            if cursor in (b"0", 0):
                return n


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
