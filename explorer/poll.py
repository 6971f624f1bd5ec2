"""The class's answers (issue 36, "A class that answers"): polls a presenter opens and learners answer,
in a store every replica shares. No Streamlit here (explorer/poll_ui.py is the page's wiring).

    store = open_store("sqlite:///var/lib/ae/polls.sqlite3")   # or "redis://:pw@host:6379/1"
    pid = store.create(question_by_lang, choices_by_lang, meta={...})   # {lang: text}, {lang: [labels]}
    store.answer(pid, learner_id, 1)        # a learner's later answer replaces the earlier one
    store.counts(pid)                       # {0: 0, 1: 1}: every choice's index, zeros included
    store.close(pid); store.reveal(pid)     # no answer after close; reveal shows the class its answers
    store.reset(pid)                        # the same question again: answers cleared, a new round

Words. ``question`` is a string or ``{lang: string}``; ``choices`` a list of strings or ``{lang: list}``
(every language the same number of choices): a learner reads the question in their own language.
A choice is named by its index (two choices may read alike: "the" twice in a sentence), so
``answer`` takes and ``counts`` keys by the index. ``meta`` is plain JSON the page keeps with the
poll (the sentence, the model's weights for the choices or its answer, what the reveal says).

What is promised, on both backends:

- **No answer lost, none counted twice.** An answer is one row (SQLite) or one hash field (Redis)
  keyed by (poll, learner): a learner's later answer replaces the earlier, and the same answer sent
  again (a page that reconnects and replays its click) changes nothing. ``counts`` is computed from
  those rows on every call, never kept beside them, so it cannot drift from them. SQLite commits
  each answer in one ``BEGIN IMMEDIATE`` transaction on a WAL file with ``synchronous=FULL``: a
  replica killed mid-write loses at most the answer it had not committed (its learner's page sends
  it again); Redis runs each answer as one Lua script, atomic on the server.
- **A closed poll refuses.** ``answer`` on a closed or revealed poll raises ``PollClosed``; on a
  poll that was reset since the learner's page read it (``round``), ``StaleRound``; an index out of
  range ``BadChoice``; past ``MAX_LEARNERS`` new learners ``PollFull``; an unknown or malformed id
  ``UnknownPoll``. Each ``PollError`` has a ``code`` whose words are ``poll.refused.<code>``.
- **Bounded.** At most ``MAX_CHOICES`` choices of ``MAX_CHOICE_CHARS`` characters, a question of
  ``MAX_QUESTION_CHARS``, ``MAX_META_BYTES`` of meta, ``MAX_LEARNERS`` learners a poll; a poll and
  its answers are forgotten ``KEEP_S`` seconds after its last change (SQLite: swept as polls are
  created; Redis: the keys expire). Learner ids are anonymous random strings made by each browser's
  page (``new_learner_id``); no address or name is stored.

``open_store(url)``: ``sqlite:///path/to/file`` (the path part of the URL: ``sqlite:///tmp/p.db`` is
``/tmp/p.db``) or ``redis://[:password@]host[:port][/db]`` (also ``rediss://``, ``unix://``).
``shared()`` is this process's store from ``ATTENTION_EXPLORER_POLL_STORE``; unset, the SQLite file
``polls.sqlite3`` beside the access limits (``explorer.store.state_dir()``: scripts/serve.sh points
every replica at one run folder). A store that cannot be opened is an error the page shows, never a
silent per-process memory: the class would split between replicas.
"""
from __future__ import annotations

import json
import logging
import os
import re
import secrets
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from explorer import store as _store

log = logging.getLogger("attention_explorer")

STORE_ENV = "ATTENTION_EXPLORER_POLL_STORE"
FILENAME = "polls.sqlite3"
ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no l, o, 0, 1: read aloud and typed from a slide
ID_LENGTH = 8  # 40 bits: a poll cannot be found by guessing
ID_RE = re.compile(f"[{ID_ALPHABET}]{{{ID_LENGTH}}}")
LEARNER_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
STATES = ("open", "closed", "revealed")
MAX_CHOICES = 40
MAX_CHOICE_CHARS = 200
MAX_QUESTION_CHARS = 2000
MAX_META_BYTES = 64_000
MAX_LEARNERS = 1000
KEEP_S = 2 * 24 * 3600.0


class PollError(Exception):
    """An answer or a change refused; ``code`` names its words (``poll.refused.<code>``)."""

    code = "error"

    def __init__(self, poll_id: str = "", detail: str = ""):
        super().__init__(f"poll {poll_id!r}: {self.code}{': ' + detail if detail else ''}")
        self.poll_id = poll_id


