"""The contract of the HIP engine's operation family modules, and the checks they share.

A family module (``ops/<family>.py``, the catalog's family names) has

* ``KINDS`` - the node kinds (NodeAttributes members) it implements: the catalog's operations of
  the family that the catalog does not mark not applicable on this engine (:func:`kinds`);
* ``check(node, graph, r)`` - returns None when its kernels implement the node, else raises
  :class:`NotApplicable` with the reason (``r``: role -> Tensor, the roles the node names);
* ``emit(ctx, node, r, tag, fused=None)`` - appends the node's steps to ``ctx.prog``
  (:class:`EmitContext`); ``fused``: a following pointwise run the scheduler fused into the
  node's kernel (``ops.pointwise.Run``), only where the family offers one (pointwise itself:
  ``emit(ctx, run, tag)`` - it emits runs of nodes, the scheduler groups them);
* optionally ``fusable_output(node, r)`` - the uid of the output a following pointwise run may
  be fused onto (None: none), and ``fused_store_ok(t)`` - whether the fused kernel can store
  the run's output ``t``; ``ELEMENTWISE_FUSION = True`` where the fused run lands in an
  elementwise kernel that can store that output too (it need not be virtual) and read other
  units' outputs (batchnorm).

Tensor roles, the data-type rule classes and the roles that may be by-value scalars come from
the operation catalog (:mod:`hipdnn_cabi.schemas.catalog`).
"""
from __future__ import annotations

import contextlib

from hipdnn_cabi.schemas import catalog

from .. import codegen as cg

ENGINE = "hip_kernels"
FLOATS = ("FLOAT", "HALF", "BFLOAT16", "FP8_E4M3", "FP8_E5M2")
COMPUTE_TYPES = ("FLOAT", "UNSET")
# types of a scalar (by-value, runtime pass-by-value) in a scalar role: the value is read on the
# host and reaches the kernels as a float (baked or a by-value kernel argument)
SCALAR_TYPES = ("FLOAT", "HALF", "BFLOAT16", "DOUBLE")


class NotApplicable(Exception):
    pass


def _need(c, why):
    if not c:
        raise NotApplicable(why)


def kinds(family: str) -> tuple:
    """The node kinds of a catalog family this engine implements."""
    return tuple(o.table for o in catalog.family_ops(family) if not o.not_applicable(ENGINE))


def op(kind):
    return catalog.by_table(kind)


class EmitContext:
    """What an emitter sees: the program being built, the graph, where each tensor lives
    (``loc``: uid -> argument source) and the device options."""

    def __init__(self, prog, graph, loc, sms, use_mma, arch, tf32):
        self.prog, self.graph, self.loc = prog, graph, loc
        self.sms, self.use_mma, self.arch, self.tf32 = sms, use_mma, arch, tf32
        # genstats: GEMM outputs a training batchnorm reads as x (program.py); a GEMM that
        # accumulates their per-channel sums records where in ``stats`` (uid -> location)
        self.stats_wanted = set()
        self.stats = {}


# --------------------------------------------------------------------------- tensors
def roles(node, graph):
    """role -> Tensor for the catalog roles (one tensor each) the node names.  Every uid is a
    valid uid, 0 included (the hipDNN frontend numbers tensors from 0): a required
    ``*_tensor_uid`` field has no "unset" value in the schema, only the optional ones
    (``= null``, read as None) can be absent."""
    o = op(node.kind)
    r = {}
    for role in o.inputs + o.outputs:
        u = node.attrs.get(o.role(role).field)
        if u is None:
            continue
        t = graph.tensors.get(u)
        if t is None:
            raise NotApplicable(f"{node.kind}: tensor uid {u} ({role}) is not in the graph")
        r[role] = t
    return r


def io_uids(node, graph):
    """(input uids, output uids) of the node, in the catalog's role order; then the offsets
    tensors its ragged tensors read."""
    o = op(node.kind)
    r = roles(node, graph)
    ins = [r[x].uid for x in o.inputs if x in r]
    for t in r.values():
        u = getattr(t, "ragged_offset_uid", None)
        if u is not None and u not in ins and u in graph.tensors:
            ins.append(u)
    return ins, [r[x].uid for x in o.outputs if x in r]


def dims(t):
    return [int(d) for d in t.dims]


def strides(t):
    return [int(s) for s in t.strides]


def dt(t):
    return cg.dtype_name(t.dtype)


def span_elems(t):
    return 1 + sum((d - 1) * abs(s) for d, s in zip(dims(t), strides(t)) if d > 0)


def neg_extent(t) -> int:
    """Elements below element 0 that a tensor with negative strides addresses."""
    return -sum((d - 1) * s for d, s in zip(dims(t), strides(t)) if s < 0 and d > 0)


def non_overlapping(t) -> bool:
    """Every element of t has its own address (no zero or overlapping strides)."""
    pairs = sorted((abs(int(st)), int(d)) for d, st in zip(t.dims, t.strides) if int(d) > 1)
    need = 1
    for st, d in pairs:
        if st < need:
            return False
        need = st * d
    return True


