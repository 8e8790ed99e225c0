"""AMD ROCm runtime through ``hip-python`` (``pip install hipdnn-cabi[rocm]``).

The same surface as :mod:`.cuda` (see :class:`~hipdnn_cabi.device.cuda.CudaRuntime`): hiprtc
compiles the same HIP sources for the device's ``gcnArchName`` (e.g. ``gfx942``), hipModule*
loads and launches.  NOT yet exercised on an AMD GPU in this project (the test machine is an
NVIDIA H200); kept small and symmetric so that the engine runs unchanged once it is.
"""
from __future__ import annotations

import threading

from .common import DeviceError, KernelCache, PackedArgs


def _check(res, what):
    if isinstance(res, tuple):
        err, vals = res[0], res[1:]
    else:
        err, vals = res, ()
    if int(getattr(err, "value", err)) != 0:
        raise DeviceError(f"{what} failed: {getattr(err, 'name', err)}")
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else vals


class HiprtcCompiler:
    kind = "hip"

    def __init__(self):
        from hip import hiprtc
        self.hiprtc = hiprtc
        major, minor = _check(hiprtc.hiprtcVersion(), "hiprtcVersion")
        self.version = f"hiprtc-{major}.{minor}"

    def default_options(self, arch: str):
        return [f"--offload-arch={arch}", "-std=c++17", "-DHDN_PLATFORM_HIP=1", "-O3"]

    def compile(self, source: str, name: str = "kernel.hip", options=(), arch: str = "gfx942",
                headers: dict | None = None) -> bytes:
        rtc = self.hiprtc
        headers = headers or {}
        prog = _check(rtc.hiprtcCreateProgram(source.encode(), name.encode(), len(headers),
                                              [v.encode() for v in headers.values()],
                                              [k.encode() for k in headers]), "hiprtcCreateProgram")
        try:
            opts = [o.encode() for o in list(self.default_options(arch)) + list(options)]
            err = rtc.hiprtcCompileProgram(prog, len(opts), opts)[0]
            n = _check(rtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
            log = bytearray(n)
            rtc.hiprtcGetProgramLog(prog, log)
            if int(getattr(err, "value", err)) != 0:
                raise DeviceError(f"hiprtc failed to compile {name} for {arch}:\n"
                                  + bytes(log).decode("utf-8", "replace"))
            size = _check(rtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
            out = bytearray(size)
            _check(rtc.hiprtcGetCode(prog, out), "hiprtcGetCode")
            return bytes(out)
        finally:
            rtc.hiprtcDestroyProgram(prog.createRef())


class Module:
    __slots__ = ("rt", "handle", "_fns")

    def __init__(self, rt, handle):
        self.rt, self.handle, self._fns = rt, handle, {}

    def function(self, name: str):
        f = self._fns.get(name)
        if f is None:
            f = self._fns[name] = _check(self.rt.hip.hipModuleGetFunction(self.handle, name.encode()),
                                         f"hipModuleGetFunction({name})")
        return f


class HipRuntime:
    kind = "hip"

    def __init__(self, device: int = 0):
        from hip import hip
        self.hip = hip
        self._count = int(_check(hip.hipGetDeviceCount(), "hipGetDeviceCount"))
        if self._count == 0:
            return
        self.device = device
        _check(hip.hipSetDevice(device), "hipSetDevice")
        props = hip.hipDeviceProp_t()
        _check(hip.hipGetDeviceProperties(props, device), "hipGetDeviceProperties")
        self.arch = props.gcnArchName.decode().split(":")[0]
        self.name = props.name.decode()
        self.sm_count = int(props.multiProcessorCount)
        self.pageable_access = bool(getattr(props, "pageableMemoryAccess", 0))
        self.compiler = HiprtcCompiler()
        self.cache = KernelCache()
        self._modules = {}
        self._mlock = threading.Lock()

    def device_count(self):
        return self._count

    def describe(self):
        return f"{self.name} ({self.arch}, {self.sm_count} CUs)"

    def malloc(self, n):
        return int(_check(self.hip.hipMalloc(max(1, int(n))), "hipMalloc"))

    def free(self, p):
        if p:
            _check(self.hip.hipFree(int(p)), "hipFree")

    def memcpy_htod(self, dst, src, n):
        _check(self.hip.hipMemcpy(int(dst), int(src), int(n), self.hip.hipMemcpyKind.hipMemcpyHostToDevice), "hipMemcpy")

    def memcpy_dtoh(self, dst, src, n):
        _check(self.hip.hipMemcpy(int(dst), int(src), int(n), self.hip.hipMemcpyKind.hipMemcpyDeviceToHost), "hipMemcpy")

    def memset(self, p, v, n, stream=0):
        _check(self.hip.hipMemsetAsync(int(p), int(v), int(n), int(stream)), "hipMemsetAsync")

    def pointer_kind(self, ptr):
        res = self.hip.hipPointerGetAttributes(int(ptr))
        if int(getattr(res[0], "value", res[0])) != 0:
            self.hip.hipGetLastError()
            return None
        t = getattr(res[1], "type", None)
        n = getattr(t, "name", str(t)).lower()
        if "managed" in n or "unified" in n:
            return "managed"
        if "device" in n or "array" in n:
            return "device"
        if "host" in n:
            return "host"
        return None

    def device_accessible(self, ptr):
        k = self.pointer_kind(ptr)
        return k in ("device", "managed", "host") or (k is None and self.pageable_access)

    def stream_synchronize(self, s=0):
        _check(self.hip.hipStreamSynchronize(int(s)), "hipStreamSynchronize")

    def synchronize(self):
        _check(self.hip.hipDeviceSynchronize(), "hipDeviceSynchronize")

    def compile(self, source, name="kernel.hip", options=(), headers=None):
        key = KernelCache.key(source + "".join(f"\0{k}\0{v}" for k, v in (headers or {}).items()),
                              list(options), self.arch, self.compiler.version)
        img = self.cache.get(key)
        if img is None:
            img = self.compiler.compile(source, name, options, self.arch, headers)
            self.cache.put(key, img)
        return img

    def module(self, source, name="kernel.hip", options=(), headers=None):
        import hashlib
        img = self.compile(source, name, options, headers)
        k = hashlib.sha256(img).hexdigest()
        with self._mlock:
            m = self._modules.get(k)
            if m is None:
                m = self._modules[k] = Module(self, _check(self.hip.hipModuleLoadData(img), "hipModuleLoadData"))
        return m

    def set_max_dynamic_smem(self, fn, nbytes):
        pass   # LDS limit is static on AMD (64 KiB)

    def pack(self, args):
        return PackedArgs(args)

    def launch(self, fn, grid, block, args, shmem=0, stream=0):
        if not isinstance(args, PackedArgs):
            args = PackedArgs(args)
        _check(self.hip.hipModuleLaunchKernel(fn, *grid, *block, shmem, int(stream),
                                              args.address, None), "hipModuleLaunchKernel")
