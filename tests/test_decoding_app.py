"""The Decoding view in the app (Streamlit AppTest): it renders for the seed models and SmolLM2 in
English and Korean, `?step=` sets the step and the URL follows it, moving through the steps (or
changing layer and head) never runs the model again, an encoder-only model gets a sentence instead
of a figure, and the "all" page does not decode."""
from __future__ import annotations

import json

import pytest
import helpers
from helpers import app
from streamlit.testing.v1 import AppTest

from explorer import state
from model import fetch


pytestmark = pytest.mark.timeout(900)


def ok(at: AppTest) -> None:
    helpers.ok(at, strict=True)


def timeline(at: AppTest) -> dict:
    (chart,) = at.get("plotly_chart")
    return json.loads(chart.proto.spec)


def param(at: AppTest, name: str):
    v = at.query_params.get(name)
    return v[0] if isinstance(v, list) else v


@pytest.fixture
def counting(monkeypatch):
    """How often the model runs: the forward pass (state.run_data) and the decoding (state.trace_data)."""
    calls = {"run": 0, "trace": 0}
    real_run, real_trace = state.run_data, state.trace_data

    def run(m, texts, **kw):
        calls["run"] += 1
        return real_run(m, texts, **kw)

    def trace(m, text, **kw):
        calls["trace"] += 1
        return real_trace(m, text, **kw)

    monkeypatch.setattr(state, "run_data", run)
    monkeypatch.setattr(state, "trace_data", trace)
    state._run.clear()
    state._trace.clear()
    return calls


@pytest.mark.parametrize("name", ["seed", "seed-sort", pytest.param("smollm2", marks=pytest.mark.weights)])
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_view_renders(name, lang):
    if name == "smollm2" and not fetch.is_fetched("smollm2"):
        pytest.skip(f"smollm2 not fetched (run `{fetch.fetch_command('smollm2')}`)")
    text = "banana" if name == "seed-sort" else "hello world"
    at = app(model=name, view="decoding", lang=lang, text=text, block=("decoder.self_attn"))
    ok(at)
    spec = timeline(at)
    n = len(spec["frames"])
    assert n >= 3 and len(spec["layout"]["sliders"][0]["steps"]) == n
    assert at.slider(key="step").max == n - 1
    assert (len([t for t in spec["data"] if t.get("xaxis") == "x4"]) == 1) == (name != "smollm2")  # cross-attention
    labels = [b.proto.label for b in at.get("download_button")]
    gif, pdf = ("GIF (every step)", "PDF (a page per step)") if lang == "en" else ("GIF (모든 단계)", "PDF (단계마다 한 쪽)")
    assert gif in labels and pdf in labels
    words = "\n".join(m.value for m in at.markdown)
    assert ("teacher forcing" in words) if lang == "en" else ("티처 포싱" in words)
    assert " → " in at.code[-1].value  # the text so far at the step, and the token it writes


def test_step_from_the_url_sets_the_step_and_the_url_follows():
    at = app(view="decoding", text="attention", step="3")
    ok(at)
    assert at.session_state["step"] == 3
    assert timeline(at)["layout"]["sliders"][0]["active"] == 3
    assert at.code[-1].value == "noi → t"  # <s> then "noi" written; step 3 writes "t"
    at.slider(key="step").set_value(5).run()
    ok(at)
    assert param(at, "step") == "5" and timeline(at)["layout"]["sliders"][0]["active"] == 5


def test_a_step_out_of_range_is_clipped_with_a_message():
    at = app(view="decoding", text="abc", step="99")
    ok(at)
    assert at.session_state["step"] == 3  # "cba" and its end token: steps 0..3
    assert any("`step=99`" in w.value for w in at.warning)
    assert param(at, "step") == "3"


def test_moving_through_the_steps_never_runs_the_model_again(counting):
    at = app(view="decoding", text="counting steps\n두 번째")
    ok(at)
    assert counting == {"run": 1, "trace": 1}
    first = timeline(at)
    for step in (1, 4, 2):
        at.slider(key="step").set_value(step).run()
        ok(at)
    at.sidebar.slider(key="layer").set_value(1).run()
    at.sidebar.slider(key="head").set_value(3).run()
    at.sidebar.selectbox(key="block").set_value("decoder.cross_attn").run()
    ok(at)
    assert counting == {"run": 1, "trace": 1}
    assert timeline(at)["frames"] != first["frames"] or timeline(at)["data"] != first["data"]
    at.sidebar.selectbox(key="sentence").set_value(1).run()  # another sentence: its own decoding, once
    ok(at)
    assert counting == {"run": 1, "trace": 2}
    at.sidebar.selectbox(key="sentence").set_value(0).run()
    ok(at)
    assert counting == {"run": 1, "trace": 2}


def test_the_all_page_does_not_decode(counting):
    for view in ("all", "stage"):  # nor the default page, one stage
        at = app(text="not decoded", view=view)
        ok(at)
        assert at.session_state["view"] == view and counting["trace"] == 0
    assert not any(json.loads(c.proto.spec).get("frames") for c in at.get("plotly_chart"))


@pytest.mark.weights
def test_an_encoder_only_model_says_the_view_is_for_decoders():
    if not fetch.is_fetched("minilm"):
        pytest.skip(f"minilm not fetched (run `{fetch.fetch_command('minilm')}`)")
    at = app(model="minilm", view="decoding", text="hello world")
    ok(at)
    assert not at.get("plotly_chart")
    assert any("a decoder that writes text" in i.value for i in at.info)
