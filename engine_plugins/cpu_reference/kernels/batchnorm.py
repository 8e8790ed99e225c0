"""Batch normalisation kernels (spatial / per-channel, channel axis 1).

x and dy are ``(N, C, *spatial)`` logical views (any layout).  Per-channel
operands (scale, bias, mean, variance, inv_variance, running stats) may be
given with any shape holding C elements - ``(C,)``, ``(1, C, 1, 1)``... -
and per-channel results are returned with the keep-dims shape
``(1, C, 1, ..., 1)`` (reshape them to the destination tensor's dims).
epsilon and momentum may be Python scalars or 1-element arrays (hipDNN passes
them as tensors).

Numerics: every result is returned in the compute dtype (float32, or float64
when x is float64).  float64 x: statistics accumulate in float64.  float32 x
(inference and training forward): one pass over x computes x - K (K a
per-channel shift estimated from a sample of x, so there is no cancellation)
with per-block float32 sums (pairwise along contiguous rows) of x - K and
(x - K)^2 combined per channel in float64; y is then one per-channel
multiply-add in place, over cache-sized blocks of the dense view of x.  The statistics
used to normalise are the *biased* (population) batch mean/variance.

Running statistics (training forward, cuDNN semantics):
``next_running_mean = (1 - momentum) * running_mean + momentum * batch_mean``;
``next_running_var  = (1 - momentum) * running_var + momentum * batch_var_unbiased``
where ``batch_var_unbiased = batch_var * M / (M - 1)`` with ``M = N * prod(spatial)``
(Bessel's correction, as cuDNN and PyTorch do; ``M == 1`` uses the biased
variance).  ``unbiased_running_variance=False`` switches to the biased one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import blocked
from .dtypes import compute_dtype_for

__all__ = [
    "BatchnormTrainResult",
    "BatchnormBwdResult",
    "batchnorm_inference",
    "batchnorm_inference_variance",
    "batchnorm_train_fwd",
    "batchnorm_bwd",
]


class BatchnormTrainResult(NamedTuple):
    y: np.ndarray
    mean: np.ndarray  # saved batch mean, (1, C, 1...)
    inv_variance: np.ndarray  # saved 1/sqrt(batch_var + eps), (1, C, 1...)
    next_running_mean: np.ndarray | None
    next_running_variance: np.ndarray | None


class BatchnormBwdResult(NamedTuple):
    dx: np.ndarray
    dscale: np.ndarray  # (1, C, 1...)
    dbias: np.ndarray  # (1, C, 1...)


def _scalar(v, what):
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.size != 1:
        raise ValueError(f"{what} must be a scalar or a 1-element tensor, got {a.size} elements")
    return float(a[0])


def _chan(p, x_ndim, C, what, dtype=np.float64):
    a = np.asarray(p)
    if a.size != C:
        raise ValueError(f"{what} has {a.size} elements, expected C={C}")
    return a.astype(dtype, copy=False).reshape((1, C) + (1,) * (x_ndim - 2))


def _cdt(*arrays):
    return compute_dtype_for(*(np.asarray(a).dtype for a in arrays))


def _axes(x):
    return (0,) + tuple(range(2, x.ndim))


# ------------------------------------------------------------------ float32 fast paths
# x in float32 (float / half / bf16 compute): the per-channel work runs over a dense 2-D view of
# x's memory in cache-sized row blocks (kernels/blocked.py), in place in the output.
AFFINE_BLOCK = 1 << 18    # elements per block of the per-channel multiply-add


def _rows_per_block(L, per_row):
    r = max(1, blocked.BLOCK // max(L, 1))
    return r if per_row else min(r, 64)   # column sums accumulate sequentially: keep blocks short


def _param_for(v, per_row, dims):
    """Per-channel float64 (C,) -> float32 operand broadcasting against a (rows, L) block."""
    outer, C, inner = dims
    v = np.asarray(v, np.float64).reshape(C)
    if per_row:
        return np.tile(v, outer).astype(np.float32)[:, None]
    return np.repeat(v, inner).astype(np.float32)[None, :]


def _affine_f32(x, a, c, out, shift=None):
    """out = (x - shift) * a + c per channel (a, c, shift: float64 (C,)); None if not dense."""
    cv = blocked.channel_rows(x)
    ov = blocked.channel_rows(out)
    if cv is None or ov is None or cv[2] != ov[2] or cv[1] != ov[1] or cv[0].shape != ov[0].shape:
        return None
    x2, per_row, dims = cv
    o2 = ov[0]
    if shift is not None:   # (x - shift) * a + c = x * a + (c - shift * a): two passes
        c = np.asarray(c, np.float64) - np.asarray(shift, np.float64) * np.asarray(a, np.float64)
        shift = None
    A, Cc = _param_for(a, per_row, dims), _param_for(c, per_row, dims)
    K = None
    R, L = x2.shape
    rb = max(1, AFFINE_BLOCK // max(L, 1))   # large blocks: two ufunc calls per block

    def blk(s, e):
        r0, r1 = s * rb, min(R, e * rb)
        sl = slice(r0, r1) if per_row else slice(None)
        o = o2[r0:r1]
        if K is None:
            np.multiply(x2[r0:r1], A[sl], out=o)
        else:
            np.subtract(x2[r0:r1], K[sl], out=o)
            o *= A[sl]
        o += Cc[sl]
    nblk = -(-R // rb)
    blocked.run(blk, nblk, block=1, work_size=x.size)
    return out


def _shifted_stats_f32(x, out):
    """One pass over x: out = x - K (K: a per-channel shift from a sample of x), and per-channel
    float64 sums S1 = sum(x - K), S2 = sum((x - K)^2), accumulated in float32 within blocks
    (pairwise along rows) and combined in float64.  Returns (K, S1, S2) as float64 (C,) or None."""
    cv = blocked.channel_rows(x)
    ov = blocked.channel_rows(out)
    if cv is None or ov is None or cv[2] != ov[2] or cv[1] != ov[1] or cv[0].shape != ov[0].shape:
        return None
    x2, per_row, dims = cv
    o2 = ov[0]
    outer, C, inner = dims
    R, L = x2.shape
    if per_row:
        Kc = x2[:C].astype(np.float64).mean(axis=1)
    else:
        Kc = x2[:min(R, 64)].astype(np.float64).mean(axis=0).reshape(C, inner).mean(axis=1)
    K = _param_for(Kc, per_row, dims)
    rb = _rows_per_block(L, per_row)
    nblk = -(-R // rb)
    if per_row:
        s1 = np.zeros(R)
        s2 = np.zeros(R)
    else:
        s1 = np.zeros((nblk, L))
        s2 = np.zeros((nblk, L))

    def blk(s, e):
        for b in range(s, e):
            r0, r1 = b * rb, min(R, (b + 1) * rb)
            o = o2[r0:r1]
            (t,) = blocked.scratch(1, o.size)
            t = t.reshape(o.shape)
            if per_row:
                np.subtract(x2[r0:r1], K[r0:r1], out=o)
                s1[r0:r1] = o.sum(axis=1)
                np.multiply(o, o, out=t)
                s2[r0:r1] = t.sum(axis=1)
            else:
                np.subtract(x2[r0:r1], K, out=o)
                s1[b] = o.sum(axis=0)
                np.multiply(o, o, out=t)
                s2[b] = t.sum(axis=0)
    blocked.run(blk, nblk, block=1, work_size=x.size)
    if per_row:
        S1 = s1.reshape(outer, C).sum(axis=0)
        S2 = s2.reshape(outer, C).sum(axis=0)
    else:
        S1 = s1.sum(axis=0).reshape(C, inner).sum(axis=1)
        S2 = s2.sum(axis=0).reshape(C, inner).sum(axis=1)
    return Kc, S1, S2


def _f32_ok(x, out=None):
    return (x.dtype == np.float32 and x.ndim >= 2 and x.size > 0
            and (out is None or (out.dtype == np.float32 and out.shape == x.shape
                                 and not np.shares_memory(out, x))))


def batchnorm_inference(x, scale, bias, mean, inv_variance, out=None) -> np.ndarray:
    """y = scale * (x - mean) * inv_variance + bias  (BatchnormInferenceAttributes).

    float32 x: ``(x - mean) * (scale * inv_variance) + bias`` in float32 per channel, in place
    in the result (*out*, a float32 array of x's shape, when given)."""
    x = np.asarray(x)
    C = x.shape[1]
    cdt = _cdt(x)
    s, b, m, iv = (_chan(a, x.ndim, C, n) for a, n in
                   ((scale, "scale"), (bias, "bias"), (mean, "mean"), (inv_variance, "inv_variance")))
    if cdt == np.float32 and _f32_ok(x, out):
        dst = np.empty_like(x) if out is None else out
        r = _affine_f32(x, (iv * s).reshape(C), b.reshape(C), dst, shift=m.reshape(C))
        if r is not None:
            return r
    y = ((x.astype(np.float64) - m) * (iv * s) + b).astype(cdt)
    if out is not None:
        np.copyto(out, y, casting="unsafe")
        return out
    return y


def batchnorm_inference_variance(x, scale, bias, mean, variance, epsilon, out=None) -> np.ndarray:
    """y = scale * (x - mean) / sqrt(variance + epsilon) + bias
    (BatchnormInferenceAttributesVarianceExt)."""
    x = np.asarray(x)
    C = x.shape[1]
    eps = _scalar(epsilon, "epsilon")
    v = _chan(variance, x.ndim, C, "variance")
    return batchnorm_inference(x, scale, bias, mean, 1.0 / np.sqrt(v + eps), out=out)


def batchnorm_train_fwd(x, scale, bias, epsilon, momentum=None, prev_running_mean=None,
                        prev_running_variance=None, unbiased_running_variance=True
                        ) -> BatchnormTrainResult:
    """Training forward (BatchnormAttributes).

    Returns ``(y, mean, inv_variance, next_running_mean, next_running_variance)``;
    the running outputs are ``None`` unless momentum and both previous running
    statistics are given."""
    x = np.asarray(x)
    C = x.shape[1]
    cdt = _cdt(x)
    eps = _scalar(epsilon, "epsilon")
    ax = _axes(x)
    M = x.size // max(C, 1)
    s = _chan(scale, x.ndim, C, "scale")
    b = _chan(bias, x.ndim, C, "bias")
    y = None
    if cdt == np.float32 and _f32_ok(x) and M > 0:
        y = np.empty_like(x)
        st = _shifted_stats_f32(x, y)          # y = x - K
        if st is None:
            y = None
        else:
            K, S1, S2 = st
            d = S1 / M                          # mean - K
            var = np.maximum(S2 / M - d * d, 0.0)
            mean = (K + d).reshape(s.shape)
            var = var.reshape(s.shape)
            inv = 1.0 / np.sqrt(var + eps)
            a = (inv * s).reshape(C)
            _affine_f32(y, a, b.reshape(C) - d * a, y)   # in place: (x - K) * a + (b - d * a)
    if y is None:
        xd = x.astype(np.float64)
        mean = xd.mean(axis=ax, keepdims=True)
        xc = xd - mean
        var = np.mean(xc * xc, axis=ax, keepdims=True)
        inv = 1.0 / np.sqrt(var + eps)
        y = (xc * (inv * s) + b).astype(cdt)
    nrm = nrv = None
    if momentum is not None and prev_running_mean is not None and prev_running_variance is not None:
        mom = _scalar(momentum, "momentum")
        rm = _chan(prev_running_mean, x.ndim, C, "prev_running_mean")
        rv = _chan(prev_running_variance, x.ndim, C, "prev_running_variance")
        uvar = var * (M / (M - 1)) if (unbiased_running_variance and M > 1) else var
        nrm = ((1.0 - mom) * rm + mom * mean).astype(cdt)
        nrv = ((1.0 - mom) * rv + mom * uvar).astype(cdt)
    return BatchnormTrainResult(y, mean.astype(cdt), inv.astype(cdt), nrm, nrv)


def batchnorm_bwd(dy, x, scale, mean=None, inv_variance=None, epsilon=None) -> BatchnormBwdResult:
    """Backward of training-mode batchnorm (BatchnormBackwardAttributes).

    With ``xhat = (x - mean) * inv_variance`` and ``M = N * prod(spatial)``::

        dbias  = sum(dy)
        dscale = sum(dy * xhat)
        dx     = scale * inv_variance * (dy - dbias / M - xhat * dscale / M)

    sums over N and spatial dims.  mean / inv_variance are the saved batch
    statistics; when absent they are recomputed from x with *epsilon*."""
    dy = np.asarray(dy)
    x = np.asarray(x)
    if dy.shape != x.shape:
        raise ValueError(f"dy {dy.shape} and x {x.shape} differ")
    C = x.shape[1]
    cdt = _cdt(x, dy)
    ax = _axes(x)
    M = x.size // max(C, 1)
    xd = x.astype(np.float64)
    if mean is None or inv_variance is None:
        if epsilon is None:
            raise ValueError("mean/inv_variance not given: epsilon is needed to recompute them")
        eps = _scalar(epsilon, "epsilon")
        m = xd.mean(axis=ax, keepdims=True) if mean is None else _chan(mean, x.ndim, C, "mean")
        if inv_variance is None:
            xc0 = xd - m
            iv = 1.0 / np.sqrt(np.mean(xc0 * xc0, axis=ax, keepdims=True) + eps)
        else:
            iv = _chan(inv_variance, x.ndim, C, "inv_variance")
    else:
        m = _chan(mean, x.ndim, C, "mean")
        iv = _chan(inv_variance, x.ndim, C, "inv_variance")
    s = _chan(scale, x.ndim, C, "scale")
    dyd = dy.astype(np.float64)
    xhat = (xd - m) * iv
    dbias = dyd.sum(axis=ax, keepdims=True)
    dscale = (dyd * xhat).sum(axis=ax, keepdims=True)
    dx = (s * iv) * (dyd - dbias / M - xhat * (dscale / M))
    return BatchnormBwdResult(dx.astype(cdt), dscale.astype(cdt), dbias.astype(cdt))
