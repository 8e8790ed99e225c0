"""Fill the kernel cache with every attention source the GPU tests and the SDPA benchmark use,
compiled in parallel (one NVRTC per process) - a device run then spends no time compiling."""
from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, HERE, os.path.join(ROOT, "bench")]


def _compile(src):
    from engine_plugins.hip_kernels import codegen
    from hipdnn_cabi import device
    rt = device.get_runtime()
    rt.compile(src, "attn.hip", (), codegen.headers())
    return len(src)


def sources():
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    import test_attention as ta
    from gpu_bench import SDPA_CASES
    graphs = [g for _, g in ((n, p) for n, p in ())]
    progs = [p for _, p in ta._programs()]
    for name, dt, B, H, Hkv, S, D, causal in SDPA_CASES:
        at = {"causal_mask": True} if causal else {}
        progs.append(build_program(parse_graph(ta.fwd_graph(dt, B, H, Hkv, S, S, D, **at)[1])))
        progs.append(build_program(parse_graph(ta.bwd_graph(dt, B, H, Hkv, S, S, D, **at)[1])))
    for D in (64, 128):
        progs.append(build_program(parse_graph(ta.fwd_graph("HALF", 2, 3, 3, 77, D, D, drop=0.35, stats=False)[1])))
    del graphs
    return sorted({st[1] for p in progs for st in p.steps if st[0] == "launch"})


if __name__ == "__main__":
    srcs = sources()
    with ProcessPoolExecutor(max_workers=min(14, os.cpu_count() or 2)) as ex:
        n = sum(1 for _ in ex.map(_compile, srcs))
    print(f"prewarmed {n} attention sources")
