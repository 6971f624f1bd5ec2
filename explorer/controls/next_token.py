"""The next-token stage's position (group "next_position"): a new sentence starts at its last real token."""
from __future__ import annotations

import streamlit as st

from explorer.controls.base import Page, register
from explorer.ui import t
from explorer.views import style


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


register("next_position", next_position, next_position_picker)
