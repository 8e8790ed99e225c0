"""GPU: a C program linking libhipdnn_backend.so passes cudaMalloc'd pointers through the C API."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def c_env():
    env = dict(os.environ)
    env["HIPDNN_PLUGIN_DIR"] = os.path.join(ROOT, "engine_plugins", "hip_kernels")
    env["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
    # the embedded interpreter needs this interpreter's packages (cuda-bindings, numpy, ...)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) or "/tmp/site" in p])
    return env


def build_c(out_dir):
    from cabi_testlib import INCLUDE, LIBDIR
    exe = os.path.join(out_dir, "c_device_ptrs")
    cmd = ["gcc", "-std=c11", "-O1", "-Wall", "-I", INCLUDE, "-I", os.path.join(CUDA, "include"),
           os.path.join(HERE, "c_device_ptrs.c"), "-o", exe, "-L", LIBDIR, "-lhipdnn_backend",
           f"-Wl,-rpath,{LIBDIR}", "-L", os.path.join(CUDA, "lib64"), "-lcudart",
           f"-Wl,-rpath,{os.path.join(CUDA, 'lib64')}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def test_c_program_device_pointers(libpath, tmp_path):
    exe = build_c(str(tmp_path))
    r = subprocess.run([exe], capture_output=True, text=True, env=c_env(), timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
