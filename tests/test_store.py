"""The store of wrong-code counts shared by the replicas of one host (explorer/store.py).

Two store objects on one SQLite file, and other processes, see each other's counts; counts made
at once by threads and processes are never lost; the file is in WAL mode and private; rows are
forgotten after their time; where the folder comes from; a folder that cannot be written gives a
per-process memory store; the access limits of explorer/access.py read and write through it. The
Redis backend against a real redis-server (Debian's, started by the test): the same answers, shared
between processes, atomic, keys that expire, a restarted server, and a server out of reach that
costs the address's count only, never a right code."""
from __future__ import annotations

import logging
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from explorer import access, store
from redisd import free_port, redis_server  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parent.parent
POLICY = store.Backoff(free=30, base=2.0, cap=300.0, forget=3600.0)

CHILD = """
import os, sys, time
from explorer import store
s = store.RedisStore(sys.argv[1]) if sys.argv[1].startswith("redis://") else store.SQLiteStore(sys.argv[1])
policy = store.Backoff(free=30, base=2.0, cap=300.0, forget=3600.0)
n = int(sys.argv[3])
go = sys.argv[5] if len(sys.argv) > 5 else sys.argv[1] + ".go"
print("ready", flush=True)
while len(sys.argv) > 4 and not os.path.exists(go):  # start together with the others
    time.sleep(0.005)
for _ in range(n):
    s.failed(sys.argv[2], 100.0, policy)
print(s.get(sys.argv[2], policy).failures)
"""


def child(path, key: str, n: int, together: bool = False, go: Path | None = None) -> subprocess.Popen:
    extra = (["go"] if together else []) + ([str(go)] if go else [])
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), key, str(n)] + extra,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_stores_on_one_file_and_another_process_see_each_others_counts(tmp_path):
    path = tmp_path / "state" / store.FILENAME
    a, b = store.SQLiteStore(path), store.SQLiteStore(path)  # two replicas of one host
    assert b.get("addr:203.0.113.7", POLICY).failures == 0
    a.failed("addr:203.0.113.7", 100.0, POLICY)
    assert b.get("addr:203.0.113.7", POLICY).failures == 1
    b.failed("addr:203.0.113.7", 100.0, POLICY)
    p = child(path, "addr:203.0.113.7", 3)  # a third process adds three
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert int(out.split()[-1]) == 5  # it saw the two counted here
    assert a.get("addr:203.0.113.7", POLICY).failures == 5 and b.get("addr:203.0.113.7", POLICY).failures == 5
    a.clear("addr:203.0.113.7")
    assert b.get("addr:203.0.113.7", POLICY).failures == 0


