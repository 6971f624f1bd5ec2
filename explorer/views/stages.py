"""The pipeline's stages: one registry, the one contract shared by the app, the figure memo, export,
the exporter's ``--stages`` and the tests.

    from explorer.views import stages
    run = stages.run_data(m, ["hello world", "안녕하세요"])      # or a model.Cache from run_with_cache
    sel = stages.Selection(model="seed", sentence=0, layer=0, head=1, block="encoder.self_attn")
    for stage_id in stages.STAGE_IDS:
        fig, df = stages.stage_figure(stage_id, run, m.info, sel, lang="ko")
    stages.caption("seed", "hello world", sel, "softmax")
    edited = stages.run_data(m, ["hello world", "안녕하세요"], edits="no_causal")   # what if
    fig, df = stages.stage_figure("whatif_pattern", run, m.info, sel, edited=edited)

A stage is one record (``Stage``), declared with ``@stage(...)`` on its builder: its id, its section
of the page, its formula, which models and blocks it applies to, whether it changes with the
layer and head, the controls it takes, and a note derived from the model. Its words are the
catalogue's ``stage.{id}.title`` and ``stage.{id}.explain`` (explorer/i18n.py). Adding a stage is
one record, one builder and its words in both languages.

``cache`` may be a ``RunData`` (what the app caches; ``run_data`` includes the weights) or a
``model.Cache``. The stages "weights" and "out" need the projection weights: they come from
``weights=`` (a mapping from ``weights_of(m)`` or the model itself) or from ``run.weights``;
without them those two stages return a figure that says so, and no table.

Out-of-range selections are clipped (never an exception); unknown stage ids raise ValueError.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer import i18n
from explorer.inputs import clip

from . import attention as av
from . import decoding as dv
from . import positional as pv
from . import pretrained as pt
from . import style
from . import tokens as tv
from . import whatif as wv
from .data import (BLOCKS, RunData, as_run, axis_tokens, blocks_for, from_cache, head_weights, kv_groups,
                   kv_head_of, layers_for, prefix, run_data, stack_of, stack_tokens, weights_of)

__all__ = ["Selection", "Stage", "REGISTRY", "STAGE_IDS", "STAGES", "SECTIONS", "BLOCKS", "blocks_for",
           "layers_for", "stage_figure", "stage_title", "stage_note", "caption", "clip_selection", "run_data",
           "from_cache", "weights_of", "RunData", "applies", "kv_head_note", "cell_numbers", "overview_layers",
           "second_run", "ready", "head_entropies"]


@dataclass(frozen=True)
class Selection:
    model: str
    sentence: int
    layer: int
    head: int
    block: str  # one of BLOCKS (those available: blocks_for(info))
    query: int = 0  # for the one-cell view
    key: int = 0


Builder = Callable[["_Ctx", str, dict], tuple[go.Figure, "pd.DataFrame | None"]]


def _always(info: dict) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline. ``per_head``: its figure changes with the layer and the head (the
    figure memo keys on them only then); ``per_cell``: with the one-cell query and key too.
    ``blocks``: the attention blocks it is for (None: every block the model has). ``controls``: the
    name of a group of controls the app draws around it. ``note``: a sentence about the model on
    screen, shown under the figure. ``needs``: the second run the stage compares with, the option
    that carries it ("edited": the what-if run; "other": the second sentence's run); without it the
    stage's figure says what to choose, and export leaves the stage out. ``click``: what a click on
    the figure chooses on the page ("cell": a query and key; "head": a layer and head;
    explorer/views/picking.py)."""

    id: str
    section: str
    build: Builder
    formula: str
    applies: Callable[[dict], bool] = _always
    blocks: tuple[str, ...] | None = None
    per_head: bool = True
    per_cell: bool = False
    controls: str | None = None
    note: Callable[["_Ctx"], str | None] | None = None
    needs: str | None = None
    click: str | None = None

    def title(self, lang: str = "en") -> str:
        return i18n.t(f"stage.{self.id}.title", lang)

    def explain(self, lang: str = "en") -> str:
        return i18n.t(f"stage.{self.id}.explain", lang)


REGISTRY: dict[str, Stage] = {}


def stage(stage_id: str, *, section: str, formula: str, **record) -> Callable[[Builder], Builder]:
    """Register the decorated builder as stage ``stage_id`` (see ``Stage`` for ``record``)."""

    def register(build: Builder) -> Builder:
        if stage_id in REGISTRY:
            raise ValueError(f"stage {stage_id!r} is registered twice")
        REGISTRY[stage_id] = Stage(stage_id, section, build, formula, **record)
        return build

    return register


