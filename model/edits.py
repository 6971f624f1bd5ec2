"""What-if edits: hook functions that change one run, never the shared model.

    out, cache = m.run_with_cache(texts, edits="no_causal,ablate=decoder.cross_attn:1:*")
    m.run(texts, edits=[Temperature(2.0), NoPadding()])

Each edit is a small frozen dataclass; ``parse`` reads the string form (also the app's URL
form) into ``Edits``: canonical (fixed order, no duplicates), hashable, sortable, and
``parse(str(e)) == e``. ``hook_fns(model, edits)`` turns them into hook functions on the
existing hook points; ``HookedModel.run`` / ``run_with_cache`` activate them for that run only,
in the run's own context (a ``contextvars`` variable), so other sessions never see them.

    edit                      hook point          what it does
    no_scale, scale=X         hook_scores         scores · X·√d_k   (X replaces 1/√d_k; no_scale: X = 1)
    temperature=T             hook_scores         scores / T        (softmax(masked / T))
    no_padding                hook_mask           pad keys allowed (the causal rule still holds)
    no_causal                 hook_mask           later keys allowed (padding still hides pad keys)
    ablate=B:L:H              hook_z              that head's z = 0 (H = * for every head of the layer)
    ablate_mean=B:L:H         hook_z              that head's z = its mean over the sentence's real positions
    no_position               hook_pos_embed      zeros (sinusoidal, learned)
                              hook_q, hook_k      rotary: the rotation undone (rotary models)

B is one of ``encoder.self_attn``, ``decoder.self_attn``, ``decoder.cross_attn``; L and H count
from 0 and are checked against the model when the edits are applied.
"""
from __future__ import annotations

import difflib
import functools
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Union

import torch

from .hooks import HookFn
from .positional import apply_rotary, rotary_tables

BLOCKS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
MIN_VALUE, MAX_VALUE = 1e-3, 1e3  # bounds of scale and temperature
MAX_CHARS = 2000  # of the string form
MAX_EDITS = 64
FORMS = ("no_scale", "scale=X", "temperature=T", "no_causal", "no_padding",
         "ablate=BLOCK:LAYER:HEAD", "ablate_mean=BLOCK:LAYER:HEAD", "no_position")


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


Edit = Union[NoPosition, Scale, Temperature, NoPadding, NoCausal, Ablate]
EDIT_TYPES = (NoPosition, Scale, Temperature, NoPadding, NoCausal, Ablate)


def _canonical(items: Iterable) -> tuple:
    items = list(items)
    for e in items:
        if not isinstance(e, EDIT_TYPES):
            raise TypeError(f"not an edit: {e!r} (use model.edits.parse for the string form)")
    unique = sorted(set(items), key=lambda e: e.key())
    for kind in (Scale, Temperature):
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
_KINDS = ("no_position", "no_scale", "scale", "temperature", "no_padding", "no_causal", "ablate",
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
        has_table = any(n.endswith(".hook_pos_embed") for n in model.hook_names)
        if not has_table and (info.positional != "rotary" or not info.positional_base):
            raise EditError(f"no_position: {info.name} has neither a positional encoding hook nor "
                            f"rotary positions with a known base")
    return edits


def _is_causal(attn: str) -> bool:
    """Which attentions carry the subsequent mask: every decoder self-attention here."""
    return attn.startswith("decoder.") and attn.endswith(".self_attn")


def _causal_rule(tq: int, tk: int, device) -> torch.Tensor:
    """(Tq, Tk) True where key j is not after query i; the queries are the last Tq positions."""
    i = torch.arange(tq, device=device)[:, None] + (tk - tq)
    return torch.arange(tk, device=device)[None, :] <= i


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
    if scale or temp:
        factor = scale[0].value * math.sqrt(info.d_head) if scale else None
        t = temp[0].value if temp else None

        def scores_fn(s: torch.Tensor, name: str) -> torch.Tensor:
            if factor is not None:
                s = s * factor  # the scores already carry 1/√d_k
            if t is not None:
                s = s / t
            return s

        fns.update({n: scores_fn for n in names if n.endswith(".hook_scores")})

    no_pad, no_causal = bool(edits.of_kind(NoPadding)), bool(edits.of_kind(NoCausal))
    mean_blocks = {f"{e.block.split('.')[0]}.blocks.{e.layer}" for e in edits.of_kind(Ablate) if e.mean}

    def mask_fn(mask: torch.Tensor, name: str) -> torch.Tensor | None:
        attn = name.removesuffix(".hook_mask")
        real = mask.any(-2)  # (B, 1, Tk): a key that no query may see is a pad key
        if attn.endswith(".self_attn"):
            real_of_block[attn.removesuffix(".self_attn")] = real[:, 0]
        if not (no_pad or no_causal):
            return None
        tq, tk = mask.shape[-2:]
        rule = _causal_rule(tq, tk, mask.device) if _is_causal(attn) \
            else torch.ones(tq, tk, dtype=torch.bool, device=mask.device)
        if not torch.equal(mask, real[..., None, :] & rule):
            raise RuntimeError(f"{name}: the mask is not padding ∧ causal, so no_padding/no_causal "
                               f"cannot tell its parts apart")
        keys = torch.ones_like(real) if no_pad else real  # (B, 1, Tk)
        order = torch.ones_like(rule) if no_causal else rule  # (Tq, Tk)
        return keys[..., None, :] & order  # (B, 1, Tq, Tk)

    if no_pad or no_causal or mean_blocks:
        for n in names:
            attn = n.removesuffix(".hook_mask")
            if n.endswith(".hook_mask") and (no_pad or no_causal
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
        fns.update({n: lambda x, n: torch.zeros_like(x) for n in names if n.endswith(".hook_pos_embed")})
        if info.positional == "rotary":
            fns.update(_unrotate_fns(names, info.d_head, float(info.positional_base)))
    return fns


def _unrotate_fns(names: list[str], d_head: int, base: float) -> dict[str, HookFn]:
    """Undo the rotary rotation of q and k (rotate back by the position's angle): the dot
    product then sees no position at all. Assumes q and k of positions 0..T-1 (the whole
    sequence at once, as every forward pass here computes it)."""
    seen_q: dict[str, int] = {}

    def unrotate(x: torch.Tensor, name: str) -> torch.Tensor:
        attn, t = name.rsplit(".", 1)[0], x.shape[-2]
        if name.endswith(".hook_q"):
            seen_q[attn] = t
        elif seen_q.get(attn) != t:
            raise EditError(f"no_position on a rotary model needs queries and keys of the same "
                            f"positions (got {seen_q.get(attn)} queries and {t} keys at {attn})")
        cos, sin = rotary_tables(torch.arange(t, device=x.device), d_head, base)  # 2 × (T, hs)
        return apply_rotary(x, cos, -sin)  # the inverse rotation

    return {n: unrotate for n in names if n.endswith((".self_attn.hook_q", ".self_attn.hook_k"))}
