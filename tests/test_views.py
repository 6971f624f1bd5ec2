"""The views: figure objects (not pixels): shapes, token axes, masked cells, colour scales,
escaping, tables; and the pieces the app relies on (inputs, i18n)."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from helpers import VIEW_TEXTS, strings

import model
from explorer import i18n, inputs
from explorer.views import attention as av
from explorer.views import positional as pv
from explorer.views import stages, style
from explorer.views.data import axis_tokens, head_weights, prefix

ROOT = Path(__file__).resolve().parent.parent
TEXTS = VIEW_TEXTS  # the fixtures seed and run (tests/conftest.py) ran these


def sel(block="encoder.self_attn", sentence=0, layer=1, head=2, query=2, key=3):
    return stages.Selection(model="seed", sentence=sentence, layer=layer, head=head, block=block,
                            query=query, key=key)


def heatmaps(fig):
    return [t for t in fig.data if isinstance(t, go.Heatmap)]


SCORES_SCALE = go.layout.Coloraxis(colorscale=style.SCORES).colorscale
WEIGHTS_SCALE = go.layout.Coloraxis(colorscale=style.WEIGHTS).colorscale


# --- the contract ----------------------------------------------------------------------------

def test_contract_names():
    assert stages.BLOCKS == ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
    ids = [sid for sid, _ in stages.STAGES]
    assert ids[0] == "tokens" and ids.index("qk") < ids.index("scaled") < ids.index("mask") \
        < ids.index("masked") < ids.index("softmax") < ids.index("z") < ids.index("out")
    for _, titles in stages.STAGES:
        assert set(titles) == {"en", "ko"} and all(titles.values())
    assert {s for _, group in stages.SECTIONS for s in group} == set(ids)


def test_blocks_for_each_model_kind(seed):
    assert stages.blocks_for(seed.info) == list(stages.BLOCKS)
    assert stages.blocks_for({"kind": "encoder"}) == ["encoder.self_attn"]
    assert stages.blocks_for({"kind": "decoder"}) == ["decoder.self_attn"]


@pytest.mark.parametrize("block", stages.BLOCKS)
def test_every_stage_builds_a_figure_and_a_table(seed, run, block):
    for sid, _ in stages.STAGES:
        for lang in ("en", "ko"):
            fig, df = stages.stage_figure(sid, run, seed.info, sel(block, sentence=1), lang=lang)
            assert isinstance(fig, go.Figure), sid
            assert df is None or isinstance(df, pd.DataFrame), sid
            fig.to_json()  # serialisable
            if df is not None:
                df.to_csv()
                assert df.index.is_unique, sid


def test_works_from_a_model_cache_too_and_says_when_weights_are_missing(seed):
    _, cache = seed.run_with_cache(TEXTS)
    fig, df = stages.stage_figure("softmax", cache, seed.info, sel())
    assert df is not None
    fig, df = stages.stage_figure("weights", cache, seed.info, sel())
    assert df is None and fig.layout.annotations
    fig, df = stages.stage_figure("out", cache, seed.info, sel(), weights=seed)
    assert df is not None


def test_out_of_range_selection_is_clipped_and_unknown_stage_is_an_error(seed, run):
    s = stages.clip_selection(sel(layer=999, head=-3, sentence=7, query=500), run, seed.info)
    assert (s.layer, s.head, s.sentence) == (1, 0, 1) and s.query == len(run.tokens[1]) - 1
    fig, _ = stages.stage_figure("softmax", run, seed.info, sel(layer=999, head=-3))
    assert isinstance(fig, go.Figure)
    with pytest.raises(ValueError, match="unknown stage"):
        stages.stage_figure("nope", run, seed.info, sel())


def test_caption_names_model_sentence_layer_head_and_stage():
    c = stages.caption("seed", "hello\nworld <b>", sel(layer=1, head=2), "softmax")
    assert c.startswith("seed · ") and "layer 1" in c and "head 2" in c and c.endswith("Softmax weights")
    assert "⏎" in c and "\n" not in c
    assert "레이어 1" in stages.caption("seed", "x", sel(), "qk", lang="ko")


# --- token axes ------------------------------------------------------------------------------

def test_axes_are_integer_positions_labelled_by_tokens_even_when_tokens_repeat(seed, run):
    fig, _ = stages.stage_figure("softmax", run, seed.info, sel())
    q_toks, k_toks, _, _ = axis_tokens(run, "encoder.self_attn", 0, 1)
    assert q_toks.count("l") == 2
    x, y = fig.layout.xaxis, fig.layout.yaxis
    assert list(x.tickvals) == list(range(len(k_toks)))
    assert list(x.ticktext) == style.token_labels(k_toks)
    assert list(y.ticktext) == style.token_labels(q_toks)
    assert list(heatmaps(fig)[0].x) == list(range(len(k_toks)))
    assert tuple(y.range) == (len(q_toks) - 0.5, -0.5)  # rows top to bottom


def test_same_token_order_on_every_axis(seed, run):
    ref = None
    for sid in ("qk", "scaled", "mask", "masked", "softmax", "z"):
        fig, _ = stages.stage_figure(sid, run, seed.info, sel())
        lay = fig.layout.to_plotly_json()
        for name, axis in lay.items():
            if name.startswith(("xaxis", "yaxis")) and axis.get("ticktext") and len(axis["ticktext"]) > 1:
                ref = ref or list(axis["ticktext"])
                assert list(axis["ticktext"]) == ref, (sid, name)


def test_cross_attention_rows_are_decoder_tokens_and_columns_encoder_tokens(seed, run):
    fig, _ = stages.stage_figure("softmax", run, seed.info, sel("decoder.cross_attn"))
    q_toks, k_toks, _, _ = axis_tokens(run, "decoder.cross_attn", 0, 1)
    assert q_toks[0] == "<s>" and list(fig.layout.yaxis.ticktext) == style.token_labels(q_toks)
    assert list(fig.layout.xaxis.ticktext) == style.token_labels(k_toks)
    assert k_toks[: len(run.tokens[0])] == run.tokens[0]


def test_pads_are_marked_in_the_batch_and_on_the_axes(seed, run):
    fig, df = stages.stage_figure("tokens", run, seed.info, sel())
    z = np.asarray(heatmaps(fig)[0].z)
    assert z.shape == (2, max(len(t) for t in run.tokens))
    assert (z[0, len(run.tokens[0]):] == 2).all() and (z[1] != 2).all()  # 2 = pad
    assert list(df["token"]) == run.tokens[0] and {"id", "start", "end"} <= set(df.columns)
    assert df.loc[0, "text"] == "h" and df["id"].tolist() == run.token_ids[0]
    fig, _ = stages.stage_figure("qk", run, seed.info, sel())
    assert list(fig.layout.xaxis.ticktext)[-1] == style.esc("<pad>")


# --- masking -----------------------------------------------------------------------------------

def test_masked_cells_are_nan_never_a_big_number(seed, run):
    for block in ("encoder.self_attn", "decoder.self_attn"):
        s = sel(block)
        fig, df = stages.stage_figure("masked", run, seed.info, s)
        p = prefix(block, s.layer)
        allowed = run[f"{p}.hook_mask"][0, 0]
        z = np.asarray(heatmaps(fig)[0].z, dtype=float)
        assert (~allowed).any()
        assert np.isnan(z[~allowed]).all() and np.isfinite(z[allowed]).all()
        assert np.nanmax(np.abs(z)) < 1e3
        custom = np.asarray(heatmaps(fig)[0].customdata)
        assert all("masked" in str(c) for c in custom[~allowed][:, 2])
        assert np.isneginf(df.to_numpy()[~allowed]).all()  # the table keeps the exact −inf


def test_softmax_masked_cells_and_row_sums(seed, run):
    fig, df = stages.stage_figure("softmax", run, seed.info, sel("decoder.self_attn"))
    w, sums = heatmaps(fig)
    allowed = run[f"{prefix('decoder.self_attn', 1)}.hook_mask"][0, 0]
    assert np.isnan(np.asarray(w.z, dtype=float)[~allowed]).all()
    assert np.allclose(np.asarray(sums.z, dtype=float), 1.0, atol=1e-5)
    assert "%{customdata[2]}" in w.hovertemplate  # the value on hover
    assert np.allclose(df.iloc[:, -1], 1.0, atol=1e-5)


def test_masks_are_visibly_distinct(seed, run):
    fig, df = stages.stage_figure("mask", run, seed.info, sel("decoder.self_attn", sentence=0))
    pad, cau, comb = heatmaps(fig)
    assert set(np.unique(cau.z)) == {0, 2} and set(np.unique(pad.z)) <= {0, 1}
    colours = {c for _, c in comb.colorscale}
    assert len(colours) == 4
    assert {"allowed", "causal"} <= set(np.unique(df.to_numpy()))
    # encoder self-attention of the shorter sentence: padding only, one panel (no causal panel: there is
    # no causal mask there), and the same for cross-attention
    for block in ("encoder.self_attn", "decoder.cross_attn"):
        fig, _ = stages.stage_figure("mask", run, seed.info, sel(block, sentence=0))
        (comb,) = heatmaps(fig)
        assert set(np.unique(comb.z)) == {0, 1}, block
        assert not any("causal" in a.text for a in fig.layout.annotations), block


def test_mask_categories():
    allowed = np.tril(np.ones((4, 4), bool))
    allowed[:, 3] = False
    cat = av.mask_categories(allowed, n_real_keys=3, causal=True)
    assert cat[0, 1] == 2 and cat[3, 3] == 1 and cat[0, 3] == 3 and cat[2, 0] == 0


# --- colour scales -------------------------------------------------------------------------------

def _coloraxes(fig):
    lay = fig.layout.to_plotly_json()
    return {k: v for k, v in lay.items() if k.startswith("coloraxis")}


def test_one_diverging_scale_for_scores_one_sequential_for_weights(seed, run):
    for sid in ("qk", "scaled", "masked", "qkv", "weights", "out", "embedding", "pe_heatmap",
                "pe_similarity"):
        fig, _ = stages.stage_figure(sid, run, seed.info, sel())
        axes = _coloraxes(fig)
        assert axes, sid
        for ax in axes.values():
            assert go.layout.Coloraxis(ax).colorscale == SCORES_SCALE, sid
            assert ax.get("cmid") == 0 or ax["cmin"] == -ax["cmax"], sid
    for sid in ("softmax", "overview"):
        fig, _ = stages.stage_figure(sid, run, seed.info, sel())
        assert go.layout.Coloraxis(fig.layout.coloraxis).colorscale == WEIGHTS_SCALE
        assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)


def test_colour_scales_are_named_only_in_style():
    for path in (ROOT / "explorer" / "views").glob("*.py"):
        if path.name in ("style.py", "theme.py"):
            continue
        text = path.read_text()
        for name in ("RdBu", "Viridis", "Blues", "colorscale=\""):
            assert name not in text, (path.name, name)


def test_scaled_scores_share_the_raw_scores_range_and_divide_by_sqrt_dk(seed, run):
    raw, _ = stages.stage_figure("qk", run, seed.info, sel())
    scaled, _ = stages.stage_figure("scaled", run, seed.info, sel())
    r, s = np.asarray(heatmaps(raw)[0].z), np.asarray(heatmaps(scaled)[0].z)
    assert np.allclose(r / math.sqrt(seed.info.d_head), s, atol=1e-4)
    assert raw.layout.coloraxis.cmax == pytest.approx(scaled.layout.coloraxis.cmax)


# --- escaping ----------------------------------------------------------------------------------

def test_escape_and_visible_helpers():
    assert style.esc("<b>&</b>") == "&lt;b&gt;&amp;&lt;/b&gt;"
    assert style.visible(" ") == "␣" and style.visible("\n") == "⏎" and style.visible("\x07") == "␇"
    assert style.visible("\t") == "⇥" and style.visible("\x7f") == "␡" and style.visible("") == "∅"
    assert style.token_label("<script>") == "&lt;script&gt;"
    assert style.visible("안녕🙂") == "안녕🙂"


def test_user_html_never_reaches_a_figure_unescaped(seed):
    evil = ["<b>x</b><script>alert(1)</script>&", "<img src=x onerror=alert(1)>"]
    r = stages.run_data(seed, evil)
    for block in stages.BLOCKS:
        for sid, _ in stages.STAGES:
            fig, _ = stages.stage_figure(sid, r, seed.info, sel(block, query=1, key=1))
            for s in strings(fig.to_plotly_json()):
                assert "<script" not in s and "<img" not in s and "<b>x" not in s, (sid, s)
    fig, _ = stages.stage_figure("softmax", r, seed.info, sel())
    assert "&lt;" in fig.layout.xaxis.ticktext and "<" not in fig.layout.xaxis.ticktext


def test_whole_word_tokens_are_escaped_in_ticks_and_hover():
    fig, _ = av.scores_figure(np.zeros((2, 2)), ["<b>", "&amp"], ["<i>x</i>", " "])
    assert list(fig.layout.yaxis.ticktext) == ["&lt;b&gt;", "&amp;amp"]
    assert list(fig.layout.xaxis.ticktext) == ["&lt;i&gt;x&lt;/i&gt;", "␣"]
    assert np.asarray(fig.data[0].customdata)[0, 0, 0] == "&lt;b&gt;"


# --- positional encoding -------------------------------------------------------------------------

def test_pe_heatmap_is_the_models_encoding_and_matches_sinusoidal(seed, run):
    fig, df = stages.stage_figure("pe_heatmap", run, seed.info, sel())
    z = np.asarray(heatmaps(fig)[0].z)
    T = run["encoder.hook_pos_embed"].shape[1]
    assert z.shape == (T, seed.info.d_model)
    assert np.allclose(z, run["encoder.hook_pos_embed"][0])
    assert np.allclose(z, pv.sinusoidal_table(T, seed.info.d_model, 10000.0), atol=1e-6)
    assert df.shape == (T, seed.info.d_model)


def test_pe_base_and_d_model_controls(seed, run):
    a, _ = stages.stage_figure("pe_similarity", run, seed.info, sel(), pe_base=10000.0)
    b, _ = stages.stage_figure("pe_similarity", run, seed.info, sel(), pe_base=100.0, pe_d_model=16)
    assert not np.allclose(heatmaps(a)[0].z, heatmaps(b)[0].z)
    fig, df = stages.stage_figure("pe_compare", run, seed.info, sel(), pe_positions=50)
    assert len(heatmaps(fig)) == 4
    titles = [a.text for a in fig.layout.annotations]
    assert any("10000" in t for t in titles) and any("n = 100" in t for t in titles)
    assert df.shape[0] == 50
    fig, df = stages.stage_figure("pe_curves", run, seed.info, sel(), pe_dims=[0, 1, 6], pe_base=100.0)
    assert list(df.columns) == ["dim 0", "dim 1", "dim 6"]
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 3 and "sin" in lines[0].name and "cos" in lines[1].name


def test_embedding_encoding_and_sum(seed, run):
    fig, df = stages.stage_figure("embedding", run, seed.info, sel())
    e, p, s = (np.asarray(h.z) for h in heatmaps(fig))
    assert np.allclose(e + p, s, atol=1e-5)


# --- Q, K, V, output, one cell, overview ---------------------------------------------------------

def test_qkv_side_by_side_and_weights_are_the_heads_slices(seed, run):
    s = sel()
    fig, df = stages.stage_figure("qkv", run, seed.info, s)
    q, k, v = heatmaps(fig)
    p = prefix(s.block, s.layer)
    assert np.allclose(q.z, run[f"{p}.hook_q"][0, s.head])
    assert np.asarray(q.z).shape == (len(axis_tokens(run, s.block, 0, s.layer)[0]), seed.info.d_head)
    fig, df = stages.stage_figure("weights", run, seed.info, s)
    wq = np.asarray(heatmaps(fig)[0].z)
    assert wq.shape == (seed.info.d_model + 1, seed.info.d_head)  # W_Q[h] and its bias row "b"
    assert list(fig.layout.yaxis.ticktext)[-1] == "b"
    # x · W_Q[h] + b reproduces the hook's q
    x = run["encoder.hook_embed"][0] + run["encoder.hook_pos_embed"][0]
    s0 = sel(layer=0)
    hw = head_weights(run.weights, prefix(s0.block, 0), s0.head, seed.info.n_heads, seed.info.d_head)
    assert np.allclose(x @ hw["W_Q"] + hw["b_Q"], run[f"{prefix(s0.block, 0)}.hook_q"][0, s0.head], atol=1e-4)
    # ... and so do the X and the W_Q table on screen, for every layer (X: the stream entering it)
    for layer in (0, 1):
        sl = sel(layer=layer)
        _, table = stages.stage_figure("weights", run, seed.info, sl)
        cols = [c for c in table.columns if c.startswith("W_Q")]
        w, b = table.loc[list(range(seed.info.d_model)), cols].to_numpy(float), table.loc["b", cols].to_numpy(float)
        x = run[f"encoder.blocks.{layer}.hook_resid_pre"][0]
        assert np.abs(x @ w + b - run[f"{prefix(sl.block, layer)}.hook_q"][0, sl.head]).max() < 1e-4
        assert np.abs(x @ w - run[f"{prefix(sl.block, layer)}.hook_q"][0, sl.head]).max() > 1e-3  # bias matters


def test_head_contributions_add_up_to_the_attention_output(seed, run):
    s = sel()
    total = 0
    for h in range(seed.info.n_heads):
        fig, df = stages.stage_figure("out", run, seed.info, sel(head=h))
        total = total + df.to_numpy()
    p = prefix(s.block, s.layer)
    assert np.allclose(total + run.weights[f"{p}.b_O"], run[f"{p}.hook_out"][0], atol=1e-4)


def test_z_is_weights_times_v(seed, run):
    fig, _ = stages.stage_figure("z", run, seed.info, sel())
    w, v, z = heatmaps(fig)
    assert np.allclose(np.nan_to_num(np.asarray(w.z, dtype=float)) @ np.asarray(v.z), z.z, atol=1e-4)


def test_one_cell_numbers_reproduce_the_hooks(seed, run):
    s = sel(query=2, key=3)
    n = stages.cell_numbers(run, seed.info, s)
    assert n["scaled"] == pytest.approx(n["hook_score"], abs=1e-4)
    assert n["weight"] == pytest.approx(n["hook_weight"], abs=1e-5)
    assert n["dot"] == pytest.approx(float(n["product"].sum()))
    fig, df = stages.stage_figure("cell", run, seed.info, s)
    assert list(df.columns) == ["q", "k", "q*k"] and len(df) == seed.info.d_head
    assert "÷√" in fig.layout.title.subtitle.text
    # a masked key: −∞ and weight 0
    s = sel("decoder.self_attn", query=0, key=3)
    n = stages.cell_numbers(run, seed.info, s)
    assert not n["allowed"] and n["weight"] == 0 and n["hook_weight"] == 0


def test_overview_small_multiples_and_stats(seed, run):
    fig, df = stages.stage_figure("overview", run, seed.info, sel())
    assert len(heatmaps(fig)) == seed.info.n_layers * seed.info.n_heads
    assert list(df.columns) == ["layer", "head", "entropy", "mean_distance"] and len(df) == 8
    assert fig.layout.shapes  # the chosen head is outlined
    eye = np.eye(5)
    assert av.head_stats(eye, 5) == (0.0, 0.0)
    uni = np.full((4, 4), 0.25)
    ent, dist = av.head_stats(uni, 4)
    assert ent == pytest.approx(math.log(4)) and dist == pytest.approx(1.25)


# --- no streamlit in the views ----------------------------------------------------------------

def test_views_do_not_import_streamlit():
    code = ("import sys, explorer.views.stages, explorer.views.positional, explorer.views.tokens; "
            "assert 'streamlit' not in sys.modules, 'views imported streamlit'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


# --- i18n and inputs ---------------------------------------------------------------------------

def test_sentence_and_character_limits():
    lines, notes = inputs.limit_sentences("\n".join(f"s{i}" for i in range(20)))
    assert len(lines) == inputs.MAX_SENTENCES and notes[0].key == "too_many"
    lines, notes = inputs.limit_sentences("x" * 5000 + "\n\n  \nok\r\n")
    assert lines == ["x" * inputs.MAX_CHARS, "ok"] and notes[0].key == "too_long"
    assert inputs.limit_sentences("")[0] == []
    assert inputs.split_sentences("a\x07b\x00\nc") == ["a\x07b\x00", "c"]


def test_token_limit_cuts_at_a_token_boundary(seed):
    texts, notes = inputs.limit_tokens(["가" * 200, "short"], seed.tokenizer, 20)
    assert len(seed.tokenizer.encode([texts[0]])[0].ids) <= 20 and texts[1] == "short"
    assert notes and notes[0].key == "too_many_tokens"


def test_url_parameters_are_validated():
    p = inputs.parse_params({"model": "../../etc/passwd", "layer": "999", "head": "-3",
                             "sentence": "abc", "block": "decoder.cross_attn", "lang": "ko",
                             "text": "a\nb", "view": "bogus"})
    assert "model" not in p.values and p.values["layer"] == 999 and p.values["head"] == -3
    assert p.values["block"] == "decoder.cross_attn" and p.values["lang"] == "ko"
    assert {n for n, *_ in p.ignored} == {"model", "sentence", "view"}
    assert inputs.clip(999, 2) == 1 and inputs.clip(-3, 4) == 0


def test_url_values_in_messages_cannot_break_out_of_code():
    p = inputs.parse_params({"model": "`[x](javascript:alert(1))`\x00", "layer": "``1"})
    for _name, value, *_ in p.ignored:
        assert "`" not in value and "\x00" not in value
