"""The C execute fast path (cdef/shims.c, docs/plugins.md "The execute fast path").

* it is taken (C counter) for .so and Python plugins once a handle/plan/pack ran on the Python path;
* every §4.1 status and last-error message is the same with it on and off (same process, and
  fresh processes with HIPDNN_CABI_NO_FAST_EXECUTE=1), including destroyed ids, the alignment
  check against another plan, override packs and a plugin failure decided in C;
* destroying ids while other threads execute is safe.
"""
from __future__ import annotations

import os
import textwrap

import pytest
from plugins_testlib import ROOT, py

SETUP = """
from hipdnn_cabi.backend import execute as bexec
addr = lambda c: int(ffi.cast("uintptr_t", c))
h = create_handle()
g = standin_graph(h)
st, cfgs = heuristic_configs(g)
assert st == 0 and len(cfgs) >= 1, (st, err())
assert lib.hipdnnBackendFinalize(cfgs[0]) == 0, err()
st, p = plan_for(cfgs[0])
assert st == 0, err()
def aligned(n, align):
    raw = ffi.new("char[]", n + 2 * align)
    a = (addr(raw) + align - 1) // align * align
    return raw, a
"""

MATRIX = SETUP + """
out = {}
def ex(name, hh, pp, vv):
    st = lib.hipdnnBackendExecute(hh, pp, vv)
    out[name] = [st, err()]
keep, a = aligned(256, 64)
x = ffi.cast("float*", a); b = ffi.cast("float*", a + 64); y = ffi.cast("float*", a + 128)
for i in range(4):
    x[i] = i + 1; b[i] = 10 * (i + 1)
vp = variant_pack([1, 2, 3], [a, a + 64, a + 128])
s0 = bexec.fast_path_stats()
ex("first", h, p, vp)
ex("second", h, p, vp)
out["y"] = [y[i] for i in range(4)]
# §4.1 in order, with the registered handle/plan/pack as the valid pieces
ex("null_handle", ffi.NULL, p, vp)
ex("null_plan", h, ffi.NULL, vp)
ex("null_vp", h, p, ffi.NULL)
ex("garbage_plan", h, as_desc(0x1230), vp)
ex("garbage_vp", h, p, as_desc(0x1230))
ex("handle_as_plan", h, as_desc(hid(h)), vp)
ex("swapped", h, vp, p)
ex("plan_as_vp", h, p, p)
ex("vp_as_plan", h, vp, vp)
ex("plan_as_handle", ffi.cast("hipdnnHandle_t", addr(p)), p, vp)
ex("unfin_plan", h, desc(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR), vp)
ex("unfin_vp", h, p, desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR))
mis = variant_pack([1, 2, 3], [a + 4, a + 64, a + 128])
ex("misaligned", h, p, mis)
ex("misaligned_again", h, p, mis)
vp16 = variant_pack([1, 2, 3], [a + 16, a + 64, a + 128])
ex("p16_vp16", h, p, vp16)
ex("p16_vp16_again", h, p, vp16)
# override attributes: never registered, the Python path decides
ovr = desc(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
set_attr(ovr, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR, "void*", [ffi.cast("void*", a)] * 3)
set_attr(ovr, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, "int64_t", [1, 2, 3])
set_attr(ovr, A.HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS_EXT, T.HIPDNN_TYPE_INT64, "int64_t", [1])
lib.hipdnnBackendFinalize(ovr)
ex("override", h, p, ovr)
ex("override_again", h, p, ovr)
# destroyed ids that were registered
vp2 = variant_pack([1, 2, 3], [a, a + 64, a + 128])
ex("vp2", h, p, vp2)
ex("vp2_again", h, p, vp2)
out["destroy_vp2"] = lib.hipdnnBackendDestroyDescriptor(vp2)
ex("vp2_destroyed", h, p, vp2)
st, p2 = plan_for(cfgs[0])
ex("p2", h, p2, vp)
ex("p2_again", h, p2, vp)
out["destroy_p2"] = lib.hipdnnBackendDestroyDescriptor(p2)
ex("p2_destroyed", h, p2, vp)
ex("after_destroys", h, p, vp)
h2 = create_handle()
ex("other_handle", h2, p, vp)
ex("other_handle_again", h2, p, vp)
out["destroy_h2"] = lib.hipdnnDestroy(h2)
ex("h2_destroyed", h2, p, vp)
ex("last", h, p, vp)
s1 = bexec.fast_path_stats()
out["fast"] = s1["fast"] - s0["fast"]
print(json.dumps(out))
"""

