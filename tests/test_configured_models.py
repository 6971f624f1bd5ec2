"""Configured models (issue 24, item 5): a host's models file, the selector, a typed path in local
mode, hosted mode refusing every path, the lessons and the exporter.

The models are small checkpoints already in the repository (tests/fixtures/families/bert, written by
scripts/make_family_fixtures.py) or written here (an untrained seed Transformer), so nothing is
fetched. The models file is pointed at with $ATTENTION_EXPLORER_MODELS (model/configured.py).
"""
from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import APP, ROOT
from streamlit.testing.v1 import AppTest

import model
from explorer import inputs, models_ui, state
from model import configured, registry

BERT = ROOT / "tests" / "fixtures" / "families" / "bert"
BUILT_IN = inputs.MODELS


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Conversions (a GGUF's float cache) go to a temporary folder, never ~/.cache."""
    from model import fetch

    monkeypatch.setenv(fetch.ENV_VAR, str(tmp_path / "cache"))


def write_models(folder: Path, text: str) -> Path:
    path = folder / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def models_file(tmp_path, monkeypatch):
    """A models file with a BERT folder, a seed checkpoint (relative path) and one whose path is gone."""
    seed = model.load("seed", random=True, d_model=16, n_heads=2, n_layers=1, n_decoder_layers=1, d_ff=32)
    seed.save(tmp_path / "tiny-seed.safetensors")
    path = write_models(tmp_path, f"""
[models.tiny-bert]
path = "{BERT}"
description = "a tiny random BERT"
description_ko = "작은 무작위 BERT"

[models.tiny-seed]
path = "tiny-seed.safetensors"
description = "an untrained seed Transformer"

[models.gone]
path = "{tmp_path / 'nowhere'}"
""")
    monkeypatch.setenv(configured.ENV, str(path))
    return path


def page_app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def no_failure(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not [e.value for e in at.error if "went wrong" in e.value or "could not be drawn" in e.value]


# --- the file (model/configured.py) -------------------------------------------------------------------

def test_parse_reads_entries_resolves_relative_paths_and_reports_what_is_wrong(tmp_path):
    entries, problems = configured.parse("""
[models.a-1]
path = "sub/folder"
description = "  two   spaces "
[models.seed]
path = "/x"
[models."no/slash"]
path = "/x"
[models.nopath]
description = "no path"
[models.extra]
path = "/abs"
colour = "red"
""", tmp_path, reserved=BUILT_IN, source="models.toml")
    assert set(entries) == {"a-1", "extra"}
    assert entries["a-1"].path == tmp_path / "sub" / "folder" and entries["a-1"].description == "two spaces"
    assert entries["extra"].path == Path("/abs") and entries["a-1"].describe("ko") == "two spaces"
    text = "\n".join(problems)
    for bit in ("'seed' is a built-in", "[models.no/slash]", "[models.nopath]: needs path", "unknown keys colour"):
        assert bit in text, (bit, text)
    entries, problems = configured.parse("[models.x\npath=", tmp_path, source="models.toml")
    assert entries == {} and "not valid TOML" in problems[0]


def test_no_file_no_configured_models_and_a_missing_file_is_a_problem_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.delenv(configured.ENV, raising=False)
    monkeypatch.setattr(configured, "DEFAULT_FILE", tmp_path / "models.toml")
    assert configured.entries() == {} and configured.problems() == []
    assert model.available() == list(registry.LOADERS)
    monkeypatch.setenv(configured.ENV, str(tmp_path / "missing.toml"))
    assert configured.entries() == {} and "does not exist" in configured.problems()[0]
    assert str(tmp_path) not in configured.problems()[0]  # the file's name, not the server's folders


def test_a_configured_name_loads_through_model_load_under_its_own_name(models_file):
    assert model.available()[: len(BUILT_IN)] == list(BUILT_IN)
    assert {"tiny-bert", "tiny-seed", "gone"} <= set(model.available())
    m = model.load("tiny-bert")
    assert (m.info.name, m.info.kind, m.info.n_layers) == ("tiny-bert", "encoder", 2)
    assert m.info.description == "a tiny random BERT"
    out, cache = m.run_with_cache(["the cat sat on the mat."])
    assert cache["encoder.blocks.0.self_attn.hook_pattern"].shape[:2] == (1, 4)
    assert model.load("tiny-seed").info.kind == "encoder-decoder"
    with pytest.raises(model.WeightsError, match="'gone'.*fix its path in models.toml") as err:
        model.load("gone")
    assert str(models_file.parent) not in str(err.value)


def test_the_file_is_read_again_when_it_changes(models_file, tmp_path):
    assert "tiny-bert" in configured.entries()
    write_models(tmp_path, f'[models.other]\npath = "{BERT}"\n# longer, so the size changes too\n')
    assert list(configured.entries()) == ["other"]


# --- the URL takes names only ---------------------------------------------------------------------

def test_url_model_takes_built_in_and_configured_names_never_a_path(models_file):
    assert inputs.model_names() == (*BUILT_IN, "tiny-bert", "tiny-seed", "gone")
    assert inputs.parse_params({"model": "tiny-bert"}).values["model"] == "tiny-bert"
    for raw in ("/etc/passwd", str(BERT), "../tiny-bert", "~/.ssh", "tiny-bert/", str(models_file)):
        p = inputs.parse_params({"model": raw})
        assert "model" not in p.values and p.ignored[0][0] == "model", raw


def test_check_path_says_what_is_wrong_before_opening_anything(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    assert models_ui.check_path(str(tmp_path / "nope"))[0] == "model_path.missing"
    assert models_ui.check_path(str(tmp_path / "notes.txt"))[0] == "model_path.kind"
    assert models_ui.check_path("x" * 5000)[0] == "model_path.missing"
    assert models_ui.check_path("a\x00b")[0] == "model_path.missing"
    assert models_ui.check_path(str(BERT)) is None
    m = model.load(str(BERT))
    assert models_ui.fits(m.info, "encoder.self_attn") and not models_ui.fits(m.info, "decoder.self_attn")


# --- the app ----------------------------------------------------------------------------------------

def test_a_configured_model_is_in_the_selector_and_renders_a_stage(models_file):
    at = page_app(model="tiny-bert", view="stage", text="the cat sat on the mat.")
    no_failure(at)
    box = at.selectbox(key="model")  # its options as shown: each name with its description
    shown = [o.split(" — ")[0] for o in box.options]
    assert shown == [*BUILT_IN, "tiny-bert", "tiny-seed", "gone"], box.options
    assert "tiny-bert — a tiny random BERT" in box.options
    assert at.session_state["model"] == "tiny-bert" and not at.warning
    assert at.get("plotly_chart"), "no figure drawn"
    assert at.query_params["model"] in ("tiny-bert", ["tiny-bert"])
    at = page_app(model="gone", view="stage")  # a configured path that is not there: a message
    no_failure(at)
    assert any("fix its path in models.toml" in e.value for e in at.error)


def test_local_mode_opens_a_typed_folder_and_explains_a_bad_path(monkeypatch, tmp_path):
    monkeypatch.setattr(state, "HOSTED", False)
    at = page_app(view="stage", text="the cat sat on the mat.")
    at.text_input(key="model_path").input(str(BERT)).run()
    no_failure(at)
    assert at.session_state["model"] == str(BERT) and not at.error
    assert any(str(BERT) in o for o in at.selectbox(key="model").options)
    assert at.get("plotly_chart") and "model" not in at.query_params  # a path never goes into the URL

    at.text_input(key="model_path").input(str(tmp_path / "nope")).run()  # missing: the model stays
    no_failure(at)
    assert at.session_state["model"] == str(BERT)
    assert any("Nothing at" in e.value for e in at.error)

    bad = tmp_path / "bad"  # a folder of an unsupported family
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "xlnet"}')
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + b"\x00" * 40)
    for path in (bad, corrupt):
        at.text_input(key="model_path").input(str(path)).run()
        no_failure(at)
        assert at.session_state["model"] == str(BERT), path
        assert any("could not be opened as a model" in e.value for e in at.error), path


def test_local_mode_opens_a_typed_gguf_file(monkeypatch, tmp_path):
    from test_pretrained_tiny import write_llama_gguf  # a tiny llama GGUF with a byte-level vocabulary

    gguf = tmp_path / "tiny-llama.gguf"
    write_llama_gguf(gguf)
    monkeypatch.setattr(state, "HOSTED", False)
    at = page_app(view="stage", text="the cat")
    at.text_input(key="model_path").input(str(gguf)).run()
    no_failure(at)
    assert at.session_state["model"] == str(gguf) and not at.error
    assert at.get("plotly_chart")


def test_hosted_mode_never_opens_a_path_from_the_url_and_draws_no_path_box(monkeypatch, models_file):
    opened = []
    real_path, real_seed = registry.load_path, registry.load_seed_file
    monkeypatch.setattr(registry, "load_path", lambda p, *a, **k: opened.append(str(p)) or real_path(p, *a, **k))
    monkeypatch.setattr(registry, "load_seed_file",
                        lambda p, *a, **k: opened.append(str(p)) or real_seed(p, *a, **k))
    monkeypatch.setattr(state, "HOSTED", True)
    state._load.clear()  # nothing loaded before: every opening is seen
    for raw in ("/etc/passwd", str(BERT), str(models_file.parent / "tiny-seed.safetensors")):
        at = page_app(model=raw, view="tokens")
        no_failure(at)
        assert at.session_state["model"] == "seed", raw
        assert any("`model=" in w.value for w in at.warning), raw
        assert not [w for w in at.text_input if w.key == "model_path"]
        assert not [p for p in opened if p != str(registry.SEED_WEIGHTS["seed"])], opened
    with pytest.raises(model.WeightsError, match="loads only"):
        state.load_model(str(BERT))
    at = page_app(model="tiny-bert", view="tokens")  # a configured name is offered on a hosted server
    no_failure(at)
    assert at.session_state["model"] == "tiny-bert" and str(BERT) in opened


def test_a_path_left_in_the_session_falls_back_to_seed_on_a_hosted_server(monkeypatch):
    monkeypatch.setattr(state, "HOSTED", False)
    at = page_app(view="tokens")
    at.text_input(key="model_path").input(str(BERT)).run()
    assert at.session_state["model"] == str(BERT)
    monkeypatch.setattr(state, "HOSTED", True)
    at.run()
    no_failure(at)
    assert at.session_state["model"] == "seed"


def test_the_lessons_offer_configured_models_for_their_real_checkpoint_parts(models_file):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["lesson"] = "11"
    at.run()
    at = at.switch_page("lessons/page.py").run()
    box = at.selectbox(key="lesson_model")
    assert box.options[0] and "tiny-seed" in " ".join(box.options)
    box.select("tiny-seed").run()  # an encoder-decoder: fits both parts (encoder, decoder)
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert "Model: tiny-seed" in captions, captions
    assert at.radio(key="lesson_guess_11").options  # the question, asked of the configured model


# --- the exporter ----------------------------------------------------------------------------------

def test_the_exporter_takes_a_configured_name(models_file, tmp_path, capsys):
    from explorer.cli.export import main

    out = tmp_path / "out"
    assert main(["--model", "tiny-bert", "--text", "the cat sat on the mat.", "--stages", "softmax",
                 "--format", "csv", "--out", str(out), "--quiet"]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files and all(name.startswith("tiny-bert") for name in files), files
    with open(out / files[0], newline="", encoding="utf-8") as f:
        assert len(list(csv.reader(f))) > 1
    with pytest.raises(SystemExit):
        main(["--model", "gone", "--text", "x", "--out", str(out)])
    assert "fix its path in models.toml" in capsys.readouterr().err


# --- every view of the app, for a configured model of each kind -------------------------------------
FAMILIES = ROOT / "tests" / "fixtures" / "families"


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "t5", "roberta"])  # a decoder, an encoder-decoder, an encoder
def test_a_configured_model_of_each_kind_is_usable_on_every_view(family, tmp_path, monkeypatch):
    path = write_models(tmp_path, f'[models.my-{family}]\npath = "{FAMILIES / family}"\n'
                                  f'description = "tiny random {family}"\n')
    monkeypatch.setenv(configured.ENV, str(path))
    for view in inputs.VIEWS:
        at = page_app(model=f"my-{family}", view=view, text="The cat sat on the mat.\n나는 학교에 간다.")
        no_failure(at)
        assert at.session_state["model"] == f"my-{family}", view
        assert not [e.value for e in at.error], (view, [e.value for e in at.error])


def test_the_exporter_takes_a_configured_encoder_decoder(tmp_path, monkeypatch):
    from explorer.cli.export import main

    monkeypatch.setenv(configured.ENV, str(write_models(tmp_path, f'[models.my-t5]\npath = "{FAMILIES / "t5"}"\n')))
    out = tmp_path / "out"
    assert main(["--model", "my-t5", "--text", "나는 학교에 간다.", "--block", "decoder.cross_attn",
                 "--stages", "softmax,qk", "--format", "csv", "--out", str(out), "--quiet"]) == 0
    assert len(list(out.glob("my-t5*cross*.csv"))) == 2, sorted(p.name for p in out.iterdir())
