"""The positional encoding's controls (group "pe"): the base n, d_model, positions and dimensions the
curves, the similarity and the comparison draw, and tutorial 002's worked example one switch away."""
from __future__ import annotations

import streamlit as st

from explorer.controls.base import Page, register
from explorer.session import keep, kept
from explorer.ui import t
from explorer.views import stages, tutorial002


kept("pe_base", "pe_d_model", "pe_positions", "pe_dims", "pe_tutorial")
PE_BASES = (10.0, 100.0, 1000.0, 10000.0, 100000.0)


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


register("pe", pe_controls)
