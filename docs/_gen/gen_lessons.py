"""The Lessons pages (docs/lessons.md, lessons.ko.md: the marker <!-- gen:lessons-LANG -->), generated from the lessons' catalogue
(explorer/lessons/catalog.py) and the words (explorer/words/*.toml): every lesson's number, title,
text, the models and stages it draws and its predict-then-reveal question. A lesson on the shipped
seed models is run on its default sentence, so its question is the one the page asks; a lesson on a
fetched model (MiniLM, SmolLM2, Gemma 3) gives the question's wording, with "…" where the page puts
numbers from the run (the build never needs the fetched weights)."""
from __future__ import annotations

import re
import string

SHIPPED = ("seed", "seed-sort")
LABELS = {
    "en": {"lesson": "Lesson", "models": "Models", "figures": "Figures", "after": "after the reveal",
           "question": "The question", "sentence": "Default sentences", "open": "Open it",
           "choices": "Choices", "number": "Answer with a number."},
    "ko": {"lesson": "레슨", "models": "모델", "figures": "그림", "after": "정답을 확인한 뒤",
           "question": "질문", "sentence": "기본 문장", "open": "열기",
           "choices": "선택지", "number": "숫자로 답합니다."},
}


def _template(key: str, lang: str) -> str:
    """The catalogue's question with every placeholder shown as "…"."""
    from explorer import i18n

    text = i18n.WORDS[key].get(lang, i18n.WORDS[key]["en"])
    fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
    return text.format(**{f: "…" for f in fields})


def _questions():
    """{lesson number: {lang: Question}} for the lessons on the shipped seed models."""
    import model
    from explorer.lessons import catalog

    models, out = {}, {}
    for lesson in catalog.LESSONS:
        if not set(lesson.models()) <= set(SHIPPED) or lesson.is_long:
            continue
        runs = [None] * len(lesson.parts)  # the question reads its own part's run only (Lesson.asks)
        part = lesson.parts[lesson.asks]
        m = models.get(part.model) or models.setdefault(part.model, model.load(part.model))
        runs[lesson.asks] = catalog.run_part(part, m, list(lesson.texts))
        out[lesson.number] = {lang: lesson.ask(runs, lang) for lang in ("en", "ko")}
    return out


def _md_text(s: str) -> str:
    return s.replace("<", "&lt;").replace(">", "&gt;")


def generate() -> dict[str, str]:
    from explorer import i18n
    from explorer.lessons import catalog
    from explorer.views import stages

    asked = _questions()
    pages = {}
    for lang in ("en", "ko"):
        L = LABELS[lang]
        out = []
        for lesson in catalog.LESSONS:
            n = lesson.number
            title = i18n.t(lesson.title, lang)
            out.append(f"\n## {n}. {_md_text(title)} {{#lesson-{n}}}\n\n")
            models = ", ".join(f"`{m}`" for m in lesson.models())
            out.append(f"{L['open']}: `/lessons?lesson={n}` · {L['models']}: {models}\n\n")
            out.append(i18n.t(lesson.text, lang) + "\n\n")
            if not lesson.is_long:
                sents = " / ".join(f"“{_md_text(t)}”" for t in lesson.texts)
                out.append(f"{L['sentence']}: {sents}\n\n")
            before = [s for p in lesson.parts for s in p.stages]
            after = [s for p in lesson.parts for s in p.reveal]
            if before or after:
                link = lambda s: f"[{_md_text(stages.stage_title(s, lang))}](stages.md#{s})"  # noqa: E731
                figs = ", ".join(link(s) for s in dict.fromkeys(before))
                revealed = ", ".join(link(s) for s in dict.fromkeys(after))
                out.append(f"{L['figures']}: {figs or '—'}" + (f"; {L['after']}: {revealed}" if revealed else "")
                           + "\n\n")
            q = asked.get(n, {}).get(lang)
            ask_key = re.sub(r"\.title$", ".ask", lesson.title)
            prompt = q.prompt if q is not None else _template(ask_key, lang)
            out.append(f"**{L['question']}**\n\n> {_md_text(prompt)}\n")
            if q is not None and q.kind == "choice":
                out.append("\n" + "\n".join(f"- {_md_text(c)}" for c in q.choices) + "\n")
            elif q is not None:
                out.append(f"\n{L['number']}\n")
        pages[f"lessons-{lang}"] = "".join(out)
    return pages
