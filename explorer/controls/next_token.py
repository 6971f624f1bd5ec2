"""The next-token stage's position (group "next_position"): a new sentence starts at its last real token.

The page's run reads the model's output after each sentence's last token only (explorer/state.py); a
learner who picks another position gets every position's, read once per run and attached here."""
from __future__ import annotations

import logging

import streamlit as st

from explorer import failures, state
from explorer.controls.base import Page, register
from explorer.ui import busy, t
from explorer.views import style

log = logging.getLogger("attention_explorer")


def next_position(page: Page) -> dict:
    """The position whose next token is shown (a new sentence starts at its last real token)."""
    toks = page.run.tokens[page.sel.sentence]
    ident = (page.sel.model, page.texts[page.sel.sentence])
    if st.session_state.get("_next_for") != ident or not 0 <= st.session_state.get("next_pos", -1) < len(toks):
        st.session_state["next_pos"] = len(toks) - 1
    st.session_state["_next_for"] = ident
    pos = int(st.session_state["next_pos"])
    if page.run.next_top(page.sel.sentence, pos) is None and page.run.last_top_ids is not None:
        try:
            with busy(("next_tokens", page.sel.model, tuple(page.texts))):
                page.run = page.run.with_top(state.next_tokens(page.sel.model, page.texts, page.run))
        except Exception as e:  # the stage then says what it lacks
            st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "next tokens failed")))
    return {"next_token": {"next_position": pos}}


def next_position_picker(page: Page) -> None:
    toks = page.run.tokens[page.sel.sentence]
    st.selectbox(t("next_position"), list(range(len(toks))), key="next_pos",
                 format_func=lambda i: f"{i}: {style.visible(toks[i])}")


register("next_position", next_position, next_position_picker)
