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


def _both_engines_dir(tmp_path):
    """A plugin directory with the GPU engine and the CPU reference engine (as installed by
    default: two small modules naming the packages)."""
    d = tmp_path / "engines"
    d.mkdir()
    for mod in ("hip_kernels", "cpu_reference"):
        (d / f"{mod}.py").write_text(f"from engine_plugins.{mod} import hipdnn_plugin  # noqa: F401\n")
    return str(d)


def build_replay(out_dir, host_only=False):
    from cabi_testlib import INCLUDE, LIBDIR
    exe = os.path.join(out_dir, "c_frontend_replay" + ("_host" if host_only else ""))
    cmd = ["gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-I", INCLUDE,
           os.path.join(HERE, "c_frontend_replay.c"), "-o", exe, "-L", LIBDIR, "-lhipdnn_backend",
           f"-Wl,-rpath,{LIBDIR}", "-lm"]
    if host_only:
        cmd.insert(1, "-DREPLAY_HOST_ONLY")
    else:
        cmd += ["-I", os.path.join(CUDA, "include"), "-L", os.path.join(CUDA, "lib64"), "-lcudart",
                f"-Wl,-rpath,{os.path.join(CUDA, 'lib64')}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def test_hipdnn_frontend_replay_device_buffers(libpath, tmp_path):
    """hipDNN's frontend call sequence from C with cudaMalloc'd buffers - conv forward
    and the four batchnorm kinds x FLOAT/HALF/BFLOAT16 x NCHW/NHWC, uids from 0, batchnorm
    without a workspace - planned on the GPU engine (config 0) and equal to the CPU reference
    engine run on host copies.  Includes upstream's BnTraining sample graph (16-bit x, FLOAT
    scale / bias / statistics / running statistics, by-value DOUBLE epsilon and momentum) and its
    mixed-precision variant (saved / next running statistics in the data type)."""
    exe = build_replay(str(tmp_path))
    env = c_env()
    env["HIPDNN_PLUGIN_DIR"] = _both_engines_dir(tmp_path)
    r = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=500)
    if os.environ.get("OUT"):   # a device run keeps the per-case lines
        with open(os.path.join(os.environ["OUT"], "replay.txt"), "w") as f:
            f.write(r.stdout + r.stderr[-4000:])
    assert r.returncode == 0 and "OK (42 cases)" in r.stdout, r.stdout + r.stderr[-4000:]
