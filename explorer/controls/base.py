"""The page's view of one run (``Page``) and the registry of control groups, shared by the control
modules and explorer/main.py (which imports every module of this package, so each registers its
groups)."""
from __future__ import annotations

import logging

import streamlit as st

from explorer import failures, state
from explorer.ui import lang, show_figure, t
from explorer.views import stages

log = logging.getLogger("attention_explorer")


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
        words_after = explain and figure_first

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

        if explain and not words_after:
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
        if words_after:
            write_words()


# group name -> (drawn before the group's first stage, returning {stage id: options}; drawn after each
# stage of the group)
CONTROLS: dict[str, tuple] = {}


def asked_for(work: float, made: bool, ident: tuple, label: str, key: str) -> bool:
    """Whether a costly analysis may run on this rerun: at once when its ``work`` (multiply-adds) is
    within ``state.AUTO_WORK`` or it was ``made`` already; otherwise once this session pressed the
    button ``key`` (``label``) for ``ident`` (what it is made of), which then goes from the page."""
    flag = f"_{key}_for"
    if work <= state.AUTO_WORK or made or st.session_state.get(flag) == ident:
        return True
    slot = st.empty()
    if slot.button(label, key=key, type="primary"):
        st.session_state[flag] = ident
        slot.empty()
        return True
    return False


def register(group: str, before=None, after=None) -> None:
    if group in CONTROLS:
        raise ValueError(f"controls {group!r} are registered twice")
    CONTROLS[group] = (before, after)

