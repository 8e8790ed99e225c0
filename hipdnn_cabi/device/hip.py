"""AMD ROCm runtime through ``hip-python`` (``pip install hipdnn-cabi[rocm]``).

The same surface as :mod:`.cuda` (see :class:`~hipdnn_cabi.device.cuda.CudaRuntime`): hiprtc
compiles the same HIP sources for the device's ``gcnArchName`` (e.g. ``gfx942``), hipModule*
loads and launches.  NOT yet exercised on an AMD GPU in this project (the test machine is an
NVIDIA H200); kept small and symmetric so that the engine runs unchanged once it is.  Its steps
run in CI against a recording stand-in of hip-python whose hiprtc compiles with the offline
toolchain of ``make check-amd`` (tests/amd/test_hip_runtime_path.py).

:class:`HipPlatform` is the process-wide part (device count, ``hipGetDevice``,
``hipStreamGetDevice``, pointer attributes); :class:`HipRuntime` is one device.  HIP's context
API is deprecated, so ``rt.bound()`` makes the device current with ``hipSetDevice`` and puts the
caller's device back afterwards.
"""
from __future__ import annotations

import threading

from .common import (SPECIAL_STREAMS, Bound, DeviceError, KernelCache, Module, PackedArgs,
                     RtcCompiler, address_mapped, check, is_bound)


def hiprtc_options(arch: str) -> list:
    """The options the engine passes to hiprtc for ``arch`` (``gfx942``): ``make check-amd``
    (tools/check_amd.py) compiles its offline corpus with exactly these, after the ones hiprtc
    adds itself."""
    return [f"--offload-arch={arch}", "-std=c++17", "-DHDN_PLATFORM_HIP=1", "-O3"]


class HiprtcCompiler(RtcCompiler):
    kind = "hip"
    prefix, code_call, label, default_arch = "hiprtc", "Code", "hiprtc", "gfx942"
    _buffer = staticmethod(bytearray)

    def __init__(self):
        from hip import hiprtc
        self.hiprtc = self.rtc = hiprtc
        major, minor = check(hiprtc.hiprtcVersion(), "hiprtcVersion")
        self.version = f"hiprtc-{major}.{minor}"

    def default_options(self, arch: str):
        return hiprtc_options(arch)

    def _destroy(self, prog):
        self.rtc.hiprtcDestroyProgram(prog.createRef())


class HipPlatform:
    kind = "hip"

    def __init__(self):
        from hip import hip
        self.hip = hip
        self._count = int(check(hip.hipGetDeviceCount(), "hipGetDeviceCount"))
        self._runtimes: dict[int, HipRuntime] = {}
        self._lock = threading.Lock()
        self.compiler = None
        self.cache = KernelCache()

    def device_count(self):
        return self._count

    def current_device(self) -> int:
        return int(check(self.hip.hipGetDevice(), "hipGetDevice"))

    def stream_device(self, stream: int):
        stream = int(stream)
        if stream in SPECIAL_STREAMS:
            return None
        if not address_mapped(stream):
            raise DeviceError(f"0x{stream:x} is not a stream (no such address in this process)")
        fn = getattr(self.hip, "hipStreamGetDevice", None)
        if fn is None:
            raise DeviceError("hipStreamGetDevice is not available in this HIP")
        return int(check(fn(stream), "hipStreamGetDevice"))

    def pointer_info(self, ptr: int):
        res = self.hip.hipPointerGetAttributes(int(ptr))
        if int(getattr(res[0], "value", res[0])) != 0:
            self.hip.hipGetLastError()
            return None, -1
        t = getattr(res[1], "type", None)
        n = getattr(t, "name", str(t)).lower()
        if "managed" in n or "unified" in n:
            kind = "managed"
        elif "device" in n or "array" in n:
            kind = "device"
        elif "host" in n:
            kind = "host"
        else:
            return None, -1
        return kind, int(getattr(res[1], "device", -1))

    def runtime(self, device: int) -> "HipRuntime":
        device = int(device)
        r = self._runtimes.get(device)
        if r is None:
            if not 0 <= device < self._count:
                raise DeviceError(f"device {device} does not exist ({self._count} HIP devices)")
            with self._lock:
                r = self._runtimes.get(device)
                if r is None:
                    r = self._runtimes[device] = HipRuntime(device, platform=self)
        return r


