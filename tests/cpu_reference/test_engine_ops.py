"""CPU reference engine, one operation per case, through the plugin C ABI.

All cases are collected into one batch that a single subprocess runs through the plugin's C
function table (load_python_plugin -> slot pointers -> backend trampolines); each test then
checks its outputs against a reference written here (float64 formulas on the quantised inputs,
finite differences / exact linearity for gradients - never the engine's kernels).  Shapes are
randomised with a fixed seed; activations are NCHW or NHWC.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine_testutil import (FB, TOL, CabiBatch, Tensor, conv_attrs, graph_bytes, node, pw,
                             quantize)

FLOATS = ["FLOAT", "DOUBLE", "HALF", "BFLOAT16"]
LAYS = ["nchw", "nhwc"]
CASES = {}


def case(name):
    def deco(fn):
        CASES[name] = fn
        return fn
    return deco


def close(actual, ref, t, factor=1.0, what=""):
    actual = np.asarray(actual, np.float64)
    ref = np.asarray(ref, np.float64)
    assert actual.shape == ref.shape, (what, actual.shape, ref.shape)
    scale = max(1e-3, float(np.max(np.abs(ref)))) if ref.size else 1.0
    bound = TOL[t] * factor * (np.abs(ref) + scale)
    err = np.abs(actual - ref)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{what} {t}: {int(bad.sum())}/{bad.size} off, worst err "
                           f"{float(np.nanmax(err - bound)):.3g}; actual {actual.ravel()[np.argmax(bad)]}"
                           f" ref {ref.ravel()[np.argmax(bad)]}")


def rng_for(name):
    return np.random.default_rng(sum(map(ord, name)) * 7919 + 12345)


# =========================================================================== convolution
def ref_conv_fwd(x, w, pre, post, st, dil, flip=False):
    """Direct sum over filter taps (einsum per tap and group) in float64 (int64 for integer data)."""
    N, C = x.shape[:2]
    K, Cg = w.shape[:2]
    G = C // Cg
    Kg = K // G
    nsp = x.ndim - 2
    R = w.shape[2:]
    if flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nsp]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(a, b) for a, b in zip(pre, post)])
    O = [(xp.shape[2 + i] - dil[i] * (R[i] - 1) - 1) // st[i] + 1 for i in range(nsp)]
    y = np.zeros((N, K) + tuple(O), dtype=np.int64 if x.dtype.kind in "iu" else np.float64)
    for tap in itertools.product(*[range(r) for r in R]):
        sl = tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in zip(tap, dil, st, O))
        xs = xp[(slice(None), slice(None)) + sl]
        for g in range(G):
            wt = w[(slice(g * Kg, (g + 1) * Kg), slice(None)) + tap]
            y[:, g * Kg:(g + 1) * Kg] += np.einsum("nc...,kc->nk...", xs[:, g * Cg:(g + 1) * Cg], wt)
    return y


def conv_problem(rng, nsp):
    G = int(rng.integers(1, 3))
    Cg, Kg = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    N = int(rng.integers(1, 3))
    S = [int(rng.integers(4, 7)) for _ in range(nsp)]
    R = [int(rng.integers(1, 4)) for _ in range(nsp)]
    st = [int(rng.integers(1, 3)) for _ in range(nsp)]
    dil = [int(rng.integers(1, 3)) for _ in range(nsp)]
    pre = [int(rng.integers(0, 3)) for _ in range(nsp)]
    post = [int(rng.integers(0, 2)) for _ in range(nsp)]
    for i in range(nsp):
        while S[i] + pre[i] + post[i] < dil[i] * (R[i] - 1) + 1:
            S[i] += 1
    xs = [N, G * Cg] + S
    ws = [G * Kg, Cg] + R
    O = [(S[i] + pre[i] + post[i] - dil[i] * (R[i] - 1) - 1) // st[i] + 1 for i in range(nsp)]
    return xs, ws, [N, G * Kg] + O, pre, post, st, dil


def _conv_case(kind, t, lay, nsp, mode):
    name = f"conv_{kind}_{t}_{lay}_{nsp}d_{mode}"

    @case(name)
    def make(rng):
        xs, ws, ys, pre, post, st, dil = conv_problem(rng, nsp)
        flip = mode == "CONVOLUTION"
        comp = "DOUBLE" if t == "DOUBLE" else "FLOAT"
        if kind == "fwd":
            x, w, y = Tensor(1, xs, t, lay), Tensor(2, ws, t, lay), Tensor(3, ys, t, lay).alloc()
            xv, wv = x.set(rng.standard_normal(xs)), w.set(rng.standard_normal(ws))
            k = "ConvolutionFwdAttributes"
            g = graph_bytes([x, w, y], [node(k, conv_attrs(k, 1, 2, 3, pre, post, st, dil, mode), comp)])
            return [x, w, y], g, lambda: close(y.get(), ref_conv_fwd(xv, wv, pre, post, st, dil, flip), t, 4, name)
        if kind == "bwd_data":
            dy, w, dx = Tensor(1, ys, t, lay), Tensor(2, ws, t, lay), Tensor(3, xs, t, lay).alloc()
            dyv, wv = dy.set(rng.standard_normal(ys)), w.set(rng.standard_normal(ws))
            k = "ConvolutionBwdAttributes"
            g = graph_bytes([dy, w, dx], [node(k, conv_attrs(k, 1, 2, 3, pre, post, st, dil, mode), comp)])

            def check():
                # exact linearity: dx[i] = <conv(e_i, w), dy>
                n = int(np.prod(xs))
                basis = np.eye(n).reshape([n] + xs)
                J = np.stack([ref_conv_fwd(basis[i], wv, pre, post, st, dil, flip) for i in range(n)])
                ref = np.tensordot(J, dyv, axes=dyv.ndim).reshape(xs)
                close(dx.get(), ref, t, 4, name)
            return [dy, w, dx], g, check
        x, dy, dw = Tensor(1, xs, t, lay), Tensor(2, ys, t, lay), Tensor(3, ws, t, lay).alloc()
        xv, dyv = x.set(rng.standard_normal(xs)), dy.set(rng.standard_normal(ys))
        k = "ConvolutionWrwAttributes"
        g = graph_bytes([x, dy, dw], [node(k, conv_attrs(k, 1, 2, 3, pre, post, st, dil, mode), comp)])

        def check():
            n = int(np.prod(ws))
            basis = np.eye(n).reshape([n] + ws)
            ref = np.array([np.sum(ref_conv_fwd(xv, basis[i], pre, post, st, dil, flip) * dyv)
                            for i in range(n)]).reshape(ws)
            close(dw.get(), ref, t, 4, name)
        return [x, dy, dw], g, check


for _t in FLOATS:
    for _lay in LAYS:
        _conv_case("fwd", _t, _lay, 2, "CROSS_CORRELATION")
        _conv_case("bwd_data", _t, _lay, 2, "CROSS_CORRELATION")
        _conv_case("bwd_filter", _t, _lay, 2, "CROSS_CORRELATION")
for _kind in ("fwd", "bwd_data", "bwd_filter"):
    _conv_case(_kind, "FLOAT", "nhwc", 3, "CROSS_CORRELATION")
    _conv_case(_kind, "FLOAT", "nchw", 2, "CONVOLUTION")
    _conv_case(_kind, "DOUBLE", "nchw", 3, "CONVOLUTION")


def _conv_int8_case(kind, t_out, lay, nsp, mode, comp):
    name = f"conv_{kind}_INT8_{t_out}_{lay}_{nsp}d_{mode}_{comp}"

    @case(name)
    def make(rng):
        xs, ws, ys, pre, post, st, dil = conv_problem(rng, nsp)
        flip = mode == "CONVOLUTION"
        k = {"fwd": "ConvolutionFwdAttributes", "bwd_data": "ConvolutionBwdAttributes",
             "bwd_filter": "ConvolutionWrwAttributes"}[kind]
        ins_s, out_s = {"fwd": ((xs, ws), ys), "bwd_data": ((ys, ws), xs), "bwd_filter": ((xs, ys), ws)}[kind]
        a, b = Tensor(1, ins_s[0], "INT8", lay), Tensor(2, ins_s[1], "INT8", lay)
        o = Tensor(3, out_s, t_out, lay).alloc(0)
        av = a.set(rng.integers(-128, 128, a.dims)).astype(np.int64)
        bv = b.set(rng.integers(-128, 128, b.dims)).astype(np.int64)
        g = graph_bytes([a, b, o], [node(k, conv_attrs(k, 1, 2, 3, pre, post, st, dil, mode), comp)])

        def fwd(x, w):
            return ref_conv_fwd(x, w, pre, post, st, dil, flip)      # exact int64

        def check():
            if kind == "fwd":
                ref = fwd(av, bv)
            elif kind == "bwd_data":     # exact linearity: dx[i] = <conv(e_i, w), dy>
                n = int(np.prod(xs))
                basis = np.eye(n, dtype=np.int64).reshape([n] + xs)
                ref = np.array([np.sum(fwd(basis[i], bv) * av) for i in range(n)]).reshape(xs)
            else:                        # dw[i] = <conv(x, e_i), dy>
                n = int(np.prod(ws))
                basis = np.eye(n, dtype=np.int64).reshape([n] + ws)
                ref = np.array([np.sum(fwd(av, basis[i]) * bv) for i in range(n)]).reshape(ws)
            if t_out == "INT8":
                ref = np.clip(ref, -128, 127)                        # saturate
            np.testing.assert_array_equal(o.get(), ref)
        return [a, b, o], g, check


for _kind in ("fwd", "bwd_data", "bwd_filter"):
    for _o, _lay, _nsp, _mode, _c in (("INT32", "nchw", 2, "CROSS_CORRELATION", "INT32"),
                                      ("INT32", "nhwc", 2, "CROSS_CORRELATION", "UNSET"),
                                      ("INT8", "nhwc", 2, "CROSS_CORRELATION", "INT32"),
                                      ("INT8", "nchw", 1, "CONVOLUTION", "INT32"),
                                      ("FLOAT", "nhwc", 3, "CROSS_CORRELATION", "INT32"),
                                      ("FLOAT", "nchw", 2, "CONVOLUTION", "UNSET")):
        _conv_int8_case(_kind, _o, _lay, _nsp, _mode, _c)


# =========================================================================== batchnorm
def bn_shape(rng):
    return [int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(2, 5)),
            int(rng.integers(2, 5))]


def _bn_cases(t, lay):
    pt = "FLOAT" if t in ("HALF", "BFLOAT16") else t
    comp = "DOUBLE" if t == "DOUBLE" else "FLOAT"

    @case(f"bn_inference_{t}_{lay}")
    def inf(rng):
        xs = bn_shape(rng)
        C = xs[1]
        cs = [1, C, 1, 1]
        x, y = Tensor(1, xs, t, lay), Tensor(6, xs, t, lay).alloc()
        m, iv, s, b = (Tensor(u, cs, pt) for u in (2, 3, 4, 5))
        xv = x.set(rng.standard_normal(xs) * 2 + 1)
        mv, ivv = m.set(rng.standard_normal(cs)), iv.set(rng.uniform(0.5, 2, cs))
        sv, bv = s.set(rng.standard_normal(cs)), b.set(rng.standard_normal(cs))
        g = graph_bytes([x, m, iv, s, b, y], [node("BatchnormInferenceAttributes", {
            "x_tensor_uid": 1, "mean_tensor_uid": 2, "inv_variance_tensor_uid": 3,
            "scale_tensor_uid": 4, "bias_tensor_uid": 5, "y_tensor_uid": 6}, comp)])
        return [x, m, iv, s, b, y], g, lambda: close(y.get(), (xv - mv) * ivv * sv + bv, t, 2)

    @case(f"bn_inference_variance_{t}_{lay}")
    def infv(rng):
        xs = bn_shape(rng)
        cs = [1, xs[1], 1, 1]
        x, y = Tensor(1, xs, t, lay), Tensor(6, xs, t, lay).alloc()
        m, v, s, b = (Tensor(u, cs, pt) for u in (2, 3, 4, 5))
        eps = Tensor(7, [1], "FLOAT", value=1e-3)   # by-value scalar baked from the graph
        xv = x.set(rng.standard_normal(xs))
        mv, vv = m.set(rng.standard_normal(cs)), v.set(rng.uniform(0.5, 2, cs))
        sv, bv = s.set(rng.standard_normal(cs)), b.set(rng.standard_normal(cs))
        g = graph_bytes([x, m, v, s, b, y, eps], [node("BatchnormInferenceAttributesVarianceExt", {
            "x_tensor_uid": 1, "mean_tensor_uid": 2, "variance_tensor_uid": 3,
            "scale_tensor_uid": 4, "bias_tensor_uid": 5, "y_tensor_uid": 6,
            "epsilon_tensor_uid": 7}, comp)])
        epsq = float(np.float32(1e-3))
        return [x, m, v, s, b, y, eps], g, lambda: close(
            y.get(), (xv - mv) / np.sqrt(vv + epsq) * sv + bv, t, 2)

    @case(f"bn_train_{t}_{lay}")
    def train(rng):
        xs = bn_shape(rng)
        xs[0] = max(xs[0], 2)
        C = xs[1]
        cs = [1, C, 1, 1]
        x, y = Tensor(1, xs, t, lay), Tensor(4, xs, t, lay).alloc()
        s, b = Tensor(2, cs, pt), Tensor(3, cs, pt)
        eps = Tensor(5, [1, 1, 1, 1], "FLOAT", value=1e-4)
        mom = Tensor(6, [1, 1, 1, 1], "FLOAT", value=0.125)
        rm, rv = Tensor(7, cs, pt), Tensor(8, cs, pt)
        sm, siv, nrm, nrv = (Tensor(u, cs, pt).alloc() for u in (9, 10, 11, 12))
        xv = x.set(rng.standard_normal(xs) * 3 - 1)
        sv, bv = s.set(rng.standard_normal(cs)), b.set(rng.standard_normal(cs))
        rmv, rvv = rm.set(rng.standard_normal(cs)), rv.set(rng.uniform(0.5, 2, cs))
        ts = [x, y, s, b, eps, mom, rm, rv, sm, siv, nrm, nrv]
        g = graph_bytes(ts, [node("BatchnormAttributes", {
            "x_tensor_uid": 1, "scale_tensor_uid": 2, "bias_tensor_uid": 3, "epsilon_tensor_uid": 5,
            "prev_running_mean_tensor_uid": 7, "prev_running_variance_tensor_uid": 8,
            "momentum_tensor_uid": 6, "y_tensor_uid": 4, "mean_tensor_uid": 9,
            "inv_variance_tensor_uid": 10, "next_running_mean_tensor_uid": 11,
            "next_running_variance_tensor_uid": 12}, comp)])

        def check():
            M = xv.size // C
            mu = xv.mean(axis=(0, 2, 3), keepdims=True)
            var = ((xv - mu) ** 2).mean(axis=(0, 2, 3), keepdims=True)
            e = float(np.float32(1e-4))
            inv = 1 / np.sqrt(var + e)
            close(y.get(), (xv - mu) * inv * sv + bv, t, 4, "y")
            close(sm.get(), mu, pt, 2, "mean")
            close(siv.get(), inv, pt, 2, "inv_variance")
            close(nrm.get(), 0.875 * rmv + 0.125 * mu, pt, 2, "running_mean")
            close(nrv.get(), 0.875 * rvv + 0.125 * var * M / (M - 1), pt, 2, "running_var")
        return ts, g, check

    @case(f"bn_bwd_{t}_{lay}")
    def bwd(rng):
        xs = bn_shape(rng)
        C = xs[1]
        cs = [1, C, 1, 1]
        dy, x, dx = Tensor(1, xs, t, lay), Tensor(2, xs, t, lay), Tensor(6, xs, t, lay).alloc()
        m, iv, s = Tensor(3, cs, pt), Tensor(4, cs, pt), Tensor(5, cs, pt)
        ds, db = Tensor(7, cs, pt).alloc(), Tensor(8, cs, pt).alloc()
        dyv, xv = dy.set(rng.standard_normal(xs)), x.set(rng.standard_normal(xs))
        mv = m.set(xv.mean(axis=(0, 2, 3), keepdims=True))
        ivv = iv.set(1 / np.sqrt(xv.var(axis=(0, 2, 3), keepdims=True) + 1e-5))
        sv = s.set(rng.standard_normal(cs))
        ts = [dy, x, m, iv, s, dx, ds, db]
        g = graph_bytes(ts, [node("BatchnormBackwardAttributes", {
            "dy_tensor_uid": 1, "x_tensor_uid": 2, "mean_tensor_uid": 3,
            "inv_variance_tensor_uid": 4, "scale_tensor_uid": 5, "dx_tensor_uid": 6,
            "dscale_tensor_uid": 7, "dbias_tensor_uid": 8}, comp)])

        def check():
            xhat = (xv - mv) * ivv
            ax = (0, 2, 3)
            refdb = dyv.sum(axis=ax, keepdims=True)
            refds = (dyv * xhat).sum(axis=ax, keepdims=True)
            M = xv.size // C
            # dx: gradient of sum(dy * bn_train(x)) by central differences (float64), with
            # the epsilon that makes the (quantised) saved inv_variance consistent
            eps_eff = 1 / ivv ** 2 - ((xv - mv) ** 2).mean(axis=ax, keepdims=True)

            def f(xx):
                mu = xx.mean(axis=ax, keepdims=True)
                var = ((xx - mu) ** 2).mean(axis=ax, keepdims=True)
                return np.sum(dyv * (xx - mu) / np.sqrt(var + eps_eff) * sv)
            close(db.get(), refdb, pt, 4, "dbias")
            close(ds.get(), refds, pt, 4, "dscale")
            close(dx.get(), numgrad(f, xv), ngt(t), 8, "dx")
        return ts, g, check


for _t in FLOATS:
    for _lay in LAYS:
        _bn_cases(_t, _lay)


# =========================================================================== pointwise
def _erf(a):
    return np.vectorize(math.erf)(a)


def _sig(a):
    return 1 / (1 + np.exp(-a))


K = math.sqrt(2 / math.pi)
# mode -> (arity, reference(a, b, c), params); parameters are float32 in the schema, so the
# values used here are exactly representable
PW = {
    "ABS": (1, lambda a, b, c: np.abs(a), {}),
    "ADD": (2, lambda a, b, c: a + b, {}),
    "ADD_SQUARE": (2, lambda a, b, c: a + b * b, {}),
    "BINARY_SELECT": (3, lambda a, b, c: np.where(c != 0, a, b), {}),
    "CEIL": (1, lambda a, b, c: np.ceil(a), {}),
    "CMP_EQ": (2, lambda a, b, c: (a == b) * 1.0, {}),
    "CMP_GE": (2, lambda a, b, c: (a >= b) * 1.0, {}),
    "CMP_GT": (2, lambda a, b, c: (a > b) * 1.0, {}),
    "CMP_LE": (2, lambda a, b, c: (a <= b) * 1.0, {}),
    "CMP_LT": (2, lambda a, b, c: (a < b) * 1.0, {}),
    "CMP_NEQ": (2, lambda a, b, c: (a != b) * 1.0, {}),
    "DIV": (2, lambda a, b, c: a / b, {}),
    "ELU_BWD": (2, lambda a, b, c: a * np.where(b > 0, 1, 0.75 * np.exp(b)), {"elu_alpha": 0.75}),
    "ELU_FWD": (1, lambda a, b, c: np.where(a > 0, a, 0.75 * (np.exp(a) - 1)), {"elu_alpha": 0.75}),
    "ERF": (1, lambda a, b, c: _erf(a), {}),
    "EXP": (1, lambda a, b, c: np.exp(a), {}),
    "FLOOR": (1, lambda a, b, c: np.floor(a), {}),
    "GELU_APPROX_TANH_BWD": (2, lambda a, b, c: a * (
        0.5 * (1 + np.tanh(K * (b + 0.044715 * b ** 3)))
        + 0.5 * b * (1 - np.tanh(K * (b + 0.044715 * b ** 3)) ** 2) * K * (1 + 3 * 0.044715 * b ** 2)), {}),
    "GELU_APPROX_TANH_FWD": (1, lambda a, b, c: 0.5 * a * (1 + np.tanh(K * (a + 0.044715 * a ** 3))), {}),
    "GELU_BWD": (2, lambda a, b, c: a * (0.5 * (1 + _erf(b / math.sqrt(2)))
                                         + b * np.exp(-b * b / 2) / math.sqrt(2 * math.pi)), {}),
    "GELU_FWD": (1, lambda a, b, c: 0.5 * a * (1 + _erf(a / math.sqrt(2))), {}),
    "IDENTITY": (1, lambda a, b, c: a, {}),
    "LOG": (1, lambda a, b, c: np.log(a), {}),
    "LOGICAL_AND": (2, lambda a, b, c: ((a != 0) & (b != 0)) * 1.0, {}),
    "LOGICAL_NOT": (1, lambda a, b, c: (a == 0) * 1.0, {}),
    "LOGICAL_OR": (2, lambda a, b, c: ((a != 0) | (b != 0)) * 1.0, {}),
    "MAX_OP": (2, lambda a, b, c: np.maximum(a, b), {}),
    "MIN_OP": (2, lambda a, b, c: np.minimum(a, b), {}),
    "MUL": (2, lambda a, b, c: a * b, {}),
    "NEG": (1, lambda a, b, c: -a, {}),
    "RECIPROCAL": (1, lambda a, b, c: 1 / a, {}),
    "RELU_BWD": (2, lambda a, b, c: a * np.where(b <= -0.5, 0.125, np.where(b > 1.5, 0, 1)),
                 {"relu_lower_clip": -0.5, "relu_upper_clip": 1.5, "relu_lower_clip_slope": 0.125}),
    "RELU_FWD": (1, lambda a, b, c: np.where(a <= -0.5, -0.5 + 0.125 * (a + 0.5), np.minimum(a, 1.5)),
                 {"relu_lower_clip": -0.5, "relu_upper_clip": 1.5, "relu_lower_clip_slope": 0.125}),
    "RSQRT": (1, lambda a, b, c: 1 / np.sqrt(a), {}),
    "SIGMOID_BWD": (2, lambda a, b, c: a * _sig(b) * (1 - _sig(b)), {}),
    "SIGMOID_FWD": (1, lambda a, b, c: _sig(a), {}),
    "SIN": (1, lambda a, b, c: np.sin(a), {}),
    "SOFTPLUS_BWD": (2, lambda a, b, c: a * _sig(1.5 * b), {"softplus_beta": 1.5}),
    "SOFTPLUS_FWD": (1, lambda a, b, c: np.log1p(np.exp(1.5 * a)) / 1.5, {"softplus_beta": 1.5}),
    "SQRT": (1, lambda a, b, c: np.sqrt(a), {}),
    "SUB": (2, lambda a, b, c: a - b, {}),
    "SWISH_BWD": (2, lambda a, b, c: a * (_sig(0.75 * b) + 0.75 * b * _sig(0.75 * b) * (1 - _sig(0.75 * b))),
                  {"swish_beta": 0.75}),
    "SWISH_FWD": (1, lambda a, b, c: a * _sig(0.75 * a), {"swish_beta": 0.75}),
    "TAN": (1, lambda a, b, c: np.tan(a), {}),
    "TANH_BWD": (2, lambda a, b, c: a * (1 - np.tanh(b) ** 2), {}),
    "TANH_FWD": (1, lambda a, b, c: np.tanh(a), {}),
}
POSITIVE = {"LOG", "RSQRT", "SQRT"}


def _pw_case(mode, t, lay, mixed=False):
    name = f"pw_{mode}_{t}_{lay}" + ("_mixed" if mixed else "")

    @case(name)
    def make(rng):
        arity, ref, params = PW[mode]
        shape = [int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 5)),
                 int(rng.integers(2, 5))]
        ins, vals = [], []
        for i in range(arity):
            s = list(shape)
            if i == 1:   # broadcast the second operand over N and the spatial dims
                s = [1, shape[1], 1, 1]
            it = "FLOAT" if (mixed and i == 1) else t
            tin = Tensor(i + 1, s, it, lay)
            v = rng.uniform(0.25, 3, s) if mode in POSITIVE else rng.uniform(-2, 2, s)
            if mode in ("CMP_EQ", "CMP_NEQ", "CMP_GE", "CMP_LE") or mode.startswith("LOGICAL"):
                v = np.round(v)   # make equal values / zeros likely
            if mode == "DIV" and i == 1:
                v = np.where(np.abs(v) < 0.25, 0.5, v)
            vals.append(tin.set(v))
            ins.append(tin)
        cmp = mode.startswith("CMP") or mode.startswith("LOGICAL")
        ot = "BOOLEAN" if (cmp and t == "FLOAT") else t
        out = Tensor(9, shape, ot, lay).alloc()
        comp = "DOUBLE" if t == "DOUBLE" else "FLOAT"
        g = graph_bytes(ins + [out], [pw(mode, 1, 9, in1=2 if arity > 1 else None,
                                         in2=3 if arity > 2 else None, compute=comp, **params)])
        a, b, c = (vals + [None, None])[:3]
        tol_t = "FLOAT" if ot == "BOOLEAN" else ot
        return ins + [out], g, lambda: close(out.get(), quantize(ref(a, b, c), ot), tol_t, 4, name)


for _m in PW:
    for _t in FLOATS:
        _pw_case(_m, _t, "nchw" if sum(map(ord, _m + _t)) % 2 else "nhwc")
for _m in ("ADD", "MUL", "SUB"):
    _pw_case(_m, "HALF", "nhwc", mixed=True)
    _pw_case(_m, "BFLOAT16", "nchw", mixed=True)


def _pw_int_case(mode, t):
    name = f"pw_{mode}_{t}"

    @case(name)
    def make(rng):
        arity, ref, _ = PW[mode]
        lo, hi = {"INT8": (-100, 100), "UINT8": (0, 200), "INT32": (-10 ** 9, 10 ** 9)}[t]
        shape = [2, 3, 4]
        ins, vals = [], []
        for i in range(arity):
            tin = Tensor(i + 1, shape, t)
            vals.append(tin.set(rng.integers(lo, hi, shape)))
            ins.append(tin)
        out = Tensor(9, shape, t).alloc(0)
        g = graph_bytes(ins + [out], [pw(mode, 1, 9, in1=2 if arity > 1 else None)])
        a, b = (vals + [None])[:2]
        info = np.iinfo({"INT8": np.int8, "UINT8": np.uint8, "INT32": np.int32}[t])
        return ins + [out], g, lambda: np.testing.assert_array_equal(
            out.get(), np.clip(ref(a, b, None), info.min, info.max))


for _m in ("ADD", "SUB", "MUL", "MAX_OP", "MIN_OP", "IDENTITY"):
    for _t in ("INT8", "UINT8", "INT32"):
        _pw_int_case(_m, _t)


@case("pw_GEN_INDEX_axis2")
def _gen_index(rng):
    x = Tensor(1, [2, 3, 4, 5], "FLOAT")
    x.set(rng.standard_normal(x.dims))
    y = Tensor(2, [2, 3, 4, 5], "INT32", "nhwc").alloc(0)
    g = graph_bytes([x, y], [pw("GEN_INDEX", 1, 2, axis_tensor_uid=2)])
    ref = np.broadcast_to(np.arange(4).reshape(1, 1, 4, 1), x.dims)
    return [x, y], g, lambda: np.testing.assert_array_equal(y.get(), ref)


# =========================================================================== matmul
def _mm_case(t, bcast):
    name = f"matmul_{t}_{'bcast' if bcast else 'batched'}"

    @case(name)
    def make(rng):
        B, M, Kd, N = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 9)), int(rng.integers(1, 6))
        a_s, b_s = [B, M, Kd], ([1, Kd, N] if bcast else [B, Kd, N])
        a, b = Tensor(1, a_s, t), Tensor(2, b_s, t, [0, 2, 1])   # b column-major
        c = Tensor(3, [B, M, N], t).alloc()
        av, bv = a.set(rng.standard_normal(a_s)), b.set(rng.standard_normal(b_s))
        g = graph_bytes([a, b, c], [node("MatmulAttributes", {"a_tensor_uid": 1, "b_tensor_uid": 2,
                                                               "c_tensor_uid": 3},
                                         "DOUBLE" if t == "DOUBLE" else "FLOAT")])
        ref = np.zeros((B, M, N))
        for i in range(B):
            for k in range(Kd):
                ref[i] += np.outer(av[i, :, k], bv[0 if bcast else i, k, :])
        return [a, b, c], g, lambda: close(c.get(), ref, t, 4, name)


for _t in FLOATS:
    _mm_case(_t, False)
    _mm_case(_t, True)


@case("matmul_INT8_INT32")
def _mm_int8(rng):
    a, b, c = Tensor(1, [2, 3, 40], "INT8"), Tensor(2, [2, 40, 5], "INT8"), Tensor(3, [2, 3, 5], "INT32").alloc(0)
    av, bv = a.set(rng.integers(-128, 128, a.dims)), b.set(rng.integers(-128, 128, b.dims))
    g = graph_bytes([a, b, c], [node("MatmulAttributes", {"a_tensor_uid": 1, "b_tensor_uid": 2,
                                                           "c_tensor_uid": 3}, "INT32")])
    ref = np.einsum("bmk,bkn->bmn", av.astype(np.int64), bv.astype(np.int64))
    return [a, b, c], g, lambda: np.testing.assert_array_equal(c.get(), ref)


@case("matmul_INT8_INT8")
def _mm_int8_out(rng):
    """INT8 output: the exact sum saturated to [-128, 127]."""
    a, b, c = Tensor(1, [2, 3, 40], "INT8"), Tensor(2, [2, 40, 5], "INT8"), Tensor(3, [2, 3, 5], "INT8").alloc(0)
    av, bv = a.set(rng.integers(-4, 4, a.dims)), b.set(rng.integers(-4, 4, b.dims))
    g = graph_bytes([a, b, c], [node("MatmulAttributes", {"a_tensor_uid": 1, "b_tensor_uid": 2,
                                                           "c_tensor_uid": 3}, "INT32")])
    ref = np.clip(np.einsum("bmk,bkn->bmn", av.astype(np.int64), bv.astype(np.int64)), -128, 127)
    return [a, b, c], g, lambda: np.testing.assert_array_equal(c.get(), ref)


# =========================================================================== reduction
RED = {"ADD": lambda x, ax: x.sum(ax, keepdims=True), "MUL": lambda x, ax: x.prod(ax, keepdims=True),
       "MIN_OP": lambda x, ax: x.min(ax, keepdims=True), "MAX_OP": lambda x, ax: x.max(ax, keepdims=True),
       "AMAX": lambda x, ax: np.abs(x).max(ax, keepdims=True), "AVG": lambda x, ax: x.mean(ax, keepdims=True),
       "NORM1": lambda x, ax: np.abs(x).sum(ax, keepdims=True),
       "NORM2": lambda x, ax: np.sqrt((x * x).sum(ax, keepdims=True)),
       "MUL_NO_ZEROS": lambda x, ax: np.where(x == 0, 1, x).prod(ax, keepdims=True)}


def _red_case(mode, t):
    name = f"reduction_{mode}_{t}"

    @case(name)
    def make(rng):
        xs = [int(rng.integers(1, 4)), int(rng.integers(2, 5)), int(rng.integers(1, 4)), int(rng.integers(2, 4))]
        axes = tuple(int(a) for a in rng.choice(4, size=2, replace=False))
        ys = [1 if i in axes else d for i, d in enumerate(xs)]
        x, y = Tensor(1, xs, t, "nhwc"), Tensor(2, ys, t).alloc()
        v = rng.uniform(0.5, 1.5, xs) * rng.choice([-1, 1], xs)
        if mode == "MUL_NO_ZEROS":
            v = np.where(rng.random(xs) < 0.2, 0, v)
        xv = x.set(v)
        g = graph_bytes([x, y], [node("ReductionAttributes", {"mode": FB["ReductionMode"][mode],
                                                              "in_tensor_uid": 1, "out_tensor_uid": 2},
                                      "DOUBLE" if t == "DOUBLE" else "FLOAT")])
        return [x, y], g, lambda: close(y.get(), RED[mode](xv, axes), t, 4, name)


for _m in RED:
    for _t in FLOATS:
        _red_case(_m, _t)


# =========================================================================== layernorm / rmsnorm
def numgrad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def ngt(t):
    """Tolerance type for finite-difference references (accurate to ~1e-9 only)."""
    return "FLOAT" if t == "DOUBLE" else t


def ln_ref(x, s, b, eps, ax):
    mu = x.mean(ax, keepdims=True)
    var = ((x - mu) ** 2).mean(ax, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * s + b, mu, 1 / np.sqrt(var + eps)


def rms_ref(x, s, eps, ax):
    inv = 1 / np.sqrt((x * x).mean(ax, keepdims=True) + eps)
    return x * inv * s, inv


def _norm_cases(t, lay):
    pt = "FLOAT" if t in ("HALF", "BFLOAT16") else t
    comp = "DOUBLE" if t == "DOUBLE" else "FLOAT"
    E = float(np.float32(1e-5))

    def shapes(rng):
        xs = [int(rng.integers(1, 4)), int(rng.integers(2, 5)), int(rng.integers(1, 4)), int(rng.integers(2, 4))]
        return xs, [1] + xs[1:], [xs[0], 1, 1, 1]

    @case(f"layernorm_fwd_{t}_{lay}")
    def lnf(rng):
        xs, ss, st = shapes(rng)
        x, s, b = Tensor(1, xs, t, lay), Tensor(2, ss, pt, lay), Tensor(3, ss, pt, lay)
        eps = Tensor(4, [1, 1, 1, 1], "FLOAT", value=1e-5)
        y, m, iv = Tensor(5, xs, t, lay).alloc(), Tensor(6, st, pt).alloc(), Tensor(7, st, pt).alloc()
        xv, sv, bv = x.set(rng.standard_normal(xs) + 1), s.set(rng.standard_normal(ss)), b.set(rng.standard_normal(ss))
        ts = [x, s, b, eps, y, m, iv]
        g = graph_bytes(ts, [node("LayernormAttributes", {
            "x_tensor_uid": 1, "scale_tensor_uid": 2, "bias_tensor_uid": 3, "epsilon_tensor_uid": 4,
            "y_tensor_uid": 5, "mean_tensor_uid": 6, "inv_variance_tensor_uid": 7,
            "normalized_dim_count": 3, "forward_phase": FB["NormFwdPhase"]["TRAINING"]}, comp)])

        def check():
            ry, rm, riv = ln_ref(xv, sv, bv, E, (1, 2, 3))
            close(y.get(), ry, t, 4, "y")
            close(m.get(), rm, pt, 2, "mean")
            close(iv.get(), riv, pt, 2, "inv_variance")
        return ts, g, check

    @case(f"layernorm_bwd_{t}_{lay}")
    def lnb(rng):
        xs, ss, st = shapes(rng)
        dy, x, s = Tensor(1, xs, t, lay), Tensor(2, xs, t, lay), Tensor(3, ss, pt, lay)
        m, iv = Tensor(4, st, pt), Tensor(5, st, pt)
        dx, ds, db = Tensor(6, xs, t, lay).alloc(), Tensor(7, ss, pt, lay).alloc(), Tensor(8, ss, pt, lay).alloc()
        dyv, xv, sv = dy.set(rng.standard_normal(xs)), x.set(rng.standard_normal(xs)), s.set(rng.standard_normal(ss))
        _, rm, riv = ln_ref(xv, sv, 0, E, (1, 2, 3))
        mv, ivv = m.set(rm), iv.set(riv)
        ts = [dy, x, s, m, iv, dx, ds, db]
        g = graph_bytes(ts, [node("LayernormBackwardAttributes", {
            "dy_tensor_uid": 1, "x_tensor_uid": 2, "scale_tensor_uid": 3, "mean_tensor_uid": 4,
            "inv_variance_tensor_uid": 5, "dx_tensor_uid": 6, "dscale_tensor_uid": 7,
            "dbias_tensor_uid": 8, "normalized_dim_count": 3}, comp)])

        def check():
            ax = (1, 2, 3)
            # numerical gradient of sum(dy * layernorm(x)) using the given (quantised) stats'
            # epsilon-consistent forward, in float64
            eps_eff = 1 / ivv ** 2 - ((xv - mv) ** 2).mean(ax, keepdims=True)
            f = lambda xx: np.sum(dyv * ln_ref(xx, sv, 0, eps_eff, ax)[0])  # noqa: E731
            close(dx.get(), numgrad(f, xv), ngt(t), 8, "dx")
            close(ds.get(), (dyv * (xv - mv) * ivv).sum(0, keepdims=True), pt, 4, "dscale")
            close(db.get(), dyv.sum(0, keepdims=True), pt, 4, "dbias")
        return ts, g, check

    @case(f"rmsnorm_fwd_{t}_{lay}")
    def rmf(rng):
        xs, ss, st = shapes(rng)
        x, s = Tensor(1, xs, t, lay), Tensor(2, ss, pt, lay)
        eps = Tensor(3, [1, 1, 1, 1], "FLOAT", value=1e-5)
        y, ir = Tensor(4, xs, t, lay).alloc(), Tensor(5, st, pt).alloc()
        xv, sv = x.set(rng.standard_normal(xs)), s.set(rng.standard_normal(ss))
        ts = [x, s, eps, y, ir]
        g = graph_bytes(ts, [node("RMSNormAttributes", {
            "x_tensor_uid": 1, "scale_tensor_uid": 2, "epsilon_tensor_uid": 3, "y_tensor_uid": 4,
            "inv_rms_tensor_uid": 5, "forward_phase": FB["NormFwdPhase"]["TRAINING"]}, comp)])

        def check():
            ry, rinv = rms_ref(xv, sv, E, (1, 2, 3))
            close(y.get(), ry, t, 4, "y")
            close(ir.get(), rinv, pt, 2, "inv_rms")
        return ts, g, check

    @case(f"rmsnorm_bwd_{t}_{lay}")
    def rmb(rng):
        xs, ss, st = shapes(rng)
        dy, x, s, ir = Tensor(1, xs, t, lay), Tensor(2, xs, t, lay), Tensor(3, ss, pt, lay), Tensor(4, st, pt)
        dx, ds = Tensor(5, xs, t, lay).alloc(), Tensor(6, ss, pt, lay).alloc()
        dyv, xv, sv = dy.set(rng.standard_normal(xs)), x.set(rng.standard_normal(xs)), s.set(rng.standard_normal(ss))
        irv = ir.set(rms_ref(xv, sv, E, (1, 2, 3))[1])
        ts = [dy, x, s, ir, dx, ds]
        g = graph_bytes(ts, [node("RMSNormBackwardAttributes", {
            "dy_tensor_uid": 1, "x_tensor_uid": 2, "scale_tensor_uid": 3, "inv_rms_tensor_uid": 4,
            "dx_tensor_uid": 5, "dscale_tensor_uid": 6}, comp)])

        def check():
            ax = (1, 2, 3)
            eps_eff = 1 / irv ** 2 - (xv * xv).mean(ax, keepdims=True)
            f = lambda xx: np.sum(dyv * rms_ref(xx, sv, eps_eff, ax)[0])  # noqa: E731
            close(dx.get(), numgrad(f, xv), ngt(t), 8, "dx")
            close(ds.get(), (dyv * xv * irv).sum(0, keepdims=True), pt, 4, "dscale")
        return ts, g, check


for _t in FLOATS:
    for _lay in LAYS:
        _norm_cases(_t, _lay)


# =========================================================================== the batch
@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    b = CabiBatch(tmp_path_factory.mktemp("cpuref_ops"))
    checks = {}
    for name, make in CASES.items():
        tensors, g, check = make(rng_for(name))
        checks[name] = (b.add(g, tensors), check)
    results = b.run(timeout=300)
    return {n: (results[i], chk) for n, (i, chk) in checks.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(batch, name):
    res, check = batch[name]
    assert res["applicable"] == [res["engine_id"]], res
    assert res["workspace"] == 0 and res["context_status"] == 0, res
    assert res["execute_status"] == 0, res["execute_error"]
    check()


def test_plugin_identity(batch):
    res = next(iter(batch.values()))[0]
    from hipdnn_cabi.plugin_sdk import engine_id_of
    assert res["name"] == "hipdnn_cabi_cpu_reference"
    assert res["api_version"] == "1.3.0"
    assert res["engine_name"] == "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
    assert res["engine_id"] == engine_id_of("HIPDNN_CABI_CPU_REFERENCE_ENGINE")
