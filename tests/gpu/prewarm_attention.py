"""Fill the kernel cache with every attention source the GPU tests and the SDPA benchmark use,
compiled in parallel (one NVRTC per process) - a device run then spends no time compiling."""
from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, HERE, os.path.join(ROOT, "bench")]


def _compile(item):
    from engine_plugins.hip_kernels import codegen
    from hipdnn_cabi import device
    src, arch = item
    rt = device.get_runtime()
    rt.compile(src, "attn.hip", (), codegen.headers(), arch)
    return len(src)


def sources():
    """(source, target) of every attention step, built for the device's own target (on an
    H200 the forward is the wgmma kernel, compiled for sm_90a)."""
    from engine_plugins.hip_kernels.engine import device_arch
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    import test_attention as ta
    import test_attention_headdim as tah
    from gpu_bench import SDPA_CASES
    arch = device_arch()

    def build(g):
        return build_program(parse_graph(g), arch=arch)
    progs = [build(ta.fwd_graph(**c)[1]) for c in ta.CONFIGS + ta.WG_CONFIGS]
    for name, dt, B, H, Hkv, S, D, causal in SDPA_CASES:
        at = {"causal_mask": True} if causal else {}
        progs.append(build(ta.fwd_graph(dt, B, H, Hkv, S, S, D, **at)[1]))
        progs.append(build(ta.bwd_graph(dt, B, H, Hkv, S, S, D, **at)[1]))
    for D in (64, 128):
        progs.append(build(ta.fwd_graph("HALF", 2, 3, 3, 77, D, D, drop=0.35, stats=False)[1]))
    progs += [p for _, p in tah.programs(build)]
    import test_attention_blockmask as tab     # block masks, max / sum_exp types, rng_dump shapes
    prev = os.environ.get("HIPDNN_CABI_HIP_ATTN")
    for knob in ("auto", "mma"):
        os.environ["HIPDNN_CABI_HIP_ATTN"] = knob
        progs += [build(tab.fwd_graph(**c)[1]) for c in tab.BLOCK_CONFIGS]
        progs += [build(tab.fwd_graph("HALF", 3, 2, 2, 77, 131, 64, maxsum=mt, seq=True,
                                      causal_mask=True)[1]) for mt in ("HALF", "BFLOAT16", "DOUBLE")]
    os.environ.pop("HIPDNN_CABI_HIP_ATTN")
    if prev is not None:
        os.environ["HIPDNN_CABI_HIP_ATTN"] = prev
    progs += [build(tab._rng_graph(d, s)[1]) for d, s in tab.RNG_DIMS]
    # the wgmma backward's variants the benchmark and test_attention_bwd_wgmma.py time / check
    import test_attention_bwd_wgmma as tbw
    sched, ovl = "HIPDNN_CABI_HIP_ATTN_BWD_SCHED", "HIPDNN_CABI_HIP_ATTN_BWD_OVL"
    for knobs in ({sched: "0"}, {"HIPDNN_CABI_HIP_ATTN_BWD_BM": "128"}, {ovl: "0", sched: "0"},
                  {ovl: "1", sched: "0"}, {ovl: "1", sched: "1"}, {}):
        prevk = {k: os.environ.get(k) for k in knobs}
        os.environ.update(knobs)
        for name, dt, B, H, Hkv, S, D, causal in SDPA_CASES:
            at = {"causal_mask": True} if causal else {}
            progs.append(build(ta.bwd_graph(dt, B, H, Hkv, S, S, D, **at)[1]))
        progs += [build(tbw.graph(c)[1]) for c in tbw.CASES]
        for k, v in prevk.items():
            os.environ.pop(k)
            if v is not None:
                os.environ[k] = v
    # the decode kernel's cases (test_attention_decode.py) and the benchmark's decode graphs (paged
    # and contiguous K/V), with the decode knob on and off
    import test_attention_decode as tad
    from test_attention_paged_ragged import paged_graph
    prevd = os.environ.get("HIPDNN_CABI_HIP_ATTN_DECODE")
    for val in ("1", "0"):
        os.environ["HIPDNN_CABI_HIP_ATTN_DECODE"] = val
        progs += [build(tad.decode_graph(c)[1]) for c in tad.CASES]
        progs.append(build(paged_graph("HALF", 64, 32, 8, 1, 128, 64, 4096, 64, skv=4096)[1]))
        progs.append(build(ta.fwd_graph("HALF", 64, 32, 8, 1, 4096, 128)[1]))
    os.environ.pop("HIPDNN_CABI_HIP_ATTN_DECODE")
    if prevd is not None:
        os.environ["HIPDNN_CABI_HIP_ATTN_DECODE"] = prevd
    return sorted({(st[1], (st[6] if len(st) > 6 and isinstance(st[6], dict) else {}).get("arch"))
                   for p in progs for st in p.steps if st[0] == "launch"}, key=str)


if __name__ == "__main__":
    srcs = sources()
    with ProcessPoolExecutor(max_workers=min(14, os.cpu_count() or 2)) as ex:
        n = sum(1 for _ in ex.map(_compile, srcs))
    print(f"prewarmed {n} attention sources")
