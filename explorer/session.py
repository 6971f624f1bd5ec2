"""What a session keeps across its runs (no figures, no controls): the shadow copies of the widgets'
values (Streamlit forgets a widget's value when the widget is not drawn), and the page's messages.

    kept("role")          # a module's widget keys that outlive their widget
    keep("role", "induction")  # the value (set from the shadow copy or the default)
    remember()             # at the end of every run (explorer/main.py)
"""
from __future__ import annotations

import streamlit as st

from explorer.ui import t


KEEP: list[str] = ["lang", "model", "text", "sentence", "block", "layer", "head", "view", "query", "key", "stage",
                   "compare"]


def kept(*keys: str) -> None:
    """Widget keys whose values outlive their widget (each control module names its own)."""
    KEEP.extend(k for k in keys if k not in KEEP)


def keep(key: str, default):
    """Streamlit forgets a widget's value when the widget is not drawn; keep a shadow copy."""
    if key not in st.session_state:
        st.session_state[key] = st.session_state.get(f"_keep_{key}", default)
    return st.session_state[key]


def remember() -> None:
    for key in KEEP:
        if key in st.session_state:
            st.session_state[f"_keep_{key}"] = st.session_state[key]


def show_messages(messages: list) -> None:
    for key, args in messages:
        st.warning(t(key, **args), icon="⚠️")
