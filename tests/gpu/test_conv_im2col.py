"""GPU: convolution forward with the activations on an im2col tensor map (``WG_IM2COL`` in
gemm_wgmma.hip, ops/conv._fwd_im2col; knob ``HIPDNN_CABI_HIP_CONV_IM2COL``) against the CPU
reference in float64.  The shapes stress what the copy engine does instead of the producer:
M not a multiple of the 128-pixel tile, image boundaries inside one tile (the load walks into
the next image), padding on every border (zero fill at the bounding-box edges), input channels
not a multiple of the 64-channel block (the block past C reads zeros), stride 2 (traversal
step), dilation, asymmetric padding / filter / spatial sizes (the (W, H) order of the corners),
flipped taps, 1-D convolution, fused epilogues and the TMA-store epilogue.  Every output starts
poisoned (NaN): an element no store reaches fails the finiteness check."""
from __future__ import annotations

import functools
import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from gpu_testlib import (TOL, T, conv_fwd, graph_bytes, plan_notes, pw, quantize,
                         quantized_normal, relerr)

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(2026)


rnd = functools.partial(quantized_normal, rng)


def conv(x, w, y, pre, post, stride, dil, mode="CROSS_CORRELATION"):
    return conv_fwd(x, w, y, pre, stride, dil, mode, post=post)


CASES = [  # N, C, (H, W), K, (R, S), pre pad, post pad, stride, dilation, mode, knob
    (2, 64, (9, 9), 64, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "CROSS_CORRELATION", "auto"),
    # M = 162: a tail tile; 81 pixels per image -> image 1 starts inside tile 0
    (3, 128, (10, 12), 72, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "CONVOLUTION", "auto"),
    # flipped taps, N = 72 (a partial weight box), two channel blocks, W != H
    (2, 96, (11, 13), 64, (3, 3), (2, 2), (2, 2), (2, 2), (1, 1), "CROSS_CORRELATION", "auto"),
    # stride 2 (traversal step), pad 2, C = 96: the second channel block half past C
    (2, 64, (12, 12), 40, (3, 3), (2, 2), (2, 2), (1, 1), (2, 2), "CROSS_CORRELATION", "auto"),
    # dilation 2
    (2, 40, (7, 9), 48, (5, 3), (2, 1), (1, 0), (1, 1), (1, 1), "CROSS_CORRELATION", "auto"),
    # C = 40 < one block, R != S, pre != post padding, different pads per dim
    (3, 64, (13, 9), 136, (3, 3), (1, 0), (1, 0), (2, 1), (1, 1), "CROSS_CORRELATION", "auto"),
    # stride 2 along H only, no padding along W, N = 136 (tile 128 x 256 / 128 + tail)
    (2, 64, (15, 13), 128, (1, 1), (0, 0), (0, 0), (2, 2), (1, 1), "CROSS_CORRELATION", "1"),
    # a 1 x 1 stride-2 conv on the im2col map (knob 1)
    (32, 64, (56, 56), 64, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "CROSS_CORRELATION", "auto"),
    # ResNet-50 conv2 3 x 3
    (32, 128, (28, 28), 128, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "CROSS_CORRELATION", "auto"),
    # ResNet-50 conv3 3 x 3
]


def _shapes(case, dtype):
    N, C, (H, W), K, (Rr, S), pre, post, st, dil, mode, knob = case
    P = (H + pre[0] + post[0] - (dil[0] * (Rr - 1) + 1)) // st[0] + 1
    Q = (W + pre[1] + post[1] - (dil[1] * (S - 1) + 1)) // st[1] + 1
    return (T(1, [N, C, H, W], dtype, "nhwc"), T(2, [K, C, Rr, S], dtype, "nhwc"),
            T(3, [N, K, P, Q], dtype, "nhwc"))


@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_fwd_im2col(R, dtype, case, monkeypatch):
    c = CASES[case]
    if case >= 7 and dtype != "HALF":
        pytest.skip("the ResNet shapes once (fp16)")
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_IM2COL", c[-1])
    x, w, y = _shapes(c, dtype)
    pre, post, st, dil, mode = c[5], c[6], c[7], c[8], c[9]
    g = graph_bytes([x, w, y], [conv(1, 2, 3, pre, post, st, dil, mode)])
    ns = plan_notes(g)
    assert any("im2col tensor map" in n for n in ns), ns
    assert any("TMA AB" in n for n in ns), ns
    xv, wv = rnd(x.dims, dtype), rnd(w.dims, dtype, (x.dims[1] * w.dims[2] * w.dims[3]) ** -0.5)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, list(pre), list(post), list(st), list(dil), mode, compute_dtype=np.float64)
    assert np.all(np.isfinite(out)), f"{c}: non-finite / unwritten output"
    e = relerr(out, quantize(ref, dtype))
    assert e < TOL[dtype], f"{c}: rel err {e:.3g}"


