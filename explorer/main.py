"""Attention Explorer's page: what every session runs (``streamlit run explorer/app.py`` serves it,
and warms it up at the server's start: explorer/app.py; ``streamlit run explorer/main.py`` runs it
without the warm-up).

Thin wiring only: sidebar controls -> a cached run of the model (explorer/state.py) -> the stage
figures (explorer/views/stages.py) -> ``show_figure``. URL query parameters (model, text, layer,
head, block, sentence, lang, view, query, key, step, edit, compare) set the state on load and follow it;
``present=1`` is presenter mode (explorer/presenter.py).
"""
from __future__ import annotations

import functools
import logging
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
try:  # `streamlit run explorer/app.py` puts explorer/ (not the root) on sys.path
    import model  # noqa: F401
    import explorer.views  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT))
    import model  # noqa: F401

import streamlit as st

from explorer import access, edges, export_ui, failures, i18n, inputs, models_ui, navigation, presenter, quota, state
from explorer.ui import busy, lang, show_figure, sync_url, t
from explorer.views import stages, style, tutorial002
from explorer.views.data import axis_tokens

log = logging.getLogger("attention_explorer")
EXAMPLES_DIR = ROOT / "assets" / "examples"
KEEP = ("lang", "model", "text", "sentence", "block", "layer", "head", "view", "query", "key",
        "pe_base", "pe_d_model", "pe_positions", "pe_dims", "pe_tutorial")
PE_BASES = (10.0, 100.0, 1000.0, 10000.0, 100000.0)


# --- small helpers -----------------------------------------------------------------------------

def keep(key: str, default):
    """Streamlit forgets a widget's value when the widget is not drawn; keep a shadow copy."""
    if key not in st.session_state:
        st.session_state[key] = st.session_state.get(f"_keep_{key}", default)
    return st.session_state[key]


def remember() -> None:
    for key in KEEP:
        if key in st.session_state:
            st.session_state[f"_keep_{key}"] = st.session_state[key]


