"""The controls of "why this head attends here" (issue 35): group "why_cell" (the query and key the
score split and the rotary bands draw: the one cell's controls, without its chain) and group "effects"
(the same, and the ablations of attention_vs_effect: run here, cached, with a progress bar, never by
the stage's builder; handed over as the option ``effects``, the stage's record: uses=("effects",))."""
from __future__ import annotations

import streamlit as st

from explorer import inputs, state
from explorer.controls.base import Page, asked_for, register
from explorer.controls.cell import cell_controls
from explorer.ui import t


def why_cell_controls(page: Page) -> dict:
    cell_controls(page)
    return {}


def effects_controls(page: Page) -> dict:
    """The query and key, then the ablations of the sentence on screen (every head of the block)."""
    cell_controls(page)
    from explorer.views import stages

    if not stages.applies("attention_vs_effect", page.info, page.sel.block):
        return {}
    from model.analysis import ablation

    m, _ = state.load_model(page.sel.model)
    n = ablation.n_forwards(m, page.sel.block)
    bound = state.patch_bound()
    if bound is not None and n > bound:
        st.warning(t("effect.too_large", n=n, bound=bound), icon="⚠️")
        return {}
    text = page.texts[page.sel.sentence]
    cached = state.effects_ready(page.sel.model, text, page.sel.block)
    work = state.effects_work(page.sel.model, n, len(page.run.tokens[page.sel.sentence]))
    if not asked_for(work, cached, (page.sel.model, text, page.sel.block), key="effects_go", label=t("effect.run", n=n)):
        return {}
    box = st.empty()
    bar = box.progress(0.0) if not cached else None

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.progress(done / max(total, 1), text=t("effect.progress", done=done, total=total))

    try:
        result = state.effects(page.sel.model, text, page.sel.block, progress=progress)
    except (ablation.AblationError, ablation.AblationCancelled) as e:
        box.empty()
        st.warning(t("effect.failed", error=inputs.shown(str(e), 300)), icon="⚠️")
        return {}
    box.empty()
    return {"attention_vs_effect": {"effects": result}}


register("why_cell", why_cell_controls)
register("effects", effects_controls)
