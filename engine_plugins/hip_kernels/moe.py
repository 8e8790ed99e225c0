"""MoE grouped matmul (forward) on the GPU, on the engine's existing GEMM core through one narrow
interface, :func:`gemm_spec` (a GemmSpec plus the epilogue arguments) - so that the GEMM core can
be switched (the tensor-core core of the GEMM-core issue) without touching the routing code.

Steps: (1) a one-block routing check: first_token_offset in range and non-decreasing, routed
source / destination rows in range, token_ks in [0, top_k), SCATTER destinations distinct
(counts in the workspace); it zero-fills the output rows no group writes and records a flag;
(2) GATHER only: the routed token rows are gathered into a packed workspace copy (the GEMM's
A operand); (3) one grouped GEMM launch: batch = groups (group g uses expert g % E), M = routed
rows; tiles that do not meet their group's row range exit at once (HDN_TILE_ACTIVE, an optional
hook of the GEMM kernels), the epilogue stores only the group's rows, at their destination row
(SCATTER: token_index * top_k + token_ks).

Invalid routing data cannot be returned as a status without a host synchronisation (which would
break stream capture): the GPU engine then fills the whole output with NaN (the CPU engine
returns INVALID_VALUE).  The backward (dweight) stays on the CPU engine: its reduction range is
data dependent, which the GEMM core's operand hooks cannot express yet.
"""
from __future__ import annotations

from hipdnn_cabi.schemas._generated.schema_table import ENUMS

from . import codegen as cg

KINDS = {"MoeGroupedMatmulAttributes": (("token", "weight", "first_token_offset", "token_index",
                                         "token_ks"), ("output",))}
_MODE = {v: n for n, v in ENUMS["MoeGroupedMatmulMode"][1]}
FLOATS = ("FLOAT", "HALF", "BFLOAT16")


def _d(t):
    return [int(v) for v in t.dims]


def _s(t):
    return [int(v) for v in t.strides]


def _dt(t):
    return cg.dtype_name(t.dtype)


def check(node, graph, r):
    mode = _MODE.get(node.attrs.get("mode") or 0)
    if mode not in ("NONE", "GATHER", "SCATTER"):
        raise ValueError(f"mode {mode}")
    for q in ("token", "weight", "first_token_offset", "output"):
        if q not in r:
            raise ValueError(f"{q} missing")
    tok, w, off, out = (_d(r[q]) for q in ("token", "weight", "first_token_offset", "output"))
    if len(tok) != 3 or tok[0] != 1 or len(w) != 3 or tok[2] != w[1] or w[0] < 1:
        raise ValueError("token [1, T, K] / weight [E, K, N]")
    if len(off) != 3 or off[1:] != [1, 1] or off[0] % w[0] or off[0] < 1:
        raise ValueError("first_token_offset [B*E, 1, 1]")
    top_k = int(node.attrs.get("top_k") or 0)
    rows = tok[1]
    for q in ("first_token_offset", "token_index", "token_ks"):
        if q in r and _dt(r[q]) != "INT32":
            raise ValueError(f"{q} must be INT32")
    if mode in ("GATHER", "SCATTER"):
        if "token_index" not in r:
            raise ValueError("token_index missing")
        ti = _d(r["token_index"])
        if len(ti) != 3 or ti[0] != 1 or ti[2] != 1:
            raise ValueError("token_index [1, R, 1]")
        if mode == "GATHER":
            rows = ti[1]
    if mode == "SCATTER":
        if "token_ks" not in r or _d(r["token_ks"]) != _d(r["token_index"]):
            raise ValueError("token_ks")
        if not 0 < top_k <= w[0] or _d(r["token_index"])[1] != tok[1]:
            raise ValueError("top_k / token_index rows")
    if out != [1, rows, w[2]]:
        raise ValueError("output dims")
    if not all(_dt(r[q]) in FLOATS for q in ("token", "weight", "output")):
        raise ValueError("types")
    if _dt(r["token"]) != _dt(r["weight"]):
        raise ValueError("token and weight types differ")
    return mode, top_k, rows


HEAD = '#define HDN_GENERATED 1\n#include "hdn_compat.h"\n'


