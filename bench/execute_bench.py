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
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include "hipdnn_backend.h"
#include "bench_threads.h"
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

/* What hipDNN's C++ frontend does per Graph::execute: a NEW variant pack every call. */
static int frontend_once(void* h, void* p, const int64_t* uids, void* const* ptrs, int nb, void* ws)
{
    hipdnnBackendDescriptor_t vp = NULL;
    int s = hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    s |= hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, nb, ptrs);
    s |= hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, nb, uids);
    s |= hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &ws);
    s |= hipdnnBackendFinalize(vp);
    s |= hipdnnBackendExecute((hipdnnHandle_t)h, (hipdnnBackendDescriptor_t)p, vp);
    s |= hipdnnBackendDestroyDescriptor(vp);
    return s;
}
double loop_frontend(void* h, void* p, const int64_t* uids, void* const* ptrs, int nb, void* ws, long n, int* st)
{
    int s = 0;
    double t0 = now();
    for (long i = 0; i < n; ++i) s |= frontend_once(h, p, uids, ptrs, nb, ws);
    *st = s;
    return (now() - t0) / n;
}
/* The C floor of the same work: a heap pack, the three attributes copied in, the
 * hipdnnPluginDeviceBuffer_t array packed, the plugin's ExecuteOpGraph, free. */
typedef struct { int64_t uid; void* ptr; } dbuf;
typedef struct { int64_t n; int64_t uids[16]; void* ptrs[16]; void* ws; dbuf b[16]; } floor_pack;
double loop_frontend_floor(uint64_t fn, void* ph, void* ctx, const int64_t* uids, void* const* ptrs, int nb,
                           void* ws, long n, int* st)
{
    plugin_fn f = (plugin_fn)(uintptr_t)fn; int s = 0;
    double t0 = now();
    for (long i = 0; i < n; ++i) {
        floor_pack* vp = (floor_pack*)calloc(1, sizeof *vp);
        memcpy(vp->ptrs, ptrs, sizeof(void*) * nb);
        memcpy(vp->uids, uids, 8 * nb);
        vp->ws = ws;
        vp->n = nb;
        for (int k = 0; k < nb; ++k) { vp->b[k].uid = vp->uids[k]; vp->b[k].ptr = vp->ptrs[k]; }
        __asm__ volatile("" : : "r"(vp) : "memory");
        s |= f(ph, ctx, vp->ws, vp->b, (uint32_t)vp->n);
        free(vp);
    }
    *st = s;
    return (now() - t0) / n;
}
/* The steps of frontend_once alone, to see which one stops scaling (mode 2: create + destroy;
 * mode 3: create, 3 sets, finalize, destroy - no execute; mode 4: execute of a reused pack;
 * mode 5 (in tmain): the plugin's ExecuteOpGraph alone). */
static int steps_once(int mode, void* h, void* p, const int64_t* uids, void* const* ptrs, int nb, void* vp)
{
    if (mode == 4)
        return hipdnnBackendExecute((hipdnnHandle_t)h, (hipdnnBackendDescriptor_t)p, (hipdnnBackendDescriptor_t)vp);
    hipdnnBackendDescriptor_t d = NULL;
    void* ws = NULL;
    int s = hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &d);
    if (mode == 3) {
        s |= hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, nb, ptrs);
        s |= hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, nb, uids);
        s |= hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &ws);
        s |= hipdnnBackendFinalize(d);
    }
    s |= hipdnnBackendDestroyDescriptor(d);
    return s;
}
/* T threads, thread t on handle hs[t] with its own plan ps[t] (plugin handle phs[t], context ctxs[t]),
 * buffers ptrs[3t..3t+2] and (mode 4) finalized pack vps[t]: aggregate calls/s over one window of
 * `window` seconds (bench_threads.h: pinned threads, a barrier, chunks of n calls until the stop
 * flag).  Each thread's argument block is on cache lines of its own. */
typedef struct { void* h; void* p; const int64_t* uids; void* const* ptrs; int nb; int mode; int st;
                 uint64_t fn; void* ph; void* ctx; void* vp; bt_clock clk; }
    __attribute__((aligned(128))) targ;
