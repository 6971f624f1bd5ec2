"""The Decoding view's timeline as files (explorer/export/animation.py and the exporter's command
line): a GIF with one frame per step and a PDF with one page per step, decoded with Pillow and
pypdf; a static PNG/SVG shows the step the figure opens at, without its slider; the command line
`--stages decoding --format gif,pdf` for the seed models and SmolLM2."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
from helpers import cli
from PIL import Image
from pypdf import PdfReader

import model
from explorer import export as ex
from explorer.views import stages
from explorer.views.trace import trace_data
from model import fetch

ROOT = Path(__file__).resolve().parent.parent
needs_chromium = pytest.mark.skipif(ex.unavailable_reason() is not None, reason="chromium is not installed")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def timeline():
    m = model.load("seed-sort")
    text = "banana"
    run = stages.run_data(m, [text]).with_trace(trace_data(m, text))
    sel = stages.Selection("seed-sort", 0, 1, 2, "decoder.cross_attn")
    fig, df = stages.stage_figure("decoding", run, m.info, sel, step=1)
    item = ex.stage_item("decoding", run, m.info, sel, model_name="seed-sort", text=text, theme="presentation",
                         fig=fig, df=df)
    return run.trace, fig, item


def gif_frames(data: bytes) -> list[np.ndarray]:
    im = Image.open(io.BytesIO(data))
    assert im.format == "GIF"
    out = []
    for i in range(im.n_frames):
        im.seek(i)
        out.append(np.asarray(im.convert("RGB")))
    return out


# --- without a browser: the static figures ----------------------------------------------------------
def test_each_static_figure_is_one_step(timeline):
    tr, fig, _ = timeline
    pages = ex.step_figures(fig)
    assert len(pages) == tr.n_steps
    frames = fig.to_dict()["frames"]
    for t, page in enumerate(pages):
        assert not page.frames and not page.layout.sliders and not page.layout.updatemenus
        (bars,) = [x for x in page.data if x.type == "bar"]
        np.testing.assert_allclose(bars.x, tr.top_probs[t])
        (text,) = [x for x in page.data if x.type == "scatter" and x.mode == "text"]
        assert text.text[0].startswith(f"<b>step {t} / {tr.n_steps - 1}</b>")
        assert [s.to_plotly_json() for s in page.layout.shapes] == frames[t]["layout"]["shapes"]
        assert page.layout.xaxis.tickfont == fig.layout.xaxis.tickfont  # the figure's own axes, ticks merged
    current = ex.current_figure(fig)  # what PNG and SVG show: the step it opens at
    assert [s.to_plotly_json() for s in current.layout.shapes] == frames[1]["layout"]["shapes"]
    assert not current.layout.sliders


def test_a_figure_without_frames_is_its_own_single_step():
    m = model.load("seed", random=True, d_model=32, n_heads=2)
    run = stages.run_data(m, ["ab"])
    fig, _ = stages.stage_figure("softmax", run, m.info, stages.Selection("seed", 0, 0, 0, "encoder.self_attn"))
    (page,) = ex.step_figures(fig)
    assert json.loads(pio.to_json(page))["data"] == json.loads(pio.to_json(fig))["data"]
    assert ex.current_figure(fig) is fig


# --- real files from the export browser ----------------------------------------------------------------
@needs_chromium
def test_the_gif_has_a_frame_per_step_and_the_pdf_a_page_per_step(timeline):
    tr, _, item = timeline
    frames = gif_frames(ex.gif_bytes(item.fig))
    assert len(frames) == tr.n_steps
    assert frames[0].shape == (900, 1600, 3)  # the presentation theme's 16:9 size, at layout scale
    assert all(np.abs(a.astype(int) - b).sum() > 0 for a, b in zip(frames, frames[1:]))  # every step differs
    reader = PdfReader(io.BytesIO(ex.pdf_pages_bytes(item.fig)))
    assert len(reader.pages) == tr.n_steps
    for t, page in enumerate(reader.pages):  # vector: the text stays text (pypdf reads its digits as \x00)
        text = page.extract_text()
        written = "".join(tr.tokens[1: int(tr.query[t]) + 1])
        assert f"written so far: “{written}” → {tr.chosen_tokens[t]}" in text, text[-600:]
        assert "seed-sort · sentence" in text and "head" in text  # the caption


@needs_chromium
def test_the_static_png_is_the_step_it_opens_at(timeline):
    _, _, item = timeline
    png = ex.figure_bytes(item.fig, "png", scale=1)
    first = ex.figure_bytes(ex.step_figures(item.fig)[1], "png", scale=1)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png))), np.asarray(Image.open(io.BytesIO(first))))


# --- the command line -------------------------------------------------------------------------------------
def check_outputs(out: Path, n_steps: int) -> None:
    (gif,) = out.glob("*decoding.gif")
    (pdf,) = out.glob("*decoding.pdf")
    assert len(gif_frames(gif.read_bytes())) == n_steps
    assert len(PdfReader(pdf).pages) == n_steps


@needs_chromium
@pytest.mark.parametrize("name, limit", [("seed", 3), ("seed-sort", None)])
def test_cli_exports_the_decoding_as_gif_and_pdf(tmp_path, name, limit):
    """seed-sort: the whole timeline, to its end token; seed: cut by --max-new-tokens (its whole
    "attention" would be ten steps, twenty renders of the same code path)."""
    text = "attention" if name == "seed" else "banana"
    out = tmp_path / "slides"
    r = cli("--model", name, "--text", "a first sentence", "--text", text, "--sentence", "1", "--layer", "1",
                "--head", "2", "--stages", "decoding", "--format", "gif,pdf,png,csv", "--step", "2", "--out",
                str(out), "--quiet", *(["--max-new-tokens", str(limit)] if limit else []))
    assert r.returncode == 0, r.stderr
    tr = trace_data(model.load(name), text, max_new_tokens=limit)
    assert tr.finished == (limit is None)  # seed-sort writes its end token; seed is cut
    n = tr.n_steps
    assert n == (limit or n)
    check_outputs(out, n)
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 4 and all(f"_s1-{text}_" in p and "_L1_H2_" in p for p in names), names
    (csv,) = out.glob("*.csv")
    assert len(pd.read_csv(csv, encoding="utf-8-sig")) == n  # the timeline: a row per step


@needs_chromium
@pytest.mark.weights
def test_cli_exports_smollm2s_decoding(tmp_path):
    if not fetch.is_fetched("smollm2"):
        pytest.skip(f"smollm2 not fetched (run `{fetch.fetch_command('smollm2')}`)")
    r = cli("--model", "smollm2", "--text", "The capital of France is", "--stages", "decoding", "--format",
                "gif,pdf", "--max-new-tokens", "6", "--layer", "3", "--head", "4", "--out", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    check_outputs(tmp_path, 6)  # " Paris.\n\nThe answer": no end token within 6


@pytest.mark.parametrize("args, message", [
    (["--step", "99"], "--step 99 is out of range: seed-sort wrote 4 token(s) for --text 0, so use 0..3"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
])
def test_cli_decoding_errors_are_clear(tmp_path, args, message):
    r = cli("--model", "seed-sort", "--text", "banana", "--stages", "decoding", "--format", "csv",
                "--out", str(tmp_path / "out"), *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