def _route_source(name, mode, G, rows_total, T, R_out, N, out, top_k):
    """One block of 1024 threads: validate, zero-fill unwritten rows, flag (1 = ok)."""
    To = cg.CTYPE[_dt(out)]
    so1, so2 = _s(out)[1], _s(out)[2]
    scat = mode == "SCATTER"
    p = [f"const int* __restrict__ off", "int* __restrict__ flag", "int* __restrict__ cnt",
         f"{To}* __restrict__ po"]
    if mode != "NONE":
        p.append("const int* __restrict__ ti")
    if scat:
        p.append("const int* __restrict__ tk")
    nan = {"FLOAT": "__uint_as_float(0x7fc00000u)"}.get(_dt(out))
    L = [HEAD, f'extern "C" __global__ void __launch_bounds__(1024) {name}({", ".join(p)}) {{',
         "  __shared__ int bad;",
         "  if (threadIdx.x == 0) bad = 0;",
         "  __syncthreads();",
         f"  for (int g = threadIdx.x; g < {G}; g += 1024) {{",
         f"    const int o = off[g]; if (o < 0 || o > {rows_total} || (g > 0 && o < off[g - 1])) atomicOr(&bad, 1); }}",
         "  __syncthreads();"]
    if mode != "NONE":
        # only the routed rows of some group (from off[0]) are checked and counted, as on the CPU
        L += [f"  const int r0 = bad ? {rows_total} : off[0];",
              f"  for (int r = r0 + threadIdx.x; r < {rows_total}; r += 1024) {{"]
        if mode == "GATHER":
            L += [f"    const int s = ti[r]; if (s < 0 || s >= {T}) atomicOr(&bad, 1);"]
        else:
            L += [f"    const int k = tk[r]; const long long d = (long long)ti[r] * {top_k} + k;",
                  f"    if (k < 0 || k >= {top_k} || d < 0 || d >= {R_out}) atomicOr(&bad, 1);",
                  "    else atomicAdd(&cnt[d], 1);"]
        L += ["  }", "  __syncthreads();"]
    if scat:
        L += [f"  for (int d = threadIdx.x; d < {R_out}; d += 1024) if (cnt[d] > 1) atomicOr(&bad, 1);",
              "  __syncthreads();"]
    L += ["  if (threadIdx.x == 0) *flag = bad ? 0 : 1;",
          f"  const int first = bad ? {R_out} : off[0];"]
    if nan is None:
        L += [f"  {To} nanv; nanv.bits = (hdn_u16){'0x7e00u' if _dt(out) == 'HALF' else '0x7fc0u'};"]
        nanexpr = "nanv"
    else:
        nanexpr = nan
    # rows to fill: everything (invalid), rows < off[0] (NONE/GATHER), unhit rows (SCATTER);
    # one warp per row
    lim = f"(bad ? {R_out}LL : {R_out if scat else 'first'})"
    keep = "bad || cnt[r] == 0" if scat else "true"
    L += ["  const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;",
          f"  for (long long r = wp; r < {lim}; r += 32) {{",
          f"    if (!({keep})) continue;",
          f"    for (long long n = lane; n < {N}; n += 32)",
          f"      po[r * {so1} + n * {so2}] = bad ? {nanexpr} : hdn_from_float<{To}>(0.f);",
          "  }", "}"]
    return "\n".join(L) + "\n"


def gemm_spec(tok_src, tok_t, w, out, mode, G, E, rows_total, top_k):
    """The narrow GEMM-core interface: (GemmSpec, epilogue parameter names in order).
    tok_src: (row stride, k stride) of the A operand (the token, or its gathered copy)."""
    spec = cg.GemmSpec()
    K, N = _d(w)[1], _d(w)[2]
    sw0, sw1, sw2 = _s(w)
    sa_m, sa_k = tok_src
    so1, so2 = _s(out)[1], _s(out)[2]
    spec.M, spec.N, spec.K, spec.batch = rows_total, N, K, G
    spec.ta = spec.tb = _dt(tok_t)
    spec.load_a = f"return (long long)m * {sa_m} + (long long)k * {sa_k};"
    spec.load_b = f"return (long long)(b % {E}) * {sw0} + (long long)k * {sw1} + (long long)n * {sw2};"
    spec.a_kcontig = abs(sa_k) <= abs(sa_m)
    spec.b_kcontig = abs(sw1) <= abs(sw2)
    if sa_k == 1 and K % 8 == 0 and sa_m % 8 == 0:
        spec.a_mode = 1
    if sw2 == 1 and N % 8 == 0 and sw1 % 8 == 0 and sw0 % 8 == 0:
        spec.b_mode = 2
    elif sw1 == 1 and K % 8 == 0 and sw2 % 8 == 0 and sw0 % 8 == 0:
        spec.b_mode = 1
    To = cg.CTYPE[_dt(out)]
    spec.epi_params = ["const int* __restrict__ moe_off", "const int* __restrict__ moe_flag",
                       f"{To}* __restrict__ moe_out"]
    if mode == "SCATTER":
        spec.epi_params += ["const int* __restrict__ moe_ti", "const int* __restrict__ moe_tk"]
    dst = (f"(long long)moe_ti[m] * {top_k} + moe_tk[m]" if mode == "SCATTER" else "(long long)m")
    spec.store = (f"const int lo = moe_off[b]; const int hi = b + 1 < {G} ? moe_off[b + 1] : {rows_total};"
                  f" if (m < lo || m >= hi || !*moe_flag) return;"
                  f" moe_out[({dst}) * {so1} + (long long)n * {so2}] = hdn_from_float<{To}>(v);")
    if so2 == 1 and N % 8 == 0 and so1 % 8 == 0:
        # 8 consecutive n of one row: one range check, 16-byte stores
        ot = _dt(out)
        if ot == "FLOAT":
            wr = ("float4* q = reinterpret_cast<float4*>(p);"
                  " q[0] = make_float4(vv[0], vv[1], vv[2], vv[3]);"
                  " q[1] = make_float4(vv[4], vv[5], vv[6], vv[7]);")
        else:
            wr = ("unsigned w[4]; for (int j = 0; j < 4; ++j) w[j] = (unsigned)hdn_bits("
                  f"hdn_from_float<{To}>(vv[2 * j])) | ((unsigned)hdn_bits(hdn_from_float<{To}>(vv[2 * j + 1])) << 16);"
                  " *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);")
        spec.store8 = (f"const int lo = moe_off[b]; const int hi = b + 1 < {G} ? moe_off[b + 1] : {rows_total};"
                       f" if (m < lo || m >= hi || !*moe_flag) return;"
                       f" {To}* p = moe_out + ({dst}) * {so1} + n; {wr}")
    return spec


