"""Attention Explorer's models: pure PyTorch, every stage of attention behind a hook point.

    import model
    m = model.load("seed")
    model.checkpoint_steps("seed"); m = model.load("seed", step=400)  # the seed's training, replayed
    out, cache = m.run_with_cache(["first sentence", "a second, longer sentence"])
    cache["encoder.blocks.0.self_attn.hook_pattern"]  # (batch, head, q, k)
    out, cache = m.run_with_cache(["some text"], edits="no_causal,temperature=2")  # a what-if
"""
from model.runtime import malloc

malloc.tune()  # before any tensor is allocated: freed blocks are reused, not faulted in again

from model.registry import available, checkpoint_steps, load  # noqa: E402
from model.runtime import edits  # noqa: E402
from model.runtime.base import HookedModel, ModelInfo, Output  # noqa: E402
from model.runtime.errors import InputTooLong, RunTooLarge, WeightsError  # noqa: E402
from model.runtime.hooks import Cache, HookPoint, hooks  # noqa: E402

__all__ = ["load", "available", "checkpoint_steps", "HookedModel", "ModelInfo", "Output", "Cache", "HookPoint",
           "hooks", "WeightsError", "InputTooLong", "RunTooLarge", "edits", "malloc"]
