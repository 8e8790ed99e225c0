"""Misbehaving plugins built from the small C files in tests/plugins/broken/ (spec §3.5, §3.7–3.9),
hipdnnSetStream forwarding, FIND_FIRST over two plugins, engine-info sorting and the loaded-paths
two-call (spec §6).  Each scenario runs in its own process."""
from __future__ import annotations

import os
import shutil

import pytest

from plugins_testlib import py

CREATE = """
h = ffi.new("hipdnnHandle_t*")
st = lib.hipdnnCreate(h)
n = ffi.new("size_t*")
lib.hipdnnGetEngineCount_ext(h[0], n)
m = ffi.new("size_t*")
lib.hipdnnGetLoadedEnginePluginPaths_ext(h[0], m, ffi.NULL, ffi.new("size_t*"))
print(json.dumps({"st": st, "err": err(), "engines": n[0], "plugins": m[0]}))
"""


@pytest.mark.parametrize("src, needle", [
    ("wrong_type.c", "Wrong plugin type: expected HIPDNN_PLUGIN_TYPE_ENGINE, got HIPDNN_PLUGIN_TYPE_HEURISTIC"),
    ("no_engines.c", "No engines found in the plugin"),
    ("dup_ids.c", "Duplicate engine IDs found"),
    ("count_changes.c", "Number of engines returned does not match the number reported by the plugin"),
    ("no_set_stream.c", "Failed to get symbol: hipdnnEnginePluginSetStream"),
])
def test_refused_at_load(mini, src, needle):
    so = mini("r_" + src[:-2], src=src)
    r = py(CREATE, {"HIPDNN_PLUGIN_DIR": os.path.dirname(so)})
    assert r["st"] == 0 and r["engines"] == 0 and r["plugins"] == 0
    assert r["err"].startswith(f"Error loading plugin from [{so}]: "), r["err"]
    assert needle in r["err"]


def test_refused_plugin_does_not_stop_the_others(mini):
    mini("aa_good", dirname="mixed")
    so = mini("bb_bad", dirname="mixed", src="no_engines.c")
    r = py(CREATE, {"HIPDNN_PLUGIN_DIR": os.path.dirname(so)})
    assert r["st"] == 0 and r["engines"] == 1 and r["plugins"] == 1
    assert r["err"].startswith(f"Error loading plugin from [{so}]: ")


HEUR = """
hh = create_handle()
g = standin_graph(hh)
st, cfgs = heuristic_configs(g)
print(json.dumps({"st": st, "err": err()}))
"""


@pytest.mark.parametrize("src, msg", [
    ("unknown_applicable.c", "Engine ID not found in the plugin's known IDs"),
    ("too_many_applicable.c", "More applicable engines than expected"),
])
def test_bad_applicability_answers(mini, src, msg):
    so = mini("a_" + src[:-2], src=src)
    r = py(HEUR, {"HIPDNN_PLUGIN_DIR": os.path.dirname(so)})
    assert r == {"st": 14, "err": msg}


def test_null_engine_details(mini):
    so = mini("nd", src="null_details.c")
    r = py("""
from hipdnn_cabi.backend.plugins.loader import fnv1a64
hh = create_handle()
g = standin_graph(hh)
e = desc(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
set_attr(e, A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [g])
eid = fnv1a64("MINI_nd")
set_attr(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64, "int64_t", [eid])
print(json.dumps({"st": lib.hipdnnBackendFinalize(e), "err": err(), "eid": eid}))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(so)})
    assert r["st"] == 14
    assert r["err"] == f"Engine details for engine ID {r['eid']} are empty or null"


def test_null_plugin_handle_leaves_plugin_unused(mini):
    so = mini("nh", src="null_handle.c")
    r = py("""
hh = create_handle()
n = ffi.new("size_t*")
lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, ffi.NULL, ffi.new("size_t*"))
g = standin_graph(hh)
st, cfgs = heuristic_configs(g)
print(json.dumps({"paths": n[0], "st": st, "cfgs": len(cfgs), "destroy": lib.hipdnnDestroy(hh)}))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(so)})
    # the plugin stays loaded (listed, as hipDNN lists its manager's files) but unused here
    assert r == {"paths": 1, "st": 0, "cfgs": 0, "destroy": 0}


