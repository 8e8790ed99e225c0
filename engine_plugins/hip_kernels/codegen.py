"""Source generation: op-graph pieces -> HIP-dialect C++ kernels with every size baked in.

Nothing here touches a GPU: :func:`elementwise_source`, :func:`gemm_source` and the batchnorm
generators return source text (compiled by the plan builder through the device layer, and by
CI through NVRTC alone).  All tensor geometry (dims, strides, broadcast) becomes compile-time
constants, so the compiler folds the index arithmetic of each plan.
"""
from __future__ import annotations

import math
import os
import re

from engine_plugins.cpu_reference.signature import FB_NAMES

KDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")
CTYPE = {"FLOAT": "float", "HALF": "hdn_half", "BFLOAT16": "hdn_bf16"}
ELEM_SIZE = {"FLOAT": 4, "HALF": 2, "BFLOAT16": 2}
ILP = 4
THREADS = 256


def read_kernel(name: str) -> str:
    with open(os.path.join(KDIR, name), encoding="utf-8") as f:
        return f.read()


def headers() -> dict:
    return {"hdn_compat.h": read_kernel("hdn_compat.h")}


def dtype_name(fb_value) -> str:
    return FB_NAMES["DataType"].get(int(fb_value), f"UNKNOWN_{fb_value}")


def flit(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "__int_as_float(0x7fc00000)"
    if math.isinf(v):
        return "__int_as_float(0x7f800000)" if v > 0 else "__int_as_float(0xff800000)"
    return repr(v) + "f" if "e" in repr(v) or "." in repr(v) else repr(v) + ".0f"


# --------------------------------------------------------------------------- pointwise ops
FLT_MAX = 3.4028234663852886e38
# mode -> (arity, C expression over a/b/c, uses params)
PW_EXPR = {
    "ADD": (2, "(a + b)"), "SUB": (2, "(a - b)"), "MUL": (2, "(a * b)"), "DIV": (2, "(a / b)"),
    "MAX_OP": (2, "hdn_fmax(a, b)"), "MIN_OP": (2, "hdn_fmin(a, b)"),
    "ADD_SQUARE": (2, "(a + b * b)"),
    "ABS": (1, "fabsf(a)"), "NEG": (1, "(-a)"), "CEIL": (1, "ceilf(a)"), "FLOOR": (1, "floorf(a)"),
    "EXP": (1, "expf(a)"), "LOG": (1, "logf(a)"), "SQRT": (1, "sqrtf(a)"),
    "RSQRT": (1, "(1.0f / sqrtf(a))"), "RECIPROCAL": (1, "(1.0f / a)"),
    "SIN": (1, "sinf(a)"), "TAN": (1, "tanf(a)"), "ERF": (1, "erff(a)"), "IDENTITY": (1, "a"),
    "TANH_FWD": (1, "tanhf(a)"),
    "SIGMOID_FWD": (1, "(1.0f / (1.0f + expf(-a)))"),
    "GELU_FWD": (1, "(0.5f * a * (1.0f + erff(a * 0.70710678118654752f)))"),
    "GELU_APPROX_TANH_FWD": (1, "(0.5f * a * (1.0f + tanhf(0.79788456080286536f * (a + 0.044715f * a * a * a))))"),
    "RELU_FWD": (1, None), "SWISH_FWD": (1, None), "ELU_FWD": (1, None), "SOFTPLUS_FWD": (1, None),
    "RELU_BWD": (2, None), "SIGMOID_BWD": (2, "(a * (1.0f / (1.0f + expf(-b))) * (1.0f - 1.0f / (1.0f + expf(-b))))"),
    "TANH_BWD": (2, "(a * (1.0f - tanhf(b) * tanhf(b)))"),
    "BINARY_SELECT": (3, "((c != 0.0f) ? a : b)"),
}
PW_PARAMS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "swish_beta",
             "elu_alpha", "softplus_beta")


def pw_mode_name(node) -> str | None:
    return FB_NAMES["PointwiseMode"].get(node.attrs.get("operation"))


