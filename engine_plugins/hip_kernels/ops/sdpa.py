"""SDPA nodes on the HIP engine: flash-attention forward and backward.  Forward: on an sm_90
device kernels/attention_fwd_wgmma.hip (wgmma + tensor copy engine; kernels/hdn_tma.h,
hdn_wgmma.h) unless the graph uses dropout (or HIPDNN_CABI_HIP_ATTN=mma); else
kernels/attention_fwd.hip (mma.sync, kernels/hdn_mma.h).  Backward: kernels/attention_bwd.hip
(mma.sync).  Dropout from kernels/hdn_philox.h, the stream the CPU reference draws.

Applicable: q/k/v/o (and do/dq/dk/dv) HALF or BFLOAT16 (one type), 4-d [B, H, S, D] (v / o / do /
dv [B, H, S, Dv]) with head sizes D, Dv multiples of 8 up to 256 (Dv may differ from D; the
kernels compute on tiles padded to a multiple of 64 columns, the padding zero-filled and never
stored), unit stride along D and 16-byte aligned rows (BHSD, BSHD, packed QKV...);
Hq a multiple of Hkv; causal (top-left / bottom-right), left/right bands with either diagonal
alignment, padding masks (INT32/INT64 seq_len tensors), attention scale (attribute, by-value
constant, runtime pass-by-value scalar read at execute, or a 1-element FLOAT device tensor),
float32 stats, Philox dropout (seed/offset INT32/INT64 device tensors or constants); paged K/V
(forward: page_table_k and page_table_v, pools [pages, Hkv, page_size, D], page sizes powers of
two >= 16) and ragged (packed) q / k / v / o / stats / do / dq / dk / dv (offsets x multiplier),
both with seq_len_q and seq_len_kv, on the mma.sync kernels.  Everything else
(additive/boolean masks, ALiBi, user dropout masks, rng_dump, max/sum_exp, dbias, fp8 scales) is
not applicable here (the CPU reference engine implements most of it).  On AMD (the MFMA
kernels) D = Dv in {64, 128} only, no paged or ragged tensors.
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
              "page_table_k", "page_table_v"},
        BWD: {"q", "k", "v", "o", "do", "stats", "dq", "dk", "dv", "scale", "seq_len_q",
              "seq_len_kv", "seed", "offset", "dropout_scale_inv"}}
DATA = {FWD: ("q", "k", "v", "o"), BWD: ("q", "k", "v", "o", "do", "dq", "dk", "dv")}
MMA = {"HALF": "f16", "BFLOAT16": "bf16"}
CONV = {"HALF": ("hdn_half_bits_to_float(x)", "hdn_from_float<hdn_half>(x).bits"),
        "BFLOAT16": ("hdn_bf16_bits_to_float(x)", "hdn_from_float<hdn_bf16>(x).bits")}
FWD_NW = 4
MAX_HEAD = 256
SMEM_MAX = 227 * 1024      # opt-in dynamic shared memory per block on sm_90
PREFIX = {"q": "Q", "k": "K", "v": "V", "o": "O", "do": "G", "dq": "DQ", "dk": "DK", "dv": "DV",
          "stats": "L"}


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


def kv_extent(node, r):
    """(Hkv, Skv) of the logical k / v: a paged pool's from its page table and max_seq_len_kv
    (default: the positions the table addresses), as the CPU reference's kv_dims."""
    d = _dims(r["k"])
    if not paged(r):
        return d[1], d[2]
    cap = _dims(r["page_table_k"])[2] * d[2]
    skv = node.attrs.get("max_seq_len_kv")
    return d[1], int(cap if skv is None else skv)


