"""Views of one head's attention, stage by stage: Q/K/V, scores, masks, weights, output, one cell.

Every view takes arrays and token lists (already padded to the arrays' lengths) and returns
``(figure, table)``: the plotly figure and its numbers as a pandas DataFrame (exact values, −inf
included). Rows are queries (top to bottom), columns are keys, at integer positions.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .matrix import Grid, heatmap, matrix_df, token_axes

_lab = style.with_labels


def _titles(titles: Sequence[str]) -> list[str]:
    return [style.esc(t) for t in titles]


# --- Q, K, V and the head's weights ----------------------------------------------------------

def qkv_figure(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_tokens: Sequence[str],
               k_tokens: Sequence[str], *, title: str = "Q, K, V", labels: dict | None = None,
               names: Sequence[str] = ("Q", "K", "V")) -> tuple[go.Figure, pd.DataFrame]:
    """Q (queries × d_head), K and V (keys × d_head) side by side, on one diverging scale; the
    table has Q's rows, then K's, then V's (cross-attention: other lengths)."""
    L = _lab(labels)
    g = Grid(cols=3, titles=_titles(names), hspace=0.09)
    traces = []
    for c, (m, toks) in enumerate(((q, q_tokens), (k, k_tokens), (v, k_tokens))):
        traces += heatmap(m, rows=toks, row_name=L["token"], col_name=L["dim"], value_name=names[c],
                          name=names[c], cell_text=False, xaxis=g.x(0, c), yaxis=g.y(0, c))
        x, y = token_axes(rows=toks, cols=None, n_rows=m.shape[0], n_cols=m.shape[1], col_title=L["dim"])
        g.axes(0, c, x=x, y=y)
    fig = g.figure(traces, title=title, height=max(360, 60 + 18 * max(q.shape[0], k.shape[0])),
                   coloraxis=style.scores_axis(style.symmetric_range(q, k, v)))
    parts = []
    for name, m, toks in zip(names, (q, k, v), (q_tokens, k_tokens, k_tokens)):
        part = matrix_df(m, toks, None, row_name=L["position"], col_name=L["dim"])
        part.insert(0, L["matrix"], name)
        part.index = pd.Index([f"{name} {i}" for i in part.index], name=L["position"], dtype=object)
        parts.append(part)
    return fig, pd.concat(parts, axis=0)


