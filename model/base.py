"""What every architecture shares: its description, its outputs, and run_with_cache."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import ContextManager

import torch
from torch import nn

from .hooks import Cache, capture, hooks, name_hook_points
from .tokenizer import TextTokenizer


# the attention blocks of each kind of model, in pipeline order ("{stack}.{attn}")
BLOCKS_OF_KIND = {
    "encoder-decoder": ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
    "encoder": ("encoder.self_attn",),
    "decoder": ("decoder.self_attn",),
}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    kind: str  # "encoder-decoder" | "encoder" | "decoder"
    n_layers: int  # layers of the first stack (the encoder, or the decoder of a decoder-only model)
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    positional: str  # "sinusoidal" | "learned" | "rotary"
    vocab_size: int
    max_len: int  # the most positions one sentence may take
    n_decoder_layers: int = 0  # encoder–decoder only
    positional_base: float | None = None  # sinusoidal base n, or the rotary base
    description: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def blocks(self) -> tuple[str, ...]:
        return BLOCKS_OF_KIND[self.kind]

    @property
    def stacks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.split(".")[0] for b in self.blocks))


@dataclass
class Output:
    logits: torch.Tensor | None = None  # (B, T, vocab): encoder–decoder and decoder predictions
    generated: list[str] | None = None  # encoder–decoder: what it wrote, greedily
    hidden: torch.Tensor | None = None  # (B, T, d) the last stream (the encoder's, for BERT)
    truncated: list[bool] = field(default_factory=list)


HookScope = Callable[[], ContextManager]


class HookedModel(nn.Module):
    """An architecture whose every intermediate tensor passes through a named HookPoint."""

    info: ModelInfo
    tokenizer: TextTokenizer

    def setup_hooks(self) -> None:
        """Call once, at the end of __init__: names come from attribute paths."""
        self.hook_names: list[str] = name_hook_points(self)

    def _run(self, texts: list[str], scope: HookScope) -> tuple[Output, Cache]:
        """Tokenize, pad and run; enter ``scope()`` around the forward pass to be shown."""
        raise NotImplementedError

    def token_text(self, token_id: int) -> str:
        """A vocabulary entry as people should read it (as in ``cache.tokens``)."""
        return self.tokenizer.id_to_token(token_id)

    @staticmethod
    def _check_texts(texts: str | Iterable[str]) -> list[str]:
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise ValueError("give at least one sentence")
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("sentences must be strings")
        return texts

    @torch.inference_mode()
    def run(self, texts: str | Sequence[str]) -> Output:
        """The same forward pass with no hooks at all."""
        out, _ = self._run(self._check_texts(texts), contextlib.nullcontext)
        return out

    @torch.inference_mode()
    def run_with_cache(
        self, texts: str | Sequence[str], names: Iterable[str] | None = None
    ) -> tuple[Output, Cache]:
        """Run a padded batch and return (output, cache of hook tensors)."""
        texts = self._check_texts(texts)
        wanted = self.hook_names if names is None else list(names)
        unknown = set(wanted) - set(self.hook_names)
        if unknown:
            raise KeyError(f"unknown hook names: {sorted(unknown)[:5]}")
        store: dict[str, torch.Tensor] = {}
        fns = capture(wanted, store)
        out, cache = self._run(texts, lambda: hooks(fns))
        cache.tensors = {n: store[n] for n in self.hook_names if n in store}
        cache.texts = texts
        return out, cache


def pad_batch(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad lists of ids into a (B, T) tensor."""
    t = max(len(s) for s in seqs)
    out = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out
