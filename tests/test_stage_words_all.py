"""Every stage's words name the model's own parts (issue 33 item 4).

For every family fixture (tests/fixtures/families, and two copies whose rope is scaled), every shipped
model (seed, seed-sort, minilm, smollm2, gemma3), every attention block it has, a local and a global
layer where it has both, and English and Korean, ``stage_words`` of every stage that applies (the
what-if and comparison stages with a second run of their own, the logit lens with and without its
readings) is read by ``problems``: a function of the words and of what the model's ModelInfo (and its
tokenizer, for the decoder's first token) says, written here without the helpers of
explorer/views/stages.py. It finds

- a norm the model does not have (RMSNorm on a LayerNorm model and the reverse, in either language),
  the wrong placement in the residual formula, Gemma's (1 + w) on a model without it;
- a first token other than the model's own where a decoder input or an attention sink is named
  (the seed's <s>, T5's and Marian's <pad>), "<s>" for a model that never starts with it, "seed"
  for another model;
- the readout: E (tied) or W_out, the output bias, a logit scale (T5's d_model^-½), the final soft-cap;
  the scores' scale and soft-cap, the embedding's √d_model;
- the rotary base of the layer (Gemma's local layers have their own) and the rope's scaling;
- a placeholder left, an empty title, Korean text without Hangul, a double subscript in a formula.

``test_a_wrong_description_fails`` gives ``problems`` a ModelInfo changed by ``dataclasses.replace``
(norm kind, tying, soft-cap, bias, scale, rope scaling, local base, first token) and a catalogue
sentence made wrong: each is reported.
"""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import model
from explorer import i18n
from explorer.views import stages, style
from explorer.views.data import induction_scores, lens_data

