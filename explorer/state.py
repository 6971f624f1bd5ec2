"""The only place with Streamlit caches.

    load_model(name)        -> (model, fallback_notice | None)   st.cache_resource: once per process
    model_weights(name)     -> {"...W_Q": array, ...}            st.cache_resource: zero-copy views
    run(name, texts)        -> RunData (numpy, read-only)         a process-wide memo (_Memo) by
                                                                  model + text + edits, shared by
                                                                  every session (bounded: entries,
                                                                  bytes, time); never copied
    stage_figure(...)       -> (figure, table)                   a process-wide memo (_Memo:
                                                                  entries, JSON bytes, time); the
                                                                  figure's dict and JSON made once
                                                                  (explorer/fastpath.py)

Changing layer, head, block, sentence or view never calls ``run`` with new arguments, so the model
does not run again, and a rerun gets the same run object back (no copy of its hooks: st.cache_data
unpickled every hook of the run on every rerun of every session). Learners who type the same sentence
share its run, made once (others asking for it meanwhile wait for it). A weight file's modification
time is part of every key, so when a missing seed checkpoint appears (or is retrained), the next page
load uses it.

Hosting: at most ``MAX_CONCURRENT_RUNS`` forward passes run at once in the process (others wait
their turn, so a burst of visitors queues instead of exhausting memory; the number follows the CPUs the
container may use: model/runtime/limits.py ``run_slots``), the logit lens and patching at most all but one of
them, each page within its quota (explorer/quota.py); with
``ATTENTION_EXPLORER_HOSTED=1`` only the named models load (never a local path) and error messages
do not show the server's folders.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple, replace
from pathlib import Path

import pandas as pd
import pyarrow as pa
import streamlit as st

import model
from explorer import failures, fastpath, inputs, memory, quota
from explorer.views import stages
from explorer.views.data import (LensData, RunData, induction_scores, lens_data, next_top_every, run_data,
                                weights_of)
from explorer.views.trace import TraceData, trace_data
from model.files import seed_checkpoints
from model.registry import SEED_WEIGHTS
from model.runtime import limits

RUN_CACHE_ENTRIES = 32
RUN_CACHE_TTL = 3600  # seconds
LARGE_RUN_BYTES = 32 * 2**20  # runs bigger than this are cached apart, and fewer of them
LARGE_RUN_CACHE_ENTRIES = 4
LARGE_RUN_CACHE_TTL = 900
# the runs' memory in all, per cache (RunData.nbytes: what the run keeps), least recently used out first:
# what the entries allowed at most before (32 runs under LARGE_RUN_BYTES; 4 of SmolLM2's largest, ~200 MB)
RUN_CACHE_BYTES = RUN_CACHE_ENTRIES * LARGE_RUN_BYTES
LARGE_RUN_CACHE_BYTES = 1024 * 2**20
HOSTED = os.environ.get("ATTENTION_EXPLORER_HOSTED", "").strip().lower() in ("1", "true", "yes", "on")
# download buttons behind a switch under each figure: on by default on a hosted server (a class shares
# its CPU), off on a laptop; ATTENTION_EXPLORER_LEAN_DOWNLOADS=0/1 decides either way
_lean = os.environ.get("ATTENTION_EXPLORER_LEAN_DOWNLOADS", "").strip().lower()
LEAN_DOWNLOADS = _lean in ("1", "true", "yes", "on") if _lean else HOSTED
# one forward pass per CPU the process may use (torch runs each on one thread here): its affinity, bounded
# by the container's CPU quota (cgroup v2 cpu.max or v1 cfs quota/period, rounded up), at most 4;
# ATTENTION_EXPLORER_MAX_RUNS overrides (model/runtime/limits.py: run_slots)
MAX_CONCURRENT_RUNS = limits.run_slots()
_RUN_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_RUNS)
# the logit lens and patching (seconds each) have slots of their own, at most all the run slots but one, and
# take no run slot: an experiment that holds a core's thread for many seconds (longer at its lowered
# priority, below) never halves how many learners' runs go at once (bench/noisy.py: with a run slot held
# by a lowered patching run, a burst of new sentences queued on the one slot left)
ANALYSIS_SLOTS = max(1, MAX_CONCURRENT_RUNS - 1)
_ANALYSIS_SLOTS = threading.BoundedSemaphore(ANALYSIS_SLOTS)
# ...and they run on threads of lower CPU priority (nice 10, model/runtime/limits.py: lower_this_thread), so that
# while one page's lens or experiment computes, the other learners' clicks on the same core go first
_BACKGROUND = ThreadPoolExecutor(ANALYSIS_SLOTS, thread_name_prefix="analysis",
                                 initializer=limits.lower_this_thread)


def in_background(fn, *args, **kw):
    """``fn(*args, **kw)`` on one of the lowered analysis threads; the caller waits for its result (and
    gets its exception). The page's script context goes along, so a progress bar ``fn`` updates is drawn,
    and a click that stops the script stops ``fn`` at its next update, as on the script's own thread."""
    from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx  # noqa: PLC0415

    ctx = get_script_run_ctx(suppress_warning=True)

    def call():
        if ctx is not None:
            add_script_run_ctx(threading.current_thread(), ctx)
        return fn(*args, **kw)

    return _BACKGROUND.submit(call).result()
