"""GPU: the GEMM core's split-K for skinny shapes (tails, K not divisible, forced splits),
backward filter on 4-D tensor maps (ops/conv._wgrad_tma) and the strided 1 x 1 backward-data
decomposition, against the CPU reference in float64.  Every output starts poisoned (NaN)."""
from __future__ import annotations

import functools
import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.cpu_reference.kernels import matmul as kmm
from gpu_testlib import (TOL, T, conv_bwd_data, conv_bwd_filter, graph_bytes, matmul, plan_notes, quantize,
                         quantized_normal, relerr)

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(2020)


rnd = functools.partial(quantized_normal, rng)


def check(out, ref, dtype, what, tol=None):
    assert np.all(np.isfinite(out)), f"{what}: non-finite / unwritten output"
    e = relerr(out, ref)
    assert e < (tol or TOL[dtype]), f"{what}: rel err {e:.3g}"


SKINNY = [  # M, N, K, forced splits (None: the cost model)
    (256, 256, 65536, None),
    (16, 512, 8192, None),
    (200, 136, 10000, None),       # tails in M, N and k (10000 = 156 x 64 + 16)
    (130, 72, 9999, None),         # odd K: element gathers
    (64, 64, 4160, "7"),           # forced 7 parts of a k not divisible by them
    (1, 8, 3000, "5"),             # M = 1
]


@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(SKINNY)))
def test_splitk_skinny_gemm(R, dtype, case, monkeypatch):
    M, N, K, force = SKINNY[case]
    if force:
        monkeypatch.setenv("HIPDNN_CABI_HIP_SPLITK", force)
    a, b, c = T(1, [1, M, K], dtype), T(2, [1, K, N], dtype), T(3, [1, M, N], dtype)
    g = graph_bytes([a, b, c], [matmul(1, 2, 3)])
    if case == 0 or force:
        assert any("split-K" in n for n in plan_notes(g)), plan_notes(g)
    av, bv = rnd(a.dims, dtype), rnd(b.dims, dtype, K ** -0.5)
    out = R.run(g, {a: av, b: bv}, [c])[3]
    check(out, quantize(kmm.matmul(av, bv, compute_dtype=np.float64), dtype), dtype, f"matmul {SKINNY[case]}")


WGRAD = [  # N, C, H, W, K, R, S, pad, stride, dil, mode
    (2, 64, 9, 9, 72, 3, 3, 1, 1, 1, "CROSS_CORRELATION"),      # K tail (72), 8 x 8 boxes overhang
    (3, 128, 14, 14, 64, 3, 3, 1, 1, 1, "CONVOLUTION"),         # flipped taps
    (2, 64, 15, 13, 16, 1, 1, 0, 2, 1, "CROSS_CORRELATION"),    # stride 2 (TMA traversal step)
    (2, 64, 11, 11, 24, 3, 3, 2, 2, 2, "CROSS_CORRELATION"),    # stride 2, dilation 2, pad 2
    (4, 192, 7, 7, 40, 3, 3, 1, 1, 1, "CROSS_CORRELATION"),     # C = 192: atoms cross taps in a tile
    (32, 64, 56, 56, 64, 3, 3, 1, 1, 1, "CROSS_CORRELATION"),   # ResNet conv2 3 x 3 (split-K)
]


def _shapes(case, dtype, lay="nhwc"):
    N, C, H, W, K, Rr, S, pad, st, dil, mode = case
    P = (H + 2 * pad - (dil * (Rr - 1) + 1)) // st + 1
    Q = (W + 2 * pad - (dil * (S - 1) + 1)) // st + 1
    return (T(1, [N, C, H, W], dtype, lay), T(2, [K, C, Rr, S], dtype, lay), T(3, [N, K, P, Q], dtype, lay),
            [pad, pad], [st, st], [dil, dil], mode)


@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(WGRAD)))
def test_wgrad_tensor_maps(R, dtype, case):
    x, w, y, pad, st, dil, mode = _shapes(WGRAD[case], dtype)
    g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, pad, st, dil, mode)])
    assert any("4-D tensor maps" in n for n in plan_notes(g)), plan_notes(g)
    xv, dyv = rnd(x.dims, dtype), rnd(y.dims, dtype)
    out = R.run(g, {x: xv, y: dyv}, [w])[2]
    ref = kconv.conv_bwd_filter(xv, dyv, w.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, f"wgrad {WGRAD[case]}")


def test_wgrad_tensor_maps_1d(R):
    dtype = "HALF"
    x = T(1, [3, 64, 30], dtype, strides=[30 * 64, 1, 64])
    y = T(3, [3, 32, 30], dtype, strides=[30 * 32, 1, 32])
    w = T(2, [32, 64, 5], dtype, strides=[5 * 64, 1, 64])
    g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, [2], [1], [1])])
    assert any("4-D tensor maps" in n for n in plan_notes(g)), plan_notes(g)
    xv, dyv = rnd(x.dims, dtype), rnd(y.dims, dtype)
    out = R.run(g, {x: xv, y: dyv}, [w])[2]
    ref = kconv.conv_bwd_filter(xv, dyv, w.dims, [2], [2], [1], [1], "CROSS_CORRELATION",
                                compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, "wgrad 1-D")


