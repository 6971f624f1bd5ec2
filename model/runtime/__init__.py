"""Hooks and the runtime of a run: HookedModel and run_with_cache (base.py), hook points (hooks.py),
what-if edits (edits.py), the token and memory limits (limits.py, memory.py), malloc settings
(malloc.py) and the errors the package raises (errors.py)."""
