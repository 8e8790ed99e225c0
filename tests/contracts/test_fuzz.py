"""≥ 5,000 mutated envelopes, containers and plugin payloads in a subprocess: zero crashes, every
status one of the documented ones (SUCCESS, BAD_PARAM, NULL_POINTER, NOT_SUPPORTED, INTERNAL_ERROR,
PLUGIN_ERROR), restored plans execute."""
from __future__ import annotations

import json
import os
import subprocess

from ct_support import HERE, PY, ROOT

N = 20000


def test_fuzz_deserialization(dirs):
    env = dict(os.environ)
    env.pop("HIPDNN_PLUGIN_DIR", None)
    env["HIPDNN_PLUGIN_DIR"] = dirs["samples_v12"]
    env["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE])
    r = subprocess.run([PY, os.path.join(HERE, "fuzz_plans.py"), str(N), "20240517"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, f"exit {r.returncode} (negative = signal)\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["n"] == N and out["seeds"] >= 4
    assert out["bad"] == [], out
    assert sum(v for k, v in out["counts"].items() if not k.startswith("contents")) == N
    assert out["executed"] > 0   # unmutated-enough inputs still restore and run
