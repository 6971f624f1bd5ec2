"""Attention Explorer: the Streamlit app (app.py serves main.py), its views, state, i18n and export."""
