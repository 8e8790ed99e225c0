#!/usr/bin/env python3
"""Generate the operation catalog (hipdnn_cabi/_generated/catalog.py).

Joins the pinned schema facts (tools/facts/hipdnn_schemas.json: every table's fields, their
types, `= null` markers and umd input/output tags) with the hand-written overlay
(tools/catalog/overlay.toml: descriptor and operation types, attribute names, role order,
type-rule classes, by-value scalar roles, engine exceptions).  Every name the overlay gives is
checked against the public headers' enums, every role and attribute against the schema.

Usage: tools/catalog/gen_catalog.py [--check]   (--check: fail when the file differs)
"""
from __future__ import annotations

import argparse
import json
import pathlib
import pprint
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
FACTS = ROOT / "tools" / "facts" / "hipdnn_schemas.json"
OVERLAY = ROOT / "tools" / "catalog" / "overlay.toml"
OUT = ROOT / "hipdnn_cabi" / "_generated" / "catalog.py"

sys.path.insert(0, str(ROOT))
from hipdnn_cabi._generated import enums as E  # noqa: E402  (the generated C enums)


class OverlayError(ValueError):
    pass


def _tables(facts):
    """table name -> list of field facts (declaration order, hidden union tags dropped)."""
    out = {}
    for f in facts["files"].values():
        for t in f["tables"]:
            out[t["name"]] = [x for x in t["fields"] if not x.get("implicit")]
    return out


def _node_union(facts):
    for f in facts["files"].values():
        for u in f["unions"]:
            if u["name"] == "NodeAttributes":
                return {m["name"]: m["type_index"] for m in u["members"]}
    raise OverlayError("NodeAttributes union missing from the facts")


def _attr(name, where):
    full = "HIPDNN_ATTR_" + name
    if full not in E.AttributeName.__members__:
        raise OverlayError(f"{where}: {full} is not a hipdnnBackendAttributeName_t member")
    return full


def _field_for_role(fields, role, where):
    for cand in (f"{role}_tensor_uid", f"{role}_tensor_uids"):
        if cand in fields:
            return cand
    raise OverlayError(f"{where}: role {role!r} has no schema field")


def _attr_kind(fact, enums, where):
    k, t = fact["kind"], fact["type"]
    if k == "enum":
        if t == "DataType":
            return "dtype", None
        if t not in enums:
            raise OverlayError(f"{where}: schema enum {t} has no [enums.{t}] entry")
        return "enum", t
    if k == "scalar":
        return {"long": "i64", "int": "i64", "bool": "bool", "float": "float",
                "double": "float"}[t], None
    if k == "string":
        return "string", None
    if k == "vector" and t in ("[long]", "[int]"):
        return "i64vec", None
    if k == "vector" and t == "[ubyte]":
        return "bytes", None
    raise OverlayError(f"{where}: field of kind {k} {t} cannot be an attribute")


