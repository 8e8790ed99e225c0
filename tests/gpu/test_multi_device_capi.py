"""CI (no GPU): device binding through the backend C API, with the fake two-device platform
(fake_devices.py) installed in a fresh process before the library starts (the embedded library
shares the process's interpreter).  hipdnnCreate binds to the thread's current device;
hipdnnSetStream refuses another device's stream (BAD_PARAM_STREAM_MISMATCH naming both devices);
hipdnnBackendExecute refuses a plan of another device and a pack holding another device's memory
(BAD_PARAM naming them) - also once the C fast path has registered the pieces; a serialized plan
restores onto the restoring handle's device; two threads drive two devices at once."""
from __future__ import annotations

import json
import os
import sys

import pytest

from cabi_testlib import ROOT, run


def _real_gpu() -> bool:
    try:
        from hipdnn_cabi import device
        return device.available()
    except Exception:  # noqa: BLE001
        return False


# The fake two-device platform stands in for GPUs on CI machines; where a real GPU runtime is
# present its engine plugin binds the real device, so these checks run in CI only (the real
# single-GPU checks are tests/gpu/test_devices_gpu.py).
pytestmark = pytest.mark.skipif(_real_gpu(), reason="fake-device checks: CI machines without a GPU")

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r'''
import json, sys, threading
sys.path[:0] = [ROOT, HERE]
import fake_devices
fake = fake_devices.install(2)
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.backend.execute import fast_path_stats
from hipdnn_cabi._generated.enums import Status
from hipdnn_cabi.errors import HipdnnError

F32 = hf.DataType.HIPDNN_DATA_FLOAT
ENGINE = "HIPDNN_CABI_HIP_KERNELS_ENGINE"
out = {}


def handle_on(dev):
    old = fake.current_device()
    fake.set_current(dev)
    try:
        return hf.Handle()
    finally:
        fake.set_current(old)


def graph(h):
    g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    a = g.tensor(name="a", dim=[1, 64, 32]); b = g.tensor(name="b", dim=[1, 32, 48])
    c = g.matmul(a, b).set_output(True)
    g.set_preferred_engine_name_ext(ENGINE)
    g.build()
    return g, (a, b, c)


def status(fn):
    try:
        fn()
        return [0, ""]
    except HipdnnError as e:
        return [int(e.status), e.message]


h0, h1 = handle_on(0), handle_on(1)
s0, s1 = fake.make_stream(0), fake.make_stream(1)
out["set_own"] = status(lambda: h1.set_stream(s1))
out["set_other"] = status(lambda: h1.set_stream(s0))
out["stream_after"] = h1.get_stream() == s1
out["set_null"] = status(lambda: h1.set_stream(0))
h1.set_stream(s1)
out["set_unknown"] = status(lambda: h0.set_stream(0x5000))     # stored unchecked
h0.set_stream(0)

g1, (a, b, c) = graph(h1)
out["engine"] = g1.engine_name
rt0, rt1 = fake.runtime(0), fake.runtime(1)
p1 = {t: rt1.malloc(65536) for t in (a, b, c)}
out["exec_own"] = status(lambda: g1.execute(p1))
out["launch_devices"] = sorted({l[0] for l in rt1.launches}) + [len(rt0.launches)]
out["launch_stream"] = all(l[2] == s1 for l in rt1.launches)
out["current_after"] = fake.current_device()
out["exec_other_handle"] = status(lambda: g1.execute(p1, handle=h0))
bad = dict(p1); bad[b] = rt0.malloc(65536)
out["b_uid"] = b.uid
out["exec_other_buffer"] = status(lambda: g1.execute(bad))
managed = dict(p1); managed[b] = fake_devices.MANAGED_BASE + 0x100
out["exec_managed"] = status(lambda: g1.execute(managed))

# the C fast path: a persistent pack executed twice with h1 registers (h1, plan, pack); the
# same plan/pack with h0, and h0's own plan with h1's pack, must still be refused
api = g1.api
from hipdnn_cabi._generated.enums import DescriptorType as D, AttributeName as A, AttributeType as T
def pack(ptrs, ws=0):
    vp = api.create(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    api.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR,
            [api.ffi.cast("void*", ptrs[t]) for t in (a, b, c)])
    api.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, [t.uid for t in (a, b, c)])
    api.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR, [api.ffi.cast("void*", ws)])
    api.finalize(vp, "vp")
    return vp
ws1 = rt1.malloc(max(g1.get_workspace_size(), 1))
vp1 = pack(p1, ws1)
plan1 = g1._need_plan()
ex = lambda h, plan, vp: int(api.lib.hipdnnBackendExecute(h.raw, plan, vp))
before = fast_path_stats()["fast"]
out["fast_own"] = [ex(h1, plan1, vp1), ex(h1, plan1, vp1), ex(h1, plan1, vp1)]
out["fast_hits"] = fast_path_stats()["fast"] - before
g0, (a0, b0, c0) = graph(h0)
plan0 = g0._need_plan()
p0 = {t: rt0.malloc(65536) for t in (a, b, c)}
vp0 = pack(p0, rt0.malloc(max(g0.get_workspace_size(), 1)))
out["fast_warm0"] = [ex(h0, plan0, vp0), ex(h0, plan0, vp0)]    # registers h0 and plan0
out["fast_cross_plan"] = ex(h0, plan1, vp1)
out["fast_cross_pack"] = ex(h0, plan0, vp1)
out["fast_cross_pack_h1"] = ex(h1, plan1, vp0)

# serialization: built on device 1, restored with h0 -> runs on device 0
data = g1.serialize()
n0 = len(rt0.launches)
r = hf.Graph.from_bytes(data, handle=h0)
out["restored_exec"] = status(lambda: r.execute({t.uid: p0[t] for t in (a, b, c)}))
out["restored_on_0"] = len(rt0.launches) > n0

# two threads, one handle per device each, at once
errs = []
def work(dev):
    try:
        fake.set_current(dev)
        h = hf.Handle()
        st = fake.make_stream(dev)
        h.set_stream(st)
        g, (x, y, z) = graph(h)
        rt = fake.runtime(dev)
        ptrs = {t: rt.malloc(65536) for t in (x, y, z)}
        for _ in range(20):
            g.execute(ptrs)
        errs.append(("ok", dev, fake.current_device(), st))
    except Exception as e:
        errs.append(("err", dev, repr(e)))
ts = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
[t.start() for t in ts]; [t.join() for t in ts]
out["threads"] = errs
out["thread_launch_ok"] = all(l[0] == d for d in (0, 1) for l in fake.runtime(d).launches)
print("RESULT" + json.dumps(out))
'''


