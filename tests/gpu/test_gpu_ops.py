"""GPU: every op x dtype x layout on the HIP engine vs the CPU reference kernels."""
from __future__ import annotations

import functools
import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import batchnorm as kbn
from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.cpu_reference.kernels import matmul as kmm
from engine_plugins.cpu_reference.kernels import pointwise as kpw
from engine_plugins.cpu_reference.kernels import reduction as kred
from gpu_testlib import (TOL, T, bn_bwd, bn_inf, bn_train, conv_bias_relu_graph, conv_bwd_data, conv_bwd_filter,
                         conv_fwd, graph_bytes, matmul, pw, quantize, quantized_normal, reduction, relerr)

pytestmark = pytest.mark.gpu
DTYPES = ("FLOAT", "HALF", "BFLOAT16")
LAYOUTS = ("nchw", "nhwc")
rng = np.random.default_rng(1234)


rnd = functools.partial(quantized_normal, rng)


def check(out, ref, dtype, what, tol=None):
    assert np.all(np.isfinite(out)), f"{what}: non-finite / unwritten output"
    e = relerr(out, ref)
    assert e < (tol or TOL[dtype]), f"{what}: rel err {e:.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_pointwise_chain(R, dtype, lay):
    x = T(1, [3, 24, 7, 9], dtype, lay)
    b = T(2, [1, 24, 1, 1], dtype, lay)
    v1 = T(3, x.dims, "FLOAT", lay, virtual=True)
    v2 = T(4, x.dims, "FLOAT", lay, virtual=True)
    s = T(5, [1, 1, 1, 1], "FLOAT", value=0.5)
    v3 = T(6, x.dims, "FLOAT", lay, virtual=True)
    y = T(7, x.dims, dtype, lay)
    g = graph_bytes([x, b, v1, v2, s, v3, y], [pw("ADD", 1, 3, 2), pw("MUL", 3, 4, 5),
                                               pw("TANH_FWD", 4, 6), pw("SUB", 6, 7, 1)])
    xv, bv = rnd(x.dims, dtype), rnd(b.dims, dtype)
    out = R.run(g, {x: xv, b: bv}, [y])[7]
    ref = np.tanh((xv + bv) * 0.5) - xv
    check(out, quantize(ref, dtype), dtype, "pw chain")


