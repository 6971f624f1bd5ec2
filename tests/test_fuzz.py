"""Fuzzed inputs (issue 27, item 6): generated links and texts thrown at the pages (the explorer and
/lessons, through Streamlit's AppTest) and at ``run_with_cache`` (the shipped seed Transformer; MiniLM
and SmolLM2 when fetched).

What is generated: text from every Unicode category (Hangul syllables and loose jamo, emoji and other
astral characters, combining marks, right-to-left scripts, private use), lines at and past the limits of
explorer/inputs.py (MAX_TOKENS, MAX_CHARS; MAX_SENTENCES lines and more), control characters (NUL, ESC,
lone carriage returns), bidirectional controls (U+202E, U+2066..U+2069, ...), zero-width characters, HTML,
markdown, LaTeX and plotly markup (<script>, **x**, $x$, <b>, <br>, %{x}) and spreadsheet formula starters
(= + - @); query strings of the app's parameters with odd percent-encodings (invalid UTF-8, %00, a lone
%), repeated keys and values of every kind, parsed as Streamlit parses a browser's query string.

What must hold:
- the page: no exception, no traceback and no failure message, before and after the text box is set;
  user text reaches a markdown body (text, captions, alerts, headings, labels, help) only inside a code
  span (the lessons: or with its markdown characters escaped), and never an st.html body; nothing on the page carries a raw control or bidirectional
  character (style.plain_text shows them as what they are); the charts' JSON carries no user markup (every
  "<" opens one of the views' own tags, none of them wraps user text, no user text in a hover template)
  and no raw control; as many sentences as the text has non-blank lines, at most MAX_SENTENCES;
- a run: text within the app's limits always runs; any other text runs or is refused with
  InputTooLong (exactly when a sentence has more tokens than the model takes); tokens are a list of
  strings per sentence, every tensor finite (masked scores -inf exactly where the mask blocks),
  softmax rows sum to 1 where any key is allowed and blocked weights are exactly 0, padded keys
  blocked; the tables' CSV carries no cell a spreadsheet would run as a formula.

Not repeated here (tests/test_hostile.py has them): any text through every stage's figure for any
selection, the limits of explorer/inputs.py on any text, single tampered links.

Reproducible: derandomize=True (the same examples on every machine, no example database needed).
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from urllib.parse import parse_qs, quote, quote_plus

import pytest
import torch
from helpers import APP, RAW_MARKUP
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import model
from explorer import i18n, inputs
from explorer.export import renderer
from explorer.lessons import catalog
from explorer.lessons.page import N_KEY
from explorer.views import data, stages
from model import fetch

# --- what is generated ------------------------------------------------------------------------------

MARK = "fzq"  # in every markup piece: where it shows up on the page, user text shows up
MARKUP = tuple(f.replace("{}", MARK) for f in (
    "<b>{}</b>", "<i>{}</i>", "<br>{}", "<sup>{}</sup>", "<span style='color:red'>{}</span>",
    "<script>alert('{}')</script>", "<img src=x onerror=alert('{}')>", "<a href='javascript:alert(1)'>{}</a>",
    "**{}**", "__{}__", "_{}_", "~~{}~~", "# {}", "> {}", "* {}", "[{}](javascript:alert(1))", "![{}](x.png)",
    "`{}`", "```{}```", ":red[{}]", ":material/home: {}", "$ {} $", "$${}$$", r"\({}\)", r"\frac{a}{{}}",
    "%{x}{}", "%{customdata[0]}{}", "&lt;b&gt;{}", "&amp;{}", "&#60;b&#62;{}", "</s>{}<pad>", "[CLS]{}",
    '=HYPERLINK("http://x","{}")', "=1+1{}", "+{}", "-{}", "@SUM({})",
    "`a` **{}** `b", "<b>`{}`</b>", "``{}``", "\\`{}\\`",  # a code span broken out of
))
SPECIAL = (
    "\x00", "\x01", "\x07", "\x08", "\x1b", "\x1b[31m", "\x7f", "\x85", "\t", "\x0b", "\x0c", "\r", "\r\n",
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
    "\u200f", "\u061c", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u2028", "\u2029",
    "\u3000", "\u00a0", "e\u0301", "\u0301", "\u0301\u0301\u0301", "\u1100\u1161\u11a8", "\u1100", "가", "안녕하세요",
    "🙂", "👩‍👩‍👧", "🇰🇷", "\U0001d573", "\U0010ffff", "\ue000", "\ufffd", "İ", "ß", "ﬁ", "Ⅻ", "٣", "שלום",
    "مرحبا", " ", "  ", "\\", "'", '"',
)
hangul = st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3)
astral = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, codec="utf-8")
any_char = st.characters(codec="utf-8")  # every category but surrogates (no browser sends those)
atom = st.one_of(st.sampled_from(MARKUP), st.sampled_from(SPECIAL), st.text(any_char, min_size=1, max_size=6),
                 st.text(hangul, min_size=1, max_size=6), st.text(astral, min_size=1, max_size=2))
short_line = st.lists(atom, max_size=6).map("".join)
# at and past the limits: tokens (the seed's tokenizer is one character a token, plus </s>), characters
LENGTHS = (inputs.MAX_TOKENS - 2, inputs.MAX_TOKENS - 1, inputs.MAX_TOKENS, inputs.MAX_TOKENS + 1,
           inputs.MAX_CHARS - 1, inputs.MAX_CHARS, inputs.MAX_CHARS + 1, 2 * inputs.MAX_CHARS + 3)


@st.composite
def long_line(draw, lengths=LENGTHS):
    """A line of exactly n code points (n at or past a limit), repeating a generated piece; its last
    characters one that a cut must not break (an astral character, a combining mark, a ZWJ sequence)."""
    n = draw(st.sampled_from(lengths))
    fill = draw(st.lists(atom, min_size=1, max_size=3).map("".join)
                .filter(lambda s: s.strip() and "\n" not in s and "\r" not in s))
    line = (fill * (n // len(fill) + 1))[:n]
    tail = draw(st.sampled_from(("", "🙂", "\u0301", "👩‍👩‍👧", "\u202e", "e\u0301", "가")))
    return line[: n - len(tail)] + tail


line = st.one_of(short_line, long_line())
text = st.builds(
    lambda lines, sep: sep.join(lines),
    st.one_of(st.lists(line, max_size=3),
              st.lists(short_line, min_size=inputs.MAX_SENTENCES, max_size=inputs.MAX_SENTENCES + 3)),
    st.sampled_from(("\n", "\r\n", "\r", "\n\n", "\n \n")))
sentences = text.filter(lambda t: any(x.strip() for x in t.splitlines()))  # something to run

# the app's URL parameters (and some it does not know), each with values it takes and values it must refuse
junk = st.one_of(st.sampled_from(MARKUP), short_line)
EDITS = ("no_scale", "scale=2", "scale=1e309", "temperature=0", "no_causal,no_padding",
         "ablate=encoder.self_attn:0:1", "ablate_mean=decoder.cross_attn:9:*", "no_position,scale=nan")
CHOICES = {
    "model": ("seed", "seed-sort", "../../etc/passwd", "seed\x00", "SEED", ""), "lang": (*i18n.LANGS, "../ko"),
    "view": (*inputs.VIEWS, "nope"), "block": (*stages.BLOCKS, "x<script>"), "present": ("1", "0", "yes", ""),
    "edit": EDITS, "stage": (*(sid for sid, _ in stages.STAGES), "nope"),
    **{name: ("1e309", "0x10", " 2 ", "9" * 40, "-0", "") for name in inputs.INT_PARAMS},
}
VALUES = {
    "text": text, "compare": line,
    **{name: st.one_of(st.sampled_from(choices), junk) for name, choices in CHOICES.items()},
    **{name: st.one_of(st.integers(-3, 99).map(str), st.sampled_from(CHOICES[name]), junk)
       for name in inputs.INT_PARAMS},
}
NAMES = (*VALUES, "pe_base", "unknown", "", "text[]")


def encode(value: str, how: str) -> str:
    if how == "quote":
        return quote(value, safe="")
    if how == "plus":
        return quote_plus(value)
    return value.replace("&", "%26").replace("#", "%23")  # typed into the address bar as it is


@st.composite
def query_string(draw) -> str:
    """name=value pairs joined by '&' (a view first, so that every view is visited), some keys repeated,
    some values broken (a lone '%', invalid UTF-8, an encoded NUL or right-to-left override)."""
    pairs = [f"view={draw(st.sampled_from(inputs.VIEWS))}"]
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=10)):
        value = draw(VALUES.get(name, short_line))
        raw = encode(value, draw(st.sampled_from(("quote", "plus", "raw"))))
        if draw(st.integers(0, 3)) == 0:
            raw += draw(st.sampled_from(("%", "%ZZ", "%C3%28", "%00", "%E2%80%AE", "%ED%A0%80", "+")))
        pairs.append(f"{quote(name, safe='')}={raw}")
    return "&".join(pairs)


# --- the page ---------------------------------------------------------------------------------------

CODE_SPAN = re.compile(r"`[^`]*`")
# a control or bidirectional character as it is (shown as ␀, U+202E, ... it is harmless)
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# a tag plotly renders, as the user typed it (every such piece generated puts MARK right after its tag; a
# view's own tag may wrap escaped user text)
USER_IN_TAG = re.compile(r"<(?:b|i|em|sup|sub|span|br)\b[^>]*>" + MARK, re.IGNORECASE)


def failure_prefixes() -> list[str]:
    """How the page says a figure or the page failed, in every language (the words before the details)."""
    return [i18n.t(key, lg, kind="\x00", msg="", id="").split("\x00")[0] for key in ("crash", "stage_error")
            for lg in i18n.LANGS]


def nodes(at):
    for block in at.main.root.children.values():
        yield from block


def markdown_bodies(at):
    """(what, body) of every markdown-rendered text on the page: bodies, captions, alerts, headings,
    and the labels and help of widgets."""
    from streamlit.testing.v1 import element_tree as et

    for n in nodes(at):
        if isinstance(n, (et.Markdown, et.AlertBase, et.HeadingBase, et.Toast)):
            yield n.type, str(n.value)
        for attr in ("label", "help"):
            value = getattr(n, attr, None) if isinstance(n, et.Widget) else None
            if isinstance(value, str):
                yield f"{n.type}.{attr}", value


def shown_texts(at):
    """(what, text) of every text a visitor reads on the page, markdown or not (the text boxes' own
    values aside: they are what was typed)."""
    from streamlit.testing.v1 import element_tree as et

    yield from markdown_bodies(at)
    for n in nodes(at):
        if isinstance(n, (et.Code, et.Text, et.Html)):
            yield n.type, str(n.value)
        elif isinstance(n, et.Dataframe):
            df = n.value
            for cell in [*map(str, df.columns), *map(str, df.index), *df.astype(str).to_numpy().ravel().tolist()]:
                yield "dataframe", cell
        elif isinstance(n, (et.Selectbox, et.Radio, et.Multiselect)):
            for option in n.options:
                yield f"{n.type}.option", str(option)


def keyed_strings(obj, key=""):
    """(key, string) of every string in a figure's JSON."""
    if isinstance(obj, str):
        yield key, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from keyed_strings(v, k)
    elif isinstance(obj, list):
        for v in obj:  # numbers (most of a figure) are passed over without a call each
            if isinstance(v, str):
                yield key, v
            elif isinstance(v, (dict, list)):
                yield from keyed_strings(v, key)


