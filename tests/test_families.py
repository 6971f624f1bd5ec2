"""Eleven families from a checkpoint folder, against transformers itself (tests/fixtures/families).

The fixtures come from scripts/make_family_fixtures.py: a tiny random checkpoint per family made
by transformers 5.23 (weights drawn large so that patterns are far from uniform; GQA; windows of
3-4 tokens; QK-norm; Gemma's soft-capping; T5's relative bias), with transformers' eager attention
patterns, logits and hidden states for each sentence alone and for a right-padded batch.

Tolerance: the issue asks 1e-4; tests/float32.py's estimate of two float32 runs of the same model
(stream error × the quantity's largest magnitude) is tighter still for these tiny models, and is
what each comparison uses (the smaller of the two). Each family's measured worst error is printed
(-s). A real mistake (the window dropped, Gemma's (1 + w) read as w, RoBERTa's offset forgotten,
Marian's table interleaved, T5's decoder buckets made bidirectional) is shown to fall far outside.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path

import float32
import pytest
import torch

import model
from model.arch.family import FAMILIES
from model.arch.parts import Norm
from model.arch.positional import sinusoidal as interleaved
from model.runtime.errors import WeightsError

FIXTURES = Path(__file__).parent / "fixtures" / "families"
FAMILY_NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "reference.json").is_file()) \
    if FIXTURES.is_dir() else []
ISSUE_TOLERANCE = 1e-4
ATTN_HOOKS = ["hook_q", "hook_k", "hook_v", "hook_scores", "hook_mask", "hook_masked_scores", "hook_pattern",
              "hook_z", "hook_out"]


def reference(family: str) -> tuple[dict, dict[str, torch.Tensor]]:
    from safetensors.torch import load_file

    folder = FIXTURES / family
    return json.loads((folder / "reference.json").read_text()), load_file(str(folder / "reference.safetensors"))


def two_runs_agree(a: torch.Tensor, b: torch.Tensor, info) -> bool:
    """One hook from two float32 runs: −inf in the same places, the rest within tests/float32.py."""
    a, b = a.float(), b.float()
    return torch.equal(a.isinf(), b.isinf()) and float32.close(a.nan_to_num(neginf=0.0), b.nan_to_num(neginf=0.0), info)


def tolerance(info, ref: torch.Tensor) -> float:
    return min(ISSUE_TOLERANCE, float32.tolerance(info, ref))


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request):
    name = request.param
    m = model.load(FIXTURES / name)
    meta, ref = reference(name)
    return name, m, meta, ref


@pytest.fixture(scope="module")
def runs(family):
    """Each sentence alone, and the sentences as one padded batch."""
    name, m, meta, ref = family
    singles = [m.run_with_cache([s]) for s in meta["sentences"]]
    return singles, m.run_with_cache(meta["sentences"])


def our_patterns(m, cache, block: str, b: int, q: int, k: int) -> torch.Tensor:
    """(L, H, q, k): every layer's pattern of sentence b, cut to the reference's size."""
    stack, attn = block.split(".")
    n = m.info.n_layers if stack == "encoder" or m.info.kind == "decoder" else m.info.n_decoder_layers
    return torch.stack([cache[f"{stack}.blocks.{i}.{attn}.hook_pattern"][b, :, :q, :k] for i in range(n)])


def encoder_output(m, out, cache, b: int, n: int) -> torch.Tensor:
    """What transformers calls the (encoder's) last hidden state: the stream after any final norm."""
    if m.info.kind == "encoder":
        return out.hidden[b, :n]
    last = cache[f"encoder.blocks.{m.info.n_layers - 1}.hook_resid_post"][b, :n]
    return m.encoder.finish(last)


# --- parity -----------------------------------------------------------------------------------
def test_fixtures_cover_every_family():
    assert set(FAMILY_NAMES) == set(FAMILIES)


def test_token_ids_match_the_reference(family, runs):
    name, m, meta, ref = family
    singles, (_, batch) = runs
    for b, ids in enumerate(meta["input_ids"]):
        assert singles[b][1].token_ids[0] == ids
        assert batch.token_ids[b] == ids
        assert torch.equal(ref[f"single.{b}.input_ids"], torch.tensor(ids))


def test_patterns_logits_and_hidden_match_transformers(family, runs):
    """Every layer's pattern, the logits and the hidden state, sentence by sentence and padded."""
    name, m, meta, ref = family
    singles, (batch_out, batch) = runs
    worst: dict[str, float] = {}

    def check(what: str, ours: torch.Tensor, theirs: torch.Tensor) -> None:
        err = (ours.double() - theirs.double()).abs().max().item()
        tol = tolerance(m.info, theirs)
        worst[what] = max(worst.get(what, 0.0), err)
        assert err <= tol, f"{name} {what}: max error {err:.2e} > tolerance {tol:.2e}"

    for b, ids in enumerate(meta["input_ids"]):
        n = len(ids)
        dec = ref.get(f"single.{b}.decoder_input_ids")
        if dec is not None:  # encoder-decoders: our greedy output starts with transformers' own
            assert singles[b][1].decoder_token_ids[0][: len(dec)] == dec.tolist()
            assert batch.decoder_token_ids[b][: len(dec)] == dec.tolist()
        for run, r, row in ((singles[b], "single", 0), ((batch_out, batch), "batch", b)):
            out, cache = run
            for block in m.info.blocks:
                theirs = ref[f"single.{b}.{block}"]  # (L, H, q, k): the batch's real rows are the same
                if r == "batch":
                    q, k = theirs.shape[-2:]
                    theirs = ref[f"batch.{block}"][b, :, :, :q, :k]
                check(f"{block} pattern", our_patterns(m, cache, block, row, *theirs.shape[-2:]), theirs)
            if f"single.{b}.logits" in ref:
                theirs = ref[f"single.{b}.logits"]
                check("logits", out.logits[row, : theirs.shape[0]], theirs)
            if f"single.{b}.hidden" in ref:
                check("hidden", encoder_output(m, out, cache, row, n), ref[f"single.{b}.hidden"])
    print(f"\n{name}: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))


# --- the hook contract ------------------------------------------------------------------------
def expected_block_hooks(info, stack: str, cross: bool) -> list[str]:
    attn = [f"self_attn.{h}" for h in ATTN_HOOKS]
    if info.qk_norm:
        attn = ["self_attn.hook_q_normed", "self_attn.hook_k_normed"] + attn
    if info.positional == "relative":
        attn.insert(attn.index("self_attn.hook_mask"), "self_attn.hook_position_bias")
    crossed = [f"cross_attn.{h}" for h in ATTN_HOOKS] if cross else []
    placement = info.norm.split("-")[0]
    if placement == "post":
        return ["hook_resid_pre", *attn, "hook_attn_sum", "hook_resid_mid",
                *([*crossed, "hook_cross_sum", "hook_resid_mid_cross"] if cross else []),
                "hook_ffn_hidden", "hook_ffn_out", "hook_ffn_sum", "hook_resid_post"]
    if placement == "pre":
        return ["hook_resid_pre", "hook_attn_normed", *attn, "hook_resid_mid",
                *(["hook_cross_normed", *crossed, "hook_resid_mid_cross"] if cross else []),
                "hook_ffn_normed", "hook_ffn_hidden", "hook_ffn_out", "hook_resid_post"]
    assert placement == "sandwich"
    return ["hook_resid_pre", "hook_attn_normed", *attn, "hook_attn_out_normed", "hook_resid_mid",
            "hook_ffn_normed", "hook_ffn_hidden", "hook_ffn_out", "hook_ffn_out_normed", "hook_resid_post"]


def test_hook_names_pinned(family):
    name, m, _, _ = family
    info, names = m.info, []
    for stack in info.stacks:
        n = info.n_decoder_layers if stack == "decoder" and info.kind == "encoder-decoder" else info.n_layers
        names.append(f"{stack}.hook_embed")
        if info.positional in ("learned", "sinusoidal"):
            names.append(f"{stack}.hook_pos_embed")
        cross = stack == "decoder" and info.kind == "encoder-decoder"
        for i in range(n):
            names += [f"{stack}.blocks.{i}.{h}" for h in expected_block_hooks(info, stack, cross)]
    assert m.hook_names == names


def test_hook_shapes_and_attention_maths(family, runs):
    """Shapes; scores exactly q·kᵀ·scale; −inf where masked, zeros in the pattern there; rows sum
    to 1; padding, causal and window masks; GQA; QK-norm and position-bias hooks."""
    name, m, meta, _ = family
    _, (out, cache) = runs
    info = m.info
    B = len(meta["sentences"])
    lengths = {"encoder": [len(t) for t in cache.token_ids],
               "decoder": [len(t) for t in (cache.decoder_token_ids or cache.token_ids)]}
    for block in info.blocks:
        stack, attn = block.split(".")
        n_layers = info.n_decoder_layers if stack == "decoder" and info.kind == "encoder-decoder" else info.n_layers
        for i in range(n_layers):
            a = f"{stack}.blocks.{i}.{attn}."
            q, k, v = cache[a + "hook_q"], cache[a + "hook_k"], cache[a + "hook_v"]
            Tq, Tk = q.shape[2], k.shape[2]
            assert q.shape == (B, info.n_heads, Tq, info.d_head) and k.shape == v.shape == (B, info.n_heads, Tk, info.d_head)
            scale = (info.attn_scale or 1 / math.sqrt(info.d_head)) / ((i + 1) if m.family.scale_by_layer else 1)
            scores = cache[a + "hook_scores"]
            assert torch.equal(scores, (q @ k.transpose(-2, -1)) * scale)
            mask, masked, pattern = cache[a + "hook_mask"], cache[a + "hook_masked_scores"], cache[a + "hook_pattern"]
            assert mask.dtype == torch.bool and mask.shape == (B, 1, Tq, Tk)
            hidden = ~mask.expand_as(masked)
            assert torch.isneginf(masked[hidden]).all() and (pattern[hidden] == 0).all()
            bias = cache[a + "hook_position_bias"] if a + "hook_position_bias" in cache else torch.zeros(())
            assert torch.equal(masked[~hidden], (scores + bias).expand_as(masked)[~hidden])
            rows = mask[:, 0].any(-1)[:, None].expand(B, info.n_heads, Tq).float()  # 0: a query with no key
            assert torch.allclose(pattern.sum(-1), rows, atol=1e-6)  # (a pad query beyond a window)
            keys = lengths["encoder" if attn == "cross_attn" else stack]
            for b, n in enumerate(keys):  # pad keys hidden from every query
                assert not mask[b, 0, :, n:].any()
            if stack == "decoder" and attn == "self_attn":
                assert not mask[:, 0].triu(1).any()  # causal
                near = torch.arange(Tk)[None, :] > torch.arange(Tq)[:, None] - info.sliding_window
                if i in info.window_layers:  # the window: key j hidden from query i when i - j >= window
                    assert not mask[:, 0][:, ~near].any()
                elif info.sliding_window:  # the other layers see keys that far back
                    assert mask[:, 0][:, ~near].any()
            group = info.n_heads // info.n_kv_heads
            for h in range(info.n_heads):  # GQA: the heads of a group share one K and V
                assert torch.equal(k[:, h], k[:, h - h % group])
            if info.qk_norm and attn == "self_attn":
                assert cache[a + "hook_q_normed"].shape == (B, info.n_heads, Tq, info.d_head)
                assert cache[a + "hook_k_normed"].shape == (B, info.n_kv_heads, Tk, info.d_head)
            if info.positional == "relative" and attn == "self_attn":
                assert cache[a + "hook_position_bias"].shape == (1, info.n_heads, Tq, Tk)
            assert cache[a + "hook_z"].shape == (B, info.n_heads, Tq, info.d_head)
            assert cache[a + "hook_out"].shape == (B, Tq, info.d_model)


def test_readout_of_the_last_stream_is_the_logits(family, runs):
    name, m, _, _ = family
    _, (out, cache) = runs
    if out.logits is None:
        with pytest.raises(TypeError, match="no output head"):
            m.readout(out.hidden)
        return
    stack = m.info.stacks[-1]
    n = m.info.n_decoder_layers if m.info.kind == "encoder-decoder" else m.info.n_layers
    assert torch.equal(m.readout(cache[f"{stack}.blocks.{n - 1}.hook_resid_post"]), out.logits)


def test_hooked_equals_unhooked(family, runs):
    name, m, meta, _ = family
    _, (out, _) = runs
    plain = m.run(meta["sentences"])
    for a, b in ((plain.logits, out.logits), (plain.hidden, out.hidden)):
        assert (a is None and b is None) or torch.equal(a, b)
    assert plain.generated == out.generated

    # the scores are scaled, masked and softmaxed in place where no hook sees them: a run keeping one
    # stage alone keeps it as the run keeping every hook does (not overwritten by the next stage)
    _, full = runs[1]
    for stage in ("hook_scores", "hook_masked_scores", "hook_pattern"):
        names = [h for h in full if h.endswith(f"attn.{stage}")]
        _, alone = m.run_with_cache(meta["sentences"], names=names)
        for h in names:
            assert torch.equal(alone[h], full[h]), h


def test_generate_with_cache_writes_what_run_predicts(family):
    name, m, meta, _ = family
    if m.info.kind == "encoder":
        with pytest.raises(TypeError, match="no decoder"):
            m.generate_with_cache(meta["sentences"][:1])
        return
    text = meta["sentences"][0]
    trace = m.generate_with_cache([text], max_new_tokens=4)
    again = m.generate_with_cache([text], max_new_tokens=4, use_cache=False)
    assert trace.token_ids == again.token_ids
    out, cache = m.run_with_cache([text])
    if m.info.kind == "decoder":
        assert trace.token_ids[0][0] == out.logits[0, -1].argmax().item()
    else:
        assert trace.token_ids[0] == cache.decoder_token_ids[0][1:5]


# --- real mistakes fail -------------------------------------------------------------------------
def _worst_pattern_error(m, family_name: str, block: str) -> tuple[float, float]:
    meta, ref = reference(family_name)
    worst, tol = 0.0, 1.0
    for b, s in enumerate(meta["sentences"]):
        _, cache = m.run_with_cache([s])
        theirs = ref[f"single.{b}.{block}"]
        ours = our_patterns(m, cache, block, 0, *theirs.shape[-2:])
        worst = max(worst, (ours - theirs).abs().max().item())
        tol = min(tol, tolerance(m.info, theirs))
    return worst, tol


MISTAKES = {
    "mistral: the window dropped": ("mistral", "decoder.self_attn",
                                    lambda m: [setattr(b, "windowed", False) for b in m.decoder.blocks]),
    "gemma3: (1 + w) read as w": ("gemma3_text", "decoder.self_attn",
                                  lambda m: [setattr(x, "kind", "rms") for x in m.modules() if isinstance(x, Norm)]),
    "gemma3: one rotary base for every layer": ("gemma3_text", "decoder.self_attn",
                                                lambda m: setattr(m.decoder, "f", dataclasses.replace(m.family, rope_local=None))),
    "roberta: positions from 0": ("roberta", "encoder.self_attn",
                                  lambda m: setattr(m.encoder, "f", dataclasses.replace(m.family, pos_offset=0))),
    "marian: sin and cos interleaved": ("marian", "encoder.self_attn",
                                        lambda m: setattr(m.encoder, "pe", interleaved(m.family.max_len, m.family.d_model))),
    "t5: bidirectional buckets in the decoder": ("t5", "decoder.self_attn",
                                                 lambda m: setattr(m.decoder.position_bias, "bidirectional", True)),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_real_mistake_fails_parity(mistake):
    name, block, spoil = MISTAKES[mistake]
    if name not in FAMILY_NAMES:
        pytest.skip(f"no {name} fixture")
    m = copy.deepcopy(model.load(FIXTURES / name))
    good, tol = _worst_pattern_error(m, name, block)
    spoil(m)
    bad, _ = _worst_pattern_error(m, name, block)
    assert good <= tol < 100 * tol < bad, (mistake, good, tol, bad)


# --- the reader ---------------------------------------------------------------------------------
def copy_folder(name: str, to: Path) -> Path:
    import shutil

    folder = to / name
    shutil.copytree(FIXTURES / name, folder)
    for f in ("reference.json", "reference.safetensors", "model.gguf"):
        (folder / f).unlink(missing_ok=True)
    return folder


def test_sharded_safetensors_read_as_one(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = copy_folder("llama", tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, ns in shards.items():
        save_file({n: state[n] for n in ns}, str(folder / file))
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: f for f, ns in shards.items() for n in ns}}))
    sharded = model.load(folder).run(["The cat sat on the mat."]).logits
    assert torch.equal(sharded, model.load(FIXTURES / "llama").run(["The cat sat on the mat."]).logits)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"][names[0]] = "../../etc/passwd.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(WeightsError, match="not a safetensors file in the folder"):
        model.load(folder)


def test_unknown_model_type_lists_the_supported_ones(tmp_path):
    folder = copy_folder("gpt2", tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "model_type": "falcon"}))
    with pytest.raises(WeightsError, match="'falcon' is not supported; supported model_types: gpt2, llama, "
                                           "mistral, qwen2, qwen3, gemma3_text, bert, roberta, distilbert, marian, t5"):
        model.load(folder)


