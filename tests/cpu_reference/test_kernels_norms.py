"""Layernorm / RMSnorm against row-wise formulas and finite differences."""
import numpy as np
import pytest

from cpuref_testutil import FLOAT_TYPES, LAYOUTS, assert_close, make_tensor, quantize, roundtrip_output
from engine_plugins.cpu_reference.kernels import norms

# (x shape, normalized_dim_count)
CASES = [((4, 3, 5, 2), 3), ((2, 6, 8), 1), ((3, 4, 3, 2, 2), 2)]


def _rows(x, k):
    return x.reshape(int(np.prod(x.shape[:x.ndim - k])), -1)


def _param_shape(shape, k):
    return (1,) * (len(shape) - k) + tuple(shape[len(shape) - k:])


def _data(shape, k, t, seed):
    rng = np.random.default_rng(seed)
    x = quantize(rng.standard_normal(shape) * 1.5 + 0.3, t)
    scale = quantize(rng.uniform(0.5, 1.5, _param_shape(shape, k)), t)
    bias = quantize(rng.uniform(-1, 1, _param_shape(shape, k)), t)
    dy = quantize(rng.standard_normal(shape), t)
    return x, scale, bias, dy


def ref_layernorm(x, scale, bias, eps, k):
    rows = _rows(x, k)
    y = np.empty_like(rows)
    mu = np.empty(rows.shape[0])
    inv = np.empty(rows.shape[0])
    s = scale.ravel()
    b = bias.ravel()
    for i, r in enumerate(rows):
        mu[i] = sum(r) / len(r)
        var = sum((e - mu[i]) ** 2 for e in r) / len(r)
        inv[i] = 1 / np.sqrt(var + eps)
        y[i] = (r - mu[i]) * inv[i] * s + b
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    return y.reshape(x.shape), mu.reshape(stat_shape), inv.reshape(stat_shape)


def ref_layernorm_bwd(dy, x, scale, eps, k):
    rows, drows = _rows(x, k), _rows(dy, k)
    s = scale.ravel()
    n = rows.shape[1]
    dx = np.empty_like(rows)
    ds = np.zeros(n)
    db = np.zeros(n)
    for i, (r, g) in enumerate(zip(rows, drows)):
        mu = r.mean()
        inv = 1 / np.sqrt(((r - mu) ** 2).mean() + eps)
        xhat = (r - mu) * inv
        ds += g * xhat
        db += g
        gx = g * s
        dx[i] = (n * gx - gx.sum() - xhat * np.dot(gx, xhat)) * inv / n
    return dx.reshape(x.shape), ds.reshape(scale.shape), db.reshape(scale.shape)


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("ci", range(len(CASES)))
def test_layernorm_forward(ci, t, lay):
    shape, k = CASES[ci]
    x_ref, s_ref, b_ref, _ = _data(shape, k, t, ci)
    x, _ = make_tensor(x_ref, t, lay)
    eps = 1e-5
    y_ref, mu_ref, inv_ref = ref_layernorm(x_ref, s_ref, b_ref, eps, k)
    for count in (k, None):  # explicit count, or inferred from scale's dims
        res = norms.layernorm_fwd(x, s_ref, b_ref, np.array([eps]), normalized_dim_count=count)
        assert_close(roundtrip_output(res.y, t, lay), y_ref, t, factor=2, what="y")
        assert_close(roundtrip_output(res.mean, t), mu_ref, t, scale=1.0, what="mean")
        assert_close(roundtrip_output(res.inv_variance, t), inv_ref, t, what="inv_var")


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("ci", range(len(CASES)))
def test_layernorm_backward(ci, t, lay):
    shape, k = CASES[ci]
    x_ref, s_ref, _, dy_ref = _data(shape, k, t, 10 + ci)
    eps = 1e-5
    x, _ = make_tensor(x_ref, t, lay)
    dy, _ = make_tensor(dy_ref, t, lay)
    _, mu, inv = ref_layernorm(x_ref, s_ref, s_ref, eps, k)
    dx_ref, ds_ref, db_ref = ref_layernorm_bwd(dy_ref, x_ref, s_ref, eps, k)
    nrows = _rows(x_ref, k).shape[0]
    for kwargs in ({"mean": mu, "inv_variance": inv}, {"epsilon": eps, "normalized_dim_count": k}):
        res = norms.layernorm_bwd(dy, x, s_ref, **kwargs)
        assert_close(roundtrip_output(res.dx, t, lay), dx_ref, t, factor=4, what="dx")
        assert res.dscale.shape == s_ref.shape and res.dbias.shape == s_ref.shape
        sc = float(np.sqrt(nrows) * 2)
        assert_close(roundtrip_output(res.dscale, t), ds_ref, t, factor=4, scale=sc, what="dscale")
        assert_close(roundtrip_output(res.dbias, t), db_ref, t, factor=4, scale=sc, what="dbias")


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("ci", range(len(CASES)))
def test_rmsnorm(ci, t, lay):
    shape, k = CASES[ci]
    x_ref, s_ref, b_ref, dy_ref = _data(shape, k, t, 20 + ci)
    eps = 1e-6
    x, _ = make_tensor(x_ref, t, lay)
    dy, _ = make_tensor(dy_ref, t, lay)
    rows, drows = _rows(x_ref, k), _rows(dy_ref, k)
    n = rows.shape[1]
    s = s_ref.ravel()
    inv = np.array([1 / np.sqrt(np.dot(r, r) / n + eps) for r in rows])
    y_ref = (rows * inv[:, None] * s + b_ref.ravel()).reshape(shape)
    stat_shape = shape[:len(shape) - k] + (1,) * k
    fwd = norms.rmsnorm_fwd(x, s_ref, eps, bias=b_ref)
    assert_close(roundtrip_output(fwd.y, t, lay), y_ref, t, factor=2, what="rms y")
    assert_close(roundtrip_output(fwd.inv_rms, t), inv.reshape(stat_shape), t, what="inv_rms")
    nobias = norms.rmsnorm_fwd(x, s_ref, eps, normalized_dim_count=k)
    assert_close(roundtrip_output(nobias.y, t, lay), y_ref - b_ref, t, factor=2, what="rms y nobias")
    # backward: d/dx of sum(dy * x * inv(x) * s)
    dx_ref = np.empty_like(rows)
    for i, (r, g) in enumerate(zip(rows, drows)):
        gs = g * s
        dx_ref[i] = inv[i] * gs - r * inv[i] ** 3 * np.dot(gs, r) / n
    ds_ref = (drows * rows * inv[:, None]).sum(0).reshape(s_ref.shape)
    db_ref = drows.sum(0).reshape(s_ref.shape)
    inv_in = quantize(inv.reshape(stat_shape), t)
    bwd = norms.rmsnorm_bwd(dy, x, s_ref, inv_in)
    fac = 4 if t in ("HIPDNN_DATA_FLOAT", "HIPDNN_DATA_DOUBLE") else 8  # inv_rms was rounded to t
    assert_close(roundtrip_output(bwd.dx, t, lay), dx_ref.reshape(shape), t, factor=fac, what="rms dx")
    sc = float(np.sqrt(rows.shape[0]) * 2)
    assert_close(roundtrip_output(bwd.dscale, t), ds_ref, t, factor=fac, scale=sc, what="rms dscale")
    assert_close(roundtrip_output(bwd.dbias, t), db_ref, t, factor=fac, scale=sc, what="rms dbias")


