"""Static export: real files from a real chromium, checked by decoding them.

PNG: decoded, pixel size = layout size × scale. SVG: parsed as XML, token labels (Korean
included) present as text. PDF: at least one page, text kept as text. ZIP: manifest lists
exactly the files in it. CLI: bad arguments give a clear message and exit code 2. Without
chromium: ExportUnavailable with the install command, CSV still works.
"""
from __future__ import annotations

import csv
import io
import json
import os
import struct
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from helpers import cli, run_cli

import model
from explorer import export as ex
from explorer.views import stages as views
from explorer.views.style import FONT
from explorer.views.theme import THEMES, apply_theme

ROOT = Path(__file__).resolve().parent.parent
KO_TEXT = "안녕 cat"
HAVE_CHROMIUM = ex.unavailable_reason() is None
needs_chromium = pytest.mark.skipif(not HAVE_CHROMIUM, reason="chromium is not installed")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_texts(data: bytes) -> list[str]:
    root = ET.fromstring(data)  # raises on malformed XML
    assert root.tag.endswith("svg")
    return ["".join(el.itertext()) for el in root.iter() if el.tag.endswith("text")]


def kill_browser(k) -> None:
    """SIGKILL the chromium that the kaleido ``k`` started: the browser itself, not only the small Python
    wrapper choreographer starts it under (``k.subprocess``), which would leave the browser running. The
    wrapper exits when its browser does."""
    import signal

    import psutil

    browsers = psutil.Process(k.subprocess.pid).children()
    assert browsers, "the wrapper has started no browser"
    for proc in browsers:
        os.kill(proc.pid, signal.SIGKILL)


def heatmap(tokens: list[str]) -> go.Figure:
    z = np.random.default_rng(0).random((len(tokens), len(tokens)))
    return go.Figure(go.Heatmap(z=z, x=tokens, y=tokens, colorscale="Blues"),
                     layout={"title": "weights"})


META = ex.ExportMeta("seed", 0, KO_TEXT, "encoder.self_attn", 1, 2, "pattern", "softmax weights", 8)


# ---------------------------------------------------------------------------------------------
# Pure parts: names, captions, themes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", ["../../etc/passwd", "a/b\\c", "..", "", "  ", "x:y*?<>|\"", "\x00"])
def test_slug_is_a_safe_file_name(raw):
    s = ex.slugify(raw)
    assert s and "/" not in s and "\\" not in s and not s.startswith(".")
    assert all(ch.isalnum() or ch in "-_." for ch in s)


def test_file_name_says_model_sentence_block_layer_head_stage_and_keeps_korean():
    stem = ex.file_stem(META)
    assert stem == "seed_s0-안녕-cat_encoder.self_attn_L1_H2_08-pattern"
    long = ex.ExportMeta("smollm2", 1, "Attention is all you need. 안녕하세요", "decoder.self_attn",
                         2, 3, "softmax", stage_index=13)
    assert ex.file_stem(long) == "smollm2_s1-Attention-is-all-you_decoder.self_attn_L2_H3_13-softmax"
    path_model = ex.ExportMeta("/home/me/ckpt/my model.safetensors", 3, "x", "decoder.cross_attn",
                               0, 0, "scores")
    assert ex.file_stem(path_model).startswith("my-model_s3-x_decoder.cross_attn_L0_H0_")


def test_caption_is_on_the_figure_and_escaped():
    meta = ex.ExportMeta("seed", 1, "a <b>bold</b> 안녕", "decoder.self_attn", 0, 3, "scores",
                         "Q·Kᵀ/√d_k")
    fig = ex.prepare(heatmap(list("ab")), meta, theme="screen")
    sub = fig.layout.title.subtitle.text
    for part in ("seed", "sentence 1", "decoder.self_attn", "layer 0", "head 3", "Q·Kᵀ/√d_k", "안녕"):
        assert part in sub
    assert "<b>" not in sub and "&lt;b&gt;" in sub
    assert fig.layout.title.text == "weights"
    assert (fig.layout.width, fig.layout.height) == (THEMES["screen"].width, THEMES["screen"].height)


