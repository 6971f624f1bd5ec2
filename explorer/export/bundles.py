"""Figures prepared for slides and bundled: captions, file names, themes, and one-click ZIPs with a
manifest — the same stage figures as the app (explorer/views/stages.py).

    item = stage_item("softmax", run, m.info, sel, model_name="seed", text="hello world")
    data = bundle_zip(run, m.info, sel, model_name="seed", text="hello", formats=("png", "csv"))
"""
from __future__ import annotations

import hashlib
import html
import io
import json
import re
import tomllib
import unicodedata
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import plotly.graph_objects as go

from explorer import i18n
from explorer.fastpath import make_figure, plain_dict
from explorer.views import stages as views
from explorer.views.theme import DEFAULT_THEME, apply_theme, get_theme

from .animation import gif_bytes, pdf_pages_bytes
from .renderer import (ANIMATED_FORMATS, FORMATS, IMAGE_FORMATS, export_size, figure_bytes, png_and_svg,
                       table_bytes)

@dataclass(frozen=True)
class ExportMeta:
    """What a figure shows: it becomes the caption, the file name and the manifest entry."""

    model: str
    sentence: int
    text: str
    block: str
    layer: int
    head: int
    stage: str
    stage_title: str = ""
    stage_index: int | None = None  # position in the pipeline, so files sort in order
    edits: str = ""  # a what-if figure: the edits of its edited run (model.edits' canonical form)
    compare: str = ""  # a comparison figure: the second sentence
    words: tuple[tuple[str, str], ...] = ()  # ("title", ..), ("formula", ..), ("explanation", ..): the page's words

    def as_dict(self) -> dict:
        out = {"model": self.model, "sentence": self.sentence, "text": self.text,
               "block": self.block, "layer": self.layer, "head": self.head, "stage": self.stage,
               "stage_title": self.stage_title}
        out.update({k: v for k, v in (("edits", self.edits), ("compare", self.compare)) if v})
        return out


