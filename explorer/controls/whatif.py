"""What if, and two sentences (groups "whatif" and "compare"). The what-if section compares the run on
screen with an edited run of the same sentences (model.edits); the edits' canonical string is the
state (st.session_state["edit"], the URL's `edit`), the controls write it. The comparison section
runs a second sentence (`compare`) on its own. Both pass the second run to their stages as an option
(edited=, other=: stages.Stage.needs)."""
from __future__ import annotations

import streamlit as st

import model
from explorer import i18n, inputs, state
from explorer.controls.base import Page, register
from explorer.session import keep, kept
from explorer.ui import busy, lang, t
from explorer.views import stages


WHATIF_FLAGS = {"no_scale": "whatif.flag.no_scale", "no_causal": "whatif.flag.no_causal",
                "no_padding": "whatif.flag.no_padding", "no_position": "whatif.flag.no_position"}
ABLATE_KINDS = {"ablate": "whatif.kind.ablate", "ablate_mean": "whatif.kind.ablate_mean"}
kept("whatif_flags", "whatif_scale", "whatif_temperature", "whatif_ablations", "whatif_text", "compare")


def set_edit_controls(edits: model.edits.Edits) -> None:
    """Make the controls show ``edits`` (and the text box its canonical string)."""
    items = list(edits)
    scale = [e for e in items if isinstance(e, model.edits.Scale)]
    temp = [e for e in items if isinstance(e, model.edits.Temperature)]
    st.session_state["whatif_flags"] = [str(e) for e in items if str(e) in WHATIF_FLAGS]
    st.session_state["whatif_scale"] = scale[0].value if scale and scale[0].value != 1.0 else None
    st.session_state["whatif_temperature"] = temp[0].value if temp else None
    st.session_state["whatif_ablations"] = [str(e) for e in items if isinstance(e, model.edits.Ablate)]
    st.session_state["whatif_text"] = str(edits)


def set_edit(text: str) -> str | None:
    """Parse ``text``; on success it becomes the edit in force (and the controls show it) and None is
    returned; on an EditError the intact run is shown (no edit, controls cleared) and the message
    is returned."""
    try:
        edits = model.edits.parse(text)
    except model.edits.EditError as e:
        st.session_state["edit"] = ""
        set_edit_controls(model.edits.Edits())
        st.session_state["whatif_text"] = text
        return str(e)
    st.session_state["edit"] = str(edits)
    set_edit_controls(edits)
    return None


def _controls_text() -> str:
    s = st.session_state
    parts = [f for f in s.get("whatif_flags") or [] if f in WHATIF_FLAGS]
    if s.get("whatif_scale") is not None:
        parts.append(f"scale={s['whatif_scale']!r}")
    if s.get("whatif_temperature") is not None:
        parts.append(f"temperature={s['whatif_temperature']!r}")
    return ",".join(parts + list(s.get("whatif_ablations") or []))


def on_edit_controls() -> None:
    """A control changed: the edit string follows (or the message says why it cannot)."""
    text = _controls_text()
    error = set_edit(text)
    st.session_state["_whatif_error"] = None if error is None else (text, error)


def on_edit_text() -> None:
    """The text box changed: the controls follow (or the message says what is wrong)."""
    text = str(st.session_state.get("whatif_text") or "")[:inputs.MAX_EDIT_CHARS]
    error = set_edit(text)
    st.session_state["_whatif_error"] = None if error is None else (text, error)


def on_add_ablation() -> None:
    s = st.session_state
    head = s.get("whatif_ab_head", "*")
    item = f"{s.get('whatif_ab_kind', 'ablate')}={s.get('whatif_ab_block')}:{s.get('whatif_ab_layer', 0)}:{head}"
    s["whatif_ablations"] = list(dict.fromkeys([*(s.get("whatif_ablations") or []), item]))
    on_edit_controls()


