"""The gen-files script (mkdocs.yml): the parts of the site made from the code when it is built.

- in docs/stages.md and stages.ko.md: a section per stage of the registry, with its words, formula and
  figure (gen_stages)
- in docs/lessons.md and lessons.ko.md: every lesson of the catalogue and its question (gen_lessons)
- in docs/models.md: the built-in models and the families (gen_models)
- api.md, whole: mkdocstrings directives (gen_api)
- javascripts/plotly.min.js: the installed plotly package's own plotly.js, for the stage figures
- the benchmark tables, from bench/results/*.json, in benchmarks.md and the host's guides (gen_bench)

A hand-written page says where a generated part goes with a marker: ``<!-- gen:NAME -->`` (a
generator's part), ``<!-- bench:NAME -->`` (a benchmark table), ``<!-- images:LANG -->`` (the
screenshots in that language that exist); an unknown name fails the build.

The i18n plugin builds the site once per language; the parts are made once (cached here for the
staging folder of docs/_gen/staging.py) and written again for the next language.
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import mkdocs_gen_files

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]  # the generators, and the project they read

import gen_api  # noqa: E402
import gen_bench  # noqa: E402
import gen_lessons  # noqa: E402
import gen_models  # noqa: E402
import gen_stages  # noqa: E402

_cache = sys.modules.setdefault("_attention_explorer_docs_cache", type(sys)("_attention_explorer_docs_cache"))


def _part(parts: dict[str, str], name: str) -> str:
    if name not in parts:
        raise KeyError(f"no generated part {name!r}; there are {sorted(parts)}")
    return parts[name]


def images(text: str, docs_dir: Path) -> str:
    """``<!-- images:LANG -->``: the screenshots of the page in that language that exist in docs/images/
    (made from the running app by scripts/screenshots.py, named ``NAME-LANG.png``); none yet, nothing."""

    def one(m):
        lang = m.group(1)
        found = sorted((docs_dir / "images").glob(f"*-{lang}.png")) if (docs_dir / "images").is_dir() else []
        return "\n\n".join(f"![{p.stem}](images/{p.name})" for p in found)

    return re.sub(r"<!-- images:([a-z]{2}) -->", one, text)


def make(docs_dir: Path) -> dict[str, str | bytes]:
    import plotly

    parts: dict[str, str] = {}
    timings = {}
    for name, gen in (("stages", gen_stages), ("lessons", gen_lessons), ("models", gen_models)):
        t = time.process_time()
        parts.update(gen.generate())
        timings[name] = time.process_time() - t
    pages: dict[str, str | bytes] = dict(gen_api.generate())
    tables = gen_bench.tables()
    for page in sorted(docs_dir.rglob("*.md")):  # hand-written pages with markers
        text = page.read_text(encoding="utf-8")
        if re.search(r"<!-- (gen|bench|images):", text):
            text = gen_bench.fill(text, tables)
            text = re.sub(r"<!-- gen:([a-z0-9-]+) -->", lambda m: _part(parts, m.group(1)), text)
            pages[page.relative_to(docs_dir).as_posix()] = images(text, docs_dir)
    pages["javascripts/plotly.min.js"] = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    print("docs/_gen/pages.py: CPU s " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()), file=sys.stderr)
    return pages


docs_dir = Path(mkdocs_gen_files.config.docs_dir)
made = getattr(_cache, "pages", None)
if made is None or getattr(_cache, "docs_dir", None) != docs_dir:
    made = _cache.pages = make(docs_dir)
    _cache.docs_dir = docs_dir
for name, content in made.items():
    with mkdocs_gen_files.open(name, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)