def emit(prog, graph, node, r, loc, tag, sms, use_mma=True):
    mode, top_k, rows = check(node, graph, r)
    tok, w, off, out = r["token"], r["weight"], r["first_token_offset"], r["output"]
    T, K = _d(tok)[1], _d(tok)[2]
    E, N = _d(w)[0], _d(w)[2]
    G = _d(off)[0]
    rows_total = rows          # GATHER: token_index rows; else T (== output rows)
    R_out = _d(out)[1]
    flag = prog.ws_alloc(4)
    cnt = prog.ws_alloc(4 * R_out) if mode == "SCATTER" else flag
    if mode == "SCATTER":
        prog.steps.append(("memset", cnt, 4 * R_out))
    rname = f"hdn_moe_route_{tag}"
    args = [loc[off.uid], ("ws", flag), ("ws", cnt), loc[out.uid]]
    if mode != "NONE":
        args.append(loc[r["token_index"].uid])
    if mode == "SCATTER":
        args.append(loc[r["token_ks"].uid])
    prog.steps.append(("launch", _route_source(rname, mode, G, rows_total, T, R_out, N, out, top_k),
                       rname, (1, 1, 1), (1024, 1, 1), args))
    a_loc = loc[tok.uid]
    a_str = (_s(tok)[1], _s(tok)[2])
    if mode == "GATHER":
        Tt = cg.CTYPE[_dt(tok)]
        gbuf = prog.ws_alloc(rows_total * K * cg.ELEM_SIZE[_dt(tok)])
        gname = f"hdn_moe_gather_{tag}"
        st1, st2 = _s(tok)[1], _s(tok)[2]
        src = HEAD + (
            f'extern "C" __global__ void __launch_bounds__(256) {gname}(const {Tt}* __restrict__ pt, '
            f'const int* __restrict__ ti, {Tt}* __restrict__ pg) {{\n'
            "  const long long e = (long long)blockIdx.x * 256 + threadIdx.x;\n"
            f"  if (e >= {rows_total}LL * {K}) return;\n"
            f"  const long long r = e / {K}, k = e % {K};\n"
            f"  const int s = ti[r];\n"
            f"  pg[e] = (s >= 0 && s < {T}) ? pt[(long long)s * {st1} + k * {st2}] : hdn_from_float<{Tt}>(0.f);\n"
            "}\n")
        prog.steps.append(("launch", src, gname, (max(1, -(-(rows_total * K) // 256)), 1, 1),
                           (256, 1, 1), [loc[tok.uid], loc[r["token_index"].uid], ("ws", gbuf)]))
        a_loc, a_str = ("ws", gbuf), (K, 1)
    spec = gemm_spec(a_str, tok, w, out, mode, G, E, rows_total, top_k)
    use_mma = _dt(tok) in ("HALF", "BFLOAT16") and use_mma
    gs = cg.gemm_source(spec, use_mma, sms=0)       # sms=0: never split K (groups fill the GPU)
    src, name, grid, block = gs["gemm"]
    hook = ("__device__ __forceinline__ bool hdn_moe_tile_active(HDN_EPI_PARAMS, int b, int m0) {"
            f" if (!*moe_flag) return false; const int lo = moe_off[b];"
            f" const int hi = b + 1 < {G} ? moe_off[b + 1] : {rows_total};"
            f" return m0 < hi && m0 + {cg.TILE} > lo; }}\n"
            "#define HDN_TILE_ACTIVE(b, m0) hdn_moe_tile_active(HDN_EPI_ARGS, b, m0)\n")
    body = cg.read_kernel("gemm_mma.hip" if use_mma else "gemm_simt.hip")
    src = src.replace(body, hook + body)
    gargs = [a_loc, loc[w.uid], loc[off.uid], ("ws", flag), loc[out.uid]]
    if mode == "SCATTER":
        gargs += [loc[r["token_index"].uid], loc[r["token_ks"].uid]]
    prog.steps.append(("launch", src, name, grid, block, gargs))
    prog.notes.append(f"MoE grouped matmul: {G} groups x {rows_total} rows, "
                      f"{'mma' if use_mma else 'simt'} GEMM core")

