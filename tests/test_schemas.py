"""Schema tests: our .fbs files and generated Python code against the pinned facts.

(a) the committed .fbs files, parsed here (no flatc needed) and compiled by flatc
    to a binary schema (skipped without flatc), match shared/abi/hipdnn_schemas.json:
    namespaces, includes, attributes, enums, unions (type indices), structs
    (layout), tables (fields in slot order, types, defaults, optional/required,
    attributes), root types, file identifiers;  the generated schema table and
    generated enum classes agree as well;
(b) drift: regenerating the .fbs and the Python code gives identical bytes;
(c) round trip through our generated builders and readers;
(d) an independent encoder (flatbuffers.Builder + raw slots from the JSON facts,
    no generated code) writes every table with every field set, and our
    generated readers read every field back intact.
"""
from __future__ import annotations

import json
import math
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import flatbuffers
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

import gen_fbs  # noqa: E402
import gen_flatbuffers_py  # noqa: E402

from hipdnn_cabi.schemas import _reflection as R  # noqa: E402
from hipdnn_cabi.schemas import dump, tensor_value as tv  # noqa: E402
from hipdnn_cabi.schemas.verifier import verify  # noqa: E402
from hipdnn_cabi.schemas._generated import schema_table as ST  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_schemas_support as S  # noqa: E402

FBS_DIR = REPO / "hipdnn_cabi" / "schemas" / "fbs"
GEN_DIR = REPO / "hipdnn_cabi" / "schemas" / "_generated"

try:
    JSON_PATH = gen_fbs.find_json()
    FACTS = json.loads(JSON_PATH.read_text(encoding="utf-8"))
except FileNotFoundError:  # pragma: no cover
    JSON_PATH, FACTS = None, None

needs_facts = pytest.mark.skipif(FACTS is None, reason="shared/abi/hipdnn_schemas.json not found")
FLATC = gen_flatbuffers_py.find_flatc()
needs_flatc = pytest.mark.skipif(FLATC is None, reason="flatc not installed")

# ---------------------------------------------------------------------------------------------
# facts helpers

if FACTS is not None:
    F_FILES = FACTS["files"]
    F_TABLES = {t["name"]: t for f in F_FILES.values() for t in f["tables"]}
    F_STRUCTS = {s["name"]: s for f in F_FILES.values() for s in f["structs"]}
    F_UNIONS = {u["name"]: u for f in F_FILES.values() for u in f["unions"]}
    F_ENUMS = {e["name"]: e for f in F_FILES.values() for e in f["enums"]}
else:  # pragma: no cover
    F_FILES = F_TABLES = F_STRUCTS = F_UNIONS = F_ENUMS = {}

SCALARS = {  # type -> (struct format, size)
    "bool": ("<?", 1), "byte": ("<b", 1), "ubyte": ("<B", 1), "short": ("<h", 2), "ushort": ("<H", 2),
    "int": ("<i", 4), "uint": ("<I", 4), "long": ("<q", 8), "ulong": ("<Q", 8),
    "float": ("<f", 4), "double": ("<d", 8),
}


def test_facts_cover_35_files():
    if FACTS is None:
        pytest.skip("no facts")
    assert len(F_FILES) == 35
    assert sorted(p.name for p in FBS_DIR.glob("*.fbs")) == sorted(F_FILES)


# ---------------------------------------------------------------------------------------------
# (a1) a small .fbs parser (enough for the schema language subset we use)

_TOKEN_RE = re.compile(r'\s+|//[^\n]*|"(?:[^"\\]|\\.)*"|-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+|[A-Za-z_][\w.]*|[{}()\[\]:;=,]')


def _tokens(text):
    pos = 0
    out = []
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise SyntaxError("bad character at %d: %r" % (pos, text[pos:pos + 20]))
        tok = m.group(0)
        pos = m.end()
        if not tok.strip() or tok.startswith("//"):
            continue
        out.append(tok)
    return out


class _P:
    def __init__(self, text):
        self.t = _tokens(text)
        self.i = 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def next(self):
        tok = self.t[self.i]
        self.i += 1
        return tok

    def expect(self, tok):
        got = self.next()
        if got != tok:
            raise SyntaxError("expected %r, got %r (token %d)" % (tok, got, self.i))

    def attrs(self):
        res = {}
        if self.peek() != "(":
            return res
        self.next()
        while True:
            key = self.next()
            val = True
            if self.peek() == ":":
                self.next()
                val = self.next()
                if val.startswith('"'):
                    val = json.loads(val)
            res[key] = val
            if self.peek() == ",":
                self.next()
                continue
            self.expect(")")
            return res

    def type_(self):
        if self.peek() == "[":
            self.next()
            el = self.next()
            n = None
            if self.peek() == ":":
                self.next()
                n = int(self.next())
            self.expect("]")
            return ("array", el, n) if n is not None else ("vector", el)
        return ("named", self.next())


