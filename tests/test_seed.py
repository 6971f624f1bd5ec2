"""The seed Transformer: maths, masks, the hook contract, thread safety."""
from __future__ import annotations

import math
import threading

import float32
import pytest
import torch
import torch.nn.functional as F

import model
from model.arch.parts import causal_mask
from model.arch.positional import sinusoidal
from model.runtime.hooks import hooks

SENTENCES = ["hello world", "안녕하세요, 어텐션!", "a"]


@pytest.fixture(scope="module")
def m():
    return model.load("seed", random=True, seed=3)


@pytest.fixture(scope="module")
def run(m):
    return m.run_with_cache(SENTENCES)


def attn_names(m, stack, attn):
    n = m.info.n_layers if stack == "encoder" else m.info.n_decoder_layers
    return [f"{stack}.blocks.{i}.{attn}" for i in range(n)]


ALL_ATTN = [("encoder", "self_attn"), ("decoder", "self_attn"), ("decoder", "cross_attn")]


@pytest.mark.parametrize("base", [10000.0, 100.0])
@pytest.mark.parametrize("d_model", [4, 7, 128])
def test_positional_encoding_is_the_formula(base, d_model):
    pe = sinusoidal(50, d_model, base)
    for pos in (0, 1, 17, 49):
        for j in range(d_model):
            i2 = j - j % 2  # the "2i" of the formula
            angle = pos / base ** (i2 / d_model)
            want = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert pe[pos, j].item() == pytest.approx(want, abs=1e-6)


def test_positional_base_changes_the_encoding():
    assert not torch.allclose(sinusoidal(10, 4, 100.0), sinusoidal(10, 4, 10000.0))


def test_scores_are_q_k_transpose_over_sqrt_dk(m, run):
    _, cache = run
    for stack, attn in ALL_ATTN:
        for name in attn_names(m, stack, attn):
            q, k = cache[f"{name}.hook_q"], cache[f"{name}.hook_k"]
            # q·kᵀ/√d_k, computed as q·kᵀ times the one float32 number 1/√d_k (as transformers does):
            # exactly that product, and within one rounding of the division
            want = (q @ k.transpose(-2, -1)) * m.family.scale
            assert m.family.scale == 1.0 / math.sqrt(q.shape[-1])
            assert torch.equal(cache[f"{name}.hook_scores"], want)
            exact = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
            assert torch.allclose(cache[f"{name}.hook_scores"].double(), exact, rtol=1e-5, atol=1e-6)


def test_pattern_is_softmax_of_masked_scores_and_matches_fused_kernel(m, run):
    _, cache = run
    for stack, attn in ALL_ATTN:
        for name in attn_names(m, stack, attn):
            q, k, v = (cache[f"{name}.hook_{x}"] for x in "qkv")
            mask = cache[f"{name}.hook_mask"]
            pattern = cache[f"{name}.hook_pattern"]
            assert torch.equal(pattern, torch.softmax(cache[f"{name}.hook_masked_scores"], -1))
            # the fused kernel's output equals pattern @ v
            fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            assert torch.allclose(fused, pattern @ v, atol=1e-5)
            assert torch.allclose(cache[f"{name}.hook_z"], pattern @ v, atol=1e-6)


def test_rows_sum_to_one_and_masked_entries_are_exactly_zero(m, run):
    _, cache = run
    for stack, attn in ALL_ATTN:
        for name in attn_names(m, stack, attn):
            pattern, mask = cache[f"{name}.hook_pattern"], cache[f"{name}.hook_mask"]
            masked = cache[f"{name}.hook_masked_scores"]
            assert mask.dtype == torch.bool
            assert torch.allclose(pattern.sum(-1), torch.ones(pattern.shape[:-1]), atol=1e-5)
            hidden = (~mask).expand_as(pattern)
            assert hidden.any()  # the batch is padded, so something is masked
            assert (pattern[hidden] == 0).all()
            assert torch.isneginf(masked[hidden]).all()
            assert torch.isfinite(masked[~hidden]).all()


