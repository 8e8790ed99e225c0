"""Host emulation of the generated kernels (no GPU): the HIP-dialect sources are compiled with
the host C++ compiler behind a small shim (``__global__`` -> plain function, blockIdx/threadIdx
as globals) and run block by block, thread by thread.  Kernels without shared memory or
barriers (elementwise, split-K finish, thread-per-output reduction, batchnorm finalize) run as
they are; GEMM steps run the generated prelude (operand gathers ``a_off``/``b_off``, the
epilogue ``store_c``/``store_c8``) under a serial reference loop, so the index arithmetic of
every convolution direction and the vectorised epilogue are checked on the CPU.  Kernels on
hdn_reduce.h's block reductions (barriers, lane exchanges: the channels-last batchnorm partial
sums and finishes, the norm backward) run with ``run_kernel_threads`` - one OS thread per GPU
thread, a real barrier - at 32 or 64 lanes.  Other barrier kernels (the generic batchnorm sums,
two-pass reduction) are emulated in numpy from their documented contract by the tests'
numerics on the GPU only."""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

SHIM = r"""
#include <cmath>
#include <cstring>
#include <cstdint>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __align__(x) alignas(x)
#define __shared__ static
#define __syncwarp()
#define HDN_PLATFORM_HIP 1
#include <cstdlib>
// run_kernel runs barrier-free kernels only: a barrier or a lane exchange stops the process
#define HDN_SERIAL_STUBS static inline void __syncthreads() { std::abort(); } \
  template <class T> static T __shfl_xor(T v, int) { std::abort(); return v; }
HDN_SERIAL_STUBS
struct hdn_dim3 { unsigned x, y, z; };
static hdn_dim3 blockIdx, threadIdx, blockDim, gridDim;
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline double __longlong_as_double(long long u) { double f; std::memcpy(&f, &u, 8); return f; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p += v; return o; }
#include <math.h>
"""

ARG = r"""
#include <type_traits>
struct HdnArg { void* p; float f; double d;
  template <class T> operator T*() const { return (T*)p; }
  operator float() const { return f; }
  template <class T, typename std::enable_if<std::is_same<T, double>::value, int>::type = 0>
  operator T() const { return d; } };
"""


def compiler():
    return shutil.which("g++") or shutil.which("c++")


def _build(src: str, tag: str, flags=()):
    d = os.path.join(tempfile.gettempdir(), "hdn_host_emu")
    os.makedirs(d, exist_ok=True)
    h = hashlib.sha256(src.encode()).hexdigest()[:20]
    so = os.path.join(d, f"{tag}_{h}.so")
    if not os.path.exists(so):
        # each process compiles under its own names and renames the result into place, so
        # parallel test workers never load a half-written library
        tmp = f"{so[:-3]}.{os.getpid()}"
        with open(tmp + ".cpp", "w") as f:
            f.write(src)
        r = subprocess.run([compiler(), "-std=c++17", "-O1", "-w", "-fPIC", "-shared", *flags,
                            "-I", d, tmp + ".cpp", "-o", tmp + ".so"], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-4000:])
        os.replace(tmp + ".so", so)
        os.unlink(tmp + ".cpp")
    return ctypes.CDLL(so)


def _inline_header(src, headers):
    for k, v in headers.items():
        src = src.replace(f'#include "{k}"', v.replace("#pragma once", ""))
    return src


def _args(vals):
    class A(ctypes.Structure):
        _fields_ = [("p", ctypes.c_void_p), ("f", ctypes.c_float), ("d", ctypes.c_double)]
    arr = (A * max(1, len(vals)))()
    for i, v in enumerate(vals):
        if isinstance(v, ctypes.c_double):      # a double by-value argument
            arr[i].f = arr[i].d = v.value
        elif isinstance(v, float):
            arr[i].f = v
        else:
            arr[i].p = v
    return arr


