"""The page's one navigation control (explorer/navigation.py) and what the stage records declare
(``Stage.uses``, ``Stage.url``), read by the page, the exporter and the lessons. The browser's side
(the chosen figure on screen without scrolling, every stage reached by the forward button):
tests/test_e2e.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import model
from explorer import i18n, inputs, navigation
from explorer.lessons import catalog
from explorer.views import stages

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def seed_info():
    return model.load("seed").info


def test_the_entries_are_the_pipeline_then_every_page(seed_info):
    ids = navigation.pipeline(seed_info, "encoder.self_attn")
    every = navigation.entries(ids)
    assert every[:len(ids)] == tuple(f"stage:{s}" for s in ids)
    assert every[len(ids):] == tuple(f"view:{v}" for v in inputs.VIEWS if v != "stage")
    # what the pipeline leaves to the pages: decoding, the stages comparing with a second run, on demand
    assert "decoding" not in ids and "whatif_pattern" not in ids and "pe_tutorial" not in ids
    assert "cross" not in "".join(ids) and "softmax" in ids and ids[0] == "tokens"
    # a block changes the stages (the decoder's self-attention has a causal mask: still "mask")
    assert navigation.pipeline(seed_info, "decoder.cross_attn") != () and "mask" in navigation.pipeline(
        seed_info, "decoder.self_attn")


def test_values_labels_and_steps(seed_info):
    ids = navigation.pipeline(seed_info, "encoder.self_attn")
    every = navigation.entries(ids)
    for view, sid in (("stage", "qk"), ("scores", None), ("all", None)):
        assert navigation.parse(navigation.value(view, sid)) == (view, sid)
    n = ids.index("softmax") + 1
    assert navigation.label("stage:softmax", ids, "ko") == f"{n}. {stages.stage_title('softmax', 'ko')}"
    assert navigation.label("view:whatif", ids, "en") == f"Page: {i18n.t('section_whatif', 'en')}"
    # back and forward stay among their own kind, and stop at the ends
    assert navigation.step(every, "stage:softmax", 1) == f"stage:{ids[n]}"
    assert navigation.step(every, "stage:softmax", -1) == f"stage:{ids[n - 2]}"
    assert navigation.step(every, f"stage:{ids[0]}", -1) is None
    assert navigation.step(every, f"stage:{ids[-1]}", 1) is None  # not on to "Page: Everything"
    assert navigation.step(every, "view:all", -1) is None and navigation.step(every, "view:all", 1) == "view:tokens"
    assert navigation.step(every, "stage:no-such", 1) is None


def test_what_the_stages_declare_is_what_they_read(seed_info):
    uses = {sid: r.uses for sid, r in stages.REGISTRY.items() if r.uses}
    assert uses == {"decoding": ("trace",), "logit_lens": ("lens",), "head_roles": ("induction",),
                    "patching": ("patches",), "attention_vs_effect": ("effects",)}
    assert stages.url_keys(["cell"]) == ("query", "key") and stages.url_keys(["softmax", None]) == ()
    assert stages.url_keys(["patching", "compare_pattern"]) == ("compare", "patch")
    # the exporter makes exactly what the stages it writes declare, in the order they are made
    assert stages.attachments(["softmax", "qk"], seed_info) == ()
    assert stages.attachments(["logit_lens", "softmax", "decoding"], seed_info) == ("trace", "lens")
    minilm = model.load("minilm").info  # an encoder: no decoding, no lens
    assert stages.attachments(["logit_lens", "decoding", "head_roles"], minilm) == ("induction",)
    with pytest.raises(ValueError, match="not among"):  # a record naming an unknown attachment
        stages.stage("x_test", section="scores", formula="", uses=("lenz",))(lambda c, t, o: None)
    assert "x_test" not in stages.REGISTRY


def test_the_lessons_read_the_declarations():
    parts = [p for lesson in catalog.LESSONS for p in lesson.parts]
    decoding = [p for p in parts if "decoding" in p.stages + p.reveal]
    assert decoding and all("trace" in catalog.uses(p) for p in decoding)
    patching = [p for p in parts if "patching" in p.stages + p.reveal]
    assert patching and all("patches" in catalog.uses(p) for p in patching)
    effects = [p for p in parts if "attention_vs_effect" in p.stages + p.reveal]
    assert effects and all("effects" in catalog.uses(p) for p in effects)
    assert all(catalog.uses(p) == set() for p in parts if not set(p.stages + p.reveal)
               & {"decoding", "patching", "logit_lens", "head_roles", "attention_vs_effect"})


ATTACHED = ("decoding", "logit_lens", "head_roles", "patching", "attention_vs_effect")


@pytest.mark.parametrize("path", ["explorer/cli/export.py", "explorer/lessons/page.py"])
def test_no_stage_is_a_special_case_where_attachments_are_made(path):
    """The exporter and the lessons' page make a stage's attachments from its record, not its id."""
    text = (ROOT / path).read_text(encoding="utf-8")
    found = [sid for sid in ATTACHED if re.search(rf"[\"']{sid}[\"']", text)]
    assert not found, f"{path} names {found}"


def test_every_control_group_a_record_names_is_registered():
    """A stage's ``controls`` names a group of explorer/controls/ (each module registers its own)."""
    import importlib
    import pkgutil

    import explorer.controls
    from explorer.controls.base import CONTROLS

    modules = [m.name for m in pkgutil.iter_modules(explorer.controls.__path__) if m.name != "base"]
    for name in modules:
        importlib.import_module(f"explorer.controls.{name}")
    # the page imports every one of them (so that each registers its groups)
    main = (ROOT / "explorer" / "main.py").read_text(encoding="utf-8")
    assert "from explorer.controls import " + ", ".join(sorted(modules)) in main

    named = {r.controls for r in stages.REGISTRY.values() if r.controls}
    assert named <= set(CONTROLS), named - set(CONTROLS)