def whatif_controls(page: Page) -> dict:
    """The edits (flags, scale, temperature, heads switched off, or typed), and the edited run."""
    info, sel = page.info, page.sel
    st.markdown(f"**{t('whatif.controls')}**")
    keep("whatif_flags", [])
    keep("whatif_scale", None)
    keep("whatif_temperature", None)
    keep("whatif_ablations", [])
    keep("whatif_text", st.session_state.get("edit", ""))
    c1, c2, c3 = st.columns([2, 1, 1])
    c1.multiselect(t("whatif.flags"), list(WHATIF_FLAGS), key="whatif_flags", on_change=on_edit_controls,
                   format_func=lambda f: t(WHATIF_FLAGS[f]), placeholder=t("whatif.none"))
    for col, name, label in ((c2, "whatif_scale", "whatif.scale"), (c3, "whatif_temperature", "whatif.temperature")):
        col.number_input(t(label), min_value=model.edits.MIN_VALUE, value=None,  # None: off (clearable)
                         max_value=model.edits.MAX_VALUE, step=0.5, format="%g", key=name,
                         placeholder=t("whatif.off"), on_change=on_edit_controls)
    blocks = stages.blocks_for(info)
    if st.session_state.get("whatif_ab_block") not in blocks:
        st.session_state["whatif_ab_block"] = sel.block if sel.block in blocks else blocks[0]
    n_layers = stages.layers_for(info, st.session_state["whatif_ab_block"])
    if st.session_state.get("whatif_ab_layer") not in range(n_layers):
        st.session_state["whatif_ab_layer"] = min(sel.layer, n_layers - 1)
    if st.session_state.get("whatif_ab_head") not in ["*", *range(info.n_heads)]:
        st.session_state["whatif_ab_head"] = "*"
    a1, a2, a3, a4, a5 = st.columns([2, 2, 1, 1, 1], vertical_alignment="bottom")
    a1.selectbox(t("whatif.ablate_kind"), list(ABLATE_KINDS), key="whatif_ab_kind",
                 format_func=lambda k: t(ABLATE_KINDS[k]))
    a2.selectbox(t("whatif.ablate_block"), blocks, key="whatif_ab_block",
                 format_func=lambda b: i18n.t(f"blocks.{b}", lang()))
    a3.selectbox(t("whatif.ablate_layer"), list(range(n_layers)), key="whatif_ab_layer")
    a4.selectbox(t("whatif.ablate_head"), ["*", *range(info.n_heads)], key="whatif_ab_head",
                 format_func=lambda h: t("whatif.all_heads") if h == "*" else str(h))
    a5.button(t("whatif.add"), key="whatif_add", on_click=on_add_ablation, width="stretch")
    ablations = list(st.session_state.get("whatif_ablations") or [])
    if ablations:
        st.multiselect(t("whatif.ablations"), ablations, key="whatif_ablations", on_change=on_edit_controls)
    st.text_input(t("whatif.text"), key="whatif_text", on_change=on_edit_text, max_chars=inputs.MAX_EDIT_CHARS,
                  help=t("whatif.text_help", forms=", ".join(model.edits.FORMS)))
    failed = st.session_state.get("_whatif_error")
    if failed:
        st.warning(t("whatif.bad_edit", value=inputs.shown(failed[0]), error=inputs.shown(failed[1], 300)),
                   icon="⚠️")
    edit = st.session_state.get("edit", "")
    if not edit:
        return {}
    m, _ = state.load_model(sel.model)
    try:
        model.edits.check(m, model.edits.parse(edit))
        with busy(("run", sel.model, tuple(page.texts), edit), "whatif.running"):
            n_tokens = [len(toks) for toks in page.run.tokens]
            edited = state.run(sel.model, page.texts, n_tokens, info, edits=edit, next_tokens="last")
    except model.edits.EditError as e:
        st.warning(t("whatif.no_fit", model=sel.model, error=inputs.shown(str(e), 300)), icon="⚠️")
        return {}
    return {sid: {"edited": edited} for sid in dict(stages.SECTIONS)["whatif"]}


def compare_controls(page: Page) -> dict:
    """The second sentence, cut to the limits, and its run (of that sentence alone)."""
    keep("compare", "")
    st.text_input(t("compare.text"), key="compare", max_chars=2 * inputs.MAX_CHARS,
                  help=t("compare.help", c=inputs.MAX_CHARS, t=inputs.MAX_TOKENS))
    text, cut = inputs.limit_compare(st.session_state.get("compare", ""))
    if not text:
        return {}
    m, _ = state.load_model(page.sel.model)
    (text,), notices = inputs.limit_tokens([text], m.tokenizer, inputs.MAX_TOKENS)
    if cut or notices:
        st.info(t("compare.cut", c=inputs.MAX_CHARS, t=inputs.MAX_TOKENS), icon="✂️")
    with busy(("run", page.sel.model, (text,))):
        other = state.run(page.sel.model, [text], [len(m.tokenizer.encode([text])[0].ids)], page.info,
                          next_tokens="last")
    return {sid: {"other": other} for sid in dict(stages.SECTIONS)["compare"]}


register("whatif", whatif_controls)
register("compare", compare_controls)
