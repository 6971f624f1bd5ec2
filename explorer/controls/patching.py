"""Activation patching's controls (group "patching"): the sentence on screen (clean) against the second
one (corrupted). The stage never runs the model: these controls run the experiment (state.patching:
cached, a progress bar, a cancel button, bounded when hosted) when asked, and hand the result over
as the option `patches` (the stage's record: uses=("patches",))."""
from __future__ import annotations

import streamlit as st

from explorer import inputs, quota, state
from explorer.controls.base import Page, register
from explorer.session import keep, kept
from explorer.ui import busy, lang, sync_url, t
from explorer.views import stages


PATCH_KINDS = {"positions": "patching.kind_positions", "heads": "patching.kind_heads"}
kept("patch_kind")


def on_patch_cancel() -> None:
    st.session_state["_patch_want"] = None
    st.session_state["_patch_cancelled"] = True


def patching_controls(page: Page) -> dict:
    text, _ = inputs.limit_compare(st.session_state.get("compare", ""))
    if not text or not stages.applies("patching", page.info):
        return {}
    m, _ = state.load_model(page.sel.model)
    (text,), _ = inputs.limit_tokens([text], m.tokenizer, inputs.MAX_TOKENS)
    with busy(("run", page.sel.model, (text,))):
        other = state.run(page.sel.model, [text], [len(m.tokenizer.encode([text])[0].ids)], page.info,
                          next_tokens="last")
    opts = {"other": other}
    n_a, n_b = len(page.run.tokens[page.sel.sentence]), len(other.tokens[0])
    if n_a != n_b:
        st.warning(t("patching.token_count", a=n_a, b=n_b), icon="⚠️")
        return {"patching": opts}
    if keep("patch_kind", "positions") not in PATCH_KINDS:
        st.session_state["patch_kind"] = "positions"
    st.radio(t("patching.kind"), list(PATCH_KINDS), key="patch_kind", horizontal=True,
             format_func=lambda k: t(PATCH_KINDS[k]))
    kind = st.session_state["patch_kind"]
    sync_url({"patch": kind})
    clean = page.texts[page.sel.sentence]
    where = stages.patching_stack(page.info, page.sel.block) if kind == "positions" else page.sel.block
    from model.analysis import patching as mp

    n = mp.count_forwards(m, clean, text, kind, where.split(".")[0])
    bound = state.patch_bound()
    if bound is not None and n > bound:
        st.warning(t("patching.too_large", n=n, bound=bound), icon="⚠️")
        return {"patching": opts}
    ident = (page.sel.model, clean, text, kind, where)
    if st.button(t("patching.run", n=n), key="patch_go", type="primary"):
        st.session_state["_patch_want"] = ident
        st.session_state["_patch_cancelled"] = False
    if st.session_state.get("_patch_cancelled"):
        st.info(t("patching.cancelled"), icon="✋")
    if st.session_state.get("_patch_want") != ident:
        return {"patching": opts}
    box = st.empty()
    with box.container():
        bar = st.progress(0.0)
        st.button(t("patching.cancel"), key="patch_cancel", on_click=on_patch_cancel)

    def progress(done: int, total: int) -> None:  # also where a click on the page stops this run
        bar.progress(done / max(total, 1), text=t("patching.progress", done=done, total=total))

    try:
        result = state.patching(page.sel.model, clean, text, kind, where, progress=progress,
                                cancel=lambda: bool(st.session_state.get("_patch_cancelled")))
    except quota.Refused as e:  # this page's quota (hosted): when to try again
        box.empty()
        st.session_state["_patch_want"] = None
        st.warning(e.message(lang()), icon="⏳")
        return {"patching": opts}
    except (mp.PatchingError, mp.PatchingCancelled) as e:
        box.empty()
        st.warning(t("patching.failed", error=inputs.shown(str(e), 300)), icon="⚠️")
        return {"patching": opts}
    box.empty()
    return {"patching": {**opts, "patches": result}}


register("patching", patching_controls)
