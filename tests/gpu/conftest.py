"""tests/gpu: `pytest -m gpu` runs the GPU tests (skipped without a GPU runtime).

The root conftest skips items whose *keywords* contain "gpu" - and pytest puts the directory
name into every item's keywords, which would skip the CPU-only tests here too.  Undo that for
items that carry no real ``gpu`` marker."""
from __future__ import annotations

import os
import sys

import pytest

# OPT_IN: the kernel paths the engine keeps opt-in until they have run on a device; the tests
# here exercise them (a test that needs a fallback sets its knob itself)
from engine_plugins.hip_kernels.engine import OPT_IN

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    if config.getoption("--cpu-stand-in", default=False):
        import gpu_run
        from cpu_stand_in import CpuRunner
        gpu_run.Runner = CpuRunner


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    stand_in = config.getoption("--cpu-stand-in", default=False)
    for item in items:
        if stand_in or (item.get_closest_marker("gpu") is None and
                        "tests/gpu/" in str(item.fspath).replace(os.sep, "/")):
            item.own_markers[:] = [m for m in item.own_markers
                                   if not (m.name == "skip" and m.kwargs.get("reason") == "no GPU runtime found")]




@pytest.fixture(autouse=True)
def _opt_in_paths(monkeypatch):
    for k, v in OPT_IN.items():
        if k not in os.environ:
            monkeypatch.setenv(k, v)


@pytest.fixture(scope="module")
def R():
    """One GPU runner per test module (gpu_run.Runner: the HIP engine's plugin object)."""
    from gpu_run import Runner
    return Runner()