@pytest.mark.parametrize("field, value, message", [
    ("hidden_size", 32, "has shape .* but the configuration"),
    ("num_hidden_layers", 100000, "num_hidden_layers is 100000; it should be from 1 to"),
    ("num_hidden_layers", 3, "num_hidden_layers is 3, but the file holds the tensors of 2 layer"),
    ("num_key_value_heads", 3, "num_key_value_heads .* must divide num_attention_heads"),
    ("rms_norm_eps", -1.0, "rms_norm_eps is -1.0"),
    ("rope_parameters", {"rope_type": "yarn", "factor": 4.0}, "rotary scaling 'yarn' is not supported"),
])
def test_sizes_checked_before_anything_is_read(tmp_path, monkeypatch, field, value, message):
    import model.files.hf as hf

    folder = copy_folder("llama", tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, field: value}))
    monkeypatch.setattr(hf, "read_tensors", lambda *a: pytest.fail("tensors read before the sizes were checked"))
    with pytest.raises(WeightsError, match=message):
        model.load(folder)


def test_pickles_are_never_read(tmp_path):
    folder = copy_folder("gpt2", tmp_path)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(WeightsError, match="never pickled"):
        model.load(folder)


def test_truncated_weights_are_a_weights_error(tmp_path):
    folder = copy_folder("t5", tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightsError, match="truncated or corrupt"):
        model.load(folder)


