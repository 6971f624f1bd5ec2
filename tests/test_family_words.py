"""Every stage's words true for whatever family is on screen (issue 24 item 5, issue 25 item 4).

For each tiny family fixture (tests/fixtures/families) and every stage that applies to each of its
blocks, ``stage_words`` and ``stage_figure`` work in English and Korean (no KeyError, no placeholder
left, no English catalogue word in a Korean figure or table, no English word in the Korean text),
and the words name the family's real norm placement and kind, positions, window, scale, QK-norm
and feed-forward. A family the words do not know says so rather than borrowing a sentence.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from test_i18n import clean, english_words, figure_strings, table_strings
from test_words import LATIN_OK

import model
from explorer.views import stages

FIXTURES = Path(__file__).parent / "fixtures" / "families"
FAMILIES = sorted(p.name for p in FIXTURES.iterdir() if (p / "config.json").is_file()) if FIXTURES.is_dir() else []
TEXTS = ["12 34 56 78 90 13", "7 8"]  # no catalogue word among the tokens
# names of families, operations and symbols that stay in Latin letters in Korean
LATIN_FAMILY = LATIN_OK | {"RoPE", "GGUF", "GeGLU", "GELU", "QK", "T5", "RoBERTa", "Marian", "Gemma", "GPT", "hook_position_bias",
                           "hook_capped_scores", "What", "no_position", "window", "tanh", "W_up", "W_gate",
                           "d_rot", "pad", "roberta", "distilbert", "marian", "bert", "gemma3_text", "gpt2",
                           "llama", "mistral", "qwen2", "qwen3", "t5", "relative", "learned", "rotary", "sinusoidal",
                           "True", "False", "tanh"}
# a trace, a second run or a patching result of their own (tests/test_decoding_views.py, test_whatif.py,
# test_patching.py); the what-if output's words are checked below
SKIP = {"decoding", "patching"}


@pytest.fixture(scope="module", params=FAMILIES)
def fam(request):
    m = model.load(FIXTURES / request.param)
    return m, stages.run_data(m, TEXTS)


def selections(info):
    for block in info.blocks:
        for layer in range(stages.layers_for(info, block)):
            yield stages.Selection(info.name, 0, layer, 1, block, 1, 0)


def latin_words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z][A-Za-z0-9_]{3,}", text)) - LATIN_FAMILY


def test_every_stage_speaks_for_the_family_in_both_languages(fam):
    m, run = fam
    info = m.info
    english = english_words()
    hits_of: dict[str, list[str]] = {}  # a string seen again (a tick label, another layer's figure): matched once
    problems, n = [], 0
    for sel in selections(info):
        for sid in stages.STAGE_IDS:
            if sid in SKIP or stages.REGISTRY[sid].needs or not stages.applies(sid, info, sel.block):
                continue
            words = {}
            for lang in ("en", "ko"):
                w = stages.stage_words(sid, run, info, sel, lang)
                fig, df = stages.stage_figure(sid, run, info, sel, lang=lang)
                assert isinstance(fig, go.Figure)
                words[lang] = w
                for part in ("title", "explain"):
                    if "{" in w[part] or "}" in w[part]:
                        problems.append(f"{sel.block} L{sel.layer} {sid} {lang}: placeholder in {part}")
                if lang == "ko":
                    seen = [clean(s) for s in figure_strings(fig.to_dict())] + ([str(s) for s in table_strings(df)]
                                                                                if df is not None else [])
                    for s in seen:
                        if s not in hits_of:
                            hits_of[s] = [what for what, _ in english.found([s])]
                        hits = hits_of[s]
                        if hits:
                            problems.append(f"{sel.block} L{sel.layer} {sid}: English {hits[:2]} in {s[:60]!r}")
                    text = " ".join([w["title"], w["explain"], w["note"] or "", w["shape"]])
                    latin = latin_words(text)
                    if latin:
                        problems.append(f"{sel.block} L{sel.layer} {sid}: Korean words left in English {sorted(latin)}")
                n += 1
            strip = re.compile(r"\\text\{[^}]*\}")
            if strip.sub("", words["ko"]["formula"]) != strip.sub("", words["en"]["formula"]):
                problems.append(f"{sel.block} {sid}: the formula's maths differs between languages")
    assert n > 40 and problems == [], problems[:20]


def words(m, run, sid, block=None, layer=0, lang="en", **opts):
    sel = stages.Selection(m.info.name, 0, layer, 1, block or m.info.blocks[0], 1, 0)
    return stages.stage_words(sid, run, m.info, sel, lang, **opts)


NORMS = {  # family -> (placement words in the residual explanation, the norm in its formula)
    "bert": ("post-LN", r"\mathrm{LayerNorm}\big(x + "), "roberta": ("post-LN", r"\mathrm{LayerNorm}\big(x + "),
    "distilbert": ("post-LN", r"\mathrm{LayerNorm}\big(x + "), "marian": ("post-LN", r"\mathrm{LayerNorm}\big(x + "),
    "gpt2": ("pre-norm, as GPT-2", r"\mathrm{Sublayer}\big(\mathrm{LayerNorm}(x)"),
    "llama": ("pre-norm", r"\mathrm{Sublayer}\big(\mathrm{RMSNorm}(x)"),
    "mistral": ("pre-norm", r"\mathrm{Sublayer}\big(\mathrm{RMSNorm}(x)"),
    "qwen2": ("pre-norm", r"\mathrm{Sublayer}\big(\mathrm{RMSNorm}(x)"),
    "qwen3": ("pre-norm", r"\mathrm{Sublayer}\big(\mathrm{RMSNorm}(x)"),
    "t5": ("pre-norm", r"\mathrm{Sublayer}\big(\mathrm{RMSNorm}(x)"),
    "gemma3_text": ("sandwich", r"\mathrm{RMSNorm}_{1+w}\Big(\mathrm{Sublayer}"),
}


def test_the_words_name_the_familys_norm_positions_scale_and_feed_forward(fam):
    m, run = fam
    info, family = m.info, m.info.family
    for block in info.blocks:
        w = words(m, run, "residual_norm", block)
        said, tex = NORMS[family]
        assert said in w["explain"] and tex in w["formula"], (family, block)
        fig, _ = stages.stage_figure("residual_norm", run, info, stages.Selection(info.name, 0, 0, 0, block))
        norm = "LayerNorm" if "LayerNorm" in info.norm else "RMSNorm"
        assert any(norm in (a.text or "") for a in fig.layout.annotations), family
        if info.kind == "encoder-decoder" and block.startswith("decoder") and info.norm.startswith("pre"):
            assert "x + Cross" in " ".join(a.text or "" for a in fig.layout.annotations)  # T5's cross sublayer
        chain = stages.stage_figure("shapes", run, info, stages.Selection(info.name, 0, 0, 0, block))[1]
        steps = " ".join(str(x) for x in chain.iloc[:, 0]) if chain is not None else ""
        if chain is not None:
            assert ("sandwich" in steps) == (info.norm.startswith("sandwich")), family
            assert ("QK-norm" in steps) == info.qk_norm, family
            assert ("relative position bias" in steps) == (info.positional == "relative" and block.endswith("self_attn"))

    emb = words(m, run, "embedding")
    assert (r"\sqrt{d_{model}}" in emb["formula"]) == (info.embed_scale != 1.0), family
    assert ("E_{type}" in emb["formula"]) == (family in ("bert", "roberta")), family
    # RoBERTa's positions start after the padding row: pad id + 1 = 2 in its config
    assert ("P[i + 2]" in emb["formula"]) == (family == "roberta") == (info.pos_offset == 2), family
    assert ("relative" in emb["explain"]) == (info.positional == "relative"), family
    assert ("RoPE" in emb["explain"]) == (info.positional == "rotary"), family
    assert stages.applies("pe_heatmap", info) == (info.positional in ("sinusoidal", "learned"))
    if info.positional in ("sinusoidal", "learned"):
        pe = words(m, run, "pe_heatmap")
        assert ("first half" in pe["explain"]) == (family == "marian")
        assert ("pad id + 1" in pe["explain"]) == (family == "roberta")
    kinds = words(m, run, "pe_curves")["explain"]
    assert info.positional == "sinusoidal" or {"learned": "learned position", "rotary": "rotary",
                                               "relative": "relative position bias (T5)"}[info.positional] in kinds

    block = info.blocks[0]
    qkv = words(m, run, "qkv", block)
    assert ("RoPE" in qkv["formula"]) == (info.positional == "rotary")
    assert (r"\hat X" in qkv["formula"]) == (not info.norm.startswith("post"))
    # q's own norm: RMSNorm_q, Gemma's RMSNorm_{1+w,\,q} (one subscript)
    assert (bool(re.search(r"_(q|\{[^{}]*q\})\(", qkv["formula"])) and "QK-norm" in qkv["explain"]) == info.qk_norm
    assert ("b_Q" in qkv["formula"]) == info.qkv_bias
    scaled = words(m, run, "scaled", block)
    assert scaled["variant"] == ("none" if family == "t5" else "sqrt")
    assert ("√d_k" in scaled["title"]) == (family != "t5")
    masked = words(m, run, "masked", block)
    assert ("B_{ij}" in masked["formula"]) == (family == "t5")
    assert (masked["note"] is not None and "relative position bias" in masked["note"]) == (family == "t5")
    ffn = words(m, run, "ffn", block)
    assert info.ffn in ffn["explain"] or {"SwiGLU": "SiLU"}.get(info.ffn, "") in ffn["formula"]
    assert ("b_1" in ffn["formula"]) == (info.ffn_bias and info.ffn not in ("SwiGLU", "GeGLU"))
    assert (r"\mathrm{GELU}(x W_{gate})" in ffn["formula"]) == (info.ffn == "GeGLU")
    if info.kind == "decoder":
        nt = words(m, run, "next_token", "decoder.self_attn")
        assert (r"\tanh" in nt["formula"]) == bool(info.final_softcap)
        assert ("LayerNorm" in nt["formula"]) == (family == "gpt2")
    assert stages.applies("position_bias", info, block) == (info.positional == "relative" and block.endswith("self_attn"))
    if info.positional == "relative":  # T5: the head's bias B as drawn is hook_position_bias
        sel = stages.Selection(info.name, 0, 1, 2, block)
        _, df = stages.stage_figure("position_bias", run, info, sel)
        want = run[f"{block.split('.')[0]}.blocks.1.self_attn.hook_position_bias"][0, 2]
        assert np.allclose(df.to_numpy(dtype=float), want)
        assert f"{want.min():.2f}" in stages.stage_words("position_bias", run, info, sel)["explain"]
    out_note = words(m, run, "whatif_output", block)["note"] or ""
    assert info.family in out_note and not re.search(r"SmolLM2|MiniLM|seed", out_note), out_note  # its own name
    gqa = stages.applies("gqa", info)
    assert gqa == (info.n_kv_heads < info.n_heads)
    note = words(m, run, "qkv", block)["note"]
    assert (note is not None) == gqa


def test_the_mask_draws_the_window_on_local_layers_and_names_them(fam):
    m, run = fam
    info = m.info
    for sel in selections(info):
        w = stages.stage_words("mask", run, info, sel)
        fig, df = stages.stage_figure("mask", run, info, sel)
        windowed = sel.block == "decoder.self_attn" and info.kind == "decoder" and sel.layer in info.window_layers
        causal = sel.block == "decoder.self_attn"
        panels = [t for t in fig.data if isinstance(t, go.Heatmap)]
        legend = [t.name for t in fig.data if not isinstance(t, go.Heatmap)]
        assert len(panels) == (4 if windowed else 3 if causal else 1), (info.name, sel)
        assert ("window" in w["title"]) == windowed and ("window" in " ".join(legend)) == windowed
        assert ("causal" in w["title"].lower()) == causal
        assert any("causal" in n for n in legend) == causal  # an encoder or cross-attention names no causal mask
        cap = stages.caption(info.name, TEXTS[0], sel, "mask")
        assert ("causal" in cap.lower()) == causal, cap
        if windowed:
            W = info.sliding_window
            assert f"w = {W}" in w["formula"] and f"{W} keys" in w["explain"]
            # the drawn band: a real earlier key outside the window is its own category
            combined = np.asarray(panels[-1].z)
            T = combined.shape[0]
            i, j = np.arange(T)[:, None], np.arange(T)[None, :]
            assert ((combined == 4) == ((j <= i - W) & (j < len(run.tokens[0])))).all()
            ko = stages.stage_words("mask", run, info, sel, "ko")
            assert "윈도" in ko["title"] and "윈도" in ko["explain"]
        if causal and info.window_layers and info.kind == "decoder":
            kind = "local" if sel.layer in info.window_layers else "global"
            assert w["note"] is not None and f"Layer {sel.layer} is {kind}" in w["note"] or \
                "Every layer" in w["note"], w["note"]
            assert "window=N" in w["note"]
        elif causal:
            assert w["note"] is None


def test_the_mask_of_an_edited_window_shows_the_band(fam):
    """window=2 on any decoder: the mask stage of that run draws a band of 2 (measured from the mask)."""
    m, _ = fam
    if "decoder.self_attn" not in m.info.blocks:
        pytest.skip("no decoder")
    run = stages.run_data(m, TEXTS, edits="window=2")
    sel = stages.Selection(m.info.name, 0, 0, 0, "decoder.self_attn")
    w = stages.stage_words("mask", run, m.info, sel)
    layers = m.info.window_layers if m.info.kind == "decoder" and m.info.sliding_window else range(99)
    if 0 in layers:
        assert w["variant"] == "window" and "w = 2" in w["formula"]


@pytest.mark.parametrize("name", ["gemma3_text"])
def test_the_rope_words_give_each_layers_own_base(name):
    m = model.load(FIXTURES / name)
    run = stages.run_data(m, TEXTS)
    local, glob = m.info.positional_base_local, m.info.positional_base
    for layer in range(m.info.n_layers):
        base = local if layer in m.info.window_layers else glob
        said = f"{int(base):,}"  # 10,000 and 1,000,000
        w = words(m, run, "rope_freqs", "decoder.self_attn", layer)
        assert "= " + said.replace(",", "{,}") in w["formula"], (layer, w["formula"])
        assert f"rotary base is {said}" in w["note"]
        d = words(m, run, "rope_distance", "decoder.self_attn", layer)
        assert f"base {said}" in d["note"]
        q = words(m, run, "qkv", "decoder.self_attn", layer)
        assert f"base {said} in this layer" in q["explain"]


@pytest.mark.parametrize("name", ["gemma3_text", "qwen3"])
def test_the_qk_norm_stage_recomputes_from_the_hooks(name):
    m = model.load(FIXTURES / name)
    _, cache = m.run_with_cache(TEXTS)
    run = stages.run_data(m, TEXTS)
    info = m.info
    assert stages.applies("qk_norm", info)
    group = info.n_heads // info.n_kv_heads
    for layer in range(info.n_layers):
        for head in range(info.n_heads):
            sel = stages.Selection(info.name, 0, layer, head, "decoder.self_attn")
            fig, df = stages.stage_figure("qk_norm", run, info, sel)
            p = f"decoder.blocks.{layer}.self_attn"
            n = len(run.tokens[0])
            q = cache[f"{p}.hook_q_normed"][0, head, :n].double()
            k = cache[f"{p}.hook_k_normed"][0, head // group, :n].double()
            rms_q, rms_k = q.pow(2).mean(-1).sqrt().numpy(), k.pow(2).mean(-1).sqrt().numpy()
            cols = list(df.columns)
            after_q = [c for c in cols if " q (" in c and "after" in c][0]
            after_k = [c for c in cols if " k (" in c and "after" in c][0]
            assert np.allclose(df[after_q], rms_q, atol=1e-5) and np.allclose(df[after_k], rms_k, atol=1e-5)
            # before the norm: the attention's input through W_Q, W_K; its norm gives the normed q back
            before_q = [c for c in cols if " q (" in c and "before" in c][0]
            x = cache[f"decoder.blocks.{layer}.hook_attn_normed"][0, :n].double()
            W = getattr(m.decoder.blocks[layer].self_attn, "W_Q").weight.double()
            q_raw = (x @ W.T).view(n, info.n_heads, info.d_head)[:, head]
            assert np.allclose(df[before_q], q_raw.pow(2).mean(-1).sqrt().numpy(), atol=1e-4)
            scores = info.attn_scale * (q @ k.T) if info.attn_scale else (q @ k.T) / info.d_head ** 0.5
            biggest = [c for c in cols if "|q·k|" in c and "after" in c][0]
            want = np.where(np.tril(np.ones((n, n), dtype=bool)), scores.abs().numpy(), 0).max(-1)
            assert np.allclose(df[biggest], want, atol=1e-5)
            ko = stages.stage_words("qk_norm", run, info, sel, "ko")
            en = stages.stage_words("qk_norm", run, info, sel, "en")
            assert f"{float(scores.abs().max()):.2f}" in en["explain"] or n > len(run.tokens[0])
            assert "QK" in ko["title"]
    assert not stages.applies("qk_norm", model.load(FIXTURES / "mistral").info)


def test_an_encoder_mask_figure_does_not_say_causal():
    m = model.load(FIXTURES / "bert")
    run = stages.run_data(m, TEXTS)
    sel = stages.Selection(m.info.name, 1, 0, 0, "encoder.self_attn")
    for lang, word in (("en", "causal"), ("ko", "인과")):
        fig, df = stages.stage_figure("mask", run, m.info, sel, lang=lang)
        seen = " ".join(figure_strings(fig.to_dict())) + " " + fig.layout.title.text
        assert word not in seen
        assert word not in " ".join(str(x) for x in table_strings(df))
        assert word not in stages.caption("bert", TEXTS[1], sel, "mask", lang)
        w = stages.stage_words("mask", run, m.info, sel, lang)
        assert word not in w["title"]


def test_exported_encoder_and_cross_attention_masks_name_no_causal_mask():
    from explorer.export import bundles

    for name, block in (("bert", "encoder.self_attn"), ("t5", "decoder.cross_attn"), ("t5", "encoder.self_attn")):
        m = model.load(FIXTURES / name)
        run = stages.run_data(m, TEXTS)
        sel = stages.Selection(m.info.name, 1, 0, 0, block)
        for lang, word in (("en", "causal"), ("ko", "인과")):
            (item,) = bundles.stage_items(run, m.info, sel, model_name=name, text=TEXTS[1], stages=["mask"], lang=lang)
            assert word not in item.meta.stage_title
            assert word not in " ".join(figure_strings(item.fig.to_dict())) + str(item.fig.layout.title.text), (name, block)
        (item,) = bundles.stage_items(run, m.info, stages.Selection(m.info.name, 1, 0, 0, "decoder.self_attn"),
                                      model_name=name, text=TEXTS[1], stages=["mask"]) if name == "t5" else (None,)
        assert item is None or "causal" in item.meta.stage_title


def test_a_family_the_words_do_not_know_says_so():
    m = model.load(FIXTURES / "llama")
    run = stages.run_data(m, TEXTS)
    odd = dataclasses.replace(m.info, norm="post-RMSNorm", ffn="ReGLU", positional="alibi", family="newfam")
    sel = stages.Selection(m.info.name, 0, 0, 0, "decoder.self_attn")
    for sid in ("residual_norm", "ffn", "embedding"):
        for lang in ("en", "ko"):
            w = stages.stage_words(sid, run, odd, sel, lang)
            assert w["variant"] == "unknown", sid
            assert ("do not describe" in w["explain"]) if lang == "en" else ("다루지 않습니다" in w["explain"])
            assert m.info.name in w["explain"]  # the model it speaks of, by name
    kind = stages.stage_words("pe_curves", run, odd, sel)["explain"]
    assert "do not describe yet" in kind


@pytest.mark.weights
def test_the_real_gemma3_in_korean_and_english():
    """Gemma 3 270M (python -m model.fetch gemma3): every stage of a local and a global layer in both
    languages; the mask names the global layers 5, 11, 17; window=4 draws a band of 4 on a Korean
    sentence and changes the next token's distribution; QK-norm keeps the largest score small."""
    from model import fetch

    if not fetch.is_fetched("gemma3"):
        pytest.skip("gemma3 is not fetched (python -m model.fetch gemma3)")
    m = model.load("gemma3")
    info = m.info
    texts = ["나는 어제 도서관에서 트랜스포머 논문을 읽었다.", "파리는 프랑스의 수도이고, 서울은"]
    run = stages.run_data(m, texts)
    english = english_words()
    assert info.kind == "decoder" and info.n_kv_heads == 1 and info.qk_norm
    glob = [i for i in range(info.n_layers) if i not in info.window_layers]
    assert glob == [5, 11, 17]
    for layer in (0, 5):
        sel = stages.Selection(info.name, 0, layer, 1, "decoder.self_attn", 1, 0)
        for sid in stages.STAGE_IDS:
            if sid in SKIP or stages.REGISTRY[sid].needs or not stages.applies(sid, info, sel.block):
                continue
            ko = stages.stage_words(sid, run, info, sel, "ko")
            fig, df = stages.stage_figure(sid, run, info, sel, lang="ko")
            assert not latin_words(" ".join([ko["title"], ko["explain"], ko["note"] or ""])), (sid, ko)
            seen = [clean(s) for s in figure_strings(fig.to_dict())]
            assert not english.found(seen), sid
        mask = stages.stage_words("mask", run, info, sel)
        assert "global layers 5, 11, 17" in mask["note"]
        assert (mask["variant"] == "window") == (layer == 0)
        assert stages.stage_words("gqa", run, info, sel)["variant"] == "mqa"
        rope = stages.stage_words("rope_freqs", run, info, sel)["note"]
        assert ("rotary base is 10,000" if layer == 0 else "rotary base is 1,000,000") in rope
    edited = stages.run_data(m, texts, edits="window=4")
    sel = stages.Selection(info.name, 0, 0, 0, "decoder.self_attn")
    fig, _ = stages.stage_figure("mask", edited, info, sel)
    assert len([t for t in fig.data if isinstance(t, go.Heatmap)]) == 4
    assert "w = 4" in stages.stage_words("mask", edited, info, sel)["formula"]
    out, _ = stages.stage_figure("whatif_output", run, info, sel, edited=edited)
    assert "window=4" in out.layout.title.subtitle.text
    d = stages.qk_norm_data(stages._context(run, info, sel, "en"))
    assert np.abs(d["scores_after"]).max() < np.abs(d["scores_before"]).max() / 10