def _run():
    src = SCRIPT.replace("ROOT, HERE", f"{ROOT!r}, {HERE!r}")
    r = run([sys.executable, "-c", src], timeout=240, check=False)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert r.returncode == 0 and line, f"rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return json.loads(line[0][6:])


@pytest.fixture(scope="module")
def res(libpath):
    return _run()


from hipdnn_cabi._generated.enums import Status  # noqa: E402

BAD_PARAM = int(Status.HIPDNN_STATUS_BAD_PARAM)
STREAM_MISMATCH = int(Status.HIPDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)


def test_set_stream(res):
    assert res["set_own"] == [0, ""] and res["set_null"] == [0, ""]
    st, msg = res["set_other"]
    assert st == STREAM_MISMATCH and "device 0" in msg and "device 1" in msg, msg
    assert res["stream_after"]                      # the refused stream was not stored
    assert res["set_unknown"] == [0, ""]            # a value no runtime knows: stored unchecked


def test_execute_binds_to_handle_device(res):
    assert res["engine"] == "HIPDNN_CABI_HIP_KERNELS_ENGINE"
    assert res["exec_own"] == [0, ""]
    assert res["launch_devices"] == [1, 0]          # device 1 only, nothing on device 0
    assert res["launch_stream"] and res["current_after"] == 0


def test_execute_cross_device_refused(res):
    st, msg = res["exec_other_handle"]
    assert st == BAD_PARAM and "built for device 1" in msg and "device 0" in msg, msg
    st, msg = res["exec_other_buffer"]
    assert st == BAD_PARAM and "memory of device 0" in msg and "device 1" in msg, msg
    assert f"uid {res['b_uid']}" in msg
    assert res["exec_managed"] == [0, ""]


def test_fast_path_keeps_devices_apart(res):
    assert res["fast_own"] == [0, 0, 0] and res["fast_hits"] >= 2
    assert res["fast_warm0"] == [0, 0]
    assert res["fast_cross_plan"] == BAD_PARAM
    assert res["fast_cross_pack"] == BAD_PARAM
    assert res["fast_cross_pack_h1"] == BAD_PARAM


def test_serialized_plan_restores_on_restoring_device(res):
    assert res["restored_exec"] == [0, ""] and res["restored_on_0"]


def test_two_threads_two_devices(res):
    oks = sorted(t for t in res["threads"] if t[0] == "ok")
    assert len(oks) == 2, res["threads"]
    assert [(t[1], t[2]) for t in oks] == [(0, 0), (1, 1)]
    assert res["thread_launch_ok"]


def test_multi_gpu_bench_smoke(libpath):
    """bench/multi_gpu_bench.py's logic (threads, one handle + stream + pack per device, the C
    fast path) on the fake platform; the real numbers need a machine with >= 2 GPUs."""
    bench = os.path.join(ROOT, "bench", "multi_gpu_bench.py")
    r = run([sys.executable, bench, "--fake", "2", "--iters", "3", "--warm", "1",
             "--only", "gemm_fp32_2048,conv_fp16_conv3_3x3_b32"], timeout=240, check=False)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")]
    assert r.returncode == 0 and line, f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    res = json.loads(line[0][6:])
    assert res["gpus"] == 2 and set(res["cases"]) == {"gemm_fp32_2048", "conv_fp16_conv3_3x3_b32"}
    assert all(c["scaling"] > 0 for c in res["cases"].values())