def run_kernel(src, name, grid, block, vals, headers):
    """Run a barrier-free kernel on the host: every block, every thread, in order."""
    call = ", ".join(f"a[{i}]" for i in range(len(vals)))
    code = SHIM + ARG + _inline_header(src, headers) + f"""
extern "C" void hdn_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, HdnArg* a) {{
  gridDim = {{gx, gy, gz}}; blockDim = {{bx, 1, 1}};
  for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x)
    for (unsigned t = 0; t < bx; ++t) {{ blockIdx = {{x, y, z}}; threadIdx = {{t, 0, 0}}; {name}({call}); }}
}}
"""
    lib = _build(code, name)
    lib.hdn_emu_launch(*[ctypes.c_uint(int(v)) for v in (grid[0], grid[1], grid[2], block[0])],
                       _args(vals))


def run_gemm_prelude(prelude, vals, headers, vec8, batch, M, N, K, split=1):
    """Serial GEMM through the generated a_off/b_off/store_c(8): vals = [A, B, epi args...];
    with ``split`` > 1, vals = [A, B, partials]: the whole sum goes to split 0, zeros to the rest
    (the split-K finish kernel then runs as it is).  An s8 prelude (HDN_ACC_INT 1) gets the
    exact sums as ints (int partials)."""
    call = "".join(f", a[{i}]" for i in range(2, len(vals)))
    acc_t = "int" if "#define HDN_ACC_INT 1" in prelude else "float"
    code = SHIM + ARG + _inline_header(prelude, headers) + f"""
extern "C" void hdn_emu_gemm(HdnArg* a, int vec8) {{
  const TA* A = (const TA*)a[0].p; const TB* B = (const TB*)a[1].p;
  for (int b = 0; b < {batch}; ++b) for (int m = 0; m < {M}; ++m)
    for (int n0 = 0; n0 < {N}; n0 += (vec8 ? 8 : 1)) {{
      {acc_t} v[8];
      for (int j = 0; j < (vec8 ? 8 : 1); ++j) {{
        double acc = 0.0;
        for (int k = 0; k < {K}; ++k) acc += (double)load_a(A, b, m, k) * (double)load_b(B, b, k, n0 + j);
        v[j] = ({acc_t})acc;
      }}
#if WG_STATS
      {{ double* st = (double*)a[{len(vals) - 1}].p;
        for (int j = 0; j < (vec8 ? 8 : 1); ++j) {{
          const double r = hdn_to_float(hdn_from_float<TS>(v[j])); st[n0 + j] += r; st[{N} + n0 + j] += r * r; }} }}
#endif
      {{part}}
#if C_VEC
      {{vec}}
#endif
      {{scal}}
    }}
}}
"""
    if split > 1:
        code = code.replace("{part}", f"""{{ {acc_t}* P = ({acc_t}*)a[2].p;
        for (int s = 0; s < {split}; ++s) P[(((long long)b * {split} + s) * {M} + m) * {N} + n0] = s ? 0 : v[0];
        continue; }}""").replace("{vec}", "").replace("{scal}", "")
    else:
        code = code.replace("{part}", "").replace(
            "{vec}", f"if (vec8) {{ store_c8(0{call}, b, m, n0, v); continue; }}").replace(
            "{scal}", f"store_c(0{call}, b, m, n0, v[0]);")
    # store_c's first parameter list starts with the epilogue params: drop the leading 0
    code = code.replace("store_c8(0, ", "store_c8(").replace("store_c(0, ", "store_c(")
    code = code.replace("store_c8(0,", "store_c8(").replace("store_c(0,", "store_c(")
    lib = _build(code, "gemm")
    lib.hdn_emu_gemm(_args(vals), ctypes.c_int(int(vec8)))


