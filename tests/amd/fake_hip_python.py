"""A recording stand-in of hip-python (``hip.hip`` and ``hip.hiprtc``) for the calls
hipdnn_cabi/device/hip.py makes, with hip-python's conventions (every call returns a tuple
whose first item is the error code; output buffers are caller-allocated bytearrays; a program is
destroyed through ``createRef()``).  One gfx942 device (or the arch given) whose memory is host
memory.

``hiprtcCompileProgram`` compiles for real when a compiler is given (``compile_hiprtc(source,
name, options, headers)`` of tools/amd_toolchain.py: hiprtc's own options + the caller's, with
clang 19 and the ROCm device libraries); otherwise the program yields a canned object.
``hipModuleLoadData`` refuses anything but an amdgcn ELF for the device's target, and
``hipModuleGetFunction`` looks the kernel up in that ELF's symbol table (hipErrorNotFound when
it is not there), as the ROCm loader does.
"""
from __future__ import annotations

import ctypes
import sys
import types

import numpy as np

HIP_SUCCESS, HIP_ERROR_INVALID_IMAGE, HIP_ERROR_NOT_FOUND = 0, 200, 500
HIPRTC_SUCCESS, HIPRTC_ERROR_COMPILATION = 0, 6


class _Prog:
    def __init__(self, src, name, headers):
        self.src, self.name, self.headers = src, name, headers
        self.log, self.code = b"", b""

    def createRef(self):
        return self


class _Props:
    def __init__(self):
        self.gcnArchName = b""
        self.name = b""
        self.multiProcessorCount = 0
        self.pageableMemoryAccess = 0