def parse_fbs(text):
    p = _P(text)
    out = dict(includes=[], namespace=None, attributes=[], enums=[], unions=[], structs=[], tables=[],
               root_type=None, file_identifier=None)
    while p.peek() is not None:
        kw = p.next()
        if kw == "include":
            out["includes"].append(json.loads(p.next()))
            p.expect(";")
        elif kw == "namespace":
            out["namespace"] = p.next()
            p.expect(";")
        elif kw == "attribute":
            out["attributes"].append(json.loads(p.next()))
            p.expect(";")
        elif kw == "enum":
            name = p.next()
            p.expect(":")
            under = p.next()
            p.expect("{")
            vals, nxt = [], 0
            while p.peek() != "}":
                vn = p.next()
                if p.peek() == "=":
                    p.next()
                    nxt = int(p.next())
                vals.append((vn, nxt))
                nxt += 1
                if p.peek() == ",":
                    p.next()
            p.expect("}")
            out["enums"].append(dict(name=name, underlying=under, values=vals))
        elif kw == "union":
            name = p.next()
            p.expect("{")
            members = []
            while p.peek() != "}":
                mn = p.next()
                mt = mn
                if p.peek() == ":":
                    p.next()
                    mt = p.next()
                members.append((mn, mt))
                if p.peek() == ",":
                    p.next()
            p.expect("}")
            out["unions"].append(dict(name=name, members=members))
        elif kw in ("struct", "table"):
            name = p.next()
            tattrs = p.attrs()
            p.expect("{")
            fields = []
            while p.peek() != "}":
                fname = p.next()
                p.expect(":")
                ftype = p.type_()
                default = None
                if p.peek() == "=":
                    p.next()
                    default = p.next()
                fattrs = p.attrs()
                p.expect(";")
                fields.append(dict(name=fname, type=ftype, default=default, attrs=fattrs))
            p.expect("}")
            out[kw + "s"].append(dict(name=name, attrs=tattrs, fields=fields))
        elif kw == "root_type":
            out["root_type"] = p.next()
            p.expect(";")
        elif kw == "file_identifier":
            out["file_identifier"] = json.loads(p.next())
            p.expect(";")
        else:
            raise SyntaxError("unexpected %r" % kw)
    return out


def _parse_all():
    return {p.name: parse_fbs(p.read_text(encoding="utf-8")) for p in sorted(FBS_DIR.glob("*.fbs"))}


def _type_str(t):
    if t[0] == "vector":
        return "[%s]" % t[1]
    if t[0] == "array":
        return "[%s:%d]" % (t[1], t[2])
    return t[1]


def _parse_default(text, ftype):
    if text in ("true", "false"):
        return text == "true"
    if ftype in ("float", "double"):
        return float(text)
    return int(text)


