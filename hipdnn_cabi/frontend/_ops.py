"""The frontend's view of the operation catalog: per node kind, the descriptor type, the tensor
slots (role -> attribute), the compute-type attribute and the parameters, all derived from
:mod:`hipdnn_cabi.schemas.catalog`.  Role names are the FlatBuffers schema field stems (``x``,
``w``, ``in_0``, ...); a parameter's key in a node's ``attrs`` is the catalog's ``key``."""
from __future__ import annotations

from dataclasses import dataclass

from .._generated.enums import AttributeName as A
from .._generated.enums import DataType
from .._generated.enums import DescriptorType as D
from .._generated.enums import OperationType as O
from ..schemas import catalog
from ..schemas.catalog import NormFwdPhase  # noqa: F401  (re-exported by the frontend)


@dataclass(frozen=True)
class OpSpec:
    kind: str
    dtype: D
    optype: O
    inputs: tuple          # ((role, attr), ...)
    outputs: tuple
    comp: A | None
    arrays: tuple = ()     # ((role, attr), ...) descriptor-array slots (peer stats)
    params: tuple = ()     # catalog.Attr of the non-tensor attributes (compute type excluded)

    def slots(self):
        return self.inputs + self.outputs

    @classmethod
    def of(cls, op: catalog.Op) -> "OpSpec":
        slot = lambda names: tuple((r, A(op.role(r).attr)) for r in names)  # noqa: E731
        comp = op.compute
        return cls(op.name, D(op.descriptor), O(op.optype), slot(op.inputs), slot(op.outputs),
                   A(comp.attr) if comp is not None else None, slot(op.arrays), op.params)


# every catalog operation the frontend builds (catalog `frontend` = None)
SPECS = {op.name: OpSpec.of(op) for op in catalog.OPS if op.frontend is None}
BY_OPTYPE = {int(s.optype): s for s in SPECS.values()}

# cudnn-frontend names an operation's output "<node name>::<output>", <output> being its
# output_names member: the catalog role in upper case, except these (node kind, role) pairs
_CUDNN_OUTPUT = {
    ("batchnorm", "next_running_variance"): "NEXT_RUNNING_VAR",
    ("rmsnorm", "inv_rms"): "INV_VARIANCE",
    ("rmsnorm_backward", "dscale"): "Dscale", ("rmsnorm_backward", "dbias"): "Dbias",
    ("reduction", "out"): "Y",
    ("resample", "index"): "Index",
    ("block_scale_quantize", "scale"): "scale",
    ("sdpa", "o"): "O", ("sdpa", "stats"): "Stats", ("sdpa", "max"): "Max",
    ("sdpa", "sum_exp"): "Sum_exp", ("sdpa", "amax_s"): "Amax_S", ("sdpa", "amax_o"): "Amax_O",
    ("sdpa_backward", "dq"): "dQ", ("sdpa_backward", "dk"): "dK", ("sdpa_backward", "dv"): "dV",
    ("sdpa_backward", "dbias"): "dBias",
    ("moe_grouped_matmul", "output"): "Output", ("moe_grouped_matmul_backward", "dweight"): "DWeight",
}


def output_label(kind: str, role: str) -> str:
    """The name cudnn-frontend gives output ``role`` of a ``kind`` node, after "<node>::"."""
    return _CUDNN_OUTPUT.get((kind, role), role.upper())


def lower_value(p: catalog.Attr, v) -> list | str:
    """A parameter's value as the C setter takes it (``(attribute, type, values)`` lowering)."""
    if p.kind == "i64vec":
        return [int(e) for e in v]
    if p.kind == "bool":
        return [bool(v)]
    if p.kind == "float":
        return [float(v)]
    if p.kind == "string":
        return str(v)
    if p.kind == "bytes":
        return bytes(v)
    return [int(v)]


def read_value(p: catalog.Attr, v):
    """A value read back through the C getter, as the frontend keeps it (enums as their C enum
    class where the value is a member, data types as DataType)."""
    if v is None:
        return None
    if p.kind == "bool":
        return bool(v)
    if p.kind == "float":
        return float(v)
    if p.kind == "enum":
        cls = p.enum.c_enum
        return cls(v) if v in cls._value2member_map_ else int(v)
    if p.kind == "dtype":
        return DataType(v) if v in DataType._value2member_map_ else int(v)
    return int(v)
