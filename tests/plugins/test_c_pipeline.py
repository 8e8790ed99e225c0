"""tests/plugins/pipeline.c: the frontend's exact call sequence from C, single- and multi-threaded."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from plugins_testlib import HERE


@pytest.fixture(scope="module")
def pipeline(c_build):
    return c_build(os.path.join(HERE, "pipeline.c"))


def _run(exe, args, env):
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run([exe, *args], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def test_pipeline_single(pipeline, c_sample):
    r = _run(pipeline, ["1", "3"], {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r.stdout.strip() == "OK 3"


def test_pipeline_eight_threads(pipeline, c_sample):
    t0 = time.perf_counter()
    r = _run(pipeline, ["8", "150"], {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r.stdout.strip() == "OK 1200"
    assert time.perf_counter() - t0 < 60
