"""Cache-blocked (and, for large arrays, multi-threaded) evaluation of element-wise float32 work.

numpy ufuncs release the GIL, so splitting a large element-wise computation into contiguous
per-thread ranges, each walked in cache-sized blocks, lets several in-place ufunc passes run on
data that stays in L2 and on more than one core.  The thread count is ``HIPDNN_CPUREF_THREADS``,
else ``OMP_NUM_THREADS``, else ``os.cpu_count()`` (capped at 8).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BLOCK = 1 << 18         # elements per block (1 MiB of float32: per-call Python overhead stays small)
PARALLEL_MIN = 1 << 19   # below this many elements: one thread

_pool = None
_pool_n = 0
_lock = threading.Lock()
_tls = threading.local()


def num_threads() -> int:
    forced = getattr(_tls, "threads", None)   # threads(n): one plan variant's thread count
    if forced:
        return forced
    for var in ("HIPDNN_CPUREF_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(var)
        if v:
            try:
                return max(1, min(8, int(v)))
            except ValueError:
                pass
    return max(1, min(8, os.cpu_count() or 1))


class threads:
    """``with threads(n):`` element-wise work on this thread uses ``n`` threads (None: the
    configured count)."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.prev = getattr(_tls, "threads", None)
        _tls.threads = self.n
        return self

    def __exit__(self, *exc):
        _tls.threads = self.prev


def _get_pool(n):
    global _pool, _pool_n
    with _lock:
        if _pool is None or _pool_n < n:
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="cpuref")
            _pool_n = n
        return _pool


def scratch(k: int, n: int, dtype=np.float32):
    """k thread-local scratch vectors of n elements (reused between calls)."""
    key = (np.dtype(dtype).str, k)
    bufs = getattr(_tls, "bufs", None)
    if bufs is None:
        bufs = _tls.bufs = {}
    have = bufs.get(key)
    if have is None or have[0].size < n:
        have = bufs[key] = [np.empty(max(n, BLOCK), dtype) for _ in range(k)]
    return [b[:n] for b in have]


_zeros = np.zeros(0, np.float32)


def zeros_f32(shape):
    """A read-only float32 zero array of *shape*, a view of one shared ``np.zeros`` buffer.

    numpy's ``maximum`` against a full zero array runs its SIMD loop, against a broadcast
    scalar a slower NaN-aware loop (4x here); the buffer's pages are never written, so on Linux
    they stay mapped to the kernel's shared zero page: reading them costs no memory bandwidth."""
    global _zeros
    n = int(np.prod(shape, dtype=np.int64))
    with _lock:
        if _zeros.size < n:
            _zeros = np.zeros(max(n, 1 << 16), np.float32)
            _zeros.setflags(write=False)
        z = _zeros
    return z[:n].reshape(shape)


def memory_perm(a):
    """Axis order of *a* from the outermost to the innermost in memory."""
    return sorted(range(a.ndim), key=lambda i: (-abs(a.strides[i]) if a.shape[i] > 1 else 0, i))


def flat_views(*arrays):
    """1-D views (memory order) of same-shape arrays that share one dense memory order, or None."""
    a0 = arrays[0]
    perm = memory_perm(a0)
    out = []
    for a in arrays:
        if a.shape != a0.shape:
            return None
        t = a.transpose(perm)
        if not t.flags.c_contiguous:
            return None
        out.append(t.reshape(-1))
    return out


def run(fn, n, block=BLOCK, parallel=True, work_size=None):
    """Call ``fn(start, stop)`` over ``[0, n)`` in blocks of *block*; when the work is large
    (*work_size* elements, default n) the range is split into one contiguous part per thread.
    Floating-point warnings are suppressed in the workers (as the kernels do)."""
    big = (n if work_size is None else work_size) >= PARALLEL_MIN
    T = num_threads() if (parallel and big) else 1
    nb = -(-n // block) if n else 0
    T = max(1, min(T, nb))

    def work(k):
        per = -(-nb // T)
        lo, hi = k * per * block, min(n, (k + 1) * per * block)
        with np.errstate(all="ignore"):
            for s in range(lo, hi, block):
                fn(s, min(hi, s + block))

    if T == 1:
        work(0)
        return
    pool = _get_pool(T - 1)
    futs = [pool.submit(work, k) for k in range(1, T)]
    try:
        work(0)
    finally:
        for f in futs:
            f.result()


def channel_rows(a, axis=1):
    """(view2d, per_row) of *a* in memory order for per-channel work on *axis*.

    view2d is a dense 2-D view (R, L) of a's memory; per_row=True when each row holds one
    channel (channel index = row % C, NCHW-like), False when the channel varies along a row
    (column j holds channel (j // inner) % C, NHWC-like).  None when a is not dense."""
    perm = memory_perm(a)
    t = a.transpose(perm)
    if not t.flags.c_contiguous:
        return None
    q = perm.index(axis)
    shape = t.shape
    outer = int(np.prod(shape[:q], dtype=np.int64))
    C = shape[q]
    inner = int(np.prod(shape[q + 1:], dtype=np.int64))
    if inner >= 256:
        return t.reshape(outer * C, inner), True, (outer, C, inner)
    return t.reshape(outer, C * inner), False, (outer, C, inner)


def par_ufunc(uf, *args, out):
    """``uf(*args, out=out)`` split along the outermost output axis into one contiguous part per
    thread when *out* is large (numpy releases the GIL inside the ufunc loop, each part is one
    ufunc call: no per-block Python overhead on single-pass, memory-bound work).  Inputs follow
    numpy broadcasting; an input whose dimension on that axis is 1 (or absent) is not split.
    Aliasing an input with *out* is allowed (element-wise, same positions)."""
    n = out.size
    T = num_threads() if n >= PARALLEL_MIN else 1
    if T == 1 or out.ndim == 0 or out.shape[0] < T:
        return uf(*args, out=out)
    d0 = out.shape[0]
    nd = out.ndim
    arrs = [np.asarray(a) for a in args]
    for a in arrs:   # partial overlap with out: leave it to numpy's own buffering
        if a.ndim and np.may_share_memory(a, out) and not (
                a.shape == out.shape and a.strides == out.strides
                and a.__array_interface__["data"][0] == out.__array_interface__["data"][0]):
            return uf(*args, out=out)

    def part(lo, hi):
        xs = [a[lo:hi] if (a.ndim == nd and a.shape[0] == d0) else a for a in arrs]
        uf(*xs, out=out[lo:hi])

    per = -(-d0 // T)
    cuts = [(k * per, min(d0, (k + 1) * per)) for k in range(T) if k * per < d0]
    pool = _get_pool(len(cuts) - 1)
    futs = [pool.submit(part, lo, hi) for lo, hi in cuts[1:]]
    try:
        part(*cuts[0])
    finally:
        for f in futs:
            f.result()
    return out
