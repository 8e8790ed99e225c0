"""Shared machinery of the CPU reference engine's node plan builders (RFC 004).

A builder (one class per operation, in the family modules of this package)

* names its operation in the catalog (``OP = catalog.by_table(...)``); its ``KIND`` and the
  tensor roles the node reads and writes (``INPUTS`` / ``OUTPUTS``: schema field names without
  ``_tensor_uid``), the optional ones and the signature key's roles follow from it
  (:meth:`NodeBuilder.from_catalog`);
* ``signature(node, graph)`` checks the node's structure (ranks, shapes, parameters) and returns
  its :class:`SignatureKey` - or raises :class:`Unsupported` when the node cannot run here;
* ``supported_keys()`` lists every key it handles (registered in the PlanBuilderRegistry);
* ``build(node, graph)`` returns a :class:`NodePlan` whose ``run(env)`` reads its inputs from and
  writes its outputs to ``env`` (uid -> numpy array in *storage* dtype, any strides).

Numerics are those of :mod:`..kernels` (16-bit types compute in float32; statistics accumulate in
float64); results are rounded once to the output tensor's type.
"""
from __future__ import annotations

import itertools

import numpy as np

from hipdnn_cabi.schemas import catalog

from ..kernels import dtypes as kdt
from ..kernels import layout as klayout
from ..signature import (BOOL, FLOATS, STRIDED, SignatureKey, default_compute, dtype_name,
                         kernel_type, layout_class)


class Unsupported(Exception):
    """The node cannot run on this engine (becomes 'not applicable')."""


def _need(cond, why):
    if not cond:
        raise Unsupported(why)


# --------------------------------------------------------------------------- tensor access
def load(env, t):
    """Tensor t from env, decoded to its compute dtype (bf16/half -> float32)."""
    return kdt.decode(env[t.uid], kernel_type(dtype_name(t.dtype)))


class RaggedRef:
    """The binding of a ragged tensor: its base address, storage dtype, offsets tensor and
    multiplier.  Only a builder that knows the per-batch row counts (SDPA) reads it."""
    __slots__ = ("ptr", "dtype", "offsets", "multiplier")

    def __init__(self, ptr, dtype, offsets, multiplier):
        self.ptr, self.dtype = int(ptr), dtype
        self.offsets, self.multiplier = offsets, int(multiplier or 1)


def store(env, t, values):
    """Round values to t's type and write them into t's (strided) storage."""
    dst = env[t.uid]
    v = np.asarray(values)
    if v.shape != dst.shape:
        v = v.reshape(dst.shape) if v.size == dst.size else np.broadcast_to(v, dst.shape)
    klayout.write(dst, kdt.encode(v, kernel_type(dtype_name(t.dtype))))


def _np_compute(name):
    return np.float64 if name == "DOUBLE" else np.float32


class NodePlan:
    """A node ready to run: ``fn(env)`` does the work."""
    __slots__ = ("name", "kind", "inputs", "outputs", "fn")

    def __init__(self, node, inputs, outputs, fn):
        self.name, self.kind = node.name, node.kind
        self.inputs, self.outputs, self.fn = list(inputs), list(outputs), fn

    def run(self, env):
        self.fn(env)


# --------------------------------------------------------------------------- base builder
class NodeBuilder:
    """A builder sets ``OP`` (its catalog operation); the role lists below follow from it."""
    OP: catalog.Op | None = None
    DECLINED: tuple = ()   # optional catalog roles this engine does not implement
    KIND = ""              # the operation's NodeAttributes member (a node's kind)
    INPUTS: tuple = ()     # roles the node reads, in declaration order
    OUTPUTS: tuple = ()    # roles the node writes, in declaration order
    OPTIONAL: frozenset = frozenset()
    KEY_ROLES: tuple = ()  # roles whose data types make up the SignatureKey, in key order
    TYPES: tuple = ()      # data types its tensors may have (default: kdt_names())

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "OP" in cls.__dict__:
            cls.from_catalog(cls.OP)

    @classmethod
    def from_catalog(cls, op):
        """Fill KIND and the role lists from the catalog operation ``op``, less ``DECLINED``.

        Key roles: the ``data`` roles, then the mandatory ``out`` roles; an operation whose
        roles have no type-rule class keys on its mandatory inputs, then its mandatory outputs.
        Family bases extend this with their own role groups."""
        def keep(roles):
            return tuple(r for r in roles if r not in cls.DECLINED)
        cls.KIND = op.table
        cls.DECLINED = tuple(r for r in cls.DECLINED if r in op.by_role)
        cls.INPUTS, cls.OUTPUTS = keep(op.inputs), keep(op.outputs)
        cls.OPTIONAL = op.optional - frozenset(cls.DECLINED)
        key = op.roles_of(catalog.DATA) + tuple(r for r in op.roles_of(catalog.OUT)
                                                if r not in op.optional)
        cls.KEY_ROLES = keep(key) or tuple(r for r in cls.INPUTS + cls.OUTPUTS
                                           if r not in cls.OPTIONAL)

    # -- structure
    @classmethod
    def tensors(cls, node, graph):
        """role -> Tensor for the roles present; raises Unsupported for a missing mandatory one."""
        out = {}
        for role in cls.INPUTS + cls.OUTPUTS:
            uid = node.attrs.get(role + "_tensor_uid")
            if uid is None or uid not in graph.tensors:
                _need(role in cls.OPTIONAL or (uid is not None and uid in graph.tensors),
                      f"{cls.KIND}: {role} tensor missing")
                continue
            out[role] = graph.tensors[uid]
        for r, t in out.items():
            _need(len(t.dims) == len(t.strides) and len(t.dims) > 0,
                  f"{cls.KIND}: {r} tensor has {len(t.dims)} dims and {len(t.strides)} strides")
            _need(all(int(d) >= 0 for d in t.dims), f"{cls.KIND}: negative dim in {r}")
            _need(dtype_name(t.dtype) in (cls.TYPES or kdt_names()),
                  f"{cls.KIND}: {r} type {dtype_name(t.dtype)} unsupported")
        return out

    @classmethod
    def io_uids(cls, node, graph):
        ts = cls.tensors(node, graph)
        return ([ts[r].uid for r in cls.INPUTS if r in ts], [ts[r].uid for r in cls.OUTPUTS if r in ts])

    @classmethod
    def compute_name(cls, node, types):
        c = dtype_name(node.compute_dtype)
        return default_compute(types) if c == BOOL else c   # UNSET (read as BOOLEAN) -> default

    def key(self, node, graph, ts, dtypes):
        outs = [ts[r] for r in self.OUTPUTS if r in ts]
        comp = self.compute_name(node, [t for _, t in dtypes])
        return SignatureKey(self.KIND, tuple(dtypes), comp, layout_class(outs))

    def signature(self, node, graph):
        raise NotImplementedError

    def build(self, node, graph) -> NodePlan:
        raise NotImplementedError

    @classmethod
    def supported_keys(cls):
        raise NotImplementedError


