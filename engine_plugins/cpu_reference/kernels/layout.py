"""Strided tensor views over flat buffers.

hipDNN describes a tensor by ``dims`` and ``strides`` (both in *elements*, in the
logical dimension order, e.g. N, C, H, W) plus a data type.  NCHW, NHWC or any
other packing is only a matter of strides, so a kernel can always work on the
logical shape and ignore the memory layout:

>>> buf = np.zeros(2 * 3 * 4 * 5, np.float32)
>>> x = view(buf, (2, 3, 4, 5), nhwc_strides((2, 3, 4, 5)), np.float32)
>>> x.shape
(2, 3, 4, 5)

``view`` returns an ndarray made with ``np.lib.stride_tricks.as_strided`` that
aliases the buffer (writes through it land in the buffer); ``write`` copies
results into such a view.  Strides may be any integers (zero for broadcast
inputs, negative too); dims of zero give an empty view.
"""

from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = [
    "packed_strides",
    "contiguous_strides",
    "nchw_strides",
    "nhwc_strides",
    "channels_last_strides",
    "element_extent",
    "from_address",
    "view",
    "write",
    "store",
    "load",
]


def packed_strides(dims: Sequence[int], order: Sequence[int] | None = None) -> tuple[int, ...]:
    """Fully packed strides (elements) for *dims*.

    *order* lists the logical dims from outermost (slowest) to innermost
    (fastest) in memory; ``None`` means the logical order (row major).  For a
    4-D NCHW-logical tensor, ``order=(0, 2, 3, 1)`` gives NHWC."""
    dims = [int(d) for d in dims]
    n = len(dims)
    if order is None:
        order = list(range(n))
    order = [int(o) for o in order]
    if sorted(order) != list(range(n)):
        raise ValueError(f"order {order} is not a permutation of range({n})")
    strides = [0] * n
    s = 1
    for ax in reversed(order):
        strides[ax] = s
        s *= max(dims[ax], 1)
    return tuple(strides)


def contiguous_strides(dims: Sequence[int]) -> tuple[int, ...]:
    """Row-major packed strides (NCHW / NCDHW for activations)."""
    return packed_strides(dims)


nchw_strides = contiguous_strides


def channels_last_strides(dims: Sequence[int]) -> tuple[int, ...]:
    """Packed channels-last strides (NHWC / NDHWC) for logical (N, C, spatial...) dims."""
    n = len(dims)
    if n < 3:
        return packed_strides(dims)
    return packed_strides(dims, [0] + list(range(2, n)) + [1])


nhwc_strides = channels_last_strides


def element_extent(dims: Sequence[int], strides: Sequence[int]) -> tuple[int, int]:
    """(lowest, highest) element offsets touched by a (dims, strides) tensor, relative
    to its first element; ``(0, -1)`` for an empty tensor."""
    if len(dims) != len(strides):
        raise ValueError("dims and strides differ in length")
    if any(int(d) == 0 for d in dims):
        return 0, -1
    lo = hi = 0
    for d, s in zip(dims, strides):
        d, s = int(d), int(s)
        if d < 0:
            raise ValueError(f"negative dim in {tuple(dims)}")
        span = (d - 1) * s
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi


def from_address(address: int, nbytes: int, writeable: bool = True) -> np.ndarray:
    """A uint8 ndarray aliasing *nbytes* of raw memory at *address* (a C pointer)."""
    if nbytes == 0:
        return np.zeros(0, np.uint8)
    if not address:
        raise ValueError("null address")
    raw = (ctypes.c_ubyte * int(nbytes)).from_address(int(address))
    a = np.ctypeslib.as_array(raw)
    if not writeable:
        a.flags.writeable = False
    return a


def _flat_bytes(buffer) -> np.ndarray:
    """Any buffer-ish object -> 1-D uint8 ndarray sharing its memory."""
    if isinstance(buffer, np.ndarray):
        a = buffer
        if not (a.flags.c_contiguous or a.flags.f_contiguous):
            raise ValueError("buffer ndarray must be contiguous")
        return a.reshape(-1, order="A").view(np.uint8)
    mv = memoryview(buffer)
    if not mv.contiguous:
        raise ValueError("buffer must be contiguous")
    return np.frombuffer(mv, dtype=np.uint8) if mv.nbytes else np.zeros(0, np.uint8)


def view(buffer, dims: Sequence[int], strides: Sequence[int] | None, dtype,
         offset: int = 0, writeable: bool | None = None) -> np.ndarray:
    """View *buffer* as an ndarray of logical shape *dims*.

    buffer   : ndarray (any dtype, contiguous), bytes/bytearray/memoryview, or
               the result of :func:`from_address`.
    dims     : logical dims (e.g. N, C, H, W).
    strides  : strides in elements for each logical dim (``None``: row-major packed).
    dtype    : numpy storage dtype of the elements (``uint16`` for bf16).
    offset   : offset in elements of the tensor's first element in the buffer.
    writeable: ``None`` keeps the buffer's own writeability.

    The result aliases the buffer.  Raises ``ValueError`` when the described
    tensor does not fit in the buffer."""
    dims = tuple(int(d) for d in dims)
    if strides is None:
        strides = contiguous_strides(dims)
    strides = tuple(int(s) for s in strides)
    dt = np.dtype(dtype)
    isz = dt.itemsize
    flat = _flat_bytes(buffer)
    lo, hi = element_extent(dims, strides)
    if hi < lo:  # empty tensor
        return np.zeros(dims, dt)
    first = int(offset) + lo
    if first < 0 or (int(offset) + hi + 1) * isz > flat.nbytes:
        raise ValueError(
            f"tensor dims={dims} strides={strides} offset={offset} ({dt}) does not fit in "
            f"a buffer of {flat.nbytes} bytes")
    base = flat[first * isz:(int(offset) + hi + 1) * isz].view(dt)
    start = base[-lo:] if lo else base
    wr = flat.flags.writeable if writeable is None else bool(writeable and flat.flags.writeable)
    return as_strided(start, shape=dims, strides=tuple(s * isz for s in strides), writeable=wr)


def write(dst: np.ndarray, values) -> np.ndarray:
    """Copy *values* (broadcast to ``dst.shape``) into the strided view *dst*,
    casting unsafely to dst's dtype (callers encode 16-bit types first, see
    :func:`store`).  Returns *dst*."""
    if not dst.flags.writeable:
        raise ValueError("destination view is read-only")
    if dst.size > 1 and any(s == 0 and d > 1 for s, d in zip(dst.strides, dst.shape)):
        raise ValueError("destination view has overlapping (zero-stride) elements")
    np.copyto(dst, values, casting="unsafe")
    return dst


def load(buffer, dims, strides, type_name: str, offset: int = 0) -> np.ndarray:
    """View a buffer as hipDNN type *type_name* and decode to its compute dtype
    (bf16/half -> float32).  The result may alias the buffer for float/double."""
    from . import dtypes

    info = dtypes.data_type_info(type_name)
    return dtypes.decode(view(buffer, dims, strides, info.storage, offset, writeable=False), type_name)


def store(buffer, dims, strides, type_name: str, values, offset: int = 0) -> np.ndarray:
    """Encode *values* as hipDNN type *type_name* and write them into the strided
    tensor (dims, strides, offset) of *buffer*.  Returns the destination view."""
    from . import dtypes

    info = dtypes.data_type_info(type_name)
    dst = view(buffer, dims, strides, info.storage, offset)
    vals = np.broadcast_to(np.asarray(values), dst.shape)
    return write(dst, dtypes.encode(vals, type_name))