def build(facts, overlay):
    tables = _tables(facts)
    union = _node_union(facts)
    enums = overlay["enums"]
    families = tuple(overlay["families"])
    ops = []
    for name, o in overlay["ops"].items():
        where = f"[ops.{name}]"
        table = o["table"]
        if table not in tables:
            raise OverlayError(f"{where}: table {table} not in the facts")
        facts_f = {f["name"]: f for f in tables[table]}
        if o["family"] not in families:
            raise OverlayError(f"{where}: family {o['family']} not in families")
        desc = "HIPDNN_BACKEND_" + o["descriptor"]
        if desc not in E.DescriptorType.__members__:
            raise OverlayError(f"{where}: {desc} is not a descriptor type")
        optype = "HIPDNN_OPERATION_TYPE_" + o["optype"]
        if optype not in E.OperationType.__members__:
            raise OverlayError(f"{where}: {optype} is not an operation type")
        outputs = set(o.get("outputs", ()))
        data, params, index = (set(o.get(k, ())) for k in ("data", "params", "index"))
        scalars = set(o.get("scalars", ()))
        arrays_mandatory = set(o.get("mandatory_arrays", ()))
        roles = []
        for spec in o["roles"]:
            role, _, attr = spec.partition(":")
            attr = attr or o["role_attr"].format(ROLE=role.upper())
            field = _field_for_role(facts_f, role, where)
            fact = facts_f[field]
            array = fact["kind"] == "vector"
            ca = fact.get("custom_attributes", {})
            if ca.get("umd_output_tensor"):
                outputs.add(role)
            elif ca.get("umd_input_tensor") and role in outputs:
                raise OverlayError(f"{where}: {role} is an input in the schema")
            io = "out" if role in outputs else "in"
            optional = bool(fact.get("optional_scalar")) or (array and role not in arrays_mandatory)
            if role in data:
                tclass = "data"
            elif role in params:
                tclass = "param"
            elif role in index:
                tclass = "index"
            elif io == "out" and data:
                tclass = "out"
            else:
                tclass = "any"
            roles.append((role, field, _attr(attr, where), io, optional, array, tclass,
                          role in scalars))
        known = {r[0] for r in roles}
        for group in ("outputs", "data", "params", "index", "scalars", "mandatory_arrays"):
            for r in o.get(group, ()):
                if r not in known:
                    raise OverlayError(f"{where}: {group} names unknown role {r!r}")
        attrs = []
        for spec in o.get("attrs", ()):
            words = spec.split()
            attr, field = words[0], words[1]
            mandatory = "!" in words[2:]
            key = next((w[4:] for w in words[2:] if w.startswith("key=")), None)
            if field == "@compute":
                attrs.append((_attr(attr, where), "@compute", "dtype", mandatory, "compute_data_type",
                              None, "", False))
                continue
            if field not in facts_f:
                raise OverlayError(f"{where}: attribute field {field} not in {table}")
            fact = facts_f[field]
            kind, enum = _attr_kind(fact, enums, where)
            stype = fact.get("underlying") or fact["type"]
            attrs.append((_attr(attr, where), field, kind, mandatory, key or field, enum,
                          stype if fact["kind"] in ("scalar", "enum") else "",
                          bool(fact.get("optional_scalar"))))
        covered = {r[1] for r in roles} | {a[1] for a in attrs}
        missing = [f for f in facts_f if f not in covered and not f.startswith("umd_")]
        if missing:
            raise OverlayError(f"{where}: schema fields without a role or attribute: {missing}")
        engines = dict(o.get("engines", {}))
        ops.append(dict(name=name, table=table, family=o["family"], union_index=union[table],
                        descriptor=desc, optype=optype, roles=tuple(roles), attrs=tuple(attrs),
                        frontend=o.get("frontend"), engines=engines))
    enum_out = {}
    for ename, e in enums.items():
        atype = "HIPDNN_TYPE_" + e["attr_type"]
        if atype not in E.AttributeType.__members__:
            raise OverlayError(f"[enums.{ename}]: {atype} is not an attribute type")
        if "values" not in e and e["c_enum"] not in vars(E):
            raise OverlayError(f"[enums.{ename}]: no C enum {e['c_enum']}")
        enum_out[ename] = dict(c_enum=e["c_enum"], attr_type=atype, offset=e.get("offset", 0),
                               also_int64=e.get("also_int64", False),
                               values=dict(e.get("values", {})))
    optional = {t: tuple(f["name"] for f in fs if f.get("optional_scalar"))
                for t, fs in sorted(tables.items())}
    optional = {t: v for t, v in optional.items() if v}
    defaults = {(t, f["name"]): f["default"] for t, fs in sorted(tables.items()) for f in fs
                if f["kind"] == "scalar" and f.get("default") not in (None, 0, False, 0.0)}
    return families, tuple(ops), enum_out, optional, defaults


HEADER = '''"""GENERATED by tools/catalog/gen_catalog.py from tools/facts/hipdnn_schemas.json and
tools/catalog/overlay.toml -- do not edit (``make generate``; ``make check-generated`` fails on drift).

The operation catalog's data; :mod:`hipdnn_cabi.schemas.catalog` wraps it.

ROLES rows: (role, schema field, attribute, "in"|"out", optional, array, type class, scalar).
ATTRS rows: (attribute, schema field or "@compute", kind, mandatory, frontend key, schema enum,
scalar type, optional).
"""
'''


def _op_text(op) -> str:
    lines = ["    dict("]
    for k, v in op.items():
        if k in ("roles", "attrs"):
            lines.append(f"        {k}=(")
            lines += [f"            {row!r}," for row in v]
            lines.append("        ),")
        else:
            lines.append(f"        {k}={v!r},")
    lines.append("    ),")
    return "\n".join(lines)


def render(families, ops, enums, optional, defaults) -> str:
    parts = [HEADER, f"FAMILIES = {families!r}\n",
             "OPS = (\n" + "\n".join(_op_text(op) for op in ops) + "\n)\n",
             "ENUMS = " + pprint.pformat(enums, width=100, sort_dicts=False) + "\n",
             "# Fields declared `= null` (absent = not set), per table.\n"
             "OPTIONAL_FIELDS = " + pprint.pformat(optional, width=100, sort_dicts=False) + "\n",
             "# Non-zero schema defaults of plain scalars: (table, field) -> default.\n"
             "SCALAR_DEFAULTS = " + pprint.pformat(defaults, width=100) + "\n"]
    return "\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when the generated file differs")
    args = ap.parse_args(argv)
    facts = json.loads(FACTS.read_text())
    with OVERLAY.open("rb") as f:
        overlay = tomllib.load(f)
    try:
        text = render(*build(facts, overlay))
    except OverlayError as e:
        print(f"gen_catalog: {e}", file=sys.stderr)
        return 1
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"gen_catalog: {OUT.relative_to(ROOT)} is out of date (make generate)",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