# --------------------------------------------------------------------------- shared checks
def check_tensors(node, r, runtime_scalars=(), negative=False):
    """Every tensor: a rank, no negative strides (``negative``: the family's kernels address
    elements by signed offsets from element 0, as the CPU reference), outputs with distinct
    element addresses; a runtime pass-by-value tensor only in ``runtime_scalars`` (roles whose
    kernels take one) and then one float."""
    outs = op(node.kind).outputs
    for role, t in r.items():
        _need(len(t.dims) == len(t.strides) and len(t.dims) > 0, f"{role}: bad rank")
        if t.is_runtime_pass_by_value:
            _need(role in runtime_scalars,
                  f"{role}: runtime pass-by-value tensor in a role that takes no scalar")
            _need(t.numel == 1 and dt(t) in SCALAR_TYPES, f"{role}: runtime scalar must be 1 floating-point value")
        _need(negative or all(s >= 0 for s in strides(t)), "negative strides are not supported")
        if role in outs:
            _need(non_overlapping(t), f"{role}: output elements share addresses (zero or "
                                      f"overlapping strides)")


def no_fp8(r):
    for role, t in r.items():
        _need(dt(t) not in cg.FP8,
              f"{role}: fp8 tensors are supported in matmul, convolution and pointwise nodes only")


def scalar_arg(t, loc, wide):
    """(C type, argument source) of a runtime pass-by-value scalar a kernel takes by value: a
    DOUBLE scalar read by a kernel that computes in double (``wide``) keeps its precision (a
    ``double`` argument, source ``("s", uid, "double")``); any other one is a ``float``
    argument (``("s", uid)``)."""
    if wide and dt(t) == "DOUBLE":
        return "double", tuple(loc[t.uid]) + ("double",)
    return "float", loc[t.uid]


def host_scalar(role, t, node) -> bool:
    """A scalar role holding a value the host reads (by-value or runtime pass-by-value)."""
    return role in op(node.kind).scalar_roles and (t.value is not None or t.is_runtime_pass_by_value)


def check_types(node, r, extra=(), computes=COMPUTE_TYPES):
    """The catalog's data-type rules (the CPU reference engine's): the ``data`` roles share one
    type t; outputs are t or FLOAT (16-bit too for fp8 data); each ``param`` role (statistics,
    scale, bias) is t or FLOAT, independently (mixed precision, as hipDNN's samples build
    batchnorm).  Every tensor FLOAT, HALF, BFLOAT16 or fp8 (a host scalar in a scalar role also
    DOUBLE; ``extra``: further types the family takes); compute type FLOAT or UNSET (16-bit data
    computes in float; ``computes``: the compute types the family takes)."""
    for role, t in r.items():
        ok = FLOATS + tuple(extra) + (("DOUBLE",) if host_scalar(role, t, node) else ())
        _need(dt(t) in ok, f"{role}: type {dt(t)} not supported")
    cd = cg.dtype_name(node.compute_dtype)
    _need(cd in computes, f"compute type {cd} not supported (FLOAT or UNSET)")
    o = op(node.kind)
    present = [q for q in o.roles_of(catalog.DATA) if q in r]
    if not present:
        return
    t = dt(r[present[0]])
    _need(all(dt(r[q]) == t for q in present), f"{node.kind}: inputs {present} of different types")
    # fp8 data (a GPU-only type: the CPU reference has none) may produce 16-bit outputs too
    okout = (t, "FLOAT") + (("HALF", "BFLOAT16") if t in cg.FP8 else ())
    for q in o.roles_of(catalog.OUT):
        if q in r:
            _need(dt(r[q]) in okout, f"{node.kind}: {q} is {dt(r[q])} for {t} data "
                                     f"({' or '.join(okout)})")
    ptypes = {dt(r[q]) for q in o.roles_of(catalog.PARAM) if q in r}
    _need(ptypes <= {t, "FLOAT"}, f"{node.kind}: parameter tensors are {sorted(ptypes)} for {t} "
                                  f"data ({t} or FLOAT)")


def check_storage_types(node, r, extra=()):
    """The extension families' type gate: tensors FLOAT / HALF / BFLOAT16 / fp8 or one of
    ``extra`` (constants pass), compute type FLOAT, UNSET, HALF or BFLOAT16; the family's own
    check then narrows per role."""
    for role, t in r.items():
        _need(t.value is not None or host_scalar(role, t, node) and dt(t) in SCALAR_TYPES
              or dt(t) in FLOATS + tuple(extra), f"{role}: type {dt(t)} not supported")
    cd = cg.dtype_name(node.compute_dtype)
    _need(cd in ("FLOAT", "UNSET", "HALF", "BFLOAT16"), f"compute type {cd} not supported")


@contextlib.contextmanager
def declines(kind):
    """ValueError raised by a family's structure checks or emitters -> NotApplicable."""
    try:
        yield
    except ValueError as e:
        raise NotApplicable(f"{kind}: {e}") from None
