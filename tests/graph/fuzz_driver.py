"""Fuzz driver (run in a subprocess by test_graph_fuzz.py): mutated / truncated graph buffers through
hipdnnBackendCreateAndDeserializeGraph_ext.  Prints one JSON summary line; exits non-zero on a
violated expectation.  Usage: fuzz_driver.py LIBPATH N SEED"""
from __future__ import annotations

import json
import os
import random
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from gutil import C, conv_relu_graph  # noqa: E402
from test_graph_handbuilt import build_graph  # noqa: E402

from hipdnn_cabi import capi  # noqa: E402


def seeds(c, h):
    L = c.lib
    g = conv_relu_graph(c, h)
    a = c.serialize(g)
    c.destroy(g)
    from hipdnn_cabi.backend.serialization import build_container
    return [a, build_graph(), build_container(a, None)]  # bare graphs and an HDGP container


def mutate(rng, buf: bytes) -> bytes:
    b = bytearray(buf)
    if len(b) < 8:
        b += bytes(8 - len(b))
    k = rng.randrange(7)
    if k == 0:  # bit flips
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif k == 1:  # truncation
        b = b[:rng.randrange(len(b))]
    elif k == 2:  # bogus 32-bit offset at an aligned position
        i = rng.randrange(0, max(1, len(b) - 4), 4)
        struct.pack_into("<I", b, i, rng.choice([0, 1, 3, 0x7FFFFFFF, 0xFFFFFFFF, len(b), max(0, len(b) - 2),
                                                 rng.randrange(1 << 32)]))
    elif k == 3:  # bogus 16-bit vtable entry
        i = rng.randrange(0, max(1, len(b) - 2), 2)
        struct.pack_into("<H", b, i, rng.choice([0, 2, 4, 0xFFFF, rng.randrange(1 << 16)]))
    elif k == 4:  # random bytes spliced in
        i = rng.randrange(len(b))
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif k == 5:  # large vector lengths
        i = rng.randrange(0, max(1, len(b) - 4), 4)
        struct.pack_into("<I", b, i, rng.choice([0x10000000, 0x7FFFFFF0, 1 << 20]))
    else:  # byte overwrite run
        i = rng.randrange(len(b))
        for j in range(i, min(len(b), i + rng.randint(1, 32))):
            b[j] = rng.randrange(256)
    if not b:
        b = bytearray(b"\x00")
    return bytes(b)


HUGE = [2**62, -2**62, 2**61, 2**47, 2**46, 2**40, 2**63 - 1, -2**63, 2**32, 3]


