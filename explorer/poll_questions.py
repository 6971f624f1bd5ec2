"""The questions a presenter can open to the class (issue 36), built from what the page shows. No Streamlit.

    ask = token_question(run, sel, query=3)        # "which token does this head attend to?" (None: cannot)
    ask = lesson_question(lesson, runs)            # a lesson's question with choices (None: a number question)
    store.create(ask.question, ask.choices, meta=ask.meta)

An ``Ask`` holds the question and choices in every language of the catalogue (a learner reads them in
their own) and the meta the learner page's reveal needs, so that no learner's page ever runs the
model: the sentence, the model's weights for the choices (a token question) or the right answer and
why (a lesson question), and where they come from (model, block, layer, head). The choices of a
token question are the keys the query may attend to (the mask's allowed positions of the real
tokens, in order), labelled "position: token" as the lessons label tokens; their weights sum to 1
(the softmax row of the head, disallowed keys being exactly 0).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from explorer import i18n, poll
from explorer.views import style
from explorer.views.data import RunData, axis_tokens, prefix


@dataclass(frozen=True)
class Ask:
    kind: str  # "token" | "lesson"
    question: dict[str, str]
    choices: dict[str, list[str]]
    meta: dict


def label(tokens: Sequence[str], i: int) -> str:
    """A token as a choice: its position and its text made visible (plain text, never markup)."""
    return f"{i}: {style.plain_text(style.visible(tokens[i]), 40)}"


def queries(run: RunData, block: str, sentence: int, layer: int = 0) -> list[str]:
    """The real query tokens of the sentence (for the presenter's choice of the query)."""
    q, _k, n_q, _n_k = axis_tokens(run, block, sentence, layer)
    return [label(q, i) for i in range(n_q)]


def token_question(run: RunData, *, model: str, block: str, layer: int, head: int, sentence: int, query: int,
                   text: str = "") -> Ask | None:
    """Which key does ``query`` attend to most in this head? None when there is nothing to choose
    between (one allowed key) or too many keys to offer as buttons (more than ``poll.MAX_CHOICES``)."""
    p = prefix(block, layer)
    q_toks, k_toks, n_q, n_k = axis_tokens(run, block, sentence, layer)
    if not 0 <= query < n_q:
        return None
    row = np.asarray(run[f"{p}.hook_pattern"][sentence][head][query], dtype=np.float64)[:n_k]
    if f"{p}.hook_mask" in run:
        mask = np.asarray(run[f"{p}.hook_mask"][sentence], dtype=bool)
        allowed = (mask[head] if mask.shape[0] > 1 else mask[0])[query][:n_k]
    else:
        allowed = row > 0
    keys = [j for j in range(n_k) if allowed[j]]
    if not 2 <= len(keys) <= poll.MAX_CHOICES:
        return None
    weights = [float(row[j]) for j in keys]
    best = int(np.argmax(weights))
    choices = [label(k_toks, j) for j in keys]
    shown_q = label(q_toks, query)
    question = {lang: i18n.t("poll.token_question", lang, q=shown_q, l=layer, h=head,
                             block=i18n.t(f"blocks.{block}", lang)) for lang in i18n.LANGS}
    meta = {"kind": "token", "model": model, "block": block, "layer": int(layer), "head": int(head),
            "sentence": text, "query": shown_q, "keys": keys, "weights": weights, "answer": best}
    return Ask("token", question, {lang: list(choices) for lang in i18n.LANGS}, meta)


def lesson_question(lesson, runs, text: str = "") -> Ask | None:
    """A lesson's own question in every language (None for a question that asks for a number: the
    class answers with choices)."""
    asked = {lang: lesson.ask(runs, lang) for lang in i18n.LANGS}
    first = asked["en"]
    if first.kind != "choice" or not 2 <= len(first.choices) <= poll.MAX_CHOICES:
        return None
    if any(len(q.choices) != len(first.choices) or q.answer != first.answer for q in asked.values()):
        return None  # cannot happen for one run; never a poll whose languages disagree
    meta = {"kind": "lesson", "lesson": int(lesson.number), "sentence": text, "answer": int(first.answer),
            "why": {lang: q.why for lang, q in asked.items()}}
    return Ask("lesson", {lang: q.prompt for lang, q in asked.items()},
               {lang: list(q.choices) for lang, q in asked.items()}, meta)


def answer_of(p: poll.Poll) -> int | None:
    """The model's (or the lesson's) answer kept with the poll."""
    a = p.meta.get("answer")
    return int(a) if isinstance(a, int) and 0 <= a < p.n_choices else None


def weights_of(p: poll.Poll) -> list[float] | None:
    w = p.meta.get("weights")
    if isinstance(w, list) and len(w) == p.n_choices and all(isinstance(x, (int, float)) for x in w):
        return [float(x) for x in w]
    return None
