"""The Lessons page (``/lessons``): one lesson at a time, its live figures and a predict-then-reveal
question. ``explorer/main.py: main()`` registers this file with ``st.navigation`` and runs it inside
the guard every page shares; it is also importable (``render()``).

URL: ``lesson`` (1-based; anything else gives a message and lesson 1), ``lang``, ``answers``
("K:answer,...": the learner's predictions, an int each: a choice's index or the number), ``text``
XX. The session keeps the same (no accounts).
"""
from __future__ import annotations

import logging
import re
from dataclasses import replace

import streamlit as st

from explorer import failures, i18n, inputs, models_ui, poll_ui, quota, state
from explorer.lessons import catalog
from explorer.lessons.catalog import LESSONS, PartRun
from explorer.ui import busy, lang, show_figure, sync_url, t
from explorer.views import stages
from explorer.views.data import layers_for
from model.registry import FETCHED

log = logging.getLogger("attention_explorer")

N_KEY = "_lesson_n"  # the lesson shown (1-based)
ANSWERS_KEY = "_lesson_answers"  # {lesson: the learner's answer}
TEXTS_KEY = "_lesson_texts"  # {lesson: the edited sentences}
_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=])")


def md(text: str) -> str:
    """User-derived text for a markdown element: every markdown character escaped (shown literally)."""
    return _MD.sub(r"\\\1", str(text))


def default_text(n: int) -> str:
    return "\n".join(catalog.lesson(n).texts)


def lesson_texts(n: int, raw: str) -> tuple[list[str], list]:
    """(texts, notices) of a lesson's box: its sentences (cut to the explorer's limits), or for a long
    lesson the whole box as one text (cut to the box's bound; the run cuts it to its token bound)."""
    if not catalog.lesson(n).is_long:
        return inputs.limit_sentences(raw)
    text, notices = inputs.long_text(raw)
    return ([text] if text.strip() else []), notices


# --- the URL and the session ----------------------------------------------------------------------

def read_url_once() -> list:
    """On the page's first run in a session: lesson, lang, answers and text from the URL. Returns
    the messages to show (a lesson that does not exist)."""
    if st.session_state.get("_lessons_url_read"):
        return []
    st.session_state["_lessons_url_read"] = True
    messages = []
    try:
        qp = {k: st.query_params.get(k) for k in st.query_params.keys()}
    except Exception:  # a malformed URL is no reason to fail
        qp = {}
    if qp.get("lang") in i18n.LANGS:
        st.session_state["lang"] = qp["lang"]
    raw = qp.get("lesson")
    n = catalog.parse_lesson(raw) if raw is not None else 1
    if n is None:  # the value as code (shown: no backtick in it), never as markdown
        messages.append(("lessons.bad_lesson", dict(value=f"`{inputs.shown(raw)}`", n=len(LESSONS))))
        n = 1
    st.session_state[N_KEY] = n
    st.session_state.setdefault(ANSWERS_KEY, {}).update(catalog.parse_answers(qp.get("answers")))
    if qp.get("lesson_text"):
        st.session_state.setdefault(TEXTS_KEY, {})[n] = "\n".join(lesson_texts(n, str(qp["lesson_text"]))[0])
    return messages


def sync_lesson_url(n: int, text: str) -> None:
    values = {"lesson": str(n), "lang": lang()}
    answers = catalog.format_answers(st.session_state.get(ANSWERS_KEY, {}))
    for name, value in (("answers", answers), ("lesson_text", text if text != default_text(n) else "")):
        if value:
            values[name] = value
        elif name in st.query_params:
            del st.query_params[name]
    sync_url(values)


def go_to(n: int) -> None:
    st.session_state[N_KEY] = n
    st.session_state["lesson_pick"] = n


def on_pick() -> None:
    st.session_state[N_KEY] = int(st.session_state["lesson_pick"])


def on_text(n: int) -> None:
    st.session_state.setdefault(TEXTS_KEY, {})[n] = str(st.session_state.get(f"lesson_text_{n}", ""))


def on_default_text(n: int) -> None:
    st.session_state.setdefault(TEXTS_KEY, {}).pop(n, None)
    st.session_state[f"lesson_text_{n}"] = default_text(n)