def test_presentation_theme_is_light_large_safe_and_16_9_and_leaves_the_input_alone():
    fig = heatmap(list("abc"))
    fig.data[0].colorscale = "Jet"
    before = fig.to_json()
    out = apply_theme(fig, "presentation")
    assert fig.to_json() == before, "apply_theme must return a copy"
    t = THEMES["presentation"]
    assert t.width * 9 == t.height * 16 and t.width >= 1600
    assert out.layout.paper_bgcolor == "white" and out.layout.font.size >= 20
    assert "Noto Sans CJK KR" in out.layout.font.family
    jet = go.Figure(go.Heatmap(z=[[0]], colorscale="Jet")).data[0].colorscale
    assert out.data[0].colorscale != jet  # a rainbow scale is replaced
    kept = apply_theme(heatmap(list("ab")), "presentation").data[0].colorscale
    assert kept == heatmap(list("ab")).data[0].colorscale  # single-hue Blues is already safe
    screen = apply_theme(fig, "screen")
    assert screen.data[0].colorscale == fig.data[0].colorscale  # screen = as shown
    assert screen.layout.font.family == FONT
    with pytest.raises(ValueError, match="unknown theme"):
        apply_theme(fig, "neon")


# ---------------------------------------------------------------------------------------------
# Real renders
# ---------------------------------------------------------------------------------------------

@needs_chromium
@pytest.mark.parametrize("scale", [2, 3])
def test_png_decodes_at_layout_size_times_scale(scale):
    data = ex.figure_bytes(heatmap(list("안녕")), "png", scale=scale, width=400, height=300)
    assert png_size(data) == (400 * scale, 300 * scale)
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    img.load()
    assert img.size == (400 * scale, 300 * scale)
    assert len(img.convert("L").getcolors(maxcolors=1 << 20)) > 10, "the image is blank"


@needs_chromium
def test_concurrent_exports_each_get_their_own_image():
    """Many app sessions share one warm chromium: no caller may receive another's image."""
    from concurrent.futures import ThreadPoolExecutor

    widths = [300, 320, 340, 360, 380, 400]
    with ThreadPoolExecutor(len(widths)) as pool:
        pngs = list(pool.map(lambda w: ex.figure_bytes(heatmap(list("ab")), "png", scale=1,
                                                       width=w, height=200), widths))
    assert [png_size(p) for p in pngs] == [(w, 200) for w in widths]


@needs_chromium
def test_a_crashed_chromium_is_replaced_without_waiting_for_the_timeout():
    import time

    fig = heatmap(list("ab"))
    ex.figure_bytes(fig, "png", scale=1, width=300, height=200)
    kill_browser(ex._RENDERER._kaleido)  # the chromium we started
    time.sleep(0.5)
    t0 = time.perf_counter()
    assert png_size(ex.figure_bytes(fig, "png", scale=1, width=300, height=200)) == (300, 200)
    assert time.perf_counter() - t0 < ex.RENDER_TIMEOUT_S / 2


@needs_chromium
def test_a_tab_that_served_many_renders_draws_what_a_fresh_one_draws(monkeypatch, bundle_run, bundle_items):
    """The export browser reloads a tab only every RELOAD_EVERY renders (renderer._kaleido_class):
    a figure drawn on a tab that has drawn others is byte for byte the figure drawn on a freshly
    loaded tab, across different stage figures. The bundle's files (below: every stage in PNG, SVG and
    PDF, in turn, on a tab reloaded every 16 renders) are compared with the first six stages drawn again
    here, each on a tab reloaded just before (PNG compared byte for byte; SVG by its text, as its
    clip-path ids differ from render to render). Then a reload comes every RELOAD_EVERY-th render.

    The bundle's PNGs were painted from their SVG's drawing (renderer.png_and_svg); those drawn here
    by plotly's own PNG export: byte for byte the same images."""
    from explorer.export import renderer

    bundle, painted = bundle_run
    assert renderer.RELOAD_EVERY > 1 and painted == len(bundle_items)
    items = bundle_items[:6]
    stems = [ex.file_stem(it.meta) for it in items]
    reused = [bundle.read(f"{s}.png") for s in stems] + [svg_texts(bundle.read(f"{s}.svg")) for s in stems]

    ex.warm_up()
    k = ex._RENDERER._kaleido
    reloads = []
    reload = k._reload

    async def counted(tab):
        reloads.append(tab)
        await reload(tab)

    monkeypatch.setattr(k, "_reload", counted)
    monkeypatch.setattr(renderer, "RELOAD_EVERY", 1)  # stock kaleido: a reload after every render
    small = heatmap(list("ab"))
    ex.figure_bytes(small, "svg", width=300, height=200)  # reloaded after it: the next render draws on a fresh tab
    fresh = [ex.figure_bytes(it.fig, "png", scale=2) for it in items] + \
        [svg_texts(ex.figure_bytes(it.fig, "svg")) for it in items]
    assert fresh == reused

    monkeypatch.setattr(renderer, "RELOAD_EVERY", 5)
    for _ in range(11):  # the 5th and the 10th are followed by a reload (each render waits for the one before)
        ex.figure_bytes(small, "svg", width=300, height=200)
    assert k is ex._RENDERER._kaleido  # one browser, one tab throughout
    assert len(reloads) == 1 + len(fresh) + 2