for _kind in quota.DEFAULTS:  # a malformed ATTENTION_EXPLORER_*_PER_MINUTE fails at start, not on a page
    quota.limit(_kind)


def prepare_process() -> None:
    """Once per server process (idempotent): glibc keeps freed memory for the next run
    (explorer/memory.py), shared figures are sent from memory (explorer/fastpath.py) and a refused or
    failed download says why under its button (explorer/failures.py)."""
    memory.tune()
    fastpath.install()
    failures.install()


def _hide_paths(text: str) -> str:
    """Hosted mode: a message without the server's folders (file names stay)."""
    for folder in sorted({str(Path(__file__).resolve().parent.parent), str(Path.home())}, key=len, reverse=True):
        text = text.replace(folder, "…")
    return text


STAMP_RECHECK_S = 1.0
_STAMPS: dict[str, tuple[float, Path, float | None]] = {}  # name -> (checked at, path, stamp)


# --- a head that learns (issue 35): the seed's training, replayed ----------------------------------
# A checkpoint is a model of its own to every cache here: its key is "NAME@STEP" (e.g. "seed@400"), the
# last step's key the name itself when that step is the shipped file (model/files/seed_checkpoints.py).


def checkpoint_steps(name: str) -> list[int]:
    """The training steps of ``name`` ([] for a model without checkpoints, or whose file is unreadable)."""
    if name not in seed_checkpoints.CHECKPOINTS:
        return []
    try:
        return model.checkpoint_steps(name)
    except model.WeightsError:
        return []


def training_record(name: str) -> dict:
    """The run's record (every step's loss, each checkpoint's recorded loss and heads), read once per file."""
    return seed_checkpoints.training_record(name)


def checkpoint_key(name: str, step: int | None) -> str:
    """The key of ``name``'s weights after ``step`` training steps, for every cache and the captions:
    ``name`` itself for None or for a last step that is the shipped file, else "NAME@STEP"."""
    if step is None:
        return name
    steps = checkpoint_steps(name)
    if steps and step == steps[-1] and "shipped" in training_record(name)["stored"][str(step)]:
        return name
    return f"{name}@{int(step)}"


def split_key(key: str) -> tuple[str, int | None]:
    """"seed@400" -> ("seed", 400); any other key (a name, a path) -> (key, None)."""
    base, at, step = key.rpartition("@")
    if at and base in seed_checkpoints.CHECKPOINTS and step.isdigit():
        return base, int(step)
    return key, None


def weights_stamp(name: str) -> float | None:
    """The seed checkpoint's modification time (None if missing, or not a seed model), read from
    the file at most once a second (a page asks for it for every figure). For a training checkpoint
    ("seed@400"), the checkpoints file's."""
    base, step = split_key(name)
    path = SEED_WEIGHTS.get(name) if step is None else seed_checkpoints.CHECKPOINTS[base]
    if path is None:
        return None
    now = time.monotonic()
    seen = _STAMPS.get(name)
    if seen is not None and seen[1] == path and now - seen[0] < STAMP_RECHECK_S:
        return seen[2]
    try:
        stamp = Path(path).stat().st_mtime
    except OSError:
        stamp = None
    _STAMPS[name] = (now, path, stamp)
    return stamp