def test_counts_made_at_once_by_threads_and_processes_are_never_lost(tmp_path):
    path = tmp_path / store.FILENAME
    here = store.SQLiteStore(path)
    procs = [child(path, "addr:x", 1500, together=True) for _ in range(3)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    threads = [threading.Thread(target=lambda: [here.failed("addr:x", 100.0, POLICY) for _ in range(500)])
               for _ in range(2)]
    Path(f"{path}.go").touch()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert here.get("addr:x", POLICY).failures == 3 * 1500 + 2 * 500


def test_the_file_is_in_wal_mode_private_and_forgets_old_rows(tmp_path):
    folder = tmp_path / "state"
    s = store.SQLiteStore(folder / store.FILENAME)
    assert stat.S_IMODE(os.stat(folder / store.FILENAME).st_mode) == 0o600  # it holds client addresses
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    with sqlite3.connect(folder / store.FILENAME) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.failed("addr:old", 0.0, POLICY)
    for i in range(store.SQLiteStore.PRUNE_EVERY):  # later failures sweep rows quiet for an hour
        s.failed(f"addr:new{i % 3}", 4000.0, POLICY)
    assert s.get("addr:old", POLICY).failures == 0 and len(s) == 3
    b = s.failed("addr:new0", 4000.0 + 3601.0, POLICY)
    assert b.failures == 1  # an hour after the last wrong code, a fresh count


def test_the_waits_read_from_the_store_follow_the_policy(tmp_path):
    s = store.SQLiteStore(tmp_path / store.FILENAME)
    for _ in range(29):
        assert s.failed("addr:y", 10.0, POLICY).wait(10.0) == 0.0
    assert s.failed("addr:y", 10.0, POLICY).wait(10.0) == 2.0  # the 30th starts a 2 s wait
    assert s.failed("addr:y", 11.0, POLICY).wait(11.0) == 4.0
    assert s.get("addr:y", POLICY).wait(14.0) == 1.0


def test_the_folder_comes_from_the_environment_and_an_unwritable_one_gives_memory(tmp_path):
    assert store.state_dir({store.STATE_ENV: str(tmp_path / "run")}) == tmp_path / "run"
    assert store.state_dir({store.CACHE_ENV: str(tmp_path / "cache")}) == tmp_path / "cache" / "state"
    assert store.state_dir({}) == Path.home() / ".cache" / "attention-explorer" / "state"
    s = store.open_store({store.STATE_ENV: str(tmp_path / "run")})
    assert s.kind == "sqlite" and (tmp_path / "run" / store.FILENAME).exists()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    m = store.open_store({store.STATE_ENV: str(blocked / "state")})
    assert m.kind == "memory"
    assert m.failed("addr:z", 0.0, POLICY).failures == 1 and m.get("addr:z", POLICY).failures == 1


def test_the_access_limits_of_two_replicas_share_one_file(tmp_path, monkeypatch):
    """Two replicas (two AddressLimits over two store objects on one file): wrong codes on one are
    a wait on the other, for every session of the address: a new websocket, a reload, or a page
    sent to the other replica by its ae_replica cookie meet the same count."""
    path = tmp_path / store.FILENAME
    one = access.AddressLimits(free=2, base=30.0, store=store.SQLiteStore(path))
    two = access.AddressLimits(free=2, base=30.0, store=store.SQLiteStore(path))
    addr = access.forwarded_client(None, "203.0.113.7", "127.0.0.1")
    s1, s2 = access.SESSION.fresh(), access.SESSION.fresh()  # two sessions, one on each replica
    assert access.attempt("guess", "the code", s1, addr, 1000.0, one)[0] == "wrong"
    outcome, pause = access.attempt("guess", "the code", s2, addr, 1000.0, two)
    assert outcome == "wrong" and pause == access.WAIT_DELAY  # the address's second: a 30 s wait
    assert one.wait(addr, 1001.0) == 29.0 and two.wait(addr, 1001.0) == 29.0
    fresh = access.SESSION.fresh()  # a new websocket on replica one
    assert access.attempt("the code", "the code", fresh, addr, 1001.0, one) == ("granted", 0.0)
    assert access.attempt("typo", "the code", access.SESSION.fresh(), addr, 1001.0, one)[1] == access.WAIT_DELAY

    monkeypatch.setenv(store.STATE_ENV, str(tmp_path / "env"))  # the default store: from the environment
    monkeypatch.setattr(store, "_shared", None)
    assert access.AddressLimits().store.path == tmp_path / "env" / store.FILENAME


# --- Redis: a real server ------------------------------------------------------------------------------

_free_port = free_port


def test_redis_stores_and_other_processes_share_counts_atomically(redis_server, tmp_path):
    a, b = store.RedisStore(redis_server.url), store.RedisStore(redis_server.url)
    a.failed("addr:203.0.113.7", 100.0, POLICY)
    assert b.get("addr:203.0.113.7", POLICY).failures == 1
    go = tmp_path / "go"
    procs = [child(redis_server.url, "addr:x", 1000, together=True, go=go) for _ in range(3)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    threads = [threading.Thread(target=lambda: [a.failed("addr:x", 100.0, POLICY) for _ in range(300)])
               for _ in range(2)]
    go.touch()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert b.get("addr:x", POLICY).failures == 3 * 1000 + 2 * 300
    assert len(b) == 2
    b.clear("addr:x")
    assert a.get("addr:x", POLICY).failures == 0 and len(a) == 1
    a.clear()
    assert len(b) == 0


def test_redis_keys_expire_after_their_time_and_a_restarted_server_is_reconnected(redis_server):
    s = store.RedisStore(redis_server.url)
    short = store.Backoff(free=30, base=2.0, cap=300.0, forget=1.5)
    s.failed("addr:gone", time.time(), short)
    ttl = s.client.pttl(s.prefix + "addr:gone")
    assert 0 < ttl <= 1500  # forgotten by Redis itself, no sweep needed
    time.sleep(1.7)
    assert s.get("addr:gone", short).failures == 0 and len(s) == 0
    redis_server.stop()  # the server restarts: its scripts and counts are gone
    redis_server.start()
    assert s.failed("addr:back", 10.0, POLICY).failures == 1  # the next call reconnects and reloads the script


def test_a_redis_out_of_reach_costs_the_address_count_only(caplog):
    caplog.set_level(logging.ERROR, logger="attention_explorer")
    limits = access.AddressLimits(store=store.RedisStore(f"redis://127.0.0.1:{_free_port()}"))
    assert limits.wait("203.0.113.7", 0.0) == 0.0 and limits.failed("203.0.113.7", 0.0) == 0.0
    session = access.SESSION.fresh()
    assert access.attempt("guess", "the code", session, "203.0.113.7", 0.0, limits) == ("wrong", access.WRONG_DELAY)
    assert access.attempt("the code", "the code", session, "203.0.113.7", 0.0, limits) == ("granted", 0.0)
    assert "the shared store failed" in caplog.text
    assert store.open_store({store.REDIS_ENV: "redis://127.0.0.1:1/0"}).kind == "redis"
    with pytest.raises(ValueError, match=store.REDIS_ENV):
        store.RedisStore("http://127.0.0.1:6379")


def test_a_redis_that_never_answers_costs_a_wrong_code_two_timeouts_at_most(caplog, monkeypatch):
    """A server that takes the connection and says nothing (a hung Redis, a half-open network):
    the wrong code is answered after the store's short timeout and one retry on a new connection,
    never after the client's default retries with back-off; a right code never waits on it."""
    caplog.set_level(logging.ERROR, logger="attention_explorer")
    monkeypatch.setattr(access, "_last_store_error", [-float("inf")])  # logged here, whatever logged before
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    taken: list[socket.socket] = []

    def accept():
        while True:
            try:
                conn, _ = silent.accept()
            except OSError:
                return
            taken.append(conn)  # kept open, never answered

    threading.Thread(target=accept, daemon=True).start()
    try:
        s = store.RedisStore(f"redis://:silent-secret@127.0.0.1:{silent.getsockname()[1]}/0", timeout=0.5)
        limits = access.AddressLimits(store=s)
        session = access.SESSION.fresh()
        t0 = time.monotonic()
        assert access.attempt("guess", "the code", session, "203.0.113.7", 0.0, limits) == ("wrong", access.WRONG_DELAY)
        took = time.monotonic() - t0
        assert took < 2.5 * s.timeout + 0.5, f"a silent Redis held a wrong code {took:.2f} s"
        assert len(taken) == 2  # the first connection and one retry, no more
        t0 = time.monotonic()
        assert access.attempt("the code", "the code", session, "203.0.113.7", 0.0, limits) == ("granted", 0.0)
        assert time.monotonic() - t0 < 0.1
        assert "the shared store failed" in caplog.text and "silent-secret" not in caplog.text
        s.close()
    finally:
        silent.close()
        for conn in taken:
            conn.close()


def test_a_wrong_redis_password_is_an_error_the_limits_log(redis_server, caplog, monkeypatch):
    caplog.set_level(logging.ERROR, logger="attention_explorer")
    monkeypatch.setattr(access, "_last_store_error", [-float("inf")])
    s = store.RedisStore(f"redis://:not-the-password@127.0.0.1:{redis_server.port}/2")
    with pytest.raises(Exception, match="(?i)auth|password"):
        s.get("addr:x", POLICY)
    assert access.AddressLimits(store=s).failed("203.0.113.7", 0.0) == 0.0
    assert "the shared store failed" in caplog.text and "not-the-password" not in caplog.text


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_every_backend_answers_the_same(tmp_path, kind, request):
    if kind == "redis":
        s = store.RedisStore(request.getfixturevalue("redis_server").url)
    else:
        s = store.MemoryStore() if kind == "memory" else store.SQLiteStore(tmp_path / store.FILENAME)
    now = 1_764_000_000.0  # wall-clock seconds, as the app counts
    seen = [s.failed("k", now + t, POLICY).wait(now + t) for t in range(0, 40)]
    assert seen[:29] == [0.0] * 29 and seen[29:32] == [2.0, 4.0, 8.0] and seen[-1] == 300.0
    b = s.get("k", POLICY)
    assert b.failures == 40 and b.last == now + 39 and b.wait(now + 39.25) == 299.75
    assert s.failed("k", now + 39 + 3601, POLICY).failures == 1  # an hour quiet: a fresh count
    s.clear()
    assert s.get("k", POLICY).failures == 0
