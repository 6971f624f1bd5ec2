"""Beyond one head (issue 26, items 1-5): every table equals a recomputation from the run's own hooks
(the logit lens through ``m.readout``, rollout by its formula, value norms by hand from hook_v and
W_O, the query/key map by its translation and PCA, head roles by loops), ``m.readout`` of the last
layer is the model's logits, SmolLM2's induction heads are found, each stage exports in Korean, and
hostile text stays escaped in figures and inert in CSV."""
from __future__ import annotations

import csv
import io
import json
import zipfile

import numpy as np
import pytest
import torch
from float32 import close
from helpers import cli
from test_i18n import clean, english_words, figure_strings, table_strings

import model
from explorer import i18n
from explorer import export as ex
from explorer.export.renderer import FORMULA_START
from explorer.views import analysis as an
from explorer.views import data, stages
from model.arch.family import Family
from model.arch.generic import Transformer
from model.files.tokenizer import char_tokenizer

pytestmark = pytest.mark.timeout(900)

NEW = ("logit_lens", "rollout", "value_norms", "qk_map", "head_roles")
TEXTS = ["the cat sat on the mat, the cat sat on the mat", "안녕하세요 cat"]
HOSTILE = ["<b>bold</b> <script>x</script> =cmd|' /C calc'!A0 😀", "+SUM(1) @x -2"]
HAVE_CHROMIUM = ex.unavailable_reason() is None


def tiny_llama(seed: int = 0) -> Transformer:
    """A small random Llama with untied output and a non-trivial final norm (so readout must apply it)."""
    torch.manual_seed(seed)
    tok = char_tokenizer()
    f = Family(model_type="llama", kind="decoder", vocab_size=tok.vocab_size, d_model=32, n_layers=3, n_heads=4,
               n_kv_heads=2, d_head=8, d_ff=48, max_len=256, norm="rms", placement="pre", act="silu", gated=True,
               positions="rotary", tie_word_embeddings=False, pad_id=tok.pad_id, bos_id=tok.bos_id,
               eos_ids=(tok.eos_id,))
    m = Transformer(f, tok, name="tiny-llama", tied_output=False)
    with torch.no_grad():
        m.decoder.ln_final.weight.uniform_(0.5, 2.0)
        m.decoder.embed.weight.normal_(0, 1)
    return m.requires_grad_(False).eval()


def load_or_skip(name: str):
    try:
        return model.load(name)
    except model.WeightsError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def seed_model():
    try:
        return model.load("seed")
    except model.WeightsError:
        return model.load("seed", random=True)


@pytest.fixture(scope="module")
def smollm2():
    return load_or_skip("smollm2")


def analysed(m, texts, sentence: int = 0) -> data.RunData:
    run = stages.run_data(m, texts)
    if stages.applies("logit_lens", m.info):
        run = run.with_lens(data.lens_data(m, run, sentence))
    return run.with_induction(data.induction_scores(m))


def last_resid(m, cache) -> torch.Tensor:
    return cache[f"decoder.blocks.{stages.layers_for(m.info, 'decoder.self_attn') - 1}.hook_resid_post"]


# --- readout --------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["tiny_llama", "seed"])
def test_readout_of_the_last_layer_is_the_models_logits(which, seed_model):
    m = tiny_llama() if which == "tiny_llama" else seed_model
    out, cache = m.run_with_cache(TEXTS)
    with torch.inference_mode():
        got = m.readout(last_resid(m, cache))
    assert got.shape == out.logits.shape
    assert close(got, out.logits, m.info)
    # and the check can fail: the stream without the final norm (Llama) or another layer is not the logits
    wrong = cache["decoder.blocks.0.hook_resid_post"] if which == "seed" else last_resid(m, cache)
    with torch.inference_mode():
        wrong_logits = wrong @ (m.embedding.weight if which == "seed" else m.unembed.weight).T
    assert not close(wrong_logits, out.logits, m.info)


@pytest.mark.weights
def test_readout_smollm2(smollm2):
    out, cache = smollm2.run_with_cache(TEXTS)
    with torch.inference_mode():
        assert close(smollm2.readout(last_resid(smollm2, cache)), out.logits, smollm2.info)


# --- the logit lens -------------------------------------------------------------------------------

