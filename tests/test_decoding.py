"""Incremental decoding with a key/value cache (``generate_with_cache``), proved against a full
recomputation: at every step, every decoder hook of the cached step equals the matching row of a
pass that recomputes every earlier position over the same tokens (``use_cache=False``), the same
token is chosen, for the seed encoder–decoder (both shipped weights), a tiny random Llama written
here, and (marked ``weights``) the real SmolLM2; padded batches whose sentences finish at different
steps; the seed's ``run_with_cache`` writes what the uncached greedy decoding wrote. A deliberately
wrong position offset, and a cache that loses the newest key, are shown to be caught.
"""
from __future__ import annotations

import dataclasses

import json
import random
from pathlib import Path

import float32
import pytest
import torch
from safetensors.torch import save_file
from test_pretrained_tiny import BERT_CFG, bert_state, bert_tokenizer, reference_llama, write_llama_gguf

import model
from model import fetch
from model.arch.parts import KVCache
from model.files.tokenizer import HANGUL_SYLLABLES, PRINTABLE_ASCII, decode_chars
from model.train import sample_input

# absolute for weights (≤ 1); for other tensors, relative to the tensor's largest entry. float32
# rounding alone differs between batch shapes (matmul blocking): up to 1.4e-5 of the largest entry
# measured on the shipped reverse weights (a padded batch against each sentence alone); a wrong
# position, cache row or mask is off by 1e-2 or more.
TOL = 5e-5
KEY_LAST = ("hook_scores", "hook_mask", "hook_masked_scores", "hook_pattern")  # (B, nh, q, k)
KEYS = ("hook_k", "hook_v")  # (B, nh, k, hs)
SEED_TEXTS = ["hello world", "안녕하세요, 어텐션!", "a", "attention is all you need"]
SORT_TEXTS = ["banana", "transformer", "abc", "zebra"]
LLAMA_TEXTS = ["the cat sat on the mat.", "a dog", "나는 cat 123", "12"]
NATURAL = [s for s in (Path(__file__).parent / "data" / "natural_sentences.txt")
           .read_text("utf-8").splitlines() if s.strip()]


# --- the comparison ---------------------------------------------------------------------------
def rows(y: torch.Tensor, name: str, q: slice, n_keys: int | None = None) -> torch.Tensor:
    """The query rows ``q`` (and, for self-attention, the first ``n_keys`` keys) of a hook
    tensor of a full pass, laid out as the contract says."""
    hook = name.rsplit(".", 1)[1]
    keys = slice(None) if n_keys is None or "cross_attn" in name else slice(n_keys)
    if hook in KEYS:
        return y[:, :, keys]
    if hook in KEY_LAST:
        return y[:, :, q, keys]
    if y.dim() == 4:  # hook_q, hook_z: (B, nh, T, hs)
        return y[:, :, q]
    return y[:, q]  # (B or 1, T, d): embeddings, attention outputs, the stream


def mismatches(got: dict, full: dict, q: slice, n_keys: int | None = None) -> list[str]:
    """Where a cached pass's hooks differ from the matching rows of a full pass (empty: none)."""
    bad = []
    assert got.keys() == full.keys() and got, "the two passes captured different hooks"
    for name, x in got.items():
        y = rows(full[name], name, q, n_keys)
        if x.shape != y.shape:
            bad.append(f"{name}: shape {tuple(x.shape)} != {tuple(y.shape)}")
        elif x.dtype == torch.bool:
            if not torch.equal(x, y):
                bad.append(f"{name}: mask differs")
        elif not torch.equal(torch.isinf(x), torch.isinf(y)) or not torch.equal(x[x.isinf()], y[y.isinf()]):
            bad.append(f"{name}: −inf entries differ")
        else:
            finite = ~x.isinf()
            err = (x - y)[finite].abs().max().item() if finite.any() else 0.0
            scale = max(1.0, y[finite].abs().max().item()) if finite.any() else 1.0
            if not err <= TOL * scale:
                bad.append(f"{name}: max difference {err:.2e} (scale {scale:.3g})")
    return bad


