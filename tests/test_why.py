"""Why this head attends here (issue 35): the score split, the rotary bands, attention against effect.

- qk_terms: for the seed and every fixture family with added positions (GPT-2, BERT, RoBERTa,
  DistilBERT, Marian), layer 0, every head, the parts add up cell by cell to the model's own
  hook_scores within a float32 bound computed beside them (model/analysis/score_split.py
  ``qk_bound``), and leaving any one part out breaks that bound;
- rope_bands: for the rotary fixtures (all half-split, every dimension rotated; QK-norm, Gemma's local
  and global bases, a scaled rope) and SmolLM2 and Gemma 3, the bands add up to
  hook_scores, and each band equals the same band computed from q and k *before* the rotation with
  the model's own frequencies; the wrong frequencies (another base, no scaling, the other pairing)
  fail that; interleaved pairs and partial rotary (no fixture has them) are checked on the model's own
  ``parts.Rotary`` applied to random vectors;
- attention_vs_effect: the batched ablations equal, head by head, a run with the what-if edit
  ``ablate=BLOCK:LAYER:HEAD`` itself; a different head's edit does not;
- the three stages' figures and tables (the spec's column names) in English and Korean.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import model
from explorer.views import stages
from model import fetch
from model.analysis import ablation, score_split as split
from model.arch.family import Rope
from model.arch.parts import rope_frequencies
from model.runtime.edits import Ablate, hook_fns
from model.runtime.hooks import hooks

FIXTURES = Path(__file__).parent / "fixtures" / "families"
U = 2.0 ** -24  # float32 unit roundoff
TEXTS = ["12 34 56 78 90 13", "7 8"]
REAL_TEXT = ["The cat sat on the mat because it was tired."]


def load(name: str, tmp: Path | None = None):
    if name == "llama+linear":  # a scaled rope: the frequencies are parts.rope_frequencies', not the plain ones
        folder = tmp / "llama_linear"
        shutil.copytree(FIXTURES / "llama", folder)
        cfg = json.loads((folder / "config.json").read_text())
        cfg["rope_parameters"] = {"rope_theta": 10000.0, "rope_type": "linear", "factor": 4.0}
        (folder / "config.json").write_text(json.dumps(cfg))
        return model.load(folder)
    if (FIXTURES / name).is_dir():
        return model.load(FIXTURES / name)
    if name in fetch.SOURCES and not fetch.is_fetched(name):
        pytest.skip(f"{name} is not fetched (python -m model.fetch {name})")
    return model.load(name)


def texts_for(m) -> list[str]:
    return TEXTS if m.info.vocab_size < 20000 else REAL_TEXT


# --- qk_terms -------------------------------------------------------------------------------------

ADDED = ["seed", "gpt2", "bert", "roberta", "distilbert", "marian"]
MEASURED: dict[str, float] = {}  # the largest |sum of the parts − hook_scores| per model (printed with -s)


@pytest.mark.parametrize("name", ADDED)
def test_the_four_parts_add_up_to_the_models_scores_and_none_can_be_left_out(name):
    m = load(name)
    run = stages.run_data(m, texts_for(m))
    blocks = [b for b in m.info.blocks if b.endswith("self_attn")]
    worst, checked = 0.0, 0
    for block in blocks:
        for s in range(run.n_sentences):
            for h in range(m.info.n_heads):
                sel = stages.Selection(m.info.name, s, 0, h, block)
                d = stages.score_parts(run, m.info, sel)
                assert d is not None, (block, h)
                total = sum(d["terms"].values())
                # the bound: score_split.qk_bound, a first-order float32 error bound of the model's own
                # pass (the sum e + p, the norm, x·W + b, q·k, the scale), cell by cell; the parts are
                # float64 and exact to ~1e-16 relative, far inside it
                bound = d["bound"]
                diff = np.abs(total - d["score"])
                assert (diff <= bound).all(), (block, s, h, float(diff.max()), float(bound.max()))
                worst = max(worst, float(diff.max()))
                for k, part in d["terms"].items():  # a part left out: the sum misses the score
                    if np.abs(part).max() > 0:
                        assert (np.abs(total - part - d["score"]) > bound).any(), (name, block, h, k)
                checked += 1
    assert checked >= 2 * m.info.n_heads
    MEASURED[name] = worst
    print(f"qk_terms {name}: max |parts - hook_scores| = {worst:.2e} over {checked} heads")


def test_the_split_needs_the_norm_linearised_with_the_tokens_own_statistics():
    """BERT's embedding LayerNorm (a norm before the attention): with σ of the content alone instead
    of the token's own, the parts no longer add up."""
    m = load("bert")
    run = stages.run_data(m, TEXTS)
    sel = stages.Selection(m.info.name, 0, 0, 0, "encoder.self_attn")
    c = stages._context(run, m.info, sel, "en")
    d = stages.qk_split_data(c)
    w = run.weights
    e = run["encoder.hook_embed"][0][: c.n_q].astype(np.float64)
    p = run["encoder.hook_pos_embed"][0][: c.n_q].astype(np.float64)
    step = d["norms"][0]
    hw = stages.head_weights(w, c.p, 0, m.info.n_heads, m.info.d_head)
    # the wrong linearisation: each part normed by its own σ (as if LayerNorm were linear without fixing σ)
    wrong_parts = {k: step.weight * (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + step.eps)
                   for k, v in (("content", e), ("position", p))}
    q = sum(v @ hw["W_Q"] for v in wrong_parts.values()) + step.bias @ hw["W_Q"] + hw["b_Q"]
    k = sum(v @ hw["W_K"] for v in wrong_parts.values()) + step.bias @ hw["W_K"] + hw["b_K"]
    wrong = stages._scale_of(c.info) * q @ k.T
    assert (np.abs(wrong - d["score"]) > d["bound"]).any()
    assert (np.abs(sum(d["terms"].values()) - d["score"]) <= d["bound"]).all()


