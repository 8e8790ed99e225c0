"""pytest plugin (``-p amd_record``, used by ``make check-amd``): the GPU tests of tests/gpu run
against a recording AMD device, so that check-amd's corpus holds every program the engine emits
for them on AMD.

``HIPDNN_CABI_AMD_RECORD=<file>`` turns it on.  The process's GPU platform becomes one gfx942
device (kind "hip", 304 CUs) whose memory is host memory; the engine plans on it as on an MI300
(its own analysis, knobs and plan building), and

* every program ``build_program`` makes for gfx942 is built for gfx90a too (110 CUs, the same
  arguments), and the launches of both are written to the file (JSON lines: arch, kernel name,
  source, test id), as is every kernel the plan looks up in a loaded module;
* a plan's execute makes the engine's own checks (buffers, workspace, stream), then runs the
  plan's graph on the CPU reference engine over the same (host) buffers, so the tests'
  numerical checks pass and every graph of a test is reached.

Tests that need something else of a real GPU (the C programs, device queries, several devices)
fail or skip; what they planned before that is recorded all the same.
"""
from __future__ import annotations

import bisect
import ctypes
import hashlib
import json
import os
import threading

import numpy as np

PRIMARY, OTHERS = ("gfx942", 304), (("gfx90a", 110),)
_state = {"test": "", "out": None, "seen": set(), "lock": threading.Lock(), "graphs": [],
          "planned": set()}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _knobs():
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("HIPDNN_CABI_HIP_")))


def _gkey(raw, knobs):
    return hashlib.sha256(bytes(raw or b"") + repr(knobs).encode()).hexdigest()


def _write(arch, name, src, program=0):
    k = (arch, name, hashlib.sha256(src.encode()).hexdigest())
    with _state["lock"]:
        if k in _state["seen"] and not program:
            return
        _state["seen"].add(k)
        _state["out"].write(json.dumps({"arch": arch, "name": name, "source": src,
                                        "test": _state["test"], "program": program}) + "\n")
        _state["out"].flush()


def record_program(arch, prog):
    first = True
    for st in prog.steps:
        if st[0] == "launch":
            _write(arch, st[2], st[1], int(first))
            first = False


class _Module:
    def __init__(self, rt, src):
        self.rt, self.src = rt, src

    def function(self, name):
        _write(self.rt.arch, name, self.src)
        return ("fn", name)


class AmdRuntime:
    """One recording gfx942 device; device memory is host memory."""
    kind = "hip"

    def __init__(self, platform):
        self.platform, self.device = platform, 0
        self.arch, self.sm_count, self.name = PRIMARY[0], PRIMARY[1], "recording gfx942"
        self.pageable_access = False
        self._streams = 0

    def bound(self):
        from hipdnn_cabi.device.common import Bound
        return Bound(self)

    def _switch(self):
        return None

    def _restore(self, tok):
        pass

    def describe(self):
        return f"device 0: {self.name}"

    def device_count(self):
        return 1

    def malloc(self, n):
        return self.platform.alloc(n)

    def free(self, p):
        self.platform.release(p)

    def memcpy_htod(self, dst, src, n):
        ctypes.memmove(int(dst), int(src), int(n))

    def memcpy_dtoh(self, dst, src, n):
        ctypes.memmove(int(dst), int(src), int(n))

    def memset(self, p, v, n, stream=0):
        ctypes.memset(int(p), int(v), int(n))

    def pointer_info(self, p):
        return self.platform.pointer_info(p)

    def pointer_kind(self, p):
        return self.platform.pointer_info(p)[0]

    def device_accessible(self, p):
        return self.platform.pointer_info(p)[0] == "device"

    def stream_create(self):
        return self.platform.make_stream()

    def stream_destroy(self, s):
        pass

    def stream_synchronize(self, s=0):
        pass

    def synchronize(self):
        pass

    def module(self, src, name="kernel.hip", options=(), headers=None, arch=None):
        return _Module(self, src)

    def compile(self, src, name="kernel.hip", options=(), headers=None, arch=None):
        return b""

    def set_max_dynamic_smem(self, fn, n):
        pass

    def pack(self, vals):
        return list(vals)

    def launch(self, fn, grid, block, pk, smem=0, stream=0):
        pass


