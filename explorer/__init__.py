"""Attention Explorer: the Streamlit app (app.py serves main.py), its views, state, i18n and export.

In a notebook: ``explorer.show(model, text, stage=..., layer=..., head=...)`` (explorer/notebook.py),
imported on first use, so that ``import explorer`` stays light (no torch, no plotly, no Streamlit)."""

__all__ = ["show", "stage_ids"]


def __getattr__(name: str):
    if name in __all__:
        from explorer import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")
