"""Attention Explorer: ``streamlit run explorer/app.py`` from the repository root.

Thin wiring only: sidebar controls -> a cached run of the model (explorer/state.py) -> the stage
figures (explorer/views/stages.py) -> ``show_figure``. URL query parameters (model, text, layer,
head, block, sentence, lang, view, query, key) set the state on load and follow it.
"""
from __future__ import annotations

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

import pandas as pd
import streamlit as st

from explorer import export_ui, i18n, inputs, state
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


def lang() -> str:
    return i18n.lang_or_default(st.session_state.get("lang"))


def t(key: str, **kw) -> str:
    return i18n.t(key, lang(), **kw)


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


def show_figure(fig, df: pd.DataFrame | None, meta: dict, key: str) -> None:
    """Draw one figure, its download buttons (PNG, SVG, PDF, CSV: explorer/export_ui.py) and a
    switch that shows its numbers as a table. Every figure of the page goes through here.
    ``meta``: model, sentence, text, block, layer, head, stage, stage_title, caption, lang, selection.

    A table is built and sent only when its switch is on: a page has about twenty figures, and
    tables nobody opens were an eighth of the server's time per page."""
    st.plotly_chart(export_ui.display_figure(fig), width="stretch", key=f"chart-{key}",
                    config={"displaylogo": False, "toImageButtonOptions": {"filename": key}})
    export_ui.remember_shown(fig, df, meta)
    row = export_ui.figure_downloads(fig, df, meta, key)
    if df is None:
        return
    if row.toggle(i18n.t("table", meta.get("lang", "en")), key=f"{key}-table"):
        st.dataframe(state.arrow_table(df), width="stretch", height=min(420, 38 + 35 * len(df)))


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


def sync_url(values: dict) -> None:
    """Make the URL follow the state (only the parameters that changed, in one message)."""
    changed = {k: str(v) for k, v in values.items() if st.query_params.get(k) != str(v)}
    if changed:
        st.query_params.update(changed)


# --- the page -----------------------------------------------------------------------------

def sidebar_inputs() -> tuple[str, str]:
    sb = st.sidebar
    keep("lang", "en")
    sb.radio(i18n.t("language", lang()), i18n.LANGS, key="lang", horizontal=True,
             format_func=lambda x: i18n.LANG_NAMES[x])
    if keep("model", "seed") not in inputs.MODELS:
        st.session_state["model"] = "seed"
    sb.selectbox(t("model"), inputs.MODELS, key="model",
                 format_func=lambda m, lg=lang(): f"{m} — {i18n.t('models.' + m, lg)}")
    examples = load_examples()

    def use_example() -> None:
        ex = st.session_state.get("example")
        if ex:
            st.session_state["text"] = ex
        st.session_state["example"] = ""

    sb.selectbox(t("example"), ["", *examples], key="example", on_change=use_example,
                 format_func=lambda e: "—" if not e else style.plain_text(e.replace("\n", " / "), 48))
    keep("text", inputs.DEFAULT_TEXT)
    sb.text_area(t("text"), key="text", height=130,
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
    st.markdown(f"**{t('generated_title', task=task)}**")
    gen = [g if g else t("generated_empty") for g in run.generated]
    st.dataframe(pd.DataFrame({t("input"): texts, t("output"): gen}), width="stretch", hide_index=False)


class Page:
    """What every section needs: the run, the model's description, the selection, the language."""

    def __init__(self, run, info, sel: stages.Selection, texts: list[str]) -> None:
        self.run, self.info, self.sel, self.texts = run, info, sel, texts
        self.lang = lang()

    def meta(self, stage_id: str) -> dict:
        text = self.texts[self.sel.sentence]
        return {"model": self.sel.model, "sentence": self.sel.sentence, "text": text,
                "block": self.sel.block, "layer": self.sel.layer, "head": self.sel.head,
                "stage": stage_id, "stage_title": stages.stage_title(stage_id, self.lang),
                "caption": stages.caption(self.sel.model, text, self.sel, stage_id, self.lang),
                "lang": self.lang, "selection": self.sel}

    def stage(self, stage_id: str, *, key: str | None = None, explain: bool = True, **options) -> None:
        if explain:  # the words follow the model, the block and the values drawn
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
        try:
            fig, df = state.stage_figure(stage_id, self.sel.model, self.texts, self.run, self.info, self.sel,
                                         self.lang, **options)
            note = stages.stage_note(stage_id, self.run, self.info, self.sel, self.lang)
        except Exception as e:  # one figure failing must not take the page down
            log.exception("stage %s failed", stage_id)
            st.warning(t("stage_error", kind=type(e).__name__, msg=str(e)[:200]))
            return
        show_figure(fig, df, self.meta(stage_id), key or stage_id)
        if note:
            st.caption(note)


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


def page() -> None:
    read_url_once()
    messages: list = list(st.session_state.pop("_url_msgs", []))
    name, raw = sidebar_inputs()
    st.title(t("app_title"))
    st.caption(t("tagline"))

    texts, notices = inputs.limit_sentences(raw)
    if not texts:
        show_messages(messages)
        st.info(t("empty"), icon="✍️")
        sync_url({"model": name, "lang": lang(), "text": ""})
        return

    try:
        with st.spinner(t("running")):
            m, fallback = state.load_model(name)
    except model.WeightsError as e:
        show_messages(messages)
        st.error(t("model_error", name=name, error=str(e)))
        st.info(t("choose_other"))
        sync_url({"model": name, "lang": lang()})
        return
    except Exception as e:  # a loader that is not there yet, a broken download, ...
        log.exception("loading %s failed", name)
        show_messages(messages)
        st.error(t("model_error", name=name, error=f"{type(e).__name__}: {e}"))
        st.info(t("choose_other"))
        sync_url({"model": name, "lang": lang()})
        return
    if fallback:
        st.warning(t("weights_missing", name=name, error=fallback), icon="⚠️")
        st.caption(t("fallback"))

    texts, tok_notices = inputs.limit_tokens(texts, m.tokenizer, inputs.MAX_TOKENS)
    notices += tok_notices
    n_tokens = [len(e.ids) for e in m.tokenizer.encode(texts)]
    with st.spinner(t("running")):
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
    show_generated(run, texts, m)
    st.caption(t("current", i=sel.sentence))
    st.code(texts[sel.sentence], language=None)

    if keep("view", "all") not in inputs.VIEWS:
        st.session_state["view"] = "all"
    st.radio(t("view"), inputs.VIEWS, key="view", horizontal=True,
             format_func=lambda v, lg=lang(): i18n.t(f"section_{v}", lg))
    view = st.session_state["view"]
    pg = Page(run, info, sel, texts)
    export_ui.sidebar(run, info, sel, texts, lang())  # export settings, before the figures
    sections = [s for s, _ in stages.SECTIONS] if view == "all" else [view]
    for section in sections:
        if view == "all":
            st.header(t(f"section_{section}"), divider="gray")
        render_section(section, pg)

    sync_url({"model": name, "lang": lang(), "text": "\n".join(texts), "sentence": sel.sentence,
              "block": sel.block, "layer": sel.layer, "head": sel.head, "view": view})


def main() -> None:
    st.set_page_config(page_title="Attention Explorer", page_icon="🔍", layout="wide")
    st.html(style.CELL_TEXT_CSS)  # a constant: cell numbers too small to read are hidden (phones)
    state.prepare_process()
    try:
        page()
    except Exception as e:  # no traceback ever reaches the page
        log.exception("the page failed")
        st.error(i18n.t("crash", i18n.lang_or_default(st.session_state.get("lang")), kind=type(e).__name__))
    finally:
        remember()


main()
