"""Reduction nodes: any subset of dims reduced to size 1, accumulation in double.  Many outputs
or short reductions: one thread per output; otherwise blocks of 256 threads per (output, split)
write partials to the plan's scratch and a second kernel combines and finalizes.  DOUBLE tensors
load and store in double; the result is rounded to float32 first unless the compute type is
DOUBLE (UNSET with DOUBLE data), as the CPU reference does.
"""
from __future__ import annotations

from hipdnn_cabi.schemas.catalog import FB_NAMES

from .. import codegen as cg
from ._base import COMPUTE_TYPES, _need, check_tensors, check_types, dims, dt, kinds, no_fp8

KINDS = kinds("reduction")
MODES = ("ADD", "MUL", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS")


def check(node, graph, r):
    check_tensors(node, r, negative=True)
    no_fp8(r)
    # compute type DOUBLE with DOUBLE data only (the CPU reference's keys)
    dbl = "in" in r and dt(r["in"]) == "DOUBLE"
    check_types(node, r, extra=("DOUBLE",), computes=COMPUTE_TYPES + (("DOUBLE",) if dbl else ()))
    _need("in" in r and "out" in r, "reduction operands missing")
    mode = FB_NAMES["ReductionMode"].get(node.attrs.get("mode"))
    _need(mode in MODES, f"reduction mode {mode} not supported")
    xi, yo = dims(r["in"]), dims(r["out"])
    _need(len(xi) == len(yo) and all(b in (a, 1) for a, b in zip(xi, yo)), "reduction shapes")
    _need(all(a > 0 for a in xi), "empty reduction input")
    _need(r["in"].value is None and r["out"].value is None, "reduction of a constant")


def channel_stat(node, r):
    """(input uid, 'ADD' | 'AVG') when the node sums (or averages) its input over every dim but
    dim 1 - a per-channel statistic a producing GEMM's epilogue can accumulate (genstats:
    ops/conv, ops/matmul ``stats_output``); float results (not DOUBLE); else None."""
    mode = FB_NAMES["ReductionMode"].get(node.attrs.get("mode"))
    x, y = r["in"], r["out"]
    xd, yd = dims(x), dims(y)
    if mode not in ("ADD", "AVG") or len(xd) < 2 or "DOUBLE" in (dt(x), dt(y)) or \
            cg.dtype_name(node.compute_dtype) == "DOUBLE":
        return None
    if yd[1] != xd[1] or any(v != 1 for i, v in enumerate(yd) if i != 1):
        return None
    return x.uid, mode


def emit(ctx, node, r, tag, fused=None):
    _emit_reduction(ctx.prog, node, r, ctx.loc, tag, ctx.sms)


def _emit_reduction(prog, node, r, loc, tag, sms):
    x, y = r["in"], r["out"]
    mode = FB_NAMES["ReductionMode"][node.attrs.get("mode")]
    cd = cg.dtype_name(node.compute_dtype)
    cdouble = cd == "DOUBLE" or (cd == "UNSET" and dt(x) == "DOUBLE")
    steps, ws_bytes = reduction_sources(mode, x, y, sms, tag, cdouble)
    part = prog.small_alloc(ws_bytes) if ws_bytes else None
    for src, name, grid, block, argspec in steps:
        args = []
        for a in argspec:
            args.append(loc[x.uid] if a == "x" else loc[y.uid] if a == "y" else part)
        prog.steps.append(("launch", src, name, grid, block, args))


# --------------------------------------------------------------------------- sources
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


def reduction_sources(mode, x, y, sms, tag, cdouble=False):
    """Steps [(src, name, grid, block, argspec)] and workspace bytes.  Accumulation in double;
    ``cdouble``: the result is stored from double (else rounded to float32 first).
    Many outputs or short reductions: one thread per output.  Otherwise blocks of 256 threads
    per (output, split) write double partials; a second kernel combines and finalizes."""
    xd, yd = [int(d) for d in x.dims], [int(d) for d in y.dims]
    xs, ys = [int(s) for s in x.strides], [int(s) for s in y.strides]
    Tx, Ty = cg.CTYPE[cg.dtype_name(x.dtype)], cg.CTYPE[cg.dtype_name(y.dtype)]
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
    load, store = "(double)hdn_to_float", f"hdn_from_float<{Ty}>((float)({fin}))"
    if "DOUBLE" in (cg.dtype_name(x.dtype), cg.dtype_name(y.dtype)) or cdouble:
        load = "hdn_to_double"
        store = f"hdn_from_double<{Ty}>({fin if cdouble else f'(double)(float)({fin})'})"
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
    const double v = {load}(xb[{xoff}]);
    a = {step};
  }}
  y[{ybase}] = {store};
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
    const double v = {load}(xb[{xoff}]);
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
  y[{ybase}] = {store};
}}
"""
    return [(src1, n1, (nout, S, 1), (256, 1, 1), ("x", "ws")),
            (src2, n2, (max(1, (nout + 255) // 256), 1, 1), (256, 1, 1), ("ws", "y"))], 8 * nout * S
