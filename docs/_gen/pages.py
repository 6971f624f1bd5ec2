"""The gen-files script (mkdocs.yml): the pages made from the code when the site is built.

- stages.md, stages.ko.md: the stage registry, with each stage's words, formula and figure (gen_stages)
- lessons.md, lessons.ko.md: the lessons' catalogue (gen_lessons)
- models.md: the model registry and the families (gen_models)
- api.md: mkdocstrings directives (gen_api)
- javascripts/plotly.min.js: the installed plotly package's own plotly.js, for the stage figures
- the benchmark tables, generated from bench/results/*.json, put in place of their markers in
  benchmarks.md and in the host's guides (gen_bench)

The i18n plugin builds the site once per language; the pages are made once per build (cached here
for the staging folder of docs/_gen/staging.py) and written again for the next language.
"""
from __future__ import annotations

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


def images(text: str, docs_dir: Path) -> str:
    """``<!-- images:LANG -->``: the screenshots of the page in that language that exist in docs/images/
    (made from the running app by scripts/screenshots.py: ``NAME-LANG.png``); none yet, nothing."""
    import re

    def one(m):
        lang = m.group(1)
        found = sorted((docs_dir / "images").glob(f"*-{lang}.png")) if (docs_dir / "images").is_dir() else []
        return "\n\n".join(f"![{p.stem}](images/{p.name})" for p in found)

    return re.sub(r"<!-- images:([a-z]{2}) -->", one, text)


def make(docs_dir: Path) -> dict[str, str | bytes]:
    import plotly

    pages: dict[str, str | bytes] = {}
    timings = {}
    for name, gen in (("stages", gen_stages), ("lessons", gen_lessons), ("models", gen_models), ("api", gen_api)):
        t = time.process_time()
        pages.update(gen.generate())
        timings[name] = time.process_time() - t
    tables = gen_bench.tables()
    for page in sorted(docs_dir.rglob("*.md")):  # hand-written pages with markers: their tables, images
        text = page.read_text(encoding="utf-8")
        if "<!-- bench:" in text or "<!-- images:" in text:
            name = page.relative_to(docs_dir).as_posix()
            pages[name] = images(gen_bench.fill(text, tables), docs_dir)
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