def _info(info) -> dict:
    if isinstance(info, Mapping):
        return dict(info)
    return info.as_dict() if hasattr(info, "as_dict") else dict(vars(info))


def applies(stage_id: str, info, block: str | None = None) -> bool:
    """Whether a stage means something for this model (and block): the app and export show only
    those; called anyway, the others return a figure that says what they are for."""
    s = REGISTRY[stage_id]
    return s.applies(_info(info)) and (block is None or s.blocks is None or block in s.blocks)


def kv_head_note(info, head: int, lang: str = "en") -> str | None:
    """"Head h reads K/V head g (shared with heads ...)" under grouped-query attention, else None."""
    inf = _info(info)
    n, n_kv = int(inf["n_heads"]), int(inf.get("n_kv_heads") or inf["n_heads"])
    if n_kv >= n:
        return None
    g = kv_head_of(head, n, n_kv)
    others = ", ".join(str(h) for h in kv_groups(n, n_kv)[g] if h != head) or "—"
    return i18n.t("kv_head_note", lang, h=head, g=g, others=others)


def clip_selection(sel: Selection, run: RunData, info) -> Selection:
    """The nearest valid selection: block available, indices within range."""
    inf = _info(info)
    blocks = blocks_for(inf)
    block = sel.block if sel.block in blocks else blocks[0]
    scores = run[f"{prefix(block, clip(sel.layer, layers_for(inf, block)))}.hook_scores"]
    return replace(sel, block=block, sentence=clip(sel.sentence, run.n_sentences),
                   layer=clip(sel.layer, layers_for(inf, block)), head=clip(sel.head, int(inf["n_heads"])),
                   query=clip(sel.query, scores.shape[-2]), key=clip(sel.key, scores.shape[-1]))


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
        if name == "hook_out":
            return x
        if name == "hook_mask":
            return x[0].astype(bool)
        return x[self.sel.head]

    def words(self, key: str, **kw) -> str:
        return i18n.t(key, self.lang, **kw)

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

    @property
    def base(self) -> float:
        """The model's positional base n (sinusoidal) or rotary base."""
        return float(self.info.get("positional_base") or 10000.0)


def _notice(text: str, title: str) -> go.Figure:
    return style.make_figure([], dict(
        annotations=[dict(text=style.esc(text), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font=dict(size=16))],
        xaxis=dict(visible=False), yaxis=dict(visible=False), plot_bgcolor="white"), title=title, height=240)


def _not_for(c: _Ctx, title: str, needs: str):
    return _notice(c.words("not_for_model", what=c.words(needs)), title), None


def _learned(info: dict) -> bool:
    return info.get("positional") == "learned"


def _rotary_model(info: dict) -> bool:
    return info.get("positional") == "rotary"


# --- tokens and positions ---------------------------------------------------------------------

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "<|endoftext|>",
                  "<|im_start|>", "<|im_end|>")


@stage("tokens", section="tokens", per_head=False, formula=r"\text{text} \rightarrow (t_0, t_1, \dots, t_{T-1}),\quad t_i \in \{0,\dots,|V|-1\}")
def _tokens(c: _Ctx, title: str, opts: dict):
    run, s = c.run, c.sel.sentence
    stack = "encoder" if c.sel.block.endswith("cross_attn") else c.stack
    batch = [stack_tokens(run, stack, i) for i in range(run.n_sentences)]
    length = run[f"{c.p}.hook_k"].shape[-2] if stack == "encoder" else None
    if stack == "decoder" and run.kind == "encoder-decoder":
        ids, offsets, text = run.decoder_token_ids[s], None, ""
    else:
        ids, offsets = run.token_ids[s], run.offsets[s]
        text = run.texts[s] if s < len(run.texts) else ""
    return tv.batch_figure(batch, specials=SPECIAL_TOKENS, length=length, selected=s, title=title, labels=c.L,
                           ids=ids, offsets=offsets, text=text)


def _pe(c: _Ctx) -> np.ndarray | None:
    name = f"{c.stack}.hook_pos_embed"
    if name not in c.run:
        return None
    pe = c.run[name]
    return pe[c.sel.sentence if pe.shape[0] > 1 else 0]


@stage("embedding", section="position", per_head=False, formula=r"x_i = E[t_i]\,\sqrt{d_{model}} + PE_i")
def _embedding(c: _Ctx, title: str, opts: dict):
    emb = c.run[f"{c.stack}.hook_embed"][c.sel.sentence]
    pe = _pe(c)
    return pv.embedding_sum(emb, pe, c.q_tokens[: emb.shape[0]], title=title, labels=c.L)


