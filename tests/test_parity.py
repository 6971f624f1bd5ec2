"""Parity with the reference `transformers` on the committed fixtures (tests/fixtures/parity).

The fixtures come from scripts/make_parity_fixtures.py (see its docstring to regenerate).
These tests need the fetched weights: `python -m model.fetch minilm smollm2`.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import model
from model import fetch

FIXTURES = Path(__file__).parent / "fixtures" / "parity"
PARITY = json.loads((FIXTURES / "parity.json").read_text())
SENTENCES = PARITY["sentences"]
TOLERANCE = 2e-3  # max abs difference of any attention weight


def reference(name: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {k: v.float() if v.is_floating_point() else v
            for k, v in load_file(str(FIXTURES / f"{name}.safetensors")).items()}


@pytest.fixture(scope="module", params=["minilm", "smollm2"])
def run(request):
    name = request.param
    if not fetch.is_fetched(name):
        pytest.skip(f"{name} weights not fetched (run `{fetch.fetch_command(name)}`)")
    m = model.load(name)
    out, cache = m.run_with_cache(SENTENCES)
    return name, m, out, cache


pytestmark = pytest.mark.weights


def test_token_ids_identical(run):
    name, _, _, cache = run
    assert cache.token_ids == PARITY["models"][name]["token_ids"]


def test_attention_patterns_every_layer_and_head(run):
    name, m, _, cache = run
    ref = reference(name)
    stack = m.info.stacks[0]
    worst = 0.0
    for b, ids in enumerate(PARITY["models"][name]["token_ids"]):
        n = len(ids)
        for i in range(m.info.n_layers):
            ours = cache[f"{stack}.blocks.{i}.self_attn.hook_pattern"][b, :, :n, :n]  # (H, n, n)
            err = (ours - ref[f"pattern.{b}"][i]).abs().amax(dim=(-1, -2))  # (H,)
            worst = max(worst, err.max().item())
            assert (err < TOLERANCE).all(), f"{name} layer {i} heads {err.tolist()} (sentence {b})"
    print(f"{name}: max abs attention error vs fixture {worst:.2e}")


def test_next_token_argmax(run):
    name, _, out, _ = run
    if out.logits is None:
        pytest.skip("an encoder has no next-token prediction")
    ref = reference(name)
    for b, ids in enumerate(PARITY["models"][name]["token_ids"]):
        n = len(ids)
        ours = out.logits[b, :n].argmax(-1)
        assert ours[-1].item() == ref[f"argmax.{b}"][-1].item()  # the prediction after the sentence
        clear = ref[f"margin.{b}"] > 1e-3  # every position where the reference is not a near tie
        assert torch.equal(ours[clear], ref[f"argmax.{b}"][clear].long())


def test_encoder_hidden_state(run):
    name, _, out, _ = run
    if out.hidden is None or f"hidden.0" not in reference(name):
        pytest.skip("no reference hidden state for this model")
    ref = reference(name)
    for b, ids in enumerate(PARITY["models"][name]["token_ids"]):
        n = len(ids)
        assert (out.hidden[b, :n] - ref[f"hidden.{b}"]).abs().max() < 1e-2
