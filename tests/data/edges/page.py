"""A page whose cached resource counts its loads in a file (EDGES_COUNTER): a load after a cleared
cache shows as a second count."""
import os
from pathlib import Path

import streamlit as st


@st.cache_resource
def loaded() -> int:
    path = Path(os.environ["EDGES_COUNTER"])
    n = int(path.read_text() or "0") + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


st.write(f"loads: {loaded()}")
