"""A head that learns (issue 35): the seed's training, replayed from the shipped checkpoints
(model/files/seed_checkpoints.py). Each checkpoint scores the loss recorded for it, another step's
weights do not, the reversing head goes from near-uniform to the anti-diagonal, and a step there is not
is refused with the steps there are.

The bounds. A checkpoint's recorded loss was measured on exactly the weights a load gives (int8 rows ×
their float32 scales, the same float32 numbers on every machine), so a recomputation differs from it only
by rounding: the order of the sums (threads, vector width). The mean token loss moves by at most
2·max|Δz| when every logit z moves by at most |Δz| (log-softmax is 2-Lipschitz in the max norm), and a
logit is the end of chains of dot products: along the deepest path through the network (encoder: Q/K/V
128, scores 32, weights·V ≤ 41, W_O 128, feed-forward 128 + 128, twice; decoder: the same for its self-
and cross-attention, and its feed-forward, twice; the output 128) the chains add up to K ≈ 3,100 terms,
so |Δz| ≤ K·u·max|z| to first order (u: the unit roundoff; the classic γ_K bound, the norms' divisions
folded into it). Float32 (u = 2⁻²⁴): 2·K·u·max|z| ≈ 3.7e-4·max|z| — loose (this machine measures ~1e-6),
too loose to tell the late checkpoints apart (they differ by ~1e-3). Float64 (u = 2⁻⁵³) gives 6.9e-13·max|z|:
that one tells every checkpoint from every other, and from one whose weights moved by a single int8 step.
"""
from __future__ import annotations

import math

import pytest
import torch

import model
from model.files import seed_checkpoints as C

K_CHAIN = 3100  # summed lengths of the deepest chain of dot products (the docstring's count)
U32, U64 = 2.0 ** -24, 2.0 ** -53


def bound(u: float, max_logit: float) -> float:
    return 2 * K_CHAIN * u * max_logit


@pytest.fixture(scope="module")
def record():
    return C.training_record("seed")


@pytest.fixture(scope="module")
def loaded(record):
    return {s: model.load("seed", step=s) for s in record["steps"]}


def test_there_are_eight_checkpoints_or_more_from_the_start_to_the_shipped_weights(record):
    steps = model.checkpoint_steps("seed")
    assert len(steps) >= 8 and steps == sorted(set(steps)) and steps[0] == 0
    assert steps == record["steps"]
    first = record["training"]["first_stage"]["steps"]
    assert record["stages"] == [0, first] and steps[-1] == first + record["training"]["steps"]
    assert model.checkpoint_steps("seed-sort") == [] and model.checkpoint_steps("minilm") == []
    # where each step's weights come from: said for every step, and "shipped" only for the shipped file
    sources = record["sources"]
    assert list(sources) == [str(s) for s in steps] and set(sources.values()) <= set(C.SOURCES)
    assert [s for s in steps if sources[str(s)] == "shipped"] == [s for s in steps if "shipped" in record["stored"][str(s)]]
    if len(set(sources.values()) - {"shipped"}) == 1:  # one run throughout: its every step's loss is kept
        assert len(record["train_loss"]) == steps[-1] and all(x is not None for x in record["train_loss"])


def test_each_checkpoint_reproduces_its_recorded_loss_and_no_other_does(record, loaded):
    inputs = record["eval_inputs"]
    got64 = {}
    for s, m in loaded.items():
        assert m.training_step == s
        want = record["eval"][str(s)]
        loss32, top = C.eval_stats(m, inputs)
        assert abs(loss32 - want["loss"]) <= bound(U32, top), s
        got64[s] = C.eval_loss(m, inputs, torch.float64)
        assert abs(got64[s] - want["loss_float64"]) <= bound(U64, top), s
    # another step's weights fail it: every pair of checkpoints is told apart in float64
    for s in loaded:
        for other in loaded:
            if other != s:
                assert abs(got64[s] - record["eval"][str(other)]["loss_float64"]) > bound(U64, 100.0), (s, other)
    # and so are weights one int8 step off in one row of one matrix
    last = record["steps"][-2]
    m = loaded[last]
    w = m.decoder.blocks[1].cross_attn.W_Q.weight
    saved = w[0].clone()
    try:
        w[0] += w[0].abs().max() / 127
        moved = C.eval_loss(m, inputs, torch.float64)
    finally:
        w[0] = saved
    assert abs(moved - record["eval"][str(last)]["loss_float64"]) > bound(U64, 100.0)
    # the loss falls: the last checkpoint scores far below the first (which is near log(vocab))
    first = record["eval"][str(record["steps"][0])]["loss"]
    assert abs(first - math.log(m.cfg.vocab_size)) < 0.5 and record["eval"][str(record["steps"][-1])]["loss"] < 0.1


