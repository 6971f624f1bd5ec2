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

Words come from the model: a record's ``formula`` may be a function of the stage's context (the
model's description, the block, the values drawn); ``variant`` chooses which explanation (and,
where the catalogue has one, which title) the model gets: ``stage.{id}.explain.{variant}``;
``fill`` gives their placeholders; ``shape`` names the tensors the stage draws with their real,
named dimensions. ``stage_words(...)`` returns all of them for one selection, as the app shows them.

``cache`` may be a ``RunData`` (what the app caches; ``run_data`` includes the weights) or a
``model.Cache``. The stages "weights" and "out" need the projection weights: they come from
``weights=`` (a mapping from ``weights_of(m)`` or the model itself) or from ``run.weights``;
without them those two stages return a figure that says so, and no table.

Out-of-range selections are clipped (never an exception); unknown stage ids raise ValueError.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer import i18n
from explorer.inputs import clip
from model.runtime.base import ModelInfo

from . import attention as av
from . import decoding as dv
from . import positional as pv
from . import pretrained as pt
from . import qknorm as qv
from . import style
from . import tokens as tv
from . import block as bv
from . import tutorial002 as tut
from . import whatif as wv
from .data import (BLOCKS, RunData, as_run, axis_tokens, blocks_for, from_cache, head_weights, kv_groups,
                   kv_head_of, layers_for, padded, prefix, run_data, stack_of, stack_tokens, weights_of)

__all__ = ["Selection", "Stage", "REGISTRY", "STAGE_IDS", "STAGES", "SECTIONS", "BLOCKS", "blocks_for",
           "layers_for", "stage_figure", "stage_title", "stage_note", "caption", "clip_selection", "run_data",
           "from_cache", "weights_of", "RunData", "applies", "kv_head_note", "cell_numbers", "overview_layers",
           "second_run", "ready", "url_keys", "attachments", "head_entropies", "stage_words", "shape_text", "Shape"]


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
# one tensor a stage draws: (what it is, the hook it comes from or "", ((dimension, size), ...))
Shape = tuple[str, str, tuple[tuple[str, int], ...]]


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
    formula: str | Callable[["_Ctx"], str]
    applies: Callable[[dict], bool] = _always
    blocks: tuple[str, ...] | None = None
    per_head: bool = True
    per_cell: bool = False
    controls: str | None = None
    note: Callable[["_Ctx"], str | None] | None = None
    needs: str | None = None
    click: str | None = None
    # what the stage reads beside the plain run, each made once and attached to it by whoever draws
    # it (the page's caches, the exporter: ATTACHMENTS): "trace" (a decoding trace), "lens" (the
    # logit lens of the sentence), "induction" (induction scores), "patches" (a patching result),
    # "effects" (every head of the block ablated in turn: model/analysis/ablation.py);
    # ``url``: the URL parameters the page keeps while the stage is on screen
    uses: tuple[str, ...] = ()
    url: tuple[str, ...] = ()
    # words that follow the model: ``variant(ctx)`` is one of ``variants`` (each has the catalogue key
    # stage.{id}.explain.{v}, and a title of its own where stage.{id}.title.{v} exists); ``fill(ctx)``
    # the placeholders; ``shape(ctx)`` the tensors drawn (Shape); ``on_demand``: the app draws it only
    # when its controls ask for it (e.g. a preset)
    variant: Callable[["_Ctx"], str] | None = None
    variants: tuple[str, ...] = ()
    fill: Callable[["_Ctx"], dict] | None = None
    shape: Callable[["_Ctx"], list] | None = None
    on_demand: bool = False

    def _variant(self, ctx: "_Ctx | None") -> str | None:
        if not self.variants:
            return None
        v = self.variant(ctx) if (ctx is not None and self.variant is not None) else self.variants[0]
        if v not in self.variants:
            raise ValueError(f"stage {self.id!r}: variant {v!r} is not one of {self.variants}")
        return v

    def title(self, lang: str = "en", ctx: "_Ctx | None" = None) -> str:
        v = self._variant(ctx)
        key = f"stage.{self.id}.title.{v}"
        return i18n.t(key if v and key in i18n.WORDS else f"stage.{self.id}.title", lang)

    def _explain_key(self, v: str | None) -> str:
        """stage.{id}.explain.{v}, or stage.{id}.explain for a variant with no words of its own."""
        key = f"stage.{self.id}.explain" + (f".{v}" if v else "")
        return key if key in i18n.WORDS or not v else f"stage.{self.id}.explain"

    def explain(self, lang: str = "en", ctx: "_Ctx | None" = None) -> str:
        v = self._variant(ctx)
        text = i18n.t(self._explain_key(v), lang)
        if ctx is not None and self.fill is not None:
            text = text.format(**self.fill(ctx))
        return text

    def formula_for(self, ctx: "_Ctx | None" = None) -> str:
        if callable(self.formula):
            return self.formula(ctx) if ctx is not None else ""
        return self.formula

    def keys(self) -> list[str]:
        """Every catalogue key this record can show."""
        keys = [f"stage.{self.id}.title"]
        keys += [f"stage.{self.id}.title.{v}" for v in self.variants if f"stage.{self.id}.title.{v}" in i18n.WORDS]
        keys += list(dict.fromkeys(self._explain_key(v) for v in self.variants)) or [f"stage.{self.id}.explain"]
        return keys


REGISTRY: dict[str, Stage] = {}
ATTACHMENTS = ("trace", "lens", "induction", "patches", "effects")  # Stage.uses, in the order they are made


def stage(stage_id: str, *, section: str, formula: str | Callable, **record) -> Callable[[Builder], Builder]:
    """Register the decorated builder as stage ``stage_id`` (see ``Stage`` for ``record``)."""

    def register(build: Builder) -> Builder:
        if stage_id in REGISTRY:
            raise ValueError(f"stage {stage_id!r} is registered twice")
        if not set(record.get("uses", ())) <= set(ATTACHMENTS):
            raise ValueError(f"stage {stage_id!r} uses {record['uses']}: not among {ATTACHMENTS}")
        REGISTRY[stage_id] = Stage(stage_id, section, build, formula, **record)
        return build

    return register


def _info(info) -> dict:
    if isinstance(info, Mapping):
        return dict(info)
    if isinstance(info, ModelInfo):  # frozen: its dict made once (dataclasses.asdict is slow)
        return dict(_info_of(info))
    return info.as_dict() if hasattr(info, "as_dict") else dict(vars(info))


@functools.lru_cache(maxsize=64)
def _info_of(info: ModelInfo) -> dict:
    return info.as_dict()


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

    def __init__(self, run: RunData, info: dict, sel: Selection, lang: str, weights, opts: dict | None = None) -> None:
        self.run, self.info, self.sel, self.lang = run, info, sel, lang
        self.opts = dict(opts or {})  # the stage's options (positional-encoding controls, ...)
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


# --- words from the model: formulas, variants, shapes ---------------------------------------------

def _num(x: float, digits: int = 2) -> str:
    x = float(x)
    return f"{x:g}" if x.is_integer() else f"{x:.{digits}f}"


def _dims(c: _Ctx, what: str, name: str, labels: Sequence[str]) -> Shape:
    """A hooked tensor with named dimensions (a name starting with "hook_" is the block's own)."""
    full = f"{c.p}.{name}" if name.startswith("hook_") else name
    return what, full, tuple(zip(labels, (int(n) for n in c.run[full].shape)))


def _block_hook(c: _Ctx, name: str) -> str:
    """A hook of the selected layer's block (not of its attention): ``{stack}.blocks.{i}.{name}``."""
    return f"{c.stack}.blocks.{c.sel.layer}.{name}"


def _kv_pos(c: _Ctx) -> str:
    """The keys' positions: the source's (encoder's) in cross-attention, else the same positions."""
    return "source" if c.sel.block.endswith("cross_attn") else "positions"


def _qkv_shapes(c: _Ctx) -> list:
    kv = _kv_pos(c)
    return [_dims(c, "Q", "hook_q", ("batch", "heads", "positions", "d_k")),
            _dims(c, "K", "hook_k", ("batch", "heads", kv, "d_k")),
            _dims(c, "V", "hook_v", ("batch", "heads", kv, "d_k"))]


def _square(what: str, name: str, mask: bool = False):
    return lambda c: [_dims(c, what, name, ("batch", "one" if mask else "heads", "queries", "keys"))]


def shape_text(shapes: Sequence[Shape], lang: str = "en") -> str:
    """"Q: batch 2 × heads 4 × positions 12 × d_k 32; ..." in ``lang``."""
    def dim(label: str, n: int) -> str:
        return str(n) if label == "one" else f"{i18n.t('dim.' + label, lang)} {n}"

    def name(what: str) -> str:
        return i18n.t(what, lang) if what.startswith("tensor.") else what

    return "; ".join(f"{name(w)}: {' × '.join(dim(lab, n) for lab, n in dims)}" for w, _, dims in shapes)


def _tx(c: _Ctx, key: str) -> str:
    """A word inside a formula, in the page's language: \text{...} of the catalogue's "tx.{key}"."""
    return r"\text{" + c.words(f"tx.{key}") + "}"


def _bias(on: bool, b: str) -> str:
    return f" + {b}" if on else ""


# --- what a family does (issue 24): norm kind and placement, positions, window, scale -------------
# ModelInfo.norm is "{placement}-{norm}": "post-LayerNorm", "pre-LayerNorm", "pre-RMSNorm",
# "sandwich-RMSNorm(1+w)" (Gemma from a GGUF file: "sandwich-RMSNorm", the file stores 1 + w itself);
# a combination the words do not know gets a variant that says so.
POSITIONAL_KEYS = {"sinusoidal": "positional.sinusoidal", "learned": "positional.learned",
                   "rotary": "positional.rotary", "relative": "positional.relative"}


def _placement(info: dict) -> str:
    """"post" | "pre" | "sandwich" (or what the model says) from ModelInfo.norm."""
    return str(info.get("norm") or "post-LayerNorm").split("-", 1)[0]


def _norm_name(info: dict) -> str:
    """"LayerNorm" | "RMSNorm" | "RMSNorm(1+w)" (Gemma: x / rms(x) · (1 + w))."""
    return str(info.get("norm") or "post-LayerNorm").split("-", 1)[-1]


def _norm_tex(info: dict) -> str:
    name = _norm_name(info)
    return r"\mathrm{RMSNorm}_{1+w}" if name == "RMSNorm(1+w)" else r"\mathrm{" + name.replace("(", "").replace(")", "") + "}"


def _norm_sub_tex(info: dict, sub: str) -> str:
    """The norm of q (of k): RMSNorm_q, and Gemma's RMSNorm_{1+w,\\,q} (a second subscript is a KaTeX error)."""
    tex = _norm_tex(info)
    return tex[:-1] + rf",\,{sub}}}" if tex.endswith("}") and "_{" in tex else f"{tex}_{sub}"


def _layer_norm(info: dict) -> bool:
    """The norm subtracts the mean (LayerNorm: μ and σ) rather than dividing by the rms alone."""
    return _norm_name(info) == "LayerNorm"


def _family_label(info: dict) -> str:
    """The model as the words name it: its own name (smollm2, seed, a folder's name)."""
    return str(info.get("name") or info.get("family") or "")


def _scale_of(info: dict) -> float:
    """What the scores are multiplied by: info.attn_scale, else 1/√d_head."""
    return float(info.get("attn_scale") or 0.0) or 1.0 / float(np.sqrt(int(info["d_head"])))


def _scale_kind(info: dict) -> str:
    """"sqrt" (1/√d_k), "none" (T5: 1) or "custom" (another scale from the configuration)."""
    s, d = float(info.get("attn_scale") or 0.0), int(info["d_head"])
    if not s or abs(s - 1.0 / np.sqrt(d)) < 1e-9 * max(1.0, s):
        return "sqrt"
    return "none" if s == 1.0 else "custom"


def _scaled_tex(c: "_Ctx", dot: str) -> str:
    """``dot`` (a q·k term) as the model scales it, with T5's bias and a softcap where there are."""
    kind = _scale_kind(c.info)
    out = {"sqrt": r"\frac{" + dot + r"}{\sqrt{d_k}}", "none": dot,
           "custom": rf"{_num(_scale_of(c.info), 4)}\, {dot}"}[kind]
    cap = float(c.info.get("attn_softcap") or 0.0)
    if cap:
        out = rf"{_num(cap)}\tanh\!\big(({out}) / {_num(cap)}\big)"
    if c.info.get("positional") == "relative" and c.sel.block.endswith("self_attn"):
        out += r" + B_{ij}"
    return out


def _windowed_layers(info: dict) -> tuple[int, ...]:
    if info.get("kind") != "decoder" or not int(info.get("sliding_window") or 0):
        return ()
    return tuple(info.get("window_layers") or ())


def _model_window(c: "_Ctx") -> int:
    """The model's sliding window (keys) in the selected block and layer, 0: none there."""
    if c.sel.block != "decoder.self_attn" or c.sel.layer not in _windowed_layers(c.info):
        return 0
    return int(c.info["sliding_window"])


def _layer_base(c: "_Ctx") -> float:
    """The rotary base of the selected layer: Gemma's local layers have a base of their own."""
    local = c.info.get("positional_base_local")
    return float(local) if local and _model_window(c) else c.base


def _rope_scaling(c: "_Ctx") -> tuple:
    """The selected layer's rope scaling (ModelInfo.rope_scaling or, on a local layer, rope_scaling_local)."""
    local = c.info.get("positional_base_local") and _model_window(c)
    return tuple(c.info.get("rope_scaling_local" if local else "rope_scaling") or ())


def _rope_theta(c: "_Ctx") -> np.ndarray:
    """The selected layer's rotary frequencies as the model computes them: base, rotated dimensions
    and the rope's scaling (model/arch/parts.py rope_frequencies)."""
    from model.arch.family import Rope
    from model.arch.parts import rope_frequencies

    sc = _rope_scaling(c)
    rope = Rope(base=_layer_base(c)) if not sc else Rope(
        base=_layer_base(c), scaling=sc[0], factor=float(sc[1]), low_freq_factor=float(sc[2]),
        high_freq_factor=float(sc[3]), original_max_len=int(sc[4]))
    return rope_frequencies(rope, _rot_dims(c)).numpy()


def _rot_dims(c: "_Ctx") -> int:
    """The rotated dimensions of each head (partial rotary: fewer than d_head)."""
    return int(c.info.get("rotary_dims") or 0) or c.d_head


def _base_text(x: float) -> str:
    """A rotary base as people write it: 10,000 and 1,000,000, not 1e+06."""
    return f"{int(x):,}" if float(x).is_integer() else _num(x)


def _layer_list(layers) -> str:
    return ", ".join(str(i) for i in layers) or "—"


# --- tokens and positions ---------------------------------------------------------------------

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "<|endoftext|>",
                  "<|im_start|>", "<|im_end|>")


def _teacher_forced(c: _Ctx) -> bool:
    """The selected block reads the seed decoder's input: <s> + what the model wrote, shifted right."""
    return c.run.kind == "encoder-decoder" and c.sel.block == "decoder.self_attn"


def _token_tex(tok: str) -> str:
    """A token as a formula writes it: <s> as \\langle s\\rangle, <pad> as \\langle \\mathrm{pad}\\rangle, a word as text."""
    m = re.fullmatch(r"<(/?)([A-Za-z]+)>", tok)
    if m:
        name = m.group(2) if len(m.group(2)) == 1 else r"\mathrm{" + m.group(2) + "}"
        return r"\langle " + m.group(1) + name + r"\rangle"
    return r"\text{" + "".join("\\" + ch if ch in "#$%&_{}" else ch for ch in tok if ch not in "\\^~") + "}"


def _tokens_formula(c: _Ctx) -> str:
    if _teacher_forced(c):  # the decoder's own first token: the seed's <s>, T5's and Marian's <pad>
        return (_tx(c, "decoder_input") + r" = (" + _token_tex(_decoder_start(c)) + r", y_1, \dots, y_{T-1}) "
                r"\;\rightarrow\; " + _tx(c, "predicts") + r"\ (y_1, \dots, y_{T-1}, \langle /s\rangle)")
    return _tx(c, "text") + r" \rightarrow (t_0, t_1, \dots, t_{T-1}),\quad t_i \in \{0,\dots,|V|-1\},\ |V| = " + \
        f"{int(c.info['vocab_size']):,}".replace(",", "{,}")


