"""Compiled-plan serialization (RFC 0009, spec §5.1): round trips across processes, every status of
the three entry points, the HDGP container, restored-plan attributes, plugin hook failures."""
from __future__ import annotations

import os
import struct

import pytest

from ct_support import (BAD, INTERNAL, NOTINIT, NOTSUP, NULLPTR, PLUGIN, SIZE, details_bytes, py)

C_SAMPLE = "HIPDNN_CABI_C_SAMPLE_ENGINE"
PY_SAMPLE = "HIPDNN_CABI_PY_SAMPLE_ENGINE"

BUILD = """
import os, sys
from hipdnn_cabi.backend.plugins.loader import fnv1a64
h = handle()
g = add_graph(h, n=4)
st, p = plan_for_engine(g, fnv1a64(ENGINE))
ok(st)
out = {"y": run_add(h, p, x=X, b=B)}
st, plan_bytes = serialize_plan(p); ok(st)
st, box = serialize_graph_and_plan(g, p); ok(st)
open(DIR + "/plan.bin", "wb").write(plan_bytes)
open(DIR + "/box.bin", "wb").write(box)
out["ws"] = get_i64(p, L.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)[1]
out["uids"] = get_i64v(p, L.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT)[1]
out["pid"] = os.getpid()
print(json.dumps(out))
"""

RESTORE = """
import os
from hipdnn_cabi.backend.plugins.loader import fnv1a64
h = handle()
out = {"pid": os.getpid()}
for name in ("plan.bin", "box.bin"):
    data = open(DIR + "/" + name, "rb").read()
    st, p = deserialize_plan(h, data)
    ok(st)
    r = {"exec": run_add(h, p, x=X, b=B)}
    r["ws"] = get_i64(p, L.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)
    r["uids"] = get_i64v(p, L.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT)
    r["eid"] = get_i64(p, L.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT)
    r["override"] = get_bool(p, L.HIPDNN_ATTR_EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT)
    cfg = ffi.new("hipdnnBackendDescriptor_t*")
    r["cfg"] = lib.hipdnnBackendGetAttribute(p, L.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                             L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.NULL, cfg)
    r["cfg_msg"] = err()
    r["set"] = set_desc(p, L.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, [p])
    r["refin"] = lib.hipdnnBackendFinalize(p)
    st, again = serialize_plan(p)          # a restored plan serializes again
    r["reser"] = st
    st2, p2 = deserialize_plan(h, again)
    r["reexec"] = run_add(h, p2, x=X, b=B) if st == 0 and st2 == 0 else None
    r["destroy"] = [lib.hipdnnBackendDestroyDescriptor(p), lib.hipdnnBackendDestroyDescriptor(p2)]
    out[name] = r
out["contents"] = [contents(open(DIR + "/" + n, "rb").read()) for n in ("plan.bin", "box.bin")]
print(json.dumps(out))
"""


@pytest.mark.parametrize("engine,dkey", [(C_SAMPLE, "c_sample"), (PY_SAMPLE, "py_sample")])
def test_fresh_process_round_trip(dirs, tmp_path, engine, dkey):
    from hipdnn_cabi.backend.plugins.loader import fnv1a64
    head = f"ENGINE = {engine!r}\nDIR = {str(tmp_path)!r}\nX = [1.5, -2, 3, 4.25]\nB = [10, 20, 30, 40]\n"
    a = py(head + BUILD, dirs[dkey])
    want = [11.5, 18.0, 33.0, 44.25]
    assert a["y"] == [0, want]
    b = py(head + RESTORE, dirs[dkey])
    assert b["pid"] != a["pid"]
    for name in ("plan.bin", "box.bin"):
        r = b[name]
        assert r["exec"] == [0, want], r           # same numbers, fresh process
        assert r["ws"] == [0, a["ws"]]
        assert r["uids"] == [0, a["uids"]] and a["uids"] == [1, 2, 3]
        assert r["eid"] == [0, fnv1a64(engine)]
        assert r["override"] == [0, False]
        assert r["cfg"] == NULLPTR and "no engine config" in r["cfg_msg"]
        assert r["set"] == NOTINIT and r["refin"] == BAD   # finalized: no sets, no re-finalize
        assert r["reser"] == 0 and r["reexec"] == [0, want]
        assert r["destroy"] == [0, 0]
    assert b["contents"] == [[0, 1], [0, 3]]   # a bare plan blob reads as GRAPH (shipped rule)


