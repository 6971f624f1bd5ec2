"""The app's wiring, driven by Streamlit's AppTest: every section renders without an exception, the
URL's query parameters set (and follow) the state, bad input never crashes the page, and changing
layer / head / view does not run the model again."""
from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from helpers import app, ok  # noqa: F401 (test_app_block imports them from here)
from streamlit.testing.v1 import AppTest

import model
from explorer import i18n, state
from explorer.views import stages
from model import fetch
from model.arch.positional import sinusoidal
from explorer.inputs import MAX_SENTENCES, VIEWS


pytestmark = pytest.mark.timeout(900)


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


def go(at: AppTest, entry: str) -> AppTest:
    """Choose a stage ("stage:<id>") or a page ("view:<name>") in the one navigation control."""
    return at.selectbox(key="nav").set_value(entry).run()


def test_default_page_shows_one_stage_and_one_control_to_move_along():
    at = app()
    ok(at)
    assert at.session_state["model"] == "seed" and at.session_state["view"] == "stage"
    assert at.session_state["stage"] == "softmax" and at.query_params["stage"] in ("softmax", ["softmax"])
    assert charts(at) == 1 and len(at.get("latex")) == 1  # one figure, its formula
    assert at.subheader[0].value == stages.stage_title("softmax", "en")
    assert at.title[0].value == "Attention Explorer"
    assert at.text[0].value == "hello world"  # the sentence being shown, literally
    assert at.text[1].value.splitlines()[0] == "0  hello world  →  dlrow olleh"  # what the model wrote
    # one control: no view radio, no strip of pills; the select box lists the stages, then the pages
    assert not at.main.radio and not at.get("button_group")
    nav = at.selectbox(key="nav")
    info = model.load("seed").info
    want = [sid for _, ids in stages.SECTIONS for sid in ids if stages.applies(sid, info, "encoder.self_attn")
            and not stages.REGISTRY[sid].needs and not stages.REGISTRY[sid].on_demand and sid != "decoding"]
    labels = [f"{i + 1}. {stages.stage_title(sid, 'en')}" for i, sid in enumerate(want)]
    pages = [f"Page: {i18n.t(f'section_{v}', 'en')}" for v in VIEWS if v != "stage"]
    assert nav.options == labels + pages and nav.value == "stage:softmax"
    # back and forward step along the stages
    at.button(key="nav_forward").click().run()
    ok(at)
    assert at.session_state["stage"] == want[want.index("softmax") + 1]
    at.button(key="nav_back").click().run()
    at.button(key="nav_back").click().run()
    assert at.session_state["stage"] == want[want.index("softmax") - 1]
    assert at.query_params["stage"] in (want[want.index("softmax") - 1], [want[want.index("softmax") - 1]])
    go(at, "stage:tokens")
    assert at.button(key="nav_back").disabled and not at.button(key="nav_forward").disabled


def test_every_stage_is_reachable_from_the_control_and_by_url():
    at = app()
    ok(at)
    info = model.load("seed").info
    for block in stages.blocks_for(info):
        at.sidebar.selectbox(key="block").set_value(block).run()
        ids = [sid for sid in stages.STAGE_IDS if stages.applies(sid, info, block)
               and not stages.REGISTRY[sid].needs and not stages.REGISTRY[sid].on_demand and sid != "decoding"]
        for sid in ids:
            go(at, f"stage:{sid}")
            ok(at)
            assert at.subheader[0].proto.anchor == sid, (block, sid)
            assert charts(at) >= 1 and at.query_params["stage"] in (sid, [sid])
    for sid in ("tokens", "pe_curves", "cell", "overview", "logits"):  # by the link
        at = app(stage=sid)
        ok(at)
        assert at.subheader[0].proto.anchor == sid
    at = app(stage="no-such-stage<b>")  # a tampered link: a message, and the default stage
    ok(at)
    assert at.session_state["stage"] == "softmax"
    assert "Ignored the link's `stage=no-such-stage<b>`: it is not a stage of seed" in warnings(at)