def load_examples() -> list[str]:
    out: list[str] = []
    for path in sorted(EXAMPLES_DIR.glob("*.txt")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        block: list[str] = []
        for line in lines + [""]:
            if line.startswith("#"):
                continue
            if line.strip():
                block.append(line)
            elif block:
                out.append("\n".join(block))
                block = []
    return out


# --- the URL -------------------------------------------------------------------------------

def read_url_once() -> None:
    """On a session's first run, let the URL's query parameters set the state."""
    if st.session_state.get("_url_read"):
        return
    st.session_state["_url_read"] = True
    try:
        qp = {k: st.query_params.get_all(k) for k in st.query_params.keys()}
    except Exception:  # a malformed URL is no reason to fail
        qp = {}
    p = inputs.parse_params(qp, blocks=stages.BLOCKS, langs=i18n.LANGS)
    for k in ("lang", "model", "text", "view"):
        if k in p.values:
            st.session_state[k] = p.values[k]
    st.session_state["_url_block"] = p.values.get("block")
    st.session_state["_url_stage"] = p.values.get("stage")
    st.session_state["_url_ints"] = {k: p.values[k] for k in inputs.INT_PARAMS if k in p.values}
    msgs = [("bad_param", dict(name=n, value=v, why=i18n.t(w, p.values.get("lang", "en"), **a)))
            for n, v, w, a in p.ignored]
    msgs += [(n.key, n.args) for n in p.notices]
    st.session_state["_url_msgs"] = msgs


def url_int(name: str, n: int, messages: list) -> None:
    """Apply an integer from the URL (clipped to 0..n-1, with a message when it had to be)."""
    pending = st.session_state.get("_url_ints", {})
    if name not in pending:
        return
    value = pending.pop(name)
    used = inputs.clip(value, n)
    if used != value:
        messages.append(("clipped_param", dict(name=name, value=value, used=used)))
    st.session_state[name] = used


# --- the page -----------------------------------------------------------------------------

def sidebar_inputs() -> tuple[str, str]:
    sb = st.sidebar
    keep("lang", "en")
    sb.radio(i18n.t("language", lang()), i18n.LANGS, key="lang", horizontal=True,
             format_func=lambda x: i18n.LANG_NAMES[x])
    models_ui.picker(sb, keep("model", "seed"))  # built-in, configured and (local mode) typed models
    examples = load_examples()

    def use_example() -> None:
        ex = st.session_state.get("example")
        if ex:
            st.session_state["text"] = ex
        st.session_state["example"] = ""

    sb.selectbox(t("example"), ["", *examples], key="example", on_change=use_example,
                 format_func=lambda e: "—" if not e else style.plain_text(e.replace("\n", " / "), 48))
    keep("text", inputs.DEFAULT_TEXT)
    sb.text_area(t("text"), key="text", height=130, max_chars=inputs.MAX_BOX_CHARS,
                 help=t("text_help", n=inputs.MAX_SENTENCES, c=inputs.MAX_CHARS, t=inputs.MAX_TOKENS))
    return st.session_state["model"], st.session_state["text"]


def slider_or_note(label_key: str, key: str, n: int) -> int:
    st.session_state[key] = inputs.clip(keep(key, 0), n)
    if n > 1:
        st.sidebar.slider(t(label_key), 0, n - 1, key=key)
    else:
        st.sidebar.caption(t("only_one", what=t(label_key)))
    return int(st.session_state[key])


def sidebar_selection(info, texts: list[str], messages: list) -> stages.Selection:
    sb = st.sidebar
    url_int("sentence", len(texts), messages)
    st.session_state["sentence"] = inputs.clip(keep("sentence", 0), len(texts))
    sb.selectbox(t("sentence"), list(range(len(texts))), key="sentence",
                 format_func=lambda i: f"{i}: {style.plain_text(texts[i], 40)}")
    blocks = stages.blocks_for(info)
    url_block = st.session_state.pop("_url_block", None)
    if url_block is not None:
        if url_block in blocks:
            st.session_state["block"] = url_block
        else:
            messages.append(("bad_param", dict(name="block", value=url_block,
                                               why=t("why_choice", choices=", ".join(blocks)))))
    if keep("block", blocks[0]) not in blocks:
        st.session_state["block"] = blocks[0]
    sb.selectbox(t("block"), blocks, key="block", format_func=lambda b, lg=lang(): i18n.t(f"blocks.{b}", lg))
    block = st.session_state["block"]
    n_layers = stages.layers_for(info, block)
    url_int("layer", n_layers, messages)
    url_int("head", info.n_heads, messages)
    layer = slider_or_note("layer", "layer", n_layers)
    head = slider_or_note("head", "head", info.n_heads)
    kv_note = stages.kv_head_note(info, head, lang())
    if kv_note:
        sb.caption(kv_note)
    return stages.Selection(model=st.session_state["model"], sentence=int(st.session_state["sentence"]),
                            layer=layer, head=head, block=block,
                            query=int(keep("query", 0)), key=int(keep("key", 0)))


def show_messages(messages: list) -> None:
    for key, args in messages:
        st.warning(t(key, **args), icon="⚠️")


def show_generated(run, texts: list[str], m) -> None:
    if run.generated is None:
        return
    task = m.info.description.split("task:")[-1].strip() if "task:" in m.info.description else m.info.name
    task = t("untrained") if task == "untrained" else task
    gen = [g if g else t("generated_empty") for g in run.generated]
    # folded, so that the figure starts above the fold; plain text, never markup; and no table: the
    # browser's table component (1.2 MB of script) delayed the first figure of every new page
    with st.expander(t("generated_title", task=task), expanded=False):
        st.text("\n".join(f"{i}  {style.plain_text(x)}  →  {style.plain_text(g)}"
                          for i, (x, g) in enumerate(zip(texts, gen))))


class Page:
    """What every section needs: the run, the model's description, the selection, the language."""

    def __init__(self, run, info, sel: stages.Selection, texts: list[str]) -> None:
        self.run, self.info, self.sel, self.texts = run, info, sel, texts
        self.lang = lang()

    def meta(self, stage_id: str, options: dict | None = None) -> dict:
        text = self.texts[self.sel.sentence]
        edits, compare = stages.second_run(stage_id, options or {})
        return {"model": self.sel.model, "sentence": self.sel.sentence, "text": text,
                "block": self.sel.block, "layer": self.sel.layer, "head": self.sel.head,
                "stage": stage_id, "stage_title": stages.stage_title(stage_id, self.lang),
                "caption": stages.caption(self.sel.model, text, self.sel, stage_id, self.lang, edits=edits,
                                          compare=compare),
                "lang": self.lang, "selection": self.sel, "edits": edits, "compare": compare}

    def stage(self, stage_id: str, *, key: str | None = None, explain: bool = True, figure_first: bool = False,
              **options) -> None:
        """One stage: its words (title, explanation, formula, shapes), its figure with downloads and
        table, its note. ``figure_first`` (the one-stage page): the figure right under the navigation
        and the words under it, so the figure is on screen without scrolling on a laptop and on a
        projector, and the browser starts on it first (the formula's typesetting comes after)."""
        record = stages.REGISTRY[stage_id]
        box = True if explain and figure_first else None

        def write_words() -> None:  # the words follow the model, the block and the values drawn
            try:
                words = stages.stage_words(stage_id, self.run, self.info, self.sel, self.lang, **options)
            except Exception:
                log.exception("words of stage %s failed", stage_id)
                words = {"title": stages.stage_title(stage_id, self.lang), "explain": "", "formula": "", "shape": ""}
            st.subheader(words["title"], anchor=stage_id)
            st.markdown(words["explain"])
            if words["formula"]:
                st.latex(words["formula"])
            if words["shape"]:
                st.caption(f"{t('shape')}: {words['shape']}")

        if explain and box is None:
            write_words()
        try:
            fig, df = state.stage_figure(stage_id, self.sel.model, self.texts, self.run, self.info, self.sel,
                                         self.lang, **options)
            shown = None if record.click is None else state.stage_figure(
                stage_id, self.sel.model, self.texts, self.run, self.info, self.sel, self.lang,
                pick=record.click, **options)[0]
            note = stages.stage_note(stage_id, self.run, self.info, self.sel, self.lang)
        except Exception as e:  # one figure failing must not take the page down; the details go to the log
            st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "stage %s failed", stage_id)))
            note = None
        else:
            show_figure(fig, df, self.meta(stage_id, options), key or stage_id, click=record.click, shown=shown)
        if note:
            st.caption(note)
        if box is not None:
            write_words()


# --- controls around stages (a stage record names its group: Stage.controls) -------------------

def pe_controls(page: Page) -> dict:
    """Base n, d_model, positions and dimensions for the positional-encoding figures."""
    info = page.info
    base = float(info.positional_base or 10000.0)
    st.markdown(f"**{t('pe_controls')}**")
    n_tok = page.run[f"{stages.prefix(page.sel.block, page.sel.layer)}.hook_q"].shape[-2]
    keep("pe_tutorial", False)
    st.toggle(t("pe_tutorial"), key="pe_tutorial", help=t("pe_tutorial_help"),
              on_change=tutorial_toggle, args=(info,))
    c1, c2, c3 = st.columns(3)
    bases = sorted({*PE_BASES, base})  # the model's own base is always one of the choices
    if keep("pe_base", base) not in bases:
        st.session_state["pe_base"] = 10000.0
    c1.select_slider(t("pe_base"), bases, key="pe_base", format_func=lambda x: f"{x:g}")
    st.session_state["pe_d_model"] = int(min(max(int(keep("pe_d_model", info.d_model)), 2), 1024))
    c2.number_input(t("pe_d_model"), min_value=2, max_value=1024, step=2, key="pe_d_model")
    st.session_state["pe_positions"] = int(min(max(int(keep("pe_positions", n_tok)), 1), 512))
    c3.number_input(t("pe_positions"), min_value=1, max_value=512, step=1, key="pe_positions")
    d = int(st.session_state["pe_d_model"])
    dims = [x for x in keep("pe_dims", [0, 1, 4, 5]) if 0 <= x < d] or [0, 1]
    st.session_state["pe_dims"] = dims
    st.multiselect(t("pe_dims"), list(range(d)), key="pe_dims")
    chosen = float(st.session_state["pe_base"])
    opts = dict(pe_base=chosen, pe_d_model=d, pe_positions=int(st.session_state["pe_positions"]),
                pe_dims=list(st.session_state["pe_dims"]) or None)
    shared = {k: v for k, v in opts.items() if k != "pe_base"}
    out = {"pe_curves": opts, "pe_similarity": opts,
           "pe_compare": dict(shared, pe_bases=stages.compare_bases(info, chosen))}
    if st.session_state.get("pe_tutorial"):  # tutorial 002: its comparison and its numbers
        out["pe_compare"] = dict(shared, pe_bases=TUTORIAL_002["pe_bases"])
        out["pe_tutorial"] = {}
    return out