DGRAD = [  # N, C, H, W, K, stride (1 x 1, no padding)
    (2, 64, 28, 28, 128, 2),
    (2, 24, 13, 11, 40, 3),        # odd sizes: rows / columns past the last hit stay zero
    (32, 512, 28, 28, 1024, 2),    # ResNet conv4 1 x 1 stride 2
]


@pytest.mark.parametrize("dtype", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(len(DGRAD)))
def test_strided_1x1_dgrad(R, dtype, lay, case):
    N, C, H, W, K, st = DGRAD[case]
    if case == 2 and (dtype != "HALF" or lay != "nhwc"):
        pytest.skip("the ResNet shape once (fp16 NHWC)")
    x, w, y, pad, stv, dil, mode = _shapes((N, C, H, W, K, 1, 1, 0, st, 1, "CROSS_CORRELATION"), dtype, lay)
    g = graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, pad, stv, dil, mode)])
    assert any("strided 1x1" in n for n in plan_notes(g)), plan_notes(g)
    dyv, wv = rnd(y.dims, dtype), rnd(w.dims, dtype)
    out = R.run(g, {y: dyv, w: wv}, [x])[1]
    ref = kconv.conv_bwd_data(dyv, wv, x.dims, pad, pad, stv, dil, mode, compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, f"strided dgrad {DGRAD[case]}")


DGRAD_TAP = [  # N, C, H, W, K, R, S, pad, stride, dil, mode: K % 64 == 0 -> weights per tap on TMA
    (2, 64, 9, 9, 64, 3, 3, 1, 1, 1, "CROSS_CORRELATION"),
    (2, 40, 10, 12, 128, 3, 3, 1, 1, 1, "CONVOLUTION"),         # flipped taps, C tail (40)
    (2, 64, 11, 11, 64, 3, 3, 2, 2, 2, "CROSS_CORRELATION"),    # stride 2, dilation 2
    (32, 256, 14, 14, 256, 3, 3, 1, 1, 1, "CROSS_CORRELATION"), # ResNet conv4 3 x 3
]


@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(DGRAD_TAP)))
def test_dgrad_weights_per_tap_tma(R, dtype, case):
    x, w, y, pad, st, dil, mode = _shapes(DGRAD_TAP[case], dtype)
    g = graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, pad, st, dil, mode)])
    assert any("TMA B" in n or "TMA AB" in n for n in plan_notes(g)), plan_notes(g)
    dyv, wv = rnd(y.dims, dtype), rnd(w.dims, dtype)
    out = R.run(g, {y: dyv, w: wv}, [x])[1]
    ref = kconv.conv_bwd_data(dyv, wv, x.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, f"dgrad {DGRAD_TAP[case]}")


SIMT = [  # fp32 FFMA core: N, C, H, K, R, pad, stride, layout (128 x 64 tiles, splits, NCHW rows)
    (4, 128, 28, 128, 3, 1, 1, "nchw"),    # 128 x 64 tiles (wave quantisation)
    (2, 256, 14, 256, 3, 1, 1, "nchw"),    # split-K on the SIMT core
    (3, 64, 17, 64, 3, 1, 1, "nchw"),      # N = 64 -> 128 x 64, tails in m
    (2, 32, 12, 40, 3, 2, 2, "nhwc"),      # strided, padded, channels-last, 16-byte vectors
    (2, 24, 9, 16, 1, 0, 1, "nchw"),       # 1 x 1
]


@pytest.mark.parametrize("case", range(len(SIMT)))
def test_simt_fp32_conv_tiles(R, case):
    from gpu_testlib import conv_fwd
    N, C, H, K, Rr, pad, st, lay = SIMT[case]
    x, w, y, padv, stv, dil, mode = _shapes((N, C, H, H, K, Rr, Rr, pad, st, 1, "CROSS_CORRELATION"), "FLOAT", lay)
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, padv, stv, dil, mode)])
    xv, wv = rnd(x.dims, "FLOAT"), rnd(w.dims, "FLOAT", (C * Rr * Rr) ** -0.5)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, padv, padv, stv, dil, compute_dtype=np.float64)
    check(out, ref, "FLOAT", f"simt conv {SIMT[case]}")


@pytest.mark.parametrize("shape", [(1, 130, 72, 200, False), (2, 96, 40, 72, True), (1, 512, 4096, 256, False),
                                   (1, 64, 1000, 48, True)])
def test_simt_fp32_matmul_vectors(R, shape):
    bt, M, K, N, btrans = shape
    a = T(1, [bt, M, K], "FLOAT")
    b = T(2, [bt, K, N], "FLOAT", strides=[K * N, 1, K] if btrans else [K * N, N, 1])
    c = T(3, [bt, M, N], "FLOAT")
    av, bv = rnd(a.dims, "FLOAT"), rnd(b.dims, "FLOAT")
    out = R.run(graph_bytes([a, b, c], [matmul(1, 2, 3)]), {a: av, b: bv}, [c])[3]
    check(out, kmm.matmul(av, bv, compute_dtype=np.float64), "FLOAT", f"simt matmul {shape}")


