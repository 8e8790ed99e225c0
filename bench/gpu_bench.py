#!/usr/bin/env python3
"""`make bench-gpu`: the HIP engine side by side with PyTorch (cuBLAS / cuDNN) on the same GPU.

Medians of >= 20 timed runs after warm-up, CUDA events on one stream (PyTorch's current stream,
which the engine is given as the handle stream).  Buffers are PyTorch tensors (cudaMalloc'd
device memory).  Writes bench/results/gpu.json (or --out); `--plots DIR` draws one PNG per
benchmark from a JSON file (run where matplotlib is).

Benchmarks: fp32 GEMM 4096^3 (TF32 off, and with the TF32_MATH knob), fp16 / bf16 GEMMs (square,
LLM shapes; ``gemmodd``: unaligned N / K, the vocabulary projection, decode M), conv2d fwd fp32/fp16
ResNet-50 shapes batch 32 NHWC, NCHW (fp32 FFMA, fp32 TF32, fp16 - the last two through the
layout transform), batchnorm training forward and a 4-op pointwise chain on 256 MB tensors,
execute overhead (from C with a reused variant pack and frontend-style, a new pack per call), the
Python frontend's g.execute on a tiny relu graph against torch.nn.functional.relu.
Rows go through the plugin object (``ours_ms``); at least one row per group also through the
public C API (``capi_ms``: the frontend building descriptors and calling ``hipdnnBackendExecute``
per run, bench/capi_path.py).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import types

from bench_knobs import hip_knobs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

REPS, WARM = 50, 5
SAMPLE_MS = 0.5      # each timed sample runs back-to-back calls for at least this long


def median_ms(torch, fn, reps=REPS, warm=WARM):
    """(median, min, max) milliseconds per call over ``reps`` samples, CUDA events; a sample
    times ``inner`` back-to-back calls (inner = ~SAMPLE_MS / one call's time, 1..50) so calls
    of tens of microseconds are timed on the device rather than on the host's launch latency.
    Both sides of every ratio are timed by this same function."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    inner = max(1, min(50, int(SAMPLE_MS / max(a.elapsed_time(b), 1e-3))))
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    return statistics.median(ts), min(ts), max(ts)


def graph_ms(torch, E, fn, calls=20, reps=20):
    """Median milliseconds per call of ``fn`` replayed from a CUDA graph of ``calls`` captured
    calls (device time without the host's launch cost; both sides of a decode GEMM row are timed
    this way beside :func:`median_ms`).  Our engine launches on the capture stream for the
    capture (``E.container`` set to it, then back)."""
    s = torch.cuda.Stream()
    prev = torch.cuda.current_stream().cuda_stream
    E.container.set_stream(s.cuda_stream)
    try:
        with torch.cuda.stream(s):
            fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / calls)
        return statistics.median(ts)
    finally:
        E.container.set_stream(prev)


class Engine:
    def __init__(self, torch):
        from hipdnn_cabi import device
        from engine_plugins.hip_kernels import create_plugin
        from engine_plugins.hip_kernels.engine import ENGINE_NAME
        from hipdnn_cabi.plugin_sdk import engine_id_of
        self.torch = torch
        self.rt = device.get_runtime()
        self.container = create_plugin().create_container()
        self.container.set_stream(torch.cuda.current_stream().cuda_stream)
        self.cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})

    def prepare(self, gbytes, bufs, knobs=None):
        from hipdnn_cabi.plugin_sdk import DeviceBuffers, parse_graph
        t0 = time.perf_counter()
        cfg = self.cfg if not knobs else types.SimpleNamespace(engine_id=self.cfg.engine_id, knobs=dict(knobs))
        ctx = self.container.create_execution_context(cfg, parse_graph(gbytes))
        build_s = time.perf_counter() - t0
        wsz = self.container.get_workspace_size_from_context(ctx)
        ws = self.torch.empty(max(1, wsz), dtype=self.torch.uint8, device="cuda")
        db = DeviceBuffers({u: t.data_ptr() for u, t in bufs.items()})
        wsp = ws.data_ptr() if wsz else 0

        def run():
            self.container.execute(ctx, wsp, db)
        run._keep = (ws, bufs, ctx)
        return run, build_s


def tstrides(t):
    return list(t.stride())


def capi_row(torch, row, build, bufs, outputs, theirs_ms, knobs=None, check=None):
    """Time the same op through the public C API (bench/capi_path.py) and add ``capi_ms``,
    ``capi_ratio`` (PyTorch / C API) and ``capi_rel_err`` (``check()`` after one run) to ``row``."""
    import capi_path
    try:
        run = capi_path.prepare(build, bufs, stream=torch.cuda.current_stream().cuda_stream,
                                knobs=knobs, outputs=outputs,
                                workspace=lambda n: torch.empty(n, dtype=torch.uint8, device="cuda"))
        for o in outputs:
            bufs[o].fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        if check is not None:
            row["capi_rel_err"] = float(check())
        t = median_ms(torch, run)
        row["capi_ms"] = t[0]
        row["capi_ratio"] = theirs_ms / t[0]
        print(f"   C API path (hipdnnBackendExecute): {t[0]:.3f} ms -> {theirs_ms / t[0]:.2f}x"
              f"  err {row.get('capi_rel_err', float('nan')):.1e}", flush=True)
    except Exception as e:  # noqa: BLE001 - recorded in the row
        import traceback
        traceback.print_exc()
        row["capi_error"] = f"{type(e).__name__}: {e}"


def _rel(torch, got, ref):
    return (got.double() - ref.double()).norm() / ref.double().norm()


def bench_gemm(torch, E, res):
    from gpu_testlib import T, graph_bytes, matmul
    n = 4096
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    g = graph_bytes([T(1, [n, n]), T(2, [n, n]), T(3, [n, n])], [matmul(1, 2, 3)])
    run, bs = E.prepare(g, {1: a, 2: b, 3: c})
    torch.backends.cuda.matmul.allow_tf32 = False
    ours = median_ms(torch, run)
    ref = torch.matmul(a.double(), b.double()).float()
    err = float((c - ref).norm() / ref.norm())
    d = torch.empty_like(c)
    theirs = median_ms(torch, lambda: torch.matmul(a, b, out=d))
    fl = 2 * n ** 3
    row = res["gemm_fp32_4096"] = {"ours_ms": ours[0], "torch_ms": theirs[0], "ours_tflops": fl / ours[0] / 1e9,
                                   "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0],
                                   "rel_err": err, "plan_build_s": bs, "target": 0.7}
    print(f"GEMM fp32 4096^3: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.1f} TFLOP/s), cuBLAS "
          f"{theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x  err {err:.1e}", flush=True)
    capi_row(torch, row, lambda g, T: g.matmul(T("a"), T("b")), {"a": a, "b": b, "c": c}, ("c",),
             theirs[0], check=lambda: _rel(torch, c, ref))
    # TF32 tensor cores (engine knob TF32_MATH = 1) vs cuBLAS with allow_tf32
    run, bs = E.prepare(g, {1: a, 2: b, 3: c}, knobs={"TF32_MATH": 1})
    ours = median_ms(torch, run)
    err = float((c - ref).norm() / ref.norm())
    torch.backends.cuda.matmul.allow_tf32 = True
    theirs = median_ms(torch, lambda: torch.matmul(a, b, out=d))
    terr = float((d - ref).norm() / ref.norm())
    torch.backends.cuda.matmul.allow_tf32 = False
    row = res["gemm_fp32_tf32_4096"] = {
        "ours_ms": ours[0], "torch_ms": theirs[0], "ours_tflops": fl / ours[0] / 1e9,
        "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0], "rel_err": err,
        "torch_rel_err": terr, "plan_build_s": bs, "knob": "TF32_MATH=1 (cuBLAS allow_tf32)"}
    print(f"GEMM fp32 TF32 4096^3: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.1f} TFLOP/s), cuBLAS TF32 "
          f"{theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x  err {err:.1e} (cuBLAS {terr:.1e})", flush=True)
    capi_row(torch, row, lambda g, T: g.matmul(T("a"), T("b")), {"a": a, "b": b, "c": c}, ("c",),
             theirs[0], knobs={"TF32_MATH": 1}, check=lambda: _rel(torch, c, ref))
    del a, b, c, d
    bench_gemm_int8(torch, E, res)


def bench_gemm_int8(torch, E, res):
    """INT8 GEMM 8192^3 (INT32 output; s8 wgmma core on Hopper) vs torch._int_mm (cuBLASLt) in
    the same process, b K-major on both sides (no layout copies); exact against int64 sums of 64
    sampled rows (float64 products: every sum is far below 2^53)."""
    from gpu_testlib import FB, T, graph_bytes, matmul
    n = 8192
    a = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
    bt = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
    b = bt.t()                                   # [K, N] with strides [1, K]: K-major
    c = torch.empty(n, n, device="cuda", dtype=torch.int32)
    node = matmul(1, 2, 3)
    node["compute_data_type"] = FB["DataType"]["INT32"]
    g = graph_bytes([T(1, [n, n], "INT8"), T(2, [n, n], "INT8", strides=[1, n]), T(3, [n, n], "INT32")], [node])
    run, bs = E.prepare(g, {1: a, 2: b, 3: c})
    ours = median_ms(torch, run)
    c.fill_(0)
    run()
    torch.cuda.synchronize()
    rows = torch.randperm(n, device="cuda")[:64]
    ref = torch.matmul(a[rows].double(), b.double()).round().long()
    bad = int((c[rows].long() != ref).sum())
    fl = 2 * n ** 3
    row = res["gemm_int8_8192"] = {"ours_ms": ours[0], "ours_tops": fl / ours[0] / 1e9, "mismatches": bad,
                                   "plan_build_s": bs, "target": 0.8}
    try:
        d = torch._int_mm(a, b)
        row["torch_mismatches"] = int((d[rows].long() != ref).sum())
        theirs = median_ms(torch, lambda: torch._int_mm(a, b))
        row.update({"torch_ms": theirs[0], "torch_tops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0]})
        print(f"GEMM int8 8192^3 (INT32 out): ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.0f} TOP/s), "
              f"torch._int_mm {theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x (target 0.8), "
              f"mismatches {bad}", flush=True)
    except Exception as e:  # noqa: BLE001 - recorded in the row
        row["torch_error"] = f"{type(e).__name__}: {e}"
        print(f"GEMM int8 8192^3: ours {ours[0]:.3f} ms, mismatches {bad}; torch._int_mm: {e}", flush=True)
    del a, b, bt, c


def bench_gemm16(torch, E, res):
    """fp16 / bf16 GEMM (wgmma core) vs cuBLAS: 4096^3 and LLM shapes (M = 8192)."""
    from gpu_testlib import T, graph_bytes, matmul
    shapes = [(4096, 4096, 4096)] + [(8192, n, k) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008),
                                                                (14336, 4096), (4096, 14336))]
    out = {}
    for dt_name, tdt in (("HALF", torch.float16), ("BFLOAT16", torch.bfloat16)):
        for M, N, K in shapes:
            a = torch.randn(M, K, device="cuda", dtype=tdt)
            b = torch.randn(K, N, device="cuda", dtype=tdt)
            c = torch.empty(M, N, device="cuda", dtype=tdt)
            g = graph_bytes([T(1, [M, K], dt_name), T(2, [K, N], dt_name), T(3, [M, N], dt_name)],
                            [matmul(1, 2, 3)])
            run, bs = E.prepare(g, {1: a, 2: b, 3: c})
            ours = median_ms(torch, run)
            ref = torch.matmul(a.float(), b.float())
            err = float((c.float() - ref).norm() / ref.norm())
            d = torch.empty_like(c)
            theirs = median_ms(torch, lambda: torch.matmul(a, b, out=d))
            fl = 2 * M * N * K
            key = f"{dt_name.lower()}_{M}x{N}x{K}"
            tgt = 0.6 if M == 4096 else 0.5
            out[key] = {"ours_ms": ours[0], "torch_ms": theirs[0], "ours_tflops": fl / ours[0] / 1e9,
                        "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0],
                        "rel_err": err, "plan_build_s": bs, "target": tgt}
            print(f"GEMM {key}: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.1f} TFLOP/s), cuBLAS "
                  f"{theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x (target {tgt}) err {err:.1e}", flush=True)
            if M == 4096:
                capi_row(torch, out[key], lambda g, T: g.matmul(T("a"), T("b")), {"a": a, "b": b, "c": c},
                         ("c",), theirs[0], check=lambda: _rel(torch, c, ref))
            del a, b, c, d
    res["gemm_16bit"] = {"cases": out, "target": "0.6 (4096^3), 0.5 (M = 8192)"}


