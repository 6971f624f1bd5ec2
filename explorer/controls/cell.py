"""The one cell's controls (group "cell"): its query and key, and under it the chain with its numbers."""
from __future__ import annotations

import logging
from dataclasses import replace

import streamlit as st

from explorer import inputs
from explorer.controls.base import Page, register
from explorer.session import keep
from explorer.ui import t
from explorer.views import stages, style
from explorer.views.data import axis_tokens

log = logging.getLogger("attention_explorer")


def cell_controls(page: Page) -> dict:
    """The query and key of the one-cell derivation; drawn once a page (the stages of issue 35 read the
    same query and key: explorer/controls/why.py), later groups reuse them."""
    if getattr(page, "cell_drawn", False):
        return {}
    page.cell_drawn = True
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


register("cell", cell_controls, cell_formula)
