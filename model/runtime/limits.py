"""What text may enter a run: the token limit per sentence, and the memory a run may take.

Every entry point that runs text goes through ``HookedModel.prepare_texts`` (this module's
``prepare``) and then ``HookedModel.check_memory``: ``run``, ``run_with_cache``, and the
exporter or a future ``generate_with_cache`` by calling the same two methods.

    limit: info.max_tokens   = model.load(..., max_tokens=N), else $ATTENTION_EXPLORER_MAX_TOKENS
                               (capped at the model's positions), else 512 (or fewer positions)
    over the limit           -> InputTooLong (names the sentence, its tokens, the limit), or with
                                truncate=True the sentence is cut at a token boundary and marked
    lone surrogates          -> U+FFFD (the tokenizer cannot take them)
    memory (model/runtime/memory.py) -> RunTooLarge before the run, when its estimate exceeds the budget

And how many runs a server process runs at once: ``run_slots()`` (its CPUs: the affinity, bounded by the
cgroup CPU quota, ``cgroup_cpus()``; ``ATTENTION_EXPLORER_MAX_RUNS`` overrides).
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from model.files.tokenizer import Encoded, TextTokenizer, clean_text
from model.runtime import memory
from model.runtime.errors import InputTooLong, RunTooLarge

DEFAULT_MAX_TOKENS = 512  # tokens per sentence in a run, unless the model has fewer positions
MAX_TOKENS_ENV = "ATTENTION_EXPLORER_MAX_TOKENS"


@dataclass
class Prepared:
    """Sentences ready for a run: tokenizable, within the token limit."""

    texts: list[str]
    truncated: list[bool]  # cut to the limit (only with truncate=True)
    n_tokens: list[int]  # tokens per sentence, specials included (after any cut)

    @property
    def longest(self) -> int:
        return max(self.n_tokens)


def check_texts(texts: str | Iterable[str]) -> list[str]:
    """A list of strings, at least one, with lone surrogates replaced (U+FFFD)."""
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError("give at least one sentence")
    if not all(isinstance(t, str) for t in texts):
        raise TypeError("sentences must be strings")
    return [clean_text(t) for t in texts]


def token_limit(info, n: int | None = None) -> int | None:
    """The limit to set on a model described by ``info``: ``n``; else the environment's (capped
    at the model's positions); None to keep the model's default."""
    if n is None:
        raw = os.environ.get(MAX_TOKENS_ENV, "").strip()
        if not raw:
            return None
        try:
            n = min(int(raw), info.max_len)
        except ValueError:
            raise ValueError(f"{MAX_TOKENS_ENV}={raw!r} is not a whole number of tokens") from None
        source = MAX_TOKENS_ENV
    else:
        source = "max_tokens"
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= info.max_len:
        raise ValueError(f"{source}={n!r}: {info.name} takes 1 to {info.max_len} tokens per "
                         f"sentence (its positions)")
    return n


def prepare(texts: str | Iterable[str], tokenizer: TextTokenizer, info, *, truncate: bool = False) -> Prepared:
    """Check sentences against ``info.max_tokens``; see ``HookedModel.prepare_texts``."""
    texts = check_texts(texts)
    limit = info.max_tokens
    out = Prepared([], [], [])
    for i, (text, enc) in enumerate(zip(texts, tokenizer.encode(texts))):
        n, cut = len(enc.ids), False
        if n > limit:
            if not truncate:
                shown = text if len(text) <= 40 else text[:40] + "…"
                raise InputTooLong(
                    f"sentence {i} ({shown!r}) has {n} tokens; {info.name} takes at most {limit} "
                    f"per sentence. Shorten or split it, pass truncate=True to cut it, or load the "
                    f"model with max_tokens=N (or set {MAX_TOKENS_ENV}; at most {info.max_len})",
                    index=i, n_tokens=n, limit=limit)
            text, n = cut_to_limit(text, enc, tokenizer, limit)
            cut = True
        out.texts.append(text)
        out.truncated.append(cut)
        out.n_tokens.append(n)
    return out


def cut_to_limit(text: str, enc: Encoded, tokenizer: TextTokenizer, limit: int) -> tuple[str, int]:
    """The longest prefix of ``text`` that ends at a token boundary and has at most ``limit``
    tokens (specials included), and its token count."""
    n = len(enc.ids)
    for keep in range(limit, -1, -1):
        ends = [b for (_, b) in enc.offsets[:keep] if b > 0]
        cut = text[: max(ends)] if ends else ""
        n = len(tokenizer.encode([cut])[0].ids)
        if n <= limit:
            return cut, n
    raise InputTooLong(f"even an empty sentence has {n} tokens, more than the limit of {limit}",
                       index=0, n_tokens=n, limit=limit)


def check_memory(info, n_sentences: int, n_tokens: int, names: Iterable[str] = ()) -> int:
    """The estimate in bytes; ``RunTooLarge`` if it exceeds the budget (model/runtime/memory.py)."""
    names = list(names)
    need = memory.estimate(info, n_sentences, n_tokens, names)
    allowed = memory.budget()
    if allowed is not None and need > allowed:
        kept = f", keeping {len(names)} hook tensor(s)" if names else ""
        raise RunTooLarge(
            f"this run would need about {memory.shown(need)} ({n_sentences} sentence(s) of up to "
            f"{n_tokens} tokens through {info.name}{kept}) but may take {memory.shown(allowed)}. "
            f"Run fewer or shorter sentences, ask for fewer hook names, or set {memory.BUDGET_ENV} "
            f"(megabytes)", estimate=need, budget=allowed)
    return need


# --- run slots: how many forward passes one process runs at once ------------------------------------
# One per CPU the process may really use: its affinity, bounded by the container's CPU quota (a pod with
# `limits.cpu: 2` on a 64-core node has 2, not 64), at most MAX_RUNS_CAP; ATTENTION_EXPLORER_MAX_RUNS
# overrides. os.cpu_count() counts the node's cores, which a quota does not give.
MAX_RUNS_ENV = "ATTENTION_EXPLORER_MAX_RUNS"
MAX_RUNS_CAP = 4
CGROUP_ROOT = "/sys/fs/cgroup"


def _cgroup_dirs(root: Path, proc_cgroup: Path, controller: str | None) -> list[Path]:
    """The directories whose limits apply to this process: its own cgroup (``/proc/self/cgroup``,
    v2 when ``controller`` is None, else the v1 line naming it) and every ancestor up to ``root``,
    and ``root`` itself (inside a container's cgroup namespace the process's cgroup *is* the root)."""
    rel = None
    try:
        for line in proc_cgroup.read_text().splitlines():
            num, _, rest = line.partition(":")
            names, _, path = rest.partition(":")
            if (controller is None and num == "0" and names == "") or (
                    controller is not None and controller in names.split(",")):
                rel = path
                break
    except OSError:
        pass
    dirs = [root]
    if rel and rel.strip("/"):
        parts = [p for p in rel.strip("/").split("/") if p not in ("", ".", "..")]
        dirs += [root.joinpath(*parts[:i]) for i in range(1, len(parts) + 1)]
    return [d for d in dirs if d.is_dir()]


def cgroup_cpus(root: str | Path = CGROUP_ROOT, proc_cgroup: str | Path = "/proc/self/cgroup") -> float | None:
    """The CPUs this process may use by its cgroup's CPU quota (quota / period; the smallest over its
    cgroup and their parents), or None when there is no quota or it cannot be read.

    cgroup v2: ``cpu.max`` ("max 100000" = none, "200000 100000" = 2 CPUs). cgroup v1:
    ``cpu.cfs_quota_us`` (-1 = none) over ``cpu.cfs_period_us``, in the ``cpu`` (or ``cpu,cpuacct``)
    hierarchy."""
    root, proc_cgroup = Path(root), Path(proc_cgroup)
    found: list[float] = []
    for d in _cgroup_dirs(root, proc_cgroup, None):  # v2
        try:
            fields = (d / "cpu.max").read_text().split()
        except OSError:
            continue
        try:
            if fields and fields[0] != "max":
                period = int(fields[1]) if len(fields) > 1 else 100_000
                if int(fields[0]) > 0 and period > 0:
                    found.append(int(fields[0]) / period)
        except ValueError:
            continue
    if found:
        return min(found)
    for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):  # v1
        base = root / mount
        if not base.is_dir():
            continue
        for d in _cgroup_dirs(base, proc_cgroup, "cpu"):
            try:
                quota = int((d / "cpu.cfs_quota_us").read_text().strip())
                period = int((d / "cpu.cfs_period_us").read_text().strip())
            except (OSError, ValueError):
                continue
            if quota > 0 and period > 0:
                found.append(quota / period)
        if found:
            return min(found)
    return None


def usable_cpus() -> int:
    """CPUs this process may be scheduled on (its affinity; os.cpu_count() where there is none)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_slots(environ=None, *, quota: float | None | str = "read", cpus: int | None = None,
              cap: int = MAX_RUNS_CAP) -> int:
    """How many forward passes run at once: ``ATTENTION_EXPLORER_MAX_RUNS`` when set (at least 1);
    else ``min(cpus, ceil(quota), cap)``: ``cpus`` the affinity's count (``usable_cpus``), ``quota``
    the cgroup's CPUs (``cgroup_cpus``; None = no quota). At least 1."""
    env = os.environ if environ is None else environ
    raw = (env.get(MAX_RUNS_ENV) or "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            raise ValueError(f"{MAX_RUNS_ENV}={raw!r} is not a whole number of runs") from None
    n = usable_cpus() if cpus is None else int(cpus)
    limit = cgroup_cpus() if quota == "read" else quota
    if limit is not None:
        n = min(n, math.ceil(limit))
    return max(1, min(n, cap))


# --- work that may wait: a lower CPU priority for its threads --------------------------------------
# A replica is one process on about one core: a page's logit lens (~ a forward pass through every
# layer's readout) or patching experiment (hundreds of forward passes) shares that core with every
# other learner's clicks. Run slots bound how many run at once, not who gets the core. On Linux a
# thread's nice value is its own (setpriority on the thread id), so the threads that run such work
# are lowered once when they start (``lower_this_thread``: nice 10 is about a tenth of a nice-0
# thread's share under CFS while both want the core) and a learner's forward pass goes first.
BACKGROUND_NICE = 10


def thread_nice(tid: int | None = None) -> int:
    """The nice value of a thread of this process (this thread by default)."""
    import threading  # noqa: PLC0415

    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id() if tid is None else tid)


def lower_this_thread(nice: int = BACKGROUND_NICE) -> bool:
    """Lower the calling thread's CPU priority to ``nice`` (never raise it: that needs privileges);
    False where the system has no per-thread priority."""
    import threading  # noqa: PLC0415

    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), nice))
        return True
    except (OSError, AttributeError):
        return False
