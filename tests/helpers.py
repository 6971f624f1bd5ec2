"""Small helpers shared by the tests (pytest puts this folder on sys.path: ``from helpers import ...``)."""
from __future__ import annotations

import numpy as np

# repeated tokens ("l", "l"), HTML, Korean, emoji: the views' and the fast path's sentences
VIEW_TEXTS = ["hello <b>&", "안녕하세요 여러분 🙂"]


def strings(obj):
    """Every string inside a plotly figure's JSON-able dict (object arrays included)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from strings(v)
    elif isinstance(obj, np.ndarray) and obj.dtype == object:
        for v in obj.ravel():
            yield from strings(v)
