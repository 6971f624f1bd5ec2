"""Fixtures shared by the view tests: an untrained seed Transformer and its run on VIEW_TEXTS."""
from __future__ import annotations

import pytest
from helpers import VIEW_TEXTS

import model
from explorer.views import stages


@pytest.fixture(scope="module")
def seed():
    return model.load("seed", random=True)


@pytest.fixture(scope="module")
def run(seed):
    return stages.run_data(seed, VIEW_TEXTS)
