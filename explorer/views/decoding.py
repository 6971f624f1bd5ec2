"""The Decoding view: one sentence written token by token with a key/value cache, as one plotly figure
whose animation frames (one per step) play and scrub in the browser, with no round trip to the server.

    fig, df = timeline_figure(tr, layer=1, head=0, step=3, title="...", labels=..., words=...)

At step t (the decoder runs on column q = tr.query[t]):
    - the self-attention weights, one row per query so far: row q is the new one (outlined), over the
      keys 0..q in the cache; rows not computed yet are hidden; the staircase is the causal edge
    - the K and V caches (d_head × column): column q, the one this step appended, is outlined
    - seed: the cross-attention row into the encoder's memory (all source positions, every step)
    - the top next tokens with their probabilities, the chosen one in vermillion
    - the text written so far and the token chosen now

The heatmaps are sent once; a frame changes only what moves (the covers and outlines, the tick
labels of positions written so far, the bars and the text), so a 40-step timeline stays small.
Hovering a hidden cell still shows its value (the cover is a shape above the heatmap).

Every token goes through ``style.token_label`` / ``style.esc``: nothing typed is ever markup.
Pure functions of arrays (a ``TraceData``): no Streamlit, no model.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .trace import TraceData

_lab = style.with_labels
NEW = "#D55E00"  # Okabe–Ito vermillion: the new row / column, the chosen token
OTHER = "#0072B2"  # Okabe–Ito blue: the other candidates
CUT = "#BBBBBB"  # sampling: a candidate top-k or top-p cut (it could not be drawn)
CAUSAL = "#56B4E9"  # the causal edge
NOT_YET = "#fbfbfb"  # covers what the step has not computed yet (opaque: no peeking ahead)
FRAME_MS = 700  # play: one step every 0.7 s
TEXT_WRAP = 40  # characters per line of the written-so-far box (decoder-only)

# panel geometry (paper coordinates)
LEFT = [0.0, 0.55]
RIGHT = [0.66, 1.0]
PATTERN_Y = [0.42, 0.86]  # up to 0.95 when there is no header line (decoder-only: the text is a box)
K_Y = [0.20, 0.30]
V_Y = [0.0, 0.10]
TOP_Y = [0.0, 0.30]
HEADER_Y = [0.90, 0.98]


def default_words() -> dict[str, str]:
    """The English words (the app passes the catalogue's, explorer/i18n.py "decoding.*")."""
    from explorer import i18n

    return {k.split(".", 1)[1]: v["en"] for k, v in i18n.WORDS.items() if k.startswith("decoding.")}


def _axis(domain, anchor: str, **kw) -> dict:
    return dict(domain=domain, anchor=anchor, showgrid=False, zeroline=False, **kw)


def _ticks(tokens: Sequence[str], upto: int | None) -> tuple[list[int], list[str]]:
    """Tick positions and labels; positions after ``upto`` (not written yet) get no label."""
    vals = style.tick_positions(len(tokens))
    return vals, [style.token_label(tokens[i]) if upto is None or i <= upto else "" for i in vals]


def _plain(tokens: Sequence[str]) -> str:
    """Tokens as one readable, escaped string (newlines and controls made visible)."""
    return style.esc("".join(style.plain_text(t) if t != "\n" else "⏎" for t in tokens))


def _wrap(text: str, width: int = TEXT_WRAP) -> list[str]:
    """Lines of at most ``width`` characters, broken after a space where there is one in the second
    half of the line; joined, they give ``text`` back exactly."""
    lines = []
    while len(text) > width:
        cut = text.rfind(" ", width // 2, width) + 1 or width
        lines.append(text[:cut])
        text = text[cut:]
    lines.append(text)
    return lines


def _header(tr: TraceData, t: int, W: dict) -> str:
    """The text written so far at step t and the token chosen now (escaped; the markup is ours)."""
    q = int(tr.query[t])
    chosen = style.token_label(tr.chosen_tokens[t])
    step = f"<b>{style.esc(W['step'])} {t} / {tr.n_steps - 1}</b>"
    if tr.kind == "encoder-decoder":
        written = _plain(tr.tokens[1: q + 1])  # column 0 is <s>
        source = _plain(tr.input_tokens[:-1] if tr.input_tokens and tr.input_tokens[-1] == "</s>" else tr.input_tokens)
        return (f"{step} · {style.esc(W['source'])}: “{source}” · {style.esc(W['written'])}: "
                f"“{written}” → <b>{chosen}</b> (p = {float(tr.chosen_probs[t]):.3f})")
    P = tr.n_prompt_rows + 1
    prompt = "".join(style.plain_text(x) if x != "\n" else "⏎" for x in tr.tokens[:P])
    written = "".join(style.plain_text(x) if x != "\n" else "⏎" for x in tr.tokens[P: q + 1])
    # wrap the plain text first, then escape each line (an escape must never be cut in two)
    lines = _wrap(prompt + written)
    cut = len(prompt)
    out, pos = [], 0
    for line in lines:
        a, b = line[: max(0, cut - pos)], line[max(0, cut - pos):]
        out.append((f"<span style='color:#6b6b6b'>{style.esc(a)}</span>" if a else "") + style.esc(b))
        pos += len(line)
    return (f"{step}<br>{style.esc(W['prompt_then_written'])}:<br>" + "<br>".join(out)
            + f"<br>→ <b>{chosen}</b> (p = {float(tr.chosen_probs[t]):.3f})")


def _shapes(tr: TraceData, t: int, n_keys: int, hs: int, S: int | None) -> list[dict]:
    """The covers (what is not computed yet at step t) and the outlines (what is new), over white
    backgrounds for the text and the bars (a frame replaces every shape, so these come too)."""
    q, T = int(tr.query[t]), len(tr.tokens)
    cover = dict(type="rect", fillcolor=NOT_YET, line=dict(width=0), layer="above")
    box = dict(type="rect", fillcolor="rgba(0,0,0,0)", line=dict(color=NEW, width=2.5), layer="above")
    white = dict(type="rect", fillcolor="white", line=dict(width=0), layer="below", x0=0, x1=1, y0=0, y1=1)
    out = [dict(white, xref="x5 domain", yref="y5 domain"), dict(white, xref="x6 domain", yref="y6 domain")]
    if q + 1 < T:  # rows after the new one
        out.append(dict(cover, xref="x", yref="y", x0=-0.5, x1=T - 0.5, y0=q + 0.5, y1=T - 0.5))
    out.append(dict(box, xref="x", yref="y", x0=-0.5, x1=q + 0.5, y0=q - 0.5, y1=q + 0.5))
    for axis in ("2", "3"):  # the K and V caches: columns after q do not exist yet
        if q + 1 < n_keys:
            out.append(dict(cover, xref=f"x{axis}", yref=f"y{axis}", x0=q + 0.5, x1=n_keys - 0.5, y0=-0.5,
                            y1=hs - 0.5))
        out.append(dict(box, xref=f"x{axis}", yref=f"y{axis}", x0=q - 0.5, x1=q + 0.5, y0=-0.5, y1=hs - 0.5))
    if S is not None:
        if q + 1 < T:
            out.append(dict(cover, xref="x4", yref="y4", x0=-0.5, x1=S - 0.5, y0=q + 0.5, y1=T - 0.5))
        out.append(dict(box, xref="x4", yref="y4", x0=-0.5, x1=S - 0.5, y0=q - 0.5, y1=q + 0.5))
    return out


def _cut(tr: TraceData, t: int, W: dict | None) -> list[str]:
    """Per candidate of step t: "" or the words of the sampling rule that cut it (top-k, top-p)."""
    if tr.cut_by is None:
        return [""] * len(tr.top_ids[t])
    W = W or default_words()
    return [W[f"cut_{c}"] if c else "" for c in tr.cut_by[t]]


def _top_panel(tr: TraceData, W: dict) -> str:
    """The candidates panel's title: greedy, or the sampling settings (cut candidates in grey)."""
    if not tr.sampling:
        return W["top_panel"]
    temp, k, p, seed = tr.sampling
    return W["top_panel_sampled"].format(T=f"{temp:g}", k=k or "—", p=f"{p:g}" if p else "—", seed=seed)


def _bars(tr: TraceData, t: int, W: dict | None = None) -> dict:
    probs = tr.top_probs[t].astype(float)
    chosen = int(tr.chosen_ids[t])
    cut = _cut(tr, t, W)
    labels = [f"{style.token_label(tok)}  {p:.1%}" + (f"  ✂ {style.esc(c)}" if c else "")
              for tok, p, c in zip(tr.top_tokens[t], probs, cut)]
    colours = [NEW if int(i) == chosen else CUT if c else OTHER for i, c in zip(tr.top_ids[t], cut)]
    return dict(x=probs, text=labels, marker=dict(color=colours), customdata=tr.top_ids[t].astype(np.int32))


def _frame_layout(tr: TraceData, t: int, n_keys: int, hs: int, S: int | None) -> dict:
    q = int(tr.query[t])
    _, ticks = _ticks(tr.tokens, q)
    lay = dict(shapes=_shapes(tr, t, n_keys, hs, S), xaxis=dict(ticktext=ticks), yaxis=dict(ticktext=ticks))
    _, kticks = _ticks(tr.tokens[:n_keys], q)
    lay["xaxis3"] = dict(ticktext=kticks)
    if S is not None:
        lay["yaxis4"] = dict(ticktext=ticks)
    return lay


def timeline_figure(tr: TraceData, layer: int, head: int, step: int = 0, *, title: str = "decoding",
                    labels: dict | None = None, words: dict | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """The whole decoding of one sentence for one decoder layer and head: a figure whose frames
    are the steps (plotly's slider and play/pause switch them in the browser), showing ``step``
    first, and the timeline as a table (one row per step)."""
    L, W = _lab(labels), {**default_words(), **(words or {})}
    n = tr.n_steps
    step = min(max(int(step), 0), n - 1)
    T = len(tr.tokens)
    pattern = tr.self_pattern[layer, head]  # (T, T)
    g = head // tr.kv_group
    K, V = tr.k_cache[layer, g].T, tr.v_cache[layer, g].T  # (hs, T - 1)
    hs, n_keys = K.shape
    cross = tr.cross_pattern[layer, head] if tr.cross_pattern is not None else None  # (T, S)
    S = None if cross is None else cross.shape[1]
    q_name, k_name, w_name = (style.esc(L[k]) for k in ("query", "key", "weight"))

    traces = [
        style.trace("heatmap", z=pattern.astype(np.float32), x=np.arange(T), y=np.arange(T), coloraxis="coloraxis",
                    name=style.esc(W["self_short"]), hoverongaps=False, xaxis="x", yaxis="y",
                    hovertemplate=f"{q_name} %{{y}}<br>{k_name} %{{x}}<br>{w_name} = %{{z:.4f}}<extra></extra>"),
    ]
    # the causal edge: row i may see keys 0..i (a staircase between column i and i + 1)
    xs, ys = [-0.5], [-0.5]
    for i in range(T):
        xs += [i + 0.5, i + 0.5]
        ys += [i - 0.5, i + 0.5]
    traces.append(style.trace("scatter", x=np.asarray(xs, np.float32), y=np.asarray(ys, np.float32),
                              mode="lines", line=dict(color=CAUSAL, width=2, dash="dot"),
                              name=style.esc(W["causal_edge"]), hoverinfo="skip", showlegend=False,
                              xaxis="x", yaxis="y"))
    for axis, m, nm in (("2", K, "K"), ("3", V, "V")):
        traces.append(style.trace(
            "heatmap", z=m.astype(np.float32), x=np.arange(n_keys), y=np.arange(hs), coloraxis=f"coloraxis{axis}",
            name=nm, hoverongaps=False, xaxis=f"x{axis}", yaxis=f"y{axis}",
            hovertemplate=(f"{style.esc(L['position'])} %{{x}}<br>{style.esc(L['dim'])} %{{y}}<br>"
                           f"{nm} = %{{z:.3f}}<extra></extra>")))
    if cross is not None:
        traces.append(style.trace(
            "heatmap", z=cross.astype(np.float32), x=np.arange(S), y=np.arange(T), coloraxis="coloraxis",
            name=style.esc(W["cross_short"]), hoverongaps=False, xaxis="x4", yaxis="y4",
            customdata=style.strings(style.token_labels(tr.input_tokens[:S])),
            hovertemplate=(f"{q_name} %{{y}}<br>{k_name} %{{x}} <b>%{{customdata}}</b><br>{w_name} = "
                           f"%{{z:.4f}}<extra></extra>")))
    i_bars = len(traces)
    n_top = tr.top_ids.shape[1]
    traces.append(style.trace("bar", orientation="h", y=np.arange(n_top), textposition="auto", cliponaxis=False,
                              name=style.esc(W["top_short"]), xaxis="x5", yaxis="y5", insidetextanchor="start",
                              hovertemplate="%{text}<br>id %{customdata}<extra></extra>", **_bars(tr, step, W)))
    i_text = len(traces)
    pattern_y = PATTERN_Y if cross is not None else [PATTERN_Y[0], 0.95]
    header_y = HEADER_Y if cross is not None else pattern_y
    header_x = [0.0, 1.0] if cross is not None else RIGHT
    traces.append(style.trace("scatter", x=[0.0], y=[1.0], mode="text", text=[_header(tr, step, W)],
                              textposition="bottom right", hoverinfo="skip", showlegend=False,
                              name=style.esc(W["written"]), textfont=dict(size=13), xaxis="x6", yaxis="y6"))

    ticks_q, _ = _ticks(tr.tokens, None)
    lay = dict(
        xaxis=_axis(LEFT, "y", range=[-0.5, T - 0.5], tickmode="array", tickvals=ticks_q, tickangle=-50),
        yaxis=_axis(pattern_y, "x", range=[T - 0.5, -0.5], tickmode="array", tickvals=ticks_q,
                    title=dict(text=q_name)),
        xaxis2=_axis(LEFT, "y2", range=[-0.5, T - 0.5], matches="x", showticklabels=False),
        yaxis2=_axis(K_Y, "x2", range=[hs - 0.5, -0.5], title=dict(text=style.esc(L["dim"]))),
        xaxis3=_axis(LEFT, "y3", range=[-0.5, T - 0.5], matches="x", tickmode="array",
                     tickvals=style.tick_positions(n_keys), tickangle=-50),
        yaxis3=_axis(V_Y, "x3", range=[hs - 0.5, -0.5], title=dict(text=style.esc(L["dim"]))),
        xaxis5=_axis([RIGHT[0] + 0.04, RIGHT[1]], "y5", range=[0, 1], tickformat=".0%",
                     title=dict(text=style.esc(L["probability"]))),
        yaxis5=_axis(TOP_Y, "x5", range=[n_top - 0.5, -0.5], tickmode="array", tickvals=list(range(n_top)),
                     ticktext=[str(r + 1) for r in range(n_top)], title=dict(text=style.esc(L["rank"]))),
        xaxis6=_axis(header_x, "y6", range=[0, 1], visible=False, fixedrange=True),
        yaxis6=_axis(header_y, "x6", range=[0, 1], visible=False, fixedrange=True),
        coloraxis=style.weights_axis(L["weight"]),
        coloraxis2=style.scores_axis(style.symmetric_range(K), "K"),
        coloraxis3=style.scores_axis(style.symmetric_range(V), "V"),
        plot_bgcolor=style.MASKED_BG, showlegend=False, bargap=0.2,
        margin=dict(l=70, r=30, t=70, b=150),
    )
    lay["coloraxis"]["colorbar"].update(x=LEFT[1] + 0.015, y=sum(pattern_y) / 2, len=pattern_y[1] - pattern_y[0],
                                        yanchor="middle")
    for ax, (y0, y1) in (("2", K_Y), ("3", V_Y)):
        lay[f"coloraxis{ax}"]["colorbar"].update(x=LEFT[1] + 0.015, y=(y0 + y1) / 2, len=y1 - y0 + 0.02,
                                                yanchor="middle", thickness=10, nticks=3)
    if cross is not None:
        lay["xaxis4"] = _axis(RIGHT, "y4", range=[-0.5, S - 0.5], tickmode="array",
                              tickvals=style.tick_positions(S),
                              ticktext=[style.token_label(tr.input_tokens[i]) for i in style.tick_positions(S)],
                              tickangle=-50)
        lay["yaxis4"] = _axis(PATTERN_Y, "x4", range=[T - 0.5, -0.5], matches="y", tickmode="array",
                              tickvals=ticks_q)
    kv = f" ({style.esc(L['kv_head'])} {g})" if tr.kv_group > 1 else ""
    panels = [(style.esc(W["self_panel"]), LEFT, pattern_y), (style.esc(W["k_panel"]) + kv, LEFT, K_Y),
              (style.esc(W["v_panel"]) + kv, LEFT, V_Y), (style.esc(_top_panel(tr, W)), [RIGHT[0] + 0.04, RIGHT[1]], TOP_Y)]
    if cross is not None:
        panels.append((style.esc(W["cross_panel"]), RIGHT, PATTERN_Y))
    lay["annotations"] = [
        dict(text=text, x=(xd[0] + xd[1]) / 2, y=yd[1], xref="paper", yref="paper", xanchor="center",
             yanchor="bottom", showarrow=False, font=dict(size=13))
        for text, xd, yd in panels]
    for k, v in _frame_layout(tr, step, n_keys, hs, S).items():
        lay[k] = {**lay[k], **v} if isinstance(v, dict) else v

    frames = [dict(name=str(t), traces=[i_bars, i_text],
                   data=[dict(type="bar", **_bars(tr, t, W)), dict(type="scatter", text=[_header(tr, t, W)])],
                   layout=_frame_layout(tr, t, n_keys, hs, S)) for t in range(n)]
    animate = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    lay["sliders"] = [dict(
        active=step, x=0.1, len=0.9, y=-0.06, yanchor="top", pad=dict(t=55, b=0),
        currentvalue=dict(prefix=f"{style.esc(W['step'])} ", visible=True, xanchor="right"),
        steps=[dict(method="animate", label=str(t), args=[[str(t)], animate]) for t in range(n)])]
    lay["updatemenus"] = [dict(
        type="buttons", direction="left", showactive=False, x=0.0, y=-0.06, xanchor="left", yanchor="top",
        pad=dict(t=62, r=6), buttons=[
            dict(label="▶", method="animate",
                 args=[None, dict(mode="immediate", fromcurrent=True, frame=dict(duration=FRAME_MS, redraw=True),
                                  transition=dict(duration=0))]),
            dict(label="❚❚", method="animate",
                 args=[[None], dict(mode="immediate", frame=dict(duration=0, redraw=False),
                                    transition=dict(duration=0))])])]
    height = 900 if cross is not None else 860
    fig = style.make_figure(traces, lay, title=title, height=height, frames=frames)
    return fig, timeline_table(tr, layer, head, labels=L, words=W)


def timeline_table(tr: TraceData, layer: int, head: int, *, labels: dict | None = None,
                   words: dict | None = None) -> pd.DataFrame:
    """One row per step: the column it runs on and its token, the token written and its
    probability, the candidates, and where this head (and, for the seed model, its
    cross-attention) looked most."""
    L, W = _lab(labels), {**default_words(), **(words or {})}
    rows = []
    for t in range(tr.n_steps):
        q = int(tr.query[t])
        row = tr.self_pattern[layer, head, q, : q + 1]
        j = int(np.nanargmax(row))
        rec = {L["position"]: q, W["reads"]: tr.tokens[q], W["writes"]: tr.chosen_tokens[t],
               L["probability"]: float(tr.chosen_probs[t]),
               W["candidates"]: " · ".join(f"{style.plain_text(tok)} {p:.3f}" + (f" ✂ {c}" if c else "")
                                           for tok, p, c in zip(tr.top_tokens[t], tr.top_probs[t].astype(float),
                                                                _cut(tr, t, W))),
               W["looks_at"]: f"{j}:{style.plain_text(tr.tokens[j])} ({float(row[j]):.3f})"}
        if tr.cross_pattern is not None:
            c = tr.cross_pattern[layer, head, q]
            jc = int(np.nanargmax(c))
            rec[W["cross_looks_at"]] = f"{jc}:{style.plain_text(tr.input_tokens[jc])} ({float(c[jc]):.3f})"
        rows.append(rec)
    return pd.DataFrame(rows, index=pd.Index(range(tr.n_steps), name=W["step"]))
