"""Resample (pooling) forward / backward for the CPU reference engine.

Tensors are (N, C, spatial...) with 2 or 3 spatial dims, in logical order (any memory layout:
the caller views the buffers).  For output position o and window offset w the input position
is ``o * stride + w - pre_padding``; the post padding only enters the output shape::

    out = floor((in + pre + post - window) / stride) + 1

* ``MAXPOOL``: the largest in-bounds value of the window.  With ``ZERO_PAD`` an out-of-bounds
  position is a candidate 0 (index -1); with ``NEG_INF_PAD`` (and unset) it is skipped.  The
  running maximum starts at float32's lowest value and a candidate replaces it only when
  strictly greater (the first maximum in window order wins; NaN never wins), as hipDNN's
  reference does.  ``index`` is the flattened spatial position in the (unpadded) input plane
  (``h * W + w``, or ``(d * H + h) * W + w``), -1 when no in-bounds element won.
* ``AVGPOOL_INCLUDE_PADDING``: sum / window volume; ``AVGPOOL_EXCLUDE_PADDING``: sum / number
  of in-bounds positions (1 when none).
* Backward: dx = sum over the windows that contain the position of dy / divisor (average), or
  of dy where the window's index names the position (max; the index tensor is required).
"""
from __future__ import annotations

import itertools

import numpy as np

MAXPOOL, AVG_EXCLUDE, AVG_INCLUDE = "MAXPOOL", "AVGPOOL_EXCLUDE_PADDING", "AVGPOOL_INCLUDE_PADDING"
LOWEST = float(np.finfo(np.float32).min)


def output_shape(xs, window, stride, pre, post):
    nsp = len(xs) - 2
    out = []
    for k in range(nsp):
        span = xs[2 + k] + pre[k] + post[k] - window[k]
        if span < 0:
            raise ValueError(f"window {window[k]} is larger than the padded input "
                             f"{xs[2 + k] + pre[k] + post[k]} in spatial dim {k}")
        out.append(span // stride[k] + 1)
    return tuple(xs[:2]) + tuple(out)


def _taps(window):
    return list(itertools.product(*[range(w) for w in window]))


def _gather(x, ys, stride, pre, tap):
    """For one window tap: (values (N,C,*out) with out-of-bounds = 0, in-bounds mask, flat idx)."""
    nsp = len(ys) - 2
    xs = x.shape
    idx_axes, masks = [], []
    for k in range(nsp):
        pos = np.arange(ys[2 + k]) * stride[k] + tap[k] - pre[k]
        ok = (pos >= 0) & (pos < xs[2 + k])
        idx_axes.append(np.where(ok, pos, 0))
        masks.append(ok)
    grids = np.ix_(*idx_axes)
    vals = x[(slice(None), slice(None)) + grids]
    mask = masks[0]
    for m in masks[1:]:
        mask = np.multiply.outer(mask, m)
    mask = np.broadcast_to(mask, vals.shape[2:])
    flat = np.zeros(vals.shape[2:], np.int64)
    for k in range(nsp):
        shape = [1] * nsp
        shape[k] = -1
        flat = flat * xs[2 + k] + idx_axes[k].reshape(shape)
    return vals, mask, flat


def forward(x, ys, window, stride, pre, mode, padding_mode, compute_dtype=np.float32):
    """(y, index) in logical shape (index is int64, None unless mode is MAXPOOL)."""
    cdt = np.dtype(compute_dtype)
    x = np.asarray(x, cdt)
    out_sp = tuple(ys[2:])
    if mode == MAXPOOL:
        best = np.full(tuple(ys), LOWEST, cdt)
        index = np.full(tuple(ys), -1, np.int64)
        zero_pad = padding_mode == "ZERO_PAD"
        for tap in _taps(window):
            vals, mask, flat = _gather(x, ys, stride, pre, tap)
            if zero_pad:
                cand = np.where(mask, vals, cdt.type(0))
                cidx = np.where(mask, flat, -1)
                take = cand > best
            else:
                cand, cidx = vals, flat
                take = mask & (vals > best)
            best = np.where(take, cand, best)
            index = np.where(take, np.broadcast_to(cidx, index.shape), index)
        return best, index
    acc = np.zeros(tuple(ys), cdt)
    count = np.zeros(out_sp, np.int64)
    for tap in _taps(window):
        vals, mask, _ = _gather(x, ys, stride, pre, tap)
        acc += np.where(mask, vals, cdt.type(0))
        count += mask
    if mode == AVG_INCLUDE:
        div = np.full(out_sp, int(np.prod(window)), np.int64)
    else:
        div = np.maximum(count, 1)
    return acc / div.astype(cdt), None


def backward(dy, xs, window, stride, pre, mode, index=None, compute_dtype=np.float32):
    """dx (logical shape xs) from dy (and the forward's index for MAXPOOL)."""
    cdt = np.dtype(compute_dtype)
    dy = np.asarray(dy, cdt)
    ys = dy.shape
    dx = np.zeros(tuple(xs), cdt)
    taps = _taps(window)
    if mode != MAXPOOL:
        if mode == AVG_INCLUDE:
            div = np.full(ys[2:], int(np.prod(window)), np.int64)
        else:
            count = np.zeros(ys[2:], np.int64)
            for tap in taps:
                count += _gather(dx[:1, :1], ys, stride, pre, tap)[1]
            div = np.maximum(count, 1)
        g = dy / div.astype(cdt)
    else:
        g = dy
        index = np.asarray(index, np.int64)
    flat_dx = dx.reshape(xs[0], xs[1], -1)
    for tap in taps:
        _, mask, flat = _gather(dx[:1, :1], ys, stride, pre, tap)
        m = np.broadcast_to(mask, ys)
        if mode == MAXPOOL:
            m = m & (index == flat)
        contrib = np.where(m, g, cdt.type(0)).reshape(ys[0], ys[1], -1)
        valid = np.broadcast_to(mask, ys[2:]).reshape(-1)
        tgt = np.broadcast_to(flat, ys[2:]).reshape(-1)[valid]
        # for one tap the in-bounds outputs map to distinct inputs: a plain indexed add
        flat_dx[:, :, tgt] += contrib[:, :, valid]
    return dx
