"""Tensor reduction kernels: every ``hipdnnReduceTensorOp_t`` operation.

:func:`reduce(op, x, out_shape)` reduces x over every axis where the output
tensor has size 1 and x does not (hipDNN marks reduced dims by giving the
output dim 1); the result has exactly ``out_shape`` (same rank as x).

Operations, keyed by hipDNN enum names (``HIPDNN_REDUCE_TENSOR_<OP>``; the
legacy ``HIPDNN_REDUCTION_<OP>`` names and bare flatbuffers names such as
``MIN_OP``/``MAX_OP`` are accepted too):

========================  ===============================================
ADD                       sum(x)
MUL                       prod(x)
MIN / MAX                 min(x) / max(x) (NaN propagates)
AMAX                      max(|x|)
AVG                       sum(x) / count
NORM1                     sum(|x|)
NORM2                     sqrt(sum(x^2))
MUL_NO_ZEROS              product of the non-zero elements (1 if all are 0)
========================  ===============================================

Accumulation is in float64; the result is returned in the compute dtype
(float64 if x is float64, else float32).  Reducing an empty set gives the
operation's identity (0, 1, +inf for MIN, -inf for MAX, 0 for AMAX, NaN for AVG).
"""

from __future__ import annotations

import numpy as np

from .dtypes import compute_dtype_for

__all__ = ["REDUCTION_OPS", "canonical_reduce_op", "reduce", "reduced_axes"]

_PREFIX = "HIPDNN_REDUCE_TENSOR_"


def _amax(x, axes):
    return np.max(np.abs(x), axis=axes, keepdims=True, initial=0.0)


def _mul_no_zeros(x, axes):
    return np.prod(np.where(x == 0, 1.0, x), axis=axes, keepdims=True)


def _avg(x, axes):
    n = 1
    for a in axes:
        n *= x.shape[a]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(x, axis=axes, keepdims=True) / (n if n else np.nan)


_OPS = {
    "ADD": lambda x, ax: np.sum(x, axis=ax, keepdims=True),
    "MUL": lambda x, ax: np.prod(x, axis=ax, keepdims=True),
    "MIN": lambda x, ax: np.min(x, axis=ax, keepdims=True, initial=np.inf),
    "MAX": lambda x, ax: np.max(x, axis=ax, keepdims=True, initial=-np.inf),
    "AMAX": _amax,
    "AVG": _avg,
    "NORM1": lambda x, ax: np.sum(np.abs(x), axis=ax, keepdims=True),
    "NORM2": lambda x, ax: np.sqrt(np.sum(x * x, axis=ax, keepdims=True)),
    "MUL_NO_ZEROS": _mul_no_zeros,
}

#: hipDNN enum name -> function(x_float64, axes) -> keep-dims result
REDUCTION_OPS = {_PREFIX + k: v for k, v in _OPS.items()}

_ALIASES = {"MIN_OP": "MIN", "MAX_OP": "MAX"}


def canonical_reduce_op(op) -> str:
    """Normalise an operation designation to its ``HIPDNN_REDUCE_TENSOR_<OP>`` name."""
    name = getattr(op, "name", op)
    if not isinstance(name, str):
        raise TypeError(f"reduction op must be given by name, got {op!r}")
    s = name.strip().upper()
    for pre in (_PREFIX, "HIPDNN_REDUCTION_", "REDUCE_TENSOR_", "REDUCTION_"):
        if s.startswith(pre):
            s = s[len(pre):]
            break
    s = _ALIASES.get(s, s)
    if _PREFIX + s not in REDUCTION_OPS:
        raise KeyError(f"unknown reduction op {op!r}")
    return _PREFIX + s


def reduced_axes(x_shape, out_shape) -> tuple[int, ...]:
    """Axes reduced when going from *x_shape* to *out_shape* (same rank; an output
    dim is either x's dim or 1)."""
    x_shape, out_shape = tuple(x_shape), tuple(out_shape)
    if len(x_shape) != len(out_shape):
        raise ValueError(f"x {x_shape} and output {out_shape} ranks differ")
    axes = []
    for i, (a, b) in enumerate(zip(x_shape, out_shape)):
        if b == a:
            continue
        if b == 1:
            axes.append(i)
        else:
            raise ValueError(f"output dim {i} is {b}: must be {a} or 1")
    return tuple(axes)


def reduce(op, x, out_shape, compute_dtype=None) -> np.ndarray:
    """Reduce x with *op* to *out_shape* (see the module docstring)."""
    fn = REDUCTION_OPS[canonical_reduce_op(op)]
    x = np.asarray(x)
    out_shape = tuple(int(d) for d in out_shape)
    axes = reduced_axes(x.shape, out_shape)
    if compute_dtype is not None:
        cdt = np.dtype(compute_dtype)
        if cdt.kind != "f" or cdt.itemsize < 4:
            cdt = np.dtype(np.float32)
    else:
        cdt = compute_dtype_for(x.dtype)
    xd = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = fn(xd, axes) if axes else _identity_reduce(fn, xd)
    return np.asarray(r).reshape(out_shape).astype(cdt)


def _identity_reduce(fn, xd):
    """No axis reduced: apply the op element-wise (a 1-element reduction)."""
    return fn(xd[..., None], (xd.ndim,))[..., 0]
