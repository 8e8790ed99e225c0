"""Schema-table-driven FlatBuffers reading, writing and JSON conversion for the graph schemas.

The intermediate form is a plain dict per table holding only the fields that are *present* on the
wire: scalars and enums as numbers, strings as ``str``, scalar vectors as lists, sub-tables as
dicts, vectors of tables as lists of dicts, structs as dicts (``Uuid.bytes`` a list of 16 ints),
and a union as ``(type_index, member)`` under the union field's name (its hidden ``_type`` tag is
not stored separately).  A TensorValue member (a struct) is ``{"value": x}``.

* :func:`read` (``buf`` must have passed ``hipdnn_cabi.schemas.verifier.verify`` first) and
  :func:`build` (bytes) are inverses of each other.
* :func:`to_json` / :func:`from_json` give flatc's JSON form of the same data: field names as in the
  schema, enum values by name, union ``<field>_type`` by member name, absent fields left out.

Slots, kinds and enum/union tables come from ``hipdnn_cabi.schemas._generated.schema_table``
(computed by flatc), and the ``= null`` (optional) fields and scalar defaults come from the pinned
schema facts through :mod:`hipdnn_cabi.schemas.catalog`: no layout fact is typed by hand here.
"""
from __future__ import annotations

import json
import math
import struct

import flatbuffers

from ..schemas._generated.schema_table import ENUMS, STRUCTS, TABLES, UNIONS
from ..schemas.catalog import OPTIONAL_FIELDS, SCALAR_DEFAULTS

# scalar type -> struct format
FMT = {"bool": "<?", "byte": "<b", "ubyte": "<B", "short": "<h", "ushort": "<H", "int": "<i",
       "uint": "<I", "long": "<q", "ulong": "<Q", "float": "<f", "double": "<d"}
SIZE = {k: struct.calcsize(v) for k, v in FMT.items()}
RANGE = {"byte": (-2 ** 7, 2 ** 7 - 1), "ubyte": (0, 2 ** 8 - 1), "short": (-2 ** 15, 2 ** 15 - 1),
         "ushort": (0, 2 ** 16 - 1), "int": (-2 ** 31, 2 ** 31 - 1), "uint": (0, 2 ** 32 - 1),
         "long": (-2 ** 63, 2 ** 63 - 1), "ulong": (0, 2 ** 64 - 1)}

# Fields declared `= null` (absent = not set) and the non-zero defaults of plain scalars, from
# the pinned schema facts (the operation catalog's generated data).
OPTIONAL_SCALARS = OPTIONAL_FIELDS
DEFAULTS = SCALAR_DEFAULTS


class SchemaError(ValueError):
    """A dict / JSON value that does not fit the schema."""


def scalar_type(ref: str) -> str:
    """Underlying scalar type of a scalar field's ``ref`` (an enum name or a scalar name)."""
    e = ENUMS.get(ref)
    return e[0] if e else ref


def default_of(tname, fname, ref):
    return DEFAULTS.get((tname, fname), False if ref == "bool" else 0.0 if ref in ("float", "double") else 0)


# ------------------------------------------------------------------------------------ reading
def _read_struct(buf, pos, sname):
    _, _, fields = STRUCTS[sname]
    res = {}
    for fname, kind, off, size, ftype in fields:
        if kind == "array":
            res[fname] = list(buf[pos + off:pos + off + size])
        else:
            res[fname] = struct.unpack_from(FMT[ftype], buf, pos + off)[0]
    return res


_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_RPLANS: dict = {}


def _read_plan(tname):
    plan = _RPLANS.get(tname)
    if plan is None:
        plan = []
        fields = TABLES[tname]
        for slot, fname, kind, size, align, ref, _req in fields:
            if kind == "utype":
                continue
            extra = None
            if kind == "scalar":
                extra = struct.Struct(FMT[scalar_type(ref)]).unpack_from
            elif kind == "vec_scalar":
                extra = FMT[scalar_type(ref)][1]
            elif kind == "union":
                extra = 4 + 2 * (slot - 1)
            plan.append((4 + 2 * slot, fname, kind, ref, extra))
        _RPLANS[tname] = plan = tuple(plan)
    return plan