def test_the_reversing_head_forms_from_near_uniform_to_the_anti_diagonal(record, loaded):
    from explorer.views.training import reversing_head

    inputs = record["eval_inputs"]
    head = reversing_head(record)
    steps = record["steps"]
    first = C.cross_attention_summary(loaded[steps[0]], inputs)[head]
    last = C.cross_attention_summary(loaded[steps[-1]], inputs)[head]
    for s, got in ((steps[0], first), (steps[-1], last)):  # the record is what the weights do
        assert got == pytest.approx(record["heads"][str(s)][head], abs=1e-4)
    # near-uniform at step 0 (measured: its rows' entropy 0.986 of a uniform row's, its weight on the
    # anti-diagonal 0.043, what a uniform row would give: the mean of 1/(L+1) over the outputs' positions)
    lengths = [len(x) for x in inputs if len(x) >= 2]
    uniform = sum(L / (L + 1) for L in lengths) / sum(lengths)
    assert first["entropy"] > 0.95 and abs(first["anti_diagonal"] - uniform) < 0.25 * uniform
    # on the anti-diagonal at the end (measured: 0.703 of its weight, entropy 0.233 of uniform) ...
    assert last["anti_diagonal"] > 0.65 > 15 * uniform and last["entropy"] < 0.3
    # ... and growing there at every checkpoint between (measured 0.043, 0.061, 0.104, 0.224, 0.316, 0.371, 0.571, 0.694, 0.703)
    diag = [record["heads"][str(s)][head]["anti_diagonal"] for s in steps]
    assert diag == sorted(diag)


def test_a_step_there_is_not_is_refused_with_the_steps_there_are(record):
    steps = record["steps"]
    for bad in (steps[1] + 1, -1, "100", 10**9, True):
        with pytest.raises(model.WeightsError, match=f"choose one of {steps[0]}, {steps[1]}"):
            model.load("seed", step=bad)
    with pytest.raises(model.WeightsError, match="no training checkpoints"):
        model.load("seed-sort", step=0)
    with pytest.raises(TypeError):
        model.load("seed", step=0, random=True)


def test_the_last_step_is_the_shipped_file_when_the_run_reproduced_it(record):
    stored = record["stored"][str(record["steps"][-1])]
    if "shipped" in stored:  # the packer compared them tensor by tensor; the file is still that one
        assert C._sha256(C.SHIPPED["seed"]) == stored["sha256"]
    else:
        assert stored == {"int8": True}


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_loss_curve_marks_the_step_in_the_pages_language(record, lang):
    from explorer import i18n
    from explorer.views import training

    steps = record["steps"]
    L = i18n.fig_labels(lang)
    # with every step's training loss (a record of one whole run) ...
    whole = {**record, "train_loss": [5.0 - i / steps[-1] for i in range(steps[-1])]}
    fig = training.loss_curve(whole, steps[2], title=i18n.t("train.title", lang), labels=L)
    curve, evals, diag, ring_loss, ring_diag = fig.data
    assert curve.name == L["train_loss"] and evals.name == L["eval_loss"]
    xs, ys = training.smoothed(whole["train_loss"])
    assert list(curve.x) == list(xs) and xs[-1] == steps[-1] and len(xs) == training.CURVE_POINTS
    assert ys[0] == pytest.approx(5.0 - (xs[0] - 1) / 2 / steps[-1])  # a span's mean, drawn at its last step
    # ... and without it (a record whose run kept no training loss): the recorded losses alone
    fig = training.loss_curve(record, steps[2], title=i18n.t("train.title", lang), labels=L)
    evals, diag, ring_loss, ring_diag = fig.data if not record["train_loss"] else fig.data[1:]
    assert evals.name == L["eval_loss"]
    assert list(evals.x) == steps and list(diag.x) == steps and diag.yaxis == "y2"
    assert ring_loss.x == (steps[2],) and ring_loss.y == (record["eval"][str(steps[2])]["loss"],)
    assert ring_diag.y == (record["heads"][str(steps[2])][training.reversing_head(record)]["anti_diagonal"],)
    assert fig.layout.shapes[0].x0 == steps[2] and fig.layout.shapes[1].x0 == record["stages"][1]
    assert fig.layout.xaxis.title.text == L["train_step"]
    # a step that is not a checkpoint: the lines, no ring
    assert len(training.loss_curve(whole, steps[2] + 1).data) == 3


def test_the_exporter_takes_a_training_step_and_names_it(record, loaded, tmp_path):
    from helpers import cli

    step = record["steps"][3]
    done = cli("--model", "seed", "--train-step", str(step), "--text", "abc", "--stages", "softmax",
               "--block", "decoder.cross_attn", "--layer", "1", "--format", "csv", "--out", str(tmp_path), "--quiet")
    assert done.returncode == 0, done.stderr
    (csv,) = tmp_path.glob("*.csv")
    assert csv.name.startswith(f"seed-{step}_")
    # its numbers are that checkpoint's: the cross-attention row of the first output equals the model's own
    out, cache = loaded[step].run_with_cache(["abc"])
    want = cache["decoder.blocks.1.cross_attn.hook_pattern"][0, 0, 0].tolist()
    first = csv.read_text(encoding="utf-8-sig").splitlines()[1].split(",")[1:-1]
    assert [float(x) for x in first] == pytest.approx(want, abs=1e-6)
    bad = cli("--model", "seed", "--train-step", str(step + 1), "--text", "abc", "--format", "csv",
              "--out", str(tmp_path))
    assert bad.returncode == 2 and f"choose one of {record['steps'][0]}" in bad.stderr and "retrain" not in bad.stderr
