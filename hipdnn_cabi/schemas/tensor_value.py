"""Hand-written access to the ``TensorAttributes.value`` union (``TensorValue``).

``TensorValue`` is a union whose members are *structs* (Float32Value, ...).
flatc's Python generator cannot express that, so the generated code was made
from a schema variant in which the members alias an empty placeholder table
(see tools/gen_flatbuffers_py.py): the generated ``TensorAttributes.ValueType()``
returns the correct type index and ``TensorAttributes.Value()`` returns a
``flatbuffers.table.Table`` whose ``Pos`` is the start of the struct, but nothing
reads the struct.  This module does that, and builds such values.

On the wire a struct union member is an out-of-line object reached through a
uoffset, exactly like a table: the hidden ``value_type`` (ubyte) sits in slot 6
and the uoffset in slot 7 of TensorAttributes.

Type indices (``TensorValue`` union, flatbuffers_sdk layout)::

    0 NONE, 1 Float32Value, 2 Float16Value, 3 BFloat16Value, 4 Float8Value,
    5 Int32Value, 6 Float64Value, 7 Int64Value, 8 BoolValue

Float16Value and BFloat16Value carry a 32-bit float (the value widened, not the
16-bit pattern); Float8Value carries one raw byte (an int 0..255).

API:
    read_tensor_value(ta) -> Optional[(type_index, value)]
    read_tensor_value_at(buf, pos, type_index) -> value
    create_tensor_value(builder, type_index, value) -> offset   (before TensorAttributesStart)
    add_tensor_value(builder, type_index, offset)               (between Start and End)
"""
from __future__ import annotations

import math
import struct
from typing import Any, Optional, Tuple

from flatbuffers import number_types as _N

from ._generated import TensorAttributes as _TA
from ._generated.TensorValue import TensorValue
from ._generated.schema_table import STRUCTS as _STRUCTS, UNIONS as _UNIONS

__all__ = [
    "TensorValue", "MEMBERS", "read_tensor_value", "read_tensor_value_at",
    "create_tensor_value", "add_tensor_value", "TensorValueError",
]

_FORMATS = {"float": "<f", "double": "<d", "int": "<i", "long": "<q", "ubyte": "<B", "bool": "<?"}
_FLAGS = {"float": _N.Float32Flags, "double": _N.Float64Flags, "int": _N.Int32Flags,
          "long": _N.Int64Flags, "ubyte": _N.Uint8Flags, "bool": _N.BoolFlags}


class TensorValueError(ValueError):
    """Bad type index or a value that does not fit the member struct."""


def _build_members():
    res = {}
    for idx, (member, kind, stype) in _UNIONS["TensorValue"].items():
        if kind != "struct":
            raise RuntimeError("TensorValue member %s is not a struct" % member)
        size, align, fields = _STRUCTS[stype]
        if len(fields) != 1 or fields[0][2] != 0 or fields[0][1] != "scalar":
            raise RuntimeError("TensorValue member %s: expected a single scalar field" % member)
        ftype = fields[0][4]
        if fields[0][3] != size:
            raise RuntimeError("TensorValue member %s: padded struct not supported" % member)
        res[idx] = (member, ftype, _FORMATS[ftype], size, align)
    return res


#: type index -> (member name, scalar type, struct format, bytesize, minalign)
MEMBERS = _build_members()


def read_tensor_value_at(buf, pos: int, type_index: int) -> Any:
    """Decode the member struct of type ``type_index`` located at ``buf[pos:]``."""
    try:
        _, ftype, fmt, _, _ = MEMBERS[type_index]
    except KeyError:
        raise TensorValueError("unknown TensorValue type index %r" % (type_index,)) from None
    return struct.unpack_from(fmt, buf, pos)[0]


def read_tensor_value(ta) -> Optional[Tuple[int, Any]]:
    """Read the ``value`` union of a generated ``TensorAttributes`` object.

    Returns None when no value is stored (type NONE or no offset), otherwise
    ``(type_index, value)``; for a type index this schema does not know, the
    value is None (a reader should treat it as unsupported, not crash).
    """
    t = ta.ValueType()
    if t == TensorValue.NONE:
        return None
    tab = ta.Value()
    if tab is None:
        return None
    if t not in MEMBERS:
        return (t, None)
    return (t, read_tensor_value_at(tab.Bytes, tab.Pos, t))


def _check_value(type_index: int, ftype: str, value):
    if ftype in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TensorValueError("TensorValue %d needs a float, got %r" % (type_index, value))
        v = float(value)
        if ftype == "float" and math.isfinite(v) and abs(v) > 3.4028234663852886e38:
            raise TensorValueError("TensorValue %d: %r does not fit a 32-bit float" % (type_index, value))
        return v
    if ftype == "bool":
        if not isinstance(value, (bool, int)):
            raise TensorValueError("TensorValue %d needs a bool, got %r" % (type_index, value))
        return bool(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TensorValueError("TensorValue %d needs an int, got %r" % (type_index, value))
    lo, hi = {"int": (-2 ** 31, 2 ** 31 - 1), "long": (-2 ** 63, 2 ** 63 - 1), "ubyte": (0, 255)}[ftype]
    if not lo <= value <= hi:
        raise TensorValueError("TensorValue %d: %r out of range for %s" % (type_index, value, ftype))
    return value


def create_tensor_value(builder, type_index: int, value) -> int:
    """Write a TensorValue member struct as a standalone object; return its offset.

    Must be called while no table is being built (i.e. before
    ``TensorAttributesStart``), like any string/vector/table creation.
    """
    try:
        _, ftype, fmt, size, align = MEMBERS[type_index]
    except KeyError:
        raise TensorValueError("unknown TensorValue type index %r" % (type_index,)) from None
    if getattr(builder, "nested", False):
        raise TensorValueError("create_tensor_value() called while a table is being built")
    v = _check_value(type_index, ftype, value)
    builder.Prep(align, size)
    builder.Place(v, _FLAGS[ftype])
    return builder.Offset()


def add_tensor_value(builder, type_index: int, offset: int) -> None:
    """Add ``value_type`` and ``value`` to the TensorAttributes being built."""
    if type_index not in MEMBERS:
        raise TensorValueError("unknown TensorValue type index %r" % (type_index,))
    _TA.TensorAttributesAddValueType(builder, type_index)
    _TA.TensorAttributesAddValue(builder, offset)
