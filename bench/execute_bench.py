#!/usr/bin/env python3
"""Dispatch overhead of hipdnnBackendExecute: the C sample plugin (.so) and a Python plugin.

Everything runs in one process that loaded libhipdnn_backend.so through cffi ABI mode.  The
loops that matter run in C (a tiny helper compiled here, called with the GIL released), so the
numbers are what a C caller sees:

  .so plugin (engine_plugins/c_sample, a tiny 4-element pointwise ADD):
    * execute_us:         hipdnnBackendExecute(handle, plan, vp) per call, C loop
    * plugin_execute_us:  the plugin's own hipdnnEnginePluginExecuteOpGraph per call, C loop
                          (same plugin handle, context, buffers, workspace)
    * dispatch_overhead_us = execute_us - plugin_execute_us
  Python plugin (an SDK plugin whose plan.execute only reads every buffer, like a GPU engine
  before its launch):
    * execute_us:         hipdnnBackendExecute per call, C loop
    * plan_execute_us:    the plan's own ``execute(container, buffers, workspace)``, Python loop
    * dispatch_overhead_us = execute_us - plan_execute_us
Both are measured with the C fast path on and off (``fast_path``/``python_path``: the off case
is the path every execute took before the fast path existed).  Also, for continuity with older
results, ``python_caller``: the same execute called from Python (cffi ABI mode) minus a trivial
exported call.  Best of --reps runs.  Writes bench/results/execute.json.

Usage: python bench/execute_bench.py [--n 200000] [--reps 5] [--out FILE]
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
typedef int (*exec_fn)(void*, void*, void*);
typedef int (*plugin_fn)(void*, void*, void*, const void*, uint32_t);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
double loop_execute(uint64_t fn, void* h, void* p, void* vp, long n, int* st)
{
    exec_fn f = (exec_fn)(uintptr_t)fn; int s = 0;
    double t0 = now();
    for (long i = 0; i < n; ++i) s |= f(h, p, vp);
    *st = s;
    return (now() - t0) / n;
}
double loop_plugin(uint64_t fn, void* ph, void* ctx, void* ws, const void* bufs, uint32_t nb, long n, int* st)
{
    plugin_fn f = (plugin_fn)(uintptr_t)fn; int s = 0;
    double t0 = now();
    for (long i = 0; i < n; ++i) s |= f(ph, ctx, ws, bufs, nb);
    *st = s;
    return (now() - t0) / n;
}
"""

PY_PLUGIN = textwrap.dedent('''
    """bench_py_plugin: one engine applicable to any graph; execute reads every buffer."""
    from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase

    class Plan(PlanBase):
        def __init__(self, graph):
            self.uids = sorted(graph.tensors)

        def execute(self, handle, buffers, workspace):
            for u in self.uids:
                buffers[u]

    class Builder(PlanBuilderBase):
        def is_applicable(self, handle, graph):
            return True

        def build_plan(self, handle, graph, config):
            return Plan(graph)

    class Engine(EngineBase):
        name = "HIPDNN_CABI_BENCH_PY_ENGINE"
        plan_builder = Builder()

    class BenchPlugin(EnginePluginBase):
        name = "bench_py_plugin"
        version = "0.1.0"
        engines = [Engine]

    hipdnn_plugin = BenchPlugin
''')


def build(tmp):
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"),
                    f"OUT={tmp}"], check=True)
    with open(os.path.join(tmp, "bench_py_plugin.py"), "w") as f:
        f.write(PY_PLUGIN)
    src = os.path.join(tmp, "loops.c")
    with open(src, "w") as f:
        f.write(LOOP_C)
    so = os.path.join(tmp, "libbench_loops.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", src, "-o", so], check=True)
    return so


