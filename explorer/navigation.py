"""The page's navigation as one control, read from the stage registry (no Streamlit here).

One list holds every place the page can go: first the pipeline's stages in order, each drawn on
its own (``view=stage&stage=<id>`` in the URL), then the pages that draw several stages at once
(``view=<page>``: everything, one section, decoding, what if, two sentences). The page draws it
as one select box between a back and a forward button, so that the chosen stage's figure starts
right under it (``tests/test_e2e.py`` measures where the figure lands at 1366×768 and, in
presenter mode, at 1920×1080).

    ids = pipeline(info, block)            # the stages this model and block have
    entries(ids)                           # ("stage:tokens", ..., "view:all", "view:tokens", ...)
    value("stage", "softmax")              # "stage:softmax"
    parse("view:whatif")                   # ("whatif", None)
"""
from __future__ import annotations

import functools

from explorer import i18n, inputs
from explorer.views import stages

STAGE_VIEW = "stage"
OWN_VIEWS = ("decoding",)  # sections with a page of their own: not part of the pipeline or "all"
_STAGE, _VIEW = "stage:", "view:"


@functools.lru_cache(maxsize=64)
def pipeline(info, block: str) -> tuple[str, ...]:
    """The stages along the pipeline for this model and block, in the registry's order: those of
    the pages of their own (decoding), those comparing with a second run (what if, two sentences:
    ``Stage.needs``) and those drawn on demand are left out; the pages show them."""
    return tuple(sid for sec, ids in stages.SECTIONS if sec not in OWN_VIEWS for sid in ids
                 if not stages.REGISTRY[sid].needs and not stages.REGISTRY[sid].on_demand
                 and stages.applies(sid, info, block))


def entries(ids: tuple[str, ...], views: tuple[str, ...] = inputs.VIEWS) -> tuple[str, ...]:
    """Every place to go: the stages ``ids`` one by one, then every page but the one-stage page."""
    return tuple(_STAGE + s for s in ids) + tuple(_VIEW + v for v in views if v != STAGE_VIEW)


def value(view: str, stage: str | None) -> str:
    """The entry of a (view, stage) state."""
    return _STAGE + str(stage) if view == STAGE_VIEW else _VIEW + view


def parse(entry: str) -> tuple[str, str | None]:
    """(view, stage) of an entry; stage is None for a page of several stages."""
    if entry.startswith(_STAGE):
        return STAGE_VIEW, entry[len(_STAGE):]
    return entry[len(_VIEW):] if entry.startswith(_VIEW) else entry, None


def label(entry: str, ids: tuple[str, ...], lang: str) -> str:
    """"13. Softmax weights" for a stage (its place along this model's pipeline), "Page: Everything"
    for a page."""
    view, sid = parse(entry)
    if sid is not None:
        number = ids.index(sid) + 1 if sid in ids else "?"
        return f"{number}. {stages.stage_title(sid, lang)}"
    return i18n.t("nav.page", lang, name=i18n.t(f"section_{view}", lang))


def step(all_entries: tuple[str, ...], entry: str, by: int) -> str | None:
    """The entry ``by`` places along among its own kind (from a stage the next stage, from a page
    the next page; back: -1, forward: +1), or None past either end."""
    kind = _STAGE if entry.startswith(_STAGE) else _VIEW
    same = [e for e in all_entries if e.startswith(kind)]
    if entry not in same:
        return None
    i = same.index(entry) + by
    return same[i] if 0 <= i < len(same) else None
