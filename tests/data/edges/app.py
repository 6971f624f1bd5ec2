"""A server with this app's edge guard (explorer/edges.py) in front of a page with a counted cache:
tests/test_edges.py shows what a `clear_cache` message does with the guard and without it."""
import sys
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from explorer import edges  # noqa: E402

app = st.App(str(Path(__file__).with_name("page.py")), middleware=[Middleware(edges.Edges)])