def pw_expression(node, args) -> str:
    """C expression of one pointwise node over its input expressions ``args``."""
    mode = pw_mode_name(node)
    ar, tmpl = PW_EXPR[mode]
    a = node.attrs
    env = dict(zip("abc", args))
    if mode == "RELU_FWD":
        lo = a.get("relu_lower_clip") or 0.0
        hi = a.get("relu_upper_clip")
        sl = a.get("relu_lower_clip_slope") or 0.0
        hi = FLT_MAX if hi is None else hi
        x = env["a"]
        if sl == 0.0 and lo <= hi:
            return f"hdn_fmax(hdn_fmin({x}, {flit(hi)}), {flit(lo)})"
        return (f"(({x}) <= {flit(lo)} ? {flit(sl)} * (({x}) - {flit(lo)}) + {flit(lo)} : "
                f"hdn_fmin({x}, {flit(hi)}))")
    if mode == "RELU_BWD":
        lo = a.get("relu_lower_clip") or 0.0
        hi = a.get("relu_upper_clip")
        hi = FLT_MAX if hi is None else hi
        sl = a.get("relu_lower_clip_slope") or 0.0
        return (f"(({env['a']}) * (({env['b']}) <= {flit(lo)} ? {flit(sl)} : "
                f"(({env['b']}) > {flit(hi)} ? 0.0f : 1.0f)))")
    if mode == "SWISH_FWD":
        be = a.get("swish_beta") or 1.0
        return f"(({env['a']}) / (1.0f + expf(-{flit(be)} * ({env['a']}))))"
    if mode == "ELU_FWD":
        al = a.get("elu_alpha")
        al = 1.0 if al is None else al
        return f"(({env['a']}) > 0.0f ? ({env['a']}) : {flit(al)} * expm1f(fminf({env['a']}, 0.0f)))"
    if mode == "SOFTPLUS_FWD":
        be = a.get("softplus_beta") or 1.0
        z = f"({flit(be)} * ({env['a']}))"
        return f"((fmaxf({z}, 0.0f) + log1pf(expf(-fabsf({z})))) / {flit(be)})"
    return re.sub(r"\b([abc])\b", lambda m: f"({env[m.group(1)]})", tmpl)


PRELUDE_MATH = r"""
__device__ __forceinline__ float hdn_fmax(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
__device__ __forceinline__ float hdn_fmin(float a, float b) { return (a != a || b != b) ? a + b : fminf(a, b); }
"""


# --------------------------------------------------------------------------- geometry
def dense_order(dims, strides):
    """Dim indices from outermost to innermost by stride (ties: logical order)."""
    return sorted(range(len(dims)), key=lambda d: (-abs(int(strides[d])), d))


def is_dense(dims, strides) -> bool:
    order = dense_order(dims, strides)
    exp = 1
    for d in reversed(order):
        if dims[d] != 1 and strides[d] != exp:
            return False
        exp *= dims[d]
    return True


def bcast_strides(tdims, tstrides, domain):
    """Strides of tensor t over the domain dims (numpy broadcasting, right-aligned); 0 where t
    has size 1.  None if t does not broadcast to the domain."""
    nd = len(domain)
    if len(tdims) > nd:
        if any(d != 1 for d in tdims[:len(tdims) - nd]):
            return None
        tdims, tstrides = tdims[len(tdims) - nd:], tstrides[len(tstrides) - nd:]
    pad = nd - len(tdims)
    out = [0] * nd
    for i, (d, s) in enumerate(zip(tdims, tstrides)):
        D = domain[pad + i]
        if d == D:
            out[pad + i] = int(s) if D != 1 else 0
        elif d == 1:
            out[pad + i] = 0
        else:
            return None
    return out


def per_channel_strides(t, domain, cdim=1):
    """A per-channel tensor (numel == C) as strides over the domain (channel dim ``cdim``)."""
    C = domain[cdim]
    if t.numel != C:
        return None
    s = [0] * len(domain)
    if C == 1:
        return s
    cand = [i for i, d in enumerate(t.dims) if d == C]
    if len(cand) != 1:
        return None
    s[cdim] = int(t.strides[cand[0]])
    return s


