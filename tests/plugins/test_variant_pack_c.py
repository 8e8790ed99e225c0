"""C-resident variant packs (cdef/vpack.c).

* one battery of Create/Set/Get/Finalize/Destroy/Execute calls (every attribute × type × count ×
  NULL pointers × finalized or not, plus ids of other kinds and destroyed ids) gives the same
  status, last-error message and output bytes with C-resident packs and with the Python reference
  (HIPDNN_CABI_PY_VARIANT_PACK=1);
* create/set/get/finalize/destroy of a pack, and the execute of a new pack of a plan that ran
  once, never enter Python (a profile hook sees no backend entry call);
* kind checks elsewhere (a pack given as an operation, a graph or a heuristic result) still say
  "type mismatch" / "not an operation", not "invalid or destroyed".
"""
from __future__ import annotations

from plugins_testlib import py

BATTERY = r"""
from hipdnn_cabi._generated.enums import Status
out = {}
VP = D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
names = [A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
         A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS_EXT,
         A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES_EXT, A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_STRIDES_EXT,
         A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_LENGTHS_EXT, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, 99999, 2**31 - 1]
types = [T.HIPDNN_TYPE_VOID_PTR, T.HIPDNN_TYPE_INT64, T.HIPDNN_TYPE_INT32, 777]
counts = [-1, 0, 1, 2, 3, 9, 2**24 + 1, 2**62]
data = ffi.new("int64_t[16]", list(range(100, 116)))

def rec(key, st):
    out[key] = [int(st), err()]

def fresh():
    return desc(VP)

# ---- set on a fresh pack, then on a finalized one
for nm in names:
    for ty in types:
        for c in counts:
            for arr in (data, ffi.NULL):
                if c > 16 and c <= 2**24 and arr != ffi.NULL:
                    continue  # would read past `data`
                d = fresh()
                rec(f"set/{nm}/{ty}/{c}/{arr != ffi.NULL}",
                    lib.hipdnnBackendSetAttribute(d, nm, ty, c, arr))
                lib.hipdnnBackendDestroyDescriptor(d)

def good_pack(n=3, ws=0x1000, overrides=False):
    d = fresh()
    assert set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t",
                    list(range(1, n + 1))) == 0, err()
    assert set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*",
                    [ffi.cast("void*", 0x10000 * (i + 1)) for i in range(n)]) == 0, err()
    assert set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR, "void*",
                    [ffi.cast("void*", ws)]) == 0
    if overrides:
        assert set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES_EXT, T.HIPDNN_TYPE_INT64,
                        "int64_t", [4, 5]) == 0
    return d

fin = good_pack(12)
rec("fin", lib.hipdnnBackendFinalize(fin))
rec("refin", lib.hipdnnBackendFinalize(fin))
for nm in names[:3] + [99999]:
    rec(f"set_after_fin/{nm}", lib.hipdnnBackendSetAttribute(fin, nm, T.HIPDNN_TYPE_INT64, 1, data))

# ---- finalize rules
d = fresh(); rec("fin_empty", lib.hipdnnBackendFinalize(d))
d = fresh(); set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [1, 2])
rec("fin_mismatch", lib.hipdnnBackendFinalize(d))
d = fresh(); set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*", [])
rec("fin_zero_ptrs", lib.hipdnnBackendFinalize(d))
d = fresh(); set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*",
                      [ffi.cast("void*", 8)])
rec("fin_ptr_no_uid", lib.hipdnnBackendFinalize(d))
# sets replace (not append)
d = fresh()
set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [1, 2, 3])
set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [7])
set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*", [ffi.cast("void*", 8)])
rec("fin_replaced", lib.hipdnnBackendFinalize(d))

# ---- get: unfinalized, finalized (with and without overrides set)
unfin = good_pack()
fin_o = good_pack(overrides=True); lib.hipdnnBackendFinalize(fin_o)
for label, d in (("unfin", unfin), ("fin", fin), ("fin_o", fin_o)):
    for nm in names:
        for ty in types:
            for req in (-1, 0, 1, 2, 5, 20):
                for with_cnt in (True, False):
                    for with_arr in (True, False):
                        buf = ffi.new("int64_t[24]", [-7] * 24)
                        cnt = ffi.new("int64_t*", -9)
                        st = lib.hipdnnBackendGetAttribute(d, nm, ty, req, cnt if with_cnt else ffi.NULL,
                                                           buf if with_arr else ffi.NULL)
                        out[f"get/{label}/{nm}/{ty}/{req}/{with_cnt}/{with_arr}"] = [
                            int(st), err(), cnt[0], list(buf)]

# ---- destroy, ids of other kinds, destroyed ids
d = good_pack(); lib.hipdnnBackendFinalize(d)
rec("destroy", lib.hipdnnBackendDestroyDescriptor(d))
rec("destroy_again", lib.hipdnnBackendDestroyDescriptor(d))
rec("set_destroyed", set_attr(d, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [1]))
rec("get_destroyed", lib.hipdnnBackendGetAttribute(d, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                                   T.HIPDNN_TYPE_INT64, 1, ffi.new("int64_t*"), data))
rec("fin_destroyed", lib.hipdnnBackendFinalize(d))
h = create_handle()
rec("destroy_handle_as_pack", lib.hipdnnBackendDestroyDescriptor(as_desc(hid(h))))
rec("handle_destroy_with_pack", lib.hipdnnDestroy(ffi.cast("hipdnnHandle_t", int(ffi.cast("uintptr_t", fin)))))
rec("set_stream_pack", lib.hipdnnSetStream(ffi.cast("hipdnnHandle_t", int(ffi.cast("uintptr_t", fin))), ffi.NULL))
rec("garbage", lib.hipdnnBackendFinalize(as_desc(0x7AC000000000 + 0x123450)))
g = desc(D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
rec("pack_as_op", set_attr(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                           "hipdnnBackendDescriptor_t", [fin]))
rec("unfin_pack_as_op", set_attr(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                                 "hipdnnBackendDescriptor_t", [unfin]))
n = ffi.new("size_t*")
rec("serialize_pack", lib.hipdnnBackendGetSerializedBinaryGraph_ext(fin, 0, n, ffi.NULL))
rec("serialize_plan_pack", lib.hipdnnBackendGetSerializedExecutionPlan_ext(fin, 0, n, ffi.NULL))
op = desc(D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
rec("pack_as_tensor", set_attr(op, A.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                               "hipdnnBackendDescriptor_t", [fin]))
rec("tensor_as_pack_set", set_attr(desc(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR), A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                   T.HIPDNN_TYPE_INT64, "int64_t", [1]))
# ---- execute: every check with C packs as the pieces
g = standin_graph(h)
st, cfgs = heuristic_configs(g)
lib.hipdnnBackendFinalize(cfgs[0])
st, p = plan_for(cfgs[0])
x = ffi.new("float[64]")
a = (int(ffi.cast("uintptr_t", x)) + 15) // 16 * 16
rec("ex_unfin", lib.hipdnnBackendExecute(h, p, unfin))
rec("ex_pack_as_plan", lib.hipdnnBackendExecute(h, fin, fin))
rec("ex_swapped", lib.hipdnnBackendExecute(h, variant_pack([1, 2, 3], [a, a + 16, a + 32]), p))
rec("ex_ok", lib.hipdnnBackendExecute(h, p, variant_pack([1, 2, 3], [a, a + 16, a + 32])))
rec("ex_ok_new_pack", lib.hipdnnBackendExecute(h, p, variant_pack([1, 2, 3], [a, a + 16, a + 32])))
rec("ex_misaligned", lib.hipdnnBackendExecute(h, p, variant_pack([1, 2, 3], [a + 4, a + 16, a + 32])))
rec("ex_overrides", lib.hipdnnBackendExecute(h, p, fin_o))
rec("ex_destroyed", lib.hipdnnBackendExecute(h, p, d))
rec("ex_unfin_again", lib.hipdnnBackendExecute(h, p, unfin))
print(json.dumps(out))
"""