def on_reveal(n: int) -> None:
    guess = st.session_state.get(f"lesson_guess_{n}")
    if guess is None:
        st.session_state["_lesson_need_guess"] = n
        return
    st.session_state.setdefault(ANSWERS_KEY, {})[n] = int(guess)
    st.session_state.pop("_lesson_need_guess", None)


def on_again(n: int) -> None:
    st.session_state.setdefault(ANSWERS_KEY, {}).pop(n, None)
    st.session_state.pop(f"lesson_guess_{n}", None)


# --- running the lesson's parts (cached: explorer/state.py) -------------------------------------

def chosen_part(part: catalog.Part) -> catalog.Part | None:
    """The part with the sidebar's configured model instead of its real checkpoint (None: as it is),
    when that model has the stack the part's block needs; its layer and head clipped to the model."""
    chosen = st.session_state.get("lesson_model") or ""
    if not chosen or part.is_long or part.model not in FETCHED or chosen not in models_ui.lesson_choices():
        return None
    try:
        m, _ = state.load_model(chosen)
    except Exception:  # a configured path that is not there: a log id here, the details in the log
        st.warning(t("model_error", name=chosen, id=failures.logged(log, "lesson model %s", chosen), hint=""), icon="⚠️")
        return None
    if not models_ui.fits(m.info, part.block):
        st.info(t("lessons.model_not_fit", model=chosen, stack=t(f"blocks.{part.block}"), own=part.model), icon="ℹ️")
        return None
    return replace(part, model=chosen, note=None, layer=min(part.layer, layers_for(m.info, part.block) - 1),
                   head=min(part.head, m.info.n_heads - 1))


def part_run(part: catalog.Part, texts: list[str]) -> PartRun | None:
    """The part's live run, or None with a message (a model whose weights are not here)."""
    part = chosen_part(part) or part
    try:
        with st.spinner(t("running")):
            m, fallback = state.load_model(part.model)
    except Exception:  # not fetched, a broken download, ...: a log id here, the details in the log
        st.warning(t("lessons.model_missing", model=part.model, id=failures.logged(log, "lesson model %s", part.model)),
                   icon="⚠️")
        return None
    if fallback:
        st.warning(t("weights_missing", name=part.model, error=fallback), icon="⚠️")
    if part.is_long:
        return long_part_run(part, texts[0], m)
    texts, _ = inputs.limit_tokens(texts, m.tokenizer, inputs.MAX_TOKENS)
    n_tokens = [len(e.ids) for e in m.tokenizer.encode(texts)]
    with st.spinner(t("running")):
        # a decoder-only model's vocabulary read out after each sentence's last token only, as the
        # explorer's page does (no lesson asks for another position's next tokens)
        run = state.run(part.model, texts, n_tokens, m.info, next_tokens="last")
        if "trace" in catalog.uses(part):
            run = run.with_trace(state.trace(part.model, texts[min(part.sentence, len(texts) - 1)]))
        try:
            run = catalog.attach_analyses(part, run, lambda s: state.lens(part.model, texts, run, s),
                                          lambda: state.induction(part.model))
        except quota.Refused as e:  # this page's lens quota (hosted): the part waits, the page says until when
            st.warning(e.message(lang()), icon="⏳")
            return None
        edited = state.run(part.model, texts, n_tokens, m.info, edits=part.edits, next_tokens="last") if part.edits else None
    pr = PartRun(part, run, m.info, edited)
    if "patches" in catalog.uses(part) and len(texts) >= catalog.PATCHED_SENTENCES:
        patch_part(pr, texts, m)
    if "effects" in catalog.uses(part):
        effects_part(pr, texts)
    return pr


def long_part_run(part: catalog.Part, text: str, m) -> PartRun | None:
    """A long part's run: the text whole, cut to this server's long bound (cached: state.long_run), and
    its summaries; None with a message when it cannot run (the page's quota, the memory budget)."""
    import model
    from model.analysis import long as ml

    bound = inputs.long_token_bound(state.HOSTED)
    try:
        with busy(("long", part.model, text, bound), "long.running"):
            lr = state.long_run(part.model, text, bound)
            s = state.long_summaries(part.model, text, bound)
    except quota.Refused as e:
        st.warning(e.message(lang()), icon="⏳")
        return None
    except model.RunTooLarge as e:
        st.warning(t("long.too_large", model=m.info.name, need=f"{e.estimate / 2**20:,.0f}",
                     allowed=f"{e.budget / 2**20:,.0f}"), icon="⚠️")
        return None
    except ml.LongInputError:  # an empty text: the page said so before
        return None
    if lr.cut:
        st.info(t("long.cut", m=lr.n_given, n=lr.T, model=m.info.name), icon="✂️")
    return PartRun(part, None, m.info, long=lr, summaries=s)


