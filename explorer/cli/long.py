"""The exporter's long inputs (issue 34): ``--text-file`` and ``--long``.

    python -m explorer.export --model gemma3 --text-file essay.txt --long --layer 5 --head 0 \\
        --format png,csv --out long/      # the whole pattern, the zoom, the summaries: PNG and CSV

``--text-file PATH`` reads a UTF-8 text (cut to the app's text-box bound, ``inputs.MAX_BOX_CHARS``, with
a note). Without ``--long`` its non-blank lines are sentences, after any ``--text``, as the app's text
box splits and cuts them (``inputs.limit_sentences``, with a note; the model's token limit applies).
With ``--long`` the whole text is one sequence (line breaks included), as the app's long view reads its
box, cut to ``--long-tokens`` (default 4,096, at most the model's positions) with a note; the files are
those of the view: the whole pattern of ``--layer``/``--head`` and the summaries as images (--format
png, svg, pdf), and as CSV every nonzero weight of the head (query,key,weight), the zoom at
``--query``/``--key`` and every summary.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from explorer import i18n, inputs
from explorer.export import IMAGE_FORMATS, figure_bytes, slugify, table_bytes
from explorer.views import long as lv


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text-file", default=None,
                   help="a UTF-8 text file: its lines are sentences (after any --text); with --long the whole "
                        "text is one sequence")
    p.add_argument("--long", action="store_true",
                   help="write the long view instead of the stages: the whole pattern of --layer/--head, the "
                        "zoom at --query/--key and every layer's summaries (images and CSV)")
    p.add_argument("--long-tokens", type=int, default=inputs.LONG_TOKENS_LOCAL,
                   help=f"--long: read at most this many tokens (default {inputs.LONG_TOKENS_LOCAL}, at most the "
                        f"model's positions)")


def read_text_file(parser: argparse.ArgumentParser, a: argparse.Namespace) -> str | None:
    """The --text-file's text, cut to the text box's bound (a note on stderr when it was); None without one."""
    if a.text_file is None:
        return None
    try:
        raw = Path(a.text_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        parser.error(f"--text-file {a.text_file}: {e}")
    text, notices = inputs.limit_box(raw)
    if notices:
        print(f"note: --text-file has more than {inputs.MAX_BOX_CHARS:,} characters; the first "
              f"{inputs.MAX_BOX_CHARS:,} are read", file=sys.stderr)
    return text


def sentences(parser: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """``a.text``: the --text sentences, then the --text-file's lines (without --long), within the app's
    text-box limits (``inputs.limit_sentences``: sentences, characters; a note on stderr for each cut)."""
    text = read_text_file(parser, a)
    if text is None:
        return
    lines, notices = inputs.limit_sentences(text)
    if not lines:
        parser.error(f"--text-file {a.text_file}: the file has no text")
    for n in notices:
        print(f"note: --text-file: {i18n.t(n.key, 'en', **n.args)}", file=sys.stderr)
    a.text = [*(a.text or []), *lines]


def long_sequence(parser: argparse.ArgumentParser, a: argparse.Namespace) -> str:
    """The one sequence --long reads: the --text-file's text, else the --text sentences joined by line breaks."""
    text = read_text_file(parser, a)
    if text is None:
        text = "\n".join(a.text or [])
    text, _ = inputs.long_text(text)
    if not text.strip():
        parser.error("--long: no text given (--text-file or --text)")
    return text


