"""Pointwise (element-wise) kernels: every ``hipdnnPointwiseMode_t`` mode.

Entry point: :func:`pointwise` ``(mode, *inputs, **params) -> ndarray``.

Modes are keyed by the hipDNN enum *names* (``"HIPDNN_POINTWISE_ADD"``...);
:func:`canonical_mode` also accepts the older ``HIPDNN_POINTWISE_MODE_<OP>``
spelling, the bare flatbuffers names (``ADD``, ``MAX_OP``, ``MIN_OP``) and enum
objects that carry a ``.name``.

Operands and broadcasting
-------------------------
Inputs follow numpy broadcasting (hipDNN broadcasts size-1 dims of same-rank
tensors, which is a special case).  Operand order is the node's ``in_0``,
``in_1``, ``in_2``:

* unary modes: ``(x)``
* binary arithmetic / comparison / logical modes: ``(a, b)`` -> ``a OP b``
* backward activation modes ``*_BWD``: ``(dy, x)`` where *x* is the **forward
  input**; the result is ``dx = dy * f'(x)``
* ``BINARY_SELECT``: ``(a, b, mask)`` -> ``mask ? a : b``
* ``GEN_INDEX``: ``(x)`` plus ``axis``; only x's shape is used.

Compute type
------------
Operands are brought to a floating compute dtype: float64 if any operand is
float64 (or a 32/64-bit integer), else float32 (half and bfloat16 compute in
float32, bf16 callers decode with :mod:`.dtypes` first).  ``compute_dtype=``
forces it.  Exact / correctly-rounded modes (add, sub, mul, div, min, max,
relu, abs, neg, floor, ceil, identity, select, compares, reciprocal, sqrt)
run in the compute dtype.  Transcendental and composite modes are evaluated in
float64 and rounded once when the compute dtype is float64; with a float32
compute dtype they run in float32 (in-place ufuncs over cache-sized blocks,
two threads for large arrays, see ``blocked.py``; erf via :func:`erf_f32`,
relative error <= 5e-7), within a few float32 ulp of the exact values.  IEEE special values propagate (no
warnings are raised, e.g. ``LOG(-1) = nan``, ``DIV(1, 0) = inf``).

Output dtype: the compute dtype, except ``CMP_*`` and ``LOGICAL_*`` (``bool``)
and ``GEN_INDEX`` (``int32``).

Parameters (names as in ``PointwiseAttributes``; ``None`` = default)
--------------------------------------------------------------------
* ``relu_lower_clip`` (default 0), ``relu_upper_clip`` (default: the compute
  type's largest finite value), ``relu_lower_clip_slope`` (default 0)
* ``swish_beta`` (default 1), ``elu_alpha`` (default 1), ``softplus_beta``
  (default 1)
* ``axis`` (GEN_INDEX; ``PointwiseAttributes.axis_tensor_uid`` holds a plain axis
  index, negative values count from the end)

Formulas (cuDNN-documented semantics; where cuDNN leaves a point open the
choice is stated)
----------------------------------------------------------------------------
* ``ADD a+b``, ``SUB a-b``, ``MUL a*b``, ``DIV a/b``, ``ADD_SQUARE a + b*b``,
  ``MAX``/``MIN`` element-wise (NaN-propagating).
* ``ABS, CEIL, FLOOR, EXP, LOG`` (natural), ``NEG -x``, ``RECIPROCAL 1/x``,
  ``RSQRT 1/sqrt(x)``, ``SIN, TAN, SQRT``, ``ERF`` (exact error function),
  ``IDENTITY`` (a type conversion).
* ``CMP_EQ/NEQ/GT/GE/LT/LE``: ``a OP b`` -> bool.
* ``LOGICAL_AND/OR`` of ``(a != 0, b != 0)``; ``LOGICAL_NOT``: ``x == 0``.
* ``RELU_FWD``: ``x <= lower ? lower + slope*(x - lower) : (x >= upper ? upper : x)``.
* ``RELU_BWD``: ``dy * (x <= lower ? slope : (x > upper ? 0 : 1))`` (lower bound
  exclusive, upper bound inclusive, as hipDNN's reference).
* ``TANH_FWD``; ``TANH_BWD dy*(1 - tanh(x)^2)``.
* ``SIGMOID_FWD s(x) = 1/(1+exp(-x))``; ``SIGMOID_BWD dy*s(x)*(1-s(x))``.
* ``ELU_FWD x > 0 ? x : alpha*(exp(x)-1)``; ``ELU_BWD dy * (x > 0 ? 1 : alpha*exp(x))``.
* ``GELU_FWD 0.5*x*(1+erf(x/sqrt 2))`` (exact, erf form);
  ``GELU_BWD dy*(Phi(x) + x*phi(x))`` with Phi/phi the normal cdf/pdf.
* ``GELU_APPROX_TANH_FWD 0.5*x*(1+tanh(k*(x+0.044715 x^3)))``, ``k=sqrt(2/pi)``;
  ``GELU_APPROX_TANH_BWD`` its exact derivative
  ``0.5*(1+t) + 0.5*x*(1-t^2)*k*(1+3*0.044715 x^2)``.
* ``SOFTPLUS_FWD log(1+exp(beta*x))/beta`` (evaluated stably, no linear
  threshold); ``SOFTPLUS_BWD dy*s(beta*x)``.
* ``SWISH_FWD x*s(beta*x)``; ``SWISH_BWD dy*(s + beta*x*s*(1-s))``, ``s=s(beta*x)``.
* ``BINARY_SELECT (a, b, mask) -> mask != 0 ? a : b``.
* ``GEN_INDEX``: int32 tensor of x's shape holding each element's index along
  ``axis``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import blocked
from .dtypes import compute_dtype_for

__all__ = [
    "PointwiseMode",
    "POINTWISE_MODES",
    "canonical_mode",
    "pointwise",
    "erf",
    "erf_f32",
]

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_GELU_TANH_C = 0.044715


# ----------------------------------------------------------------------- erf
# erf is evaluated by Taylor expansion about the nearest point of a grid
# c_j = j/8 (j = 0..48, so |h| = |x - c_j| <= 1/16):
#     erf(c + h) = erf(c) + sum_{k>=1} a_k(c) h^k,
#     a_k(c) = 2/sqrt(pi) * exp(-c^2) * (-1)^(k-1) * H_{k-1}(c) / k!
# (H_n the physicists' Hermite polynomials; the k-th derivative of erf is
# 2/sqrt(pi) (-1)^(k-1) H_{k-1}(x) exp(-x^2)).  12 terms leave a truncation
# error below 1e-16; erf(c_j) comes from math.erf for the 49 grid points only.
# For |x| > 6, erf(x) rounds to +-1 in double precision.
_ERF_STEP_INV = 8.0
_ERF_NPTS = 49
_ERF_TERMS = 12


def _erf_table():
    c = np.arange(_ERF_NPTS) / _ERF_STEP_INV
    herm = [np.ones_like(c), 2.0 * c]
    for n in range(1, _ERF_TERMS):
        herm.append(2.0 * c * herm[n] - 2.0 * n * herm[n - 1])
    g = _TWO_OVER_SQRT_PI * np.exp(-c * c)
    cols = [np.array([math.erf(v) for v in c.tolist()])]
    for k in range(1, _ERF_TERMS + 1):
        cols.append(g * (-1.0) ** (k - 1) * herm[k - 1] / math.factorial(k))
    return [np.ascontiguousarray(col) for col in cols]


_ERF_COLS = _erf_table()
_ERF_BLOCK = 1 << 15


def erf(x) -> np.ndarray:
    """Vectorised error function in float64 (absolute error ~1e-16).

    Piecewise Taylor expansion on a 1/8 grid (see the comment above); the work
    is done in cache-sized blocks of elements (loops run over blocks and series
    terms, never over single elements).  NaN -> NaN, +-inf -> +-1, sign of
    zero kept."""
    x = np.asarray(x, dtype=np.float64)
    a = np.fmin(np.abs(x), 6.0).ravel()  # NaN -> 6 for safe indexing, fixed below
    out = np.empty_like(a)
    cols = _ERF_COLS
    for s in range(0, a.size, _ERF_BLOCK):
        v = a[s:s + _ERF_BLOCK]
        j = (v * _ERF_STEP_INV + 0.5).astype(np.intp)
        h = v - j / _ERF_STEP_INV
        p = np.take(cols[_ERF_TERMS], j)
        for k in range(_ERF_TERMS - 1, -1, -1):
            p *= h
            p += np.take(cols[k], j)
        out[s:s + _ERF_BLOCK] = p
    out = out.reshape(x.shape)
    out[np.abs(x) >= 6.0] = 1.0
    np.copysign(out, x, out=out)
    out[np.isnan(x)] = np.nan
    return out


# ------------------------------------------------------------------- helpers
def _sigmoid(x):
    """Overflow-free logistic function."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(z):
    """log(1 + exp(z)) without overflow."""
    return np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))


