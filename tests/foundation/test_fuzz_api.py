"""Random-call fuzzing of the backend C API (ABI mode) plus the regressions it found.

The fuzzer runs this file as a script in a subprocess (a crash fails the test instead of killing
pytest): random descriptor types, attribute names and types, counts (negative, huge), NULL
arrays, destroyed and foreign ids, Finalize/Execute/Destroy and the serialization _ext calls, on
top of a small finalized world (conv+bias+relu graph, engine configs, plans, a variant pack backed
by real host memory).  Every call must return (no crash, no hang), never INTERNAL_ERROR carrying a
Python exception name, and every failure must leave a non-empty last error.

Usage as a script: ``python test_fuzz_api.py SEED ITERATIONS``; prints one JSON summary line.
"""
from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)

BAD_WORDS = ("TypeError", "KeyError", "AttributeError", "OverflowError", "struct.error",
             "MemoryError", "ValueError", "IndexError", "ZeroDivisionError", "RecursionError",
             "UnicodeDecodeError", "AssertionError", "NameError", "Traceback", "RuntimeError",
             "object has no attribute")
HUGE = [2**62, 2**31, 2**32 + 1, 2**63 - 1]
COUNTS = [0, 1, 1, 1, 2, 3, 4, 5, 8, -1, -2**63, 100] + HUGE
BUF = 1 << 16