def test_the_one_cell_stage_keeps_its_query_and_key_in_the_url():
    at = app(stage="cell", query="2", key="1", text="hello")
    ok(at)
    assert at.query_params["query"] in ("2", ["2"]) and at.query_params["key"] in ("1", ["1"])
    at.selectbox(key="key").set_value(4).run()
    assert at.query_params["key"] in ("4", ["4"])


def test_a_page_and_back_to_the_stage_it_left():
    at = app(stage="qk")
    go(at, "view:scores")
    ok(at)
    assert at.session_state["view"] == "scores" and at.query_params["view"] in ("scores", ["scores"])
    assert "stage" not in at.query_params and charts(at) >= 4
    go(at, "stage:qk")
    ok(at)
    assert at.session_state["stage"] == "qk" and at.subheader[0].value == stages.stage_title("qk", "en")


def test_everything_still_shows_every_stage():
    at = app(view="all")
    ok(at)
    assert charts(at) >= 17
    assert len(at.get("latex")) >= 17  # a formula per stage


@pytest.mark.parametrize("view", [v for v in VIEWS if v != "all"])
def test_every_section_renders(view):
    at = app(view=view)
    ok(at)
    assert at.session_state["view"] == view
    assert charts(at) >= 1


def test_every_block_layer_and_head_in_korean():
    at = app(view="scores", lang="ko")
    ok(at)
    assert at.title[0].value == "어텐션 탐색기"
    for block in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"):
        at.sidebar.selectbox(key="block").set_value(block).run()
        ok(at)
        at.sidebar.slider(key="layer").set_value(1)
        at.sidebar.slider(key="head").set_value(3).run()
        ok(at)
        assert charts(at) == 5 + (block != "decoder.cross_attn")  # qk_terms: self-attention blocks only
        assert at.query_params["block"] == [block] or at.query_params["block"] == block