# a markdown character as it is (not escaped with a backslash, as explorer/lessons/page.py's md() does)
MD_SPECIAL = re.compile(r"(?<!\\)[*_\[\]<>$`~|#:=]")


def markup_near_mark(body: str, reach: int = 4) -> bool:
    """A markdown character not escaped within ``reach`` characters of user text (every markup piece
    generated here puts its markup right next to MARK)."""
    marks = [m.span() for m in re.finditer(MARK, body)]
    return any(a - reach <= c.start() < b + reach for c in MD_SPECIAL.finditer(body) for a, b in marks)


def check_page(at, *, user_markdown: str = "code") -> None:
    """``user_markdown``: how user text may appear in a markdown body: "code" (only inside a code
    span: the explorer), "escaped" (its markdown characters escaped with a backslash: the lessons)."""
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert not errors, errors
    failed = [w.value for w in at.warning if any(w.value.startswith(p) for p in failure_prefixes())]
    assert not failed, failed
    for n in nodes(at):
        assert "Traceback" not in str(getattr(n, "proto", "")), n.type
    for what, body in markdown_bodies(at):
        outside = CODE_SPAN.sub("", body)
        if user_markdown == "code":
            assert MARK not in outside, f"user text as markdown in {what}: {body[:300]!r}"
        else:
            assert not markup_near_mark(outside), f"user text as markdown in {what}: {body[:300]!r}"
    for n in at.get("html"):
        assert MARK not in n.value, n.value[:300]
    for what, shown in shown_texts(at):
        assert not RAW_CONTROL.search(shown), f"a raw control character in {what}: {shown[:200]!r}"
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        for key, s in dict.fromkeys(keyed_strings(spec)):  # a string repeated under one key: checked once
            assert not RAW_MARKUP.search(s), (key, s[:200])
            assert not USER_IN_TAG.search(s), (key, s[:200])
            assert not RAW_CONTROL.search(s), (key, s[:200])
            if key.endswith("template"):
                assert MARK not in s, (key, s[:200])  # plotly would substitute user text's %{...}