class UnknownPoll(PollError):
    code = "unknown"


class PollClosed(PollError):
    code = "closed"


class StaleRound(PollError):
    code = "stale"


class BadChoice(PollError):
    code = "choice"


class PollFull(PollError):
    code = "full"


class BadLearner(PollError):
    code = "learner"


ERRORS = {e.code: e for e in (UnknownPoll, PollClosed, StaleRound, BadChoice, PollFull, BadLearner)}


@dataclass(frozen=True)
class Poll:
    id: str
    question: dict[str, str]  # {lang: text}; "en" always there
    choices: dict[str, list[str]]  # {lang: labels}; every language the same number
    meta: dict = field(default_factory=dict)
    state: str = "open"  # "open" | "closed" | "revealed"
    round: int = 1  # one more at every reset
    created: float = 0.0

    @property
    def n_choices(self) -> int:
        return len(self.choices["en"])

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    @property
    def revealed(self) -> bool:
        return self.state == "revealed"

    def question_in(self, lang: str) -> str:
        return self.question.get(lang) or self.question["en"]

    def choices_in(self, lang: str) -> list[str]:
        return self.choices.get(lang) or self.choices["en"]


# --- checking what is stored ------------------------------------------------------------------------

def new_poll_id() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


def new_learner_id() -> str:
    """An anonymous id for one browser's page (22 URL-safe characters, 128 bits)."""
    return secrets.token_urlsafe(16)


def valid_id(poll_id) -> bool:
    return isinstance(poll_id, str) and ID_RE.fullmatch(poll_id) is not None


def valid_learner(learner_id) -> bool:
    return isinstance(learner_id, str) and LEARNER_RE.fullmatch(learner_id) is not None


def _by_lang(value, what: str) -> dict:
    if isinstance(value, Mapping):
        out = dict(value)
    else:
        out = {"en": value}
    if "en" not in out:
        raise ValueError(f"{what}: an English version ('en') is needed")
    return out


def _text(s, limit: int, what: str) -> str:
    if not isinstance(s, str):
        raise ValueError(f"{what} must be text, not {type(s).__name__}")
    if len(s) > limit:
        raise ValueError(f"{what} is longer than {limit} characters")
    return s


def normalise(question, choices, meta) -> tuple[dict, dict, dict]:
    """The question, choices and meta as stored; ValueError when they break a bound."""
    q = {str(k): _text(v, MAX_QUESTION_CHARS, "the question") for k, v in _by_lang(question, "question").items()}
    c = {}
    for k, labels in _by_lang(choices, "choices").items():
        if isinstance(labels, str) or not isinstance(labels, Sequence):
            raise ValueError("choices must be a list of texts")
        c[str(k)] = [_text(x, MAX_CHOICE_CHARS, "a choice") for x in labels]
    n = len(c["en"])
    if not 2 <= n <= MAX_CHOICES:
        raise ValueError(f"a poll has 2 to {MAX_CHOICES} choices, not {n}")
    if any(len(v) != n for v in c.values()):
        raise ValueError("every language needs the same number of choices")
    m = dict(meta or {})
    if len(json.dumps(m, ensure_ascii=False).encode("utf-8")) > MAX_META_BYTES:
        raise ValueError(f"the poll's meta is larger than {MAX_META_BYTES} bytes")
    return q, c, m


def _check_choice(poll_id: str, choice, n: int) -> int:
    if isinstance(choice, bool) or not isinstance(choice, int):
        try:
            choice = int(str(choice).strip())
        except ValueError:
            raise BadChoice(poll_id, repr(choice)[:40]) from None
    if not 0 <= choice < n:
        raise BadChoice(poll_id, str(choice))
    return choice


def _check_ids(poll_id, learner_id=None) -> None:
    if not valid_id(poll_id):
        raise UnknownPoll(str(poll_id)[:40])
    if learner_id is not None and not valid_learner(learner_id):
        raise BadLearner(poll_id)


def _full_counts(n: int, rows) -> dict[int, int]:
    out = {i: 0 for i in range(n)}
    for choice, k in rows:
        choice = int(choice)
        if 0 <= choice < n:
            out[choice] += int(k)
    return out


# --- SQLite: one file on one machine --------------------------------------------------------------

