"""GEMM emission shared by matmul and convolution: a family builds the GemmSpec of its node
(operand gathers, sizes, load modes, the output coordinates); :func:`emit` adds the epilogue - a
plain store, or the statements of a fused pointwise run (``ops.pointwise``, the same generator as
the elementwise kernels) - picks the core (gemm_core.choose_core), generates the source
(codegen.gemm_source) and appends the launch steps (split-K: GEMM + reduce).
"""
from __future__ import annotations

from . import codegen as cg
from . import layout
from .gemm_core import choose_core, knob, swap_ab_choice, tma_ok


def dt(t):
    return cg.dtype_name(t.dtype)


def strides(t):
    return [int(s) for s in t.strides]


def aligned(xs, q=8):
    return all(int(v) % q == 0 for v in xs)


def linear(radices, strides):
    """The element stride s of an index decomposed over ``radices`` (slowest first) when its
    offset is linear (index * s): each dim's stride is the next's times the next's size (size-1
    dims ignored); None otherwise."""
    dims_ = [(d, s) for d, s in zip(radices, strides) if d != 1]
    if not dims_:
        return 1
    for (d0, s0), (d1, s1) in zip(dims_, dims_[1:]):
        if s0 != s1 * d1:
            return None
    return dims_[-1][1] if dims_[-1][1] > 0 else None


def prepare(ctx, node, r, tag, tin):
    """Operands the wgmma core cannot read in place (NCHW, TF32 M/N-major) -> workspace copies
    (layout.prepare), for the core the input type ``tin`` gets; returns (roles, that core), the
    core None without a device target."""
    if ctx.arch is None:
        return r, None
    core0 = choose_core(dt(tin), dt(tin), ctx.arch, ctx.use_mma, ctx.tf32)
    r = layout.prepare(ctx.prog, node, r, ctx.loc, tag, core0,
                       (ctx.tf32 and dt(tin) == "FLOAT") or dt(tin) in cg.FP8 or dt(tin) == "INT8", ctx.sms)
    return r, core0


def _c_tma(spec, c_layout, domain, n_dim, out_strides):
    """(sm, sb) when the GEMM output over ``domain`` is element (b, m, n) at b * sb + m * sm + n,
    else None: n unit-stride, then the family's ``c_layout(spec, domain, strides)`` (None: no
    such layout)."""
    st = [v if domain[d] != 1 else 0 for d, v in enumerate(out_strides)]
    if domain[n_dim] > 1 and st[n_dim] != 1:
        return None
    return c_layout(spec, domain, st) if c_layout is not None else None


def _vec_ok(st, domain, n_dim, dtype, run_ok):
    """8 consecutive n (from a multiple of 8) are 8 contiguous, 16-byte aligned elements."""
    if not run_ok or domain[n_dim] % 8 or st[n_dim] != 1:
        return False
    q = 4 if cg.ELEM_SIZE[dtype] == 4 else 8
    return all(v % q == 0 for d, v in enumerate(st) if d != n_dim)


