"""Autotuning through the C API (docs/plugins.md "Autotune cache", "Profiling control"):
PROFILING_CONTROL_EXT times an execute; hipdnnBackendWriteEngineRankingResults_ext stores the
measured ranking; SelectionHeuristic::Config returns it for the same graph and device, across
processes; every outcome; a corrupt database is rewritten; concurrent writers."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from plugins_testlib import ROOT, py

from hipdnn_cabi.backend.plugins.loader import fnv1a64

SLOW, FAST = fnv1a64("MIOPEN_ENGINE"), fnv1a64("MINI_fast")
WRITTEN, DISABLED, UNKEYABLE, NO_ENGINES, UNCHANGED = 0, 1, 2, 3, 4


@pytest.fixture(scope="module")
def two(mini):
    """MIOPEN_ENGINE (static order puts it first) sleeps 40 ms per execute; MINI_fast does not."""
    mini("s", 'ENGINE_NAME="MIOPEN_ENGINE"', "EXEC_SLEEP_MS=40", dirname="autotune")
    return os.path.dirname(mini("f", 'ENGINE_NAME="MINI_fast"', dirname="autotune"))


PRELUDE = """
import time
hh = create_handle()
g = standin_graph(hh)
def order():
    st, cfgs = heuristic_configs(g)
    assert st == 0, err()
    for c in cfgs:
        assert lib.hipdnnBackendFinalize(c) == 0, err()
    return [engine_id_of_cfg(c) for c in cfgs], cfgs
def time_plan(cfg, reps=3):
    st, plan = plan_for(cfg)
    assert st == 0, err()
    vp = variant_pack([1, 2, 3], [0x1000, 0x2000, 0x3000])
    best = None
    for _ in range(reps):
        pc = desc(D.HIPDNN_BACKEND_PROFILING_CONTROL_EXT)
        assert set_attr(pc, A.HIPDNN_ATTR_PROFILING_HANDLE_EXT, T.HIPDNN_TYPE_HANDLE, "hipdnnHandle_t", [hh]) == 0, err()
        assert set_attr(pc, A.HIPDNN_ATTR_PROFILING_START_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True]) == 0, err()
        assert lib.hipdnnBackendExecute(hh, plan, vp) == 0, err()
        assert set_attr(pc, A.HIPDNN_ATTR_PROFILING_STOP_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True]) == 0, err()
        assert lib.hipdnnBackendFinalize(pc) == 0, err()
        ms = ffi.new("float[1]"); n = ffi.new("int64_t*")
        assert lib.hipdnnBackendGetAttribute(pc, A.HIPDNN_ATTR_PROFILING_ELAPSED_MS_EXT, T.HIPDNN_TYPE_FLOAT, 1, n, ms) == 0, err()
        lib.hipdnnBackendDestroyDescriptor(pc)
        best = ms[0] if best is None else min(best, ms[0])
    return best
def write(ids):
    arr = ffi.new("int64_t[]", ids or [0])
    oc = ffi.new("hipdnnAutotuneCacheWriteOutcome_ext_t*")
    st = lib.hipdnnBackendWriteEngineRankingResults_ext(hh, g, arr, len(ids), oc)
    return [st, int(oc[0]) if st == 0 else None, err() if st else ""]
"""


def _env(two, tmp_path, **kw):
    e = {"HIPDNN_PLUGIN_DIR": two, "HIPDNN_CACHE_DIR": str(tmp_path / "cache"),
         "HIPDNN_HEURISTIC_PLUGIN_DIR": str(tmp_path / "noheur")}
    e.update(kw)
    return e


def test_autotune_ranks_and_persists(two, tmp_path):
    r = py(PRELUDE + """
