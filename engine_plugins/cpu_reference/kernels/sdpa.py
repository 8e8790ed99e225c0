"""Scaled dot-product attention (SDPA) forward and backward, numpy.

Shapes: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] with Hq a multiple of Hkv
(MHA / GQA / MQA: query head h reads kv head h // (Hq // Hkv)); o [B, Hq, Sq, Dv]; the row
statistics are [B, Hq, Sq, 1].  Arrays arrive already decoded to the compute dtype (float32,
or float64), any strides.

Scores, in the order cuDNN applies them (cudnn-frontend's reference):

    s = (q @ kᵀ) * scale  (+ attn_mask, additive; a boolean mask keeps True)  (+ ALiBi)
    masked to -inf: padding columns j >= seq_len_kv[b]; the causal / band masks.

Bands (per batch, with the padded lengths when a padding mask is on): with the diagonal offset
``off = 0`` (TOP_LEFT) or ``seq_len_kv - seq_len_q`` (BOTTOM_RIGHT), a right bound R keeps
``j <= i + off + R`` and a left bound L keeps ``j > i + off - L``.  ``causal_mask`` is the
top-left ``j <= i``; ``causal_mask_bottom_right`` is ``j <= i + seq_len_kv - seq_len_q``.

A block mask (UINT8 [B|1, Hq|1, ceil(Sq/128), ceil(ceil(Skv/128)/8)]) keeps score (i, j) when
bit (j // 128) % 8 (least significant first) of byte (j // 128) // 8 in row i // 128 is set.

P = softmax(s) by rows; a sink token (one logit per query head) joins each row's softmax as a
key with no value: max = max(row max, sink), sum_exp = Σ exp(s - max) + exp(sink - max),
stats = max + log(sum_exp).  Dropout multiplies P by the keep mask times the dropout scale (after
the statistics, which describe the undropped softmax); O = P' @ v.  A padded query row
(i >= seq_len_q[b]) - or, without a sink, a row the masks empty - has O = 0, stats = +inf (so
that ``exp(s - stats)`` recomputes P = 0), max = -inf, sum_exp = 0.

FP8 (``SdpaParams.fp8``): the scores use the decoded codes times descale_q * descale_k; P' is
encoded to the fp8 format (saturating, round to nearest even) after multiplying by scale_s,
amax_s = max |P'| (before scale_s); O = (P'8 @ v) * descale_s * descale_v, amax_o = max |O|, and
the returned O is multiplied by scale_o.

Backward (from the forward statistics, as cuDNN does): P = exp(s - stats) on the unmasked
entries, dV = P'ᵀ dO, dP = (dO vᵀ) * Z, D = rowsum(dO * O), dS = P * (dP - D), dQ = scale dS k,
dK = scale dSᵀ q (summed over the query heads of a kv head), dbias = dS summed to the mask's
shape.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import minifloat, philox

TILE = 128   # the block mask's tile edge (rows and columns)


def alibi_slopes(H: int) -> np.ndarray:
    """ALiBi head slopes (Press et al.; the power-of-two interpolation cuDNN's reference uses)."""
    n = 2 ** int(math.floor(math.log2(H)))
    m = [2.0 ** (-8.0 / n * (k + 1)) for k in range(n)]
    if n < H:
        m += [2.0 ** (-4.0 / n * (2 * k + 1)) for k in range(H - n)]
    return np.asarray(m, dtype=np.float64)


@dataclass
class SdpaParams:
    scale: float = 1.0
    alibi: bool = False
    causal: bool = False               # top-left
    causal_bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None
    bottom_right: bool = False         # diagonal alignment of the bounds
    seq_len_q: np.ndarray | None = None    # [B] ints (padding mask)
    seq_len_kv: np.ndarray | None = None
    attn_mask: np.ndarray | None = None    # broadcastable to [B, Hq, Sq, Skv]
    mask_is_bool: bool = False
    # dropout: ("philox", p, seed, offset) | ("mask", mask array, scale) | None
    dropout: tuple | None = None
    dropout_scale: float | None = None
    block_mask: np.ndarray | None = None   # UINT8 [B|1, Hq|1, row tiles, column-tile bytes]
    sink: np.ndarray | None = None         # [Hq] logits
    fp8: "Fp8Scales | None" = None
    extra: dict = field(default_factory=dict)


@dataclass
class Fp8Scales:
    """The fp8 forward's scale factors and the format P is encoded to."""
    p_format: str = "FP8_E4M3"
    descale_q: float = 1.0
    descale_k: float = 1.0
    descale_v: float = 1.0
    descale_s: float = 1.0
    scale_s: float = 1.0
    scale_o: float = 1.0


def block_keep(bm: np.ndarray, Sq: int, Skv: int) -> np.ndarray:
    """Expand a packed block mask [b, h, row tiles, bytes] to booleans [b, h, Sq, Skv]."""
    bits = np.unpackbits(np.asarray(bm, np.uint8)[..., None], axis=-1, bitorder="little")
    bits = bits.reshape(bm.shape[:3] + (bm.shape[3] * 8,)).astype(bool)
    rows = np.arange(Sq) // TILE
    cols = np.arange(Skv) // TILE
    return bits[:, :, rows][:, :, :, cols]


def _lengths(p: SdpaParams, b, Sq, Skv):
    sq = Sq if p.seq_len_q is None else max(0, min(Sq, int(p.seq_len_q[b])))
    skv = Skv if p.seq_len_kv is None else max(0, min(Skv, int(p.seq_len_kv[b])))
    return sq, skv


def allowed(p: SdpaParams, b: int, Sq: int, Skv: int) -> np.ndarray | None:
    """[Sq, Skv] boolean: True where the score takes part (None: everything does)."""
    sq, skv = _lengths(p, b, Sq, Skv)
    bands = p.causal or p.causal_bottom_right or p.left_bound is not None \
        or p.right_bound is not None
    if not bands and sq == Sq and skv == Skv:
        return None
    i = np.arange(Sq)[:, None]
    j = np.arange(Skv)[None, :]
    ok = (i < sq) & (j < skv)
    off = (skv - sq) if p.bottom_right else 0
    if p.causal:
        ok &= j <= i
    if p.causal_bottom_right:
        ok &= j <= i + (skv - sq)
    if p.right_bound is not None:
        ok &= j <= i + off + int(p.right_bound)
    if p.left_bound is not None:
        ok &= j > i + off - int(p.left_bound)
    return ok


def _bias(p: SdpaParams, b, h0, G, Sq, Skv, H, cdt):
    """Additive terms for heads h0..h0+G-1 of batch b: [G or 1, Sq, Skv] or None; plus the
    boolean keep part of a boolean attn_mask (or None)."""
    add = None
    keep = None
    if p.attn_mask is not None:
        m = p.attn_mask
        m = np.broadcast_to(m, (m.shape[0], H, Sq, Skv) if m.ndim == 4 else m.shape)
        mb = m[b if m.shape[0] > 1 else 0, h0:h0 + G]
        if p.mask_is_bool:
            keep = mb.astype(bool)
        else:
            add = mb.astype(cdt)
    if p.alibi:
        slopes = alibi_slopes(H)[h0:h0 + G].astype(cdt)
        dist = (np.arange(Skv)[None, :] - np.arange(Sq)[:, None]).astype(cdt)
        a = slopes[:, None, None] * dist[None]
        add = a if add is None else add + a
    return add, keep


def _dropout_factor(p: SdpaParams, b, h0, G, H, Sq, Skv, cdt):
    """[G, Sq, Skv] keep-mask times scale (or None)."""
    if p.dropout is None:
        return None
    if p.dropout[0] == "philox":
        _, prob, seed, offset = p.dropout
        scale = p.dropout_scale if p.dropout_scale is not None else 1.0 / (1.0 - float(prob))
        z = np.stack([philox.keep_mask(seed, offset, b, h, H, Sq, Skv, prob)
                      for h in range(h0, h0 + G)])
        return z.astype(cdt) * cdt(scale)
    _, mask, scale = p.dropout
    m = np.broadcast_to(mask, (mask.shape[0], H, Sq, Skv) if mask.ndim == 4 else mask.shape)
    z = np.asarray(m[b if m.shape[0] > 1 else 0, h0:h0 + G], dtype=cdt)
    return z * cdt(scale if scale is not None else 1.0)


def _scores(q, k, p, b, h0, G, H, cdt):
    """Masked scores [G, Sq, Skv] (-inf where masked) and the allowed mask ([G|1, Sq, Skv])."""
    Sq, Skv = q.shape[2], k.shape[0]
    qk = cdt(p.scale)
    if p.fp8 is not None:
        qk = cdt(p.scale * p.fp8.descale_q * p.fp8.descale_k)
    s = np.matmul(q[b, h0:h0 + G].astype(cdt, copy=False),
                  np.swapaxes(k.astype(cdt, copy=False), -1, -2)) * qk
    add, keep = _bias(p, b, h0, G, Sq, Skv, H, cdt)
    if add is not None:
        s = s + add
    ok = allowed(p, b, Sq, Skv)
    if keep is not None:
        ok = keep if ok is None else (keep & ok[None])
    if p.block_mask is not None:
        bk = p.block_mask
        bk = block_keep(bk[b if bk.shape[0] > 1 else 0][None], Sq, Skv)[0]
        bk = np.broadcast_to(bk, (H,) + bk.shape[1:])[h0:h0 + G]
        ok = bk if ok is None else (bk & (ok if ok.ndim == 3 else ok[None]))
    if ok is not None:
        ok = np.broadcast_to(ok, s.shape) if ok.ndim == 3 else np.broadcast_to(ok[None], s.shape)
        s = np.where(ok, s, cdt(-np.inf))
    return s, ok


def sdpa_fwd(q, k, v, p: SdpaParams, compute_dtype=np.float32):
    """Returns (o [B,Hq,Sq,Dv], stats, max, sum_exp [B,Hq,Sq,1]) in the compute dtype; with
    ``p.fp8`` also (amax_s, amax_o) in ``p.extra``."""
    cdt = np.dtype(compute_dtype).type
    B, H, Sq, _ = q.shape
    Hkv, Skv, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // Hkv
    o = np.zeros((B, H, Sq, Dv), cdt)
    stats = np.empty((B, H, Sq, 1), cdt)
    mx = np.empty((B, H, Sq, 1), cdt)
    se = np.empty((B, H, Sq, 1), cdt)
    f8 = p.fp8
    amax_s = amax_o = 0.0
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for b in range(B):
            sq, _ = _lengths(p, b, Sq, Skv)
            padded = (np.arange(Sq) >= sq)[None, :, None]       # [1, Sq, 1]
            for hk in range(Hkv):
                h0 = hk * G
                s, ok = _scores(q, k[b, hk], p, b, h0, G, H, cdt)
                m = s.max(axis=-1, keepdims=True) if Skv else np.full(s.shape[:-1] + (1,), -np.inf, cdt)
                if p.sink is not None:
                    sink = np.asarray(p.sink[h0:h0 + G], cdt)[:, None, None]
                    m = np.where(padded, m, np.maximum(m, sink))
                empty = ~np.isfinite(m) | (m == -np.inf)
                msafe = np.where(empty, cdt(0), m)
                e = np.exp(s - msafe)
                if ok is not None:
                    e = np.where(ok, e, cdt(0))
                l = e.sum(axis=-1, keepdims=True)
                if p.sink is not None:
                    l = l + np.where(empty | padded, cdt(0), np.exp(sink - msafe))
                empty = empty | (l == 0) | padded
                P = np.where(empty, cdt(0), e / np.where(empty, cdt(1), l))
                z = _dropout_factor(p, b, h0, G, H, Sq, Skv, cdt)
                if z is not None:
                    P = P * z
                vb = v[b, hk].astype(cdt, copy=False)
                if f8 is None:
                    o[b, h0:h0 + G] = np.matmul(P, vb)
                else:
                    if P.size:
                        amax_s = max(amax_s, float(np.max(np.abs(P))))
                    P8 = minifloat.decode(minifloat.encode(P * cdt(f8.scale_s), f8.p_format),
                                          f8.p_format).astype(cdt)
                    ob = np.matmul(P8, vb) * cdt(f8.descale_s * f8.descale_v)
                    if ob.size:
                        amax_o = max(amax_o, float(np.max(np.abs(ob))))
                    o[b, h0:h0 + G] = ob * cdt(f8.scale_o)
                mx[b, h0:h0 + G] = np.where(empty, cdt(-np.inf), m)
                se[b, h0:h0 + G] = np.where(empty, cdt(0), l)
                stats[b, h0:h0 + G] = np.where(empty, cdt(np.inf), msafe + np.log(np.where(empty, 1, l)))
    if f8 is not None:
        p.extra["amax_s"], p.extra["amax_o"] = amax_s, amax_o
    return o, stats, mx, se


def sdpa_bwd(q, k, v, o, do, stats, p: SdpaParams, compute_dtype=np.float32, dbias_shape=None):
    """Returns (dq, dk, dv, dbias or None) in the compute dtype."""
    cdt = np.dtype(compute_dtype).type
    B, H, Sq, D = q.shape
    Hkv, Skv, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // Hkv
    dq = np.zeros(q.shape, cdt)
    dk = np.zeros(k.shape, cdt)
    dv = np.zeros(v.shape, cdt)
    dS_all = np.zeros((B, H, Sq, Skv), cdt) if dbias_shape is not None else None
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for b in range(B):
            for hk in range(Hkv):
                h0 = hk * G
                s, ok = _scores(q, k[b, hk], p, b, h0, G, H, cdt)
                st = stats[b, h0:h0 + G].astype(cdt, copy=False)
                P = np.exp(s - st)
                P = np.where(np.isfinite(st) & (s > -np.inf), P, cdt(0))
                z = _dropout_factor(p, b, h0, G, H, Sq, Skv, cdt)
                Pd = P if z is None else P * z
                dob = do[b, h0:h0 + G].astype(cdt, copy=False)
                dv[b, hk] = np.einsum("gqk,gqd->kd", Pd, dob)
                dP = np.matmul(dob, v[b, hk].astype(cdt, copy=False).T)
                if z is not None:
                    dP = dP * z
                Drow = np.sum(dob * o[b, h0:h0 + G].astype(cdt, copy=False), axis=-1, keepdims=True)
                dS = P * (dP - Drow)
                dq[b, h0:h0 + G] = np.matmul(dS, k[b, hk].astype(cdt, copy=False)) * cdt(p.scale)
                dk[b, hk] = np.einsum("gqk,gqd->kd", dS, q[b, h0:h0 + G].astype(cdt, copy=False)) \
                    * cdt(p.scale)
                if dS_all is not None:
                    dS_all[b, h0:h0 + G] = dS
    dbias = None
    if dS_all is not None:
        shape = tuple(dbias_shape)
        axes = tuple(ax for ax in range(4) if shape[ax] == 1 and dS_all.shape[ax] != 1)
        dbias = dS_all.sum(axis=axes, keepdims=True).reshape(shape)
    return dq, dk, dv, dbias
