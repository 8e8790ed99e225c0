"""OPERATIONGRAPH descriptor and graph (de)serialization through the C API."""
from __future__ import annotations

import json
import struct

import flatbuffers
import pytest

from gutil import conv_relu_graph

from hipdnn_cabi.schemas.dump import to_dict


def test_graph_attributes_and_getters_before_finalize(c, h):
    L = c.lib
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    # getters work before finalize
    st, n = c.get_count(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    assert (st, n) == (0, 0)
    assert c.get_i64(g, L.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT) is None
    assert c.get_bool(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT) is False
    c.ok(c.set_i64(g, L.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, 42))
    assert c.get_i64(g, L.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT) == 42
    c.ok(c.set_bool(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, True))
    assert c.get_bool(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT) is True
    c.ok(c.set_str(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"gname"))
    assert c.get_str(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT) == b"gname"
    for name in (L.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT,
                 L.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT,
                 L.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT):
        c.ok(c.set_enum(g, name, L.HIPDNN_TYPE_DATA_TYPE, L.HIPDNN_DATA_BFLOAT16))
        assert c.get_enum(g, name, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_BFLOAT16
    # HANDLE is not gettable
    st, _ = c.get_count(g, L.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, L.HIPDNN_TYPE_HANDLE)
    assert st == L.HIPDNN_STATUS_NOT_SUPPORTED
    # finalize: handle required, then >= 1 op
    assert L.hipdnnBackendFinalize(g) == L.HIPDNN_STATUS_BAD_PARAM
    c.ok(c.set_handle(g, h))
    assert L.hipdnnBackendFinalize(g) == L.HIPDNN_STATUS_BAD_PARAM
    assert "no operations" in c.err()
    c.destroy(g)


def test_handle_and_ops_validation(c, h):
    L = c.lib
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    assert c.set_handle(g, c.ffi.NULL) == L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
    assert c.set_handle(g, c.ffi.cast("hipdnnHandle_t", 0x1234560)) == L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
    assert c.set_raw(g, L.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, L.HIPDNN_TYPE_INT64, 1,
                     c.ffi.new("int64_t[]", [1])) == L.HIPDNN_STATUS_BAD_PARAM
    g0 = conv_relu_graph(c, h)
    ops = c.get_descs(g0, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
    assert len(ops) == 3
    t = c.tensor(77)
    unfin = c.create(L.HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR)
    assert c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [ops[0], c.ffi.NULL]) == \
        L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
    assert c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [ops[0], unfin]) == \
        L.HIPDNN_STATUS_BAD_PARAM_NOT_FINALIZED
    assert c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [ops[0], t]) == L.HIPDNN_STATUS_NOT_SUPPORTED
    assert "IGraphOperation" in c.err()
    # all-or-nothing: nothing was appended
    st, n = c.get_count(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    assert n == 0
    # repeated sets append
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, ops[:1]))
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, ops[1:]))
    st, n = c.get_count(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    assert n == 3
    # req < count with an array: BAD
    st, _, _ = c.get_raw(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 2,
                         "hipdnnBackendDescriptor_t")
    assert st == L.HIPDNN_STATUS_BAD_PARAM
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    c.ok(L.hipdnnBackendFinalize(g))  # re-finalize allowed
    # set after finalize
    assert c.set_str(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"x") == L.HIPDNN_STATUS_NOT_INITIALIZED
    for d in (g, g0, t, unfin, *ops):
        c.destroy(d)


def test_same_uid_on_two_tensor_objects(c, h):
    L = c.lib
    a, b, y1, y2 = c.tensor(1), c.tensor(2), c.tensor(3), c.tensor(3)
    ops = []
    for y in (y1, y2):
        op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [a]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [y]))
        c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, L.HIPDNN_POINTWISE_ABS))
        c.ok(L.hipdnnBackendFinalize(op))
        ops.append(op)
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, ops))
    c.ok(c.set_handle(g, h))
    assert L.hipdnnBackendFinalize(g) == L.HIPDNN_STATUS_BAD_PARAM
    assert "uid 3" in c.err()
    for d in (a, b, y1, y2, g, *ops):
        c.destroy(d)