@pytest.mark.parametrize("name, dtype", [("qwen2", torch.bfloat16), ("gpt2", torch.float16),
                                         ("marian", torch.bfloat16), ("gemma3_text", torch.float16)])
def test_half_precision_folders_load_as_float32(tmp_path, name, dtype):
    """A checkpoint saved in bfloat16 or float16 (as most published ones are) loads with each weight
    exactly the file's value widened to float32, laid out as our part holds it (GPT-2's Conv1D
    transposed and c_attn split; Marian's one embedding for both stacks), and runs."""
    from safetensors.torch import load_file, save_file

    from model.files.hf import _to_ours, rename

    folder = copy_folder(name, tmp_path)
    theirs = {k: v.to(dtype).clone() for k, v in load_file(str(folder / "model.safetensors")).items()}
    save_file(theirs, str(folder / "model.safetensors"))
    m = model.load(folder)
    state, checked = m.state_dict(), 0
    for their, t in theirs.items():
        mine = rename(m.family.model_type, their)
        if mine is None or mine == "shared.weight":
            continue
        for k in [mine.replace("W_QKV", f"W_{x}") for x in "QKV"] if ".W_QKV." in mine else [mine]:
            assert state[k].dtype == torch.float32 and torch.equal(state[k], _to_ours(m.family, k, their, t.float())), k
            checked += 1
    assert checked >= 10
    if name == "marian":
        assert m.encoder.embed.weight.data_ptr() == m.decoder.embed.weight.data_ptr()  # held once
    out, _ = m.run_with_cache(["a b c"])
    assert out.logits is None or torch.isfinite(out.logits).all()