@st.cache_resource(max_entries=6, show_spinner=False)
def _load(name: str, stamp: float | None):
    """(model, notice): a seed model whose weights are missing falls back to the untrained one."""
    base, step = split_key(name)
    if step is not None:  # a training checkpoint: no fallback (the page offers only the steps there are)
        return model.load(base, step=step), None
    try:
        return model.load(name), None
    except model.WeightsError as e:
        if name in SEED_WEIGHTS:
            return model.load(name, random=True), str(e)
        raise


def load_model(name: str):
    if HOSTED:
        if split_key(name)[0] not in model.available():
            raise model.WeightsError(f"this hosted server loads only {', '.join(model.available())}")
        try:
            m, notice = _load(name, weights_stamp(name))
        except model.WeightsError as e:
            raise model.WeightsError(_hide_paths(str(e))) from None
        return m, notice and _hide_paths(notice)
    return _load(name, weights_stamp(name))


@st.cache_resource(max_entries=6, show_spinner=False)
def _weights(name: str, stamp: float | None) -> dict:
    m, _ = _load(name, stamp)
    return weights_of(m)


def model_weights(name: str) -> dict:
    return _weights(name, weights_stamp(name))


def _forward(name: str, stamp: float | None, texts: tuple[str, ...], edits: str = "",
             next_tokens: str = "every") -> RunData:
    m, _ = _load(name, stamp)
    kw = {} if next_tokens == "every" else {"next_tokens": next_tokens}
    with _RUN_SLOTS:  # a cache hit never waits here
        if not edits:  # the intact run: the call as it always was
            return run_data(m, list(texts), with_weights=False, **kw)
        return run_data(m, list(texts), with_weights=False, edits=edits, **kw)


def _frozen(run):
    """The run with every array read-only: one object is shared by every session, so a view that
    wrote into one would change what everyone sees; it raises instead."""
    if isinstance(run, RunData):
        for a in [*run.tensors.values(), run.top_ids, run.top_probs, run.last_top_ids, run.last_top_probs,
                  run.final_logprobs, run.embedding]:
            if a is not None:
                a.flags.writeable = False
    return run


def _run_bytes(run) -> int:
    return run.nbytes if isinstance(run, RunData) else 0


def _run(name: str, stamp: float | None, texts: tuple[str, ...], edits: str = "", next_tokens: str = "every",
         *, memo: "_Memo | None" = None) -> RunData:
    """The run of ``texts`` (cached process-wide by every argument: one object for every session)."""
    return (memo or _RUNS).get((name, stamp, tuple(texts), edits, next_tokens),
                               lambda: _frozen(_forward(name, stamp, tuple(texts), edits, next_tokens)), _run_bytes)


def _clear_runs() -> None:
    _RUNS.clear()
    _LARGE_RUNS.clear()
    _NEXT.clear()


_run.clear = _clear_runs  # (the tests start from an empty cache, as with st.cache_data's .clear())


def run_bytes(info, n_tokens: list[int]) -> int:
    """Roughly how many bytes a run keeps: every attention block's per-head tensors."""
    blocks = info.n_layers + (2 * info.n_decoder_layers if info.kind == "encoder-decoder" else 0)
    b, t = len(n_tokens), max(n_tokens or [1]) + (8 if info.kind == "encoder-decoder" else 0)
    per_block = b * (info.n_heads * t * (3 * t + 4 * info.d_head) + t * info.d_model) * 4
    # and every layer's stream, sums or normed inputs, feed-forward hidden and output
    layers = info.n_layers + (info.n_decoder_layers if info.kind == "encoder-decoder" else 0)
    per_layer = b * t * (6 * info.d_model + getattr(info, "d_ff", 0)) * 4
    return blocks * per_block + layers * per_layer


@functools.lru_cache(maxsize=1024)
def _limited(name: str, tokenizer, texts: tuple[str, ...]):
    cut, notices = inputs.limit_tokens(list(texts), tokenizer, inputs.MAX_TOKENS)
    return tuple(cut), tuple(notices), tuple(len(e.ids) for e in tokenizer.encode(cut))


def limit_tokens(name: str, m, texts: list[str]):
    """(the sentences cut to the token limit, the notices saying so, their token counts), remembered
    per model and text: a click does not tokenize the text again."""
    cut, notices, counts = _limited(name, m.tokenizer, tuple(texts))
    return list(cut), list(notices), list(counts)