def test_c_packs_answer_like_the_python_reference(c_sample):
    env = {"HIPDNN_PLUGIN_DIR": c_sample}
    c = py(BATTERY, env, timeout=600)
    ref = py(BATTERY, {**env, "HIPDNN_CABI_PY_VARIANT_PACK": "1"}, timeout=600)
    assert len(c) == len(ref) > 3000
    diff = [k for k in ref if c.get(k) != ref[k]]
    assert not diff, [(k, c.get(k), ref[k]) for k in diff[:5]]
    # and a few answers spelled out (spec §1.10, §4.1)
    assert c["fin"] == c["refin"] == [0, ""]
    assert c["fin_empty"] == [2, "VariantPackDescriptor::finalize() failed: empty variant pack"]
    assert c["fin_mismatch"][0] == 2 and "0 data pointers but 2 unique ids" in c["fin_mismatch"][1]
    assert c["set_after_fin/700"] == [1, "VariantPackDescriptor::setAttribute() failed: Already finalized."]
    assert c["destroy"] == [0, ""] and c["destroy_again"][0] == 3
    assert c["pack_as_op"] == [8, "Descriptor does not implement IGraphOperation"]
    assert c["serialize_pack"][1] == "Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch."
    assert c["ex_ok"] == c["ex_ok_new_pack"] == [0, ""]
    assert c["ex_unfin"] == [2, "hipdnnBackendExecute: variant pack is not finalized"]
    assert c["ex_misaligned"][0] == 2 and c["ex_destroyed"][0] == 3


