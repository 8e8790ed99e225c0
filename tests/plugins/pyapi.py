"""Small ABI-mode helpers for the plugin tests (run inside `python -c` subprocesses)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hipdnn_cabi import capi  # noqa: E402
from hipdnn_cabi._generated.enums import (AttributeName as A, AttributeType as T,  # noqa: E402
                                          DescriptorType as D)

ffi, lib = capi.load()


def err(clear=True):
    return capi.last_error(lib, ffi, clear)


def create_handle():
    h = ffi.new("hipdnnHandle_t*")
    st = lib.hipdnnCreate(h)
    assert st == 0, st
    return h[0]


def hid(h) -> int:
    return int(ffi.cast("uintptr_t", h))


def desc(t):
    d = ffi.new("hipdnnBackendDescriptor_t*")
    st = lib.hipdnnBackendCreateDescriptor(t, d)
    assert st == 0, (st, err())
    return d[0]


def as_desc(i: int):
    return ffi.cast("hipdnnBackendDescriptor_t", i)


def set_attr(d, name, atype, ctype, values):
    arr = ffi.new(f"{ctype}[]", values)
    return lib.hipdnnBackendSetAttribute(d, name, atype, len(values), arr)


def get_i64(d, name):
    v = ffi.new("int64_t[1]")
    c = ffi.new("int64_t*")
    st = lib.hipdnnBackendGetAttribute(d, name, T.HIPDNN_TYPE_INT64, 1, c, v)
    return st, v[0]


def heuristic_configs(graph, find_first=None, policy=None):
    """Create+finalize an ENGINEHEUR; return (status, list of unfinalized ENGINECFG descriptors)."""
    h = desc(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    assert set_attr(h, A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                    "hipdnnBackendDescriptor_t", [graph]) == 0, err()
    assert set_attr(h, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, "int", [0]) == 0
    if find_first is not None:
        assert set_attr(h, A.HIPDNN_ATTR_ENGINEHEUR_FIND_FIRST_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool",
                        [find_first]) == 0
    if policy is not None:
        assert set_attr(h, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, "int64_t",
                        policy) == 0
    st = lib.hipdnnBackendFinalize(h)
    if st:
        return st, []
    n = ffi.new("int64_t*")
    assert lib.hipdnnBackendGetAttribute(h, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS,
                                         T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, n, ffi.NULL) == 0
    cfgs = [desc(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR) for _ in range(n[0])]
    if cfgs:
        arr = ffi.new("hipdnnBackendDescriptor_t[]", cfgs)
        assert lib.hipdnnBackendGetAttribute(h, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS,
                                             T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, len(cfgs), n, arr) == 0, err()
    lib.hipdnnBackendDestroyDescriptor(h)
    return 0, cfgs


def engine_id_of_cfg(cfg):
    e = ffi.new("hipdnnBackendDescriptor_t*")
    assert lib.hipdnnBackendGetAttribute(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE,
                                         T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.NULL, e) == 0, err()
    st, v = get_i64(e[0], A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX)
    lib.hipdnnBackendDestroyDescriptor(e[0])
    return v


def plan_for(cfg):
    p = desc(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    assert set_attr(p, A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                    "hipdnnBackendDescriptor_t", [cfg]) == 0, err()
    st = lib.hipdnnBackendFinalize(p)
    return st, p


def variant_pack(uids, ptrs, ws=0):
    vp = desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    assert set_attr(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*",
                    [ffi.cast("void*", p) for p in ptrs]) == 0, err()
    assert set_attr(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t",
                    uids) == 0
    assert set_attr(vp, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR, "void*",
                    [ffi.cast("void*", ws)]) == 0
    assert lib.hipdnnBackendFinalize(vp) == 0, err()
    return vp


def standin_graph(handle, **kw):
    import standin_graph as sg
    return as_desc(sg.register_graph(hid(handle), **kw))