def _norm_cdf(x):
    return 0.5 * (1.0 + erf(x / _SQRT2))


@dataclass(frozen=True)
class _Params:
    relu_lower_clip: float
    relu_upper_clip: float
    relu_lower_clip_slope: float
    swish_beta: float
    elu_alpha: float
    softplus_beta: float
    axis: int | None


@dataclass(frozen=True)
class PointwiseMode:
    """Description of one pointwise mode.

    name   : hipDNN enum name (``HIPDNN_POINTWISE_ADD``)
    arity  : number of tensor inputs (1, 2 or 3)
    kind   : "unary", "binary", "backward" (dy, x), "ternary"
    output : "compute" (the compute dtype), "bool" or "int32"
    wide   : evaluated in float64 then rounded to the compute dtype
    params : the PointwiseAttributes scalar fields the mode reads
    """

    name: str
    arity: int
    kind: str
    output: str
    wide: bool
    params: tuple[str, ...]
    fn: Callable


# ------------------------------------------------------------------- formulas
def _relu_fwd(x, p):
    lo, hi, sl = p.relu_lower_clip, p.relu_upper_clip, p.relu_lower_clip_slope
    dt = x.dtype.type
    lo_, hi_, sl_ = dt(lo), dt(hi), dt(sl)
    if (sl == 0.0 and lo == 0.0 and hi >= 0.0 and x.dtype == np.float32
            and x.size >= blocked.PARALLEL_MIN):
        return relu_f32_into(np.empty_like(x), x, hi_)
    if sl == 0.0 and lo <= hi and x.dtype.kind == "f" and x.size >= blocked.PARALLEL_MIN:
        # large x: max then min (x <= lower -> lower, -0.0 -> +0.0; NaN propagates), threaded
        def clamp(v, out):
            np.maximum(v, lo_, out=out)
            np.minimum(out, hi_, out=out)
        return blocked.par_ufunc(clamp, x, out=np.empty_like(x))
    y = np.minimum(x, hi_)  # x >= upper -> upper; NaN propagates
    if sl == 0.0 and lo <= hi:
        # x <= lower -> lower (also turns -0.0 into +0.0 for lower = 0); NaN stays NaN
        return np.maximum(y, lo_)
    # the lower-clip test comes first, as in hipDNN's reference
    return np.where(x <= lo_, sl_ * (x - lo_) + lo_, y)