# the cases that are successes with a registered handle/plan/pack: on the fast path when it is on
FAST_CASES = ("second", "p16_vp16_again", "vp2_again", "p2_again",
              "after_destroys", "other_handle_again", "last")
# C-resident packs (cdef/vpack.c): a NEW finalized pack of a registered handle/plan is fast too
NEW_PACK_FAST_CASES = ("p16_vp16", "vp2")


def _matrix(c_sample, **env):
    return py(MATRIX, {"HIPDNN_PLUGIN_DIR": c_sample, **env})


def test_statuses_and_messages_identical_on_and_off(c_sample):
    on = _matrix(c_sample)
    off = _matrix(c_sample, HIPDNN_CABI_NO_FAST_EXECUTE="1")
    py_packs = _matrix(c_sample, HIPDNN_CABI_PY_VARIANT_PACK="1")  # the Python reference packs
    assert off.pop("fast") == 0
    fast = on.pop("fast")
    assert fast == len(FAST_CASES) + len(NEW_PACK_FAST_CASES), (fast, on)
    assert py_packs.pop("fast") == len(FAST_CASES)
    assert on == off == py_packs
    # and they are the §4.1 answers
    assert on["y"] == [11.0, 22.0, 33.0, 44.0]
    for k in ("first",) + FAST_CASES + ("vp2", "p2", "other_handle", "p16_vp16"):
        assert on[k] == [0, ""], (k, on[k])
    for k in ("null_handle", "null_plan", "null_vp", "garbage_plan", "garbage_vp", "handle_as_plan",
              "plan_as_handle", "vp2_destroyed", "p2_destroyed", "h2_destroyed"):
        assert on[k][0] == 3, (k, on[k])
    for k in ("swapped", "plan_as_vp", "vp_as_plan"):
        assert on[k] == [2, "Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch."]
    assert on["unfin_plan"] == [2, "hipdnnBackendExecute: execution plan is not finalized"]
    assert on["unfin_vp"] == [2, "hipdnnBackendExecute: variant pack is not finalized"]
    want = "Tensor uid 1 device pointer is not aligned to the required 16 bytes"
    assert on["misaligned"] == on["misaligned_again"] == [2, want]
    assert on["override"][0] == on["override_again"][0] == 8
    assert on["destroy_vp2"] == on["destroy_p2"] == on["destroy_h2"] == 0


