"""The model selector's choices: the built-in names, the host's configured ones (model/configured.py)
and, on your own computer only, a folder or GGUF file typed in the sidebar.

A hosted server (``ATTENTION_EXPLORER_HOSTED=1``) never opens a path a visitor names: the path box is
not drawn, a path in the session falls back to "seed", the URL's ``model=`` takes names only
(explorer/inputs.py) and explorer/state.py refuses anything else. A typed path is opened when it is
submitted: one that cannot be read leaves the model as it was and says why under the box.
"""
from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st

from explorer import i18n, inputs, state
from explorer.ui import lang, t
from model import configured

log = logging.getLogger("attention_explorer")
PATH_KEY = "model_path"  # the path box
ERROR_KEY = "_model_path_error"  # (i18n key, args) of the last typed path that could not be opened
MAX_PATH = 1000
MODEL_SUFFIXES = (".gguf", ".safetensors")


def is_name(value: str) -> bool:
    return value in inputs.model_names()


def label(value: str, lg: str) -> str:
    """What the selector shows for a name (its description) or a typed path."""
    if value in inputs.MODELS:
        return f"{value} — {i18n.t('models.' + value, lg)}"
    entry = configured.entries(reserved=inputs.MODELS).get(value)
    if entry is not None:
        return f"{value} — {entry.describe(lg)}" if entry.description else value
    return i18n.t("model_path.option", lg, path=inputs.shown(value, 80))


def check_path(raw: str) -> tuple[str, dict] | None:
    """Why a typed path cannot be a model, before anything is opened: (i18n key, args), or None."""
    shown = inputs.shown(raw, 200)
    if len(raw) > MAX_PATH or "\x00" in raw:
        return "model_path.missing", {"path": shown}
    path = Path(raw).expanduser()
    try:
        if not path.exists():
            return "model_path.missing", {"path": shown}
        if not (path.is_dir() or (path.is_file() and path.suffix.lower() in MODEL_SUFFIXES)):
            return "model_path.kind", {"path": shown}
    except OSError:  # a name too long for the file system, a folder we may not enter
        return "model_path.missing", {"path": shown}
    return None


def open_path() -> None:
    """The path box's callback: open the typed folder or file; on success it becomes the model."""
    raw = str(st.session_state.get(PATH_KEY) or "").strip()
    st.session_state.pop(ERROR_KEY, None)
    if not raw or state.HOSTED:
        return
    problem = check_path(raw)
    if problem is None:
        try:
            state.load_model(raw)  # cached: the page then finds it loaded
        except Exception as e:  # unsupported model_type, a corrupt file, a missing tokenizer, ...
            log.info("opening %s failed: %s", raw, e)
            problem = "model_path.error", {"path": inputs.shown(raw, 200),
                                           "error": inputs.shown(f"{e}", 400)}
    if problem is not None:
        st.session_state[ERROR_KEY] = problem
        return
    st.session_state["model"] = raw


def picker(sb, current: str) -> None:
    """The sidebar's model selector (key "model"), and in local mode the path box under it."""
    names = list(inputs.model_names())
    typed = not state.HOSTED and current not in names and bool(current)
    if current not in names and not typed:
        st.session_state["model"] = current = "seed"
    options = [*names, current] if typed else names
    sb.selectbox(t("model"), options, key="model", format_func=lambda m, lg=lang(): label(m, lg))
    if state.HOSTED:
        return
    sb.text_input(t("model_path.label"), key=PATH_KEY, on_change=open_path, max_chars=MAX_PATH,
                  placeholder="~/models/gpt2  ·  ~/models/x.gguf", help=t("model_path.help"))
    if ERROR_KEY in st.session_state:
        key, args = st.session_state[ERROR_KEY]
        sb.error(t(key, **args), icon="📂")
    for problem in configured.problems(reserved=inputs.MODELS):
        sb.warning(t("model_path.config_problem", problem=inputs.shown(problem, 300)), icon="⚙️")


def url_value(name: str) -> dict:
    """The URL's ``model`` for the model in use: its name; a typed path never goes into the URL
    (a link to it would be refused anywhere but here), so the parameter is dropped."""
    if is_name(name):
        return {"model": name}
    if "model" in st.query_params:
        del st.query_params["model"]
    return {}


def lesson_choices() -> list[str]:
    """Models the lessons may show instead of their own real checkpoints: the configured names."""
    return list(configured.entries(reserved=inputs.MODELS))


def fits(info, block: str) -> bool:
    """Whether a model has the stack a lesson part's block needs (an encoder for encoder.*, ...)."""
    return block.split(".")[0] in info.stacks
