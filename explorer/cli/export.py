"""The exporter's command line (``python -m explorer.export``): the app's figures as files.

    python -m explorer.export --model seed --text "hello world" --layer 0 --head 1 \\
        --stages all --format png,svg,pdf --out slides/
    python -m explorer.export --model smollm2 --text "The capital of France is" \\
        --stages decoding --format gif,pdf --max-new-tokens 12   # a GIF of every step, a page per step
    python -m explorer.export --model seed --text "hello world" --edit "no_causal" \\
        --compare "hello word" --stages all --out slides/     # + the what-if and comparison figures
    python -m explorer.export --lesson 6 --lang ko --out lesson6.pdf   # a lesson's handout (PDF)
    python -m explorer.export --model gemma3 --text-file essay.txt --long --layer 5 --head 0 \\
        --format png,csv --out long/     # the long view: up to 4,096 tokens (explorer/cli/long.py)
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path

import model
from explorer import inputs
from explorer.cli import long as long_cli
from explorer.views import stages as views
from explorer.views import tutorial002
from explorer.views.theme import THEME_NAMES
from explorer.views.trace import trace_data
from explorer.views.data import induction_scores, lens_data
from model.registry import FETCHED, SEED_WEIGHTS

from explorer.export.bundles import render_items, slugify, stage_ids, stage_items, zip_items, check_formats
from explorer.export.renderer import (IMAGE_FORMATS, INSTALL_COMMAND, ExportError, ExportUnavailable, cjk_font_missing,
                       has_cjk, shutdown, unavailable_reason)

try:
    from tqdm import tqdm
except ImportError:  # no progress bar then
    tqdm = None


# --preset NAME: options for the positional figures, and the on-demand stages it adds to "all"
PRESETS = {
    "tutorial002": {"options": tutorial002.PRESET, "stages": ("pe_tutorial",)},
}


@contextlib.contextmanager
def export_errors(parser: argparse.ArgumentParser):
    """Run an export: no chromium exits 3 with what to install, a failed render exits 1, and the
    export browser is shut down either way."""
    try:
        yield
    except ExportUnavailable as e:
        parser.exit(3, f"{parser.prog}: error: {e}\n")
    except ExportError as e:
        parser.exit(1, f"{parser.prog}: error: {e}\n")
    finally:
        shutdown()


def fetch_hint(name: str) -> str:
    if name in FETCHED:
        return f"fetch the weights with `python -m model.fetch {name}`"
    if name in SEED_WEIGHTS:
        return "reinstall the project, or retrain with `python -m model.train reverse`"
    if name in model.available():  # a configured name (model/configured.py)
        return "check its path in the models file ($ATTENTION_EXPLORER_MODELS or models.toml)"
    return "check the path, or use one of: " + ", ".join(model.available())


def build_parser(prog: str = "python -m explorer.export") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Export every stage of attention as slide-ready figures (PNG, SVG, PDF) and "
                    "matrices (CSV), with the same figure code as the app.",
        epilog='example: python -m explorer.export --model seed --text "hello world" '
               "--layer 0 --head 1 --stages all --format png,svg,pdf --out slides/")
    p.add_argument("--model", default="seed",
                   help="seed, seed-sort, minilm, smollm2, a name from the models file "
                        "($ATTENTION_EXPLORER_MODELS or models.toml), or a folder or .gguf path")
    p.add_argument("--text", action="append", default=None,
                   help="a sentence (repeat for a padded batch); required unless --lesson is given")
    p.add_argument("--sentence", type=int, default=0, help="which --text to show (default 0)")
    p.add_argument("--block", default=None,
                   help="encoder.self_attn, decoder.self_attn or decoder.cross_attn "
                        "(default: the model's first)")
    p.add_argument("--layer", type=int, default=0)
    p.add_argument("--head", type=int, default=0)
    p.add_argument("--query", type=int, default=0, help="query position for per-row stages")
    p.add_argument("--key", type=int, default=0, help="key position for per-column stages")
    p.add_argument("--stages", default="all", help="'all' or a comma-separated list of stage ids")
    p.add_argument("--format", default="png,svg,pdf",
                   help="comma-separated: png, svg, pdf, csv, gif (default png,svg,pdf); for the "
                        "decoding stage, gif animates every step and pdf has a page per step")
    p.add_argument("--step", type=int, default=0,
                   help="decoding: the step its PNG and SVG show (default 0)")
    p.add_argument("--train-step", type=int, default=None,
                   help="the model's weights after this many training steps (the seed's checkpoints: "
                        "python -c 'import model; print(model.checkpoint_steps(\"seed\"))'); default: the shipped weights")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="decoding: write at most this many tokens (default as the app: 40 for a "
                        "decoder-only model, the input's length + 8 for the seed models)")
    p.add_argument("--out", default="slides", help="output folder (created if missing)")
    p.add_argument("--theme", choices=THEME_NAMES, default="presentation")
    p.add_argument("--lang", choices=("en", "ko"), default="en")
    p.add_argument("--scale", type=float, default=2.0, help="PNG pixels per layout pixel")
    p.add_argument("--zip", action="store_true",
                   help="write one ZIP (all files + manifest.json) into --out instead")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--edit", default="",
                   help="what-if edits, e.g. 'no_causal,temperature=2' or 'ablate=decoder.cross_attn:1:*' "
                        "(the app's edit=): adds the what-if stages, intact vs edited")
    p.add_argument("--compare", default="",
                   help="a second sentence to compare with --text (the app's compare=): adds the "
                        "comparison stage")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="tutorial002: the positional figures with tutorial 002's settings (d_model 4, 10 "
                        "positions, n = 100 vs 10000) and its worked example (stage pe_tutorial)")
    p.add_argument("--lesson", type=int, default=None,
                   help="write lesson K's handout (its text, figures and question; the answer on the last "
                        "page) as one PDF to --out (a .pdf file, or a folder); --text replaces its sentences")
    long_cli.add_arguments(p)  # --text-file, --long, --long-tokens (issue 34)
    return p


def lesson_main(parser: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    """--lesson K: the lesson's handout (explorer/lessons/handout.py) as one PDF."""
    from explorer.lessons import catalog, handout

    if catalog.parse_lesson(a.lesson) is None:
        parser.error(f"--lesson {a.lesson}: there are lessons 1..{len(catalog.LESSONS)}")
    if reason := unavailable_reason():
        parser.exit(3, f"{parser.prog}: error: {reason}\n")
    lesson = catalog.lesson(a.lesson)
    if lesson.is_long:  # one text read whole (the run cuts it to its token bound), not sentences
        texts = [inputs.long_text("\n".join(a.text))[0]] if a.text else list(lesson.texts)
        texts = [x for x in texts if x.strip()]
    else:
        texts = inputs.limit_sentences("\n".join(a.text))[0] if a.text else list(lesson.texts)
    if not texts:
        parser.error("--text: no sentence given")
    runs, loaded = [], {}
    for part in lesson.parts:
        try:
            m = loaded.get(part.model) or model.load(part.model)
        except (model.WeightsError, OSError, ValueError) as e:
            parser.exit(2, f"{parser.prog}: error: lesson {a.lesson} needs {part.model}: {e}; "
                           f"{fetch_hint(part.model)}\n")
        loaded[part.model] = m
        try:
            runs.append(catalog.run_part(part, m, texts if part.is_long else inputs.limit_tokens(texts, m.tokenizer)[0]))
        except (model.InputTooLong, model.RunTooLarge) as e:
            parser.exit(2, f"{parser.prog}: error: --text: {e}\n")
    out = Path(a.out)
    if out.suffix.lower() != ".pdf":
        out.mkdir(parents=True, exist_ok=True)
        out = out / f"lesson-{a.lesson}-{a.lang}.pdf"
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
    with export_errors(parser):
        data = handout.handout_pdf(lesson, runs, texts, a.lang)
    out.write_bytes(data)
    print(f"wrote {out}")
    return 0


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]



