"""Helpers for the plugin-host tests (importable as plugins_testlib; conftest re-exports them)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INCLUDE = os.path.join(ROOT, "include")


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
