"""Shared fixtures: the built library (ABI mode), and compiling/running C programs against it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cabi_testlib import INCLUDE, LIB, LIBDIR, ROOT, SHARED, run  # noqa: E402,F401


def pytest_addoption(parser):
    parser.addoption("--cpu-stand-in", action="store_true",
                     help="tests/gpu: run the GPU tests' bodies on the CPU reference engine "
                          "(tests/gpu/cpu_stand_in.py) - checks the test code where no GPU is present")


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_lib: needs the built libhipdnn_backend.so")


def _have_gpu() -> bool:
    try:
        from hipdnn_cabi import device  # noqa: F401
        return bool(device.available())
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _have_gpu() or config.getoption("--cpu-stand-in"):
        return
    skip = pytest.mark.skip(reason="no GPU runtime found")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def libpath():
    if not os.path.exists(LIB):
        pytest.fail(f"{LIB} is missing: run `make build` first")
    return LIB


@pytest.fixture(scope="session")
def capi(libpath):
    """(ffi, lib) of the backend in ABI mode — the same C surface a C program sees."""
    from hipdnn_cabi import capi as _capi
    return _capi.load(libpath)


@pytest.fixture(scope="session")
def c_build(tmp_path_factory):
    """Compile a C/C++ program against include/ and the built library; returns its path."""
    out = tmp_path_factory.mktemp("cbin")

    def build(src: str, name: str | None = None, *, cxx: bool = False, link: bool = True,
              extra: list[str] = ()) -> str:
        name = name or os.path.splitext(os.path.basename(src))[0]
        exe = str(out / name)
        cc = ["g++", "-std=c++17"] if cxx else ["gcc", "-std=c11"]
        cmd = cc + ["-Wall", "-Wextra", "-Werror", "-O1", "-I", INCLUDE, src, "-o", exe, "-pthread"]
        if link:
            cmd += ["-L", LIBDIR, "-lhipdnn_backend", f"-Wl,-rpath,{LIBDIR}"]
        cmd += ["-ldl", *extra]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"compile failed: {' '.join(cmd)}\n{r.stderr}"
        return exe

    return build
