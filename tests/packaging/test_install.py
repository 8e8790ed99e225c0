"""A wheel built from a clean copy of the tree in a fresh venv (pip's build
isolation on: only build-system.requires are there), installed into another fresh venv, and used
the way a new user would, outside the source tree: a graph runs, `hipdnn-cabi demo`,
`export-plugin` and `conform` work, the engines live under hipdnn_cabi.engines (no top-level
engine_plugins), and C++ programs build through CMake find_package and pkg-config.

Slow (a wheel build and two venvs): excluded from `make test`, run by `make test-install` (CI).
"""
import glob
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from cabi_testlib import ROOT

pytestmark = pytest.mark.slow

CXX_MAIN = r"""
#include <cstdio>
#include "hipdnn_backend.h"
int main() {
    hipdnnHandle_t h = nullptr;
    if (hipdnnCreate(&h) != HIPDNN_STATUS_SUCCESS) { std::puts("create failed"); return 1; }
    const char* v = hipdnnVersionString_ext();
    if (!v) return 1;
    hipdnnDestroy(h);
    std::printf("cxx OK %s\n", v);
    return 0;
}
"""


def _run(cmd, cwd=None, env=None, timeout=900):
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HIPDNN_PLUGIN_DIR",
                                                          "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    e.update(env or {})
    r = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, errors="replace",
                       timeout=timeout)
    assert r.returncode == 0, f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-4000:]}"
    return r


def _clean_copy(dst):
    """The files a clean clone has: tracked + untracked-but-not-ignored (no .venv, build, lib)."""
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard", "-z"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("not a git checkout")
    for rel in filter(None, r.stdout.split("\0")):
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dst, rel))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    src, wheels, work = base / "src", base / "wheels", base / "work"
    src.mkdir(), work.mkdir()
    _clean_copy(str(src))
    builder = base / "venv-build"
    _run([sys.executable, "-m", "venv", str(builder)])
    _run([str(builder / "bin" / "python"), "-m", "pip", "wheel", "-q", "--no-deps", str(src),
          "-w", str(wheels)], cwd=str(work))
    whl = glob.glob(str(wheels / "hipdnn_cabi-*.whl"))
    assert len(whl) == 1, whl
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    _run([py, "-m", "pip", "install", "-q", whl[0]], cwd=str(work))
    site = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                cwd=str(work)).stdout.strip()
    return {"py": py, "bin": str(venv / "bin"), "work": str(work), "site": site, "wheel": whl[0]}


def test_wheel_is_platform_specific(installed):
    assert "py3-none-any" not in os.path.basename(installed["wheel"])


def test_layout_under_the_namespace(installed):
    site = installed["site"]
    assert not os.path.exists(os.path.join(site, "engine_plugins"))
    for rel in ("hipdnn_cabi/engines/cpu_reference/__init__.py",
                "hipdnn_cabi/engines/hip_kernels/kernels/gemm_mma.hip",
                "hipdnn_cabi/cdef/bootstrap.c", "hipdnn_cabi/include/hipdnn_backend.h",
                "hipdnn_cabi/lib/libhipdnn_backend.so",
                "hipdnn_cabi/lib/pkgconfig/hipdnn_backend.pc",
                "hipdnn_cabi/lib/cmake/hipdnn_backendConfig.cmake",
                "hipdnn_cabi/lib/cmake/hipdnn_backendConfigVersion.cmake",
                "hipdnn_cabi/lib/hipdnn_plugins/engines/cpu_reference.py",
                "hipdnn_cabi/examples/demo.py"):
        assert os.path.exists(os.path.join(site, rel)), rel
    top = open(glob.glob(os.path.join(site, "hipdnn_cabi-*.dist-info", "top_level.txt"))[0]).read()
    assert top.split() == ["hipdnn_cabi"], top


def test_graph_runs_from_the_installed_package(installed):
    ex = os.path.join(installed["site"], "hipdnn_cabi", "examples", "conv_bias_relu.py")
    out = _run([installed["py"], ex], cwd=installed["work"]).stdout
    assert "engine:" in out and "checksum:" in out
    out = _run([installed["py"], "-c", textwrap.dedent("""
        import hipdnn_cabi.frontend as hf
        names = [e.name for e in hf.engines()]
        assert any("CPU_REFERENCE" in n for n in names), names
        import hipdnn_cabi.engines.cpu_reference
        print("ok")""")], cwd=installed["work"]).stdout
    assert out.strip().endswith("ok")


def test_cli_from_the_wheel(installed):
    cli = os.path.join(installed["bin"], "hipdnn-cabi")
    assert "hipdnn-cabi 0.1.0" in _run([cli, "--version"]).stdout
    for sub in ("info", "engines", "demo", "export-plugin", "conform", "paths"):
        _run([cli, sub, "--help"], cwd=installed["work"])
    out = _run([cli, "demo"], cwd=installed["work"], timeout=600).stdout
    assert "demo: all checks passed" in out


def test_export_plugin_and_conform(installed):
    cli = os.path.join(installed["bin"], "hipdnn-cabi")
    so = os.path.join(installed["work"], "libpy_sample.so")
    _run([cli, "export-plugin", "hipdnn_cabi.engines.py_sample", "-o", so], cwd=installed["work"])
    assert os.path.exists(so)
    r = _run([cli, "conform", so, "--quick", "-q", "-j", "2"], cwd=installed["work"], timeout=900)
    assert "CONFORMANT" in r.stdout and "NOT CONFORMANT" not in r.stdout, r.stdout


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config not installed")
def test_pkg_config_cxx_build(installed, tmp_path):
    pcdir = _run([os.path.join(installed["bin"], "hipdnn-cabi"), "paths", "--pkgconfig"]).stdout.strip()
    flags = _run(["pkg-config", "--cflags", "--libs", "hipdnn_backend"],
                 env={"PKG_CONFIG_PATH": pcdir}).stdout.split()
    assert any(f.startswith("-I") and os.path.isfile(os.path.join(f[2:], "hipdnn_backend.h"))
               for f in flags), flags
    src = tmp_path / "main.cpp"
    src.write_text(CXX_MAIN)
    exe = str(tmp_path / "main")
    _run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", str(src), "-o", exe, *flags])
    assert _run([exe]).stdout.startswith("cxx OK")
    hello = os.path.join(installed["site"], "hipdnn_cabi", "examples", "hello_backend.c")
    _run(["gcc", "-std=c11", hello, "-o", exe + "_c", *flags])
    assert _run([exe + "_c"]).stdout.strip().endswith("OK")


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_cmake_find_package_cxx_build(installed, tmp_path):
    cmdir = _run([os.path.join(installed["bin"], "hipdnn-cabi"), "paths", "--cmake"]).stdout.strip()
    (tmp_path / "main.cpp").write_text(CXX_MAIN)
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent("""
        cmake_minimum_required(VERSION 3.16)
        project(consumer CXX)
        find_package(hipdnn_backend 1.0 CONFIG REQUIRED)
        add_executable(app main.cpp)
        target_link_libraries(app PRIVATE hipdnn_backend::hipdnn_backend)
        set_target_properties(app PROPERTIES BUILD_RPATH "${hipdnn_backend_LIBRARY_DIR}")
    """))
    b = tmp_path / "b"
    _run(["cmake", "-S", str(tmp_path), "-B", str(b), f"-Dhipdnn_backend_DIR={cmdir}"], timeout=300)
    _run(["cmake", "--build", str(b)], timeout=300)
    assert _run([str(b / "app")]).stdout.startswith("cxx OK")