def test_binary_round_trip_identical(c, h):
    L = c.lib
    g = conv_relu_graph(c, h)
    blob = c.serialize(g)
    st, g2 = c.deserialize(blob)
    c.ok(st)
    assert c.serialize(g2) == blob
    # the deserialized graph is unfinalized but answers getters; setting HANDLE + finalize works
    assert c.get_str(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT) == b"conv_bias_relu"
    assert c.get_enum(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_HALF
    st, n = c.get_count(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE)
    assert (st, n) == (0, 0)
    c.ok(c.set_handle(g2, h))
    c.ok(L.hipdnnBackendFinalize(g2))
    assert c.serialize(g2) == blob  # HANDLE does not invalidate the id
    ops = c.get_descs(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
    x = c.get_desc(ops[0], L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X)
    assert c.get_str(x, L.HIPDNN_ATTR_TENSOR_NAME_EXT) == b"x"
    assert c.get_i64v(x, L.HIPDNN_ATTR_TENSOR_DIMENSIONS) == [1, 4, 8, 8]
    assert c.get_i64v(x, L.HIPDNN_ATTR_TENSOR_STRIDES) == [256, 64, 8, 1]
    assert c.get_float(ops[2], L.HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP) == 0.0
    st, n = c.get_count(ops[2], L.HIPDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, L.HIPDNN_TYPE_FLOAT)
    assert (st, n) == (0, 0)
    # generated readers (flatc's classes) agree with our writer
    d = to_dict(blob, "Graph")
    assert [t["uid"] for t in d["tensors"]] == [1, 2, 3, 4, 5, 6]
    assert [n["attributes"]["type"] for n in d["nodes"]] == [
        "ConvolutionFwdAttributes", "PointwiseAttributes", "PointwiseAttributes"]
    assert d["min_required_engine_api_version"] == {"major": 1, "minor": 0, "patch": 0}
    assert len(d["id"]["bytes"]) == 16 and (d["id"]["bytes"][6] >> 4) == 4  # UUID v4
    for o in (g, g2, x, *ops):
        c.destroy(o)


def test_set_invalidates_uuid(c, h):
    L = c.lib
    g = conv_relu_graph(c, h)
    st, g2 = c.deserialize(c.serialize(g))
    uuid1 = to_dict(c.serialize(g2), "Graph")["id"]
    c.ok(c.set_str(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"renamed"))
    assert to_dict(c.serialize(g2), "Graph")["id"] is None
    c.ok(c.set_handle(g2, h))
    c.ok(L.hipdnnBackendFinalize(g2))
    uuid2 = to_dict(c.serialize(g2), "Graph")["id"]
    assert uuid2 is not None and uuid2 != uuid1
    c.destroy(g)
    c.destroy(g2)


def test_two_call_and_misuse(c, h):
    L, ffi = c.lib, c.ffi
    g = conv_relu_graph(c, h)
    sz = ffi.new("size_t*")
    c.ok(L.hipdnnBackendGetSerializedBinaryGraph_ext(g, 0, sz, ffi.NULL))
    n = sz[0]
    buf = ffi.new("uint8_t[]", n)
    assert L.hipdnnBackendGetSerializedBinaryGraph_ext(g, n - 1, sz, buf) == \
        L.HIPDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    assert sz[0] == n
    assert L.hipdnnBackendGetSerializedBinaryGraph_ext(g, n, ffi.NULL, buf) == L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
    t = c.tensor(5)
    assert L.hipdnnBackendGetSerializedBinaryGraph_ext(t, n, sz, buf) == L.HIPDNN_STATUS_BAD_PARAM
    assert L.hipdnnBackendGetSerializedJsonGraph_ext(t, n, sz, buf) == L.HIPDNN_STATUS_BAD_PARAM
    # JSON two-call: size includes the NUL
    c.ok(L.hipdnnBackendGetSerializedJsonGraph_ext(g, 0, sz, ffi.NULL))
    jn = sz[0]
    jbuf = ffi.new("char[]", jn)
    assert L.hipdnnBackendGetSerializedJsonGraph_ext(g, jn - 1, sz, jbuf) == \
        L.HIPDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
    c.ok(L.hipdnnBackendGetSerializedJsonGraph_ext(g, jn, sz, jbuf))
    assert jbuf[jn - 1] == b"\x00" and len(ffi.string(jbuf)) == jn - 1
    # an unfinalized (even empty) graph serializes
    e = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    assert len(c.serialize(e)) > 0
    # deserialize misuse
    p = ffi.new("hipdnnBackendDescriptor_t*")
    assert L.hipdnnBackendCreateAndDeserializeGraph_ext(ffi.NULL, b"abcdefgh", 8) == \
        L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
    assert L.hipdnnBackendCreateAndDeserializeGraph_ext(p, ffi.NULL, 8) == L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
    assert L.hipdnnBackendCreateAndDeserializeGraph_ext(p, b"abcdefgh", 0) == L.HIPDNN_STATUS_BAD_PARAM
    assert c.deserialize(b"\x00" * 3)[0] == L.HIPDNN_STATUS_BAD_PARAM
    assert c.deserialize(b"\xff" * 64)[0] == L.HIPDNN_STATUS_BAD_PARAM
    assert "Invalid serialized graph" in c.err()
    for o in (g, t, e):
        c.destroy(o)


def test_json_round_trip(c, h):
    L = c.lib
    g = conv_relu_graph(c, h)
    blob = c.serialize(g)
    j = c.serialize_json(g)
    doc = json.loads(j[:-1])
    assert doc["nodes"][0]["attributes_type"] == "ConvolutionFwdAttributes"
    assert doc["nodes"][0]["attributes"]["conv_mode"] == "CROSS_CORRELATION"
    for data in (j, j[:-1]):  # with and without the NUL
        st, g2 = c.deserialize_json(data)
        c.ok(st)
        assert c.serialize(g2) == blob
        c.destroy(g2)
    # parse / schema errors -> BAD
    for bad in (b"{", b"[]", b'{"nodes": 5}', b'{"bogus": 1}', b'{"compute_data_type": "NOPE"}',
                b'{"nodes": [{"attributes_type": "Nope", "attributes": {}}]}', b"\xff\xfe"):
        st, _ = c.deserialize_json(bad)
        assert st == L.HIPDNN_STATUS_BAD_PARAM, bad
        assert "Invalid JSON graph" in c.err()
    c.destroy(g)


def _container(graph_blob, plan_blob=None):
    b = flatbuffers.Builder(256)
    offs = []
    for blob in (graph_blob, plan_blob):
        offs.append(None if blob is None else b.CreateByteVector(blob))
    b.StartObject(2)
    if offs[1] is not None:
        b.PrependUOffsetTRelativeSlot(1, offs[1], 0)
    if offs[0] is not None:
        b.PrependUOffsetTRelativeSlot(0, offs[0], 0)
    b.Finish(b.EndObject(), b"HDGP")
    return bytes(b.Output())


def _contents(c, data):
    flags = c.ffi.new("int*")
    st = c.lib.hipdnnBackendGetSerializedBinaryContents_ext(data, len(data), flags)
    return st, flags[0]


def test_hdgp_container_and_contents(c, h):
    L = c.lib
    g = conv_relu_graph(c, h)
    blob = c.serialize(g)
    GRAPH, PLAN = L.HIPDNN_SERIALIZED_CONTENT_GRAPH, L.HIPDNN_SERIALIZED_CONTENT_EXECUTION_PLAN
    cont = _container(blob)
    st, g2 = c.deserialize(cont)
    c.ok(st)
    assert c.serialize(g2) == blob
    assert _contents(c, cont) == (0, GRAPH)
    assert _contents(c, _container(blob, b"planbytes")) == (0, GRAPH | PLAN)
    assert _contents(c, _container(None, b"planbytes")) == (0, PLAN)
    assert _contents(c, blob) == (0, GRAPH)
    assert _contents(c, b"abc") == (0, GRAPH)
    assert _contents(c, b"\x00\x00\x00\x00HDGP\xff\xff")[0] == L.HIPDNN_STATUS_BAD_PARAM
    for empty in (_container(None), _container(None, b"p"), _container(b"")):
        st, _ = c.deserialize(empty)
        assert st == L.HIPDNN_STATUS_BAD_PARAM
        assert "carries no graph" in c.err()
    st, _ = c.deserialize(cont[:-6])
    assert st == L.HIPDNN_STATUS_BAD_PARAM
    st, _ = c.deserialize(_container(b"\x01" * 16))
    assert st == L.HIPDNN_STATUS_BAD_PARAM
    c.destroy(g)
    c.destroy(g2)


def _graph_with_version(major, minor, patch):
    b = flatbuffers.Builder(128)
    b.StartObject(10)
    b.Prep(4, 12)
    b.PrependUint32(patch)
    b.PrependUint32(minor)
    b.PrependUint32(major)
    b.Slot(8)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def test_version_gate(c):
    L = c.lib
    st, g = c.deserialize(_graph_with_version(1, 3, 0))
    c.ok(st)
    c.destroy(g)
    for v in ((1, 3, 1), (1, 4, 0), (2, 0, 0)):
        st, _ = c.deserialize(_graph_with_version(*v))
        assert st == L.HIPDNN_STATUS_NOT_SUPPORTED, v


def test_required_version_stamping(c, h):
    """§3.6, first match: ragged or alignment != 16 -> 1.3.0; runtime pass-by-value -> 1.2.0;
    override shapes -> 1.1.0; else 1.0.0 (and deserialization accepts up to 1.3.0)."""
    L = c.lib
    PBV, RAGGED = "pbv", "ragged"
    cases = [((), {}, False, (1, 0, 0)), ((), {}, True, (1, 1, 0)),
             ((), dict(alignment=64), False, (1, 3, 0)), ((), dict(alignment=64), True, (1, 3, 0)),
             ((PBV,), {}, False, (1, 2, 0)), ((PBV,), {}, True, (1, 2, 0)),
             ((RAGGED,), {}, False, (1, 3, 0)), ((RAGGED, PBV), {}, True, (1, 3, 0))]
    for extra, kw, override, want in cases:
        x, y = c.tensor(1, finalize=False, **kw), c.tensor(2)
        if PBV in extra:
            c.ok(c.set_bool(x, L.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, True))
        if RAGGED in extra:
            c.ok(c.set_i64(x, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, 2))
        c.ok(L.hipdnnBackendFinalize(x))
        op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [x]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [y]))
        c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, L.HIPDNN_POINTWISE_EXP))
        c.ok(L.hipdnnBackendFinalize(op))
        g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
        c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [op]))
        c.ok(c.set_bool(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, override))
        c.ok(c.set_handle(g, h))
        c.ok(L.hipdnnBackendFinalize(g))
        blob = c.serialize(g)
        v = to_dict(blob, "Graph")["min_required_engine_api_version"]
        assert (v["major"], v["minor"], v["patch"]) == want, (extra, kw, override)
        st, g2 = c.deserialize(blob)
        c.ok(st)
        assert c.serialize(g2) == blob
        for o in (x, y, op, g, g2):
            c.destroy(o)


