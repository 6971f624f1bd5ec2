"""The lessons: a path through the Transformer on live runs (issue 16). No streamlit here.

A lesson is its number, a default sentence (or padded batch) chosen to make its point, the parts
it shows (each a model, an attention block, a layer and head, and stages of the registry:
explorer/views/stages.py) and a predict-then-reveal question whose answer is computed from the
live run's tensors:

    lesson = LESSONS[5]                                  # lesson 6 (1-based numbers, 0-based list)
    runs = [PartRun(part, run, m.info) for part ...]     # what the page (or the handout) ran
    q = lesson.ask(runs, "ko")                           # Question: choices or a number, the answer, why

The words are the catalogue's (explorer/i18n.py, "lesson.*" keys, written out here so that the
catalogue test sees them read). An answer is an int: the index of a choice, or the number asked for.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from explorer import i18n
from explorer.views import stages, style, tutorial002
from explorer.views.data import RunData, axis_tokens, kv_head_of, prefix


@dataclass(frozen=True)
class Part:
    """One group of figures: a model, its selection and the stages drawn: ``stages`` before the
    question, ``reveal`` once the answer is shown (the figures that would give it away). ``edits``:
    the what-if run the what-if stages compare with (model.edits' string). What the stages read
    beside the run (a decoding trace, the lens, induction scores, patches) follows from their records
    (``Stage.uses``; ``uses(part)``). ``options``: per stage, its options (e.g. tutorial 002's preset)."""

    model: str
    stages: tuple[str, ...]
    reveal: tuple[str, ...] = ()
    block: str = "encoder.self_attn"
    layer: int = 0
    head: int = 0
    sentence: int = 0
    edits: str = ""
    options: dict = field(default_factory=dict)
    note: str | None = None  # a catalogue key said above the part's figures
    query: int = 0  # the one cell's query and key (the stages that draw one: Stage.per_cell)
    key: int = 0
    long: tuple[str, ...] = ()  # a long part (issue 34): its long figures before the question (LONG_FIGURES)
    long_reveal: tuple[str, ...] = ()  # ... and once the answer is shown

    @property
    def is_long(self) -> bool:
        """The part reads its text as one long sequence (model/analysis/long.py), not as sentences."""
        return bool(self.long or self.long_reveal)


@dataclass
class PartRun:
    """A part's live run: the run (with its trace when the part decodes), the model's description and
    the what-if run (None without edits)."""

    part: Part
    run: RunData
    info: object
    edited: RunData | None = None
    other: RunData | None = None  # a patching part: the run of sentence 1 alone
    patching: object | None = None  # a patching part: model.analysis.patching.PatchResult (None: no pair to patch)
    effects: object | None = None  # an ablation part: model.analysis.ablation.HeadEffects of its sentence and block
    long: object | None = None  # a long part: model.analysis.long.LongRun of its text (``run`` is None then)
    summaries: object | None = None  # ... and model.analysis.long.Summaries of it


@dataclass
class Question:
    kind: str  # "choice" | "number"
    prompt: str  # in the page's language
    choices: list[str]  # labels (user text made plain); empty for "number"
    answer: int  # the index of the right choice, or the number
    why: str  # the reveal's explanation, with the run's numbers

    def answer_text(self) -> str:
        return self.choices[self.answer] if self.kind == "choice" else str(self.answer)

    def guess_text(self, guess: int | None) -> str:
        if guess is None:
            return "—"
        if self.kind == "choice":
            return self.choices[guess] if 0 <= guess < len(self.choices) else "—"
        return str(guess)

    def correct(self, guess: int | None) -> bool:
        return guess is not None and int(guess) == int(self.answer)


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str  # catalogue keys
    text: str
    texts: tuple[str, ...]  # the default sentences (one a line on the page)
    parts: tuple[Part, ...]
    ask_fn: Callable[[PartRun, str], Question]
    asks: int = 0  # which part the question reads

    def ask(self, runs: Sequence[PartRun], lang: str = "en") -> Question:
        """The question on ``runs`` (one PartRun per part, in order; the asked part's is what counts)."""
        return self.ask_fn(runs[self.asks], lang)

    def models(self) -> list[str]:
        return list(dict.fromkeys(p.model for p in self.parts))

    @property
    def is_long(self) -> bool:
        """Its text is one long sequence (the page reads the box whole, not as sentences)."""
        return any(p.is_long for p in self.parts)


def _tok(tokens: Sequence[str], i: int) -> str:
    return f"{i}: {style.plain_text(style.visible(tokens[i]))}"


def _pattern(pr: PartRun, run: RunData | None = None) -> np.ndarray:
    """(heads, query, key) of the part's block and layer, for its sentence."""
    p = prefix(pr.part.block, pr.part.layer)
    return np.asarray((run or pr.run)[f"{p}.hook_pattern"][_sentence(pr)], dtype=np.float64)  # fewer typed: clipped


def _sentence(pr: PartRun) -> int:
    return min(pr.part.sentence, pr.run.n_sentences - 1)


# --- the questions ------------------------------------------------------------------------------

def ask_padding(pr: PartRun, lang: str) -> Question:
    """Lesson 1: how many pad positions the shortest sentence of the batch gets."""
    width = int(pr.run["encoder.blocks.0.self_attn.hook_scores"].shape[-1]
                if "encoder.blocks.0.self_attn.hook_scores" in pr.run
                else pr.run["decoder.blocks.0.self_attn.hook_scores"].shape[-1])
    lengths = [len(t) for t in pr.run.tokens]
    s = int(np.argmin(lengths))
    text = style.plain_text(pr.run.texts[s] if pr.run.texts else "".join(pr.run.tokens[s]), 40)
    return Question("number", i18n.t("lesson.1.ask", lang, s=s, text=text), [], width - lengths[s],
                    i18n.t("lesson.1.why", lang, t=width, s=s, n=lengths[s], p=width - lengths[s]))


def ask_position(pr: PartRun, lang: str) -> Question:
    """Lesson 2: which position's encoding is most like position 0's (cosine similarity)."""
    pe = np.asarray(pr.run["encoder.hook_pos_embed"][0], dtype=np.float64)
    n = len(pr.run.tokens[_sentence(pr)])
    pe = pe[:n]
    unit = pe / np.linalg.norm(pe, axis=-1, keepdims=True)
    sims = unit[1:] @ unit[0]  # positions 1..n-1
    best = int(np.argmax(sims)) + 1
    offered = sorted({k for k in (1, 2, 4, n // 2, n - 1) if 1 <= k < n} | {best})
    base = getattr(pr.info, "positional_base", None) or 10000.0
    return Question("choice", i18n.t("lesson.2.ask", lang, n=n - 1), [str(k) for k in offered], offered.index(best),
                    i18n.t("lesson.2.why", lang, k=best, cos=f"{sims[best - 1]:.3f}",
                           last=n - 1, cos_last=f"{sims[-1]:.3f}", base=f"{float(base):g}"))


def ask_head_size(pr: PartRun, lang: str) -> Question:
    """Lesson 3: d_k, the width of one head's query."""
    q = pr.run[f"{prefix(pr.part.block, pr.part.layer)}.hook_q"]
    d_model = int(pr.run["encoder.hook_embed"].shape[-1])
    heads, d_k = int(q.shape[1]), int(q.shape[-1])
    return Question("number", i18n.t("lesson.3.ask", lang, d=d_model, h=heads), [], d_k,
                    i18n.t("lesson.3.why", lang, d=d_model, h=heads, k=d_k,
                           shape=" × ".join(str(x) for x in q.shape)))


def ask_scaling(pr: PartRun, lang: str) -> Question:
    """Lesson 4: without ÷√d_k, is row q's largest weight larger, smaller or the same?"""
    _, _, n_q, n_k = axis_tokens(pr.run, pr.part.block, _sentence(pr), pr.part.layer)
    q = min(3, n_q - 1)
    a = _pattern(pr)[pr.part.head, q, :n_k]
    b = _pattern(pr, pr.edited)[pr.part.head, q, :n_k]
    diff = float(b.max() - a.max())
    answer = 2 if abs(diff) < 1e-6 else (0 if diff > 0 else 1)
    choices = [i18n.t("lesson.4.larger", lang), i18n.t("lesson.4.smaller", lang), i18n.t("lesson.4.same", lang)]
    d_k = int(pr.run[f"{prefix(pr.part.block, pr.part.layer)}.hook_q"].shape[-1])
    # every layer runs without ÷√d_k in the what-if, so from layer 1 on the scores' input changes too:
    # the spread of the row's scores (largest − smallest) grows about, not exactly, √d_k times
    scores = f"{prefix(pr.part.block, pr.part.layer)}.hook_scores"
    s = _sentence(pr)
    sa = np.asarray(pr.run[scores][s, pr.part.head, q, :n_k], dtype=np.float64)
    sb = np.asarray(pr.edited[scores][s, pr.part.head, q, :n_k], dtype=np.float64)
    spread = float(np.ptp(sb) / np.ptp(sa)) if np.ptp(sa) > 0 else float("nan")
    return Question("choice", i18n.t("lesson.4.ask", lang, q=q, l=pr.part.layer, h=pr.part.head), choices, answer,
                    i18n.t("lesson.4.why", lang, a=f"{a.max():.3f}", b=f"{b.max():.3f}", s=f"{np.sqrt(d_k):.2f}",
                           r=f"{spread:.2f}", q=q))


def ask_masked(pr: PartRun, lang: str) -> Question:
    """Lesson 5: how many weights of row q are exactly 0 (masked: e^-inf)."""
    s = _sentence(pr)
    q_toks, _, n_q, n_k = axis_tokens(pr.run, pr.part.block, s, pr.part.layer)
    row = _pattern(pr)[pr.part.head, min(3, len(q_toks) - 1)]
    q = min(3, len(q_toks) - 1)
    zeros = int(np.sum(row == 0.0))
    width = len(row)
    causal = width - (q + 1)
    pads = width - n_k
    return Question("number", i18n.t("lesson.5.ask", lang, s=s, q=q, t=width), [], zeros,
                    i18n.t("lesson.5.why", lang, z=zeros, t=width, c=causal, p=pads, q=q))


def ask_softmax(pr: PartRun, lang: str) -> Question:
    """Lesson 6: which key row q weighs most."""
    s = _sentence(pr)
    q_toks, k_toks, n_q, n_k = axis_tokens(pr.run, pr.part.block, s, pr.part.layer)
    q = min(3, n_q - 1)
    row = _pattern(pr)[pr.part.head, q, :n_k]
    best = int(np.argmax(row))
    return Question("choice", i18n.t("lesson.6.ask", lang, q=_tok(q_toks, q), h=pr.part.head, l=pr.part.layer),
                    [_tok(k_toks, j) for j in range(n_k)], best,
                    i18n.t("lesson.6.why", lang, q=q, j=best, w=f"{row[best]:.3f}", sum=f"{row.sum():.3f}"))


def mean_entropy(pattern: np.ndarray, n_q: int) -> np.ndarray:
    """(heads,): each head's mean row entropy (nats) over the first ``n_q`` (real) rows."""
    p = np.asarray(pattern, dtype=np.float64)[:, :n_q]
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(-1).mean(-1)


def ask_heads(pr: PartRun, lang: str) -> Question:
    """Lesson 7: which head of the layer spreads its attention most (highest mean entropy)."""
    _, _, n_q, _ = axis_tokens(pr.run, pr.part.block, _sentence(pr), pr.part.layer)
    ent = mean_entropy(_pattern(pr), n_q)
    best = int(np.argmax(ent))
    return Question("choice", i18n.t("lesson.7.ask", lang, l=pr.part.layer),
                    [f"H{h}" for h in range(len(ent))], best,
                    i18n.t("lesson.7.why", lang, h=best, e=f"{ent[best]:.2f}",
                           all=", ".join(f"H{h} {e:.2f}" for h, e in enumerate(ent)), n=n_q))


FFN_BINS = (0.25, 0.5, 0.75)


def ask_ffn(pr: PartRun, lang: str) -> Question:
    """Lesson 8: what share of token 0's feed-forward hidden values ReLU sets to exactly 0."""
    stack = pr.part.block.split(".")[0]
    hidden = np.asarray(pr.run[f"{stack}.blocks.{pr.part.layer}.hook_ffn_hidden"][_sentence(pr), 0])
    zeros = int(np.sum(hidden == 0.0))
    share = zeros / hidden.size
    answer = int(np.searchsorted(FFN_BINS, share, side="right"))
    choices = [i18n.t("lesson.8.bin0", lang), i18n.t("lesson.8.bin1", lang), i18n.t("lesson.8.bin2", lang),
               i18n.t("lesson.8.bin3", lang)]
    return Question("choice", i18n.t("lesson.8.ask", lang, d=hidden.size, l=pr.part.layer), choices, answer,
                    i18n.t("lesson.8.why", lang, z=zeros, d=hidden.size, pct=f"{100 * share:.0f}"))


def ask_cross(pr: PartRun, lang: str) -> Question:
    """Lesson 9: which input token the decoder's first row reads most in cross-attention."""
    s = _sentence(pr)
    _, k_toks, _, n_k = axis_tokens(pr.run, pr.part.block, s, pr.part.layer)
    row = _pattern(pr)[pr.part.head, 0, :n_k]
    best = int(np.argmax(row))
    written = (pr.run.generated or [""])[s]
    return Question("choice", i18n.t("lesson.9.ask", lang, l=pr.part.layer, h=pr.part.head),
                    [_tok(k_toks, j) for j in range(n_k)], best,
                    i18n.t("lesson.9.why", lang, j=best, w=f"{row[best]:.3f}",
                           first=style.plain_text(written[:1] or "∅"), out=style.plain_text(written, 40)))


def decoding_step(trace) -> int:
    """The step lesson 10 asks about: the third (or the last there is)."""
    return min(2, trace.n_steps - 1)


def ask_next(pr: PartRun, lang: str) -> Question:
    """Lesson 10: what the decoder writes next at step k (choices: that step's top candidates)."""
    tr = pr.run.trace
    k = decoding_step(tr)
    q = int(tr.query[k])
    first = 1 if tr.kind == "encoder-decoder" else 0
    so_far = "".join(tr.tokens[first: q + 1])
    cands = list(dict.fromkeys(tr.top_tokens[k]))
    order = sorted(cands)
    chosen = tr.chosen_tokens[k]
    if chosen not in order:
        order.append(chosen)
    return Question("choice", i18n.t("lesson.10.ask", lang, k=k, text=style.plain_text(so_far or "∅", 60)),
                    [style.plain_text(style.visible(c)) for c in order], order.index(chosen),
                    i18n.t("lesson.10.why", lang, tok=style.plain_text(style.visible(chosen)),
                           p=f"{float(tr.chosen_probs[k]):.3f}", n=q + 1, c=q, q=q,
                           out=style.plain_text(tr.generated, 60)))


GQA_QUERY_HEAD = 5


def ask_gqa(pr: PartRun, lang: str) -> Question:
    """Lesson 11: under grouped-query attention, which K/V head a query head reads."""
    info = pr.info
    n, n_kv = int(info.n_heads), int(info.n_kv_heads or info.n_heads)
    h = min(GQA_QUERY_HEAD, n - 1)
    g = kv_head_of(h, n, n_kv)
    sharing = [x for x in range(n) if kv_head_of(x, n, n_kv) == g]
    return Question("choice", i18n.t("lesson.11.ask", lang, n=n, kv=n_kv, h=h),
                    [f"K/V {x}" for x in range(n_kv)], g,
                    i18n.t("lesson.11.why", lang, n=n, kv=n_kv, h=h, g=g, heads=", ".join(map(str, sharing)),
                           group=n // max(1, n_kv)))


# --- "where is the answer made?" (issue 26: activation patching) --------------------------------------

PATCHED_SENTENCES = 2  # the part's sentence 0 is the clean run, sentence 1 the corrupted one


def _bands(n_layers: int) -> list[tuple[int, int]]:
    """The layers in three bands (early, middle, late), each (first, last)."""
    cuts = [round(n_layers * k / 3) for k in range(4)]
    return [(cuts[k], cuts[k + 1] - 1) for k in range(3)]


def ask_answer_made(pr: PartRun, lang: str) -> Question:
    """Lesson 12: from which layer on does patching the last position bring the answer back more than
    patching the changed word's position (the first position where the two sentences differ)?"""
    res = pr.patching
    s = _sentence(pr)
    if res is None:  # one sentence, or two of different token counts: what it predicts instead
        toks = pr.run.tokens[s]
        top_ids, top_probs = pr.run.next_top(s, len(toks) - 1)  # a run read out at the last token has it
        ids = [int(i) for i in top_ids[:4]]
        texts = {i: style.plain_text(style.visible(pr.run.top_text[i])) for i in ids}
        order = sorted(ids, key=lambda i: texts[i])
        text = style.plain_text("".join(toks), 60)
        return Question("choice", i18n.t("lesson.12.ask_one", lang, text=text), [texts[i] for i in order],
                        order.index(ids[0]), i18n.t("lesson.12.why_one", lang, tok=texts[ids[0]],
                                                    p=f"{float(top_probs[0]):.3f}"))
    grid = np.asarray(res.logp, dtype=np.float64)  # (layers, positions)
    n_layers, last = grid.shape[0], grid.shape[1] - 1
    changed = next((i for i, (a, b) in enumerate(zip(res.clean_tokens, res.corrupted_tokens)) if a != b), last)
    later = [li for li in range(n_layers) if grid[li, last] > grid[li, changed]] if changed != last else [0]
    layer = later[0] if later else None
    bands = _bands(n_layers)
    answer = len(bands) if layer is None else next(k for k, (a, b) in enumerate(bands) if a <= layer <= b)
    choices = [i18n.t("lesson.12.band", lang, a=a, b=b) for a, b in bands] + [i18n.t("lesson.12.never", lang)]
    word, end = (style.plain_text(style.visible(res.clean_tokens[i])) for i in (changed, last))
    before = max(0, (layer if layer is not None else n_layers) - 1)
    return Question("choice", i18n.t("lesson.12.ask", lang, word=word, i=changed, end=end, j=last,
                                     answer=style.plain_text(style.visible(res.answer)), w0=f"{grid[0, changed]:.2f}",
                                     corrupted=f"{res.corrupted_logp:.2f}"), choices, answer,
                    i18n.t("lesson.12.why", lang, layer="—" if layer is None else layer, word=word, end=end,
                           before=before, w=f"{grid[before, changed]:.2f}", e=f"{grid[before, last]:.2f}",
                           clean=f"{res.clean_logp:.2f}", corrupted=f"{res.corrupted_logp:.2f}",
                           n=res.forwards))


# --- the lessons --------------------------------------------------------------------------------

SEED = "seed"
BATCH = ("hello world", "hi there")

LESSONS: tuple[Lesson, ...] = (
    Lesson(1, "lesson.1.title", "lesson.1.text", ("hello world", "hi"),
           (Part(SEED, (), reveal=("tokens",)),), ask_padding),
    Lesson(2, "lesson.2.title", "lesson.2.text", ("I wonder what will come next",),
           (Part(SEED, ("embedding", "pe_heatmap", "pe_compare", "pe_tutorial"), reveal=("pe_similarity",),
                 options={"pe_compare": {k: v for k, v in tutorial002.PRESET.items() if k != "pe_base"},
                          "pe_tutorial": {}}),), ask_position),
    Lesson(3, "lesson.3.title", "lesson.3.text", ("hello world",),
           (Part(SEED, (), reveal=("weights", "qkv"), head=1),), ask_head_size),
    Lesson(4, "lesson.4.title", "lesson.4.text", ("hello world",),
           (Part(SEED, ("qk", "scaled"), reveal=("whatif_pattern",), layer=1, head=0, edits="no_scale"),),
           ask_scaling),
    Lesson(5, "lesson.5.title", "lesson.5.text", BATCH,
           (Part(SEED, ("tokens",), reveal=("mask", "masked", "softmax", "whatif_pattern"), block="decoder.self_attn",
                 sentence=1, edits="no_causal"),), ask_masked),
    Lesson(6, "lesson.6.title", "lesson.6.text", ("hello world",),
           (Part(SEED, ("scaled",), reveal=("softmax", "z"), layer=1, head=2),), ask_softmax),
    Lesson(7, "lesson.7.title", "lesson.7.text", ("hello world",),
           (Part(SEED, ("softmax",), reveal=("overview",), layer=0, head=0),), ask_heads),
    Lesson(8, "lesson.8.title", "lesson.8.text", ("hello world",),
           (Part(SEED, ("shapes", "residual_norm"), reveal=("ffn",)),), ask_ffn),
    Lesson(9, "lesson.9.title", "lesson.9.text", ("hello world",),
           (Part(SEED, ("tokens",), reveal=("softmax", "logits"), block="decoder.cross_attn", layer=1, head=0),
            Part("seed-sort", (), reveal=("softmax",), block="decoder.cross_attn", layer=1, head=0,
                 note="lesson.9.sort")),
           ask_cross),
    Lesson(10, "lesson.10.title", "lesson.10.text", ("hello world",),
           (Part(SEED, ("tokens",)),  # the encoder's side: the decoder's tokens are what it writes
            Part(SEED, (), reveal=("decoding", "softmax"), block="decoder.self_attn")),
           ask_next, asks=1),
    Lesson(11, "lesson.11.title", "lesson.11.text", ("The cat sat on the mat because it was tired.",),
           (Part("minilm", ("pe_learned_sim",), reveal=("softmax",), note="lesson.11.minilm"),
            Part("smollm2", ("rope_distance",), reveal=("gqa", "softmax"), block="decoder.self_attn", layer=0,
                 head=GQA_QUERY_HEAD, note="lesson.11.smollm2"),
            Part("gemma3", ("whatif_pattern", "qk_norm"), block="decoder.self_attn", layer=0, edits="window=4",
                 note="lesson.11.gemma3")),  # today's design: a sliding window (shrunk to show), QK-norm
           ask_gqa, asks=1),
    Lesson(12, "lesson.12.title", "lesson.12.text", ("The capital of France is", "The capital of Italy is"),
           (Part("smollm2", ("next_token",), reveal=("patching",), block="decoder.self_attn"),),
           ask_answer_made),
)


# --- beyond one head (issue 26): what each layer predicts, heads with jobs, attention sinks -----------
# Numbered after the lessons above (their words: "lesson.lens.*", "lesson.roles.*", "lesson.sinks.*").
# What they read besides the hooks (the lens of the part's sentence, the model's induction scores) is
# attached to the part's run by run_part below and by the page (explorer/lessons/page.py).

def uses(part: Part) -> set[str]:
    """What the part's stages read beside the run, as their records declare it (Stage.uses): "trace",
    "lens", "induction", "patches" (the patching stage: sentence 0, clean, against sentence 1)."""
    return {u for sid in part.stages + part.reveal for u in stages.REGISTRY[sid].uses}


def needs_lens(part: Part) -> bool:
    return "lens" in uses(part)


def needs_induction(part: Part) -> bool:
    return "induction" in uses(part)


def attach_analyses(part: Part, run: RunData, lens, induction) -> RunData:
    """The part's run with what its analyses read: ``lens(sentence)`` and ``induction()`` make them
    (explorer/state.py's caches on the page, explorer/views/data.py's functions elsewhere)."""
    if needs_lens(part) and run.kind in ("decoder", "encoder-decoder"):
        run = run.with_lens(lens(min(part.sentence, run.n_sentences - 1)))
    if needs_induction(part):
        run = run.with_induction(induction())
    return run


def _thirds(n: int) -> list[tuple[int, int]]:
    cuts = [round(n * k / 3) for k in range(4)]
    return [(cuts[k], cuts[k + 1] - 1) for k in range(3)]


def _word(text: str) -> str:
    return style.plain_text(style.visible(text), 30)


def ask_lens(pr: PartRun, lang: str) -> Question:
    """What each layer predicts: from which band of layers on is the lens's top token at the last
    position the model's final choice (every layer up to the top)?"""
    lens = pr.run.lens
    col, probs = lens.ids[:, -1], lens.probs[:, -1]
    n_layers = len(col)
    k = n_layers - 1
    while k > 0 and col[k - 1] == col[-1]:
        k -= 1
    bands = _thirds(n_layers)
    answer = next(b for b, (a, z) in enumerate(bands) if a <= k <= z)
    final = _word(lens.token_text[int(col[-1])])
    mid = n_layers // 2
    toks = pr.run.tokens[_sentence(pr)] if pr.run.kind == "decoder" else pr.run.decoder_tokens[_sentence(pr)]
    text = style.plain_text("".join(toks)[-60:], 60)
    below = _word(lens.token_text[int(col[k - 1])]) if k > 0 else "—"
    return Question("choice", i18n.t("lesson.lens.ask", lang, text=text, tok=final, n=n_layers),
                    [i18n.t("lesson.lens.band", lang, a=a, b=z) for a, z in bands], answer,
                    i18n.t("lesson.lens.why", lang, tok=final, k=k, n=n_layers, p=f"{float(probs[k]):.2f}",
                           top=f"{float(probs[-1]):.2f}", below=below, before=max(0, k - 1), mid=mid,
                           mid_tok=_word(lens.token_text[int(col[mid])]), mid_p=f"{float(probs[mid]):.2f}"))


def _stack_patterns(pr: PartRun) -> tuple[np.ndarray, int]:
    stack, attn = pr.part.block.split(".")
    n_layers = stages.layers_for(pr.info, pr.part.block)
    s = _sentence(pr)
    pats = np.stack([np.asarray(pr.run[f"{stack}.blocks.{i}.{attn}.hook_pattern"][s]) for i in range(n_layers)])
    return pats, min(len(stages.stack_tokens(pr.run, stack, s)), pats.shape[-1])


def ask_roles(pr: PartRun, lang: str) -> Question:
    """Heads with jobs: which of four heads (the strongest of each role on this run) is the induction head?"""
    from explorer.views import analysis as an
    from explorer.views.data import INDUCTION_TOKENS

    pats, n = _stack_patterns(pr)
    scores = an.head_role_scores(pats, n)
    scores["induction"] = np.asarray(pr.run.induction[pr.part.block], dtype=np.float64)
    picked: dict[str, tuple[int, int, float]] = {}
    for role in ("induction", "previous_token", "first_token", "self"):
        best = [x for x in an.strongest(scores[role], 12) if (x[0], x[1]) not in {(a, b) for a, b, _ in picked.values()}]
        if best:
            picked[role] = best[0]
    heads = sorted((li, h) for li, h, _ in picked.values())
    ind = picked["induction"]

    def said(role: str) -> str:
        li, h, s = picked.get(role, (0, 0, float("nan")))
        return f"L{li} H{h} ({s:.2f})"

    return Question("choice", i18n.t("lesson.roles.ask", lang, tokens=2 * INDUCTION_TOKENS),
                    [f"L{li} H{h}" for li, h in heads], heads.index((ind[0], ind[1])),
                    i18n.t("lesson.roles.why", lang, ind=said("induction"), prev=said("previous_token"),
                           first=said("first_token"), self=said("self"), tokens=2 * INDUCTION_TOKENS, n=n))


SINK_BINS = (0.25, 0.75, 1.5)


def ask_sinks(pr: PartRun, lang: str) -> Question:
    """Attention sinks: the head puts most of its weight on the first token; how long is that token's
    value vector after W_O, compared with the other tokens' (their mean)?"""
    from explorer.views.data import head_weights

    p = prefix(pr.part.block, pr.part.layer)
    s, h = _sentence(pr), pr.part.head
    _, _, n, _ = axis_tokens(pr.run, pr.part.block, s, pr.part.layer)
    A = np.asarray(pr.run[f"{p}.hook_pattern"][s, h, :n, :n], dtype=np.float64)
    v = np.asarray(pr.run[f"{p}.hook_v"][s, h, :n], dtype=np.float64)
    hw = head_weights(pr.run.weights, p, h, int(pr.info.n_heads), int(pr.info.d_head))
    lengths = np.linalg.norm(v @ hw["W_O"].astype(np.float64), axis=-1)  # ‖v_j W_O[h]‖
    ratio = float(lengths[0] / lengths[1:].mean()) if n > 1 and lengths[1:].mean() > 0 else 1.0
    w0 = float(A[1:, 0].mean()) if n > 1 else 1.0
    moved = A * lengths[None, :]  # ‖α_ij v_j W_O[h]‖
    share = float(moved[1:, 0].sum() / moved[1:].sum()) if n > 1 and moved[1:].sum() > 0 else 1.0
    answer = int(np.searchsorted(SINK_BINS, ratio, side="right"))
    choices = [i18n.t(k, lang) for k in ("lesson.sinks.bin0", "lesson.sinks.bin1", "lesson.sinks.bin2",
                                         "lesson.sinks.bin3")]
    return Question("choice", i18n.t("lesson.sinks.ask", lang, l=pr.part.layer, h=h, w=f"{100 * w0:.0f}"),
                    choices, answer,
                    i18n.t("lesson.sinks.why", lang, r=f"{ratio:.2f}", w=f"{100 * w0:.0f}", l=pr.part.layer, h=h,
                           share=f"{100 * share:.0f}", first=f"{lengths[0]:.2f}",
                           others=f"{lengths[1:].mean() if n > 1 else lengths[0]:.2f}"))


LESSONS = LESSONS + (
    Lesson(len(LESSONS) + 1, "lesson.lens.title", "lesson.lens.text", ("The Eiffel Tower is in the city of",),
           (Part("smollm2", ("next_token",), reveal=("logit_lens",), block="decoder.self_attn"),), ask_lens),
    Lesson(len(LESSONS) + 2, "lesson.roles.title", "lesson.roles.text",
           ("Harry Potter went to the shop and Harry Potter bought a new wand for the school.",),
           (Part("smollm2", ("overview",), reveal=("head_roles", "softmax"), block="decoder.self_attn", layer=18,
                 head=6),), ask_roles),
    Lesson(len(LESSONS) + 3, "lesson.sinks.title", "lesson.sinks.text", ("The Eiffel Tower is in the city of Paris.",),
           (Part("smollm2", ("softmax",), reveal=("value_norms",), block="decoder.self_attn", layer=18, head=8),),
           ask_sinks),
)


# --- why this head attends here (issue 35): the score split, the rotary bands, looking against causing --
# Numbered after the lessons above (their words: "lesson.qk_terms.*", "lesson.rope_bands.*",
# "lesson.effect.*"). Each answer is computed from the live run, as every lesson's.

def _row_pull(parts: np.ndarray, allowed: np.ndarray, offset: int) -> np.ndarray:
    """(parts,) how much each part raises the score of the key ``offset`` places from the query above
    the row's mean over allowed keys, averaged over the queries that have that key allowed."""
    P, n, nk = parts.shape
    rows = [i for i in range(n) if 0 <= i + offset < nk and allowed[i, i + offset]]
    if not rows:
        return np.zeros(P)
    out = []
    for i in rows:
        m = allowed[i]
        out.append(parts[:, i, i + offset] - parts[:, i, m].mean(-1))
    return np.mean(out, axis=0)


def ask_qk_terms(pr: PartRun, lang: str) -> Question:
    """Which part of the first layer's scores makes the head look at its neighbour (the one it weights
    more: the token before or after): the part that raises the neighbour's score most above its row."""
    sel = selection(pr.part, pr.run)
    d = stages.score_parts(pr.run, pr.info, sel)
    s = _sentence(pr)
    n = d["score"].shape[0]
    A = _pattern(pr)[pr.part.head, :n, :n]
    before = float(np.mean([A[i, i - 1] for i in range(1, n)])) if n > 1 else 0.0
    after = float(np.mean([A[i, i + 1] for i in range(n - 1)])) if n > 1 else 0.0
    offset = -1 if before >= after else 1
    keys = list(d["terms"])
    parts = np.stack([d["terms"][k] for k in keys])
    pulls = _row_pull(parts, np.ones((n, n), dtype=bool), offset)
    names = [i18n.t(stages.TERM_KEYS[k], lang) for k in keys]
    side = i18n.t("lesson.qk_terms.before" if offset < 0 else "lesson.qk_terms.after", lang)
    text = style.plain_text("".join(pr.run.tokens[s]), 40)
    return Question("choice", i18n.t("lesson.qk_terms.ask", lang, h=pr.part.head, side=side,
                                     w=f"{100 * max(before, after):.0f}", text=text),
                    names, int(np.argmax(pulls)),
                    i18n.t("lesson.qk_terms.why", lang, side=side, best=names[int(np.argmax(pulls))],
                           all="; ".join(f"{nm} {v:+.2f}" for nm, v in zip(names, pulls))))


def ask_rope_bands(pr: PartRun, lang: str) -> Question:
    """Which third of the rotary bands (fast, middle, slow) pulls the previous-token head's weight onto the
    token before: the summed pull of the bands toward key i − 1."""
    sel = selection(pr.part, pr.run)
    d = stages.band_parts(pr.run, pr.info, sel)
    n_rot = len(d["theta"])
    pulls = _row_pull(d["bands"][:n_rot], d["allowed"], -1)  # rotated bands only
    thirds = _thirds(n_rot)
    sums = [float(pulls[a: b + 1].sum()) for a, b in thirds]
    A = _pattern(pr)[pr.part.head]
    n = d["bands"].shape[1]
    prev = float(np.mean([A[i, i - 1] for i in range(1, n)])) if n > 1 else 0.0
    kinds = ("lesson.rope_bands.fast", "lesson.rope_bands.middle", "lesson.rope_bands.slow")
    choices = [i18n.t(k, lang, a=a, b=b) for k, (a, b) in zip(kinds, thirds)]
    best = int(np.argmax(pulls))
    return Question("choice", i18n.t("lesson.rope_bands.ask", lang, l=pr.part.layer, h=pr.part.head,
                                     w=f"{100 * prev:.0f}", n=n_rot), choices, int(np.argmax(sums)),
                    i18n.t("lesson.rope_bands.why", lang, sums=", ".join(f"{c}: {v:+.2f}" for c, v in zip(choices, sums)),
                           band=best, lam=f"{2 * np.pi / float(d['theta'][best]):.1f}", v=f"{float(pulls[best]):+.2f}"))


def ask_effect(pr: PartRun, lang: str) -> Question:
    """Of two heads, the one that looks hardest at the key for the least effect and the one with the most
    effect for the least looking: which changes the model's own next token more when ablated?"""
    sel = selection(pr.part, pr.run)
    d = stages.effect_parts(pr.run, pr.info, sel, pr.effects)
    att, eff = d["attention"], d["effect"]
    look, matter = d["look"], d["matter"]
    if matter == look:  # one head both: the other is the one with the largest effect besides it
        order = np.dstack(np.unravel_index(np.argsort(-np.abs(eff), axis=None), eff.shape))[0]
        matter = next((int(a), int(b)) for a, b in order if (int(a), int(b)) != look)
    heads = sorted([look, matter])
    labels = [f"L{a} H{b}" for a, b in heads]
    answer = int(np.argmax([abs(eff[h]) for h in heads]))
    res, i, j = d["res"], d["i"], d["j"]
    q_tok, k_tok = (style.plain_text(style.visible(x), 20) for x in (res.tokens[i], _keys_of(pr)[j]))
    said = "; ".join(f"L{a} H{b}: {100 * att[a, b]:.0f}%, Δ log p {eff[a, b]:+.3f}" for a, b in heads)
    return Question("choice", i18n.t("lesson.effect.ask", lang, i=i, q=q_tok, j=j, k=k_tok,
                                     a=labels[0], wa=f"{100 * att[heads[0]]:.0f}", b=labels[1],
                                     wb=f"{100 * att[heads[1]]:.0f}",
                                     answer=style.plain_text(style.visible(res.answers[i]), 20)),
                    labels, answer, i18n.t("lesson.effect.why", lang, said=said, best=labels[answer]))


def _keys_of(pr: PartRun) -> list[str]:
    _, k, _, _ = axis_tokens(pr.run, pr.part.block, _sentence(pr), pr.part.layer)
    return k


WHY_SEED_HEAD = 1  # the seed encoder's layer 0 head the lesson asks about
WHY_SMOLLM2 = (16, 0)  # a previous-token head of SmolLM2 (layer, head)
WHY_SEED_CELL = (1, 9)  # the seed decoder's cross-attention cell (query, key) the lesson looks at

LESSONS = LESSONS + (
    Lesson(len(LESSONS) + 1, "lesson.qk_terms.title", "lesson.qk_terms.text", ("hello world",),
           (Part(SEED, ("softmax",), reveal=("qk_terms",), layer=0, head=WHY_SEED_HEAD, query=2, key=1),),
           ask_qk_terms),
    Lesson(len(LESSONS) + 2, "lesson.rope_bands.title", "lesson.rope_bands.text",
           ("The quick brown fox jumps over the lazy dog and runs far away.",),
           (Part("smollm2", ("softmax",), reveal=("rope_bands",), block="decoder.self_attn", layer=WHY_SMOLLM2[0],
                 head=WHY_SMOLLM2[1], query=5, key=4),), ask_rope_bands),
    Lesson(len(LESSONS) + 3, "lesson.effect.title", "lesson.effect.text", ("hello world",),
           (Part(SEED, ("softmax",), reveal=("attention_vs_effect",), block="decoder.cross_attn", layer=1, head=0,
                 query=WHY_SEED_CELL[0], key=WHY_SEED_CELL[1]),), ask_effect),
)


# --- what the window changes (issue 34): Gemma 3 on a long English and Korean text -------------------------
# A long part reads its text whole, one sequence (model/analysis/long.py keeps q and k per layer, never a
# T×T pattern); its figures are the long view's (explorer/views/long.py), made by long_figures for the
# page and the handout alike. Words: "lesson.window.*".

LONG_TEXT_FILE = Path(__file__).resolve().parents[1] / "examples" / "long" / "ko_en.txt"  # package data
LONG_QUERY = 1500  # the query the question asks about (the text's last when it is shorter)
WINDOW_BINS = (0.01, 0.1, 0.5)  # above exactly 0: under 1 %, 1 to 10 %, 10 to 50 %, 50 % or more
LONG_FIGURES = ("local", "global", "summaries")  # the part's layer and head; the asked layer, same head; all


def long_example() -> str:
    """The shipped long text (explorer/examples/long/ko_en.txt): original prose on attention, English and
    Korean paragraphs in turn (2,000 or so Gemma 3 tokens)."""
    return LONG_TEXT_FILE.read_text(encoding="utf-8").strip("\n")


def asked_layer(lr) -> int:
    """The layer the window lesson asks about: the first without a sliding window (the last layer when
    every layer has one)."""
    return next((i for i, r in enumerate(lr.rules) if not r.window), lr.n_layers - 1)


def local_layer(lr) -> int | None:
    """The first layer with a sliding window (None: no layer has one)."""
    return next((i for i, r in enumerate(lr.rules) if r.window), None)


def _pct(x: float) -> str:
    return f"{100 * x:.3g}"  # 3 significant digits: a weight of 1e-5 is not written as 0


def ask_window(pr: PartRun, lang: str) -> Question:
    """The window lesson: at query LONG_QUERY (about 1,500 tokens in), what share of its attention does
    a global layer (the mean of its heads) put on the first token: exactly 0, or which band above?"""
    lr, s = pr.long, pr.summaries
    T = lr.T
    q = min(LONG_QUERY, T - 1)
    g = asked_layer(lr)
    per_head = s.first[g, :, q].astype(np.float64)
    w = float(per_head.mean())
    answer = 0 if w == 0.0 else 1 + int(np.searchsorted(WINDOW_BINS, w, side="right"))
    choices = [i18n.t(k, lang) for k in ("lesson.window.bin0", "lesson.window.bin1", "lesson.window.bin2",
                                         "lesson.window.bin3", "lesson.window.bin4")]
    first = style.plain_text(style.visible(lr.tokens[0]), 20)
    rule = lr.rules[g]
    kind = i18n.t("lesson.window.kind_local" if rule.window else "lesson.window.kind_global", lang, w=rule.window)
    why = [i18n.t("lesson.window.why", lang, l=g, q=q, w=_pct(w), first=first,
                  heads=", ".join(f"H{h} {_pct(x)}%" for h, x in enumerate(per_head)))]
    if not rule.window:
        why.append(i18n.t("lesson.window.why_global", lang))
    loc = local_layer(lr)
    if loc is not None and loc != g:
        W = lr.rules[loc].window
        lw = float(s.first[loc, :, q].astype(np.float64).mean())
        why.append(i18n.t("lesson.window.why_far" if q >= W else "lesson.window.why_near", lang, l=loc, q=q, W=W,
                          w=_pct(lw)))
        if T > W:
            local = [i for i, r in enumerate(lr.rules) if r.window]
            glob = [i for i, r in enumerate(lr.rules) if not r.window]
            if glob:
                d = s.distance[:, :, W:].astype(np.float64)
                why.append(i18n.t("lesson.window.why_distance", lang, start=W, ld=f"{d[local].mean():.1f}",
                                  gd=f"{d[glob].mean():.1f}", top=W - 1, lmax=f"{d[local].max():.1f}"))
    return Question("choice", i18n.t("lesson.window.ask", lang, model=pr.info.name, l=g, kind=kind, q=q, T=T,
                                     first=first, h=lr.n_heads), choices, answer, " ".join(why))


def long_figures(pr: PartRun, ids: Sequence[str], lang: str = "en", grid=None) -> list[tuple[str, object, str]]:
    """(id, figure, the words under it) of a long part's figures ``ids`` (LONG_FIGURES), the long view's
    own: "local" the part's layer and head over the whole text, "global" the asked layer's same head,
    "summaries" every layer against query position. ``grid(layer, head)`` gives (grid, block) (the page's
    cache; ``model.analysis.long.block_grid`` otherwise)."""
    from explorer.views import long as lv
    from model.analysis import long as ml

    lr, s = pr.long, pr.summaries
    if grid is None:
        grid = lambda layer, head: ml.block_grid(lr, layer, head, lv.GRID_CELLS)  # noqa: E731
    labels = i18n.fig_labels(lang)
    head, g = min(pr.part.head, lr.n_heads - 1), asked_layer(lr)
    out = []
    for fid in ids:
        if fid == "summaries":
            fig = lv.summary_figure(s.first, s.distance, s.inside, s.window_layers, layer=g, head=head,
                                    window=s.window, own_window=s.own_window, labels=labels,
                                    title=i18n.t("long.summary_title", lang, T=lr.T))
            said = lv.compare_note(s.first, s.distance, s.window_layers, s.window, lang)
            note = " ".join(x for x in (lv.summary_note(s.window, s.own_window, lr.n_heads, g, head, lang), said) if x)
        else:
            layer = min(pr.part.layer, lr.n_layers - 1) if fid == "local" else g
            rule = lr.rules[layer]
            z, block = grid(layer, head)
            kind = lv.layer_kind(lr.window, rule.window, rule.causal, lang)
            fig = lv.overview_figure(z, block, lr.tokens, window=rule.window, causal=rule.causal, labels=labels,
                                     title=i18n.t("long.overview_title", lang, layer=layer, head=head, T=lr.T,
                                                  kind=kind))
            finite = z[np.isfinite(z)]
            note = lv.overview_note(block, float(finite.max()) if finite.size else 0.0, rule.window, rule.causal,
                                    lr.T, lang, zoom=False)  # the lesson draws no zoom
        out.append((fid, fig, note))
    return out


LESSONS = LESSONS + (
    Lesson(len(LESSONS) + 1, "lesson.window.title", "lesson.window.text", (long_example(),),
           (Part("gemma3", (), block="decoder.self_attn", layer=0, head=0, long=("local",),
                 long_reveal=("global", "summaries")),), ask_window),
)


def lesson(number: int) -> Lesson:
    """Lesson ``number`` (1-based); IndexError outside 1..len(LESSONS)."""
    if not 1 <= int(number) <= len(LESSONS):
        raise IndexError(f"there are lessons 1..{len(LESSONS)}, not {number}")
    return LESSONS[int(number) - 1]


def parse_lesson(value) -> int | None:
    """The URL's ``lesson`` as a valid number, or None (missing, malformed, out of range)."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return n if 1 <= n <= len(LESSONS) else None


def parse_answers(value) -> dict[int, int]:
    """The URL's ``answers`` ("1:9,4:0": lesson:answer) as {lesson: answer}; malformed items are
    dropped (never an exception)."""
    out: dict[int, int] = {}
    for item in str(value or "").split(","):
        k, _, v = item.partition(":")
        n = parse_lesson(k)
        try:
            a = int(v.strip())
        except ValueError:
            continue
        if n is not None and abs(a) < 10**9:
            out[n] = a
    return out


def format_answers(answers: dict[int, int]) -> str:
    return ",".join(f"{k}:{int(v)}" for k, v in sorted(answers.items()))


# --- running a lesson outside the app (the handout, the exporter, the tests) ------------------------

def selection(part: Part, run: RunData, model_name: str | None = None):
    """The stages' Selection for a part (its sentence clipped to the batch)."""
    return stages.Selection(model=model_name or part.model, sentence=min(part.sentence, run.n_sentences - 1),
                            layer=part.layer, head=part.head, block=part.block, query=part.query, key=part.key)


def run_part(part: Part, m, texts: Sequence[str]) -> PartRun:
    """A part's live run on ``texts`` with model ``m`` (uncached: the app uses explorer/state.py)."""
    from explorer.views.data import induction_scores, lens_data, run_data
    from explorer.views.trace import trace_data

    texts = list(texts)
    if part.is_long:  # the text whole, one sequence (a laptop's bound: 4,096 tokens)
        from model.analysis import long as ml

        lr = ml.long_run(m, texts[0])
        return PartRun(part, None, m.info, long=lr, summaries=ml.summaries(lr))
    run = run_data(m, texts, next_tokens="last")  # as the page runs it (explorer/lessons/page.py)
    if "trace" in uses(part):
        run = run.with_trace(trace_data(m, texts[min(part.sentence, len(texts) - 1)]))
    run = attach_analyses(part, run, lambda s: lens_data(m, run, s), lambda: induction_scores(m))
    edited = run_data(m, texts, with_weights=False, edits=part.edits, next_tokens="last") if part.edits else None
    pr = PartRun(part, run, m.info, edited)
    if "effects" in uses(part):
        from model.analysis import ablation

        pr.effects = ablation.head_effects(m, texts[min(part.sentence, len(texts) - 1)], part.block)
    if "patches" in uses(part) and len(texts) >= PATCHED_SENTENCES:
        from model.analysis import patching

        pr.other = run_data(m, texts[1:2], with_weights=False)
        try:
            pr.patching = patching.patch_positions(m, texts[0], texts[1])
        except patching.PatchingError:
            pass  # not as many tokens: the figure and the question say so
    return pr


def stage_options(part: Part, pr: PartRun, stage_id: str) -> dict:
    """The options a part's stage is drawn with: its own, the what-if run, the decoding step."""
    opts = dict(part.options.get(stage_id, {}))
    record = stages.REGISTRY[stage_id]  # what it compares with (needs) and reads beside the run (uses)
    if record.needs == "edited" and pr.edited is not None:
        opts["edited"] = pr.edited
    if "trace" in record.uses and pr.run.trace is not None:
        opts["step"] = decoding_step(pr.run.trace)
    if "lens" in record.uses and pr.run.lens is not None:  # keyed apart from a figure made without it
        opts["attached"] = ("lens", pr.run.lens.text)
    if "induction" in record.uses and pr.run.induction is not None:
        opts["attached"] = ("induction", pr.part.model)
    if "patches" in record.uses and pr.other is not None:
        opts.update(other=pr.other, patches=pr.patching)
    if "effects" in record.uses and pr.effects is not None:
        opts["effects"] = pr.effects
    return opts