def _store8(coord, ins_lines, stmts, outs, domain, n_dim, run_ok):
    """Body of store_c8: the epilogue for n .. n+7, with one 16-byte store (two for float) per
    output that is contiguous along n, element stores for the others."""
    pre, loop, post = [], [], []
    for u, s, d, var in outs:
        st = [v if domain[dd] != 1 else 0 for dd, v in enumerate(s)]
        if _vec_ok(st, domain, n_dim, d, run_ok):
            if cg.ELEM_SIZE[d] == 1:     # fp8: 8 bytes, one 8-byte store
                pre.append(f"uint2 pk{u}; unsigned char* e{u} = reinterpret_cast<unsigned char*>(&pk{u});")
                loop.append(f"e{u}[j8] = hdn_from_float<{cg.CTYPE[d]}>({var}).bits;")
                post.append(f"*reinterpret_cast<uint2*>(o{u} + {cg.offset_expr(st)}) = pk{u};")
            elif cg.ELEM_SIZE[d] == 2:
                pre.append(f"uint4 pk{u}; hdn_u16* e{u} = reinterpret_cast<hdn_u16*>(&pk{u});")
                loop.append(f"e{u}[j8] = hdn_bits(hdn_from_float<{cg.CTYPE[d]}>({var}));")
                post.append(f"*reinterpret_cast<uint4*>(o{u} + {cg.offset_expr(st)}) = pk{u};")
            else:
                pre.append(f"float4 fa{u}, fb{u}; float* e{u} = &fa{u}.x; float* f{u} = &fb{u}.x;")
                loop.append(f"if (j8 < 4) e{u}[j8] = {var}; else f{u}[j8 - 4] = {var};")
                post.append(f"*reinterpret_cast<float4*>(o{u} + {cg.offset_expr(st)}) = fa{u}; "
                            f"*reinterpret_cast<float4*>(o{u} + {cg.offset_expr(st)} + 4) = fb{u};")
        else:
            loop.append(f"o{u}[{cg.offset_expr(st)}] = hdn_from_float<{cg.CTYPE[d]}>({var});")
    body = pre + ["#pragma unroll", "for (int j8 = 0; j8 < 8; ++j8) { const int nj8 = n + j8; "
                  "{ const int n = nj8; const float v = vv[j8];"] + coord + ins_lines + stmts + \
        loop + ["} }"]
    if post:
        body += ["{"] + coord + post + ["}"]
    return "\n".join(body)


def _epi_inputs(ins, loc, domain):
    """(params, args, C lines) reading a fused run's inputs ``ins`` (ops.pointwise.run_body) at
    the output coordinates c<d>."""
    params, args, lines = [], [], []
    for u, s in ins.items():
        if s[0] == "const":
            lines.append(f"const float x{u} = {cg.flit(s[1])};")
        elif s[0] == "scalar":
            params.append(f"const float p{u}")
            args.append(loc[u])
            lines.append(f"const float x{u} = p{u};")
        else:
            params.append(f"const {cg.CTYPE[s[2]]}* __restrict__ p{u}")
            args.append(loc[u])
            st = [v if domain[d] != 1 else 0 for d, v in enumerate(s[1])]
            lines.append(f"const float x{u} = hdn_to_float(p{u}[{cg.offset_expr(st)}]);")
    return params, args, lines


def swap_ab(spec):
    """Turn ``spec`` into the GEMM of C^T = B^T A^T (gemm_core.swap_ab_choice): M and N, the
    operands' gathers, modes and dense descriptors exchanged; the epilogue (fused ops
    included) still sees the original (m, n) - element stores (consecutive n of the swapped
    GEMM are a column of C), no TMA-store epilogue."""
    spec.M, spec.N = spec.N, spec.M
    spec.ta, spec.tb = spec.tb, spec.ta
    spec.load_a, spec.load_b = "const int n = m; " + spec.load_b, "const int m = n; " + spec.load_a
    spec.a_mode, spec.b_mode = spec.b_mode, spec.a_mode
    spec.a_kcontig, spec.b_kcontig = spec.b_kcontig, spec.a_kcontig
    spec.a_dense, spec.b_dense = spec.b_dense, spec.a_dense
    spec.store = ("const int m_sw = n, n_sw = m; { const int m = m_sw; const int n = n_sw; " +
                  spec.store + " }")
    spec.store8 = None
    spec.c_tma = None
    spec.swapped = True


def _epi_parts(ctx, node, out, domain, fused):
    """The epilogue's pieces for the value ``v`` of ``out`` at the coordinates c<d> over
    ``domain``: (params, launch args, input lines, the fused run's statements, outputs as
    (uid, strides, dtype, variable)) - the fused pointwise run, or a plain store of ``out``."""
    params, args, ins_lines = [], [], []
    if fused:
        ins, stmts, pouts = fused.body(domain, seed=out.uid)
        params, args, ins_lines = _epi_inputs(ins, ctx.loc, domain)
        outs = [(u, s, d, f"v{u}") for u, s, d in pouts]
        ctx.prog.notes.append(f"{node.kind} + {len(fused.members)} pointwise node(s) fused")
    else:
        stmts = []
        outs = [(out.uid, strides(out), dt(out), "v")]
    for u, s, d, var in outs:
        params.append(f"{cg.CTYPE[d]}* __restrict__ o{u}")
        args.append(ctx.loc[u])
    return params, args, ins_lines, stmts, outs