def test_layers_after_the_first_say_why_the_split_no_longer_holds():
    m = load("seed")
    run = stages.run_data(m, ["hello world"])
    sel = stages.Selection("seed", 0, 1, 0, "encoder.self_attn")
    assert stages.score_parts(run, m.info, sel) is None
    fig, df = stages.stage_figure("qk_terms", run, m.info, sel)
    assert df is None
    w = stages.stage_words("qk_terms", run, m.info, sel, "en")
    assert w["variant"] == "later" and "first layer only" in w["explain"] and "not linear" in w["explain"]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_qk_terms_figure_and_its_long_table(lang):
    m = load("seed")
    run = stages.run_data(m, ["hello world"])
    sel = stages.Selection("seed", 0, 0, 1, "encoder.self_attn", query=3, key=2)
    fig, df = stages.stage_figure("qk_terms", run, m.info, sel, lang=lang)
    L = stages.i18n.fig_labels(lang)
    assert list(df.columns) == [L["query"], L["key"], L["term"], L["value"]]
    if lang == "en":
        assert list(df.columns) == ["query", "key", "term", "value"]
    n = len(run.tokens[0])
    assert len(df) == 5 * n * n  # four parts and the bias (the seed has b_Q, b_K)
    d = stages.score_parts(run, m.info, sel)
    cell = df[(df[L["query"]] == 3) & (df[L["key"]] == 2)][L["value"]].sum()
    assert abs(cell - d["score"][3, 2]) <= d["bound"][3, 2]
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 5 and all(t.coloraxis == "coloraxis" for t in heat)  # one colour scale
    w = stages.stage_words("qk_terms", run, m.info, sel, lang)
    assert w["variant"] == "plain" and "{" not in w["explain"]


# --- rope_bands -----------------------------------------------------------------------------------

ROTARY = ["llama", "qwen2", "qwen3", "mistral", "gemma3_text", "llama+linear", "smollm2", "gemma3"]


def _unrotated(m, run, c) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """q and k of the selected head before the rotation (QK-norm's hooks, or the attention's input
    through W_Q, W_K), and a bound on their float32 error against the model's own."""
    s, h, n = c.sel.sentence, c.sel.head, c.n_q
    info = m.info
    kv = stages.kv_head_of(h, info.n_heads, info.n_kv_heads)
    if f"{c.p}.hook_q_normed" in run:
        q0 = run[f"{c.p}.hook_q_normed"][s, h, :n].astype(np.float64)
        k0 = run[f"{c.p}.hook_k_normed"][s, kv, :n].astype(np.float64)
        return q0, k0, np.zeros_like(q0), np.zeros_like(k0)
    x = run[f"decoder.blocks.{c.sel.layer}.hook_attn_normed"][s, :n].astype(np.float64)
    hw = stages.head_weights(run.weights, c.p, h, info.n_heads, info.d_head)
    bq = 0.0 if hw["b_Q"] is None else hw["b_Q"].astype(np.float64)
    bk = 0.0 if hw["b_K"] is None else hw["b_K"].astype(np.float64)
    q0, k0 = x @ hw["W_Q"].astype(np.float64) + bq, x @ hw["W_K"].astype(np.float64) + bk
    d = x.shape[-1]
    g = (d + 1) * U / (1 - (d + 1) * U)  # γ_{d+1}: x·W + b in float32
    eq = g * (np.abs(x) @ np.abs(hw["W_Q"]) + np.abs(bq))
    ek = g * (np.abs(x) @ np.abs(hw["W_K"]) + np.abs(bk))
    return q0, k0, eq, ek


