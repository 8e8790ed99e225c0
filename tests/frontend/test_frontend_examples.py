"""Every example runs; the CLI subcommands; HIPDNN_CABI_BACKEND_LIB selects the library."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fe_util import CPU_ENGINE, ROOT

EX = os.path.join(ROOT, "examples")
LIBDIR = os.path.join(ROOT, "hipdnn_cabi", "lib")


def run(cmd, env=None, timeout=300):
    e = {**os.environ, "PYTHONPATH": ROOT}
    if env:
        e.update(env)
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def c_example(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("ex") / "conv_bias_relu")
    r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include"),
                        os.path.join(EX, "conv_bias_relu.c"), "-L", LIBDIR, "-lhipdnn_backend",
                        f"-Wl,-rpath,{LIBDIR}", "-lm", "-o", exe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.mark.needs_cpu_engine
def test_c_example(c_example):
    r = run([c_example])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"engine: {CPU_ENGINE}" in r.stdout and "-> PASS" in r.stdout and "checksum:" in r.stdout


@pytest.mark.needs_cpu_engine
def test_python_example():
    r = run([sys.executable, os.path.join(EX, "conv_bias_relu.py")])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"engine: {CPU_ENGINE}" in r.stdout and "-> PASS" in r.stdout


@pytest.mark.needs_cpu_engine
def test_demo():
    r = run([sys.executable, os.path.join(EX, "demo.py")], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "C and Python checksums agree" in r.stdout and "demo: all checks passed" in r.stdout


NO_ENGINES = {"HIPDNN_PLUGIN_DIR": "/nonexistent-hipdnn-plugins", "HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS": "1"}


def test_examples_fail_clearly_without_engines(c_example):
    r = run([c_example], env=NO_ENGINES)
    assert r.returncode == 2 and "No engine configurations available" in r.stderr
    r = run([sys.executable, os.path.join(EX, "conv_bias_relu.py")], env=NO_ENGINES)
    assert r.returncode == 2 and "No engine configurations available" in r.stderr
    assert "Traceback" not in r.stderr


def test_hello_backend_example(c_build):
    exe = c_build(os.path.join(EX, "hello_backend.c"), "hello_backend_fe")
    assert run([exe]).returncode == 0


def test_cli_info_and_engines():
    r = run([sys.executable, "-m", "hipdnn_cabi.cli", "info", "--json"])
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["library"].endswith("libhipdnn_backend.so") and info["include_dir"]
    assert "gpu_runtime" in info and isinstance(info["engines"], list)
    r = run([sys.executable, "-m", "hipdnn_cabi.cli", "engines", "--json"])
    assert r.returncode == 0 and isinstance(json.loads(r.stdout), list)
    r = run([sys.executable, "-m", "hipdnn_cabi.cli", "--help"])
    assert "info" in r.stdout and "export-plugin" in r.stdout


def test_backend_lib_env_selects_library(tmp_path):
    link = tmp_path / "libhipdnn_backend.so"
    os.symlink(os.path.join(LIBDIR, "libhipdnn_backend.so"), link)
    code = ("from hipdnn_cabi import capi, frontend as hf\n"
            "print(capi.backend_library_path())\n"
            "print(hf.version_string())\n")
    r = run([sys.executable, "-c", code], env={"HIPDNN_CABI_BACKEND_LIB": str(link)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(link) and r.stdout.splitlines()[1]
    r = run([sys.executable, "-m", "hipdnn_cabi.cli", "info", "--json"],
            env={"HIPDNN_CABI_BACKEND_LIB": str(link)})
    info = json.loads(r.stdout)
    assert info["library"] == str(link) and info["library_selected_by"] == "HIPDNN_CABI_BACKEND_LIB"
    r = run([sys.executable, "-c", "from hipdnn_cabi import frontend as hf; hf.Handle()"],
            env={"HIPDNN_CABI_BACKEND_LIB": str(tmp_path / "missing.so")})
    assert r.returncode != 0 and "missing.so" in r.stderr
