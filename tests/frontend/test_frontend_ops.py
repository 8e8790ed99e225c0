"""The frontend driving graphs end to end on the CPU reference engine, one test (or more) per
operation family, each checked against numpy written here."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fe_util import CPU_ENGINE, close, conv2d_dgrad_ref, conv2d_ref, conv2d_wgrad_ref, rand, rng
from hipdnn_cabi import frontend as hf

pytestmark = pytest.mark.needs_cpu_engine
F32 = hf.DataType.HIPDNN_DATA_FLOAT


def graph(handle, **kw):
    return hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32,
                    compute_data_type=F32, **kw)


def run(g, pack):
    g.build()
    assert g.engine_name == CPU_ENGINE
    g.execute(pack)
    return g


# ----------------------------------------------------------------------------- pointwise
_ERF = np.vectorize(math.erf)
UNARY = {
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "abs": np.abs, "neg": np.negative,
    "gelu": lambda x: 0.5 * x * (1 + _ERF(x / math.sqrt(2))),
    "log": lambda x: np.log(np.abs(x) + 0.5), "sqrt": lambda x: np.sqrt(np.abs(x) + 0.5),
}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_pointwise_unary(handle, op):
    r = rng(1)
    xa = rand(r, (2, 3, 4, 5), -2, 2)
    if op in ("log", "sqrt"):
        xa = np.abs(xa) + 0.5
        ref = {"log": np.log, "sqrt": np.sqrt}[op](xa.astype(np.float64))
    else:
        ref = UNARY[op](xa.astype(np.float64))
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    y = getattr(g, op)(x).set_output(True)
    ya = np.empty(y.get_dim(), np.float32)
    run(g, {x: xa, y: ya})
    close(ya, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_pointwise_binary_broadcast(handle, op):
    r = rng(2)
    aa = rand(r, (2, 3, 4, 5))
    ba = rand(r, (1, 3, 1, 5), 0.5, 1.5)
    g = graph(handle)
    a = g.tensor(name="a", dim=aa.shape)
    b = g.tensor(name="b", dim=ba.shape)
    y = getattr(g, op)(a, b).set_output(True)
    assert y.get_dim() == [2, 3, 4, 5]
    ya = np.empty(y.get_dim(), np.float32)
    run(g, {a: aa, b: ba, y: ya})
    close(ya, BINARY[op](aa.astype(np.float64), ba), rtol=1e-5, atol=1e-6)


def test_pointwise_chain_generic_mode_and_relu_clip(handle):
    r = rng(3)
    xa = rand(r, (4, 8), -3, 3)
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    t = g.pointwise(x, x, mode="MUL")                      # x^2
    y = g.relu(g.sub(t, x), upper_clip=2.0, name="clip").set_output(True)
    ya = np.empty(xa.shape, np.float32)
    run(g, {x: xa, y: ya})
    close(ya, np.clip(xa.astype(np.float64) ** 2 - xa, 0, 2), rtol=1e-5, atol=1e-5)


def test_pointwise_backward_relu(handle):
    r = rng(4)
    dya, xa = rand(r, (3, 7)), rand(r, (3, 7))
    g = graph(handle)
    dy, x = g.tensor(name="dy", dim=dya.shape), g.tensor(name="x", dim=xa.shape)
    dx = g.relu_backward(dy, x).set_output(True)
    dxa = np.empty(xa.shape, np.float32)
    run(g, {dy: dya, x: xa, dx: dxa})
    close(dxa, np.where(xa > 0, dya, 0))


def test_pointwise_compile_time_constant_operand(handle):
    xa = rand(rng(5), (2, 6))
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    y = g.mul(x, 0.25).set_output(True)     # a number becomes a compile-time constant scalar
    ya = np.empty(xa.shape, np.float32)
    run(g, {x: xa, y: ya})
    close(ya, xa * 0.25)


def test_runtime_pass_by_value_scalar(handle):
    xa = rand(rng(6), (3, 5))
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    s = g.tensor(name="s", dim=[1], data_type=F32).set_as_runtime_parameter()
    y = g.mul(x, s).set_output(True)
    ya = np.empty(xa.shape, np.float32)
    g.build()
    for v in (2.0, -0.5, 3.0):       # one plan, the value changes at execute
        g.execute({x: xa, s: v, y: ya})
        close(ya, xa * v)
    g.execute({x: xa, s: np.array([4.0], np.float32), y: ya})
    close(ya, xa * 4.0)


# ----------------------------------------------------------------------------- convolution
@pytest.mark.parametrize("pad,stride,dil", [((1, 1), (1, 1), (1, 1)), ((0, 2), (2, 1), (1, 2))])
def test_conv_fprop(handle, pad, stride, dil):
    r = rng(7)
    xa, wa = rand(r, (2, 3, 9, 8)), rand(r, (4, 3, 3, 3))
    ref = conv2d_ref(xa, wa, pad, stride, dil)
    g = graph(handle)
    x, w = g.tensor(name="x", dim=xa.shape), g.tensor(name="w", dim=wa.shape)
    y = g.conv_fprop(x, w, padding=list(pad), stride=list(stride), dilation=list(dil)).set_output(True)
    assert tuple(y.get_dim()) == ref.shape
    ya = np.empty(ref.shape, np.float32)
    run(g, {x: xa, w: wa, y: ya})
    close(ya, ref)


def test_conv_fprop_nhwc_layout(handle):
    r = rng(8)
    xa, wa = rand(r, (2, 5, 6, 3)), rand(r, (4, 3, 3, 3))       # x stored NHWC
    xl = xa.transpose(0, 3, 1, 2)                                 # logical NCHW view
    g = graph(handle)
    x = g.tensor(name="x", dim=xl.shape, stride=[s // 4 for s in xl.strides])
    w = g.tensor(name="w", dim=wa.shape)
    y = g.conv_fprop(x, w, padding=1).set_output(True)
    n, k, h, wd = y.get_dim()
    assert y.get_stride() == [h * wd * k, 1, wd * k, k]           # inherits x's stride order
    ys = np.empty((n, h, wd, k), np.float32)
    run(g, {x: xa, w: wa, y: ys})
    close(ys.transpose(0, 3, 1, 2), conv2d_ref(xl, wa, (1, 1)))


def test_conv_dgrad(handle):
    r = rng(9)
    x_shape, wa = (2, 3, 7, 7), rand(r, (4, 3, 3, 3))
    pad, stride = (1, 1), (2, 2)
    dya = rand(r, (2, 4, 4, 4))
    g = graph(handle)
    dy, w = g.tensor(name="dy", dim=dya.shape), g.tensor(name="w", dim=wa.shape)
    dx = g.conv_dgrad(dy, w, padding=1, stride=2).set_output(True)
    assert tuple(dx.get_dim()) == x_shape
    dxa = np.empty(x_shape, np.float32)
    run(g, {dy: dya, w: wa, dx: dxa})
    close(dxa, conv2d_dgrad_ref(dya, wa, x_shape, pad, stride))


def test_conv_wgrad(handle):
    r = rng(10)
    xa, dya = rand(r, (2, 3, 6, 6)), rand(r, (2, 4, 6, 6))
    g = graph(handle)
    x, dy = g.tensor(name="x", dim=xa.shape), g.tensor(name="dy", dim=dya.shape)
    dw = g.conv_wgrad(x, dy, padding=1).set_output(True)
    assert dw.get_dim() == [4, 3, 3, 3]
    dwa = np.empty((4, 3, 3, 3), np.float32)
    run(g, {x: xa, dy: dya, dw: dwa})
    close(dwa, conv2d_wgrad_ref(xa, dya, (4, 3, 3, 3), (1, 1)), rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- batchnorm
def _bn_inputs(seed):
    r = rng(seed)
    return (rand(r, (4, 3, 5, 5), -2, 2), rand(r, (1, 3, 1, 1), 0.5, 1.5), rand(r, (1, 3, 1, 1)))


def test_batchnorm_inference(handle):
    xa, sc, bi = _bn_inputs(11)
    r = rng(12)
    mean, inv = rand(r, (1, 3, 1, 1)), rand(r, (1, 3, 1, 1), 0.5, 2)
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    ts = [g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("mean", "inv_var", "scale", "bias")]
    y = g.batchnorm_inference(x, *ts).set_output(True)
    ya = np.empty(xa.shape, np.float32)
    run(g, {x: xa, ts[0]: mean, ts[1]: inv, ts[2]: sc, ts[3]: bi, y: ya})
    close(ya, (xa - mean) * inv * sc + bi)


@pytest.mark.parametrize("eps_kind", ["scalar", "tensor"])
def test_batchnorm_inference_variance(handle, eps_kind):
    xa, sc, bi = _bn_inputs(21)
    r = rng(22)
    mean, var = rand(r, (1, 3, 1, 1)), rand(r, (1, 3, 1, 1), 0.5, 2)
    eps = 1e-3
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    ts = [g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("mean", "var", "scale", "bias")]
    e = eps if eps_kind == "scalar" else g.tensor(name="eps", dim=[1, 1, 1, 1])
    y = g.batchnorm_inference_variance(x, *ts, e).set_output(True)
    assert y.get_dim() == list(xa.shape)
    ya = np.empty(xa.shape, np.float32)
    feeds = {x: xa, ts[0]: mean, ts[1]: var, ts[2]: sc, ts[3]: bi, y: ya}
    if eps_kind == "tensor":
        feeds[e] = np.full((1, 1, 1, 1), eps, np.float32)
    run(g, feeds)
    x64 = xa.astype(np.float64)
    close(ya, (x64 - mean) / np.sqrt(var.astype(np.float64) + eps) * sc + bi)


def test_batchnorm_training_with_running_stats(handle):
    xa, sc, bi = _bn_inputs(13)
    eps, mom = 1e-5, 0.1
    rm, rv = np.zeros((1, 3, 1, 1), np.float32), np.ones((1, 3, 1, 1), np.float32)
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    s, b = g.tensor(name="scale", dim=[1, 3, 1, 1]), g.tensor(name="bias", dim=[1, 3, 1, 1])
    prm, prv = g.tensor(name="rm", dim=[1, 3, 1, 1]), g.tensor(name="rv", dim=[1, 3, 1, 1])
    y, mean, inv, nrm, nrv = g.batchnorm(x, s, b, eps, in_running_mean=prm, in_running_var=prv,
                                         momentum=mom)
    for t in (y, mean, inv, nrm, nrv):
        t.set_output(True)
    assert mean.get_dim() == [1, 3, 1, 1] and nrv.get_dim() == [1, 3, 1, 1]
    out = {t: np.empty(t.get_dim(), np.float32) for t in (y, mean, inv, nrm, nrv)}
    run(g, {x: xa, s: sc, b: bi, prm: rm, prv: rv, **out})
    x64 = xa.astype(np.float64)
    mu = x64.mean(axis=(0, 2, 3), keepdims=True)
    var = x64.var(axis=(0, 2, 3), keepdims=True)
    M = xa.size / 3
    close(out[mean], mu)
    close(out[inv], 1 / np.sqrt(var + eps))
    close(out[y], (x64 - mu) / np.sqrt(var + eps) * sc + bi)
    close(out[nrm], (1 - mom) * rm + mom * mu)
    close(out[nrv], (1 - mom) * rv + mom * var * M / (M - 1))


def test_batchnorm_backward(handle):
    xa, sc, _ = _bn_inputs(14)
    dya = rand(rng(15), xa.shape)
    x64 = xa.astype(np.float64)
    mu = x64.mean(axis=(0, 2, 3), keepdims=True)
    inv = 1 / np.sqrt(x64.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    g = graph(handle)
    dy, x = g.tensor(name="dy", dim=xa.shape), g.tensor(name="x", dim=xa.shape)
    s, m, iv = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("scale", "mean", "inv_var"))
    dx, dscale, dbias = g.batchnorm_backward(dy, x, s, m, iv)
    for t in (dx, dscale, dbias):
        t.set_output(True)
    out = {t: np.empty(t.get_dim(), np.float32) for t in (dx, dscale, dbias)}
    run(g, {dy: dya, x: xa, s: sc, m: mu.astype(np.float32), iv: inv.astype(np.float32), **out})
    xhat = (x64 - mu) * inv
    M = xa.size / 3
    db = dya.sum(axis=(0, 2, 3), keepdims=True)
    ds = (dya * xhat).sum(axis=(0, 2, 3), keepdims=True)
    close(out[dbias], db)
    close(out[dscale], ds, rtol=1e-4, atol=1e-4)
    close(out[dx], sc * inv / M * (M * dya - db - xhat * ds), rtol=1e-3, atol=1e-4)


# ----------------------------------------------------------------------------- matmul
def test_matmul_batch_broadcast(handle):
    r = rng(16)
    aa, ba = rand(r, (2, 1, 4, 6)), rand(r, (1, 3, 6, 5))
    g = graph(handle)
    a, b = g.tensor(name="A", dim=aa.shape), g.tensor(name="B", dim=ba.shape)
    c = g.matmul(a, b).set_output(True)
    assert c.get_dim() == [2, 3, 4, 5]
    ca = np.empty((2, 3, 4, 5), np.float32)
    run(g, {a: aa, b: ba, c: ca})
    close(ca, np.matmul(aa.astype(np.float64), ba))


def test_matmul_bias_gelu_chain(handle):
    r = rng(17)
    aa, ba, bias = rand(r, (8, 16)), rand(r, (16, 4)), rand(r, (1, 4))
    g = graph(handle)
    a, b, bb = (g.tensor(name=n, dim=v.shape) for n, v in (("a", aa), ("b", ba), ("bias", bias)))
    y = g.gelu(g.add(g.matmul(a, b), bb)).set_output(True)
    ya = np.empty((8, 4), np.float32)
    run(g, {a: aa, b: ba, bb: bias, y: ya})
    z = aa.astype(np.float64) @ ba + bias
    close(ya, UNARY["gelu"](z), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- reduction
@pytest.mark.parametrize("mode,fn", [("ADD", np.sum), ("MAX", np.max), ("AVG", np.mean),
                                     ("NORM2", lambda v, axis, keepdims: np.sqrt((v * v).sum(axis=axis, keepdims=keepdims)))])
def test_reduction(handle, mode, fn):
    xa = rand(rng(18), (3, 4, 5))
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    y = g.reduction(x, hf.ReduceTensorOp["HIPDNN_REDUCE_TENSOR_" + mode]).set_dim([3, 1, 5]).set_output(True)
    ya = np.empty((3, 1, 5), np.float32)
    run(g, {x: xa, y: ya})
    close(ya, fn(xa.astype(np.float64), axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- layernorm / rmsnorm
def test_layernorm_training(handle):
    r = rng(19)
    xa = rand(r, (4, 3, 2, 5), -2, 2)
    sc, bi = rand(r, (1, 3, 2, 5), 0.5, 1.5), rand(r, (1, 3, 2, 5))
    eps = 1e-5
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    s, b = g.tensor(name="scale", dim=sc.shape), g.tensor(name="bias", dim=bi.shape)
    y, mean, inv = g.layernorm(x, s, b, eps)
    for t in (y, mean, inv):
        t.set_output(True)
    assert mean.get_dim() == [4, 1, 1, 1]
    out = {t: np.empty(t.get_dim(), np.float32) for t in (y, mean, inv)}
    run(g, {x: xa, s: sc, b: bi, **out})
    x64 = xa.astype(np.float64)
    mu = x64.mean(axis=(1, 2, 3), keepdims=True)
    var = x64.var(axis=(1, 2, 3), keepdims=True)
    close(out[mean], mu)
    close(out[inv], 1 / np.sqrt(var + eps))
    close(out[y], (x64 - mu) / np.sqrt(var + eps) * sc + bi)


def test_layernorm_inference_last_dim(handle):
    r = rng(20)
    xa, sc, bi = rand(r, (2, 3, 8)), rand(r, (1, 1, 8)), rand(r, (1, 1, 8))
    g = graph(handle)
    x = g.tensor(name="x", dim=xa.shape)
    s, b = g.tensor(name="scale", dim=sc.shape), g.tensor(name="bias", dim=bi.shape)
    eps = g.tensor(1e-3, hf.ScalarType.COMPILE_TIME_CONST, name="eps")
    y, mean, inv = g.layernorm(x, s, b, eps, norm_forward_phase=hf.NormFwdPhase.INFERENCE,
                               normalized_dim_count=1)
    assert mean is None and inv is None
    y.set_output(True)
    ya = np.empty(xa.shape, np.float32)
    run(g, {x: xa, s: sc, b: bi, y: ya})
    x64 = xa.astype(np.float64)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    close(ya, (x64 - mu) / np.sqrt(var + 1e-3) * sc + bi)


def test_rmsnorm_training(handle):
    r = rng(21)
    xa, sc = rand(r, (4, 6, 1, 1), -2, 2), rand(r, (1, 6, 1, 1), 0.5, 1.5)
    eps = 1e-5
    g = graph(handle)
    x, s = g.tensor(name="x", dim=xa.shape), g.tensor(name="scale", dim=sc.shape)
    y, inv_rms = g.rmsnorm(x, s, eps)
    y.set_output(True)
    inv_rms.set_output(True)
    assert inv_rms.get_dim() == [4, 1, 1, 1]
    ya, ra = np.empty(xa.shape, np.float32), np.empty((4, 1, 1, 1), np.float32)
    run(g, {x: xa, s: sc, y: ya, inv_rms: ra})
    x64 = xa.astype(np.float64)
    inv = 1 / np.sqrt((x64 ** 2).mean(axis=(1, 2, 3), keepdims=True) + eps)
    close(ra, inv)
    close(ya, x64 * inv * sc)