def run_pair_gemm(prelude, vals, headers, vec8, M, F, K):
    """The paired GEMM (gemm.emit_pair; WG_PAIR) serially: vals = [A, B, B2, epi args...];
    per output (m, n < F) the two dot products through the generated b_off (one layout for
    both B), pair_v (the fused run) and store_c / store_c8."""
    call = "".join(f", a[{i}]" for i in range(3, len(vals)))
    code = SHIM + ARG + _inline_header(prelude, headers) + f"""
extern "C" void hdn_emu_pair(HdnArg* a, int vec8) {{
  const TA* A = (const TA*)a[0].p; const TB* B = (const TB*)a[1].p; const TB* B2 = (const TB*)a[2].p;
  for (int m = 0; m < {M}; ++m)
    for (int n0 = 0; n0 < {F}; n0 += (vec8 ? 8 : 1)) {{
      float v[8];
      for (int j = 0; j < (vec8 ? 8 : 1); ++j) {{
        double g = 0.0, u = 0.0;
        for (int k = 0; k < {K}; ++k) {{
          g += (double)load_a(A, 0, m, k) * (double)load_b(B, 0, k, n0 + j);
          u += (double)load_a(A, 0, m, k) * (double)load_b(B2, 0, k, n0 + j);
        }}
        v[j] = pair_v(0{call}, 0, m, n0 + j, (float)g, (float)u);
      }}
#if C_VEC
      if (vec8) {{ store_c8(0{call}, 0, m, n0, v); continue; }}
#endif
      store_c(0{call}, 0, m, n0, v[0]);
    }}
}}
"""
    for f in ("store_c8", "store_c", "pair_v"):
        code = code.replace(f"{f}(0, ", f"{f}(").replace(f"{f}(0,", f"{f}(")
    lib = _build(code, "pair")
    lib.hdn_emu_pair(_args(vals), ctypes.c_int(int(vec8)))


def run_int8_gemm(src, vals, headers):
    """The INT8 GEMM (gemm.int8_source: WMMA body) under a serial loop: its prelude's
    a_off / b_off gathers, int32 sums, c_off / c_val stores; vals = [A, B, C]."""
    prelude = src[:src.index('extern "C" __global__')].replace("#include <mma.h>", "")
    code = SHIM + ARG + _inline_header(prelude, headers) + """
extern "C" void hdn_emu_int8(HdnArg* a) {
  const signed char* A = (const signed char*)a[0].p; const signed char* B = (const signed char*)a[1].p;
  TC* C = (TC*)a[2].p;
  for (int b = 0; b < GBATCH; ++b) for (int m = 0; m < GM; ++m) for (int n = 0; n < GN; ++n) {
    int acc = 0;
    for (int k = 0; k < GK; ++k) {
      const long long oa = a_off(b, m, k), ob = b_off(b, k, n);
      acc += (oa < 0 ? 0 : (int)A[oa]) * (ob < 0 ? 0 : (int)B[ob]);
    }
    C[c_off(b, m, n)] = c_val(acc);
  }
}
"""
    lib = _build(code, "int8")
    lib.hdn_emu_int8(_args(vals))


class HostMem:
    """Host buffers standing in for device memory (addresses are real host pointers)."""

    def __init__(self):
        self.keep = []

    def alloc(self, nbytes, fill=0xFF):
        a = np.full(max(16, int(nbytes)) + 64, fill, np.uint8)
        off = (-a.ctypes.data) % 64
        self.keep.append(a)
        return a.ctypes.data + off, a[off:off + int(nbytes)]


