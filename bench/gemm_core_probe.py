"""Device harness for the GEMM core: correctness of every wgmma variant, then timings.

    python3 bench/gemm_core_probe.py check          # every variant vs PyTorch (float64 reference)
    python3 bench/gemm_core_probe.py time [--json F] # GEMM / conv timings vs cuBLAS / cuDNN

Runs graphs through the engine's plugin object with PyTorch CUDA tensors (the same path as
bench/gpu_bench.py).  Knob variants are set through the environment between plans (the
analysis cache keys on them).  Prints one line per case, flushed (a hang shows where).
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_bench import ROOT, Engine, median_ms, tstrides  # noqa: E402,F401


def knobs(**kw):
    for k in ("GEMM", "TILE", "STAGES", "SPLITK", "TMA", "WG_MN_SWAP"):
        os.environ.pop("HIPDNN_CABI_HIP_" + k, None)
    for k, v in kw.items():
        os.environ["HIPDNN_CABI_HIP_" + k] = str(v)


def relerr(torch, out, ref):
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("nan")
    return float((out - ref).norm() / max(ref.norm(), 1e-30))


def notes_of(E, gbytes):
    from engine_plugins.hip_kernels.engine import analyse
    from hipdnn_cabi.plugin_sdk import parse_graph
    a = analyse(parse_graph(gbytes))
    return "; ".join(a.program.notes) if a.ok else a.reason


def mm_case(torch, E, M, N, K, dt, batch=None, ta=False, tb=False, bias=False, reps=0):
    """C = A @ B (+ bias, relu); ta/tb: A/B stored transposed (column-major)."""
    from gpu_testlib import T, graph_bytes, matmul, pw
    tdt = {"HALF": torch.float16, "BFLOAT16": torch.bfloat16}[dt]
    bd = [batch] if batch else []
    a = torch.randn(*bd, K, M, device="cuda", dtype=tdt).transpose(-1, -2) if ta else \
        torch.randn(*bd, M, K, device="cuda", dtype=tdt)
    b = torch.randn(*bd, N, K, device="cuda", dtype=tdt).transpose(-1, -2) if tb else \
        torch.randn(*bd, K, N, device="cuda", dtype=tdt)
    c = torch.full((*bd, M, N), float("nan"), device="cuda", dtype=tdt)
    ts = [T(1, bd + [M, K], dt, strides=tstrides(a)), T(2, bd + [K, N], dt, strides=tstrides(b))]
    nodes = []
    if bias:
        bv = torch.randn(*([1] * len(bd)), 1, N, device="cuda", dtype=tdt)
        ts += [T(3, bd + [M, N], "FLOAT", virtual=True), T(4, [1] * len(bd) + [1, N], dt, strides=tstrides(bv)),
               T(5, bd + [M, N], "FLOAT", virtual=True), T(6, bd + [M, N], dt, strides=tstrides(c))]
        nodes = [matmul(1, 2, 3), pw("ADD", 3, 5, in1=4), pw("RELU_FWD", 5, 6)]
        bufs = {1: a, 2: b, 4: bv, 6: c}
    else:
        ts += [T(6, bd + [M, N], dt, strides=tstrides(c))]
        nodes = [matmul(1, 2, 6)]
        bufs = {1: a, 2: b, 6: c}
    g = graph_bytes(ts, nodes)
    run, _ = E.prepare(g, bufs)
    run()
    torch.cuda.synchronize()
    ref = torch.matmul(a.double(), b.double())
    if bias:
        ref = torch.relu(ref + bv.double())
    err = relerr(torch, c, ref)
    t = median_ms(torch, run, reps=reps) if reps else None
    return err, t, notes_of(E, g), (a, b, c)


def conv_case(torch, E, kind, N, C, K, H, R, st, pad, dt, nhwc=True, nsp=2, reps=0):
    import torch.nn.functional as F
    from gpu_testlib import T, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes
    tdt = {"HALF": torch.float16, "BFLOAT16": torch.bfloat16, "FLOAT": torch.float32}[dt]
    cl = (torch.channels_last if nsp == 2 else torch.channels_last_3d) if nhwc else torch.contiguous_format
    sp = [H] * nsp
    P = (H + 2 * pad - R) // st + 1
    x = torch.randn(N, C, *sp, device="cuda", dtype=tdt).to(memory_format=cl)
    w = (torch.randn(K, C, *([R] * nsp), device="cuda", dtype=tdt) / (C * R ** nsp) ** 0.5).to(memory_format=cl)
    dy = torch.randn(N, K, *([P] * nsp), device="cuda", dtype=tdt).to(memory_format=cl)
    tx = T(1, [N, C] + sp, dt, strides=tstrides(x))
    tw = T(2, [K, C] + [R] * nsp, dt, strides=tstrides(w))
    ty = T(3, [N, K] + [P] * nsp, dt, strides=tstrides(dy))
    conv = F.conv2d if nsp == 2 else F.conv3d
    a = dict(stride=st, padding=pad)
    if kind == "fwd":
        y = torch.full_like(dy, float("nan"))
        g = graph_bytes([tx, tw, ty], [conv_fwd(1, 2, 3, [pad] * nsp, [st] * nsp, [1] * nsp)])
        run, _ = E.prepare(g, {1: x, 2: w, 3: y})
        out = y
        ref_fn = lambda: conv(x.double(), w.double(), **a)  # noqa: E731
        theirs = lambda: conv(x, w, **a)  # noqa: E731
    else:
        mask = [kind == "data", kind == "filter", False]
        if kind == "data":
            out = torch.full_like(x, float("nan"))
            g = graph_bytes([ty, tw, tx], [conv_bwd_data(3, 2, 1, [pad] * nsp, [st] * nsp, [1] * nsp)])
            run, _ = E.prepare(g, {3: dy, 2: w, 1: out})
        else:
            out = torch.full_like(w, float("nan"))
            g = graph_bytes([tx, ty, tw], [conv_bwd_filter(1, 3, 2, [pad] * nsp, [st] * nsp, [1] * nsp)])
            run, _ = E.prepare(g, {1: x, 3: dy, 2: out})

        def theirs():
            return torch.ops.aten.convolution_backward(dy, x, w, None, [st] * nsp, [pad] * nsp, [1] * nsp,
                                                       False, [0] * nsp, 1, mask)

        def ref_fn():
            return torch.ops.aten.convolution_backward(dy.double(), x.double(), w.double(), None, [st] * nsp,
                                                       [pad] * nsp, [1] * nsp, False, [0] * nsp, 1,
                                                       mask)[0 if kind == "data" else 1]
    run()
    torch.cuda.synchronize()
    err = relerr(torch, out, ref_fn())
    t = median_ms(torch, run, reps=reps) if reps else None
    tt = median_ms(torch, theirs, reps=reps) if reps else None
    fl = 2 * N * K * P ** nsp * C * R ** nsp
    return err, t, tt, fl, notes_of(E, g)


def check(torch, E):
    rows = []
    fails = 0

    def rec(name, err, note, tol):
        nonlocal fails
        ok = err == err and err < tol
        fails += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:58s} err {err:.2e}  [{note}]", flush=True)
        rows.append({"case": name, "err": err, "ok": ok, "notes": note})

    mm = [  # M, N, K, batch, ta, tb, bias
        (256, 256, 256, None, False, False, False),
        (512, 384, 320, None, False, False, True),
        (1000, 1000, 1000, None, False, False, False),   # tails everywhere
        (300, 520, 264, None, False, True, False),       # B K-major (B^T row-major)
        (264, 520, 328, None, True, False, False),       # A M-major
        (264, 136, 328, None, True, True, True),
        (8, 4096, 4096, None, False, False, False),       # M < 16, split-K
        (4096, 8, 512, None, False, False, False),        # N < 16 (no 16-byte path on B)
        (128, 128, 1, None, False, False, False),         # K = 1 (element gathers)
        (96, 80, 37, None, False, False, True),           # K % 8 != 0
        (256, 256, 16384, None, False, False, False),     # huge K, split-K
        (200, 136, 72, 3, False, False, True),            # strided batch
        (2048, 2048, 1024, None, False, False, False),
    ]
    # (knobs, dtypes, case indices or None = all)
    variants = [(dict(), ("HALF", "BFLOAT16"), None), (dict(TMA=0), ("HALF",), None),
                (dict(TILE="128x256"), ("HALF",), (1, 2, 3, 4, 5, 12)),
                (dict(TILE="128x64"), ("HALF",), (1, 2, 4, 5, 11)),
                (dict(TILE="128x128", STAGES=3), ("HALF",), (2, 5)),
                (dict(SPLITK=0), ("HALF",), (6, 7, 10))]
    for v, dts, sel in variants:
        knobs(**v)
        for dt in dts:
            for i, (M, N, K, bt, ta, tb, bias) in enumerate(mm):
                if sel is not None and i not in sel:
                    continue
                err, _, note, _ = mm_case(torch, E, M, N, K, dt, bt, ta, tb, bias)
                rec(f"{v} mm {dt} {M}x{N}x{K} b{bt} ta{int(ta)} tb{int(tb)} bias{int(bias)}", err, note,
                    2e-2 if dt == "BFLOAT16" else 5e-3)
    convs = [  # kind, N, C, K, H, R, st, pad, nhwc, nsp
        ("fwd", 4, 64, 64, 14, 3, 1, 1, True, 2), ("fwd", 2, 64, 128, 15, 3, 2, 1, True, 2),
        ("fwd", 2, 3, 32, 17, 3, 1, 1, False, 2), ("fwd", 2, 16, 24, 9, 3, 1, 1, False, 2),
        ("fwd", 2, 16, 32, 6, 3, 1, 1, True, 3),
        ("data", 4, 64, 64, 14, 3, 1, 1, True, 2), ("data", 2, 32, 64, 15, 3, 2, 1, True, 2),
        ("data", 2, 16, 24, 9, 3, 1, 1, False, 2), ("data", 2, 16, 32, 6, 3, 1, 1, True, 3),
        ("filter", 4, 64, 64, 14, 3, 1, 1, True, 2), ("filter", 2, 32, 64, 15, 3, 2, 1, True, 2),
        ("filter", 2, 16, 24, 9, 3, 1, 1, False, 2), ("filter", 2, 16, 32, 6, 3, 1, 1, True, 3),
        ("fwd", 8, 512, 512, 7, 3, 1, 1, True, 2), ("filter", 8, 256, 256, 14, 3, 1, 1, True, 2),
    ]
    for v, dts, sel in ((dict(), ("HALF", "BFLOAT16"), None),
                        (dict(TMA=0), ("HALF",), (0, 1, 3, 13)),
                        (dict(TILE="128x256"), ("HALF",), (0, 9, 13, 14))):
        knobs(**v)
        for dt in dts:
            for i, (kind, N, C, K, H, R, st, pad, nhwc, nsp) in enumerate(convs):
                if sel is not None and i not in sel:
                    continue
                err, _, _, _, note = conv_case(torch, E, kind, N, C, K, H, R, st, pad, dt, nhwc, nsp)
                rec(f"{v} conv {kind} {dt} N{N} C{C} K{K} H{H} R{R} s{st} {'nhwc' if nhwc else 'nchw'} {nsp}d",
                    err, note, 2e-2 if dt == "BFLOAT16" else 5e-3)
    knobs()
    print(f"== check: {len(rows) - fails}/{len(rows)} ok", flush=True)
    return rows


RESNET = [("conv2_3x3", 64, 64, 56, 3, 1, 1), ("conv2_1x1_expand", 64, 256, 56, 1, 1, 0),
          ("conv3_3x3", 128, 128, 28, 3, 1, 1), ("conv4_3x3", 256, 256, 14, 3, 1, 1),
          ("conv5_3x3", 512, 512, 7, 3, 1, 1), ("conv4_1x1_s2", 512, 1024, 28, 1, 2, 0)]


def timing(torch, E, reps=20):
    out = {}
    for v in (dict(), dict(TILE="128x256"), dict(TILE="128x128"), dict(TMA=0)):
        knobs(**v)
        for dt in ("HALF", "BFLOAT16"):
            shapes = [(4096, 4096, 4096)] + ([(8192, 4096, 4096), (8192, 11008, 4096), (8192, 4096, 11008),
                                              (8192, 14336, 4096), (8192, 4096, 14336)] if not v else [])
            for (M, N, K) in shapes:
                err, t, note, (a, b, c) = mm_case(torch, E, M, N, K, dt, reps=reps)
                d = torch.empty_like(c)
                tt = median_ms(torch, lambda: torch.matmul(a, b, out=d), reps=reps)
                fl = 2 * M * N * K
                key = f"mm_{dt}_{M}x{N}x{K}_{'_'.join(f'{k}{x}' for k, x in v.items()) or 'auto'}"
                out[key] = {"ours_ms": t[0], "torch_ms": tt[0], "ratio": tt[0] / t[0], "err": err,
                            "ours_tflops": fl / t[0] / 1e9, "torch_tflops": fl / tt[0] / 1e9, "notes": note}
                print(f"{key:48s} ours {t[0]:.3f} ms {fl / t[0] / 1e9:6.1f} TF/s  cuBLAS {tt[0]:.3f} ms "
                      f"-> {tt[0] / t[0]:.2f}x err {err:.1e} [{note}]", flush=True)
                del a, b, c, d
    knobs()
    import torch.backends.cudnn
    torch.backends.cudnn.benchmark = True
    for kind in ("fwd", "data", "filter"):
        for (name, C, K, H, R, st, pad) in RESNET:
            err, t, tt, fl, note = conv_case(torch, E, kind, 32, C, K, H, R, st, pad, "HALF", True, 2, reps=reps)
            key = f"conv_{kind}_HALF_{name}"
            out[key] = {"ours_ms": t[0], "torch_ms": tt[0], "ratio": tt[0] / t[0], "err": err,
                        "ours_tflops": fl / t[0] / 1e9, "notes": note}
            print(f"{key:48s} ours {t[0]:.3f} ms {fl / t[0] / 1e9:6.1f} TF/s  cuDNN {tt[0]:.3f} ms "
                  f"-> {tt[0] / t[0]:.2f}x err {err:.1e} [{note}]", flush=True)
    return out


def main():
    import torch
    E = Engine(torch)
    mode = sys.argv[1] if len(sys.argv) > 1 else "check"
    js = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    t0 = time.time()
    res = check(torch, E) if mode == "check" else timing(torch, E)
    print(f"== {mode} done in {time.time() - t0:.0f} s", flush=True)
    if js:
        with open(js, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
