"""Layer normalisation and RMS normalisation kernels (forward and backward).

Normalised axes
---------------
Statistics are taken over a set of *normalised axes* of x, found in this order:

1. ``normalized_dim_count = k > 0`` (``LayernormAttributes.normalized_dim_count``):
   the last ``k`` logical dims, e.g. x ``(N, C, H, W)`` with ``k = 3`` -> C, H, W
   (``k = 1`` on ``(B, T, D)`` is PyTorch's ``layer_norm(x, (D,))``).
2. else, when the statistics tensor's shape is known (``stats_shape``, or the
   shape of the mean / inv_variance / inv_rms arrays passed to a backward):
   the axes where that shape is 1 (the stats hold one value per *un*-normalised
   index, e.g. ``(N, 1, 1, 1)``);
3. else from the scale's shape (same rank as x): every axis from the first one
   where scale's dim is not 1 to the last (scale ``(1, C, H, W)`` -> C, H, W);
4. else all axes but the first.

(Reducing over an extra axis of size 1 changes nothing, so the rules agree
whenever they both apply.)

scale / bias broadcast against x; an operand with fewer dims than x whose size
equals the normalised extent is laid over the normalised axes, otherwise numpy
broadcasting (leading size-1 dims) applies.  Gradients of scale / bias are
summed back to the operand's own shape.

Formulas (``mean`` / ``E`` over the normalised axes, ``eps`` the epsilon
tensor's value)::

    layernorm:  mu = E[x]; var = E[(x - mu)^2] (biased); inv_variance = 1/sqrt(var + eps)
                y = (x - mu) * inv_variance * scale + bias
    backward:   xhat = (x - mu) * inv_variance; g = dy * scale
                dx = inv_variance * (g - E[g] - xhat * E[g * xhat])
                dscale = sum(dy * xhat); dbias = sum(dy)        (over the broadcast axes)
    rmsnorm:    inv_rms = 1/sqrt(E[x^2] + eps); y = x * inv_rms * scale (+ bias)
    backward:   xhat = x * inv_rms; g = dy * scale
                dx = inv_rms * (g - xhat * E[g * xhat]); dscale = sum(dy * xhat); dbias = sum(dy)

All arithmetic is float64; results are returned in the compute dtype (float64
if x is float64, else float32).  Statistics come back with keep-dims shape
(x's shape with the normalised axes set to 1).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .dtypes import compute_dtype_for

__all__ = [
    "LayernormFwdResult",
    "NormBwdResult",
    "RmsnormFwdResult",
    "normalized_axes",
    "layernorm_fwd",
    "layernorm_bwd",
    "rmsnorm_fwd",
    "rmsnorm_bwd",
]


class LayernormFwdResult(NamedTuple):
    y: np.ndarray
    mean: np.ndarray
    inv_variance: np.ndarray


class RmsnormFwdResult(NamedTuple):
    y: np.ndarray
    inv_rms: np.ndarray


class NormBwdResult(NamedTuple):
    dx: np.ndarray
    dscale: np.ndarray
    dbias: np.ndarray


def normalized_axes(x_ndim: int, normalized_dim_count=None, scale_shape: Sequence[int] | None = None,
                    stats_shape: Sequence[int] | None = None) -> tuple[int, ...]:
    """The normalised axes of an x of rank *x_ndim* (rules in the module docstring)."""
    if normalized_dim_count is not None and int(normalized_dim_count) > 0:
        k = int(normalized_dim_count)
        if k > x_ndim:
            raise ValueError(f"normalized_dim_count {k} exceeds rank {x_ndim}")
        return tuple(range(x_ndim - k, x_ndim))
    if stats_shape is not None and len(stats_shape) == x_ndim:
        return tuple(i for i, d in enumerate(stats_shape) if int(d) == 1)
    if scale_shape is not None and len(scale_shape) == x_ndim:
        for i, d in enumerate(scale_shape):
            if int(d) != 1:
                return tuple(range(i, x_ndim))
    return tuple(range(1, x_ndim))


def _scalar(v, what):
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.size != 1:
        raise ValueError(f"{what} must be a scalar or a 1-element tensor")
    return float(a[0])


def _operand(p, x_shape, axes, what):
    """p as float64, broadcastable against x_shape."""
    a = np.asarray(p, dtype=np.float64)
    nd = len(x_shape)
    if a.ndim != nd:
        norm_shape = tuple(x_shape[i] if i in axes else 1 for i in range(nd))
        if a.size == int(np.prod(norm_shape, dtype=np.int64)) and a.ndim <= nd:
            a = a.reshape(norm_shape)
        elif a.ndim < nd:
            a = a.reshape((1,) * (nd - a.ndim) + a.shape)
        else:
            raise ValueError(f"{what} of shape {a.shape} does not fit x {tuple(x_shape)}")
    try:
        np.broadcast_shapes(a.shape, tuple(x_shape))
    except ValueError:
        raise ValueError(f"{what} of shape {a.shape} does not broadcast to x {tuple(x_shape)}") from None
    return a


def _unbroadcast(g, shape):
    """Sum g down to the (broadcast-compatible) *shape*."""
    shape = tuple(shape)
    nd = g.ndim
    full = (1,) * (nd - len(shape)) + shape if len(shape) < nd else shape
    axes = tuple(i for i in range(nd) if full[i] == 1 and g.shape[i] != 1)
    r = g.sum(axis=axes, keepdims=True) if axes else g
    return r.reshape(shape)


def _cdt(*arrays):
    return compute_dtype_for(*(np.asarray(a).dtype for a in arrays))


def _stat(p, x_shape, axes, what):
    a = np.asarray(p, dtype=np.float64)
    keep = tuple(1 if i in axes else x_shape[i] for i in range(len(x_shape)))
    if a.size != int(np.prod(keep, dtype=np.int64)):
        raise ValueError(f"{what} has {a.size} elements, expected shape {keep}")
    return a.reshape(keep)


def layernorm_fwd(x, scale, bias, epsilon, normalized_dim_count=None,
                  stats_shape=None) -> LayernormFwdResult:
    """Layer-norm forward.  Returns ``(y, mean, inv_variance)`` (stats keep-dims)."""
    x = np.asarray(x)
    cdt = _cdt(x)
    axes = normalized_axes(x.ndim, normalized_dim_count, np.shape(scale), stats_shape)
    eps = _scalar(epsilon, "epsilon")
    xd = x.astype(np.float64)
    mu = xd.mean(axis=axes, keepdims=True)
    xc = xd - mu
    inv = 1.0 / np.sqrt(np.mean(xc * xc, axis=axes, keepdims=True) + eps)
    s = _operand(scale, x.shape, axes, "scale")
    b = _operand(bias, x.shape, axes, "bias")
    y = xc * inv * s + b
    return LayernormFwdResult(y.astype(cdt), mu.astype(cdt), inv.astype(cdt))


def layernorm_bwd(dy, x, scale, mean=None, inv_variance=None, epsilon=None,
                  normalized_dim_count=None, bias_shape=None) -> NormBwdResult:
    """Layer-norm backward.  Returns ``(dx, dscale, dbias)``; dscale has scale's
    shape, dbias has *bias_shape* (default: scale's shape).

    mean / inv_variance are the saved statistics; when absent they are
    recomputed from x with *epsilon*."""
    dy = np.asarray(dy)
    x = np.asarray(x)
    if dy.shape != x.shape:
        raise ValueError(f"dy {dy.shape} and x {x.shape} differ")
    cdt = _cdt(x, dy)
    stats_shape = None
    for st in (mean, inv_variance):
        if st is not None and np.ndim(st) == x.ndim:
            stats_shape = np.shape(st)
            break
    axes = normalized_axes(x.ndim, normalized_dim_count, np.shape(scale), stats_shape)
    xd = x.astype(np.float64)
    if mean is None or inv_variance is None:
        if epsilon is None and inv_variance is None:
            raise ValueError("inv_variance not given: epsilon is needed to recompute it")
        mu = xd.mean(axis=axes, keepdims=True) if mean is None else _stat(mean, x.shape, axes, "mean")
        if inv_variance is None:
            xc0 = xd - mu
            inv = 1.0 / np.sqrt(np.mean(xc0 * xc0, axis=axes, keepdims=True)
                                + _scalar(epsilon, "epsilon"))
        else:
            inv = _stat(inv_variance, x.shape, axes, "inv_variance")
    else:
        mu = _stat(mean, x.shape, axes, "mean")
        inv = _stat(inv_variance, x.shape, axes, "inv_variance")
    s = _operand(scale, x.shape, axes, "scale")
    dyd = dy.astype(np.float64)
    xhat = (xd - mu) * inv
    g = dyd * s
    dx = inv * (g - g.mean(axis=axes, keepdims=True)
                - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    sshape = np.shape(scale)
    dscale = _unbroadcast(dyd * xhat, s.shape).reshape(sshape)
    bshape = sshape if bias_shape is None else tuple(bias_shape)
    dbias = _unbroadcast(dyd, s.shape).reshape(bshape)
    return NormBwdResult(dx.astype(cdt), dscale.astype(cdt), dbias.astype(cdt))


def rmsnorm_fwd(x, scale, epsilon, bias=None, normalized_dim_count=None,
                stats_shape=None) -> RmsnormFwdResult:
    """RMS-norm forward.  Returns ``(y, inv_rms)`` (inv_rms keep-dims)."""
    x = np.asarray(x)
    cdt = _cdt(x)
    axes = normalized_axes(x.ndim, normalized_dim_count, np.shape(scale), stats_shape)
    eps = _scalar(epsilon, "epsilon")
    xd = x.astype(np.float64)
    inv = 1.0 / np.sqrt(np.mean(xd * xd, axis=axes, keepdims=True) + eps)
    y = xd * inv * _operand(scale, x.shape, axes, "scale")
    if bias is not None:
        y = y + _operand(bias, x.shape, axes, "bias")
    return RmsnormFwdResult(y.astype(cdt), inv.astype(cdt))


def rmsnorm_bwd(dy, x, scale, inv_rms, normalized_dim_count=None,
                bias_shape=None) -> NormBwdResult:
    """RMS-norm backward.  Returns ``(dx, dscale, dbias)``; dbias (the sum of dy
    over the broadcast axes, shape *bias_shape* or scale's) is always computed,
    the caller drops it when the node has no dbias output."""
    dy = np.asarray(dy)
    x = np.asarray(x)
    if dy.shape != x.shape:
        raise ValueError(f"dy {dy.shape} and x {x.shape} differ")
    cdt = _cdt(x, dy)
    stats_shape = np.shape(inv_rms) if np.ndim(inv_rms) == x.ndim else None
    axes = normalized_axes(x.ndim, normalized_dim_count, np.shape(scale), stats_shape)
    inv = _stat(inv_rms, x.shape, axes, "inv_rms")
    s = _operand(scale, x.shape, axes, "scale")
    xd = x.astype(np.float64)
    dyd = dy.astype(np.float64)
    xhat = xd * inv
    g = dyd * s
    dx = inv * (g - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    sshape = np.shape(scale)
    dscale = _unbroadcast(dyd * xhat, s.shape).reshape(sshape)
    bshape = sshape if bias_shape is None else tuple(bias_shape)
    dbias = _unbroadcast(dyd, s.shape).reshape(bshape)
    return NormBwdResult(dx.astype(cdt), dscale.astype(cdt), dbias.astype(cdt))
