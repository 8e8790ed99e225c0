"""Plugin discovery and loading rules (spec §3.2–3.5, §6), each scenario in its own process."""
from __future__ import annotations

import os

from plugins_testlib import py

COUNT = """
def count(h):
    n = ffi.new("size_t*"); assert lib.hipdnnGetEngineCount_ext(h, n) == 0; return n[0]
def paths(h):
    n = ffi.new("size_t*"); m = ffi.new("size_t*")
    assert lib.hipdnnGetLoadedEnginePluginPaths_ext(h, n, ffi.NULL, m) == 0
    if n[0] == 0: return []
    bufs = [ffi.new("char[]", m[0]) for _ in range(n[0])]
    arr = ffi.new("char*[]", bufs)
    assert lib.hipdnnGetLoadedEnginePluginPaths_ext(h, n, arr, m) == 0
    return [ffi.string(b).decode() for b in bufs]
def names(h):
    out = []
    for i in range(count(h)):
        L = [ffi.new("size_t*") for _ in range(4)]; eid = ffi.new("int64_t*")
        assert lib.hipdnnGetEngineInfo_ext(h, i, eid, ffi.NULL, L[0], ffi.NULL, L[1], ffi.NULL, L[2], ffi.NULL, L[3]) == 0
        B = [ffi.new("char[]", x[0]) for x in L]
        assert lib.hipdnnGetEngineInfo_ext(h, i, eid, B[0], L[0], B[1], L[1], B[2], L[2], B[3], L[3]) == 0
        out.append([ffi.string(b).decode() for b in B] + [eid[0]])
    return out
def set_paths(ps, mode):
    keep = [ffi.new("char[]", p.encode()) for p in ps]
    arr = ffi.new("char*[]", keep) if ps else ffi.NULL
    return lib.hipdnnSetEnginePluginPaths_ext(len(ps), arr, mode)
"""


def test_directory_scan_and_engine_info(c_sample, mini):
    d = os.path.dirname(mini("a", dirname="two"))
    mini("b", dirname="two")
    open(os.path.join(d, "notaplugin.txt"), "w").write("x")
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    r = py(COUNT + """
h = create_handle()
print(json.dumps({"err": err(), "count": count(h), "paths": paths(h), "names": names(h)}))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert r["err"] == ""
    assert r["count"] == 2
    assert [os.path.basename(p) for p in r["paths"]] == ["libmini_a.so", "libmini_b.so"]
    assert [n[:4] for n in r["names"]] == [["MINI_a", "mini_a", "9.9.9", "HIPDNN_PLUGIN_TYPE_ENGINE"],
                                           ["MINI_b", "mini_b", "9.9.9", "HIPDNN_PLUGIN_TYPE_ENGINE"]]


def test_engine_info_api_errors(mini):
    d = os.path.dirname(mini("a"))
    r = py(COUNT + """
h = create_handle()
L = [ffi.new("size_t*") for _ in range(4)]
oob = lib.hipdnnGetEngineInfo_ext(h, 5, ffi.NULL, ffi.NULL, L[0], ffi.NULL, L[1], ffi.NULL, L[2], ffi.NULL, L[3])
oob_msg = err()
nul = lib.hipdnnGetEngineInfo_ext(h, 0, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, L[1], ffi.NULL, L[2], ffi.NULL, L[3])
eid = ffi.new("int64_t*")
byname = lib.hipdnnGetEngineIdByName_ext(h, b"MINI_a", eid)
empty = lib.hipdnnGetEngineIdByName_ext(h, b"", eid)
ln = ffi.new("size_t*")
q = lib.hipdnnGetEngineNameById_ext(h, eid[0], ffi.NULL, ln)
need = ln[0]
ln[0] = 3; small = lib.hipdnnGetEngineNameById_ext(h, eid[0], ffi.new("char[3]"), ln)
unknown = lib.hipdnnGetEngineNameById_ext(h, 12345, ffi.NULL, ln)
pc = ffi.new("size_t*")
polc = lib.hipdnnGetHeuristicPolicyCount_ext(h, pc)
poli = lib.hipdnnGetHeuristicPolicyInfo_ext(h, 0, ffi.NULL, ffi.NULL, L[0], ffi.NULL, L[1], ffi.NULL, L[2], ffi.NULL, L[3])
print(json.dumps(dict(oob=oob, oob_msg=oob_msg, nul=nul, byname=byname, empty=empty, q=q, need=need,
                      small=small, unknown=unknown, polc=polc, pc=pc[0], poli=poli)))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert r["oob"] == 2 and r["oob_msg"] == "Engine index 5 out of range (1 engines loaded)."
    assert r["nul"] == 3
    assert r["byname"] == 0 and r["empty"] == 8
    assert r["q"] == 0 and r["need"] == len("MINI_a") + 1 and r["small"] == 2 and r["unknown"] == 8
    # the two built-in policies are enumerated (docs/plugins.md "Heuristic plugins")
    assert r["polc"] == 0 and r["pc"] == 2 and r["poli"] == 0


def test_missing_required_symbol_is_refused(mini):
    d = os.path.dirname(mini("nn", "NO_GET_NAME"))
    r = py(COUNT + """
h = ffi.new("hipdnnHandle_t*")
st = lib.hipdnnCreate(h)
print(json.dumps({"st": st, "err": err(), "count": count(h[0]), "paths": paths(h[0])}))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert r["st"] == 0 and r["count"] == 0 and r["paths"] == []
    assert r["err"].startswith("Error loading plugin from [")
    assert "Failed to get symbol: hipdnnPluginGetName" in r["err"]


def test_api_version_rules(mini):
    noapi = mini("noapi", "NO_API_VERSION", dirname="v")
    mini("v2", 'API_VERSION="2.0.0"', dirname="v")
    mini("bad", 'API_VERSION="one.two"', dirname="v")
    mini("v0", 'API_VERSION="0.9.0"', dirname="v")
    r = py(COUNT + """
import io
h = ffi.new("hipdnnHandle_t*")
st = lib.hipdnnCreate(h)
g10 = standin_graph(h[0], version=(1, 0, 0))
g11 = standin_graph(h[0], version=(1, 1, 0))
s10, c10 = heuristic_configs(g10)
s11, c11 = heuristic_configs(g11)
print(json.dumps({"st": st, "names": [n[0] for n in names(h[0])],
                  "n10": len(c10), "n11": len(c11), "s11": s11}))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(noapi)})
    assert r["st"] == 0
    # v2 (major 2) and bad (unparsable) are rejected; noapi (1.0.0) and v0 (transitional) load
    assert sorted(r["names"]) == ["MINI_noapi", "MINI_v0"]
    assert r["n10"] == 1  # 0.9.0 < 1.0.0: loaded, but filtered out for every graph
    assert r["n11"] == 0 and r["s11"] == 0  # nobody reaches 1.1.0: filtered, empty results


