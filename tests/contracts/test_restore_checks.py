"""A restored plan is checked like a fresh one.

* the backend verifies the envelope beyond the FlatBuffers verifier: vectors may not overlap (a
  raised tensor-uid count), uids are unique, and an HDGP container's plan lists its graph's uids;
* the SDK's restore hook (every Python plugin, here the CPU reference) runs the version guards and
  span checks of the fresh-build path on the op graph inside the payload, even when the payload
  checksum was recomputed.
"""
from __future__ import annotations

import struct

from ct_support import BAD, PLUGIN, py

from test_plan_serialization import _envelope

CPU = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"

SAVE = """
h = handle(); g = add_graph(h)
from hipdnn_cabi.backend.plugins.loader import fnv1a64
st, p = plan_for_engine(g, fnv1a64({engine!r})); ok(st)
st, b = serialize_plan(p); ok(st)
open({path!r}, 'wb').write(b)
print(json.dumps({{}}))
"""

RESTORE = """
import os
h = handle()
out = {{}}
for k in {names!r}:
    st, p = deserialize_plan(h, open(os.path.join({dir!r}, k + ".bin"), "rb").read())
    out[k] = [st, err() if st else ""]
    if st == 0:
        out[k].append(run_add(h, p))
        n = ffi.new("int64_t*")
        lib.hipdnnBackendGetAttribute(p, L.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT,
                                      L.HIPDNN_TYPE_INT64, 0, n, ffi.NULL)
        out[k].append(n[0])
print(json.dumps(out))
"""


def _real_plan(tmp_path, engine=CPU):
    path = str(tmp_path / "real.bin")
    py(SAVE.format(engine=engine, path=path))
    return open(path, "rb").read()


def _payload_with_graph(payload: bytes, edit) -> bytes:
    """The SDK payload with its op graph edited by ``edit(graph_dict)``, checksum recomputed."""
    from hipdnn_cabi.backend import graph_fb
    from hipdnn_cabi.plugin_sdk import serialization as ser
    p = ser.unpack(payload)
    g = graph_fb.read(p.blob, "Graph")
    edit(g)
    return ser.pack(ser.KIND_REDERIVE, p.engine_id, p.scalars, graph_fb.build("Graph", g), p.config)


def _strides(s):
    def edit(g):
        for t in g["tensors"]:
            if t["uid"] == 1:
                t["strides"] = list(s)
    return edit


def _stamp(major, minor, patch):
    def edit(g):
        g["min_required_engine_api_version"] = {"major": major, "minor": minor, "patch": patch}
    return edit


def test_restore_checks_envelope_and_payload(tmp_path):
    from hipdnn_cabi.backend.serialization import build_container
    from hipdnn_cabi.backend.plugins.loader import fnv1a64
    from hipdnn_cabi.schemas._generated.SerializedExecutionPlan import SerializedExecutionPlan
    good = _real_plan(tmp_path)
    e = SerializedExecutionPlan.GetRootAs(good, 0)
    uids = [int(u) for u in e.TensorUidsAsNumpy()]
    payload = e.PluginPayloadAsNumpy().tobytes()
    assert sorted(uids) == [1, 2, 3]
    # item 3: raise the uid count in place (the vector then runs over the payload)
    o = e._tab.Vector(e._tab.Offset(10)) - 4
    raised = bytearray(good)
    struct.pack_into("<I", raised, o, 29)
    base = dict(version=1, engine_id=fnv1a64(CPU), workspace=0, uids=uids, payload=payload)

    def env(**kw):
        return _envelope(**{**base, **kw})

    def graph_blob(uid_list):
        from hipdnn_cabi.backend import graph_fb
        from hipdnn_cabi.plugin_sdk import serialization as ser
        g = graph_fb.read(ser.unpack(payload).blob, "Graph")
        g["tensors"] = [t for t in g["tensors"] if t["uid"] in uid_list]
        return graph_fb.build("Graph", g)

    cases = {
        "good": (good, 0),
        "rebuilt": (env(), 0),
        "repacked": (env(payload=_payload_with_graph(payload, lambda g: None)), 0),
        "uid_count_raised": (bytes(raised), BAD),
        "uids_duplicate": (env(uids=[1, 2, 2]), BAD),
        "container_uids_match": (build_container(graph_blob([1, 2, 3]), good), 0),
        "container_uids_differ": (build_container(graph_blob([1, 2, 3]), env(uids=[1, 2, 9])), BAD),
        # item 4: the embedded graph's version stamp, as the graph path checks it
        "stamp_huge": (env(payload=_payload_with_graph(payload, _stamp(1, 2**32 - 1, 2**31 - 1))),
                       PLUGIN),
        "stamp_2": (env(payload=_payload_with_graph(payload, _stamp(2, 0, 0))), PLUGIN),
        # item 5: spans no engine can address (would read / write out of bounds)
        "strides_overflow": (env(payload=_payload_with_graph(payload, _strides([4, 2**62]))), PLUGIN),
        "bytes_overflow": (env(payload=_payload_with_graph(payload, _strides([4, 2**61]))), PLUGIN),
        "span_too_big": (env(payload=_payload_with_graph(payload, _strides([4, 2**47]))), PLUGIN),
    }
    for k, (blob, _) in cases.items():
        (tmp_path / f"{k}.bin").write_bytes(blob)
    r = py(RESTORE.format(names=list(cases), dir=str(tmp_path)))
    for k, (_, want) in cases.items():
        assert r[k][0] == want, (k, r[k])
    for k in ("good", "rebuilt", "repacked", "container_uids_match"):
        assert r[k][2] == [0, [11.0, 22.0, 33.0, 44.0]] and r[k][3] == 3, (k, r[k])
    assert "overlap" in r["uid_count_raised"][1]
    assert "more than once" in r["uids_duplicate"][1]
    assert "not the graph's" in r["container_uids_differ"][1]
    assert "requires engine API 1.4294967295.2147483647" in r["stamp_huge"][1], r["stamp_huge"]
    for k in ("strides_overflow", "bytes_overflow", "span_too_big"):
        assert "declines the graph" in r[k][1] and "tensor uid 1" in r[k][1], (k, r[k])