def write_long(parser: argparse.ArgumentParser, a: argparse.Namespace, m, formats: list[str], name: str) -> list[Path]:
    """The long view's files in --out; returns their paths."""
    import model
    from model.analysis import long as ml

    if a.long_tokens < 1:
        parser.error("--long-tokens must be at least 1")
    text = long_sequence(parser, a)
    try:
        lr = ml.long_run(m, text, a.long_tokens)
    except ml.LongInputError as e:
        parser.error(f"--long: {e}")
    except model.RunTooLarge as e:
        parser.exit(2, f"{parser.prog}: error: --long: {e}\n")
    if lr.cut:
        print(f"note: the text has {lr.n_given} tokens; the long view read the first {lr.T} (at most {lr.limit} "
              f"for {m.info.name}: --long-tokens)", file=sys.stderr)
    if not 0 <= a.layer < lr.n_layers:
        parser.error(f"--layer {a.layer} is out of range: {m.info.name}'s {lr.stack} has {lr.n_layers} layer(s), "
                     f"so use 0..{lr.n_layers - 1}")
    if not 0 <= a.head < lr.n_heads:
        parser.error(f"--head {a.head} is out of range: {m.info.name} has {lr.n_heads} heads, so use "
                     f"0..{lr.n_heads - 1}")
    lg, layer, head = a.lang, a.layer, a.head
    L = i18n.fig_labels(lg)
    rule = lr.rules[layer]
    n = min(lv.ZOOM, lr.T)
    q0, k0 = (min(max(v, 0), lr.T - n) for v in (a.query, a.key))
    grid, block = ml.block_grid(lr, layer, head, lv.GRID_CELLS)
    kind = lv.layer_kind(lr.window, rule.window, rule.causal, lg)
    overview = lv.overview_figure(grid, block, lr.tokens, window=rule.window, causal=rule.causal, zoom=(q0, k0, n),
                                  labels=L, title=i18n.t("long.overview_title", lg, layer=layer, head=head, kind=kind,
                                                         T=lr.T))
    w, ok = ml.region(lr, layer, head, q0, q0 + n, k0, k0 + n)
    zoom, zoom_df = lv.zoom_figure(w, ok, q0, k0, lr.tokens, labels=L, title=i18n.t(
        "long.zoom_title", lg, q0=q0, q1=q0 + n - 1, k0=k0, k1=k0 + n - 1))
    s = ml.summaries(lr)
    summary = lv.summary_figure(s.first, s.distance, s.inside, s.window_layers, layer=layer, head=head,
                                window=s.window, own_window=s.own_window, labels=L,
                                title=i18n.t("long.summary_title", lg, T=lr.T))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{slugify(name)}_long{lr.T}_L{layer}_H{head}"
    written = []

    def write(file_name: str, data: bytes) -> None:
        (out / file_name).write_bytes(data)
        written.append(out / file_name)

    for fmt in formats:
        if fmt in IMAGE_FORMATS:
            for suffix, fig in (("", overview), ("_zoom", zoom), ("_summaries", summary)):
                write(f"{stem}{suffix}.{fmt}", figure_bytes(fig, fmt, scale=a.scale))
        elif fmt == "csv":
            with open(out / f"{stem}.csv", "wb") as f:  # a block of queries at a time: never the whole T×T
                for chunk in lv.cells_csv(ml.nonzero_cells(lr, layer, head)):
                    f.write(chunk)
            written.append(out / f"{stem}.csv")
            write(f"{stem}_zoom.csv", table_bytes(zoom_df))
            write(f"{stem}_summaries.csv", table_bytes(lv.summary_table(s.first, s.distance, s.inside,
                                                                          s.window_layers)))
    return written


def main(parser: argparse.ArgumentParser, a: argparse.Namespace, fetch_hint, export_errors) -> int:
    """--long: check the formats, load the model, write the view's files (``fetch_hint`` and
    ``export_errors``: the exporter's, explorer/cli/export.py)."""
    import model
    from explorer.export import check_formats, unavailable_reason

    try:
        formats = check_formats([f.strip() for f in a.format.split(",") if f.strip()])
    except ValueError as e:
        parser.error(f"--format: {e}")
    formats = [f for f in formats if f in (*IMAGE_FORMATS, "csv")]
    if not formats:
        parser.error("--long writes png, svg, pdf and csv; choose some of them with --format")
    if a.scale <= 0 or a.scale > 10:
        parser.error("--scale must be in (0, 10]")
    if any(f in IMAGE_FORMATS for f in formats) and (reason := unavailable_reason()):
        parser.exit(3, f"{parser.prog}: error: {reason}\n(CSV still works: --format csv)\n")
    try:
        m = model.load(a.model)
    except (model.WeightsError, OSError, ValueError) as e:
        parser.error(f"--model {a.model}: {e}; {fetch_hint(a.model)}")
    name = a.model if a.model in model.available() else Path(a.model).stem  # no home paths
    with export_errors(parser):
        written = write_long(parser, a, m, formats, name)
    print(f"wrote {len(written)} file(s) to {a.out}/")
    return 0
