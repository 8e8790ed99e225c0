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
#define __launch_bounds__(x)
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
