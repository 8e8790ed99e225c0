"""GPU: handles, plans and launches bound to devices (docs/gpu.md "Many GPUs in one process").

One GPU (always, under ``-m gpu``): handles bind to device 0; a stream of the current device is
accepted and placed on it; a value that is no stream is stored but never launched on; pointer
attributes name the device; modules load once per device context; the caller's current context
is the same before and after the engine runs; two threads drive two handles of one device at
once.

Two or more GPUs (skipped otherwise; see the report / docs/gpu.md): each op family on device 1
only (placement by pointer attributes, results against the CPU reference), the cross-device
misuse statuses through the C API, serialization across devices, 2 threads x 2 devices."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from gpu_testlib import T, graph_bytes, matmul, pw

pytestmark = pytest.mark.gpu


def _dev():
    from hipdnn_cabi import device
    return device


def _count():
    try:
        return _dev().device_count()
    except Exception:  # noqa: BLE001
        return 0


multi = pytest.mark.skipif(_count() < 2, reason="needs a machine with 2 or more GPUs")


def _cur_ctx():
    from cuda.bindings import driver
    return int(driver.cuCtxGetCurrent()[1] or 0)


def _frontend_matmul(hf, h, m=64, n=48, k=32):
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    a = g.tensor(name="a", dim=[1, m, k])
    b = g.tensor(name="b", dim=[1, k, n])
    c = g.matmul(a, b).set_output(True)
    g.set_preferred_engine_name_ext("HIPDNN_CABI_HIP_KERNELS_ENGINE")
    g.build()
    return g, (a, b, c)


class DevBufs:
    """Device buffers of one runtime for a frontend graph: upload, run, download."""

    def __init__(self, rt, arrays):
        self.rt, self.ptrs, self.host = rt, {}, {}
        for t, arr in arrays.items():
            a = np.ascontiguousarray(arr, np.float32)
            p = rt.malloc(a.nbytes)
            rt.memcpy_htod(p, a.ctypes.data, a.nbytes)
            self.ptrs[t], self.host[t] = p, a

    def get(self, t):
        a = np.empty_like(self.host[t])
        self.rt.memcpy_dtoh(a.ctypes.data, self.ptrs[t], a.nbytes)
        return a

    def free(self):
        for p in self.ptrs.values():
            self.rt.free(p)


def _mm_arrays(ts, seed):
    r = np.random.default_rng(seed)
    a, b, c = ts
    return {a: r.standard_normal(a.get_dim()), b: r.standard_normal(b.get_dim()),
            c: np.full(c.get_dim(), np.nan)}


def _run_mm(g, ts, rt, seed, handle=None, stream=0):
    bufs = DevBufs(rt, _mm_arrays(ts, seed))
    g.execute(bufs.ptrs, handle=handle)
    rt.stream_synchronize(stream)
    a, b, c = ts
    out, ref = bufs.get(c), bufs.host[a] @ bufs.host[b]
    bufs.free()
    return float(np.max(np.abs(out - ref)) / max(1e-30, float(np.max(np.abs(ref)))))


# ---------------------------------------------------------------------------------- one GPU
def test_runtime_per_device_and_no_device_change():
    d = _dev()
    before = _cur_ctx()
    rt = d.get_runtime(0)
    assert rt is d.get_runtime(0) and rt.device == 0 and d.current_device() == 0
    assert _cur_ctx() == before                      # making a runtime changes nothing
    if d.device_count() == 1:
        with pytest.raises(d.DeviceError, match="device 1 does not exist"):
            d.get_runtime(1)


def test_pointer_attributes_name_the_device():
    d = _dev()
    rt = d.get_runtime(0)
    p = rt.malloc(1024)
    h = rt.malloc_host(1024)
    a = np.zeros(16, np.float32)
    try:
        assert d.pointer_info(p) == ("device", 0)
        assert d.pointer_info(h)[0] == "host"
        assert d.pointer_info(a.ctypes.data) == (None, -1)
        assert d.pointer_info(0x5000) == (None, -1)   # garbage is safe to ask about
        assert rt.device_accessible(p)
    finally:
        rt.free(p)
        rt.free_host(h)


def test_stream_of_current_device():
    d = _dev()
    rt = d.get_runtime(0)
    s = rt.stream_create()
    try:
        assert d.stream_device(s) == 0
        assert d.stream_device(0) is None            # the null stream follows the handle
        with pytest.raises(d.DeviceError, match="not a stream"):
            d.stream_device(0x5000)                  # unmapped: refused before CUDA sees it
    finally:
        rt.stream_destroy(s)


def test_module_loaded_once_per_context():
    rt = _dev().get_runtime(0)
    src = 'extern "C" __global__ void hdn_devtest_k(float* p) { p[threadIdx.x] = 1.0f; }'
    m1 = rt.module(src, "devtest.hip")
    m2 = rt.module(src, "devtest.hip")
    assert m1 is m2
    before = _cur_ctx()
    p = rt.malloc(256)
    rt.launch(m1.function("hdn_devtest_k"), (1, 1, 1), (64, 1, 1), [p])
    rt.synchronize()
    out = np.zeros(64, np.float32)
    rt.memcpy_dtoh(out.ctypes.data, p, out.nbytes)
    rt.free(p)
    assert np.all(out == 1.0) and _cur_ctx() == before


def test_capi_handle_bound_to_device0_and_stream_checked():
    from hipdnn_cabi import frontend as hf
    from hipdnn_cabi.backend import registry
    from hipdnn_cabi.errors import HipdnnError
    rt = _dev().get_runtime(0)
    s = rt.stream_create()
    with hf.Handle() as h:
        hid = int(h.api.ffi.cast("uintptr_t", h.raw))
        assert registry.objects[hid].device == 0 and h.device == 0
        h.set_stream(s)                              # a stream of the handle's device
        assert h.get_stream() == s
        g, ts = _frontend_matmul(hf, h)
        before = _cur_ctx()
        assert _run_mm(g, ts, rt, 1, stream=s) < 1e-5
        assert _cur_ctx() == before                  # the caller's context is restored
        h.set_stream(0x5000)                         # no such stream: stored, as hipDNN does ...
        with pytest.raises(HipdnnError) as ei:       # ... but no kernel is launched on it
            _run_mm(g, ts, rt, 2)
        assert "not a stream" in ei.value.message, ei.value.message
        h.set_stream(s)
        assert _run_mm(g, ts, rt, 3, stream=s) < 1e-5
    rt.stream_destroy(s)


def test_two_threads_one_device():
    from hipdnn_cabi import frontend as hf
    rt = _dev().get_runtime(0)
    errs, res = [], {}

    def work(i):
        try:
            s = rt.stream_create()
            with hf.Handle(stream=s) as h:
                g, ts = _frontend_matmul(hf, h, 128, 96, 64)
                res[i] = max(_run_mm(g, ts, rt, 10 * i + k, stream=s) for k in range(10))
            rt.stream_destroy(s)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs
    assert all(v < 1e-5 for v in res.values()) and len(res) == 2


# ---------------------------------------------------------------------------- two or more GPUs
FAMILIES = [   # (module, test function, args): representative cases of each op family
    ("test_gpu_ops", "test_pointwise_chain", ("HALF", "nhwc")),
    ("test_gpu_ops", "test_matmul", ("FLOAT", False)),
    ("test_gpu_ops", "test_matmul", ("HALF", True)),
    ("test_gpu_ops", "test_matmul_bias_gelu_fused", ()),
    ("test_gpu_ops", "test_conv_fwd", ("BFLOAT16", "nhwc", 0)),
    ("test_gpu_ops", "test_conv_bias_relu_fused", ("HALF", "nhwc")),
    ("test_gpu_ops", "test_conv_bwd_data", ("FLOAT", "nchw", 1)),
    ("test_gpu_ops", "test_conv_bwd_filter", ("HALF", "nhwc", 1)),
    ("test_gpu_ops", "test_conv_splitk_large", ("HALF", "nhwc")),
    ("test_gpu_ops", "test_batchnorm_train", ("FLOAT", "nchw")),
    ("test_gpu_ops", "test_batchnorm_inference", ("HALF", "nhwc")),
    ("test_gpu_ops", "test_batchnorm_backward", ("BFLOAT16", "nhwc")),
    ("test_gpu_ops", "test_reduction", ("ADD", 1)),
    ("test_gpu_ops", "test_runtime_scalar_pointwise", ()),
    ("test_attention", "test_forward_vs_cpu_reference", (0,)),
    ("test_attention", "test_backward_vs_cpu_reference", (0,)),
]


@pytest.fixture(scope="module")
def R1():
    from gpu_run import Runner
    r = Runner(1)
    orig = r.alloc

    def alloc(t, logical=None, poison=True):    # every buffer must be device 1 memory
        p, h = orig(t, logical, poison)
        assert _dev().pointer_info(p) == ("device", 1)
        return p, h
    r.alloc = alloc
    return r


@multi
@pytest.mark.parametrize("mod,fn,args", FAMILIES, ids=[f"{f[1]}{f[2]}" for f in FAMILIES])
def test_op_family_on_device1(R1, mod, fn, args):
    import importlib
    d = _dev()
    cur = d.current_device()
    assert R1.container.device == 1
    getattr(importlib.import_module(mod), fn)(R1, *args)   # results vs the CPU reference
    assert d.current_device() == cur                        # the thread's device is untouched


@multi
def test_cross_device_misuse_capi():
    from hipdnn_cabi import frontend as hf
    from hipdnn_cabi._generated.enums import Status
    from hipdnn_cabi.errors import HipdnnError
    d = _dev()
    rt0, rt1 = d.get_runtime(0), d.get_runtime(1)
    s0, s1 = rt0.stream_create(), rt1.stream_create()
    with rt1.bound():
        h1 = hf.Handle()
    h0 = hf.Handle() if d.current_device() == 0 else None
    if h0 is None:
        with rt0.bound():
            h0 = hf.Handle()
    assert (h0.device, h1.device) == (0, 1)
    with pytest.raises(HipdnnError) as ei:
        h1.set_stream(s0)
    assert ei.value.status == Status.HIPDNN_STATUS_BAD_PARAM_STREAM_MISMATCH
    assert "device 0" in ei.value.message and "device 1" in ei.value.message
    h1.set_stream(s1)
    g, ts = _frontend_matmul(hf, h1)
    assert _run_mm(g, ts, rt1, 1, stream=s1) < 1e-5
    with pytest.raises(HipdnnError) as ei:                  # plan of device 1, handle of 0
        _run_mm(g, ts, rt1, 2, handle=h0)
    assert ei.value.status == Status.HIPDNN_STATUS_BAD_PARAM and "device 1" in ei.value.message
    with pytest.raises(HipdnnError) as ei:                  # buffers of device 0, handle of 1
        _run_mm(g, ts, rt0, 3)
    assert ei.value.status == Status.HIPDNN_STATUS_BAD_PARAM
    assert "memory of device 0" in ei.value.message
    # serialized on device 1, restored with the device-0 handle: runs there
    h0.set_stream(s0)
    r = hf.Graph.from_bytes(g.serialize(), handle=h0)
    bufs = DevBufs(rt0, _mm_arrays(ts, 4))
    r.execute({t.uid: p for t, p in bufs.ptrs.items()})
    rt0.stream_synchronize(s0)
    a, b, c = ts
    assert np.allclose(bufs.get(c), bufs.host[a] @ bufs.host[b], rtol=1e-4, atol=1e-4)
    bufs.free()
    h0.close()
    h1.close()
    rt0.stream_destroy(s0)
    rt1.stream_destroy(s1)


@multi
def test_two_threads_two_devices():
    from hipdnn_cabi import frontend as hf
    d = _dev()
    errs, res = [], {}

    def work(dev):
        try:
            rt = d.get_runtime(dev)
            s = rt.stream_create()
            with rt.bound():            # the thread's device, as cudaSetDevice(dev) would
                with hf.Handle(stream=s) as h:
                    g, ts = _frontend_matmul(hf, h, 256, 192, 128)
                    res[dev] = max(_run_mm(g, ts, rt, 7 * dev + k, stream=s) for k in range(20))
            rt.stream_destroy(s)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs
    assert sorted(res) == [0, 1] and all(v < 1e-5 for v in res.values())
