"""Streamlit's own floor, for ``python -m bench --only floor`` (bench/floor.py): one 64×64 plotly
heatmap of random data under a slider, nothing else. Every rerun draws new data, so no message is
ever sent as a reference to one the browser already has: each rerun pays for a whole figure.

    streamlit run bench/bare_app.py
"""
import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.slider("Value", 0, 100, 0, key="value")
st.plotly_chart(go.Figure(go.Heatmap(z=np.random.default_rng().random((64, 64)))))
