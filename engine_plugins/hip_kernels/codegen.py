"""Source generation shared by the operation families: op-graph pieces -> HIP-dialect C++
kernels with every size baked in.

Nothing here touches a GPU: :func:`elementwise_source` (the elementwise kernel of pointwise runs,
batchnorm passes and layout copies) and :func:`gemm_source` (the GEMM core's source from a
:class:`GemmSpec`) return source text (compiled by the plan builder through the device layer,
and by CI through NVRTC alone); the families' own generators live in ``ops/<family>.py``.  All
tensor geometry (dims, strides, broadcast) becomes compile-time constants, so the compiler folds
the index arithmetic of each plan.
"""
from __future__ import annotations

import math
import os

from hipdnn_cabi.schemas.catalog import FB_NAMES

KDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")
CTYPE = {"FLOAT": "float", "HALF": "hdn_half", "BFLOAT16": "hdn_bf16",
         "FP8_E4M3": "hdn_fp8e4m3", "FP8_E5M2": "hdn_fp8e5m2"}
ELEM_SIZE = {"FLOAT": 4, "HALF": 2, "BFLOAT16": 2, "FP8_E4M3": 1, "FP8_E5M2": 1}
FP8 = ("FP8_E4M3", "FP8_E5M2")
# narrow / integer types of block scale, resample indices and MoE routing: storage only
# (ops/block_scale.py stores the two FP8 types as bytes too)
CTYPE.update({n: "unsigned char" for n in ("FP8_E8M0", "FP4_E2M1", "FP6_E2M3", "FP6_E3M2",
                                           "FP8_E4M3_FNUZ", "FP8_E5M2_FNUZ", "UINT8")})
CTYPE.update({"INT8": "signed char", "INT32": "int", "INT64": "long long", "DOUBLE": "double"})
ELEM_SIZE.update({n: 1 for n in CTYPE if CTYPE[n] in ("unsigned char", "signed char")})
ELEM_SIZE.update({"INT32": 4, "INT64": 8, "DOUBLE": 8})
# BOOLEAN tensors (written UNSET by the backend: the FlatBuffers schema has no BOOLEAN) of
# pointwise nodes: comparison / logic outputs, masks
CTYPE["UNSET"], ELEM_SIZE["UNSET"] = "hdn_bool", 1


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


# --------------------------------------------------------------------------- float helpers
FLT_MAX = 3.4028234663852886e38
# NaN-propagating min / max of the pointwise expressions (elementwise, GEMM and norm kernels)
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
# types the elementwise kernels load and compute in double (the CPU reference's float64)
WIDE = ("DOUBLE", "INT32", "INT64")


class EwIn:
    """An elementwise input: pointer param (strides over the domain) or a constant.  ``wide``:
    the variable is a double (loaded with ``hdn_to_double``; WIDE pointer types always are)."""

    def __init__(self, var, dtype=None, strides=None, const=None, param=None, scalar=False,
                 wide=False):
        self.var, self.dtype, self.strides, self.const, self.param = var, dtype, strides, const, param
        # a by-value kernel argument (runtime pass-by-value scalar): float, double when ``wide``
        self.scalar = scalar
        self.wide = wide or (dtype in WIDE and not scalar)


class EwOut:
    """An elementwise output; ``wide``: its variable is a double (stored with
    ``hdn_from_double``, as is every WIDE output type)."""

    def __init__(self, var, dtype, strides, param, wide=False):
        self.var, self.dtype, self.strides, self.param = var, dtype, strides, param
        self.wide = wide or dtype in WIDE