_F32_MAX = np.float32(np.finfo(np.float32).max)


def relu_f32_into(out, x, upper=_F32_MAX):
    """out = min(max(x, 0), upper) for float32 x and out of one shape: ReLU with hipDNN's
    default clips (-0.0 -> +0.0, NaN propagates, +inf -> the float32 max).

    When both share one dense memory order, the maximum runs against a shared zero array of
    that layout (numpy's SIMD loop; against a scalar numpy takes a NaN-aware loop 4x slower)
    and the upper clip is a scalar ``clip`` (SIMD; its lower bound -inf changes nothing), both
    split over the threads; otherwise plain ufuncs."""
    up = np.float32(upper)
    lo = np.float32(-np.inf)

    def relu(v, z, out):
        np.maximum(v, z, out=out)
        np.clip(out, lo, up, out=out)

    if out is x or not np.may_share_memory(out, x):
        views = blocked.flat_views(out, x)
        if views is not None:
            of, xf = views
            blocked.par_ufunc(relu, xf, blocked.zeros_f32(xf.shape), out=of)
            return out
    with np.errstate(all="ignore"):
        np.maximum(x, np.float32(0), out=out)
        return np.minimum(out, up, out=out)


def _relu_bwd(dy, x, p):
    dt = np.result_type(dy, x).type
    lo, hi, sl = dt(p.relu_lower_clip), dt(p.relu_upper_clip), dt(p.relu_lower_clip_slope)
    g = np.where(x <= lo, sl, np.where(x > hi, dt(0), dt(1)))
    return dy * g


