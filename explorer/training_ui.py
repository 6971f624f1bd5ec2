"""A head that learns (issue 35): for a model with training checkpoints (the seed), a slider in the sidebar
that moves every figure of the page through its training, the loss curve beside it and what the
reversing head does at that step (model/files/seed_checkpoints.py; the figure: explorer/views/training.py).

    key = training_ui.sidebar(name, messages)   # the model's key for this page: "seed" or "seed@400"

The curve and its words appear once the slider has left the last step (the default page stays as it was:
one slider more); from then on they stay, wherever it moves.

The URL's ``train_step`` names the step (a step there is not: a message, and the last step).
"""
from __future__ import annotations

import logging

import streamlit as st

from explorer import i18n, inputs, state
from explorer.session import kept
from explorer.ui import lang, sync_url, t
from explorer.views import style, training

log = logging.getLogger("attention_explorer")
KEY = "train_step"
SOURCE_WORDS = {"run": "train.source.run", "replay": "train.source.replay", "first_stage": "train.source.first_stage",
                "shipped": "train.source.shipped"}  # seed_checkpoints.SOURCES -> its words
URL = "train_step"
SHIPPED = "shipped"  # the slider's place for the shipped weights, when the run's last step is not that file
kept(KEY)


def _words(record: dict, step: int, lg: str) -> str:
    """What the checkpoint on screen scores, from the run's record (true for this run and step)."""
    head = training.reversing_head(record)
    layer, h = head[1:].split("H")
    at = record["heads"][str(step)][head]
    source = SOURCE_WORDS.get(record.get("sources", {}).get(str(step), "run"), "train.source.run")
    return i18n.t("train.caption", lg, step=step, total=record["steps"][-1], n=len(record["eval_inputs"]),
                  loss=style.fmt(record["eval"][str(step)]["loss"]), layer=layer, head=h,
                  diag=style.fmt(at["anti_diagonal"], 2), entropy=style.fmt(at["entropy"], 2)) + " " + i18n.t(source, lg)


def _show_head(layer: int, head: int) -> None:
    """The button's callback: the reversing head's weights, one stage at a time (before the widgets)."""
    st.session_state.update({"block": "decoder.cross_attn", "layer": layer, "head": head, "view": "stage",
                             "stage": "softmax"})


def sidebar(name: str, messages: list) -> str:
    """The training step's slider (only for a model with checkpoints) and its loss curve; returns the
    key of the weights to show (the name itself at the last step, when that is the shipped file)."""
    pending = st.session_state.pop("_url_train_step", None)
    steps = state.checkpoint_steps(name)
    if not steps:
        if pending is not None:
            messages.append(("bad_param", dict(name=URL, value=inputs.shown(pending), why=t("train.none", model=name))))
        if URL in st.query_params:
            del st.query_params[URL]
        return name
    if pending is not None:
        if pending.isdigit() and int(pending) in steps:
            st.session_state[KEY] = int(pending)
        else:
            messages.append(("bad_param", dict(name=URL, value=inputs.shown(pending),
                                               why=t("why_choice", choices=", ".join(map(str, steps))))))
    # the slider's last place is the shipped weights: the run's last step when it is that file, else a
    # place of its own after it (a run replayed elsewhere ends near the shipped weights, not on them)
    options = list(steps) if state.checkpoint_key(name, steps[-1]) == name else [*steps, SHIPPED]
    if st.session_state.get(KEY) not in options:
        st.session_state[KEY] = options[-1]
    record = state.training_record(name)
    lg = lang()
    sb = st.sidebar
    sb.select_slider(t("train.step"), options, key=KEY,
                     format_func=lambda v, lg=lg: i18n.t("train.shipped", lg) if v == SHIPPED else str(v),
                     help=t("train.help", total=steps[-1], n=len(steps),
                            second=", ".join(map(str, record["stages"][1:])) or "—"))
    value = st.session_state[KEY]
    step = None if value == SHIPPED else int(value)
    if value == options[-1]:
        if URL in st.query_params:
            del st.query_params[URL]
    else:
        sync_url({URL: step})
        st.session_state["_train_shown"] = True
    if st.session_state.get("_train_shown"):  # until the slider first leaves the last place, the page is as
        try:                                   # it always was: one slider more, no figure
            fig = training.loss_curve(record, step, title=t("train.title"), labels=i18n.fig_labels(lg), height=330)
            sb.plotly_chart(fig, width="stretch", key="train-curve",
                            config={"displaylogo": False, "displayModeBar": False})
            sb.caption(_words(record, step, lg) if step is not None else t("train.shipped_words", last=steps[-1]))
            layer, h = training.reversing_head(record)[1:].split("H")
            sb.button(t("train.show_head", layer=layer, head=h), key="train_show_head", on_click=_show_head,
                      args=(int(layer), int(h)))
        except Exception:  # the curve is an aside: never a reason for the page to fail
            log.exception("the training curve failed")
    return name if step is None else state.checkpoint_key(name, step)
