"""Words come from the model: every (model, block, stage) title, explanation, formula and shape is
checked against the model's description (ModelInfo) and against the tensors of the run.

The models: the seed Transformer (untrained and shipped), a tiny BERT and a tiny Llama written by
tests/test_pretrained_tiny.py's helpers, and (marked ``weights``) the fetched MiniLM and SmolLM2.
"""
from __future__ import annotations

import re

import numpy as np
import plotly.graph_objects as go
import pytest
from test_pretrained_tiny import bert_dir, gguf_file  # noqa: F401 (fixtures)

import model
from explorer import i18n
from model import fetch
from explorer.views import stages

TEXTS = ["hello world", "안녕하세요 반갑습니다 여러분"]
# what may stay in Latin letters in Korean text: names of models, operations and symbols, as the
# tutorials write them
LATIN_OK = {"LayerNorm", "RMSNorm", "RoPE", "BERT", "ReLU", "GELU", "SwiGLU", "SiLU", "float32", "d_model",
            "d_ff", "d_k", "d_head", "div_term", "post", "pre", "norm", "W_Q", "W_K", "W_V", "W_O", "W_down",
            "tanh", "hook_out", "Concat", "type", "E_type",
            "hook_scores", "A_ij", "c_ij"}  # issue 35: the hook the parts add up to, the pull's symbols


def _en_bases(text: str) -> set[float]:
    return {float(x.replace("{,}", "").replace(",", "")) for x in re.findall(r"\bn = ([\d,]+(?:\.\d+)?)", text)}


