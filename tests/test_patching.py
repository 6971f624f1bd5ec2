"""Activation patching (issue 26, item 6): model/analysis/patching.py against hand-made hooks, its real checks,
cancellation and the bound; the stage "patching" (its table, its messages), the app (a second sentence
of another token count gets a clear message; the experiment runs from its button; the hosted bound),
and its Korean export.

The patched forwards are batched (many copies of the corrupted sentence, each row patched at its own
cell); a hand-made hook on one sentence alone computes the same cell, so the two agree to float32
rounding between batch shapes (tests/float32.py): the tolerance is that estimate, and a patch at the
wrong position or layer is shown to miss it by far.
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import float32
import pytest
import torch
from helpers import app, cli, ok

import model
from explorer import export as ex
from explorer import state
from explorer.views import stages
from model import fetch
from model.analysis import patching
from model.runtime.hooks import hooks

SEED_PAIR = ("hello world", "hello worle")  # the seed writes the reverse: the first character differs
SMOL_PAIR = ("The capital of France is the city of", "The capital of Italy is the city of")


@pytest.fixture(scope="module")
def seed():
    try:
        return model.load("seed")
    except model.WeightsError:
        return model.load("seed", random=True)


@pytest.fixture(scope="module")
def smol():
    if not fetch.is_fetched("smollm2"):
        pytest.skip(f"smollm2 not fetched (run `{fetch.fetch_command('smollm2')}`)")
    return model.load("smollm2")


def tol(info, logits: torch.Tensor) -> float:
    """log p moves by at most 2·max|Δlogit| between two float32 runs (tests/float32.py)."""
    return float32.logprob_error(float32.tolerance(info, logits))


# --- by hand: one cell, one hook, one sentence ------------------------------------------------------

@torch.no_grad()
def hand_decoder(m, clean: str, corrupted: str, name: str, index, answer: int) -> tuple[float, torch.Tensor]:
    """The corrupted sentence alone, ``name``'s tensor at ``index`` (batch row 0) taken from the clean run."""
    _, cache = m.run_with_cache([clean], names=[name])
    src = cache[name][0]

    def put(x, _name):
        x = x.clone()
        x[(0, *index)] = src[index]
        return x

    with hooks({name: put}):
        logits = m.run([corrupted]).logits[0, -1]
    return float(torch.log_softmax(logits.float(), -1)[answer]), logits


@torch.no_grad()
def hand_seed(m, clean: str, corrupted: str, name: str, index, res: patching.PatchResult) -> tuple[float, torch.Tensor]:
    """The seed: the decoder reads <s> + the clean run's output (from run_with_cache) up to the scored
    position, under teacher forcing; one tensor of the corrupted run's forward taken from the clean one."""
    out, cache = m.run_with_cache([clean, corrupted])
    tgt = torch.tensor([cache.decoder_token_ids[0][: res.scored + 1]])  # (1, T)
    src = [torch.tensor([ids]) for ids in cache.token_ids]  # the same length: no padding
    store = {}
    with hooks({name: lambda x, n: store.__setitem__(n, x.clone())}):
        m(src[0], tgt)

    def put(x, _name):
        x = x.clone()
        x[(0, *index)] = store[name][(0, *index)]
        return x

    with hooks({name: put}):
        logits = m(src[1], tgt)[0, res.scored]
    return float(torch.log_softmax(logits.float(), -1)[res.answer_id]), logits


@pytest.mark.weights
def test_smollm2_table_equals_hand_made_hooks_on_two_cells(smol):
    res = patching.patch_positions(smol, *SMOL_PAIR)
    assert res.answer == " Paris" and res.clean_logp > -0.5 and res.corrupted_logp < -3
    n_layers, T = smol.info.n_layers, len(res.clean_tokens)
    assert (len(res.logp), len(res.logp[0])) == (n_layers, T) and res.forwards == n_layers * T
    france = res.clean_tokens.index(" France")
    for layer, pos in ((2, france), (17, T - 1)):
        name = f"decoder.blocks.{layer}.hook_resid_post"
        want, logits = hand_decoder(smol, *SMOL_PAIR, name, (pos,), res.answer_id)
        assert abs(res.logp[layer][pos] - want) <= tol(smol.info, logits), (layer, pos)
    # a patch one position off is far outside the tolerance: the check can fail
    wrong, logits = hand_decoder(smol, *SMOL_PAIR, "decoder.blocks.2.hook_resid_post", (france - 1,), res.answer_id)
    assert abs(res.logp[2][france] - wrong) > 100 * tol(smol.info, logits)


