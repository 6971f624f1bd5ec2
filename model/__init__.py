"""Attention Explorer's models: pure PyTorch, every stage of attention behind a hook point.

    import model
    m = model.load("seed")
    out, cache = m.run_with_cache(["first sentence", "a second, longer sentence"])
    cache["encoder.blocks.0.self_attn.hook_pattern"]  # (batch, head, q, k)
    out, cache = m.run_with_cache(["some text"], edits="no_causal,temperature=2")  # a what-if
"""
from . import edits
from .base import HookedModel, ModelInfo, Output
from .errors import InputTooLong, RunTooLarge, WeightsError
from .hooks import Cache, HookPoint, hooks
from .registry import available, load

__all__ = ["load", "available", "HookedModel", "ModelInfo", "Output", "Cache", "HookPoint",
           "hooks", "WeightsError", "InputTooLong", "RunTooLarge", "edits"]
