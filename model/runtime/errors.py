"""The errors the model package raises on purpose, each saying how to fix the problem.

A leaf module: it imports nothing from the project, so every other module can import it
(``model.WeightsError`` and ``model.registry.WeightsError`` are re-exports of the one class).
"""
from __future__ import annotations


class WeightsError(RuntimeError):
    """A weight file is missing, unreadable or does not match its architecture."""


class InputTooLong(ValueError):
    """A sentence has more tokens than the model's limit (``ModelInfo.max_tokens``)."""

    def __init__(self, message: str, *, index: int, n_tokens: int, limit: int) -> None:
        super().__init__(message)
        self.index = index  # which sentence of the batch (0-based)
        self.n_tokens = n_tokens  # how many tokens it has, specials included
        self.limit = limit


class RunTooLarge(ValueError):
    """A run's hook tensors would need more memory than the run may take."""

    def __init__(self, message: str, *, estimate: int, budget: int) -> None:
        super().__init__(message)
        self.estimate = estimate  # bytes the run would need (estimated before it starts)
        self.budget = budget  # bytes it may take
