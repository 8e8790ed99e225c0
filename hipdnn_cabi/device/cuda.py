"""NVIDIA runtime through ``cuda-bindings`` (``pip install hipdnn-cabi[cuda]``).

:class:`CudaPlatform` is the process-wide part (driver initialised, device count, the calling
thread's current device, stream and pointer queries); :class:`CudaRuntime` is one device: its
primary context (the one the runtime API and PyTorch use), its loaded modules and its
attributes.  A runtime never changes the caller's current device: everything that needs its
device current (allocation, module load, launch) runs inside ``rt.bound()``, which pushes the
device's primary context when another one is current and pops it afterwards.  Memory and pointer
queries use the runtime API (``cudaMalloc`` and friends: the same allocator PyTorch and a C
program use); modules and launches use the driver API.  Streams are plain integers (a
``cudaStream_t`` value) and are used as given.

Run-time compilation: NVRTC compiles HIP-dialect C++ (the kernels' compat header maps the few
spellings that differ) to a cubin for the device's exact ``sm_XY``; code objects are cached on
disk (:class:`~hipdnn_cabi.device.common.KernelCache`), shared by every device of one
architecture; each device context loads a module once.
"""
from __future__ import annotations

import os
import threading

from .common import (SPECIAL_STREAMS, Bound, DeviceError, KernelCache, Module, PackedArgs,
                     RtcCompiler, address_mapped, check, is_bound)

CUDA_INCLUDE_DIRS = [d for d in (os.environ.get("CUDA_HOME", "") and
                                 os.path.join(os.environ["CUDA_HOME"], "include"),
                                 "/usr/local/cuda/include") if d and os.path.isdir(d)]


class NvrtcCompiler(RtcCompiler):
    """NVRTC only: needs no GPU and no driver (CI compiles every kernel source with it)."""
    kind = "cuda"
    prefix, code_call, label, default_arch = "nvrtc", "CUBIN", "NVRTC", "sm_90"

    def __init__(self):
        from cuda.bindings import nvrtc
        self.nvrtc = self.rtc = nvrtc
        major, minor = check(nvrtc.nvrtcVersion(), "nvrtcVersion")
        self.version = f"nvrtc-{major}.{minor}"

    def default_options(self, arch: str):
        opts = [f"--gpu-architecture={arch}", "-std=c++17", "-DHDN_PLATFORM_CUDA=1"]
        opts += [f"-I{d}" for d in CUDA_INCLUDE_DIRS]
        return opts


