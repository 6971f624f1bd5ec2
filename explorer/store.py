"""Counts of wrong access codes shared by the replicas of one host (explorer/access.py uses it).

One small interface, ``Store``: ``get(key)``, ``failed(key, now, policy)`` (count a wrong attempt,
atomically, and return the new record), ``clear(key=None)``. Two backends:

- ``SQLiteStore``: one file (stdlib ``sqlite3``, WAL journal, a 5 s busy timeout) that every
  process of the host opens; a count is read, changed and written inside one ``BEGIN IMMEDIATE``
  transaction, so two replicas counting at once never lose a count. Rows are forgotten
  ``policy.forget`` seconds after their last wrong attempt (pruned as new failures come in). The
  file and its folder are private to the server's user (0600 / 0700): they hold client addresses.
- ``MemoryStore``: the same in this process's memory (bounded, least recently failed first out),
  for a server that cannot write a file; its counts are per process.

``shared()`` is the process's store, opened on first use from the environment:
``$ATTENTION_EXPLORER_STATE_DIR/limits.sqlite3`` (scripts/serve.sh sets it to its run folder),
else ``$ATTENTION_EXPLORER_CACHE/state`` or ``~/.cache/attention-explorer/state``; a folder that
cannot be written gives a ``MemoryStore`` (logged once). A Redis backend can follow with the same
three methods for replicas on several machines.

Times are wall-clock seconds (``time.time()``): they are compared between processes.
"""
from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

log = logging.getLogger("attention_explorer")

STATE_ENV = "ATTENTION_EXPLORER_STATE_DIR"
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
    """The SQLite store in ``state_dir()``, or a MemoryStore when that folder cannot be written."""
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