# tutorial 002's worked example (explorer/views/tutorial002.py), one click away
TUTORIAL_002 = tutorial002.PRESET


def tutorial_toggle(info) -> None:
    """On: the positional controls take tutorial 002's settings; off: this model's own again."""
    if st.session_state.get("pe_tutorial"):
        for k in ("pe_base", "pe_d_model", "pe_positions", "pe_dims"):
            st.session_state[k] = list(TUTORIAL_002[k]) if k == "pe_dims" else TUTORIAL_002[k]
    else:
        st.session_state["pe_base"] = float(info.positional_base or 10000.0)
        st.session_state["pe_d_model"] = info.d_model
        for k in ("pe_positions", "pe_dims", "_keep_pe_positions", "_keep_pe_dims"):
            st.session_state.pop(k, None)


def cell_controls(page: Page) -> dict:
    """The query and key of the one-cell derivation."""
    q_toks, k_toks, _, _ = axis_tokens(page.run, page.sel.block, page.sel.sentence, page.sel.layer)
    st.session_state["query"] = inputs.clip(keep("query", 0), len(q_toks))
    st.session_state["key"] = inputs.clip(keep("key", 0), len(k_toks))
    c1, c2 = st.columns(2)
    c1.selectbox(t("query_token"), list(range(len(q_toks))), key="query",
                 format_func=lambda i: f"{i}: {style.visible(q_toks[i])}")
    c2.selectbox(t("key_token"), list(range(len(k_toks))), key="key",
                 format_func=lambda j: f"{j}: {style.visible(k_toks[j])}")
    page.sel = replace(page.sel, query=int(st.session_state["query"]), key=int(st.session_state["key"]))
    return {}


def cell_formula(page: Page) -> None:
    """The one cell's chain with its numbers, and the check against the hooks."""
    try:
        n = stages.cell_numbers(page.run, page.info, page.sel)
        st.latex(
            rf"\frac{{q_{{{n['query']}}} \cdot k_{{{n['key']}}}}}{{\sqrt{{{n['d_head']}}}}} = "
            rf"\frac{{{n['dot']:.4f}}}{{{n['sqrt_d']:.4f}}} = {n['scaled']:.4f}"
            + (r"\;\xrightarrow{\text{" + t("tx.mask") + r"}}\;" + (f"{n['masked_score']:.4f}" if n["allowed"] else r"-\infty"))
            + r"\;\xrightarrow{\text{" + t("tx.softmax") + "}}\\; " + rf"A_{{{n['query']}{n['key']}}} = {n['weight']:.4f}")
        st.caption(t("cell_check", hs=f"{n['hook_score']:.5f}", rs=f"{n['scaled']:.5f}",
                     hw=f"{n['hook_weight']:.5f}", rw=f"{n['weight']:.5f}"))
    except Exception:
        log.exception("cell numbers failed")


def drill_controls(page: Page) -> None:
    """Below the overview: what H and d mean, and a head to open."""
    st.caption(t("overview_note"))
    n_layers = stages.layers_for(page.info, page.sel.block)
    layers = stages.overview_layers(n_layers, page.sel.layer)
    if len(layers) < n_layers:
        st.caption(t("overview_window", a=layers[0], b=layers[-1], n=n_layers))
    heads = [(li, h) for li in range(n_layers) for h in range(page.info.n_heads)]

    def drill() -> None:
        choice = st.session_state.get("drill")
        if choice:
            st.session_state["layer"], st.session_state["head"] = choice
            st.session_state["view"] = "scores"

    c1, c2 = st.columns([3, 1])
    c1.selectbox(t("drill_pick"), heads, index=heads.index((page.sel.layer, page.sel.head)),
                 key="drill", format_func=lambda x: f"L{x[0]} H{x[1]}")
    c2.button(t("drill"), key="drill_go", on_click=drill)


def next_position(page: Page) -> dict:
    """The position whose next token is shown (a new sentence starts at its last real token)."""
    toks = page.run.tokens[page.sel.sentence]
    ident = (page.sel.model, page.texts[page.sel.sentence])
    if st.session_state.get("_next_for") != ident or not 0 <= st.session_state.get("next_pos", -1) < len(toks):
        st.session_state["next_pos"] = len(toks) - 1
    st.session_state["_next_for"] = ident
    return {"next_token": {"next_position": int(st.session_state["next_pos"])}}


def next_position_picker(page: Page) -> None:
    toks = page.run.tokens[page.sel.sentence]
    st.selectbox(t("next_position"), list(range(len(toks))), key="next_pos",
                 format_func=lambda i: f"{i}: {style.visible(toks[i])}")


# group name -> (drawn before the group's first stage, returning {stage id: options}; drawn after each
# stage of the group)
CONTROLS = {
    "pe": (pe_controls, None),
    "cell": (cell_controls, cell_formula),
    "drill": (None, drill_controls),
    "next_position": (next_position, next_position_picker),
}


def render_section(section: str, page: Page) -> None:
    """Every stage of the section that applies to the model and block, with its controls."""
    options: dict[str, dict] = {}
    for sid in dict(stages.SECTIONS)[section]:
        if not stages.applies(sid, page.info, page.sel.block):
            continue
        group = stages.REGISTRY[sid].controls
        before, after = CONTROLS.get(group, (None, None))
        if group and group not in options:
            options[group] = (before(page) if before else None) or {}
        if stages.REGISTRY[sid].on_demand and sid not in options.get(group, {}):
            continue  # drawn only when its controls ask for it (e.g. the tutorial preset)
        page.stage(sid, **options.get(group, {}).get(sid, {}))
        if after:
            after(page)



