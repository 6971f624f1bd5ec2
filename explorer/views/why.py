"""Why this head attends here (issue 35): the score split into content and position, the rotary score
by frequency band, and attention against effect. Pure functions: arrays in, ``(go.Figure, DataFrame)``
out; the maths is model/analysis/score_split.py's, the ablations model/analysis/ablation.py's."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .matrix import Grid, heatmap, token_axes

_lab = style.with_labels
BAND_TABLE_ROWS = 250_000  # the long tables (qk_terms, rope_bands): every real query while it fits, else the one shown


def _long(L: dict, name: str, parts: dict, n_q: int, n_k: int, queries: Sequence[int] | None = None) -> pd.DataFrame:
    """query, key, ``name``, value: one row a cell and part (the parts' names in ``parts``' order)."""
    qs = np.arange(n_q) if queries is None else np.asarray(queries)
    cols = {L["query"]: [], L["key"]: [], L[name]: [], L["value"]: []}
    for part, z in parts.items():
        z = np.asarray(z, dtype=np.float64)[qs][:, :n_k]
        q, k = np.meshgrid(qs, np.arange(n_k), indexing="ij")
        cols[L["query"]].append(q.ravel())
        cols[L["key"]].append(k.ravel())
        cols[L[name]].append(np.full(q.size, part, dtype=object))
        cols[L["value"]].append(z.ravel())
    return pd.DataFrame({c: np.concatenate(v) if v else np.array([]) for c, v in cols.items()})


def qk_terms_figure(terms: dict[str, np.ndarray], score: np.ndarray, names: dict[str, str], q_tokens: Sequence[str],
                    k_tokens: Sequence[str], query: int, key: int, *, title: str = "q·k split",
                    subtitle: str | None = None, labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The parts of the scores (``terms``: name -> (n_q, n_k), real tokens only; ``names``: their
    labels) as heatmaps on one colour scale, and the cell (query, key)'s parts as bars beside their
    sum and the model's own score ``score`` (n_q, n_k). Table: query, key, term, value (every real query
    while it fits in BAND_TABLE_ROWS rows, else the query shown)."""
    L = _lab(labels)
    keys = list(terms)
    n_q, n_k = score.shape
    shown = keys + ([] if len(keys) >= 5 else ["__score__"])
    titles = [style.esc(names[k]) if k != "__score__" else style.esc(L["score_model"]) for k in shown[:5]]
    g = Grid(rows=2, cols=3, titles=titles + [style.esc(L["one_cell"])], hspace=0.09, vspace=0.16)
    zmax = style.symmetric_range(*terms.values(), score)
    traces = []
    for idx, k in enumerate(shown[:5]):
        r, c = divmod(idx, 3)
        z = score if k == "__score__" else terms[k]
        traces += heatmap(z, rows=q_tokens[:n_q], cols=k_tokens[:n_k], row_name=L["query"], col_name=L["key"],
                          value_name=names.get(k, L["score_model"]), name=names.get(k, L["score_model"]),
                          xaxis=g.x(r, c), yaxis=g.y(r, c), cell_text=False)
        x, y = token_axes(rows=q_tokens[:n_q], cols=k_tokens[:n_k], n_rows=n_q, n_cols=n_k,
                          row_title=L["query"] if c == 0 else "", col_title=L["key"] if r == 1 else "")
        g.axes(r, c, x=x, y=y)
    # the chosen cell on every heatmap: a square outline
    for idx in range(min(5, len(shown))):
        r, c = divmod(idx, 3)
        traces.append(style.trace("scatter", x=[key], y=[query], mode="markers", showlegend=False, hoverinfo="skip",
                                  marker=dict(symbol="square-open", size=14, color="black", line=dict(width=2)),
                                  xaxis=g.x(r, c), yaxis=g.y(r, c)))
    vals = [float(terms[k][query, key]) for k in keys]
    bar_names = [names[k] for k in keys] + [L["sum_of_terms"], L["score_model"]]
    bar_vals = vals + [float(sum(vals)), float(score[query, key])]
    colours = [style.OKABE_ITO[i % len(style.OKABE_ITO)] for i in range(len(keys))] + ["#444444", "#999999"]
    traces.append(style.trace("bar", x=style.strings([style.esc(n) for n in bar_names]),
                              y=np.asarray(bar_vals, dtype=np.float64), marker=dict(color=colours), showlegend=False,
                              text=style.strings([style.fmt(v, 3) for v in bar_vals]), textposition="outside",
                              hovertemplate="%{x} = %{y:.5f}<extra></extra>", xaxis=g.x(1, 2), yaxis=g.y(1, 2)))
    g.axes(1, 2, x=dict(tickangle=-40), y=dict(showgrid=True, gridcolor="#eeeeee", zeroline=True,
                                               zerolinecolor="#888888"))
    fig = g.figure(traces, title=title, subtitle=subtitle, height=int(min(1000, max(620, 200 + 44 * n_q))),
                   coloraxis=style.scores_axis(zmax, L["value"]))
    queries = None if len(keys) * n_q * n_k <= BAND_TABLE_ROWS else [query]
    return fig, _long(L, "term", {names[k]: terms[k] for k in keys}, n_q, n_k, queries)