@needs_facts
def test_fbs_text_matches_facts():
    parsed = _parse_all()
    all_unions = {u["name"]: u for f in parsed.values() for u in f["unions"]}
    all_enums = {e["name"]: e for f in parsed.values() for e in f["enums"]}
    all_structs = {s["name"]: s for f in parsed.values() for s in f["structs"]}
    all_tables = {t["name"]: t for f in parsed.values() for t in f["tables"]}

    def struct_layout(name):
        s = all_structs[name]
        off, align, res = 0, 1, []
        for f in s["fields"]:
            t = f["type"]
            if t[0] == "array":
                esz = SCALARS[t[1]][1]
                size, al = esz * t[2], esz
            elif t[1] in SCALARS:
                size = al = SCALARS[t[1]][1]
            else:
                size, al, _ = struct_layout(t[1])
            off = (off + al - 1) // al * al
            res.append((f["name"], off, size))
            off += size
            align = max(align, al)
        return (off + align - 1) // align * align, align, res

    for fname, facts in F_FILES.items():
        mine = parsed[fname]
        assert mine["namespace"] == facts["namespace"], fname
        assert mine["includes"] == facts["includes"], fname
        assert mine["attributes"] == facts["attributes_declared"], fname
        assert mine["root_type"] == facts["root_type"], fname
        assert mine["file_identifier"] == facts["file_identifier"], fname
        assert [e["name"] for e in mine["enums"]] == [e["name"] for e in facts["enums"]], fname
        for e, fe in zip(mine["enums"], facts["enums"]):
            assert e["underlying"] == fe["underlying_type"], e["name"]
            assert e["values"] == [(v["name"], v["value"]) for v in fe["values"]], e["name"]
        assert [u["name"] for u in mine["unions"]] == [u["name"] for u in facts["unions"]], fname
        for u, fu in zip(mine["unions"], facts["unions"]):
            got = [(i, mn, mt, "struct" if mt in all_structs else "table")
                   for i, (mn, mt) in enumerate(u["members"], start=1)]
            want = [(m["type_index"], m["name"], m["member_type"], m["member_kind"])
                    for m in fu["members"] if m["type_index"]]
            assert got == want, u["name"]
            assert fu["members"][0] == {"name": "NONE", "type_index": 0}
        assert [s["name"] for s in mine["structs"]] == [s["name"] for s in facts["structs"]], fname
        for fs in facts["structs"]:
            size, align, fields = struct_layout(fs["name"])
            assert (size, align) == (fs["bytesize"], fs["minalign"]), fs["name"]
            assert fields == [(f["name"], f["offset"], f["size"]) for f in fs["fields"]], fs["name"]
            assert [_type_str(f["type"]) for f in all_structs[fs["name"]]["fields"]] == \
                [f["type"] for f in fs["fields"]], fs["name"]
        assert [t["name"] for t in mine["tables"]] == [t["name"] for t in facts["tables"]], fname
        for ft in facts["tables"]:
            t = all_tables[ft["name"]]
            assert t["attrs"] == ft.get("attributes", {}), ft["name"]
            # expand union fields into (hidden tag, value) slots, as flatc does
            slots = []
            for f in t["fields"]:
                ts = _type_str(f["type"])
                if ts in all_unions:
                    slots.append(dict(name=f["name"] + "_type", type=ts + " (type tag)", kind="union_type_tag",
                                      default=None, attrs={}))
                slots.append(dict(name=f["name"], type=ts, raw=f, default=f["default"], attrs=f["attrs"]))
            assert len(slots) == ft["vtable_slots"], ft["name"]
            assert [s["name"] for s in slots] == [f["name"] for f in ft["fields"]], ft["name"]
            for slot, (s, ff) in enumerate(zip(slots, ft["fields"])):
                where = "%s.%s" % (ft["name"], ff["name"])
                assert ff["slot"] == slot and ff["vtable_offset"] == 4 + 2 * slot, where
                assert s["type"] == ff["type"], where
                if ff["kind"] == "union_type_tag":
                    assert ff.get("implicit") and ff["default_value"] == 0, where
                    continue
                required = bool(s["attrs"].get("required"))
                assert required == bool(ff["attributes"].get("required")), where
                custom = {k: v for k, v in s["attrs"].items() if k not in ("required", "deprecated")}
                assert custom == ff.get("custom_attributes", {}), where
                assert bool(s["attrs"].get("deprecated")) == bool(ff["attributes"].get("deprecated")), where
                kind = ff["kind"]
                if kind == "scalar":
                    if ff.get("optional_scalar"):
                        assert s["default"] == "null", where
                    else:
                        assert s["default"] != "null", where
                        if s["default"]:
                            got = _parse_default(s["default"], ff["type"])
                        else:
                            got = {"bool": False, "float": 0.0, "double": 0.0}.get(ff["type"], 0)
                        assert got == ff["default"] and type(got) is type(ff["default"]), where
                elif kind == "enum":
                    assert s["type"] in all_enums, where
                    values = dict(all_enums[s["type"]]["values"])
                    got = values[s["default"]] if s["default"] else 0
                    assert got == ff["default_value"], where
                    assert all_enums[s["type"]]["underlying"] == ff["underlying"], where
                elif kind == "vector":
                    el = s["raw"]["type"][1]
                    assert el == ff["element"], where
                    ek = ("scalar" if el in SCALARS else "string" if el == "string" else
                          "struct" if el in all_structs else "table" if el in all_tables else "enum")
                    assert ek == ff["element_kind"], where
                    if ek == "scalar":
                        assert SCALARS[el][1] == ff["element_size"], where
                elif kind == "struct":
                    assert s["type"] in all_structs, where
                elif kind == "table":
                    assert s["type"] in all_tables, where
                elif kind == "union":
                    assert s["type"] in all_unions, where
                else:
                    assert kind == "string" and s["type"] == "string", where


# ---------------------------------------------------------------------------------------------
# (a2) flatc's own view of our .fbs (binary schema via reflection)

@pytest.fixture(scope="module")
def bfbs():
    if FLATC is None:
        pytest.skip("flatc not installed")
    with tempfile.TemporaryDirectory() as td:
        return gen_flatbuffers_py.compile_bfbs(FLATC, FBS_DIR, Path(td))


_BT = {"Bool": "bool", "Byte": "byte", "UByte": "ubyte", "Short": "short", "UShort": "ushort", "Int": "int",
       "UInt": "uint", "Long": "long", "ULong": "ulong", "Float": "float", "Double": "double"}