def kdt_names():
    # FP8_E4M3 / FP8_E5M2: the signature keys of matmul, convolution and pointwise take them
    return ("FLOAT", "DOUBLE", "HALF", "BFLOAT16", "INT8", "UINT8", "INT32", "INT64", BOOL,
            "FP8_E4M3", "FP8_E5M2")


def _scalar_ok(t):
    return t.numel == 1 and dtype_name(t.dtype) in FLOATS


def _per_channel_ok(t, C):
    return t.numel == C


def _float_compute(io):
    return ("DOUBLE", "FLOAT") if io == "DOUBLE" else ("FLOAT",)


def _dims(t):
    return tuple(int(d) for d in t.dims)


# FP8 data (stored one code per byte, computed in float32 through kernels/dtypes.py's minifloat
# decode/encode) in matmul, convolution and pointwise nodes, as the GPU engine runs them: inputs
# of one fp8 type, outputs that type or HALF/BFLOAT16/FLOAT.
F8 = ("FP8_E4M3", "FP8_E5M2")


def _f8_outs(t):
    return (t, "HALF", "BFLOAT16", "FLOAT")


def _scalar_value(env, t):
    a = np.asarray(load(env, t), dtype=np.float64).reshape(-1)
    return float(a[0])


class _NormBase(NodeBuilder):
    """Shared key logic: (key roles..., param=<common type of the per-channel/affine tensors>)."""
    PARAMS = ()    # per-channel / affine / statistics roles: one common type
    SCALARS = ()   # 1-element float tensors (epsilon, momentum)

    @classmethod
    def from_catalog(cls, op):
        super().from_catalog(op)
        # x leads the key roles (the activation-typed ones): shapes and channel counts are
        # checked against it
        cls.KEY_ROLES = tuple(sorted(cls.KEY_ROLES, key=lambda r: r != "x"))
        cls.PARAMS = op.roles_of(catalog.PARAM)
        cls.SCALARS = op.scalar_roles

    @classmethod
    def supported_keys(cls):
        # data inputs: the io type t; data outputs: t or FLOAT; parameters: t or FLOAT
        for t in FLOATS:
            choices = [(t,) if r in cls.INPUTS else tuple(sorted({t, "FLOAT"}))
                       for r in cls.KEY_ROLES]
            for data in itertools.product(*choices):
                # "MIXED": each parameter is t or FLOAT (frameworks' 16-bit graphs: FLOAT
                # scale/bias/running stats beside 16-bit saved statistics or gradients)
                for pt in sorted({t, "FLOAT"}) + (["MIXED"] if t != "FLOAT" else []):
                    for c in _float_compute(t):
                        yield SignatureKey(cls.KIND,
                                           tuple(zip(cls.KEY_ROLES, data)) + (("param", pt),),
                                           c, STRIDED)

    def common_key(self, node, graph, ts):
        ptypes = {dtype_name(ts[r].dtype) for r in self.PARAMS if r in ts}
        dtypes = [(r, dtype_name(ts[r].dtype)) for r in self.KEY_ROLES]
        io = dtypes[0][1]
        if len(ptypes) > 1:
            _need(ptypes <= {io, "FLOAT"},
                  f"{self.KIND}: parameter tensors of mixed types {sorted(ptypes)} (each must be "
                  f"the data type {io} or FLOAT)")
            pt = "MIXED"
        else:
            pt = ptypes.pop() if ptypes else io
        for r in self.SCALARS:
            if r in ts:
                _need(_scalar_ok(ts[r]), f"{self.KIND}: {r} must be a 1-element float tensor")
        return self.key(node, graph, ts, dtypes + [("param", pt)])