def step_mismatches(cached, full) -> list[str]:
    """Every step of a cached trace against the same step recomputed in full."""
    assert len(cached) == len(full)
    bad = []
    for t, (got, ref) in enumerate(zip(cached.steps, full.steps)):
        bad += [f"step {t}: {b}" for b in mismatches(got, ref, slice(-1, None))]
    return bad


def assert_same_decoding(cached, full) -> None:
    """The same tokens, step by step; the same candidates with the same probabilities."""
    assert cached.use_cache and not full.use_cache
    assert cached.token_ids == full.token_ids and cached.generated == full.generated
    assert cached.decoder_token_ids == full.decoder_token_ids and cached.query == full.query
    assert torch.equal(cached.active, full.active)
    for t, (a, b) in enumerate(zip(cached.top, full.top)):
        assert torch.equal(a.chosen, b.chosen), t
        assert torch.equal(a.ids, b.ids), t
        assert torch.allclose(a.probs, b.probs, atol=TOL), t
    assert step_mismatches(cached, full) == []


def finish_steps(trace) -> list[int]:
    """Per sentence, the number of steps it was writing at."""
    return trace.active.sum(0).tolist()


# --- models -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seed():
    return model.load("seed")


@pytest.fixture(scope="module")
def sort():
    return model.load("seed-sort")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """The tiny random Llama GGUF of test_pretrained_tiny (its conversion in a temporary cache)."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(fetch.ENV_VAR, str(folder / "cache"))
        hf = write_llama_gguf(folder / "tiny.gguf")
        m = model.load(folder / "tiny.gguf")
    return m, hf


@pytest.fixture
def llama(tiny_llama):
    """The tiny Llama, with an end token it actually writes (sentence 1's third token), so that
    the sentences of a batch finish at different steps; the random weights rarely write the
    file's own end token."""
    m, _ = tiny_llama
    family = m.family
    free = m.generate_with_cache(LLAMA_TEXTS, 12)
    m.family = dataclasses.replace(family, eos_ids=(free.token_ids[1][2],))
    yield m
    m.family = family


# --- the seed encoder–decoder ------------------------------------------------------------------
@pytest.mark.parametrize("which, texts", [("seed", SEED_TEXTS), ("sort", SORT_TEXTS)])
def test_seed_cached_steps_equal_full_recomputation(request, which, texts):
    m = request.getfixturevalue(which)
    cached = m.generate_with_cache(texts)
    full = m.generate_with_cache(texts, use_cache=False)
    assert_same_decoding(cached, full)
    assert len(set(finish_steps(cached))) > 1  # a padded batch whose sentences stop at different steps
    assert mismatches(cached.prompt, full.prompt, slice(None)) == []  # the encoder, run once


def test_seed_step_shapes(seed):
    tr = seed.generate_with_cache(SEED_TEXTS)
    B, H, hs, d = len(SEED_TEXTS), seed.info.n_heads, seed.info.d_head, seed.info.d_model
    S = max(len(ids) for ids in tr.input_token_ids)
    assert tr.prompt["encoder.blocks.0.self_attn.hook_pattern"].shape == (B, H, S, S)
    assert not any(n.startswith("decoder.") for n in tr.prompt)
    assert tr.query == list(range(len(tr)))
    for t, step in enumerate(tr.steps):
        assert set(step) == {n for n in seed.hook_names if n.startswith("decoder.")}
        for i in range(seed.info.n_decoder_layers):
            a = f"decoder.blocks.{i}."
            assert step[a + "self_attn.hook_q"].shape == (B, H, 1, hs)
            assert step[a + "self_attn.hook_k"].shape == (B, H, t + 1, hs)  # the tokens so far
            assert step[a + "self_attn.hook_pattern"].shape == (B, H, 1, t + 1)
            assert step[a + "self_attn.hook_mask"].shape == (B, 1, 1, t + 1)
            assert step[a + "cross_attn.hook_pattern"].shape == (B, H, 1, S)  # the source
            assert step[a + "hook_resid_post"].shape == (B, 1, d)
            assert torch.allclose(step[a + "self_attn.hook_pattern"].sum(-1), torch.ones(B, H, 1), atol=1e-6)
        assert torch.equal(step["decoder.hook_pos_embed"][0, 0], seed.decoder.pe[t])  # position t
    assert tr.positions.shape == (B, len(tr) + 1)
    for b in range(B):
        assert len(tr.decoder_tokens[b]) == len(tr) + 1 and tr.decoder_tokens[b][0] == "<s>"
        assert tr.decoder_token_ids[b][1: 1 + len(tr.token_ids[b])] == tr.token_ids[b]
        assert tr.tokens[b][-1] == "</s>" and "".join(tr.tokens[b][:-1]) == tr.generated[b]


def test_seed_trace_rows_equal_run_with_cache(seed):
    """The trace against the app's existing contract: run_with_cache writes the same text and its
    one teacher-forced decoder pass has, row for row, what each step saw."""
    tr = seed.generate_with_cache(SEED_TEXTS)
    out, cache = seed.run_with_cache(SEED_TEXTS)
    assert tr.generated == out.generated == ["dlrow olleh", "!션텐어 ,요세하녕안", "a", "deen uoy lla si noitnetta"]
    for t, step in enumerate(tr.steps):
        for b in torch.nonzero(tr.active[t]).flatten().tolist():  # the steps sentence b wrote at
            got = {name: x[b: b + 1] for name, x in step.items()}
            full = {name: cache[name][b: b + 1] for name in step}
            assert mismatches(got, full, slice(t, t + 1), t + 1) == [], (t, b)


def test_seed_padded_batch_equals_each_sentence_alone(seed):
    batch = seed.generate_with_cache(SEED_TEXTS, 30)
    for b, text in enumerate(SEED_TEXTS):
        alone = seed.generate_with_cache([text], 30)
        S = len(alone.input_token_ids[0])
        assert alone.token_ids[0] == batch.token_ids[b]
        for t in range(len(alone)):
            for i in range(seed.info.n_decoder_layers):
                a = f"decoder.blocks.{i}."
                assert torch.allclose(batch.steps[t][a + "self_attn.hook_pattern"][b],
                                      alone.steps[t][a + "self_attn.hook_pattern"][0], atol=TOL)
                cross = batch.steps[t][a + "cross_attn.hook_pattern"][b]
                assert torch.allclose(cross[..., :S], alone.steps[t][a + "cross_attn.hook_pattern"][0], atol=TOL)
                assert (cross[..., S:] == 0).all()  # the source's pad keys


def random_strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pools = [PRINTABLE_ASCII, HANGUL_SYLLABLES, PRINTABLE_ASCII + HANGUL_SYLLABLES]
    return ["".join(rng.choice(p) for _ in range(rng.randint(1, 60))) for p in rng.choices(pools, k=n)]


@pytest.mark.parametrize("which", ["seed", "sort"])
def test_greedy_with_cache_writes_what_the_uncached_greedy_wrote(request, which):
    """run_with_cache's greedy decoding now uses the cache; its output is unchanged."""
    m = request.getfixturevalue(which)
    texts = NATURAL + random_strings(40, seed=14)
    for i in range(0, len(texts), 20):
        chunk = texts[i: i + 20]
        _, src, _, _ = m.source(chunk)
        max_new = min(src.shape[1] + 8, m.cfg.max_len - 1)  # as run_with_cache
        uncached = m.greedy(src, max_new, use_cache=False)
        assert m.greedy(src, max_new) == uncached
        assert m.run_with_cache(chunk)[0].generated == [decode_chars(m.tokenizer, g) for g in uncached]


def _counting_steps(m, monkeypatch) -> list[int]:
    """Count the cached decoding steps ``m`` runs from now on (its decoder's calls with a key/value cache)."""
    calls = [0]
    decode = m.decode

    def counted(*args, **kwargs):
        calls[0] += (len(args) > 4 and args[4] is not None) or kwargs.get("kv") is not None
        return decode(*args, **kwargs)

    monkeypatch.setattr(m, "decode", counted)
    return calls


@pytest.mark.parametrize("which", ["seed", "sort"])
def test_a_confirmed_draft_is_what_greedy_decoding_writes(request, monkeypatch, which):
    """run_with_cache first runs its hooked pass on what the weights' task asks for (the draft):
    the run equals plain greedy decoding whether the model writes the draft (then no decoding step
    runs at all) or not (decoding goes on from the last token it confirmed); in both, the argmax
    of the run's logits after each decoder token is the next token written, and </s> at the end."""
    m = request.getfixturevalue(which)
    steps = _counting_steps(m, monkeypatch)
    rng = random.Random(3)
    # the task's own inputs (mostly written as asked), natural text and random strings (often not)
    chunks = [[sample_input(m.cfg.task, rng) for _ in range(k)] for k in (1, 2, 3, 1, 2)]
    chunks += [NATURAL[i: i + 3] for i in range(0, 12, 3)] + [random_strings(2, seed=k) for k in range(12)]
    drafted = resumed = 0
    for chunk in chunks:
        _, src, _, _ = m.source(chunk)
        max_new = min(src.shape[1] + 8, m.cfg.max_len - 1)
        before = steps[0]
        plain = m.greedy(src, max_new, use_cache=False)  # recomputes every step: not counted
        assert steps[0] == before
        out, cache = m.run_with_cache(chunk)
        drafted += steps[0] == before
        resumed += steps[0] > before
        assert [ids[1:] for ids in cache.decoder_token_ids] == plain
        chosen = out.logits.argmax(-1)  # (B, T)
        for b, (ids, g) in enumerate(zip(cache.decoder_token_ids, plain)):
            n = len(ids)
            assert chosen[b, : n - 1].tolist() == ids[1:]
            if len(g) < max_new:  # it stopped because it chose </s>
                assert chosen[b, n - 1].item() == m.cfg.eos_id
    assert drafted >= 3 and resumed >= 3, (drafted, resumed)  # both ways were taken


def test_greedy_goes_on_from_tokens_already_written(seed):
    """greedy(start=...) writes what greedy decoding from <s> writes, from any known beginning:
    rows of different lengths, a row that already wrote </s>, a row with nothing known."""
    texts = ["hello world", "attention is all you need", "a", "안녕하세요"]
    _, src, _, _ = seed.source(texts)
    max_new = min(src.shape[1] + 8, seed.cfg.max_len - 1)
    full = seed.greedy(src, max_new)
    ended = [g + [seed.cfg.eos_id] for g in full]
    for cut in ([3, 10, 1, 0], [5, 5, 5, 5], [len(ended[0]), 2, len(ended[2]), 4]):
        start = [e[:k] for e, k in zip(ended, cut)]
        assert seed.greedy(src, max_new, start=start) == full, cut
    # a wrong beginning is written on, not corrected: the start is taken as written
    wrong = [[seed.tokenizer.tok.token_to_id("z")] * 4 for _ in texts]
    assert seed.greedy(src, max_new, start=wrong) != full


# --- the Llama decoder ---------------------------------------------------------------------------
def test_llama_cached_steps_equal_full_recomputation(llama):
    cached = llama.generate_with_cache(LLAMA_TEXTS, 12)
    full = llama.generate_with_cache(LLAMA_TEXTS, 12, use_cache=False)
    assert_same_decoding(cached, full)
    steps = finish_steps(cached)
    assert steps[1] == 3 and len(set(steps)) > 1, steps  # sentence 1 wrote its end token at step 2
    # the prompt but its last token, read once, against step 0 of the full recomputation
    P = max(len(ids) for ids in cached.input_token_ids)
    assert mismatches(cached.prompt, full.steps[0], slice(0, P - 1), P - 1) == []
    assert full.prompt == {}


def test_llama_step_shapes_and_left_padding(llama):
    tr = llama.generate_with_cache(LLAMA_TEXTS, 12)
    info, B = llama.info, len(LLAMA_TEXTS)
    lengths = [len(ids) for ids in tr.input_token_ids]
    P = max(lengths)
    assert tr.query == [P - 1 + t for t in range(len(tr))]
    for t, step in enumerate(tr.steps):
        for i in range(info.n_layers):
            a = f"decoder.blocks.{i}.self_attn."
            assert step[a + "hook_q"].shape == (B, info.n_heads, 1, info.d_head)
            assert step[a + "hook_k"].shape == (B, info.n_heads, P + t, info.d_head)
            assert step[a + "hook_pattern"].shape == (B, info.n_heads, 1, P + t)
            mask = step[a + "hook_mask"]
            for b, n in enumerate(lengths):  # the left pads are hidden; the prompt and the writing are not
                assert not mask[b, 0, 0, : P - n].any() and mask[b, 0, 0, P - n: P].all()
    for b, n in enumerate(lengths):
        assert tr.decoder_token_ids[b][P - n: P] == tr.input_token_ids[b]
        assert tr.positions[b, P - n:].tolist() == list(range(len(tr.positions[b]) - (P - n)))
        assert tr.input_tokens[b] == [llama.token_text(i) for i in tr.input_token_ids[b]]
    short = lengths.index(min(lengths))  # a pad query of the prompt has no key: a row of zeros
    pattern = tr.prompt["decoder.blocks.0.self_attn.hook_pattern"]
    assert (pattern[short, :, : P - lengths[short]] == 0).all()
    assert torch.allclose(pattern[short, :, P - lengths[short]:].sum(-1), torch.ones(1), atol=1e-6)


def test_llama_matches_the_independent_reference(llama, tiny_llama):
    """Each sentence's candidates at every step, against test_pretrained_tiny's reference Llama
    run on the unpadded sentence so far (its own rotary, positions from 0)."""
    _, hf = tiny_llama
    tr = llama.generate_with_cache(LLAMA_TEXTS, 12)
    for b in range(len(LLAMA_TEXTS)):
        for t in range(finish_steps(tr)[b]):
            ids = torch.tensor(tr.input_token_ids[b] + tr.token_ids[b][:t])
            probs = torch.softmax(reference_llama(hf, ids)[-1], -1)
            want_p, want_i = probs.topk(5)
            assert torch.equal(tr.top[t].ids[b], want_i), (b, t)
            assert torch.allclose(tr.top[t].probs[b], want_p, atol=1e-4), (b, t)
            assert tr.top[t].chosen[b].item() == tr.token_ids[b][t] == want_i[0].item()


def test_llama_padded_batch_equals_each_sentence_alone(llama):
    batch = llama.generate_with_cache(LLAMA_TEXTS, 12)
    P = max(len(ids) for ids in batch.input_token_ids)
    for b, text in enumerate(LLAMA_TEXTS):
        alone = llama.generate_with_cache([text], 12)
        pad = P - len(alone.input_token_ids[0])
        assert alone.token_ids[0] == batch.token_ids[b] and alone.generated[0] == batch.generated[b]
        for t in range(len(alone)):
            for name in ("hook_q", "hook_k", "hook_pattern"):
                got = batch.steps[t][f"decoder.blocks.1.self_attn.{name}"][b]
                want = alone.steps[t][f"decoder.blocks.1.self_attn.{name}"][0]
                if name == "hook_k":  # drop the left pads' keys
                    got = got[:, pad:]
                elif name == "hook_pattern":
                    got = got[..., pad:]
                assert float32.close(got, want, llama.info), (b, t, name)  # two runs (tests/float32.py)


def test_sampling_is_seeded_and_uses_its_own_generator(tiny_llama):
    m, _ = tiny_llama
    rng = torch.get_rng_state()
    a = m.generate_with_cache(LLAMA_TEXTS, 10, temperature=0.8, top_k=3, seed=1)
    assert torch.equal(torch.get_rng_state(), rng)  # the global generator is untouched
    assert m.generate_with_cache(LLAMA_TEXTS, 10, temperature=0.8, top_k=3, seed=1).token_ids == a.token_ids
    assert m.generate_with_cache(LLAMA_TEXTS, 10, temperature=0.8, top_k=3, seed=2).token_ids != a.token_ids
    greedy = m.generate_with_cache(LLAMA_TEXTS, 10)
    assert greedy.token_ids != a.token_ids and greedy.top[0].sampled_from is None
    for top in a.top:  # top-k sampling draws only among the 3 most likely
        assert (top.chosen[:, None] == top.ids[:, :3]).any(-1).all()
        assert torch.allclose(top.sampled_from.sum(-1), torch.ones(len(LLAMA_TEXTS)), atol=1e-5)
        assert (top.sampled_from[:, 3:] == 0).all()
    # sampling with the cache equals sampling with the full recomputation, step for step
    full = m.generate_with_cache(LLAMA_TEXTS, 10, temperature=0.8, top_k=3, seed=1, use_cache=False)
    assert full.token_ids == a.token_ids and step_mismatches(a, full) == []


def test_llama_stays_within_its_positions(tiny_llama):
    m, _ = tiny_llama
    tr = m.generate_with_cache(["the cat"], 1000, names=["decoder.blocks.0.self_attn.hook_pattern"])
    assert len(tr.decoder_token_ids[0]) == m.info.max_len  # 64: cut to what the positions allow
    assert set(tr.steps[0]) == {"decoder.blocks.0.self_attn.hook_pattern"}


# --- the checks can fail ----------------------------------------------------------------------------
def test_a_wrong_seed_offset_is_caught(seed, monkeypatch):
    """Forgetting the position offset of a one-token step (position 0 at every step)."""
    from model.arch.parts import Stack

    right = Stack.embed_tokens

    def no_offset(self, ids, start=0, positions=None, vectors=None):
        return right(self, ids, 0, positions, vectors)

    monkeypatch.setattr(Stack, "embed_tokens", no_offset)
    cached = seed.generate_with_cache(SEED_TEXTS, 6)
    full = seed.generate_with_cache(SEED_TEXTS, 6, use_cache=False)
    bad = step_mismatches(cached, full)
    assert any("step 1: decoder.hook_pos_embed" in b for b in bad)
    assert any("hook_pattern" in b for b in bad)


def test_a_wrong_rotary_offset_is_caught(llama, monkeypatch):
    """Rotating a step's new query/key by the position one too far."""
    from model.arch.parts import Rotary

    right = Rotary.__init__

    def off_by_one(self, positions, rope, dims, interleaved=False):
        one_step = positions.dim() == 2 and positions.shape[1] == 1
        right(self, positions + 1 if one_step else positions, rope, dims, interleaved)

    monkeypatch.setattr(Rotary, "__init__", off_by_one)
    cached = llama.generate_with_cache(LLAMA_TEXTS, 4)
    full = llama.generate_with_cache(LLAMA_TEXTS, 4, use_cache=False)
    bad = step_mismatches(cached, full)
    assert any("step 0: decoder.blocks.0.self_attn.hook_q" in b for b in bad)


def test_a_cache_that_overwrites_the_previous_key_is_caught(llama, monkeypatch):
    """An off-by-one write: the new key and value land on the previous token's slot too."""
    right = KVCache.append

    def off_by_one(self, k, v):
        k_all, v_all = right(self, k, v)
        if self.length >= 2 and k.shape[2] == 1:
            k_all[:, :, -2], v_all[:, :, -2] = k_all[:, :, -1], v_all[:, :, -1]
        return k_all, v_all

    monkeypatch.setattr(KVCache, "append", off_by_one)
    cached = llama.generate_with_cache(LLAMA_TEXTS, 4)
    monkeypatch.undo()
    full = llama.generate_with_cache(LLAMA_TEXTS, 4, use_cache=False)
    bad = step_mismatches(cached, full)
    assert any("step 0: decoder.blocks.0.self_attn.hook_k" in b for b in bad)
    assert any("self_attn.hook_pattern" in b for b in bad)


# --- the cache itself, and threads ------------------------------------------------------------------
def test_kv_cache_grows_and_keeps_what_earlier_steps_saw():
    g = torch.Generator().manual_seed(0)
    cache, seen, ks = KVCache(), [], []
    for n in (3, 1, 1, 1, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1):  # outgrows its buffer twice
        k, v = torch.randn(2, 4, n, 8, generator=g), torch.randn(2, 4, n, 8, generator=g)
        ks.append(k)
        k_all, v_all = cache.append(k, v)
        seen.append((k_all, torch.cat(ks, dim=2)))
    assert cache.length == 23 and cache.k.shape[2] == 46  # buffers of 6, 22, then 46 positions
    for k_all, want in seen:  # every view handed out still holds exactly the keys of its step
        assert torch.equal(k_all, want)
    fixed = KVCache(fixed=True)
    k = torch.randn(2, 4, 7, 8)
    assert fixed.append(k, k)[0] is k and fixed.length == 7


def test_concurrent_generation_matches_sequential(seed):
    import threading

    texts = [["hello world"], ["안녕하세요"], ["attention", "a"], ["transformers are fun"]]
    want = [seed.generate_with_cache(t) for t in texts]
    got = [None] * len(texts)

    def work(i):
        got[i] = seed.generate_with_cache(texts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for a, b in zip(got, want):
        assert a.generated == b.generated and len(a) == len(b)
        for sa, sb in zip(a.steps, b.steps):
            assert sa.keys() == sb.keys() and all(torch.equal(sa[n], sb[n]) for n in sa)


# --- the API -----------------------------------------------------------------------------------------
def test_bad_arguments_are_refused_clearly(seed, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="max_new_tokens"):
        seed.generate_with_cache("abc", 0)
    with pytest.raises(ValueError, match="temperature"):
        seed.generate_with_cache("abc", temperature=-1)
    with pytest.raises(ValueError, match="top_k"):
        seed.generate_with_cache("abc", top_k=5)  # top-k needs sampling
    with pytest.raises(KeyError, match="unknown hook names"):
        seed.generate_with_cache("abc", names=["decoder.nope"])
    monkeypatch.setenv(fetch.ENV_VAR, str(tmp_path / "cache"))
    (tmp_path / "config.json").write_text(json.dumps(BERT_CFG))
    save_file(bert_state(), str(tmp_path / "model.safetensors"))
    bert_tokenizer().save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(TypeError, match="no decoder"):
        model.load(tmp_path).generate_with_cache("the cat")


def test_seed_max_new_tokens_and_names(seed):
    tr = seed.generate_with_cache(["attention is all you need"], 5,
                                  names=["decoder.blocks.1.cross_attn.hook_pattern"])
    assert len(tr) == 5 and tr.generated == ["deen "] and tr.tokens[0] == list("deen ")
    assert tr.prompt == {} and all(list(s) == ["decoder.blocks.1.cross_attn.hook_pattern"] for s in tr.steps)
    assert [top.chosen_token[0] for top in tr.top] == list("deen ")
    assert all(top.tokens[0][0] == top.chosen_token[0] for top in tr.top)  # greedy: the most likely


# --- the real SmolLM2 ---------------------------------------------------------------------------------
@pytest.mark.weights
@pytest.mark.slow
def test_smollm2_cached_steps_equal_full_recomputation():
    if not fetch.is_fetched("smollm2"):
        pytest.skip(f"smollm2 weights not fetched (run `{fetch.fetch_command('smollm2')}`)")
    m = model.load("smollm2")
    texts = ["The capital of France is", "Once upon a time, in a small village by the sea, there lived"]
    cached = m.generate_with_cache(texts, 8)
    full = m.generate_with_cache(texts, 8, use_cache=False)
    assert_same_decoding(cached, full)
    P = max(len(ids) for ids in cached.input_token_ids)
    assert mismatches(cached.prompt, full.steps[0], slice(0, P - 1), P - 1) == []
    assert cached.generated[0].startswith(" Paris")