def weights_figure(w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, *, title: str = "W_Q, W_K, W_V",
                   labels: dict | None = None, names: Sequence[str] = ("W_Q", "W_K", "W_V"),
                   biases: Sequence[np.ndarray] | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The head's slices of the projections, each d_model × d_head (x · W orientation); with
    ``biases`` (b_Q, b_K, b_V of the head) each matrix gets its bias as a last row "b", so that
    x · W + b on screen is the model's q. The table: one row per d_model dimension (then "b"), the
    three matrices' columns side by side."""
    L = _lab(labels)
    mats = [w_q, w_k, w_v]
    if biases is not None:
        mats = [np.vstack([m, np.asarray(b, dtype=m.dtype)[None, :]]) for m, b in zip(mats, biases)]
    n = mats[0].shape[0]
    rows = None if biases is None else [str(i) for i in range(n - 1)] + ["b"]
    g = Grid(cols=3, titles=_titles(names), hspace=0.08)
    traces = []
    for c, m in enumerate(mats):
        traces += heatmap(m, rows=rows, row_name=L["d_model"], col_name=L["d_head"], value_name=names[c],
                          name=names[c], cell_text=False, xaxis=g.x(0, c), yaxis=g.y(0, c))
        x, y = token_axes(rows=rows, cols=None, n_rows=m.shape[0], n_cols=m.shape[1],
                          row_title=L["d_model"] if c == 0 else "", col_title=L["d_head"])
        if rows is not None:  # the bias row is always labelled
            vals = [v for v in y["tickvals"] if v < n - 2 - n // 40] + [n - 1]
            y.update(tickvals=vals, ticktext=[rows[v] for v in vals])
        g.axes(0, c, x=x, y=y)
    fig = g.figure(traces, title=title, height=560,
                   coloraxis=style.scores_axis(style.symmetric_range(*mats)))
    df = pd.concat([pd.DataFrame(m, columns=[f"{nm}:{i}" for i in range(m.shape[1])])
                    for nm, m in zip(names, mats)], axis=1)
    if rows is not None:
        df.index = pd.Index([*range(n - 1), "b"], dtype=object)
    df.index.name = L["d_model"]
    return fig, df


# --- scores, masks, weights ------------------------------------------------------------------

def scores_figure(scores: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], *,
                  title: str = "scores", labels: dict | None = None, value_name: str = "score",
                  zmax: float | None = None, blocked: np.ndarray | None = None,
                  blocked_cell: str = "−∞") -> tuple[go.Figure, pd.DataFrame]:
    """A query × key matrix of scores on the diverging scale; ``blocked`` cells shown as masked."""
    L = _lab(labels)
    g = Grid()
    traces = heatmap(scores, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                     value_name=value_name, blocked=blocked, blocked_text=f"{L['masked']} (−∞)",
                     blocked_cell=blocked_cell, name=value_name)
    x, y = token_axes(rows=q_tokens, cols=k_tokens, n_rows=scores.shape[0], n_cols=scores.shape[1],
                      row_title=L["query"], col_title=L["key"])
    g.axes(0, 0, x=x, y=y)
    fig = g.figure(traces, title=title, height=_square_height(scores.shape[0]),
                   coloraxis=style.scores_axis(zmax or style.symmetric_range(scores), value_name))
    return fig, matrix_df(scores, q_tokens, k_tokens, row_name=L["query"], col_name=L["key"])


def _square_height(n: int) -> int:
    return int(min(900, max(380, 110 + 26 * n)))


WINDOW_COLOUR = "#009E73"  # Okabe–Ito bluish green: a real, earlier key outside the sliding window


def window_cells(tq: int, tk: int, window: int) -> np.ndarray:
    """(Tq, Tk) True where key j is earlier than the ``window`` keys up to query i (j <= i − window);
    the queries are the last Tq positions."""
    i = np.arange(tq)[:, None] + (tk - tq)
    return np.arange(tk)[None, :] <= i - window if window else np.zeros((tq, tk), dtype=bool)


def mask_categories(allowed: np.ndarray, n_real_keys: int, causal: bool, window: int = 0) -> np.ndarray:
    """0 allowed, 1 blocked by padding, 2 blocked by causality, 3 both, 4 (a sliding window of
    ``window`` keys only) a real, earlier key outside the window (q × k ints)."""
    tq, tk = allowed.shape
    pad = np.zeros((tq, tk), dtype=bool)
    pad[:, n_real_keys:] = True
    cau = np.triu(np.ones((tq, tk), dtype=bool), k=1) if causal else np.zeros((tq, tk), dtype=bool)
    cat = pad.astype(int) + 2 * cau.astype(int)
    cat[(cat == 0) & window_cells(tq, tk, window)] = 4
    blocked = ~allowed.astype(bool)
    cat[~blocked] = 0
    cat[blocked & (cat == 0)] = 1  # blocked for another reason (e.g. left padding): call it padding
    return cat


def _mask_scale(n: int = 4) -> list:
    """A discrete colour scale for the first ``n`` mask categories (0..3, and 4: the window)."""
    colours = list(style.MASK_COLOURS) + [WINDOW_COLOUR]
    stops = []
    for i in range(n):
        stops += [[i / n, colours[i]], [(i + 1) / n, colours[i]]]
    return stops


def mask_figure(allowed: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], *,
                n_real_keys: int, causal: bool, title: str = "masks", window: int = 0,
                labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Padding mask, causal mask and their combination (what the model used), side by side; the
    table names each cell's category. A block without a causal mask (encoder self-attention,
    cross-attention) has the padding mask only: one panel, what the model used, and its legend
    names padding only. A sliding-window layer (``window`` keys, causal blocks only) adds the
    window's panel: the band of the ``window`` keys up to each query; earlier real keys are blocked.

    Colours (Okabe–Ito): light = allowed, orange = padding, blue = causal, vermillion = both,
    bluish green = outside the window. Panel titles are short and on two lines, so that three
    panels side by side keep them apart even on a phone.
    """
    L = _lab(labels)
    tq, tk = allowed.shape
    window = int(window) if causal else 0
    pad_only = np.where(np.arange(tk)[None, :] >= n_real_keys, 1, 0) * np.ones((tq, 1), dtype=int)
    cau_only = np.where(np.triu(np.ones((tq, tk), dtype=bool), k=1), 2, 0) if causal else np.zeros((tq, tk), int)
    win_only = np.where(window_cells(tq, tk, window), 4, 0)
    combined = mask_categories(allowed, n_real_keys, causal, window)
    names = [L["mask_padding"], L["mask_causal"], L["mask_combined"]] if causal else [L["mask_padding_only"]]
    panels = (pad_only, cau_only, combined) if causal else (combined,)
    if window:
        names.insert(2, L["mask_window"].format(w=window))
        panels = (pad_only, cau_only, win_only, combined)
    kinds = ("allowed", "padding", "causal", "both") if causal else ("allowed", "padding")
    kinds += ("outside_window",) if window else ()
    cat_names = style.strings([style.esc(L[k]) for k in ("allowed", "padding", "causal", "both", "outside_window")])
    n_cats = 5 if window else 4
    g = Grid(cols=len(panels), titles=[style.esc(n).replace("\n", "<br>") for n in names], hspace=0.06,
             title_size=12)
    ql = style.strings(style.token_labels(q_tokens))
    kl = style.strings(style.token_labels(k_tokens))
    traces = []
    small = max(tq, tk) <= style.CELL_TEXT_MAX
    lean = tq * tk > style.HOVER_CELLS_MAX  # big: int8 categories, the legend in the hover
    legend = " · ".join(f"{i} {n}" for i, n in enumerate(cat_names) if i < n_cats and (causal or i < 2))
    last = len(panels) - 1
    for c, cat in enumerate(panels):
        if lean:
            custom = None
            hover = (f"{style.esc(L['query'])} %{{y}}<br>{style.esc(L['key'])} %{{x}}<br>"
                     f"%{{z}} ({legend})<extra></extra>")
        else:
            custom = np.stack(np.broadcast_arrays(ql[:, None], kl[None, :], cat_names[cat]), axis=-1)
            hover = (f"{style.esc(L['query'])} %{{y}} <b>%{{customdata[0]}}</b><br>"
                     f"{style.esc(L['key'])} %{{x}} <b>%{{customdata[1]}}</b><br>"
                     "%{customdata[2]}<extra></extra>")
        # a zero-width space after the mark: plotly sizes cell text at 0.65 em a character, and ✓ and × are
        # wider than that (0.7-0.8 em); counted as two characters they fit their cells on any screen
        cells = np.where(cat == 0, "✓\u200b", "×\u200b") if small else None
        traces.append(style.trace(
            "heatmap", z=cat.astype(np.int8), x=np.arange(tk), y=np.arange(tq), zmin=-0.5, zmax=n_cats - 0.5,
            colorscale=_mask_scale(n_cats), showscale=False, xgap=0 if lean else 1, ygap=0 if lean else 1,
            text=cells, texttemplate="%{text}" if small else None,
            customdata=custom, name=style.esc(names[c].replace("\n", " ")), xaxis=g.x(0, c), yaxis=g.y(0, c),
            hovertemplate=hover,
        ))
        x, y = token_axes(rows=q_tokens, cols=k_tokens, n_rows=tq, n_cols=tk,
                          row_title=L["query"] if c == 0 else "", col_title=L["key"])
        y["showticklabels"] = c == 0  # the same rows in every panel: label them once
        g.axes(0, c, x=x, y=y)
    # the colours' meaning as a legend under the panels (it wraps on a narrow screen; a colour bar would
    # take a third of a phone's width)
    colours = list(style.MASK_COLOURS) + [WINDOW_COLOUR]
    for i, name in enumerate(cat_names):
        if ("allowed", "padding", "causal", "both", "outside_window")[i] not in kinds:
            continue  # only the masks this block has
        traces.append(style.trace("scatter", x=[None], y=[None], mode="markers", name=str(name), hoverinfo="skip",
                                  marker=dict(symbol="square", size=12, color=colours[i],
                                              line=dict(color="#9e9e9e", width=1)), xaxis=g.x(0, last), yaxis=g.y(0, last)))
    fig = g.figure(traces, title=title, height=_square_height(tq) + 20, plot_bgcolor="white", showlegend=True,
                   legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left"),
                   margin=dict(b=140))
    words = np.array([L[k] for k in ("allowed", "cat_padding", "cat_causal", "cat_both", "cat_window")], dtype=object)
    return fig, matrix_df(words[combined], q_tokens, k_tokens, row_name=L["query"], col_name=L["key"])


def pattern_figure(pattern: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], *,
                   blocked: np.ndarray | None = None, title: str = "softmax weights",
                   labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Softmax weights on the sequential scale, value on hover; the row sums (= 1) on the right
    (and as the table's last column)."""
    L = _lab(labels)
    tq, tk = pattern.shape
    g = Grid(cols=2, col_widths=[0.9, 0.1], hspace=0.02, titles=["", style.esc(L["row_sum"])])
    traces = heatmap(pattern, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                     value_name=L["weight"], blocked=blocked, blocked_text=f"{L['masked']} (0)",
                     name=L["weight"], xaxis=g.x(0, 0), yaxis=g.y(0, 0))
    sums = pattern.sum(axis=1, keepdims=True)
    traces += heatmap(sums, rows=q_tokens, cols=[L["row_sum"]], row_name=L["query"], col_name="",
                      value_name=L["row_sum"], name=L["row_sum"], cell_text=True, xaxis=g.x(0, 1),
                      yaxis=g.y(0, 1))
    x, y = token_axes(rows=q_tokens, cols=k_tokens, n_rows=tq, n_cols=tk, row_title=L["query"],
                      col_title=L["key"])
    g.axes(0, 0, x=x, y=y)
    g.axes(0, 1, x=dict(showticklabels=False, range=[-0.5, 0.5], showgrid=False, zeroline=False),
           y={**y, "showticklabels": False, "title": {"text": ""}, "matches": "y"})
    fig = g.figure(traces, title=title, height=_square_height(tq), coloraxis=style.weights_axis(L["weight"]))
    df = matrix_df(pattern, q_tokens, k_tokens, row_name=L["query"], col_name=L["key"])
    df[L["row_sum"]] = sums[:, 0]
    return fig, df