@needs_chromium
def test_bad_format_is_refused():
    with pytest.raises(ValueError, match="unknown image format"):
        ex.figure_bytes(heatmap(["a"]), "gif")


@needs_chromium
def test_zip_of_plain_items_has_a_manifest_listing_every_file():
    items = [ex.Item(ex.prepare(heatmap(list("가나")), META, theme="presentation"), None, META)]
    data = ex.zip_items(items, ["svg", "csv"], theme="presentation")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = set(zf.namelist())
        doc = json.loads(zf.read("manifest.json"))
    assert names - {"manifest.json"} == {f["name"] for f in doc["files"]}
    assert [f["format"] for f in doc["files"]] == ["svg"]  # no table given: no CSV


# ---------------------------------------------------------------------------------------------
# The app's own stage figures
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def selection():
    import model
    from explorer.views import stages

    try:
        m = model.load("seed")
    except model.WeightsError:
        m = model.load("seed", random=True)
    texts = [KO_TEXT, "a longer second sentence"]
    cache = stages.run_data(m, texts)
    block = stages.blocks_for(m.info)[0]
    sel = stages.Selection(model="seed", sentence=0, layer=0, head=1, block=block)
    return m, cache, sel, texts


@pytest.fixture(scope="module")
def bundle_items(selection):
    """Every stage of the selection, as ``bundle_zip`` exports it (``stage_items`` then ``zip_items``)."""
    m, cache, sel, texts = selection
    return ex.stage_items(cache, m.info, sel, model_name="seed", text=texts[0], theme="presentation", lang="ko")


@pytest.fixture(scope="module")
def bundle_run(bundle_items):
    """The ZIP of every stage in every format, and how many of its PNGs were painted from their SVG's
    drawing (renderer.png_and_svg) rather than drawn again."""
    painted = []
    rasterize = ex._RENDERER.rasterize
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ex._RENDERER, "rasterize", lambda *args: painted.append(args[1:]) or rasterize(*args))
        data = ex.zip_items(bundle_items, ["png", "svg", "pdf", "csv"], theme="presentation", lang="ko")
    return zipfile.ZipFile(io.BytesIO(data)), len(painted)


@pytest.fixture(scope="module")
def bundle(bundle_run):
    return bundle_run[0]


@needs_chromium
def test_bundle_has_every_stage_in_every_format_and_its_manifest_lists_every_file(bundle):
    doc = json.loads(bundle.read("manifest.json"))
    names = set(bundle.namelist())
    assert names - {"manifest.json"} == {f["name"] for f in doc["files"]}
    for f in doc["files"]:
        assert bundle.getinfo(f["name"]).file_size == f["bytes"]
    for key in ("model", "sentence", "layer", "head", "block", "app_version", "date"):
        assert key in doc
    assert (doc["model"], doc["sentence"], doc["layer"], doc["head"]) == ("seed", 0, 0, 1)
    stages = ex.stage_ids()
    for fmt in ("png", "svg", "pdf"):
        assert sorted(f["stage"] for f in doc["files"] if f["format"] == fmt) == sorted(stages)
    assert len(names) == len(set(n.lower() for n in names)), "file names must be unique"


