"""``attention-explorer`` (explorer/cli/main.py, pyproject.toml's [project.scripts]): the installed
console script's help, the exporter under it, the settings its options map to, and a server it starts
that answers /_stcore/health."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port

ROOT = Path(__file__).resolve().parent.parent


def command() -> str:
    import sys  # the script pip installed beside this interpreter, else whatever PATH finds (a pyenv shim)

    beside = Path(sys.executable).parent / "attention-explorer"
    found = str(beside) if beside.is_file() else shutil.which("attention-explorer")
    if found is None:
        pytest.fail("no attention-explorer on PATH: install the project (`pip install --no-deps -e .`)")
    return found


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([command(), *args], capture_output=True, text=True, timeout=120, cwd="/",
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_help_of_the_command_and_of_its_exporter():
    done = run("--help")
    assert done.returncode == 0, done.stderr
    for flag in ("--port", "--address", "--hosted", "--require-access-code", "export --help"):
        assert flag in done.stdout, flag
    done = run("export", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: attention-explorer export") and "--stages" in done.stdout


def test_options_map_to_the_settings_the_app_reads(capsys, monkeypatch):
    from explorer.cli import main

    monkeypatch.delenv("ATTENTION_EXPLORER_ACCESS_CODE", raising=False)
    assert main.main(["--port", "9000", "--address", "0.0.0.0", "--hosted", "--models", "/srv/models.toml",
                      "--state-dir", "/srv/state", "--print-command", "--", "--server.fileWatcherType", "auto"]) == 0
    out = capsys.readouterr().out.splitlines()
    env, cmd = dict(line.split("=", 1) for line in out[:-1]), out[-1].split()
    assert env["ATTENTION_EXPLORER_HOSTED"] == "1" and env["ATTENTION_EXPLORER_MODELS"] == "/srv/models.toml"
    assert env["ATTENTION_EXPLORER_STATE_DIR"] == "/srv/state" and env["OMP_NUM_THREADS"]
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(ROOT / "explorer" / "app.py")
    pairs = dict(zip(cmd[5::2], cmd[6::2]))
    assert pairs["--server.port"] == "9000" and pairs["--server.address"] == "0.0.0.0"
    assert pairs["--client.showErrorDetails"] == "none" and pairs["--runner.fastReruns"] == "false"
    assert cmd[-2:] == ["--server.fileWatcherType", "auto"]  # after --: to streamlit, last (it wins)

    assert main.main(["--print-command"]) == 0  # a laptop: none of the hosted settings
    out = capsys.readouterr().out
    assert "ATTENTION_EXPLORER_HOSTED" not in out and "fastReruns" not in out and "--server.address 127.0.0.1" in out


def test_missing_data_is_said_not_hidden(capsys, monkeypatch):
    """A package installed without the checkout's data (``pip install .``): the command says what is
    missing and how to install instead, and starts nothing."""
    from explorer.cli import main

    monkeypatch.setattr(main, "CONFIG", ROOT / "nowhere" / "config.toml")
    with pytest.raises(SystemExit) as e:
        main.main(["--print-command"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "nowhere/config.toml" in err and "pip install -e ." in err


def test_the_command_starts_a_server_that_answers():
    port = free_port()
    proc = subprocess.Popen([command(), "--port", str(port), "--no-warm"], cwd="/", stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline, answer = time.time() + 120, b""
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    answer = r.read().strip()
                    break
            except OSError:
                time.sleep(0.3)
        assert answer == b"ok", f"no health answer (exit status {proc.poll()})"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