NO_PYTHON = r"""
import sys
from hipdnn_cabi.backend import runtime, entry
from hipdnn_cabi.backend import execute as bexec
h = create_handle()
g = standin_graph(h)
st, cfgs = heuristic_configs(g)
lib.hipdnnBackendFinalize(cfgs[0])
st, p = plan_for(cfgs[0])
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [10] * 4); y = ffi.new("float[4]")
addr = lambda c: int(ffi.cast("uintptr_t", c))
assert lib.hipdnnBackendExecute(h, p, variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])) == 0
live0 = runtime.lib.hipdnn_cabi_vp_live()
seen = []
def prof(frame, event, arg):
    if event == "call" and "hipdnn_cabi" in frame.f_code.co_filename:
        seen.append(frame.f_code.co_filename.rsplit("/", 1)[-1] + ":" + frame.f_code.co_name)
uids = ffi.new("int64_t[]", [1, 2, 3]); ptrs = ffi.new("void*[]", [x, b, y]); ws = ffi.new("void**")
cnt = ffi.new("int64_t*"); got = ffi.new("int64_t[3]")
s0 = bexec.fast_path_stats()
sys.setprofile(prof)
sts = []
for i in range(50):
    vp = ffi.new("hipdnnBackendDescriptor_t*")
    sts.append(lib.hipdnnBackendCreateDescriptor(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, vp))
    sts.append(lib.hipdnnBackendSetAttribute(vp[0], A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, 3, ptrs))
    sts.append(lib.hipdnnBackendSetAttribute(vp[0], A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, 3, uids))
    sts.append(lib.hipdnnBackendSetAttribute(vp[0], A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR, 1, ws))
    sts.append(lib.hipdnnBackendFinalize(vp[0]))
    sts.append(lib.hipdnnBackendGetAttribute(vp[0], A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, 3, cnt, got))
    sts.append(lib.hipdnnBackendExecute(h, p, vp[0]))
    sts.append(lib.hipdnnBackendDestroyDescriptor(vp[0]))
sys.setprofile(None)
s1 = bexec.fast_path_stats()
print(json.dumps({"seen": sorted(set(seen)), "sts": sorted(set(sts)), "fast": s1["fast"] - s0["fast"],
                  "y": list(y), "live": [live0, runtime.lib.hipdnn_cabi_vp_live()], "got": list(got)}))
"""


