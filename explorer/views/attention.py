"""Views of one head's attention, stage by stage: Q/K/V, scores, masks, weights, output, one cell.

Every function takes arrays and token lists (already padded to the arrays' lengths) and returns a
plotly figure; rows are queries (top to bottom), columns are keys, at integer positions.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import style
from .matrix import add, heatmap, matrix_df, set_axes

DEFAULT_LABELS = {
    "query": "query", "key": "key", "dim": "dimension", "token": "token", "value": "value",
    "score": "score", "weight": "weight", "masked": "masked", "row_sum": "Σ row",
    "allowed": "allowed", "padding": "blocked: padding", "causal": "blocked: causal",
    "both": "blocked: padding + causal", "mask_padding": "padding mask", "mask_causal": "causal mask",
    "mask_combined": "combined mask", "d_model": "d_model", "d_head": "d_head",
}


def _lab(labels: dict | None) -> dict:
    return {**DEFAULT_LABELS, **(labels or {})}


def _titles(titles: Sequence[str]) -> list[str]:
    return [style.esc(t) for t in titles]


# --- Q, K, V and the head's weights ----------------------------------------------------------

def qkv_figure(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_tokens: Sequence[str],
               k_tokens: Sequence[str], *, title: str = "Q, K, V", labels: dict | None = None,
               names: Sequence[str] = ("Q", "K", "V")) -> go.Figure:
    """Q (queries × d_head), K and V (keys × d_head) side by side, on one diverging scale."""
    L = _lab(labels)
    fig = make_subplots(rows=1, cols=3, subplot_titles=_titles(names), horizontal_spacing=0.08)
    zmax = style.symmetric_range(q, k, v)
    for c, (m, toks) in enumerate(((q, q_tokens), (k, k_tokens), (v, k_tokens)), start=1):
        add(fig, heatmap(m, rows=toks, row_name=L["token"], col_name=L["dim"], value_name=names[c - 1],
                         name=names[c - 1], cell_text=False), row=1, col=c)
        set_axes(fig, rows=toks, cols=None, n_rows=m.shape[0], n_cols=m.shape[1],
                 col_title=L["dim"], row=1, col=c)
    fig.update_layout(coloraxis=style.scores_axis(zmax))
    return style.base_layout(fig, title, height=max(360, 60 + 18 * max(q.shape[0], k.shape[0])))


def weights_figure(w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, *, title: str = "W_Q, W_K, W_V",
                   labels: dict | None = None,
                   names: Sequence[str] = ("W_Q", "W_K", "W_V")) -> go.Figure:
    """The head's slices of the projections, each d_model × d_head (x · W orientation)."""
    L = _lab(labels)
    fig = make_subplots(rows=1, cols=3, subplot_titles=_titles(names), horizontal_spacing=0.08)
    zmax = style.symmetric_range(w_q, w_k, w_v)
    for c, m in enumerate((w_q, w_k, w_v), start=1):
        add(fig, heatmap(m, row_name=L["d_model"], col_name=L["d_head"], value_name=names[c - 1],
                         name=names[c - 1], cell_text=False), row=1, col=c)
        set_axes(fig, rows=None, cols=None, n_rows=m.shape[0], n_cols=m.shape[1],
                 row_title=L["d_model"] if c == 1 else "", col_title=L["d_head"], row=1, col=c)
    fig.update_layout(coloraxis=style.scores_axis(zmax))
    return style.base_layout(fig, title, height=560)


# --- scores, masks, weights ------------------------------------------------------------------

def scores_figure(scores: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], *,
                  title: str = "scores", labels: dict | None = None, value_name: str = "score",
                  zmax: float | None = None, blocked: np.ndarray | None = None,
                  blocked_cell: str = "−∞") -> go.Figure:
    """A query × key matrix of scores on the diverging scale; ``blocked`` cells shown as masked."""
    L = _lab(labels)
    fig = go.Figure()
    add(fig, heatmap(scores, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                     value_name=value_name, blocked=blocked, blocked_text=f"{L['masked']} (−∞)",
                     blocked_cell=blocked_cell, name=value_name))
    set_axes(fig, rows=q_tokens, cols=k_tokens, n_rows=scores.shape[0], n_cols=scores.shape[1],
             row_title=L["query"], col_title=L["key"])
    fig.update_layout(coloraxis=style.scores_axis(zmax or style.symmetric_range(scores), value_name))
    return style.base_layout(fig, title, height=_square_height(scores.shape[0]))


