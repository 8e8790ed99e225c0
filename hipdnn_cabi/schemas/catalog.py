"""The operation catalog: one record per hipDNN graph operation, which every layer derives from.

The data is generated (``hipdnn_cabi/_generated/catalog.py``, by ``tools/catalog/gen_catalog.py``
from the pinned schema facts and ``tools/catalog/overlay.toml``); this module wraps it:

* :data:`OPS` — every :class:`Op` in the overlay's order; :func:`by_name` (the frontend's node
  kind, e.g. ``"layernorm"``), :func:`by_table` (the NodeAttributes member an engine sees as
  ``node.kind``, e.g. ``"LayernormAttributes"``), :func:`by_descriptor`, :func:`by_optype`.
* :class:`Op` — descriptor type, operation type, FlatBuffers table and union index, the engine
  family, its tensor :class:`Role` s (inputs / outputs, optional, by-value scalar, type-rule
  class) and non-tensor :class:`Attr` s (attribute, schema field, kind, mandatory, enum).
* :data:`FB_NAMES` — FlatBuffers enum value -> name, per schema enum (map by name, never by
  number: the C and FlatBuffers enums number their members differently).
* :data:`OPTIONAL_FIELDS` — per table, the fields declared ``= null`` (absent = not set);
  :data:`SCALAR_DEFAULTS` — the non-zero schema defaults of plain scalars.
* :class:`NormFwdPhase` — hipdnnNormFwdPhase_t (not in the pinned ABI enums).

Backend descriptors (``backend/descriptors/operations``), the FlatBuffers reader/writer
(``backend/graph_fb``), the frontend's lowering and (de)serialization and both engines' role and
type tables are built from these records; docs/adding-an-operation.md has the checklist.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .._generated import catalog as _data
from .._generated import enums as _E
from ._generated.schema_table import ENUMS as _FB_ENUMS

FAMILIES: tuple = _data.FAMILIES
OPTIONAL_FIELDS: dict = {t: frozenset(v) for t, v in _data.OPTIONAL_FIELDS.items()}
SCALAR_DEFAULTS: dict = dict(_data.SCALAR_DEFAULTS)

# FlatBuffers enum value -> name, per schema enum.
FB_NAMES: dict = {e: {v: n for n, v in members} for e, (_, members) in _FB_ENUMS.items()}

NormFwdPhase = enum.IntEnum("NormFwdPhase", _data.ENUMS["NormFwdPhase"]["values"])
NormFwdPhase.__doc__ = "hipdnnNormFwdPhase_t (hipDNN's public header; not in the pinned ABI enums)."

# Type-rule classes of a role (see tools/catalog/overlay.toml).
DATA, OUT, PARAM, INDEX, ANY = "data", "out", "param", "index", "any"


@dataclass(frozen=True)
class EnumInfo:
    """A schema enum an attribute carries: the C enum class, the attribute type a C caller
    passes, and ``FlatBuffers value = C value + offset``."""
    schema: str
    c_enum: type
    attr_type: int
    offset: int = 0
    also_int64: bool = False


def _enum_info(name):
    e = _data.ENUMS[name]
    cls = NormFwdPhase if e["values"] else getattr(_E, e["c_enum"])
    return EnumInfo(name, cls, int(_E.AttributeType[e["attr_type"]]), e["offset"], e["also_int64"])


ENUM_INFO: dict = {n: _enum_info(n) for n in _data.ENUMS}


@dataclass(frozen=True)
class Role:
    """A tensor role of an operation."""
    name: str          # schema field stem: "x", "inv_variance", "in_0", ...
    field: str         # schema field: "x_tensor_uid" (a vector field: "peer_stats_tensor_uid")
    attr: int          # hipdnnBackendAttributeName_t
    attr_name: str
    io: str            # "in" | "out"
    optional: bool     # may be absent (schema `= null`, or a vector)
    array: bool        # many tensors (a vector of uids)
    type_class: str    # data | out | param | index | any
    scalar: bool       # may be a by-value or runtime pass-by-value scalar

    @property
    def is_output(self) -> bool:
        return self.io == "out"


@dataclass(frozen=True)
class Attr:
    """A non-tensor attribute of an operation (``field == "@compute"``: the Node's
    compute_data_type)."""
    attr: int
    attr_name: str
    field: str
    kind: str          # i64 | i64vec | enum | dtype | float | bool | string | bytes
    mandatory: bool
    key: str           # the frontend's key in a node's attrs
    enum: EnumInfo | None
    stype: str         # schema scalar type ("" for vectors and strings)
    optional: bool     # schema `= null`

    @property
    def is_compute(self) -> bool:
        return self.field == "@compute"

    @property
    def attr_type(self) -> int:
        """The hipdnnBackendAttributeType_t a C caller sets this attribute with."""
        T = _E.AttributeType
        if self.kind == "enum":
            return self.enum.attr_type
        return int({"i64": T.HIPDNN_TYPE_INT64, "i64vec": T.HIPDNN_TYPE_INT64,
                    "dtype": T.HIPDNN_TYPE_DATA_TYPE, "float": T.HIPDNN_TYPE_FLOAT,
                    "bool": T.HIPDNN_TYPE_BOOLEAN, "string": T.HIPDNN_TYPE_CHAR,
                    "bytes": T.HIPDNN_TYPE_CHAR}[self.kind])


@dataclass(frozen=True)
class Op:
    name: str          # the frontend's node kind
    table: str         # NodeAttributes member (engines: node.kind)
    family: str        # engine module family
    union_index: int
    descriptor: int    # hipdnnBackendDescriptorType_t
    descriptor_name: str
    optype: int        # hipdnnOperationType_t
    optype_name: str
    roles: tuple
    attrs: tuple
    frontend: str | None = None     # None: the frontend has a builder; else why not
    engines: dict = field(default_factory=dict)   # engine -> why it is not applicable there
    by_role: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        self.by_role.update({r.name: r for r in self.roles})

    # -- role views (declaration order)
    @property
    def inputs(self) -> tuple:
        return tuple(r.name for r in self.roles if r.io == "in" and not r.array)

    @property
    def outputs(self) -> tuple:
        return tuple(r.name for r in self.roles if r.io == "out" and not r.array)

    @property
    def arrays(self) -> tuple:
        return tuple(r.name for r in self.roles if r.array)

    @property
    def optional(self) -> frozenset:
        return frozenset(r.name for r in self.roles if r.optional)

    @property
    def scalar_roles(self) -> tuple:
        return tuple(r.name for r in self.roles if r.scalar)

    def roles_of(self, type_class: str) -> tuple:
        return tuple(r.name for r in self.roles if r.type_class == type_class)

    @property
    def compute(self) -> Attr | None:
        return next((a for a in self.attrs if a.is_compute), None)

    @property
    def params(self) -> tuple:
        """The non-tensor attributes other than the compute type."""
        return tuple(a for a in self.attrs if not a.is_compute)

    def role(self, name: str) -> Role:
        return self.by_role[name]

    def not_applicable(self, engine: str) -> str | None:
        """Why ``engine`` does not implement this operation (None: it does)."""
        return self.engines.get(engine)


def _make(d) -> Op:
    A = _E.AttributeName
    roles = tuple(Role(n, f, int(A[a]), a, io, opt, arr, tc, sc)
                  for n, f, a, io, opt, arr, tc, sc in d["roles"])
    attrs = tuple(Attr(int(A[a]), a, f, kind, mand, key, ENUM_INFO[en] if en else None, st, opt)
                  for a, f, kind, mand, key, en, st, opt in d["attrs"])
    return Op(d["name"], d["table"], d["family"], d["union_index"],
              int(_E.DescriptorType[d["descriptor"]]), d["descriptor"],
              int(_E.OperationType[d["optype"]]), d["optype"], roles, attrs, d["frontend"],
              dict(d["engines"]))


OPS: tuple = tuple(_make(d) for d in _data.OPS)
_BY_NAME = {o.name: o for o in OPS}
_BY_TABLE = {o.table: o for o in OPS}
_BY_DESCRIPTOR = {o.descriptor: o for o in OPS}
_BY_OPTYPE = {o.optype: o for o in OPS}


def by_name(name: str) -> Op:
    return _BY_NAME[name]


def by_table(table: str) -> Op | None:
    return _BY_TABLE.get(table)


def by_descriptor(dtype: int) -> Op | None:
    return _BY_DESCRIPTOR.get(int(dtype))


def by_optype(optype: int) -> Op | None:
    return _BY_OPTYPE.get(int(optype))


def family_ops(family: str) -> tuple:
    return tuple(o for o in OPS if o.family == family)