def band_label(b: int, theta: float | None) -> str:
    """"3 (λ 12.6)": the band and its wavelength in positions, 2π/θ (None: not rotated)."""
    if theta is None:
        return f"{b} (—)"
    lam = 2 * np.pi / theta
    return f"{b} (λ {lam:.3g})" if lam < 1e5 else f"{b} (λ {lam:.2e})"


def rope_bands_figure(bands: np.ndarray, theta: np.ndarray, pulls: np.ndarray, q_tokens: Sequence[str],
                      k_tokens: Sequence[str], query: int, *, blocked: np.ndarray | None = None,
                      title: str = "rotary bands", subtitle: str | None = None,
                      labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """``bands`` (B, n_q, n_k): each band's part of the scores (the last one, when B > len(theta), the
    dimensions not rotated). Left: band × key for the query ``query`` (its row of every band, which
    adds up to its scores); right: each band's pull (``pulls`` (B,): score_split.pull) as bars.
    Table: query, key, band, value (every real query while it fits, else the query shown)."""
    L = _lab(labels)
    B, n_q, n_k = bands.shape
    th = [float(t) for t in theta] + [None] * (B - len(theta))
    names = [band_label(b, th[b]) for b in range(B)]
    g = Grid(cols=2, col_widths=[1.4, 1.0], hspace=0.14,
             titles=[style.esc(L["bands_row"].format(i=query, tok=style.visible(q_tokens[query]))),
                     style.esc(L["bands_pull"])])
    row = bands[:, query, :]  # (B, n_k)
    blk = None if blocked is None else np.broadcast_to(np.asarray(blocked)[query][None, :n_k], row.shape)
    traces = heatmap(row, rows=names, cols=k_tokens[:n_k], row_name=L["band"], col_name=L["key"],
                     value_name=L["value"], blocked=blk, blocked_text=L["masked"], name=L["band"], cell_text=False,
                     xaxis=g.x(0, 0), yaxis=g.y(0, 0))
    x, y = token_axes(rows=None, cols=k_tokens[:n_k], n_rows=B, n_cols=n_k, col_title=L["key"])
    y.update(tickmode="array", tickvals=style.tick_positions(B), ticktext=[names[i] for i in style.tick_positions(B)],
             title=dict(text=style.esc(L["band_fast_slow"])))
    g.axes(0, 0, x=x, y=y)
    traces.append(style.trace("bar", y=np.arange(B), x=np.asarray(pulls, dtype=np.float64), orientation="h",
                              marker=dict(color=[style.OKABE_ITO[0] if p >= 0 else style.OKABE_ITO[1] for p in pulls]),
                              customdata=style.strings(names), showlegend=False,
                              hovertemplate="%{customdata}: %{x:.4f}<extra></extra>", xaxis=g.x(0, 1), yaxis=g.y(0, 1)))
    g.axes(0, 1, x=dict(title=dict(text=style.esc(L["pull"])), showgrid=True, gridcolor="#eeeeee", zeroline=True,
                        zerolinecolor="#888888"),
           y=dict(range=[B - 0.5, -0.5], tickmode="array", tickvals=style.tick_positions(B),
                  ticktext=[str(i) for i in style.tick_positions(B)]))
    fig = g.figure(traces, title=title, subtitle=subtitle, height=int(min(1000, max(420, 120 + 16 * B))),
                   coloraxis=style.scores_axis(style.symmetric_range(row if blk is None else np.where(blk, 0, row)),
                                               L["value"]))
    queries = None if B * n_q * n_k <= BAND_TABLE_ROWS else [query]
    return fig, _long(L, "band", {b: bands[b] for b in range(B)}, n_q, n_k, queries)


def effect_figure(attention: np.ndarray, effect: np.ndarray, selected: tuple[int, int], named: dict[str, tuple],
                  *, title: str = "attention vs effect", subtitle: str | None = None,
                  labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Every head (layers × heads) as a point: its attention on the chosen key (x) against the change
    of log p of the model's top next token when it is ablated (y). ``named``: label -> (layer, head)
    of heads named on the figure. Table: layer, head, attention, effect."""
    L = _lab(labels)
    n_l, n_h = attention.shape
    li, hi = np.meshgrid(np.arange(n_l), np.arange(n_h), indexing="ij")
    tags = style.strings([f"L{a} H{b}" for a, b in zip(li.ravel(), hi.ravel())])
    traces = [style.trace("scatter", x=attention.ravel().astype(np.float64), y=effect.ravel().astype(np.float64),
                          mode="markers", customdata=tags, showlegend=False, name=style.esc(L["head"]),
                          marker=dict(size=9, color=li.ravel(), colorscale=style.LAYERS, showscale=True,
                                      colorbar=dict(title=dict(text=style.esc(L["layer"])), thickness=12),
                                      line=dict(width=0.5, color="#333333")),
                          hovertemplate=(f"%{{customdata}}<br>{style.esc(L['attention'])} = %{{x:.3f}}<br>"
                                         f"{style.esc(L['effect'])} = %{{y:.4f}}<extra></extra>"))]
    sl, sh = selected
    if 0 <= sl < n_l and 0 <= sh < n_h:
        traces.append(style.trace("scatter", x=[float(attention[sl, sh])], y=[float(effect[sl, sh])], mode="markers",
                                  showlegend=False, hoverinfo="skip",
                                  marker=dict(size=18, symbol="circle-open", color="black", line=dict(width=2))))
    anns = []
    for text, (a, b) in named.items():
        anns.append(dict(x=float(attention[a, b]), y=float(effect[a, b]), text=style.esc(f"L{a} H{b}: {text}"),
                         showarrow=True, arrowhead=2, ax=40, ay=-30, font=dict(size=12), bgcolor="rgba(255,255,255,0.8)"))
    fig = style.make_figure(traces, dict(
        xaxis=dict(title=dict(text=style.esc(L["attention"])), range=[-0.03, 1.03], showgrid=True, gridcolor="#eeeeee"),
        yaxis=dict(title=dict(text=style.esc(L["effect"])), showgrid=True, gridcolor="#eeeeee", zeroline=True,
                   zerolinecolor="#888888"),
        annotations=anns, plot_bgcolor="white"), title=title, subtitle=subtitle, height=520)
    df = pd.DataFrame({L["layer"]: li.ravel(), L["head"]: hi.ravel(),
                       L["attention"]: attention.ravel().astype(np.float64), L["effect"]: effect.ravel().astype(np.float64)})
    return fig, df


def named_heads(attention: np.ndarray, effect: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]]:
    """(the head that looks hardest for the least effect, the head with the most effect for the least
    looking): each maximises the difference of the two, each scaled by its largest value over heads
    (attention by max attention, effect by max |effect|)."""
    a = np.asarray(attention, dtype=np.float64)
    e = np.abs(np.asarray(effect, dtype=np.float64))
    an = a / max(float(a.max(initial=0.0)), 1e-12)
    en = e / max(float(e.max(initial=0.0)), 1e-12)
    look = np.unravel_index(int(np.argmax(an - en)), a.shape)
    matter = np.unravel_index(int(np.argmax(en - an)), a.shape)
    return (int(look[0]), int(look[1])), (int(matter[0]), int(matter[1]))
