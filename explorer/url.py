"""The URL, read in one place: every query parameter the explorer's page knows sets the state once,
on a session's first run (``read_once``), and the state's own values follow it back into the URL
(``follow`` for what outlives a view: the edits, the second sentence, the numbers a stage on screen
declares; each control writes its own with ``ui.sync_url``). The lessons' page reads its own few
(explorer/lessons/page.py)."""
from __future__ import annotations

import streamlit as st

from explorer import i18n, inputs
from explorer.controls import decoding, patching, whatif
from explorer.ui import sync_url
from explorer.views import stages
from explorer.views.analysis import ROLES


def read_once() -> None:
    """On a session's first run, before anything is drawn, every query parameter the page knows sets
    the state: the selection (model, text, lang, view, stage, block, the numbers), the what-if edit and
    the second sentence, the decoding's sampling, patching's kind and head roles' role. A value that
    cannot be used is named in a message, never applied."""
    if st.session_state.get("_url_read"):
        return
    st.session_state["_url_read"] = True
    try:
        qp = {k: st.query_params.get_all(k) for k in st.query_params.keys()}
    except Exception:  # a malformed URL is no reason to fail
        qp = {}
    p = inputs.parse_params(qp, blocks=stages.BLOCKS, langs=i18n.LANGS)
    for k in ("lang", "model", "text", "view"):
        if k in p.values:
            st.session_state[k] = p.values[k]
    st.session_state["_url_block"] = p.values.get("block")
    st.session_state["_url_stage"] = p.values.get("stage")
    st.session_state["_url_ints"] = {k: p.values[k] for k in inputs.INT_PARAMS if k in p.values}
    msgs = [("bad_param", dict(name=n, value=v, why=i18n.t(w, p.values.get("lang", "en"), **a)))
            for n, v, w, a in p.ignored]
    msgs += [(n.key, n.args) for n in p.notices]

    def last(name: str):
        return qp[name][-1] if qp.get(name) else None

    edit, compare = last("edit"), last("compare")
    if edit:  # a malformed one: a message, and the intact run
        error = whatif.set_edit(str(edit))
        if error is not None:
            msgs.append(("whatif.bad_edit", dict(value=inputs.shown(edit), error=inputs.shown(error, 300))))
    if compare:
        st.session_state["compare"] = inputs.limit_compare(str(compare))[0]
    got = inputs.parse_sampling(last("sample"))  # temperature, top-k, top-p, seed
    if got is not None:
        for k, v in zip(decoding.SAMPLING, got):
            st.session_state[k] = v if v is not None else {"dec_top_k": 0, "dec_top_p": 1.0}[k]
    if last("patch") in patching.PATCH_KINDS:
        st.session_state["patch_kind"] = last("patch")
    if last("role") in ROLES:
        st.session_state["role"] = last("role")
    if last("train_step") is not None:  # checked against the model's training steps (explorer/training_ui.py)
        st.session_state["_url_train_step"] = str(last("train_step"))[:40]
    st.session_state["_url_msgs"] = msgs


def url_int(name: str, n: int, messages: list) -> None:
    """Apply an integer from the URL (clipped to 0..n-1, with a message when it had to be)."""
    pending = st.session_state.get("_url_ints", {})
    if name not in pending:
        return
    value = pending.pop(name)
    used = inputs.clip(value, n)
    if used != value:
        messages.append(("clipped_param", dict(name=name, value=value, used=used)))
    st.session_state[name] = used


def follow(shown: list[str]) -> None:
    """The URL follows the edits, the second sentence and the one-cell query/key (when on screen)."""
    values = {}
    for name, value in (("edit", st.session_state.get("edit", "")),
                        ("compare", inputs.limit_compare(st.session_state.get("compare", ""))[0])):
        if value:
            values[name] = value
        elif name in st.query_params:
            del st.query_params[name]
    # the selection's numbers a stage on screen declares as its URL's (Stage.url: the one cell's query and key)
    values.update({k: int(st.session_state.get(k, 0)) for k in stages.url_keys(shown) if k in inputs.INT_PARAMS})
    sync_url(values)
