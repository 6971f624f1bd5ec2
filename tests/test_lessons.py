"""The Lessons page (issue 16): every question's answer equals what the model's own tensors say
(computed here from ``model.load(...).run_with_cache(...)``, not through the lesson code), also
after the sentence is edited; every lesson renders in English and Korean (AppTest) with its
question; a tampered ``lesson=`` gives a message and lesson 1; predicting and revealing keeps the
answer in the session and the URL; the handout PDF has its pages and its title.
The browser test: tests/test_lessons_e2e.py."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from explorer import i18n
from explorer.lessons import catalog
from explorer.lessons.page import md
from model import fetch

APP = str(Path(__file__).resolve().parent.parent / "explorer" / "main.py")
pytestmark = pytest.mark.timeout(600)
REAL = {"minilm", "smollm2", "gemma3"}


@pytest.fixture(scope="module")
def models():
    """The models as the page has them: explorer/state.py's process-wide cache, which calls
    ``model.load(name)`` (for the seeds, without its fallback to untrained weights: asserted), so the
    pages this file renders find them loaded instead of reading the weights a second time."""
    from explorer import state

    def get(name):
        if name in REAL and not fetch.is_fetched(name):
            pytest.skip(f"{name} is not fetched (python -m model.fetch {name})")
        m, notice = state.load_model(name)
        assert notice is None, notice  # the shipped weights, not the untrained fallback
        return m
    return get


def figures(lesson, models, reveal: bool = False) -> int:
    """How many figures the lesson draws before its question (or, ``reveal``, after the answer)."""
    from explorer.views import stages
    return sum(stages.applies(sid, models(p.model).info, p.block)
               for p in lesson.parts for sid in (p.reveal if reveal else p.stages)) \
        + sum(len(p.long_reveal if reveal else p.long) for p in lesson.parts)  # a long part's figures


_RUNS: dict = {}  # (lesson, texts) -> its parts' runs: made once for this file (several tests ask again)


def lesson_runs(lesson, texts, models):
    """The lesson's parts' live runs (catalog.run_part, as the handout and the exporter make them), made
    once per lesson and text for this file. A long part's run is the page's own instead (explorer/state.py's
    long_run and long_summaries, at the page's token bound): one forward of some 2,000 Gemma 3 tokens that
    the page rendered here then shows, rather than the same forward made twice (catalog.run_part's long
    branch calls the same two functions of model/analysis/long.py)."""
    key = (lesson.number, tuple(texts))
    if key not in _RUNS:
        _RUNS[key] = [long_part_run(p, texts[0], models) if p.is_long else catalog.run_part(p, models(p.model), texts)
                      for p in lesson.parts]
    return _RUNS[key]


def long_part_run(part, text: str, models) -> catalog.PartRun:
    from explorer import inputs, state

    m, bound = models(part.model), inputs.long_token_bound(state.HOSTED)
    lr = state.long_run(part.model, text, bound)
    return catalog.PartRun(part, None, m.info, long=lr, summaries=state.long_summaries(part.model, text, bound))


# --- the answers, from the tensors ------------------------------------------------------------------

def rows(pattern, q):
    return pattern[..., q, :]


def expected(n: int, texts, models) -> tuple[str, object]:
    """(what is compared, the value) for lesson n, straight from run_with_cache's tensors."""
    if n == 1:
        _, c = models("seed").run_with_cache(texts)
        width = c["encoder.blocks.0.self_attn.hook_scores"].shape[-1]
        return "number", width - min(len(t) for t in c.tokens)
    if n == 2:
        _, c = models("seed").run_with_cache(texts)
        pe = c["encoder.hook_pos_embed"][0, :len(c.tokens[0])].double()
        sims = torch.nn.functional.cosine_similarity(pe[1:], pe[:1].expand_as(pe[1:]), dim=-1)
        return "label", str(int(sims.argmax()) + 1)
    if n == 3:
        _, c = models("seed").run_with_cache(texts)
        return "number", c["encoder.blocks.0.self_attn.hook_q"].shape[-1]
    if n == 4:
        m = models("seed")
        _, c = m.run_with_cache(texts)
        _, e = m.run_with_cache(texts, edits="no_scale")
        q = min(3, len(c.tokens[0]) - 1)
        a = c["encoder.blocks.1.self_attn.hook_pattern"][0, 0, q].max().item()
        b = e["encoder.blocks.1.self_attn.hook_pattern"][0, 0, q].max().item()
        return "index", 2 if abs(b - a) < 1e-6 else (0 if b > a else 1)
    if n == 5:
        _, c = models("seed").run_with_cache(texts)
        row = c["decoder.blocks.0.self_attn.hook_pattern"][1, 0, 3]
        return "number", int((row == 0).sum())
    if n == 6:
        _, c = models("seed").run_with_cache(texts)
        k = len(c.tokens[0])
        return "index", int(c["encoder.blocks.1.self_attn.hook_pattern"][0, 2, min(3, k - 1), :k].argmax())
    if n == 7:
        _, c = models("seed").run_with_cache(texts)
        k = len(c.tokens[0])
        p = c["encoder.blocks.0.self_attn.hook_pattern"][0, :, :k, :k].double()
        return "index", int((-torch.special.xlogy(p, p).sum(-1)).mean(-1).argmax())
    if n == 8:
        _, c = models("seed").run_with_cache(texts)
        h = c["encoder.blocks.0.hook_ffn_hidden"][0, 0]
        share = float((h == 0).sum()) / h.numel()
        return "index", sum(share >= b for b in (0.25, 0.5, 0.75))
    if n == 9:
        _, c = models("seed").run_with_cache(texts)
        k = len(c.tokens[0])
        return "index", int(c["decoder.blocks.1.cross_attn.hook_pattern"][0, 0, 0, :k].argmax())
    if n == 10:  # the seed writes one character a step: step 2 writes the output's third character
        out, _ = models("seed").run_with_cache(texts)
        return "label", out.generated[0][2]
    if n == 11:
        _, c = models("smollm2").run_with_cache(texts)
        k = c["decoder.blocks.0.self_attn.hook_k"][0]
        h = catalog.GQA_QUERY_HEAD
        group = [x for x in range(k.shape[0]) if torch.equal(k[x], k[h])]  # heads reading the same keys
        return "label", f"K/V {group[0] // len(group)}"
    if n == 12:  # patching by hand: one position of the clean stream copied into the corrupted run alone
        from model.runtime.hooks import hooks

        m = models("smollm2")
        names = [f"decoder.blocks.{i}.hook_resid_post" for i in range(m.info.n_layers)]
        out, c = m.run_with_cache(texts[:1], names=names)
        answer = int(out.logits[0, -1].argmax())
        a, b = (e.ids for e in m.tokenizer.encode(texts[:2]))
        changed, last = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a) - 1

        def logp(layer: int, pos: int) -> float:
            def put(x, name):
                x = x.clone()
                x[0, pos] = c[name][0, pos]
                return x

            with hooks({names[layer]: put}):
                logits = m.run(texts[1:2]).logits[0, -1].float()
            return float(torch.log_softmax(logits, -1)[answer])

        layer = next((li for li in range(len(names)) if logp(li, last) > logp(li, changed)), None)
        thirds = [round(len(names) * k / 3) for k in range(4)]
        return "index", 3 if layer is None else next(k for k in range(3) if thirds[k] <= layer < thirds[k + 1])
    from test_long import lesson_expected as long_expected  # the window lesson (issue 34)

    found = long_expected(n, texts, models)
    if found is not None:
        return found
    from test_why import lesson_expected as why_expected  # the lessons of issue 35

    found = why_expected(n, texts, models)
    if found is not None:
        return found
    from test_analysis import lesson_expected  # the lessons on the analyses (issue 26)

    found = lesson_expected(n, texts, models)
    if found is not None:
        return found
    raise AssertionError(n)