def mvec_violations(prelude, headers, batch, M, K):
    """For an A_MODE 2 GEMM prelude (the SIMT core's 16-byte m-vector loads of A): the number of
    (b, m, k), m % 4 == 0, where a_off(b, m + i, k) != a_off(b, m, k) + i for some i < 4, or
    the vector's offset is not a multiple of 4 elements (16 bytes of fp32), or only part of it
    is padding."""
    code = SHIM + ARG + _inline_header(prelude, headers) + f"""
extern "C" long long hdn_emu_mvec() {{
  long long bad = 0;
  for (int b = 0; b < {batch}; ++b) for (int m = 0; m < {M}; m += 4) for (int k = 0; k < {K}; ++k) {{
    const long long o = a_off(b, m, k);
    if (o >= 0 && (o % 4) != 0) {{ ++bad; continue; }}
    for (int i = 1; i < 4; ++i) {{
      const long long oi = m + i < {M} ? a_off(b, m + i, k) : -2;
      if (o < 0 ? oi != -1 : oi != o + i) {{ ++bad; break; }}
    }}
  }}
  return bad;
}}
"""
    lib = _build(code, "mvec")
    lib.hdn_emu_mvec.restype = ctypes.c_longlong
    return int(lib.hdn_emu_mvec())


def chunk_violations(prelude, headers, batch, M, N, K, a_mode, b_mode, width=8):
    """For a GEMM prelude with 16-byte chunk loads (A_MODE / B_MODE 1: 8 consecutive k; 2: 8
    consecutive m of A / n of B): the number of chunks (starting at a multiple of 8, inside the
    operand) whose 8 offsets are not o, o + 1, ..., o + 7 with o a multiple of 8, or all -1.
    ``width``: elements per chunk (16 for 1-byte types)."""
    def loop(op, mode):
        if mode not in (1, 2):
            return ""
        fn = "a_off(b, m, k)" if op == "A" else "b_off(b, k, n)"
        outer, inner = (("m", M), ("k", K)) if op == "A" else (("n", N), ("k", K))
        step = "k" if mode == 1 else outer[0]
        lim = dict([outer, inner])
        other = inner[0] if step == outer[0] else outer[0]
        call = fn.replace(f"{step})", f"{step} + i)").replace(f"{step},", f"{step} + i,")
        return f"""
  for (int b = 0; b < {batch}; ++b) for (int {other} = 0; {other} < {lim[other]}; ++{other})
    for (int {step} = 0; {step} + {width} <= {lim[step]}; {step} += {width}) {{
      const long long o = {fn};
      if (o >= 0 && (o % {width}) != 0) {{ ++bad; continue; }}
      for (int i = 1; i < {width}; ++i) {{
        const long long oi = {call};
        if (o < 0 ? oi >= 0 : oi != o + i) {{ ++bad; break; }}
      }}
    }}"""
    code = SHIM + ARG + _inline_header(prelude, headers) + f"""
extern "C" long long hdn_emu_chunks() {{
  long long bad = 0;{loop("A", a_mode)}{loop("B", b_mode)}
  return bad;
}}
"""
    lib = _build(code, "chunks")
    lib.hdn_emu_chunks.restype = ctypes.c_longlong
    return int(lib.hdn_emu_chunks())


THREADS = r"""
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
static std::mutex hdn_mu;
static std::condition_variable hdn_cv;
static unsigned hdn_waiting = 0, hdn_generation = 0, hdn_nthreads = 1;
static void __syncthreads() {
  std::unique_lock<std::mutex> lk(hdn_mu);
  const unsigned gen = hdn_generation;
  if (++hdn_waiting == hdn_nthreads) { hdn_waiting = 0; ++hdn_generation; hdn_cv.notify_all(); return; }
  hdn_cv.wait(lk, [&] { return hdn_generation != gen; });
}
// a lane exchange of the whole block (the callers run it in uniform control flow): every
// thread publishes its value, then reads its partner's
static double hdn_xch[1024];
template <class T> static T __shfl_xor(T v, int o) {
  hdn_xch[threadIdx.x] = (double)v;
  __syncthreads();
  const T r = (T)hdn_xch[threadIdx.x ^ o];
  __syncthreads();
  return r;
}
"""


# the lane width the threaded emulation gives hdn_reduce.h: 32 (NVIDIA warps) or 64 (AMD)
EMU_WARP = 32


