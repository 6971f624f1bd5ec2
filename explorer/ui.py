"""Streamlit helpers shared by the app's pages (the explorer, the lessons): the page's language and
words, the URL following the state, a figure with its downloads and table, and what a click on a
figure chooses."""
from __future__ import annotations

import contextlib
import functools

import pandas as pd
import streamlit as st

from explorer import export_ui, i18n, state
from explorer.views import picking


def lang() -> str:
    """The page's language (the sidebar's choice; English until there is one)."""
    return i18n.lang_or_default(st.session_state.get("lang"))


def t(key: str, **kw) -> str:
    """The catalogue's words for ``key`` in the page's language."""
    return i18n.t(key, lang(), **kw)


_DONE: dict = {}  # what this process has computed once (insertion order: the oldest first)
_DONE_MAX = 512


def busy(ident, key: str = "running"):
    """A spinner around work the first time it is asked for (``ident``: what is computed), none
    after: every st.spinner starts a timer thread, a tenth of a cached rerun's time. (The work may
    have left the cache since; it then runs again without a spinner.)"""
    if ident in _DONE:
        return contextlib.nullcontext()
    _DONE[ident] = True
    while len(_DONE) > _DONE_MAX:
        _DONE.pop(next(iter(_DONE)))
    return st.spinner(t(key))


def sync_url(values: dict) -> None:
    """Make the URL follow the state (only the parameters that changed, in one message)."""
    changed = {k: str(v) for k, v in values.items() if st.query_params.get(k) != str(v)}
    if changed:
        st.query_params.update(changed)


def show_figure(fig, df: pd.DataFrame | None, meta: dict, key: str, *, click: str | None = None,
                shown=None, remember: bool = True) -> None:
    """Draw one figure, its download buttons (PNG, SVG, PDF, CSV: explorer/export_ui.py) and a
    switch that shows its numbers as a table. Every figure of the page goes through here.
    ``meta``: model, sentence, text, block, layer, head, stage, stage_title, caption, lang, selection
    (and edits, compare for the what-if and comparison figures).

    ``click`` ("cell" or "head", the stage record's): the page draws ``shown``, the figure's clickable
    copy, and a click drills in (``on_pick``); downloads and export take ``fig``. ``remember``: keep it
    for the explorer's "Export all" (the lessons page does not).

    A table is built and sent only when its switch is on: a page has about twenty figures, and
    tables nobody opens were an eighth of the server's time per page. On a hosted server the
    download buttons are behind a switch too (state.LEAN_DOWNLOADS): four buttons under each of
    twenty figures were an eighth of a class's server time per click (`python -m bench`)."""
    lang = meta.get("lang", "en")
    config = {"displaylogo": False, "toImageButtonOptions": {"filename": key}}
    if click and shown is not None:
        st.plotly_chart(export_ui.display_figure(shown), width="stretch", key=f"chart-{key}", config=config,
                        on_select=functools.partial(on_pick, f"chart-{key}", picking.targets(shown)),
                        selection_mode="points")
    else:
        st.plotly_chart(export_ui.display_figure(fig), width="stretch", key=f"chart-{key}", config=config)
    if remember:  # the explorer's "Export all" takes what its page showed (not the lessons' figures)
        export_ui.remember_shown(fig, df, meta)
    if state.LEAN_DOWNLOADS:
        row = st.container(horizontal=True, gap="small", vertical_alignment="center")
        if row.toggle(i18n.t("downloads", lang), key=f"{key}-downloads"):
            export_ui.figure_downloads(fig, df, meta, key)
    else:
        row = export_ui.figure_downloads(fig, df, meta, key)
    if df is None:
        return
    if row.toggle(i18n.t("table", lang), key=f"{key}-table"):
        st.dataframe(state.arrow_table(df), width="stretch", height=min(420, 38 + 35 * len(df)))


def on_pick(chart_key: str, targets: picking.Targets) -> None:
    """A chart's selection changed (st.plotly_chart's on_select): drill where it points (``targets``:
    ``picking.targets`` of the chart's figure; never the figure itself, see there)."""
    event = st.session_state.get(chart_key)
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return
    picking.apply(st.session_state, picking.picked(points, targets))