def test_frontend_style_execute_never_enters_python(c_sample):
    r = py(NO_PYTHON, {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["sts"] == [0]
    assert r["fast"] == 50
    assert r["y"] == [11.0, 12.0, 13.0, 14.0] and r["got"] == [1, 2, 3]
    assert r["live"] == [1, 1]  # the first pack (never destroyed) only: no leak
    assert [s for s in r["seen"] if "entry.py" in s or "execute.py" in s] == [], r["seen"]


PROFILE_CHECK = r"""
import sys
seen = []
def prof(frame, event, arg):
    if event == "call" and "hipdnn_cabi" in frame.f_code.co_filename:
        seen.append(frame.f_code.co_name)
t = desc(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
sys.setprofile(prof)
set_attr(t, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE, "int", [0])  # not a C field
sys.setprofile(None)
print(json.dumps({"seen": seen}))
"""


def test_the_profile_hook_does_see_python_entries(c_sample):
    # the check above is meaningful: a call that does enter Python is seen
    r = py(PROFILE_CHECK, {"HIPDNN_PLUGIN_DIR": c_sample})
    assert "set_attribute" in r["seen"], r


THREADS = r"""
import threading, random
from hipdnn_cabi.backend import runtime
h = create_handle()
g = standin_graph(h)
st, cfgs = heuristic_configs(g)
lib.hipdnnBackendFinalize(cfgs[0])
st, p = plan_for(cfgs[0])
addr = lambda c: int(ffi.cast("uintptr_t", c))
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [10] * 4)
first = variant_pack([1, 2, 3], [addr(x), addr(b), addr(ffi.new("float[4]"))])
assert lib.hipdnnBackendExecute(h, p, first) == 0
live0 = runtime.lib.hipdnn_cabi_vp_live()
bad, ys = [], [ffi.new("float[4]") for _ in range(4)]
shared = []
def worker(i):
    y = ys[i]
    uids = ffi.new("int64_t[]", [1, 2, 3]); ptrs = ffi.new("void*[]", [x, b, y]); ws = ffi.new("void**")
    for k in range(400):
        vp = ffi.new("hipdnnBackendDescriptor_t*")
        s = [lib.hipdnnBackendCreateDescriptor(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, vp),
             lib.hipdnnBackendSetAttribute(vp[0], A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, 3, ptrs),
             lib.hipdnnBackendSetAttribute(vp[0], A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, 3, uids),
             lib.hipdnnBackendSetAttribute(vp[0], A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR, 1, ws),
             lib.hipdnnBackendFinalize(vp[0]),
             lib.hipdnnBackendExecute(h, p, vp[0])]
        if k % 50 == 0:
            shared.append(vp[0])   # the racer destroys these
        else:
            s.append(lib.hipdnnBackendDestroyDescriptor(vp[0]))
        if any(s):
            bad.append((i, s))
racer_st = set()
def racer():
    cnt = ffi.new("int64_t*"); out = ffi.new("int64_t[3]")
    r = random.Random(1)
    for _ in range(3000):
        if not shared:
            continue
        d = r.choice(shared)
        op = r.randrange(3)
        if op == 0:
            racer_st.add(("destroy", lib.hipdnnBackendDestroyDescriptor(d)))
        elif op == 1:
            racer_st.add(("get", lib.hipdnnBackendGetAttribute(d, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, 3, cnt, out)))
        else:
            racer_st.add(("exec", lib.hipdnnBackendExecute(h, p, d)))
ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)] + [threading.Thread(target=racer)]
for t in ts: t.start()
for t in ts: t.join()
for d in shared:
    lib.hipdnnBackendDestroyDescriptor(d)
print(json.dumps({"bad": bad[:5], "ys": [list(y) for y in ys], "racer": sorted(racer_st),
                  "live": [live0, runtime.lib.hipdnn_cabi_vp_live()]}))
"""


def test_threads_create_execute_destroy_and_racing_destroys(c_sample):
    r = py(THREADS, {"HIPDNN_PLUGIN_DIR": c_sample}, timeout=300)
    assert r["bad"] == []
    assert all(y == [11.0, 12.0, 13.0, 14.0] for y in r["ys"])
    # a pack the racer destroyed answers "invalid or destroyed" (3) afterwards, never crashes
    assert {s for _, s in r["racer"]} <= {0, 3}, r["racer"]
    assert r["live"][1] == r["live"][0]


THREAD_CACHES = r"""
import threading
from hipdnn_cabi.backend import runtime
VP, TN = D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR
iid = lambda d: int(ffi.cast("intptr_t", d))
vslot = lambda d: ((iid(d) - 0x7AC000000000) >> 4) >> 32
aslot = lambda d: ((iid(d) - 0x0800000000000000) >> 4) >> 32
lib.hipdnnBackendDestroyDescriptor(desc(VP))  # starts the library (runtime.lib)
live0 = [runtime.lib.hipdnn_cabi_vp_live(), runtime.lib.hipdnn_cabi_as_count()]
left, dead, bad, slots = [], [], [], []
uids = ffi.new("int64_t[]", [1, 2, 3]); ptrs = ffi.new("void*[]", [ffi.cast("void*", 64 * k) for k in (1, 2, 3)])
def worker(keep):
    mine = []
    for k in range(150):  # more than a thread cache holds: spills to the shared lists
        mine.append((desc(VP), desc(TN)))
    for k, (v, t) in enumerate(mine):
        slots.append((vslot(v), aslot(t)))
        if k < keep:
            left.append(v); left.append(t)  # destroyed by the main thread
        else:
            s = [lib.hipdnnBackendSetAttribute(v, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, 3, uids),
                 lib.hipdnnBackendDestroyDescriptor(v), lib.hipdnnBackendDestroyDescriptor(t)]
            if any(s):
                bad.append(s)
            dead.append(v); dead.append(t)
    # a pack / record this thread destroyed comes back cleared
    v = desc(VP)
    fst = lib.hipdnnBackendFinalize(v)  # (not "0 data pointers but 3 unique ids")
    if fst == 0 or "empty variant pack" not in err():
        bad.append(("reused pack not cleared", fst, err()))
    lib.hipdnnBackendDestroyDescriptor(v)
for rnd in range(6):  # short-lived threads: what each holds at exit goes back to the shared lists
    ts = [threading.Thread(target=worker, args=(10 * i,)) for i in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
for d in left:
    if lib.hipdnnBackendDestroyDescriptor(d) != 0:
        bad.append(("left", err()))
dead_st = sorted({lib.hipdnnBackendDestroyDescriptor(d) for d in dead[:200]})
print(json.dumps({"bad": bad[:5], "live": [live0, [runtime.lib.hipdnn_cabi_vp_live(),
                  runtime.lib.hipdnn_cabi_as_count()]], "dead": dead_st,
                  "max_slot": [max(s for s, _ in slots), max(s for _, s in slots)]}))
"""


def test_thread_caches_flush_at_exit_and_slots_are_reused(c_sample):
    # per-thread caches of free slots and objects (cdef/vpack.c): 24 short-lived threads each
    # create 150 packs and 150 TENSOR descriptors; nothing leaks, a destroyed id stays destroyed,
    # slots come back (a thread's cache at exit included), a reused pack starts empty
    r = py(THREAD_CACHES, {"HIPDNN_PLUGIN_DIR": c_sample}, timeout=300)
    assert r["bad"] == [], r["bad"]
    assert r["live"][1] == r["live"][0]
    assert r["dead"] == [3], r["dead"]  # invalid or destroyed
    # 4 threads at a time hold <= 150 each (+ the main thread's, + up to 64 cached free slots per
    # thread and what sits on other shards' lists when a new thread starts); without the exit
    # flush and reuse the tables would grow by 24 * 150 = 3600
    assert max(r["max_slot"]) < 3600 // 2, r["max_slot"]
