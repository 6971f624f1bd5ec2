"""The malloc settings now live in model/runtime/malloc.py (``import model`` applies them); kept so that
``from explorer import memory; memory.tune()`` still works."""
from model.runtime.malloc import SETTINGS, tune

__all__ = ["SETTINGS", "tune"]