# --- the logit lens's readout, from each model's description (issue "One path", item 4) ------------
def readout_facts(info) -> dict:
    """What the lens's words and formula must say of this model's way out (from model/arch/family.py's reading)."""
    norm = str(info.norm).split("-", 1)[-1]
    return {"norm": norm if info.final_norm else None, "tied": info.tied_output, "scale": info.logit_scale,
            "softcap": info.final_softcap, "bias": info.output_bias}


def lens_words(m, lang="en"):
    run = stages.run_data(m, TEXTS if m.info.vocab_size < 20000 else ["The cat sat on the mat."])
    sel = stages.Selection(m.info.name, 0, 0, 0, "decoder.self_attn" if m.info.kind != "encoder" else m.info.blocks[0])
    return stages.stage_words("logit_lens", run, m.info, sel, lang)


def check_readout(w: dict, facts: dict) -> list[str]:
    bad = []
    text, tex = w["explain"], w["formula"]
    if facts["norm"]:
        if f"the final {facts['norm']}" not in text:
            bad.append(f"the final {facts['norm']} not named")
        if r"\mathrm{" + facts["norm"].replace("(1+w)", "") not in tex:
            bad.append(f"{facts['norm']} not in the formula")
    elif "the final LayerNorm" in text or "the final RMSNorm" in text:
        bad.append("a final norm named for a model without one")
    for other in ("RMSNorm", "LayerNorm"):  # no norm of another kind in the formula
        if other not in (facts["norm"] or "") and r"\mathrm{" + other in tex:
            bad.append(f"{other} in the formula")
    if facts["tied"] != ("E^\\top" in tex) or facts["tied"] != ("(the embedding matrix, tied)" in text):
        bad.append("tied output said wrongly")
    if (facts["scale"] != 1.0) != ("d_{model}^{-1/2}" in tex or r"\cdot " in tex):
        bad.append("output scale said wrongly")
    if bool(facts["softcap"]) != ("tanh" in tex and "soft-cap" in text):
        bad.append("final soft-cap said wrongly")
    if facts["bias"] != ("+ b" in tex):
        bad.append("output bias said wrongly")
    if "seed" in text:
        bad.append("the seed named for another model")
    return bad


