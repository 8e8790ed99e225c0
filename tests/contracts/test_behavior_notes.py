"""Behaviour notes (RFC 0010 §9 testing plan; spec §1.7, §5.2)."""
from __future__ import annotations

import pytest

from ct_support import BAD, NOTINIT, NOTSUP, details_bytes, py

QUERY = """
from hipdnn_cabi.backend.plugins.loader import fnv1a64
h = handle()
g = add_graph(h)
out = {}
st, e = engine(g, fnv1a64(ENGINE))
out["fin"] = [st, err() if st else ""]
if st == 0:
    out["notes"] = notes(e)
    n = ffi.new("int64_t*")
    arr = ffi.new("int64_t[8]")
    out["wrong_type"] = lib.hipdnnBackendGetAttribute(e, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, L.HIPDNN_TYPE_INT64, 8, n, arr)
    small = ffi.new("int32_t[1]")
    out["small"] = lib.hipdnnBackendGetAttribute(e, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, L.HIPDNN_TYPE_BEHAVIOR_NOTE, 1, n, small)
    big = ffi.new("int32_t[8]")
    out["big"] = [lib.hipdnnBackendGetAttribute(e, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, L.HIPDNN_TYPE_BEHAVIOR_NOTE, 8, n, big), n[0]]
    v = ffi.new("int32_t[]", [4])
    out["set"] = lib.hipdnnBackendSetAttribute(e, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, L.HIPDNN_TYPE_BEHAVIOR_NOTE, 1, v)
e2 = create(L.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
v = ffi.new("int32_t[]", [4])
out["set_unfinalized"] = lib.hipdnnBackendSetAttribute(e2, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, L.HIPDNN_TYPE_BEHAVIOR_NOTE, 1, v)
n = ffi.new("int64_t*")
out["get_unfinalized"] = lib.hipdnnBackendGetAttribute(e2, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, L.HIPDNN_TYPE_BEHAVIOR_NOTE, 0, n, ffi.NULL)
print(json.dumps(out))
"""


@pytest.mark.parametrize("tag,notes,want", [
    ("two", [4, 0], [4, 0]),            # count + values
    ("one", [1], [1]),
    ("empty", [], []),                  # empty list: count 0
    ("old", None, []),                  # old-shape EngineDetails (no field): empty
    ("big", [7], [7]),                  # >= TYPE_COUNT: passed through (shipped rule)
])
def test_note_queries(ctplug, tag, notes, want):
    d = ctplug("n_" + tag, details=details_bytes("CTPLUG_n_" + tag, notes))
    r = py(f"ENGINE = 'CTPLUG_n_{tag}'\n" + QUERY, d)
    assert r["fin"] == [0, ""]
    st, count, st2, vals = r["notes"]
    assert (st, count, st2, vals) == (0, len(want), 0, want)
    assert r["wrong_type"] == BAD
    if len(want) > 1:
        assert r["small"] == BAD                     # requested < count
    assert r["big"] == [0, len(want)]
    assert r["set"] == NOTINIT                       # finalized descriptor: no sets
    assert r["set_unfinalized"] == NOTSUP            # read-only attribute
    assert r["get_unfinalized"] == NOTINIT


def test_negative_note_rejected_at_finalize(ctplug):
    d = ctplug("n_neg", details=details_bytes("CTPLUG_n_neg", [4, -1]))
    r = py("ENGINE = 'CTPLUG_n_neg'\n" + QUERY, d)
    assert r["fin"][0] == BAD and "invalid behaviour note" in r["fin"][1]


def test_old_and_new_engine_details_bytes():
    """FlatBuffers compatibility: old-shape bytes (engine_id + knobs only) read as no notes; new
    buffers read back exactly (pure Python: the schema-driven reader and the generated class)."""
    from hipdnn_cabi.backend import graph_fb
    from hipdnn_cabi.schemas._generated.EngineDetails import EngineDetails
    from hipdnn_cabi.schemas.verifier import verify
    old = details_bytes("E")
    verify(old, "EngineDetails")
    assert graph_fb.read(old, "EngineDetails").get("behavior_notes", []) == []
    assert EngineDetails.GetRootAs(old, 0).BehaviorNotesLength() == 0
    new = details_bytes("E", [0, 4, 3])
    ed = EngineDetails.GetRootAs(new, 0)
    assert [ed.BehaviorNotes(i) for i in range(ed.BehaviorNotesLength())] == [0, 4, 3]


