"""The C attribute store's field tables (cdef/astore.c), derived from the descriptor classes.

One source of truth: a TENSOR descriptor's fields are its class's ``FAST_FIELDS``; an operation
descriptor's are the plain attributes of its ``SPEC`` (``_base.py`` OpSpecs: kinds ``i64``,
``i64vec``, ``enum``, ``dtype``, ``float``, ``bool``; tensors, strings and bytes stay in Python).
``tools/gen_astore_tables.py`` writes ``cdef/astore_tables.h`` from :func:`tables` (drift-checked
by ``make check-generated``); the Python side reads the same rows (:func:`fields_of`) to pull a
record's values at finalize.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..._generated.enums import AttributeType as T, DataType
from .. import graph_fb
from . import factory

# C kinds (astore.c): TENSOR fields start at 0 / empty / false; operation fields start unset.
K_I64, K_VEC, K_BOOL = 0, 1, 2
K_OI64, K_OVEC, K_OENUM, K_ODTYPE, K_OFLOAT, K_OBOOL = 3, 4, 5, 6, 7, 8
_OP_KINDS = {"i64": K_OI64, "i64vec": K_OVEC, "enum": K_OENUM, "dtype": K_ODTYPE,
             "float": K_OFLOAT, "bool": K_OBOOL}
_I64_MIN, _I64_MAX = -2 ** 63, 2 ** 63 - 1


@dataclass(frozen=True)
class Field:
    attr: int          # hipdnnBackendAttributeName_t
    atype: int         # the attribute type a Set/Get must use (float: FLOAT; DOUBLE also taken)
    kind: int          # K_*
    key: object        # TENSOR: the Python field name; operations: the attribute (values key)
    alt_int64: int = 0  # enum: INT64 also accepted (EnumMap.also_int64)
    lo: int = _I64_MIN  # i64 / i64vec: the schema field's range
    hi: int = _I64_MAX
    valid: tuple = ()   # enum / dtype: the accepted values


def fields_of(cls) -> list:
    """The store's rows for descriptor class ``cls`` (empty: the class is not stored in C)."""
    ff = vars(cls).get("FAST_FIELDS") or getattr(cls, "FAST_FIELDS", None)
    if ff:
        return [Field(int(n), int(t), int(k), f) for n, (t, k, f) in ff.items()]
    spec = getattr(cls, "SPEC", None)
    if spec is None or getattr(cls, "DESCRIPTOR_TYPE", None) is None:
        return []
    rows = []
    for a in spec.attrs:
        k = _OP_KINDS.get(a.kind)
        if k is None:
            continue
        lo, hi = graph_fb.RANGE.get(a.stype, (_I64_MIN, _I64_MAX)) if a.kind in ("i64", "i64vec") \
            else (_I64_MIN, _I64_MAX)
        lo, hi = max(lo, _I64_MIN), min(hi, _I64_MAX)
        if a.kind == "i64" or a.kind == "i64vec":
            rows.append(Field(a.attr, int(T.HIPDNN_TYPE_INT64), k, a.attr, 0, lo, hi))
        elif a.kind == "enum":
            rows.append(Field(a.attr, int(a.enum.atype), k, a.attr, int(a.enum.also_int64),
                              valid=tuple(sorted(a.enum.valid))))
        elif a.kind == "dtype":
            rows.append(Field(a.attr, int(T.HIPDNN_TYPE_DATA_TYPE), k, a.attr,
                              valid=tuple(sorted(int(v) for v in DataType._value2member_map_))))
        elif a.kind == "float":
            rows.append(Field(a.attr, int(T.HIPDNN_TYPE_FLOAT), k, a.attr))
        else:
            rows.append(Field(a.attr, int(T.HIPDNN_TYPE_BOOLEAN), k, a.attr))
    return rows


def tables() -> dict:
    """{descriptor type: (class name, rows)} for every class the store holds."""
    factory._load()
    out = {}
    for dtype, cls in sorted(factory.CLASSES.items()):
        rows = fields_of(cls)
        if rows:
            out[dtype] = (cls.__name__, rows)
    return out
