"""The Models page (models.md), generated from the model registry (model/registry.py), the fetch
sources (model/fetch.py), the families (model/arch/family.py) and the family fixtures' config.json
files read through the same reader a checkpoint goes through (tests/fixtures/families/)."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "families"


def _sources():
    from model import fetch

    out = {}
    for name, src in fetch.SOURCES.items():
        if hasattr(src, "package"):
            out[name] = f"PyPI `{src.package}=={src.version}` ({src.size / 1e6:.0f} MB)"
        else:
            parts = ", ".join(f"`{p.package}=={p.version}`" for p in src.parts)
            out[name] = f"PyPI, {len(src.parts)} chunk packages ({parts}), joined ({src.size / 1e6:.0f} MB)"
    return out


def generate() -> dict[str, str]:
    from explorer import i18n
    from model import registry
    from model.arch import family

    sources = _sources()
    out = ["""# Models and families

*Generated from `model/registry.py`, `model/fetch.py` and `model/arch/family.py` when the site is built.*

## The built-in models

`model.load(NAME)` (and the app's model menu, the lessons, `python -m explorer.export --model NAME`)
knows these names. The seed models ship with the repository; the others are fetched once with
`python -m model.fetch NAME` (pinned packages, sha256-checked; kept in `~/.cache/attention-explorer`
or `$ATTENTION_EXPLORER_CACHE`).

| name | in the app (English / 한국어) | where the weights come from |
|---|---|---|
"""]
    for name in registry.LOADERS:
        where = (f"shipped: `{registry.SEED_WEIGHTS[name].relative_to(ROOT)}`" if name in registry.SEED_WEIGHTS
                 else f"`python -m model.fetch {name}`: {sources.get(name, '')}")
        out.append(f"| `{name}` | {i18n.t(f'models.{name}', 'en')} / {i18n.t(f'models.{name}', 'ko')} | {where} |\n")
    out.append("""
A local checkpoint loads by path: `model.load("/path/to/folder")` (a Hugging Face folder:
`config.json`, safetensors weights, `tokenizer.json`), `model.load("model.gguf")` (GGUF of the
`llama`, `qwen2`, `qwen3` and `gemma3` architectures) or a seed `.safetensors` file. Weights are read
from safetensors and GGUF only, never unpickled; every size a checkpoint claims is checked against
its tensors before anything is built.

## Families

One implementation, configured by data: `model/arch/family.py` turns a checkpoint's `config.json`
into a `Family` description, and `model/arch/parts.py` holds the parts it is built from. The table
below is each family's description as the reader makes it from the tiny test checkpoint of that
family (`tests/fixtures/families/`), so it is what the code does, not what someone wrote down.

| `model_type` | what it is | kind | norm | feed-forward | positions | grouped K/V | what else |
|---|---|---|---|---|---|---|---|
""")
    for mt, desc in family.DESCRIPTIONS.items():
        cfg = FIXTURES / mt / "config.json"
        if not cfg.is_file():
            out.append(f"| `{mt}` | {desc} | | | | | | (no fixture) |\n")
            continue
        f = family.family_of(json.loads(cfg.read_text()), mt)
        extra = [x for x, on in (("QK-norm", f.qk_norm), ("Q/K/V biases", f.qkv_bias),
                                 (f"sliding window ({sum(f.window_layers)} of {f.n_layers} layers)", f.window),
                                 (f"embeddings × {f.embed_scale:.3g}", f.embed_scale != 1.0),
                                 ("attention soft-cap", f.attn_softcap), ("final soft-cap", f.final_softcap),
                                 ("token types", f.type_vocab_size), ("Conv1D weights", f.conv1d),
                                 ("tied output", f.tie_word_embeddings)) if on]
        pos = f.positions + (" (sin half, cos half)" if f.sinusoidal_split else "")
        if f.rope_local is not None:
            pos += f", local base {f.rope_local.base:g} / global {f.rope.base:g}"
        kv = f"{f.n_heads} : {f.n_kv_heads}" if f.n_kv_heads != f.n_heads else "—"
        out.append(f"| `{mt}` | {desc} | {f.kind} | {f.norm_name} | {f.ffn_name} | {pos} | {kv} | "
                   f"{', '.join(extra)} |\n")
    out.append("""
What a new family touches: a reader function in `model/arch/family.py` (config.json → `Family`),
its name table in `model/files/hf.py` (`RULES`: the checkpoint's tensor names → the parts'), and a
part in `model/arch/parts.py` only when the family computes something no part does yet. Nothing in
`explorer/` names a family to draw it: the words follow `ModelInfo`. See
[Architecture](architecture.md).

## Models a host offers: `models.toml`

A host lists further models in `$ATTENTION_EXPLORER_MODELS`, else `models.toml` in the repository's
root; they appear beside the built-in ones in the model menu, the lessons and the exporter:

```toml
[models.gpt2-lecture]                # letters, digits, . _ - (at most 40); built-in names are refused
path = "/srv/models/gpt2"            # a Hugging Face folder, a .gguf or a seed .safetensors; relative to the file
description = "GPT-2 small, lecture 3"
description_ko = "GPT-2 small, 3강"   # optional
```

A broken file or entry never stops the app: the problem is listed (on a laptop, as a sidebar
warning) and the valid entries are offered; the file is read again when it changes. On a laptop the
sidebar also opens a folder or `.gguf` path typed in; hosted, there is no path box and `model=` in
the URL accepts built-in and configured names only.
""")
    return {"models.md": "".join(out)}