# ------------------------------------------- dw^T backward filter, fp32 NCHW on SIMT
WGRAD_SWAP = [  # N, C, H, W, K, R, S, pad, stride, dil, mode: K <= 64 < C*R*S -> dw^T (auto)
    (32, 64, 56, 56, 64, 3, 3, 1, 1, 1, "CROSS_CORRELATION"),   # ResNet conv2 3 x 3
    (2, 128, 14, 14, 64, 3, 3, 1, 1, 1, "CONVOLUTION"),         # M = 1152, flipped taps
    (3, 64, 9, 11, 32, 3, 3, 1, 1, 1, "CROSS_CORRELATION"),     # K = 32: dy box half past K
    (2, 192, 10, 10, 40, 3, 3, 1, 2, 1, "CROSS_CORRELATION"),   # K = 40 tail, stride 2, C = 192
    (2, 64, 11, 11, 24, 3, 3, 2, 2, 2, "CROSS_CORRELATION"),    # stride 2, dilation 2, pad 2
    (2, 128, 15, 13, 16, 1, 1, 0, 2, 1, "CROSS_CORRELATION"),   # 1 x 1 stride 2, M = 128
]


@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(WGRAD_SWAP)))
def test_wgrad_swapped_tensor_maps(R, dtype, case):
    if case == 0 and dtype != "HALF":
        pytest.skip("the ResNet shape once (fp16)")
    x, w, y, pad, st, dil, mode = _shapes(WGRAD_SWAP[case], dtype)
    g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, pad, st, dil, mode)])
    ns = plan_notes(g)
    assert any("4-D tensor maps" in n for n in ns) and any("dw^T GEMM" in n for n in ns), ns
    xv, dyv = rnd(x.dims, dtype), rnd(y.dims, dtype)
    out = R.run(g, {x: xv, y: dyv}, [w])[2]
    ref = kconv.conv_bwd_filter(xv, dyv, w.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, f"wgrad dw^T {WGRAD_SWAP[case]}")


def test_wgrad_swapped_1d(R):
    dtype = "HALF"
    x = T(1, [3, 128, 30], dtype, strides=[30 * 128, 1, 128])
    y = T(3, [3, 64, 30], dtype, strides=[30 * 64, 1, 64])
    w = T(2, [64, 128, 5], dtype, strides=[5 * 128, 1, 128])
    g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, [2], [1], [1])])
    assert any("dw^T GEMM" in n for n in plan_notes(g)), plan_notes(g)
    xv, dyv = rnd(x.dims, dtype), rnd(y.dims, dtype)
    out = R.run(g, {x: xv, y: dyv}, [w])[2]
    ref = kconv.conv_bwd_filter(xv, dyv, w.dims, [2], [2], [1], [1], "CROSS_CORRELATION",
                                compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, "wgrad dw^T 1-D")


SIMT_NCHW = [  # fp32 NCHW forward, TF32 off: N, C, H, K, R, pad, stride, forced SIMT_NHWC, expected path
    (32, 64, 56, 64, 3, 1, 1, None, "nhwc"),       # ResNet conv2 3 x 3 (auto: NHWC copies)
    (32, 128, 28, 128, 3, 1, 1, None, "nhwc"),     # ResNet conv3
    (32, 64, 56, 256, 1, 0, 1, None, "mvec"),      # ResNet conv2 1 x 1 expand (m-vectors)
    (3, 5, 13, 24, 3, 1, 2, "1", "nhwc"),          # C = 5, stride 2, odd sizes (forced)
    (2, 72, 17, 40, 3, 1, 1, "1", "nhwc"),         # tails in m and n (forced)
    (3, 24, 6, 40, 1, 0, 1, None, "mvec"),         # 36 positions, M = 108 (tail in the tile)
    (2, 48, 10, 64, 1, 0, 1, "1", "mvec"),         # m-vectors win over the forced copies
]


@pytest.mark.parametrize("case", range(len(SIMT_NCHW)))
def test_simt_fp32_nchw_paths(R, case, monkeypatch):
    from gpu_testlib import conv_fwd
    N, C, H, K, Rr, pad, st, force, path = SIMT_NCHW[case]
    monkeypatch.setenv("HIPDNN_CABI_HIP_TF32", "0")
    if force:
        monkeypatch.setenv("HIPDNN_CABI_HIP_SIMT_NHWC", force)
    x, w, y, padv, stv, dil, mode = _shapes((N, C, H, H, K, Rr, Rr, pad, st, 1, "CROSS_CORRELATION"), "FLOAT", "nchw")
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, padv, stv, dil, mode)])
    ns = plan_notes(g)
    assert any("SIMT core on NHWC copies" in n for n in ns) == (path == "nhwc"), ns
    xv, wv = rnd(x.dims, "FLOAT"), rnd(w.dims, "FLOAT", (C * Rr * Rr) ** -0.5)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, padv, padv, stv, dil, compute_dtype=np.float64)
    check(out, ref, "FLOAT", f"simt fp32 NCHW {SIMT_NCHW[case]}")
