"""Sampling in ``generate_with_cache`` and the Decoding view (issue 26, item 7): top-p keeps exactly the
nucleus (a hand computation on a known distribution), top-k is applied before it, the same seed draws
the same tokens, top_p=1 and top_k=None are plain temperature sampling, greedy is unchanged (and stays
the default), bad values are refused; the candidates chart marks what top-k / top-p cut; the app's
controls follow the URL's ``sample``."""
from __future__ import annotations

import json

import pytest
import torch
from helpers import app, ok

import model
from explorer import inputs
from explorer.views import stages
from explorer.views.trace import trace_data
from model.runtime.base import Recorder, nucleus_cut

IDS = [10, 20, 30, 40]
PROBS = [0.5, 0.25, 0.15, 0.1]  # the distribution drawn from (the rest ~0)


@pytest.fixture(scope="module")
def seed():
    try:
        return model.load("seed")
    except model.WeightsError:
        return model.load("seed", random=True)


def known_logits(m, batch: int = 1) -> torch.Tensor:
    z = torch.full((batch, m.info.vocab_size), -1e4)
    z[:, IDS] = torch.log(torch.tensor(PROBS))
    return z


def draw(m, batch: int = 4000, **kw) -> tuple[set[int], Recorder]:
    rec = Recorder(m, [], seed=0, n_top=6, **kw)
    chosen = rec.choose(known_logits(m, batch), torch.ones(batch, dtype=torch.bool), pad_id=0)
    return set(chosen.tolist()), rec


def test_nucleus_cut_by_hand():
    p = torch.tensor([[0.1, 0.5, 0.15, 0.25]])
    # sorted: 0.5, 0.25, 0.15, 0.1; the mass before each: 0, 0.5, 0.75, 0.9
    assert nucleus_cut(p, 0.7).tolist() == [[True, False, True, False]]  # 0.5 + 0.25 = 0.75 reaches 0.7
    assert nucleus_cut(p, 0.76).tolist() == [[True, False, False, False]]  # three needed: 0.9
    assert nucleus_cut(p, 0.4).tolist() == [[True, False, True, True]]  # the most likely alone
    assert nucleus_cut(p, 1.0).tolist() == [[False, False, False, False]]


@pytest.mark.parametrize("top_p, kept", [(0.7, {10, 20}), (0.76, {10, 20, 30}), (0.3, {10})])
def test_top_p_draws_exactly_from_the_nucleus(seed, top_p, kept):
    got, rec = draw(seed, temperature=1.0, top_p=top_p)
    assert got == kept  # 4000 draws: every kept token appears, no cut one does
    top = rec.top[0]
    assert top.ids[0, :4].tolist() == IDS
    mass = sum(PROBS[: len(kept)])
    want = [p / mass if i in kept else 0.0 for i, p in zip(IDS, PROBS)]
    assert torch.allclose(top.sampled_from[0, :4], torch.tensor(want), atol=1e-5)  # renormalised nucleus
    assert top.cut_by[0][:4] == ["" if i in kept else "top_p" for i in IDS]


def test_top_k_comes_first_and_is_named_so(seed):
    got, rec = draw(seed, temperature=1.0, top_k=3, top_p=0.7)
    assert got == {10, 20}
    assert rec.top[0].cut_by[0][:4] == ["", "", "top_p", "top_k"]
    got, rec = draw(seed, temperature=1.0, top_k=2)
    assert got == {10, 20} and rec.top[0].cut_by[0][:4] == ["", "", "top_k", "top_k"]


def test_top_p_one_and_no_top_k_is_plain_temperature_sampling(seed):
    texts = ["hello world", "attention"]
    plain = seed.generate_with_cache(texts, 8, temperature=2.0, seed=5, names=[])
    same = seed.generate_with_cache(texts, 8, temperature=2.0, seed=5, top_p=1.0, top_k=None, names=[])
    assert plain.token_ids == same.token_ids
    for a, b in zip(plain.top, same.top):
        assert torch.equal(a.sampled_from, b.sampled_from)
        assert all(c == "" for row in b.cut_by for c in row)


def test_the_same_seed_draws_the_same_tokens(seed):
    kw = dict(temperature=3.0, top_k=50, top_p=0.95, names=[])
    a = seed.generate_with_cache(["sampling is random"], 12, seed=7, **kw)
    b = seed.generate_with_cache(["sampling is random"], 12, seed=7, **kw)
    assert a.token_ids == b.token_ids and a.generated == b.generated
    others = {tuple(seed.generate_with_cache(["sampling is random"], 12, seed=s, **kw).token_ids[0])
              for s in range(8)}
    assert len(others) > 1  # the seed matters: a flat enough distribution draws differently


def test_greedy_is_the_default_and_unchanged(seed):
    texts = ["hello world", "abc"]
    tr = seed.generate_with_cache(texts, names=[])
    out, _ = seed.run_with_cache(texts)
    assert tr.generated == out.generated
    assert all(s.sampled_from is None and s.cut_by is None for s in tr.top)
    assert all(torch.equal(s.chosen[s.chosen != 0], s.ids[:, 0][s.chosen != 0]) for s in tr.top)