def coord_code(domain, order, index_var, itype, prefix="c"):
    """Lines decomposing linear ``index_var`` (enumeration of ``domain`` in ``order``, outermost
    first) into coordinates ``c<d>``; size-1 dims get constant 0."""
    lines = []
    rem = index_var
    inner = [d for d in reversed(order)]
    live = [d for d in inner if domain[d] != 1]
    for k, d in enumerate(live):
        last = k == len(live) - 1
        if last:
            lines.append(f"const {itype} {prefix}{d} = {rem};")
        else:
            lines.append(f"const {itype} {prefix}{d} = {rem} % {domain[d]};")
            lines.append(f"const {itype} r{prefix}{d} = {rem} / {domain[d]};")
            rem = f"r{prefix}{d}"
    for d in range(len(domain)):
        if domain[d] == 1:
            lines.append(f"const {itype} {prefix}{d} = 0;")
    return lines


def offset_expr(strides, prefix="c", itype="long long"):
    terms = [f"({itype}){prefix}{d} * {int(s)}" if s != 1 else f"({itype}){prefix}{d}"
             for d, s in enumerate(strides) if s != 0]
    return " + ".join(terms) if terms else "0"


# --------------------------------------------------------------------------- elementwise
class EwIn:
    """An elementwise input: pointer param (strides over the domain) or a constant."""

    def __init__(self, var, dtype=None, strides=None, const=None, param=None):
        self.var, self.dtype, self.strides, self.const, self.param = var, dtype, strides, const, param


class EwOut:
    def __init__(self, var, dtype, strides, param):
        self.var, self.dtype, self.strides, self.param = var, dtype, strides, param