def store_lines(ins_lines, stmts, outs, domain):
    """C lines of the epilogue pieces (:func:`_epi_parts`): the fused run, then one element
    store per output."""
    body = list(ins_lines) + list(stmts)
    for u, s, d, var in outs:
        st = [v if domain[dd] != 1 else 0 for dd, v in enumerate(s)]
        body.append(f"o{u}[{cg.offset_expr(st)}] = hdn_from_float<{cg.CTYPE[d]}>({var});")
    return body


def epilogue(ctx, node, out, domain, fused):
    """(params, launch args, C lines) storing the value ``v`` at the output coordinates c<d>
    of ``out`` over ``domain``: the fused pointwise run's statements and stores, or a plain
    store (a kernel other than the GEMM ending a GEMM-shaped op: ops/conv.py's Winograd
    output transform)."""
    params, args, ins_lines, stmts, outs = _epi_parts(ctx, node, out, domain, fused)
    return params, args, store_lines(ins_lines, stmts, outs, domain)


def _epilogue(ctx, node, spec, built, fused, c_layout):
    """Set ``spec``'s epilogue (store_c / store_c8 and their parameters; the TMA-store value)
    for the output ``built`` and the fused run; returns the epilogue's launch arguments."""
    out, coord, domain, n_dim, run_ok, first = built
    params, args, ins_lines, stmts, outs = _epi_parts(ctx, node, out, domain, fused)
    body = list(coord) + store_lines(ins_lines, stmts, outs, domain)
    spec.epi_params = params
    s8 = spec.ta == "INT8"
    if s8:      # int32 sums (store_c / store_c8 take ints): exact stores, or the float value
        _int_epilogue(spec, coord, ins_lines, stmts, outs, domain, n_dim, run_ok, fused)
    else:
        spec.store = " ".join(body)
    if len(outs) == 1 and not s8 and cg.ELEM_SIZE.get(outs[0][2]) == 2 and run_ok and \
            knob("TMA_STORE", "auto") not in ("0", "off"):
        lay = _c_tma(spec, c_layout, domain, n_dim, outs[0][1])
        if lay is not None:     # the wgmma core's TMA-store epilogue (codegen._c_tma_ok decides)
            spec.c_tma = {"uid": outs[0][0], "dtype": outs[0][2], "sm": lay[0], "sb": lay[1],
                          "value": "\n".join(list(coord) + ins_lines + stmts + [f"return {outs[0][3]};"])}
    if spec.N % 8 == 0 and not s8:
        spec.store8 = _store8(coord, ins_lines, stmts, outs, domain, n_dim, run_ok)
    return args