def test_the_manifest_carries_each_stages_words_in_the_language_asked(selection):
    """A lecturer needs the words beside the figures: the ZIP's manifest.json has, for every stage it
    wrote, the title, formula and explanation the page shows for this model and run, in the language
    asked (a CSV-only bundle: no browser needed)."""
    m, cache, sel, texts = selection
    wanted = [s for s in ex.stage_ids() if views.applies(s, m.info, sel.block) and not views.REGISTRY[s].on_demand
              and not views.REGISTRY[s].needs][:4]
    data = ex.bundle_zip(cache, m.info, sel, model_name="seed", text=texts[0], formats=["csv"], stages=wanted,
                         lang="ko")
    doc = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("manifest.json"))
    assert set(doc["stages"]) == set(wanted)
    for sid in wanted:
        w = views.stage_words(sid, cache, m.info, sel, "ko")
        assert doc["stages"][sid] == {"title": w["title"], "formula": w["formula"] or "", "explanation": w["explain"]}
        assert any("\uac00" <= ch <= "\ud7a3" for ch in doc["stages"][sid]["explanation"]), sid  # in Korean


@needs_chromium
def test_bundle_files_decode(bundle, selection):
    _m, cache, _sel, _texts = selection
    from explorer.views.style import visible

    tokens = [visible(t) for t in cache.tokens[0]]
    assert "안" in tokens and "␣" in tokens
    w, h = THEMES["presentation"].width, THEMES["presentation"].height
    found_tokens = False
    for name in bundle.namelist():
        data = bundle.read(name)
        if name.endswith(".png"):
            assert png_size(data) == (2 * w, 2 * h), name
        elif name.endswith(".svg"):
            texts = svg_texts(data)
            assert any("레이어 0" in t and "헤드 1" in t for t in texts), f"{name}: no caption"
            if all(any(t == tok for t in texts) for tok in tokens):
                found_tokens = True
        elif name.endswith(".pdf"):
            from pypdf import PdfReader

            reader = PdfReader(io.BytesIO(data))
            assert len(reader.pages) >= 1, name
            assert "헤드 1" in reader.pages[0].extract_text(), f"{name}: text was not kept"
        elif name.endswith(".csv"):
            assert data.startswith(b"\xef\xbb\xbf")  # a BOM, so spreadsheets read Korean
    assert found_tokens, "no SVG carries every token label (Korean included) as text"


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    """A small untrained seed checkpoint (2 encoder layers, 2 heads), loadable by path."""
    import model

    path = tmp_path_factory.mktemp("ckpt") / "tiny.safetensors"
    model.load("seed", random=True, d_model=32, n_heads=2, n_layers=2, n_decoder_layers=1,
               d_ff=64).save(path)
    return str(path)


@pytest.mark.parametrize("args, message", [
    (["--stages", "STAGE0,nonsense"], "unknown stage nonsense"),
    (["--layer", "2"], "--layer 2 is out of range: tiny has 2 layer(s) in encoder, so use 0..1"),
    (["--block", "decoder.self_attn", "--layer", "1"], "--layer 1 is out of range"),
    (["--head", "-1"], "--head -1 is out of range: tiny has 2 heads, so use 0..1"),
    (["--format", "png,bmp"], "unknown format 'bmp'"),
    (["--sentence", "1"], "--sentence 1 is out of range"),
    (["--block", "decoder.middle_attn"], "--block decoder.middle_attn does not exist"),
    (["--theme", "neon"], "invalid choice: 'neon'"),
    (["--scale", "0"], "--scale must be in (0, 10]"),
    (["--model", "/nonexistent/weights.safetensors"], "--model /nonexistent/weights.safetensors"),
])
def test_cli_errors_are_clear(tmp_path, tiny, args, message):
    opts = {"--model": tiny, "--text": "hello", "--out": str(tmp_path / "out"), "--format": "csv"}
    for k, v in zip(args[::2], args[1::2]):
        opts[k] = v.replace("STAGE0", ex.stage_ids()[0])
    r = cli(*[x for kv in opts.items() for x in kv])
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "usage: python -m explorer.export" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_cli_missing_weights_names_the_command(tmp_path):
    from model.registry import SEED_WEIGHTS

    if SEED_WEIGHTS["seed"].is_file():
        name, expected = "smollm2", "python -m model.fetch"
    else:
        name, expected = "seed", "python -m model.train"
    r = run_cli("--model", name, "--text", "hi", "--format", "csv", "--out", str(tmp_path),
                env={"ATTENTION_EXPLORER_CACHE": str(tmp_path / "empty-cache")})
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr and "Traceback" not in r.stderr


