"""``model.load(name_or_path, ...)``: one entry point for every model the project knows.

``LOADERS`` is the table: a name -> the function that loads it (called with the name). A local
path goes to the loader its form asks for: a seed ``.safetensors`` file, a BERT folder or a
``.gguf`` file.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from model import configured
from model.files.seed_checkpoints import checkpoint_steps, load_checkpoint
from model.files.seed_weights import ASSETS, SEED_TOKENIZER, load_seed_file, random_seed_model
from model.pretrained import load_named, load_path
from model.runtime.base import HookedModel
from model.runtime.errors import WeightsError

__all__ = ["LOADERS", "SEED_WEIGHTS", "FETCHED", "WeightsError", "available", "load", "checkpoint_steps",
           "load_seed_file", "random_seed_model", "ASSETS", "SEED_TOKENIZER"]

SEED_WEIGHTS = {  # the shipped seed weights (read at load time, so a test may point one elsewhere)
    "seed": ASSETS / "seed-reverse.safetensors",
    "seed-sort": ASSETS / "seed-sort.safetensors",
}


def load_shipped_seed(name: str) -> HookedModel:
    return load_seed_file(SEED_WEIGHTS[name], name=name)


LOADERS: dict[str, Callable[[str], HookedModel]] = {
    "seed": load_shipped_seed,
    "seed-sort": load_shipped_seed,
    "minilm": load_named,  # fetched by `python -m model.fetch minilm`
    "smollm2": load_named,  # fetched by `python -m model.fetch smollm2`
    "gemma3": load_named,  # fetched by `python -m model.fetch gemma3`
}
FETCHED = tuple(name for name, loader in LOADERS.items() if loader is load_named)


def available() -> list[str]:
    """Names that ``load`` accepts (local paths aside): the built-in ones, then the configured ones
    (model/configured.py: $ATTENTION_EXPLORER_MODELS or models.toml)."""
    return [*LOADERS, *configured.entries(reserved=LOADERS)]


def load(name_or_path: str | Path = "seed", *, random: bool = False, max_tokens: int | None = None,
         step: int | None = None, **overrides) -> HookedModel:
    """Load a model by name ("seed", "seed-sort", "minilm", "smollm2", "gemma3") or local path.

    ``random=True`` builds an untrained seed Transformer; ``overrides`` set its shape
    (d_model, n_heads, n_layers, n_decoder_layers, d_ff, pe_base, seed, ...).
    ``max_tokens``: the most tokens one sentence may have in a run (``m.info.max_tokens``);
    default $ATTENTION_EXPLORER_MAX_TOKENS (capped at the model's positions), else 512 or the
    model's positions if fewer. Longer sentences raise ``model.InputTooLong``, or are cut with
    ``run_with_cache(..., truncate=True)``.
    ``step``: the weights after that many optimizer steps of their training, one of
    ``checkpoint_steps(name)`` (the seed's training replayed: model/files/seed_checkpoints.py); another
    step, or a model without checkpoints, raises ``WeightsError`` naming the steps there are.
    """
    key = str(name_or_path)
    if step is not None:
        if random or overrides:
            raise TypeError("step= loads a checkpoint of trained weights: not with random=True or settings")
        m = load_checkpoint(key, step)
    elif random:
        if key not in SEED_WEIGHTS:
            raise ValueError("random=True is available for the seed Transformer only")
        m = random_seed_model(**overrides)
    elif overrides:
        raise TypeError("settings other than random=True and max_tokens apply to untrained models only")
    elif key in LOADERS:
        m = LOADERS[key](key)
    elif key in (named := configured.entries(reserved=LOADERS)):
        m = configured.load_entry(named[key], load)
    else:
        path = Path(key).expanduser()
        if not path.exists():
            raise WeightsError(f"unknown model {key!r}: use one of {', '.join(available())} or a local path")
        m = load_seed_file(path, name=path.stem) if path.suffix == ".safetensors" else load_path(path)
    m.set_max_tokens(max_tokens)
    return m
