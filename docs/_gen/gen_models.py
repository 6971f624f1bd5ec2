"""The Models page's tables (docs/models.md: <!-- gen:models-builtin -->, <!-- gen:models-families -->), generated from the model registry (model/registry.py), the fetch
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
    """{"models-builtin": the built-in models' table, "models-families": the families' table}."""
    from explorer import i18n
    from model import registry
    from model.arch import family

    sources = _sources()
    builtin = ["| name | in the app (English / 한국어) | where the weights come from |\n|---|---|---|\n"]
    for name in registry.LOADERS:
        where = (f"shipped: `{registry.SEED_WEIGHTS[name].relative_to(ROOT)}`" if name in registry.SEED_WEIGHTS
                 else f"`python -m model.fetch {name}`: {sources.get(name, '')}")
        builtin.append(f"| `{name}` | {i18n.t(f'models.{name}', 'en')} / {i18n.t(f'models.{name}', 'ko')} | {where} |\n")
    out = ["| `model_type` | what it is | kind | norm | feed-forward | positions | grouped K/V | what else |\n"
           "|---|---|---|---|---|---|---|---|\n"]
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
    return {"models-builtin": "".join(builtin), "models-families": "".join(out)}
