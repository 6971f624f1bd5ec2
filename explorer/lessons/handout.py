"""A lesson as a PDF handout: its text, its figures and its question; the answer on the last page.

    pdf = handout_pdf(catalog.lesson(6), runs, texts, "ko")    # bytes (runs: catalog.PartRun per part)
    python -m explorer.export --lesson 6 --lang ko --out lesson6.pdf

Every page is drawn by the export's chromium (explorer/export/renderer.py), the text pages as plotly
figures of text only, so Korean renders with the same font as the figures (Noto Sans CJK KR:
fonts-noto-cjk); the pages are joined with pypdf, as the decoding view's page-per-step PDF is.
The figures that show the answer (``Part.reveal``) come after the question page, the answer last.
"""
from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Sequence

import plotly.graph_objects as go

from explorer import i18n
from explorer.export.bundles import prepare
from explorer.export.renderer import figure_bytes
from explorer.lessons import catalog
from explorer.views import stages, style
from explorer.views.theme import get_theme

THEME = "presentation"
LINE_UNITS = 116  # a text line's width in Latin characters (a Hangul syllable counts two)
LONG_TEXT_SHOWN = 300  # a long lesson's text on the first page: its start (the figures say its tokens)
TITLE_SIZE, BODY_SIZE = 40, 24


def _units(word: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in word)


def wrap(text: str, width: int = LINE_UNITS) -> list[str]:
    """Lines of at most ``width`` units (words kept whole unless one alone is longer)."""
    lines: list[str] = []
    for para in str(text).split("\n"):
        line, used = "", 0
        for word in para.split(" "):
            w = _units(word)
            if line and used + 1 + w > width:
                lines.append(line)
                line, used = word, w
            else:
                line, used = (f"{line} {word}" if line else word), used + (1 if line else 0) + w
        lines.append(line)
    return lines


def plain(markdown: str) -> str:
    """The catalogue's markdown as plain text (bold and code marks removed)."""
    return re.sub(r"\*\*|`", "", markdown)


def text_page(title: str, blocks: Sequence[str], footer: str) -> go.Figure:
    """One page of text: a title and paragraphs, every string escaped (shown literally)."""
    theme = get_theme(THEME)
    body = []
    for block in blocks:
        body += [style.esc(line) for line in wrap(block)] + [""]
    fig = go.Figure()
    fig.add_annotation(text=f"<b>{style.esc(title)}</b>", x=0, y=1, xref="paper", yref="paper", xanchor="left",
                       yanchor="top", showarrow=False, align="left", font=dict(size=TITLE_SIZE, family=style.FONT))
    fig.add_annotation(text="<br>".join(body), x=0, y=0.9, xref="paper", yref="paper", xanchor="left",
                       yanchor="top", showarrow=False, align="left", font=dict(size=BODY_SIZE, family=style.FONT))
    fig.add_annotation(text=style.esc(footer), x=1, y=0, xref="paper", yref="paper", xanchor="right",
                       yanchor="bottom", showarrow=False, font=dict(size=14, family=style.FONT, color="#666"))
    fig.update_layout(width=theme.width, height=theme.height, margin=dict(l=70, r=70, t=60, b=40),
                      xaxis=dict(visible=False), yaxis=dict(visible=False), plot_bgcolor="white",
                      paper_bgcolor="white")
    return fig


def lesson_figures(lesson: catalog.Lesson, runs: Sequence[catalog.PartRun], texts: Sequence[str],
                   lang: str, reveal: bool = False) -> list[go.Figure]:
    """The lesson's figures as exported (themed, captioned), in page order: those before the question,
    or (``reveal``) those that show the answer."""
    out = []
    for pr in runs:
        part = pr.part
        if part.is_long:  # the long view's figures, the words under each as the caption
            for _, fig, note in catalog.long_figures(pr, part.long_reveal if reveal else part.long, lang):
                out.append(prepare(fig, None, theme=THEME, caption=note))
            continue
        sel = catalog.selection(part, pr.run)
        for sid in (part.reveal if reveal else part.stages):
            if not stages.applies(sid, pr.info, sel.block):
                continue
            opts = catalog.stage_options(part, pr, sid)
            fig, _ = stages.stage_figure(sid, pr.run, pr.info, sel, lang=lang, **opts)
            edits, compare = stages.second_run(sid, opts)
            caption = stages.caption(part.model, texts[sel.sentence], sel, sid, lang, edits=edits, compare=compare)
            out.append(prepare(fig, None, theme=THEME, caption=caption))
    return out


def handout_pages(lesson: catalog.Lesson, runs: Sequence[catalog.PartRun], texts: Sequence[str],
                  lang: str = "en") -> list[go.Figure]:
    """Every page: the text, the figures, the question, the figures that show the answer, the answer."""
    t = lambda key, **kw: i18n.t(key, lang, **kw)  # noqa: E731
    title = t("lessons.heading", n=lesson.number, title=t(lesson.title))
    q = lesson.ask(runs, lang)
    figures = lesson_figures(lesson, runs, texts, lang)
    shown = lesson_figures(lesson, runs, texts, lang, reveal=True)
    total = len(figures) + len(shown) + 3

    def footer(p: int) -> str:
        return t("lessons.page_of", n=lesson.number, p=p, total=total)

    sentences = " / ".join(style.plain_text(x, LONG_TEXT_SHOWN if lesson.is_long else None) for x in texts)
    pages = [text_page(title, [plain(t(lesson.text)), t("lessons.sentence_line", text=sentences)], footer(1))]
    pages += figures
    ask = [q.prompt]
    if q.kind == "choice":
        ask += [f"({chr(65 + i) if i < 26 else i + 1}) {c}" for i, c in enumerate(q.choices)]
    else:
        ask.append(t("lessons.number_line"))
    pages.append(text_page(t("lessons.question"), ["\n".join(ask)], footer(len(figures) + 2)))
    pages += shown
    pages.append(text_page(t("lessons.answers_page"), [q.prompt, t("lessons.answer_line", answer=q.answer_text()),
                                                       q.why], footer(total)))
    return pages


def handout_pdf(lesson: catalog.Lesson, runs: Sequence[catalog.PartRun], texts: Sequence[str],
                lang: str = "en") -> bytes:
    """The handout as one PDF (a page per figure; vector, text stays text)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in handout_pages(lesson, runs, texts, lang):
        for p in PdfReader(io.BytesIO(figure_bytes(page, "pdf"))).pages:
            writer.add_page(p)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()
