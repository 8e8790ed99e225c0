"""A host model of the Hopper pieces the wgmma attention kernels use, for reasoning checks
without a GPU: shared memory as an array of 16-bit element slots (values kept as float64),
tensor-copy-engine tile loads with the 128-byte swizzle, wgmma operands read through shared
memory matrix descriptors (128-byte swizzle; K-major or M/N-major canonical layouts), the
register A fragment and the m64nN accumulator fragment of each thread of a warpgroup.

The swizzle acts on the absolute shared-memory byte address (bits 4..6 ^= bits 7..9), which is
why tiles sit at 1024-byte aligned addresses and a k-step inside a 128-byte row is a plain
+32-byte start offset.  Descriptor fields as hdn_tma.h wg_desc encodes them: start address,
leading byte offset (M/N-major: between 64-element column atoms), stride byte offset (between
groups of 8 rows / 8 k)."""
from __future__ import annotations

import numpy as np


def swz(addr):
    addr = np.asarray(addr)
    return addr ^ (((addr >> 7) & 7) << 4)


class Smem:
    def __init__(self, nbytes):
        self.v = np.zeros(nbytes // 2)

    def tma_load(self, dst, X, r0, c0, rows):
        """Box of 64 columns x ``rows`` rows of X (rows, cols) at (r0, c0); out of range: 0."""
        assert dst % 1024 == 0
        R, C = X.shape
        for r in range(rows):
            for c in range(64):
                v = X[r0 + r, c0 + c] if r0 + r < R and c0 + c < C else 0.0
                self.v[swz(dst + r * 128 + 2 * c) // 2] = v

    def st32(self, addr, lo, hi):
        """A 32-bit shared store of two 16-bit values (generic address, no swizzle applied)."""
        self.v[addr // 2] = lo
        self.v[addr // 2 + 1] = hi

    def operand(self, desc, rows, mn_major):
        """The rows x 16 operand (rows = M of A / N of B, 16 = k) a descriptor selects."""
        start, lbo, sbo = desc
        i = np.arange(rows)[:, None]
        k = np.arange(16)[None, :]
        if mn_major:
            a = start + (i // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + 2 * (i % 64)
        else:
            a = start + (i // 8) * sbo + (i % 8) * 128 + 2 * k
        return self.v[swz(a) // 2]


def desc(addr, lbo, sbo):
    return (addr, lbo, sbo)


def acc_coords(n):
    """(thread, element) -> (row, col) of the m64nN fp32 accumulator: element 4 j + e of thread
    t (warp w4 = t // 32, lane g = (t % 32) // 4, t4 = t % 4) is row 16 w4 + g + 8 (e >> 1),
    column 8 j + 2 t4 + (e & 1)."""
    t = np.arange(128)[:, None]
    idx = np.arange(n // 2)[None, :]
    j, e = idx // 4, idx % 4
    w4, g, t4 = t // 32, (t % 32) // 4, t % 4
    return 16 * w4 + g + 8 * (e >> 1), 8 * j + 2 * t4 + (e & 1)


def to_acc(M):
    """A 64 x N matrix as the warpgroup's accumulator registers [thread][element]."""
    r, c = acc_coords(M.shape[1])
    return M[r, c]


def from_acc(d, n):
    r, c = acc_coords(n)
    M = np.zeros((64, n))
    M[r, c] = d
    return M


def pack_a(d, ks):
    """The register A fragment (64 x 16, k-step ks) hdn_pack2 builds from an accumulator:
    a[q] = (d[8 ks + 2 q], d[8 ks + 2 q + 1]) -> the 64 x 16 matrix it stands for."""
    t = np.arange(128)
    w4, g, t4 = t // 32, (t % 32) // 4, t % 4
    A = np.zeros((64, 16))
    for q in range(4):
        row = 16 * w4 + g + 8 * (q & 1)
        col = 2 * t4 + 8 * (q >> 1)
        A[row, col] = d[:, 8 * ks + 2 * q]
        A[row, col + 1] = d[:, 8 * ks + 2 * q + 1]
    return A


def wgmma(D, A, B, scale_d=True):
    """D (64 x N) = A (64 x 16) B (N x 16)ᵀ + (D if scale_d)."""
    return (D if scale_d else 0) + A @ B.T
