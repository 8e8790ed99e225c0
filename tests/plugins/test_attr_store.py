"""The C attribute store (cdef/astore.c): FAST_FIELDS of TENSOR descriptors.

* one battery of Set/Get/Finalize/Destroy calls on tensor descriptors (every tensor attribute ×
  type × count × NULL pointers, before and after finalize, wrapper ids from an operation's getter,
  the creating id destroyed while a wrapper lives) answers the same status, message and bytes with
  the store on and with HIPDNN_CABI_PY_ATTRS=1, and the serialized graph built from such tensors
  is the same;
* the hot Set (uid, dims, strides, is_virtual before finalize) and Get (after finalize) never
  enter Python.
"""
from __future__ import annotations

from plugins_testlib import py

BATTERY = r"""
out = {}
TD = D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR
names = [A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, A.HIPDNN_ATTR_TENSOR_STRIDES,
         A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, A.HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
         A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, 99999]
types = [T.HIPDNN_TYPE_INT64, T.HIPDNN_TYPE_BOOLEAN, T.HIPDNN_TYPE_DATA_TYPE, T.HIPDNN_TYPE_VOID_PTR, 777]
counts = [-1, 0, 1, 2, 4, 9, 2**24 + 1]
data = ffi.new("int64_t[16]", [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18])

def rec(key, st):
    out[key] = [int(st), err()]

def tensor(uid=1, dims=(2, 3), strides=(3, 1), virtual=False, fin=True):
    t = desc(TD)
    set_attr(t, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, "int64_t", [uid])
    set_attr(t, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])
    set_attr(t, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, "int64_t", list(dims))
    set_attr(t, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, "int64_t", list(strides))
    set_attr(t, A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, T.HIPDNN_TYPE_BOOLEAN, "bool", [virtual])
    if fin:
        rec(f"fin/{uid}", lib.hipdnnBackendFinalize(t))
    return t

for nm in names:
    for ty in types:
        for c in counts:
            for arr in (data, ffi.NULL):
                if c > 16 and c <= 2**24 and arr != ffi.NULL:
                    continue
                t = desc(TD)
                rec(f"set/{nm}/{ty}/{c}/{arr != ffi.NULL}", lib.hipdnnBackendSetAttribute(t, nm, ty, c, arr))
                # what a later finalize and get see of it
                set_attr(t, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])
                st = lib.hipdnnBackendFinalize(t)
                cnt = ffi.new("int64_t*", -9)
                buf = ffi.new("int64_t[20]", [-7] * 20)
                g = lib.hipdnnBackendGetAttribute(t, nm, ty, 20, cnt, buf)
                out[f"after/{nm}/{ty}/{c}/{arr != ffi.NULL}"] = [st, err(), g, err(), cnt[0], list(buf)]
                lib.hipdnnBackendDestroyDescriptor(t)

# sets replace; sets after finalize refused; refinalize
t = tensor(5, (2, 3, 4), (12, 4, 1), fin=False)
set_attr(t, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, "int64_t", [6, 4])
set_attr(t, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, "int64_t", [4, 1])
rec("get_before_fin", lib.hipdnnBackendGetAttribute(t, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, 1, ffi.new("int64_t*"), data))
rec("fin_bad", lib.hipdnnBackendFinalize(desc(TD)))
rec("fin", lib.hipdnnBackendFinalize(t))
rec("refin", lib.hipdnnBackendFinalize(t))
rec("set_after_fin", set_attr(t, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, "int64_t", [9]))
for nm in names[:6]:
    for ty in types[:3]:
        for req in (-1, 0, 1, 2, 5):
            for with_cnt in (True, False):
                for with_arr in (True, False):
                    buf = ffi.new("int64_t[8]", [-7] * 8)
                    cnt = ffi.new("int64_t*", -9)
                    st = lib.hipdnnBackendGetAttribute(t, nm, ty, req, cnt if with_cnt else ffi.NULL,
                                                       buf if with_arr else ffi.NULL)
                    out[f"get/{nm}/{ty}/{req}/{with_cnt}/{with_arr}"] = [int(st), err(), cnt[0], list(buf)]

# wrapper ids (an op's tensor getter), the creating id destroyed while the wrapper lives
x = tensor(1, (2, 3), (3, 1)); y = tensor(2, (2, 3), (3, 1))
op = desc(D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
set_attr(op, A.HIPDNN_ATTR_POINTWISE_MODE, T.HIPDNN_TYPE_POINTWISE_MODE, "int", [12])
set_attr(op, A.HIPDNN_ATTR_POINTWISE_MATH_PREC, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])
set_attr(op, A.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [x])
set_attr(op, A.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [y])
rec("op_fin", lib.hipdnnBackendFinalize(op))
w = ffi.new("hipdnnBackendDescriptor_t[1]")
rec("op_get_x", lib.hipdnnBackendGetAttribute(op, A.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.new("int64_t*"), w))
rec("destroy_x", lib.hipdnnBackendDestroyDescriptor(x))
buf = ffi.new("int64_t[4]"); cnt = ffi.new("int64_t*")
rec("wrapper_dims", lib.hipdnnBackendGetAttribute(w[0], A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, 4, cnt, buf))
out["wrapper_dims_v"] = [cnt[0], list(buf)]
rec("destroyed_x_get", lib.hipdnnBackendGetAttribute(x, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, 4, cnt, buf))
rec("destroyed_x_set", set_attr(x, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, "int64_t", [1]))
g = desc(D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
h = create_handle()
set_attr(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [op])
set_attr(g, A.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, T.HIPDNN_TYPE_HANDLE, "hipdnnHandle_t", [h])
rec("graph_fin", lib.hipdnnBackendFinalize(g))
n = ffi.new("size_t*")
rec("json_size", lib.hipdnnBackendGetSerializedJsonGraph_ext(g, 0, n, ffi.NULL))
js = ffi.new("char[]", n[0] + 1)
rec("json", lib.hipdnnBackendGetSerializedJsonGraph_ext(g, n[0] + 1, n, js))
jg = json.loads(ffi.string(js).decode())
jg.pop("id", None)  # a random graph uuid
out["json_text"] = json.dumps(jg, sort_keys=True)
print(json.dumps(out))
"""