def test_set_stream_reaches_every_plugin(mini):
    a = mini("sa", dirname="streams", src="record_stream.c")
    mini("sb", dirname="streams", src="record_stream.c")
    r = py("""
from hipdnn_cabi.backend.plugins.loader import fnv1a64
hh = create_handle()
g = standin_graph(hh)
st, cfgs = heuristic_configs(g)
assert st == 0 and len(cfgs) == 2, (st, err())
assert [lib.hipdnnBackendFinalize(c) for c in cfgs] == [0, 0]
out = {}
def run_all():
    res = {}
    for c in cfgs:
        st, p = plan_for(c)
        assert st == 0, err()
        buf = ffi.new("int64_t[2]", [-1, -1])
        a = int(ffi.cast("uintptr_t", buf))
        vp = variant_pack([1, 2, 3], [a, a, a])
        assert lib.hipdnnBackendExecute(hh, p, vp) == 0, err()
        res[engine_id_of_cfg(c)] = list(buf)
    return sorted(res.values())
out["before"] = run_all()          # SetStream is never called at handle creation
out["set"] = lib.hipdnnSetStream(hh, ffi.cast("hipStream_t", 0x5000))
out["after"] = run_all()
out["again"] = lib.hipdnnSetStream(hh, ffi.cast("hipStream_t", 0x6000))
out["after2"] = run_all()
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(a)})
    assert r["before"] == [[0, 0], [0, 0]]
    assert r["set"] == 0 and r["after"] == [[0x5000, 1], [0x5000, 1]]
    assert r["again"] == 0 and r["after2"] == [[0x6000, 2], [0x6000, 2]]


def test_set_stream_plugin_failure(mini):
    so = mini("fs", src="fail_set_stream.c")
    r = py("""
hh = create_handle()
st = lib.hipdnnSetStream(hh, ffi.cast("hipStream_t", 0x7000))
msg = err()
s = ffi.new("hipStream_t*")
lib.hipdnnGetStream(hh, s)
print(json.dumps({"st": st, "err": msg, "stored": int(ffi.cast("uintptr_t", s[0]))}))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(so)})
    assert r["st"] == 14
    assert r["err"] == ("Failed to set stream for engine plugin handle. Status: "
                        "HIPDNN_PLUGIN_STATUS_INVALID_VALUE(2), Error: mini: no such stream")
    assert r["stored"] == 0x7000  # the stream is stored before the plugins are told


