"""Every operation descriptor through the C API: set/get/finalize round trip, mandatory fields,
wrong tensor kinds, unfinalized tensors, and a round trip through a serialized graph."""
from __future__ import annotations

import itertools

import pytest

from hipdnn_cabi.backend.descriptors.operations import OPS

_uids = itertools.count(1000)
IDS = [s.table for s in OPS]


def sample(a, L):
    """A representative value per attribute kind."""
    k = a.kind
    if k == "i64":
        return 3
    if k == "i64vec":
        return [1, 2]
    if k == "enum":
        return sorted(a.enum.valid)[-1]
    if k == "dtype":
        return L.HIPDNN_DATA_HALF
    if k == "float":
        return 0.5
    if k == "bool":
        return True
    if k == "string":
        return b"my_custom_op"
    if k == "bytes":
        return b"\x00\x01\xfe\xff"
    raise AssertionError(k)


def set_attr(c, d, a, v):
    L = c.lib
    if a.kind == "tensor":
        return c.set_desc(d, a.attr, [v])
    if a.kind == "tensors":
        return c.set_desc(d, a.attr, v)
    if a.kind == "i64":
        return c.set_i64(d, a.attr, v)
    if a.kind == "i64vec":
        return c.set_i64v(d, a.attr, v)
    if a.kind in ("enum",):
        return c.set_enum(d, a.attr, a.enum.atype, v)
    if a.kind == "dtype":
        return c.set_enum(d, a.attr, L.HIPDNN_TYPE_DATA_TYPE, v)
    if a.kind == "float":
        return c.set_float(d, a.attr, v)
    if a.kind == "bool":
        return c.set_bool(d, a.attr, v)
    return c.set_str(d, a.attr, v)


def get_attr(c, d, a):
    L = c.lib
    if a.kind == "tensor":
        t = c.get_desc(d, a.attr)
        uid = c.get_i64(t, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID)
        c.destroy(t)
        return uid
    if a.kind == "tensors":
        ts = c.get_descs(d, a.attr)
        uids = [c.get_i64(t, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID) for t in ts]
        for t in ts:
            c.destroy(t)
        return uids
    if a.kind == "i64":
        return c.get_i64(d, a.attr)
    if a.kind == "i64vec":
        return c.get_i64v(d, a.attr)
    if a.kind == "enum":
        return c.get_enum(d, a.attr, a.enum.atype)
    if a.kind == "dtype":
        return c.get_enum(d, a.attr, L.HIPDNN_TYPE_DATA_TYPE)
    if a.kind == "float":
        return c.get_float(d, a.attr)
    if a.kind == "bool":
        return c.get_bool(d, a.attr)
    if a.kind == "string":
        return c.get_str(d, a.attr)
    return c.get_bytes(d, a.attr)


def build(c, spec, skip=(), only_mandatory=False):
    """Create + set every attribute (returns descriptor, {attr: expected}, tensors)."""
    d = c.create(spec.dtype)
    expected, tensors = {}, []
    for a in spec.attrs:
        if a.attr in skip or (only_mandatory and not a.mandatory):
            continue
        if a.kind == "tensor":
            uid = next(_uids)
            t = c.tensor(uid)
            tensors.append(t)
            c.ok(set_attr(c, d, a, t))
            expected[a.attr] = uid
        elif a.kind == "tensors":
            uids = [next(_uids), next(_uids)]
            ts = [c.tensor(u) for u in uids]
            tensors += ts
            c.ok(set_attr(c, d, a, ts))
            expected[a.attr] = uids
        else:
            v = sample(a, c.lib)
            c.ok(set_attr(c, d, a, v))
            expected[a.attr] = v
    return d, expected, tensors


def check(c, d, spec, expected):
    L = c.lib
    for a in spec.attrs:
        if a.attr in expected:
            assert get_attr(c, d, a) == expected[a.attr], a.name
    assert c.get_enum(d, L.HIPDNN_ATTR_OPERATION_TYPE_EXT, L.HIPDNN_TYPE_OPERATION_TYPE_EXT) == spec.optype