def problems(m, run, block: str, sid: str, sel: stages.Selection, truth=None, **options) -> list[str]:
    """Every statement of the stage's words (made for ``m``) that the model's description (``truth``,
    default ``m.info``) or the run contradicts."""
    fig, _ = stages.stage_figure(sid, run, m.info, sel, **options)
    en = stages.stage_words(sid, run, m.info, sel, "en", **options)
    ko = stages.stage_words(sid, run, m.info, sel, "ko", **options)
    info = truth or m.info
    out: list[str] = []

    def claim(ok: bool, what: str) -> None:
        if not ok:
            out.append(f"{info.name} {block} {sid}: {what}")

    text_en, text_ko, formula = en["title"] + " " + en["explain"], ko["title"] + " " + ko["explain"], en["formula"]
    causal = block == "decoder.self_attn"
    scaled = info.embed_scale != 1.0
    for lang, w in (("en", en), ("ko", ko)):
        claim("{" not in w["explain"] and "}" not in w["explain"], f"{lang}: placeholder left in the explanation")
        claim(bool(w["shape"]), f"{lang}: no shape stated")
    words_in_formula = " ".join(re.findall(r"\\text\{([^}]*)\}", ko["formula"]))
    latin = set(re.findall(r"[A-Za-z][A-Za-z0-9_]{3,}", " ".join([text_ko, ko["shape"], words_in_formula]))) - LATIN_OK
    claim(not latin, f"Korean words left in English: {sorted(latin)}")
    strip = re.compile(r"\\text\{[^}]*\}")
    claim(strip.sub("", ko["formula"]) == strip.sub("", formula), "the formula's maths differs between languages")

    # the shapes stated are the tensors' shapes
    for what, hook, dims in en["shapes"]:
        sizes = tuple(n for _, n in dims)
        if hook.startswith("weight:"):
            w = run.weights[hook[len("weight:"):]]
            claim(sizes == tuple(reversed(w.shape)) or sizes == tuple(w.shape), f"{what}: {sizes} != weight {w.shape}")
        elif hook:
            claim(sizes == tuple(run[hook].shape), f"{what}: stated {sizes}, the hook {hook} has {run[hook].shape}")
        claim(all(f"{i18n.t('dim.' + lab)} {n}" in en["shape"] and f"{i18n.t('dim.' + lab, 'ko')} {n}" in ko["shape"]
                  for lab, n in dims if lab != "one"), f"{what}: its dimensions are not in the text")

    if sid == "embedding":
        claim((r"\sqrt{d_{model}}" in formula) == scaled, "√d_model in the formula iff the embedding is scaled")
        got = re.search(r"multiplied by √d_model = ([\d.]+)", en["explain"])
        claim(bool(got) == scaled, "'multiplied by √d_model = …' iff scaled")
        if got:
            claim(got.group(1) == f"{info.embed_scale:.2f}", "the scale stated is the model's")
            claim("√d_model(= " in ko["explain"], "Korean: the scale")
        claim(("LayerNorm" in formula) == info.embed_norm, "LayerNorm of the embedding iff the model has one")
        claim(("PE_i" in formula or "P[i]" in formula) == (info.positional != "rotary"),
              "a positional vector is added iff the model adds one")
    if sid == "pe_heatmap":
        claim((r"\sin" in formula) == (info.positional == "sinusoidal"), "sines and cosines iff sinusoidal")
        claim(("sines and cosines" in en["explain"]) == (info.positional == "sinusoidal"), "sinusoidal text")
        if info.positional == "sinusoidal":
            claim(_en_bases(formula + en["explain"]) == {info.positional_base}, "n = the model's base")
    if sid in ("pe_curves", "pe_compare"):
        drawn = {float(x) for x in re.findall(r"n=([\d.]+)", " ".join(t.name or "" for t in fig.data))}
        drawn |= {float(x) for x in re.findall(r"/ ([\d.]+)\^", " ".join(t.name or "" for t in fig.data))}
        claim(_en_bases(formula + en["explain"]) == drawn, f"bases said {_en_bases(formula + en['explain'])} "
                                                          f"!= drawn {drawn}")
    if sid == "mask":
        panels = [t for t in fig.data if isinstance(t, go.Heatmap)]
        claim(len(panels) == (3 if causal else 1), "a causal panel iff the block has a causal mask")
        claim(("causal" in en["title"].lower()) == causal, "'causal' in the title iff causal")
        claim(("uses both together" in en["explain"]) == causal, "'both together' iff causal")
        claim(("no causal mask" in en["explain"]) == (not causal), "'no causal mask' iff not causal")
        claim((r"[\,j \le i\,]" in formula) == causal, "the causal term in the formula iff causal")
    if sid in ("qkv", "weights"):
        claim(("b_Q" in formula) == info.qkv_bias, "b_Q in the formula iff W_Q has a bias")
    if sid == "weights":
        z = np.asarray(fig.data[0].z)
        claim(z.shape[0] == info.d_model + int(info.qkv_bias), "a bias row iff there is a bias")
    if sid == "qkv":
        claim(("RMSNorm" in formula) == (info.norm == "pre-RMSNorm"), "the normed input iff pre-norm")
        claim(("RoPE" in formula) == (info.positional == "rotary"), "RoPE iff rotary")
        claim(("H W_K" in formula) == block.endswith("cross_attn"), "encoder output H iff cross-attention")
    if sid == "out":
        claim(("b_O" in formula) == info.out_bias, "b_O iff W_O has a bias")
    if sid == "residual_norm":
        post = info.norm == "post-LayerNorm"
        claim(("post-LN" in en["explain"]) == post and ("pre-norm" in en["explain"]) == (not post), "norm placement")
        claim((r"\mathrm{LayerNorm}" in formula) == post and (r"\mathrm{RMSNorm}" in formula) == (not post), "norm kind")
        titles = [a.text for a in fig.layout.annotations]
        claim(any(("LayerNorm" if post else "RMSNorm") in t for t in titles), "panels name the norm")
    if sid == "ffn":
        act = {"SwiGLU": "SiLU"}.get(info.ffn, info.ffn)
        claim(act in formula + en["explain"], f"the activation {info.ffn} is named")
        claim(f"d_ff = {info.d_ff}" in en["explain"] and f"d_{{ff}} = {info.d_ff}" in formula, "d_ff is the model's")
        hid = run[f"{block.split('.')[0]}.blocks.{sel.layer}.hook_ffn_hidden"][sel.sentence]
        if info.ffn == "ReLU":
            n = len(stages.stack_tokens(run, block.split(".")[0], sel.sentence))
            zero = re.search(r"(\d+)% of the hidden values are exactly 0", en["explain"])
            claim(bool(zero) and int(zero.group(1)) == round(100 * float((hid[:n] == 0).mean())), "ReLU zeros measured")
    if sid == "masked":
        diff = re.search(r"largest difference is ([^)]+)\)", en["explain"])
        claim(bool(diff) and diff.group(1) == "0", "−1e9 and −inf give the same weights here (measured)")
    if sid == "tokens":
        tf = info.kind == "encoder-decoder" and block == "decoder.self_attn"
        claim(("shifted one place right" in en["explain"]) == tf, "the teacher-forced decoder input iff decoder")
    if sid == "logits":
        claim(info.kind == "encoder-decoder", "a generator stage only for the encoder–decoder")
        claim(f"{info.vocab_size:,}" in en["explain"], "the vocabulary size is the model's")
    return out