def draw_long(pr: PartRun, n: int, i: int, text: str, ids: tuple[str, ...]) -> None:
    """A long part's figures ``ids`` (catalog.LONG_FIGURES), each with the words under it."""
    from explorer.views import long as lv

    bound = inputs.long_token_bound(state.HOSTED)

    def grid(layer: int, head: int):
        return state.long_grid(pr.part.model, text, bound, layer, head, lv.GRID_CELLS)

    for fid, fig, note in catalog.long_figures(pr, ids, lang(), grid):
        st.plotly_chart(fig, width="stretch", key=f"chart-L{n}-p{i}-{fid}", config={"displaylogo": False})
        st.caption(note)


def effects_part(pr: PartRun, texts: list[str]) -> None:
    """An ablation part: every head of its block ablated on its sentence (cached: state.effects), with a
    progress bar; none when the model has no prediction there (the figure says so)."""
    from model.analysis import ablation

    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=t("effect.progress", done=done, total=total))

    try:
        pr.effects = state.effects(pr.part.model, texts[min(pr.part.sentence, len(texts) - 1)], pr.part.block,
                                   progress=progress)
    except ablation.AblationError:
        pass
    bar.empty()


def patch_part(pr: PartRun, texts: list[str], m) -> None:
    """A patching part: sentence 1's run and the experiment, sentence 0 against it (cached:
    state.patching), with a progress bar; none when the two have different token counts (the figure and
    the question say so) or past a hosted server's bound (a message says so)."""
    from model.analysis import patching as mp

    pr.other = state.run(pr.part.model, texts[1:2], [len(m.tokenizer.encode(texts[1:2])[0].ids)], m.info)
    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=t("patching.progress", done=done, total=total))

    try:
        pr.patching = state.patching(pr.part.model, texts[0], texts[1], "positions",
                                     stages.patching_stack(m.info, pr.part.block), progress=progress)
    except quota.Refused as e:  # this page's patching quota (hosted)
        st.warning(e.message(lang()), icon="⏳")
    except mp.PatchingTooLarge as e:
        st.warning(t("patching.too_large", n=e.needed, bound=e.bound), icon="⚠️")
    except mp.PatchingError:
        pass
    bar.empty()


def draw_part(pr: PartRun, n: int, i: int, texts: list[str], which: str) -> None:
    """The part's figures before the question (``which`` "stages") or once it is answered ("reveal"):
    its stages (those that apply to its model and block), each with its words; a long part's long
    figures."""
    part, lg = pr.part, lang()
    if part.is_long:
        ids = part.long_reveal if which == "reveal" else part.long
        if ids:
            st.caption(t("lessons.part", model=part.model))
            draw_long(pr, n, i, texts[0], ids)
        return
    ids = part.reveal if which == "reveal" else part.stages
    if not ids:
        return
    if part.note:
        st.markdown(f"**{t(part.note)}**")
    else:
        st.caption(t("lessons.part", model=part.model))
    sel = catalog.selection(part, pr.run)
    for sid in ids:
        if not stages.applies(sid, pr.info, sel.block):
            continue
        opts = catalog.stage_options(part, pr, sid)
        try:
            words = stages.stage_words(sid, pr.run, pr.info, sel, lg, **opts)
            fig, df = state.stage_figure(sid, part.model, texts, pr.run, pr.info, sel, lg, **opts)
        except Exception as e:  # one figure failing must not take the lesson down; the details go to the log
            st.warning(t("stage_error", kind=type(e).__name__, msg=failures.logged(log, "lesson %s stage %s failed", n, sid)))
            continue
        st.subheader(words["title"], anchor=f"lesson-{n}-{i}-{sid}")
        st.markdown(words["explain"])
        if words["formula"]:
            st.latex(words["formula"])
        edits, compare = stages.second_run(sid, opts)
        text = texts[sel.sentence]
        meta = {"model": part.model, "sentence": sel.sentence, "text": text, "block": sel.block,
                "layer": sel.layer, "head": sel.head, "stage": sid, "stage_title": words["title"],
                "caption": stages.caption(part.model, text, sel, sid, lg, edits=edits, compare=compare),
                "lang": lg, "selection": sel, "edits": edits, "compare": compare}
        show_figure(fig, df, meta, f"L{n}-p{i}-{sid}", remember=False)