@pytest.mark.parametrize("name", [n for n in FAMILIES if n not in ("bert", "roberta", "distilbert")])
def test_the_logit_lens_says_each_familys_own_readout(name):
    m = model.load(FIXTURES / name)
    facts = readout_facts(m.info)
    for lang in ("en", "ko"):
        w = lens_words(m, lang)
        assert "{" not in w["explain"].replace("{}", ""), w["explain"]
        if lang == "en":
            assert check_readout(w, facts) == [], (name, w["explain"], w["formula"])
    # and a wrong description fails the check: the words of another model's way out
    wrong = dict(facts, norm=None if facts["norm"] else "RMSNorm", tied=not facts["tied"])
    assert check_readout(lens_words(m), wrong) != []


@pytest.mark.parametrize("name", ["seed", "smollm2", "gemma3"])
def test_the_logit_lens_says_each_shipped_models_readout(name):
    from model import fetch

    if name in fetch.SOURCES and not fetch.is_fetched(name):
        pytest.skip(f"{name} not fetched")
    m = model.load(name)
    assert check_readout(lens_words(m), readout_facts(m.info)) == []


@pytest.mark.parametrize("name", ["t5", "marian"])
def test_an_encoder_decoders_generator_and_decoder_input_name_its_own_start_and_readout(name):
    """T5 and Marian start their decoder with <pad>, not the seed's <s>; T5's generator reads through its
    final RMSNorm and d_model^-½, Marian's adds its output bias: the words and formulas say so."""
    m = model.load(FIXTURES / name)
    run = stages.run_data(m, TEXTS)
    sel = stages.Selection(m.info.name, 0, 0, 0, "decoder.self_attn")
    start = run.decoder_tokens[0][0]
    assert start != "<s>"
    gen = stages.stage_words("logits", run, m.info, sel, "en")
    toks = stages.stage_words("tokens", run, m.info, sel, "en")
    assert "<s>" not in gen["explain"] + toks["explain"]
    assert start in toks["explain"] and start in gen["explain"]
    assert check_readout(gen, readout_facts(m.info)) == [], (gen["explain"], gen["formula"])


