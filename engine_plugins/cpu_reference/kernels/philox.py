"""Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) in numpy,
and the SDPA dropout stream defined on it.

The generator is the counter-based one cuRAND calls ``curandStatePhilox4_32_10_t``: a 128-bit
counter (four 32-bit words c0..c3), a 64-bit key (k0, k1), ten rounds, the key bumped by the
Weyl constants between rounds.  One counter value yields four 32-bit outputs.

SDPA dropout stream (the definition both engines implement bit for bit; docs/cpu_reference.md):

* the element (b, h, i, j) of the [B, Hq, Sq, Skv] probability matrix uses the
  ``n = offset + i * Skv + j``-th 32-bit output of the stream with key = seed and
  subsequence ``b * Hq + h``.  That is: counter = (lo32(n >> 2), hi32(n >> 2), lo32(s),
  hi32(s)) with s = b * Hq + h, output word ``n & 3``; key = (lo32(seed), hi32(seed)).  This is
  what ``curand_init(seed, subsequence=s, offset=n)`` followed by one ``curand()`` returns.
* it is dropped when that word u is below ``drop_threshold(p) = min(floor(p * 2**32),
  2**32 - 1)`` (integer comparison; p is the float32 dropout probability), kept otherwise;
  kept values are scaled by 1 / (1 - p) (or by the dropout-scale tensor when one is given).

cuDNN does not publish its own counter layout, so no bit compatibility with cuDNN's masks is
claimed; the layout above is curand-compatible and cheap on a GPU (one Philox call serves four
adjacent columns).
"""
from __future__ import annotations

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox 4x32-10 on arrays of counters (any integer arrays holding 32-bit values; the key
    words are scalars).  Returns the four output words as uint32 arrays."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & _MASK for c in (c0, c1, c2, c3))
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    m0, m1 = np.uint64(M0), np.uint64(M1)
    for r in range(10):
        p0 = c0 * m0
        p1 = c2 * m1
        kk0, kk1 = np.uint64(k0), np.uint64(k1)
        c0, c1, c2, c3 = ((p1 >> _S32) ^ c1 ^ kk0, p1 & _MASK, (p0 >> _S32) ^ c3 ^ kk1, p0 & _MASK)
        k0 = (k0 + W0) & 0xFFFFFFFF
        k1 = (k1 + W1) & 0xFFFFFFFF
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def stream(seed: int, subsequence: int, start: int, count: int) -> np.ndarray:
    """``count`` consecutive 32-bit outputs of the (seed, subsequence) stream from output index
    ``start`` (uint32 array)."""
    seed &= (1 << 64) - 1
    subsequence &= (1 << 64) - 1
    start &= (1 << 64) - 1
    first = start >> 2
    last = (start + count - 1) >> 2 if count else first
    ctr = np.arange(last - first + 1, dtype=np.uint64) + np.uint64(first)
    s_lo, s_hi = subsequence & 0xFFFFFFFF, subsequence >> 32
    w = philox4x32_10(ctr & _MASK, ctr >> _S32, np.full(ctr.shape, s_lo, np.uint64),
                      np.full(ctr.shape, s_hi, np.uint64), seed & 0xFFFFFFFF, seed >> 32)
    words = np.stack(w, axis=1).reshape(-1)
    lo = start - 4 * first
    return words[lo:lo + count]


def drop_threshold(p: float) -> int:
    """The 32-bit threshold below which an element is dropped (p as float32)."""
    p = float(np.float32(p))
    return int(min(np.floor(p * 4294967296.0), 4294967295.0))


def keep_mask(seed: int, offset: int, b: int, h: int, Hq: int, Sq: int, Skv: int,
              p: float) -> np.ndarray:
    """The [Sq, Skv] boolean keep mask of head (b, h) (see the module docstring)."""
    u = stream(int(seed), b * Hq + h, int(offset), Sq * Skv)
    return (u >= np.uint32(drop_threshold(p))).reshape(Sq, Skv)
