"""The float32 conversion of a GGUF, cached on disk: written safely, verified on every read.

    path = converted_path(gguf)                # next to a fetched GGUF, else <cache>/converted/
    with conversion_lock(gguf):                # one process converts, the others wait here
        remove_stale_temporaries(path)         # debris of a process killed while writing
        with converting():                     # torch work and the write: at interpreter exit,
            write(path, state, metadata)       # stop and clean up first; a write failure warns
    read(path, expect={...})                   # None (with a warning) unless intact and current

The file is a safetensors file (float32 tensors, the source's size/mtime, the configuration and
tokenizer in its metadata) whose metadata also holds the sha256 of all tensor data, in name
order. ``read`` hashes the tensors as it reads them: for SmolLM2's 540 MB, 0.55 s where a lazy
(memory-mapped) read took 0.02 s and left the pages to be read by the first run (the hash alone:
0.32 s on a 2 GHz Zen 1 core). A file corrupted in place is then converted again instead of
giving wrong logits. It reads them into numpy arrays, on huge pages where the kernel gives them
(see "reading" below: 2–3 % off every forward pass of Gemma 3); the sizes in the header are
checked against the file before anything is allocated.

Writing goes to a hidden temporary file in the same folder, then ``os.replace``: a reader never
sees a partial file. Any failure to write (read-only folder, full disk, any library error) is a
warning: the model still loads from the GGUF. The tensors are written in chunks from Python.
A process asked to exit while converting (SIGTERM in Streamlit, which exits the main thread
while the conversion runs in another) stops between two tensors or chunks, removes its
temporary file and parks that thread; before, the interpreter tore the thread down inside the
native writer and the process aborted ("FATAL: exception not rethrown", exit -6, a 540 MB
temporary file left). Ctrl-C removes the temporary file too. A process killed outright leaves
it behind; the next load of the same file removes it.
"""
from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import torch

from model.runtime.errors import WeightsError

log = logging.getLogger(__name__)

CHUNK = 8 << 20  # bytes per write: how long a process may take to notice it should stop
EXIT_WAIT_S = 30.0  # at exit, how long to wait for a conversion to stop
DIGEST_KEY = "sha256"


class Interrupted(WeightsError):
    """The process is exiting: a conversion stopped (and removed its temporary file)."""


# --- where -------------------------------------------------------------------------------------
def converted_path(gguf_path: Path) -> Path:
    """Where the float32 conversion of ``gguf_path`` lives.

    Next to the GGUF when it sits in the cache folder (the fetched SmolLM2); otherwise in
    ``<cache>/converted/``, so that a user's model folder is never written to.
    """
    from model.fetch import cache_dir  # not at the top: see model/pretrained.py

    gguf_path = gguf_path.resolve()
    root = cache_dir().resolve()
    if root in gguf_path.parents:
        return gguf_path.with_name(gguf_path.name + ".f32.safetensors")
    tag = hashlib.sha1(str(gguf_path).encode()).hexdigest()[:12]
    return root / "converted" / f"{gguf_path.stem}-{tag}.f32.safetensors"


def identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime) of ``path``, None if absent: tells whether it was replaced."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def temporaries(path: Path) -> list[Path]:
    """Temporary files of ``path`` (``.{name}.{pid}.tmp``) in its folder."""
    try:
        return sorted(path.parent.glob(f".{path.name}.*.tmp"))
    except OSError:
        return []


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the temporary files of ``path`` left by processes that died while writing.

    Call it holding ``conversion_lock(source)``: then nobody else is writing one.
    """
    removed = []
    for tmp in temporaries(path):
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    if removed:
        log.warning("removed %d stale temporary file(s) of %s", len(removed), path.name)
    return removed


def tidy(path: Path, source: Path) -> None:
    """Remove stale temporary files of ``path`` if there are any and nobody is converting
    ``source`` right now (a non-blocking try of the lock; cheap when there is nothing)."""
    if not temporaries(path):
        return
    try:
        fd = os.open(source, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        remove_stale_temporaries(path)
    except OSError:
        pass  # someone is converting: their temporary file is not stale
    finally:
        os.close(fd)


# --- one conversion at a time --------------------------------------------------------------------
@contextlib.contextmanager
def conversion_lock(source: Path) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on the source file (the GGUF) while converting it.

    Processes and threads that convert the same file take turns; the others then find the
    cache written. Locking the source (opened read-only) creates no file anywhere, so a file
    rejected by its checks leaves nothing behind, and a read-only cache folder locks as well.
    Yields False when the source cannot be opened (then every caller converts for itself).
    """
    try:
        fd = os.open(source, os.O_RDONLY)
    except OSError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks (the GIL released) while another converts
        yield True
    finally:
        os.close(fd)  # releases the lock


