"""Command lines, apart from the packages the page imports: export.py (python -m explorer.export)."""