def _check_paged(node, r, B):
    k = node.kind
    _need(all(x in r for x in PAGED.values()),
          f"{k}: paged K/V needs both page_table_k and page_table_v on the HIP engine")
    ck, cv = _dims(r["k"]), _dims(r["v"])
    _need(len(ck) == 4 and len(cv) == 4 and ck[:3] == cv[:3],
          f"{k}: the k / v page pools must be [pages, Hkv, page_size, D] alike")
    ps = ck[2]
    _need(ps >= 16 and ps & (ps - 1) == 0,
          f"{k}: page size {ps}: the HIP engine takes powers of two >= 16")
    tabs = [_dims(r[x]) for x in PAGED.values()]
    for x in PAGED.values():
        t = r[x]
        d = _dims(t)
        _need(len(d) == 4 and d[0] == B and d[1] == 1 and d[3] == 1 and d == tabs[0]
              and cg.dtype_name(t.dtype) in ("INT32", "INT64") and t.value is None
              and not t.virtual, f"{k}: {x} {d} must be INT32/INT64 [B={B}, 1, max_pages, 1] "
              f"(both tables alike)")
    skv = node.attrs.get("max_seq_len_kv")
    _need(skv is None or 0 < int(skv) <= tabs[0][2] * ps,
          f"{k}: max_seq_len_kv {skv} exceeds the {tabs[0][2] * ps} positions the page tables "
          f"address")
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
    for role in r:
        _need(role in USED[k], f"{k}: {role} is not supported by the HIP engine")
    for role in DATA[k]:
        _need(role in r, f"{k}: {role} missing")
        t = r[role]
        _need(t.value is None and not t.is_runtime_pass_by_value, f"{k}: {role} is a scalar")
        _need(len(t.dims) == 4, f"{k}: {role} must be 4-d")
        _need(cg.dtype_name(t.dtype) in MMA, f"{k}: {role} must be HALF or BFLOAT16")
    _need(len({cg.dtype_name(r[x].dtype) for x in DATA[k]}) == 1, f"{k}: mixed data types")
    B, H, Sq, D = _dims(r["q"])
    if paged(r):
        _check_paged(node, r, B)
    _check_ragged(node, graph, r, B)
    Hkv, Skv = kv_extent(node, r)
    Dk = _dims(r["k"])[3]
    Dv = _dims(r["v"])[3]
    vd = _dims(r["v"])[:3]
    _need((vd == [B, Hkv, Skv] or paged(r)) and Dk == D and _dims(r["k"])[0] == vd[0],
          f"{k}: k/v shapes")
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
    _need(not a.get("alibi_mask"), f"{k}: ALiBi is not supported by the HIP engine")
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
                defines[f"HDN_{nm.upper()}_VALUE"] = int(v)
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
    if paged(r):
        lg = int(_dims(r["k"])[2]).bit_length() - 1
        defines["KV_PAGES"] = f"{_dims(r['k'])[0]}LL"
        for role, nm in (("k", "kpt"), ("v", "vpt")):
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


