"""The project's measurements from any environment (issue 38, item 9): ``python -m bench`` started by a
virtual environment's interpreter without activating it passes that interpreter to serve.sh and its
replicas (PYTHON, and its folder first on PATH); a failure's message carries the real cause (the log
is read by name, never flushed after it was closed); the peers' venv sees this interpreter's packages.
Nothing here starts streamlit, nginx or a model: serve.sh is replaced by a few lines of shell."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import peers
from bench import server as sv

ROOT = Path(__file__).resolve().parent.parent


def test_children_get_this_interpreter():
    env = sv.interpreter_env()
    assert env["PYTHON"] == sys.executable
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert env["PATH"].endswith(os.environ["PATH"])
    assert sv.interpreter_env({"PYTHON": "/other/python"})["PYTHON"] == "/other/python"  # the caller's wins
    assert sv.Server(hosted=True).env["PYTHON"] == sys.executable
    assert sv.Balancer(2).env["PYTHON"] == sys.executable


def fake_root(tmp_path: Path, script: str) -> Path:
    """A checkout whose scripts/serve.sh is ``script``."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "serve.sh").write_text(textwrap.dedent(script))
    return root


def test_serve_sh_runs_this_interpreter_and_its_failure_is_reported(tmp_path):
    root = fake_root(tmp_path, """\
        echo "PYTHON=$PYTHON"
        echo "python=$(command -v python)"
        "$PYTHON" -c "import sys; print('runs', sys.executable)"
        echo "serve.sh: $PYTHON cannot import streamlit" >&2
        exit 2
    """)
    with pytest.raises(RuntimeError) as e:
        with sv.Balancer(2, root=root, start_timeout=60):
            pass
    msg = str(e.value)
    assert msg.startswith("serve.sh exited (2):"), msg
    assert f"PYTHON={sys.executable}" in msg and f"runs {sys.executable}" in msg
    assert f"python={os.path.join(os.path.dirname(sys.executable), 'python')}" in msg
    assert "cannot import streamlit" in msg


def test_a_start_that_times_out_reports_the_replicas_cause_not_a_closed_file(tmp_path):
    """serve.sh still waiting for replicas that keep failing: the message names their error."""
    root = fake_root(tmp_path, """\
        run=$(mktemp -d "${TMPDIR:-/tmp}/attention-explorer-serve.XXXXXX")
        echo "ModuleNotFoundError: No module named 'streamlit'" > "$run/replica-1.log"
        echo "serve.sh: replica 1 (port 1, pid 1) exited with status 1 after 0 s; starting it again in 1 s" >&2
        exec sleep 60
    """)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with pytest.raises(RuntimeError) as e:
        with sv.Balancer(2, root=root, start_timeout=2, env={"TMPDIR": str(tmp)}):
            pass
    msg = str(e.value)
    assert "did not start in 2 s" in msg and "exited with status 1" in msg, msg
    assert "No module named 'streamlit'" in msg and "replica-1.log" in msg, msg


def test_log_tail_of_a_closed_or_missing_log_is_text():
    srv = sv.Server(hosted=True)
    Path(srv.log.name).write_text("line 1\nTraceback: the real cause\n")
    srv.log.close()  # as __exit__ leaves it, before the failure's message is made
    assert srv.log_tail(1) == "Traceback: the real cause"
    os.unlink(srv.log.name)
    assert srv.log_tail().startswith(f"(no log at {srv.log.name}:")


@pytest.mark.slow
def test_the_peers_venv_sees_the_packages_of_the_interpreter_that_made_it(tmp_path):
    """bench run from a bare venv's interpreter (not activated): the peers' venv it makes imports a
    module that only that venv has (before: only the base interpreter's packages, gguf missing)."""
    outer = tmp_path / "outer"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(outer)], check=True)
    site = subprocess.run([str(outer / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "only_in_outer_venv.py").write_text("WHERE = 'outer'\n")
    inner = tmp_path / "inner"
    make = subprocess.run([str(outer / "bin" / "python"), "-c", "import sys; from pathlib import Path; "
                           "from bench.peers import new_venv; print(new_venv(Path(sys.argv[1])))", str(inner)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert make.returncode == 0, make.stderr[-2000:]
    python = make.stdout.strip().splitlines()[-1]
    got = subprocess.run([python, "-c", "import only_in_outer_venv as m; print(m.WHERE)"], capture_output=True, text=True)
    assert got.stdout.strip() == "outer", got.stderr[-1500:]
    assert (Path(python).parent.parent / "pyvenv.cfg").exists()
    assert peers.SITE_PTH in os.listdir(Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()))
