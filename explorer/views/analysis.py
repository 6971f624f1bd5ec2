"""Views beyond one head (issue 26): the logit lens, attention rollout, value-weighted attention,
a joint map of one head's queries and keys, and head roles.

The computations are small numpy functions (``rollout``, ``value_norms``, ``qk_projection``,
``head_role_scores``) so that tests and lessons can call them; the figures take their results and
token lists and return ``(figure, table)`` like every view: the plotly figure and its numbers as a
long pandas DataFrame, one row per cell. Column names are the figure words ``labels`` gives (in
English: the issue's contract, e.g. ``layer, position, token_id, token, p``). Tokens are shown
visible and escaped (style.token_label); tables keep them as text (the exporter makes a cell a
spreadsheet would evaluate inert).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .matrix import Grid, heatmap, token_axes

_lab = style.with_labels

ROLES = ("previous_token", "first_token", "self", "induction")
# each role's table column and its name in a figure (figure words: i18n "fig.col_*", "fig.role_*")
ROLE_COLUMN = {"previous_token": "col_previous_token", "first_token": "col_first_token", "self": "col_self",
               "induction": "col_induction"}
ROLE_NAME = {"previous_token": "role_previous_token", "first_token": "role_first_token", "self": "role_self",
             "induction": "role_induction"}


# --- the logit lens ------------------------------------------------------------------------------

def lens_figure(ids: np.ndarray, probs: np.ndarray, token_text: dict[int, str], tokens: Sequence[str], *,
                title: str = "logit lens", labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Layers (rows, the first at the bottom) × positions (columns): in each cell the top token of
    softmax(readout(stream after that layer)) at that position, coloured by its probability.
    ``ids``, ``probs``: (layers, T); ``tokens``: the T input tokens (the columns)."""
    L = _lab(labels)
    n_layers, T = ids.shape
    words = [[token_text.get(int(i), str(int(i))) for i in row] for row in ids]
    shown = style.strings([[style.token_label(w) for w in row] for row in words])
    inputs = style.strings(style.token_labels(tokens[:T]))
    p = np.asarray(probs, dtype=np.float32)
    custom = np.stack(np.broadcast_arrays(inputs[None, :], shown), axis=-1)  # (layers, T, 2)
    hover = (f"{style.esc(L['layer'])} %{{y}} · {style.esc(L['position'])} %{{x}} <b>%{{customdata[0]}}</b><br>"
             f"→ <b>%{{customdata[1]}}</b> · p = %{{z:.3f}}<extra></extra>")
    trace = style.trace("heatmap", z=p, x=np.arange(T), y=np.arange(n_layers), coloraxis="coloraxis",
                        customdata=custom, text=shown, texttemplate="%{text}", hovertemplate=hover,
                        xgap=1, ygap=1, name="p")
    g = Grid()
    x, _ = token_axes(rows=None, cols=list(tokens[:T]), n_rows=n_layers, n_cols=T, col_title=L["position"])
    g.axes(0, 0, x=x, y=dict(title=dict(text=style.esc(L["layer"])), range=[-0.5, n_layers - 0.5],
                             dtick=1 if n_layers <= 16 else 2, showgrid=False, zeroline=False))
    fig = g.figure([trace], title=title, height=int(min(1400, max(360, 120 + 24 * n_layers))),
                   coloraxis=style.weights_axis("p"), plot_bgcolor="white")
    layer, pos = np.meshgrid(np.arange(n_layers), np.arange(T), indexing="ij")
    df = pd.DataFrame({L["layer"]: layer.ravel(), L["position"]: pos.ravel(),
                       L["col_token_id"]: ids.astype(np.int64).ravel(),
                       L["token"]: [style.visible(w) for row in words for w in row],
                       L["col_p"]: p.astype(np.float64).ravel()})
    return fig, df


# --- rollout -------------------------------------------------------------------------------------

