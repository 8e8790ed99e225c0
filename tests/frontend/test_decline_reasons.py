"""Decline reasons: when an engine declines a graph, the backend logs why at info
level, keeps the reasons for hipdnnGetLastErrorString when no engine is left, and names the
engines that declined when the one left fails at execute (e.g. the CPU reference engine on
device memory).  Runs in a child process (log level and the CPU engine's memory probe)."""
from __future__ import annotations

import pytest

from test_frontend_engines import run_child

pytestmark = pytest.mark.needs_cpu_engine

BODY = '''
import os
from engine_plugins.cpu_reference import hostmem
H = hf.DataType.HIPDNN_DATA_HALF
h = hf.Handle()
# 1. no engine: a HALF-compute pointwise graph (the CPU reference computes 16-bit data in float)
g = hf.Graph(handle=h, io_data_type=H, compute_data_type=H, name="half_compute")
x = g.tensor(name="x", dim=[6])
g.relu(x).set_output(True).set_name("y")
try:
    g.build()
    out["none"] = "built"
except errors.HipdnnError as e:
    out["none"] = str(e)
# 2. the CPU engine alone accepts; its device-memory error names the engines that declined
g, x, y = relu_graph(h)
g.build()
out["uids"] = [x.uid, y.uid]
hostmem.set_classifier(lambda p: "device")
a, b = np.ones(6, np.float32), np.zeros(6, np.float32)
try:
    g.execute({x: a, y: b})
    out["exec"] = "ran"
except errors.HipdnnError as e:
    out["exec"] = str(e)
hostmem.set_classifier(None)
'''


def test_decline_reasons_reach_the_user():
    out = run_child(BODY)
    # uids from 0, as hipDNN's frontend numbers them
    assert out["uids"] == [0, 1]
    none = out["none"]
    assert "No engine configurations available" in none
    assert "HIPDNN_CABI_CPU_REFERENCE_ENGINE declined the graph:" in none and "compute=HALF" in none
    ex = out["exec"]
    assert "device-only memory" in ex
    # every other engine loaded here declined the graph and is named with its reason
    assert "declined the graph:" in ex and "HIPDNN_CABI_CPU_REFERENCE_ENGINE declined" not in ex


def test_each_decline_reason_is_given_once():
    """A plugin whose engines all decline gives its reason once (not once per branch of the
    applicability answer), in the "No engine configurations" message and in execute errors."""
    import re
    out = run_child(BODY)
    for text in (out["none"], out["exec"]):
        reasons = re.findall(r"([\w:.]+) declined the graph:", text)
        assert reasons, text
        assert len(reasons) == len(set(reasons)), text
