"""Frontend builders (resample, block-scale quantize / dequantize, MoE grouped
matmul, norm backward) end to end through the backend C API on the CPU reference engine, each
checked against numpy written here; shape inference; serialize -> deserialize keeps the
parameters."""
from __future__ import annotations

import numpy as np
import pytest

from fe_util import CPU_ENGINE, close, rand, rng
from hipdnn_cabi import frontend as hf

pytestmark = pytest.mark.needs_cpu_engine
DT = hf.DataType
F32 = DT.HIPDNN_DATA_FLOAT


def graph(handle):
    return hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32,
                    compute_data_type=F32)


def run(g, pack):
    g.build()
    assert g.engine_name == CPU_ENGINE
    g.execute(pack)
    return g


def maxpool_ref(x, k, s, p):
    N, C, H, W = x.shape
    xp = np.full((N, C, H + 2 * p, W + 2 * p), -np.inf)
    xp[:, :, p:p + H, p:p + W] = x
    Ho, Wo = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    y = np.empty((N, C, Ho, Wo))
    for i in range(Ho):
        for j in range(Wo):
            y[:, :, i, j] = xp[:, :, i * s:i * s + k, j * s:j * s + k].max(axis=(2, 3))
    return y


def test_resample_max_nhwc_with_index_and_backward(handle):
    r = rng(171)
    xa = rand(r, (2, 3, 9, 8), -2, 2)
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape, stride=[3 * 72, 1, 24, 3])      # NHWC
    y, idx = g.resample(x, mode="MAXPOOL", window=[3, 3], stride=[2, 2], pre_padding=[1, 1],
                        post_padding=[1, 1], padding_mode="NEG_INF_PAD", generate_index=True)
    assert y.get_dim() == [2, 3, 5, 4] and idx.get_dim() == [2, 3, 5, 4]
    assert y.get_stride()[1] == 1                                       # NHWC like x
    dx = g.resample_backward(y, index=idx, mode="MAXPOOL", window=[3, 3], stride=[2, 2],
                             pre_padding=[1, 1], post_padding=[1, 1], padding_mode="NEG_INF_PAD")
    dx.set_dim(list(xa.shape)).set_stride([3 * 72, 1, 24, 3])
    for t in (y, idx, dx):
        t.set_output(True)
    ya = np.empty((2, 5, 4, 3), np.float32)
    ia = np.empty((2, 5, 4, 3), np.int32)
    dxa = np.empty((2, 9, 8, 3), np.float32)
    run(g, {x: np.ascontiguousarray(xa.transpose(0, 2, 3, 1)), y: ya, idx: ia, dx: dxa})
    ref = maxpool_ref(xa.astype(np.float64), 3, 2, 1)
    close(ya.transpose(0, 3, 1, 2), ref)
    flat = xa.reshape(2, 3, -1)
    got = np.take_along_axis(flat, ia.transpose(0, 3, 1, 2).reshape(2, 3, -1), 2)
    close(got.reshape(ref.shape), ref)
    # backward of max pooling with dy = y: each winner receives its value once per window won
    exp = np.zeros_like(flat, dtype=np.float64)
    for n in range(2):
        for c in range(3):
            np.add.at(exp[n, c], ia.transpose(0, 3, 1, 2)[n, c].ravel(), ref[n, c].ravel())
    close(dxa.transpose(0, 3, 1, 2), exp.reshape(xa.shape))


def test_resample_avg_3d(handle):
    r = rng(172)
    xa = rand(r, (1, 2, 4, 4, 4))
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    y, idx = g.resample(x, mode=hf.ResampleMode.HIPDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING,
                        window=[2, 2, 2], stride=2)
    assert idx is None and y.get_dim() == [1, 2, 2, 2, 2]
    y.set_output(True)
    ya = np.empty(y.get_dim(), np.float32)
    run(g, {x: xa, y: ya})
    ref = xa.astype(np.float64).reshape(1, 2, 2, 2, 2, 2, 2, 2).mean(axis=(3, 5, 7))
    close(ya, ref)


