"""Streamlit controls for export: the sidebar section (theme, PNG scale, "Export all") and the
row of download buttons under every figure.

    export_ui.sidebar(run, info, sel, texts, lang)           # once per page, before the figures
    export_ui.figure_downloads(fig, df, meta, key)           # under each figure (app.show_figure)

Images are rendered only when a button is clicked (``st.download_button`` with a callable), so
drawing the page never waits for chromium. Without chromium the image buttons are disabled, the
install command is shown, and CSV downloads keep working.

A rendered file is kept per figure (explorer/export/cache.py: the same figure, theme, caption and
language, format and scale give the same bytes at once, to any page). Where quotas apply
(explorer/quota.py: a hosted server) a page has one export in flight (a second click while one renders
is refused with a message under its button, not rendered) and renders at most
``ATTENTION_EXPLORER_EXPORT_RENDERS_PER_MINUTE`` images a minute (a timeline's GIF or PDF: one per
step); a file already made costs nothing. A failure shows a log id, the details go to the server's log.

"Export all" puts every stage of the current selection into one ZIP. A stage that is on the page
is exported exactly as shown (its figure is remembered by ``remember_shown``, with the options
the page used, e.g. the positional-encoding controls); the other stages are built with
``stage_figure``'s defaults.
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import replace

import streamlit as st

from explorer import export as ex
from explorer import failures, i18n, presenter, quota, state
from explorer.export.cache import RENDERED, figure_key
from explorer.views import stages
from explorer.views.theme import DEFAULT_THEME, THEME_NAMES, apply_theme

THEME_KEY, SCALE_KEY, PREVIEW_KEY = "export_theme", "export_scale", "export_preview"
SHOWN_KEY, ZIP_KEY = "_export_shown", "_export_zip"
_PREWARM_ENV = "ATTENTION_EXPLORER_PREWARM_EXPORT"
_prewarm_lock = threading.Lock()
_prewarmed = False
log = logging.getLogger("attention_explorer.export")
# Two buttons clicked at once prepare the same shared figure in two threads: plotly's copy of a figure
# (go.Figure(fig), validators shared by every figure) is not safe to run twice at once (seen: "Invalid property
# 'coloraxis' for Scatter" from the GIF and PDF of one timeline); preparing is short, so one at a time.
_PREPARE_LOCK = threading.Lock()
# (id of the page's figure, what prepare() adds, format, options) -> (that figure, the file's key): a shared
# figure's key is hashed once (a 25-step timeline's pages: ~1 s), not on every click; a weak reference to the
# figure tells whether the id is still that figure's (never keeping a figure alive)
_KEYS: OrderedDict = OrderedDict()
_KEYS_MAX = 128


def _t(lang: str, key: str, **kw) -> str:
    return i18n.t(f"export.{key}", lang, **kw)


OPEN_KEY = "export_open"
SETTINGS = (THEME_KEY, SCALE_KEY, PREVIEW_KEY)


def _setting(key: str, default):
    """A setting's value: its widget's, or (the section closed: the widget not drawn, so Streamlit
    forgot it) the copy kept when it was last drawn."""
    s = st.session_state
    return s[key] if key in s else s.get(f"_keep_{key}", default)


def settings() -> dict:
    """The export settings chosen in the sidebar (defaults before it is drawn)."""
    theme = _setting(THEME_KEY, DEFAULT_THEME)
    theme = theme if theme in THEME_NAMES else DEFAULT_THEME
    return {"theme": theme, "scale": int(_setting(SCALE_KEY, 2)),
            "preview": bool(_setting(PREVIEW_KEY, False)) and theme != "screen"}


def _prewarm() -> None:
    """Start chromium in the background once per process, when the deployment asks for it
    (ATTENTION_EXPLORER_PREWARM_EXPORT=1): then even the first export is warm."""
    global _prewarmed
    if os.environ.get(_PREWARM_ENV, "0") != "1":
        return
    with _prewarm_lock:
        if _prewarmed:
            return
        _prewarmed = True

    def run() -> None:
        try:
            ex.warm_up()
        except ex.ExportError:
            pass  # the buttons say so when clicked

    threading.Thread(target=run, name="export-prewarm", daemon=True).start()


def _meta(meta: dict) -> ex.ExportMeta:
    order = stages.STAGE_IDS
    stage = meta.get("stage", "figure")
    return ex.ExportMeta(model=str(meta.get("model", "")), sentence=int(meta.get("sentence", 0)),
                         text=str(meta.get("text", "")), block=str(meta.get("block", "")),
                         layer=int(meta.get("layer", 0)), head=int(meta.get("head", 0)),
                         stage=stage, stage_title=str(meta.get("stage_title", "")),
                         stage_index=order.index(stage) + 1 if stage in order else None,
                         edits=str(meta.get("edits", "")), compare=str(meta.get("compare", "")))


def _ident(sel, lang: str, model: str, text: str) -> str:
    """Which selection a figure belongs to (the one-cell query/key aside)."""
    return hashlib.sha1(repr((replace(sel, query=0, key=0), lang, model, text)).encode()
                        ).hexdigest()[:16]


# --- under every figure ---------------------------------------------------------------------

def display_figure(fig):
    """The figure to draw on the page: themed when the user asked for a preview; in presenter mode
    (explorer/presenter.py) always the presentation theme, and taller."""
    if presenter.active():
        return presenter.presented(fig)
    s = settings()
    return apply_theme(fig, s["theme"]) if s["preview"] else fig


def remember_shown(fig, df, meta: dict) -> None:
    """Remember a figure as the page shows it, for "Export all" (exactly what the page shows)."""
    sel = meta.get("selection")
    if sel is None:
        return
    em = _meta(meta)
    ident = _ident(sel, meta.get("lang", "en"), em.model, em.text)
    shown = st.session_state.get(SHOWN_KEY, {})
    # only the current selection's figures: "Export all" uses no other (``_items``), and keeping the
    # figure of every stage and selection a visitor ever saw kept them all alive for the session
    # (the soak's memory growth, `python -m bench --only soak`)
    shown = {k: v for k, v in shown.items() if v[0] == ident}
    shown[em.stage] = (ident, fig, df, {"edits": em.edits, "compare": em.compare})
    st.session_state[SHOWN_KEY] = shown


def _deferred(prepare, fmt: str, render, cost, lang: str, what: str, keyed=None, ident=None, **options):
    """The callable a download button runs when clicked (in a thread of its own, outside the script):
    the kept file when there is one; else, within the page's export quota, rendered once and kept.
    ``prepare()`` -> the figure to render; ``render(prepared)`` -> bytes; ``cost(prepared)`` -> images
    it renders; ``keyed(prepared)`` -> what identifies the file (default: the figure); ``ident``: (the
    page's figure, what prepare adds to it), to hash a figure's file key once. A refusal or a
    failure raises ``failures.Shown`` with the page's words (the button shows them); a failure's
    details go to the log under the id it shows."""
    sid = quota.session_id()  # the page, known now (the click runs where no page is current)

    def data() -> bytes:
        try:
            memo = None if ident is None else (id(ident[0]), *ident[1:], fmt, tuple(sorted(options.items())))
            with _PREPARE_LOCK:
                known = _KEYS.get(memo) if memo is not None else None
                if known is not None and known[0]() is ident[0]:
                    _KEYS.move_to_end(memo)
                    key, prepared = known[1], None
                else:
                    prepared = prepare()
                    key = figure_key(keyed(prepared) if keyed else prepared, fmt, **options)
                    if memo is not None:
                        _KEYS[memo] = (weakref.ref(ident[0]), key)
                        while len(_KEYS) > _KEYS_MAX:
                            _KEYS.popitem(last=False)
            kept = RENDERED.peek(key)
            if kept is not None:
                return kept
            if prepared is None:  # a key known, its file since dropped: prepared again
                with _PREPARE_LOCK:
                    prepared = prepare()
            with quota.flight("export", session=sid):
                if RENDERED.peek(key) is None:
                    quota.charge("export", cost(prepared), session=sid)
                return RENDERED.get(key, lambda: render(prepared))
        except quota.Refused as e:
            raise failures.Shown(e.message(lang)) from None
        except Exception:
            log_id = failures.logged(log, "%s export of %s failed", fmt, what)
            raise failures.Shown(i18n.t("export_error", lang, id=log_id)) from None

    return data


def figure_downloads(fig, df, meta: dict, key: str):
    """PNG, SVG, PDF and CSV download buttons for one figure, in one row (returned: the caller may
    add to it).

    ``fig`` is the figure as the views built it (never mutated); ``meta`` the app's figure
    description (model, sentence, text, block, layer, head, stage, stage_title, caption, lang,
    selection); ``key`` unique on the page.
    """
    s, lang = settings(), meta.get("lang", "en")
    em = _meta(meta)
    caption = meta.get("caption")
    reason = ex.unavailable_reason()
    stem = ex.file_stem(em)  # the sentence's letters, digits, "_" in it: shown as code (a help is markdown)
    row = st.container(horizontal=True, gap="small", vertical_alignment="center")
    for fmt in ex.IMAGE_FORMATS:
        scale = s["scale"] if fmt == "png" else 1  # vector formats ignore it (renderer.figure_bytes)
        data = _deferred(lambda: ex.prepare(fig, em, theme=s["theme"], caption=caption), fmt,
                         lambda prepared, fmt=fmt, scale=scale: ex.figure_bytes(prepared, fmt, scale=scale),
                         lambda prepared: 1, lang, em.stage, ident=(fig, em, s["theme"], caption), scale=scale)

        row.download_button(
            fmt.upper(), data=data, file_name=f"{stem}.{fmt}", mime=ex.MIME[fmt],
            key=f"{key}-dl-{fmt}", on_click="ignore", disabled=reason is not None,
            icon=":material/download:", width="stretch",
            help=_t(lang, "unavailable", reason=reason.reason, install=reason.install)
            if reason else f"`{stem}.{fmt}`")
    row.download_button(
        "CSV", data=(lambda: ex.table_bytes(df)) if df is not None else b"",
        file_name=f"{stem}.csv", mime=ex.MIME["csv"], key=f"{key}-dl-csv", on_click="ignore",
        disabled=df is None, icon=":material/table:", width="stretch", help=f"`{stem}.csv`")
    return row


# --- the sidebar ----------------------------------------------------------------------------

def sidebar(run, info, sel, texts: list[str], lang: str = "en") -> dict:
    """The sidebar's export section; draw it before the figures. Returns ``settings()``.

    Behind a switch: closed, it is one element instead of about fifteen on every rerun of every
    page (issue 23: a click's cost is counted in elements); its settings are kept while closed."""
    if not st.sidebar.toggle(_t(lang, "export"), key=OPEN_KEY):
        return settings()
    for key in SETTINGS:  # the section reopened: its widgets start from the kept values
        if key not in st.session_state and f"_keep_{key}" in st.session_state:
            st.session_state[key] = st.session_state[f"_keep_{key}"]
    with st.sidebar.container(border=True):
        if st.session_state.get(THEME_KEY) not in THEME_NAMES:
            st.session_state[THEME_KEY] = DEFAULT_THEME
        st.radio(_t(lang, "theme"), THEME_NAMES, key=THEME_KEY, format_func=lambda n: _t(lang, n))
        st.checkbox(_t(lang, "preview"), key=PREVIEW_KEY,
                    disabled=st.session_state[THEME_KEY] == "screen")
        if st.session_state.get(SCALE_KEY) not in (2, 3, 4):
            st.session_state[SCALE_KEY] = 2
        st.select_slider(_t(lang, "scale"), options=[2, 3, 4], key=SCALE_KEY)
        reason = ex.unavailable_reason()
        if reason is not None:
            st.warning(_t(lang, "unavailable", reason=reason.reason, install=reason.install))
        else:
            if ex.cjk_font_missing():
                st.warning(_t(lang, "no_cjk_font", install=ex.INSTALL_COMMAND))
            _prewarm()
        st.divider()
        export_all(run, info, sel, texts, lang, reason)
    for key in SETTINGS:
        if key in st.session_state:
            st.session_state[f"_keep_{key}"] = st.session_state[key]
    return settings()


def export_all(run, info, sel, texts: list[str], lang: str, reason) -> None:
    """Format checkboxes, "Prepare ZIP" (with a progress bar), then the download button."""
    st.markdown(f"**{_t(lang, 'all')}**")
    chosen = []
    cols = st.columns(len(ex.FORMATS))
    for col, fmt in zip(cols, ex.FORMATS):
        image = fmt in ex.IMAGE_FORMATS
        default = fmt in ("png", "csv") if reason is None else fmt == "csv"
        on = col.checkbox(fmt.upper(), value=default, key=f"export_all_{fmt}",
                          disabled=image and reason is not None)
        if on and not (image and reason is not None):
            chosen.append(fmt)
    if not chosen:
        st.caption(_t(lang, "none"))
        return
    s = settings()
    text = texts[sel.sentence]
    ident = _ident(sel, lang, sel.model, text)
    want = hashlib.sha1(repr((ident, s["theme"], s["scale"], chosen)).encode()).hexdigest()
    if st.button(_t(lang, "prepare"), key="export_all_prepare", icon=":material/folder_zip:",
                 width="stretch"):
        bar = st.progress(0.0)

        def step(done: int, total: int, what: str) -> None:
            bar.progress(done / max(total, 1),
                         text=_t(lang, "preparing", done=done, total=total, what=what[-28:]))

        data = None
        try:
            items = _items(run, info, sel, texts, lang, s["theme"], ident)
            images = sum(1 for fmt in chosen if fmt in ex.IMAGE_FORMATS) * len(items)
            with quota.flight("export"):  # one export in flight per page, within its quota
                quota.charge("export", max(1, images))
                data = ex.zip_items(items, chosen, theme=s["theme"], scale=s["scale"], lang=lang,
                                    progress=step)
        except quota.Refused as e:
            st.warning(e.message(lang), icon="⏳")
        except ex.ExportError:  # a log id on the page, the details in the log
            st.error(i18n.t("export_error", lang, id=failures.logged(log, "ZIP export failed")))
        bar.empty()
        st.session_state[ZIP_KEY] = (want, data) if data else None
    stored = st.session_state.get(ZIP_KEY)
    if stored and stored[0] == want:
        meta = ex.ExportMeta(sel.model, sel.sentence, text, sel.block, sel.layer, sel.head, "all")
        st.download_button(_t(lang, "download_zip"), data=stored[1],
                           file_name=ex.file_stem(meta).rsplit("_", 1)[0] + ".zip",
                           mime=ex.MIME["zip"], key="export_all_download", on_click="ignore",
                           icon=":material/download:", type="primary", width="stretch")
    elif stored:
        st.caption(_t(lang, "stale"))


def _items(run, info, sel, texts: list[str], lang: str, theme: str, ident: str) -> list[ex.Item]:
    """Every stage: as last shown on the page when it was, else built with default options. A
    what-if or comparison stage (one that needs a second run) only as shown, with its edits or
    second sentence."""
    shown = st.session_state.get(SHOWN_KEY, {})
    text = texts[sel.sentence]
    items = []
    for sid in stages.STAGE_IDS:
        if not stages.applies(sid, info, sel.block):  # e.g. rotary figures for a model with learned positions
            continue
        if stages.REGISTRY[sid].on_demand and not (sid in shown and shown[sid][0] == ident):
            continue  # e.g. the tutorial preset: exported when it is on the page
        fig = df = None
        extra: dict = {}
        if sid in shown and shown[sid][0] == ident:
            _, fig, df, extra = shown[sid]
        if stages.REGISTRY[sid].needs and not any(extra.values()):  # never shown with its second run
            continue
        if fig is None:
            fig, df = state.stage_figure(sid, sel.model, texts, run, info, sel, lang)
        items.append(ex.stage_item(sid, run, info, sel, model_name=sel.model, text=text,
                                   theme=theme, lang=lang, fig=fig, df=df, **extra))
    return items


# --- figures with animation frames (the Decoding view's timeline) ----------------------------------

def animation_downloads(fig, meta: dict, key: str) -> None:
    """GIF (every frame) and PDF (one page per frame) download buttons for a figure with animation
    frames; rendered only when clicked (one chromium render per frame: a 40-step timeline takes
    40 renders)."""
    s, lang = settings(), meta.get("lang", "en")
    em = _meta(meta)
    caption = meta.get("caption")
    reason = ex.unavailable_reason()
    stem = ex.file_stem(em)
    row = st.container(horizontal=True, gap="small", vertical_alignment="center")
    for fmt, label in (("gif", i18n.t("decoding.gif", lang)), ("pdf", i18n.t("decoding.pdf", lang))):
        data = _deferred(lambda: ex.prepare(fig, em, theme=s["theme"], caption=caption), f"{fmt}-steps",
                         ex.gif_bytes if fmt == "gif" else ex.pdf_pages_bytes,
                         lambda prepared: max(1, len(prepared.frames)), lang, em.stage,
                         keyed=ex.step_figures,  # its pages: the same file whatever step the page shows
                         ident=(fig, em, s["theme"], caption))

        row.download_button(
            label, data=data, file_name=f"{stem}-steps.{fmt}", mime=ex.MIME[fmt], key=f"{key}-dl-steps-{fmt}",
            on_click="ignore", disabled=reason is not None, icon=":material/animated_images:" if fmt == "gif"
            else ":material/picture_as_pdf:", width="stretch",
            help=_t(lang, "unavailable", reason=reason.reason, install=reason.install)
            if reason else f"`{stem}-steps.{fmt}`")
