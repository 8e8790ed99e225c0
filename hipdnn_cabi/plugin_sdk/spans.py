"""Tensor span checks: can a tensor of the op graph be addressed at all?

A tensor descriptor is only dims and strides; nothing in the backend bounds them.  A graph whose
tensor offsets overflow int64 (dims {4, 8}, strides {2^62, 1}), or whose bytes would cover more
than any process's address space, cannot be executed by any engine: an engine must decline it
when asked for applicable engine ids, not fail (or read wild memory) at execute.

The SDK runs :func:`graph_span_problem` for every Python engine before its plan builder sees the
graph (:meth:`.core.EngineBase.is_applicable`, also on the plan-restore path); engines may call it
themselves with their own element sizes.  Limits (docs/plugin_sdk.md, "Tensor span checks"):

* every dim is >= 0; dims and strides have the same length (when strides are given);
* the element count and every element offset reachable from the tensor's first element
  (the sum of ``(dim - 1) * stride`` over positive and over negative strides) fit in int64;
* so do the byte offsets (element offsets x element size);
* the bytes spanned, ``(highest - lowest + 1) x element size``, are at most
  :data:`MAX_SPAN_BYTES` = 2^48 (256 TiB, the widest 4-level-paging virtual address space of
  x86-64 / AArch64, and of current GPUs); a virtual tensor's dense size obeys the same bound.
"""
from __future__ import annotations

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
MAX_SPAN_BYTES = 1 << 48

# schema DataType -> bytes per element (sub-byte types count as one byte; unknown: 8, the widest)
ITEMSIZE = {0: 4, 1: 4, 2: 2, 3: 2, 4: 8, 5: 1, 6: 4, 7: 1, 8: 1, 9: 1, 10: 1, 11: 1, 12: 1,
            13: 1, 14: 1, 15: 8, 16: 1, 17: 1}


def itemsize_of(dtype) -> int:
    return ITEMSIZE.get(int(dtype), 8)


def element_extent(dims, strides) -> tuple[int, int]:
    """(lowest, highest) element offsets relative to the first element (exact Python ints);
    ``(0, -1)`` for an empty tensor."""
    if any(int(d) == 0 for d in dims):
        return 0, -1
    lo = hi = 0
    for d, s in zip(dims, strides):
        span = (int(d) - 1) * int(s)
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi


def tensor_span_problem(t, itemsize: int | None = None) -> str | None:
    """Why tensor ``t`` (an :class:`.graph.Tensor`) cannot be addressed, or None."""
    dims = [int(d) for d in t.dims]
    strides = [int(s) for s in t.strides]
    isz = int(itemsize) if itemsize else itemsize_of(t.dtype)
    what = f"tensor uid {t.uid}"
    for i, d in enumerate(dims):
        if d < 0:
            return f"{what}: dim {i} is negative ({d})"
    if strides and len(strides) != len(dims):
        return f"{what}: {len(strides)} strides for {len(dims)} dims"
    n = 1
    for d in dims:
        n *= d
    if n > INT64_MAX:
        return f"{what}: the element count of dims {tuple(dims)} overflows int64"
    if strides:
        lo, hi = element_extent(dims, strides)
        if hi > INT64_MAX or lo < INT64_MIN:
            return (f"{what}: element offsets of dims {tuple(dims)} strides {tuple(strides)} "
                    f"overflow int64")
        if hi * isz > INT64_MAX or lo * isz < INT64_MIN:
            return (f"{what}: byte offsets of dims {tuple(dims)} strides {tuple(strides)} "
                    f"overflow int64")
        nbytes = (hi - lo + 1) * isz if hi >= lo else 0
        if nbytes > MAX_SPAN_BYTES:
            return (f"{what}: dims {tuple(dims)} strides {tuple(strides)} span {nbytes} bytes, "
                    f"more than can be addressed (2^48)")
    if t.virtual and n * isz > MAX_SPAN_BYTES:
        return f"{what}: virtual tensor of {n} elements ({n * isz} bytes) cannot be allocated"
    return None


def graph_span_problem(graph, itemsize=None) -> str | None:
    """The first tensor of ``graph`` (an :class:`.graph.OpGraph`) that cannot be addressed, as a
    reason string, or None.  ``itemsize``: optional callable(tensor) -> bytes per element."""
    for t in graph.tensors.values():
        why = tensor_span_problem(t, itemsize(t) if itemsize is not None else None)
        if why:
            return why
    return None