out = {}
ids, cfgs = order()
out["before"] = ids
times = {eid: time_plan(c) for eid, c in zip(ids, order()[1])}
out["times"] = {str(k): v for k, v in times.items()}
ranked = sorted(times, key=times.get)
out["write"] = write(ranked)
out["again"] = write(ranked)
out["after"] = order()[0]
print(json.dumps(out))
""", _env(two, tmp_path))
    assert r["before"] == [SLOW, FAST]           # StaticOrdering: MIOPEN_ENGINE first
    t = {int(k): v for k, v in r["times"].items()}
    assert t[SLOW] >= 35.0 and t[SLOW] > t[FAST]  # PROFILING_CONTROL brackets the 40 ms sleep
    assert r["write"] == [0, WRITTEN, ""] and r["again"] == [0, UNCHANGED, ""]
    assert r["after"] == [FAST, SLOW]            # SelectionHeuristic::Config: the cached ranking
    # a new process (same graph, same device) finds the ranking on disk
    r2 = py(PRELUDE + """
print(json.dumps({"order": order()[0]}))
""", _env(two, tmp_path))
    assert r2["order"] == [FAST, SLOW]
    # disabled: lookups find nothing, writes decline
    r3 = py(PRELUDE + f"""
print(json.dumps({{"order": order()[0], "write": write([{FAST}])}}))
""", _env(two, tmp_path, HIPDNN_DISABLE_EXACT_ENGINE_CACHE="1"))
    assert r3["order"] == [SLOW, FAST] and r3["write"] == [0, DISABLED, ""]


def test_write_outcomes_and_errors(two, tmp_path):
    r = py(PRELUDE + f"""
out = {{"empty": write([]), "dup": write([{FAST}, {FAST}]), "unknown": write([12345])}}
oc = ffi.new("hipdnnAutotuneCacheWriteOutcome_ext_t*")
out["null_outcome"] = lib.hipdnnBackendWriteEngineRankingResults_ext(hh, g, ffi.new("int64_t[1]", [{FAST}]), 1, ffi.NULL)
out["null_ids"] = lib.hipdnnBackendWriteEngineRankingResults_ext(hh, g, ffi.NULL, 1, oc)
out["null_graph"] = lib.hipdnnBackendWriteEngineRankingResults_ext(hh, ffi.NULL, ffi.NULL, 0, oc)
t = desc(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
out["not_graph"] = lib.hipdnnBackendWriteEngineRankingResults_ext(hh, t, ffi.NULL, 0, oc)
print(json.dumps(out))
""", _env(two, tmp_path))
    assert r["empty"] == [0, NO_ENGINES, ""]
    assert r["dup"][0] == 2 and "unique" in r["dup"][2]          # BAD_PARAM
    assert r["unknown"][0] == 2 and "not a loaded engine" in r["unknown"][2]
    assert r["null_outcome"] == 0                  # the outcome pointer is optional
    assert r["null_ids"] == 3 and r["null_graph"] == 3  # BAD_PARAM_NULL_POINTER
    assert r["not_graph"] == 2


def test_unfinalized_graph_is_unkeyable(two, tmp_path):
    r = py(PRELUDE + f"""
gd = desc(D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
arr = ffi.new("int64_t[1]", [{FAST}])
oc = ffi.new("hipdnnAutotuneCacheWriteOutcome_ext_t*")
st = lib.hipdnnBackendWriteEngineRankingResults_ext(hh, gd, arr, 1, oc)
print(json.dumps([st, int(oc[0])]))
""", _env(two, tmp_path))
    assert r == [0, UNKEYABLE]


def test_profiling_control_rules(two, tmp_path):
    r = py(PRELUDE + """
out = {}
pc = desc(D.HIPDNN_BACKEND_PROFILING_CONTROL_EXT)
out["fin_empty"] = lib.hipdnnBackendFinalize(pc)
out["start_no_handle"] = set_attr(pc, A.HIPDNN_ATTR_PROFILING_START_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True])
out["null_handle"] = set_attr(pc, A.HIPDNN_ATTR_PROFILING_HANDLE_EXT, T.HIPDNN_TYPE_HANDLE, "hipdnnHandle_t", [ffi.NULL])
ms = ffi.new("float[1]"); n = ffi.new("int64_t*")
out["get_unfin"] = lib.hipdnnBackendGetAttribute(pc, A.HIPDNN_ATTR_PROFILING_ELAPSED_MS_EXT, T.HIPDNN_TYPE_FLOAT, 1, n, ms)
assert set_attr(pc, A.HIPDNN_ATTR_PROFILING_HANDLE_EXT, T.HIPDNN_TYPE_HANDLE, "hipdnnHandle_t", [hh]) == 0
out["stop_first"] = set_attr(pc, A.HIPDNN_ATTR_PROFILING_STOP_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True])
assert set_attr(pc, A.HIPDNN_ATTR_PROFILING_START_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True]) == 0
time.sleep(0.05)
assert set_attr(pc, A.HIPDNN_ATTR_PROFILING_DEVICE_SYNC_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True]) == 0
assert set_attr(pc, A.HIPDNN_ATTR_PROFILING_STOP_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True]) == 0
out["fin"] = lib.hipdnnBackendFinalize(pc)
out["get"] = lib.hipdnnBackendGetAttribute(pc, A.HIPDNN_ATTR_PROFILING_ELAPSED_MS_EXT, T.HIPDNN_TYPE_FLOAT, 1, n, ms)
out["ms"] = ms[0]
out["set_after"] = set_attr(pc, A.HIPDNN_ATTR_PROFILING_START_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [True])
print(json.dumps(out))
""", _env(two, tmp_path))
    assert r["fin_empty"] == 2 and r["start_no_handle"] == 2 and r["null_handle"] == 3
    assert r["get_unfin"] == 1                      # NOT_INITIALIZED before finalize
    assert r["stop_first"] == 2
    assert r["fin"] == 0 and r["get"] == 0 and 45.0 <= r["ms"] < 60000.0
    assert r["set_after"] == 1                      # NOT_INITIALIZED after finalize


def _run(code, env):
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_cache_store_corruption_and_concurrent_writers(tmp_path):
    env = dict(os.environ, HIPDNN_CACHE_DIR=str(tmp_path / "c"),
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    code = """
import sys
from hipdnn_cabi.backend import autotune_cache as c
who = int(sys.argv[1]) if len(sys.argv) > 1 else int(%r)
for i in range(150):
    c.store("k%%d_%%d" %% (who, i %% 5), [i, who])
