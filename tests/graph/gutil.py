"""Helpers for the graph tests: thin wrappers over the C API (ABI-mode cffi)."""
from __future__ import annotations

import struct

from hipdnn_cabi.capi import last_error

SUCCESS = 0


class C:
    """Convenience wrapper around (ffi, lib)."""

    def __init__(self, ffi, lib):
        self.ffi, self.lib = ffi, lib

    def err(self):
        return last_error(self.lib, self.ffi)

    def ok(self, st):
        assert st == 0, f"status {st}: {self.err()}"

    def create(self, dtype):
        p = self.ffi.new("hipdnnBackendDescriptor_t*")
        self.ok(self.lib.hipdnnBackendCreateDescriptor(dtype, p))
        return p[0]

    def destroy(self, d):
        self.ok(self.lib.hipdnnBackendDestroyDescriptor(d))

    def handle(self):
        p = self.ffi.new("hipdnnHandle_t*")
        self.ok(self.lib.hipdnnCreate(p))
        return p[0]

    # ------------------------------------------------------------------ raw set
    def set_raw(self, d, name, atype, count, arr):
        return self.lib.hipdnnBackendSetAttribute(d, name, atype, count, arr)

    def set_i64(self, d, name, v):
        return self.set_raw(d, name, self.lib.HIPDNN_TYPE_INT64, 1, self.ffi.new("int64_t[]", [v]))

    def set_i64v(self, d, name, vals):
        return self.set_raw(d, name, self.lib.HIPDNN_TYPE_INT64, len(vals), self.ffi.new("int64_t[]", list(vals)))

    def set_enum(self, d, name, atype, v):
        return self.set_raw(d, name, atype, 1, self.ffi.new("int32_t[]", [v]))

    def set_bool(self, d, name, v):
        return self.set_raw(d, name, self.lib.HIPDNN_TYPE_BOOLEAN, 1, self.ffi.new("bool[]", [v]))

    def set_float(self, d, name, v):
        return self.set_raw(d, name, self.lib.HIPDNN_TYPE_FLOAT, 1, self.ffi.new("float[]", [v]))

    def set_str(self, d, name, s: bytes):
        return self.set_raw(d, name, self.lib.HIPDNN_TYPE_CHAR, len(s), self.ffi.new("char[]", s))

    def set_desc(self, d, name, descs):
        arr = self.ffi.new("hipdnnBackendDescriptor_t[]", list(descs))
        return self.set_raw(d, name, self.lib.HIPDNN_TYPE_BACKEND_DESCRIPTOR, len(descs), arr)

    def set_handle(self, d, h):
        arr = self.ffi.new("hipdnnHandle_t[]", [h])
        return self.set_raw(d, self.lib.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, self.lib.HIPDNN_TYPE_HANDLE, 1, arr)

    # ------------------------------------------------------------------ raw get
    def get_raw(self, d, name, atype, req, ctype):
        cnt = self.ffi.new("int64_t*")
        arr = self.ffi.new(f"{ctype}[]", max(req, 1))
        st = self.lib.hipdnnBackendGetAttribute(d, name, atype, req, cnt, arr)
        return st, cnt[0], arr

    def get_count(self, d, name, atype):
        cnt = self.ffi.new("int64_t*")
        st = self.lib.hipdnnBackendGetAttribute(d, name, atype, 0, cnt, self.ffi.NULL)
        return st, cnt[0]

    def get_i64(self, d, name):
        st, n, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_INT64, 1, "int64_t")
        self.ok(st)
        return arr[0] if n else None

    def get_i64v(self, d, name):
        st, n = self.get_count(d, name, self.lib.HIPDNN_TYPE_INT64)
        self.ok(st)
        if n == 0:
            return []
        st, n, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_INT64, n, "int64_t")
        self.ok(st)
        return list(arr[0:n])

    def get_enum(self, d, name, atype):
        st, n, arr = self.get_raw(d, name, atype, 1, "int32_t")
        self.ok(st)
        return arr[0] if n else None

    def get_bool(self, d, name):
        st, n, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_BOOLEAN, 1, "bool")
        self.ok(st)
        return bool(arr[0]) if n else None

    def get_float(self, d, name):
        st, n, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_FLOAT, 1, "float")
        self.ok(st)
        return arr[0] if n else None

    def get_str(self, d, name):
        st, n = self.get_count(d, name, self.lib.HIPDNN_TYPE_CHAR)
        self.ok(st)
        st, _, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_CHAR, n, "char")
        self.ok(st)
        return self.ffi.string(arr)

    def get_bytes(self, d, name):
        st, n = self.get_count(d, name, self.lib.HIPDNN_TYPE_CHAR)
        self.ok(st)
        st, k, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_CHAR, max(n, 1), "char")
        self.ok(st)
        return bytes(self.ffi.buffer(arr, k))

    def get_descs(self, d, name):
        st, n = self.get_count(d, name, self.lib.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        self.ok(st)
        if n == 0:
            return []
        st, k, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_BACKEND_DESCRIPTOR, n,
                                  "hipdnnBackendDescriptor_t")
        self.ok(st)
        return [arr[i] for i in range(n)]

    def get_desc(self, d, name):
        st, n, arr = self.get_raw(d, name, self.lib.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                  "hipdnnBackendDescriptor_t")
        self.ok(st)
        return arr[0] if n else None

    # ------------------------------------------------------------------ objects
    def tensor(self, uid, dims=(1, 4, 8, 8), dtype=None, virtual=False, name=b"", finalize=True,
               value=None, alignment=None):
        L = self.lib
        t = self.create(L.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
        self.ok(self.set_i64(t, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID, uid))
        if name:
            self.ok(self.set_str(t, L.HIPDNN_ATTR_TENSOR_NAME_EXT, name))
        self.ok(self.set_enum(t, L.HIPDNN_ATTR_TENSOR_DATA_TYPE, L.HIPDNN_TYPE_DATA_TYPE,
                              L.HIPDNN_DATA_FLOAT if dtype is None else dtype))
        strides, s = [], 1
        for x in reversed(dims):
            strides.insert(0, s)
            s *= x
        self.ok(self.set_i64v(t, L.HIPDNN_ATTR_TENSOR_DIMENSIONS, dims))
        self.ok(self.set_i64v(t, L.HIPDNN_ATTR_TENSOR_STRIDES, strides))
        self.ok(self.set_bool(t, L.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, virtual))
        if value is not None:
            self.ok(self.set_raw(t, L.HIPDNN_ATTR_TENSOR_VALUE_EXT, L.HIPDNN_TYPE_CHAR, len(value),
                                 self.ffi.new("char[]", value)))
        if alignment is not None:
            self.ok(self.set_i64(t, L.HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT, alignment))
        if finalize:
            self.ok(self.lib.hipdnnBackendFinalize(t))
        return t

    def serialize(self, g):
        sz = self.ffi.new("size_t*")
        self.ok(self.lib.hipdnnBackendGetSerializedBinaryGraph_ext(g, 0, sz, self.ffi.NULL))
        buf = self.ffi.new("uint8_t[]", sz[0])
        self.ok(self.lib.hipdnnBackendGetSerializedBinaryGraph_ext(g, sz[0], sz, buf))
        return bytes(self.ffi.buffer(buf, sz[0]))

    def serialize_json(self, g):
        sz = self.ffi.new("size_t*")
        self.ok(self.lib.hipdnnBackendGetSerializedJsonGraph_ext(g, 0, sz, self.ffi.NULL))
        buf = self.ffi.new("char[]", sz[0])
        self.ok(self.lib.hipdnnBackendGetSerializedJsonGraph_ext(g, sz[0], sz, buf))
        return bytes(self.ffi.buffer(buf, sz[0]))

    def deserialize(self, data: bytes):
        p = self.ffi.new("hipdnnBackendDescriptor_t*")
        st = self.lib.hipdnnBackendCreateAndDeserializeGraph_ext(p, data, len(data))
        return st, p[0]

    def deserialize_json(self, data: bytes):
        p = self.ffi.new("hipdnnBackendDescriptor_t*")
        st = self.lib.hipdnnBackendCreateAndDeserializeJsonGraph_ext(p, data, len(data))
        return st, p[0]


def conv_relu_graph(c: C, h, *, destroy=True):
    """x -> conv(w) -> y -> add(b) -> z -> relu -> out; returns the graph descriptor."""
    L = c.lib
    x = c.tensor(1, (1, 4, 8, 8), name=b"x")
    w = c.tensor(2, (8, 4, 3, 3), name=b"w")
    y = c.tensor(3, (1, 8, 6, 6), virtual=True)
    b = c.tensor(4, (1, 8, 1, 1), name=b"b")
    z = c.tensor(5, (1, 8, 6, 6), virtual=True)
    o = c.tensor(6, (1, 8, 6, 6), name=b"out")
    conv = c.create(L.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
    c.ok(c.set_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, [x]))
    c.ok(c.set_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, [w]))
    c.ok(c.set_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, [y]))
    c.ok(c.set_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, [0, 0]))
    c.ok(c.set_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS, [0, 0]))
    c.ok(c.set_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES, [1, 1]))
    c.ok(c.set_i64v(conv, L.HIPDNN_ATTR_CONVOLUTION_DILATIONS, [1, 1]))
    c.ok(c.set_enum(conv, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, L.HIPDNN_TYPE_CONVOLUTION_MODE,
                    L.HIPDNN_CROSS_CORRELATION))
    c.ok(c.set_enum(conv, L.HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, L.HIPDNN_TYPE_DATA_TYPE, L.HIPDNN_DATA_FLOAT))
    c.ok(c.set_str(conv, L.HIPDNN_ATTR_OPERATION_NAME_EXT, b"conv"))
    c.ok(L.hipdnnBackendFinalize(conv))
    add = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
    c.ok(c.set_desc(add, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [y]))
    c.ok(c.set_desc(add, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, [b]))
    c.ok(c.set_desc(add, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [z]))
    c.ok(c.set_enum(add, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, L.HIPDNN_POINTWISE_ADD))
    c.ok(L.hipdnnBackendFinalize(add))
    relu = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
    c.ok(c.set_desc(relu, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [z]))
    c.ok(c.set_desc(relu, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [o]))
    c.ok(c.set_enum(relu, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE,
                    L.HIPDNN_POINTWISE_RELU_FWD))
    c.ok(c.set_float(relu, L.HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, 0.0))
    c.ok(L.hipdnnBackendFinalize(relu))
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [conv, add, relu]))
    c.ok(c.set_enum(g, L.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE,
                    L.HIPDNN_DATA_FLOAT))
    c.ok(c.set_enum(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE,
                    L.HIPDNN_DATA_HALF))
    c.ok(c.set_bool(g, L.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, False))
    c.ok(c.set_str(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"conv_bias_relu"))
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    if destroy:
        for d in (x, w, y, b, z, o, conv, add, relu):
            c.destroy(d)
    return g


def i64(v):
    return struct.pack("<q", v)