class SQLitePollStore:
    """Polls in one SQLite file every process of the machine opens (WAL, ``synchronous=FULL``)."""

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike, clock=time.time):
        self.path = Path(path)
        self.clock = clock
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=10.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a commit is on disk before answer() returns
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.execute("CREATE TABLE IF NOT EXISTS polls (id TEXT PRIMARY KEY, question TEXT NOT NULL, "
                         "choices TEXT NOT NULL, meta TEXT NOT NULL, n INTEGER NOT NULL, state TEXT NOT NULL, "
                         "round INTEGER NOT NULL, created REAL NOT NULL, changed REAL NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS answers (poll TEXT NOT NULL, learner TEXT NOT NULL, "
                         "choice INTEGER NOT NULL, at REAL NOT NULL, PRIMARY KEY (poll, learner))")

    def _write(self, fn):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # the write lock first: no other process in between
            try:
                out = fn()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return out

    def _row(self, poll_id: str):
        return self._db.execute("SELECT question, choices, meta, state, round, created, n FROM polls WHERE id = ?",
                                (poll_id,)).fetchone()

    def create(self, question, choices, meta=None) -> str:
        q, c, m = normalise(question, choices, meta)
        now = self.clock()

        def do():
            self._db.execute("DELETE FROM answers WHERE poll IN (SELECT id FROM polls WHERE changed < ?)", (now - KEEP_S,))
            self._db.execute("DELETE FROM polls WHERE changed < ?", (now - KEEP_S,))
            while True:
                pid = new_poll_id()
                if self._row(pid) is None:
                    break
            self._db.execute("INSERT INTO polls VALUES (?, ?, ?, ?, ?, 'open', 1, ?, ?)",
                             (pid, json.dumps(q, ensure_ascii=False), json.dumps(c, ensure_ascii=False),
                              json.dumps(m, ensure_ascii=False), len(c["en"]), now, now))
            return pid

        return self._write(do)

    def get(self, poll_id: str) -> Poll:
        _check_ids(poll_id)
        with self._lock:
            row = self._row(poll_id)
        if row is None:
            raise UnknownPoll(poll_id)
        q, c, m, state, rnd, created, _n = row
        return Poll(poll_id, json.loads(q), json.loads(c), json.loads(m), state, int(rnd), float(created))

    def answer(self, poll_id: str, learner_id: str, choice, round: int | None = None) -> int:
        _check_ids(poll_id, learner_id)

        def do():
            row = self._db.execute("SELECT state, round, n FROM polls WHERE id = ?", (poll_id,)).fetchone()
            if row is None:
                raise UnknownPoll(poll_id)
            state, rnd, n = row
            if state != "open":
                raise PollClosed(poll_id)
            if round is not None and int(round) != int(rnd):
                raise StaleRound(poll_id)
            c = _check_choice(poll_id, choice, n)
            had = self._db.execute("SELECT 1 FROM answers WHERE poll = ? AND learner = ?", (poll_id, learner_id)).fetchone()
            if had is None:
                (k,) = self._db.execute("SELECT count(*) FROM answers WHERE poll = ?", (poll_id,)).fetchone()
                if k >= MAX_LEARNERS:
                    raise PollFull(poll_id)
            now = self.clock()
            self._db.execute("INSERT INTO answers (poll, learner, choice, at) VALUES (?, ?, ?, ?) "
                             "ON CONFLICT (poll, learner) DO UPDATE SET choice = excluded.choice, at = excluded.at",
                             (poll_id, learner_id, c, now))
            self._db.execute("UPDATE polls SET changed = ? WHERE id = ?", (now, poll_id))
            return c

        return self._write(do)

    def mine(self, poll_id: str, learner_id: str) -> int | None:
        _check_ids(poll_id, learner_id)
        with self._lock:
            row = self._db.execute("SELECT choice FROM answers WHERE poll = ? AND learner = ?",
                                   (poll_id, learner_id)).fetchone()
        return None if row is None else int(row[0])

    def counts(self, poll_id: str) -> dict[int, int]:
        _check_ids(poll_id)
        with self._lock:
            row = self._db.execute("SELECT n FROM polls WHERE id = ?", (poll_id,)).fetchone()
            if row is None:
                raise UnknownPoll(poll_id)
            rows = self._db.execute("SELECT choice, count(*) FROM answers WHERE poll = ? GROUP BY choice",
                                    (poll_id,)).fetchall()
        return _full_counts(int(row[0]), rows)

    def _set_state(self, poll_id: str, state: str, *, only_from: tuple[str, ...] = STATES) -> Poll:
        _check_ids(poll_id)

        def do():
            row = self._db.execute("SELECT state FROM polls WHERE id = ?", (poll_id,)).fetchone()
            if row is None:
                raise UnknownPoll(poll_id)
            if row[0] in only_from:
                self._db.execute("UPDATE polls SET state = ?, changed = ? WHERE id = ?", (state, self.clock(), poll_id))

        self._write(do)
        return self.get(poll_id)

    def close(self, poll_id: str) -> Poll:
        return self._set_state(poll_id, "closed", only_from=("open",))

    def reveal(self, poll_id: str) -> Poll:
        return self._set_state(poll_id, "revealed")

    def reset(self, poll_id: str) -> Poll:
        _check_ids(poll_id)

        def do():
            if self._db.execute("SELECT 1 FROM polls WHERE id = ?", (poll_id,)).fetchone() is None:
                raise UnknownPoll(poll_id)
            self._db.execute("DELETE FROM answers WHERE poll = ?", (poll_id,))
            self._db.execute("UPDATE polls SET state = 'open', round = round + 1, changed = ? WHERE id = ?",
                             (self.clock(), poll_id))

        self._write(do)
        return self.get(poll_id)

    def close_store(self) -> None:
        with self._lock:
            self._db.close()