def _read_table(buf, pos, tname):
    """Read the present fields of the table at ``pos`` (buf verified beforehand)."""
    vt = pos - _I32(buf, pos)[0]
    vtsize = _U16(buf, vt)[0]
    res = {}
    for vto, fname, kind, ref, extra in _read_plan(tname):
        if vto >= vtsize:
            continue
        o = _U16(buf, vt + vto)[0]
        if not o:
            continue
        p = pos + o
        if kind == "scalar":
            res[fname] = extra(buf, p)[0]
        elif kind == "struct":
            res[fname] = _read_struct(buf, p, ref)
        else:
            target = p + _U32(buf, p)[0]
            if kind == "string":
                n = _U32(buf, target)[0]
                res[fname] = buf[target + 4:target + 4 + n].decode("utf-8", "replace")
            elif kind == "vec_scalar":
                n = _U32(buf, target)[0]
                res[fname] = list(struct.unpack_from("<%d%s" % (n, extra), buf, target + 4)) if n else []
            elif kind == "vec_table":
                n = _U32(buf, target)[0]
                lst = []
                for i in range(n):
                    e = target + 4 + 4 * i
                    lst.append(_read_table(buf, e + _U32(buf, e)[0], ref))
                res[fname] = lst
            elif kind == "vec_string":
                n = _U32(buf, target)[0]
                lst = []
                for i in range(n):
                    e = target + 4 + 4 * i
                    s0 = e + _U32(buf, e)[0]
                    ln = _U32(buf, s0)[0]
                    lst.append(buf[s0 + 4:s0 + 4 + ln].decode("utf-8", "replace"))
                res[fname] = lst
            elif kind == "table":
                res[fname] = _read_table(buf, target, ref)
            elif kind == "union":
                to = _U16(buf, vt + extra)[0] if extra < vtsize else 0
                utype = buf[pos + to] if to else 0
                if utype == 0:
                    continue
                member = UNIONS[ref].get(utype)
                if member is None:
                    res[fname] = (utype, None)
                    continue
                mname, mkind, mtype = member
                if mkind == "table":
                    res[fname] = (utype, _read_table(buf, target, mtype))
                else:
                    res[fname] = (utype, _read_struct(buf, target, mtype))
            else:  # vec_struct: unused by the graph schemas
                raise SchemaError("%s.%s: unsupported field kind %s" % (tname, fname, kind))
    return res


def read(buf, root: str) -> dict:
    buf = bytes(buf)
    return _read_table(buf, struct.unpack_from("<I", buf, 0)[0], root)