def test_integer_weights_are_refused_with_a_message(tmp_path, monkeypatch):
    """An integer tensor (a quantized checkpoint's int8 weights) would be read as its raw codes: it is
    refused, by its dtype in the header, before any tensor is read."""
    from safetensors.torch import load_file, save_file

    import model.files.hf as hf

    folder = copy_folder("llama", tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    name = next(k for k in sorted(state) if k.endswith("q_proj.weight"))
    state[name] = state[name].to(torch.int8)
    save_file(state, str(folder / "model.safetensors"))
    monkeypatch.setattr(hf, "read_tensors", lambda *a: pytest.fail("tensors read before the dtypes were checked"))
    with pytest.raises(WeightsError, match=rf"{name} is I8; weights are read as floating point only"):
        model.load(folder)


def test_the_info_describes_each_family():
    seen = {}
    for name in FAMILY_NAMES:
        i = model.load(FIXTURES / name).info
        seen[name] = (i.kind, i.norm, i.ffn, i.positional, i.qk_norm, i.sliding_window, i.window_layers)
    expected = {
        "bert": ("encoder", "post-LayerNorm", "GELU", "learned", False, 0, ()),
        "distilbert": ("encoder", "post-LayerNorm", "GELU", "learned", False, 0, ()),
        "roberta": ("encoder", "post-LayerNorm", "GELU", "learned", False, 0, ()),
        "gpt2": ("decoder", "pre-LayerNorm", "GELU (tanh)", "learned", False, 0, ()),
        "llama": ("decoder", "pre-RMSNorm", "SwiGLU", "rotary", False, 0, ()),
        "mistral": ("decoder", "pre-RMSNorm", "SwiGLU", "rotary", False, 3, (0, 1)),
        "qwen2": ("decoder", "pre-RMSNorm", "SwiGLU", "rotary", False, 4, (1,)),
        "qwen3": ("decoder", "pre-RMSNorm", "SwiGLU", "rotary", True, 4, (1,)),
        "gemma3_text": ("decoder", "sandwich-RMSNorm(1+w)", "GeGLU", "rotary", True, 3, (0,)),
        "marian": ("encoder-decoder", "post-LayerNorm", "GELU", "sinusoidal", False, 0, ()),
        "t5": ("encoder-decoder", "pre-RMSNorm", "ReLU", "relative", False, 0, ()),
    }
    assert seen == {k: v for k, v in expected.items() if k in seen}


# --- parts no fixture reaches ---------------------------------------------------------------------
def test_partial_and_interleaved_rotary():
    """Partial rotary rotates the first dims only; interleaved pairs are half-split pairs reordered
    (llama.cpp's permutation of W_Q/W_K rows)."""
    from model.arch.family import Rope
    from model.arch.parts import Rotary

    x = torch.randn(2, 3, 5, 8)  # (B, nh, T, hs)
    pos = torch.arange(5)
    part = Rotary(pos, Rope(base=100.0), dims=4).apply(x)
    assert torch.equal(part[..., 4:], x[..., 4:])
    assert torch.allclose(part[..., :4], Rotary(pos, Rope(base=100.0), dims=4).apply(x[..., :4]))
    assert not torch.allclose(part[..., :4], x[..., :4])
    order = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])  # interleaved position j holds half-split element order[j]
    half = Rotary(pos, Rope(base=100.0), dims=8).apply(x)
    inter = Rotary(pos, Rope(base=100.0), dims=8, interleaved=True).apply(x[..., order])
    assert torch.allclose(inter, half[..., order], atol=1e-6)


