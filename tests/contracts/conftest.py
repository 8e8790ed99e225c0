"""Fixtures for the contract tests (RFC 0009 plan serialization, RFC 0010 behaviour notes, RFC 0016
runtime pass-by-value).  Helpers live in ct_support.py (conftest module names collide across test
directories, so nothing imports from here)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ct_support import ROOT, plugin_dir  # noqa: E402


@pytest.fixture(scope="session")
def ct_base(tmp_path_factory):
    return tmp_path_factory.mktemp("contracts")


@pytest.fixture(scope="session")
def c_sample_so(ct_base):
    out = ct_base / "c_sample_build"
    r = subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"),
                        f"OUT={out}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return str(out / "libhipdnn_c_sample_plugin.so")


@pytest.fixture(scope="session")
def dirs(ct_base, c_sample_so):
    """Named plugin directories: c_sample, py_sample, v12 / v10 (the scalar contract plugins),
    and combinations."""
    py_sample = os.path.join(ROOT, "engine_plugins", "py_sample")
    v12 = os.path.join(HERE, "pyplugins", "scalar_v12.py")
    v10 = os.path.join(HERE, "pyplugins", "scalar_v10.py")
    return {
        "c_sample": plugin_dir(ct_base, "d_c_sample", [c_sample_so]),
        "py_sample": plugin_dir(ct_base, "d_py_sample", [py_sample]),
        "samples": plugin_dir(ct_base, "d_samples", [c_sample_so, py_sample]),
        "v12": plugin_dir(ct_base, "d_v12", [v12]),
        "v10": plugin_dir(ct_base, "d_v10", [v10]),
        "v12_c_sample": plugin_dir(ct_base, "d_v12_cs", [v12, c_sample_so]),
        "samples_v12": plugin_dir(ct_base, "d_samples_v12", [c_sample_so, py_sample, v12]),
    }


@pytest.fixture(scope="session")
def ctplug(ct_base):
    """ctplug(tag, *defines, details=None) → directory holding a compiled ctplugin.c variant
    (``details``: EngineDetails bytes for the variant)."""
    from ct_support import build_ctplug
    cache = {}

    def build(tag, *defines, details=None):
        key = (tag, defines, details)
        if key not in cache:
            cache[key] = build_ctplug(ct_base, tag, defines, details)
        return cache[key]

    return build
