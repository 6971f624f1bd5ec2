"""A real ``redis-server`` (Debian's package: ``sh scripts/setup.sh --dev`` installs it) on a free
loopback port, for the tests of the stores shared by replicas (tests/test_store.py, tests/test_poll.py):

    from redisd import RedisServer, redis_server  # noqa: F401 (the fixture)
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

REDIS = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """``redis-server`` on a free loopback port, nothing saved to disk, stopped at the end."""

    def __init__(self, tmp: Path, password: str = "pw-for-tests", db: int = 2):
        self.port, self.password, self.tmp = free_port(), password, tmp
        self.url = f"redis://:{password}@127.0.0.1:{self.port}/{db}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen([REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--requirepass", self.password, "--dir", str(self.tmp)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()  # never left running
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def redis_server(tmp_path):
    if REDIS is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    srv = RedisServer(tmp_path).start()
    try:
        yield srv
    finally:
        srv.stop()