@pytest.mark.parametrize("mode", ["RELU_FWD", "SIGMOID_FWD", "GELU_FWD", "EXP", "SWISH_FWD", "ELU_FWD", "SOFTPLUS_FWD", "ABS", "SQRT"])
def test_pointwise_unary_modes(R, mode):
    x = T(1, [1000, 33])
    y = T(2, [1000, 33])
    xv = rnd(x.dims, "FLOAT")
    if mode == "SQRT":
        xv = np.abs(xv)
    out = R.run(graph_bytes([x, y], [pw(mode, 1, 2)]), {x: xv}, [y])[2]
    ref = kpw.pointwise("HIPDNN_POINTWISE_" + mode, xv.astype(np.float32))
    check(out, ref, "FLOAT", mode, 1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("btrans", [False, True])
def test_matmul(R, dtype, btrans):
    a = T(1, [3, 130, 72], dtype)
    bst = [72 * 200, 1, 72] if btrans else [72 * 200, 200, 1]
    b = T(2, [3, 72, 200], dtype, strides=bst)
    c = T(3, [3, 130, 200], dtype)
    av, bv = rnd(a.dims, dtype), rnd(b.dims, dtype)
    out = R.run(graph_bytes([a, b, c], [matmul(1, 2, 3)]), {a: av, b: bv}, [c])[3]
    check(out, quantize(kmm.matmul(av, bv, compute_dtype=np.float64), dtype), dtype, "matmul")


def test_matmul_broadcast_batch(R):
    a = T(1, [4, 64, 48])
    b = T(2, [1, 48, 40])
    c = T(3, [4, 64, 40])
    av, bv = rnd(a.dims, "FLOAT"), rnd(b.dims, "FLOAT")
    out = R.run(graph_bytes([a, b, c], [matmul(1, 2, 3)]), {a: av, b: bv}, [c])[3]
    check(out, np.matmul(av, bv), "FLOAT", "matmul bcast")


CONV_CASES = [  # (N, C, H, W, K, R, S, pad, stride, dil, mode)
    (2, 16, 11, 10, 32, 3, 3, 1, 1, 1, "CROSS_CORRELATION"),
    (2, 24, 12, 12, 40, 1, 1, 0, 2, 1, "CROSS_CORRELATION"),
    (1, 8, 9, 9, 16, 3, 3, 2, 1, 2, "CONVOLUTION"),
    (2, 3, 15, 15, 8, 5, 5, 2, 2, 1, "CROSS_CORRELATION"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_fwd(R, dtype, lay, case):
    N, C, H, W, K, Rr, S, pad, st, dil, mode = CONV_CASES[case]
    P = (H + 2 * pad - (dil * (Rr - 1) + 1)) // st + 1
    Q = (W + 2 * pad - (dil * (S - 1) + 1)) // st + 1
    x = T(1, [N, C, H, W], dtype, lay)
    w = T(2, [K, C, Rr, S], dtype, lay)
    y = T(3, [N, K, P, Q], dtype, lay)
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [pad, pad], [st, st], [dil, dil], mode)])
    xv, wv = rnd(x.dims, dtype), rnd(w.dims, dtype)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, [pad, pad], [pad, pad], [st, st], [dil, dil], mode,
                         compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, f"conv {CONV_CASES[case]}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_conv_bias_relu_fused(R, dtype, lay):
    x, w, b, y, g = conv_bias_relu_graph(2, 16, 32, 10, dtype, lay)
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    assert len(build_program(parse_graph(g)).steps) == 1
    xv, wv, bv = rnd(x.dims, dtype), rnd(w.dims, dtype), rnd(b.dims, dtype)
    out = R.run(g, {x: xv, w: wv, b: bv}, [y])[6]
    ref = np.maximum(kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bv, 0)
    check(out, quantize(ref, dtype), dtype, "conv+bias+relu")


