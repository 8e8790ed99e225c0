"""Matmul nodes: one GEMM (gemm.py) over the batch dims (broadcast), any strides; a following
pointwise run fuses into the epilogue when c is virtual and only that run reads it.
"""
from __future__ import annotations

import math

from .. import codegen as cg
from .. import gemm
from ..codegen import GemmSpec
from ..gemm import aligned
from ._base import _need, check_tensors, check_types, dims, dt, kinds, op, strides

KINDS = kinds("matmul")
_OP = op(KINDS[0])
ROLES = _OP.inputs + _OP.outputs


def check(node, graph, r):
    check_tensors(node, r)
    check_types(node, r)
    _need(all(x in r for x in ROLES), "matmul operands missing")
    a, b, c = dims(r["a"]), dims(r["b"]), dims(r["c"])
    _need(len(a) >= 2 and len(b) >= 2 and len(c) >= 2, "matmul rank < 2")
    _need(a[-1] == b[-2] and c[-2] == a[-2] and c[-1] == b[-1], "matmul shapes")


def emit(ctx, node, r, tag, fused=None):
    spec = GemmSpec()
    r, _ = gemm.prepare(ctx, node, r, tag, r["a"])
    gemm.emit(ctx, node, spec, _spec_matmul(spec, r), tag, fused, _c_layout)


def fusable_output(node, r):
    """A following pointwise run may become the GEMM's epilogue."""
    return r["c"].uid


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
    if sAk == 1 and K % 8 == 0 and aligned([sAm] + sa):
        spec.a_mode = 1
    elif sAm == 1 and M % 8 == 0 and aligned([sAk] + sa):
        spec.a_mode = 2
    if sBk == 1 and K % 8 == 0 and aligned([sBn] + sb):
        spec.b_mode = 1
    elif sBn == 1 and N % 8 == 0 and aligned([sBk] + sb):
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

