"""The sizes a weight file claims, checked before anything is built or allocated.

A configuration says how many layers, heads and positions a model has; a hostile or broken file
can claim a million layers with two layers of tensors, or zero heads. Every loader checks each
size against sane bounds and against the shapes of the tensors the file actually holds (read
from the file's header, no data), and raises a ``WeightsError`` that names the field, its value
and what it should be.

    need_int(source, "num_hidden_layers", raw, 1, MAX_LAYERS)
    check_layers(source, "num_hidden_layers", 6, shapes, prefix="encoder.blocks.")
    check_shapes(source, shapes, expected)     # {tensor: (shape, "which fields made it")}
"""
from __future__ import annotations

import numbers
import re
from collections.abc import Mapping

from model.runtime.errors import WeightsError

# Bounds far above any model this app can show (the largest open models have ~130 layers,
# 128 heads, d_model 16k-ish, 256k-token vocabularies, 1M-token contexts).
MAX_LAYERS = 512
MAX_HEADS = 1024
MAX_WIDTH = 1 << 16  # d_model, d_head
MAX_FF = 1 << 20  # feed-forward width
MAX_VOCAB = 1 << 22
MAX_POSITIONS = 1 << 22

Shape = tuple[int, ...]


def need_int(source: str, field: str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi], else a WeightsError naming the field."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if value is None:
            raise WeightsError(f"{source}: {field} is missing; it should be a whole number "
                               f"from {lo} to {hi}")
        raise WeightsError(f"{source}: {field} is {_shown(value)}; it should be a whole number "
                           f"from {lo} to {hi}")
    value = int(value)
    if not lo <= value <= hi:
        raise WeightsError(f"{source}: {field} is {value}; it should be from {lo} to {hi}")
    return value


def need_divides(source: str, small_field: str, small: int, big_field: str, big: int) -> None:
    if big % small:
        raise WeightsError(f"{source}: {small_field} ({small}) must divide {big_field} ({big}); "
                           f"{big} % {small} = {big % small}")


def layer_indices(shapes: Mapping[str, Shape], prefix: str) -> set[int]:
    """The layer numbers i of tensors named ``{prefix}{i}.…``."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)\.")
    return {int(m.group(1)) for name in shapes if (m := pattern.match(name))}


def check_layers(source: str, field: str, n_layers: int, shapes: Mapping[str, Shape], prefix: str) -> None:
    """The file claims ``n_layers``; its tensors must hold exactly layers 0..n_layers-1."""
    held = layer_indices(shapes, prefix)
    if held == set(range(n_layers)):
        return
    if not held:
        raise WeightsError(f"{source}: {field} is {n_layers}, but the file holds no layer's tensors")
    if held == set(range(len(held))):
        raise WeightsError(f"{source}: {field} is {n_layers}, but the file holds the tensors of "
                           f"{len(held)} layer(s); it should be {len(held)}")
    raise WeightsError(f"{source}: {field} is {n_layers}, but the file holds layers {_ranges(held)}; "
                       f"they should be numbered 0 to {field} - 1")


def check_shapes(source: str, shapes: Mapping[str, Shape], expected: Mapping[str, tuple[Shape, str]]) -> None:
    """Every expected tensor present with the shape its configuration fields give.

    ``expected``: tensor name -> (shape, the fields that make it, e.g. "vocab_size=24, hidden_size=16").
    """
    for name, (shape, fields) in expected.items():
        got = shapes.get(name)
        if got is None:
            raise WeightsError(f"{source}: the tensor {name} is missing (it should have shape "
                               f"{tuple(shape)}: {fields})")
        if tuple(got) != tuple(shape):
            raise WeightsError(f"{source}: the tensor {name} has shape {tuple(got)}, but the "
                               f"configuration ({fields}) says it should be {tuple(shape)}")


def _ranges(values: set[int]) -> str:
    """{0, 1, 2, 5} -> "0-2, 5" (at most a few runs shown)."""
    runs, out = [], sorted(values)
    start = prev = out[0]
    for v in out[1:]:
        if v != prev + 1:
            runs.append((start, prev))
            start = v
        prev = v
    runs.append((start, prev))
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:4])
    return text + (", …" if len(runs) > 4 else "")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