def drive(seed: int, iters: int) -> dict:  # noqa: C901 - one flat fuzzing loop
    import re
    sys.path[:0] = [ROOT, os.path.join(TESTS, "graph"), os.path.join(TESTS, "plugins")]
    from hipdnn_cabi import capi
    from hipdnn_cabi._generated.enums import AttributeName, AttributeType, DescriptorType, Status
    from hipdnn_cabi.backend.descriptors import factory

    ffi, lib = capi.load()
    factory._load()
    R = random.Random(seed)
    names = [int(x) for x in AttributeName] + [2**31 - 1, 99999]
    types = [int(x) for x in AttributeType] + [777, 2**31 - 1]
    dtypes = [int(x) for x in DescriptorType] + [999, 2**31 - 1]
    internal = int(Status.HIPDNN_STATUS_INTERNAL_ERROR)
    live, dead, handles, problems, expected, good = [], [], [], [], {}, {}
    stats = {"calls": 0, "ok": 0, "finalized": 0}

    def V(x):
        return ffi.cast("void*", x)

    def pv(p):
        return int(ffi.cast("uintptr_t", p))

    def check(call, st):
        stats["calls"] += 1
        msg = capi.last_error(lib, ffi)
        if st == 0:
            stats["ok"] += 1
        elif not msg:
            problems.append(f"empty last error: {call} -> {st}")
        # spec §6 (plan deserialization): an envelope naming an engine this handle does not have
        # is INTERNAL "Invalid engine ID: <n>" — a tampered engine id lands there by design
        spec_internal = call.startswith("tamper") and msg.startswith("Invalid engine ID: ")
        if (st == internal and not spec_internal) or any(w in msg for w in BAD_WORDS):
            problems.append(f"{call} -> {st}: {msg}")
        m = re.search(r"expected (HIPDNN_TYPE_\w+)", msg)
        return m and int(AttributeType[m.group(1)])

    # -- a finalized world to fuzz against
    from gutil import C, conv_relu_graph
    c = C(ffi, lib)
    hw = c.handle()
    handles.append(V(hw))
    create0 = c.create

    def tracked(dt):
        d = create0(dt)
        live.append((V(d), int(dt)))
        return d
    c.create = tracked
    g = conv_relu_graph(c, hw, destroy=False)
    live.append((V(g), 10))
    keep = [ffi.new("char[]", BUF) for _ in range(4)]
    import pyapi
    st, cfgs = pyapi.heuristic_configs(g)
    for cf in cfgs:
        live.append((V(cf), 2))
        lib.hipdnnBackendFinalize(cf)
        _, p = pyapi.plan_for(cf)
        live.append((V(p), 4))
    world_plans = [x[0] for x in live if x[1] == 4]
    envelopes = []
    for wp in world_plans:   # envelopes of real plans, mutated by the "tamper" op
        n = ffi.new("size_t*")
        if lib.hipdnnBackendGetSerializedExecutionPlan_ext(wp, 0, n, ffi.NULL) == 0:
            eb = ffi.new("char[]", n[0])
            if lib.hipdnnBackendGetSerializedExecutionPlan_ext(wp, n[0], n, eb) == 0:
                from hipdnn_cabi.schemas._generated.SerializedExecutionPlan import \
                    SerializedExecutionPlan as SEP
                data = ffi.unpack(eb, n[0])
                t = SEP.GetRootAs(data, 0)._tab
                envelopes.append((data, t.Vector(t.Offset(10)) - 4))   # + where the uid count is
    world_vp = V(pyapi.variant_pack([1, 2, 4, 6], [pv(b) for b in keep]))
    live.append((world_vp, 11))
    capi.last_error(lib, ffi)

    def rand_desc():
        r = R.random()
        if live and r < 0.8:
            return R.choice(live)[0]
        if dead and r < 0.9:
            return R.choice(dead)
        if handles and r < 0.95:
            return R.choice(handles)
        return V(R.choice([1, 2, 3, 0xdeadbeef, 2**40, 2**63 - 1]))

    buf = ffi.new("char[]", BUF)

    def fill(atype, count):
        n = min(max(count, 0), 64)
        if atype == int(AttributeType.HIPDNN_TYPE_BACKEND_DESCRIPTOR):
            data = struct.pack(f"<{n}Q", *[pv(rand_desc()) for _ in range(n)])
        elif atype == int(AttributeType.HIPDNN_TYPE_INT64):
            data = struct.pack(f"<{n}q", *[R.choice([1, 1, 2, 3, 4, 8, 0, -1, 2**62, -2**63])
                                           for _ in range(n)])
        elif atype in (4, 5):
            f = "f" if atype == 4 else "d"
            data = struct.pack(f"<{n}{f}", *[R.choice([0.0, 1.0, -1.0, float("nan"), float("inf")])
                                             for _ in range(n)])
        elif atype in (0, 2, 6, 19, 10000):
            data = bytes(R.randrange(256) for _ in range(n * 8))
        else:
            data = struct.pack(f"<{n}i", *[R.choice([0, 1, 2, 3, 5, 9, 100, -1, 2**31 - 1, -2**31])
                                           for _ in range(n)])
        ffi.memmove(buf, data, len(data))

    cnt = ffi.new("int64_t*")
    dptr = ffi.new("hipdnnBackendDescriptor_t*")
    hptr = ffi.new("hipdnnHandle_t*")
    size = ffi.new("size_t*")
    ops = ["create"] * 3 + ["set"] * 10 + ["get"] * 6 + ["fin"] * 3 + ["destroy", "exec", "handle",
                                                                       "ser", "ser", "tamper"]
    for _ in range(iters):
        op = R.choice(ops)
        if op == "create":
            dt = R.choice(dtypes)
            st = lib.hipdnnBackendCreateDescriptor(dt, dptr)
            check(f"create({dt})", st)
            if st == 0:
                live.append((V(dptr[0]), dt))
        elif op in ("set", "get") and live:
            d, dt = R.choice(live) if R.random() < 0.95 else (rand_desc(), -1)
            cls = factory.CLASSES.get(dt)
            table = (cls._setters if op == "set" else cls._getters) if cls else None
            name = R.choice(list(table)) if table and R.random() < 0.85 else R.choice(names)
            atype = expected.get((dt, name)) if R.random() < 0.7 else None
            atype = R.choice(types) if atype is None else atype
            count = R.choice(COUNTS)
            if op == "set":
                fill(atype, count)
                replay = good.get(dt)
                if replay and R.random() < 0.5:
                    name, atype, count, data = R.choice(replay)
                    ffi.memmove(buf, data, len(data))
                    if R.random() < 0.1:
                        count = R.choice(COUNTS)
                arr = ffi.NULL if R.random() < 0.05 else buf
                call = f"set(dt={dt}, name={name}, type={atype}, count={count})"
                st = lib.hipdnnBackendSetAttribute(d, name, atype, count, arr)
                e = check(call, st)
                if st == 0 and 0 <= count <= 64 and arr != ffi.NULL:
                    good.setdefault(dt, []).append((name, atype, count, ffi.unpack(buf, 8 * count)))
            else:
                arr = ffi.NULL if R.random() < 0.2 else buf
                cp = ffi.NULL if R.random() < 0.1 else cnt
                call = f"get(dt={dt}, name={name}, type={atype}, req={count})"
                st = lib.hipdnnBackendGetAttribute(d, name, atype, count, cp, arr)
                e = check(call, st)
                if st == 0 and atype == 13 and arr != ffi.NULL and count > 0:
                    k = min(count, cnt[0] if cp != ffi.NULL else 1, 64)
                    for i in range(max(k, 0)):
                        p = ffi.cast("hipdnnBackendDescriptor_t*", buf)[i]
                        if pv(p):
                            live.append((V(p), -1))
            if e:
                expected[(dt, name)] = e
        elif op == "fin" and live:
            d, dt = R.choice(live)
            st = lib.hipdnnBackendFinalize(d)
            check(f"finalize(dt={dt})", st)
            stats["finalized"] += st == 0
        elif op == "destroy":
            d = rand_desc()
            st = lib.hipdnnBackendDestroyDescriptor(d)
            check("destroy", st)
            live[:] = [x for x in live if pv(x[0]) != pv(d)]
            if st == 0:
                dead.append(d)
        elif op == "exec":
            h = R.choice(handles) if handles and R.random() < 0.8 else rand_desc()
            p = rand_desc()
            v = world_vp if R.random() < 0.7 else rand_desc()
            if pv(v) != pv(world_vp) and any(pv(v) == pv(x[0]) and x[1] in (11, -1) for x in live):
                continue  # a pack of the fuzzer's own random data pointers: executing it is UB
            check("execute", lib.hipdnnBackendExecute(h, p, v))
        elif op == "handle":
            if R.random() < 0.7 or len(handles) < 2:
                st = lib.hipdnnCreate(hptr)
                check("hipdnnCreate", st)
                if st == 0:
                    handles.append(V(hptr[0]))
            else:
                h = handles.pop(R.randrange(1, len(handles)))
                check("hipdnnDestroy", lib.hipdnnDestroy(h))
                dead.append(h)
        elif op == "tamper" and envelopes:
            # a real envelope with a lying uid count, a duplicated uid or random bytes;
            # whatever restores must answer its getters and execute without crashing
            data, at = R.choice(envelopes)
            b = bytearray(data)
            k = R.randrange(3)
            if k == 0:
                struct.pack_into("<I", b, at, R.choice([0, 1, 3, 29, 200, 2**31]))
                stats["tampered_counts"] = stats.get("tampered_counts", 0) + 1
            elif k == 1:
                i = R.randrange(len(b))
                b[i] = R.randrange(256)
            else:
                b = b[:R.randrange(1, len(b))]
            st = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(handles[0], dptr, bytes(b),
                                                                         len(b))
            check(f"tamper{k}", st)
            if st == 0:
                p = V(dptr[0])
                live.append((p, 4))
                n = ffi.new("int64_t*")
                check("restored uids", lib.hipdnnBackendGetAttribute(
                    p, int(AttributeName.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT),
                    int(AttributeType.HIPDNN_TYPE_INT64), 0, n, ffi.NULL))
                if n[0] > 8:
                    problems.append(f"restored plan reports {n[0]} tensor uids")
                check("execute restored", lib.hipdnnBackendExecute(handles[0], p, world_vp))
        elif op == "ser":
            d = rand_desc()
            which = R.randrange(7)
            req = R.choice([0, 1, 16, BUF])
            data = bytes(R.randrange(256) for _ in range(R.choice([1, 8, 64, 300])))
            n = R.choice([len(data)] * 3 + HUGE + [2**64 - 1])
            if which == 0:
                st = lib.hipdnnBackendGetSerializedBinaryGraph_ext(d, req, size, buf)
            elif which == 1:
                st = lib.hipdnnBackendGetSerializedJsonGraph_ext(d, req, size, buf)
            elif which == 2:
                st = lib.hipdnnBackendGetSerializedExecutionPlan_ext(d, req, size, buf)
            elif which == 3:
                st = lib.hipdnnBackendCreateAndDeserializeGraph_ext(dptr, data, n)
            elif which == 4:
                data = R.choice([b"{}", b"[]", b"null", b'{"nodes": 5}', b"\xff\xfe", b"[" * 5000])
                n = R.choice([len(data)] * 3 + HUGE)
                st = lib.hipdnnBackendCreateAndDeserializeJsonGraph_ext(dptr, data, n)
            elif which == 5:
                st = lib.hipdnnBackendGetSerializedBinaryContents_ext(data, n, ffi.new("int*"))
            else:
                st = lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(handles[0], dptr, data, n)
            check(f"ser{which}(size={n})", st)
            if st == 0 and which in (3, 4, 6):
                live.append((V(dptr[0]), 4 if which == 6 else 10))
    return {"seed": seed, "problems": problems[:50], "n_problems": len(problems), **stats}