def run(name: str, texts: list[str], n_tokens: list[int] | None = None, info=None, edits="",
        next_tokens: str = "every") -> RunData:
    """The model's run on ``texts`` (cached by model, text and edits), with the weights attached.

    ``next_tokens="last"`` (the explorer's page): a decoder-only model's next tokens after each
    sentence's last token only (``run_data``), not at every position; ``next_tokens`` attaches the rest
    when a page asks for another position. Other models ignore it (one cache entry for both).

    ``edits`` (the what-if view): a string or ``model.edits.Edits``; its canonical form
    (``str(model.edits.parse(edits))``) is part of the cache key, so an edited run and the intact
    run ("") of the same text are two entries, each computed once. A malformed edit raises
    ``model.edits.EditError`` before anything runs; one that does not fit the model, when it runs.

    Runs estimated above LARGE_RUN_BYTES (e.g. SmolLM2's 30 layers on a full batch: ~200 MB) go
    to a smaller cache, so a busy server keeps at most a few of them in memory."""
    stamp = weights_stamp(name)
    canonical = str(model.edits.as_edits(edits or None))
    large = info is not None and n_tokens is not None and run_bytes(info, n_tokens) > LARGE_RUN_BYTES
    if next_tokens != "every" and (info if info is not None else _load(name, stamp)[0].info).kind != "decoder":
        next_tokens = "every"
    data = _run(name, stamp, tuple(texts), canonical, next_tokens, memo=_LARGE_RUNS if large else _RUNS)
    return data.with_weights(_weights(name, stamp))


def next_tokens(name: str, texts: list[str], run: RunData) -> dict:
    """Every position's top next tokens of a page's run (``next_tokens="last"``), for ``run.with_top``:
    the model's readout over the vocabulary at every position, made once per run (cached)."""
    stamp = weights_stamp(name)

    def make():
        m, _ = _load(name, stamp)
        with _RUN_SLOTS:
            return next_top_every(m, run)

    return _NEXT.get((name, stamp, tuple(texts), run.edits), make,
                     lambda top: top["top_ids"].nbytes + top["top_probs"].nbytes)


class _Memo:
    """A thread-safe memo, bounded in entries and in bytes (least recently used out first) and
    in age: what st.cache_resource did for the figures, without hashing every argument on every
    call (a page asks for about twenty figures on every rerun of every session). One thread makes
    a missing value while others asking for the same key wait for it. Entries past their age are
    never answered, and dropped at most every SWEEP_S seconds (a walk over every entry)."""

    SWEEP_S = 5.0

    def __init__(self, max_entries: int, ttl: float, max_bytes: int | None = None) -> None:
        self.max_entries, self.ttl, self.max_bytes = max_entries, ttl, max_bytes
        self.bytes = 0
        self._swept = time.monotonic()  # when entries past their age were last dropped
        self._items: OrderedDict = OrderedDict()  # key -> (made at, value, bytes)
        self._making: dict = {}  # key -> lock held while one thread makes it
        self._lock = threading.Lock()

    def _hit(self, key, now: float):
        item = self._items.get(key)
        if item is not None and now - item[0] < self.ttl:
            self._items.move_to_end(key)
            return item
        return None

    def get(self, key, make, weigh=lambda value: 0):
        with self._lock:
            item = self._hit(key, time.monotonic())
            if item is not None:
                return item[1]
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                item = self._hit(key, time.monotonic())
            if item is not None:
                return item[1]
            try:
                value = make()
                size = int(weigh(value))
                with self._lock:
                    now = time.monotonic()
                    old = self._items.pop(key, None)
                    self.bytes += size - (old[2] if old else 0)
                    self._items[key] = (now, value, size)
                    if now - self._swept >= min(self.ttl, self.SWEEP_S):  # (a hit checks the age itself)
                        self._swept = now
                        for k in [k for k, item in self._items.items() if now - item[0] >= self.ttl]:
                            self.bytes -= self._items.pop(k)[2]
                    while len(self._items) > 1 and (len(self._items) > self.max_entries or (
                            self.max_bytes is not None and self.bytes > self.max_bytes)):
                        self.bytes -= self._items.popitem(last=False)[1][2]
            finally:
                with self._lock:
                    self._making.pop(key, None)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)