def check(q: catalog.Question, what: str, value) -> None:
    if what == "number":
        assert q.kind == "number" and q.answer == value
    elif what == "index":
        assert q.kind == "choice" and q.answer == value
    else:
        assert q.kind == "choice" and q.answer_text() == value


@pytest.mark.parametrize("n", [x.number for x in catalog.LESSONS])
def test_every_answer_is_the_runs(n, models):
    lesson = catalog.lesson(n)
    q = lesson.ask(lesson_runs(lesson, list(lesson.texts), models), "en")
    check(q, *expected(n, list(lesson.texts), models))
    assert q.why and q.prompt and (q.kind == "number" or len(q.choices) >= 2)


EDITED = {1: ["attention", "a", "is all"], 5: ["the cat sat", "on"], 6: ["abcabc xyz"], 9: ["reverse me"],
          10: ["banana"], 4: ["kitten"]}


@pytest.mark.parametrize("n", sorted(EDITED))
def test_the_answer_follows_an_edited_sentence(n, models):
    lesson = catalog.lesson(n)
    texts = EDITED[n]
    before = lesson.ask(lesson_runs(lesson, list(lesson.texts), models), "en")
    q = lesson.ask(lesson_runs(lesson, texts, models), "en")
    check(q, *expected(n, texts, models))
    assert (q.prompt, q.why) != (before.prompt, before.why)  # the numbers are the new run's


