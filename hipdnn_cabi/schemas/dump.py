"""Generic, schema-table-driven conversion of a FlatBuffer into plain Python data.

Walks a buffer through the flatc-generated reader classes (every accessor of
every present field, recursively) and returns dicts/lists.  Useful for
debugging, tests and equality checks; not tuned for speed.  Verify untrusted
buffers first (hipdnn_cabi.schemas.verifier).

    to_dict(buf, "Graph")            -> {"name": "...", "tensors": [...], ...}
    table_to_dict(obj, "Graph")      (obj: a generated reader object)

Conventions: strings -> str (UTF-8, errors="replace"); scalar vectors -> list
(bool vectors -> list of bool, [ubyte] -> list of int); absent
vectors/strings/tables/structs/optional scalars -> None; a union ->
``{"type": <member name, or the int for an unknown index>, "value": <dict or None>}``
(a struct member such as TensorValue's gives ``{"value": x}``), or None for NONE;
a struct -> dict (arrays -> list).
"""
from __future__ import annotations

import importlib
from typing import Any, Dict

from ._generated.schema_table import STRUCTS, TABLES, UNIONS

_PKG = __name__.rsplit(".", 1)[0] + "._generated"
_classes: Dict[str, type] = {}


def gen_class(name: str) -> type:
    """The generated reader class for a schema type (table or struct)."""
    cls = _classes.get(name)
    if cls is None:
        cls = getattr(importlib.import_module("%s.%s" % (_PKG, name)), name)
        _classes[name] = cls
    return cls


def camel(field_name: str) -> str:
    """flatc's Python accessor name for a schema field (snake_case -> UpperCamel)."""
    return "".join(p[:1].upper() + p[1:] for p in field_name.split("_"))


def _s(b):
    return None if b is None else b.decode("utf-8", "replace")


def _struct_to_dict(obj, sname: str) -> Dict[str, Any]:
    _, _, fields = STRUCTS[sname]
    res = {}
    for fname, kind, _off, _size, ftype in fields:
        acc = getattr(obj, camel(fname))
        if kind == "array":
            res[fname] = list(acc())
        elif kind == "struct":
            res[fname] = _struct_to_dict(acc(gen_class(ftype)()), ftype)
        else:
            res[fname] = acc()
    return res


def _plan(tname: str):
    plan = _plans.get(tname)
    if plan is None:
        plan = []
        for slot, fname, kind, size, align, ref, required in TABLES[tname]:
            if kind == "utype":
                continue
            c = camel(fname)
            plan.append((fname, kind, ref, c, c + "Length", c + "IsNone", c + "AsNumpy", c + "Type"))
        _plans[tname] = plan = tuple(plan)
    return plan


_plans: Dict[str, tuple] = {}


def table_to_dict(obj, tname: str) -> Dict[str, Any]:
    res: Dict[str, Any] = {}
    for fname, kind, ref, c, c_len, c_none, c_np, c_type in _plan(tname):
        acc = getattr(obj, c)
        if kind == "scalar":
            res[fname] = acc()
        elif kind == "string":
            res[fname] = _s(acc())
        elif kind == "struct":
            st = acc()
            res[fname] = None if st is None else _struct_to_dict(st, ref)
        elif kind == "table":
            t = acc()
            res[fname] = None if t is None else table_to_dict(t, ref)
        elif kind.startswith("vec_"):
            if getattr(obj, c_none)():
                res[fname] = None
                continue
            n = getattr(obj, c_len)()
            if kind == "vec_scalar":
                # whole vector through the generated numpy accessor (bounds-checked by numpy),
                # plus the first and last element through the element accessor
                arr = getattr(obj, c_np)()
                vals = arr.tolist() if n else []
                if n and (acc(0) != vals[0] or acc(n - 1) != vals[-1]):
                    raise AssertionError("%s.%s: element accessor disagrees" % (tname, fname))
                res[fname] = vals
            elif kind == "vec_string":
                res[fname] = [_s(acc(j)) for j in range(n)]
            elif kind == "vec_table":
                res[fname] = [table_to_dict(acc(j), ref) for j in range(n)]
            else:  # vec_struct
                res[fname] = [_struct_to_dict(acc(j), ref) for j in range(n)]
        elif kind == "union":
            utype = getattr(obj, c_type)()
            if utype == 0:
                res[fname] = None
                continue
            tab = acc()
            member = UNIONS[ref].get(utype)
            if member is None:
                res[fname] = {"type": utype, "value": None}
                continue
            mname, mkind, mtype = member
            if tab is None:
                val = None
            elif mkind == "table":
                m = gen_class(mtype)()
                m.Init(tab.Bytes, tab.Pos)
                val = table_to_dict(m, mtype)
            else:  # struct member (TensorValue): {"value": ...}
                val = _struct_to_dict(_struct_at(mtype, tab), mtype)
            res[fname] = {"type": mname, "value": val}
        else:  # pragma: no cover - schema_table kinds are closed
            raise ValueError("unknown field kind %r" % kind)
    return res


def _struct_at(sname, tab):
    s = gen_class(sname)()
    s.Init(tab.Bytes, tab.Pos)
    return s


def to_dict(buf, root_table: str) -> Dict[str, Any]:
    """Read ``buf`` (bytes/bytearray) with the generated ``root_table`` class."""
    cls = gen_class(root_table)
    return table_to_dict(cls.GetRootAs(buf, 0), root_table)