# --- one stage at a time (the default view, `view=stage`, URL `stage=`) -------------------------
# A learner reads one idea at a time: the pipeline as one control to move along (a select box
# between back and forward: explorer/navigation.py reads it from the registry), and the chosen
# stage drawn large right under it, its words, controls and downloads below. It is also what makes
# a click cheap: a rerun of this page sends some thirty elements where "Everything" sends about 250
# (`python -m bench --only floor`).

STAGE_VIEW = navigation.STAGE_VIEW
DEFAULT_STAGE = inputs.DEFAULT_STAGE
KEEP += ("stage",)


def _go(entry: str | None) -> None:
    """The navigation's callback: the state (view, stage) from an entry (or from the select box)."""
    entry = entry or st.session_state.get("nav")
    if not entry:
        return
    view, sid = navigation.parse(entry)
    st.session_state["view"] = view
    if sid is not None:
        st.session_state["stage"] = sid


def navigate(page: Page) -> str:
    """The one navigation control (back, the select box of every stage and page, forward); returns
    the view chosen. A stage from the URL that this model or block lacks is named in a message."""
    ids = navigation.pipeline(page.info, page.sel.block)
    url_stage = st.session_state.pop("_url_stage", None)
    if url_stage is not None:
        if url_stage in ids:
            st.session_state["stage"] = url_stage
        else:
            show_messages([("bad_param", dict(name="stage", value=inputs.shown(url_stage),
                                              why=t("why_stage", model=page.sel.model)))])
    view = keep("view", STAGE_VIEW)
    if view not in inputs.VIEWS or (view == STAGE_VIEW and not ids):
        view = st.session_state["view"] = STAGE_VIEW if ids else "all"
    if ids and keep("stage", DEFAULT_STAGE) not in ids:  # not a stage of this model or block
        st.session_state["stage"] = DEFAULT_STAGE if DEFAULT_STAGE in ids else ids[0]
    every = navigation.entries(ids)
    here = navigation.value(view, st.session_state.get("stage"))
    st.session_state["nav"] = here
    back, forward = navigation.step(every, here, -1), navigation.step(every, here, +1)
    row = st.container(key="nav-row", horizontal=True, vertical_alignment="bottom", gap="small")
    row.button("←", key="nav_back", help=t("nav.back"), disabled=back is None, on_click=_go, args=(back,))
    row.selectbox(t("nav.label"), every, key="nav", on_change=_go, args=(None,), label_visibility="collapsed",
                  format_func=lambda e, lg=lang(): navigation.label(e, ids, lg))
    row.button("→", key="nav_forward", help=t("nav.forward"), disabled=forward is None, on_click=_go,
               args=(forward,))
    return view


def render_stage_view(page: Page) -> None:
    sid = st.session_state.get("stage")
    if sid not in navigation.pipeline(page.info, page.sel.block):
        return
    group = stages.REGISTRY[sid].controls
    before, after = CONTROLS.get(group, (None, None))
    options = ((before(page) if before else None) or {}) if group else {}
    page.stage(sid, figure_first=True, **options.get(sid, {}))
    if after:
        after(page)
    for extra in options:  # a stage the controls asked for (e.g. the tutorial preset)
        if extra != sid and extra in stages.REGISTRY and stages.REGISTRY[extra].on_demand:
            page.stage(extra, **options[extra])


SECTION_PAGES = {}  # sections drawn by a function of their own (filled below)


# --- the Decoding view (stage "decoding": explorer/views/decoding.py) --------------------------
# The trace is cached per model and sentence (state.trace); the figure holds every step as an
# animation frame, so its own slider and play/pause switch steps in the browser. The "step" widget
# below it sets the step the figure opens at, the URL's `step` and the downloads.

KEEP += ("step",)
OWN_VIEWS = navigation.OWN_VIEWS  # views of their own, not part of "all"


KEEP += ("dec_temperature", "dec_top_k", "dec_top_p", "dec_seed")


def sampling_controls() -> dict:
    """Temperature, top-k, top-p and a seed (the URL's `sample`); greedy while the temperature is 0."""
    if not st.session_state.get("_sample_url_read"):
        st.session_state["_sample_url_read"] = True
        got = inputs.parse_sampling(st.query_params.get("sample"))
        if got is not None:
            for k, v in zip(("dec_temperature", "dec_top_k", "dec_top_p", "dec_seed"), got):
                st.session_state[k] = v if v is not None else {"dec_top_k": 0, "dec_top_p": 1.0}[k]
    for k, v in (("dec_temperature", 0.0), ("dec_top_k", 0), ("dec_top_p", 1.0), ("dec_seed", 0)):
        keep(k, v)
    c1, c2, c3, c4 = st.columns(4)
    c1.number_input(t("decoding.temperature"), min_value=0.0, max_value=inputs.MAX_TEMPERATURE, step=0.1,
                    key="dec_temperature", help=t("decoding.temperature_help"))
    sampling = float(st.session_state["dec_temperature"]) > 0
    c2.number_input(t("decoding.top_k"), min_value=0, max_value=10**6, step=1, key="dec_top_k",
                    help=t("decoding.top_k_help"), disabled=not sampling)
    c3.number_input(t("decoding.top_p"), min_value=0.01, max_value=1.0, step=0.05, key="dec_top_p",
                    help=t("decoding.top_p_help"), disabled=not sampling)
    c4.number_input(t("decoding.seed"), min_value=0, max_value=inputs.MAX_SEED, step=1, key="dec_seed",
                    help=t("decoding.seed_help"), disabled=not sampling)
    s = st.session_state
    chosen = dict(temperature=float(s["dec_temperature"]), top_k=int(s["dec_top_k"]) or None,
                  top_p=None if float(s["dec_top_p"]) >= 1 else float(s["dec_top_p"]), seed=int(s["dec_seed"]))
    value = inputs.format_sampling(**chosen)
    if value:
        sync_url({"sample": value})
    elif "sample" in st.query_params:
        del st.query_params["sample"]
    return chosen if sampling else {}


