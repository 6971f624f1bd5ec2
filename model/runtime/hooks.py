"""Hook points: identity modules that name every intermediate tensor.

A ``HookPoint`` returns its input unchanged. Its name is the attribute path of the
module (``encoder.blocks.0.self_attn.hook_pattern``), assigned once when the model is
built, never typed by hand. Hook functions are *temporary* and live in a
``contextvars.ContextVar``, not on the module: the shared model is never mutated
during a run, so many threads (many app sessions) can run it at once.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

HookFn = Callable[[torch.Tensor, str], torch.Tensor | None]

# name -> hook function, for the current thread / context only
_ACTIVE: contextvars.ContextVar[Mapping[str, HookFn] | None] = contextvars.ContextVar(
    "attention_explorer_hooks", default=None
)


class HookPoint(nn.Module):
    """Identity; calls the hook registered for its name in the current context."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        active = _ACTIVE.get()
        if active:
            fn = active.get(self.name)
            if fn is not None:
                y = fn(x, self.name)
                if y is not None:
                    return y
        return x

    # called ~500 times per SmolLM2 forward: straight to forward, without nn.Module's dispatch for
    # module hooks (the project registers none on hook points; its hooks are the functions above)
    __call__ = forward


def name_hook_points(root: nn.Module) -> list[str]:
    """Give every HookPoint under ``root`` its attribute path; return the names in order."""
    names = []
    for path, module in root.named_modules():
        if isinstance(module, HookPoint):
            module.name = path
            names.append(path)
    return names


@contextlib.contextmanager
def hooks(fns: Mapping[str, HookFn]) -> Iterator[None]:
    """Run hook functions (name -> fn(tensor, name)) for the duration of the block only."""
    token = _ACTIVE.set(dict(fns))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active() -> Mapping[str, HookFn]:
    """The hook functions of the current context (empty outside any ``hooks`` block)."""
    return _ACTIVE.get() or {}


def compose(*mappings: Mapping[str, HookFn]) -> dict[str, HookFn]:
    """One mapping whose functions run those given, in order, each on the previous result
    (a function returning None leaves the tensor as it is): ``compose(edits, capture)``
    makes the capture see the edited tensor."""
    chains: dict[str, list[HookFn]] = {}
    for fns in mappings:
        for name, fn in fns.items():
            chains.setdefault(name, []).append(fn)

    def chain(fns: list[HookFn]) -> HookFn:
        def run(x: torch.Tensor, name: str) -> torch.Tensor:
            for fn in fns:
                y = fn(x, name)
                if y is not None:
                    x = y
            return x

        return run

    return {name: fns[0] if len(fns) == 1 else chain(fns) for name, fns in chains.items()}


@dataclass
class Cache(Mapping):
    """Tensors captured at hook points, plus the tokens they belong to.

    ``cache[name]`` is a tensor of the hook contract; ``tokens`` and ``token_ids`` are
    per sentence (unpadded) on the encoder/input side; ``decoder_tokens`` is filled for
    encoder–decoder models (the decoder's own input, starting with ``<s>``). An edited run's
    cache holds the edited tensors, and ``edits`` says which edits made them.
    """

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    tokens: list[list[str]] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list)
    offsets: list[list[tuple[int, int]]] = field(default_factory=list)
    decoder_tokens: list[list[str]] = field(default_factory=list)
    decoder_token_ids: list[list[int]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    edits: str = ""  # the run's edits in their canonical string form ("" for the intact model)

    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(
                f"no hook named {name!r}; available: {', '.join(self.tensors)}"
            ) from None

    def __iter__(self):
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)


def capture(names: list[str], store: dict[str, torch.Tensor]) -> dict[str, HookFn]:
    """Hook functions that copy each named tensor into ``store`` (detached)."""

    def save(x: torch.Tensor, name: str) -> None:
        store[name] = x.detach()

    return {n: save for n in names}
