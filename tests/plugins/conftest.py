"""Fixtures for the plugin-host tests: the C sample plugin and the configurable mini plugins."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(ROOT, "include")


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
    """mini(tag, *defines, dirname=None) → path of a compiled broken/mini_plugin.c variant."""
    base = tmp_path_factory.mktemp("mini")
    cache = {}

    def build(tag, *defines, dirname=None):
        key = (tag, defines, dirname)
        if key in cache:
            return cache[key]
        d = base / (dirname or f"d_{tag}")
        d.mkdir(exist_ok=True)
        so = d / f"libmini_{tag}.so"
        cmd = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
               "-DHIPDNN_CABI_NO_HIP_HEADERS", f"-I{INCLUDE}", f'-DMINI_TAG="{tag}"',
               *[f"-D{x}" for x in defines], os.path.join(HERE, "broken", "mini_plugin.c"),
               "-o", str(so)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        cache[key] = str(so)
        return str(so)

    return build


def py(script: str, env: dict | None = None, timeout=120):
    """Run ``script`` in a fresh interpreter (the library keeps process-wide state); the script
    prints one JSON document on its last stdout line, which is returned."""
    e = dict(os.environ)
    e.pop("HIPDNN_PLUGIN_DIR", None)
    e["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, e.get("PYTHONPATH", "")])
    if env:
        e.update(env)
    src = "from pyapi import *\nimport json\n" + textwrap.dedent(script)
    r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=e,
                       timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])
