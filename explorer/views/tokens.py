"""Tokens: the table (token, id, character span) and the padded batch with pads marked."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style

REAL, SPECIAL, PAD = 0, 1, 2
BATCH_COLOURS = ("#ffffff", "#cfe3f3", style.PAD_COLOUR)


def _tokens_table(tokens: Sequence[str], ids: Sequence[int], offsets: Sequence[tuple[int, int]],
                  text: str, L: dict) -> pd.DataFrame:
    """One row per token: position, token (as typed), how it is drawn, id, character span, and
    the characters of the text it covers (empty for special tokens such as </s>)."""
    cols = [L["position"], L["token"], L["shown_as"], "id", L["start"], L["end"], L["text"]]
    rows = [(i, tok, style.visible(tok), int(tid), int(a), int(b), text[a:b] if text else "")
            for i, (tok, tid, (a, b)) in enumerate(zip(tokens, ids, offsets))]
    return pd.DataFrame(rows, columns=cols).set_index(L["position"])


def batch_figure(batch_tokens: Sequence[Sequence[str]], *, specials: Sequence[str] = (),
                 length: int | None = None, selected: int | None = None, title: str = "padded batch",
                 labels: dict | None = None, pad_token: str = "<pad>",
                 ids: Sequence[int] | None = None, offsets: Sequence[tuple[int, int]] | None = None,
                 text: str = "") -> tuple[go.Figure, pd.DataFrame]:
    """Sentences as rows, positions as columns; every cell shows its token; pads are grey,
    special tokens light blue. The table: with ``ids`` (and ``offsets``, ``text``) of the selected
    sentence, its tokens one per row (id, character span, the text covered); else the padded batch."""
    L = style.with_labels(labels)
    row_name, col_name = L["sentence"], L["position"]
    typed = text
    n = len(batch_tokens)
    t = max([len(s) for s in batch_tokens] + [length or 0, 1])
    cat = np.full((n, t), PAD, dtype=int)
    text = np.full((n, t), style.esc(pad_token), dtype=object)
    raw = np.full((n, t), pad_token, dtype=object)
    spec = set(specials)
    for r, toks in enumerate(batch_tokens):
        for c, tok in enumerate(toks[:t]):
            cat[r, c] = SPECIAL if tok in spec else REAL
            text[r, c] = style.token_label(tok)
            raw[r, c] = tok
    kind = np.vectorize(lambda x: style.esc((L["token"], L["special"], L["pad"])[x]))(cat).astype(object)
    custom = style.strings(np.stack([text, kind], axis=-1))
    text = style.strings(text)
    scale = []
    for i, colour in enumerate(BATCH_COLOURS):
        scale += [[i / 3, colour], [(i + 1) / 3, colour]]
    traces = [style.trace(
        "heatmap", z=cat, x=list(range(t)), y=list(range(n)), zmin=-0.5, zmax=2.5, colorscale=scale,
        showscale=False, text=text if t <= 80 else None, texttemplate="%{text}" if t <= 80 else None,
        customdata=custom, xgap=2, ygap=2, name=style.esc(row_name),
        hovertemplate=(f"{style.esc(row_name)} %{{y}}, {style.esc(col_name)} %{{x}}: "
                       "<b>%{customdata[0]}</b> (%{customdata[1]})<extra></extra>"),
    )]
    shapes = []
    if selected is not None and 0 <= selected < n:
        shapes.append(dict(type="rect", x0=-0.5, x1=t - 0.5, y0=selected - 0.5, y1=selected + 0.5,
                           line=dict(color="#D55E00", width=3)))
    layout = dict(
        xaxis=dict(title=dict(text=style.esc(col_name)), tickmode="array", tickvals=style.tick_positions(t),
                   range=[-0.5, t - 0.5], showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text=style.esc(row_name)), tickmode="array", tickvals=list(range(n)),
                   ticktext=[str(i) for i in range(n)], range=[n - 0.5, -0.5], showgrid=False, zeroline=False),
        shapes=shapes, plot_bgcolor="white")
    fig = style.make_figure(traces, layout, title=title, height=int(min(700, 150 + 44 * n)))
    if ids is not None and selected is not None and 0 <= selected < n:
        toks = batch_tokens[selected][: len(ids)]
        return fig, _tokens_table(toks, ids, offsets or [(0, 0)] * len(ids), typed, L)
    df = pd.DataFrame(raw, index=pd.Index(list(range(n)), name=row_name),
                      columns=pd.Index(list(range(t)), name=col_name))
    return fig, df
