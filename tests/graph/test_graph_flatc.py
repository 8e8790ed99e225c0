"""The JSON graph form is flatc's: a graph holding every operation (every attribute set) and
by-value tensors of every TensorValue kind is converted by flatc itself (binary -> JSON and
JSON -> binary) and compared with hipdnnBackendGetSerializedJsonGraph_ext /
hipdnnBackendCreateAndDeserializeJsonGraph_ext.  Skipped without flatc."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from test_graph_operations import OPS, build

from hipdnn_cabi.schemas.dump import to_dict

REPO = Path(__file__).resolve().parents[2]
FBS = REPO / "hipdnn_cabi" / "schemas" / "fbs"
sys.path.insert(0, str(REPO / "tools"))
import gen_flatbuffers_py  # noqa: E402

FLATC = gen_flatbuffers_py.find_flatc()
pytestmark = pytest.mark.skipif(FLATC is None, reason="flatc not installed")


def _flatc(tmp, *args):
    r = subprocess.run([FLATC, "-I", str(FBS), "-o", str(tmp), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def _every_op_graph(c, h):
    L = c.lib
    keep, ops = [], []
    for spec in OPS:
        d, _, tensors = build(c, spec)
        c.ok(c.set_str(d, L.HIPDNN_ATTR_OPERATION_NAME_EXT, spec.table.encode()))
        c.ok(L.hipdnnBackendFinalize(d))
        ops.append(d)
        keep += tensors
    # by-value scalars of every TensorValue kind, as pointwise IN_1
    vals = [(L.HIPDNN_DATA_FLOAT, struct.pack("<f", 1.5)), (L.HIPDNN_DATA_HALF, struct.pack("<e", -0.5)),
            (L.HIPDNN_DATA_BFLOAT16, b"\x80\x3f"), (L.HIPDNN_DATA_FP8_E4M3, b"\x7e"),
            (L.HIPDNN_DATA_INT32, struct.pack("<i", -7)), (L.HIPDNN_DATA_DOUBLE, struct.pack("<d", 2.25)),
            (L.HIPDNN_DATA_INT64, struct.pack("<q", 1 << 40)), (L.HIPDNN_DATA_BOOLEAN, b"\x01")]
    for i, (dt, raw) in enumerate(vals):
        x, s, y = c.tensor(9000 + 3 * i), c.tensor(9001 + 3 * i, (1,), dtype=dt, value=raw), c.tensor(9002 + 3 * i)
        op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [x]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, [s]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [y]))
        c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, L.HIPDNN_POINTWISE_MUL))
        c.ok(L.hipdnnBackendFinalize(op))
        ops.append(op)
        keep += [x, s, y]
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, ops))
    c.ok(c.set_enum(g, L.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE,
                    L.HIPDNN_DATA_BFLOAT16))
    c.ok(c.set_i64(g, L.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, 7))
    c.ok(c.set_bool(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, True))
    c.ok(c.set_str(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"every op"))
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    for d in keep + ops:
        c.destroy(d)
    return g


def test_json_is_flatc_json(c, h, tmp_path):
    g = _every_op_graph(c, h)
    blob, ours = c.serialize(g), c.serialize_json(g)
    assert ours.endswith(b"\x00")
    (tmp_path / "g.bin").write_bytes(blob)
    (tmp_path / "ours.json").write_bytes(ours[:-1])
    # flatc's JSON of our binary == our JSON
    _flatc(tmp_path, "--json", "--strict-json", "--raw-binary", str(FBS / "graph.fbs"), "--",
           str(tmp_path / "g.bin"))
    theirs = (tmp_path / "g.json").read_bytes()
    assert json.loads(theirs) == json.loads(ours[:-1])
    # flatc's JSON deserializes through the C API to the same graph
    st, g2 = c.deserialize_json(theirs)
    c.ok(st)
    assert c.serialize(g2) == blob
    # flatc's binary of our JSON holds the same data (flatc's JSON parser lays the buffer out its
    # own way and leaves default values out), deserializes, and is kept as the graph's serialization
    (tmp_path / "b").mkdir()
    _flatc(tmp_path / "b", "-b", str(FBS / "graph.fbs"), str(tmp_path / "ours.json"))
    fb = (tmp_path / "b" / "ours.bin").read_bytes()
    assert to_dict(fb, "Graph") == to_dict(blob, "Graph")
    st, g3 = c.deserialize(fb)
    c.ok(st)
    assert c.serialize(g3) == fb
    L = c.lib
    assert c.get_count(g3, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR) == \
        (0, len(OPS) + 8)
    for d in (g, g2, g3):
        c.destroy(d)
