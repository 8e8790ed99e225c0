"""A fake N-device GPU platform for CPU-only tests of the device binding (docs/gpu.md "Many GPUs").

``install(n)`` makes it the process's platform (``hipdnn_cabi.device``): ``current_device()`` is
a per-thread value (``set_current``), streams and allocations are integers the fake knows the
device of, modules are loaded per device, and a launch records (device current at launch, the
function's device, stream) and fails like a driver would when the function belongs to another
device's context.  Nothing is dereferenced: executing a plan only records launches.
"""
from __future__ import annotations

import threading

from hipdnn_cabi import device
from hipdnn_cabi.device.common import Bound, DeviceError, is_bound

MANAGED_BASE = 0x7E00_0000_0000
STREAM_BASE = 0x7D00_0000_0000


def dev_base(d: int) -> int:
    return 0x10_0000_0000 * (d + 1) << 8      # device d's fake address range


class FakeModule:
    def __init__(self, rt, key):
        self.rt, self.key = rt, key

    def function(self, name):
        return ("fn", self.rt.device, name)


class FakeRuntime:
    kind = "fake"

    def __init__(self, platform, dev):
        self.platform, self.device = platform, dev
        self.arch, self.sm_count, self.name = "sm_90", 132, f"fake{dev}"
        self.pageable_access = False
        self.launches, self.memsets, self.loads = [], [], []
        self._modules = {}
        self._next = dev_base(dev)
        self._lock = threading.Lock()

    # context
    def bound(self):
        return Bound(self)

    def _switch(self):
        prev = self.platform.current_device()
        self.platform.set_current(self.device)
        return prev

    def _restore(self, prev):
        self.platform.set_current(prev)

    def describe(self):
        return f"device {self.device}: fake"

    def device_count(self):
        return self.platform.n

    # memory
    def malloc(self, n):
        with self._lock:
            p = self._next
            self._next += (int(n) + 255) // 256 * 256 + 256
        return p

    def free(self, p):
        pass

    def memcpy_htod(self, dst, src, n):
        pass

    def memcpy_dtoh(self, dst, src, n):
        pass

    def pointer_info(self, p):
        return self.platform.pointer_info(p)

    def pointer_kind(self, p):
        return self.platform.pointer_info(p)[0]

    def device_accessible(self, p):
        k, d = self.platform.pointer_info(p)
        return (k == "device" and d == self.device) or k in ("managed", "host")

    def stream_create(self):
        return self.platform.make_stream(self.device)

    # code
    def module(self, src, name="kernel.hip", options=(), headers=None, **kw):
        self.platform.compiled.add((hash(src), self.arch))     # per-architecture code cache
        k = hash(src)
        m = self._modules.get(k)
        if m is None:
            assert self.platform.current_device() == self.device, "module loaded off its device"
            m = self._modules[k] = FakeModule(self, k)
            self.loads.append(name)
        return m

    def set_max_dynamic_smem(self, fn, n):
        pass

    def pack(self, vals):
        return [getattr(v, "value", v) for v in vals]

    def launch(self, fn, grid, block, pk, smem=0, stream=0):
        if not is_bound(self):
            with Bound(self):
                return self.launch(fn, grid, block, pk, smem, stream)
        cur = self.platform.current_device()
        if fn[1] != cur:
            raise DeviceError(f"fake cuLaunchKernel: function of device {fn[1]} launched while "
                              f"device {cur} is current (CUDA_ERROR_INVALID_CONTEXT)")
        self.launches.append((cur, fn[2], stream, threading.get_ident()))

    def memset(self, p, v, n, stream=0):
        self.memsets.append((self.platform.current_device(), p, n, stream))

    def synchronize(self):
        pass

    def stream_synchronize(self, s=0):
        pass


class FakePlatform:
    kind = "fake"

    def __init__(self, n=2):
        self.n = n
        self._tls = threading.local()
        self._streams = {}
        self._rts = {}
        self.compiled = set()
        self._lock = threading.Lock()

    def device_count(self):
        return self.n

    def current_device(self):
        return getattr(self._tls, "dev", 0)

    def set_current(self, d):
        self._tls.dev = d

    def make_stream(self, d):
        with self._lock:
            s = STREAM_BASE + 0x100 * (len(self._streams) + 1)
            self._streams[s] = d
        return s

    def stream_device(self, s):
        s = int(s)
        if s in (0, 1, 2):
            return None
        if s not in self._streams:
            raise DeviceError(f"0x{s:x} is not a stream (no such address in this process)")
        return self._streams[s]

    def pointer_info(self, p):
        p = int(p)
        for d in range(self.n):
            if dev_base(d) <= p < dev_base(d + 1):
                return "device", d
        if MANAGED_BASE <= p < MANAGED_BASE + (1 << 32):
            return "managed", 0
        return None, -1

    def runtime(self, d):
        d = int(d)
        if not 0 <= d < self.n:
            raise DeviceError(f"device {d} does not exist ({self.n} fake devices)")
        with self._lock:
            r = self._rts.get(d)
            if r is None:
                r = self._rts[d] = FakeRuntime(self, d)
        return r


def install(n=2) -> FakePlatform:
    p = FakePlatform(n)
    device._install_for_tests(p)
    return p


def uninstall():
    device._reset_for_tests()