def rollout(patterns: np.ndarray, n_real: int) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020) over a stack: ``patterns`` (layers, heads, T, T);
    for each layer the mean over heads A, then Ã = 0.5·A + 0.5·I with rows renormalised, and
    R = Ã_L ⋯ Ã_1, on the first ``n_real`` (real) tokens only. Returns R (n_real, n_real)."""
    n = int(n_real)
    R = np.eye(n)
    for a in np.asarray(patterns, dtype=np.float64)[:, :, :n, :n]:
        a = 0.5 * a.mean(0) + 0.5 * np.eye(n)
        a /= a.sum(-1, keepdims=True)
        R = a @ R
    return R


def _pairs_df(L: dict, cols: dict[str, np.ndarray]) -> pd.DataFrame:
    n_q, n_k = next(iter(cols.values())).shape
    q, k = np.meshgrid(np.arange(n_q), np.arange(n_k), indexing="ij")
    return pd.DataFrame({L["query"]: q.ravel(), L["key"]: k.ravel(),
                         **{name: np.asarray(v, dtype=np.float64).ravel() for name, v in cols.items()}})


def rollout_figure(R: np.ndarray, tokens: Sequence[str], *, title: str = "rollout",
                   labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """R as a query × key heatmap (how much of each input token reaches each position at the top,
    under rollout's assumptions); the table: query, key, weight."""
    L = _lab(labels)
    n = R.shape[0]
    toks = list(tokens[:n])
    g = Grid()
    traces = heatmap(R, rows=toks, cols=toks, row_name=L["query"], col_name=L["key"], value_name=L["weight"],
                     name=L["weight"])
    x, y = token_axes(rows=toks, cols=toks, n_rows=n, n_cols=n, row_title=L["query"], col_title=L["key"])
    g.axes(0, 0, x=x, y=y)
    fig = g.figure(traces, title=title, height=int(min(900, max(380, 110 + 26 * n))),
                   coloraxis=style.weights_axis(L["weight"], cmax=float(max(R.max(initial=0.0), 1e-9))))
    return fig, _pairs_df(L, {L["weight"]: R})


# --- value-weighted attention --------------------------------------------------------------------

def value_norms(pattern: np.ndarray, v: np.ndarray, w_o: np.ndarray) -> np.ndarray:
    """‖α_ij · v_j W_O[h]‖ for every query i and key j (Kobayashi et al. 2020): ``pattern`` (q, k)
    the head's weights, ``v`` (k, d_head) its values, ``w_o`` (d_head, d_model) its slice of W_O.
    α ≥ 0, so this is α_ij · ‖v_j W_O[h]‖."""
    moved = np.linalg.norm(np.asarray(v, dtype=np.float64) @ np.asarray(w_o, dtype=np.float64), axis=-1)  # (k,)
    return np.asarray(pattern, dtype=np.float64) * moved[None, :]


def value_norms_figure(weight: np.ndarray, norms: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str],
                       *, blocked: np.ndarray | None = None, lengths: np.ndarray | None = None,
                       title: str = "value norms", labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The weights α beside ‖α v W_O‖ (each on its own scale: the middle panel is what the head
    moves) and, given ``lengths``, ‖v_j W_O‖ of each key as bars (how much a key could move with all
    the weight); the table: query, key, weight, norm."""
    L = _lab(labels)
    n_q, n_k = weight.shape
    bars = lengths is not None
    g = Grid(cols=3 if bars else 2, titles=[style.esc("α"), style.esc("‖α·v·W_O‖")] + ([style.esc("‖v·W_O‖")] if bars else []),
             hspace=0.1, col_widths=[1, 1, 0.8] if bars else None)
    traces = heatmap(weight, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                     value_name=L["weight"], blocked=blocked, blocked_text=L["masked"], name=L["weight"],
                     coloraxis="coloraxis", xaxis=g.x(0, 0), yaxis=g.y(0, 0))
    traces += heatmap(norms, rows=q_tokens, cols=k_tokens, row_name=L["query"], col_name=L["key"],
                      value_name=L["col_norm"], blocked=blocked, blocked_text=L["masked"], name=L["col_norm"],
                      coloraxis="coloraxis2", xaxis=g.x(0, 1), yaxis=g.y(0, 1))
    for c in range(2):
        x, y = token_axes(rows=q_tokens, cols=k_tokens, n_rows=n_q, n_cols=n_k,
                          row_title=L["query"] if c == 0 else "", col_title=L["key"])
        g.axes(0, c, x=x, y=y)
    if bars:
        traces.append(style.trace("bar", x=np.arange(n_k), y=np.asarray(lengths, dtype=np.float32),
                                  marker=dict(color=style.OKABE_ITO[0]), name=style.esc(L["col_norm"]),
                                  customdata=style.strings(style.token_labels(k_tokens)), showlegend=False,
                                  hovertemplate=(f"{style.esc(L['key'])} %{{x}} <b>%{{customdata}}</b><br>"
                                                 "‖v·W_O‖ = %{y:.3f}<extra></extra>"),
                                  xaxis=g.x(0, 2), yaxis=g.y(0, 2)))
        x, _ = token_axes(rows=None, cols=k_tokens, n_rows=1, n_cols=n_k, col_title=L["key"])
        g.axes(0, 2, x=x, y=dict(rangemode="tozero", showgrid=True, gridcolor="#eeeeee", zeroline=False))
    a1 = style.weights_axis(L["weight"])
    a1["colorbar"] = {**a1["colorbar"], "x": g.x_domains[0][1] + 0.005, "len": 0.9}
    finite = np.where(np.isfinite(norms), norms, 0.0)
    a2 = style.weights_axis(L["col_norm"], cmax=float(max(finite.max(initial=0.0), 1e-9)))
    if bars:
        a2["colorbar"] = {**a2["colorbar"], "x": g.x_domains[1][1] + 0.005, "len": 0.9}
    fig = g.figure(traces, title=title, height=int(min(900, max(380, 110 + 26 * n_q))), coloraxis=a1,
                   coloraxis2=a2)
    return fig, _pairs_df(L, {L["weight"]: weight, L["col_norm"]: norms})


# --- queries and keys in one map ------------------------------------------------------------------

def qk_projection(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queries (n_q, d) and keys (n_k, d) in one 2-D map: keys translated so that their mean is the
    queries' mean (AttentionViz: q·k changes only by a constant per query, so each query's softmax
    is the same), then PCA of both together (numpy SVD). Returns (query xy, key xy, explained
    variance ratio of the two axes)."""
    q = np.asarray(queries, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    k = k - k.mean(0) + q.mean(0)
    x = np.vstack([q, k])
    x = x - x.mean(0)
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    comp = vt[:2]
    sign = np.sign(comp[np.arange(comp.shape[0]), np.abs(comp).argmax(1)])  # a fixed orientation
    comp = comp * sign[:, None]
    xy = x @ comp.T
    if xy.shape[1] < 2:
        xy = np.hstack([xy, np.zeros((xy.shape[0], 2 - xy.shape[1]))])
    var = (s ** 2) / max(float((s ** 2).sum()), 1e-30)
    ratio = np.zeros(2)
    ratio[: min(2, var.size)] = var[:2]
    return xy[: len(q)], xy[len(q):], ratio


def qk_figure(q_xy: np.ndarray, k_xy: np.ndarray, rows: Sequence[tuple[int, int, str]],
              k_rows: Sequence[tuple[int, int, str]], lines: Sequence[tuple[int, int, float]], *,
              ratio: Sequence[float] = (0.0, 0.0), title: str = "queries and keys",
              labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Queries (circles) and keys (diamonds) of one head, coloured by position; ``rows`` and
    ``k_rows``: (sentence, position, token) of each point; ``lines``: (query point, key point,
    weight) drawn as segments, the strongest pairs. The table: kind, sentence, position, token, x, y."""
    L = _lab(labels)
    traces = []
    if lines:
        xs, ys = [], []
        for qi, ki, _ in lines:
            xs += [float(q_xy[qi, 0]), float(k_xy[ki, 0]), None]
            ys += [float(q_xy[qi, 1]), float(k_xy[ki, 1]), None]
        traces.append(style.trace("scatter", x=xs, y=ys, mode="lines", hoverinfo="skip",
                                  line=dict(color="rgba(120,120,120,0.45)", width=1),
                                  name=style.esc(L["qk_lines"])))
    top = max([r[1] for r in list(rows) + list(k_rows)] + [1])
    for kind, xy, rs, symbol in (("query", q_xy, rows, "circle"), ("key", k_xy, k_rows, "diamond")):
        if not len(rs):
            continue
        custom = style.strings([[str(s), str(p), style.token_label(t)] for s, p, t in rs])
        traces.append(style.trace(
            "scatter", x=xy[:, 0].astype(np.float32), y=xy[:, 1].astype(np.float32), mode="markers",
            name=style.esc(L[kind]), customdata=custom,
            marker=dict(symbol=symbol, size=9 if kind == "query" else 10, color=[r[1] for r in rs],
                        coloraxis="coloraxis", line=dict(width=1, color="#333" if kind == "key" else "white")),
            hovertemplate=(f"<b>{style.esc(L[kind])}</b> · {style.esc(L['sentence'])} %{{customdata[0]}} · "
                           f"{style.esc(L['position'])} %{{customdata[1]}}<br><b>%{{customdata[2]}}</b>"
                           "<extra></extra>")))
    axis = dict(zeroline=False, showgrid=True, gridcolor="#eeeeee")
    fig = style.make_figure(traces, dict(
        xaxis={**axis, "title": dict(text=f"PC1 ({100 * ratio[0]:.0f}%)")},
        yaxis={**axis, "title": dict(text=f"PC2 ({100 * ratio[1]:.0f}%)"), "scaleanchor": "x", "scaleratio": 1},
        coloraxis=dict(colorscale=style.fastpath.colour_scale(style.WEIGHTS), cmin=0, cmax=top,
                       colorbar=dict(title=dict(text=style.esc(L["position"])), thickness=12)),
        plot_bgcolor="white", legend=dict(orientation="h", y=-0.12)), title=title, height=560)
    out = []
    for kind, xy, rs in (("query", q_xy, rows), ("key", k_xy, k_rows)):
        for (s, p, t), (x, y) in zip(rs, xy):
            out.append({L["col_kind"]: L[kind], L["sentence"]: int(s), L["position"]: int(p),
                        L["token"]: style.visible(t), L["col_x"]: float(x), L["col_y"]: float(y)})
    cols = [L["col_kind"], L["sentence"], L["position"], L["token"], L["col_x"], L["col_y"]]
    return fig, pd.DataFrame(out, columns=cols)


# --- head roles -----------------------------------------------------------------------------------

def head_role_scores(patterns: np.ndarray, n_real: int) -> dict[str, np.ndarray]:
    """``previous_token``, ``first_token`` and ``self`` of every layer and head, each (layers, heads):
    the mean over the real queries q ≥ 1 of A[q, q−1], A[q, 0] and A[q, q] (query 0 is left out of
    all three: in a causal model it can only read itself). ``patterns`` (layers, heads, T, T)."""
    n = int(n_real)
    p = np.asarray(patterns, dtype=np.float64)
    shape = p.shape[:2]
    if n < 2:
        return {r: np.full(shape, np.nan) for r in ROLES[:3]}
    q = np.arange(1, n)
    return {"previous_token": p[:, :, q, q - 1].mean(-1), "first_token": p[:, :, q, 0].mean(-1),
            "self": p[:, :, q, q].mean(-1)}


def strongest(scores: np.ndarray, k: int = 3) -> list[tuple[int, int, float]]:
    """The ``k`` heads with the highest score: (layer, head, score), NaN left out."""
    s = np.asarray(scores, dtype=np.float64)
    flat = np.where(np.isfinite(s), s, -np.inf).ravel()
    out = []
    for i in np.argsort(-flat, kind="stable")[:k]:
        if np.isfinite(flat[i]):
            layer, head = np.unravel_index(int(i), s.shape)
            out.append((int(layer), int(head), float(flat[i])))
    return out


def head_roles_figure(scores: dict[str, np.ndarray], role: str, *, title: str = "head roles",
                      subtitle: str | None = None, labels: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Layers × heads coloured by the chosen ``role`` (0..1), the strongest three heads outlined; the
    table has every role: layer, head, previous_token, first_token, self, induction (NaN where
    there is no score)."""
    L = _lab(labels)
    z = np.asarray(scores[role], dtype=np.float64)
    n_layers, n_heads = z.shape
    g = Grid()
    traces = heatmap(z, row_name=L["layer"], col_name=L["head"], value_name=L[ROLE_NAME[role]],
                     name=L[ROLE_NAME[role]], blocked=~np.isfinite(z), blocked_text="—",
                     cell_text=n_layers * n_heads <= 400)
    g.axes(0, 0, x=dict(title=dict(text=style.esc(L["head"])), range=[-0.5, n_heads - 0.5], dtick=1,
                        showgrid=False, zeroline=False),
           y=dict(title=dict(text=style.esc(L["layer"])), range=[n_layers - 0.5, -0.5],
                  dtick=1 if n_layers <= 16 else 2, showgrid=False, zeroline=False))
    shapes = [dict(type="rect", x0=h - 0.5, x1=h + 0.5, y0=li - 0.5, y1=li + 0.5, line=dict(color="#D55E00", width=3))
              for li, h, _ in strongest(z)]
    fig = g.figure(traces, title=title, subtitle=subtitle, shapes=shapes,
                   height=int(min(1200, max(360, 130 + 26 * n_layers))),
                   coloraxis=style.weights_axis(L[ROLE_NAME[role]]))
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    df = pd.DataFrame({L["layer"]: layer.ravel(), L["head"]: head.ravel(),
                       **{L[ROLE_COLUMN[r]]: np.asarray(scores.get(r, np.full(z.shape, np.nan)), dtype=np.float64).ravel()
                          for r in ROLES}})
    return fig, df
