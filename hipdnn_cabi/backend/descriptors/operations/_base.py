"""Operation descriptors (spec §1.13): the generic, table-driven machinery.

Every operation is a record of the operation catalog (:mod:`hipdnn_cabi.schemas.catalog`,
generated from the schema facts); :meth:`OpSpec.from_catalog` turns one into the backend's
declaration: its descriptor type, its operation type (answered by HIPDNN_ATTR_OPERATION_TYPE_EXT),
the FlatBuffers attributes table it serializes to (the NodeAttributes member of the same name)
and its attributes in declaration order.  An attribute is ``A(name, kind, field, mandatory, ...)``:

* ``name``: the hipdnnBackendAttributeName_t member (without the ``HIPDNN_ATTR_`` prefix);
* ``kind``: ``tensor`` (one finalized TENSOR descriptor), ``tensors`` (n >= 1 of them), ``i64``,
  ``i64vec``, ``enum`` (``enum=`` its :class:`EnumMap`), ``dtype`` (hipdnnDataType_t), ``float``
  (FLOAT or DOUBLE accepted), ``bool``, ``string`` (CHAR), ``bytes`` (CHAR, opaque);
* ``field``: the schema field (``@compute`` = the Node's ``compute_data_type``);
* ``mandatory``: finalize fails with ``"<label> not set"`` (BAD) when unset.

The package ``__init__`` makes one descriptor class per catalog operation.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field as dfield

from ...._generated.enums import AttributeName, AttributeType as T, DataType, DescriptorType as DT
from ...._generated.enums import OperationType as OT
from ....errors import BadParamError, NotInitializedError, NotSupportedError
from ....schemas import catalog
from ....schemas._generated.schema_table import ENUMS, TABLES
from ... import attrs, graph_fb
from ...attrs import attr_name
from .. import cstore as C
from ..base import Descriptor, _store
from ..tensor import TensorDescriptor

_TENSOR_KINDS = (DT.HIPDNN_BACKEND_TENSOR_DESCRIPTOR,)

# ----------------------------------------------------------------------------- enum mappings
# hipdnnDataType_t <-> FlatBuffers DataType (by name; BOOLEAN has no FlatBuffers value: UNSET).
_FB_DT = {n: v for n, v in ENUMS["DataType"][1]}
_DT_C2FB = {}
for _m in DataType:
    _short = _m.name[len("HIPDNN_DATA_"):]
    _short = _short[:-4] if _short.endswith("_EXT") else _short
    _DT_C2FB[int(_m)] = _FB_DT.get(_short, 0)
_DT_FB2C = {fb: c for c, fb in _DT_C2FB.items() if fb}


def dtype_to_fb(c):
    return _DT_C2FB.get(int(c), 0) if c is not None else 0


def dtype_from_fb(fb):
    """None for UNSET / unknown values."""
    return _DT_FB2C.get(fb)


@dataclass(frozen=True)
class EnumMap:
    atype: int
    valid: frozenset       # accepted C values
    offset: int = 0        # FlatBuffers value = C value + offset
    also_int64: bool = False


# schema enum name -> EnumMap (from the catalog's enum facts)
ENUM_MAPS = {n: EnumMap(e.attr_type, frozenset(int(v) for v in e.c_enum._value2member_map_),
                        e.offset, e.also_int64) for n, e in catalog.ENUM_INFO.items()}


# ----------------------------------------------------------------------------- declarations
@dataclass
class A:
    name: str
    kind: str
    field: str
    mandatory: bool = False
    enum: EnumMap | None = None
    # filled in by OpSpec
    attr: int = 0
    label: str = ""
    optional: bool = False    # schema `= null` scalar: absent = unset
    stype: str = ""           # schema scalar / element type


@dataclass
class OpSpec:
    dtype: int
    optype: int
    table: str
    attrs: list
    cls_name: str = ""
    union_index: int = 0
    by_attr: dict = dfield(default_factory=dict)

    @classmethod
    def from_catalog(cls, op) -> "OpSpec":
        """The declaration of a catalog operation: its tensor roles, then its other attributes,
        in the catalog's declaration order."""
        attrs = [A(r.attr_name[len("HIPDNN_ATTR_"):], "tensors" if r.array else "tensor", r.field,
                   not r.optional) for r in op.roles]
        attrs += [A(a.attr_name[len("HIPDNN_ATTR_"):], a.kind, a.field, a.mandatory,
                    ENUM_MAPS[a.enum.schema] if a.enum else None) for a in op.attrs]
        return cls(DT(op.descriptor), OT(op.optype), op.table, attrs, union_index=op.union_index)

    def __post_init__(self):
        fields = {f[1]: f for f in TABLES[self.table]}
        opt = graph_fb.OPTIONAL_SCALARS.get(self.table, set())
        for a in self.attrs:
            a.attr = int(getattr(AttributeName, "HIPDNN_ATTR_" + a.name))
            if a.field != "@compute":
                f = fields[a.field]  # KeyError = a typo in the table: fail at import
                a.stype = graph_fb.scalar_type(f[5]) if f[5] else "string"
                a.optional = a.field in opt
            if a.kind == "tensor" or a.kind == "tensors":
                a.label = a.field.replace("_tensor_uids", "").replace("_tensor_uid", "").upper() + \
                    (" tensors" if a.kind == "tensors" else " tensor")
            elif a.field == "@compute":
                a.label = "compute data type"
            else:
                a.label = a.field
            self.by_attr[a.attr] = a
        self.cls_name = self.table.replace("Attributes", "") + "OperationDescriptor"


