"""The Stages pages (docs/stages.md, stages.ko.md: the marker <!-- gen:stages-LANG -->): every stage of the registry (explorer/views/stages.py)
with its title, the words and formula the page shows, the tensors it draws and its figure, for a
named model. The seed Transformer (shipped) speaks for every stage it has; the few it has not
(rotary, grouped-query, QK-norm, learned and relative positions) are shown on the tiny checkpoints of
the test fixtures (tests/fixtures/families/: random weights, made with transformers), named on the
page. The figures are the plotly figures the page draws, embedded as JSON and drawn by plotly.js
(the installed plotly package's own copy, one file for the site)."""
from __future__ import annotations

import html
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "families"
TEXTS = ("hello world", "attention")  # the seed's run: a padded batch of two (its decoder reverses them)
OTHER = "hello wurld"  # the second sentence of the comparison and of patching (as many tokens: the seed reads characters)
EDITS = "no_causal"  # the what-if run
# the fixtures a stage the seed lacks is shown on, in order of preference
FALLBACK = ("llama", "qwen3", "gemma3_text", "bert", "t5")
FALLBACK_TEXTS = ("hello world", "the cat sat")

LABELS = {
    "en": {"model": "Model", "block": "block", "formula": "Formula", "shapes": "Tensors drawn", "note": "Note",
           "fixture": "the tiny `{name}` checkpoint of the test fixtures (random weights)",
           "seed": "the seed Transformer", "url": "In the app", "nofig": "(no figure: {why})"},
    "ko": {"model": "모델", "block": "블록", "formula": "수식", "shapes": "그리는 텐서", "note": "참고",
           "fixture": "테스트용 작은 `{name}` 체크포인트 (무작위 가중치)",
           "seed": "seed 트랜스포머", "url": "앱에서", "nofig": "(그림 없음: {why})"},
}


class _Model:
    """A loaded model, its run and the runs and analyses the stages read beside it."""

    def __init__(self, name: str, m, texts):
        from explorer.views import stages

        self.name, self.m, self.texts = name, m, list(texts)
        self.run = stages.run_data(m, self.texts)
        self._edited = self._other = None
        self._effects = {}
        self._patches = None
        self._attached = set()

    def attach(self, uses) -> None:
        """Make what the stage reads beside the run (its record's ``uses``), once."""
        from explorer.views.data import induction_scores, lens_data
        from explorer.views.trace import trace_data

        for kind in set(uses) - self._attached:
            if kind == "trace":
                self.run = self.run.with_trace(trace_data(self.m, self.texts[0]))
            elif kind == "lens" and self.m.info.kind != "encoder":
                self.run = self.run.with_lens(lens_data(self.m, self.run, 0))
            elif kind == "induction":
                self.run = self.run.with_induction(induction_scores(self.m))
            self._attached.add(kind)

    @property
    def edited(self):
        from explorer.views import stages

        if self._edited is None:
            self._edited = stages.run_data(self.m, self.texts, with_weights=False, edits=EDITS)
        return self._edited

    @property
    def other(self):
        from explorer.views import stages

        if self._other is None:
            self._other = stages.run_data(self.m, [OTHER], with_weights=False)
        return self._other

    def effects(self, block):
        from model.analysis import ablation

        if block not in self._effects:
            try:
                self._effects[block] = ablation.head_effects(self.m, self.texts[0], block)
            except ablation.AblationError:
                self._effects[block] = None
        return self._effects[block]

    def patches(self, block):
        from explorer.views import stages
        from model.analysis import patching

        if self._patches is None:
            try:
                self._patches = patching.patch_positions(self.m, self.texts[0], OTHER,
                                                         stack=stages.patching_stack(self.m.info, block))
            except patching.PatchingError:
                self._patches = False
        return self._patches or None


def _models():
    import model

    yield _Model("seed", model.load("seed"), TEXTS)
    for fam in FALLBACK:
        if (FIXTURES / fam).is_dir():
            yield _Model(fam, model.load(str(FIXTURES / fam)), FALLBACK_TEXTS)


def _pick(sid: str, loaded: list, more):
    """The first model (seed first) and block the stage applies to."""
    from explorer.views import stages

    def fit(mm):
        for block in stages.blocks_for(mm.m.info):
            if stages.applies(sid, mm.m.info, block):
                return block
        return None

    for mm in loaded:
        block = fit(mm)
        if block:
            return mm, block
    for mm in more:
        loaded.append(mm)
        block = fit(mm)
        if block:
            return mm, block
    return None, None


def _options(sid: str, mm: _Model, block: str) -> dict:
    from explorer.views import stages

    rec = stages.REGISTRY[sid]
    mm.attach(rec.uses)
    opts = {}
    if rec.needs == "edited":
        opts["edited"] = mm.edited
    if rec.needs == "other":
        opts["other"] = mm.other
    if "patches" in rec.uses:
        opts["patches"] = mm.patches(block)
    if "effects" in rec.uses:
        opts["effects"] = mm.effects(block)
    return opts


def _text(s: str) -> str:
    """Words as the page shows them: Markdown, but a token such as <s> is text, never a tag."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def figure_html(fig_id: str, fig) -> str:
    """A div and the figure's JSON beside it; docs/javascripts/figures.js draws it with plotly.js."""
    data = fig.to_json().replace("</", "<\\/")
    return (f'<div class="ae-figure" id="{fig_id}"></div>\n'
            f'<script type="application/json" data-figure="{fig_id}">{data}</script>\n')


def generate() -> dict[str, str]:
    """{"stages-en": Markdown, "stages-ko": Markdown}: a section per stage, for docs/stages*.md's marker."""
    from explorer import i18n
    from explorer.views import stages

    more = _models()
    loaded = [next(more)]
    pages = {}
    chosen = {}
    for sid in stages.STAGE_IDS:
        chosen[sid] = _pick(sid, loaded, more)
    for lang in ("en", "ko"):
        L = LABELS[lang]
        out = []
        for sec, ids in stages.SECTIONS:
            out.append(f"\n## {i18n.t(f'section_{sec}', lang)}\n")
            for sid in ids:
                mm, block = chosen[sid]
                title = stages.stage_title(sid, lang, block)
                out.append(f"\n### {html.escape(title)} {{#{sid}}}\n")
                if mm is None:
                    out.append(f"`{sid}`: {L['nofig'].format(why='no model of this site has it')}\n")
                    continue
                layer, head = (0, 1) if mm.name == "seed" else (0, 0)
                sel = stages.Selection(model=mm.name, sentence=0, layer=layer, head=head, block=block,
                                       query=2, key=1)
                opts = _options(sid, mm, block)
                words = stages.stage_words(sid, mm.run, mm.m.info, sel, lang, **opts)
                who = L["seed"] if mm.name == "seed" else L["fixture"].format(name=mm.name)
                out.append(f"`?stage={sid}` · {L['model']}: {who} · {L['block']}: "
                           f"{i18n.t(f'blocks.{block}', lang)}\n")
                out.append(f"\n{_text(words['explain'])}\n")
                if words["formula"]:
                    out.append(f"\n{L['formula']}:\n\n```latex\n{words['formula']}\n```\n")
                if words["shape"]:
                    out.append(f"\n{L['shapes']}: {_text(words['shape'])}\n")
                if words["note"]:
                    out.append(f"\n{L['note']}: {_text(words['note'])}\n")
                fig, _table = stages.stage_figure(sid, mm.run, mm.m.info, sel, lang=lang, **opts)
                out.append("\n" + figure_html(f"fig-{sid}", fig))
        pages[f"stages-{lang}"] = "".join(out)
    return pages
