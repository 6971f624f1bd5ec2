"""What every architecture shares: its description, its outputs, and run_with_cache."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import ContextManager

import torch
from torch import nn

from .edits import Edits, as_edits, hook_fns
from .hooks import Cache, active, capture, compose, hooks, name_hook_points
from .tokenizer import TextTokenizer


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
    def stacks(self) -> tuple[str, ...]:
        return {"encoder-decoder": ("encoder", "decoder"), "encoder": ("encoder",),
                "decoder": ("decoder",)}[self.kind]


@dataclass
class Output:
    logits: torch.Tensor | None = None  # (B, T, vocab): encoder–decoder and decoder predictions
    generated: list[str] | None = None  # encoder–decoder: what it wrote, greedily
    hidden: torch.Tensor | None = None  # (B, T, d) the last stream (the encoder's, for BERT)
    truncated: list[bool] = field(default_factory=list)


HookScope = Callable[[], ContextManager]
EditsLike = str | Edits | Iterable | None


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

    def _edit_scope(self, edit_fns: dict) -> ContextManager:
        """The edits, active for the whole run (greedy decoding included), on top of any hooks
        the caller has active; nothing at all when there are no edits."""
        return hooks(compose(edit_fns, active())) if edit_fns else contextlib.nullcontext()

    @torch.inference_mode()
    def run(self, texts: str | Sequence[str], edits: EditsLike = None) -> Output:
        """The same forward pass with no hooks at all, or with ``edits`` (see model.edits)."""
        texts = self._check_texts(texts)
        with self._edit_scope(hook_fns(self, edits)):
            out, _ = self._run(texts, contextlib.nullcontext)
        return out

    @torch.inference_mode()
    def run_with_cache(
        self, texts: str | Sequence[str], names: Iterable[str] | None = None,
        edits: EditsLike = None,
    ) -> tuple[Output, Cache]:
        """Run a padded batch and return (output, cache of hook tensors).

        ``edits`` (a string such as ``"no_causal,temperature=2"``, an ``Edits``, or a list of
        edits) change this run only; the cache then holds the edited tensors.
        """
        texts = self._check_texts(texts)
        wanted = self.hook_names if names is None else list(names)
        unknown = set(wanted) - set(self.hook_names)
        if unknown:
            raise KeyError(f"unknown hook names: {sorted(unknown)[:5]}")
        edits = as_edits(edits)
        edit_fns = hook_fns(self, edits)
        store: dict[str, torch.Tensor] = {}
        fns = compose(edit_fns, capture(wanted, store))  # the capture sees the edited tensors
        with self._edit_scope(edit_fns):
            out, cache = self._run(texts, lambda: hooks(fns))
        cache.tensors = {n: store[n] for n in self.hook_names if n in store}
        cache.texts = texts
        cache.edits = str(edits)
        return out, cache


def pad_batch(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad lists of ids into a (B, T) tensor."""
    t = max(len(s) for s in seqs)
    out = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out
