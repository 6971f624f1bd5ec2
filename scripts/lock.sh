#!/bin/sh
# Regenerate requirements.lock and requirements-dev.lock: every package of the tree of
# requirements.txt (and requirements-dev.txt) pinned, each with the sha256 of every file pip may
# install for it. scripts/setup.sh installs them with `pip install --require-hashes`.
#   sh scripts/lock.sh                               keep every pin that still fits, add what is new
#   sh scripts/lock.sh --upgrade-package starlette   move one package (and what it needs) to its newest
#   sh scripts/lock.sh --upgrade                     move every package to its newest
# The human-readable inputs stay requirements.txt and requirements-dev.txt: edit a pin there, then
# run this. pip-tools runs from a throwaway venv (never the project's environment). pip reads this
# machine's pip configuration, so torch resolves to the CPU wheel it installs (2.13.0+cpu, through
# find-links), never the CUDA build with its nvidia-* packages; tests/test_lock.py checks that.
set -e
cd "$(dirname "$0")/.."
tools=${LOCK_TOOLS:-/tmp/attention-explorer-lock-tools}
if [ ! -x "$tools/bin/pip-compile" ]; then
    python -m venv "$tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check "pip-tools==7.6.2"
fi

compile() {  # input output [pip-compile options]
    in=$1 out=$2
    shift 2
    "$tools/bin/pip-compile" -q --generate-hashes --allow-unsafe --strip-extras \
        --no-emit-find-links --no-emit-index-url --no-header -o "$out" "$@" "$in"
    # hash mode refuses editables: the project itself (`-e .`, no dependencies of its own) is
    # installed apart, with `pip install --no-deps -e .`
    awk -v src="$in" '
        BEGIN {
            print "# Generated from " src " by `sh scripts/lock.sh` (pip-tools; see that script to update it)."
            print "# The whole tree, pinned with hashes, for CPython 3.11 on Linux x86_64. torch is the CPU"
            print "# wheel this machine kind installs (2.13.0+cpu, from pip'"'"'s find-links): no nvidia-* package."
            print "# Install: pip install --require-hashes -r THIS_FILE && pip install --no-deps -e ."
            print "# (scripts/setup.sh does both). Do not edit by hand."
        }
        /^# WARNING: pip install will require the following package to be hashed/ { skip = 1; next }
        skip && /^# Consider using a hashable URL/ { next }
        /^-e / { skip = 2; next }
        skip == 2 && /^    #/ { next }
        { skip = 0; print }
    ' "$out" > "$out.tmp"
    mv "$out.tmp" "$out"
}

compile requirements.txt requirements.lock "$@"
# the test tools on top of the app's exact pins: the two files never disagree on a shared package
compile requirements-dev.txt requirements-dev.lock -c requirements.lock "$@"
# pip-compile's warning about the editable `-e .` is answered above: that line is not in the locks
echo "wrote requirements.lock and requirements-dev.lock; then: sh scripts/setup.sh --dev && python -m pytest -p no:xdist -o addopts= tests/test_lock.py"
