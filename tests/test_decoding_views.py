"""The Decoding view on figure objects (explorer/views/trace.py, decoding.py, the "decoding" stage):
the trace keeps exactly what each step's hooks saw; at step t the figure's new query row is the
step's pattern row, the new key column of the K and V caches is outlined, later rows and columns
are covered, the cross-attention row is there for the seed model; every step is a frame the
browser plays; tokens are escaped; Korean has no English catalogue word; the wire dict is what
validated plotly makes."""
from __future__ import annotations

import json
import re

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch
from helpers import strings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile import RAW_MARKUP, raw_text
from test_i18n import clean, english_words, figure_strings, table_strings
from safetensors.torch import save_file
from test_pretrained_tiny import BERT_CFG, bert_state, bert_tokenizer, write_llama_gguf

import model
from explorer import fastpath, inputs
from explorer.views import stages
from explorer.views.trace import DECODER_MAX_NEW_TOKENS, hook_names, trace_data
from model import fetch

SEED_TEXT = "attention is all you need"


@pytest.fixture(scope="module")
def seed():
    return model.load("seed")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """The tiny random Llama GGUF of test_pretrained_tiny (4 query heads sharing 2 K/V heads)."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(fetch.ENV_VAR, str(folder / "cache"))
        write_llama_gguf(folder / "tiny.gguf")
        return model.load(folder / "tiny.gguf")


def run_with_trace(m, texts, sentence=0, **kw):
    return stages.run_data(m, texts).with_trace(trace_data(m, texts[sentence], **kw))


def figure(m, run, sentence=0, layer=0, head=0, step=0, lang="en", block=None):
    block = block or m.info.blocks[-1]
    sel = stages.Selection(m.info.name, sentence, layer, head, block)
    return stages.stage_figure("decoding", run, m.info, sel, lang=lang, step=step)


def spec(fig) -> dict:
    return json.loads(pio.to_json(fastpath.plain_dict(fig), validate=False, engine="json"))


def z_of(fig, name: str) -> np.ndarray:
    (t,) = [t for t in fig.data if t.type == "heatmap" and t.xaxis == name]
    return np.asarray(t.z, dtype=float)


def boxes(shapes, xref: str) -> list:
    """The outlines (transparent rectangles with a line) on one panel."""
    return [s for s in shapes if s["xref"] == xref and s.get("fillcolor") == "rgba(0,0,0,0)"]


def covers(shapes, xref: str) -> list:
    return [s for s in shapes if s["xref"] == xref and s.get("layer") == "above"
            and s.get("fillcolor") != "rgba(0,0,0,0)"]


# --- the trace ------------------------------------------------------------------------------------
@pytest.mark.parametrize("which, text", [("seed", SEED_TEXT), ("llama", "the cat sat on the mat")])
def test_the_trace_keeps_what_every_step_saw(request, which, text):
    m = request.getfixturevalue(which)
    tr = trace_data(m, text, max_new_tokens=12)
    full = m.generate_with_cache([text], 12, names=hook_names(m.info))
    assert tr.n_steps == len(full) and tr.tokens == full.decoder_tokens[0]
    assert tr.query.tolist() == full.query and tr.generated == full.generated[0]
    group = m.info.n_heads // m.info.n_kv_heads
    assert tr.kv_group == group and tr.k_cache.shape[1] == m.info.n_kv_heads
    for t, step in enumerate(full.steps):
        q = full.query[t]
        for i in range(tr.n_layers):
            a = f"decoder.blocks.{i}.self_attn."
            np.testing.assert_array_equal(tr.self_pattern[i, :, q, : q + 1], step[a + "hook_pattern"][0, :, 0].numpy())
            assert np.isnan(tr.self_pattern[i, :, q, q + 1:]).all()  # later keys do not exist yet
            # the cache at step t is the first q + 1 columns of the last step's cache, one per K/V head
            np.testing.assert_array_equal(tr.k_cache[i, :, : q + 1], step[a + "hook_k"][0, ::group].numpy())
            np.testing.assert_array_equal(tr.v_cache[i, :, : q + 1], step[a + "hook_v"][0, ::group].numpy())
            if tr.cross_pattern is not None:
                np.testing.assert_array_equal(tr.cross_pattern[i, :, q],
                                              step[f"decoder.blocks.{i}.cross_attn.hook_pattern"][0, :, 0].numpy())
        assert tr.self_allowed[q, : q + 1].tolist() == step["decoder.blocks.0.self_attn.hook_mask"][0, 0, 0].tolist()
        assert torch.equal(torch.from_numpy(tr.top_ids[t]).long(), full.top[t].ids[0])
        assert tr.chosen_tokens[t] == full.top[t].chosen_token[0]
    if which == "llama":  # the prompt but its last token, read at once before step 0
        P1 = len(full.input_token_ids[0]) - 1
        assert tr.n_prompt_rows == P1 and full.query[0] == P1
        np.testing.assert_array_equal(tr.self_pattern[1, :, :P1, :P1][~np.isnan(tr.self_pattern[1, :, :P1, :P1])],
                                      full.prompt["decoder.blocks.1.self_attn.hook_pattern"][0].numpy()[
                                          :, np.tril(np.ones((P1, P1), bool))].ravel())
        assert tr.cross_pattern is None
    else:
        assert tr.n_prompt_rows == 0 and tr.cross_pattern.shape[-1] == len(tr.input_tokens)


def test_the_seed_trace_writes_what_the_run_wrote(seed):
    texts = [SEED_TEXT, "안녕하세요"]
    out, _ = seed.run_with_cache(texts)
    for text, generated in zip(texts, out.generated):
        tr = trace_data(seed, text)
        assert tr.generated == generated and tr.finished
        assert tr.tokens[0] == "<s>" and tr.tokens[-1] == "</s>" and tr.n_steps == len(tr.tokens) - 1


def test_a_decoder_only_model_writes_at_most_the_apps_bound(llama):
    tr = trace_data(llama, "12")
    assert tr.max_new_tokens == DECODER_MAX_NEW_TOKENS and tr.n_steps <= DECODER_MAX_NEW_TOKENS
    assert tr.n_steps == DECODER_MAX_NEW_TOKENS or tr.finished


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """The tiny BERT of test_pretrained_tiny: an encoder only."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(fetch.ENV_VAR, str(folder / "cache"))
        (folder / "config.json").write_text(json.dumps(BERT_CFG))
        save_file(bert_state(), str(folder / "model.safetensors"))
        bert_tokenizer().save(str(folder / "tokenizer.json"))
        return model.load(folder)


