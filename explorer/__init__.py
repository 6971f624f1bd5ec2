"""Attention Explorer: the Streamlit app (app.py), its views, state, i18n and export."""
