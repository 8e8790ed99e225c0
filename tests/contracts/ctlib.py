"""C-API helpers for the contract tests (ABI-mode cffi; run inside fresh `python -c` processes,
because the library keeps process-wide plugin state).

Graphs are built through the real descriptor API (TENSOR / POINTWISE / OPERATIONGRAPH), so what
the plugins see is exactly what a C caller produces.
"""
from __future__ import annotations

import os
import struct
import sys  # noqa: F401 (scripts use it)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from hipdnn_cabi import capi  # noqa: E402

ffi, lib = capi.load()
L = lib

# scalar states (RFC 0016 §4.2)
CONST = "const"            # compile-time constant: value, flag clear
DEFAULT = "default"        # runtime with default: value, flag set
RUNTIME = "runtime"        # runtime user-supplied: no value, flag set


def err(clear=True) -> str:
    return capi.last_error(lib, ffi, clear)


def ok(st):
    assert st == 0, f"status {st}: {err()}"


def addr(c) -> int:
    return int(ffi.cast("uintptr_t", c))


def handle():
    p = ffi.new("hipdnnHandle_t*")
    ok(lib.hipdnnCreate(p))
    return p[0]


def create(dtype):
    p = ffi.new("hipdnnBackendDescriptor_t*")
    ok(lib.hipdnnBackendCreateDescriptor(dtype, p))
    return p[0]


def set_raw(d, name, atype, ctype, values):
    arr = ffi.new(f"{ctype}[]", list(values))
    return lib.hipdnnBackendSetAttribute(d, name, atype, len(values), arr)


def set_desc(d, name, descs):
    return set_raw(d, name, L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", descs)


def get_i64(d, name):
    v = ffi.new("int64_t[1]")
    c = ffi.new("int64_t*")
    st = lib.hipdnnBackendGetAttribute(d, name, L.HIPDNN_TYPE_INT64, 1, c, v)
    return st, v[0]


def get_i64v(d, name):
    n = ffi.new("int64_t*")
    st = lib.hipdnnBackendGetAttribute(d, name, L.HIPDNN_TYPE_INT64, 0, n, ffi.NULL)
    if st:
        return st, None
    arr = ffi.new("int64_t[]", max(n[0], 1))
    st = lib.hipdnnBackendGetAttribute(d, name, L.HIPDNN_TYPE_INT64, n[0], n, arr)
    return st, list(arr[0:n[0]])


def get_bool(d, name):
    v = ffi.new("bool[1]")
    c = ffi.new("int64_t*")
    st = lib.hipdnnBackendGetAttribute(d, name, L.HIPDNN_TYPE_BOOLEAN, 1, c, v)
    return st, bool(v[0])


def tensor(uid, dims, *, virtual=False, value=None, runtime=False, dtype=None):
    t = create(L.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
    ok(set_raw(t, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID, L.HIPDNN_TYPE_INT64, "int64_t", [uid]))
    ok(set_raw(t, L.HIPDNN_ATTR_TENSOR_DATA_TYPE, L.HIPDNN_TYPE_DATA_TYPE, "int32_t",
               [L.HIPDNN_DATA_FLOAT if dtype is None else dtype]))
    strides, s = [], 1
    for x in reversed(dims):
        strides.insert(0, s)
        s *= x
    ok(set_raw(t, L.HIPDNN_ATTR_TENSOR_DIMENSIONS, L.HIPDNN_TYPE_INT64, "int64_t", dims))
    ok(set_raw(t, L.HIPDNN_ATTR_TENSOR_STRIDES, L.HIPDNN_TYPE_INT64, "int64_t", strides))
    ok(set_raw(t, L.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, L.HIPDNN_TYPE_BOOLEAN, "bool", [virtual]))
    if value is not None:
        raw = struct.pack("<f", value)
        ok(lib.hipdnnBackendSetAttribute(t, L.HIPDNN_ATTR_TENSOR_VALUE_EXT, L.HIPDNN_TYPE_CHAR,
                                         len(raw), ffi.new("char[]", raw)))
    if runtime:
        ok(set_raw(t, L.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, L.HIPDNN_TYPE_BOOLEAN,
                   "bool", [True]))
    ok(lib.hipdnnBackendFinalize(t))
    return t


def scalar(uid, state, value):
    """A [1] float scalar tensor in one of the three by-value states."""
    if state == CONST:
        return tensor(uid, [1], value=value)
    if state == DEFAULT:
        return tensor(uid, [1], value=value, runtime=True)
    if state == RUNTIME:
        return tensor(uid, [1], runtime=True)
    raise ValueError(state)


def pointwise(mode, a, b, y):
    op = create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
    ok(set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [a]))
    if b is not None:
        ok(set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, [b]))
    ok(set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [y]))
    ok(set_raw(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, "int32_t", [mode]))
    ok(lib.hipdnnBackendFinalize(op))
    return op


