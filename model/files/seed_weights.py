"""The seed Transformer from its safetensors file (the shipped weights or a user's), or untrained.

    load_seed_file("model/assets/seed-reverse.safetensors", name="seed")
    random_seed_model(d_model=64, n_heads=2)     # untrained, any shape, seeded
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from model.arch.seed import Seed, SeedConfig
from model.files.tokenizer import char_tokenizer
from model.runtime.base import HookedModel
from model.runtime.errors import WeightsError

ASSETS = Path(__file__).resolve().parents[1] / "assets"  # model/assets/: package data (pyproject.toml), in a wheel too
SEED_TOKENIZER = ASSETS / "seed-tokenizer.json"
MAX_TABLE_POSITIONS = 65_536  # the sinusoidal table a seed configuration may ask for (the shipped: 512)


def load_seed_file(path: str | Path, name: str = "seed") -> HookedModel:
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"weight file not found: {path}. Reinstall the project or retrain with "
                           f"`python -m model.train reverse`.")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightsError(f"{path.name} is not a readable safetensors file ({e}); "
                           f"it may be truncated or corrupt") from None
    if meta.get("format") != "attention-explorer-seed":
        raise WeightsError(f"{path.name} is not a seed Transformer checkpoint (for a BERT "
                           f"checkpoint, give its folder: config.json + model.safetensors + "
                           f"tokenizer.json)")
    tok = char_tokenizer(SEED_TOKENIZER if SEED_TOKENIZER.is_file() else None)
    # The configuration's size is checked against the tensors from its numbers alone, before the model
    # is built: then building it allocates about what the file holds. (Not on the meta device: its
    # first use imports torch._dynamo, 1.5-4 s on the first page of every new process.)
    try:
        cfg = SeedConfig.from_dict(json.loads(meta.get("config", "")))
        cfg.validate()
        stored = sum(v.numel() for v in tensors.values())
        too_big = cfg.n_floats() > 2 * stored + 2 * MAX_TABLE_POSITIONS * cfg.d_model
        m = None if too_big else Seed(cfg, tok, name=name)
    except (ValueError, TypeError, AttributeError) as e:
        raise WeightsError(f"{path.name} has an unusable seed configuration ({type(e).__name__}: "
                           f"{str(e)[:200]}); retrain with `python -m model.train reverse`") from None
    if m is None:
        raise WeightsError(f"{path.name} does not match the seed architecture (its configuration needs "
                           f"{cfg.n_floats():,} floats, the file holds {stored:,})")
    want = {k: tuple(v.shape) for k, v in m.file_state().items()}
    got = {k: tuple(v.shape) for k, v in tensors.items()}
    missing, unexpected = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
    wrong = [f"{k} {got[k]} != {want[k]}" for k in sorted(want.keys() & got.keys()) if got[k] != want[k]]
    if missing or unexpected or wrong:
        raise WeightsError(f"{path.name} does not match the seed architecture "
                           f"(missing {missing[:3]}, unexpected {unexpected[:3]}, wrong shapes {wrong[:3]})")
    m.load_file_state({k: v.float() for k, v in tensors.items()})
    return m.requires_grad_(False).lay_out_weights().eval()


def random_seed_model(**overrides) -> HookedModel:
    """An untrained seed Transformer with user-chosen shape (seeded, so reproducible)."""
    cfg = SeedConfig.from_dict({**overrides, "task": "untrained"})
    unknown = set(overrides) - set(SeedConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown settings for the seed model: {sorted(unknown)}")
    torch.manual_seed(cfg.seed)
    return Seed(cfg, name="seed (untrained)").requires_grad_(False).lay_out_weights().eval()