def decoding_trace(page: Page) -> dict:
    """Attach the selected sentence's cached trace to the page's run; the step from the URL or the
    widget, clipped to the steps there are."""
    sampling = sampling_controls()
    try:
        with busy(("trace", page.sel.model, page.texts[page.sel.sentence], tuple(sampling.values()))):
            tr = state.trace(page.sel.model, page.texts[page.sel.sentence], **sampling)
    except Exception as e:  # the stage then says it has no trace
        st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "decoding failed")))
        return {}
    page.run = page.run.with_trace(tr)
    pending = st.session_state.get("_url_ints", {})
    if "step" in pending:
        value = pending.pop("step")
        used = inputs.clip(value, tr.n_steps)
        if used != value:
            st.warning(t("clipped_param", name="step", value=value, used=used), icon="⚠️")
        st.session_state["step"] = used
    st.session_state["step"] = inputs.clip(keep("step", 0), tr.n_steps)
    # the sampling enters the figure memo's key (the trace it draws is attached to the run, not keyed)
    return {"decoding": {"step": int(st.session_state["step"]), "sampling": tr.sampling}}


def decoding_details(page: Page) -> None:
    """Under the timeline: the step widget, the text at that step, GIF/PDF downloads, the words."""
    tr = stages.decoding_trace(page.run, page.sel.sentence)
    if tr is None:
        return
    if tr.n_steps > 1:
        st.slider(t("decoding.step_label"), 0, tr.n_steps - 1, key="step", help=t("decoding.step_help"))
    step = int(st.session_state["step"])
    q = int(tr.query[step])
    first = 1 if tr.kind == "encoder-decoder" else 0  # the seed decoder's column 0 is <s>
    st.caption(t("decoding.written_at", t=step))
    st.code("".join(tr.tokens[first: q + 1]) + " → " + style.visible(tr.chosen_tokens[step]), language=None)
    options = {"step": step, "sampling": tr.sampling}
    if tr.sampling:
        temp, k, p, seed = tr.sampling
        st.caption(t("decoding.sampling_note", T=f"{temp:g}", k=k or "—", p=f"{p:g}" if p else "—", seed=seed))
    fig, _ = state.stage_figure("decoding", page.sel.model, page.texts, page.run, page.info, page.sel, page.lang,
                                **options)
    export_ui.animation_downloads(fig, page.meta("decoding"), "decoding")
    st.markdown(t("decoding.cache", d=page.info.d_head))
    st.markdown(t("decoding.teacher_forcing"))
    sync_url({"step": step})


CONTROLS["decoding"] = (decoding_trace, decoding_details)


def render_decoding(section: str, page: Page) -> None:
    if not stages.applies("decoding", page.info):
        st.info(t("not_for_model", what=t("decoding.needs_decoder")), icon="ℹ️")
        return
    render_section(section, page)


SECTION_PAGES.update({"decoding": render_decoding, STAGE_VIEW: lambda _section, page: render_stage_view(page)})


def page() -> None:
    read_url_once()
    read_whatif_url()
    messages: list = list(st.session_state.pop("_url_msgs", []))
    name, raw = sidebar_inputs()
    head = st.container(key="page-head", horizontal=True, vertical_alignment="bottom", gap="medium")
    head.title(t("app_title"), anchor=False, width="content")
    head.caption(t("tagline"), width="content")

    texts, notices = inputs.limit_sentences(raw)
    if not texts:
        show_messages(messages)
        st.info(t("empty"), icon="✍️")
        sync_url({**models_ui.url_value(name), "lang": lang(), "text": ""})
        return

    try:
        with busy(("model", name)):
            m, fallback = state.load_model(name)
    except Exception as e:  # not fetched, a broken download, ...: a log id on the page, the details in the log
        ident = failures.logged(log, "loading %s failed", name)
        show_messages(messages)
        text = t("model_error", name=name, id=ident,
                 hint=t("fetch_hint", name=name) if name in model.registry.FETCHED else "")
        if isinstance(e, model.WeightsError) and not edges.guarded():
            # on a laptop the reader is the host: the loader's own words say how to fix it (a path in
            # models.toml, a file to fetch); a hosted or guarded page shows only the id
            text += "\n\n" + inputs.shown(str(e), 400)
        st.error(text)
        st.info(t("choose_other"))
        sync_url({**models_ui.url_value(name), "lang": lang()})
        return
    if fallback:
        st.warning(t("weights_missing", name=name, error=fallback), icon="⚠️")
        st.caption(t("fallback"))

    texts, tok_notices, n_tokens = state.limit_tokens(name, m, texts)
    notices += tok_notices
    with busy(("run", name, tuple(texts))):
        run = state.run(name, texts, n_tokens, m.info)

    info = m.info
    sel = sidebar_selection(info, texts, messages)
    if "query" in st.session_state.get("_url_ints", {}) or "key" in st.session_state.get("_url_ints", {}):
        p = stages.prefix(sel.block, sel.layer)
        tq, tk = run[f"{p}.hook_scores"].shape[-2:]
        url_int("query", tq, messages)
        url_int("key", tk, messages)
    show_messages(messages)
    for n in notices:
        st.info(t(n.key, **n.args), icon="✂️")
    shown_text = st.container(key="sentence-row", horizontal=True, vertical_alignment="center", gap="small")
    shown_text.caption(t("current", i=sel.sentence), width="content")
    shown_text.text(style.plain_text(texts[sel.sentence]))  # as typed, never markup (st.code's highlighter: 1.5 MB)
    show_generated(run, texts, m)

    pg = Page(run, info, sel, texts)
    view = navigate(pg)
    export_ui.sidebar(run, info, sel, texts, lang())  # export settings, before the figures
    # "all": the pipeline (decoding, what if and two sentences have views of their own)
    sections = [s for s, ids in stages.SECTIONS
                if s not in OWN_VIEWS and not all(stages.REGISTRY[i].needs for i in ids)] if view == "all" else [view]
    for section in sections:
        if view == "all":
            st.header(t(f"section_{section}"), divider="gray")
        SECTION_PAGES.get(section, render_section)(section, pg)

    sync_url({**models_ui.url_value(name), "lang": lang(), "text": "\n".join(texts), "sentence": sel.sentence,
              "block": sel.block, "layer": sel.layer, "head": sel.head, "view": view})
    if view == STAGE_VIEW and st.session_state.get("stage"):
        sync_url({"stage": st.session_state["stage"]})
    elif "stage" in st.query_params:
        del st.query_params["stage"]
    sync_whatif_url([st.session_state.get("stage")] if view == STAGE_VIEW
                    else [sid for sec in sections for sid in dict(stages.SECTIONS).get(sec, ())])


