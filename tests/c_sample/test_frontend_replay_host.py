"""CI (no GPU): hipDNN's frontend call sequence from C (tests/gpu/c_frontend_replay.c built with
-DREPLAY_HOST_ONLY) - conv forward, the four batchnorm kinds and upstream's BnTraining sample graph
(plus its mixed-precision variant), FLOAT/HALF/BFLOAT16 x NCHW/NHWC,
tensor uids from 0, graph-level data types, batchnorm without a workspace - on host memory.
On a GPU machine the same program runs with device buffers (tests/gpu/test_c_program.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gpu"))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_frontend_replay_on_host(tmp_path):
    from cabi_testlib import LIB
    if not os.path.exists(LIB):
        pytest.skip("libhipdnn_backend.so not built")
    from test_c_program import _both_engines_dir, build_replay
    exe = build_replay(str(tmp_path), host_only=True)
    env = dict(os.environ)
    env["HIPDNN_PLUGIN_DIR"] = _both_engines_dir(tmp_path)
    env["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
    root = os.path.dirname(os.path.dirname(HERE))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))])
    r = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "OK (42 cases)" in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
    # every case ran on the CPU reference engine (the GPU engine declines without a device)
    assert r.stdout.count("engine=HIPDNN_CABI_CPU_REFERENCE_ENGINE") == 42