def test_padding_mask_hides_pad_keys(m, run):
    _, cache = run
    mask = cache["encoder.blocks.0.self_attn.hook_mask"]  # (B, 1, S, S)
    for b, toks in enumerate(cache.tokens):
        n = len(toks)
        assert mask[b, 0, :, :n].all()
        assert not mask[b, 0, :, n:].any()


def test_causal_mask_hides_the_future(m, run):
    _, cache = run
    mask = cache["decoder.blocks.0.self_attn.hook_mask"]  # (B, 1, T, T)
    pattern = cache["decoder.blocks.1.self_attn.hook_pattern"]
    T = mask.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert not mask[:, 0][:, future].any()
    assert (pattern[:, :, future] == 0).all()
    assert torch.equal(causal_mask(3)[0, 0], torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())


def test_causal_attention_does_not_depend_on_later_tokens():
    torch.manual_seed(0)
    from test_attention_inplace import attend, attention

    a = attention(16, 2).eval()
    x = torch.randn(1, 6, 16)
    y = x.clone()
    y[:, 4:] = torch.randn(1, 2, 16)  # change only the future
    mask = causal_mask(6)
    with torch.no_grad():
        assert torch.allclose(attend(a, x, mask)[:, :4], attend(a, y, mask)[:, :4], atol=1e-6)


def test_hooked_output_equals_unhooked_output(m):
    plain = m.run(SENTENCES)
    hooked, _ = m.run_with_cache(SENTENCES)
    assert plain.generated == hooked.generated
    assert torch.equal(plain.logits, hooked.logits)


def test_hooks_can_edit_and_are_temporary(m):
    name = "encoder.blocks.0.self_attn.hook_pattern"
    seen = []
    with hooks({name: lambda x, n: seen.append(n) or torch.zeros_like(x)}):
        edited = m.run(["abc"])
    after = m.run(["abc"])
    assert seen == [name] * len(seen) and seen
    assert not torch.equal(edited.logits, after.logits)
    assert torch.equal(after.logits, m.run(["abc"]).logits)


def test_padding_invariance(m):
    short = "short"
    _, alone = m.run_with_cache([short])
    out_b, batched = m.run_with_cache([short, "a considerably longer sentence, 더 긴 문장"])
    n = len(alone.tokens[0])
    assert batched.tokens[0] == alone.tokens[0]
    for name in alone:
        a, b = alone[name], batched[name][:1]
        if name.endswith("hook_pos_embed"):
            continue
        if ".encoder." in f".{name}" or name.startswith("encoder"):
            sl = (slice(None),) * (a.dim() - 1)
            if a.dim() == 4 and a.shape[-1] == a.shape[-2]:  # (B, h, q, k)
                a, b = a[..., :n, :n], b[..., :n, :n]
            elif a.dim() == 4:  # (B, h, pos, d)
                a, b = a[:, :, :n], b[:, :, :n]
            else:  # (B, pos, d)
                a, b = a[:, :n], b[:, :n]
            assert float32.close(b, a, m.info), name  # two runs: as close as float32 allows
    t = len(alone.decoder_tokens[0])
    p_alone = alone["decoder.blocks.0.cross_attn.hook_pattern"][..., :t, :n]
    p_batch = batched["decoder.blocks.0.cross_attn.hook_pattern"][:1, :, :t, :n]
    assert float32.close(p_batch, p_alone, m.info)
    assert out_b.generated[0] == m.run([short]).generated[0]


def test_concurrent_runs_match_sequential(m):
    texts = [[f"thread {i} 문장 {i * 7}", "x" * (i + 1)] for i in range(6)]
    want = [m.run_with_cache(t) for t in texts]
    got: dict[int, tuple] = {}
    errors = []

    def work(i):
        try:
            for _ in range(3):
                got[i] = m.run_with_cache(texts[i])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, (out, cache) in enumerate(want):
        out2, cache2 = got[i]
        assert out.generated == out2.generated
        assert list(cache) == list(cache2)
        for name in cache:
            assert torch.equal(cache[name], cache2[name]), name


