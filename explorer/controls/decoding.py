"""The Decoding view's controls (group "decoding"; the stage draws explorer/views/decoding.py): the
sampling, the selected sentence's cached trace attached to the run, and under the timeline the step,
the text written so far and the GIF/PDF downloads.

The trace is cached per model and sentence (state.trace); the figure holds every step as an animation
frame, so its own slider and play/pause switch steps in the browser. The "step" widget below it
sets the step the figure opens at, the URL's `step` and the downloads."""
from __future__ import annotations

import logging

import streamlit as st

from explorer import export_ui, failures, inputs, state
from explorer.controls.base import Page, asked_for, register
from explorer.session import keep, kept
from explorer.ui import busy, sync_url, t
from explorer.views import stages, style
from explorer.views.trace import max_new_tokens_for

log = logging.getLogger("attention_explorer")
SAMPLING = ("dec_temperature", "dec_top_k", "dec_top_p", "dec_seed")  # the URL's `sample` (explorer/url.py)
kept("step", *SAMPLING)


def sampling_controls() -> dict:
    """Temperature, top-k, top-p and a seed (the URL's `sample`); greedy while the temperature is 0."""
    for k, v in (("dec_temperature", 0.0), ("dec_top_k", 0), ("dec_top_p", 1.0), ("dec_seed", 0)):
        keep(k, v)
    c1, c2, c3, c4 = st.columns(4)
    c1.number_input(t("decoding.temperature"), min_value=0.0, max_value=inputs.MAX_TEMPERATURE, step=0.1,
                    key="dec_temperature", help=t("decoding.temperature_help"))
    sampling = float(st.session_state["dec_temperature"]) > 0
    c2.number_input(t("decoding.top_k"), min_value=0, max_value=10**6, step=1, key="dec_top_k",
                    help=t("decoding.top_k_help"), disabled=not sampling)
    c3.number_input(t("decoding.top_p"), min_value=0.01, max_value=1.0, step=0.05, key="dec_top_p",
                    help=t("decoding.top_p_help"), disabled=not sampling)
    c4.number_input(t("decoding.seed"), min_value=0, max_value=inputs.MAX_SEED, step=1, key="dec_seed",
                    help=t("decoding.seed_help"), disabled=not sampling)
    s = st.session_state
    chosen = dict(temperature=float(s["dec_temperature"]), top_k=int(s["dec_top_k"]) or None,
                  top_p=None if float(s["dec_top_p"]) >= 1 else float(s["dec_top_p"]), seed=int(s["dec_seed"]))
    value = inputs.format_sampling(**chosen)
    if value:
        sync_url({"sample": value})
    elif "sample" in st.query_params:
        del st.query_params["sample"]
    return chosen if sampling else {}


def decoding_trace(page: Page) -> dict:
    """Attach the selected sentence's cached trace to the page's run; the step from the URL or the
    widget, clipped to the steps there are."""
    sampling = sampling_controls()
    text = page.texts[page.sel.sentence]
    n_steps = max_new_tokens_for(page.info) or len(page.run.tokens[page.sel.sentence]) + 8
    if not asked_for(state.decoding_work(page.sel.model, n_steps), state.trace_ready(page.sel.model, text, **sampling),
                     (page.sel.model, text, tuple(sampling.values())), key="trace_go", label=t("decoding.run", n=n_steps)):
        return {}
    try:
        with busy(("trace", page.sel.model, page.texts[page.sel.sentence], tuple(sampling.values()))):
            tr = state.trace(page.sel.model, page.texts[page.sel.sentence], **sampling)
    except Exception as e:  # the stage then says it has no trace
        st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "decoding failed")))
        return {}
    page.run = page.run.with_trace(tr)
    pending = st.session_state.get("_url_ints", {})
    if "step" in pending:
        value = pending.pop("step")
        used = inputs.clip(value, tr.n_steps)
        if used != value:
            st.warning(t("clipped_param", name="step", value=value, used=used), icon="⚠️")
        st.session_state["step"] = used
    st.session_state["step"] = inputs.clip(keep("step", 0), tr.n_steps)
    # the sampling enters the figure memo's key (the trace it draws is attached to the run, not keyed)
    return {"decoding": {"step": int(st.session_state["step"]), "sampling": tr.sampling}}


def decoding_details(page: Page) -> None:
    """Under the timeline: the step widget, the text at that step, GIF/PDF downloads, the words."""
    tr = stages.decoding_trace(page.run, page.sel.sentence)
    if tr is None:
        return
    if tr.n_steps > 1:
        st.slider(t("decoding.step_label"), 0, tr.n_steps - 1, key="step", help=t("decoding.step_help"))
    step = int(st.session_state["step"])
    q = int(tr.query[step])
    first = 1 if tr.kind == "encoder-decoder" else 0  # the seed decoder's column 0 is <s>
    st.caption(t("decoding.written_at", t=step))
    st.code("".join(tr.tokens[first: q + 1]) + " → " + style.visible(tr.chosen_tokens[step]), language=None)
    options = {"step": step, "sampling": tr.sampling}
    if tr.sampling:
        temp, k, p, seed = tr.sampling
        st.caption(t("decoding.sampling_note", T=f"{temp:g}", k=k or "—", p=f"{p:g}" if p else "—", seed=seed))
    fig, _ = state.stage_figure("decoding", page.sel.model, page.texts, page.run, page.info, page.sel, page.lang,
                                **options)
    export_ui.animation_downloads(fig, page.meta("decoding"), "decoding")
    st.markdown(t("decoding.cache", d=page.info.d_head))
    st.markdown(t("decoding.teacher_forcing"))
    sync_url({"step": step})


register("decoding", decoding_trace, decoding_details)