def test_matmul_bias_gelu_fused(R):
    a = T(1, [256, 96])
    b = T(2, [96, 128])
    c = T(3, [256, 128], virtual=True)
    bias = T(4, [1, 128])
    v = T(5, [256, 128], virtual=True)
    y = T(6, [256, 128])
    g = graph_bytes([a, b, c, bias, v, y], [matmul(1, 2, 3), pw("ADD", 3, 5, 4), pw("GELU_FWD", 5, 6)])
    av, bv, biv = rnd(a.dims, "FLOAT"), rnd(b.dims, "FLOAT"), rnd(bias.dims, "FLOAT")
    out = R.run(g, {a: av, b: bv, bias: biv}, [y])[6]
    ref = kpw.pointwise("GELU_FWD", av @ bv + biv, compute_dtype=np.float64)
    check(out, ref, "FLOAT", "matmul+bias+gelu")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_batchnorm_train(R, dtype, lay):
    dims = [4, 40, 9, 11]
    x = T(1, dims, dtype, lay)
    y = T(2, dims, dtype, lay)
    cd = [1, 40, 1, 1]
    sc, bi, mu, iv, prm, prv, nrm, nrv = (T(u, cd, "FLOAT") for u in range(10, 18))
    eps = T(20, [1, 1, 1, 1], "FLOAT", value=1e-5)
    mom = T(21, [1, 1, 1, 1], "FLOAT", value=0.1)
    g = graph_bytes([x, y, sc, bi, mu, iv, prm, prv, nrm, nrv, eps, mom],
                    [bn_train(1, 10, 11, 20, 2, 12, 13, 14, 15, 21, 16, 17)])
    xv = rnd(dims, dtype) * 2 + 0.5
    xv = quantize(xv, dtype)
    scv, biv, prmv = rnd(cd, "FLOAT"), rnd(cd, "FLOAT"), rnd(cd, "FLOAT")
    prvv = np.abs(rnd(cd, "FLOAT")) + 0.5
    res = R.run(g, {x: xv, sc: scv, bi: biv, prm: prmv, prv: prvv}, [y, mu, iv, nrm, nrv])
    r = kbn.batchnorm_train_fwd(xv, scv, biv, 1e-5, 0.1, prmv, prvv)
    check(res[2], quantize(r.y, dtype), dtype, "bn y")
    for uid, refv in ((12, r.mean), (13, r.inv_variance), (16, r.next_running_mean), (17, r.next_running_variance)):
        check(res[uid], np.asarray(refv).reshape(cd), "FLOAT", f"bn stat {uid}", 1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_batchnorm_inference(R, dtype, lay):
    dims = [3, 24, 8, 8]
    x, y = T(1, dims, dtype, lay), T(2, dims, dtype, lay)
    cd = [24]
    mu, iv, sc, bi = (T(u, cd, "FLOAT") for u in range(3, 7))
    g = graph_bytes([x, y, mu, iv, sc, bi], [bn_inf(1, 3, 4, 5, 6, 2)])
    xv = rnd(dims, dtype)
    muv, scv, biv = rnd(cd, "FLOAT"), rnd(cd, "FLOAT"), rnd(cd, "FLOAT")
    ivv = np.abs(rnd(cd, "FLOAT")) + 0.5
    out = R.run(g, {x: xv, mu: muv, iv: ivv, sc: scv, bi: biv}, [y])[2]
    ref = kbn.batchnorm_inference(xv, scv, biv, muv, ivv)
    check(out, quantize(ref, dtype), dtype, "bn inference")


def test_host_pointer_rejected_naming_uid(R):
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, PluginError
    from hipdnn_cabi.plugin_sdk.errors import INVALID_VALUE
    x, y = T(1, [64, 64]), T(2, [64, 64])
    ctx = R.plan(graph_bytes([x, y], [pw("RELU_FWD", 1, 2)]))
    host = np.zeros(64 * 64, np.float32)
    dptr = R.rt.malloc(host.nbytes)
    try:
        if R.rt.pageable_access:
            pytest.skip("this GPU reaches pageable host memory (HMM/ATS)")
        with pytest.raises(PluginError) as ei:
            R.container.execute(ctx, 0, DeviceBuffers({1: host.ctypes.data, 2: dptr}))
        assert ei.value.status == INVALID_VALUE and "uid 1" in ei.value.message
    finally:
        R.rt.free(dptr)


def test_not_applicable_falls_back(R):
    """A graph of the decline list (a matmul operand with a negative stride) finds no engine
    here, so a plan falls back to another engine."""
    from hipdnn_cabi.plugin_sdk import parse_graph
    a, b, c = T(1, [1, 8, 8], strides=[64, -8, 1]), T(2, [1, 8, 8]), T(3, [1, 8, 8])
    g = graph_bytes([a, b, c], [matmul(1, 2, 3)])
    assert R.container.get_applicable_engine_ids(parse_graph(g)) == []


def test_cuda_graph_capture(R):
    from hipdnn_cabi.plugin_sdk import DeviceBuffers
    if R.rt.kind != "cuda":
        pytest.skip("capture test written for the CUDA runtime")
    x, b, y = T(1, [256, 300]), T(2, [1, 300]), T(3, [256, 300])
    v = T(4, [256, 300], virtual=True)
    ctx = R.plan(graph_bytes([x, b, v, y], [pw("ADD", 1, 4, 2), pw("RELU_FWD", 4, 3)]))
    xv, bv = rnd(x.dims, "FLOAT"), rnd(b.dims, "FLOAT")
    px, _ = R.alloc(x, xv)
    pb, _ = R.alloc(b, bv)
    py, hy = R.alloc(y)
    bufs = DeviceBuffers({1: px, 2: pb, 3: py})
    R.container.execute(ctx, 0, bufs)           # warm: compile/pack outside the capture
    R.rt.stream_synchronize(R.stream)
    R.rt.memset(py, 0xFF, hy.nbytes, R.stream)
    R.rt.graph_capture_begin(R.stream)
    R.container.execute(ctx, 0, bufs)
    gr, ge = R.rt.graph_capture_end(R.stream)
    R.rt.graph_launch(ge, R.stream)
    R.rt.stream_synchronize(R.stream)
    R.rt.memcpy_dtoh(hy.ctypes.data, py, hy.nbytes)
    check(hy.reshape(y.dims), np.maximum(xv + bv, 0), "FLOAT", "graph replay")
    R.rt.graph_destroy(gr, ge)
    for p in (px, pb, py):
        R.rt.free(p)


# ------------------------------------------------------------------ added ops
def _conv_shapes(case, dtype, lay):
    N, C, H, W, K, Rr, S, pad, st, dil, mode = CONV_CASES[case]
    P = (H + 2 * pad - (dil * (Rr - 1) + 1)) // st + 1
    Q = (W + 2 * pad - (dil * (S - 1) + 1)) // st + 1
    return (T(1, [N, C, H, W], dtype, lay), T(2, [K, C, Rr, S], dtype, lay), T(3, [N, K, P, Q], dtype, lay),
            [pad, pad], [st, st], [dil, dil], mode)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_bwd_data(R, dtype, lay, case):
    x, w, y, pad, st, dil, mode = _conv_shapes(case, dtype, lay)
    g = graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, pad, st, dil, mode)])
    dyv, wv = rnd(y.dims, dtype), rnd(w.dims, dtype)
    out = R.run(g, {y: dyv, w: wv}, [x])[1]
    ref = kconv.conv_bwd_data(dyv, wv, x.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, f"conv bwd data {CONV_CASES[case]}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_bwd_filter(R, dtype, lay, case):
    x, w, y, pad, st, dil, mode = _conv_shapes(case, dtype, lay)
    g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, pad, st, dil, mode)])
    xv, dyv = rnd(x.dims, dtype), rnd(y.dims, dtype)
    out = R.run(g, {x: xv, y: dyv}, [w])[2]
    ref = kconv.conv_bwd_filter(xv, dyv, w.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, f"conv bwd filter {CONV_CASES[case]}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_conv_splitk_large(R, dtype, lay):
    # conv5-like: few output tiles, long reduction -> split-K (+ the 16-byte epilogue)
    x = T(1, [4, 256, 7, 7], dtype, lay)
    w = T(2, [256, 256, 3, 3], dtype, lay)
    y = T(3, [4, 256, 7, 7], dtype, lay)
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1])])
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    assert any("split-K" in n for n in build_program(parse_graph(g)).notes)
    xv, wv = rnd(x.dims, dtype), rnd(w.dims, dtype, 1 / 48)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64)
    check(out, quantize(ref, dtype), dtype, "conv split-K")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", LAYOUTS)