def load_or_convert(source: Path, conv: Path, load, convert):
    """The model from ``conv``, the float cache of ``source`` (``load()``: the model, or None when the
    cache is missing or does not match), else from ``convert()``, run once across processes: whoever
    waited on the lock while another converted reads what it wrote (model/files/gguf_family.py)."""
    seen = identity(conv)
    m = load()
    if m is not None:
        tidy(conv, source)
        return m
    with conversion_lock(source) as locked:
        if locked and identity(conv) not in (None, seen):  # written while we waited
            m = load()
            if m is not None:
                return m
        if locked:
            remove_stale_temporaries(conv)
        return convert()


# --- stopping cleanly at exit --------------------------------------------------------------------
_state = threading.Condition()
_active = [0]  # conversions in progress in this process
_stop = threading.Event()
_parked = threading.Event()  # never set: a stopped conversion's thread waits on it until the end
_registered = [False]


def _stop_conversions() -> None:
    """At interpreter exit (atexit runs before daemon threads are torn down, and after the other
    threads have finished): ask every conversion to stop and wait until each has removed its
    temporary file and parked its thread outside torch, so that no thread is torn down inside
    native code."""
    _stop.set()
    with _state:
        _state.wait_for(lambda: _active[0] == 0, timeout=EXIT_WAIT_S)


def _leave() -> None:
    with _state:
        _active[0] -= 1
        _state.notify_all()


@contextlib.contextmanager
def converting() -> Iterator[None]:
    """Mark torch work or a cache write in progress: at exit, ``check_stop`` inside the block
    raises ``Interrupted``; the block's clean-up runs, then the thread parks here for good (a
    pure wait on a lock: the process ends around it) instead of unwinding into native code
    while the interpreter shuts down."""
    with _state:
        if not _registered[0]:
            atexit.register(_stop_conversions)
            _registered[0] = True
        _active[0] += 1
    left = False
    try:
        check_stop()
        yield
    except Interrupted:
        _leave()
        left = True
        if threading.current_thread() is not threading.main_thread():
            _parked.wait()
        raise
    finally:
        if not left:
            _leave()


def check_stop() -> None:
    """Raise ``Interrupted`` when the process is exiting (call between pieces of work)."""
    if _stop.is_set():
        raise Interrupted("the conversion stopped because the process is exiting")


# --- writing -----------------------------------------------------------------------------------
HOLD_ENV = "ATTENTION_EXPLORER_TEST_HOLD_WRITE"  # tests only: a path (see _hold)
HOLD_S = 120.0  # the longest a held write waits before it goes on


def _hold(marker: str) -> None:
    """A test hook: a write that has begun (its temporary file open, the header written) creates
    ``marker``, then waits until the process is asked to stop (Ctrl-C raises here; at exit
    ``check_stop`` does), for at most HOLD_S. A signal sent once ``marker`` exists therefore arrives
    while the write is in progress (tests/test_faults.py). Unset, ``_write_file`` never calls it."""
    Path(marker).write_text(f"{os.getpid()}\n")
    deadline = time.monotonic() + HOLD_S
    # time.sleep, not _stop.wait: a Ctrl-C that lands inside Event.wait's lock hand-over in the main
    # thread can leave the event's lock held, and the exit handler's _stop.set() then waits on it
    # forever (the full suite hung here once for over 60 s); sleep and is_set take no lock
    while not _stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    check_stop()


def _write_chunk(f, data: memoryview) -> None:
    f.write(data)