def emit(ctx, node, spec, built, tag, fused=None, c_layout=None, stats=False):
    """Append the GEMM of ``spec`` to ``ctx.prog``.  ``built``: (output tensor, C lines decoding
    the output coordinates c<d> from (b, m, n), the output's domain, its n dim, whether 8
    consecutive n are one contiguous run, the A and B tensors); ``fused``: a pointwise run
    seeded with the GEMM value (ops.pointwise.Run); ``c_layout``: see :func:`_c_tma`.
    ``stats`` (no fused run; n is the output's channel): the wgmma core also accumulates the
    per-channel sum and sum of squares of the stored output into a zeroed double buffer of the
    plan's scratch (genstats), recorded in ``ctx.stats[out uid]`` for the batchnorm that reads
    it; other cores leave that to the batchnorm's own statistics pass.  INT8 x INT8 specs come
    here only for the s8 wgmma core (:func:`int8_core`)."""
    prog, loc, sms, arch, use_mma, tf32 = ctx.prog, ctx.loc, ctx.sms, ctx.arch, ctx.use_mma, ctx.tf32
    out, first = built[0], built[5]
    args = _epilogue(ctx, node, spec, built, fused, c_layout)
    s8 = spec.ta == "INT8"
    core = "direct" if spec.direct is not None else choose_core(spec.ta, spec.tb, arch, use_mma, tf32)
    if core == "wgmma" and (spec.ta == "FLOAT" or spec.ta in cg.FP8) and 2 in (spec.a_mode, spec.b_mode):
        core = "simt"       # tf32 / fp8 wgmma read K-major operands only
    if core == "wgmma" and s8 and 2 in (spec.a_mode, spec.b_mode):
        # an operand still M/N-major after layout.prepare (a size-1 k dim): element gathers
        spec.a_mode, spec.b_mode = [0 if v == 2 else v for v in (spec.a_mode, spec.b_mode)]
    if core == "wgmma" and (spec.ta in cg.FP8 or s8):
        # 16-byte chunks are 16 one-byte elements: the 8-element checks of the builders are
        # not enough; keep a chunk gather only for operands the tensor copy engine or the
        # precomputed conv addressing (channels % 128) takes - and, s8 only, those the builder
        # found 16-element aligned (GemmSpec.chunk16) - else gather elements
        c16 = spec.chunk16 if s8 else (False, False)
        if spec.a_mode == 1 and not tma_ok(spec.a_dense, spec.ta) and not c16[0] and \
                not (spec.a_rows is not None and spec.a_rows(128)):
            spec.a_mode = 0
        if spec.b_mode == 1 and not tma_ok(spec.b_dense, spec.tb) and not c16[1]:
            spec.b_mode = 0
    if core == "wgmma" and arch is None:
        core = "mma"
    st_loc = None
    if stats and not fused and core == "wgmma" and spec.batch == 1 and not spec.grouped \
            and not spec.wgrad and knob("GENSTATS", "0") not in ("0", "off"):
        st_loc = prog.small_alloc(16 * spec.N)      # double sum[N], sum of squares[N]
        prog.steps.append(("memset", st_loc, 16 * spec.N))
        spec.stats = dt(out)
        spec.epi_params = spec.epi_params + ["double* __restrict__ hdn_st"]
        args = args + [st_loc]
    # swap-AB and the in-kernel split-K sum keep the epilogue's per-column work (genstats,
    # the paired GEMM) out: those plans keep the plain orientation and the finish kernel
    plain = spec.stats is None and spec.pair is None and not s8     # (s8: int32 partial sums)
    if plain and core == "wgmma" and spec.swap_ok and spec.a_mode in (1, 2) and spec.b_mode in (1, 2) and \
            tma_ok(spec.a_dense, spec.ta) and tma_ok(spec.b_dense, spec.tb) and \
            swap_ab_choice(spec.M, spec.N, spec.K, spec.batch, sms, cg.ELEM_SIZE[spec.ta]):
        swap_ab(spec)
        first = (first[1], first[0])
        prog.notes.append(f"{node.kind}: swap-AB (C^T = B^T A^T, M = {spec.M}, N = {spec.N})")
    cnt = None
    if plain and core == "wgmma" and spec.swap_ok and knob("SPLITK_FIXUP", "0") not in ("0", "off"):
        spec.fixup = True
    g = cg.gemm_source(spec, core != "simt", sms, core)
    if g.get("fixup"):
        cnt = prog.small_alloc(g["cnt_bytes"])
        if cnt[0] != "sc":        # the counters must start zeroed: the plan's scratch only
            spec.fixup, cnt = False, None
            g = cg.gemm_source(spec, core != "simt", sms, core)
    if st_loc is not None:
        ctx.stats[out.uid] = st_loc
        prog.notes.append(f"{node.kind}: per-channel sum / sum of squares in the epilogue (genstats)")
    ab = [loc[first[0].uid], loc[first[1].uid]]
    for op, base in (("A", ab[0]), ("B", ab[1])):
        if op in g["tmaps"]:
            ab.append(("tmap", base) + tuple(g["tmaps"][op]))
    if "C" in g["tmaps"]:       # TMA-store epilogue: the output's tensor map (after tmA / tmB)
        ab.append(("tmap", loc[spec.c_tma["uid"]]) + tuple(g["tmaps"]["C"]))
    opts = g["opts"]
    if g["core"] == "wgmma":
        prog.notes.append(f"{node.kind}: wgmma core, tile {opts['tile']}, {opts['stages']} stages, "
                          f"TMA {''.join(sorted(k for k in g['tmaps'] if k in ('A', 'B'))) or 'none'}")
        if opts.get("tstore"):
            prog.notes.append(f"{node.kind}: TMA-store epilogue")
        if g.get("im2col"):
            prog.notes.append(f"{node.kind}: activations on an im2col tensor map "
                              f"({spec.im2col['taps']} taps x {spec.im2col['cb']} channel blocks)")
        if g.get("wgrad"):
            prog.notes.append(f"{node.kind}: backward filter on 4-D tensor maps, position box "
                              f"{spec.wgrad['box'][0]}x{spec.wgrad['box'][1]}")
    if g["split"] > 1 and cnt is not None:
        part = ("ws", prog.ws_alloc(g["part_bytes"]))
        src, name, grid, block = g["gemm"]
        prog.steps.append(("launch", src, name, grid, block, ab + [part, cnt] + args) +
                          ((opts,) if opts else ()))
        prog.notes.append(f"{node.kind}: split-K x{g['split']}, summed in the GEMM kernel")
    elif g["split"] > 1:
        part = ("ws", prog.ws_alloc(g["part_bytes"]))
        src, name, grid, block = g["gemm"]
        prog.steps.append(("launch", src, name, grid, block, ab + [part]) + ((opts,) if opts else ()))
        src, name, grid, block = g["reduce"]
        prog.steps.append(("launch", src, name, grid, block, [part] + args))
        prog.notes.append(f"{node.kind}: split-K x{g['split']}")
    else:
        src, name, grid, block = g["gemm"]
        prog.steps.append(("launch", src, name, grid, block, ab + args) + ((opts,) if opts else ()))