print("ok")
"""
    procs = [_run(code % w, env) for w in (1, 2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    check = """
import sqlite3, json
from hipdnn_cabi.backend import autotune_cache as c
con = sqlite3.connect(c.db_path())
print(json.dumps(sorted(r[0] for r in con.execute("SELECT key FROM ranking"))))
"""
    r = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().strip("[]").split(",")) == 10
    # a truncated / garbage file is moved aside and rewritten
    db = tmp_path / "c" / "hipdnn_cabi_engine_ranking.sqlite3"
    db.write_bytes(b"this is not a database" * 10)
    fix = """
from hipdnn_cabi.backend import autotune_cache as c
print(c.store("k", [1, 2]), c.store("k", [1, 2]))
"""
    r = subprocess.run([sys.executable, "-c", fix], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(WRITTEN), str(UNCHANGED)]
    assert any(p.name.startswith("hipdnn_cabi_engine_ranking.sqlite3.corrupt-")
               for p in (tmp_path / "c").iterdir())


def test_unwritable_cache_dir_is_a_clear_error(two, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = py(PRELUDE + f"""
print(json.dumps({{"w": write([{FAST}]), "order": order()[0]}}))
""", _env(two, tmp_path, HIPDNN_CACHE_DIR=str(blocker / "sub")))
    assert r["w"][0] == 9 and "cannot write the autotune cache" in r["w"][2]   # INTERNAL_ERROR
    assert r["order"] == [SLOW, FAST]     # the heuristics go on without a cache
