"""The "long" view (issue 34, ``view=long``): the whole text box as one sequence of up to 4,096 tokens on a
laptop (a host's bound otherwise: ``inputs.long_token_bound``), one head's whole pattern drawn at scale,
a zoom with every weight exact, and every layer's long-context summaries; PNG and CSV of each.

Wiring only: the run, grid and summaries come from explorer/state.py (cached; model/analysis/long.py
makes them), the figures and their words from explorer/views/long.py. The layer and head are the
sidebar's (clipped to the long run's stack: the encoder of an encoder–decoder model)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

import model
from explorer import export as ex
from explorer import export_ui, i18n, inputs, quota, state
from explorer.session import keep, kept
from explorer.ui import busy, lang, t
from explorer.views import long as lv
from model.analysis import long as ml

kept("long_q0", "long_k0")


def _png(fig, what: str):
    """A PNG download's callable: rendered when clicked, within the page's export quota and kept
    (explorer/export_ui.py, as every figure's PNG)."""
    return export_ui._deferred(lambda: fig, "png", lambda f: ex.figure_bytes(f, "png", scale=1), lambda f: 1,
                               lang(), what)


def _downloads(items: list[tuple[str, str, object, str, str]]) -> None:
    """Download buttons (label, file name, a callable making the bytes, MIME, key); the bytes are made
    when a button is clicked, never on a rerun. PNG needs the export browser (say why when it is missing)."""
    if state.LEAN_DOWNLOADS and not st.toggle(t("downloads"), key=f"{items[0][4]}-open"):
        return
    reason = ex.unavailable_reason()
    row = st.container(horizontal=True, gap="small", vertical_alignment="center")
    for label, file_name, make, mime, key in items:
        image = mime == ex.MIME["png"]
        row.download_button(label, data=make, file_name=file_name, mime=mime, key=key, on_click="ignore",
                            disabled=image and reason is not None, icon=":material/download:",
                            help=reason.reason if image and reason is not None else f"`{file_name}`")


def use_long_example() -> None:
    """The example button's callback: the shipped long text (the window lesson's) into the text box."""
    from explorer.lessons import catalog

    st.session_state["text"] = catalog.long_example()


def render(_section: str, page) -> None:
    """The view: the example's button, a notice when the text was cut, the whole pattern, the zoom, the
    summaries."""
    lg = lang()
    st.button(t("long.example"), key="long-example", on_click=use_long_example, icon=":material/article:",
              help=t("long.example_help"))
    L = i18n.fig_labels(lg)
    text, _ = inputs.long_text(st.session_state.get("text", ""))  # the page said already if the box was cut
    bound = inputs.long_token_bound(state.HOSTED)
    name = page.sel.model
    try:
        with busy(("long", name, text, bound), "long.running"):
            lr = state.long_run(name, text, bound)
    except ml.LongInputError as e:
        if e.reason != "position_bias":
            raise
        st.info(t("long.position_bias", model=page.info.name), icon="ℹ️")
        return
    except quota.Refused as e:  # this page's quota (hosted): many new long texts in a short time
        st.warning(e.message(lg), icon="⏳")
        return
    except model.RunTooLarge as e:
        st.warning(t("long.too_large", model=page.info.name, need=f"{e.estimate / 2**20:,.0f}",
                     allowed=f"{e.budget / 2**20:,.0f}"), icon="⚠️")
        return
    if lr.cut:
        st.info(t("long.cut", m=lr.n_given, n=lr.T, model=page.info.name), icon="✂️")
    st.caption(t("long.intro", T=lr.T, bound=lr.limit, model=page.info.name, stack=t(f"blocks.{lr.stack}.self_attn"), layers=lr.n_layers,
                 heads=lr.n_heads, mb=f"{lr.nbytes / 2**20:,.1f}", rows=ml.ROWS))
    layer, head = inputs.clip(page.sel.layer, lr.n_layers), inputs.clip(page.sel.head, lr.n_heads)
    rule = lr.rules[layer]
    path = name.replace("\\", "/")  # a folder typed on a laptop: its name, not its path, in file names
    stem = f"{ex.slugify(Path(path).stem if '/' in path else name)}_long{lr.T}_L{layer}_H{head}"

    # the whole pattern, and where the zoom is
    n = min(lv.ZOOM, lr.T)
    last = lr.T - n
    shown = (name, hash(lr.text), len(lr.text), lr.limit)  # which text the zoom was set for (not the text itself)
    new_text = st.session_state.get("_long_shown") != shown
    st.session_state["_long_shown"] = shown
    for key in ("long_q0", "long_k0"):  # a new text: the zoom starts at its last queries; kept inside it
        st.session_state[key] = last if new_text else min(max(int(keep(key, last)), 0), last)
    grid, block = state.long_grid(name, text, bound, layer, head, lv.GRID_CELLS)
    q0, k0 = int(st.session_state["long_q0"]), int(st.session_state["long_k0"])
    title = t("long.overview_title", layer=layer, head=head, T=lr.T,
              kind=lv.layer_kind(lr.window, rule.window, rule.causal, lg))
    fig = lv.overview_figure(grid, block, lr.tokens, window=rule.window, causal=rule.causal, zoom=(q0, k0, n),
                             title=title, labels=L)
    config = {"displaylogo": False, "toImageButtonOptions": {"filename": stem}}
    st.plotly_chart(fig, width="stretch", key="chart-long-overview", config=config)
    finite = grid[grid == grid]
    st.caption(lv.overview_note(block, float(finite.max()) if finite.size else 0.0, rule.window, rule.causal,
                                lr.T, lg))
    _downloads([(t("long.png_overview"), f"{stem}.png", _png(fig, "long view"), ex.MIME["png"],
                 "long-dl-overview"),
                (t("long.csv_head"), f"{stem}.csv",
                 lambda: b"".join(lv.cells_csv(ml.nonzero_cells(lr, layer, head))), ex.MIME["csv"], "long-dl-cells")])

    # the zoom: every weight exact, with its tokens
    row = st.container(horizontal=True, gap="small", vertical_alignment="bottom")
    row.number_input(t("long.zoom_query"), min_value=0, max_value=last, step=1, key="long_q0",
                     help=t("long.zoom_help", n=n))
    row.number_input(t("long.zoom_key"), min_value=0, max_value=last, step=1, key="long_k0",
                     help=t("long.zoom_help", n=n))
    q0, k0 = int(st.session_state["long_q0"]), int(st.session_state["long_k0"])
    w, ok = ml.region(lr, layer, head, q0, q0 + n, k0, k0 + n)
    zfig, _ = lv.zoom_figure(w, ok, q0, k0, lr.tokens, labels=L,
                               title=t("long.zoom_title", q0=q0, q1=q0 + n - 1, k0=k0, k1=k0 + n - 1))
    st.plotly_chart(zfig, width="stretch", key="chart-long-zoom", config=config)

    # every layer's summaries
    with busy(("long-summaries", name, text, bound), "long.running"):
        s = state.long_summaries(name, text, bound)
    sfig = lv.summary_figure(s.first, s.distance, s.inside, s.window_layers, layer=layer, head=head, window=s.window,
                             own_window=s.own_window, title=t("long.summary_title", T=lr.T), labels=L)
    st.plotly_chart(sfig, width="stretch", key="chart-long-summaries", config=config)
    st.caption(lv.summary_note(s.window, s.own_window, lr.n_heads, layer, head, lg))
    said = lv.compare_note(s.first, s.distance, s.window_layers, s.window, lg)
    if said:
        st.markdown(said)
    _downloads([(t("long.png_summary"), f"{stem}_summaries.png", _png(sfig, "long summaries"),
                 ex.MIME["png"], "long-dl-summary-png"),
                (t("long.csv_summary"), f"{stem}_summaries.csv",
                 lambda: ex.table_bytes(lv.summary_table(s.first, s.distance, s.inside, s.window_layers)),
                 ex.MIME["csv"], "long-dl-summary-csv")])