# --- what a stage reads beside the plain run (Stage.uses), made here as the app's caches make it -----

def _attach_trace(m, a, parser, cache, runs, block):
    """The token-by-token trace the decoding stage draws."""
    tr = trace_data(m, a.text[a.sentence], max_new_tokens=a.max_new_tokens)
    if not 0 <= a.step < tr.n_steps:
        parser.error(f"--step {a.step} is out of range: {m.info.name} wrote {tr.n_steps} token(s) for "
                     f"--text {a.sentence}, so use 0..{tr.n_steps - 1}")
    return cache.with_trace(tr), runs


def _attach_lens(m, a, parser, cache, runs, block):
    """The logit lens of the sentence: every layer read through the model's own readout."""
    return cache.with_lens(lens_data(m, cache, a.sentence)), runs


def _attach_induction(m, a, parser, cache, runs, block):
    """The induction scores: a forward pass of their own, on a repeated sequence."""
    return cache.with_induction(induction_scores(m)), runs


def _attach_patches(m, a, parser, cache, runs, block):
    """Activation patching between the sentence and the second one (--compare); without it, or with
    sentences the patching refuses (e.g. not as many tokens), the figure says so."""
    if "other" not in runs:
        return cache, runs
    from model.analysis import patching as mp

    try:
        patched = mp.patch_positions(m, a.text[a.sentence], runs["other"].texts[0],
                                     stack=views.patching_stack(m.info, block))
    except mp.PatchingError:
        return cache, runs
    return cache, {**runs, "patches": patched}


