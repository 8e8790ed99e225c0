"""NVIDIA runtime through ``cuda-bindings`` (``pip install hipdnn-cabi[cuda]``).

Memory and pointer queries use the runtime API (``cudaMalloc`` and friends: the same allocator
PyTorch and a C program use); modules and launches use the driver API, on the device's primary
context (the one the runtime API uses), made current on each calling thread on first use.
Streams are plain integers (a ``cudaStream_t`` value) and are used as given.

Run-time compilation: NVRTC compiles HIP-dialect C++ (the kernels' compat header maps the few
spellings that differ) to a cubin for the device's exact ``sm_XY``; code objects are cached on
disk (:class:`~hipdnn_cabi.device.common.KernelCache`).
"""
from __future__ import annotations

import os
import threading

from .common import DeviceError, KernelCache, PackedArgs

CUDA_INCLUDE_DIRS = [d for d in (os.environ.get("CUDA_HOME", "") and
                                 os.path.join(os.environ["CUDA_HOME"], "include"),
                                 "/usr/local/cuda/include") if d and os.path.isdir(d)]


def _check(res, what):
    """cuda-bindings calls return (err, *values): raise on error, return the values."""
    if isinstance(res, tuple):
        err, vals = res[0], res[1:]
    else:
        err, vals = res, ()
    if int(err) != 0:
        raise DeviceError(f"{what} failed: {getattr(err, 'name', err)} ({int(err)})")
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else vals