def run_kernel_threads(src, name, grid, block, vals, headers):
    """Run a kernel with block barriers (``__syncthreads``) and lane exchanges on the host: the
    blocks in order, the threads of one block as OS threads meeting at each barrier; shared
    memory is the kernel's function-level statics (one block at a time).  The AMD dialect
    (``__shfl_xor``) is what runs, with hdn_reduce.h's lane width EMU_WARP."""
    hdr = dict(headers)
    if "hdn_reduce.h" in hdr:
        hdr["hdn_reduce.h"] = hdr["hdn_reduce.h"].replace("#define HDN_WARP 64", f"#define HDN_WARP {EMU_WARP}")
    call = ", ".join(f"a[{i}]" for i in range(len(vals)))
    shim = SHIM.replace("static hdn_dim3 blockIdx, threadIdx, blockDim, gridDim;",
                        "static hdn_dim3 blockIdx, blockDim, gridDim;\nstatic thread_local hdn_dim3 threadIdx;")
    shim = shim.replace("\nHDN_SERIAL_STUBS\n", "\n")
    code = shim + THREADS + ARG + _inline_header(src, hdr) + f"""
extern "C" void hdn_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, HdnArg* a) {{
  gridDim = {{gx, gy, gz}}; blockDim = {{bx, 1, 1}}; hdn_nthreads = bx;
  for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x) {{
    blockIdx = {{x, y, z}};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < bx; ++t)
      ts.emplace_back([=] {{ threadIdx = {{t, 0, 0}}; {name}({call}); }});
    for (auto& th : ts) th.join();
  }}
}}
"""
    lib = _build(code, name + "_mt", ["-pthread"])
    lib.hdn_emu_launch(*[ctypes.c_uint(int(v)) for v in (grid[0], grid[1], grid[2], block[0])],
                       _args(vals))


