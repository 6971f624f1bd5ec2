"""Rendered files kept per figure: the same figure (as prepared: theme, caption, hence language), format
and options give the same bytes without rendering again, for every page of the process.

    key = figure_key(prepared, "gif", scale=1)
    data = RENDERED.get(key, lambda: gif_bytes(prepared))   # rendered once; a second caller waits for it
    RENDERED.peek(key)                                       # the bytes, or None (nothing rendered)

Bounded in entries and bytes (least recently used out first): ``ATTENTION_EXPLORER_EXPORT_CACHE_MB``
(default 64; 0 keeps nothing). The key is a SHA-256 of the figure's JSON, so two pages showing the same
figure share it, and any change to the figure (a step, a theme, a caption) is a new key.

Used by the app's download buttons (explorer/export_ui.py), not by ``figure_bytes`` itself: the
exporter and the renderer's tests render every time they ask.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable

import plotly.graph_objects as go
from plotly.utils import PlotlyJSONEncoder

CACHE_MB_ENV = "ATTENTION_EXPLORER_EXPORT_CACHE_MB"
DEFAULT_CACHE_MB = 64
MAX_ENTRIES = 256


def figure_key(fig: go.Figure | list[go.Figure], fmt: str, **options) -> str:
    """What identifies a rendered file: the figure's JSON (frames included), or the JSON of each figure
    of a list (a timeline's pages, explorer/export/frames.py ``step_figures``: the same GIF whatever step
    the page shows), the format, the options."""
    h = hashlib.sha256()
    h.update(json.dumps([fmt, sorted(options.items())], default=str).encode())
    for f in fig if isinstance(fig, list) else [fig]:
        h.update(json.dumps(f.to_plotly_json(), cls=PlotlyJSONEncoder, sort_keys=True).encode())
    return h.hexdigest()


class Rendered:
    """Bytes by key, bounded (entries, bytes), thread-safe; ``get`` renders a missing key once while
    other callers of the same key wait for it (single flight)."""

    def __init__(self, max_bytes: int, max_entries: int = MAX_ENTRIES) -> None:
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.bytes = 0
        self.renders = 0  # how many times ``make`` ran (the tests and benchmarks read it)
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._making: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def peek(self, key: str) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
            return data

    def get(self, key: str, make: Callable[[], bytes]) -> bytes:
        data = self.peek(key)
        if data is not None:
            return data
        with self._lock:
            making = self._making.setdefault(key, threading.Lock())
        with making:
            data = self.peek(key)
            if data is not None:
                return data
            try:
                data = make()
                with self._lock:
                    self.renders += 1
                self._put(key, data)
            finally:
                with self._lock:
                    self._making.pop(key, None)
        return data

    def _put(self, key: str, data: bytes) -> None:
        with self._lock:
            if len(data) > self.max_bytes:  # larger than the whole cache: given, not kept
                return
            old = self._items.pop(key, None)
            self.bytes += len(data) - (len(old) if old is not None else 0)
            self._items[key] = data
            while self._items and (len(self._items) > self.max_entries or self.bytes > self.max_bytes):
                self.bytes -= len(self._items.popitem(last=False)[1])

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0
            self.renders = 0

    def __len__(self) -> int:
        return len(self._items)


def _cache_bytes() -> int:
    raw = (os.environ.get(CACHE_MB_ENV) or "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_CACHE_MB
    except ValueError:
        raise ValueError(f"{CACHE_MB_ENV}={raw!r} is not a number of megabytes") from None
    return max(0, int(mb * 2**20))


RENDERED = Rendered(_cache_bytes())
