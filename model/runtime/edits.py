"""What-if edits: hook functions that change one run, never the shared model.

    out, cache = m.run_with_cache(texts, edits="no_causal,ablate=decoder.cross_attn:1:*")
    m.run(texts, edits=[Temperature(2.0), NoPadding()])

Each edit is a small frozen dataclass; ``parse`` reads the string form (also the app's URL
form) into ``Edits``: canonical (fixed order, no duplicates), hashable, sortable, and
``parse(str(e)) == e``. ``hook_fns(model, edits)`` turns them into hook functions on the
existing hook points; ``HookedModel.run`` / ``run_with_cache`` activate them for that run only,
in the run's own context (a ``contextvars`` variable), so other sessions never see them.

    edit                      hook point          what it does
    no_scale, scale=X         hook_scores         scores · X / s    (X replaces the model's scale s: 1/√d_k,
                                                  or info.attn_scale (T5: 1, Gemma); no_scale: X = 1)
    temperature=T             hook_scores         scores / T        (softmax(masked / T)); a model that
                              hook_masked_scores  adds to or caps the scores after hook_scores (T5's position
                                                  bias, a softcap) divides the masked scores instead
    no_padding                hook_mask           pad keys allowed (the causal rule and the window still hold)
    no_causal                 hook_mask           later keys allowed (padding and the window still hide keys)
    window=N                  hook_mask           a query sees itself and the N − 1 keys before it, on the
                                                  sliding-window layers (a decoder without one: every
                                                  decoder self-attention layer)
    ablate=B:L:H              hook_z              that head's z = 0 (H = * for every head of the layer)
    ablate_mean=B:L:H         hook_z              that head's z = its mean over the sentence's real positions
    no_position               hook_pos_embed      zeros (sinusoidal, learned)
                              hook_q, hook_k      rotary: the rotation undone (each layer's own base,
                                                  the rotated dimensions only)
                              hook_position_bias  zeros (T5's relative bias)

The mask of a self-attention block is padding ∧ causal (decoders) ∧ the sliding window (the layers
in ``info.window_layers``): the mask edits rebuild it from those rules, changing one of them, after
checking that the model's mask is exactly their conjunction (a mask with another part raises).

B is one of ``encoder.self_attn``, ``decoder.self_attn``, ``decoder.cross_attn``; L and H count
from 0 and are checked against the model when the edits are applied.
"""
from __future__ import annotations

import difflib
import functools
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Union

import torch

from model.arch.parts import Rotary
from model.runtime.hooks import HookFn

BLOCKS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
MIN_VALUE, MAX_VALUE = 1e-3, 1e3  # bounds of scale and temperature
MAX_CHARS = 2000  # of the string form
MAX_EDITS = 64
FORMS = ("no_scale", "scale=X", "temperature=T", "no_causal", "no_padding", "window=N",
         "ablate=BLOCK:LAYER:HEAD", "ablate_mean=BLOCK:LAYER:HEAD", "no_position")
MAX_WINDOW = 1_000_000  # of window=N


class EditError(ValueError):
    """An edit that is unknown, malformed, out of bounds, or does not fit the model."""


def _num(v: float) -> str:
    """The shortest text that reads back as the same float: 2.0 -> "2", 0.5 -> "0.5"."""
    s = repr(float(v))
    return s[:-2] if s.endswith(".0") else s