def emit_stats_outputs(ctx, y_uid, C, outs, tag):
    """Per-channel reductions of a GEMM output left to its epilogue's sums (genstats): one small
    kernel writes each ``outs`` entry (tensor, which: 0 = sum, 1 = sum of squares, count: 1, or
    the element count per channel for AVG) from the double sums in ``ctx.stats[y_uid]``,
    rounded to float first as the reduction kernels do."""
    st = ctx.stats[y_uid]
    params, body, args = [], [], [st]
    for k, (t, which, count) in enumerate(outs):
        cs = strides(t)[1]
        ct = cg.CTYPE[dt(t)]
        params.append(f"{ct}* __restrict__ o{k}")
        args.append(ctx.loc[t.uid])
        v = f"st[{which * C} + c]" + (f" / {float(count)!r}" if count != 1 else "")
        body.append(f"o{k}[(long long)c * {cs}] = hdn_from_float<{ct}>((float)({v}));")
    name = f"hdn_genstats_out_{tag}"
    src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void __launch_bounds__(256) {name}(const double* __restrict__ st, {", ".join(params)}) {{
  const int c = blockIdx.x * 256 + threadIdx.x;
  if (c < {C}) {{
    {chr(10).join(body)}
  }}
}}
"""
    ctx.prog.steps.append(("launch", src, name, (-(-C // 256), 1, 1), (256, 1, 1), args))
    ctx.prog.notes.append(f"{len(outs)} per-channel reduction(s) from the GEMM epilogue's sums (genstats)")


def emit_pair(ctx, node, spec, built, b2, u_uid, run, tag):
    """Two GEMMs that share A and read B / ``b2`` (same layout) as ONE wgmma GEMM of twice the
    width: each 128 x BN tile loads BN / 2 columns of B and the same BN / 2 columns of b2
    (tensor maps tmB / tmB2), and its epilogue combines each pair of accumulators with the
    pointwise ``run`` that reads both outputs (SwiGLU: silu(x W_gate) * (x W_up)) - pair_v,
    seeded with the first GEMM's value ``vg`` (output ``built[0]``) and the second's ``vu``
    (tensor ``u_uid``) - storing only the run's one output.  The family checked the layouts
    (ops/matmul.pair_fusable); False (nothing emitted) where they do not hold after all."""
    prog, loc = ctx.prog, ctx.loc
    out, coord, domain, n_dim, run_ok, first = built
    ins, stmts, pouts = run.body(domain, seed={out.uid: "vg", u_uid: "vu"})
    if len(pouts) != 1:
        return False
    z, zs, zd = pouts[0]
    params, args, ins_lines = _epi_inputs(ins, loc, domain)
    st = [v if domain[dd] != 1 else 0 for dd, v in enumerate(zs)]
    params.append(f"{cg.CTYPE[zd]}* __restrict__ o{z}")
    args.append(loc[z])
    spec.epi_params = params
    spec.store = " ".join(list(coord) + [f"o{z}[{cg.offset_expr(st)}] = hdn_from_float<{cg.CTYPE[zd]}>(v);"])
    if spec.N % 8 == 0:
        spec.store8 = _store8(coord, [], [], [(z, zs, zd, "v")], domain, n_dim, run_ok)
    spec.pair = {"value": "\n".join(list(coord) + ins_lines + stmts + [f"return v{z};"])}
    spec.N *= 2
    g = cg.gemm_source(spec, True, ctx.sms, "wgmma")
    if "B" not in g["tmaps"] or "B2" not in g["tmaps"]:
        return False
    ab = [loc[first[0].uid], loc[first[1].uid]]
    if "A" in g["tmaps"]:
        ab.append(("tmap", ab[0]) + tuple(g["tmaps"]["A"]))
    ab.append(("tmap", ab[1]) + tuple(g["tmaps"]["B"]))
    ab.append(("tmap", loc[b2.uid]) + tuple(g["tmaps"]["B2"]))
    opts = g["opts"]
    src, name, grid, block = g["gemm"]
    prog.steps.append(("launch", src, name, grid, block, ab + args, opts))
    prog.notes.append(f"{node.kind} x 2 + {len(run.members)} pointwise node(s) fused: one paired GEMM "
                      f"(tile {opts['tile']}, {opts['stages']} stages; columns n and n + {spec.N // 2} "
                      f"in one block)")
    return True


# int value of an INT32 / INT8 output from the exact int32 sum ``v`` (INT8: saturated)
INT_STORE = {"INT32": "{v}", "INT8": "(signed char)({v} < -128 ? -128 : ({v} > 127 ? 127 : {v}))"}


def _int_epilogue(spec, coord, ins_lines, stmts, outs, domain, n_dim, run_ok, fused):
    """store_c / store_c8 of an s8 GEMM (int ``v`` / ``vv``): an INT32 / INT8 output without a
    fused run stores the exact sum (INT8 saturated); otherwise the run (or a FLOAT / 16-bit
    output) starts from the sum converted to float (round to nearest), as the CPU reference's
    float32 node reading a FLOAT c."""
    exact = not fused and outs[0][2] in INT_STORE
    if exact:
        u, s, d, _ = outs[0]
        st = [x if domain[dd] != 1 else 0 for dd, x in enumerate(s)]
        val = INT_STORE[d]
        spec.store = " ".join(list(coord) + [f"o{u}[{cg.offset_expr(st)}] = {val.format(v='v')};"])
        if spec.N % 8 == 0:
            es = cg.ELEM_SIZE[d]
            if _vec_ok(st, domain, n_dim, d, run_ok):     # 8 / 32 contiguous bytes per 8 n
                w = "uint2" if es == 1 else "uint4"
                stores = [f"*reinterpret_cast<{w}*>(o{u} + {cg.offset_expr(st)}) = pk.w[0];"]
                if es == 4:
                    stores.append(f"*reinterpret_cast<uint4*>(o{u} + {cg.offset_expr(st)} + 4) = pk.w[1];")
                spec.store8 = "\n".join(
                    [f"union {{ {cg.CTYPE[d]} e[8]; {w} w[{2 if es == 4 else 1}]; }} pk;", "#pragma unroll",
                     f"for (int j8 = 0; j8 < 8; ++j8) pk.e[j8] = {val.format(v='vv[j8]')};"] +
                    ["{"] + list(coord) + stores + ["}"])
            else:
                spec.store8 = "\n".join(["#pragma unroll", "for (int j8 = 0; j8 < 8; ++j8) { const int nj8 = n + j8; "
                                          "{ const int n = nj8; const int v = vv[j8];"] + list(coord) +
                                         [f"o{u}[{cg.offset_expr(st)}] = {val.format(v='v')};", "} }"])
        return
    body = list(coord) + ["const float v = (float)iv;"] + ins_lines + stmts
    for u, s, d, var in outs:
        st = [x if domain[dd] != 1 else 0 for dd, x in enumerate(s)]
        body.append(f"o{u}[{cg.offset_expr(st)}] = hdn_from_float<{cg.CTYPE[d]}>({var});")
    spec.store = "const int iv = v; { " + " ".join(body) + " }"     # the float v shadows the int
    if spec.N % 8 == 0:
        spec.store8 = _store8(coord, ins_lines, stmts, outs, domain, n_dim, run_ok)


# --------------------------------------------------------------------------- INT8 GEMM
# INT8 x INT8 on the integer tensor cores (WMMA m16n16k16 s8, NVIDIA only), int32 accumulation:
# a 32 x 32 output tile per block of four warps, both operands gathered through the family's
# ``a_off`` / ``b_off`` (GemmSpec.load_a / load_b: strided matmul operands, implicit-GEMM
# convolution taps) into shared memory, k steps of 16.  Output INT32, FLOAT (rounded to
# nearest) or INT8 (saturated); no epilogue fusion.
INT8_OUT = {"INT32": "v", "FLOAT": "(float)v", "INT8": "(signed char)(v < -128 ? -128 : (v > 127 ? 127 : v))"}


INT8_BODY = """extern "C" __global__ void __launch_bounds__(128) NAME(const signed char* __restrict__ A,
    const signed char* __restrict__ B, TC* __restrict__ C) {
  using namespace nvcuda;
  __shared__ __align__(32) signed char As[32 * 16];   // [m][k]: row-major, ld 16
  __shared__ __align__(32) signed char Bs[32 * 16];   // [n][k]: k x n column-major, ld 16
  __shared__ __align__(32) int Cs[32 * 32];           // [m][n]
  const int b = blockIdx.z;
  const int m0 = blockIdx.y * 32, n0 = blockIdx.x * 32;
  const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc;
  wmma::fill_fragment(acc, 0);
  for (int k0 = 0; k0 < GK; k0 += 16) {
    for (int i = threadIdx.x; i < 512; i += 128) {
      const int r = i / 16, k = k0 + i % 16;
      const int m = m0 + r, n = n0 + r;
      const long long oa = (m < GM && k < GK) ? a_off(b, m, k) : -1;
      const long long ob = (n < GN && k < GK) ? b_off(b, k, n) : -1;
      As[i] = oa < 0 ? (signed char)0 : A[oa];
      Bs[i] = ob < 0 ? (signed char)0 : B[ob];
    }
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, As + wm * 256, 16);
    wmma::load_matrix_sync(fb, Bs + wn * 256, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    __syncthreads();
  }
  wmma::store_matrix_sync(Cs + wm * 16 * 32 + wn * 16, acc, 32, wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < 1024; i += 128) {
    const int m = m0 + i / 32, n = n0 + i % 32;
    if (m < GM && n < GN) C[c_off(b, m, n)] = c_val(Cs[i]);
  }
}
"""


def int8_core(ctx):
    """'wgmma' (Hopper: the s8 wgmma core through :func:`emit`) or 'wmma' (the INT8 WMMA
    kernel, :func:`emit_int8`) for an INT8 x INT8 GEMM on ``ctx``'s device."""
    return choose_core("INT8", "INT8", ctx.arch, ctx.use_mma, ctx.tf32)


