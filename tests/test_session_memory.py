"""What one visitor's session keeps between clicks stays bounded (the workshop soak, issue 27 item 4:
`python -m bench --only soak`): the page remembers only the current selection's figures for
"Export all", and a chart's click callback holds its click targets, not the figure."""
from __future__ import annotations

import functools

import pytest
import plotly.graph_objects as go

from helpers import app, ok
from explorer import export_ui

pytestmark = pytest.mark.timeout(600)


def _shown(at) -> dict:
    return at.session_state[export_ui.SHOWN_KEY] if export_ui.SHOWN_KEY in at.session_state else {}


def test_the_page_remembers_only_the_current_selections_figures():
    at = app()
    ok(at)
    first = _shown(at)
    assert first and len({v[0] for v in first.values()}) == 1  # one selection: the default page's
    seen = set()
    for head, stage in ((1, "qk"), (2, "scaled"), (3, "masked")):  # a new selection on another stage each time
        at.selectbox(key="nav").set_value(f"stage:{stage}")
        at.sidebar.slider(key="head").set_value(head).run()
        ok(at)
        shown = _shown(at)
        idents = {v[0] for v in shown.values()}
        assert len(idents) == 1, f"figures of {len(idents)} selections kept after head {head}"
        assert stage in shown
        seen |= idents
    assert len(seen) == 3  # the selection did change each time (else the test would prove nothing)
    for stage in ("qk", "scaled", "masked", "softmax"):  # several stages of one selection: all kept
        at.selectbox(key="nav").set_value(f"stage:{stage}").run()
        ok(at)
    assert {"qk", "scaled", "masked", "softmax"} <= set(_shown(at)) and len({v[0] for v in _shown(at).values()}) == 1


def test_a_charts_click_callback_holds_no_figure(monkeypatch):
    """st.plotly_chart's on_select callback is kept by Streamlit for the whole session."""
    import streamlit as st
    from explorer import ui

    calls = []
    real = st.plotly_chart

    def spy(*args, **kwargs):
        calls.append(kwargs.get("on_select"))
        return real(*args, **kwargs)

    monkeypatch.setattr(st, "plotly_chart", spy)
    at = app()
    ok(at)
    callbacks = [c for c in calls if isinstance(c, functools.partial)]
    assert callbacks and all(c.func is ui.on_pick for c in callbacks)  # the default stage is clickable

    def holds_figure(x) -> bool:
        if isinstance(x, go.Figure):
            return True
        return isinstance(x, (tuple, list)) and any(holds_figure(y) for y in x)

    assert not any(holds_figure(c.args) or holds_figure(tuple(c.keywords.values())) for c in callbacks)