def test_api_version_rejection_messages(mini):
    v2 = mini("v2", 'API_VERSION="2.0.0"', dirname="v2only")
    bad = mini("bad", 'API_VERSION="x"', dirname="badonly")
    for so, needle in ((v2, "ENGINE PLUGIN ABI VALIDATION FAILED"), (bad, "reports an unparseable API version ('x')")):
        r = py("""
h = ffi.new("hipdnnHandle_t*")
print(json.dumps({"st": lib.hipdnnCreate(h), "err": err()}))
""", {"HIPDNN_PLUGIN_DIR": so})
        assert r["st"] == 0 and needle in r["err"] and so in r["err"]


def test_duplicate_engine_ids_first_wins(mini):
    # two different files declaring the same engine (same tag → same name → same id)
    a = mini("dup", dirname="dupdir")
    b_dir = os.path.dirname(a)
    import shutil
    shutil.copy(a, os.path.join(b_dir, "libmini_dup2.so"))
    r = py(COUNT + """
h = create_handle()
print(json.dumps({"count": count(h), "paths": paths(h)}))
""", {"HIPDNN_PLUGIN_DIR": b_dir})
    assert r["count"] == 1 and len(r["paths"]) == 2


def test_engine_name_rules(mini):
    d = os.path.dirname(mini("hx", "NO_ENGINE_NAME", dirname="names"))
    mini("badhash", "BAD_NAME_HASH", dirname="names")
    r = py(COUNT + """
h = create_handle()
print(json.dumps({"names": names(h), "paths": paths(h)}))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert len(r["paths"]) == 2           # the bad-hash plugin stays loaded...
    assert len(r["names"]) == 1           # ...but its engine is dropped
    name, eid = r["names"][0][0], r["names"][0][4]
    assert name == "0x%016X" % (eid & (2**64 - 1))


def test_failing_plugin_call_propagates(mini):
    d = os.path.dirname(mini("fail", "FAIL_APPLICABLE"))
    r = py("""
h = create_handle()
g = standin_graph(h)
st, cfgs = heuristic_configs(g)
print(json.dumps({"st": st, "err": err()}))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert r["st"] == 14
    assert r["err"] == ("Failed to get applicable engine IDs. Status: HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), "
                        "Error: mini: applicability check exploded")


def test_failing_execute_propagates(mini):
    d = os.path.dirname(mini("fx", "FAIL_EXECUTE"))
    r = py("""
h = create_handle()
g = standin_graph(h)
st, cfgs = heuristic_configs(g)
assert lib.hipdnnBackendFinalize(cfgs[0]) == 0
st, p = plan_for(cfgs[0])
x = ffi.new("float[4]")
a = int(ffi.cast("uintptr_t", x))
vp = variant_pack([1, 2, 3], [a, a, a])
print(json.dumps({"st": lib.hipdnnBackendExecute(h, p, vp), "err": err()}))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert r["st"] == 14
    assert r["err"] == ("Failed to execute op graph. Status: HIPDNN_PLUGIN_STATUS_BAD_PARAM(1), "
                        "Error: mini: execution refused")


def test_set_paths_modes_and_name_resolution(mini):
    a = mini("pa", dirname="pa")
    b = mini("pb", dirname="pb")
    r = py(COUNT + f"""
out = {{}}
out["null"] = lib.hipdnnSetEnginePluginPaths_ext(1, ffi.NULL, 0)
# name without extension resolves to lib<name>.so in the same directory
out["set"] = set_paths([{os.path.join(os.path.dirname(b), "mini_pb")!r}], 1)
h = create_handle()
out["abs"] = [n[0] for n in names(h)]
out["same"] = set_paths([{os.path.join(os.path.dirname(b), "mini_pb")!r}], 1)
out["live"] = set_paths([{a!r}], 1)
lib.hipdnnDestroy(h)
out["after"] = set_paths([{a!r}], 0)
h = create_handle()
out["add"] = sorted(n[0] for n in names(h))
lib.hipdnnDestroy(h)
out["bad_ext"] = set_paths(["/tmp/whatever.txt"], 1)
h = ffi.new("hipdnnHandle_t*"); lib.hipdnnCreate(h)
out["ext_err"] = err()
lib.hipdnnDestroy(h[0])
set_paths(["/nonexistent/dir/mini_zz"], 1)
h = ffi.new("hipdnnHandle_t*"); lib.hipdnnCreate(h)
out["missing_err"] = err()
out["unload_bad"] = lib.hipdnnSetPluginUnloadMode_ext(99)
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(a)})
    assert r["null"] == 3 and r["set"] == 0
    assert r["abs"] == ["MINI_pb"]          # ABSOLUTE: HIPDNN_PLUGIN_DIR not searched
    assert r["same"] == 0 and r["live"] == 8 and r["after"] == 0
    assert r["add"] == ["MINI_pa", "MINI_pb"]  # ADDITIVE: env dir ∪ stored paths
    assert "Invalid file extension. Expected .so" in r["ext_err"]
    assert "plugin file does not exist" in r["missing_err"] and "libmini_zz.so" in r["missing_err"]
    assert r["unload_bad"] == 2


def test_unload_modes(mini):
    d = os.path.dirname(mini("un"))
    r = py("""
def mapped():
    return "libmini_un.so" in open("/proc/self/maps").read()
out = {}
h = create_handle(); lib.hipdnnDestroy(h)
out["lazy"] = mapped()
out["eager_now"] = (lib.hipdnnSetPluginUnloadMode_ext(1), mapped())
h = create_handle(); out["eager_live"] = mapped(); lib.hipdnnDestroy(h)
out["eager_after"] = mapped()
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": d})
    assert r["lazy"] is True
    assert r["eager_now"] == [0, False]
    assert r["eager_live"] is True and r["eager_after"] is False


def test_unknown_paths_mode_loads_only_the_stored_paths(mini):
    a = mini("um_a", dirname="um_a")
    b = mini("um_b", dirname="um_b")
    r = py(COUNT + f"""
out = {{"set": set_paths([{b!r}], 7)}}
h = create_handle()
out["names"] = [n[0] for n in names(h)]
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(a)})
    assert r == {"set": 0, "names": ["MINI_um_b"]}  # stored like ADDITIVE, loaded with no default dir
