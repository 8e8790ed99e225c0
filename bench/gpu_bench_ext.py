"""Issue-17 rows of `make bench-gpu` (imported by gpu_bench.py): layernorm / RMSnorm forward and
backward fp16 [8192, 4096] vs PyTorch, max-pool 3x3 s2 on ResNet-50's stem output (b32, 64 ch,
112^2, NHWC fp16) vs PyTorch, MX (FP8 E4M3 + E8M0, block 32) quantization of 256 MB of bf16 vs a
device copy's bandwidth, MoE grouped matmul (8 experts, top-2, 4096 tokens, 4096 -> 14336, bf16)
vs torch._grouped_mm (or a loop of matmuls).  Each row: medians, GB/s or TFLOP/s, ratio, error."""
from __future__ import annotations

from gpu_bench import median_ms, tstrides


def _ln_graph(M, D, rms, bwd):
    from ext_samples import ln_bwd, ln_fwd
    if bwd:
        return ln_bwd("HALF", "FLOAT", M, D, rms=rms)
    return ln_fwd("HALF", "FLOAT", M, D, rms=rms, bias=not rms)


def bench_norms(torch, E, res):
    import torch.nn.functional as F
    M, D = 8192, 4096
    x = torch.randn(M, D, device="cuda", dtype=torch.half)
    dy = torch.randn(M, D, device="cuda", dtype=torch.half)
    w = torch.rand(D, device="cuda") + 0.5
    b = torch.randn(D, device="cuda")
    wh, bh = w.half(), b.half()
    for rms in (False, True):
        nm = "rmsnorm" if rms else "layernorm"
        # forward (training: statistics written)
        ts, g = _ln_graph(M, D, rms, False)
        y = torch.empty_like(x)
        mean, inv = torch.empty(M, 1, device="cuda"), torch.empty(M, 1, device="cuda")
        bufs = {1: x, 2: w, 5: y, 7: inv}
        if not rms:
            bufs.update({3: b, 6: mean})
        run, _ = E.prepare(g, bufs)
        ours = median_ms(torch, run)
        if rms:
            ref = F.rms_norm(x.float(), (D,), w, 1e-5)
            theirs = median_ms(torch, lambda: F.rms_norm(x, (D,), wh, 1e-5))
        else:
            ref = F.layer_norm(x.float(), (D,), w, b, 1e-5)
            theirs = median_ms(torch, lambda: torch.ops.aten.native_layer_norm(x, [D], wh, bh, 1e-5))
        err = float((y.float() - ref).norm() / ref.norm())
        nb = 2 * M * D * 2
        res[f"{nm}_fwd_fp16_8192x4096"] = {
            "ours_ms": ours[0], "torch_ms": theirs[0], "ours_GBps": nb / ours[0] / 1e6,
            "torch_GBps": nb / theirs[0] / 1e6, "ratio": theirs[0] / ours[0], "rel_err": err,
            "bytes_counted": "x read + y written (fp16)", "target": 0.85,
            "note": "ours: FLOAT scale/bias/statistics (hipDNN's mixed graph); torch: fp16 weights"}
        print(f"{nm} fwd: ours {ours[0]:.3f} ms torch {theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)
        # backward
        ts, g = _ln_graph(M, D, rms, True)
        xf = x.float()
        mu = xf.mean(1, keepdim=True)
        iv = 1 / torch.sqrt(((xf - mu) ** 2).mean(1, keepdim=True) + 1e-5) if not rms else \
            1 / torch.sqrt((xf * xf).mean(1, keepdim=True) + 1e-5)
        dx = torch.empty_like(x)
        ds, db = torch.empty(D, device="cuda"), torch.empty(D, device="cuda")
        bufs = {1: dy, 2: x, 3: w, 5: iv, 6: dx, 7: ds, 8: db}
        if not rms:
            bufs[4] = mu
        run, _ = E.prepare(g, bufs)
        ours = median_ms(torch, run)
        xr = xf.clone().requires_grad_(True)
        wr = w.clone().requires_grad_(True)
        yr = F.rms_norm(xr, (D,), wr, 1e-5) if rms else F.layer_norm(xr, (D,), wr, b, 1e-5)
        gx, = torch.autograd.grad(yr, [xr], dy.float())
        err = float((dx.float() - gx).norm() / gx.norm())
        if rms:
            xh = x.clone().requires_grad_(True)
            whr = wh.clone().requires_grad_(True)
            yh = F.rms_norm(xh, (D,), whr, 1e-5)
            theirs = median_ms(torch, lambda: torch.autograd.grad(yh, [xh, whr], dy, retain_graph=True))
        else:
            _, m16, r16 = torch.ops.aten.native_layer_norm(x, [D], wh, bh, 1e-5)
            theirs = median_ms(torch, lambda: torch.ops.aten.native_layer_norm_backward(
                dy, x, [D], m16, r16, wh, bh, [True, True, True]))
        nb = 3 * M * D * 2
        res[f"{nm}_bwd_fp16_8192x4096"] = {
            "ours_ms": ours[0], "torch_ms": theirs[0], "ours_GBps": nb / ours[0] / 1e6,
            "torch_GBps": nb / theirs[0] / 1e6, "ratio": theirs[0] / ours[0], "rel_err_dx": err,
            "bytes_counted": "dy, x read + dx written (fp16)", "target": 0.85,
            "note": "torch rmsnorm backward through autograd (no fused aten backward)" if rms else ""}
        print(f"{nm} bwd: ours {ours[0]:.3f} ms torch {theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)


def bench_pool(torch, E, res):
    import torch.nn.functional as F
    from ext_samples import pool_fwd
    from gpu_testlib import T
    N, C, H = 32, 64, 112
    x = torch.randn(N, C, H, H, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    ts, g = pool_fwd("HALF", "nhwc", [N, C, H, H], [3, 3], [2, 2], [1, 1], [1, 1], "MAXPOOL",
                     "NEG_INF_PAD", index=False)
    assert isinstance(ts[0], T)
    y = torch.empty(N, C, 56, 56, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    assert tstrides(y) == ts[1].strides and tstrides(x) == ts[0].strides
    run, _ = E.prepare(g, {1: x, 2: y})
    ours = median_ms(torch, run)
    ref = F.max_pool2d(x, 3, 2, 1)
    err = float((y.float() - ref.float()).abs().max())
    theirs = median_ms(torch, lambda: F.max_pool2d(x, 3, 2, 1))
    nb = x.numel() * 2 + y.numel() * 2
    res["maxpool3x3s2_b32c64_112_nhwc_fp16"] = {
        "ours_ms": ours[0], "torch_ms": theirs[0], "ours_GBps": nb / ours[0] / 1e6,
        "torch_GBps": nb / theirs[0] / 1e6, "ratio": theirs[0] / ours[0], "max_abs_err": err,
        "target": 0.8}
    print(f"maxpool: ours {ours[0]:.3f} ms torch {theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x err {err}", flush=True)


def bench_mxq(torch, E, res):
    from ext_samples import bsq
    R, Cc = 8192, 16384        # 128 Mi bf16 = 256 MB
    x = torch.randn(R, Cc, device="cuda", dtype=torch.bfloat16)
    ts, g = bsq("BFLOAT16", "FP8_E4M3", "FP8_E8M0", [R, Cc], 32)
    y = torch.empty(R, Cc, device="cuda", dtype=torch.uint8)
    s = torch.empty(R, Cc // 32, device="cuda", dtype=torch.uint8)
    run, _ = E.prepare(g, {1: x, 2: y, 3: s})
    ours = median_ms(torch, run)
    dst = torch.empty_like(x)
    copy = median_ms(torch, lambda: dst.copy_(x))
    nb = x.numel() * 2 + y.numel() + s.numel()
    cb = 2 * x.numel() * 2
    ok = None
    if hasattr(torch, "float8_e4m3fn"):
        xb = x.float().view(R, Cc // 32, 32)
        sc = torch.pow(2.0, s.float() - 127).view(R, Cc // 32, 1)
        yv = y.view(torch.float8_e4m3fn).float().view(R, Cc // 32, 32)
        ok = float(((yv * sc - xb).norm() / xb.norm()))
    res["mx_quantize_fp8e4m3_bf16_256MB"] = {
        "ours_ms": ours[0], "copy_ms": copy[0], "ours_GBps": nb / ours[0] / 1e6,
        "copy_GBps": cb / copy[0] / 1e6, "ratio": (nb / ours[0]) / (cb / copy[0]),
        "roundtrip_rel_err": ok, "target": 0.8,
        "bytes_counted": "x read + y + scale written; copy: read + write"}
    print(f"mxq: ours {ours[0]:.3f} ms ({nb / ours[0] / 1e6:.0f} GB/s) copy {cb / copy[0] / 1e6:.0f} GB/s "
          f"-> {(nb / ours[0]) / (cb / copy[0]):.2f}x roundtrip err {ok}", flush=True)


def bench_moe(torch, E_, res):
    from ext_samples import moe
    Ex, k, S, K, N = 8, 2, 4096, 4096, 14336
    rows = S * k
    tok = torch.randn(1, rows, K, device="cuda", dtype=torch.bfloat16)
    # weights [E, K, N] stored K-contiguous (a transposed [E, N, K]): cuDNN's MoE layout, and
    # the layout torch._grouped_mm wants for its second operand
    w = (torch.randn(Ex, N, K, device="cuda", dtype=torch.bfloat16) / 64).transpose(1, 2)
    offs = torch.arange(0, rows, rows // Ex, device="cuda", dtype=torch.int32).view(Ex, 1, 1)
    out = torch.empty(1, rows, N, device="cuda", dtype=torch.bfloat16)
    ts, g = moe("BFLOAT16", "NONE", rows, K, N, Ex, w_k_contig=True)
    assert tstrides(w) == ts[1].strides
    run, _ = E_.prepare(g, {1: tok, 2: w, 3: offs, 4: out})
    ours = median_ms(torch, run, reps=10, warm=2)
    a = tok.view(rows, K)
    ends = (offs.view(-1) + rows // Ex).to(torch.int32)
    path = "loop"
    fn = None
    if hasattr(torch, "_grouped_mm"):
        try:
            torch._grouped_mm(a, w, offs=ends)
            fn = lambda: torch._grouped_mm(a, w, offs=ends)  # noqa: E731
            path = "torch._grouped_mm"
        except Exception as e:  # noqa: BLE001
            path = f"loop (_grouped_mm failed: {type(e).__name__})"
    if fn is None:
        sl = [(int(o), int(o) + rows // Ex) for o in offs.view(-1).tolist()]
        fn = lambda: [a[lo:hi] @ w[e] for e, (lo, hi) in enumerate(sl)]  # noqa: E731
    theirs = median_ms(torch, fn, reps=10, warm=2)
    ref = torch.cat([a[i * (rows // Ex):(i + 1) * (rows // Ex)].float() @ w[i].float()
                     for i in range(Ex)])
    err = float((out.view(rows, N).float() - ref).norm() / ref.norm())
    fl = 2 * rows * K * N
    res["moe_grouped_matmul_8x_top2_4096tok_4096x14336_bf16"] = {
        "ours_ms": ours[0], "torch_ms": theirs[0], "ours_TFLOPs": fl / ours[0] / 1e9,
        "torch_TFLOPs": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0], "rel_err": err,
        "torch_path": path, "target": 0.5}
    print(f"moe: ours {ours[0]:.2f} ms ({fl / ours[0] / 1e9:.0f} TFLOP/s) {path} {theirs[0]:.2f} ms "
          f"-> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)
    # the same with the 128 x 128 tile (knob), for the record
    import os
    os.environ["HIPDNN_CABI_HIP_TILE"] = "128x128"
    try:
        run2, _ = E_.prepare(g, {1: tok, 2: w, 3: offs, 4: out})
        t2 = median_ms(torch, run2, reps=10, warm=2)
        res["moe_grouped_matmul_8x_top2_4096tok_4096x14336_bf16"]["ours_ms_tile128x128"] = t2[0]
        print(f"moe tile 128x128: {t2[0]:.2f} ms ({fl / t2[0] / 1e9:.0f} TFLOP/s)", flush=True)
    finally:
        del os.environ["HIPDNN_CABI_HIP_TILE"]
    # weight gradient: dweight[e] = token[rows of e]^T doutput[rows of e] (K-grouped scheduler)
    from ext_samples import moe_bwd
    dy = torch.randn(1, rows, N, device="cuda", dtype=torch.bfloat16)
    dw = torch.empty(Ex, K, N, device="cuda", dtype=torch.bfloat16)
    ts, g = moe_bwd("BFLOAT16", rows, K, N, Ex)
    run, _ = E_.prepare(g, {1: dy, 2: tok, 3: offs, 4: dw})
    ours = median_ms(torch, run, reps=10, warm=2)
    d2 = dy.view(rows, N)
    sl = [(int(o), int(o) + rows // Ex) for o in offs.view(-1).tolist()]
    theirs = median_ms(torch, lambda: [a[lo:hi].t() @ d2[lo:hi] for lo, hi in sl], reps=10, warm=2)
    ref = torch.stack([a[lo:hi].float().t() @ d2[lo:hi].float() for lo, hi in sl])
    err = float((dw.float() - ref).norm() / ref.norm())
    res["moe_weight_gradient_8x_4096tok_4096x14336_bf16"] = {
        "ours_ms": ours[0], "torch_ms": theirs[0], "ours_TFLOPs": fl / ours[0] / 1e9,
        "torch_TFLOPs": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0], "rel_err": err,
        "torch_path": "loop of matmuls (token_e^T @ dout_e)", "target": None}
    print(f"moe wgrad: ours {ours[0]:.2f} ms ({fl / ours[0] / 1e9:.0f} TFLOP/s) loop {theirs[0]:.2f} ms "
          f"-> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)


def bench_norm_pw(torch, E, res):
    """layernorm -> (virtual) ADD row -> RELU -> MUL by a residual, one fused kernel, vs the
    same four PyTorch ops."""
    import torch.nn.functional as F
    from ext_samples import ln_pw
    M, D = 8192, 4096
    x = torch.randn(M, D, device="cuda", dtype=torch.half)
    w = torch.rand(D, device="cuda") + 0.5
    b = torch.randn(D, device="cuda")
    rb = torch.randn(1, D, device="cuda", dtype=torch.half)
    r_ = torch.randn(M, D, device="cuda", dtype=torch.half)
    out = torch.empty_like(x)
    mean, inv = torch.empty(M, 1, device="cuda"), torch.empty(M, 1, device="cuda")
    ts, g = ln_pw("HALF", "FLOAT", M, D)
    run, _ = E.prepare(g, {1: x, 2: w, 3: b, 6: mean, 7: inv, 8: rb, 11: r_, 12: out})
    ours = median_ms(torch, run)
    wh, bh = w.half(), b.half()
    fn = lambda: torch.relu(F.layer_norm(x, (D,), wh, bh, 1e-5) + rb) * r_  # noqa: E731
    theirs = median_ms(torch, fn)
    ref = torch.relu(F.layer_norm(x.float(), (D,), w, b, 1e-5) + rb.float()) * r_.float()
    err = float((out.float() - ref).norm() / ref.norm())
    nb = 3 * M * D * 2
    res["layernorm_add_relu_mul_fp16_8192x4096"] = {
        "ours_ms": ours[0], "torch_ms": theirs[0], "ours_GBps": nb / ours[0] / 1e6,
        "ratio": theirs[0] / ours[0], "rel_err": err, "target": None,
        "bytes_counted": "x, residual read + out written (fp16)",
        "note": "ours: one kernel (norm + fused pointwise run); torch: 4 eager ops"}
    print(f"ln+pw: ours {ours[0]:.3f} ms torch {theirs[0]:.3f} ms -> {theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)


def _with_env(k, v, fn):
    import os
    old = os.environ.get(k)
    os.environ[k] = v
    try:
        return fn()
    finally:
        if old is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = old


def bench_swiglu(torch, E, res):
    """Gate|up projection + SwiGLU, bf16, M 4096, K 4096, F 11008: x @ W_gate and x @ W_up (the
    two halves of one packed [K, 2F] weight, bound at w and w + F) -> swish(g) * u, one paired
    GEMM kernel (gemm.emit_pair), vs PyTorch's matmul then F.silu(g) * u; also our unfused plan
    (HIPDNN_CABI_HIP_PAIR_GEMM=0: two GEMMs + the elementwise kernel)."""
    import torch.nn.functional as F
    from gpu_testlib import T, graph_bytes, matmul, pw
    M, K, Fd = 4096, 4096, 11008
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(K, 2 * Fd, device="cuda") * K ** -0.5).to(torch.bfloat16)
    z = torch.empty(M, Fd, device="cuda", dtype=torch.bfloat16)
    ts = [T(1, [M, K], "BFLOAT16"), T(2, [K, Fd], "BFLOAT16", strides=[2 * Fd, 1]),
          T(3, [K, Fd], "BFLOAT16", strides=[2 * Fd, 1])] + \
        [T(u, [M, Fd], "FLOAT", virtual=True) for u in (4, 5, 6)] + [T(7, [M, Fd], "BFLOAT16")]
    g = graph_bytes(ts, [matmul(1, 2, 4), matmul(1, 3, 5), pw("SWISH_FWD", 4, 6, swish_beta=1.0),
                         pw("MUL", 6, 7, 5)])
    bufs = {1: x, 2: w[:, :Fd], 3: w[:, Fd:], 7: z}
    run, bs = E.prepare(g, bufs)
    ours = median_ms(torch, run)
    yf = x.float() @ w.float()
    ref = F.silu(yf[:, :Fd]) * yf[:, Fd:]
    err = float((z.float() - ref).norm() / ref.norm())
    run2, _ = _with_env("HIPDNN_CABI_HIP_PAIR_GEMM", "0", lambda: E.prepare(g, bufs))
    unfused = median_ms(torch, run2)

    def theirs_fn():
        y = x @ w
        return F.silu(y[:, :Fd]) * y[:, Fd:]
    theirs = median_ms(torch, theirs_fn)
    gemm_only = median_ms(torch, lambda: x @ w)
    fl = 2 * M * K * 2 * Fd
    res["swiglu_gate_up_bf16_4096x4096x11008"] = {
        "ours_ms": ours[0], "ours_unfused_ms": unfused[0], "torch_ms": theirs[0],
        "torch_gemm_only_ms": gemm_only[0], "ours_tflops": fl / ours[0] / 1e9,
        "torch_tflops": fl / theirs[0] / 1e9, "ratio": theirs[0] / ours[0],
        "speedup_vs_unfused": unfused[0] / ours[0], "rel_err": err, "plan_build_s": bs, "target": None,
        "note": "ours: one paired GEMM writing only z [M, F]; torch: x @ w [M, 2F] then silu(g) * u"}
    print(f"SwiGLU gate|up bf16 4096x4096x(2x11008): ours {ours[0]:.3f} ms ({fl / ours[0] / 1e9:.0f} TFLOP/s), "
          f"unfused {unfused[0]:.3f} ms, torch {theirs[0]:.3f} ms (GEMM alone {gemm_only[0]:.3f}) -> "
          f"{theirs[0] / ours[0]:.2f}x err {err:.1e}", flush=True)


def bench_conv_genstats(torch, E, res):
    """ResNet-50 conv2 3x3 (fp16 NHWC, batch 32, 64 -> 64 channels, 56^2) + per-channel batch
    statistics: conv -> y -> training batchnorm (the conv epilogue sums each channel - genstats
    - so the batchnorm runs finalize + apply only), vs PyTorch's conv then batch_norm (training:
    statistics + normalisation; conv + var_mean alone recorded too); also our plan with HIPDNN_CABI_HIP_GENSTATS=0 (the batchnorm's
    own statistics pass)."""
    import torch.nn.functional as F
    from gpu_testlib import T, bn_train, conv_fwd, graph_bytes
    N, C, H, K = 32, 64, 56, 64
    cl = torch.channels_last
    x = torch.randn(N, C, H, H, device="cuda", dtype=torch.half).to(memory_format=cl)
    w = (torch.randn(K, C, 3, 3, device="cuda") * (9 * C) ** -0.5).half().to(memory_format=cl)
    out = torch.empty(N, K, H, H, device="cuda", dtype=torch.half).to(memory_format=cl)
    sc, bi = torch.rand(K, device="cuda") + 0.5, torch.randn(K, device="cuda")
    mu, iv = torch.empty(K, device="cuda"), torch.empty(K, device="cuda")
    cd = [1, K, 1, 1]
    ys = tstrides(out)
    g = graph_bytes([T(1, list(x.shape), "HALF", strides=tstrides(x)),
                     T(2, list(w.shape), "HALF", strides=tstrides(w)),
                     T(3, list(out.shape), "HALF", strides=ys, virtual=True),
                     T(5, cd), T(6, cd), T(7, [1, 1, 1, 1], value=1e-5), T(8, cd), T(9, cd),
                     T(10, list(out.shape), "HALF", strides=ys)],
                    [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1]), bn_train(3, 5, 6, 7, 10, 8, 9)])
    bufs = {1: x, 2: w, 5: sc, 6: bi, 8: mu, 9: iv, 10: out}
    run, bs = E.prepare(g, bufs)
    ours = median_ms(torch, run)
    yr = F.conv2d(x.float(), w.float(), padding=1).half().float()
    ref = F.batch_norm(yr, None, None, sc, bi, training=True, eps=1e-5)
    err = float((out.float() - ref).norm() / ref.norm())
    merr = float((mu - yr.mean(dim=(0, 2, 3))).norm() / yr.mean(dim=(0, 2, 3)).norm())
    run2, _ = _with_env("HIPDNN_CABI_HIP_GENSTATS", "0", lambda: E.prepare(g, bufs))
    unfused = median_ms(torch, run2)

    theirs = median_ms(torch, lambda: F.batch_norm(F.conv2d(x, w, padding=1), None, None, sc, bi,
                                                    training=True, eps=1e-5))
    stats_only = median_ms(torch, lambda: torch.var_mean(F.conv2d(x, w, padding=1), dim=(0, 2, 3),
                                                         correction=0))
    conv_only = median_ms(torch, lambda: F.conv2d(x, w, padding=1))
    res["conv3x3_genstats_bn_fp16_nhwc_b32_64x56"] = {
        "ours_ms": ours[0], "ours_unfused_ms": unfused[0], "torch_ms": theirs[0],
        "torch_conv_only_ms": conv_only[0], "torch_conv_var_mean_ms": stats_only[0],
        "ratio": theirs[0] / ours[0],
        "speedup_vs_unfused": unfused[0] / ours[0], "rel_err": err, "mean_rel_err": merr,
        "plan_build_s": bs, "target": None,
        "note": "ours: conv with per-channel sums in its epilogue + finalize + apply; torch: conv, "
                "batch_norm (training)"}
    print(f"conv 3x3 + genstats + BN fp16: ours {ours[0]:.3f} ms, unfused {unfused[0]:.3f} ms, torch "
          f"{theirs[0]:.3f} ms (conv alone {conv_only[0]:.3f}) -> {theirs[0] / ours[0]:.2f}x "
          f"err {err:.1e} mean err {merr:.1e}", flush=True)


STEPS = [("norms", bench_norms), ("normpw", bench_norm_pw), ("pool", bench_pool), ("mxq", bench_mxq),
         ("moe", bench_moe), ("swiglu", bench_swiglu), ("convstats", bench_conv_genstats)]


if __name__ == "__main__":
    # python3 bench/gpu_bench_ext.py [--out FILE]: the issue-17 rows only
    import os
    import sys
    import gpu_bench
    if "--only" not in sys.argv:
        sys.argv += ["--only", ",".join(k for k, _ in STEPS)]
    if "--out" not in sys.argv:
        sys.argv += ["--out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                           "gpu_issue17.json")]
    gpu_bench.main()
