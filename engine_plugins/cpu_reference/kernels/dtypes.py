"""Data-type helpers for the CPU reference kernels.

Storage vs. compute types
-------------------------
Every hipDNN data type is described by two numpy dtypes:

* the *storage* dtype: how elements lie in a user buffer.  bfloat16 has no numpy
  dtype, so it is stored as ``uint16`` holding the upper 16 bits of an IEEE
  float32;
* the *compute* dtype: what the kernels work in.  16-bit floats (half, bfloat16)
  compute in float32, float computes in float32, double in float64.  Integer and
  boolean types compute as themselves (kernels that need floats promote them).

Tables are keyed by the hipDNN enum *names* (``"HIPDNN_DATA_FLOAT"``...); the
numeric enum values are deliberately not repeated here (the ABI JSON / generated
enums own them).  FP8/FP6/FP4 and E8M0 are stored one code per byte and converted by
:mod:`.minifloat` (round to nearest even, saturating); INT4 is not supported.

Conversions
-----------
* :func:`bf16_to_float32` widens exactly (shift left by 16).
* :func:`float32_to_bf16` rounds to nearest, ties to even; NaN stays a (quiet)
  NaN with its sign; overflow rounds to +-inf as IEEE round-to-nearest does.
* half uses numpy's ``float16`` (IEEE binary16, round-to-nearest-even).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DataTypeInfo",
    "DATA_TYPES",
    "data_type_info",
    "storage_dtype",
    "compute_dtype",
    "bf16_to_float32",
    "float32_to_bf16",
    "round_to_bf16",
    "to_float32",
    "from_float32",
    "decode",
    "encode",
    "compute_dtype_for",
    "as_compute",
    "accumulator_dtype",
]


@dataclass(frozen=True)
class DataTypeInfo:
    """Description of one hipDNN data type."""

    name: str  # hipDNN enum name, e.g. "HIPDNN_DATA_BFLOAT16"
    storage: np.dtype  # numpy dtype of the elements in a buffer
    compute: np.dtype  # numpy dtype the kernels compute in
    is_bf16: bool = False
    minifloat: bool = False   # FP8/FP6/FP4/E8M0: one uint8 code per element (.minifloat)


def _info(name, storage, compute, is_bf16=False, minifloat=False):
    return DataTypeInfo(name, np.dtype(storage), np.dtype(compute), is_bf16, minifloat)


#: hipDNN data-type name -> DataTypeInfo, for the types these kernels support.
DATA_TYPES: dict[str, DataTypeInfo] = {
    i.name: i
    for i in (
        _info("HIPDNN_DATA_FLOAT", np.float32, np.float32),
        _info("HIPDNN_DATA_DOUBLE", np.float64, np.float64),
        _info("HIPDNN_DATA_HALF", np.float16, np.float32),
        _info("HIPDNN_DATA_BFLOAT16", np.uint16, np.float32, is_bf16=True),
        _info("HIPDNN_DATA_INT8", np.int8, np.int8),
        _info("HIPDNN_DATA_UINT8", np.uint8, np.uint8),
        _info("HIPDNN_DATA_INT32", np.int32, np.int32),
        _info("HIPDNN_DATA_INT64", np.int64, np.int64),
        _info("HIPDNN_DATA_BOOLEAN", np.bool_, np.bool_),
    ) + tuple(_info("HIPDNN_DATA_" + n, np.uint8, np.float32, minifloat=True)
              for n in ("FP8_E4M3", "FP8_E5M2", "FP8_E8M0", "FP4_E2M1", "FP6_E2M3", "FP6_E3M2",
                        "FP8_E4M3_FNUZ", "FP8_E5M2_FNUZ"))
}

_SHORT_NAMES = {
    "FLOAT": "HIPDNN_DATA_FLOAT",
    "FLOAT32": "HIPDNN_DATA_FLOAT",
    "DOUBLE": "HIPDNN_DATA_DOUBLE",
    "FLOAT64": "HIPDNN_DATA_DOUBLE",
    "HALF": "HIPDNN_DATA_HALF",
    "FLOAT16": "HIPDNN_DATA_HALF",
    "BFLOAT16": "HIPDNN_DATA_BFLOAT16",
    "BF16": "HIPDNN_DATA_BFLOAT16",
    "INT8": "HIPDNN_DATA_INT8",
    "UINT8": "HIPDNN_DATA_UINT8",
    "INT32": "HIPDNN_DATA_INT32",
    "INT64": "HIPDNN_DATA_INT64",
    "BOOLEAN": "HIPDNN_DATA_BOOLEAN",
    "BOOL": "HIPDNN_DATA_BOOLEAN",
}


def data_type_info(name: str) -> DataTypeInfo:
    """Look up a data type by its hipDNN enum name (``HIPDNN_DATA_HALF``) or a short
    alias (``HALF``, ``bf16``, ``float32``...).  Raises ``KeyError`` when unsupported."""
    key = str(name)
    if key in DATA_TYPES:
        return DATA_TYPES[key]
    up = key.upper()
    if up.startswith("HIPDNN_DATA_"):
        up = up[len("HIPDNN_DATA_"):]
    if up in _SHORT_NAMES:
        return DATA_TYPES[_SHORT_NAMES[up]]
    raise KeyError(f"unsupported data type {name!r}")


def storage_dtype(name: str) -> np.dtype:
    """numpy dtype of the buffer elements of hipDNN type *name*."""
    return data_type_info(name).storage


def compute_dtype(name: str) -> np.dtype:
    """numpy dtype the kernels compute in for hipDNN type *name*."""
    return data_type_info(name).compute


# --------------------------------------------------------------------------- bf16
def bf16_to_float32(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16 array) -> float32 array (exact)."""
    u = np.asarray(bits)
    if u.dtype != np.uint16:
        u = u.astype(np.uint16)
    return (u.astype(np.uint32) << np.uint32(16)).view(np.float32)