def _rotary(c: _Ctx, title: str):
    return pv.rotary_figure(c.d_head, c.base, max(16, len(c.q_tokens)), title=f"{title} (RoPE)",
                            labels=c.L)


def _sinusoidal_note(c: _Ctx) -> str | None:
    if c.info.get("positional") != "sinusoidal":
        return None
    return c.words("pe_model_note", n=f"{c.base:g}", d=c.info["d_model"])


@stage("pe_heatmap", section="position", per_head=False, applies=lambda i: not _rotary_model(i),
       note=_sinusoidal_note, formula=r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{n^{2i/d_{model}}}\right),\quad PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{n^{2i/d_{model}}}\right)")
def _pe_heatmap(c: _Ctx, title: str, opts: dict):
    pe = _pe(c)
    if pe is None:
        return _rotary(c, title)
    return pv.pe_heatmap(pe, c.q_tokens[: pe.shape[0]], title=title, labels=c.L)


def _learned_note(c: _Ctx) -> str | None:
    pe = _pe(c)
    return None if pe is None else c.words("pe_learned_note", n=pe.shape[0])


@stage("pe_learned_sim", section="position", per_head=False, applies=_learned, note=_learned_note,
       formula=r"\cos(P_m, P_n) = \frac{P_m \cdot P_n}{\lVert P_m\rVert\,\lVert P_n\rVert}")
def _pe_learned_sim(c: _Ctx, title: str, opts: dict):
    pe = _pe(c)
    if pe is None or not _learned(c.info):
        return _not_for(c, title, "needs.learned")
    return pt.learned_similarity(pe, c.q_tokens[: pe.shape[0]], title=title, labels=c.L)


@stage("rope_freqs", section="position", per_head=False, applies=_rotary_model,
       formula=r"\theta_i = \text{base}^{-2i/d_{head}},\quad (q_i, q_{i+d/2}) \mapsto R(\theta_i\, pos)\,(q_i, q_{i+d/2})")
def _rope_freqs(c: _Ctx, title: str, opts: dict):
    if not _rotary_model(c.info):
        return _not_for(c, title, "needs.rotary")
    return pt.rotary_frequencies_figure(c.d_head, c.base, title=f"{title} ({c.L['base']} {c.base:g}, d_head {c.d_head})",
                                        labels=c.L)


def _rotary_note(c: _Ctx) -> str | None:
    return c.words("pe_rotary_note", n=f"{c.base:g}", d=c.d_head)


@stage("rope_distance", section="position", per_head=False, applies=_rotary_model, note=_rotary_note,
       formula=r"(R_m q)\cdot(R_n k) = q^\top R_{n-m}\, k")
def _rope_distance(c: _Ctx, title: str, opts: dict):
    if not _rotary_model(c.info):
        return _not_for(c, title, "needs.rotary")
    return pv.rotary_figure(c.d_head, c.base, max(64, len(c.q_tokens)), title=title, labels=c.L)


def _pe_params(c: _Ctx, opts: dict) -> tuple[int, int, float, list[str] | None]:
    n_tok = len(c.q_tokens)
    n = int(opts.get("pe_positions") or n_tok)
    d = int(opts.get("pe_d_model") or c.info["d_model"])
    base = float(opts.get("pe_base") or c.base)
    toks = c.q_tokens if n == n_tok else None
    return n, d, base, toks


@stage("pe_curves", section="position", per_head=False, controls="pe", formula=r"\omega_i = \frac{1}{n^{2i/d_{model}}},\qquad PE_{pos} = \big(\sin(\omega_0 pos), \cos(\omega_0 pos), \sin(\omega_1 pos), \dots\big)")
def _pe_curves(c: _Ctx, title: str, opts: dict):
    n, d, base, toks = _pe_params(c, opts)
    if c.info.get("positional") != "sinusoidal" and not opts:
        title = f"{title} ({c.words('fig.sinusoidal_reference')})"
    return pv.pe_curves(n, d, base, opts.get("pe_dims"), toks, title=title, labels=c.L)


@stage("pe_similarity", section="position", per_head=False, controls="pe", formula=r"PE_m \cdot PE_n = \sum_i \cos\big(\omega_i (m-n)\big)")
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


def compare_bases(info, chosen: float | None = None) -> tuple[float, float]:
    """The two bases the comparison draws: the paper's 10000 and ``chosen`` (default: the model's own
    base), or 10000 and 100 when that is 10000 too."""
    other = float(chosen or _info(info).get("positional_base") or 10000.0)
    return (10000.0, other) if other != 10000.0 else (10000.0, 100.0)