# ----------------------------------------------------------------------------------- tests
def test_random_api_calls_never_crash_or_leak_python_errors():
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "7", "6000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"rc={r.returncode}\nstdout:{r.stdout[-3000:]}\nstderr:{r.stderr[-3000:]}"
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["n_problems"] == 0, "\n".join(s["problems"])
    assert s["ok"] > 100 and s["finalized"] > 0  # it reached past the argument checks
    assert s.get("tampered_counts", 0) > 0       # lying envelope uid counts were tried


def _fresh(ffi, lib, t):
    d = ffi.new("hipdnnBackendDescriptor_t*")
    assert lib.hipdnnBackendCreateDescriptor(t, d) == 0
    return d[0]


def _err(ffi, lib):
    from hipdnn_cabi import capi as _c
    return _c.last_error(lib, ffi)


def test_huge_element_counts_are_bad_param_before_the_array_is_read(capi):
    """Regression: 2**62 INT64 elements → struct.error (INTERNAL); 2**62 CHAR → MemoryError;
    2**31 elements read far past the caller's array (crash).  Now BAD_PARAM, array untouched."""
    ffi, lib = capi
    A, T = lib, lib
    arr = ffi.new("char[]", 64)
    cases = [
        (A.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64),
        (A.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64),
        (A.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, A.HIPDNN_ATTR_TENSOR_NAME_EXT, T.HIPDNN_TYPE_CHAR),
        (A.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
         T.HIPDNN_TYPE_INT64),
        (A.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
         T.HIPDNN_TYPE_VOID_PTR),
        (A.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS,
         T.HIPDNN_TYPE_BACKEND_DESCRIPTOR),
        (A.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
         T.HIPDNN_TYPE_CHAR),
    ]
    # 2**31 and 2**24 + 1 elements would read past `arr` without the check (a crash, which the
    # subprocess fuzzer above covers); these two failed without crashing
    for dt, name, atype in cases:
        d = _fresh(ffi, lib, dt)
        for count in (2**62, 2**63 - 1):
            st = lib.hipdnnBackendSetAttribute(d, name, atype, count, arr)
            msg = _err(ffi, lib)
            assert st == lib.HIPDNN_STATUS_BAD_PARAM, (dt, name, count, st, msg)
            assert "too large" in msg, msg
        assert lib.hipdnnBackendDestroyDescriptor(d) == 0