_OPNAME = int(AttributeName.HIPDNN_ATTR_OPERATION_NAME_EXT)
_OPTYPE = int(AttributeName.HIPDNN_ATTR_OPERATION_TYPE_EXT)
_F32 = struct.Struct("<f")


def _f32(v: float) -> float:
    """Round to float32 (what the schema stores)."""
    try:
        return _F32.unpack(_F32.pack(v))[0]
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


# ----------------------------------------------------------------------------- the descriptor
class OperationDescriptor(Descriptor):
    """Base of every operation descriptor (the IGraphOperation of the real backend)."""
    DESCRIPTOR_TYPE = None
    SPEC: OpSpec = None
    REFINALIZE_ALLOWED = True

    def __init_subclass__(cls, **kw):
        # An op module's class must agree with its declaration (a mismatch fails at import).
        spec = vars(cls).get("SPEC")
        if spec is not None and (cls.__name__ != spec.cls_name or cls.NAME != spec.cls_name
                                 or cls.DESCRIPTOR_TYPE != spec.dtype):
            raise TypeError(f"{cls.__module__}.{cls.__name__} does not match its SPEC "
                            f"({spec.cls_name}, descriptor type {int(spec.dtype)})")
        super().__init_subclass__(**kw)

    def __init__(self):
        super().__init__()
        self.name = ""
        self.values: dict = {}     # attribute name (int) -> value (tensors: TensorDescriptor / list)

    # ---------------------------------------------------------------- set
    def set_attribute(self, name, atype, count, arr, nbytes):
        if self.finalized:
            raise NotInitializedError(f"{self.NAME}::setAttribute() failed: Already finalized.")
        ctx = f"{self.NAME}::setAttribute({attr_name(name)})"
        if name == _OPNAME:
            self.name = attrs.set_string(ctx, atype, count, arr, nbytes)
            return
        a = self.SPEC.by_attr.get(name)
        if a is None:
            raise NotSupportedError(f"{self.NAME}::setAttribute() failed: {attr_name(name)} "
                                    f"is not supported.")
        v = self.values[name] = _SET[a.kind](a, ctx, atype, count, arr, nbytes)
        cid = self.__dict__.get("_cid")
        if cid is not None and a.kind in _C_KINDS:  # the C record stays the one store
            _c_put(type(self), cid, name, v)

    def _c_load(self, vals):
        """The exported C record (cdef/astore.c) → :attr:`values` (set fields only)."""
        rows = _c_rows(type(self))
        k = len(rows)
        for i, f in enumerate(rows):
            n = vals[i]
            if n < 0:
                continue
            self.values[f.key] = _c_decode(f.kind, vals[k:k + n])
            k += n

    # ---------------------------------------------------------------- finalize
    def _finalize(self):
        for a in self.SPEC.attrs:
            if a.mandatory and self.values.get(a.attr) is None:
                raise BadParamError(f"{self.NAME}::finalize() failed: {a.label} not set")

    # ---------------------------------------------------------------- get
    def get_attribute(self, name, atype, req, count_ptr, arr):
        if not self.finalized:
            raise NotInitializedError(f"{self.NAME}::getAttribute() failed: Not finalized.")
        ctx = f"{self.NAME}::getAttribute({attr_name(name)})"
        if name == _OPTYPE:
            attrs.get_enum(ctx, atype, req, count_ptr, arr, self.SPEC.optype, T.HIPDNN_TYPE_OPERATION_TYPE_EXT)
            return
        if name == _OPNAME:
            attrs.get_string(ctx, atype, req, count_ptr, arr, self.name)
            return
        a = self.SPEC.by_attr.get(name)
        if a is None:
            raise NotSupportedError(f"{self.NAME}::getAttribute() failed: {attr_name(name)} "
                                    f"is not supported.")
        _GET[a.kind](a, ctx, atype, req, count_ptr, arr, self.values.get(name))

    # ---------------------------------------------------------------- graph support
    def tensors(self):
        """The tensor implementation objects this op references, in declaration order."""
        res = []
        for a in self.SPEC.attrs:
            v = self.values.get(a.attr)
            if v is None:
                continue
            if a.kind == "tensor":
                res.append(v)
            elif a.kind == "tensors":
                res.extend(v)
        return res

    def compute_data_type(self):
        for a in self.SPEC.attrs:
            if a.field == "@compute":
                return self.values.get(a.attr)
        return None

    def to_node(self) -> dict:
        """The FlatBuffers Node of this op (graph_fb dict form)."""
        t = {}
        compute = None
        for a in self.SPEC.attrs:
            v = self.values.get(a.attr)
            if a.field == "@compute":
                compute = v
                continue
            if v is None:
                continue
            k = a.kind
            if k == "tensor":
                t[a.field] = v.uid
            elif k == "tensors":
                t[a.field] = [x.uid for x in v]
            elif k == "enum":
                t[a.field] = v + a.enum.offset
            elif k == "dtype":
                t[a.field] = dtype_to_fb(v)
            elif k == "bytes":
                t[a.field] = list(v)
            elif k == "i64vec":
                t[a.field] = list(v)
            else:
                t[a.field] = v
        node = {}
        if self.name:
            node["name"] = self.name
        if compute is not None:
            node["compute_data_type"] = dtype_to_fb(compute)
        node["attributes"] = (self.SPEC.union_index, t)
        return node

    @classmethod
    def from_node(cls, node: dict, tensors_by_uid: dict, where: str):
        """Rebuild a finalized op from a Node dict; ``tensors_by_uid``: uid -> TensorDescriptor."""
        op = cls()
        op.name = node.get("name", "")
        _, t = node["attributes"]
        if t is None:
            t = {}

        def tensor(uid):
            x = tensors_by_uid.get(uid)
            if x is None:
                raise BadParamError(f"{where} references tensor uid {uid}, which the graph does not have")
            return x

        for a in cls.SPEC.attrs:
            if a.field == "@compute":
                v = dtype_from_fb(node.get("compute_data_type", 0))
                if v is not None:
                    op.values[a.attr] = v
                continue
            present = a.field in t
            if not present and (a.optional or a.kind not in ("tensor",) and not a.mandatory):
                continue
            raw = t.get(a.field)
            k = a.kind
            if k == "tensor":
                op.values[a.attr] = tensor(raw if raw is not None else 0)
            elif k == "tensors":
                if raw:
                    op.values[a.attr] = [tensor(u) for u in raw]
            elif k == "enum":
                raw = raw or 0
                c = raw - a.enum.offset
                if c in a.enum.valid:
                    op.values[a.attr] = c
            elif k == "dtype":
                v = dtype_from_fb(raw or 0)
                if v is not None:
                    op.values[a.attr] = v
            elif k == "bytes":
                op.values[a.attr] = bytes(raw or [])
            elif k == "i64vec":
                if raw is not None:
                    op.values[a.attr] = tuple(raw)
            elif k == "string":
                if raw is not None:
                    op.values[a.attr] = raw
            elif k == "bool":
                op.values[a.attr] = bool(raw)
            elif k == "float":
                op.values[a.attr] = float(raw or 0.0)
            else:
                op.values[a.attr] = int(raw or 0)
        op.finalized = True
        return op


