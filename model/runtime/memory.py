"""How much memory a run needs, and how much it may take, checked before the run starts.

The hook tensors dominate: every attention block keeps its scores, masked scores and pattern,
each (batch, heads, T, T) floats, so memory grows with the square of the sentence length
(SmolLM2: 30 layers × 9 heads × 3 tensors × 4 bytes = 3.2 kB per T², 0.85 GB at 512 tokens).

    estimate(info, n_sentences, n_tokens, names)   # bytes: the captured hooks + working memory
    budget()                                       # bytes a run may take, or None if unknown

The budget is $ATTENTION_EXPLORER_RUN_MEMORY_MB if set, else 80 % of the memory available now:
the least of the system's MemAvailable, the room left under this process's cgroup memory limit
(v1 or v2) and under its address-space / data rlimits.
"""
from __future__ import annotations

import os
import re
import resource
import time
from collections.abc import Iterable

BUDGET_ENV = "ATTENTION_EXPLORER_RUN_MEMORY_MB"
BUDGET_SHARE = 0.8  # of the available memory, when no budget is set
FLOAT = 4  # bytes
# measured peak / (hooks + working memory) with glibc's default malloc: 0.96 (seed), 1.20-1.24
# (MiniLM), 1.06-1.31 (SmolLM2, 128-701 tokens); freed blocks are not always reused at once
OVERHEAD = 1.5


def _lengths(info, n_tokens: int) -> dict[str, int]:
    """Positions per stack: the seed decoder runs on its own greedy output (at most 8 more
    tokens than the input, plus <s>), the other stacks on the input."""
    dec = n_tokens if info.kind == "decoder" else min(n_tokens + 9, info.max_len)
    return {"encoder": n_tokens, "decoder": dec}


def hook_bytes(info, n_sentences: int, n_tokens: int, name: str) -> int:
    """Bytes of one captured hook tensor (the shapes of the hook contract)."""
    B, H, hs, d = n_sentences, info.n_heads, info.d_head, info.d_model
    T = _lengths(info, n_tokens)
    parts = name.split(".")
    stack, hook = parts[0], parts[-1]
    Tq = T.get(stack, n_tokens)
    Tk = T["encoder"] if "cross_attn" in parts else Tq
    if hook in ("hook_scores", "hook_masked_scores", "hook_pattern"):
        return B * H * Tq * Tk * FLOAT
    if hook == "hook_mask":
        return B * Tq * Tk  # bool
    if hook in ("hook_q", "hook_z"):
        return B * H * Tq * hs * FLOAT
    if hook in ("hook_k", "hook_v"):
        return B * H * Tk * hs * FLOAT
    if hook == "hook_pos_embed":
        return Tq * d * FLOAT  # (1, T, d): the same for every sentence
    if hook == "hook_ffn_hidden":
        return B * Tq * int(getattr(info, "d_ff", 0) or 4 * d) * FLOAT  # (B, T, d_ff)
    return B * Tq * d * FLOAT  # embeddings, hook_out, the block's stream (resid, sums, norms, ffn_out)


def working_bytes(info, n_sentences: int, n_tokens: int) -> int:
    """What a forward pass holds besides the captured hooks: one attention block's score-sized
    temporaries (scores, masked, softmax, the pattern), the stream, and the logits."""
    B, T = n_sentences, _lengths(info, n_tokens)
    Tq = max(T.values()) if info.kind != "encoder" else T["encoder"]
    scores = 4 * B * info.n_heads * Tq * max(T["encoder"], Tq) * FLOAT
    stream = 16 * B * Tq * info.d_model * FLOAT  # copies of the stream, the FFN's hidden layer
    logits = 0 if info.kind == "encoder" else B * Tq * info.vocab_size * FLOAT
    return scores + stream + logits


def estimate(info, n_sentences: int, n_tokens: int, names: Iterable[str] = ()) -> int:
    """Bytes a run needs: the hook tensors it keeps (``names``) plus its working memory, with
    room for the allocator (``OVERHEAD``)."""
    need = sum(hook_bytes(info, n_sentences, n_tokens, n) for n in names) + working_bytes(info, n_sentences, n_tokens)
    return int(need * OVERHEAD)


# --- how much there is --------------------------------------------------------------------------
def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (cgroup v2: no limit) -> None


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"^MemAvailable:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def _cgroup_room() -> int | None:
    """Bytes left under the tightest memory limit of this process's cgroup and its parents."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            base, limit_f, usage_f = "/sys/fs/cgroup", "memory.max", "memory.current"
        elif "memory" in controllers.split(","):  # v1
            base, limit_f, usage_f = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            folder = os.path.join(base, *parts[:depth])
            limit, usage = _read_int(os.path.join(folder, limit_f)), _read_int(os.path.join(folder, usage_f))
            if limit is not None and usage is not None and limit < 1 << 60:  # v1: 2^63 means none
                rooms.append(max(0, limit - usage))
    return min(rooms) if rooms else None


def _rlimit_room() -> int | None:
    """Bytes left under RLIMIT_AS (address space) and RLIMIT_DATA, if either is set."""
    try:
        with open("/proc/self/status") as f:
            status = f.read()
    except OSError:
        return None
    rooms = []
    for limit_id, field in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft, _ = resource.getrlimit(limit_id)
        m = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
        if soft != resource.RLIM_INFINITY and m:
            rooms.append(max(0, soft - int(m.group(1)) * 1024))
    return min(rooms) if rooms else None


AVAILABLE_TTL = 0.5  # seconds an answer of available() is reused: reading it costs ~1 ms of file reads,
_last_available: tuple[float, int | None] = (float("-inf"), None)  # a 16-token MiniLM run ~12 ms


def available() -> int | None:
    """Bytes this process can still allocate without being refused or killed (None: unknown);
    read at most every ``AVAILABLE_TTL`` seconds."""
    global _last_available
    now = time.monotonic()
    when, room = _last_available
    if now - when < AVAILABLE_TTL:
        return room
    rooms = [r for r in (_meminfo_available(), _cgroup_room(), _rlimit_room()) if r is not None]
    room = min(rooms) if rooms else None
    _last_available = (now, room)
    return room


def budget() -> int | None:
    """Bytes one run may take: $ATTENTION_EXPLORER_RUN_MEMORY_MB, else 80 % of ``available()``."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if raw:
        try:
            mb = float(raw)
        except ValueError:
            raise ValueError(f"{BUDGET_ENV}={raw!r} is not a number of megabytes") from None
        if mb <= 0:
            raise ValueError(f"{BUDGET_ENV}={raw!r}: give a positive number of megabytes")
        return int(mb * 2**20)
    room = available()
    return None if room is None else int(room * BUDGET_SHARE)


def shown(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"