def float32_to_bf16(values) -> np.ndarray:
    """float array -> bfloat16 bit patterns (uint16), round-to-nearest-even.

    Values wider than float32 are first rounded to float32 (so a double is
    double-rounded, as a float32 -> bf16 conversion on the device would be)."""
    f = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    u = f.view(np.uint32)
    lsb = (u >> np.uint32(16)) & np.uint32(1)
    rounded = (u + (np.uint32(0x7FFF) + lsb)) >> np.uint32(16)
    nan = np.isnan(f)
    if nan.any():
        # keep the sign and make it a quiet NaN
        rounded = np.where(nan, (u >> np.uint32(16)) | np.uint32(0x0040), rounded)
    return rounded.astype(np.uint16)


#: short aliases: bfloat16 bits -> float32 / float32 -> bfloat16 bits
to_float32 = bf16_to_float32
from_float32 = float32_to_bf16


def round_to_bf16(values) -> np.ndarray:
    """Round float values to the nearest bfloat16, returned as float32."""
    return bf16_to_float32(float32_to_bf16(values))


# --------------------------------------------------------------- decode / encode
def decode(stored, name: str) -> np.ndarray:
    """Convert an array of storage elements of hipDNN type *name* to the compute dtype.

    bf16 (uint16 bits) -> float32; half -> float32; other types are cast to their
    compute dtype (a no-op view when already of that dtype)."""
    info = data_type_info(name)
    a = np.asarray(stored)
    if info.is_bf16:
        return bf16_to_float32(a)
    if info.minifloat:
        from . import minifloat
        return minifloat.decode(a, name)
    if a.dtype == info.compute:
        return a
    return a.astype(info.compute)


def encode(values, name: str) -> np.ndarray:
    """Convert computed values to storage elements of hipDNN type *name*.

    Floating types round to nearest even.  Integer types round to nearest (ties to
    even) and saturate at the type's range; NaN becomes 0.  Boolean is ``value != 0``."""
    info = data_type_info(name)
    a = np.asarray(values)
    if info.is_bf16:
        return float32_to_bf16(a)
    if info.minifloat:
        from . import minifloat
        return minifloat.encode(a, info.name)
    st = info.storage
    if st.kind == "b":
        return a != 0 if a.dtype != np.bool_ else a
    if st.kind in "iu" and a.dtype.kind in "fc":
        lim = np.iinfo(st)
        r = np.rint(np.nan_to_num(a.real, nan=0.0)).astype(np.float64)   # exact limits (int32)
        return np.clip(r, lim.min, lim.max).astype(st)
    if a.dtype == st:
        return a
    if st.kind in "iu" and a.dtype.kind in "iu":      # a wider integer saturates, never wraps
        lim, src = np.iinfo(st), np.iinfo(a.dtype)
        if src.min < lim.min or src.max > lim.max:
            a = np.clip(a, max(lim.min, src.min), min(lim.max, src.max))
        return a.astype(st)
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(st)


# ---------------------------------------------------------- compute-type helpers
def compute_dtype_for(*dtypes) -> np.dtype:
    """Floating compute dtype for operands of the given numpy dtypes.

    float64 anywhere -> float64; otherwise float32 (float16/bool/small ints and
    float32 all compute in float32).  32/64-bit integers compute in float64 so
    that their values are represented exactly."""
    out = np.dtype(np.float32)
    for d in dtypes:
        d = np.dtype(d)
        if d == np.float64 or d.kind == "c":
            return np.dtype(np.float64)
        if d.kind in "iu" and d.itemsize >= 4:
            out = np.dtype(np.float64)
        if d.kind == "f" and d.itemsize > 8:
            return np.dtype(np.float64)
    return out


def as_compute(a, dtype=None) -> np.ndarray:
    """Return *a* as an ndarray in floating compute dtype (no copy when already so).

    *dtype* forces the compute dtype; a 16-bit request is widened to float32."""
    a = np.asarray(a)
    if dtype is None:
        dt = compute_dtype_for(a.dtype)
    else:
        dt = np.dtype(dtype)
        if dt.kind != "f" or dt.itemsize < 4:
            dt = np.dtype(np.float32)
    return a if a.dtype == dt else a.astype(dt)


def accumulator_dtype(*arrays) -> np.dtype:
    """Accumulation dtype for reductions / GEMMs: float64 when any operand is
    float64 (or a wide integer), float32 otherwise."""
    return compute_dtype_for(*(np.asarray(a).dtype for a in arrays))