def test_our_engines_report_true_notes(dirs):
    """C sample and py_sample (SDK) both serialize plans → note 4; the scalar contract engines too."""
    r = py("""
from hipdnn_cabi.backend.plugins.loader import fnv1a64
h = handle()
g = add_graph(h)
out = {}
for name in ("HIPDNN_CABI_C_SAMPLE_ENGINE", "HIPDNN_CABI_PY_SAMPLE_ENGINE"):
    st, e = engine(g, fnv1a64(name)); ok(st)
    out[name] = notes(e)[3]
print(json.dumps(out))
""", dirs["samples"])
    assert r == {"HIPDNN_CABI_C_SAMPLE_ENGINE": [4], "HIPDNN_CABI_PY_SAMPLE_ENGINE": [4]}


def test_sdk_opt_out_reports_no_note():
    from hipdnn_cabi.plugin_sdk import EngineBase
    from hipdnn_cabi.plugin_sdk.core import SUPPORTS_PLAN_SERIALIZATION

    class E(EngineBase):
        name = "X"
        behavior_notes = (3,)

    class NoSer(E):
        supports_plan_serialization = False

    assert E().reported_behavior_notes() == [3, SUPPORTS_PLAN_SERIALIZATION]
    assert NoSer().reported_behavior_notes() == [3]


def test_frontend_notes_and_serialize_embeds_plan(dirs, tmp_path):
    """Frontend get_behavior_notes_for_engine(), and serialize() embedding the plan (note 4)
    → Graph.from_bytes in a fresh process executes at once."""
    r = py(f"""
import numpy as np
from hipdnn_cabi import frontend as fe
from hipdnn_cabi._generated.enums import BehaviorNote, PointwiseMode, DataType
g = fe.Graph()
x = g.tensor(name="x", dim=[1, 4], stride=[4, 1], data_type=DataType.HIPDNN_DATA_FLOAT)
b = g.tensor(name="b", dim=[1, 4], stride=[4, 1], data_type=DataType.HIPDNN_DATA_FLOAT)
y = g.pointwise(x, b, mode=PointwiseMode.HIPDNN_POINTWISE_ADD)
y.set_output(True).set_data_type(DataType.HIPDNN_DATA_FLOAT)
g.build()
out = {{"notes": [int(n) for n in g.get_behavior_notes_for_engine(g.engine_id)],
        "enum": isinstance(g.get_behavior_notes_for_engine(g.engine_id)[0], BehaviorNote)}}
blob = g.serialize()
out["contents"] = contents(blob)
open({str(tmp_path / 'fe.bin')!r}, "wb").write(blob)
X = np.array([[1, 2, 3, 4]], np.float32); B = np.array([[5, 6, 7, 8]], np.float32)
Y = np.zeros((1, 4), np.float32)
g.execute({{x: X, b: B, y: Y}})
out["y"] = Y.tolist()
out["uids"] = [x.uid, b.uid, y.uid]
print(json.dumps(out))
""", dirs["c_sample"])
    assert r["notes"] == [4] and r["enum"]
    assert r["contents"] == [0, 3]
    r2 = py(f"""
import numpy as np
from hipdnn_cabi import frontend as fe
g = fe.Graph.from_bytes(open({str(tmp_path / 'fe.bin')!r}, "rb").read())
X = np.array([[1, 2, 3, 4]], np.float32); B = np.array([[5, 6, 7, 8]], np.float32)
Y = np.zeros((1, 4), np.float32)
u = {r["uids"]!r}
g.execute({{u[0]: X, u[1]: B, u[2]: Y}})
print(json.dumps({{"y": Y.tolist()}}))
""", dirs["c_sample"])
    assert r2["y"] == r["y"] == [[6.0, 8.0, 10.0, 12.0]]


def test_cpu_reference_reports_true_notes(ct_base):
    """The CPU reference engine (SDK): external library (numpy/BLAS) and plan serialization."""
    import os
    from ct_support import ROOT, plugin_dir
    src = os.path.join(ROOT, "engine_plugins", "cpu_reference")
    if not os.path.exists(os.path.join(src, "engine.py")):
        pytest.skip("engine_plugins/cpu_reference has not landed")
    r = py("""
from hipdnn_cabi.backend.plugins.loader import fnv1a64
h = handle()
g = add_graph(h)
st, e = engine(g, fnv1a64("HIPDNN_CABI_CPU_REFERENCE_ENGINE")); ok(st)
print(json.dumps(notes(e)))
""", plugin_dir(ct_base, "d_cpu_reference_notes", [src]))
    assert r == [0, 2, 0, [3, 4]]