def _source(kernel_file, defines):
    lines = ["#define HDN_GENERATED 1", '#include "hdn_compat.h"']
    for k, v in defines.items():
        lines.append(f"#define {k} {v}")
    body = cg.read_kernel(kernel_file)
    # baked seed / offset: the kernel reads *seedp / *offp; give them constant storage
    for nm in ("seedp", "offp"):
        key = f"HDN_{nm.upper()}_VALUE"
        if key in defines:
            body = body.replace(f"*{nm};", f"(long long){key}LL;")
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
    dropout, no paged K / V or ragged tensor (their rows follow a page table / per-batch offsets
    the tensor maps cannot: the mma.sync kernel loads them), and Q / K / V views the tensor copy
    engine can describe (positive 16-byte strides along S / H / B where those extents exceed
    1).  ``HIPDNN_CABI_HIP_ATTN=mma`` forces the mma.sync kernel."""
    if node.kind != FWD or not (arch or "").startswith("sm_9"):
        return False
    if paged(r) or ragged_roles(r):
        return False
    if os.environ.get("HIPDNN_CABI_HIP_ATTN", "auto") in ("mma", "mma.sync"):
        return False
    if node.attrs.get("dropout_probability"):
        return False
    for role in ("q", "k", "v"):
        dd, ss = _dims(r[role]), _st(r[role])
        if any(ss[i] <= 0 for i in range(3) if dd[i] > 1) or max(dd) >= 2 ** 31:
            return False
    return True


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


def _tmap(t, loc, rows):
    """("tmap", base, dtype, dims, byte strides, box): a 4-d (D, S, H, B) view, box 64 x rows;
    the box's columns past D read as zeros (the padded head)."""
    B, H, S, D = _dims(t)
    sb, sh, ss = _st(t)[:3]
    dims = (D, S, H, B)
    strides = [ss * 2 if S > 1 else D * 2, sh * 2 if H > 1 else D * 2 * S,
               sb * 2 if B > 1 else D * 2 * S * H]
    return ("tmap", loc[t.uid], cg.dtype_name(t.dtype), dims, tuple(strides), (64, rows, 1, 1))


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
    B, H, Sq, D = _dims(r["q"])
    Hkv, Skv = kv_extent(node, r)
    Dv = _dims(r["v"])[3]
    dp, dvp = pad64(D), pad64(Dv)
    defines = {}
    extra_p, extra_a = _prelude(node, r, defines, None, None, loc, graph)
    if (arch or "").startswith("gfx"):      # AMD CDNA: the MFMA kernels (attention_*_mfma.hip)
        return _emit_mfma(prog, node, r, loc, defines, extra_p, extra_a)
    u16 = "const hdn_u16* __restrict__"
    if node.kind == FWD:
        defines["NW"] = FWD_NW
        has_stats = "stats" in r
        defines["HAS_STATS"] = int(has_stats)
        if not has_stats:
            defines["LSB"] = defines["LSH"] = defines["LSS"] = 0
        if wgmma_ok(node, r, arch):
            io = cg.dtype_name(r["q"].dtype)
            defines["HDN_BF16_IO"] = int(io == "BFLOAT16")
            st = int(os.environ.get("HIPDNN_CABI_HIP_ATTN_STAGES", "0") or 0) or None
            smem, st, bn = wg_config(D, Dv, st)
            _need(smem <= SMEM_MAX, f"{node.kind}: {st} K/V stages need {smem} bytes of shared memory")
            defines["AW_ST"] = st
            defines["AW_BN"] = bn
            tm = "const __grid_constant__ hdn_tmap"
            base_p = [f"{tm} tmQ", f"{tm} tmK", f"{tm} tmV", "hdn_u16* __restrict__ O",
                      "float* __restrict__ LSE"]
            base_a = [_tmap(r["q"], loc, WG_BM), _tmap(r["k"], loc, bn), _tmap(r["v"], loc, bn)] + \
                [loc[r["o"].uid]] + \
                [loc[r["stats"].uid] if has_stats else None]
            lens = [loc[r[x].uid] for x in ("seq_len_q", "seq_len_kv")] if defines["PADDING"] else []
            ps, as_ = _finish(extra_p, extra_a, base_p + _len_params(defines), base_a + lens)
            defines["HDN_ATTN_FWD_WG_PARAMS"] = ps
            src = _source("attention_fwd_wgmma.hip", defines)
            prog.steps.append(("launch", src, "hdn_attn_fwd_wg", ((Sq + WG_BM - 1) // WG_BM, H, B),
                               (384, 1, 1), as_, {"shmem": smem, "arch": "sm_90a"}))
            prog.notes.append(f"{node.kind}: wgmma flash attention, {WG_BM}x{bn} tiles, "
                              f"{st} K/V stages, TMA QKV")
            return
        base_p = [f"{u16} Q", f"{u16} K", f"{u16} V", "hdn_u16* __restrict__ O",
                  "float* __restrict__ LSE"]
        base_a = _ptr_args(("q", "k", "v", "o"), r, loc) + [loc[r["stats"].uid] if has_stats else None]
        lens = [(x, loc[r[x].uid]) for x in ("seq_len_q", "seq_len_kv") if defines["PADDING"]]
        ps, as_ = _finish(extra_p, extra_a, base_p + _len_params(defines), base_a + [a for _, a in lens])
        defines["HDN_ATTN_FWD_PARAMS"] = ps     # (no stats: the LSE parameter is dropped)
        BM = 16 * FWD_NW
        grid = ((Sq + BM - 1) // BM, H, B)
        nsplit = 1
        if gqa_pack(node, H, Hkv, Sq):
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
        src = _source("attention_fwd.hip", defines)
        smem = (BM + 64) * dp * 2 + 64 * dvp * 2      # Q, K, V tiles (attention_fwd.hip)
        name = "hdn_attn_fwd"
        prog.steps.append(("launch", src, name, grid, (32 * FWD_NW, 1, 1), as_, smem))
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
    src = _source("attention_bwd.hip", defines)
    prog.steps.append(("memset", ws_q, n_rows * dp * 4))
    prog.steps.append(("launch", src, "hdn_attn_bwd_pre", ((n_rows + 7) // 8, 1, 1), (256, 1, 1),
                       pre_a))
    prog.steps.append(("launch", src, "hdn_attn_bwd", ((Skv + 63) // 64 * nsplit, Hkv, B),
                       (128, 1, 1), as_, bwd_smem_bytes(D, Dv)))
    prog.steps.append(("launch", src, "hdn_attn_bwd_dq", ((n_rows * D + 255) // 256, 1, 1),
                       (256, 1, 1), dq_a))


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


# ------------------------------------------------------------------------- AMD CDNA (MFMA)
MFMA_FWD_ROWS, MFMA_BWD_KEYS = 128, 64     # attention_fwd_mfma.hip AM_BM, attention_bwd_mfma.hip AM_BN


def _emit_mfma(prog, node, r, loc, defines, extra_p, extra_a):
    """The launch steps on AMD gfx90a / gfx942 (program.py admits no other gfx target):
    attention_fwd_mfma.hip / attention_bwd_mfma.hip, wave64 MFMA; the parameters, masks,
    dropout and workspace as the NVIDIA kernels'.  Static LDS only (no dynamic shared memory)."""
    B, H, Sq, D = _dims(r["q"])
    Hkv, Skv = _dims(r["k"])[1:3]
    Dv = _dims(r["v"])[3]
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