def test_runtime_switch_in_one_process(c_sample):
    r = py(SETUP + """
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [1, 1, 1, 1]); y = ffi.new("float[4]")
vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
out = {}
s = [bexec.fast_path_stats()]
out["first"] = lib.hipdnnBackendExecute(h, p, vp)
s.append(bexec.fast_path_stats())
out["on"] = [lib.hipdnnBackendExecute(h, p, vp) for _ in range(5)]
s.append(bexec.fast_path_stats())
bexec.set_fast_path(False)
out["off"] = [lib.hipdnnBackendExecute(h, p, vp) for _ in range(5)]
s.append(bexec.fast_path_stats())
bexec.set_fast_path(True)
out["again"] = [lib.hipdnnBackendExecute(h, p, vp) for _ in range(5)]
s.append(bexec.fast_path_stats())
out["fast"] = [b["fast"] - a["fast"] for a, b in zip(s, s[1:])]
out["registered"] = s[1]["registered"]
out["y"] = list(y)
lib.hipdnnBackendDestroyDescriptor(vp); lib.hipdnnBackendDestroyDescriptor(p); lib.hipdnnDestroy(h)
out["registered_after"] = bexec.fast_path_stats()["registered"]
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["first"] == 0 and r["on"] == r["off"] == r["again"] == [0] * 5
    assert r["fast"] == [0, 5, 0, 5], r
    assert r["registered"] == 3 and r["registered_after"] == 0
    assert r["y"] == [2.0, 3.0, 4.0, 5.0]


FLAKY = textwrap.dedent('''
    """flaky: one engine for any graph; y = x + b on float[4]; fails while FAIL is set."""
    from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase
    from hipdnn_cabi.plugin_sdk.errors import PluginError
    import numpy as np
    FAIL = []
    CALLS = []

    class Plan(PlanBase):
        def execute(self, handle, buffers, workspace):
            CALLS.append(workspace)
            if FAIL:
                raise PluginError(FAIL[0], "flaky: refused on purpose")
            ffi = buffers._ffi
            x, b, y = (np.frombuffer(ffi.buffer(ffi.cast("float*", buffers[u]), 16), np.float32)
                       for u in (1, 2, 3))
            np.add(x, b, out=y)

    class Builder(PlanBuilderBase):
        def is_applicable(self, handle, graph):
            return True

        def build_plan(self, handle, graph, config):
            return Plan()

    class Engine(EngineBase):
        name = "HIPDNN_CABI_FLAKY_ENGINE"
        plan_builder = Builder()

    class Flaky(EnginePluginBase):
        name = "flaky"
        version = "0.1.0"
        api_version = "1.3.0"  # non-default tensor alignments
        engines = [Engine]

    hipdnn_plugin = Flaky
''')

PY_PLUGIN = SETUP + """
import sys
flaky = [m for n, m in sys.modules.items() if hasattr(m, "FAIL") and hasattr(m, "Flaky")][0]
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [1, 1, 1, 1]); y = ffi.new("float[4]")
ws = ffi.new("char[64]")
vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)], ws=addr(ws))
out = {}
s0 = bexec.fast_path_stats()
out["ok"] = [lib.hipdnnBackendExecute(h, p, vp) for _ in range(3)]
out["y"] = list(y)
flaky.FAIL.append(2)
out["fail"] = [lib.hipdnnBackendExecute(h, p, vp), err()]
out["fail_again"] = [lib.hipdnnBackendExecute(h, p, vp), err()]
flaky.FAIL[:] = [3]
out["fail3"] = [lib.hipdnnBackendExecute(h, p, vp), err()]
flaky.FAIL.clear()
out["recovered"] = [lib.hipdnnBackendExecute(h, p, vp), err()]
# a pack registered with a 16-byte plan, then used with a 64-byte plan it does not satisfy
keep, a = aligned(256, 64)
vp64 = variant_pack([1, 2, 3], [a, a + 64, a + 128])
vp16 = variant_pack([1, 2, 3], [a + 16, a + 64, a + 128])
g64 = standin_graph(h, alignment=64)
st, cfg64 = heuristic_configs(g64)
assert st == 0 and lib.hipdnnBackendFinalize(cfg64[0]) == 0, err()
st, p64 = plan_for(cfg64[0])
assert st == 0, err()
for name, pp, vv in (("p16_vp16", p, vp16), ("p16_vp16_again", p, vp16), ("p64_vp64", p64, vp64),
                     ("p64_vp64_again", p64, vp64), ("p64_vp16", p64, vp16),
                     ("p64_vp16_again", p64, vp16), ("p16_vp16_after", p, vp16),
                     ("p16_vp64", p, vp64), ("p16_vp64_again", p, vp64), ("p64_vp64_last", p64, vp64)):
    out[name] = [lib.hipdnnBackendExecute(h, pp, vv), err()]
