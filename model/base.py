"""What every architecture shares: its description, its outputs, and run_with_cache."""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import ContextManager

import torch
from torch import nn

from . import limits
from .hooks import Cache, capture, hooks, name_hook_points
from .limits import Prepared
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
    max_tokens: int = 0  # the most tokens one sentence may have in a run (model/limits.py);
    #                      0 here: 512, or max_len if smaller

    def __post_init__(self) -> None:
        if not self.max_tokens:
            object.__setattr__(self, "max_tokens", min(limits.DEFAULT_MAX_TOKENS, self.max_len))

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

    _check_texts = staticmethod(limits.check_texts)

    # --- what may enter a run (model/limits.py) ---------------------------------------------
    def set_max_tokens(self, n: int | None = None) -> None:
        """``info.max_tokens`` = n, else $ATTENTION_EXPLORER_MAX_TOKENS, else unchanged."""
        n = limits.token_limit(self.info, n)
        if n is not None:
            self.info = dataclasses.replace(self.info, max_tokens=n)

    def prepare_texts(self, texts: str | Iterable[str], *, truncate: bool = False) -> Prepared:
        """Sentences checked against the token limit, before any run: over ``info.max_tokens``
        raises ``InputTooLong``, or with ``truncate=True`` is cut at a token boundary (marked in
        ``.truncated``); lone surrogates become U+FFFD. Every entry point calls this first."""
        return limits.prepare(texts, self.tokenizer, self.info, truncate=truncate)

    def check_memory(self, n_sentences: int, n_tokens: int, names: Iterable[str] = ()) -> int:
        """Raise ``RunTooLarge`` when such a run would need more memory than it may take."""
        return limits.check_memory(self.info, n_sentences, n_tokens, names)

    @torch.inference_mode()
    def run(self, texts: str | Sequence[str], *, truncate: bool = False) -> Output:
        """The same forward pass with no hooks at all."""
        prep = self.prepare_texts(texts, truncate=truncate)
        self.check_memory(len(prep.texts), prep.longest)
        out, _ = self._run(prep.texts, contextlib.nullcontext)
        out.truncated = [a or b for a, b in zip(prep.truncated, out.truncated or [False] * len(prep.truncated))]
        return out

    @torch.inference_mode()
    def run_with_cache(
        self, texts: str | Sequence[str], names: Iterable[str] | None = None, *, truncate: bool = False
    ) -> tuple[Output, Cache]:
        """Run a padded batch and return (output, cache of hook tensors).

        At most ``info.max_tokens`` tokens per sentence (else ``InputTooLong``, or cut with
        ``truncate=True``); a run too large for memory raises ``RunTooLarge`` before it starts.
        """
        wanted = self.hook_names if names is None else list(names)
        unknown = set(wanted) - set(self.hook_names)
        if unknown:
            raise KeyError(f"unknown hook names: {sorted(unknown)[:5]}")
        prep = self.prepare_texts(texts, truncate=truncate)
        self.check_memory(len(prep.texts), prep.longest, wanted)
        store: dict[str, torch.Tensor] = {}
        fns = capture(wanted, store)
        out, cache = self._run(prep.texts, lambda: hooks(fns))
        out.truncated = [a or b for a, b in zip(prep.truncated, out.truncated or [False] * len(prep.truncated))]
        cache.tensors = {n: store[n] for n in self.hook_names if n in store}
        cache.texts = prep.texts
        return out, cache


def pad_batch(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad lists of ids into a (B, T) tensor."""
    t = max(len(s) for s in seqs)
    out = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out
