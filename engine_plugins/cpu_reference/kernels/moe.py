"""MoE grouped matmul (forward) and its weight gradient for the CPU reference engine.

Shapes (cuDNN / hipDNN): token [1, T, K], weight [E, K, N], first_token_offset [G, 1, 1]
(int32, G = B * E, laid out [batch][expert]: group g uses expert ``g % E``), output [1, R, N];
token_index / token_ks [1, R', 1] (int32).

Group g owns the routed rows ``[off[g], off[g+1])`` (the last group runs to ``rows_total``:
the token rows in NONE / SCATTER mode, the token_index rows in GATHER mode).  For routed row r:

* NONE:    src = r,               dst = r
* GATHER:  src = token_index[r],  dst = r
* SCATTER: src = r,               dst = token_index[r] * top_k + token_ks[r]

``output[dst] = token[src] @ weight[expert]`` (compute type accumulation); output rows that no
group writes are zero.  Offsets must lie in [0, rows_total] and be non-decreasing; sources and
destinations must be in range, SCATTER destinations distinct and token_ks in [0, top_k):
otherwise :class:`RoutingError` (the engine turns it into an execute error naming the entry).

Backward (``MoeGroupedMatmulBwdAttributes``, NONE routing only: the table has no routing
tensors): ``dweight[e] = token[rows of e]^T @ doutput[rows of e]``; here G must equal E and
off[0] must be 0.
"""
from __future__ import annotations

import numpy as np

NONE, GATHER, SCATTER = "NONE", "GATHER", "SCATTER"


class RoutingError(ValueError):
    pass


def _bounds(off, rows_total):
    off = np.asarray(off, np.int64).reshape(-1)
    for g, o in enumerate(off):
        if o < 0 or o > rows_total:
            raise RoutingError(f"first_token_offset[{g}] = {int(o)} is out of range "
                               f"[0, {rows_total}]")
        if g and o < off[g - 1]:
            raise RoutingError(f"first_token_offset is not non-decreasing at entry {g} "
                               f"({int(off[g - 1])} then {int(o)})")
    ends = np.append(off[1:], rows_total)
    return off, ends


def routing(mode, token_rows, out_rows, offsets, experts, token_index=None, token_ks=None,
            top_k=0):
    """(src row, expert) per output row (-1 = not written)."""
    rows_total = token_rows if mode != GATHER else int(np.asarray(token_index).size)
    starts, ends = _bounds(offsets, rows_total)
    src = np.full(out_rows, -1, np.int64)
    exp = np.full(out_rows, -1, np.int64)
    ti = None if token_index is None else np.asarray(token_index, np.int64).reshape(-1)
    tk = None if token_ks is None else np.asarray(token_ks, np.int64).reshape(-1)
    for g, (a, b) in enumerate(zip(starts, ends)):
        if b <= a:
            continue
        r = np.arange(a, b)
        if mode == NONE:
            s, d = r, r
        elif mode == GATHER:
            s, d = ti[r], r
        else:
            k = tk[r]
            bad = np.nonzero((k < 0) | (k >= top_k))[0]
            if bad.size:
                raise RoutingError(f"token_ks[{int(r[bad[0]])}] = {int(k[bad[0]])} is out of "
                                   f"range [0, {top_k})")
            s, d = r, ti[r] * top_k + k
        bad = np.nonzero((s < 0) | (s >= token_rows))[0]
        if bad.size:
            raise RoutingError(f"routed source row {int(s[bad[0]])} (routed row {int(r[bad[0]])})"
                               f" is out of range [0, {token_rows})")
        bad = np.nonzero((d < 0) | (d >= out_rows))[0]
        if bad.size:
            raise RoutingError(f"routed destination row {int(d[bad[0]])} is out of range "
                               f"[0, {out_rows})")
        if (exp[d] >= 0).any() or np.unique(d).size != d.size:
            raise RoutingError("two routed rows write the same output row (SCATTER destinations"
                               " must be distinct)")
        src[d] = s
        exp[d] = g % experts
    return src, exp


def forward(token, weight, offsets, out_rows, mode, token_index=None, token_ks=None, top_k=0,
            compute_dtype=np.float32):
    cdt = np.dtype(compute_dtype)
    tok = np.asarray(token, cdt).reshape(token.shape[1], token.shape[2])
    w = np.asarray(weight, cdt)
    E, _, N = w.shape
    src, exp = routing(mode, tok.shape[0], out_rows, offsets, E, token_index, token_ks, top_k)
    out = np.zeros((out_rows, N), cdt)
    for e in range(E):
        rows = np.nonzero(exp == e)[0]
        if rows.size:
            out[rows] = tok[src[rows]] @ w[e]
    return out.reshape(1, out_rows, N)


def backward_weight(doutput, token, offsets, experts, compute_dtype=np.float32):
    cdt = np.dtype(compute_dtype)
    dout = np.asarray(doutput, cdt).reshape(doutput.shape[1], doutput.shape[2])
    tok = np.asarray(token, cdt).reshape(token.shape[1], token.shape[2])
    off = np.asarray(offsets, np.int64).reshape(-1)
    if off.size != experts:
        raise RoutingError(f"first_token_offset has {off.size} entries for {experts} experts")
    if off.size and off[0] != 0:
        raise RoutingError(f"first_token_offset[0] must be 0 (is {int(off[0])})")
    starts, ends = _bounds(off, tok.shape[0])
    dw = np.zeros((experts, tok.shape[1], dout.shape[1]), cdt)
    for e, (a, b) in enumerate(zip(starts, ends)):
        if b > a:
            dw[e] = tok[a:b].T @ dout[a:b]
    return dw