@pytest.mark.parametrize("name", ["qwen2", "gemma3_text", "gpt2"])
def test_a_left_padded_batch_generates_what_each_prompt_generates_alone(name):
    """Each sentence keeps its own positions and windows when prompts of different lengths share a batch."""
    m = model.load(FIXTURES / name)
    texts = ["The cat sat on the mat.", "Attention is all you need, they said."]
    batch = m.generate_with_cache(texts, max_new_tokens=5)
    for b, text in enumerate(texts):
        alone = m.generate_with_cache([text], max_new_tokens=5)
        assert batch.token_ids[b] == alone.token_ids[0]
        for t in range(len(alone.steps)):
            name_ = "decoder.blocks.1.self_attn.hook_pattern"
            n = alone.steps[t][name_].shape[-1]
            assert float32.close(batch.steps[t][name_][b, :, :, -n:], alone.steps[t][name_][0], m.info)


@pytest.mark.parametrize("which", ["shipped", "random, n = 100"])
def test_the_seed_is_one_more_description(which, tmp_path):
    """model/arch/seed.py's Seed is the parts built from model.arch.family.seed_family: one embedding matrix
    for both stacks and the output, and a weight file whose names are the shipped files' (a saved
    model reads back the same tensors and the same outputs). That its numbers are those of the seed's
    earlier, hand-written classes: tests/test_pinned.py."""
    from safetensors import safe_open

    from model.arch.family import seed_family
    from model.arch.generic import Transformer
    from model.registry import SEED_WEIGHTS

    seed = model.load("seed") if which == "shipped" else model.load("seed", random=True, pe_base=100.0, d_model=32, n_heads=2)
    assert isinstance(seed, Transformer) and seed.family == seed_family(seed.cfg)
    e = seed.encoder.embed.weight
    assert seed.decoder.embed.weight is e and seed.unembed.weight is e
    with safe_open(str(SEED_WEIGHTS["seed"]), "pt") as f:
        shipped = set(f.keys())
    assert set(seed.file_state()) == shipped
    seed.save(tmp_path / "again.safetensors")
    again = model.load(tmp_path / "again.safetensors")
    texts = ["hello world", "나는 학교에 간다"]
    (o1, c1), (o2, c2) = seed.run_with_cache(texts), again.run_with_cache(texts)
    assert o1.generated == o2.generated and torch.equal(o1.logits, o2.logits)
    assert all(torch.equal(c1[n], c2[n]) for n in seed.hook_names)
    assert again.info.positional_base == seed.info.positional_base


# --- GGUF files of qwen2 and qwen3 ---------------------------------------------------------------
GGUF_NAMES = {"embed_tokens": "token_embd", "norm": "output_norm", "input_layernorm": "attn_norm",
              "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
              "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"}