@needs_chromium
def test_cli_writes_one_file_per_stage_and_format(tmp_path, tiny):
    """"--stages all" writes a file for every stage this model has, named after it, and a table for
    those that have one; a few stages in the default formats (png, svg, pdf) write one file per stage and
    format. Every stage in every image format goes through the same render_items in the bundle above
    (test_bundle_has_every_stage_in_every_format_and_its_manifest_lists_every_file), in the
    presentation theme, as the few stages here: "all" is drawn in the screen theme, whose figures are
    quicker to make."""
    out = tmp_path / "slides"
    r = cli("--model", tiny, "--text", KO_TEXT, "--layer", "1", "--head", "1", "--theme", "screen",
                "--stages", "all", "--format", "svg,csv", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "exporting" in r.stderr  # the progress bar
    files = sorted(p.name for p in out.iterdir())
    info = model.load(tiny).info
    # "all": every stage the model has, but those drawn on demand (the tutorial 002 preset) and the what-if ones
    applicable = [s for s in ex.stage_ids() if views.ready(s, info) and not views.REGISTRY[s].on_demand]
    assert len(applicable) < len(ex.stage_ids())  # "all" skips what this model doesn't have
    order = ex.stage_ids()
    stems = [f"tiny_s0-안녕-cat_encoder.self_attn_L1_H1_{order.index(s) + 1:02d}-{ex.slugify(s)}" for s in applicable]
    assert [f for f in files if f.endswith(".svg")] == sorted(f"{stem}.svg" for stem in stems), files
    tables = [f[:-len(".csv")] for f in files if f.endswith(".csv")]
    assert tables and set(tables) <= set(stems) and len(files) == len(stems) + len(tables), files

    few = applicable[:2]
    out = tmp_path / "few"
    r = cli("--model", tiny, "--text", KO_TEXT, "--layer", "1", "--head", "1",
                "--stages", ",".join(few), "--out", str(out), "--quiet")  # the default formats
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 3 * len(few)
    for fmt in ("png", "svg", "pdf"):
        assert sum(f.endswith("." + fmt) for f in files) == len(few)
    assert all(f.startswith("tiny_s0-안녕-cat_") and "_L1_H1_" in f for f in files), files
    png = next(out.glob("*.png")).read_bytes()
    w, h = THEMES["presentation"].width, THEMES["presentation"].height
    assert png_size(png) == (2 * w, 2 * h)


@needs_chromium
def test_cli_zip(tmp_path, tiny):
    r = cli("--model", tiny, "--text", "hello", "--stages", ex.stage_ids()[0], "--format",
                "svg,csv", "--zip", "--theme", "screen", "--out", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    (zpath,) = tmp_path.glob("*.zip")
    with zipfile.ZipFile(zpath) as zf:
        doc = json.loads(zf.read("manifest.json"))
        assert set(zf.namelist()) - {"manifest.json"} == {f["name"] for f in doc["files"]}
    assert doc["theme"] == "screen" and doc["model"] == "tiny"


# ---------------------------------------------------------------------------------------------
# Without chromium
# ---------------------------------------------------------------------------------------------

def test_missing_chromium_raises_export_unavailable_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    assert ex.unavailable_reason() is not None
    with pytest.raises(ex.ExportUnavailable) as err:
        ex.figure_bytes(heatmap(["a"]), "png")
    assert "apt-get install -y chromium fonts-noto-cjk" in str(err.value)
    assert err.value.install == ex.INSTALL_COMMAND
    # the table still exports
    import pandas as pd

    assert ex.table_bytes(pd.DataFrame({"안": [1.0]}, index=["a"])).decode("utf-8-sig").startswith(",안")


def test_cli_without_chromium_says_what_to_install_and_csv_still_works(monkeypatch, tmp_path, tiny):
    """In this process (``cli``): the renderer reads BROWSER_PATH when it looks for a browser, so the
    environment is the one set here; the exporter as its own process is run by
    test_cli_missing_weights_names_the_command."""
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    r = cli("--model", tiny, "--text", "hi", "--format", "png", "--out", str(tmp_path / "a"))
    assert r.returncode == 3 and "apt-get install -y chromium fonts-noto-cjk" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("--model", tiny, "--text", "hi", "--format", "csv", "--out", str(tmp_path / "b"), "--quiet")
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "b").glob("*.csv"))) >= 1


# ---------------------------------------------------------------------------------------------
# The app's wiring (Streamlit AppTest, in-process)
# ---------------------------------------------------------------------------------------------

