"""Fixtures for the plugin-host tests: the C sample plugin and the configurable mini plugins."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plugins_testlib import HERE, INCLUDE, ROOT, py  # noqa: E402,F401


@pytest.fixture(scope="session")
def c_sample(tmp_path_factory):
    """Directory holding only libhipdnn_c_sample_plugin.so."""
    if not os.path.exists(os.path.join(ROOT, "engine_plugins", "c_sample", "Makefile")):
        pytest.skip("engine_plugins/c_sample is not there yet")
    out = tmp_path_factory.mktemp("c_sample")
    r = subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"),
                        f"OUT={out}/build"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = out / "dir"
    d.mkdir()
    os.symlink(out / "build" / "libhipdnn_c_sample_plugin.so", d / "libhipdnn_c_sample_plugin.so")
    return str(d)


@pytest.fixture(scope="session")
def mini(tmp_path_factory):
    """mini(tag, *defines, dirname=None, src="mini_plugin.c") → path of a compiled plugin built from
    broken/<src> (mini_plugin.c with switches, or one of the small broken-variant files)."""
    base = tmp_path_factory.mktemp("mini")
    cache = {}

    def build(tag, *defines, dirname=None, src="mini_plugin.c"):
        key = (tag, defines, dirname, src)
        if key in cache:
            return cache[key]
        d = base / (dirname or f"d_{tag}")
        d.mkdir(exist_ok=True)
        so = d / f"libmini_{tag}.so"
        cmd = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
               "-DHIPDNN_CABI_NO_HIP_HEADERS", f"-I{INCLUDE}", f'-DMINI_TAG="{tag}"',
               *[f"-D{x}" for x in defines], os.path.join(HERE, "broken", src),
               "-o", str(so)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        cache[key] = str(so)
        return str(so)

    return build


