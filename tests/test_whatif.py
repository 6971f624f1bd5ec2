"""What if and two sentences (issue 15), without a browser: the views on figure objects (each number
recomputed from the runs' tensors or the model's outputs), the run cache and the figure memo keyed
by the edits, export (captions, file names, manifest, the CLI's --edit/--compare), and click to
drill (the clickable copies and what a click chooses)."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import float32
from helpers import cli
import torch

import model
from explorer import export as ex
from explorer import i18n, state
from explorer.views import picking, stages
from explorer.views import whatif as wv
from explorer.views.attention import head_stats
from model import fetch

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["hello world", "안녕하세요"]


@pytest.fixture(scope="module")
def seed():
    return model.load("seed")


@pytest.fixture(scope="module")
def runs(seed):
    return {e: stages.run_data(seed, TEXTS, edits=e or None)
            for e in ("", "temperature=3", "ablate=decoder.cross_attn:1:*")}


def traces(fig, kind="heatmap"):
    return [t for t in fig.data if t.type == kind]


# --- alignment ------------------------------------------------------------------------------------

def test_align_pairs_matching_tokens_and_keeps_the_rest_apart():
    assert wv.align(list("abc"), list("axc")) == [(0, 0), (1, None), (None, 1), (2, 2)]
    assert wv.align(list("ab"), list("ab")) == [(0, 0), (1, 1)]
    assert wv.align([], list("a")) == [(None, 0)]
    a, b = np.arange(9.0).reshape(3, 3), 10 * np.arange(9.0).reshape(3, 3)
    slots = wv.align(list("abc"), list("axc"))
    d = wv.aligned_difference(a, b, slots, slots)
    assert d.shape == (4, 4)
    assert d[0, 0] == b[0, 0] - a[0, 0] and d[3, 3] == b[2, 2] - a[2, 2] and d[0, 3] == b[0, 2] - a[0, 2]
    assert np.isnan(d[1]).all() and np.isnan(d[:, 2]).all()  # "b" and "x" have no partner
    assert wv.slot_tokens(slots, list("abc"), list("axc")) == ["a", "①b", "②x", "c"]


# --- the what-if stages ---------------------------------------------------------------------------

def test_pattern_difference_is_edited_minus_intact_on_one_symmetric_scale(seed, runs):
    intact, edited = runs[""], runs["temperature=3"]
    assert (intact.edits, edited.edits) == ("", "temperature=3")
    sel = stages.Selection("seed", 1, 1, 2, "encoder.self_attn")
    fig, df = stages.stage_figure("whatif_pattern", intact, seed.info, sel, edited=edited)
    name = "encoder.blocks.1.self_attn.hook_pattern"
    a, b = intact[name][1, 2].astype(np.float64), edited[name][1, 2].astype(np.float64)
    assert not np.allclose(a, b)  # the edit did something
    panels = traces(fig)
    diff = [t for t in panels if t.coloraxis == "coloraxis2"]
    assert len(diff) == 1
    assert np.allclose(np.nan_to_num(np.asarray(panels[0].z, dtype=float)), a, atol=1e-6)
    assert np.allclose(np.nan_to_num(np.asarray(panels[1].z, dtype=float)), b, atol=1e-6)
    assert np.allclose(np.asarray(diff[0].z, dtype=float), b - a, atol=1e-6)
    assert np.array_equal(df.to_numpy(), b - a)  # the table: exact values
    axis = fig.layout.coloraxis2
    assert axis.cmin == -axis.cmax and axis.cmid == 0
    assert axis.cmax == pytest.approx(np.abs(b - a).max())
    assert "temperature=3" in fig.layout.title.subtitle.text
    same, df = stages.stage_figure("whatif_pattern", intact, seed.info, sel, edited=intact)  # nothing changed
    assert (df.to_numpy() == 0).all() and same.layout.coloraxis2.cmax == wv.MIN_CHANGE_RANGE


def test_without_an_edited_run_the_stages_say_what_to_choose(seed, runs):
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    for sid in ("whatif_pattern", "whatif_entropy", "whatif_output"):
        fig, df = stages.stage_figure(sid, runs[""], seed.info, sel, lang="ko")
        assert df is None and fig.layout.annotations[0].text == i18n.t("whatif.choose", "ko")
    fig, df = stages.stage_figure("compare_pattern", runs[""], seed.info, sel)
    assert df is None and fig.layout.annotations[0].text == i18n.t("compare.choose")


def entropy(p: np.ndarray, n: int) -> float:
    p = p[:n].astype(np.float64)
    return float(np.mean([-sum(x * np.log(x) for x in row if x > 0) for row in p]))


def test_entropy_before_and_after_equals_the_tensors(seed, runs):
    intact, edited = runs[""], runs["temperature=3"]
    sel = stages.Selection("seed", 0, 1, 3, "encoder.self_attn")
    fig, df = stages.stage_figure("whatif_entropy", intact, seed.info, sel, edited=edited)
    n = len(intact.tokens[0])
    want = {(run_name, li, h): entropy(run[f"encoder.blocks.{li}.self_attn.hook_pattern"][0, h], n)
            for run_name, run in (("a", intact), ("b", edited)) for li in range(2) for h in range(4)}
    bars = traces(fig, "bar")
    assert np.allclose(bars[0].y, [want["a", 1, h] for h in range(4)], atol=1e-6)  # layer 1
    assert np.allclose(bars[1].y, [want["b", 1, h] for h in range(4)], atol=1e-6)
    assert max(want["b", 1, h] - want["a", 1, h] for h in range(4)) > 0.05  # temperature 3 flattens
    change = np.asarray(traces(fig)[0].z, dtype=float)
    assert np.allclose(change, [[want["b", li, h] - want["a", li, h] for h in range(4)] for li in range(2)],
                       atol=1e-5)
    assert df.loc[(1, 3)].iloc[0] == pytest.approx(want["a", 1, 3]) and \
        df.loc[(1, 3)].iloc[1] == pytest.approx(want["b", 1, 3])
    shape = fig.layout.shapes[0]  # the selected head outlined
    assert (shape.x0, shape.y0) == (2.5, 0.5)
    assert stages.head_entropies(stages._context(intact, seed.info, sel, "en")).shape == (2, 4)
    assert head_stats(intact["encoder.blocks.0.self_attn.hook_pattern"][0, 0], n)[0] == pytest.approx(
        want["a", 0, 0])


def test_first_difference():
    assert wv.first_difference("abc", "abd") == 2
    assert wv.first_difference("ab", "abc") == 2
    assert wv.first_difference("", "x") == 0
    assert wv.first_difference("same", "same") is None


def test_the_seed_models_output_with_the_first_differing_character_marked(seed, runs):
    intact, edited = runs[""], runs["ablate=decoder.cross_attn:1:*"]
    a, b = intact.generated[0], edited.generated[0]
    first = next(i for i, (x, y) in enumerate(zip(a + "\0", b + "\1")) if x != y)
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    fig, df = stages.stage_figure("whatif_output", intact, seed.info, sel, edited=edited)
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1) == (first - 0.5, first + 0.5)
    assert f"first difference at character {first}" in fig.layout.title.subtitle.text
    assert "".join(df.iloc[:, 0]) == a and "".join(df.iloc[:, 1]) == b
    cells = np.asarray(traces(fig)[0].z)
    assert cells[0, first] == wv.DIFFERENT and (cells[0, :first] == wv.SAME).all()
    fig, _ = stages.stage_figure("whatif_output", intact, seed.info, sel, edited=intact)
    assert fig.layout.shapes == () and "identical" in fig.layout.title.subtitle.text


def fetched(name: str):
    if not fetch.is_fetched(name):
        pytest.skip(f"{name} not fetched (run `{fetch.fetch_command(name)}`)")
    return model.load(name)


@pytest.mark.weights
def test_smollm2_top_next_tokens_and_their_kl_equal_values_recomputed_from_the_runs():
    m = fetched("smollm2")
    texts = ["The capital of France is", "Hi"]
    edit = "ablate=decoder.self_attn:0:*"
    intact, edited = stages.run_data(m, texts), stages.run_data(m, texts, edits=edit)
    sel = stages.Selection("smollm2", 0, 0, 0, "decoder.self_attn")
    fig, df = stages.stage_figure("whatif_output", intact, m.info, sel, edited=edited, lang="ko")

    # 1. the figure shows the two runs' own values: float64 arithmetic on the same float32 arrays,
    # so they agree to float64 rounding (1e-12 is 10⁴ ulps of a probability)
    p, q = (torch.from_numpy(r.final_logprobs[0]).double() for r in (intact, edited))
    kl = torch.nn.functional.kl_div(q, p, log_target=True, reduction="sum").item()  # KL(p ‖ q)
    assert kl > 1e-3 and df.attrs["kl"] == pytest.approx(kl, rel=1e-12)
    assert f"KL(① ‖ ②) = {df.attrs['kl']:.4f} nat" in fig.layout.title.subtitle.text
    top_p, top_q = set(p.topk(10).indices.tolist()), set(q.topk(10).indices.tolist())
    assert set(df["id"]) == top_p | top_q
    row = df.iloc[0]
    assert row.iloc[2] == pytest.approx(p.exp()[int(row["id"])].item(), rel=1e-12)
    assert row.iloc[3] == pytest.approx(q.exp()[int(row["id"])].item(), rel=1e-12)
    assert df.iloc[0, 0] == m.token_text(int(df.iloc[0]["id"]))

    # 2. those runs are the model's: a separate forward of the same batch, within what two float32
    # forwards can differ by (tests/float32.py: the error estimated from the depth, the widths, the
    # final stream's norm and the output rows' norms)
    def forward(edits, offset=1):
        out, cache = m.run_with_cache(texts, edits=edits)
        last = len(cache.token_ids[0]) - offset
        h = m.decoder.finish(out.hidden[0, last])  # what the output projection reads: after the final norm
        return torch.log_softmax(out.logits[0, last].double(), -1), h.norm().item()

    (p2, h), (q2, _) = forward(None), forward(edit)
    W = m.unembed.weight  # the output rows (the embedding's, when tied)
    dz = float32.logit_error(m.info, h, W.norm(dim=-1).max().item())
    spread = (p.exp() * (p - q).abs()).sum().item()
    tol_p, tol_kl = float32.prob_error(dz), float32.kl_error(dz, spread)
    assert (p2.exp() - p.exp()).abs().max() <= tol_p and (q2.exp() - q.exp()).abs().max() <= tol_p
    kl2 = torch.nn.functional.kl_div(q2, p2, log_target=True, reduction="sum").item()
    assert abs(kl2 - kl) <= tol_kl
    # and a real mistake is far outside them: KL the wrong way round, the row before the last
    reversed_kl = torch.nn.functional.kl_div(p2, q2, log_target=True, reduction="sum").item()
    assert abs(reversed_kl - kl) > 3 * tol_kl, (reversed_kl, kl, tol_kl)
    wrong_row, _ = forward(None, offset=2)
    assert (wrong_row.exp() - p.exp()).abs().max() > 100 * tol_p


@pytest.mark.weights
def test_minilm_sentence_embedding_cosine_equals_the_value_recomputed_from_the_runs():
    m = fetched("minilm")
    texts = ["The cat sat on the mat.", "A longer sentence that pads the batch for the first one."]
    edit = "ablate=encoder.self_attn:0:*"
    intact, edited = stages.run_data(m, texts), stages.run_data(m, texts, edits=edit)
    sel = stages.Selection("minilm", 0, 0, 0, "encoder.self_attn")
    fig, df = stages.stage_figure("whatif_output", intact, m.info, sel, edited=edited)

    # 1. the figure shows the two runs' own embeddings (float64 arithmetic on the same arrays)
    u, v = (torch.from_numpy(r.embedding[0]).double() for r in (intact, edited))
    cos = torch.nn.functional.cosine_similarity(u, v, dim=0).item()
    assert cos < 0.999 and df.attrs["cosine"] == pytest.approx(cos, abs=1e-12)
    assert f"cos(①, ②) = {df.attrs['cosine']:.4f}" in fig.layout.title.subtitle.text
    assert np.allclose(df.iloc[:, 0], u.numpy(), rtol=0, atol=1e-7)  # stored float32: ≤ 1 ulp of a unit vector

    # 2. those embeddings are the model's: the mean over the real tokens of a separate forward's last
    # stream, within what two float32 forwards differ by (tests/float32.py: direction_error)
    def emb(edits, *, pads=False):
        out, cache = m.run_with_cache(texts, edits=edits)
        n = out.hidden.shape[1] if pads else len(cache.token_ids[0])
        return torch.nn.functional.normalize(out.hidden[0, :n].double().mean(0), dim=0)

    tol = float32.direction_error(m.info)
    u2, v2 = emb(None), emb(edit)
    assert (u2 - u).norm() <= tol and (v2 - v).norm() <= tol
    assert abs(torch.dot(u2, v2).item() - cos) <= 2 * tol
    # and a real mistake is far outside it: the mean taken over the pad positions too
    assert (emb(None, pads=True) - u).norm() > 10 * tol


def test_two_sentences_are_aligned_by_token_and_unmatched_rows_and_columns_marked(seed, runs):
    other = stages.run_data(seed, ["hello word"])
    sel = stages.Selection("seed", 0, 0, 1, "encoder.self_attn")
    fig, df = stages.stage_figure("compare_pattern", runs[""], seed.info, sel, other=other)
    a = runs[""]["encoder.blocks.0.self_attn.hook_pattern"][0, 1].astype(np.float64)
    b = other["encoder.blocks.0.self_attn.hook_pattern"][0, 1].astype(np.float64)
    ta, tb = runs[""].tokens[0], other.tokens[0]  # "hello world</s>" vs "hello word</s>"
    assert len(ta) == len(tb) + 1
    slots = wv.align(ta, tb)
    assert df.shape == (len(slots), len(slots))
    for r, (i, i2) in enumerate(slots):
        for c, (j, j2) in enumerate(slots):
            if None in (i, i2, j, j2):
                assert np.isnan(df.iat[r, c])
            else:
                assert df.iat[r, c] == b[i2, j2] - a[i, j]
    lone = [r for r, s in enumerate(slots) if None in s]
    assert lone and all(df.index[r].split(":", 1)[1].startswith("①") for r in lone)
    marks = traces(fig, "scatter")  # × on every cell without a partner
    assert sum(len(t.x) for t in marks if t.xaxis == "x3") == len(slots) ** 2 - (len(slots) - len(lone)) ** 2
    assert "hello word" in fig.layout.title.subtitle.text


def test_figures_escape_what_the_user_typed(seed):
    texts = ["<script>x"]
    intact = stages.run_data(seed, texts)
    other = stages.run_data(seed, ["<i>y</i>"])
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    fig, _ = stages.stage_figure("compare_pattern", intact, seed.info, sel, other=other)
    from helpers import strings

    text = "\n".join(strings(fig.to_dict()))
    assert "<script" not in text and "<i>y" not in text and "&lt;i&gt;y" in text


# --- the run cache and the figure memo -------------------------------------------------------------

def test_the_run_cache_key_includes_the_edits(monkeypatch):
    calls = []
    real = state.run_data

    def counting(m, texts, **kw):
        calls.append((tuple(texts), kw.get("edits")))
        return real(m, texts, **kw)

    monkeypatch.setattr(state, "run_data", counting)
    state._run.clear()
    texts = ["cache key test"]
    intact = state.run("seed", texts)
    edited = state.run("seed", texts, edits="no_causal")
    assert len(calls) == 2 and calls[1][1] == "no_causal"
    assert (intact.edits, edited.edits) == ("", "no_causal")
    assert intact.generated != edited.generated or not np.array_equal(
        intact["decoder.blocks.0.self_attn.hook_pattern"], edited["decoder.blocks.0.self_attn.hook_pattern"])
    # the same edits in another spelling are the same entry; the intact run stayed cached
    again = state.run("seed", texts, edits=" no_causal, ")
    state.run("seed", texts)
    state.run("seed", texts, edits=model.edits.parse("no_causal"))
    assert len(calls) == 2 and again.edits == "no_causal"
    state.run("seed", texts, edits="no_causal,temperature=2")
    assert len(calls) == 3
    with pytest.raises(model.edits.EditError, match="did you mean no_causal"):
        state.run("seed", texts, edits="no_causl")
    assert len(calls) == 3  # a malformed edit runs nothing


def test_the_figure_memo_keys_on_the_edited_run(seed, runs):
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    args = ("whatif_pattern", "seed", TEXTS, runs[""], seed.info, sel, "en")
    f1, _ = state.stage_figure(*args, edited=runs["temperature=3"])
    f2, _ = state.stage_figure(*args, edited=runs["ablate=decoder.cross_attn:1:*"])
    f3, _ = state.stage_figure(*args, edited=runs["temperature=3"])
    assert f1 is f3 and f1 is not f2
    assert "temperature=3" in f1.layout.title.subtitle.text and "ablate" in f2.layout.title.subtitle.text
    p1, _ = state.stage_figure("softmax", "seed", TEXTS, runs[""], seed.info, sel, "en", pick="cell")
    base, _ = state.stage_figure("softmax", "seed", TEXTS, runs[""], seed.info, sel, "en")
    assert p1 is not base and len(p1.data) == len(base.data) + 1
    assert p1 is state.stage_figure("softmax", "seed", TEXTS, runs[""], seed.info, sel, "en", pick="cell")[0]
    ko, _ = state.stage_figure("softmax", "seed", TEXTS, runs[""], seed.info, sel, "ko", pick="cell")
    assert i18n.t("whatif.click_cell", "ko") in ko.data[-1].hovertemplate  # the page's language


# --- export ------------------------------------------------------------------------------------------

def test_export_captions_file_names_and_manifest_carry_the_edits(seed, runs):
    sel = stages.Selection("seed", 0, 1, 2, "decoder.cross_attn")
    edited = runs["ablate=decoder.cross_attn:1:*"]
    items = ex.stage_items(runs[""], seed.info, sel, model_name="seed", text=TEXTS[0],
                           stages=["softmax", "whatif_pattern", "whatif_output"], lang="ko", edited=edited)
    by = {it.meta.stage: it for it in items}
    assert by["softmax"].meta.edits == "" and "편집" not in by["softmax"].fig.layout.title.subtitle.text
    for sid in ("whatif_pattern", "whatif_output"):
        meta = by[sid].meta
        assert meta.edits == "ablate=decoder.cross_attn:1:*"
        assert "편집: ablate=decoder.cross_attn:1:*" in by[sid].fig.layout.title.subtitle.text
        assert "_E-ablate-decoder.cross_attn-1_" in ex.file_stem(meta)
    assert ex.file_stem(by["softmax"].meta).endswith("_L1_H2_" + ex.file_stem(by["softmax"].meta).split("_")[-1])
    data = ex.zip_items(items, ["csv"], lang="ko")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        doc = json.loads(zf.read("manifest.json"))
        names = set(zf.namelist())
    assert doc["edits"] == "ablate=decoder.cross_attn:1:*"
    assert names - {"manifest.json"} == {f["name"] for f in doc["files"]}
    assert sum("_E-" in n for n in names) == 2
    long = ex.ExportMeta("seed", 0, "x", "encoder.self_attn", 0, 0, "whatif_pattern",
                         edits=",".join(f"ablate=encoder.self_attn:{i}:*" for i in range(2)) + ",no_causal")
    other = ex.ExportMeta(**{**long.__dict__, "edits": long.edits.replace("no_causal", "no_padding")})
    assert ex.file_stem(long) != ex.file_stem(other)  # cut slugs stay distinct
    doc = ex.manifest(ex.ExportMeta("seed", 0, "x", "b", 0, 0, "softmax"), [], theme="screen", scale=2, lang="en")
    assert doc["edits"] == ""


def test_export_of_a_comparison_names_the_second_sentence(seed, runs):
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    other = stages.run_data(seed, ["hello word"])
    item = ex.stage_item("compare_pattern", runs[""], seed.info, sel, model_name="seed", text=TEXTS[0], other=other)
    assert item.meta.compare == "hello word" and "_vs-hello-word_" in ex.file_stem(item.meta)
    assert "vs “hello word”" in item.fig.layout.title.subtitle.text


def test_cli_edit_and_compare(tmp_path):
    out = tmp_path / "slides"
    r = cli("--model", "seed", "--text", "hello world", "--edit", "no_causal", "--compare", "hello word",
                "--block", "decoder.self_attn", "--format", "csv", "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert any("_E-no_causal_" in n and "whatif_pattern" in n for n in names), names
    assert any("_vs-hello-word_" in n and "compare_pattern" in n for n in names), names
    assert not any("_E-" in n for n in names if "whatif" not in n)
    r = cli("--model", "seed", "--text", "hi", "--format", "csv", "--out", str(tmp_path / "b"), "--quiet")
    assert r.returncode == 0 and not any("whatif" in p.name for p in (tmp_path / "b").iterdir())


@pytest.mark.parametrize("args, message", [
    (["--edit", "no_causl"], "--edit: unknown edit 'no_causl' (did you mean no_causal?)"),
    (["--edit", "ablate=decoder.cross_attn:7:0"], "--edit: ablate=decoder.cross_attn:7:0: layer 7 is out of range"),
    (["--stages", "whatif_pattern"], "--stages whatif_pattern compare(s) with a second run: give --edit"),
])
def test_cli_edit_errors_are_clear(tmp_path, args, message):
    r = cli("--model", "seed", "--text", "hi", "--format", "csv", "--out", str(tmp_path / "o"), *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


# --- click to drill ---------------------------------------------------------------------------------

def test_a_clickable_copy_has_a_target_at_every_cell_and_leaves_the_shared_figure_alone(seed, runs):
    from explorer import fastpath

    sel = stages.Selection("seed", 1, 0, 0, "decoder.self_attn")
    fig, _ = stages.stage_figure("softmax", runs[""], seed.info, sel, lang="ko")
    fastpath.share(fig)
    before = fastpath.to_json(fastpath.plain_dict(fig))
    picked = picking.pickable(fig, "cell", "ko")
    assert fastpath.to_json(fastpath.plain_dict(fig)) == before and len(fig.data) + 1 == len(picked.data)
    target = picked.data[-1]
    n_q, n_k = runs[""]["decoder.blocks.0.self_attn.hook_pattern"].shape[-2:]
    assert target.meta == "pick-cell" and len(target.x) == n_q * n_k
    assert list(zip(target.y[:n_k + 1], target.x[:n_k + 1])) == [(0, j) for j in range(n_k)] + [(1, 0)]
    assert target.marker.opacity == 0 and picked.layout.hoverdistance == -1
    assert i18n.t("whatif.click_cell", "ko") in target.hovertemplate
    assert target.customdata[n_k + 2][0] == fig.data[0].customdata[1][2][0]  # the heatmap's hover words,
    assert picked.data[0].customdata is None and picked.data[0].hoverinfo == "skip"  # moved, not sent twice
    scaled = picking.pickable(stages.stage_figure("scaled", runs[""], seed.info, sel)[0], "cell")
    assert "%{marker.color:.4f}" in scaled.data[-1].hovertemplate and "%{z" not in scaled.data[-1].hovertemplate
    assert np.array_equal(scaled.data[-1].marker.color, np.asarray(scaled.data[0].z, np.float32).ravel())
    assert picking.picked([{"curve_number": len(fig.data), "point_index": 5, "x": 3, "y": 1}], picked) == \
        ("cell", 1, 3)
    assert picking.picked([{"curve_number": 0, "x": 3, "y": 1}], picked) is None  # not a target
    assert picking.picked([], picked) is None


def test_a_click_on_an_overview_thumbnail_opens_that_head(seed, runs):
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    fig, _ = stages.stage_figure("overview", runs[""], seed.info, sel)
    picked = picking.pickable(fig, "head")
    targets = [t for t in picked.data if t.meta == "pick-head"]
    assert [tuple(t.customdata[0]) for t in targets] == [(li, h) for li in range(2) for h in range(4)]
    assert targets[6].xaxis == "x7" and targets[6].yaxis == "y7"
    k = len(fig.data) + 6
    assert picking.picked([{"curve_number": k, "point_index": 0, "x": 5, "y": 5}], picked) == ("head", 1, 2)
    # what the page's click callback keeps instead of the figure (Streamlit keeps every chart's callback
    # for the rest of a session): it chooses the same, and holds nothing but text and whole numbers
    small = picking.targets(picked)
    assert picking.picked([{"curve_number": k, "point_index": 0, "x": 5, "y": 5}], small) == ("head", 1, 2)
    assert picking.picked([{"curve_number": 0, "point_index": 0, "x": 5, "y": 5}], small) is None
    flat = [x for meta, heads in small for x in (meta, *[v for lh in heads for v in lh])]
    assert all(x is None or type(x) in (str, int) for x in flat) and len(small) == len(picked.data)
    session = {"view": "overview", "layer": 0, "head": 0}
    picking.apply(session, ("head", 1, 2))
    assert session == {"view": "scores", "layer": 1, "head": 2}
    session = {"view": "scores", "query": 0, "key": 0}
    picking.apply(session, ("cell", 3, 5))
    assert session == {"view": "cell", "query": 3, "key": 5}
    session = {"view": "all"}
    picking.apply(session, ("cell", 1, 2))
    assert session == {"view": "all", "query": 1, "key": 2}  # everything is on the page already
    with pytest.raises(ValueError, match="unknown pick kind"):
        picking.pickable(fig, "row")


def test_stage_records_say_what_a_click_chooses_and_what_they_compare():
    clicks = {sid: s.click for sid, s in stages.REGISTRY.items() if s.click}
    assert clicks == {"qk": "cell", "scaled": "cell", "masked": "cell", "softmax": "cell", "overview": "head"}
    needs = {sid: s.needs for sid, s in stages.REGISTRY.items() if s.needs}
    assert needs == {"whatif_pattern": "edited", "whatif_entropy": "edited", "whatif_output": "edited",
                     "compare_pattern": "other", "patching": "other"}  # patching reads the second sentence's run too
    info = model.load("seed", random=True, d_model=32, n_heads=2).info
    assert not stages.ready("whatif_pattern", info) and stages.ready("whatif_pattern", info, options={"edited": 1})


# --- words ------------------------------------------------------------------------------------------

def test_korean_what_if_figures_and_tables_carry_no_english_catalogue_word(seed, runs):
    from test_i18n import clean, english_words, figure_strings, table_strings

    words = english_words()
    found = []
    other = stages.run_data(seed, ["안녕 세상"])
    for block in seed.info.blocks:
        sel = stages.Selection("seed", 1, 1, 1, block, 1, 1)
        for sid, opts in (("whatif_pattern", {"edited": runs["temperature=3"]}),
                          ("whatif_entropy", {"edited": runs["temperature=3"]}),
                          ("whatif_output", {"edited": runs["ablate=decoder.cross_attn:1:*"]}),
                          ("compare_pattern", {"other": other})):
            fig, df = stages.stage_figure(sid, runs[""], seed.info, sel, lang="ko", **opts)
            seen = [clean(s) for s in figure_strings(fig.to_dict())] + [str(s) for s in table_strings(df)]
            found += [f"{sid}: {w}" for w, _ in words.found(seen)]
            picked = picking.pickable(stages.stage_figure("softmax", runs[""], seed.info, sel, lang="ko")[0],
                                      "cell", "ko")
            found += [f"pick: {w}" for w, _ in words.found(clean(s) for s in figure_strings(picked.to_dict()))]
    assert found == []