def graph(h, ops, name=b"contracts"):
    g = create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    ok(set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, ops))
    ok(set_raw(g, L.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, L.HIPDNN_TYPE_DATA_TYPE,
               "int32_t", [L.HIPDNN_DATA_FLOAT]))
    ok(lib.hipdnnBackendSetAttribute(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, L.HIPDNN_TYPE_CHAR,
                                     len(name), ffi.new("char[]", name)))
    ok(set_raw(g, L.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, L.HIPDNN_TYPE_HANDLE, "hipdnnHandle_t", [h]))
    st = lib.hipdnnBackendFinalize(g)
    return st, g


def add_graph(h, n=4):
    """y(3) = x(1) + b(2), float [1, n]."""
    x, b, y = tensor(1, [1, n]), tensor(2, [1, n]), tensor(3, [1, n])
    st, g = graph(h, [pointwise(L.HIPDNN_POINTWISE_ADD, x, b, y)])
    ok(st)
    return g


def scale_shift_graph(h, alpha_state, beta_state, alpha=2.0, beta=0.5, n=4):
    """z(4) = (x(1) * alpha(10)) + beta(11) through a virtual t(3); float [1, n] with [1] scalars."""
    x = tensor(1, [1, n])
    a = scalar(10, alpha_state, alpha)
    t = tensor(3, [1, n], virtual=True)
    b = scalar(11, beta_state, beta)
    z = tensor(4, [1, n])
    st, g = graph(h, [pointwise(L.HIPDNN_POINTWISE_MUL, x, a, t),
                      pointwise(L.HIPDNN_POINTWISE_ADD, t, b, z)])
    return st, g


def engine_ids(g):
    """The heuristic's engine ids for graph g (status, [ids]), via ENGINEHEUR mode 0."""
    st, cfgs = configs(g)
    ids = []
    for c in cfgs:
        ok(lib.hipdnnBackendFinalize(c))
        e = ffi.new("hipdnnBackendDescriptor_t*")
        ok(lib.hipdnnBackendGetAttribute(c, L.HIPDNN_ATTR_ENGINECFG_ENGINE,
                                         L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.NULL, e))
        ids.append(get_i64(e[0], L.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX)[1])
    return st, ids