# ----------------------------------------------------------------------------- the C store
# Plain attributes of an operation created through the C API live in its C record
# (cdef/astore.c; rows from descriptors/cstore.py) until finalize pulls them into `values`.
_C_KINDS = ("i64", "i64vec", "enum", "dtype", "float", "bool")
_D64 = struct.Struct("<d")
_Q64 = struct.Struct("<q")
_ROWS: dict = {}


def _c_rows(cls):
    rows = _ROWS.get(cls)
    if rows is None:
        rows = _ROWS[cls] = C.fields_of(cls)
    return rows


def _c_decode(kind, v):
    if kind == C.K_OVEC:
        return tuple(v)
    x = v[0]
    if kind == C.K_ODTYPE:
        return DataType(x)
    if kind == C.K_OFLOAT:
        return _D64.unpack(_Q64.pack(x))[0]
    if kind == C.K_OBOOL:
        return bool(x)
    return int(x)


def _c_put(cls, cid, attr, v):
    lib, ffi = _store["lib"], _store["ffi"]
    if lib is None:
        return
    for slot, f in enumerate(_c_rows(cls)):
        if f.key == attr:
            if f.kind == C.K_OVEC:
                vals = list(v)
            elif f.kind == C.K_OFLOAT:
                vals = [_Q64.unpack(_D64.pack(float(v)))[0]]
            else:
                vals = [int(v)]
            lib.hipdnn_cabi_as_write(cid, slot, ffi.new("int64_t[]", vals or [0]), len(vals))
            return


