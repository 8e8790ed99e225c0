"""GPU: the wgmma core's TMA-store epilogue (``WG_TMA_STORE``: fused ops in registers, 16-bit
output tile staged in shared memory, tensor-copy-engine stores; gemm_core.tma_store_config) and
the unit-stride 1 x 1 convolution activations on the copy engine, against the CPU reference in
float64.  The ResNet-50 1 x 1 expand layer takes it from the cost model; the tails (M not a
multiple of 128, N = 64 / 72 / 192, input channels 40 = a k tail) force it with
``HIPDNN_CABI_HIP_TMA_STORE=1``.  Every output starts poisoned (NaN): an element the stores
miss fails the finiteness check."""
from __future__ import annotations

import functools
import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.cpu_reference.kernels import matmul as kmm
from gpu_testlib import TOL, T, conv_fwd, graph_bytes, matmul, plan_notes, pw, quantize, quantized_normal, relerr

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(2021)


rnd = functools.partial(quantized_normal, rng)


def check(out, ref, dtype, what):
    assert np.all(np.isfinite(out)), f"{what}: non-finite / unwritten output"
    e = relerr(out, ref)
    assert e < TOL[dtype], f"{what}: rel err {e:.3g}"


def nhwc(d):
    return [d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]]


CONV = [  # N, C, H (= W), K, epilogue, force the TMA store (with this tile)
    (32, 64, 56, 256, "none", None),       # ResNet-50 conv2 1 x 1 expand (the cost model picks it)
    (32, 64, 56, 256, "bias_relu", None),
    (3, 64, 13, 192, "bias_relu", "128x256"),   # M = 507 (tail), N = 192: the box past N skipped
    (2, 64, 9, 64, "none", "auto"),        # N = 64, M = 162
    (2, 40, 11, 72, "residual", "128x128"),     # C = 40 (k tail: zero fill), N = 72 (clipped box)
    (2, 128, 10, 136, "bias_relu", "auto"),     # two k steps, N = 136
]


@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(CONV)))
def test_conv1x1_tma_store(R, dtype, case, monkeypatch):
    N, C, H, K, epi, force = CONV[case]
    if force:
        monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", "1")
        if force != "auto":
            monkeypatch.setenv("HIPDNN_CABI_HIP_TILE", force)
    x = T(1, [N, C, H, H], dtype, strides=nhwc([N, C, H, H]))
    w = T(2, [K, C, 1, 1], dtype, strides=nhwc([K, C, 1, 1]))
    y = T(6, [N, K, H, H], dtype, strides=nhwc([N, K, H, H]))
    xv, wv = rnd(x.dims, dtype), rnd(w.dims, dtype, C ** -0.5)
    ref = kconv.conv_fwd(xv, wv, [0, 0], [0, 0], [1, 1], [1, 1], compute_dtype=np.float64)
    if epi == "none":
        g = graph_bytes([x, w, y], [conv_fwd(1, 2, 6, [0, 0], [1, 1], [1, 1])])
        ins = {x: xv, w: wv}
    else:
        cv = T(3, [N, K, H, H], "FLOAT", strides=nhwc([N, K, H, H]), virtual=True)
        av = T(5, [N, K, H, H], "FLOAT", strides=nhwc([N, K, H, H]), virtual=True)
        if epi == "bias_relu":
            e = T(4, [1, K, 1, 1], dtype, strides=[K, 1, K, K])
        else:      # residual add: a y-shaped input read at every (m, n) in the epilogue
            e = T(4, [N, K, H, H], dtype, strides=nhwc([N, K, H, H]))
        ev = rnd(e.dims, dtype)
        g = graph_bytes([x, w, cv, e, av, y], [conv_fwd(1, 2, 3, [0, 0], [1, 1], [1, 1]),
                                               pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])
        ins = {x: xv, w: wv, e: ev}
        ref = np.maximum(ref + ev, 0)
    ns = plan_notes(g)
    assert any("TMA-store epilogue" in n for n in ns), ns
    assert any("TMA AB" in n for n in ns), ns        # the 1 x 1 activations on the copy engine
    out = R.run(g, ins, [y])[6]
    check(out, quantize(ref, dtype), dtype, f"conv 1x1 {CONV[case]}")


MATMUL = [  # batch, M, N, K, bias, tile
    (1, 4096, 256, 64, True, "128x128"),
    (3, 300, 192, 64, False, "128x256"),   # batched, tails in M and in the last box of N
    (2, 129, 64, 40, True, "auto"),        # one row into the second tile, K = 40
]


@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(MATMUL)))
def test_matmul_tma_store(R, dtype, case, monkeypatch):
    B, M, N, K, bias, tile = MATMUL[case]
    monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", "1")
    if tile != "auto":
        monkeypatch.setenv("HIPDNN_CABI_HIP_TILE", tile)
    a, b = T(1, [B, M, K], dtype), T(2, [B, K, N], dtype)
    av, bv = rnd(a.dims, dtype), rnd(b.dims, dtype, K ** -0.5)
    ref = kmm.matmul(av, bv, compute_dtype=np.float64)
    y = T(6, [B, M, N], dtype)
    if bias:
        c = T(3, [B, M, N], "FLOAT", virtual=True)
        e = T(4, [1, 1, N], dtype)
        v = T(5, [B, M, N], "FLOAT", virtual=True)
        ev = rnd(e.dims, dtype)
        g = graph_bytes([a, b, c, e, v, y], [matmul(1, 2, 3), pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])
        ins = {a: av, b: bv, e: ev}
        ref = np.maximum(ref + ev, 0)
    else:
        g = graph_bytes([a, b, y], [matmul(1, 2, 6)])
        ins = {a: av, b: bv}
    ns = plan_notes(g)
    assert any("TMA-store epilogue" in n for n in ns), ns
    out = R.run(g, ins, [y])[6]
    check(out, quantize(ref, dtype), dtype, f"matmul {MATMUL[case]}")


def test_tma_store_knob_off_same_result(R, monkeypatch):
    """The ResNet 1 x 1 expand with the knob off (register epilogue) and on agree bit for bit
    (the same fp32 accumulation order, the same rounding)."""
    dtype, N, C, H, K = "HALF", 4, 64, 28, 256
    x = T(1, [N, C, H, H], dtype, strides=nhwc([N, C, H, H]))
    w = T(2, [K, C, 1, 1], dtype, strides=nhwc([K, C, 1, 1]))
    y = T(6, [N, K, H, H], dtype, strides=nhwc([N, K, H, H]))
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 6, [0, 0], [1, 1], [1, 1])])
    xv, wv = rnd(x.dims, dtype), rnd(w.dims, dtype, C ** -0.5)
    outs = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", mode)
        assert any("TMA-store epilogue" in n for n in plan_notes(g)) == (mode == "1")
        outs[mode] = R.run(g, {x: xv, w: wv}, [y])[6]
    assert np.all(np.isfinite(outs["1"]))
    assert np.array_equal(outs["0"], outs["1"])
