"""Attention Explorer's page: what every session runs (``streamlit run explorer/app.py`` serves it,
and warms it up at the server's start: explorer/app.py; ``streamlit run explorer/main.py`` runs it
without the warm-up).

Wiring only: the sidebar -> a cached run of the model (explorer/state.py) -> the navigation
(explorer/navigation.py) -> the chosen stages' figures (explorer/views/stages.py), each with the
controls its record names (explorer/controls/) -> ``show_figure``. The URL is read in one place
(explorer/url.py) and follows the state; ``present=1`` is presenter mode (explorer/presenter.py).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
try:  # `streamlit run explorer/app.py` puts explorer/ (not the root) on sys.path
    import model  # noqa: F401
    import explorer.views  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT))
    import model  # noqa: F401

import streamlit as st

from explorer import (access, edges, export_ui, failures, i18n, inputs, models_ui, navigation, poll_ui, presenter, state,
                      training_ui, url)
from explorer.controls import analysis, cell, decoding, next_token, overview, patching, positional, whatif, why  # noqa: F401 (each registers its groups)
from explorer.controls.base import CONTROLS, Page
from explorer import long_ui
from explorer.session import keep, remember, show_messages
from explorer.ui import busy, lang, sync_url, t
from explorer.views import stages, style

log = logging.getLogger("attention_explorer")


def sidebar_inputs() -> tuple[str, str]:
    sb = st.sidebar
    keep("lang", "en")
    sb.radio(i18n.t("language", lang()), i18n.LANGS, key="lang", horizontal=True,
             format_func=lambda x: i18n.LANG_NAMES[x])
    models_ui.picker(sb, keep("model", "seed"))  # built-in, configured and (local mode) typed models
    examples = inputs.load_examples()

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


def sidebar_selection(info, texts: list[str], messages: list, key: str) -> stages.Selection:
    """``key``: the weights shown (the model's name, or a training checkpoint's "seed@400")."""
    sb = st.sidebar
    url.url_int("sentence", len(texts), messages)
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
    url.url_int("layer", n_layers, messages)
    url.url_int("head", info.n_heads, messages)
    layer = slider_or_note("layer", "layer", n_layers)
    head = slider_or_note("head", "head", info.n_heads)
    kv_note = stages.kv_head_note(info, head, lang())
    if kv_note:
        sb.caption(kv_note)
    return stages.Selection(model=key, sentence=int(st.session_state["sentence"]),
                            layer=layer, head=head, block=block,
                            query=int(keep("query", 0)), key=int(keep("key", 0)))


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
OWN_VIEWS = navigation.OWN_VIEWS  # views of their own, not part of "all"


def render_decoding(section: str, page: Page) -> None:
    if not stages.applies("decoding", page.info):
        st.info(t("not_for_model", what=t("decoding.needs_decoder")), icon="ℹ️")
        return
    render_section(section, page)


SECTION_PAGES.update({"decoding": render_decoding, STAGE_VIEW: lambda _section, page: render_stage_view(page)})
SECTION_PAGES["long"] = long_ui.render  # issue 34: the whole text as one sequence, one head at scale


def page() -> None:
    url.read_once()
    keep("compare", "")  # the second sentence outlives its text box (drawn only in its view)
    messages: list = list(st.session_state.pop("_url_msgs", []))
    name, raw = sidebar_inputs()
    key = training_ui.sidebar(name, messages)  # a model with training checkpoints: the step shown (issue 35)
    head = st.container(key="page-head", horizontal=True, vertical_alignment="bottom", gap="medium")
    head.title(t("app_title"), anchor=False, width="content")
    head.caption(t("tagline"), width="content")

    texts, notices = inputs.limit_sentences(raw)
    long_view = st.session_state.get("view") == "long"  # it reads the whole box itself (explorer/long_ui.py):
    if long_view:  # the page's own run (sidebar, navigation) takes its first sentence only, not eight
        texts = texts[:1]
    if not texts:
        show_messages(messages)
        st.info(t("empty"), icon="✍️")
        sync_url({**models_ui.url_value(name), "lang": lang(), "text": ""})
        return

    try:
        with busy(("model", key)):
            m, fallback = state.load_model(key)
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

    texts, tok_notices, n_tokens = state.limit_tokens(key, m, texts)
    notices += tok_notices
    with busy(("run", key, tuple(texts))):
        run = state.run(key, texts, n_tokens, m.info, next_tokens="last")  # others: on demand

    info = m.info
    sel = sidebar_selection(info, texts, messages, key)
    if "query" in st.session_state.get("_url_ints", {}) or "key" in st.session_state.get("_url_ints", {}):
        p = stages.prefix(sel.block, sel.layer)
        tq, tk = run[f"{p}.hook_scores"].shape[-2:]
        url.url_int("query", tq, messages)
        url.url_int("key", tk, messages)
    show_messages(messages)
    for n in notices:  # the long view's cut is its own (the box's still shown)
        if not long_view or n.key == "box_cut":
            st.info(t(n.key, **n.args), icon="✂️")
    if not long_view:  # the long view says itself what it reads (the whole box)
        shown_text = st.container(key="sentence-row", horizontal=True, vertical_alignment="center", gap="small")
        shown_text.caption(t("current", i=sel.sentence), width="content")
        shown_text.text(style.plain_text(texts[sel.sentence]))  # as typed, never markup (st.code's highlighter: 1.5 MB)
        show_generated(run, texts, m)

    pg = Page(run, info, sel, texts)
    poll_ui.offer_view(run, sel, texts)  # presenter mode: "which token does this head attend to?" for the class
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
    url.follow([st.session_state.get("stage")] if view == STAGE_VIEW
                    else [sid for sec in sections for sid in dict(stages.SECTIONS).get(sec, ())])


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
    if poll_ui.wanted():  # ?poll=<id>: a learner answers the presenter's question (no model, no navigation)
        poll_ui.learner_page()
        return
    state.prepare_process()
    shown = presenter.begin()  # ?present=1: large type, sidebar folded, a place for the QR code
    poll_ui.begin(shown)  # presenter mode: the "Ask the class" button and the poll's place above the page
    try:
        pg = st.navigation(pages())
        pg.run()
    except Exception as e:  # no traceback ever reaches the page
        ident = failures.logged(log, "the page failed")
        st.error(i18n.t("crash", i18n.lang_or_default(st.session_state.get("lang")), kind=type(e).__name__, id=ident))
    finally:
        remember()
        presenter.end(shown)  # the QR code of the URL as the page left it
        poll_ui.end(shown)  # the questions the page offered, and the poll on show


main()