@needs_facts
@needs_flatc
def test_binary_schema_matches_facts(bfbs):
    for fname, facts in F_FILES.items():
        sch = bfbs[fname]
        decl = "//" + fname
        assert (R.short(sch.root_table) if sch.root_table else None) == facts["root_type"], fname
        assert (sch.file_ident or None) == facts["file_identifier"], fname
        objs = [o for o in sch.objects if o.declaration_file == decl]
        enums = [e for e in sch.enums if e.declaration_file == decl]
        for o in objs + enums:
            assert o.name == facts["namespace"] + "." + R.short(o.name)
        assert sorted(R.short(o.name) for o in objs if not o.is_struct) == sorted(t["name"] for t in facts["tables"])
        assert sorted(R.short(o.name) for o in objs if o.is_struct) == sorted(s["name"] for s in facts["structs"])
        assert sorted(R.short(e.name) for e in enums if e.is_union) == sorted(u["name"] for u in facts["unions"])
        assert sorted(R.short(e.name) for e in enums if not e.is_union) == sorted(e["name"] for e in facts["enums"])
        for e in enums:
            if e.is_union:
                fu = F_UNIONS[R.short(e.name)]
                got = []
                for v in e.values:
                    if v.value == 0:
                        got.append((0, v.name, None, None))
                        continue
                    ref = sch.objects[v.union_type.index]
                    got.append((v.value, v.name, R.short(ref.name), "struct" if ref.is_struct else "table"))
                want = [(m["type_index"], m["name"], m.get("member_type"), m.get("member_kind"))
                        for m in fu["members"]]
                assert got == want, e.name
            else:
                fe = F_ENUMS[R.short(e.name)]
                assert _BT[e.underlying_type.base_type] == fe["underlying_type"]
                assert [(v.name, v.value) for v in e.values] == [(v["name"], v["value"]) for v in fe["values"]]
        for o in objs:
            name = R.short(o.name)
            if o.is_struct:
                fs = F_STRUCTS[name]
                assert (o.bytesize, o.minalign) == (fs["bytesize"], fs["minalign"]), name
                for f, ff in zip(o.fields, fs["fields"]):
                    assert (f.name, f.offset) == (ff["name"], ff["offset"]), name
                    if ff["kind"] == "array":
                        assert f.type.base_type == "Array" and f.type.fixed_length == ff["length"]
                        assert _BT[f.type.element] == ff["element"]
                    else:
                        assert _BT[f.type.base_type] == ff["type"]
                assert len(o.fields) == len(fs["fields"])
                continue
            ft = F_TABLES[name]
            tattrs = {k: (True if v == "0" else v) for k, v in o.attributes.items()}
            assert tattrs == ft.get("attributes", {}), name
            assert len(o.fields) == ft["vtable_slots"] == len(ft["fields"]), name
            for f, ff in zip(o.fields, ft["fields"]):
                where = "%s.%s" % (name, ff["name"])
                assert (f.name, f.id, f.offset) == (ff["name"], ff["slot"], ff["vtable_offset"]), where
                bt, kind = f.type.base_type, ff["kind"]
                assert f.required == bool(ff["attributes"].get("required")), where
                assert f.deprecated == bool(ff["attributes"].get("deprecated")), where
                custom = {k: (True if v == "0" else v) for k, v in f.attributes.items()}
                assert custom == ff.get("custom_attributes", {}), where
                if kind == "scalar":
                    assert _BT[bt] == ff["type"] and f.type.index == -1, where
                    assert f.optional == bool(ff.get("optional_scalar")), where
                    if not ff.get("optional_scalar"):
                        d = f.default_real if bt in ("Float", "Double") else f.default_integer
                        assert d == ff["default"], where
                elif kind == "enum":
                    assert R.short(sch.enums[f.type.index].name) == ff["type"], where
                    assert _BT[bt] == ff["underlying"], where
                    assert f.default_integer == ff["default_value"], where
                    assert f.optional == bool(ff.get("optional_scalar")), where
                elif kind == "union_type_tag":
                    assert bt == "UType" and R.short(sch.enums[f.type.index].name) == ff["union"], where
                elif kind == "union":
                    assert bt == "Union" and R.short(sch.enums[f.type.index].name) == ff["type"], where
                elif kind == "string":
                    assert bt == "String", where
                elif kind in ("table", "struct"):
                    ref = sch.objects[f.type.index]
                    assert bt == "Obj" and R.short(ref.name) == ff["type"], where
                    assert ref.is_struct == (kind == "struct"), where
                elif kind == "vector":
                    assert bt == "Vector", where
                    ek = ff["element_kind"]
                    if ek == "scalar":
                        assert _BT[f.type.element] == ff["element"] and f.type.index == -1, where
                        assert f.type.element_size == ff["element_size"], where
                    elif ek == "string":
                        assert f.type.element == "String", where
                    else:
                        assert f.type.element == "Obj", where
                        assert R.short(sch.objects[f.type.index].name) == ff["element"], where
                else:  # pragma: no cover
                    raise AssertionError("unknown kind " + kind)


# ---------------------------------------------------------------------------------------------
# (a3) the generated schema table and enum/union classes

@needs_facts
def test_schema_table_matches_facts():
    assert set(ST.TABLES) == set(F_TABLES)
    for name, ft in F_TABLES.items():
        got = [(slot, fname) for slot, fname, *_ in ST.TABLES[name]]
        assert got == [(f["slot"], f["name"]) for f in ft["fields"]], name
        for (slot, fname, kind, size, align, ref, req), ff in zip(ST.TABLES[name], ft["fields"]):
            want_kind = {"scalar": "scalar", "enum": "scalar", "union_type_tag": "utype", "union": "union",
                         "string": "string", "table": "table", "struct": "struct"}.get(ff["kind"])
            if ff["kind"] == "vector":
                want_kind = "vec_" + ff["element_kind"]
                if ff["element_kind"] == "scalar":
                    assert size == ff["element_size"]
            assert kind == want_kind, (name, fname)
            assert req == bool(ff["attributes"].get("required")), (name, fname)
            if ff["kind"] in ("scalar", "enum"):
                assert ref == ff["type"] and size == SCALARS[ff.get("underlying", ff["type"])][1]
            if ff["kind"] == "struct":
                assert (size, align) == (F_STRUCTS[ref]["bytesize"], F_STRUCTS[ref]["minalign"])
    assert set(ST.STRUCTS) == set(F_STRUCTS)
    for name, fs in F_STRUCTS.items():
        assert ST.STRUCTS[name][:2] == (fs["bytesize"], fs["minalign"])
    assert set(ST.UNIONS) == set(F_UNIONS)
    for name, fu in F_UNIONS.items():
        assert ST.UNIONS[name] == {m["type_index"]: (m["name"], m["member_kind"], m["member_type"])
                                   for m in fu["members"] if m["type_index"]}
    assert set(ST.ENUMS) == set(F_ENUMS)
    for name, fe in F_ENUMS.items():
        assert ST.ENUMS[name] == (fe["underlying_type"], tuple((v["name"], v["value"]) for v in fe["values"]))
    assert ST.ROOTS == {f: (v["root_type"], v["file_identifier"]) for f, v in F_FILES.items() if v["root_type"]}


