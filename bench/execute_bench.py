#!/usr/bin/env python3
"""Dispatch overhead of hipdnnBackendExecute on the C sample plugin.

Measures, in one process (cffi ABI mode, same path a C caller takes into the library):
  * t_exec:   hipdnnBackendExecute(handle, plan, vp) per call
  * t_plugin: the plugin's own hipdnnEnginePluginExecuteOpGraph per call (called directly through
              the same trampoline, same context and buffers)
  * t_abi:    a trivial exported call (hipdnnGetErrorString) — the caller-side ffi cost
overhead = t_exec - t_plugin - t_abi.  Writes bench/results/execute.json.

Usage: python bench/execute_bench.py [--n 20000] [--elems 32]   (builds the C sample plugin)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "execute.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"),
                    f"OUT={tmp}"], check=True)
    os.environ["HIPDNN_PLUGIN_DIR"] = tmp
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests", "plugins"))
    from pyapi import ffi, lib, create_handle, standin_graph, heuristic_configs, plan_for, variant_pack
    from hipdnn_cabi.backend import registry, runtime
    h = create_handle()
    g = standin_graph(h)
    st, cfgs = heuristic_configs(g)
    assert st == 0 and lib.hipdnnBackendFinalize(cfgs[0]) == 0
    st, p = plan_for(cfgs[0])
    assert st == 0
    x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [1] * 4); y = ffi.new("float[4]")
    addr = lambda c: int(ffi.cast("uintptr_t", c))
    vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
    n = args.n

    def timeit(fn):
        for _ in range(min(1000, n)):
            fn()
        best = None
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            dt = (time.perf_counter() - t0) / n
            best = dt if best is None else min(best, dt)
        return best

    ex = lib.hipdnnBackendExecute
    t_exec = timeit(lambda: ex(h, p, vp))
    plan = registry.objects[int(ffi.cast("uintptr_t", p))]
    vpo = registry.objects[int(ffi.cast("uintptr_t", vp))]
    from hipdnn_cabi.backend.execute import _buffers
    bufs = _buffers(vpo)
    tramp = runtime.lib.tramp_hipdnnEnginePluginExecuteOpGraph
    fnp = plan.plugin.fn["hipdnnEnginePluginExecuteOpGraph"]
    ctx, ph, ws, nb = plan.context, plan.plugin_handle, runtime.ffi.NULL, len(vpo.uids)
    t_plugin = timeit(lambda: tramp(fnp, ph, ctx, ws, bufs, nb))
    ges = lib.hipdnnGetErrorString
    t_abi = timeit(lambda: ges(0))
    res = {
        "calls": n,
        "execute_us": round(t_exec * 1e6, 3),
        "plugin_execute_us": round(t_plugin * 1e6, 3),
        "abi_call_us": round(t_abi * 1e6, 3),
        "dispatch_overhead_us": round((t_exec - t_plugin - t_abi) * 1e6, 3),
        "note": "best of 3 runs; overhead = execute - plugin's own ExecuteOpGraph - a trivial ffi call",
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