def bench_gemm_odd(torch, E, res):
    """bf16 GEMMs of any alignment and small M vs cuBLAS (torch.matmul, same process): N / K not
    multiples of 8 (rows not 16-byte aligned: the pad pre-pass, layout.pad_matmul), the vocabulary
    projection (N = 50257) and decode shapes M in {1, 16, 64} x N, K in {4096, 12288} (swap-AB /
    split-K from the cost model).  Errors of both against a float64 product."""
    from engine_plugins.hip_kernels.engine import analyse
    from gpu_testlib import T, graph_bytes, matmul
    from hipdnn_cabi.plugin_sdk import parse_graph
    shapes = [(4097, 4095, 4096, 0.8), (4096, 50257, 4096, 0.8)]
    shapes += [(m, n, k, 0.95) for m in (1, 16, 64) for n, k in ((4096, 4096), (12288, 4096),
                                                                 (4096, 12288), (12288, 12288))]
    out = {}
    tdt = torch.bfloat16
    for M, N, K, tgt in shapes:
        a = torch.randn(M, K, device="cuda", dtype=tdt)
        b = torch.randn(K, N, device="cuda", dtype=tdt) * K ** -0.5
        c = torch.empty(M, N, device="cuda", dtype=tdt)
        g = graph_bytes([T(1, [M, K], "BFLOAT16"), T(2, [K, N], "BFLOAT16"), T(3, [M, N], "BFLOAT16")],
                        [matmul(1, 2, 3)])
        run, bs = E.prepare(g, {1: a, 2: b, 3: c})
        ours = median_ms(torch, run)
        d = torch.empty_like(c)
        theirs = median_ms(torch, lambda: torch.matmul(a, b, out=d))
        ref = torch.matmul(a.double(), b.double())
        err, terr = float(_rel(torch, c, ref)), float(_rel(torch, d, ref))
        del ref
        an = analyse(parse_graph(g))
        path = [n for n in (an.program.notes if an.ok else [an.reason])
                if any(w in n for w in ("pad pre-pass", "swap-AB", "wgmma core", "split-K"))]
        fl = 2 * M * N * K
        key = f"bf16_{M}x{N}x{K}"
        out[key] = {"ours_ms": ours[0], "torch_ms": theirs[0], "ours_tflops": fl / ours[0] / 1e9,
                    "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0],
                    "rel_err": err, "torch_rel_err": terr, "plan_build_s": bs, "target": tgt,
                    "path": path}
        if M <= 64:         # decode: also device time alone (CUDA-graph replay, both sides)
            try:
                og = graph_ms(torch, E, run)
                tg = graph_ms(torch, E, lambda: torch.matmul(a, b, out=d))
                out[key].update(ours_graph_ms=og, torch_graph_ms=tg, ratio_graph=tg / og)
                print(f"   CUDA-graph replay: ours {og * 1e3:.1f} us, cuBLAS {tg * 1e3:.1f} us -> "
                      f"{tg / og:.2f}x", flush=True)
            except Exception as e:  # noqa: BLE001 - recorded in the row
                out[key]["graph_error"] = f"{type(e).__name__}: {e}"[:300]
        print(f"GEMM {key}: ours {ours[0]:.4f} ms ({fl / ours[0] / 1e9:.1f} TFLOP/s), cuBLAS "
              f"{theirs[0]:.4f} ms -> {theirs[0] / ours[0]:.2f}x (target {tgt}) err {err:.1e} "
              f"(cuBLAS {terr:.1e})  {'; '.join(path)}", flush=True)
        del a, b, c, d
        torch.cuda.empty_cache()
    res["gemm_odd"] = {"cases": out, "target": "0.8 (odd N / K), 0.95 (M <= 64)"}


ODD_CONV = [  # name, N, C, K, H, R, stride, pad, layout, directions
    ("first_7x7s2", 32, 3, 64, 224, 7, 2, 3, "nhwc", ("fwd",)),     # ResNet-50 conv1, C = 3
    ("first_7x7s2_nchw", 32, 3, 64, 224, 7, 2, 3, "nchw", ("fwd",)),
    ("odd_3x3", 32, 20, 20, 56, 3, 1, 1, "nhwc", ("fwd", "data", "filter")),
]


def bench_conv_odd(torch, E, res):
    """16-bit convolutions whose channel counts are not multiples of 8 vs cuDNN (same process):
    the ResNet-50 first layer (32 x 3 x 224 x 224 -> 64, 7 x 7 / 2; NHWC and NCHW) and an
    odd-channel 3 x 3 (32 x 20 x 56 x 56 -> 20; forward, backward data, backward filter).
    ``ours_ms``: the default plan (the pad pre-pass where the cost model takes it: layout.pad_conv),
    ``nopad_ms``: HIPDNN_CABI_HIP_PAD=0 (element gathers), each with its error against an fp32
    reference and the plan notes."""
    from engine_plugins.hip_kernels.engine import analyse
    from gpu_testlib import T, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes
    from hipdnn_cabi.plugin_sdk import parse_graph
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    tdt = torch.float16
    out = {}
    for name, N, C, K, H, R, st, pad, lay, dirs in ODD_CONV:
        fmt = torch.channels_last if lay == "nhwc" else torch.contiguous_format
        P = (H + 2 * pad - R) // st + 1
        x = torch.randn(N, C, H, H, device="cuda", dtype=tdt).to(memory_format=fmt)
        w = (torch.randn(K, C, R, R, device="cuda", dtype=tdt) / (C * R * R) ** 0.5).to(memory_format=fmt)
        dy = torch.randn(N, K, P, P, device="cuda", dtype=tdt).to(memory_format=fmt)
        tx = T(1, [N, C, H, H], "HALF", strides=tstrides(x))
        tw = T(2, [K, C, R, R], "HALF", strides=tstrides(w))
        ty = T(3, [N, K, P, P], "HALF", strides=tstrides(dy))
        cv = ([pad, pad], [st, st], [1, 1])
        fl = 2 * N * K * P * P * C * R * R
        for d in dirs:
            if d == "fwd":
                g = graph_bytes([tx, tw, ty], [conv_fwd(1, 2, 3, *cv)])
                o = torch.empty_like(dy)
                bufs = {1: x, 2: w, 3: o}
                ref = torch.nn.functional.conv2d(x.float(), w.float(), stride=st, padding=pad)

                def theirs_fn():
                    return torch.nn.functional.conv2d(x, w, stride=st, padding=pad)
            else:
                mask = [d == "data", d == "filter", False]
                if d == "data":
                    g = graph_bytes([ty, tw, tx], [conv_bwd_data(3, 2, 1, *cv)])
                    o = torch.empty_like(x)
                    bufs = {3: dy, 2: w, 1: o}
                else:
                    g = graph_bytes([tx, ty, tw], [conv_bwd_filter(1, 3, 2, *cv)])
                    o = torch.empty_like(w)
                    bufs = {1: x, 3: dy, 2: o}

                def theirs_fn(mask=mask):
                    return torch.ops.aten.convolution_backward(dy, x, w, None, [st, st], [pad, pad], [1, 1],
                                                               False, [0, 0], 1, mask)
                ref = torch.ops.aten.convolution_backward(dy.float(), x.float(), w.float(), None, [st, st],
                                                          [pad, pad], [1, 1], False, [0, 0], 1,
                                                          mask)[0 if d == "data" else 1]
            theirs = median_ms(torch, theirs_fn)

            def one():
                notes = list(analyse(parse_graph(g)).program.notes)
                run, _ = E.prepare(g, bufs)
                o.fill_(float("nan"))
                run()
                torch.cuda.synchronize()
                return median_ms(torch, run)[0], float((o.float() - ref).norm() / ref.norm()), notes
            key = f"half_{name}_{d}"
            row = {"torch_ms": theirs[0], "torch_tflops": fl / theirs[0] / 1e9}
            for var, knobs in (("ours", {}), ("nopad", {"PAD": "0"})):
                try:
                    with hip_knobs(knobs):
                        t, e, notes = one()
                    row.update({f"{var}_ms": t, f"{var}_ratio": theirs[0] / t, f"{var}_rel_err": e,
                                f"{var}_plan": notes})
                    print(f"convodd {key} {var}: {t:.3f} ms ({fl / t / 1e9:.1f} TF/s) cuDNN {theirs[0]:.3f} ms"
                          f" -> {theirs[0] / t:.2f}x err {e:.1e} | {'; '.join(notes)}", flush=True)
                except Exception as ex:  # noqa: BLE001 - recorded in the row
                    row[f"{var}_error"] = f"{type(ex).__name__}: {ex}"
                    print(f"convodd {key} {var}: {type(ex).__name__}: {ex}", flush=True)
            if "ours_ms" in row:
                row["ratio"] = row["ours_ratio"]
            out[key] = row
            del o, ref
        del x, w, dy
        torch.cuda.empty_cache()
    res["conv2d_odd_channels_fp16_b32"] = {"cases": out, "target": "informational (pad pre-pass vs element gathers)"}


