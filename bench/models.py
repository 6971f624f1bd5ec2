"""Model-side figures: hook overhead, the cost of a layer/head change and of a new sentence,
and the payload of the figures, per model and sentence length.

Every pair of things compared is measured side by side: the two measurements alternate (A B,
B A, A B, ...) in one process, and the figure is the ratio of their medians, so a shared,
noisy machine slows both alike.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


LONG_TEXT = (
    "Attention lets every token look at every other token of the sentence. "
    "나는 학교에 간다. 오늘 날씨가 참 좋네요. The cat sat on the mat because it was tired. "
    "Each head computes queries, keys and values, scales the scores and takes a softmax. "
    "트랜스포머는 문장을 한꺼번에 읽는다. Where is the nearest train station? "
)
SQUARE_STAGES = ("qk", "scaled", "mask", "masked", "softmax")  # query × key heatmaps


def interleaved(fns: dict[str, Callable[[], object]], n: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds of each call, ``n`` rounds, the order alternating every round."""
    names = list(fns)
    for _ in range(warmup):
        for f in fns.values():
            f()
    times: dict[str, list[float]] = {k: [] for k in names}
    for i in range(n):
        for k in (names if i % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
    return times


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def n_tokens(m, text: str) -> int:
    return len(m.tokenizer.encode([text])[0].ids)


def text_of(m, n: int) -> str:
    """A sentence that the model's tokenizer makes into at most (as close as possible to) ``n``
    tokens, specials included: the longest prefix of a long natural text that fits."""
    long = LONG_TEXT * (1 + 8 * n // len(LONG_TEXT))
    lo, hi = 1, len(long)
    while lo < hi:  # longest prefix with at most n tokens
        mid = (lo + hi + 1) // 2
        if n_tokens(m, long[:mid]) <= n:
            lo = mid
        else:
            hi = mid - 1
    return long[:lo]


def load_models(names: list[str]) -> tuple[dict, list[str]]:
    """{name: (model, note)}: the seed falls back to its untrained twin (same architecture) when
    its trained weights are missing; fetched models that are not there are skipped."""
    import model

    out, notes = {}, []
    for name in names:
        try:
            out[name] = (model.load(name), "")
        except model.WeightsError as e:
            if name.startswith("seed"):
                out[name] = (model.load(name, random=True), "untrained (trained weights missing)")
                notes.append(f"{name}: trained weights missing, measured the untrained model of the "
                             f"same architecture ({str(e).split('.')[0]})")
            else:
                notes.append(f"{name}: skipped ({str(e)[:120]})")
    return out, notes


# --- hook overhead -----------------------------------------------------------------------------

def hook_overhead(m, texts: list[str], n: int = 7) -> dict:
    """``run_with_cache`` over ``run`` (the same forward, no hooks) on the same batch."""
    t = interleaved({"run": lambda: m.run(texts), "run_with_cache": lambda: m.run_with_cache(texts)}, n)
    pairs = sorted(c / r for r, c in zip(t["run"], t["run_with_cache"]))
    return {"tokens": [n_tokens(m, s) for s in texts], "n": n, "run_s": med(t["run"]),
            "run_with_cache_s": med(t["run_with_cache"]),
            "ratio": med(t["run_with_cache"]) / med(t["run"]), "pair_ratio_median": med(pairs)}


def hook_overhead_forward(m, texts: list[str], n: int = 7) -> dict | None:
    """Seed only: the same, for the one forward pass that the hooks watch (the greedy decoding
    that comes before it runs without hooks in both ``run`` and ``run_with_cache``)."""
    import torch

    from model.runtime.base import pad_batch
    from model.runtime.hooks import capture, hooks

    if not hasattr(m, "greedy"):
        return None
    cfg = m.cfg
    src = pad_batch([e.ids for e in m.tokenizer.encode(texts)], cfg.pad_id)
    with torch.inference_mode():
        gen = m.greedy(src, min(src.shape[1] + 8, cfg.max_len - 1))
    tgt = pad_batch([[cfg.bos_id] + g[: cfg.max_len - 1] for g in gen], cfg.pad_id)

    def plain():
        with torch.inference_mode():
            m(src, tgt)

    def hooked():
        store: dict = {}
        with torch.inference_mode(), hooks(capture(m.hook_names, store)):
            m(src, tgt)

    t = interleaved({"forward": plain, "forward_hooked": hooked}, n * 3)
    return {"forward_s": med(t["forward"]), "forward_hooked_s": med(t["forward_hooked"]),
            "ratio": med(t["forward_hooked"]) / med(t["forward"])}


# --- layer/head change, new sentence, payload ----------------------------------------------------

def all_figures(run, info, sel) -> dict[str, int]:
    """Every stage's figure for ``sel``, serialised as the app sends it (the figure's plain dict,
    as explorer/state.py gives it to st.plotly_chart, then plotly.io.to_json with the app's JSON
    engine); {stage: JSON bytes}."""
    import streamlit  # noqa: F401  importing it sets plotly's default template to "streamlit", as in the app
    from explorer import fastpath
    from explorer.views import stages

    sizes = {}
    for sid in stages.STAGE_IDS:
        fig, _df = stages.stage_figure(sid, run, info, sel)
        sizes[sid] = len(fastpath.to_json(fastpath.plain_dict(fig)))
    return sizes


def stage_costs(m, name: str, n_tok: int, reps: int) -> dict:
    """A layer/head change (every stage's figure from the cached run, no model run) against a
    new sentence (model run + every figure), side by side; and the figures' payload."""
    from explorer.views import stages

    text = text_of(m, n_tok)
    run = stages.run_data(m, [text])
    info = m.info
    block = stages.blocks_for(info)[0]
    n_layers = stages.layers_for(info, block)
    k = [0]

    def selection():
        k[0] += 1  # a different layer/head every time
        return stages.Selection(model=name, sentence=0, layer=k[0] % n_layers,
                                head=(k[0] // n_layers) % info.n_heads, block=block)

    def change():
        all_figures(run, info, selection())

    def new_sentence():
        all_figures(stages.run_data(m, [text]), info, selection())

    sizes = all_figures(run, info, stages.Selection(model=name, sentence=0, layer=0, head=0, block=block))
    t = interleaved({"layer_change": change, "new_sentence": new_sentence}, reps, warmup=0)
    square = {s: sizes[s] for s in SQUARE_STAGES if s in sizes}
    big = max(sizes, key=sizes.get)
    return {"tokens": n_tokens(m, text), "n": reps, "layer_change_s": med(t["layer_change"]),
            "new_sentence_s": med(t["new_sentence"]),
            "new_over_change": med(t["new_sentence"]) / med(t["layer_change"]),
            "payload_total_bytes": sum(sizes.values()), "heatmap_max_bytes": max(square.values()),
            "heatmap_max_stage": max(square, key=square.get), "largest_stage": big,
            "largest_bytes": sizes[big], "payload_bytes": sizes}


# --- decoding with and without the key/value cache -------------------------------------------------

STORY = "Once upon a time, in a small village by the sea, there lived"  # SmolLM2 writes 64 tokens on


def seed_decoding(m, n_chars: int, reps: int) -> dict:
    """The seed model's greedy decoding of one ``n_chars``-character input, as ``run_with_cache``
    does it (up to the input length + 8 tokens), with the key/value cache and without (every step
    recomputes every earlier position), alternating; both must write the same tokens."""
    text = (LONG_TEXT * (1 + n_chars // len(LONG_TEXT)))[:n_chars]
    _, src, _real, truncated = m.source([text])
    max_new = min(src.shape[1] + 8, m.cfg.max_len - 1)
    written = {}

    def decode(use_cache: bool):
        written[use_cache] = m.greedy(src, max_new, use_cache=use_cache)

    t = interleaved({"cached": lambda: decode(True), "uncached": lambda: decode(False)}, reps)
    return {"chars": n_chars, "tokens": src.shape[1], "truncated": truncated[0],
            "written": len(written[True][0]), "n": reps, "cached_s": med(t["cached"]),
            "uncached_s": med(t["uncached"]), "speedup": med(t["uncached"]) / med(t["cached"]),
            "same_output": written[True] == written[False]}


def llama_decoding(m, n_new: int, reps: int, text: str = STORY) -> dict:
    """A Llama decoder writing ``n_new`` tokens after ``text`` through ``generate_with_cache``
    without hooks (``names=[]``), with the key/value cache and without, alternating."""
    traces = {}

    def decode(use_cache: bool):
        traces[use_cache] = m.generate_with_cache([text], n_new, names=[], use_cache=use_cache)

    t = interleaved({"cached": lambda: decode(True), "uncached": lambda: decode(False)}, reps)
    return {"prompt_tokens": len(traces[True].input_token_ids[0]), "written": len(traces[True]),
            "n": reps, "cached_s": med(t["cached"]), "uncached_s": med(t["uncached"]),
            "speedup": med(t["uncached"]) / med(t["cached"]),
            "same_output": traces[True].token_ids == traces[False].token_ids}
