"""Drives the backend C API (ABI mode: hipdnnCreate → heuristics → engine/config finalize → plan →
execute → hipdnnDestroy) with tests/plugin_sdk/faulty_plugin.py loaded by the host from a plugin
path, switching its FAULT on and off inside one process.  Prints one JSON object.

usage: python sdk_host_driver.py faults FAULT...     one round per fault, each followed by a
                                                     healthy round (EAGER unload: every round
                                                     loads the plugin afresh)
       python sdk_host_driver.py leak N              N healthy + faulty rounds (LAZY), then the
                                                     SDK's tables / containers / RSS
       python sdk_host_driver.py share               several hipdnnHandle_t over one plugin
       python sdk_host_driver.py round               one healthy round + the loaded plugin paths
Environment: HIPDNN_PLUGIN_DIR (holds faulty_plugin.py), HIPDNN_LOG_FILE/HIPDNN_LOG_LEVEL.
"""
import gc
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "plugins"))

from pyapi import (A, D, T, desc, err, ffi, heuristic_configs, lib, plan_for,  # noqa: E402
                   set_attr, standin_graph, variant_pack)


def addr(p):
    return int(ffi.cast("uintptr_t", p))


def round_(fault, stream=None):
    """One full pass through the C API; the first failing step ends it (then all is destroyed)."""
    os.environ["FAULT"] = fault
    out = {}
    hp = ffi.new("hipdnnHandle_t*")
    st = lib.hipdnnCreate(hp)
    out["create"] = [st, err()]
    if st:
        return out
    h = hp[0]
    n = ffi.new("size_t*")
    lib.hipdnnGetEngineCount_ext(h, n)
    out["engines"] = int(n[0])
    if stream is not None:
        lib.hipdnnSetStream(h, ffi.cast("hipStream_t", stream))
    g = standin_graph(h)
    keep = []
    try:
        st, cfgs = heuristic_configs(g)
        keep += cfgs
        out["heuristics"] = [st, err(), len(cfgs)]
        if st or not cfgs:
            return out
        st = lib.hipdnnBackendFinalize(cfgs[0])
        out["cfg"] = [st, err()]
        if st:
            return out
        ep = ffi.new("hipdnnBackendDescriptor_t*")
        assert lib.hipdnnBackendGetAttribute(cfgs[0], A.HIPDNN_ATTR_ENGINECFG_ENGINE,
                                             T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.NULL, ep) == 0
        eid = ffi.new("int64_t*")
        lib.hipdnnBackendGetAttribute(ep[0], A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                      T.HIPDNN_TYPE_INT64, 1, ffi.NULL, eid)
        lib.hipdnnBackendDestroyDescriptor(ep[0])
        # an ENGINE descriptor of our own: its finalize asks the plugin for the EngineDetails
        e = desc(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
        keep.append(e)
        set_attr(e, A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                 "hipdnnBackendDescriptor_t", [g])
        set_attr(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64, "int64_t", [eid[0]])
        st = lib.hipdnnBackendFinalize(e)
        out["engine"] = [st, err()]
        if st:
            return out
        st, p = plan_for(cfgs[0])
        keep.append(p)
        out["plan"] = [st, err()]
        if st:
            return out
        x = ffi.new("float[4]", [1, 2, 3, 4])
        b = ffi.new("float[4]", [1] * 4)
        y = ffi.new("float[4]")
        ws = ffi.new("char[64]")
        vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)], addr(ws))
        keep.append(vp)
        st = lib.hipdnnBackendExecute(h, p, vp)
        out["execute"] = [st, err(), list(y)]
        return out
    finally:
        for d in reversed(keep):
            lib.hipdnnBackendDestroyDescriptor(d)
        lib.hipdnnBackendDestroyDescriptor(g)
        out["destroy"] = [lib.hipdnnDestroy(h), err()]


def _adapter():
    from hipdnn_cabi.plugin_sdk import slots
    return next((a for a in slots.BACKEND.adapters if a is not None and a.plugin.name == "faulty"),
                None)


def _tables(a):
    return {k: len(getattr(a, k)) for k in ("_handles", "_handles_c", "_contexts", "_contexts_c",
                                            "_details", "_payloads")}


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def faults(names):
    lib.hipdnnSetPluginUnloadMode_ext(lib.HIPDNN_PLUGIN_UNLOAD_EAGER)
    res = {"first": round_(""), "rounds": []}
    for f in names:
        res["rounds"].append([f, round_(f), round_("")])
    from hipdnn_cabi.plugin_sdk import slots
    res["bound_slots"] = sum(a is not None for a in slots.BACKEND.adapters)
    return res


ALL_FAULTS = ["create", "applicable", "applicable:plugin_error", "applicable:dup",
              "applicable:unknown", "details", "workspace", "build", "plan_ws", "execute",
              "missing_buffer", "close"]


