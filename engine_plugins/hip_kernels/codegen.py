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

from hipdnn_cabi.engines.cpu_reference.signature import FB_NAMES  # works in-tree and installed

KDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")
CTYPE = {"FLOAT": "float", "HALF": "hdn_half", "BFLOAT16": "hdn_bf16",
         "FP8_E4M3": "hdn_fp8e4m3", "FP8_E5M2": "hdn_fp8e5m2"}
ELEM_SIZE = {"FLOAT": 4, "HALF": 2, "BFLOAT16": 2, "FP8_E4M3": 1, "FP8_E5M2": 1}
FP8 = ("FP8_E4M3", "FP8_E5M2")
# narrow / integer types of the issue-17 ops (ext_ops.py): storage only (blockscale.py stores the
# two FP8 types as bytes too)
CTYPE.update({n: "unsigned char" for n in ("FP8_E8M0", "FP4_E2M1", "FP6_E2M3", "FP6_E3M2",
                                           "FP8_E4M3_FNUZ", "FP8_E5M2_FNUZ", "UINT8")})
CTYPE.update({"INT8": "signed char", "INT32": "int", "INT64": "long long"})
ELEM_SIZE.update({n: 1 for n in CTYPE if CTYPE[n] in ("unsigned char", "signed char")})
ELEM_SIZE.update({"INT32": 4, "INT64": 8})


def wg_elem_size(dtype):
    """Element bytes of a wgmma-core input type (fp32 = TF32)."""
    return ELEM_SIZE[dtype]
ILP = 4
THREADS = 256


def read_kernel(name: str) -> str:
    with open(os.path.join(KDIR, name), encoding="utf-8") as f:
        return f.read()


def headers() -> dict:
    """Every kernels/*.h (hdn_compat.h, the generated hdn_wgmma.h, the MMA / Philox / attention
    building blocks, the reduction core hdn_reduce.h, hdn_minifloat.h)."""
    return {n: read_kernel(n) for n in sorted(os.listdir(KDIR)) if n.endswith(".h")}


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

    def __init__(self, var, dtype=None, strides=None, const=None, param=None, scalar=False):
        self.var, self.dtype, self.strides, self.const, self.param = var, dtype, strides, const, param
        self.scalar = scalar   # a float kernel argument (runtime pass-by-value scalar)


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
                          for t in list(ins) + list(outs) if t.strides is not None and not getattr(t, "scalar", False)])
    itype = "int" if span < 2 ** 31 - THREADS * ILP * 2 else "long long"
    params = []
    for t in ins:
        if t.scalar:
            params.append(f"const float {t.param}")
        elif t.param:
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
    ptr_ins = [t for t in ins if t.param and not t.scalar]
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
        if t.scalar:
            L.append(f"      const float {t.var} = {t.param};")
        elif t.param:
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
        self.store8 = None                    # C body of store_c8 (vv[8] at n..n+7) or None
        self.epi_params = []                  # param declarations after A, B
        # dense matrix operands (offset = b * sb + mn * smn + k * sk, elements) or None:
        # (smn, sk, sb, batch); the wgmma core loads those through the tensor copy engine
        self.a_dense = self.b_dense = None
        # implicit.py: bk (k per stage) -> the A_ROWS prelude (precomputed conv addressing) or None
        self.a_rows = None
        # wgmma core only: 0 = the plain tile schedule; 1 / 2 = the grouped tile scheduler of
        # gemm_wgmma.hip (M-grouped grouped GEMM / K-grouped per-group reduction; never split),
        # ``sched`` its prelude lines (WG_SCHED_* macros); the dense operands' own batch counts
        # size their tensor maps (``a_dense[3]`` / ``b_dense[3]``), not ``batch``
        self.grouped = 0
        self.sched = []
        # backward filter on 4-D tensor maps (program._wgrad_tma): {"k": virtual GEMM k,
        # "tmaps": {"A", "B"}, "defs": prelude lines} or None
        self.wgrad = None
        # backward data: N-major weights per filter tap on a 3-D tensor map (program.py):
        # {"K", "taps", "flip", "tmap"} or None
        self.b_tap = None
        # () -> the SIMT core's A_ROWS prelude (implicit.conv_fwd_rows_simt) or None
        self.simt_rows = None
        # the output as the wgmma core's TMA-store epilogue can write it (program.py): one 16-bit
        # output, element (b, m, n) at b * sb + m * sm + n, 16-byte rows: {"uid", "dtype", "sm",
        # "sb", "value": C body of epi_v (float v at b, m, n -> the output value)} or None
        self.c_tma = None
        # convolution forward on an im2col tensor map (program._fwd_im2col): {"k": virtual GEMM
        # k, "A": im2col map, "B": (dtype, dims, strides) of the 4-D weight view, "defs",
        # "taps", "cb"} or None
        self.im2col = None