out["fast"] = bexec.fast_path_stats()["fast"] - s0["fast"]
out["ws_ok"] = all(w in (0, addr(ws)) for w in flaky.CALLS)
print(json.dumps(out))
"""


@pytest.fixture()
def flaky_dir(tmp_path):
    d = tmp_path / "plugins"
    d.mkdir()
    (d / "flaky_plugin.py").write_text(FLAKY)
    return str(d)


def test_python_plugin_fast_path_and_plugin_failure(flaky_dir):
    env = {"HIPDNN_PLUGIN_DIR": flaky_dir, "HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS": "1"}
    on = py(PY_PLUGIN, env)
    off = py(PY_PLUGIN, {**env, "HIPDNN_CABI_NO_FAST_EXECUTE": "1"})
    fast = on.pop("fast")
    assert off.pop("fast") == 0
    assert on == off
    # ok×2, fail×2, fail3, recovered, then p16_vp16_again, p64_vp64_again, p16_vp16_after,
    # p16_vp64, p16_vp64_again, p64_vp64_last (the pack's alignments re-checked in C per plan);
    # p64_vp16 fails the check in C and goes to Python, which reports it; p16_vp16 (a new pack of
    # the registered plan) is fast with C-resident packs
    assert fast == 2 + 2 + 1 + 1 + 6 + 1, fast
    assert on["ok"] == [0, 0, 0] and on["y"] == [2.0, 3.0, 4.0, 5.0] and on["ws_ok"]
    msg = ("Failed to execute op graph. Status: HIPDNN_PLUGIN_STATUS_INVALID_VALUE(2), "
           "Error: flaky: refused on purpose")
    assert on["fail"] == on["fail_again"] == [14, msg]
    assert on["fail3"] == [14, msg.replace("INVALID_VALUE(2)", "INTERNAL_ERROR(3)")]
    assert on["recovered"] == [0, ""]
    for k in ("p16_vp16", "p16_vp16_again", "p64_vp64", "p64_vp64_again", "p16_vp16_after",
              "p16_vp64", "p16_vp64_again", "p64_vp64_last"):
        assert on[k] == [0, ""], (k, on[k])
    want = "Tensor uid 1 device pointer is not aligned to the required 64 bytes"
    assert on["p64_vp16"] == on["p64_vp16_again"] == [2, want]


def test_destroy_while_other_threads_execute(c_sample):
    r = py(SETUP + """
import threading
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [1, 1, 1, 1])
ys = [ffi.new("float[4]") for _ in range(4)]
bad = []
stop = threading.Event()
def worker(i):
    y = ys[i]
    for k in range(60):
        vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
        for _ in range(20):
            st = lib.hipdnnBackendExecute(h, p, vp)
            if st:
                bad.append((i, st, err()))
        lib.hipdnnBackendDestroyDescriptor(vp)
def churn():
    vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(ys[0])])
    while not stop.is_set():
        st, q = plan_for(cfgs[0])
        for _ in range(5):
            if lib.hipdnnBackendExecute(h, q, vp):
                bad.append(("churn", err()))
        lib.hipdnnBackendDestroyDescriptor(q)
        h2 = create_handle()
        lib.hipdnnBackendExecute(h2, p, vp)
        lib.hipdnnDestroy(h2)
ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
c = threading.Thread(target=churn)
c.start()
for t in ts: t.start()
for t in ts: t.join()
stop.set(); c.join()
print(json.dumps({"bad": bad[:5], "ys": [list(y) for y in ys],
                  "fast": bexec.fast_path_stats()["fast"]}))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["bad"] == []
    assert all(y == [2.0, 3.0, 4.0, 5.0] for y in r["ys"])
    assert r["fast"] > 1000