def test_graph_and_plan_container(dirs):
    r = py("""
import flatbuffers
from hipdnn_cabi.schemas._generated.SerializedGraphAndPlan import SerializedGraphAndPlan
from hipdnn_cabi.schemas.verifier import verify
h = handle()
g = add_graph(h)
p = first_plan(g)
out = {}
st, box = serialize_graph_and_plan(g, p); ok(st)
verify(box, "SerializedGraphAndPlan", b"HDGP")
c = SerializedGraphAndPlan.GetRootAs(box, 0)
import numpy as np
def off(a):
    return a.__array_interface__["data"][0] - np.frombuffer(box, np.uint8).__array_interface__["data"][0]
gb, pb = c.GraphBlobAsNumpy(), c.PlanBlobAsNumpy()
out["align"] = [off(gb) % 8, off(pb) % 8]
st, gbytes = two_call(lib.hipdnnBackendGetSerializedBinaryGraph_ext, g)
st, pbytes = serialize_plan(p)
out["blobs"] = [gb.tobytes() == gbytes, pb.tobytes() == pbytes]
st, only = serialize_graph_and_plan(g, None)
out["graph_only"] = [st, contents(only)]
out["graph_only_plan"] = deserialize_plan(h, only)[0]
out["graph_only_msg"] = err()
sz = ffi.new("size_t*")
out["query"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(g, p, 0, sz, ffi.NULL)
buf = ffi.new("uint8_t[]", sz[0])
out["short"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(g, p, sz[0] - 1, sz, buf)
out["size_after_short"] = sz[0] == len(box)
out["null_size"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(g, p, 0, ffi.NULL, ffi.NULL)
out["null_graph"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(ffi.NULL, p, 0, sz, ffi.NULL)
out["stale_graph"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(
    ffi.cast("hipdnnBackendDescriptor_t", 0x7fff0000), p, 0, sz, ffi.NULL)
out["plan_as_graph"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(p, p, 0, sz, ffi.NULL)
out["graph_as_plan"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(g, g, 0, sz, ffi.NULL)
up = create(L.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
out["unfinalized_plan"] = lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(g, up, 0, sz, ffi.NULL)
# the container restores through the graph API too (graph_blob)
gp = ffi.new("hipdnnBackendDescriptor_t*")
out["graph_from_box"] = lib.hipdnnBackendCreateAndDeserializeGraph_ext(gp, ffi.new("uint8_t[]", box), len(box))
print(json.dumps(out))
""", dirs["c_sample"])
    assert r["align"] == [0, 0]
    assert r["blobs"] == [True, True]
    assert r["graph_only"] == [0, [0, 1]]
    assert r["graph_only_plan"] == BAD and "carries no execution plan" in r["graph_only_msg"]
    assert r["query"] == 0 and r["short"] == SIZE and r["size_after_short"]
    assert r["null_size"] == NULLPTR and r["null_graph"] == NULLPTR and r["stale_graph"] == NULLPTR
    assert r["plan_as_graph"] == BAD and r["graph_as_plan"] == BAD
    assert r["unfinalized_plan"] == NOTINIT
    assert r["graph_from_box"] == 0


def test_get_serialized_plan_statuses(dirs):
    r = py("""
h = handle()
g = add_graph(h)
p = first_plan(g)
out = {}
sz = ffi.new("size_t*")
F = lib.hipdnnBackendGetSerializedExecutionPlan_ext
out["null_desc"] = F(ffi.NULL, 0, sz, ffi.NULL)
out["stale"] = F(ffi.cast("hipdnnBackendDescriptor_t", 0x7fff0000), 0, sz, ffi.NULL)
out["not_plan"] = F(g, 0, sz, ffi.NULL)
out["not_plan_msg"] = err()
up = create(L.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
out["unfinalized"] = F(up, 0, sz, ffi.NULL)
out["null_size"] = F(p, 0, ffi.NULL, ffi.NULL)
sz[0] = 0
out["query"] = [F(p, 0, sz, ffi.NULL), sz[0] > 0]
n = sz[0]
buf = ffi.new("uint8_t[]", n)
sz[0] = 12345
out["short"] = [F(p, n - 1, sz, buf), sz[0] == n]
out["zero_req_with_buf"] = F(p, 0, sz, buf)
out["exact"] = F(p, n, sz, buf)
big = ffi.new("uint8_t[]", n + 64)
out["bigger"] = [F(p, n + 64, sz, big), sz[0] == n, bytes(ffi.buffer(big, n)) == bytes(ffi.buffer(buf, n))]
print(json.dumps(out))
""", dirs["c_sample"])
    assert r["null_desc"] == NULLPTR and r["stale"] == NULLPTR
    assert r["not_plan"] == BAD and "type mismatch" in r["not_plan_msg"]
    assert r["unfinalized"] == NOTINIT
    assert r["null_size"] == NULLPTR
    assert r["query"] == [0, True]
    assert r["short"] == [SIZE, True]          # *size is always set
    assert r["zero_req_with_buf"] == SIZE
    assert r["exact"] == 0 and r["bigger"] == [0, True, True]


