"""Shared constants and helpers for the tests (importable as `cabi_testlib`: tests/ is on sys.path)."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "include")
LIBDIR = os.path.join(ROOT, "hipdnn_cabi", "lib")
LIB = os.path.join(LIBDIR, "libhipdnn_backend.so")
SHARED = os.path.join(ROOT, "..", "shared")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def run(cmd, *, env=None, timeout=120, check=True):
    """Run a program; return CompletedProcess (text)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=e, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r
