"""The C attribute store for operation descriptors (cdef/astore.c).

* every plain attribute of every operation (rows generated from the OpSpecs) × attribute types ×
  counts × value patterns (valid, out of range, invalid enum values, NULL arrays), before and after
  finalize, answers the same status, message and bytes with the store on and with
  HIPDNN_CABI_PY_ATTRS=1 (descriptors in Python); so do the Gets of finalized pointwise and
  convolution operations and the serialized graph built from them;
* create + destroy and the hot Set/Get of plain operation attributes never enter Python; a
  destroyed id answers like before; records do not leak.
"""
from __future__ import annotations

from plugins_testlib import py

BATTERY = r"""
import struct
from hipdnn_cabi.backend.descriptors import cstore
out = {}

def rec(key, st):
    out[key] = [int(st), err()]

pats = {"i64": struct.pack("<4q", 3, 1, 2, 5), "big": struct.pack("<4q", 2**40, -2**40, 7, 8),
        "dbl": struct.pack("<2d", 0.25, 1e300) + b"\0" * 16, "i32": struct.pack("<8i", 12, 1, 2, 3, 4, 5, 6, 7),
        "bad": struct.pack("<8i", 999, 999, 9, 9, 9, 9, 9, 9), "neg": struct.pack("<4q", -1, 0, 1, 1),
        "one": b"\x01" + b"\0" * 31}
types = [T.HIPDNN_TYPE_INT64, T.HIPDNN_TYPE_DOUBLE, T.HIPDNN_TYPE_FLOAT, T.HIPDNN_TYPE_DATA_TYPE,
         T.HIPDNN_TYPE_BOOLEAN, T.HIPDNN_TYPE_POINTWISE_MODE, T.HIPDNN_TYPE_CONVOLUTION_MODE, 777]
for dtype, (name, rows) in cstore.tables().items():
    if dtype == D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR:
        continue
    for f in rows:
        op = desc(dtype)
        for ty in types + [f.atype]:
            for c in (-1, 0, 1, 2):
                for pn, raw in pats.items():
                    buf = ffi.new("char[]", raw)
                    rec(f"set/{name}/{f.attr}/{ty}/{c}/{pn}", lib.hipdnnBackendSetAttribute(op, f.attr, ty, c, buf))
                rec(f"setnull/{name}/{f.attr}/{ty}/{c}", lib.hipdnnBackendSetAttribute(op, f.attr, ty, c, ffi.NULL))
        cnt = ffi.new("int64_t*", -9); b = ffi.new("char[32]")
        rec(f"get_unfin/{name}/{f.attr}", lib.hipdnnBackendGetAttribute(op, f.attr, f.atype, 1, cnt, b))
        rec(f"fin/{name}/{f.attr}", lib.hipdnnBackendFinalize(op))
        rec(f"destroy/{name}/{f.attr}", lib.hipdnnBackendDestroyDescriptor(op))
        rec(f"destroyed_set/{name}/{f.attr}", lib.hipdnnBackendSetAttribute(op, f.attr, f.atype, 1, ffi.new("char[32]")))
        rec(f"destroyed_destroy/{name}/{f.attr}", lib.hipdnnBackendDestroyDescriptor(op))

def tensor(uid, dims=(1, 4, 8, 8)):
    t = desc(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
    strides, acc = [], 1
    for d in reversed(dims):
        strides.insert(0, acc); acc *= d
    set_attr(t, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, "int64_t", [uid])
    set_attr(t, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])
    set_attr(t, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, "int64_t", list(dims))
    set_attr(t, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, "int64_t", strides)
    assert lib.hipdnnBackendFinalize(t) == 0, err()
    return t

BD = T.HIPDNN_TYPE_BACKEND_DESCRIPTOR
x, y, w = tensor(1), tensor(2), tensor(3, (4, 4, 1, 1))
pw = desc(D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
set_attr(pw, A.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, BD, "hipdnnBackendDescriptor_t", [x])
set_attr(pw, A.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, BD, "hipdnnBackendDescriptor_t", [y])
set_attr(pw, A.HIPDNN_ATTR_POINTWISE_MODE, T.HIPDNN_TYPE_POINTWISE_MODE, "int", [13])
set_attr(pw, A.HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, T.HIPDNN_TYPE_DOUBLE, "double", [0.1])
set_attr(pw, A.HIPDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, T.HIPDNN_TYPE_FLOAT, "float", [6.0])
set_attr(pw, A.HIPDNN_ATTR_POINTWISE_MATH_PREC, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])
cv = desc(D.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
for nm, t in ((A.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x), (A.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w),
              (A.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y)):
    set_attr(cv, nm, BD, "hipdnnBackendDescriptor_t", [t])
set_attr(cv, A.HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])
set_attr(cv, A.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, T.HIPDNN_TYPE_INT64, "int64_t", [1])
for nm in (A.HIPDNN_ATTR_CONVOLUTION_DILATIONS, A.HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
           A.HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, A.HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS):
    set_attr(cv, nm, T.HIPDNN_TYPE_INT64, "int64_t", [1, 1] if "PADD" not in nm.name else [0, 0])
rec("pw_fin", lib.hipdnnBackendFinalize(pw))
rec("cv_fin", lib.hipdnnBackendFinalize(cv))
rec("pw_refin", lib.hipdnnBackendFinalize(pw))
rec("pw_set_after", set_attr(pw, A.HIPDNN_ATTR_POINTWISE_MODE, T.HIPDNN_TYPE_POINTWISE_MODE, "int", [12]))
tabs = cstore.tables()
for op, dt in ((pw, D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR),
               (cv, D.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)):
    for f in tabs[dt][1]:
        for ty in types:
            for req in (-1, 0, 1, 3):
                for wc in (True, False):
                    for wa in (True, False):
                        cnt = ffi.new("int64_t*", -9); b = ffi.new("char[32]", b"\x55" * 32)
                        st = lib.hipdnnBackendGetAttribute(op, f.attr, ty, req, cnt if wc else ffi.NULL, b if wa else ffi.NULL)
                        out[f"get/{dt}/{f.attr}/{ty}/{req}/{wc}/{wa}"] = [int(st), err(), cnt[0], list(ffi.unpack(b, 32))]
g = desc(D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
h = create_handle()
set_attr(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, BD, "hipdnnBackendDescriptor_t", [pw])
set_attr(g, A.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, T.HIPDNN_TYPE_HANDLE, "hipdnnHandle_t", [h])
rec("graph_fin", lib.hipdnnBackendFinalize(g))
n = ffi.new("size_t*")
lib.hipdnnBackendGetSerializedJsonGraph_ext(g, 0, n, ffi.NULL)
js = ffi.new("char[]", n[0] + 1)
rec("json", lib.hipdnnBackendGetSerializedJsonGraph_ext(g, n[0] + 1, n, js))
jg = json.loads(ffi.string(js).decode()); jg.pop("id", None)
out["json_text"] = json.dumps(jg, sort_keys=True)
print(json.dumps(out))
"""


