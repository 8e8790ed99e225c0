"""Batched matrix multiplication (MatmulAttributes: C = A @ B).

``a`` is ``(*batch_a, M, K)``, ``b`` is ``(*batch_b, K, N)``; the batch dims
broadcast with numpy rules (size-1 dims broadcast, missing leading dims count
as 1), giving ``c`` of shape ``(*broadcast(batch_a, batch_b), M, N)``.
Any strides work.  Products are accumulated in float32 (float64 when either
operand is float64 or a 32/64-bit integer); half / decoded-bf16 inputs are
widened to float32 first.  Returns the result in that dtype.
"""

from __future__ import annotations

import numpy as np

from .dtypes import compute_dtype_for

__all__ = ["matmul", "matmul_output_shape"]


def matmul_output_shape(a_shape, b_shape) -> tuple[int, ...]:
    """Logical output shape of :func:`matmul`."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ValueError("matmul operands need at least 2 dims")
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"inner dims differ: a {a_shape} b {b_shape}")
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    return tuple(batch) + (a_shape[-2], b_shape[-1])


def matmul(a, b, compute_dtype=None, out_shape=None) -> np.ndarray:
    """c = a @ b with broadcast batch dims (see the module docstring).

    *out_shape*, when given, must equal the computed shape or be it with extra
    leading size-1 dims (hipDNN tensors of equal rank)."""
    a = np.asarray(a)
    b = np.asarray(b)
    shape = matmul_output_shape(a.shape, b.shape)
    if compute_dtype is not None:
        acc = np.dtype(compute_dtype)
        if acc.kind != "f" or acc.itemsize < 4:
            acc = np.dtype(np.float32)
    else:
        acc = compute_dtype_for(a.dtype, b.dtype)
    c = np.matmul(a.astype(acc, copy=False), b.astype(acc, copy=False))
    if c.shape != shape:  # pragma: no cover - numpy guarantees it
        raise AssertionError
    if out_shape is not None:
        out_shape = tuple(int(d) for d in out_shape)
        if int(np.prod(out_shape, dtype=np.int64)) != c.size or out_shape[-2:] != shape[-2:]:
            raise ValueError(f"out_shape {out_shape} does not hold a result of shape {shape}")
        c = c.reshape(out_shape)
    return c