class HipRuntime:
    kind = "hip"

    def __init__(self, device: int = 0, platform: HipPlatform | None = None):
        platform = platform or HipPlatform()
        self.platform = platform
        hip = self.hip = platform.hip
        self._count = platform.device_count()
        if self._count == 0:
            return
        self.device = int(device)
        props = hip.hipDeviceProp_t()
        check(hip.hipGetDeviceProperties(props, self.device), "hipGetDeviceProperties")
        self.arch = props.gcnArchName.decode().split(":")[0]
        self.name = props.name.decode()
        self.sm_count = int(props.multiProcessorCount)
        self.pageable_access = bool(getattr(props, "pageableMemoryAccess", 0))
        if platform.compiler is None:
            platform.compiler = HiprtcCompiler()
        self.compiler = platform.compiler
        self.cache = platform.cache
        self._modules = {}
        self._mlock = threading.Lock()

    def bound(self) -> Bound:
        return Bound(self)

    def _switch(self):
        cur = int(check(self.hip.hipGetDevice(), "hipGetDevice"))
        if cur == self.device:
            return None
        check(self.hip.hipSetDevice(self.device), "hipSetDevice")
        return cur

    def _restore(self, prev):
        if prev is not None:
            self.hip.hipSetDevice(prev)

    def device_count(self):
        return self._count

    def describe(self):
        return f"device {self.device}: {self.name} ({self.arch}, {self.sm_count} CUs)"

    def malloc(self, n):
        with Bound(self):
            return int(check(self.hip.hipMalloc(max(1, int(n))), "hipMalloc"))

    def free(self, p):
        if p:
            with Bound(self):
                check(self.hip.hipFree(int(p)), "hipFree")

    def malloc_host(self, n):
        with Bound(self):
            return int(check(self.hip.hipHostMalloc(max(1, int(n)), 0), "hipHostMalloc"))

    def free_host(self, p):
        if p:
            with Bound(self):
                check(self.hip.hipHostFree(int(p)), "hipHostFree")

    def memcpy_htod(self, dst, src, n):
        check(self.hip.hipMemcpy(int(dst), int(src), int(n), self.hip.hipMemcpyKind.hipMemcpyHostToDevice), "hipMemcpy")

    def memcpy_dtoh(self, dst, src, n):
        check(self.hip.hipMemcpy(int(dst), int(src), int(n), self.hip.hipMemcpyKind.hipMemcpyDeviceToHost), "hipMemcpy")

    def memset(self, p, v, n, stream=0):
        if not is_bound(self):
            with Bound(self):
                return self.memset(p, v, n, stream)
        check(self.hip.hipMemsetAsync(int(p), int(v), int(n), int(stream)), "hipMemsetAsync")

    def pointer_kind(self, ptr):
        return self.platform.pointer_info(ptr)[0]

    def pointer_info(self, ptr):
        return self.platform.pointer_info(ptr)

    def device_accessible(self, ptr):
        k, dev = self.platform.pointer_info(ptr)
        if k == "device":
            return dev == self.device
        return k in ("managed", "host") or (k is None and self.pageable_access)

    def stream_create(self):
        with Bound(self):
            return int(check(self.hip.hipStreamCreateWithFlags(self.hip.hipStreamNonBlocking),
                             "hipStreamCreateWithFlags"))

    def stream_destroy(self, s):
        with Bound(self):
            check(self.hip.hipStreamDestroy(int(s)), "hipStreamDestroy")

    def last_error(self):
        r = self.hip.hipGetLastError()
        r = r[0] if isinstance(r, tuple) else r
        return int(getattr(r, "value", r))

    def event_create(self):
        with Bound(self):
            return check(self.hip.hipEventCreate(), "hipEventCreate")

    def event_record(self, ev, stream=0):
        with Bound(self):
            check(self.hip.hipEventRecord(ev, int(stream)), "hipEventRecord")

    def event_elapsed_ms(self, a, b):
        check(self.hip.hipEventSynchronize(b), "hipEventSynchronize")
        return float(check(self.hip.hipEventElapsedTime(a, b), "hipEventElapsedTime"))

    def stream_synchronize(self, s=0):
        with Bound(self):
            check(self.hip.hipStreamSynchronize(int(s)), "hipStreamSynchronize")

    def synchronize(self):
        with Bound(self):
            check(self.hip.hipDeviceSynchronize(), "hipDeviceSynchronize")

    def compile(self, source, name="kernel.hip", options=(), headers=None, arch=None):
        """``arch``: a target other than the device's own (the engine never asks for one on AMD)."""
        arch = arch or self.arch
        key = KernelCache.key(source + "".join(f"\0{k}\0{v}" for k, v in (headers or {}).items()),
                              list(options), arch, self.compiler.version)
        img = self.cache.get(key)
        if img is None:
            img = self.compiler.compile(source, name, options, arch, headers)
            self.cache.put(key, img)
        return img

    def module(self, source, name="kernel.hip", options=(), headers=None, arch=None):
        import hashlib
        img = self.compile(source, name, options, headers, arch)
        k = hashlib.sha256(img).hexdigest()
        with self._mlock:
            m = self._modules.get(k)
            if m is None:
                with Bound(self):
                    h = check(self.hip.hipModuleLoadData(img), "hipModuleLoadData")
                m = self._modules[k] = Module(h, self.hip.hipModuleGetFunction, "hipModuleGetFunction")
        return m

    max_dynamic_smem = 64 * 1024    # LDS per workgroup on CDNA

    def set_max_dynamic_smem(self, fn, nbytes):
        pass   # LDS limit is static on AMD (64 KiB)

    def pack(self, args):
        return PackedArgs(args)

    def launch(self, fn, grid, block, args, shmem=0, stream=0):
        if not isinstance(args, PackedArgs):
            args = PackedArgs(args)
        if not is_bound(self):
            with Bound(self):
                return self.launch(fn, grid, block, args, shmem, stream)
        check(self.hip.hipModuleLaunchKernel(fn, *grid, *block, shmem, int(stream),
                                              args.address, None), "hipModuleLaunchKernel")
