"""Mixed-precision batchnorm graphs as frameworks (and the hipDNN C++ frontend)
build them: 16-bit data with float32 parameters / statistics, for all four batchnorm kinds.

Training: x, y, mean, inv_variance and next running stats HALF/BFLOAT16; scale, bias, previous
running stats, epsilon and momentum FLOAT.  Backward: dy, x, dx, dscale, dbias 16-bit; scale, mean,
inv_variance FLOAT.  Inference (both kinds): 16-bit x/y with FLOAT statistics and affine, and
16-bit statistics mixed with FLOAT affine.  References are float64 formulas on the quantised
inputs; every graph must be applicable on the CPU reference engine."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine_testutil import Tensor, applicable, graph_bytes, node, quantize, run_inprocess

XS, CS = [2, 3, 4, 4], [1, 3, 1, 1]
TOL = {"HALF": 4e-3, "BFLOAT16": 3e-2}
EPS, MOM = 1e-5, 0.1


def _close(got, ref, tol):
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))


def _stats(xv):
    mean = xv.mean(axis=(0, 2, 3), keepdims=True)
    var = xv.var(axis=(0, 2, 3), keepdims=True)
    return mean, var


@pytest.mark.parametrize("t", ["HALF", "BFLOAT16"])
def test_training_forward_frontend_shape(t):
    rng = np.random.default_rng(1)
    x, y = Tensor(1, XS, t), Tensor(2, XS, t).alloc()
    sc, bi = Tensor(3, CS, "FLOAT"), Tensor(4, CS, "FLOAT")
    eps, mom = Tensor(5, [1], "FLOAT", value=EPS), Tensor(6, [1], "FLOAT", value=MOM)
    prm, prv = Tensor(7, CS, "FLOAT"), Tensor(8, CS, "FLOAT")
    mean, inv = Tensor(9, CS, t).alloc(), Tensor(10, CS, t).alloc()
    nrm, nrv = Tensor(11, CS, t).alloc(), Tensor(12, CS, t).alloc()
    xv = x.set(rng.standard_normal(XS))
    sv, bv = sc.set(rng.uniform(0.5, 1.5, CS)), bi.set(rng.standard_normal(CS))
    pmv, pvv = prm.set(rng.standard_normal(CS)), prv.set(rng.uniform(0.5, 2, CS))
    ts = [x, y, sc, bi, eps, mom, prm, prv, mean, inv, nrm, nrv]
    g = graph_bytes(ts, [node("BatchnormAttributes", {
        "x_tensor_uid": 1, "scale_tensor_uid": 3, "bias_tensor_uid": 4, "epsilon_tensor_uid": 5,
        "prev_running_mean_tensor_uid": 7, "prev_running_variance_tensor_uid": 8,
        "momentum_tensor_uid": 6, "y_tensor_uid": 2, "mean_tensor_uid": 9,
        "inv_variance_tensor_uid": 10, "next_running_mean_tensor_uid": 11,
        "next_running_variance_tensor_uid": 12})])
    assert applicable(g)
    run_inprocess(g, ts)
    m, v = _stats(xv)
    n = xv.size // xv.shape[1]
    iv = 1.0 / np.sqrt(v + EPS)
    _close(y.get(), quantize((xv - m) * iv * sv + bv, t), TOL[t])
    _close(mean.get(), quantize(m, t), TOL[t])
    _close(inv.get(), quantize(iv, t), TOL[t])
    _close(nrm.get(), quantize((1 - MOM) * pmv + MOM * m, t), TOL[t])
    _close(nrv.get(), quantize((1 - MOM) * pvv + MOM * v * n / (n - 1), t), TOL[t])


@pytest.mark.parametrize("t", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("stat_t", ["FLOAT", "16"])
def test_backward(t, stat_t):
    st = t if stat_t == "16" else "FLOAT"
    rng = np.random.default_rng(2)
    dy, x, dx = Tensor(1, XS, t), Tensor(2, XS, t), Tensor(3, XS, t).alloc()
    sc, mean, inv = Tensor(4, CS, "FLOAT"), Tensor(5, CS, st), Tensor(6, CS, st)
    dsc, dbi = Tensor(7, CS, t).alloc(), Tensor(8, CS, t).alloc()
    dyv, xv = dy.set(rng.standard_normal(XS)), x.set(rng.standard_normal(XS))
    sv = sc.set(rng.uniform(0.5, 1.5, CS))
    m0, v0 = _stats(xv)
    mv, ivv = mean.set(m0), inv.set(1.0 / np.sqrt(v0 + EPS))
    ts = [dy, x, dx, sc, mean, inv, dsc, dbi]
    g = graph_bytes(ts, [node("BatchnormBackwardAttributes", {
        "dy_tensor_uid": 1, "x_tensor_uid": 2, "mean_tensor_uid": 5, "inv_variance_tensor_uid": 6,
        "scale_tensor_uid": 4, "dx_tensor_uid": 3, "dscale_tensor_uid": 7, "dbias_tensor_uid": 8})])
    assert applicable(g)
    run_inprocess(g, ts)
    xh = (xv - mv) * ivv
    n = xv.size // xv.shape[1]
    dbias = dyv.sum(axis=(0, 2, 3), keepdims=True)
    dscale = (dyv * xh).sum(axis=(0, 2, 3), keepdims=True)
    dxr = sv * ivv / n * (n * dyv - dbias - xh * dscale)
    _close(dbi.get(), quantize(dbias, t), TOL[t])
    _close(dsc.get(), quantize(dscale, t), TOL[t])
    _close(dx.get(), quantize(dxr, t), 4 * TOL[t])


# inference: which of (mean, inv_variance|variance, scale, bias) are 16-bit (the rest FLOAT)
MIXES = [(), ("mean", "var"), ("scale",), ("mean", "var", "bias")]


@pytest.mark.parametrize("t", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("mix", MIXES, ids=["all-float", "stats16", "scale16", "stats-bias16"])
@pytest.mark.parametrize("kind", ["inv_variance", "variance"])
def test_inference(t, mix, kind):
    rng = np.random.default_rng(3)
    ty = lambda role: t if role in mix else "FLOAT"  # noqa: E731
    x, y = Tensor(1, XS, t), Tensor(6, XS, t).alloc()
    m, v, s, b = Tensor(2, CS, ty("mean")), Tensor(3, CS, ty("var")), Tensor(4, CS, ty("scale")), \
        Tensor(5, CS, ty("bias"))
    xv = x.set(rng.standard_normal(XS))
    mv, sv, bv = m.set(rng.standard_normal(CS)), s.set(rng.uniform(0.5, 1.5, CS)), \
        b.set(rng.standard_normal(CS))
    vv = v.set(rng.uniform(0.5, 2, CS))
    ts = [x, m, v, s, b, y]
    if kind == "variance":
        e = Tensor(7, [1], "FLOAT", value=EPS)
        ts.append(e)
        g = graph_bytes(ts, [node("BatchnormInferenceAttributesVarianceExt", {
            "x_tensor_uid": 1, "mean_tensor_uid": 2, "variance_tensor_uid": 3, "scale_tensor_uid": 4,
            "bias_tensor_uid": 5, "y_tensor_uid": 6, "epsilon_tensor_uid": 7})])
        ref = (xv - mv) / np.sqrt(vv + EPS) * sv + bv
    else:
        g = graph_bytes(ts, [node("BatchnormInferenceAttributes", {
            "x_tensor_uid": 1, "mean_tensor_uid": 2, "inv_variance_tensor_uid": 3,
            "scale_tensor_uid": 4, "bias_tensor_uid": 5, "y_tensor_uid": 6})])
        ref = (xv - mv) * vv * sv + bv
    assert applicable(g)
    run_inprocess(g, ts)
    _close(y.get(), quantize(ref, t), TOL[t])


def test_mixed_with_a_third_type_is_declined():
    """Parameters must each be the data type or FLOAT: a DOUBLE among HALF/FLOAT is not a framework
    graph (declined with a reason, not mis-computed)."""
    x, y = Tensor(1, XS, "HALF"), Tensor(6, XS, "HALF").alloc()
    m, v, s, b = Tensor(2, CS, "HALF"), Tensor(3, CS, "DOUBLE"), Tensor(4, CS, "FLOAT"), \
        Tensor(5, CS, "FLOAT")
    g = graph_bytes([x, m, v, s, b, y], [node("BatchnormInferenceAttributes", {
        "x_tensor_uid": 1, "mean_tensor_uid": 2, "inv_variance_tensor_uid": 3,
        "scale_tensor_uid": 4, "bias_tensor_uid": 5, "y_tensor_uid": 6})])
    assert not applicable(g)