FIXTURES = Path(__file__).parent / "fixtures" / "families"
FAMILIES = sorted(p.name for p in FIXTURES.iterdir() if (p / "config.json").is_file()) if FIXTURES.is_dir() else []
# copies of a fixture with a scaled rope (config.json's rope_parameters): every layer, and Gemma's
# global layers only (its local layers keep their own base, unscaled)
SCALED = {
    "llama+linear": ("llama", {"rope_theta": 10000.0, "rope_type": "linear", "factor": 4.0}),
    "gemma3_text+llama3": ("gemma3_text", {
        "full_attention": {"rope_theta": 1000000.0, "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}),
}
SHIPPED = ["seed", "seed-sort", "minilm", "smollm2", "gemma3"]
CASES = FAMILIES + list(SCALED) + SHIPPED
TEXTS = ["12 34 56 78 90 13", "7 8"]
REAL_TEXTS = ["The cat sat on the mat.", "Hi"]
READOUT = ("logits", "logit_lens", "next_token")  # the stages that write the model's way out
HANGUL = re.compile(r"[\uac00-\ud7a3]")


# --- what the model says of itself, read here without stages.py's helpers --------------------------

@dataclass(frozen=True)
class Truth:
    """What the words of one (block, layer) must say, from ModelInfo and the tokenizer."""

    info: object
    block: str
    layer: int
    start: str | None  # the encoder–decoder's first decoder token, as shown ("<s>", "<pad>"); None otherwise
    first: str  # the first token of the block's stack, sentence 0, as shown
    firsts: frozenset  # the first tokens of every stack the model has

    @property
    def norm(self) -> str:
        """"LayerNorm" | "RMSNorm" | "" (a norm the words do not know)."""
        n = str(self.info.norm)
        return "RMSNorm" if "RMSNorm" in n else "LayerNorm" if "LayerNorm" in n else ""

    @property
    def other_norm(self) -> str:
        return {"RMSNorm": "LayerNorm", "LayerNorm": "RMSNorm"}.get(self.norm, "")

    @property
    def one_plus(self) -> bool:  # Gemma from config.json: x / rms(x) · (1 + w)
        return "(1+w)" in str(self.info.norm)

    @property
    def placement(self) -> str:
        return str(self.info.norm).partition("-")[0]

    @property
    def norm_tex(self) -> str:
        return r"\mathrm{" + self.norm + "}" + (r"_{1+w}" if self.one_plus else "")

    @property
    def windowed(self) -> bool:
        i = self.info
        return (self.block == "decoder.self_attn" and i.kind == "decoder" and bool(i.sliding_window)
                and self.layer in tuple(i.window_layers))

    @property
    def local(self) -> bool:
        """This layer rotates with the model's local base (and the local rope's scaling)."""
        return self.windowed and bool(self.info.positional_base_local)

    @property
    def base(self) -> float | None:
        i = self.info
        return None if i.positional != "rotary" else float(i.positional_base_local if self.local else i.positional_base)

    @property
    def scaling(self) -> tuple:
        sc = self.info.rope_scaling_local if self.local else self.info.rope_scaling
        return tuple(sc or ())


def commas(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _double_scripts(tex: str) -> list[str]:
    """Places where one base gets two subscripts (or two superscripts): a KaTeX parse error."""
    out, i, n = [], 0, len(tex)

    def arg_end(j: int) -> int:  # the end of the script's argument starting at j
        while j < n and tex[j] == " ":
            j += 1
        if j < n and tex[j] == "{":
            depth = 0
            for k in range(j, n):
                depth += {"{": 1, "}": -1}.get(tex[k], 0)
                if depth == 0:
                    return k + 1
            return n
        if j < n and tex[j] == "\\":
            m = re.match(r"\\[A-Za-z]+|\\.", tex[j:])
            return j + len(m.group(0))
        return j + 1

    while i < n:
        ch = tex[i]
        if ch == "\\":
            m = re.match(r"\\[A-Za-z]+|\\.", tex[i:])
            i += len(m.group(0)) if m else 1
            continue
        if ch in "_^":
            seen = {ch}
            j = arg_end(i + 1)
            while j < n and tex[j] in "_^'":
                if tex[j] == "'":
                    j += 1
                    continue
                if tex[j] in seen:
                    out.append(tex[max(0, i - 20): j + 5])
                    break
                seen.add(tex[j])
                j = arg_end(j + 1)
            i = j
            continue
        i += 1
    return out


def problems(sid: str, w: dict, t: Truth, lang: str, extra: str = "") -> list[str]:
    """What the words ``w`` of stage ``sid`` say that the model (``t``) contradicts, or leave out.
    ``extra``: more text the stage shows (the shapes stage's chain table)."""
    info, out = t.info, []
    where = f"{info.name} {t.block} L{t.layer} {sid} {lang}"

    def claim(ok: bool, what: str) -> None:
        if not ok:
            out.append(f"{where}: {what}")

    title, explain, tex = w.get("title"), w.get("explain"), w.get("formula")
    note, shape = w.get("note") or "", w.get("shape") or ""
    for part in ("title", "explain", "formula"):
        claim(isinstance(w.get(part), str) and w[part].strip() != "", f"empty {part}")
    if out:
        return out
    text = " ".join([title, explain, note, shape, extra])
    alltext = text + " " + tex

    # -- the page's form: no placeholder left, Korean in Korean, a formula KaTeX parses
    claim(not re.search(r"\{[A-Za-z_][A-Za-z0-9_]*\}", text), "a {placeholder} left")
    claim(not re.search(r"(?<![\\A-Za-z_^{}])\{[a-z_]+\}", tex), "a {placeholder} left in the formula")
    claim(not re.search(r"\bNone\b(?! of\b)|\bnan\b", text), "None or nan filled in")
    claim(tex.count("{") == tex.count("}"), "unbalanced braces in the formula")
    claim(not _double_scripts(tex), f"a double subscript in the formula: {_double_scripts(tex)[:1]}")
    if lang == "ko":
        claim(bool(HANGUL.search(title)) and bool(HANGUL.search(explain)), "Korean words without Hangul")
    else:
        claim(not HANGUL.search(title), "Hangul in the English title")

    # -- the norm: never one the model does not have; the model's own where the stage names it
    named = set()
    if re.search(r"RMSNorm", alltext):
        named.add("RMSNorm")
    if re.search(r"LayerNorm|레이어 정규화|\b(?:post|pre)-LN\b", alltext):
        named.add("LayerNorm")
    claim(not (t.other_norm and t.other_norm in named), f"names {t.other_norm} (the model has {info.norm})")
    if t.norm == "RMSNorm":
        ones = re.findall(r"\\mathrm\{RMSNorm\}(_\{1\+w)?", tex)
        claim(all(bool(x) == t.one_plus for x in ones), "RMSNorm_{1+w} iff the model's norm multiplies by 1 + w")
        claim(("RMSNorm(1+w)" in text) <= t.one_plus, "RMSNorm(1+w) named for a model without it")
    if sid == "residual_norm" and w.get("variant") != "unknown":
        claim(t.norm in explain, f"{t.norm} not named")
        N = t.norm_tex
        want = {"post": N + r"\big(x + ", "pre": r"x + \mathrm{Sublayer}\big(" + N + "(x)",
                "sandwich": r"x + " + N + r"\Big(\mathrm{Sublayer}\big(" + N + "(x)"}.get(t.placement)
        claim(want is not None and want in tex, f"the residual formula is not {t.placement}-{t.norm}")
    if sid == "qkv" and t.placement in ("pre", "sandwich"):
        x = "Y" if t.block.endswith("cross_attn") else "X"
        claim(rf"\hat {x} = {t.norm_tex}({x})" in tex, f"the normed input is not {t.norm_tex}({x})")
        claim(t.norm in explain or t.block.endswith("cross_attn"), f"{t.norm} not named")
    if sid == "ffn" and t.placement in ("pre", "sandwich"):
        claim(t.norm in explain, f"the feed-forward's input norm ({t.norm}) not named")
    if sid == "embedding" and w.get("variant") != "unknown":
        claim((r"\mathrm{LayerNorm}\big(E" in tex) == bool(info.embed_norm), "the embedding's norm said wrongly")
        claim((r"\sqrt{d_{model}}" in tex) == (float(info.embed_scale) != 1.0), "√d_model said wrongly")

    # -- the first token
    starts_with_s = "<s>" in t.firsts or t.start == "<s>"
    claim(starts_with_s or not re.search(r"<s>|\\langle s\\rangle", alltext), "<s> named for a model without it")
    if info.family != "seed":
        claim(not re.search(r"(?<!random )\bseed\b", alltext, re.I) and not re.search(r"(?<!난수 )시드", alltext),
              "the seed named for another model")
    for said in re.findall(r"first token \((?!an attention sink\))([^,)]+)|첫 토큰\(([^,)]+)", explain):
        tok = said[0] or said[1]
        claim(tok == t.first, f"the first token is said to be {tok!r}, the model's is {t.first!r}")
    decoder_input = (t.start is not None and t.block == "decoder.self_attn"
                     and ((sid, w.get("variant")) in (("tokens", "decoder"), ("rollout", "seed_decoder"),
                                                      ("head_roles", "seed_decoder")) or sid == "logits"))
    if sid == "logits" or decoder_input:
        claim(t.start is not None and t.start in explain, f"the decoder's first token {t.start!r} not named")
    if sid == "tokens" and decoder_input:
        got = re.search(r"= \((.*?), y_1", tex)
        said = got and re.sub(r"\\langle\s*|\\rangle|\\mathrm\{|\\text\{|\}|\s", "",
                              got.group(1).replace(r"\langle", "<").replace(r"\rangle", ">"))
        claim(said == t.start, f"the formula's decoder input starts with {said!r}, not {t.start!r}")

    # -- the way out: final norm, scale, E or W_out, bias, soft-cap
    cap = float(info.final_softcap or 0.0)
    scale = float(info.logit_scale or 1.0)
    inv_root = abs(scale - float(info.d_model) ** -0.5) < 1e-9
    if sid in READOUT:
        words = sid != "next_token"  # logits and the lens say the readout in words too
        sm = re.search(r"\\mathrm\{softmax\}\\big\((.*)\\big\)", tex)
        ro = sm.group(1) if sm else tex
        claim((t.norm_tex + r"\big(" in ro or t.norm_tex + "(" in ro) == bool(info.final_norm),
              "the final norm said wrongly in the formula")
        claim(not info.final_norm or not words or
              (f"the final {t.norm}" in explain if lang == "en" else f"마지막 {t.norm}" in explain),
              f"the final {t.norm} not named")
        claim(info.final_norm or not re.search(r"(?:the final|마지막) (?:LayerNorm|RMSNorm)", explain),
              "a final norm named for a model without one")
        claim((r"E^\top" in ro) == bool(info.tied_output) and (r"W_{out}^\top" in ro) == (not info.tied_output),
              "E (tied) or W_out said wrongly in the formula")
        claim(not words or (("the embedding matrix, tied" in explain or "묶인 임베딩 행렬" in explain)
                            == bool(info.tied_output)), "the tied output said wrongly")
        claim(bool(re.search(r"\+ b(?![_\w])", ro)) == bool(info.output_bias), "the output bias said wrongly")
        claim(not words or (("output bias" in explain or "출력 편향" in explain) == bool(info.output_bias)),
              "the output bias said wrongly in words")
        claim((r"d_{model}^{-1/2}" in ro) == (scale != 1.0 and inv_root), "d_model^-½ said wrongly")
        claim((r"\cdot " in ro) == (scale != 1.0 and not inv_root), "the logit scale said wrongly")
        claim(not words or (f"× {scale:.4g}" in explain) == (scale != 1.0), "the logit scale said wrongly in words")
        claim((f"{cap:g}" + r"\tanh" in ro) == bool(cap) and (r"\tanh" in ro) <= bool(cap),
              "the final soft-cap said wrongly in the formula")
        claim(not words or ((f"soft-cap {cap:g}" in explain or f"소프트캡 {cap:g}" in explain) == bool(cap)),
              "the final soft-cap said wrongly in words")
    else:
        claim(not re.search(r"\btied\b|묶인|\\text\{공유\}", alltext) or info.tied_output,
              "a tied output named for an untied model")
    softcaps = bool(cap) or bool(info.attn_softcap)
    claim(not re.search(r"soft-?cap|소프트캡", alltext, re.I) or softcaps,
          "a soft-cap named for a model without one")
    if sid == "scaled":
        s = float(info.attn_scale or 0.0)
        plain = not s or abs(s - float(info.d_head) ** -0.5) < 1e-9
        claim((r"\sqrt{d_k}" in tex) == plain, "√d_k said wrongly")
        claim(plain or s == 1.0 or f"{s:.4f}" in tex, f"the scores' scale {s:.4f} not in the formula")
        acap = float(info.attn_softcap or 0.0)
        claim((r"\tanh" in tex) == bool(acap), "the scores' soft-cap said wrongly")

    # -- rotary: the layer's own base, and the rope's scaling
    if t.base is not None:
        said = commas(t.base)
        if sid == "rope_freqs":
            claim("= " + said.replace(",", "{,}") in tex, f"the formula's base is not {said}")
        other = info.positional_base_local if not t.local else info.positional_base
        two = bool(info.positional_base_local) and float(info.positional_base_local) != float(info.positional_base) \
            and bool(tuple(info.window_layers)) and t.block == "decoder.self_attn"
        if sid in ("rope_freqs", "rope_distance") and (two or sid == "rope_distance"):
            claim(said in note, f"the layer's base {said} not in the note")
        if two and sid in ("rope_freqs", "rope_distance"):
            claim(commas(float(other)) in note, "the other layers' base not in the note")
        if two and sid == "qkv" and t.block == "decoder.self_attn":
            claim(f"{said}" in explain, f"the layer's base {said} not named")
        if sid in ("rope_freqs", "rope_distance"):
            sc = t.scaling
            if sc:
                kind, factor = sc[0], f"{float(sc[1]):g}"
                claim(f"{kind} scaling (factor {factor})" in note or f"{kind} 스케일링(배율 {factor})" in note,
                      f"the rope's {kind} scaling (factor {factor}) not named")
    claim(bool(t.scaling) or not re.search(r"scaling \(factor|스케일링\(배율", alltext),
          "a rope scaling named for a layer without one")
    return out


# --- the models and their runs ------------------------------------------------------------------

def _load(name: str, tmp: Path):
    if name in SCALED:
        src, rope = SCALED[name]
        folder = tmp / name.replace("+", "_")
        shutil.copytree(FIXTURES / src, folder)
        cfg = json.loads((folder / "config.json").read_text())
        cfg["rope_parameters"] = rope
        (folder / "config.json").write_text(json.dumps(cfg))
        return model.load(folder)
    if name in FAMILIES:
        return model.load(FIXTURES / name)
    from model import fetch

    if name in fetch.SOURCES and not fetch.is_fetched(name):
        pytest.skip(f"{name} is not fetched (python -m model.fetch {name})")
    return model.load(name)


@dataclass
class Case:
    m: object
    run: object  # with the logit lens of sentence 0 and the induction scores
    plain: object  # without them: the lens's words before it is computed
    edited: object  # the what-if run
    other: object  # the second sentence alone
    start: str | None
    firsts: dict


def make_case(name: str, tmp: Path) -> Case:
    m = _load(name, tmp)
    info = m.info
    texts = TEXTS if info.vocab_size < 20000 else REAL_TEXTS
    plain = stages.run_data(m, texts)
    run = plain.with_induction(induction_scores(m))
    if info.kind != "encoder":
        run = run.with_lens(lens_data(m, run, 0))
    start = None
    if info.kind == "encoder-decoder":  # from the model's configuration, not from the run
        start = style.visible(m.token_text(m.family.decoder_start_id))
        assert style.visible(plain.decoder_tokens[0][0]) == start
    firsts = {"encoder" if info.kind != "decoder" else "decoder": style.visible(plain.tokens[0][0])}
    if start is not None:
        firsts["decoder"] = start
    return Case(m, run, plain, stages.run_data(m, texts, edits="temperature=2"), stages.run_data(m, texts[1:]),
                start, firsts)


@pytest.fixture(scope="module", params=CASES)
def case(request, tmp_path_factory):
    return make_case(request.param, tmp_path_factory.mktemp("scaled"))


def layers(info, block: str) -> list[int]:
    """The first and last layer, and a local and a global one where the model has both."""
    n = stages.layers_for(info, block)
    out = {0, n - 1}
    if block == "decoder.self_attn" and info.kind == "decoder" and info.sliding_window:
        out |= {next((i for i in range(n) if i in info.window_layers), 0),
                next((i for i in range(n) if i not in info.window_layers), 0)}
    return sorted(out)


def truth(case: Case, block: str, layer: int) -> Truth:
    return Truth(case.m.info, block, layer, case.start, case.firsts[block.split(".")[0]],
                 frozenset(case.firsts.values()))


def renders(case: Case, block: str, layer: int):
    """(stage id, lang, words, extra text) of every stage that applies to this block and layer."""
    info = case.m.info
    sel = stages.Selection(info.name, 0, layer, 1, block, 1, 0)
    seconds = {"edited": case.edited, "other": case.other}
    for sid in stages.STAGE_IDS:
        if not stages.applies(sid, info, block):
            continue
        rec = stages.REGISTRY[sid]
        opts = {rec.needs: seconds[rec.needs]} if rec.needs else {}
        runs = [case.run, case.plain] if sid == "logit_lens" else [case.run]
        for run in runs:
            for lang in ("en", "ko"):
                w = stages.stage_words(sid, run, info, sel, lang, **opts)
                extra = ""
                if sid == "shapes":  # the chain table is the stage's words too
                    _, df = stages.stage_figure(sid, run, info, sel, lang=lang)
                    extra = " ".join(str(x) for x in df.iloc[:, 0]) if df is not None else ""
                yield sid, lang, w, extra


def test_every_stage_names_the_models_own_parts_in_both_languages(case):
    info = case.m.info
    found, n = [], 0
    for block in info.blocks:
        for layer in layers(info, block):
            t = truth(case, block, layer)
            for sid, lang, w, extra in renders(case, block, layer):
                found += problems(sid, w, t, lang, extra)
                n += 1
    assert n >= 60 and found == [], (n, found[:20])


# --- a wrong description fails ------------------------------------------------------------------

def _words(case: Case, sid: str, block: str, layer: int = 0, lang: str = "en") -> dict:
    sel = stages.Selection(case.m.info.name, 0, layer, 1, block, 1, 0)
    return stages.stage_words(sid, case.run, case.m.info, sel, lang)


@pytest.mark.parametrize("name", ["gemma3_text", "t5", "marian", "bert", "llama+linear"])
def test_a_wrong_description_fails(name, tmp_path):
    """The words made for the model, read against a ModelInfo changed in one thing: reported."""
    c = make_case(name, tmp_path)
    info = c.m.info
    block = "decoder.self_attn" if "decoder.self_attn" in info.blocks else info.blocks[0]

    def fails(sid: str, wrong, lang: str = "en", layer: int = 0, **t_changes) -> bool:
        w = _words(c, sid, block, layer, lang)
        right = truth(c, block, layer)
        assert problems(sid, w, right, lang) == [], (sid, problems(sid, w, right, lang))
        bad = dataclasses.replace(right, info=wrong, **t_changes)
        return problems(sid, w, bad, lang) != []

    flipped = "pre-LayerNorm" if "RMS" in info.norm else "pre-RMSNorm"
    for sid in ("residual_norm", "ffn", "qkv"):
        for lang in ("en", "ko"):
            assert fails(sid, dataclasses.replace(info, norm=flipped), lang), (sid, lang)
    if info.kind != "encoder":
        readout = "logits" if info.kind == "encoder-decoder" else "next_token"
        for lang in ("en", "ko"):
            assert fails(readout, dataclasses.replace(info, tied_output=not info.tied_output), lang)
            cap = 0.0 if info.final_softcap else 30.0
            assert fails("logit_lens", dataclasses.replace(info, final_softcap=cap), lang)
            assert fails("logit_lens", dataclasses.replace(info, output_bias=not info.output_bias), lang)
            assert fails("logit_lens", dataclasses.replace(info, final_norm=not info.final_norm), lang)
            assert fails(readout, dataclasses.replace(info, logit_scale=1.0 if info.logit_scale != 1.0
                                                      else info.d_model ** -0.5), lang)
    if info.kind == "encoder-decoder":
        for sid in ("tokens", "logits"):
            wrong_start = "<s>" if c.start != "<s>" else "<pad>"
            assert fails(sid, info, start=wrong_start)
        assert fails("rollout", info, firsts=frozenset({"<s>"}), start="<s>", first="<s>")  # another sink named
    if info.positional == "rotary":
        field = "rope_scaling_local" if truth(c, block, 0).local else "rope_scaling"  # layer 0's own rope
        other = () if getattr(info, field) else ("linear", 2.0, 1.0, 4.0, 8192)
        for sid in ("rope_freqs", "rope_distance"):
            assert fails(sid, dataclasses.replace(info, **{field: other}))
        if info.positional_base_local:  # layer 0 is local: its base is not the global one
            assert fails("rope_freqs", dataclasses.replace(info, positional_base_local=None))
            assert fails("qkv", dataclasses.replace(info, positional_base_local=3.0))
    if info.family != "seed" and info.kind != "encoder":
        plain = not info.attn_scale or abs(info.attn_scale - info.d_head ** -0.5) < 1e-9
        for wrong in ((1.0, 0.3) if plain else (0.0, 0.3)):
            assert fails("scaled", dataclasses.replace(info, attn_scale=wrong))


def test_a_wrong_sentence_in_the_catalogue_fails(monkeypatch):
    """The words changed, the model not: a LayerNorm in T5's residual words, <s> in its decoder input,
    the tie dropped from its generator, "seed" in its rollout, a placeholder left."""
    m = model.load(FIXTURES / "t5")
    run = stages.run_data(m, TEXTS)
    start = style.visible(m.token_text(m.family.decoder_start_id))
    t = Truth(m.info, "decoder.self_attn", 0, start, start, frozenset({start, style.visible(run.tokens[0][0])}))
    sel = stages.Selection(m.info.name, 0, 0, 1, "decoder.self_attn", 1, 0)

    def check(sid: str, lang: str = "en") -> list[str]:
        return problems(sid, stages.stage_words(sid, run, m.info, sel, lang), t, lang)

    for sid in ("residual_norm", "tokens", "logits", "rollout"):
        assert check(sid) == [] and check(sid, "ko") == [], sid
    key = "stage.residual_norm.explain.pre_rms"
    wrong = i18n.WORDS[key]["ko"] + " LayerNorm과 같습니다."
    monkeypatch.setitem(i18n.WORDS, key, {**i18n.WORDS[key], "ko": wrong})
    assert check("residual_norm", "ko") and not check("residual_norm")
    key = "stage.tokens.explain.decoder"
    monkeypatch.setitem(i18n.WORDS, key, {**i18n.WORDS[key], "en": "The decoder's input is <s> and {start}."})
    assert check("tokens")
    monkeypatch.setitem(i18n.WORDS, "lens.read.tied", {"en": "the output matrix", "ko": "출력 행렬"})
    assert check("logits") and check("logits", "ko")
    key = "stage.rollout.explain.seed_decoder"
    monkeypatch.setitem(i18n.WORDS, key, {**i18n.WORDS[key], "en": i18n.WORDS[key]["en"] + " As in the seed."})
    assert check("rollout")
    monkeypatch.setitem(i18n.WORDS, key, {**i18n.WORDS[key], "en": "{{n}} layers, first token ({start})."})
    assert check("rollout")