def test_find_first_stops_at_first_plugin(mini):
    d = os.path.dirname(mini("f1", dirname="ff"))
    mini("f2", dirname="ff")
    r = py("""
hh = create_handle()
g = standin_graph(hh)
ids = lambda cfgs: [lib.hipdnnBackendFinalize(c) or engine_id_of_cfg(c) for c in cfgs]
out = {"all": ids(heuristic_configs(g)[1]), "ff": ids(heuristic_configs(g, find_first=True)[1]),
       "ff_off": ids(heuristic_configs(g, find_first=False)[1])}
hd = desc(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [g])
set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, "int", [0])
set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_FIND_FIRST_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True])
lib.hipdnnBackendFinalize(hd)
v = ffi.new("bool[1]"); c = ffi.new("int64_t*")
out["get_ff"] = [lib.hipdnnBackendGetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_FIND_FIRST_EXT, T.HIPDNN_TYPE_BOOLEAN, 1, c, v), bool(v[0])]
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": d})
    from hipdnn_cabi.backend.plugins.loader import fnv1a64
    f1, f2 = fnv1a64("MINI_f1"), fnv1a64("MINI_f2")
    assert r["all"] == [f1, f2] and r["ff_off"] == [f1, f2]
    assert r["ff"] == [f1]  # plugins in sorted path order; libmini_f1.so first
    assert r["get_ff"] == [0, True]


def test_engine_info_sorted_by_name_then_id(mini, tmp_path):
    # file order (a_, b_, c_) differs from name order: MINI_zz > MINI_mm > 0x… (no GetEngineName)
    d = tmp_path / "sorted"
    d.mkdir()
    for new, (tag, defs) in {"liba_first.so": ("zz", ()), "libb_second.so": ("mm", ()),
                             "libc_third.so": ("hx", ("NO_ENGINE_NAME",))}.items():
        shutil.copy(mini(tag, *defs, dirname="srt_" + tag), d / new)
    r = py("""
hh = create_handle()
n = ffi.new("size_t*"); lib.hipdnnGetEngineCount_ext(hh, n)
out = []
for i in range(n[0]):
    L = [ffi.new("size_t*") for _ in range(4)]; eid = ffi.new("int64_t*")
    assert lib.hipdnnGetEngineInfo_ext(hh, i, eid, ffi.NULL, L[0], ffi.NULL, L[1], ffi.NULL, L[2], ffi.NULL, L[3]) == 0
    B = [ffi.new("char[]", x[0]) for x in L]
    small = ffi.new("size_t*", L[1][0] - 1)
    assert lib.hipdnnGetEngineInfo_ext(hh, i, eid, B[0], L[0], B[1], small, B[2], L[2], B[3], L[3]) == 2
    assert lib.hipdnnGetEngineInfo_ext(hh, i, eid, B[0], L[0], B[1], L[1], B[2], L[2], B[3], L[3]) == 0
    out.append([ffi.string(B[0]).decode(), ffi.string(B[1]).decode(), eid[0]])
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": str(d)})
    assert [x[1] for x in r] == ["mini_hx", "mini_mm", "mini_zz"]
    assert r[0][0].startswith("0x") and [x[0] for x in r[1:]] == ["MINI_mm", "MINI_zz"]


def test_loaded_paths_two_call_rules(mini):
    d = os.path.dirname(mini("p1", dirname="lp"))
    mini("p22", dirname="lp")
    r = py("""
out = {}
hh = create_handle()
n = ffi.new("size_t*"); m = ffi.new("size_t*")
out["null_n"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, ffi.NULL, ffi.NULL, m)
out["null_m"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, ffi.NULL, ffi.NULL)
out["null_h"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(ffi.NULL, n, ffi.NULL, m)
out["query"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, ffi.NULL, m)
cnt, need = n[0], m[0]
out["cnt"], out["need"] = cnt, need
bufs = [ffi.new("char[]", need) for _ in range(cnt)]
arr = ffi.new("char*[]", bufs)
n[0] = cnt - 1; out["few"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, arr, m)
n[0] = cnt; m[0] = need - 1; out["short"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, arr, m)
m[0] = need
arr2 = ffi.new("char*[]", [bufs[0], ffi.NULL])
out["null_entry"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, arr2, m)
n[0] = cnt + 3
out["fetch"] = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, arr, m)
out["n_after"] = n[0]
out["paths"] = [ffi.string(b).decode() for b in bufs]
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert r["null_n"] == 3 and r["null_m"] == 3 and r["null_h"] == 3 and r["query"] == 0
    assert r["cnt"] == 2 and r["need"] == max(len(p) for p in r["paths"]) + 1
    assert r["few"] == 2 and r["short"] == 2 and r["null_entry"] == 2
    assert r["fetch"] == 0 and r["n_after"] == 2
    assert r["paths"] == sorted(r["paths"]) and all(os.path.isabs(p) for p in r["paths"])
    assert [os.path.basename(p) for p in r["paths"]] == ["libmini_p1.so", "libmini_p22.so"]


def test_loaded_paths_without_plugins(tmp_path):
    r = py("""
hh = create_handle()
n = ffi.new("size_t*", 7); m = ffi.new("size_t*", 7)
st = lib.hipdnnGetLoadedEnginePluginPaths_ext(hh, n, ffi.NULL, m)
print(json.dumps([st, n[0], m[0]]))
""", {"HIPDNN_PLUGIN_DIR": str(tmp_path), "HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS": "1"})
    assert r == [0, 0, 0]
