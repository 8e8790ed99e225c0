"""Layernorm / RMSnorm forward and backward on the GPU: one row kernel family on the shared
block-reduction core (kernels/hdn_reduce.h).

x is viewed as [M rows, D normalised elements] (the normalised dims are the trailing ones, found
as the CPU reference does: normalized_dim_count, else the statistics' shape, else scale's shape,
else all but the first); the kernels read x / y / dy / dx packed row-major (the hipDNN default
16-byte tensor alignment is assumed for the vector loads): other layouts are copied into packed
workspace before (inputs) and after (outputs) the row kernel.  One block per row keeps its row in registers:
mean and variance are two passes over registers (no cancellation), float32 throughout.  Backward
blocks loop over rows, keep dscale / dbias partials per column in registers, write them to the
workspace, and a column kernel sums the partials in a fixed order (deterministic).

Backward, V1 (the default).  bf16 16384 x 4096 on 132 SMs: 528 blocks of 512 threads (2
resident per SM at 64 registers: two waves), 31 rows each; each row's x and dy (16 B per
thread) are loaded one row ahead (blocks below 1024 threads), so a row's load latency overlaps
the previous row's arithmetic and block reduction.  Traffic 268 MB read + 134 MB written (~120
us at 3.35 TB/s) + partials 528 x 4096 x 2 x 4 B = 17 MB written and read back by the column
kernel (128 blocks of 32 columns x 8 lanes, each lane 66 partial rows with 8 loads in flight);
``HIPDNN_CABI_HIP_NORM_BWD_FAST=0`` makes each row's loads wait for the previous row and the
column kernel one thread per column summing 528 rows, 16 blocks in all.  Measured (H100)
0.227-0.264 ms layernorm, 0.192-0.203 ms RMSnorm, against cuDNN's 0.16 ms.  Where the time goes,
by construction:
  * bytes in flight: at most one row ahead per block - 16 KB, 32 KB per SM, and only between
    the prefetch's issue and its use; Little's law at 3.35 TB/s and ~1 us loaded latency asks
    for ~25-40 KB per SM all the time, so the memory system idles between rows;
  * the saved mean / rstd are read in the row's own iteration: one dependent DRAM latency per
    row on the critical path that the x / dy prefetch does not cover;
  * two block barriers per row (hdn_block_sum) over 16 warps, with nothing else resident to
    fill the stall but the SM's one other block;
  * two waves of 264 blocks: the second wave's blocks start cold (their first row unprefetched);
  * partials: 17 MB (layernorm, with dbias) / 8.6 MB (RMSnorm) written, read back by a column
    kernel whose 4-byte loads keep ~8 KB per SM in flight (~1 TB/s: ~17 / ~9 us) - 4-8 % of
    the traffic and a second launch.

Backward, V2 (``HIPDNN_CABI_HIP_NORM_BWD_V2=1``, opt-in; 2..8 forces the stage count; NVIDIA
only - cp.async): :func:`v2_geometry`, :func:`_emit_bwd_v2`.
  * a persistent grid of exactly SMs x blocks-per-SM (bf16 4096: 264 blocks of 512 threads, 2 an
    SM at 64 registers - one wave), row blocks b, b + NB, ... per block (62-63 rows: the tail is
    one row);
  * a row group of TPR threads (whole warps, one 16-byte chunk of x and of dy per thread where D
    allows; 8 rows of one warp each for short rows) per row; x / dy staged through S
    shared-memory stages by cp.async, S - 1 row blocks ahead (bf16 4096: S = 4, 48 KB in flight
    per block, 96 KB per SM); each thread reads back only the slots it copied, so the staging
    needs no barrier (cp.async.wait_group per thread);
  * mean / rstd read two row blocks ahead into registers;
  * one block barrier per row (the two row sums through a double-buffered shared array; none
    where a row is one warp); x-hat and dy * scale stay in registers between the passes where a
    thread holds one chunk and every thread of the row is busy, else both passes re-read the
    staged row (the scale then from global memory / L1);
  * dscale / dbias partials per column in registers across all of a block's rows, the row groups
    summed once at the end: 264 x 4096 x 2 x 4 B = 8.6 MB (layernorm), half of V1's; the column
    finish reads them with 16-byte loads, 8 column quads x 32 row lanes a block, every load of
    a lane in flight (32 KB per block).
  Expected: 402 MB + 17 MB of partial traffic at ~3 TB/s ~ 0.14 ms + the finish (~5 us).
  Numerics: fp32 throughout; dx as V1 (the same per-thread order and row reduction: butterfly in
  the warp, the warps in ascending order); dscale / dbias sum each thread's rows in order, then
  the block's row groups in order, then the partial rows lane-strided and the lanes in order -
  deterministic for a given SM count, a different order from V1's.  Falls back to V1: AMD
  targets, 16-bit rows of odd length (no 2-byte cp.async), more than 8 columns a thread (16-bit
  D > 8192, fp32 D > 8192), stages over the shared-memory budget.
"""
from __future__ import annotations

import copy
import math

from hipdnn_cabi.schemas import catalog

from .. import codegen as cg
from ..codegen import EwIn, EwOut
from ..gemm_core import knob
from ._base import check_storage_types, check_tensors, declines, kinds, op, scalar_arg

KINDS = kinds("norms")
FUSES = ("LayernormAttributes", "RMSNormAttributes")   # forward: a pointwise run fuses into y
FLOATS = ("FLOAT", "HALF", "BFLOAT16")
# epsilon may be a runtime pass-by-value scalar: the kernels take it as a by-value float argument
RUNTIME_SCALARS = {k: op(k).scalar_roles for k in KINDS if op(k).scalar_roles}


def check(node, graph, r):
    check_tensors(node, r, RUNTIME_SCALARS.get(node.kind, ()))
    check_storage_types(node, r, extra=("DOUBLE",))
    with declines(node.kind):
        _check(node, graph, packed_view(node, r)[0])


def emit(ctx, node, r, tag, fused=None):
    """``fused``: a following pointwise run (ops.pointwise.Run) computed on the normalised value
    in registers and stored by the norm kernel.  x-shaped tensors that are not packed row-major
    (NHWC, padded, permuted) are copied into packed workspace first (inputs) or from it after
    (outputs)."""
    epi = None
    if fused:
        y = r["y"]
        epi = fused.body(_dims(y), seed=y.uid)
        ctx.prog.notes.append(f"{node.kind} + {len(fused.members)} pointwise node(s) fused")
    rp, moved = packed_view(node, r)
    loc = ctx.loc
    if moved:
        loc = dict(ctx.loc)
        for role in moved:
            t = rp[role]
            loc[t.uid] = ("ws", ctx.prog.ws_alloc(t.numel * cg.ELEM_SIZE[cg.dtype_name(t.dtype)]))
        for role in moved:
            if role in op(node.kind).inputs:
                _copy(ctx.prog, r[role], ctx.loc[r[role].uid], rp[role], loc[r[role].uid], f"{tag}_{role}")
    with declines(node.kind):
        _emit(ctx.prog, ctx.graph, node, rp, loc, tag, ctx.sms, ctx.use_mma, epi=epi, arch=ctx.arch)
    for role in moved:
        if role in op(node.kind).outputs:
            _copy(ctx.prog, rp[role], loc[r[role].uid], r[role], ctx.loc[r[role].uid], f"{tag}_{role}")


def is_wide(r):
    """DOUBLE tensors: the double row kernels (:func:`_emit_wide`)."""
    return any(cg.dtype_name(t.dtype) == "DOUBLE" for t in r.values() if t.value is None)


def fusable_output(node, r):
    if node.kind not in FUSES or packed_view(node, r)[1] or is_wide(r):
        return None
    return r["y"].uid


def packed_view(node, r):
    """(r with the x-shaped roles given packed row-major strides, the roles that changed)."""
    o = op(node.kind)
    rp, moved = dict(r), []
    for role in o.roles_of(catalog.DATA) + o.roles_of(catalog.OUT):
        t = r.get(role)
        if t is None or packed(_dims(t), _st(t)):
            continue
        c = copy.copy(t)
        c.strides = _row_major(_dims(t))
        rp[role] = c
        moved.append(role)
    return rp, moved


def _row_major(dims):
    st, acc = [], 1
    for d in reversed(dims):
        st.append(acc)
        acc *= d
    return list(reversed(st))


