"""pkg-config and CMake consumers of the in-tree library (relocatable .pc / CMake config)."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from cabi_testlib import LIBDIR, ROOT, run

HELLO = os.path.join(ROOT, "examples", "hello_backend.c")


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config not installed")
def test_pkg_config(tmp_path):
    env = {"PKG_CONFIG_PATH": os.path.join(LIBDIR, "pkgconfig")}
    flags = run(["pkg-config", "--cflags", "--libs", "hipdnn_backend"], env=env).stdout.split()
    exe = str(tmp_path / "hello")
    run(["gcc", "-std=c11", HELLO, "-o", exe, *flags])
    assert run([exe]).stdout.strip().endswith("OK")


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_cmake_find_package(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent(f"""
        cmake_minimum_required(VERSION 3.16)
        project(consumer C)
        find_package(hipdnn_backend CONFIG REQUIRED PATHS "{LIBDIR}/cmake" NO_DEFAULT_PATH)
        add_executable(hello "{HELLO}")
        target_link_libraries(hello PRIVATE hipdnn_backend::hipdnn_backend)
        set_target_properties(hello PROPERTIES BUILD_RPATH "{LIBDIR}")
    """))
    b = tmp_path / "b"
    run(["cmake", "-S", str(tmp_path), "-B", str(b)], timeout=120)
    run(["cmake", "--build", str(b)], timeout=120)
    assert run([str(b / "hello")]).stdout.strip().endswith("OK")

# The wheel/install test (fresh venvs, installed tools): tests/packaging/test_install.py.