def span_phase(c, h, seed_graph: bytes, rng, n: int) -> dict:
    """Graphs whose tensors get huge strides / dims.  A graph with a tensor no engine
    can address (hipdnn_cabi.plugin_sdk.spans) must get no engine config from the heuristics."""
    from hipdnn_cabi.backend import graph_fb
    from hipdnn_cabi.plugin_sdk import parse_graph, spans
    ffi, L = c.ffi, c.lib
    base = graph_fb.read(seed_graph, "Graph")
    out = {"graphs": 0, "unaddressable": 0, "offered": 0}
    p = ffi.new("hipdnnBackendDescriptor_t*")
    for _ in range(n):
        g = graph_fb.read(seed_graph, "Graph")
        g["tensors"] = [dict(t) for t in base["tensors"]]
        for t in rng.sample(g["tensors"], rng.randint(1, 2)):
            t["strides"] = [rng.choice(HUGE) if rng.random() < 0.5 else s for s in t["strides"]]
        data = graph_fb.build("Graph", g)
        if L.hipdnnBackendCreateAndDeserializeGraph_ext(p, data, len(data)) != 0:
            continue
        gd = p[0]
        c.ok(c.set_handle(gd, h))
        if L.hipdnnBackendFinalize(gd) != 0:
            L.hipdnnBackendDestroyDescriptor(gd)
            continue
        out["graphs"] += 1
        bad = spans.graph_span_problem(parse_graph(data)) is not None
        out["unaddressable"] += bad
        heur = c.create(L.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
        c.ok(c.set_desc(heur, L.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, [gd]))
        c.ok(c.set_enum(heur, L.HIPDNN_ATTR_ENGINEHEUR_MODE, L.HIPDNN_TYPE_HEUR_MODE, 0))
        st = L.hipdnnBackendFinalize(heur)
        cnt = ffi.new("int64_t*")
        if st == 0:
            c.ok(L.hipdnnBackendGetAttribute(heur, L.HIPDNN_ATTR_ENGINEHEUR_RESULTS,
                                             L.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, cnt, ffi.NULL))
        if bad and cnt[0]:
            print(json.dumps({"fail": "engine offered for an unaddressable graph",
                              "strides": [t["strides"] for t in g["tensors"]], "n": cnt[0]}))
            sys.exit(8)
        out["offered"] += int(cnt[0] > 0)
        c.destroy(heur)
        L.hipdnnBackendDestroyDescriptor(gd)
    return out


def main():
    libpath, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ffi, lib = capi.load(libpath)
    c = C(ffi, lib)
    h = c.handle()
    base = seeds(c, h)
    rng = random.Random(seed)
    counts: dict = {}
    ok = 0
    t0 = time.perf_counter()
    slowest = 0.0
    p = ffi.new("hipdnnBackendDescriptor_t*")
    for i in range(n):
        data = mutate(rng, rng.choice(base))
        if rng.random() < 0.3:
            data = mutate(rng, data)
        t = time.perf_counter()
        st = lib.hipdnnBackendCreateAndDeserializeGraph_ext(p, data, len(data))
        slowest = max(slowest, time.perf_counter() - t)
        counts[st] = counts.get(st, 0) + 1
        if st == lib.HIPDNN_STATUS_INTERNAL_ERROR:
            print(json.dumps({"fail": "INTERNAL_ERROR", "case": i, "msg": c.err(), "data": data.hex()}))
            sys.exit(2)
        if st == 0:
            ok += 1
            g = p[0]
            # a valid graph: it answers getters and re-serializes
            st2, nops = c.get_count(g, lib.HIPDNN_ATTR_OPERATIONGRAPH_OPS, lib.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
            if st2 != 0:
                print(json.dumps({"fail": "getter", "case": i, "status": st2}))
                sys.exit(3)
            sz = ffi.new("size_t*")
            st3 = lib.hipdnnBackendGetSerializedBinaryGraph_ext(g, 0, sz, ffi.NULL)
            if st3 not in (0, lib.HIPDNN_STATUS_BAD_PARAM):
                print(json.dumps({"fail": "reserialize", "case": i, "status": st3, "msg": c.err()}))
                sys.exit(4)
            # force a rebuild by our writer (a set other than HANDLE drops the cached bytes)
            c.ok(c.set_str(g, lib.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, b"fuzz"))
            st4 = lib.hipdnnBackendGetSerializedBinaryGraph_ext(g, 0, sz, ffi.NULL)
            if st4 not in (0, lib.HIPDNN_STATUS_BAD_PARAM):
                print(json.dumps({"fail": "rebuild", "case": i, "status": st4, "msg": c.err()}))
                sys.exit(5)
            # and it finalizes (or is rejected with BAD_PARAM, e.g. two tensors of one uid)
            c.ok(c.set_handle(g, h))
            st5 = lib.hipdnnBackendFinalize(g)
            if st5 not in (0, lib.HIPDNN_STATUS_BAD_PARAM):
                print(json.dumps({"fail": "finalize", "case": i, "status": st5, "msg": c.err()}))
                sys.exit(6)
            lib.hipdnnBackendDestroyDescriptor(g)
        elif not c.err():
            print(json.dumps({"fail": "no error message", "case": i, "status": st, "data": data.hex()}))
            sys.exit(7)
    spans_summary = span_phase(c, h, base[0], rng, max(1, n // 250))
    print(json.dumps({"n": n, "valid": ok, "spans": spans_summary, "statuses": {str(k): v for k, v in counts.items()},
                      "seconds": round(time.perf_counter() - t0, 3), "slowest_s": round(slowest, 4)}))


if __name__ == "__main__":
    main()