def _check_value(kind: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise EditError(f"{kind} needs a number, not {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v) or not MIN_VALUE <= v <= MAX_VALUE:
        raise EditError(f"{kind}={v!r} is out of bounds: give a number from {_num(MIN_VALUE)} "
                        f"to {_num(MAX_VALUE)}")
    return v


# --- the edits ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoPosition:
    """No positional information: the added encoding is zero; rotary rotates by nothing."""

    def __str__(self) -> str:
        return "no_position"

    def key(self) -> tuple:
        return (0,)


@dataclass(frozen=True)
class Scale:
    """Scores q·kᵀ·X instead of q·kᵀ/√d_k; X = 1 is ``no_scale``."""

    value: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _check_value("scale", self.value))

    def __str__(self) -> str:
        return "no_scale" if self.value == 1.0 else f"scale={_num(self.value)}"

    def key(self) -> tuple:
        return (1, self.value)


@dataclass(frozen=True)
class Temperature:
    """Softmax of the scores divided by T (T > 1 flattens, T < 1 sharpens)."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _check_value("temperature", self.value))

    def __str__(self) -> str:
        return f"temperature={_num(self.value)}"

    def key(self) -> tuple:
        return (2, self.value)


@dataclass(frozen=True)
class NoPadding:
    """Pad keys are not hidden (the causal rule of a decoder still holds)."""

    def __str__(self) -> str:
        return "no_padding"

    def key(self) -> tuple:
        return (3,)


@dataclass(frozen=True)
class NoCausal:
    """The decoder's self-attention may look at later positions (pad keys stay hidden)."""

    def __str__(self) -> str:
        return "no_causal"

    def key(self) -> tuple:
        return (4,)


@dataclass(frozen=True)
class Window:
    """A sliding window of ``size`` keys (the query itself and the size − 1 before it) on the
    decoder's sliding-window layers, or on every decoder self-attention layer of a model without."""

    size: int

    def __post_init__(self) -> None:
        v = self.size
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_WINDOW:
            raise EditError(f"window needs a whole number of keys from 1 to {MAX_WINDOW}, not {v!r}")

    def __str__(self) -> str:
        return f"window={self.size}"

    def key(self) -> tuple:
        return (4, 1, self.size)


@dataclass(frozen=True)
class Ablate:
    """One head's output z (pattern · V) set to zero, or with ``mean``, to its mean over the
    sentence's real positions; ``head=None`` means every head of the layer."""

    block: str
    layer: int
    head: int | None = None
    mean: bool = False

    def __post_init__(self) -> None:
        if self.block not in BLOCKS:
            raise EditError(f"{self.kind}: unknown block {str(self.block)[:40]!r}; the blocks are "
                            f"{', '.join(BLOCKS)}")
        for what, v in (("layer", self.layer), ("head", self.head)):
            if v is None and what == "head":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise EditError(f"{self.kind}: the {what} must be a whole number from 0, not {v!r}")
        object.__setattr__(self, "mean", bool(self.mean))

    @property
    def kind(self) -> str:
        return "ablate_mean" if self.mean else "ablate"

    def __str__(self) -> str:
        head = "*" if self.head is None else str(self.head)
        return f"{self.kind}={self.block}:{self.layer}:{head}"

    def key(self) -> tuple:
        return (6 if self.mean else 5, BLOCKS.index(self.block), self.layer,
                -1 if self.head is None else self.head)

    def heads(self, n_heads: int) -> list[int]:
        return list(range(n_heads)) if self.head is None else [self.head]


Edit = Union[NoPosition, Scale, Temperature, NoPadding, NoCausal, Window, Ablate]
EDIT_TYPES = (NoPosition, Scale, Temperature, NoPadding, NoCausal, Window, Ablate)


def _canonical(items: Iterable) -> tuple:
    items = list(items)
    for e in items:
        if not isinstance(e, EDIT_TYPES):
            raise TypeError(f"not an edit: {e!r} (use model.edits.parse for the string form)")
    unique = sorted(set(items), key=lambda e: e.key())
    for kind in (Scale, Temperature, Window):
        same = [e for e in unique if isinstance(e, kind)]
        if len(same) > 1:
            raise EditError(f"{', '.join(map(str, same))}: give one {kind.__name__.lower()} only")
    ablations = [e for e in unique if isinstance(e, Ablate)]
    whole = {(e.block, e.layer, e.mean) for e in ablations if e.head is None}
    # a head under a `*` of the same kind adds nothing: drop it so that equal meanings are equal
    unique = [e for e in unique if not (isinstance(e, Ablate) and e.head is not None
                                        and (e.block, e.layer, e.mean) in whole)]
    if len(unique) > MAX_EDITS:
        raise EditError(f"{len(unique)} edits are too many; at most {MAX_EDITS}")
    plain = [e for e in ablations if not e.mean]
    for e in (e for e in ablations if e.mean):
        for p in plain:
            same_layer = (p.block, p.layer) == (e.block, e.layer)
            if same_layer and (p.head is None or e.head is None or p.head == e.head):
                raise EditError(f"{p} and {e} edit the same head: give one of them")
    return tuple(unique)


@functools.total_ordering
@dataclass(frozen=True)
class Edits:
    """A canonical set of edits: the order and duplicates of the input do not matter.

    Hashable and sortable (usable as a cache key); ``str()`` gives the string form and
    ``parse(str(edits)) == edits``. Empty edits are falsy.
    """

    items: tuple = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.items, str):
            raise TypeError("Edits takes edit objects; for the string form use model.edits.parse")
        object.__setattr__(self, "items", _canonical(self.items))

    def __str__(self) -> str:
        return ",".join(str(e) for e in self.items)

    def __repr__(self) -> str:
        return f"Edits({str(self)!r})"

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __lt__(self, other: "Edits") -> bool:
        if not isinstance(other, Edits):
            return NotImplemented
        return [e.key() for e in self.items] < [e.key() for e in other.items]

    def of_kind(self, kind: type) -> list:
        return [e for e in self.items if isinstance(e, kind)]


