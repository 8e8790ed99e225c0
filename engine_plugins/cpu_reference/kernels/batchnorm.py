"""Batch normalisation kernels (spatial / per-channel, channel axis 1).

x and dy are ``(N, C, *spatial)`` logical views (any layout).  Per-channel
operands (scale, bias, mean, variance, inv_variance, running stats) may be
given with any shape holding C elements - ``(C,)``, ``(1, C, 1, 1)``... -
and per-channel results are returned with the keep-dims shape
``(1, C, 1, ..., 1)`` (reshape them to the destination tensor's dims).
epsilon and momentum may be Python scalars or 1-element arrays (hipDNN passes
them as tensors).

Numerics: statistics are accumulated in float64 and every result is returned
in the compute dtype (float32, or float64 when x is float64).  The statistics
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


def batchnorm_inference(x, scale, bias, mean, inv_variance) -> np.ndarray:
    """y = scale * (x - mean) * inv_variance + bias  (BatchnormInferenceAttributes)."""
    x = np.asarray(x)
    C = x.shape[1]
    cdt = _cdt(x)
    s, b, m, iv = (_chan(a, x.ndim, C, n) for a, n in
                   ((scale, "scale"), (bias, "bias"), (mean, "mean"), (inv_variance, "inv_variance")))
    return ((x.astype(np.float64) - m) * (iv * s) + b).astype(cdt)


def batchnorm_inference_variance(x, scale, bias, mean, variance, epsilon) -> np.ndarray:
    """y = scale * (x - mean) / sqrt(variance + epsilon) + bias
    (BatchnormInferenceAttributesVarianceExt)."""
    x = np.asarray(x)
    C = x.shape[1]
    eps = _scalar(epsilon, "epsilon")
    v = _chan(variance, x.ndim, C, "variance")
    return batchnorm_inference(x, scale, bias, mean, 1.0 / np.sqrt(v + eps))


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
    xd = x.astype(np.float64)
    mean = xd.mean(axis=ax, keepdims=True)
    xc = xd - mean
    var = np.mean(xc * xc, axis=ax, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    s = _chan(scale, x.ndim, C, "scale")
    b = _chan(bias, x.ndim, C, "bias")
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
