"""CI (no GPU): the engine's execute path against a recording fake runtime - pointers checked
once per pointer set, recorded launches replayed, runtime scalars re-read at every execute and
passed by value, NULL pointers / missing workspace / unbound scalars -> INVALID_VALUE."""
from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from engine_plugins.hip_kernels.engine import GpuPlan
from hipdnn_cabi.plugin_sdk import DeviceBuffers
from hipdnn_cabi.plugin_sdk.errors import INVALID_VALUE, PluginError
from hipdnn_cabi.plugin_sdk.serialization import Scalar, ScalarTable


class FakeRT:
    def __init__(self):
        self.launches, self.memsets, self.checks = [], [], 0

    def device_accessible(self, p):
        self.checks += 1
        return p != 0xBAD

    def pack(self, vals):
        return [v.value if isinstance(v, ctypes.c_float) else v for v in vals]

    def launch(self, fn, grid, block, pk, shmem, stream):
        self.launches.append((fn, list(pk), stream))

    def memset(self, p, v, n, stream):
        self.memsets.append((p, n, stream))


def make_plan(ws_size=0):
    from engine_plugins.hip_kernels.engine import _Launch
    p = object.__new__(GpuPlan)
    p.rt = FakeRT()
    p.ws_size = ws_size
    p.external = [1, 3]
    p.scalars = [2]
    p.steps = [("memset", 0, 64),
               ("launch", _Launch("k0", (1, 1, 1), (256, 1, 1), [("t", 1), ("s", 2), ("ws", 256), ("t", 3)]))]
    p._checked, p._replay = {}, {}
    return p


def bufs(mapping, value=None):
    import cffi
    ffi = cffi.FFI()
    keep = np.array([value if value is not None else 0], np.float32)
    m = dict(mapping)
    if value is not None:
        m[2] = keep.ctypes.data
    b = DeviceBuffers(m, ffi=ffi, scalars=ScalarTable([Scalar(2, 1, True, False, None)]))
    b._keep = keep
    return b


def test_replay_and_scalars():
    pytest.importorskip("cffi")
    p = make_plan(ws_size=1024)
    h = types.SimpleNamespace(stream=77)
    p.execute(h, bufs({1: 0x1000, 3: 0x2000}, 2.5), 0x9000)
    p.execute(h, bufs({1: 0x1000, 3: 0x2000}, 2.5), 0x9000)
    p.execute(h, bufs({1: 0x1000, 3: 0x2000}, -1.0), 0x9000)
    assert p.rt.checks == 2                      # each pointer checked once
    assert [l[1] for l in p.rt.launches] == [[0x1000, 2.5, 0x9100, 0x2000]] * 2 + [[0x1000, -1.0, 0x9100, 0x2000]]
    assert p.rt.memsets == [(0x9000, 64, 77)] * 3 and all(l[2] == 77 for l in p.rt.launches)


def test_errors():
    pytest.importorskip("cffi")
    p = make_plan(ws_size=1024)
    h = types.SimpleNamespace(stream=0)
    for b, ws, what in ((bufs({1: 0, 3: 0x2000}, 1.0), 0x9000, "uid 1"),
                        (bufs({1: 0xBAD, 3: 0x2000}, 1.0), 0x9000, "uid 1"),
                        (bufs({1: 0x1000, 3: 0x2000}, 1.0), 0, "workspace"),
                        (bufs({1: 0x1000, 3: 0x2000}), 0x9000, "uid 2"),
                        (bufs({1: 0x1000}, 1.0), 0x9000, "uid 3")):
        with pytest.raises(PluginError) as ei:
            p.execute(h, b, ws)
        assert ei.value.status == INVALID_VALUE and what in ei.value.message, ei.value.message
    assert not p.rt.launches


def test_scratch_args_and_release():
    """Small scratch ("sc" args and memsets) points into the plan's own buffer, needs no
    workspace, and release() frees it once."""
    pytest.importorskip("cffi")
    from engine_plugins.hip_kernels.engine import _Launch
    p = make_plan(ws_size=0)
    freed = []
    p.rt.free = freed.append
    p.scratch, p.scratch_size = 0x5000, 512
    p.steps = [("memset", ("sc", 0), 64),
               ("launch", _Launch("k0", (1, 1, 1), (256, 1, 1), [("t", 1), ("s", 2), ("sc", 256), ("t", 3)]))]
    p.execute(types.SimpleNamespace(stream=5), bufs({1: 0x1000, 3: 0x2000}, 1.0), 0)
    assert p.rt.memsets == [(0x5000, 64, 5)]
    assert [l[1] for l in p.rt.launches] == [[0x1000, 1.0, 0x5100, 0x2000]]
    p.release()
    p.release()
    assert freed == [0x5000]


def test_fast_replay_same_mapping():
    """A plan without runtime scalars replays the launches of an execute with the same
    buffer mapping object, workspace, handle and stream without re-running the checks; a new
    stream, a stream the SDK marked unusable, another mapping or workspace take the checking path."""
    from engine_plugins.hip_kernels import devctx
    from engine_plugins.hip_kernels.engine import _Launch
    p = make_plan(ws_size=0)
    p.scalars = []
    p.steps = [("launch", _Launch("k0", (2, 1, 1), (128, 1, 1), [("t", 1), ("t", 3)]))]
    h = types.SimpleNamespace(stream=7)
    b = DeviceBuffers({1: 0x1000, 3: 0x2000})
    calls = []
    real = devctx.check_handle
    devctx.check_handle = lambda d, hh: (calls.append(hh), real(d, hh))[1]
    try:
        for _ in range(3):
            p.execute(h, b, 0)
        assert len(calls) == 1 and len(p.rt.launches) == 3      # checked once, replayed twice
        h.stream = 9
        p.execute(h, b, 0)
        assert len(calls) == 2 and p.rt.launches[-1][2] == 9     # a new stream: checked again
        h.stream_info = devctx.BadStream(9, "gone")
        with pytest.raises(PluginError):
            p.execute(h, b, 0)
        del h.stream_info
        with pytest.raises(PluginError):                         # NULL pointer in a new mapping
            p.execute(h, DeviceBuffers({1: 0x1000, 3: 0}), 0)
        p.execute(h, b, 0x9000)                                  # another workspace: checked
        assert len(calls) == 5
    finally:
        devctx.check_handle = real
    assert [l[1] for l in p.rt.launches] == [[0x1000, 0x2000]] * len(p.rt.launches)
