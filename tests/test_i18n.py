"""The word catalogue (explorer/i18n.py): both languages everywhere, every key used, and no English
catalogue word in a figure or table built in Korean."""
from __future__ import annotations

import ast
import functools
import re
import string
from pathlib import Path

import pandas as pd
import pytest

import model
from explorer import i18n, inputs
from explorer.views import stages

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for p in (ROOT / "explorer").rglob("*.py") if p.name != "i18n.py"]


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_key_has_both_languages_with_the_same_placeholders():
    for key, entry in i18n.WORDS.items():
        assert set(entry) == set(i18n.LANGS), key
        assert all(entry[lang].strip() for lang in i18n.LANGS), key
        assert placeholders(entry["en"]) == placeholders(entry["ko"]), key


def test_unknown_keys_fail_loudly_and_unknown_languages_fall_back_to_english():
    with pytest.raises(KeyError):
        i18n.t("no such key")
    assert i18n.t("layer", "xx") == i18n.t("layer", "en")
    assert set(i18n.fig_labels("en")) == set(i18n.fig_labels("ko"))


def string_literals(paths) -> set[str]:
    out: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def unused_keys(words: dict, literals: set[str]) -> list[str]:
    """Keys no code can reach: not written out, not the suffix of a family read by suffix
    ("fig." through fig_labels, "export." through export_ui._t), not made from a registry."""
    dynamic = {key for record in stages.REGISTRY.values() for key in record.keys()}  # the registry's words
    dynamic |= {f"positional.{kind}" for kind in ("sinusoidal", "learned", "rotary")}  # ModelInfo.positional
    dynamic |= {f"blocks.{b}" for b in stages.BLOCKS} | {f"models.{m}" for m in inputs.MODELS}
    dynamic |= {f"section_{s}" for s, _ in stages.SECTIONS} | {f"section_{v}" for v in inputs.VIEWS}
    out = []
    for key in words:
        family, _, suffix = key.partition(".")
        if key in literals or key in dynamic:
            continue
        if family in ("fig", "export", "chain", "dim", "tx") and suffix in literals:
            continue
        out.append(key)
    return out


def test_every_key_is_used():
    literals = string_literals(SOURCES)
    assert unused_keys(i18n.WORDS, literals) == []
    # and the check can fail: a key nobody reads is reported
    assert unused_keys({**i18n.WORDS, "fig.zz_never_read": {"en": "x", "ko": "y"}}, literals) == ["fig.zz_never_read"]


def test_no_language_dict_outside_the_catalogue():
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"""["']ko["']\s*:""", text), f"{path.name} holds words of its own"


# --- no English in Korean -------------------------------------------------------------------------

TEXT_KEYS = ("text", "ticktext", "name", "hovertemplate", "customdata")


