"""The attention's in-place path (model/arch/parts.py) gives the tensors of the plain computation.

The score tensor is reused in place where no hook holds it (the mask fill, the softmax) and an
all-allowed mask is skipped; these tests compare every output and every captured hook tensor with
the step-by-step computation written out here, for every combination of hooks that decides which
path runs, with and without autograd, and with edits active. ``import model`` applies the malloc
settings (model/runtime/malloc.py); ``python -m bench peers --help`` works without its virtual environment.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import float32
import pytest
import torch

import model
from model.arch.family import Family
from model.arch.parts import Attention, Mask, causal_mask
from model.runtime.hooks import capture, hooks

ROOT = Path(__file__).resolve().parent.parent


def attention(d: int, n_heads: int):
    """One attention of the parts (model/arch/parts.py), as the seed's: Q/K/V and W_O with biases, 1/√d_head."""
    f = Family(model_type="seed", kind="encoder", vocab_size=1, d_model=d, n_layers=1, n_heads=n_heads,
               n_kv_heads=n_heads, d_head=d // n_heads, d_ff=1, max_len=64, qkv_bias=True, out_bias=True)
    return Attention(f, f.scale)


def attend(a, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """a(x) under ``mask`` (None: every key allowed)."""
    allowed = torch.ones(1, 1, 1, x.shape[1], dtype=torch.bool) if mask is None else mask
    return a(x, Mask(allowed))
HOOKS = ("hook_q", "hook_k", "hook_v", "hook_scores", "hook_mask", "hook_masked_scores", "hook_pattern",
         "hook_z", "hook_out")
# which hooks are watched decides the path: none, each of the two that block reuse, the pattern
# only (what transformers returns), and every hook
WATCHED = [(), ("hook_scores",), ("hook_masked_scores",), ("hook_pattern",), ("hook_scores", "hook_pattern"), HOOKS]


def reference(att: Attention, x: torch.Tensor, mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The plain computation, out of place, step by step."""
    B, T, _ = x.shape
    q = att.W_Q(x).view(B, T, att.n_heads, att.d_head).transpose(1, 2)
    k = att.W_K(x).view(B, T, att.n_heads, att.d_head).transpose(1, 2)
    v = att.W_V(x).view(B, T, att.n_heads, att.d_head).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(att.d_head)
    allowed = torch.ones(B, 1, T, T, dtype=torch.bool) if mask is None else mask.expand(B, 1, T, T)
    masked = scores.masked_fill(~allowed, float("-inf"))
    pattern = torch.softmax(masked, -1)
    pattern = torch.where(allowed.any(-1, keepdim=True), pattern, torch.zeros(()))
    z = pattern @ v
    out = att.W_O(z.transpose(1, 2).reshape(B, T, -1))
    return {"hook_scores": scores, "hook_masked_scores": masked, "hook_pattern": pattern, "hook_z": z,
            "hook_out": out}


@pytest.fixture(scope="module")
def att():
    torch.manual_seed(3)
    a = attention(16, 4).eval()
    for n in HOOKS:
        getattr(a, n).name = n
    return a


def masks(T: int, B: int) -> dict[str, torch.Tensor | None]:
    pad = torch.ones(B, 1, 1, T, dtype=torch.bool)
    pad[1, ..., T - 2:] = False  # the second sentence has two pad keys
    left = causal_mask(T).expand(B, 1, T, T).clone()
    left[1, :, :2, :] = False  # two query rows with no allowed key (left padding in generation)
    return {"none": None, "all allowed": torch.ones(1, 1, T, T, dtype=torch.bool), "padding": pad,
            "causal": causal_mask(T), "empty rows": left}


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
@pytest.mark.parametrize("watched", WATCHED, ids=lambda w: "+".join(w) or "no hooks")
def test_every_path_gives_the_plain_tensors(att, watched, grad):
    torch.manual_seed(7)
    x = torch.randn(2, 6, 16)
    for mname, mask in masks(6, 2).items():
        want = reference(att, x, mask)
        store: dict = {}
        ctx = torch.enable_grad() if grad else torch.inference_mode()
        with ctx, hooks(capture(list(watched), store)):
            out = attend(att, x, mask)
        assert out.requires_grad == grad
        assert torch.allclose(out, want["hook_out"], atol=1e-6), (mname, watched)
        for n in watched:
            if n in want:  # every captured tensor is still what it was when the hook saw it
                got = store[n]
                assert torch.equal(torch.isinf(got), torch.isinf(want[n])), (mname, n)
                fin = torch.isfinite(want[n])
                assert torch.allclose(got[fin], want[n][fin], atol=1e-6), (mname, n)
        if "hook_scores" in watched:  # the scores before the mask: no -inf even where the mask hides keys
            assert torch.isfinite(store["hook_scores"]).all()
        if "hook_pattern" in watched and mname == "empty rows":
            assert (store["hook_pattern"][1, :, :2] == 0).all() and not store["hook_pattern"].isnan().any()


def test_a_shared_mask_is_derived_once_and_an_edited_one_again(monkeypatch):
    """A stack wraps its mask once (``Mask.of``); its layers share what is derived from it. A hook
    that changes the mask gets a mask derived from its own tensor, never the stale one."""
    m = model.load("seed", random=True, d_model=32, n_heads=2, n_layers=3, n_decoder_layers=3, seed=5)
    made: list[tuple] = []
    real_bias = Mask.bias

    def bias(self, dtype):
        if dtype not in self._bias:
            made.append(tuple(self.allowed.shape))
        return real_bias(self, dtype)

    monkeypatch.setattr(Mask, "bias", bias)
    src = torch.tensor([[5, 6, 7, 8, m.cfg.eos_id], [5, 6, m.cfg.eos_id, m.cfg.pad_id, m.cfg.pad_id]])
    tgt = torch.tensor([[m.cfg.bos_id, 9, 10, 11], [m.cfg.bos_id, 9, m.cfg.pad_id, m.cfg.pad_id]])
    src_real, tgt_real = src != m.cfg.pad_id, tgt != m.cfg.pad_id
    with torch.inference_mode():
        memory = m.encode(src, src_real)  # 3 layers, one padding mask
        assert made == [(2, 1, 1, 5)]
        m.decode(tgt, tgt_real, memory, src_real)  # 3 layers: one self-attention mask, one cross-attention mask
        assert made == [(2, 1, 1, 5), (2, 1, 4, 4), (2, 1, 1, 5)]
        # a hook that changes the mask (here: allows every key) is obeyed in every layer
        store: dict = {}
        name = "decoder.blocks.{}.self_attn.hook_{}"
        fns = {name.format(i, "mask"): (lambda x, n: torch.ones_like(x)) for i in range(3)}
        fns.update(capture([name.format(i, "pattern") for i in range(3)], store))
        with hooks(fns):
            m.decode(tgt, tgt_real, memory, src_real)
    for i in range(3):
        assert (store[name.format(i, "pattern")][0, :, 0, 1:] > 0).all(), "every later key is seen"


def test_the_gradient_flows_as_before(att):
    torch.manual_seed(8)
    x = torch.randn(2, 6, 16, requires_grad=True)
    mask = causal_mask(6)
    attend(att, x, mask).sum().backward()
    g = x.grad.clone()
    x.grad = None
    reference(att, x, mask)["hook_out"].sum().backward()
    assert torch.allclose(g, x.grad, atol=1e-5)


@pytest.fixture(scope="module")
def seed():
    return model.load("seed", random=True, d_model=32, n_heads=2, n_layers=2, n_decoder_layers=2, seed=4)


@pytest.mark.parametrize("edits", ["", "temperature=2", "no_causal", "scale=0.5,temperature=3"])
def test_patterns_only_and_every_hook_agree_under_edits(seed, edits):
    """A run keeping the patterns only (the in-place path) and one keeping every hook (out of
    place) give the same patterns and the same output, edits or none."""
    texts = ["attention is all you need", "a cat"]
    pats = [n for n in seed.hook_names if n.endswith("hook_pattern")]
    out_all, every = seed.run_with_cache(texts, edits=edits or None)
    out_pat, few = seed.run_with_cache(texts, names=pats, edits=edits or None)
    assert set(few) == set(pats)
    for n in pats:
        assert torch.allclose(every[n], few[n], atol=1e-6), (edits, n)
    assert float32.close(out_pat.logits, out_all.logits, seed.info)  # two paths (tests/float32.py)
    # and every hook's pattern is the softmax of its masked scores, rows summing to 1 or 0
    for n in pats:
        masked = every[n.replace("hook_pattern", "hook_masked_scores")]
        ref = torch.softmax(masked, -1).nan_to_num(0.0)
        assert torch.allclose(every[n], ref, atol=1e-6)


def test_import_model_applies_the_malloc_settings():
    code = ("import model, json; from model.runtime import malloc; print(json.dumps(malloc.tune()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "ATTENTION_EXPLORER_MALLOC"}
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    applied = __import__("json").loads(got.stdout)
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc malloc settings apply on Linux only")
    assert applied == {k: v for k, (_, v) in model.malloc.SETTINGS.items()}
    off = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "ATTENTION_EXPLORER_MALLOC": "default"},
                         capture_output=True, text=True, check=True)
    assert off.stdout.strip() == "{}"


def test_bench_peers_help_needs_no_venv(tmp_path):
    p = subprocess.run([sys.executable, "-m", "bench", "peers", "--help"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    for flag in ("--threads", "--check", "--quick", "--venv", "--malloc"):
        assert flag in p.stdout
    bad = subprocess.run([sys.executable, "-m", "bench", "peers", "--models", "gpt5", "--venv", str(tmp_path / "v")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--models" in bad.stderr
    assert not (tmp_path / "v").exists()  # refused before any venv is made


def test_bench_peers_floors_flag_a_ratio_against_the_project():
    from bench import peers

    one = {"project": 1.0, "project_all": 1.2, "transformers": 0.9}
    s = {"cold_s": {**one, "ratio": 0.9}, "load_s": {**one, "ratio": 2.0}, "peak_mb": {**one, "ratio": 1.1},
         "forward_s": {"512": {"ratio": 1.01}}, "parity_512": {"shape_equal": True, "max_abs": 3e-3}}
    got = peers.floors({"models": {"minilm": s}})
    assert got == {"minilm cold start": False, "minilm load": True, "minilm peak memory (512)": True,
                   "minilm forward 512": True, "minilm parity (512)": False}
    assert peers.pins()[0] == "transformers==5.23.0"  # the parity script's pin, read from it


def test_bench_peers_pairs_neighbouring_calls():
    """The warm-forward ratio is the median of peer / project over neighbouring calls in one
    process, so a slow stretch of the machine that hits both calls of a pair cancels out; a
    per-side median would not. Here the project is 10 % faster in every pair while the machine
    slows everything down threefold half-way through."""
    from bench import peers

    slow = [1.0] * 5 + [3.0] * 5
    proj = [0.9 * f for f in slow]
    peer = [1.0 * f for f in slow]
    one = {"times": {"16": {"project": proj, "transformers": peer}},
           "cpu": {"16": {"project": proj, "transformers": peer}}, "tokens": {"16": [16, 16]}}
    behind = {"times": {"16": {"project": peer, "transformers": proj}},
              "cpu": {"16": {"project": peer, "transformers": proj}}, "tokens": {"16": [16, 16]}}
    cold = {"cold_s": 1.0, "load_s": 1.0, "peak_mb": 1.0, "tokens": [16, 512]}
    r = {"cold": {"project": [cold], "project_all": [cold], "transformers": [cold]},
         "warm": {"patterns": [one, one], "all": [behind]}}
    f = peers.summarise(r)["forward_s"]["16"]
    assert abs(f["ratio"] - 1 / 0.9) < 1e-9 and f["ahead"] == 1.0 and f["pairs"] == 20
    assert f["ratio_interval"][0] <= f["ratio"] <= f["ratio_interval"][1]
    assert abs(f["ratio_all"] - 0.9) < 1e-9 and f["ahead_all"] == 0.0
    assert peers.floors({"models": {"m": {**peers.summarise(r), "cold_s": {"ratio": 1}, "load_s": {"ratio": 1},
                                              "peak_mb": {"ratio": 1}}}})["m forward 16"]
