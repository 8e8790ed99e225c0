"""Shared helpers for the CPU reference kernel tests.

Reference values are computed here in float64 from the *quantised* inputs (the
values the kernel really sees), so the only differences measured are the
kernel's own arithmetic and the final rounding to the output type.  Buffers in
NCHW / NHWC are laid out by hand (numpy transposes), independently of the
kernels' layout helpers, and read back the same way.
"""
from __future__ import annotations

import numpy as np

from engine_plugins.cpu_reference.kernels import dtypes, layout

# hipDNN type name -> (storage dtype, relative tolerance on the output)
TYPES = {
    "HIPDNN_DATA_FLOAT": (np.float32, 2e-6),
    "HIPDNN_DATA_DOUBLE": (np.float64, 1e-12),
    "HIPDNN_DATA_HALF": (np.float16, 2e-3),
    "HIPDNN_DATA_BFLOAT16": (np.uint16, 1.6e-2),
}
FLOAT_TYPES = list(TYPES)
LAYOUTS = ["nchw", "nhwc"]


def bf16_round_ref(a):
    """Independent bf16 rounding (round-to-nearest-even) -> float64, via integer maths."""
    f = np.asarray(a, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    upper = u >> 16
    lower = u & 0xFFFF
    up = (lower > 0x8000) | ((lower == 0x8000) & ((upper & 1) == 1))
    r = (upper + up.astype(np.uint64)) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def quantize(a, type_name):
    """float64 values rounded to *type_name*'s precision, as float64."""
    a = np.asarray(a, dtype=np.float64)
    if type_name == "HIPDNN_DATA_DOUBLE":
        return a.copy()
    if type_name == "HIPDNN_DATA_FLOAT":
        return a.astype(np.float32).astype(np.float64)
    if type_name == "HIPDNN_DATA_HALF":
        return a.astype(np.float16).astype(np.float64)
    if type_name == "HIPDNN_DATA_BFLOAT16":
        return bf16_round_ref(a.astype(np.float32))
    raise KeyError(type_name)


def _to_memory_order(a, lay):
    if lay == "nhwc" and a.ndim >= 3:
        return np.moveaxis(a, 1, -1)
    return a


def _from_memory_order(m, lay):
    if lay == "nhwc" and m.ndim >= 3:
        return np.moveaxis(m, -1, 1)
    return m


def strides_for(dims, lay):
    return layout.nhwc_strides(dims) if lay == "nhwc" else layout.nchw_strides(dims)


def make_tensor(ref, type_name, lay="nchw"):
    """Store the quantised float64 *ref* in a flat buffer of *type_name* laid out as
    *lay*, then view + decode it with the kernel helpers.  Returns (kernel_input, buffer)."""
    ref = np.asarray(ref, dtype=np.float64)
    storage = dtypes.storage_dtype(type_name)
    mem = _to_memory_order(ref, lay)
    if type_name == "HIPDNN_DATA_BFLOAT16":
        flat = np.ascontiguousarray(mem.astype(np.float32)).view(np.uint32) >> 16
        flat = flat.astype(np.uint16).ravel()
    else:
        flat = np.ascontiguousarray(mem).astype(storage).ravel()
    buf = flat.copy()
    v = layout.view(buf, ref.shape, strides_for(ref.shape, lay), storage)
    return dtypes.decode(v, type_name), buf


def roundtrip_output(values, type_name, lay="nchw"):
    """Write kernel output *values* into a fresh strided buffer (via layout.store) and
    read it back by hand as float64."""
    values = np.asarray(values)
    dims = values.shape
    storage = dtypes.storage_dtype(type_name)
    n = int(np.prod(dims)) if len(dims) else 1
    buf = np.full(n, 0x7FFF if storage == np.uint16 else 0, dtype=storage)
    layout.store(buf, dims, strides_for(dims, lay), type_name, values)
    mem_shape = _to_memory_order(np.empty(dims, np.int8), lay).shape
    m = buf.reshape(mem_shape)
    if type_name == "HIPDNN_DATA_BFLOAT16":
        m = (m.astype(np.uint32) << 16).view(np.float32)
    return _from_memory_order(m, lay).astype(np.float64)


def assert_close(actual, ref, type_name, scale=None, factor=1.0, what=""):
    """|actual - ref| <= tol * factor * (|ref| + scale), scale default max(1e-3, max|ref|)."""
    actual = np.asarray(actual, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert actual.shape == ref.shape, (actual.shape, ref.shape)
    tol = TYPES[type_name][1] * factor
    if scale is None:
        scale = max(1e-3, float(np.max(np.abs(ref)))) if ref.size else 1.0
    same_nan = np.isnan(actual) & np.isnan(ref)
    same_inf = np.isinf(actual) & (actual == ref)
    err = np.where(same_nan | same_inf, 0.0, np.abs(actual - ref))
    bound = tol * (np.where(np.isfinite(ref), np.abs(ref), 0.0) + scale)
    bad = ~(err <= bound)
    if bad.any():
        i = np.argmax(np.where(bad, err - bound, -np.inf))
        raise AssertionError(
            f"{what} {type_name}: {int(bad.sum())}/{bad.size} elements off; worst at flat {i}: "
            f"actual={actual.ravel()[i]!r} ref={ref.ravel()[i]!r} bound={bound.ravel()[i]!r}")