@stage("pe_compare", section="position", per_head=False, controls="pe", formula=r"\omega_i = n^{-2i/d_{model}}\ \ (\omega_0 = 1 \text{ for every } n)")
def _pe_compare(c: _Ctx, title: str, opts: dict):
    n, d, _, toks = _pe_params(c, opts)
    bases = tuple(float(b) for b in (opts.get("pe_bases") or compare_bases(c.info)))
    title = c.words("fig.pe_compare_title", bases=" · ".join(f"n = {b:g}" for b in bases))
    return pv.pe_compare(n, d, bases, toks, title=title, labels=c.L)


# --- Q, K, V ------------------------------------------------------------------------------------

def _grouped(info: dict) -> bool:
    return int(info.get("n_kv_heads") or info["n_heads"]) < int(info["n_heads"])


@stage("gqa", section="qkv", applies=_grouped, formula=r"g(h) = \left\lfloor \frac{h}{n_{heads} / n_{kv}} \right\rfloor,\qquad K^{(h)} = X W_K^{(g(h))},\ V^{(h)} = X W_V^{(g(h))}")
def _gqa(c: _Ctx, title: str, opts: dict):
    n = int(c.info["n_heads"])
    return pt.gqa_figure(n, int(c.info.get("n_kv_heads") or n), c.sel.head, title=title, labels=c.L)


@stage("weights", section="qkv", formula=r"W_Q^{(h)},\ W_K^{(h)},\ W_V^{(h)} \in \mathbb{R}^{d_{model} \times d_{head}}")
def _weights(c: _Ctx, title: str, opts: dict):
    w = c.weights
    if w is None or f"{c.p}.W_Q" not in w:
        return _notice(c.words("no_weights_here"), title), None
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    names = ("W_Q[h]", f"W_K[{hw['kv_head']}]" if hw["kv_head"] != c.sel.head else "W_K[h]",
             f"W_V[{hw['kv_head']}]" if hw["kv_head"] != c.sel.head else "W_V[h]")
    return av.weights_figure(hw["W_Q"], hw["W_K"], hw["W_V"], title=title, labels=c.L, names=names)


@stage("qkv", section="qkv", formula=r"Q = X W_Q^{(h)},\quad K = X W_K^{(h)},\quad V = X W_V^{(h)}")
def _qkv(c: _Ctx, title: str, opts: dict):
    return av.qkv_figure(c.t("hook_q"), c.t("hook_k"), c.t("hook_v"), c.q_tokens, c.k_tokens, title=title,
                         labels=c.L)


# --- scores, masks, weights ----------------------------------------------------------------------

def _raw_scores(c: _Ctx) -> np.ndarray:
    q, k = c.t("hook_q").astype(np.float64), c.t("hook_k").astype(np.float64)
    return q @ k.T


@stage("qk", section="scores", click="cell", formula=r"S_{ij} = q_i \cdot k_j = \sum_{d} q_{i,d}\, k_{j,d}")
def _qk(c: _Ctx, title: str, opts: dict):
    return av.scores_figure(_raw_scores(c), c.q_tokens, c.k_tokens, title=title, labels=c.L, value_name="q·k")


@stage("scaled", section="scores", click="cell", formula=r"\tilde S_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}}")
def _scaled(c: _Ctx, title: str, opts: dict):
    zmax = style.symmetric_range(_raw_scores(c))  # the same range as Q·Kᵀ: scaling shows as paler
    return av.scores_figure(c.t("hook_scores"), c.q_tokens, c.k_tokens, title=title, labels=c.L,
                            value_name="q·k/√d_k", zmax=zmax)


@stage("mask", section="scores", formula=r"M_{ij} = \underbrace{[\,j < T_{real}\,]}_{\text{padding}} \wedge \underbrace{[\,j \le i\,]}_{\text{causal}}")
def _mask(c: _Ctx, title: str, opts: dict):
    return av.mask_figure(c.t("hook_mask"), c.q_tokens, c.k_tokens, n_real_keys=c.n_k, causal=c.causal,
                          title=title, labels=c.L)


@stage("masked", section="scores", click="cell", formula=r"\hat S_{ij} = \begin{cases} \tilde S_{ij} & M_{ij} \\ -\infty & \text{otherwise} \end{cases}")
def _masked(c: _Ctx, title: str, opts: dict):
    ms = c.t("hook_masked_scores")
    blocked = ~np.isfinite(ms) | ~c.t("hook_mask")
    return av.scores_figure(ms, c.q_tokens, c.k_tokens, title=title, labels=c.L, value_name="q·k/√d_k",
                            blocked=blocked)