@pytest.mark.weights
def test_smollm2_last_layer_recovers_the_clean_answer_only_at_the_last_position(smol):
    res = patching.patch_positions(smol, *SMOL_PAIR, batch_size=7)
    last = res.logp[-1]
    _, logits = hand_decoder(smol, SMOL_PAIR[1], SMOL_PAIR[1], "decoder.blocks.0.hook_resid_post", (0,), 0)
    t = tol(smol.info, logits)
    assert abs(last[-1] - res.clean_logp) <= t  # the last layer's last position is all the answer reads
    for v in last[:-1]:  # an earlier position after the last layer can no longer reach it (causal)
        assert abs(v - res.corrupted_logp) <= t
    heads = patching.patch_heads(smol, *SMOL_PAIR)
    assert (len(heads.logp), len(heads.logp[0])) == (smol.info.n_layers, smol.info.n_heads)
    want, logits = hand_decoder(smol, *SMOL_PAIR, "decoder.blocks.3.self_attn.hook_z", (5, slice(None)),
                                heads.answer_id)
    assert abs(heads.logp[3][5] - want) <= tol(smol.info, logits)


def test_seed_table_equals_hand_made_hooks_on_two_cells(seed):
    res = patching.patch_positions(seed, *SEED_PAIR)
    assert res.stack == "encoder" and len(res.logp) == seed.info.n_layers
    assert len(res.logp[0]) == len(seed.tokenizer.encode([SEED_PAIR[0]])[0].ids)
    diff = next(i for i, (a, b) in enumerate(zip(res.clean_tokens, res.corrupted_tokens)) if a != b)
    for layer, pos in ((0, diff), (seed.info.n_layers - 1, 2)):
        want, logits = hand_seed(seed, *SEED_PAIR, f"encoder.blocks.{layer}.hook_resid_post", (pos,), res)
        assert abs(res.logp[layer][pos] - want) <= tol(seed.info, logits), (layer, pos)
    heads = patching.patch_heads(seed, *SEED_PAIR, block="decoder.cross_attn")
    want, logits = hand_seed(seed, *SEED_PAIR, "decoder.blocks.1.cross_attn.hook_z", (2, slice(None)), heads)
    assert abs(heads.logp[1][2] - want) <= tol(seed.info, logits)


def test_seed_scores_the_first_place_the_corrupted_sentence_changes(seed):
    res = patching.patch_positions(seed, *SEED_PAIR)
    out, _ = seed.run_with_cache(list(SEED_PAIR))
    first = next(i for i, (a, b) in enumerate(zip(*out.generated)) if a != b)
    assert res.scored == first and res.context[0] == "<s>" and len(res.context) == first + 1
    assert res.answer == out.generated[0][first]
    assert res.clean_logp > res.corrupted_logp + 1
    dec = patching.patch_positions(seed, *SEED_PAIR, stack="decoder")
    assert abs(dec.logp[-1][dec.scored] - dec.clean_logp) <= 1e-4  # the last decoder layer at the scored position
    same = patching.patch_positions(seed, "hello world", "hello world")  # nothing differs: the end is scored
    assert same.answer == "</s>" and same.scored == len(same.context) - 1


def test_batches_give_the_same_table(seed):
    a = patching.patch_positions(seed, *SEED_PAIR, batch_size=1)
    b = patching.patch_positions(seed, *SEED_PAIR, batch_size=64)
    assert torch.allclose(torch.tensor(a.logp), torch.tensor(b.logp), atol=1e-3)


def test_progress_cancel_and_the_bound(seed):
    seen = []
    res = patching.patch_positions(seed, *SEED_PAIR, batch_size=5, progress=lambda d, n: seen.append((d, n)))
    total = res.forwards
    assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted({min(total, k) for k in range(5, total + 5, 5)})
    calls = []
    with pytest.raises(patching.PatchingCancelled, match=f"after 5 of {total}"):
        patching.patch_positions(seed, *SEED_PAIR, batch_size=5, progress=lambda d, n: calls.append(d),
                                 cancel=lambda: bool(calls))
    assert calls == [5]  # asked between batches: one batch ran, then it stopped
    ran = []
    with pytest.raises(patching.PatchingTooLarge, match=f"needs {total} forward passes, more than the 10 allowed"):
        patching.patch_positions(seed, *SEED_PAIR, max_forwards=10, progress=lambda d, n: ran.append(d))
    assert ran == []  # refused before anything ran
    assert patching.patch_positions(seed, *SEED_PAIR, max_forwards=total).forwards == total
    assert patching.count_forwards(seed, *SEED_PAIR) == total


