"""Convolution kernels: forward, backward data (dgrad) and backward filter (wgrad).

Shapes are logical, whatever the memory layout (pass strided views from
:mod:`.layout`):

* x  : ``(N, C, *S)``          input / dx
* w  : ``(K, C // G, *R)``     filter / dw
* y  : ``(N, K, *O)``          output / dy

with any number of spatial dims (1-D, 2-D, 3-D...).  The group count ``G`` is
``C // w.shape[1]`` (``K`` must be a multiple of ``G``); output channel ``k``
belongs to group ``k // (K // G)`` and sees input channels
``g*Cg ... (g+1)*Cg - 1``.

Parameters (as in ``Convolution*Attributes``): ``pre_padding``,
``post_padding`` (asymmetric, >= 0), ``stride``, ``dilation`` - each a
sequence with one entry per spatial dim (or an int for all, or ``None`` for
0 / 0 / 1 / 1) - and ``conv_mode``:

* ``"HIPDNN_CROSS_CORRELATION"`` (default, what DL frameworks call convolution):
  ``y[n,k,o] = sum_{c,r} x[n, g*Cg + c, o*stride - pre + r*dilation] * w[k, c, r]``
* ``"HIPDNN_CONVOLUTION"``: the same with the filter flipped along every spatial
  dim (``w[k, c, R-1-r]``), i.e. true mathematical convolution.

Short names (``"CONVOLUTION"``, ``"CROSS_CORRELATION"``) and enum objects with
a ``.name`` are accepted too.

Output size per spatial dim: ``O = (S + pre + post - dilation*(R-1) - 1) // stride + 1``.

Numerics: inputs are converted to the accumulation dtype - float32 for
half/bfloat16(decoded)/float32, float64 when any operand is float64, int64 for
an integer ``compute_dtype`` (INT8 data: exact integer sums) - and all
products are summed in it (BLAS sgemm/dgemm; numpy integer matmul).  The result is returned in that
dtype; the caller rounds it to the output type.

Implementation: the input is copied once to a zero-padded channels-last
buffer; forward and wgrad build an im2col matrix over a chunk of the batch with
``as_strided`` and do one (grouped) GEMM per chunk, dgrad does one GEMM per
chunk to get column gradients and scatters them back with one strided add per
filter tap (col2im).  Temporaries are bounded by chunking over the batch.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .dtypes import compute_dtype_for

__all__ = [
    "conv_output_shape",
    "conv_fwd",
    "conv_bwd_data",
    "conv_bwd_filter",
    "is_convolution_mode",
]

#: upper bound, in bytes, of one im2col / column-gradient temporary
CHUNK_BYTES = 48 << 20


def is_convolution_mode(conv_mode) -> bool:
    """True for true convolution (flipped filter), False for cross-correlation."""
    if conv_mode is None:
        return False
    name = getattr(conv_mode, "name", conv_mode)
    if not isinstance(name, str):
        raise TypeError(f"conv_mode must be given by name, got {conv_mode!r}")
    s = name.strip().upper()
    for pre in ("HIPDNN_", "CONV_MODE_"):
        if s.startswith(pre):
            s = s[len(pre):]
    if s == "CONVOLUTION":
        return True
    if s == "CROSS_CORRELATION":
        return False
    raise ValueError(f"unknown convolution mode {conv_mode!r}")


def _per_dim(v, nsp, default, what):
    if v is None:
        return (default,) * nsp
    if np.isscalar(v):
        return (int(v),) * nsp
    t = tuple(int(e) for e in v)
    if len(t) != nsp:
        raise ValueError(f"{what} has {len(t)} entries, expected {nsp}")
    return t


def _params(nsp, pre_padding, post_padding, stride, dilation):
    pre = _per_dim(pre_padding, nsp, 0, "pre_padding")
    post = _per_dim(post_padding, nsp, 0, "post_padding")
    st = _per_dim(stride, nsp, 1, "stride")
    dil = _per_dim(dilation, nsp, 1, "dilation")
    if any(p < 0 for p in pre + post):
        raise ValueError("negative padding is not supported")
    if any(s < 1 for s in st) or any(d < 1 for d in dil):
        raise ValueError("stride and dilation must be >= 1")
    return pre, post, st, dil


def conv_output_shape(x_shape: Sequence[int], w_shape: Sequence[int], pre_padding=None,
                      post_padding=None, stride=None, dilation=None) -> tuple[int, ...]:
    """Logical output shape ``(N, K, *O)`` of a forward convolution."""
    nsp = len(x_shape) - 2
    if nsp < 1 or len(w_shape) != len(x_shape):
        raise ValueError(f"x {tuple(x_shape)} and w {tuple(w_shape)} ranks do not match")
    pre, post, st, dil = _params(nsp, pre_padding, post_padding, stride, dilation)
    out = []
    for s, r, a, b, t, d in zip(x_shape[2:], w_shape[2:], pre, post, st, dil):
        span = s + a + b - d * (r - 1) - 1
        if span < 0:
            raise ValueError("filter (with dilation) is larger than the padded input")
        out.append(span // t + 1)
    return (int(x_shape[0]), int(w_shape[0])) + tuple(out)


def _groups(C, K, Cg):
    if Cg <= 0 or C % Cg:
        raise ValueError(f"input channels {C} not a multiple of filter channels {Cg}")
    G = C // Cg
    if K % G:
        raise ValueError(f"output channels {K} not a multiple of group count {G}")
    return G, K // G


def _padded_channels_last(x, pre, post, acc):
    """Zero-padded copy of x (N, C, *S) as (N, *Sp, C) in dtype acc."""
    N, C = x.shape[:2]
    S = x.shape[2:]
    Sp = tuple(s + a + b for s, a, b in zip(S, pre, post))
    xp = np.zeros((N,) + Sp + (C,), dtype=acc)
    inner = (slice(None),) + tuple(slice(a, a + s) for a, s in zip(pre, S)) + (slice(None),)
    np.copyto(xp[inner], np.moveaxis(x, 1, -1), casting="unsafe")
    return xp


def _chunk(N, per_item_bytes):
    return max(1, min(N, CHUNK_BYTES // max(per_item_bytes, 1)))


def _im2col(xp, n0, n1, O, R, st, dil, G, Cg):
    """Columns (G, nb*prod(O), prod(R)*Cg) for batch items n0:n1 of padded xp."""
    nb = n1 - n0
    sub = xp[n0:n1]
    s = sub.strides
    sp_strides = s[1:-1]
    shape = (nb,) + tuple(O) + tuple(R) + (G, Cg)
    strides = ((s[0],) + tuple(a * t for a, t in zip(sp_strides, st))
               + tuple(a * d for a, d in zip(sp_strides, dil)) + (Cg * s[-1], s[-1]))
    win = as_strided(sub, shape=shape, strides=strides, writeable=False)
    M = nb * int(np.prod(O, dtype=np.int64))
    RC = int(np.prod(R, dtype=np.int64)) * Cg
    if G == 1:
        return win.reshape(1, M, RC)
    nsp = len(O)
    perm = (1 + 2 * nsp,) + tuple(range(0, 1 + 2 * nsp)) + (2 + 2 * nsp,)
    return np.ascontiguousarray(win.transpose(perm)).reshape(G, M, RC)


def _weight_matrix(w, G, Kg, flip, acc):
    """w (K, Cg, *R) -> (G, prod(R)*Cg, Kg) contiguous in dtype acc."""
    K, Cg = w.shape[:2]
    R = w.shape[2:]
    nsp = len(R)
    if flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nsp]
    wg = np.asarray(w).reshape((G, Kg, Cg) + tuple(R))
    perm = (0,) + tuple(range(3, 3 + nsp)) + (2, 1)
    return np.ascontiguousarray(wg.transpose(perm), dtype=acc).reshape(
        G, int(np.prod(R, dtype=np.int64)) * Cg, Kg)


def _weight_matrix_t(w, G, Kg, flip, acc):
    """w (K, Cg, *R) -> (G, Kg, prod(R)*Cg) contiguous in dtype acc (dgrad operand)."""
    K, Cg = w.shape[:2]
    R = w.shape[2:]
    nsp = len(R)
    if flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nsp]
    wg = np.asarray(w).reshape((G, Kg, Cg) + tuple(R))
    perm = (0, 1) + tuple(range(3, 3 + nsp)) + (2,)
    return np.ascontiguousarray(wg.transpose(perm), dtype=acc).reshape(
        G, Kg, int(np.prod(R, dtype=np.int64)) * Cg)


def _acc_dtype(compute_dtype, *arrays):
    if compute_dtype is not None:
        dt = np.dtype(compute_dtype)
        if dt.kind in "iu":
            return np.dtype(np.int64)
        return dt if (dt.kind == "f" and dt.itemsize >= 4) else np.dtype(np.float32)
    return compute_dtype_for(*(np.asarray(a).dtype for a in arrays))


def _conv1x1_fwd(x, w, st, O, Op, acc):
    """1x1 filter, no padding, one group: one GEMM over x's own memory order (no padded copy).
    Channels-last x: (N*Op, C) @ (C, K); otherwise per batch item (K, C) @ (C, Op)."""
    N, C = x.shape[:2]
    K = w.shape[0]
    xs = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in st)]   # (N, C, *O)
    wm = np.asarray(w).reshape(K, C).astype(acc, copy=False)
    xs = xs.astype(acc, copy=False)
    if C > 1 and x.strides[1] == x.itemsize:      # channels-last memory
        xc = np.moveaxis(xs, 1, -1).reshape(N * Op, C)
        y = np.matmul(xc, wm.T)
        return np.moveaxis(y.reshape((N,) + tuple(O) + (K,)), -1, 1)
    y = np.matmul(wm, xs.reshape(N, C, Op))          # (N, K, Op)
    return y.reshape((N, K) + tuple(O))


def conv_fwd(x, w, pre_padding=None, post_padding=None, stride=None, dilation=None,
             conv_mode=None, compute_dtype=None) -> np.ndarray:
    """Forward convolution.  x (N, C, *S), w (K, C//G, *R) -> y (N, K, *O).

    Returns y in the accumulation dtype (a channels-last array seen through a
    transposed view; copy it into the destination layout)."""
    x = np.asarray(x)
    w = np.asarray(w)
    y_shape = conv_output_shape(x.shape, w.shape, pre_padding, post_padding, stride, dilation)
    nsp = x.ndim - 2
    pre, post, st, dil = _params(nsp, pre_padding, post_padding, stride, dilation)
    N, C = x.shape[:2]
    K, Cg = w.shape[:2]
    G, Kg = _groups(C, K, Cg)
    R = tuple(w.shape[2:])
    O = tuple(y_shape[2:])
    acc = _acc_dtype(compute_dtype, x, w)
    y_cl = np.empty((N,) + O + (K,), dtype=acc)
    if y_cl.size == 0:
        return np.moveaxis(y_cl, -1, 1)
    if C == 0 or any(r == 0 for r in R):
        y_cl[...] = 0
        return np.moveaxis(y_cl, -1, 1)
    Op = int(np.prod(O, dtype=np.int64))
    if G == 1 and all(r == 1 for r in R) and not any(pre) and not any(post):
        return _conv1x1_fwd(x, w, st, O, Op, acc)
    xp = _padded_channels_last(x, pre, post, acc)
    wm = _weight_matrix(w, G, Kg, is_convolution_mode(conv_mode), acc)
    RC = wm.shape[1]
    nb = _chunk(N, Op * RC * G * acc.itemsize)
    for n0 in range(0, N, nb):
        n1 = min(N, n0 + nb)
        cols = _im2col(xp, n0, n1, O, R, st, dil, G, Cg)
        if G == 1:
            y_cl[n0:n1] = np.matmul(cols[0], wm[0]).reshape((n1 - n0,) + O + (K,))
        else:
            yg = np.matmul(cols, wm)  # (G, M, Kg)
            y_cl[n0:n1] = yg.transpose(1, 0, 2).reshape((n1 - n0,) + O + (K,))
    return np.moveaxis(y_cl, -1, 1)


def conv_bwd_data(dy, w, x_shape, pre_padding=None, post_padding=None, stride=None,
                  dilation=None, conv_mode=None, compute_dtype=None) -> np.ndarray:
    """Backward data.  dy (N, K, *O), w (K, C//G, *R), x_shape = (N, C, *S) -> dx (N, C, *S).

    ``dx = d(sum(y * dy)) / dx`` for the forward convolution with the same
    parameters (transposed convolution).  Input positions that no output
    position reads (e.g. left over by a stride) get zero."""
    dy = np.asarray(dy)
    w = np.asarray(w)
    x_shape = tuple(int(d) for d in x_shape)
    exp = conv_output_shape(x_shape, w.shape, pre_padding, post_padding, stride, dilation)
    if tuple(dy.shape) != exp:
        raise ValueError(f"dy shape {dy.shape} does not match the expected output shape {exp}")
    nsp = len(x_shape) - 2
    pre, post, st, dil = _params(nsp, pre_padding, post_padding, stride, dilation)
    N, C = x_shape[:2]
    S = x_shape[2:]
    K, Cg = w.shape[:2]
    G, Kg = _groups(C, K, Cg)
    R = tuple(w.shape[2:])
    O = tuple(dy.shape[2:])
    acc = _acc_dtype(compute_dtype, dy, w)
    Sp = tuple(s + a + b for s, a, b in zip(S, pre, post))
    # Accumulate in the layout whose innermost run is longer: channels-last when
    # C >= the last output extent, channels-first otherwise (e.g. a 3-channel stem).
    chan_last = C >= (O[-1] if O else 1)
    if chan_last:
        dxp = np.zeros((N,) + Sp + (G, Cg), dtype=acc)
    else:
        dxp = np.zeros((N, G, Cg) + Sp, dtype=acc)
    if dxp.size and dy.size and all(R):
        wt = _weight_matrix_t(w, G, Kg, is_convolution_mode(conv_mode), acc)  # (G, Kg, RC)
        Op = int(np.prod(O, dtype=np.int64))
        RC = wt.shape[2]
        nb = _chunk(N, Op * RC * G * acc.itemsize)
        taps = list(itertools.product(*(range(r) for r in R)))
        # dcols axes: 0=G, 1=m, 2..1+nsp=O, 2+nsp..1+2nsp=R, 2+2nsp=Cg
        if chan_last:
            perm = (1,) + tuple(range(2, 2 + 2 * nsp)) + (0, 2 + 2 * nsp)  # (m, *O, *R, G, Cg)
        else:
            perm = (1, 0, 2 + 2 * nsp) + tuple(range(2, 2 + 2 * nsp))  # (m, G, Cg, *O, *R)
        all_o = (slice(None),) * nsp
        for n0 in range(0, N, nb):
            n1 = min(N, n0 + nb)
            m = n1 - n0
            # dy chunk as (G, M, Kg)
            dyc = np.moveaxis(dy[n0:n1], 1, -1).reshape((m * Op, G, Kg)).astype(acc, copy=False)
            dyg = np.ascontiguousarray(dyc.transpose(1, 0, 2))
            dcols = np.matmul(dyg, wt).reshape((G, m) + O + R + (Cg,))  # (G, M, RC) -> split
            dct = dcols.transpose(perm)
            for tap in taps:
                sp = tuple(slice(r * d, r * d + t * (o - 1) + 1, t)
                           for r, d, t, o in zip(tap, dil, st, O))
                if chan_last:
                    dxp[(slice(n0, n1),) + sp + (slice(None), slice(None))] += \
                        dct[(slice(None),) + all_o + tuple(tap) + (slice(None), slice(None))]
                else:
                    dxp[(slice(n0, n1), slice(None), slice(None)) + sp] += \
                        dct[(slice(None), slice(None), slice(None)) + all_o + tuple(tap)]
    crop = tuple(slice(a, a + s) for a, s in zip(pre, S))
    if chan_last:
        dx_cl = dxp.reshape((N,) + Sp + (C,))[(slice(None),) + crop + (slice(None),)]
        return np.moveaxis(dx_cl, -1, 1)
    return dxp.reshape((N, C) + Sp)[(slice(None), slice(None)) + crop]


def conv_bwd_filter(x, dy, w_shape, pre_padding=None, post_padding=None, stride=None,
                    dilation=None, conv_mode=None, compute_dtype=None) -> np.ndarray:
    """Backward filter.  x (N, C, *S), dy (N, K, *O), w_shape = (K, C//G, *R) -> dw.

    ``dw = d(sum(y * dy)) / dw`` for the forward convolution with the same
    parameters (for ``HIPDNN_CONVOLUTION`` mode the gradient is w.r.t. the
    unflipped filter as stored)."""
    x = np.asarray(x)
    dy = np.asarray(dy)
    w_shape = tuple(int(d) for d in w_shape)
    exp = conv_output_shape(x.shape, w_shape, pre_padding, post_padding, stride, dilation)
    if tuple(dy.shape) != exp:
        raise ValueError(f"dy shape {dy.shape} does not match the expected output shape {exp}")
    nsp = x.ndim - 2
    pre, post, st, dil = _params(nsp, pre_padding, post_padding, stride, dilation)
    N, C = x.shape[:2]
    K, Cg = w_shape[:2]
    G, Kg = _groups(C, K, Cg)
    R = w_shape[2:]
    O = tuple(dy.shape[2:])
    acc = _acc_dtype(compute_dtype, x, dy)
    RC = int(np.prod(R, dtype=np.int64)) * Cg
    dwm = np.zeros((G, RC, Kg), dtype=acc)
    if N and dy.size and RC:
        xp = _padded_channels_last(x, pre, post, acc)
        Op = int(np.prod(O, dtype=np.int64))
        nb = _chunk(N, Op * RC * G * acc.itemsize)
        for n0 in range(0, N, nb):
            n1 = min(N, n0 + nb)
            m = n1 - n0
            cols = _im2col(xp, n0, n1, O, R, st, dil, G, Cg)  # (G, M, RC)
            dyc = np.moveaxis(dy[n0:n1], 1, -1).reshape((m * Op, G, Kg)).astype(acc, copy=False)
            dyg = dyc.transpose(1, 0, 2)  # (G, M, Kg)
            dwm += np.matmul(cols.transpose(0, 2, 1), dyg)
    # (G, *R, Cg, Kg) -> (G, Kg, Cg, *R) -> (K, Cg, *R)
    dw = dwm.reshape((G,) + tuple(R) + (Cg, Kg))
    perm = (0, 2 + nsp, 1 + nsp) + tuple(range(1, 1 + nsp))
    dw = dw.transpose(perm).reshape(w_shape)
    if is_convolution_mode(conv_mode):
        dw = dw[(slice(None), slice(None)) + (slice(None, None, -1),) * nsp]
    return dw
