"""Runtime pass-by-value (RFC 0016 §9 matrix, spec §3.6, §5.3) on the scalar contract plugins
(tests/contracts/pyplugins: SDK engines reporting 1.2.0 / 1.0.0) and, when it loads, the CPU
reference engine."""
from __future__ import annotations

import os
import struct

import pytest

from ct_support import PLUGIN, ROOT, plugin_dir, py

X = [1.0, 2.0, 3.0, 4.0]
A, B = 2.0, 0.5          # baked values


def expect(alpha, beta):
    return [x * alpha + beta for x in X]


MATRIX = """
out = {}
h = handle()
for sa in (CONST, DEFAULT, RUNTIME):
    for sb in (CONST, DEFAULT, RUNTIME):
        st, g = scale_shift_graph(h, sa, sb, alpha=2.0, beta=0.5); ok(st)
        st, ids = engine_ids(g); ok(st)
        r = {"ids": len(ids)}
        for i, eid in enumerate(ids):
            st, p = plan_for_engine(g, eid); ok(st)
            r[f"full{i}"] = run_scale_shift(h, p, X, {10: 3.0, 11: -1.0})
            r[f"none{i}"] = run_scale_shift(h, p, X, {})
            r[f"none_msg{i}"] = err()
        out[sa + "/" + sb] = r
print(json.dumps(out))
"""


def test_state_matrix_on_a_1_2_0_provider(dirs):
    """Every (alpha, beta) state pair: user-supplied values are read from the host pointer,
    baked values (constant or runtime default) win over a variant-pack entry (override inert),
    and a missing user-supplied scalar is INVALID_VALUE from the provider (→ PLUGIN_ERROR)."""
    r = py(f"X = {X!r}\n" + MATRIX, dirs["v12"])
    for key, v in r.items():
        sa, sb = key.split("/")
        assert v["ids"] == 2, key   # both engines (re-derive and plan-owned payloads)
        alpha = 3.0 if sa == "runtime" else A
        beta = -1.0 if sb == "runtime" else B
        for i in range(2):
            assert v[f"full{i}"] == [0, expect(alpha, beta)], (key, v)
            if "runtime" in (sa, sb):
                assert v[f"none{i}"][0] == PLUGIN, key
                assert "HIPDNN_PLUGIN_STATUS_INVALID_VALUE" in v[f"none_msg{i}"]
                assert "no host value for runtime pass-by-value tensor uid" in v[f"none_msg{i}"]
            else:
                assert v[f"none{i}"] == [0, expect(A, B)], key


def test_version_filtering_with_a_1_0_0_plugin(dirs):
    """A 1.0.0 plugin is never asked about a graph with a runtime tensor (either runtime state),
    yet still serves compile-time-constant graphs; the graph stamps 1.2.0 only when needed."""
    r = py("""
sys.path.insert(0, os.path.join(HERE, "pyplugins"))
import _scalar_common as sc
from hipdnn_cabi.backend import registry, graph_fb
out = {}
h = handle()
for sa, sb in ((CONST, CONST), (RUNTIME, CONST), (DEFAULT, CONST), (CONST, RUNTIME)):
    del sc.ASKED[:]
    st, g = scale_shift_graph(h, sa, sb); ok(st)
    st, ids = engine_ids(g)
    gd = registry.objects[addr(g)]
    stamp = graph_fb.read(gd.serialized(), "Graph")["min_required_engine_api_version"]
    out[sa + "/" + sb] = {"st": st, "ids": len(ids), "asked": list(sc.ASKED),
                          "stamp": [stamp["major"], stamp["minor"], stamp["patch"]]}
    if ids:
        st, p = plan_for_engine(g, ids[0]); ok(st)
        out[sa + "/" + sb]["y"] = run_scale_shift(h, p, X, {})
print(json.dumps(out))
""".replace("X, {}", f"{X!r}, {{}}"), dirs["v10"])
    c = r["const/const"]
    assert c["ids"] == 2 and c["asked"] and c["stamp"] == [1, 0, 0]
    assert c["y"] == [0, expect(A, B)]
    for key in ("runtime/const", "default/const", "const/runtime"):
        v = r[key]
        assert v["ids"] == 0, key
        assert v["asked"] == [], key            # filtered before the plugin was asked
        assert v["stamp"] == [1, 2, 0], key