# ------------------------------------------------------------------ mma.sync kernels, per lane
# hdn_mma.h for the host: one OS thread per GPU thread (run_kernel_threads), the warp-collective
# instructions (ldmatrix, mma.sync m16n8k16, __shfl_xor_sync, __syncwarp) through a per-warp
# exchange area and barrier, with the PTX ISA's fragment layouts; cp.async copies are queued per
# thread and performed at the cp.async.wait_group that must see them (HDN_EMU_LAZY 1: the
# latest moment the hardware may complete them, so a read before its wait sees the shared
# memory's previous contents) or at issue (0)
MMA_EMU = r"""
#include <mutex>
#include <condition_variable>
#include <vector>
#ifndef HDN_MMA_TYPE
#define HDN_MMA_TYPE "f16"
#endif
struct HdnWarpBar { std::mutex mu; std::condition_variable cv; unsigned waiting = 0, gen = 0; };
static HdnWarpBar hdn_wbar[32];
static void hdn_warp_sync() {
  HdnWarpBar& b = hdn_wbar[threadIdx.x >> 5];
  std::unique_lock<std::mutex> lk(b.mu);
  const unsigned g = b.gen;
  if (++b.waiting == 32) { b.waiting = 0; ++b.gen; b.cv.notify_all(); return; }
  b.cv.wait(lk, [&] { return b.gen != g; });
}
static void __syncwarp() { hdn_warp_sync(); }
struct HdnWarpX { const void* p[32]; unsigned r[32][6]; double d[32]; };
static HdnWarpX hdn_wx[32];
template <class T> static T __shfl_xor_sync(unsigned, T v, int o) {
  HdnWarpX& x = hdn_wx[threadIdx.x >> 5];
  const int l = threadIdx.x & 31;
  x.d[l] = (double)v;
  hdn_warp_sync();
  const T r = (T)x.d[l ^ o];
  hdn_warp_sync();
  return r;
}
static unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; if (v > o) *p = v; return o; }
#define __expf(x) expf(x)
static unsigned hdn_saddr(const void* p) { return (unsigned)(unsigned long long)p; }
struct HdnCp { void* dst; const void* src; int n; bool full; };
static thread_local std::vector<std::vector<HdnCp>> hdn_cp_groups;
static thread_local std::vector<HdnCp> hdn_cp_open;
static void hdn_cp_do(const HdnCp& c) {
  if (c.full) std::memcpy(c.dst, c.src, c.n); else std::memset(c.dst, 0, c.n);
}
static void hdn_cp_issue(const HdnCp& c) {
#if HDN_EMU_LAZY
  hdn_cp_open.push_back(c);
#else
  hdn_cp_do(c);
#endif
}
static void hdn_cp16(void* smem, const void* gmem, bool full) { hdn_cp_issue({smem, gmem, 16, full}); }
static void hdn_cp4(void* smem, const void* gmem, bool full) { hdn_cp_issue({smem, gmem, 4, full}); }
static void hdn_cp8(void* smem, const void* gmem, bool full) { hdn_cp_issue({smem, gmem, 8, full}); }
static void hdn_cp_commit() { hdn_cp_groups.push_back(hdn_cp_open); hdn_cp_open.clear(); }
template <int N> static void hdn_cp_wait() {
  while ((int)hdn_cp_groups.size() > N) {
    for (const HdnCp& c : hdn_cp_groups.front()) hdn_cp_do(c);
    hdn_cp_groups.erase(hdn_cp_groups.begin());
  }
}
// ldmatrix .x4: matrix m's row i at the address lane 8 m + i gives; lane l receives row l / 4,
// columns 2 (l % 4), +1 (.trans: rows 2 (l % 4), +1 of column l / 4)
static void hdn_ldsm_any(unsigned* r, const void* p, bool trans) {
  HdnWarpX& x = hdn_wx[threadIdx.x >> 5];
  const int l = threadIdx.x & 31;
  x.p[l] = p;
  hdn_warp_sync();
  for (int m = 0; m < 4; ++m) {
    unsigned lo, hi;
    if (trans) {
      lo = ((const hdn_u16*)x.p[8 * m + 2 * (l % 4)])[l / 4];
      hi = ((const hdn_u16*)x.p[8 * m + 2 * (l % 4) + 1])[l / 4];
    } else {
      const hdn_u16* row = (const hdn_u16*)x.p[8 * m + l / 4];
      lo = row[2 * (l % 4)];
      hi = row[2 * (l % 4) + 1];
    }
    r[m] = lo | (hi << 16);
  }
  hdn_warp_sync();
}
static void hdn_ldsm4(unsigned* r, const void* p) { hdn_ldsm_any(r, p, false); }
static void hdn_ldsm4t(unsigned* r, const void* p) { hdn_ldsm_any(r, p, true); }
static float hdn_emu_f(unsigned reg, int k) {
  const hdn_u16 b = (hdn_u16)((k & 1) ? reg >> 16 : reg & 0xFFFFu);
  return HDN_MMA_TYPE[0] == 'b' ? hdn_bf16_bits_to_float(b) : hdn_half_bits_to_float(b);
}
// m16n8k16: A (row, k) in lane 4 (row % 8) + (k % 8) / 2, register row / 8 + 2 (k / 8); B (k, n)
// in lane 4 n + (k % 8) / 2, register k / 8; C (row, col): lane 4 (row % 8) + col / 2, element
// 2 (row / 8) + col % 2; the half of a register: k % 2
static void hdn_mma16816(float* c, const unsigned* a, const unsigned* b) {
  HdnWarpX& x = hdn_wx[threadIdx.x >> 5];
  const int l = threadIdx.x & 31, g = l / 4, t = l % 4;
  for (int i = 0; i < 4; ++i) x.r[l][i] = a[i];
  x.r[l][4] = b[0];
  x.r[l][5] = b[1];
  hdn_warp_sync();
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float s = c[e];
    for (int k = 0; k < 16; ++k)
      s += hdn_emu_f(x.r[4 * (row % 8) + (k % 8) / 2][row / 8 + 2 * (k / 8)], k) *
           hdn_emu_f(x.r[4 * col + (k % 8) / 2][4 + k / 8], k);
    out[e] = s;
  }
  hdn_warp_sync();
  for (int e = 0; e < 4; ++e) c[e] = out[e];
}
static unsigned hdn_pack2(float lo, float hi) {
  if (HDN_MMA_TYPE[0] == 'b')
    return hdn_from_float<hdn_bf16>(lo).bits | ((unsigned)hdn_from_float<hdn_bf16>(hi).bits << 16);
  return hdn_from_float<hdn_half>(lo).bits | ((unsigned)hdn_from_float<hdn_half>(hi).bits << 16);
}
template <int NCH> static int hdn_swz(int r, int c) { return (r * NCH + (c ^ (r & 7))) * 8; }
"""

