"""Minimal reader for FlatBuffers binary schemas (.bfbs, ``flatc --binary --schema``).

The .bfbs format is itself a FlatBuffer described by flatc's ``reflection.fbs``
(namespace ``reflection``).  The flatbuffers Python runtime ships no classes for
it, so this module reads the few fields we need through raw vtable slots.  It is
used by ``tools/gen_flatbuffers_py.py`` (to derive the verifier's schema table
from the schema exactly as flatc compiled it) and by the schema tests (to
compare flatc's view of our .fbs with the pinned JSON facts).

Input is trusted (produced by flatc on this machine); no verification is done.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import flatbuffers
from flatbuffers.table import Table

# reflection.BaseType
BASE_TYPES = [
    "None", "UType", "Bool", "Byte", "UByte", "Short", "UShort", "Int", "UInt",
    "Long", "ULong", "Float", "Double", "String", "Vector", "Obj", "Union",
    "Array", "Vector64",
]
SCALAR_NAMES = {  # reflection base type -> schema spelling
    "Bool": "bool", "Byte": "byte", "UByte": "ubyte", "Short": "short",
    "UShort": "ushort", "Int": "int", "UInt": "uint", "Long": "long",
    "ULong": "ulong", "Float": "float", "Double": "double", "UType": "ubyte",
}
SCALAR_SIZES = {
    "UType": 1, "Bool": 1, "Byte": 1, "UByte": 1, "Short": 2, "UShort": 2,
    "Int": 4, "UInt": 4, "Long": 8, "ULong": 8, "Float": 4, "Double": 8,
}

# vtable offsets (4 + 2*slot) of the reflection tables, per reflection.fbs
_SCHEMA = dict(objects=4, enums=6, file_ident=8, file_ext=10, root_table=12)
_OBJECT = dict(name=4, fields=6, is_struct=8, minalign=10, bytesize=12, attributes=14,
               declaration_file=18)
_FIELD = dict(name=4, type=6, id=8, offset=10, default_integer=12, default_real=14,
              deprecated=16, required=18, key=20, attributes=22, optional=26)
_TYPE = dict(base_type=4, element=6, index=8, fixed_length=10, base_size=12, element_size=14)
_ENUM = dict(name=4, values=6, is_union=8, underlying_type=10, attributes=12, declaration_file=16)
_ENUMVAL = dict(name=4, value=6, union_type=10, attributes=14)
_KEYVALUE = dict(key=4, value=6)


class _T:
    """Thin wrapper over flatbuffers.table.Table with slot-based accessors."""

    __slots__ = ("tab",)

    def __init__(self, buf, pos):
        self.tab = Table(buf, pos)

    def _o(self, vt):
        return self.tab.Offset(vt)

    def scalar(self, vt, flags, default=0):
        o = self._o(vt)
        return self.tab.Get(flags, o + self.tab.Pos) if o else default

    def string(self, vt) -> Optional[str]:
        o = self._o(vt)
        return self.tab.String(o + self.tab.Pos).decode("utf-8") if o else None

    def table(self, vt) -> Optional["_T"]:
        o = self._o(vt)
        return _T(self.tab.Bytes, self.tab.Indirect(o + self.tab.Pos)) if o else None

    def tables(self, vt) -> List["_T"]:
        o = self._o(vt)
        if not o:
            return []
        n = self.tab.VectorLen(o)
        start = self.tab.Vector(o)
        res = []
        for i in range(n):
            p = start + 4 * i
            res.append(_T(self.tab.Bytes, self.tab.Indirect(p)))
        return res


_F = flatbuffers.number_types


@dataclass
class RType:
    base_type: str
    element: str
    index: int
    fixed_length: int
    base_size: int
    element_size: int


@dataclass
class RField:
    name: str
    type: RType
    id: int
    offset: int
    default_integer: int
    default_real: float
    deprecated: bool
    required: bool
    optional: bool
    attributes: Dict[str, str]


@dataclass
class RObject:
    name: str
    fields: List[RField]  # sorted by id (slot)
    is_struct: bool
    minalign: int
    bytesize: int
    attributes: Dict[str, str]
    declaration_file: Optional[str]


@dataclass
class REnumVal:
    name: str
    value: int
    union_type: Optional[RType]


@dataclass
class REnum:
    name: str
    values: List[REnumVal]
    is_union: bool
    underlying_type: RType
    attributes: Dict[str, str]
    declaration_file: Optional[str]


@dataclass
class RSchema:
    objects: List[RObject]
    enums: List[REnum]
    file_ident: Optional[str]
    root_table: Optional[str]
    by_name: Dict[str, RObject] = field(default_factory=dict)
    enums_by_name: Dict[str, REnum] = field(default_factory=dict)


def _attrs(t: _T, vt) -> Dict[str, str]:
    res = {}
    for kv in t.tables(vt):
        res[kv.string(_KEYVALUE["key"])] = kv.string(_KEYVALUE["value"])
    return res


def _type(t: _T) -> RType:
    return RType(
        base_type=BASE_TYPES[t.scalar(_TYPE["base_type"], _F.Int8Flags, 0)],
        element=BASE_TYPES[t.scalar(_TYPE["element"], _F.Int8Flags, 0)],
        index=t.scalar(_TYPE["index"], _F.Int32Flags, -1),
        fixed_length=t.scalar(_TYPE["fixed_length"], _F.Uint16Flags, 0),
        base_size=t.scalar(_TYPE["base_size"], _F.Uint32Flags, 4),
        element_size=t.scalar(_TYPE["element_size"], _F.Uint32Flags, 0),
    )


def read_bfbs(data: bytes) -> RSchema:
    buf = bytearray(data)
    root = _T(buf, flatbuffers.encode.Get(_F.UOffsetTFlags.packer_type, buf, 0))
    objects = []
    for o in root.tables(_SCHEMA["objects"]):
        fields = []
        for f in o.tables(_OBJECT["fields"]):
            fields.append(RField(
                name=f.string(_FIELD["name"]),
                type=_type(f.table(_FIELD["type"])),
                id=f.scalar(_FIELD["id"], _F.Uint16Flags, 0),
                offset=f.scalar(_FIELD["offset"], _F.Uint16Flags, 0),
                default_integer=f.scalar(_FIELD["default_integer"], _F.Int64Flags, 0),
                default_real=f.scalar(_FIELD["default_real"], _F.Float64Flags, 0.0),
                deprecated=bool(f.scalar(_FIELD["deprecated"], _F.BoolFlags, False)),
                required=bool(f.scalar(_FIELD["required"], _F.BoolFlags, False)),
                optional=bool(f.scalar(_FIELD["optional"], _F.BoolFlags, False)),
                attributes=_attrs(f, _FIELD["attributes"]),
            ))
        fields.sort(key=lambda x: x.id)
        objects.append(RObject(
            name=o.string(_OBJECT["name"]),
            fields=fields,
            is_struct=bool(o.scalar(_OBJECT["is_struct"], _F.BoolFlags, False)),
            minalign=o.scalar(_OBJECT["minalign"], _F.Int32Flags, 0),
            bytesize=o.scalar(_OBJECT["bytesize"], _F.Int32Flags, 0),
            attributes=_attrs(o, _OBJECT["attributes"]),
            declaration_file=o.string(_OBJECT["declaration_file"]),
        ))
    enums = []
    for e in root.tables(_SCHEMA["enums"]):
        vals = []
        for v in e.tables(_ENUM["values"]):
            ut = v.table(_ENUMVAL["union_type"])
            vals.append(REnumVal(
                name=v.string(_ENUMVAL["name"]),
                value=v.scalar(_ENUMVAL["value"], _F.Int64Flags, 0),
                union_type=_type(ut) if ut is not None else None,
            ))
        enums.append(REnum(
            name=e.string(_ENUM["name"]),
            values=vals,
            is_union=bool(e.scalar(_ENUM["is_union"], _F.BoolFlags, False)),
            underlying_type=_type(e.table(_ENUM["underlying_type"])),
            attributes=_attrs(e, _ENUM["attributes"]),
            declaration_file=e.string(_ENUM["declaration_file"]),
        ))
    rt = root.table(_SCHEMA["root_table"])
    sch = RSchema(
        objects=objects,
        enums=enums,
        file_ident=root.string(_SCHEMA["file_ident"]),
        root_table=rt.string(_OBJECT["name"]) if rt is not None else None,
    )
    sch.by_name = {o.name: o for o in objects}
    sch.enums_by_name = {e.name: e for e in enums}
    return sch


def short(name: str) -> str:
    """Unqualified type name ('a.b.Graph' -> 'Graph')."""
    return name.rsplit(".", 1)[-1]