def test_the_figure_memo_is_bounded_in_entries_bytes_and_age_and_makes_each_value_once():
    import threading
    import time

    memo = state._Memo(max_entries=3, ttl=3600, max_bytes=100)
    made = []

    def make(k, size=10):
        def f():
            made.append(k)
            time.sleep(0.05)
            return (k, size)
        return f

    threads = [threading.Thread(target=memo.get, args=("a", make("a"), lambda v: v[1])) for _ in range(5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert made == ["a"]  # five sessions asked at once: made once
    for k in "bcd":
        memo.get(k, make(k), lambda v: v[1])
    assert len(memo) == 3 and memo.bytes == 30  # "a" (least recently used) went first
    memo.get("big", make("big", 90), lambda v: v[1])
    assert memo.bytes <= 100 and memo.get("big", make("again")) == ("big", 90)
    old = state._Memo(max_entries=3, ttl=0.01)
    old.get("x", make("x"))
    time.sleep(0.02)
    old.get("x", make("x"))
    assert made.count("x") == 2  # too old: made again
    swept = state._Memo(max_entries=10, ttl=0.01, max_bytes=1000)
    swept.SWEEP_S = 0.0  # every insert may sweep
    swept.get("a", make("a", 10), lambda v: v[1])
    time.sleep(0.02)
    swept.get("b", make("b", 10), lambda v: v[1])
    assert len(swept) == 1 and swept.bytes == 10  # "a", too old, dropped when "b" came in


def test_tables_are_sent_only_when_asked_for():
    at = app(view="scores")
    ok(at)
    assert len(at.dataframe) == 0  # no stage's table until its switch is on (the generated output is text)
    at.toggle(key="softmax-table").set_value(True).run()
    ok(at)
    assert len(at.dataframe) == 1


def test_changing_layer_head_view_or_sentence_does_not_rerun_the_model(monkeypatch):
    calls = []
    real = state.run_data

    def counting(m, texts, **kw):
        calls.append(tuple(texts))
        return real(m, texts, **kw)

    monkeypatch.setattr(state, "run_data", counting)
    state._run.clear()
    at = app(text="counting run\n두 번째", view="scores")
    ok(at)
    assert len(calls) == 1
    at.sidebar.slider(key="layer").set_value(1).run()
    at.sidebar.slider(key="head").set_value(2).run()
    at.sidebar.selectbox(key="sentence").set_value(1).run()
    at.sidebar.selectbox(key="block").set_value("decoder.cross_attn").run()
    go(at, "view:overview")
    ok(at)
    assert len(calls) == 1
    at.sidebar.text_area(key="text").set_value("a new sentence").run()
    ok(at)
    assert len(calls) == 2


def test_a_run_is_shared_by_every_session_never_copied_and_read_only():
    """A rerun (any session's) gets the cached run itself: no copy of its hooks per click; its arrays
    cannot be written, so no view changes what another learner sees."""
    state._run.clear()
    a = state.run("seed", ["one shared run"])
    b = state.run("seed", ["one shared run"])
    assert a.tensors is b.tensors and a.top_ids is b.top_ids
    pattern = a["decoder.blocks.0.self_attn.hook_pattern"]
    with pytest.raises(ValueError, match="read-only"):
        pattern[0, 0, 0, 0] = 1.0
    assert not any(t.flags.writeable for t in a.tensors.values())
    assert 0 < a.nbytes <= state._RUNS.bytes  # counted against the cache's bound


def test_url_parameters_set_the_state_and_follow_it():
    at = app(model="seed", text="hello\n안녕하세요", layer="1", head="2", block="decoder.cross_attn",
             sentence="1", lang="ko", view="scores")
    ok(at)
    assert not any(f"`{name}=" in warnings(at) for name in ("model", "layer", "head", "block", "sentence"))
    s = at.session_state
    assert (s["layer"], s["head"], s["block"], s["sentence"], s["lang"]) == (1, 2, "decoder.cross_attn", 1, "ko")
    assert s["text"] == "hello\n안녕하세요"
    at.sidebar.slider(key="head").set_value(0).run()
    assert at.query_params["head"] in ("0", ["0"])
    assert at.query_params["layer"] in ("1", ["1"])


@pytest.mark.parametrize("params, expect", [
    ({"layer": "999"}, ("layer", 1)),
    ({"head": "-3"}, ("head", 0)),
    ({"sentence": "42"}, ("sentence", 1)),
    ({"model": "../../etc/passwd"}, ("model", "seed")),
    ({"block": "nonsense"}, ("block", "encoder.self_attn")),
    ({"layer": "one"}, ("layer", 0)),
    ({"lang": "fr"}, ("lang", "en")),
    ({"view": "<script>"}, ("view", "stage")),
])
def test_invalid_url_parameters_are_clipped_or_ignored_with_a_message(params, expect):
    at = app(text="a\nb", **params)
    ok(at)
    key, value = expect
    assert at.session_state[key] == value
    name = next(iter(params))
    assert f"`{name}=" in warnings(at)


def test_empty_text_gets_a_friendly_prompt():
    at = app()
    at.sidebar.text_area(key="text").set_value("   \n\n").run()
    ok(at)
    assert any("Type a sentence" in i.value for i in at.info)
    assert charts(at) == 0


def test_huge_text_is_truncated_with_a_notice():
    at = app(view="tokens")
    at.sidebar.text_area(key="text").set_value("\n".join(["가나다라" * 300] * 20)).run()
    ok(at)
    notes = "\n".join(i.value for i in at.info)
    assert f"first {MAX_SENTENCES} sentences" in notes and "characters" in notes and "tokens" in notes
    assert len(at.sidebar.selectbox(key="sentence").options) == MAX_SENTENCES


def test_html_emoji_control_characters_and_korean_are_shown_literally():
    text = "<script>alert(1)</script>\n🙂 emoji\x07bell\x00nul\n안녕하세요 <b>굵게</b>"
    at = app(view="tokens")
    at.sidebar.text_area(key="text").set_value(text).run()
    ok(at)
    assert at.text[0].value == "<script>alert(1)</script>"
    for md in at.markdown:
        assert "<script" not in md.value and "<b>굵게" not in md.value
    for sentence in (1, 2):
        at.sidebar.selectbox(key="sentence").set_value(sentence).run()
        ok(at)
    assert at.text[0].value == "안녕하세요 <b>굵게</b>"


def test_url_text_with_html_and_control_characters():
    at = app(text="<img src=x onerror=alert(1)>\n\x1b[31mred", view="scores")
    ok(at)
    assert at.text[0].value == "<img src=x onerror=alert(1)>"


def test_overview_drills_into_a_head():
    at = app(view="overview")
    ok(at)
    at.selectbox(key="drill").set_value((1, 3))
    at.button(key="drill_go").click().run()
    ok(at)
    assert (at.session_state["layer"], at.session_state["head"], at.session_state["view"]) == (1, 3, "scores")


def test_one_cell_pickers():
    at = app(view="cell", query="2", key="1")
    ok(at)
    assert (at.session_state["query"], at.session_state["key"]) == (2, 1)
    at.selectbox(key="key").set_value(5).run()
    ok(at)
    assert any("softmax" in x.value for x in at.get("latex"))


def chart_specs(at: AppTest) -> dict[str, dict]:
    """Every chart's figure as sent to the browser, by its title."""
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def array(v) -> np.ndarray:
    """A plotly array from the wire: a list or a base64 typed array."""
    if isinstance(v, dict):
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return a.reshape([int(x) for x in v["shape"].split(",")]) if "shape" in v else a
    return np.asarray(v, dtype=float)


def pe_figures(at: AppTest) -> tuple[dict, dict, dict]:
    specs = chart_specs(at)
    (compare,) = [v for k, v in specs.items() if k.startswith("Positional encoding for two bases")]
    (curves,) = [v for k, v in specs.items() if k == "Dimensions as waves"]
    (similarity,) = [v for k, v in specs.items() if k.startswith("Position-to-position similarity")]
    return compare, curves, similarity


def test_positional_controls_change_the_figures_as_they_say():
    at = app(view="position")
    ok(at)
    base = model.load("seed").info.positional_base  # the shipped reverse model's own n (20)
    assert at.select_slider(key="pe_base").value == base  # offered even when not a round number
    compare, _, _ = pe_figures(at)
    assert compare["layout"]["title"]["text"].endswith(f"n = 10000 · n = {base:g}")  # what is drawn
    panels = [a["text"] for a in compare["layout"]["annotations"]]
    assert "PE, n = 10000" in panels and f"PE, n = {base:g}" in panels

    at.select_slider(key="pe_base").set_value(1000.0)
    at.number_input(key="pe_d_model").set_value(16)
    at.number_input(key="pe_positions").set_value(60).run()
    ok(at)
    compare, curves, similarity = pe_figures(at)
    assert compare["layout"]["title"]["text"].endswith("n = 10000 · n = 1000")
    pe_panels = [t for t in compare["data"] if t["name"].startswith("PE n=")]
    assert [t["name"] for t in pe_panels] == ["PE n=10000", "PE n=1000"]
    for t, b in zip(pe_panels, (10000.0, 1000.0)):
        assert np.allclose(array(t["z"]), sinusoidal(60, 16, b).numpy(), atol=1e-6)  # d_model, positions, base
    assert array(similarity["data"][0]["z"]).shape == (60, 60)
    assert all("1000^" in t["name"] for t in curves["data"] if t.get("mode") == "lines")
    assert max(array(curves["data"][0]["x"])) == pytest.approx(59)


def test_a_model_that_is_not_fetched_gets_a_message_that_says_how(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))  # an empty cache: nothing fetched
    state._load.clear()  # a model loaded by an earlier test stays cached in this process
    at = app(model="smollm2")
    assert not at.exception
    assert at.error and "python -m model.fetch smollm2" in at.error[0].value
    assert charts(at) == 0


@pytest.mark.weights
def test_a_fetched_real_model_draws_its_page():
    if not fetch.is_fetched("smollm2"):
        pytest.skip(f"smollm2 not fetched (run `{fetch.fetch_command('smollm2')}`)")
    at = app(model="smollm2", view="scores")
    ok(at)
    assert charts(at) == 6  # qk, scaled, mask, masked, softmax, rope_bands


def test_missing_seed_weights_fall_back_to_the_untrained_model(monkeypatch, tmp_path):
    from model import registry

    monkeypatch.setitem(registry.SEED_WEIGHTS, "seed-sort", tmp_path / "missing.safetensors")
    at = app(model="seed-sort", view="tokens")
    ok(at)
    assert "not available" in warnings(at) and "missing.safetensors" in warnings(at)
    assert charts(at) >= 1