def _square_height(n: int) -> int:
    return int(min(900, max(380, 110 + 26 * n)))


def mask_categories(allowed: np.ndarray, n_real_keys: int, causal: bool) -> np.ndarray:
    """0 allowed, 1 blocked by padding, 2 blocked by causality, 3 both (q × k ints)."""
    tq, tk = allowed.shape
    pad = np.zeros((tq, tk), dtype=bool)
    pad[:, n_real_keys:] = True
    cau = np.triu(np.ones((tq, tk), dtype=bool), k=1) if causal else np.zeros((tq, tk), dtype=bool)
    cat = pad.astype(int) + 2 * cau.astype(int)
    blocked = ~allowed.astype(bool)
    cat[~blocked] = 0
    cat[blocked & (cat == 0)] = 1  # blocked for another reason (e.g. left padding): call it padding
    return cat


def _mask_scale(values: Sequence[int]) -> list:
    """A discrete colour scale for the mask categories present in ``values`` (0..3)."""
    stops = []
    n = 4
    for i in range(n):
        stops += [[i / n, style.MASK_COLOURS[i]], [(i + 1) / n, style.MASK_COLOURS[i]]]
    return stops


def mask_figure(allowed: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], *,
                n_real_keys: int, causal: bool, title: str = "masks",
                labels: dict | None = None) -> go.Figure:
    """Padding mask, causal mask and their combination (what the model used), side by side.

    Colours (Okabe–Ito): light = allowed, orange = padding, blue = causal, vermillion = both.
    """
    L = _lab(labels)
    tq, tk = allowed.shape
    ones = np.ones((tq, tk), dtype=bool)
    pad_only = mask_categories(np.where(np.arange(tk)[None, :] < n_real_keys, ones, False),
                               n_real_keys, False)
    if causal:
        cau_only = np.where(np.triu(ones, k=1), 2, 0)
    else:
        cau_only = np.zeros((tq, tk), dtype=int)
    combined = mask_categories(allowed, n_real_keys, causal)
    names = [L["mask_padding"], L["mask_causal"], L["mask_combined"]]
    cat_names = [L["allowed"], L["padding"], L["causal"], L["both"]]
    fig = make_subplots(rows=1, cols=3, subplot_titles=_titles(names), horizontal_spacing=0.06)
    for c, cat in enumerate((pad_only, cau_only, combined), start=1):
        text = np.vectorize(lambda x: style.esc(cat_names[x]))(cat).astype(object)
        cells = np.where(cat == 0, "✓", "×").astype(object) if max(tq, tk) <= style.CELL_TEXT_MAX else None
        custom = np.empty((tq, tk, 3), dtype=object)
        custom[..., 0] = np.asarray(style.token_labels(q_tokens), dtype=object)[:, None]
        custom[..., 1] = np.asarray(style.token_labels(k_tokens), dtype=object)[None, :]
        custom[..., 2] = text
        fig.add_trace(go.Heatmap(
            z=cat, x=list(range(tk)), y=list(range(tq)), zmin=-0.5, zmax=3.5,
            colorscale=_mask_scale(range(4)), showscale=c == 3, xgap=1, ygap=1,
            text=cells, texttemplate="%{text}" if cells is not None else None,
            customdata=custom, name=style.esc(names[c - 1]),
            colorbar=dict(tickvals=[0, 1, 2, 3], ticktext=[style.esc(s) for s in cat_names],
                          thickness=12),
            hovertemplate=(f"{style.esc(L['query'])} %{{y}} <b>%{{customdata[0]}}</b><br>"
                           f"{style.esc(L['key'])} %{{x}} <b>%{{customdata[1]}}</b><br>"
                           "%{customdata[2]}<extra></extra>"),
        ), row=1, col=c)
        set_axes(fig, rows=q_tokens, cols=k_tokens, n_rows=tq, n_cols=tk,
                 row_title=L["query"] if c == 1 else "", col_title=L["key"], row=1, col=c)
    fig.update_layout(plot_bgcolor="white")
    fig = style.base_layout(fig, title, height=_square_height(tq) - 40)
    fig.update_layout(plot_bgcolor="white")
    return fig


