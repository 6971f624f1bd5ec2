"""glibc malloc settings for any process that imports ``model``: freed memory is kept for reuse.

    import model         # applies them (model/__init__.py calls tune() once, at import)
    from model.runtime import malloc
    malloc.tune()        # idempotent: returns what was applied; explorer/state.py calls it too

A run keeps every hook tensor (SmolLM2 on two 64-token sentences: ~90 MB) until the cache drops
it. With glibc's defaults, blocks that big are mmap-ed one by one and handed back to the kernel
when freed, so the next run faults every page in again (zero-filled: ~22,000 page faults a
SmolLM2 run, about 10-15% of its time, measured by ``python -m bench``; a SmolLM2 run keeping
every hook at 512 tokens took 9.1 s with the defaults and 2.9 s with these settings, one thread,
measured side by side on a shared machine), and with one thread per
session glibc makes an arena per thread, whose freed memory other threads cannot reuse: the
server's memory crept up over hundreds of reruns. Kept for reuse instead (2 arenas, no mmap
below 1 GiB, no trimming), the same forward pass with hooks costs what it costs without, and the
server's memory stays at its high-water mark.

A setting already given in the environment (``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, e.g. by the Dockerfile) is left as it is; anything but glibc on Linux
(musl, macOS, Windows) is left alone, silently; ``ATTENTION_EXPLORER_MALLOC=default`` keeps glibc's
defaults (``python -m bench --malloc default`` and ``python -m bench peers --malloc default``
measure them). Only the standard library is used here, so importing this module is cheap.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# mallopt parameters (glibc malloc.h) and the values used
SETTINGS = {
    "MALLOC_ARENA_MAX": (-8, 2),  # M_ARENA_MAX
    "MALLOC_MMAP_THRESHOLD_": (-3, 2**30),  # M_MMAP_THRESHOLD
    "MALLOC_TRIM_THRESHOLD_": (-1, 2**30),  # M_TRIM_THRESHOLD
}
_applied: dict[str, int] | None = None


def tune() -> dict[str, int]:
    """Apply SETTINGS once per process (where the environment does not set them already);
    returns what was applied (empty on other platforms)."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = {}
    if not sys.platform.startswith("linux") or os.environ.get("ATTENTION_EXPLORER_MALLOC") == "default":
        return _applied
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc only  # noqa: B018
    except (OSError, AttributeError):
        return _applied
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    for name, (param, value) in SETTINGS.items():
        if name in os.environ:
            continue
        if mallopt(param, value) == 1:
            _applied[name] = value
    return _applied


def trim() -> bool:
    """Hand the heap's free memory back to the kernel once (glibc's ``malloc_trim(0)``): for a moment
    like the end of a model load, whose laid-out copies (model/arch/generic.py: lay_out_weights) leave
    the old layouts' blocks free in the heap, which the settings above then keep. SmolLM2 from its
    float cache: 905 MB resident after the load without it, 832 MB with it (bench/results/
    smollm2-load-ab-20261128.txt). False where it does not apply (not glibc, or glibc's defaults asked)."""
    if not sys.platform.startswith("linux") or os.environ.get("ATTENTION_EXPLORER_MALLOC") == "default":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # glibc only  # noqa: B018
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    fn(0)
    return True
