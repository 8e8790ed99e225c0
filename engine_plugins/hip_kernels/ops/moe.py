"""MoE grouped matmul (forward) and its weight gradient on the GPU, on the engine's GEMM core
through one narrow interface, :func:`gemm_spec` (a GemmSpec plus the epilogue arguments).

Forward steps: (1) a one-block routing check: first_token_offset in range and non-decreasing,
routed source / destination rows in range, token_ks in [0, top_k), SCATTER destinations distinct
(counts in the workspace); it zero-fills the output rows no group writes, records a flag and
the grouped tile table (prefix sums of each group's 128-row tile count); (2) GATHER only: the
routed token rows are gathered into a packed workspace copy with 16-byte loads (the tensor copy
engine cannot gather rows; the copy costs ~3% of the GEMM at the benchmark size); (3) one
grouped GEMM launch:

* Hopper (sm_90, 16-bit): the wgmma core with its grouped tile scheduler (``spec.grouped = 1``,
  gemm_wgmma.hip): persistent CTAs walk only the tiles of the groups' row ranges; A (the token
  rows or their gathered copy) and B (expert ``g % E`` of the weight, the tensor map's batch
  coordinate) through the tensor copy engine; the epilogue stores only the group's rows, at
  their destination row (SCATTER: token_index * top_k + token_ks);
* elsewhere: the mma.sync / SIMT kernels with batch = groups, M = routed rows; tiles that do
  not meet their group's row range exit at once (HDN_TILE_ACTIVE, an optional hook).

The descriptor has no per-token routing weight, so no top-k weighting is applied (a framework
scales the rows with a following pointwise op).  Token gradients need no backward descriptor:
they are a forward grouped matmul over the transposed weight view (strides swapped).

Weight gradient (MoeGroupedMatmulBwdAttributes, NONE routing, G = E, off[0] = 0):
``dweight[e] = token[rows of e]^T @ doutput[rows of e]`` - a check block (NaN-fills dweight on
invalid offsets), then on Hopper the wgmma core's K-grouped scheduler (``spec.grouped = 2``:
unit = expert x output tile, the reduction over the expert's row range, operands gathered with
per-row masking), elsewhere a plain per-element kernel.

Invalid routing data cannot be returned as a status without a host synchronisation (which would
break stream capture): the GPU engine then fills the whole output with NaN (the CPU engine
returns INVALID_VALUE).
"""
from __future__ import annotations

from hipdnn_cabi.schemas.catalog import FB_NAMES

from .. import codegen as cg
from ..gemm_core import choose_core
from ._base import check_storage_types, check_tensors, declines, kinds

KINDS = kinds("moe")
_MODE = FB_NAMES["MoeGroupedMatmulMode"]
FLOATS = ("FLOAT", "HALF", "BFLOAT16")
INDEX_TYPES = ("INT32",)     # routing tensors


def check(node, graph, r):
    check_tensors(node, r)
    check_storage_types(node, r, INDEX_TYPES)
    with declines(node.kind):
        _check(node, graph, r)


def emit(ctx, node, r, tag, fused=None):
    with declines(node.kind):
        _emit(ctx.prog, ctx.graph, node, r, ctx.loc, tag, ctx.sms, ctx.use_mma)


def _write8(out_dt, To):
    """C statements storing the epilogue's eight values vv[0..7] at the 16-byte aligned `p`
    (store_c8): two float4 for FLOAT outputs, else one uint4 of eight converted 16-bit values."""
    if out_dt == "FLOAT":
        return ("float4* q = reinterpret_cast<float4*>(p);"
                " q[0] = make_float4(vv[0], vv[1], vv[2], vv[3]);"
                " q[1] = make_float4(vv[4], vv[5], vv[6], vv[7]);")
    return ("unsigned w[4]; for (int j = 0; j < 4; ++j) w[j] = (unsigned)hdn_bits("
            f"hdn_from_float<{To}>(vv[2 * j])) | ((unsigned)hdn_bits(hdn_from_float<{To}>(vv[2 * j + 1])) << 16);"
            " *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);")