def _elu_fwd(x, p):
    a = p.elu_alpha
    return np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))


def _elu_bwd(dy, x, p):
    a = p.elu_alpha
    return dy * np.where(x > 0, 1.0, a * np.exp(np.minimum(x, 0)))


def _gelu_fwd(x, p):
    return x * _norm_cdf(x)


def _gelu_bwd(dy, x, p):
    return dy * (_norm_cdf(x) + x * _INV_SQRT_2PI * np.exp(-0.5 * x * x))


def _gelu_tanh_fwd(x, p):
    t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x))
    return 0.5 * x * (1.0 + t)


def _gelu_tanh_bwd(dy, x, p):
    t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x))
    dinner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_C * x * x)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)


def _softplus_fwd(x, p):
    b = p.softplus_beta
    return _softplus(b * x) / b


def _softplus_bwd(dy, x, p):
    return dy * _sigmoid(p.softplus_beta * x)


def _swish_fwd(x, p):
    return x * _sigmoid(p.swish_beta * x)


def _swish_bwd(dy, x, p):
    b = p.swish_beta
    s = _sigmoid(b * x)
    return dy * (s + b * x * s * (1.0 - s))


def _sigmoid_bwd(dy, x, p):
    s = _sigmoid(x)
    return dy * s * (1.0 - s)


def _tanh_bwd(dy, x, p):
    t = np.tanh(x)
    return dy * (1.0 - t * t)


def _gen_index(x, p):
    shape = x.shape
    if p.axis is None:
        raise ValueError("GEN_INDEX needs the 'axis' parameter")
    ax = int(p.axis)
    nd = len(shape)
    if not -nd <= ax < nd:
        raise ValueError(f"GEN_INDEX axis {ax} out of range for rank {nd}")
    ax %= nd
    idx = np.arange(shape[ax], dtype=np.int32).reshape((-1,) + (1,) * (nd - ax - 1))
    return np.broadcast_to(idx, shape)


def _nz(a):
    return a if a.dtype == np.bool_ else (a != 0)


_U, _B, _BW, _T = "unary", "binary", "backward", "ternary"
_RELU_P = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope")

# name suffix -> (kind, output, wide, params, fn)
_TABLE = {
    "ABS": (_U, "compute", False, (), lambda x, p: np.abs(x)),
    "ADD": (_B, "compute", False, (), lambda a, b, p: a + b),
    "ADD_SQUARE": (_B, "compute", True, (), lambda a, b, p: a + b * b),
    "BINARY_SELECT": (_T, "compute", False, (), None),
    "CEIL": (_U, "compute", False, (), lambda x, p: np.ceil(x)),
    "CMP_EQ": (_B, "bool", False, (), lambda a, b, p: a == b),
    "CMP_GE": (_B, "bool", False, (), lambda a, b, p: a >= b),
    "CMP_GT": (_B, "bool", False, (), lambda a, b, p: a > b),
    "CMP_LE": (_B, "bool", False, (), lambda a, b, p: a <= b),
    "CMP_LT": (_B, "bool", False, (), lambda a, b, p: a < b),
    "CMP_NEQ": (_B, "bool", False, (), lambda a, b, p: a != b),
    "DIV": (_B, "compute", False, (), lambda a, b, p: a / b),
    "ELU_BWD": (_BW, "compute", True, ("elu_alpha",), _elu_bwd),
    "ELU_FWD": (_U, "compute", True, ("elu_alpha",), _elu_fwd),
    "ERF": (_U, "compute", True, (), lambda x, p: erf(x)),
    "EXP": (_U, "compute", True, (), lambda x, p: np.exp(x)),
    "FLOOR": (_U, "compute", False, (), lambda x, p: np.floor(x)),
    "GELU_APPROX_TANH_BWD": (_BW, "compute", True, (), _gelu_tanh_bwd),
    "GELU_APPROX_TANH_FWD": (_U, "compute", True, (), _gelu_tanh_fwd),
    "GELU_BWD": (_BW, "compute", True, (), _gelu_bwd),
    "GELU_FWD": (_U, "compute", True, (), _gelu_fwd),
    "GEN_INDEX": (_U, "int32", False, ("axis",), None),
    "IDENTITY": (_U, "compute", False, (), lambda x, p: x),
    "LOG": (_U, "compute", True, (), lambda x, p: np.log(x)),
    "LOGICAL_AND": (_B, "bool", False, (), None),
    "LOGICAL_NOT": (_U, "bool", False, (), None),
    "LOGICAL_OR": (_B, "bool", False, (), None),
    "MAX": (_B, "compute", False, (), lambda a, b, p: np.maximum(a, b)),
    "MIN": (_B, "compute", False, (), lambda a, b, p: np.minimum(a, b)),
    "MUL": (_B, "compute", False, (), lambda a, b, p: a * b),
    "NEG": (_U, "compute", False, (), lambda x, p: -x),
    "RECIPROCAL": (_U, "compute", False, (), lambda x, p: 1 / x),
    "RELU_BWD": (_BW, "compute", False, _RELU_P, _relu_bwd),
    "RELU_FWD": (_U, "compute", False, _RELU_P, _relu_fwd),
    "RSQRT": (_U, "compute", True, (), lambda x, p: 1.0 / np.sqrt(x)),
    "SIGMOID_BWD": (_BW, "compute", True, (), _sigmoid_bwd),
    "SIGMOID_FWD": (_U, "compute", True, (), lambda x, p: _sigmoid(x)),
    "SIN": (_U, "compute", True, (), lambda x, p: np.sin(x)),
    "SOFTPLUS_BWD": (_BW, "compute", True, ("softplus_beta",), _softplus_bwd),
    "SOFTPLUS_FWD": (_U, "compute", True, ("softplus_beta",), _softplus_fwd),
    "SQRT": (_U, "compute", False, (), lambda x, p: np.sqrt(x)),
    "SUB": (_B, "compute", False, (), lambda a, b, p: a - b),
    "SWISH_BWD": (_BW, "compute", True, ("swish_beta",), _swish_bwd),
    "SWISH_FWD": (_U, "compute", True, ("swish_beta",), _swish_fwd),
    "TAN": (_U, "compute", True, (), lambda x, p: np.tan(x)),
    "TANH_BWD": (_BW, "compute", True, (), _tanh_bwd),
    "TANH_FWD": (_U, "compute", True, (), lambda x, p: np.tanh(x)),
}