def test_clear_errors(seed):
    with pytest.raises(patching.PatchingError, match="same number of tokens.*has 12, the second 3"):
        patching.patch_positions(seed, "hello world", "hi")
    with pytest.raises(ValueError, match="batch_size"):
        patching.patch_positions(seed, *SEED_PAIR, batch_size=0)
    with pytest.raises(patching.PatchingError, match="stack"):
        patching.patch_positions(seed, *SEED_PAIR, stack="middle")


@pytest.mark.weights
def test_an_encoder_alone_needs_an_output_head():
    if not fetch.is_fetched("minilm"):
        pytest.skip("minilm not fetched")
    m = model.load("minilm")
    with pytest.raises(patching.PatchingError, match="without an output head"):
        patching.patch_positions(m, "hello world", "hello there")
    assert not stages.applies("patching", m.info)
    run = stages.run_data(m, ["hello world"])
    fig, df = stages.stage_figure("patching", run, m.info, stages.Selection("minilm", 0, 0, 0, "encoder.self_attn"),
                                  other=stages.run_data(m, ["hello there"]))
    assert df is None and "output head" in fig.layout.annotations[0].text


# --- the stage ---------------------------------------------------------------------------------------

def test_the_stage_draws_the_result_and_says_what_is_missing(seed):
    run = stages.run_data(seed, [SEED_PAIR[0], "another sentence"])
    other = stages.run_data(seed, [SEED_PAIR[1]], with_weights=False)
    res = patching.patch_positions(seed, *SEED_PAIR)
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    fig, df = stages.stage_figure("patching", run, seed.info, sel, other=other, patches=res)
    assert list(df.columns) == ["layer", "position", "logp"]
    assert len(df) == len(res.logp) * len(res.logp[0])
    assert df.set_index(["layer", "position"]).loc[(1, 3), "logp"] == pytest.approx(res.logp[1][3])
    (heat,) = fig.data
    assert list(fig.layout.xaxis.ticktext[:3]) == ["h", "e", "l"]
    assert "d" in fig.layout.title.subtitle.text and "&lt;s&gt;" in fig.layout.title.subtitle.text
    heads = patching.patch_heads(seed, *SEED_PAIR)
    _, hdf = stages.stage_figure("patching", run, seed.info, sel, other=other, patches=heads)
    assert list(hdf.columns) == ["layer", "head", "logp"] and len(hdf) == seed.info.n_layers * seed.info.n_heads
    kfig, kdf = stages.stage_figure("patching", run, seed.info, sel, lang="ko", other=other, patches=res)
    assert list(kdf.columns) == ["레이어", "위치", "로그확률"]
    from test_i18n import clean, english_words, figure_strings, table_strings

    seen = [clean(x) for x in figure_strings(kfig.to_dict())] + list(table_strings(kdf))
    assert not english_words().found(seen)  # no English in Korean
    # without the second sentence, with another token count, without the result (or another pair's)
    for opts, words in (({}, "second sentence"),
                        ({"other": stages.run_data(seed, ["hi"])}, "this one has 12, the second 3"),
                        ({"other": other}, "has not run"),
                        ({"other": other, "patches": patching.patch_positions(seed, "abc", "abd")}, "has not run")):
        fig, df = stages.stage_figure("patching", run, seed.info, sel, **opts)
        assert df is None and words in fig.layout.annotations[0].text, opts
    ko, _ = stages.stage_figure("patching", run, seed.info, sel, lang="ko", other=stages.run_data(seed, ["hi"]))
    assert "토큰 수가 같은" in ko.layout.annotations[0].text


def test_user_text_in_the_figure_is_escaped(seed):
    pair = ("<b>a&b</b>", "<i>a&b</i>")
    res = patching.patch_positions(seed, *pair)
    run = stages.run_data(seed, [pair[0]])
    fig, _ = stages.stage_figure("patching", run, seed.info, stages.Selection("seed", 0, 0, 0, "encoder.self_attn"),
                                 other=stages.run_data(seed, [pair[1]]), patches=res)
    import helpers

    text = json.dumps(fig.to_dict()["layout"], ensure_ascii=False) + json.dumps(
        [list(map(str, t.customdata.ravel())) for t in fig.data], ensure_ascii=False)
    assert not helpers.RAW_MARKUP.search(text.replace("<br>", "").replace("<extra></extra>", ""))