def _d(t):
    return [int(v) for v in t.dims]


def _s(t):
    return [int(v) for v in t.strides]


def _dt(t):
    return cg.dtype_name(t.dtype)


def _check(node, graph, r):
    if node.kind == "MoeGroupedMatmulBwdAttributes":
        return check_bwd(node, graph, r)
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
TILE_M = 128        # the wgmma core's tile M (gemm_core.WG_BM)


def _route_source(name, mode, G, rows_total, T, R_out, N, out, top_k):
    """One block of 1024 threads: validate, zero-fill unwritten rows, flag (1 = ok)."""
    To = cg.CTYPE[_dt(out)]
    so1, so2 = _s(out)[1], _s(out)[2]
    scat = mode == "SCATTER"
    p = [f"const int* __restrict__ off", "int* __restrict__ flag", "int* __restrict__ cnt",
         f"{To}* __restrict__ po", "int* __restrict__ tiles"]
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
    # the grouped tile table: tiles[g] = first 128-row tile of group g, tiles[G] = their total
    L += ["  if (threadIdx.x == 0) {",
          "    int acc = 0;",
          f"    for (int g = 0; g < {G}; ++g) {{",
          f"      tiles[g] = bad ? 0 : acc;",
          f"      const int hi = g + 1 < {G} ? off[g + 1] : {rows_total};",
          f"      if (!bad) acc += (hi - off[g] + {TILE_M - 1}) / {TILE_M};",
          "    }",
          f"    tiles[{G}] = bad ? 0 : acc;",
          "  }"]
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
        spec.a_dense = (sa_m, 1, 0, 1)              # one [rows, K] matrix for every group
    if sw2 == 1 and N % 8 == 0 and sw1 % 8 == 0 and sw0 % 8 == 0:
        spec.b_mode = 2
        spec.b_dense = (1, sw1, sw0, E)             # E [K, N] matrices (expert = group % E)
    elif sw1 == 1 and K % 8 == 0 and sw2 % 8 == 0 and sw0 % 8 == 0:
        spec.b_mode = 1
        spec.b_dense = (sw2, 1, sw0, E)
    To = cg.CTYPE[_dt(out)]
    spec.epi_params = ["const int* __restrict__ moe_off", "const int* __restrict__ moe_flag",
                       f"{To}* __restrict__ moe_out", "const int* __restrict__ moe_tiles"]
    if mode == "SCATTER":
        spec.epi_params += ["const int* __restrict__ moe_ti", "const int* __restrict__ moe_tk"]
    dst = (f"(long long)moe_ti[m] * {top_k} + moe_tk[m]" if mode == "SCATTER" else "(long long)m")
    spec.store = (f"const int lo = moe_off[b]; const int hi = b + 1 < {G} ? moe_off[b + 1] : {rows_total};"
                  f" if (m < lo || m >= hi || !*moe_flag) return;"
                  f" moe_out[({dst}) * {so1} + (long long)n * {so2}] = hdn_from_float<{To}>(v);")
    if so2 == 1 and N % 8 == 0 and so1 % 8 == 0:
        # 8 consecutive n of one row: one range check, 16-byte stores
        wr = _write8(_dt(out), To)
        spec.store8 = (f"const int lo = moe_off[b]; const int hi = b + 1 < {G} ? moe_off[b + 1] : {rows_total};"
                       f" if (m < lo || m >= hi || !*moe_flag) return;"
                       f" {To}* p = moe_out + ({dst}) * {so1} + n; {wr}")
    return spec


def _use_wgmma(prog, dtype, use_mma):
    arch = getattr(prog, "arch", None)
    return arch is not None and dtype in ("HALF", "BFLOAT16") and \
        choose_core(dtype, dtype, arch, use_mma) == "wgmma"


