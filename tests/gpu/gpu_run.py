"""Run graphs on the HIP engine in-process (plugin SDK objects, device buffers)."""
from __future__ import annotations

import types

import numpy as np

from gpu_testlib import NP, from_storage, to_storage


class Runner:
    """``Runner(dev)``: plans, buffers and the stream on device ``dev`` (default: the current
    one); the container binds to it as a plugin handle created there would."""

    def __init__(self, dev=None):
        from hipdnn_cabi import device
        from engine_plugins.hip_kernels import create_plugin
        from engine_plugins.hip_kernels.engine import ENGINE_NAME
        from hipdnn_cabi.plugin_sdk import engine_id_of
        self.rt = device.get_runtime(dev)
        self.plugin = create_plugin()
        with self.rt.bound():
            self.container = self.plugin.create_container()
        self.stream = self.rt.stream_create()
        self.container.set_stream(self.stream)
        self.cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})

    def plan(self, gbytes):
        from hipdnn_cabi.plugin_sdk import parse_graph
        g = parse_graph(gbytes)
        ids = self.container.get_applicable_engine_ids(g)
        assert ids == [self.cfg.engine_id], ids
        ctx = self.container.create_execution_context(self.cfg, g)
        return ctx

    def alloc(self, t, logical=None, poison=True):
        host = to_storage(t, logical if logical is not None else np.zeros(t.dims))
        p = self.rt.malloc(host.nbytes)
        if logical is None and poison:
            self.rt.memset(p, 0xFF, host.nbytes, 0)   # NaN in every float type
            self.rt.synchronize()
        else:
            self.rt.memcpy_htod(p, host.ctypes.data, host.nbytes)
        return p, host

    def run(self, gbytes, inputs, outputs, reps=1, scalars=None, ctx=None):
        """inputs: {T: logical values}; outputs: [T] -> {uid: logical float64 result};
        scalars: {uid: float} runtime pass-by-value values, bound as host pointers (float32)."""
        import cffi
        from hipdnn_cabi.plugin_sdk import DeviceBuffers
        ctx = ctx if ctx is not None else self.plan(gbytes)
        ptrs, hosts, owned = {}, {}, []
        keep = []
        for uid, v in (scalars or {}).items():
            a = np.array([v], np.float32)
            keep.append(a)
            ptrs[uid] = a.ctypes.data
        for t, v in inputs.items():
            ptrs[t.uid], _ = self.alloc(t, v)
            owned.append(ptrs[t.uid])
        for t in outputs:
            ptrs[t.uid], hosts[t.uid] = self.alloc(t)
            owned.append(ptrs[t.uid])
        wsz = self.container.get_workspace_size_from_context(ctx)
        ws = self.rt.malloc(wsz) if wsz else 0
        for _ in range(reps):
            self.container.execute(ctx, ws, DeviceBuffers(ptrs, ffi=cffi.FFI()))
        self.rt.stream_synchronize(self.stream)
        res = {}
        for t in outputs:
            h = hosts[t.uid]
            self.rt.memcpy_dtoh(h.ctypes.data, ptrs[t.uid], h.nbytes)
            res[t.uid] = from_storage(t, h)
        for p in owned:
            self.rt.free(p)
        if ws:
            self.rt.free(ws)
        return res