def _header(state: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> bytes:
    entries, offset = {}, 0
    for name in sorted(state):
        t = state[name]
        if t.dtype != torch.float32 or not t.is_contiguous():
            raise ValueError(f"{name}: only contiguous float32 tensors are cached")
        n = t.numel() * 4
        entries[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    header = json.dumps({"__metadata__": dict(metadata), **entries}, separators=(",", ":")).encode()
    return header + b" " * (-len(header) % 8)  # the data starts 8-byte aligned


def _write_file(tmp: Path, state: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> None:
    """A safetensors file, written chunk by chunk; the data's sha256 goes into the header at the
    end (same length as its placeholder, so the header is rewritten in place)."""
    placeholder = {**metadata, DIGEST_KEY: "0" * 64}
    header = _header(state, placeholder)
    digest = hashlib.sha256()
    hold = os.environ.get(HOLD_ENV)  # once per file: nothing inside the loop below
    with open(tmp, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        if hold:
            f.flush()
            _hold(hold)
        for name in sorted(state):
            data = memoryview(state[name].numpy()).cast("B")
            for i in range(0, len(data), CHUNK):
                check_stop()
                piece = data[i: i + CHUNK]
                digest.update(piece)
                _write_chunk(f, piece)
        final = _header(state, {**metadata, DIGEST_KEY: digest.hexdigest()})
        assert len(final) == len(header)
        f.seek(8)
        f.write(final)


def write(path: Path, state: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> bool:
    """Write the cache file; True if written. A failure is a warning, never an exception (except
    ``Interrupted`` at exit); the temporary file is removed in every case."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_file(tmp, state, metadata)
        os.replace(tmp, path)
        return True
    except Interrupted:
        raise
    except Exception as e:  # OSError (read-only, ENOSPC, EDQUOT), library errors, anything
        reason = os.strerror(e.errno) if isinstance(e, OSError) and e.errno else f"{type(e).__name__}: {e}"
        hint = " (the disk is full)" if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        warnings.warn(f"could not write the float cache {path.name} in {path.parent} ({reason}){hint}; "
                      f"the model is loaded from the GGUF, and the next load converts it again",
                      stacklevel=3)
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


# --- reading -----------------------------------------------------------------------------------
# The tensors are read (``readinto``) into arrays the process owns, not memory-mapped from the
# file. numpy asks the kernel for transparent huge pages for arrays of 4 MB and more
# (madvise(MADV_HUGEPAGE)), and a matrix product streaming a large weight through the CPU pays
# for 4 kB pages in TLB misses: Gemma 3's output projection (262,144 × 640) at 128 tokens took
# 199 ms from the file's pages and 194 ms from huge pages, side by side in one process, and the
# whole forward pass was 2–4 % behind transformers' (whose dequantized weights are numpy arrays)
# until the weights were read this way (README, "The families and Gemma 3 against transformers").
# Read, not mapped, the file's pages also stay out of the process's memory (the page cache is the
# kernel's): the peak is the weights once.
MAX_HEADER = 64 << 20  # bytes: the metadata holds the configuration and the tokenizer (Gemma 3: ~10 MB)


def _layout(fh, size: int) -> tuple[int, dict]:
    """(where the data starts, the header) of an open safetensors file of ``size`` bytes; every
    entry checked against the file's size before anything is allocated."""
    raw = fh.read(8)
    if len(raw) != 8:
        raise ValueError("shorter than a safetensors header")
    n = int.from_bytes(raw, "little")
    if not 2 <= n <= min(MAX_HEADER, size - 8):
        raise ValueError(f"header length {n} does not fit a {size}-byte file")
    header = json.loads(fh.read(n))
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    data = size - 8 - n
    for name, e in header.items():
        if name == "__metadata__":
            continue
        shape, offsets = e.get("shape"), e.get("data_offsets")
        if e.get("dtype") != "F32":
            raise ValueError(f"{name} is {e.get('dtype')}, not float32")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
                and isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise ValueError(f"{name}: a malformed entry")
        begin, end = offsets
        if not 0 <= begin <= end <= data or end - begin != 4 * math.prod(shape):
            raise ValueError(f"{name}: bytes {begin}..{end} do not hold a float32 {shape} inside the file")
    return 8 + n, header


def _read_into(fh, at: int, out: np.ndarray) -> None:
    view = memoryview(out).cast("B")
    fh.seek(at)
    got = 0
    while got < len(view):
        k = fh.readinto(view[got:])
        if not k:
            raise ValueError("the file ends inside a tensor")
        got += k


def read(path: Path, expect: Mapping[str, str]) -> tuple[dict[str, str], dict[str, torch.Tensor]] | None:
    """(metadata, tensors) when ``path`` is an intact cache whose metadata has ``expect``'s
    values; None when there is no file, when it is stale (silently), or when it is unreadable or
    fails its checksum (with a warning): the caller converts again and overwrites it."""
    if not path.is_file():
        return None
    try:
        with open(path, "rb", buffering=0) as fh:
            start, header = _layout(fh, os.fstat(fh.fileno()).st_size)
            meta = header.get("__metadata__") or {}
            if any(meta.get(k) != v for k, v in expect.items()) or DIGEST_KEY not in meta:
                return None  # the GGUF changed, or an earlier version wrote it: stale
            want = meta[DIGEST_KEY]
            digest = hashlib.sha256()
            state = {}
            for name in sorted(k for k in header if k != "__metadata__"):
                e = header[name]
                out = np.empty(math.prod(e["shape"]), dtype=np.float32)  # huge pages from 4 MB on
                _read_into(fh, start + e["data_offsets"][0], out)
                digest.update(memoryview(out).cast("B"))
                state[name] = torch.from_numpy(out).view(e["shape"])
    except Exception as e:  # truncated, foreign or mangled header
        warnings.warn(f"ignoring the unreadable float cache {path.name} ({type(e).__name__}: "
                      f"{str(e)[:200]}); converting the GGUF again", stacklevel=3)
        return None
    if want != digest.hexdigest():
        warnings.warn(f"the float cache {path.name} does not match its checksum (it was changed or "
                      f"damaged after it was written); converting the GGUF again", stacklevel=3)
        return None
    return meta, state
