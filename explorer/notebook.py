"""The explorer in a notebook: one stage of one run, as the page draws it, with its words.

    import explorer
    shown = explorer.show("seed", "hello world", stage="softmax", layer=0, head=1)
    shown                      # in Jupyter: the stage's title, explanation, formula and figure
    shown.figure               # the plotly figure the page draws (a go.Figure: .show(), .write_html(), ...)
    shown.title, shown.formula, shown.explanation, shown.shape, shown.note, shown.table
    explorer.stage_ids("seed")  # the stages this model has, in the page's order

The figure and the words come from the same code as the page and the exporter
(``explorer.views.stages``: ``stage_figure`` and ``stage_words``), for the same run: nothing here
draws or words anything of its own. Streamlit is never imported. A model named once is loaded once
per process, and the runs of the last few texts are kept, so showing another stage, layer or head
of the same text runs nothing again.
"""
from __future__ import annotations

import html
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import model as _model
from explorer import i18n, inputs
from explorer.views import stages as _stages
from explorer.views.theme import THEME_NAMES, apply_theme

__all__ = ["show", "stage_ids", "Shown"]

_LOADED: dict[str, Any] = {}  # a model name -> the loaded model (one load per name and process)
_RUNS: OrderedDict = OrderedDict()  # (model, sentences, edits) -> run: the last few
_RUNS_KEPT = 8


@dataclass(frozen=True)
class Shown:
    """One stage of one run, as the page shows it: the figure and the words beside it.

    In Jupyter it displays as the page does: the title, the explanation, the formula (typeset) and
    the tensors drawn, then the interactive figure. Its attributes are plain values to use further.

    Attributes:
        stage: the stage's id (``explorer.views.stages.STAGE_IDS``).
        figure: the plotly ``go.Figure`` the page draws for this selection (its download buttons and
            the exporter take the same figure; the page's clickable copy only adds click targets).
        table: the numbers drawn, as a ``pandas.DataFrame`` (None for a stage without one).
        title: the stage's title, in ``lang``, for this model and block.
        formula: the stage's formula as LaTeX ("" for a stage without one).
        explanation: what the stage shows, in ``lang``, for this model and run (Markdown: ``**bold**``).
        shape: the tensors drawn with their named dimensions, e.g. ``A = hook_pattern[...]: (query 4, key 4)``.
        note: a sentence about the model on screen (e.g. the base it used), or None.
        caption: model · sentence · block · layer · head · stage, as the exported figure's caption.
        lang: the language of the words ("en" or "ko").
    """

    stage: str
    figure: Any
    table: Any
    title: str
    formula: str
    explanation: str
    shape: str
    note: str | None
    caption: str
    lang: str
    selection: Any = field(repr=False, default=None)

    def _words_markdown(self) -> str:
        """The words as Markdown; text from a run (tokens) is escaped, never markup."""
        lines = [f"### {_esc(self.title)}", "", _esc(self.explanation)]
        if self.shape:
            lines += ["", f"*{_esc(i18n.t('shape', self.lang))}: {_esc(self.shape)}*"]
        if self.note:
            lines += ["", _esc(self.note)]
        return "\n".join(lines)

    def _ipython_display_(self) -> None:
        from IPython.display import Markdown, Math, display

        display(Markdown(self._words_markdown()))
        if self.formula:
            display(Math(self.formula))
        display(self.figure)

    def _repr_html_(self) -> str:
        """The words and the figure as one piece of HTML (for frontends that ask for HTML only)."""
        parts = [f"<h3>{_esc(self.title)}</h3>", f"<p>{_bold(_esc(self.explanation))}</p>"]
        if self.formula:
            parts.append(f"<p>$${_esc(self.formula)}$$</p>")
        if self.shape:
            parts.append(f"<p><small>{_esc(i18n.t('shape', self.lang))}: {_esc(self.shape)}</small></p>")
        if self.note:
            parts.append(f"<p><small>{_esc(self.note)}</small></p>")
        parts.append(self.figure._repr_html_() or "")
        return "<div>" + "\n".join(parts) + "</div>"

    def __repr__(self) -> str:
        return f"<Shown {self.stage!r}: {self.title} — {self.caption}>"


def _esc(text: str) -> str:
    return html.escape(text or "", quote=False)


def _bold(escaped: str) -> str:
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)