def dlit(v: float) -> str:
    """A double literal (NaN / infinities through the float bit patterns: exact)."""
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return flit(v)
    return repr(v) if "e" in repr(v) or "." in repr(v) else repr(v) + ".0"


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
            params.append(f"const {'double' if t.wide else 'float'} {t.param}")
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
        L.append(f"  {'double' if t.wide else 'float'} ld_{t.var}[{ILP}];")
    L.append("#pragma unroll")
    L.append(f"  for (int j = 0; j < {ILP}; ++j) {{")
    L.append(f"    const {itype} i = base + j * {THREADS};")
    L.append(f"    if (i < {total}) {{")
    L += ["      " + s for s in coord_code(domain, order, "i", itype)]
    for t in ptr_ins:
        L.append(f"      ld_{t.var}[j] = {'hdn_to_double' if t.wide else 'hdn_to_float'}"
                 f"({t.param}[{off(t.strides)}]);")
    L.append("    }")
    L.append("  }")
    L.append("#pragma unroll")
    L.append(f"  for (int j = 0; j < {ILP}; ++j) {{")
    L.append(f"    const {itype} i = base + j * {THREADS};")
    L.append(f"    if (i < {total}) {{")
    L += ["      " + s for s in coord_code(domain, order, "i", itype)]
    for t in ins:
        if t.scalar:
            L.append(f"      const {'double' if t.wide else 'float'} {t.var} = {t.param};")
        elif t.param:
            L.append(f"      const {'double' if t.wide else 'float'} {t.var} = ld_{t.var}[j];")
        elif t.wide:
            L.append(f"      const double {t.var} = {dlit(t.const)};")
        else:
            L.append(f"      const float {t.var} = {flit(t.const)};")
    L += ["      " + s for s in stmts]
    for t in outs:
        conv = "hdn_from_double" if t.wide else "hdn_from_float"
        L.append(f"      {t.param}[{off(t.strides)}] = {conv}<{CTYPE[t.dtype]}>({t.var});")
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
        # backward filter on 4-D tensor maps (ops/conv._wgrad_tma): {"k": virtual GEMM k,
        # "tmaps": {"A", "B"}, "defs": prelude lines} or None
        self.wgrad = None
        # backward data: N-major weights per filter tap on a 3-D tensor map (ops/conv.py):
        # {"K", "taps", "flip", "tmap"} or None
        self.b_tap = None
        # () -> the SIMT core's A_ROWS prelude (implicit.conv_fwd_rows_simt) or None
        self.simt_rows = None
        # the output as the wgmma core's TMA-store epilogue can write it (gemm.py): one 16-bit
        # output, element (b, m, n) at b * sb + m * sm + n, 16-byte rows: {"uid", "dtype", "sm",
        # "sb", "value": C body of epi_v (float v at b, m, n -> the output value)} or None
        self.c_tma = None
        # convolution forward on an im2col tensor map (ops/conv._fwd_im2col): {"k": virtual GEMM
        # k, "A": im2col map, "B": (dtype, dims, strides) of the 4-D weight view, "defs",
        # "taps", "cb"} or None
        self.im2col = None
        # the direct core (kernels/gemm_direct.hip, one thread per output) instead of a tiled
        # one: None, or {"cl": consecutive threads walk n, then b (channels-last outputs)}
        self.direct = None
        # wgmma core only: the paired GEMM (gemm.emit_pair): N is twice the output width, the
        # tile's two halves read B from two tensor maps ("B", "B2") and the epilogue combines
        # columns c and c + N / 2 with pair_v; {"value": C body of pair_v (vg, vu at b, m, n ->
        # the output value)} or None
        self.pair = None
        # wgmma core only: the data type of the output whose per-column sum and sum of squares
        # the epilogue accumulates (genstats: a double argument hdn_st[2 N]) or None
        self.stats = None
        # the plan builder may run this GEMM as C^T = B^T A^T (gemm.swap_ab: plain matmul
        # operands, gathers in b, m, k / b, k, n only); ``swapped``: it does
        self.swap_ok = False
        self.swapped = False
        # wgmma split-K: the last part of each tile sums the partials in the GEMM kernel
        # (WG_FIXUP, per-tile counters in the plan's zeroed scratch) instead of the finish kernel
        self.fixup = False
        # (A, B): the operand's 16-byte chunks along k are 16 contiguous, 16-byte aligned 1-byte
        # elements with one padding decision (channels-last convolution, C % 16 == 0): the s8
        # wgmma producer keeps its chunk gather for them (gemm.emit)
        self.chunk16 = (False, False)


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
    s8 = spec.ta == "INT8"                          # s8 x s8 -> s32 (wgmma core only): int epilogue
    narrow = spec.ta in FP8 or spec.tb in FP8 or s8  # no 16-bit raw loaders for these types
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
        if spec.swapped and S > 1 and not gc.swapped_split_ok(spec.N):
            S, per = 1, GK
        if spec.grouped or spec.pair or spec.stats:
            S, per = 1, GK          # the epilogues that combine or sum run on whole k
        if spec.pair and bn < 128:
            bn, stages = 128, gc._stages(128)     # halves of >= 64 columns (one atom each)
        tstore = None
        if _c_tma_ok(spec) and not spec.grouped and not wgrad and not spec.pair:
            tstore = gc.tma_store_config(spec.M, spec.N, GK, spec.batch, sms, es, gather, bn, S, bool(i2c))
        if tstore:
            (bn, stages), S, per = tstore, 1, GK
        if spec.stats:          # room for the per-warpgroup column sums
            stages = min(stages, gc._stages(bn, bool(tstore), True))
    elif core == "simt":
        from . import gemm_core as gc
        wgrad = i2c = None
        simt_bn, S, per = gc.simt_config(spec.M, spec.N, spec.K, spec.batch, sms)
    elif core == "direct":
        wgrad = i2c = None
        S, per = 1, spec.K
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
    acc = "int" if s8 else "float"
    if s8:      # the int32 sums reach store_c / store_c8 (and the split-K partials) as ints
        L += ["#define HDN_ACC_INT 1"]
    L += [f"__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, {acc} v) {{",
          spec.store, "}"]
    if spec.store8 is not None:
        L += [f"__device__ __forceinline__ void store_c8(HDN_EPI_PARAMS, int b, int m, int n, const {acc}* vv) {{",
              spec.store8, "}"]
    opts, tmaps = {}, {}
    if core == "wgmma":
        L += _wgmma_defs(spec, bn, stages, tmaps, wgrad, i2c)
        if spec.pair:
            L += ["#define WG_PAIR 1",
                  "__device__ __forceinline__ float pair_v(HDN_EPI_PARAMS, int b, int m, int n, float vg, float vu) {",
                  spec.pair["value"], "}"]
        if spec.stats:
            L += ["#define WG_STATS 1", f"typedef {CTYPE[spec.stats]} TS;"]
        if tstore:
            c = spec.c_tma
            L += ["#define WG_TMA_STORE 1", f"typedef {CTYPE[c['dtype']]} TC;",
                  "__device__ __forceinline__ float epi_v(HDN_EPI_PARAMS, int b, int m, int n, float v) {",
                  c["value"], "}"]
            rows_b = c["sb"] * 2 if spec.batch > 1 else -(-spec.M * c["sm"] * 2 // 16) * 16
            tmaps["C"] = (c["dtype"], (spec.N, spec.M, spec.batch), (c["sm"] * 2, rows_b), (64, 64, 1))
        if spec.grouped:
            L += [f"#define WG_SCHED_GROUPED {spec.grouped}"] + list(spec.sched)
        if spec.fixup and S > 1 and not spec.grouped:
            L.append("#define WG_FIXUP 1")
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
        opts = {"shmem": gc.smem_bytes(bn, stages, bool(tstore), bool(spec.stats)), "arch": "sm_90a",
                "tile": (gc.WG_BM, bn, gc.bk(es)), "stages": stages}
        if tstore:
            opts["tstore"] = True
    elif core == "direct":
        body = f"#define GD_CL {int(spec.direct['cl'])}\n" + read_kernel("gemm_direct.hip")
        name = "hdn_gemm_direct"
        grid = (max(1, -(-spec.batch * spec.M * spec.N // 256)), 1, 1)
        block = (256, 1, 1)
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
    if S > 1 and core == "wgmma" and spec.fixup and not spec.grouped:
        out["fixup"] = True
        out["cnt_bytes"] = 4 * -(-spec.M // gc.WG_BM) * -(-spec.N // bn) * spec.batch
    elif S > 1:
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
    kmajor = tf32 or spec.ta in FP8 or spec.ta == "INT8"   # no M/N-major wgmma operands for these types
    es = ELEM_SIZE[spec.ta]
    L = [f"#define WG_BN {bn}", f"#define WG_STAGES {stages}",
         f"#define WG_BF16 {int(spec.ta == 'BFLOAT16')}", f"#define WG_TF32 {int(tf32)}",
         f"#define WG_FP8 {1 if spec.ta == 'FP8_E4M3' else 2 if spec.ta == 'FP8_E5M2' else 0}"]
    if spec.ta == "INT8":
        L.append("#define WG_S8 1")
    if gc.knob("WG_MN_SWAP", "0") == "1":     # diagnostic: M/N-major descriptor strides swapped
        L += ["#define WG_MN_LBO 1024", "#define WG_MN_SBO 8192"]
    if wgrad:                                 # both operands: 4-D boxes (ops/conv._wgrad_tma)
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
        if op == "B" and spec.pair:      # two maps of N / 2 columns, half-tile boxes
            mn_extent, rows = spec.N // 2, bn // 2
        if op == "B" and btap:
            tmaps["B"] = btap["tmap"]
            L += ["#define B_TMA 1", f"#define B_TAP_K {btap['K']}",
                  f"#define B_TAP_FLIP {btap['taps'] - 1 if btap['flip'] else 0}"]
            continue
        use = mode in (1, 2) and gc.tma_ok(dense, dt) and not (kmajor and mode == 2)
        bcast = use and dense[3] > 1 and dense[2] == 0      # one matrix for every batch index
        if bcast and spec.grouped:
            use = False
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
        if use and bcast:             # a single-matrix map, read at batch coordinate 0
            dims3 = dims3[:2] + (1,)
            L.append(f"#define WG_{op}_BATCH(b) 0")
        if use:
            nb = batch if spec.grouped else (1 if bcast else spec.batch)
            strides.append(sb * es if nb > 1 else -(-inner // 16) * 16)
            tmaps[op] = (dt, dims3, tuple(strides), box)
            if op == "B" and spec.pair:
                tmaps["B2"] = tmaps["B"]          # the same layout over the second operand
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