# ------------------------------------------------------------ float32 fast paths
# Float32 compute (float/half/bf16 operands) of the transcendental and composite modes runs in
# float32 with in-place ufuncs over cache-sized blocks (kernels/blocked.py), not in float64:
# numpy's float32 exp/log/tanh/sin are accurate to a few ulp, and the composite formulas below
# keep the result within a few float32 ulp of the exact value relative to max(|y|, |x|-scale).
#
# erf_f32: rational approximation erf(x) = x * P(x^2) / Q(x^2) on x clamped to [-4, 4]
# (erf rounds to +-1 in float32 beyond); degree-6 / degree-4 coefficients as in Eigen's
# generic_fast_erf_float.  Measured max relative error in float32 arithmetic: 4.2e-7.
_ERF_P = (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
          -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
          -2.72614225801306e-10)
_ERF_Q = (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
          -2.13374055278905e-04, -1.45660718464996e-05)
_F32 = np.float32
_clip = getattr(np, "_core", np).umath.clip if hasattr(getattr(np, "_core", np), "umath") else np.clip


def _erf_f32_into(o, x, zscale=1.0, pscale=1.0):
    """o = pscale * erf(zscale * x) in float32 (o may not alias x); the scalings are folded into
    the polynomial coefficients."""
    n = x.size
    x2, q = blocked.scratch(2, n)
    lim = _F32(4.0 / zscale)
    _clip(x, -lim, lim, out=o)               # one pass; NaN stays NaN
    np.multiply(o, o, out=x2)
    z2 = zscale * zscale
    pc = [c * pscale * zscale * z2 ** k for k, c in enumerate(_ERF_P)]
    qc = [c * z2 ** k for k, c in enumerate(_ERF_Q)]
    np.multiply(x2, _F32(pc[-1]), out=q)     # q: numerator accumulator first
    for c in pc[-2:0:-1]:
        q += _F32(c)
        q *= x2
    q += _F32(pc[0])
    o *= q                                   # o = xc * P
    np.multiply(x2, _F32(qc[-1]), out=q)
    for c in qc[-2:0:-1]:
        q += _F32(c)
        q *= x2
    q += _F32(qc[0])
    np.divide(o, q, out=o)
    ps = _F32(abs(pscale))
    _clip(o, -ps, ps, out=o)                 # the rational overshoots |erf| = 1 by an ulp near 4
    return o


