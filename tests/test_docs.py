"""Documentation that is code runs.  Every ```python block of docs/*.md and the
README runs (blocks of one file in order, in one fresh interpreter per file, outside the source
tree's cwd); the frontend package's docstring example runs too.  API listings use ```text.
Also: the packaging metadata uses an SPDX license string (no setuptools deprecation warning)."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest

from cabi_testlib import ROOT

DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```", re.M | re.S)


def python_blocks(path):
    return FENCE.findall(open(path, encoding="utf-8").read())


def _run(code, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


@pytest.mark.parametrize("path", [p for p in DOCS if python_blocks(p)],
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_python_blocks_run(path, tmp_path):
    _run("\n\n".join(python_blocks(path)), tmp_path)


def test_some_docs_have_code():
    assert sum(len(python_blocks(p)) for p in DOCS) >= 4


def test_frontend_docstring_example_runs(tmp_path):
    import hipdnn_cabi.frontend as hf
    doc = hf.__doc__
    block = doc.split("::", 1)[1].split("\n\n", 2)[1]
    _run(textwrap.dedent(block), tmp_path)


def test_no_stale_enum_spellings_in_docs_and_docstrings():
    """`hf.DataType.FLOAT` never existed (members are spelled as in C: HIPDNN_DATA_FLOAT)."""
    bad = re.compile(r"DataType\.(FLOAT|HALF|DOUBLE|BFLOAT16|INT8|INT32)\b")
    hits = []
    for f in DOCS + glob.glob(os.path.join(ROOT, "hipdnn_cabi", "**", "*.py"), recursive=True):
        if "_generated" in f:
            continue
        for i, line in enumerate(open(f, encoding="utf-8"), 1):
            if bad.search(line):
                hits.append(f"{os.path.relpath(f, ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_license_is_an_spdx_string():
    import tomllib
    meta = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))
    assert meta["project"]["license"] == "MIT"
    req = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert req and ">=77" in req[0]          # SPDX license strings need setuptools >= 77
    for dep in ("flatbuffers", "numpy", "cffi"):   # what setup.py imports while building
        assert any(r.startswith(dep) for r in meta["build-system"]["requires"]), dep


def _readme_row(first_cell):
    for line in open(os.path.join(ROOT, "README.md"), encoding="utf-8"):
        if line.startswith(f"| {first_cell} |"):
            return [c.strip() for c in line.strip().strip("|").split("|")]
    raise AssertionError(f"README has no table row for {first_cell}")


def test_readme_installed_package_pkgconfig_and_cmake_rows():
    """The wheel ships the .pc and CMake files: the installed-package column says where they are
    (`hipdnn-cabi paths`), not that a generator must be run."""
    for row, flag in (("pkg-config", "--pkgconfig"), ("CMake", "--cmake")):
        cells = _readme_row(row)
        assert f"hipdnn-cabi paths {flag}" in cells[2], cells
        assert "gen_pkgconfig" not in cells[2] and "(same)" not in cells[2], cells


def test_cuda_extra_in_make_test_is_explained_and_optional():
    """`make test` installs the CUDA extra on every machine for the NVRTC compile checks: the
    README says why, and `make test NVRTC_CHECK=0` leaves it out."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert "NVRTC_CHECK=0" in readme and "cuda-bindings" in readme
    env = dict(os.environ, MAKEFLAGS="")

    def dry(*args):   # every recipe `make test` would run, nothing run
        return subprocess.run(["make", "-n", "-B", "test", *args], cwd=ROOT, capture_output=True,
                              text=True, env=env, timeout=60).stdout
    assert ".nvrtc-stamp" in dry()
    assert ".nvrtc-stamp" not in dry("NVRTC_CHECK=0")
