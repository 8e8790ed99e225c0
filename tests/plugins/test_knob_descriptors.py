"""Knobs through the C API (spec §1.7, §1.8, §1.11, §1.12, §2.8): KNOB_INFO descriptors built from
the plugin's EngineDetails, behaviour notes, KNOB_CHOICE rules, ENGINECFG_KNOB_CHOICES and the
EngineConfig FlatBuffer the plugin receives.  The plugin is broken/details_file.c: its EngineDetails
are whatever bytes the test writes."""
from __future__ import annotations

import os

from plugins_testlib import py

from hipdnn_cabi._generated.enums import AttributeType as T

INT64, DOUBLE, CHAR = int(T.HIPDNN_TYPE_INT64), int(T.HIPDNN_TYPE_DOUBLE), int(T.HIPDNN_TYPE_CHAR)

KNOBS = """
import flatbuffers
from hipdnn_cabi.plugin_sdk.graph import build_engine_details
from hipdnn_cabi.backend.plugins.loader import fnv1a64
from hipdnn_cabi.schemas._generated import (FloatConstraint, FloatValue, IntConstraint, IntValue, Knob,
                                            StringConstraint, StringValue)
INT, FLOAT, STRING = 1, 2, 3
def knob(b, kid, desc, kind, default, con=None):
    if kind == INT:
        IntValue.Start(b); IntValue.AddValue(b, default); dv = IntValue.End(b)
    elif kind == FLOAT:
        FloatValue.Start(b); FloatValue.AddValue(b, default); dv = FloatValue.End(b)
    else:
        s = b.CreateString(default); StringValue.Start(b); StringValue.AddValue(b, s); dv = StringValue.End(b)
    c = con(b) if con else None
    k, d = b.CreateString(kid), b.CreateString(desc)
    Knob.Start(b); Knob.AddKnobId(b, k); Knob.AddDescription(b, d)
    Knob.AddDefaultValueType(b, kind); Knob.AddDefaultValue(b, dv)
    if c is not None:
        Knob.AddConstraintType(b, kind); Knob.AddConstraint(b, c)
    if kid == "OLD":
        Knob.AddDeprecated(b, True)
    return Knob.End(b)
def irange(b):
    IntConstraint.Start(b); IntConstraint.AddMinValue(b, 1); IntConstraint.AddMaxValue(b, 64); IntConstraint.AddStep(b, 2)
    return IntConstraint.End(b)
def frange(b):
    FloatConstraint.Start(b); FloatConstraint.AddMinValue(b, -10.0); FloatConstraint.AddMaxValue(b, 10.0)
    return FloatConstraint.End(b)
def strs(b):
    offs = [b.CreateString(v) for v in ("direct", "tiled")]
    StringConstraint.StartValidValuesVector(b, 2)
    for o in reversed(offs): b.PrependUOffsetTRelative(o)
    vv = b.EndVector()
    StringConstraint.Start(b); StringConstraint.AddMaxLength(b, 16); StringConstraint.AddValidValues(b, vv)
    return StringConstraint.End(b)
EID = fnv1a64("MINI_kn")
raw = build_engine_details(EID, behavior_notes=[4, 0], knobs=lambda b: [
    knob(b, "TILE", "tile size", INT, 4, irange), knob(b, "OFFSET", "added", FLOAT, 0.5, frange),
    knob(b, "ALGO", "algorithm", STRING, "direct", strs), knob(b, "OLD", "", INT, 7)])
open(os.environ["MINI_DETAILS_FILE"], "wb").write(raw)
import os
"""

ENGINE = """
hh = create_handle()
g = standin_graph(hh)
def engine():
    e = desc(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
    set_attr(e, A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [g])
    set_attr(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64, "int64_t", [EID])
    assert lib.hipdnnBackendFinalize(e) == 0, err()
    return e
def get(d, name, atype, ctype, req):
    n = ffi.new("int64_t*"); v = ffi.new(f"{ctype}[]", max(req, 1))
    st = lib.hipdnnBackendGetAttribute(d, name, atype, req, n, v if req else ffi.NULL)
    return st, n[0], v
def text(d, name):
    st, n, _ = get(d, name, T.HIPDNN_TYPE_CHAR, "char", 0)
    assert st == 0, err()
    st, m, v = get(d, name, T.HIPDNN_TYPE_CHAR, "char", n)
    assert st == 0, err()
    return ffi.buffer(v, n)[:].rstrip(b"\\0").decode()
"""