def all_problems(m, texts=TEXTS, layer: int = 1) -> tuple[list[str], int]:
    run = stages.run_data(m, texts)
    found, n = [], 0
    for block in m.info.blocks:
        sel = stages.Selection(m.info.name, 1, min(layer, stages.layers_for(m.info, block) - 1), 1, block, 1, 2)
        for sid in stages.STAGE_IDS:
            # the what-if/comparison stages and the decoding timeline draw nothing without their second run
            # or trace (a notice says what to choose): their words are checked with those in
            # tests/test_whatif.py and tests/test_decoding_views.py
            if stages.REGISTRY[sid].needs or sid == "decoding":
                continue
            if stages.applies(sid, m.info, block):
                found += problems(m, run, block, sid, sel)
                n += 1
        # and with the positional controls (as the app always passes them)
        for opts in ({"pe_base": 100.0, "pe_d_model": 16, "pe_positions": 30},
                     {"pe_bases": (100.0, 10000.0), "pe_d_model": 4, "pe_positions": 10}):
            for sid in ("pe_curves", "pe_similarity", "pe_compare"):
                found += problems(m, run, block, sid, sel, **opts)
                n += 1
    return found, n


def test_words_are_true_for_the_seed_models():
    for m in (model.load("seed", random=True, d_model=32, n_heads=2, pe_base=50), model.load("seed")):
        found, n = all_problems(m)
        assert n > 60 and found == []


def test_words_are_true_for_a_tiny_bert_and_a_tiny_llama(bert_dir, gguf_file, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv(fetch.ENV_VAR, str(tmp_path / "cache"))  # the conversion is written there, not in ~/.cache
    for m in (model.load(bert_dir), model.load(gguf_file[0])):
        found, n = all_problems(m, ["the cat sat", "a dog"])
        assert n > 20 and found == [], found


@pytest.mark.weights
@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_words_are_true_for_the_real_models(name):
    try:
        m = model.load(name)
    except model.WeightsError as e:
        pytest.skip(str(e))
    found, n = all_problems(m)
    assert n > 20 and found == [], found


def test_the_check_can_fail(monkeypatch):
    """A fixed sentence that is false for the model is caught: the seed's embedding text shown for a
    model whose embedding is not scaled, and a mask text that claims a causal mask on the encoder."""
    m = model.load("seed", random=True, d_model=32, n_heads=2)
    run = stages.run_data(m, TEXTS)
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    assert problems(m, run, "encoder.self_attn", "mask", sel) == []
    monkeypatch.setitem(i18n.WORDS, "stage.mask.explain.padding",
                        {"en": "The model uses both together.", "ko": "둘을 함께 씁니다."})
    assert problems(m, run, "encoder.self_attn", "mask", sel)
    assert problems(m, run, "encoder.self_attn", "embedding", sel) == []
    unscaled = type(m.info)(**{**m.info.as_dict(), "embed_scale": 1.0})
    assert any("√d_model" in p for p in problems(m, run, "encoder.self_attn", "embedding", sel, truth=unscaled))
    no_bias = type(m.info)(**{**m.info.as_dict(), "qkv_bias": False})
    assert any("bias" in p for p in problems(m, run, "encoder.self_attn", "qkv", sel, truth=no_bias))