# --- the question -------------------------------------------------------------------------------

def draw_question(q: catalog.Question, n: int) -> bool:
    """The prediction widget and the reveal; True once the answer is shown."""
    st.header(t("lessons.question"), divider="gray")
    answers = st.session_state.setdefault(ANSWERS_KEY, {})
    key = f"lesson_guess_{n}"
    if n in answers and key not in st.session_state:  # from the URL or an earlier visit
        stored = answers[n]
        st.session_state[key] = stored if q.kind == "number" or 0 <= stored < len(q.choices) else None
    if q.kind == "choice":
        if st.session_state.get(key) is not None and not 0 <= st.session_state[key] < len(q.choices):
            st.session_state[key] = None  # the sentence changed: fewer choices now
        st.radio(md(q.prompt), list(range(len(q.choices))), key=key, index=None,
                 format_func=lambda i: md(q.choices[i]))
    else:
        st.number_input(md(q.prompt), value=None, step=1, min_value=-10**6, max_value=10**6, key=key,
                        placeholder=t("lessons.guess"))
    revealed = n in answers
    if not revealed:
        st.button(t("lessons.reveal"), key=f"lesson_reveal_{n}", on_click=on_reveal, args=(n,),
                  type="primary")
        if st.session_state.get("_lesson_need_guess") == n:
            st.info(t("lessons.need_guess"), icon="✍️")
        return False
    guess = answers[n]
    if q.correct(guess):
        st.success(md(t("lessons.right", answer=q.answer_text())), icon="✅")
    else:
        st.info(md(t("lessons.wrong", guess=q.guess_text(guess), answer=q.answer_text())), icon="💡")
    st.markdown(md(q.why))
    st.button(t("lessons.again"), key=f"lesson_again_{n}", on_click=on_again, args=(n,))
    return True


# --- the page ----------------------------------------------------------------------------------

def sidebar(n: int):
    sb = st.sidebar
    if "lang" not in st.session_state:
        st.session_state["lang"] = st.session_state.get("_keep_lang", "en")
    sb.radio(i18n.t("language", lang()), i18n.LANGS, key="lang", horizontal=True,
             format_func=lambda x: i18n.LANG_NAMES[x])
    answers = st.session_state.get(ANSWERS_KEY, {})
    st.session_state["lesson_pick"] = n
    sb.selectbox(t("lessons.pick"), [x.number for x in LESSONS], key="lesson_pick", on_change=on_pick,
                 format_func=lambda k, lg=lang(): ("✓ " if k in answers else "")  # lg: the page's, not the caller's
                 + f"{k}. {i18n.t(catalog.lesson(k).title, lg)}")
    choices = models_ui.lesson_choices()  # the host's configured models, for the parts on a real checkpoint
    if choices and any(part.model in FETCHED for part in catalog.lesson(n).parts):
        if st.session_state.get("lesson_model") not in ["", *choices]:
            st.session_state["lesson_model"] = ""
        sb.selectbox(t("lessons.model_choice"), ["", *choices], key="lesson_model", help=t("lessons.model_choice_help"),
                     format_func=lambda m, lg=lang(): models_ui.label(m, lg) if m else i18n.t("lessons.model_own", lg))
    return sb.empty()  # the progress, written once this lesson's answer is checked


def show_progress(where) -> None:
    answers = st.session_state.get(ANSWERS_KEY, {})
    results = st.session_state.get("_lesson_results", {})
    where.caption(t("lessons.progress", done=len(answers), n=len(LESSONS),
                    right=sum(1 for k, v in results.items() if v and k in answers)))


