"""The reveal of a class poll (issue 36): the class's answers beside the model's own answer. No Streamlit.

    fig = class_and_model(choices, counts, weights=[...], labels=i18n.fig_labels("ko"))   # a token question
    fig = class_and_model(choices, counts, answer=2, labels=...)                          # a lesson question

Two panels side by side, one row per choice (same order, first choice on top): on the left the
class's share of the answers (each bar says its count and share), on the right the model's attention
weights for the question's query (a token question), or, for a lesson question whose answer is
computed from the run, the left panel alone with the right answer's bar in its own colour. The
choices are the poll's labels (user text: escaped, never markup).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from . import style
from .style import make_figure, trace

CLASS_COLOUR = style.OKABE_ITO[0]
ANSWER_COLOUR = style.OKABE_ITO[2]
MODEL_COLOUR = style.OKABE_ITO[1]


def class_and_model(choices: Sequence[str], counts: Mapping[int, int], *, weights: Sequence[float] | None = None,
                    answer: int | None = None, labels: dict | None = None, title: str = "",
                    height: int | None = None) -> go.Figure:
    """The class's histogram (share of answers per choice) beside the model's ``weights`` for the
    choices, or, without weights, with the ``answer``'s bar marked. ``counts``: {choice index: n}."""
    L = style.with_labels(labels)
    n = len(choices)
    if weights is not None and len(weights) != n:
        raise ValueError(f"{len(weights)} weights for {n} choices")
    names = [style.esc(style.plain_text(str(c), 40)) for c in choices]
    # two choices may read alike ("the" twice): the category is its row, the label its text
    rows = list(range(n))
    k = [int(counts.get(i, 0)) for i in rows]
    total = sum(k)
    share = [x / total if total else 0.0 for x in k]
    cells = [L["poll_bar"].format(n=x, p=f"{100 * s:.0f}") for x, s in zip(k, share)]
    colours = [ANSWER_COLOUR if answer is not None and i == answer else CLASS_COLOUR for i in rows]
    split = weights is not None
    left = [0.0, 0.47] if split else [0.0, 1.0]
    traces = [trace("bar", orientation="h", x=share, y=rows, name=L["poll_class"], marker=dict(color=colours),
                    text=cells, textposition="auto", cliponaxis=False, xaxis="x", yaxis="y",
                    hovertext=[f"{nm}<br>{c}" for nm, c in zip(names, cells)], hoverinfo="text",
                    showlegend=False)]
    layout = dict(
        xaxis=dict(domain=left, range=[0, 1.05], tickformat=".0%", title=dict(text=L["poll_share"])),
        yaxis=dict(tickmode="array", tickvals=rows, ticktext=names, autorange="reversed", automargin=True),
        bargap=0.25, plot_bgcolor="#ffffff",
        annotations=[dict(text=L["poll_class_n"].format(n=total), x=sum(left) / 2, y=1.0, xref="paper",
                          yref="paper", yanchor="bottom", showarrow=False, font=dict(size=14))],
        margin=dict(l=20, r=20, t=90, b=50),
    )
    if split:
        w = [float(x) for x in weights]
        traces.append(trace("bar", orientation="h", x=w, y=rows, name=L["poll_model"], xaxis="x2", yaxis="y",
                            marker=dict(color=[ANSWER_COLOUR if i == answer else MODEL_COLOUR for i in rows]),
                            text=[style.fmt(x, 2) for x in w], textposition="auto", cliponaxis=False,
                            hovertext=[f"{nm}<br>{style.fmt(x, 3)}" for nm, x in zip(names, w)], hoverinfo="text",
                            showlegend=False))
        layout["xaxis2"] = dict(domain=[0.53, 1.0], range=[0, 1.05], title=dict(text=L["poll_weight"]), anchor="y")
        layout["annotations"].append(dict(text=L["poll_model"], x=0.765, y=1.0, xref="paper", yref="paper",
                                          yanchor="bottom", showarrow=False, font=dict(size=14)))
    if answer is not None:  # what the green bars are
        layout["annotations"].append(dict(text=L["poll_top_key" if split else "poll_answer_key"], x=1.0, y=0.0,
                                          xref="paper", yref="paper", xanchor="right", yanchor="top",
                                          showarrow=False, font=dict(size=12, color=ANSWER_COLOUR), yshift=-36))
    return make_figure(traces, layout, title=title, height=height or max(260, 90 + 34 * n))


def class_table(question: str, choices: Sequence[str], counts: Mapping[int, int], *, labels: dict | None = None):
    """The poll as a table for a CSV: one row per choice (question, choice, count); no learner ids."""
    import pandas as pd

    L = style.with_labels(labels)
    rows = [(question, str(c), int(counts.get(i, 0))) for i, c in enumerate(choices)]
    return pd.DataFrame(rows, columns=[L["poll_question"], L["poll_choice"], L["poll_count"]]).set_index(L["poll_question"])