def _env(mini, tmp_path):
    so = mini("kn", dirname="knobs", src="details_file.c")
    return {"HIPDNN_PLUGIN_DIR": os.path.dirname(so), "MINI_DETAILS_FILE": str(tmp_path / "details.bin"),
            "MINI_CONFIG_FILE": str(tmp_path / "config.bin")}


def test_knob_info_from_engine_details(mini, tmp_path):
    r = py("import os\n" + KNOBS + ENGINE + """
out = {}
e = engine()
st, n, _ = get(e, A.HIPDNN_ATTR_ENGINE_KNOB_INFO, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", 0)
out["count"] = [st, n]
out["short"] = get(e, A.HIPDNN_ATTR_ENGINE_KNOB_INFO, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", 2)[0]
st, m, ks = get(e, A.HIPDNN_ATTR_ENGINE_KNOB_INFO, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", 4)
out["fetch"] = [st, m]
knobs = {}
for i in range(m):
    k = ks[i]
    d = {"desc": text(k, A.HIPDNN_ATTR_KNOB_INFO_DESCRIPTION)}
    d["dtype"] = get_i64(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE_TYPE)[1]
    dep = ffi.new("bool[1]"); c = ffi.new("int64_t*")
    lib.hipdnnBackendGetAttribute(k, A.HIPDNN_ATTR_KNOB_INFO_DEPRECATED, T.HIPDNN_TYPE_BOOLEAN, 1, c, dep)
    d["deprecated"] = bool(dep[0])
    if d["dtype"] == T.HIPDNN_TYPE_INT64:
        d["default"] = get_i64(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE)[1]
        for nm in ("MINIMUM_VALUE", "MAXIMUM_VALUE", "STRIDE"):
            st, cnt, v = get(k, getattr(A, "HIPDNN_ATTR_KNOB_INFO_" + nm), T.HIPDNN_TYPE_INT64, "int64_t", 1)
            d[nm] = v[0] if cnt else None
    elif d["dtype"] == T.HIPDNN_TYPE_DOUBLE:
        for nm in ("DEFAULT_VALUE", "MINIMUM_VALUE", "MAXIMUM_VALUE"):
            d[nm] = get(k, getattr(A, "HIPDNN_ATTR_KNOB_INFO_" + nm), T.HIPDNN_TYPE_DOUBLE, "double", 1)[2][0]
    else:
        d["default"] = text(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE)
        d["valid"] = text(k, A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_STRING)
        d["max32"] = get(k, A.HIPDNN_ATTR_KNOB_INFO_STRING_MAX_LENGTH, T.HIPDNN_TYPE_INT32, "int32_t", 1)[2][0]
        d["max64"] = get(k, A.HIPDNN_ATTR_KNOB_INFO_STRING_MAX_LENGTH, T.HIPDNN_TYPE_INT64, "int64_t", 1)[2][0]
        d["wrong_type"] = get(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE, T.HIPDNN_TYPE_INT64, "int64_t", 1)[0]
    knobs[text(k, A.HIPDNN_ATTR_KNOB_INFO_TYPE)] = d
    assert lib.hipdnnBackendDestroyDescriptor(k) == 0
out["knobs"] = knobs
out["notes"] = get(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE, "int", 0)[:2]
st, c, v = get(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE, "int", 2)
out["notes_fetch"] = [st, c, list(v)]
out["notes_short"] = get(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE, "int", 1)[0]
out["blobs"] = get(e, A.HIPDNN_ATTR_KNOB_INFO_SERIALIZED_VALUE, T.HIPDNN_TYPE_FLATBUFFER_DATA_STRUCT_EXT, "int64_t", 0)[:2]
out["destroy"] = lib.hipdnnBackendDestroyDescriptor(e)
import gc; gc.collect()
print(json.dumps(out))
""", _env(mini, tmp_path))
    assert r["count"] == [0, 4] and r["short"] == 2 and r["fetch"] == [0, 4]
    k = r["knobs"]
    assert k["TILE"] == {"desc": "tile size", "dtype": INT64, "deprecated": False,
                         "default": 4, "MINIMUM_VALUE": 1, "MAXIMUM_VALUE": 64, "STRIDE": 2}
    assert k["OFFSET"]["dtype"] == DOUBLE and k["ALGO"]["dtype"] == CHAR
    assert k["OFFSET"]["DEFAULT_VALUE"] == 0.5 and k["OFFSET"]["MINIMUM_VALUE"] == -10.0
    assert k["OFFSET"]["MAXIMUM_VALUE"] == 10.0
    assert k["ALGO"]["default"] == "direct" and k["ALGO"]["valid"] == "direct\0tiled"
    assert k["ALGO"]["max32"] == 16 and k["ALGO"]["max64"] == 16 and k["ALGO"]["wrong_type"] == 2
    assert k["OLD"]["deprecated"] is True and k["OLD"]["MINIMUM_VALUE"] is None and k["OLD"]["STRIDE"] is None
    assert r["notes"] == [0, 2] and r["notes_fetch"] == [0, 2, [4, 0]] and r["notes_short"] == 2
    assert r["blobs"] == [0, 4] and r["destroy"] == 0


