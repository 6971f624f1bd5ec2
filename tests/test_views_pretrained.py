"""The views that only the real checkpoints need, tested on the figure objects: learned position
embeddings (BERT), rotary frequencies and score vs distance (Llama), grouped-query K/V sharing and
the decoder's top next-token predictions.

Tiny BERT / llama checkpoints written by tests/test_pretrained_tiny.py's helpers go through the
real loaders (no fetched weights needed); the real MiniLM / SmolLM2 and the app (AppTest) are
checked when their weights are fetched.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

import model
from explorer.views import pretrained as pt
from explorer.views import stages
from model import fetch
from test_pretrained_tiny import BERT_CFG, LLAMA, bert_state, bert_tokenizer, write_llama_gguf

ROOT = Path(__file__).resolve().parent.parent
NEW = ("pe_learned_sim", "rope_freqs", "rope_distance", "gqa", "next_token")


def sel(m, **kw) -> stages.Selection:
    base = dict(model=m.info.name, sentence=0, layer=0, head=0, block=stages.blocks_for(m.info)[0])
    return stages.Selection(**{**base, **kw})


def heatmap(fig: go.Figure) -> go.Heatmap:
    hs = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(hs) == 1
    return hs[0]


@contextlib.contextmanager
def own_cache(folder: Path):
    """Conversions of the tiny checkpoints go to a temporary cache, never ~/.cache (only while
    loading: the real models' tests below use the real cache)."""
    old = os.environ.get(fetch.ENV_VAR)
    os.environ[fetch.ENV_VAR] = str(folder)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(fetch.ENV_VAR, None)
        else:
            os.environ[fetch.ENV_VAR] = old


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from safetensors.torch import save_file

    folder = tmp_path_factory.mktemp("tiny-bert")
    (folder / "config.json").write_text(json.dumps(BERT_CFG))
    save_file(bert_state(), str(folder / "model.safetensors"))
    bert_tokenizer().save(str(folder / "tokenizer.json"))
    with own_cache(tmp_path_factory.mktemp("cache")):
        return model.load(folder)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama") / "tiny.gguf"
    write_llama_gguf(path)
    with own_cache(tmp_path_factory.mktemp("cache")):
        return model.load(path)


# --- pure view functions ----------------------------------------------------------------------

def test_views_never_import_streamlit():
    code = ("import sys; import explorer.views.pretrained, explorer.views.stages; "
            "print('streamlit' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


def test_cosine_matrix():
    x = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [-1.0, 0.0], [0.0, 0.0]])
    c = pt.cosine_matrix(x)
    assert np.allclose(np.diag(c)[:4], 1.0)
    assert c[0, 1] == pytest.approx(1.0) and c[0, 2] == pytest.approx(0.0) and c[0, 3] == pytest.approx(-1.0)
    assert np.all(np.isfinite(c)) and np.all(c[4] == 0)  # a zero row: 0, not NaN


def test_learned_similarity_figure_is_cosine_with_token_axes():
    rng = np.random.default_rng(0)
    pe = rng.standard_normal((5, 8)) * np.arange(1, 6)[:, None]  # very different norms
    fig, df = pt.learned_similarity(pe, ["[CLS]", "a", "<b>", "c", "[SEP]"], title="t")
    z = np.asarray(heatmap(fig).z, dtype=float)
    want = pe @ pe.T / np.outer(np.linalg.norm(pe, axis=1), np.linalg.norm(pe, axis=1))
    assert np.allclose(z, want) and np.allclose(np.diag(z), 1.0)
    assert fig.layout.coloraxis.cmin == -1 and fig.layout.coloraxis.cmax == 1
    assert "&lt;b&gt;" in fig.layout.xaxis.ticktext and "<b>" not in fig.layout.xaxis.ticktext
    assert df.shape == (5, 5)


