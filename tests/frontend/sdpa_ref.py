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


# ----------------------------------------------------------------------------- the newer roles
TILE = 128


def block_bit(bm, b, h, i, j):
    """Whether score (i, j) survives the packed block mask ([B|1, H|1, row tiles, bytes]):
    bit (j // 128) % 8 of byte (j // 128) // 8 of row tile i // 128, least significant first."""
    row = bm[b if bm.shape[0] > 1 else 0, h if bm.shape[1] > 1 else 0, i // TILE]
    c = j // TILE
    return (int(row[c // 8]) >> (c % 8)) & 1 == 1


def forward_full(q, k, v, scale=1.0, sq=None, skv=None, causal=False, causal_br=False, left=None,
                 right=None, br=False, mask=None, mask_bool=False, alibi=False, block=None,
                 sink=None, fp8=None):
    """Row-by-row float64 forward with every role: returns (O, lse, max, sum_exp, amax_s,
    amax_o).  ``sink``: one logit per query head joining each unpadded row's softmax without a
    value; ``fp8``: dict(descale_q, descale_k, descale_v, descale_s, scale_s, scale_o, fmt) - P
    is rounded to ``fmt`` after scale_s, O = descale_s * descale_v * P8 V (amax before
    scale_o; the returned O is times scale_o)."""
    q, k, v = (np.asarray(x, F64) for x in (q, k, v))
    B, H, Sq, _ = q.shape
    Hkv, Skv, Dv = k.shape[1], k.shape[2], v.shape[3]
    O = np.zeros((B, H, Sq, Dv))
    lse = np.full((B, H, Sq, 1), np.inf)
    mx = np.full((B, H, Sq, 1), -np.inf)
    se = np.zeros((B, H, Sq, 1))
    sl = slopes(H) if alibi else None
    qk = scale if fp8 is None else scale * fp8["descale_q"] * fp8["descale_k"]
    amax_s = amax_o = 0.0
    for b in range(B):
        lq = Sq if sq is None else int(sq[b])
        lkv = Skv if skv is None else int(skv[b])
        for h in range(H):
            kh = h // (H // Hkv)
            for i in range(lq):
                cols = keep_cols(i, Skv, lq, lkv, causal, causal_br, left, right, br)
                s = {}
                for j in range(Skv):
                    x = float(np.dot(q[b, h, i], k[b, kh, j])) * qk
                    if mask is not None:
                        mrow = bcast(mask, b, h)
                        mrow = np.broadcast_to(mrow[i if mrow.shape[0] > 1 else 0], (Skv,))
                        if mask_bool:
                            if not mrow[j]:
                                continue
                        else:
                            x += float(mrow[j])
                    if alibi:
                        x += (j - i) * sl[h]
                    s[j] = x
                cols = [j for j in cols if j in s]
                if block is not None:
                    cols = [j for j in cols if block_bit(block, b, h, i, j)]
                cand = [s[j] for j in cols] + ([float(sink[h])] if sink is not None else [])
                if not cand:
                    continue
                m = max(cand)
                e = {j: math.exp(s[j] - m) for j in cols}
                tot = sum(e.values()) + (math.exp(float(sink[h]) - m) if sink is not None else 0)
                mx[b, h, i, 0], se[b, h, i, 0], lse[b, h, i, 0] = m, tot, m + math.log(tot)
                o = np.zeros(Dv)
                for j in cols:
                    p = e[j] / tot
                    if fp8 is not None:
                        amax_s = max(amax_s, p)
                        p = float(fp8_round(p * fp8["scale_s"], fp8["fmt"]))
                        p *= fp8["descale_s"] * fp8["descale_v"]
                    o += p * v[b, kh, j]
                if fp8 is not None and o.size:
                    amax_o = max(amax_o, float(np.max(np.abs(o))))
                    o = o * fp8["scale_o"]
                O[b, h, i] = o
    return O, lse, mx, se, amax_s, amax_o


# FP8 formats: (exponent bits, mantissa bits, bias, largest finite value)
FP8 = {"FP8_E4M3": (4, 3, 7, 448.0), "FP8_E5M2": (5, 2, 15, 57344.0)}


def fp8_grid(fmt):
    """Every non-negative finite value of ``fmt``, ascending (index = code & 0x7F order)."""
    e_bits, m_bits, bias, top = FP8[fmt]
    vals = []
    for e in range(1 << e_bits):
        for m in range(1 << m_bits):
            x = (m / (1 << m_bits)) * 2.0 ** (1 - bias) if e == 0 else \
                (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)
            if x <= top:
                vals.append(x)
    return vals


def fp8_round(x, fmt):
    """x rounded to ``fmt``: nearest, ties to the even code, magnitudes above the largest
    finite value saturate to it."""
    grid = fp8_grid(fmt)
    a = abs(float(x))
    if a >= grid[-1]:
        r = grid[-1]
    else:
        lo = max(n for n, g in enumerate(grid) if g <= a)
        hi = lo + 1
        dl, dh = a - grid[lo], grid[hi] - a
        r = grid[lo] if dl < dh or (dl == dh and lo % 2 == 0) else grid[hi]
    return -r if x < 0 else r


def fp8_codes(values, fmt):
    """Round then encode to codes (uint8): the code of a grid value is its index | sign."""
    grid = fp8_grid(fmt)
    index = {g: n for n, g in enumerate(grid)}
    out = []
    for x in np.asarray(values, F64).reshape(-1):
        r = fp8_round(x, fmt)
        out.append(index[abs(r)] | (0x80 if r < 0 or (r == 0 and math.copysign(1, x) < 0) else 0))
    return np.asarray(out, np.uint8).reshape(np.shape(values))


def fp8_values(codes, fmt):
    grid = fp8_grid(fmt)
    c = np.asarray(codes, np.int64)
    mag = np.asarray([grid[int(x) & 0x7F] for x in c.reshape(-1)]).reshape(c.shape)
    return np.where(c & 0x80, -mag, mag)


def backward_dS(q, k, v, do, scale=1.0, **kw):
    """dS (the gradient of the scores, before the scale) [B, H, Sq, Skv] in float64 - the
    bias gradient before it is summed to the bias's shape."""
    H = q.shape[1]
    _, _, P = forward(q, k, v, None, scale=scale, **kw)
    do = np.asarray(do, F64)
    dP = np.einsum("bhqd,bhkd->bhqk", do, expand_kv(v, H))
    return P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
