"""What if, and two sentences side by side: an intact and an edited run of the same text (model.edits),
or the runs of two sentences, compared figure by figure.

Every view takes arrays and token lists and returns ``(figure, table)``. The two runs are ① and ②
(① intact / this sentence, ② edited / the second sentence); a difference is always ② − ①, drawn on
one symmetric diverging scale centred at 0.

Where the two runs' tokens differ (a second sentence with one word changed; the seed model's decoder,
which reads what each run wrote), rows and columns are aligned by token where the tokens match
(``align``: difflib over the token lists); a cell whose row or column has no partner is marked
(× and "not aligned"), never given a number.

    slots = align(["a", "b", "c"], ["a", "x", "c"])   # [(0, 0), (1, None), (None, 1), (2, 2)]
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer import i18n

from . import style
from .attention import head_stats
from .matrix import Grid, heatmap, token_axes

Slot = tuple[int | None, int | None]  # (position in ①, position in ②); None: no partner


def labels(lang: str = "en") -> dict[str, str]:
    """The figure words of these views (the catalogue's "fig." words and the what-if ones)."""
    t = lambda key: i18n.t(key, lang)  # noqa: E731
    return {**i18n.fig_labels(lang),
            "intact": t("whatif.intact"), "edited": t("whatif.edited"), "difference": t("whatif.difference"),
            "not_aligned": t("whatif.not_aligned"), "aligned_note": t("whatif.aligned_note"),
            "entropy_nats": t("whatif.entropy_nats"), "entropy_change": t("whatif.entropy_change"),
            "heads_of_layer": t("whatif.heads_of_layer"),
            "character": t("whatif.character"), "same": t("whatif.same"), "identical": t("whatif.identical"),
            "first_difference": t("whatif.first_difference"), "kl": t("whatif.kl"),
            "cosine_value": t("whatif.cosine_value"), "embedding_dim": t("whatif.embedding_dim"),
            "empty_output": t("whatif.empty_output"), "first": t("compare.first"), "second": t("compare.second")}


def _lab(lab: Mapping | None) -> dict:
    return {**labels("en"), **(lab or {})}


# --- alignment --------------------------------------------------------------------------------

def align(a: Sequence[str], b: Sequence[str]) -> list[Slot]:
    """The two token lists as one sequence of slots: matching tokens share a slot (i, j); a token
    of ① without a partner is (i, None), one of ② (None, j); the order of both lists is kept."""
    slots: list[Slot] = []
    sm = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            slots += list(zip(range(i1, i2), range(j1, j2)))
        else:
            slots += [(i, None) for i in range(i1, i2)] + [(None, j) for j in range(j1, j2)]
    return slots


def aligned_difference(a: np.ndarray, b: np.ndarray, rows: Sequence[Slot], cols: Sequence[Slot]) -> np.ndarray:
    """② − ① on the aligned slots (len(rows) × len(cols)); NaN where a row or column has no partner."""
    ra, rb = (np.array([s[k] if s[k] is not None else -1 for s in rows], dtype=int) for k in (0, 1))
    ca, cb = (np.array([s[k] if s[k] is not None else -1 for s in cols], dtype=int) for k in (0, 1))
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out = np.full((len(rows), len(cols)), np.nan)
    ok_r, ok_c = (ra >= 0) & (rb >= 0), (ca >= 0) & (cb >= 0)
    if ok_r.any() and ok_c.any():
        diff = b[np.ix_(rb[ok_r], cb[ok_c])] - a[np.ix_(ra[ok_r], ca[ok_c])]
        out[np.ix_(np.nonzero(ok_r)[0], np.nonzero(ok_c)[0])] = diff
    return out


def slot_tokens(slots: Sequence[Slot], a: Sequence[str], b: Sequence[str]) -> list[str]:
    """A label per slot: the token when both runs have it there, else ① or ② before it."""
    return [a[i] if i is not None and j is not None else (f"①{a[i]}" if i is not None else f"②{b[j]}")
            for i, j in slots]


# --- one head's pattern in both runs ---------------------------------------------------------------

MIN_CHANGE_RANGE = 1e-3  # a difference scale never narrower than ±this: "no change" stays white


def _change_range(diff: np.ndarray) -> float:
    return max(style.symmetric_range(diff), MIN_CHANGE_RANGE)


def _square(n: int) -> int:
    return int(min(900, max(400, 140 + 26 * n)))


def pattern_pair_figure(a: np.ndarray, b: np.ndarray, a_q: Sequence[str], a_k: Sequence[str],
                        b_q: Sequence[str], b_k: Sequence[str], *, a_blocked: np.ndarray | None = None,
                        b_blocked: np.ndarray | None = None, names: Sequence[str] | None = None,
                        title: str = "pattern", subtitle: str | None = None,
                        labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """①'s pattern, ②'s pattern (weights, 0..1) and ② − ① aligned by token (one symmetric diverging
    scale). The table: the difference (exact values; NaN where not aligned), rows and columns labelled
    by slot."""
    L = _lab(labels)
    names = list(names or (L["intact"], L["edited"]))
    rows, cols = align(a_q, b_q), align(a_k, b_k)
    diff = aligned_difference(a, b, rows, cols)
    unmatched = ~np.isfinite(diff)
    d_q, d_k = slot_tokens(rows, a_q, b_q), slot_tokens(cols, a_k, b_k)
    panel = [f"① {names[0]}", f"② {names[1]}", f"{L['difference']} ② − ①"]
    g = Grid(cols=3, titles=[style.esc(p) for p in panel], hspace=0.09)
    traces = []
    for c, (m, q, k, blocked) in enumerate(((a, a_q, a_k, a_blocked), (b, b_q, b_k, b_blocked))):
        traces += heatmap(m, rows=q, cols=k, row_name=L["query"], col_name=L["key"], value_name=L["weight"],
                          blocked=blocked, blocked_text=f"{L['masked']} (0)", name=panel[c], cell_text=False,
                          xaxis=g.x(0, c), yaxis=g.y(0, c))
        x, y = token_axes(rows=q, cols=k, n_rows=m.shape[0], n_cols=m.shape[1],
                          row_title=L["query"] if c == 0 else "", col_title=L["key"])
        g.axes(0, c, x=x, y=y)
    traces += heatmap(np.nan_to_num(diff), rows=d_q, cols=d_k, row_name=L["query"], col_name=L["key"],
                      value_name="② − ①", blocked=unmatched if unmatched.any() else None,
                      blocked_text=L["not_aligned"], coloraxis="coloraxis2", name=panel[2], cell_text=False,
                      xaxis=g.x(0, 2), yaxis=g.y(0, 2))
    x, y = token_axes(rows=d_q, cols=d_k, n_rows=len(rows), n_cols=len(cols), col_title=L["key"])
    g.axes(0, 2, x=x, y=y)
    wa = style.weights_axis(L["weight"])
    wa["colorbar"].update(x=-0.13, xanchor="right")
    notes = [s for s in (subtitle, L["aligned_note"] if unmatched.any() else None) if s]
    fig = g.figure(traces, title=title, height=_square(max(len(rows), a.shape[0], b.shape[0])),
                   subtitle=style.esc(" · ".join(notes)) if notes else None,
                   coloraxis=wa, coloraxis2=style.scores_axis(_change_range(diff), "② − ①"),
                   margin=dict(l=130, t=110 if notes else 80))
    df = pd.DataFrame(diff, index=pd.Index([f"{i}:{style.visible(t)}" for i, t in enumerate(d_q)], dtype=object),
                      columns=pd.Index([f"{j}:{style.visible(t)}" for j, t in enumerate(d_k)], dtype=object))
    df.index.name, df.columns.name = L["query"], L["key"]
    return fig, df


# --- every head's entropy ------------------------------------------------------------------------

def head_entropies(patterns: np.ndarray, n_real_q: Sequence[int]) -> np.ndarray:
    """(layers, heads) mean row entropy in nats over the real query rows (``head_stats``).
    ``patterns``: one (heads, q, k) array per layer; ``n_real_q``: real queries per layer."""
    return np.array([[head_stats(p[h], n)[0] for h in range(p.shape[0])] for p, n in zip(patterns, n_real_q)])


def entropy_figure(a: np.ndarray, b: np.ndarray, layer: int, head: int, *, names: Sequence[str] | None = None,
                   layers: Sequence[int] | None = None, title: str = "entropy", subtitle: str | None = None,
                   labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Left: the selected layer's heads, mean entropy in ① and ② side by side. Right: the change
    ② − ① for every layer × head (one symmetric scale), the selected head outlined. ``a``, ``b``:
    (layers, heads) in nats. The table: every layer and head with ①, ② and the change."""
    L = _lab(labels)
    names = list(names or (L["intact"], L["edited"]))
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n_layers, n_heads = a.shape
    layer_ids = list(layers) if layers is not None else list(range(n_layers))
    row = layer_ids.index(layer) if layer in layer_ids else 0
    change = b - a
    g = Grid(cols=2, col_widths=[0.45, 0.55], hspace=0.12,
             titles=[style.esc(L["heads_of_layer"].format(layer=layer)),
                     style.esc(f"{L['entropy_change']} ② − ①")])
    heads = list(range(n_heads))
    traces = []
    for k, (vals, colour) in enumerate(((a[row], style.LINE_COLOURS[0]), (b[row], style.LINE_COLOURS[1]))):
        edge = ["#000000" if h == head else "rgba(0,0,0,0)" for h in heads]
        traces.append(style.trace("bar", x=heads, y=vals, name=style.esc(f"{'①②'[k]} {names[k]}"),
                                  marker=dict(color=colour, line=dict(color=edge, width=2)),
                                  xaxis=g.x(0, 0), yaxis=g.y(0, 0),
                                  hovertemplate=f"{style.esc(L['head'])} %{{x}}: %{{y:.3f}}<extra></extra>"))
    traces.append(style.trace(
        "heatmap", z=change.astype(np.float32), x=heads, y=list(range(n_layers)), coloraxis="coloraxis",
        name=style.esc(L["entropy_change"]), xgap=1, ygap=1, xaxis=g.x(0, 1), yaxis=g.y(0, 1),
        customdata=np.array(layer_ids, dtype=np.int32)[:, None].repeat(n_heads, 1),
        hovertemplate=(f"{style.esc(L['layer'])} %{{customdata}}, {style.esc(L['head'])} %{{x}}: "
                       f"%{{z:+.3f}}<extra></extra>")))
    g.axes(0, 0, x=dict(title=dict(text=style.esc(L["head"])), tickmode="array", tickvals=heads),
           y=dict(title=dict(text=style.esc(L["entropy_nats"])), rangemode="tozero"))
    g.axes(0, 1, x=dict(title=dict(text=style.esc(L["head"])), tickmode="array", tickvals=heads,
                        range=[-0.5, n_heads - 0.5], showgrid=False, zeroline=False),
           y=dict(title=dict(text=style.esc(L["layer"])), tickmode="array", tickvals=list(range(n_layers)),
                  ticktext=[str(li) for li in layer_ids], range=[n_layers - 0.5, -0.5], showgrid=False,
                  zeroline=False))
    shapes = [dict(type="rect", xref=g.x(0, 1), yref=g.y(0, 1), x0=head - 0.5, x1=head + 0.5, y0=row - 0.5,
                   y1=row + 0.5, line=dict(color="#000000", width=2))]
    fig = g.figure(traces, title=title, height=int(min(900, max(380, 120 + 22 * n_layers))),
                   subtitle=style.esc(subtitle) if subtitle else None, shapes=shapes, barmode="group",
                   plot_bgcolor="white", legend=dict(orientation="h", y=-0.18),
                   coloraxis=style.scores_axis(_change_range(change), "② − ①"))
    df = pd.DataFrame({L["layer"]: np.repeat(layer_ids, n_heads), L["head"]: np.tile(heads, n_layers),
                       f"① {names[0]}": a.ravel(), f"② {names[1]}": b.ravel(), "② − ①": change.ravel()})
    return fig, df.set_index([L["layer"], L["head"]])


# --- what the model put out ----------------------------------------------------------------------

def first_difference(a: str, b: str) -> int | None:
    """The position of the first character where ``a`` and ``b`` differ (one ending counts as a
    difference); None when they are equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


SAME, DIFFERENT, MISSING = 0, 1, 2
_OUTPUT_COLOURS = ("#ffffff", "#E69F00", "#d4d4d4")


def generated_figure(a: str, b: str, *, names: Sequence[str] | None = None, title: str = "output",
                     subtitle: str | None = None, labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """What the seed model wrote in ① and ②, one character per cell; characters that differ are
    orange, the first difference is outlined and named in the title. The table: one row per
    character position."""
    L = _lab(labels)
    names = list(names or (L["intact"], L["edited"]))
    n = max(len(a), len(b), 1)
    first = first_difference(a, b)
    cat = np.full((2, n), MISSING, dtype=int)
    text = np.full((2, n), "", dtype=object)
    for r, s in enumerate((a, b)):
        other = b if r == 0 else a
        for i, ch in enumerate(s):
            cat[r, i] = SAME if i < len(other) and other[i] == ch else DIFFERENT
            text[r, i] = style.token_label(ch)
    scale = []
    for i, colour in enumerate(_OUTPUT_COLOURS):
        scale += [[i / 3, colour], [(i + 1) / 3, colour]]
    kinds = style.strings([style.esc(L["same"]), style.esc(L["difference"]), "—"])
    traces = [style.trace(
        "heatmap", z=cat.astype(np.int8), x=list(range(n)), y=[0, 1], zmin=-0.5, zmax=2.5, colorscale=scale,
        showscale=False, xgap=2, ygap=2, text=style.strings(text), texttemplate="%{text}" if n <= 80 else None,
        textfont=dict(size=14), customdata=style.strings(np.stack([text, kinds[cat]], axis=-1)),
        name=style.esc(L["character"]),
        hovertemplate=(f"{style.esc(L['character'])} %{{x}}: <b>%{{customdata[0]}}</b> "
                       "(%{customdata[1]})<extra></extra>"))]
    shapes = []
    if first is not None:
        shapes.append(dict(type="rect", x0=first - 0.5, x1=first + 0.5, y0=-0.5, y1=1.5,
                           line=dict(color="#D55E00", width=3)))
    verdict = L["identical"] if first is None else L["first_difference"].format(i=first)
    if not a and not b:
        verdict = L["empty_output"]
    notes = " · ".join(s for s in (subtitle, verdict) if s)
    fig = style.make_figure(traces, dict(
        xaxis=dict(title=dict(text=style.esc(L["character"])), tickmode="array", tickvals=style.tick_positions(n),
                   range=[-0.5, n - 0.5], showgrid=False, zeroline=False),
        yaxis=dict(tickmode="array", tickvals=[0, 1],
                   ticktext=[style.esc(f"① {names[0]}"), style.esc(f"② {names[1]}")],
                   range=[1.5, -0.5], showgrid=False, zeroline=False),
        shapes=shapes, plot_bgcolor="white", margin=dict(l=110, t=100)),
        title=title, height=260, subtitle=style.esc(notes))
    df = pd.DataFrame({f"① {names[0]}": [a[i] if i < len(a) else "" for i in range(n)],
                       f"② {names[1]}": [b[i] if i < len(b) else "" for i in range(n)],
                       L["same"]: [bool(i < len(a) and i < len(b) and a[i] == b[i]) for i in range(n)]},
                      index=pd.Index(range(n), name=L["character"]))
    return fig, df


def kl_divergence(logp: np.ndarray, logq: np.ndarray) -> float:
    """KL(p ‖ q) = Σ p (log p − log q) in nats, from log-probabilities (float64; 0 · log 0 = 0)."""
    lp, lq = np.asarray(logp, dtype=np.float64), np.asarray(logq, dtype=np.float64)
    p = np.exp(lp)
    with np.errstate(invalid="ignore"):
        terms = np.where(p > 0, p * (lp - lq), 0.0)
    return float(terms.sum())


def next_token_pair_figure(logp_a: np.ndarray, logp_b: np.ndarray, token_text: Mapping[int, str], *, k: int = 10,
                           names: Sequence[str] | None = None, context: str = "", title: str = "next token",
                           subtitle: str | None = None,
                           labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The k most likely next tokens of ① and of ② (together), each with its probability in both runs,
    and KL(① ‖ ②) in the title. ``token_text`` maps ids to readable tokens."""
    L = _lab(labels)
    names = list(names or (L["intact"], L["edited"]))
    pa, pb = np.exp(np.asarray(logp_a, dtype=np.float64)), np.exp(np.asarray(logp_b, dtype=np.float64))
    top_a, top_b = np.argsort(-pa, kind="stable")[:k], np.argsort(-pb, kind="stable")[:k]
    ids = list(dict.fromkeys([int(i) for i in top_a] + [int(i) for i in top_b]))
    ids.sort(key=lambda i: -max(pa[i], pb[i]))
    kl = kl_divergence(logp_a, logp_b)
    texts = [token_text.get(i, str(i)) for i in ids]
    y = [f"{style.esc(style.visible(t))} ({i})" for t, i in zip(texts, ids)]
    traces = []
    for r, (p, colour) in enumerate(((pa, style.LINE_COLOURS[0]), (pb, style.LINE_COLOURS[1]))):
        vals = np.array([p[i] for i in ids])
        traces.append(style.trace("bar", x=vals, y=y, orientation="h", name=style.esc(f"{'①②'[r]} {names[r]}"),
                                  marker=dict(color=colour), text=[f"{v:.1%}" for v in vals], textposition="outside",
                                  cliponaxis=False, hovertemplate="%{y}<br>p = %{x:.4f}<extra></extra>"))
    heading = " — ".join(s for s in (title, context) if s)
    notes = " · ".join(s for s in (subtitle, L["kl"].format(kl=f"{kl:.4f}")) if s)
    top = float(max([pa[i] for i in ids] + [pb[i] for i in ids] + [0.0]))
    fig = style.make_figure(traces, dict(
        xaxis=dict(title=dict(text=style.esc(L["probability"])), range=[0, min(1.0, top * 1.3 + 0.02)],
                   tickformat=".0%"),
        yaxis=dict(autorange="reversed", type="category", title=dict(text=style.esc(L["token"]))),
        barmode="group", plot_bgcolor="white", bargap=0.2, legend=dict(orientation="h", y=-0.12),
        margin=dict(t=100)), title=heading, height=max(340, 110 + 34 * len(ids)), subtitle=style.esc(notes))
    rank = lambda p, i: int((p > p[i]).sum()) + 1  # noqa: E731
    df = pd.DataFrame({L["token"]: texts, "id": ids, f"① {names[0]}": [pa[i] for i in ids],
                       f"② {names[1]}": [pb[i] for i in ids], f"{L['rank']} ①": [rank(pa, i) for i in ids],
                       f"{L['rank']} ②": [rank(pb, i) for i in ids]}, index=pd.Index(range(1, len(ids) + 1)))
    df.attrs["kl"] = kl
    return fig, df


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    """cos(u, v) in float64 (0 for a zero vector)."""
    u, v = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    return float(u @ v / (nu * nv)) if nu > 0 and nv > 0 else 0.0


def embedding_pair_figure(a: np.ndarray, b: np.ndarray, *, names: Sequence[str] | None = None,
                          title: str = "sentence embedding", subtitle: str | None = None,
                          labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The sentence embeddings of ① and ② and their difference, one row each over the dimensions
    (one symmetric scale), with cos(①, ②) in the title. The table: one row per dimension."""
    L = _lab(labels)
    names = list(names or (L["intact"], L["edited"]))
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rows = np.stack([a, b, b - a])
    cos = cosine(a, b)
    row_names = [f"① {names[0]}", f"② {names[1]}", "② − ①"]
    traces = heatmap(rows, rows=row_names, row_name="", col_name=L["embedding_dim"], value_name=L["value"],
                     name=L["embedding_dim"], cell_text=False)
    x, y = token_axes(rows=row_names, cols=None, n_rows=3, n_cols=rows.shape[1], col_title=L["embedding_dim"])
    notes = " · ".join(s for s in (subtitle, L["cosine_value"].format(cos=f"{cos:.4f}")) if s)
    fig = style.make_figure(traces, dict(xaxis=x, yaxis=y, coloraxis=style.scores_axis(style.symmetric_range(rows)),
                                         margin=dict(l=120, t=100)),
                            title=title, height=300, subtitle=style.esc(notes))
    df = pd.DataFrame({row_names[0]: a, row_names[1]: b, row_names[2]: b - a},
                      index=pd.Index(range(len(a)), name=L["embedding_dim"]))
    df.attrs["cosine"] = cos
    return fig, df
