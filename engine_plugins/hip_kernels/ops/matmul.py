"""Matmul nodes: one GEMM (gemm.py) over the batch dims (broadcast), any strides; a following
pointwise run fuses into the epilogue when c is virtual and only that run reads it.

INT8 x INT8 -> INT32, FLOAT or INT8 (exact INT32 accumulation; INT8 saturates) runs on the
integer tensor cores: on Hopper the GEMM core's s8 wgmma (K-major operands: M/N-major ones are
copied K-major into the workspace, as fp8; split-K with int32 partials; a fused pointwise run on
the float value of a FLOAT c), elsewhere the INT8 WMMA kernel (gemm.int8_source: m16n16k16 s8,
operands gathered through their strides); NVIDIA only.
"""
from __future__ import annotations

import math

from .. import codegen as cg
from .. import direct, gemm
from ..codegen import GemmSpec
from ..gemm import aligned
from ..gemm_core import choose_core, knob, tma_ok
from ._base import COMPUTE_TYPES, _need, check_tensors, check_types, dims, dt, kinds, op, strides

KINDS = kinds("matmul")
_OP = op(KINDS[0])
ROLES = _OP.inputs + _OP.outputs


INT_OUT = ("INT32", "FLOAT", "INT8")
INT_COMPUTE = ("INT32", "FLOAT", "UNSET")


def is_int8(r):
    return any(dt(r[q]) == "INT8" for q in ("a", "b") if q in r)


def check(node, graph, r):
    check_tensors(node, r)
    if is_int8(r):
        _need(all(x in r for x in ROLES), "matmul operands missing")
        _need(dt(r["a"]) == dt(r["b"]) == "INT8", "INT8 matmul: a and b must both be INT8")
        _need(dt(r["c"]) in INT_OUT, f"INT8 matmul: c is {dt(r['c'])} (INT32, FLOAT or INT8)")
        cd = cg.dtype_name(node.compute_dtype)
        _need(cd in INT_COMPUTE, f"INT8 matmul: compute type {cd} not supported")
        _need(all(r[q].value is None for q in ROLES), "INT8 matmul: by-value operands")
    else:
        # compute type DOUBLE with DOUBLE data only (the CPU reference's keys)
        check_types(node, r, extra=("DOUBLE",),
                    computes=COMPUTE_TYPES + (("DOUBLE",) if is_double(r) else ()))
    _need(all(x in r for x in ROLES), "matmul operands missing")
    a, b, c = dims(r["a"]), dims(r["b"]), dims(r["c"])
    _need(len(a) >= 2 and len(b) >= 2 and len(c) >= 2, "matmul rank < 2")
    _need(a[-1] == b[-2] and c[-2] == a[-2] and c[-1] == b[-1], "matmul shapes")


def is_double(r):
    return any(dt(r[q]) == "DOUBLE" for q in ("a", "b") if q in r)


def emit(ctx, node, r, tag, fused=None):
    if is_int8(r):
        return _emit_int8(ctx, node, r, tag, fused)
    if is_double(r):
        return _emit_double(ctx, node, r, tag)
    spec = GemmSpec()
    r, _ = gemm.prepare(ctx, node, r, tag, r["a"])
    # a batchnorm over c [M, N] (channels = columns) may take its statistics from the epilogue
    stats = r["c"].uid in ctx.stats_wanted and len(dims(r["c"])) == 2
    built = _spec_matmul(spec, r)
    spec.swap_ok = True
    gemm.emit(ctx, node, spec, built, tag, fused, _c_layout, stats)


def fusable_output(node, r):
    """A following pointwise run may become the GEMM's epilogue (INT8: on the float value of a
    FLOAT c - program.py keeps runs that touch integer tensors unfused)."""
    if is_int8(r):
        return r["c"].uid if dt(r["c"]) == "FLOAT" else None
    return None if is_double(r) else r["c"].uid


def stats_output(node, r):
    """The output whose per-channel (column) sums the epilogue can accumulate: c of a 2-D
    16-bit / fp32 matmul."""
    return None if is_int8(r) or is_double(r) or len(dims(r["c"])) != 2 else r["c"].uid


