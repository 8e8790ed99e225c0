"""Batchnorm kernels against per-channel loops written here and finite differences."""
import numpy as np
import pytest

from cpuref_testutil import FLOAT_TYPES, LAYOUTS, assert_close, make_tensor, quantize, roundtrip_output
from engine_plugins.cpu_reference.kernels import batchnorm as bn

SHAPES = [(3, 4, 5, 6), (2, 3, 4, 3, 5), (5, 2, 7)]


def _per_channel_stats(x):
    C = x.shape[1]
    mean = np.empty(C)
    var = np.empty(C)
    for c in range(C):
        v = x[:, c].ravel()
        mean[c] = v.sum() / v.size
        var[c] = ((v - mean[c]) ** 2).sum() / v.size
    return mean, var, x[:, 0].size


def _bc(v, nd):
    return np.asarray(v).reshape((1, -1) + (1,) * (nd - 2))


def _data(shape, t, seed):
    rng = np.random.default_rng(seed)
    C = shape[1]
    x = quantize(rng.standard_normal(shape) * 2 + rng.uniform(-1, 1, (1, C) + (1,) * (len(shape) - 2)), t)
    scale = quantize(rng.uniform(0.5, 1.5, C), t)
    bias = quantize(rng.uniform(-1, 1, C), t)
    return x, scale, bias, rng


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("si", range(len(SHAPES)))
def test_inference(si, t, lay):
    shape = SHAPES[si]
    x_ref, scale, bias, rng = _data(shape, t, si)
    C = shape[1]
    mean = quantize(rng.uniform(-1, 1, C), t)
    var = quantize(rng.uniform(0.5, 2, C), t)
    inv = 1.0 / np.sqrt(var + 1e-5)
    x, _ = make_tensor(x_ref, t, lay)
    nd = len(shape)
    ref = np.empty(shape)
    for c in range(C):
        ref[:, c] = scale[c] * (x_ref[:, c] - mean[c]) / np.sqrt(var[c] + 1e-5) + bias[c]
    # per-channel operands in hipDNN's (1, C, 1, 1) dims and in plain (C,)
    y1 = bn.batchnorm_inference_variance(x, _bc(scale, nd), _bc(bias, nd), mean, var, np.array([1e-5]))
    y2 = bn.batchnorm_inference(x, scale, bias, _bc(mean, nd), inv)
    for y in (y1, y2):
        assert_close(roundtrip_output(y, t, lay), ref, t, factor=2, what="bn inference")


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("si", range(len(SHAPES)))
def test_train_forward(si, t, lay):
    shape = SHAPES[si]
    x_ref, scale, bias, rng = _data(shape, t, 10 + si)
    C = shape[1]
    x, _ = make_tensor(x_ref, t, lay)
    rm = rng.uniform(-1, 1, C)
    rv = rng.uniform(0.5, 2, C)
    eps, mom = 1e-3, 0.1
    res = bn.batchnorm_train_fwd(x, scale, bias, eps, np.array([mom]), rm, rv)
    mean, var, M = _per_channel_stats(x_ref)
    ref_y = np.empty(shape)
    for c in range(C):
        ref_y[:, c] = (x_ref[:, c] - mean[c]) / np.sqrt(var[c] + eps) * scale[c] + bias[c]
    assert_close(roundtrip_output(res.y, t, lay), ref_y, t, factor=2, what="y")
    nd = len(shape)
    assert res.mean.shape == (1, C) + (1,) * (nd - 2)
    assert_close(roundtrip_output(res.mean, t), _bc(mean, nd), t, what="mean")
    assert_close(roundtrip_output(res.inv_variance, t), _bc(1 / np.sqrt(var + eps), nd), t, what="inv_var")
    assert_close(roundtrip_output(res.next_running_mean, t), _bc(0.9 * rm + 0.1 * mean, nd), t, what="rm")
    assert_close(roundtrip_output(res.next_running_variance, t),
                 _bc(0.9 * rv + 0.1 * var * M / (M - 1), nd), t, what="rv")
    biased = bn.batchnorm_train_fwd(x, scale, bias, eps, mom, rm, rv, unbiased_running_variance=False)
    assert_close(roundtrip_output(biased.next_running_variance, t), _bc(0.9 * rv + 0.1 * var, nd), t)
    no_running = bn.batchnorm_train_fwd(x, scale, bias, eps)
    assert no_running.next_running_mean is None and no_running.next_running_variance is None


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("si", range(len(SHAPES)))
def test_backward(si, t, lay):
    shape = SHAPES[si]
    x_ref, scale, _, rng = _data(shape, t, 20 + si)
    dy_ref = quantize(rng.standard_normal(shape), t)
    C = shape[1]
    eps = 1e-5
    mean, var, M = _per_channel_stats(x_ref)
    inv = 1 / np.sqrt(var + eps)
    x, _ = make_tensor(x_ref, t, lay)
    dy, _ = make_tensor(dy_ref, t, lay)
    res = bn.batchnorm_bwd(dy, x, scale, mean, inv)
    # textbook per-channel formulas
    dx_ref = np.empty(shape)
    ds_ref = np.empty(C)
    db_ref = np.empty(C)
    for c in range(C):
        xc = x_ref[:, c]
        g = dy_ref[:, c]
        xhat = (xc - mean[c]) * inv[c]
        db_ref[c] = g.sum()
        ds_ref[c] = (g * xhat).sum()
        dxhat = g * scale[c]
        dvar = np.sum(dxhat * (xc - mean[c])) * -0.5 * inv[c] ** 3
        dmean = np.sum(-dxhat * inv[c]) + dvar * np.mean(-2 * (xc - mean[c]))
        dx_ref[:, c] = dxhat * inv[c] + dvar * 2 * (xc - mean[c]) / M + dmean / M
    nd = len(shape)
    assert_close(roundtrip_output(res.dx, t, lay), dx_ref, t, factor=4, what="dx")
    assert_close(roundtrip_output(res.dscale, t), _bc(ds_ref, nd), t, factor=4,
                 scale=float(np.sqrt(M) * np.max(np.abs(dy_ref)) * 2), what="dscale")
    assert_close(roundtrip_output(res.dbias, t), _bc(db_ref, nd), t, factor=4,
                 scale=float(np.sqrt(M) * np.max(np.abs(dy_ref))), what="dbias")
    # recomputing the statistics from x gives the same
    res2 = bn.batchnorm_bwd(dy, x, scale, epsilon=eps)
    np.testing.assert_allclose(res2.dx, res.dx, rtol=1e-5, atol=1e-5)