def test_frontend_notes_edge_cases_and_serialize_without_note_4(ctplug):
    """RFC 0010 §9 frontend/Python plan: BehaviorNote is exposed; the query before the graph is
    built fails; an engine reporting no notes gives []; an unknown engine id fails; and
    serialize() keeps the plan out when the engine does not report note 4, even though this
    engine exports the serialization hooks (note 4 decides, not the symbols)."""
    d = ctplug("fe_none", details=details_bytes("CTPLUG_fe_none", []))
    r = py("""
from hipdnn_cabi import frontend as fe
from hipdnn_cabi import errors
from hipdnn_cabi._generated.enums import PointwiseMode, DataType
from hipdnn_cabi.backend.plugins.loader import fnv1a64
out = {"enum": fe.BehaviorNote.HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION.value}
g = fe.Graph()
x = g.tensor(name="x", dim=[1, 4], stride=[4, 1], data_type=DataType.HIPDNN_DATA_FLOAT)
b = g.tensor(name="b", dim=[1, 4], stride=[4, 1], data_type=DataType.HIPDNN_DATA_FLOAT)
y = g.pointwise(x, b, mode=PointwiseMode.HIPDNN_POINTWISE_ADD)
y.set_output(True).set_data_type(DataType.HIPDNN_DATA_FLOAT)
eid = fnv1a64("CTPLUG_fe_none")
try:
    g.get_behavior_notes_for_engine(eid)
    out["before"] = "no error"
except errors.HipdnnError as e:
    out["before"] = [type(e).__name__, str(e)]
g.build()
out["engine"] = g.engine_id == eid
out["notes"] = g.get_behavior_notes_for_engine(eid)
try:
    g.get_behavior_notes_for_engine(12345)
    out["unknown"] = "no error"
except errors.HipdnnError as e:
    out["unknown"] = [type(e).__name__, str(e)]
blob = g.serialize()
out["contents"] = contents(blob)
print(json.dumps(out))
""", d)
    assert r["enum"] == 4
    assert r["before"][0] == "BadParamError" and "build_operation_graph" in r["before"][1]
    assert r["engine"] and r["notes"] == []
    assert r["unknown"] != "no error" and "12345" in r["unknown"][1], r["unknown"]
    assert r["contents"] == [0, 1]          # GRAPH only: no plan embedded without note 4


@pytest.mark.parametrize("first,second", [
    ("HipdnnBackendBehaviorNote.h", "hipdnn_plugin_sdk/BehaviorNote.h"),
    ("hipdnn_plugin_sdk/BehaviorNote.h", "HipdnnBackendBehaviorNote.h"),
    ("hipdnn_backend.h", "hipdnn_plugin_sdk/EnginePluginApi.h")])
def test_headers_share_the_include_guard(tmp_path, first, second):
    """The backend and plugin-SDK headers define hipdnnBackendBehaviorNote_t under the shared
    HIPDNN_BEHAVIOR_NOTE_TYPES_DEFINED guard: one translation unit includes both (either order)
    with -Werror and sees the RFC 0010 values; PluginApiDataTypes.h does not pull them in."""
    import subprocess
    from ct_support import INCLUDE
    src = tmp_path / "both.c"
    src.write_text(f"""
#include "{first}"
#include "{second}"
#include "hipdnn_plugin_sdk/PluginApiDataTypes.h"
_Static_assert(HIPDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION == 0, "0");
_Static_assert(HIPDNN_BEHAVIOR_NOTE_REQUIRES_LAYOUT_TRANSFORM == 1, "1");
_Static_assert(HIPDNN_BEHAVIOR_NOTE_SUPPORTS_GRAPH_CAPTURE == 2, "2");
_Static_assert(HIPDNN_BEHAVIOR_NOTE_EXTERNAL_LIBRARY_DEPENDENCY == 3, "3");
_Static_assert(HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION == 4, "4");
_Static_assert(HIPDNN_BEHAVIOR_NOTE_TYPE_COUNT == 5, "5");
_Static_assert(sizeof(hipdnnBackendBehaviorNote_t) == 4, "int32");
int main(void) {{ hipdnnBackendBehaviorNote_t n = HIPDNN_BEHAVIOR_NOTE_TYPE_COUNT; return (int)n - 5; }}
""")
    alone = tmp_path / "alone.c"
    alone.write_text('#include "hipdnn_plugin_sdk/PluginApiDataTypes.h"\n'
                     "#ifdef HIPDNN_BEHAVIOR_NOTE_TYPES_DEFINED\n#error transitive\n#endif\n"
                     "int main(void) { return 0; }\n")
    for f in (src, alone):
        r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                            "-DHIPDNN_CABI_NO_HIP_HEADERS", f"-I{INCLUDE}", str(f)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
