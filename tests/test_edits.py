"""What-if edits (model/runtime/edits.py): the string form, and what each edit does to the tensors.

Every edit is checked on the tensors of an edited run against the intact run, on the shipped
seed model, a small random seed model, and the tiny BERT and Llama checkpoints that
test_pretrained_tiny.py writes (and on MiniLM / SmolLM2 when fetched).
"""
from __future__ import annotations

import math
import threading

import float32
import pytest
import torch

import model
from model import fetch
from model.files.tokenizer import decode_chars
from model.runtime import edits as E
from model.runtime.edits import Ablate, EditError, Edits, NoCausal, NoPadding, NoPosition, Scale, Temperature, parse
from model.runtime.hooks import hooks
from test_pretrained_tiny import BERT_CFG, bert_state, bert_tokenizer, write_llama_gguf

PHRASE = "attention is all you need"


# --- models ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seed():
    return model.load("seed")


@pytest.fixture(scope="module")
def small():
    return model.load("seed", random=True, d_model=32, n_heads=2, n_layers=1, n_decoder_layers=1, seed=5)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny BERT and Llama of test_pretrained_tiny.py (their float cache in a temp folder)."""
    import json

    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("tiny")
    folder = root / "tiny-bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BERT_CFG))
    save_file(bert_state(), str(folder / "model.safetensors"))
    bert_tokenizer().save(str(folder / "tokenizer.json"))
    write_llama_gguf(root / "tiny-llama.gguf")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(fetch.ENV_VAR, str(root / "cache"))
        return {"bert": model.load(folder), "llama": model.load(root / "tiny-llama.gguf")}


@pytest.fixture(scope="module")
def bert(tiny):
    return tiny["bert"]


@pytest.fixture(scope="module")
def llama(tiny):
    return tiny["llama"]


def fetched(name):
    if not fetch.is_fetched(name):
        pytest.skip(f"{name} weights not fetched (run `{fetch.fetch_command(name)}`)")
    return model.load(name)


def entropy(p: torch.Tensor) -> torch.Tensor:
    return -(p * p.clamp_min(1e-30).log()).sum(-1)


# --- the string form --------------------------------------------------------------------------
def test_parse_is_canonical_and_round_trips():
    a = parse(" temperature=2 ,no_causal,, ablate=decoder.cross_attn:1:2,ablate=decoder.cross_attn:1:*,"
              "No_Scale, no_causal")
    assert str(a) == "no_scale,temperature=2,no_causal,ablate=decoder.cross_attn:1:*"
    b = parse("ablate=decoder.cross_attn:1:*,no_causal,temperature=2.0,scale=1")
    assert a == b and hash(a) == hash(b) and parse(str(a)) == a
    assert E.format([NoCausal(), Temperature(2), Scale(), Ablate("decoder.cross_attn", 1)]) == str(a)
    assert E.as_edits([NoCausal(), "temperature=2,no_scale", Ablate("decoder.cross_attn", 1, None)]) == a
    for text in ["", "no_position", "scale=0.125", "temperature=0.001", "temperature=1000", "scale=3.3e-2",
                 "ablate_mean=encoder.self_attn:0:3,ablate=encoder.self_attn:0:1,no_padding",
                 "no_position,no_scale,temperature=1.5,no_padding,no_causal,ablate=encoder.self_attn:1:0,"
                 "ablate=decoder.self_attn:0:*,ablate_mean=decoder.cross_attn:1:3"]:
        e = parse(text)
        assert parse(str(e)) == e and str(parse(str(e))) == str(e)
    assert str(parse("scale=.5")) == "scale=0.5" and parse("scale=0.50") == parse("scale=5e-1")
    assert not parse("") and parse("") == Edits() == E.as_edits(None) and str(Edits()) == ""
    keys = sorted([parse("no_causal"), parse(""), parse("temperature=2"), parse("no_position,no_causal")])
    assert keys[0] == Edits() and len({*keys, parse("no_causal")}) == 4  # sortable and hashable


@pytest.mark.parametrize("text, message", [
    ("no_casual", "did you mean no_causal"),
    ("ablate_all", "unknown edit"),
    ("temperature=abc", "not a number"),
    ("temperature=nan", "not a number"),
    ("temperature=inf", "not a number"),
    ("temperature=1_0", "not a number"),
    ("temperature=-1", "not a number"),
    ("temperature=0", "out of bounds"),
    ("temperature=1e4", "out of bounds"),
    ("scale=0.0001", "out of bounds"),
    ("scale=", "needs a value"),
    ("no_causal=1", "takes no value"),
    ("ablate=decoder.crossattn:1:2", "did you mean decoder.cross_attn"),
    ("ablate=decoder.cross_attn:1", "BLOCK:LAYER:HEAD"),
    ("ablate=decoder.cross_attn:-1:2", "layer must be"),
    ("ablate=decoder.cross_attn:1:x", "head must be"),
    ("scale=2,scale=3", "one scale only"),
    ("no_scale,scale=3", "one scale only"),
    ("ablate=encoder.self_attn:0:*,ablate_mean=encoder.self_attn:0:1", "same head"),
    ("ablate=encoder.self_attn:0:1,ablate_mean=encoder.self_attn:0:1", "same head"),
    ("no_causal," * 400, "characters long"),
])
def test_parse_errors_are_clear(text, message):
    with pytest.raises(EditError, match=message):
        parse(text)


def test_edit_objects_validate_themselves():
    with pytest.raises(EditError, match="out of bounds"):
        Temperature(float("nan"))
    with pytest.raises(EditError, match="needs a number"):
        Scale("2")
    with pytest.raises(EditError, match="unknown block"):
        Ablate("decoder.ffn", 0, 0)
    with pytest.raises(EditError, match="layer must be"):
        Ablate("encoder.self_attn", True, 0)
    with pytest.raises(TypeError, match="not an edit"):
        E.as_edits([NoCausal(), 3])
    with pytest.raises(TypeError, match="parse"):
        Edits("no_causal")
    assert Scale(2) == Scale(2.0)
    assert hash(Ablate("encoder.self_attn", 0)) == hash(Ablate("encoder.self_attn", 0, None))
    assert E.as_edits([NoPosition(), NoPadding()]) == parse("no_padding,no_position")


def test_edits_are_checked_against_the_model(seed, bert, llama):
    cases = [
        (seed, "ablate=decoder.cross_attn:2:0",
         r"layer 2 is out of range; seed's decoder.cross_attn has layers 0–1"),
        (seed, "ablate=encoder.self_attn:0:4", r"head 4 is out of range; seed has heads 0–3"),
        (bert, "ablate=decoder.cross_attn:0:0",
         r"has no decoder.cross_attn; its blocks are encoder.self_attn"),
        (llama, "ablate=encoder.self_attn:0:*", r"its blocks are decoder.self_attn"),
    ]
    for m, text, message in cases:
        with pytest.raises(EditError, match=message):
            m.run_with_cache(["abc"], edits=text)
        with pytest.raises(EditError, match=message):
            m.run(["abc"], edits=text)
    out, cache = seed.run_with_cache(["abc"])  # the intact run still works
    assert out.generated == ["cba"] and cache.edits == ""


# --- what each edit does ------------------------------------------------------------------------
def test_no_causal_puts_weight_above_the_diagonal(seed, llama):
    texts = [PHRASE, "hi"]
    _, intact = seed.run_with_cache(texts)
    _, edited = seed.run_with_cache(texts, edits="no_causal")
    assert edited.edits == "no_causal"
    for cache in (intact, edited):
        p = cache["decoder.blocks.0.self_attn.hook_pattern"][0]  # the long sentence: (h, T, T)
        assert (p.triu(1).sum() > 1.0) == (cache is edited)
    for cache in (intact, edited):  # padding still hides the short sentence's pad keys
        n = len(cache.decoder_token_ids[1])
        assert not cache["decoder.blocks.1.self_attn.hook_mask"][1, 0, :, n:].any()
    # the tiny llama: every real key is visible to every query
    _, c = llama.run_with_cache(["the cat sat on the mat.", "a dog"], edits="no_causal")
    n = len(c.token_ids[1])
    mask = c["decoder.blocks.0.self_attn.hook_mask"]
    assert mask[0].all() and mask[1, 0, :, :n].all() and not mask[1, 0, :, n:].any()
    assert c["decoder.blocks.1.self_attn.hook_pattern"][0].triu(1).sum() > 1.0


def test_mask_edits_split_padding_from_causal_on_a_padded_batch(seed):
    texts = ["abcdefgh", "ab", "abcde"]
    runs = {e: seed.run_with_cache(texts, edits=e)[1]
            for e in ("", "no_padding", "no_causal", "no_padding,no_causal")}
    for e, c in runs.items():
        T = max(len(d) for d in c.decoder_token_ids)
        real = torch.tensor([[j < len(d) for j in range(T)] for d in c.decoder_token_ids])  # (B, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        want = {"": real[:, None, :] & causal, "no_padding": causal.expand(len(texts), T, T),
                "no_causal": real[:, None, :].expand(-1, T, -1),
                "no_padding,no_causal": torch.ones(len(texts), T, T, dtype=torch.bool)}[e]
        for i in range(2):
            assert torch.equal(c[f"decoder.blocks.{i}.self_attn.hook_mask"][:, 0], want), (e, i)
        S = max(len(t) for t in c.tokens)
        src = torch.tensor([[j < len(t) for j in range(S)] for t in c.tokens])
        for name in ("encoder.blocks.0.self_attn", "decoder.blocks.0.cross_attn"):
            m = c[f"{name}.hook_mask"][:, 0]  # (B, Tq, S)
            assert torch.equal(m, src[:, None, :].expand_as(m) | ("no_padding" in e)), (e, name)


def test_no_padding_makes_the_short_sentence_differ_from_itself_alone(seed, small, bert, llama):
    long, short = "a considerably longer sentence here", "short"
    for m, stack in [(seed, "encoder"), (small, "encoder"), (bert, "encoder")]:
        for e in ("", "no_padding"):
            _, alone = m.run_with_cache([short], edits=e)
            _, batch = m.run_with_cache([long, short], edits=e)
            n = len(alone.token_ids[0])
            last = f"{stack}.blocks.{m.info.n_layers - 1}.hook_resid_post"
            same = float32.close(batch[last][1, :n], alone[last][0], m.info)  # two runs (tests/float32.py)
            assert same == (e == ""), (m.info.name, e)
    # in the seed model the padded encoder also changes what the decoder writes
    intact = seed.run(["hello there", "hi"]).generated
    assert intact == ["ereht olleh", "ih"]
    assert seed.run(["hello there", "hi"], edits="no_padding").generated[1] != "ih"
    # a right-padded causal decoder never looks at its pad keys from a real position, so
    # no_padding changes only the pad rows of llama
    _, alone = llama.run_with_cache(["a dog"], edits="no_padding")
    _, batch = llama.run_with_cache(["the cat sat on the mat.", "a dog"], edits="no_padding")
    n = len(alone.token_ids[0])
    last = "decoder.blocks.1.hook_resid_post"
    assert float32.close(batch[last][1, :n], alone[last][0], llama.info)
    assert batch["decoder.blocks.0.self_attn.hook_pattern"][1, :, n:, n:].sum() > 0  # pad rows see pad keys


def test_temperature_divides_the_scores_and_raises_the_entropy(seed, llama):
    for m, name in [(seed, "encoder.blocks.0.self_attn"), (llama, "decoder.blocks.0.self_attn")]:
        texts = [PHRASE, "a dog"]
        _, intact = m.run_with_cache(texts)
        _, hot = m.run_with_cache(texts, edits="temperature=2.5")
        _, cold = m.run_with_cache(texts, edits=[Temperature(0.5)])
        masked = intact[f"{name}.hook_masked_scores"]  # layer 0: the same inputs in every run
        for cache, t in ((hot, 2.5), (cold, 0.5)):
            assert torch.equal(cache[f"{name}.hook_scores"], intact[f"{name}.hook_scores"] / t)
            assert torch.allclose(cache[f"{name}.hook_pattern"], torch.softmax(masked / t, -1), atol=1e-6)
        mask = intact[f"{name}.hook_mask"].expand_as(masked)
        rows = mask.sum(-1) > 1  # rows with a choice to make
        h0, h_hot, h_cold = (entropy(c[f"{name}.hook_pattern"])[rows] for c in (intact, hot, cold))
        assert (h_hot > h0 + 1e-6).all()
        # some rows are one-hot already: they cannot get sharper
        assert (h_cold <= h0 + 1e-7).all() and h_cold.mean() < h0.mean() - 0.1


def test_scale_replaces_one_over_sqrt_dk(seed, bert):
    for m, name in [(seed, "encoder.blocks.0.self_attn"), (bert, "encoder.blocks.0.self_attn")]:
        for e, x in (("no_scale", 1.0), ("scale=0.05", 0.05)):
            _, c = m.run_with_cache([PHRASE], edits=e)
            q, k = c[f"{name}.hook_q"], c[f"{name}.hook_k"]
            assert torch.allclose(c[f"{name}.hook_scores"], q @ k.transpose(-2, -1) * x, rtol=1e-5, atol=1e-5)
            want = torch.softmax(q @ k.transpose(-2, -1) * x, -1)
            assert torch.allclose(c[f"{name}.hook_pattern"], want, atol=1e-6)
    assert seed.run([PHRASE], edits="no_scale").generated != seed.run([PHRASE]).generated


def test_ablate_zeroes_that_head_and_changes_the_output(seed, bert, llama):
    texts = [PHRASE, "hi"]
    for m, name, field in [(seed, "encoder.blocks.1.self_attn", "logits"),
                           (bert, "encoder.blocks.1.self_attn", "hidden"),
                           (llama, "decoder.blocks.1.self_attn", "logits")]:
        block = f"{name.split('.')[0]}.self_attn"
        out0, c0 = m.run_with_cache(texts)
        out, c = m.run_with_cache(texts, edits=f"ablate={block}:1:1")
        z0, z = c0[f"{name}.hook_z"], c[f"{name}.hook_z"]
        assert (z[:, 1] == 0).all() and z0[:, 1].abs().sum() > 0
        keep = [h for h in range(m.info.n_heads) if h != 1]
        assert torch.allclose(z[:, keep], z0[:, keep], atol=1e-6)  # upstream is untouched
        a, b = getattr(out0, field), getattr(out, field)
        assert a.shape != b.shape or not torch.allclose(a, b, atol=1e-4)
        _, c = m.run_with_cache(texts, edits=f"ablate={block}:1:*")
        assert (c[f"{name}.hook_z"] == 0).all()


def test_ablate_mean_is_the_mean_over_real_positions(seed):
    texts = [PHRASE, "hi"]
    _, c0 = seed.run_with_cache(texts)
    _, c = seed.run_with_cache(texts, edits="ablate_mean=encoder.self_attn:1:2")
    z0, z = c0["encoder.blocks.1.self_attn.hook_z"], c["encoder.blocks.1.self_attn.hook_z"]
    for b, toks in enumerate(c.tokens):
        want = z0[b, 2, : len(toks)].mean(0)  # the sentence's own positions, not its padding
        assert torch.allclose(z[b, 2], want.expand_as(z[b, 2]), atol=1e-6)
    assert torch.equal(z[:, [0, 1, 3]], z0[:, [0, 1, 3]])


def test_seed_decodes_greedily_with_the_edits_and_shows_its_own_output(seed):
    texts = [PHRASE, "hello world"]
    intact = seed.run(texts).generated
    for e in ("ablate=decoder.cross_attn:1:0", "ablate=decoder.cross_attn:1:*", "no_position",
              "temperature=4", "no_scale", "ablate_mean=decoder.cross_attn:1:*"):
        out, cache = seed.run_with_cache(texts, edits=e)
        assert out.generated != intact, e
        assert seed.run(texts, edits=e).generated == out.generated, e
        max_new = min(max(len(t) for t in cache.token_ids) + 8, seed.cfg.max_len - 1)
        for b, text in enumerate(out.generated):
            ids = cache.decoder_token_ids[b]  # <s> + what the edited model wrote
            assert ids[0] == seed.cfg.bos_id and decode_chars(seed.tokenizer, ids[1:]) == text
            if e.startswith("ablate_mean"):  # a mean over positions lets a step see later ones
                continue
            # the teacher-forced pass over the edited model's own output predicts that output
            pred = out.logits[b, : len(ids)].argmax(-1).tolist()
            assert pred[:-1] == ids[1:], e
            assert pred[-1] == seed.cfg.eos_id or len(ids) - 1 == max_new, e


def test_no_position_makes_the_encoder_permutation_equivariant(seed, small, bert):
    text, perm = "abcdefg", [3, 0, 6, 1, 5, 2, 4]
    permuted = "".join(text[i] for i in perm)
    for m in (seed, small):
        last = f"encoder.blocks.{m.info.n_layers - 1}.hook_resid_post"
        for e in ("", "no_position"):
            _, a = m.run_with_cache([text], edits=e)
            _, b = m.run_with_cache([permuted], edits=e)
            x, y = a[last][0], b[last][0]  # (S, d); the last row is </s>
            equivariant = (torch.allclose(y[:-1], x[perm], atol=1e-5)
                           and torch.allclose(y[-1], x[-1], atol=1e-5))
            assert equivariant == (e == "no_position"), (m.info.name, e)
        _, c = m.run_with_cache([text], edits="no_position")
        assert (c["encoder.hook_pos_embed"] == 0).all() and (c["decoder.hook_pos_embed"] == 0).all()
    words = "the cat sat on a mat .".split()
    order = [4, 1, 6, 0, 2, 5, 3]
    for e in ("", "no_position"):
        _, a = bert.run_with_cache([" ".join(words)], edits=e)
        _, b = bert.run_with_cache([" ".join(words[i] for i in order)], edits=e)
        x, y = a["encoder.blocks.1.hook_resid_post"][0], b["encoder.blocks.1.hook_resid_post"][0]
        rows = [0] + [i + 1 for i in order] + [len(words) + 1]  # [CLS] ... [SEP] stay in place
        assert torch.allclose(y, x[rows], atol=1e-5) == (e == "no_position")


def test_no_position_undoes_rotary(llama, monkeypatch):
    from model.arch.parts import Rotary

    texts = ["the cat sat on the mat.", "a dog"]
    out, cache = llama.run_with_cache(texts, edits="no_position")
    right = Rotary.__init__

    def no_rotation(self, *args, **kwargs):
        right(self, *args, **kwargs)
        self.cos, self.sin = torch.ones_like(self.cos), torch.zeros_like(self.sin)

    with monkeypatch.context() as mp:
        mp.setattr(Rotary, "__init__", no_rotation)
        ref_out, ref = llama.run_with_cache(texts)  # the same llama, built without rotation
    assert torch.allclose(out.logits, ref_out.logits, atol=1e-4)
    for n in ("hook_q", "hook_k", "hook_scores"):
        name = f"decoder.blocks.1.self_attn.{n}"
        assert torch.allclose(cache[name], ref[name], atol=1e-5)
    assert not torch.allclose(llama.run(texts).logits, ref_out.logits, atol=1e-3)
    # with no positions and no causal mask, the decoder cannot tell the order of its input
    perm = [3, 0, 5, 1, 4, 2]
    for e in ("no_causal", "no_position,no_causal"):
        a = llama.run_with_cache(["abcxyz"], edits=e)[1]
        b = llama.run_with_cache(["".join("abcxyz"[i] for i in perm)], edits=e)[1]
        assert b.token_ids[0] == [a.token_ids[0][i] for i in perm]
        x, y = a["decoder.blocks.1.hook_resid_post"][0], b["decoder.blocks.1.hook_resid_post"][0]
        assert torch.allclose(y, x[perm], atol=1e-5) == (e == "no_position,no_causal")


# --- composition, isolation -------------------------------------------------------------------------
def test_capture_sees_the_edited_tensor_and_user_hooks_compose(small):
    name = "encoder.hook_pos_embed"
    _, c = small.run_with_cache(["abc"], names=[name], edits="no_position")
    assert list(c) == [name] and (c[name] == 0).all()
    seen = []
    with hooks({name: lambda x, n: seen.append(x.abs().sum().item())}):
        small.run(["abc"], edits="no_position")
    assert seen and all(s == 0 for s in seen)  # the caller's hook runs after the edit


def test_the_shared_model_is_never_changed(seed):
    before = {k: v.clone() for k, v in seed.state_dict().items()}
    out0, c0 = seed.run_with_cache([PHRASE, "hi"])
    seed.run_with_cache([PHRASE, "hi"], edits="no_position,no_padding,no_causal,temperature=3,scale=2,"
                        "ablate=decoder.cross_attn:1:*,ablate_mean=encoder.self_attn:0:1")
    out1, c1 = seed.run_with_cache([PHRASE, "hi"])
    assert all(torch.equal(v, seed.state_dict()[k]) for k, v in before.items())
    assert out0.generated == out1.generated and all(torch.equal(c0[n], c1[n]) for n in c0)


def test_edits_never_leak_into_other_threads(seed):
    """Threads running the one shared model at once, with and without edits, get exactly what
    the same runs give one after another."""
    jobs = [(["thread one", "x"], ""),
            (["thread one", "x"], "no_causal,no_padding,temperature=3,ablate=decoder.cross_attn:0:*"),
            (["another sentence 문장"], "no_position,ablate_mean=encoder.self_attn:0:1"),
            (["another sentence 문장"], "")]
    want = [seed.run_with_cache(t, edits=e) for t, e in jobs]
    assert want[0][0].generated == ["eno daerht", "x"] != want[1][0].generated  # the edits do change the run
    assert want[3][0].generated != want[2][0].generated
    errors, mismatches = [], []
    barrier = threading.Barrier(len(jobs))

    def work(i):
        texts, e = jobs[i]
        try:
            barrier.wait()
            for _ in range(12):
                out, cache = seed.run_with_cache(texts, edits=e)
                if out.generated != want[i][0].generated or cache.edits != str(parse(e)) or any(
                        not torch.equal(cache[n], want[i][1][n]) for n in want[i][1]):
                    mismatches.append(i)
        except Exception as ex:  # pragma: no cover - reported below
            errors.append(ex)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not mismatches


# --- the real models ---------------------------------------------------------------------------------
@pytest.mark.weights
def test_minilm_sentence_embedding_moves_under_edits():
    m = fetched("minilm")
    texts = ["The cat sat on the mat.", "A dog"]

    def embed(out, cache):
        real = torch.tensor([[j < len(t) for j in range(out.hidden.shape[1])] for t in cache.token_ids])
        v = (out.hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True)
        return torch.nn.functional.normalize(v, dim=-1)

    base = embed(*m.run_with_cache(texts))
    for e in ("no_position", "ablate=encoder.self_attn:0:*", "no_padding"):
        cos = (embed(*m.run_with_cache(texts, edits=e)) * base).sum(-1)
        assert (cos < 1 - 1e-4).any() and (cos > -1).all(), e


@pytest.mark.weights
def test_smollm2_edits_change_the_next_token_distribution():
    m = fetched("smollm2")
    text = ["The capital of France is"]
    logp0 = torch.log_softmax(m.run(text).logits[0, -1], -1)
    for e in ("no_causal", "no_position", "temperature=4", "ablate=decoder.self_attn:0:*"):
        out, cache = m.run_with_cache(text, edits=e, names=["decoder.blocks.0.self_attn.hook_pattern"])
        logp = torch.log_softmax(out.logits[0, -1], -1)
        kl = (logp0.exp() * (logp0 - logp)).sum().item()
        assert math.isfinite(kl) and kl > 1e-3, e
    p = m.run_with_cache(text, edits="no_causal", names=["decoder.blocks.0.self_attn.hook_pattern"])[1]
    assert p["decoder.blocks.0.self_attn.hook_pattern"][0].triu(1).sum() > 1