def make(arch="gfx942", compiler=None, cus=304):
    """(package module ``hip``, call log).  Install with :func:`install`."""
    calls = []
    mem = {}

    def rec(*a):
        calls.append(a)

    # ---------------------------------------------------------------- hiprtc
    rtc = types.ModuleType("hip.hiprtc")
    rtc.hiprtcVersion = lambda: (HIPRTC_SUCCESS, 6, 2)

    def create(src, name, n, srcs, names):
        rec("hiprtcCreateProgram", name, n, tuple(names), tuple(srcs))
        return HIPRTC_SUCCESS, _Prog(src, name, dict(zip(names, srcs)))

    def compile_(prog, n, opts):
        opts = [o.decode() for o in opts]
        rec("hiprtcCompileProgram", tuple(opts))
        assert n == len(opts)
        if compiler is None:
            prog.code = b"\x7fELF canned code object"
            return (HIPRTC_SUCCESS,)
        try:
            prog.code = compiler(prog.src.decode(), prog.name.decode(), opts,
                                 {k.decode(): v.decode() for k, v in prog.headers.items()})
            prog.log = b""
            return (HIPRTC_SUCCESS,)
        except RuntimeError as e:
            prog.log = str(e).encode()
            return (HIPRTC_ERROR_COMPILATION,)

    def log_size(prog):
        return HIPRTC_SUCCESS, len(prog.log) + 1

    def log(prog, buf):
        buf[:len(prog.log) + 1] = prog.log + b"\0"
        return (HIPRTC_SUCCESS,)

    def code_size(prog):
        return HIPRTC_SUCCESS, len(prog.code)

    def code(prog, buf):
        buf[:len(prog.code)] = prog.code
        return (HIPRTC_SUCCESS,)

    def destroy(prog):
        assert isinstance(prog, _Prog), "hiprtcDestroyProgram takes prog.createRef()"
        rec("hiprtcDestroyProgram")
        return (HIPRTC_SUCCESS,)
    rtc.hiprtcCreateProgram, rtc.hiprtcCompileProgram = create, compile_
    rtc.hiprtcGetProgramLogSize, rtc.hiprtcGetProgramLog = log_size, log
    rtc.hiprtcGetCodeSize, rtc.hiprtcGetCode, rtc.hiprtcDestroyProgram = code_size, code, destroy

    # ---------------------------------------------------------------- hip
    hip = types.ModuleType("hip.hip")
    hip.hipDeviceProp_t = _Props
    hip.hipStreamNonBlocking = 1
    hip.hipMemcpyKind = types.SimpleNamespace(hipMemcpyHostToDevice=1, hipMemcpyDeviceToHost=2)
    cur = [0]
    hip.hipGetDeviceCount = lambda: (HIP_SUCCESS, 1)
    hip.hipGetDevice = lambda: (HIP_SUCCESS, cur[0])

    def set_device(d):
        rec("hipSetDevice", d)
        cur[0] = d
        return (HIP_SUCCESS,)
    hip.hipSetDevice = set_device

    def props(p, dev):
        p.gcnArchName = f"{arch}:sramecc+:xnack-".encode()
        p.name = f"stand-in {arch}".encode()
        p.multiProcessorCount = cus
        return (HIP_SUCCESS,)
    hip.hipGetDeviceProperties = props

    def malloc(n):
        a = np.zeros(int(n) + 256, np.uint8)
        p = a.ctypes.data + (-a.ctypes.data) % 256
        mem[p] = a
        rec("hipMalloc", int(n))
        return HIP_SUCCESS, p
    hip.hipMalloc = malloc
    hip.hipHostMalloc = lambda n, flags: malloc(n)
    hip.hipFree = hip.hipHostFree = lambda p: (mem.pop(int(p), None), (HIP_SUCCESS,))[1]

    def memcpy(dst, src, n, kind):
        ctypes.memmove(int(dst), int(src), int(n))
        return (HIP_SUCCESS,)
    hip.hipMemcpy = memcpy
    hip.hipMemsetAsync = lambda p, v, n, s: (ctypes.memset(int(p), int(v), int(n)), rec("hipMemsetAsync", int(p), int(n), s),
                                             (HIP_SUCCESS,))[2]
    hip.hipStreamSynchronize = lambda s: (HIP_SUCCESS,)
    hip.hipDeviceSynchronize = lambda: (HIP_SUCCESS,)
    streams = []

    def stream_create(flags):          # a stream handle points at mapped memory, as a real one
        a = np.zeros(256, np.uint8)
        streams.append(a)
        return HIP_SUCCESS, a.ctypes.data
    hip.hipStreamCreateWithFlags = stream_create
    hip.hipStreamDestroy = lambda s: (HIP_SUCCESS,)
    hip.hipStreamGetDevice = lambda s: (HIP_SUCCESS, 0)
    hip.hipGetLastError = lambda: (HIP_SUCCESS,)

    def ptr_attrs(p):
        for base, a in mem.items():
            if base <= int(p) < base + a.nbytes:
                return HIP_SUCCESS, types.SimpleNamespace(type=types.SimpleNamespace(name="hipMemoryTypeDevice"), device=0)
        return 1, None
    hip.hipPointerGetAttributes = ptr_attrs
    modules = []

    def load(img):
        import amd_toolchain as tc
        img = bytes(img)
        rec("hipModuleLoadData", len(img))
        if compiler is not None:
            try:
                if tc.code_object_target(img) != arch:
                    return HIP_ERROR_INVALID_IMAGE, None
                names = tc.kernels_defined(img)
            except ValueError:
                return HIP_ERROR_INVALID_IMAGE, None
        else:
            names = None
        modules.append(names)
        return HIP_SUCCESS, len(modules)

    def get_function(mod, name):
        names = modules[mod - 1]
        rec("hipModuleGetFunction", mod, name.decode())
        if names is not None and name.decode() not in names:
            return HIP_ERROR_NOT_FOUND, None
        return HIP_SUCCESS, ("fn", mod, name.decode())

    def launch(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        rec("hipModuleLaunchKernel", fn[2], (gx, gy, gz), (bx, by, bz), shmem, stream, params, extra)
        return (HIP_SUCCESS,)
    hip.hipModuleLoadData, hip.hipModuleGetFunction, hip.hipModuleLaunchKernel = load, get_function, launch

    pkg = types.ModuleType("hip")
    pkg.hip, pkg.hiprtc = hip, rtc
    pkg.__path__ = []
    return pkg, calls


def install(monkeypatch, pkg):
    """Make ``from hip import hip, hiprtc`` find the stand-in (pytest monkeypatch)."""
    monkeypatch.setitem(sys.modules, "hip", pkg)
    monkeypatch.setitem(sys.modules, "hip.hip", pkg.hip)
    monkeypatch.setitem(sys.modules, "hip.hiprtc", pkg.hiprtc)
