"""SDPA nodes on the HIP engine: flash-attention forward and backward.  Forward: on an sm_90
device kernels/attention_fwd_wgmma.hip (wgmma + tensor copy engine; kernels/hdn_tma.h,
hdn_wgmma.h) unless the graph uses dropout (or HIPDNN_CABI_HIP_ATTN=mma); else
kernels/attention_fwd.hip (mma.sync, kernels/hdn_mma.h); opted in (HIPDNN_CABI_HIP_ATTN_DECODE=1,
:func:`decode_ok`) decode shapes - (Hq / Hkv) x Sq <= 16 - on that file's ATT_DECODE kernel
(every warp streams its own K / V tiles) ahead of both.  Backward: attention_bwd.hip's Dsum /
dQ kernels around a main kernel: on an sm_90 device with D, Dv padded to 64 or 128
kernels/attention_bwd_wgmma.hip (wgmma + tensor copy engine; HIPDNN_CABI_HIP_ATTN_BWD=mma opts
out), else attention_bwd.hip's (mma.sync).  Dropout from kernels/hdn_philox.h, the stream the CPU reference draws.

Applicable: q/k/v/o (and do/dq/dk/dv) HALF or BFLOAT16 (one type), 4-d [B, H, S, D] (v / o / do /
dv [B, H, S, Dv]) with head sizes D, Dv multiples of 8 up to 256 (Dv may differ from D; the
kernels compute on tiles padded to a multiple of 64 columns, the padding zero-filled and never
stored), unit stride along D and 16-byte aligned rows (BHSD, BSHD, packed QKV...);
Hq a multiple of Hkv; causal (top-left / bottom-right), left/right bands with either diagonal
alignment, padding masks (INT32/INT64 seq_len tensors), attention scale (attribute, by-value
constant, runtime pass-by-value scalar read at execute, or a 1-element FLOAT device tensor),
float32 stats, Philox dropout (seed/offset INT32/INT64 device tensors or constants); the score
roles (``_mods``, kernels/hdn_attention.h): additive HALF/BF16/FLOAT or BOOLEAN attn_mask
broadcast to [B, Hq, Sq, Skv] with any strides, ALiBi, UINT8 block masks (the kernels walk
the live key tiles only), sink tokens, FLOAT / HALF / BFLOAT16 / DOUBLE max / sum_exp outputs,
rng_dump of any broadcast shape and strides (a second kernel writes the keep mask), and in the backward
the mask / ALiBi with dbias (fp32 atomics into a workspace, then converted; these backward
graphs stay on the mma.sync main kernel); paged K/V (forward: page_table_k and / or page_table_v,
pools [pages, Hkv, page_size, D], page sizes powers of two >= 16; a k / v without a table dense
[B, Hkv, Skv, D]) and ragged (packed) q / k / v
/ o / stats / do / dq / dk / dv (offsets x multiplier), both with seq_len_q and seq_len_kv, on
the mma.sync kernels and without the score roles; opted in (HIPDNN_CABI_HIP_ATTN_VARLEN), the
forward of prefill shapes with pages of >= 64 rows on the wgmma kernel through per-batch /
per-page tensor maps a prep kernel writes (kernels/hdn_attn_wg_maps.h, :func:`varlen_wgmma_ok`),
and the ragged backward's wgmma main kernel likewise.  User dropout masks are not applicable
here (the CPU reference engine implements them).  On AMD (the MFMA kernels) D = Dv in {64, 128}
only, none of the score roles, no paged or ragged tensors.

FP8 forward (sm_90 only: kernels/attention_fwd_fp8_wgmma.hip, :func:`check_fp8` /
:func:`emit_fp8`): q / k / v FP8_E4M3 or FP8_E5M2, o that type or HALF / BFLOAT16 / FLOAT, the
fp8 scale roles and amax_s / amax_o, head sizes D, Dv multiples of 16 up to 256, the score roles
of the 16-bit kernels (attn_mask, ALiBi, block_mask, sink_token) and Philox dropout; not max /
sum_exp (the CPU reference declines them with fp8 data), rng_dump, paged or ragged tensors.
The backward with fp8 data is declined (hipDNN's backward has no fp8 roles).
"""
from __future__ import annotations

import math
import os

import numpy as np

from .. import codegen as cg
from ._base import _need, kinds

KINDS = kinds("sdpa")
RAGGED_OK = True     # ragged (packed) tensors: the roles of RAGGED (program.check_node)
FWD, BWD = "SdpaAttributes", "SdpaBackwardAttributes"
# roles the kernels implement; any other present role makes the node not applicable
USED = {FWD: {"q", "k", "v", "o", "stats", "scale", "seq_len_q", "seq_len_kv", "seed", "offset",
              "attn_mask", "block_mask", "sink_token", "max", "sum_exp", "rng_dump",
              "page_table_k", "page_table_v"},
        BWD: {"q", "k", "v", "o", "do", "stats", "dq", "dk", "dv", "scale", "seq_len_q",
              "seq_len_kv", "seed", "offset", "dropout_scale_inv", "attn_mask", "dbias"}}
# the score-modifying roles and extra outputs (_check_mods / _mods); not on the AMD kernels
MODS = ("attn_mask", "block_mask", "sink_token", "max", "sum_exp", "rng_dump", "dbias")
FLOAT_T = {"HALF": "hdn_half", "BFLOAT16": "hdn_bf16", "FLOAT": "float"}
STAT_T = dict(FLOAT_T, DOUBLE="double")     # the max / sum_exp element types (hdn_attn_row_out)
BLOCK = 128      # the block mask's tile edge
DATA = {FWD: ("q", "k", "v", "o"), BWD: ("q", "k", "v", "o", "do", "dq", "dk", "dv")}
MMA = {"HALF": "f16", "BFLOAT16": "bf16"}
CONV = {"HALF": ("hdn_half_bits_to_float(x)", "hdn_from_float<hdn_half>(x).bits"),
        "BFLOAT16": ("hdn_bf16_bits_to_float(x)", "hdn_from_float<hdn_bf16>(x).bits")}
FWD_NW = 4
MAX_HEAD = 256
SMEM_MAX = 227 * 1024      # opt-in dynamic shared memory per block on sm_90
PREFIX = {"q": "Q", "k": "K", "v": "V", "o": "O", "do": "G", "dq": "DQ", "dk": "DK", "dv": "DV",
          "stats": "L", "max": "MX", "sum_exp": "SE"}


def _dims(t):
    return [int(d) for d in t.dims]


def _st(t):
    return [int(s) for s in t.strides]


# paged K / V (forward): the pool [pages, Hkv, page_size, D] of each, read through its page table
# [B, 1, max_pages, 1]; ragged (packed) tensors: batch b's rows start offsets[b] * multiplier
# elements after the base (hdn_attention.h <P>_BOFF / <P>_ROWS)
PAGED = {"k": "page_table_k", "v": "page_table_v"}
RAGGED = {"q": "sq", "o": "sq", "do": "sq", "dq": "sq", "stats": "sq",
          "k": "skv", "v": "skv", "dk": "skv", "dv": "skv"}


def paged(r):
    return any(x in r for x in PAGED.values())


def ragged_roles(r):
    """The roles of r whose tensors are ragged."""
    return [x for x, t in r.items() if getattr(t, "ragged_offset_uid", None) is not None]


def _multiplier(t):
    m = getattr(t, "ragged_offset_multiplier", None)
    return 1 if m is None else int(m)


def paged_roles(r):
    """The roles of k / v read through a page table."""
    return [x for x in ("k", "v") if PAGED[x] in r]


def kv_extent(node, r):
    """(Hkv, Skv) of the logical k / v: a paged pool's from its page table and max_seq_len_kv
    (default: a dense k / v's length, else the fewest positions a table addresses), as the
    CPU reference's kv_dims."""
    d = _dims(r["k"])
    pr = paged_roles(r)
    if not pr:
        return d[1], d[2]
    skv = node.attrs.get("max_seq_len_kv")
    if skv is None:
        dense = [x for x in ("k", "v") if x not in pr]
        skv = _dims(r[dense[0]])[2] if dense else \
            min(_dims(r[PAGED[x]])[2] * _dims(r[x])[2] for x in pr)
    return d[1], int(skv)


def _check_paged(node, r, B):
    k = node.kind
    pr = paged_roles(r)       # k and v, or one of them (the other dense [B, Hkv, Skv, D])
    ck, cv = _dims(r["k"]), _dims(r["v"])
    _need(len(ck) == 4 and len(cv) == 4 and ck[1] == cv[1] and (len(pr) == 1 or ck[:3] == cv[:3]),
          f"{k}: the k / v page pools must be [pages, Hkv, page_size, D] alike")
    ps = _dims(r[pr[0]])[2]
    _need(ps >= 16 and ps & (ps - 1) == 0,
          f"{k}: page size {ps}: the HIP engine takes powers of two >= 16")
    tabs = [_dims(r[PAGED[x]]) for x in pr]
    for x in pr:
        t = r[PAGED[x]]
        d = _dims(t)
        _need(len(d) == 4 and d[0] == B and d[1] == 1 and d[3] == 1 and d == tabs[0]
              and cg.dtype_name(t.dtype) in ("INT32", "INT64") and t.value is None
              and not t.virtual, f"{k}: {PAGED[x]} {d} must be INT32/INT64 [B={B}, 1, max_pages, 1] "
              f"(both tables alike)")
    Hkv, Skv = kv_extent(node, r)
    _need(0 < Skv <= tabs[0][2] * ps,
          f"{k}: max_seq_len_kv {Skv} exceeds the {tabs[0][2] * ps} positions the page tables "
          f"address")
    for x in ("k", "v"):
        _need(x in pr or _dims(r[x])[:3] == [B, Hkv, Skv],
              f"{k}: the dense {x} of a graph paging only {pr[0]} must be [B, Hkv, Skv, D]")
    _need("seq_len_q" in r and "seq_len_kv" in r,
          f"{k}: paged K/V needs seq_len_q and seq_len_kv on the HIP engine")
    _need(not ragged_roles({x: r[x] for x in ("k", "v")}), f"{k}: k / v paged and ragged")


def _check_ragged(node, graph, r, B):
    k = node.kind
    rr = ragged_roles(r)
    if not rr:
        return
    for x in rr:
        _need(x in RAGGED, f"{k}: {x} cannot be ragged")
        t = r[x]
        _need(not t.virtual, f"{k}: ragged {x} is virtual")
        if graph is None:        # (emit: the node was checked with its graph)
            continue
        ot = graph.tensors.get(t.ragged_offset_uid)
        _need(ot is not None and not ot.virtual and ot.value is None
              and cg.dtype_name(ot.dtype) in ("INT32", "INT64") and ot.numel >= B
              and getattr(ot, "ragged_offset_uid", None) is None,
              f"{k}: the ragged offsets of {x} (uid {t.ragged_offset_uid}) must be a "
              f"non-virtual INT32/INT64 tensor of B + 1 = {B + 1} elements")
        _need(_multiplier(t) > 0, f"{k}: ragged {x}: offset multiplier {_multiplier(t)}")
    _need("seq_len_q" in r and "seq_len_kv" in r,
          f"{k}: ragged tensors need seq_len_q and seq_len_kv on the HIP engine")