def test_an_encoder_only_model_has_no_decoding(bert, seed):
    assert not stages.applies("decoding", bert.info)
    assert stages.applies("decoding", seed.info) and stages.applies("decoding", {**seed.info.as_dict(), "kind": "decoder"})
    with pytest.raises(TypeError, match="for models with a decoder"):
        trace_data(bert, "the cat")
    fig, df = figure(bert, stages.run_data(bert, ["the cat"]))  # called anyway: it says what it is for
    assert df is None and "a decoder that writes text" in fig.layout.annotations[0].text


# --- the figure -----------------------------------------------------------------------------------
@pytest.mark.parametrize("step", [0, 3, 11])
def test_step_t_shows_the_new_query_row_over_the_cached_keys_and_marks_the_new_column(seed, step):
    run = run_with_trace(seed, [SEED_TEXT, "x"])
    full = seed.generate_with_cache([SEED_TEXT], names=hook_names(seed.info))
    layer, head = 1, 2
    fig, df = figure(seed, run, layer=layer, head=head, step=step)
    q = full.query[step]
    want = full.steps[step][f"decoder.blocks.{layer}.self_attn.hook_pattern"][0, head, 0].numpy()
    z = z_of(fig, "x")
    np.testing.assert_allclose(z[q, : q + 1], want, atol=1e-7)  # the new query row, over keys 0..q
    shapes = [s.to_plotly_json() for s in fig.layout.shapes]
    (row,) = boxes(shapes, "x")
    assert (row["y0"], row["y1"], row["x1"]) == (q - 0.5, q + 0.5, q + 0.5)  # outlined, up to the newest key
    for panel in ("x2", "x3"):  # the K and V caches: the column this step appended, outlined
        (col,) = boxes(shapes, panel)
        assert (col["x0"], col["x1"]) == (q - 0.5, q + 0.5)
    T = len(run.trace.tokens)
    if q + 1 < T:  # what later steps compute is covered
        assert [c["y0"] for c in covers(shapes, "x")] == [q + 0.5]
        assert [c["x0"] for c in covers(shapes, "x2")] == [q + 0.5]
    k = full.steps[step][f"decoder.blocks.{layer}.self_attn.hook_k"][0, head].numpy()  # (q + 1, hs)
    np.testing.assert_allclose(z_of(fig, "x2")[:, : q + 1], k.T, atol=1e-7)
    # the cross-attention row into the encoder's memory
    cross = full.steps[step][f"decoder.blocks.{layer}.cross_attn.hook_pattern"][0, head, 0].numpy()
    np.testing.assert_allclose(z_of(fig, "x4")[q], cross, atol=1e-7)
    assert boxes(shapes, "x4")[0]["y0"] == q - 0.5
    # the candidates, the chosen one in its own colour
    (bars,) = [t for t in fig.data if t.type == "bar"]
    np.testing.assert_allclose(bars.x, full.top[step].probs[0].numpy(), atol=1e-7)
    chosen = full.top[step].chosen[0].item()
    assert [c == "#D55E00" for c in bars.marker.color] == [i == chosen for i in full.top[step].ids[0].tolist()]
    # the text written so far, and the token chosen now
    (text,) = [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    written = "".join(full.decoder_tokens[0][1: q + 1])  # running text (the chosen token: spaces visible)
    assert f"“{written}” → <b>{full.top[step].chosen_token[0].replace(' ', '␣')}</b>" in text.text[0]
    assert fig.layout.sliders[0].active == step
    assert len(df) == len(full) and df.iloc[step]["writes"] == full.top[step].chosen_token[0]


def test_every_step_is_a_frame_the_browser_plays(seed):
    run = run_with_trace(seed, ["banana"])
    tr = run.trace
    fig, _ = figure(seed, run, step=2)
    d = spec(fig)
    assert [f["name"] for f in d["frames"]] == [str(t) for t in range(tr.n_steps)]
    assert [s["args"][0] for s in d["layout"]["sliders"][0]["steps"]] == [[str(t)] for t in range(tr.n_steps)]
    play, pause = d["layout"]["updatemenus"][0]["buttons"]
    assert play["method"] == "animate" and play["args"][0] is None and play["args"][1]["fromcurrent"]
    assert pause["args"][0] == [None]
    for t, frame in enumerate(d["frames"]):
        q = int(tr.query[t])
        (row,) = boxes(frame["layout"]["shapes"], "x")
        assert row["y0"] == q - 0.5
        labels = frame["layout"]["yaxis"]["ticktext"]
        assert all(lab == "" for lab in labels[q + 1:]) and all(labels[: q + 1])  # nothing written yet: no label
        assert frame["traces"] == [i for i, tr_ in enumerate(d["data"]) if tr_["type"] in ("bar",)] + [len(d["data"]) - 1]
    # the frame of the step it opens at is what the figure shows first
    assert d["frames"][2]["layout"]["shapes"] == d["layout"]["shapes"]


def test_the_timeline_is_small_enough_to_send(seed):
    """The heatmaps are sent once; a frame carries only what moves."""
    text = "abcdefghijklmnopqrstuvwxyz0123"  # 31 steps
    run = run_with_trace(seed, [text])
    fig, _ = figure(seed, run)
    size = len(json.dumps(spec(fig)))
    assert run.trace.n_steps >= 30 and size < 400_000, size
    frames = spec(fig)["frames"]
    assert max(len(json.dumps(f)) for f in frames) < 6_000


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_wire_dict_is_what_validated_plotly_makes(seed, llama, lang):
    for m, texts in ((seed, ["hello <b>&", "x"]), (llama, ["the cat", "12"])):
        run = run_with_trace(m, texts, max_new_tokens=6)
        fig, _ = figure(m, run, layer=1, head=3, step=2, lang=lang)
        plain = fastpath.plain_dict(fig)
        as_json = lambda d: json.loads(pio.to_json(d, validate=False, engine="json"))  # noqa: E731
        assert as_json(plain) == as_json(go.Figure(plain).to_dict())


def test_a_decoder_only_model_has_no_cross_attention_and_reads_its_kv_head(llama):
    run = run_with_trace(llama, ["the cat", "12"], max_new_tokens=5)
    tr = run.trace
    fig, df = figure(llama, run, layer=1, head=3, step=1)
    assert not [t for t in fig.data if t.xaxis == "x4"]
    g = 3 // tr.kv_group
    np.testing.assert_array_equal(z_of(fig, "x2"), tr.k_cache[1, g].T)  # head 3 reads K/V head 1
    assert any("K/V head 1" in a.text for a in fig.layout.annotations)
    (text,) = [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    assert "#6b6b6b'>the cat</span>" in text.text[0]  # the prompt, in grey
    assert "cross-attention looks most at" not in df.columns and len(df) == tr.n_steps


def test_user_text_is_never_markup(seed):
    run = run_with_trace(seed, ["<b>x</b> & <i>"])
    fig, df = figure(seed, run, step=4)
    d = spec(fig)
    ours = re.compile(r"</?b>|<br>|<extra></extra>|<span style='color:#6b6b6b'>|</span>")
    seen = [ours.sub("", s) for s in figure_strings(d)]
    assert [s for s in seen if "<" in s or ">" in s] == []  # every tag left is one the view wrote
    assert any("&lt;b&gt;x&lt;/b&gt; &amp; &lt;i&gt;" in s for s in seen)  # the input, escaped
    assert any(s == "&lt;s&gt;" for s in seen)  # a token label, escaped
    assert df.iloc[0]["reads"] == "<s>"  # the table keeps the tokens as they are


def test_without_a_trace_of_this_sentence_the_stage_says_how_to_get_one(seed):
    plain = stages.run_data(seed, ["hello", "world"])
    for run in (plain, plain.with_trace(trace_data(seed, "world"))):  # none / another sentence's
        fig, df = figure(seed, run, sentence=0)
        assert df is None and not fig.frames
        assert "trace_data(m, run.texts[i])" in fig.layout.annotations[0].text
    fig, df = figure(seed, plain.with_trace(trace_data(seed, "world")), sentence=1)
    assert fig.frames and df is not None


def test_out_of_range_selections_are_clipped(seed):
    run = run_with_trace(seed, ["abc"])
    fig, _ = figure(seed, run, layer=9, head=99, step=999, block="encoder.self_attn")
    assert fig.layout.sliders[0].active == run.trace.n_steps - 1


def test_korean_figures_and_tables_carry_no_english_catalogue_word():
    m = model.load("seed", random=True, d_model=32, n_heads=2)
    run = run_with_trace(m, ["안녕하세요 반갑습니다", "12 34"])
    words = english_words()
    for step in (0, 5):
        fig, df = figure(m, run, step=step, lang="ko")
        seen = [clean(s) for s in figure_strings(fig.to_dict())] + [str(s) for s in table_strings(df)]
        found = [f"{what!r} in {s[:80]!r}" for what, s in words.found(seen)]
        assert found == []
    # and the check can fail: the English figure has them
    fig, _ = figure(m, run, lang="en")
    assert any(p.search(clean(s)) for s in figure_strings(fig.to_dict()) for p in words.values())


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(raw=raw_text, step=st.integers(-3, 99), head=st.integers(-1, 9))
def test_any_text_decodes_into_a_safe_timeline(raw, step, head):
    """Fuzzed input (markup, controls, specials, emoji) through an untrained seed model, which writes
    anything at all: every string of the timeline carries only the view's own markup."""
    m = _untrained()
    texts, _ = inputs.limit_sentences(raw)
    if not texts:
        return
    texts, _ = inputs.limit_tokens(texts, m.tokenizer, inputs.MAX_TOKENS)
    run = stages.run_data(m, texts[:1]).with_trace(trace_data(m, texts[0], max_new_tokens=12))
    sel = stages.Selection("seed", 0, 1, head, "decoder.self_attn")
    fig, df = stages.stage_figure("decoding", run, m.info, sel, step=step, lang="ko" if head % 2 else "en")
    assert fig.frames and fig.to_json()
    for text in strings(fig.to_plotly_json()):
        assert not RAW_MARKUP.search(text), text[:120]
    for frame in fig.to_dict()["frames"]:
        for text in strings(frame):
            assert not RAW_MARKUP.search(text), text[:120]
    df.to_csv()


_UNTRAINED = []


def _untrained():
    if not _UNTRAINED:
        _UNTRAINED.append(model.load("seed", random=True))
    return _UNTRAINED[0]