def test_resample_window_too_large_is_a_clear_error(handle):
    g = graph(handle)
    x = g.tensor(name="x", dim=[1, 1, 3, 3])
    with pytest.raises(hf.BadParamError, match="larger than the padded input"):
        g.resample(x, mode="MAXPOOL", window=[5, 5])


E4M3 = {}


def e4m3_value(c):
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    v = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def test_block_scale_roundtrip_mxfp8(handle):
    r = rng(173)
    xa = (rand(r, (4, 64)) * np.exp(r.uniform(-4, 4, (4, 64)))).astype(np.float32)
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    q, s = g.block_scale_quantize(x, block_size=32, y_type=DT.HIPDNN_DATA_FP8_E4M3,
                                  scale_type=DT.HIPDNN_DATA_FP8_E8M0)
    assert s.get_dim() == [4, 2]
    y = g.block_scale_dequantize(q, s, block_size=32)
    for t in (q, s, y):
        t.set_output(True)
    qa, sa, ya = np.empty((4, 64), np.uint8), np.empty((4, 2), np.uint8), np.empty((4, 64), np.float32)
    run(g, {x: xa, q: qa, s: sa, y: ya})
    amax = np.abs(xa.reshape(4, 2, 32)).max(-1)
    assert np.array_equal(2.0 ** (sa.astype(np.int64) - 127),
                          2.0 ** np.ceil(np.log2(amax / 448.0)))
    vals = np.array([e4m3_value(c) for c in range(256)])
    deq = vals[qa].reshape(4, 2, 32) * 2.0 ** (sa.astype(np.int64) - 127)[..., None]
    close(ya, deq.reshape(4, 64), rtol=0, atol=0)
    # E4M3 keeps 3 mantissa bits: relative error <= 2^-4 (away from the subnormal range)
    close(ya, xa, rtol=2 ** -4, atol=float(np.max(np.abs(xa))) * 2 ** -9)


def test_block_scale_transpose_strides_and_bad_block(handle):
    g = graph(handle)
    x = g.tensor(name="x", dim=[64, 8])
    q, s = g.block_scale_quantize(x, block_size=32, axis=0, transpose=True,
                                  y_type=DT.HIPDNN_DATA_FP8_E4M3, scale_type=DT.HIPDNN_DATA_FP8_E8M0)
    assert q.get_stride() == [1, 64] and s.get_dim() == [2, 8] and s.get_stride() == [1, 2]
    g2 = graph(handle)
    x2 = g2.tensor(name="x", dim=[4, 30])
    with pytest.raises(hf.BadParamError, match="divide"):
        g2.block_scale_quantize(x2, block_size=32)