static void* tmain(void* a_)
{
    targ* a = (targ*)a_;
    const long n = a->clk.chunk;
    dbuf b[16];
    for (int k = 0; k < a->nb && k < 16; ++k) { b[k].uid = a->uids[k]; b[k].ptr = a->ptrs[k]; }
    int s = 0;
    bt_begin(&a->clk);
    do {
        int st = 0;
        if (a->mode == 0) {
            loop_frontend(a->h, a->p, a->uids, a->ptrs, a->nb, NULL, n, &st);
        } else if (a->mode == 1) {
            loop_frontend_floor(a->fn, a->ph, a->ctx, a->uids, a->ptrs, a->nb, NULL, n, &st);
        } else if (a->mode == 5) { /* the plugin's own ExecuteOpGraph, the thread's buffers (no pack) */
            loop_plugin(a->fn, a->ph, a->ctx, NULL, b, (uint32_t)a->nb, n, &st);
        } else {
            for (long i = 0; i < n; ++i) st |= steps_once(a->mode, a->h, a->p, a->uids, a->ptrs, a->nb, a->vp);
        }
        s |= st;
    } while (bt_more(&a->clk));
    a->st = s;
    return NULL;
}
double threads_run(int T, void** hs, void** ps, const int64_t* uids, void* const* ptrs, int nb, long n, int mode,
                   uint64_t fn, void** phs, void** ctxs, void** vps, double window, int* st)
{
    static targ a[64];
    for (int t = 0; t < T; ++t)
        a[t] = (targ){hs[t], ps[t], uids, ptrs + 3 * t, nb, mode, 0, fn, phs[t], ctxs[t], vps[t], {.chunk = n}};
    double r = bt_window(T, tmain, a, sizeof a[0], offsetof(targ, clk), window);
    int s = 0;
    for (int t = 0; t < T; ++t) s |= a[t].st;
    *st = s;
    return r;
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
    libdir = os.path.join(ROOT, "hipdnn_cabi", "lib")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-I", os.path.join(ROOT, "include"),
                    "-I", os.path.join(ROOT, "bench"), src, "-o", so,
                    "-L", libdir, "-lhipdnn_backend", f"-Wl,-rpath,{libdir}", "-pthread"], check=True)
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
                                   uint32_t nb, long n, int* st);
                double loop_frontend(void* h, void* p, const int64_t* uids, void* const* ptrs, int nb,
                                     void* ws, long n, int* st);
                double loop_frontend_floor(uint64_t fn, void* ph, void* ctx, const int64_t* uids,
                                           void* const* ptrs, int nb, void* ws, long n, int* st);
                double threads_run(int T, void** hs, void** ps, const int64_t* uids, void* const* ptrs,
                                   int nb, long n, int mode, uint64_t fn, void** phs, void** ctxs,
                                   void** vps, double window, int* st);""")
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
    vpo = registry.resolve(addr(vp))  # C-resident pack: a snapshot view
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

    # ---- frontend-style execute: create, 3 sets, finalize, execute, destroy per call
    uids_c = ffi.new("int64_t[]", [1, 2, 3])
    ptrs_c = ffi.new("void*[]", [x, b, y])
    has_cvp = hasattr(runtime.lib, "hipdnn_cabi_vp_set_resident")

    def fe(pp, k):
        def run():
            r = loops.loop_frontend(h, pp, uids_c, ptrs_c, 3, ffi.NULL, k, ist)
            assert ist[0] == 0, ist[0]
            return r
        return run
    switch(True)
    t_fe = best(fe(p, n // 4), reps)
    t_floor = best(lambda: loops.loop_frontend_floor(fnp, ph, ctx, uids_c, ptrs_c, 3, ffi.NULL, n, ist), reps)
    fs = {"execute_us": round(t_fe * 1e6, 3), "c_floor_us": round(t_floor * 1e6, 3),
          "ratio_to_c_floor": round(t_fe / t_floor, 1), "goal_us": 1.5, "meets_goal": t_fe * 1e6 <= 1.5}
    if has_cvp:  # the same loop with packs made in Python (the path before C-resident packs)
        runtime.lib.hipdnn_cabi_vp_set_resident(0)
        fs["python_packs_execute_us"] = round(best(fe(p, max(n // 100, 100)), reps) * 1e6, 3)
        runtime.lib.hipdnn_cabi_vp_set_resident(1)
    so["frontend_style"] = fs

    # ---- threads: T C threads, each on its own handle, plan and output buffer
    T_MAX = int(os.environ.get("EXECUTE_BENCH_THREADS", "8"))
    hs = [create_handle() for _ in range(T_MAX)]
    # each thread's output on cache lines of its own (128-byte aligned, 128 bytes apart: the
    # adjacent-line prefetcher pairs 64-byte lines): adjacent 16-byte outputs would make the
    # threads' plugin writes share lines (false sharing)
    ybuf = ffi.new("float[]", 32 * (T_MAX + 1))
    y0 = (addr(ybuf) + 127) & ~127
    ys = [ffi.cast("float*", y0 + 128 * t) for t in range(T_MAX)]
    ptrs_t = ffi.new("void*[]", [q for t in range(T_MAX) for q in (x, b, ys[t])])
    ps, phs, ctxs, vps = [], [], [], []
    for t, hh in enumerate(hs):  # the first execute of each handle registers it (Python path)
        gt = standin_graph(hh)
        st, cf = heuristic_configs(gt)
        assert st == 0
        for c in cf:
            assert lib.hipdnnBackendFinalize(c) == 0
        cft = next(c for c in cf if engine_id_of_cfg(c) != py_eid)
        st, pt = plan_for(cft)
        assert st == 0, st
        po = registry.objects[addr(pt)]
        ps.append(pt)
        phs.append(ffi.cast("void*", int(runtime.ffi.cast("uintptr_t", po.plugin_handle))))
        ctxs.append(ffi.cast("void*", int(runtime.ffi.cast("uintptr_t", po.context))))
        v = variant_pack([1, 2, 3], [addr(x), addr(b), addr(ys[t])])
        assert lib.hipdnnBackendExecute(hh, pt, v) == 0
        vps.append(v)  # kept: the reused-pack rows (steps)
    hs_c, ps_c, vps_c = ffi.new("void*[]", hs), ffi.new("void*[]", ps), ffi.new("void*[]", vps)
    phs_c, ctxs_c = ffi.new("void*[]", phs), ffi.new("void*[]", ctxs)
    # windows of 50 ms, chunks of ~0.1 ms of one thread's work, best of max(reps, 7)
    nt = max(int(1e-4 / max(t_fe, 1e-8)), 16)
    treps = max(reps, 7)
    kinds = (("frontend_style", 0), ("c_floor", 1), ("step_create_destroy", 2),
             ("step_pack_cycle", 3), ("step_execute_reused_pack", 4), ("step_plugin_execute", 5))
    Ts = [T for T in (1, 2, 4, 8, 16) if T <= T_MAX]
    thr = {str(T): {} for T in Ts}
    # the thread counts interleaved (all of them, then again: treps passes) so that the machine's
    # drift (other tenants of a shared VM) reaches every count alike; the best window of each
    for label, mode in kinds:
        k = nt if mode < 2 else 2 * nt
        top = dict.fromkeys(Ts, 0.0)
        for _ in range(treps):
            for T in Ts:
                r = loops.threads_run(T, hs_c, ps_c, uids_c, ptrs_t, 3, k, mode, fnp, phs_c, ctxs_c, vps_c,
                                      0.05, ist)
                assert ist[0] == 0, (label, T, ist[0])
                top[T] = max(top[T], r)
        for T in Ts:
            thr[str(T)][label + "_calls_per_s"] = round(top[T])
    base = {label: thr["1"][label + "_calls_per_s"] for label, _ in kinds}
    for T, row in thr.items():
        for label, _ in kinds:
            row[label + "_speedup"] = round(row[label + "_calls_per_s"] / base[label], 2)
    thr["goal"] = "8 threads >= 1.7x one thread on 2 cores (>= 6x on 16 cores)"
    thr["note"] = ("each thread its own handle, plan (C sample plugin context) and output buffer; "
                   "c_floor = the same work in plain C on the same plugin; both scale with what the "
                   "machine gives (2 shared cores here); step_* = parts of frontend_style alone: "
                   "create+destroy of a pack, create+3 sets+finalize+destroy, execute of a reused pack, "
                   "the plugin's own ExecuteOpGraph on the thread's buffers (no backend call); "
                   "aggregate calls over the wall time of one 50 ms window, threads pinned one per CPU "
                   "while they fit (bench/bench_threads.h); best of %d windows, the thread counts "
                   "interleaved" % treps)
    thr["cpus"] = os.cpu_count()
    so["threads"] = thr
    for v in vps:
        lib.hipdnnBackendDestroyDescriptor(v)
    for hh in hs:
        lib.hipdnnDestroy(hh)
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