def write_gguf(name: str, path: Path, quantize: bool = False) -> None:
    """A fixture folder as llama.cpp's converter writes it (names, metadata, byte-level vocabulary)."""
    import gguf
    import numpy as np
    from safetensors.torch import load_file

    cfg = json.loads((FIXTURES / name / "config.json").read_text())
    tok = json.loads((FIXTURES / name / "tokenizer.json").read_text())
    w = gguf.GGUFWriter(str(path), name)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    if cfg.get("head_dim"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    specials = {t["content"] for t in tok["added_tokens"] if t["special"]}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([3 if t in specials else 1 for t, _ in vocab])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_pad_token_id(cfg["pad_token_id"])
    for hf_name, t in load_file(str(FIXTURES / name / "model.safetensors")).items():
        module, _, param = hf_name.removeprefix("model.").rpartition(".")
        if module == "lm_head":
            ours = "output"
        elif module.startswith("layers."):
            _, i, rest = module.split(".", 2)
            ours = f"blk.{i}.{GGUF_NAMES[rest]}"
        else:
            ours = GGUF_NAMES[module]
        a = t.numpy()
        if quantize and a.ndim == 2 and a.shape[1] % 32 == 0:
            w.add_tensor(f"{ours}.{param}", gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(f"{ours}.{param}", np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def same_as_folder(info, names, got, want, out, want_out) -> None:
    """Every hook and the logits of a GGUF's run agree with its folder's as far as float32 allows.

    The weights are equal, but not bit for bit the products: the two loaders' tensors sit at different
    memory alignments (seen: 24 or 56 bytes past a 64-byte boundary for the folder's, 0, 16, 32 or 48
    for the GGUF's), and the matrix kernels' rounding depends on it (on an AMD EPYC of this machine
    kind, qwen2's hook_k differed by 4.8e-7 with the weights equal). The tolerance is
    tests/float32.py's estimate."""
    for hook in names:
        a, b = got[hook], want[hook]
        finite = torch.isfinite(b)  # the masked scores' -inf: in the same places, compared as such
        assert torch.equal(finite, torch.isfinite(a)) and torch.equal(a[~finite], b[~finite]), hook
        assert float32.close(a[finite], b[finite], info), hook
    assert float32.close(out.logits, want_out.logits, info)


@pytest.mark.parametrize("name", ["qwen2", "qwen3"])
def test_a_gguf_reads_as_its_folder(name, tmp_path):
    """The same weights from a GGUF and from the folder give the same hooks (llama.cpp's qwen GGUFs
    carry no sliding window, so the folder is read with its window off); Q8_0 stays close."""
    if name not in FAMILY_NAMES:
        pytest.skip(f"no {name} fixture")
    folder = copy_folder(name, tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "use_sliding_window": False, "layer_types": None}))
    write_gguf(name, tmp_path / f"{name}.gguf")
    write_gguf(name, tmp_path / f"{name}-q8.gguf", quantize=True)
    texts = ["The cat sat on the mat.", "나는 학교에 간다."]
    want_out, want = model.load(folder).run_with_cache(texts)
    m = model.load(tmp_path / f"{name}.gguf")
    assert (m.info.family, m.info.sliding_window) == (name, 0)
    out, got = m.run_with_cache(texts)
    assert got.token_ids == want.token_ids and m.hook_names == model.load(folder).hook_names
    same_as_folder(m.info, m.hook_names, got, want, out, want_out)
    q8_out, q8 = model.load(tmp_path / f"{name}-q8.gguf").run_with_cache(texts)
    assert 0 < (q8["decoder.blocks.1.self_attn.hook_pattern"] - want["decoder.blocks.1.self_attn.hook_pattern"]).abs().max() < 0.05
    # a real difference fails the tolerance: Q8_0's rounding of the matrices it quantizes (~1/256 of
    # each block's largest), far above float32's
    assert not float32.close(q8_out.logits, want_out.logits, m.info)


def test_an_unsupported_gguf_architecture_is_named(tmp_path):
    import gguf

    path = tmp_path / "falcon.gguf"
    w = gguf.GGUFWriter(str(path), "falcon")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(WeightsError, match="'falcon' is not supported; supported: llama, qwen2, qwen3"):
        model.load(path)


def test_block_hooks_are_the_blocks_maths(family, runs):
    """Each stream hook is the sum or norm its name says, for every placement (post, pre with
    cross-attention, Gemma's sandwich): the hooks tell the block's story without the code."""
    name, m, _, _ = family
    _, (out, c) = runs
    close = dict(atol=1e-5, rtol=1e-5)
    for stack in m.info.stacks:
        blocks = getattr(m, stack).blocks
        for i, block in enumerate(blocks):
            b = f"{stack}.blocks.{i}."
            x, attn = c[b + "hook_resid_pre"], c[b + "self_attn.hook_out"]
            ffn = block.ffn.project(c[b + "hook_ffn_hidden"])
            assert torch.allclose(ffn, c[b + "hook_ffn_out"], **close)
            placement = m.info.norm.split("-")[0]
            if placement == "post":
                assert torch.equal(c[b + "hook_attn_sum"], x + attn)
                mid = c[b + "hook_resid_mid"]
                assert torch.allclose(mid, block.ln1(x + attn), **close)
                if b + "hook_cross_sum" in c:
                    assert torch.equal(c[b + "hook_cross_sum"], mid + c[b + "cross_attn.hook_out"])
                    mid = c[b + "hook_resid_mid_cross"]
                    assert torch.allclose(mid, block.ln_cross(c[b + "hook_cross_sum"]), **close)
                assert torch.equal(c[b + "hook_ffn_sum"], mid + c[b + "hook_ffn_out"])
                assert torch.allclose(c[b + "hook_resid_post"], block.ln2(c[b + "hook_ffn_sum"]), **close)
            elif placement == "pre":
                assert torch.allclose(c[b + "hook_attn_normed"], block.ln1(x), **close)
                mid = c[b + "hook_resid_mid"]
                assert torch.equal(mid, x + attn)
                if b + "hook_cross_normed" in c:
                    assert torch.allclose(c[b + "hook_cross_normed"], block.ln_cross(mid), **close)
                    assert torch.equal(c[b + "hook_resid_mid_cross"], mid + c[b + "cross_attn.hook_out"])
                    mid = c[b + "hook_resid_mid_cross"]
                assert torch.allclose(c[b + "hook_ffn_normed"], block.ln2(mid), **close)
                assert torch.equal(c[b + "hook_resid_post"], mid + c[b + "hook_ffn_out"])
            else:  # sandwich
                assert torch.allclose(c[b + "hook_attn_normed"], block.ln1(x), **close)
                assert torch.allclose(c[b + "hook_attn_out_normed"], block.ln1_post(attn), **close)
                mid = c[b + "hook_resid_mid"]
                assert torch.equal(mid, x + c[b + "hook_attn_out_normed"])
                assert torch.allclose(c[b + "hook_ffn_normed"], block.ln2(mid), **close)
                assert torch.allclose(c[b + "hook_ffn_out_normed"], block.ln2_post(c[b + "hook_ffn_out"]), **close)
                assert torch.equal(c[b + "hook_resid_post"], mid + c[b + "hook_ffn_out_normed"])
            if i:
                assert torch.equal(x, c[f"{stack}.blocks.{i - 1}.hook_resid_post"])
        first = c[f"{stack}.blocks.0.hook_resid_pre"]
        embedded = c[f"{stack}.hook_embed"] + (c[f"{stack}.hook_pos_embed"] if f"{stack}.hook_pos_embed" in c else 0)
        stack_ = getattr(m, stack)
        assert torch.allclose(first, embedded if stack_.ln_embed is None else stack_.ln_embed(embedded), **close)


def test_the_llama_gguf_fixture_reads_as_its_folder():
    """The llama fixture's GGUF (SentencePiece vocabulary: pieces, scores, types; Q/K rows in
    llama.cpp's order), read onto the parts: transformers' ids, and every hook of the folder."""
    gguf_file = FIXTURES / "llama" / "model.gguf"
    if not gguf_file.is_file():
        pytest.skip("no llama GGUF fixture")
    meta, ref = reference("llama")
    m, folder = model.load(gguf_file), model.load(FIXTURES / "llama")
    out, got = m.run_with_cache(meta["sentences"])
    want_out, want = folder.run_with_cache(meta["sentences"])
    assert got.token_ids == meta["input_ids"] and got.tokens == want.tokens
    same_as_folder(m.info, folder.hook_names, got, want, out, want_out)
    # a mistake of the kind the Q/K row order guards against (the queries' dimensions out of order,
    # a stand-in for llama.cpp's permutation left undone) is far outside the tolerance
    permuted = got["decoder.blocks.0.self_attn.hook_q"].flip(-1)
    assert not float32.close(permuted, want["decoder.blocks.0.self_attn.hook_q"], m.info)
    assert m.tokenizer.decode(got.token_ids[1]) == meta["sentences"][1]


GEMMA_GGUF_NAMES = {**GGUF_NAMES, "post_attention_layernorm": "post_attention_norm",
                    "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm"}


def write_gemma3_gguf(path: Path) -> None:
    """The gemma3 fixture as llama.cpp's converter writes it: norms stored as 1 + w, a SentencePiece
    vocabulary with no merges, the window and the local layers in the metadata."""
    import gguf
    import numpy as np
    from safetensors.torch import load_file

    cfg = json.loads((FIXTURES / "gemma3_text" / "config.json").read_text())
    tok = json.loads((FIXTURES / "gemma3_text" / "tokenizer.json").read_text())
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_parameters"]["full_attention"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_sliding_window(cfg["sliding_window"])
    w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg["layer_types"]])
    w.add_float32("gemma3.final_logit_softcapping", cfg["final_logit_softcapping"])
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    specials = {t["content"] for t in tok["added_tokens"] if t["special"]}
    w.add_tokenizer_model("llama")
    w.add_token_list([t for t, _ in vocab])
    w.add_token_scores([-float(i) for i in range(len(vocab))])
    w.add_token_types([3 if t in specials else 6 if t.startswith("<0x") else 1 for t, _ in vocab])
    for key, value in (("bos", cfg["bos_token_id"]), ("eos", cfg["eos_token_id"]), ("pad", cfg["pad_token_id"])):
        getattr(w, f"add_{key}_token_id")(value)
    for hf_name, t in load_file(str(FIXTURES / "gemma3_text" / "model.safetensors")).items():
        module, _, param = hf_name.removeprefix("model.").rpartition(".")
        if module.startswith("layers."):
            _, i, rest = module.split(".", 2)
            ours = f"blk.{i}.{GEMMA_GGUF_NAMES[rest]}"
        else:
            ours = GEMMA_GGUF_NAMES[module]
        a = t.numpy() + (1.0 if hf_name.endswith("norm.weight") else 0.0)  # the converter's norm shift
        w.add_tensor(f"{ours}.{param}", np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_gemma3_gguf_reads_as_its_folder(tmp_path):
    """Gemma 3 from a GGUF: the same numbers as the folder on the same ids (the (1 + w) read from
    the file's shifted norms, the window and local layers from its metadata); its tokenizer is
    Gemma's (no space before the first word) and gives the text back."""
    if "gemma3_text" not in FAMILY_NAMES:
        pytest.skip("no gemma3 fixture")
    write_gemma3_gguf(tmp_path / "gemma3.gguf")
    m, folder = model.load(tmp_path / "gemma3.gguf"), model.load(FIXTURES / "gemma3_text")
    assert (m.info.family, m.info.sliding_window, m.info.window_layers, m.info.qk_norm, m.info.final_softcap) == \
        ("gemma3_text", 3, (0,), True, 8.0)
    meta, _ = reference("gemma3_text")
    texts = meta["sentences"]
    ids = m.tokenizer.encode(texts)
    assert all(m.tokenizer.decode(e.ids) == t for e, t in zip(ids, texts))
    assert ids[0].tokens[:3] == ["<bos>", "The", "▁cat"]  # Gemma's: no "▁" before the first word
    m.tokenizer = folder.tokenizer  # the same ids into both
    out, got = m.run_with_cache(texts)
    want_out, want = folder.run_with_cache(texts)
    for hook in folder.hook_names:
        assert two_runs_agree(got[hook], want[hook], m.info), hook
    assert float32.close(out.logits, want_out.logits, m.info)


@pytest.mark.parametrize("name, field, value", [("gpt2", "n_embd", 32), ("t5", "d_kv", 8), ("marian", "d_model", 32),
                                                ("roberta", "max_position_embeddings", 80)])
def test_a_configuration_its_tensors_contradict_is_refused(tmp_path, name, field, value):
    """Shapes compared in our layout (GPT-2's Conv1D split and transposed, Marian's (1, V) bias,
    RoBERTa's offset rows) before any tensor is read."""
    folder = copy_folder(name, tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, field: value}))
    with pytest.raises(WeightsError, match=r"has shape \(.*\), but the configuration"):
        model.load(folder)