def _tokens_shape(c: _Ctx) -> list:
    stack = "encoder" if c.sel.block.endswith("cross_attn") else c.stack
    b, t = c.run[f"{stack}.hook_embed"].shape[:2]
    return [("tensor.ids", "", (("batch", int(b)), ("positions", int(t))))]


@stage("tokens", section="tokens", per_head=False, formula=_tokens_formula, shape=_tokens_shape,
       variants=("text", "decoder"), variant=lambda c: "decoder" if _teacher_forced(c) else "text",
       fill=lambda c: {"V": f"{int(c.info['vocab_size']):,}", "start": _decoder_start(c)})
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


def _embedding_variant(c: _Ctx) -> str:
    scaled = float(c.info.get("embed_scale") or 1.0) != 1.0
    pos = c.info.get("positional")
    if pos == "rotary":
        return "rotary_scaled" if scaled else "rotary"
    if pos == "relative":
        return "unknown" if scaled or c.info.get("embed_norm") else "relative"
    if pos not in ("sinusoidal", "learned"):
        return "unknown"
    if c.info.get("embed_norm"):
        if scaled:
            return "unknown"
        # BERT's sum (token type 0, positions from row 0) has words of its own; other learned tables say theirs
        return "learned" if c.info.get("token_types") and not c.info.get("pos_offset") else "learned_family"
    return "scaled" if scaled else "unscaled"


def _type_embedding(info: dict) -> bool:
    """A token-type embedding (type 0) is added (BERT, RoBERTa; DistilBERT has none)."""
    return bool(info.get("token_types"))


def _embedding_words(c: _Ctx) -> dict:
    parts = c.words("embedding.parts_type" if _type_embedding(c.info) else "embedding.parts_no_type")
    if c.info.get("pos_offset"):
        parts += c.words("embedding.position_offset", offset=int(c.info["pos_offset"]))
    return {"family": _family_label(c.info), "parts": parts, "pos": c.info.get("positional"),
            "norm": str(c.info.get("embed_norm"))}


def _embedding_formula(c: _Ctx) -> str:
    v, d = _embedding_variant(c), int(c.info["d_model"])
    if v == "rotary":
        return r"x_i = E[t_i] \qquad (" + _tx(c, "rotated") + ")"
    if v == "rotary_scaled":
        return (rf"x_i = E[t_i]\,\sqrt{{d_{{model}}}},\qquad \sqrt{{{d}}} = {float(c.info['embed_scale']):.2f}"
                r"\qquad (" + _tx(c, "rotated") + ")")
    if v == "relative":
        return r"x_i = E[t_i] \qquad (" + _tx(c, "relative_bias") + ")"
    if v == "unknown":
        return r"x_i = E[t_i] \cdots"
    if v == "learned_family":
        typ = r" + E_{type}[0]" if _type_embedding(c.info) else ""
        row = rf"P[i + {int(c.info['pos_offset'])}]" if c.info.get("pos_offset") else "P[i]"
        return r"x_i = \mathrm{LayerNorm}\big(E[t_i]" + typ + " + " + row + r"\big)"
    if v == "learned":
        return r"x_i = \mathrm{LayerNorm}\big(E[t_i] + E_{type}[0] + P[i]\big)"
    if v == "scaled":
        return rf"x_i = E[t_i]\,\sqrt{{d_{{model}}}} + PE_i,\qquad \sqrt{{{d}}} = {c.info['embed_scale']:.2f}"
    return r"x_i = E[t_i] + PE_i"


def _rms(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(np.sqrt((x ** 2).mean())) if x.size else 0.0


def _embedding_fill(c: _Ctx) -> dict:
    n = len(stack_tokens(c.run, c.stack, c.sel.sentence))
    emb = c.run[f"{c.stack}.hook_embed"][c.sel.sentence][:n]
    pe = _pe(c)
    return {"d": int(c.info["d_model"]), "scale": f"{float(c.info.get('embed_scale') or 1):.2f}",
            "rms_e": f"{_rms(emb):.2f}", "rms_pe": f"{_rms(pe[:n]) if pe is not None else 0:.2f}",
            "rms_raw": f"{_rms(emb) / float(c.info.get('embed_scale') or 1):.3f}", **_embedding_words(c)}


def _embedding_shape(c: _Ctx) -> list:
    v = _embedding_variant(c)
    name = {"scaled": "E[t]·√d_model", "rotary_scaled": "E[t]·√d_model", "learned": "E[t] + E_type[0]",
            "learned_family": "E[t] + E_type[0]" if _type_embedding(c.info) else "E[t]"}.get(v, "E[t]")
    out = [_dims(c, name, f"{c.stack}.hook_embed", ("batch", "positions", "d_model"))]
    if f"{c.stack}.hook_pos_embed" in c.run:
        out.append(_dims(c, "P" if v.startswith("learned") else "PE", f"{c.stack}.hook_pos_embed",
                         ("one", "positions", "d_model")))
    x0 = f"{c.stack}.blocks.0.hook_resid_pre"
    if x0 in c.run:
        out.append(_dims(c, "tensor.block0_input", x0, ("batch", "positions", "d_model")))
    return out


@stage("embedding", section="position", per_head=False, formula=_embedding_formula, shape=_embedding_shape,
       variants=("scaled", "learned", "rotary", "unscaled", "rotary_scaled", "relative", "learned_family", "unknown"),
       variant=_embedding_variant, fill=_embedding_fill)
def _embedding(c: _Ctx, title: str, opts: dict):
    emb = c.run[f"{c.stack}.hook_embed"][c.sel.sentence]
    pe = _pe(c)
    names = None
    if _embedding_variant(c) in ("learned", "learned_family") and pe is not None:
        names = (c.L["embedding_type"], c.L["pos_learned"], c.L["sum_norm"])
    elif pe is None:
        names = (c.L["embedding_only"],)
    return pv.embedding_sum(emb, pe, c.q_tokens[: emb.shape[0]], title=title, labels=c.L, names=names)


def _sinusoidal_note(c: _Ctx) -> str | None:
    if c.info.get("positional") != "sinusoidal":
        return None
    return c.words("pe_model_note", n=f"{c.base:g}", d=c.info["d_model"])


SINUSOIDAL = r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{n^{2i/d_{model}}}\right),\quad PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{n^{2i/d_{model}}}\right)"


SINUSOIDAL_SPLIT = (r"PE_{(pos,\,i)} = \sin\!\left(\frac{pos}{n^{2i/d_{model}}}\right),\quad "
                    r"PE_{(pos,\,d_{model}/2 + i)} = \cos\!\left(\frac{pos}{n^{2i/d_{model}}}\right),\quad i < d_{model}/2")


def _pe_heatmap_variant(c: _Ctx) -> str:
    if _learned(c.info):
        return "learned_offset" if c.info.get("pos_offset") else "learned"
    return "sinusoidal_split" if c.info.get("sinusoidal_split") else "sinusoidal"


def _pe_heatmap_formula(c: _Ctx) -> str:
    v = _pe_heatmap_variant(c)
    if v.startswith("learned"):
        row = "pos + p + 1" if v == "learned_offset" else "pos"
        return (rf"P_{{pos}} = W_P[{row}] \in \mathbb{{R}}^{{d_{{model}}}},\quad pos = 0,\dots," + str(int(c.info["max_len"]) - 1)
                + r"\quad(" + _tx(c, "trained") + ")")
    table = SINUSOIDAL_SPLIT if v == "sinusoidal_split" else SINUSOIDAL
    return table + rf",\qquad n = {_num(c.base)},\ d_{{model}} = {int(c.info['d_model'])}"


@stage("pe_heatmap", section="position", per_head=False,
       applies=lambda i: i.get("positional") in ("sinusoidal", "learned"),
       note=_sinusoidal_note, formula=_pe_heatmap_formula,
       variants=("sinusoidal", "learned", "sinusoidal_split", "learned_offset"), variant=_pe_heatmap_variant,
       fill=lambda c: {"n": _num(c.base), "d": int(c.info["d_model"]), "rows": int(c.info["max_len"]),
                       "T": 0 if _pe(c) is None else int(_pe(c).shape[0])},
       shape=lambda c: [_dims(c, "PE", f"{c.stack}.hook_pos_embed", ("one", "positions", "d_model"))]
       if f"{c.stack}.hook_pos_embed" in c.run else [])
def _pe_heatmap(c: _Ctx, title: str, opts: dict):
    pe = _pe(c)
    if pe is None:
        return _not_for(c, title, "needs.pe_table")
    return pv.pe_heatmap(pe, c.q_tokens[: pe.shape[0]], title=title, labels=c.L)


def _learned_note(c: _Ctx) -> str | None:
    pe = _pe(c)
    return None if pe is None else c.words("pe_learned_note", n=pe.shape[0])


@stage("pe_learned_sim", section="position", per_head=False, applies=_learned, note=_learned_note,
       shape=lambda c: [_dims(c, "P", f"{c.stack}.hook_pos_embed", ("one", "positions", "d_model"))]
       if f"{c.stack}.hook_pos_embed" in c.run else [],
       formula=r"\cos(P_m, P_n) = \frac{P_m \cdot P_n}{\lVert P_m\rVert\,\lVert P_n\rVert}")
def _pe_learned_sim(c: _Ctx, title: str, opts: dict):
    pe = _pe(c)
    if pe is None or not _learned(c.info):
        return _not_for(c, title, "needs.learned")
    return pt.learned_similarity(pe, c.q_tokens[: pe.shape[0]], title=title, labels=c.L)


def _rope_formula(c: _Ctx) -> str:
    r, d = _rot_dims(c), c.d_head
    dims = r"d_{head}" if r == d else r"d_{rot}"
    f = (r"\theta_i = " + _tx(c, "base") + rf"^{{-2i/{dims}}},\quad (q_i, q_{{i+{dims}/2}}) \mapsto R(\theta_i\, pos)\,"
         rf"(q_i, q_{{i+{dims}/2}})")
    f += rf",\qquad {_tx(c, 'base')} = " + _base_text(_layer_base(c)).replace(",", "{,}")
    return f + (rf",\ d_{{rot}} = {r} < d_{{head}} = {d}" if r != d else "")


def _rope_layer_words(c: _Ctx) -> list[str]:
    """The layer's own base (models whose local layers have another) and partial rotary, as sentences."""
    out = []
    local, layers = c.info.get("positional_base_local"), _windowed_layers(c.info)
    if local and layers and float(local) != c.base:
        n_layers = int(c.info["n_layers"])
        others = [i for i in range(n_layers) if i not in layers]
        mine = _model_window(c) > 0
        out.append(c.words("rope.layer_base", layer=c.sel.layer,
                           kind=c.words("rope.local" if mine else "rope.global"), n=_base_text(_layer_base(c)),
                           other=c.words("rope.global" if mine else "rope.local"),
                           layers=_layer_list(others if mine else layers), m=_base_text(c.base if mine else float(local))))
    r = _rot_dims(c)
    if r != c.d_head:
        out.append(c.words("rope.partial", r=r, d=c.d_head, rest=c.d_head - r))
    sc = _rope_scaling(c)
    if sc:
        out.append(c.words("rope.scaled", kind=sc[0], factor=f"{float(sc[1]):g}"))
    return out


