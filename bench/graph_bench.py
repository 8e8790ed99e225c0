"""Benchmark: deserialize + finalize of a 50-node graph through the C API.

Reports µs per graph and the split between FlatBuffers work (verification + buffer reading /
building in the flatbuffers runtime, the verifier and graph_fb) and the rest (our descriptor code,
cffi crossings), measured with cProfile over the same loop.  Writes bench/results/graph.json.

    .venv/bin/python bench/graph_bench.py [--iters N]
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "graph"))

from gutil import C  # noqa: E402

from hipdnn_cabi import capi  # noqa: E402

N_NODES = 50


def build_blob(c: C, h) -> bytes:
    """x -> (conv) -> then 49 pointwise ops alternating ADD(bias) / RELU."""
    L = c.lib
    keep = []
    cur = c.tensor(1, (1, 16, 32, 32), name=b"x")
    w = c.tensor(2, (16, 16, 3, 3), name=b"w")
    keep += [cur, w]
    ops = []
    conv = c.create(L.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
    y = c.tensor(3, (1, 16, 32, 32), virtual=True)
    keep.append(y)
    c.ok(c.set_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, [cur]))
    c.ok(c.set_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, [w]))
    c.ok(c.set_desc(conv, L.HIPDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, [y]))
    for name, v in ((L.HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, [1, 1]), (L.HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS, [1, 1]),
                    (L.HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES, [1, 1]), (L.HIPDNN_ATTR_CONVOLUTION_DILATIONS, [1, 1])):
        c.ok(c.set_i64v(conv, name, v))
    c.ok(c.set_enum(conv, L.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, L.HIPDNN_TYPE_CONVOLUTION_MODE, L.HIPDNN_CROSS_CORRELATION))
    c.ok(c.set_enum(conv, L.HIPDNN_ATTR_CONVOLUTION_COMP_TYPE, L.HIPDNN_TYPE_DATA_TYPE, L.HIPDNN_DATA_FLOAT))
    c.ok(L.hipdnnBackendFinalize(conv))
    ops.append(conv)
    cur = y
    uid = 4
    for i in range(N_NODES - 1):
        out = c.tensor(uid, (1, 16, 32, 32), virtual=i < N_NODES - 2, name=b"t%d" % uid)
        uid += 1
        keep.append(out)
        op = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [cur]))
        if i % 2 == 0:
            b = c.tensor(uid, (1, 16, 1, 1), name=b"b%d" % uid)
            uid += 1
            keep.append(b)
            c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, [b]))
            mode = L.HIPDNN_POINTWISE_ADD
        else:
            mode = L.HIPDNN_POINTWISE_RELU_FWD
        c.ok(c.set_desc(op, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [out]))
        c.ok(c.set_enum(op, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE, mode))
        c.ok(L.hipdnnBackendFinalize(op))
        ops.append(op)
        cur = out
    g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, ops))
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    blob = c.serialize(g)
    for d in (*keep, *ops, g):
        c.destroy(d)
    return blob


def one(c: C, h, blob: bytes, p, rebuild=False):
    L = c.lib
    st = L.hipdnnBackendCreateAndDeserializeGraph_ext(p, blob, len(blob))
    assert st == 0, c.err()
    g = p[0]
    if rebuild:  # a set other than HANDLE: finalize mints a new id and rebuilds the FlatBuffer
        c.ok(c.set_str(g, L.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"renamed"))
    c.ok(c.set_handle(g, h))
    c.ok(L.hipdnnBackendFinalize(g))
    L.hipdnnBackendDestroyDescriptor(g)


FB_MARKERS = ("/flatbuffers/", "schemas/verifier.py", "backend/graph_fb.py")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    ffi, lib = capi.load(os.path.join(ROOT, "hipdnn_cabi", "lib", "libhipdnn_backend.so"))
    c = C(ffi, lib)
    h = c.handle()
    blob = build_blob(c, h)
    p = ffi.new("hipdnnBackendDescriptor_t*")
    for _ in range(10):
        one(c, h, blob, p)
    t0 = time.perf_counter()
    for _ in range(args.iters):
        one(c, h, blob, p)
    us = (time.perf_counter() - t0) / args.iters * 1e6
    t0 = time.perf_counter()
    for _ in range(args.iters):
        one(c, h, blob, p, rebuild=True)
    us_rebuild = (time.perf_counter() - t0) / args.iters * 1e6

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.iters):
        one(c, h, blob, p)
    prof.disable()
    st = pstats.Stats(prof)
    total = fb = 0.0
    for (fname, _line, _fn), (_cc, _nc, tt, _ct, _callers) in st.stats.items():
        total += tt
        if any(m in fname.replace("\\", "/") for m in FB_MARKERS):
            fb += tt
    verify_ct = sum(v[3] for k, v in st.stats.items() if k[2] == "verify" and "verifier" in k[0])
    build_ct = sum(v[3] for k, v in st.stats.items() if k[2] == "build" and "graph_fb" in k[0])
    read_ct = sum(v[3] for k, v in st.stats.items() if k[2] == "read" and "graph_fb" in k[0])
    res = {
        "benchmark": "CreateAndDeserializeGraph_ext + set HANDLE + Finalize (C API)",
        "nodes": N_NODES,
        "blob_bytes": len(blob),
        "iters": args.iters,
        "us_per_graph": round(us, 1),
        "us_per_graph_with_rebuild": round(us_rebuild, 1),
        "rebuild_note": "an unchanged deserialized graph keeps the verified input bytes as its "
                        "serialization; 'with_rebuild' sets NAME_EXT first, so finalize rebuilds",
        "profile_share_flatbuffers": round(fb / total, 3) if total else None,
        "profile_share_our_code": round(1 - fb / total, 3) if total else None,
        "profile_cumulative_share": {
            "verify": round(verify_ct / total, 3) if total else None,
            "read (graph_fb.read)": round(read_ct / total, 3) if total else None,
            "build at finalize (graph_fb.build)": round(build_ct / total, 3) if total else None,
        },
        "note": "shares are of cProfile self time (profiling overhead inflates absolute times); "
                "'flatbuffers' = flatbuffers runtime + schemas/verifier.py + backend/graph_fb.py",
    }
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "graph.json"), "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