def test_weights_laid_out_for_the_products_with_the_same_numbers(family, runs):
    """model.arch.generic.Transformer.lay_out_weights: every self-attention's W_Q, W_K, W_V are views of
    one fused matrix, and every projection to fewer features is stored input-major; names and
    shapes as before. A copy of the model with plain, separately stored weights gives the same
    patterns and logits within two float32 runs' rounding (tests/float32.py)."""
    name, m, meta, _ = family
    fused = [mod for mod in m.modules() if getattr(mod, "qkv_weight", None) is not None]
    if not m.family.conv1d:  # a folder's weights are the file's mapped pages, used as they lie (model/files/hf.py)
        assert not fused
        m = model.load(FIXTURES / name)
        m.lay_out_weights()  # as a GGUF's or the float cache's weights are
        fused = [mod for mod in m.modules() if getattr(mod, "qkv_weight", None) is not None]
        runs = (None, m.run_with_cache(meta["sentences"]))
    assert fused, "no self-attention was fused"
    for attn in fused:
        base = attn.qkv_weight.untyped_storage().data_ptr()
        for lin in (attn.W_Q, attn.W_K, attn.W_V):
            assert lin.weight.untyped_storage().data_ptr() == base
        assert attn.W_Q.weight.shape == (attn.n_heads * attn.d_head, m.info.d_model)
    in_fused = {id(lin) for attn in fused for lin in (attn.W_Q, attn.W_K, attn.W_V)}
    narrowing = [mod for mod in m.modules() if isinstance(mod, torch.nn.Linear) and id(mod) not in in_fused
                 and mod.in_features > mod.out_features]
    assert narrowing and all(mod.weight.T.is_contiguous() for mod in narrowing)

    plain = copy.deepcopy(m)
    for mod in plain.modules():
        if getattr(mod, "qkv_weight", None) is not None:
            mod.qkv_weight = mod.qkv_bias = None
        if isinstance(mod, torch.nn.Linear):
            mod.weight = torch.nn.Parameter(mod.weight.detach().contiguous().clone(), requires_grad=False)
    assert not any(getattr(mod, "qkv_weight", None) is not None for mod in plain.modules())
    out_a, cache_a = runs[1]
    out_b, cache_b = plain.run_with_cache(meta["sentences"])
    for hook in [h for h in cache_a if h.endswith(("hook_pattern", "hook_q", "hook_out"))]:
        assert two_runs_agree(cache_a[hook], cache_b[hook], m.info), hook
    if out_a.logits is not None:
        assert two_runs_agree(out_a.logits, out_b.logits, m.info)
    # and a real mistake (W_Q's rows in reverse order) is far outside that rounding
    bad = copy.deepcopy(plain)
    attn = next(mod for mod in bad.modules() if hasattr(mod, "W_Q") and hasattr(mod, "fuse"))
    attn.W_Q.weight = torch.nn.Parameter(attn.W_Q.weight.detach().flip(0).clone(), requires_grad=False)
    _, cache_c = bad.run_with_cache(meta["sentences"])
    last = [h for h in cache_a if h.endswith("hook_resid_post")][-1]
    assert not two_runs_agree(cache_a[last], cache_c[last], m.info)