def _pair_bound(q0, k0, eq, ek, dims: int, interleaved: bool, scale: float) -> np.ndarray:
    """(bands, T, T): |band from the hooks − band from q0, k0| at most: each pair of q carries its
    recomputation error eq plus the rotation's rounding (cos, sin rounded to float32, two products and
    a sum: 4u of the pair's size), the same for k; their product to first order."""
    out = []
    for a, b in split.band_pairs(dims, interleaved):
        qa = np.abs(q0[:, a]) + np.abs(q0[:, b])
        ka = np.abs(k0[:, a]) + np.abs(k0[:, b])
        dq = eq[:, a] + eq[:, b] + 4 * U * qa
        dk = ek[:, a] + ek[:, b] + 4 * U * ka
        out.append(abs(scale) * (np.outer(dq, ka) + np.outer(qa, dk) + 2 * U * np.outer(qa, ka)))
    return np.stack(out)


@pytest.mark.parametrize("name", ROTARY)
def test_the_bands_add_up_to_the_scores_at_the_models_own_frequencies(name, tmp_path):
    m = load(name, tmp_path)
    info = m.info
    run = stages.run_data(m, texts_for(m))
    layers = sorted({0, info.n_layers - 1} | {next((i for i in range(info.n_layers) if i not in info.window_layers), 0)})
    for layer in layers:
        sel = stages.Selection(info.name, 0, layer, info.n_heads - 1, "decoder.self_attn")
        c = stages._context(run, info, sel, "en")
        d = stages.band_parts(run, info, sel)
        n, dims, inter, scale = c.n_q, d["dims"], bool(info.rotary_interleaved), stages._scale_of(c.info)
        q, k = c.t("hook_q")[:n].astype(np.float64), c.t("hook_k")[:n].astype(np.float64)
        # the bands are the hooked q·k regrouped: their sum is the model's score up to the score's own
        # float32 rounding, γ_{d_head} |q|·|k| (+ u for the scale)
        bound = (info.d_head + 2) * U * abs(scale) * np.abs(q) @ np.abs(k).T
        assert (np.abs(d["bands"].sum(0) - c.t("hook_scores")[:n, :n]) <= bound).all(), (name, layer)
        # each band from q and k before the rotation, at the model's frequencies: the same
        q0, k0, eq, ek = _unrotated(m, run, c)
        pos = np.arange(n)
        rel = split.rope_band_relative(q0[:, :dims], k0[:, :dims], d["theta"], pos, pos, inter, scale)
        pb = _pair_bound(q0, k0, eq, ek, dims, inter, scale)
        got = d["bands"][: len(d["theta"])]
        assert (np.abs(got - rel) <= pb).all(), (name, layer, float(np.abs(got - rel).max()))
        # the wrong frequencies fail: the other layer kind's base (Gemma), the rope without its
        # scaling, 1 % off; and the other pairing
        wrongs = [d["theta"] * 1.01]
        if info.rope_scaling and not (info.positional_base_local and layer in info.window_layers):
            wrongs.append(rope_frequencies(Rope(base=float(info.positional_base)), dims).numpy())
        if info.positional_base_local and float(info.positional_base_local) != float(info.positional_base):
            other = info.positional_base if layer in info.window_layers else info.positional_base_local
            wrongs.append(rope_frequencies(Rope(base=float(other)), dims).numpy())
        for theta in wrongs:
            bad = split.rope_band_relative(q0[:, :dims], k0[:, :dims], theta, pos, pos, inter, scale)
            assert (np.abs(got - bad) > pb).any(), (name, layer, "wrong frequencies pass")
        flipped = split.rope_band_relative(q0[:, :dims], k0[:, :dims], d["theta"], pos, pos, not inter, scale)
        assert (np.abs(got - flipped) > pb).any(), (name, layer, "the other pairing passes")