def leak(n):
    """LAZY mode (the plugin stays loaded): n healthy rounds, one round of every fault, n more
    healthy rounds; RSS is read after the first batch and at the end."""
    oks = 0
    for _ in range(n):
        oks += round_("").get("execute", [1])[0] == 0
    gc.collect()
    rss0 = _rss_kib()
    for f in ALL_FAULTS:
        round_(f)
    for _ in range(n):
        oks += round_("").get("execute", [1])[0] == 0
    gc.collect()
    rss1 = _rss_kib()
    a = _adapter()
    plugin = a.plugin
    mod = sys.modules[type(plugin).__module__]
    res = {"ok_rounds": oks, "rss_growth_kib": rss1 - rss0, "tables": _tables(a),
           "containers": len(mod.CONTAINERS), "closed": len(mod.CLOSED),
           "live_container": plugin._container is not None, "refs": plugin._container_refs}
    # a plugin that leaks (keeps 1 MiB per plan alive): the host keeps working, and the same
    # measurement sees it
    rss2 = _rss_kib()
    leak_ok = sum(round_("leak").get("execute", [1])[0] == 0 for _ in range(n))
    gc.collect()
    res.update(leak_ok=leak_ok, leaked=len(mod.LEAKED), leak_rss_growth_kib=_rss_kib() - rss2,
               after_leak=round_(""), leak_tables=_tables(a))
    return res


def share():
    """Three hipdnnHandle_t at once: one plugin handle each, one shared container."""
    from hipdnn_cabi.backend import registry
    os.environ["FAULT"] = ""
    hs = []
    for _ in range(3):
        hp = ffi.new("hipdnnHandle_t*")
        assert lib.hipdnnCreate(hp) == 0
        hs.append(hp[0])
    a = _adapter()
    plugin = a.plugin
    mod = sys.modules[type(plugin).__module__]
    handles = list(a._handles.values())
    res = {"plugin_handles": len(handles), "containers": len(mod.CONTAINERS),
           "distinct_containers": len({id(x.container) for x in handles}),
           "refs": plugin._container_refs,
           "shared_is_live": all(x.container is plugin._container for x in handles)}
    lib.hipdnnSetStream(hs[1], ffi.cast("hipStream_t", 0x5000))
    res["streams"] = sorted(x.stream for x in a._handles.values())
    # a plan executed on handle 1 sees handle 1's plugin handle (and so its stream)
    seen = []
    orig = mod.Plan.execute

    def spy(self, handle, buffers, workspace):
        seen.append((type(handle).__name__, handle.stream, handle.container is plugin._container))
        return orig(self, handle, buffers, workspace)
    mod.Plan.execute = spy
    try:
        g = standin_graph(hs[1])
        st, cfgs = heuristic_configs(g)
        assert st == 0 and cfgs, err()
        assert lib.hipdnnBackendFinalize(cfgs[0]) == 0, err()
        st, p = plan_for(cfgs[0])
        assert st == 0, err()
        x, b, y = ffi.new("float[4]"), ffi.new("float[4]"), ffi.new("float[4]")
        ws = ffi.new("char[64]")
        vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)], addr(ws))
        res["execute"] = lib.hipdnnBackendExecute(hs[1], p, vp)
        res["y"] = list(y)
        for d in (vp, p, *cfgs, g):
            lib.hipdnnBackendDestroyDescriptor(d)
    finally:
        mod.Plan.execute = orig
    res["seen"] = seen
    del registry
    lib.hipdnnDestroy(hs[0])
    lib.hipdnnDestroy(hs[2])
    res["after_two"] = {"refs": plugin._container_refs, "closed": len(mod.CLOSED),
                        "live": plugin._container is not None}
    lib.hipdnnDestroy(hs[1])
    res["after_all"] = {"refs": plugin._container_refs, "closed": len(mod.CLOSED),
                        "live": plugin._container is not None, "tables": _tables(a)}
    # LAZY mode keeps the plugin loaded: the next handle makes a new container
    hp = ffi.new("hipdnnHandle_t*")
    assert lib.hipdnnCreate(hp) == 0
    res["recreated"] = {"containers": len(mod.CONTAINERS), "refs": plugin._container_refs}
    lib.hipdnnDestroy(hp[0])
    res["final"] = {"closed": len(mod.CLOSED), "refs": plugin._container_refs}
    return res


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "faults":
        r = faults(sys.argv[2:])
    elif mode == "round":   # one healthy round with whatever plugins HIPDNN_PLUGIN_DIR holds
        r = round_("")
        cnt, ml = ffi.new("size_t*"), ffi.new("size_t*")
        hp = ffi.new("hipdnnHandle_t*")
        lib.hipdnnCreate(hp)
        lib.hipdnnGetLoadedEnginePluginPaths_ext(hp[0], cnt, ffi.NULL, ml)
        bufs = [ffi.new("char[]", ml[0]) for _ in range(cnt[0])]
        lib.hipdnnGetLoadedEnginePluginPaths_ext(hp[0], cnt, ffi.new("char*[]", bufs), ml)
        r["loaded"] = [ffi.string(b).decode() for b in bufs]
        lib.hipdnnDestroy(hp[0])
    elif mode == "leak":
        r = leak(int(sys.argv[2]))
    else:
        r = share()
    sys.stdout.flush()
    print(json.dumps(r))