# --- what if, two sentences, click to drill (issue 15) ----------------------------------------
# The what-if section compares the run on screen with an edited run of the same sentences
# (model.edits); the edits' canonical string is the state (st.session_state["edit"], the URL's
# `edit`), the controls write it. The comparison section runs a second sentence (`compare`) on its
# own. Both pass the second run to their stages as an option (edited=, other=: stages.Stage.needs).

WHATIF_FLAGS = {"no_scale": "whatif.flag.no_scale", "no_causal": "whatif.flag.no_causal",
                "no_padding": "whatif.flag.no_padding", "no_position": "whatif.flag.no_position"}
ABLATE_KINDS = {"ablate": "whatif.kind.ablate", "ablate_mean": "whatif.kind.ablate_mean"}
KEEP += ("whatif_flags", "whatif_scale", "whatif_temperature", "whatif_ablations", "whatif_text", "compare")


def set_edit_controls(edits: model.edits.Edits) -> None:
    """Make the controls show ``edits`` (and the text box its canonical string)."""
    items = list(edits)
    scale = [e for e in items if isinstance(e, model.edits.Scale)]
    temp = [e for e in items if isinstance(e, model.edits.Temperature)]
    st.session_state["whatif_flags"] = [str(e) for e in items if str(e) in WHATIF_FLAGS]
    st.session_state["whatif_scale"] = scale[0].value if scale and scale[0].value != 1.0 else None
    st.session_state["whatif_temperature"] = temp[0].value if temp else None
    st.session_state["whatif_ablations"] = [str(e) for e in items if isinstance(e, model.edits.Ablate)]
    st.session_state["whatif_text"] = str(edits)


def set_edit(text: str) -> str | None:
    """Parse ``text``; on success it becomes the edit in force (and the controls show it) and None is
    returned; on an EditError the intact run is shown (no edit, controls cleared) and the message
    is returned."""
    try:
        edits = model.edits.parse(text)
    except model.edits.EditError as e:
        st.session_state["edit"] = ""
        set_edit_controls(model.edits.Edits())
        st.session_state["whatif_text"] = text
        return str(e)
    st.session_state["edit"] = str(edits)
    set_edit_controls(edits)
    return None


def _controls_text() -> str:
    s = st.session_state
    parts = [f for f in s.get("whatif_flags") or [] if f in WHATIF_FLAGS]
    if s.get("whatif_scale") is not None:
        parts.append(f"scale={s['whatif_scale']!r}")
    if s.get("whatif_temperature") is not None:
        parts.append(f"temperature={s['whatif_temperature']!r}")
    return ",".join(parts + list(s.get("whatif_ablations") or []))


def on_edit_controls() -> None:
    """A control changed: the edit string follows (or the message says why it cannot)."""
    text = _controls_text()
    error = set_edit(text)
    st.session_state["_whatif_error"] = None if error is None else (text, error)


def on_edit_text() -> None:
    """The text box changed: the controls follow (or the message says what is wrong)."""
    text = str(st.session_state.get("whatif_text") or "")[:inputs.MAX_EDIT_CHARS]
    error = set_edit(text)
    st.session_state["_whatif_error"] = None if error is None else (text, error)


def on_add_ablation() -> None:
    s = st.session_state
    head = s.get("whatif_ab_head", "*")
    item = f"{s.get('whatif_ab_kind', 'ablate')}={s.get('whatif_ab_block')}:{s.get('whatif_ab_layer', 0)}:{head}"
    s["whatif_ablations"] = list(dict.fromkeys([*(s.get("whatif_ablations") or []), item]))
    on_edit_controls()


def read_whatif_url() -> None:
    """Once per session, before anything is drawn: the URL's `edit` (a malformed one: a message,
    and the intact run) and `compare`. On every run: the second sentence outlives its text box
    (drawn only in its view), so the URL keeps it whatever the view."""
    keep("compare", "")
    if st.session_state.get("_whatif_url_read"):
        return
    st.session_state["_whatif_url_read"] = True
    try:
        edit, compare = st.query_params.get("edit"), st.query_params.get("compare")
    except Exception:  # a malformed URL is no reason to fail
        edit = compare = None
    if edit:
        error = set_edit(str(edit))
        if error is not None:
            st.session_state.setdefault("_url_msgs", []).append(
                ("whatif.bad_edit", dict(value=inputs.shown(edit), error=inputs.shown(error, 300))))
    if compare:
        st.session_state["compare"] = inputs.limit_compare(str(compare))[0]


def sync_whatif_url(shown: list[str]) -> None:
    """The URL follows the edits, the second sentence and the one-cell query/key (when on screen)."""
    values = {}
    for name, value in (("edit", st.session_state.get("edit", "")),
                        ("compare", inputs.limit_compare(st.session_state.get("compare", ""))[0])):
        if value:
            values[name] = value
        elif name in st.query_params:
            del st.query_params[name]
    # the selection's numbers a stage on screen declares as its URL's (Stage.url: the one cell's query and key)
    values.update({k: int(st.session_state.get(k, 0)) for k in stages.url_keys(shown) if k in inputs.INT_PARAMS})
    sync_url(values)