def test_lesson_5_against_tutorial_000s_masks(models):
    """Lesson 5 checked against tutorial 000's recipe (in this test's own code): the target mask is
    (target != pad) & a lower triangle (np.triu(ones, k=1) == 0), scores where it is 0 are filled with
    −1e9 before softmax. The model's mask equals it, and its weights have exactly as many zeros in
    row 3 as the recipe's (e^(−1e9) is 0 in float32 too) — the lesson's answer."""
    lesson = catalog.lesson(5)
    texts = list(lesson.texts)
    q = lesson.ask(lesson_runs(lesson, texts, models), "en")
    _, c = models("seed").run_with_cache(texts)
    width = c["decoder.blocks.0.self_attn.hook_scores"].shape[-1]
    real = torch.tensor([[j < len(toks) for j in range(width)] for toks in c.decoder_tokens])  # target != pad
    subsequent = torch.from_numpy(np.triu(np.ones((1, width, width)), k=1).astype("uint8")) == 0
    recipe = real.unsqueeze(-2) & subsequent  # (batch, width, width)
    assert torch.equal(c["decoder.blocks.0.self_attn.hook_mask"][:, 0], recipe)
    scores = c["decoder.blocks.0.self_attn.hook_scores"][1, 0]
    weights = torch.softmax(scores.masked_fill(recipe[1] == 0, -1e9), dim=-1)
    assert int((weights[3] == 0).sum()) == q.answer == int((~recipe[1, 3]).sum())


def test_url_values_are_parsed_never_raise():
    assert catalog.parse_lesson("3") == 3 and catalog.parse_lesson(" 11 ") == 11
    for bad in ("0", "99", "-1", "x", "", None, "3.5", "1e3"):
        assert catalog.parse_lesson(bad) is None
    assert catalog.parse_answers("1:9,4:0,zz,99:3,5:x,6:-2") == {1: 9, 4: 0, 6: -2}
    assert catalog.format_answers({4: 0, 1: 9}) == "1:9,4:0"


# --- the page (AppTest) ---------------------------------------------------------------------------