def test_op_store_answers_like_python(c_sample):
    env = {"HIPDNN_PLUGIN_DIR": c_sample}
    c = py(BATTERY, env, timeout=600)
    ref = py(BATTERY, {**env, "HIPDNN_CABI_PY_ATTRS": "1"}, timeout=600)
    assert len(c) == len(ref) > 5000
    diff = [k for k in ref if c.get(k) != ref[k]]
    assert not diff, [(k, c.get(k), ref[k]) for k in diff[:5]]
    assert c["pw_fin"] == c["cv_fin"] == c["pw_refin"] == [0, ""] and c["pw_set_after"][0] == 1
    assert '"relu_lower_clip": 0.1' in c["json_text"] or "0.10000000149" in c["json_text"], c["json_text"]


NO_PYTHON = r"""
import sys
from hipdnn_cabi.backend import runtime
seen = []
def prof(frame, event, arg):
    if event == "call" and "hipdnn_cabi" in frame.f_code.co_filename:
        seen.append(frame.f_code.co_filename.rsplit("/", 1)[-1] + ":" + frame.f_code.co_name)
d = ffi.new("hipdnnBackendDescriptor_t*")
mode = ffi.new("int*", 13); clip = ffi.new("double*", 0.5); dil = ffi.new("int64_t[]", [1, 2]); dt = ffi.new("int*", 0)
lib.hipdnnBackendCreateDescriptor(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, d)  # starts the library
r0 = runtime.lib.hipdnn_cabi_as_count()
sys.setprofile(prof)
sts = []
for t in (D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
          D.HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR):
    sts += [lib.hipdnnBackendCreateDescriptor(t, d), lib.hipdnnBackendDestroyDescriptor(d[0])]
sts.append(lib.hipdnnBackendCreateDescriptor(D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, d))
pw = d[0]
sts += [lib.hipdnnBackendSetAttribute(pw, A.HIPDNN_ATTR_POINTWISE_MODE, T.HIPDNN_TYPE_POINTWISE_MODE, 1, mode),
        lib.hipdnnBackendSetAttribute(pw, A.HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, T.HIPDNN_TYPE_DOUBLE, 1, clip),
        lib.hipdnnBackendSetAttribute(pw, A.HIPDNN_ATTR_POINTWISE_MATH_PREC, T.HIPDNN_TYPE_DATA_TYPE, 1, dt)]
sts.append(lib.hipdnnBackendCreateDescriptor(D.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, d))
cv = d[0]
sts += [lib.hipdnnBackendSetAttribute(cv, A.HIPDNN_ATTR_CONVOLUTION_DILATIONS, T.HIPDNN_TYPE_INT64, 2, dil),
        lib.hipdnnBackendDestroyDescriptor(cv), lib.hipdnnBackendDestroyDescriptor(pw)]
sys.setprofile(None)
gone = lib.hipdnnBackendDestroyDescriptor(pw)
print(json.dumps({"seen": sorted(set(seen)), "sts": sts, "gone": [gone, err()],
                  "records": [r0, runtime.lib.hipdnn_cabi_as_count()]}))
"""


def test_create_destroy_and_op_hot_set_never_enter_python(c_sample):
    r = py(NO_PYTHON, {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["sts"] == [0] * len(r["sts"]) and r["seen"] == [], r
    assert r["gone"][0] == 3 and "invalid or was destroyed" in r["gone"][1]   # BAD_PARAM_NULL_POINTER
    assert r["records"][0] == r["records"][1]