def pattern_figure(pattern: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], *,
                   blocked: np.ndarray | None = None, title: str = "softmax weights",
                   labels: dict | None = None) -> go.Figure:
    """Softmax weights on the sequential scale, value on hover; the row sums (= 1) on the right."""
    L = _lab(labels)
    tq, tk = pattern.shape
    fig = make_subplots(rows=1, cols=2, column_widths=[0.9, 0.1], shared_yaxes=True,
                        horizontal_spacing=0.02, subplot_titles=["", style.esc(L["row_sum"])])
    add(fig, heatmap(pattern, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                     value_name=L["weight"], blocked=blocked, blocked_text=f"{L['masked']} (0)",
                     name=L["weight"]), row=1, col=1)
    sums = pattern.sum(axis=1, keepdims=True)
    add(fig, heatmap(sums, rows=q_tokens, cols=[L["row_sum"]], row_name=L["query"],
                     col_name="", value_name=L["row_sum"], name="row sums", cell_text=True,
                     coloraxis="coloraxis"), row=1, col=2)
    set_axes(fig, rows=q_tokens, cols=k_tokens, n_rows=tq, n_cols=tk, row_title=L["query"],
             col_title=L["key"], row=1, col=1)
    fig.update_xaxes(showticklabels=False, range=[-0.5, 0.5], row=1, col=2)
    fig.update_layout(coloraxis=style.weights_axis(L["weight"]))
    return style.base_layout(fig, title, height=_square_height(tq))


# --- output ----------------------------------------------------------------------------------

def z_figure(pattern: np.ndarray, v: np.ndarray, z: np.ndarray, q_tokens: Sequence[str],
             k_tokens: Sequence[str], *, blocked: np.ndarray | None = None,
             title: str = "z = weights · V", labels: dict | None = None,
             names: Sequence[str] = ("weights", "V", "z = weights · V")) -> go.Figure:
    """weights (q × k) · V (k × d_head) = z (q × d_head), three panels in reading order."""
    L = _lab(labels)
    fig = make_subplots(rows=1, cols=3, subplot_titles=_titles(names), horizontal_spacing=0.07,
                        column_widths=[0.36, 0.32, 0.32])
    add(fig, heatmap(pattern, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                     value_name=L["weight"], blocked=blocked, blocked_text=f"{L['masked']} (0)",
                     coloraxis="coloraxis2", name=names[0], cell_text=False), row=1, col=1)
    set_axes(fig, rows=q_tokens, cols=k_tokens, n_rows=pattern.shape[0], n_cols=pattern.shape[1],
             row_title=L["query"], col_title=L["key"], row=1, col=1)
    zmax = style.symmetric_range(v, z)
    add(fig, heatmap(v, rows=k_tokens, row_name=L["key"], col_name=L["dim"], value_name=names[1],
                     name=names[1], cell_text=False), row=1, col=2)
    set_axes(fig, rows=k_tokens, cols=None, n_rows=v.shape[0], n_cols=v.shape[1],
             col_title=L["dim"], row=1, col=2)
    add(fig, heatmap(z, rows=q_tokens, row_name=L["query"], col_name=L["dim"], value_name=names[2],
                     name=names[2], cell_text=False), row=1, col=3)
    set_axes(fig, rows=q_tokens, cols=None, n_rows=z.shape[0], n_cols=z.shape[1],
             col_title=L["dim"], row=1, col=3)
    wa = style.weights_axis(L["weight"])
    wa["colorbar"].update(x=-0.12, xanchor="right")
    fig.update_layout(coloraxis=style.scores_axis(zmax), coloraxis2=wa)
    fig = style.base_layout(fig, title, height=max(380, 80 + 20 * pattern.shape[0]))
    fig.update_layout(margin=dict(l=120))
    return fig


def head_output_figure(contribution: np.ndarray, total: np.ndarray | None, q_tokens: Sequence[str],
                       *, title: str = "after W_O", labels: dict | None = None,
                       names: Sequence[str] = ("this head: z · W_O[head]", "all heads: hook_out")) -> go.Figure:
    """This head's contribution z_h · W_O[h] (q × d_model), next to the sum over all heads."""
    L = _lab(labels)
    mats = [contribution] if total is None else [contribution, total]
    fig = make_subplots(rows=1, cols=len(mats), subplot_titles=_titles(names[: len(mats)]),
                        horizontal_spacing=0.06)
    zmax = style.symmetric_range(*mats)
    for c, m in enumerate(mats, start=1):
        add(fig, heatmap(m, rows=q_tokens, row_name=L["query"], col_name=L["d_model"],
                         value_name=names[c - 1], name=names[c - 1], cell_text=False), row=1, col=c)
        set_axes(fig, rows=q_tokens, cols=None, n_rows=m.shape[0], n_cols=m.shape[1],
                 col_title=L["d_model"], row=1, col=c)
    fig.update_layout(coloraxis=style.scores_axis(zmax))
    return style.base_layout(fig, title, height=max(360, 80 + 20 * contribution.shape[0]))