@needs_facts
def test_generated_enum_and_union_classes():
    import importlib
    for name, fe in list(F_ENUMS.items()) + list(F_UNIONS.items()):
        cls = getattr(importlib.import_module("hipdnn_cabi.schemas._generated." + name), name)
        values = fe.get("values") or [{"name": m["name"], "value": m["type_index"]} for m in fe["members"]]
        for v in values:
            assert getattr(cls, v["name"]) == v["value"], (name, v["name"])
    assert {k: v[0] for k, v in tv.MEMBERS.items()} == {
        m["type_index"]: m["name"] for m in F_UNIONS["TensorValue"]["members"] if m["type_index"]}


@needs_facts
def test_generated_defaults_match_facts():
    """An empty table of every type, read through the generated classes, yields the facts' defaults."""
    for name, ft in F_TABLES.items():
        b = flatbuffers.Builder(0)
        b.StartObject(ft["vtable_slots"])
        b.Finish(b.EndObject())
        buf = bytes(b.Output())
        verify_ok = not any(f["attributes"].get("required") for f in ft["fields"])
        if verify_ok:
            verify(buf, name)
        obj = dump.gen_class(name).GetRootAs(buf, 0)
        for ff in ft["fields"]:
            acc = getattr(obj, dump.camel(ff["name"]))
            where = "%s.%s" % (name, ff["name"])
            if ff["kind"] == "scalar":
                want = None if ff.get("optional_scalar") else ff["default"]
                got = acc()
                assert got == want and (want is None or type(got) is type(want) or
                                        isinstance(want, float)), where
            elif ff["kind"] in ("enum", "union_type_tag"):
                assert acc() == (None if ff.get("optional_scalar") else ff["default_value"]), where
            elif ff["kind"] == "vector":
                assert getattr(obj, dump.camel(ff["name"]) + "IsNone")(), where
                assert getattr(obj, dump.camel(ff["name"]) + "Length")() == 0, where
            else:
                assert acc() is None, where


def test_headers():
    for p in FBS_DIR.glob("*.fbs"):
        assert p.read_text(encoding="utf-8").split("\n", 1)[0] == gen_fbs.HEADER, p
    for p in GEN_DIR.glob("*.py"):
        assert p.read_text(encoding="utf-8").split("\n", 1)[0] == gen_flatbuffers_py.HEADER, p


def test_file_identifier_helpers_generated():
    from hipdnn_cabi.schemas._generated import SerializedGraphAndPlan as SGP, DeviceProperties as DP
    c = S.build_sample_container(S.build_sample_graph())
    assert SGP.SerializedGraphAndPlan.SerializedGraphAndPlanBufferHasIdentifier(c, 0)
    assert hasattr(DP.DeviceProperties, "DevicePropertiesBufferHasIdentifier")


# ---------------------------------------------------------------------------------------------
# (b) drift

@needs_facts
def test_fbs_drift():
    rendered = gen_fbs.render_all(FACTS)
    committed = {p.name: p.read_bytes() for p in FBS_DIR.glob("*.fbs")}
    assert set(rendered) == set(committed)
    for name, text in rendered.items():
        assert text.encode("utf-8") == committed[name], "%s differs: rerun tools/gen_fbs.py" % name


@needs_flatc
def test_python_drift(tmp_path):
    try:
        gen_flatbuffers_py.generate(FLATC, FBS_DIR, tmp_path)
    except RuntimeError as e:
        if "pinned to" in str(e):
            pytest.skip(str(e))
        raise
    new = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    old = {p.name: p.read_bytes() for p in GEN_DIR.glob("*.py")}
    assert set(new) == set(old), set(new) ^ set(old)
    for name in new:
        assert new[name] == old[name], "%s differs: rerun tools/gen_flatbuffers_py.py" % name


@needs_flatc
def test_flatc_python_refuses_struct_unions(tmp_path):
    """Documents why TensorValue is handled by hand (and that the workaround is still needed)."""
    res = subprocess.run([FLATC, "--python", "-o", str(tmp_path), "tensor_attributes.fbs"],
                         cwd=FBS_DIR, capture_output=True, text=True)
    assert res.returncode != 0 and "only tables can be union elements" in (res.stdout + res.stderr)


# ---------------------------------------------------------------------------------------------
# (c) round trip through our generated builders and readers

