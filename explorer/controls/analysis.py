"""Beyond one head: the logit lens and head roles attach what they read to the run (groups "lens" and
"roles"; their records: uses=("lens",), uses=("induction",)). The lens of the sentence on screen
and the model's induction scores are made once (explorer/state.py) and attached to the page's run;
the option "attached" names them, so that the figure memo never serves a figure built without them
(export builds its own: explorer/export)."""
from __future__ import annotations

import logging

import streamlit as st

from explorer import failures, i18n, quota, state
from explorer.controls.base import Page, asked_for, register
from explorer.session import keep, kept
from explorer.ui import busy, lang, sync_url, t

log = logging.getLogger("attention_explorer")
kept("role")


def lens_controls(page: Page) -> dict:
    s = page.sel.sentence
    n_tokens = len(page.run.tokens[s])
    if not asked_for(state.lens_work(page.info, n_tokens), state.lens_ready(page.sel.model, page.texts, s),
                     (page.sel.model, tuple(page.texts), s), key="lens_go",
                     label=t("lens.run", layers=page.info.n_layers, tokens=n_tokens, vocab=f"{page.info.vocab_size:,}")):
        return {}
    try:
        with busy(("lens", page.sel.model, tuple(page.texts), s), "lens.running"):
            made = state.lens(page.sel.model, page.texts, page.run, s)
    except quota.Refused as e:  # this page's quota (hosted): the stage says the lens is not made
        st.warning(e.message(lang()), icon="⏳")
        return {}
    except Exception as e:  # the stage then says the lens is not made
        st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "logit lens failed")))
        return {}
    page.run = page.run.with_lens(made)
    return {"logit_lens": {"attached": ("lens", page.texts[s])}}


def roles_controls(page: Page) -> dict:
    """The induction scores attached, and the role that colours the heads."""
    attached = None
    try:
        with busy(("induction", page.sel.model), "roles.running"):
            page.run = page.run.with_induction(state.induction(page.sel.model))
        attached = ("induction", page.sel.model)
    except Exception as e:
        st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "induction scores failed")))
    from explorer.views.analysis import ROLE_NAME, ROLES

    if keep("role", "induction") not in ROLES:
        st.session_state["role"] = "induction"
    st.selectbox(t("roles.choose"), list(ROLES), key="role",
                 format_func=lambda r, lg=lang(): i18n.fig_labels(lg)[ROLE_NAME[r]])
    sync_url({"role": st.session_state["role"]})
    return {"head_roles": {"role": st.session_state["role"], "attached": attached}}


register("lens", lens_controls)
register("roles", roles_controls)
