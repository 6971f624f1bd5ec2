"""Pretrained checkpoints: the fetched ones by name, any local one by path.

    load_named("minilm")     # <cache>/minilm (python -m model.fetch minilm)
    load_named("smollm2")    # <cache>/smollm2 (python -m model.fetch smollm2)
    load_named("gemma3")     # <cache>/gemma3 (python -m model.fetch gemma3): model/files/gguf_family.py
    load_path("some/checkpoint-folder")   # config.json's model_type: one of model/arch/family.py's FAMILIES
    load_path("model.gguf")               # llama, qwen2, qwen3, gemma3

Only safetensors and GGUF files are read; nothing is ever unpickled.
"""
from __future__ import annotations

from pathlib import Path

from model.runtime.base import HookedModel
from model.runtime.errors import WeightsError

DESCRIPTIONS = {
    "minilm": "all-MiniLM-L6-v2: a 6-layer BERT encoder (sentence embeddings)",
    "smollm2": "SmolLM2-135M-Instruct (Q4_1): a 30-layer Llama decoder with grouped-query attention",
    "gemma3": "Gemma 3 270M (Q4_K_M): an 18-layer decoder, 4 query heads sharing 1 K/V head, QK-norm, "
              "5 sliding-window layers (512 tokens) for every global one",
}
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_named(name: str) -> HookedModel:
    # not at the top: `python -m model.fetch` imports this package first, and runpy warns when
    # model.fetch is already imported by then
    from model import fetch

    if name not in fetch.SOURCES:
        raise WeightsError(f"unknown pretrained model {name!r}; choose from {', '.join(fetch.SOURCES)}")
    folder = fetch.model_dir(name)
    if not fetch.is_fetched(name):
        raise WeightsError(f"the {name} weights are not fetched yet (looked in {folder}); "
                           f"run `{fetch.fetch_command(name)}` (set {fetch.ENV_VAR} to use "
                           f"another cache folder)")
    if name == "minilm":
        from model.files.hf import load_folder

        return load_folder(folder, name=name, description=DESCRIPTIONS[name])
    from model.files.gguf_family import load_gguf_family

    file = fetch.GEMMA3_FILE if name == "gemma3" else GGUF_FILE
    return load_gguf_family(folder / file, name=name, description=DESCRIPTIONS[name])


def load_path(path: str | Path) -> HookedModel:
    """A checkpoint folder -> the family its config.json names (model/files/hf.py: GPT-2, Llama, Mistral,
    Qwen2, Qwen3, Gemma 3, BERT, RoBERTa, DistilBERT, Marian, T5); a .gguf file -> model/files/gguf_family.py
    (llama, qwen2, qwen3, gemma3); anything else -> WeightsError."""
    from model.files.hf import load_folder

    path = Path(path).expanduser()
    if path.is_dir():
        return load_folder(path)  # an unknown model_type is refused with the supported ones listed
    if path.is_file() and path.suffix.lower() == ".gguf":
        from model.files.gguf_family import load_gguf_family

        return load_gguf_family(path)  # an architecture it does not read is refused with the ones it does
    if not path.exists():
        raise WeightsError(f"no such file or folder: {path}")
    raise WeightsError(f"{path.name}: expected a checkpoint folder (config.json + "
                       f"model.safetensors + tokenizer.json), a .gguf file (llama, qwen2, qwen3, gemma3) or a "
                       f"seed .safetensors file; pickled checkpoints (.bin, .pt) are never loaded")