def test_tensor_values_round_trip(c, h):
    L = c.lib
    vals = [(L.HIPDNN_DATA_FLOAT, struct.pack("<f", 1.5)), (L.HIPDNN_DATA_DOUBLE, struct.pack("<d", -2.25)),
            (L.HIPDNN_DATA_HALF, struct.pack("<e", 0.5)), (L.HIPDNN_DATA_INT32, struct.pack("<i", -7)),
            (L.HIPDNN_DATA_INT64, struct.pack("<q", 1 << 40)), (L.HIPDNN_DATA_BFLOAT16, b"\x80\x3f"),
            (L.HIPDNN_DATA_INT8, b"\xfe"), (L.HIPDNN_DATA_BOOLEAN, b"\x01")]
    for dt, raw in vals:
        x = c.tensor(1)
        s = c.tensor(2, (1,), dtype=dt, value=raw)
        y = c.tensor(3)
        op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [x]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, [s]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [y]))
        c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, L.HIPDNN_POINTWISE_MUL))
        c.ok(L.hipdnnBackendFinalize(op))
        g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
        c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [op]))
        blob = c.serialize(g)
        st, g2 = c.deserialize(blob)
        c.ok(st)
        ops = c.get_descs(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
        s2 = c.get_desc(ops[0], L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT)
        assert c.get_bytes(s2, L.HIPDNN_ATTR_TENSOR_VALUE_EXT) == raw, dt
        assert c.get_enum(s2, L.HIPDNN_ATTR_TENSOR_DATA_TYPE, L.HIPDNN_TYPE_DATA_TYPE) == dt
        assert c.serialize(g2) == blob
        for o in (x, s, y, op, g, g2, s2, *ops):
            c.destroy(o)


def test_unknown_node_type_not_supported(c):
    L = c.lib
    b = flatbuffers.Builder(128)
    b.StartObject(1)
    att = b.EndObject()
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(3, att, 0)
    b.PrependUint8Slot(2, 99, 0)
    node = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(node)
    nodes = b.EndVector()
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(5, nodes, 0)
    b.Finish(b.EndObject())
    st, _ = c.deserialize(bytes(b.Output()))
    assert st == L.HIPDNN_STATUS_NOT_SUPPORTED
    assert "unsupported node type 99" in c.err()


@pytest.mark.parametrize("n", [1, 50])
def test_many_nodes_graph(c, h, n):
    """A chain of n pointwise ops keeps node order and tensor order."""
    L = c.lib
    ts = [c.tensor(i + 1, virtual=0 < i < n) for i in range(n + 1)]
    ops = []
    for i in range(n):
        op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [ts[i]]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [ts[i + 1]]))
        c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, L.HIPDNN_POINTWISE_TANH_FWD))
        c.ok(c.set_str(op, L.HIPDNN_ATTR_OPERATION_NAME_EXT, b"op%d" % i))
        c.ok(L.hipdnnBackendFinalize(op))
        ops.append(op)
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, ops))
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    d = to_dict(c.serialize(g), "Graph")
    assert [t["uid"] for t in d["tensors"]] == list(range(1, n + 2))
    assert [x["name"] for x in d["nodes"]] == ["op%d" % i for i in range(n)]
    for o in (*ts, *ops, g):
        c.destroy(o)