def test_hook_names_are_pinned(m):
    names = m.hook_names
    per_attn = ["hook_q", "hook_k", "hook_v", "hook_scores", "hook_mask", "hook_masked_scores",
                "hook_pattern", "hook_z", "hook_out"]
    ffn = ["hook_ffn_hidden", "hook_ffn_out", "hook_ffn_sum", "hook_resid_post"]
    want = ["encoder.hook_embed", "encoder.hook_pos_embed"]
    for i in range(2):
        b = f"encoder.blocks.{i}"
        want += [f"{b}.hook_resid_pre"] + [f"{b}.self_attn.{h}" for h in per_attn]
        want += [f"{b}.hook_attn_sum", f"{b}.hook_resid_mid"] + [f"{b}.{h}" for h in ffn]
    want += ["decoder.hook_embed", "decoder.hook_pos_embed"]
    for i in range(2):
        b = f"decoder.blocks.{i}"
        want += [f"{b}.hook_resid_pre"] + [f"{b}.self_attn.{h}" for h in per_attn]
        want += [f"{b}.hook_attn_sum", f"{b}.hook_resid_mid"]
        want += [f"{b}.cross_attn.{h}" for h in per_attn]
        want += [f"{b}.hook_cross_sum", f"{b}.hook_resid_mid_cross"] + [f"{b}.{h}" for h in ffn]
    assert names == want


def test_block_hooks_are_post_layernorm_residual_blocks(m, run):
    """x -> LN(x + Attn(x)) [-> LN(x + Cross(x, encoder output))] -> LN(x + FFN(x)); the encoder's
    last stream is what every decoder layer's cross-attention reads as keys and values."""
    with torch.no_grad():
        check_post_layernorm_blocks(m, run[1])


def check_post_layernorm_blocks(m, cache):
    assert (m.info.norm, m.info.ffn, m.info.d_ff) == ("post-LayerNorm", "ReLU", m.cfg.d_ff)
    assert m.info.embed_scale == pytest.approx(math.sqrt(m.info.d_model)) and m.info.tied_output
    x = cache["encoder.hook_embed"] + cache["encoder.hook_pos_embed"]
    for stack in ("encoder", "decoder"):
        if stack == "decoder":
            x = cache["decoder.hook_embed"] + cache["decoder.hook_pos_embed"]
        for i, block in enumerate(getattr(m, stack).blocks):
            b = f"{stack}.blocks.{i}."
            assert torch.equal(cache[b + "hook_resid_pre"], x)
            s = cache[b + "hook_attn_sum"]
            assert torch.equal(s, x + cache[b + "self_attn.hook_out"])
            x = cache[b + "hook_resid_mid"]
            assert torch.allclose(x, block.ln1(s), atol=1e-6)
            if stack == "decoder":
                s = cache[b + "hook_cross_sum"]
                assert torch.equal(s, x + cache[b + "cross_attn.hook_out"])
                x = cache[b + "hook_resid_mid_cross"]
                assert torch.allclose(x, block.ln_cross(s), atol=1e-6)
            hidden = cache[b + "hook_ffn_hidden"]
            assert hidden.shape[-1] == m.info.d_ff and (hidden >= 0).all()  # after ReLU
            assert torch.allclose(block.ffn.hidden(x), hidden, atol=1e-6)
            assert torch.allclose(block.ffn.W_out(hidden), cache[b + "hook_ffn_out"], atol=1e-6)
            s = cache[b + "hook_ffn_sum"]
            assert torch.equal(s, x + cache[b + "hook_ffn_out"])
            x = cache[b + "hook_resid_post"]
            assert torch.allclose(x, block.ln2(s), atol=1e-6)
    memory = cache[f"encoder.blocks.{m.info.n_layers - 1}.hook_resid_post"]
    for i, block in enumerate(m.decoder.blocks):
        k = cache[f"decoder.blocks.{i}.cross_attn.hook_k"]  # (B, h, S, d_k) from the encoder output
        want = block.cross_attn.W_K(memory).view(*memory.shape[:2], m.info.n_heads, -1).transpose(1, 2)
        assert torch.allclose(k, want, atol=1e-5)