def test_user_supplied_value_reaches_the_provider_unchanged(dirs):
    """Sentinel regression (alpha = MUL scalar, beta = ADD scalar): an obvious sentinel in the
    variant pack must show up in the result — catches a provider that bakes or ignores it."""
    r = py(f"""
out = {{}}
h = handle()
st, g = scale_shift_graph(h, RUNTIME, RUNTIME); ok(st)
st, ids = engine_ids(g); ok(st)
for eid in ids:
    st, p = plan_for_engine(g, eid); ok(st)
    out[str(eid)] = [run_scale_shift(h, p, {X!r}, {{10: 1234.5, 11: 0.0}}),
                     run_scale_shift(h, p, {X!r}, {{10: 1.0, 11: -777.25}}),
                     run_scale_shift(h, p, {X!r}, {{10: -0.0, 11: 1e6}})]
print(json.dumps(out))
""", dirs["v12"])
    for v in r.values():
        assert v[0] == [0, [x * 1234.5 for x in X]]
        assert v[1] == [0, [x - 777.25 for x in X]]
        assert v[2] == [0, [1e6] * len(X)]


SER = """
import os
from hipdnn_cabi.backend.plugins.loader import fnv1a64
h = handle()
st, g = scale_shift_graph(h, SA, SB); ok(st)
out = {}
for name in ("CT_SCALAR_ENGINE", "CT_SCALAR_OWN_ENGINE"):
    st, p = plan_for_engine(g, fnv1a64(name)); ok(st)
    st, data = serialize_plan(p); ok(st)
    open(os.path.join(DIR, name + ".bin"), "wb").write(data)
    out[name] = run_scale_shift(h, p, X, {10: 3.0, 11: -1.0})
print(json.dumps(out))
"""

RESTORE = """
import os
h = handle()
out = {}
for name in ("CT_SCALAR_ENGINE", "CT_SCALAR_OWN_ENGINE"):
    st, p = deserialize_plan(h, open(os.path.join(DIR, name + ".bin"), "rb").read())
    out[name] = {"deser": [st, err() if st else ""]}
    if st == 0:
        out[name]["full"] = run_scale_shift(h, p, X, {10: 3.0, 11: -1.0})
        out[name]["none"] = run_scale_shift(h, p, X, {})
        out[name]["none_msg"] = err()
print(json.dumps(out))
"""


@pytest.mark.parametrize("sa,sb", [("runtime", "runtime"), ("const", "runtime"),
                                   ("default", "runtime"), ("const", "const")])
def test_serialized_plan_keeps_runtime_uids(dirs, tmp_path, sa, sb):
    """Serialize → fresh process → deserialize → execute: the host scalars are still read as
    host scalars (the runtime uid set travels in the SDK payload), baked values survive, and a
    missing user-supplied scalar is still INVALID_VALUE — for both payload kinds."""
    head = f"SA, SB = {sa!r}, {sb!r}\nDIR = {str(tmp_path)!r}\nX = {X!r}\n"
    a = py(head + SER, dirs["v12"])
    b = py(head + RESTORE, dirs["v12"])
    alpha = 3.0 if sa == "runtime" else A
    beta = -1.0 if sb == "runtime" else B
    for name in ("CT_SCALAR_ENGINE", "CT_SCALAR_OWN_ENGINE"):
        assert a[name] == [0, expect(alpha, beta)]
        v = b[name]
        assert v["deser"] == [0, ""], v
        assert v["full"] == a[name], (name, v)
        if "runtime" in (sa, sb):
            assert v["none"][0] == PLUGIN and "INVALID_VALUE" in v["none_msg"]
        else:
            assert v["none"] == [0, expect(A, B)]


def test_downgraded_provider_rejects_newer_payload(dirs, tmp_path):
    """A plan with runtime scalars, serialized on the 1.2.0 provider, is rejected at deserialize by
    the same engines in a provider reporting 1.0.0 (before anything is built); a compile-time-only
    plan still restores there."""
    for sa, sb, sub in (("runtime", "const", "rt"), ("const", "const", "cc")):
        d = tmp_path / sub
        d.mkdir()
        head = f"SA, SB = {sa!r}, {sb!r}\nDIR = {str(d)!r}\nX = {X!r}\n"
        py(head + SER, dirs["v12"])
        b = py(head + RESTORE, dirs["v10"])
        for name in ("CT_SCALAR_ENGINE", "CT_SCALAR_OWN_ENGINE"):
            if sub == "rt":
                st, msg = b[name]["deser"]
                assert st == PLUGIN and "HIPDNN_PLUGIN_STATUS_INVALID_VALUE" in msg, msg
                assert "need plugin API >= 1.2.0" in msg
            else:
                assert b[name]["deser"] == [0, ""] and b[name]["full"] == [0, expect(A, B)]


