"""A Graph hand-built with flatbuffers.Builder from raw slot numbers (an encoder independent of our
generated code and of graph_fb) reads back through the C getters with every field intact."""
from __future__ import annotations

import struct

import flatbuffers

# FlatBuffers enum values (schema numbering, not the C enums)
FB_FLOAT, FB_HALF, FB_INT64 = 1, 2, 15
CONV_FWD, SDPA, CUSTOM = 5, 12, 16
CROSS_CORRELATION = 2
UUID = bytes(range(16))


def _vec_i64(b, vals):
    b.StartVector(8, len(vals), 8)
    for v in reversed(vals):
        b.PrependInt64(v)
    return b.EndVector()


def _tensor(b, uid, name, dtype, dims, *, virtual=False, value=None, pbv=False, ragged=None,
            alignment=None, mult=None):
    strides, s = [], 1
    for x in reversed(dims):
        strides.insert(0, s)
        s *= x
    nm = b.CreateString(name)
    st = _vec_i64(b, strides)
    dm = _vec_i64(b, dims)
    val = None
    if value is not None:  # Float32Value struct reached through a uoffset
        b.Prep(4, 4)
        b.PrependFloat32(value)
        val = b.Offset()
    b.StartObject(12)
    b.PrependInt64Slot(0, uid, 0)
    b.PrependUOffsetTRelativeSlot(1, nm, 0)
    b.PrependInt8Slot(2, dtype, 0)
    b.PrependUOffsetTRelativeSlot(3, st, 0)
    b.PrependUOffsetTRelativeSlot(4, dm, 0)
    if virtual:
        b.PrependBoolSlot(5, True, False)
    if val is not None:
        b.PrependUint8Slot(6, 1, 0)
        b.PrependUOffsetTRelativeSlot(7, val, 0)
    if pbv:
        b.PrependBoolSlot(8, True, False)
    if ragged is not None:
        b.PrependInt64Slot(9, ragged, 0)
        b.Slot(9)
    if alignment is not None:
        b.PrependInt64Slot(10, alignment, 16)
    if mult is not None:
        b.PrependInt64Slot(11, mult, 1)
    return b.EndObject()


def _node(b, name, compute, utype, att):
    nm = b.CreateString(name)
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(0, nm, 0)
    b.PrependInt8Slot(1, compute, 0)
    b.PrependUint8Slot(2, utype, 0)
    b.PrependUOffsetTRelativeSlot(3, att, 0)
    return b.EndObject()


