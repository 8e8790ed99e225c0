#!/usr/bin/env python3
"""Per-call cost of host → Python plugin vs host → C plugin.

One process loads libhipdnn_backend.so (cffi ABI mode) with a plugin directory holding:

  * ``c``:         the C sample plugin (engine_plugins/c_sample, libhipdnn_c_sample_plugin.so;
                   its execute is a 4-element float ADD)
  * ``python``:    an *empty* SDK plugin (bench_empty_py.py: one engine applicable to any graph,
                   plan.execute does nothing), loaded in-process by the host (slot functions
                   inside libhipdnn_backend.so → extern "Python" → CAdapter)
  * ``exported``:  the same empty plugin under another engine name, exported with
                   ``hipdnn-cabi export-plugin`` to a standalone .so and loaded as an ordinary
                   .so plugin (skipped with --no-export)

For each plugin the host's own function table (``EnginePlugin.fn``) and plugin handle are taken
from the hipdnnHandle_t, and per call is measured:

  * ``get_applicable_engine_ids_us``: hipdnnEnginePluginGetApplicableEngineIds(h, graph, ids,
    max, &n) on a 1-node pointwise graph, called through the function pointer in a C loop
    (GIL released, as the backend's C code or any C host calls it)
  * ``execute_op_graph_us``: hipdnnEnginePluginExecuteOpGraph(h, ctx, ws, bufs, 3) for the
    plan's execution context, function pointer, C loop
  * ``host_applicable_us``: the host's own call of GetApplicableEngineIds as heuristics make it
    (``EnginePlugin.call`` through the backend's trampoline, from the host's Python), Python loop
  * ``backend_execute_us``: hipdnnBackendExecute(handle, plan, variant pack) for that plugin's
    plan, C loop (the whole host → plugin execute path, C fast path on)

``ratio`` = Python-plugin cost / C-plugin cost per measurement.  Best of --reps runs.
Writes bench/results/python_plugin.json (+ python_plugin.png when matplotlib imports).

Usage: python bench/python_plugin_bench.py [--n 200000] [--reps 5] [--no-export] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LOOP_C = r"""
#include <stdint.h>
#include <time.h>
typedef struct { const void* ptr; size_t size; } cdata_t;
typedef int (*app_fn)(void*, const cdata_t*, int64_t*, uint32_t, uint32_t*);
typedef int (*exe_fn)(void*, void*, void*, const void*, uint32_t);
typedef int (*bexe_fn)(void*, void*, void*);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
double loop_applicable(uint64_t fn, void* h, const void* graph, long n, int* st, uint32_t* cnt)
{
    app_fn f = (app_fn)(uintptr_t)fn; int64_t ids[16]; uint32_t k = 0; int s = 0;
    double t0 = now();
    for (long i = 0; i < n; ++i) s |= f(h, (const cdata_t*)graph, ids, 16, &k);
    *st = s; *cnt = k;
    return (now() - t0) / n;
}
double loop_execute(uint64_t fn, void* h, void* ctx, void* ws, const void* bufs, uint32_t nb, long n, int* st)
{
    exe_fn f = (exe_fn)(uintptr_t)fn; int s = 0;
    double t0 = now();
    for (long i = 0; i < n; ++i) s |= f(h, ctx, ws, bufs, nb);
    *st = s;
    return (now() - t0) / n;
}
double loop_backend_execute(uint64_t fn, void* h, void* p, void* vp, long n, int* st)
{
    bexe_fn f = (bexe_fn)(uintptr_t)fn; int s = 0;
    double t0 = now();
    for (long i = 0; i < n; ++i) s |= f(h, p, vp);
    *st = s;
    return (now() - t0) / n;
}
"""

EMPTY_PLUGIN = textwrap.dedent('''
    """An empty SDK plugin: one engine applicable to any graph, a plan that does nothing."""
    from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase

    class Plan(PlanBase):
        def execute(self, handle, buffers, workspace):
            pass

    class Builder(PlanBuilderBase):
        def is_applicable(self, handle, graph):
            return True

        def build_plan(self, handle, graph, config):
            return Plan()

    class Engine(EngineBase):
        name = "{engine}"
        plan_builder = Builder()

    class EmptyPlugin(EnginePluginBase):
        name = "{plugin}"
        version = "0.1.0"
        engines = [Engine]

    hipdnn_plugin = EmptyPlugin
''')

PLUGINS = {"c": "hipdnn_c_sample_plugin", "python": "bench_empty_py",
           "exported": "bench_empty_exported"}


def build(tmp, plugdir, export):
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"),
                    f"OUT={plugdir}"], check=True)
    with open(os.path.join(plugdir, "bench_empty_py.py"), "w") as f:
        f.write(EMPTY_PLUGIN.format(engine="HIPDNN_CABI_BENCH_EMPTY_PY", plugin="bench_empty_py"))
    if export:
        src = os.path.join(tmp, "bench_empty_exported.py")
        with open(src, "w") as f:
            f.write(EMPTY_PLUGIN.format(engine="HIPDNN_CABI_BENCH_EMPTY_EXPORTED",
                                        plugin="bench_empty_exported"))
        subprocess.run([sys.executable, "-m", "hipdnn_cabi.cli", "export-plugin", src, "-o",
                        os.path.join(plugdir, "libbench_empty_exported.so")], check=True,
                       cwd=ROOT)
    src = os.path.join(tmp, "loops.c")
    with open(src, "w") as f:
        f.write(LOOP_C)
    so = os.path.join(tmp, "libpyplugin_loops.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", src, "-o", so], check=True)
    return so


def chart(path, res):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    keys = [k for k in ("get_applicable_engine_ids_us", "execute_op_graph_us", "host_applicable_us",
                        "backend_execute_us")]
    kinds = [k for k in ("c", "python", "exported") if k in res["plugins"]]
    colors = {"c": "#4c72b0", "python": "#dd8452", "exported": "#55a868"}
    fig, ax = plt.subplots(figsize=(9, 4.2))
    w = 0.8 / len(kinds)
    for j, kind in enumerate(kinds):
        vals = [res["plugins"][kind][k] for k in keys]
        xs = [i + (j - (len(kinds) - 1) / 2) * w for i in range(len(keys))]
        bars = ax.bar(xs, vals, w, label=kind, color=colors[kind])
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.2f}", ha="center", va="bottom",
                    fontsize=7)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([k[:-3] for k in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("µs per call (log)")
    r = res["ratio_python_over_c"]
    ax.set_title("host → plugin per call: Python plugin / C plugin = "
                 f"{r['get_applicable_engine_ids_us']:.1f}x (applicable), "
                 f"{r['execute_op_graph_us']:.1f}x (execute)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-export", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "python_plugin.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    plugdir = os.path.join(tmp, "plugins")
    os.makedirs(plugdir)
    export = not args.no_export
    loops_so = build(tmp, plugdir, export)
    os.environ["HIPDNN_PLUGIN_DIR"] = plugdir
    os.environ["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests", "plugins"))
    from pyapi import (ffi, lib, create_handle, engine_id_of_cfg, heuristic_configs, plan_for,
                       standin_graph, variant_pack)
    from hipdnn_cabi.backend import execute as bexec, registry, runtime
    from hipdnn_cabi.backend.plugins.host import graph_const_data
    ffi.cdef("""
        double loop_applicable(uint64_t fn, void* h, const void* graph, long n, int* st, uint32_t* cnt);
        double loop_execute(uint64_t fn, void* h, void* ctx, void* ws, const void* bufs, uint32_t nb,
                            long n, int* st);
        double loop_backend_execute(uint64_t fn, void* h, void* p, void* vp, long n, int* st);""")
    loops = ffi.dlopen(loops_so)
    n, reps = args.n, args.reps
    h = create_handle()
    g = standin_graph(h)
    st, cfgs = heuristic_configs(g)
    assert st == 0, st
    for c in cfgs:
        assert lib.hipdnnBackendFinalize(c) == 0
    addr = lambda c: int(ffi.cast("uintptr_t", c))  # noqa: E731
    rt = lambda c: ffi.cast("void*", int(runtime.ffi.cast("uintptr_t", c)))  # noqa: E731
    x = ffi.new("float[4]", [1, 2, 3, 4])
    b = ffi.new("float[4]", [1] * 4)
    y = ffi.new("float[4]")
    vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
    bufs = bexec._buffers(registry.resolve(addr(vp)))  # C-resident pack: a view
    graph_obj = registry.objects[addr(g)]
    gd = graph_const_data(graph_obj)
    hp = registry.objects[addr(h)].plugins
    ex_addr = int(ffi.cast("uintptr_t", ffi.addressof(lib, "hipdnnBackendExecute")))
    ist, icnt = ffi.new("int*"), ffi.new("uint32_t*")

    def best(fn):
        return min(fn() for _ in range(reps))

    res = {"calls": n, "reps": reps, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
           "python": platform.python_version(), "plugins": {}}
    plans = {addr(c): None for c in cfgs}
    for c in cfgs:
        st, p = plan_for(c)
        assert st == 0, st
        plan = registry.objects[addr(p)]
        plugin = plan.plugin
        kind = next(k for k, nm in PLUGINS.items() if os.path.basename(plugin.path).startswith(
            (nm, "lib" + nm)))
        plans[addr(c)] = p
        ph = hp.by_plugin[plugin]
        fn = plugin.fn
        ctx = rt(plan.context)
        php = rt(ph)
        gptr = rt(gd.c)
        cb = rt(bufs)
        app = fn["hipdnnEnginePluginGetApplicableEngineIds"]
        exe = fn["hipdnnEnginePluginExecuteOpGraph"]

        def t_app(k=n):
            r = loops.loop_applicable(app, php, gptr, k, ist, icnt)
            assert ist[0] == 0 and icnt[0] == 1, (ist[0], icnt[0])
            return r

        def t_exe(k=n):
            r = loops.loop_execute(exe, php, ctx, ffi.NULL, cb, 3, k, ist)
            assert ist[0] == 0, ist[0]
            return r

        def t_host_app(k=n // 10):
            out_ids = runtime.ffi.new("int64_t[]", len(plugin.engine_ids))
            out_n = runtime.ffi.new("uint32_t*")
            call, mx = plugin.call, len(plugin.engine_ids)
            t0 = time.perf_counter()
            for _ in range(k):
                call("get applicable engine IDs", "hipdnnEnginePluginGetApplicableEngineIds",
                     ph, gd.c, out_ids, mx, out_n)
            return (time.perf_counter() - t0) / k

        lib.hipdnnBackendExecute(h, p, vp)  # first execute registers the C fast path

        def t_bexe(k=n):
            r = loops.loop_backend_execute(ex_addr, h, p, vp, k, ist)
            assert ist[0] == 0, ist[0]
            return r

        res["plugins"][kind] = {
            "plugin": plugin.name, "path": os.path.basename(plugin.path),
            "engine_id": engine_id_of_cfg(c),
            "get_applicable_engine_ids_us": round(best(t_app) * 1e6, 3),
            "execute_op_graph_us": round(best(t_exe) * 1e6, 3),
            "host_applicable_us": round(best(t_host_app) * 1e6, 3),
            "backend_execute_us": round(best(t_bexe) * 1e6, 3)}
        print(kind, json.dumps(res["plugins"][kind]), flush=True)
    keys = ("get_applicable_engine_ids_us", "execute_op_graph_us", "host_applicable_us",
            "backend_execute_us")
    P = res["plugins"]
    res["ratio_python_over_c"] = {k: round(P["python"][k] / P["c"][k], 2) for k in keys}
    if "exported" in P:
        res["ratio_exported_over_c"] = {k: round(P["exported"][k] / P["c"][k], 2) for k in keys}
    res["note"] = ("per call, best of reps. *_engine_ids_us / execute_op_graph_us: the plugin's "
                   "function pointer from the host's table called in a C loop (GIL released); "
                   "host_applicable_us: the host's EnginePlugin.call from Python; "
                   "backend_execute_us: hipdnnBackendExecute in a C loop (fast path). The Python "
                   "plugins are empty (execute does nothing); the C sample's execute adds 4 floats. "
                   "ratio = Python / C.")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    png = os.path.splitext(args.out)[0] + ".png"
    if chart(png, res):
        print("wrote", png)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