def test_backward_finite_differences():
    """dx / dscale / dbias of the training forward, by central differences (float64)."""
    rng = np.random.default_rng(3)
    shape = (3, 2, 2, 3)
    x = rng.standard_normal(shape)
    scale = rng.uniform(0.5, 1.5, 2)
    bias = rng.uniform(-1, 1, 2)
    dy = rng.standard_normal(shape)
    eps = 1e-3

    def loss(xx, ss, bb):
        return np.sum(bn.batchnorm_train_fwd(xx, ss, bb, eps).y * dy)

    r = bn.batchnorm_train_fwd(x, scale, bias, eps)
    g = bn.batchnorm_bwd(dy, x, scale, r.mean, r.inv_variance)
    h = 1e-6
    fdx = np.zeros(shape)
    for i in np.ndindex(shape):
        e = np.zeros(shape)
        e[i] = h
        fdx[i] = (loss(x + e, scale, bias) - loss(x - e, scale, bias)) / (2 * h)
    np.testing.assert_allclose(g.dx, fdx, rtol=1e-5, atol=1e-7)
    for c in range(2):
        e = np.zeros(2)
        e[c] = h
        np.testing.assert_allclose(g.dscale.ravel()[c], (loss(x, scale + e, bias) - loss(x, scale - e, bias)) / (2 * h), rtol=1e-6)
        np.testing.assert_allclose(g.dbias.ravel()[c], (loss(x, scale, bias + e) - loss(x, scale, bias - e)) / (2 * h), rtol=1e-6)


def test_errors():
    x = np.zeros((2, 3, 4))
    with pytest.raises(ValueError):
        bn.batchnorm_inference(x, np.ones(2), np.ones(3), np.ones(3), np.ones(3))
    with pytest.raises(ValueError):
        bn.batchnorm_train_fwd(x, np.ones(3), np.ones(3), np.array([1e-5, 1e-5]))
    with pytest.raises(ValueError):
        bn.batchnorm_bwd(x, x, np.ones(3))
