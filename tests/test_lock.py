"""The locked dependencies (issue 38, item 8): requirements.lock and requirements-dev.lock pin the
whole tree of requirements.txt and requirements-dev.txt with hashes, scripts/setup.sh installs them
with ``--require-hashes``, torch is the CPU wheel (no nvidia-* package), and this environment is
what the lock says. No network: the files and the installed metadata are read."""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCKS = {"requirements.txt": "requirements.lock", "requirements-dev.txt": "requirements-dev.lock"}
SECURITY = ("starlette", "uvicorn", "websockets", "protobuf", "pyarrow")
CPU_TORCH = "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes), from pip-compile's format (a pin, then its --hash lines)."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            current = norm(m[1])
            pins[current] = (m[2], [])
        elif m := re.match(r"^\s+--hash=sha256:([0-9a-f]+)", line):
            assert current is not None, f"{path.name}: a hash before any pin"
            pins[current][1].append(m[1])
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"{path.name}: unexpected line {line!r} (regenerate with sh scripts/lock.sh)")
    return pins


def direct_pins(path: Path) -> dict[str, str]:
    """The ``name==version`` lines of a human-readable requirements file and the files it includes."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins.update(direct_pins(path.parent / line[3:].strip()))
        elif m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$", line):
            pins[norm(m[1])] = m[2]
    return pins


@pytest.fixture(scope="module")
def locks() -> dict[str, dict[str, tuple[str, list[str]]]]:
    return {lock: parse_lock(ROOT / lock) for lock in LOCKS.values()}


@pytest.mark.parametrize("source", LOCKS)
def test_every_pin_of_the_input_is_locked_at_its_version_with_hashes(locks, source):
    lock = locks[LOCKS[source]]
    for name, version in direct_pins(ROOT / source).items():
        assert name in lock, f"{name} is in {source} but not in {LOCKS[source]}: run sh scripts/lock.sh"
        got = lock[name][0]
        # torch==2.13.0 is the CPU build of that release here (2.13.0+cpu, a local version label)
        assert got == version or (name == "torch" and got == f"{version}+cpu"), (name, version, got)
    for name, (version, hashes) in lock.items():
        assert hashes and all(len(h) == 64 for h in hashes), f"{LOCKS[source]}: {name}=={version} has no sha256"


def test_torch_is_the_cpu_wheel_and_nothing_pulls_cuda(locks):
    for lock_name, lock in locks.items():
        assert lock["torch"][0].endswith("+cpu"), (lock_name, lock["torch"])
        cuda = [n for n in lock if n.startswith("nvidia-") or n in ("triton", "cuda-bindings", "cuda-python")]
        assert cuda == [], (lock_name, cuda)
    if Path(CPU_TORCH).exists():  # the wheel pip installs on this machine kind: its hash is the lock's
        digest = hashlib.sha256(Path(CPU_TORCH).read_bytes()).hexdigest()
        assert locks["requirements.lock"]["torch"][1] == [digest]


def test_security_relevant_transitive_packages_are_pinned_and_both_locks_agree(locks):
    app, dev = locks["requirements.lock"], locks["requirements-dev.lock"]
    for name in SECURITY:
        assert name in app and app[name][1], name
    assert set(app) <= set(dev)
    assert {n: app[n] for n in app} == {n: dev[n] for n in app}  # same versions, same hashes


def test_setup_installs_the_locks_with_hashes_required():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    code = [line.split("#", 1)[0] for line in setup.splitlines()]
    installs = [line for line in code if "pip install" in line]
    assert any("--require-hashes" in line and '-r "$lock"' in line for line in installs), installs
    # the project apart, built by the locked setuptools (no unchecked download of a build backend)
    assert any("--no-deps --no-build-isolation -e ." in line for line in installs), installs
    for lock in LOCKS.values():
        assert "setuptools" in parse_lock(ROOT / lock), lock
    assert not any(re.search(r"-r requirements(-dev)?\.txt", line) for line in installs), installs
    assert "lock=requirements.lock" in setup and "lock=requirements-dev.lock" in setup
    for lock in LOCKS.values():  # hash mode refuses an editable: the project is installed apart
        assert not any(line.startswith("-e") for line in (ROOT / lock).read_text().splitlines())


def test_this_environment_is_the_lock(locks):
    """What the suite runs on is what the lock pins (sh scripts/setup.sh --dev installed it)."""
    wrong = {}
    for name, (version, _) in locks["requirements-dev.lock"].items():
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            have = None
        if have != version:
            wrong[name] = (version, have)
    assert wrong == {}, f"installed versions differ from requirements-dev.lock (pinned, installed): {wrong}; " \
                        f"run sh scripts/setup.sh --dev"
