"""The explorer in a notebook: ``explorer.show`` (explorer/notebook.py) and the two example notebooks
(docs/notebooks/explorer_en.ipynb, explorer_ko.ipynb), executed end to end with nbclient in a real
Jupyter kernel, their outputs checked: every code cell ran, every ``explorer.show`` drew its plotly
figure, and the words beside it are in the notebook's language."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "docs" / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"
HANGUL = re.compile(r"[\uac00-\ud7a3]")

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def test_import_explorer_stays_light():
    """``import explorer`` and ``explorer.show`` import no Streamlit (a notebook has no server)."""
    code = ("import sys, explorer; assert 'torch' not in sys.modules, 'import explorer loaded torch'; "
            "explorer.show; assert 'streamlit' not in sys.modules, sorted(m for m in sys.modules if 'streamlit' in m)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr


def test_show_is_the_pages_figure_and_words(seed):
    """The figure and words are ``stage_figure`` and ``stage_words`` of the same run (what the page and
    the exporter draw), and bad arguments say what to give."""
    import explorer
    from explorer.views import stages

    texts = ["hello world", "dcba"]
    shown = explorer.show(seed, texts, stage="softmax", layer=1, head=2, lang="ko")
    run = stages.run_data(seed, texts)
    sel = stages.Selection(model=seed.info.name, sentence=0, layer=1, head=2, block="encoder.self_attn")
    fig, df = stages.stage_figure("softmax", run, seed.info, sel, lang="ko")
    words = stages.stage_words("softmax", run, seed.info, sel, "ko")
    assert shown.figure.to_json() == fig.to_json()
    assert shown.table.equals(df)
    assert (shown.title, shown.formula, shown.explanation) == (words["title"], words["formula"], words["explain"])
    assert HANGUL.search(shown.title) and "<h3>" in shown._repr_html_()
    other = explorer.show(seed, texts, stage="softmax", layer=1, head=3, lang="ko")
    assert other.figure.to_json() != shown.figure.to_json()  # another head, another figure

    with pytest.raises(ValueError, match="choose one of: tokens"):
        explorer.show(seed, texts, stage="nope")
    with pytest.raises(ValueError, match=r"head=9 is out of range: .* so use 0\.\.3"):
        explorer.show(seed, texts, head=9)
    with pytest.raises(ValueError, match=r"layer=5 is out of range"):
        explorer.show(seed, texts, layer=5)
    with pytest.raises(ValueError, match="block='decoder.nope' does not exist"):
        explorer.show(seed, texts, block="decoder.nope")
    with pytest.raises(ValueError, match="not one .* has"):
        explorer.show(seed, texts, stage="rope_freqs")  # rotary only; the seed's positions are sinusoidal
    with pytest.raises(ValueError, match="give edits="):
        explorer.show(seed, texts, stage="whatif_pattern")


def test_show_draws_every_stage_of_every_block(seed):
    """Every stage the seed model has, in each of its three blocks, through ``explorer.show``: a figure
    with data and the words of that stage, in English and in Korean (the stages that compare with a
    second run get one: an edited run, a second sentence of as many tokens for patching). Layer 0:
    a stage such as qk_terms draws its split there only, and says so in a later layer."""
    import explorer
    from explorer.views import stages

    texts = ["hello world", "dcba"]
    shown_stages = set()
    for block in stages.blocks_for(seed.info):
        for sid in explorer.stage_ids(seed, block):
            extra = {"edits": "temperature=2"} if stages.REGISTRY[sid].needs == "edited" else \
                {"compare": "dlrow olleh"} if stages.REGISTRY[sid].needs == "other" else {}
            for lang in ("en", "ko"):
                shown = explorer.show(seed, texts, stage=sid, block=block, layer=0, head=1, lang=lang, **extra)
                assert shown.stage == sid and shown.figure.data, (block, sid, lang)
                assert shown.title.strip() and shown.explanation.strip(), (block, sid, lang)
                assert bool(HANGUL.search(shown.title + shown.explanation)) == (lang == "ko"), (block, sid, lang, shown.title)
            shown_stages.add(sid)
    # every stage of the registry that applies to the seed model in some block was shown
    assert shown_stages == {s for s in stages.STAGE_IDS if any(stages.applies(s, seed.info, b) for b in stages.blocks_for(seed.info))}
    assert len(shown_stages) >= 20, sorted(shown_stages)


def test_show_escapes_the_run_s_text(seed):
    """Tokens in the words are text, never markup, in the HTML and the Markdown a notebook renders."""
    import explorer

    shown = explorer.show(seed, "<b>x</b>", stage="tokens")
    page = shown._repr_html_() + shown._words_markdown()
    assert "<b>x</b>" not in page.replace(shown.figure._repr_html_() or "", "")


def _run(path: Path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    client.execute()  # raises CellExecutionError (with the cell and its traceback) when a cell fails
    return nb


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_notebook_runs_end_to_end(lang):
    from explorer.views import stages

    nb = _run(NOTEBOOKS / f"explorer_{lang}.ipynb")
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c in code:
        assert c.execution_count is not None and not [o for o in c.outputs if o.output_type == "error"], c.source
    shows = [c for c in code if "explorer.show(" in c.source and "display(shown)" not in c.source]
    assert len(shows) >= 5
    headings = []
    for c in shows:
        data = [o.get("data", {}) for o in c.outputs if o.output_type in ("display_data", "execute_result")]
        figures = [d for d in data if PLOTLY in d or "plotly" in d.get("text/html", "")]
        assert figures, f"no plotly figure from {c.source!r}"
        words = [d["text/markdown"] for d in data if "text/markdown" in d]
        assert words, f"no words beside {c.source!r}"
        headings += re.findall(r"^### (.+)$", words[0], flags=re.M)
    assert len(headings) == len(shows)
    for sid in ("tokens", "softmax"):
        assert stages.stage_title(sid, lang) in headings, (sid, headings)
    if lang == "ko":
        assert all(HANGUL.search(h) for h in headings), headings
    else:
        assert not any(HANGUL.search(h) for h in headings), headings
