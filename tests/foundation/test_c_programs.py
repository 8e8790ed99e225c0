"""C programs linked to the built library: the spec's handle/tensor/last-error rules, threads,
and robust hosting (RTLD_LOCAL, foreign PATH/venv, PYTHONHOME, fork, atexit, init failures)."""
import os
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from cabi_testlib import ROOT, run

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c")
EXAMPLE = os.path.join(ROOT, "examples", "hello_backend.c")


def test_rules(c_build):
    r = run([c_build(os.path.join(HERE, "rules.c"))])
    assert "0 failed" in r.stdout, r.stdout


def test_example_runs(c_build):
    r = run([c_build(EXAMPLE, "hello")])
    assert "HIPDNN_STATUS_NOT_INITIALIZED" in r.stdout and r.stdout.strip().endswith("OK")


def test_cxx_program_links(c_build, tmp_path):
    src = tmp_path / "hello.cpp"
    src.write_text(textwrap.dedent("""
        #include "hipdnn_backend.h"
        #include <cstdio>
        #include <thread>
        #include <vector>
        int main() {
            std::vector<std::thread> ts;
            int bad = 0;
            for (int i = 0; i < 4; ++i)
                ts.emplace_back([&bad] {
                    hipdnnHandle_t h = nullptr;
                    if (hipdnnCreate(&h) != HIPDNN_STATUS_SUCCESS || hipdnnDestroy(h) != HIPDNN_STATUS_SUCCESS) bad = 1;
                });
            for (auto& t : ts) t.join();
            std::printf("cxx ok=%d\\n", !bad);
            return bad;
        }
    """))
    run([c_build(str(src), "hello_cxx", cxx=True)])


@pytest.mark.parametrize("threads", [1, 8])
def test_threads(c_build, threads):
    r = run([c_build(os.path.join(HERE, "threads.c")), str(threads), "200"], timeout=300)
    assert "bad=0" in r.stdout


def test_dlopen_rtld_local_and_atexit(c_build, libpath):
    exe = c_build(os.path.join(HERE, "host_dlopen.c"), link=False)
    r = run([exe, libpath])
    assert "main: create=0" in r.stdout
    assert "atexit: create=0 desc=0" in r.stdout


def test_fork_while_busy(c_build):
    r = run([c_build(os.path.join(HERE, "fork_host.c"))], timeout=400)
    assert "0 failures" in r.stdout


def test_fork_with_async_log_callback(c_build):
    """A child forked while the ASYNC delivery thread is busy (or idle) can
    unregister without hanging and gets a working ASYNC pipeline of its own."""
    r = run([c_build(os.path.join(HERE, "fork_log_async.c"))], timeout=300, check=False)
    assert "fork_log_async: 0 failures" in r.stdout, r.stdout + r.stderr


def test_foreign_python_first_on_path(c_build, tmp_path):
    """A different venv 'activated' (first on PATH, VIRTUAL_ENV set) does not change our interpreter."""
    other = tmp_path / "othervenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    env = {"PATH": f"{other / 'bin'}:/usr/bin:/bin", "VIRTUAL_ENV": str(other)}
    r = run([c_build(EXAMPLE, "hello")], env=env)
    assert r.stdout.strip().endswith("OK")


def test_minimal_environment(c_build):
    exe = c_build(EXAMPLE, "hello")
    r = subprocess.run([exe], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr


def test_pythonhome_set_to_install_prefix(c_build):
    exe = c_build(EXAMPLE, "hello")
    r = run([exe], env={"PYTHONHOME": sys.base_prefix})
    assert r.stdout.strip().endswith("OK")


def test_python_fails_to_start_gives_internal_error(c_build):
    exe = c_build(EXAMPLE, "hello")
    r = run([exe], env={"PYTHONHOME": "/nonexistent/prefix"}, check=False)
    assert r.returncode == 1
    assert "HIPDNN_STATUS_INTERNAL_ERROR" in r.stderr
    assert "failed to start" in r.stderr


def test_broken_import_gives_internal_error(c_build, tmp_path):
    pkg = tmp_path / "hipdnn_cabi"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('deliberately broken for the test')\n")
    exe = c_build(EXAMPLE, "hello")
    r = run([exe], env={"PYTHONPATH": str(tmp_path)}, check=False)
    assert r.returncode == 1
    assert "HIPDNN_STATUS_INTERNAL_ERROR" in r.stderr
    assert "deliberately broken" in r.stderr


def test_every_call_fails_cleanly_when_python_is_missing(c_build):
    """Not only the first call: every entry keeps returning INTERNAL_ERROR, never SUCCESS."""
    exe = c_build(os.path.join(HERE, "rules.c"))
    r = run([exe], env={"PYTHONHOME": "/nonexistent/prefix"}, check=False)
    assert r.returncode == 1
    # The pure-C entry points (status strings, last error, version) still work.
    assert "HIPDNN_STATUS_SUCCESS string" not in r.stdout
    assert "hipdnnCreate(&h) -> HIPDNN_STATUS_INTERNAL_ERROR" in r.stdout
