"""Independent float64 references for scaled dot-product attention (used by the CPU and GPU
SDPA tests): the formulas are written here from cuDNN's documented semantics, row by row, and
share no code with the engines.  Also an independent Philox 4x32-10 on Python integers."""
from __future__ import annotations

import math

import numpy as np

F64 = np.float64


def slopes(H):
    """ALiBi slopes (power-of-two heads: 2^(-8h/H); otherwise the interpolated tail)."""
    n = 1
    while n * 2 <= H:
        n *= 2
    out = [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    out += [2.0 ** (-4.0 * (2 * h + 1) / n) for h in range(H - n)]
    return out


def keep_cols(i, Skv, sq, skv, causal=False, causal_br=False, left=None, right=None, br=False):
    """The key columns row i may attend to (a python list)."""
    cols = []
    if i >= sq:
        return cols
    off = (skv - sq) if br else 0
    for j in range(min(Skv, skv)):
        if causal and j > i:
            continue
        if causal_br and j > i + skv - sq:
            continue
        if right is not None and j > i + off + right:
            continue
        if left is not None and j <= i + off - left:
            continue
        cols.append(j)
    return cols


def bcast(m, b, h):
    return m[b if m.shape[0] > 1 else 0, h if m.shape[1] > 1 else 0]


def probs(q, k, scale=1.0, causal=False, causal_br=False, left=None, right=None, br=False,
          seq_q=None, seq_kv=None, mask=None, mask_bool=False, alibi=False):
    """(P [B,H,Sq,Skv] softmax probabilities, lse [B,H,Sq,1], S scores) in float64."""
    q, k = np.asarray(q, F64), np.asarray(k, F64)
    B, H, Sq, D = q.shape
    Hkv, Skv = k.shape[1], k.shape[2]
    P = np.zeros((B, H, Sq, Skv))
    lse = np.full((B, H, Sq, 1), np.inf)
    S = np.zeros((B, H, Sq, Skv))
    sl = slopes(H) if alibi else None
    for b in range(B):
        sq = Sq if seq_q is None else int(seq_q[b])
        skv = Skv if seq_kv is None else int(seq_kv[b])
        for h in range(H):
            kh = h // (H // Hkv)
            for i in range(Sq):
                cols = keep_cols(i, Skv, sq, skv, causal, causal_br, left, right, br)
                s = np.array([float(np.dot(q[b, h, i], k[b, kh, j])) * scale for j in range(Skv)])
                if mask is not None:
                    mrow = bcast(mask, b, h)
                    mrow = mrow[i if mrow.shape[0] > 1 else 0]
                    mrow = np.broadcast_to(mrow, (Skv,))
                    if mask_bool:
                        cols = [j for j in cols if mrow[j]]
                    else:
                        s = s + np.asarray(mrow, F64)
                if alibi:
                    s = s + np.array([(j - i) * sl[h] for j in range(Skv)])
                S[b, h, i] = s
                if not cols:
                    continue
                m = max(s[j] for j in cols)
                e = {j: math.exp(s[j] - m) for j in cols}
                tot = sum(e.values())
                for j in cols:
                    P[b, h, i, j] = e[j] / tot
                lse[b, h, i, 0] = m + math.log(tot)
    return P, lse, S


def expand_kv(x, H):
    return np.repeat(np.asarray(x, F64), H // x.shape[1], axis=1)


def forward(q, k, v, drop=None, **kw):
    """(O, lse, P); drop = keep-mask times scale [B|1, H|1, Sq, Skv] multiplying P."""
    P, lse, _ = probs(q, k, **kw)
    Pd = P if drop is None else P * np.asarray(drop, F64)
    O = np.einsum("bhqk,bhkd->bhqd", Pd, expand_kv(v, q.shape[1]))
    return O, lse, P


def backward(q, k, v, do, drop=None, scale=1.0, **kw):
    """Analytic gradients (dq, dk, dv) of sum(O * do) in float64."""
    H, Hkv = q.shape[1], k.shape[1]
    kw = dict(kw, scale=scale)
    O, lse, P = forward(q, k, v, drop, **kw)
    Z = np.ones_like(P) if drop is None else np.broadcast_to(np.asarray(drop, F64), P.shape)
    do = np.asarray(do, F64)
    ve, ke = expand_kv(v, H), expand_kv(k, H)
    dve = np.einsum("bhqk,bhqd->bhkd", P * Z, do)
    dPd = np.einsum("bhqd,bhkd->bhqk", do, ve)
    dP = dPd * Z
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    dq = np.einsum("bhqk,bhkd->bhqd", dS, ke) * scale
    dke = np.einsum("bhqk,bhqd->bhkd", dS, np.asarray(q, F64)) * scale
    G = H // Hkv
    B, _, Skv, D = k.shape
    dk = dke.reshape(B, Hkv, G, Skv, D).sum(2)
    dv = dve.reshape(B, Hkv, G, Skv, v.shape[3]).sum(2)
    return dq, dk, dv


# ----------------------------------------------------------------------------- Philox
def philox_words(ctr, key):
    """Philox 4x32-10 on python ints: ctr = (c0, c1, c2, c3), key = (k0, k1)."""
    M = 0xFFFFFFFF
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        a = 0xD2511F53 * c0
        b = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((b >> 32) ^ c1 ^ k0) & M, b & M, ((a >> 32) ^ c3 ^ k1) & M, a & M
        k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
    return c0, c1, c2, c3


def dropout_word(seed, offset, b, h, H, i, j, Skv):
    n = offset + i * Skv + j
    s = b * H + h
    w = philox_words(((n >> 2) & 0xFFFFFFFF, n >> 34, s & 0xFFFFFFFF, s >> 32),
                     (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF))
    return w[n & 3]


def keep(seed, offset, b, h, H, i, j, Skv, p):
    thr = min(math.floor(float(np.float32(p)) * 2.0 ** 32), 2 ** 32 - 1)
    return dropout_word(seed, offset, b, h, H, i, j, Skv) >= thr