def check(node, graph, r):
    """Raise NotApplicable unless the kernels implement this node (r: role -> tensor)."""
    k = node.kind
    a = node.attrs
    if is_fp8(node, r):
        return check_fp8(node, r)
    for role in r:
        _need(role in USED[k], f"{k}: {role} is not supported by the HIP engine")
    for role in DATA[k]:
        _need(role in r, f"{k}: {role} missing")
        t = r[role]
        _need(t.value is None and not t.is_runtime_pass_by_value, f"{k}: {role} is a scalar")
        _need(len(t.dims) == 4, f"{k}: {role} must be 4-d")
        _need(cg.dtype_name(t.dtype) in MMA, f"{k}: {role} must be HALF or BFLOAT16")
    _need(len({cg.dtype_name(r[x].dtype) for x in DATA[k]}) == 1, f"{k}: mixed data types")
    _check_common(node, r, graph)


def _check_common(node, r, graph=None):
    """The checks the 16-bit and the fp8 forward share: shapes, masks, lengths, scale, dropout."""
    k = node.kind
    a = node.attrs
    B, H, Sq, D = _dims(r["q"])
    _need(("seq_len_q" in r) == ("seq_len_kv" in r),
          f"{k}: one of seq_len_q / seq_len_kv alone: the HIP engine's padding limits take both")
    if paged(r):
        _check_paged(node, r, B)
    _check_ragged(node, graph, r, B)
    Hkv, Skv = kv_extent(node, r)
    Dk = _dims(r["k"])[3]
    Dv = _dims(r["v"])[3]
    vd = _dims(r["v"])[:3]
    pr = paged_roles(r)
    _need((vd == [B, Hkv, Skv] or "v" in pr) and Dk == D
          and (len(pr) == 1 or _dims(r["k"])[0] == vd[0]), f"{k}: k/v shapes")
    for nm, x in (("D", D), ("Dv", Dv)):
        _need(0 < x <= MAX_HEAD and x % 8 == 0,
              f"{k}: head dim {nm} = {x}: the HIP engine takes multiples of 8 up to {MAX_HEAD} "
              f"(16-byte rows for the tile loads)")
    for role in DATA[k]:
        s = _st(r[role])
        lo = 1 if role in ragged_roles(r) else 0      # a ragged tensor's batch stride is unused
        _need(s[3] == 1 and all(x % 8 == 0 and x >= 0 for x in s[lo:3]),
              f"{k}: {role} needs unit stride along D and 16-byte aligned rows")
    _need(Hkv >= 1 and H % Hkv == 0, f"{k}: Hq % Hkv != 0")
    _need(_dims(r["o"]) == [B, H, Sq, Dv], f"{k}: o shape")
    if k == BWD:
        _need(_dims(r["do"]) == [B, H, Sq, Dv], "do shape")
        for g, x in (("dq", "q"), ("dk", "k"), ("dv", "v")):
            _need(_dims(r[g]) == _dims(r[x]), f"{g} shape")
        _need("stats" in r, "stats missing")
    if "stats" in r:
        t = r["stats"]
        _need(cg.dtype_name(t.dtype) == "FLOAT" and _dims(t) == [B, H, Sq, 1] and t.value is None,
              f"{k}: stats must be FLOAT [B, H, Sq, 1]")
    _check_mods(node, r, B, H, Sq, Skv)
    for b in ("left_bound", "right_bound"):
        _need(a.get(b) is None or int(a[b]) >= 0, f"{k}: negative {b}")
    if "scale" in r:
        t = r["scale"]
        _need(t.numel == 1 and cg.dtype_name(t.dtype) == "FLOAT", f"{k}: scale must be 1 FLOAT")
    p = a.get("dropout_probability")
    if p:
        _need(0 < float(p) < 1, f"{k}: dropout probability {p}")
        _need("seed" in r and "offset" in r, f"{k}: dropout needs seed and offset")
    for x in ("seed", "offset"):
        if x in r:
            _need(r[x].numel == 1 and cg.dtype_name(r[x].dtype) in ("INT32", "INT64")
                  and not r[x].is_runtime_pass_by_value, f"{k}: {x} must be 1 INT32/INT64")
    for x in ("seq_len_q", "seq_len_kv"):
        if x in r:
            t = r[x]
            _need(t.numel == B and cg.dtype_name(t.dtype) in ("INT32", "INT64") and t.value is None,
                  f"{k}: {x} must hold B INT32/INT64 values")
    if a.get("padding_mask"):
        _need("seq_len_q" in r and "seq_len_kv" in r, f"{k}: padding without lengths")
    cd = cg.dtype_name(node.compute_dtype)
    _need(cd in ("FLOAT", "UNSET"), f"{k}: compute type {cd}")


def has_mods(node, r):
    """A score-modifying role, extra output or ALiBi is present."""
    return any(x in r for x in MODS) or bool(node.attrs.get("alibi_mask"))