def _attach_effects(m, a, parser, cache, runs, block):
    """Every head of the block ablated in turn (attention_vs_effect); a block without a prediction to
    measure (an encoder's) gets none, and the figure says so."""
    from model.analysis import ablation

    try:
        made = ablation.head_effects(m, a.text[a.sentence], block)
    except ablation.AblationError:
        return cache, runs
    return cache, {**runs, "effects": made}


ATTACH = {"trace": _attach_trace, "lens": _attach_lens, "induction": _attach_induction,
          "patches": _attach_patches, "effects": _attach_effects}
assert set(ATTACH) == set(views.ATTACHMENTS)

def main(argv: Sequence[str] | None = None, prog: str = "python -m explorer.export") -> int:
    """The exporter; ``prog``: the command's name in its messages (``attention-explorer export``)."""
    parser = build_parser(prog)
    a = parser.parse_args(argv)
    if a.lesson is not None:
        return lesson_main(parser, a)
    if a.long:
        return long_cli.main(parser, a, fetch_hint, export_errors)
    long_cli.sentences(parser, a)  # --text-file's lines after any --text
    if not a.text:
        parser.error("the following arguments are required: --text")

    # cheap checks first, before any model is loaded
    try:
        formats = check_formats(_split(a.format))
    except ValueError as e:
        parser.error(f"--format: {e}")
    if a.scale <= 0 or a.scale > 10:
        parser.error("--scale must be in (0, 10]")
    if a.max_new_tokens is not None and a.max_new_tokens < 1:
        parser.error("--max-new-tokens must be at least 1")
    order = stage_ids()
    stages = order if a.stages.strip().lower() == "all" else _split(a.stages)
    unknown = [s for s in stages if s not in order]
    if unknown or not stages:
        parser.error(f"--stages: unknown stage {', '.join(unknown) or '(none given)'}; "
                     f"use 'all' or some of: {', '.join(order)}")
    try:
        edits = model.edits.parse(a.edit)
    except model.edits.EditError as e:
        parser.error(f"--edit: {e}")
    second = inputs.limit_sentences(a.compare)[0][:1]
    given = {"edited": bool(edits), "other": bool(second)}
    lacking = [s for s in stages if views.REGISTRY[s].needs and not given[views.REGISTRY[s].needs]]
    if lacking and a.stages.strip().lower() != "all":
        flags = {"edited": "--edit", "other": "--compare"}
        parser.error(f"--stages {', '.join(lacking)} compare(s) with a second run: give "
                     + " and ".join(sorted({flags[views.REGISTRY[s].needs] for s in lacking})))
    if not 0 <= a.sentence < len(a.text):
        parser.error(f"--sentence {a.sentence} is out of range: {len(a.text)} sentence(s) given, "
                     f"so use 0..{len(a.text) - 1}")
    if any(f in IMAGE_FORMATS for f in formats) and (reason := unavailable_reason()):
        parser.exit(3, f"{parser.prog}: error: {reason}\n"
                       f"(CSV still works: --format csv)\n")

    if any(f in IMAGE_FORMATS for f in formats) and has_cjk(" ".join(a.text)) and cjk_font_missing():
        print(f"warning: no CJK font is installed, so Korean text will show as empty boxes; "
              f"install it with: {INSTALL_COMMAND}", file=sys.stderr)

    try:
        m = model.load(a.model) if a.train_step is None else model.load(a.model, step=a.train_step)
    except model.WeightsError as e:
        msg = str(e)
        hint = fetch_hint(a.model)
        known = "`" in msg or "use one of" in msg or "choose one of" in msg  # the loader already says how to fix it
        parser.error(f"--model {a.model}: {msg}" + ("" if known else f"; {hint}"))
    except (OSError, ValueError) as e:
        parser.error(f"--model {a.model}: {e}; {fetch_hint(a.model)}")
    info = m.info
    blocks = list(views.blocks_for(info))
    block = a.block or blocks[0]
    if block not in blocks:
        parser.error(f"--block {block} does not exist in {info.name} ({info.kind}); "
                     f"choose from {', '.join(blocks)}")
    n_layers = views.layers_for(info, block)
    if not 0 <= a.layer < n_layers:
        parser.error(f"--layer {a.layer} is out of range: {info.name} has {n_layers} layer(s) in "
                     f"{block.split('.')[0]}, so use 0..{n_layers - 1}")
    if not 0 <= a.head < info.n_heads:
        parser.error(f"--head {a.head} is out of range: {info.name} has {info.n_heads} heads, "
                     f"so use 0..{info.n_heads - 1}")

    try:
        model.edits.check(m, edits)
    except model.edits.EditError as e:
        parser.error(f"--edit: {e}")
    if a.stages.strip().lower() == "all":  # every stage this model has (as the app's ZIP)
        stages = [s for s in stages if views.applies(s, info)
                  and (not views.REGISTRY[s].on_demand or s in PRESETS.get(a.preset, {}).get("stages", ()))]
    try:  # the model's token limit and memory gate, before anything runs (model/runtime/limits.py)
        prep = m.prepare_texts(a.text)
        m.check_memory(len(prep.texts), prep.longest, m.hook_names)
    except (model.InputTooLong, model.RunTooLarge) as e:
        parser.exit(2, f"{parser.prog}: error: --text: {e}\n")
    options = dict(PRESETS[a.preset]["options"]) if a.preset else {}
    cache = views.run_data(m, a.text)  # what the app caches: hook tensors and the weights
    runs = {}
    if edits:
        runs["edited"] = views.run_data(m, a.text, with_weights=False, edits=edits)
    if second:
        runs["other"] = views.run_data(m, inputs.limit_tokens(second, m.tokenizer)[0], with_weights=False)
    for kind in views.attachments(stages, info):  # what the stages declare they read (Stage.uses)
        cache, runs = ATTACH[kind](m, a, parser, cache, runs, block)
    if a.stages.strip().lower() == "all":  # the what-if / comparison stages only with their run
        stages = [s for s in stages if views.ready(s, info, options=runs)]
    name = a.model if a.model in model.available() else Path(a.model).stem  # no home paths
    if a.train_step is not None:  # the captions and file names say which checkpoint (as the app's "seed@400")
        name = f"{name}@{a.train_step}"
    sel = views.Selection(model=a.model if a.train_step is None else name, sentence=a.sentence, layer=a.layer,
                          head=a.head,
                          block=block, query=a.query, key=a.key)
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = a.text[a.sentence]
    with export_errors(parser):
        items = stage_items(cache, info, sel, model_name=name, text=text, stages=stages,
                            theme=a.theme, lang=a.lang, step=a.step, **runs, **options)
        bar = _progress_bar(a.quiet, total=sum(
            1 for it in items for f in formats if f != "csv" or it.df is not None))
        if a.zip:
            data = zip_items(items, formats, theme=a.theme, scale=a.scale, lang=a.lang,
                             progress=bar.step)
            target = out_dir / (f"{slugify(name)}_s{a.sentence}-{slugify(text, 24)}_"
                                f"{slugify(block)}_L{a.layer}_H{a.head}"
                                + (f"_E-{slugify(str(edits), 40)}" if edits else "") + ".zip")
            target.write_bytes(data)
            written = [target]
        else:
            written = []
            for name, _meta, _fmt, data in render_items(items, formats, scale=a.scale,
                                                        progress=bar.step):
                (out_dir / name).write_bytes(data)
                written.append(out_dir / name)
        bar.close()
    print(f"wrote {len(written)} file(s) to {out_dir}/")
    return 0


class _progress_bar:
    """tqdm when available and wanted; a silent stand-in otherwise."""

    def __init__(self, quiet: bool, total: int) -> None:
        self._bar = None if quiet or tqdm is None else tqdm(total=total, unit="file", desc="exporting")

    def step(self, done: int, total: int, what: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(what[-40:], refresh=False)
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


if __name__ == "__main__":
    sys.exit(main())