def _load(m):
    """A loaded model from a name, a path or a loaded model."""
    if hasattr(m, "info") and hasattr(m, "run_with_cache"):
        return m
    if not isinstance(m, (str, Path)):
        raise TypeError(f"model: give a name ({', '.join(_model.available())}), a local path or a model from "
                        f"model.load(...), not {type(m).__name__}")
    key = str(m)
    if key not in _LOADED:
        _LOADED[key] = _model.load(key)  # WeightsError says how to fetch or which names there are
    return _LOADED[key]


def _sentences(text) -> list[str]:
    if text is None:
        return inputs.split_sentences(inputs.DEFAULT_TEXT)
    if isinstance(text, str):
        found = inputs.split_sentences(text)  # one sentence per line, as the page's text box
    elif isinstance(text, (list, tuple)) and all(isinstance(x, str) for x in text):
        found = [x for x in text if x.strip()]
    else:
        raise TypeError(f"text: a sentence (several: one per line) or a list of sentences, not {type(text).__name__}")
    if not found:
        raise ValueError("text: no sentence given (every line is blank)")
    return found


def _run(m, texts: list[str], edits: str = "", *, with_weights: bool = True):
    """The run of ``texts`` (the exporter's: every hook and, for the intact run, the weights),
    kept for the last few texts."""
    key = (id(m), tuple(texts), edits, with_weights)
    hit = _RUNS.get(key)
    if hit is not None and hit[0] is m:
        _RUNS.move_to_end(key)
        return hit[1]
    prep = m.prepare_texts(texts)  # the model's token limit and memory gate, before anything runs
    m.check_memory(len(prep.texts), prep.longest, m.hook_names)
    run = _stages.run_data(m, texts, with_weights=with_weights, **({"edits": edits} if edits else {}))
    _RUNS[key] = (m, run)
    while len(_RUNS) > _RUNS_KEPT:
        _RUNS.popitem(last=False)
    return run


def stage_ids(model=None, block: str | None = None) -> list[str]:
    """The stage ids in the page's order: all of them, or those ``model`` has (for ``block``).

    Args:
        model: None (every stage), a model name ("seed", "minilm", ...), a path or a loaded model.
        block: with a model, only the stages of this attention block.
    """
    if model is None:
        return list(_stages.STAGE_IDS)
    info = _load(model).info
    return [s for s in _stages.STAGE_IDS if _stages.applies(s, info, block)]


