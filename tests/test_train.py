"""The training step: its gradient is the gradient of the batch's mean loss, however it is cut."""
from __future__ import annotations

import json
import random

import pytest
import torch
import torch.nn.functional as F

from model import train as T
from model.arch.seed import Seed, SeedConfig
from model.files.tokenizer import PRINTABLE_ASCII, char_tokenizer


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    tt = char_tokenizer()
    m = Seed(SeedConfig(vocab_size=tt.vocab_size, d_model=32, n_heads=2, d_ff=64), tt)
    rng = random.Random(1)
    srcs = [T.sample_input("reverse", rng, max_chars=12) for _ in range(9)]
    return m, tt, srcs


def reference_gradient(m, tt, srcs, always):
    """The plain way: the whole batch at once, through the model's own embedding lookups."""
    b = T.encode_batch("reverse", tt, srcs)
    cand = T.candidates([b], always)
    m.zero_grad(set_to_none=True)
    src_real, tgt_real = b.src != tt.pad_id, b.tgt_in != tt.pad_id
    memory = m.encoder.finish(m.encode(b.src, src_real))
    h = m.decode(b.tgt_in, tgt_real, memory, src_real)  # (B, T, d): padding and causal masks of its own
    keep = b.tgt_out != tt.pad_id
    loss = F.cross_entropy(h[keep] @ m.embedding.weight[cand].T, torch.searchsorted(cand, b.tgt_out[keep]))
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}


@pytest.mark.parametrize("pieces", [1, 2, 3])
def test_split_step_has_the_whole_batch_gradient(setup, pieces):
    m, tt, srcs = setup
    always = torch.arange(4 + len(PRINTABLE_ASCII))
    want_loss, want = reference_gradient(m, tt, srcs, always)
    m.zero_grad(set_to_none=True)
    loss = T.accumulate_gradient(m, T.split_by_length("reverse", tt, srcs, pieces), always)
    assert torch.allclose(loss, want_loss, atol=1e-6)
    for name, p in m.named_parameters():
        assert p.grad is not None, name
        assert torch.allclose(p.grad, want[name], atol=1e-6, rtol=1e-4), name
    # rows of characters the batch never uses get no gradient
    unused = sorted(set(range(tt.vocab_size)) - set(T.candidates(
        T.split_by_length("reverse", tt, srcs, 1), always).tolist()))
    assert torch.count_nonzero(m.embedding.weight.grad[unused]) == 0


def test_split_by_length_keeps_every_input_once(setup):
    _, tt, srcs = setup
    pieces = T.split_by_length("reverse", tt, srcs, 3)
    assert sum(b.src.shape[0] for b in pieces) == len(srcs)
    widths = [b.src.shape[1] for b in pieces]
    assert widths == sorted(widths)  # shortest inputs first, each piece padded to its own longest