def build_graph():
    b = flatbuffers.Builder(1024)
    b.ForceDefaults(False)
    tensors = [
        _tensor(b, 10, "x", FB_HALF, [2, 3, 4, 4]),
        _tensor(b, 11, "w", FB_HALF, [5, 3, 3, 3], alignment=64),
        _tensor(b, 12, "y", FB_FLOAT, [2, 5, 2, 2], virtual=True),
        _tensor(b, 20, "q", FB_HALF, [1, 2, 8, 16], ragged=30, mult=4),
        _tensor(b, 21, "k", FB_HALF, [1, 2, 8, 16]),
        _tensor(b, 22, "v", FB_HALF, [1, 2, 8, 16]),
        _tensor(b, 23, "o", FB_HALF, [1, 2, 8, 16]),
        _tensor(b, 24, "scale", FB_FLOAT, [1], value=0.125, pbv=True),
        _tensor(b, 30, "offsets", FB_INT64, [3]),
    ]
    # conv fwd attributes (slots: 0 x, 1 w, 2 y, 3 pre, 4 post, 5 stride, 6 dilation, 7 conv_mode)
    pre, post, stride, dil = (_vec_i64(b, [1, 1]), _vec_i64(b, [0, 2]), _vec_i64(b, [2, 2]),
                              _vec_i64(b, [1, 3]))
    b.StartObject(10)
    b.PrependInt64Slot(0, 10, 0)
    b.PrependInt64Slot(1, 11, 0)
    b.PrependInt64Slot(2, 12, 0)
    b.PrependUOffsetTRelativeSlot(3, pre, 0)
    b.PrependUOffsetTRelativeSlot(4, post, 0)
    b.PrependUOffsetTRelativeSlot(5, stride, 0)
    b.PrependUOffsetTRelativeSlot(6, dil, 0)
    b.PrependInt8Slot(7, CROSS_CORRELATION, 0)
    conv = b.EndObject()
    # sdpa attributes: q k v o (0-3), scale (5), causal_mask (31), attn_scale_value (34),
    # left_bound (35), max_seq_len_kv (37), diagonal_alignment (38), implementation (40)
    b.StartObject(43)
    for slot, uid in ((0, 20), (1, 21), (2, 22), (3, 23), (5, 24)):
        b.PrependInt64Slot(slot, uid, 0)
    b.PrependBoolSlot(31, True, False)
    b.PrependFloat32Slot(34, 0.25, 0.0)
    b.PrependInt64Slot(35, -3, 0)
    b.Slot(35)
    b.PrependInt32Slot(37, 512, 0)
    b.PrependInt8Slot(38, 1, 0)
    b.PrependInt8Slot(40, 2, 0)
    sdpa = b.EndObject()
    # custom op: 0 id, 1 inputs, 2 outputs, 3 data
    cid = b.CreateString("my.custom")
    ins = _vec_i64(b, [10, 30])
    outs = _vec_i64(b, [23])
    data = b.CreateByteVector(b"\x01\x02\x00\xff")
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(0, cid, 0)
    b.PrependUOffsetTRelativeSlot(1, ins, 0)
    b.PrependUOffsetTRelativeSlot(2, outs, 0)
    b.PrependUOffsetTRelativeSlot(3, data, 0)
    custom = b.EndObject()
    nodes = [_node(b, "conv0", FB_FLOAT, CONV_FWD, conv), _node(b, "attn", FB_HALF, SDPA, sdpa),
             _node(b, "cust", 0, CUSTOM, custom)]
    b.StartVector(4, len(tensors), 4)
    for t in reversed(tensors):
        b.PrependUOffsetTRelative(t)
    tv = b.EndVector()
    b.StartVector(4, len(nodes), 4)
    for n in reversed(nodes):
        b.PrependUOffsetTRelative(n)
    nv = b.EndVector()
    gname = b.CreateString("handmade")
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(0, gname, 0)
    b.PrependInt8Slot(1, FB_FLOAT, 0)
    b.PrependInt8Slot(2, FB_HALF, 0)
    b.PrependUOffsetTRelativeSlot(4, tv, 0)
    b.PrependUOffsetTRelativeSlot(5, nv, 0)
    b.PrependInt64Slot(6, 0, 1)  # preferred engine id 0 (an optional scalar: present = set)
    b.PrependBoolSlot(7, True, False)
    b.Prep(4, 12)
    b.PrependUint32(0)
    b.PrependUint32(3)
    b.PrependUint32(1)
    b.Slot(8)
    b.Prep(1, 16)
    for x in reversed(UUID):
        b.PrependUint8(x)
    b.Slot(9)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def test_handbuilt_graph_reads_back(c, h):
    L = c.lib
    blob = build_graph()
    st, g = c.deserialize(blob)
    c.ok(st)
    assert c.get_str(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT) == b"handmade"
    assert c.get_enum(g, L.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_FLOAT
    assert c.get_enum(g, L.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_HALF
    assert c.get_count(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE) == (0, 0)
    assert c.get_i64(g, L.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT) == 0
    assert c.get_bool(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT) is True
    conv, sdpa, cust = c.get_descs(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
    OT = L.HIPDNN_TYPE_OPERATION_TYPE_EXT
    assert c.get_enum(conv, L.HIPDNN_ATTR_OPERATION_TYPE_EXT, OT) == L.HIPDNN_OPERATION_TYPE_CONVOLUTION_FORWARD_EXT
    assert c.get_enum(sdpa, L.HIPDNN_ATTR_OPERATION_TYPE_EXT, OT) == L.HIPDNN_OPERATION_TYPE_SDPA_FORWARD_EXT
    assert c.get_enum(cust, L.HIPDNN_ATTR_OPERATION_TYPE_EXT, OT) == L.HIPDNN_OPERATION_TYPE_CUSTOM_OP_EXT
    # conv
    assert c.get_str(conv, L.HIPDNN_ATTR_OPERATION_NAME_EXT) == b"conv0"
    assert c.get_enum(conv, L.HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_FLOAT
    assert c.get_enum(conv, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, L.HIPDNN_TYPE_CONVOLUTION_MODE) == L.HIPDNN_CROSS_CORRELATION
    assert c.get_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS) == [1, 1]
    assert c.get_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS) == [0, 2]
    assert c.get_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES) == [2, 2]
    assert c.get_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_DILATIONS) == [1, 3]
    w = c.get_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W)
    assert c.get_i64(w, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID) == 11
    assert c.get_i64(w, L.HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT) == 64
    assert c.get_str(w, L.HIPDNN_ATTR_TENSOR_NAME_EXT) == b"w"
    assert c.get_enum(w, L.HIPDNN_ATTR_TENSOR_DATA_TYPE, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_HALF
    assert c.get_i64v(w, L.HIPDNN_ATTR_TENSOR_DIMENSIONS) == [5, 3, 3, 3]
    assert c.get_i64v(w, L.HIPDNN_ATTR_TENSOR_STRIDES) == [27, 9, 3, 1]
    y = c.get_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y)
    assert c.get_bool(y, L.HIPDNN_ATTR_TENSOR_IS_VIRTUAL) is True
    # sdpa
    assert c.get_enum(sdpa, L.HIPDNN_ATTR_SDPA_FWD_COMP_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE) == L.HIPDNN_DATA_HALF
    assert c.get_bool(sdpa, L.HIPDNN_ATTR_SDPA_FWD_CAUSAL_MASK_EXT) is True
    assert c.get_float(sdpa, L.HIPDNN_ATTR_SDPA_FWD_ATTN_SCALE_VALUE_EXT) == 0.25
    assert c.get_i64(sdpa, L.HIPDNN_ATTR_SDPA_FWD_LEFT_BOUND_EXT) == -3
    assert c.get_i64(sdpa, L.HIPDNN_ATTR_SDPA_FWD_MAX_SEQ_LEN_KV_EXT) == 512
    assert c.get_i64(sdpa, L.HIPDNN_ATTR_SDPA_FWD_RIGHT_BOUND_EXT) is None
    assert c.get_enum(sdpa, L.HIPDNN_ATTR_SDPA_FWD_DIAGONAL_ALIGNMENT_EXT, L.HIPDNN_TYPE_DIAGONAL_ALIGNMENT_EXT) == \
        L.HIPDNN_DIAGONAL_ALIGNMENT_BOTTOM_RIGHT_EXT
    assert c.get_enum(sdpa, L.HIPDNN_ATTR_SDPA_FWD_IMPLEMENTATION_EXT, L.HIPDNN_TYPE_ATTENTION_IMPLEMENTATION_EXT) == \
        L.HIPDNN_ATTENTION_IMPLEMENTATION_UNIFIED_EXT
    q = c.get_desc(sdpa, L.HIPDNN_ATTR_OPERATION_SDPA_FWD_QDESC)
    assert c.get_i64(q, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC) == 30
    assert c.get_i64(q, L.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER) == 4
    sc = c.get_desc(sdpa, L.HIPDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC)
    assert c.get_bytes(sc, L.HIPDNN_ATTR_TENSOR_VALUE_EXT) == struct.pack("<f", 0.125)
    assert c.get_bool(sc, L.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT) is True
    assert c.get_bool(sc, L.HIPDNN_ATTR_TENSOR_IS_BY_VALUE) is True
    st, n = c.get_count(sdpa, L.HIPDNN_ATTR_OPERATION_SDPA_FWD_ATTN_MASK_EXT, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    assert (st, n) == (0, 0)
    # custom op
    assert c.get_str(cust, L.HIPDNN_ATTR_OPERATION_CUSTOM_OP_ID_EXT) == b"my.custom"
    assert c.get_bytes(cust, L.HIPDNN_ATTR_OPERATION_CUSTOM_OP_DATA_EXT) == b"\x01\x02\x00\xff"
    ins = c.get_descs(cust, L.HIPDNN_ATTR_OPERATION_CUSTOM_OP_INPUTS_EXT)
    assert [c.get_i64(t, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID) for t in ins] == [10, 30]
    outs = c.get_descs(cust, L.HIPDNN_ATTR_OPERATION_CUSTOM_OP_OUTPUTS_EXT)
    assert [c.get_i64(t, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID) for t in outs] == [23]
    assert c.get_count(cust, L.HIPDNN_ATTR_CUSTOM_OP_COMP_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE) == (0, 0)
    # re-serialization keeps the id and every field (reader of flatc's generated classes)
    from hipdnn_cabi.schemas.dump import to_dict
    d = to_dict(c.serialize(g), "Graph")
    assert bytes(d["id"]["bytes"]) == UUID
    assert d["min_required_engine_api_version"] == {"major": 1, "minor": 3, "patch": 0}
    assert d == to_dict(blob, "Graph")
    for o in (g, conv, sdpa, cust, w, y, q, sc, *ins, *outs):
        c.destroy(o)
