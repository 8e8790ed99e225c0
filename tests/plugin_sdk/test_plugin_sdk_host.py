"""Python plugin faults, leaks and container sharing seen THROUGH THE HOST: the backend C API
(hipdnnCreate → heuristics → engine/config finalize → plan → execute → hipdnnDestroy, ABI mode)
with tests/plugin_sdk/faulty_plugin.py found by the host in a plugin directory.  Each fault must
come back as HIPDNN_STATUS_PLUGIN_ERROR carrying the plugin's own message (or, where hipDNN
only logs — plugin-handle create/destroy, load-time rejection — as a logged error / load error),
and the very next healthy round in the same process must work."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_ERROR = 14
INTERNAL, NOT_APPLICABLE, INVALID_VALUE = 3, 5, 2
OK = [7.0] * 4

# fault -> (step that fails, expected message fragment); status is PLUGIN_ERROR for all of them
REPORTED = {
    "applicable": ("heuristics", "Failed to get applicable engine IDs. Status: "
                   "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: RuntimeError: boom in applicable"),
    "applicable:plugin_error": ("heuristics", "HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE(5), "
                                "Error: declined in applicable"),
    "applicable:dup": ("heuristics", "More applicable engines than expected"),
    "applicable:unknown": ("heuristics", "Engine ID not found in the plugin's known IDs"),
    "details": ("engine", "Failed to get engine details. Status: "
                "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: RuntimeError: boom in details"),
    "workspace": ("cfg", "Failed to get workspace size. Status: "
                  "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: RuntimeError: boom in workspace"),
    "build": ("plan", "Failed to create execution context. Status: "
              "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: RuntimeError: boom in build"),
    "plan_ws": ("plan", "Failed to get workspace size from execution context. Status: "
                "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: RuntimeError: boom in plan_ws"),
    "execute": ("execute", "Failed to execute op graph. Status: "
                "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: RuntimeError: boom in execute"),
    "missing_buffer": ("execute", "HIPDNN_PLUGIN_STATUS_INVALID_VALUE(2), Error: no device "
                       "buffer for tensor uid 42"),
}
# load-time rejections: hipdnnCreate succeeds without the plugin, the load error is the last error
LOAD = {
    "all_ids": "Failed to get number of engines. Status: HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), "
               "Error: RuntimeError: boom in all_ids",
    "bad_ids": "Failed to get all engine IDs. Status: HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), "
               "Error: TypeError: an integer is required",
    "all_ids:grow": "Number of engines returned does not match the number reported by the plugin",
}
# plugin handle create/destroy: hipdnnCreate/hipdnnDestroy succeed, the failure is logged
LOGGED = {
    "create": "Failed to create engine plugin handle. Status: HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3),"
              " Error: RuntimeError: boom in create",
    "close": "Failed to destroy engine plugin handle. Status: HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3),"
             " Error: RuntimeError: boom in close",
}


def _drive(tmp_path, *args, log=None):
    d = tmp_path / "plugins"
    d.mkdir(exist_ok=True)
    shutil.copy(os.path.join(HERE, "faulty_plugin.py"), d / "faulty_plugin.py")
    env = dict(os.environ, HIPDNN_PLUGIN_DIR=str(d), HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS="1")
    env.pop("FAULT", None)
    if log:
        env.update(HIPDNN_LOG_LEVEL="error", HIPDNN_LOG_FILE=str(log))
    r = subprocess.run([sys.executable, os.path.join(HERE, "sdk_host_driver.py"), *args],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), d


def _healthy(rnd):
    assert rnd["create"] == [0, ""] and rnd["engines"] == 1, rnd
    assert rnd["heuristics"] == [0, "", 1], rnd
    for k in ("cfg", "engine", "plan"):
        assert rnd[k] == [0, ""], rnd
    assert rnd["execute"] == [0, "", OK], rnd
    assert rnd["destroy"] == [0, ""], rnd


@pytest.fixture(scope="module")
def fault_rounds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sdkhost")
    log = tmp / "log.txt"
    # each load-time fault 3 times: 9 rejected loads > the 8 Python plugin slots
    names = list(REPORTED) + list(LOGGED) + list(LOAD) * 3
    res, d = _drive(tmp, "faults", *names, log=log)
    return res, d, log.read_text() if log.exists() else ""


def test_healthy_round_through_the_host(fault_rounds):
    _healthy(fault_rounds[0]["first"])


def _rounds(res, fault):
    rs = [r for r in res["rounds"] if r[0] == fault]
    assert rs, fault
    return rs


@pytest.mark.parametrize("fault", sorted(REPORTED))
def test_fault_is_plugin_error_with_the_plugins_message(fault_rounds, fault):
    res = fault_rounds[0]
    step, msg = REPORTED[fault]
    for _, bad, after in _rounds(res, fault):
        assert bad[step][0] == PLUGIN_ERROR, bad
        assert msg in bad[step][1], bad
        if step == "execute":
            assert bad["execute"][2] != OK  # the output was not written
        assert bad["destroy"] == [0, ""], bad
        _healthy(after)  # the host keeps working, same process, same plugin


@pytest.mark.parametrize("fault", sorted(LOAD))
def test_load_time_fault_is_a_load_error_and_the_host_keeps_working(fault_rounds, fault):
    res, d, log = fault_rounds
    for _, bad, after in _rounds(res, fault):
        st, err = bad["create"]
        assert st == 0 and bad["engines"] == 0, bad
        assert err == f"Error loading plugin from [{d / 'faulty_plugin.py'}]: {LOAD[fault]}", bad
        _healthy(after)
    assert LOAD[fault] in log


def test_rejected_python_plugins_give_their_slot_back(fault_rounds):
    # 9 load-time rejections happened above, more than the 8 slots; EAGER unload after the last
    # round leaves none bound
    assert fault_rounds[0]["bound_slots"] == 0


@pytest.mark.parametrize("fault", sorted(LOGGED))
def test_plugin_handle_create_destroy_faults_are_logged(fault_rounds, fault):
    res, _, log = fault_rounds
    (_, bad, after), = _rounds(res, fault)
    assert bad["create"] == [0, ""] and bad["destroy"][0] == 0, bad
    if fault == "create":  # no plugin handle for this hipdnnHandle_t: no engine applies
        assert bad["heuristics"] == [0, "", 0], bad
    else:
        assert bad["execute"] == [0, "", OK], bad
    assert LOGGED[fault] in log
    _healthy(after)


def test_no_leak_over_create_destroy_cycles_and_a_leaking_plugin(tmp_path):
    n = 100
    r, _ = _drive(tmp_path, "leak", str(n))
    assert r["ok_rounds"] == 2 * n
    # every plugin handle, execution context, details buffer and container is gone
    assert set(r["tables"].values()) == {0}, r["tables"]
    assert r["containers"] == r["closed"] > 2 * n and not r["live_container"] and r["refs"] == 0
    # n healthy rounds + one of every fault cost (next to) no memory...
    assert r["rss_growth_kib"] < 8 * 1024, r
    # ...while a plugin that keeps 1 MiB per plan alive shows up in the same measurement, and
    # the host keeps working through it
    assert r["leak_ok"] == n and r["leaked"] == n
    assert r["leak_rss_growth_kib"] > n * 1024 * 3 // 4, r
    _healthy(r["after_leak"])
    assert set(r["leak_tables"].values()) == {0}


def test_one_container_shared_by_all_plugin_handles(tmp_path):
    """RFC 0002 §4.2/§4.6: each hipdnnEnginePluginHandle_t holds a reference to the one
    EnginePluginContainer (made by the first, closed with the last) plus its own stream."""
    r, _ = _drive(tmp_path, "share")
    assert r["plugin_handles"] == 3 and r["containers"] == 1 and r["distinct_containers"] == 1
    assert r["refs"] == 3 and r["shared_is_live"]
    assert r["streams"] == [0, 0, 0x5000]  # hipdnnSetStream reached one plugin handle only
    assert r["execute"] == 0 and r["y"] == OK
    assert r["seen"] == [["PluginHandle", 0x5000, True]]
    assert r["after_two"] == {"refs": 1, "closed": 0, "live": True}
    assert r["after_all"]["refs"] == 0 and r["after_all"]["closed"] == 1
    assert not r["after_all"]["live"] and set(r["after_all"]["tables"].values()) == {0}
    assert r["recreated"] == {"containers": 2, "refs": 1}
    assert r["final"] == {"closed": 2, "refs": 0}


def test_container_acquire_release_unit():
    from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase
    from hipdnn_cabi.plugin_sdk.core import EnginePluginContainer, PluginHandle

    closed = []

    class Cont(EnginePluginContainer):
        def close(self):
            closed.append(self)

    seen = []

    class Plan(PlanBase):
        def execute(self, handle, buffers, workspace):
            seen.append(handle)

    class B(PlanBuilderBase):
        def is_applicable(self, handle, graph):
            seen.append(handle)
            return True

        def build_plan(self, handle, graph, config):
            return Plan()

    class E(EngineBase):
        name = "UNIT_ENGINE"
        plan_builder = B()

    p = EnginePluginBase("unit", engines=[E])
    p.container_class = Cont
    c1, c2 = p.acquire_container(), p.acquire_container()
    assert c1 is c2 and p._container_refs == 2
    h1, h2 = PluginHandle(c1), PluginHandle(c2)
    h1.set_stream(11)
    assert (h1.stream, h2.stream, c1.stream) == (11, 0, 0)
    assert h2.get_applicable_engine_ids(None) == [E().id] and seen[-1] is h2
    assert c1.get_applicable_engine_ids(None) == [E().id] and seen[-1] is c1  # direct use
    p.release_container(c1)
    assert not closed and p._container is c1
    p.release_container(c2)
    assert closed == [c1] and p._container is None and p._container_refs == 0
    p.release_container(c1)  # stale: no effect
    assert closed == [c1] and p._container_refs == 0
    assert p.acquire_container() is not c1


def test_adapter_parses_each_graph_content_once():
    """The host hands the same graph bytes to several entry points (and to every heuristics
    query): CAdapter verifies + parses them once and shares the read-only OpGraph."""
    import cffi
    from hipdnn_cabi.plugin_sdk import EnginePluginBase, PluginError
    from hipdnn_cabi.plugin_sdk.cabi import CAdapter
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "plugins"))
    from standin_graph import pointwise_graph_bytes
    ffi = cffi.FFI()
    ffi.cdef("typedef struct { const void* ptr; size_t size; } cd_t;")
    a = CAdapter(EnginePluginBase("unit", engines=[]), ffi)

    def cd(raw):
        keep = ffi.new("char[]", raw)
        return ffi.new("cd_t*", (keep, len(raw))), keep
    r2, r30 = pointwise_graph_bytes(2, 4), pointwise_graph_bytes(30, 4)
    (d1, k1), (d2, k2), (d3, k3) = cd(r2), cd(bytes(r2)), cd(r30)
    g1 = a._graph(d1)
    assert a._graph(d2) is g1                       # same content, other buffer
    g3 = a._graph(d3)
    assert g3 is not g1 and g3.nodes[0].attrs["operation"] == 30
    bad, kb = cd(b"garbage!garbage!")
    for _ in range(2):
        with pytest.raises(PluginError) as e:
            a._graph(bad)
        assert e.value.status == 1
    assert len(a._graphs) == 2


def test_cli_exported_plugin_runs_in_the_host_as_a_so(tmp_path):
    """`hipdnn-cabi export-plugin` output is an ordinary .so plugin to our backend: found in a
    plugin directory, heuristics → plan → hipdnnBackendExecute computes py_sample's ADD."""
    d = tmp_path / "so_only"
    d.mkdir()
    so = d / "libpy_sample_cli.so"
    r = subprocess.run([sys.executable, "-m", "hipdnn_cabi.cli", "export-plugin",
                        os.path.join(os.path.dirname(os.path.dirname(HERE)), "engine_plugins",
                                     "py_sample"), "-o", str(so)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and so.exists(), r.stdout + r.stderr
    env = dict(os.environ, HIPDNN_PLUGIN_DIR=str(d), HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS="1")
    r = subprocess.run([sys.executable, os.path.join(HERE, "sdk_host_driver.py"), "round"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["loaded"] == [str(so)]
    assert out["engines"] == 1 and out["heuristics"] == [0, "", 1] and out["plan"] == [0, ""]
    assert out["execute"] == [0, "", [2.0, 3.0, 4.0, 5.0]]  # x + b
    assert out["destroy"] == [0, ""]


def test_last_error_is_per_thread():
    import threading

    import cffi
    from hipdnn_cabi.plugin_sdk import EnginePluginBase
    from hipdnn_cabi.plugin_sdk.cabi import CAdapter
    ffi = cffi.FFI()
    a = CAdapter(EnginePluginBase("unit", engines=[]), ffi)
    got = {}
    go = threading.Barrier(2)

    def run(key, call):
        st = call()
        go.wait()  # both threads have failed before either reads
        e = ffi.new("const char**")
        a.hipdnnPluginGetLastErrorString(e)
        got[key] = (st, ffi.string(e[0]).decode())

    ts = [threading.Thread(target=run, args=("name", lambda: a.hipdnnPluginGetName(ffi.NULL))),
          threading.Thread(target=run, args=("create",
                                             lambda: a.hipdnnEnginePluginCreate(ffi.NULL)))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == {"name": (1, "name is NULL"), "create": (1, "handle is NULL")}
    e = ffi.new("const char**")
    a.hipdnnPluginGetLastErrorString(e)
    assert ffi.string(e[0]) == b""  # this thread never failed