# the runs (_run, run) and every position's next tokens (next_tokens)
_RUNS = _Memo(RUN_CACHE_ENTRIES, RUN_CACHE_TTL, RUN_CACHE_BYTES)
_LARGE_RUNS = _Memo(LARGE_RUN_CACHE_ENTRIES, LARGE_RUN_CACHE_TTL, LARGE_RUN_CACHE_BYTES)
_NEXT = _Memo(RUN_CACHE_ENTRIES, RUN_CACHE_TTL)  # next_tokens: (B, T, 10) ids and probabilities per run

FIGURE_CACHE_ENTRIES = 256
# the memory of the figures' JSON in all (fastpath.json_bytes; a figure also keeps its arrays and table:
# about 2-3x this);
# a default page for one short sentence is about 1 MB of JSON, one 512-token heatmap about 2 MB
FIGURE_CACHE_JSON_BYTES = 64 * 2**20
_FIGURES = _Memo(FIGURE_CACHE_ENTRIES, RUN_CACHE_TTL, FIGURE_CACHE_JSON_BYTES)


def _figure(stage_id: str, name: str, stamp: float | None, texts: tuple[str, ...], sel: tuple,
            lang: str, options: tuple, run: RunData, info, runs: dict | None = None):
    """``runs``: options that are runs (RunData), given to the stage but keyed by ``options``."""
    def make():
        selection = stages.Selection(*sel)
        fig, df = stages.stage_figure(stage_id, run, info, selection, lang=lang,
                                      **{**dict(options), **(runs or {})})
        return fastpath.share(fig), df

    return _FIGURES.get((stage_id, name, stamp, texts, sel, lang, options), make,
                        weigh=lambda made: fastpath.json_bytes(made[0]))


def _picked(key: tuple, base, pick: str, lang: str):
    """The clickable copy of a shared figure (explorer/views/picking.py), memoised beside it."""
    from explorer.views import picking

    def make():
        return fastpath.share(picking.pickable(base[0], pick, lang)), base[1]

    return _FIGURES.get(key + (("pick", pick),), make, weigh=lambda made: fastpath.json_bytes(made[0]))


_TABLES: dict[int, tuple] = {}  # id(df) -> (df, its Arrow table), for the cached figures' tables
_TABLES_MAX = 512
_TABLES_LOCK = threading.Lock()


def arrow_table(df):
    """The Arrow table st.dataframe would build from ``df`` on every rerun of every session
    (~8 ms a table), built once per cached table. Other frames go through unchanged."""
    key = id(df)
    with _TABLES_LOCK:
        hit = _TABLES.get(key)
        if hit is not None and hit[0] is df:
            return hit[1]
    try:
        table = pa.Table.from_pandas(df)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return df  # st.dataframe knows how to fix odd column types
    with _TABLES_LOCK:
        if len(_TABLES) >= _TABLES_MAX:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = (df, table)
    return table


@functools.lru_cache(maxsize=256)
def _text_table(columns: tuple[tuple[str, tuple[str, ...]], ...]) -> pa.Table:
    return pa.Table.from_pandas(pd.DataFrame({name: list(values) for name, values in columns}))


def text_table(columns: dict[str, list[str]]) -> pa.Table:
    """A small table of text (a column name -> its cells) as the Arrow table st.dataframe sends,
    built once per content (the generated output is shown on every rerun of every session)."""
    return _text_table(tuple((name, tuple(values)) for name, values in columns.items()))


def stage_figure(stage_id: str, name: str, texts: list[str], run: RunData, info, sel, lang: str,
                 pick: str | None = None, **options):
    """``stages.stage_figure``, memoised per process (figures are shared: never mutate them).

    Going back to a layer or head already seen is instant; stages that do not depend on the layer
    or head are built once per sentence (the stage registry says which: ``per_head``, ``per_cell``).

    An option that is a run (``edited=``, ``other=``: the what-if and comparison stages) enters the
    memo's key as what identifies it in the run cache: its edits and its sentences. ``pick``
    ("cell" or "head", the stage record's ``click``): the figure's clickable copy for the page
    (explorer/views/picking.py), memoised too; export takes the figure without it."""
    record = stages.REGISTRY[stage_id]
    if not record.per_head:
        sel = replace(sel, layer=0, head=0, query=0, key=0)
    elif not record.per_cell:
        sel = replace(sel, query=0, key=0)
    runs = {k: v for k, v in options.items() if isinstance(v, RunData)}
    opts = tuple(sorted([(k, tuple(v) if isinstance(v, list) else v) for k, v in options.items() if k not in runs]
                        + [(k, ("run", v.edits, tuple(v.texts))) for k, v in runs.items()]))
    key = (stage_id, name, weights_stamp(name), tuple(texts), astuple(sel), lang, opts)
    made = _figure(*key, run, info, runs)
    return made if pick is None else _picked(key, made, pick, lang)


