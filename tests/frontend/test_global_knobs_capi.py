"""hipDNN's global knobs on the CPU reference engine through the C API: the graph is built with
the frontend, then ENGINE / ENGINECFG (knobs as serialized KnobSetting FlatBuffers,
HIPDNN_ATTR_KNOB_CHOICE_SERIALIZED_VALUE) / EXECUTION_PLAN / VARIANT_PACK / Execute are raw C calls.
A knob of the wrong type is refused at plan build (PLUGIN_ERROR; the workspace query at ENGINECFG
finalize does not fail on it); an unknown knob id is ignored; global.benchmarking = 1 (or
HIPDNN_FORCE_BENCHMARKING) makes the first execute time the plan's variants and log the times;
global.workspace_size_limit is checked against the plan's workspace.  In a child process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from fe_util import ROOT

pytestmark = pytest.mark.needs_cpu_engine

BODY = r'''
import json, os
import flatbuffers
import numpy as np
from hipdnn_cabi import frontend as hf
from hipdnn_cabi._generated.enums import AttributeName as A, AttributeType as T, DescriptorType as D
from hipdnn_cabi.schemas._generated import FloatValue, IntValue, KnobSetting
F32 = hf.DataType.HIPDNN_DATA_FLOAT
CPU = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
h = hf.Handle()
g = hf.Graph(handle=h, io_data_type=F32, compute_data_type=F32, name="relu")
x = g.tensor(name="x", dim=[64])
y = g.relu(x).set_output(True).set_name("y")
g.build_operation_graph()
api = g.api
ffi, lib = api.ffi, api.lib
eid = next(e for e in g.get_ranked_engine_ids() if g._engine_name_of(e) == CPU)
keep = []

def setting(kid, value):
    b = flatbuffers.Builder(64)
    if isinstance(value, float):
        FloatValue.Start(b); FloatValue.AddValue(b, value); v, tag = FloatValue.End(b), 2
    else:
        IntValue.Start(b); IntValue.AddValue(b, value); v, tag = IntValue.End(b), 1
    k = b.CreateString(kid)
    KnobSetting.Start(b); KnobSetting.AddKnobId(b, k); KnobSetting.AddValueType(b, tag)
    KnobSetting.AddValue(b, v)
    b.Finish(KnobSetting.End(b))
    return bytes(b.Output())

def new(t):
    d = ffi.new("hipdnnBackendDescriptor_t*")
    assert lib.hipdnnBackendCreateDescriptor(t, d) == 0
    return d[0]

def err():
    return api.last_error()

def plan_with(**knobs):
    """(ENGINECFG finalize status, plan finalize status, message, plan)"""
    e = new(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
    arr = ffi.new("hipdnnBackendDescriptor_t[1]", [g._gdesc])
    assert lib.hipdnnBackendSetAttribute(e, A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, arr) == 0
    assert lib.hipdnnBackendSetAttribute(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64, 1, ffi.new("int64_t[1]", [eid])) == 0
    assert lib.hipdnnBackendFinalize(e) == 0, err()
    cfg = new(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    assert lib.hipdnnBackendSetAttribute(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.new("hipdnnBackendDescriptor_t[1]", [e])) == 0
    if knobs:
        blobs = [setting(k.replace("__", "."), v) for k, v in knobs.items()]
        fb = ffi.new("hipdnnBackendFlatbufferData_t[]", len(blobs))
        for i, raw in enumerate(blobs):
            buf = ffi.new("uint8_t[]", raw); keep.append(buf)
            fb[i].ptr, fb[i].size = buf, len(raw)
        assert lib.hipdnnBackendSetAttribute(cfg, A.HIPDNN_ATTR_KNOB_CHOICE_SERIALIZED_VALUE, T.HIPDNN_TYPE_FLATBUFFER_DATA_STRUCT_EXT, len(blobs), fb) == 0, err()
    st_cfg = lib.hipdnnBackendFinalize(cfg)
    msg = err() if st_cfg else ""
    plan = new(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    assert lib.hipdnnBackendSetAttribute(plan, A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.new("hipdnnBackendDescriptor_t[1]", [cfg])) == 0
    st_plan = lib.hipdnnBackendFinalize(plan) if st_cfg == 0 else None
    if st_plan:
        msg = err()
    return st_cfg, st_plan, msg, plan

xa = np.linspace(-1, 1, 64).astype(np.float32)

def run(plan):
    ya = np.zeros(64, np.float32)
    vp = new(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    ptrs = ffi.new("void*[2]", [ffi.cast("void*", xa.ctypes.data), ffi.cast("void*", ya.ctypes.data)])
    uids = ffi.new("int64_t[2]", [x.uid, y.uid])
    assert lib.hipdnnBackendSetAttribute(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, 2, ptrs) == 0
    assert lib.hipdnnBackendSetAttribute(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, 2, uids) == 0
    assert lib.hipdnnBackendFinalize(vp) == 0
    st = lib.hipdnnBackendExecute(h.raw, plan, vp)
    return st, bool(np.allclose(ya, np.maximum(xa, 0)))

out = {}
out["wrong_type"] = plan_with(global__benchmarking=1.0)[:3]
out["out_of_range"] = plan_with(global__workspace_size_limit=-1)[:3]
st_cfg, st_plan, _, p = plan_with(**{"no.such.knob": 5})
out["unknown"] = [st_cfg, st_plan, run(p)]
st_cfg, st_plan, _, p = plan_with(global__workspace_size_limit=0)
out["limit0"] = [st_cfg, st_plan, run(p)]
st_cfg, st_plan, _, p = plan_with(global__benchmarking=1)
out["bench"] = [st_cfg, st_plan, run(p), run(p), run(p)]
st_cfg, st_plan, _, p = plan_with()
out["plain"] = [st_cfg, st_plan, run(p)]
os.environ["HIPDNN_FORCE_BENCHMARKING"] = "1"
st_cfg, st_plan, _, p = plan_with()
out["forced"] = [st_cfg, st_plan, run(p)]
print("RESULT=" + json.dumps(out))
'''


def test_global_knobs_through_the_c_api(tmp_path):
    logf = tmp_path / "log.txt"
    env = {**os.environ, "PYTHONPATH": ROOT, "HIPDNN_LOG_LEVEL": "info",
           "HIPDNN_LOG_FILE": str(logf), "HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS": "1"}
    env.pop("HIPDNN_PLUGIN_DIR", None)
    env.pop("HIPDNN_FORCE_BENCHMARKING", None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(BODY)], capture_output=True,
                       text=True, env=env, timeout=240, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("RESULT=")][-1][7:])
    PLUGIN_ERROR = 14
    st_cfg, st_plan, msg = out["wrong_type"]
    assert st_cfg == 0 and st_plan == PLUGIN_ERROR, out["wrong_type"]   # refused at plan build
    assert "knob global.benchmarking takes a int value, not a float value" in msg
    assert out["out_of_range"][:2] == [0, PLUGIN_ERROR] and "outside" in out["out_of_range"][2]
    assert out["unknown"] == [0, 0, [0, True]]                           # unknown id: ignored
    assert out["limit0"] == [0, 0, [0, True]]                            # the engine needs none
    assert out["bench"] == [0, 0, [0, True], [0, True], [0, True]]
    assert out["plain"] == [0, 0, [0, True]] and out["forced"] == [0, 0, [0, True]]
    lines = [ln for ln in logf.read_text().splitlines()
             if "benchmarking: HIPDNN_CABI_CPU_REFERENCE_ENGINE:" in ln]
    # one line for the knob's plan (its first execute only), one for HIPDNN_FORCE_BENCHMARKING's
    assert len(lines) == 2, lines
    assert "1 thread(s)" in lines[0] and " ms" in lines[0] and "keeping" in lines[0]
    assert "knob no.such.knob is not a knob of this engine; ignored" in logf.read_text()
