"""Fixtures for the frontend tests (helpers live in fe_util.py: conftest names collide across dirs)."""
from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from fe_util import cpu_engine_loaded  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if cpu_engine_loaded():
        return
    skip = pytest.mark.skip(reason="the CPU reference engine is not loaded")
    for item in items:
        if "needs_cpu_engine" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_cpu_engine: needs HIPDNN_CABI_CPU_REFERENCE_ENGINE")


@pytest.fixture(scope="module")
def handle():
    from hipdnn_cabi import frontend as hf
    h = hf.Handle()
    yield h
    h.close()