def _check_mods(node, r, B, H, Sq, Skv):
    """The score-modifying roles and extra outputs as the kernels take them (shapes and types
    as the CPU reference's)."""
    k = node.kind
    if has_mods(node, r):
        _need(not paged(r) and not ragged_roles(r),
              f"{k}: the score roles (masks, ALiBi, block mask, sink, max / sum_exp, rng_dump, dbias) "
              f"with paged K/V or ragged tensors are not supported by the HIP engine")
    full = [B, H, Sq, Skv]
    for role in r:
        if role in MODS:
            t = r[role]
            _need(t.value is None and not t.is_runtime_pass_by_value, f"{k}: {role} is a scalar")
    for role, types in (("attn_mask", ("HALF", "BFLOAT16", "FLOAT", "UNSET")),
                        ("dbias", ("HALF", "BFLOAT16", "FLOAT")),
                        ("rng_dump", ("HALF", "BFLOAT16", "FLOAT"))):
        if role in r:
            d = _dims(r[role])
            _need(len(d) == 4 and all(x in (1, f) for x, f in zip(d, full)),
                  f"{k}: {role} {d} does not broadcast to {full}")
            _need(cg.dtype_name(r[role].dtype) in types,
                  f"{k}: {role} type {cg.dtype_name(r[role].dtype)} (HIP engine: {', '.join(types)})")
    if "rng_dump" in r:
        _need(node.attrs.get("dropout_probability"), f"{k}: rng_dump without dropout")
    if "block_mask" in r:
        t = r["block_mask"]
        tiles = [-(-Sq // BLOCK), -(-(-(-Skv // BLOCK)) // 8)]
        d = _dims(t)
        _need(len(d) == 4 and d[0] in (1, B) and d[1] in (1, H) and d[2:] == tiles
              and cg.dtype_name(t.dtype) == "UINT8",
              f"{k}: block_mask {d} must be UINT8 [B|1, Hq|1, {tiles[0]}, {tiles[1]}]")
    if "sink_token" in r:
        t = r["sink_token"]
        _need(t.numel == H and cg.dtype_name(t.dtype) in FLOAT_T,
              f"{k}: sink_token must hold Hq={H} HALF / BFLOAT16 / FLOAT logits")
    for role in ("max", "sum_exp"):
        if role in r:
            t = r[role]
            _need(cg.dtype_name(t.dtype) in STAT_T and _dims(t) == [B, H, Sq, 1],
                  f"{k}: {role} must be FLOAT / HALF / BFLOAT16 / DOUBLE [B, H, Sq, 1]")


def alibi_slopes(H):
    """The ALiBi head slopes as the CPU reference computes them (the power-of-two
    interpolation), rounded to float32."""
    n = 2 ** int(math.floor(math.log2(H)))
    m = [2.0 ** (-8.0 / n * (k + 1)) for k in range(n)]
    m += [2.0 ** (-4.0 / n * (2 * k + 1)) for k in range(H - n)]
    return [float(np.float32(x)) for x in m]


def _bstrides(t):
    """Element strides of t broadcast over its extent-1 dimensions (0 there)."""
    return [s if d > 1 else 0 for d, s in zip(_dims(t), _st(t))]


def _mods(prog, node, r, defines, extra_p, extra_a, loc):
    """Defines and parameters of the score modifiers (mask, ALiBi, block mask, sink) and the
    extra outputs (max, sum_exp, the dbias sums); hdn_attention.h documents them.  Returns the
    dbias workspace (or None)."""
    a = node.attrs
    mp, ma = [], []
    if "attn_mask" in r:
        t = r["attn_mask"]
        io = cg.dtype_name(t.dtype)
        defines["ATT_MASK"] = 2 if io == "UNSET" else 1
        defines["ATT_MASK_T"] = "unsigned char" if io == "UNSET" else FLOAT_T[io]
        for nm, x in zip(("AM_SB", "AM_SH", "AM_SI", "AM_SJ"), _bstrides(t)):
            defines[nm] = x
        mp.append("const void* __restrict__ att_mask")
        ma.append(loc[t.uid])
    if a.get("alibi_mask"):
        defines["ATT_ALIBI"] = 1
        defines["HDN_ALIBI_SLOPES"] = "{" + ", ".join(cg.flit(x) for x in
                                                      alibi_slopes(defines["HQ"])) + "}"
    if "block_mask" in r:       # (the forward's: the kernels skip the tiles it drops whole)
        t = r["block_mask"]
        defines["ATT_BLKSKIP"] = 1
        for nm, x in zip(("BMK_SB", "BMK_SH", "BMK_SR", "BMK_SC"), _bstrides(t)):
            defines[nm] = x
        mp.append("const unsigned char* __restrict__ att_blk")
        ma.append(loc[t.uid])
    if mp:
        defines["HDN_ATTN_MOD_PARAMS"] = ", " + ", ".join(mp)
        defines["HDN_ATTN_MOD_ARGS"] = ", " + ", ".join(x.split()[-1] for x in mp)
    extra_p += mp
    extra_a += ma
    if "sink_token" in r:
        t = r["sink_token"]
        H = defines["HQ"]
        ax = next((i for i, d in enumerate(_dims(t)) if d == H), None)
        defines["ATT_SINK"] = 1
        defines["ATT_SINK_T"] = FLOAT_T[cg.dtype_name(t.dtype)]
        defines["SINK_SH"] = _st(t)[ax] if H > 1 and ax is not None else 0
        extra_p.append("const ATT_SINK_T* __restrict__ att_sink")
        extra_a.append(loc[t.uid])
    for role, flag, nm in (("max", "HAS_MAX", "att_max"), ("sum_exp", "HAS_SUMEXP", "att_sumexp")):
        if role in r:
            defines[flag] = 1
            extra_p.append(f"{STAT_T[cg.dtype_name(r[role].dtype)]}* __restrict__ {nm}")
            extra_a.append(loc[r[role].uid])
    if node.kind != BWD or "dbias" not in r:
        return None
    t = r["dbias"]
    d = _dims(t)
    ws = prog.ws_alloc(int(np.prod(d)) * 4)
    cs = [int(np.prod(d[i + 1:])) if d[i] > 1 else 0 for i in range(4)]
    defines["ATT_DBIAS"] = 1
    for i, ax in enumerate("BHIJ"):
        defines[f"DBW_{ax}"] = cs[i]
        defines[f"DB{i}"] = d[i]
        defines[f"DBS{ax}"] = _st(t)[i]
    defines["DB_T"] = FLOAT_T[cg.dtype_name(t.dtype)]
    extra_p.append("float* __restrict__ att_dbias")
    extra_a.append(("ws", ws))
    return ws


def _block_tiles(defines, bm, bn):
    """A block mask with query tiles of bm rows and key tiles of bn keys: the kernels walk the
    live key tiles (ATT_BLKSKIP); a tile that does not lie inside one BLOCK x BLOCK block-mask
    tile (bm or bn not dividing BLOCK) has its scores masked element by element too
    (ATT_BLOCK)."""
    if defines.get("ATT_BLKSKIP") and (BLOCK % bm or BLOCK % bn):
        defines["ATT_BLOCK"] = 1


def _rng_dump(prog, r, src_defines, extra_p, extra_a, loc):
    """rng_dump: a kernel of attention_fwd.hip writes the forward's dropout keep mask, one thread
    per element of the dump (any strides; a dump broadcast along a dimension - extent 1 where
    [B, Hq, Sq, Skv] has more - receives index 0 of it, as the CPU reference: RD_SQ / RD_SKV)."""
    t = r["rng_dump"]
    B, H, Sq, Skv = _dims(t)
    src_defines["HAS_RNG_DUMP"] = 1
    src_defines["RD_T"] = FLOAT_T[cg.dtype_name(t.dtype)]
    for nm, x in zip(("RDSB", "RDSH", "RDSS", "RDSJ"), _st(t)):
        src_defines[nm] = x
    if (Sq, Skv) != (src_defines["SQ"], src_defines["SKV"]):
        src_defines["RD_SQ"], src_defines["RD_SKV"] = Sq, Skv
    ps, as_ = _finish(extra_p, extra_a, ["void* __restrict__ att_rng"], [loc[t.uid]])
    src_defines["HDN_ATTN_RNG_PARAMS"] = ps
    return ("hdn_attn_rng_dump", ((Sq * Skv + 255) // 256, H, B), (256, 1, 1), as_)


def _bool(a, key):
    return 1 if a.get(key) else 0


def drop_threshold(p):
    p = float(np.float32(p))
    return int(min(math.floor(p * 4294967296.0), 4294967295.0))


def pad64(d):
    """The tile width a head size is computed on (hdn_attention.h HDP / HDVP)."""
    return (int(d) + 63) // 64 * 64


def _prelude(node, r, defines, params, args, loc, graph=None):
    """Shared defines / parameters: head sizes, masks, lengths, scale, dropout, strides of the
    data tensors."""
    a = node.attrs
    B, H, Sq, D = _dims(r["q"])
    Dv = _dims(r["v"])[3]
    Hkv, Skv = kv_extent(node, r)
    io = cg.dtype_name(r["q"].dtype)
    br = cg.FB_NAMES.get("DiagonalAlignment", {}).get(a.get("diagonal_alignment"))
    if br is None:
        br = "BOTTOM_RIGHT" if a.get("diagonal_alignment") == 1 else "TOP_LEFT"
    causal_br = bool(a.get("causal_mask_bottom_right"))
    d = dict(HD=D, HDV=Dv, HDP=pad64(D), HDVP=pad64(Dv), GRP=H // Hkv, HQ=H, NB=B, SQ=Sq, SKV=Skv, CAUSAL=_bool(a, "causal_mask"),
             CAUSAL_BR=int(causal_br),
             BR_ALIGN=int(br == "BOTTOM_RIGHT" or (causal_br and not a.get("causal_mask"))),
             HAS_RB=int(a.get("right_bound") is not None), RB=int(a.get("right_bound") or 0),
             HAS_LB=int(a.get("left_bound") is not None), LB=int(a.get("left_bound") or 0))
    defines.update(d)
    if io in MMA:
        defines["HDN_MMA_TYPE"] = f'"{MMA[io]}"'
    for role, t in r.items():
        if role in PREFIX:
            s = _st(t)
            P = PREFIX[role]
            defines[P + "SB"], defines[P + "SH"], defines[P + "SS"] = s[0], s[1], s[2]
    lens_p, lens_a = "", ""
    pad = "seq_len_q" in r and "seq_len_kv" in r   # as the CPU reference: lengths given = used
    defines["PADDING"] = int(bool(pad))
    if pad:
        for role, nm, key in (("seq_len_q", "seq_q", "SLQ"), ("seq_len_kv", "seq_kv", "SLKV")):
            t = r[role]
            ct = "long long" if cg.dtype_name(t.dtype) == "INT64" else "int"
            dd = _dims(t)
            bdim = next((j for j, x in enumerate(dd) if x == B), 0) if B > 1 else 0
            defines[key + "_STRIDE"] = _st(t)[bdim] if B > 1 else 0
            lens_p += f", const {ct}* __restrict__ {nm}"
            lens_a += f", {nm}"
    defines["HDN_ATTN_LEN_PARAMS"] = lens_p
    defines["HDN_ATTN_LEN_ARGS"] = lens_a
    extra_p, extra_a = _paged_ragged(r, defines, loc, graph)
    p = a.get("dropout_probability")
    defines["DROPOUT"] = int(bool(p))
    if p:
        defines["DTHR"] = f"{drop_threshold(p)}u"
        defines["DSCALE"] = cg.flit(1.0 / (1.0 - float(np.float32(p))))
        for role, nm in (("seed", "seedp"), ("offset", "offp")):
            t = r[role]
            ct = "long long" if cg.dtype_name(t.dtype) == "INT64" else "int"
            if t.value is not None:
                v = t.value[0] if isinstance(t.value, (list, tuple)) else t.value
                defines[f"HDN_{nm.upper()}_VALUE"] = f"{int(v)}LL"
                extra_p.append(f"const {ct}* __restrict__ {nm}_unused")
                extra_a.append(None)
            else:
                extra_p.append(f"const {ct}* __restrict__ {nm}")
                extra_a.append(loc[t.uid])
    else:
        defines["DTHR"], defines["DSCALE"] = "0u", "1.0f"
    # scale: attribute / constant (baked), runtime scalar (by value), device tensor (pointer)
    t = r.get("scale")
    if t is None:
        v = a.get("attn_scale_value")
        defines["SCALE_MODE"], defines["SCALE_VALUE"] = 0, cg.flit(1.0 if v is None else float(v))
    elif t.value is not None:
        v = t.value[0] if isinstance(t.value, (list, tuple)) else t.value
        defines["SCALE_MODE"], defines["SCALE_VALUE"] = 0, cg.flit(float(np.float32(v)))
    elif t.is_runtime_pass_by_value:
        defines["SCALE_MODE"], defines["SCALE_VALUE"] = 1, "0.f"
        extra_p.append("float scale_rt")
        extra_a.append(("s", t.uid))
    else:
        defines["SCALE_MODE"], defines["SCALE_VALUE"] = 2, "0.f"
        extra_p.append("const float* __restrict__ scale_p")
        extra_a.append(loc[t.uid])
    return extra_p, extra_a


def _paged_ragged(r, defines, loc, graph):
    """Defines and kernel parameters of paged K / V (<P>_PAGED: log2 of the page size, the tables
    kpt / vpt and their strides) and ragged tensors (<P>_BOFF / <P>_ROWS from the offsets
    tensors roff0, roff1..., HDN_RAGGED_OK(b): every ragged batch offset is 16-byte aligned);
    nothing for a graph with neither."""
    ps, as_ = [], []
    pr = paged_roles(r)
    if pr:
        lg = int(_dims(r[pr[0]])[2]).bit_length() - 1
        defines["KV_PAGES"] = f"{_dims(r[pr[0]])[0]}LL"
        for role, nm in (("k", "kpt"), ("v", "vpt")):
            if role not in pr:      # dense (<P>_BOFF / <P>_ROWS: hdn_attention.h's defaults)
                continue
            t = r[PAGED[role]]
            P = PREFIX[role]
            ct = "long long" if cg.dtype_name(t.dtype) == "INT64" else "int"
            s = _st(t)
            defines[f"{P}_PAGED"] = lg
            defines[f"{P}_BOFF(b)"] = "0LL"
            defines[f"{P}_ROWS"] = "L.skv"
            defines[f"{P}PT_SB"], defines[f"{P}PT_SS"] = s[0], s[2]
            ps.append(f"const {ct}* __restrict__ {nm}")
            as_.append(loc[t.uid])
    rr = ragged_roles(r)
    if rr:
        offs, ok = [], []
        for role in sorted(rr, key=list(PREFIX).index):
            t = r[role]
            u = t.ragged_offset_uid
            if u not in offs:
                offs.append(u)
            n = offs.index(u)
            m = _multiplier(t)
            P = PREFIX[role]
            defines[f"{P}_BOFF(b)"] = f"((long long)roff{n}[b] * {m}LL)"
            defines[f"{P}_ROWS"] = "L." + RAGGED[role]
            if m % 8 and role != "stats":      # (the fp32 statistics: 4-byte accesses)
                ok.append(f"(({P}_BOFF(b) & 7) == 0)")
        defines["HDN_RAGGED_ROWS"] = 1
        defines["HDN_RAGGED_OK(b)"] = "(" + (" && ".join(sorted(set(ok))) or "true") + ")"
        for n, u in enumerate(offs):
            ct = "long long" if cg.dtype_name(graph.tensors[u].dtype) == "INT64" else "int"
            ps.append(f"const {ct}* __restrict__ roff{n}")
            as_.append(loc[u])
    return ps, as_


# features whose kernel code sits in ``#if FLAG`` / ``#ifdef FLAG`` blocks that a source without
# the define leaves out (:func:`_drop_off`): the other graphs' sources stay as they were
OPTIONAL = ("ATT_BLKSKIP", "RD_SQ", "AW_PP", "AW_FOLD", "AW_XCH", "AW_OVL", "ATT_DECODE", "F8_OVL", "F8_PP",
            "BW_OVL")


def _drop_off(body, defines):
    """body without the ``#if[def] FLAG`` blocks of the OPTIONAL flags not in defines (their
    ``#else`` part kept, the directives dropped)."""
    out, stack = [], []     # stack: per open #if, None (kept) or [flag, in_else]
    for line in body.split("\n"):
        w = line.split()
        d = w[0] if w else ""
        if d in ("#if", "#ifdef") and len(w) > 1 and w[1] in OPTIONAL and w[1] not in defines:
            stack.append([w[1], False])
            continue
        if d in ("#if", "#ifdef", "#ifndef"):
            stack.append(None)
        elif d in ("#else", "#endif") and stack and stack[-1] is not None:
            if d == "#else":
                stack[-1][1] = True
            else:
                stack.pop()
            continue
        elif d == "#endif":
            stack.pop()
        if all(x is None or x[1] for x in stack):
            out.append(line)
    return "\n".join(out)


def _source(kernel_file, defines):
    lines = ["#define HDN_GENERATED 1", '#include "hdn_compat.h"']
    for k, v in defines.items():
        lines.append(f"#define {k} {v}")
    body = _drop_off(cg.read_kernel(kernel_file), defines)
    # baked seed / offset: the kernel reads *seedp / *offp; give them constant storage
    for nm in ("seedp", "offp"):
        key = f"HDN_{nm.upper()}_VALUE"
        if key in defines:
            body = body.replace(f"*{nm};", f"(long long)({key});")
    return "\n".join(lines) + "\n" + body


def _ptr_args(roles, r, loc):
    return [loc[r[x].uid] for x in roles]


def _finish(extra_p, extra_a, base_p, base_a):
    ps = base_p + [p for p in extra_p]
    as_ = base_a + extra_a
    keep = [i for i, x in enumerate(as_) if x is not None]
    return ", ".join(ps[i] for i in keep), [as_[i] for i in keep]


WG_BM, WG_BN = 128, 128


def wgmma_ok(node, r, arch):
    """The forward runs on the Hopper kernel (attention_fwd_wgmma.hip): an sm_90 device, no
    dropout, paged K / V or ragged tensors only where :func:`varlen_wgmma_ok`, and Q / K / V
    views the tensor copy engine can describe (positive 16-byte strides along S / H / B where
    those extents exceed 1; a ragged tensor's batch stride is unused).
    ``HIPDNN_CABI_HIP_ATTN=mma`` forces the mma.sync kernel."""
    if node.kind != FWD or not (arch or "").startswith("sm_9"):
        return False
    if (paged(r) or ragged_roles(r)) and not varlen_wgmma_ok(node, r):
        return False
    if os.environ.get("HIPDNN_CABI_HIP_ATTN", "auto") in ("mma", "mma.sync"):
        return False
    if node.attrs.get("dropout_probability"):
        return False
    rr = ragged_roles(r)
    for role in ("q", "k", "v"):
        dd, ss = _dims(r[role]), _st(r[role])
        lo = 1 if role in rr else 0
        if any(ss[i] <= 0 for i in range(lo, 3) if dd[i] > 1) or max(dd) >= 2 ** 31:
            return False
    return True


VARLEN_MIN_PAGE = 64      # smaller pages: too many small boxes per key tile (the mma.sync loader)


def varlen_knob():
    """``HIPDNN_CABI_HIP_ATTN_VARLEN``: ``auto`` (default) / ``wgmma``: ragged / paged graphs on
    the Hopper kernel where :func:`varlen_wgmma_ok`; ``mma``: on the mma.sync kernel."""
    return os.environ.get("HIPDNN_CABI_HIP_ATTN_VARLEN", "auto") in ("auto", "wgmma")


def varlen_wgmma_ok(node, r):
    """A graph with ragged tensors or paged K / V on the wgmma forward: opted in
    (:func:`varlen_knob`), pages of at least VARLEN_MIN_PAGE rows, and not a decode shape
    the mma.sync kernel packs (:func:`gqa_pack`: the query heads of a kv head in one block,
    the keys split over blocks)."""
    if not varlen_knob():
        return False
    pr = paged_roles(r)
    if pr and _dims(r[pr[0]])[2] < VARLEN_MIN_PAGE:
        return False
    B, H, Sq, _ = _dims(r["q"])
    Hkv, _ = kv_extent(node, r)
    return not gqa_pack(node, H, Hkv, Sq)


def _role_modes(r):
    """{q, k, v: 0 dense / 1 ragged / 2 paged} (hdn_attn_wg_maps.h AW_DENSE / AW_RAGGED / AW_PAGED)."""
    rr, pr = ragged_roles(r), paged_roles(r)
    return {x: 2 if x in pr else 1 if x in rr else 0 for x in ("q", "k", "v")}


def _tmap_one_batch(t, loc, rows):
    """The template map of a ragged tensor: (D, S, H, 1) from its base (the prep kernel moves the
    address to a batch's rows and sets the row extent to its length)."""
    B, H, S, D = _dims(t)
    ss, sh = _st(t)[2], _st(t)[1]
    strides = [ss * 2 if S > 1 else D * 2, sh * 2 if H > 1 else D * 2 * S, D * 2 * S * H]
    return ("tmap", loc[t.uid], cg.dtype_name(t.dtype), (D, S, H, 1), tuple(strides), (64, rows, 1, 1))


def _varlen_maps(prog, node, r, loc, defines, bn):
    """Defines of the ragged / paged tile loads (hdn_attn_wg_maps.h) and their template maps;
    returns (template maps of q / k / v, the maps' workspace location)."""
    B = _dims(r["q"])[0]
    Skv = kv_extent(node, r)[1]
    modes = _role_modes(r)
    pr = paged_roles(r)
    ps = _dims(r[pr[0]])[2] if pr else 128
    npg = -(-Skv // ps) if pr else 1
    for x in ("q", "k", "v"):
        defines[f"AW_{x.upper()}MODE"] = modes[x]
    defines["AW_PS"] = ps
    defines["AW_NPG"] = npg
    rows = {"q": WG_BM, "k": bn, "v": bn}
    maps = []
    for x in ("q", "k", "v"):
        if modes[x] == 1:
            maps.append(_tmap_one_batch(r[x], loc, rows[x]))
        else:
            maps.append(_tmap(r[x], loc, min(ps, bn) if modes[x] == 2 else rows[x]))
    nmaps = (4 * B if 1 in modes.values() else 0) + (2 * B * npg if pr else 0)
    return maps, ("ws", prog.ws_alloc(nmaps * 128 + 4 * B))


def gqa_pack(node, H, Hkv, Sq):
    """The mma.sync forward packs a kv head's query heads x queries into one 64-row block
    (attention_fwd.hip GQA_PACK: decode, K / V read once per kv head): GQA with (Hq / Hkv) x Sq
    <= 64, no dropout (its stream is indexed by the query head of the row's block)."""
    G = H // Hkv
    return G > 1 and G * Sq <= 16 * FWD_NW and not node.attrs.get("dropout_probability")


def kv_split(blocks, Skv, sms):
    """Key slices of a GQA-packed decode (attention_fwd.hip KV_SPLIT): with fewer blocks than
    multiprocessors, enough slices of at least 256 keys to fill them (at most 16);
    ``HIPDNN_CABI_HIP_ATTN_SPLITKV=0`` turns it off."""
    if os.environ.get("HIPDNN_CABI_HIP_ATTN_SPLITKV", "1") in ("0", "off") or blocks >= sms:
        return 1
    return max(1, min(16, -(-int(sms) // blocks), int(Skv) // 256))


DEC_ROWS, DEC_BN = 16, 16      # attention_fwd.hip ATT_DECODE: one m16n8k16 row block, 16-key warp tiles
DEC_RING = 96 * 1024           # the K / V rings of a block: two blocks per multiprocessor at D = 128
SMEM_SM = 228 * 1024           # shared memory per multiprocessor (sm_90; 1 KB of it reserved per block)


def decode_knob():
    """``HIPDNN_CABI_HIP_ATTN_DECODE`` = 1: decode shapes on attention_fwd.hip's ATT_DECODE kernel
    (:func:`decode_ok`); 0 (default until measured on a device): the GQA_PACK kernel."""
    return os.environ.get("HIPDNN_CABI_HIP_ATTN_DECODE", "0") not in ("0", "off", "")


def decode_ok(node, r, H, Hkv, Sq):
    """The forward runs on the decode kernel (attention_fwd.hip ATT_DECODE): opted in
    (:func:`decode_knob`), the (Hq / Hkv) x Sq rows of a kv head within one 16-row MMA block
    (any group size, 1 included), no dropout, none of the score roles, no ragged tensors (dense
    or paged K / V)."""
    return (node.kind == FWD and decode_knob() and (H // Hkv) * Sq <= DEC_ROWS
            and not node.attrs.get("dropout_probability") and not has_mods(node, r)
            and not ragged_roles(r))


def decode_config(D, Dv):
    """(ring depth DEC_ST, dynamic shared memory bytes, blocks per multiprocessor) of the decode
    kernel: each of its FWD_NW warps holds DEC_ST stages of a 16-key K and V tile, as many as
    fit DEC_RING (2..8); Q is one 16-row tile.  The warps' (max, sum, O) merge reuses the rings."""
    stage = DEC_BN * (pad64(D) + pad64(Dv)) * 2
    st = max(2, min(8, DEC_RING // (FWD_NW * stage)))
    smem = DEC_ROWS * pad64(D) * 2 + FWD_NW * st * stage
    return st, smem, max(1, min(4, SMEM_SM // (smem + 1024)))


def decode_split(blocks, Skv, sms, per_sm):
    """Key slices of the decode kernel (KV_SPLIT, merged by hdn_attn_fwd_combine): the count of
    1..16 (slices of >= 256 keys) that minimises the modelled time - waves of ``blocks`` x slices
    over ``sms`` x ``per_sm`` resident blocks, each wave as long as a slice's keys plus 64 keys'
    worth of set-up, plus that much again for the combine kernel; ties: fewer slices.
    ``HIPDNN_CABI_HIP_ATTN_SPLITKV=0`` turns it off."""
    if os.environ.get("HIPDNN_CABI_HIP_ATTN_SPLITKV", "1") in ("0", "off"):
        return 1
    slots = max(1, int(sms) * int(per_sm))
    best, cost = 1, None
    for ns in range(1, max(1, min(16, int(Skv) // 256)) + 1):
        keys = -(-(-(-int(Skv) // ns)) // DEC_BN) * DEC_BN
        c = -(-blocks * ns // slots) * (keys + 64) + (64 if ns > 1 else 0)
        if cost is None or c < cost:
            best, cost = ns, c
    return best


def _tmap(t, loc, rows):
    """("tmap", base, dtype, dims, byte strides, box): a 4-d (D, S, H, B) view, box 64 x rows;
    the box's columns past D read as zeros (the padded head)."""
    B, H, S, D = _dims(t)
    sb, sh, ss = _st(t)[:3]
    dims = (D, S, H, B)
    strides = [ss * 2 if S > 1 else D * 2, sh * 2 if H > 1 else D * 2 * S,
               sb * 2 if B > 1 else D * 2 * S * H]
    return ("tmap", loc[t.uid], cg.dtype_name(t.dtype), dims, tuple(strides), (64, rows, 1, 1))


def wg_pingpong():
    """``HIPDNN_CABI_HIP_ATTN_PINGPONG`` = 1 (default) / 0: the wgmma forward's consumer
    warpgroups issue their GEMMs in turns (attention_fwd_wgmma.hip AW_PP, named barriers)."""
    return os.environ.get("HIPDNN_CABI_HIP_ATTN_PINGPONG", "1") not in ("0", "off")


def wg_fold(node, r, defines):
    """The wgmma forward's exp2 takes the scale in one FFMA per score and O is rescaled only
    where a row max grew (attention_fwd_wgmma.hip AW_FOLD: the row max of the raw scores): no
    score roles, a baked scale in [1e-30, 1e30];
    ``HIPDNN_CABI_HIP_ATTN_EXPFOLD=0`` turns it off (on by default)."""
    if os.environ.get("HIPDNN_CABI_HIP_ATTN_EXPFOLD", "1") in ("0", "off"):
        return False
    sv = str(defines.get("SCALE_VALUE", ""))
    if has_mods(node, r) or defines.get("SCALE_MODE") != 0 or not sv.endswith("f"):
        return False
    try:
        v = float(sv[:-1])
    except ValueError:
        return False
    return 1e-30 <= v <= 1e30


def wg_overlap():
    """``HIPDNN_CABI_HIP_ATTN_FWD_OVL`` = 1 / xch / 0 (the default until measured on a device): the
    wgmma forward's softmax of S(n) runs while O += P(n-1) V(n-1) is on the tensor cores - the
    rows' max / sum through a small shared-memory exchange instead of warp shuffles (ptxas
    waits for every wgmma in flight before a shuffle; attention_fwd_wgmma.hip AW_XCH), and with
    128-key tiles and no score roles P(n) rounded there too, into a second P register set
    (AW_OVL; ``xch``: the exchange alone, P rounded after the wait).  The same operations in the
    same order as the kernel without them.  Returns "", "1" or "xch"."""
    v = os.environ.get("HIPDNN_CABI_HIP_ATTN_FWD_OVL", "0").strip().lower()
    if v in ("", "0", "off"):
        return ""
    return "xch" if v == "xch" else "1"


WG_OVL_SMEM = 256 * 4       # AW_OVL's static exchange (aw_xch: one float per consumer thread)


def wg_config(D, Dv, stages=None):
    """(dynamic shared memory bytes, K / V ring depth, keys per tile) of the wgmma forward
    (attention_fwd_wgmma.hip AW_SMEM_BYTES, AW_ST, AW_BN) for head sizes D, Dv."""
    dp, dvp = pad64(D), pad64(Dv)
    bn = WG_BN if max(dp, dvp) <= 128 else 64
    st = stages or (4 if dp + dvp <= 128 else 2)
    smem = WG_BM * dp * 2 + st * bn * (dp + dvp) * 2 + 8 * (1 + 4 * st) + 1024
    return smem, st, bn


def emit(ctx, node, r, tag, fused=None):
    _emit(ctx.prog, node, r, ctx.loc, tag, ctx.arch, ctx.graph, ctx.sms)


def _emit(prog, node, r, loc, tag, arch=None, graph=None, sms=132):
    """Append the launch steps of one SDPA node to ``prog`` (``arch``: the device's target;
    sm_90 puts the forward on the wgmma kernel where :func:`wgmma_ok`)."""
    check(node, None, r)
    if is_fp8(node, r):
        return emit_fp8(prog, node, r, loc, arch)
    B, H, Sq, D = _dims(r["q"])
    Hkv, Skv = kv_extent(node, r)
    Dv = _dims(r["v"])[3]
    dp, dvp = pad64(D), pad64(Dv)
    defines = {}
    extra_p, extra_a = _prelude(node, r, defines, None, None, loc, graph)
    if (arch or "").startswith("gfx"):      # AMD CDNA: the MFMA kernels (attention_*_mfma.hip)
        return _emit_mfma(prog, node, r, loc, defines, extra_p, extra_a)
    ws_db = _mods(prog, node, r, defines, extra_p, extra_a, loc)
    u16 = "const hdn_u16* __restrict__"
    if node.kind == FWD:
        defines["NW"] = FWD_NW
        has_stats = "stats" in r
        defines["HAS_STATS"] = int(has_stats)
        if not has_stats:
            defines["LSB"] = defines["LSH"] = defines["LSS"] = 0
        dec = decode_ok(node, r, H, Hkv, Sq)
        if not dec and wgmma_ok(node, r, arch):
            io = cg.dtype_name(r["q"].dtype)
            defines["HDN_BF16_IO"] = int(io == "BFLOAT16")
            st = int(os.environ.get("HIPDNN_CABI_HIP_ATTN_STAGES", "0") or 0) or None
            smem, st, bn = wg_config(D, Dv, st)
            ovl = wg_overlap()
            _need(smem + (WG_OVL_SMEM if ovl else 0) <= SMEM_MAX,
                  f"{node.kind}: {st} K/V stages need {smem} bytes of shared memory")
            defines["AW_ST"] = st
            defines["AW_BN"] = bn
            pp, fold = wg_pingpong(), wg_fold(node, r, defines)
            if pp:
                defines["AW_PP"] = 1
            if fold:
                defines["AW_FOLD"] = 1
            if ovl:
                defines["AW_XCH"] = 1
                # P(n) rounded in the overlap too, into a second P register set: where it fits
                # the registers without spills (128-key tiles, no score roles)
                if ovl == "1" and bn == 128 and not has_mods(node, r):
                    defines["AW_OVL"] = 1
            _block_tiles(defines, WG_BM, bn)
            tm = "const __grid_constant__ hdn_tmap"
            base_p = [f"{tm} tmQ", f"{tm} tmK", f"{tm} tmV", "hdn_u16* __restrict__ O",
                      "float* __restrict__ LSE"]
            varlen = paged(r) or bool(ragged_roles(r))
            if varlen:
                maps, ws_maps = _varlen_maps(prog, node, r, loc, defines, bn)
            else:
                maps = [_tmap(r["q"], loc, WG_BM), _tmap(r["k"], loc, bn), _tmap(r["v"], loc, bn)]
            base_a = maps + [loc[r["o"].uid]] + [loc[r["stats"].uid] if has_stats else None]
            lens = [loc[r[x].uid] for x in ("seq_len_q", "seq_len_kv")] if defines["PADDING"] else []
            vp, va = (["const hdn_tmap* __restrict__ aw_maps"], [ws_maps]) if varlen else ([], [])
            ps, as_ = _finish(extra_p, extra_a, base_p + _len_params(defines) + vp, base_a + lens + va)
            defines["HDN_ATTN_FWD_WG_PARAMS"] = ps
            if varlen:
                mp, ma = _finish(extra_p, extra_a, base_p[:3] + [
                    f"{u16} Qp", f"{u16} Kp", f"{u16} Vp", "hdn_tmap* __restrict__ aw_maps"]
                    + _len_params(defines), maps + _ptr_args(("q", "k", "v"), r, loc) + [ws_maps] + lens)
                defines["HDN_ATTN_WG_MAPS_PARAMS"] = mp
            src = _source("attention_fwd_wgmma.hip", defines)
            if varlen:
                prog.steps.append(("launch", src, "hdn_attn_wg_maps", (B, 1, 1), (128, 1, 1), ma,
                                   {"arch": "sm_90a"}))
            prog.steps.append(("launch", src, "hdn_attn_fwd_wg", ((Sq + WG_BM - 1) // WG_BM, H, B),
                               (384, 1, 1), as_, {"shmem": smem, "arch": "sm_90a"}))
            prog.notes.append(f"{node.kind}: wgmma flash attention, {WG_BM}x{bn} tiles, "
                              f"{st} K/V stages, TMA QKV"
                              + (", ping-pong consumers" if pp else "")
                              + (", scale folded into exp2" if fold else "")
                              + (", softmax overlapped with P V" if ovl else "")
                              + (f"; ragged / paged rows through per-batch / per-page tensor maps "
                                 f"(hdn_attn_wg_maps)" if varlen else ""))
            return
        base_p = [f"{u16} Q", f"{u16} K", f"{u16} V", "hdn_u16* __restrict__ O",
                  "float* __restrict__ LSE"]
        base_a = _ptr_args(("q", "k", "v", "o"), r, loc) + [loc[r["stats"].uid] if has_stats else None]
        lens = [(x, loc[r[x].uid]) for x in ("seq_len_q", "seq_len_kv") if defines["PADDING"]]
        ps, as_ = _finish(extra_p, extra_a, base_p + _len_params(defines), base_a + [a for _, a in lens])
        defines["HDN_ATTN_FWD_PARAMS"] = ps     # (no stats: the LSE parameter is dropped)
        BM = 16 * FWD_NW
        _block_tiles(defines, BM, 64)
        grid = ((Sq + BM - 1) // BM, H, B)
        nsplit = 1
        if dec:
            st, smem, per_sm = decode_config(D, Dv)
            defines["GQA_PACK"] = 1
            defines["ATT_DECODE"] = 1
            defines["DEC_ST"] = st
            nsplit = decode_split(B * Hkv, Skv, sms, per_sm)
            grid = (nsplit, Hkv, B)
            prog.notes.append(f"{node.kind}: mma.sync decode attention (ATT_DECODE), the {H // Hkv} "
                              f"query heads x {Sq} queries of a kv head in one 16-row block, "
                              f"{FWD_NW} warps on their own 16-key tiles, {st} K/V stages each"
                              + (f", keys split {nsplit} ways" if nsplit > 1 else ""))
        elif not has_mods(node, r) and gqa_pack(node, H, Hkv, Sq):
            defines["GQA_PACK"] = 1
            nsplit = kv_split(B * Hkv, Skv, sms)
            grid = (nsplit, Hkv, B)
            prog.notes.append(f"{node.kind}: mma.sync flash attention, the {H // Hkv} query heads "
                              f"x {Sq} queries of a kv head in one block (GQA_PACK)"
                              + (f", keys split {nsplit} ways" if nsplit > 1 else ""))
        if nsplit > 1:
            # partial O / log-sum-exp per key slice (fp32 workspace), merged by the combine kernel
            n_rows = B * H * Sq
            ws_o = prog.ws_alloc(nsplit * n_rows * Dv * 4)
            ws_l = prog.ws_alloc(nsplit * n_rows * 4)
            defines["KV_SPLIT"] = nsplit
            ps, as_ = _finish(extra_p, extra_a, base_p + _len_params(defines)
                              + ["float* __restrict__ OP", "float* __restrict__ LP"],
                              base_a + [a for _, a in lens] + [("ws", ws_o), ("ws", ws_l)])
            defines["HDN_ATTN_FWD_PARAMS"] = ps
            cl = _len_params(defines) if defines.get("HDN_RAGGED_ROWS") else []
            cps, cas = _finish(extra_p, extra_a, ["const float* __restrict__ OP",
                                                  "const float* __restrict__ LP",
                                                  "hdn_u16* __restrict__ O",
                                                  "float* __restrict__ LSE"] + cl,
                               [("ws", ws_o), ("ws", ws_l), loc[r["o"].uid],
                                loc[r["stats"].uid] if has_stats else None]
                               + ([a for _, a in lens] if cl else []))
            defines["HDN_ATTN_CMB_PARAMS"] = cps
        rng = _rng_dump(prog, r, defines, extra_p, extra_a, loc) if "rng_dump" in r else None
        src = _source("attention_fwd.hip", defines)
        if not dec:
            smem = (BM + 64) * dp * 2 + 64 * dvp * 2      # Q, K, V tiles (attention_fwd.hip)
        name = "hdn_attn_fwd"
        prog.steps.append(("launch", src, name, grid, (32 * FWD_NW, 1, 1), as_, smem))
        if rng:
            prog.steps.append(("launch", src) + rng)
        if nsplit > 1:
            prog.steps.append(("launch", src, "hdn_attn_fwd_combine", ((B * H * Sq + 7) // 8, 1, 1),
                               (256, 1, 1), cas))
        return
    # backward: workspace Dsum [B, H, Sq] fp32 and dQacc [B, H, Sq, HDP] fp32 (zeroed)
    io = cg.dtype_name(r["q"].dtype)
    defines["HDN_TO_FLOAT(x)"] = CONV[io][0]
    defines["HDN_FROM_FLOAT(x)"] = CONV[io][1]
    n_rows = B * H * Sq
    ws_d = prog.ws_alloc(n_rows * 4)
    ws_q = prog.ws_alloc(n_rows * dp * 4)
    nsplit = bwd_split(D, Dv)
    defines["NSPLIT"] = nsplit
    lens = [loc[r[x].uid] for x in ("seq_len_q", "seq_len_kv")] if defines["PADDING"] else []
    main_p = [f"{u16} Q", f"{u16} K", f"{u16} V", f"{u16} dO", "const float* __restrict__ LSE",
              "hdn_u16* __restrict__ dK", "hdn_u16* __restrict__ dV",
              "const float* __restrict__ Dsum", "float* __restrict__ dQacc"] + _len_params(defines)
    main_a = (_ptr_args(("q", "k", "v", "do", "stats", "dk", "dv"), r, loc)
              + [("ws", ws_d), ("ws", ws_q)] + lens)
    ps, as_ = _finish(extra_p, extra_a, main_p, main_a)
    defines["HDN_ATTN_BWD_PARAMS"] = ps
    # ragged rows: the Dsum / dQ kernels read the lengths too
    rl_p, rl_a = (_len_params(defines), lens) if defines.get("HDN_RAGGED_ROWS") else ([], [])
    pre_p, pre_a = _finish(extra_p, extra_a, [f"{u16} O", f"{u16} dO", "float* __restrict__ Dsum"]
                           + rl_p, _ptr_args(("o", "do"), r, loc) + [("ws", ws_d)] + rl_a)
    defines["HDN_ATTN_PRE_PARAMS"] = pre_p
    dq_p, dq_a = _finish(extra_p, extra_a, ["const float* __restrict__ dQacc",
                                            "hdn_u16* __restrict__ dQ"] + rl_p,
                         [("ws", ws_q), loc[r["dq"].uid]] + rl_a)
    defines["HDN_ATTN_DQ_PARAMS"] = dq_p
    if ws_db is not None:
        db_p, db_a = _finish(extra_p, extra_a, ["const float* __restrict__ att_dbias_sum",
                                                "void* __restrict__ att_dbias_out"],
                             [("ws", ws_db), loc[r["dbias"].uid]])
        defines["HDN_ATTN_DBIAS_PARAMS"] = db_p
    src = _source("attention_bwd.hip", defines)
    if ws_db is not None:
        prog.steps.append(("memset", ws_db, int(np.prod(_dims(r["dbias"]))) * 4))
    main = ("launch", src, "hdn_attn_bwd", ((Skv + 63) // 64 * nsplit, Hkv, B), (128, 1, 1), as_,
            bwd_smem_bytes(D, Dv))
    if bwd_wgmma_ok(node, r, arch):     # the Hopper main kernel; pre / dq kernels shared
        main = _bwd_wg_step(prog, node, r, loc, dict(defines), extra_p, extra_a, ws_d, ws_q, lens)
    prog.steps.append(("memset", ws_q, n_rows * dp * 4))
    prog.steps.append(("launch", src, "hdn_attn_bwd_pre", ((n_rows + 7) // 8, 1, 1), (256, 1, 1),
                       pre_a))
    prog.steps.extend(main if isinstance(main, list) else [main])
    prog.steps.append(("launch", src, "hdn_attn_bwd_dq", ((n_rows * D + 255) // 256, 1, 1),
                       (256, 1, 1), dq_a))
    if ws_db is not None:
        n = int(np.prod(_dims(r["dbias"])))
        prog.steps.append(("launch", src, "hdn_attn_dbias_out", ((n + 255) // 256, 1, 1),
                           (256, 1, 1), db_a))


def bwd_split(D, Dv):
    """Column slices of dK / dQ and dV per 64 keys (attention_bwd.hip NSPLIT): the dK / dV
    accumulators of one block stay within 256 columns."""
    return (pad64(D) + pad64(Dv) + 255) // 256


def bwd_smem_bytes(D, Dv):
    """Dynamic shared memory of hdn_attn_bwd: K, V, NBUF x (Q, dO) tiles, dSᵀ, NBUF x (lse,
    Dsum), the dQ staging rows."""
    dp, dvp = pad64(D), pad64(Dv)
    nbuf = 2 if dp + dvp <= 128 else 1
    dkc = dp // bwd_split(D, Dv)
    return (64 * (dp + dvp) + nbuf * 64 * (dp + dvp) + 64 * 64) * 2 + nbuf * 2 * 64 * 4 + \
        64 * (dkc + 8) * 4


def _len_params(defines):
    p = defines["HDN_ATTN_LEN_PARAMS"]
    return [x.strip() for x in p.split(",") if x.strip()]


# ------------------------------------------------------------------ Hopper backward (wgmma)
WG_BWD_BN, WG_BWD_BM = 128, 64       # attention_bwd_wgmma.hip BW_BN (keys per CTA), BW_BM (default)


def bwd_wgmma_ok(node, r, arch):
    """The backward's main kernel runs on attention_bwd_wgmma.hip: an sm_90 device, head sizes
    D, Dv padded to 64 or 128, Q / K / V / dO views the tensor copy engine can describe (a
    ragged tensor's batch stride unused); ragged tensors only with :func:`varlen_knob` (their
    Q / K / V / dO tiles through per-batch tensor maps, as the forward's).
    ``HIPDNN_CABI_HIP_ATTN_BWD`` = auto / wgmma (that kernel where applicable) or mma (the
    mma.sync kernel attention_bwd.hip always)."""
    if node.kind != BWD or not (arch or "").startswith("sm_9"):
        return False
    if os.environ.get("HIPDNN_CABI_HIP_ATTN_BWD", "auto") not in ("auto", "wgmma"):
        return False
    rr = ragged_roles(r)
    if has_mods(node, r) or paged(r) or (rr and not varlen_knob()):
        return False        # the score roles (mask, ALiBi, dbias): mma.sync kernel
    if pad64(_dims(r["q"])[3]) not in (64, 128) or pad64(_dims(r["v"])[3]) not in (64, 128):
        return False
    for role in ("q", "k", "v", "do"):
        dd, ss = _dims(r[role]), _st(r[role])
        lo = 1 if role in rr else 0
        if any(ss[i] <= 0 for i in range(lo, 3) if dd[i] > 1) or max(dd) >= 2 ** 31:
            return False
    return True


def bwd_wg_bm(D, Dv):
    """Query rows per tile of attention_bwd_wgmma.hip (BW_BM): 128 where D and Dv pad to 64
    (twice the work per visit and per barrier, m64n128k16 Sᵀ / dPᵀ products, both warpgroups' dQ
    on every visit), else 64; ``HIPDNN_CABI_HIP_ATTN_BWD_BM`` = 64 keeps 64 everywhere."""
    if os.environ.get("HIPDNN_CABI_HIP_ATTN_BWD_BM", "128") == "128" and pad64(D) == pad64(Dv) == 64:
        return 128
    return WG_BWD_BM


def bwd_wg_config(D, Dv, bm=WG_BWD_BM):
    """(dynamic shared memory bytes, Q / dO ring depth) of attention_bwd_wgmma.hip
    (BW_SMEM_BYTES, BW_ST) with bm-query tiles: the deepest ring of 2..4 stages that fits."""
    dp, dvp = pad64(D), pad64(Dv)
    for st in (4, 3, 2):
        smem = (WG_BWD_BN * (dp + dvp) * 2 + st * bm * (dp + dvp) * 2 + 2 * WG_BWD_BN * bm * 2
                + 2 * 64 * 72 * 4 + st * bm * 8 + 8 * (1 + 2 * st) + 1024)
        if smem <= SMEM_MAX:
            return smem, st
    raise AssertionError("unreachable: two stages fit at D = Dv = 128 (and at 64 with 128-query tiles)")


def bwd_wg_overlap():
    """``HIPDNN_CABI_HIP_ATTN_BWD_OVL`` = 1 (0, the default until measured on a device): the
    wgmma backward's CUDA-core work of a visit under tensor-core groups in flight
    (attention_bwd_wgmma.hip BW_OVL): dV += Pᵀ dO queued as soon as a half's Pᵀ is rounded, before
    its dPᵀ is waited for, so that dSᵀ = Pᵀ o (dPᵀ - Dsum) and its rounding run under dV (the
    default waits for every group in flight there) and the second half's exp2 under dPᵀ / dV
    (128-query tiles); the same operations per element.  Graphs with dropout keep the default
    order (their registers would spill)."""
    return os.environ.get("HIPDNN_CABI_HIP_ATTN_BWD_OVL", "0").strip() == "1"


def _bwd_wg_step(prog, node, r, loc, defines, extra_p, extra_a, ws_d, ws_q, lens):
    """The launch step of the Hopper backward's main kernel (the Dsum / dQ-accumulator
    workspace of attention_bwd.hip's pre / dq kernels); with ragged tensors a list: the prep
    kernel writing their per-batch tensor maps (hdn_attn_wg_maps.h), then the main kernel."""
    B, Hkv, Skv = _dims(r["k"])[:3]
    bm = bwd_wg_bm(_dims(r["q"])[3], _dims(r["v"])[3])
    smem, st = bwd_wg_config(_dims(r["q"])[3], _dims(r["v"])[3], bm)
    defines["HDN_BF16_IO"] = int(cg.dtype_name(r["q"].dtype) == "BFLOAT16")
    if bm != WG_BWD_BM:
        defines["BW_BM"] = bm
    if os.environ.get("HIPDNN_CABI_HIP_ATTN_BWD_SCHED", "0") == "0" and bm == WG_BWD_BM:
        # the earlier issue order (attention_bwd_wgmma.hip; ATTN_BWD_SCHED=1: the overlapped
        # order, 2-3 % slower on an H100 at 64-query tiles)
        defines["BW_SCHED"] = 0
    # (with dropout the keep bits and Pᵀ kept for dSᵀ next to the rounded Pᵀ z would spill: the
    # default order there)
    ovl = bwd_wg_overlap() and not defines.get("DROPOUT")
    if ovl:
        defines["BW_OVL"] = 1
    defines["BW_ST"] = st
    defines["BW_SMEM_HOST"] = smem
    tm = "const __grid_constant__ hdn_tmap"
    base_p = [f"{tm} tmQ", f"{tm} tmK", f"{tm} tmV", f"{tm} tmG", "const float* __restrict__ LSE",
              "hdn_u16* __restrict__ dK", "hdn_u16* __restrict__ dV", "const float* __restrict__ Dsum",
              "float* __restrict__ dQacc"] + _len_params(defines)
    rr = ragged_roles(r)
    rows = {"q": bm, "k": WG_BWD_BN, "v": WG_BWD_BN, "do": bm}
    maps = [(_tmap_one_batch if x in rr else _tmap)(r[x], loc, rows[x]) for x in ("q", "k", "v", "do")]
    base_a = (maps + _ptr_args(("stats", "dk", "dv"), r, loc) + [("ws", ws_d), ("ws", ws_q)] + lens)
    prep = None
    if rr:
        for x, m in (("q", "Q"), ("k", "K"), ("v", "V"), ("do", "G")):
            defines[f"AW_{m}MODE"] = int(x in rr)
        ws_maps = ("ws", prog.ws_alloc(4 * B * 128 + 4 * B))
        base_p = base_p + ["const hdn_tmap* __restrict__ aw_maps"]
        base_a = base_a + [ws_maps]
        u16 = "const hdn_u16* __restrict__"
        mp = base_p[:4] + [f"{u16} {x}p" for x in "QKVG"] + ["hdn_tmap* __restrict__ aw_maps"]
        mp, ma = _finish(extra_p, extra_a, mp + _len_params(defines),
                         maps + _ptr_args(("q", "k", "v", "do"), r, loc) + [ws_maps] + lens)
        defines["HDN_ATTN_WG_MAPS_PARAMS"] = mp
        prep = (B, ma)
    ps, as_ = _finish(extra_p, extra_a, base_p, base_a)
    defines["HDN_ATTN_BWD_WG_PARAMS"] = ps
    prog.notes.append(f"{node.kind}: wgmma flash attention backward, {WG_BWD_BN} keys x "
                      f"{bm}-query tiles, {st} Q/dO stages, TMA Q/K/V/dO"
                      + (", exp2 / dS under the tensor-core groups in flight" if ovl else "")
                      + ("; ragged rows through per-batch tensor maps (hdn_attn_wg_maps)" if rr else ""))
    src = _source("attention_bwd_wgmma.hip", defines)
    main = ("launch", src, "hdn_attn_bwd_wg", ((Skv + WG_BWD_BN - 1) // WG_BWD_BN, Hkv, B), (256, 1, 1),
            as_, {"shmem": smem, "arch": "sm_90a"})
    if prep is None:
        return main
    return [("launch", src, "hdn_attn_wg_maps", (prep[0], 1, 1), (128, 1, 1), prep[1],
             {"arch": "sm_90a"}), main]


# ------------------------------------------------------------------------- AMD CDNA (MFMA)
MFMA_FWD_ROWS, MFMA_BWD_KEYS = 128, 64     # attention_fwd_mfma.hip AM_BM, attention_bwd_mfma.hip AM_BN


def _emit_mfma(prog, node, r, loc, defines, extra_p, extra_a):
    """The launch steps on AMD gfx90a / gfx942 (program.py admits no other gfx target):
    attention_fwd_mfma.hip / attention_bwd_mfma.hip, wave64 MFMA; the parameters, masks,
    dropout and workspace as the NVIDIA kernels'.  Static LDS only (no dynamic shared memory)."""
    B, H, Sq, D = _dims(r["q"])
    Hkv, Skv = _dims(r["k"])[1:3]
    Dv = _dims(r["v"])[3]
    for role in MODS:
        _need(role not in r, f"{node.kind}: {role} is not supported by the AMD MFMA attention kernels")
    _need(not node.attrs.get("alibi_mask"),
          f"{node.kind}: ALiBi is not supported by the AMD MFMA attention kernels")
    _need(not paged(r) and not ragged_roles(r),
          f"{node.kind}: paged K/V and ragged tensors: the AMD MFMA attention kernels address "
          f"dense [B, H, S, D] tensors only")
    _need(D == Dv and D in (64, 128),
          f"{node.kind}: head dim {D} (Dv {Dv}): the AMD MFMA attention kernels take "
          f"D = Dv in {{64, 128}} only")
    io = cg.dtype_name(r["q"].dtype)
    defines["HDN_BF16_IO"] = int(io == "BFLOAT16")
    u16 = "const hdn_u16* __restrict__"
    lens = [loc[r[x].uid] for x in ("seq_len_q", "seq_len_kv")] if defines["PADDING"] else []
    if node.kind == FWD:
        has_stats = "stats" in r
        defines["HAS_STATS"] = int(has_stats)
        if not has_stats:
            defines["LSB"] = defines["LSH"] = defines["LSS"] = 0
        base_p = [f"{u16} Q", f"{u16} K", f"{u16} V", "hdn_u16* __restrict__ O",
                  "float* __restrict__ LSE"]
        base_a = _ptr_args(("q", "k", "v", "o"), r, loc) + [loc[r["stats"].uid] if has_stats else None]
        ps, as_ = _finish(extra_p, extra_a, base_p + _len_params(defines), base_a + lens)
        defines["HDN_ATTN_FWD_PARAMS"] = ps
        src = _source("attention_fwd_mfma.hip", defines)
        prog.steps.append(("launch", src, "hdn_attn_fwd_mfma",
                           ((Sq + MFMA_FWD_ROWS - 1) // MFMA_FWD_ROWS, H, B), (256, 1, 1), as_))
        prog.notes.append(f"{node.kind}: MFMA flash attention, {MFMA_FWD_ROWS} query rows x 64-key tiles")
        return
    defines["HDN_TO_FLOAT(x)"] = CONV[io][0]
    defines["HDN_FROM_FLOAT(x)"] = CONV[io][1]
    n_rows = B * H * Sq
    ws_d = prog.ws_alloc(n_rows * 4)
    ws_q = prog.ws_alloc(n_rows * D * 4)
    main_p = [f"{u16} Q", f"{u16} K", f"{u16} V", f"{u16} dO", "const float* __restrict__ LSE",
              "hdn_u16* __restrict__ dK", "hdn_u16* __restrict__ dV",
              "const float* __restrict__ Dsum", "float* __restrict__ dQacc"] + _len_params(defines)
    main_a = (_ptr_args(("q", "k", "v", "do", "stats", "dk", "dv"), r, loc)
              + [("ws", ws_d), ("ws", ws_q)] + lens)
    ps, as_ = _finish(extra_p, extra_a, main_p, main_a)
    defines["HDN_ATTN_BWD_PARAMS"] = ps
    pre_p, pre_a = _finish(extra_p, extra_a, [f"{u16} O", f"{u16} dO", "float* __restrict__ Dsum"],
                           _ptr_args(("o", "do"), r, loc) + [("ws", ws_d)])
    defines["HDN_ATTN_PRE_PARAMS"] = pre_p
    dq_p, dq_a = _finish(extra_p, extra_a, ["const float* __restrict__ dQacc",
                                            "hdn_u16* __restrict__ dQ"],
                         [("ws", ws_q), loc[r["dq"].uid]])
    defines["HDN_ATTN_DQ_PARAMS"] = dq_p
    src = _source("attention_bwd_mfma.hip", defines)
    prog.steps.append(("memset", ws_q, n_rows * D * 4))
    prog.steps.append(("launch", src, "hdn_attn_bwd_pre", ((n_rows + 7) // 8, 1, 1), (256, 1, 1),
                       pre_a))
    prog.steps.append(("launch", src, "hdn_attn_bwd_mfma",
                       ((Skv + MFMA_BWD_KEYS - 1) // MFMA_BWD_KEYS, Hkv, B), (128, 1, 1), as_))
    prog.steps.append(("launch", src, "hdn_attn_bwd_dq", ((n_rows * D + 255) // 256, 1, 1),
                       (256, 1, 1), dq_a))
    prog.notes.append(f"{node.kind}: MFMA flash attention backward, {MFMA_BWD_KEYS}-key blocks")


# ------------------------------------------------------------------------- FP8 forward (Hopper)
FP8_SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
FP8_AMAX = ("amax_s", "amax_o")
FP8_USED = {"q", "k", "v", "o", "stats", "scale", "seq_len_q", "seq_len_kv", "seed", "offset",
            "attn_mask", "block_mask", "sink_token"} | set(FP8_SCALES) | set(FP8_AMAX)
# roles the fp8 forward declines with the reason
FP8_DECLINED = {"max": "the CPU reference declines max / sum_exp with FP8 data",
                "sum_exp": "the CPU reference declines max / sum_exp with FP8 data",
                "rng_dump": "the fp8 kernel does not write the dropout keep mask",
                "page_table_k": "paged K/V", "page_table_v": "paged K/V"}
FP8_OUT = {"HALF": 1, "BFLOAT16": 2, "FLOAT": 3}      # attention_fwd_fp8_wgmma.hip F8_OUT (0: q's fp8)
FP8_MAX_HEAD = 256
FP8_BM, FP8_BN, FP8_STAGES = 128, 128, 4


def is_fp8(node, r):
    """An SDPA node with fp8 data (q's type decides; the forward's fp8 roles need it)."""
    return "q" in r and cg.dtype_name(r["q"].dtype) in cg.FP8


def check_fp8(node, r):
    """The fp8 forward (attention_fwd_fp8_wgmma.hip): q / k / v one fp8 type, o that type or
    HALF / BFLOAT16 / FLOAT, head sizes D, Dv multiples of 16 up to 256, the fp8 scales 1-element
    FLOAT (constant, runtime scalar or device tensor), amax 1-element FLOAT device tensors, the
    score roles of the 16-bit kernels (attn_mask, ALiBi, block_mask, sink_token: _check_mods)
    and Philox dropout; not max / sum_exp (the CPU reference declines them with fp8 data),
    rng_dump, paged or ragged tensors.  The backward has no fp8 roles in hipDNN: declined."""
    k = node.kind
    _need(k == FWD, f"{k}: FP8 data (hipDNN's SdpaBackwardAttributes has no fp8 descale / "
                    f"scale / amax roles)")
    for role in r:
        _need(role in FP8_USED, f"{k}: {role} is not supported by the HIP engine with FP8 data"
              + (f" ({FP8_DECLINED[role]})" if role in FP8_DECLINED else ""))
    fmt = cg.dtype_name(r["q"].dtype)
    for role in DATA[k]:
        _need(role in r, f"{k}: {role} missing")
        t = r[role]
        _need(t.value is None and not t.is_runtime_pass_by_value, f"{k}: {role} is a scalar")
        _need(len(t.dims) == 4, f"{k}: {role} must be 4-d")
    for role in ("k", "v"):
        _need(cg.dtype_name(r[role].dtype) == fmt, f"{k}: q / k / v must share one FP8 type")
    odt = cg.dtype_name(r["o"].dtype)
    _need(odt == fmt or odt in FP8_OUT, f"{k}: o ({odt}) must be {fmt}, HALF, BFLOAT16 or FLOAT")
    _need(not ragged_roles(r), f"{k}: ragged tensors with FP8 data are not supported by the HIP "
                               f"engine")
    _check_common(node, r)
    D, Dv = _dims(r["q"])[3], _dims(r["v"])[3]
    for nm, x in (("D", D), ("Dv", Dv)):
        _need(x <= FP8_MAX_HEAD and x % 16 == 0, f"{k}: FP8 head dim {nm} = {x}: the HIP engine "
              f"takes multiples of 16 up to {FP8_MAX_HEAD}")
    _need(fp8_config(D, Dv)[0] <= SMEM_MAX, f"{k}: FP8 head dims D = {D}, Dv = {Dv}: "
          f"{fp8_config(D, Dv)[0]} bytes of shared memory")
    for role in ("q", "k", "v"):
        dd, ss = _dims(r[role]), _st(r[role])
        _need(all(x % 16 == 0 and (x > 0 or dd[i] == 1) for i, x in enumerate(ss[:3])),
              f"{k}: FP8 {role} needs positive strides along S / H / B that are multiples of 16 "
              f"(16-byte aligned rows for the tensor copy engine)")
    _need(max(max(_dims(r[x])) for x in DATA[k]) < 2 ** 31, f"{k}: extents of 2^31 or more")
    for role in FP8_SCALES:
        if role in r:
            t = r[role]
            _need(t.numel == 1 and cg.dtype_name(t.dtype) == "FLOAT", f"{k}: {role} must be 1 FLOAT")
    for role in FP8_AMAX:
        if role in r:
            t = r[role]
            _need(t.numel == 1 and cg.dtype_name(t.dtype) == "FLOAT" and t.value is None
                  and not t.is_runtime_pass_by_value, f"{k}: {role} must be a 1-element FLOAT "
                  f"tensor")


def _const(t):
    v = t.value[0] if isinstance(t.value, (list, tuple)) else t.value
    return float(np.float32(v))


def fp8_scalars(r, loc, defines):
    """F8_<ROLE> defines of the fp8 scale roles (1 when absent; a constant baked in; a runtime
    scalar by value; a device tensor read through a pointer) and the parameters they need."""
    ps, as_ = [], []
    for role in FP8_SCALES:
        key = "F8_" + role.upper()
        t = r.get(role)
        if t is None:
            defines[key] = "1.0f"
        elif t.value is not None:
            defines[key] = cg.flit(_const(t))
        elif t.is_runtime_pass_by_value:
            defines[key] = f"{role}_rt"
            ps.append(f"float {role}_rt")
            as_.append(("s", t.uid))
        else:
            defines[key] = f"(*{role}_p)"
            ps.append(f"const float* __restrict__ {role}_p")
            as_.append(loc[t.uid])
    return ps, as_


def _tmap8(t, loc, rows):
    """("tmap", ...) of a one-byte [B, H, S, D] tensor: a 4-d (D, S, H, B) view, box 128 x rows
    (the box's columns past D read as zeros)."""
    B, H, S, D = _dims(t)
    sb, sh, ss = _st(t)[:3]
    strides = [ss if S > 1 else D, sh if H > 1 else D * S, sb if B > 1 else D * S * H]
    return ("tmap", loc[t.uid], cg.dtype_name(t.dtype), (D, S, H, B), tuple(strides),
            (128, rows, 1, 1))


def fp8_smem_bytes(Dv, stages=FP8_STAGES, D=128):
    """Dynamic shared memory of hdn_attn_fwd_f8 (F8_SMEM_BYTES): Q, the K / Vt ring, barriers
    (Q / K rows: F8_NK 128-byte column atoms)."""
    nk = (int(D) + 127) // 128
    return nk * FP8_BM * 128 + stages * (nk * FP8_BN * 128 + pad64(Dv) * 128) + \
        8 * (1 + 4 * stages) + 1024


def fp8_config(D, Dv):
    """(dynamic shared memory bytes, K / Vt ring depth) of the fp8 forward: the deepest ring of
    FP8_STAGES..2 stages that fits (D, Dv <= 128: FP8_STAGES; 256 / 256: 3)."""
    for st in range(FP8_STAGES, 1, -1):
        smem = fp8_smem_bytes(Dv, st, D)
        if smem <= SMEM_MAX:
            return smem, st
    return fp8_smem_bytes(Dv, 2, D), 2


def fp8_overlap():
    """``HIPDNN_CABI_HIP_ATTN_FP8_OVERLAP`` = 1 / pp / 0 (the default until measured on a device):
    the one-sweep fp8 forward issues S(t) = Q K^T and P(t-1) V(t-1) together and runs the
    softmax and quantisation of S(t) while P V(t-1) is on the tensor cores
    (attention_fwd_fp8_wgmma.hip F8_OVL: the serial loop's operations in its order); ``pp``
    also issues the two consumer warpgroups' GEMMs in turns (F8_PP).  The exact two-sweep
    form keeps its serial loop.  Returns "", "1" or "pp"."""
    v = os.environ.get("HIPDNN_CABI_HIP_ATTN_FP8_OVERLAP", "0").strip().lower()
    if v in ("", "0", "off"):
        return ""
    return "pp" if v == "pp" else "1"


def emit_fp8(prog, node, r, loc, arch):
    """Launch steps of the fp8 forward: zero the amax outputs, V -> Vt (workspace [B, Hkv, Dv,
    Skv rounded up to 128]), the wgmma kernel: one sweep over the keys, P quantised relative to
    the running row max, as cuDNN's fp8 attention (``HIPDNN_CABI_HIP_ATTN_FP8=exact``: two sweeps,
    P quantised relative to the final row max exactly as the CPU reference does)."""
    _need((arch or "").startswith("sm_9"),
          f"{node.kind}: FP8 attention runs on the Hopper wgmma kernel only (sm_90); the device "
          f"target is {arch or 'not sm_90'}")
    B, H, Sq, D = _dims(r["q"])
    Hkv, Skv = _dims(r["k"])[1:3]
    Dv = _dims(r["v"])[3]
    fmt = cg.dtype_name(r["q"].dtype)
    odt = cg.dtype_name(r["o"].dtype)
    skvp = (Skv + FP8_BN - 1) // FP8_BN * FP8_BN
    defines = {}
    extra_p, extra_a = _prelude(node, r, defines, None, None, loc)
    _mods(prog, node, r, defines, extra_p, extra_a, loc)
    if defines.pop("ATT_BLKSKIP", 0):       # (this kernel masks block-mask scores one by one)
        defines["ATT_BLOCK"] = 1
    smem, st = fp8_config(D, Dv)
    has_stats = "stats" in r
    if not has_stats:
        defines["LSB"] = defines["LSH"] = defines["LSS"] = 0
    flash = os.environ.get("HIPDNN_CABI_HIP_ATTN_FP8", "flash") != "exact"
    defines.update(HAS_STATS=int(has_stats), F8_FMT=1 if fmt == "FP8_E4M3" else 2,
                   F8_OUT=FP8_OUT.get(odt, 0), F8_HKV=Hkv, F8_SKVP=skvp, F8_TWO_PASS=int(not flash),
                   F8_ST=st, F8_HAS_AMAX_S=int("amax_s" in r),
                   F8_HAS_AMAX_O=int("amax_o" in r))
    ovl = fp8_overlap() if flash else ""
    if ovl:
        defines["F8_OVL"] = 1
        if ovl == "pp":
            defines["F8_PP"] = 1
    sp, sa = fp8_scalars(r, loc, defines)
    vt = ("ws", prog.ws_alloc(B * Hkv * Dv * skvp))
    lens_p = _len_params(defines)
    lens = [loc[r[x].uid] for x in ("seq_len_q", "seq_len_kv")] if defines["PADDING"] else []
    defines["HDN_ATTN_F8_VT_PARAMS"] = ", ".join(
        ["const unsigned char* __restrict__ V", "unsigned char* __restrict__ Vt"] + lens_p)
    tm = "const __grid_constant__ hdn_tmap"
    base_p = [f"{tm} tmQ", f"{tm} tmK", f"{tm} tmV", "unsigned char* __restrict__ O",
              "float* __restrict__ LSE", "float* __restrict__ amax_s", "float* __restrict__ amax_o"]
    vmap = ("tmap", vt, fmt, (skvp, Dv, Hkv, B), (skvp, Dv * skvp, Hkv * Dv * skvp),
            (FP8_BN, pad64(Dv), 1, 1))
    base_a = [_tmap8(r["q"], loc, FP8_BM), _tmap8(r["k"], loc, FP8_BN), vmap, loc[r["o"].uid],
              loc[r["stats"].uid] if has_stats else None] + \
        [loc[r[x].uid] if x in r else None for x in FP8_AMAX]
    ps, as_ = _finish(extra_p + sp, extra_a + sa, base_p + lens_p, base_a + lens)
    defines["HDN_ATTN_FWD_F8_PARAMS"] = ps
    src = _source("attention_fwd_fp8_wgmma.hip", defines)
    _need(smem <= SMEM_MAX, f"{node.kind}: {smem} bytes of shared memory")
    for x in FP8_AMAX:
        if x in r:
            prog.steps.append(("memset", loc[r[x].uid], 4))
    prog.steps.append(("launch", src, "hdn_attn_f8_vt", (skvp // 128, (Dv + 63) // 64, B * Hkv),
                       (256, 1, 1), [loc[r["v"].uid], vt] + lens, {"arch": "sm_90a"}))
    prog.steps.append(("launch", src, "hdn_attn_fwd_f8", ((Sq + FP8_BM - 1) // FP8_BM, H, B),
                       (384, 1, 1), as_, {"shmem": smem, "arch": "sm_90a"}))
    prog.notes.append(f"{node.kind}: fp8 wgmma flash attention ({fmt} -> {odt}), "
                      f"{FP8_BM}x{FP8_BN} tiles, {st} K/Vt stages, "
                      f"{'one sweep' if flash else 'two sweeps'}, "
                      f"V transposed into the workspace"
                      + {"": "", "1": ", S / P V overlapped",
                         "pp": ", S / P V overlapped, ping-pong"}[ovl])