def stats_sure(node, r, arch, use_mma):
    """Whether the epilogue is certain to accumulate c's per-column sums: a 2-D 16-bit matmul
    on the wgmma core."""
    return stats_output(node, r) is not None and dt(r["a"]) in ("HALF", "BFLOAT16") and \
        dt(r["b"]) == dt(r["a"]) and choose_core(dt(r["a"]), dt(r["b"]), arch, use_mma) == "wgmma" \
        and arch is not None and knob("GENSTATS", "0") not in ("0", "off")


def pair_fusable(n1, r1, n2, r2, arch, use_mma):
    """Whether two matmul nodes whose outputs only one pointwise run reads (SwiGLU:
    silu(x W_gate) * (x W_up)) can run as one paired GEMM (gemm.emit_pair): a Hopper target,
    16-bit operands, the same A tensor, B operands of one layout that the tensor copy engine
    loads (K-major or N-major, 16-byte strides), outputs of one shape and type, one batch."""
    if not (arch or "").startswith("sm_9") or not use_mma or \
            knob("PAIR_GEMM", "1") in ("0", "off"):
        return False
    if any(is_int8(r) or is_double(r) for r in (r1, r2)):
        return False
    a, b, c, b2, c2 = r1["a"], r1["b"], r1["c"], r2["b"], r2["c"]
    if a.uid != r2["a"].uid or b.uid == b2.uid or any(t.value is not None for t in (a, b, b2)):
        return False
    if n1.compute_dtype != n2.compute_dtype or dt(a) not in ("HALF", "BFLOAT16") or dt(b) != dt(a):
        return False
    if (dt(b), dims(b), strides(b)) != (dt(b2), dims(b2), strides(b2)) or \
            (dt(c), dims(c)) != (dt(c2), dims(c2)):
        return False
    if choose_core(dt(a), dt(b), arch, use_mma, False) != "wgmma" or math.prod(dims(c)[:-2]) != 1:
        return False
    spec = GemmSpec()
    _spec_matmul(spec, r1)
    if not tma_ok(spec.b_dense, dt(b)):
        return False
    smn, sk = spec.b_dense[0], spec.b_dense[1]
    return (spec.b_mode == 1 and sk == 1) or (spec.b_mode == 2 and smn == 1)


def emit_pair(ctx, node, r, node2, r2, tag, run):
    """The two matmuls of a :func:`pair_fusable` pair and the pointwise run reading both as one
    paired GEMM (gemm.emit_pair)."""
    spec = GemmSpec()
    ok = gemm.emit_pair(ctx, node, spec, _spec_matmul(spec, r), r2["b"], r2["c"].uid, run, tag)
    _need(ok, "paired matmul: B operands not on the tensor copy engine")


def _emit_double(ctx, node, r, tag):
    """DOUBLE a / b: the direct kernel (direct.py; FP64 FMA, no tensor cores)."""
    a, b, c = r["a"], r["b"], r["c"]
    _need(all(t.value is None for t in (a, b, c)), "DOUBLE matmul: by-value operands")
    cd = dims(c)
    M, K, N = dims(a)[-2], dims(a)[-1], dims(b)[-1]
    bdims = cd[:-2]
    sa = cg.bcast_strides(dims(a)[:-2], strides(a)[:-2], bdims) if bdims else []
    sb = cg.bcast_strides(dims(b)[:-2], strides(b)[:-2], bdims) if bdims else []
    _need(sa is not None and sb is not None, "matmul batch dims do not broadcast")
    name = f"hdn_mm_f64_{tag}"
    acc = direct.acc_type(cg.dtype_name(node.compute_dtype), dt(a))
    src, grid, block = direct.matmul_source(name, M, N, K, bdims, sa, sb, strides(a)[-2:],
                                            strides(b)[-2:], strides(c), cg.CTYPE[dt(a)],
                                            cg.CTYPE[dt(b)], cg.CTYPE[dt(c)], acc)
    ctx.prog.steps.append(("launch", src, name, grid, block,
                           [ctx.loc[a.uid], ctx.loc[b.uid], ctx.loc[c.uid]]))