def _portable_core(prog, dtype, use_mma):
    """The core of the batched (not grouped-scheduler) path: 'mfma' on AMD gfx90a / gfx942,
    'mma' on NVIDIA, for 16-bit data with the matrix units on; else 'simt'."""
    arch = getattr(prog, "arch", None) or ""
    if not use_mma:
        return "simt"
    return choose_core(dtype, dtype, arch, use_mma) if arch.startswith("gfx") else "mma"


def _gather_source(gname, tok, rows_total, K, T):
    """Routed rows token[token_index[r]] -> a packed [rows, K] copy; 16-byte chunks when the
    rows allow it (else one element per thread); rows with a bad index become zeros (the
    routing check NaN-fills the output then anyway)."""
    Tt = cg.CTYPE[_dt(tok)]
    st1, st2 = _s(tok)[1], _s(tok)[2]
    es = cg.ELEM_SIZE[_dt(tok)]
    v = 16 // es
    if st2 == 1 and K % v == 0 and (st1 * es) % 16 == 0:
        kc = K // v
        src = HEAD + (
            f'extern "C" __global__ void __launch_bounds__(256) {gname}(const {Tt}* __restrict__ pt, '
            f'const int* __restrict__ ti, {Tt}* __restrict__ pg) {{\n'
            "  const long long e = (long long)blockIdx.x * 256 + threadIdx.x;\n"
            f"  if (e >= {rows_total}LL * {kc}) return;\n"
            f"  const long long r = e / {kc}, c = e % {kc};\n"
            "  const int s = ti[r];\n"
            "  uint4 q = make_uint4(0, 0, 0, 0);\n"
            f"  if (s >= 0 && s < {T}) q = *reinterpret_cast<const uint4*>(pt + (long long)s * {st1} + c * {v});\n"
            f"  *reinterpret_cast<uint4*>(pg + r * {K} + c * {v}) = q;\n"
            "}\n")
        return src, max(1, -(-(rows_total * kc) // 256))
    src = HEAD + (
        f'extern "C" __global__ void __launch_bounds__(256) {gname}(const {Tt}* __restrict__ pt, '
        f'const int* __restrict__ ti, {Tt}* __restrict__ pg) {{\n'
        "  const long long e = (long long)blockIdx.x * 256 + threadIdx.x;\n"
        f"  if (e >= {rows_total}LL * {K}) return;\n"
        f"  const long long r = e / {K}, k = e % {K};\n"
        f"  const int s = ti[r];\n"
        f"  pg[e] = (s >= 0 && s < {T}) ? pt[(long long)s * {st1} + k * {st2}] : hdn_from_float<{Tt}>(0.f);\n"
        "}\n")
    return src, max(1, -(-(rows_total * K) // 256))


def _emit(prog, graph, node, r, loc, tag, sms, use_mma=True):
    if node.kind == "MoeGroupedMatmulBwdAttributes":
        return emit_bwd(prog, graph, node, r, loc, tag, sms, use_mma)
    mode, top_k, rows = _check(node, graph, r)
    tok, w, off, out = r["token"], r["weight"], r["first_token_offset"], r["output"]
    T, K = _d(tok)[1], _d(tok)[2]
    E, N = _d(w)[0], _d(w)[2]
    G = _d(off)[0]
    rows_total = rows          # GATHER: token_index rows; else T (== output rows)
    R_out = _d(out)[1]
    flag = prog.ws_alloc(4)
    tiles = prog.ws_alloc(4 * (G + 1))
    cnt = prog.ws_alloc(4 * R_out) if mode == "SCATTER" else flag
    if mode == "SCATTER":
        prog.steps.append(("memset", cnt, 4 * R_out))
    rname = f"hdn_moe_route_{tag}"
    args = [loc[off.uid], ("ws", flag), ("ws", cnt), loc[out.uid], ("ws", tiles)]
    if mode != "NONE":
        args.append(loc[r["token_index"].uid])
    if mode == "SCATTER":
        args.append(loc[r["token_ks"].uid])
    prog.steps.append(("launch", _route_source(rname, mode, G, rows_total, T, R_out, N, out, top_k),
                       rname, (1, 1, 1), (1024, 1, 1), args))
    a_loc = loc[tok.uid]
    a_str = (_s(tok)[1], _s(tok)[2])
    if mode == "GATHER":
        gbuf = prog.ws_alloc(rows_total * K * cg.ELEM_SIZE[_dt(tok)])
        gname = f"hdn_moe_gather_{tag}"
        gsrc, gblocks = _gather_source(gname, tok, rows_total, K, T)
        prog.steps.append(("launch", gsrc, gname, (gblocks, 1, 1), (256, 1, 1),
                           [loc[tok.uid], loc[r["token_index"].uid], ("ws", gbuf)]))
        a_loc, a_str = ("ws", gbuf), (K, 1)
    spec = gemm_spec(a_str, tok, w, out, mode, G, E, rows_total, top_k)
    gargs = [loc[off.uid], ("ws", flag), loc[out.uid], ("ws", tiles)]
    if mode == "SCATTER":
        gargs += [loc[r["token_index"].uid], loc[r["token_ks"].uid]]
    if _use_wgmma(prog, _dt(tok), use_mma):
        # the wgmma core's M-grouped tile scheduler: only the groups' tiles are visited
        spec.grouped = 1
        spec.sched = [f"#define WG_SCHED_G {G}", "#define WG_SCHED_OFF moe_off",
                      "#define WG_SCHED_OK (*moe_flag)", "#define WG_SCHED_TILES moe_tiles",
                      "#define WG_A_BATCH(b) 0", f"#define WG_B_BATCH(b) ((b) % {E})"]
        gs = cg.gemm_source(spec, True, sms, "wgmma")
        src, name, grid, block = gs["gemm"]
        ab = [a_loc, loc[w.uid]]
        for op, base in (("A", ab[0]), ("B", ab[1])):
            if op in gs["tmaps"]:
                ab.append(("tmap", base) + tuple(gs["tmaps"][op]))
        # grid: one CTA per SM at most (the scheduler's unit count is known on the device only)
        units = (-(-rows_total // TILE_M) + G) * -(-N // gs["opts"]["tile"][1])
        grid = (max(1, min(units, sms)), 1, 1)
        prog.steps.append(("launch", src, name, grid, block, ab + gargs, gs["opts"]))
        o = gs["opts"]
        prog.notes.append(f"MoE grouped matmul: {G} groups x {rows_total} rows, wgmma core "
                          f"(grouped scheduler), tile {o['tile']}, {o['stages']} stages, "
                          f"TMA {''.join(sorted(gs['tmaps'])) or 'none'}")
        return
    use_mma = _dt(tok) in ("HALF", "BFLOAT16") and use_mma
    core = _portable_core(prog, _dt(tok), use_mma)
    spec.a_dense = spec.b_dense = None
    gs = cg.gemm_source(spec, use_mma, sms=0, core=core)   # sms=0: never split K (groups fill the GPU)
    src, name, grid, block = gs["gemm"]
    hook = ("__device__ __forceinline__ bool hdn_moe_tile_active(HDN_EPI_PARAMS, int b, int m0) {"
            f" if (!*moe_flag) return false; const int lo = moe_off[b];"
            f" const int hi = b + 1 < {G} ? moe_off[b + 1] : {rows_total};"
            f" return m0 < hi && m0 + {cg.TILE} > lo; }}\n"
            "#define HDN_TILE_ACTIVE(b, m0) hdn_moe_tile_active(HDN_EPI_ARGS, b, m0)\n")
    body = cg.read_kernel(f"gemm_{core}.hip")
    src = src.replace(body, hook + body)
    prog.steps.append(("launch", src, name, grid, block, [a_loc, loc[w.uid]] + gargs))
    prog.notes.append(f"MoE grouped matmul: {G} groups x {rows_total} rows, {core} GEMM core")


# --------------------------------------------------------------------------- weight gradient
def check_bwd(node, graph, r):
    for q in ("doutput", "token", "first_token_offset", "dweight"):
        if q not in r:
            raise ValueError(f"{q} missing")
    do, tok, off, dw = (_d(r[q]) for q in ("doutput", "token", "first_token_offset", "dweight"))
    if len(tok) != 3 or tok[0] != 1:
        raise ValueError("token must be [1, tokens, K]")
    if len(do) != 3 or do[:2] != tok[:2]:
        raise ValueError("doutput must be [1, tokens, N]")
    if len(dw) != 3 or dw[1:] != [tok[2], do[2]] or dw[0] < 1:
        raise ValueError("dweight must be [experts, K, N]")
    if off != [dw[0], 1, 1] or _dt(r["first_token_offset"]) != "INT32":
        raise ValueError("first_token_offset must be INT32 [experts, 1, 1]")
    if not all(_dt(r[q]) in FLOATS for q in ("doutput", "token", "dweight")):
        raise ValueError("types")
    return dw[0]


def _bwd_check_source(name, E, T, dw):
    """One block: offsets valid (off[0] = 0, non-decreasing, <= T) -> flag 1; else flag 0 and
    dweight NaN-filled (the CPU engine returns INVALID_VALUE)."""
    To = cg.CTYPE[_dt(dw)]
    n = E * _d(dw)[1] * _d(dw)[2]
    s0, s1, s2 = _s(dw)
    K, N = _d(dw)[1], _d(dw)[2]
    if _dt(dw) == "FLOAT":
        nan = "__uint_as_float(0x7fc00000u)"
        pre = ""
    else:
        pre = f"  {To} nanv; nanv.bits = (hdn_u16){'0x7e00u' if _dt(dw) == 'HALF' else '0x7fc0u'};\n"
        nan = "nanv"
    return HEAD + (
        f'extern "C" __global__ void __launch_bounds__(1024) {name}(const int* __restrict__ off, '
        f'int* __restrict__ flag, {To}* __restrict__ pw) {{\n'
        "  __shared__ int bad;\n"
        "  if (threadIdx.x == 0) bad = 0;\n"
        "  __syncthreads();\n"
        f"  for (int g = threadIdx.x; g < {E}; g += 1024) {{\n"
        f"    const int o = off[g]; if (o < 0 || o > {T} || (g == 0 && o != 0) || (g > 0 && o < off[g - 1])) atomicOr(&bad, 1); }}\n"
        "  __syncthreads();\n"
        "  if (threadIdx.x == 0) *flag = bad ? 0 : 1;\n"
        "  if (!bad) return;\n" + pre +
        f"  for (long long i = threadIdx.x; i < {n}LL; i += 1024) {{\n"
        f"    const long long e = i / {K * N}, k = (i / {N}) % {K}, c = i % {N};\n"
        f"    pw[e * {s0} + k * {s1} + c * {s2}] = {nan};\n"
        "  }\n}\n")


def emit_bwd(prog, graph, node, r, loc, tag, sms, use_mma=True):
    E = check_bwd(node, graph, r)
    do, tok, off, dw = r["doutput"], r["token"], r["first_token_offset"], r["dweight"]
    T, K = _d(tok)[1], _d(tok)[2]
    N = _d(do)[2]
    st1, st2 = _s(tok)[1], _s(tok)[2]
    sd1, sd2 = _s(do)[1], _s(do)[2]
    s0, s1, s2 = _s(dw)
    To = cg.CTYPE[_dt(dw)]
    flag = prog.ws_alloc(4)
    cname = f"hdn_moe_bwd_check_{tag}"
    prog.steps.append(("launch", _bwd_check_source(cname, E, T, dw), cname, (1, 1, 1), (1024, 1, 1),
                       [loc[off.uid], ("ws", flag), loc[dw.uid]]))
    same = _dt(tok) == _dt(do)
    if same and _use_wgmma(prog, _dt(tok), use_mma) and st2 == 1 and sd2 == 1 and K % 8 == 0 \
            and N % 8 == 0 and st1 % 8 == 0 and sd1 % 8 == 0:
        # dweight[e] (K x N) = token[rows]^T (K x rows) . doutput[rows] (rows x N): M = K,
        # N = N, reduction over the expert's rows (K-grouped scheduler); both operands
        # M/N-major gathers (per-row masking at the group's end)
        spec = cg.GemmSpec()
        spec.M, spec.N, spec.K, spec.batch = K, N, T, E
        spec.ta = spec.tb = _dt(tok)
        spec.load_a = f"return (long long)k * {st1} + (long long)m;"
        spec.load_b = f"return (long long)k * {sd1} + (long long)n;"
        spec.a_kcontig = spec.b_kcontig = False
        spec.a_mode = spec.b_mode = 2
        spec.grouped = 2
        spec.sched = [f"#define WG_SCHED_G {E}", "#define WG_SCHED_OFF moe_off",
                      "#define WG_SCHED_OK (*moe_flag)"]
        spec.epi_params = ["const int* __restrict__ moe_off", "const int* __restrict__ moe_flag",
                           f"{To}* __restrict__ moe_dw"]
        spec.store = (f"moe_dw[(long long)b * {s0} + (long long)m * {s1} + (long long)n * {s2}] = "
                      f"hdn_from_float<{To}>(v);")
        if s2 == 1 and N % 8 == 0 and s1 % 8 == 0 and s0 % 8 == 0:
            wr = _write8(_dt(dw), To)
            spec.store8 = f"{To}* p = moe_dw + (long long)b * {s0} + (long long)m * {s1} + n; {wr}"
        gs = cg.gemm_source(spec, True, sms, "wgmma")
        src, name, grid, block = gs["gemm"]
        prog.steps.append(("launch", src, name, grid, block,
                           [loc[tok.uid], loc[do.uid], loc[off.uid], ("ws", flag), loc[dw.uid]],
                           gs["opts"]))
        o = gs["opts"]
        prog.notes.append(f"MoE weight gradient: {E} experts, wgmma core (K-grouped scheduler), "
                          f"tile {o['tile']}, {o['stages']} stages")
        return
    # portable path: one thread per dweight element, fp32 sums over the expert's rows
    Tt, Td = cg.CTYPE[_dt(tok)], cg.CTYPE[_dt(do)]
    n = E * K * N
    name = f"hdn_moe_wgrad_{tag}"
    src = HEAD + (
        f'extern "C" __global__ void __launch_bounds__(256) {name}(const {Tt}* __restrict__ pt, '
        f'const {Td}* __restrict__ pd, const int* __restrict__ off, const int* __restrict__ flag, '
        f'{To}* __restrict__ pw) {{\n'
        "  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;\n"
        f"  if (i >= {n}LL || !*flag) return;\n"
        f"  const int e = (int)(i / {K * N}); const long long k = (i / {N}) % {K}, c = i % {N};\n"
        f"  const int lo = off[e], hi = e + 1 < {E} ? off[e + 1] : {T};\n"
        "  float acc = 0.f;\n"
        f"  for (int r = lo; r < hi; ++r) acc = fmaf(hdn_to_float(pt[(long long)r * {st1} + k * {st2}]), "
        f"hdn_to_float(pd[(long long)r * {sd1} + c * {sd2}]), acc);\n"
        f"  pw[(long long)e * {s0} + k * {s1} + c * {s2}] = hdn_from_float<{To}>(acc);\n"
        "}\n")
    prog.steps.append(("launch", src, name, (max(1, -(-n // 256)), 1, 1), (256, 1, 1),
                       [loc[tok.uid], loc[do.uid], loc[off.uid], ("ws", flag), loc[dw.uid]]))
    prog.notes.append(f"MoE weight gradient: {E} experts, per-element kernel")