def shorten(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def default_caption(meta: ExportMeta, lang: str = "en") -> str:
    L = i18n.fig_labels(lang)
    stage = meta.stage_title or meta.stage
    extra = (f" · {i18n.t('whatif.caption_edits', lang, edits=meta.edits)}" if meta.edits else "") + (
        f" · {i18n.t('compare.caption', lang, text=shorten(meta.compare, 40))}" if meta.compare else "")
    return (f"{meta.model} · {L['sentence']} {meta.sentence} “{shorten(meta.text)}” · {meta.block} · "
            f"{L['layer']} {meta.layer} · {L['head']} {meta.head} · {stage}{extra}")


def with_caption(fig: go.Figure, caption: str, *, theme: str = DEFAULT_THEME) -> go.Figure:
    """A copy of ``fig`` with ``caption`` as the title's subtitle (always visible, never clipped).

    The caption is plain text: anything that looks like markup is escaped.
    """
    out = go.Figure(fig)
    _caption(out, caption, theme)
    return out


def _caption(out: go.Figure, caption: str, theme: str) -> None:
    """``with_caption`` on ``out`` itself."""
    t = get_theme(theme)
    safe = html.escape(caption, quote=False)
    title = out.layout.title
    existing = title.subtitle.text if title.subtitle and title.subtitle.text else ""
    subtitle = f"{existing}<br>{safe}" if existing else safe
    title_text = title.text or " "
    base_px = out.layout.font.size or 12
    title_px = (title.font.size if title.font and title.font.size else None) or t.title_size or 17
    # Room for the title, every caption line and any panel titles that sit above the plot
    # (subplot titles), computed: no automargin, because kaleido can capture a frame in which
    # tick labels have not yet followed an automargin redraw.
    lines = subtitle.count("<br>") + 1
    above = [a for a in out.layout.annotations or ()
             if a.yref == "paper" and a.y is not None and a.y >= 0.99 and a.text]
    panel = max((1.35 * (a.font.size or base_px) * (a.text.count("<br>") + 1) for a in above),
                default=0)
    top = 16 + 1.35 * title_px + 8 + 1.45 * t.caption_size * lines + 16 + panel
    out.update_layout(title={"text": title_text, "y": 1, "yref": "container", "yanchor": "top",
                             "pad": {"t": 16, "l": 20}, "automargin": False,
                             "subtitle": {"text": subtitle, "font": {"size": t.caption_size}}},
                      margin={"t": int(max(top, out.layout.margin.t or 0))})


_UNSAFE = re.compile(r"[^\w.-]+", flags=re.UNICODE)


def slugify(value: object, max_len: int = 40) -> str:
    """A file-name-safe slug: letters (Hangul included), digits, '-', '_' and '.' only.

    No path separators, no leading dots, never empty.
    """
    text = unicodedata.normalize("NFC", str(value))
    text = _UNSAFE.sub("-", text.replace("/", "-").replace("\\", "-"))
    text = re.sub(r"-{2,}", "-", text).strip("-._")
    if len(text) > max_len:
        cut = text[:max_len]
        if "-" in cut[max_len // 2:] and text[max_len] != "-":  # end on a whole word
            cut = cut[: cut.rfind("-")]
        text = cut.strip("-._")
    return text or "x"


def _tag(value: str, n: int) -> str:
    """A slug of at most ``n`` characters that stays distinct when it had to be cut (a short hash)."""
    slug = slugify(value, 200)
    if len(slug) <= n:
        return slug
    digest = hashlib.sha1(value.encode("utf-8")).hexdigest()[:6]
    return f"{slugify(value, n - 7)}-{digest}"


def file_stem(meta: ExportMeta) -> str:
    """e.g. ``seed_s0-hello-world_encoder.self_attn_L0_H1_05-scores``; a what-if figure adds its
    edits (``..._H1_E-no_causal_NN-whatif_pattern``), a comparison its second sentence (``_vs-...``)."""
    is_path = "/" in meta.model or "\\" in meta.model
    model = slugify(Path(meta.model.replace("\\", "/")).stem if is_path else meta.model)
    stage = slugify(meta.stage)
    if meta.stage_index is not None:
        stage = f"{meta.stage_index:02d}-{stage}"
    extra = ([f"E-{_tag(meta.edits, 40)}"] if meta.edits else []) + (
        [f"vs-{slugify(meta.compare, 24)}"] if meta.compare else [])
    return "_".join([model, f"s{meta.sentence}-{slugify(meta.text, 24)}", slugify(meta.block),
                     f"L{meta.layer}", f"H{meta.head}", *extra, stage])


# what a template given as {} is once plotly has validated it (it marks a template set on purpose)
_NO_TEMPLATE = ({}, {"data": {"scatter": [{"type": "scatter"}]}})


def prepare(fig: go.Figure, meta: ExportMeta | None, *, theme: str = DEFAULT_THEME,
            caption: str | None = None, subtitle: str = "") -> go.Figure:
    """The figure as it is exported: themed, with its caption, at the export size. ``subtitle``: lines
    under the title, above the caption (``stage_item``: the shape the figure draws), already escaped.

    One validated copy of the figure is made (``apply_theme``'s), without the figure's template, which
    goes back into the result as the dict it was: plotly validates a template's ~40 trace types each
    time a figure holding one is copied (~15 ms), and the three copies that the shape line, the theme and
    the caption each made cost a teacher's ZIP of the seed's 43 stages (presentation theme) 6.6 CPU-s
    before its first image; now 4.1, most of it the theme's own updates. The figure it gives is the
    same (the same JSON for every stage, theme and language). The result is a figure of plain dicts
    (explorer/fastpath.py): what the renderer sends, read (tests, ``step_figures``) as any figure,
    never changed afterwards.
    """
    d = plain_dict(fig)
    layout = dict(d.get("layout") or {})
    template = layout.pop("template", None)
    out = apply_theme(make_figure(d.get("data") or [], {**layout, "template": {}}, d.get("frames")), theme)
    if subtitle:
        old = out.layout.title.subtitle.text if out.layout.title.subtitle and out.layout.title.subtitle.text else ""
        out.update_layout(title_subtitle_text=(old + "<br>" if old else "") + subtitle)
    if meta is not None or caption:
        _caption(out, caption or default_caption(meta), theme)  # type: ignore[arg-type]
    w, h = export_size(out, theme)
    out.update_layout(width=w, height=h)
    d = out.to_dict()
    if d["layout"].get("template") in _NO_TEMPLATE:  # the theme kept the figure's template
        if template is None:
            d["layout"].pop("template", None)
        else:
            d["layout"]["template"] = template
    return make_figure(d["data"], d["layout"], d.get("frames"))


# ---------------------------------------------------------------------------------------------
# Bundles
# ---------------------------------------------------------------------------------------------

@dataclass
class Item:
    """One figure to export: the prepared figure, its matrix, and what it shows."""

    fig: go.Figure
    df: object | None  # pandas.DataFrame | None
    meta: ExportMeta


@dataclass
class Written:
    name: str
    stage: str
    format: str
    bytes: int


def app_version() -> str:
    try:
        return metadata.version("attention-explorer")
    except metadata.PackageNotFoundError:  # not installed: read the checkout's pyproject
        pass
    try:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


Progress = Callable[[int, int, str], None]  # (done, total, what)


def render_items(items: Sequence[Item], formats: Iterable[str], *, scale: float = 2,
                 progress: Progress | None = None) -> Iterable[tuple[str, ExportMeta, str, bytes]]:
    """Yield (file name, meta, format, bytes) for every item and format, in order. Asked for both, a
    figure's PNG and SVG come from one drawing (renderer.png_and_svg)."""
    formats = check_formats(formats)
    total = sum(1 for it in items for f in formats if f != "csv" or it.df is not None)
    both = {"png", "svg"} <= set(formats)
    done = 0
    for it in items:
        stem = file_stem(it.meta)
        drawn: dict[str, bytes] = {}
        for fmt in formats:
            if fmt == "csv":
                if it.df is None:
                    continue
                data = table_bytes(it.df)
            elif fmt == "gif":  # every frame of an animated figure (one frame otherwise), at layout size
                data = gif_bytes(it.fig)
            elif fmt == "pdf" and it.fig.frames:  # a timeline: a page per frame (PNG/SVG: the step it opens at)
                data = pdf_pages_bytes(it.fig)
            elif both and fmt in ("png", "svg"):
                drawn = drawn or png_and_svg(it.fig, scale=scale)
                data = drawn[fmt]
            else:
                data = figure_bytes(it.fig, fmt, scale=scale)
            done += 1
            if progress:
                progress(done, total, f"{stem}.{fmt}")
            yield f"{stem}.{fmt}", it.meta, fmt, data


def check_formats(formats: Iterable[str]) -> list[str]:
    out: list[str] = []
    for f in formats:
        f = f.strip().lower()
        if f not in FORMATS + ANIMATED_FORMATS:
            raise ValueError(f"unknown format {f!r}; choose from {', '.join(FORMATS + ANIMATED_FORMATS)}")
        if f not in out:
            out.append(f)
    if not out:
        raise ValueError("choose at least one format")
    return out


def manifest(meta: ExportMeta, written: list[Written], *, theme: str, scale: float,
             lang: str, metas: Sequence[ExportMeta] = ()) -> dict:
    """The bundle's description. ``edits``: the edits of its what-if figures ("" when none);
    ``compare``: the second sentence of its comparison figures (only when there is one)."""
    edits = next((m.edits for m in (*metas, meta) if m.edits), "")
    compare = next((m.compare for m in (*metas, meta) if m.compare), "")
    return {
        "app": "Attention Explorer", "app_version": app_version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": meta.model, "sentence": meta.sentence, "text": meta.text, "block": meta.block,
        "layer": meta.layer, "head": meta.head, "theme": theme, "scale": scale, "lang": lang,
        "edits": edits, **({"compare": compare} if compare else {}),
        "files": [w.__dict__ for w in written],
        # the words beside each figure, as the page shows them for this model and run, in ``lang``
        "stages": {m.stage: dict(m.words) for m in (*metas, meta) if m.words},
    }


def zip_items(items: Sequence[Item], formats: Iterable[str], *, theme: str = DEFAULT_THEME,
              scale: float = 2, lang: str = "en", progress: Progress | None = None) -> bytes:
    """One ZIP with every item in every format, plus ``manifest.json`` listing every file."""
    if not items:
        raise ValueError("nothing to export")
    buf = io.BytesIO()
    written: list[Written] = []
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, meta, fmt, data in render_items(items, formats, scale=scale, progress=progress):
            zf.writestr(name, data)
            written.append(Written(name, meta.stage, fmt, len(data)))
        doc = manifest(items[0].meta, written, theme=theme, scale=scale, lang=lang,
                       metas=[it.meta for it in items])
        zf.writestr("manifest.json", json.dumps(doc, ensure_ascii=False, indent=2))
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# From a selection: the same stage figures as the app
# ---------------------------------------------------------------------------------------------

def stage_ids() -> list[str]:
    return list(views.STAGE_IDS)


def stage_item(stage_id: str, cache, info, sel, *, model_name: str, text: str,
               theme: str = DEFAULT_THEME, lang: str = "en", fig: go.Figure | None = None,
               df=None, edits: str | None = None, compare: str | None = None, **options) -> Item:
    """One stage, ready to export: the app's figure (built here unless given), themed, captioned.

    ``options`` go to ``stage_figure`` unchanged (weights=, pe_base=, edited=, other=, ...), so the
    export shows exactly what the app shows. A what-if or comparison stage's edits and second
    sentence (caption, file name, manifest) come from its ``edited=`` / ``other=`` run, or from
    ``edits`` / ``compare`` when the figure is given.
    """
    order = stage_ids()
    if stage_id not in order:
        raise ValueError(f"unknown stage {stage_id!r}; choose from {', '.join(order)}")
    if fig is None:
        fig, df = views.stage_figure(stage_id, cache, info, sel, lang=lang, **options)
    run_edits, run_compare = views.second_run(stage_id, options)
    edits = run_edits if edits is None else edits
    compare = run_compare if compare is None else compare
    said = views.stage_words(stage_id, cache, info, sel, lang, **options)
    shape, shown = said["shape"], ""
    if shape:  # a slide states the shape of what it draws, as the page does
        lines, line = [], ""
        for part in shape.split("; "):  # one line per ~100 characters, never a clipped one
            if line and len(line) + len(part) + 2 > 100:
                lines.append(line)
                line = part
            else:
                line = f"{line}; {part}" if line else part
        lines.append(line)
        shown = "<br>".join(html.escape(x, quote=False) for x in lines)
    meta = ExportMeta(model=model_name, sentence=sel.sentence, text=text, block=sel.block,
                      layer=sel.layer, head=sel.head, stage=stage_id,
                      stage_title=views.stage_title(stage_id, lang, sel.block), stage_index=order.index(stage_id) + 1,
                      edits=edits, compare=compare,
                      words=(("title", said["title"]), ("formula", said["formula"] or ""),
                             ("explanation", said["explain"])))
    cap = views.caption(model_name, text, sel, stage_id, lang=lang, edits=edits, compare=compare)
    return Item(prepare(fig, meta, theme=theme, caption=cap, subtitle=shown), df, meta)


def stage_items(cache, info, sel, *, model_name: str, text: str,
                stages: Sequence[str] | None = None, theme: str = DEFAULT_THEME,
                lang: str = "en", **options) -> list[Item]:
    """Every requested stage (default: all, in pipeline order) of one selection."""
    order = stage_ids()
    wanted = order if stages is None else list(stages)
    unknown = [s for s in wanted if s not in order]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(order)}")
    return [stage_item(sid, cache, info, sel, model_name=model_name, text=text, theme=theme,
                       lang=lang, **options) for sid in wanted]


def bundle_zip(cache, info, sel, *, model_name: str, text: str,
               formats: Iterable[str] = IMAGE_FORMATS + ("csv",), stages: Sequence[str] | None = None,
               theme: str = DEFAULT_THEME, lang: str = "en", scale: float = 2,
               progress: Progress | None = None, **options) -> bytes:
    """"Export all" for one selection: every stage's figure in ``formats`` + CSVs + manifest.

    ``options`` go to ``stage_figure`` (weights=, pe_base=, ...).
    """
    items = stage_items(cache, info, sel, model_name=model_name, text=text, stages=stages,
                        theme=theme, lang=lang, **options)
    return zip_items(items, formats, theme=theme, scale=scale, lang=lang, progress=progress)