TILE = 128
KSTEP = 32


def split_k(M, N, K, batch, sms):
    """(splits, k per split): split the reduction when the tile grid leaves the GPU idle
    (fewer tiles than SMs); about two resident CTAs per SM are the target."""
    if os.environ.get("HIPDNN_CABI_HIP_SPLITK", "1") in ("0", "off"):
        return 1, K
    tiles = -(-M // TILE) * -(-N // TILE) * batch
    ksteps = -(-K // KSTEP)
    if tiles > sms:
        return 1, K
    s = min((2 * sms) // tiles, ksteps // 4, 64)
    if s <= 1:
        return 1, K
    per = -(-ksteps // s) * KSTEP
    return -(-K // per), per


def gemm_source(spec: GemmSpec, use_mma: bool, sms: int = 132, core: str | None = None):
    """{"gemm": (src, name, grid, block), "split": S, "reduce": (...) or None, "part_bytes",
    "opts": launch options (dynamic shared memory, target), "tmaps": {"A"/"B": tensor-map spec}}.
    ``core``: 'wgmma' | 'mma' | 'simt' (None: mma when ``use_mma`` else simt)."""
    if core is None:
        core = "mma" if use_mma else "simt"
    use_mma = core in ("mma", "wgmma", "mfma")
    ta, tb = CTYPE[spec.ta], CTYPE[spec.tb]
    tf32 = core == "wgmma" and spec.ta == "FLOAT"   # fp32 inputs on the tensor cores (TF32 knob)
    narrow = spec.ta in FP8 or spec.tb in FP8       # no 16-bit raw loaders for these types
    es = ELEM_SIZE[spec.ta]
    GK = spec.K
    if core == "wgmma":
        from . import gemm_core as gc
        wgrad = spec.wgrad if spec.wgrad and (spec.a_mode, spec.b_mode) == (2, 2) and \
            gc.knob("WGRAD_TMA", "1") not in ("0", "off") else None
        if wgrad:
            GK = wgrad["k"]        # virtual k: (image, position box) x 64
        i2c = spec.im2col if not wgrad and gc.im2col_wanted(spec) else None
        if i2c:
            GK = i2c["k"]          # virtual k: filter taps x channel blocks x 64
        probe = {}
        _wgmma_defs(spec, 128, 4, probe, wgrad, i2c)     # which operands the copy engine loads
        rows_a = spec.a_rows is not None and spec.a_mode == 1 and gc.knob("ROWS", "1") not in ("0", "off") \
            and not i2c

        def gcost(op, mode, rows):
            if op in probe:
                return 0.0
            if rows:
                return gc.GATHER_ROWS
            return gc.GATHER_CHUNK if mode in (1, 2) else gc.GATHER_ELEM
        gather = (gcost("A", spec.a_mode, rows_a), gcost("B", spec.b_mode, False))
        bn, stages, S, per = gc.tile_config(spec.M, spec.N, GK, spec.batch, sms, es, gather)
        if spec.grouped:
            S, per = 1, spec.K
        tstore = None
        if _c_tma_ok(spec) and not spec.grouped and not wgrad:
            tstore = gc.tma_store_config(spec.M, spec.N, GK, spec.batch, sms, es, gather, bn, S, bool(i2c))
        if tstore:
            (bn, stages), S, per = tstore, 1, GK
    elif core == "simt":
        from . import gemm_core as gc
        wgrad = i2c = None
        simt_bn, S, per = gc.simt_config(spec.M, spec.N, spec.K, spec.batch, sms)
    else:
        wgrad = i2c = None
        S, per = split_k(spec.M, spec.N, spec.K, spec.batch, sms)
    L = ["#define HDN_GENERATED 1", '#include "hdn_compat.h"', PRELUDE_MATH,
         f"typedef {ta} TA;", f"typedef {tb} TB;",
         f"#define GM {spec.M}", f"#define GN {spec.N}", f"#define GK {GK}",
         f"#define GBATCH {spec.batch}", f"#define GSPLIT {S}", f"#define GKSPLIT {per}",
         f"#define C_VEC {int(spec.store8 is not None)}",
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
    if use_mma and not tf32 and not narrow:
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
    if spec.store8 is not None:
        L += ["__device__ __forceinline__ void store_c8(HDN_EPI_PARAMS, int b, int m, int n, const float* vv) {",
              spec.store8, "}"]
    opts, tmaps = {}, {}
    if core == "wgmma":
        L += _wgmma_defs(spec, bn, stages, tmaps, wgrad, i2c)
        if tstore:
            c = spec.c_tma
            L += ["#define WG_TMA_STORE 1", f"typedef {CTYPE[c['dtype']]} TC;",
                  "__device__ __forceinline__ float epi_v(HDN_EPI_PARAMS, int b, int m, int n, float v) {",
                  c["value"], "}"]
            rows_b = c["sb"] * 2 if spec.batch > 1 else -(-spec.M * c["sm"] * 2 // 16) * 16
            tmaps["C"] = (c["dtype"], (spec.N, spec.M, spec.batch), (c["sm"] * 2, rows_b), (64, 64, 1))
        if spec.grouped:
            L += [f"#define WG_SCHED_GROUPED {spec.grouped}"] + list(spec.sched)
        rows = spec.a_rows(gc.bk(es)) if spec.a_rows is not None and spec.a_mode == 1 \
            and gc.knob("ROWS", "1") not in ("0", "off") and not i2c else None
        if rows:
            L.append(rows)
    if core == "simt" and spec.simt_rows is not None and \
            os.environ.get("HIPDNN_CABI_HIP_SIMT_ROWS", "1") not in ("0", "off"):
        rows = spec.simt_rows()
        if rows:
            L.append(rows)
    prelude = "\n".join(L) + "\n"
    if core == "wgmma":
        body = read_kernel("gemm_wgmma.hip")
        name = "hdn_gemm_wgmma"
        units = -(-spec.M // gc.WG_BM) * -(-spec.N // bn) * spec.batch * S
        grid = (max(1, min(units, sms)), 1, 1)
        block = (384, 1, 1)
        opts = {"shmem": gc.smem_bytes(bn, stages, bool(tstore)), "arch": "sm_90a",
                "tile": (gc.WG_BM, bn, gc.bk(es)), "stages": stages}
        if tstore:
            opts["tstore"] = True
    else:
        kern = {"mma": "gemm_mma", "mfma": "gemm_mfma"}.get(core, "gemm_simt")
        body = (f"#define MF_BF16 {int(spec.ta == 'BFLOAT16')}\n" if core == "mfma" else "") + \
            (f"#define SIMT_BN {simt_bn}\n#define SIMT_VEC {int(spec.ta == spec.tb == 'FLOAT' and _simt_vec_ok())}\n"
             if core == "simt" else "") + read_kernel(kern + ".hip")
        name = "hdn_" + kern
        tn = simt_bn if core == "simt" else TILE
        grid = ((spec.N + tn - 1) // tn, (spec.M + TILE - 1) // TILE, spec.batch * S)
        block = (256, 1, 1)
    out = {"gemm": (prelude + body, name, grid, block), "split": S, "reduce": None,
           "part_bytes": 4 * S * spec.batch * spec.M * spec.N, "opts": opts, "tmaps": tmaps,
           "core": core, "wgrad": bool(wgrad), "im2col": bool(i2c)}
    if S > 1:
        per_thread = 8 if spec.store8 is not None else 1
        n = spec.batch * spec.M * spec.N // per_thread
        out["reduce"] = (prelude + read_kernel("gemm_splitk.hip"), "hdn_gemm_splitk",
                         (max(1, (n + 255) // 256), 1, 1), (256, 1, 1))
    return out


def _c_tma_ok(spec):
    """The output can take the TMA-store epilogue: one 16-bit output (16-bit inputs), dense
    16-byte rows along n, N % 8 == 0 (tensor map: 16-byte strides)."""
    c = spec.c_tma
    return c is not None and spec.ta in ("HALF", "BFLOAT16") and c["dtype"] in ("HALF", "BFLOAT16") \
        and spec.N % 8 == 0 and c["sm"] >= spec.N and c["sm"] % 8 == 0 \
        and (spec.batch == 1 or (c["sb"] % 8 == 0 and c["sb"] >= spec.M * c["sm"]))


def _simt_vec_ok():
    return os.environ.get("HIPDNN_CABI_HIP_SIMT_VEC", "1") not in ("0", "off")


def _wgmma_defs(spec, bn, stages, tmaps, wgrad=None, i2c=None):
    """Prelude lines of the wgmma core; fills ``tmaps`` with the tensor maps it reads
    ("A"/"B": (dtype, dims, byte strides, box[, traversal steps[, im2col]]), innermost first;
    im2col = (lower corner, upper corner, channels per pixel, pixels per column))."""
    from . import gemm_core as gc
    tf32 = spec.ta == "FLOAT"
    kmajor = tf32 or spec.ta in FP8       # no M/N-major wgmma operands for these types
    es = ELEM_SIZE[spec.ta]
    L = [f"#define WG_BN {bn}", f"#define WG_STAGES {stages}",
         f"#define WG_BF16 {int(spec.ta == 'BFLOAT16')}", f"#define WG_TF32 {int(tf32)}",
         f"#define WG_FP8 {1 if spec.ta == 'FP8_E4M3' else 2 if spec.ta == 'FP8_E5M2' else 0}"]
    if gc.knob("WG_MN_SWAP", "0") == "1":     # diagnostic: M/N-major descriptor strides swapped
        L += ["#define WG_MN_LBO 1024", "#define WG_MN_SBO 8192"]
    if wgrad:                                 # both operands: 4-D boxes (program._wgrad_tma)
        tmaps.update(wgrad["tmaps"])
        return L + ["#define A_TMA 1", "#define B_TMA 1"] + list(wgrad["defs"])
    if i2c:                                   # A: im2col map, B: (C, S, R, K) weight boxes
        tmaps["A"] = i2c["A"]
        tmaps["B"] = tuple(i2c["B"]) + ((64, 1, 1, bn),)
        return L + ["#define A_TMA 1", "#define B_TMA 1"] + list(i2c["defs"])
    btap = spec.b_tap if spec.b_tap and spec.b_mode == 2 and not kmajor and \
        gc.knob("TMA", "1") not in ("0", "off") else None
    for op, mode, dense, dt, rows in (("A", spec.a_mode, spec.a_dense, spec.ta, gc.WG_BM),
                                      ("B", spec.b_mode, spec.b_dense, spec.tb, bn)):
        mn_extent = spec.M if op == "A" else spec.N
        if op == "B" and btap:
            tmaps["B"] = btap["tmap"]
            L += ["#define B_TMA 1", f"#define B_TAP_K {btap['K']}",
                  f"#define B_TAP_FLIP {btap['taps'] - 1 if btap['flip'] else 0}"]
            continue
        use = mode in (1, 2) and gc.tma_ok(dense, dt) and not (kmajor and mode == 2)
        if use:
            smn, sk, sb, batch = dense
            if mode == 1 and sk == 1:      # K-major rows (128 bytes of k)
                dims3, strides = (spec.K, mn_extent, spec.batch), [smn * es]
                box = (128 // es, rows, 1)
                inner = mn_extent * smn * es
            elif mode == 2 and smn == 1:   # M/N-major atoms of 64
                dims3, strides = (mn_extent, spec.K, spec.batch), [sk * 2]
                box = (64, 64, 1)
                inner = spec.K * sk * 2
            else:
                use = False
        if use and spec.grouped:      # the operand's own batch (grouped: experts, or 1)
            dims3 = dims3[:2] + (batch,)
        if use:
            nb = batch if spec.grouped else spec.batch
            strides.append(sb * es if nb > 1 else -(-inner // 16) * 16)
            tmaps[op] = (dt, dims3, tuple(strides), box)
        L.append(f"#define {op}_TMA {int(use)}")
    return L


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
    eps_e = flit(eps) if eps is not None else "hdn_to_float(eps_p[0])"
    mom_e = (flit(mom) if mom is not None else "hdn_to_float(mom_p[0])") if run else "0.f"
    # "ARG": a runtime pass-by-value scalar, passed by value (read from the host at execute)
    if eps is None:
        if scalar_ptrs["epsilon"] == "ARG":
            params.append("const float eps_p")
            eps_e = "eps_p"
        else:
            params.append(f"const {scalar_ptrs['epsilon']}* __restrict__ eps_p")
    if run and mom is None:
        if scalar_ptrs["momentum"] == "ARG":
            params.append("const float mom_p")
            mom_e = "mom_p"
        else:
            params.append(f"const {scalar_ptrs['momentum']}* __restrict__ mom_p")
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


# --------------------------------------------------------------------------- batchnorm backward
def _chan_offset_lines(dims, strides_list, names, cdim=1):
    """Enumerate the non-channel elements (index e) of per-channel slices: lines defining
    ``off_<name>`` for each tensor (strides over the same dims), channel excluded."""
    order = sorted([d for d in range(len(dims)) if d != cdim],
                   key=lambda d: (-abs(strides_list[0][d]), d))
    lines = []
    rem = "e"
    live = [d for d in reversed(order) if dims[d] != 1]
    for k, d in enumerate(live):
        if k == len(live) - 1:
            lines.append(f"const long long c{d} = {rem};")
        else:
            lines.append(f"const long long c{d} = {rem} % {dims[d]}; const long long r{d} = {rem} / {dims[d]};")
            rem = f"r{d}"
    for nm, st in zip(names, strides_list):
        terms = [f"c{d} * {st[d]}" for d in live]
        lines.append(f"const long long off_{nm} = {' + '.join(terms) if terms else '0'};")
    return lines


def bn_bwd_sums_source(x, dy, mean, inv, C, dims):
    """Per channel: sum(dy) -> ws[c], sum(dy * (x - mean) * iv) -> ws[C + c] (double, zeroed)."""
    Tx, Tdy = CTYPE[dtype_name(x.dtype)], CTYPE[dtype_name(dy.dtype)]
    Tm, Ti = CTYPE[dtype_name(mean.dtype)], CTYPE[dtype_name(inv.dtype)]
    xs, ys = [int(s) for s in x.strides], [int(s) for s in dy.strides]
    ms, ivs = per_channel_strides(mean, dims), per_channel_strides(inv, dims)
    per = 1
    for d, n in enumerate(dims):
        if d != 1:
            per *= n
    lines = _chan_offset_lines(dims, [xs, ys], ["x", "dy"])
    src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void __launch_bounds__(256) hdn_bn_bwd_sums(const {Tdy}* __restrict__ dy, const {Tx}* __restrict__ x,
    const {Tm}* __restrict__ mean, const {Ti}* __restrict__ inv, double* __restrict__ ws) {{
  __shared__ float ss[256], sq[256];
  const int c = blockIdx.x;
  const {Tx}* xc = x + (long long)c * {xs[1]};
  const {Tdy}* dyc = dy + (long long)c * {ys[1]};
  const float mu = hdn_to_float(mean[(long long)c * {ms[1]}]), iv = hdn_to_float(inv[(long long)c * {ivs[1]}]);
  float s = 0.f, q = 0.f;
  for (long long e = (long long)blockIdx.y * 256 + threadIdx.x; e < {per}; e += (long long)gridDim.y * 256) {{
    {' '.join(lines)}
    const float g = hdn_to_float(dyc[off_dy]);
    s += g; q = fmaf(g, (hdn_to_float(xc[off_x]) - mu) * iv, q);
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
    splits = max(1, min(8192 // max(1, C) + 1, per // 2048 + 1))
    return src, (C, splits, 1), (256, 1, 1)


def bn_bwd_finalize_source(C, M, r):
    """dbias, dscale (outputs) and the per-channel coefficients of the apply pass:
    co = [mean, iv, scale * iv, dbias / M, dscale / M] (float, C each)."""
    T = {k: CTYPE[dtype_name(r[k].dtype)] for k in ("mean", "inv_variance", "scale", "dscale", "dbias")}
    dims = [int(d) for d in r["x"].dims]
    st = {k: per_channel_strides(r[k], dims)[1] if C > 1 else 0
          for k in ("mean", "inv_variance", "scale", "dscale", "dbias")}
    src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void hdn_bn_bwd_finalize(const double* __restrict__ ws, float* __restrict__ co,
    const {T['mean']}* __restrict__ mean, const {T['inv_variance']}* __restrict__ inv,
    const {T['scale']}* __restrict__ scale, {T['dscale']}* __restrict__ dscale, {T['dbias']}* __restrict__ dbias) {{
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= {C}) return;
  const double db = ws[c], ds = ws[{C} + c];
  const float iv = hdn_to_float(inv[(long long)c * {st['inv_variance']}]);
  dbias[(long long)c * {st['dbias']}] = hdn_from_float<{T['dbias']}>((float)db);
  dscale[(long long)c * {st['dscale']}] = hdn_from_float<{T['dscale']}>((float)ds);
  co[c] = hdn_to_float(mean[(long long)c * {st['mean']}]);
  co[{C} + c] = iv;
  co[{2 * C} + c] = hdn_to_float(scale[(long long)c * {st['scale']}]) * iv;
  co[{3 * C} + c] = (float)(db / {float(M)!r});
  co[{4 * C} + c] = (float)(ds / {float(M)!r});
}}
"""
    return src, ((C + 127) // 128, 1, 1), (128, 1, 1)


# --------------------------------------------------------------------------- reduction
RED_INIT = {"ADD": "0.0", "AVG": "0.0", "NORM1": "0.0", "NORM2": "0.0", "MUL": "1.0",
            "MUL_NO_ZEROS": "1.0", "MIN_OP": "HDN_INF", "MAX_OP": "-HDN_INF", "AMAX": "0.0"}
RED_STEP = {"ADD": "a + v", "AVG": "a + v", "NORM1": "a + fabs(v)", "NORM2": "fma(v, v, a)",
            "MUL": "a * v", "MUL_NO_ZEROS": "a * (v == 0.0 ? 1.0 : v)",
            "MIN_OP": "hdn_dmin(a, v)", "MAX_OP": "hdn_dmax(a, v)", "AMAX": "hdn_dmax(a, fabs(v))"}
RED_COMB = {"ADD": "a + v", "AVG": "a + v", "NORM1": "a + v", "NORM2": "a + v", "MUL": "a * v",
            "MUL_NO_ZEROS": "a * v", "MIN_OP": "hdn_dmin(a, v)", "MAX_OP": "hdn_dmax(a, v)",
            "AMAX": "hdn_dmax(a, v)"}
RED_PRELUDE = r"""
#define HDN_INF __longlong_as_double(0x7ff0000000000000LL)
__device__ __forceinline__ double hdn_dmin(double a, double b) { return (a != a || b != b) ? a + b : fmin(a, b); }
__device__ __forceinline__ double hdn_dmax(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }
"""


def _red_final(mode, count):
    if mode == "AVG":
        return f"a / {float(count)!r}"
    if mode == "NORM2":
        return "sqrt(a)"
    return "a"


def reduction_sources(mode, x, y, sms, tag):
    """Steps [(src, name, grid, block, argspec)] and workspace bytes.  Accumulation in double.
    Many outputs or short reductions: one thread per output.  Otherwise blocks of 256 threads
    per (output, split) write double partials; a second kernel combines and finalizes."""
    xd, yd = [int(d) for d in x.dims], [int(d) for d in y.dims]
    xs, ys = [int(s) for s in x.strides], [int(s) for s in y.strides]
    Tx, Ty = CTYPE[dtype_name(x.dtype)], CTYPE[dtype_name(y.dtype)]
    red = [d for d in range(len(xd)) if yd[d] == 1 and xd[d] != 1]
    keep = [d for d in range(len(xd)) if d not in red and yd[d] != 1]
    nout = 1
    for d in keep:
        nout *= yd[d]
    count = 1
    for d in red:
        count *= xd[d]
    # output index o -> coordinates of kept dims (innermost = the output's smallest stride)
    korder = sorted(keep, key=lambda d: (-abs(ys[d]), d))
    ol = []
    rem = "o"
    for k, d in enumerate(reversed(korder)):
        if k == len(korder) - 1:
            ol.append(f"const long long k{d} = {rem};")
        else:
            ol.append(f"const long long k{d} = {rem} % {yd[d]}; const long long rk{d} = {rem} / {yd[d]};")
            rem = f"rk{d}"
    xbase = " + ".join([f"k{d} * {xs[d]}" for d in keep] or ["0"])
    ybase = " + ".join([f"k{d} * {ys[d]}" for d in keep] or ["0"])
    # reduced index e -> offset in x (innermost = x's smallest stride)
    rorder = sorted(red, key=lambda d: (-abs(xs[d]), d))
    rl = []
    rem = "e"
    for k, d in enumerate(reversed(rorder)):
        if k == len(rorder) - 1:
            rl.append(f"const long long j{d} = {rem};")
        else:
            rl.append(f"const long long j{d} = {rem} % {xd[d]}; const long long rj{d} = {rem} / {xd[d]};")
            rem = f"rj{d}"
    xoff = " + ".join([f"j{d} * {xs[d]}" for d in red] or ["0"])
    head = "#define HDN_GENERATED 1\n#include \"hdn_compat.h\"\n" + RED_PRELUDE
    step, comb, fin = RED_STEP[mode], RED_COMB[mode], _red_final(mode, count)
    if count <= 256 or nout >= 16 * sms * 8:
        name = f"hdn_reduce_{tag}"
        src = head + f"""
extern "C" __global__ void __launch_bounds__(256) {name}(const {Tx}* __restrict__ x, {Ty}* __restrict__ y) {{
  const long long o = (long long)blockIdx.x * 256 + threadIdx.x;
  if (o >= {nout}) return;
  {' '.join(ol)}
  const {Tx}* xb = x + ({xbase});
  double a = {RED_INIT[mode]};
  for (long long e = 0; e < {count}; ++e) {{
    {' '.join(rl)}
    const double v = (double)hdn_to_float(xb[{xoff}]);
    a = {step};
  }}
  y[{ybase}] = hdn_from_float<{Ty}>((float)({fin}));
}}
"""
        return [(src, name, (max(1, (nout + 255) // 256), 1, 1), (256, 1, 1), ("x", "y"))], 0
    S = max(1, min(64, (4 * sms) // max(1, nout), count // 4096))
    n1, n2 = f"hdn_reduce_part_{tag}", f"hdn_reduce_fin_{tag}"
    src1 = head + f"""
extern "C" __global__ void __launch_bounds__(256) {n1}(const {Tx}* __restrict__ x, double* __restrict__ part) {{
  __shared__ double sh[256];
  const long long o = blockIdx.x;
  {' '.join(ol)}
  const {Tx}* xb = x + ({xbase});
  double a = {RED_INIT[mode]};
  for (long long e = (long long)blockIdx.y * 256 + threadIdx.x; e < {count}; e += {S * 256}LL) {{
    {' '.join(rl)}
    const double v = (double)hdn_to_float(xb[{xoff}]);
    a = {step};
  }}
  sh[threadIdx.x] = a;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {{
    if (threadIdx.x < w) {{ const double v = sh[threadIdx.x + w]; const double a2 = sh[threadIdx.x]; {{ const double a = a2; sh[threadIdx.x] = {comb}; }} }}
    __syncthreads();
  }}
  if (threadIdx.x == 0) part[o * {S} + blockIdx.y] = sh[0];
}}
"""
    src2 = head + f"""
extern "C" __global__ void __launch_bounds__(256) {n2}(const double* __restrict__ part, {Ty}* __restrict__ y) {{
  const long long o = (long long)blockIdx.x * 256 + threadIdx.x;
  if (o >= {nout}) return;
  {' '.join(ol)}
  double a = part[o * {S}];
  for (int s = 1; s < {S}; ++s) {{ const double v = part[o * {S} + s]; a = {comb}; }}
  y[{ybase}] = hdn_from_float<{Ty}>((float)({fin}));
}}
"""
    return [(src1, n1, (nout, S, 1), (256, 1, 1), ("x", "ws")),
            (src2, n2, (max(1, (nout + 255) // 256), 1, 1), (256, 1, 1), ("ws", "y"))], 8 * nout * S