# --- the string form -------------------------------------------------------------------------------
_NUMBER = re.compile(r"\+?(\d{1,12}(\.\d{0,12})?|\.\d{1,12})([eE][+-]?\d{1,3})?")
_INDEX = re.compile(r"\d{1,6}")
_FLAGS = {"no_position": NoPosition, "no_scale": Scale, "no_padding": NoPadding, "no_causal": NoCausal}
_KINDS = ("no_position", "no_scale", "scale", "temperature", "no_padding", "no_causal", "window", "ablate",
          "ablate_mean")


def _short(s: str) -> str:
    return repr(s if len(s) <= 60 else s[:57] + "...")


def _parse_one(part: str) -> Edit:
    name, eq, arg = part.partition("=")
    name, arg = name.strip().lower(), arg.strip()
    if name not in _KINDS:
        close = difflib.get_close_matches(name, _KINDS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise EditError(f"unknown edit {_short(part)}{hint}; the edits are: {', '.join(FORMS)}")
    if name in _FLAGS:
        if eq:
            raise EditError(f"{name} takes no value (got {_short(part)})")
        return _FLAGS[name]()
    if not arg:
        form = next(f for f in FORMS if f.startswith(name + "="))
        raise EditError(f"{name} needs a value: {form}")
    if name in ("scale", "temperature"):
        if not _NUMBER.fullmatch(arg):
            raise EditError(f"{name}={_short(arg)[1:-1]}: not a number; give a decimal number from "
                            f"{_num(MIN_VALUE)} to {_num(MAX_VALUE)}, e.g. {name}=2")
        return (Scale if name == "scale" else Temperature)(float(arg))
    if name == "window":
        if not _INDEX.fullmatch(arg) or int(arg) < 1:
            raise EditError(f"window={_short(arg)[1:-1]}: give a whole number of keys from 1, e.g. window=3")
        return Window(int(arg))
    pieces = [p.strip().lower() for p in arg.split(":")]
    if len(pieces) != 3:
        raise EditError(f"{name}={_short(arg)[1:-1]}: give BLOCK:LAYER:HEAD, e.g. "
                        f"{name}=decoder.cross_attn:1:2 (HEAD * for every head)")
    block, layer, head = pieces
    if block not in BLOCKS:
        close = difflib.get_close_matches(block, BLOCKS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise EditError(f"{name}: unknown block {_short(block)}{hint}; the blocks are {', '.join(BLOCKS)}")
    if not _INDEX.fullmatch(layer):
        raise EditError(f"{name}: the layer must be a whole number from 0, not {_short(layer)}")
    if head != "*" and not _INDEX.fullmatch(head):
        raise EditError(f"{name}: the head must be a whole number from 0 or *, not {_short(head)}")
    return Ablate(block, int(layer), None if head == "*" else int(head), mean=name == "ablate_mean")


def parse(text: str) -> Edits:
    """The string form -> canonical ``Edits``: comma-separated, e.g.
    ``"no_causal, temperature=2, ablate=decoder.cross_attn:1:*"``; "" means no edits."""
    if not isinstance(text, str):
        raise TypeError(f"parse takes a string, not {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise EditError(f"the edits are {len(text)} characters long; at most {MAX_CHARS}")
    parts = [p.strip() for p in text.split(",")]
    return Edits(tuple(_parse_one(p) for p in parts if p))


def format(edits) -> str:  # noqa: A001 - the module's pair to parse, as in the issue
    """Edits (any form ``as_edits`` takes) -> the canonical string form."""
    return str(as_edits(edits))


def as_edits(edits) -> Edits:
    """None, a string, an ``Edits``, one edit, or a list of edits (or strings) -> ``Edits``."""
    if edits is None:
        return Edits()
    if isinstance(edits, Edits):
        return edits
    if isinstance(edits, str):
        return parse(edits)
    if isinstance(edits, EDIT_TYPES):
        return Edits((edits,))
    if isinstance(edits, Iterable):
        items: list = []
        for e in edits:
            items.extend(parse(e).items if isinstance(e, str) else [e])
        return Edits(tuple(items))
    raise TypeError(f"edits must be a string, Edits, or a list of edits, not {type(edits).__name__}")


# --- against a model ----------------------------------------------------------------------------
def _layers(hook_names: list[str], block: str) -> list[int]:
    stack, attn = block.split(".")
    pat = re.compile(rf"{stack}\.blocks\.(\d+)\.{attn}\.hook_z")
    return sorted(int(m.group(1)) for n in hook_names if (m := pat.fullmatch(n)))


def check(model, edits) -> Edits:
    """Raise ``EditError`` when an edit does not fit ``model``; return the edits."""
    edits = as_edits(edits)
    info = model.info
    for e in edits.of_kind(Ablate):
        layers = _layers(model.hook_names, e.block)
        if not layers:
            have = [b for b in BLOCKS if _layers(model.hook_names, b)]
            raise EditError(f"{e}: {info.name} ({info.kind}) has no {e.block}; its blocks are "
                            f"{', '.join(have)}")
        if e.layer not in layers:
            raise EditError(f"{e}: layer {e.layer} is out of range; {info.name}'s {e.block} has "
                            f"layers 0–{layers[-1]}")
        if e.head is not None and e.head >= info.n_heads:
            raise EditError(f"{e}: head {e.head} is out of range; {info.name} has heads "
                            f"0–{info.n_heads - 1} (or * for all)")
    if edits.of_kind(NoPosition):
        has_table = any(n.endswith((".hook_pos_embed", ".hook_position_bias")) for n in model.hook_names)
        if not has_table and (info.positional != "rotary" or not info.positional_base):
            raise EditError(f"no_position: {info.name} has neither a positional encoding hook nor "
                            f"rotary positions with a known base")
    for e in edits.of_kind(Window):
        if not _layers(model.hook_names, "decoder.self_attn"):
            raise EditError(f"{e}: {info.name} ({info.kind}) has no decoder self-attention, whose keys a "
                            f"window could limit; a window is for decoders")
    return edits


def _is_causal(attn: str) -> bool:
    """Which attentions carry the subsequent mask: every decoder self-attention here."""
    return attn.startswith("decoder.") and attn.endswith(".self_attn")


def _causal_rule(tq: int, tk: int, device) -> torch.Tensor:
    """(Tq, Tk) True where key j is not after query i; the queries are the last Tq positions."""
    i = torch.arange(tq, device=device)[:, None] + (tk - tq)
    return torch.arange(tk, device=device)[None, :] <= i


def window_rule(tq: int, tk: int, size: int, device=None) -> torch.Tensor:
    """(Tq, Tk) True where key j is one of the ``size`` last keys up to query i (j > i − size;
    later keys are the causal rule's business); the queries are the last Tq positions."""
    i = torch.arange(tq, device=device)[:, None] + (tk - tq)
    return torch.arange(tk, device=device)[None, :] > i - size


def _layer_of(name: str) -> int:
    return int(name.split(".")[2])  # "decoder.blocks.3.self_attn.hook_mask" -> 3


def model_window(info, attn: str) -> int:
    """The sliding window (keys) of one attention block ("decoder.blocks.3.self_attn"), 0: none."""
    windowed = info.kind == "decoder" and info.sliding_window and attn.endswith(".self_attn")
    return int(info.sliding_window) if windowed and _layer_of(attn) in info.window_layers else 0


def window_layers(info, n_layers: int) -> list[int]:
    """The decoder self-attention layers a ``window=N`` edit changes: the model's sliding-window
    layers, or every layer of a decoder that has no window."""
    if info.kind == "decoder" and info.sliding_window and info.window_layers:
        return sorted(info.window_layers)
    return list(range(n_layers))


def hook_fns(model, edits) -> dict[str, HookFn]:
    """Hook functions (name -> fn(tensor, name)) that apply ``edits`` to ``model``'s run.

    Build a fresh mapping for every run: ``ablate_mean`` keeps the run's padding in it.
    """
    edits = check(model, edits)
    if not edits:
        return {}
    info, names = model.info, model.hook_names
    fns: dict[str, HookFn] = {}
    real_of_block: dict[str, torch.Tensor] = {}  # "decoder.blocks.0" -> (B, T) real positions

    scale, temp = edits.of_kind(Scale), edits.of_kind(Temperature)
    if scale:
        factor = scale[0].value / (info.attn_scale or 1.0 / math.sqrt(info.d_head))

        def scale_fn(s: torch.Tensor, name: str) -> torch.Tensor:
            return s * factor  # the scores already carry the model's own scale

        fns.update({n: scale_fn for n in names if n.endswith(".hook_scores")})
    if temp:
        t = temp[0].value
        # after hook_scores a model may still add (T5's position bias) or cap (softcap): then the
        # masked scores are divided, so that the softmax reads masked / T exactly
        later = any(n.endswith((".hook_position_bias", ".hook_capped_scores")) for n in names)
        at = ".hook_masked_scores" if later else ".hook_scores"
        for n in names:
            if n.endswith(at):
                fns[n] = (lambda s, name, f=fns.get(n): (s if f is None else f(s, name)) / t)

    no_pad, no_causal = bool(edits.of_kind(NoPadding)), bool(edits.of_kind(NoCausal))
    window = edits.of_kind(Window)
    new_window = {}  # "decoder.blocks.3.self_attn" -> the window the edit gives it
    if window:
        n_dec = len(_layers(names, "decoder.self_attn"))
        new_window = {f"decoder.blocks.{i}.self_attn": window[0].size for i in window_layers(info, n_dec)}
    mean_blocks = {f"{e.block.split('.')[0]}.blocks.{e.layer}" for e in edits.of_kind(Ablate) if e.mean}

    def mask_fn(mask: torch.Tensor, name: str) -> torch.Tensor | None:
        attn = name.removesuffix(".hook_mask")
        real = mask.any(-2)  # (B, 1, Tk): a key that no query may see is a pad key
        if attn.endswith(".self_attn"):
            real_of_block[attn.removesuffix(".self_attn")] = real[:, 0]
        if not (no_pad or no_causal or attn in new_window):
            return None
        tq, tk = mask.shape[-2:]
        everything = torch.ones(tq, tk, dtype=torch.bool, device=mask.device)
        rule = _causal_rule(tq, tk, mask.device) if _is_causal(attn) else everything
        had = model_window(info, attn)
        near = window_rule(tq, tk, had, mask.device) if had else everything  # (Tq, Tk)
        if not torch.equal(mask, real[..., None, :] & rule & near):
            parts = "padding ∧ causal" + (f" ∧ a window of {had}" if had else "")
            raise RuntimeError(f"{name}: the mask is not {parts}, so the mask edits cannot tell its "
                               f"parts apart")
        keys = torch.ones_like(real) if no_pad else real  # (B, 1, Tk)
        order = everything if no_causal else rule  # (Tq, Tk)
        if attn in new_window:
            near = window_rule(tq, tk, new_window[attn], mask.device)
        return keys[..., None, :] & order & near  # (B, 1, Tq, Tk)

    if no_pad or no_causal or mean_blocks or new_window:
        for n in names:
            attn = n.removesuffix(".hook_mask")
            if n.endswith(".hook_mask") and (no_pad or no_causal or attn in new_window
                                              or attn.removesuffix(".self_attn") in mean_blocks):
                fns[n] = mask_fn

    zero: dict[str, list[int]] = defaultdict(list)
    mean: dict[str, list[int]] = defaultdict(list)
    for e in edits.of_kind(Ablate):
        stack, attn = e.block.split(".")
        (mean if e.mean else zero)[f"{stack}.blocks.{e.layer}.{attn}.hook_z"] += e.heads(info.n_heads)

    def z_fn(z: torch.Tensor, name: str) -> torch.Tensor:
        z = z.clone()  # (B, nh, Tq, hs)
        if zero.get(name):
            z[:, zero[name]] = 0.0
        if mean.get(name):
            heads, tq = mean[name], z.shape[2]
            real = real_of_block.get(".".join(name.split(".")[:3]))  # "decoder.blocks.1"
            if real is None or real.shape[0] != z.shape[0] or real.shape[1] < tq:
                raise RuntimeError(f"{name}: the padding of this block was not seen before its z")
            w = real[:, -tq:].to(z.dtype)[:, None, :, None]  # (B, 1, Tq, 1) the queries are the last Tq
            m = (z[:, heads] * w).sum(2, keepdim=True) / w.sum(2, keepdim=True).clamp_min(1)
            z[:, heads] = m.expand(-1, -1, tq, -1)  # (B, len(heads), Tq, hs)
        return z

    fns.update({n: z_fn for n in {**zero, **mean}})

    if edits.of_kind(NoPosition):
        fns.update({n: lambda x, n: torch.zeros_like(x) for n in names
                    if n.endswith((".hook_pos_embed", ".hook_position_bias"))})
        if info.positional == "rotary":  # every rotary model is built from a family (model/arch/parts.py)
            fns.update(_unrotate_family_fns(names, model.family))
    return fns


def _unrotate_hooks(names: list[str], rotate_back: Callable[[torch.Tensor, str, int], torch.Tensor]
                    ) -> dict[str, HookFn]:
    """Undo the rotary rotation of every self-attention's q and k (``rotate_back(x, hook name, T)``
    rotates back by each position's angle): the dot product then sees no position at all. Assumes q
    and k of positions 0..T-1 (the whole sequence at once, as every forward pass here computes it),
    and checks it."""
    seen_q: dict[str, int] = {}

    def unrotate(x: torch.Tensor, name: str) -> torch.Tensor:
        attn, t = name.rsplit(".", 1)[0], x.shape[-2]
        if name.endswith(".hook_q"):
            seen_q[attn] = t
        elif seen_q.get(attn) != t:
            raise EditError(f"no_position on a rotary model needs queries and keys of the same "
                            f"positions (got {seen_q.get(attn)} queries and {t} keys at {attn})")
        return rotate_back(x, name, t)

    return {n: unrotate for n in names if n.endswith((".self_attn.hook_q", ".self_attn.hook_k"))}


def _unrotate_family_fns(names: list[str], family) -> dict[str, HookFn]:
    """no_position on a model built from a family (model/arch/parts.py): each layer with that layer's own
    rotary (Gemma's local base on its sliding-window layers, the rope's scaling, partial rotary: only
    the rotated dimensions, half-split or interleaved)."""
    dims = family.rope_dims or family.d_head

    def rotate_back(x: torch.Tensor, name: str, t: int) -> torch.Tensor:
        local = family.rope_local is not None and family.windowed(_layer_of(name))
        rot = Rotary(torch.arange(t, device=x.device), family.rope_local if local else family.rope, dims,
                     family.rope_interleaved)
        rot.sin = -rot.sin  # the inverse rotation (made for this call only)
        return rot.apply(x)

    return _unrotate_hooks(names, rotate_back)
