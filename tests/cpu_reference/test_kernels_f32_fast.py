"""float32 fast paths (blocked / threaded) of pointwise and batchnorm against float64 formulas
written here (math module, per-channel loops), on arrays large enough to use every block and
thread path, NCHW and NHWC."""
import math

import numpy as np
import pytest

from cpuref_testutil import assert_close
from engine_plugins.cpu_reference.kernels import batchnorm as bn
from engine_plugins.cpu_reference.kernels import blocked
from engine_plugins.cpu_reference.kernels import pointwise as pw

P = "HIPDNN_POINTWISE_"
N_BIG = blocked.PARALLEL_MIN + 12345   # > one thread's share, not a block multiple


def _phi(v):
    return 0.5 * math.erfc(-v / math.sqrt(2.0))


def test_erf_f32_relative_error():
    xs = np.concatenate([np.linspace(-6, 6, 200001), [0.0, 1e-30, -1e-6, 3.99, 4.01, 40.0]])
    xs = xs.astype(np.float32)
    ref = np.array([math.erf(float(v)) for v in xs])
    got = pw.erf_f32(xs).astype(np.float64)
    nz = ref != 0
    assert np.max(np.abs(got - ref)[nz] / np.abs(ref[nz])) < 1e-6
    sp = pw.erf_f32(np.array([np.inf, -np.inf, np.nan], np.float32))
    assert sp[0] == 1 and sp[1] == -1 and np.isnan(sp[2])


def _each(f):
    return lambda v: np.array([f(t) for t in v.ravel().tolist()]).reshape(v.shape)


REF = {
    "SIGMOID_FWD": lambda v: 1 / (1 + np.exp(-v)),
    "GELU_FWD": _each(lambda t: t * _phi(t)),
    "TANH_FWD": np.tanh,
    "EXP": np.exp,
    "ERF": _each(math.erf),
    "SWISH_FWD": lambda v: v / (1 + np.exp(-v)),
    "GELU_APPROX_TANH_FWD": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
    "SOFTPLUS_FWD": lambda v: np.logaddexp(0.0, v),
    "ELU_FWD": lambda v: np.where(v > 0, v, np.expm1(np.minimum(v, 0))),
}


@pytest.mark.parametrize("mode", sorted(REF))
def test_pointwise_f32_large(mode):
    rng = np.random.default_rng(1)
    n = N_BIG if mode not in ("GELU_FWD", "ERF") else 1 << 16   # python-loop references: keep small
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    got = pw.pointwise(P + mode, x)
    assert got.dtype == np.float32
    ref = REF[mode](x.astype(np.float64))
    assert_close(got, ref, "HIPDNN_DATA_FLOAT", what=mode)
    # into a caller's buffer, NHWC strided views (same memory order)
    xs = x[: 2 * 8 * 8 * (n // 128)].reshape(2, 8, 8, -1).transpose(0, 3, 1, 2)
    out = np.empty((2, 8, 8, xs.shape[1]), np.float32).transpose(0, 3, 1, 2)
    r = pw.pointwise(P + mode, xs, out=out)
    assert r is out
    assert_close(out, REF[mode](xs.astype(np.float64)), "HIPDNN_DATA_FLOAT", what=mode)


def test_pointwise_f32_backward_large():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(N_BIG) * 2).astype(np.float32)
    dy = rng.standard_normal(N_BIG).astype(np.float32)
    xd, dyd = x.astype(np.float64), dy.astype(np.float64)
    s = 1 / (1 + np.exp(-xd))
    assert_close(pw.pointwise(P + "SIGMOID_BWD", dy, x), dyd * s * (1 - s), "HIPDNN_DATA_FLOAT")
    assert_close(pw.pointwise(P + "TANH_BWD", dy, x), dyd * (1 - np.tanh(xd) ** 2), "HIPDNN_DATA_FLOAT")
    k = slice(0, 1 << 15)
    ref = dyd[k] * np.array([_phi(v) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in xd[k].tolist()])
    assert_close(pw.pointwise(P + "GELU_BWD", dy[k], x[k]), ref, "HIPDNN_DATA_FLOAT")


def _bn_data(shape, lay, offset, seed):
    rng = np.random.default_rng(seed)
    C = shape[1]
    x = rng.standard_normal(shape) * 2 + offset + rng.uniform(-1, 1, (1, C, 1, 1))
    x32 = x.astype(np.float32)
    if lay == "nhwc":
        x32 = np.ascontiguousarray(np.moveaxis(x32, 1, -1)).transpose(0, 3, 1, 2)
    return x32, x32.astype(np.float64), rng


@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("shape,offset", [((4, 8, 160, 200), 0.0), ((2, 16, 20, 20), 30.0),
                                          ((3, 5, 1, 1), 0.0)])
def test_batchnorm_f32(shape, offset, lay):
    x, xd, rng = _bn_data(shape, lay, offset, 3)
    C = shape[1]
    scale = rng.uniform(0.5, 1.5, C).astype(np.float32)
    bias = rng.uniform(-1, 1, C).astype(np.float32)
    mean = (rng.uniform(-1, 1, C) + offset).astype(np.float32)
    var = rng.uniform(0.5, 2, C).astype(np.float32)
    c4 = lambda v: np.asarray(v, np.float64).reshape(1, C, 1, 1)  # noqa: E731
    ref = c4(scale) * (xd - c4(mean)) / np.sqrt(c4(var) + 1e-5) + c4(bias)
    y = bn.batchnorm_inference_variance(x, scale, bias, mean, var, 1e-5)
    assert y.dtype == np.float32
    assert_close(y, ref, "HIPDNN_DATA_FLOAT", factor=2, what="inference")
    out = np.empty_like(x)
    assert bn.batchnorm_inference_variance(x, scale, bias, mean, var, 1e-5, out=out) is out
    assert_close(out, ref, "HIPDNN_DATA_FLOAT", factor=2, what="inference out=")
    # training: per-channel float64 loops
    M = xd.size // C
    m = np.array([xd[:, c].sum() / M for c in range(C)])
    v = np.array([((xd[:, c] - m[c]) ** 2).sum() / M for c in range(C)])
    r = bn.batchnorm_train_fwd(x, scale, bias, 1e-3, 0.1, mean, var)
    refy = (xd - c4(m)) / np.sqrt(c4(v) + 1e-3) * c4(scale) + c4(bias)
    assert_close(r.y, refy, "HIPDNN_DATA_FLOAT", factor=2, what="train y")
    assert_close(r.mean, c4(m), "HIPDNN_DATA_FLOAT", what="mean")
    assert_close(r.inv_variance, c4(1 / np.sqrt(v + 1e-3)), "HIPDNN_DATA_FLOAT", what="inv_var")
    uv = v * M / (M - 1) if M > 1 else v
    assert_close(r.next_running_variance, c4(0.9 * var + 0.1 * uv), "HIPDNN_DATA_FLOAT", what="rv")
