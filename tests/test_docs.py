"""The documentation site (mkdocs.yml, docs/): built strictly, as `mkdocs build --strict` builds it, once
for the file; its generated pages checked against what they are generated from (the stage registry,
the lessons' catalogue, bench/results/*.json, the docstrings), both guides in both languages, and a
strict build shown to fail on a link to a missing page. The README stays short and its links resolve."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from explorer import i18n
from explorer.lessons import catalog
from explorer.views import stages

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS = ROOT / "bench" / "results"


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = _mkdocs(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def page(site: Path, name: str, lang: str = "en") -> str:
    path = site / ("" if lang == "en" else lang) / name / "index.html"
    assert path.is_file(), f"the site has no {path.relative_to(site)}"
    return path.read_text(encoding="utf-8")


def text_of(html_text: str) -> str:
    """The page's visible text, tags dropped and entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


# --- the generated pages ------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_stage_of_the_registry_has_its_section_words_and_figure(site, lang):
    doc = page(site, "stages", lang)
    for sid in stages.STAGE_IDS:
        assert f'id="{sid}"' in doc, f"stages ({lang}) has no section for {sid!r}"
        heading = re.search(rf'<h3 id="{re.escape(sid)}">(.*?)<a class="headerlink"', doc, re.S)
        titles = {stages.stage_title(sid, lang, block) for block in (None, *stages.BLOCKS)}  # the mask's names its block
        assert heading and text_of(heading.group(1)).strip() in titles, f"stages ({lang}): {sid!r} without its title"
        fig = re.search(rf'<script type="application/json" data-figure="fig-{re.escape(sid)}">(.*?)</script>', doc, re.S)
        assert fig, f"stages ({lang}): {sid!r} without its figure"
        assert json.loads(fig.group(1).replace("<\\/", "</"))["data"], f"stages ({lang}): {sid!r}'s figure is empty"
    # the words are the words engine's, for the model the page names (the seed, layer 0, head 1)
    import model

    m = model.load("seed")
    run = stages.run_data(m, ["hello world", "attention"])
    sel = stages.Selection(model="seed", sentence=0, layer=0, head=1, block="encoder.self_attn", query=2, key=1)
    words = stages.stage_words("softmax", run, m.info, sel, lang)
    section = doc[doc.index('id="softmax"'):doc.index('data-figure="fig-softmax"')]
    assert words["explain"] in text_of(section) and "seed" in text_of(section)


def test_the_stage_pages_draw_with_plotly_included_once(site):
    doc = page(site, "stages")
    assert doc.count("plotly.min.js") == 1 and (site / "javascripts" / "plotly.min.js").stat().st_size > 1_000_000
    assert (site / "javascripts" / "figures.js").is_file() and not (site / "ko" / "javascripts").exists()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_lesson_with_its_title_and_question_in_both_languages(site, lang):
    doc = page(site, "lessons", lang)
    shown = text_of(doc)
    for lesson in catalog.LESSONS:
        assert f'id="lesson-{lesson.number}"' in doc, f"lessons ({lang}) has no lesson {lesson.number}"
        assert i18n.t(lesson.title, lang) in shown, f"lessons ({lang}): lesson {lesson.number}'s title"
    question = {"en": "The question", "ko": "질문"}[lang]
    blocks = re.findall(rf"<strong>{question}</strong></p>\s*<blockquote>\s*<p>(.*?)</p>", doc, re.S)
    assert len(blocks) == len(catalog.LESSONS), f"lessons ({lang}): {len(blocks)} questions for {len(catalog.LESSONS)} lessons"
    # a lesson on the seed model asks the page's own question on its default sentence
    import model

    first = catalog.LESSONS[0]
    m = model.load(first.parts[0].model)
    q = first.ask([catalog.run_part(first.parts[0], m, list(first.texts))], lang)
    assert html.unescape(blocks[0]) == q.prompt