def lessons_page(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()  # the explorer (the default page) first: AppTest finds st.navigation's pages after a run
    return at.switch_page("lessons/page.py").run()


def qp(at: AppTest, name: str) -> str | None:
    value = at.query_params.get(name)
    return value[-1] if isinstance(value, list) else value


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def question_label(at: AppTest, n: int) -> str:
    key = f"lesson_guess_{n}"
    widgets = [w for w in [*at.radio, *at.number_input] if w.key == key]
    assert len(widgets) == 1, f"lesson {n}: no question widget"
    return widgets[0].label


@pytest.fixture(scope="module")
def questions(models):
    """{(lesson, lang): the question the page must show}, from the lesson's own live run."""
    out = {}
    for lesson in catalog.LESSONS:
        try:
            runs = lesson_runs(lesson, list(lesson.texts), models)
        except pytest.skip.Exception:
            continue
        for lang in i18n.LANGS:
            out[lesson.number, lang] = lesson.ask(runs, lang)
    return out


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_every_lesson_renders_with_its_question(lang, questions, models):
    for lesson in catalog.LESSONS:
        if (lesson.number, lang) not in questions:
            continue
        at = lessons_page(lesson=str(lesson.number), lang=lang)
        ok(at)
        heading = i18n.t("lessons.heading", lang, n=lesson.number, title=i18n.t(lesson.title, lang))
        assert heading in [h.value for h in at.header]
        q = questions[lesson.number, lang]
        assert question_label(at, lesson.number) == md(q.prompt)
        assert len(at.get("plotly_chart")) == figures(lesson, models)  # the answer's figures wait for the reveal
        assert qp(at, "lesson") == str(lesson.number) and qp(at, "lang") == lang


@pytest.mark.parametrize("value", ["0", "99", "abc", "-3"])  # 99: past the last lesson
def test_a_tampered_lesson_gives_a_message_and_lesson_1(value):
    at = lessons_page(lesson=value)
    ok(at)
    assert any(value in w.value for w in at.warning)
    assert i18n.t("lessons.heading", "en", n=1, title=i18n.t("lesson.1.title")) in [h.value for h in at.header]
    assert qp(at, "lesson") == "1"


def test_user_text_is_never_markup(models):
    text = "<img src=x>**b** [l](javascript:x) :red[z]"
    at = lessons_page(lesson="6", lesson_text=text)
    ok(at)
    assert at.text_area(key="lesson_text_6").value == text
    q = catalog.lesson(6).ask(lesson_runs(catalog.lesson(6), [text], models), "en")
    radio = at.radio(key="lesson_guess_6")
    assert radio.options == [md(c) for c in q.choices] and "\\*" in "".join(radio.options)  # escaped: shown as typed


def test_predict_reveal_and_the_url_keep_the_answer(questions, models):
    at = lessons_page(lesson="5")
    q = questions[5, "en"]
    at.number_input(key="lesson_guess_5").set_value(q.answer + 1).run()
    wrong = i18n.t("lessons.wrong", "en", guess=q.answer + 1, answer=q.answer)
    assert not at.success and md(wrong) not in [i.value for i in at.info]  # nothing revealed before the button
    before = figures(catalog.lesson(5), models)
    assert len(at.get("plotly_chart")) == before
    at.button(key="lesson_reveal_5").click().run()
    ok(at)
    assert len(at.get("plotly_chart")) == before + figures(catalog.lesson(5), models, reveal=True) > before
    assert qp(at, "answers") == f"5:{q.answer + 1}"
    assert md(wrong) in [i.value for i in at.info] and not at.success  # wrong, and the right number
    assert md(q.why) in [m.value for m in at.markdown]

    # lesson 6, edited: the reveal gives the new run's answer, the URL keeps the text
    at.button(key="lesson_next").click().run()
    assert qp(at, "lesson") == "6"
    text = EDITED[6][0]
    at.text_area(key="lesson_text_6").set_value(text).run()
    edited = catalog.lesson(6).ask(lesson_runs(catalog.lesson(6), [text], models), "en")
    at.radio(key="lesson_guess_6").set_value(edited.answer).run()
    at.button(key="lesson_reveal_6").click().run()
    ok(at)
    assert [s.value for s in at.success] == [md(i18n.t("lessons.right", "en", answer=edited.answer_text()))]
    assert qp(at, "lesson_text") == text
    assert i18n.t("lessons.progress", "en", done=2, n=len(catalog.LESSONS), right=1) in [c.value for c in at.caption]
    assert qp(at, "answers") == f"5:{q.answer + 1},6:{edited.answer}"

    # a new session from that URL: lesson 6, its sentence, both answers (revealed)
    again = lessons_page(**{k: qp(at, k) for k in ("lesson", "answers", "lesson_text")})
    ok(again)
    assert again.text_area(key="lesson_text_6").value == text
    assert [s.value for s in again.success] == [md(i18n.t("lessons.right", "en", answer=edited.answer_text()))]


def test_lesson_11_without_the_real_models_says_how_to_fetch_them(monkeypatch, tmp_path):
    from explorer import state
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path))  # an empty cache: nothing fetched
    state._load.clear()  # models loaded by earlier tests stay cached in this process
    at = lessons_page(lesson="11", lang="ko")
    assert not at.exception and not at.error
    warned = "\n".join(w.value for w in at.warning)
    assert "python -m model.fetch minilm" in warned and "python -m model.fetch smollm2" in warned
    assert i18n.t("lessons.no_question", "ko", model="smollm2") in [i.value for i in at.info]
    assert len(at.get("plotly_chart")) == 0
    state._load.clear()


