"""Benchmarks that print numbers measured side by side in one run (``python -m bench.<name>``)."""
