"""A stand-in for :class:`gpu_run.Runner` on the CPU reference engine (host buffers), for
``pytest -m gpu --cpu-stand-in tests/gpu/...`` on a machine without a GPU: the GPU tests' graph
building, data and reference checks run against the CPU engine, which checks the test code,
not the kernels.  Tests asserting facts of the HIP engine (its plan notes, its runtime ``rt``,
device-only behaviour) fail there by design."""
from __future__ import annotations

import types

import cffi
import numpy as np

from gpu_testlib import from_storage, to_storage


class CpuRunner:
    """``Runner``'s ``plan`` / ``run`` on the CPU reference engine's plugin object."""

    def __init__(self, dev=None):
        from engine_plugins.cpu_reference import create_plugin
        self.plugin = create_plugin()
        self.container = self.plugin.create_container()

    def plan(self, gbytes):
        from hipdnn_cabi.plugin_sdk import parse_graph
        g = parse_graph(gbytes)
        ids = self.container.get_applicable_engine_ids(g)
        assert ids, "the CPU reference engine declines the graph"
        cfg = types.SimpleNamespace(engine_id=ids[0], knobs={})
        return self.container.create_execution_context(cfg, g)

    def run(self, gbytes, inputs, outputs, reps=1, scalars=None, ctx=None):
        """As ``Runner.run``: inputs {T: logical values}, outputs [T] -> {uid: logical result};
        outputs start as all-ones bytes (NaN in every float type), as on the device."""
        from hipdnn_cabi.plugin_sdk import DeviceBuffers
        ctx = ctx if ctx is not None else self.plan(gbytes)
        ptrs, hosts, keep = {}, {}, []
        for uid, v in (scalars or {}).items():
            a = np.array([v], np.float32)
            keep.append(a)
            ptrs[uid] = a.ctypes.data
        for t, v in inputs.items():
            h = np.ascontiguousarray(to_storage(t, v))
            keep.append(h)
            ptrs[t.uid] = h.ctypes.data
        for t in outputs:
            h = np.ascontiguousarray(to_storage(t, np.zeros(t.dims)))
            h.view(np.uint8)[...] = 0xFF
            keep.append(h)
            hosts[t.uid] = h
            ptrs[t.uid] = h.ctypes.data
        wsz = self.container.get_workspace_size_from_context(ctx)
        ws = np.zeros(max(wsz, 1), np.uint8)
        for _ in range(reps):
            self.container.execute(ctx, ws.ctypes.data if wsz else 0, DeviceBuffers(ptrs, ffi=cffi.FFI()))
        return {t.uid: from_storage(t, hosts[t.uid]) for t in outputs}