def lens_by_hand(m, cache, sentence: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(cache.token_ids[sentence]) if m.info.kind == "decoder" else len(cache.decoder_token_ids[sentence])
    ids, probs = [], []
    with torch.inference_mode():
        for layer in range(stages.layers_for(m.info, "decoder.self_attn")):
            p = torch.softmax(m.readout(cache[f"decoder.blocks.{layer}.hook_resid_post"][sentence, :n]).double(), -1)
            top = p.max(-1)
            ids.append(top.indices.numpy())
            probs.append(top.values.numpy())
    return np.stack(ids), np.stack(probs)


def check_lens(m, sentence: int = 0):
    run = analysed(m, TEXTS, sentence)
    _, cache = m.run_with_cache(TEXTS)
    sel = stages.Selection(m.info.name, sentence, 0, 0, m.info.blocks[0])
    _, df = stages.stage_figure("logit_lens", run, m.info, sel)
    assert list(df.columns) == ["layer", "position", "token_id", "token", "p"]
    ids, probs = lens_by_hand(m, cache, sentence)
    L, T = ids.shape
    assert len(df) == L * T
    got_ids = df["token_id"].to_numpy().reshape(L, T)
    got_p = df["p"].to_numpy().reshape(L, T)
    assert (df["layer"].to_numpy().reshape(L, T) == np.arange(L)[:, None]).all()
    assert (df["position"].to_numpy().reshape(L, T) == np.arange(T)[None, :]).all()
    np.testing.assert_allclose(got_p, probs, atol=1e-4)
    same = got_ids == ids
    assert same.mean() > 0.99 and np.all(np.abs(got_p - probs)[~same] < 1e-4)  # a tie at most
    assert list(df["token"][:T]) == [style_visible(m.token_text(int(i))) for i in got_ids[0]]
    # the last layer's lens is the model's own next-token choice
    if run.top_ids is not None:
        assert (got_ids[-1] == run.top_ids[sentence, :T, 0]).mean() > 0.99


def style_visible(text: str) -> str:
    from explorer.views.style import visible

    return visible(text)


def test_logit_lens_equals_readout_by_hand_seed(seed_model):
    check_lens(seed_model, 1)


def test_logit_lens_equals_readout_by_hand_tiny_llama():
    check_lens(tiny_llama(), 0)


@pytest.mark.weights
def test_logit_lens_equals_readout_by_hand_smollm2(smollm2):
    check_lens(smollm2, 0)


def test_logit_lens_without_the_lens_says_how_to_get_it_and_only_for_models_with_an_output(seed_model):
    run = stages.run_data(seed_model, TEXTS)
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    fig, df = stages.stage_figure("logit_lens", run, seed_model.info, sel)
    assert df is None and "logit_lens" in fig.layout.annotations[0].text
    # another sentence's lens is not this sentence's
    fig, df = stages.stage_figure("logit_lens", run.with_lens(data.lens_data(seed_model, run, 1)), seed_model.info, sel)
    assert df is None
    assert not stages.applies("logit_lens", {**seed_model.info.as_dict(), "kind": "encoder"})


# --- rollout --------------------------------------------------------------------------------------

def rollout_by_hand(patterns: list[np.ndarray], n: int) -> np.ndarray:
    R = [[float(i == j) for j in range(n)] for i in range(n)]
    for A in patterns:  # layer by layer, bottom to top
        H = A.shape[0]
        At = [[0.5 * sum(float(A[h, i, j]) for h in range(H)) / H + 0.5 * (i == j) for j in range(n)] for i in range(n)]
        At = [[x / sum(row) for x in row] for row in At]
        R = [[sum(At[i][k] * R[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
    return np.array(R)


@pytest.mark.parametrize("block", ["encoder.self_attn", "decoder.self_attn"])
def test_rollout_is_the_formula_on_the_real_tokens(seed_model, block):
    run = stages.run_data(seed_model, TEXTS)
    stack = block.split(".")[0]
    s = int(np.argmin([len(stages.stack_tokens(run, stack, i)) for i in range(2)]))  # padded: left out
    sel = stages.Selection("seed", s, 0, 0, block)
    _, df = stages.stage_figure("rollout", run, seed_model.info, sel)
    assert list(df.columns) == ["query", "key", "weight"]
    n = len(stages.stack_tokens(run, stack, s))
    assert n < run[f"{stack}.blocks.0.self_attn.hook_pattern"].shape[-1]  # there is padding
    pats = [run[f"{stack}.blocks.{i}.self_attn.hook_pattern"][s][:, :n, :n]
            for i in range(stages.layers_for(seed_model.info, block))]
    R = rollout_by_hand(pats, n)
    assert len(df) == n * n
    np.testing.assert_allclose(df["weight"].to_numpy().reshape(n, n), R, atol=1e-9)
    np.testing.assert_allclose(R.sum(-1), 1, atol=1e-9)
    if block == "decoder.self_attn":  # causal: nothing flows from later tokens
        assert np.allclose(np.triu(R, 1), 0)


@pytest.mark.weights
def test_rollout_smollm2(smollm2):
    run = stages.run_data(smollm2, TEXTS)
    _, df = stages.stage_figure("rollout", run, smollm2.info, stages.Selection("smollm2", 0, 0, 0, "decoder.self_attn"))
    n = len(run.tokens[0])
    pats = [run[f"decoder.blocks.{i}.self_attn.hook_pattern"][0][:, :n, :n] for i in range(smollm2.info.n_layers)]
    np.testing.assert_allclose(df["weight"].to_numpy().reshape(n, n), rollout_by_hand(pats, n), atol=1e-9)


# --- value norms ----------------------------------------------------------------------------------

def value_norms_by_hand(m, cache, p: str, s: int, h: int, n_q: int, n_k: int) -> tuple[np.ndarray, np.ndarray]:
    """α from the hook; v_j W_O[h] from hook_v and the module's own W_O columns of head h."""
    attn = dict(m.named_modules())[p]
    dh = m.info.d_head
    W_O = attn.W_O.weight.detach().double()[:, h * dh:(h + 1) * dh]  # (d_model, d_head)
    A = cache[f"{p}.hook_pattern"][s, h].double()[:n_q, :n_k]
    v = cache[f"{p}.hook_v"][s, h].double()[:n_k]  # this query head's values (its K/V head's, under GQA)
    norms = np.zeros((n_q, n_k))
    for i in range(n_q):
        for j in range(n_k):
            norms[i, j] = torch.linalg.vector_norm(A[i, j] * (W_O @ v[j])).item()
    return A.numpy(), norms


@pytest.mark.parametrize("block", ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"])
def test_value_norms_by_hand_seed(seed_model, block):
    run = stages.run_data(seed_model, TEXTS)
    _, cache = seed_model.run_with_cache(TEXTS)
    s, layer, head = 1, 1, 2
    sel = stages.Selection("seed", s, layer, head, block)
    _, df = stages.stage_figure("value_norms", run, seed_model.info, sel)
    assert list(df.columns) == ["query", "key", "weight", "norm"]
    _, _, n_q, n_k = data.axis_tokens(run, block, s, layer)
    A, norms = value_norms_by_hand(seed_model, cache, stages.prefix(block, layer), s, head, n_q, n_k)
    assert len(df) == n_q * n_k
    got_w = df["weight"].to_numpy().reshape(n_q, n_k)
    got_n = df["norm"].to_numpy().reshape(n_q, n_k)
    allowed = np.isfinite(got_w)
    np.testing.assert_allclose(got_w[allowed], A[allowed], atol=1e-6)
    np.testing.assert_allclose(got_n[allowed], norms[allowed], rtol=1e-4, atol=1e-6)
    assert np.all(A[~allowed] == 0)  # masked cells: no weight (NaN in the table)


@pytest.mark.weights
def test_value_norms_by_hand_smollm2_grouped_query(smollm2):
    """Head 4 reads K/V head 1 (9 heads, 3 K/V heads): v from the normed stream and W_V's rows of K/V head 1."""
    texts = TEXTS[:1]
    run = stages.run_data(smollm2, texts)
    _, cache = smollm2.run_with_cache(texts)
    layer, head = 3, 4
    p = f"decoder.blocks.{layer}.self_attn"
    _, df = stages.stage_figure("value_norms", run, smollm2.info, stages.Selection("smollm2", 0, layer, head, "decoder.self_attn"))
    n = len(run.tokens[0])
    A, norms = value_norms_by_hand(smollm2, cache, p, 0, head, n, n)
    got = df["norm"].to_numpy().reshape(n, n)
    causal = np.tril(np.ones((n, n), dtype=bool))
    np.testing.assert_allclose(got[causal], norms[causal], rtol=1e-3, atol=1e-6)
    assert np.isnan(got[~causal]).all() and (A[~causal] == 0).all()  # later keys: masked
    # the values really are K/V head 1's: x̂ W_V[rows of K/V head 1]
    attn = dict(smollm2.named_modules())[p]
    dh, kv = smollm2.info.d_head, head // (smollm2.info.n_heads // smollm2.info.n_kv_heads)
    x = cache[f"decoder.blocks.{layer}.hook_attn_normed"][0, :n].double()
    v = x @ attn.W_V.weight.detach().double()[kv * dh:(kv + 1) * dh].T
    np.testing.assert_allclose(v.numpy(), cache[f"{p}.hook_v"][0, head, :n].double().numpy(), atol=1e-3)


# --- the query/key map ------------------------------------------------------------------------------

@pytest.mark.parametrize("block", ["encoder.self_attn", "decoder.cross_attn"])
def test_qk_map_translates_keys_to_the_queries_mean_and_projects_by_pca(seed_model, block):
    run = stages.run_data(seed_model, TEXTS)
    layer, head = 1, 3
    sel = stages.Selection("seed", 0, layer, head, block)
    fig, df = stages.stage_figure("qk_map", run, seed_model.info, sel)
    assert list(df.columns) == ["kind", "sentence", "position", "token", "x", "y"]
    p = stages.prefix(block, layer)
    qs, ks = [], []
    for s in range(run.n_sentences):
        _, _, nq, nk = data.axis_tokens(run, block, s, layer)
        qs.append(run[f"{p}.hook_q"][s, head, :nq])
        ks.append(run[f"{p}.hook_k"][s, head, :nk])
    Q, K = np.concatenate(qs).astype(np.float64), np.concatenate(ks).astype(np.float64)
    q_rows, k_rows = df[df["kind"] == "query"], df[df["kind"] == "key"]
    assert len(q_rows) == len(Q) and len(k_rows) == len(K)  # every real token of the batch, no padding
    # by hand: keys moved to the queries' mean, then the two largest principal axes (eigenvectors)
    K2 = K - K.mean(0) + Q.mean(0)
    X = np.vstack([Q, K2])
    X = X - X.mean(0)
    w, V = np.linalg.eigh(X.T @ X)
    axes = V[:, np.argsort(w)[::-1][:2]]
    want = X @ axes
    got = df[["x", "y"]].to_numpy()
    for c in range(2):  # the same axes up to their sign
        assert min(np.abs(got[:, c] - want[:, c]).max(), np.abs(got[:, c] + want[:, c]).max()) < 1e-6
    np.testing.assert_allclose(q_rows[["x", "y"]].to_numpy().mean(0), k_rows[["x", "y"]].to_numpy().mean(0), atol=1e-9)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert lines and sum(x is None for x in lines[0].x) == min(stages.QK_LINES, len(Q))


# --- head roles -----------------------------------------------------------------------------------

def roles_by_hand(patterns: list[np.ndarray], n: int) -> dict[str, np.ndarray]:
    out = {r: np.zeros((len(patterns), patterns[0].shape[0])) for r in ("previous_token", "first_token", "self")}
    for li, A in enumerate(patterns):
        for h in range(A.shape[0]):
            qs = range(1, n)
            out["previous_token"][li, h] = sum(A[h, q, q - 1] for q in qs) / len(qs)
            out["first_token"][li, h] = sum(A[h, q, 0] for q in qs) / len(qs)
            out["self"][li, h] = sum(A[h, q, q] for q in qs) / len(qs)
    return out


@pytest.mark.parametrize("block", ["encoder.self_attn", "decoder.self_attn"])
def test_head_roles_by_hand_seed(seed_model, block):
    run = analysed(seed_model, TEXTS)
    s = 1
    _, df = stages.stage_figure("head_roles", run, seed_model.info, stages.Selection("seed", s, 0, 0, block))
    assert list(df.columns) == ["layer", "head", "previous_token", "first_token", "self", "induction"]
    stack = block.split(".")[0]
    n = len(stages.stack_tokens(run, stack, s))
    pats = [run[f"{stack}.blocks.{i}.self_attn.hook_pattern"][s] for i in range(stages.layers_for(seed_model.info, block))]
    want = roles_by_hand(pats, n)
    shape = (len(pats), seed_model.info.n_heads)
    for role, w in want.items():
        np.testing.assert_allclose(df[role].to_numpy().reshape(shape), w, atol=1e-6)
    if block == "encoder.self_attn":
        np.testing.assert_allclose(df["induction"].to_numpy().reshape(shape), run.induction[block], atol=0)
    else:  # the seed decoder reads its own output: no induction score
        assert df["induction"].isna().all()


def induction_by_hand(m, block: str) -> np.ndarray:
    """Positions found in the tokens, not assumed: each token of the second half that occurs once in
    the first half, and the token after that occurrence."""
    _, cache = m.run_with_cache([data.induction_text(m)])
    ids = cache.token_ids[0]
    half = len(ids) // 2
    first = ids[:half]
    pairs = [(q, first.index(t) + 1) for q, t in enumerate(ids) if q >= half and first.count(t) == 1
             and first.index(t) + 1 < q]
    assert len(pairs) >= 0.8 * data.INDUCTION_TOKENS
    n_layers = stages.layers_for(m.info, block)
    out = np.zeros((n_layers, m.info.n_heads))
    for li in range(n_layers):
        A = cache[f"{stages.prefix(block, li)}.hook_pattern"][0].double()
        for h in range(m.info.n_heads):
            out[li, h] = sum(A[h, q, k].item() for q, k in pairs) / len(pairs)
    return out


@pytest.mark.weights
def test_smollm2_has_strong_induction_heads_and_the_table_says_so(smollm2):
    scores = data.induction_scores(smollm2)["decoder.self_attn"]
    np.testing.assert_allclose(scores, induction_by_hand(smollm2, "decoder.self_attn"), atol=1e-5)
    best = an.strongest(scores, 4)
    # measured (seed 0, 40 tokens): L18 H6 0.82, L17 H3 0.67, L17 H4 0.63, L18 H7 0.63; the median head ~0.01
    assert best[0][2] > 0.5 and sum(s > 0.5 for *_, s in best) >= 3
    assert {(li, h) for li, h, _ in best} & {(18, 6), (17, 3), (17, 4), (18, 7)}
    assert float(np.median(scores)) < 0.1
    run = stages.run_data(smollm2, TEXTS).with_induction({"decoder.self_attn": scores})
    fig, df = stages.stage_figure("head_roles", run, smollm2.info, stages.Selection("smollm2", 0, 0, 0, "decoder.self_attn"))
    top = df.loc[df["induction"].idxmax()]
    assert (int(top["layer"]), int(top["head"])) == best[0][:2]
    assert f"L{best[0][0]} H{best[0][1]}" in fig.layout.title.subtitle.text  # the figure names the strongest
    words = stages.stage_words("head_roles", run, smollm2.info, stages.Selection("smollm2", 0, 0, 0, "decoder.self_attn"))
    assert f"L{best[0][0]} H{best[0][1]} ({best[0][2]:.2f})" in words["explain"]


@pytest.mark.weights
def test_smollm2_has_previous_token_heads(smollm2):
    run = stages.run_data(smollm2, ["The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun."])
    _, df = stages.stage_figure("head_roles", run, smollm2.info, stages.Selection("smollm2", 0, 0, 0, "decoder.self_attn"))
    assert df["previous_token"].max() > 0.5
    assert df["first_token"].max() > 0.8  # attention sinks


# --- Korean, export and hostile text --------------------------------------------------------------

def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def new_stage_items(m, run, sel, lang: str):
    return ex.stage_items(run, m.info, sel, model_name=m.info.name, text=run.texts[sel.sentence], stages=list(NEW),
                          lang=lang)


def test_korean_figures_and_tables_of_the_new_stages_carry_no_english(seed_model):
    run = analysed(seed_model, TEXTS)
    words = english_words()
    for block in seed_model.info.blocks:
        sel = stages.Selection("seed", 0, 1, 1, block)
        for sid in NEW:
            if not stages.applies(sid, seed_model.info, block):
                continue
            fig, df = stages.stage_figure(sid, run, seed_model.info, sel, lang="ko")
            seen = [clean(s) for s in figure_strings(fig.to_dict())] + ([] if df is None else list(table_strings(df)))
            found = [(sid, w, s) for w, s in words.found(seen)]
            assert found == [], found[:3]
            if df is not None:
                L = i18n.fig_labels("ko")
                assert L["layer"] in df.columns or L["query"] in df.columns or L["col_kind"] in df.columns


@pytest.mark.skipif(not HAVE_CHROMIUM, reason="chromium is not installed")
def test_every_new_stage_exports_in_korean_png_svg_pdf_csv(seed_model):
    run = analysed(seed_model, TEXTS)
    sel = stages.Selection("seed", 0, 1, 1, "encoder.self_attn")
    items = new_stage_items(seed_model, run, sel, "ko")
    data_zip = ex.zip_items(items, ["png", "svg", "pdf", "csv"], theme="presentation", lang="ko")
    z = zipfile.ZipFile(io.BytesIO(data_zip))
    doc = json.loads(z.read("manifest.json"))
    for fmt in ("png", "svg", "pdf", "csv"):
        assert sorted(f["stage"] for f in doc["files"] if f["format"] == fmt) == sorted(NEW), fmt
    for f in doc["files"]:
        body = z.read(f["name"])
        assert len(body) > 50, f["name"]
        if f["format"] == "csv":
            text = body.decode("utf-8-sig")
            assert "레이어" in text or "쿼리" in text or "종류" in text, f["name"]
        if f["format"] == "svg":
            assert "헤드 1" in body.decode("utf-8"), f["name"]  # the Korean caption


def test_the_exporter_makes_the_new_stages_in_korean(tmp_path):
    r = cli("--model", "seed", "--text", "hello world", "--text", "안녕", "--stages", ",".join(NEW),
                "--format", "csv", "--lang", "ko", "--layer", "1", "--head", "2", "--out", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    files = {p.name: p.read_text(encoding="utf-8-sig") for p in tmp_path.glob("*.csv")}
    assert len(files) == len(NEW), sorted(files)
    lens = next(t for n, t in files.items() if "logit" in n or "lens" in n)
    header = next(csv.reader(io.StringIO(lens)))
    L = i18n.fig_labels("ko")
    assert header[1:] == [L["layer"], L["position"], L["col_token_id"], L["token"], L["col_p"]]
    roles = next(t for n, t in files.items() if "role" in n)
    rows = list(csv.DictReader(io.StringIO(roles)))
    assert rows and all(r[L["col_induction"]] != "" for r in rows)  # measured by the exporter


@pytest.mark.parametrize("name", ["seed", "smollm2"])
def test_hostile_text_stays_escaped_in_figures_and_inert_in_csv(name, seed_model):
    m = seed_model if name == "seed" else load_or_skip("smollm2")
    run = analysed(m, HOSTILE)
    for block in m.info.blocks:
        sel = stages.Selection(name, 0, 0, 0, block)
        for sid in NEW:
            if not stages.applies(sid, m.info, block):
                continue
            fig, df = stages.stage_figure(sid, run, m.info, sel)
            for s in figure_strings(fig.to_dict()):
                assert "<script" not in s and "<b>bold" not in s, (sid, s[:80])
            if df is None:
                continue
            rows = list(csv.reader(io.StringIO(ex.table_bytes(df).decode("utf-8-sig"), newline="")))
            for cell in (c for row in rows for c in row):
                assert not cell.startswith(FORMULA_START) or is_number(cell), (sid, cell)
    sel = stages.Selection(name, 0, 0, 0, m.info.blocks[0])
    fig, df = stages.stage_figure("qk_map", run, m.info, sel)
    hovers = " ".join(str(x) for t in fig.data if t.customdata is not None for x in np.ravel(t.customdata))
    assert "&lt;" in hovers  # the tokens are there, escaped


def test_the_app_shows_the_new_view_in_korean_and_each_stage_by_url():
    from helpers import app, ok

    at = app(view="beyond", lang="ko")
    ok(at)
    assert len(at.get("plotly_chart")) == len(NEW)
    assert [s.value for s in at.subheader] == [stages.stage_title(sid, "ko") for sid in NEW]
    for sid in NEW:
        at = app(stage=sid)
        ok(at)
        assert at.session_state["stage"] == sid and len(at.get("plotly_chart")) == 1
    at.selectbox(key="role").set_value("first_token").run()
    ok(at)
    assert at.session_state["role"] == "first_token"


# --- the lessons (item 8): their answers from run_with_cache's tensors, not through the lesson code ---

LESSON_TITLES = ("lesson.lens.title", "lesson.roles.title", "lesson.sinks.title")


def lesson_expected(n: int, texts, models):
    """(what is compared, the value) for the lessons on the analyses (tests/test_lessons.py asks here),
    or None for another lesson."""
    from explorer.lessons import catalog

    title = catalog.lesson(n).title
    if title not in LESSON_TITLES:
        return None
    m = models("smollm2")
    L = m.info.n_layers
    if title == "lesson.lens.title":  # every layer's stream at the last position through m.readout
        _, c = m.run_with_cache(texts[:1])
        with torch.inference_mode():
            top = [int(m.readout(c[f"decoder.blocks.{i}.hook_resid_post"][0, -1]).argmax()) for i in range(L)]
        k = next(i for i in range(L) if all(t == top[-1] for t in top[i:]))
        thirds = [round(L * j / 3) for j in range(4)]
        return "index", next(j for j in range(3) if thirds[j] <= k < thirds[j + 1])
    if title == "lesson.roles.title":  # the head with the highest induction score, found from the tensors
        scores = induction_by_hand(m, "decoder.self_attn")
        li, h = np.unravel_index(int(scores.argmax()), scores.shape)
        return "label", f"L{li} H{h}"
    part = catalog.lesson(n).parts[0]  # sinks: ‖v₀ W_O[h]‖ against the others' mean, by hand
    _, c = m.run_with_cache(texts[:1])
    p = f"decoder.blocks.{part.layer}.self_attn"
    dh = m.info.d_head
    W_O = dict(m.named_modules())[p].W_O.weight.detach().double()[:, part.head * dh:(part.head + 1) * dh]
    lengths = torch.linalg.vector_norm(c[f"{p}.hook_v"][0, part.head].double() @ W_O.T, dim=-1)
    ratio = float(lengths[0] / lengths[1:].mean())
    return "index", sum(ratio >= b for b in (0.25, 0.75, 1.5))


@pytest.mark.weights
def test_the_lessons_on_the_analyses_ask_what_the_run_says(smollm2):
    from explorer.lessons import catalog

    for lesson in catalog.LESSONS:
        if lesson.title not in LESSON_TITLES:
            continue
        texts = list(lesson.texts)
        runs = [catalog.run_part(p, smollm2, texts) for p in lesson.parts]
        what, value = lesson_expected(lesson.number, texts, lambda name: smollm2)
        for lang in i18n.LANGS:
            q = lesson.ask(runs, lang)
            assert q.kind == "choice" and len(q.choices) >= 3 and q.why and q.prompt
            assert (q.answer if what == "index" else q.answer_text()) == value, (lesson.title, q.choices)
    # the measured facts the lessons teach: the answer appears late, L18 H6 is an induction head, and
    # layer 18 head 8's first token gets all its weight but a short value vector
    lens, roles, sinks = (next(x for x in catalog.LESSONS if x.title == t) for t in LESSON_TITLES)
    assert lesson_expected(lens.number, list(lens.texts), lambda name: smollm2) == ("index", 2)
    assert lesson_expected(roles.number, list(roles.texts), lambda name: smollm2) == ("label", "L18 H6")
    assert lesson_expected(sinks.number, list(sinks.texts), lambda name: smollm2) == ("index", 0)


def test_the_role_is_kept_in_the_url():
    from helpers import app, ok

    at = app(stage="head_roles", role="self")
    ok(at)
    assert at.session_state["role"] == "self"
    at.selectbox(key="role").set_value("previous_token").run()
    ok(at)
    assert at.query_params["role"] in ("previous_token", ["previous_token"])
    at = app(stage="head_roles", role="<b>x</b>")  # not a role: the default
    ok(at)
    assert at.session_state["role"] == "induction"
