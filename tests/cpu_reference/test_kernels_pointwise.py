"""Pointwise kernels against per-element float64 formulas written here (math module)."""
import json
import math
import os
import zlib

import numpy as np
import pytest

from cpuref_testutil import FLOAT_TYPES, assert_close, make_tensor, quantize, roundtrip_output
from engine_plugins.cpu_reference.kernels import pointwise as pw

ABI = "/work/shared/abi/hipdnn_abi.json"
P = "HIPDNN_POINTWISE_"


def _sig(v):
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


def _phi_cdf(v):
    return 0.5 * (1.0 + math.erf(v / math.sqrt(2.0)))


K = math.sqrt(2.0 / math.pi)

# name -> (reference per-element function, input domain(s))
UNARY = {
    "ABS": (abs, (-4, 4)),
    "CEIL": (math.ceil, (-4, 4)),
    "FLOOR": (math.floor, (-4, 4)),
    "EXP": (math.exp, (-5, 5)),
    "LOG": (math.log, (0.05, 10)),
    "NEG": (lambda v: -v, (-4, 4)),
    "RECIPROCAL": (lambda v: 1.0 / v, (0.2, 5)),
    "RSQRT": (lambda v: 1.0 / math.sqrt(v), (0.05, 10)),
    "SIN": (math.sin, (-4, 4)),
    "TAN": (math.tan, (-1.2, 1.2)),
    "SQRT": (math.sqrt, (0.0, 10)),
    "ERF": (math.erf, (-3.5, 3.5)),
    "IDENTITY": (lambda v: v, (-4, 4)),
    "TANH_FWD": (math.tanh, (-4, 4)),
    "SIGMOID_FWD": (_sig, (-8, 8)),
    "ELU_FWD": (lambda v: v if v > 0 else math.expm1(v), (-4, 4)),
    "GELU_FWD": (lambda v: v * _phi_cdf(v), (-5, 5)),
    "GELU_APPROX_TANH_FWD": (lambda v: 0.5 * v * (1 + math.tanh(K * (v + 0.044715 * v ** 3))), (-5, 5)),
    "SOFTPLUS_FWD": (lambda v: math.log1p(math.exp(v)) if v < 30 else v, (-10, 10)),
    "SWISH_FWD": (lambda v: v * _sig(v), (-8, 8)),
    "RELU_FWD": (lambda v: max(v, 0.0), (-4, 4)),
}

BINARY = {
    "ADD": lambda a, b: a + b,
    "SUB": lambda a, b: a - b,
    "MUL": lambda a, b: a * b,
    "DIV": lambda a, b: a / b,
    "ADD_SQUARE": lambda a, b: a + b * b,
    "MAX": max,
    "MIN": min,
}

# derivative of the forward function, per element
DERIV = {
    "TANH_BWD": lambda v: 1 - math.tanh(v) ** 2,
    "SIGMOID_BWD": lambda v: _sig(v) * (1 - _sig(v)),
    "ELU_BWD": lambda v: 1.0 if v > 0 else math.exp(v),
    "GELU_BWD": lambda v: _phi_cdf(v) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi),
    "GELU_APPROX_TANH_BWD": lambda v: (
        0.5 * (1 + math.tanh(K * (v + 0.044715 * v ** 3)))
        + 0.5 * v * (1 - math.tanh(K * (v + 0.044715 * v ** 3)) ** 2) * K * (1 + 3 * 0.044715 * v * v)),
    "SOFTPLUS_BWD": _sig,
    "SWISH_BWD": lambda v: _sig(v) * (1 + v * (1 - _sig(v))),
    "RELU_BWD": lambda v: 1.0 if v > 0 else 0.0,
}
FWD_OF = {"TANH_BWD": "TANH_FWD", "SIGMOID_BWD": "SIGMOID_FWD", "ELU_BWD": "ELU_FWD",
          "GELU_BWD": "GELU_FWD", "GELU_APPROX_TANH_BWD": "GELU_APPROX_TANH_FWD",
          "SOFTPLUS_BWD": "SOFTPLUS_FWD", "SWISH_BWD": "SWISH_FWD", "RELU_BWD": "RELU_FWD"}