def test_tensor_attributes_1307_1308_and_graph_round_trip(dirs):
    r = py("""
from hipdnn_cabi.backend import registry, graph_fb
out = {}
for state in (CONST, DEFAULT, RUNTIME):
    t = scalar(10, state, 2.0)
    out[state] = [get_bool(t, L.HIPDNN_ATTR_TENSOR_IS_BY_VALUE),
                  get_bool(t, L.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT)]
h = handle()
st, g = scale_shift_graph(h, DEFAULT, RUNTIME); ok(st)
st, blob = two_call(lib.hipdnnBackendGetSerializedBinaryGraph_ext, g); ok(st)
d = graph_fb.read(blob, "Graph")
out["fb"] = {str(t["uid"]): [bool(t.get("is_runtime_pass_by_value", False)), t.get("value") is not None]
             for t in d["tensors"]}
gp = ffi.new("hipdnnBackendDescriptor_t*")
ok(lib.hipdnnBackendCreateAndDeserializeGraph_ext(gp, ffi.new("uint8_t[]", blob), len(blob)))
st, blob2 = two_call(lib.hipdnnBackendGetSerializedBinaryGraph_ext, gp[0]); ok(st)
out["same"] = graph_fb.read(blob2, "Graph")["tensors"] == d["tensors"]
d["min_required_engine_api_version"] = {"major": 1, "minor": 4, "patch": 0}
newer = graph_fb.build("Graph", d)
out["newer"] = lib.hipdnnBackendCreateAndDeserializeGraph_ext(gp, ffi.new("uint8_t[]", newer), len(newer))
d["tensors"] = d["tensors"] + d["tensors"][:1]          # would be BAD_PARAM once tensors are read
newer_dup = graph_fb.build("Graph", d)
out["newer_dup"] = [lib.hipdnnBackendCreateAndDeserializeGraph_ext(gp, ffi.new("uint8_t[]", newer_dup), len(newer_dup)), err()]
d["min_required_engine_api_version"] = {"major": 1, "minor": 3, "patch": 0}
same_dup = graph_fb.build("Graph", d)
out["same_dup"] = lib.hipdnnBackendCreateAndDeserializeGraph_ext(gp, ffi.new("uint8_t[]", same_dup), len(same_dup))
print(json.dumps(out))
""", dirs["v12"])
    assert r["const"] == [[0, True], [0, False]]
    assert r["default"] == [[0, True], [0, True]]
    assert r["runtime"] == [[0, False], [0, True]]    # 1307 = value present, not the umbrella
    assert r["fb"]["10"] == [True, True] and r["fb"]["11"] == [True, False]
    assert r["fb"]["1"] == [False, False]
    assert r["same"] is True
    assert r["newer"] == 8     # stamped above what this backend reads → NOT_SUPPORTED
    # the stamp is checked before any tensor is read: a duplicate uid is not even seen
    assert r["newer_dup"][0] == 8 and "requires engine API version 1.4.0" in r["newer_dup"][1]
    assert r["same_dup"] == 2  # the same bytes at a readable stamp: BAD_PARAM (duplicate uid)


def test_sdk_payload_rejections():
    """The SDK payload checks, each before anything is built (pure Python)."""
    import zlib
    from hipdnn_cabi.plugin_sdk import serialization as ser
    from hipdnn_cabi.plugin_sdk.errors import BAD_PARAM, INVALID_VALUE, PluginError
    table = ser.ScalarTable([ser.Scalar(10, 1, True, False, None), ser.Scalar(11, 1, False, True, 0.5)])
    good = ser.pack(ser.KIND_REDERIVE, 7, table, b"graph-bytes", b"cfg")
    p = ser.unpack(good, known_engine_ids={7}, api_version=(1, 2, 0))
    assert p.scalars.runtime_uids == {10} and p.scalars.get(11).value == 0.5 and p.blob == b"graph-bytes"

    def status(data, **kw):
        kw.setdefault("known_engine_ids", {7})
        kw.setdefault("api_version", (1, 2, 0))
        try:
            ser.unpack(data, **kw)
        except PluginError as e:
            return e.status
        return 0

    def patch(off, fmt, v):
        b = bytearray(good)
        struct.pack_into(fmt, b, off, v)
        return bytes(b)

    def recrc(b):
        b = bytearray(b)
        struct.pack_into("<I", b, 24, zlib.crc32(bytes(b[ser.HEADER_SIZE:])) & 0xFFFFFFFF)
        return bytes(b)
    assert status(b"") == BAD_PARAM
    assert status(good[:5]) == BAD_PARAM                       # truncated header
    assert status(good[:30]) == BAD_PARAM
    assert status(good[:-1]) == BAD_PARAM                      # truncated body
    assert status(b"XXXXXXXX" + good[8:]) == INVALID_VALUE     # unknown magic
    assert status(patch(8, "<H", 2)) == INVALID_VALUE          # newer major
    assert status(patch(8, "<H", 0)) == INVALID_VALUE          # older major
    assert status(patch(12, "<I", 9)) == INVALID_VALUE         # unknown kind
    assert status(patch(20, "<I", 3)) == INVALID_VALUE         # unknown flag bit
    assert status(patch(20, "<I", 0)) == BAD_PARAM             # flag disagrees with the table
    assert status(good[:-3] + b"zzz") == BAD_PARAM             # checksum
    assert status(good + b"x") == BAD_PARAM                    # trailing bytes (same minor)
    assert status(recrc(good + b"x")) == BAD_PARAM
    assert status(good, known_engine_ids={8}) == INVALID_VALUE  # another engine's payload
    assert status(good, api_version=(1, 1, 0)) == INVALID_VALUE  # runtime PBV on < 1.2.0
    newer_minor = bytearray(good + b"future")
    struct.pack_into("<H", newer_minor, 10, 1)
    assert status(bytes(newer_minor)) == 0                     # newer minor: extra bytes ignored


