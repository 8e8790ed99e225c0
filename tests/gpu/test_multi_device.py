"""CI (no GPU): the HIP engine's device binding against a fake two-device platform
(fake_devices.py; docs/gpu.md "Many GPUs in one process").

Plugin handles bind to the thread's current device at creation; plans build, load their modules
and launch on their handle's device whatever device the calling thread has current (and leave
it as it was); cross-device handles, streams and buffers are BAD_PARAM naming the devices; a
serialized plan restores onto the restoring handle's device; two threads drive two devices at
once.  The same checks through the backend C API are in test_multi_device_capi.py."""
from __future__ import annotations

import threading
import types

import pytest

import fake_devices
from gpu_testlib import T, graph_bytes, matmul, pw


@pytest.fixture
def fake():
    p = fake_devices.install(2)
    yield p
    fake_devices.uninstall()


def _plugin():
    from engine_plugins.hip_kernels import create_plugin
    return create_plugin()


def _handle(plugin, dev, fake):
    """A plugin handle created while ``dev`` is the thread's current device."""
    from hipdnn_cabi.plugin_sdk.core import PluginHandle
    old = fake.current_device()
    fake.set_current(dev)
    try:
        return PluginHandle(plugin.acquire_container())
    finally:
        fake.set_current(old)


def _cfg():
    from engine_plugins.hip_kernels.engine import ENGINE_NAME
    from hipdnn_cabi.plugin_sdk import engine_id_of
    return types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={}, raw=b"")


def _graph(kind="pw"):
    from hipdnn_cabi.plugin_sdk import parse_graph
    if kind == "pw":
        x, b, y = T(1, [2, 8, 4, 4]), T(2, [1, 8, 1, 1]), T(3, [2, 8, 4, 4])
        return parse_graph(graph_bytes([x, b, y], [pw("ADD", 1, 3, 2)])), (1, 2, 3)
    a, b, c = T(1, [1, 64, 32]), T(2, [1, 32, 48]), T(3, [1, 64, 48])
    return parse_graph(graph_bytes([a, b, c], [matmul(1, 2, 3)])), (1, 2, 3)


def _bufs(ptrs):
    import cffi
    from hipdnn_cabi.plugin_sdk import DeviceBuffers
    return DeviceBuffers(dict(ptrs), ffi=cffi.FFI())


def _alloc(fake, dev, uids):
    rt = fake.runtime(dev)
    return {u: rt.malloc(4096) for u in uids}


def _ws(fake, dev, ph, ctx):
    n = ph.get_workspace_size_from_context(ctx)
    return fake.runtime(dev).malloc(n) if n else 0


def test_handles_bind_to_current_device(fake):
    pl = _plugin()
    h0, h1 = _handle(pl, 0, fake), _handle(pl, 1, fake)
    assert (h0.device, h1.device) == (0, 1)
    from hipdnn_cabi import device
    assert device.current_device() == 0 and device.device_count() == 2


@pytest.mark.parametrize("kind", ["pw", "gemm"])
def test_plan_builds_and_runs_on_handle_device(fake, kind):
    pl = _plugin()
    h1 = _handle(pl, 1, fake)
    s1 = fake.make_stream(1)
    h1.set_stream(s1)
    g, uids = _graph(kind)
    assert fake.current_device() == 0                       # the thread stays on device 0
    assert h1.get_applicable_engine_ids(g) == [_cfg().engine_id]
    ctx = h1.create_execution_context(_cfg(), g)
    assert ctx.plan.device == 1 and fake.current_device() == 0
    rt0, rt1 = fake.runtime(0), fake.runtime(1)
    assert rt1.loads and not rt0.loads                      # modules in device 1's context only
    h1.execute(ctx, _ws(fake, 1, h1, ctx), _bufs(_alloc(fake, 1, uids)))
    assert rt1.launches and all(l[0] == 1 and l[2] == s1 for l in rt1.launches)
    assert not rt0.launches and fake.current_device() == 0  # the caller's device is restored


def test_module_cache_per_device_context(fake):
    pl = _plugin()
    h0, h1 = _handle(pl, 0, fake), _handle(pl, 1, fake)
    g, _ = _graph("gemm")
    h0.create_execution_context(_cfg(), g)
    n0 = len(fake.runtime(0).loads)
    h0.create_execution_context(_cfg(), g)                  # same device: loaded once
    assert len(fake.runtime(0).loads) == n0
    h1.create_execution_context(_cfg(), g)                  # other device: its own load ...
    assert len(fake.runtime(1).loads) == n0
    assert len(fake.compiled) == n0                         # ... of the same compiled code


def test_execute_with_handle_of_other_device(fake):
    from hipdnn_cabi.plugin_sdk.errors import BAD_PARAM, PluginError
    pl = _plugin()
    h0, h1 = _handle(pl, 0, fake), _handle(pl, 1, fake)
    g, uids = _graph()
    ctx = h1.create_execution_context(_cfg(), g)
    with pytest.raises(PluginError) as ei:
        h0.execute(ctx, 0, _bufs(_alloc(fake, 1, uids)))
    assert ei.value.status == BAD_PARAM
    assert "built for device 1" in ei.value.message and "device 0" in ei.value.message
    assert not fake.runtime(0).launches and not fake.runtime(1).launches