def lines_of(raw: str) -> list[str]:
    """The text's sentences as a reader counts them: non-blank lines (an independent count)."""
    return [x for x in re.split(r"\r\n|\r|\n", raw) if x.strip()]


def check_sentences(at, raw: str) -> None:
    n = min(len(lines_of(raw)), inputs.MAX_SENTENCES)
    if n == 0:
        assert any(i.value == i18n.t("empty", at.session_state["lang"]) for i in at.info)
        assert not at.get("plotly_chart")
    else:
        assert len(at.sidebar.selectbox(key="sentence").options) == n


def page_with(query: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=300)
    for name, values in parse_qs(query, keep_blank_values=True).items():  # as Streamlit reads a browser's
        at.query_params[name] = values if len(values) > 1 else values[0]
    return at


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(query=query_string(), typed=text)
@example(query="text=%E2%80%AEabc%00%3Cb%3Efzq%3C%2Fb%3E&view=tokens&block=`**fzq**`&layer=%",
         typed="=1+1\n**fzq** <script>fzq</script>\n$fzq$ \u2066x\u2069")
@example(query="view=decoding&text=" + quote("\u202eabc\x00fzq") + "&present=1&edit=" + quote("`**fzq**`"),
         typed="<b>fzq</b> <br>fzq \u202e\x00\n" + "\x00" * (inputs.MAX_CHARS + 1))
