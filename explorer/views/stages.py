"""The pipeline's stages as (figure, table) pairs: the one contract shared by the app and export.

    from explorer.views import stages
    run = stages.run_data(m, ["hello world", "안녕하세요"])      # or a model.Cache from run_with_cache
    sel = stages.Selection(model="seed", sentence=0, layer=0, head=1, block="encoder.self_attn")
    for stage_id, titles in stages.STAGES:
        fig, df = stages.stage_figure(stage_id, run, m.info, sel, lang="ko")
    stages.caption("seed", "hello world", sel, "softmax")

``cache`` may be a ``RunData`` (what the app caches; ``run_data`` includes the weights) or a
``model.Cache``. The stages "weights" and "out" need the projection weights: they come from
``weights=`` (a mapping from ``weights_of(m)`` or the model itself) or from ``run.weights``;
without them those two stages return a figure that says so, and no table.

Out-of-range selections are clipped (never an exception); unknown stage ids raise ValueError.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer import i18n

from . import attention as av
from . import positional as pv
from . import pretrained as pt
from . import style
from . import tokens as tv
from .data import (BLOCKS, RunData, as_run, axis_tokens, blocks_for, from_cache, head_weights,
                   layers_for, prefix, run_data, stack_of, stack_tokens, weights_of)
from .matrix import matrix_df

__all__ = ["Selection", "BLOCKS", "blocks_for", "layers_for", "STAGES", "stage_figure", "caption",
           "clip_selection", "run_data", "from_cache", "weights_of", "RunData", "SECTIONS", "applies",
           "kv_head_note"]


@dataclass(frozen=True)
class Selection:
    model: str
    sentence: int
    layer: int
    head: int
    block: str  # one of BLOCKS (those available: blocks_for(info))
    query: int = 0  # for the one-cell view
    key: int = 0


STAGE_IDS = ("tokens", "embedding", "pe_heatmap", "pe_learned_sim", "rope_freqs", "rope_distance",
             "pe_curves", "pe_similarity", "pe_compare", "gqa", "weights", "qkv", "qk", "scaled", "mask",
             "masked", "softmax", "z", "out", "next_token", "cell", "overview")
STAGES: list[tuple[str, dict[str, str]]] = [
    (sid, dict(i18n.STAGE_TEXT[sid]["title"])) for sid in STAGE_IDS
]
# how the app groups the stages into sections (pipeline order kept)
SECTIONS: list[tuple[str, tuple[str, ...]]] = [
    ("tokens", ("tokens",)),
    ("position", ("embedding", "pe_heatmap", "pe_learned_sim", "rope_freqs", "rope_distance",
                  "pe_curves", "pe_similarity", "pe_compare")),
    ("qkv", ("gqa", "weights", "qkv")),
    ("scores", ("qk", "scaled", "mask", "masked", "softmax")),
    ("output", ("z", "out", "next_token")),
    ("cell", ("cell",)),
    ("overview", ("overview",)),
]
OVERVIEW_MAX_LAYERS = 12


def applies(stage_id: str, info) -> bool:
    """Whether a stage means something for this model (the app and export show only those; others
    return a figure that says what they are for)."""
    inf = _info(info)
    if stage_id == "pe_learned_sim":
        return inf.get("positional") == "learned"
    if stage_id in ("rope_freqs", "rope_distance"):
        return inf.get("positional") == "rotary"
    if stage_id == "gqa":
        return int(inf.get("n_kv_heads") or inf["n_heads"]) < int(inf["n_heads"])
    if stage_id == "next_token":
        return inf.get("kind") == "decoder"
    return True


def kv_head_note(info, head: int, lang: str = "en") -> str | None:
    """"Head h reads K/V head g (shared with heads ...)" under grouped-query attention, else None."""
    inf = _info(info)
    n, n_kv = int(inf["n_heads"]), int(inf.get("n_kv_heads") or inf["n_heads"])
    if n_kv >= n:
        return None
    g = pt.kv_head_of(head, n, n_kv)
    others = ", ".join(str(h) for h in pt.kv_groups(n, n_kv)[g] if h != head) or "—"
    return i18n.t("kv_head_note", lang, h=head, g=g, others=others)


def _info(info) -> dict:
    if isinstance(info, Mapping):
        return dict(info)
    return info.as_dict() if hasattr(info, "as_dict") else dict(vars(info))


def _clip(x: int, hi: int) -> int:
    return int(min(max(int(x), 0), max(hi - 1, 0)))


def clip_selection(sel: Selection, run: RunData, info) -> Selection:
    """The nearest valid selection: block available, indices within range."""
    inf = _info(info)
    blocks = blocks_for(inf)
    block = sel.block if sel.block in blocks else blocks[0]
    sentence = _clip(sel.sentence, run.n_sentences)
    layer = _clip(sel.layer, layers_for(inf, block))
    head = _clip(sel.head, int(inf["n_heads"]))
    scores = run[f"{prefix(block, layer)}.hook_scores"]
    return replace(sel, block=block, sentence=sentence, layer=layer, head=head,
                   query=_clip(sel.query, scores.shape[-2]), key=_clip(sel.key, scores.shape[-1]))


class _Ctx:
    """Everything one stage needs about the selection, read lazily from the run."""

    def __init__(self, run: RunData, info: dict, sel: Selection, lang: str, weights) -> None:
        self.run, self.info, self.sel, self.lang = run, info, sel, lang
        self.p = prefix(sel.block, sel.layer)
        self.L = i18n.fig_labels(lang)
        self.q_tokens, self.k_tokens, self.n_q, self.n_k = axis_tokens(run, sel.block, sel.sentence, sel.layer)
        self.d_head = int(info["d_head"])
        self._weights = weights

    def t(self, name: str) -> np.ndarray:
        """This sentence's (and, for per-head hooks, this head's) slice of a hook tensor."""
        x = self.run[f"{self.p}.{name}"][self.sel.sentence]
        if name in ("hook_out",):
            return x
        if name == "hook_mask":
            return x[0].astype(bool)
        return x[self.sel.head]

    @property
    def weights(self) -> Mapping | None:
        w = self._weights
        if w is None or (isinstance(w, Mapping) and not w):
            w = self.run.weights
        if w is not None and not isinstance(w, Mapping) and hasattr(w, "named_modules"):
            w = weights_of(w)
        return w if w else None

    @property
    def stack(self) -> str:
        return stack_of(self.sel.block)

    @property
    def causal(self) -> bool:
        return self.sel.block == "decoder.self_attn"


def _notice(text: str, title: str) -> go.Figure:
    return style.make_figure([], dict(
        annotations=[dict(text=style.esc(text), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font=dict(size=16))],
        xaxis=dict(visible=False), yaxis=dict(visible=False), plot_bgcolor="white"), title=title, height=240)


# --- the stages ------------------------------------------------------------------------------

def _tokens(c: _Ctx, title: str, opts: dict):
    run, s = c.run, c.sel.sentence
    stack = "encoder" if c.sel.block.endswith("cross_attn") else c.stack
    batch = [stack_tokens(run, stack, i) for i in range(run.n_sentences)]
    length = run[f"{prefix(c.sel.block, c.sel.layer)}.hook_k"].shape[-2] if stack == "encoder" else None
    specials = {"<s>", "</s>", "<pad>", "<unk>", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "<|endoftext|>",
                "<|im_start|>", "<|im_end|>"}
    fig, _batch_df = tv.batch_figure(batch, specials=sorted(specials), length=length, selected=s,
                                     title=title, row_name=c.L["sentence"], col_name=c.L["position"],
                                     pad_name=c.L["pad"])
    if stack == "decoder" and run.kind == "encoder-decoder":
        ids = run.decoder_token_ids[s]
        df = tv.tokens_table(batch[s], ids, [(0, 0)] * len(ids))
    else:
        text = run.texts[s] if s < len(run.texts) else ""
        df = tv.tokens_table(run.tokens[s], run.token_ids[s], run.offsets[s], text)
    return fig, df


def _pe(c: _Ctx) -> np.ndarray | None:
    name = f"{c.stack}.hook_pos_embed"
    if name not in c.run:
        return None
    pe = c.run[name]
    return pe[c.sel.sentence if pe.shape[0] > 1 else 0]


def _stack_tokens_padded(c: _Ctx) -> list[str]:
    return c.q_tokens


def _base(c: _Ctx) -> float:
    return float(c.info.get("positional_base") or 10000.0)


def _embedding(c: _Ctx, title: str, opts: dict):
    emb = c.run[f"{c.stack}.hook_embed"][c.sel.sentence]
    pe = _pe(c)
    toks = c.q_tokens[: emb.shape[0]]
    return pv.embedding_sum(emb, pe, toks, title=title, labels=c.L,
                            names=(c.L["embedding"], c.L["encoding"], c.L["sum"]))


def _rotary(c: _Ctx, title: str):
    return pv.rotary_figure(c.d_head, _base(c), max(16, len(c.q_tokens)), title=f"{title} — rotary (RoPE)",
                            labels=c.L)


def _pe_heatmap(c: _Ctx, title: str, opts: dict):
    pe = _pe(c)
    if pe is None:
        return _rotary(c, title)
    return pv.pe_heatmap(pe, c.q_tokens[: pe.shape[0]], title=title, labels=c.L)


def _pe_params(c: _Ctx, opts: dict) -> tuple[int, int, float, list[str] | None]:
    n_tok = len(c.q_tokens)
    n = int(opts.get("pe_positions") or n_tok)
    d = int(opts.get("pe_d_model") or c.info["d_model"])
    base = float(opts.get("pe_base") or _base(c))
    toks = c.q_tokens if n == n_tok else None
    return n, d, base, toks


def _pe_curves(c: _Ctx, title: str, opts: dict):
    n, d, base, toks = _pe_params(c, opts)
    if c.info.get("positional") != "sinusoidal" and not opts:
        title = f"{title} (sinusoidal reference)"
    return pv.pe_curves(n, d, base, opts.get("pe_dims"), toks, title=title, labels=c.L)


def _pe_similarity(c: _Ctx, title: str, opts: dict):
    if opts.get("pe_base") or opts.get("pe_d_model") or opts.get("pe_positions") or _pe(c) is None:
        n, d, base, toks = _pe_params(c, opts)
        if _pe(c) is None and not opts:
            return _rotary(c, title)
        pe = pv.sinusoidal_table(n, d, base)
    else:
        pe = _pe(c)
        toks = c.q_tokens[: pe.shape[0]]
    return pv.pe_similarity(pe, toks, title=title, labels=c.L)


def _pe_compare(c: _Ctx, title: str, opts: dict):
    n, d, _base_n, toks = _pe_params(c, opts)
    bases = tuple(opts.get("pe_bases") or (10000.0, 100.0))
    return pv.pe_compare(n, d, bases, toks, title=title, labels=c.L)


def _not_for(c: _Ctx, title: str, what: dict[str, str]):
    return _notice(i18n.t("not_for_model", c.lang, what=what[c.lang]), title), None


def _pe_learned_sim(c: _Ctx, title: str, opts: dict):
    pe = _pe(c)
    if pe is None or c.info.get("positional") != "learned":
        return _not_for(c, title, {"en": "learned position embeddings", "ko": "학습된 위치 임베딩"})
    return pt.learned_similarity(pe, c.q_tokens[: pe.shape[0]], title=title, labels=c.L)


def _rope_freqs(c: _Ctx, title: str, opts: dict):
    if c.info.get("positional") != "rotary":
        return _not_for(c, title, {"en": "rotary positions", "ko": "회전 위치 인코딩"})
    return pt.rotary_frequencies_figure(c.d_head, _base(c), title=f"{title} (base {_base(c):g}, d_head {c.d_head})",
                                        labels=c.L)


def _rope_distance(c: _Ctx, title: str, opts: dict):
    if c.info.get("positional") != "rotary":
        return _not_for(c, title, {"en": "rotary positions", "ko": "회전 위치 인코딩"})
    return pv.rotary_figure(c.d_head, _base(c), max(64, len(c.q_tokens)), title=title, labels=c.L)


def _gqa(c: _Ctx, title: str, opts: dict):
    n = int(c.info["n_heads"])
    return pt.gqa_figure(n, int(c.info.get("n_kv_heads") or n), c.sel.head, title=title, labels=c.L)


def _next_token(c: _Ctx, title: str, opts: dict):
    run = c.run
    if run.top_ids is None or c.info.get("kind") != "decoder":
        return _not_for(c, title, {"en": "a decoder's next-token predictions", "ko": "디코더의 다음 토큰 예측"})
    toks = stack_tokens(run, c.stack, c.sel.sentence)
    n_real = min(len(toks), run.top_ids.shape[1])
    pos = n_real - 1 if opts.get("next_position") is None else _clip(opts["next_position"], n_real)
    ids = run.top_ids[c.sel.sentence, pos]
    texts = [run.top_text.get(int(i), str(int(i))) for i in ids]
    context = "".join(toks[max(0, pos - 7): pos + 1])
    context = f"{c.L['position']} {pos}: “{'…' if pos > 7 else ''}{style.plain_text(context, 60)}”"
    return pt.next_token_figure(ids, run.top_probs[c.sel.sentence, pos], texts, context=context, title=title,
                                labels=c.L)


def _weights(c: _Ctx, title: str, opts: dict):
    w = c.weights
    if w is None or f"{c.p}.W_Q" not in w:
        return _notice(i18n.t("no_weights_here", c.lang), title), None
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    names = ("W_Q[h]", f"W_K[{hw['kv_head']}]" if hw["kv_head"] != c.sel.head else "W_K[h]",
             f"W_V[{hw['kv_head']}]" if hw["kv_head"] != c.sel.head else "W_V[h]")
    fig = av.weights_figure(hw["W_Q"], hw["W_K"], hw["W_V"], title=title, labels=c.L, names=names)
    df = pd.concat([pd.DataFrame(hw[k], columns=[f"{k}:{i}" for i in range(hw[k].shape[1])])
                    for k in ("W_Q", "W_K", "W_V")], axis=1)
    df.index.name = "d_model"
    return fig, df


def _qkv(c: _Ctx, title: str, opts: dict):
    q, k, v = c.t("hook_q"), c.t("hook_k"), c.t("hook_v")
    fig = av.qkv_figure(q, k, v, c.q_tokens, c.k_tokens, title=title, labels=c.L)
    parts = []
    for name, m, toks in (("Q", q, c.q_tokens), ("K", k, c.k_tokens), ("V", v, c.k_tokens)):
        part = matrix_df(m, toks, None, row_name="position", col_name="dim")
        part.insert(0, "matrix", name)
        part.index = [f"{name} {i}" for i in part.index]
        part.index.name = "position"
        parts.append(part)
    df = pd.concat(parts, axis=0)  # Q rows, then K rows, then V rows (cross-attention: other lengths)
    return fig, df


def _raw_scores(c: _Ctx) -> np.ndarray:
    q, k = c.t("hook_q").astype(np.float64), c.t("hook_k").astype(np.float64)
    return q @ k.T


def _qk(c: _Ctx, title: str, opts: dict):
    raw = _raw_scores(c)
    fig = av.scores_figure(raw, c.q_tokens, c.k_tokens, title=title, labels=c.L, value_name="q·k")
    return fig, matrix_df(raw, c.q_tokens, c.k_tokens, row_name=c.L["query"], col_name=c.L["key"])


def _scaled(c: _Ctx, title: str, opts: dict):
    s = c.t("hook_scores")
    zmax = style.symmetric_range(_raw_scores(c))  # the same range as Q·Kᵀ: scaling shows as paler
    fig = av.scores_figure(s, c.q_tokens, c.k_tokens, title=title, labels=c.L, value_name="q·k/√d_k",
                           zmax=zmax)
    return fig, matrix_df(s, c.q_tokens, c.k_tokens, row_name=c.L["query"], col_name=c.L["key"])


def _mask(c: _Ctx, title: str, opts: dict):
    allowed = c.t("hook_mask")
    fig = av.mask_figure(allowed, c.q_tokens, c.k_tokens, n_real_keys=c.n_k, causal=c.causal,
                         title=title, labels=c.L)
    cat = av.mask_categories(allowed, c.n_k, c.causal)
    names = np.array(["allowed", "padding", "causal", "padding+causal"], dtype=object)
    return fig, matrix_df(names[cat], c.q_tokens, c.k_tokens, row_name=c.L["query"], col_name=c.L["key"])


def _masked(c: _Ctx, title: str, opts: dict):
    ms = c.t("hook_masked_scores")
    blocked = ~np.isfinite(ms) | ~c.t("hook_mask")
    fig = av.scores_figure(ms, c.q_tokens, c.k_tokens, title=title, labels=c.L,
                           value_name="q·k/√d_k", blocked=blocked)
    return fig, matrix_df(ms, c.q_tokens, c.k_tokens, row_name=c.L["query"], col_name=c.L["key"])


def _softmax(c: _Ctx, title: str, opts: dict):
    p = c.t("hook_pattern")
    fig = av.pattern_figure(p, c.q_tokens, c.k_tokens, blocked=~c.t("hook_mask"), title=title, labels=c.L)
    df = matrix_df(p, c.q_tokens, c.k_tokens, row_name=c.L["query"], col_name=c.L["key"])
    df[c.L["row_sum"]] = p.sum(axis=1)
    return fig, df


def _z(c: _Ctx, title: str, opts: dict):
    p, v, z = c.t("hook_pattern"), c.t("hook_v"), c.t("hook_z")
    fig = av.z_figure(p, v, z, c.q_tokens, c.k_tokens, blocked=~c.t("hook_mask"), title=title,
                      labels=c.L, names=(c.L["weights"], "V", c.L["z"]))
    return fig, matrix_df(z, c.q_tokens, None, row_name=c.L["query"], col_name=c.L["dim"])


def _out(c: _Ctx, title: str, opts: dict):
    w = c.weights
    if w is None or f"{c.p}.W_O" not in w:
        return _notice(i18n.t("no_weights_here", c.lang), title), None
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    contrib = c.t("hook_z").astype(np.float64) @ hw["W_O"].astype(np.float64)  # (q, d_model)
    total = c.t("hook_out")
    fig = av.head_output_figure(contrib, total, c.q_tokens, title=title, labels=c.L,
                                names=(c.L["this_head"], c.L["all_heads"]))
    return fig, matrix_df(contrib, c.q_tokens, None, row_name=c.L["query"], col_name=c.L["d_model"])


def _cell(c: _Ctx, title: str, opts: dict):
    i, j = c.sel.query, c.sel.key
    q, k = c.t("hook_q")[i].astype(np.float64), c.t("hook_k")[j].astype(np.float64)
    fig, df, _nums = av.cell_figure(q, k, c.t("hook_scores")[i], c.t("hook_mask")[i], c.t("hook_pattern")[i],
                                    i, j, c.q_tokens[i], c.k_tokens, title=title, labels=c.L)
    return fig, df


def cell_numbers(cache, info, sel: Selection) -> dict:
    """The one-cell chain as numbers (for the app's formula line)."""
    run = as_run(cache)
    sel = clip_selection(sel, run, info)
    c = _Ctx(run, _info(info), sel, "en", None)
    i, j = sel.query, sel.key
    nums = av.cell_numbers(c.t("hook_q")[i].astype(np.float64), c.t("hook_k")[j].astype(np.float64),
                           c.t("hook_scores")[i], c.t("hook_mask")[i], c.t("hook_pattern")[i], j)
    nums.update(query_token=c.q_tokens[i], key_token=c.k_tokens[j], query=i, key=j)
    return nums


def overview_layers(n_layers: int, layer: int) -> list[int]:
    if n_layers <= OVERVIEW_MAX_LAYERS:
        return list(range(n_layers))
    a = min(max(0, layer - OVERVIEW_MAX_LAYERS // 2), n_layers - OVERVIEW_MAX_LAYERS)
    return list(range(a, a + OVERVIEW_MAX_LAYERS))


def _overview(c: _Ctx, title: str, opts: dict):
    n_layers = layers_for(c.info, c.sel.block)
    stack, attn = c.sel.block.split(".")
    layers = overview_layers(n_layers, c.sel.layer)
    pats = np.stack([c.run[f"{stack}.blocks.{li}.{attn}.hook_pattern"][c.sel.sentence] for li in range(n_layers)])
    return av.overview_figure(pats, c.n_q, layers=layers, selected=(c.sel.layer, c.sel.head),
                              title=title, labels=c.L)


_BUILDERS = {
    "tokens": _tokens, "embedding": _embedding, "pe_heatmap": _pe_heatmap, "pe_curves": _pe_curves,
    "pe_similarity": _pe_similarity, "pe_compare": _pe_compare, "weights": _weights, "qkv": _qkv,
    "qk": _qk, "scaled": _scaled, "mask": _mask, "masked": _masked, "softmax": _softmax, "z": _z,
    "out": _out, "cell": _cell, "overview": _overview, "pe_learned_sim": _pe_learned_sim,
    "rope_freqs": _rope_freqs, "rope_distance": _rope_distance, "gqa": _gqa, "next_token": _next_token,
}
assert set(_BUILDERS) == set(STAGE_IDS)


def stage_title(stage_id: str, lang: str = "en") -> str:
    return i18n.stage_text(stage_id, lang)["title"]


def stage_figure(stage_id: str, cache, info, sel: Selection, *, lang: str = "en", weights=None,
                 **options) -> tuple[go.Figure, pd.DataFrame | None]:
    """The figure (and its numbers as a table, when there is one) for one stage of one selection.

    ``options`` (all optional) are the positional-encoding controls: ``pe_base``, ``pe_d_model``,
    ``pe_positions``, ``pe_dims``, ``pe_bases``; and ``next_position`` (the position whose next
    token "next_token" shows; default the sentence's last real token).
    """
    if stage_id not in _BUILDERS:
        raise ValueError(f"unknown stage {stage_id!r}; choose from {', '.join(STAGE_IDS)}")
    run = as_run(cache)
    inf = _info(info)
    lang = i18n.lang_or_default(lang)
    sel = clip_selection(sel, run, inf)
    ctx = _Ctx(run, inf, sel, lang, weights)
    opts = {k: v for k, v in options.items() if v is not None}
    return _BUILDERS[stage_id](ctx, stage_title(stage_id, lang), opts)


def caption(model: str, text: str, sel: Selection, stage_id: str, lang: str = "en") -> str:
    """"model · sentence · layer · head · stage" as plain text (escape it before putting it in a
    figure: style.esc)."""
    title = stage_title(stage_id, lang) if stage_id in _BUILDERS else stage_id
    words = {"en": ("sentence", "layer", "head"), "ko": ("문장", "층", "헤드")}[i18n.lang_or_default(lang)]
    block = i18n.t(f"blocks.{sel.block}", lang) if sel.block in BLOCKS else sel.block
    return (f"{model} · {words[0]} {sel.sentence} “{style.plain_text(text, 48)}” · {block} · "
            f"{words[1]} {sel.layer} · {words[2]} {sel.head} · {title}")
