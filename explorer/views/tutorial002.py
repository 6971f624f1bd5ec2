"""Tutorial 002's worked example, reproduced: d_model = 4, ten positions, the bases n = 100, 1000 and
10000, div_term, and its three sentences' small embedding + positional encoding.

The tutorial embeds three six-word sentences with a random 4-dimensional ``nn.Embedding`` and prints
everything to two decimals (the n = 1000 table to eight). Its embedding is random, so only the
printed numbers exist; ``EMBEDDING`` holds, for each of its 14 words, one vector that all three of
its printed tables allow: within 0.005 of the printed embedding and such that embedding + PE rounds to
the printed sums for n = 1000 (its cell In [17]) and n = 10000 (In [36]) — the middle of that range
(a word that occurs twice, such as "what", has one vector, as a lookup table does). With it every
number the tutorial prints is reproduced to its printed precision (``tests/test_tutorial002.py``).

The encoding is computed the tutorial's vectorised way, through div_term = exp(2i · (−ln n / d_model)),
in float64; it equals the model's own ``model.arch.positional.sinusoidal`` (float32) to 1e-6.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .matrix import Grid, heatmap, token_axes

D_MODEL = 4
POSITIONS = 10
BASES = (100.0, 1000.0, 10000.0)  # the worked example (n = 100), the loop (n = 1000), the class (n = 10000)
COMPARE = (100.0, 10000.0)  # the comparison the tutorial makes
SUM_BASES = (1000.0, 10000.0)  # the bases of its two printed sums
# the positional controls set to the example (the app's preset toggle and the exporter's --preset)
PRESET = {"pe_base": 100.0, "pe_d_model": D_MODEL, "pe_positions": POSITIONS, "pe_dims": list(range(D_MODEL)),
          "pe_bases": COMPARE}
SENTENCES = (("I", "wonder", "what", "will", "come", "next"),
             ("This", "is", "a", "basic", "example", "paragraph"),
             ("Hello", "what", "is", "a", "basic", "split"))
EMBEDDING = {  # word -> its 4-dimensional embedding (see above)
    "I": (0.28, 0.08, 0.51, -1.07),
    "wonder": (-1.2707, -0.0702, 0.7692, -0.0798),
    "what": (-1.4604, -1.0971, 0.9042, 0.001),
    "will": (-0.1006, -0.09, 0.5326, -1.5225),
    "come": (0.8334, -0.4332, 0.2769, -0.1406),
    "next": (0.0295, -1.2468, 1.0763, 0.6156),
    "This": (0.55, 0.32, 0.06, 0.28),
    "is": (0.2343, -0.8171, -0.2116, 1.341),
    "a": (-0.0402, -1.3419, 1.4234, -0.0878),
    "basic": (-0.3816, -0.3432, -0.0231, -1.6824),
    "example": (1.6884, -0.4682, 0.5819, 0.3194),
    "paragraph": (-0.0905, -0.0868, 1.5913, 0.0769),
    "Hello": (0.97, -0.33, -0.29, -0.53),
    "split": (-0.7605, -0.6118, -1.8287, 0.7912),
}


def div_term(n: float, d_model: int = D_MODEL) -> np.ndarray:
    """exp(2i · (−ln n / d_model)) for i = 0 .. d_model/2 − 1: the 1/n^(2i/d_model) of every pair."""
    return np.exp(np.arange(0, d_model, 2) * -(math.log(n) / d_model))


def encoding(n: float, positions: int = POSITIONS, d_model: int = D_MODEL) -> np.ndarray:
    """(positions, d_model): sin(k · div_term) in the even columns, cos in the odd ones."""
    k = np.arange(positions)[:, None]
    pe = np.zeros((positions, d_model))
    pe[:, 0::2] = np.sin(k * div_term(n, d_model))
    pe[:, 1::2] = np.cos(k * div_term(n, d_model))
    return pe


def embeddings() -> np.ndarray:
    """(3, 6, 4): the three sentences embedded."""
    return np.array([[EMBEDDING[w] for w in s] for s in SENTENCES], dtype=np.float64)


def tables(labels: dict | None = None) -> pd.DataFrame:
    """Every number of the example in one long table: div_term and k · div_term, the encodings,
    the embeddings and the sums (columns dim 0..3; rows say which table, n, sentence, position)."""
    L = style.with_labels(labels)
    rows = []

    def add(table, n, sentence, position, word, values):
        values = list(values) + [np.nan] * (D_MODEL - len(values))
        rows.append([table, n, sentence, position, word, *values])

    for n in BASES:
        add("div_term", n, None, None, "", div_term(n))
        for k, v in enumerate(np.arange(POSITIONS)[:, None] * div_term(n)):
            add("k*div_term", n, None, k, "", v)
        for k, v in enumerate(encoding(n)):
            add("PE", n, None, k, "", v)
    emb = embeddings()
    for s, words in enumerate(SENTENCES):
        for k, w in enumerate(words):
            add(L["embedding"], None, s, k, w, emb[s, k])
    for n in SUM_BASES:
        pe = encoding(n)
        for s, words in enumerate(SENTENCES):
            for k, w in enumerate(words):
                add(f"{L['embedding']}+PE", n, s, k, w, emb[s, k] + pe[k])
    return pd.DataFrame(rows, columns=[L["matrix"], "n", L["sentence"], L["position"], L["token"],
                                       *[f"{L['dim_short']} {i}" for i in range(D_MODEL)]])


def figure(sentence: int = 0, *, title: str = "tutorial 002", labels: dict | None = None
           ) -> tuple[go.Figure, pd.DataFrame]:
    """Top: PE for n = 100, 1000, 10000 (ten positions × four dimensions). Bottom: one sentence's
    embedding, and embedding + PE for n = 1000 and n = 10000. Every cell shows its number to two
    decimals, as the tutorial prints them; the subtitle gives div_term for each n."""
    L = style.with_labels(labels)
    s = int(sentence) % len(SENTENCES)
    words = list(SENTENCES[s])
    emb = embeddings()[s]
    top = [(f"PE, n = {n:g}", encoding(n), None) for n in BASES]
    bottom = [(f"{L['embedding']} ({L['sentence']} {s})", emb, words)]
    bottom += [(f"{L['embedding']} + PE, n = {n:g}", emb + encoding(n)[: len(words)], words) for n in SUM_BASES]
    g = Grid(rows=2, cols=3, titles=[style.esc(t) for t, _, _ in top + bottom], hspace=0.1, vspace=0.16,
             row_heights=[len(words) + 1, POSITIONS])  # Grid: the first weight is the bottom row
    traces = []
    for r, panels in enumerate((top, bottom)):
        for c, (name, m, toks) in enumerate(panels):
            traces += heatmap(m, rows=toks, row_name=L["position"], col_name=L["dim"], value_name=name, name=name,
                              digits=2, cell_text=True, xaxis=g.x(r, c), yaxis=g.y(r, c))
            x, y = token_axes(rows=toks, cols=None, n_rows=m.shape[0], n_cols=D_MODEL,
                              row_title=L["position"] if c == 0 else "", col_title=L["dim"])
            g.axes(r, c, x=x, y=y)
    sub = " · ".join(f"n = {n:g}: div_term = [{', '.join(f'{v:.2f}' for v in div_term(n))}]" for n in BASES)
    fig = g.figure(traces, title=title, height=720, subtitle=style.esc(sub),
                   coloraxis=style.scores_axis(style.symmetric_range(*[m for _, m, _ in top + bottom])),
                   margin=dict(t=100))
    return fig, tables(labels)
