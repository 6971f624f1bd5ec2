"""Gemma 3 in the app (issue 25's "done when"): offered in the model menu, a Korean sentence shown as
meaningful pieces, and the sliding-window band through the what-if edit ``window=N``. Skipped, saying
so, until `python -m model.fetch gemma3` has run (the README's test command fetches it)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import app, ok, strings

from explorer import i18n, inputs, state
from explorer.views import stages
from model import fetch

pytestmark = pytest.mark.timeout(900)
KOREAN = "나는 어제 도서관에서 트랜스포머 논문을 읽었다."


@pytest.fixture(scope="module", autouse=True)
def fetched():
    if not fetch.is_fetched("gemma3"):
        pytest.skip("the gemma3 weights are not fetched: run `python -m model.fetch gemma3`")


def specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_gemma3_is_offered_and_a_korean_sentence_is_meaningful_pieces():
    assert "gemma3" in inputs.MODELS
    at = app(model="gemma3", text=KOREAN, stage="tokens", lang="ko")
    ok(at)
    assert at.session_state["model"] == "gemma3"
    assert i18n.t("models.gemma3", "ko") in " ".join(at.sidebar.selectbox(key="model").options)
    m, _ = state.load_model("gemma3")
    run = state.run("gemma3", [KOREAN])
    tokens = run.tokens[0] if hasattr(run, "tokens") else None
    tokens = tokens or stages.stack_tokens(run, "decoder", 0)
    assert "".join(tokens).replace("<bos>", "") == KOREAN  # shown as text: the pieces give the sentence back
    assert len(tokens) <= 20 and not any("<0x" in t or "\\x" in t for t in tokens)
    assert any(t.strip() == "도서" or t.strip() == "에서" for t in tokens)  # whole syllables, not jamo or bytes
    drawn = " ".join(strings(specs(at)))
    assert "에서" in drawn and "<0x" not in drawn  # the tokens figure draws the pieces


def test_the_window_edit_draws_the_band_on_a_short_korean_sentence():
    at = app(model="gemma3", view="whatif", edit="window=4", text=KOREAN, layer="0", head="0")
    ok(at)
    titles = [s["layout"]["title"]["text"] for s in specs(at)]
    assert titles[0].startswith(i18n.t("stage.whatif_pattern.title", "en")), titles
    edited = state.run("gemma3", [KOREAN], edits="window=4")
    intact = state.run("gemma3", [KOREAN])
    m, _ = state.load_model("gemma3")
    local = [i for i, w in enumerate(m.info.window_layers) if w]
    glob = [i for i, w in enumerate(m.info.window_layers) if not w]
    assert local and glob
    a = np.asarray(edited[f"decoder.blocks.{local[0]}.self_attn.hook_pattern"][0])  # (heads, q, k)
    t = a.shape[-1]
    q, k = np.indices((t, t))
    assert np.all(a[:, q - k >= 4] == 0) and np.all(a[:, (q - k < 4) & (q >= k)].sum(-1) > 0)  # the band
    b = np.asarray(intact[f"decoder.blocks.{local[0]}.self_attn.hook_pattern"][0])
    assert np.any(b[:, q - k >= 4] > 0)  # the intact run's window (512) does not cut this sentence
