"""``attention-explorer`` (explorer/cli/main.py, pyproject.toml's [project.scripts]): the installed
console script's help, the exporter under it, the settings its options map to, a server it starts
that answers /_stcore/health, and the same from a wheel (``pip install .``) installed away from the
checkout, with the data the app reads as package data."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import free_port, health

ROOT = Path(__file__).resolve().parent.parent


def command() -> str:
    # the script pip installed beside this interpreter, else whatever PATH finds (a pyenv shim)
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


def test_the_packaged_server_settings_are_the_checkouts():
    """The command reads the copy shipped in the package (a wheel has no .streamlit/), `streamlit run
    explorer/app.py` in the checkout the original: one may not change without the other."""
    from explorer.cli import main

    assert main.CONFIG.parent == ROOT / "explorer" / "cli"
    assert main.CONFIG.read_bytes() == (ROOT / ".streamlit" / "config.toml").read_bytes(), \
        "change both, or: cp .streamlit/config.toml explorer/cli/streamlit-config.toml"


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (it may have exited already: then its own error is the one shown)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def test_the_command_starts_a_server_that_answers():
    port = free_port()
    proc = subprocess.Popen([command(), "--port", str(port), "--no-warm"], cwd="/", stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        assert health(proc, port, 120) == b"ok", f"no health answer (exit status {proc.poll()})"
    finally:
        stop(proc)


# what `pip wheel` is not given: the checkout's build litter and caches (.gitignore), never its .git
NOT_COPIED = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                    ".hypothesis", ".cache", ".venv", "venv", "site", "slides", "tmp")
# run by the installed interpreter, away from the checkout: where everything came from, and what it read
PROBE = """
import json, sys
import model
from model import registry
from explorer import inputs
from explorer.cli import main
from explorer.lessons import catalog
out, _ = model.load("seed").run_with_cache(["hello world"])
files = [model.__file__, main.APP, main.CONFIG, registry.SEED_WEIGHTS["seed"], registry.SEED_TOKENIZER,
         inputs.EXAMPLES_DIR, catalog.LONG_TEXT_FILE]
print(json.dumps({"files": [str(f) for f in files], "path": sys.path, "generated": out.generated,
                  "steps": model.checkpoint_steps("seed"), "examples": inputs.load_examples(),
                  "long": catalog.long_example()}))
"""


def test_a_wheel_installed_away_from_the_checkout_runs(tmp_path):
    """`pip install .` builds a wheel (not an editable install): installed in a virtual environment
    (with this one's packages, so nothing is downloaded) and run from another folder, with the checkout
    on no path, the command starts the installed app with the server settings, and the package loads
    the shipped seed weights, their checkpoints, the example texts and the long text from itself."""
    import model
    from explorer import inputs
    from explorer.cli import main
    from explorer.lessons import catalog

    src, wheels, venv, away = (tmp_path / name for name in ("src", "wheels", "venv", "away"))
    shutil.copytree(ROOT, src, ignore=NOT_COPIED)  # built from a copy: the checkout gets no build/ or egg-info
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")

    def run_away(*args) -> str:
        done = subprocess.run([str(a) for a in args], cwd=away, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run_away(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
             "-w", wheels, src)
    [wheel] = wheels.glob("attention_explorer-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"model", "explorer"}  # no tests/, bench/
    wanted = {p.relative_to(src).as_posix() for pattern in ("model/**/*.py", "explorer/**/*.py", "model/assets/*",
                                                            "explorer/examples/**/*.txt", "explorer/words/*.toml")
              for p in src.glob(pattern)}
    assert "model/assets/seed-reverse.safetensors" in wanted and "explorer/examples/long/ko_en.txt" in wanted
    assert wanted | {"explorer/cli/streamlit-config.toml"} <= names, sorted(wanted - names)
    assert not [n for n in names if n.endswith((".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt"))]

    run_away(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv)
    python, script = venv / "bin" / "python", venv / "bin" / "attention-explorer"
    # --ignore-installed: this interpreter's editable install of the checkout is not the one wanted here
    run_away(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", wheel)
    port = free_port()
    server = subprocess.Popen([script, "--port", str(port), "--no-warm"], cwd=away, env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        command_line = run_away(script, "--print-command").splitlines()[-1].split()
        assert Path(command_line[4]).is_relative_to(venv.resolve()) and command_line[4].endswith("explorer/app.py")
        assert " ".join(main.config_flags(ROOT / ".streamlit" / "config.toml")) in " ".join(command_line)

        seen = json.loads(run_away(python, "-c", PROBE))
        for f in seen["files"]:  # every module and data file from the installed package
            assert Path(f).resolve().is_relative_to(venv.resolve()) and Path(f).exists(), f
        assert not [p for p in seen["path"] if (away / p).resolve() == ROOT.resolve()]  # "" is away
        assert seen["generated"] == ["dlrow olleh"]  # the shipped weights: the seed reverses its input
        assert seen["steps"] == model.checkpoint_steps("seed") and len(seen["steps"]) > 1
        assert seen["examples"] == inputs.load_examples() and seen["examples"]
        assert seen["long"] == catalog.long_example()

        assert health(server, port, 60) == b"ok", f"no health answer (exit status {server.poll()})"
    finally:
        stop(server)