def test_app_without_chromium_disables_images_says_what_to_install_and_zips_csv(monkeypatch,
                                                                                 tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    at = AppTest.from_file(str(ROOT / "explorer" / "main.py"), default_timeout=300)
    at.query_params["view"] = "all"  # every stage, each with its downloads
    at.run()
    assert not at.exception
    assert "export_theme" not in [r.key for r in at.sidebar.radio]  # closed: a switch, no settings drawn
    at.sidebar.toggle(key="export_open").set_value(True).run()
    buttons = at.get("download_button")
    by_label: dict[str, list] = {}
    for b in buttons:
        by_label.setdefault(b.proto.label, []).append(b.proto)
    assert set(by_label) >= {"PNG", "SVG", "PDF", "CSV"}
    assert len(by_label["PNG"]) == len(by_label["SVG"]) == len(by_label["PDF"]) >= 10
    assert all(p.disabled for f in ("PNG", "SVG", "PDF") for p in by_label[f])
    assert any(not p.disabled for p in by_label["CSV"])
    assert any("apt-get install -y chromium fonts-noto-cjk" in w.value for w in at.sidebar.warning)
    assert at.sidebar.checkbox(key="export_all_png").disabled

    at.sidebar.radio(key="export_theme").set_value("presentation").run()
    at.sidebar.button(key="export_all_prepare").click().run()
    assert not at.exception and not at.error
    _ident, data = at.session_state["_export_zip"]
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        doc = json.loads(zf.read("manifest.json"))
        names = set(zf.namelist())
    assert names - {"manifest.json"} == {f["name"] for f in doc["files"]}
    assert {f["format"] for f in doc["files"]} == {"csv"} and doc["theme"] == "presentation"
    assert [d.proto.label for d in at.sidebar.get("download_button")] == ["Download ZIP"]


def test_the_export_settings_are_kept_while_their_section_is_closed():
    from streamlit.testing.v1 import AppTest

    from explorer import export_ui

    at = AppTest.from_file(str(ROOT / "explorer" / "main.py"), default_timeout=300).run()
    at.sidebar.toggle(key="export_open").set_value(True).run()
    at.sidebar.radio(key="export_theme").set_value("presentation").run()
    at.sidebar.select_slider(key="export_scale").set_value(4).run()
    at.sidebar.toggle(key="export_open").set_value(False).run()
    assert not at.exception and "export_theme" not in [r.key for r in at.sidebar.radio]
    assert at.session_state["_keep_export_theme"] == "presentation"
    at.sidebar.slider(key="head").set_value(1).run()  # reruns with the section closed
    at.sidebar.toggle(key="export_open").set_value(True).run()
    assert at.sidebar.radio(key="export_theme").value == "presentation"
    assert at.sidebar.select_slider(key="export_scale").value == 4
    assert export_ui.SETTINGS == ("export_theme", "export_scale", "export_preview")


# ---------------------------------------------------------------------------------------------
# End to end: a real server, a real browser, real downloads
# ---------------------------------------------------------------------------------------------

@pytest.mark.e2e
@needs_chromium
@pytest.mark.timeout(900)
def test_teacher_downloads_a_png_and_a_zip_from_the_running_app(shared_server, tmp_path):
    """On the test process's shared server (conftest.py), started once for every browser test's file."""
    app_server = shared_server
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ex.browser_path(), headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1440, "height": 1000}, accept_downloads=True)
        page.goto(f"{app_server}/?view=scores&lang=en&text=hello", wait_until="domcontentloaded")
        png_button = page.get_by_role("button", name="PNG", exact=True).first
        png_button.wait_for(timeout=180_000)
        with page.expect_download(timeout=120_000) as dl:
            png_button.click()
        path = tmp_path / dl.value.suggested_filename
        dl.value.save_as(path)
        assert path.name.startswith("seed_s0-hello_encoder.self_attn_L0_H0_")
        width, height = png_size(path.read_bytes())
        assert width == 2 * THEMES["screen"].width and height >= 2 * 240  # 2× scale

        page.get_by_text("Export (slides)").click()
        page.get_by_role("button", name="Prepare ZIP", exact=True).click()
        zip_button = page.get_by_role("button", name="Download ZIP", exact=True)
        zip_button.wait_for(timeout=300_000)
        with page.expect_download(timeout=120_000) as dl:
            zip_button.click()
        zpath = tmp_path / dl.value.suggested_filename
        dl.value.save_as(zpath)
        browser.close()
    with zipfile.ZipFile(zpath) as zf:
        doc = json.loads(zf.read("manifest.json"))
        assert set(zf.namelist()) - {"manifest.json"} == {f["name"] for f in doc["files"]}
    from explorer.views import stages

    seed_info = {"kind": "encoder-decoder", "n_heads": 8, "n_kv_heads": 8, "positional": "sinusoidal"}
    assert {f["stage"] for f in doc["files"]} == {s for s in ex.stage_ids()  # the block exported: the encoder's
                                                  if stages.ready(s, seed_info, "encoder.self_attn")
                                                  and not stages.REGISTRY[s].on_demand}


