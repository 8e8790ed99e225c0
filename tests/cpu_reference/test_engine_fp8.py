"""FP8 (E4M3 / E5M2) data in matmul, convolution and pointwise nodes on the CPU reference engine
(the oracle of the GPU engine's fp8 paths; docs/cpu_reference.md).  Inputs are random fp8 codes
decoded by an independent decoder written here (OCP FP8: E4M3 bias 7 with S.1111.111 NaN, E5M2
bias 15 IEEE-like); references are float64."""
from __future__ import annotations

import numpy as np
import pytest

from engine_testutil import Tensor, applicable, conv_attrs, graph_bytes, node, pw, run_inprocess

FMT = {"FP8_E4M3": (4, 3, 7), "FP8_E5M2": (5, 2, 15)}


def fp8_value(code, t):
    e_bits, m_bits, bias = FMT[t]
    code = np.asarray(code, dtype=np.int64)
    s = np.where(code & 0x80, -1.0, 1.0)
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    m = code & ((1 << m_bits) - 1)
    sub = s * (m / (1 << m_bits)) * 2.0 ** (1 - bias)
    nor = s * (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)
    return np.where(e == 0, sub, nor)


def finite_codes(rng, shape, t, lo=0x08, hi=0x48):
    """Random codes of moderate magnitude (no NaN / Inf), both signs."""
    mag = rng.integers(lo, hi, size=shape)
    return (mag | (rng.integers(0, 2, size=shape) << 7)).astype(np.uint8)


def fp8_tensor(uid, dims, t, codes):
    x = Tensor(uid, dims, t)
    x.buf = np.ascontiguousarray(codes)
    return x


@pytest.mark.parametrize("t", ["FP8_E4M3", "FP8_E5M2"])
def test_matmul_fp8_to_float(t):
    rng = np.random.default_rng(1)
    ca, cb = finite_codes(rng, (2, 5, 16), t), finite_codes(rng, (2, 16, 3), t)
    a, b = fp8_tensor(1, [2, 5, 16], t, ca), fp8_tensor(2, [2, 16, 3], t, cb)
    c = Tensor(3, [2, 5, 3], "FLOAT").alloc()
    g = graph_bytes([a, b, c], [node("MatmulAttributes", {"a_tensor_uid": 1, "b_tensor_uid": 2,
                                                          "c_tensor_uid": 3})])
    assert applicable(g)
    run_inprocess(g, [a, b, c])
    ref = np.matmul(fp8_value(ca, t), fp8_value(cb, t))
    np.testing.assert_allclose(c.get(), ref, rtol=1e-5, atol=1e-5)


def test_conv_fwd_fp8_to_half():
    t = "FP8_E4M3"
    rng = np.random.default_rng(2)
    cx, cw = finite_codes(rng, (1, 3, 6, 6), t), finite_codes(rng, (4, 3, 3, 3), t)
    x, w = fp8_tensor(1, [1, 3, 6, 6], t, cx), fp8_tensor(2, [4, 3, 3, 3], t, cw)
    y = Tensor(3, [1, 4, 4, 4], "HALF").alloc()
    g = graph_bytes([x, w, y], [node("ConvolutionFwdAttributes", conv_attrs(
        "ConvolutionFwdAttributes", 1, 2, 3, (0, 0), (0, 0), (1, 1), (1, 1)))])
    assert applicable(g)
    run_inprocess(g, [x, w, y])
    xv, wv = fp8_value(cx, t), fp8_value(cw, t)
    ref = np.zeros((1, 4, 4, 4))
    for k in range(4):
        for i in range(4):
            for j in range(4):
                ref[0, k, i, j] = (xv[0, :, i:i + 3, j:j + 3] * wv[k]).sum()
    np.testing.assert_allclose(y.get(), ref, rtol=2e-3, atol=2e-3)


def test_pointwise_add_fp8_and_declined_mixes():
    t = "FP8_E5M2"
    rng = np.random.default_rng(3)
    c0, c1 = finite_codes(rng, (4, 8), t), finite_codes(rng, (4, 8), t)
    a, b = fp8_tensor(1, [4, 8], t, c0), fp8_tensor(2, [4, 8], t, c1)
    o = Tensor(3, [4, 8], "FLOAT").alloc()
    g = graph_bytes([a, b, o], [pw("ADD", 1, 3, in1=2)])
    assert applicable(g)
    run_inprocess(g, [a, b, o])
    np.testing.assert_allclose(o.get(), fp8_value(c0, t) + fp8_value(c1, t), rtol=1e-6)
    # fp8 mixed with another input type is not a combination either engine runs
    h = Tensor(2, [4, 8], "HALF")
    assert not applicable(graph_bytes([a, h, o], [pw("ADD", 1, 3, in1=2)]))
