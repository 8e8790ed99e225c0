"""Block-scale quantize / dequantize (MX-style microscaling) for the CPU reference engine.

Quantize (``BlockScaleQuantizeAttributes``): ``block_size`` consecutive elements along
``axis`` (default: the last dim) share one scale::

    scale = round_up_to_scale_type(amax(block) / max_finite(y_type))     (float64 division)
    y     = round_nearest_even_saturate(clamp(x / scale, -max, max))      (compute-type division)

(cuDNN's documented recipe; hipDNN's reference does the same.)  A zero scale gives y = 0.  A
block holding a NaN or an infinity gets a NaN scale and NaN elements (OCP MX: a NaN scale
makes the whole block NaN); element types without NaN (FP4, FP6, integers) store 0 there.
Integer y types round to nearest even and saturate at the type's range.

Dequantize (``BlockScaleDequantizeAttributes``): ``block_size`` is a vector whose entries
apply to the *trailing* dims of x (entry i to dim ``rank - len + i``); ``y = x * scale`` (or
``x * 2**-scale`` with ``is_negative_scale``), computed in the compute type and rounded once.

Both take and return arrays in logical shape; x is already decoded to float32/float64; the
scale is returned as float64 values exactly representable in the scale type.
"""
from __future__ import annotations

import numpy as np

from . import minifloat as mf

_INT_LIMITS = {"INT8": (-128, 127), "UINT8": (0, 255), "INT32": (-2 ** 31, 2 ** 31 - 1)}
_FLOAT_MAX = {"FLOAT": float(np.finfo(np.float32).max), "HALF": 65504.0,
              "BFLOAT16": float.fromhex("0x1.fep127"), "DOUBLE": float(np.finfo(np.float64).max)}


def type_max(name: str) -> float:
    """Largest finite value of an element type (the ``vmax_otype`` of the recipe)."""
    if mf.is_minifloat(name):
        return mf.max_finite(name)
    if name in _INT_LIMITS:
        return float(_INT_LIMITS[name][1])
    return _FLOAT_MAX[name]


def type_lowest(name: str) -> float:
    if name in _INT_LIMITS:
        return float(_INT_LIMITS[name][0])
    if name == "FP8_E8M0":
        return 0.0
    return -type_max(name)


def _bf16_round_up(v):
    f = np.asarray(v, np.float64).astype(np.float32)
    u = f.view(np.uint32)
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) >> 16).astype(np.uint32) << 16
    rv = r.view(np.float32).astype(np.float64)
    bump = rv < v
    r = np.where(bump, r + (1 << 16), r)
    return np.minimum(r.view(np.float32).astype(np.float64), _FLOAT_MAX["BFLOAT16"])


def round_up(v, scale_type: str) -> np.ndarray:
    """Smallest value of scale_type >= v (v >= 0 float64; above the max -> max)."""
    v = np.asarray(v, np.float64)
    if mf.is_minifloat(scale_type):
        return mf.round_up(v, scale_type)
    if scale_type == "BFLOAT16":
        return np.where(np.isnan(v), np.nan, _bf16_round_up(np.minimum(v, _FLOAT_MAX["BFLOAT16"])))
    if scale_type == "DOUBLE":
        return v
    dt = {"FLOAT": np.float32, "HALF": np.float16}[scale_type]
    with np.errstate(over="ignore"):
        r = np.minimum(v, type_max(scale_type)).astype(dt)
        r = np.where(r.astype(np.float64) < v, np.nextafter(r, dt(np.inf)), r)
    return np.minimum(r.astype(np.float64), type_max(scale_type))   # above the max: the max


def blocks_view(x, axis, block):
    """x with ``axis`` moved last and split into (..., nblocks, block)."""
    xm = np.moveaxis(x, axis, -1)
    n = xm.shape[-1]
    return xm.reshape(xm.shape[:-1] + (n // block, block))


def quantize(x, block_size, axis, y_type, scale_type, compute_dtype=np.float32):
    """(y values in logical shape, already rounded to y_type's grid as float64 / int;
    scale values in the scale tensor's logical shape)."""
    axis = int(axis) % x.ndim
    cdt = np.dtype(compute_dtype)
    xb = blocks_view(np.asarray(x, cdt), axis, int(block_size))
    finite = np.isfinite(xb).all(-1)
    amax = np.max(np.abs(np.where(np.isfinite(xb), xb, 0)), axis=-1).astype(np.float64)
    scale = round_up(amax / type_max(y_type), scale_type)
    scale = np.where(finite, scale, np.nan)
    sc = scale.astype(cdt)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(sc != 0, xb / sc, cdt.type(0))
    q = np.clip(q, type_lowest(y_type), type_max(y_type))   # NaN stays NaN
    q = np.where(finite[..., None], q, np.nan)
    shp = np.moveaxis(x, axis, -1).shape
    y = np.moveaxis(q.reshape(shp), -1, axis)
    s = np.moveaxis(scale, -1, axis)
    return y, s


def dequantize(x, scale, block_sizes, negative_scale=False, compute_dtype=np.float32):
    """y = x * scale[block_of(i)] (or x * 2**-scale), in compute_dtype."""
    cdt = np.dtype(compute_dtype)
    x = np.asarray(x, cdt)
    s = np.asarray(scale, cdt)
    bs = [1] * (x.ndim - len(block_sizes)) + [int(b) for b in block_sizes]
    for ax, b in enumerate(bs):
        if b > 1:
            s = np.repeat(s, b, axis=ax)
    if negative_scale:
        with np.errstate(over="ignore"):
            e = np.clip(np.nan_to_num(-s.astype(np.float64)), -2000, 2000)
            exact = np.ldexp(1.0, e.astype(np.int64)).astype(cdt)   # integral exponents: exact
            s = np.where(np.isnan(s), s, np.where(e == np.round(e), exact, np.exp2(-s)))
    with np.errstate(invalid="ignore", over="ignore"):
        return x * s