def show(model="seed", text=None, stage: str = "softmax", *, layer: int = 0, head: int = 0,
         block: str | None = None, sentence: int = 0, query: int = 0, key: int = 0, lang: str = "en",
         theme: str | None = None, edits: str = "", compare: str = "", step: int = 0,
         max_new_tokens: int | None = None, **options) -> Shown:
    """One stage of attention for a model and a text: the figure the page draws and its words.

    Args:
        model: a name ("seed", "seed-sort", "minilm", "smollm2", "gemma3", or one from the models
            file), a local folder, ``.safetensors`` or ``.gguf`` path, or a model from ``model.load``.
            A name is loaded once per process.
        text: a sentence, several (a list, or one per line) run as a padded batch; default the
            page's two example sentences.
        stage: a stage id, e.g. "tokens", "qk", "scaled", "mask", "masked", "softmax", "z", "out",
            "overview" (``stage_ids(model)`` lists those the model has; the docs' Stages page says
            what each shows).
        layer, head: which layer of ``block`` and which head (from 0).
        block: "encoder.self_attn", "decoder.self_attn" or "decoder.cross_attn" (default: the
            model's first).
        sentence: which sentence of the batch (from 0).
        query, key: the cell of the one-cell stage ("cell").
        lang: the language of the words and of the figure's labels, "en" or "ko".
        theme: None (the page's look) or an export theme ("presentation", "print", ...), applied
            to a copy of the figure.
        edits: what-if edits (``model.edits``), e.g. "no_causal,temperature=2": needed by the
            what-if stages.
        compare: a second sentence: needed by the comparison stages (patching among them).
        step, max_new_tokens: the decoding stage's step shown and how many tokens it writes.
        **options: the positional-encoding controls (``pe_base``, ``pe_d_model``, ``pe_positions``,
            ``pe_dims``, ``pe_bases``) and ``next_position``, as ``stage_figure`` takes them.

    Returns:
        A ``Shown``: ``.figure``, ``.title``, ``.formula``, ``.explanation``, ``.shape``, ``.note``,
        ``.table``; displayed in Jupyter as the page shows the stage.

    Raises:
        ValueError: an unknown stage (the message lists them), a stage the model does not have, a
            block, layer, head or sentence out of range, an unknown language or theme.
        model.WeightsError: a model that is not there (the message says how to fetch it).
        model.InputTooLong, model.RunTooLarge: a text beyond the model's token limit or memory gate.
    """
    # cheap checks first, before any model is loaded
    if lang not in i18n.LANGS:
        raise ValueError(f"lang={lang!r}: choose one of {', '.join(i18n.LANGS)}")
    if stage not in _stages.REGISTRY:
        raise ValueError(f"unknown stage {stage!r}; choose one of: {', '.join(_stages.STAGE_IDS)}")
    if theme is not None and theme not in THEME_NAMES:
        raise ValueError(f"theme={theme!r}: choose None (the page's look) or one of {', '.join(THEME_NAMES)}")
    record = _stages.REGISTRY[stage]
    texts = _sentences(text)
    if not 0 <= sentence < len(texts):
        raise ValueError(f"sentence={sentence} is out of range: {len(texts)} sentence(s) given, "
                         f"so use 0..{len(texts) - 1}")
    if record.needs == "edited" and not edits:
        raise ValueError(f"stage {stage!r} compares with an edited run: give edits=..., e.g. edits='no_causal'")
    if record.needs == "other" and not compare.strip():
        raise ValueError(f"stage {stage!r} compares with a second sentence: give compare='...'")

    m = _load(model)
    info = m.info
    name = str(model) if isinstance(model, (str, Path)) and str(model) in _model.available() else info.name
    blocks = list(_stages.blocks_for(info))
    block = block or blocks[0]
    if block not in blocks:
        raise ValueError(f"block={block!r} does not exist in {info.name} ({info.kind}); choose one of {', '.join(blocks)}")
    n_layers = _stages.layers_for(info, block)
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer={layer} is out of range: {info.name} has {n_layers} layer(s) in "
                         f"{block.split('.')[0]}, so use 0..{n_layers - 1}")
    if not 0 <= head < info.n_heads:
        raise ValueError(f"head={head} is out of range: {info.name} has {info.n_heads} heads, so use 0..{info.n_heads - 1}")
    if not _stages.applies(stage, info, block):
        raise ValueError(f"stage {stage!r} is not one {info.name} has in {block}; it has: "
                         f"{', '.join(stage_ids(m, block))}")
    if edits:
        parsed = _model.edits.parse(edits)  # EditError (a ValueError) says what is wrong
        _model.edits.check(m, parsed)
        edits = str(parsed)

    run = _run(m, texts)
    runs: dict[str, Any] = {}
    if edits:
        runs["edited"] = _run(m, texts, edits, with_weights=False)
    if compare.strip():
        second = inputs.limit_tokens(inputs.limit_sentences(compare)[0][:1], m.tokenizer)[0]
        runs["other"] = _run(m, second, with_weights=False)
    run, runs = _attach(m, run, runs, stage, block, texts, sentence, step, max_new_tokens)

    sel = _stages.Selection(model=name, sentence=sentence, layer=layer, head=head, block=block, query=query, key=key)
    opts = {**options, **runs, "step": step}
    fig, table = _stages.stage_figure(stage, run, info, sel, lang=lang, **opts)
    said = _stages.stage_words(stage, run, info, sel, lang, **opts)
    if theme is not None:
        fig = apply_theme(fig, theme)
    made_edits, made_compare = _stages.second_run(stage, opts)
    return Shown(stage=stage, figure=fig, table=table, title=said["title"], formula=said["formula"] or "",
                 explanation=said["explain"], shape=said["shape"], note=said["note"],
                 caption=_stages.caption(name, texts[sentence], sel, stage, lang, edits=made_edits,
                                         compare=made_compare),
                 lang=lang, selection=sel)


def _attach(m, run, runs: dict, stage: str, block: str, texts: list[str], sentence: int, step: int,
            max_new_tokens: int | None):
    """What the stage reads beside the plain run (Stage.uses), made as the exporter makes it."""
    from explorer.cli import export as cli

    for kind in _stages.attachments([stage], m.info):
        if kind == "trace":
            from explorer.views.trace import trace_data

            trace = trace_data(m, texts[sentence], max_new_tokens=max_new_tokens)
            if not 0 <= step < trace.n_steps:
                raise ValueError(f"step={step} is out of range: {m.info.name} wrote {trace.n_steps} token(s) "
                                 f"for this sentence, so use 0..{trace.n_steps - 1}")
            run = run.with_trace(trace)
        else:  # the exporter's own (none of them refuses: a missing result is said by the figure)
            asked = SimpleNamespace(text=texts, sentence=sentence, max_new_tokens=max_new_tokens, step=step)
            run, runs = cli.ATTACH[kind](m, asked, None, run, runs, block)
    return run, runs