def _copy(prog, src, src_loc, dst, dst_loc, tag):
    """One elementwise kernel: dst = src (same dims and type, any strides)."""
    domain = _dims(dst)
    name = f"hdn_norm_copy_{tag}"
    T = cg.dtype_name(src.dtype)
    s, grid, block = cg.elementwise_source(name, domain, cg.dense_order(domain, _st(dst)),
                                           [EwIn("v", T, _st(src), param="ps")], [],
                                           [EwOut("v", T, _st(dst), "pd")])
    prog.steps.append(("launch", s, name, grid, block, [src_loc, dst_loc]))


def fused_store_ok(t):
    """The fused kernel stores the run's outputs packed, like y."""
    return packed(_dims(t), _st(t))


class NA(Exception):
    pass


def _need(c, why):
    if not c:
        raise NA(why)


def _dims(t):
    return [int(d) for d in t.dims]


def _st(t):
    return [int(s) for s in t.strides]


def packed(dims, strides):
    acc = 1
    for d, s in zip(reversed(dims), reversed(strides)):
        if d != 1 and s != acc:
            return False
        acc *= d
    return True


def norm_axes(node, r, xd):
    n = len(xd)
    k = node.attrs.get("normalized_dim_count")
    if k:
        return list(range(n - int(k), n))
    for sr in ("mean", "inv_variance", "inv_rms"):
        if sr in r and len(r[sr].dims) == n:
            sd = _dims(r[sr])
            ax = [j for j in range(n) if sd[j] == 1 and xd[j] != 1]
            if ax:
                return list(range(ax[0], n))
    sc = r.get("scale")
    if sc is not None and len(sc.dims) == n and any(d != 1 for d in _dims(sc)):
        first = next(j for j, d in enumerate(_dims(sc)) if d != 1)
        return list(range(first, n))
    return list(range(1, n))


def _lin_offset(var, dims, strides):
    """C expression: offset of linear (row-major) index ``var`` over dims with strides."""
    terms, div = [], 1
    for d, s in zip(reversed(dims), reversed(strides)):
        if d != 1 and s != 0:
            terms.append(f"(({var} / {div}LL) % {d}LL) * {s}LL" if div > 1 else
                         f"({var} % {d}LL) * {s}LL")
        div *= d
    return " + ".join(terms) or "0"


def geometry(node, r):
    bwd = "Backward" in node.kind
    fl = FLOATS + (("DOUBLE",) if is_wide(r) else ())
    x = r["x"]
    xd = _dims(x)
    axes = norm_axes(node, r, xd)
    n = len(xd)
    D = math.prod(xd[a] for a in axes)
    M = math.prod(xd) // max(D, 1)
    _need(D >= 1 and M >= 1, "empty norm")
    o = op(node.kind)
    data = o.roles_of(catalog.DATA) + o.roles_of(catalog.OUT)      # the x-shaped roles
    for role in data:
        _need(role in r and _dims(r[role]) == xd, f"{role} must have x's dims")
        _need(packed(xd, _st(r[role])), f"{role} must be packed row-major for the GPU norm")
        _need(cg.dtype_name(r[role].dtype) in fl, f"{role}: type")
    pshape = xd[axes[0]:]
    params = ("scale", "dscale", "dbias") if bwd else ("scale", "bias")
    for role in params:
        if role in r:
            t = r[role]
            _need(cg.dtype_name(t.dtype) in fl and t.value is None, f"{role}: type")
            td = _dims(t)
            _need(len(td) <= n, f"{role}: rank")
            td = [1] * (n - len(td)) + td
            _need(all(td[j] == 1 for j in range(axes[0])), f"{role} must not vary over rows")
            _need(all(a in (1, b) for a, b in zip(td[axes[0]:], pshape)), f"{role}: broadcast")
            if bwd:
                _need(t.numel == D and packed(td, [0] * (n - len(t.strides)) + _st(t)),
                      f"{role}: the GPU norm backward needs a full packed {role}")
    stats = ("mean", "inv_variance", "inv_rms")
    for role in stats:
        if role in r:
            t = r[role]
            _need(t.numel == M and cg.dtype_name(t.dtype) in fl, f"{role}: M elements")
    if bwd:
        need = ("mean", "inv_variance") if node.kind.startswith("Layernorm") else ("inv_rms",)
        _need(all(q in r for q in need), "the GPU norm backward needs the saved statistics")
        _need("dscale" in r, "dscale missing")
    return dict(M=M, D=D, axes=axes, xd=xd, pshape=pshape)


def _check(node, graph, r):
    try:
        g = geometry(node, r)
    except NA as e:
        raise ValueError(str(e)) from None
    eps = r.get("epsilon")
    if eps is not None:
        _ok = eps.numel == 1 and (eps.value is not None or eps.is_runtime_pass_by_value
                                  or cg.dtype_name(eps.dtype) in FLOATS)
        if not _ok:
            raise ValueError("epsilon must be one float")
    return g


def _vec(D, dts):
    """Elements per 16-byte vector when the data tensors share one element size and D allows it,
    else 1 (the row kernels' vectors are one 16-byte load / store of every tensor)."""
    sizes = {cg.ELEM_SIZE[t] for t in dts}
    if len(sizes) != 1:
        return 1
    v = 16 // sizes.pop()
    return v if D % v == 0 else 1


