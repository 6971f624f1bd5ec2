"""Input bounded before any work (issue 38, item 3): a text box's value is cut to what the box holds
before it is split into sentences, with a notice; the same for text from the URL. The browser side
(the box's max_chars) is tested in tests/test_e2e.py; a crafted 24 MB websocket message in
tests/test_edges.py."""
from __future__ import annotations

import tracemalloc

from helpers import app, ok

from explorer import inputs


def test_the_box_is_cut_before_it_is_split():
    raw = "a\n" * 12_000_000  # 24 MB: twelve million one-letter sentences
    tracemalloc.start()
    texts, notices = inputs.limit_sentences(raw)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert texts == ["a"] * inputs.MAX_SENTENCES
    assert [n.key for n in notices] == ["box_cut", "too_many"]
    assert notices[0].args == {"n": inputs.MAX_BOX_CHARS}
    # split first, the lines alone would take ~12e6 * 50 B = 600 MB; cut first, a few box-fulls
    assert peak < 10 * inputs.MAX_BOX_CHARS * 4, peak


def test_a_full_box_is_not_cut_and_a_fuller_one_is():
    full = ("x" * inputs.MAX_CHARS + "\n") * inputs.MAX_SENTENCES
    assert len(full) < inputs.MAX_BOX_CHARS
    assert inputs.limit_sentences(full) == ([("x" * inputs.MAX_CHARS)] * inputs.MAX_SENTENCES, [])
    cut, notes = inputs.limit_box("y" * (inputs.MAX_BOX_CHARS + 1))
    assert len(cut) == inputs.MAX_BOX_CHARS and notes[0].key == "box_cut"
    assert inputs.limit_box(None) == ("", [])


def test_url_text_is_cut_before_it_is_split():
    p = inputs.parse_params({"text": "b\n" * 500_000})
    assert p.values["text"] == "\n".join(["b"] * inputs.MAX_SENTENCES)
    assert "box_cut" in [n.key for n in p.notices]


def test_the_page_says_the_box_was_cut_and_runs_on():
    at = app(view="tokens")
    at.sidebar.text_area(key="text").set_value(("hello world " * 40 + "\n") * 2000).run()  # ~1 MB
    ok(at)
    notes = "\n".join(i.value for i in at.info)
    assert f"at most {inputs.MAX_BOX_CHARS} characters" in notes
    assert len(at.sidebar.selectbox(key="sentence").options) == inputs.MAX_SENTENCES
    assert at.sidebar.text_area(key="text").max_chars == inputs.MAX_BOX_CHARS