def _emit_int8(ctx, node, r, tag, fused=None):
    _need(not (ctx.arch or "").startswith("gfx"),
          "INT8 matmul: the integer tensor-core kernels (wgmma / WMMA) are NVIDIA only")
    spec = GemmSpec()
    if gemm.int8_core(ctx) == "wgmma":
        r, _ = gemm.prepare(ctx, node, r, tag, r["a"])      # M/N-major operands -> K-major
        gemm.emit(ctx, node, spec, _spec_matmul(spec, r), tag, fused, _c_layout)
        return
    built = _spec_matmul(spec, r)
    _need(spec.batch <= 65535, "INT8 matmul: more than 65535 batches")
    gemm.emit_int8(ctx, spec, built, tag, node, fused)


def _c_layout(spec, domain, st):
    """The TMA-store layout (sm, sb) of c: rows of n, batch dims folded into one stride."""
    sm = st[-2] if domain[-2] > 1 else spec.N
    sb = gemm.linear(domain[:-2], st[:-2]) if len(domain) > 2 else 0
    if sm is None or sb is None or sm <= 0:
        return None
    return sm, (sb if spec.batch > 1 else 0)


def _dense(bdims, bstrides, smn, sk, batch):
    """(smn, sk, sb, batch) when the batch dims fold into one stride sb, else None."""
    live = [(d, s) for d, s in zip(bdims, bstrides) if d > 1]
    for (d0, s0), (d1, s1) in zip(live, live[1:]):
        if s0 != s1 * d1:
            return None
    sb = live[-1][1] if live else 0
    return (smn, sk, sb, batch)


def _spec_matmul(spec, r):
    a, b, c = r["a"], r["b"], r["c"]
    cd = dims(c)
    M, K, N = dims(a)[-2], dims(a)[-1], dims(b)[-1]
    bdims = cd[:-2]
    batch = math.prod(bdims) if bdims else 1
    sa = cg.bcast_strides(dims(a)[:-2], strides(a)[:-2], bdims) if bdims else []
    sb = cg.bcast_strides(dims(b)[:-2], strides(b)[:-2], bdims) if bdims else []
    _need(sa is not None and sb is not None, "matmul batch dims do not broadcast")
    sAm, sAk = strides(a)[-2], strides(a)[-1]
    sBk, sBn = strides(b)[-2], strides(b)[-1]
    spec.M, spec.N, spec.K, spec.batch = M, N, K, batch
    spec.ta, spec.tb = dt(a), dt(b)
    spec.load_a = (cg.batch_offset_code("bo", bdims, sa) +
                   f" return bo + (long long)m * {sAm} + (long long)k * {sAk};")
    spec.load_b = (cg.batch_offset_code("bo", bdims, sb) +
                   f" return bo + (long long)k * {sBk} + (long long)n * {sBn};")
    spec.a_kcontig = abs(sAk) <= abs(sAm)
    spec.b_kcontig = abs(sBk) <= abs(sBn)
    # 16-byte chunks along k need K % 8 == 0 unless the operand is a zero-padded workspace copy
    # (layout.emit_pad: the chunks past K read zeros; past M / N rows that are never stored)
    pa, pb = getattr(a, "zero_pad", False), getattr(b, "zero_pad", False)
    if sAk == 1 and (K % 8 == 0 or pa) and aligned([sAm] + sa):
        spec.a_mode = 1
    elif sAm == 1 and (M % 8 == 0 or pa) and aligned([sAk] + sa):
        spec.a_mode = 2
    if sBk == 1 and (K % 8 == 0 or pb) and aligned([sBn] + sb):
        spec.b_mode = 1
    elif sBn == 1 and (N % 8 == 0 or pb) and aligned([sBk] + sb):
        spec.b_mode = 2
    spec.a_dense = _dense(bdims, sa, sAm, sAk, batch)
    spec.b_dense = _dense(bdims, sb, sBn, sBk, batch)
    coord = []
    rem = "b"
    for d in reversed(range(len(bdims))):
        coord.append(f"const int c{d} = {rem} % {bdims[d]}; const int rc{d} = {rem} / {bdims[d]};")
        rem = f"rc{d}"
    coord.append(f"const int c{len(cd) - 2} = m; const int c{len(cd) - 1} = n;")
    return c, coord, cd, len(cd) - 1, True, [a, b]