@pytest.mark.parametrize("spec", OPS, ids=IDS)
def test_round_trip(c, spec):
    L = c.lib
    d, expected, tensors = build(c, spec)
    c.ok(c.set_str(d, L.HIPDNN_ATTR_OPERATION_NAME_EXT, b"node_name"))
    # get before finalize: NOT_INITIALIZED
    st, _ = c.get_count(d, L.HIPDNN_ATTR_OPERATION_TYPE_EXT, L.HIPDNN_TYPE_OPERATION_TYPE_EXT)
    assert st == L.HIPDNN_STATUS_NOT_INITIALIZED
    c.ok(L.hipdnnBackendFinalize(d))
    # the caller may destroy its tensor wrappers: the op keeps the implementations
    for t in tensors:
        c.destroy(t)
    check(c, d, spec, expected)
    assert c.get_str(d, L.HIPDNN_ATTR_OPERATION_NAME_EXT) == b"node_name"
    # set after finalize: NOT_INITIALIZED
    assert c.set_str(d, L.HIPDNN_ATTR_OPERATION_NAME_EXT, b"x") == L.HIPDNN_STATUS_NOT_INITIALIZED
    # unknown attribute: NOT_SUPPORTED
    assert c.set_i64(c.create(spec.dtype), L.HIPDNN_ATTR_TENSOR_UNIQUE_ID, 1) == L.HIPDNN_STATUS_NOT_SUPPORTED
    c.destroy(d)