def test_training_is_seeded_and_reproducible():
    def weights(seed):
        m, stats = T.train("reverse", steps=6, batch_size=6, seed=seed, log=lambda s: None,
                           cfg_overrides={"d_model": 16, "n_heads": 2, "d_ff": 32}, final_eval=4)
        assert stats["steps"] == 6 and 0 <= stats["held_out_exact_match"] <= 1
        return m.state_dict()

    a, b, c = weights(0), weights(0), weights(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


# --- characters outside the vocabulary ----------------------------------------------------------

def test_every_unknown_character_is_one_unk_token():
    tt = char_tokenizer()
    for ch in T.UNKNOWN_CHARS:
        enc = tt.encode([ch])[0]
        assert enc.tokens == ["<unk>", "</s>"], ch  # one code point, NFC-stable, outside the vocabulary
    assert len(set(T.UNKNOWN_CHARS)) == len(T.UNKNOWN_CHARS) >= 100


def test_the_reverse_mix_has_unknowns_and_the_target_keeps_them_in_place():
    tt = char_tokenizer()
    rate = T.RECIPES["reverse"]["then"]["unk_rate"]  # the second stage mixes unknowns in
    assert 0.01 <= rate <= 0.1 and T.RECIPES["sort"]["unk_rate"] == 0 == T.RECIPES["reverse"]["unk_rate"]
    rng = random.Random(5)
    srcs = [T.sample_input("reverse", rng, long_bias=0.7, unk_rate=rate) for _ in range(400)]
    b = T.encode_batch("reverse", tt, srcs)
    unk, real = tt.tok.token_to_id("<unk>"), b.src != tt.pad_id
    n_unk, n_real = int((b.src == unk).sum()), int(real.sum()) - len(srcs)  # without each </s>
    assert 0.5 * rate <= n_unk / n_real <= 1.5 * rate  # measured share of unknown positions
    rows_with = 0
    for i, s in enumerate(srcs):
        L = len(s)
        src_unk = (b.src[i, :L] == unk).nonzero().flatten().tolist()
        out_unk = (b.tgt_out[i, :L] == unk).nonzero().flatten().tolist()
        assert sorted(L - 1 - j for j in src_unk) == out_unk  # each <unk> at its reversed place
        assert (b.tgt_in[i, 1: L + 1] == b.tgt_out[i, :L]).all()  # teacher forcing: shifted right
        rows_with += bool(src_unk)
        want = T.expected_output("reverse", s, tt)
        assert want.count("<unk>") == len(src_unk) and len(want) == L + 4 * len(src_unk)
    assert rows_with > 50
    # the sampled softmax always scores <unk> (a target token now)
    assert unk in T.candidates([b], torch.arange(4 + len(PRINTABLE_ASCII))).tolist()
    # no unknowns, no extra random draws: the other recipes' streams are unchanged
    a, c = random.Random(9), random.Random(9)
    assert [T.sample_input("sort", a) for _ in range(20)] == \
        [T.sample_input("sort", c, unk_rate=0.0) for _ in range(20)]


def test_a_tiny_run_trains_on_unknowns_and_scores_the_tokenized_target():
    torch.set_num_threads(1)
    m, stats = T.train("reverse", steps=3, batch_size=8, seed=0, log=lambda s: None, unk_rate=0.2,
                       cfg_overrides={"d_model": 16, "n_heads": 2, "d_ff": 32}, final_eval=8)
    assert stats["unk_rate"] == 0.2 and stats["steps"] == 3
    inputs = T.held_out("reverse", 8, 0, unk_rate=0.2)
    assert any(set(s) & set(T.UNKNOWN_CHARS) for s in inputs)

    class Echo:  # a "model" that writes exactly what the tokenizer makes of the target
        tokenizer = char_tokenizer()

        def run(self, chunk):
            out = type("Out", (), {})()
            out.generated = [T.expected_output("reverse", s, self.tokenizer) for s in chunk]
            return out

    assert T.exact_match(Echo(), "reverse", inputs) == 1.0
    assert T.expected_output("reverse", "a√b", Echo.tokenizer) == "b<unk>a"


def test_the_two_stage_recipe_equals_its_stages_run_one_by_one(tmp_path, monkeypatch):
    """`python -m model.train reverse` runs both stages; `--stage 1`, then `--stage 2 --init` on its
    weights, gives the same weights (so the shipped file's two commands in the README are the recipe)."""
    from safetensors.torch import load_file

    tiny = dict(steps=3, lr=1e-3, ramp=0.5, long_bias=0.7, pe_base=20.0, d_ff=32, unk_rate=0.0,
                then=dict(steps=2, lr=1e-4, start_len=40, ramp=0.01, unk_rate=0.2))
    monkeypatch.setitem(T.RECIPES, "reverse", tiny)
    common = ["--threads", "1", "--batch-size", "4", "--final-eval", "2"]
    both, first, second = tmp_path / "both.safetensors", tmp_path / "1.safetensors", tmp_path / "2.safetensors"
    assert T.main(["reverse", "--out", str(both), *common]) == 0
    assert T.main(["reverse", "--stage", "1", "--out", str(first), *common]) == 0
    assert T.main(["reverse", "--stage", "2", "--init", str(first), "--out", str(second), *common]) == 0

    def training(path):
        from safetensors import safe_open
        with safe_open(str(path), framework="pt") as f:
            return json.loads(f.metadata()["training"])

    t_both, t_first, t_second = training(both), training(first), training(second)
    assert (t_both["steps"], t_both["unk_rate"], t_both["lr"]) == (2, 0.2, 1e-4)
    assert (t_both["first_stage"]["steps"], t_both["first_stage"]["unk_rate"]) == (3, 0.0)
    assert (t_first["steps"], t_first["unk_rate"], "first_stage" in t_first) == (3, 0.0, False)
    assert (t_second["steps"], t_second["unk_rate"], t_second["start_len"]) == (2, 0.2, 40)
    a, b, c = load_file(str(both)), load_file(str(second)), load_file(str(first))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)  # the second stage changed the weights
    with pytest.raises(SystemExit):
        T.main(["reverse", "--stage", "2", "--out", str(second), *common])  # stage 2 needs --init