# --- the handout ------------------------------------------------------------------------------------

def pdf_texts(data: bytes) -> list[str]:
    from pypdf import PdfReader
    return [p.extract_text() for p in PdfReader(io.BytesIO(data)).pages]


@pytest.fixture(scope="module")
def chromium():
    from explorer.export import renderer
    if (reason := renderer.unavailable_reason()) is not None:
        pytest.skip(str(reason))
    yield
    renderer.shutdown()


def test_the_handout_has_its_pages_title_and_answer_last(models, chromium):
    from explorer.lessons import handout
    lesson = catalog.lesson(6)
    runs = lesson_runs(lesson, list(lesson.texts), models)
    before, after = figures(lesson, models), figures(lesson, models, reveal=True)
    assert (before, after) == (1, 2)  # scaled scores; softmax, weights·V
    pages = pdf_texts(handout.handout_pdf(lesson, runs, list(lesson.texts), "en"))
    assert len(pages) == before + after + 3  # text, figures, question, the answer's figures, answer
    assert "Softmax and the weighted sum of values" in pages[0]
    assert pages[before + 1].startswith(i18n.t("lessons.question"))
    q = lesson.ask(runs, "en")
    assert pages[-1].startswith(i18n.t("lessons.answers_page")) and "Answer:" not in "".join(pages[:-1])
    assert q.answer_text().split(": ")[1] in pages[-1].split("Answer:")[1]


def test_the_exporter_writes_a_korean_handout(tmp_path, chromium, models):
    from explorer.cli.export import main
    lesson = catalog.lesson(3)
    assert main(["--lesson", "3", "--lang", "ko", "--out", str(tmp_path / "l3.pdf")]) == 0
    pages = pdf_texts((tmp_path / "l3.pdf").read_bytes())
    assert len(pages) == figures(lesson, models) + figures(lesson, models, reveal=True) + 3
    assert i18n.t(lesson.title, "ko") in pages[0].replace("\n", " ")
    assert i18n.t("lessons.answers_page", "ko") in pages[-1]
    with pytest.raises(SystemExit):
        main(["--lesson", "99", "--out", str(tmp_path / "x.pdf")])


def test_the_reveals_numbers_are_the_runs(models):
    """The numbers a reveal states beyond the answer come from the run's own tensors: lesson 2's base n
    (the seed's is not the paper's 10000), lesson 4's growth of the row's score spread without ÷√d_k
    (every layer runs unscaled, so at layer 1 it is not exactly √d_k), lesson 10's keys read."""
    q2 = catalog.lesson(2).ask(lesson_runs(catalog.lesson(2), list(catalog.lesson(2).texts), models), "en")
    assert f"n = {models('seed').info.positional_base:g} " in q2.why

    texts = list(catalog.lesson(4).texts)
    q4 = catalog.lesson(4).ask(lesson_runs(catalog.lesson(4), texts, models), "en")
    m = models("seed")
    _, c = m.run_with_cache(texts)
    _, e = m.run_with_cache(texts, edits="no_scale")
    row = min(3, len(c.tokens[0]) - 1)
    name = "encoder.blocks.1.self_attn.hook_scores"
    spread = float(np.ptp(e[name][0, 0, row].double().numpy()) / np.ptp(c[name][0, 0, row].double().numpy()))
    assert f"is {spread:.2f} times wider" in q4.why

    lesson = catalog.lesson(10)
    runs = lesson_runs(lesson, list(lesson.texts), models)
    q10 = lesson.ask(runs, "en")
    tr = runs[1].run.trace
    k = catalog.decoding_step(tr)
    keys = int(np.sum(tr.self_allowed[int(tr.query[k])]))  # the keys the hooks let this step's query read
    assert f"reads {keys} keys: the {keys - 1} kept in the cache" in q10.why
