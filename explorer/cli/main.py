"""``attention-explorer``: the app's own command (pyproject.toml's [project.scripts]).

    attention-explorer                               the app on http://127.0.0.1:8501
    attention-explorer --port 8080 --address 0.0.0.0 reachable from other machines
    attention-explorer --hosted                      as one replica of a class's server (scripts/serve.sh)
    attention-explorer -- --server.fileWatcherType auto   anything after -- goes to `streamlit run`
    attention-explorer export --model seed --text "hello world" --stages all   the exporter

It runs ``streamlit run explorer/app.py`` with the app file of the installed package (not the
current folder), with the server settings of ``explorer/cli/streamlit-config.toml`` given as flags
(package data: a copy of the checkout's ``.streamlit/config.toml``, which tests/test_command.py keeps
the same), so the page is the same whatever folder it is started from, in a checkout, an editable
install or a wheel (``pip install .``: the seed weights and the example texts are package data too). Its options set the
environment variables the app reads (README, the host's guide); an access code is read only from
``ATTENTION_EXPLORER_ACCESS_CODE``, never from the command line (it would show in ``ps`` and the
shell's history). ``attention-explorer export ...`` is ``python -m explorer.export ...``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # explorer/
APP = PACKAGE / "app.py"
CONFIG = PACKAGE / "cli" / "streamlit-config.toml"  # = the checkout's .streamlit/config.toml
PROG = "attention-explorer"

# option -> (environment variable, help); the value given is the variable's value
ENV_OPTIONS = {
    "--models": ("ATTENTION_EXPLORER_MODELS", "a models file (TOML) naming local checkpoints (default: the checkout's models.toml, if any)"),
    "--cache": ("ATTENTION_EXPLORER_CACHE", "the folder of fetched weights (default ~/.cache/attention-explorer)"),
    "--state-dir": ("ATTENTION_EXPLORER_STATE_DIR",
                    "where the access limits and the class's poll answers are kept (shared by replicas)"),
    "--trusted-proxies": ("ATTENTION_EXPLORER_TRUSTED_PROXIES",
                          "proxies in front of the app (addresses or CIDR ranges, comma-separated): the "
                          "client is read from their X-Forwarded-For"),
    "--public-url": ("ATTENTION_EXPLORER_PUBLIC_URL",
                     "the address learners open (a server behind a proxy): presenter mode's QR code shows it"),
    "--max-tokens": ("ATTENTION_EXPLORER_MAX_TOKENS", "the most tokens one sentence may have in a run"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run Attention Explorer (the Streamlit app) in your browser. "
                    f"`{PROG} export --help`: the exporter (figures as PNG, SVG, PDF, CSV, GIF).",
        epilog=f"examples: {PROG} --port 8080 | {PROG} --hosted --address 0.0.0.0 | "
               f'{PROG} export --model seed --text "hello world" --stages all --out slides/ | '
               "a class of many: sh scripts/serve.sh (nginx in front of several replicas)")
    p.add_argument("--port", type=int, default=8501, help="the port to listen on (default 8501)")
    p.add_argument("--address", default="127.0.0.1",
                   help="the address to listen on (default 127.0.0.1, this machine only; 0.0.0.0: every interface)")
    p.add_argument("--hosted", action="store_true",
                   help="a shared server (ATTENTION_EXPLORER_HOSTED=1): only the built-in models, quotas per "
                        "page, the allow-list of routes, one torch thread per run, a session's new rerun "
                        "replaces its running one (runner.fastReruns off)")
    p.add_argument("--require-access-code", action="store_true",
                   help="refuse to start without ATTENTION_EXPLORER_ACCESS_CODE in the environment "
                        "(ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE=1)")
    p.add_argument("--no-warm", action="store_true",
                   help="do not load the default model and draw the default figure when the server starts "
                        "(ATTENTION_EXPLORER_WARM=0)")
    for flag, (env, text) in ENV_OPTIONS.items():
        p.add_argument(flag, default=None, metavar=flag.strip("-").split("-")[-1].upper(), help=f"{text} ({env})")
    p.add_argument("--print-command", action="store_true",
                   help="print the environment variables set and the `streamlit run` command, and start nothing")
    return p


def config_flags(path: Path = CONFIG) -> list[str]:
    """The server settings (``.streamlit/config.toml``) as ``streamlit run`` flags (``--section.key value``)."""
    out: list[str] = []
    for section, values in tomllib.loads(path.read_text(encoding="utf-8")).items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out += [f"--{section}.{key}", text]
    return out


def plan(a: argparse.Namespace, extra: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """(the environment variables to set, the command) for the options ``a``."""
    env: dict[str, str] = {}
    flags = ["--server.port", str(a.port), "--server.address", a.address, "--server.headless", "true"]
    if a.hosted:  # as scripts/serve.sh starts a replica
        env["ATTENTION_EXPLORER_HOSTED"] = "1"
        env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
        env["MKL_NUM_THREADS"] = os.environ.get("MKL_NUM_THREADS", "1")
    if a.hosted or os.environ.get("ATTENTION_EXPLORER_ACCESS_CODE", "").strip():
        # a session's new rerun replaces its running one: the pause after a wrong access code then
        # bounds guessing (explorer/access.py), and a class's clicks do not pile up threads
        env["STREAMLIT_RUNNER_FAST_RERUNS"] = "false"
        flags += ["--runner.fastReruns", "false"]
    if a.require_access_code:
        env["ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE"] = "1"
    if a.no_warm:
        env["ATTENTION_EXPLORER_WARM"] = "0"
    for flag, (name, _text) in ENV_OPTIONS.items():
        value = getattr(a, flag.strip("-").replace("-", "_"))
        if value is not None:
            env[name] = value
    command = [sys.executable, "-m", "streamlit", "run", str(APP), *config_flags(), *flags, *extra]
    return env, command


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["export"]:
        from explorer.cli import export

        return export.main(argv[1:], prog=f"{PROG} export")
    extra: list[str] = []
    if "--" in argv:  # the rest goes to `streamlit run` as it is
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = build_parser()
    a = parser.parse_args(argv)
    if not 0 < a.port < 65536:
        parser.error(f"--port {a.port}: use 1..65535")
    if a.max_tokens is not None and not a.max_tokens.isdigit():
        parser.error(f"--max-tokens {a.max_tokens}: a whole number")
    env, command = plan(a, extra)
    if a.print_command:
        for name, value in env.items():
            print(f"{name}={value}")
        print(" ".join(command))
        return 0
    os.environ.update(env)
    from explorer.access import check_required

    try:  # a host who asks for a code and gives none: stop before the server starts (as serve.sh)
        check_required()
    except SystemExit as e:
        parser.exit(2, f"{PROG}: error: {e}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)  # Streamlit's server replaces this process (its signals, its exit status)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
