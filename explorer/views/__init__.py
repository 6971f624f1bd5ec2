"""Figures for every stage of attention: pure functions (arrays and tokens in, plotly figures out).

No Streamlit here. ``stages`` is the contract the app and the exporter share; ``style`` holds the
colour scales and the escaping every figure uses.
"""
