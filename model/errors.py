"""The errors the model package raises on purpose, each saying how to fix the problem.

A leaf module: it imports nothing from the project, so every other module can import it
(``model.WeightsError`` and ``model.registry.WeightsError`` are re-exports of the one class).
"""
from __future__ import annotations


class WeightsError(RuntimeError):
    """A weight file is missing, unreadable or does not match its architecture."""