# --- Redis: one server for replicas on several machines -------------------------------------------

# KEYS: the poll's hash, its answers' hash. ARGV: learner, choice, round ("" = any), max learners, keep ms.
ANSWER_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
local r = redis.call('HMGET', KEYS[1], 'state', 'round', 'n')
if r[1] ~= 'open' then return 'closed' end
if ARGV[3] ~= '' and ARGV[3] ~= r[2] then return 'stale' end
local c = tonumber(ARGV[2])
if c == nil or c < 0 or c >= tonumber(r[3]) or c ~= math.floor(c) then return 'choice' end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then
  return 'full'
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 'ok'
"""
# KEYS: the poll's hash, its answers' hash. ARGV: the new state, the states it may come from (comma-separated), keep ms.
STATE_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
local s = redis.call('HGET', KEYS[1], 'state')
if string.find(',' .. ARGV[2] .. ',', ',' .. s .. ',', 1, true) then
  redis.call('HSET', KEYS[1], 'state', ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return 'ok'
"""
RESET_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
redis.call('DEL', KEYS[2])
redis.call('HINCRBY', KEYS[1], 'round', 1)
redis.call('HSET', KEYS[1], 'state', 'open')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 'ok'
"""
# KEYS: the poll's hash. ARGV: field, value pairs, keep ms (last). 1: made; 0: the id was taken.
CREATE_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 1, #ARGV - 1, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[#ARGV])
return 1
"""