# --- decoding: the Decoding view's token-by-token trace (explorer/views/trace.py) -------------------
# One sentence at a time (the one on screen), cached by model and text next to the runs. A
# cache_resource, not cache_data: the trace is only read (never changed), and a rerun that only moves
# the step would otherwise unpickle a copy of it (SmolLM2: ~3 MB for 30 steps) every time.
TRACE_CACHE_ENTRIES = 8


@st.cache_resource(max_entries=TRACE_CACHE_ENTRIES, ttl=RUN_CACHE_TTL, show_spinner=False)
def _trace(name: str, stamp: float | None, text: str, sampling: tuple = ()) -> TraceData:
    m, _ = _load(name, stamp)
    with _RUN_SLOTS:  # a cache hit never waits here
        if not sampling:  # greedy: the call as it always was
            return trace_data(m, text)
        temperature, top_k, top_p, seed = sampling
        return trace_data(m, text, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)


def trace(name: str, text: str, temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
          seed: int = 0) -> TraceData:
    """The model's greedy decoding of ``text``, step by step (cached by model, text and sampling):
    moving through its steps, or changing layer, head or view, never runs the model again.
    ``temperature > 0`` samples (``top_k``, ``top_p``, ``seed``: model.runtime.base.generate_with_cache).
    TypeError for an encoder-only model."""
    sampling = (float(temperature), top_k, top_p, int(seed)) if temperature else ()
    made = _trace(name, weights_stamp(name), text, sampling)
    _mark_made(("trace", name, weights_stamp(name), text, sampling))
    return made


def trace_ready(name: str, text: str, temperature: float = 0.0, top_k: int | None = None,
                top_p: float | None = None, seed: int = 0) -> bool:
    """Whether this decoding was made lately in this process (drawn without a click)."""
    sampling = (float(temperature), top_k, top_p, int(seed)) if temperature else ()
    return _was_made(("trace", name, weights_stamp(name), text, sampling))


# --- beyond one head (issue 26): the logit lens and the induction scores ---------------------------
# Both are made once and attached to the run by the stages' controls (explorer/main.py); a builder
# only reads them. The lens is as costly as a forward pass (every layer through the output matrix),
# so it is made for the sentence on screen when its stage is opened, not with every run.
ANALYSIS_CACHE_ENTRIES = 8


@st.cache_resource(max_entries=ANALYSIS_CACHE_ENTRIES, ttl=RUN_CACHE_TTL, show_spinner=False)
def _lens(name: str, stamp: float | None, texts: tuple[str, ...], sentence: int, _run: RunData) -> LensData:
    m, _ = _load(name, stamp)
    # a cache hit never gets here: it costs no quota and never waits for a slot
    with quota.spend("lens"), _ANALYSIS_SLOTS:
        return in_background(lens_data, m, _run, sentence)


def lens(name: str, texts: list[str], run: RunData, sentence: int) -> LensData:
    """The logit lens of one sentence of the run (cached by model, sentences and sentence). Computing
    one (not a cache hit) is within the page's quota where quotas apply: ``quota.Refused`` says when to
    try again (explorer/quota.py)."""
    key = (name, weights_stamp(name), tuple(texts), int(sentence))
    made = _lens(*key, run)
    _mark_made(("lens", *key))
    return made


def lens_ready(name: str, texts: list[str], sentence: int) -> bool:
    """Whether this sentence's lens was made lately in this process (then drawn without a click; an
    entry the cache dropped since is made again, as any cache miss)."""
    return _was_made(("lens", name, weights_stamp(name), tuple(texts), int(sentence)))