def test_norm_backward_finite_differences():
    rng = np.random.default_rng(9)
    shape, k = (2, 3, 4), 2
    x = rng.standard_normal(shape)
    s = rng.uniform(0.5, 1.5, (1, 3, 4))
    b = rng.uniform(-1, 1, (1, 3, 4))
    dy = rng.standard_normal(shape)
    eps = 1e-3
    h = 1e-6

    def fd(f, a):
        out = np.zeros(a.shape)
        for i in np.ndindex(a.shape):
            e = np.zeros(a.shape)
            e[i] = h
            out[i] = (f(a + e) - f(a - e)) / (2 * h)
        return out

    ln = lambda xx, ss, bb: np.sum(norms.layernorm_fwd(xx, ss, bb, eps, k).y * dy)
    g = norms.layernorm_bwd(dy, x, s, epsilon=eps, normalized_dim_count=k)
    np.testing.assert_allclose(g.dx, fd(lambda a: ln(a, s, b), x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g.dscale, fd(lambda a: ln(x, a, b), s), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g.dbias, fd(lambda a: ln(x, s, a), b), rtol=1e-5, atol=1e-7)
    rms = lambda xx, ss, bb: np.sum(norms.rmsnorm_fwd(xx, ss, eps, bias=bb).y * dy)
    r = norms.rmsnorm_fwd(x, s, eps, bias=b)
    g = norms.rmsnorm_bwd(dy, x, s, r.inv_rms)
    np.testing.assert_allclose(g.dx, fd(lambda a: rms(a, s, b), x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g.dscale, fd(lambda a: rms(x, a, b), s), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g.dbias, fd(lambda a: rms(x, s, a), b), rtol=1e-5, atol=1e-7)


def test_normalized_axes_rules():
    assert norms.normalized_axes(4, 3) == (1, 2, 3)
    assert norms.normalized_axes(4, None, scale_shape=(1, 1, 5, 6)) == (2, 3)
    assert norms.normalized_axes(4, 0, scale_shape=(1, 3, 5, 6), stats_shape=(2, 3, 1, 1)) == (2, 3)
    assert norms.normalized_axes(3) == (1, 2)
    with pytest.raises(ValueError):
        norms.normalized_axes(2, 3)
    # scale given with only the normalised dims is laid over them
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    a = norms.layernorm_fwd(x, np.ones((3, 4)), np.zeros((3, 4)), 1e-5, normalized_dim_count=2)
    b = norms.layernorm_fwd(x, np.ones((1, 3, 4)), np.zeros((1, 3, 4)), 1e-5, normalized_dim_count=2)
    np.testing.assert_array_equal(a.y, b.y)
