"""Bad input, tried and survived: what a workshop's thirty visitors (or one curious one) can send.

- fuzzing (hypothesis): any text, through the app's own limits and the tokenizer, to every stage's
  figure and table, for any selection; user text never reaches a figure as markup (every "<" in a
  figure opens one of the views' own tags);
- tampered links (AppTest): several bad query parameters at once, odd encodings, hosted mode;
- weight files that are corrupt, truncated or lying about their size: a WeightsError that says so;
- the hosting guards of explorer/state.py: hosted mode loads named models only, and at most
  MAX_CONCURRENT_RUNS forward passes run at once.

Not repeated here (tests/test_app.py, tests/test_export.py and tests/test_pretrained_tiny.py have
them): one bad URL parameter at a time, huge and HTML text in the text box, truncated GGUF and
BERT files, and everything about a missing chromium (export engine, CLI and app).
"""
from __future__ import annotations

import json
import os
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import RAW_MARKUP, app, strings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import model
from explorer import inputs, state
from explorer.views import stages


@pytest.fixture(scope="module")
def seed():
    return model.load("seed", random=True)


# --- fuzzing: text -> tokens -> every stage ---------------------------------------------------------

PIECES = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "</s>", "<pad>", "[CLS]",
          "&amp;", "&lt;b&gt;", "\x00", "\x07", "\x1b[31m", "\u200b", "\u202e", "\ufeff", "🙂",
          "👩‍👩‍👧", "안녕하세요", "ᄀ", "e\u0301", "\t", " ", "\n", "\r\n", "\n\n", "%{z}", "$x^2$",
          "\\", "'", '"', "\U0010ffff", "ß", "İ", "가" * 70, "a" * 90]
raw_text = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=10)), max_size=8).map("".join)
selection = st.fixed_dictionaries({
    "sentence": st.integers(-5, 12), "layer": st.integers(-3, 999), "head": st.integers(-3, 99),
    "block": st.sampled_from(stages.BLOCKS), "query": st.integers(-2, 200), "key": st.integers(-2, 200),
})


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(raw=raw_text, sel=selection)
def test_any_text_reaches_every_stage_figure_safely(seed, raw, sel):
    texts, _ = inputs.limit_sentences(raw)
    if not texts:
        return  # the app shows its "type a sentence" prompt (tested in test_app.py)
    texts, _ = inputs.limit_tokens(texts, seed.tokenizer, inputs.MAX_TOKENS)
    run = stages.run_data(seed, texts)
    assert len(run.tokens) == len(texts) <= inputs.MAX_SENTENCES
    assert all(0 < len(t) <= inputs.MAX_TOKENS for t in run.tokens)
    s = stages.Selection(model="seed", **sel)
    for stage_id, _ in stages.STAGES:
        fig, df = stages.stage_figure(stage_id, run, seed.info, s, lang="ko" if sel["head"] % 2 else "en")
        assert fig.to_json()
        for text in strings(fig.to_plotly_json()):
            assert not RAW_MARKUP.search(text), (stage_id, text[:120])
        if df is not None:
            df.to_csv()  # the table's CSV download
    caption = stages.caption("seed", texts[0], s, "softmax")
    assert isinstance(caption, str) and "\n" not in caption


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(raw=raw_text)
def test_the_limits_hold_for_any_text(seed, raw):
    texts, notices = inputs.limit_sentences(raw)
    assert len(texts) <= inputs.MAX_SENTENCES
    assert all(t.strip() and len(t) <= inputs.MAX_CHARS for t in texts)
    cut, _ = inputs.limit_tokens(texts, seed.tokenizer, inputs.MAX_TOKENS)
    for before, after in zip(texts, cut):
        assert before.startswith(after)
        assert len(seed.tokenizer.encode([after])[0].ids) <= inputs.MAX_TOKENS


# --- tampered links (AppTest) --------------------------------------------------------------------