# regression: a download button's help, the file name made from the sentence ("a-_fzq_-b"), was markdown
@example(query="view=tokens", typed="a _fzq_ b")
def test_fuzzed_links_and_texts_never_break_the_page(query, typed):
    at = page_with(query).run()
    check_page(at)
    check_sentences(at, at.session_state["text"])
    at.sidebar.text_area(key="text").set_value(typed).run()
    check_page(at)
    check_sentences(at, typed)


@pytest.fixture(scope="module", autouse=True)
def hosted_long_bound():
    """The long view and the long lesson read at most a hosted server's 1,024 tokens here
    (ATTENTION_EXPLORER_LONG_TOKENS, inputs.long_token_bound), not a laptop's 4,096: a fuzzed text past the
    bound is cut at a token boundary more often, and the window lesson's own text (some 2,000 Gemma 3 tokens,
    still past Gemma 3's 512-token window) runs at half its length. tests/test_lessons.py renders it whole."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(inputs.LONG_TOKENS_ENV, str(inputs.LONG_TOKENS_HOSTED))
        yield


# the lessons page (/lessons): its own parameters, its own text box
LESSON_VALUES = {
    "lesson": st.one_of(st.integers(0, len(catalog.LESSONS) + 1).map(str), junk),
    "answers": st.one_of(st.lists(st.tuples(st.integers(1, len(catalog.LESSONS)), st.integers(-2, 70)), max_size=4)
                         .map(lambda items: ",".join(f"{k}:{v}" for k, v in items)), junk),
    "lesson_text": text, "lang": VALUES["lang"],
}


@st.composite
def lesson_query(draw) -> str:
    pairs = [f"lesson={draw(st.integers(1, len(catalog.LESSONS)))}"]
    for name in draw(st.lists(st.sampled_from(list(LESSON_VALUES)), min_size=1, max_size=5)):
        pairs.append(f"{name}={encode(draw(LESSON_VALUES[name]), draw(st.sampled_from(('quote', 'plus', 'raw'))))}")
    return "&".join(pairs)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(query=lesson_query(), typed=text)
@example(query="lesson=2&answers=2:1,3:0&lesson_text=" + quote("**fzq** <b>fzq</b> $fzq$\n\u202e=1+1"),
         typed="_fzq_ `fzq` [fzq](javascript:x)\n\x00:red[fzq]")
# regressions: a lesson number that is not one was echoed as markdown ("There is no lesson “**x**”"); the
# lesson picker formatted its options in the caller's language (AppTest could not rerun a Korean page);
# lesson 5 asks about its second sentence, and one typed sentence crashed the page (IndexError)
@example(query="lesson=1&lesson=" + quote("**fzq** <b>fzq</b> $fzq$ :red[fzq]"), typed="")
@example(query="lesson=1&lang=ko", typed="안녕")
@example(query="lesson=5", typed="<b>fzq</b>")
def test_fuzzed_lesson_links_and_texts_never_break_the_lessons(query, typed):
    at = page_with(query).run()  # the explorer first: AppTest finds st.navigation's pages after a run
    at.switch_page("lessons/page.py").run()
    check_page(at, user_markdown="escaped")
    n = at.session_state[N_KEY]
    at.text_area(key=f"lesson_text_{n}").set_value(typed).run()
    check_page(at, user_markdown="escaped")


# --- run_with_cache ---------------------------------------------------------------------------------

SEED_LIMIT = 80  # tokens per sentence for the raw runs: the refusal's boundary without 512-step decodes


@pytest.fixture(scope="module")
def shipped_seed():
    """The shipped weights (test_hostile.py fuzzes the untrained model), taking at most SEED_LIMIT tokens
    a sentence (its encoder-decoder decodes as many steps as the input has tokens)."""
    return model.load("seed", max_tokens=SEED_LIMIT)


@pytest.fixture(scope="module")
def real(request):
    """``model.load(name)``, from the app's process-wide cache (explorer/state.py): the lesson pages above
    loaded these models already."""
    from explorer import state

    name = request.param
    if not fetch.is_fetched(name):
        pytest.skip(f"{name} not fetched (run `{fetch.fetch_command(name)}`)")
    return state.load_model(name)[0]


def row_sum_tolerance(n_keys: int) -> float:
    """float32 softmax: each weight within a few units in the last place (2^-23 relative), the sum of
    n of them within about n·2^-22; doubled, plus an absolute floor."""
    return 1e-5 + 2 * n_keys * 2.0 ** -22


def check_run(m, texts: list[str], out, cache) -> None:
    """The run's outputs, as the hook contract (DESIGN.md) describes them."""
    b = len(texts)
    assert isinstance(cache.tokens, list) and len(cache.tokens) == b
    for toks, t in zip(cache.tokens, texts):
        assert isinstance(toks, list) and toks and all(isinstance(x, str) for x in toks)
        assert len(toks) == len(m.tokenizer.encode([t])[0].ids)
    n_in = [len(toks) for toks in cache.tokens]
    for name, x in cache.items():
        assert x.shape[0] in (1, b), (name, tuple(x.shape))
        if x.dtype.is_floating_point and not name.endswith("hook_masked_scores"):
            # finite: its float64 sum is (an inf or a nan anywhere makes the sum inf or nan; float32 values
            # cannot add up past float64's range), one pass without a mask as large as the tensor
            assert torch.isfinite(x.sum(dtype=torch.float64)), name
    patterns = [n for n in cache if n.endswith("hook_pattern")]
    assert patterns
    for name in patterns:
        p = name[: -len("hook_pattern")]
        pattern, allow = cache[name], cache[p + "hook_mask"]  # allow: [batch, 1 or head, q, k], broadcast
        scores, masked = cache[p + "hook_scores"], cache[p + "hook_masked_scores"]
        assert not pattern.masked_fill(allow, 0).any(), name  # blocked: exactly 0 (a nan is not 0 either)
        lo, hi = torch.aminmax(pattern)
        assert lo >= 0 and hi <= 1, name  # (false for a nan)
        # -inf exactly where blocked, the scores themselves where allowed
        assert torch.equal(masked, torch.where(allow, scores, -math.inf)), name
        mask = allow.expand_as(pattern)
        allowed = mask.any(-1)
        err = (pattern.sum(-1, dtype=torch.float64) - 1).abs()[allowed]
        assert err.numel() and err.max() <= row_sum_tolerance(pattern.shape[-1]), (name, float(err.max()))
        if "cross_attn" in name or name.startswith("encoder.") or m.info.kind == "decoder":
            for i, n in enumerate(n_in):  # the input side's padding: keys past a sentence's end blocked
                assert not mask[i, ..., n:].any(), (name, i, n)
    if m.info.kind == "encoder-decoder":
        assert isinstance(out.generated, list) and len(out.generated) == b
        assert all(isinstance(g, str) for g in out.generated)