class RedisPollStore:
    """Polls in one Redis server (redis-py, short timeouts and one retry on a new connection, as
    ``explorer.store.RedisStore``). Keys: ``<prefix><id>`` (a hash: the poll) and
    ``<prefix><id>:answers`` (a hash: learner -> choice), both expiring ``KEEP_S`` after the last change."""

    kind = "redis"

    def __init__(self, url: str, prefix: str = "attention-explorer:poll:", timeout: float = 2.0, clock=time.time):
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        u = urllib.parse.urlsplit(url)
        if u.scheme not in _store.REDIS_SCHEMES:
            raise ValueError(f"{STORE_ENV}: not a Redis URL ({u.scheme}://)")
        self.prefix, self.clock = prefix, clock
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 1),
            decode_responses=True, health_check_interval=30, client_name="attention-explorer-polls")
        self._answer = self.client.register_script(ANSWER_LUA)
        self._state = self.client.register_script(STATE_LUA)
        self._reset = self.client.register_script(RESET_LUA)
        self._create = self.client.register_script(CREATE_LUA)
        self._keep_ms = int(KEEP_S * 1000)

    def _keys(self, poll_id: str) -> list[str]:
        return [self.prefix + poll_id, self.prefix + poll_id + ":answers"]

    def create(self, question, choices, meta=None) -> str:
        q, c, m = normalise(question, choices, meta)
        fields = {"question": json.dumps(q, ensure_ascii=False), "choices": json.dumps(c, ensure_ascii=False),
                  "meta": json.dumps(m, ensure_ascii=False), "n": len(c["en"]), "state": "open", "round": 1,
                  "created": repr(float(self.clock()))}
        args = [x for kv in fields.items() for x in kv] + [self._keep_ms]
        while True:
            pid = new_poll_id()
            if int(self._create(keys=self._keys(pid)[:1], args=args)) == 1:
                return pid

    def get(self, poll_id: str) -> Poll:
        _check_ids(poll_id)
        h = self.client.hgetall(self.prefix + poll_id)
        if not h:
            raise UnknownPoll(poll_id)
        return Poll(poll_id, json.loads(h["question"]), json.loads(h["choices"]), json.loads(h["meta"]), h["state"],
                    int(h["round"]), float(h["created"]))

    def answer(self, poll_id: str, learner_id: str, choice, round: int | None = None) -> int:
        _check_ids(poll_id, learner_id)
        if isinstance(choice, bool) or not isinstance(choice, int):
            try:
                choice = int(str(choice).strip())
            except ValueError:
                raise BadChoice(poll_id, repr(choice)[:40]) from None
        got = self._answer(keys=self._keys(poll_id),
                           args=[learner_id, str(choice), "" if round is None else str(int(round)), MAX_LEARNERS,
                                 self._keep_ms])
        if got != "ok":
            raise ERRORS[got](poll_id)
        return choice

    def mine(self, poll_id: str, learner_id: str) -> int | None:
        _check_ids(poll_id, learner_id)
        v = self.client.hget(self._keys(poll_id)[1], learner_id)
        return None if v is None else int(v)

    def counts(self, poll_id: str) -> dict[int, int]:
        _check_ids(poll_id)
        pipe = self.client.pipeline(transaction=True)  # the poll and its answers as of one moment
        pipe.hget(self.prefix + poll_id, "n")
        pipe.hvals(self._keys(poll_id)[1])
        n, values = pipe.execute()
        if n is None:
            raise UnknownPoll(poll_id)
        tally: dict[int, int] = {}
        for v in values:
            tally[int(v)] = tally.get(int(v), 0) + 1
        return _full_counts(int(n), tally.items())

    def _set_state(self, poll_id: str, state: str, only_from: tuple[str, ...]) -> Poll:
        _check_ids(poll_id)
        if self._state(keys=self._keys(poll_id), args=[state, ",".join(only_from), self._keep_ms]) != "ok":
            raise UnknownPoll(poll_id)
        return self.get(poll_id)

    def close(self, poll_id: str) -> Poll:
        return self._set_state(poll_id, "closed", ("open",))

    def reveal(self, poll_id: str) -> Poll:
        return self._set_state(poll_id, "revealed", STATES)

    def reset(self, poll_id: str) -> Poll:
        _check_ids(poll_id)
        if self._reset(keys=self._keys(poll_id), args=[self._keep_ms]) != "ok":
            raise UnknownPoll(poll_id)
        return self.get(poll_id)

    def close_store(self) -> None:
        self.client.close()


# --- choosing the store -----------------------------------------------------------------------------

def default_url(environ=None) -> str:
    """``ATTENTION_EXPLORER_POLL_STORE``, else the SQLite file beside the access limits."""
    env = os.environ if environ is None else environ
    url = (env.get(STORE_ENV) or "").strip()
    if url:
        return url
    return "sqlite://" + str((_store.state_dir(environ) / FILENAME).resolve())


def open_store(url: str):
    """The store at ``url``: ``sqlite:///path`` or ``redis://[:password@]host[:port][/db]``."""
    u = urllib.parse.urlsplit(str(url).strip())
    if u.scheme == "sqlite":
        if u.netloc or not u.path or u.path == "/":
            raise ValueError(f"{STORE_ENV}: a SQLite store is sqlite:///path/to/file (three slashes, then the path)")
        return SQLitePollStore(urllib.parse.unquote(u.path))
    if u.scheme in _store.REDIS_SCHEMES:
        return RedisPollStore(str(url).strip())
    raise ValueError(f"{STORE_ENV} must be sqlite:///path or redis://[:password@]host[:port][/db], not {u.scheme or '(none)'}://")


def describe(url: str) -> str:
    """The store's URL for a log line: the password never in it."""
    u = urllib.parse.urlsplit(str(url))
    if u.password is None:
        return str(url)
    host = u.hostname or ""
    return urllib.parse.urlunsplit((u.scheme, f":***@{host}" + (f":{u.port}" if u.port else ""), u.path, "", ""))


_shared = None
_shared_lock = threading.Lock()


def shared():
    """This process's store, opened from the environment on first use (raises when it cannot be)."""
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                url = default_url()
                _shared = open_store(url)
                log.info("polls: the class's answers are kept in %s", describe(url))
    return _shared


def share_of(counts: Mapping[int, int]) -> dict[int, float]:
    """Each choice's share of the answers (0 with none)."""
    total = sum(counts.values())
    return {k: (v / total if total else 0.0) for k, v in counts.items()}
