"""`hipdnn-cabi engines`: each engine says whether it can run graphs on this machine and, if not,
why (the HIP engine without a GPU); an empty list says why it is empty and exits non-zero."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from cabi_testlib import ROOT


def _cli(*args, env=None):
    e = dict(os.environ, PYTHONPATH=ROOT)
    e.pop("HIPDNN_PLUGIN_DIR", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "hipdnn_cabi.cli", "engines", *args],
                          capture_output=True, text=True, env=e, timeout=180)


def test_engines_report_availability():
    r = _cli("--json")
    assert r.returncode == 0, r.stderr
    rows = {x["name"]: x for x in json.loads(r.stdout)}
    cpu = rows["HIPDNN_CABI_CPU_REFERENCE_ENGINE"]
    assert cpu["available"] is True and cpu["why"] == ""
    from hipdnn_cabi import device
    hip = rows.get("HIPDNN_CABI_HIP_KERNELS_ENGINE")
    if hip is not None and not device.available():
        assert hip["available"] is False and "no GPU" in hip["why"], hip
    text = _cli()
    assert text.returncode == 0
    line = next(x for x in text.stdout.splitlines() if x.startswith("HIPDNN_CABI_CPU_REFERENCE"))
    assert line.rstrip().endswith("available")
    if hip is not None and not device.available():
        line = next(x for x in text.stdout.splitlines() if x.startswith("HIPDNN_CABI_HIP_KERNELS"))
        assert "unavailable: no GPU" in line, line


def test_no_engines_says_why(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for pdir, words in ((str(tmp_path / "missing") + "/", "is not a directory"),
                        (str(empty) + "/", "holds no plugin files")):
        r = _cli(env={"HIPDNN_PLUGIN_DIR": pdir})
        assert r.returncode != 0, r.stdout
        assert "no engines loaded" in r.stderr and "HIPDNN_PLUGIN_DIR" in r.stderr, r.stderr
        assert words in r.stderr and pdir.rstrip("/") in r.stderr, r.stderr
        j = _cli("--json", env={"HIPDNN_PLUGIN_DIR": pdir})
        assert j.returncode != 0 and words in json.loads(j.stdout)["why_none"]