# ----------------------------------------------------------------------------- per-kind set
def _fits(a, ctx, v):
    lo, hi = graph_fb.RANGE.get(a.stype, (-2 ** 63, 2 ** 63 - 1))
    if not lo <= v <= hi:
        raise BadParamError(f"{ctx}: value {v} out of range for the schema field {a.field} ({a.stype})")
    return v


def _set_tensor(a, ctx, atype, count, arr, nbytes):
    return attrs.set_descriptor(ctx, atype, count, arr, nbytes, _TENSOR_KINDS, null_status=BadParamError)


def _set_tensors(a, ctx, atype, count, arr, nbytes):
    ids = attrs.set_pointer_vector(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    if count < 1:
        raise BadParamError(f"{ctx}: elementCount must be positive")
    return [attrs.resolve_descriptor(ctx, i, _TENSOR_KINDS, null_status=BadParamError) for i in ids]


def _set_i64(a, ctx, atype, count, arr, nbytes):
    return _fits(a, ctx, attrs.set_int64(ctx, atype, count, arr, nbytes))


def _set_i64vec(a, ctx, atype, count, arr, nbytes):
    return tuple(_fits(a, ctx, v) for v in attrs.set_int64_vector(ctx, atype, count, arr, nbytes))


def _set_enum(a, ctx, atype, count, arr, nbytes):
    m = a.enum
    if m.also_int64 and atype == T.HIPDNN_TYPE_INT64:
        v = attrs.set_int64(ctx, atype, count, arr, nbytes)
    else:
        if atype == m.atype and arr and count == 1 and nbytes == 0:
            # the C shim does not know the element size of every enum type (NORM_FWD_PHASE):
            # all of them are 4-byte C enums
            nbytes = 4
        v = attrs.set_enum(ctx, atype, count, arr, nbytes, m.atype)
    if v not in m.valid:
        raise BadParamError(f"{ctx}: invalid value {v}")
    return v


def _set_dtype(a, ctx, atype, count, arr, nbytes):
    v = attrs.set_enum(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_DATA_TYPE)
    if v not in DataType._value2member_map_:
        raise BadParamError(f"{ctx}: invalid data type {v}")
    return DataType(v)


def _set_float(a, ctx, atype, count, arr, nbytes):
    if atype == T.HIPDNN_TYPE_DOUBLE:
        return _f32(attrs.set_double(ctx, atype, count, arr, nbytes))
    return attrs.set_float(ctx, atype, count, arr, nbytes)


def _set_bool(a, ctx, atype, count, arr, nbytes):
    return attrs.set_bool(ctx, atype, count, arr, nbytes)


def _set_string(a, ctx, atype, count, arr, nbytes):
    return attrs.set_string(ctx, atype, count, arr, nbytes)


def _set_bytes(a, ctx, atype, count, arr, nbytes):
    return attrs.set_bytes(ctx, atype, count, arr, nbytes)


_SET = {"tensor": _set_tensor, "tensors": _set_tensors, "i64": _set_i64, "i64vec": _set_i64vec,
        "enum": _set_enum, "dtype": _set_dtype, "float": _set_float, "bool": _set_bool,
        "string": _set_string, "bytes": _set_bytes}


# ----------------------------------------------------------------------------- per-kind get
def _get_tensor(a, ctx, atype, req, cnt, arr, v):
    """Tensor slot (spec §1.3 generic tensor-ref helper): size query (NULL array or req 0) -> 1;
    fetch needs req >= 1 and writes one new wrapper; an unset optional slot -> count 0."""
    attrs.get_optional_descriptor(ctx, atype, req, cnt, arr, v)


def _get_tensors(a, ctx, atype, req, cnt, arr, v):
    attrs.get_descriptor_array(ctx, atype, req, cnt, arr, list(v or ()))


def _opt(ctx, atype, want, req, cnt, arr, packed):
    attrs.get_optional(ctx, atype, want, req, cnt, arr, packed)


def _get_i64(a, ctx, atype, req, cnt, arr, v):
    _opt(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr, None if v is None else attrs.pack_i64(v))


def _get_i64vec(a, ctx, atype, req, cnt, arr, v):
    attrs.get_int64_vector(ctx, atype, req, cnt, arr, tuple(v or ()))


def _get_enum(a, ctx, atype, req, cnt, arr, v):
    if a.enum.also_int64 and atype == T.HIPDNN_TYPE_INT64:
        _opt(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr, None if v is None else attrs.pack_i64(v))
    else:
        _opt(ctx, atype, a.enum.atype, req, cnt, arr, None if v is None else attrs.pack_i32(v))


def _get_dtype(a, ctx, atype, req, cnt, arr, v):
    _opt(ctx, atype, T.HIPDNN_TYPE_DATA_TYPE, req, cnt, arr, None if v is None else attrs.pack_i32(int(v)))


def _get_float(a, ctx, atype, req, cnt, arr, v):
    if atype == T.HIPDNN_TYPE_DOUBLE:
        _opt(ctx, atype, T.HIPDNN_TYPE_DOUBLE, req, cnt, arr, None if v is None else attrs.pack_f64(v))
    else:
        _opt(ctx, atype, T.HIPDNN_TYPE_FLOAT, req, cnt, arr, None if v is None else attrs.pack_f32(v))


def _get_bool(a, ctx, atype, req, cnt, arr, v):
    _opt(ctx, atype, T.HIPDNN_TYPE_BOOLEAN, req, cnt, arr, None if v is None else (b"\x01" if v else b"\x00"))


def _get_string(a, ctx, atype, req, cnt, arr, v):
    attrs.get_string(ctx, atype, req, cnt, arr, v or "")


def _get_bytes(a, ctx, atype, req, cnt, arr, v):
    """Opaque CHAR payload: size query -> byte count; fetch copies min(req, n) bytes."""
    if atype != T.HIPDNN_TYPE_CHAR:
        raise BadParamError(f"{ctx}: attributeType mismatch (expected HIPDNN_TYPE_CHAR, "
                            f"got {attrs.type_name(atype)})")
    data = bytes(v or b"")
    if not arr or req == 0:
        attrs._size_query(ctx, cnt, len(data))
        return
    if req < 0:
        raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
    k = min(req, len(data))
    attrs._write(arr, data[:k])
    if cnt:
        cnt[0] = k


_GET = {"tensor": _get_tensor, "tensors": _get_tensors, "i64": _get_i64, "i64vec": _get_i64vec,
        "enum": _get_enum, "dtype": _get_dtype, "float": _get_float, "bool": _get_bool,
        "string": _get_string, "bytes": _get_bytes}


assert isinstance(TensorDescriptor, type)