_MADE: OrderedDict = OrderedDict()  # keys of costly results made lately -> when (lens_ready, trace_ready)
_MADE_LOCK = threading.Lock()


def _mark_made(key: tuple) -> None:
    with _MADE_LOCK:
        _MADE[key] = time.monotonic()
        _MADE.move_to_end(key)
        while len(_MADE) > 256:
            _MADE.popitem(last=False)


def _was_made(key: tuple) -> bool:
    with _MADE_LOCK:
        at = _MADE.get(key)
    return at is not None and time.monotonic() - at < RUN_CACHE_TTL

# --- analyses behind a click ----------------------------------------------------------------------
# An analysis whose multiply-adds pass AUTO_WORK waits for a click instead of running as its page
# opens (its button says what it runs): the logit lens (every layer through the output matrix) and
# every head ablated (attention_vs_effect). On Gemma 3 (262,144 entries, 18 layers) a 10-token
# sentence's lens is 3.2e10 multiply-adds and took 3.9 CPU-s here, its 72 ablations 1.9e11 and
# 5.2 CPU-s: a learner opening "Beyond one head" cost a replica 9 CPU-s, and 30 learners on two
# replicas missed every workshop floor (bench/results/workshop-gemma3-30x2-*.json). The seed's lens
# and ablations are below 1e9. A hosted server's budget is smaller: a class shares its cores.
AUTO_WORK = float(os.environ.get("ATTENTION_EXPLORER_AUTO_WORK") or (2e9 if HOSTED else 2e10))


def lens_work(info, n_tokens: int) -> float:
    """Multiply-adds of one sentence's logit lens: every layer's stream (and the embeddings') through
    the output matrix at every position."""
    return float(info.n_layers + 1) * n_tokens * info.vocab_size * info.d_model


def decoding_work(name: str, n_steps: int) -> float:
    """Multiply-adds of writing ``n_steps`` tokens one at a time, bounded above by every parameter
    used once per step (Gemma 3's 40 steps: 1.1e10, 4.6 CPU-s here, its 671 MB output matrix and its
    layers read from memory at every step)."""
    m, _ = load_model(name)
    return float(n_steps) * sum(p.numel() for p in m.parameters())


def effects_work(name: str, n_rows: int, n_tokens: int) -> float:
    """Multiply-adds of ``n_rows`` ablated runs of ``n_tokens`` tokens, bounded above by every
    parameter used once per token and row."""
    m, _ = load_model(name)
    return float(n_rows) * n_tokens * sum(p.numel() for p in m.parameters())


@st.cache_resource(max_entries=ANALYSIS_CACHE_ENTRIES, ttl=RUN_CACHE_TTL, show_spinner=False)
def _induction(name: str, stamp: float | None) -> dict:
    m, _ = _load(name, stamp)
    with _RUN_SLOTS:
        return induction_scores(m)


def induction(name: str) -> dict:
    """Each self-attention block's induction scores (layers, heads), once per model: one forward pass
    on a repeated random sequence (explorer/views/data.py: induction_scores)."""
    return _induction(name, weights_stamp(name))


# --- activation patching (model/analysis/patching.py; the stage "patching") -----------------------
# Many forward passes (layers × positions), so: cached per process by model, sentences and what is
# patched; the caller shows progress and may cancel (a click on the page stops the script at the next
# progress update, and nothing is kept); on a hosted server bounded by PATCH_MAX_FORWARDS (past it:
# model.analysis.patching.PatchingTooLarge, before anything runs). One run slot for the whole experiment.
# A _Memo, not st.cache_data: st.cache_data records every element a cached function draws, the
# progress bar's updates included, to replay them on a hit, and refuses a bar made outside it.
PATCH_MAX_FORWARDS = int(os.environ.get("ATTENTION_EXPLORER_PATCH_MAX_FORWARDS") or 600)
PATCH_CACHE_ENTRIES = 16
_PATCHES = _Memo(PATCH_CACHE_ENTRIES, RUN_CACHE_TTL)


def patch_bound() -> int | None:
    """The most patched forward passes one experiment may run here: PATCH_MAX_FORWARDS when hosted."""
    return PATCH_MAX_FORWARDS if HOSTED else None