def test_a_benchmark_table_holds_the_json_numbers(site):
    """Every workshop run's click, sentence and burst p95 and peak RSS, as the result files hold them."""
    rows = re.findall(r"<tr>(.*?)</tr>", page(site, "benchmarks"), re.S)
    table = {}
    for row in rows:
        cells = [text_of(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if len(cells) == 11 and cells[0].startswith("workshop") and cells[0].endswith(".json"):
            table.setdefault(cells[0], []).append(cells)
    files = sorted(RESULTS.glob("workshop*.json"))
    assert files and set(table) == {f.name for f in files if "workshop" in json.loads(f.read_text())}

    def close(shown: str, value: float) -> bool:  # printed to 3 significant digits, whole numbers from 100
        return abs(float(shown) - value) <= (0.5 if abs(value) >= 100 else 5e-3 * abs(value) + 1e-12)

    checked = 0
    for f in files:
        data = json.loads(f.read_text())
        runs = (data.get("workshop") or []) + (data.get("workshop_baseline") or [])
        if "workshop" not in data:
            continue
        assert len(table[f.name]) == len(runs)
        for cells, w in zip(table[f.name], runs):
            assert cells[2] == w["model"] and int(cells[3]) == w["learners"] and int(cells[4]) == w["replicas"]
            for cell, kind in zip(cells[6:9], ("click", "sentence", "burst")):
                value = w[kind]["p95_s"] if kind in w else w[f"{kind}_p95"]
                assert close(cell, value), f"{f.name}: {kind} p95 shown {cell}, the file holds {value}"
                checked += 1
            if "rss_max_mb" in w:
                assert close(cells[10], w["rss_max_mb"])
    assert checked >= 3 * len(files)


def test_the_memory_table_is_the_one_deploy_memory_prints(site):
    import importlib.util

    spec = importlib.util.spec_from_file_location("deploy_memory", ROOT / "deploy" / "memory.py")
    memory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(memory)
    for lang in ("en", "ko"):
        shown = text_of(page(site, "host", lang))
        for (name, learners), v in memory.peaks().items():
            assert re.search(rf"{re.escape(name)}\s+{learners}(?: \(per core\))?\s+{v['rss_mb']:.0f}\b", shown), \
                f"host ({lang}): no row {name}, {learners} learners, {v['rss_mb']:.0f} MiB"


def test_the_api_page_documents_model_load(site):
    doc = page(site, "api")
    assert 'id="model.registry.load"' in doc
    assert "Load a model by name" in text_of(doc)
    for name in ("model.runtime.base.HookedModel.run_with_cache", "model.runtime.base.HookedModel.generate_with_cache",
                 "model.analysis.patching.patch_positions", "explorer.views.stages.stage_figure"):
        assert f'id="{name}"' in doc, f"the API page does not document {name}"
    shows = (ROOT / "explorer" / "notebook.py").is_file() and "def show(" in (ROOT / "explorer" / "notebook.py").read_text()
    assert ('id="explorer.notebook.show"' in doc) == shows


# --- the guides -------------------------------------------------------------------------------------

COMMANDS = ("sh scripts/setup.sh && streamlit run explorer/app.py", "/lessons?lesson=", "present=1")
# what a reader must find on screen to start the app, open a lesson and present it
LABELS = ("language", "model", "layer", "head", "nav.lessons", "lessons.pick", "lessons.guess", "lessons.reveal",
          "present.toggle", "present.share", "poll.ask", "poll.key_label", "poll.reveal", "export.all")


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_both_guides_in_both_languages_with_the_real_commands_and_labels(site, lang):
    teacher = text_of(page(site, "teacher", lang))
    host = text_of(page(site, "host", lang))
    assert f'<html lang="{lang}"' in page(site, "teacher", lang)
    for command in COMMANDS:
        assert command in teacher, f"teacher ({lang}) lacks {command!r}"
    for key in LABELS:
        assert i18n.t(key, lang) in teacher, f"teacher ({lang}) does not name the page's {key!r}: {i18n.t(key, lang)!r}"
    for command in ("sh scripts/serve.sh --replicas 2", "docker compose -f deploy/compose.yaml up",
                    "kubectl apply -R -f deploy/k8s/", "ATTENTION_EXPLORER_ACCESS_CODE"):
        assert command in host, f"host ({lang}) lacks {command!r}"
    if lang == "ko":  # the Korean guides are Korean, not the English fallback
        assert len(re.findall(r"[가-힣]", teacher)) > 1500 and len(re.findall(r"[가-힣]", host)) > 1500


# --- strict means strict --------------------------------------------------------------------------

def _small_site(tmp_path: Path, index: str) -> Path:
    """A copy of the site's configuration (theme, languages, strict) over one page, without the
    generated pages (they are the expensive part, and not what this shows)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir(parents=True)
    (docs / "index.md").write_text(index)
    config.update(docs_dir=str(docs), nav=[{"Home": "index.md"}], extra_javascript=[])
    config.pop("hooks", None)
    config.pop("exclude_docs", None)
    config["plugins"] = [p for p in config["plugins"] if not (isinstance(p, dict) and ({"gen-files", "mkdocstrings"} & set(p)))]
    assert config["strict"] is True and any(isinstance(p, dict) and "i18n" in p for p in config["plugins"])
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


def test_a_link_to_a_missing_page_fails_the_strict_build(tmp_path):
    good = _mkdocs(_small_site(tmp_path / "good", "# Home\n\nNothing broken.\n"), tmp_path / "good-site")
    assert good.returncode == 0, good.stderr[-2000:]
    bad = _mkdocs(_small_site(tmp_path / "bad", "# Home\n\nSee [the guide](no-such-page.md).\n"), tmp_path / "bad-site")
    said = bad.stdout + bad.stderr
    assert bad.returncode != 0 and "no-such-page.md" in said and "strict mode" in said, said[-2000:]


# --- the README ---------------------------------------------------------------------------------------

def test_the_readme_is_short_and_its_links_resolve():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 250, f"README.md is {len(lines)} lines"
    assert lines[lines.index("# run every test") + 1].endswith("python -m pytest")  # what .ci/run runs
    assert not re.search(r"\bissues? \d+", text, re.I)
    links = re.findall(r"\]\(((?:docs/)[^)#\s]+)(?:#[^)]*)?\)", text)
    assert {"docs/teacher.md", "docs/teacher.ko.md", "docs/host.md", "docs/host.ko.md"} <= set(links)
    for link in links:
        assert (ROOT / link).is_file(), f"README.md links to {link}, which does not exist"