class CudaPlatform:
    """The driver, initialised once per process: device count, current device, stream and
    pointer queries, and one :class:`CudaRuntime` per device (made on first use: a device the
    process never uses gets no context)."""
    kind = "cuda"

    def __init__(self):
        from cuda.bindings import driver, runtime
        self.driver, self.rt = driver, runtime
        check(driver.cuInit(0), "cuInit")
        self._count = int(check(driver.cuDeviceGetCount(), "cuDeviceGetCount"))
        self._runtimes: dict[int, CudaRuntime] = {}
        self._lock = threading.Lock()
        self.compiler = None
        self.cache = KernelCache()
        mt = runtime.cudaMemoryType
        self._kinds = {int(mt.cudaMemoryTypeUnregistered): None, int(mt.cudaMemoryTypeHost): "host",
                       int(mt.cudaMemoryTypeDevice): "device", int(mt.cudaMemoryTypeManaged): "managed"}

    def device_count(self) -> int:
        return self._count

    def current_device(self) -> int:
        """The calling thread's current device: the device of the driver context current on this
        thread (what ``cudaSetDevice`` makes current, in any copy of the runtime library: C
        programs, PyTorch), else the runtime's current device (0 unless set)."""
        d = self.driver
        ctx = check(d.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if ctx is not None and int(ctx):
            return int(check(d.cuCtxGetDevice(), "cuCtxGetDevice"))
        return int(check(self.rt.cudaGetDevice(), "cudaGetDevice"))

    def stream_device(self, stream: int):
        """The device ``stream`` belongs to; None for the special streams (null, legacy,
        per-thread: they follow the device current at launch, which is the handle's).  Raises
        :class:`DeviceError` for a value that is no stream."""
        stream = int(stream)
        if stream in SPECIAL_STREAMS:
            return None
        if not address_mapped(stream):
            raise DeviceError(f"0x{stream:x} is not a stream (no such address in this process)")
        fn = getattr(self.rt, "cudaStreamGetDevice", None)          # CUDA >= 12.8
        if fn is not None:
            try:
                return int(check(fn(stream), "cudaStreamGetDevice"))
            except DeviceError:
                self.rt.cudaGetLastError()
                raise
        d = self.driver                                              # older: the stream's context
        ctx = check(d.cuStreamGetCtx(stream), "cuStreamGetCtx")
        check(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        try:
            return int(check(d.cuCtxGetDevice(), "cuCtxGetDevice"))
        finally:
            d.cuCtxPopCurrent()

    def pointer_info(self, ptr: int):
        """(kind, device ordinal): kind "device", "managed", "host" (pinned/registered) or None
        (memory the runtime does not know: pageable host memory, or garbage; ordinal -1)."""
        res = self.rt.cudaPointerGetAttributes(int(ptr))
        if int(res[0]) != 0:
            self.rt.cudaGetLastError()
            return None, -1
        kind = self._kinds.get(int(res[1].type))
        return kind, (int(res[1].device) if kind is not None else -1)

    def runtime(self, device: int) -> "CudaRuntime":
        device = int(device)
        r = self._runtimes.get(device)
        if r is None:
            if not 0 <= device < self._count:
                raise DeviceError(f"device {device} does not exist ({self._count} CUDA device"
                                  f"{'s' if self._count != 1 else ''})")
            with self._lock:
                r = self._runtimes.get(device)
                if r is None:
                    r = self._runtimes[device] = CudaRuntime(device, platform=self)
        return r


class CudaRuntime:
    """One device: its primary context, modules, attributes; memory, streams, launches."""
    kind = "cuda"

    def __init__(self, device: int = 0, platform: CudaPlatform | None = None):
        platform = platform or CudaPlatform()
        self.platform = platform
        driver, runtime = platform.driver, platform.rt
        self.driver, self.rt = driver, runtime
        self._count = platform.device_count()
        if self._count == 0:
            return
        self.device = int(device)
        self.cu_device = check(driver.cuDeviceGet(self.device), "cuDeviceGet")
        self.ctx = check(driver.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
        self._ctx_int = int(self.ctx)
        A = driver.CUdevice_attribute
        ga = lambda a: int(check(driver.cuDeviceGetAttribute(a, self.cu_device), str(a)))  # noqa: E731
        self.cc = (ga(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                   ga(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.arch = f"sm_{self.cc[0]}{self.cc[1]}"
        self.sm_count = ga(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.max_smem_optin = ga(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.max_dynamic_smem = self.max_smem_optin    # what a kernel may ask for, opted in
        self.pageable_access = bool(ga(A.CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS))
        name = check(driver.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName")
        self.name = bytes(name).split(b"\0")[0].decode("utf-8", "replace")
        if platform.compiler is None:
            platform.compiler = NvrtcCompiler()
        self.compiler = platform.compiler       # one compiler and one code cache per process,
        self.cache = platform.cache             # modules per device context
        self._modules: dict[str, Module] = {}
        self._mlock = threading.Lock()
        self._kinds = platform._kinds

    # ------------------------------------------------------------------ info
    def device_count(self) -> int:
        return self._count

    def describe(self) -> str:
        return f"device {self.device}: {self.name} ({self.arch}, {self.sm_count} SMs)"

    # ------------------------------------------------------------------ the device's context
    def bound(self) -> Bound:
        """``with rt.bound():`` this device's primary context is current inside the block."""
        return Bound(self)

    def _switch(self):
        d = self.driver
        cur = d.cuCtxGetCurrent()[1]
        if cur is not None and int(cur) == self._ctx_int:
            return False
        check(d.cuCtxPushCurrent(self.ctx), "cuCtxPushCurrent")
        return True

    def _restore(self, pushed):
        if pushed:
            self.driver.cuCtxPopCurrent()

    # ------------------------------------------------------------------ memory
    def malloc(self, nbytes: int) -> int:
        with Bound(self):
            return int(check(self.rt.cudaMalloc(max(1, int(nbytes))), "cudaMalloc"))

    def free(self, ptr: int):
        if ptr:
            with Bound(self):
                check(self.rt.cudaFree(int(ptr)), "cudaFree")

    def malloc_host(self, nbytes: int) -> int:
        with Bound(self):
            return int(check(self.rt.cudaMallocHost(max(1, int(nbytes))), "cudaMallocHost"))

    def free_host(self, ptr: int):
        if ptr:
            with Bound(self):
                check(self.rt.cudaFreeHost(int(ptr)), "cudaFreeHost")

    def memcpy_htod(self, dst: int, src_host: int, nbytes: int):
        with Bound(self):
            check(self.rt.cudaMemcpy(int(dst), int(src_host), int(nbytes),
                                      self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice), "cudaMemcpy H2D")

    def memcpy_dtoh(self, dst_host: int, src: int, nbytes: int):
        with Bound(self):
            check(self.rt.cudaMemcpy(int(dst_host), int(src), int(nbytes),
                                      self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost), "cudaMemcpy D2H")

    def memset(self, ptr: int, value: int, nbytes: int, stream: int = 0):
        if not is_bound(self):
            with Bound(self):
                return self.memset(ptr, value, nbytes, stream)
        check(self.rt.cudaMemsetAsync(int(ptr), int(value), int(nbytes), int(stream)),
               "cudaMemsetAsync")

    def pointer_kind(self, ptr: int):
        """"device", "managed", "host" (pinned/registered) or None (memory the runtime does not
        know: plain pageable host memory, or garbage)."""
        res = self.rt.cudaPointerGetAttributes(int(ptr))
        if int(res[0]) != 0:
            self.rt.cudaGetLastError()
            return None
        return self._kinds.get(int(res[1].type))

    def pointer_info(self, ptr: int):
        """(kind, device ordinal) - see :meth:`CudaPlatform.pointer_info`."""
        return self.platform.pointer_info(ptr)

    def device_accessible(self, ptr: int) -> bool:
        """Reachable by this device's kernels: its own device memory, managed or pinned host
        memory, or pageable memory on a device with pageable-memory access."""
        k, dev = self.platform.pointer_info(ptr)
        if k == "device":
            return dev == self.device
        return k in ("managed", "host") or (k is None and self.pageable_access)

    # ------------------------------------------------------------------ streams / sync
    def stream_create(self) -> int:
        with Bound(self):
            s = check(self.rt.cudaStreamCreateWithFlags(self.rt.cudaStreamNonBlocking),
                       "cudaStreamCreate")
        return int(s)

    def stream_destroy(self, s: int):
        with Bound(self):
            check(self.rt.cudaStreamDestroy(int(s)), "cudaStreamDestroy")

    def stream_synchronize(self, s: int = 0):
        with Bound(self):
            check(self.rt.cudaStreamSynchronize(int(s)), "cudaStreamSynchronize")

    def synchronize(self):
        with Bound(self):
            check(self.rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    def last_error(self):
        return int(self.rt.cudaGetLastError()[0])

    def event_create(self):
        with Bound(self):
            return check(self.rt.cudaEventCreate(), "cudaEventCreate")

    def event_record(self, ev, stream: int = 0):
        with Bound(self):
            check(self.rt.cudaEventRecord(ev, int(stream)), "cudaEventRecord")

    def event_elapsed_ms(self, a, b) -> float:
        check(self.rt.cudaEventSynchronize(b), "cudaEventSynchronize")
        return float(check(self.rt.cudaEventElapsedTime(a, b), "cudaEventElapsedTime"))

    # graph capture (tests)
    def graph_capture_begin(self, stream: int):
        check(self.rt.cudaStreamBeginCapture(
            int(stream), self.rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture")

    def graph_capture_end(self, stream: int):
        g = check(self.rt.cudaStreamEndCapture(int(stream)), "cudaStreamEndCapture")
        ge = check(self.rt.cudaGraphInstantiate(g, 0), "cudaGraphInstantiate")
        return g, ge

    def graph_launch(self, graph_exec, stream: int):
        with Bound(self):
            check(self.rt.cudaGraphLaunch(graph_exec, int(stream)), "cudaGraphLaunch")

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
        """Load into this device's context (``module`` loads each image once per device)."""
        with Bound(self):
            h = check(self.driver.cuModuleLoadData(image), "cuModuleLoadData")
        return Module(h, self.driver.cuModuleGetFunction, "cuModuleGetFunction")

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
        check(self.driver.cuFuncSetAttribute(
            fn, A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes)), "cuFuncSetAttribute")

    def tensor_map(self, ptr: int, dtype: str, dims, strides_bytes, box, elem_strides=None, im2col=None):
        """A CUtensorMap (128 bytes, ctypes array: a by-value kernel argument) for a tiled,
        128-byte-swizzled view of ``ptr``; ``dims``/``box`` innermost first, ``strides_bytes``
        for dims 1.. (cuTensorMapEncodeTiled's conventions); out-of-range elements read 0.
        ``elem_strides``: traversal step per dim (default 1; the box then spans
        box[i] elements and loads ceil(box[i] / step) of them).  ``im2col`` = (lower corner,
        upper corner (spatial dims innermost first), channels per pixel, pixels per column):
        an im2col-mode map instead (cuTensorMapEncodeIm2col; ``box`` unused)."""
        import ctypes
        d = self.driver
        T = d.CUtensorMapDataType
        with Bound(self):
            if im2col is not None:
                tm = self._encode_im2col(d, T, dtype, ptr, dims, strides_bytes, elem_strides, *im2col)
            else:
                tm = self._encode_tiled(d, T, dtype, ptr, dims, strides_bytes, box, elem_strides)
        buf = (ctypes.c_ubyte * 128)()
        ctypes.memmove(buf, int(tm.getPtr()), 128)
        return buf

    @staticmethod
    def _encode_tiled(d, T, dtype, ptr, dims, strides_bytes, box, elem_strides=None):
        dt = {"HALF": T.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, "BFLOAT16": T.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
              "FLOAT": T.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, "FP8_E4M3": T.CU_TENSOR_MAP_DATA_TYPE_UINT8,
              "FP8_E5M2": T.CU_TENSOR_MAP_DATA_TYPE_UINT8, "INT8": T.CU_TENSOR_MAP_DATA_TYPE_UINT8}[dtype]
        return check(d.cuTensorMapEncodeTiled(
            dt, len(dims), int(ptr), [d.cuuint64_t(int(x)) for x in dims],
            [d.cuuint64_t(int(x)) for x in strides_bytes], [d.cuuint32_t(int(x)) for x in box],
            [d.cuuint32_t(int(x)) for x in (elem_strides or [1] * len(dims))], d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")

    @staticmethod
    def _encode_im2col(d, T, dtype, ptr, dims, strides_bytes, elem_strides, lower, upper, channels, pixels):
        dt = {"HALF": T.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, "BFLOAT16": T.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16}[dtype]
        return check(d.cuTensorMapEncodeIm2col(
            dt, len(dims), int(ptr), [d.cuuint64_t(int(x)) for x in dims],
            [d.cuuint64_t(int(x)) for x in strides_bytes], [int(x) for x in lower], [int(x) for x in upper],
            int(channels), int(pixels), [d.cuuint32_t(int(x)) for x in (elem_strides or [1] * len(dims))],
            d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeIm2col")

    def pack(self, args) -> PackedArgs:
        return PackedArgs(args)

    def launch(self, fn, grid, block, args, shmem: int = 0, stream: int = 0):
        """Asynchronous launch on ``stream``; ``args`` a PackedArgs (fast) or a list."""
        if not isinstance(args, PackedArgs):
            args = PackedArgs(args)
        if not is_bound(self):
            with Bound(self):
                return self.launch(fn, grid, block, args, shmem, stream)
        err = self.driver.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
                                         block[2], shmem, stream, args.address, 0)[0]
        if int(err) != 0:
            raise DeviceError(f"cuLaunchKernel failed: {getattr(err, 'name', err)} ({int(err)})")