def test_korean_export_of_patching(seed):
    run = stages.run_data(seed, [SEED_PAIR[0]])
    other = stages.run_data(seed, [SEED_PAIR[1]], with_weights=False)
    res = patching.patch_positions(seed, *SEED_PAIR)
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    formats = ["csv"] + (["svg"] if ex.unavailable_reason() is None else [])
    data = ex.bundle_zip(run, seed.info, sel, model_name="seed", text=SEED_PAIR[0], stages=["patching"],
                         formats=formats, lang="ko", other=other, patches=res)
    zf = zipfile.ZipFile(io.BytesIO(data))
    doc = json.loads(zf.read("manifest.json"))
    assert doc["compare"] == SEED_PAIR[1] and {f["stage"] for f in doc["files"]} == {"patching"}
    (csv_name,) = [n for n in zf.namelist() if n.endswith(".csv")]
    head = zf.read(csv_name).decode("utf-8-sig").splitlines()[0]
    assert "레이어" in head and "위치" in head and "로그확률" in head
    if "svg" in formats:
        (svg,) = [n for n in zf.namelist() if n.endswith(".svg")]
        assert "활성 패칭" in zf.read(svg).decode("utf-8")


# --- the app -----------------------------------------------------------------------------------------

@pytest.mark.timeout(600)
def test_the_app_says_clearly_when_the_token_counts_differ():
    at = app(view="compare", text="hello world", compare="hi")
    ok(at, strict=True)
    msgs = [w.value for w in at.warning]
    assert any("same number of tokens" in w and "this one has 12, the second 3" in w for w in msgs), msgs
    assert not [b for b in at.button if b.key == "patch_go"]  # nothing to run


@pytest.mark.timeout(600)
def test_the_app_runs_patching_from_its_button_and_caches_it(monkeypatch):
    calls = []
    real = patching.patch

    def counted(*a, **kw):
        calls.append(a[1:4])
        return real(*a, **kw)

    monkeypatch.setattr(patching, "patch", counted)
    state._PATCHES.clear()
    at = app(view="compare", text="hello world", compare="hello worle")
    ok(at, strict=True)
    assert any("has not run" in json.dumps(json.loads(c.proto.spec)) for c in at.get("plotly_chart"))
    at.button(key="patch_go").click().run()
    ok(at, strict=True)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    heat = [s for s in specs if s["layout"].get("title", {}).get("text", "").startswith("Activation patching")
            and any(t.get("type") == "heatmap" for t in s["data"])]
    assert heat and calls == [("hello world", "hello worle", "positions")]
    at.sidebar.slider(key="head").set_value(1).run()  # a rerun: the cached result, no new experiment
    ok(at, strict=True)
    assert len(calls) == 1
    at.radio(key="patch_kind").set_value("heads").run()
    at.button(key="patch_go").click().run()
    ok(at, strict=True)
    assert calls[-1] == ("hello world", "hello worle", "heads")
    assert at.query_params.get("patch") in ("heads", ["heads"])  # the URL follows the choice
    again = app(view="compare", text="hello world", compare="hello worle", patch="heads")
    assert again.session_state["patch_kind"] == "heads"


@pytest.mark.timeout(600)
def test_the_app_refuses_past_the_hosted_bound(monkeypatch):
    monkeypatch.setattr(state, "HOSTED", True)
    monkeypatch.setattr(state, "PATCH_MAX_FORWARDS", 5)
    at = app(view="compare", text="hello world", compare="hello worle")
    ok(at, strict=True)
    msgs = [w.value for w in at.warning]
    assert any("needs 24 forward passes" in w and "at most 5" in w for w in msgs), msgs
    assert not [b for b in at.button if b.key == "patch_go"]