def test_element_count_just_over_the_limit_is_refused_without_reading(tmp_path):
    """Regression (crash): 2**31 / 2**24 + 1 elements from a 64-byte array read past it."""
    code = (
        "from hipdnn_cabi import capi\n"
        "ffi, lib = capi.load()\n"
        "d = ffi.new('hipdnnBackendDescriptor_t*')\n"
        "assert lib.hipdnnBackendCreateDescriptor(lib.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, d) == 0\n"
        "arr = ffi.new('char[]', 64)\n"
        "for name, t in ((lib.HIPDNN_ATTR_TENSOR_DIMENSIONS, lib.HIPDNN_TYPE_INT64),\n"
        "                (lib.HIPDNN_ATTR_TENSOR_NAME_EXT, lib.HIPDNN_TYPE_CHAR)):\n"
        "    for n in (2**31, 2**24 + 1):\n"
        "        st = lib.hipdnnBackendSetAttribute(d[0], name, t, n, arr)\n"
        "        msg = capi.last_error(lib, ffi)\n"
        "        assert st == lib.HIPDNN_STATUS_BAD_PARAM and 'too large' in msg, (st, msg)\n"
        "v = ffi.new('int64_t[]', [2, 3])\n"
        "assert lib.hipdnnBackendSetAttribute(d[0], lib.HIPDNN_ATTR_TENSOR_DIMENSIONS,\n"
        "                                     lib.HIPDNN_TYPE_INT64, 2, v) == 0\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr[-2000:])


def test_huge_serialized_byte_sizes_are_bad_param(capi):
    """Regression: a byte size of 2**62 / 2**64-1 gave INTERNAL_ERROR 'MemoryError' /
    'OverflowError' from every deserializing _ext call."""
    ffi, lib = capi
    out = ffi.new("hipdnnBackendDescriptor_t*")
    data = b"\x00" * 64
    h = ffi.new("hipdnnHandle_t*")
    assert lib.hipdnnCreate(h) == 0
    try:
        for n in (2**31, 2**40, 2**62, 2**63 - 1, 2**64 - 1):
            calls = [
                lambda: lib.hipdnnBackendCreateAndDeserializeGraph_ext(out, data, n),
                lambda: lib.hipdnnBackendCreateAndDeserializeJsonGraph_ext(out, b"{}", n),
                lambda: lib.hipdnnBackendGetSerializedBinaryContents_ext(data, n, ffi.new("int*")),
                lambda: lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h[0], out, data, n),
            ]
            for call in calls:
                st = call()
                msg = _err(ffi, lib)
                assert st == lib.HIPDNN_STATUS_BAD_PARAM, (n, st, msg)
                assert "too large" in msg, msg
    finally:
        lib.hipdnnDestroy(h[0])


def test_invalid_global_log_level_sets_a_last_error(capi):
    """Regression: BAD_PARAM with an empty last-error slot."""
    ffi, lib = capi
    _err(ffi, lib)
    for level in (5, 77, 2**31 - 1):
        assert lib.hipdnnBackendSetGlobalLogLevel_ext(level) == lib.HIPDNN_STATUS_BAD_PARAM
        msg = _err(ffi, lib)
        assert "invalid log level" in msg, msg
    lv = ffi.new("hipdnnSeverity_t*")
    assert lib.hipdnnBackendGetGlobalLogLevel_ext(lv) == 0  # the level did not change
    assert lv[0] in (lib.HIPDNN_SEV_OFF, lib.HIPDNN_SEV_INFO, lib.HIPDNN_SEV_WARN,
                     lib.HIPDNN_SEV_ERROR, lib.HIPDNN_SEV_FATAL)


if __name__ == "__main__":
    print(json.dumps(drive(int(sys.argv[1]), int(sys.argv[2]))))
