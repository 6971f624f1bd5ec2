"""What-if edits on models with a sliding window, QK-norm, T5's relative bias and Gemma's scale
(model/runtime/edits.py), on the tiny family fixtures (tests/fixtures/families).

``window=N`` changes exactly the cells of the sliding-window layers that the new window hides or
shows, and the edited pattern is the softmax of the edited scores under a mask rebuilt by hand;
``no_causal`` and ``no_padding`` keep the window on windowed models and still refuse a mask that is
not the conjunction of its rules; ``scale=X`` replaces the model's own scale (T5: 1, Gemma:
query_pre_attn_scalar^-½); ``no_position`` zeroes T5's bias and undoes each layer's own rotary.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import model
from model.runtime import edits as E
from model.runtime.edits import EditError, parse

FIXTURES = Path(__file__).parent / "fixtures" / "families"
TEXTS = ["the cat sat on the mat and looked at the dog", "a dog"]


@pytest.fixture(scope="module")
def fam():
    loaded = {}

    def get(name: str):
        if name not in loaded:
            loaded[name] = model.load(FIXTURES / name)
        return loaded[name]

    return get


def self_masks(cache, n_layers: int) -> list[torch.Tensor]:
    return [cache[f"decoder.blocks.{i}.self_attn.hook_mask"] for i in range(n_layers)]


def rule(T: int, size: int | None) -> torch.Tensor:
    """(T, T) causal, and within ``size`` keys up to the query when given, by hand."""
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    out = j <= i
    return out & (j > i - size) if size else out


def by_hand(cache, name: str, mask: torch.Tensor) -> torch.Tensor:
    """softmax of the hooked scores (plus any position bias) under ``mask``, rows with no key 0."""
    s = cache[f"{name}.hook_scores"].double()
    if f"{name}.hook_position_bias" in cache:
        s = s + cache[f"{name}.hook_position_bias"].double()
    p = torch.softmax(torch.where(mask, s, float("-inf")), dim=-1)
    return torch.nan_to_num(p, nan=0.0)


def test_window_parses_and_round_trips():
    e = parse("window=3, no_causal")
    assert str(e) == "no_causal,window=3" and parse(str(e)) == e
    assert E.as_edits([E.Window(3), E.NoCausal()]) == e
    for bad, says in (("window=0", "from 1"), ("window=x", "whole number"), ("window=", "needs a value"),
                      ("window=2,window=3", "give one window")):
        with pytest.raises(EditError, match=says):
            parse(bad)
    with pytest.raises(EditError):
        E.Window(True)


@pytest.mark.parametrize("name", ["mistral", "gemma3_text", "qwen3", "llama"])
def test_window_changes_exactly_the_cells_of_the_window_layers(fam, name):
    m = fam(name)
    info, L = m.info, m.info.n_layers
    _, intact = m.run_with_cache(TEXTS)
    _, edited = m.run_with_cache(TEXTS, edits="window=2")
    layers = sorted(info.window_layers) if info.sliding_window else list(range(L))
    assert E.window_layers(info, L) == layers
    T = intact["decoder.blocks.0.self_attn.hook_mask"].shape[-1]
    real = intact["decoder.blocks.0.self_attn.hook_mask"].any(-2, keepdim=True)  # (B, 1, 1, T)
    for i, (a, b) in enumerate(zip(self_masks(intact, L), self_masks(edited, L))):
        if i in layers:
            want = real & rule(T, 2)
            assert torch.equal(b, want), i
            # the cells that changed are the ones the old window (or none) allowed and the new one hides
            old = real & rule(T, info.sliding_window if i in info.window_layers else None)
            assert torch.equal(a, old)
            assert torch.equal(a & ~b, old & ~rule(T, 2)) and not (b & ~a).any()
        else:  # a global layer of Gemma keeps its mask
            assert torch.equal(a, b), i
        name_i = f"decoder.blocks.{i}.self_attn"
        got = edited[f"{name_i}.hook_pattern"].double()
        assert torch.allclose(got, by_hand(edited, name_i, b), atol=1e-6)
    # one key per query: every real row puts all its weight on itself
    if 0 in layers:
        _, one = m.run_with_cache(TEXTS, edits="window=1")
        p = one["decoder.blocks.0.self_attn.hook_pattern"][0]  # (nh, T, T) the longer sentence
        assert torch.allclose(p, torch.eye(T).expand_as(p))


def test_window_has_a_consequence_on_the_next_token(fam):
    from explorer.views import stages

    m = fam("mistral")
    run, edited = stages.run_data(m, TEXTS), stages.run_data(m, TEXTS, edits="window=1")
    assert edited.edits == "window=1"
    assert not torch.allclose(torch.as_tensor(run.final_logprobs), torch.as_tensor(edited.final_logprobs))
    sel = stages.Selection(m.info.name, 0, 0, 0, "decoder.self_attn")
    for lang in ("en", "ko"):
        fig, df = stages.stage_figure("whatif_output", run, m.info, sel, lang=lang, edited=edited)
        assert "window=1" in fig.layout.title.subtitle.text and "KL" in fig.layout.title.subtitle.text


def test_window_needs_a_decoder(fam):
    with pytest.raises(EditError, match="no decoder self-attention"):
        fam("bert").run_with_cache(TEXTS, edits="window=2")
    _, c = fam("t5").run_with_cache(TEXTS, edits="window=1")  # an encoder-decoder's decoder: fine
    n = fam("t5").info.n_decoder_layers
    for mask in self_masks(c, n):
        T = mask.shape[-1]
        assert torch.equal(mask & ~torch.eye(T, dtype=torch.bool), torch.zeros_like(mask))
    assert torch.equal(c["encoder.blocks.0.self_attn.hook_mask"],
                       fam("t5").run_with_cache(TEXTS)[1]["encoder.blocks.0.self_attn.hook_mask"])


@pytest.mark.parametrize("name", ["mistral", "qwen2", "qwen3", "gemma3_text"])
def test_no_causal_and_no_padding_keep_the_window(fam, name):
    m = fam(name)
    info, L = m.info, m.info.n_layers
    _, intact = m.run_with_cache(TEXTS)
    _, nc = m.run_with_cache(TEXTS, edits="no_causal")
    _, npad = m.run_with_cache(TEXTS, edits="no_padding")
    T = intact["decoder.blocks.0.self_attn.hook_mask"].shape[-1]
    real = intact["decoder.blocks.0.self_attn.hook_mask"].any(-2, keepdim=True)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    for layer in range(L):
        w = info.sliding_window if layer in info.window_layers else None
        near = (j > i - w) if w else torch.ones(T, T, dtype=torch.bool)
        assert torch.equal(nc[f"decoder.blocks.{layer}.self_attn.hook_mask"], real & near), layer
        assert torch.equal(npad[f"decoder.blocks.{layer}.self_attn.hook_mask"], (j <= i) & near
                           & torch.ones_like(real)), layer


def test_the_mask_edits_still_refuse_a_mask_they_cannot_read(fam):
    """A model whose mask is not padding ∧ causal ∧ its stated window (here: a description that
    claims another window) is refused, not silently rebuilt."""
    m = fam("mistral")
    wrong = dataclasses.replace(m.info, sliding_window=m.info.sliding_window + 1)
    saved = m.info
    try:
        m.info = wrong
        with pytest.raises(RuntimeError, match="a window of 4"):
            m.run_with_cache(TEXTS, edits="no_causal")
        m.info = dataclasses.replace(saved, window_layers=())  # the window forgotten
        with pytest.raises(RuntimeError, match="not padding ∧ causal"):
            m.run_with_cache(TEXTS, edits="no_padding")
    finally:
        m.info = saved


@pytest.mark.parametrize("name, x", [("t5", 0.5), ("gemma3_text", 0.125), ("llama", 2.0)])
def test_scale_replaces_the_models_own_scale(fam, name, x):
    m = fam(name)
    _, c = m.run_with_cache(TEXTS, edits=f"scale={x}")
    stack = "encoder" if m.info.kind == "encoder-decoder" else "decoder"
    for layer in range(m.info.n_layers):
        p = f"{stack}.blocks.{layer}.self_attn"
        q, k = c[f"{p}.hook_q"].double(), c[f"{p}.hook_k"].double()
        assert torch.allclose(c[f"{p}.hook_scores"].double(), q @ k.transpose(-2, -1) * x, atol=1e-5, rtol=1e-5)
    _, plain = m.run_with_cache(TEXTS, edits="no_scale")
    if m.info.attn_scale == 1.0:  # T5 has no scaling: no_scale changes nothing
        _, intact = m.run_with_cache(TEXTS)
        assert torch.equal(plain[f"{stack}.blocks.0.self_attn.hook_pattern"],
                           intact[f"{stack}.blocks.0.self_attn.hook_pattern"])


def test_temperature_divides_what_the_softmax_reads_on_t5(fam):
    """T5 adds its position bias after hook_scores: the temperature divides the masked scores."""
    m = fam("t5")
    _, intact = m.run_with_cache(TEXTS)
    _, hot = m.run_with_cache(TEXTS, edits="temperature=2.5")
    p = "encoder.blocks.0.self_attn"
    want = torch.nan_to_num(torch.softmax(intact[f"{p}.hook_masked_scores"].double() / 2.5, dim=-1), nan=0.0)
    assert torch.allclose(hot[f"{p}.hook_pattern"].double(), want, atol=1e-6)


def test_no_position_on_t5_zeroes_the_relative_bias(fam):
    m = fam("t5")
    _, c = m.run_with_cache(TEXTS, edits="no_position")
    biases = [n for n in c.tensors if n.endswith(".hook_position_bias")]
    assert biases and all(not c[n].any() for n in biases)
    p = "encoder.blocks.0.self_attn"
    assert torch.allclose(c[f"{p}.hook_masked_scores"].nan_to_num(neginf=0.0),
                          torch.where(c[f"{p}.hook_mask"], c[f"{p}.hook_scores"], 0.0))


@pytest.mark.parametrize("name", ["gemma3_text", "qwen3"])
def test_no_position_undoes_each_layers_own_rotary(fam, name):
    """With QK-norm the unrotated q and k are exactly the normed ones (before rotary): Gemma's local
    layer (base 10,000) and global layer (1,000,000) both come back."""
    m = fam(name)
    _, c = m.run_with_cache(TEXTS, edits="no_position")
    group = m.info.n_heads // m.info.n_kv_heads
    for layer in range(m.info.n_layers):
        p = f"decoder.blocks.{layer}.self_attn"
        assert torch.allclose(c[f"{p}.hook_q"], c[f"{p}.hook_q_normed"], atol=1e-5), layer
        assert torch.allclose(c[f"{p}.hook_k"], c[f"{p}.hook_k_normed"].repeat_interleave(group, 1), atol=1e-5), layer


@pytest.mark.parametrize("change", [{"rope_dims": 4}, {"rope_interleaved": True}, {"rope_dims": 4, "rope_interleaved": True}])
def test_no_position_undoes_partial_and_interleaved_rotary(fam, change):
    """The llama fixture rebuilt as partial (4 of 8 dimensions rotated) and/or interleaved rotary: under
    no_position, q and k are exactly the projections of the attention's input, in every layer."""
    import copy

    m = copy.deepcopy(fam("llama"))
    f = dataclasses.replace(m.family, **change)
    m.family = m.decoder.f = f  # the stack reads its family for every run's rotary tables
    _, intact = m.run_with_cache(TEXTS)
    _, c = m.run_with_cache(TEXTS, edits="no_position")
    group = m.info.n_heads // m.info.n_kv_heads
    B, T = c["decoder.blocks.0.self_attn.hook_q"].shape[0], c["decoder.blocks.0.self_attn.hook_q"].shape[2]
    for layer in range(m.info.n_layers):
        p, attn = f"decoder.blocks.{layer}", m.decoder.blocks[layer].self_attn
        x = c[f"{p}.hook_attn_normed"]
        q = attn.W_Q(x).view(B, T, -1, m.info.d_head).transpose(1, 2)
        k = attn.W_K(x).view(B, T, -1, m.info.d_head).transpose(1, 2).repeat_interleave(group, 1)
        assert torch.allclose(c[f"{p}.self_attn.hook_q"], q, atol=1e-5), (change, layer)
        assert torch.allclose(c[f"{p}.self_attn.hook_k"], k, atol=1e-5), (change, layer)
    # and the change was real: the intact run's q differs from the unrotated one beyond position 0
    q0 = intact["decoder.blocks.0.self_attn.hook_q"]
    x0 = intact["decoder.blocks.0.hook_attn_normed"]
    raw = m.decoder.blocks[0].self_attn.W_Q(x0).view(B, T, -1, m.info.d_head).transpose(1, 2)
    assert not torch.allclose(q0[..., 1:, :], raw[..., 1:, :], atol=1e-3)
    if "rope_dims" in change:  # the unrotated half is untouched
        assert torch.allclose(q0[..., 4:], raw[..., 4:], atol=1e-5)
