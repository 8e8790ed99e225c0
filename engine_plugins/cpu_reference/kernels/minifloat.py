"""Narrow floating-point formats (FP8 / FP6 / FP4 / E8M0) for the CPU reference kernels.

Every format is one element per byte (``uint8`` storage; FP4 and FP6 use the low bits, as
hipDNN's data SDK stores them).  Each format is described by :class:`Format` and fully
tabulated: ``values[code]`` is the float64 value of every code, so

* :func:`decode` is a table lookup (exact);
* :func:`encode` rounds to nearest, ties to even (the code whose mantissa LSB is 0), and
  *saturates*: magnitudes above the largest finite value (infinities included) become
  +-max, as the OCP MX specification's saturating conversion does.  NaN becomes the
  format's NaN code; formats without NaN (FP4, FP6) encode NaN as +0 (the block scale
  carries the NaN, see :mod:`.block_scale`);
* :func:`round_up` returns the smallest representable value >= v (scales are rounded
  upward so that no element of a block overflows, cuDNN's ``quantize_round_up``).

Formats (OCP Microscaling Formats v1.0 and the AMD "FNUZ" variants):

======================  =====  ====  ====  =========  ==========================
name                    e, m   bias  max   inf        NaN
======================  =====  ====  ====  =========  ==========================
FP8_E4M3 (E4M3FN)       4, 3   7     448   none       S.1111.111
FP8_E5M2                5, 2   15    57344 S.11111.00 S.11111.{01,10,11}
FP8_E4M3_FNUZ           4, 3   8     240   none       0x80 only (no -0)
FP8_E5M2_FNUZ           5, 2   16    57344 none       0x80 only (no -0)
FP6_E2M3                2, 3   1     7.5   none       none
FP6_E3M2                3, 2   3     28    none       none
FP4_E2M1                2, 1   1     6     none       none
FP8_E8M0 (unsigned)     8, 0   127   2^127 none       0xFF; no zero (0x00 = 2^-127)
======================  =====  ====  ====  =========  ==========================
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Format", "FORMATS", "is_minifloat", "decode", "encode", "round_up", "max_finite"]


@dataclass(frozen=True)
class Format:
    name: str
    ebits: int
    mbits: int
    bias: int
    signed: bool = True
    ieee_special: bool = False    # top exponent = inf/NaN (E5M2)
    fn_nan: bool = False          # only all-ones exponent+mantissa is NaN (E4M3FN)
    fnuz: bool = False            # 0x80 is the only NaN, no negative zero
    e8m0: bool = False            # unsigned power of two, 0xFF NaN
    values: np.ndarray = field(default=None, compare=False, repr=False)

    @property
    def nbits(self):
        return int(self.signed) + self.ebits + self.mbits


def _tabulate(f: Format) -> np.ndarray:
    n = 1 << f.nbits
    out = np.empty(n, np.float64)
    top = (1 << f.ebits) - 1
    for c in range(n):
        if f.e8m0:
            out[c] = np.nan if c == 0xFF else 2.0 ** (c - f.bias)
            continue
        s = (c >> (f.ebits + f.mbits)) & 1 if f.signed else 0
        e = (c >> f.mbits) & top
        m = c & ((1 << f.mbits) - 1)
        if e == 0:
            v = m * 2.0 ** (1 - f.bias - f.mbits)
        else:
            v = (1 + m / (1 << f.mbits)) * 2.0 ** (e - f.bias)
        if f.ieee_special and e == top:
            v = np.inf if m == 0 else np.nan
        if f.fn_nan and e == top and m == (1 << f.mbits) - 1:
            v = np.nan
        if f.fnuz and s == 1 and e == 0 and m == 0:
            v = np.nan
            s = 0
        out[c] = -v if s else v
    return out


def _mk(*a, **k):
    f = Format(*a, **k)
    object.__setattr__(f, "values", _tabulate(f))
    return f


FORMATS = {f.name: f for f in (
    _mk("FP8_E4M3", 4, 3, 7, fn_nan=True),
    _mk("FP8_E5M2", 5, 2, 15, ieee_special=True),
    _mk("FP8_E4M3_FNUZ", 4, 3, 8, fnuz=True),
    _mk("FP8_E5M2_FNUZ", 5, 2, 16, fnuz=True),
    _mk("FP6_E2M3", 2, 3, 1),
    _mk("FP6_E3M2", 3, 2, 3),
    _mk("FP4_E2M1", 2, 1, 1),
    _mk("FP8_E8M0", 8, 0, 127, signed=False, e8m0=True),
)}
_ALIASES = {"FP6_E2M3_EXT": "FP6_E2M3", "FP6_E3M2_EXT": "FP6_E3M2"}


def fmt(name: str) -> Format:
    n = str(name)
    if n.startswith("HIPDNN_DATA_"):
        n = n[len("HIPDNN_DATA_"):]
    return FORMATS[_ALIASES.get(n, n)]


def is_minifloat(name: str) -> bool:
    try:
        fmt(name)
        return True
    except KeyError:
        return False


def _positive(f: Format):
    """(sorted finite non-negative values, their codes)."""
    v = f.values
    codes = np.arange(v.size)
    ok = np.isfinite(v) & (v >= 0) & ~((v == 0) & (codes != 0))
    order = np.argsort(v[ok], kind="stable")
    return v[ok][order], codes[ok][order]


_POS = {}


def _pos(f):
    p = _POS.get(f.name)
    if p is None:
        p = _POS[f.name] = _positive(f)
    return p


def max_finite(name) -> float:
    return float(_pos(fmt(name))[0][-1])


def _nan_code(f: Format) -> int:
    if f.e8m0:
        return 0xFF
    if f.fnuz:
        return 0x80
    if f.fn_nan:
        return 0x7F
    if f.ieee_special:
        return 0x7F
    return 0          # no NaN: +0


def decode(codes, name) -> np.ndarray:
    """uint8 codes -> float32 values (exact: every format here fits float32)."""
    f = fmt(name)
    c = np.asarray(codes).astype(np.intp) & ((1 << f.nbits) - 1)
    return f.values.astype(np.float32)[c]


def encode(values, name) -> np.ndarray:
    """float values -> uint8 codes: round to nearest even, saturate to +-max, NaN -> NaN code."""
    f = fmt(name)
    a = np.asarray(values, dtype=np.float64)
    vals, codes = _pos(f)
    mag = np.abs(a)
    nan = np.isnan(a)
    m = np.where(nan, 0.0, np.minimum(mag, vals[-1]))
    hi = np.searchsorted(vals, m, side="left")
    hi = np.minimum(hi, vals.size - 1)
    lo = np.maximum(hi - 1, 0)
    dhi = vals[hi] - m
    dlo = m - vals[lo]
    pick_lo = (dlo < dhi) | ((dlo == dhi) & (codes[lo] % 2 == 0))
    pick_lo &= vals[hi] != m
    c = np.where(pick_lo, codes[lo], codes[hi]).astype(np.int64)
    if f.signed:
        neg = np.signbit(a) & ~nan
        if f.fnuz:
            neg &= c != 0          # no negative zero
        c = np.where(neg, c | (1 << (f.ebits + f.mbits)), c)
    c = np.where(nan, _nan_code(f), c)
    return c.astype(np.uint8)


def round_up(values, name) -> np.ndarray:
    """Smallest representable value >= v (v >= 0; above max -> max), as float64."""
    f = fmt(name)
    vals, _ = _pos(f)
    a = np.asarray(values, dtype=np.float64)
    i = np.minimum(np.searchsorted(vals, a, side="left"), vals.size - 1)
    return np.where(np.isnan(a), np.nan, vals[i])