@pytest.mark.parametrize("kw", [dict(temperature=0.0, top_p=0.9), dict(temperature=1.0, top_p=0.0),
                                dict(temperature=1.0, top_p=1.5), dict(temperature=1.0, top_p=True),
                                dict(temperature=1.0, top_p="0.5")])
def test_bad_top_p_is_refused(seed, kw):
    with pytest.raises(ValueError, match="top_p"):
        seed.generate_with_cache(["hi"], 2, **kw)


def test_the_url_form_reads_back():
    assert inputs.parse_sampling(inputs.format_sampling(0.8, 40, 0.9, 7)) == (0.8, 40, 0.9, 7)
    assert inputs.parse_sampling(inputs.format_sampling(1.5, None, None, 0)) == (1.5, None, None, 0)
    assert inputs.format_sampling(0.0, 5, 0.5, 1) == ""
    for bad in ("", "1,2,3", "x,1,0.5,1", "0,1,0.5,1", "9,1,0.5,1", "1,1,0,1", "1,1,2,1", "1,-1,0.5,1", None):
        assert inputs.parse_sampling(bad) is None


def test_the_candidates_chart_marks_the_cut_tokens(seed):
    tr = trace_data(seed, "hello world", temperature=1.0, top_k=3, top_p=0.5, seed=1)
    assert tr.sampling == (1.0, 3, 0.5, 1)
    run = stages.run_data(seed, ["hello world"]).with_trace(tr)
    sel = stages.Selection("seed", 0, 0, 0, "decoder.self_attn")
    for lang, words in (("en", ("cut by top-p", "cut by top-k")), ("ko", ("top-p로 잘림", "top-k로 잘림"))):
        fig, df = stages.stage_figure("decoding", run, seed.info, sel, lang=lang, step=0)
        bars = next(t for t in fig.data if t.type == "bar")
        cut = tr.cut_by[0]
        for label, colour, c in zip(bars.text, bars.marker.color, cut):
            assert (colour == "#BBBBBB") == bool(c)
            assert (words[0] in label) == (c == "top_p") and (words[1] in label) == (c == "top_k")
        assert "top_p" in cut and "top_k" in cut  # a peaked distribution: top-p keeps one, top-k cut the rest
        assert words[0] in " ".join(map(str, df.iloc[0]))  # the table's candidates say it too
    greedy = stages.run_data(seed, ["hello world"]).with_trace(trace_data(seed, "hello world"))
    fig, _ = stages.stage_figure("decoding", greedy, seed.info, sel, lang="en", step=0)
    assert "#BBBBBB" not in next(t for t in fig.data if t.type == "bar").marker.color


@pytest.mark.timeout(600)
def test_the_app_samples_from_the_url_and_greedy_clears_it():
    at = app(view="decoding", text="hello world", sample="1.5,3,0.9,7")
    ok(at, strict=True)
    s = at.session_state
    assert (s["dec_temperature"], s["dec_top_k"], s["dec_top_p"], s["dec_seed"]) == (1.5, 3, 0.9, 7)
    (chart,) = at.get("plotly_chart")
    spec = json.loads(chart.proto.spec)
    assert any("sampled: T = 1.5" in (a.get("text") or "") for a in spec["layout"]["annotations"])
    assert any("Sampled, not greedy" in c.value for c in at.caption)
    at.number_input(key="dec_temperature").set_value(0.0).run()
    ok(at, strict=True)
    assert "sample" not in at.query_params
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert not any("sampled" in (a.get("text") or "") for a in spec["layout"]["annotations"])


@pytest.mark.weights
def test_smollm2_samples_reproducibly_and_names_the_cut():
    from model import fetch

    if not fetch.is_fetched("smollm2"):
        pytest.skip("smollm2 not fetched")
    m = model.load("smollm2")
    kw = dict(temperature=1.0, top_k=40, top_p=0.8, seed=11, names=[])
    a = m.generate_with_cache(["The capital of France is"], 6, **kw)
    b = m.generate_with_cache(["The capital of France is"], 6, **kw)
    assert a.token_ids == b.token_ids
    for step in a.top:
        kept = [c == "" for c in step.cut_by[0]]
        assert kept[0]  # the most likely token is always in the nucleus
        drawn = step.sampled_from[0]
        assert all((p > 0) == k for p, k in zip(drawn.tolist(), kept))  # cut: probability 0 in the draw
        last = max(i for i, k in enumerate(kept) if k)  # the nucleus is the smallest set reaching p: without
        assert float(step.probs[0, :last].sum()) < 0.8  # its last token it had not (raw p ≤ the top-k's)
    greedy = m.generate_with_cache(["The capital of France is"], 3, names=[])
    assert greedy.generated[0].startswith(" Paris")