def whatif_controls(page: Page) -> dict:
    """The edits (flags, scale, temperature, heads switched off, or typed), and the edited run."""
    info, sel = page.info, page.sel
    st.markdown(f"**{t('whatif.controls')}**")
    keep("whatif_flags", [])
    keep("whatif_scale", None)
    keep("whatif_temperature", None)
    keep("whatif_ablations", [])
    keep("whatif_text", st.session_state.get("edit", ""))
    c1, c2, c3 = st.columns([2, 1, 1])
    c1.multiselect(t("whatif.flags"), list(WHATIF_FLAGS), key="whatif_flags", on_change=on_edit_controls,
                   format_func=lambda f: t(WHATIF_FLAGS[f]), placeholder=t("whatif.none"))
    for col, name, label in ((c2, "whatif_scale", "whatif.scale"), (c3, "whatif_temperature", "whatif.temperature")):
        col.number_input(t(label), min_value=model.edits.MIN_VALUE, value=None,  # None: off (clearable)
                         max_value=model.edits.MAX_VALUE, step=0.5, format="%g", key=name,
                         placeholder=t("whatif.off"), on_change=on_edit_controls)
    blocks = stages.blocks_for(info)
    if st.session_state.get("whatif_ab_block") not in blocks:
        st.session_state["whatif_ab_block"] = sel.block if sel.block in blocks else blocks[0]
    n_layers = stages.layers_for(info, st.session_state["whatif_ab_block"])
    if st.session_state.get("whatif_ab_layer") not in range(n_layers):
        st.session_state["whatif_ab_layer"] = min(sel.layer, n_layers - 1)
    if st.session_state.get("whatif_ab_head") not in ["*", *range(info.n_heads)]:
        st.session_state["whatif_ab_head"] = "*"
    a1, a2, a3, a4, a5 = st.columns([2, 2, 1, 1, 1], vertical_alignment="bottom")
    a1.selectbox(t("whatif.ablate_kind"), list(ABLATE_KINDS), key="whatif_ab_kind",
                 format_func=lambda k: t(ABLATE_KINDS[k]))
    a2.selectbox(t("whatif.ablate_block"), blocks, key="whatif_ab_block",
                 format_func=lambda b: i18n.t(f"blocks.{b}", lang()))
    a3.selectbox(t("whatif.ablate_layer"), list(range(n_layers)), key="whatif_ab_layer")
    a4.selectbox(t("whatif.ablate_head"), ["*", *range(info.n_heads)], key="whatif_ab_head",
                 format_func=lambda h: t("whatif.all_heads") if h == "*" else str(h))
    a5.button(t("whatif.add"), key="whatif_add", on_click=on_add_ablation, width="stretch")
    ablations = list(st.session_state.get("whatif_ablations") or [])
    if ablations:
        st.multiselect(t("whatif.ablations"), ablations, key="whatif_ablations", on_change=on_edit_controls)
    st.text_input(t("whatif.text"), key="whatif_text", on_change=on_edit_text, max_chars=inputs.MAX_EDIT_CHARS,
                  help=t("whatif.text_help", forms=", ".join(model.edits.FORMS)))
    failed = st.session_state.get("_whatif_error")
    if failed:
        st.warning(t("whatif.bad_edit", value=inputs.shown(failed[0]), error=inputs.shown(failed[1], 300)),
                   icon="⚠️")
    edit = st.session_state.get("edit", "")
    if not edit:
        return {}
    m, _ = state.load_model(sel.model)
    try:
        model.edits.check(m, model.edits.parse(edit))
        with busy(("run", sel.model, tuple(page.texts), edit), "whatif.running"):
            n_tokens = [len(toks) for toks in page.run.tokens]
            edited = state.run(sel.model, page.texts, n_tokens, info, edits=edit)
    except model.edits.EditError as e:
        st.warning(t("whatif.no_fit", model=sel.model, error=inputs.shown(str(e), 300)), icon="⚠️")
        return {}
    return {sid: {"edited": edited} for sid in dict(stages.SECTIONS)["whatif"]}


def compare_controls(page: Page) -> dict:
    """The second sentence, cut to the limits, and its run (of that sentence alone)."""
    keep("compare", "")
    st.text_input(t("compare.text"), key="compare", max_chars=2 * inputs.MAX_CHARS,
                  help=t("compare.help", c=inputs.MAX_CHARS, t=inputs.MAX_TOKENS))
    text, cut = inputs.limit_compare(st.session_state.get("compare", ""))
    if not text:
        return {}
    m, _ = state.load_model(page.sel.model)
    (text,), notices = inputs.limit_tokens([text], m.tokenizer, inputs.MAX_TOKENS)
    if cut or notices:
        st.info(t("compare.cut", c=inputs.MAX_CHARS, t=inputs.MAX_TOKENS), icon="✂️")
    with busy(("run", page.sel.model, (text,))):
        other = state.run(page.sel.model, [text], [len(m.tokenizer.encode([text])[0].ids)], page.info)
    return {sid: {"other": other} for sid in dict(stages.SECTIONS)["compare"]}


CONTROLS.update({
    "whatif": (whatif_controls, None),
    "compare": (compare_controls, None),
})


# --- activation patching (issue 26): the sentence on screen (clean) against the second one (corrupted) ----
# The stage never runs the model: these controls run the experiment (state.patching: cached, a progress
# bar, a cancel button, bounded when hosted) when asked, and hand the result over as the option `patching`.
PATCH_KINDS = {"positions": "patching.kind_positions", "heads": "patching.kind_heads"}
KEEP += ("patch_kind",)


def on_patch_cancel() -> None:
    st.session_state["_patch_want"] = None
    st.session_state["_patch_cancelled"] = True