def _envelope(**kw) -> bytes:
    """A SerializedExecutionPlan built field by field (None = field absent)."""
    import flatbuffers
    from hipdnn_cabi.schemas._generated import SerializedExecutionPlan as S
    b = flatbuffers.Builder(256)
    payload, uids = kw.get("payload"), kw.get("uids")
    pv = uv = None
    if payload is not None:
        S.StartPluginPayloadVector(b, len(payload))
        b.head -= len(payload)
        b.Bytes[b.head:b.head + len(payload)] = payload
        pv = b.EndVector()
    if uids is not None:
        S.StartTensorUidsVector(b, len(uids))
        for u in reversed(uids):
            b.PrependInt64(u)
        uv = b.EndVector()
    S.Start(b)
    if kw.get("version") is not None:
        S.AddVersion(b, kw["version"])
    if kw.get("engine_id") is not None:
        S.AddEngineId(b, kw["engine_id"])
    if kw.get("workspace") is not None:
        S.AddWorkspaceSize(b, kw["workspace"])
    if uv is not None:
        S.AddTensorUids(b, uv)
    if pv is not None:
        S.AddPluginPayload(b, pv)
    b.Finish(S.End(b))
    return bytes(b.Output())


def test_malformed_envelopes(dirs, tmp_path):
    """Each malformed envelope gives its documented status (docs/contracts.md)."""
    from hipdnn_cabi.backend.plugins.loader import fnv1a64
    from hipdnn_cabi.backend.serialization import build_container
    # a real payload, taken from a real plan
    r0 = py(f"""
h = handle(); p = first_plan(add_graph(h))
st, b = serialize_plan(p); ok(st)
open({str(tmp_path / 'plan.bin')!r}, 'wb').write(b)
print(json.dumps({{}}))
""", dirs["c_sample"])
    del r0
    from hipdnn_cabi.schemas._generated.SerializedExecutionPlan import SerializedExecutionPlan
    good = (tmp_path / "plan.bin").read_bytes()
    e = SerializedExecutionPlan.GetRootAs(good, 0)
    payload = e.PluginPayloadAsNumpy().tobytes()
    eid = fnv1a64(C_SAMPLE)
    base = dict(version=1, engine_id=eid, workspace=0, uids=[1, 2, 3], payload=payload)
    cases = {
        "good": (_envelope(**base), 0),
        "rebuilt_container": (build_container(b"", _envelope(**base)), 0),
        "version_missing": (_envelope(**{**base, "version": None}), NOTSUP),
        "version_2": (_envelope(**{**base, "version": 2}), NOTSUP),
        "payload_missing": (_envelope(**{**base, "payload": None}), BAD),
        "payload_empty": (_envelope(**{**base, "payload": b""}), BAD),
        "uids_missing": (_envelope(**{**base, "uids": None}), BAD),
        "uids_empty": (_envelope(**{**base, "uids": []}), BAD),
        "workspace_negative": (_envelope(**{**base, "workspace": -8}), BAD),
        "engine_missing": (_envelope(**{**base, "engine_id": None}), INTERNAL),
        "engine_unknown": (_envelope(**{**base, "engine_id": 42}), INTERNAL),
        "payload_corrupt": (_envelope(**{**base, "payload": b"XXXX" + payload[4:]}), PLUGIN),
        "payload_truncated": (_envelope(**{**base, "payload": payload[:20]}), PLUGIN),
        "garbage": (b"\x01\x02\x03\x04not a flatbuffer at all", BAD),
        "truncated_envelope": (good[: len(good) // 2], BAD),
        "container_corrupt": (b"\x08\x00\x00\x00HDGP" + b"\xff" * 24, BAD),
        "container_no_plan": (build_container(b"x" * 16, None), BAD),
        "tiny": (b"\x00", BAD),
    }
    for k, (blob, _) in cases.items():
        (tmp_path / f"{k}.bin").write_bytes(blob)
    r = py(f"""
import os
h = handle()
out = {{}}
for k in {list(cases)!r}:
    st, p = deserialize_plan(h, open(os.path.join({str(tmp_path)!r}, k + ".bin"), "rb").read())
    out[k] = [st, err() if st else ""]
    if st == 0:
        out[k].append(run_add(h, p))
d = ffi.new("hipdnnBackendDescriptor_t*")
buf = ffi.new("uint8_t[]", 8)
out["null_handle"] = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(ffi.NULL, d, buf, 8)
out["stale_handle"] = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(
    ffi.cast("hipdnnHandle_t", 0x7fff0000), d, buf, 8)
out["null_out"] = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h, ffi.NULL, buf, 8)
out["null_bytes"] = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h, d, ffi.NULL, 8)
out["zero_size"] = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h, d, buf, 0)
print(json.dumps(out))
""", dirs["c_sample"])
    for k, (_, want) in cases.items():
        assert r[k][0] == want, (k, r[k])
    assert r["good"][2] == [0, [11.0, 22.0, 33.0, 44.0]]
    assert "Invalid engine ID: 42" in r["engine_unknown"][1]
    assert "version 2" in r["version_2"][1]
    assert "negative workspace" in r["workspace_negative"][1]
    assert "create execution context from serialized data" in r["payload_corrupt"][1]
    assert r["null_handle"] == NULLPTR and r["stale_handle"] == NULLPTR
    assert r["null_out"] == NULLPTR and r["null_bytes"] == NULLPTR and r["zero_size"] == BAD


COUNTERS = """
import ctypes, glob
so = glob.glob(DIR + "/*.so")[0]
C = ctypes.CDLL(so)            # the same instance the host dlopened
def counters():
    a = (ctypes.c_long * 8)()
    C.ctplug_counters(a)
    return dict(zip(["ser", "destroy_ser", "deser", "exec", "destroy_ctx", "outstanding",
                     "ser_with_id", "ser_legacy"], a))
"""


def _plug_run(dirpath, body):
    return py(f"DIR = {dirpath!r}\n" + COUNTERS + body, dirpath)


def test_plugin_without_hooks_loads_but_cannot_serialize(ctplug):
    d = ctplug("nohooks", "NO_SERIALIZE")
    r = _plug_run(d, """
h = handle()
g = add_graph(h)
p = first_plan(g)
out = {"exec": run_add(h, p)[0]}
out["ser"] = serialize_plan(p)[0]
out["msg"] = err()
out["box"] = serialize_graph_and_plan(g, p)[0]
out["graph_only"] = serialize_graph_and_plan(g, None)[0]
out["counters"] = counters()
print(json.dumps(out))
""")
    assert r["exec"] == 0                            # the plugin loads and runs
    assert r["ser"] == NOTSUP and r["box"] == NOTSUP
    assert "does not support execution context serialization" in r["msg"]
    assert r["graph_only"] == 0
    assert r["counters"]["ser"] == 0


ROUND_TRIP = """
h = handle()
g = add_graph(h)
p = first_plan(g)
out = {}
st, data = serialize_plan(p); ok(st)
out["box"] = serialize_graph_and_plan(g, p)[0]
st, p2 = deserialize_plan(h, data); ok(st)
out["exec"] = run_add(h, p2)[0]
out["counters"] = counters()
print(json.dumps(out))
"""


@pytest.mark.parametrize("tag,define,hook", [
    ("legacy", "LEGACY_SERIALIZE_ONLY", "ser_legacy"),    # built before WithEngineId existed
    ("withid", "WITH_ID_ONLY", "ser_with_id"),
    ("both", None, "ser_with_id"),                        # both exported: WithEngineId wins
])
def test_each_save_hook_shape_round_trips(ctplug, tag, define, hook):
    """A plugin exporting only the legacy 3-argument save hook is serializable
    through it; a plugin exporting both is called through WithEngineId only."""
    d = ctplug(tag, *([define] if define else []))
    r = _plug_run(d, ROUND_TRIP)
    c = r["counters"]
    assert r["box"] == 0 and r["exec"] == 0, r
    other = "ser_legacy" if hook == "ser_with_id" else "ser_with_id"
    assert c[hook] == c["ser"] >= 1 and c[other] == 0, c
    assert c["deser"] == 1 and c["destroy_ser"] == c["ser"] and c["outstanding"] == 0, c


def test_host_copies_payload_then_destroys(ctplug):
    d = ctplug("good")
    r = _plug_run(d, """
h = handle()
p = first_plan(add_graph(h))
out = {}
st, data = serialize_plan(p); ok(st)
out["after_ser"] = counters()
st, p2 = deserialize_plan(h, data); ok(st)
out["ws"] = get_i64(p2, L.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)
out["exec"] = run_add(h, p2)[0]
out["before_destroy"] = counters()
ok(lib.hipdnnBackendDestroyDescriptor(p2))
import gc; gc.collect()
out["after_destroy"] = counters()
print(json.dumps(out))
""")
    c = r["after_ser"]
    # two-call pattern: size query + fill; each save followed by exactly one destroy
    assert c["ser"] >= 1 and c["destroy_ser"] == c["ser"] and c["outstanding"] == 0
    assert r["ws"] == [0, 64] and r["exec"] == 0
    assert r["before_destroy"]["deser"] == 1 and r["before_destroy"]["exec"] == 1
    assert r["after_destroy"]["destroy_ctx"] == r["before_destroy"]["destroy_ctx"] + 1


@pytest.mark.parametrize("tag,define,where,status,text", [
    ("failser", "FAIL_SERIALIZE", "ser", PLUGIN,
     "Failed to serialize execution context. Status: HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), "
     "Error: ctplug: serialization exploded"),
    ("emptypl", "EMPTY_PAYLOAD", "ser", PLUGIN, "empty or null payload"),
    ("faildestroy", "FAIL_DESTROY_SERIALIZED", "ser", PLUGIN,
     "Failed to destroy serialized execution context"),
    ("faildeser", "FAIL_DESERIALIZE", "deser", PLUGIN,
     "Failed to create execution context from serialized data. Status: "
     "HIPDNN_PLUGIN_STATUS_INVALID_VALUE(2), Error: ctplug: cannot restore this payload"),
    ("nullctx", "NULL_FROM_SERIALIZED", "deser", INTERNAL, "null execution context"),
])
def test_failing_plugin_callbacks(ctplug, tag, define, where, status, text):
    d = ctplug(tag, define)
    payload = bytes([ord("C"), ord("T"), ord("P"), ord("L"), 1, 0, 0, 0])
    env = _envelope(version=1, engine_id=_eid(tag), workspace=0, uids=[1, 2, 3], payload=payload)
    r = _plug_run(d, f"""
h = handle()
p = first_plan(add_graph(h))
out = {{}}
if {where!r} == "ser":
    st, data = serialize_plan(p)
else:
    st, p2 = deserialize_plan(h, {env!r})
out["st"] = st
out["msg"] = err()
out["counters"] = counters()
print(json.dumps(out))
""")
    assert r["st"] == status and text in r["msg"], r
    c = r["counters"]
    if where == "ser":
        assert c["destroy_ser"] == c["ser"] == 1   # destroy runs after a failed save as well
        assert c["outstanding"] == 0
    else:
        assert c["deser"] == 1


def _eid(tag):
    from hipdnn_cabi.backend.plugins.loader import fnv1a64
    return fnv1a64("CTPLUG_" + tag)


def test_envelope_layout(dirs, tmp_path):
    """The envelope is a SerializedExecutionPlan without file identifier, version 1, carrying
    engine id, workspace, graph tensor uids, the plugin payload (C sample header HCSP)."""
    from hipdnn_cabi.backend.plugins.loader import fnv1a64
    from hipdnn_cabi.schemas.verifier import verify
    py(f"""
h = handle(); p = first_plan(add_graph(h))
st, b = serialize_plan(p); ok(st)
open({str(tmp_path / 'p.bin')!r}, 'wb').write(b)
print(json.dumps({{}}))
""", dirs["c_sample"])
    data = (tmp_path / "p.bin").read_bytes()
    verify(data, "SerializedExecutionPlan")
    from hipdnn_cabi.schemas._generated.SerializedExecutionPlan import SerializedExecutionPlan
    e = SerializedExecutionPlan.GetRootAs(data, 0)
    assert e.Version() == 1 and e.EngineId() == fnv1a64(C_SAMPLE) and e.WorkspaceSize() == 0
    assert list(e.TensorUidsAsNumpy()) == [1, 2, 3]
    payload = e.PluginPayloadAsNumpy().tobytes()
    assert payload[:4] == b"HCSP" and struct.unpack_from("<HHI", payload, 4) == (1, 0, 1)
    assert data[4:8] != b"HDGP"
    assert not e.IsOverrideShapeEnabled()


def test_behaviour_note_details_helper():
    # sanity of the helper used by the notes tests: old shape has no behavior_notes field
    from hipdnn_cabi.backend import graph_fb
    assert "behavior_notes" not in graph_fb.read(details_bytes("X"), "EngineDetails")
    assert graph_fb.read(details_bytes("X", [4, 0]), "EngineDetails")["behavior_notes"] == [4, 0]


del os