# --- one cell, derived -----------------------------------------------------------------------

def cell_numbers(q: np.ndarray, k: np.ndarray, scores_row: np.ndarray, allowed_row: np.ndarray,
                 pattern_row: np.ndarray, j: int) -> dict:
    """Every number on the way from q_i and k_j to the weight a_ij (from the hooks' tensors)."""
    d_head = q.shape[-1]
    prod = q * k
    dot = float(prod.sum())
    scaled = dot / math.sqrt(d_head)
    masked_row = np.where(allowed_row, scores_row, -np.inf)
    finite = masked_row[np.isfinite(masked_row)]
    if finite.size:
        e = np.exp(masked_row - finite.max())
        soft = e / e.sum()
    else:
        soft = np.zeros_like(scores_row)
    return {
        "d_head": d_head, "product": prod, "dot": dot, "sqrt_d": math.sqrt(d_head),
        "scaled": scaled, "hook_score": float(scores_row[j]), "allowed": bool(allowed_row[j]),
        "masked_score": float(masked_row[j]), "softmax_row": soft, "weight": float(soft[j]),
        "hook_weight": float(pattern_row[j]), "row_sum": float(pattern_row.sum()),
        "row_max": float(finite.max()) if finite.size else float("nan"),
        "exp_sum": float(np.exp(finite - finite.max()).sum()) if finite.size else float("nan"),
    }


