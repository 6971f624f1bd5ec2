"""The fast path (explorer/fastpath.py): what it relies on in plotly and Streamlit, checked so that an
upgrade that breaks it fails here, loudly, instead of making the app silently slower or its figures
silently wrong."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from explorer import fastpath
from explorer.views import stages

def as_json(d) -> dict:
    return json.loads(pio.to_json(d, validate=False, engine="json"))


@pytest.mark.parametrize("block", stages.BLOCKS)
def test_every_figure_is_what_validated_plotly_makes_of_it(seed, run, block):
    """Figures are built without plotly's validation and the app sends their plain dicts: both must be
    exactly what validated plotly makes (a typo or an invalid value would raise here)."""
    for sid in stages.STAGE_IDS:
        for sel in (stages.Selection("seed", 1, 1, 1, block), stages.Selection("seed", 0, 0, 0, block)):
            fig, _ = stages.stage_figure(sid, run, seed.info, sel, lang="ko")
            plain = fastpath.plain_dict(fig)
            assert as_json(plain) == as_json(go.Figure(plain).to_dict()), sid
            assert as_json(plain) == as_json(fig.to_dict()), sid


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_json_sent_is_what_plotly_writes(seed, run, lang):
    """fastpath.to_json (orjson) writes, for every figure, what plotly.io.to_json writes: the same
    values once parsed, nothing an HTML page would read as markup, and only ASCII (a Python string
    with one "−" in it would take twice the memory in the figure memo)."""
    for block in stages.BLOCKS:
        for sid in stages.STAGE_IDS:
            fig, _ = stages.stage_figure(sid, run, seed.info, stages.Selection("seed", 1, 1, 1, block), lang=lang)
            plain = fastpath.plain_dict(fig)
            ours = fastpath.to_json(plain)
            assert json.loads(ours) == as_json(plain), sid
            assert not {"<", ">", "/"} & set(ours) and ours.isascii(), sid
    # text a spreadsheet, a browser or a JSON parser could trip on; Latin-1 and astral characters,
    # and the text's own backslashes before them, are what Python's escapes get wrong for JSON
    odd = {"text": ["</script><b>x</b>", "\u2028", "한국어", "é ü ©", "😀 \\xe9 \\\\é \\U0001f600", "−0.5"],
           "z": [float("nan"), float("-inf"), 1e-05],
           "labels": np.array(["a", "<b>", "é😀"]), "n": np.float32(0.5), "k": np.int64(3)}
    ours = fastpath.to_json(odd)
    assert json.loads(ours) == as_json(odd)
    assert ours.isascii() and "<" not in ours


def test_typed_arrays_are_what_plotly_writes():
    """plotly 7.1 writes numeric arrays as base64 typed arrays, 64-bit ints narrowed: so must we."""
    for a in (np.arange(5), np.arange(70000), np.linspace(0, 1, 7, dtype=np.float32),
              np.arange(12, dtype=np.float64).reshape(3, 4)):
        ours = fastpath.plain_dict(fastpath.make_figure([fastpath.trace("heatmap", z=a)], {}))["data"][0]["z"]
        theirs = go.Figure(go.Heatmap(z=a)).to_dict()["data"][0]["z"]
        assert ours == theirs, a.dtype


def test_the_default_template_is_plotlys(seed, run):
    fig, _ = stages.stage_figure("softmax", run, seed.info, stages.Selection("seed", 0, 0, 0, "encoder.self_attn"))
    assert fastpath.plain_dict(fig)["layout"]["template"] == go.Figure().to_dict()["layout"]["template"]


def test_a_shared_figure_answers_to_dict_and_to_json_once(seed, run):
    fastpath.install()
    sel = stages.Selection("seed", 0, 0, 1, "decoder.self_attn")
    for sid in ("embedding", "masked", "mask", "overview"):
        fig, _ = stages.stage_figure(sid, run, seed.info, sel)
        fresh = fastpath.to_json(fastpath.plain_dict(fig))
        shared = fastpath.share(fig)
        assert shared.to_dict() is shared.to_dict()  # no copy per call
        assert pio.to_json(shared.to_dict(), validate=False) == fresh
        assert pio.to_json(shared.to_dict(), validate=False) is pio.to_json(shared.to_dict(), validate=False)
        assert len(fresh) < fastpath.json_bytes(shared) < len(fresh) + 100  # ASCII: a byte a character
    assert pio.to_json({"data": [], "layout": {}}, validate=False) == '{"data":[],"layout":{}}'


def _chart_script():
    import plotly.io as pio_
    import streamlit as st

    from explorer import fastpath as fp

    fp.install()
    fig = fp.share(fp.make_figure([fp.trace("heatmap", z=[[1, 2], [3, 4]], name="x")], {"title": {"text": "t"}}))
    calls = []
    library = fp._library_to_json

    def counting(obj, *args, **kwargs):
        calls.append(type(obj).__name__)
        return library(obj, *args, **kwargs)

    fp._library_to_json = counting
    try:
        st.plotly_chart(fig, key="c")
    finally:
        fp._library_to_json = library
    st.session_state["fell_through"] = calls
    st.session_state["expected"] = fig.to_dict().json
    st.session_state["patched"] = pio_.to_json is fp._to_json_once


def test_streamlit_sends_a_shared_figure_without_serialising_it_again():
    """Streamlit 1.67's st.plotly_chart calls fig.to_dict() and then plotly.io.to_json(d, validate=False):
    for a shared figure that must be the JSON made once, with no fall-through to plotly."""
    at = AppTest.from_function(_chart_script).run()
    assert not at.exception, at.exception
    assert at.session_state["patched"]
    assert at.session_state["fell_through"] == [], "st.plotly_chart no longer reaches the shared JSON"
    spec = at.get("plotly_chart")[0].proto.spec
    assert spec == at.session_state["expected"]


def test_animation_frames_travel_as_validated_plotly_makes_them():
    """A figure with frames (the Decoding view's timeline) keeps them, on the wire exactly as
    validated plotly writes them, typed arrays inside frames included; without frames, no key."""
    frames = [dict(name=str(t), traces=[0], data=[dict(type="heatmap", z=np.full((2, 2), t, dtype=np.float32))],
                   layout=dict(shapes=[dict(type="rect", x0=t, x1=t + 1, y0=0, y1=1)])) for t in range(3)]
    fig = fastpath.make_figure([fastpath.trace("heatmap", z=np.zeros((2, 2), dtype=np.float32))],
                               {"sliders": [dict(active=1, steps=[dict(method="animate", args=[[str(t)]])
                                                                  for t in range(3)])]}, frames)
    plain = fastpath.plain_dict(fig)
    assert [f["name"] for f in plain["frames"]] == ["0", "1", "2"]
    assert plain["frames"][2]["data"][0]["z"]["dtype"] == "f4"  # a typed array, as plotly sends it
    assert as_json(plain) == as_json(go.Figure(plain).to_dict())
    assert as_json(plain) == as_json(fig.to_dict())
    assert len(fig.frames) == 3  # the lazily made plotly figure has them too
    assert "frames" not in fastpath.plain_dict(fastpath.make_figure([], {}))