@pytest.mark.parametrize("case", [0, 2, 4])
def test_conv_fwd_im2col_register_epilogue(R, case, monkeypatch):
    """The same shapes with the register epilogue (TMA store off): tails / image boundaries /
    channel blocks past C through store_c8."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", "0")
    c = CASES[case]
    x, w, y = _shapes(c, "HALF")
    g = graph_bytes([x, w, y], [conv(1, 2, 3, c[5], c[6], c[7], c[8], c[9])])
    ns = plan_notes(g)
    assert any("im2col tensor map" in n for n in ns) and not any("TMA-store" in n for n in ns), ns
    xv, wv = rnd(x.dims, "HALF"), rnd(w.dims, "HALF", (x.dims[1] * w.dims[2] * w.dims[3]) ** -0.5)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, list(c[5]), list(c[6]), list(c[7]), list(c[8]), c[9], compute_dtype=np.float64)
    assert np.all(np.isfinite(out))
    assert relerr(out, quantize(ref, "HALF")) < TOL["HALF"]


def test_conv_fwd_im2col_1d(R):
    dtype = "HALF"
    x = T(1, [3, 64, 30], dtype, strides=[30 * 64, 1, 64])
    w = T(2, [32, 64, 5], dtype, strides=[5 * 64, 1, 64])
    y = T(3, [3, 32, 30], dtype, strides=[30 * 32, 1, 32])
    g = graph_bytes([x, w, y], [conv(1, 2, 3, [2], [2], [1], [1])])
    assert any("im2col tensor map" in n for n in plan_notes(g)), plan_notes(g)
    xv, wv = rnd(x.dims, dtype), rnd(w.dims, dtype, 320 ** -0.5)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, [2], [2], [1], [1], compute_dtype=np.float64)
    assert np.all(np.isfinite(out))
    assert relerr(out, quantize(ref, dtype)) < TOL[dtype]


@pytest.mark.parametrize("tstore", ["0", "auto"])
def test_conv_fwd_im2col_fused_epilogue(R, tstore, monkeypatch):
    """bias + ReLU fused into the im2col conv, with the register epilogue (knob 0) and with the
    TMA-store epilogue (auto: chosen for im2col plans; M = 3 x 99 = 297: a tail tile, images
    crossing tiles)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", tstore)
    dtype, N, C, H, W, K = "HALF", 3, 64, 9, 11, 64
    x = T(1, [N, C, H, W], dtype, "nhwc")
    w = T(2, [K, C, 3, 3], dtype, "nhwc")
    cv = T(3, [N, K, H, W], "FLOAT", "nhwc", virtual=True)
    b = T(4, [1, K, 1, 1], dtype, strides=[K, 1, K, K])
    bv = T(5, [N, K, H, W], "FLOAT", "nhwc", virtual=True)
    y = T(6, [N, K, H, W], dtype, "nhwc")
    g = graph_bytes([x, w, cv, b, bv, y], [conv(1, 2, 3, [1, 1], [1, 1], [1, 1], [1, 1]),
                                           pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])
    ns = plan_notes(g)
    assert any("im2col tensor map" in n for n in ns), ns
    assert any("TMA-store epilogue" in n for n in ns) == (tstore == "auto"), ns
    xv, wv, bvv = rnd(x.dims, dtype), rnd(w.dims, dtype, (C * 9) ** -0.5), rnd(b.dims, dtype)
    out = R.run(g, {x: xv, w: wv, b: bvv}, [y])[6]
    ref = np.maximum(kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bvv, 0)
    assert np.all(np.isfinite(out))
    assert relerr(out, quantize(ref, dtype)) < TOL[dtype]


def test_conv_fwd_im2col_knob_off_and_fallback(monkeypatch):
    """Knob 0 plans the producer gathers again; shapes the tensor map cannot describe (a
    channel count that is not a multiple of 8, stride 9) keep the gathers with the knob 1."""
    dtype = "HALF"
    x, w, y = _shapes(CASES[0], dtype)
    g = graph_bytes([x, w, y], [conv(1, 2, 3, [1, 1], [1, 1], [1, 1], [1, 1])])
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_IM2COL", "0")
    assert not any("im2col" in n for n in plan_notes(g)), plan_notes(g)
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_IM2COL", "1")
    for case in ((2, 12, (9, 9), 16, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "CROSS_CORRELATION", "1"),
                 (2, 64, (30, 30), 16, (1, 1), (0, 0), (0, 0), (9, 9), (1, 1), "CROSS_CORRELATION", "1")):
        x, w, y = _shapes(case, dtype)
        g = graph_bytes([x, w, y], [conv(1, 2, 3, case[5], case[6], case[7], case[8])])
        assert not any("im2col" in n for n in plan_notes(g)), (case, plan_notes(g))