def _cpu_reference_dir(base):
    src = os.path.join(ROOT, "engine_plugins", "cpu_reference")
    if not os.path.exists(os.path.join(src, "engine.py")):
        pytest.skip("engine_plugins/cpu_reference has not landed")
    return plugin_dir(base, "d_cpu_reference", [src])


def test_cpu_reference_runtime_scalars_and_serialization(tmp_path):
    """When the CPU reference engine loads: user-supplied scalars and a compile-time constant
    through a plan that survives serialize → fresh process → deserialize."""
    d = _cpu_reference_dir(tmp_path)
    head = f"DIR = {str(tmp_path)!r}\nX = {X!r}\n"
    a = py(head + """
from hipdnn_cabi.backend.plugins.loader import fnv1a64
h = handle()
out = {}
for sa, sb in ((RUNTIME, RUNTIME), (CONST, RUNTIME), (CONST, CONST)):
    st, g = scale_shift_graph(h, sa, sb); ok(st)
    st, ids = engine_ids(g)
    if st or not ids:
        out[sa + sb] = None
        continue
    st, p = plan_for_engine(g, ids[0]); ok(st)
    r = {"y": run_scale_shift(h, p, X, {10: 3.0, 11: -1.0}), "none": run_scale_shift(h, p, X, {})[0]}
    st, data = serialize_plan(p)
    r["ser"] = st
    if st == 0:
        open(DIR + "/" + sa + sb + ".bin", "wb").write(data)
    out[sa + sb] = r
print(json.dumps(out))
""", d)
    if all(v is None for v in a.values()):
        pytest.skip("the CPU reference engine does not take these graphs")
    b = py(head + """
import os
h = handle()
out = {}
for k in ("runtimeruntime", "construntime", "constconst"):
    f = DIR + "/" + k + ".bin"
    if not os.path.exists(f):
        continue
    st, p = deserialize_plan(h, open(f, "rb").read())
    out[k] = [st, run_scale_shift(h, p, X, {10: 3.0, 11: -1.0}) if st == 0 else err()]
print(json.dumps(out))
""", d)
    for key, alpha, beta in (("runtimeruntime", 3.0, -1.0), ("construntime", A, -1.0),
                             ("constconst", A, B)):
        v = a.get(key)
        if v is None:
            continue
        assert v["y"] == [0, expect(alpha, beta)], (key, v)
        if "runtime" in key:
            assert v["none"] == PLUGIN
        if v["ser"] == 0:
            assert b[key] == [0, [0, expect(alpha, beta)]], (key, b[key])


