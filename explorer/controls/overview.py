"""Under the overview of every head (group "drill"): what H and d mean, and a head to open."""
from __future__ import annotations

import streamlit as st

from explorer.controls.base import Page, register
from explorer.ui import t
from explorer.views import stages


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


register("drill", None, drill_controls)