def limited(texts_raw: str, tokenizer) -> list[str]:
    """The text as the app runs it: sentences, characters and tokens within explorer/inputs.py's limits."""
    texts, _ = inputs.limit_sentences(texts_raw)
    return inputs.limit_tokens(texts, tokenizer, inputs.MAX_TOKENS)[0] if texts else []


# with lone surrogates too (a broken encoding in a notebook or a file): the model takes them (as U+FFFD)
model_line = st.one_of(line, st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3),
                       long_line((SEED_LIMIT - 2, SEED_LIMIT - 1, SEED_LIMIT, SEED_LIMIT + 1)))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(raw=sentences, lines=st.lists(model_line, min_size=1, max_size=3))
@example(raw="a\u0301\ud800\n" + "🙂" * 70, lines=["\ud83d", "x" * SEED_LIMIT, "\u202e" * 3])
def test_the_seed_runs_any_text_or_says_why_not(shipped_seed, raw, lines):
    m = shipped_seed
    texts = limited(raw, m.tokenizer)
    if texts:  # the app's path: always runs
        out, cache = m.run_with_cache(texts)
        check_run(m, texts, out, cache)
        run = data.from_cache(cache, out, kind=m.info.kind, token_text=getattr(m, "token_text", None)).with_weights(
            data.weights_of(m))  # stages.run_data, without a second decode
        sel = stages.Selection(model="seed", sentence=len(texts) - 1, layer=0, head=0, block="encoder.self_attn")
        for stage_id in ("tokens", "softmax"):  # the tables' CSV downloads: no formula a spreadsheet runs
            _, df = stages.stage_figure(stage_id, run, m.info, sel)
            for row in csv.reader(io.StringIO(renderer.table_bytes(df).decode("utf-8-sig"), newline="")):
                for cell in row:
                    assert not cell.startswith(renderer.FORMULA_START) or is_number(cell), (stage_id, cell)
    # anything else: runs, or InputTooLong exactly when a sentence has more tokens than the model takes
    n_tokens = [len(e.ids) for e in m.tokenizer.encode(lines)]
    if max(n_tokens) > m.info.max_tokens:
        with pytest.raises(model.InputTooLong):
            m.run_with_cache(lines)
    else:
        out, cache = m.run_with_cache(lines)
        check_run(m, lines, out, cache)


