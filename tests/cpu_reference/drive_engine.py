"""Runs CPU-reference-engine test cases through the plugin C ABI, in-process in
libhipdnn_backend.so: load_python_plugin binds the plugin to slot function pointers, and every
call goes through the backend's C trampolines (tramp_<fn>(pointer, args...)) exactly as a host
calls a .so plugin.

usage: python drive_engine.py PLUGIN CASEDIR N
Each case_<i>.npz holds the op graph ('graph'), the bound uids ('uids') and one byte buffer per
uid ('buf_<uid>'); writes result_<i>.npz (buffers after execute) and result_<i>.json (statuses).
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def start_backend():
    from hipdnn_cabi import capi
    ffi0, lib0 = capi.load()
    h = ffi0.new("hipdnnHandle_t*")
    assert lib0.hipdnnCreate(h) == 0
    lib0.hipdnnDestroy(h[0])
    from hipdnn_cabi.backend import runtime
    return runtime.ffi, runtime.lib


def main(plugin, casedir, n):
    ffi, lib = start_backend()
    from hipdnn_cabi.plugin_sdk.loader import load_python_plugin
    T = load_python_plugin(plugin)

    def C(name, *a):
        return getattr(lib, "tramp_" + name)(T[name], *a)

    def err():
        e = ffi.new("const char**")
        C("hipdnnPluginGetLastErrorString", e)
        return ffi.string(e[0]).decode()

    s = ffi.new("const char**")
    info = {}
    for key, fn in (("name", "hipdnnPluginGetName"), ("api_version", "hipdnnPluginGetApiVersion")):
        C(fn, s)
        info[key] = ffi.string(s[0]).decode()
    ids = ffi.new("int64_t[4]")
    cnt = ffi.new("uint32_t*")
    C("hipdnnEnginePluginGetAllEngineIds", ids, 4, cnt)
    eid = ids[0]
    C("hipdnnEnginePluginGetEngineName", eid, s)
    info["engine_name"] = ffi.string(s[0]).decode()
    h = ffi.new("hipdnnEnginePluginHandle_t*")
    assert C("hipdnnEnginePluginCreate", h) == 0
    h = h[0]
    from hipdnn_cabi.plugin_sdk import engine_id_of  # noqa: F401
    import flatbuffers
    from hipdnn_cabi.schemas._generated import EngineConfig as EC
    b = flatbuffers.Builder(64)
    EC.Start(b)
    EC.AddEngineId(b, eid)
    b.Finish(EC.End(b))
    cb = bytes(b.Output())
    ckeep = ffi.new("char[]", cb)
    cfg = ffi.new("hipdnnPluginConstData_t*", (ckeep, len(cb)))
    for i in range(n):
        d = np.load(os.path.join(casedir, f"case_{i}.npz"))
        gb = d["graph"].tobytes()
        gkeep = ffi.new("char[]", gb)
        graph = ffi.new("hipdnnPluginConstData_t*", (gkeep, len(gb)))
        res = dict(info)
        app = ffi.new("int64_t[4]")
        na = ffi.new("uint32_t*")
        res["applicable_status"] = C("hipdnnEnginePluginGetApplicableEngineIds", h, graph, app, 4, na)
        res["applicable"] = [app[k] for k in range(na[0])]
        res["engine_id"] = eid
        bufs = {}
        if res["applicable"]:
            det = ffi.new("hipdnnPluginConstData_t*")
            st = C("hipdnnEnginePluginGetEngineDetails", h, eid, graph, det)
            res["details_status"] = st
            res["details"] = ffi.buffer(ffi.cast("char*", det.ptr), det.size)[:].hex() if st == 0 else ""
            if st == 0:
                C("hipdnnEnginePluginDestroyEngineDetails", h, det)
            ws = ffi.new("size_t*", 99)
            res["workspace_status"] = C("hipdnnEnginePluginGetWorkspaceSize", h, cfg, graph, ws)
            res["workspace"] = int(ws[0])
            ctx = ffi.new("hipdnnEnginePluginExecutionContext_t*")
            st = C("hipdnnEnginePluginCreateExecutionContext", h, cfg, graph, ctx)
            res["context_status"] = st
            if st == 0:
                uids = [int(u) for u in d["uids"]]
                keep = []
                for u in uids:
                    arr = np.array(d[f"buf_{u}"], copy=True)
                    bufs[u] = arr
                    keep.append(arr)
                dev = ffi.new("hipdnnPluginDeviceBuffer_t[]", max(1, len(uids)))
                for k, u in enumerate(uids):
                    dev[k].uid = u
                    dev[k].ptr = ffi.cast("void*", bufs[u].ctypes.data)
                st = C("hipdnnEnginePluginExecuteOpGraph", h, ctx[0], ffi.NULL, dev, len(uids))
                res["execute_status"] = st
                res["execute_error"] = err() if st else ""
                C("hipdnnEnginePluginDestroyExecutionContext", h, ctx[0])
            else:
                res["context_error"] = err()
        np.savez(os.path.join(casedir, f"result_{i}.npz"), **{f"buf_{u}": a for u, a in bufs.items()})
        with open(os.path.join(casedir, f"result_{i}.json"), "w") as f:
            json.dump(res, f)
    C("hipdnnEnginePluginDestroy", h)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