def test_round_trip_graph():
    from hipdnn_cabi.schemas._generated.Graph import Graph
    from hipdnn_cabi.schemas._generated.NodeAttributes import NodeAttributes
    from hipdnn_cabi.schemas._generated.ConvolutionFwdAttributes import ConvolutionFwdAttributes
    from hipdnn_cabi.schemas._generated.PointwiseAttributes import PointwiseAttributes
    from hipdnn_cabi.schemas._generated.DataType import DataType

    buf = S.build_sample_graph()
    verify(buf, "Graph")
    g = Graph.GetRootAs(buf, 0)
    assert g.Name() == b"sample_graph"
    assert (g.ComputeDataType(), g.IntermediateDataType(), g.IoDataType()) == \
        (DataType.FLOAT, DataType.FLOAT, DataType.HALF)
    assert g.PreferredEngineId() == 0 and g.IsOverrideShapeEnabled() is True
    v = g.MinRequiredEngineApiVersion()
    assert (v.Major(), v.Minor(), v.Patch()) == (1, 3, 0)
    assert bytes(g.Id().Bytes()) == S.UUID
    assert g.TensorsLength() == len(S.SAMPLE_TENSORS)
    for i, (uid, name, dt, dims, virt, value, pbv, ragged, align, mult) in enumerate(S.SAMPLE_TENSORS):
        t = g.Tensors(i)
        assert (t.Uid(), t.Name().decode(), t.DataType(), t.Virtual()) == (uid, name, dt, virt)
        assert t.DimsAsNumpy().tolist() == dims and [t.Strides(j) for j in range(t.StridesLength())] == \
            S.strides_for(dims)
        assert (t.IsRuntimePassByValue(), t.RaggedOffsetTensorUid(), t.Alignment(), t.RaggedOffsetMultiplier()) == \
            (pbv, ragged, align, mult)
        got = tv.read_tensor_value(t)
        if value is None:
            assert got is None and t.ValueType() == 0
        else:
            assert got == value, name
    assert g.NodesLength() == 4
    n0, n1 = g.Nodes(0), g.Nodes(1)
    assert n0.Name() == b"conv_fwd" and n0.AttributesType() == NodeAttributes.ConvolutionFwdAttributes
    conv = ConvolutionFwdAttributes()
    conv.Init(n0.Attributes().Bytes, n0.Attributes().Pos)
    assert (conv.XTensorUid(), conv.WTensorUid(), conv.YTensorUid()) == (1, 2, 3)
    assert conv.StrideAsNumpy().tolist() == [1, 1] and conv.UmdFlops() == b"2*N*K*C*R*S*H*W"
    assert conv.UmdBytes() is None and conv.ConvMode() == 2
    assert n1.AttributesType() == NodeAttributes.PointwiseAttributes
    pw = PointwiseAttributes()
    pw.Init(n1.Attributes().Bytes, n1.Attributes().Pos)
    assert (pw.Operation(), pw.In0TensorUid(), pw.In1TensorUid(), pw.In2TensorUid(), pw.Out0TensorUid()) == \
        (2, 3, 4, None, 5)
    assert pw.ReluLowerClip() == 0.0 and pw.ReluUpperClip() is None and pw.SwishBeta() == 1.5
    assert pw.AxisTensorUid() == 0


def test_round_trip_engine_details_and_plan():
    d = dump.to_dict(S.build_sample_engine_details(), "EngineDetails")
    assert d["engine_id"] == 42 and d["behavior_notes"] == [0, 2, 4] and d["name"] == "sample_engine"
    assert [k["knob_id"] for k in d["knobs"]] == ["tile_m", "ratio", "algo", "legacy"]
    assert d["knobs"][0]["default_value"] == {"type": "IntValue", "value": {"value": 64}}
    assert d["knobs"][0]["constraint"]["value"] == {"min_value": 16, "max_value": 128, "step": 16,
                                                    "valid_values": [16, 32, 64, 128]}
    assert d["knobs"][3]["constraint"] is None and d["knobs"][3]["deprecated"] is True
    page = d["candidate_page"]
    assert page["device_arch"] == "gfx942" and len(page["candidates"]) == 3
    assert page["candidates"][2]["knob_settings"][0]["value"] == {"type": "IntValue", "value": {"value": 96}}
    p = dump.to_dict(S.build_sample_plan(), "SerializedExecutionPlan")
    assert p == {"version": 1, "engine_id": 42, "workspace_size": 4096, "tensor_uids": [1, 2, 5],
                 "plugin_payload": list(b"plugin-bytes" * 3), "is_override_shape_enabled": True}


def test_tensor_value_helpers():
    b = flatbuffers.Builder(0)
    with pytest.raises(tv.TensorValueError):
        tv.create_tensor_value(b, 99, 1)
    for t, bad in ((5, 2 ** 31), (4, 256), (4, -1), (7, 1.5), (1, "x"), (1, 1e39)):
        with pytest.raises(tv.TensorValueError):
            tv.create_tensor_value(b, t, bad)
    from hipdnn_cabi.schemas._generated import TensorAttributes as TA
    TA.Start(b)
    with pytest.raises(tv.TensorValueError):
        tv.create_tensor_value(b, 1, 1.0)
    # float16/bfloat16 members carry a widened 32-bit float
    b = flatbuffers.Builder(0)
    o = tv.create_tensor_value(b, 2, 0.1)
    TA.Start(b)
    tv.add_tensor_value(b, 2, o)
    b.Finish(TA.End(b))
    ta = TA.TensorAttributes.GetRootAs(b.Output(), 0)
    assert tv.read_tensor_value(ta) == (2, struct.unpack("<f", struct.pack("<f", 0.1))[0])