def elementwise_source(name, domain, order, ins, stmts, outs, extra_params=()):
    """One kernel: for each element of ``domain`` (enumerated in ``order``), load ``ins``, run
    ``stmts`` (C statements defining float variables), store ``outs``.  Param order:
    ins (pointer ones) then outs then extra_params."""
    total = 1
    for d in domain:
        total *= d
    span = max([total] + [1 + sum((domain[d] - 1) * abs(s) for d, s in enumerate(t.strides))
                          for t in list(ins) + list(outs) if t.strides is not None])
    itype = "int" if span < 2 ** 31 - THREADS * ILP * 2 else "long long"
    params = []
    for t in ins:
        if t.param:
            params.append(f"const {CTYPE[t.dtype]}* __restrict__ {t.param}")
    for t in outs:
        params.append(f"{CTYPE[t.dtype]}* __restrict__ {t.param}")
    params += list(extra_params)
    # the primary enumeration: offsets equal to the index for operands with the dense strides
    prim = None
    if is_dense(domain, outs[0].strides) and dense_order(domain, outs[0].strides) == order:
        prim = [int(s) if domain[d] != 1 else 0 for d, s in enumerate(outs[0].strides)]

    def off(strides):
        st = [s if domain[d] != 1 else 0 for d, s in enumerate(strides)]
        if prim is not None and st == prim:
            return "i"
        return offset_expr(st, "c", itype)

    L = ["#define HDN_GENERATED 1", '#include "hdn_compat.h"', PRELUDE_MATH,
         f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}({", ".join(params)}) {{',
         f"  const {itype} base = ({itype})blockIdx.x * {THREADS * ILP} + threadIdx.x;"]
    ptr_ins = [t for t in ins if t.param]
    for t in ptr_ins:
        L.append(f"  float ld_{t.var}[{ILP}];")
    L.append("#pragma unroll")
    L.append(f"  for (int j = 0; j < {ILP}; ++j) {{")
    L.append(f"    const {itype} i = base + j * {THREADS};")
    L.append(f"    if (i < {total}) {{")
    L += ["      " + s for s in coord_code(domain, order, "i", itype)]
    for t in ptr_ins:
        L.append(f"      ld_{t.var}[j] = hdn_to_float({t.param}[{off(t.strides)}]);")
    L.append("    }")
    L.append("  }")
    L.append("#pragma unroll")
    L.append(f"  for (int j = 0; j < {ILP}; ++j) {{")
    L.append(f"    const {itype} i = base + j * {THREADS};")
    L.append(f"    if (i < {total}) {{")
    L += ["      " + s for s in coord_code(domain, order, "i", itype)]
    for t in ins:
        if t.param:
            L.append(f"      const float {t.var} = ld_{t.var}[j];")
        else:
            L.append(f"      const float {t.var} = {flit(t.const)};")
    L += ["      " + s for s in stmts]
    for t in outs:
        L.append(f"      {t.param}[{off(t.strides)}] = hdn_from_float<{CTYPE[t.dtype]}>({t.var});")
    L.append("    }")
    L.append("  }")
    L.append("}")
    grid = (total + THREADS * ILP - 1) // (THREADS * ILP)
    return "\n".join(L) + "\n", (max(1, grid), 1, 1), (THREADS, 1, 1)


# --------------------------------------------------------------------------- GEMM
class GemmSpec:
    """What the GEMM prelude needs.  ``a_off(b, m, k)`` etc. are produced by the op-specific
    builders below as C code."""

    def __init__(self):
        self.M = self.N = self.K = self.batch = 0
        self.ta = self.tb = "FLOAT"
        self.load_a = self.load_b = ""        # C body returning an element offset or -1
        self.a_mode = self.b_mode = 0
        self.a_kcontig = self.b_kcontig = True
        self.store = ""                       # C body of store_c (uses v, b, m, n)
        self.epi_params = []                  # param declarations after A, B


def gemm_source(spec: GemmSpec, use_mma: bool):
    ta, tb = CTYPE[spec.ta], CTYPE[spec.tb]
    L = ["#define HDN_GENERATED 1", '#include "hdn_compat.h"', PRELUDE_MATH,
         f"typedef {ta} TA;", f"typedef {tb} TB;",
         f"#define GM {spec.M}", f"#define GN {spec.N}", f"#define GK {spec.K}",
         f"#define GBATCH {spec.batch}",
         f"#define A_K_CONTIG {int(spec.a_kcontig)}", f"#define B_K_CONTIG {int(spec.b_kcontig)}",
         f"#define A_MODE {spec.a_mode}", f"#define B_MODE {spec.b_mode}",
         f'#define HDN_MMA_TYPE "{"bf16" if spec.ta == "BFLOAT16" else "f16"}"',
         "#define HDN_EPI_PARAMS " + ", ".join(spec.epi_params),
         "#define HDN_EPI_ARGS " + ", ".join(p.split()[-1] for p in spec.epi_params),
         # element offsets (-1: padding -> zero)
         "__device__ __forceinline__ long long a_off(int b, int m, int k) {", spec.load_a, "}",
         "__device__ __forceinline__ long long b_off(int b, int k, int n) {", spec.load_b, "}",
         "__device__ __forceinline__ float load_a(const TA* __restrict__ A, int b, int m, int k) "
         "{ const long long o = a_off(b, m, k); return o < 0 ? 0.f : hdn_to_float(A[o]); }",
         "__device__ __forceinline__ float load_b(const TB* __restrict__ B, int b, int k, int n) "
         "{ const long long o = b_off(b, k, n); return o < 0 ? 0.f : hdn_to_float(B[o]); }"]
    if use_mma:
        L += ["__device__ __forceinline__ hdn_u16 load_a_raw(const TA* __restrict__ A, int b, int m, int k) "
              "{ const long long o = a_off(b, m, k); return o < 0 ? (hdn_u16)0 : hdn_bits(A[o]); }",
              "__device__ __forceinline__ hdn_u16 load_b_raw(const TB* __restrict__ B, int b, int k, int n) "
              "{ const long long o = b_off(b, k, n); return o < 0 ? (hdn_u16)0 : hdn_bits(B[o]); }",
              "__device__ __forceinline__ uint4 load_a_vec(const TA* __restrict__ A, int b, int m, int k) "
              "{ const long long o = a_off(b, m, k); return o < 0 ? make_uint4(0, 0, 0, 0) : *reinterpret_cast<const uint4*>(A + o); }",
              "__device__ __forceinline__ uint4 load_b_vec(const TB* __restrict__ B, int b, int k, int n) "
              "{ const long long o = b_off(b, k, n); return o < 0 ? make_uint4(0, 0, 0, 0) : *reinterpret_cast<const uint4*>(B + o); }"]
    L += ["__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, float v) {",
          spec.store, "}"]
    body = read_kernel("gemm_mma.hip" if use_mma else "gemm_simt.hip")
    name = "hdn_gemm_mma" if use_mma else "hdn_gemm_simt"
    bm = 128
    grid = ((spec.N + bm - 1) // bm, (spec.M + bm - 1) // bm, spec.batch)
    return "\n".join(L) + "\n" + body, name, grid, (256, 1, 1)


def batch_offset_code(var, batch_dims, strides_over_batch):
    """C lines: ``long long <var> = offset of batch index b`` for batch dims (row-major)."""
    if not batch_dims:
        return f"const long long {var} = 0;"
    lines = [f"long long {var} = 0; int rb_{var} = b;"]
    for d in reversed(range(len(batch_dims))):
        D, s = batch_dims[d], strides_over_batch[d]
        if D == 1:
            continue
        lines.append(f"{{ const int cc = rb_{var} % {D}; rb_{var} /= {D}; {var} += (long long)cc * {s}; }}")
    return " ".join(lines)


# --------------------------------------------------------------------------- batchnorm
def bn_stats_source(x, C, channels_last, rows):
    """Per-channel sum and sum of squares into double ws[0:C], ws[C:2C] (zeroed before)."""
    T = CTYPE[dtype_name(x.dtype)]
    dims, strides = [int(d) for d in x.dims], [int(s) for s in x.strides]
    if channels_last:
        # x viewed as [rows, C] with row stride C (packed NHWC-like)
        src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void __launch_bounds__(256) hdn_bn_stats(const {T}* __restrict__ x, double* __restrict__ ws) {{
  __shared__ float ss[8][33], sq[8][33];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const int c = blockIdx.x * 32 + tx;
  float s = 0.f, q = 0.f;
  if (c < {C}) {{
    for (long long r = (long long)blockIdx.y * 8 + ty; r < {rows}; r += (long long)gridDim.y * 8) {{
      const float v = hdn_to_float(x[r * {C} + c]);
      s += v; q = fmaf(v, v, q);
    }}
  }}
  ss[ty][tx] = s; sq[ty][tx] = q;
  __syncthreads();
  if (ty == 0 && c < {C}) {{
    for (int k = 1; k < 8; ++k) {{ s += ss[k][tx]; q += sq[k][tx]; }}
    atomicAdd(&ws[c], (double)s);
    atomicAdd(&ws[{C} + c], (double)q);
  }}
}}
"""
        splits = max(1, min(1024, rows // 256))
        return src, ((C + 31) // 32, splits, 1), (256, 1, 1)
    # generic: one block column per channel; elements of channel c enumerated over the other dims
    odims = [d for d in range(len(dims)) if d != 1]
    order = sorted(odims, key=lambda d: (-abs(strides[d]), d))
    sub = [dims[d] for d in order]
    per = 1
    for d in sub:
        per *= d
    lines = []
    rem = "e"
    for k, d in enumerate(reversed(order)):
        if dims[d] == 1:
            continue
        lines.append(f"const long long c{d} = {rem} % {dims[d]}; const long long r{d} = {rem} / {dims[d]};")
        rem = f"r{d}"
    offs = " + ".join([f"c{d} * {strides[d]}" for d in order if dims[d] != 1] or ["0"])
    src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void __launch_bounds__(256) hdn_bn_stats(const {T}* __restrict__ x, double* __restrict__ ws) {{
  __shared__ float ss[256], sq[256];
  const int c = blockIdx.x;
  const {T}* xc = x + (long long)c * {strides[1]};
  float s = 0.f, q = 0.f;
  for (long long e = (long long)blockIdx.y * 256 + threadIdx.x; e < {per}; e += (long long)gridDim.y * 256) {{
    {' '.join(lines)}
    const float v = hdn_to_float(xc[{offs}]);
    s += v; q = fmaf(v, v, q);
  }}
  ss[threadIdx.x] = s; sq[threadIdx.x] = q;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {{
    if (threadIdx.x < w) {{ ss[threadIdx.x] += ss[threadIdx.x + w]; sq[threadIdx.x] += sq[threadIdx.x + w]; }}
    __syncthreads();
  }}
  if (threadIdx.x == 0) {{ atomicAdd(&ws[c], (double)ss[0]); atomicAdd(&ws[{C} + c], (double)sq[0]); }}
}}
"""
    splits = max(1, min(4096 // max(1, C) + 1, per // 2048 + 1))
    return src, (C, splits, 1), (256, 1, 1)


def bn_finalize_source(C, M, pdt, eps, mom, outs, scalar_ptrs):
    """One thread per channel: mean/inv_variance (+ running stats) and the affine
    (A_c, B_c) used by the apply pass.  ``outs``: roles present among mean, inv_variance,
    next_running_mean, next_running_variance.  ``eps``/``mom``: float constants or None
    (then read from device pointers ``eps_p`` / ``mom_p``)."""
    T = CTYPE[pdt]
    params = [f"const double* __restrict__ ws", "float* __restrict__ ab",
              f"const {T}* __restrict__ scale", f"const {T}* __restrict__ bias"]
    run = "next_running_mean" in outs or "next_running_variance" in outs
    if run:
        params += [f"const {T}* __restrict__ prm", f"const {T}* __restrict__ prv"]
    for r in ("mean", "inv_variance", "next_running_mean", "next_running_variance"):
        if r in outs:
            params.append(f"{T}* __restrict__ o_{r}")
    if eps is None:
        params.append(f"const {scalar_ptrs['epsilon']}* __restrict__ eps_p")
    if run and mom is None:
        params.append(f"const {scalar_ptrs['momentum']}* __restrict__ mom_p")
    eps_e = flit(eps) if eps is not None else "hdn_to_float(eps_p[0])"
    mom_e = (flit(mom) if mom is not None else "hdn_to_float(mom_p[0])") if run else "0.f"
    body = f"""
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= {C}) return;
  const double mean = ws[c] / {float(M)!r};
  double var = ws[{C} + c] / {float(M)!r} - mean * mean;
  if (var < 0.0) var = 0.0;
  const float inv = (float)(1.0 / sqrt(var + (double){eps_e}));
  const float sc = hdn_to_float(scale[c]), bi = hdn_to_float(bias[c]);
  ab[c] = sc * inv;
  ab[{C} + c] = bi - (float)mean * sc * inv;
"""
    if "mean" in outs:
        body += f"  o_mean[c] = hdn_from_float<{T}>((float)mean);\n"
    if "inv_variance" in outs:
        body += f"  o_inv_variance[c] = hdn_from_float<{T}>(inv);\n"
    if run:
        unb = f"var * {float(M) / max(1.0, M - 1.0)!r}" if M > 1 else "var"
        body += f"  const float mo = {mom_e};\n"
        if "next_running_mean" in outs:
            body += (f"  o_next_running_mean[c] = hdn_from_float<{T}>((1.f - mo) * hdn_to_float(prm[c])"
                     f" + mo * (float)mean);\n")
        if "next_running_variance" in outs:
            body += (f"  o_next_running_variance[c] = hdn_from_float<{T}>((1.f - mo) * hdn_to_float(prv[c])"
                     f" + mo * (float)({unb}));\n")
    src = ("#define HDN_GENERATED 1\n#include \"hdn_compat.h\"\n"
           f'extern "C" __global__ void hdn_bn_finalize({", ".join(params)}) {{{body}}}\n')
    return src, ((C + 127) // 128, 1, 1), (128, 1, 1)
