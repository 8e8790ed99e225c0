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


def test_pipeline_eight_threads_ten_seconds(pipeline, c_sample):
    """8 C threads for 10 s: each iteration builds, plans and executes a graph (ADD/MUL/RELU by turn;
    half the threads on their own handles, half on one shared handle) and executes a plan shared by
    all threads; every result is checked in C.  A deadlock trips the subprocess timeout."""
    t0 = time.perf_counter()
    r = _run(pipeline, ["8", "0", "10"], {"HIPDNN_PLUGIN_DIR": c_sample})
    elapsed = time.perf_counter() - t0
    words = r.stdout.split()
    assert words[0] == "OK" and words[2] == "min", r.stdout
    total, least = int(words[1]), int(words[3])
    assert least >= 3 and total >= 8 * 3, r.stdout  # every thread made progress
    assert 10 <= elapsed < 60


def test_hammer_racing_ids(c_build, c_sample):
    """tests/plugins/hammer.c: 8 C threads create, set, finalize, execute and destroy
    C-resident tensors, pointwise operations and variant packs while the other threads use the same
    ids (published in shared slots, destroyed under them): every call answers an expected status,
    own values round-trip, executes compute right; a crash, hang or wrong status fails."""
    exe = c_build(os.path.join(HERE, "hammer.c"))
    r = _run(exe, ["8", "3"], {"HIPDNN_PLUGIN_DIR": c_sample})
    words = r.stdout.split()
    assert words[0] == "OK" and int(words[1]) > 100 and int(words[2]) > 10, r.stdout