# --- output ----------------------------------------------------------------------------------

def z_figure(pattern: np.ndarray, v: np.ndarray, z: np.ndarray, q_tokens: Sequence[str],
             k_tokens: Sequence[str], *, blocked: np.ndarray | None = None,
             title: str = "z = weights · V", labels: dict | None = None,
             names: Sequence[str] | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """weights (q × k) · V (k × d_head) = z (q × d_head), three panels in reading order."""
    L = _lab(labels)
    names = list(names or (L["weights"], "V", L["z"]))
    g = Grid(cols=3, titles=_titles(names), hspace=0.09, col_widths=[0.36, 0.32, 0.32])
    traces = heatmap(pattern, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                     value_name=L["weight"], blocked=blocked, blocked_text=f"{L['masked']} (0)",
                     coloraxis="coloraxis2", name=names[0], cell_text=False, xaxis=g.x(0, 0), yaxis=g.y(0, 0))
    x, y = token_axes(rows=q_tokens, cols=k_tokens, n_rows=pattern.shape[0], n_cols=pattern.shape[1],
                      row_title=L["query"], col_title=L["key"])
    g.axes(0, 0, x=x, y=y)
    for c, (m, toks, rn) in ((1, (v, k_tokens, L["key"])), (2, (z, q_tokens, L["query"]))):
        traces += heatmap(m, rows=toks, row_name=rn, col_name=L["dim"], value_name=names[c],
                          name=names[c], cell_text=False, xaxis=g.x(0, c), yaxis=g.y(0, c))
        x, y = token_axes(rows=toks, cols=None, n_rows=m.shape[0], n_cols=m.shape[1], col_title=L["dim"])
        g.axes(0, c, x=x, y=y)
    wa = style.weights_axis(L["weight"])
    wa["colorbar"].update(x=-0.12, xanchor="right")
    fig = g.figure(traces, title=title, height=max(380, 80 + 20 * pattern.shape[0]),
                   coloraxis=style.scores_axis(style.symmetric_range(v, z)), coloraxis2=wa,
                   margin=dict(l=120))
    return fig, matrix_df(z, q_tokens, None, row_name=L["query"], col_name=L["dim"])


def head_output_figure(contribution: np.ndarray, total: np.ndarray | None, q_tokens: Sequence[str],
                       *, title: str = "after W_O", labels: dict | None = None,
                       names: Sequence[str] | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """This head's contribution z_h · W_O[h] (q × d_model), next to the sum over all heads."""
    L = _lab(labels)
    names = list(names or (L["this_head"], L["all_heads"]))
    mats = [contribution] if total is None else [contribution, total]
    g = Grid(cols=len(mats), titles=_titles(names[: len(mats)]), hspace=0.06)
    traces = []
    for c, m in enumerate(mats):
        traces += heatmap(m, rows=q_tokens, row_name=L["query"], col_name=L["d_model"],
                          value_name=names[c], name=names[c], cell_text=False, xaxis=g.x(0, c), yaxis=g.y(0, c))
        x, y = token_axes(rows=q_tokens, cols=None, n_rows=m.shape[0], n_cols=m.shape[1],
                          col_title=L["d_model"])
        y["showticklabels"] = c == 0
        g.axes(0, c, x=x, y=y)
    fig = g.figure(traces, title=title, height=max(360, 80 + 20 * contribution.shape[0]),
                   coloraxis=style.scores_axis(style.symmetric_range(*mats)))
    return fig, matrix_df(contribution, q_tokens, None, row_name=L["query"], col_name=L["d_model"])


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
                title: str = "one cell", labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """q_i, k_j and q_i⊙k_j per dimension (top); the whole row's scaled scores and softmax
    weights with key j highlighted (bottom); every number of the chain in the subtitle."""
    L = _lab(labels)
    nums = cell_numbers(q, k, scores_row, allowed_row, pattern_row, j)
    dims = list(range(q.shape[-1]))
    k_tok = k_tokens[j]
    chain = (f"Σ q⊙k = {style.fmt(nums['dot'])} → ÷√{nums['d_head']} = {style.fmt(nums['scaled'])} → "
             f"{L['allowed'] if nums['allowed'] else L['masked'] + ' (−∞)'} → "
             f"{L['softmax']} → {L['weight']} = {style.fmt(nums['weight'], 4)}")
    g = Grid(rows=2, cols=1, vspace=0.2, titles=[
        style.esc(f"q[{i}] '{style.visible(q_token)}' · k[{j}] '{style.visible(k_tok)}' — {L['dim']}"),
        style.esc(f"{L['query']} {i}: {L['score']} ÷√d_k, {L['softmax']}"),
    ])
    traces = []
    for name, vals, colour in (("q", q, style.LINE_COLOURS[0]), ("k", k, style.LINE_COLOURS[1]),
                               ("q⊙k", nums["product"], style.LINE_COLOURS[2])):
        traces.append(style.trace("bar", x=dims, y=vals, name=name, marker=dict(color=colour), xaxis="x",
                                  yaxis="y", hovertemplate=f"{name}[%{{x}}] = %{{y:.4f}}<extra></extra>"))
    kl = style.token_labels(k_tokens)
    nk = len(k_tokens)
    shown = np.where(allowed_row, scores_row, np.nan)
    edge = ["#000000" if c == j else "rgba(0,0,0,0)" for c in range(nk)]
    traces.append(style.trace("bar", x=list(range(nk)), y=shown, name=f"{L['score']} ÷√d_k", xaxis="x2", yaxis="y2",
                         marker=dict(color=style.LINE_COLOURS[4], line=dict(color=edge, width=2)),
                         customdata=kl, hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    traces.append(style.trace("scatter", x=list(range(nk)), y=nums["softmax_row"], name=L["weight"], xaxis="x2",
                             yaxis="y3", mode="lines+markers", line=dict(color=style.LINE_COLOURS[3]),
                             marker=dict(size=[12 if c == j else 6 for c in range(nk)]),
                             customdata=kl, hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    blocked_keys = [c for c in range(nk) if not allowed_row[c]]
    if blocked_keys:
        traces.append(style.trace("scatter", x=blocked_keys, y=[0] * len(blocked_keys), mode="markers", xaxis="x2",
                                 yaxis="y2", name=style.esc(L["masked"]), hoverinfo="skip",
                                 marker=dict(symbol="x", color=style.MASKED_MARK, size=9)))
    g.axes(0, 0, x=dict(title=dict(text=style.esc(L["dim"]))))
    g.axes(1, 0, x=style.token_axis(k_tokens, L["key"]), y=dict(title=dict(text=style.esc(L["score"]))))
    fig = g.figure(traces, title=title, height=620, barmode="group", plot_bgcolor="white",
                   legend=dict(orientation="h", y=-0.15),
                   yaxis3=dict(overlaying="y2", side="right", range=[0, 1.05], showgrid=False, tickmode="linear",
                               tick0=0, dtick=0.25,
                               anchor="x2", title=dict(text=style.esc(L["weight"]))),
                   subtitle=style.esc(chain), margin=dict(t=100))
    df = pd.DataFrame({L["dim"]: dims, "q": q, "k": k, "q*k": nums["product"]}).set_index(L["dim"])
    return fig, df


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


OVERVIEW_CELLS = 64  # a thumbnail has at most this many cells a side (block means beyond)


def _thumbnail(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, z) of one small-multiple: the pattern itself, or for long sentences its block means
    (float32) at the blocks' centre positions, so hover positions stay in token units."""
    q, k = p.shape
    s = int(np.ceil(max(q, k) / OVERVIEW_CELLS))
    if s <= 1:
        return np.arange(k), np.arange(q), p
    qb, kb = -(-q // s), -(-k // s)
    padded = np.full((qb * s, kb * s), np.nan)
    padded[:q, :k] = p
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN block stays NaN
        z = np.nanmean(padded.reshape(qb, s, kb, s), axis=(1, 3))
    centre = (s - 1) / 2
    return (np.arange(kb) * s + centre).astype(np.float32), (np.arange(qb) * s + centre).astype(np.float32), \
        z.astype(np.float32)


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
            rows.append({L["layer"]: li, L["head"]: h, L["entropy"]: ent, L["mean_distance"]: dist})
            titles.append(f"L{li} H{h}<br>H={ent:.2f} d={dist:.1f}")
    height = int(min(2400, 140 + 180 * len(layers)))
    g = Grid(rows=len(layers), cols=n_heads, titles=titles,
             hspace=min(0.04, 0.5 / max(n_heads, 1)), vspace=min(0.3, 48 / height))
    traces = []
    for r, li in enumerate(layers):
        for h in range(n_heads):
            p = patterns[li, h]
            x, y, z = _thumbnail(p)
            traces.append(style.trace("heatmap", z=z, x=x, y=y, coloraxis="coloraxis", name=f"L{li} H{h}",
                                     xaxis=g.x(r, h), yaxis=g.y(r, h),
                                     hovertemplate=(f"L{li} H{h}<br>{style.esc(L['query'])} %{{y}}, "
                                                    f"{style.esc(L['key'])} %{{x}}: %{{z:.3f}}<extra></extra>")))
            g.axes(r, h, x=dict(showticklabels=False, range=[-0.5, p.shape[1] - 0.5], showgrid=False),
                   y=dict(showticklabels=False, range=[p.shape[0] - 0.5, -0.5], showgrid=False))
    shapes = []
    if selected is not None and selected[0] in layers and 0 <= selected[1] < n_heads:
        r, c = layers.index(selected[0]), selected[1]
        shapes.append(dict(type="rect", xref=f"{g.x(r, c)} domain", yref=f"{g.y(r, c)} domain",
                           x0=-0.03, x1=1.03, y0=-0.03, y1=1.03, line=dict(color="#D55E00", width=3)))
    anns = g.title_annotations(size=10)
    g.titles = []
    fig = g.figure(traces, title=title, height=height, shapes=shapes,
                   annotations=anns, coloraxis=style.weights_axis(L["weight"]), plot_bgcolor="white")
    df = pd.DataFrame(rows)
    return fig, df
