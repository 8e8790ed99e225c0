"""Host emulation of the engine's AMD kernels at wavefront level (no GPU): a generated gfx942
program's HIP source is compiled for the host with clang 19 behind a shim that runs each block's
threads as cooperative fibers (ucontext), so ``__syncthreads``, ``__shfl_xor`` across a 64-lane
wavefront and the MFMA builtins behave as on a CDNA compute unit:

* a barrier suspends a thread until every live thread of the block has reached one;
* ``__shfl_xor(v, m)``: each lane publishes v, a barrier, lane l reads lane l ^ m of its
  wavefront, a barrier;
* ``__builtin_amdgcn_mfma_f32_32x32x8f16`` / ``..bf16_1k``: each lane publishes its A / B
  operands (four 16-bit values), a barrier, lane (hi, lq) computes its 16 results
  D[8 (r / 4) + 4 hi + r % 4][lq] = C + sum_k A[m][k] B[k][n] with A[m][k] from lane
  m + 32 (k / 4), element k % 4, and B[k][n] from lane n + 32 (k / 4) (the operand layout of
  the instruction, ROCm composable_kernel's xdlops description), fp32 accumulation, a barrier.

Blocks run one after another (``__shared__`` arrays are function statics), so global atomics
need no atomicity.  This checks the kernels' own logic - index algebra, masks, online softmax,
dropout stream, loop bounds, the LDS tiles and the fragment layouts they assume - not the
compiler or the hardware.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

SHIM = r"""
#include <ucontext.h>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <math.h>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __align__(x) __attribute__((aligned(x)))
#define __shared__ static
#define HDN_PLATFORM_HIP 1
#define __gfx942__ 1
struct hdn_dim3 { unsigned x, y, z; };
static hdn_dim3 blockIdx, threadIdx, blockDim, gridDim;
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) float4 { float x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline float atomicAdd(float* p, float v) { float o = *p; *p += v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; }
static inline int atomicOr(int* p, int v) { int o = *p; *p |= v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p += v; return o; }

namespace emu {
struct Fiber { ucontext_t ctx; bool done, waiting; void* stack; };
static ucontext_t sched;
static Fiber* F;
static int nf, cur;
static void barrier() {
    F[cur].waiting = true;
    swapcontext(&F[cur].ctx, &sched);
}
}
static inline void __syncthreads() { emu::barrier(); }

template <class T> static T __shfl_xor(T v, int m, int width = 64) {
    static T slot[1024];
    const unsigned t = threadIdx.x;
    slot[t] = v;
    emu::barrier();
    const T r = slot[(t & ~63u) | ((t & 63u) ^ (unsigned)m)];
    emu::barrier();
    return r;
}

typedef float emu_f16x16 __attribute__((ext_vector_type(16)));
typedef _Float16 emu_h4 __attribute__((ext_vector_type(4)));
typedef short emu_s4 __attribute__((ext_vector_type(4)));
static float emu_a[1024][4], emu_b[1024][4];
static emu_f16x16 emu_mfma(emu_f16x16 c) {
    emu::barrier();
    const unsigned t = threadIdx.x, lane = t & 63u, base = t - lane, hi = lane >> 5, lq = lane & 31u;
    emu_f16x16 d;
    for (int r = 0; r < 16; ++r) {
        const unsigned m = 8 * (r / 4) + 4 * hi + r % 4, n = lq;
        float acc = c[r];
        for (int k = 0; k < 8; ++k)
            acc += emu_a[base + m + 32 * (k / 4)][k % 4] * emu_b[base + n + 32 * (k / 4)][k % 4];
        d[r] = acc;
    }
    emu::barrier();
    return d;
}
static emu_f16x16 emu_mfma_f16(emu_h4 a, emu_h4 b, emu_f16x16 c, int, int, int) {
    for (int e = 0; e < 4; ++e) { emu_a[threadIdx.x][e] = (float)a[e]; emu_b[threadIdx.x][e] = (float)b[e]; }
    return emu_mfma(c);
}
static float emu_bf(short s) { return __uint_as_float(((unsigned)(unsigned short)s) << 16); }
static emu_f16x16 emu_mfma_bf16(emu_s4 a, emu_s4 b, emu_f16x16 c, int, int, int) {
    for (int e = 0; e < 4; ++e) { emu_a[threadIdx.x][e] = emu_bf(a[e]); emu_b[threadIdx.x][e] = emu_bf(b[e]); }
    return emu_mfma(c);
}
#define __builtin_amdgcn_mfma_f32_32x32x8f16 emu_mfma_f16
#define __builtin_amdgcn_mfma_f32_32x32x8bf16_1k emu_mfma_bf16
"""

ARG = r"""
struct HdnArg { void* p; float f;
  template <class T> operator T*() const { return (T*)p; }
  operator float() const { return f; } };
"""

RUN = r"""
static HdnArg* emu_args;
static void emu_entry() {
    threadIdx = {(unsigned)emu::cur, 0, 0};
    KERNEL_CALL;
    emu::F[emu::cur].done = true;
    swapcontext(&emu::F[emu::cur].ctx, &emu::sched);
}
extern "C" int hdn_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, HdnArg* a) {
    const size_t STACK = 256 * 1024;
    emu_args = a;
    gridDim = {gx, gy, gz};
    blockDim = {bx, 1, 1};
    emu::nf = (int)bx;
    emu::F = new emu::Fiber[bx];
    for (unsigned i = 0; i < bx; ++i) emu::F[i].stack = std::malloc(STACK);
    for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x) {
        blockIdx = {x, y, z};
        for (unsigned i = 0; i < bx; ++i) {
            emu::Fiber& f = emu::F[i];
            f.done = f.waiting = false;
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = f.stack;
            f.ctx.uc_stack.ss_size = STACK;
            f.ctx.uc_link = nullptr;
            makecontext(&f.ctx, emu_entry, 0);
        }
        int live = (int)bx;
        while (live > 0) {
            for (unsigned i = 0; i < bx; ++i) {
                emu::Fiber& f = emu::F[i];
                if (f.done || f.waiting) continue;
                emu::cur = (int)i;
                threadIdx = {i, 0, 0};
                swapcontext(&emu::sched, &f.ctx);
            }
            live = 0;
            for (unsigned i = 0; i < bx; ++i) {
                if (!emu::F[i].done) { ++live; emu::F[i].waiting = false; }
            }
        }
    }
    for (unsigned i = 0; i < bx; ++i) std::free(emu::F[i].stack);
    delete[] emu::F;
    return 0;
}
"""


def clang():
    return shutil.which("clang++-19") or shutil.which("clang-19")


def _build(src: str, headers: dict, name: str):
    d = os.path.join(tempfile.gettempdir(), "hdn_wave_emu")
    os.makedirs(d, exist_ok=True)
    h = hashlib.sha256((src + "".join(sorted(headers.values()))).encode()).hexdigest()[:20]
    so = os.path.join(d, f"{name}_{h}.so")
    if not os.path.exists(so):
        inc = os.path.join(d, f"inc_{h}")
        os.makedirs(inc, exist_ok=True)
        for k, v in headers.items():
            tmp = os.path.join(inc, f"{k}.{os.getpid()}.tmp")
            with open(tmp, "w") as f:
                f.write(v)
            os.replace(tmp, os.path.join(inc, k))
        # per-process file names: concurrent test processes may build the same library
        tag = f".{os.getpid()}"
        cpp = so[:-3] + tag + ".cpp"
        with open(cpp, "w") as f:
            f.write(src)
        r = subprocess.run([clang(), "-x", "c++", "-std=c++17", "-O1", "-w", "-fPIC", "-shared",
                            "-I", inc, cpp, "-o", so + tag + ".tmp"], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-6000:])
        os.replace(so + tag + ".tmp", so)
    return ctypes.CDLL(so)


def _args(vals):
    class A(ctypes.Structure):
        _fields_ = [("p", ctypes.c_void_p), ("f", ctypes.c_float)]
    arr = (A * max(1, len(vals)))()
    for i, v in enumerate(vals):
        if isinstance(v, float):
            arr[i].f = v
        else:
            arr[i].p = v
    return arr


def launch(src, name, grid, block, vals, headers):
    """Run kernel ``name`` of ``src`` over ``grid`` with ``block[0]`` threads per block."""
    call = f"{name}(" + ", ".join(f"emu_args[{i}]" for i in range(len(vals))) + ")"
    code = SHIM + ARG + src + RUN.replace("KERNEL_CALL", call)
    lib = _build(code, headers, name)
    lib.hdn_emu_launch(*[ctypes.c_uint(int(v)) for v in (grid[0], grid[1], grid[2], block[0])],
                       _args(vals))


class Memory:
    """Host buffers standing in for device memory (64-byte aligned)."""

    def __init__(self):
        self.keep = []

    def alloc(self, nbytes, fill=0):
        a = np.full(max(16, int(nbytes)) + 64, fill, np.uint8)
        off = (-a.ctypes.data) % 64
        self.keep.append(a)
        return a.ctypes.data + off, a[off:off + int(nbytes)]


def run_program(prog, bufs, headers, scalars=None):
    """Every step of an engine program on the host: bufs = {uid: host address}; the workspace
    and the plan's scratch are allocated here (memsets zero them)."""
    mem = Memory()
    ws, ws_view = mem.alloc(max(16, prog.ws_size), 0xEE)
    sc, sc_view = mem.alloc(max(16, prog.scratch_size), 0xEE)
    base = {"ws": (ws, ws_view), "sc": (sc, sc_view)}

    def val(a):
        if a[0] in base:
            return base[a[0]][0] + a[1]
        if a[0] == "s":
            return float((scalars or {})[a[1]])
        return bufs[a[1]]
    for st in prog.steps:
        if st[0] == "memset":
            where = st[1] if isinstance(st[1], tuple) else ("ws", st[1])
            if where[0] in base:
                base[where[0]][1][where[1]:where[1] + st[2]] = 0
            else:
                ctypes.memset(bufs[where[1]], 0, st[2])
            continue
        _, src, name, grid, block, args = st[:6]
        launch(src, name, grid, block, [val(a) for a in args], headers)