def test_a_bert_config_written_before_model_type_existed_loads_as_bert(tmp_path):
    """Old BERT config.json files (all-MiniLM's first upload among them) name only their class; one
    that names neither a model_type nor a BERT class is refused with the supported types listed."""
    import shutil

    folder = tmp_path / "old-bert"
    shutil.copytree(FIXTURES / "bert", folder)
    cfg = json.loads((folder / "config.json").read_text())
    del cfg["model_type"]
    (folder / "config.json").write_text(json.dumps(cfg))
    old, new = model.load(folder), model.load(FIXTURES / "bert")
    assert old.info.family == "bert"
    texts = ["the cat", "a dog sat"]
    assert torch.equal(old.run(texts).hidden, new.run(texts).hidden)
    cfg["architectures"] = ["SomethingElse"]
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(WeightsError, match="model_type None is not supported; supported model_types: gpt2"):
        model.load(folder)


def test_gpt2_defaults_of_50256_outside_a_small_vocabulary_load_with_a_note(tmp_path):
    """Many small test checkpoints keep GPT-2's default bos/eos id 50256 with a smaller vocab_size;
    transformers loads them, and so does this reader: the ids a run never looks up are ignored with a
    warning that names them. A pad id outside the vocabulary (a batch's padding looks it up) is still
    refused before anything is built."""
    import shutil

    folder = tmp_path / "gpt2-50256"
    shutil.copytree(FIXTURES / "gpt2", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(bos_token_id=50256, eos_token_id=50256)
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.warns(UserWarning, match=r"eos_token_id 50256 is not a token of the 330-token vocabulary; ignored"), \
            pytest.warns(UserWarning, match=r"bos_token_id 50256 is not a token of the 330-token vocabulary; ignored"):
        m = model.load(folder)
    ref = model.load(FIXTURES / "gpt2")
    texts = ["the cat sat", "a dog"]
    assert torch.equal(m.run(texts).logits, ref.run(texts).logits)
    assert len(m.generate_with_cache(["the cat"], max_new_tokens=4).token_ids[0]) == 4  # never stops on 50256
    cfg["pad_token_id"] = 50256
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.warns(UserWarning, match="eos_token_id 50256"), \
            pytest.raises(WeightsError, match=r"pad_token_id is 50256, outside the vocabulary \(vocab_size=330\)"):
        model.load(folder)