def test_the_rotary_figures_draw_the_frequencies_the_model_uses(tmp_path):
    """A Llama whose rope is scaled (linear, factor 4): the frequency figure's θ and the distance curve are
    the model's own (model/arch/parts.py rope_frequencies, what its attention rotates by), not base^(−2i/d) alone,
    and the note says which scaling; an unscaled model draws base^(−2i/d)."""
    import json
    import shutil

    from model.arch.family import Rope
    from model.arch.parts import rope_frequencies
    from model.arch.positional import rotary_frequencies

    folder = tmp_path / "scaled"
    shutil.copytree(FIXTURES / "llama", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_theta": 10000.0, "rope_type": "linear", "factor": 4.0}
    (folder / "config.json").write_text(json.dumps(cfg))
    for path, scaled in ((folder, True), (FIXTURES / "llama", False)):
        m = model.load(path)
        run = stages.run_data(m, TEXTS)
        sel = stages.Selection(m.info.name, 0, 0, 0, "decoder.self_attn")
        _fig, df = stages.stage_figure("rope_freqs", run, m.info, sel)
        theta = df.iloc[:, 1].to_numpy()
        own = rope_frequencies(m.family.rope, m.info.d_head).numpy()
        plain = rotary_frequencies(m.info.d_head, m.info.positional_base).numpy()
        assert np.allclose(theta, own, rtol=1e-12)
        assert np.allclose(theta, plain / 4 if scaled else plain, rtol=1e-12)
        note = stages.stage_words("rope_freqs", run, m.info, sel)["note"] or ""
        assert ("linear scaling (factor 4)" in note) == scaled, note
        _fig, dist = stages.stage_figure("rope_distance", run, m.info, sel)
        if scaled:  # slower turning: the score falls off later than the unscaled model's
            _f, base_dist = stages.stage_figure("rope_distance", stages.run_data(model.load(FIXTURES / "llama"), TEXTS),
                                                model.load(FIXTURES / "llama").info, sel)
            assert not np.allclose(dist.to_numpy(), base_dist.to_numpy())
    assert m.family.rope == Rope(base=10000.0)
