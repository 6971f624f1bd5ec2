"""Every shipped model computes what it computed when its outputs were pinned (tests/pinned.py):
token ids and tokens exactly, hook tensors, logits and decoding probabilities within float32's
estimate (tests/float32.py: two float32 runs of one forward pass differ by the stream's relative
rounding error times the largest value compared), the tokens a decoding writes exactly. The pins
were written before the model code was rewritten onto the family parts; a rewrite that changes a
number fails here, and so does a deliberate mistake of 1 % in the attention scores (below)."""
from __future__ import annotations

import pytest
import torch

import float32
import model
import pinned
from model import fetch


def load(name: str):
    if name in fetch.SOURCES and not fetch.is_fetched(name):
        pytest.skip(f"{name} weights not fetched (run `{fetch.fetch_command(name)}`)")
    return model.load(name)


def differences(m, name: str, edits: str | None = None) -> list[str]:
    """What differs between the model's outputs now and its pin, beyond float32's estimate."""
    ref, ref_facts = pinned.read(name)
    got, facts = pinned.record(m, edits, ids=ref.get("logit_ids"))
    out = [f"{k}: {facts.get(k)!r:.300} != {v!r:.300}" for k, v in ref_facts.items()
           if k != "decode" and facts.get(k) != v]
    if "decode" in ref_facts:
        out += [f"decode {k}: {facts['decode'][k]} != {v}" for k, v in ref_facts["decode"].items()
                if facts["decode"][k] != v]
    for k, r in ref.items():
        g = got.get(k)
        if g is None:
            out.append(f"{k}: not computed")
        elif g.shape != r.shape:
            out.append(f"{k}: shape {tuple(g.shape)} != {tuple(r.shape)}")
        elif not r.is_floating_point():
            if not torch.equal(g, r):
                out.append(f"{k}: differs")
        elif not torch.equal(g.isfinite(), r.isfinite()) or not torch.equal(g[~g.isfinite()], r[~r.isfinite()]):
            out.append(f"{k}: masked (-inf) in other places")
        elif not float32.close(g[g.isfinite()], r[r.isfinite()], m.info):
            g, r = g[g.isfinite()].double(), r[r.isfinite()].double()
            out.append(f"{k}: max |Δ| {(g - r).abs().max():.3g} > {float32.tolerance(m.info, r):.3g}")
    return out


@pytest.mark.parametrize("name", pinned.SHIPPED)
def test_every_shipped_model_computes_its_pinned_outputs(name):
    m = load(name)
    assert differences(m, name) == []


@pytest.mark.parametrize("name", ["seed", "smollm2"])
def test_a_one_percent_mistake_in_the_scores_fails_the_pin(name):
    """Scores divided by 1.01 (the edit temperature=1.01): a mistake far smaller than a wrong scale
    (√d_k against d_k) or a wrong mask, and still caught."""
    m = load(name)
    found = differences(m, name, edits="temperature=1.01")
    assert any("hook_pattern" in d for d in found), found
    assert any(d.startswith("logits") for d in found), found