def test_store_answers_like_python(c_sample):
    env = {"HIPDNN_PLUGIN_DIR": c_sample}
    c = py(BATTERY, env, timeout=600)
    ref = py(BATTERY, {**env, "HIPDNN_CABI_PY_ATTRS": "1"}, timeout=600)
    assert len(c) == len(ref) > 1000
    diff = [k for k in ref if c.get(k) != ref[k]]
    assert not diff, [(k, c.get(k), ref[k]) for k in diff[:5]]
    assert c["fin"] == c["refin"] == [0, ""] and c["set_after_fin"][0] == 1
    assert c["wrapper_dims"] == [0, ""] and c["wrapper_dims_v"] == [2, [2, 3, 0, 0]]
    assert '"strides": [3, 1]' in c["json_text"] and '"uid": 2' in c["json_text"]


NO_PYTHON = r"""
import sys
from hipdnn_cabi.backend import runtime
t = desc(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
seen = []
def prof(frame, event, arg):
    if event == "call" and "hipdnn_cabi" in frame.f_code.co_filename:
        seen.append(frame.f_code.co_filename.rsplit("/", 1)[-1] + ":" + frame.f_code.co_name)
v = ffi.new("int64_t*", 7); dims = ffi.new("int64_t[]", [2, 3, 4, 5, 6, 7, 8, 9]); b = ffi.new("bool*", True)
cnt = ffi.new("int64_t*"); out = ffi.new("int64_t[8]")
sys.setprofile(prof)
sts = [lib.hipdnnBackendSetAttribute(t, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, 1, v),
       lib.hipdnnBackendSetAttribute(t, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, 8, dims),
       lib.hipdnnBackendSetAttribute(t, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, 8, dims),
       lib.hipdnnBackendSetAttribute(t, A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, T.HIPDNN_TYPE_BOOLEAN, 1, b)]
sys.setprofile(None)
set_attr(t, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])
sts.append(lib.hipdnnBackendFinalize(t))
set_seen = sorted(set(seen)); seen.clear()
sys.setprofile(prof)
sts += [lib.hipdnnBackendGetAttribute(t, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, 0, cnt, ffi.NULL),
        lib.hipdnnBackendGetAttribute(t, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, 8, cnt, out),
        lib.hipdnnBackendGetAttribute(t, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, 1, cnt, v)]
sys.setprofile(None)
print(json.dumps({"set_seen": set_seen, "get_seen": sorted(set(seen)), "sts": sts, "out": list(out),
                  "uid": v[0], "records": runtime.lib.hipdnn_cabi_as_count()}))
"""


def test_hot_set_get_never_enter_python(c_sample):
    r = py(NO_PYTHON, {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["sts"] == [0] * 8
    assert r["set_seen"] == [] and r["get_seen"] == [], r
    assert r["out"] == [2, 3, 4, 5, 6, 7, 8, 9] and r["uid"] == 7 and r["records"] >= 1