CMP = {"CMP_EQ": lambda a, b: a == b, "CMP_NEQ": lambda a, b: a != b, "CMP_GT": lambda a, b: a > b,
       "CMP_GE": lambda a, b: a >= b, "CMP_LT": lambda a, b: a < b, "CMP_LE": lambda a, b: a <= b}

SHAPE = (2, 3, 4, 5)


def _elementwise(f, *arrays):
    arrays = np.broadcast_arrays(*[np.asarray(a, np.float64) for a in arrays])
    out = np.array([f(*vals) for vals in zip(*(a.ravel().tolist() for a in arrays))], dtype=np.float64)
    return out.reshape(arrays[0].shape)


def _rand(seed, shape, lo, hi, t):
    rng = np.random.default_rng(seed)
    return quantize(rng.uniform(lo, hi, shape), t)


def test_all_modes_covered_and_match_abi():
    assert len(pw.POINTWISE_MODES) == 47
    if os.path.exists(ABI):
        names = set(json.load(open(ABI))["enums"]["hipdnnPointwiseMode_t"]["values"])
        assert names == set(pw.POINTWISE_MODES)
    covered = set(UNARY) | set(BINARY) | set(DERIV) | set(CMP) | {
        "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "BINARY_SELECT", "GEN_INDEX"}
    assert {P + c for c in covered} == set(pw.POINTWISE_MODES)


def test_mode_name_aliases():
    assert pw.canonical_mode("HIPDNN_POINTWISE_MODE_ADD") == P + "ADD"
    assert pw.canonical_mode("MAX_OP") == P + "MAX"
    assert pw.canonical_mode("min_op") == P + "MIN"

    class E:
        name = "HIPDNN_POINTWISE_RELU_FWD"
    assert pw.canonical_mode(E()) == P + "RELU_FWD"
    with pytest.raises(KeyError):
        pw.canonical_mode("HIPDNN_POINTWISE_POW")


@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("mode", sorted(UNARY))
def test_unary(mode, t):
    f, (lo, hi) = UNARY[mode]
    lay = "nhwc" if zlib.crc32(mode.encode()) % 2 else "nchw"
    ref_in = _rand(zlib.crc32(mode.encode()) % 1000, SHAPE, lo, hi, t)
    x, _ = make_tensor(ref_in, t, lay)
    out = pw.pointwise(P + mode, x)
    assert out.shape == SHAPE
    got = roundtrip_output(out, t, lay)
    assert_close(got, _elementwise(f, ref_in), t, what=mode)


@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("mode", sorted(BINARY))
def test_binary_broadcast(mode, t):
    a_ref = _rand(1, SHAPE, -3, 3, t)
    b_ref = _rand(2, (1, 3, 1, 5), 0.5, 3, t) * np.where(_rand(3, (1, 3, 1, 5), -1, 1, t) < 0, -1, 1)
    a, _ = make_tensor(a_ref, t, "nhwc")
    b, _ = make_tensor(b_ref, t, "nchw")
    out = pw.pointwise(P + mode, a, b)
    got = roundtrip_output(out, t, "nhwc")
    assert_close(got, _elementwise(BINARY[mode], a_ref, b_ref), t, what=mode)


@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("mode", sorted(DERIV))
def test_backward(mode, t):
    x_ref = _rand(4, SHAPE, -4, 4, t)
    dy_ref = _rand(5, SHAPE, -2, 2, t)
    x, _ = make_tensor(x_ref, t, "nhwc")
    dy, _ = make_tensor(dy_ref, t, "nchw")
    out = pw.pointwise(P + mode, dy, x)
    got = roundtrip_output(out, t, "nchw")
    ref = dy_ref * _elementwise(DERIV[mode], x_ref)
    assert_close(got, ref, t, what=mode)


@pytest.mark.parametrize("mode", sorted(DERIV))
def test_backward_is_derivative_of_forward(mode):
    """Central finite differences of the FWD kernel (float64) match the BWD kernel."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, 400)
    x = x[np.abs(x) > 1e-3]  # stay off the ReLU / ELU kink
    params = {"swish_beta": 1.3} if "SWISH" in mode else {"softplus_beta": 0.7} if "SOFTPLUS" in mode \
        else {"elu_alpha": 0.6} if "ELU" in mode else {}
    if mode == "RELU_BWD":
        params = {"relu_lower_clip": -0.5, "relu_upper_clip": 2.0, "relu_lower_clip_slope": 0.1}
        x = x[(np.abs(x + 0.5) > 1e-3) & (np.abs(x - 2.0) > 1e-3)]
    h = 1e-6
    fwd = P + FWD_OF[mode]
    fd = (pw.pointwise(fwd, x + h, **params) - pw.pointwise(fwd, x - h, **params)) / (2 * h)
    dy = rng.uniform(-2, 2, x.shape)
    got = pw.pointwise(P + mode, dy, x, **params)
    np.testing.assert_allclose(got, dy * fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("mode", sorted(CMP))
def test_compare(mode, t):
    a_ref = quantize(np.random.default_rng(8).integers(-2, 3, SHAPE) * 0.5, t)
    b_ref = quantize(np.random.default_rng(9).integers(-2, 3, (1, 3, 4, 1)) * 0.5, t)
    a, _ = make_tensor(a_ref, t, "nhwc")
    b, _ = make_tensor(b_ref, t, "nchw")
    out = pw.pointwise(P + mode, a, b)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, CMP[mode](a_ref, b_ref))


def test_logical_select_gen_index():
    a = np.array([[0.0, 1.0, -2.5, 0.0]], np.float32)
    b = np.array([[0.0], [3.0]], np.float32)
    np.testing.assert_array_equal(pw.pointwise(P + "LOGICAL_AND", a, b),
                                  [[False] * 4, [False, True, True, False]])
    np.testing.assert_array_equal(pw.pointwise(P + "LOGICAL_OR", a, b),
                                  [[False, True, True, False], [True] * 4])
    np.testing.assert_array_equal(pw.pointwise(P + "LOGICAL_NOT", a), [[True, False, False, True]])
    mask = np.array([True, False, True, False])
    x0 = np.arange(4, dtype=np.float16)
    x1 = -np.arange(4, dtype=np.float16)[None, :] * np.ones((2, 1), np.float16)
    sel = pw.pointwise(P + "BINARY_SELECT", x0, x1, mask)
    np.testing.assert_array_equal(sel, [[0, -1, 2, -3]] * 2)
    assert sel.dtype == np.float32
    x = np.zeros((2, 3, 4))
    for axis in range(-3, 3):
        gi = pw.pointwise(P + "GEN_INDEX", x, axis=axis)
        assert gi.dtype == np.int32 and gi.shape == x.shape
        np.testing.assert_array_equal(gi, np.indices(x.shape)[axis])
    with pytest.raises(ValueError):
        pw.pointwise(P + "GEN_INDEX", x)
    with pytest.raises(ValueError):
        pw.pointwise(P + "ADD", x)


@pytest.mark.parametrize("t", FLOAT_TYPES)
def test_relu_parameters(t):
    x_ref = _rand(10, SHAPE, -4, 4, t)
    x, _ = make_tensor(x_ref, t, "nhwc")
    lo, hi, sl = -1.0, 2.5, 0.125

    def relu(v):
        if v <= lo:
            return lo + sl * (v - lo)
        return hi if v >= hi else v

    out = pw.pointwise(P + "RELU_FWD", x, relu_lower_clip=lo, relu_upper_clip=hi, relu_lower_clip_slope=sl)
    assert_close(roundtrip_output(out, t), _elementwise(relu, x_ref), t, factor=2, what="relu")
    dy_ref = _rand(11, SHAPE, -2, 2, t)
    dy, _ = make_tensor(dy_ref, t)
    g = pw.pointwise(P + "RELU_BWD", dy, x, relu_lower_clip=lo, relu_upper_clip=hi, relu_lower_clip_slope=sl)
    d = _elementwise(lambda v: sl if v <= lo else (0.0 if v > hi else 1.0), x_ref)
    assert_close(roundtrip_output(g, t), dy_ref * d, t, what="relu_bwd")
    # default upper clip is the compute type's max: inf clamps to it
    big = pw.pointwise(P + "RELU_FWD", np.array([np.inf, -np.inf, 5.0], np.float32))
    assert big[0] == np.finfo(np.float32).max and big[1] == 0 and big[2] == 5
    z = pw.pointwise(P + "RELU_FWD", np.array([-0.0, np.nan], np.float32))
    assert z[0] == 0 and not np.signbit(z[0]) and np.isnan(z[1])
    # lower clip above upper clip: the lower test wins, as in hipDNN's reference
    inv = pw.pointwise(P + "RELU_FWD", np.array([-3.0, 0.5, 5.0]), relu_lower_clip=1.0, relu_upper_clip=0.0)
    np.testing.assert_array_equal(inv, [1.0, 1.0, 0.0])


@pytest.mark.parametrize("t", FLOAT_TYPES)
def test_activation_parameters(t):
    x_ref = _rand(12, SHAPE, -4, 4, t)
    x, _ = make_tensor(x_ref, t)
    cases = {
        "ELU_FWD": ({"elu_alpha": 0.3}, lambda v: v if v > 0 else 0.3 * math.expm1(v)),
        "SWISH_FWD": ({"swish_beta": 1.7}, lambda v: v * _sig(1.7 * v)),
        "SOFTPLUS_FWD": ({"softplus_beta": 2.0}, lambda v: math.log1p(math.exp(2 * v)) / 2),
    }
    for mode, (params, f) in cases.items():
        out = pw.pointwise(P + mode, x, **params)
        assert_close(roundtrip_output(out, t), _elementwise(f, x_ref), t, what=mode)
    dy_ref = _rand(13, SHAPE, -2, 2, t)
    dy, _ = make_tensor(dy_ref, t)
    bwd = {
        "ELU_BWD": ({"elu_alpha": 0.3}, lambda v: 1.0 if v > 0 else 0.3 * math.exp(v)),
        "SWISH_BWD": ({"swish_beta": 1.7}, lambda v: _sig(1.7 * v) * (1 + 1.7 * v * (1 - _sig(1.7 * v)))),
        "SOFTPLUS_BWD": ({"softplus_beta": 2.0}, lambda v: _sig(2 * v)),
    }
    for mode, (params, f) in bwd.items():
        out = pw.pointwise(P + mode, dy, x, **params)
        assert_close(roundtrip_output(out, t), dy_ref * _elementwise(f, x_ref), t, what=mode)


def test_erf_accuracy_and_specials():
    xs = np.concatenate([np.linspace(-7, 7, 20001), np.linspace(2.45, 2.55, 1001),
                         [0.0, -0.0, 1e-300, -1e-20, 26.0, -30.0]])
    ref = np.array([math.erf(v) for v in xs])
    got = pw.erf(xs)
    assert np.max(np.abs(got - ref)) < 5e-16
    tiny = np.random.default_rng(0).uniform(-1e-3, 1e-3, 2000)
    rel = np.abs(pw.erf(tiny) - np.array([math.erf(v) for v in tiny])) / np.abs(tiny)
    assert rel.max() < 1e-15
    assert pw.erf(np.float64(0.5)).shape == () and np.isnan(pw.erf(np.nan))
    sp = pw.erf(np.array([np.inf, -np.inf, np.nan]))
    assert sp[0] == 1 and sp[1] == -1 and np.isnan(sp[2])
    assert np.signbit(pw.erf(np.array([-0.0]))[0])


def test_special_values_and_large_inputs():
    x = np.array([-1.0, 0.0, -800.0, 800.0, np.nan], np.float64)
    with np.errstate(all="raise"):  # the kernel must not leak floating-point warnings
        lg = pw.pointwise(P + "LOG", x)
        sg = pw.pointwise(P + "SIGMOID_FWD", x)
        sp = pw.pointwise(P + "SOFTPLUS_FWD", x)
        dv = pw.pointwise(P + "DIV", np.array([1.0, -1.0, 0.0]), np.array([0.0, 0.0, 0.0]))
    assert np.isnan(lg[0]) and lg[1] == -np.inf and np.isnan(lg[4])
    assert sg[2] == 0 and sg[3] == 1 and np.isnan(sg[4])
    assert sp[2] == 0 and sp[3] == 800
    assert dv[0] == np.inf and dv[1] == -np.inf and np.isnan(dv[2])


def test_compute_dtype_and_int_inputs():
    a = np.array([2 ** 30 + 1, 3], np.int32)
    out = pw.pointwise(P + "ADD", a, np.array([1, 1], np.int32))
    assert out.dtype == np.float64 and out[0] == 2 ** 30 + 2
    h = np.array([1.0, 2.0], np.float16)
    assert pw.pointwise(P + "EXP", h).dtype == np.float32
    assert pw.pointwise(P + "EXP", h, compute_dtype=np.float64).dtype == np.float64
    o = pw.pointwise(P + "ADD", np.ones((1, 3)), np.ones((1, 1)), out_shape=(2, 1, 3))
    assert o.shape == (2, 1, 3)


# ------------------------------------------------- float32 tails and special values
_TAIL = np.array([-40.0, -20.0, -12.0, -9.0, -6.0, -3.0, -1.0, -0.25, 0.0, 0.25, 1.0, 3.0, 6.0,
                  9.0, 12.0, 20.0, 40.0])


def _tail_input(big):
    return np.tile(_TAIL, 40000 if big else 1).astype(np.float32)


@pytest.mark.parametrize("big", [False, True])
def test_f32_backward_tails_keep_relative_accuracy(big):
    """sigmoid'/tanh'/tanh-GELU' where 1 - sigmoid or 1 - tanh^2 rounds away in float32: the
    result keeps float32 relative accuracy (not 0, not a cancelled difference)."""
    x = _tail_input(big)
    dy = np.full_like(x, 3.0)
    xs = x[:_TAIL.size].astype(np.float64)

    def sig(v):
        return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))

    refs = {
        "SIGMOID_BWD": [3.0 * sig(v) * sig(-v) for v in xs],
        "TANH_BWD": [3.0 / math.cosh(v) ** 2 for v in xs],
    }
    for v in xs:   # tanh-GELU' from the sigmoid form of 0.5 x (1 + tanh z) = x sigmoid(2z)
        z2 = 2 * K * (v + 0.044715 * v ** 3)
        s = sig(z2)
        refs.setdefault("GELU_APPROX_TANH_BWD", []).append(
            3.0 * (s + v * s * sig(-z2) * 2 * K * (1 + 3 * 0.044715 * v * v)))
    for mode, ref in refs.items():
        got = pw.pointwise(P + mode, dy, x)[:_TAIL.size].astype(np.float64)
        ref = np.array(ref)
        np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-37, err_msg=mode)
        if big:
            np.testing.assert_array_equal(pw.pointwise(P + mode, dy, x).reshape(-1, _TAIL.size),
                                          np.broadcast_to(got.astype(np.float32),
                                                          (40000, _TAIL.size)))


@pytest.mark.parametrize("big", [False, True])
def test_f32_gelu_forms_tails_and_specials(big):
    x = _tail_input(big)
    xs = x[:_TAIL.size].astype(np.float64)
    # tanh form: relative accuracy also for x < 0 (no cancellation in 1 + tanh z)
    got = pw.pointwise(P + "GELU_APPROX_TANH_FWD", x)[:_TAIL.size].astype(np.float64)
    ref = np.array([v / (1.0 + math.exp(-2 * K * (v + 0.044715 * v ** 3)))
                    if -2 * K * (v + 0.044715 * v ** 3) < 700 else 0.0 * v for v in xs])
    # (float32 rounding of the exponent itself: ~|2z| ulp relative, 2e-6 at x = -9)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-37)
    # erf form: never of the wrong sign, -0.0 where Phi(x) rounds to 0, erf bounded by 1
    g = pw.pointwise(P + "GELU_FWD", x)[:_TAIL.size]
    assert (g[xs < 0] <= 0).all() and (g[xs > 0] > 0).all()
    assert np.array_equal(g[xs <= -12], np.zeros((xs <= -12).sum(), np.float32))
    assert np.signbit(g[xs <= -12]).all()
    e = pw.pointwise(P + "ERF", np.tile(np.linspace(-6, 6, 4801, dtype=np.float32), 120 if big else 1))
    assert np.abs(e).max() == 1.0
    sp = np.array([np.inf, -np.inf, np.nan, 3.4e38, -3.4e38], np.float32)
    gf = pw.pointwise(P + "GELU_FWD", sp)
    assert gf[0] == np.inf and np.isnan(gf[1]) and np.isnan(gf[2]) and gf[3] == np.float32(3.4e38)
    gt = pw.pointwise(P + "GELU_APPROX_TANH_FWD", sp)
    assert gt[0] == np.inf and np.isnan(gt[1]) and np.isnan(gt[2]) and gt[3] == np.float32(3.4e38)
    assert gt[4] == 0 and np.signbit(gt[4])