@pytest.mark.parametrize("d_head,base", [(64, 100000.0), (8, 10000.0)])
def test_rotary_frequencies_figure(d_head, base):
    fig, df = pt.rotary_frequencies_figure(d_head, base, title="θ")
    (trace,) = fig.data
    theta = np.asarray(trace.y, dtype=float)
    i = np.arange(d_head // 2)
    assert np.allclose(theta, base ** (-2 * i / d_head))
    assert theta[0] == 1.0 and np.all(np.diff(theta) < 0)  # pair 0 turns one radian a position
    assert fig.layout.yaxis.type == "log"
    assert np.allclose(df["wavelength"], 2 * math.pi / theta)
    assert df["dims"].iloc[1] == f"1, {1 + d_head // 2}"  # rotate-half pairs


def test_kv_groups_and_gqa_figure():
    assert pt.kv_groups(9, 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert pt.kv_groups(4, 4) == [[0], [1], [2], [3]]
    assert [pt.kv_head_of(h, 12, 2) for h in (0, 5, 6, 11)] == [0, 0, 1, 1]
    fig, df = pt.gqa_figure(9, 3, selected=4, title="gqa")
    z = np.asarray(heatmap(fig).z, dtype=float)
    assert z.shape == (3, 9)
    for h in range(9):  # exactly one K/V head per query head: h // 3
        assert [g for g in range(3) if not np.isnan(z[g, h])] == [h // 3]
    (rect,) = fig.layout.shapes
    assert (rect.x0, rect.x1) == (3.5, 4.5)
    assert df.loc[4, "K/V head"] == 1 and df.loc[4, "shared with"] == "3, 5"


def test_top_k_matches_torch_softmax():
    logits = np.random.default_rng(1).standard_normal((2, 3, 50)) * 4
    ids, probs = pt.top_k(logits, 10)
    p, i = torch.softmax(torch.tensor(logits), -1).topk(10, dim=-1)
    assert ids.shape == (2, 3, 10) and np.array_equal(ids, i.numpy())
    assert np.allclose(probs, p.numpy(), atol=1e-6)


def test_next_token_figure_bars_in_rank_order_and_escaped():
    fig, df = pt.next_token_figure([7, 3, 9], [0.5, 0.3, 0.1], [" Paris", "<script>", "\n"],
                                   context="position 4: “is”", title="next")
    (bar,) = fig.data
    assert list(bar.x) == [0.5, 0.3, 0.1]
    assert list(bar.y) == ["1. ␣Paris", "2. &lt;script&gt;", "3. ⏎"]
    assert fig.layout.yaxis.autorange == "reversed"  # the most likely on top
    assert "position 4" in fig.layout.title.text
    assert list(df.index) == [1, 2, 3] and list(df["id"]) == [7, 3, 9]


# --- the stages on tiny real-format checkpoints ------------------------------------------------

def test_applies_per_model_kind(tiny_bert, tiny_llama):
    seed = {"kind": "encoder-decoder", "n_heads": 8, "n_kv_heads": 8, "positional": "sinusoidal"}
    assert [s for s in NEW if stages.applies(s, seed)] == []
    assert [s for s in NEW if stages.applies(s, tiny_bert.info)] == ["pe_learned_sim"]
    assert [s for s in NEW if stages.applies(s, tiny_llama.info)] == ["rope_freqs", "rope_distance", "gqa",
                                                                        "next_token"]


def test_learned_positions_stages(tiny_bert):
    run = stages.run_data(tiny_bert, ["the cat sat", "a dog"])
    pe = run["encoder.hook_pos_embed"][0]
    fig, df = stages.stage_figure("pe_heatmap", run, tiny_bert.info, sel(tiny_bert))
    assert np.allclose(np.asarray(heatmap(fig).z, dtype=float), pe)  # the model's own table, not sinusoidal
    fig, df = stages.stage_figure("pe_learned_sim", run, tiny_bert.info, sel(tiny_bert), lang="ko")
    z = np.asarray(heatmap(fig).z, dtype=float)
    assert np.allclose(z, pt.cosine_matrix(pe)) and z.shape == (pe.shape[0],) * 2
    assert fig.layout.title.text == stages.stage_title("pe_learned_sim", "ko") == "학습된 위치: 유사도 (코사인)"
    assert run.top_ids is None  # an encoder keeps no next-token predictions
    fig, df = stages.stage_figure("next_token", run, tiny_bert.info, sel(tiny_bert))
    assert df is None and "decoder" in fig.layout.annotations[0].text


def test_rotary_stages(tiny_llama):
    run = stages.run_data(tiny_llama, ["the cat"])
    info = tiny_llama.info
    fig, df = stages.stage_figure("rope_freqs", run, info, sel(tiny_llama))
    d = info.d_head
    assert np.allclose(fig.data[0].y, model.arch.positional.rotary_frequencies(d, info.positional_base).numpy())
    assert f"base {info.positional_base:g}" in fig.layout.title.text
    fig, df = stages.stage_figure("rope_distance", run, info, sel(tiny_llama))
    s = np.asarray(fig.data[0].y, dtype=float)
    assert len(s) >= 65 and s[0] == pytest.approx(s.max())  # same content: distance 0 scores highest


def test_gqa_stage_and_head_note(tiny_llama):
    info = tiny_llama.info
    assert (info.n_heads, info.n_kv_heads) == (LLAMA["n_heads"], LLAMA["n_kv"])
    run = stages.run_data(tiny_llama, ["the cat"], with_weights=False)
    fig, df = stages.stage_figure("gqa", run, info, sel(tiny_llama, head=3))
    assert np.asarray(heatmap(fig).z).shape == (2, 4) and fig.layout.shapes[0].x0 == 2.5
    assert list(df["K/V head"]) == [0, 0, 1, 1]
    assert stages.kv_head_note(info, 3) == "Head 3 reads K/V head 1 (shared with heads 2)."
    assert "1번 K/V 헤드" in stages.kv_head_note(info, 3, "ko")
    assert stages.kv_head_note({"n_heads": 4, "n_kv_heads": 4}, 1) is None
    # the hooks agree: heads sharing a K/V head see the same keys
    k = run["decoder.blocks.0.self_attn.hook_k"][0]
    assert np.array_equal(k[2], k[3]) and not np.array_equal(k[1], k[2])


def test_next_token_stage_keeps_only_top_k(tiny_llama):
    texts = ["the cat", "the"]
    out, cache = tiny_llama.run_with_cache(texts)
    run = stages.run_data(tiny_llama, texts, with_weights=False)
    B, T, V = out.logits.shape
    assert run.top_ids.shape == run.top_probs.shape == (B, T, 10)
    assert run.top_ids.dtype == np.int32 and run.top_probs.dtype == np.float32
    p, i = torch.softmax(out.logits.float(), -1).topk(10, dim=-1)
    assert np.array_equal(run.top_ids, i.numpy()) and np.allclose(run.top_probs, p.numpy(), atol=1e-6)
    assert len(pickle.dumps(run.top_ids)) < 4 * B * T * V // 10  # far smaller than the logits
    pickle.loads(pickle.dumps(run))  # the cached run stays picklable

    last = len(cache.tokens[0]) - 1
    fig, df = stages.stage_figure("next_token", run, tiny_llama.info, sel(tiny_llama))
    assert list(df["id"]) == i[0, last].tolist()
    assert list(df["token"]) == [tiny_llama.token_text(t) for t in i[0, last].tolist()]
    assert np.allclose(fig.data[0].x, p[0, last].numpy(), atol=1e-6)
    assert f"position {last}" in fig.layout.title.text
    fig, df = stages.stage_figure("next_token", run, tiny_llama.info, sel(tiny_llama), next_position=0)
    assert list(df["id"]) == i[0, 0].tolist() and "position 0" in fig.layout.title.text
    # the shorter sentence: its own last real token, never a pad position
    fig, df = stages.stage_figure("next_token", run, tiny_llama.info, sel(tiny_llama, sentence=1),
                                  next_position=99)
    n1 = len(cache.tokens[1])
    assert list(df["id"]) == i[1, n1 - 1].tolist()


def test_next_tokens_last_reads_out_the_last_token_only_and_the_rest_on_demand(tiny_llama):
    """The app's runs (next_tokens="last") read the vocabulary out after each sentence's last token
    only; every other position comes from the last block's stream when asked (next_top_every)."""
    texts = ["the cat", "the"]
    every = stages.run_data(tiny_llama, texts, with_weights=False)
    last = stages.run_data(tiny_llama, texts, with_weights=False, next_tokens="last")
    assert last.top_ids is None and last.last_top_ids.shape == last.last_top_probs.shape == (2, 10)
    assert last.final_logprobs.shape == every.final_logprobs.shape
    # float32 readouts of the same stream as a (B, d) and a (B·T, d) product: the sums' order may differ,
    # ~1e-7 relative on logits of order 1 here (d_model 32); a wrong position or a missing softmax is >1e-2
    np.testing.assert_allclose(last.final_logprobs, every.final_logprobs, atol=1e-5)
    for s in range(2):
        n = len(every.token_ids[s])
        ids, probs = last.next_top(s, n - 1)
        assert np.array_equal(ids, every.top_ids[s, n - 1])
        np.testing.assert_allclose(probs, every.top_probs[s, n - 1], atol=1e-6)
        assert n == 1 or last.next_top(s, 0) is None  # not read out: the page attaches it first
        fig, df = stages.stage_figure("next_token", last, tiny_llama.info, sel(tiny_llama, sentence=s))
        assert list(df["id"]) == every.top_ids[s, n - 1].tolist()
    fig, _ = stages.stage_figure("next_token", last, tiny_llama.info, sel(tiny_llama), next_position=0)
    assert "position 0" not in fig.layout.title.text  # says it lacks them, draws nothing made up
    from explorer.views.data import next_top_every

    full = last.with_top(next_top_every(tiny_llama, last))
    assert np.array_equal(full.top_ids, every.top_ids) and np.array_equal(full.top_probs, every.top_probs)
    fig, df = stages.stage_figure("next_token", full, tiny_llama.info, sel(tiny_llama), next_position=0)
    assert list(df["id"]) == every.top_ids[0, 0].tolist() and "position 0" in fig.layout.title.text
    with pytest.raises(ValueError, match="next_tokens"):
        stages.run_data(tiny_llama, texts, next_tokens="first")


# --- the real checkpoints, and the app -----------------------------------------------------------

def need(name: str) -> None:
    if not fetch.is_fetched(name):
        pytest.skip(f"{name} weights not fetched (run `{fetch.fetch_command(name)}`)")


@pytest.mark.weights
def test_smollm2_predicts_paris_and_shares_kv_heads():
    need("smollm2")
    m = model.load("smollm2")
    run = stages.run_data(m, ["The capital of France is"], with_weights=False)
    fig, df = stages.stage_figure("next_token", run, m.info, sel(m))
    assert df["token"].iloc[0] == " Paris" and df["probability"].iloc[0] > 0.3
    fig, df = stages.stage_figure("gqa", run, m.info, sel(m, head=4))
    assert list(df["K/V head"]) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


@pytest.mark.weights
def test_minilm_learned_positions_neighbours_are_similar():
    need("minilm")
    m = model.load("minilm")
    run = stages.run_data(m, ["one two three four five six seven eight nine ten"], with_weights=False)
    fig, _ = stages.stage_figure("pe_learned_sim", run, m.info, sel(m))
    z = np.asarray(heatmap(fig).z, dtype=float)
    near = np.mean([z[i, i + 1] for i in range(len(z) - 1)])
    far = np.mean([z[i, j] for i in range(len(z)) for j in range(len(z)) if abs(i - j) >= 6])
    assert near > far  # training made neighbouring positions alike


@pytest.mark.weights
@pytest.mark.timeout(900)
def test_app_shows_the_pretrained_views():
    from streamlit.testing.v1 import AppTest

    need("minilm")
    need("smollm2")
    app = str(ROOT / "explorer" / "main.py")

    def page(**params) -> AppTest:
        at = AppTest.from_file(app, default_timeout=120)
        for k, v in params.items():
            at.query_params[k] = v
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]
        return at

    at = page(model="minilm", view="position", text="the cat sat on the mat")
    heads = [h.value for h in at.subheader]
    assert "Learned positions: similarity (cosine)" in heads
    assert not [h for h in heads if h.startswith("Rotary")]
    at = page(model="smollm2", view="position", text="The capital of France is")
    heads = [h.value for h in at.subheader]
    assert "Rotary: rotation frequencies θ_i" in heads and "Rotary: score vs relative distance" in heads
    assert "Head 0 reads K/V head 0 (shared with heads 1, 2)." in [c.value for c in at.sidebar.caption]
    at = page(model="smollm2", view="output", text="The capital of France is")
    assert at.selectbox(key="next_pos").value == 4  # the last real token
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert spec["data"][0]["y"][0] == "1. ␣Paris"
    at.selectbox(key="next_pos").set_value(1).run()
    spec = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert "position 1" in spec["layout"]["title"]["text"]
    at = page(model="smollm2", view="qkv", text="hi")
    assert "Grouped-query attention: shared K/V heads" in [h.value for h in at.subheader]