def best(fn, reps):
    return min(fn() for _ in range(reps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "execute.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    loops_so = build(tmp)
    os.environ["HIPDNN_PLUGIN_DIR"] = tmp
    os.environ["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests", "plugins"))
    from pyapi import (ffi, lib, create_handle, engine_id_of_cfg, heuristic_configs, plan_for,
                       standin_graph, variant_pack)
    from hipdnn_cabi.backend import execute as bexec, registry, runtime
    has_fast = hasattr(bexec, "set_fast_path")  # False on a tree from before the fast path
    modes = (("python_path", False), ("fast_path", True)) if has_fast else (("python_path", False),)

    def stats():
        return bexec.fast_path_stats() if has_fast else {"fast": 0}

    def switch(on):
        if has_fast:
            bexec.set_fast_path(on)
    from hipdnn_cabi.plugin_sdk.core import engine_id_of
    ffi.cdef("""double loop_execute(uint64_t fn, void* h, void* p, void* vp, long n, int* st);
                double loop_plugin(uint64_t fn, void* ph, void* ctx, void* ws, const void* bufs,
                                   uint32_t nb, long n, int* st);""")
    loops = ffi.dlopen(loops_so)
    n, reps = args.n, args.reps
    h = create_handle()
    g = standin_graph(h)
    st, cfgs = heuristic_configs(g)
    assert st == 0
    for c in cfgs:
        assert lib.hipdnnBackendFinalize(c) == 0
    by_engine = {engine_id_of_cfg(c): c for c in cfgs}
    py_eid = engine_id_of("HIPDNN_CABI_BENCH_PY_ENGINE")
    c_cfg = next(c for e, c in by_engine.items() if e != py_eid)
    py_cfg = by_engine[py_eid]
    x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [1] * 4); y = ffi.new("float[4]")
    addr = lambda c: int(ffi.cast("uintptr_t", c))
    vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
    ex_addr = int(ffi.cast("uintptr_t", ffi.addressof(lib, "hipdnnBackendExecute")))
    ist = ffi.new("int*")

    def c_exec(p, k):
        def run():
            r = loops.loop_execute(ex_addr, h, p, vp, k, ist)
            assert ist[0] == 0, ist[0]
            return r
        return run

    def py_exec(p, k):
        ex = lib.hipdnnBackendExecute

        def run():
            t0 = time.perf_counter()
            for _ in range(k):
                ex(h, p, vp)
            return (time.perf_counter() - t0) / k
        return run

    ges = lib.hipdnnGetErrorString

    def abi():
        t0 = time.perf_counter()
        for _ in range(n // 10):
            ges(0)
        return (time.perf_counter() - t0) / (n // 10)

    res = {"calls": n, "reps": reps, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
           "python": platform.python_version()}
    t_abi = best(abi, reps)

    # ---- .so plugin
    st, p = plan_for(c_cfg)
    assert st == 0
    plan = registry.objects[addr(p)]
    vpo = registry.objects[addr(vp)]
    bufs = bexec._buffers(vpo)
    fnp = plan.plugin.fn["hipdnnEnginePluginExecuteOpGraph"]
    ph = ffi.cast("void*", int(runtime.ffi.cast("uintptr_t", plan.plugin_handle)))
    ctx = ffi.cast("void*", int(runtime.ffi.cast("uintptr_t", plan.context)))
    cbufs = ffi.cast("void*", int(runtime.ffi.cast("uintptr_t", bufs)))
    so = {}
    for label, on in modes:
        switch(on)
        lib.hipdnnBackendExecute(h, p, vp)  # registers when on
        s0 = stats()
        t_exec = best(c_exec(p, n), reps)
        s1 = stats()
        t_pyc = best(py_exec(p, n // 10), reps)
        so[label] = {"execute_us": round(t_exec * 1e6, 3),
                     "fast_executes": s1["fast"] - s0["fast"],
                     "python_caller_execute_us": round(t_pyc * 1e6, 3),
                     "python_caller_overhead_us": round((t_pyc - t_abi) * 1e6, 3)}
    t_plug = best(lambda: loops.loop_plugin(fnp, ph, ctx, ffi.NULL, cbufs, 3, n, ist), reps)
    for v in so.values():
        v["dispatch_overhead_us"] = round(v["execute_us"] - t_plug * 1e6, 3)
    so["plugin_execute_us"] = round(t_plug * 1e6, 3)
    res["so_plugin"] = so

    # ---- Python plugin
    st, pp = plan_for(py_cfg)
    assert st == 0, st
    pplan = registry.objects[addr(pp)]
    from hipdnn_cabi.plugin_sdk import slots
    from hipdnn_cabi.plugin_sdk.core import DeviceBuffers
    adapter = next(a for a in slots.BACKEND.adapters if a is not None
                   and a.plugin.name == "bench_py_plugin")
    ectx = adapter._contexts[int(runtime.ffi.cast("uintptr_t", pplan.context))]
    cont = adapter._handles[int(runtime.ffi.cast("uintptr_t", pplan.plugin_handle))]
    mapping = {1: addr(x), 2: addr(b), 3: addr(y)}

    def plan_only():
        k = n // 10
        pe, sc = ectx.plan.execute, ectx.scalars
        t0 = time.perf_counter()
        for _ in range(k):
            pe(cont, DeviceBuffers(mapping, None, sc), 0)
        return (time.perf_counter() - t0) / k
    t_plan = best(plan_only, reps)
    pyr = {"plan_execute_us": round(t_plan * 1e6, 3)}
    for label, on in modes:
        switch(on)
        lib.hipdnnBackendExecute(h, pp, vp)
        s0 = stats()
        t_exec = best(c_exec(pp, n // 10), reps)
        s1 = stats()
        pyr[label] = {"execute_us": round(t_exec * 1e6, 3),
                      "fast_executes": s1["fast"] - s0["fast"],
                      "dispatch_overhead_us": round((t_exec - t_plan) * 1e6, 3)}
    res["python_plugin"] = pyr
    switch(True)
    res["abi_call_us"] = round(t_abi * 1e6, 3)
    res["note"] = ("C-loop timings (GIL released, as a C caller); overhead = execute minus the "
                   "plugin's own execute (.so: ExecuteOpGraph in a C loop; Python plugin: "
                   "plan.execute in a Python loop); python_path = fast path off; best of reps")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
