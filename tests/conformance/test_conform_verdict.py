"""`conform` does not say CONFORMANT when the checks that matter never ran.
A plugin that applies to no corpus graph gets "INCONCLUSIVE: no graph of the corpus was
applicable" (exit 3); `--graph file.json|.bin` (repeatable) adds the user's own graphs, whose
expected outputs the CPU reference engine computes; a `.py` plugin is told to be exported first."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(ROOT, "include")
QUICK = ["--quick", "--timeout", "20", "-j", "2"]


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    out = tmp_path_factory.mktemp("conform_verdict")
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"), f"OUT={out}"],
                   check=True, capture_output=True)
    base = str(out / "libhipdnn_c_sample_plugin.so")

    def build(src, name):
        lib = str(out / f"lib{name}.so")
        cmd = ["gcc", "-std=gnu11", "-O1", "-Wall", "-Werror", "-fPIC", "-shared", "-fvisibility=hidden",
               "-DHIPDNN_CABI_NO_HIP_HEADERS", f'-DBASE_PLUGIN="{base}"', "-I", INCLUDE, src, "-o", lib,
               "-ldl"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return lib
    return {"narrow": build(os.path.join(HERE, "narrow", "user_graphs_only.c"), "narrow"),
            "wrong": build(os.path.join(HERE, "broken", "wrong_numbers.c"), "wrong_numbers"),
            "dir": out}


def conform(*args):
    r = subprocess.run([sys.executable, "-m", "hipdnn_cabi.cli", "conform", *args], capture_output=True,
                       text=True, timeout=600, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    return r.returncode, r.stdout + r.stderr


def user_graph(tmp, name="USERONLY_add", fmt="json"):
    from hipdnn_cabi.backend import graph_fb
    from hipdnn_cabi.conformance.corpus import ADD, _pw
    buf = _pw(name, ADD, [[2, 5], [2, 5]], [2, 5], seed=9).to_bytes()
    p = os.path.join(str(tmp), f"{name}.{fmt}")
    if fmt == "json":
        d = graph_fb.read(buf, "Graph")
        with open(p, "w") as f:
            json.dump(d, f, default=lambda o: list(o) if isinstance(o, (bytes, bytearray)) else str(o))
    else:
        with open(p, "wb") as f:
            f.write(buf)
    return p


def test_no_applicable_graph_is_inconclusive(libs):
    rc, out = conform(libs["narrow"], *QUICK, "-k", "applicable or symbols or execute.numerics")
    assert rc == 3, out
    assert "INCONCLUSIVE: no graph of the corpus was applicable" in out
    assert "--graph" in out and "CONFORMANT" not in out.replace("INCONCLUSIVE", "").replace(
        "NOT CONFORMANT", "")


@pytest.mark.parametrize("fmt", ["json", "bin"])
def test_user_graph_makes_the_checks_run(libs, tmp_path, fmt):
    g = user_graph(tmp_path, fmt=fmt)
    report = tmp_path / "r.json"
    rc, out = conform(libs["narrow"], *QUICK, "-k", "execute.numerics", "--graph", g,
                      "--report", str(report))
    assert rc == 0, out
    data = json.loads(report.read_text())
    assert data["summary"]["verdict"] == "CONFORMANT"
    num = next(r for r in data["results"] if r["id"] == "conform.execute.numerics")
    assert num["verdict"] == "pass", num


def test_user_graph_expected_outputs_catch_wrong_numbers(libs, tmp_path):
    g = user_graph(tmp_path, name="mine_add")
    report = tmp_path / "r.json"
    rc, out = conform(libs["wrong"], *QUICK, "-k", "execute.numerics", "--graph", g,
                      "--report", str(report))
    assert rc == 1 and "NOT CONFORMANT" in out, out
    num = next(r for r in json.loads(report.read_text())["results"] if r["id"] == "conform.execute.numerics")
    assert "[user_mine_add," in num["message"], num


def test_bad_graph_file_is_a_usage_error(tmp_path, libs):
    p = tmp_path / "junk.bin"
    p.write_bytes(b"not a flatbuffer")
    rc, out = conform(libs["narrow"], "--graph", str(p))
    assert rc == 2 and "not a valid hipDNN Graph" in out


def test_python_plugin_is_told_to_export_first(tmp_path):
    rc, out = conform(os.path.join(ROOT, "engine_plugins", "py_sample", "__init__.py"))
    assert rc == 2 and "export-plugin" in out and "ELF" not in out
    rc, out = conform(os.path.join(ROOT, "engine_plugins", "py_sample"))
    assert rc == 2 and "hipdnn-cabi export-plugin" in out


def test_cli_help_and_version():
    for sub in ("info", "engines", "demo", "export-plugin", "conform", "paths"):
        r = subprocess.run([sys.executable, "-m", "hipdnn_cabi.cli", sub, "--help"], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0 and "usage: hipdnn-cabi " + sub in r.stdout, (sub, r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-m", "hipdnn_cabi.cli", "--version"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("hipdnn-cabi ")