def test_knob_choice_rules_and_engine_config(mini, tmp_path):
    r = py("import os\n" + KNOBS + ENGINE + """
out = {}
def choice(kid, atype=None, ctype=None, vals=None, fin=True):
    c = desc(D.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
    kb = kid.encode()
    assert lib.hipdnnBackendSetAttribute(c, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.HIPDNN_TYPE_CHAR, len(kb), ffi.new("char[]", kb)) == 0
    if atype is not None:
        arr = ffi.new(f"{ctype}[]", vals)
        assert lib.hipdnnBackendSetAttribute(c, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, atype, len(vals), arr) == 0, err()
    if fin:
        assert lib.hipdnnBackendFinalize(c) == 0, err()
    return c
c = desc(D.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
S = lambda name, atype, n, arr: lib.hipdnnBackendSetAttribute(c, name, atype, n, arr)
out["empty_id"] = S(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.HIPDNN_TYPE_CHAR, 0, ffi.new("char[1]"))
out["long_id"] = S(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.HIPDNN_TYPE_CHAR, 257, ffi.new("char[]", b"k" * 257))
out["float_value"] = S(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_FLOAT, 1, ffi.new("float[1]"))
out["two_ints"] = S(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_INT64, 2, ffi.new("int64_t[2]"))
out["fin_no_id"] = lib.hipdnnBackendFinalize(c)
out["fin_no_value"] = lib.hipdnnBackendFinalize(choice("TILE", fin=False))
tile = choice("TILE", T.HIPDNN_TYPE_INT64, "int64_t", [8])
off = choice("OFFSET", T.HIPDNN_TYPE_DOUBLE, "double", [1.5])
algo = choice("ALGO", T.HIPDNN_TYPE_CHAR, "char", b"tiled")
out["get_int"] = get(tile, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_INT64, "int64_t", 1)[2][0]
out["get_mismatch"] = get(tile, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_DOUBLE, "double", 1)[0]
out["get_int_req2"] = get(tile, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_INT64, "int64_t", 2)[0]
out["get_str"] = text(algo, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)
out["get_id"] = text(off, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
out["get_id_neg"] = get(off, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.HIPDNN_TYPE_CHAR, "char", -1)[0]
e = engine()
cfg = desc(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR)
assert set_attr(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [e]) == 0
K = lambda ds: set_attr(cfg, A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", ds)
out["kc_unfinalized"] = K([tile, choice("X", fin=False)])
out["kc_wrong_kind"] = K([tile, e])
out["kc_duplicate"] = K([tile, choice("TILE", T.HIPDNN_TYPE_INT64, "int64_t", [2])])
out["kc_ok"] = K([tile, off, algo])
out["cfg_fin"] = lib.hipdnnBackendFinalize(cfg)
out["kc_get"] = get(cfg, A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", 0)[:2]
out["ws"] = get_i64(cfg, A.HIPDNN_ATTR_ENGINECFG_WORKSPACE_SIZE)
from hipdnn_cabi.schemas import verifier
from hipdnn_cabi.schemas._generated.EngineConfig import EngineConfig
raw = open(os.environ["MINI_CONFIG_FILE"], "rb").read()
verifier.verify(raw, "EngineConfig")
ec = EngineConfig.GetRootAs(raw, 0)
out["cfg_engine"] = ec.EngineId() == EID
out["cfg_knobs"] = [(ec.Knobs(i).KnobId().decode(), ec.Knobs(i).ValueType()) for i in range(ec.KnobsLength())]
print(json.dumps(out))
""", _env(mini, tmp_path))
    assert r["empty_id"] == 2 and r["long_id"] == 2 and r["float_value"] == 2 and r["two_ints"] == 2
    assert r["fin_no_id"] == 2 and r["fin_no_value"] == 2
    assert r["get_int"] == 8 and r["get_mismatch"] == 2 and r["get_int_req2"] == 2
    assert r["get_str"] == "tiled" and r["get_id"] == "OFFSET" and r["get_id_neg"] == 2
    assert r["kc_unfinalized"] == 4 and r["kc_wrong_kind"] == 2 and r["kc_duplicate"] == 2
    assert r["kc_ok"] == 0 and r["cfg_fin"] == 0 and r["kc_get"] == [0, 3] and r["ws"] == [0, 64]
    assert r["cfg_engine"] is True
    assert r["cfg_knobs"] == [["TILE", 1], ["OFFSET", 2], ["ALGO", 3]]


