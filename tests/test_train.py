"""The training step: its gradient is the gradient of the batch's mean loss, however it is cut."""
from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from model import train as T
from model.seed import SeedConfig, SeedTransformer
from model.tokenizer import PRINTABLE_ASCII, char_tokenizer


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    tt = char_tokenizer()
    m = SeedTransformer(SeedConfig(vocab_size=tt.vocab_size, d_model=32, n_heads=2, d_ff=64), tt)
    rng = random.Random(1)
    srcs = [T.sample_input("reverse", rng, max_chars=12) for _ in range(9)]
    return m, tt, srcs


def reference_gradient(m, tt, srcs, always):
    """The plain way: the whole batch at once, through the model's own embedding lookups."""
    b = T.encode_batch("reverse", tt, srcs)
    cand = T.candidates([b], always)
    m.zero_grad(set_to_none=True)
    memory, src_mask = m.encode(b.src)
    tgt_mask = (b.tgt_in != tt.pad_id)[:, None, None, :] & torch.ones(
        b.tgt_in.shape[1], b.tgt_in.shape[1], dtype=torch.bool).tril()
    h = m.decoder(m.embed_tokens(b.tgt_in), memory, tgt_mask, src_mask)
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
    rate = T.RECIPES["reverse"]["unk_rate"]
    assert 0.01 <= rate <= 0.1 and T.RECIPES["sort"]["unk_rate"] == 0
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
