"""Streamlit controls for export: download buttons under each figure, the sidebar export
settings, and "Export all" (one ZIP for the current selection).

Images are rendered only when a button is clicked (``st.download_button`` with a callable), so
drawing the page never waits for chromium. Without chromium the image buttons are disabled, the
install command is shown once, and CSV downloads keep working.
"""
from __future__ import annotations

import hashlib
import os
import threading

import streamlit as st

from explorer import export as ex
from explorer.views.theme import DEFAULT_THEME, THEME_NAMES

LABELS = {
    "en": {"export": "Export", "theme": "Export theme", "scale": "PNG scale",
           "screen": "screen (as shown)", "presentation": "presentation (slides, 16:9)",
           "preview": "Show figures in the export theme",
           "unavailable": "Image export is unavailable: {reason} Install: `{install}` "
                          "(CSV downloads still work).",
           "all": "Export all stages", "formats": "Formats", "prepare": "Prepare ZIP",
           "download_zip": "Download ZIP", "preparing": "Rendering {what}",
           "none": "Choose at least one format.", "failed": "Export failed: {error}"},
    "ko": {"export": "내보내기", "theme": "내보내기 테마", "scale": "PNG 배율",
           "screen": "화면 (보이는 그대로)", "presentation": "발표용 (슬라이드, 16:9)",
           "preview": "화면에도 내보내기 테마 적용",
           "unavailable": "이미지 내보내기를 쓸 수 없습니다: {reason} 설치: `{install}` "
                          "(CSV 다운로드는 됩니다).",
           "all": "모든 단계 내보내기", "formats": "형식", "prepare": "ZIP 만들기",
           "download_zip": "ZIP 다운로드", "preparing": "{what} 그리는 중",
           "none": "형식을 하나 이상 고르세요.", "failed": "내보내기 실패: {error}"},
}
_PREWARM_ENV = "ATTENTION_EXPLORER_PREWARM_EXPORT"
_prewarm_lock = threading.Lock()
_prewarmed = False


def _t(lang: str, key: str, **kw) -> str:
    text = LABELS.get(lang, LABELS["en"]).get(key) or LABELS["en"][key]
    return text.format(**kw) if kw else text


def _prewarm() -> None:
    """Start chromium in the background once per process, when the deployment asks for it."""
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
            pass  # the buttons report it when clicked

    threading.Thread(target=run, name="export-prewarm", daemon=True).start()


def sidebar_controls(lang: str = "en") -> dict:
    """The export settings, to be drawn inside ``with st.sidebar:``.

    Returns ``{"theme": str, "scale": int, "preview": bool}``.
    """
    with st.expander(_t(lang, "export")):
        theme = st.radio(_t(lang, "theme"), THEME_NAMES, index=THEME_NAMES.index(DEFAULT_THEME),
                         format_func=lambda n: _t(lang, n), key="export_theme")
        preview = st.checkbox(_t(lang, "preview"), value=False, key="export_preview",
                              disabled=theme == "screen")
        scale = st.select_slider(_t(lang, "scale"), options=[2, 3, 4], value=2,
                                 key="export_scale")
        reason = ex.unavailable_reason()
        if reason is not None:
            st.warning(_t(lang, "unavailable", reason=reason.reason, install=reason.install))
        else:
            _prewarm()
    return {"theme": theme, "scale": int(scale), "preview": bool(preview and theme != "screen")}


def _render(fig, meta, fmt: str, theme: str, scale: int, caption: str | None):
    def data() -> bytes:
        return ex.figure_bytes(ex.prepare(fig, meta, theme=theme, caption=caption), fmt,
                               scale=scale)

    return data


def figure_downloads(fig, df, meta: ex.ExportMeta, key: str, *, theme: str = DEFAULT_THEME,
                     scale: int = 2, caption: str | None = None, lang: str = "en") -> None:
    """One row of download buttons (PNG, SVG, PDF, CSV) for one figure on the page.

    ``fig`` is the figure as the views built it (unthemed); ``key`` must be unique on the page.
    """
    reason = ex.unavailable_reason()
    stem = ex.file_stem(meta)
    cols = st.columns(4, gap="small")
    for col, fmt in zip(cols, ex.IMAGE_FORMATS):
        with col:
            st.download_button(
                fmt.upper(), data=_render(fig, meta, fmt, theme, scale, caption),
                file_name=f"{stem}.{fmt}", mime=ex.MIME[fmt], key=f"{key}-dl-{fmt}",
                on_click="ignore", disabled=reason is not None, icon=":material/download:",
                help=(reason and str(reason)) or f"{stem}.{fmt}", width="stretch")
    with cols[3]:
        st.download_button(
            "CSV", data=ex.table_bytes(df) if df is not None else b"",
            file_name=f"{stem}.csv", mime=ex.MIME["csv"], key=f"{key}-dl-csv",
            on_click="ignore", disabled=df is None, icon=":material/table:",
            help=f"{stem}.csv", width="stretch")


def export_all(cache, info, sel, *, model_name: str, text: str, theme: str = DEFAULT_THEME,
               scale: int = 2, lang: str = "en", key: str = "export-all") -> None:
    """Format checkboxes, a "Prepare ZIP" button with a progress bar, then the download."""
    reason = ex.unavailable_reason()
    st.markdown(f"**{_t(lang, 'all')}**")
    cols = st.columns(4)
    chosen = []
    for col, fmt in zip(cols, ex.FORMATS):
        with col:
            image = fmt in ex.IMAGE_FORMATS
            on = st.checkbox(fmt.upper(), value=fmt in ("png", "csv") if reason is None
                             else fmt == "csv", key=f"{key}-{fmt}",
                             disabled=image and reason is not None)
            if on and not (image and reason is not None):
                chosen.append(fmt)
    if reason is not None:
        st.caption(_t(lang, "unavailable", reason=reason.reason, install=reason.install))
    if not chosen:
        st.caption(_t(lang, "none"))
        return
    ident = hashlib.sha1(repr((model_name, text, sel, theme, scale, lang, chosen)).encode()
                         ).hexdigest()[:16]
    state_key = f"{key}-zip"
    if st.button(_t(lang, "prepare"), key=f"{key}-prepare", icon=":material/folder_zip:"):
        bar = st.progress(0.0)

        def step(done: int, total: int, what: str) -> None:
            bar.progress(done / max(total, 1), text=_t(lang, "preparing", what=what))

        try:
            data = ex.bundle_zip(cache, info, sel, model_name=model_name, text=text,
                                 formats=chosen, theme=theme, lang=lang, scale=scale,
                                 progress=step)
        except ex.ExportError as e:
            bar.empty()
            st.error(_t(lang, "failed", error=e))
            return
        bar.empty()
        st.session_state[state_key] = (ident, data)
    stored = st.session_state.get(state_key)
    if stored and stored[0] == ident:
        meta = ex.ExportMeta(model_name, sel.sentence, text, sel.block, sel.layer, sel.head, "all")
        name = ex.file_stem(meta).rsplit("_", 1)[0] + ".zip"
        st.download_button(_t(lang, "download_zip"), data=stored[1], file_name=name,
                           mime=ex.MIME["zip"], key=f"{key}-download", on_click="ignore",
                           icon=":material/download:", type="primary")