def test_shapes_follow_the_contract(m, run):
    out, cache = run
    B = len(SENTENCES)
    S = max(len(t) for t in cache.tokens)
    T = max(len(t) for t in cache.decoder_tokens)
    H, dh, d = m.info.n_heads, m.info.d_head, m.info.d_model
    assert cache["encoder.hook_embed"].shape == (B, S, d)
    assert cache["encoder.hook_pos_embed"].shape == (1, S, d)
    assert cache["encoder.blocks.0.self_attn.hook_q"].shape == (B, H, S, dh)
    assert cache["encoder.blocks.0.self_attn.hook_mask"].shape == (B, 1, S, S)
    assert cache["decoder.blocks.0.cross_attn.hook_pattern"].shape == (B, H, T, S)
    assert cache["decoder.blocks.0.cross_attn.hook_out"].shape == (B, T, d)
    assert cache["decoder.blocks.1.hook_resid_post"].shape == (B, T, d)
    assert out.logits.shape == (B, T, m.info.vocab_size)
    assert len(out.generated) == B
    assert [len(i) for i in cache.token_ids] == [len(t) for t in cache.tokens]


def test_embedding_is_scaled_by_sqrt_d_model(m):
    _, cache = m.run_with_cache(["ab"])
    ids = torch.tensor(cache.token_ids[0])
    want = m.embedding.weight[ids] * math.sqrt(m.info.d_model)
    assert torch.allclose(cache["encoder.hook_embed"][0], want)


def test_tokenizer_covers_ascii_and_hangul_and_marks_unknowns(m):
    tt = m.tokenizer
    text = "".join(chr(c) for c in range(0x20, 0x7F)) + "가힣한글"
    enc = tt.encode([text])[0]
    assert "<unk>" not in enc.tokens
    assert enc.tokens[:-1] == list(text) and enc.tokens[-1] == "</s>"
    odd = tt.encode(["a😀\x07b"])[0]
    assert odd.tokens == ["a", "<unk>", "<unk>", "b", "</s>"]
    assert odd.offsets[1] == (1, 2)


def test_random_variant_takes_the_class_settings():
    small = model.load("seed", random=True, d_model=32, n_heads=2, n_layers=1, n_decoder_layers=3,
                       pe_base=100, seed=1)
    assert (small.info.d_model, small.info.n_heads, small.info.n_layers) == (32, 2, 1)
    assert small.info.n_decoder_layers == 3 and small.info.positional_base == 100
    _, cache = small.run_with_cache(["hi there"])
    assert cache["encoder.blocks.0.self_attn.hook_q"].shape[-1] == 16
    assert torch.allclose(cache["encoder.hook_pos_embed"][0], sinusoidal(len(cache.tokens[0]), 32, 100))
    again = model.load("seed", random=True, d_model=32, n_heads=2, n_layers=1, n_decoder_layers=3,
                       pe_base=100, seed=1)
    assert torch.equal(again.embedding.weight, small.embedding.weight)
    with pytest.raises(ValueError):
        model.load("seed", random=True, d_model=30, n_heads=4)
    with pytest.raises(TypeError):
        model.load("seed", random=True, colour="blue")


def test_bad_inputs_are_refused_clearly(m):
    with pytest.raises(ValueError):
        m.run_with_cache([])
    with pytest.raises(TypeError):
        m.run_with_cache([1, 2])
    with pytest.raises(KeyError, match="unknown hook"):
        m.run_with_cache(["a"], names=["nope"])
    out, cache = m.run_with_cache([""])  # empty sentence: just </s>
    assert cache.tokens == [["</s>"]]
    with pytest.raises(model.WeightsError, match="unknown model"):
        model.load("../../etc/passwd-not-a-model")


@pytest.mark.parametrize("cfg", [dict(), dict(d_model=32, n_heads=2, n_layers=1, n_decoder_layers=3, d_ff=48, max_len=40)])
def test_n_floats_is_what_the_model_allocates(cfg):
    """The loader's size check before building a seed model (model/files/seed_weights.py) counts exactly
    the parameters and the sinusoidal table."""
    from model.arch.seed import Seed, SeedConfig

    c = SeedConfig.from_dict(cfg)
    m = Seed(c)
    allocated = sum(p.numel() for p in m.parameters()) + sum(b.numel() for b in m.buffers())
    assert c.n_floats() == allocated