def bench_conv_nchw32(torch, E, res):
    """NCHW conv forward (the layout most C callers use) vs cuDNN: fp32 (TF32 off: FFMA), fp32
    with the TF32_MATH knob (vs cuDNN allow_tf32) and fp16 - the last two through the layout
    transform into NHWC in the workspace + the wgmma core."""
    import torch.nn.functional as F
    from gpu_testlib import T, conv_fwd, graph_bytes
    torch.backends.cudnn.benchmark = True
    N = 32
    variants = (("conv2d_fwd_fp32_nchw_b32", "FLOAT", torch.float32, None, 0.5),
                ("conv2d_fwd_fp32_tf32_nchw_b32", "FLOAT", torch.float32, {"TF32_MATH": 1}, None),
                ("conv2d_fwd_fp16_nchw_b32", "HALF", torch.float16, None, 0.9))
    for group, dt_name, tdt, knobs, target in variants:
        torch.backends.cudnn.allow_tf32 = knobs is not None
        out = {}
        for li, (name, C, K, H, R, st, pad) in enumerate(RESNET):
            x = torch.randn(N, C, H, H, device="cuda", dtype=tdt)
            w = torch.randn(K, C, R, R, device="cuda", dtype=tdt) / (C * R * R) ** 0.5
            P = (H + 2 * pad - R) // st + 1
            y = torch.empty(N, K, P, P, device="cuda", dtype=tdt)
            g = graph_bytes([T(1, [N, C, H, H], dt_name), T(2, [K, C, R, R], dt_name), T(3, [N, K, P, P], dt_name)],
                            [conv_fwd(1, 2, 3, [pad, pad], [st, st], [1, 1])])
            run, bs = E.prepare(g, {1: x, 2: w, 3: y}, knobs=knobs)
            ours = median_ms(torch, run)
            ref = F.conv2d(x.double(), w.double(), stride=st, padding=pad)
            err = float((y.double() - ref).norm() / ref.norm())
            theirs = median_ms(torch, lambda: F.conv2d(x, w, stride=st, padding=pad))
            fl = 2 * N * K * P * P * C * R * R
            out[name] = {"ours_ms": ours[0], "torch_ms": theirs[0], "ours_tflops": fl / ours[0] / 1e9,
                         "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0], "rel_err": err,
                         "plan_build_s": bs}
            print(f"{group} {name}: ours {ours[0]:.3f} ms cuDNN {theirs[0]:.3f} ms -> "
                  f"{theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)
            if dt_name == "FLOAT" and knobs is None and R == 3 and st == 1:
                # fp32 3 x 3: the Winograd F(2x2, 3x3) plan and the direct FFMA GEMM, both timed
                # here whatever the knob's default (HIPDNN_CABI_HIP_CONV_WINOGRAD, opt-in)
                _conv_winograd_ab(torch, E, out[name], g, {1: x, 2: w, 3: y}, y, ref, theirs[0], name)
            if li == 2:
                capi_row(torch, out[name],
                         lambda g, T: g.conv_fprop(T("x"), T("w"), padding=[pad, pad], stride=[st, st],
                                                   dilation=[1, 1]),
                         {"x": x, "w": w, "y": y}, ("y",), theirs[0], knobs=knobs,
                         check=lambda: _rel(torch, y, ref))
            del x, w, y, ref
        res[group] = {"cases": out, "target": target, "knobs": knobs or {},
                      "torch": "cuDNN" + (" allow_tf32" if knobs else " TF32 off")}
    torch.backends.cudnn.allow_tf32 = False


def _conv_winograd_ab(torch, E, row, g, bufs, y, ref, theirs_ms, name):
    """Add ``winograd_*`` (knob CONV_WINOGRAD=1) and ``direct_*`` (=0) timings, ratios against
    cuDNN and errors to ``row``: the two fp32 3 x 3 paths in one process."""
    knob = "HIPDNN_CABI_HIP_CONV_WINOGRAD"
    old = os.environ.get(knob)
    try:
        for var, val in (("winograd", "1"), ("direct", "0")):
            os.environ[knob] = val
            try:
                run, _ = E.prepare(g, bufs)
                y.fill_(float("nan"))
                t = median_ms(torch, run)
                e = float((y.double() - ref).norm() / ref.norm())
                row.update({f"{var}_ms": t[0], f"{var}_ratio": theirs_ms / t[0], f"{var}_rel_err": e})
                print(f"convnchw {name} {var}: {t[0]:.3f} ms -> {theirs_ms / t[0]:.2f}x err {e:.1e}", flush=True)
            except Exception as ex:  # noqa: BLE001 - recorded in the row
                row[f"{var}_error"] = f"{type(ex).__name__}: {ex}"
                print(f"convnchw {name} {var}: {type(ex).__name__}: {ex}", flush=True)
    finally:
        if old is None:
            os.environ.pop(knob, None)
        else:
            os.environ[knob] = old


RESNET = [  # name, C, K, H, R, stride, pad
    ("conv2_3x3", 64, 64, 56, 3, 1, 1),
    ("conv2_1x1_expand", 64, 256, 56, 1, 1, 0),
    ("conv3_3x3", 128, 128, 28, 3, 1, 1),
    ("conv4_3x3", 256, 256, 14, 3, 1, 1),
    ("conv5_3x3", 512, 512, 7, 3, 1, 1),
    ("conv4_1x1_s2", 512, 1024, 28, 1, 2, 0),
]


def resnet_xw(torch, N, C, K, H, R, st, pad, tdt):
    """One ResNet-50 layer's channels-last activations x (N, C, H, H) and weights w (K, C, R, R,
    scaled by 1 / sqrt(C R R)), and the output size P."""
    cl = torch.channels_last
    x = torch.randn(N, C, H, H, device="cuda", dtype=tdt).to(memory_format=cl)
    w = (torch.randn(K, C, R, R, device="cuda", dtype=tdt) / (C * R * R) ** 0.5).to(memory_format=cl)
    return x, w, (H + 2 * pad - R) // st + 1


def bench_conv(torch, E, res):
    import torch.nn.functional as F
    from gpu_testlib import T, conv_fwd, graph_bytes
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    N = 32
    out = {}
    for dt_name, tdt in (("FLOAT", torch.float32), ("HALF", torch.float16)):
        for name, C, K, H, R, st, pad in RESNET:
            x, w, P = resnet_xw(torch, N, C, K, H, R, st, pad, tdt)
            y = torch.empty(N, K, P, P, device="cuda", dtype=tdt).to(memory_format=torch.channels_last)
            g = graph_bytes([T(1, [N, C, H, H], dt_name, strides=tstrides(x)),
                             T(2, [K, C, R, R], dt_name, strides=tstrides(w)),
                             T(3, [N, K, P, P], dt_name, strides=tstrides(y))],
                            [conv_fwd(1, 2, 3, [pad, pad], [st, st], [1, 1])])
            run, bs = E.prepare(g, {1: x, 2: w, 3: y})
            ours = median_ms(torch, run)
            ref = F.conv2d(x.float(), w.float(), stride=st, padding=pad)
            err = float((y.float() - ref).norm() / ref.norm())
            theirs = median_ms(torch, lambda: F.conv2d(x, w, stride=st, padding=pad))
            fl = 2 * N * K * P * P * C * R * R
            key = f"{dt_name.lower()}_{name}"
            out[key] = {"ours_ms": ours[0], "torch_ms": theirs[0], "ours_tflops": fl / ours[0] / 1e9,
                        "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0],
                        "rel_err": err, "plan_build_s": bs}
            print(f"conv {key}: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.1f} TF/s) cuDNN "
                  f"{theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)
            if name == "conv3_3x3":
                capi_row(torch, out[key],
                         lambda g, T: g.conv_fprop(T("x"), T("w"), padding=[pad, pad], stride=[st, st],
                                                   dilation=[1, 1]),
                         {"x": x, "w": w, "y": y}, ("y",), theirs[0],
                         check=lambda: _rel(torch, y, ref))
            del x, w, y
    res["conv2d_fwd_nhwc_b32"] = {"cases": out, "target": "0.9 (fp16)"}


def bench_conv_bwd(torch, E, res):
    """Backward data / filter for two layers (informational: the issue sets no target)."""
    from gpu_testlib import T, conv_bwd_data, conv_bwd_filter, graph_bytes
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    N = 32
    out = {}
    for dt_name, tdt in (("FLOAT", torch.float32), ("HALF", torch.float16)):
        for name, C, K, H, R, st, pad in (RESNET if dt_name == "HALF" else (RESNET[2], RESNET[4])):
            cl = torch.channels_last
            x, w, P = resnet_xw(torch, N, C, K, H, R, st, pad, tdt)
            dy = torch.randn(N, K, P, P, device="cuda", dtype=tdt).to(memory_format=cl)
            dx = torch.empty_like(x)
            dw = torch.empty_like(w)
            tx = T(1, [N, C, H, H], dt_name, strides=tstrides(x))
            tw = T(2, [K, C, R, R], dt_name, strides=tstrides(w))
            ty = T(3, [N, K, P, P], dt_name, strides=tstrides(dy))
            fl = 2 * N * K * P * P * C * R * R
            for kind in ("data", "filter"):
                if kind == "data":
                    g = graph_bytes([ty, tw, tx], [conv_bwd_data(3, 2, 1, [pad, pad], [st, st], [1, 1])])
                    run, _ = E.prepare(g, {3: dy, 2: w, 1: dx})
                    mask = [True, False, False]
                else:
                    g = graph_bytes([tx, ty, tw], [conv_bwd_filter(1, 3, 2, [pad, pad], [st, st], [1, 1])])
                    run, _ = E.prepare(g, {1: x, 3: dy, 2: dw})
                    mask = [False, True, False]
                ours = median_ms(torch, run)

                def theirs_fn():
                    return torch.ops.aten.convolution_backward(dy, x, w, None, [st, st], [pad, pad], [1, 1],
                                                               False, [0, 0], 1, mask)
                ref = theirs_fn()[0 if kind == "data" else 1].float()
                mine = (dx if kind == "data" else dw).float()
                err = float((mine - ref).norm() / ref.norm())
                theirs = median_ms(torch, theirs_fn)
                key = f"{dt_name.lower()}_{name}_bwd_{kind}"
                out[key] = {"ours_ms": ours[0], "torch_ms": theirs[0], "ours_tflops": fl / ours[0] / 1e9,
                            "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0], "rel_err": err}
                print(f"conv {key}: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.1f} TF/s) cuDNN "
                      f"{theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)
                if name == "conv3_3x3" and dt_name == "HALF":
                    cv = dict(padding=[pad, pad], stride=[st, st], dilation=[1, 1])
                    if kind == "data":
                        capi_row(torch, out[key], lambda g, T: g.conv_dgrad(T("dy"), T("w"), **cv),
                                 {"dy": dy, "w": w, "dx": dx}, ("dx",), theirs[0],
                                 check=lambda: _rel(torch, dx, ref))
                    else:
                        capi_row(torch, out[key], lambda g, T: g.conv_wgrad(T("x"), T("dy"), **cv),
                                 {"x": x, "dy": dy, "dw": dw}, ("dw",), theirs[0],
                                 check=lambda: _rel(torch, dw, ref))
    res["conv2d_bwd_nhwc_b32"] = {"cases": out, "target": "0.6 (fp16)"}


FWD16_VARIANTS = [  # name, knobs (HIPDNN_CABI_HIP_*): the fp16 forward paths side by side
    ("gather", {"CONV_IM2COL": "0"}),                   # producer cp.async gathers (the old path)
    ("im2col", {"CONV_IM2COL": "1"}),                   # im2col tensor map wherever it applies
    ("im2col_regepi", {"CONV_IM2COL": "1", "TMA_STORE": "0"}),   # ... with the register epilogue
    ("im2col_128x64", {"CONV_IM2COL": "1", "TILE": "128x64"}),
    ("im2col_128x128", {"CONV_IM2COL": "1", "TILE": "128x128"}),
    ("im2col_split3", {"CONV_IM2COL": "1", "SPLITK": "3", "TMA_STORE": "0"}),
]


def bench_conv_fwd16(torch, E, res):
    """fp16 NHWC forward, the six ResNet-50 layers at batch 32, cuDNN side
    by side; the default plan (``ours_ms``: the im2col tensor map for the 3 x 3 layers) and the
    FWD16_VARIANTS (the gather path, tiles, splits, the TMA-store epilogue), each with its
    relative error against an fp32 cuDNN reference; conv2 / conv3 also through the C API."""
    import torch.nn.functional as F
    from gpu_testlib import T, conv_fwd, graph_bytes
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    N, tdt, cl = 32, torch.float16, torch.channels_last
    out = {}
    for name, C, K, H, R, st, pad in RESNET:
        x, w, P = resnet_xw(torch, N, C, K, H, R, st, pad, tdt)
        y = torch.empty(N, K, P, P, device="cuda", dtype=tdt).to(memory_format=cl)
        g = graph_bytes([T(1, [N, C, H, H], "HALF", strides=tstrides(x)),
                         T(2, [K, C, R, R], "HALF", strides=tstrides(w)),
                         T(3, [N, K, P, P], "HALF", strides=tstrides(y))],
                        [conv_fwd(1, 2, 3, [pad, pad], [st, st], [1, 1])])
        ref = F.conv2d(x.float(), w.float(), stride=st, padding=pad)
        fl = 2 * N * K * P * P * C * R * R
        theirs = median_ms(torch, lambda: F.conv2d(x, w, stride=st, padding=pad))

        def one(knobs):
            with hip_knobs(knobs):
                from engine_plugins.hip_kernels.engine import analyse
                from hipdnn_cabi.plugin_sdk import parse_graph
                notes = list(analyse(parse_graph(g)).program.notes)
                run, _ = E.prepare(g, {1: x, 2: w, 3: y})
                y.fill_(float("nan"))
                run()
                torch.cuda.synchronize()
                err = float((y.float() - ref).norm() / ref.norm())
                t = median_ms(torch, run)
                return t[0], err, notes
        ours, err, notes = one({})
        row = {"ours_ms": ours, "torch_ms": theirs[0], "ratio": theirs[0] / ours,
               "ours_tflops": fl / ours / 1e9, "torch_tflops": fl / theirs[0] / 1e9, "rel_err": err,
               "plan": notes, "variants": {}}
        print(f"fwd16 {name}: ours {ours * 1e3:.1f} us ({fl / ours / 1e9:.0f} TF/s) cuDNN {theirs[0] * 1e3:.1f} us"
              f" -> {theirs[0] / ours:.2f}x err {err:.1e} | {'; '.join(notes)}", flush=True)
        for vname, knobs in FWD16_VARIANTS:
            try:
                t, e, vn = one(knobs)
                row["variants"][vname] = {"ms": t, "ratio": theirs[0] / t, "rel_err": e, "plan": vn}
                print(f"   {vname}: {t * 1e3:.1f} us {theirs[0] / t:.2f}x err {e:.1e} | {'; '.join(vn)}", flush=True)
            except Exception as ex:  # noqa: BLE001 - recorded in the row
                row["variants"][vname] = f"{type(ex).__name__}: {ex}"
                print(f"   {vname}: {type(ex).__name__}: {ex}", flush=True)
        if name in ("conv2_3x3", "conv3_3x3"):
            capi_row(torch, row,
                     lambda g_, T_: g_.conv_fprop(T_("x"), T_("w"), padding=[pad, pad], stride=[st, st],
                                                  dilation=[1, 1]),
                     {"x": x, "w": w, "y": y}, ("y",), theirs[0], check=lambda: _rel(torch, y, ref))
        out[f"half_{name}"] = row
        del x, w, y
    res["conv2d_fwd_fp16_nhwc_b32"] = {"cases": out, "target": "0.9"}


SWEEP = [("", ""), ("128x64", ""), ("128x128", ""), ("128x256", ""), ("", "0"), ("", "2"),
         ("", "3"), ("", "4"), ("", "6")]


def bench_conv_sweep(torch, E, res):
    """Tile / split-K variants (HIPDNN_CABI_HIP_TILE / _SPLITK) of the fp16 NHWC ResNet-50
    forward, backward-data and backward-filter layers against cuDNN in one process: the data
    the tile table (gemm_core.tile_config) is checked against.  Not part of the default run."""
    import torch.nn.functional as F
    from gpu_testlib import T, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes
    torch.backends.cudnn.benchmark = True
    N, tdt, cl = 32, torch.float16, torch.channels_last
    out = {}
    for name, C, K, H, R, st, pad in RESNET:
        x, w, P = resnet_xw(torch, N, C, K, H, R, st, pad, tdt)
        dy = torch.randn(N, K, P, P, device="cuda", dtype=tdt).to(memory_format=cl)
        y, dx, dw = torch.empty_like(dy), torch.empty_like(x), torch.empty_like(w)
        tx = T(1, [N, C, H, H], "HALF", strides=tstrides(x))
        tw = T(2, [K, C, R, R], "HALF", strides=tstrides(w))
        ty = T(3, [N, K, P, P], "HALF", strides=tstrides(dy))
        cv = ([pad, pad], [st, st], [1, 1])
        for kind in ("fwd", "data", "filter"):
            if kind == "fwd":
                g = graph_bytes([tx, tw, ty], [conv_fwd(1, 2, 3, *cv)])
                bufs = {1: x, 2: w, 3: y}
                theirs = median_ms(torch, lambda: F.conv2d(x, w, stride=st, padding=pad))
            else:
                mask = [kind == "data", kind == "filter", False]
                if kind == "data":
                    g = graph_bytes([ty, tw, tx], [conv_bwd_data(3, 2, 1, *cv)])
                    bufs = {3: dy, 2: w, 1: dx}
                else:
                    g = graph_bytes([tx, ty, tw], [conv_bwd_filter(1, 3, 2, *cv)])
                    bufs = {1: x, 3: dy, 2: dw}
                theirs = median_ms(torch, lambda: torch.ops.aten.convolution_backward(
                    dy, x, w, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1, mask))
            row = {"torch_ms": theirs[0], "variants": {}}
            for tile, split in SWEEP:
                for k_, v in (("TILE", tile), ("SPLITK", split)):
                    if v:
                        os.environ["HIPDNN_CABI_HIP_" + k_] = v
                    else:
                        os.environ.pop("HIPDNN_CABI_HIP_" + k_, None)
                try:
                    run, _ = E.prepare(g, bufs)
                    t = median_ms(torch, run, reps=30)
                    row["variants"][f"{tile or 'auto'}/{split or 'auto'}"] = t[0]
                except Exception as e:  # noqa: BLE001
                    row["variants"][f"{tile or 'auto'}/{split or 'auto'}"] = f"{type(e).__name__}: {e}"
            os.environ.pop("HIPDNN_CABI_HIP_TILE", None)
            os.environ.pop("HIPDNN_CABI_HIP_SPLITK", None)
            ok = {k_: v for k_, v in row["variants"].items() if isinstance(v, float)}
            best = min(ok, key=ok.get) if ok else None
            row["best"] = best
            out[f"{name}_{kind}"] = row
            print(f"sweep {name}_{kind}: cuDNN {theirs[0] * 1e3:.1f} us; " +
                  " ".join(f"{k_}={v * 1e3:.1f}" for k_, v in ok.items()) +
                  (f" | best {best} {theirs[0] / ok[best]:.2f}x, auto {theirs[0] / ok['auto/auto']:.2f}x"
                   if best and "auto/auto" in ok else ""), flush=True)
        del x, w, dy, y, dx, dw
    res["conv_fp16_sweep"] = out


def bench_bn(torch, E, res):
    import torch.nn.functional as F
    from gpu_testlib import T, bn_train, graph_bytes
    N, C, H = 32, 128, 128   # 256 MiB fp32
    x = torch.randn(N, C, H, H, device="cuda").to(memory_format=torch.channels_last) * 2 + 1
    y = torch.empty_like(x)
    sc = torch.rand(C, device="cuda") + 0.5
    bi = torch.randn(C, device="cuda")
    mu, iv = torch.empty(C, device="cuda"), torch.empty(C, device="cuda")
    cd = [1, C, 1, 1]
    g = graph_bytes([T(1, [N, C, H, H], strides=tstrides(x)), T(2, [N, C, H, H], strides=tstrides(y)),
                     T(3, cd), T(4, cd), T(5, [1, 1, 1, 1], value=1e-5), T(6, cd), T(7, cd)],
                    [bn_train(1, 3, 4, 5, 2, 6, 7)])
    run, bs = E.prepare(g, {1: x, 2: y, 3: sc, 4: bi, 6: mu, 7: iv})
    ours = median_ms(torch, run)
    ref = F.batch_norm(x, None, None, sc, bi, training=True, eps=1e-5)
    err = float((y - ref).norm() / ref.norm())
    rm, rv = torch.zeros(C, device="cuda"), torch.ones(C, device="cuda")
    theirs = median_ms(torch, lambda: F.batch_norm(x, rm, rv, sc, bi, training=True, momentum=0.1, eps=1e-5))
    nbytes = 2 * x.numel() * 4
    row = res["batchnorm_train_fwd_256MB"] = {
        "ours_ms": ours[0], "torch_ms": theirs[0], "ours_GBps": nbytes / ours[0] / 1e6,
        "torch_GBps": nbytes / theirs[0] / 1e6, "ratio": theirs[0] / ours[0], "rel_err": err,
        "bytes_counted": "x read once + y written once", "target": 0.85}
    print(f"BN train fwd 256MB NHWC: ours {ours[0]:.3f} ms ({nbytes / ours[0] / 1e6:.0f} GB/s) torch "
          f"{theirs[0]:.3f} ms ({nbytes / theirs[0] / 1e6:.0f} GB/s) -> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)
    capi_row(torch, row, lambda g, T: g.batchnorm(T("x"), T("sc"), T("bi"), 1e-5)[:3],
             {"x": x, "sc": sc.view(cd), "bi": bi.view(cd), "y": y, "mu": mu.view(cd), "iv": iv.view(cd)},
             ("y", "mu", "iv"), theirs[0], check=lambda: _rel(torch, y, ref))


def bench_pointwise(torch, E, res):
    from gpu_testlib import T, graph_bytes, pw
    R, Cc = 8192, 8192  # 256 MiB fp32
    x = torch.randn(R, Cc, device="cuda")
    bias = torch.randn(1, Cc, device="cuda")
    y = torch.empty_like(x)
    d = [R, Cc]
    g = graph_bytes([T(1, d), T(2, [1, Cc]), T(3, [1, 1], value=0.5), T(4, d, virtual=True),
                     T(5, d, virtual=True), T(6, d, virtual=True), T(7, d)],
                    [pw("MUL", 1, 4, 3), pw("ADD", 4, 5, 2), pw("RELU_FWD", 5, 6), pw("SUB", 6, 7, 1)])
    run, bs = E.prepare(g, {1: x, 2: bias, 7: y})
    ours = median_ms(torch, run)
    ref = torch.relu(x * 0.5 + bias) - x
    err = float((y - ref).norm() / ref.norm())
    t1, t2, t3, t4 = (torch.empty_like(x) for _ in range(4))

    def separate():
        torch.mul(x, 0.5, out=t1)
        torch.add(t1, bias, out=t2)
        torch.relu_(t2)
        torch.sub(t2, x, out=t4)
    sep = median_ms(torch, separate)
    one = median_ms(torch, lambda: torch.clamp(x, min=0, out=t3))
    copy = median_ms(torch, lambda: t3.copy_(x))
    nbytes = 2 * x.numel() * 4
    row = res["pointwise_chain4_256MB"] = {
        "ours_ms": ours[0], "torch_separate_ms": sep[0], "torch_single_op_ms": one[0],
        "torch_copy_ms": copy[0], "ours_GBps": nbytes / ours[0] / 1e6,
        "torch_single_op_GBps": nbytes / one[0] / 1e6, "torch_copy_GBps": nbytes / copy[0] / 1e6,
        "bandwidth_ratio_vs_torch_single_op": one[0] / ours[0], "speedup_vs_separate": sep[0] / ours[0],
        "rel_err": err, "chain": "y = relu(x * 0.5 + bias[col]) - x", "target_bw": 0.85, "target_speedup": 2.0}
    print(f"pointwise chain: ours {ours[0]:.3f} ms ({nbytes / ours[0] / 1e6:.0f} GB/s), torch 1-op "
          f"{one[0]:.3f} ms ({nbytes / one[0] / 1e6:.0f} GB/s), separate 4 ops {sep[0]:.3f} ms -> "
          f"{sep[0] / ours[0]:.2f}x err {err:.1e}", flush=True)
    capi_row(torch, row, lambda g, T: g.sub(g.relu(g.add(g.mul(T("x"), 0.5), T("bias"))), T("x")),
             {"x": x, "bias": bias, "y": y}, ("y",), one[0], check=lambda: _rel(torch, y, ref))
    row["capi_ratio_is_vs"] = "torch single op (as bandwidth_ratio_vs_torch_single_op)"


def bench_overhead(torch, E, res, c_exe=None, c_env=None):
    from gpu_testlib import T, graph_bytes, pw
    x = torch.randn(1, 256, device="cuda")
    y = torch.empty_like(x)
    g = graph_bytes([T(1, [1, 256]), T(2, [1, 256])], [pw("RELU_FWD", 1, 2)])
    run, _ = E.prepare(g, {1: x, 2: y})
    ctx = run._keep[2]
    launch = ctx.plan.steps[0][1]
    rt = E.rt
    stream = torch.cuda.current_stream().cuda_stream
    pk = rt.pack((x.data_ptr(), y.data_ptr()))

    def per_call(fn, n=5000):
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            best.append((t1 - t0) / n * 1e6)
        return statistics.median(best)
    bare = per_call(lambda: rt.launch(launch.fn, launch.grid, launch.block, pk, 0, stream))
    plug = per_call(run)
    out = {"bare_launch_us": bare, "plugin_execute_us": plug}
    if c_exe:
        r = subprocess.run([c_exe, "20000"], capture_output=True, text=True, env=c_env, timeout=300)
        for line in r.stdout.splitlines():
            if line.startswith("execute_us"):
                out["hipdnnBackendExecute_us"] = float(line.split()[1])
            elif line.startswith("frontend_execute_us"):  # a new variant pack per call
                out["frontend_style_execute_us"] = float(line.split()[1])
        if "hipdnnBackendExecute_us" not in out:
            out["c_error"] = (r.stdout + r.stderr)[-2000:]
    if "hipdnnBackendExecute_us" in out:
        out["ratio_execute_vs_bare"] = out["hipdnnBackendExecute_us"] / bare
    if "frontend_style_execute_us" in out:
        out["ratio_frontend_style_vs_bare"] = out["frontend_style_execute_us"] / bare
        out["frontend_style_target"] = 1.5
    out["ratio_plugin_vs_bare"] = plug / bare
    out["target"] = 2.0
    try:
        out["same_process"] = _overhead_same_process(torch, rt, launch, pk, stream, x, y)
    except Exception as e:  # noqa: BLE001 - no compiler, no frontend plan: the rows above stand
        out["same_process_error"] = f"{type(e).__name__}: {e}"
    res["execute_overhead"] = out
    print("overhead:", json.dumps(out), flush=True)


def _overhead_same_process(torch, rt, launch, pk, stream, x, y, rounds=7, n=2000):
    """The C API rows and the bare launch in ONE process, interleaved round by round (the rows
    above time the C program in a process of its own, minutes apart from the bare launch: the
    host's state between the two moves their ratio by +-30%).  hipdnnBackendExecute of a reused
    pack and frontend-style (a new pack per call) run in C loops (bench/execute_bench.py's
    LOOP_C, GIL released) on the frontend's plan for the same relu on the same tensors; each
    round times n bare launches, then n of each C row; the medians of the per-round ratios."""
    import cffi
    import tempfile
    import execute_bench
    from hipdnn_cabi import frontend as hf
    tmp = tempfile.mkdtemp(prefix="hdn_ovh_")
    src, so = os.path.join(tmp, "loops.c"), os.path.join(tmp, "libloops.so")
    with open(src, "w") as f:
        f.write(execute_bench.LOOP_C)
    libdir = os.path.join(ROOT, "hipdnn_cabi", "lib")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-I", os.path.join(ROOT, "include"), "-I",
                    os.path.join(ROOT, "bench"), src, "-o", so, "-L", libdir, "-lhipdnn_backend",
                    f"-Wl,-rpath,{libdir}", "-pthread"], check=True)
    ffi = cffi.FFI()
    ffi.cdef("""double loop_execute(uint64_t fn, void* h, void* p, void* vp, long n, int* st);
                double loop_frontend(void* h, void* p, const int64_t* uids, void* const* ptrs,
                                     int nb, void* ws, long n, int* st);""")
    loops = ffi.dlopen(so)
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    h = hf.Handle(stream=stream)
    g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    gx = g.tensor(name="x", dim=list(x.shape))
    gy = g.relu(gx).set_output(True)
    g.build()
    g.execute({gx: x, gy: y})
    e = next(iter(g._fcache.values()))
    a = g.api

    def raw(p):
        return ffi.cast("void*", int(a.ffi.cast("uintptr_t", p)))
    hr, plan, vp = raw(e.h_raw), raw(e.plan), raw(e.vp)
    fn = int(a.ffi.cast("uintptr_t", a.ffi.addressof(a.lib, "hipdnnBackendExecute")))
    uids = ffi.new("int64_t[]", [gx.uid, gy.uid])
    ptrs = ffi.new("void*[]", [ffi.cast("void*", x.data_ptr()), ffi.cast("void*", y.data_ptr())])
    st = ffi.new("int*")
    bare_l, ex_l, fe_l = [], [], []
    for r in range(rounds + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            rt.launch(launch.fn, launch.grid, launch.block, pk, 0, stream)
        b = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        ex = loops.loop_execute(fn, hr, plan, vp, n, st) * 1e6
        assert st[0] == 0, st[0]
        torch.cuda.synchronize()
        fe = loops.loop_frontend(hr, plan, uids, ptrs, 2, ffi.NULL, n, st) * 1e6
        assert st[0] == 0, st[0]
        torch.cuda.synchronize()
        if r:  # round 0 warms up
            bare_l.append(b)
            ex_l.append(ex)
            fe_l.append(fe)
    ok = bool(torch.equal(y, torch.relu(x)))
    g.close()
    h.close()
    med = statistics.median
    return {"rounds": rounds, "calls_per_round": n, "correct": ok,
            "bare_launch_us": med(bare_l), "hipdnnBackendExecute_us": med(ex_l),
            "frontend_style_execute_us": med(fe_l),
            "ratio_execute_vs_bare": med([e_ / b for e_, b in zip(ex_l, bare_l)]),
            "ratio_frontend_style_vs_bare": med([f / b for f, b in zip(fe_l, bare_l)]),
            "ratio_range_execute": [min(e_ / b for e_, b in zip(ex_l, bare_l)),
                                    max(e_ / b for e_, b in zip(ex_l, bare_l))],
            "ratio_range_frontend_style": [min(f / b for f, b in zip(fe_l, bare_l)),
                                           max(f / b for f, b in zip(fe_l, bare_l))]}


SDPA_CASES = [  # name, dtype, B, H, Hkv, S, D, causal
    ("fp16_d128", "HALF", 8, 16, 16, 4096, 128, False),
    ("fp16_d128_causal", "HALF", 8, 16, 16, 4096, 128, True),
    ("bf16_d128", "BFLOAT16", 8, 16, 16, 4096, 128, False),
    ("bf16_d128_causal", "BFLOAT16", 8, 16, 16, 4096, 128, True),
    ("fp16_d64", "HALF", 8, 16, 16, 4096, 64, False),
    ("fp16_d64_causal", "HALF", 8, 16, 16, 4096, 64, True),
    ("fp16_d128_gqa_hkv2", "HALF", 8, 16, 2, 4096, 128, False),
]


def _torch_sdpa_best(torch, fn_for):
    """The fastest of PyTorch's flash / cuDNN / efficient SDPA backends (those that run)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    best = None
    for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        try:
            with sdpa_kernel([be]):
                f = fn_for()
                f()
                t = median_ms(torch, f, reps=10, warm=2)
            if best is None or t[0] < best[0][0]:
                best = (t, be.name)
        except Exception:  # noqa: BLE001 - backend not available for this case
            continue
    return best


def _sdpa_case(torch, dt, B, H, Hkv, S, D, causal, bwd):
    """One of SDPA_CASES on the GPU: random q, k, v (then, with ``bwd``, dO: else None), empty o
    and stats, our forward graph ``g`` and its attributes, torch SDPA's keywords ``kw`` and
    FLOP count ``fl`` of the forward."""
    import math
    from test_attention import fwd_graph
    tdt = torch.float16 if dt == "HALF" else torch.bfloat16
    q = torch.randn(B, H, S, D, device="cuda", dtype=tdt)
    k = torch.randn(B, Hkv, S, D, device="cuda", dtype=tdt)
    v = torch.randn(B, Hkv, S, D, device="cuda", dtype=tdt)
    do = torch.randn(B, H, S, D, device="cuda", dtype=tdt) if bwd else None
    o = torch.empty_like(q)
    st = torch.empty(B, H, S, 1, device="cuda", dtype=torch.float32)
    attrs = {"causal_mask": True} if causal else {}
    _, g = fwd_graph(dt, B, H, Hkv, S, S, D, **attrs)
    kw = dict(is_causal=causal, scale=1 / math.sqrt(D), **({"enable_gqa": True} if Hkv != H else {}))
    fl = 4 * B * H * S * S * D / (2 if causal else 1)
    return q, k, v, do, o, st, attrs, g, kw, fl


def _max_rel_err(got, refs):
    """The largest relative (2-norm) error of the tensors ``got`` against ``refs``."""
    return max(float(((a.float() - b.float()).norm() / b.float().norm())) for a, b in zip(got, refs))


def bench_sdpa(torch, E, res):
    """Flash attention forward / backward vs torch.nn.functional.scaled_dot_product_attention."""
    from test_attention import bwd_graph
    F = torch.nn.functional
    for name, dt, B, H, Hkv, S, D, causal in SDPA_CASES:
        q, k, v, do, o, st, attrs, g, kw, fl = _sdpa_case(torch, dt, B, H, Hkv, S, D, causal, bwd=True)
        run, bs = E.prepare(g, {1: q, 2: k, 3: v, 4: o, 5: st})
        ours = median_ms(torch, run, reps=10, warm=2)
        ref = F.scaled_dot_product_attention(q, k, v, **kw)
        err = float((o.float() - ref.float()).abs().max())
        theirs = _torch_sdpa_best(torch, lambda: (lambda: F.scaled_dot_product_attention(q, k, v, **kw)))
        row = {"ours_ms": ours[0], "ours_tflops": fl / ours[0] / 1e9, "max_abs_err_vs_torch": err,
               "plan_build_s": bs, "target": 0.5}
        if theirs:
            row.update(torch_ms=theirs[0][0], torch_backend=theirs[1],
                       torch_tflops=fl / theirs[0][0] / 1e9, ratio=theirs[0][0] / ours[0])
        res[f"sdpa_fwd_{name}"] = row
        print(f"SDPA fwd {name}: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.0f} TFLOP/s) torch "
              f"{row.get('torch_ms', float('nan')):.3f} ms [{row.get('torch_backend')}] -> "
              f"{row.get('ratio', float('nan')):.2f}x  max err {err:.2e}", flush=True)
        # backward (from our O and stats)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        _, gb = bwd_graph(dt, B, H, Hkv, S, S, D, **attrs)
        runb, bsb = E.prepare(gb, {1: q, 2: k, 3: v, 4: o, 5: do, 6: st, 11: dq, 12: dk, 13: dv})
        oursb = median_ms(torch, runb, reps=5, warm=1)
        qr, kr, vr = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
        outr = F.scaled_dot_product_attention(qr, kr, vr, **kw)
        gref = torch.autograd.grad(outr, (qr, kr, vr), do)
        errb = _max_rel_err((dq, dk, dv), gref)

        def tb():
            qq, kk, vv = (x.detach().requires_grad_(True) for x in (q, k, v))
            oo = F.scaled_dot_product_attention(qq, kk, vv, **kw)
            return lambda: torch.autograd.grad(oo, (qq, kk, vv), do, retain_graph=True)
        theirsb = _torch_sdpa_best(torch, tb)
        flb = fl * 2.5
        row = {"ours_ms": oursb[0], "ours_tflops": flb / oursb[0] / 1e9, "rel_err_vs_torch": errb,
               "plan_build_s": bsb, "target": 0.35}
        if theirsb:
            row.update(torch_ms=theirsb[0][0], torch_backend=theirsb[1],
                       torch_tflops=flb / theirsb[0][0] / 1e9, ratio=theirsb[0][0] / oursb[0])
        row["kernel"] = os.environ.get("HIPDNN_CABI_HIP_ATTN_BWD", "auto")
        res[f"sdpa_bwd_{name}"] = row
        print(f"SDPA bwd {name}: ours {oursb[0]:.3f} ms ({flb / oursb[0] / 1e9:.0f} TFLOP/s) torch "
              f"{row.get('torch_ms', float('nan')):.3f} ms [{row.get('torch_backend')}] -> "
              f"{row.get('ratio', float('nan')):.2f}x  rel err {errb:.2e}", flush=True)
        # the same backward on the mma.sync kernel (HIPDNN_CABI_HIP_ATTN_BWD=mma; auto = the
        # wgmma kernel on sm_90)
        with hip_knobs({"ATTN_BWD": "mma"}):
            runm, bsm = E.prepare(gb, {1: q, 2: k, 3: v, 4: o, 5: do, 6: st, 11: dq, 12: dk, 13: dv})
            oursm = median_ms(torch, runm, reps=5, warm=1)
        errm = _max_rel_err((dq, dk, dv), gref)
        rowm = {"ours_ms": oursm[0], "ours_tflops": flb / oursm[0] / 1e9, "rel_err_vs_torch": errm,
                "plan_build_s": bsm, "target": 0.35, "kernel": "mma"}
        if theirsb:
            rowm.update(torch_ms=theirsb[0][0], torch_backend=theirsb[1], ratio=theirsb[0][0] / oursm[0])
        res[f"sdpa_bwd_mma_{name}"] = rowm
        print(f"SDPA bwd {name} [mma.sync]: ours {oursm[0]:.3f} ms -> {rowm.get('ratio', float('nan')):.2f}x"
              f"  rel err {errm:.2e}", flush=True)
        # the wgmma backward's variants (same graph, same process): 128-query tiles at D 64
        # (HIPDNN_CABI_HIP_ATTN_BWD_BM=128), the earlier issue order (..._SCHED=0), exp2 / dS
        # under the tensor-core groups in flight off / on with the shipped issue order and on
        # with the overlapped one (..._OVL=0 / 1, whatever the opt-in knobs of the run)
        ovl = "HIPDNN_CABI_HIP_ATTN_BWD_OVL"
        sched = "HIPDNN_CABI_HIP_ATTN_BWD_SCHED"
        variants = [("sched0", {sched: "0"}),
                    ("ovl0", {ovl: "0", sched: "0"}),
                    ("ovl1", {ovl: "1", sched: "0"}),
                    ("ovl1s1", {ovl: "1", sched: "1"})]
        if D <= 64:
            variants.append(("bm128", {"HIPDNN_CABI_HIP_ATTN_BWD_BM": "128"}))
        for tag, knobs in variants:
            with hip_knobs(knobs, prefix=""):
                runv, bsv = E.prepare(gb, {1: q, 2: k, 3: v, 4: o, 5: do, 6: st, 11: dq, 12: dk, 13: dv})
                oursv = median_ms(torch, runv, reps=5, warm=1)
            errv = _max_rel_err((dq, dk, dv), gref)
            rowv = {"ours_ms": oursv[0], "ours_tflops": flb / oursv[0] / 1e9, "rel_err_vs_torch": errv,
                    "plan_build_s": bsv, "target": 0.35, "kernel": "wgmma", "knobs": knobs,
                    "vs_default": oursb[0] / oursv[0]}
            if theirsb:
                rowv.update(torch_ms=theirsb[0][0], torch_backend=theirsb[1], ratio=theirsb[0][0] / oursv[0])
            res[f"sdpa_bwd_{tag}_{name}"] = rowv
            print(f"SDPA bwd {name} [{tag}]: ours {oursv[0]:.3f} ms ({flb / oursv[0] / 1e9:.0f} TFLOP/s) -> "
                  f"{rowv.get('ratio', float('nan')):.2f}x, {rowv['vs_default']:.2f}x the default"
                  f"  rel err {errv:.2e}", flush=True)
        del q, k, v, do, o, st, dq, dk, dv, qr, kr, vr, outr, gref
        torch.cuda.empty_cache()
    bench_sdpa_paged_ragged(torch, E, res)
    bench_sdpa_block_sparse(torch, E, res)


# the wgmma forward's scheduling variants (ops/sdpa.py knobs HIPDNN_CABI_HIP_ATTN_PINGPONG /
# _EXPFOLD / _STAGES): name -> environment
# (ATTN_FWD_OVL explicit in each: the opt-in paths this script turns on include it; "*_ovl": the
# softmax and P's rounding overlapped with P V, attention_fwd_wgmma.hip AW_XCH + AW_OVL;
# "both_xch": the softmax only, AW_XCH)
SDPA_FWD_VARIANTS = {"off": {"ATTN_PINGPONG": "0", "ATTN_EXPFOLD": "0", "ATTN_FWD_OVL": "0"},
                     "pingpong": {"ATTN_PINGPONG": "1", "ATTN_EXPFOLD": "0", "ATTN_FWD_OVL": "0"},
                     "expfold": {"ATTN_PINGPONG": "0", "ATTN_EXPFOLD": "1", "ATTN_FWD_OVL": "0"},
                     "both": {"ATTN_PINGPONG": "1", "ATTN_EXPFOLD": "1", "ATTN_FWD_OVL": "0"},
                     "both_3stages": {"ATTN_PINGPONG": "1", "ATTN_EXPFOLD": "1", "ATTN_STAGES": "3",
                                      "ATTN_FWD_OVL": "0"},
                     "off_ovl": {"ATTN_PINGPONG": "0", "ATTN_EXPFOLD": "0", "ATTN_FWD_OVL": "1"},
                     "both_ovl": {"ATTN_PINGPONG": "1", "ATTN_EXPFOLD": "1", "ATTN_FWD_OVL": "1"},
                     "both_xch": {"ATTN_PINGPONG": "1", "ATTN_EXPFOLD": "1", "ATTN_FWD_OVL": "xch"}}


def bench_sdpa_fwd_variants(torch, E, res):
    """The SDPA forward of SDPA_CASES under each wgmma scheduling variant (ping-pong consumer
    warpgroups, the scale folded into exp2, a third K/V stage at D = 128, the softmax overlapped
    with P V; "off" = the kernel without them), in one process next to PyTorch's best backend:
    picks the default."""
    F = torch.nn.functional
    for name, dt, B, H, Hkv, S, D, causal in SDPA_CASES:
        q, k, v, _, o, st, _, g, kw, fl = _sdpa_case(torch, dt, B, H, Hkv, S, D, causal, bwd=False)
        ref = F.scaled_dot_product_attention(q, k, v, **kw)
        theirs = _torch_sdpa_best(torch, lambda: (lambda: F.scaled_dot_product_attention(q, k, v, **kw)))
        row = {}
        if theirs:
            row.update(torch_ms=theirs[0][0], torch_backend=theirs[1], torch_tflops=fl / theirs[0][0] / 1e9)
        for var, env in SDPA_FWD_VARIANTS.items():
            if "ATTN_STAGES" in env and D != 128:
                continue
            try:
                with hip_knobs(env):
                    o.zero_()
                    run, _ = E.prepare(g, {1: q, 2: k, 3: v, 4: o, 5: st})
                    t = median_ms(torch, run, reps=10, warm=2)
            except Exception as e:  # noqa: BLE001 - record and go on
                row[var] = {"error": f"{type(e).__name__}: {e}"}
                continue
            err = float((o.float() - ref.float()).abs().max())
            row[var] = {"ours_ms": t[0], "ours_tflops": fl / t[0] / 1e9, "max_abs_err_vs_torch": err}
            if theirs:
                row[var]["ratio"] = theirs[0][0] / t[0]
            print(f"SDPA fwd {name} [{var}]: ours {t[0]:.3f} ms ({fl / t[0] / 1e9:.0f} TFLOP/s) torch "
                  f"{row.get('torch_ms', float('nan')):.3f} ms -> {row[var].get('ratio', float('nan')):.2f}x"
                  f"  max err {err:.2e}", flush=True)
        res[f"sdpa_fwdvar_{name}"] = row
        del q, k, v, o, st, ref
        torch.cuda.empty_cache()


def bench_sdpa_block_sparse(torch, E, res):
    """A 90%-sparse block mask (128 x 128 tiles, the diagonal tile kept) on the HIP engine's
    forward (the kernels walk the live key tiles only) against the same forward without a mask,
    and against torch's flex_attention with the same block mask (compiled) where it imports,
    else torch SDPA with the mask expanded to booleans.  TFLOP/s count the live tiles."""
    import math
    from test_attention_roles import fwd_graph
    F = torch.nn.functional
    B, H, S, D = 2, 16, 8192, 128
    nt = S // 128
    tdt = torch.float16
    scale = 1 / math.sqrt(D)
    gen = torch.Generator(device="cpu").manual_seed(9)
    live = torch.rand(B, H, nt, nt, generator=gen) < 0.1
    live |= torch.eye(nt, dtype=torch.bool)
    bits = live.reshape(B, H, nt, nt // 8, 8).to(torch.uint8) << torch.arange(8, dtype=torch.uint8)
    bmask = bits.sum(-1, dtype=torch.uint8).contiguous().cuda()
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=tdt) for _ in range(3))
    o, od = torch.empty_like(q), torch.empty_like(q)
    st = torch.empty(B, H, S, 1, device="cuda", dtype=torch.float32)
    _, g = fwd_graph("HALF", B, H, H, S, S, D, block=[B, H], attn_scale_value=scale)
    run, bs = E.prepare(g, {1: q, 2: k, 3: v, 4: o, 5: st, 21: bmask})
    ours = median_ms(torch, run, reps=10, warm=2)
    _, gd = fwd_graph("HALF", B, H, H, S, S, D, attn_scale_value=scale)
    rund, _ = E.prepare(gd, {1: q, 2: k, 3: v, 4: od, 5: st})
    dense = median_ms(torch, rund, reps=10, warm=2)
    run()
    keep = live[0, :2].repeat_interleave(128, 1).repeat_interleave(128, 2).cuda()   # 2 heads
    ref = F.scaled_dot_product_attention(q[:1, :2].float(), k[:1, :2].float(), v[:1, :2].float(),
                                         attn_mask=keep[None], scale=scale)
    err = float((o[:1, :2].float() - ref).abs().max())
    fl = 4 * D * 128 * 128 * float(live.sum())
    row = {"ours_ms": ours[0], "ours_tflops": fl / ours[0] / 1e9, "dense_ms": dense[0],
           "speedup_vs_dense": dense[0] / ours[0], "live_fraction": float(live.float().mean()),
           "max_abs_err_vs_torch_f32": err, "plan_build_s": bs,
           "shape": f"B{B} H{H} S{S} D{D}, block mask [B, H, {nt}, {nt // 8}]"}
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        lv = live.cuda()

        def mask_mod(b, h, qi, ki):
            return lv[b, h, qi // 128, ki // 128]
        fbm = create_block_mask(mask_mod, B, H, S, S, device="cuda", BLOCK_SIZE=128)
        fa = torch.compile(flex_attention)
        theirs_fn, impl = (lambda: fa(q, k, v, block_mask=fbm, scale=scale)), "flex_attention"
        theirs_fn()
    except Exception as e:  # noqa: BLE001 - flex_attention missing or not compilable here
        row["flex_attention_error"] = f"{type(e).__name__}: {e}"[:300]
        full = live.repeat_interleave(128, 2).repeat_interleave(128, 3).cuda()
        theirs_fn, impl = (lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=full, scale=scale)), \
            "sdpa_bool_mask"
    t = median_ms(torch, theirs_fn, reps=10, warm=2)
    row.update(torch_ms=t[0], torch_impl=impl, torch_tflops=fl / t[0] / 1e9, ratio=t[0] / ours[0])
    res["sdpa_fwd_blocksparse90_b2_h16_8k_d128"] = row
    print(f"SDPA block-sparse 90%: ours {ours[0]:.3f} ms (dense {dense[0]:.3f} ms, "
          f"{dense[0] / ours[0]:.1f}x faster) torch [{impl}] {t[0]:.3f} ms -> {t[0] / ours[0]:.2f}x  "
          f"max err {err:.1e}", flush=True)
    del q, k, v, o, od, st, keep, ref
    torch.cuda.empty_cache()


def _f64_attention(torch, q, k, v, causal, scale, chunk=4):
    """float64 softmax(q kᵀ scale) v of one sequence [H, Sq, D] / [Hkv, Skv, D] (GQA by head
    repeat; causal: bottom-right, as the graphs below), a few heads at a time."""
    H, Sq, _ = q.shape
    G = H // k.shape[0]
    out = torch.empty(H, Sq, v.shape[-1], dtype=torch.float64, device=q.device)
    for h0 in range(0, H, chunk):
        hs = list(range(h0, min(H, h0 + chunk)))
        qq = q[hs].double()
        kk = k[[h // G for h in hs]].double()
        vv = v[[h // G for h in hs]].double()
        s = qq @ kk.transpose(-1, -2) * scale
        if causal:
            Skv = k.shape[1]
            i = torch.arange(Sq, device=q.device)[:, None]
            j = torch.arange(Skv, device=q.device)[None, :]
            s = s.masked_fill(j > i + (Skv - Sq), float("-inf"))
        out[h0:h0 + len(hs)] = torch.softmax(s, -1) @ vv
    return out


def _paged_kv(torch, k, v, PS, gen):
    """Dense K, V (B, Hkv, L, D) cut into pages of PS rows placed in a pool in shuffled order
    (``gen``): the page table (B, 1, L / PS, 1) and the K and V pools (B * L / PS, Hkv, PS, D)."""
    B, Hkv, L, D = k.shape
    MP = L // PS
    NP = B * MP
    perm = torch.randperm(NP, generator=gen).cuda()
    tab = perm.reshape(B, 1, MP, 1).to(torch.int32).contiguous()
    kp = torch.empty(NP, Hkv, PS, D, device="cuda", dtype=k.dtype)
    vp = torch.empty_like(kp)
    kp[perm] = k.reshape(B, Hkv, MP, PS, D).permute(0, 2, 1, 3, 4).reshape(NP, Hkv, PS, D)
    vp[perm] = v.reshape(B, Hkv, MP, PS, D).permute(0, 2, 1, 3, 4).reshape(NP, Hkv, PS, D)
    return tab, kp, vp


def _decode_both(torch, E, g, ins, o, ref):
    """{knob value: (median ms, max |O - ref|)} of the graph ``g`` with the decode kernel
    (HIPDNN_CABI_HIP_ATTN_DECODE=1, attention_fwd.hip ATT_DECODE) and without it (0: the
    GQA_PACK mma.sync kernel for paged K/V; the engine's default forward for contiguous K/V), in
    this process."""
    out = {}
    for kv in ("1", "0"):
        with hip_knobs({"ATTN_DECODE": kv}):
            run, _ = E.prepare(g, ins)
            t = median_ms(torch, run, reps=20, warm=3)
            out[kv] = (t[0], float((o.double() - ref).abs().max()))
    return out


def _decode_row(res, key, dec, gb, peer, shape):
    """A result row of both decode paths (:func:`_decode_both`) beside the PyTorch peer's time of
    the row ``peer`` (the dense K/V of the same shape)."""
    row = {"decode_ms": dec["1"][0], "decode_gbps": gb / dec["1"][0] * 1e3, "decode_err": dec["1"][1],
           "old_ms": dec["0"][0], "old_gbps": gb / dec["0"][0] * 1e3, "old_err": dec["0"][1],
           "shape": shape + "; decode: HIPDNN_CABI_HIP_ATTN_DECODE=1, old: =0"}
    if "torch_ms" in peer:
        row.update(torch_ms=peer["torch_ms"], torch_backend=peer["torch_backend"],
                   ratio_decode=peer["torch_ms"] / dec["1"][0], ratio_old=peer["torch_ms"] / dec["0"][0])
    res[key] = row
    print(f"SDPA {key}: decode {dec['1'][0]:.3f} ms ({row['decode_gbps']:.0f} GB/s, err "
          f"{dec['1'][1]:.1e}) old {dec['0'][0]:.3f} ms ({row['old_gbps']:.0f} GB/s, err {dec['0'][1]:.1e}) "
          f"torch {row.get('torch_ms', float('nan')):.3f} ms -> {row.get('ratio_decode', float('nan')):.2f}x / "
          f"{row.get('ratio_old', float('nan')):.2f}x", flush=True)


def bench_sdpa_paged_ragged(torch, E, res):
    """Paged K/V decode (B64, Hq 32, Hkv 8, 4096 cached tokens each, 64-token pages in shuffled
    order) and ragged (packed THD) causal prefill (32k tokens, lengths 128-4096) on the HIP
    engine, against PyTorch's fastest SDPA backend on the padded (dense) equivalent in the same
    process; ours also on that padded equivalent (padding mask).  Errors: max |O - float64|."""
    import math
    from test_attention import fwd_graph
    from test_attention_paged_ragged import paged_graph, ragged_fwd_graph
    F = torch.nn.functional
    gen = torch.Generator(device="cpu").manual_seed(5)
    # ---- paged decode
    B, H, Hkv, D, PS, L = 64, 32, 8, 128, 64, 4096
    MP = L // PS
    NP = B * MP
    tdt = torch.float16
    scale = 1 / math.sqrt(D)
    q = torch.randn(B, H, 1, D, device="cuda", dtype=tdt)
    k = torch.randn(B, Hkv, L, D, device="cuda", dtype=tdt)
    v = torch.randn(B, Hkv, L, D, device="cuda", dtype=tdt)
    tab, kp, vp = _paged_kv(torch, k, v, PS, gen)
    lq = torch.ones(B, 1, 1, 1, device="cuda", dtype=torch.int32)
    lkv = torch.full((B, 1, 1, 1), L, device="cuda", dtype=torch.int32)
    o = torch.empty(B, H, 1, D, device="cuda", dtype=tdt)
    st = torch.empty(B, H, 1, 1, device="cuda", dtype=torch.float32)
    _, g = paged_graph("HALF", B, H, Hkv, 1, D, PS, NP, MP, skv=L)
    ins = {1: q, 2: kp, 3: vp, 4: o, 5: st, 6: lq, 7: lkv, 8: tab, 9: tab}
    run, bs = E.prepare(g, ins)
    ours = median_ms(torch, run, reps=20, warm=3)
    ref = torch.stack([_f64_attention(torch, q[b], k[b], v[b], False, scale) for b in range(B)])
    err = float((o.double() - ref).abs().max())
    dec = _decode_both(torch, E, g, ins, o, ref)
    kw = dict(scale=scale, enable_gqa=True)
    theirs = _torch_sdpa_best(torch, lambda: (lambda: F.scaled_dot_product_attention(q, k, v, **kw)))
    terr = float((F.scaled_dot_product_attention(q, k, v, **kw).double() - ref).abs().max())
    gb = 2 * B * Hkv * L * D * 2 / 1e9          # K and V bytes read once
    row = {"ours_ms": ours[0], "ours_gbps": gb / ours[0] * 1e3, "max_abs_err_vs_f64": err,
           "torch_max_abs_err_vs_f64": terr, "plan_build_s": bs,
           "shape": f"B{B} Hq{H} Hkv{Hkv} Skv{L} D{D} page {PS}, torch on dense K/V"}
    if theirs:
        row.update(torch_ms=theirs[0][0], torch_backend=theirs[1], ratio=theirs[0][0] / ours[0])
    res["sdpa_fwd_paged_decode_b64_hq32_hkv8_4k_p64"] = row
    print(f"SDPA paged decode: ours {ours[0]:.3f} ms ({gb / ours[0] * 1e3:.0f} GB/s) torch dense "
          f"{row.get('torch_ms', float('nan')):.3f} ms [{row.get('torch_backend')}] -> "
          f"{row.get('ratio', float('nan')):.2f}x  err {err:.1e} (torch {terr:.1e})", flush=True)
    _decode_row(res, "sdpa_fwd_paged_decode_paths_b64_hq32_hkv8_4k_p64", dec, gb, row,
                f"B{B} Hq{H} Hkv{Hkv} Skv{L} D{D} page {PS}")
    # ---- the same K / V contiguous [B, Hkv, Skv, D] (GQA decode, no page table)
    _, gd = fwd_graph("HALF", B, H, Hkv, 1, L, D)
    ins = {1: q, 2: k, 3: v, 4: o, 5: st}
    dec = _decode_both(torch, E, gd, ins, o, ref)
    _decode_row(res, "sdpa_fwd_gqa_decode_paths_b64_hq32_hkv8_4k", dec, gb, row,
                f"B{B} Hq{H} Hkv{Hkv} Skv{L} D{D} contiguous K/V")
    del q, k, v, kp, vp, o, st, ref
    torch.cuda.empty_cache()
    # ---- ragged prefill
    H = Hkv = 16
    lens = []
    while sum(lens) < 32768 - 128:
        lens.append(min(int(torch.randint(128, 4097, (1,), generator=gen)), 32768 - sum(lens)))
    B, T, S = len(lens), sum(lens), max(lens)
    off = torch.tensor([0] + list(torch.cumsum(torch.tensor(lens), 0)), dtype=torch.int32)
    qf = torch.randn((T + 1) * H * D, device="cuda", dtype=tdt)
    kf = torch.randn((T + 1) * H * D, device="cuda", dtype=tdt)
    vf = torch.randn((T + 1) * H * D, device="cuda", dtype=tdt)
    of = torch.empty_like(qf)
    stf = torch.empty((T + 1) * H, device="cuda", dtype=torch.float32)
    offd = off.reshape(-1, 1, 1, 1).cuda()
    ls = torch.tensor(lens, dtype=torch.int32).reshape(B, 1, 1, 1).cuda()
    _, g = ragged_fwd_graph("HALF", B, H, Hkv, S, S, D, causal_mask_bottom_right=True)
    run, bs = E.prepare(g, {1: qf, 2: kf, 3: vf, 4: of, 10: stf, 6: ls, 7: ls, 20: offd, 21: offd})
    ours = median_ms(torch, run, reps=10, warm=2)
    with hip_knobs({"ATTN_VARLEN": "mma"}):      # the mma.sync kernel on the same graph
        run_m, _ = E.prepare(g, {1: qf, 2: kf, 3: vf, 4: of, 10: stf, 6: ls, 7: ls, 20: offd, 21: offd})
        ours_m = median_ms(torch, run_m, reps=10, warm=2)
    # the padded equivalent [B, H, S, D] (zeros past each length)
    qp, kp, vp = (torch.zeros(B, H, S, D, device="cuda", dtype=tdt) for _ in range(3))
    for b, n in enumerate(lens):
        a = int(off[b]) * H * D
        for x, xf in ((qp, qf), (kp, kf), (vp, vf)):
            x[b, :, :n] = xf[a:a + n * H * D].reshape(n, H, D).transpose(0, 1)
    op = torch.empty_like(qp)
    stp = torch.empty(B, H, S, 1, device="cuda", dtype=torch.float32)
    _, gp = fwd_graph("HALF", B, H, Hkv, S, S, D, seq=True, causal_mask_bottom_right=True)
    runp, _ = E.prepare(gp, {1: qp, 2: kp, 3: vp, 4: op, 5: stp, 6: ls, 7: ls})
    ours_p = median_ms(torch, runp, reps=10, warm=2)
    err = 0.0
    for b, n in enumerate(lens):
        a = int(off[b]) * H * D
        ref = _f64_attention(torch, qp[b, :, :n], kp[b, :, :n], vp[b, :, :n], True, scale)
        got = of[a:a + n * H * D].reshape(n, H, D).transpose(0, 1)
        err = max(err, float((got.double() - ref).abs().max()))
    kw = dict(scale=scale, is_causal=True)
    theirs = _torch_sdpa_best(torch, lambda: (lambda: F.scaled_dot_product_attention(qp, kp, vp, **kw)))
    fl = sum(2 * H * n * n * D for n in lens)    # causal: half of 4 H n² D
    row = {"ours_ms": ours[0], "ours_tflops": fl / ours[0] / 1e9, "ours_padded_ms": ours_p[0],
           "ours_mma_sync_ms": ours_m[0], "kernel": os.environ.get("HIPDNN_CABI_HIP_ATTN_VARLEN", "mma"),
           "max_abs_err_vs_f64": err, "plan_build_s": bs,
           "shape": f"B{B} H{H} D{D} causal, {T} tokens, lengths 128-4096 (max {S}); torch and "
                    f"ours_padded on [B, H, {S}, D]"}
    if theirs:
        row.update(torch_ms=theirs[0][0], torch_backend=theirs[1], ratio=theirs[0][0] / ours[0])
    res["sdpa_fwd_ragged_prefill_32k"] = row
    print(f"SDPA ragged prefill: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.0f} TFLOP/s), ours "
          f"padded {ours_p[0]:.3f} ms, torch padded {row.get('torch_ms', float('nan')):.3f} ms "
          f"[{row.get('torch_backend')}] -> {row.get('ratio', float('nan')):.2f}x  err {err:.1e}",
          flush=True)
    del qf, kf, vf, of, qp, kp, vp, op
    torch.cuda.empty_cache()
    bench_sdpa_paged_prefill(torch, E, res)


def bench_sdpa_paged_prefill(torch, E, res):
    """Paged K/V causal prefill (B4, Hq 32, Hkv 8, 4096 queries over 4096 keys, D 128, 128-token
    pages in shuffled order) on the HIP engine (the wgmma kernel where opted in, and the mma.sync
    kernel beside), against PyTorch's fastest SDPA backend on the dense K/V."""
    import math
    from test_attention_paged_ragged import paged_graph
    F = torch.nn.functional
    gen = torch.Generator(device="cpu").manual_seed(6)
    B, H, Hkv, D, PS, L = 4, 32, 8, 128, 128, 4096
    MP = L // PS
    NP = B * MP
    tdt = torch.float16
    scale = 1 / math.sqrt(D)
    q = torch.randn(B, H, L, D, device="cuda", dtype=tdt)
    k = torch.randn(B, Hkv, L, D, device="cuda", dtype=tdt)
    v = torch.randn(B, Hkv, L, D, device="cuda", dtype=tdt)
    tab, kp, vp = _paged_kv(torch, k, v, PS, gen)
    ls = torch.full((B, 1, 1, 1), L, device="cuda", dtype=torch.int32)
    o = torch.empty(B, H, L, D, device="cuda", dtype=tdt)
    st = torch.empty(B, H, L, 1, device="cuda", dtype=torch.float32)
    _, g = paged_graph("HALF", B, H, Hkv, L, D, PS, NP, MP, skv=L, causal_mask_bottom_right=True)
    bufs = {1: q, 2: kp, 3: vp, 4: o, 5: st, 6: ls, 7: ls, 8: tab, 9: tab}
    run, bs = E.prepare(g, bufs)
    ours = median_ms(torch, run, reps=10, warm=2)
    with hip_knobs({"ATTN_VARLEN": "mma"}):
        run_m, _ = E.prepare(g, bufs)
        ours_m = median_ms(torch, run_m, reps=10, warm=2)
    run()
    torch.cuda.synchronize()
    err = 0.0
    for b in range(B):
        ref = _f64_attention(torch, q[b, :, -256:], k[b], v[b], True, scale)   # the last 256 rows
        err = max(err, float((o[b, :, -256:].double() - ref).abs().max()))
    kw = dict(scale=scale, is_causal=True, enable_gqa=True)
    theirs = _torch_sdpa_best(torch, lambda: (lambda: F.scaled_dot_product_attention(q, k, v, **kw)))
    fl = 2 * B * H * L * L * D
    row = {"ours_ms": ours[0], "ours_tflops": fl / ours[0] / 1e9, "ours_mma_sync_ms": ours_m[0],
           "kernel": os.environ.get("HIPDNN_CABI_HIP_ATTN_VARLEN", "mma"),
           "max_abs_err_vs_f64_last256": err, "plan_build_s": bs,
           "shape": f"B{B} Hq{H} Hkv{Hkv} S{L} D{D} causal, page {PS}; torch on dense K/V"}
    if theirs:
        row.update(torch_ms=theirs[0][0], torch_backend=theirs[1], ratio=theirs[0][0] / ours[0])
    res["sdpa_fwd_paged_prefill_b4_hq32_hkv8_4k_p128"] = row
    print(f"SDPA paged prefill: ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.0f} TFLOP/s), mma.sync "
          f"{ours_m[0]:.3f} ms, torch dense {row.get('torch_ms', float('nan')):.3f} ms "
          f"[{row.get('torch_backend')}] -> {row.get('ratio', float('nan')):.2f}x  err {err:.1e}",
          flush=True)
    del q, k, v, kp, vp, o, st
    torch.cuda.empty_cache()


SDPA_FP8 = dict(B=8, H=16, S=4096, D=128)
FP8_SCALES = dict(descale_q=1.0, descale_k=1.0, descale_v=1.0, descale_s=1 / 256.0, scale_s=256.0,
                  scale_o=1.0)


def _cudnn_sdpa_fp8(torch, q8, k8, v8, scales, o8, amax):
    """cuDNN's fp8 SDPA forward (cudnn-frontend pygraph ``sdpa_fp8``) on the same buffers, writing
    ``o8`` / ``amax``: the run function (raises where cudnn-frontend or the graph is unavailable)."""
    import math
    import cudnn
    h = cudnn.create_handle()
    cudnn.set_stream(handle=h, stream=torch.cuda.current_stream().cuda_stream)
    F8, F32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
    g = cudnn.pygraph(io_data_type=F8, intermediate_data_type=F32, compute_data_type=F32, handle=h)
    vp = {}

    def ten(name, x, dt):
        t = g.tensor(name=name, dim=list(x.shape), stride=list(x.stride()), data_type=dt)
        vp[t] = x
        return t
    q, k, v = ten("q", q8, F8), ten("k", k8, F8), ten("v", v8, F8)
    sc = {n: ten(n, x, F32) for n, x in scales.items()}
    kw = dict(q=q, k=k, v=v, attn_scale=1 / math.sqrt(q8.shape[3]), use_causal_mask=False,
              name="sdpa_fp8", **sc)
    try:
        outs = g.sdpa_fp8(generate_stats=False, **kw)
    except TypeError:           # cudnn-frontend before generate_stats: is_inference
        outs = g.sdpa_fp8(is_inference=True, **kw)
    o, amax_s, amax_o = outs[0], outs[-2], outs[-1]
    o.set_output(True).set_dim(list(o8.shape)).set_stride(list(o8.stride())).set_data_type(F8)
    for t, name in ((amax_s, "amax_s"), (amax_o, "amax_o")):
        t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(F32)
        vp[t] = amax[name]
    vp[o] = o8
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    ws = torch.empty(max(1, g.get_workspace_size()), dtype=torch.uint8, device="cuda")

    def run():
        g.execute(vp, ws, handle=h)
    run._keep = (g, h, ws, vp)
    return run


def bench_sdpa_fp8(torch, E, res):
    """FP8 (e4m3) attention forward B8 H16 S4096 D128, fp8 output, amax_s / amax_o: ours (the
    exact two-sweep kernel and the one-sweep HIPDNN_CABI_HIP_ATTN_FP8=flash form) vs cuDNN's fp8
    SDPA (cudnn-frontend), PyTorch's best bf16 SDPA for context; TFLOP/s at 4 B H S^2 D flops;
    the relative error of batch 0 against an fp32 reference on the decoded inputs.  Row
    ``..._overlap``: the one-sweep kernel serial, overlapped and overlapped + ping-pong
    (HIPDNN_CABI_HIP_ATTN_FP8_OVERLAP 0 / 1 / pp) in the same process."""
    import math
    from test_attention_fp8 import UID, f8_graph
    F = torch.nn.functional
    B, H, S, D = (SDPA_FP8[x] for x in ("B", "H", "S", "D"))
    f8 = torch.float8_e4m3fn
    q8, k8, v8 = ((torch.randn(B, H, S, D, device="cuda") * s).to(f8) for s in (2, 2, 1))
    scales = {n: torch.full((1, 1, 1, 1), v, device="cuda") for n, v in FP8_SCALES.items()}
    fl = 4 * B * H * S * S * D
    with torch.no_grad():
        ref = F.scaled_dot_product_attention(q8[:1].float(), k8[:1].float(), v8[:1].float(),
                                             scale=1 / math.sqrt(D))

    def err(o):
        return float((o[:1].float() - ref).norm() / ref.norm())
    _, g = f8_graph(fmt="FP8_E4M3", odt="FP8_E4M3", B=B, H=H, Hkv=H, Sq=S, Skv=S, D=D, stats=False)

    def time_ours(knobs):
        """(o8, amax tensors, (median, min, max) ms, plan build s) of ours under the knobs."""
        o8 = torch.empty(B, H, S, D, device="cuda", dtype=f8)
        am = {n: torch.zeros(1, 1, 1, 1, device="cuda") for n in ("amax_s", "amax_o")}
        bufs = {1: q8, 2: k8, 3: v8, 4: o8, UID["amax_s"]: am["amax_s"], UID["amax_o"]: am["amax_o"]}
        bufs.update({UID[n]: t for n, t in scales.items()})
        with hip_knobs(knobs):
            run, bs = E.prepare(g, bufs)
        return o8, am, median_ms(torch, run, reps=10, warm=2), bs
    for mode in ("exact", "flash"):
        o8, am, ours, bs = time_ours({"ATTN_FP8": mode})
        row = {"ours_ms": ours[0], "ours_tflops": fl / ours[0] / 1e9, "rel_err_vs_fp32": err(o8),
               "amax_s": float(am["amax_s"]), "amax_o": float(am["amax_o"]), "plan_build_s": bs,
               "mode": "two sweeps (exact P quantisation)" if mode == "exact" else "one sweep"}
        if mode == "exact":
            try:
                oc = torch.empty_like(o8)
                amc = {n: torch.zeros(1, 1, 1, 1, device="cuda") for n in ("amax_s", "amax_o")}
                crun = _cudnn_sdpa_fp8(torch, q8, k8, v8, scales, oc, amc)
                theirs = median_ms(torch, crun, reps=10, warm=2)
                row.update(cudnn_ms=theirs[0], cudnn_tflops=fl / theirs[0] / 1e9,
                           ratio_vs_cudnn=theirs[0] / ours[0], cudnn_rel_err_vs_fp32=err(oc),
                           cudnn_amax_s=float(amc["amax_s"]), cudnn_amax_o=float(amc["amax_o"]))
            except Exception as e:  # noqa: BLE001 - no cudnn-frontend / fp8 SDPA here
                row["cudnn_error"] = f"{type(e).__name__}: {e}"[:300]
            qb, kb, vb = (x.to(torch.bfloat16) for x in (q8, k8, v8))
            tb = _torch_sdpa_best(torch, lambda: (lambda: F.scaled_dot_product_attention(
                qb, kb, vb, scale=1 / math.sqrt(D))))
            if tb:
                row.update(torch_bf16_ms=tb[0][0], torch_bf16_backend=tb[1],
                           torch_bf16_tflops=fl / tb[0][0] / 1e9)
        key = "sdpa_fp8_fwd_e4m3_d128" + ("" if mode == "exact" else "_one_sweep")
        res[key] = row
        print(f"SDPA fp8 fwd ({row['mode']}): ours {ours[0]:.3f} ms ({row['ours_tflops']:.0f} "
              f"TFLOP/s) cuDNN fp8 {row.get('cudnn_ms', float('nan')):.3f} ms torch bf16 "
              f"{row.get('torch_bf16_ms', float('nan')):.3f} ms  rel err {row['rel_err_vs_fp32']:.2e}"
              f"{'  cuDNN: ' + row['cudnn_error'] if 'cudnn_error' in row else ''}", flush=True)
    # the one-sweep kernel serial / with S and P V overlapped / overlapped + ping-pong
    # (HIPDNN_CABI_HIP_ATTN_FP8_OVERLAP 0 / 1 / pp) in this process, next to cuDNN's time above
    cud = res.get("sdpa_fp8_fwd_e4m3_d128", {}).get("cudnn_ms")
    row, outs = {"mode": "one sweep", "knob": "HIPDNN_CABI_HIP_ATTN_FP8_OVERLAP"}, {}
    for knob, name in (("0", "serial"), ("1", "overlap"), ("pp", "overlap_pp")):
        o8, am, ours, _ = time_ours({"ATTN_FP8": "flash", "ATTN_FP8_OVERLAP": knob})
        outs[name] = o8
        row.update({f"{name}_ms": ours[0], f"{name}_tflops": fl / ours[0] / 1e9,
                    f"{name}_rel_err_vs_fp32": err(o8), f"{name}_amax_s": float(am["amax_s"]),
                    f"{name}_amax_o": float(am["amax_o"])})
        if cud:
            row[f"{name}_ratio_vs_cudnn"] = cud / ours[0]
        if name != "serial":
            row[f"{name}_max_abs_diff_vs_serial"] = float(
                (o8.float() - outs["serial"].float()).abs().max())
    row["cudnn_ms"] = cud
    row["target"] = 0.8
    res["sdpa_fp8_fwd_e4m3_d128_overlap"] = row
    print("SDPA fp8 fwd one sweep: serial {serial_ms:.3f} ms, overlapped {overlap_ms:.3f} ms, "
          "overlapped + ping-pong {overlap_pp_ms:.3f} ms".format(**row)
          + (f", cuDNN fp8 {cud:.3f} ms" if cud else ""), flush=True)
    del outs
    del q8, k8, v8
    torch.cuda.empty_cache()


def per_call_us(torch, fn, n=5000):
    """Host-side µs per call (median of 5 loops of n calls after 200 warm-up calls, one sync at
    each loop's end): what a Python caller waits per call, launch and overhead included."""
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        out.append((t1 - t0) / n * 1e6)
    return statistics.median(out)


def bench_frontend(torch, E, res):
    """A tiny relu graph through the Python frontend's g.execute with torch CUDA tensors
    (the same buffers every call: the cached variant pack) against torch.nn.functional.relu on the
    same tensor, and the frontend with new tensors every call (kept by value: the caching
    allocator hands the same block back); for 4x8 also cudnn-frontend's execute of the same graph
    (``cudnn_frontend``: interleaved rows, skipped without the cudnn module)."""
    import numpy as np  # noqa: F401  (the frontend imports it anyway)
    from hipdnn_cabi import frontend as hf
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    stream = torch.cuda.current_stream().cuda_stream
    out = {}
    for rows, cols in ((4, 8), (256, 4096)):
        h = hf.Handle(stream=stream)
        g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
        x = g.tensor(name="x", dim=[rows, cols])
        y = g.relu(x).set_output(True)
        g.build()
        xt = torch.randn(rows, cols, device="cuda")
        yt = torch.empty_like(xt)
        vp = {x: xt, y: yt}
        g.execute(vp)
        torch.cuda.synchronize()
        ok = bool(torch.equal(yt, torch.relu(xt)))
        relu = torch.nn.functional.relu
        t_g = per_call_us(torch, lambda: g.execute(vp))
        t_t = per_call_us(torch, lambda: relu(xt))
        t_t_out = per_call_us(torch, lambda: torch.clamp_min(xt, 0, out=yt))
        t_new = per_call_us(torch, lambda: g.execute({x: xt, y: torch.empty_like(xt)}), n=500)
        fresh = torch.full_like(xt, -1.0)
        g.execute({x: xt, y: fresh})
        torch.cuda.synchronize()
        ok = ok and bool(torch.equal(fresh, torch.relu(xt)))
        out[f"{rows}x{cols}"] = {
            "engine": g.engine_name, "correct": ok, "g_execute_us": t_g, "torch_relu_us": t_t,
            "torch_clamp_min_out_us": t_t_out, "g_execute_new_tensors_us": t_new,
            "ratio_new_tensors_vs_torch_relu": t_new / t_t,
            "ratio_g_execute_vs_torch_relu": t_g / t_t, "target": 2.0,
            "c_execute_path": importlib.util.find_spec("hipdnn_cabi.frontend._fastexec") is not None}
        if (rows, cols) == (4, 8):
            out[f"{rows}x{cols}"]["cudnn_frontend"] = _cudnn_fe_peer(torch, g, x, y, xt)
        g.close()
        h.close()
    res["frontend_execute"] = out
    print("frontend:", json.dumps(out), flush=True)


def _cudnn_fe_peer(torch, g, x, y, xt, rounds=5):
    """cudnn-frontend's execute (``import cudnn``, the nvidia-cudnn-frontend wheel) of the same
    relu graph on the same tensors against our g.execute, interleaved round by round (host µs per
    call, per_call_us; the medians of the rounds): with the same tensors, with a new output tensor
    each call, and with a workspace tensor passed as cuDNN users pass it.  {"skipped": why} when
    the module or a plan for the graph is missing."""
    try:
        import cudnn
    except Exception as e:  # noqa: BLE001 - the wheel is optional
        return {"skipped": f"import cudnn: {type(e).__name__}: {e}"}
    try:
        ch = cudnn.create_handle()
        cudnn.set_stream(handle=ch, stream=torch.cuda.current_stream().cuda_stream)
        F = cudnn.data_type.FLOAT
        cg = cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F, handle=ch)
        cx = cg.tensor(name="x", dim=list(xt.shape), stride=list(xt.stride()), data_type=F)
        cy = cg.relu(input=cx)
        cy.set_output(True)
        cy.set_data_type(F)
        cg.validate()
        cg.build_operation_graph()
        cg.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        cg.check_support()
        cg.build_plans()
        cws = torch.empty(max(cg.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
        yc = torch.full_like(xt, -1.0)
        cvp = {cx: xt, cy: yc}
        cg.execute(cvp, cws, handle=ch)
        torch.cuda.synchronize()
        ok = bool(torch.equal(yc, torch.relu(xt)))
    except Exception as e:  # noqa: BLE001 - no cuDNN plan for a relu-only graph, an older API
        return {"skipped": f"cudnn-frontend: {type(e).__name__}: {e}"}
    yt = torch.empty_like(xt)
    vp = {x: xt, y: yt}
    ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
    rows = {"g_execute_us": lambda: g.execute(vp),
            "cudnn_execute_us": lambda: cg.execute(cvp, cws, handle=ch),
            "g_execute_workspace_us": lambda: g.execute(vp, ws),
            "g_execute_new_output_us": lambda: g.execute({x: xt, y: torch.empty_like(xt)}),
            "cudnn_execute_new_output_us": lambda: cg.execute({cx: xt, cy: torch.empty_like(xt)}, cws,
                                                              handle=ch),
            "torch_relu_us": lambda: torch.nn.functional.relu(xt)}
    got = {k: [] for k in rows}
    for _ in range(rounds):
        for k, fn in rows.items():
            got[k].append(per_call_us(torch, fn, n=2000))
    res = {k: statistics.median(v) for k, v in got.items()}
    res.update(correct=ok, cudnn_version=str(getattr(cudnn, "__version__", "?")),
               backend_version=int(cudnn.backend_version()) if hasattr(cudnn, "backend_version") else None,
               ratio_g_execute_vs_cudnn=res["g_execute_us"] / res["cudnn_execute_us"],
               ratio_new_output_vs_cudnn=(res["g_execute_new_output_us"]
                                          / res["cudnn_execute_new_output_us"]),
               ratio_g_execute_vs_torch_relu=res["g_execute_us"] / res["torch_relu_us"],
               target=1.0, rounds=rounds)
    return res


def plots(json_path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(json_path) as f:
        R = json.load(f)
    os.makedirs(out_dir, exist_ok=True)

    def bars(fname, title, labels, a, b, ylabel, la="hip_kernels", lb="PyTorch"):
        fig, ax = plt.subplots(figsize=(max(5, len(labels) * 1.1), 3.6))
        xs = range(len(labels))
        ax.bar([i - 0.2 for i in xs], a, 0.4, label=la)
        ax.bar([i + 0.2 for i in xs], b, 0.4, label=lb)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname), dpi=110)
        plt.close(fig)
    g = R.get("gemm_fp32_4096")
    if g:
        bars("gpu_gemm.png", f"fp32 GEMM 4096^3 (TF32 off), {R.get('device', '')}", ["GEMM"],
             [g["ours_tflops"]], [g["torch_tflops"]], "TFLOP/s", lb="cuBLAS")
    for key, fname, title, lb in (("gemm_16bit", "gpu_gemm16.png", "fp16 / bf16 GEMM (wgmma core)", "cuBLAS"),
                                  ("gemm_odd", "gpu_gemm_odd.png", "bf16 GEMM: odd N / K, small M", "cuBLAS"),
                                  ("conv2d_fwd_fp32_nchw_b32", "gpu_conv_nchw32.png",
                                   "conv2d fwd fp32 NCHW batch 32", "cuDNN")):
        c = R.get(key)
        if c:
            ks = list(c["cases"])
            bars(fname, title, ks, [c["cases"][k]["ours_tflops"] for k in ks],
                 [c["cases"][k]["torch_tflops"] for k in ks], "TFLOP/s", lb=lb)
    c = R.get("conv2d_fwd_nhwc_b32")
    if c:
        ks = list(c["cases"])
        bars("gpu_conv.png", "conv2d fwd NHWC batch 32 (ResNet-50 layers)", ks,
             [c["cases"][k]["ours_tflops"] for k in ks], [c["cases"][k]["torch_tflops"] for k in ks],
             "TFLOP/s", lb="cuDNN")
    c = R.get("conv2d_bwd_nhwc_b32")
    if c:
        ks = list(c["cases"])
        bars("gpu_conv_bwd.png", "conv2d backward data / filter NHWC batch 32", ks,
             [c["cases"][k]["ours_tflops"] for k in ks], [c["cases"][k]["torch_tflops"] for k in ks],
             "TFLOP/s", lb="cuDNN")
    b = R.get("batchnorm_train_fwd_256MB")
    p = R.get("pointwise_chain4_256MB")
    if b and p:
        bars("gpu_bandwidth.png", "256 MB tensors: effective bandwidth (x read + y written)",
             ["batchnorm train fwd", "4-op chain (fused vs 1 torch op)"],
             [b["ours_GBps"], p["ours_GBps"]], [b["torch_GBps"], p["torch_single_op_GBps"]], "GB/s")
        bars("gpu_pointwise.png", "4-op pointwise chain, 256 MB: time", ["chain"],
             [p["ours_ms"]], [p["torch_separate_ms"]], "ms", lb="PyTorch, 4 separate ops")
    ks = [k[len("sdpa_fwd_"):] for k in R if k.startswith("sdpa_fwd_")]
    if ks:
        for d in ("fwd", "bwd"):
            rows = [R.get(f"sdpa_{d}_{k}", {}) for k in ks]
            bars(f"gpu_sdpa_{d}.png", f"SDPA {d}, B=8 H=16 S=4096 (TFLOP/s)", ks,
                 [r.get("ours_tflops", 0) for r in rows], [r.get("torch_tflops", 0) for r in rows],
                 "TFLOP/s", lb="PyTorch (cuDNN)")
    o = R.get("execute_overhead")
    if o:
        labels = ["bare launch (cuda-bindings)", "plugin execute (Python)"]
        vals = [o["bare_launch_us"], o["plugin_execute_us"]]
        if "hipdnnBackendExecute_us" in o:
            labels.append("hipdnnBackendExecute (C)")
            vals.append(o["hipdnnBackendExecute_us"])
        fig, ax = plt.subplots(figsize=(6, 3.4))
        ax.bar(labels, vals, color=["gray", "tab:blue", "tab:orange"][:len(vals)])
        ax.set_ylabel("host time per call (µs)")
        ax.set_title("dispatch overhead, tiny graph", fontsize=10)
        plt.setp(ax.get_xticklabels(), fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "gpu_overhead.png"), dpi=110)
        plt.close(fig)




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "results", "gpu.json"))
    ap.add_argument("--default-paths", action="store_true",
                    help="leave the opt-in kernel paths off (the engine's defaults)")
    ap.add_argument("--plots", metavar="DIR", help="only draw PNGs from --out")
    ap.add_argument("--only", default="gemm,gemm16,gemmodd,convodd,conv,convnchw,convbwd,bn,pointwise,sdpa,sdpafp8,"
                                     "overhead,frontend,norms,normpw,pool,mxq,moe,swiglu,convstats,cudnnpeer,models")
    ap.add_argument("--c-exe", help="built tests/gpu/c_device_ptrs for the C execute overhead")
    a = ap.parse_args()
    if not a.default_paths:
        # the kernel paths the engine keeps opt-in until they have run on a device: measured
        # here (each row that has a fallback times it beside)
        from engine_plugins.hip_kernels.engine import OPT_IN
        for k, v in OPT_IN.items():
            os.environ.setdefault(k, v)
    if a.plots:
        plots(a.out, a.plots)
        return
    import torch
    E = Engine(torch)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "runtime": E.rt.describe(), "reps": REPS, "warmup": WARM, "statistic": "median",
           "sample_ms": SAMPLE_MS,
           "date": time.strftime("%Y-%m-%d")}
    only = a.only.split(",")
    if "cudnn" in only:                  # alias of the cuDNN graph-API peer group
        only.append("cudnnpeer")
    if "models" in only:            # whole networks (bench/models_bench.py): both of them
        only += ["models_llama", "models_resnet"]
    steps = [("gemm", bench_gemm), ("gemm16", bench_gemm16), ("gemmodd", bench_gemm_odd),
             ("convodd", bench_conv_odd), ("conv", bench_conv),
             ("convnchw", bench_conv_nchw32), ("convbwd", bench_conv_bwd), ("bn", bench_bn),
             ("pointwise", bench_pointwise), ("sdpa", bench_sdpa), ("sdpafwdvar", bench_sdpa_fwd_variants),
             ("sdpafp8", bench_sdpa_fp8),
             ("convsweep", bench_conv_sweep),
             ("convfwd16", bench_conv_fwd16)]
    # "overhead" and "frontend" run last (below), after the loop
    from gpu_bench_ext import STEPS as EXT_STEPS   # norms, pooling, MX quantize, MoE
    steps += EXT_STEPS
    from cudnn_peer import STEPS as PEER_STEPS     # cuDNN graph API peer (bench/cudnn_peer.py)
    steps += PEER_STEPS
    from models_bench import STEPS as MODEL_STEPS  # Llama decoder layer, ResNet-50 training step
    steps += MODEL_STEPS
    for k, fn in steps:
        if k in only:
            try:
                fn(torch, E, res)
            except Exception as e:  # noqa: BLE001 - record and go on
                import traceback
                traceback.print_exc()
                res[f"{k}_error"] = f"{type(e).__name__}: {e}"
            torch.cuda.empty_cache()
            os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
            with open(a.out, "w") as f:       # after every group: a cut-short run keeps its rows
                json.dump(res, f, indent=1)
    if "overhead" in only:
        env = None
        if a.c_exe:
            from test_c_program import c_env
            env = c_env()
        try:
            bench_overhead(torch, E, res, a.c_exe, env)
        except Exception as e:  # noqa: BLE001
            res["overhead_error"] = f"{type(e).__name__}: {e}"
    if "frontend" in only:
        try:
            bench_frontend(torch, E, res)
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            res["frontend_error"] = f"{type(e).__name__}: {e}"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