@stage("rope_freqs", section="position", applies=_rotary_model, formula=_rope_formula,
       note=lambda c: " ".join(_rope_layer_words(c)) or None,
       shape=lambda c: [("θ", "", (("pairs", _rot_dims(c) // 2),))])
def _rope_freqs(c: _Ctx, title: str, opts: dict):
    if not _rotary_model(c.info):
        return _not_for(c, title, "needs.rotary")
    base, r = _layer_base(c), _rot_dims(c)
    dims = f"d_head {c.d_head}" if r == c.d_head else f"d_rot {r} / d_head {c.d_head}"
    return pt.rotary_frequencies_figure(r, base, title=f"{title} ({c.L['base']} {base:g}, {dims})", labels=c.L,
                                        theta=_rope_theta(c))


def _rotary_note(c: _Ctx) -> str | None:
    return " ".join([c.words("pe_rotary_note", n=_base_text(_layer_base(c)), d=c.d_head)] + _rope_layer_words(c))


@stage("rope_distance", section="position", applies=_rotary_model, note=_rotary_note,
       shape=lambda c: [("q, k", "", (("d_k", int(c.d_head)),))],
       formula=r"(R_m q)\cdot(R_n k) = q^\top R_{n-m}\, k")
def _rope_distance(c: _Ctx, title: str, opts: dict):
    if not _rotary_model(c.info):
        return _not_for(c, title, "needs.rotary")
    return pv.rotary_figure(_rot_dims(c), _layer_base(c), max(64, len(c.q_tokens)), title=title, labels=c.L,
                            theta=_rope_theta(c))


def _relative(info: dict) -> bool:
    return info.get("positional") == "relative"


def _position_bias(c: _Ctx) -> np.ndarray | None:
    """(Tq, Tk) the selected head's relative position bias B (T5), the same for every sentence."""
    name = f"{c.p}.hook_position_bias"
    if name not in c.run:
        return None
    return c.run[name][0, c.sel.head]


def _position_bias_fill(c: _Ctx) -> dict:
    b = _position_bias(c)
    if b is None or not b.size:
        return {"lo": "—", "hi": "—", "near": "—"}
    n = min(c.n_q, c.n_k)
    diag = np.diagonal(b[:n, :n])
    return {"lo": f"{float(b.min()):.2f}", "hi": f"{float(b.max()):.2f}", "near": f"{float(diag.mean()):.2f}"}


@stage("position_bias", section="position", applies=_relative, blocks=("encoder.self_attn", "decoder.self_attn"),
       fill=_position_bias_fill, variants=("encoder", "decoder"),
       variant=lambda c: "decoder" if c.causal else "encoder",
       formula=r"\hat S_{ij} = 	ilde S_{ij} + B_hig[\mathrm{bucket}(j - i)ig]",
       shape=lambda c: [_dims(c, "B", "hook_position_bias", ("one", "heads", "queries", "keys"))]
       if f"{c.p}.hook_position_bias" in c.run else [])
def _position_bias_stage(c: _Ctx, title: str, opts: dict):
    b = _position_bias(c)
    if b is None:
        return _not_for(c, title, "needs.relative_bias")
    return av.scores_figure(b, c.q_tokens, c.k_tokens, title=title, labels=c.L, value_name="B")


def _pe_params(c: _Ctx, opts: dict) -> tuple[int, int, float, list[str] | None]:
    n_tok = len(c.q_tokens)
    n = int(opts.get("pe_positions") or n_tok)
    d = int(opts.get("pe_d_model") or c.info["d_model"])
    base = float(opts.get("pe_base") or c.base)
    toks = c.q_tokens if n == n_tok else None
    return n, d, base, toks


def _drawn(c: _Ctx) -> str:
    _, d, base, _ = _pe_params(c, c.opts)
    return rf",\qquad n = {_num(base)},\ d_{{model}} = {d}"


def _pe_drawn_fill(c: _Ctx) -> dict:
    n, d, base, _ = _pe_params(c, c.opts)
    return {"n": _num(base), "d": d, "positions": n, "last": n - 1,
            "kind": c.words(POSITIONAL_KEYS.get(str(c.info.get("positional")), "positional.unknown"))}


def _pe_shape(c: _Ctx) -> list:
    n, d, _, _ = _pe_params(c, c.opts)
    return [("PE", "", (("positions", n), ("d_model", d)))]


@stage("pe_curves", section="position", per_head=False, controls="pe", shape=_pe_shape, fill=_pe_drawn_fill,
       variants=("sinusoidal", "reference"),
       variant=lambda c: "sinusoidal" if c.info.get("positional") == "sinusoidal" else "reference",
       formula=lambda c: r"\omega_i = \frac{1}{n^{2i/d_{model}}},\qquad PE_{pos} = \big(\sin(\omega_0 pos), \cos(\omega_0 pos), \sin(\omega_1 pos), \dots\big)" + _drawn(c))
def _pe_curves(c: _Ctx, title: str, opts: dict):
    n, d, base, toks = _pe_params(c, opts)
    if c.info.get("positional") != "sinusoidal" and not opts:
        title = f"{title} ({c.words('fig.sinusoidal_reference')})"
    return pv.pe_curves(n, d, base, opts.get("pe_dims"), toks, title=title, labels=c.L)


def _similarity_of_learned(c: _Ctx) -> bool:
    """pe_similarity draws the model's own learned table (no controls given), not a sinusoidal one."""
    opts = c.opts
    return _learned(c.info) and _pe(c) is not None and not (
        opts.get("pe_base") or opts.get("pe_d_model") or opts.get("pe_positions"))


def _similarity_shape(c: _Ctx) -> list:
    if _similarity_of_learned(c) or (_pe(c) is not None and not c.opts):
        T = int(_pe(c).shape[0])
        return [("PE·PEᵀ", "", (("positions", T), ("positions", T)))]
    n, _, _, _ = _pe_params(c, c.opts)
    return [("PE·PEᵀ", "", (("positions", n), ("positions", n)))]


@stage("pe_similarity", section="position", per_head=False, controls="pe", shape=_similarity_shape,
       variants=("sinusoidal", "learned"), variant=lambda c: "learned" if _similarity_of_learned(c) else "sinusoidal",
       fill=_pe_drawn_fill,
       formula=lambda c: r"P_m \cdot P_n = \sum_d P_{m,d}\,P_{n,d}" if _similarity_of_learned(c)
       else r"PE_m \cdot PE_n = \sum_i \cos\big(\omega_i (m-n)\big)" + _drawn(c))
def _pe_similarity(c: _Ctx, title: str, opts: dict):
    if opts.get("pe_base") or opts.get("pe_d_model") or opts.get("pe_positions") or _pe(c) is None:
        n, d, base, toks = _pe_params(c, opts)  # no table of the model's own (rotary): the paper's, for reference
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


def _bases_drawn(c: _Ctx) -> tuple[float, ...]:
    return tuple(float(b) for b in (c.opts.get("pe_bases") or compare_bases(c.info)))


@stage("pe_compare", section="position", per_head=False, controls="pe",
       fill=lambda c: {"a": _num(_bases_drawn(c)[0]), "b": _num(_bases_drawn(c)[-1]), "d": _pe_params(c, c.opts)[1]},
       shape=lambda c: [("PE", "", (("positions", _pe_params(c, c.opts)[0]), ("d_model", _pe_params(c, c.opts)[1])))],
       formula=lambda c: r"\omega_i = n^{-2i/d_{model}}\ \ (\omega_0 = 1,\ " + _tx(c, "every_n") + r"),\qquad n \in \{"
       + ", ".join(_num(b) for b in _bases_drawn(c)) + rf"\}},\ d_{{model}} = {_pe_params(c, c.opts)[1]}")
def _pe_compare(c: _Ctx, title: str, opts: dict):
    n, d, _, toks = _pe_params(c, opts)
    bases = tuple(float(b) for b in (opts.get("pe_bases") or compare_bases(c.info)))
    title = c.words("fig.pe_compare_title", bases=" · ".join(f"n = {b:g}" for b in bases))
    return pv.pe_compare(n, d, bases, toks, title=title, labels=c.L)


# --- Q, K, V ------------------------------------------------------------------------------------

def _grouped(info: dict) -> bool:
    return int(info.get("n_kv_heads") or info["n_heads"]) < int(info["n_heads"])


@stage("gqa", section="qkv", applies=_grouped, variants=("grouped", "mqa"),
       variant=lambda c: "mqa" if int(c.info.get("n_kv_heads") or 0) == 1 else "grouped",
       fill=lambda c: {"h": int(c.info["n_heads"]), "kv": int(c.info["n_kv_heads"]),
                       "g": int(c.info["n_heads"]) // int(c.info["n_kv_heads"])},
       note=lambda c: kv_head_note(c.info, c.sel.head, c.lang),
       shape=lambda c: [("W_K, W_V", "", (("d_model", int(c.info["d_model"])),
                                          ("kv_heads", int(c.info["n_kv_heads"])), ("d_k", int(c.d_head)))),
                        _dims(c, "K, V", "hook_k", ("batch", "heads", _kv_pos(c), "d_k"))],
       formula=r"g(h) = \left\lfloor \frac{h}{n_{heads} / n_{kv}} \right\rfloor,\qquad K^{(h)} = X W_K^{(g(h))},\ V^{(h)} = X W_V^{(g(h))}")
def _gqa(c: _Ctx, title: str, opts: dict):
    n = int(c.info["n_heads"])
    return pt.gqa_figure(n, int(c.info.get("n_kv_heads") or n), c.sel.head, title=title, labels=c.L)


def _weights_formula(c: _Ctx) -> str:
    d, k = int(c.info["d_model"]), c.d_head
    f = rf"W_Q^{{(h)}},\ W_K^{{(h)}},\ W_V^{{(h)}} \in \mathbb{{R}}^{{d_{{model}} \times d_k}} = \mathbb{{R}}^{{{d} \times {k}}}"
    if c.info.get("qkv_bias", True):
        return f + rf",\qquad b_Q^{{(h)}},\ b_K^{{(h)}},\ b_V^{{(h)}} \in \mathbb{{R}}^{{{k}}}"
    return f + r"\qquad(" + _tx(c, "no_bias") + ")"


def _weights_shape(c: _Ctx) -> list:
    w = c.weights
    out = []
    for m in ("Q", "K", "V"):
        if w is not None and f"{c.p}.W_{m}" in w:
            rows, cols = w[f"{c.p}.W_{m}"].shape  # torch layout (out, in): the matrix is x · Wᵀ
            out.append((f"W_{m}", f"weight:{c.p}.W_{m}", (("d_model", int(cols)), ("heads·d_k", int(rows)))))
            if f"{c.p}.b_{m}" in w:
                out.append((f"b_{m}", f"weight:{c.p}.b_{m}", (("heads·d_k", int(w[f"{c.p}.b_{m}"].shape[0])),)))
    return out


@stage("weights", section="qkv", formula=_weights_formula, shape=_weights_shape, variants=("bias", "no_bias"),
       variant=lambda c: "bias" if c.info.get("qkv_bias", True) else "no_bias",
       fill=lambda c: {"d": int(c.info["d_model"]), "k": c.d_head})
def _weights(c: _Ctx, title: str, opts: dict):
    w = c.weights
    if w is None or f"{c.p}.W_Q" not in w:
        return _notice(c.words("no_weights_here"), title), None
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    names = ("W_Q[h]", f"W_K[{hw['kv_head']}]" if hw["kv_head"] != c.sel.head else "W_K[h]",
             f"W_V[{hw['kv_head']}]" if hw["kv_head"] != c.sel.head else "W_V[h]")
    biases = [hw[f"b_{m}"] for m in "QKV"]
    return av.weights_figure(hw["W_Q"], hw["W_K"], hw["W_V"], title=title, labels=c.L, names=names,
                             biases=None if any(b is None for b in biases) else biases)


def _qkv_variant(c: _Ctx) -> str:
    if c.sel.block.endswith("cross_attn"):
        return "cross"
    if _rotary_model(c.info):
        plain = (c.info.get("norm") == "pre-RMSNorm" and not c.info.get("qk_norm") and not c.info.get("qkv_bias", True)
                 and _rot_dims(c) == c.d_head and not c.info.get("positional_base_local"))
        return "rotary" if plain else "rotary_family"
    return "self" if _placement(c.info) == "post" else "self_pre"


def _qkv_formula(c: _Ctx) -> str:
    v, bias = _qkv_variant(c), bool(c.info.get("qkv_bias", True))
    b = {m: _bias(bias, f"b_{m}^{{(h)}}") for m in "QKV"}
    pre = _placement(c.info) != "post"
    x = r"\hat X" if pre else "X"
    normed = rf",\quad \hat X = {_norm_tex(c.info)}(X)" if pre else ""
    if v.startswith("rotary"):
        g = "g" if _grouped(c.info) else "h"
        qn = (lambda t, m: rf"{_norm_sub_tex(c.info, m)}({t})") if c.info.get("qk_norm") else (lambda t, m: t)
        q, k = qn(rf"{x} W_Q^{{(h)}}{b['Q']}", "q"), qn(rf"{x} W_K^{{({g})}}{b['K']}", "k")
        return (rf"Q^{{(h)}} = \mathrm{{RoPE}}({q}),\ K^{{(h)}} = \mathrm{{RoPE}}({k}),"
                rf"\ V^{{(h)}} = {x} W_V^{{({g})}}{b['V']}" + normed)
    if v == "cross":
        y, tail = (r"\hat Y", rf",\ \hat Y = {_norm_tex(c.info)}(Y)") if pre else ("Y", "")
        return (rf"Q^{{(h)}} = {y} W_Q^{{(h)}}{b['Q']},\quad K^{{(h)}} = H W_K^{{(h)}}{b['K']},\quad "
                rf"V^{{(h)}} = H W_V^{{(h)}}{b['V']},\qquad H = " + _tx(c, "encoder_output") + tail)
    return (rf"Q^{{(h)}} = {x} W_Q^{{(h)}}{b['Q']},\quad K^{{(h)}} = {x} W_K^{{(h)}}{b['K']},\quad "
            rf"V^{{(h)}} = {x} W_V^{{(h)}}{b['V']}" + normed)


def _qkv_fill(c: _Ctx) -> dict:
    norm = _norm_name(c.info)
    return {"layer": c.sel.layer, "last": int(c.info["n_layers"]) - 1, "norm": norm,
            "qk": c.words("qkv.qk_norm", norm=norm) if c.info.get("qk_norm") else "",
            "partial": c.words("qkv.partial", r=_rot_dims(c), d=c.d_head) if _rot_dims(c) != c.d_head else "",
            "base": _base_text(_layer_base(c)) if _rotary_model(c.info) else "",
            "bias": c.words("qkv.bias" if c.info.get("qkv_bias", True) else "qkv.no_bias")}


@stage("qkv", section="qkv", formula=_qkv_formula, shape=_qkv_shapes,
       variants=("self", "cross", "rotary", "self_pre", "rotary_family"), variant=_qkv_variant, fill=_qkv_fill,
       note=lambda c: kv_head_note(c.info, c.sel.head, c.lang))
def _qkv(c: _Ctx, title: str, opts: dict):
    return av.qkv_figure(c.t("hook_q"), c.t("hook_k"), c.t("hook_v"), c.q_tokens, c.k_tokens, title=title,
                         labels=c.L)


def _qk_norm(info: dict) -> bool:
    return bool(info.get("qk_norm"))


def qk_norm_data(c: _Ctx) -> dict | None:
    """The selected head's q and its K/V head's k on the real tokens, before their norm (recomputed
    from the attention's input and W_Q, W_K; None without the weights) and after it
    (hook_q_normed, hook_k_normed), and the head's scores without rotary from both: how far the
    norm keeps them in range."""
    name_q, name_k = f"{c.p}.hook_q_normed", f"{c.p}.hook_k_normed"
    if name_q not in c.run or name_k not in c.run:
        return None
    n = c.n_q
    n_heads, n_kv = int(c.info["n_heads"]), int(c.info.get("n_kv_heads") or c.info["n_heads"])
    kv = kv_head_of(c.sel.head, n_heads, n_kv)
    q_after = c.run[name_q][c.sel.sentence, c.sel.head, :n].astype(np.float64)  # (T, hs)
    k_after = c.run[name_k][c.sel.sentence, kv, :n].astype(np.float64)  # (T, hs)
    q_before = k_before = None
    w, x_name = c.weights, _block_hook(c, "hook_attn_normed")
    if w is not None and f"{c.p}.W_Q" in w and x_name in c.run:
        hw = head_weights(w, c.p, c.sel.head, n_heads, c.d_head)
        x = c.run[x_name][c.sel.sentence, :n].astype(np.float64)  # (T, d_model)
        q_before = x @ hw["W_Q"] + (0 if hw["b_Q"] is None else hw["b_Q"])
        k_before = x @ hw["W_K"] + (0 if hw["b_K"] is None else hw["b_K"])
    scale = _scale_of(c.info)
    return {"kv": kv, "q_after": q_after, "k_after": k_after, "q_before": q_before, "k_before": k_before,
            "scores_after": scale * q_after @ k_after.T,
            "scores_before": None if q_before is None else scale * q_before @ k_before.T}


def _qk_norm_fill(c: _Ctx) -> dict:
    d = qk_norm_data(c)
    if d is None:
        return {"norm": _norm_name(c.info), "after": "—", "before": "—", "rms_q": "—", "rms_k": "—", "kv": "—"}
    big = lambda x: "—" if x is None else f"{float(np.abs(x).max(initial=0.0)):.2f}"  # noqa: E731
    rms = lambda x: "—" if x is None else f"{_rms(x):.2f}"  # noqa: E731
    return {"norm": _norm_name(c.info), "after": big(d["scores_after"]), "before": big(d["scores_before"]),
            "rms_q": rms(d["q_before"]), "rms_k": rms(d["k_before"]), "kv": d["kv"]}


@stage("qk_norm", section="qkv", applies=_qk_norm, blocks=("decoder.self_attn", "encoder.self_attn"),
       fill=_qk_norm_fill,
       formula=lambda c: (rf"\hat q = {_norm_tex(c.info)}(q) = \frac{{q}}{{\sqrt{{\tfrac{{1}}{{d_k}}\sum_i q_i^2 + \varepsilon}}}}"
                          + (r" \odot (1 + \gamma)" if _norm_name(c.info) == "RMSNorm(1+w)" else r" \odot \gamma")
                          + r",\quad \hat k = \mathrm{same}(k),\quad |\hat q \cdot \hat k| \le d_k \max|\gamma'|^2"),
       shape=lambda c: [_dims(c, "q̂", "hook_q_normed", ("batch", "heads", "positions", "d_k")),
                        _dims(c, "k̂", "hook_k_normed", ("batch", "kv_heads", "positions", "d_k"))]
       if f"{c.p}.hook_q_normed" in c.run else [])
def _qk_norm_stage(c: _Ctx, title: str, opts: dict):
    d = qk_norm_data(c)
    if d is None:
        return _not_for(c, title, "qk_norm.needs")
    return qv.qk_norm_figure(d["q_before"], d["q_after"], d["k_before"], d["k_after"], d["scores_before"],
                             d["scores_after"], c.q_tokens[: c.n_q], kv_head=d["kv"], head=c.sel.head,
                             title=title, labels=c.L)


# --- scores, masks, weights ----------------------------------------------------------------------

def _raw_scores(c: _Ctx) -> np.ndarray:
    q, k = c.t("hook_q").astype(np.float64), c.t("hook_k").astype(np.float64)
    return q @ k.T


@stage("qk", section="scores", click="cell", shape=_square("Q·Kᵀ", "hook_scores"), formula=r"S_{ij} = q_i \cdot k_j = \sum_{d} q_{i,d}\, k_{j,d}")
def _qk(c: _Ctx, title: str, opts: dict):
    return av.scores_figure(_raw_scores(c), c.q_tokens, c.k_tokens, title=title, labels=c.L, value_name="q·k")


def _scaled_name(c: _Ctx, what: str = "Q·Kᵀ") -> str:
    """The scaled scores' name as the model scales them: Q·Kᵀ/√d_k, Q·Kᵀ (T5) or s·Q·Kᵀ."""
    return {"sqrt": f"{what}/√d_k", "none": what, "custom": f"s·{what}"}[_scale_kind(c.info)]


@stage("scaled", section="scores", click="cell", shape=lambda c: _square(_scaled_name(c), "hook_scores")(c),
       variants=("sqrt", "none", "custom"), variant=lambda c: _scale_kind(c.info),
       fill=lambda c: {"k": c.d_head, "sqrt": f"{np.sqrt(c.d_head):.2f}", "scale": _num(_scale_of(c.info), 4),
                       "inv": f"{1 / np.sqrt(c.d_head):.4f}"},
       formula=lambda c: {"sqrt": r"\tilde S_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}}",
                          "none": r"\tilde S_{ij} = q_i \cdot k_j\quad(" + _tx(c, "not_scaled") + ")",
                          "custom": rf"\tilde S_{{ij}} = s\, q_i \cdot k_j,\quad s = {_num(_scale_of(c.info), 4)}"}
       [_scale_kind(c.info)])
def _scaled(c: _Ctx, title: str, opts: dict):
    zmax = style.symmetric_range(_raw_scores(c))  # the same range as Q·Kᵀ: scaling shows as paler
    return av.scores_figure(c.t("hook_scores"), c.q_tokens, c.k_tokens, title=title, labels=c.L,
                            value_name=_scaled_name(c, "q·k"), zmax=zmax)


def mask_window(c: _Ctx) -> int:
    """The sliding window the drawn mask has: measured from hook_mask (an edited run's window=N
    too; a real query that sees fewer real keys than it could), else the model's own for the layer."""
    if not c.causal:
        return 0
    m = c.t("hook_mask")[: c.n_q, : c.n_k]
    n = min(c.n_q, c.n_k)
    counts = m[:n, :n].sum(-1)
    if n and (counts < np.arange(1, n + 1)).any():
        return int(counts.max())
    return _model_window(c)


def _mask_variant(c: _Ctx) -> str:
    if c.causal and mask_window(c):
        return "window"
    return "causal" if c.causal else "cross" if c.sel.block.endswith("cross_attn") else "padding"


def _mask_note(c: _Ctx) -> str | None:
    layers = _windowed_layers(c.info)
    if c.sel.block != "decoder.self_attn" or not layers:
        return None
    n, w = int(c.info["n_layers"]), int(c.info["sliding_window"])
    others = [i for i in range(n) if i not in layers]
    kind = c.words("rope.local" if c.sel.layer in layers else "rope.global")
    text = (c.words("mask.window_all", w=w, w1=w - 1) if not others else
            c.words("mask.window_layers", w=w, w1=w - 1, local=_layer_list(layers), other=_layer_list(others),
                    layer=c.sel.layer, kind=kind))
    return text + " " + c.words("mask.window_hint")


def _mask_formula(c: _Ctx) -> str:
    v = _mask_variant(c)
    if v == "window":
        return (r"M_{ij} = \underbrace{[\,j < T_{real}\,]}_{" + _tx(c, "padding") + r"} \wedge \underbrace{[\,j \le i\,]}_{"
                + _tx(c, "causal") + r"} \wedge \underbrace{[\,j > i - w\,]}_{" + _tx(c, "window") + rf"}},\quad w = {mask_window(c)}")
    if v == "causal":
        return (r"M_{ij} = \underbrace{[\,j < T_{real}\,]}_{" + _tx(c, "padding") + r"} \wedge \underbrace{[\,j \le i\,]}_{"
                + _tx(c, "causal") + "}")
    if v == "cross":
        return (r"M_{ij} = \underbrace{[\,j < S_{real}\,]}_{" + _tx(c, "padding_source") + r"}\qquad("
                + _tx(c, "no_causal") + ")")
    return r"M_{ij} = \underbrace{[\,j < T_{real}\,]}_{" + _tx(c, "padding") + r"}\qquad(" + _tx(c, "no_causal") + ")"


@stage("mask", section="scores", formula=_mask_formula, shape=_square("M", "hook_mask", mask=True),
       variants=("causal", "padding", "cross", "window"), variant=_mask_variant, note=_mask_note,
       fill=lambda c: {"w": mask_window(c), "w1": max(mask_window(c) - 1, 0)})
def _mask(c: _Ctx, title: str, opts: dict):
    return av.mask_figure(c.t("hook_mask"), c.q_tokens, c.k_tokens, n_real_keys=c.n_k, causal=c.causal,
                          window=mask_window(c), title=title, labels=c.L)


def _minus_1e9(c: _Ctx) -> dict:
    """Softmax of this head's scores masked with −inf (as the model) and with −1e9 / −1e10 (as
    tutorials 000 and 003), in float32 like the model: the largest difference between their weights."""
    s, m = c.t("hook_scores").astype(np.float32), c.t("hook_mask")
    rows = m.any(-1)

    def soft(fill: float) -> np.ndarray:
        x = np.where(m, s, np.float32(fill))[rows]
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        ref = soft(-np.inf)
        diff = max(float(np.abs(ref - soft(v)).max(initial=0.0)) for v in (-1e9, -1e10))
    return {"diff": f"{diff:.1e}" if diff else "0", "blocked": int((~m[rows]).sum())}


def _masked_note(c: _Ctx) -> str | None:
    if c.info.get("positional") == "relative" and c.sel.block.endswith("self_attn"):
        return c.words("masked.relative_bias")
    if float(c.info.get("attn_softcap") or 0.0):
        return c.words("masked.softcap", c=_num(float(c.info["attn_softcap"])))
    return None


def _masked_input(c: _Ctx) -> str:
    s = r"\tilde S_{ij}"
    cap = float(c.info.get("attn_softcap") or 0.0)
    if cap:
        s = rf"{_num(cap)}\tanh(\tilde S_{{ij}} / {_num(cap)})"
    if c.info.get("positional") == "relative" and c.sel.block.endswith("self_attn"):
        s += r" + B_{ij}"
    return s


@stage("masked", section="scores", click="cell", fill=_minus_1e9, shape=_square("Ŝ", "hook_masked_scores"),
       note=_masked_note,
       formula=lambda c: r"\hat S_{ij} = \begin{cases} " + _masked_input(c) + r" & M_{ij} \\ -\infty & "
       + _tx(c, "otherwise") + r" \end{cases}")
def _masked(c: _Ctx, title: str, opts: dict):
    ms = c.t("hook_masked_scores")
    blocked = ~np.isfinite(ms) | ~c.t("hook_mask")
    return av.scores_figure(ms, c.q_tokens, c.k_tokens, title=title, labels=c.L, value_name=_scaled_name(c, "q·k"),
                            blocked=blocked)


@stage("softmax", section="scores", click="cell", shape=_square("A", "hook_pattern"), formula=r"A_{ij} = \frac{e^{\hat S_{ij}}}{\sum_{j'} e^{\hat S_{ij'}}},\qquad \sum_j A_{ij} = 1")
def _softmax(c: _Ctx, title: str, opts: dict):
    return av.pattern_figure(c.t("hook_pattern"), c.q_tokens, c.k_tokens, blocked=~c.t("hook_mask"), title=title,
                             labels=c.L)


# --- output ---------------------------------------------------------------------------------------

@stage("z", section="output",
       shape=lambda c: [_square("A", "hook_pattern")(c)[0], _qkv_shapes(c)[2],
                        _dims(c, "Z", "hook_z", ("batch", "heads", "positions", "d_k"))], formula=r"z_i = \sum_j A_{ij}\, v_j \qquad (Z = A V)")
def _z(c: _Ctx, title: str, opts: dict):
    return av.z_figure(c.t("hook_pattern"), c.t("hook_v"), c.t("hook_z"), c.q_tokens, c.k_tokens,
                       blocked=~c.t("hook_mask"), title=title, labels=c.L)


def _out_shape(c: _Ctx) -> list:
    z = _dims(c, "Z", "hook_z", ("batch", "heads", "positions", "d_k"))
    (_, b), (_, h), (_, t), (_, k) = z[2]
    return [z, ("Concat(Z)", "", (("batch", b), ("positions", t), ("heads·d_k", h * k))),
            _dims(c, "tensor.attn_out", "hook_out", ("batch", "positions", "d_model"))]


@stage("out", section="output", shape=_out_shape, variants=("bias", "no_bias"),
       variant=lambda c: "bias" if c.info.get("out_bias", True) else "no_bias",
       formula=lambda c: r"\mathrm{MultiHead}(X) = \mathrm{Concat}(z^{(1)},\dots,z^{(H)})\,W_O"
       + _bias(bool(c.info.get("out_bias", True)), "b_O") + r" = \sum_h z^{(h)} W_O^{(h)}"
       + _bias(bool(c.info.get("out_bias", True)), "b_O"))
def _out(c: _Ctx, title: str, opts: dict):
    w = c.weights
    if w is None or f"{c.p}.W_O" not in w:
        return _notice(c.words("no_weights_here"), title), None
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    contrib = c.t("hook_z").astype(np.float64) @ hw["W_O"].astype(np.float64)  # (q, d_model)
    names = None if c.info.get("out_bias", True) else (c.L["this_head"], c.L["all_heads_nobias"])
    return av.head_output_figure(contrib, c.t("hook_out"), c.q_tokens, title=title, labels=c.L, names=names)


def _decoder_only(info: dict) -> bool:
    return info.get("kind") == "decoder"


def _next_token_formula(c: _Ctx) -> str:
    """The model's own readout (_readout_tex: final norm, scale, E or W_out, bias, soft-cap), as the
    logit lens and the generator write it."""
    w = r",\quad E\ (" + _tx(c, "tied") + ")" if c.info.get("tied_output") else ""
    return rf"p(t_{{i+1}} \mid t_{{\le i}}) = \mathrm{{softmax}}\big({_readout_tex(c.info, 'h_i')}\big)" + w


@stage("next_token", section="output", per_head=False, applies=_decoder_only, controls="next_position",
       formula=_next_token_formula,
       shape=lambda c: [("tensor.logits", "", (("batch", c.run.n_sentences),
                                               ("positions", int(c.run[f"{c.stack}.hook_embed"].shape[1])),
                                               ("vocab", int(c.info["vocab_size"]))))])
def _next_token(c: _Ctx, title: str, opts: dict):
    run = c.run
    if (run.top_ids is None and run.last_top_ids is None) or not _decoder_only(c.info):
        return _not_for(c, title, "needs.next_token")
    toks = stack_tokens(run, c.stack, c.sel.sentence)
    n_real = len(toks) if run.top_ids is None else min(len(toks), run.top_ids.shape[1])
    pos = n_real - 1 if opts.get("next_position") is None else clip(opts["next_position"], n_real)
    top = run.next_top(c.sel.sentence, pos)  # a run read out after its last token only: the page attaches the rest
    if top is None:
        return _not_for(c, title, "needs.next_token")
    ids, probs = top
    texts = [run.top_text.get(int(i), str(int(i))) for i in ids]
    context = "".join(toks[max(0, pos - 7): pos + 1])
    context = f"{c.L['position']} {pos}: “{'…' if pos > 7 else ''}{style.plain_text(context, 60)}”"
    return pt.next_token_figure(ids, probs, texts, context=context, title=title, labels=c.L)


# --- one cell, all heads ----------------------------------------------------------------------------

@stage("cell", section="cell", per_cell=True, controls="cell", url=("query", "key"),
       shape=lambda c: [("q_i, k_j", "", (("d_k", int(c.d_head)),)), ("A_i", "", (("keys", int(c.n_k)),))],
       formula=lambda c: r"A_{ij} = \mathrm{softmax}_j\!\left(" + _scaled_tex(c, r"\sum_d q_{i,d}\,k_{j,d}")
       + r" + \log M_{ij}\right)")
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


@stage("overview", section="overview", click="head", controls="drill",
       shape=lambda c: [("A", "", (("layers", layers_for(c.info, c.sel.block)), ("heads", int(c.info["n_heads"])),
                                   ("queries", int(c.t("hook_pattern").shape[0])), ("keys", int(c.t("hook_pattern").shape[1]))))],
       formula=r"H_h = -\frac{1}{T}\sum_i \sum_j A_{ij}\log A_{ij},\qquad d_h = \frac{1}{T}\sum_i \sum_j A_{ij}\,|i-j|")
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
            "decoding.candidates", "decoding.looks_at", "decoding.cross_looks_at",
            "decoding.top_panel_sampled", "decoding.cut_top_k", "decoding.cut_top_p")
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
       uses=("trace",), url=("step", "sample"),
       formula=lambda c: r"a_t = \mathrm{softmax}\!\left(" + _scaled_tex(c, r"q_t\,[K_{<t};\,k_t]^\top").replace("B_{ij}", "B_t")
       + r"\right),\quad z_t = a_t\,[V_{<t};\,v_t],\quad x_{t+1} = \arg\max_x\, p(x \mid x_{\le t})")
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


# === what if, and two sentences side by side (issue 15) ====================================

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


@stage("whatif_pattern", section="whatif", controls="whatif", needs="edited", url=("edit",),
       formula=lambda c: r"\Delta A_{ij} = A^{" + _tx(c, "edited") + r"}_{ij} - A^{" + _tx(c, "intact") + r"}_{ij}")
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


@stage("whatif_entropy", section="whatif", controls="whatif", needs="edited", url=("edit",),
       formula=lambda c: (r"H_h = -\frac{1}{T}\sum_i \sum_j A_{ij}\log A_{ij}:\quad H_h^{" + _tx(c, "edited")
                          + r"} - H_h^{" + _tx(c, "intact") + "}"))
def _whatif_entropy(c: _Ctx, title: str, opts: dict):
    e = _second(c, opts, "edited")
    if e is None:
        return _choose(c, title, "whatif.choose")
    return wv.entropy_figure(head_entropies(c), head_entropies(e), c.sel.layer, c.sel.head, title=title,
                             subtitle=_edits_note(e), labels=wv.labels(c.lang))


def _output_note(c: _Ctx) -> str | None:
    key = {"encoder-decoder": "whatif.output_note_family_seq2seq", "decoder": "whatif.output_note_family_decoder",
           "encoder": "whatif.output_note_family_encoder"}.get(c.info.get("kind"))
    return None if key is None else c.words(key, family=_family_label(c.info))


@stage("whatif_output", section="whatif", per_head=False, controls="whatif", needs="edited", note=_output_note,
       url=("edit",),
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


@stage("compare_pattern", section="compare", controls="compare", needs="other", url=("compare",),
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


def url_keys(stage_ids) -> tuple[str, ...]:
    """The URL parameters the stages ``stage_ids`` keep while on screen (Stage.url), in order."""
    return tuple(dict.fromkeys(k for sid in stage_ids if sid in REGISTRY for k in REGISTRY[sid].url))


def attachments(stage_ids, info) -> tuple[str, ...]:
    """What the stages that apply to this model read beside the plain run (Stage.uses), in the order
    they are made: the exporter makes exactly these."""
    used = {u for sid in stage_ids if applies(sid, info) for u in REGISTRY[sid].uses}
    return tuple(a for a in ATTACHMENTS if a in used)

# --- the whole block: shapes, feed-forward, residual stream and norms, the generator ---------------

def _post_ln(info: dict) -> bool:
    return info.get("norm", "post-LayerNorm") == "post-LayerNorm"


def _stream(c: _Ctx, name: str) -> np.ndarray:
    """One sentence's (T, d) slice of a hook of the selected layer's block."""
    return c.run[_block_hook(c, name)][c.sel.sentence]


def _bd(c: _Ctx, what: str, name: str, last: str = "d_model") -> Shape:
    return _dims(c, what, _block_hook(c, name), ("batch", "positions", last))


def _ffn_in(c: _Ctx) -> str:
    """The hook holding what the feed-forward reads."""
    if not _post_ln(c.info):
        return "hook_ffn_normed"
    return "hook_resid_mid_cross" if c.run.kind == "encoder-decoder" and c.stack == "decoder" else "hook_resid_mid"


def _chain(c: _Ctx) -> list[tuple[str, str, str, bool]]:
    """The model and block as a chain of tensors: (step, shape text, hook, part of attention)."""
    info, run, lang = c.info, c.run, c.lang
    post = _post_ln(info)
    stack, layer = c.stack, c.sel.layer
    cross = c.sel.block.endswith("cross_attn")
    enc_dec = run.kind == "encoder-decoder"
    n_kv = int(info.get("n_kv_heads") or info["n_heads"])
    h, k = int(info["n_heads"]), c.d_head
    rows: list[tuple[str, str, str, bool]] = []

    def add(key: str, shape: Shape | None = None, dims=None, attn: bool = False, **kw) -> None:
        if shape is not None:
            dims, hook = shape[2], shape[1]
        else:
            hook = ""
        rows.append((c.words(f"chain.{key}", **kw), shape_text([("", hook, tuple(dims))], lang)[2:], hook, attn))

    def hook(name: str, labels) -> Shape:
        return _dims(c, "", name, labels)

    B = run.n_sentences
    S = int(run["encoder.hook_embed"].shape[1]) if "encoder.hook_embed" in run else 0
    T = int(run[f"{stack}.hook_embed"].shape[1])
    add("ids_dec" if (enc_dec and stack == "decoder") else "ids", dims=(("batch", B), ("positions", T if not cross else T)),
        start=_decoder_start(c))
    add("embed_scaled" if float(info.get("embed_scale") or 1) != 1 else "embed",
        hook(f"{stack}.hook_embed", ("batch", "positions", "d_model")), scale=f"{float(info.get('embed_scale') or 1):.2f}")
    if f"{stack}.hook_pos_embed" in run:
        add("pe_learned" if _learned(info) else "pe", hook(f"{stack}.hook_pos_embed", ("one", "positions", "d_model")))
    if info.get("embed_norm"):
        add("embed_norm", dims=(("batch", B), ("positions", T), ("d_model", int(info["d_model"]))))
    if layer > 0:
        add("earlier_layers", dims=(("layers", layer),), n=layer)
    add("layer_input", hook(_block_hook(c, "hook_resid_pre"), ("batch", "positions", "d_model")), layer=layer)
    rms = _norm_name(info) == "RMSNorm"
    norm = _norm_name(info)
    if enc_dec and stack == "decoder" and cross:
        add("self_sublayer" if post else "self_sublayer_pre", hook(_block_hook(c, "hook_resid_mid"),
                                                                   ("batch", "positions", "d_model")))
    if not post and cross:
        add("norm_in_cross", hook(_block_hook(c, "hook_cross_normed"), ("batch", "positions", "d_model")), attn=True,
            norm=norm)
    elif not post:
        if rms:
            add("rmsnorm_in", hook(_block_hook(c, "hook_attn_normed"), ("batch", "positions", "d_model")), attn=True)
        else:
            add("norm_in", hook(_block_hook(c, "hook_attn_normed"), ("batch", "positions", "d_model")), attn=True,
                norm=norm)
    if cross:
        add("encoder_output", hook(f"encoder.blocks.{int(info['n_layers']) - 1}.hook_resid_post",
                                   ("batch", "source", "d_model")), attn=True)
    bias = bool(info.get("qkv_bias", True))
    add("project_q_b" if bias else "project_q", dims=(("batch", B), ("positions", T), ("heads·d_k", h * k)), attn=True)
    kv_pos, kv_len = ("source", S) if cross else ("positions", T)
    add("project_kv_b" if bias else "project_kv",
        dims=(("batch", B), (kv_pos, kv_len), ("kv_heads·d_k" if n_kv < h else "heads·d_k", n_kv * k)), attn=True)
    rope = _rotary_model(info)
    add("split_q_rope" if rope else "split_q", hook("hook_q", ("batch", "heads", "positions", "d_k")), attn=True, h=h, k=k)
    if n_kv < h:
        add("split_kv_rope" if rope else "split_kv", dims=(("batch", B), ("kv_heads", n_kv), (kv_pos, kv_len), ("d_k", k)), attn=True,
            h=n_kv, k=k)
        add("repeat_kv", hook("hook_k", ("batch", "heads", kv_pos, "d_k")), attn=True, g=h // n_kv)
    else:
        add("split_kv_rope" if rope else "split_kv", hook("hook_k", ("batch", "heads", kv_pos, "d_k")), attn=True, h=h, k=k)
    if f"{c.p}.hook_q_normed" in run:
        add("qk_norm", hook("hook_q_normed", ("batch", "heads", "positions", "d_k")), attn=True, norm=norm)
    kind = _scale_kind(info)
    add({"sqrt": "scores", "none": "scores_unscaled", "custom": "scores_custom"}[kind],
        hook("hook_scores", ("batch", "heads", "queries", "keys")), attn=True, k=k, s=_num(_scale_of(info), 4))
    if f"{c.p}.hook_capped_scores" in run:
        add("softcap", hook("hook_capped_scores", ("batch", "heads", "queries", "keys")), attn=True,
            cap=_num(float(info.get("attn_softcap") or 0)))
    if f"{c.p}.hook_position_bias" in run:
        add("position_bias", hook("hook_position_bias", ("one", "heads", "queries", "keys")), attn=True)
    w = mask_window(c)
    add("mask_window" if w else "mask_causal" if c.causal else "mask", hook("hook_mask", ("batch", "one", "queries", "keys")),
        attn=True, w=w)
    add("softmax", hook("hook_pattern", ("batch", "heads", "queries", "keys")), attn=True)
    add("z", hook("hook_z", ("batch", "heads", "positions", "d_k")), attn=True)
    add("concat", dims=(("batch", B), ("positions", T), ("heads·d_k", h * k)), attn=True)
    add("w_o_b" if info.get("out_bias", True) else "w_o", hook("hook_out", ("batch", "positions", "d_model")),
        attn=True)
    if post:
        sums = ["attn"] + (["cross"] if enc_dec and stack == "decoder" else [])
        if cross:
            sums = ["cross"]
        for sub in sums:
            nxt = "hook_resid_mid" if sub == "attn" else "hook_resid_mid_cross"
            add("add_norm_attn" if sub == "attn" else "add_norm_cross", hook(_block_hook(c, nxt), ("batch", "positions", "d_model")))
            if sub == "attn" and enc_dec and stack == "decoder" and not cross:
                add("cross_sublayer", hook(_block_hook(c, "hook_resid_mid_cross"), ("batch", "positions", "d_model")))
                break
    else:
        sandwich = _placement(info) == "sandwich"
        if sandwich:
            add("post_norm_attn", hook(_block_hook(c, "hook_attn_out_normed"), ("batch", "positions", "d_model")),
                norm=norm)
        add("add_cross" if cross else "add", hook(_block_hook(c, "hook_resid_mid_cross" if cross else "hook_resid_mid"),
                                                  ("batch", "positions", "d_model")))
        if enc_dec and stack == "decoder" and not cross:
            add("cross_sublayer_pre", hook(_block_hook(c, "hook_resid_mid_cross"), ("batch", "positions", "d_model")),
                norm=norm)
        if rms:
            add("rmsnorm_ffn", hook(_block_hook(c, "hook_ffn_normed"), ("batch", "positions", "d_model")))
        else:
            add("norm_ffn", hook(_block_hook(c, "hook_ffn_normed"), ("batch", "positions", "d_model")), norm=norm)
    add("ffn_hidden", hook(_block_hook(c, "hook_ffn_hidden"), ("batch", "positions", "d_ff")), act=info.get("ffn", ""))
    add("ffn_out", hook(_block_hook(c, "hook_ffn_out"), ("batch", "positions", "d_model")))
    if _placement(info) == "sandwich":
        add("post_norm_ffn", hook(_block_hook(c, "hook_ffn_out_normed"), ("batch", "positions", "d_model")), norm=norm)
    add("add_norm_ffn" if post else "add_ffn", hook(_block_hook(c, "hook_resid_post"), ("batch", "positions", "d_model")),
        layer=layer)
    n_layers = layers_for(info, c.sel.block)
    if layer < n_layers - 1:
        add("later_layers", dims=(("layers", n_layers - 1 - layer),), n=n_layers - 1 - layer)
    if enc_dec and stack == "encoder":
        add("feeds_cross", hook(f"encoder.blocks.{n_layers - 1}.hook_resid_post", ("batch", "source", "d_model")),
            n=int(info.get("n_decoder_layers") or 0))
    if info.get("final_norm"):
        add("final_norm" if rms else "final_norm_named", dims=(("batch", B), ("positions", T),
                                                               ("d_model", int(info["d_model"]))), norm=norm)
    if info["kind"] != "encoder" and stack == "decoder":
        add("logits", dims=(("batch", B), ("positions", T), ("vocab", int(info["vocab_size"]))))
    return rows


@stage("shapes", section="block", formula=lambda c: r"\begin{gathered}(B, T, d_{model}) \xrightarrow{W_Q} (B, T, h\,d_k) "
       + r"\xrightarrow{" + _tx(c, "view") + r"} (B, T, h, d_k) \xrightarrow{" + _tx(c, "transpose") + r"} (B, h, T, d_k) \\ "
       rf"B = {c.run.n_sentences},\ h = {int(c.info['n_heads'])},\ d_k = {c.d_head},\ d_{{model}} = {int(c.info['d_model'])}"
       r"\end{gathered}",
       fill=lambda c: {"layer": c.sel.layer},
       shape=lambda c: [_bd(c, "X", "hook_resid_pre")] + _qkv_shapes(c) + [_bd(c, "tensor.layer_output", "hook_resid_post")])
def _shapes(c: _Ctx, title: str, opts: dict):
    rows = _chain(c)
    return bv.chain_figure([(a, b, h) for a, b, h, _ in rows], title=title, labels=c.L,
                           highlight=[x for *_, x in rows])


def _ffn_variant(c: _Ctx) -> str:
    act = c.info.get("ffn", "ReLU")
    return {"ReLU": "relu", "SwiGLU": "swiglu", "GeGLU": "geglu", "GELU": "gelu", "GELU (tanh)": "gelu"}.get(act, "unknown")


def _ffn_formula(c: _Ctx) -> str:
    v, d, f = _ffn_variant(c), int(c.info["d_model"]), int(c.info.get("d_ff") or 0)
    dims = rf",\qquad d_{{model}} = {d},\ d_{{ff}} = {f}"
    b = bool(c.info.get("ffn_bias", True))
    if v == "swiglu":
        return (r"\mathrm{FFN}(x) = \big(\mathrm{SiLU}(x W_{gate}) \odot x W_{up}\big) W_{down},\quad "
                r"\mathrm{SiLU}(u) = u\,\sigma(u)" + dims)
    if v == "geglu":
        return (r"\mathrm{FFN}(x) = \big(\mathrm{GELU}(x W_{gate}) \odot x W_{up}\big) W_{down}" + dims)
    if v == "unknown":
        return rf"\mathrm{{FFN}}(x) = \cdots\quad(\mathrm{{{c.info.get('ffn', '')}}})" + dims
    act = rf"\max(0,\ x W_1{_bias(b, 'b_1')})" if v == "relu" else rf"\mathrm{{GELU}}(x W_1{_bias(b, 'b_1')})"
    return rf"\mathrm{{FFN}}(x) = {act}\, W_2{_bias(b, 'b_2')}" + dims


def _ffn_input_words(c: _Ctx) -> str:
    place, norm = _placement(c.info), _norm_name(c.info)
    if place == "post":
        return c.words("ffn_input_post")
    if place == "sandwich":
        return c.words("ffn_input_sandwich", norm=norm)
    return c.words("ffn_input_pre") if norm == "RMSNorm" else c.words("ffn_input_pre_norm", norm=norm)


def _ffn_fill(c: _Ctx) -> dict:
    n = len(stack_tokens(c.run, c.stack, c.sel.sentence))
    hid = _stream(c, "hook_ffn_hidden")[:n]
    return {"d": int(c.info["d_model"]), "d_ff": int(c.info.get("d_ff") or hid.shape[-1]),
            "ratio": _num(hid.shape[-1] / int(c.info["d_model"])), "layer": c.sel.layer,
            "zero": f"{100 * float((hid == 0).mean()) if hid.size else 0:.0f}",
            "neg": f"{100 * float((hid < 0).mean()) if hid.size else 0:.0f}",
            "act": c.info.get("ffn", "ReLU"),
            "resize": c.words("ffn_widen" if hid.shape[-1] > int(c.info["d_model"]) else "ffn_same",
                              d=int(c.info["d_model"]), d_ff=int(hid.shape[-1]),
                              ratio=_num(hid.shape[-1] / int(c.info["d_model"]))),
            "input": _ffn_input_words(c), "family": _family_label(c.info),
            "bias": c.words("ffn.bias" if c.info.get("ffn_bias", True) else "ffn.no_bias")}


@stage("ffn", section="block", formula=_ffn_formula, variants=("relu", "gelu", "swiglu", "geglu", "unknown"),
       variant=_ffn_variant,
       fill=_ffn_fill, shape=lambda c: [_bd(c, "x", _ffn_in(c)), _bd(c, "tensor.ffn_hidden", "hook_ffn_hidden", "d_ff"),
                                        _bd(c, "FFN(x)", "hook_ffn_out")])
def _ffn(c: _Ctx, title: str, opts: dict):
    n = _stream(c, "hook_ffn_hidden").shape[0]
    toks = padded(stack_tokens(c.run, c.stack, c.sel.sentence), n)
    act = c.info.get("ffn", "ReLU")
    return bv.ffn_figure(_stream(c, "hook_ffn_hidden"), _stream(c, "hook_ffn_out"), toks, title=title, labels=c.L,
                         names=(f"{c.L['ffn_hidden']} ({act}, d_ff = {_stream(c, 'hook_ffn_hidden').shape[1]})",
                                f"{c.L['ffn_out']} (d_model = {_stream(c, 'hook_ffn_out').shape[1]})"))


def _residual_steps(c: _Ctx) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """The block's stream in forward order: (label, hook) and the norms: (label, input hook, kind)."""
    a = c.p.rsplit(".", 1)[0]  # "{stack}.blocks.{i}"
    attn = f"{a}.self_attn.hook_out"
    n, kind = _norm_name(c.info).replace("(1+w)", ""), "layer" if _layer_norm(c.info) else "rms"
    if _placement(c.info) == "sandwich":
        steps = [("x", "hook_resid_pre"), (f"{n}₁(x)", "hook_attn_normed"), ("Attn(·)", attn),
                 (f"{n}₁′(Attn)", "hook_attn_out_normed"), ("x + …", "hook_resid_mid"), (f"{n}₂(x)", "hook_ffn_normed"),
                 ("FFN(·)", "hook_ffn_out"), (f"{n}₂′(FFN)", "hook_ffn_out_normed"), ("x + …", "hook_resid_post")]
        return steps, [(f"{n}₁", "hook_resid_pre", kind), (f"{n}₁′", attn, kind), (f"{n}₂", "hook_resid_mid", kind),
                       (f"{n}₂′", "hook_ffn_out", kind)]
    if not _post_ln(c.info):
        steps = [("x", "hook_resid_pre"), (f"{n}₁(x)", "hook_attn_normed"), ("Attn(·)", attn),
                 ("x + Attn", "hook_resid_mid")]
        norms = [(f"{n}₁", "hook_resid_pre", kind)]
        ffn_in = "hook_resid_mid"
        if c.run.kind == "encoder-decoder" and c.stack == "decoder":
            steps += [(f"{n}꜀(x)", "hook_cross_normed"), ("Cross(·, H)", f"{a}.cross_attn.hook_out"),
                      ("x + Cross", "hook_resid_mid_cross")]
            norms.append((f"{n}꜀", "hook_resid_mid", kind))
            ffn_in = "hook_resid_mid_cross"
        steps += [(f"{n}₂(x)", "hook_ffn_normed"), ("FFN(·)", "hook_ffn_out"), ("x + FFN", "hook_resid_post")]
        return steps, norms + [(f"{n}₂", ffn_in, kind)]
    steps = [("x", "hook_resid_pre"), ("Attn(x)", attn), ("x + Attn(x)", "hook_attn_sum"),
             ("LayerNorm₁", "hook_resid_mid")]
    norms = [("LayerNorm₁", "hook_attn_sum", "layer")]
    last = "LayerNorm₂"
    if c.run.kind == "encoder-decoder" and c.stack == "decoder":
        steps += [("Cross(x, H)", f"{a}.cross_attn.hook_out"), ("x + Cross", "hook_cross_sum"),
                  ("LayerNorm₂", "hook_resid_mid_cross")]
        norms.append(("LayerNorm₂", "hook_cross_sum", "layer"))
        last = "LayerNorm₃"
    steps += [("FFN(x)", "hook_ffn_out"), ("x + FFN(x)", "hook_ffn_sum"), (last, "hook_resid_post")]
    norms.append((last, "hook_ffn_sum", "layer"))
    return steps, norms


def _resolve(c: _Ctx, hook: str) -> str:
    return hook if "." in hook else _block_hook(c, hook)


def _residual_variant(c: _Ctx) -> str:
    norm = str(c.info.get("norm") or "post-LayerNorm")
    return {"post-LayerNorm": "post_ln", "pre-RMSNorm": "pre_rms", "pre-LayerNorm": "pre_ln",
            "sandwich-RMSNorm(1+w)": "sandwich", "sandwich-RMSNorm": "sandwich"}.get(norm, "unknown")


LAYERNORM_TEX = r"\mathrm{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta"
RMSNORM_TEX = r"\mathrm{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \varepsilon}}"


def _residual_formula(c: _Ctx) -> str:
    v = _residual_variant(c)
    if v == "post_ln":
        return r"x \leftarrow \mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big),\quad " + LAYERNORM_TEX
    if v == "pre_ln":
        return r"x \leftarrow x + \mathrm{Sublayer}\big(\mathrm{LayerNorm}(x)\big),\quad " + LAYERNORM_TEX
    if v == "sandwich":
        n = _norm_tex(c.info)
        gamma = r"(1 + \gamma)" if _norm_name(c.info) == "RMSNorm(1+w)" else r"\gamma"
        return (rf"x \leftarrow x + {n}\Big(\mathrm{{Sublayer}}\big({n}(x)\big)\Big),\quad "
                rf"{n}(x) = {gamma} \odot \frac{{x}}{{\sqrt{{\tfrac{{1}}{{d}}\sum_i x_i^2 + \varepsilon}}}}")
    if v == "unknown":
        return r"x \leftarrow \cdots\quad(" + str(c.info.get("norm", "")) + ")"
    return r"x \leftarrow x + \mathrm{Sublayer}\big(\mathrm{RMSNorm}(x)\big),\quad " + RMSNORM_TEX


def _norm_extra(c: _Ctx) -> str:
    if c.info.get("embed_norm"):
        return c.words("norm_extra_bert")
    if c.info.get("final_norm"):
        name = _norm_name(c.info)
        return c.words("norm_extra_llama") if name == "RMSNorm" else c.words("norm_extra_final", norm=name)
    return c.words("norm_extra_none")


@stage("residual_norm", section="block", variants=("post_ln", "pre_rms", "pre_ln", "sandwich", "unknown"),
       variant=_residual_variant,
       fill=lambda c: {"layer": c.sel.layer, "norm": c.info.get("norm", ""), "eps": "", "extra": _norm_extra(c),
                       "family": _family_label(c.info)},
       formula=_residual_formula,
       shape=lambda c: [_dims(c, w, _resolve(c, h), ("batch", "positions", "d_model"))
                        for w, h in _residual_steps(c)[0][:1]] + [("μ, σ" if _layer_norm(c.info) else "rms", "",
                                                                   (("batch", c.run.n_sentences),
                                                                    ("positions", int(c.run[_block_hook(c, "hook_resid_pre")].shape[1]))))])
def _residual_norm(c: _Ctx, title: str, opts: dict):
    steps, norms = _residual_steps(c)
    T = int(c.run[_block_hook(c, "hook_resid_pre")].shape[1])
    n_real = min(len(stack_tokens(c.run, c.stack, c.sel.sentence)), T)
    toks = stack_tokens(c.run, c.stack, c.sel.sentence)[:n_real]
    s = c.sel.sentence
    return bv.residual_figure([(w, c.run[_resolve(c, h)][s][:n_real]) for w, h in steps],
                              [(w, c.run[_resolve(c, h)][s][:n_real], k) for w, h, k in norms], toks,
                              title=title, labels=c.L)


def _enc_dec(info: dict) -> bool:
    return info.get("kind") == "encoder-decoder"


LOGITS_TOP = 5


def _logits_data(c: _Ctx):
    run, s = c.run, c.sel.sentence
    toks = list(run.decoder_tokens[s])
    n = min(len(toks), run.top_ids.shape[1])
    ids, probs = run.top_ids[s, :n, :LOGITS_TOP], run.top_probs[s, :n, :LOGITS_TOP]
    top = [[run.top_text.get(int(i), str(int(i))) for i in row] for row in ids]
    chosen = toks[1:n] + [top[n - 1][0]]  # the next input token; after the last one, the model's choice
    p_chosen = []
    for t in range(n):
        p = [float(pr) for tk, pr in zip(top[t], probs[t]) if tk == chosen[t]]
        p_chosen.append(p[0] if p else float("nan"))
    return toks[:n], top, probs, chosen, p_chosen


@stage("logits", section="block", per_head=False, applies=_enc_dec,
       formula=lambda c: r"p(y_{t+1} \mid y_{\le t}, x) = \mathrm{softmax}\big(" + _readout_tex(c.info, r"h_t^{(L)}")
       + r"\big),\quad " + ("E" if c.info.get("tied_output") else "W_{out}") + r" \in \mathbb{R}^{"
       + f"{int(c.info['vocab_size']):,}".replace(",", "{,}") + rf" \times {int(c.info['d_model'])}}}",
       fill=lambda c: {"V": f"{int(c.info['vocab_size']):,}", "k": LOGITS_TOP, "readout": _readout_words(c),
                       "start": _decoder_start(c), "last": int(c.info.get("n_decoder_layers") or 0) - 1},
       shape=lambda c: [("tensor.logits", "", (("batch", c.run.n_sentences),
                                               ("positions", int(c.run["decoder.hook_embed"].shape[1])),
                                               ("vocab", int(c.info["vocab_size"]))))])
def _logits(c: _Ctx, title: str, opts: dict):
    if c.run.top_ids is None or not _enc_dec(c.info):
        return _not_for(c, title, "needs.generator")
    toks, top, probs, chosen, p_chosen = _logits_data(c)
    return bv.logits_figure(toks, top, probs, chosen, p_chosen, title=title, labels=c.L)


@stage("pe_tutorial", section="position", per_head=False, controls="pe", on_demand=True,
       formula=r"\begin{gathered}\mathrm{div\_term}_i = e^{2i\,(-\ln n / d_{model})} = \frac{1}{n^{2i/d_{model}}},\quad "
       r"d_{model} = 4 \\ PE_{k,2i} = \sin(k\,\mathrm{div\_term}_i),\quad PE_{k,2i+1} = \cos(k\,\mathrm{div\_term}_i)"
       r"\end{gathered}",
       shape=lambda c: [("tensor.tutorial_embedding", "", (("batch", 3), ("positions", 6), ("d_model", 4))),
                        ("PE", "", (("positions", 10), ("d_model", 4)))])
def _pe_tutorial(c: _Ctx, title: str, opts: dict):
    return tut.figure(int(opts.get("pe_tutorial_sentence") or 0), title=title, labels=c.L)


# === beyond one head: logit lens, rollout, value norms, query/key map, head roles (issue 26) =====

# Analyses read the run, they never rerun it (DESIGN.md). Two need more than the hooks, made once and
# attached to the run (explorer/views/data.py): the logit lens of the sentence on screen
# (``run.with_lens(lens_data(m, run, s))``: it reads every layer through ``m.readout``) and the
# induction scores (``run.with_induction(induction_scores(m))``: a forward pass of its own on a
# repeated random sequence, once per model). Without them the stage's figure says so.

from . import analysis as an  # noqa: E402  (this section's figures)
from .data import INDUCTION_TOKENS  # noqa: E402


def _has_readout(info: dict) -> bool:
    return info.get("kind") in ("decoder", "encoder-decoder")


def _lens(c: _Ctx):
    lens = c.run.lens
    s = c.sel.sentence
    if lens is None or s >= len(c.run.texts) or lens.text != c.run.texts[s]:
        return None
    return lens


def _lens_layers(c: _Ctx) -> int:
    return layers_for(c.info, "decoder.self_attn")


def _scale_is_inverse_root_d(info: dict, s: float) -> bool:
    return abs(s - float(info["d_model"]) ** -0.5) <= 1e-9 * s


def _readout_tex(info: dict, h: str = r"h^{(\ell)}_i") -> str:
    """The model's own way from a stream to logits, from its description: [final norm] [× scale]
    · (E or W_out)ᵀ [+ b], [soft-capped]."""
    x = _norm_tex(info) + r"\big(" + h + r"\big)" if info.get("final_norm") else h
    s = float(info.get("logit_scale") or 1.0)
    if s != 1.0:
        x += r"\, d_{model}^{-1/2}" if _scale_is_inverse_root_d(info, s) else rf"\cdot {s:.4g}"
    z = x + r"\, " + ("E" if info.get("tied_output") else "W_{out}") + r"^\top" + (" + b" if info.get("output_bias") else "")
    cap = float(info.get("final_softcap") or 0.0)
    return rf"{cap:g}\tanh\big(({z}) / {cap:g}\big)" if cap else z


def _readout_words(c: _Ctx) -> str:
    """The readout in words, step by step, from the model's description (see _readout_tex)."""
    info, steps = c.info, []
    if info.get("final_norm"):
        steps.append(c.words("lens.read.norm", norm=_norm_name(info)))
    s = float(info.get("logit_scale") or 1.0)
    if s != 1.0:
        steps.append(c.words("lens.read.scale", scale=f"{s:.4g}",
                             why=" (d_model^-½)" if _scale_is_inverse_root_d(info, s) else ""))
    steps.append(c.words("lens.read.tied") if info.get("tied_output") else c.words("lens.read.out"))
    if info.get("output_bias"):
        steps.append(c.words("lens.read.bias"))
    cap = float(info.get("final_softcap") or 0.0)
    if cap:
        steps.append(c.words("lens.read.softcap", c=f"{cap:g}"))
    text = c.words("lens.read.then").join(steps)
    if not info.get("final_norm") and str(info.get("norm") or "").startswith("post-"):
        text += c.words("lens.read.post", norm=_norm_name(info))
    return text


def _lens_formula(c: _Ctx) -> str:
    return (r"\hat t^{(\ell)}_i = \arg\max_t\ \mathrm{softmax}\big(" + _readout_tex(c.info) + r"\big)_t,\quad "
            r"p^{(\ell)}_i = \max_t\ \mathrm{softmax}(\cdot)_t,\qquad \ell = 0, \dots, " + str(_lens_layers(c) - 1))


def _lens_fill(c: _Ctx) -> dict:
    """The number of layers, and from the lens: the first layer from which the top token at the last
    position stays the model's final choice."""
    n = _lens_layers(c)
    lens = _lens(c)
    settled, word, last = "—", "—", "—"
    if lens is not None and lens.ids.shape[1]:
        col = lens.ids[:, -1]
        k = n - 1
        while k > 0 and col[k - 1] == col[-1]:
            k -= 1
        settled, last = k, lens.ids.shape[1] - 1
        word = style.plain_text(style.visible(lens.token_text.get(int(col[-1]), str(int(col[-1])))), 30)
    return {"n": n, "last_layer": n - 1, "settled": settled, "word": word, "last": last, "readout": _readout_words(c)}


@stage("logit_lens", section="beyond", per_head=False, applies=_has_readout, controls="lens", uses=("lens",),
       formula=_lens_formula, fill=_lens_fill, variants=("decoder", "seed", "pending"),
       variant=lambda c: "pending" if _lens(c) is None else "seed" if c.run.kind == "encoder-decoder" else "decoder",
       shape=lambda c: [("h", "",
                         (("layers", _lens_layers(c)), ("positions", len(stack_tokens(c.run, "decoder", c.sel.sentence))),
                          ("d_model", int(c.info["d_model"])))),
                        ("tensor.logits", "", (("positions", len(stack_tokens(c.run, "decoder", c.sel.sentence))),
                                               ("vocab", int(c.info["vocab_size"]))))])
def _logit_lens(c: _Ctx, title: str, opts: dict):
    if not _has_readout(c.info):
        return _not_for(c, title, "needs.readout")
    lens = _lens(c)
    if lens is None:
        return _notice(c.words("lens.not_made"), title), None
    toks = stack_tokens(c.run, lens.stack, c.sel.sentence)
    return an.lens_figure(lens.ids, lens.probs, lens.token_text, toks, title=title, labels=c.L)


def _stack_patterns(c: _Ctx) -> tuple[np.ndarray, int]:
    """(layers, heads, T, T) of the selected self-attention block in every layer, and the real tokens."""
    stack, attn = c.sel.block.split(".")
    n_layers = layers_for(c.info, c.sel.block)
    pats = np.stack([c.run[f"{stack}.blocks.{li}.{attn}.hook_pattern"][c.sel.sentence] for li in range(n_layers)])
    return pats, min(len(stack_tokens(c.run, stack, c.sel.sentence)), pats.shape[-1])


def _rollout_fill(c: _Ctx) -> dict:
    pats, n = _stack_patterns(c)
    R = an.rollout(pats, n)
    return {"n": pats.shape[0], "h": pats.shape[1], "first": f"{100 * float(R[-1, 0]):.0f}",
            "last": n - 1, "own": f"{100 * float(R[-1, -1]):.0f}", "start": _first_token(c)}


def _decoder_start(c: _Ctx) -> str:
    """The decoder's first token as shown (the seed's <s>, T5's and Marian's <pad>), "—" without a decoder run."""
    return _first_token(c, "decoder") if c.run.kind == "encoder-decoder" else "—"


def _first_token(c: _Ctx, stack: str | None = None) -> str:
    """A stack's first token as shown (default the selected block's stack: the seed decoder's <s>,
    T5's <pad>, a BOS, a word)."""
    toks = stack_tokens(c.run, stack or c.sel.block.split(".")[0], c.sel.sentence)
    return style.plain_text(style.visible(toks[0]), 20) if toks else "—"


@stage("rollout", section="beyond", per_head=False, blocks=("encoder.self_attn", "decoder.self_attn"),
       fill=_rollout_fill, variants=("encoder", "causal", "seed_decoder"),
       variant=lambda c: "seed_decoder" if c.run.kind == "encoder-decoder" and c.stack == "decoder"
       else "causal" if c.causal else "encoder",
       formula=lambda c: (r"\bar A_\ell = \frac{1}{H}\sum_h A_\ell^{(h)},\quad \tilde A_\ell = \mathrm{rownorm}\big(0.5\,\bar A_\ell"
                          r" + 0.5\, I\big),\quad R = \tilde A_{" + str(layers_for(c.info, c.sel.block) - 1)
                          + r"} \cdots \tilde A_0"),
       shape=lambda c: [("A", "",
                         (("layers", layers_for(c.info, c.sel.block)), ("heads", int(c.info["n_heads"])),
                          ("queries", _stack_patterns(c)[1]), ("keys", _stack_patterns(c)[1]))),
                        ("R", "", (("queries", _stack_patterns(c)[1]), ("keys", _stack_patterns(c)[1])))])
def _rollout(c: _Ctx, title: str, opts: dict):
    if not c.sel.block.endswith("self_attn"):
        return _not_for(c, title, "needs.self_attn")
    pats, n = _stack_patterns(c)
    return an.rollout_figure(an.rollout(pats, n), stack_tokens(c.run, c.stack, c.sel.sentence)[:n], title=title,
                             labels=c.L)


def _value_norms_data(c: _Ctx):
    w = c.weights
    if w is None or f"{c.p}.W_O" not in w:
        return None
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    pattern = c.t("hook_pattern")[: c.n_q, : c.n_k]
    v = c.t("hook_v")[: c.n_k]  # this query head's values (repeated per query head under GQA)
    return pattern, an.value_norms(pattern, v, hw["W_O"]), hw["kv_head"], an.value_norms(np.ones((1, len(v))), v, hw["W_O"])[0]


def _value_norms_fill(c: _Ctx) -> dict:
    made = _value_norms_data(c)
    if made is None:
        return {"w0": "—", "n0": "—", "kv": c.sel.head, "ratio": "—"}
    pattern, norms, kv, lengths = made
    rows = slice(1, None) if pattern.shape[0] > 1 else slice(None)
    total = float(norms[rows].sum())
    ratio = lengths[0] / lengths[1:].mean() if len(lengths) > 1 and lengths[1:].mean() > 0 else 1.0
    return {"w0": f"{100 * float(pattern[rows, 0].mean()):.0f}",
            "n0": f"{100 * float(norms[rows, 0].sum()) / total:.0f}" if total > 0 else "0", "kv": kv,
            "ratio": f"{float(ratio):.2f}"}


@stage("value_norms", section="beyond", fill=_value_norms_fill, variants=("bias", "no_bias"),
       variant=lambda c: "bias" if c.info.get("out_bias", True) else "no_bias",
       formula=r"\lVert \alpha_{ij}\, v_j W_O^{(h)} \rVert = \alpha_{ij}\, \lVert v_j W_O^{(h)} \rVert,\qquad "
               r"z_i W_O^{(h)} = \sum_j \alpha_{ij}\, v_j W_O^{(h)}",
       shape=lambda c: [_square("A", "hook_pattern")(c)[0], _qkv_shapes(c)[2],
                        ("W_O^(h)", "", (("d_k", int(c.d_head)), ("d_model", int(c.info["d_model"]))))])
def _value_norms(c: _Ctx, title: str, opts: dict):
    made = _value_norms_data(c)
    if made is None:
        return _notice(c.words("no_weights_here"), title), None
    pattern, norms, _, lengths = made
    blocked = ~c.t("hook_mask")[: c.n_q, : c.n_k]
    return an.value_norms_figure(np.where(blocked, np.nan, pattern), np.where(blocked, np.nan, norms),
                                 c.q_tokens[: c.n_q], c.k_tokens[: c.n_k], blocked=blocked, lengths=lengths,
                                 title=title, labels=c.L)


QK_LINES = 40  # the strongest query→key pairs drawn


def _qk_points(c: _Ctx):
    """Every sentence's real queries and keys of the selected head, their (sentence, position, token)
    and the strongest query→key pairs (each query's strongest key, the QK_LINES largest)."""
    q_all, k_all, q_rows, k_rows, pairs = [], [], [], [], []
    for s in range(c.run.n_sentences):
        qt, kt, nq, nk = axis_tokens(c.run, c.sel.block, s, c.sel.layer)
        q = c.run[f"{c.p}.hook_q"][s, c.sel.head, :nq]
        k = c.run[f"{c.p}.hook_k"][s, c.sel.head, :nk]
        a = c.run[f"{c.p}.hook_pattern"][s, c.sel.head, :nq, :nk]
        base_q, base_k = len(q_rows), len(k_rows)
        q_all.append(q)
        k_all.append(k)
        q_rows += [(s, i, qt[i]) for i in range(nq)]
        k_rows += [(s, j, kt[j]) for j in range(nk)]
        if nk:
            best = a.argmax(-1)
            pairs += [(base_q + i, base_k + int(best[i]), float(a[i, best[i]])) for i in range(nq)]
    pairs.sort(key=lambda x: -x[2])
    return np.concatenate(q_all), np.concatenate(k_all), q_rows, k_rows, pairs[:QK_LINES]


@stage("qk_map", section="beyond", fill=lambda c: {"lines": QK_LINES, "n": c.run.n_sentences, "h": c.sel.head,
                                                   "layer": c.sel.layer},
       variants=("plain", "rotary"), variant=lambda c: "rotary" if _rotary_model(c.info) else "plain",
       formula=r"\tilde k_j = k_j - \bar k + \bar q,\qquad (x, y) = \mathrm{PCA}_2\big(\{q_i\} \cup \{\tilde k_j\}\big),"
               r"\qquad q_i \cdot \tilde k_j = q_i \cdot k_j + q_i \cdot (\bar q - \bar k)",
       shape=_qkv_shapes)
def _qk_map(c: _Ctx, title: str, opts: dict):
    q, k, q_rows, k_rows, lines = _qk_points(c)
    q_xy, k_xy, ratio = an.qk_projection(q, k)
    return an.qk_figure(q_xy, k_xy, q_rows, k_rows, lines, ratio=ratio, title=title, labels=c.L)


def _induction_of(c: _Ctx) -> np.ndarray | None:
    scores = c.run.induction
    if not scores or c.sel.block not in scores:
        return None
    return np.asarray(scores[c.sel.block])


def _role_scores(c: _Ctx) -> dict[str, np.ndarray]:
    pats, n = _stack_patterns(c)
    scores = an.head_role_scores(pats, n)
    ind = _induction_of(c)
    scores["induction"] = ind if ind is not None and ind.shape == pats.shape[:2] else np.full(pats.shape[:2], np.nan)
    return scores


def _role(c: _Ctx, scores: dict) -> str:
    role = c.opts.get("role")
    if role in an.ROLES:
        return role
    return "induction" if np.isfinite(scores["induction"]).any() else "previous_token"


def _strongest_text(scores: np.ndarray, k: int = 3) -> str:
    best = an.strongest(scores, k)
    return ", ".join(f"L{li} H{h} ({s:.2f})" for li, h, s in best) or "—"


def _roles_fill(c: _Ctx) -> dict:
    scores = _role_scores(c)
    return {**{r: _strongest_text(scores[r]) for r in an.ROLES}, "n": _stack_patterns(c)[1],
            "tokens": 2 * INDUCTION_TOKENS, "start": _first_token(c)}


def _roles_variant(c: _Ctx) -> str:
    if c.run.kind == "encoder-decoder" and c.stack == "decoder":
        return "seed_decoder"
    return "measured" if _induction_of(c) is not None else "no_induction"


@stage("head_roles", section="beyond", per_head=False, controls="roles", uses=("induction",), url=("role",),
       blocks=("encoder.self_attn", "decoder.self_attn"), fill=_roles_fill,
       variants=("measured", "no_induction", "seed_decoder"), variant=_roles_variant,
       formula=lambda c: (r"\begin{gathered}\mathrm{prev}_h = \frac{1}{T-1}\sum_{q\ge1} A_{q,q-1},\quad \mathrm{first}_h = "
                          r"\frac{1}{T-1}\sum_{q\ge1} A_{q,0},\quad \mathrm{self}_h = \frac{1}{T-1}\sum_{q\ge1} A_{q,q} \\ "
                          r"\mathrm{induction}_h = \operatorname{mean}_{q \in " + _tx(c, "second_copy")
                          + r"} A_{q,\ j(q)+1},\quad j(q):\ t_{j(q)} = t_q,\ j(q) \in " + _tx(c, "first_copy")
                          + r"\end{gathered}"),
       shape=lambda c: [("A", "",
                         (("layers", layers_for(c.info, c.sel.block)), ("heads", int(c.info["n_heads"])),
                          ("queries", _stack_patterns(c)[1]), ("keys", _stack_patterns(c)[1])))])
def _head_roles(c: _Ctx, title: str, opts: dict):
    if not c.sel.block.endswith("self_attn"):
        return _not_for(c, title, "needs.self_attn")
    scores = _role_scores(c)
    role = _role(c, scores)
    best = an.strongest(scores[role], 3)
    sub = c.words("roles.strongest", role=c.L[an.ROLE_NAME[role]],
                  heads=", ".join(f"L{li} H{h} ({s:.2f})" for li, h, s in best) or "—")
    if role == "induction" and not np.isfinite(scores["induction"]).any():
        sub = c.words("roles.no_induction")
    return an.head_roles_figure(scores, role, title=title, subtitle=style.esc(sub), labels=c.L)



# === beyond one head: activation patching (issue 26) ===============================================

# Patching runs the model again, many times (model/analysis/patching.py): the builder never does. The app (cached,
# with a progress bar: explorer/state.py) and the exporter compute the result and hand it over as the
# option ``patching`` (a model.analysis.patching.PatchResult of the sentence on screen, clean, against the
# second sentence of the comparison, corrupted: the option ``other``). Without it the figure says what
# is missing: the second sentence, the same token count, or the result.

from . import patching as patch_view  # noqa: E402  (this stage's figure)


def _patch_applies(info: dict) -> bool:
    """Patching scores a predicted token: only models with an output head (not an encoder alone)."""
    return info.get("kind") in ("decoder", "encoder-decoder")


def _patch_result(c: _Ctx):
    res = c.opts.get("patches")
    return res if res is not None and hasattr(res, "logp") else None


def patching_stack(info, block: str) -> str:
    """The stack whose residual stream is patched: a decoder's own; the seed's, the selected block's."""
    kind = info.get("kind") if isinstance(info, Mapping) else info.kind
    return "decoder" if kind == "decoder" else stack_of(block)


def _patching_formula(c: _Ctx) -> str:
    res = _patch_result(c)
    if res is not None and res.kind == "heads":
        cell = r"z^{(\ell,\,h)} \leftarrow z^{(\ell,\,h)}(x)"
    else:
        cell = r"h^{(\ell)}_{i} \leftarrow h^{(\ell)}_{i}(x)"
    return (r"\log p\big(y^{*} \,\big|\, x',\ " + cell + r"\big),\qquad y^{*} = \arg\max_y\, p(y \mid x)")


def _patching_variant(c: _Ctx) -> str:
    return "seed" if c.info.get("kind") == "encoder-decoder" else "decoder"


@stage("patching", section="compare", controls="patching", needs="other", per_head=False, applies=_patch_applies,
       uses=("patches",), url=("compare", "patch"),
       formula=_patching_formula, variants=("decoder", "seed"), variant=_patching_variant)
def _patching(c: _Ctx, title: str, opts: dict):
    """Options: ``other`` (the second sentence's run) and ``patches`` (the result; see above)."""
    if not _patch_applies(c.info):
        return _not_for(c, title, "patching.needs_head")
    o = _second(c, opts, "other")
    if o is None:
        return _choose(c, title, "patching.choose")
    n_a, n_b = len(c.run.tokens[c.sel.sentence]), len(o.run.tokens[0])
    if n_a != n_b:
        return _notice(c.words("patching.token_count", a=n_a, b=n_b), title), None
    res = _patch_result(c)
    texts = (c.run.texts[c.sel.sentence] if c.sel.sentence < len(c.run.texts) else None,
             o.run.texts[0] if o.run.texts else None)
    if res is None or tuple(res.texts) != texts:
        return _notice(c.words("patching.not_run"), title), None
    words = {"colour": c.words("patching.colour"), "subtitle": c.words("patching.subtitle")}
    fig, df = patch_view.patching_figure(res, title=title, words=words, labels=c.L)
    return fig, df


# === why this head attends here (issue 35) ==========================================================
# qk_terms: the first layer's scores split into content and position (positions added to the tokens);
# rope_bands: the rotary score by frequency band; attention_vs_effect: every head's attention beside
# what ablating it does to the model's own next token (the ablations run outside the builder:
# model/analysis/ablation.py, attached as the option ``effects``). The maths: model/analysis/score_split.py.

from model.analysis import score_split as split  # noqa: E402

from . import why as why_view  # noqa: E402

TERM_KEYS = {"content·content": "qk_terms.cc", "content·position": "qk_terms.cp", "position·content": "qk_terms.pc",
             "position·position": "qk_terms.pp", "bias": "qk_terms.b"}  # score_split.TERMS -> their words


def _added_positions(info: dict) -> bool:
    return info.get("positional") in ("sinusoidal", "learned")


def _first_norms(c: _Ctx) -> list[tuple[str, str]]:
    """The norms between e + p and the first attention, in order: (weights' name, "embed" | "ln1")."""
    out = []
    if c.info.get("embed_norm"):
        out.append((f"{c.stack}.ln_embed", "embed"))
    if _placement(c.info) in ("pre", "sandwich"):
        out.append((f"{c.stack}.blocks.0.ln1", "ln1"))
    return out


def _norm_kind(info: dict) -> str:
    """The kind of the model's norm as model/arch/parts.py's Norm names it."""
    name = _norm_name(info)
    return "layer" if name == "LayerNorm" else "rms1p" if name == "RMSNorm(1+w)" else "rms"


def _qk_terms_variant(c: _Ctx) -> str:
    if c.sel.layer > 0:
        return "later"
    return "norm" if _first_norms(c) else "plain"


def qk_split_data(c: _Ctx) -> dict | None:
    """The selected head's first-layer scores on the sentence's real tokens split in parts
    (score_split.qk_terms, "bias" left out when the model has no bias at all), the model's own scores
    (hook_scores) and the float32 bound of their difference; None in a later layer or without weights."""
    if _qk_terms_variant(c) == "later" or not c.sel.block.endswith("self_attn") or not _added_positions(c.info):
        return None
    w, pe = c.weights, _pe(c)
    if w is None or f"{c.p}.W_Q" not in w or pe is None:
        return None
    norms = []
    for name, _ in _first_norms(c):
        if f"{name}.weight" not in w:
            return None
        norms.append(split.NormStep(_norm_kind(c.info), w[f"{name}.weight"], w.get(f"{name}.bias"),
                                    float(w[f"{name}.eps"])))
    n = c.n_q
    e = c.run[f"{c.stack}.hook_embed"][c.sel.sentence][:n]  # (T, d) what the tokens are
    hw = head_weights(w, c.p, c.sel.head, int(c.info["n_heads"]), c.d_head)
    args = (e, pe[:n], norms, hw["W_Q"], hw["b_Q"], hw["W_K"], hw["b_K"], _scale_of(c.info))
    terms = split.qk_terms(*args)
    if hw["b_Q"] is None and hw["b_K"] is None and not any(s.bias is not None for s in norms):
        terms.pop("bias")  # no bias anywhere: nothing to show
    return {"terms": terms, "score": c.t("hook_scores")[:n, :n].astype(np.float64), "bound": split.qk_bound(*args),
            "norms": norms}


def _term_names(c: _Ctx) -> dict[str, str]:
    return {k: c.words(v) for k, v in TERM_KEYS.items()}


def _qk_terms_fill(c: _Ctx) -> dict:
    d = qk_split_data(c)
    nm = _norm_name(c.info)
    where = {"embed": c.words("qk_terms.norm_embed", norm=nm), "ln1": c.words("qk_terms.norm_ln1", norm=nm)}
    norms = c.words("qk_terms.and").join(where[k] for _, k in _first_norms(c)) or "—"
    biases = [b for b, on in (("b_Q, b_K", c.info.get("qkv_bias", True)),
                              ("β", _norm_kind(c.info) == "layer" and bool(_first_norms(c)))) if on]
    out = {"norm": _norm_name(c.info), "norms": norms, "layer": c.sel.layer, "ffn": c.info.get("ffn") or "—",
           "biases": c.words("qk_terms.and").join(biases) if biases else c.words("qk_terms.no_bias"),
           "content": c.words("qk_terms.content_scaled" if float(c.info.get("embed_scale") or 1.0) != 1.0
                              else "qk_terms.content_plain") + (c.words("qk_terms.with_type") if _type_embedding(c.info) else ""),
           "position": c.words("qk_terms.position_sinusoidal" if c.info.get("positional") == "sinusoidal"
                               else "qk_terms.position_learned"),
           "i": c.sel.query, "j": c.sel.key, "cell": "—", "model": "—", "largest": "—"}
    if d is not None:
        i, j = min(c.sel.query, c.n_q - 1), min(c.sel.key, c.n_q - 1)
        names = _term_names(c)
        vals = {k: float(v[i, j]) for k, v in d["terms"].items()}
        out["cell"] = " + ".join(f"{names[k]} {_num(v, 3)}" for k, v in vals.items()) + f" = {_num(sum(vals.values()), 3)}"
        out["model"] = _num(float(d["score"][i, j]), 3)
        size = {k: float(np.abs(v).mean()) for k, v in d["terms"].items()}
        big = max(size, key=size.get)
        out["largest"] = f"{names[big]} ({_num(size[big], 3)})"
        out["i"], out["j"] = i, j
    return out


def _qk_terms_formula(c: _Ctx) -> str:
    if _qk_terms_variant(c) == "later":
        return (r"x^{(\ell)}_i = f_{\ell}\big(x^{(\ell-1)}_0, \dots, x^{(\ell-1)}_{T-1}\big) \;\neq\; e_i + p_i"
                rf"\qquad (\ell = {c.sel.layer} \ge 1)")
    scale = r"\tfrac{1}{\sqrt{d_k}}" if _scale_kind(c.info) == "sqrt" else _num(_scale_of(c.info), 4)
    e = r"E[t_i]" + (r"\sqrt{d_{model}}" if float(c.info.get("embed_scale") or 1.0) != 1.0 else "") + (
        r" + E_{type}[0]" if _type_embedding(c.info) else "")
    p = "PE_i" if c.info.get("positional") == "sinusoidal" else (
        rf"P[i + {int(c.info['pos_offset'])}]" if c.info.get("pos_offset") else "P[i]")
    lines = [rf"e_i = {e},\quad p_i = {p},\quad s = {scale}"]
    hat = ""
    if _first_norms(c):
        hat = r"\hat "
        kind = _norm_kind(c.info)
        g = r"(1 + \gamma)" if kind == "rms1p" else r"\gamma"
        if kind == "layer":
            lines.append(r"\hat e_i = \gamma \odot \frac{e_i - \mu(e_i)}{\sigma_i},\ \hat p_i = \gamma \odot \frac{p_i - \mu(p_i)}{\sigma_i},"
                         r"\ \sigma_i = \sqrt{\mathrm{var}(e_i + p_i) + \varepsilon}")
        else:
            lines.append(rf"\hat e_i = {g} \odot \frac{{e_i}}{{r_i}},\ \hat p_i = {g} \odot \frac{{p_i}}{{r_i}},"
                         r"\ r_i = \sqrt{\tfrac{1}{d}\lVert e_i + p_i \rVert^2 + \varepsilon}")
    E, P = hat + "e", hat + "p"
    lines.append(rf"S_{{ij}} = s\,({E}_iW_Q)\cdot({E}_jW_K) + s\,({E}_iW_Q)\cdot({P}_jW_K) + s\,({P}_iW_Q)\cdot({E}_jW_K)"
                 rf" + s\,({P}_iW_Q)\cdot({P}_jW_K) + B_{{ij}}")
    return r"\begin{gathered}" + r" \\ ".join(lines) + r"\end{gathered}"


@stage("qk_terms", section="scores", applies=_added_positions, blocks=("encoder.self_attn", "decoder.self_attn"),
       per_cell=True, controls="why_cell", url=("query", "key"), formula=_qk_terms_formula,
       variants=("norm", "plain", "later"), variant=_qk_terms_variant, fill=_qk_terms_fill,
       shape=lambda c: [_dims(c, "e", f"{c.stack}.hook_embed", ("batch", "positions", "d_model")),
                        _dims(c, "p", f"{c.stack}.hook_pos_embed", ("one", "positions", "d_model")),
                        _square("S", "hook_scores")(c)[0]] if _pe(c) is not None else [])
def _qk_terms(c: _Ctx, title: str, opts: dict):
    if not _added_positions(c.info):
        return _not_for(c, title, "qk_terms.needs")
    if _qk_terms_variant(c) == "later":
        return _notice(c.words("qk_terms.later", layer=c.sel.layer), title), None
    d = qk_split_data(c)
    if d is None:
        return _notice(c.words("no_weights_here"), title), None
    i, j = min(c.sel.query, c.n_q - 1), min(c.sel.key, c.n_q - 1)
    worst = float(np.abs(sum(d["terms"].values()) - d["score"]).max(initial=0.0))
    sub = c.words("qk_terms.subtitle", diff=f"{worst:.1e}", bound=f"{float(d['bound'].max(initial=0.0)):.1e}")
    return why_view.qk_terms_figure(d["terms"], d["score"], _term_names(c), c.q_tokens, c.k_tokens, i, j,
                                    title=title, subtitle=style.esc(sub), labels=c.L)


def rope_bands_data(c: _Ctx) -> dict | None:
    """The selected head's scores on the real tokens split by rotary band (score_split.rope_bands), the
    layer's frequencies θ (its own base and scaling: parts.rope_frequencies) and each band's pull."""
    if not _rotary_model(c.info) or not c.sel.block.endswith("self_attn"):
        return None
    n, nk = c.n_q, c.n_k
    dims = _rot_dims(c)
    bands = split.rope_bands(c.t("hook_q")[:n], c.t("hook_k")[:nk], dims, bool(c.info.get("rotary_interleaved")),
                             _scale_of(c.info))
    allowed = c.t("hook_mask")[:n, :nk]
    return {"bands": bands, "theta": _rope_theta(c), "allowed": allowed, "dims": dims,
            "pulls": split.pull(bands, c.t("hook_pattern")[:n, :nk], allowed)}


def _rope_bands_fill(c: _Ctx) -> dict:
    dims, theta = _rot_dims(c), _rope_theta(c)
    sc = _rope_scaling(c)
    out = {"n": dims // 2, "base": _base_text(_layer_base(c)), "fast": _num(float(theta[0]), 3),
           "slow": f"{float(theta[-1]):.2e}", "lam": f"{2 * np.pi / float(theta[-1]):,.0f}",
           "pairing": c.words("rope_bands.interleaved" if c.info.get("rotary_interleaved") else "rope_bands.half",
                              half=dims // 2),
           "partial": c.words("rope_bands.partial", rest=c.d_head - dims, last=dims // 2) if dims < c.d_head else "",
           "scaling": c.words("rope_bands.scaling", kind=sc[0], factor=f"{float(sc[1]):g}") if sc else "",
           "i": c.sel.query, "top": "—", "total": "—"}
    d = rope_bands_data(c)
    if d is not None:
        order = np.argsort(-d["pulls"])[:3]
        out["top"] = ", ".join(why_view.band_label(int(b), float(theta[b]) if b < len(theta) else None)
                               for b in order)
        out["total"] = _num(float(d["pulls"].sum()), 3)
        out["i"] = min(c.sel.query, c.n_q - 1)
    return out


def _rope_bands_formula(c: _Ctx) -> str:
    dims = _rot_dims(c)
    pair = r"(2b,\ 2b{+}1)" if c.info.get("rotary_interleaved") else rf"(b,\ b{{+}}{dims // 2})"
    rest = rf" + s\sum_{{d \ge {dims}}} q_{{i,d}}\,k_{{j,d}}" if dims < c.d_head else ""
    theta = rf"{_base_text(_layer_base(c)).replace(',', '{,}')}^{{-2b/{dims}}}"
    sc = _rope_scaling(c)
    if sc:  # the rope's scaling changes the frequencies (model/arch/parts.py rope_frequencies)
        theta = rf"{theta} / {_num(float(sc[1]))}" if sc[0] == "linear" else rf"\mathrm{{{sc[0]}}}\big({theta}\big)"
    return (rf"S_{{ij}} = \sum_{{b=0}}^{{{dims // 2 - 1}}} s\,\big(q_{{i,a}}k_{{j,a}} + q_{{i,a'}}k_{{j,a'}}\big)" + rest
            + rf",\quad (a, a') = {pair},\quad \theta_b = {theta}"
            + r",\qquad s\,\big(q_{i,a}k_{j,a} + q_{i,a'}k_{j,a'}\big) = s\,\lVert \tilde q_{i,b}\rVert \lVert \tilde k_{j,b}\rVert"
            r" \cos\!\big(\theta_b (j - i) + \varphi_{ij,b}\big)")


@stage("rope_bands", section="scores", applies=_rotary_model, blocks=("encoder.self_attn", "decoder.self_attn"),
       per_cell=True, controls="why_cell", url=("query", "key"), formula=_rope_bands_formula, fill=_rope_bands_fill,
       shape=lambda c: _qkv_shapes(c)[:2] + [("tensor.bands", "", (("bands", _rot_dims(c) // 2 + (_rot_dims(c) < c.d_head)),
                                                           ("queries", c.n_q), ("keys", c.n_k)))])
def _rope_bands(c: _Ctx, title: str, opts: dict):
    d = rope_bands_data(c)
    if d is None:
        return _not_for(c, title, "rope_bands.needs")
    i = min(c.sel.query, c.n_q - 1)
    worst = float(np.abs(d["bands"].sum(0) - c.t("hook_scores")[: c.n_q, : c.n_k]).max(initial=0.0))
    sub = c.words("rope_bands.subtitle", base=_base_text(_layer_base(c)), diff=f"{worst:.1e}")
    return why_view.rope_bands_figure(d["bands"], d["theta"], d["pulls"], c.q_tokens, c.k_tokens, i,
                                      blocked=~d["allowed"], title=title, subtitle=style.esc(sub), labels=c.L)


def _predicts(info: dict) -> bool:
    return info.get("kind") in ("decoder", "encoder-decoder")


def _effects(c: _Ctx):
    """The ablation result attached for this sentence and block (model.analysis.ablation.HeadEffects), or None."""
    res = c.opts.get("effects")
    if res is None or not hasattr(res, "effect"):
        return None
    text = c.run.texts[c.sel.sentence] if c.sel.sentence < len(c.run.texts) else None
    if res.block != c.sel.block or res.text != text or len(res.tokens) != c.n_q:
        return None
    return res


def effect_data(c: _Ctx) -> dict | None:
    res = _effects(c)
    if res is None:
        return None
    i, j = min(c.sel.query, c.n_q - 1), min(c.sel.key, c.n_k - 1)
    stack, attn = c.sel.block.split(".")
    n_layers = layers_for(c.info, c.sel.block)
    att = np.stack([c.run[f"{stack}.blocks.{li}.{attn}.hook_pattern"][c.sel.sentence, :, i, j]
                    for li in range(n_layers)]).astype(np.float64)  # (layers, heads)
    eff = np.asarray(res.effect, dtype=np.float64)[:, :, i]  # (layers, heads)
    look, matter = why_view.named_heads(att, eff)
    return {"res": res, "i": i, "j": j, "attention": att, "effect": eff, "look": look, "matter": matter,
            "allowed": bool(c.t("hook_mask")[i, j])}


def _effect_variant(c: _Ctx) -> str:
    if _effects(c) is None:
        return "pending"
    return "seq2seq" if c.run.kind == "encoder-decoder" else "decoder"


def _effect_fill(c: _Ctx) -> dict:
    d = effect_data(c)
    out = {"i": c.sel.query, "j": c.sel.key, "answer": "—", "p": "—", "look": "—", "matter": "—", "n": "—",
           "start": _decoder_start(c)}
    if d is None:
        return out
    res, i = d["res"], d["i"]

    def said(h: tuple[int, int]) -> str:
        return f"L{h[0]} H{h[1]} ({c.words('fig.attention')} {d['attention'][h]:.2f}, Δ log p {d['effect'][h]:+.3f})"

    out.update(i=i, j=d["j"], answer=style.plain_text(style.visible(res.answers[i]), 30),
               p=f"{float(np.exp(res.clean_logp[i])):.3f}", look=said(d["look"]), matter=said(d["matter"]),
               n=res.forwards)
    return out


@stage("attention_vs_effect", section="beyond", applies=_predicts, blocks=("decoder.self_attn", "decoder.cross_attn"),
       per_cell=True, controls="effects", uses=("effects",), url=("query", "key"), fill=_effect_fill,
       variants=("decoder", "seq2seq", "pending"), variant=_effect_variant,
       formula=r"a_{\ell h} = A^{(\ell, h)}_{ij},\qquad \Delta_{\ell h} = \log p\big(y^*_i \,\big|\, z^{(\ell, h)} = 0\big)"
               r" - \log p\big(y^*_i\big),\qquad y^*_i = \arg\max_y\, p(y \mid t_{\le i})",
       shape=lambda c: [("A", "", (("layers", layers_for(c.info, c.sel.block)), ("heads", int(c.info["n_heads"])))),
                        ("Δ log p", "", (("layers", layers_for(c.info, c.sel.block)), ("heads", int(c.info["n_heads"]))))])
def _attention_vs_effect(c: _Ctx, title: str, opts: dict):
    if not _predicts(c.info):
        return _not_for(c, title, "needs.readout")
    if c.sel.block not in ("decoder.self_attn", "decoder.cross_attn"):
        return _notice(c.words("effect.choose_decoder"), title), None
    d = effect_data(c)
    if d is None:
        return _notice(c.words("effect.not_run"), title), None
    names = {c.words("effect.looks"): d["look"], c.words("effect.matters"): d["matter"]}
    if d["look"] == d["matter"]:
        names = {c.words("effect.looks"): d["look"]}
    res, i, j = d["res"], d["i"], d["j"]
    sub = c.words("effect.subtitle", i=i, tok=style.visible(c.q_tokens[i]), j=j, ktok=style.visible(c.k_tokens[j]),
                  answer=style.visible(res.answers[i]), p=f"{float(np.exp(res.clean_logp[i])):.3f}")
    if not d["allowed"]:
        sub += " · " + c.words("effect.masked_key")
    return why_view.effect_figure(d["attention"], d["effect"], (c.sel.layer, c.sel.head), names, title=title,
                                  subtitle=style.esc(sub), labels=c.L)


def score_parts(cache, info, sel: Selection) -> dict | None:
    """qk_terms' numbers for a selection (``qk_split_data``): the lessons ask about them."""
    return qk_split_data(_context(cache, info, sel, "en"))


def band_parts(cache, info, sel: Selection) -> dict | None:
    """rope_bands' numbers for a selection (``rope_bands_data``)."""
    return rope_bands_data(_context(cache, info, sel, "en"))


def effect_parts(cache, info, sel: Selection, effects) -> dict | None:
    """attention_vs_effect's numbers for a selection and its ablations (``effect_data``)."""
    return effect_data(_context(cache, info, sel, "en", opts={"effects": effects}))


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


def stage_title(stage_id: str, lang: str = "en", block: str | None = None) -> str:
    """The stage's title; with ``block``, the one for that block where it differs (the mask of an
    encoder or a cross-attention names no causal mask)."""
    if stage_id == "mask" and block is not None and block != "decoder.self_attn":
        return i18n.t("stage.mask.title.cross" if block.endswith("cross_attn") else "stage.mask.title.padding", lang)
    return _record(stage_id).title(lang)


def _context(cache, info, sel: Selection, lang: str, weights=None, opts: dict | None = None) -> _Ctx:
    run = as_run(cache)
    inf = _info(info)
    return _Ctx(run, inf, clip_selection(sel, run, inf), i18n.lang_or_default(lang), weights, opts)


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
    opts = {k: v for k, v in options.items() if v is not None}
    ctx = _context(cache, info, sel, lang, weights, opts)
    return record.build(ctx, record.title(ctx.lang, ctx), opts)


def stage_words(stage_id: str, cache, info, sel: Selection, lang: str = "en", *, weights=None,
                **options) -> dict:
    """What the page says about one stage for this model, block and run: ``title``, ``explain``,
    ``formula`` (LaTeX), ``shape`` (the tensors drawn, with named dimensions, as text), ``shapes``
    (the same as data: ``Shape`` tuples), ``variant`` and ``note``. ``options`` as for
    ``stage_figure`` (the words follow the values drawn)."""
    record = _record(stage_id)
    opts = {k: v for k, v in options.items() if v is not None}
    ctx = _context(cache, info, sel, lang, weights, opts)
    shapes = record.shape(ctx) if record.shape is not None and applies(stage_id, ctx.info, ctx.sel.block) else []
    return {"title": record.title(ctx.lang, ctx), "explain": record.explain(ctx.lang, ctx),
            "formula": record.formula_for(ctx), "shape": shape_text(shapes, ctx.lang), "shapes": shapes,
            "variant": record._variant(ctx), "note": record.note(ctx) if record.note is not None else None}


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
    title = stage_title(stage_id, lang, sel.block) if stage_id in REGISTRY else stage_id
    block = i18n.t(f"blocks.{sel.block}", lang) if sel.block in BLOCKS else sel.block
    extra = (f" · {i18n.t('whatif.caption_edits', lang, edits=edits)}" if edits else "") + (
        f" · {i18n.t('compare.caption', lang, text=style.plain_text(compare, 48))}" if compare else "")
    return (f"{model} · {L['sentence']} {sel.sentence} “{style.plain_text(text, 48)}” · {block} · "
            f"{L['layer']} {sel.layer} · {L['head']} {sel.head} · {title}{extra}")
