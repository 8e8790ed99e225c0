"""In-process twin of drive_exported.c: loads a Python plugin into libhipdnn_backend.so's slots
(hipdnn_cabi.plugin_sdk.loader.load_python_plugin) and calls the function table through the
backend's C trampolines, printing the same key=value lines.
usage: python drive_inprocess.py PLUGIN GRAPH_FILE CONFIG_FILE N"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def start_backend():
    from hipdnn_cabi import capi
    ffi0, lib0 = capi.load()
    h = ffi0.new("hipdnnHandle_t*")
    assert lib0.hipdnnCreate(h) == 0  # starts the embedded module
    lib0.hipdnnDestroy(h[0])
    from hipdnn_cabi.backend import runtime
    return runtime.ffi, runtime.lib


def main(plugin, gpath, cpath, N):
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
    for key, fn in (("name", "hipdnnPluginGetName"), ("version", "hipdnnPluginGetVersion"),
                    ("api_version", "hipdnnPluginGetApiVersion")):
        st = C(fn, s)
        print(f"{key}={st}:{ffi.string(s[0]).decode()}")
    t = ffi.new("hipdnnPluginType_t*")
    st = C("hipdnnPluginGetType", t); print(f"type={st}:{int(t[0])}")
    n, m = ffi.new("uint32_t*"), ffi.new("uint32_t*")
    st = C("hipdnnEnginePluginGetAllEngineIds", ffi.NULL, 0, n); print(f"all_count={st}:{n[0]}")
    ids = ffi.new("int64_t[16]"); ids[0] = 0x5a5a
    st = C("hipdnnEnginePluginGetAllEngineIds", ids, 0, m)
    print(f"all_max0={st}:{m[0]}:{int(ids[0] == 0x5a5a)}")
    st = C("hipdnnEnginePluginGetAllEngineIds", ids, n[0], m)
    print(f"all_ids={st}:{m[0]}" + "".join(f":{ids[i]}" for i in range(min(m[0], 16))))
    h = ffi.new("hipdnnEnginePluginHandle_t*")
    st = C("hipdnnEnginePluginCreate", h); print(f"create={st}:{int(h[0] != ffi.NULL)}")
    h = h[0]
    gb, cb = open(gpath, "rb").read(), open(cpath, "rb").read()
    gkeep, ckeep = ffi.new("char[]", gb), ffi.new("char[]", cb)
    graph = ffi.new("hipdnnPluginConstData_t*", (gkeep, len(gb)))
    cfg = ffi.new("hipdnnPluginConstData_t*", (ckeep, len(cb)))
    app = ffi.new("int64_t[16]"); na = ffi.new("uint32_t*")
    st = C("hipdnnEnginePluginGetApplicableEngineIds", h, graph, app, 16, na)
    print(f"applicable={st}:{na[0]}" + "".join(f":{app[i]}" for i in range(min(na[0], 16))))
    det = ffi.new("hipdnnPluginConstData_t*")
    st = C("hipdnnEnginePluginGetEngineDetails", h, ids[0], graph, det)
    raw = ffi.buffer(ffi.cast("char*", det.ptr), det.size)[:] if det.size else b""
    print(f"details={st}:{raw.hex()}")
    st = C("hipdnnEnginePluginDestroyEngineDetails", h, det)
    print(f"destroy_details={st}:{int(det.ptr == ffi.NULL)}")
    ws = ffi.new("size_t*", 99)
    st = C("hipdnnEnginePluginGetWorkspaceSize", h, cfg, graph, ws); print(f"workspace={st}:{ws[0]}")
    ctx = ffi.new("hipdnnEnginePluginExecutionContext_t*")
    st = C("hipdnnEnginePluginCreateExecutionContext", h, cfg, graph, ctx)
    print(f"context={st}:{int(ctx[0] != ffi.NULL)}")
    ctx = ctx[0]
    ws[0] = 99
    st = C("hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext", h, ctx, ws)
    print(f"workspace_ctx={st}:{ws[0]}")
    x = ffi.new("float[]", [i - 2.5 for i in range(N)])
    b = ffi.new("float[]", [0.5 * i + 1.0 for i in range(N)])
    y = ffi.new("float[]", [-99.0] * N)
    bufs = ffi.new("hipdnnPluginDeviceBuffer_t[3]", [(1, x), (2, b), (3, y)])
    st = C("hipdnnEnginePluginExecuteOpGraph", h, ctx, ffi.NULL, bufs, 3)
    print(f"execute={st}" + "".join(":%.6g" % y[i] for i in range(N)))
    st = C("hipdnnEnginePluginExecuteOpGraph", h, ctx, ffi.NULL, bufs, 2)
    print(f"execute_missing={st}:{err()}")
    st = C("hipdnnEnginePluginDestroyExecutionContext", h, ctx); print(f"destroy_context={st}")
    st = C("hipdnnPluginGetName", ffi.NULL); print(f"null_name={st}:{err()}")
    print(f"null_num={C('hipdnnEnginePluginGetAllEngineIds', ffi.NULL, 0, ffi.NULL)}")
    print(f"null_ids={C('hipdnnEnginePluginGetAllEngineIds', ffi.NULL, 4, m)}")
    print(f"null_create={C('hipdnnEnginePluginCreate', ffi.NULL)}")
    print(f"null_graph={C('hipdnnEnginePluginGetApplicableEngineIds', h, ffi.NULL, app, 16, na)}")
    jk = ffi.new("char[]", b"garbage!garbage!")
    junk = ffi.new("hipdnnPluginConstData_t*", (jk, 16))
    print(f"junk_graph={C('hipdnnEnginePluginGetApplicableEngineIds', h, junk, app, 16, na)}")
    print(f"null_ws={C('hipdnnEnginePluginGetWorkspaceSize', h, cfg, graph, ffi.NULL)}")
    print(f"null_ctx={C('hipdnnEnginePluginExecuteOpGraph', h, ffi.NULL, ffi.NULL, bufs, 3)}")
    print(f"destroy={C('hipdnnEnginePluginDestroy', h)}")
    print(f"destroy_again={C('hipdnnEnginePluginDestroy', h)}")
    C("hipdnnPluginGetLastErrorString", ffi.NULL)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
