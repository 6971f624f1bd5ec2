"""The shipped seed weights meet the accuracy floor on held-out inputs generated here."""
from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

import model
from model.files.tokenizer import HANGUL_SYLLABLES, PRINTABLE_ASCII
from model.train import exact_match

FLOOR = 0.99
NATURAL = [line.rstrip("\n") for line in
           (Path(__file__).parent / "data" / "natural_sentences.txt").read_text("utf-8").splitlines()
           if line.strip()]


def random_inputs(alphabets: list[list[str]], n: int, seed: int) -> list[str]:
    """n strings of 1–40 characters; each string draws from one of the alphabets or all of them."""
    rng = random.Random(seed)
    everything = [c for a in alphabets for c in a]
    out = []
    for _ in range(n):
        pool = rng.choice(alphabets + [everything])
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 40))))
    return out


@pytest.fixture(scope="module")
def reverse():
    return model.load("seed")


@pytest.fixture(scope="module")
def sort():
    return model.load("seed-sort")


def test_natural_sentences_are_in_the_domain():
    allowed = set(PRINTABLE_ASCII) | set(HANGUL_SYLLABLES)
    assert len(NATURAL) >= 60
    assert all(1 <= len(s) <= 40 and set(s) <= allowed for s in NATURAL)
    assert any(set(s) & set(HANGUL_SYLLABLES) for s in NATURAL)


RANDOM_REVERSE_INPUTS = random_inputs([PRINTABLE_ASCII, HANGUL_SYLLABLES], 600, seed=2026)


def test_reverse_on_random_ascii_and_hangul_meets_the_floor(reverse):
    assert exact_match(reverse, "reverse", RANDOM_REVERSE_INPUTS) >= FLOOR


def test_reverse_on_natural_english_and_korean(reverse):
    assert exact_match(reverse, "reverse", NATURAL) >= FLOOR


def test_reverse_writes_the_reversal(reverse):
    out = reverse.run(["hello world", "안녕하세요"])
    assert out.generated == ["dlrow olleh", "요세하녕안"]


def test_sort_on_random_lowercase(sort):
    inputs = random_inputs([list(string.ascii_lowercase), list("abcde"), list("xyz")], 600, seed=7)
    assert exact_match(sort, "sort", inputs) >= FLOOR


def test_sort_writes_the_distinct_letters_in_order(sort):
    assert sort.run(["banana", "attention"]).generated == ["abn", "aeinot"]


def test_cross_attention_of_reverse_is_anti_diagonal(reverse):
    text = "attention is all you need"
    _, cache = reverse.run_with_cache([text])
    last = reverse.info.n_decoder_layers - 1
    pattern = cache[f"decoder.blocks.{last}.cross_attn.hook_pattern"][0]  # (h, T, S)
    L = len(text)
    # output step t (decoder position t, predicting character t of the output) reads input L-1-t
    best = pattern.max(0).values.argmax(-1)[:L]  # over heads, the most attended input per step
    hits = sum(int(best[t]) == L - 1 - t for t in range(L))
    assert hits >= 0.9 * L


def trained_with_unknowns() -> bool:
    import json

    from safetensors import safe_open

    from model.registry import SEED_WEIGHTS

    with safe_open(str(SEED_WEIGHTS["seed"]), framework="pt") as f:
        meta = f.metadata() or {}
    return json.loads(meta.get("training", "{}")).get("unk_rate", 0) > 0


def test_reverse_keeps_unknown_characters_in_place(reverse):
    """A character outside the vocabulary becomes <unk>; the reversal keeps it in its place."""
    assert trained_with_unknowns()  # the shipped weights say how they were made
    out = reverse.run(["Why √d_k?", "é 안녕 😀", "a→b"])
    assert out.generated == ["?k_d<unk> yhW", "<unk> 녕안 <unk>", "b<unk>a"]
    from model.train import UNKNOWN_CHARS, held_out
    inputs = [s for s in held_out("reverse", 600, 7, unk_rate=0.03) if set(s) & set(UNKNOWN_CHARS)]
    assert len(inputs) > 100 and exact_match(reverse, "reverse", inputs) >= FLOOR