MMA_SHIM_EXTRA = r"""
struct alignas(8) float2 { float x, y; };
static inline float2 make_float2(float a, float b) { return float2{a, b}; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
alignas(16) static unsigned short hdn_emu_smem[256 * 1024 / 2];
"""


def _inline_once(src, headers, subst):
    """src with each ``#include "<header>"`` replaced by the header's text the first time
    (``subst``: replacement texts by name), recursively; later includes of it dropped."""
    import re
    done = set()

    def rep(m):
        n = m.group(1)
        if n in done:
            return ""
        done.add(n)
        return re.sub(r'#include "([\w.]+)"', rep, subst.get(n, headers[n]).replace("#pragma once", ""))
    return re.sub(r'#include "([\w.]+)"', rep, src)


def run_mma_kernel(src, name, grid, block, vals, headers, lazy=True):
    """Run an NVIDIA mma.sync kernel (a generated HDN_CUDA source) on the host, lane by lane
    (MMA_EMU; OS threads meeting at the block's and the warps' barriers), dynamic shared memory
    filled with 0xFFFF (NaN in fp16 / bf16) before each block."""
    subst = {"hdn_compat.h": headers["hdn_compat.h"] + "\n#undef HDN_CUDA\n#define HDN_CUDA 1\n"
                                                       "#undef HDN_HIP\n#define HDN_HIP 0\n",
             "hdn_mma.h": MMA_EMU,
             "hdn_attention.h": headers["hdn_attention.h"].replace(
                 'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', "y = exp2f(x);")}
    body = _inline_once(src, headers, subst)
    body = body.replace("extern __shared__ __align__(16) hdn_u16 hdn_smem[];", "hdn_u16* hdn_smem = hdn_emu_smem;")
    call = ", ".join(f"a[{i}]" for i in range(len(vals)))
    shim = SHIM.replace("static hdn_dim3 blockIdx, threadIdx, blockDim, gridDim;",
                        "static hdn_dim3 blockIdx, blockDim, gridDim;\nstatic thread_local hdn_dim3 threadIdx;")
    shim = shim.replace("\nHDN_SERIAL_STUBS\n", "\n").replace("#define __syncwarp()\n", "")
    code = shim + THREADS + MMA_SHIM_EXTRA + ARG + f"#define HDN_EMU_LAZY {int(bool(lazy))}\n" + body + f"""
extern "C" void hdn_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, HdnArg* a) {{
  gridDim = {{gx, gy, gz}}; blockDim = {{bx, 1, 1}}; hdn_nthreads = bx;
  for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x) {{
    blockIdx = {{x, y, z}};
    std::memset(hdn_emu_smem, 0xFF, sizeof(hdn_emu_smem));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < bx; ++t)
      ts.emplace_back([=] {{ threadIdx = {{t, 0, 0}}; {name}({call}); }});
    for (auto& th : ts) th.join();
  }}
}}
"""
    lib = _build(code, name + "_mma", ["-pthread"])
    lib.hdn_emu_launch(*[ctypes.c_uint(int(v)) for v in (grid[0], grid[1], grid[2], block[0])],
                       _args(vals))