@stage("softmax", section="scores", click="cell", formula=r"A_{ij} = \frac{e^{\hat S_{ij}}}{\sum_{j'} e^{\hat S_{ij'}}},\qquad \sum_j A_{ij} = 1")
def _softmax(c: _Ctx, title: str, opts: dict):
    return av.pattern_figure(c.t("hook_pattern"), c.q_tokens, c.k_tokens, blocked=~c.t("hook_mask"), title=title,
                             labels=c.L)


# --- output ---------------------------------------------------------------------------------------

@stage("z", section="output", formula=r"z_i = \sum_j A_{ij}\, v_j \qquad (Z = A V)")
def _z(c: _Ctx, title: str, opts: dict):
    return av.z_figure(c.t("hook_pattern"), c.t("hook_v"), c.t("hook_z"), c.q_tokens, c.k_tokens,
                       blocked=~c.t("hook_mask"), title=title, labels=c.L)


@stage("out", section="output", formula=r"\mathrm{MultiHead}(X) = \mathrm{Concat}(z^{(1)},\dots,z^{(H)})\,W_O = \sum_h z^{(h)} W_O^{(h)} + b_O")
def _out(c: _Ctx, title: str, opts: dict):
    w = c.weights
    if w is None or f"{c.p}.W_O" not in w:
        return _notice(c.words("no_weights_here"), title), None
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    contrib = c.t("hook_z").astype(np.float64) @ hw["W_O"].astype(np.float64)  # (q, d_model)
    return av.head_output_figure(contrib, c.t("hook_out"), c.q_tokens, title=title, labels=c.L)


def _decoder_only(info: dict) -> bool:
    return info.get("kind") == "decoder"


@stage("next_token", section="output", per_head=False, applies=_decoder_only, controls="next_position",
       formula=r"p(t_{i+1} \mid t_{\le i}) = \mathrm{softmax}\big(h_i W_{out}^\top\big)")
def _next_token(c: _Ctx, title: str, opts: dict):
    run = c.run
    if run.top_ids is None or not _decoder_only(c.info):
        return _not_for(c, title, "needs.next_token")
    toks = stack_tokens(run, c.stack, c.sel.sentence)
    n_real = min(len(toks), run.top_ids.shape[1])
    pos = n_real - 1 if opts.get("next_position") is None else clip(opts["next_position"], n_real)
    ids = run.top_ids[c.sel.sentence, pos]
    texts = [run.top_text.get(int(i), str(int(i))) for i in ids]
    context = "".join(toks[max(0, pos - 7): pos + 1])
    context = f"{c.L['position']} {pos}: “{'…' if pos > 7 else ''}{style.plain_text(context, 60)}”"
    return pt.next_token_figure(ids, run.top_probs[c.sel.sentence, pos], texts, context=context, title=title,
                                labels=c.L)


# --- one cell, all heads ----------------------------------------------------------------------------

@stage("cell", section="cell", per_cell=True, controls="cell", formula=r"A_{ij} = \mathrm{softmax}_j\!\left(\frac{\sum_d q_{i,d}\,k_{j,d}}{\sqrt{d_k}} + \log M_{ij}\right)")
def _cell(c: _Ctx, title: str, opts: dict):
    i, j = c.sel.query, c.sel.key
    q, k = c.t("hook_q")[i].astype(np.float64), c.t("hook_k")[j].astype(np.float64)
    return av.cell_figure(q, k, c.t("hook_scores")[i], c.t("hook_mask")[i], c.t("hook_pattern")[i],
                          i, j, c.q_tokens[i], c.k_tokens, title=title, labels=c.L)


OVERVIEW_MAX_LAYERS = 12