class NvrtcCompiler:
    """NVRTC only: needs no GPU and no driver (CI compiles every kernel source with it)."""
    kind = "cuda"

    def __init__(self):
        from cuda.bindings import nvrtc
        self.nvrtc = nvrtc
        major, minor = _check(nvrtc.nvrtcVersion(), "nvrtcVersion")
        self.version = f"nvrtc-{major}.{minor}"

    def default_options(self, arch: str):
        opts = [f"--gpu-architecture={arch}", "-std=c++17", "-DHDN_PLATFORM_CUDA=1"]
        opts += [f"-I{d}" for d in CUDA_INCLUDE_DIRS]
        return opts

    def compile(self, source: str, name: str = "kernel.hip", options=(), arch: str = "sm_90",
                headers: dict | None = None) -> bytes:
        nv = self.nvrtc
        headers = headers or {}
        hnames = [k.encode() for k in headers]
        hsrcs = [v.encode() for v in headers.values()]
        prog = _check(nv.nvrtcCreateProgram(source.encode(), name.encode(), len(hnames),
                                            hsrcs, hnames), "nvrtcCreateProgram")
        try:
            opts = [o.encode() for o in list(self.default_options(arch)) + list(options)]
            err = nv.nvrtcCompileProgram(prog, len(opts), opts)[0]
            n = _check(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            log = b" " * n
            nv.nvrtcGetProgramLog(prog, log)
            self.last_log = log.decode("utf-8", "replace").rstrip("\0")
            if int(err) != 0:
                raise DeviceError(f"NVRTC failed to compile {name} for {arch}:\n"
                                  + log.decode("utf-8", "replace").rstrip("\0"))
            size = _check(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            out = b" " * size
            _check(nv.nvrtcGetCUBIN(prog, out), "nvrtcGetCUBIN")
            return out
        finally:
            nv.nvrtcDestroyProgram(prog)


class Module:
    __slots__ = ("rt", "handle", "_fns")

    def __init__(self, rt, handle):
        self.rt, self.handle, self._fns = rt, handle, {}

    def function(self, name: str):
        f = self._fns.get(name)
        if f is None:
            d = self.rt.driver
            f = _check(d.cuModuleGetFunction(self.handle, name.encode()), f"cuModuleGetFunction({name})")
            self._fns[name] = f
        return f


class CudaRuntime:
    kind = "cuda"

    def __init__(self, device: int = 0):
        from cuda.bindings import driver, runtime
        self.driver, self.rt = driver, runtime
        _check(driver.cuInit(0), "cuInit")
        n = _check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        self._count = int(n)
        if self._count == 0:
            return
        self.device = device
        _check(runtime.cudaSetDevice(device), "cudaSetDevice")
        _check(runtime.cudaFree(0), "cudaFree(0)")          # creates the primary context
        self.cu_device = _check(driver.cuDeviceGet(device), "cuDeviceGet")
        self.ctx = _check(driver.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
        A = driver.CUdevice_attribute
        ga = lambda a: int(_check(driver.cuDeviceGetAttribute(a, self.cu_device), str(a)))  # noqa: E731
        self.cc = (ga(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                   ga(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.arch = f"sm_{self.cc[0]}{self.cc[1]}"
        self.sm_count = ga(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.max_smem_optin = ga(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.pageable_access = bool(ga(A.CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS))
        name = _check(driver.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName")
        self.name = bytes(name).split(b"\0")[0].decode("utf-8", "replace")
        self._tls = threading.local()
        self._tls.ok = True
        self.compiler = NvrtcCompiler()
        self.cache = KernelCache()
        self._modules: dict[str, Module] = {}
        self._mlock = threading.Lock()
        mt = runtime.cudaMemoryType
        self._kinds = {int(mt.cudaMemoryTypeUnregistered): None, int(mt.cudaMemoryTypeHost): "host",
                       int(mt.cudaMemoryTypeDevice): "device", int(mt.cudaMemoryTypeManaged): "managed"}

    # ------------------------------------------------------------------ info
    def device_count(self) -> int:
        return self._count

    def describe(self) -> str:
        return f"{self.name} ({self.arch}, {self.sm_count} SMs)"

    def _ctx(self):
        if not getattr(self._tls, "ok", False):
            _check(self.driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
            self._tls.ok = True

    # ------------------------------------------------------------------ memory
    def malloc(self, nbytes: int) -> int:
        return int(_check(self.rt.cudaMalloc(max(1, int(nbytes))), "cudaMalloc"))

    def free(self, ptr: int):
        if ptr:
            _check(self.rt.cudaFree(int(ptr)), "cudaFree")

    def malloc_host(self, nbytes: int) -> int:
        return int(_check(self.rt.cudaMallocHost(max(1, int(nbytes))), "cudaMallocHost"))

    def free_host(self, ptr: int):
        if ptr:
            _check(self.rt.cudaFreeHost(int(ptr)), "cudaFreeHost")

    def memcpy_htod(self, dst: int, src_host: int, nbytes: int):
        _check(self.rt.cudaMemcpy(int(dst), int(src_host), int(nbytes),
                                  self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice), "cudaMemcpy H2D")

    def memcpy_dtoh(self, dst_host: int, src: int, nbytes: int):
        _check(self.rt.cudaMemcpy(int(dst_host), int(src), int(nbytes),
                                  self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost), "cudaMemcpy D2H")

    def memset(self, ptr: int, value: int, nbytes: int, stream: int = 0):
        _check(self.rt.cudaMemsetAsync(int(ptr), int(value), int(nbytes), int(stream)),
               "cudaMemsetAsync")

    def pointer_kind(self, ptr: int):
        """"device", "managed", "host" (pinned/registered) or None (memory the runtime does not
        know: plain pageable host memory, or garbage)."""
        res = self.rt.cudaPointerGetAttributes(int(ptr))
        if int(res[0]) != 0:
            self.rt.cudaGetLastError()
            return None
        return self._kinds.get(int(res[1].type))

    def device_accessible(self, ptr: int) -> bool:
        k = self.pointer_kind(ptr)
        return k in ("device", "managed", "host") or (k is None and self.pageable_access)

    # ------------------------------------------------------------------ streams / sync
    def stream_create(self) -> int:
        s = _check(self.rt.cudaStreamCreateWithFlags(self.rt.cudaStreamNonBlocking), "cudaStreamCreate")
        return int(s)

    def stream_destroy(self, s: int):
        _check(self.rt.cudaStreamDestroy(int(s)), "cudaStreamDestroy")

    def stream_synchronize(self, s: int = 0):
        _check(self.rt.cudaStreamSynchronize(int(s)), "cudaStreamSynchronize")

    def synchronize(self):
        _check(self.rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    def last_error(self):
        return int(self.rt.cudaGetLastError()[0])

    def event_create(self):
        return _check(self.rt.cudaEventCreate(), "cudaEventCreate")

    def event_record(self, ev, stream: int = 0):
        _check(self.rt.cudaEventRecord(ev, int(stream)), "cudaEventRecord")

    def event_elapsed_ms(self, a, b) -> float:
        _check(self.rt.cudaEventSynchronize(b), "cudaEventSynchronize")
        return float(_check(self.rt.cudaEventElapsedTime(a, b), "cudaEventElapsedTime"))

    # graph capture (tests)
    def graph_capture_begin(self, stream: int):
        _check(self.rt.cudaStreamBeginCapture(
            int(stream), self.rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture")

    def graph_capture_end(self, stream: int):
        g = _check(self.rt.cudaStreamEndCapture(int(stream)), "cudaStreamEndCapture")
        ge = _check(self.rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
        return g, ge

    def graph_launch(self, graph_exec, stream: int):
        _check(self.rt.cudaGraphLaunch(graph_exec, int(stream)), "cudaGraphLaunch")

    def graph_destroy(self, g, ge):
        self.rt.cudaGraphExecDestroy(ge)
        self.rt.cudaGraphDestroy(g)

    # ------------------------------------------------------------------ code
    def compile(self, source: str, name: str = "kernel.hip", options=(), headers=None,
                arch: str | None = None) -> bytes:
        """``arch``: a target other than the device's own (``sm_90a`` for the wgmma GEMM core)."""
        arch = arch or self.arch
        key = KernelCache.key(source + "".join(f"\0{k}\0{v}" for k, v in (headers or {}).items()),
                              list(options), arch, self.compiler.version)
        img = self.cache.get(key)
        if img is None:
            img = self.compiler.compile(source, name, options, arch, headers)
            self.cache.put(key, img)
        return img

    def load(self, image: bytes) -> Module:
        self._ctx()
        h = _check(self.driver.cuModuleLoadData(image), "cuModuleLoadData")
        return Module(self, h)

    def module(self, source: str, name: str = "kernel.hip", options=(), headers=None,
               arch: str | None = None) -> Module:
        """Compile (through the cache) and load once per process."""
        img = self.compile(source, name, options, headers, arch)
        import hashlib
        k = hashlib.sha256(img).hexdigest()
        with self._mlock:
            m = self._modules.get(k)
            if m is None:
                m = self._modules[k] = self.load(img)
        return m

    def set_max_dynamic_smem(self, fn, nbytes: int):
        A = self.driver.CUfunction_attribute
        _check(self.driver.cuFuncSetAttribute(
            fn, A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes)), "cuFuncSetAttribute")

    def tensor_map(self, ptr: int, dtype: str, dims, strides_bytes, box):
        """A CUtensorMap (128 bytes, ctypes array: a by-value kernel argument) for a tiled,
        128-byte-swizzled view of ``ptr``; ``dims``/``box`` innermost first, ``strides_bytes``
        for dims 1.. (cuTensorMapEncodeTiled's conventions); out-of-range elements read 0."""
        import ctypes
        d = self.driver
        T = d.CUtensorMapDataType
        dt = {"HALF": T.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, "BFLOAT16": T.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
              "FLOAT": T.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, "FP8_E4M3": T.CU_TENSOR_MAP_DATA_TYPE_UINT8,
              "FP8_E5M2": T.CU_TENSOR_MAP_DATA_TYPE_UINT8}[dtype]
        tm = _check(d.cuTensorMapEncodeTiled(
            dt, len(dims), int(ptr), [d.cuuint64_t(int(x)) for x in dims],
            [d.cuuint64_t(int(x)) for x in strides_bytes], [d.cuuint32_t(int(x)) for x in box],
            [d.cuuint32_t(1)] * len(dims), d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
        buf = (ctypes.c_ubyte * 128)()
        ctypes.memmove(buf, int(tm.getPtr()), 128)
        return buf

    def pack(self, args) -> PackedArgs:
        return PackedArgs(args)

    def launch(self, fn, grid, block, args, shmem: int = 0, stream: int = 0):
        """Asynchronous launch on ``stream``; ``args`` a PackedArgs (fast) or a list."""
        if not isinstance(args, PackedArgs):
            args = PackedArgs(args)
        if not getattr(self._tls, "ok", False):
            self._ctx()
        err = self.driver.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
                                         block[2], shmem, stream, args.address, 0)[0]
        if int(err) != 0:
            raise DeviceError(f"cuLaunchKernel failed: {getattr(err, 'name', err)} ({int(err)})")