def test_boolean_tensor_round_trip(c, h):
    """BOOLEAN has no FlatBuffers DataType (written as UNSET): a BOOLEAN tensor without a value
    still deserializes (binary and JSON), reads back as BOOLEAN and re-serializes identically."""
    L = c.lib
    x, m = c.tensor(1), c.tensor(2, dtype=L.HIPDNN_DATA_BOOLEAN)
    op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
    c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [x]))
    c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [m]))
    c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, L.HIPDNN_POINTWISE_CMP_GT))
    c.ok(L.hipdnnBackendFinalize(op))
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [op]))
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    blob = c.serialize(g)
    assert json.loads(c.serialize_json(g)[:-1])["tensors"][1]["data_type"] == "UNSET"
    for st, g2 in (c.deserialize(blob), c.deserialize_json(c.serialize_json(g))):
        c.ok(st)
        assert c.serialize(g2) == blob
        ops = c.get_descs(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
        t = c.get_desc(ops[0], L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT)
        assert c.get_enum(t, L.HIPDNN_ATTR_TENSOR_DATA_TYPE, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_BOOLEAN
        assert c.get_bool(t, L.HIPDNN_ATTR_TENSOR_IS_BY_VALUE) is False
        for o in (g2, t, *ops):
            c.destroy(o)
    for o in (x, m, op, g):
        c.destroy(o)


def test_unset_optional_getters_write_nothing(c):
    """Unset graph data types and preferred engine: success, count 0, the array left untouched
    (also when an array and req >= 1 are given); count query answers 0 too."""
    L, ffi = c.lib, c.ffi
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    for name, atype, ctype in ((L.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE, "int32_t"),
                               (L.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE, "int32_t"),
                               (L.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE, "int32_t"),
                               (L.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, L.HIPDNN_TYPE_INT64, "int64_t")):
        cnt = ffi.new("int64_t*", 7)
        arr = ffi.new(f"{ctype}[1]", [-99])
        c.ok(L.hipdnnBackendGetAttribute(g, name, atype, 1, cnt, arr))
        assert (cnt[0], arr[0]) == (0, -99)
        assert c.get_count(g, name, atype) == (0, 0)
        # wrong type is still BAD
        assert L.hipdnnBackendGetAttribute(g, name, L.HIPDNN_TYPE_FLOAT, 1, cnt, arr) == L.HIPDNN_STATUS_BAD_PARAM
    # HANDLE: not gettable, with or without an array
    harr = ffi.new("hipdnnHandle_t[1]")
    assert L.hipdnnBackendGetAttribute(g, L.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, L.HIPDNN_TYPE_HANDLE, 1,
                                       ffi.new("int64_t*"), harr) == L.HIPDNN_STATUS_NOT_SUPPORTED
    c.destroy(g)


def test_every_set_but_handle_drops_the_id(c, h):
    """§1.5: any successful set other than HANDLE discards the cached serialization and the UUID;
    HANDLE keeps them; a failed set keeps them."""
    L = c.lib
    g = conv_relu_graph(c, h)
    blob = c.serialize(g)
    DT = L.HIPDNN_TYPE_DATA_TYPE
    sets = [lambda d: c.set_enum(d, L.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, DT, L.HIPDNN_DATA_HALF),
            lambda d: c.set_enum(d, L.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, DT, L.HIPDNN_DATA_HALF),
            lambda d: c.set_enum(d, L.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, DT, L.HIPDNN_DATA_HALF),
            lambda d: c.set_i64(d, L.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, 3),
            lambda d: c.set_bool(d, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, False),
            lambda d: c.set_str(d, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"conv_bias_relu"),
            # (the graph's own first op again: another graph's op would bring tensor objects
            # that share uids with this graph's, which finalize rejects)
            lambda d: c.set_desc(d, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS,
                                 c.get_descs(d, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS)[:1])]
    for i, do_set in enumerate(sets):
        st, g2 = c.deserialize(blob)
        c.ok(st)
        # HANDLE and a failed set keep the id and the bytes
        c.ok(c.set_handle(g2, h))
        assert c.set_enum(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, DT, 999) == L.HIPDNN_STATUS_BAD_PARAM
        assert c.serialize(g2) == blob
        c.ok(do_set(g2))
        assert to_dict(c.serialize(g2), "Graph")["id"] is None, i
        c.ok(L.hipdnnBackendFinalize(g2))
        new_id = to_dict(c.serialize(g2), "Graph")["id"]
        assert new_id is not None and new_id != to_dict(blob, "Graph")["id"], i
        c.destroy(g2)
    c.destroy(g)


def test_ragged_offsets_given_as_a_tensor_descriptor(c, h):
    """TENSOR_RAGGED_OFFSET_DESC also takes the offsets' tensor descriptor (BACKEND_DESCRIPTOR,
    newer hipDNN): the uid reads back as INT64, the descriptor as a new wrapper, the graph
    carries the offsets tensor beside the op's tensors and its bytes round-trip; a virtual or
    itself ragged offsets tensor makes the graph's finalize BAD_PARAM."""
    L = c.lib

    def build(aux_virtual=False, nested=False):
        aux = c.tensor(9, dims=(3, 1, 1, 1), dtype=L.HIPDNN_DATA_INT64, virtual=aux_virtual,
                       finalize=False)
        if nested:
            c.ok(c.set_i64(aux, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, 1))
        c.ok(L.hipdnnBackendFinalize(aux))
        x, y = c.tensor(1, finalize=False), c.tensor(2)
        c.ok(c.set_desc(x, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, [aux]))
        c.ok(c.set_i64(x, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER, 4))
        c.ok(L.hipdnnBackendFinalize(x))
        op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [x]))
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [y]))
        c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE,
                        L.HIPDNN_POINTWISE_EXP))
        c.ok(L.hipdnnBackendFinalize(op))
        g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
        c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [op]))
        c.ok(c.set_handle(g, h))
        return aux, x, y, op, g

    aux, x, y, op, g = build()
    assert c.get_i64(x, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC) == 9
    back = c.get_desc(x, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC)
    assert c.get_i64(back, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID) == 9
    c.ok(L.hipdnnBackendFinalize(g))
    blob = c.serialize(g)
    d = to_dict(blob, "Graph")
    ts = {t["uid"]: t for t in d["tensors"]}
    assert set(ts) == {1, 2, 9}
    assert ts[1]["ragged_offset_tensor_uid"] == 9 and ts[1]["ragged_offset_multiplier"] == 4
    v = d["min_required_engine_api_version"]
    assert (v["major"], v["minor"], v["patch"]) == (1, 3, 0)
    st, g2 = c.deserialize(blob)
    c.ok(st)
    assert c.serialize(g2) == blob
    for o in (back, aux, x, y, op, g, g2):
        c.destroy(o)
    for kw in (dict(aux_virtual=True), dict(nested=True)):
        objs = build(**kw)
        assert L.hipdnnBackendFinalize(objs[-1]) == L.HIPDNN_STATUS_BAD_PARAM, kw
        for o in objs:
            c.destroy(o)