def overview_layers(n_layers: int, layer: int) -> list[int]:
    if n_layers <= OVERVIEW_MAX_LAYERS:
        return list(range(n_layers))
    a = min(max(0, layer - OVERVIEW_MAX_LAYERS // 2), n_layers - OVERVIEW_MAX_LAYERS)
    return list(range(a, a + OVERVIEW_MAX_LAYERS))


@stage("overview", section="overview", controls="drill", click="head", formula=r"H_h = -\frac{1}{T}\sum_i \sum_j A_{ij}\log A_{ij},\qquad d_h = \frac{1}{T}\sum_i \sum_j A_{ij}\,|i-j|")
def _overview(c: _Ctx, title: str, opts: dict):
    n_layers = layers_for(c.info, c.sel.block)
    stack, attn = c.sel.block.split(".")
    pats = np.stack([c.run[f"{stack}.blocks.{li}.{attn}.hook_pattern"][c.sel.sentence] for li in range(n_layers)])
    return av.overview_figure(pats, c.n_q, layers=overview_layers(n_layers, c.sel.layer),
                              selected=(c.sel.layer, c.sel.head), title=title, labels=c.L)


# --- decoding: one sentence written token by token (explorer/views/decoding.py) --------------------
# The trace comes with the run (``run.with_trace(trace_data(m, text))``; the app attaches the cached
# one, the exporter makes one): a builder never runs a model. Without a trace of the selected
# sentence the stage returns a figure that says how to get one.

def _has_decoder(info: dict) -> bool:
    return info.get("kind") in ("decoder", "encoder-decoder")


def _decoding_words(lang: str) -> dict[str, str]:
    keys = ("decoding.step", "decoding.source", "decoding.written", "decoding.prompt_then_written",
            "decoding.self_short", "decoding.causal_edge", "decoding.cross_short", "decoding.top_short",
            "decoding.self_panel", "decoding.k_panel", "decoding.v_panel",
            "decoding.top_panel", "decoding.cross_panel", "decoding.reads", "decoding.writes",
            "decoding.candidates", "decoding.looks_at", "decoding.cross_looks_at")
    return {k.split(".", 1)[1]: i18n.t(k, lang) for k in keys}


def decoding_trace(run: RunData, sentence: int):
    """The run's decoding trace if it is the given sentence's, else None."""
    tr = getattr(run, "trace", None)
    if tr is None or sentence >= len(run.texts) or tr.text != run.texts[sentence]:
        return None
    return tr


def _decoding_note(c: _Ctx) -> str | None:
    tr = decoding_trace(c.run, c.sel.sentence)
    if tr is None:
        return None
    key = "decoding.stopped_eos" if tr.finished else "decoding.stopped_limit"
    return c.words(key, n=tr.n_steps)


@stage("decoding", section="decoding", applies=_has_decoder, controls="decoding", note=_decoding_note,
       formula=r"a_t = \mathrm{softmax}\!\left(\frac{q_t\,[K_{<t};\,k_t]^\top}{\sqrt{d_k}}\right),\quad "
               r"z_t = a_t\,[V_{<t};\,v_t],\quad x_{t+1} = \arg\max_x\, p(x \mid x_{\le t})")
def _decoding(c: _Ctx, title: str, opts: dict):
    """Options: ``step`` (the step the figure opens at; default 0)."""
    if not _has_decoder(c.info):
        return _not_for(c, title, "decoding.needs_decoder")
    tr = decoding_trace(c.run, c.sel.sentence)
    if tr is None:
        return _notice(c.words("decoding.no_trace"), title), None
    layer, head = clip(c.sel.layer, tr.n_layers), clip(c.sel.head, tr.n_heads)
    return dv.timeline_figure(tr, layer, head, clip(opts.get("step", 0), tr.n_steps), title=title, labels=c.L,
                              words=_decoding_words(c.lang))


# === what if, and two sentences side by side (issue 15) ===========================================
# The what-if stages compare the run on screen (intact) with an edited run of the same model and
# sentences, given as the option ``edited`` (a RunData made with model.edits, e.g.
# ``run_data(m, texts, edits="no_causal")``; its ``edits`` names the edits). The comparison stage
# compares the sentence on screen with a second sentence, whose run (of that sentence alone) is the
# option ``other``. Without the option a stage's figure says what to choose (Stage.needs).

def _second(c: _Ctx, opts: dict, name: str) -> _Ctx | None:
    """The selection read from the second run (the other sentence: its only sentence)."""
    run = opts.get(name)
    if run is None:
        return None
    run = as_run(run)
    sel = c.sel if name == "edited" else replace(c.sel, sentence=0)
    return _Ctx(run, c.info, clip_selection(sel, run, c.info), c.lang, None)


def _choose(c: _Ctx, title: str, key: str):
    return _notice(c.words(key), title), None


def _edits_note(e: _Ctx) -> str:
    return e.words("whatif.caption_edits", edits=e.run.edits or "—")


@stage("whatif_pattern", section="whatif", controls="whatif", needs="edited",
       formula=r"\Delta A_{ij} = A^{\text{edited}}_{ij} - A^{\text{intact}}_{ij}")
def _whatif_pattern(c: _Ctx, title: str, opts: dict):
    e = _second(c, opts, "edited")
    if e is None:
        return _choose(c, title, "whatif.choose")
    return wv.pattern_pair_figure(c.t("hook_pattern"), e.t("hook_pattern"), c.q_tokens, c.k_tokens, e.q_tokens,
                                  e.k_tokens, a_blocked=~c.t("hook_mask"), b_blocked=~e.t("hook_mask"),
                                  title=title, subtitle=_edits_note(e), labels=wv.labels(c.lang))


def head_entropies(c: _Ctx) -> np.ndarray:
    """(layers, heads): every head's mean row entropy (nats) in the selected block and sentence."""
    n_layers = layers_for(c.info, c.sel.block)
    stack, attn = c.sel.block.split(".")
    pats = [c.run[f"{stack}.blocks.{li}.{attn}.hook_pattern"][c.sel.sentence] for li in range(n_layers)]
    n_q = [axis_tokens(c.run, c.sel.block, c.sel.sentence, li)[2] for li in range(n_layers)]
    return wv.head_entropies(pats, n_q)


@stage("whatif_entropy", section="whatif", controls="whatif", needs="edited",
       formula=r"H_h = -\frac{1}{T}\sum_i \sum_j A_{ij}\log A_{ij}:\quad H_h^{\text{edited}} - H_h^{\text{intact}}")
def _whatif_entropy(c: _Ctx, title: str, opts: dict):
    e = _second(c, opts, "edited")
    if e is None:
        return _choose(c, title, "whatif.choose")
    return wv.entropy_figure(head_entropies(c), head_entropies(e), c.sel.layer, c.sel.head, title=title,
                             subtitle=_edits_note(e), labels=wv.labels(c.lang))


def _output_note(c: _Ctx) -> str | None:
    kind = c.info.get("kind")
    key = {"encoder-decoder": "whatif.output_note_seed", "decoder": "whatif.output_note_decoder",
           "encoder": "whatif.output_note_encoder"}.get(kind)
    return None if key is None else c.words(key)


@stage("whatif_output", section="whatif", per_head=False, controls="whatif", needs="edited", note=_output_note,
       formula=r"\mathrm{KL}(p \,\|\, p') = \sum_t p_t \log \frac{p_t}{p'_t},\qquad \cos(e, e') = "
               r"\frac{e \cdot e'}{\lVert e \rVert\, \lVert e' \rVert}")
def _whatif_output(c: _Ctx, title: str, opts: dict):
    e = _second(c, opts, "edited")
    if e is None:
        return _choose(c, title, "whatif.choose")
    s, W, note = c.sel.sentence, wv.labels(c.lang), _edits_note(e)
    a, b = c.run, e.run
    if a.generated is not None and b.generated is not None:
        return wv.generated_figure(a.generated[s], b.generated[s], title=title, subtitle=note, labels=W)
    if a.final_logprobs is not None and b.final_logprobs is not None:
        toks = stack_tokens(a, c.stack, s)
        context = f"“{'…' if len(toks) > 8 else ''}{style.plain_text(''.join(toks[-8:]), 60)}”"
        return wv.next_token_pair_figure(a.final_logprobs[s], b.final_logprobs[s], {**a.top_text, **b.top_text},
                                         context=context, title=title, subtitle=note, labels=W)
    if a.embedding is not None and b.embedding is not None:
        return wv.embedding_pair_figure(a.embedding[s], b.embedding[s], title=title, subtitle=note, labels=W)
    return _notice(c.words("whatif.no_output"), title), None


@stage("compare_pattern", section="compare", controls="compare", needs="other",
       formula=r"\Delta A_{ij} = A^{(2)}_{\pi(i)\,\pi(j)} - A^{(1)}_{ij}\quad (\pi:\ \text{the same token})")
def _compare_pattern(c: _Ctx, title: str, opts: dict):
    o = _second(c, opts, "other")
    if o is None:
        return _choose(c, title, "compare.choose")
    W = wv.labels(c.lang)
    text = o.run.texts[0] if o.run.texts else ""
    return wv.pattern_pair_figure(c.t("hook_pattern"), o.t("hook_pattern"), c.q_tokens, c.k_tokens, o.q_tokens,
                                  o.k_tokens, a_blocked=~c.t("hook_mask"), b_blocked=~o.t("hook_mask"),
                                  names=(W["first"], W["second"]), title=title, labels=W,
                                  subtitle=c.words("compare.caption", text=style.plain_text(text, 60)))


def second_run(stage_id: str, options: Mapping) -> tuple[str, str]:
    """(edits, second sentence) of the run a stage compares with, for captions, file names and the
    manifest ("" and "" for a stage that compares nothing, or without its run)."""
    needs = REGISTRY[stage_id].needs if stage_id in REGISTRY else None
    run = options.get(needs) if needs else None
    if run is None:
        return "", ""
    run = as_run(run)
    if needs == "edited":
        return run.edits, ""
    return "", run.texts[0] if run.texts else ""


def ready(stage_id: str, info, block: str | None = None, options: Mapping | None = None) -> bool:
    """Whether export should include a stage: it applies, and the run it compares with is given."""
    needs = REGISTRY[stage_id].needs
    return applies(stage_id, info, block) and (needs is None or (options or {}).get(needs) is not None)


# --- what the registry gives everyone ---------------------------------------------------------------

STAGE_IDS: tuple[str, ...] = tuple(REGISTRY)
# (id, {lang: title}) in pipeline order
STAGES: list[tuple[str, dict[str, str]]] = [(sid, {lg: s.title(lg) for lg in i18n.LANGS})
                                            for sid, s in REGISTRY.items()]
# the page's sections in pipeline order, each with its stages
SECTIONS: list[tuple[str, tuple[str, ...]]] = [
    (sec, tuple(sid for sid, s in REGISTRY.items() if s.section == sec))
    for sec in dict.fromkeys(s.section for s in REGISTRY.values())
]


def _record(stage_id: str) -> Stage:
    try:
        return REGISTRY[stage_id]
    except KeyError:
        raise ValueError(f"unknown stage {stage_id!r}; choose from {', '.join(STAGE_IDS)}") from None


def stage_title(stage_id: str, lang: str = "en") -> str:
    return _record(stage_id).title(lang)


def _context(cache, info, sel: Selection, lang: str, weights=None) -> _Ctx:
    run = as_run(cache)
    inf = _info(info)
    return _Ctx(run, inf, clip_selection(sel, run, inf), i18n.lang_or_default(lang), weights)


def stage_figure(stage_id: str, cache, info, sel: Selection, *, lang: str = "en", weights=None,
                 **options) -> tuple[go.Figure, pd.DataFrame | None]:
    """The figure (and its numbers as a table, when there is one) for one stage of one selection.

    ``options`` (all optional) are the positional-encoding controls: ``pe_base``, ``pe_d_model``,
    ``pe_positions``, ``pe_dims``, ``pe_bases``; and ``next_position`` (the position whose next
    token "next_token" shows; default the sentence's last real token); ``edited`` (the what-if
    stages: a RunData of the same model and sentences made with model.edits) and ``other`` (the
    comparison: the run of a second sentence alone) — a stage's ``needs`` says which it reads.
    """
    record = _record(stage_id)
    ctx = _context(cache, info, sel, lang, weights)
    opts = {k: v for k, v in options.items() if v is not None}
    return record.build(ctx, record.title(ctx.lang), opts)


def stage_note(stage_id: str, cache, info, sel: Selection, lang: str = "en") -> str | None:
    """The stage's sentence about the model on screen (e.g. the base n it actually used), or None."""
    record = _record(stage_id)
    return None if record.note is None else record.note(_context(cache, info, sel, lang))


def cell_numbers(cache, info, sel: Selection) -> dict:
    """The one-cell chain as numbers (for the app's formula line)."""
    c = _context(cache, info, sel, "en")
    i, j = c.sel.query, c.sel.key
    nums = av.cell_numbers(c.t("hook_q")[i].astype(np.float64), c.t("hook_k")[j].astype(np.float64),
                           c.t("hook_scores")[i], c.t("hook_mask")[i], c.t("hook_pattern")[i], j)
    nums.update(query_token=c.q_tokens[i], key_token=c.k_tokens[j], query=i, key=j)
    return nums


def caption(model: str, text: str, sel: Selection, stage_id: str, lang: str = "en", *, edits: str = "",
            compare: str = "") -> str:
    """"model · sentence · block · layer · head · stage" as plain text (escape it before putting it
    in a figure: style.esc); a what-if figure adds its ``edits``, a comparison its second sentence
    (``compare``; both from ``second_run``)."""
    L = i18n.fig_labels(lang)
    title = stage_title(stage_id, lang) if stage_id in REGISTRY else stage_id
    block = i18n.t(f"blocks.{sel.block}", lang) if sel.block in BLOCKS else sel.block
    extra = (f" · {i18n.t('whatif.caption_edits', lang, edits=edits)}" if edits else "") + (
        f" · {i18n.t('compare.caption', lang, text=style.plain_text(compare, 48))}" if compare else "")
    return (f"{model} · {L['sentence']} {sel.sentence} “{style.plain_text(text, 48)}” · {block} · "
            f"{L['layer']} {sel.layer} · {L['head']} {sel.head} · {title}{extra}")