def is_number(cell: str) -> bool:
    try:
        float(cell.replace("−", "-"))
    except ValueError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.weights
@pytest.mark.parametrize("real", ["minilm", "smollm2"], indirect=True)
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(raw=sentences, fill=st.lists(atom, min_size=1, max_size=3).map("".join).filter(str.strip))
@example(raw="<b>fzq</b> **x** $x$ =1+1\n\x00\u202e\u2066안녕하세요 🙂 e\u0301\n" + "가" * (inputs.MAX_CHARS + 1),
         fill="\u202e🙂")
def test_the_real_models_run_any_text_within_the_limits(real, raw, fill):
    texts = limited(raw, real.tokenizer)
    if texts:  # the hooks are checked, not the logits: no readout over the vocabulary at every position
        out, cache = real.run_with_cache(texts, logits=False)  # (SmolLM2: 49,152 tokens, ~10 % of its run)
        check_run(real, texts, out, cache)
    # past the model's own limit (512 tokens): refused before any forward pass, saying which and how long
    limit = real.info.max_tokens
    too_long = (fill + " a") * limit  # " a" is a token in both: more than the limit whatever the fill
    n = len(real.tokenizer.encode([too_long])[0].ids)
    assert n > limit
    with pytest.raises(model.InputTooLong) as refused:
        real.run_with_cache([texts[0] if texts else "ok", too_long])
    assert (refused.value.index, refused.value.n_tokens, refused.value.limit) == (1, n, limit)