def test_destroy_cached_plan_and_handle_while_threads_execute(c_sample):
    # the thread records' cached (handle, plan) path (cdef/shims.c, fx_thread): threads keep
    # executing the current (handle, plan) while another thread replaces and destroys them; an
    # execute racing a destroy either runs (0) or is refused as a destroyed id on the Python path,
    # never reaches the plugin with a freed execution context or plugin handle (the C sample
    # plugin would answer PLUGIN_ERROR "unknown or destroyed ..."), never crashes
    r = py(SETUP + """
import threading, time
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [1, 1, 1, 1])
ys = [ffi.new("float[4]") for _ in range(4)]
cur = [h, p]
seen = {}
ok = [0] * 4
stop = threading.Event()
def worker(i):
    vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(ys[i])])
    while not stop.is_set():
        hh, pp = cur[0], cur[1]
        for _ in range(50):
            st = lib.hipdnnBackendExecute(hh, pp, vp)
            if st:
                seen.setdefault((st, err()[:60]), 0)
                break
            ok[i] += 1
    lib.hipdnnBackendDestroyDescriptor(vp)
def churn():
    for r in range(60):
        h2 = create_handle()
        st, q = plan_for(cfgs[0])
        old = cur[:]
        cur[0], cur[1] = h2, q
        time.sleep(0.001)
        if old[1] is not p:
            lib.hipdnnBackendDestroyDescriptor(old[1])
        if old[0] is not h:
            lib.hipdnnDestroy(old[0])
    stop.set()
ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
c = threading.Thread(target=churn)
for t in ts: t.start()
c.start(); c.join()
for t in ts: t.join()
print(json.dumps({"seen": sorted([list(k) for k in seen]), "ok": ok, "ys": [list(y) for y in ys],
                  "fast": bexec.fast_path_stats()["fast"],
                  "after": lib.hipdnnBackendExecute(h, p, variant_pack([1, 2, 3], [addr(x), addr(b), addr(ys[0])]))}))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    plugin_error = 14  # HIPDNN_STATUS_PLUGIN_ERROR: the plugin saw a freed object
    assert all(st != plugin_error and "unknown or destroyed" not in msg for st, msg in r["seen"]), r["seen"]
    assert all(y == [2.0, 3.0, 4.0, 5.0] for y in r["ys"])
    assert min(r["ok"]) > 0 and r["fast"] > 1000 and r["after"] == 0, r


def test_fork_while_a_thread_executes_on_its_record(c_sample, tmp_path):
    # fork() while another thread is inside a cached execute (its record busy; a C loop, so it is
    # in an execute most of the time): the child has no such thread, so destroying the plan and
    # handle there must not wait for it (fx_atfork_child clears the other threads' records); the
    # child's own executes still take the fast path
    src = tmp_path / "spin.c"
    src.write_text("""
#include <stdint.h>
typedef int (*exec_fn)(void*, void*, void*);
static volatile int g_stop;
long spin(uint64_t fn, void* h, void* p, void* vp)
{
    exec_fn f = (exec_fn)(uintptr_t)fn; long n = 0;
    while (!g_stop) { f(h, p, vp); ++n; }
    return n;
}
void spin_stop(void) { g_stop = 1; }
""")
    so = tmp_path / "libspin.so"
    import subprocess
    r = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(so)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("no C compiler: " + r.stderr[-200:])
    r = py(SETUP + """
import os, threading, time
ffi.cdef("long spin(uint64_t fn, void* h, void* p, void* vp); void spin_stop(void);")
spinlib = ffi.dlopen(%r)
ex = int(ffi.cast("uintptr_t", ffi.addressof(lib, "hipdnnBackendExecute")))
x = ffi.new("float[4]", [1, 2, 3, 4]); b = ffi.new("float[4]", [1, 1, 1, 1]); y = ffi.new("float[4]")
y2 = ffi.new("float[4]")
vp = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y)])
vp2 = variant_pack([1, 2, 3], [addr(x), addr(b), addr(y2)])
assert lib.hipdnnBackendExecute(h, p, vp2) == 0  # registered: the spinning thread's executes are C
n = []
t = threading.Thread(target=lambda: n.append(spinlib.spin(ex, h, p, vp2))); t.start()
time.sleep(0.05)
codes = []
for k in range(8):
    assert lib.hipdnnBackendExecute(h, p, vp) == 0
    pid = os.fork()
    if pid == 0:
        s0 = bexec.fast_path_stats()["fast"]
        ok = lib.hipdnnBackendExecute(h, p, vp) == 0 and lib.hipdnnBackendExecute(h, p, vp) == 0
        fast = bexec.fast_path_stats()["fast"] - s0
        st, q = plan_for(cfgs[0])
        ok = ok and lib.hipdnnBackendExecute(h, q, vp) == 0 and lib.hipdnnBackendExecute(h, q, vp) == 0
        ok = ok and lib.hipdnnBackendDestroyDescriptor(q) == 0 and lib.hipdnnBackendDestroyDescriptor(p) == 0
        ok = ok and lib.hipdnnDestroy(h) == 0 and fast >= 1
        os._exit(0 if ok else 3)
    for _ in range(100):  # at most 10 s: a child waiting for a thread it does not have never ends
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            codes.append(os.waitstatus_to_exitcode(status))
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9); os.waitpid(pid, 0); codes.append("hung")
        break
spinlib.spin_stop(); t.join()
print(json.dumps({"codes": codes, "y": list(y2), "spun": n[0]}))
""" % str(so), {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r["codes"] == [0] * 8, r
    assert r["y"] == [2.0, 3.0, 4.0, 5.0] and r["spun"] > 1000