def _threads(DQ, per_thread=None):
    """Threads per row: one 16-byte vector each (backward), or about ``per_thread`` vectors
    each (forward: several independent loads in flight, small blocks, cheap reductions)."""
    nt = 32
    if per_thread:
        while nt < 1024 and nt * per_thread < DQ:
            nt *= 2
        return nt
    while nt < 1024 and nt * 2 <= DQ:
        nt *= 2
    while nt < 1024 and -(-DQ // nt) > 16:
        nt *= 2
    return nt


def _param_load(name, t, D, pshape, xd_tail, var="j"):
    """C expression: element j of the normalised block read from param ``name``."""
    if t.numel == D:
        return f"hdn_to_float({name}[{var}])"
    n = len(xd_tail)
    td = [1] * (n - len(t.dims)) + _dims(t)[-n:] if len(t.dims) >= n else [1] * (n - len(t.dims)) + _dims(t)
    ts = [0] * (n - len(t.strides)) + _st(t)[-n:] if len(t.strides) >= n else [0] * (n - len(t.strides)) + _st(t)
    ts = [0 if td[k] == 1 else ts[k] for k in range(n)]
    return f"hdn_to_float({name}[{_lin_offset(var, xd_tail, ts)}])"


def _param_vec(name, t, D, VEC, var):
    """C lines loading the VEC parameter values of chunk q into float ``var``[VEC] with 16-byte
    loads, when the parameter is a packed D-element vector (the hipDNN layout); else None."""
    if t.numel != D or not packed([int(d) for d in t.dims], _st(t)):
        return None
    pt = cg.dtype_name(t.dtype)
    L = [f"float {var}[{VEC}];"]
    if pt == "FLOAT" and VEC % 4 == 0:
        L += [f"#pragma unroll\nfor (int h = 0; h < {VEC // 4}; ++h) {{ const float4 f = "
              f"reinterpret_cast<const float4*>({name} + (long long)q * {VEC})[h]; "
              f"{var}[4 * h] = f.x; {var}[4 * h + 1] = f.y; {var}[4 * h + 2] = f.z; {var}[4 * h + 3] = f.w; }}"]
        return L
    if pt in ("HALF", "BFLOAT16") and VEC % 8 == 0:
        T = cg.CTYPE[pt]
        L += [f"#pragma unroll\nfor (int h = 0; h < {VEC // 8}; ++h) hdn_unpack("
              f"reinterpret_cast<const uint4*>({name} + (long long)q * {VEC})[h], ({T}*)0, &{var}[8 * h]);"]
        return L
    return None


def _eps_code(r, args, params, loc, wide=False):
    """epsilon as C code (``wide``: the double row kernels, a DOUBLE runtime scalar then a
    double argument)."""
    eps = r.get("epsilon")
    if eps is None:
        return "0.0f"
    if eps.value is not None:
        v = eps.value[0] if isinstance(eps.value, (list, tuple)) else eps.value
        return cg.flit(float(v))
    if eps.is_runtime_pass_by_value:      # read on the host at execute, passed by value
        ctype, src = scalar_arg(eps, loc, wide)
        params.append(f"const {ctype} peps")
        args.append(src)
        return "peps"
    params.append(f"const {cg.CTYPE[cg.dtype_name(eps.dtype)]}* __restrict__ peps")
    args.append(loc[eps.uid])
    return "hdn_to_float(peps[0])"


HEAD = '#define HDN_GENERATED 1\n#include "hdn_compat.h"\n#include "hdn_reduce.h"\n'


def _loads(var, ptr, T, VEC, NCH, NT, DQ, rowbase):
    L = [f"  float {var}[{NCH * VEC}];",
         f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
         f"    const int q = threadIdx.x + c * {NT};",
         f"    if (q < {DQ}) {{"]
    if VEC > 1:
        L.append(f"      const uint4 u = *reinterpret_cast<const uint4*>({ptr} + {rowbase} + (long long)q * {VEC});")
        L.append(f"      hdn_unpack(u, ({T}*)0, &{var}[c * {VEC}]);")
    else:
        L.append(f"      {var}[c] = hdn_to_float({ptr}[{rowbase} + q]);")
    L.append(f"    }} else {{ for (int e = 0; e < {VEC}; ++e) {var}[c * {VEC} + e] = 0.f; }}")
    L.append("  }")
    return L


def _raw_decl(var, T, VEC, NCH):
    return [f"  {'uint4' if VEC > 1 else T} {var}[{NCH}];"]


def _raw_load(var, ptr, VEC, NCH, NT, DQ, rowbase):
    """This thread's chunks of one row as raw 16-byte vectors (or elements), not converted."""
    return [f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
            f"    const int q = threadIdx.x + c * {NT};",
            f"    if (q < {DQ}) {var}[c] = " + (f"*reinterpret_cast<const uint4*>({ptr} + {rowbase} + (long long)q * {VEC});"
                                            if VEC > 1 else f"{ptr}[{rowbase} + q];"),
            "  }"]


def _raw_unpack(var, raw, T, VEC, NCH, NT, DQ):
    """float ``var`` from the raw chunks (zero past the row), as _loads gives."""
    L = [f"  float {var}[{NCH * VEC}];",
         f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
         f"    const int q = threadIdx.x + c * {NT};",
         f"    if (q < {DQ}) {{"]
    L.append(f"      hdn_unpack({raw}[c], ({T}*)0, &{var}[c * {VEC}]);" if VEC > 1 else
             f"      {var}[c] = hdn_to_float({raw}[c]);")
    L.append(f"    }} else {{ for (int e = 0; e < {VEC}; ++e) {var}[c * {VEC} + e] = 0.f; }}")
    L.append("  }")
    return L


def _store(var, ptr, T, VEC, NCH, NT, DQ, rowbase):
    L = [f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
         f"    const int q = threadIdx.x + c * {NT};",
         f"    if (q < {DQ}) {{"]
    if VEC > 1:
        L.append(f"      *reinterpret_cast<uint4*>({ptr} + {rowbase} + (long long)q * {VEC}) = hdn_pack<{T}>(&{var}[c * {VEC}]);")
    else:
        L.append(f"      {ptr}[{rowbase} + q] = hdn_from_float<{T}>({var}[c]);")
    L.append("    }")
    L.append("  }")
    return L


def _each(body, VEC, NCH, NT, DQ):
    """Loop over this thread's elements: k (register index) and j (column)."""
    return [f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
            f"    const int q = threadIdx.x + c * {NT};",
            f"    if (q < {DQ}) {{",
            f"#pragma unroll\n      for (int e = 0; e < {VEC}; ++e) {{",
            f"        const int k = c * {VEC} + e; const int j = q * {VEC} + e; (void)j; (void)k;",
            *["        " + b for b in body],
            "      }", "    }", "  }"]


def _emit(prog, graph, node, r, loc, tag, sms, use_mma=True, epi=None, arch=None):
    """``epi``: a following pointwise run fused into the forward kernel (the run's body,
    ops.pointwise.run_body, seeded with the virtual y): (inputs, statements, outputs).
    ``arch``: the device's target (the V2 backward is NVIDIA only: cp.async)."""
    g = geometry(node, r)
    if is_wide(r):
        return _emit_wide(prog, node, r, loc, tag, g)
    if "Backward" in node.kind:
        stages = v2_stages()
        if stages is not None and not (arch or "").startswith("gfx") and \
                _emit_bwd_v2(prog, node, r, loc, tag, sms, g, stages):
            return None
        return _emit_bwd(prog, node, r, loc, tag, sms, g, arch)
    return _emit_fwd(prog, node, r, loc, tag, g, epi)


def _vload(var, ptr, T, VEC, off):
    """C lines: float ``var``[VEC] from ``ptr`` + off with 16-byte loads where the type allows."""
    es = cg.ELEM_SIZE[T]
    C = cg.CTYPE[T]
    L = [f"float {var}[{VEC}];"]
    if VEC > 1 and (VEC * es) % 16 == 0:
        L.append(f"#pragma unroll\nfor (int h = 0; h < {VEC * es // 16}; ++h) hdn_unpack("
                 f"reinterpret_cast<const uint4*>({ptr} + {off})[h], ({C}*)0, &{var}[h * {16 // es}]);")
    else:
        L.append(f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) {var}[e] = hdn_to_float({ptr}[{off} + e]);")
    return L


def _vstore(var, ptr, T, VEC, off):
    es = cg.ELEM_SIZE[T]
    C = cg.CTYPE[T]
    if VEC > 1 and (VEC * es) % 16 == 0:
        return [f"#pragma unroll\nfor (int h = 0; h < {VEC * es // 16}; ++h) "
                f"reinterpret_cast<uint4*>({ptr} + {off})[h] = hdn_pack<{C}>(&{var}[h * {16 // es}]);"]
    return [f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) {ptr}[{off} + e] = hdn_from_float<{C}>({var}[e]);"]


def _row_strides(dims):
    st, acc = [], 1
    for d in reversed(dims):
        st.append(acc if d != 1 else 0)
        acc *= d
    return list(reversed(st))


def _epilogue(epi, g, y, VEC, NCH, NT, DQ, loc, params, args):
    """C lines replacing y's store: the fused pointwise run per element, its inputs read with
    16-byte loads when they are x-shaped or one row of parameters (else through coordinates),
    its outputs stored packed like y."""
    ins, stmts, outs = epi
    xd, a0 = g["xd"], g["axes"][0]
    full = _row_strides(xd)
    D = g["D"]
    rowvec = [0] * a0 + _row_strides(xd[a0:])
    pre, per = [], []
    coords = False
    for u, sp in ins.items():
        if sp[0] == "const":
            per.append(f"const float x{u} = {cg.flit(sp[1])};")
            continue
        if sp[0] == "scalar":
            params.append(f"const float p{u}")
            args.append(loc[u])
            per.append(f"const float x{u} = p{u};")
            continue
        st, T = [0 if xd[d] == 1 else v for d, v in enumerate(sp[1])], sp[2]
        params.append(f"const {cg.CTYPE[T]}* __restrict__ p{u}")
        args.append(loc[u])
        if st == full:
            pre += _vload(f"xi{u}", f"p{u}", T, VEC, "rb + (long long)q * " + str(VEC))
            per.append(f"const float x{u} = xi{u}[e];")
        elif st == rowvec:
            pre += _vload(f"xi{u}", f"p{u}", T, VEC, "(long long)q * " + str(VEC))
            per.append(f"const float x{u} = xi{u}[e];")
        else:
            coords = True
            per.append(f"const float x{u} = hdn_to_float(p{u}[{cg.offset_expr(st)}]);")
    cl = []
    if coords:
        lead, trail = list(range(a0)), list(range(a0, len(xd)))
        cl += cg.coord_code([xd[d] if d < a0 else 1 for d in range(len(xd))], lead, "row",
                            "long long", prefix="cr")
        cl += cg.coord_code([xd[d] if d >= a0 else 1 for d in range(len(xd))], trail,
                            "(long long)j", "long long", prefix="cj")
        cl += [f"const long long c{d} = {'cr' if d < a0 else 'cj'}{d};" for d in range(len(xd))]
    yt = cg.dtype_name(y.dtype)
    seed = "v[k]" if yt == "FLOAT" else f"hdn_round<{cg.CTYPE[yt]}>(v[k])"
    L = [f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
         f"    const int q = threadIdx.x + c * {NT};",
         f"    if (q < {DQ}) {{"] + ["      " + x for x in pre]
    for u, _, d in outs:
        L.append(f"      float ov{u}[{VEC}];")
    L += [f"#pragma unroll\n      for (int e = 0; e < {VEC}; ++e) {{",
          f"        const int k = c * {VEC} + e; const int j = q * {VEC} + e; (void)j;",
          *["        " + x for x in cl],
          f"        const float v_ = {seed};"]
    L += ["        " + x for x in per]
    L += ["        " + x for x in _seed(stmts)]
    for u, _, d in outs:
        L.append(f"        ov{u}[e] = v{u};")
    L.append("      }")
    for u, _, d in outs:
        params.append(f"{cg.CTYPE[d]}* __restrict__ o{u}")
        args.append(loc[u])
        L += ["      " + x for x in _vstore(f"ov{u}", f"o{u}", d, VEC, "rb + (long long)q * " + str(VEC))]
    L += ["    }", "  }"]
    return L


def _seed(stmts):
    """The run's statements with the seed variable ``v`` renamed ``v_`` (whole identifier)."""
    import re
    return [re.sub(r"(?<![A-Za-z0-9_])v(?![A-Za-z0-9_])", "v_", x) for x in stmts]


def _emit_fwd(prog, node, r, loc, tag, g, epi=None):
    ln = node.kind == "LayernormAttributes"
    M, D = g["M"], g["D"]
    x, y = r["x"], r["y"]
    Tx, Ty = cg.CTYPE[cg.dtype_name(x.dtype)], cg.CTYPE[cg.dtype_name(y.dtype)]
    # the row's vectors: x loaded, y stored (a fused run's inputs and outputs take any vector
    # width through _vload / _vstore)
    VEC = _vec(D, [cg.dtype_name(x.dtype)] + ([] if epi else [cg.dtype_name(y.dtype)]))
    DQ = D // VEC
    NT = _threads(DQ, per_thread=4)
    NCH = -(-DQ // NT)
    if NCH > 64:
        raise ValueError(f"normalised extent {D} too large for the GPU row kernel")
    tail = g["xd"][g["axes"][0]:]
    params = [f"const {Tx}* __restrict__ px"] + ([] if epi else [f"{Ty}* __restrict__ py"])
    args = [loc[x.uid]] + ([] if epi else [loc[y.uid]])
    sc = r["scale"]
    params.append(f"const {cg.CTYPE[cg.dtype_name(sc.dtype)]}* __restrict__ psc")
    args.append(loc[sc.uid])
    has_b = "bias" in r
    if has_b:
        params.append(f"const {cg.CTYPE[cg.dtype_name(r['bias'].dtype)]}* __restrict__ pbi")
        args.append(loc[r["bias"].uid])
    st_roles = [q for q in (("mean", "inv_variance") if ln else ("inv_rms",)) if q in r]
    for q in st_roles:
        params.append(f"{cg.CTYPE[cg.dtype_name(r[q].dtype)]}* __restrict__ p_{q}")
        args.append(loc[r[q].uid])
    eps = _eps_code(r, args, params, loc)
    name = f"hdn_{'ln' if ln else 'rms'}_fwd_{tag}"
    L = [HEAD, f'extern "C" __global__ void __launch_bounds__({NT}) {name}({", ".join(params)}) {{',
         f"  __shared__ float sh[{3 * max(1, NT // 32)}];",
         "  const long long row = blockIdx.x;",
         f"  const long long rb = row * {D}LL;"]
    L += _loads("v", "px", Tx, VEC, NCH, NT, DQ, "rb")
    if ln:
        # one pass: each thread's (count, mean, M2) exactly in registers, merged over the block
        # (Chan) - one block reduction instead of two, no cancellation
        L += ["  float cn = 0.f, cm = 0.f, cq = 0.f;",
              "  { float s = 0.f;"] + ["  " + q for q in _each(["s += v[k]; cn += 1.f;"], VEC, NCH, NT, DQ)]
        L += ["    cm = cn > 0.f ? s / cn : 0.f; }"]
        L += _each(["const float d = v[k] - cm; cq = fmaf(d, d, cq);"], VEC, NCH, NT, DQ)
        L += [f"  hdn_block_welford<{NT}>(cn, cm, cq, sh);", "  const float mu = cm;",
              f"  const float iv = 1.0f / sqrtf(cq / {float(D)!r}f + {eps});"]
    else:
        L += ["  const float mu = 0.f;", "  float b[1] = {0.f};"]
        L += _each(["b[0] = fmaf(v[k], v[k], b[0]);"], VEC, NCH, NT, DQ)
        L += [f"  hdn_block_sum<{NT}, 1>(b, sh);",
              f"  const float iv = 1.0f / sqrtf(b[0] / {float(D)!r}f + {eps});"]
    vs = _param_vec("psc", sc, D, VEC, "s_")
    vb = _param_vec("pbi", r["bias"], D, VEC, "b_") if has_b else None
    if vs is not None and (vb is not None or not has_b):
        # packed parameters: 16-byte loads per chunk (float parameters: two float4 per 8 elements)
        L += [f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
              f"    const int q = threadIdx.x + c * {NT};",
              f"    if (q < {DQ}) {{"] + ["      " + x for x in vs + (vb or [])]
        L += [f"#pragma unroll\n      for (int e = 0; e < {VEC}; ++e) v[c * {VEC} + e] = "
              f"fmaf((v[c * {VEC} + e] - mu) * iv, s_[e], {'b_[e]' if has_b else '0.f'});",
              "    }", "  }"]
    else:
        sl = _param_load("psc", sc, D, g["pshape"], tail)
        bl = _param_load("pbi", r["bias"], D, g["pshape"], tail) if has_b else "0.f"
        L += _each([f"v[k] = fmaf((v[k] - mu) * iv, {sl}, {bl});"], VEC, NCH, NT, DQ)
    if epi is None:
        L += _store("v", "py", Ty, VEC, NCH, NT, DQ, "rb")
    else:
        L += _epilogue(epi, g, y, VEC, NCH, NT, DQ, loc, params, args)
    if st_roles:
        L.append("  if (threadIdx.x == 0) {")
        for q in st_roles:
            T = cg.CTYPE[cg.dtype_name(r[q].dtype)]
            off = _lin_offset("row", [d for j, d in enumerate(g["xd"]) if j not in g["axes"]],
                              [s for j, s in enumerate(_full_st(r[q], len(g["xd"]))) if j not in g["axes"]])
            val = "mu" if q == "mean" else "iv"
            L.append(f"    p_{q}[{off}] = hdn_from_float<{T}>({val});")
        L.append("  }")
    L.append("}")
    # the parameter list is final only now (the fused run adds its inputs and outputs)
    L[1] = f'extern "C" __global__ void __launch_bounds__({NT}) {name}({", ".join(params)}) {{'
    if epi is not None:
        L[0] = HEAD + cg.PRELUDE_MATH + "\n"      # the pointwise expressions' helpers
    prog.steps.append(("launch", "\n".join(L) + "\n", name, (M, 1, 1), (NT, 1, 1), args))


def _full_st(t, n):
    st = _st(t)
    d = _dims(t)
    st = [0] * (n - len(st)) + st
    d = [1] * (n - len(d)) + d
    return [0 if dd == 1 else s for dd, s in zip(d, st)]


def _emit_bwd(prog, node, r, loc, tag, sms, g, arch=None):
    ln = node.kind.startswith("Layernorm")
    M, D = g["M"], g["D"]
    x, dy, dx = r["x"], r["dy"], r["dx"]
    tn = {q: cg.dtype_name(r[q].dtype) for q in ("x", "dy", "dx")}
    Tx, Tdy, Tdx = (cg.CTYPE[tn[q]] for q in ("x", "dy", "dx"))
    VEC = _vec(D, list(tn.values()))
    DQ = D // VEC
    NT = _threads(DQ)
    if NT == 1024 and (arch or "").startswith("gfx") and -(-DQ // 512) <= 16:
        # AMD: 16 waves of 64 lanes leave 128 VGPRs a lane (the row arrays of two 16-byte
        # vectors a thread spill on gfx90a); 512 threads with three vectors a thread fit
        NT = 512
    NCH = -(-DQ // NT)
    if NCH > 32:
        raise ValueError(f"normalised extent {D} too large for the GPU row kernel")
    NB = max(1, min(M, 4 * sms))
    sc = r["scale"]
    has_db = "dbias" in r
    part = prog.ws_alloc(4 * NB * D * (2 if has_db else 1))
    params = [f"const {Tdy}* __restrict__ pdy", f"const {Tx}* __restrict__ px",
              f"const {cg.CTYPE[cg.dtype_name(sc.dtype)]}* __restrict__ psc"]
    args = [loc[dy.uid], loc[x.uid], loc[sc.uid]]
    stats = ("mean", "inv_variance") if ln else ("inv_rms",)
    rowd = [d for j, d in enumerate(g["xd"]) if j not in g["axes"]]
    soff = {}
    for q in stats:
        params.append(f"const {cg.CTYPE[cg.dtype_name(r[q].dtype)]}* __restrict__ p_{q}")
        args.append(loc[r[q].uid])
        soff[q] = _lin_offset("row", rowd, [s for j, s in enumerate(_full_st(r[q], len(g["xd"])))
                                             if j not in g["axes"]])
    params += [f"{Tdx}* __restrict__ pdx", "float* __restrict__ part"]
    args += [loc[dx.uid], ("ws", part)]
    name = f"hdn_{'ln' if ln else 'rms'}_bwd_{tag}"
    L = [HEAD, f'extern "C" __global__ void __launch_bounds__({NT}) {name}({", ".join(params)}) {{',
         f"  __shared__ float sh[{2 * max(1, NT // 32)}];"]
    L += [f"  float s[{NCH * VEC}], ps[{NCH * VEC}], pb[{NCH * VEC}];"]
    L += _each(["s[k] = hdn_to_float(psc[j]); ps[k] = 0.f; pb[k] = 0.f;"], VEC, NCH, NT, DQ)
    # the next row's x / dy loads are issued before this row's arithmetic and block reduction
    # (raw 16-byte vectors in registers): a load latency hidden per row.  Not with 1024-thread
    # blocks (64 registers a thread: the extra registers would spill)
    fast = knob("NORM_BWD_FAST", "1") not in ("0", "off")
    ahead = fast and NT < 1024
    if ahead:
        L += _raw_decl("rx", Tx, VEC, NCH) + _raw_decl("rg", Tdy, VEC, NCH)
        L += [f"  if (blockIdx.x < {M}LL) {{"] + _raw_load("rx", "px", VEC, NCH, NT, DQ, f"(long long)blockIdx.x * {D}LL") \
            + _raw_load("rg", "pdy", VEC, NCH, NT, DQ, f"(long long)blockIdx.x * {D}LL") + ["  }"]
    L += [f"  for (long long row = blockIdx.x; row < {M}LL; row += {NB}LL) {{",
          f"  const long long rb = row * {D}LL;"]
    if ahead:
        L += _raw_unpack("xv", "rx", Tx, VEC, NCH, NT, DQ) + _raw_unpack("g", "rg", Tdy, VEC, NCH, NT, DQ)
        L += [f"  if (row + {NB}LL < {M}LL) {{"] + _raw_load("rx", "px", VEC, NCH, NT, DQ, f"rb + {NB * D}LL") \
            + _raw_load("rg", "pdy", VEC, NCH, NT, DQ, f"rb + {NB * D}LL") + ["  }"]
    else:
        L += _loads("xv", "px", Tx, VEC, NCH, NT, DQ, "rb")
        L += _loads("g", "pdy", Tdy, VEC, NCH, NT, DQ, "rb")
    if ln:
        L += [f"  const float mu = hdn_to_float(p_mean[{soff['mean']}]);",
              f"  const float iv = hdn_to_float(p_inv_variance[{soff['inv_variance']}]);"]
    else:
        L += ["  const float mu = 0.f;", f"  const float iv = hdn_to_float(p_inv_rms[{soff['inv_rms']}]);"]
    L += ["  float a[2] = {0.f, 0.f};"]
    L += _each(["const float xh = (xv[k] - mu) * iv; const float dyv = g[k];",
                "ps[k] = fmaf(dyv, xh, ps[k]); pb[k] += dyv;",
                "g[k] = dyv * s[k]; a[0] += g[k]; a[1] = fmaf(g[k], xh, a[1]); xv[k] = xh;"],
               VEC, NCH, NT, DQ)
    L += [f"  hdn_block_sum<{NT}, 2>(a, sh);",
          f"  const float mg = {'a[0]' if ln else '0.f'} / {float(D)!r}f, mgx = a[1] / {float(D)!r}f;"]
    L += _each(["g[k] = iv * (g[k] - mg - xv[k] * mgx);"], VEC, NCH, NT, DQ)
    L += _store("g", "pdx", Tdx, VEC, NCH, NT, DQ, "rb")
    L.append("  }")
    L += _each([f"part[(long long)blockIdx.x * {D} + j] = ps[k];"] +
               ([f"part[(long long)({NB} + blockIdx.x) * {D} + j] = pb[k];"] if has_db else []),
               VEC, NCH, NT, DQ)
    L.append("}")
    prog.steps.append(("launch", "\n".join(L) + "\n", name, (NB, 1, 1), (NT, 1, 1), args))
    # column sums of the partials -> dscale (and dbias)
    _colsum(prog, r, loc, part, NB, D, [("dscale", 0)] + ([("dbias", NB)] if has_db else []), tag, fast)


def _colsum(prog, r, loc, part, NB, D, outs, tag, fast):
    """dscale / dbias: the column sums of the NB partial rows (``outs``: (role, first partial
    row)) in a fixed order."""
    fparams = ["const float* __restrict__ part"]
    fargs = [("ws", part)]
    for q, _ in outs:
        fparams.append(f"{cg.CTYPE[cg.dtype_name(r[q].dtype)]}* __restrict__ p_{q}")
        fargs.append(loc[r[q].uid])
    # 32 columns x 8 lanes a block: lane l sums partial rows l, l + 8, ..., the lanes are added
    # by hdn_block_colsum (fixed order: deterministic); 8 loads in flight per lane
    fname = f"hdn_norm_colsum_{tag}"
    n = len(outs)
    if not fast:        # one thread per column (HIPDNN_CABI_HIP_NORM_BWD_FAST=1: the block sums)
        F = [HEAD, f'extern "C" __global__ void __launch_bounds__(256) {fname}({", ".join(fparams)}) {{',
             "  const long long j = (long long)blockIdx.x * 256 + threadIdx.x;",
             f"  if (j >= {D}) return;"]
        for q, base in outs:
            T = cg.CTYPE[cg.dtype_name(r[q].dtype)]
            F += ["  { float s = 0.f;",
                  f"    for (int b = 0; b < {NB}; ++b) s += part[(long long)({base} + b) * {D} + j];",
                  f"    p_{q}[j] = hdn_from_float<{T}>(s); }}"]
        F.append("}")
        prog.steps.append(("launch", "\n".join(F) + "\n", fname, (-(-D // 256), 1, 1), (256, 1, 1), fargs))
        return
    F = [HEAD, f'extern "C" __global__ void __launch_bounds__(256) {fname}({", ".join(fparams)}) {{',
         f"  __shared__ float sh[{n * 256}];",
         "  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;",
         "  const long long j = (long long)blockIdx.x * 32 + tx;",
         f"  float a[{n}];",
         f"  for (int k = 0; k < {n}; ++k) a[k] = 0.f;",
         f"  if (j < {D}) {{",
         "#pragma unroll 8",
         f"    for (int b = ty; b < {NB}; b += 8) {{"]
    F += [f"      a[{k}] += part[(long long)({base} + b) * {D} + j];" for k, (_, base) in enumerate(outs)]
    F += ["    }", "  }", f"  hdn_block_colsum<256, 32, {n}>(a, sh);", f"  if (ty != 0 || j >= {D}) return;"]
    for k, (q, _) in enumerate(outs):
        T = cg.CTYPE[cg.dtype_name(r[q].dtype)]
        F.append(f"  p_{q}[j] = hdn_from_float<{T}>(sh[hdn_colsum_at<256, 32>({k}, tx)]);")
    F.append("}")
    prog.steps.append(("launch", "\n".join(F) + "\n", fname, (-(-D // 32), 1, 1), (256, 1, 1), fargs))


def _emit_wide(prog, node, r, loc, tag, g):
    """DOUBLE tensors: one thread per row (forward, backward dx) and one per column (dscale,
    dbias), all in double with the CPU reference's formulas - two passes over the row (mean,
    then the centred variance), no row-length limit; slow, exact in what it computes."""
    ln = node.kind.startswith("Layernorm")
    bwd = "Backward" in node.kind
    M, D = g["M"], g["D"]
    tail = g["xd"][g["axes"][0]:]
    rowd = [d for j, d in enumerate(g["xd"]) if j not in g["axes"]]

    def ct(q):
        return cg.CTYPE[cg.dtype_name(r[q].dtype)]

    def soff(q, var="row"):
        return _lin_offset(var, rowd, [s for j, s in enumerate(_full_st(r[q], len(g["xd"])))
                                       if j not in g["axes"]])

    def pload(q):
        return _param_load(f"p_{q}", r[q], D, g["pshape"], tail).replace("hdn_to_float", "hdn_to_double")
    params, args = [], []
    for q in (("dy",) if bwd else ()) + ("x", "scale") + (("bias",) if "bias" in r and not bwd else ()):
        params.append(f"const {ct(q)}* __restrict__ p_{q}")
        args.append(loc[r[q].uid])
    stats = [q for q in (("mean", "inv_variance") if ln else ("inv_rms",)) if q in r]
    for q in stats:
        params.append(f"{'const ' if bwd else ''}{ct(q)}* __restrict__ p_{q}")
        args.append(loc[r[q].uid])
    kname = f"hdn_{'ln' if ln else 'rms'}_{'bwd' if bwd else 'fwd'}_f64_{tag}"
    head = '#define HDN_GENERATED 1\n#include "hdn_compat.h"\n'      # no block reductions
    L = [head]
    if not bwd:
        params.append(f"{ct('y')}* __restrict__ p_y")
        args.append(loc[r["y"].uid])
        eps = _eps_code(r, args, params, loc, wide=True)
        ev = r.get("epsilon")
        if ev is not None and ev.value is not None:
            eps = cg.dlit(float(ev.value[0] if isinstance(ev.value, (list, tuple)) else ev.value))
        eps = f"(double){eps.replace('hdn_to_float', 'hdn_to_double')}"
        body = [f"double mu = 0.0, q = 0.0;"]
        if ln:
            body += [f"for (int j = 0; j < {D}; ++j) mu += hdn_to_double(p_x[rb + j]);",
                     f"mu /= {float(D)!r};",
                     f"for (int j = 0; j < {D}; ++j) {{ const double d = hdn_to_double(p_x[rb + j]) - mu; q += d * d; }}"]
        else:
            body += [f"for (int j = 0; j < {D}; ++j) {{ const double v = hdn_to_double(p_x[rb + j]); q += v * v; }}"]
        body += [f"const double iv = 1.0 / sqrt(q / {float(D)!r} + {eps});",
                 f"for (int j = 0; j < {D}; ++j) {{",
                 f"  const double yv = (hdn_to_double(p_x[rb + j]) - mu) * iv * {pload('scale')}"
                 + (f" + {pload('bias')};" if "bias" in r else ";"),
                 f"  p_y[rb + j] = hdn_from_double<{ct('y')}>(yv);", "}"]
        for q in stats:
            body.append(f"p_{q}[{soff(q)}] = hdn_from_double<{ct(q)}>({'mu' if q == 'mean' else 'iv'});")
    else:
        params.append(f"{ct('dx')}* __restrict__ p_dx")
        args.append(loc[r["dx"].uid])
        mu = f"hdn_to_double(p_mean[{soff('mean')}])" if ln else "0.0"
        iv = f"hdn_to_double(p_{'inv_variance' if ln else 'inv_rms'}[{soff('inv_variance' if ln else 'inv_rms')}])"
        body = [f"const double mu = {mu}, iv = {iv};", "double a0 = 0.0, a1 = 0.0;",
                f"for (int j = 0; j < {D}; ++j) {{",
                f"  const double xh = (hdn_to_double(p_x[rb + j]) - mu) * iv;",
                f"  const double gv = hdn_to_double(p_dy[rb + j]) * {pload('scale')};",
                "  a0 += gv; a1 += gv * xh;", "}",
                f"const double mg = {'a0' if ln else '0.0'} / {float(D)!r}, mgx = a1 / {float(D)!r};",
                f"for (int j = 0; j < {D}; ++j) {{",
                f"  const double xh = (hdn_to_double(p_x[rb + j]) - mu) * iv;",
                f"  const double gv = hdn_to_double(p_dy[rb + j]) * {pload('scale')};",
                f"  p_dx[rb + j] = hdn_from_double<{ct('dx')}>(iv * (gv - mg - xh * mgx));", "}"]
    L.append(f'extern "C" __global__ void __launch_bounds__(128) {kname}({", ".join(params)}) {{')
    L += ["  const long long row = (long long)blockIdx.x * 128 + threadIdx.x;",
          f"  if (row >= {M}LL) return;", f"  const long long rb = row * {D}LL;"]
    # row loops stay rolled: unrolled over a compile-time D they exhaust AMD's scalar registers
    body = [ln_ for b in body for ln_ in ((["#pragma unroll 1"] if b.startswith("for (") else []) + [b])]
    L += ["  " + b for b in body] + ["}"]
    prog.steps.append(("launch", "\n".join(L) + "\n", kname, (-(-M // 128), 1, 1), (128, 1, 1), args))
    if not bwd:
        return
    # dscale[j] = sum over rows of dy * xhat, dbias[j] = sum of dy (one thread per column)
    outs = [q for q in ("dscale", "dbias") if q in r]
    fparams = [f"const {ct(q)}* __restrict__ p_{q}" for q in ("dy", "x") + tuple(stats)]
    fargs = [loc[r[q].uid] for q in ("dy", "x") + tuple(stats)]
    fparams += [f"{ct(q)}* __restrict__ p_{q}" for q in outs]
    fargs += [loc[r[q].uid] for q in outs]
    fname = f"hdn_norm_colsum_f64_{tag}"
    mu = f"hdn_to_double(p_mean[{soff('mean')}])" if ln else "0.0"
    F = [head, f'extern "C" __global__ void __launch_bounds__(128) {fname}({", ".join(fparams)}) {{',
         "  const long long j = (long long)blockIdx.x * 128 + threadIdx.x;",
         f"  if (j >= {D}LL) return;", "  double ds = 0.0, db = 0.0;", "#pragma unroll 1",
         f"  for (long long row = 0; row < {M}LL; ++row) {{",
         f"    const double dyv = hdn_to_double(p_dy[row * {D}LL + j]);",
         f"    const double xh = (hdn_to_double(p_x[row * {D}LL + j]) - {mu}) * {iv};",
         "    ds += dyv * xh; db += dyv;", "  }"]
    for q in outs:
        F.append(f"  p_{q}[j] = hdn_from_double<{ct(q)}>({'ds' if q == 'dscale' else 'db'});")
    F.append("}")
    prog.steps.append(("launch", "\n".join(F) + "\n", fname, (-(-D // 128), 1, 1), (128, 1, 1), fargs))


# ---------------------------------------------------------------- backward, V2 (opt-in)
V2_MAX_COLS = 8           # columns a thread owns (its dscale / dbias partials live in registers)
# one chunk a thread, every thread of the row busy: x-hat and dy * scale stay in registers between
# the passes; else
# both passes read the staged row (64 registers a thread: no spills either way)
V2_SMEM_SM = 200 * 1024   # shared memory the resident blocks of one SM may take together
V2_FLIGHT = 96 * 1024     # bytes of x / dy in flight per SM the stage count aims at

GROUP_SUM = r"""
// a[0..2) summed over the TPR threads of this thread's row group (TPR a multiple of 32, the
// groups aligned to TPR threads): a warp butterfly (every lane ends with the same bits), then,
// for groups of several warps, one partial per warp in red[par] and the group's warps added in
// ascending order.  One block barrier; the caller alternates par, so the next call needs none
// (a thread writes red[par] again only after the next call's barrier, which every reader of
// this call's red[par] has passed).
template <int TPR, int NW>
__device__ __forceinline__ void hdn_group_sum2(float (&a)[2], float* red, int par) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) a[k] += hdn_shfl_xor(a[k], o);
    }
    if (TPR > 32) {
        const int w = threadIdx.x / 32, w0 = (threadIdx.x / TPR) * (TPR / 32);
        float* rp = red + par * 2 * NW;
        if (threadIdx.x % 32 == 0) { rp[w] = a[0]; rp[NW + w] = a[1]; }
        __syncthreads();
        float s0 = 0.f, s1 = 0.f;
#pragma unroll 4
        for (int j = 0; j < TPR / 32; ++j) { s0 += rp[w0 + j]; s1 += rp[NW + w0 + j]; }
        a[0] = s0; a[1] = s1;
    }
}
"""


def v2_stages():
    """The V2 knob: None (off: the default), 0 (on, the stage count chosen below) or a forced
    stage count 2..8."""
    v = knob("NORM_BWD_V2", "0")
    if v in ("0", "off", ""):
        return None
    if v in ("1", "on"):
        return 0
    s = int(v)
    if not 2 <= s <= 8:
        raise ValueError(f"HIPDNN_CABI_HIP_NORM_BWD_V2={v}: 0, 1 or a stage count 2..8")
    return s


def v2_geometry(M, D, tn, sms, stages=0):
    """The V2 row kernel's shape, or None where it does not apply (the V1 kernel runs).
    ``tn``: the element types of x, dy, dx.  A thread owns NCH chunks of VEC columns (chunk
    q = t + c * TPR of its row group's TPR threads, TPR a multiple of 32; a chunk of x / dy is
    4, 8 or 16 bytes, one cp.async); R row groups a block (NT = R * TPR threads); BPS blocks an
    SM (1024 threads, 64 registers a thread, where NT divides 1024; else at most 768 threads, 80
    registers); NB = min(row blocks, SMs x BPS) persistent blocks; S shared-memory stages of one
    row block's x / dy chunks."""
    es = {q: cg.ELEM_SIZE[t] for q, t in tn.items()}
    VEC = next((v for v in (8, 4, 2, 1) if D % v == 0 and v * es["dx"] <= 16
                and all(4 <= v * es[q] <= 16 for q in ("x", "dy"))), None)
    if VEC is None:
        return None
    DQ = D // VEC
    NCH = -(-DQ // 1024)
    TPR = -(-DQ // (NCH * 32)) * 32      # whole warps, fewest idle threads
    if NCH * VEC > V2_MAX_COLS:
        return None
    R = max(1, 256 // TPR)
    NT = R * TPR
    BPS = max(1, (1024 if 1024 % NT == 0 else 768) // NT)
    BX, BDY = VEC * es["x"], VEC * es["dy"]
    stage = R * TPR * NCH * (BX + BDY)
    NRB = -(-M // R)
    NB = max(1, min(NRB, sms * BPS))
    part_sm = 2 * 4 * R * NCH * VEC * TPR if R > 1 else 0
    if stages:
        S = stages
    else:
        S = max(2, min(8, 1 + -(-V2_FLIGHT // (stage * BPS))))
        while S > 2 and BPS * max(S * stage, part_sm) > V2_SMEM_SM:
            S -= 1
    if BPS * max(S * stage, part_sm) > V2_SMEM_SM:
        return None
    return dict(VEC=VEC, DQ=DQ, TPR=TPR, NCH=NCH, R=R, NT=NT, BPS=BPS, BX=BX, BDY=BDY, stage=stage,
                S=S, NRB=NRB, NB=NB, smem=max(S * stage, part_sm),
                keep=NCH == 1 and DQ == TPR)


def _emit_bwd_v2(prog, node, r, loc, tag, sms, g, stages):
    """The V2 backward (module docstring).  Returns False where it does not apply."""
    ln = node.kind.startswith("Layernorm")
    M, D = g["M"], g["D"]
    x, dy, dx = r["x"], r["dy"], r["dx"]
    tn = {q: cg.dtype_name(r[q].dtype) for q in ("x", "dy", "dx")}
    G = v2_geometry(M, D, tn, sms, stages)
    if G is None:
        return False
    Tx, Tdy, Tdx = (cg.CTYPE[tn[q]] for q in ("x", "dy", "dx"))
    VEC, DQ, TPR, NCH, R, NT, BPS = (G[k] for k in ("VEC", "DQ", "TPR", "NCH", "R", "NT", "BPS"))
    BX, BDY, STG, S, NRB, NB, keep = (G[k] for k in ("BX", "BDY", "stage", "S", "NRB", "NB", "keep"))
    C, NW, XB = NCH * VEC, NT // 32, R * TPR * NCH * BX
    sc = r["scale"]
    has_db = "dbias" in r
    part = prog.ws_alloc(4 * NB * D * (2 if has_db else 1))
    params = [f"const {Tdy}* __restrict__ pdy", f"const {Tx}* __restrict__ px",
              f"const {cg.CTYPE[cg.dtype_name(sc.dtype)]}* __restrict__ psc"]
    args = [loc[dy.uid], loc[x.uid], loc[sc.uid]]
    stats = ("mean", "inv_variance") if ln else ("inv_rms",)
    rowd = [d for j, d in enumerate(g["xd"]) if j not in g["axes"]]
    for q in stats:
        params.append(f"const {cg.CTYPE[cg.dtype_name(r[q].dtype)]}* __restrict__ p_{q}")
        args.append(loc[r[q].uid])
    params += [f"{Tdx}* __restrict__ pdx", "float* __restrict__ part"]
    args += [loc[dx.uid], ("ws", part)]

    def soff(q, var):
        return _lin_offset(var, rowd, [s for j, s in enumerate(_full_st(r[q], len(g["xd"])))
                                       if j not in g["axes"]])

    def stat_load(n, rbi):
        """m<n> / v<n>: the statistics of this thread's row of row block ``rbi`` (0 past M)."""
        L = [f"  {{ const long long sr = ({rbi}) * {R} + grp;"]
        if ln:
            L.append(f"    m{n} = sr < {M}LL ? hdn_to_float(p_mean[{soff('mean', 'sr')}]) : 0.f;")
        q = "inv_variance" if ln else "inv_rms"
        L.append(f"    v{n} = sr < {M}LL ? hdn_to_float(p_{q}[{soff(q, 'sr')}]) : 0.f; }}")
        return L

    cps = {16: "hdn_cp16", 8: "hdn_cp8", 4: "hdn_cp4"}

    def issue(rbi, st):
        """cp.async of row block ``rbi``'s x / dy chunks (this thread's) into stage ``st``, then
        a commit - also when nothing is copied: the waits count groups."""
        return [f"  {{ const long long rn = ({rbi}) * {R} + grp;",
                f"    if (rn < {M}LL) {{",
                f"      char* sb = smem + ({st}) * {STG};",
                f"#pragma unroll\n      for (int c = 0; c < {NCH}; ++c) {{",
                f"        const int q = t + c * {TPR};",
                f"        if (q < {DQ}) {{",
                f"          const int slot = (c * {R} + grp) * {TPR} + t;",
                f"          {cps[BX]}(sb + slot * {BX}, px + rn * {D}LL + (long long)q * {VEC}, true);",
                f"          {cps[BDY]}(sb + {XB} + slot * {BDY}, pdy + rn * {D}LL + (long long)q * {VEC}, true);",
                "        }", "      }", "    }", "    hdn_cp_commit(); }"]

    def sload(var, T, B, base):
        """float var[VEC]: this thread's chunk (slot) of one staged row."""
        if B == 16:
            return [f"float {var}[{VEC}];",
                    f"hdn_unpack(*reinterpret_cast<const uint4*>({base} + slot * 16), ({T}*)0, {var});"]
        return [f"float {var}[{VEC}];",
                f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) "
                f"{var}[e] = hdn_to_float(reinterpret_cast<const {T}*>({base} + slot * {B})[e]);"]

    def scale_chunk(var):
        vs = _param_vec("psc", sc, D, VEC, var)
        if vs is not None:
            return vs
        return [f"float {var}[{VEC}];",
                f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) {var}[e] = hdn_to_float(psc[q * {VEC} + e]);"]

    def chunk_loop(body, cond="ok && "):
        return [f"#pragma unroll\n  for (int c = 0; c < {NCH}; ++c) {{",
                f"    const int q = t + c * {TPR};",
                f"    if ({cond}q < {DQ}) {{",
                f"      const int slot = (c * {R} + grp) * {TPR} + t; (void)slot;",
                *["      " + b for b in body], "    }", "  }"]

    name = f"hdn_{'ln' if ln else 'rms'}_bwd2_{tag}"
    L = ['#define HDN_GENERATED 1\n#include "hdn_compat.h"\n#include "hdn_mma.h"\n#include "hdn_reduce.h"\n'
         + GROUP_SUM,
         f'extern "C" __global__ void __launch_bounds__({NT}, {BPS}) {name}({", ".join(params)}) {{',
         "  extern __shared__ __align__(16) hdn_u16 hdn_smem[];",
         "  char* smem = reinterpret_cast<char*>(hdn_smem);",
         f"  __shared__ float red[{4 * NW}];",
         f"  const int t = threadIdx.x % {TPR}, grp = threadIdx.x / {TPR};",
         f"  float ps[{C}], pb[{C}];",
         f"#pragma unroll\n  for (int k = 0; k < {C}; ++k) {{ ps[k] = 0.f; pb[k] = 0.f; }}"]
    if keep:       # the scale in registers, loaded once
        L += [f"  float s_[{C}];",
              f"#pragma unroll\n  for (int k = 0; k < {C}; ++k) s_[k] = 0.f;"]
        L += chunk_loop(scale_chunk("sv") + [f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) s_[c * {VEC} + e] = sv[e];"],
                        cond="")
    # prologue: row blocks blockIdx.x + s NB into stages s = 0 .. S-2, the first two rows' statistics
    for s in range(S - 1):
        L += issue(f"blockIdx.x + {s * NB}LL", str(s))
    L += ["  float m0 = 0.f, v0 = 0.f, m1 = 0.f, v1 = 0.f; (void)m0; (void)m1;"]
    L += stat_load(0, "(long long)blockIdx.x") + stat_load(1, f"blockIdx.x + {NB}LL")
    L += ["  int rd = 0, par = 0;",
          f"  for (long long rbi = blockIdx.x; rbi < {NRB}LL; rbi += {NB}LL) {{",
          f"  const long long row = rbi * {R} + grp;",
          f"  const bool ok = row < {M}LL;",
          f"  const int wr = rd == 0 ? {S - 1} : rd - 1;"]
    # compiler-level memory barriers (no instruction): the stage's shared-memory reads of the
    # previous row block stay before the copies that overwrite it, this row block's after its wait
    L += ['  asm volatile("" ::: "memory");']
    L += issue(f"rbi + {(S - 1) * NB}LL", "wr")
    L += [f"  hdn_cp_wait<{S - 1}>();", '  asm volatile("" ::: "memory");',
          "  const float mu = m0, iv = v0; (void)mu;",
          "  m0 = m1; v0 = v1;"] + stat_load(1, f"rbi + {2 * NB}LL")
    L += [f"  const char* sx = smem + rd * {STG};",
          f"  const char* sd = sx + {XB};",
          "  float a[2] = {0.f, 0.f};"]
    if keep:
        L += [f"  float xh_[{C}], g_[{C}];"]
    mu_e = "mu" if ln else "0.f"
    p1 = sload("xv", Tx, BX, "sx") + sload("dv", Tdy, BDY, "sd") + ([] if keep else scale_chunk("sv"))
    p1 += [f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) {{",
           f"  const int k = c * {VEC} + e;",
           f"  const float xh = (xv[e] - {mu_e}) * iv, d = dv[e], gg = d * {'s_[k]' if keep else 'sv[e]'};",
           "  ps[k] = fmaf(d, xh, ps[k]); pb[k] += d; a[0] += gg; a[1] = fmaf(gg, xh, a[1]);"]
    p1 += (["  xh_[k] = xh; g_[k] = gg;"] if keep else []) + ["}"]
    L += chunk_loop(p1)
    L += [f"  hdn_group_sum2<{TPR}, {NW}>(a, red, par);",
          f"  const float mg = {'a[0]' if ln else '0.f'} / {float(D)!r}f, mgx = a[1] / {float(D)!r}f;"]
    p2 = [] if keep else sload("xv", Tx, BX, "sx") + sload("dv", Tdy, BDY, "sd") + scale_chunk("sv")
    p2 += [f"float o[{VEC}];", f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) {{"]
    if keep:
        p2 += [f"  const int k = c * {VEC} + e;", "  o[e] = iv * (g_[k] - mg - xh_[k] * mgx);"]
    else:
        p2 += [f"  const float xh = (xv[e] - {mu_e}) * iv, gg = dv[e] * sv[e];",
               "  o[e] = iv * (gg - mg - xh * mgx);"]
    p2 += ["}"]
    dxp = f"pdx + row * {D}LL + (long long)q * {VEC}"
    if VEC * cg.ELEM_SIZE[tn["dx"]] == 16:
        p2 += [f"*reinterpret_cast<uint4*>({dxp}) = hdn_pack<{Tdx}>(o);"]
    else:
        p2 += [f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) ({dxp})[e] = hdn_from_float<{Tdx}>(o[e]);"]
    L += chunk_loop(p2)
    L += [f"  rd = rd + 1 == {S} ? 0 : rd + 1; par ^= 1;", "  }", "  hdn_cp_wait<0>();"]
    if R > 1:      # the row groups' partials summed in ascending group order (shared memory)
        L += ["  __syncthreads();", "  float* pp = reinterpret_cast<float*>(smem);",
              f"#pragma unroll\n  for (int k = 0; k < {C}; ++k) {{",
              f"    pp[(grp * {C} + k) * {TPR} + t] = ps[k];",
              f"    pp[(({R} + grp) * {C} + k) * {TPR} + t] = pb[k];", "  }",
              "  __syncthreads();",
              "  if (grp != 0) return;",
              f"#pragma unroll\n  for (int k = 0; k < {C}; ++k) {{",
              f"    for (int h = 1; h < {R}; ++h) {{ ps[k] += pp[(h * {C} + k) * {TPR} + t];"
              f" pb[k] += pp[(({R} + h) * {C} + k) * {TPR} + t]; }}", "  }"]
    st = [f"part[(long long)blockIdx.x * {D} + q * {VEC} + e] = ps[c * {VEC} + e];"]
    if has_db:
        st.append(f"part[(long long)({NB} + blockIdx.x) * {D} + q * {VEC} + e] = pb[c * {VEC} + e];")
    L += chunk_loop([f"#pragma unroll\nfor (int e = 0; e < {VEC}; ++e) {{"] + ["  " + b for b in st] + ["}"],
                    cond="")
    L.append("}")
    prog.steps.append(("launch", "\n".join(L) + "\n", name, (NB, 1, 1), (NT, 1, 1), args,
                       {"shmem": G["smem"]}))
    outs = [("dscale", 0)] + ([("dbias", NB)] if has_db else [])
    if D % 4:
        _colsum(prog, r, loc, part, NB, D, outs, tag, True)
    else:
        _colsum4(prog, r, loc, part, NB, D, outs, tag)
    return True


def _colsum4(prog, r, loc, part, NB, D, outs, tag):
    """dscale / dbias: the column sums of the NB partial rows (D a multiple of 4; ``outs``:
    (role, first partial row)).  A block is 8 column quads x 32 row lanes; lane l adds partial
    rows l, l + 32, ... with 16-byte loads (all in flight); hdn_block_colsum adds the lanes in a
    fixed order (deterministic)."""
    fparams = ["const float* __restrict__ part"]
    fargs = [("ws", part)]
    for q, _ in outs:
        fparams.append(f"{cg.CTYPE[cg.dtype_name(r[q].dtype)]}* __restrict__ p_{q}")
        fargs.append(loc[r[q].uid])
    n = 4 * len(outs)
    fname = f"hdn_norm_colsum4_{tag}"
    F = [HEAD, f'extern "C" __global__ void __launch_bounds__(256) {fname}({", ".join(fparams)}) {{',
         f"  __shared__ float sh[{n * 256}];",
         "  const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;",
         "  const long long j = ((long long)blockIdx.x * 8 + tx) * 4;",
         f"  float a[{n}];",
         f"#pragma unroll\n  for (int k = 0; k < {n}; ++k) a[k] = 0.f;",
         f"  if (j < {D}) {{",
         "#pragma unroll 8",
         f"    for (int b = ty; b < {NB}; b += 32) {{"]
    for k, (_, base) in enumerate(outs):
        F += [f"      const float4 v{k} = *reinterpret_cast<const float4*>(part + (long long)({base} + b) * {D} + j);",
              f"      a[{4 * k}] += v{k}.x; a[{4 * k + 1}] += v{k}.y; a[{4 * k + 2}] += v{k}.z; a[{4 * k + 3}] += v{k}.w;"]
    F += ["    }", "  }", f"  hdn_block_colsum<256, 8, {n}>(a, sh);", f"  if (ty != 0 || j >= {D}) return;"]
    for k, (q, _) in enumerate(outs):
        T = cg.CTYPE[cg.dtype_name(r[q].dtype)]
        F.append(f"#pragma unroll\n  for (int e = 0; e < 4; ++e) p_{q}[j + e] = "
                 f"hdn_from_float<{T}>(sh[hdn_colsum_at<256, 8>({4 * k} + e, tx)]);")
    F.append("}")
    prog.steps.append(("launch", "\n".join(F) + "\n", fname, (-(-D // 32), 1, 1), (256, 1, 1), fargs))