def test_knob_choice_serialized_value(mini, tmp_path):
    """HIPDNN_ATTR_KNOB_CHOICE_SERIALIZED_VALUE on ENGINECFG (hipDNN's setKnobChoice): an array of
    {ptr, size} KnobSetting FlatBuffers appended to the config's knobs; wrong attribute type or
    count < 1 -> BAD_PARAM, NULL array or element pointer -> BAD_PARAM_NULL_POINTER, size 0 or a
    malformed buffer -> BAD_PARAM; after finalize -> NOT_INITIALIZED.  The knobs reach the plugin's
    GetWorkspaceSize (the max-workspace query) in the EngineConfig it receives."""
    r = py("import os\n" + KNOBS + ENGINE + """
import flatbuffers
from hipdnn_cabi.schemas._generated import KnobSetting
def setting(kid, kind=None, value=None):
    b = flatbuffers.Builder(64)
    v = None
    if kind == INT:
        IntValue.Start(b); IntValue.AddValue(b, value); v = IntValue.End(b)
    elif kind == FLOAT:
        FloatValue.Start(b); FloatValue.AddValue(b, value); v = FloatValue.End(b)
    elif kind == STRING:
        s = b.CreateString(value); StringValue.Start(b); StringValue.AddValue(b, s); v = StringValue.End(b)
    k = b.CreateString(kid)
    KnobSetting.Start(b); KnobSetting.AddKnobId(b, k)
    if v is not None:
        KnobSetting.AddValueType(b, kind); KnobSetting.AddValue(b, v)
    b.Finish(KnobSetting.End(b))
    return bytes(b.Output())
keep = []
def fb(*blobs, null_ptr=False, zero=False):
    arr = ffi.new("hipdnnBackendFlatbufferData_t[]", max(len(blobs), 1))
    for i, raw in enumerate(blobs):
        buf = ffi.new("uint8_t[]", raw); keep.append(buf)
        arr[i].ptr = ffi.NULL if null_ptr else buf
        arr[i].size = 0 if zero else len(raw)
    keep.append(arr)
    return arr
out = {}
e = engine()
cfg = desc(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR)
assert set_attr(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [e]) == 0
SV = A.HIPDNN_ATTR_KNOB_CHOICE_SERIALIZED_VALUE
FB = T.HIPDNN_TYPE_FLATBUFFER_DATA_STRUCT_EXT
S = lambda atype, n, arr: lib.hipdnnBackendSetAttribute(cfg, SV, atype, n, arr)
def serr(atype, n, arr):
    st = S(atype, n, arr)
    return [st, err()]
good = setting("OFFSET", FLOAT, 2.5)
out["wrong_type"] = serr(T.HIPDNN_TYPE_INT64, 1, fb(good))
out["count0"] = serr(FB, 0, fb(good))
out["null_array"] = serr(FB, 1, ffi.NULL)
out["null_ptr"] = serr(FB, 1, fb(good, null_ptr=True))
out["size0"] = serr(FB, 1, fb(good, zero=True))
out["garbage"] = serr(FB, 1, fb(b"\\xff" * 24))
out["no_value"] = serr(FB, 1, fb(setting("TILE")))
out["nan"] = serr(FB, 1, fb(setting("OFFSET", FLOAT, float("nan"))))
tile = desc(D.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
kb = b"TILE"
lib.hipdnnBackendSetAttribute(tile, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.HIPDNN_TYPE_CHAR, 4, ffi.new("char[]", kb))
lib.hipdnnBackendSetAttribute(tile, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_INT64, 1, ffi.new("int64_t[1]", [8]))
assert lib.hipdnnBackendFinalize(tile) == 0
assert set_attr(cfg, A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [tile]) == 0
out["dup_of_descriptor"] = serr(FB, 1, fb(setting("TILE", INT, 2)))
out["ok1"] = serr(FB, 1, fb(good))
out["ok2"] = serr(FB, 3, fb(setting("ALGO", STRING, "tiled"), setting("global.workspace_size_limit", INT, 4096),
                           setting("UNKNOWN_TO_ENGINE", INT, 1)))
out["dup_in_call"] = serr(FB, 2, fb(setting("Z", INT, 1), setting("Z", INT, 2)))
out["fin"] = lib.hipdnnBackendFinalize(cfg)
out["after_finalize"] = serr(FB, 1, fb(setting("LATE", INT, 1)))
out["kc_get"] = get(cfg, A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", 0)[:2]
from hipdnn_cabi.schemas._generated.EngineConfig import EngineConfig
from hipdnn_cabi.plugin_sdk.graph import parse_engine_config
raw = open(os.environ["MINI_CONFIG_FILE"], "rb").read()
knobs = parse_engine_config(raw).knobs
out["sent"] = [[k, v["type"], v["value"]["value"]] for k, v in knobs.items()]
print(json.dumps(out))
""", _env(mini, tmp_path))
    for key in ("wrong_type", "count0", "size0", "garbage", "no_value", "nan", "dup_of_descriptor",
                "dup_in_call"):
        assert r[key][0] == 2 and r[key][1], (key, r[key])           # BAD_PARAM with a message
    assert r["null_array"][0] == 3 and r["null_ptr"][0] == 3, r       # BAD_PARAM_NULL_POINTER
    assert "Invalid attribute type" in r["wrong_type"][1]
    assert "Element count must be > 0" in r["count0"][1]
    assert "Flatbuffer data pointer is null" in r["null_ptr"][1]
    assert "Flatbuffer data size must be > 0" in r["size0"][1]
    assert "Invalid knob setting flatbuffer" in r["garbage"][1]
    assert r["ok1"][0] == 0 and r["ok2"][0] == 0 and r["fin"] == 0
    assert r["after_finalize"][0] == 1 and "Already finalized" in r["after_finalize"][1]
    assert r["kc_get"] == [0, 5]
    assert r["sent"] == [["TILE", "IntValue", 8], ["OFFSET", "FloatValue", 2.5],
                         ["ALGO", "StringValue", "tiled"],
                         ["global.workspace_size_limit", "IntValue", 4096],   # a global knob reaches a .so
                         ["UNKNOWN_TO_ENGINE", "IntValue", 1]]