def erf_f32(x) -> np.ndarray:
    """Vectorised error function in float32 (relative error <= 5e-7; NaN -> NaN, +-inf -> +-1)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    xf, of = x.reshape(-1), out.reshape(-1)
    blocked.run(lambda s, e: _erf_f32_into(of[s:e], xf[s:e]), xf.size)
    return out


def _f32_sigmoid_into(o, x, beta=1.0):
    np.multiply(x, _F32(-beta), out=o)
    np.exp(o, out=o)
    o += _F32(1)
    np.divide(_F32(1), o, out=o)             # exp overflow -> 1/inf = 0


def _k_sigmoid(o, x, p):
    _f32_sigmoid_into(o, x)


def _k_swish(o, x, p):
    (t,) = blocked.scratch(1, x.size)
    np.multiply(x, _F32(-p.swish_beta), out=t)
    np.exp(t, out=t)
    t += _F32(1)
    np.divide(x, t, out=o)


def _k_gelu(o, x, p):
    # 0.5 x (1 + erf(x / sqrt 2)) = x * (0.5 + 0.5 erf(x / sqrt 2))
    _erf_f32_into(o, x, zscale=1.0 / _SQRT2, pscale=0.5)
    o += _F32(0.5)
    o *= x


def _k_gelu_tanh(o, x, p):
    # 0.5 x (1 + tanh z) = x * sigmoid(2z) = x / (1 + exp(-2z)), z = k (x + c x^3): no
    # cancellation in 1 + tanh z for x < 0, exp overflow -> x / inf = -0, huge x -> x / 1
    np.multiply(x, x, out=o)
    o *= _F32(-2.0 * _SQRT_2_OVER_PI * _GELU_TANH_C)
    o += _F32(-2.0 * _SQRT_2_OVER_PI)
    o *= x
    np.exp(o, out=o)
    o += _F32(1)
    np.divide(x, o, out=o)


def _sig_deriv_into(o, v, t):
    """o = sigmoid(v) * (1 - sigmoid(v)) = e / (1 + e)^2 with e = exp(-|v|): no cancellation
    in 1 - sigmoid(v) for large |v|, no overflow.  t: scratch (must not alias o); o may be v."""
    np.abs(v, out=o)
    np.negative(o, out=o)
    np.exp(o, out=o)
    np.add(o, _F32(1), out=t)
    t *= t
    np.divide(o, t, out=o)


def _k_gelu_tanh_bwd(o, dy, x, p):
    # d/dx [x sigmoid(2z)] = sigmoid(2z) + x * sigmoid'(2z) * 2 z',  z = k (x + c x^3)
    t, u, w = blocked.scratch(3, x.size)
    np.multiply(x, x, out=u)                  # u = x^2
    np.multiply(u, _F32(2.0 * _SQRT_2_OVER_PI * _GELU_TANH_C), out=o)
    o += _F32(2.0 * _SQRT_2_OVER_PI)
    o *= x                                    # o = 2z (+-inf for huge x: sigmoid saturates)
    # x * 2z' on x clipped to [-50, 50]: beyond, sigmoid'(2z) is 0 in float32 and the product
    # must stay 0 (not 0 * inf)
    _clip(x, _F32(-50), _F32(50), out=w)
    np.multiply(w, w, out=u)
    u *= _F32(6.0 * _SQRT_2_OVER_PI * _GELU_TANH_C)
    u += _F32(2.0 * _SQRT_2_OVER_PI)
    u *= w                                    # u = x * 2z'
    np.negative(o, out=t)
    np.exp(t, out=t)
    t += _F32(1)
    np.divide(_F32(1), t, out=t)              # t = sigmoid(2z)
    _sig_deriv_into(o, o, w)                  # o = sigmoid'(2z)
    o *= u
    o += t
    o *= dy


def _k_elu(o, x, p):
    (t,) = blocked.scratch(1, x.size)
    np.minimum(x, _F32(0), out=t)
    np.expm1(t, out=t)
    t *= _F32(p.elu_alpha)
    np.copyto(o, t)
    np.copyto(o, x, where=x > 0)


def _k_softplus(o, x, p):
    b = p.softplus_beta
    (z,) = blocked.scratch(1, x.size)
    np.multiply(x, _F32(b), out=z)
    np.abs(z, out=o)
    np.negative(o, out=o)
    np.exp(o, out=o)
    np.log1p(o, out=o)
    np.maximum(z, _F32(0), out=z)
    o += z
    if b != 1.0:
        o /= _F32(b)


def _k_gelu_bwd(o, dy, x, p):
    # dy * (Phi(x) + x * phi(x))
    (t,) = blocked.scratch(1, x.size)
    np.multiply(x, x, out=t)
    t *= _F32(-0.5)
    np.exp(t, out=t)
    t *= x
    t *= _F32(_INV_SQRT_2PI)
    _erf_f32_into(o, x, zscale=1.0 / _SQRT2, pscale=0.5)
    o += _F32(0.5)
    o += t
    o *= dy


def _k_sigmoid_bwd(o, dy, x, p):
    (t,) = blocked.scratch(1, x.size)
    _sig_deriv_into(o, x, t)
    o *= dy


def _k_tanh_bwd(o, dy, x, p):
    # 1 - tanh(x)^2 = 4 sigmoid(2x) (1 - sigmoid(2x)): accurate where tanh(x)^2 rounds to 1
    (t,) = blocked.scratch(1, x.size)
    np.multiply(x, _F32(2), out=o)
    _sig_deriv_into(o, o, t)
    o *= _F32(4)
    o *= dy


def _k_unary(uf):
    def k(o, x, p):
        uf(x, out=o)
    return k


def _k_rsqrt(o, x, p):
    np.sqrt(x, out=o)
    np.divide(_F32(1), o, out=o)


_F32_KERNELS = {
    "EXP": _k_unary(np.exp),
    "LOG": _k_unary(np.log),
    "SIN": _k_unary(np.sin),
    "TAN": _k_unary(np.tan),
    "TANH_FWD": _k_unary(np.tanh),
    "RSQRT": _k_rsqrt,
    "ERF": lambda o, x, p: _erf_f32_into(o, x),
    "SIGMOID_FWD": _k_sigmoid,
    "SWISH_FWD": _k_swish,
    "GELU_FWD": _k_gelu,
    "GELU_APPROX_TANH_FWD": _k_gelu_tanh,
    "ELU_FWD": _k_elu,
    "SOFTPLUS_FWD": _k_softplus,
    "GELU_BWD": _k_gelu_bwd,
    "GELU_APPROX_TANH_BWD": _k_gelu_tanh_bwd,
    "SIGMOID_BWD": _k_sigmoid_bwd,
    "TANH_BWD": _k_tanh_bwd,
}


def _f32_generic(fn):
    """Any other wide mode: its float64 formula evaluated on float32 blocks (temporaries are
    block-sized)."""
    def k(o, *xs_p):
        *xs, p = xs_p
        o[...] = fn(*xs, p)
    return k


def _pointwise_f32(short, fn, arrs, p, out):
    """Wide mode *short* in float32 over blocks; returns the float32 result (*out* when given)."""
    kern = _F32_KERNELS.get(short) or _f32_generic(fn)
    xs = [a.astype(np.float32, copy=False) for a in arrs]
    shape = np.broadcast_shapes(*(a.shape for a in xs))
    if any(a.shape != shape for a in xs):
        xs = [np.ascontiguousarray(np.broadcast_to(a, shape)) for a in xs]
    dst = out
    if dst is None or any(np.shares_memory(dst, a) for a in xs):
        dst = np.empty_like(xs[0], dtype=np.float32)     # same memory order as in_0
    views = blocked.flat_views(dst, *xs)
    if views is None:
        xs = [np.ascontiguousarray(a) for a in xs]
        tmp = np.empty(shape, np.float32)
        views = [tmp.reshape(-1)] + [a.reshape(-1) for a in xs]
    else:
        tmp = None
    of, xf = views[0], views[1:]
    blocked.run(lambda s, e: kern(of[s:e], *(v[s:e] for v in xf), p), of.size)
    res = dst if tmp is None else tmp
    if out is not None and res is not out:
        np.copyto(out, res)
        return out
    return res


_PREFIX = "HIPDNN_POINTWISE_"
_ARITY = {_U: 1, _B: 2, _BW: 2, _T: 3}

#: hipDNN enum name -> PointwiseMode (47 modes).
POINTWISE_MODES: dict[str, PointwiseMode] = {
    _PREFIX + k: PointwiseMode(_PREFIX + k, _ARITY[v[0]], v[0], v[1], v[2], v[3], v[4])
    for k, v in _TABLE.items()
}

_ALIASES = {"MAX_OP": "MAX", "MIN_OP": "MIN"}


def canonical_mode(mode) -> str:
    """Normalise a mode designation to its ``HIPDNN_POINTWISE_<OP>`` name."""
    name = getattr(mode, "name", mode)
    if not isinstance(name, str):
        raise TypeError(f"pointwise mode must be given by name, got {mode!r}")
    s = name.strip().upper()
    for pre in ("HIPDNN_POINTWISE_MODE_", "HIPDNN_POINTWISE_", "POINTWISE_"):
        if s.startswith(pre):
            s = s[len(pre):]
            break
    s = _ALIASES.get(s, s)
    full = _PREFIX + s
    if full not in POINTWISE_MODES:
        raise KeyError(f"unknown pointwise mode {mode!r}")
    return full


def _f(v, default):
    return float(default) if v is None else float(v)


def pointwise(mode, *inputs, relu_lower_clip=None, relu_upper_clip=None,
              relu_lower_clip_slope=None, swish_beta=None, elu_alpha=None,
              softplus_beta=None, axis=None, compute_dtype=None, out_shape=None,
              out=None) -> np.ndarray:
    """Evaluate pointwise *mode* on *inputs* (see the module docstring).

    Returns a new ndarray (compute dtype, ``bool`` or ``int32``) of the
    broadcast shape of the inputs, or of *out_shape* when given (the result is
    broadcast to it).

    *out* (optional, float32 of the broadcast shape): float32-computed modes write their result
    into it (and return it); other modes ignore it."""
    info = POINTWISE_MODES[canonical_mode(mode)]
    if len(inputs) != info.arity:
        raise ValueError(f"{info.name} takes {info.arity} input(s), got {len(inputs)}")
    arrs = [np.asarray(a) for a in inputs]
    if compute_dtype is not None:
        cdt = np.dtype(compute_dtype)
        if cdt.kind != "f" or cdt.itemsize < 4:
            cdt = np.dtype(np.float32)
    else:
        cdt = compute_dtype_for(*(a.dtype for a in arrs))
    upper_default = float(np.finfo(cdt).max)
    p = _Params(
        relu_lower_clip=_f(relu_lower_clip, 0.0),
        relu_upper_clip=_f(relu_upper_clip, upper_default),
        relu_lower_clip_slope=_f(relu_lower_clip_slope, 0.0),
        swish_beta=_f(swish_beta, 1.0),
        elu_alpha=_f(elu_alpha, 1.0),
        softplus_beta=_f(softplus_beta, 1.0),
        axis=None if axis is None else int(axis),
    )
    short = info.name[len(_PREFIX):]
    with np.errstate(all="ignore"):
        if short == "GEN_INDEX":
            res = _gen_index(arrs[0], p)
        elif short in ("LOGICAL_AND", "LOGICAL_OR"):
            op = np.logical_and if short == "LOGICAL_AND" else np.logical_or
            res = op(_nz(arrs[0]), _nz(arrs[1]))
        elif short == "LOGICAL_NOT":
            res = np.logical_not(_nz(arrs[0]))
        elif short == "BINARY_SELECT":
            a, b = (x.astype(cdt, copy=False) for x in arrs[:2])
            res = np.where(_nz(arrs[2]), a, b)
        elif (info.wide and cdt == np.float32 and info.output == "compute" and arrs
              and all(a.dtype.kind == "f" for a in arrs)):
            if out is not None and (out.dtype != np.float32 or
                                    out.shape != np.broadcast_shapes(*(a.shape for a in arrs))):
                out = None
            res = _pointwise_f32(short, info.fn, arrs, p, out)
        else:
            work = np.dtype(np.float64) if info.wide else cdt
            xs = [x.astype(work, copy=False) for x in arrs]
            res = info.fn(*xs, p)
            if info.output == "compute":
                res = np.asarray(res).astype(cdt, copy=False)
    res = np.asarray(res)
    if out_shape is not None:
        out_shape = tuple(int(d) for d in out_shape)
        if res.shape != out_shape:
            res = np.broadcast_to(res, out_shape)
    return res
