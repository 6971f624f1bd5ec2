"""Every word Attention Explorer shows, in English (the default) and Korean: one catalogue.

    t("layer", "ko")                       -> "레이어"
    t("stage.softmax.title", "ko")         -> a stage's title (its explanation: "stage.softmax.explain")
    fig_labels("ko")["query"]              -> "쿼리"  (the "fig." words, as the views read them)

The words live in data files, one a language (``explorer/words/en.toml``, ``ko.toml``, TOML read
by the standard library's tomllib): a translator edits those, not Python. Nothing else in the
project holds words in two languages: the app, the views, the tables, the exporter and the export
controls all read this table. ``tests/test_i18n.py`` fails when a key has only one language, when a
key is never used, or when a figure or table built in Korean carries a word of this catalogue in
English.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

LANGS = ("en", "ko")
LANG_NAMES = {"en": "English", "ko": "한국어"}

WORDS_DIR = Path(__file__).resolve().parent / "words"


def _load(words_dir: Path = WORDS_DIR) -> dict[str, dict[str, str]]:
    """{key: {lang: text}} from ``words/{lang}.toml`` (one data file a language, the English file's
    order). A key a language's file lacks is left out of that language: ``t`` then falls back to
    English, and tests/test_i18n.py fails until the translation is there."""
    files = {lang: tomllib.loads((words_dir / f"{lang}.toml").read_text(encoding="utf-8")) for lang in LANGS}
    for lang, words in files.items():
        odd = [k for k, v in words.items() if not isinstance(v, str)]
        if odd:
            raise ValueError(f"words/{lang}.toml: {odd[:3]} are not plain text (a key with a dot needs quotes)")
    keys = dict.fromkeys(k for lang in LANGS for k in files[lang])
    return {k: {lang: files[lang][k] for lang in LANGS if k in files[lang]} for k in keys}


WORDS: dict[str, dict[str, str]] = _load()


def lang_or_default(lang: str | None) -> str:
    return lang if lang in LANGS else "en"


def t(key: str, lang: str = "en", **kw) -> str:
    """The catalogue's ``key`` in ``lang`` with ``{placeholders}`` filled in (KeyError if unknown:
    a misspelt key fails loudly instead of showing itself on the page)."""
    words = WORDS[key]
    text = words.get(lang_or_default(lang), words["en"])
    return text.format(**kw) if kw else text


_FIG_LABELS: dict[str, dict[str, str]] = {}


def fig_labels(lang: str = "en") -> dict[str, str]:
    """The figure and table labels ("fig.*" keys, without the prefix) in ``lang`` (a copy of the
    language's labels, gathered once: a page asks for them for every figure and caption)."""
    lang = lang_or_default(lang)
    labels = _FIG_LABELS.get(lang)
    if labels is None:
        labels = _FIG_LABELS[lang] = {k[4:]: v[lang] for k, v in WORDS.items() if k.startswith("fig.")}
    return dict(labels)


def stage_text(stage_id: str, lang: str = "en") -> dict[str, str]:
    """{"title", "explain"} of one stage in ``lang``, as templates: a stage whose words follow the model
    has one explanation per variant (stage.{id}.explain.{variant}); this gives the first of them. The
    words for a model and a run: ``explorer.views.stages.stage_words``."""
    key = f"stage.{stage_id}.explain"
    if key not in WORDS:
        key = next(k for k in WORDS if k.startswith(key + "."))
    return {"title": t(f"stage.{stage_id}.title", lang), "explain": t(key, lang)}