def test_sdk_restore_guard_in_process():
    """The SDK restore hook itself (no backend): the same guards for any Python plugin."""
    import pytest
    from hipdnn_cabi.backend import graph_fb
    from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase
    from hipdnn_cabi.plugin_sdk import serialization as ser
    from hipdnn_cabi.plugin_sdk.errors import INVALID_VALUE, NOT_APPLICABLE, PluginError
    from hipdnn_cabi.schemas._generated.schema_table import ENUMS, UNIONS
    F = dict(ENUMS["DataType"][1])["FLOAT"]
    ADD = dict(ENUMS["PointwiseMode"][1])["ADD"]
    PW = {m[2]: i for i, m in UNIONS["NodeAttributes"].items() if i}["PointwiseAttributes"]

    class P(PlanBase):
        def execute(self, handle, buffers, workspace):
            pass

    class B(PlanBuilderBase):
        def is_applicable(self, handle, graph):
            return True

        def build_plan(self, handle, graph, config):
            return P()

    class E(EngineBase):
        name = "RESTORE_GUARD_ENGINE"
        plan_builder = B()

    plugin = EnginePluginBase(name="restore_guard", api_version="1.2.0", engines=[E])
    c = plugin.create_container()

    def graph(stamp=None, stride=1):
        g = {"name": "g", "compute_data_type": F,
             "tensors": [{"uid": u, "name": f"t{u}", "data_type": F, "dims": [1, 4],
                          "strides": [4, stride if u == 1 else 1]} for u in (1, 2, 3)],
             "nodes": [{"name": "add", "compute_data_type": F,
                        "attributes": (PW, {"operation": ADD, "in_0_tensor_uid": 1,
                                            "in_1_tensor_uid": 2, "out_0_tensor_uid": 3})}]}
        if stamp:
            g["min_required_engine_api_version"] = dict(zip(("major", "minor", "patch"), stamp))
        return ser.pack(ser.KIND_REDERIVE, E().id, ser.ScalarTable(), graph_fb.build("Graph", g), b"")

    assert c.create_execution_context_from_serialized(graph((1, 0, 0))) is not None
    assert c.create_execution_context_from_serialized(graph((1, 2, 0))) is not None
    for stamp in ((1, 3, 0), (1, 2**32 - 1, 2**31 - 1)):
        with pytest.raises(PluginError) as ei:
            c.create_execution_context_from_serialized(graph(stamp))
        assert ei.value.status == INVALID_VALUE and "requires engine API" in ei.value.message
    with pytest.raises(PluginError) as ei:
        c.create_execution_context_from_serialized(graph((1, 0, 0), stride=2**62))
    assert ei.value.status == NOT_APPLICABLE and "tensor uid 1" in ei.value.message