def configs(g):
    hd = create(L.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    ok(set_desc(hd, L.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, [g]))
    ok(set_raw(hd, L.HIPDNN_ATTR_ENGINEHEUR_MODE, L.HIPDNN_TYPE_HEUR_MODE, "int32_t", [0]))
    st = lib.hipdnnBackendFinalize(hd)
    if st:
        return st, []
    n = ffi.new("int64_t*")
    ok(lib.hipdnnBackendGetAttribute(hd, L.HIPDNN_ATTR_ENGINEHEUR_RESULTS,
                                     L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, n, ffi.NULL))
    cfgs = [create(L.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR) for _ in range(n[0])]
    if cfgs:
        arr = ffi.new("hipdnnBackendDescriptor_t[]", cfgs)
        ok(lib.hipdnnBackendGetAttribute(hd, L.HIPDNN_ATTR_ENGINEHEUR_RESULTS,
                                         L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, len(cfgs), n, arr))
    return 0, cfgs


def engine(g, eid):
    e = create(L.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
    ok(set_desc(e, L.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, [g]))
    ok(set_raw(e, L.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, L.HIPDNN_TYPE_INT64, "int64_t", [eid]))
    return lib.hipdnnBackendFinalize(e), e


def plan_for_engine(g, eid):
    """(status, plan) for engine eid on graph g: ENGINE → ENGINECFG → EXECUTION_PLAN."""
    st, e = engine(g, eid)
    if st:
        return st, None
    c = create(L.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    ok(set_desc(c, L.HIPDNN_ATTR_ENGINECFG_ENGINE, [e]))
    st = lib.hipdnnBackendFinalize(c)
    if st:
        return st, None
    p = create(L.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    ok(set_desc(p, L.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, [c]))
    return lib.hipdnnBackendFinalize(p), p


def first_plan(g):
    st, cfgs = configs(g)
    ok(st)
    assert cfgs, "no engine configs"
    ok(lib.hipdnnBackendFinalize(cfgs[0]))
    p = create(L.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    ok(set_desc(p, L.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, [cfgs[0]]))
    ok(lib.hipdnnBackendFinalize(p))
    return p


def notes(e):
    """(status of the count query, count, status of the fetch, values)."""
    n = ffi.new("int64_t*")
    st = lib.hipdnnBackendGetAttribute(e, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                       L.HIPDNN_TYPE_BEHAVIOR_NOTE, 0, n, ffi.NULL)
    if st:
        return st, None, None, None
    arr = ffi.new("int32_t[]", max(n[0], 1))
    st2 = lib.hipdnnBackendGetAttribute(e, L.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                        L.HIPDNN_TYPE_BEHAVIOR_NOTE, n[0], n, arr)
    return st, n[0], st2, list(arr[0:n[0]])


def two_call(fn, *args):
    """Run a two-call serialization entry point; (status, bytes)."""
    sz = ffi.new("size_t*")
    st = fn(*args, 0, sz, ffi.NULL)
    if st:
        return st, b""
    buf = ffi.new("uint8_t[]", max(sz[0], 1))
    st = fn(*args, sz[0], sz, buf)
    return st, bytes(ffi.buffer(buf, sz[0]))


def serialize_plan(p):
    return two_call(lib.hipdnnBackendGetSerializedExecutionPlan_ext, p)


def serialize_graph_and_plan(g, p):
    return two_call(lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext, g,
                    p if p is not None else ffi.NULL)


def deserialize_plan(h, data: bytes):
    out = ffi.new("hipdnnBackendDescriptor_t*")
    buf = ffi.new("uint8_t[]", data) if data else ffi.NULL
    st = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h, out, buf, len(data))
    return st, out[0]


def contents(data: bytes):
    f = ffi.new("int*")
    st = lib.hipdnnBackendGetSerializedBinaryContents_ext(ffi.new("uint8_t[]", data), len(data), f)
    return st, f[0]


def variant_pack(pairs, ws=0):
    """pairs: [(uid, pointer int)]."""
    vp = create(L.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    ok(set_raw(vp, L.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, L.HIPDNN_TYPE_VOID_PTR, "void*",
               [ffi.cast("void*", p) for _, p in pairs]))
    ok(set_raw(vp, L.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, L.HIPDNN_TYPE_INT64, "int64_t",
               [u for u, _ in pairs]))
    ok(set_raw(vp, L.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, L.HIPDNN_TYPE_VOID_PTR, "void*",
               [ffi.cast("void*", ws)]))
    ok(lib.hipdnnBackendFinalize(vp))
    return vp


def run_add(h, p, x=(1, 2, 3, 4), b=(10, 20, 30, 40)):
    """Execute an add plan (uids 1, 2 → 3); (status, y)."""
    cx, cb = ffi.new("float[]", list(x)), ffi.new("float[]", list(b))
    cy = ffi.new("float[]", len(x))
    vp = variant_pack([(1, addr(cx)), (2, addr(cb)), (3, addr(cy))])
    st = lib.hipdnnExecute(h, p, vp) if hasattr(lib, "hipdnnExecute") else \
        lib.hipdnnBackendExecute(h, p, vp)
    return st, [float(v) for v in cy]


def run_scale_shift(h, p, x=(1, 2, 3, 4), scalars=None):
    """Execute a scale_shift plan; ``scalars``: {uid: host float or None (omitted)}; (status, z)."""
    cx = ffi.new("float[]", list(x))
    cz = ffi.new("float[]", len(x))
    pairs = [(1, addr(cx)), (4, addr(cz))]
    keep = []
    for uid, v in (scalars or {}).items():
        if v is None:
            continue
        c = ffi.new("float*", v)
        keep.append(c)
        pairs.append((uid, addr(c)))
    vp = variant_pack(pairs)
    st = lib.hipdnnBackendExecute(h, p, vp)
    return st, [float(v) for v in cz]


# ------------------------------------------------------------------ generic ops (scalar-taking norms)
NORM_FWD_INFERENCE, NORM_FWD_TRAINING = 1, 2      # hipdnnNormFwdPhase_t


def op(dtype, tensors, enums=None, i64=None):
    """An operation descriptor: ``tensors`` {attr name: tensor descriptor}, ``enums`` {attr name:
    (attribute type, int value)}, ``i64`` {attr name: int}."""
    o = create(dtype)
    for name, t in tensors.items():
        ok(set_desc(o, getattr(L, name), [t]))
    for name, (atype, v) in (enums or {}).items():
        ok(set_raw(o, getattr(L, name), atype, "int32_t", [v]))
    for name, v in (i64 or {}).items():
        ok(set_raw(o, getattr(L, name), L.HIPDNN_TYPE_INT64, "int64_t", [v]))
    ok(lib.hipdnnBackendFinalize(o))
    return o


def run_arrays(h, p, arrays, scalars=None):
    """Execute plan p with numpy float32 arrays {uid: ndarray} (outputs written in place) and host
    scalars {uid: float or None (omitted)}; returns the status."""
    import numpy as np
    keep = []
    pairs = []
    for uid, a in arrays.items():
        assert a.dtype == np.float32 and a.flags.c_contiguous
        pairs.append((uid, a.ctypes.data))
    for uid, v in (scalars or {}).items():
        if v is None:
            continue
        c = ffi.new("float*", v)
        keep.append(c)
        pairs.append((uid, addr(c)))
    return lib.hipdnnBackendExecute(h, p, variant_pack(pairs))