def test_execute_with_buffer_on_other_device(fake):
    from hipdnn_cabi.plugin_sdk.errors import BAD_PARAM, PluginError
    pl = _plugin()
    h1 = _handle(pl, 1, fake)
    g, uids = _graph()
    ctx = h1.create_execution_context(_cfg(), g)
    ptrs = _alloc(fake, 1, uids)
    ptrs[2] = fake.runtime(0).malloc(4096)                  # uid 2 lives on device 0
    with pytest.raises(PluginError) as ei:
        h1.execute(ctx, 0, _bufs(ptrs))
    m = ei.value.message
    assert ei.value.status == BAD_PARAM and "uid 2" in m and "device 0" in m and "device 1" in m
    assert not fake.runtime(1).launches
    ptrs[2] = fake_devices.MANAGED_BASE + 0x1000            # managed memory is device-neutral
    h1.execute(ctx, 0, _bufs(ptrs))
    assert fake.runtime(1).launches


def test_stream_of_other_device_refused(fake):
    from hipdnn_cabi.plugin_sdk.errors import BAD_PARAM, PluginError
    pl = _plugin()
    h1 = _handle(pl, 1, fake)
    s0, s1 = fake.make_stream(0), fake.make_stream(1)
    h1.set_stream(s1)
    with pytest.raises(PluginError) as ei:
        h1.set_stream(s0)
    assert ei.value.status == BAD_PARAM and "device 0" in ei.value.message
    assert "device 1" in ei.value.message and h1.stream == s1   # the old stream stays
    h1.set_stream(0)                                        # the null stream follows the handle
    assert h1.stream == 0


def test_unknown_stream_stored_but_never_launched_on(fake):
    from hipdnn_cabi.plugin_sdk.errors import BAD_PARAM, PluginError
    pl = _plugin()
    h0 = _handle(pl, 0, fake)
    h0.set_stream(0x5000)                                   # no such stream: stored ...
    g, uids = _graph()
    ctx = h0.create_execution_context(_cfg(), g)
    with pytest.raises(PluginError) as ei:                  # ... but no kernel goes there
        h0.execute(ctx, 0, _bufs(_alloc(fake, 0, uids)))
    assert ei.value.status == BAD_PARAM and "0x5000" in ei.value.message
    assert not fake.runtime(0).launches


def test_serialized_plan_restores_on_restoring_device(fake):
    pl = _plugin()
    h0, h1 = _handle(pl, 0, fake), _handle(pl, 1, fake)
    g, uids = _graph("gemm")
    ctx0 = h0.create_execution_context(_cfg(), g)
    data = h0.serialize_execution_context(ctx0)
    ctx1 = h1.create_execution_context_from_serialized(data)
    assert ctx0.plan.device == 0 and ctx1.plan.device == 1
    h1.execute(ctx1, _ws(fake, 1, h1, ctx1), _bufs(_alloc(fake, 1, uids)))
    assert fake.runtime(1).launches and not fake.runtime(0).launches


def test_two_threads_two_devices(fake):
    """Two threads, one handle per device each, executing at once: every launch lands on its
    handle's device, no thread's current device changes."""
    pl = _plugin()
    g, uids = _graph("gemm")
    errors, seen = [], {}
    start = threading.Barrier(2)

    def work(dev):
        try:
            fake.set_current(dev)
            h = _handle(pl, dev, fake)
            s = fake.make_stream(dev)
            h.set_stream(s)
            ctx = h.create_execution_context(_cfg(), g)
            b = _bufs(_alloc(fake, dev, uids))
            ws = _ws(fake, dev, h, ctx)
            start.wait()
            for _ in range(50):
                h.execute(ctx, ws, b)
            seen[dev] = (fake.current_device(), s)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for d in (0, 1):
        L = fake.runtime(d).launches
        assert L and all(l[0] == d and l[2] == seen[d][1] for l in L)
        assert seen[d][0] == d
        assert len({l[3] for l in L}) == 1                  # one thread per device


def test_no_gpu_handles_bind_nothing():
    from hipdnn_cabi import device
    device._install_for_tests(None)
    try:
        pl = _plugin()
        from hipdnn_cabi.plugin_sdk.core import PluginHandle
        h = PluginHandle(pl.acquire_container())
        assert h.device == -1 and device.current_device() == -1
        h.set_stream(0x5000)                                # host-only: stored unchecked
        assert h.get_applicable_engine_ids(_graph()[0]) == []
    finally:
        device._reset_for_tests()


def test_address_probe_and_bound_nesting(fake):
    import numpy as np
    from hipdnn_cabi.device.common import address_mapped, is_bound
    a = np.zeros(8)
    assert address_mapped(a.ctypes.data) and not address_mapped(0x5000) and not address_mapped(0)
    assert not address_mapped(1 << 60)
    rt0, rt1 = fake.runtime(0), fake.runtime(1)
    fake.set_current(1)
    with rt0.bound():
        assert fake.current_device() == 0 and is_bound(rt0)
        with rt1.bound():
            assert fake.current_device() == 1 and not is_bound(rt0)
            with rt0.bound():                       # back to device 0 inside device 1's block
                assert fake.current_device() == 0
            assert fake.current_device() == 1
            with rt1.bound():                       # nested same runtime: nothing to do
                assert fake.current_device() == 1
        assert fake.current_device() == 0
    assert fake.current_device() == 1 and not is_bound(rt0)
    fake.set_current(0)


def test_runtime_of_missing_device(fake):
    from hipdnn_cabi import device
    with pytest.raises(device.DeviceError, match="device 2 does not exist"):
        device.get_runtime(2)
    assert device.get_runtime().device == 0 and device.get_runtime(1).device == 1