def test_moe_grouped_matmul_gather_and_backward(handle):
    r = rng(174)
    S, K, N, E, k = 6, 8, 5, 3, 2
    ta, wa = rand(r, (1, S, K)), rand(r, (E, K, N))
    tia = r.integers(0, S, (1, S * k, 1)).astype(np.int32)
    offa = np.array([0, 4, 9], np.int32).reshape(3, 1, 1)
    g = graph(handle)
    tok, w = g.tensor(name="tok", dim=ta.shape), g.tensor(name="w", dim=wa.shape)
    off = g.tensor(name="off", dim=[3, 1, 1], data_type=DT.HIPDNN_DATA_INT32)
    ti = g.tensor(name="ti", dim=[1, S * k, 1], data_type=DT.HIPDNN_DATA_INT32)
    out = g.moe_grouped_matmul(tok, w, off, ti, mode="GATHER")
    assert out.get_dim() == [1, S * k, N]
    out.set_output(True)
    oa = np.empty((1, S * k, N), np.float32)
    run(g, {tok: ta, w: wa, off: offa, ti: tia, out: oa})
    bounds = [0, 4, 9, S * k]
    ref = np.zeros((1, S * k, N))
    for e in range(E):
        for rr in range(bounds[e], bounds[e + 1]):
            ref[0, rr] = ta[0, tia[0, rr, 0]].astype(np.float64) @ wa[e]
    close(oa, ref)

    g2 = graph(handle)
    do = g2.tensor(name="do", dim=[1, S, N])
    tk = g2.tensor(name="tok", dim=[1, S, K])
    off2 = g2.tensor(name="off", dim=[E, 1, 1], data_type=DT.HIPDNN_DATA_INT32)
    dw = g2.moe_grouped_matmul_backward(do, tk, off2)
    assert dw.get_dim() == [E, K, N]
    dw.set_output(True)
    doa, dwa = rand(r, (1, S, N)), np.empty((E, K, N), np.float32)
    o2 = np.array([0, 2, 2], np.int32).reshape(E, 1, 1)
    run(g2, {do: doa, tk: ta, off2: o2, dw: dwa})
    b2 = [0, 2, 2, S]
    refw = np.stack([ta[0, b2[e]:b2[e + 1]].T.astype(np.float64) @ doa[0, b2[e]:b2[e + 1]]
                     for e in range(E)])
    close(dwa, refw)


def test_norm_backward_builders(handle):
    r = rng(175)
    xa, dya = rand(r, (4, 8)), rand(r, (4, 8))
    sc = rand(r, (1, 8), 0.5, 1.5)
    x64 = xa.astype(np.float64)
    mu, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    iv = 1 / np.sqrt(var + 1e-5)
    g = graph(handle)
    dy, x, s = (g.tensor(name=n, dim=a.shape) for n, a in (("dy", dya), ("x", xa), ("s", sc)))
    m, v = g.tensor(name="m", dim=[4, 1]), g.tensor(name="v", dim=[4, 1])
    dx, ds, db = g.layernorm_backward(dy, x, s, m, v, normalized_dim_count=1)
    assert ds.get_dim() == [1, 8]
    for t in (dx, ds, db):
        t.set_output(True)
    out = {t: np.empty(t.get_dim(), np.float32) for t in (dx, ds, db)}
    run(g, {dy: dya, x: xa, s: sc, m: mu.astype(np.float32), v: iv.astype(np.float32), **out})
    xh = (x64 - mu) * iv
    close(out[db], dya.sum(0, keepdims=True))
    close(out[ds], (dya * xh).sum(0, keepdims=True))
    gx = dya * sc
    ref = iv * (gx - gx.mean(1, keepdims=True) - xh * (gx * xh).mean(1, keepdims=True))
    close(out[dx], ref, rtol=1e-4, atol=1e-5)


def test_serialize_roundtrip_keeps_parameters(handle):
    g = graph(handle)
    x = g.tensor(name="x", dim=[1, 2, 6, 6])
    y, idx = g.resample(x, mode="MAXPOOL", window=[2, 2], stride=[2, 2], generate_index=True,
                        padding_mode="ZERO_PAD")
    q, s = g.block_scale_quantize(y, block_size=3, y_type=DT.HIPDNN_DATA_FP8_E5M2,
                                  scale_type=DT.HIPDNN_DATA_FLOAT)
    for t in (idx, q, s):
        t.set_output(True)
    g.build()
    data = g.serialize()
    g2 = hf.Graph.from_bytes(data, handle=handle)
    kinds = {n.kind: n for n in g2._nodes}
    rs = kinds["resample"].attrs
    assert rs["window"] == [2, 2] and rs["stride"] == [2, 2] and rs["generate_index"] is True
    assert rs["mode"] == hf.ResampleMode.HIPDNN_RESAMPLE_MAXPOOL
    assert rs["padding_mode"] == hf.PaddingMode.HIPDNN_PADDING_ZERO_PAD
    assert kinds["block_scale_quantize"].attrs["block_size"] == 3