def test_batchnorm_backward(R, dtype, lay):
    dims = [4, 40, 9, 11]
    cd = [1, 40, 1, 1]
    dy, x, dx = T(1, dims, dtype, lay), T(2, dims, dtype, lay), T(6, dims, dtype, lay)
    mu, iv, sc, ds, db = T(3, cd), T(4, cd), T(5, cd), T(7, cd), T(8, cd)
    g = graph_bytes([dy, x, mu, iv, sc, dx, ds, db], [bn_bwd(1, 2, 3, 4, 5, 6, 7, 8)])
    xv, dyv = rnd(dims, dtype) * 2 + 0.5, rnd(dims, dtype)
    xv = quantize(xv, dtype)
    muv = xv.mean(axis=(0, 2, 3), keepdims=True)
    ivv = 1 / np.sqrt(xv.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    scv = rnd(cd, "FLOAT")
    res = R.run(g, {dy: dyv, x: xv, mu: muv, iv: ivv, sc: scv}, [dx, ds, db])
    r = kbn.batchnorm_bwd(dyv, xv, scv, muv, ivv)
    check(res[6], quantize(r.dx, dtype), dtype, "bn bwd dx", TOL[dtype] * 2)
    check(res[7], r.dscale, "FLOAT", "bn bwd dscale", 1e-5)
    check(res[8], r.dbias, "FLOAT", "bn bwd dbias", 1e-5)


RED_SHAPES = [([64, 300], [64, 1]), ([4, 8, 300, 30], [1, 1, 1, 1]), ([6, 5, 40], [6, 1, 40]),
              ([3, 16, 50, 50], [1, 16, 1, 1])]


@pytest.mark.parametrize("mode", ["ADD", "MUL", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS"])
@pytest.mark.parametrize("shape", range(len(RED_SHAPES)))
def test_reduction(R, mode, shape):
    xd, yd = RED_SHAPES[shape]
    dtype = ("FLOAT", "HALF", "BFLOAT16", "FLOAT")[shape]
    x, y = T(1, xd, dtype), T(2, yd, "FLOAT")
    xv = rnd(xd, dtype)
    if mode in ("MUL", "MUL_NO_ZEROS"):
        xv = quantize(1 + 0.001 * xv, dtype)
    out = R.run(graph_bytes([x, y], [reduction(mode, 1, 2)]), {x: xv}, [y])[2]
    ref = kred.reduce(mode, xv, yd)
    check(out, ref, "FLOAT", f"reduce {mode} {xd}->{yd}", 1e-5)


# ------------------------------------------------------------------ runtime pass-by-value
def test_runtime_scalar_pointwise(R):
    x, s, y = T(1, [300, 70]), T(2, [1, 1], "FLOAT", runtime=True), T(3, [300, 70])
    g = graph_bytes([x, s, y], [pw("MUL", 1, 3, 2)])
    xv = rnd(x.dims, "FLOAT")
    ctx = R.plan(g)
    for v in (2.5, -0.75):      # one plan, value read from the host pointer at each execute
        out = R.run(g, {x: xv}, [y], scalars={2: v}, ctx=ctx)[3]
        check(out, xv * v, "FLOAT", f"runtime scalar {v}", 1e-6)


def test_runtime_scalar_default_wins(R):
    x, s, y = T(1, [64, 33]), T(2, [1, 1], "FLOAT", value=3.0, runtime=True), T(3, [64, 33])
    g = graph_bytes([x, s, y], [pw("ADD", 1, 3, 2)])
    xv = rnd(x.dims, "FLOAT")
    out = R.run(g, {x: xv}, [y], scalars={2: 100.0})[3]    # the variant-pack entry is inert
    check(out, xv + 3.0, "FLOAT", "runtime default", 1e-6)


def test_runtime_scalar_unbound_is_invalid_value(R):
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, PluginError
    from hipdnn_cabi.plugin_sdk.errors import INVALID_VALUE
    x, s, y = T(1, [64, 33]), T(2, [1, 1], "FLOAT", runtime=True), T(3, [64, 33])
    ctx = R.plan(graph_bytes([x, s, y], [pw("MUL", 1, 3, 2)]))
    px, _ = R.alloc(x, rnd(x.dims, "FLOAT"))
    py, _ = R.alloc(y)
    try:
        with pytest.raises(PluginError) as ei:
            R.container.execute(ctx, 0, DeviceBuffers({1: px, 3: py}))
        assert ei.value.status == INVALID_VALUE and "uid 2" in ei.value.message
    finally:
        R.rt.free(px)
        R.rt.free(py)


def test_runtime_scalar_batchnorm_epsilon(R):
    dims = [4, 24, 6, 6]
    x, y = T(1, dims), T(2, dims)
    cd = [1, 24, 1, 1]
    sc, bi, mu, iv = (T(u, cd) for u in range(10, 14))
    eps = T(20, [1, 1, 1, 1], "FLOAT", runtime=True)
    g = graph_bytes([x, y, sc, bi, mu, iv, eps], [bn_train(1, 10, 11, 20, 2, 12, 13)])
    xv = rnd(dims, "FLOAT") * 0.01           # small variance: epsilon matters
    scv, biv = rnd(cd, "FLOAT"), rnd(cd, "FLOAT")
    for e in (1e-5, 1e-3):
        res = R.run(g, {x: xv, sc: scv, bi: biv}, [y, mu, iv], scalars={20: e})
        r = kbn.batchnorm_train_fwd(xv, scv, biv, e)
        check(res[2], r.y, "FLOAT", f"bn y eps={e}")
        check(res[13], np.asarray(r.inv_variance).reshape(cd), "FLOAT", f"bn iv eps={e}", 1e-5)