def int8_source(name, spec, built, epi=False):
    """(source, grid, block) of the INT8 GEMM of ``spec`` (M, N, K, batch, load_a, load_b) with
    the output ``built`` as :func:`emit` takes it.  ``epi``: the epilogue is ``spec``'s
    generated store_c (int sum; a fused run: :func:`_epilogue`) instead of the plain store."""
    out, coord, domain = built[0], built[1], built[2]
    st = [v if domain[d] != 1 else 0 for d, v in enumerate(strides(out))]
    M, N, K = spec.M, spec.N, spec.K
    tc = cg.CTYPE[dt(out)]
    if epi:
        src = f"""#define HDN_GENERATED 1
#include <mma.h>
#include "hdn_compat.h"
{cg.PRELUDE_MATH}
#define GM {M}
#define GN {N}
#define GK {K}
#define GBATCH {max(1, spec.batch)}
#define HDN_EPI_PARAMS {", ".join(spec.epi_params)}
#define HDN_EPI_ARGS {", ".join(p.split()[-1] for p in spec.epi_params)}
__device__ __forceinline__ long long a_off(int b, int m, int k) {{ {spec.load_a} }}
__device__ __forceinline__ long long b_off(int b, int k, int n) {{ {spec.load_b} }}
__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, int v) {{ {spec.store} }}
""" + INT8_BODY.replace("NAME", name).replace("TC* __restrict__ C)", "HDN_EPI_PARAMS)").replace(
            "C[c_off(b, m, n)] = c_val(Cs[i]);", "store_c(HDN_EPI_ARGS, b, m, n, Cs[i]);")
        return src, ((N + 31) // 32, (M + 31) // 32, max(1, spec.batch)), (128, 1, 1)
    # the prelude (sizes, gathers, output offset and conversion: what host emulation runs under
    # a serial loop), then the WMMA body
    src = f"""#define HDN_GENERATED 1
#include <mma.h>
#include "hdn_compat.h"
#define GM {M}
#define GN {N}
#define GK {K}
#define GBATCH {max(1, spec.batch)}
typedef {tc} TC;
__device__ __forceinline__ long long a_off(int b, int m, int k) {{ {spec.load_a} }}
__device__ __forceinline__ long long b_off(int b, int k, int n) {{ {spec.load_b} }}
__device__ __forceinline__ long long c_off(int b, int m, int n) {{ {" ".join(coord)} return {cg.offset_expr(st)}; }}
__device__ __forceinline__ TC c_val(int v) {{ return {INT8_OUT[dt(out)]}; }}
""" + INT8_BODY.replace("NAME", name)
    return src, ((N + 31) // 32, (M + 31) // 32, max(1, spec.batch)), (128, 1, 1)


def emit_int8(ctx, spec, built, tag, node=None, fused=None):
    """Append the INT8 WMMA GEMM of ``spec`` (the family has checked: NVIDIA target, batch <=
    65535); ``fused``: a pointwise run on the float value of the sum (the generated epilogue)."""
    name = f"hdn_s8_{tag}"
    a, b = built[5]
    if fused:
        spec.ta = spec.tb = "INT8"
        args = _epilogue(ctx, node, spec, built, fused, None)
        src, grid, block = int8_source(name, spec, built, epi=True)
        ctx.prog.steps.append(("launch", src, name, grid, block, [ctx.loc[a.uid], ctx.loc[b.uid]] + args))
        return
    src, grid, block = int8_source(name, spec, built)
    ctx.prog.steps.append(("launch", src, name, grid, block,
                           [ctx.loc[a.uid], ctx.loc[b.uid], ctx.loc[built[0].uid]]))