def test_legacy_graph_bytes_are_compile_time_constants(dirs):
    """RFC 0016 §9 "legacy round-trip" / "serialization parity": graph bytes from before the
    feature (scalar tensors with a baked value, no is_runtime_pass_by_value field, no version
    stamp) deserialize as compile-time constants, impose no version floor, are served by the
    1.0.0 plugin unchanged, and a variant-pack entry for a baked uid is inert."""
    r = py(f"""
sys.path.insert(0, os.path.join(HERE, "pyplugins"))
import _scalar_common as sc
from hipdnn_cabi.backend import graph_fb
h = handle()
st, g = scale_shift_graph(h, CONST, CONST); ok(st)
st, blob = two_call(lib.hipdnnBackendGetSerializedBinaryGraph_ext, g); ok(st)
d = graph_fb.read(blob, "Graph")
d.pop("min_required_engine_api_version", None)
for t in d["tensors"]:
    t.pop("is_runtime_pass_by_value", None)
legacy = graph_fb.build("Graph", d)
out = {{"legacy_fields": [("min_required_engine_api_version" in graph_fb.read(legacy, "Graph")),
                          any("is_runtime_pass_by_value" in t for t in graph_fb.read(legacy, "Graph")["tensors"])]}}
gp = ffi.new("hipdnnBackendDescriptor_t*")
ok(lib.hipdnnBackendCreateAndDeserializeGraph_ext(gp, ffi.new("uint8_t[]", legacy), len(legacy)))
g2 = gp[0]
ok(set_raw(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, L.HIPDNN_TYPE_HANDLE, "hipdnnHandle_t", [h]))
ok(lib.hipdnnBackendFinalize(g2))
st, back = two_call(lib.hipdnnBackendGetSerializedBinaryGraph_ext, g2); ok(st)
db = graph_fb.read(back, "Graph")
out["flags"] = {{str(t["uid"]): [bool(t.get("is_runtime_pass_by_value", False)), t.get("value") is not None]
                 for t in db["tensors"]}}
v = db.get("min_required_engine_api_version")
out["stamp"] = [v["major"], v["minor"], v["patch"]] if v else None
del sc.ASKED[:]
st, ids = engine_ids(g2); ok(st)
out["asked"] = len(sc.ASKED)
out["ids"] = len(ids)
st, p = plan_for_engine(g2, ids[0]); ok(st)
out["y"] = run_scale_shift(h, p, {X!r}, {{}})
out["inert"] = run_scale_shift(h, p, {X!r}, {{10: 1234.5, 11: -777.25}})
print(json.dumps(out))
""", dirs["v10"])
    assert r["legacy_fields"] == [False, False]
    assert r["flags"]["10"] == [False, True] and r["flags"]["11"] == [False, True]
    assert r["stamp"] in (None, [1, 0, 0])
    assert r["asked"] and r["ids"] == 2          # the 1.0.0 plugin was asked and serves it
    assert r["y"] == [0, expect(A, B)]
    assert r["inert"] == [0, expect(A, B)]       # compile-time constants: pack entries inert


def test_frontend_post_build_setters_do_not_alter_the_plan(dirs):
    """RFC 0016 §9 "post-build setter warning": after build, set_value / set_as_runtime_parameter
    warn and the compiled plan keeps the values it was built with; a RUNTIME_PARAM scalar
    (runtime with default) keeps its baked default through the frontend even when the caller
    binds a value for it (override inert), and the frontend getters describe the three states."""
    r = py(f"""
import warnings
import numpy as np
from hipdnn_cabi import frontend as fe
from hipdnn_cabi._generated.enums import DataType
F32 = DataType.HIPDNN_DATA_FLOAT
g = fe.Graph(io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
x = g.tensor(name="x", dim=[1, 4], stride=[4, 1], data_type=F32)
a = g.tensor({A!r}, fe.ScalarType.COMPILE_TIME_CONST, name="a")
b = g.tensor({B!r}, fe.ScalarType.RUNTIME_PARAM, name="b")
c = g.tensor(name="c", dim=[1], data_type=F32).set_as_runtime_parameter()
z = g.add(g.mul(g.mul(x, a), c), b).set_output(True).set_data_type(F32)
out = {{"getters": [[t.get_compile_time_constant(), t.get_pass_by_value(), t.get_is_pass_by_value()]
                    for t in (a, b, c)]}}
g.build()
X = np.array([[1, 2, 3, 4]], np.float32)
Y = np.zeros((1, 4), np.float32)
g.execute({{x: X, c: 1.0, z: Y}})
out["before"] = Y.tolist()
g.execute({{x: X, c: 1.0, b: 1234.5, z: Y}})
out["inert"] = Y.tolist()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    a.set_value(100.0)
    b.set_as_runtime_parameter()
    out["warnings"] = [str(m.message) for m in w]
# the frontend's own completeness check now treats b as user-supplied (it reads the live
# tensor state), so bind a value: the compiled plan still bakes B and ignores it
g.execute({{x: X, c: 1.0, b: 1234.5, z: Y}})
out["after"] = Y.tolist()
print(json.dumps(out))
""", dirs["v12"])
    assert r["getters"] == [[A, None, True], [None, B, True], [None, None, True]]
    want = [[x * A + B for x in X]]
    assert r["before"] == want
    assert r["inert"] == want
    assert len(r["warnings"]) == 2 and all("after the graph was built" in m for m in r["warnings"])
    assert r["after"] == want