# ------------------------------------------------------------------------------------ writing
def _check_scalar(where, stype, v):
    if stype == "bool":
        if not isinstance(v, (bool, int)):
            raise SchemaError("%s: expected a bool" % where)
        return bool(v)
    if stype in ("float", "double"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SchemaError("%s: expected a number" % where)
        v = float(v)
        if stype == "float" and math.isfinite(v) and abs(v) > 3.4028234663852886e38:
            raise SchemaError("%s: %r does not fit a float" % (where, v))
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise SchemaError("%s: expected an integer" % where)
    lo, hi = RANGE[stype]
    if not lo <= v <= hi:
        raise SchemaError("%s: %d out of range for %s" % (where, v, stype))
    return v


def _prep_struct(b, sname, value, where):
    size, align, fields = STRUCTS[sname]
    if not isinstance(value, dict):
        raise SchemaError("%s: expected an object for struct %s" % (where, sname))
    b.Prep(align, size)
    # structs are written back to front
    for fname, kind, off, fsize, ftype in reversed(fields):
        v = value.get(fname, 0 if kind != "array" else [0] * fsize)
        if kind == "array":
            if not isinstance(v, list) or len(v) != fsize:
                raise SchemaError("%s.%s: expected %d elements" % (where, fname, fsize))
            for x in reversed(v):
                b.PrependUint8(_check_scalar(where + "." + fname, ftype, x))
        else:
            x = _check_scalar(where + "." + fname, ftype, v)
            b.Prep(SIZE[ftype], 0)
            b.Place(x, _flags(ftype))


_FLAGS = {"bool": flatbuffers.number_types.BoolFlags, "byte": flatbuffers.number_types.Int8Flags,
          "ubyte": flatbuffers.number_types.Uint8Flags, "short": flatbuffers.number_types.Int16Flags,
          "ushort": flatbuffers.number_types.Uint16Flags, "int": flatbuffers.number_types.Int32Flags,
          "uint": flatbuffers.number_types.Uint32Flags, "long": flatbuffers.number_types.Int64Flags,
          "ulong": flatbuffers.number_types.Uint64Flags, "float": flatbuffers.number_types.Float32Flags,
          "double": flatbuffers.number_types.Float64Flags}


def _flags(stype):
    return _FLAGS[stype]


_WORDER: dict = {}


def _write_order(tname):
    order = _WORDER.get(tname)
    if order is None:
        fields = TABLES[tname]
        lst = []
        for slot, fname, kind, size, align, ref, req in fields:
            if kind == "utype":
                lst.append((1, slot, fname, kind, ref, fields[slot + 1][1], None))
            else:
                st = scalar_type(ref) if kind == "scalar" else None
                sz = SIZE[st] if kind == "scalar" else size if kind == "struct" else 4
                lst.append((sz, slot, fname, kind, ref, fname, st))
        lst.sort(key=lambda t: (-t[0], -t[1]))
        _WORDER[tname] = order = tuple(t[1:] for t in lst)
    return order


def _scalar_vector(b, st, v, where):
    """A vector of scalars written in one block (not element by element)."""
    n = len(v)
    size = SIZE[st]
    try:
        data = struct.pack("<%d%s" % (n, FMT[st][1]), *v)
    except struct.error:
        for x in v:
            _check_scalar(where, st, x)
        raise SchemaError("%s: invalid vector element" % where) from None
    if st in ("float", "double", "bool") or any(isinstance(x, bool) for x in v):
        for x in v:  # struct accepts what the schema does not (bool as int, int as float, ...)
            _check_scalar(where, st, x)
    b.StartVector(size, n, size)
    b.head = b.head - len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    return b.EndVector()


def _write_table(b, tname, d, where):
    if not isinstance(d, dict):
        raise SchemaError("%s: expected an object" % where)
    fields = TABLES[tname]
    known = {f[1] for f in fields}
    for k in d:
        if k not in known:
            raise SchemaError("%s: unknown field %r" % (where, k))
    # 1. out-of-line children first
    offs = {}
    for slot, fname, kind, size, align, ref, req in fields:
        if fname not in d or kind in ("scalar", "struct", "utype"):
            continue
        v = d[fname]
        w = "%s.%s" % (where, fname)
        if kind == "string":
            if not isinstance(v, str):
                raise SchemaError("%s: expected a string" % w)
            offs[fname] = b.CreateString(v.encode("utf-8"))
        elif kind == "vec_scalar":
            if not isinstance(v, (list, tuple)):
                raise SchemaError("%s: expected an array" % w)
            offs[fname] = _scalar_vector(b, scalar_type(ref), v, w)
        elif kind == "vec_table":
            if not isinstance(v, (list, tuple)):
                raise SchemaError("%s: expected an array" % w)
            elems = [_write_table(b, ref, x, "%s[%d]" % (w, i)) for i, x in enumerate(v)]
            b.StartVector(4, len(elems), 4)
            for e in reversed(elems):
                b.PrependUOffsetTRelative(e)
            offs[fname] = b.EndVector()
        elif kind == "vec_string":
            if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
                raise SchemaError("%s: expected an array of strings" % w)
            elems = [b.CreateString(x.encode("utf-8")) for x in v]
            b.StartVector(4, len(elems), 4)
            for e in reversed(elems):
                b.PrependUOffsetTRelative(e)
            offs[fname] = b.EndVector()
        elif kind == "table":
            offs[fname] = _write_table(b, ref, v, w)
        elif kind == "union":
            if not (isinstance(v, tuple) and len(v) == 2):
                raise SchemaError("%s: expected a (type, value) union" % w)
            utype, val = v
            member = UNIONS[ref].get(utype)
            if member is None:
                raise SchemaError("%s: unknown %s member %r" % (w, ref, utype))
            mname, mkind, mtype = member
            if mkind == "table":
                offs[fname] = _write_table(b, mtype, val, "%s<%s>" % (w, mname))
            else:
                _prep_struct(b, mtype, val, "%s<%s>" % (w, mname))
                offs[fname] = b.Offset()
        else:
            raise SchemaError("%s: unsupported field kind %s" % (w, kind))
    # 2. the table: fields largest first, reverse declaration order within a size (like flatc)
    b.StartObject(len(fields))
    for slot, fname, kind, ref, key, st in _write_order(tname):
        if key not in d:
            continue
        if kind == "utype":
            b.PrependUint8Slot(slot, d[key][0], 0)
        elif kind == "scalar":
            x = _check_scalar("%s.%s" % (where, fname), st, d[fname])
            b.Prepend(_FLAGS[st], x)
            b.Slot(slot)
        elif kind == "struct":
            w = "%s.%s" % (where, fname)
            _prep_struct(b, ref, d[fname], w)
            b.Slot(slot)
        else:
            b.PrependUOffsetTRelativeSlot(slot, offs[fname], 0)
    return b.EndObject()


def build(root: str, d: dict, file_identifier: bytes | None = None) -> bytes:
    b = flatbuffers.Builder(1024)
    b.ForceDefaults(True)
    off = _write_table(b, root, d, root)
    b.Finish(off, file_identifier)
    return bytes(b.Output())


# ------------------------------------------------------------------------------------ JSON
_ENUM_NAMES = {name: {v: n for n, v in vals} for name, (_, vals) in ENUMS.items()}
_ENUM_VALUES = {name: {n: v for n, v in vals} for name, (_, vals) in ENUMS.items()}


def _num_json(stype, v):
    if stype in ("float", "double"):
        return float(v)
    if stype == "bool":
        return bool(v)
    return int(v)


def _table_to_json(tname, d):
    res = {}
    for slot, fname, kind, size, align, ref, req in TABLES[tname]:
        if kind == "utype":
            uf = TABLES[tname][slot + 1][1]
            if uf in d:
                utype = d[uf][0]
                m = UNIONS[ref].get(utype)
                res[fname] = m[0] if m else utype
            continue
        if fname not in d:
            continue
        v = d[fname]
        if kind == "scalar":
            names = _ENUM_NAMES.get(ref)
            if names is not None:
                res[fname] = names.get(v, v)
            else:
                res[fname] = _num_json(ref, v)
        elif kind in ("string", "vec_scalar", "vec_string"):
            res[fname] = list(v) if kind != "string" else v
        elif kind == "vec_table":
            res[fname] = [_table_to_json(ref, x) for x in v]
        elif kind == "table":
            res[fname] = _table_to_json(ref, v)
        elif kind == "struct":
            res[fname] = dict(v)
        elif kind == "union":
            utype, val = v
            m = UNIONS[ref].get(utype)
            if m is None or val is None:
                res[fname] = None
            elif m[1] == "table":
                res[fname] = _table_to_json(m[2], val)
            else:
                res[fname] = dict(val)
    return res


def to_json(root: str, d: dict) -> str:
    return json.dumps(_table_to_json(root, d), indent=2)


def _table_from_json(tname, j, where):
    if not isinstance(j, dict):
        raise SchemaError("%s: expected an object" % where)
    fields = TABLES[tname]
    by_name = {f[1]: f for f in fields}
    for k in j:
        if k not in by_name:
            raise SchemaError("%s: unknown field %r" % (where, k))
    res = {}
    for slot, fname, kind, size, align, ref, req in fields:
        if fname not in j or kind == "utype":
            continue
        v = j[fname]
        w = "%s.%s" % (where, fname)
        if kind == "scalar":
            values = _ENUM_VALUES.get(ref)
            if values is not None and isinstance(v, str):
                if v not in values:
                    raise SchemaError("%s: unknown %s value %r" % (w, ref, v))
                v = values[v]
            res[fname] = _check_scalar(w, scalar_type(ref), v)
        elif kind == "string":
            if not isinstance(v, str):
                raise SchemaError("%s: expected a string" % w)
            res[fname] = v
        elif kind == "vec_scalar":
            if not isinstance(v, list):
                raise SchemaError("%s: expected an array" % w)
            st = scalar_type(ref)
            values = _ENUM_VALUES.get(ref)
            out = []
            for x in v:
                if values is not None and isinstance(x, str):
                    if x not in values:
                        raise SchemaError("%s: unknown %s value %r" % (w, ref, x))
                    x = values[x]
                out.append(_check_scalar(w, st, x))
            res[fname] = out
        elif kind == "vec_string":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise SchemaError("%s: expected an array of strings" % w)
            res[fname] = list(v)
        elif kind == "vec_table":
            if not isinstance(v, list):
                raise SchemaError("%s: expected an array" % w)
            res[fname] = [_table_from_json(ref, x, "%s[%d]" % (w, i)) for i, x in enumerate(v)]
        elif kind == "table":
            res[fname] = _table_from_json(ref, v, w)
        elif kind == "struct":
            res[fname] = _struct_from_json(ref, v, w)
        elif kind == "union":
            tname_field = fields[slot - 1][1]
            t = j.get(tname_field, "NONE")
            if t in ("NONE", 0) or v is None:
                continue
            members = UNIONS[ref]
            if isinstance(t, str):
                idx = next((i for i, m in members.items() if m[0] == t), None)
            elif isinstance(t, int) and not isinstance(t, bool):
                idx = t if t in members else None
            else:
                idx = None
            if idx is None:
                raise SchemaError("%s: unknown %s member %r" % (w, ref, t))
            mname, mkind, mtype = members[idx]
            if mkind == "table":
                res[fname] = (idx, _table_from_json(mtype, v, "%s<%s>" % (w, mname)))
            else:
                res[fname] = (idx, _struct_from_json(mtype, v, "%s<%s>" % (w, mname)))
    return res


def _struct_from_json(sname, v, where):
    if not isinstance(v, dict):
        raise SchemaError("%s: expected an object" % where)
    _, _, fields = STRUCTS[sname]
    names = {f[0]: f for f in fields}
    for k in v:
        if k not in names:
            raise SchemaError("%s: unknown field %r" % (where, k))
    res = {}
    for fname, kind, off, size, ftype in fields:
        w = "%s.%s" % (where, fname)
        if kind == "array":
            x = v.get(fname, [0] * size)
            if not isinstance(x, list) or len(x) != size:
                raise SchemaError("%s: expected %d elements" % (w, size))
            res[fname] = [_check_scalar(w, ftype, e) for e in x]
        else:
            res[fname] = _check_scalar(w, ftype, v.get(fname, 0))
    return res


def from_json(root: str, text: str) -> dict:
    try:
        j = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise SchemaError("JSON parse error: %s" % e) from None
    return _table_from_json(root, j, root)