def test_a_missing_cjk_font_is_detected(monkeypatch, tmp_path):
    fake = tmp_path / "fc-list"
    fake.write_text("#!/bin/sh\necho 'DejaVu Sans'\n")
    fake.chmod(0o755)
    ex.cjk_font_missing.cache_clear()
    try:
        monkeypatch.setenv("PATH", str(tmp_path))
        assert ex.cjk_font_missing()
        monkeypatch.undo()
        ex.cjk_font_missing.cache_clear()
        assert not ex.cjk_font_missing(), "fonts-noto-cjk is installed on this machine"
    finally:
        ex.cjk_font_missing.cache_clear()


# --- spreadsheet-safe CSV, a browser killed while starting (faults from the hardening review) ------

FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx"]


def test_csv_cells_a_spreadsheet_would_evaluate_are_neutralised():
    df = pd.DataFrame({"token": FORMULAS, "value": [-1.5, 2.0, -3.0, 4.0, 5.0, 6.0]},
                      index=pd.Index(FORMULAS, name="=pos"))
    rows = list(csv.reader(io.StringIO(ex.table_bytes(df).decode("utf-8-sig"), newline="")))
    assert rows[0] == ["'=pos", "token", "value"]
    for (label, token, value), raw in zip(rows[1:], FORMULAS):
        assert label == token == "'" + raw  # inert: a spreadsheet shows the text
        float(value)  # numbers stay numbers (negative ones included)
    assert [r[2] for r in rows[1:]] == ["-1.5", "2.0", "-3.0", "4.0", "5.0", "6.0"]


def test_the_exporters_csv_neutralises_a_typed_formula(tmp_path):
    r = cli("--model", "seed", "--text", "=1+2", "--stages", "tokens", "--format", "csv",
            "--out", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    (path,) = tmp_path.glob("*.csv")
    cells = [c for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))) for c in row]
    assert "'=" in cells and "'+" in cells  # the tokens "=" and "+"
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]


@needs_chromium
def test_a_browser_killed_while_starting_is_started_again_and_reported_truthfully(monkeypatch):
    """The first chromium dies during its cold start (really killed, once it answers and before its
    page is loaded): the renderer starts another and the export succeeds; if every start fails, the
    message says so (not 'install chromium')."""
    from explorer.export import renderer

    real = renderer._kaleido_class()
    kills = {"left": 1}

    class DiesWhileStarting(real):
        async def _conform_tabs(self, tabs=None):  # the browser is up; its tab is not on the page yet
            if kills["left"] > 0:
                kills["left"] -= 1
                kill_browser(self)  # the chromium this start launched
                raise RuntimeError("browser process exited during start")
            await super()._conform_tabs(tabs)

    monkeypatch.setattr(renderer, "_kaleido_class", lambda: DiesWhileStarting)
    ex.shutdown()  # a cold start
    assert png_size(ex.figure_bytes(heatmap(list("ab")), "png", scale=1, width=300, height=200)) == (300, 200)
    assert kills["left"] == 0

    kills["left"] = 2  # both starts die
    ex.shutdown()
    with pytest.raises(ex.ExportError) as err:
        ex.figure_bytes(heatmap(list("ab")), "png", scale=1, width=300, height=200)
    assert not isinstance(err.value, ex.ExportUnavailable)
    assert "stopped while starting" in str(err.value) and "install" not in str(err.value).lower()
    ex.shutdown()


def test_cli_text_over_the_token_limit_exits_with_a_message_not_a_traceback(tmp_path):
    r = cli("--model", "seed", "--text", "a" * 600, "--stages", "tokens", "--format", "csv",
                "--out", str(tmp_path), "--quiet")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "601 tokens" in r.stderr and "at most 512" in r.stderr
    assert not list(tmp_path.glob("*.csv"))