def patching(name: str, clean: str, corrupted: str, kind: str, where: str, progress=None, cancel=None):
    """``model.analysis.patching.patch`` of ``clean`` against ``corrupted`` (cached): ``kind`` "positions" (the
    stream of stack ``where``) or "heads" (the hook_z of block ``where``); bounded when hosted. Running
    one (not a cache hit) is within the page's quota where quotas apply (``quota.Refused``)."""
    from model.analysis import patching as mp

    stamp, bound = weights_stamp(name), patch_bound()

    def make():
        m, _ = _load(name, stamp)
        where_kw = {"stack": where} if kind == "positions" else {"block": where}
        with quota.spend("patching"), _ANALYSIS_SLOTS:
            return in_background(mp.patch, m, clean, corrupted, kind, max_forwards=bound, progress=progress,
                                 cancel=cancel, **where_kw)

    return _PATCHES.get((name, stamp, clean, corrupted, kind, where, bound), make)


# --- attention against effect (model/analysis/ablation.py; the stage "attention_vs_effect") ---------
# One ablated row a head of the block (layers × heads, batched): cached per process by model, sentence and
# block, made on an analysis slot at lowered priority as patching is; bounded when hosted by the same
# PATCH_MAX_FORWARDS (explorer/controls/why.py says so before anything runs).
_EFFECTS = _Memo(PATCH_CACHE_ENTRIES, RUN_CACHE_TTL)


def effects_ready(name: str, text: str, block: str) -> bool:
    """Whether the ablations of this sentence and block are cached (drawn without a click or a bar)."""
    with _EFFECTS._lock:
        return _EFFECTS._hit((name, weights_stamp(name), text, block), time.monotonic()) is not None


def effects(name: str, text: str, block: str, progress=None, cancel=None):
    """``model.analysis.ablation.head_effects`` of ``text`` for every head of ``block`` (cached)."""
    from model.analysis import ablation

    stamp = weights_stamp(name)

    def make():
        m, _ = _load(name, stamp)
        with _ANALYSIS_SLOTS:
            return in_background(ablation.head_effects, m, text, block, progress=progress, cancel=cancel)

    return _EFFECTS.get((name, stamp, text, block), make)


# --- long inputs (issue 34; model/analysis/long.py, the view explorer/long_ui.py) --------------------
# A long run keeps q and k of every layer (T×d each, never T×T): cached per process by model, text and
# bound, at most LONG_RUNS of them and LONG_RUN_BYTES in all; the grid of the head on screen and the
# summaries are made from it once each and cached beside it.
LONG_RUNS = 2
LONG_RUN_BYTES = 1536 * 2**20
_LONG = _Memo(LONG_RUNS, RUN_CACHE_TTL, LONG_RUN_BYTES)
_LONG_MADE = _Memo(64, RUN_CACHE_TTL, 256 * 2**20)  # grids (≤ 1 MB each) and summaries (3·L·H·T floats)


def long_run(name: str, text: str, bound: int):
    """``model.analysis.long.long_run`` of ``text`` cut to ``bound`` tokens (cached)."""
    from model.analysis import long as ml

    stamp = weights_stamp(name)

    def make():  # a new text: within this page's quota when hosted (explorer/quota.py), on a run slot
        m, _ = _load(name, stamp)
        with quota.spend("long"), _RUN_SLOTS:
            return ml.long_run(m, text, bound)

    return _LONG.get((name, stamp, text, int(bound)), make, lambda lr: lr.nbytes)


def long_grid(name: str, text: str, bound: int, layer: int, head: int, cells: int):
    """(grid, block) of one head of the long run (``model.analysis.long.block_grid``, cached)."""
    from model.analysis import long as ml

    lr = long_run(name, text, bound)
    return _LONG_MADE.get(("grid", name, weights_stamp(name), text, int(bound), layer, head, cells),
                          lambda: ml.block_grid(lr, layer, head, cells), lambda g: g[0].nbytes)


def long_summaries(name: str, text: str, bound: int):
    """Every head's long-context summaries of the long run (``model.analysis.long.summaries``, cached)."""
    from model.analysis import long as ml

    lr = long_run(name, text, bound)

    def make():
        with _ANALYSIS_SLOTS:
            return in_background(ml.summaries, lr)

    return _LONG_MADE.get(("summaries", name, weights_stamp(name), text, int(bound)), make,
                          lambda s: s.first.nbytes * 3)