@pytest.mark.parametrize("spec", OPS, ids=IDS)
def test_only_mandatory_then_optional_unset(c, spec):
    L = c.lib
    d, expected, tensors = build(c, spec, only_mandatory=True)
    c.ok(L.hipdnnBackendFinalize(d))
    c.ok(L.hipdnnBackendFinalize(d))  # re-finalize allowed
    check(c, d, spec, expected)
    for a in spec.attrs:
        if a.mandatory:
            continue
        if a.kind == "tensor":
            st, n = c.get_count(d, a.attr, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
            assert (st, n) == (0, 0), a.name
    for t in tensors:
        c.destroy(t)
    c.destroy(d)


@pytest.mark.parametrize("spec", OPS, ids=IDS)
def test_each_mandatory_omission(c, spec):
    L = c.lib
    for a in spec.attrs:
        if not a.mandatory:
            continue
        d, _, tensors = build(c, spec, skip={a.attr}, only_mandatory=True)
        assert L.hipdnnBackendFinalize(d) == L.HIPDNN_STATUS_BAD_PARAM, a.name
        assert "not set" in c.err()
        for t in tensors:
            c.destroy(t)
        c.destroy(d)


@pytest.mark.parametrize("spec", OPS, ids=IDS)
def test_tensor_slot_misuse(c, spec):
    L = c.lib
    a = next(x for x in spec.attrs if x.kind in ("tensor", "tensors"))
    d = c.create(spec.dtype)
    # wrong kind: an operation descriptor given where a tensor is expected
    other = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    assert c.set_desc(d, a.attr, [other]) == L.HIPDNN_STATUS_BAD_PARAM
    assert "Descriptor type mismatch" in c.err()
    # unfinalized tensor
    t = c.tensor(next(_uids), finalize=False)
    assert c.set_desc(d, a.attr, [t]) == L.HIPDNN_STATUS_BAD_PARAM_NOT_FINALIZED
    # null array
    assert c.set_raw(d, a.attr, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, c.ffi.NULL) == \
        L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
    # null descriptor inside the array
    assert c.set_desc(d, a.attr, [c.ffi.NULL]) == L.HIPDNN_STATUS_BAD_PARAM
    # wrong attribute type
    assert c.set_i64(d, a.attr, 5) == L.HIPDNN_STATUS_BAD_PARAM
    if a.kind == "tensor":
        t2 = c.tensor(next(_uids))
        assert c.set_desc(d, a.attr, [t2, t2]) == L.HIPDNN_STATUS_BAD_PARAM  # count != 1
        c.destroy(t2)
    for x in (d, other, t):
        c.destroy(x)


def test_conv_mode_int64_and_enum(c):
    L = c.lib
    spec = OPS[0]
    d, expected, tensors = build(c, spec)
    c.ok(c.set_i64(d, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, L.HIPDNN_CONVOLUTION))
    c.ok(L.hipdnnBackendFinalize(d))
    assert c.get_enum(d, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, L.HIPDNN_TYPE_CONVOLUTION_MODE) == L.HIPDNN_CONVOLUTION
    assert c.get_i64(d, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE) == L.HIPDNN_CONVOLUTION
    d2 = c.create(spec.dtype)
    assert c.set_enum(d2, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, L.HIPDNN_TYPE_CONVOLUTION_MODE, 7) == \
        L.HIPDNN_STATUS_BAD_PARAM
    assert c.set_enum(d2, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, 1) == \
        L.HIPDNN_STATUS_BAD_PARAM
    for x in (d, d2, *tensors):
        c.destroy(x)


@pytest.mark.parametrize("spec", OPS, ids=IDS)
def test_op_through_serialized_graph(c, h, spec):
    """One op in a graph -> bytes -> deserialized graph -> its op answers the same getters."""
    L = c.lib
    d, expected, tensors = build(c, spec)
    c.ok(c.set_str(d, L.HIPDNN_ATTR_OPERATION_NAME_EXT, b"n0"))
    c.ok(L.hipdnnBackendFinalize(d))
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [d]))
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    blob = c.serialize(g)
    st, g2 = c.deserialize(blob)
    c.ok(st)
    ops = c.get_descs(g2, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
    assert len(ops) == 1
    check(c, ops[0], spec, expected)
    assert c.get_str(ops[0], L.HIPDNN_ATTR_OPERATION_NAME_EXT) == b"n0"
    assert c.serialize(g2) == blob
    for x in (d, g, g2, *ops, *tensors):
        c.destroy(x)


@pytest.mark.parametrize("spec", OPS, ids=IDS)
def test_tensor_getter_size_query(c, spec):
    """Tensor slots follow the §1.3 generic tensor-ref getter: size query (NULL array or req 0)
    -> count 1 (0 for an unset optional slot); fetch needs req >= 1 and writes one new wrapper."""
    L, ffi = c.lib, c.ffi
    d, expected, tensors = build(c, spec, only_mandatory=True)
    c.ok(L.hipdnnBackendFinalize(d))
    DESC = L.HIPDNN_TYPE_BACKEND_DESCRIPTOR
    for a in spec.attrs:
        if a.kind != "tensor":
            continue
        want = 1 if a.mandatory else 0
        cnt = ffi.new("int64_t*", -5)
        c.ok(L.hipdnnBackendGetAttribute(d, a.attr, DESC, 1, cnt, ffi.NULL))
        assert cnt[0] == want, a.name
        arr = ffi.new("hipdnnBackendDescriptor_t[2]")
        c.ok(L.hipdnnBackendGetAttribute(d, a.attr, DESC, 0, cnt, arr))
        assert cnt[0] == want and arr[0] == ffi.NULL, a.name
        assert L.hipdnnBackendGetAttribute(d, a.attr, DESC, 0, ffi.NULL, ffi.NULL) == \
            L.HIPDNN_STATUS_BAD_PARAM_NULL_POINTER
        if not a.mandatory:
            continue
        assert L.hipdnnBackendGetAttribute(d, a.attr, DESC, -1, cnt, arr) == L.HIPDNN_STATUS_BAD_PARAM
        c.ok(L.hipdnnBackendGetAttribute(d, a.attr, DESC, 2, cnt, arr))
        assert cnt[0] == 1 and arr[0] != ffi.NULL and arr[1] == ffi.NULL, a.name
        assert c.get_i64(arr[0], L.HIPDNN_ATTR_TENSOR_UNIQUE_ID) == expected[a.attr]
        c.destroy(arr[0])
        assert L.hipdnnBackendGetAttribute(d, a.attr, L.HIPDNN_TYPE_INT64, 1, cnt, arr) == \
            L.HIPDNN_STATUS_BAD_PARAM
    for t in tensors:
        c.destroy(t)
    c.destroy(d)