@pytest.mark.parametrize("interleaved,dims", [(True, 8), (False, 6), (True, 6)])
def test_interleaved_and_partial_rotary_on_the_models_own_rotation(interleaved, dims):
    """No fixture family has interleaved pairs or partial rotary: parts.Rotary (what every model uses)
    turns random q and k, and the bands of the turned vectors are the bands computed before the turn
    with the same pairing (and only with it); the unrotated dimensions are one more band."""
    from model.arch.parts import Rotary

    g = torch.Generator().manual_seed(0)
    T, hs = 7, 10
    q0, k0 = torch.randn(1, 1, T, hs, generator=g), torch.randn(1, 1, T, hs, generator=g)
    rope = Rope(base=100.0)
    rot = Rotary(torch.arange(T), rope, dims, interleaved)
    q, k = rot.apply(q0)[0, 0].double().numpy(), rot.apply(k0)[0, 0].double().numpy()
    bands = split.rope_bands(q, k, dims, interleaved, 0.5)
    assert bands.shape[0] == dims // 2 + (dims < hs)
    assert np.abs(bands.sum(0) - 0.5 * q @ k.T).max() < 1e-12
    theta = rope_frequencies(rope, dims).numpy()
    pos = np.arange(T)
    q0n, k0n = q0[0, 0].double().numpy()[:, :dims], k0[0, 0].double().numpy()[:, :dims]
    rel = split.rope_band_relative(q0n, k0n, theta, pos, pos, interleaved, 0.5)
    assert np.abs(bands[: dims // 2] - rel).max() < 1e-5  # the rotation in float32: ~1e-7 of |q||k| ~ 1
    wrong = split.rope_band_relative(q0n, k0n, theta, pos, pos, not interleaved, 0.5)
    assert np.abs(bands[: dims // 2] - wrong).max() > 1e-3
    if dims < hs:
        assert np.abs(bands[-1] - 0.5 * q[:, dims:] @ k[:, dims:].T).max() < 1e-12


def test_gemma3s_local_and_global_layers_turn_at_their_own_bases(tmp_path):
    m = load("gemma3_text")
    info = m.info
    assert info.positional_base_local and info.window_layers
    run = stages.run_data(m, TEXTS)
    local = next(i for i in range(info.n_layers) if i in info.window_layers)
    full = next(i for i in range(info.n_layers) if i not in info.window_layers)
    th = {li: stages.band_parts(run, info, stages.Selection(info.name, 0, li, 0, "decoder.self_attn"))["theta"]
          for li in (local, full)}
    dims = 2 * len(th[local])
    assert np.allclose(th[local], rope_frequencies(m.family.rope_local, dims).numpy(), rtol=1e-12)
    assert np.allclose(th[full], rope_frequencies(m.family.rope, dims).numpy(), rtol=1e-12)
    assert not np.allclose(th[local], th[full])
    words = {li: stages.stage_words("rope_bands", run, info, stages.Selection(info.name, 0, li, 0, "decoder.self_attn"))
             for li in (local, full)}
    assert stages._base_text(float(info.positional_base_local)) in words[local]["explain"]
    assert stages._base_text(float(info.positional_base)) in words[full]["explain"]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_rope_bands_figure_and_its_long_table(lang):
    m = load("llama")
    run = stages.run_data(m, TEXTS)
    sel = stages.Selection(m.info.name, 0, 0, 0, "decoder.self_attn", query=3, key=1)
    fig, df = stages.stage_figure("rope_bands", run, m.info, sel, lang=lang)
    L = stages.i18n.fig_labels(lang)
    assert list(df.columns) == [L["query"], L["key"], L["band"], L["value"]]
    if lang == "en":
        assert list(df.columns) == ["query", "key", "band", "value"]
    n = len(run.tokens[0])
    bands = m.info.d_head // 2
    assert len(df) == bands * n * n
    row = df[(df[L["query"]] == 3) & (df[L["key"]] == 1)][L["value"]].sum()
    assert abs(row - float(run["decoder.blocks.0.self_attn.hook_scores"][0, 0, 3, 1])) < 1e-5


# --- attention_vs_effect --------------------------------------------------------------------------

def _recomputed(m, text: str, block: str, layer: int, head: int) -> np.ndarray:
    """Δ log p of the intact run's top next token at every position, with the edit ablate=block:layer:head
    applied to a run of its own (one sentence, as the what-if view runs it)."""
    edit = Ablate(block, layer, head)
    if m.info.kind == "decoder":
        clean = torch.log_softmax(m.run([text]).logits[0].float(), -1)
        cut = torch.log_softmax(m.run([text], edits=[edit]).logits[0].float(), -1)
    else:
        _, cache = m.run_with_cache([text], names=[])
        src = torch.tensor([cache.token_ids[0]])
        tgt = [cache.decoder_token_ids[0]]
        with torch.inference_mode():
            clean = torch.log_softmax(m.teacher_forced(src, tgt)[0].float(), -1)
            with hooks(hook_fns(m, [edit])):
                cut = torch.log_softmax(m.teacher_forced(src, tgt)[0].float(), -1)
    ans = clean.argmax(-1)
    return (cut.gather(-1, ans[:, None]) - clean.gather(-1, ans[:, None]))[:, 0].numpy()


# Batched and single runs differ only in float32 rounding (a batch changes how the matrix products are
# blocked): each log p is within a few ulp of its logits' size through every layer; for these small
# models that is under 1e-5 (measured: ~1e-6), so 5e-5 holds with room and is far below the
# differences between heads (a different head's edit is checked to exceed it).
EFFECT_TOL = 5e-5


@pytest.mark.parametrize("name,block", [("seed", "decoder.cross_attn"), ("seed", "decoder.self_attn"),
                                        ("llama", "decoder.self_attn"), ("gpt2", "decoder.self_attn")])
def test_the_effect_is_a_run_with_the_ablation_edit(name, block):
    m = load(name)
    text = "hello world" if name == "seed" else TEXTS[0]
    res = ablation.head_effects(m, text, block, batch_size=5)  # batches of five: rows split across batches
    eff = np.asarray(res.effect)
    n_layers = eff.shape[0]
    worst, other = 0.0, 0.0
    for layer in range(n_layers):
        for head in range(m.info.n_heads):
            ref = _recomputed(m, text, block, layer, head)
            worst = max(worst, float(np.abs(eff[layer, head] - ref).max()))
            assert np.abs(eff[layer, head] - ref).max() <= EFFECT_TOL, (name, block, layer, head)
            wrong = _recomputed(m, text, block, layer, (head + 1) % m.info.n_heads)
            other = max(other, float(np.abs(eff[layer, head] - wrong).max()))
    assert other > EFFECT_TOL  # another head's edit gives another effect: the comparison can fail
    print(f"attention_vs_effect {name} {block}: max |batched - edited run| = {worst:.2e}")


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_effect_figure_names_heads_and_its_table(lang):
    m = load("seed")
    run = stages.run_data(m, ["hello world"])
    res = ablation.head_effects(m, run.texts[0], "decoder.cross_attn")
    sel = stages.Selection("seed", 0, 1, 0, "decoder.cross_attn", query=1, key=2)
    fig, df = stages.stage_figure("attention_vs_effect", run, m.info, sel, lang=lang, effects=res)
    L = stages.i18n.fig_labels(lang)
    assert list(df.columns) == [L["layer"], L["head"], L["attention"], L["effect"]]
    if lang == "en":
        assert list(df.columns) == ["layer", "head", "attention", "effect"]
    assert len(df) == m.info.n_decoder_layers * m.info.n_heads
    eff = np.asarray(res.effect)[:, :, 1].ravel()
    assert np.allclose(df[L["effect"]].to_numpy(), eff)
    att = np.stack([run[f"decoder.blocks.{i}.cross_attn.hook_pattern"][0, :, 1, 2] for i in range(2)]).ravel()
    assert np.allclose(df[L["attention"]].to_numpy(), att)
    assert fig.layout.annotations  # the named heads
    w = stages.stage_words("attention_vs_effect", run, m.info, sel, lang, effects=res)
    assert w["variant"] == "seq2seq" and "L" in w["explain"] and "{" not in w["explain"]
    # without the ablations: the figure says to run them; an encoder block says to choose a decoder one
    fig, df = stages.stage_figure("attention_vs_effect", run, m.info, sel, lang=lang)
    assert df is None
    assert stages.stage_words("attention_vs_effect", run, m.info, sel, lang)["variant"] == "pending"
    with pytest.raises(ablation.AblationError):
        ablation.head_effects(m, "hello", "encoder.self_attn")


# --- the lessons' answers, from the tensors (tests/test_lessons.py asks for them) -------------------

def lesson_expected(n: int, texts, models):
    """(what is compared, the value) of the lessons on issue 35, from run_with_cache and the edits, not
    through the lesson code; None for another lesson."""
    from explorer.lessons import catalog

    lesson = catalog.lesson(n)
    if lesson.title == "lesson.qk_terms.title":
        m = models("seed")
        part = lesson.parts[0]
        _, c = m.run_with_cache(texts)
        T = len(c.tokens[0])
        e = c["encoder.hook_embed"][0, :T].double()
        p = c["encoder.hook_pos_embed"][0, :T].double()
        att = m.encoder.blocks[0].self_attn
        dh, h = m.info.d_head, part.head
        Wq, Wk = att.W_Q.weight[h * dh:(h + 1) * dh].double(), att.W_K.weight[h * dh:(h + 1) * dh].double()
        bq, bk = att.W_Q.bias[h * dh:(h + 1) * dh].double(), att.W_K.bias[h * dh:(h + 1) * dh].double()
        qe, qp, ke, kp = e @ Wq.T, p @ Wq.T, e @ Wk.T, p @ Wk.T
        terms = [qe @ ke.T, qe @ kp.T, qp @ ke.T, qp @ kp.T, (bq @ (ke + kp + bk).T)[None, :] + ((qe + qp) @ bk)[:, None]]
        A = c["encoder.blocks.0.self_attn.hook_pattern"][0, h, :T, :T].double()
        before = A[torch.arange(1, T), torch.arange(0, T - 1)].mean()
        after = A[torch.arange(0, T - 1), torch.arange(1, T)].mean()
        off = -1 if before >= after else 1
        rows = range(1, T) if off < 0 else range(0, T - 1)
        pulls = [float(np.mean([float(t[i, i + off] - t[i].mean()) for i in rows])) for t in terms]
        return "index", int(np.argmax(pulls))
    if lesson.title == "lesson.rope_bands.title":
        m = models("smollm2")
        part = lesson.parts[0]
        _, c = m.run_with_cache(texts)
        T = len(c.tokens[0])
        name = f"decoder.blocks.{part.layer}.self_attn"
        q = c[f"{name}.hook_q"][0, part.head, :T].double()
        k = c[f"{name}.hook_k"][0, part.head, :T].double()
        half = q.shape[-1] // 2  # SmolLM2: half-split pairs, every dimension rotated
        bands = torch.stack([torch.outer(q[:, b], k[:, b]) + torch.outer(q[:, b + half], k[:, b + half])
                             for b in range(half)])  # (bands, T, T) up to the common scale
        pulls = torch.stack([bands[:, i, i - 1] - bands[:, i, : i + 1].mean(-1) for i in range(1, T)]).mean(0)
        cuts = [round(half * j / 3) for j in range(4)]
        sums = [float(pulls[cuts[j]: cuts[j + 1]].sum()) for j in range(3)]
        return "index", int(np.argmax(sums))
    if lesson.title == "lesson.effect.title":
        m = models("seed")
        part = lesson.parts[0]
        _, c = m.run_with_cache(texts)
        i, j = part.query, part.key
        n_l, n_h = m.info.n_decoder_layers, m.info.n_heads
        att = np.array([[float(c[f"decoder.blocks.{li}.cross_attn.hook_pattern"][0, h, i, j]) for h in range(n_h)]
                        for li in range(n_l)])
        eff = np.array([[_recomputed(m, texts[0], part.block, li, h)[i] for h in range(n_h)] for li in range(n_l)])
        an, en = att / max(att.max(), 1e-12), np.abs(eff) / max(np.abs(eff).max(), 1e-12)
        look = np.unravel_index(int(np.argmax(an - en)), att.shape)
        matter = np.unravel_index(int(np.argmax(en - an)), att.shape)
        if matter == look:
            order = np.dstack(np.unravel_index(np.argsort(-np.abs(eff), axis=None), eff.shape))[0]
            matter = next(tuple(x) for x in order if tuple(x) != tuple(look))
        heads = sorted([tuple(int(v) for v in look), tuple(int(v) for v in matter)])
        return "index", int(np.argmax([abs(eff[h]) for h in heads]))
    return None