# ---------------------------------------------------------------------------------------------
# (d) independent encoder: flatbuffers.Builder + slots/types from the JSON facts only

_PREPEND = {"bool": "Bool", "byte": "Int8", "ubyte": "Uint8", "short": "Int16", "ushort": "Uint16",
            "int": "Int32", "uint": "Uint32", "long": "Int64", "ulong": "Uint64", "float": "Float32",
            "double": "Float64"}


class _Values:
    """Deterministic, non-default sample values for every field kind, and the expected read-back."""

    def __init__(self):
        self.n = 0

    def tick(self):
        self.n += 1
        return self.n

    def scalar(self, ftype):
        c = self.tick()
        if ftype == "bool":
            return True
        if ftype in ("float", "double"):
            return c + 0.5 if ftype == "float" else -(c + 0.25)
        if ftype in ("ubyte", "byte"):
            return c % 100 + 1
        if ftype.startswith("u"):
            return c + (2 ** 33 if ftype == "ulong" else 7)
        return -c * (2 ** 35 if ftype == "long" else 3)

    def enum(self, ename):
        vals = F_ENUMS[ename]["values"]
        return vals[1 + self.tick() % (len(vals) - 1)]["value"]

    def table(self, tname, depth=0, member_pick=None):
        """Return a dict {field: value} in dump format (all fields set)."""
        ft = F_TABLES[tname]
        res = {}
        for ff in ft["fields"]:
            k = ff["kind"]
            if k == "union_type_tag":
                continue
            if k == "scalar":
                res[ff["name"]] = self.scalar(ff["type"])
            elif k == "enum":
                res[ff["name"]] = self.enum(ff["type"])
            elif k == "string":
                res[ff["name"]] = "%s.%s#%d" % (tname, ff["name"], self.tick())
            elif k == "struct":
                res[ff["name"]] = self.struct(ff["type"])
            elif k == "table":
                res[ff["name"]] = self.table(ff["type"], depth + 1)
            elif k == "vector":
                ek, el = ff["element_kind"], ff["element"]
                if ek == "scalar":
                    res[ff["name"]] = [self.scalar(el) for _ in range(3)]
                elif ek == "string":
                    res[ff["name"]] = ["s%d" % self.tick() for _ in range(3)]
                else:
                    res[ff["name"]] = [self.table(el, depth + 1) for _ in range(2)]
            elif k == "union":
                members = [m for m in F_UNIONS[ff["type"]]["members"] if m["type_index"]]
                m = member_pick or members[self.tick() % len(members)]
                if m["member_kind"] == "table":
                    val = self.table(m["member_type"], depth + 1)
                else:
                    val = self.struct(m["member_type"])
                res[ff["name"]] = {"type": m["name"], "value": val}
        return res

    def struct(self, sname):
        res = {}
        for f in F_STRUCTS[sname]["fields"]:
            if f["kind"] == "array":
                res[f["name"]] = [(self.tick() * 7) % 256 for _ in range(f["length"])]
            else:
                res[f["name"]] = self.scalar(f["type"])
        return res


def _struct_bytes(sname, val):
    fs = F_STRUCTS[sname]
    raw = bytearray(fs["bytesize"])
    for f in fs["fields"]:
        if f["kind"] == "array":
            fmt = SCALARS[f["element"]][0]
            for i, x in enumerate(val[f["name"]]):
                struct.pack_into(fmt, raw, f["offset"] + i * SCALARS[f["element"]][1], x)
        else:
            struct.pack_into(SCALARS[f["type"]][0], raw, f["offset"], val[f["name"]])
    return bytes(raw)


def _put_struct(b, sname, val):
    fs = F_STRUCTS[sname]
    raw = _struct_bytes(sname, val)
    b.Prep(fs["minalign"], fs["bytesize"])
    for byte in reversed(raw):
        b.Place(byte, flatbuffers.number_types.Uint8Flags)
    return b.Offset()