def test_the_exporter_computes_patching_for_compare(tmp_path):

    out = tmp_path / "csv"
    r = cli("--model", "seed", "--text", SEED_PAIR[0], "--compare", SEED_PAIR[1], "--stages", "patching",
                "--format", "csv", "--lang", "ko", "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    (csv_path,) = out.glob("*.csv")
    lines = csv_path.read_text("utf-8-sig").splitlines()
    assert lines[0].split(",")[-3:] == ["레이어", "위치", "로그확률"]  # after the row index
    assert len(lines) == 1 + model.load("seed").info.n_layers * 12
    r = cli("--model", "seed", "--text", SEED_PAIR[0], "--compare", "hi", "--stages", "patching",
                "--format", "csv", "--out", str(tmp_path / "none"), "--quiet")
    assert r.returncode == 0 and not list((tmp_path / "none").glob("*.csv"))  # no table: the figure says why


FAMILIES = Path(__file__).parent / "fixtures" / "families"


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2", "qwen3", "mistral", "gemma3_text"])
def test_every_decoder_family_patches(family):
    """Patching reads a decoder through its own runs (m.run), whatever the family (issue 24's tiny
    fixtures): the last layer's last position gives back the clean log p, an earlier one the corrupted."""
    path = FAMILIES / family
    if not path.is_dir():
        pytest.skip(f"no fixture {family}")
    m = model.load(str(path))
    res = patching.patch_positions(m, "a b c d", "a b e d")
    assert abs(res.logp[-1][-1] - res.clean_logp) <= 1e-4
    assert all(abs(v - res.corrupted_logp) <= 1e-4 for v in res.logp[-1][:-1])
    assert len(patching.patch_heads(m, "a b c d", "a b e d").logp[0]) == m.info.n_heads


def hand_seq2seq(m, clean: str, corrupted: str, name: str, index, res: patching.PatchResult) -> tuple[float, torch.Tensor]:
    """Any encoder–decoder, by its common interface: the decoder reads its start token + the clean
    run's greedy output up to the scored position; one tensor of the corrupted run taken from the clean one."""
    encs, _src, _real, _ = m.source([clean, corrupted])
    written = m.greedy(torch.tensor([encs[0].ids]), min(len(encs[0].ids) + 8, m.info.max_len - 1))[0]
    tgt = torch.tensor(m.decoder_input([written]))[:, : res.scored + 1]  # (1, T)
    src = [torch.tensor([e.ids]) for e in encs]  # the same length: no padding
    store = {}
    with torch.inference_mode(), hooks({name: lambda x, n: store.__setitem__(n, x.clone())}):
        m.teacher_forced(src[0], tgt)

    def put(x, _name):
        x = x.clone()
        x[(0, *index)] = store[name][(0, *index)]
        return x

    with torch.inference_mode(), hooks({name: put}):
        logits = m.teacher_forced(src[1], tgt)[0, res.scored]
    return float(torch.log_softmax(logits.float(), -1)[res.answer_id]), logits


@pytest.mark.parametrize("family", ["t5", "marian"])
def test_other_encoder_decoders_patch_through_the_common_interface(family):
    """T5 (pre-RMSNorm, relative positions, its start token the pad token) and Marian patch as the
    seed does: each table's cells equal hand-made hooks on the same teacher-forced decoder input."""
    path = FAMILIES / family
    if not path.is_dir():
        pytest.skip(f"no fixture {family}")
    m = model.load(str(path))
    pair = ("a b c d", "a b e d")
    res = patching.patch_positions(m, *pair)
    assert res.stack == "encoder" and len(res.logp) == m.info.n_layers
    assert len(res.logp[0]) == len(m.source([pair[0]])[0][0].ids)
    diff = next(i for i, (a, b) in enumerate(zip(res.clean_tokens, res.corrupted_tokens)) if a != b)
    for layer in range(m.info.n_layers):
        want, logits = hand_seq2seq(m, *pair, f"encoder.blocks.{layer}.hook_resid_post", (diff,), res)
        assert abs(res.logp[layer][diff] - want) <= tol(m.info, logits), (layer, diff)
    heads = patching.patch_heads(m, *pair, block="decoder.cross_attn")
    last = m.info.n_decoder_layers - 1
    want, logits = hand_seq2seq(m, *pair, f"decoder.blocks.{last}.cross_attn.hook_z", (0, slice(None)), heads)
    assert abs(heads.logp[last][0] - want) <= tol(m.info, logits)
    # and the table is not the corrupted run everywhere: the differing token's stream moves the answer
    assert abs(res.logp[-1][diff] - res.corrupted_logp) > tol(m.info, logits)


@pytest.mark.parametrize("family", ["t5", "marian"])
def test_the_exporter_writes_the_patching_table_of_other_encoder_decoders(tmp_path, family):

    path = FAMILIES / family
    if not path.is_dir():
        pytest.skip(f"no fixture {family}")
    out = tmp_path / "csv"
    r = cli("--model", str(path), "--text", "a b c d", "--compare", "a b e d", "--stages", "patching",
                "--format", "csv", "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    (csv_path,) = out.glob("*.csv")
    lines = csv_path.read_text("utf-8-sig").splitlines()
    m = model.load(str(path))
    n = len(m.source(["a b c d"])[0][0].ids)
    assert len(lines) == 1 + m.info.n_layers * n  # a row per layer and source position