def patching_controls(page: Page) -> dict:
    text, _ = inputs.limit_compare(st.session_state.get("compare", ""))
    if not text or not stages.applies("patching", page.info):
        return {}
    m, _ = state.load_model(page.sel.model)
    (text,), _ = inputs.limit_tokens([text], m.tokenizer, inputs.MAX_TOKENS)
    with busy(("run", page.sel.model, (text,))):
        other = state.run(page.sel.model, [text], [len(m.tokenizer.encode([text])[0].ids)], page.info)
    opts = {"other": other}
    n_a, n_b = len(page.run.tokens[page.sel.sentence]), len(other.tokens[0])
    if n_a != n_b:
        st.warning(t("patching.token_count", a=n_a, b=n_b), icon="⚠️")
        return {"patching": opts}
    if not st.session_state.get("_patch_url_read"):  # the URL's `patch` (positions | heads), once
        st.session_state["_patch_url_read"] = True
        if st.query_params.get("patch") in PATCH_KINDS:
            st.session_state["patch_kind"] = st.query_params["patch"]
    if keep("patch_kind", "positions") not in PATCH_KINDS:
        st.session_state["patch_kind"] = "positions"
    st.radio(t("patching.kind"), list(PATCH_KINDS), key="patch_kind", horizontal=True,
             format_func=lambda k: t(PATCH_KINDS[k]))
    kind = st.session_state["patch_kind"]
    sync_url({"patch": kind})
    clean = page.texts[page.sel.sentence]
    where = stages.patching_stack(page.info, page.sel.block) if kind == "positions" else page.sel.block
    from model import patching as mp

    n = mp.count_forwards(m, clean, text, kind, where.split(".")[0])
    bound = state.patch_bound()
    if bound is not None and n > bound:
        st.warning(t("patching.too_large", n=n, bound=bound), icon="⚠️")
        return {"patching": opts}
    ident = (page.sel.model, clean, text, kind, where)
    if st.button(t("patching.run", n=n), key="patch_go", type="primary"):
        st.session_state["_patch_want"] = ident
        st.session_state["_patch_cancelled"] = False
    if st.session_state.get("_patch_cancelled"):
        st.info(t("patching.cancelled"), icon="✋")
    if st.session_state.get("_patch_want") != ident:
        return {"patching": opts}
    box = st.empty()
    with box.container():
        bar = st.progress(0.0)
        st.button(t("patching.cancel"), key="patch_cancel", on_click=on_patch_cancel)

    def progress(done: int, total: int) -> None:  # also where a click on the page stops this run
        bar.progress(done / max(total, 1), text=t("patching.progress", done=done, total=total))

    try:
        result = state.patching(page.sel.model, clean, text, kind, where, progress=progress,
                                cancel=lambda: bool(st.session_state.get("_patch_cancelled")))
    except quota.Refused as e:  # this page's quota (hosted): when to try again
        box.empty()
        st.session_state["_patch_want"] = None
        st.warning(e.message(lang()), icon="⏳")
        return {"patching": opts}
    except (mp.PatchingError, mp.PatchingCancelled) as e:
        box.empty()
        st.warning(t("patching.failed", error=inputs.shown(str(e), 300)), icon="⚠️")
        return {"patching": opts}
    box.empty()
    return {"patching": {**opts, "patches": result}}


CONTROLS["patching"] = (patching_controls, None)


# --- beyond one head (issue 26): the logit lens and head roles attach what they read to the run ----
# The lens of the sentence on screen and the model's induction scores are made once (explorer/state.py)
# and attached to the page's run; the option "attached" names them, so that the figure memo never
# serves a figure built without them (export builds its own: explorer/export).
KEEP += ("role",)


def lens_controls(page: Page) -> dict:
    s = page.sel.sentence
    try:
        with busy(("lens", page.sel.model, tuple(page.texts), s), "lens.running"):
            made = state.lens(page.sel.model, page.texts, page.run, s)
    except quota.Refused as e:  # this page's quota (hosted): the stage says the lens is not made
        st.warning(e.message(lang()), icon="⏳")
        return {}
    except Exception as e:  # the stage then says the lens is not made
        st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "logit lens failed")))
        return {}
    page.run = page.run.with_lens(made)
    return {"logit_lens": {"attached": ("lens", page.texts[s])}}


def roles_controls(page: Page) -> dict:
    """The induction scores attached, and the role that colours the heads."""
    attached = None
    try:
        with busy(("induction", page.sel.model), "roles.running"):
            page.run = page.run.with_induction(state.induction(page.sel.model))
        attached = ("induction", page.sel.model)
    except Exception as e:
        st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "induction scores failed")))
    from explorer.views.analysis import ROLE_NAME, ROLES

    if not st.session_state.get("_role_url_read"):  # the URL's `role` once, as the page's other values
        st.session_state["_role_url_read"] = True
        if st.query_params.get("role") in ROLES:
            st.session_state["role"] = st.query_params.get("role")
    if keep("role", "induction") not in ROLES:
        st.session_state["role"] = "induction"
    st.selectbox(t("roles.choose"), list(ROLES), key="role",
                 format_func=lambda r, lg=lang(): i18n.fig_labels(lg)[ROLE_NAME[r]])
    sync_url({"role": st.session_state["role"]})
    return {"head_roles": {"role": st.session_state["role"], "attached": attached}}


CONTROLS.update({
    "lens": (lens_controls, None),
    "roles": (roles_controls, None),
})


LESSONS_PAGE = Path(__file__).resolve().parent / "lessons" / "page.py"  # its own URL path: /lessons


def pages() -> list:
    """The app's pages (st.navigation): the explorer at /, the lessons at /lessons."""
    lg = st.session_state.get("lang")
    if lg not in i18n.LANGS:  # a session's first run: the pages' names in the URL's language already
        lg = i18n.lang_or_default(st.query_params.get("lang"))
    # Material icons: the font ships with Streamlit (an emoji needs an emoji font: boxes without one)
    return [st.Page(page, title=i18n.t("nav.explorer", lg), icon=":material/search:", default=True),
            st.Page(LESSONS_PAGE, title=i18n.t("nav.lessons", lg), icon=":material/school:", url_path="lessons")]


def main() -> None:
    """What runs for every page, around the page itself: the page setup, the stylesheet, the process's
    preparation, the no-traceback guard and the shadow copies of the widgets' values."""
    st.set_page_config(page_title="Attention Explorer", page_icon="🔍", layout="wide")
    st.html(style.CELL_TEXT_CSS + style.PAGE_CSS)  # constants: cell numbers too small to read are hidden (phones)
    if not access.granted(pages):  # ATTENTION_EXPLORER_ACCESS_CODE set: nothing of any page before the code
        return
    state.prepare_process()
    shown = presenter.begin()  # ?present=1: large type, sidebar folded, a place for the QR code
    try:
        pg = st.navigation(pages())
        pg.run()
    except Exception as e:  # no traceback ever reaches the page
        ident = failures.logged(log, "the page failed")
        st.error(i18n.t("crash", i18n.lang_or_default(st.session_state.get("lang")), kind=type(e).__name__, id=ident))
    finally:
        remember()
        presenter.end(shown)  # the QR code of the URL as the page left it


main()