def handout_button(n: int, runs: list[PartRun], texts: list[str], where) -> None:
    from explorer.export import renderer
    from explorer.lessons import handout

    reason = renderer.unavailable_reason()
    lg = lang()

    def data() -> bytes:
        return handout.handout_pdf(catalog.lesson(n), runs, texts, lg)

    where.download_button(t("lessons.handout"), data=data, file_name=f"lesson-{n}-{lg}.pdf", mime="application/pdf",
                          key=f"lesson_handout_{n}", on_click="ignore", disabled=reason is not None,
                          icon=":material/picture_as_pdf:",
                          help=t("lessons.handout_unavailable", reason=reason.reason) if reason
                          else t("lessons.handout_help"))


def render() -> None:
    messages = read_url_once()
    n = int(st.session_state.get(N_KEY) or 1)
    if catalog.parse_lesson(n) is None:
        n = 1
    progress = sidebar(n)
    n = int(st.session_state.get(N_KEY) or 1)
    lesson = catalog.lesson(n)
    st.title(t("lessons.title"))
    st.caption(t("lessons.tagline", n=len(catalog.LESSONS)))
    for key, args in messages:
        st.warning(t(key, **args), icon="⚠️")
    st.header(t("lessons.heading", n=n, title=t(lesson.title)), divider="gray")
    st.markdown(t(lesson.text))

    box = f"lesson_text_{n}"
    if box not in st.session_state:
        st.session_state[box] = st.session_state.get(TEXTS_KEY, {}).get(n, default_text(n))
    st.text_area(t("lessons.long_text") if lesson.is_long else t("lessons.sentences"), key=box, height=90,
                 on_change=on_text, args=(n,), max_chars=inputs.MAX_BOX_CHARS,
                 help=t("lessons.long_text_help", t=inputs.long_token_bound(state.HOSTED)) if lesson.is_long
                 else t("text_help", n=inputs.MAX_SENTENCES, c=inputs.MAX_CHARS, t=inputs.MAX_TOKENS))
    if st.session_state[box] != default_text(n):
        st.button(t("lessons.default_text"), key=f"lesson_default_{n}", on_click=on_default_text, args=(n,))
    texts, notices = lesson_texts(n, st.session_state[box])
    for notice in notices:
        st.info(t(notice.key, **notice.args), icon="✂️")
    if not texts:
        st.info(t("lessons.empty"), icon="✍️")
        sync_lesson_url(n, "")
        show_progress(progress)
        return

    runs: list[PartRun | None] = []
    for i, part in enumerate(lesson.parts):
        pr = part_run(part, texts)
        runs.append(pr)
        if pr is not None:
            draw_part(pr, n, i, texts, "stages")
    asked = runs[lesson.asks]
    revealed = False
    if asked is None:
        st.info(t("lessons.no_question", model=lesson.parts[lesson.asks].model), icon="ℹ️")
    else:
        q = lesson.ask(runs, lang())
        poll_ui.offer_lesson(lesson, runs, texts)  # presenter mode: the same question for the class
        revealed = draw_question(q, n)
        answers = st.session_state.get(ANSWERS_KEY, {})
        right = st.session_state.setdefault("_lesson_results", {})
        if n in answers:
            right[n] = q.correct(answers[n])
        else:
            right.pop(n, None)
    if any(part.reveal or part.long_reveal for part in lesson.parts):  # the figures that show the answer
        if revealed or asked is None:
            for i, (part, pr) in enumerate(zip(lesson.parts, runs)):
                if pr is not None:
                    draw_part(pr, n, i, texts, "reveal")
        else:
            st.caption(t("lessons.after_reveal"))

    c1, c2 = st.columns(2)
    if n > 1:
        c1.button(t("lessons.prev"), key="lesson_prev", on_click=go_to, args=(n - 1,), width="stretch")
    if n < len(LESSONS):
        c2.button(t("lessons.next"), key="lesson_next", on_click=go_to, args=(n + 1,), width="stretch")
    if all(r is not None for r in runs):
        handout_button(n, runs, texts, st.sidebar)
    show_progress(progress)
    sync_lesson_url(n, "\n".join(texts))


if __name__ == "__main__":  # run by st.navigation as the page's script
    render()
