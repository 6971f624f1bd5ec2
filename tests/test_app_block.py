"""The app's new pieces through Streamlit's AppTest: the "whole block" view (shapes, feed-forward,
residual stream and norms, the seed's generator) for the three shipped models in English and Korean,
every stage stating its shapes, and tutorial 002's one-click preset in the positional section."""
from __future__ import annotations

import numpy as np
import pytest
from test_app import app, array, chart_specs, charts, ok

import model
from explorer import i18n
from explorer.views import stages
from explorer.views import tutorial002 as tut
from model import fetch

pytestmark = pytest.mark.timeout(900)


def block_stages(info) -> list[str]:
    return [sid for sid in dict(stages.SECTIONS)["block"] if stages.applies(sid, info, info.blocks[0])]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("name", ["seed", pytest.param("minilm", marks=pytest.mark.weights),
                                  pytest.param("smollm2", marks=pytest.mark.weights)])
def test_the_block_view_renders_for_every_shipped_model(name, lang):
    if name != "seed" and not fetch.is_fetched(name):
        pytest.skip(f"{name} not fetched (run `{fetch.fetch_command(name)}`)")
    info = model.load(name).info
    at = app(model=name, view="block", lang=lang)
    ok(at)
    want = block_stages(info)
    assert want == (["shapes", "ffn", "residual_norm", "logits"] if name == "seed" else
                    ["shapes", "ffn", "residual_norm"])
    assert charts(at) == len(want)
    titles = [h.value for h in at.subheader]
    for sid in want:
        record = stages.REGISTRY[sid]
        assert any(t.startswith(record.title(lang)[:10]) for t in titles), (sid, titles)
    shapes = [c.value for c in at.caption if c.value.startswith(i18n.t("shape", lang) + ":")]
    assert len(shapes) == len(want)  # every stage states its shapes
    assert all(i18n.t("dim.batch", lang) in s for s in shapes)


def test_every_stage_on_the_everything_page_states_its_shapes():
    at = app(view="all")
    ok(at)
    shapes = [c.value for c in at.caption if c.value.startswith("Shapes:")]
    shown = len(at.subheader)
    assert shown >= 20 and len(shapes) == shown


def test_tutorial_002_is_one_click_away_and_back():
    at = app(view="position")
    ok(at)
    base = model.load("seed").info.positional_base
    assert "Tutorial 002, reproduced: d_model = 4, ten positions" not in chart_specs(at)
    at.toggle(key="pe_tutorial").set_value(True).run()
    ok(at)
    s = at.session_state
    assert (s["pe_base"], s["pe_d_model"], s["pe_positions"], list(s["pe_dims"])) == (100.0, 4, 10, [0, 1, 2, 3])
    specs = chart_specs(at)
    assert "Tutorial 002, reproduced: d_model = 4, ten positions" in specs
    (compare,) = [v for k, v in specs.items() if k.startswith("Positional encoding for two bases")]
    assert compare["layout"]["title"]["text"].endswith("n = 100 · n = 10000")
    pe = {t["name"]: array(t["z"]) for t in compare["data"] if t["name"].startswith("PE n=")}
    assert np.allclose(pe["PE n=100"], tut.encoding(100.0), atol=1e-6)
    assert np.allclose(pe["PE n=10000"], tut.encoding(10000.0), atol=1e-6)
    curves = specs["Dimensions as waves"]
    dots = [array(t["y"]) for t in curves["data"] if t.get("mode") == "markers"]
    assert np.allclose(np.stack(dots, axis=1), tut.encoding(100.0), atol=1e-6)  # the tutorial's table
    at.toggle(key="pe_tutorial").set_value(False).run()
    ok(at)
    assert (at.session_state["pe_base"], at.session_state["pe_d_model"]) == (base, 128)
    assert "Tutorial 002, reproduced: d_model = 4, ten positions" not in chart_specs(at)


@pytest.mark.parametrize("name", ["seed", pytest.param("minilm", marks=pytest.mark.weights),
                                  pytest.param("smollm2", marks=pytest.mark.weights)])
def test_the_exporter_writes_the_new_stages(name, tmp_path):
    """The exporter's main() in this process (one import of torch and plotly, one warm chromium for both
    languages); `python -m explorer.export` as a process, its exit codes and messages: tests/test_export.py."""
    from explorer import export as ex
    from explorer.cli.export import main

    if name != "seed" and not fetch.is_fetched(name):
        pytest.skip(f"{name} not fetched (run `{fetch.fetch_command(name)}`)")
    fmt = "csv" if ex.unavailable_reason() else "png,csv"
    for lang in ("en", "ko"):
        out = tmp_path / lang
        assert main(["--model", name, "--text", "hello world", "--text", "안녕하세요", "--layer", "1",
                     "--stages", "shapes,ffn,residual_norm,logits", "--format", fmt, "--lang", lang,
                     "--out", str(out), "--quiet"]) == 0
        files = sorted(p.name for p in out.iterdir())
        assert files and all(f.startswith(f"{name}_s0-hello-world_") for f in files), files
        for sid in ("shapes", "ffn", "residual_norm"):
            assert any(f.endswith(f"{sid}.csv") for f in files), (sid, files)
            if "png" in fmt:
                (png,) = out.glob(f"*{sid}.png")
                assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
        # the generator is the encoder–decoder's: a table only there
        assert any(f.endswith("logits.csv") for f in files) == (name == "seed")