def page_ok(at) -> str:
    """No exception, no crash message; returns every warning on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not [e.value for e in at.error if "went wrong" in e.value or "could not be drawn" in e.value]
    return "\n".join(w.value for w in at.warning)


@pytest.mark.slow
def test_many_tampered_parameters_at_once_each_get_a_warning():
    at = app(layer="999", head="-3", model="../../etc/passwd", sentence="abc", block="x<script>",
             text="<script>alert(1)</script>\nhello", query="1e309", key="0x10", view="tokens")
    warned = page_ok(at)
    for name in ("layer", "head", "model", "sentence", "block", "query", "key"):
        assert f"`{name}=" in warned, (name, warned)
    s = at.session_state
    assert (s["model"], s["layer"], s["head"], s["sentence"], s["block"]) == ("seed", 1, 0, 0,
                                                                              "encoder.self_attn")
    assert at.text[0].value == "<script>alert(1)</script>"  # shown literally, as code
    assert all("<script" not in md.value for md in at.markdown)


@pytest.mark.slow
@pytest.mark.parametrize("params", [
    {"layer": "9" * 40, "head": " 2 ", "sentence": "-0"},
    {"model": "/etc/passwd", "lang": "../ko", "text": "\x00\x01\x02"},
    {"text": "\n" * 5000 + "끝", "view": "tokens"},
    {"model": ["seed", "minilm", "../x"], "layer": ["1", "abc"]},
], ids=["huge-and-padded-ints", "path-and-control", "thousands-of-blank-lines", "repeated-keys"])
def test_odd_parameters_never_crash(params):
    page_ok(app(**params))


@pytest.mark.slow
def test_hosted_mode_link_to_a_local_path_is_ignored(monkeypatch, tmp_path):
    monkeypatch.setattr(state, "HOSTED", True)
    ckpt = tmp_path / "mine.safetensors"
    model.load("seed", random=True).save(ckpt)
    at = app(model=str(ckpt), view="tokens")
    assert "`model=" in page_ok(at)
    assert at.session_state["model"] == "seed"


# --- hosting guards of explorer/state.py -----------------------------------------------------------

def test_hosted_mode_loads_named_models_only_and_hides_server_folders(monkeypatch, tmp_path):
    from model import registry

    ckpt = tmp_path / "mine.safetensors"
    model.load("seed", random=True, d_model=16, n_heads=2, n_layers=1, n_decoder_layers=1,
               d_ff=32).save(ckpt)
    state._load.clear()
    monkeypatch.setattr(state, "HOSTED", False)
    assert state.load_model(str(ckpt))[0].info.d_model == 16  # a laptop may load its own file
    monkeypatch.setattr(state, "HOSTED", True)
    for name in (str(ckpt), "../../etc/passwd", "/etc/passwd", "~/.ssh/id_rsa", "seed\x00"):
        with pytest.raises(model.WeightsError, match="loads only"):
            state.load_model(name)
    root = str(Path(state.__file__).resolve().parent.parent)
    monkeypatch.setitem(registry.SEED_WEIGHTS, "seed-sort", Path(root) / "assets" / "nope.safetensors")
    m, notice = state.load_model("seed-sort")  # missing weights: the untrained fallback, and a notice
    assert m is not None and "nope.safetensors" in notice and root not in notice


def test_a_burst_of_runs_queues_at_the_forward_pass_limit(monkeypatch):
    active, peak, lock = [0], [0], threading.Lock()

    def slow_run(m, texts, with_weights=True):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.2)
        with lock:
            active[0] -= 1
        return texts

    monkeypatch.setattr(state, "run_data", slow_run)
    monkeypatch.setattr(state, "_RUN_SLOTS", threading.BoundedSemaphore(2))
    state.load_model("seed")  # load once, outside the burst
    state._run.clear()
    out = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, state._run("seed", None, (f"burst {i}",))))
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    state._run.clear()  # these fake runs must not answer anyone else
    assert out == {i: [f"burst {i}"] for i in range(6)}
    assert peak[0] == 2


# --- corrupt, truncated and lying weight files --------------------------------------------------------

def _seed_file(tmp_path: Path, **cfg) -> Path:
    path = tmp_path / "good.safetensors"
    model.load("seed", random=True, d_model=16, n_heads=2, n_layers=1, n_decoder_layers=1, d_ff=32,
               **cfg).save(path)
    return path


def _resave(path: Path, out: Path, metadata: dict | None) -> Path:
    from safetensors.torch import load_file, save_file

    save_file(load_file(str(path)), str(out), metadata=metadata)
    return out


SEED_META = {"format": "attention-explorer-seed"}
CORRUPT_SEED = {
    "empty": (lambda p, d: b"", "truncated or corrupt"),
    "half": (lambda p, d: d[: len(d) // 2], "truncated or corrupt"),
    "one-byte-short": (lambda p, d: d[:-1], "truncated or corrupt"),
    "header-only": (lambda p, d: d[: 8 + struct.unpack("<Q", d[:8])[0]], "truncated or corrupt"),
    "header-claims-an-exabyte": (lambda p, d: struct.pack("<Q", 2 ** 60) + b"{}", "truncated or corrupt"),
    "random-bytes": (lambda p, d: np.random.default_rng(0).bytes(4096), "truncated or corrupt"),
    "flipped-header-byte": (lambda p, d: d[:9] + bytes([d[9] ^ 0x55]) + d[10:], "corrupt|not a seed"),
}


@pytest.mark.parametrize("case", list(CORRUPT_SEED))
def test_corrupt_or_truncated_seed_weights_are_a_weights_error(tmp_path, case):
    good = _seed_file(tmp_path)
    make, message = CORRUPT_SEED[case]
    bad = tmp_path / f"{case}.safetensors"
    bad.write_bytes(make(good, good.read_bytes()))
    with pytest.raises(model.WeightsError, match=message) as err:
        model.load(bad)
    assert bad.name in str(err.value)


@pytest.mark.parametrize("metadata, message", [
    (None, "not a seed Transformer checkpoint"),
    ({**SEED_META, "config": "{not json"}, "unusable seed configuration"),
    ({**SEED_META, "config": "[1, 2]"}, "unusable seed configuration"),
    ({**SEED_META}, "unusable seed configuration"),
    ({**SEED_META, "config": json.dumps({"d_model": 32, "n_heads": 2, "n_layers": 1, "n_decoder_layers": 1,
                                         "d_ff": 32})}, "does not match the seed architecture"),
    # a configuration that would need ~45 GB if it were built before being checked
    ({**SEED_META, "config": json.dumps({"d_model": 1_000_000, "n_heads": 1})}, "does not match"),
], ids=["no-metadata", "config-not-json", "config-not-a-dict", "config-missing", "wrong-shapes",
        "configured-huge"])
def test_seed_weights_that_lie_about_their_architecture(tmp_path, metadata, message):
    bad = _resave(_seed_file(tmp_path), tmp_path / "lying.safetensors", metadata)
    with pytest.raises(model.WeightsError, match=message):
        model.load(bad)


@pytest.mark.parametrize("data", [
    b"", b"GGUF", b"GGUF" + struct.pack("<IQQ", 3, 2 ** 62, 2 ** 62),
    b"GGUF" + struct.pack("<IQQQ", 3, 0, 5, 2 ** 40) + b"a" * 10, b"GGUF" + struct.pack("<I", 1) + bytes(64),
    b"\x80\x04pickle" * 10,
], ids=["empty", "magic-only", "huge-counts", "huge-string", "version-1", "pickle"])
def test_corrupt_gguf_headers_are_a_weights_error(tmp_path, data):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(data)
    with pytest.raises(model.WeightsError, match="model.gguf"):
        model.load(bad)


def test_a_corrupt_seed_file_in_the_app_falls_back_with_a_message(monkeypatch, tmp_path):
    """The shipped file damaged on disk: the page warns and keeps working on the untrained model."""
    from model import registry

    bad = tmp_path / "seed-sort.safetensors"
    bad.write_bytes(_seed_file(tmp_path).read_bytes()[:100])
    monkeypatch.setitem(registry.SEED_WEIGHTS, "seed-sort", bad)
    state._load.clear()
    m, notice = state.load_model("seed-sort")
    assert "truncated or corrupt" in notice and m.info.kind == "encoder-decoder"
    assert os.path.basename(str(bad)) in notice


def test_bidirectional_controls_are_shown_as_what_they_are():
    """A right-to-left override in the typed text never flips what the page echoes."""
    at = app(text="abc\u202edef\u2066x", view="tokens")
    assert not at.exception
    echoed = [c.value for c in at.text]
    assert echoed and all("\u202e" not in v and "\u2066" not in v for v in echoed)
    assert any("U+202E" in v and "U+2066" in v for v in echoed)
    for df in at.dataframe:
        cells = df.value.astype(str).to_numpy().ravel().tolist()
        assert not [c for c in cells if "\u202e" in c]