def cell_figure(q: np.ndarray, k: np.ndarray, scores_row: np.ndarray, allowed_row: np.ndarray,
                pattern_row: np.ndarray, i: int, j: int, q_token: str, k_tokens: Sequence[str], *,
                title: str = "one cell", labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame, dict]:
    """q_i, k_j and q_i⊙k_j per dimension (top); the whole row's scaled scores and softmax
    weights with key j highlighted (bottom); every number of the chain in the subtitle."""
    L = _lab(labels)
    nums = cell_numbers(q, k, scores_row, allowed_row, pattern_row, j)
    dims = list(range(q.shape[-1]))
    k_tok = k_tokens[j]
    chain = (f"Σ q⊙k = {style.fmt(nums['dot'])} → ÷√{nums['d_head']} = {style.fmt(nums['scaled'])} → "
             f"{L['allowed'] if nums['allowed'] else L['masked'] + ' (−∞)'} → "
             f"softmax → {L['weight']} = {style.fmt(nums['weight'], 4)}")
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2, row_heights=[0.5, 0.5], subplot_titles=[
        style.esc(f"q[{i}] '{style.visible(q_token)}', k[{j}] '{style.visible(k_tok)}' "
                  f"{L['dim']} × {L['dim']}"),
        style.esc(f"{L['query']} {i}: {L['score']} ÷√d_k, softmax"),
    ])
    for name, vals, colour in (("q", q, style.LINE_COLOURS[0]), ("k", k, style.LINE_COLOURS[1]),
                               ("q⊙k", nums["product"], style.LINE_COLOURS[2])):
        fig.add_trace(go.Bar(x=dims, y=vals, name=name, marker_color=colour, legendgroup="a",
                             hovertemplate=f"{name}[%{{x}}] = %{{y:.4f}}<extra></extra>"), row=1, col=1)
    kl = style.token_labels(k_tokens)
    nk = len(k_tokens)
    shown = np.where(allowed_row, scores_row, np.nan)
    edge = ["#000000" if c == j else "rgba(0,0,0,0)" for c in range(nk)]
    fig.add_trace(go.Bar(x=list(range(nk)), y=shown, name=f"{L['score']} ÷√d_k",
                         marker=dict(color=style.LINE_COLOURS[4], line=dict(color=edge, width=2)),
                         customdata=kl, hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"),
                  row=2, col=1)
    fig.add_trace(go.Scatter(x=list(range(nk)), y=nums["softmax_row"], name=L["weight"], yaxis="y3",
                             mode="lines+markers", line=dict(color=style.LINE_COLOURS[3]),
                             marker=dict(size=[12 if c == j else 6 for c in range(nk)]),
                             customdata=kl, hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"),
                  row=2, col=1)
    fig.update_layout(yaxis3=dict(overlaying="y2", side="right", range=[0, 1.05], showgrid=False,
                                  title_text=style.esc(L["weight"]), anchor="x2"))
    blocked_keys = [c for c in range(nk) if not allowed_row[c]]
    if blocked_keys:
        fig.add_trace(go.Scatter(x=blocked_keys, y=[0] * len(blocked_keys), mode="markers",
                                 name=L["masked"], marker=dict(symbol="x", color=style.MASKED_MARK, size=9),
                                 hoverinfo="skip"), row=2, col=1)
    fig.update_xaxes(title_text=style.esc(L["dim"]), row=1, col=1)
    ax = style.token_axis(k_tokens, L["key"])
    fig.update_xaxes(**ax, row=2, col=1)
    fig.update_layout(barmode="group", plot_bgcolor="white", legend=dict(orientation="h", y=-0.15))
    fig = style.base_layout(fig, title, height=620)
    fig.update_layout(plot_bgcolor="white", title=dict(
        text=style.esc(title), subtitle=dict(text=style.esc(chain))))
    df = pd.DataFrame({"dim": dims, "q": q, "k": k, "q*k": nums["product"]}).set_index("dim")
    return fig, df, nums


# --- all heads -------------------------------------------------------------------------------

def head_stats(pattern: np.ndarray, n_real_q: int) -> tuple[float, float]:
    """(mean entropy in nats, mean attention distance |i − j|) over the real query rows."""
    p = np.asarray(pattern[:n_real_q], dtype=float)
    if p.size == 0:
        return float("nan"), float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log(p), 0.0).sum(-1)
    i = np.arange(p.shape[0])[:, None]
    j = np.arange(p.shape[1])[None, :]
    dist = (p * np.abs(i - j)).sum(-1)
    return float(ent.mean()), float(dist.mean())


def overview_figure(patterns: np.ndarray, n_real_q: int, *, layers: Sequence[int] | None = None,
                    selected: tuple[int, int] | None = None, title: str = "all heads",
                    labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Small multiples of the pattern: rows = layers, columns = heads; each titled with its mean
    entropy H and mean attention distance d. ``patterns``: (n_layers, n_heads, q, k)."""
    L = _lab(labels)
    n_layers, n_heads = patterns.shape[:2]
    layers = list(range(n_layers)) if layers is None else list(layers)
    rows = []
    titles = []
    for li in layers:
        for h in range(n_heads):
            ent, dist = head_stats(patterns[li, h], n_real_q)
            rows.append({"layer": li, "head": h, "entropy": ent, "mean_distance": dist})
            titles.append(f"L{li} H{h}<br>H={ent:.2f} d={dist:.1f}")
    fig = make_subplots(rows=len(layers), cols=n_heads, subplot_titles=titles,
                        horizontal_spacing=min(0.04, 0.5 / max(n_heads, 1)),
                        vertical_spacing=min(0.08, 0.6 / max(len(layers), 1)))
    for r, li in enumerate(layers, start=1):
        for h in range(n_heads):
            p = patterns[li, h]
            fig.add_trace(go.Heatmap(z=p, coloraxis="coloraxis", name=f"L{li} H{h}",
                                     hovertemplate=(f"L{li} H{h}<br>{style.esc(L['query'])} %{{y}}, "
                                                    f"{style.esc(L['key'])} %{{x}}: %{{z:.3f}}<extra></extra>")),
                          row=r, col=h + 1)
            fig.update_xaxes(showticklabels=False, range=[-0.5, p.shape[1] - 0.5], row=r, col=h + 1)
            fig.update_yaxes(showticklabels=False, range=[p.shape[0] - 0.5, -0.5], row=r, col=h + 1)
    if selected is not None and selected[0] in layers:
        r = layers.index(selected[0]) + 1
        c = selected[1] + 1
        idx = (r - 1) * n_heads + c
        ax = "" if idx == 1 else str(idx)
        fig.add_shape(type="rect", xref=f"x{ax} domain", yref=f"y{ax} domain", x0=-0.04, x1=1.04,
                      y0=-0.04, y1=1.04, line=dict(color="#D55E00", width=3))
    for a in fig.layout.annotations:
        a.font = dict(size=10)
    fig.update_layout(coloraxis=style.weights_axis(L["weight"]))
    fig = style.base_layout(fig, title, height=int(min(2400, 140 + 170 * len(layers))))
    df = pd.DataFrame(rows)
    return fig, df
