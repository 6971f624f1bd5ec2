"""What the user gives the app, made safe: sentences within limits, URL parameters validated.

Pure functions (no Streamlit), so they are tested directly.

Limits (documented in the README and shown in the text box's help):
    MAX_SENTENCES sentences, MAX_CHARS characters and MAX_TOKENS tokens (specials included) each.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MAX_SENTENCES = 8
MAX_CHARS = 400
MAX_TOKENS = 64
# what one text box holds at most (characters). The browser refuses an edit or paste that would pass
# it (Streamlit's max_chars: the box keeps what it had), so it is generous: a pasted page or article
# is taken and then cut to the sentence limits with notices. Text from the URL or a crafted message
# is cut to it before anything else looks at it. At most 4 bytes a character, a full box is 400 kB,
# within the 1 MB a browser message may carry (.streamlit/config.toml: server.maxWidgetStateSize).
MAX_BOX_CHARS = 100_000
MAX_EDIT_CHARS = 4000  # the what-if edit box: model.edits.MAX_EDITS (64) edits of up to ~60 characters
MODELS = ("seed", "seed-sort", "minilm", "smollm2", "gemma3")  # built in; model_names() adds the configured ones
VIEWS = ("stage", "all", "tokens", "position", "qkv", "scores", "output", "cell", "overview", "block", "beyond",
         "decoding", "whatif", "compare", "long")
INT_PARAMS = ("sentence", "layer", "head", "query", "key", "step")
DEFAULT_TEXT = "hello world\n안녕하세요 여러분"
DEFAULT_STAGE = "softmax"  # the stage the default page (view=stage) opens on


EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"  # package data (pyproject.toml), in a wheel too


def load_examples() -> list[str]:
    """The sidebar's example texts: explorer/examples/*.txt, blocks between blank lines, # lines left out."""
    out: list[str] = []
    for path in sorted(EXAMPLES_DIR.glob("*.txt")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        block: list[str] = []
        for line in lines + [""]:
            if line.startswith("#"):
                continue
            if line.strip():
                block.append(line)
            elif block:
                out.append("\n".join(block))
                block = []
    return out


@dataclass
class Notice:
    key: str  # an i18n key
    args: dict = field(default_factory=dict)


def split_sentences(raw: str) -> list[str]:
    """One sentence per line; blank lines dropped; other control characters kept in the text."""
    raw = (raw or "").replace("\r\n", "\n").replace("\r", "\n")
    return [line for line in raw.split("\n") if line.strip()]


def limit_box(raw, n: int = MAX_BOX_CHARS) -> tuple[str, list[Notice]]:
    """A text box's value cut to ``n`` characters before it is split or read, with a notice when it
    had to be (or when it stands at the box's bound: the browser stops a paste there silently)."""
    raw = raw if isinstance(raw, str) else str(raw or "")
    if len(raw) >= n:
        return raw[:n], [Notice("box_cut", {"n": n})]
    return raw, []


def limit_sentences(raw: str) -> tuple[list[str], list[Notice]]:
    """Apply the box, sentence and character limits (not the token limit: that needs the tokenizer).
    The raw text is cut to ``MAX_BOX_CHARS`` first, so a huge text costs no more than a full box."""
    raw, notices = limit_box(raw)
    lines = split_sentences(raw)
    if len(lines) > MAX_SENTENCES:
        notices.append(Notice("too_many", {"n": MAX_SENTENCES, "m": len(lines)}))
        lines = lines[:MAX_SENTENCES]
    out = []
    for i, line in enumerate(lines):
        if len(line) > MAX_CHARS:
            notices.append(Notice("too_long", {"i": i, "n": MAX_CHARS}))
            line = line[:MAX_CHARS]
        out.append(line)
    return out, notices


def limit_tokens(texts: list[str], tokenizer, max_tokens: int = MAX_TOKENS) -> tuple[list[str], list[Notice]]:
    """Cut each sentence so it has at most ``max_tokens`` tokens (specials included), at a token
    boundary, using the model's own tokenizer and its character offsets."""
    out, notices = [], []
    for i, text in enumerate(texts):
        enc = tokenizer.encode([text])[0]
        if len(enc.ids) <= max_tokens:
            out.append(text)
            continue
        keep = max_tokens
        cut = text
        while keep > 0:
            ends = [b for (a, b) in enc.offsets[:keep] if b > 0]
            cut = text[: max(ends)] if ends else ""
            if len(tokenizer.encode([cut])[0].ids) <= max_tokens:
                break
            keep -= 1
        notices.append(Notice("too_many_tokens", {"i": i, "n": max_tokens}))
        out.append(cut if cut.strip() else text[:1])
    return out, notices


def shown(value, n: int = 60) -> str:
    """A user's value for a message inside `code`: shortened, no backticks, controls visible."""
    text = str(value)[:n].replace("`", "'")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def parse_int(value) -> int | None:
    try:
        s = str(value).strip()
        if not s or len(s) > 12:
            return None
        return int(s)
    except (TypeError, ValueError):
        return None


@dataclass
class Params:
    values: dict = field(default_factory=dict)  # validated: str for model/text/block/lang/view, int otherwise
    ignored: list[tuple[str, str, str, dict]] = field(default_factory=list)  # (name, value, why-key, args)
    notices: list[Notice] = field(default_factory=list)  # the text was cut to the limits


def model_names() -> tuple[str, ...]:
    """The names a visitor may choose or link to: the built-in ones, then the host's configured
    ones (model/configured.py). Never a path: a folder typed in the sidebar is local mode's alone."""
    from model import configured

    return (*MODELS, *configured.entries(reserved=MODELS))


def parse_params(qp: dict, *, blocks=("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
                 langs=("en", "ko"), models: tuple[str, ...] | None = None) -> Params:
    """Validate URL query parameters. Unknown values are ignored (and reported); integers are
    parsed here and clipped later, once the model (and so the ranges) is known. ``models``: the
    names ``model=`` may take (default ``model_names()``); a path never is one."""
    p = Params()
    models = model_names() if models is None else models

    def get(name):
        v = qp.get(name)
        if isinstance(v, (list, tuple)):
            v = v[-1] if v else None
        return v

    for name, choices, why in (("model", models, "why_model"), ("block", blocks, "why_choice"),
                               ("lang", langs, "why_choice"), ("view", VIEWS, "why_choice")):
        v = get(name)
        if v is None:
            continue
        if v in choices:
            p.values[name] = v
        else:
            p.ignored.append((name, shown(v), why, {"choices": ", ".join(choices)}))
    stage = get("stage")  # a stage id: checked against the model's pipeline once the model is known
    if stage is not None:
        p.values["stage"] = str(stage)[:200]
    text = get("text")
    if text is not None:
        lines, notices = limit_sentences(str(text))
        p.values["text"] = "\n".join(lines)
        p.notices = notices
    for name in INT_PARAMS:
        v = get(name)
        if v is None:
            continue
        n = parse_int(v)
        if n is None:
            p.ignored.append((name, shown(v), "why_int", {}))
        else:
            p.values[name] = n
    return p


def clip(value: int, n: int) -> int:
    return min(max(int(value), 0), max(int(n) - 1, 0))


# --- long inputs (issue 34) ---------------------------------------------------------------------------
# The "long" view reads the whole text box as one sequence (line breaks included), up to a bound in
# tokens: a laptop's run takes up to 4,096 (model.analysis.long.MAX_LONG_TOKENS), a hosted server's
# 1,024 unless its host sets $ATTENTION_EXPLORER_LONG_TOKENS (capped at 4,096; the model's positions cap
# it too). The other views keep their limits above.
LONG_TOKENS_ENV = "ATTENTION_EXPLORER_LONG_TOKENS"
LONG_TOKENS_LOCAL = 4096
LONG_TOKENS_HOSTED = 1024


def long_token_bound(hosted: bool, env: dict | None = None) -> int:
    """Tokens the long view reads at most: $ATTENTION_EXPLORER_LONG_TOKENS when it is a whole number
    >= 1 (at most LONG_TOKENS_LOCAL), else LONG_TOKENS_HOSTED on a hosted server, LONG_TOKENS_LOCAL on a
    laptop."""
    import os

    raw = str((os.environ if env is None else env).get(LONG_TOKENS_ENV, "")).strip()
    n = parse_int(raw)
    if n is not None and n >= 1:
        return min(n, LONG_TOKENS_LOCAL)
    return LONG_TOKENS_HOSTED if hosted else LONG_TOKENS_LOCAL


def long_text(raw) -> tuple[str, list[Notice]]:
    """The text box as the long view reads it: cut to the box's bound first (``limit_box``), line
    breaks normalised, blank lines at either end dropped; one sequence, not split into sentences."""
    raw, notices = limit_box(raw)
    text = raw.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    return text, notices


# --- what if and two sentences (issue 15) ------------------------------------------------------------

def limit_compare(raw: str) -> tuple[str, bool]:
    """The comparison's second sentence as typed or linked: its first non-blank line, at most
    MAX_CHARS characters (the token limit needs the tokenizer: ``limit_tokens``); and whether it
    had to be cut."""
    lines, notices = limit_sentences(raw or "")
    text = lines[0] if lines else ""
    return text, bool(notices) or len(lines) > 1


# --- sampling in the Decoding view (issue 26, item 7) -------------------------------------------------
MAX_TEMPERATURE = 5.0
MAX_SEED = 2**31 - 1


def parse_sampling(raw) -> tuple[float, int | None, float | None, int] | None:
    """The URL's ``sample`` ("T,k,p,seed": temperature > 0, top-k (0: off), top-p in (0, 1] (1: off),
    seed) as (temperature, top_k or None, top_p or None, seed); None for greedy, a malformed or an
    out-of-range value (never an exception)."""
    parts = str(raw or "").split(",")
    if len(parts) != 4:
        return None
    try:
        temp, k, p, seed = float(parts[0]), int(parts[1]), float(parts[2]), int(parts[3])
    except ValueError:
        return None
    if not (0 < temp <= MAX_TEMPERATURE and 0 <= k <= 10**6 and 0 < p <= 1 and 0 <= seed <= MAX_SEED):
        return None
    return temp, (k or None), (None if p >= 1 else p), seed


def format_sampling(temperature: float, top_k: int | None, top_p: float | None, seed: int) -> str:
    """The URL's ``sample`` for these settings ("" for greedy); ``parse_sampling`` reads it back."""
    if not temperature:
        return ""
    return f"{float(temperature):g},{int(top_k or 0)},{float(top_p or 1.0):g},{int(seed)}"