def figure_strings(obj, key: str | None = None):
    """Every string a reader can see in a figure's dict (titles, labels, hover, legend, cells)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k != "template":
                yield from figure_strings(v, k)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from figure_strings(v, key)
    elif hasattr(obj, "dtype") and obj.dtype.kind in "UO" and key in TEXT_KEYS:
        yield from (str(x) for x in obj.ravel())
    elif isinstance(obj, str) and key in TEXT_KEYS:
        yield obj


def table_strings(df: pd.DataFrame):
    yield from (str(c) for c in df.columns)
    yield from (str(n) for n in [df.index.name, df.columns.name] if n)
    for col in df.columns:
        if df[col].dtype == object:
            yield from (str(x) for x in df[col])


class EnglishWords(dict):
    """``{entry: whole-word pattern}``, and ``found(strings)``: the (entry, string) pairs where an
    entry's pattern occurs, the same pairs as trying every pattern on every string, much faster.

    Each distinct string is searched once, and only with the patterns whose first Latin word (a run
    of A-Z/a-z, case folded) is one of the string's own Latin words: where a pattern matches, that
    run of its text is bounded in the string by a non-letter or the pattern's edge on both sides
    (its look-around on the outside, its own non-letters inside), so it is one of the string's runs.
    (Trying ~1,000 patterns on every string was 106 million searches for one model's stages.)"""

    def __init__(self, patterns: dict[str, re.Pattern], firsts: dict[str, str]):
        super().__init__(patterns)
        self._by_first: dict[str, list[tuple[str, re.Pattern]]] = {}
        for what, pattern in patterns.items():
            self._by_first.setdefault(firsts[what], []).append((what, pattern))

    def found(self, strings) -> list[tuple[str, str]]:
        out = []
        for s in dict.fromkeys(strings):
            for word in {w.lower() for w in LATIN_RUN.findall(s)} & self._by_first.keys():
                out += [(what, s) for what, pattern in self._by_first[word] if pattern.search(s)]
        return out


LATIN_RUN = re.compile(r"[A-Za-z]+")


@functools.cache
def english_words() -> EnglishWords:
    """The English side of every entry that Korean says differently, as whole-word patterns
    (placeholder templates are split at their placeholders)."""
    out, firsts = {}, {}
    for key, entry in i18n.WORDS.items():
        if entry["en"] == entry["ko"]:
            continue
        for part in re.split(r"\{[^}]*\}", entry["en"]):
            part = part.strip(" .:,;()—-·")
            if re.search(r"(?<![A-Za-z_])[A-Za-z]{3,}(?![A-Za-z_])", part):  # a word, not only symbols
                out[f"{key}: {part}"] = re.compile(rf"(?<![A-Za-z_]){re.escape(part)}(?![A-Za-z_])", re.I)
                firsts[f"{key}: {part}"] = LATIN_RUN.search(part).group().lower()
    return EnglishWords(out, firsts)


def clean(text: str) -> str:
    text = re.sub(r"%\{[^}]*\}", " ", text)  # plotly's hover placeholders
    return re.sub(r"<[^>]*>", " ", text)  # <br>, <b>, <extra>


def english_in_korean(m, texts, names=stages.STAGE_IDS) -> list[str]:
    run = stages.run_data(m, texts)
    words = english_words()
    found = []
    for block in m.info.blocks:
        sel = stages.Selection(m.info.name, 1, 0, 1, block, 1, 1)
        for sid in names:
            fig, df = stages.stage_figure(sid, run, m.info, sel, lang="ko")
            seen = [clean(s) for s in figure_strings(fig.to_dict())]
            if df is not None:
                seen += [str(s) for s in table_strings(df)]
            found += [f"{block} {sid}: {what!r} in {s[:80]!r}" for what, s in words.found(seen)]
    return found


TEXTS = ["안녕하세요 반갑습니다", "12 34"]


def test_korean_figures_and_tables_carry_no_english_catalogue_word_seed():
    assert english_in_korean(model.load("seed", random=True, d_model=32, n_heads=2), TEXTS) == []


@pytest.mark.weights
@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_korean_figures_and_tables_carry_no_english_catalogue_word_real(name):
    try:
        m = model.load(name)
    except model.WeightsError as e:
        pytest.skip(str(e))
    assert english_in_korean(m, TEXTS) == []


def test_the_english_check_can_fail():
    """An English table column in a Korean table is found."""
    m = model.load("seed", random=True, d_model=32, n_heads=2)
    run = stages.run_data(m, TEXTS)
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    _, df = stages.stage_figure("overview", run, m.info, sel, lang="en")  # English on purpose
    words = english_words()
    assert any(p.search(s) for s in table_strings(df) for p in words.values())
    # found() finds exactly what trying every pattern on every string finds (English figures: many)
    seen = list(table_strings(df))
    for sid in ("tokens", "qkv", "scaled", "mask", "softmax", "z", "out"):
        seen += [clean(s) for s in figure_strings(stages.stage_figure(sid, run, m.info, sel, lang="en")[0].to_dict())]
    every = {(what, s) for s in seen for what, p in words.items() if p.search(s)}
    assert len(every) > 20 and set(words.found(seen)) == every


def test_the_words_are_data_files_a_translator_edits(tmp_path):
    """One TOML file a language, the same keys in the same order; a key a translation lacks falls
    back to English on the page (and fails the test above); a table where text belongs is refused."""
    import tomllib

    files = {lang: tomllib.loads((i18n.WORDS_DIR / f"{lang}.toml").read_text(encoding="utf-8")) for lang in i18n.LANGS}
    assert list(files["ko"]) == list(files["en"]) == list(i18n.WORDS)
    assert {k: v["ko"] for k, v in i18n.WORDS.items()} == files["ko"]
    en = (i18n.WORDS_DIR / "en.toml").read_text(encoding="utf-8")
    (tmp_path / "en.toml").write_text(en, encoding="utf-8")
    (tmp_path / "ko.toml").write_text('"layer" = "레이어"\n', encoding="utf-8")
    partial = i18n._load(tmp_path)
    assert partial["layer"] == {"en": "Layer", "ko": "레이어"} and partial["head"] == {"en": "Head"}
    (tmp_path / "ko.toml").write_text('stage.softmax.title = "x"\n', encoding="utf-8")  # unquoted: a table
    with pytest.raises(ValueError, match="not plain text"):
        i18n._load(tmp_path)