class AmdPlatform:
    kind = "hip"

    def __init__(self):
        self._rt = AmdRuntime(self)
        self._mem = {}
        self._starts = []
        self._streams = {}
        self._lock = threading.Lock()

    def device_count(self):
        return 1

    def current_device(self):
        return 0

    def runtime(self, d):
        from hipdnn_cabi.device import DeviceError
        if int(d) != 0:
            raise DeviceError(f"device {d} does not exist (1 recording AMD device)")
        return self._rt

    def alloc(self, n):
        a = np.zeros(max(1, int(n)) + 256, np.uint8)
        p = a.ctypes.data + (-a.ctypes.data) % 256
        with self._lock:
            self._mem[p] = (a, max(1, int(n)))
            bisect.insort(self._starts, p)
        return p

    def release(self, p):
        with self._lock:
            if self._mem.pop(int(p), None) is not None:
                self._starts.remove(int(p))

    def pointer_info(self, p):
        p = int(p)
        with self._lock:
            i = bisect.bisect_right(self._starts, p) - 1
            if i >= 0:
                s = self._starts[i]
                if p < s + self._mem[s][1]:
                    return "device", 0
        return None, -1

    def make_stream(self):
        with self._lock:
            s = 0x7D00_0000_0000 + 0x100 * (len(self._streams) + 1)
            self._streams[s] = 0
        return s

    def stream_device(self, s):
        from hipdnn_cabi.device import DeviceError
        s = int(s)
        if s in (0, 1, 2):
            return None
        if s not in self._streams:
            raise DeviceError(f"0x{s:x} is not a stream (no such address in this process)")
        return 0


class _CpuExec:
    """The CPU reference engine running a GPU plan's graph on the plan's (host) buffers."""

    def __init__(self):
        import types
        from engine_plugins.cpu_reference import create_plugin
        from engine_plugins.cpu_reference.engine import ENGINE_NAME
        from hipdnn_cabi.plugin_sdk import engine_id_of
        self.c = create_plugin().create_container()
        self.cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})
        self.ctx = {}
        self.keep = []

    def run(self, graph, buffers):
        ctx = self.ctx.get(id(graph))
        if ctx is None:
            ctx = self.ctx[id(graph)] = (graph, self.c.create_execution_context(self.cfg, graph))
        ctx = ctx[1]
        n = self.c.get_workspace_size_from_context(ctx)
        ws = 0
        if n:
            a = np.zeros(n + 64, np.uint8)
            self.keep = [a]
            ws = a.ctypes.data
        self.c.execute(ctx, ws, buffers)


def install():
    from engine_plugins.hip_kernels import engine
    from hipdnn_cabi import device
    device._install_for_tests(AmdPlatform())
    build = engine.build_program

    def build_program(graph, use_mma=True, sms=132, arch=None, tf32=False):
        _state["planned"].add(_gkey(getattr(graph, "raw", None), _knobs()))
        prog = build(graph, use_mma=use_mma, sms=sms, arch=arch, tf32=tf32)
        if arch == PRIMARY[0]:
            record_program(arch, prog)
            for a, cus in OTHERS:
                record_program(a, build(graph, use_mma=use_mma, sms=cus, arch=a, tf32=tf32))
        return prog
    engine.build_program = build_program
    from engine_plugins.cpu_reference import hostmem
    hostmem.set_classifier(lambda p: None)        # the recording device's memory is host memory
    cpu = _CpuExec()
    plan_build = engine.HipPlanBuilder.build_plan

    def build_plan(self, handle, graph, config):
        plan = plan_build(self, handle, graph, config)
        plan._amd_record_graph = graph
        return plan

    gpu_execute = engine.GpuPlan.execute

    def execute(self, handle, buffers, workspace):
        gpu_execute(self, handle, buffers, workspace)    # the engine's checks; launches record nothing
        g = getattr(self, "_amd_record_graph", None)
        if g is not None:
            cpu.run(g, buffers)
    engine.HipPlanBuilder.build_plan = build_plan
    engine.GpuPlan.execute = execute


def _hook_graphs():
    """Every graph the GPU tests build (gpu_testlib's one builder), with the knobs in effect."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    import gpu_testlib
    orig = gpu_testlib._graph_bytes

    def graph_bytes(*a, **k):
        out = orig(*a, **k)
        _state["graphs"].append((out, _knobs()))
        return out
    gpu_testlib._graph_bytes = graph_bytes


def pytest_configure(config):
    out = os.environ.get("HIPDNN_CABI_AMD_RECORD")
    if not out:
        return
    _state["out"] = open(out, "a")
    install()
    _hook_graphs()


def pytest_runtest_setup(item):
    _state["test"] = item.nodeid
    _state["graphs"] = []


def pytest_runtest_teardown(item):
    """Graphs a test built but never planned (it failed first): planned here, with the knobs
    they were built under, so the corpus holds them too."""
    if _state["out"] is None:
        return
    from engine_plugins.hip_kernels import engine
    from hipdnn_cabi.plugin_sdk import parse_graph
    for g, knobs in _state["graphs"]:
        if _gkey(g, knobs) in _state["planned"]:
            continue
        old = {k: v for k, v in os.environ.items() if k.startswith("HIPDNN_CABI_HIP_")}
        try:
            for k in old:
                del os.environ[k]
            os.environ.update(dict(knobs))
            engine.analyse(parse_graph(g))
        except Exception:  # noqa: BLE001 - a graph the engine cannot parse is the test's business
            pass
        finally:
            for k, _ in knobs:
                os.environ.pop(k, None)
            os.environ.update(old)
    _state["graphs"] = []
