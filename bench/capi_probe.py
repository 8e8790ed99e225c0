#!/usr/bin/env python3
"""Diagnostic (by hand on a GPU machine): where the C API rows of the GPU benchmark
lose time against the plugin-object rows.  For one GEMM (fp16 4096^3) and a tiny relu it prints,
for both paths: the CUDA-event median (what gpu_bench reports), the host time of one call after a
sync, the C fast-path counters, the kernels each plan launches, and a profile of the C API path's
Python calls.  Usage: python bench/capi_probe.py  (run from the repo root; needs torch + a GPU)."""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests", "gpu"), os.path.dirname(HERE)]


def host_us(torch, fn, n=30):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(out)


def gpu_plans():
    """(steps of every GpuPlan the SDK adapters hold) - kernel names and grids."""
    from hipdnn_cabi.plugin_sdk import slots
    rows = []
    for a in slots.BACKEND.adapters:
        if a is None:
            continue
        for ctx in getattr(a, "_contexts", {}).values():
            p = getattr(ctx, "plan", None)
            if p is None or not hasattr(p, "steps"):
                continue
            rows.append([(getattr(s[1], "fn", None) and str(s[1].grid), str(getattr(s[1], "block", "")))
                         if s[0] == "launch" else s for s in p.steps])
    return rows


def main():
    import torch
    import capi_path
    from gpu_bench import Engine, median_ms
    from gpu_testlib import T, graph_bytes, matmul, pw
    from hipdnn_cabi.backend import execute as bexec
    E = Engine(torch)
    cases = []
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    g = graph_bytes([T(1, [n, n], "HALF"), T(2, [n, n], "HALF"), T(3, [n, n], "HALF")], [matmul(1, 2, 3)])
    cases.append(("gemm_fp16_4096", g, {1: a, 2: b, 3: c}, lambda gg, TT: gg.matmul(TT("a"), TT("b")),
                  {"a": a, "b": b, "c": c}, ("c",)))
    x = torch.randn(1, 256, device="cuda")
    y = torch.empty_like(x)
    g2 = graph_bytes([T(1, [1, 256]), T(2, [1, 256])], [pw("RELU_FWD", 1, 2)])
    cases.append(("relu_256", g2, {1: x, 2: y}, lambda gg, TT: gg.relu(TT("x")), {"x": x, "y": y}, ("y",)))
    for name, gb, pbufs, build, cbufs, outs in cases:
        run, _ = E.prepare(gb, pbufs)
        crun = capi_path.prepare(build, cbufs, stream=torch.cuda.current_stream().cuda_stream, outputs=outs,
                                 workspace=lambda k: torch.empty(k, dtype=torch.uint8, device="cuda"))
        crun()
        torch.cuda.synchronize()
        print(f"== {name}: workspace {crun.graph.get_workspace_size()} B, wsp {crun.wsp}")
        for label, fn in (("plugin", run), ("capi", crun)):
            ev = median_ms(torch, fn)[0]
            s0 = bexec.fast_path_stats()
            hu = host_us(torch, fn)
            s1 = bexec.fast_path_stats()
            print(f"  {label}: event median {ev * 1e3:.1f} us, host one call {hu:.1f} us, fast "
                  f"{s1['fast'] - s0['fast']} python {s1['python'] - s0['python']}", flush=True)
        print("  frontend cache entries:", len(crun.graph.__dict__.get("_xcache") or {}))
        print("  plans:", gpu_plans()[-2:])
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            crun()
            torch.cuda.synchronize()
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
        print(s.getvalue()[-4000:], flush=True)


if __name__ == "__main__":
    main()