def _offsets(b, offs):
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def encode_table(b, tname, values):
    """Write table ``tname`` using only the JSON facts (slots, kinds, types)."""
    ft = F_TABLES[tname]
    by_name = {f["name"]: f for f in ft["fields"]}
    pre = {}
    for name, v in values.items():
        ff = by_name[name]
        k = ff["kind"]
        if k == "string":
            pre[name] = b.CreateString(v)
        elif k == "table":
            pre[name] = encode_table(b, ff["type"], v)
        elif k == "vector":
            ek, el = ff["element_kind"], ff["element"]
            if ek == "scalar":
                size = SCALARS[el][1]
                b.StartVector(size, len(v), size)
                for x in reversed(v):
                    getattr(b, "Prepend" + _PREPEND[el])(x)
                pre[name] = b.EndVector()
            elif ek == "string":
                pre[name] = _offsets(b, [b.CreateString(s) for s in v])
            else:
                pre[name] = _offsets(b, [encode_table(b, el, x) for x in v])
        elif k == "union":
            m = next(m for m in F_UNIONS[ff["type"]]["members"] if m["name"] == v["type"])
            if m["member_kind"] == "table":
                pre[name] = encode_table(b, m["member_type"], v["value"])
            else:
                pre[name] = _put_struct(b, m["member_type"], v["value"])
    b.StartObject(ft["vtable_slots"])
    for name, v in values.items():
        ff = by_name[name]
        k, slot = ff["kind"], ff["slot"]
        if k == "scalar":
            getattr(b, "Prepend%sSlot" % _PREPEND[ff["type"]])(slot, v, None)
        elif k == "enum":
            getattr(b, "Prepend%sSlot" % _PREPEND[ff["underlying"]])(slot, v, None)
        elif k == "struct":
            b.PrependStructSlot(slot, _put_struct(b, ff["type"], v), 0)
        elif k == "union":
            tag = next(f for f in ft["fields"] if f["kind"] == "union_type_tag" and f["name"] == name + "_type")
            idx = next(m["type_index"] for m in F_UNIONS[ff["type"]]["members"] if m["name"] == v["type"])
            b.PrependUint8Slot(tag["slot"], idx, None)
            b.PrependUOffsetTRelativeSlot(slot, pre[name], 0)
        else:
            b.PrependUOffsetTRelativeSlot(slot, pre[name], 0)
    return b.EndObject()


def _assert_same(got, want, path="root"):
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (path, got, want)
        for k in want:
            _assert_same(got[k], want[k], path + "." + k)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (path, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, "%s[%d]" % (path, i))
    elif isinstance(want, float):
        assert isinstance(got, float) and got == want, (path, got, want)
    else:
        assert got == want and type(got) is type(want), (path, got, want)


@needs_facts
def test_independent_encoder_graph_every_field():
    vals = _Values()
    node_members = [m for m in F_UNIONS["NodeAttributes"]["members"] if m["type_index"]]
    value_members = [m for m in F_UNIONS["TensorValue"]["members"] if m["type_index"]]
    graph = vals.table("Graph")
    graph["nodes"] = [vals.table("Node", 1, member_pick=m) for m in node_members]
    graph["tensors"] = [vals.table("TensorAttributes", 1, member_pick=m) for m in value_members]
    b = flatbuffers.Builder(0)
    b.Finish(encode_table(b, "Graph", graph))
    buf = bytes(b.Output())
    verify(buf, "Graph")
    got = dump.to_dict(buf, "Graph")
    _assert_same(got, graph)
    assert [n["attributes"]["type"] for n in got["nodes"]] == [m["name"] for m in node_members]
    # the hand-written TensorValue accessor agrees
    from hipdnn_cabi.schemas._generated.Graph import Graph
    g = Graph.GetRootAs(buf, 0)
    for i, m in enumerate(value_members):
        t, v = tv.read_tensor_value(g.Tensors(i))
        assert (t, v) == (m["type_index"], graph["tensors"][i]["value"]["value"]["value"])


@needs_facts
@pytest.mark.parametrize("root", ["EngineDetails", "EngineConfig", "SerializedExecutionPlan",
                                  "DeviceProperties", "SerializedGraphAndPlan", "Knob"])
def test_independent_encoder_other_roots(root):
    vals = _Values()
    for rot in range(3):  # rotate union members
        vals.n = rot
        want = vals.table(root)
        b = flatbuffers.Builder(0)
        ident = next((f["file_identifier"] for f in F_FILES.values() if f["root_type"] == root), None)
        b.Finish(encode_table(b, root, want), file_identifier=ident.encode() if ident else None)
        buf = bytes(b.Output())
        verify(buf, root, ident.encode() if ident else None)
        _assert_same(dump.to_dict(buf, root), want)


@needs_facts
def test_every_table_reachable_by_independent_encoder():
    """Every table of the facts is reachable from a root (or NodeAttributes), so the two tests above
    exercise every field of every table."""
    reach = set()

    def walk(t):
        if t in reach:
            return
        reach.add(t)
        for ff in F_TABLES[t]["fields"]:
            if ff["kind"] == "table":
                walk(ff["type"])
            elif ff["kind"] == "vector" and ff["element_kind"] == "table":
                walk(ff["element"])
            elif ff["kind"] == "union":
                for m in F_UNIONS[ff["type"]]["members"]:
                    if m.get("member_kind") == "table":
                        walk(m["member_type"])

    for r in ("Graph", "EngineDetails", "EngineConfig", "SerializedExecutionPlan", "DeviceProperties",
              "SerializedGraphAndPlan", "Knob"):
        walk(r)
    assert reach == set(F_TABLES)


def test_float_values_exact():
    # sanity for the sample values: x + 0.5 is exact in float32 for the magnitudes used
    assert all(struct.unpack("<f", struct.pack("<f", c + 0.5))[0] == c + 0.5 for c in range(0, 5000))
    assert not math.isnan(0.5)
