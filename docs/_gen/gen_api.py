"""The Python API page (api.md): mkdocstrings directives for the public objects, documented from their
docstrings when the site is built. ``explorer.show`` (the notebook API) is included once
explorer/notebook.py defines it, so the page builds strictly before and after it exists."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _defines(path: Path, name: str) -> bool:
    """Whether the module file defines ``name`` at its top level (read, not imported)."""
    if not path.is_file():
        return False
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name for n in tree.body)


def _block(target: str, members=None) -> str:
    opts = "" if members is None else "\n    options:\n      members:\n" + "".join(f"        - {m}\n" for m in members)
    return f"::: {target}{opts}\n"


def generate() -> dict[str, str]:
    out = ["""# Python API

Everything the page shows is a function of a run, and every run is reachable from Python. This page
is made from the docstrings when the site is built (mkdocstrings), so it says what the code says.

```python
import model
m = model.load("seed")            # or "minilm", "smollm2", "gemma3", a local folder or .gguf file
out, cache = m.run_with_cache(["hello world", "안녕하세요"])   # a padded batch
out.generated                     # the seed model's output: ['dlrow olleh', '요세하녕안']
cache["decoder.blocks.1.cross_attn.hook_pattern"]             # (batch, head, query, key)
```

"""]
    if _defines(ROOT / "explorer" / "notebook.py", "show"):
        out.append("""## In a notebook: `explorer.show`

The same figure the page draws, and its words, for a model, a text and a stage.

""")
        out.append(_block("explorer.notebook.show"))
    notebooks = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
    if notebooks:
        out.append("\nExample notebooks, run end to end in the test suite: "
                   + ", ".join(f"[`{p.name}`](notebooks/{p.name})" for p in notebooks) + ".\n\n")
    out.append("""
## Loading a model

""")
    out.append(_block("model.registry.load"))
    out.append(_block("model.registry.available"))
    out.append(_block("model.registry.checkpoint_steps"))
    out.append("""
## Runs and hook points

Hook names are `{stack}.blocks.{i}.{attn}.hook_X` with stack `encoder` or `decoder` and attn
`self_attn` or `cross_attn` (an encoder-only model has only `encoder.*`, a decoder-only one only
`decoder.*`); the stream has `{stack}.hook_embed`, `{stack}.hook_pos_embed` and
`{stack}.blocks.{i}.hook_resid_post`. Masked scores are −inf, so masked weights are exactly 0.

""")
    out.append(_block("model.runtime.base.HookedModel", ["run", "run_with_cache", "generate_with_cache"]))
    out.append(_block("model.runtime.base.ModelInfo"))
    out.append(_block("model.runtime.hooks.Cache"))
    out.append(_block("model.runtime.hooks.hooks"))
    out.append("""
## What if: edits

`no_scale | scale=X | temperature=T | no_causal | no_padding | no_position | window=N |
ablate[_mean]=BLOCK:LAYER:HEAD|*`, active for one run only; the shared model is never changed.

""")
    out.append(_block("model.runtime.edits.parse"))
    out.append("""
## Analyses

""")
    out.append(_block("model.analysis.patching.patch_positions"))
    out.append(_block("model.analysis.ablation.head_effects"))
    out.append(_block("model.analysis.score_split"))
    out.append(_block("model.analysis.long.long_run"))
    out.append("""
## Figures: the stage registry

The page's figures are pure functions of a run (no Streamlit): every stage of the
[stage registry](stages.md) by its id.

""")
    out.append(_block("explorer.views.stages.run_data"))
    out.append(_block("explorer.views.stages.Selection"))
    out.append(_block("explorer.views.stages.stage_figure"))
    out.append(_block("explorer.views.stages.stage_words"))
    return {"api.md": "".join(out)}
