"""Heuristics → config → plan → variant pack → execute on the C sample plugin (stand-in graph),
plus the descriptor and execute misuse rules (spec §1.6–1.10, §4.1)."""
from __future__ import annotations

from plugins_testlib import py

SETUP = """
from hipdnn_cabi.backend import registry
addr = lambda c: int(ffi.cast("uintptr_t", c))
h = create_handle()
g = standin_graph(h)
st, cfgs = heuristic_configs(g)
assert st == 0 and len(cfgs) == 1, (st, err())
"""


def test_end_to_end_numbers(c_sample):
    r = py(SETUP + """
out = {}
out["cfg_fin"] = lib.hipdnnBackendFinalize(cfgs[0])
out["eid"] = engine_id_of_cfg(cfgs[0])
st, p = plan_for(cfgs[0])
out["plan"] = st
out["ws"] = get_i64(p, A.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)
n = ffi.new("int64_t*")
lib.hipdnnBackendGetAttribute(p, A.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT, T.HIPDNN_TYPE_INT64, 0, n, ffi.NULL)
out["nuids"] = n[0]
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [10, 20, 30, 40]); y = ffi.new("float[4]")
vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
out["exec"] = lib.hipdnnBackendExecute(h, p, vp)
out["y"] = list(y)
out["again"] = [lib.hipdnnBackendExecute(h, p, vp) for _ in range(3)]
out["destroy"] = [lib.hipdnnBackendDestroyDescriptor(p), lib.hipdnnBackendDestroyDescriptor(vp),
                  lib.hipdnnBackendDestroyDescriptor(cfgs[0]), lib.hipdnnDestroy(h)]
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["cfg_fin"] == 0 and r["plan"] == 0 and r["ws"][0] == 0
    assert r["nuids"] == 3
    assert r["exec"] == 0 and r["y"] == [11.0, 22.0, 33.0, 44.0]
    assert r["again"] == [0, 0, 0] and r["destroy"] == [0, 0, 0, 0]


def test_engine_descriptor(c_sample):
    r = py(SETUP + """
from hipdnn_cabi.backend.descriptors.engine import RANGE_MSG
out = {}
def engine(eid):
    e = desc(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
    set_attr(e, A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [g])
    set_attr(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64, "int64_t", [eid])
    return e, lib.hipdnnBackendFinalize(e)
lib.hipdnnBackendFinalize(cfgs[0])
eid = engine_id_of_cfg(cfgs[0])
e, st = engine(eid)
out["ok"] = st
bad, st = engine(42)
out["bad"] = (st, err() == RANGE_MSG)
out["refin"] = lib.hipdnnBackendFinalize(e)
n = ffi.new("int64_t*")
out["name_q"] = lib.hipdnnBackendGetAttribute(e, A.HIPDNN_ATTR_ENGINE_NAME_EXT, T.HIPDNN_TYPE_CHAR, 0, n, ffi.NULL)
buf = ffi.new("char[]", n[0])
lib.hipdnnBackendGetAttribute(e, A.HIPDNN_ATTR_ENGINE_NAME_EXT, T.HIPDNN_TYPE_CHAR, n[0], n, buf)
out["name"] = ffi.string(buf).decode()
out["notes_q"] = lib.hipdnnBackendGetAttribute(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE, 0, n, ffi.NULL)
out["notes_n"] = n[0]
out["knobs_q"] = lib.hipdnnBackendGetAttribute(e, A.HIPDNN_ATTR_ENGINE_KNOB_INFO, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, n, ffi.NULL)
out["knobs_n"] = n[0]
out["set_ro"] = set_attr(e, A.HIPDNN_ATTR_ENGINE_KNOB_INFO, T.HIPDNN_TYPE_INT64, "int64_t", [1])
e2 = desc(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
out["get_unfin"] = get_i64(e2, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX)[0]
out["fin_empty"] = lib.hipdnnBackendFinalize(e2)
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["ok"] == 0
    assert r["bad"] == [2, True]
    assert r["refin"] == 2
    assert r["name"] == "HIPDNN_CABI_C_SAMPLE_ENGINE"
    assert r["notes_q"] == 0 and r["knobs_q"] == 0
    assert r["set_ro"] == 1  # finalized first → NOT_INITIALIZED
    assert r["get_unfin"] == 1 and r["fin_empty"] == 2


def test_heuristic_rules(c_sample):
    r = py(SETUP + """
from hipdnn_cabi.backend.plugins.loader import fnv1a64
import os
out = {}
hd = desc(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
n = ffi.new("int64_t*")
out["unfin_get"] = lib.hipdnnBackendGetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, n, ffi.NULL)
out["fin_nograph"] = lib.hipdnnBackendFinalize(hd)
out["mode_bad"] = set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, "int", [7])
out["ff"] = len(heuristic_configs(g, find_first=True)[1])
out["static_only"] = len(heuristic_configs(g, policy=[fnv1a64("SelectionHeuristic::StaticOrdering")])[1])
out["none"] = heuristic_configs(g, policy=[fnv1a64("SelectionHeuristic::Config")])[0]
out["none_msg"] = err()
os.environ["HIPDNN_HEUR_FALLBACK_ENGINE_ORDER"] = "NO_SUCH_ENGINE"
out["fallback_nomatch"] = heuristic_configs(g)[0]
os.environ["HIPDNN_HEUR_FALLBACK_ENGINE_ORDER"] = "HIPDNN_CABI_C_SAMPLE_ENGINE"
out["fallback_match"] = len(heuristic_configs(g)[1])
# RESULTS with a NULL array and req > 0 is NULLPTR; a wrong kind is BAD
h2 = desc(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
set_attr(h2, A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [g])
set_attr(h2, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, "int", [0])
lib.hipdnnBackendFinalize(h2)
out["null_arr"] = lib.hipdnnBackendGetAttribute(h2, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 2, n, ffi.NULL)
wrong = ffi.new("hipdnnBackendDescriptor_t[]", [desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)])
out["wrong_kind"] = lib.hipdnnBackendGetAttribute(h2, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, n, wrong)
out["wrong_msg"] = err()
out["pol_q"] = (lib.hipdnnBackendGetAttribute(h2, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, 0, n, ffi.NULL), n[0])
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["unfin_get"] == 4 and r["fin_nograph"] == 2 and r["mode_bad"] == 8
    assert r["ff"] == 1 and r["static_only"] == 1
    assert r["none"] == 9 and "No heuristic policy succeeded." in r["none_msg"]
    assert r["fallback_nomatch"] == 9 and r["fallback_match"] == 1
    assert r["null_arr"] == 3 and r["wrong_kind"] == 2
    assert r["wrong_msg"] == "Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch."
    assert r["pol_q"] == [0, 2]


def test_execute_checks(c_sample):
    r = py(SETUP + """
out = {}
lib.hipdnnBackendFinalize(cfgs[0])
st, p = plan_for(cfgs[0])
x = ffi.new("float[8]")
a = addr(x)
vp = variant_pack([1, 2, 3], [a, a, a])
unfin = desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
out["null_handle"] = lib.hipdnnBackendExecute(ffi.NULL, p, vp)
out["null_plan"] = lib.hipdnnBackendExecute(h, ffi.NULL, vp)
out["swapped"] = lib.hipdnnBackendExecute(h, vp, p)
out["swapped_msg"] = err()
out["unfin_vp"] = lib.hipdnnBackendExecute(h, p, unfin)
out["unfin_plan"] = lib.hipdnnBackendExecute(h, desc(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR), vp)
mis = variant_pack([1, 2, 3], [a + 4, a, a])
out["misaligned"] = lib.hipdnnBackendExecute(h, p, mis)
out["misaligned_msg"] = err()
ovr = desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
set_attr(ovr, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*", [ffi.cast("void*", a)] * 3)
set_attr(ovr, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [1, 2, 3])
set_attr(ovr, A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS_EXT, T.HIPDNN_TYPE_INT64, "int64_t", [1])
lib.hipdnnBackendFinalize(ovr)
out["override_not_enabled"] = lib.hipdnnBackendExecute(h, p, ovr)
vpm = desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
set_attr(vpm, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [1, 2])
out["vp_mismatch_fin"] = lib.hipdnnBackendFinalize(vpm)
out["vp_null_ws"] = lib.hipdnnBackendSetAttribute(vpm, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR, 1, ffi.NULL)
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["null_handle"] == 3 and r["null_plan"] == 3
    assert r["swapped"] == 2
    assert r["swapped_msg"] == "Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch."
    assert r["unfin_vp"] == 2 and r["unfin_plan"] == 2
    assert r["misaligned"] == 2
    assert r["misaligned_msg"] == "Tensor uid 1 device pointer is not aligned to the required 16 bytes"
    assert r["override_not_enabled"] == 8
    assert r["vp_mismatch_fin"] == 2 and r["vp_null_ws"] == 3


def test_plan_destroys_context_and_handle_close(c_sample):
    # destroying everything in any order must not crash (contexts/details die with their owners)
    r = py(SETUP + """
lib.hipdnnBackendFinalize(cfgs[0])
plans = [plan_for(cfgs[0])[1] for _ in range(5)]
for p in plans[:2]:
    lib.hipdnnBackendDestroyDescriptor(p)
st = lib.hipdnnDestroy(h)
for p in plans[2:]:
    lib.hipdnnBackendDestroyDescriptor(p)
import gc; gc.collect()
print(json.dumps({"st": st}))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["st"] == 0


def test_python_threads_share_plugins(c_sample):
    r = py(SETUP + """
import threading
lib.hipdnnBackendFinalize(cfgs[0])
errors = []
def work(k):
    try:
        hh = create_handle()
        gg = standin_graph(hh)
        st, cc = heuristic_configs(gg)
        assert st == 0 and lib.hipdnnBackendFinalize(cc[0]) == 0
        st, p = plan_for(cc[0]); assert st == 0
        x = ffi.new("float[4]", [k] * 4); b = ffi.new("float[4]", [1] * 4); y = ffi.new("float[4]")
        vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
        for _ in range(50):
            assert lib.hipdnnBackendExecute(hh, p, vp) == 0
        assert list(y) == [k + 1.0] * 4
        lib.hipdnnBackendDestroyDescriptor(p); lib.hipdnnBackendDestroyDescriptor(vp)
        lib.hipdnnDestroy(hh)
    except BaseException as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({"errors": errors}))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["errors"] == []


def test_set_stream_forwarded_and_handle_lifecycle(c_sample):
    r = py("""
h = create_handle()
st = lib.hipdnnSetStream(h, ffi.cast("hipStream_t", 0x1000))
s = ffi.new("hipStream_t*")
lib.hipdnnGetStream(h, s)
out = {"set": st, "get": int(ffi.cast("uintptr_t", s[0]))}
from hipdnn_cabi.backend import registry
hp = registry.objects[hid(h)].plugins
out["plugin_handles"] = len(hp.entries)
out["destroy"] = lib.hipdnnDestroy(h)
out["closed"] = hp.closed
h2 = create_handle(); h3 = create_handle()
out["two"] = [lib.hipdnnDestroy(h2), lib.hipdnnDestroy(h3)]
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r == {"set": 0, "get": 0x1000, "plugin_handles": 1, "destroy": 0, "closed": True,
                 "two": [0, 0]}


def test_execute_with_override_shapes(c_sample):
    # §4.1 override checks in order, then ExecuteOpGraphWithOverrides on the C sample plugin (1.1.0)
    r = py("""
addr = lambda c: int(ffi.cast("uintptr_t", c))
h = create_handle()
g = standin_graph(h, override=True)
st, cfgs = heuristic_configs(g)
assert st == 0 and len(cfgs) == 1, (st, err())
lib.hipdnnBackendFinalize(cfgs[0])
st, p = plan_for(cfgs[0])
assert st == 0, err()
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [10, 20, 30, 40]); y = ffi.new("float[4]", [-1] * 4)
def pack(ouids, lengths, shapes, strides):
    vp = desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    set_attr(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*", [x, b, y])
    set_attr(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [1, 2, 3])
    for name, vals in ((A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS_EXT, ouids),
                       (A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_LENGTHS_EXT, lengths),
                       (A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES_EXT, shapes),
                       (A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_STRIDES_EXT, strides)):
        assert set_attr(vp, name, T.HIPDNN_TYPE_INT64, "int64_t", vals) == 0, err()
    assert lib.hipdnnBackendFinalize(vp) == 0
    return vp
E = lambda vp: lib.hipdnnBackendExecute(h, p, vp)
out = {}
# the first two elements only: x, b, y all viewed as [1, 2]
out["ok"] = E(pack([1, 2, 3], [2, 2, 2], [1, 2] * 3, [2, 1] * 3))
out["y"] = list(y)
out["uids_vs_lengths"] = E(pack([1, 2], [2], [1, 2], [2, 1]))
out["zero_length"] = E(pack([1], [0], [1], [1]))
out["too_long"] = E(pack([1], [2**32], [1], [1]))
out["flat_mismatch"] = E(pack([1], [2], [1, 2, 3], [2, 1]))
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["ok"] == 0 and r["y"] == [11.0, 22.0, -1.0, -1.0]
    assert r["uids_vs_lengths"] == 2 and r["zero_length"] == 5 and r["too_long"] == 5
    assert r["flat_mismatch"] == 2
