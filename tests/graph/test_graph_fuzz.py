"""Fuzz: 10,000 mutated / truncated graph buffers through CreateAndDeserializeGraph_ext, in a
subprocess so that a crash fails the test instead of killing pytest."""
from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_fuzz_deserialize(libpath):
    r = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_driver.py"), libpath, "10000", "1234"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"rc={r.returncode}\nstdout:{r.stdout[-3000:]}\nstderr:{r.stderr[-3000:]}"
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["n"] == 10000
    assert summary["slowest_s"] < 2.0
    # every result was a non-success status or a valid graph; both kinds occurred
    assert summary["valid"] > 0
    assert sum(summary["statuses"].values()) == 10000
    assert "9" not in summary["statuses"]  # no INTERNAL_ERROR
    # graphs with huge strides; the unaddressable ones got no engine
    sp = summary["spans"]
    assert sp["unaddressable"] > 0 and sp["graphs"] > sp["unaddressable"], sp
