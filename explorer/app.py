"""Attention Explorer's server: ``streamlit run explorer/app.py`` from the repository root.

Streamlit finds the ``st.App`` below and serves ``explorer/main.py`` (the page every session runs:
the explorer and the lessons) with it. What this adds to a plain ``streamlit run explorer/main.py``
is the start: when the server starts, before anyone has opened the page, a background thread
imports torch and the views, loads the default model, runs the default sentences and draws the
default figure (``explorer/warm.py``). A class's first page then finds everything in the caches;
without it the first visitor waited for all of that (issue 23: the first figure 3–5× a bare
Streamlit app's, `python -m bench --only floor`). And the page it serves asks for the chart
library (Streamlit's plotly chunk) as soon as it starts, while that first run is still under way
(explorer/preload.py): it was the last thing on the first figure's path.
"""
from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # uvicorn imports this file with explorer/ (not the root) on sys.path
    sys.path.insert(0, str(ROOT))

from starlette.middleware import Middleware  # noqa: E402  (Streamlit's own server)

from explorer import access, edges, preload, warm  # noqa: E402  (light: no torch, no views until the thread runs)

# a host that asks for an access code (ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE=1) and gives none gets no
# server at all, with a message that says what to set, rather than a demo that runs open
access.check_required()
# a websocket frame larger than Streamlit accepts from a page is refused before it is read (explorer/edges.py)
edges.bound_frames()

PAGE = Path(__file__).resolve().parent / "main.py"


@asynccontextmanager
async def lifespan(_app):
    warm.start()  # a daemon thread; the server answers meanwhile
    yield


# Edges first: on a hosted or guarded server, only the routes and websocket messages a page of this app
# needs reach Streamlit (explorer/edges.py)
app = st.App(str(PAGE), lifespan=lifespan, middleware=[Middleware(edges.Edges), Middleware(preload.PreloadCharts)])
