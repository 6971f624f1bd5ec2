#!/bin/sh
# Install what Attention Explorer needs on a Debian machine (run from the repository root).
#   sh scripts/setup.sh          the app: Python packages + chromium and a CJK font for export
#   sh scripts/setup.sh --dev    the same, plus the test tools, nginx (the balancer's tests) and
#                                Debian's redis-server (tests/test_store.py starts its own on a free
#                                loopback port; on a host with systemd, Debian also starts its service
#                                on 127.0.0.1:6379, which nothing here uses: `systemctl disable --now
#                                redis-server` turns it off)
# Python packages come from requirements.lock / requirements-dev.lock, hashes required.
# Debian's chromium is used for static export (kaleido) and the browser tests; nothing ever
# downloads a browser of its own.
set -e
cd "$(dirname "$0")/.."
need=""
[ "${1:-}" = "--dev" ] && { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need="$need nginx-light"; }
[ "${1:-}" = "--dev" ] && { command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need="$need redis-server"; }
[ -x /usr/bin/chromium ] || need="$need chromium"
dpkg -s fonts-noto-cjk >/dev/null 2>&1 || need="$need fonts-noto-cjk"
if [ -n "$need" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing:$need"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
    else
        echo "note: figure export (chromium, fonts-noto-cjk) and the tests (nginx-light, redis-server) need Debian packages:$need (sudo apt-get install -y$need)" >&2
    fi
fi
# The locked tree (scripts/lock.sh makes the lock files from requirements*.txt): every package at its
# pinned version, each file checked against its sha256 before it is installed. The dev lock holds the
# app's pins too. The project itself is installed apart (hash mode refuses an editable requirement),
# built by the locked setuptools: no build tool is downloaded unchecked.
lock=requirements.lock
[ "${1:-}" = "--dev" ] && lock=requirements-dev.lock
python -m pip install -q --disable-pip-version-check --require-hashes -r "$lock"
python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
