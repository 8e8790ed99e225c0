"""Batchnorm nodes.  Inference (also with variance + epsilon): one elementwise kernel.  Training
forward: memset + per-channel statistics + finalize (mean, inverse variance, running statistics,
the affine A / B per channel) + apply (4 stream operations).  Backward: memset + per-channel sums
+ finalize (dscale, dbias, coefficients) + apply.  Statistics accumulate in double in the plan's
scratch (atomics of per-block float sums).

Channels-last x (NHWC and every packed layout with the channel innermost, viewed as [rows, C];
not DOUBLE data): no memset, no atomics - hdn_bn_cl_part reads the tensor once with coalesced
16-byte loads (16-byte aligned buffers, as every kernel of the engine takes: program.py declines
a lower declared alignment, the engine checks the bound pointers) (a warp reads up to 32 consecutive 16-byte vectors of a row; a thread owns one
vector of 8 (16-bit) / 4 (float) channels, or one channel when C does not divide), sums its rows
in float registers (4 rows' loads in flight), the block sums its rows with hdn_reduce.h's
hdn_block_colsum (fixed order) and writes one float partial per channel and slab:
part[slab][2C].  The finish (hdn_bn_finalize / hdn_bn_bwd_finish, 32 channels x 8 lanes per
block) sums the slabs in double in a fixed order: deterministic.  The backward's apply then
reads dy and x as 16-byte vectors and writes dx likewise (the elementwise kernel when dx is
not channels-last too); the training apply y = x * A + B likewise when no pointwise run is
fused into it.
Cost, fp16 NHWC 32x256x56x56 (rows = 100352, 25.7 MB per tensor) on 132 SMs: 264 blocks of
256 threads (2 per SM, each thread 48 rows, 8 x 16 B loads in flight: ~8.6 MB in flight in
all), partials 264 x 512 x 4 B = 0.54 MB; backward = 51.4 MB read (sums) + 0.54 MB x 2
(partials) + 77 MB (apply: dy, x read, dx written; 12544 blocks, ~12 waves) ~ 130 MB ~ 45 us at
3 TB/s (the generic path read NHWC with one channel per block: 2-byte loads 512 B apart);
training forward = 25.7 MB (statistics) + 51.4 MB (apply) ~ 26 us.

A pointwise run that follows an inference or training forward node (BN -> ReLU, BN -> add of a
residual -> ReLU) is fused into the elementwise kernel that normalises (inference) or applies
(training): the run's statements (ops/pointwise.py, the generator every elementwise kernel
uses) take the normalised value in registers; y is stored only where a graph tensor or read
by another unit.
"""
from __future__ import annotations

import math

from .. import codegen as cg
from ..gemm_core import knob
from ..codegen import EwIn, EwOut
from ._base import (_need, check_tensors, check_types, dims, dt, kinds, no_fp8, op, scalar_arg,
                    strides)

KINDS = kinds("batchnorm")
TRAIN, BWD = "BatchnormAttributes", "BatchnormBackwardAttributes"
# the scalar roles (epsilon, momentum) may be runtime pass-by-value scalars: the kernels take
# them as by-value float arguments
RUNTIME_SCALARS = {k: op(k).scalar_roles for k in KINDS if op(k).scalar_roles}
# roles the catalog leaves optional that these kernels read: the saved statistics (backward)
NEEDED = {BWD: frozenset({"mean", "inv_variance"})}


def check(node, graph, r):
    o = op(node.kind)
    # inference is one elementwise kernel: signed offsets, negative strides too
    check_tensors(node, r, RUNTIME_SCALARS.get(node.kind, ()), negative=node.kind not in (TRAIN, BWD))
    no_fp8(r)
    # DOUBLE data: every kernel in double (the CPU reference's float64)
    check_types(node, r, extra=("DOUBLE",))
    _need(not any(node.attrs.get(o.role(a).field) for a in o.arrays), "peer stats not supported")
    optional = o.optional - NEEDED.get(node.kind, frozenset())
    missing = [q for q in o.inputs + o.outputs if q not in optional and q not in r]
    _need(not missing, f"{node.kind}: tensors {missing} missing")
    x = r["x"]
    yrole = "dx" if node.kind == BWD else "y"
    _need(len(x.dims) >= 2 and dims(r[yrole]) == dims(x), "batchnorm shapes")
    if node.kind == BWD:
        _need(dims(r["dy"]) == dims(x), "batchnorm backward dy shape")
    C = dims(x)[1]
    per_element = o.roles_of("data") + o.roles_of("out")
    for role, t in r.items():
        if role in o.scalar_roles:
            _need(t.numel == 1, f"batchnorm {role} must be a 1-element tensor")
        elif role not in per_element:
            _need(t.numel == C and t.value is None, f"batchnorm {role} must hold C elements")
    if node.kind == TRAIN:
        run = [x in r for x in ("prev_running_mean", "prev_running_variance", "momentum")]
        nxt = [x in r for x in ("next_running_mean", "next_running_variance")]
        _need(all(run) or not any(nxt), "running stats need prev stats and momentum")


# a fused run lands in an elementwise kernel: it may store y as well as the run's outputs (y
# need not be virtual) and read other units' outputs (program.py keeps the fused unit acyclic)
ELEMENTWISE_FUSION = True


def emit(ctx, node, r, tag, fused=None):
    """``fused``: a following pointwise run (ops.pointwise.Run) computed on the normalised
    value in the inference / training apply kernel."""
    if fused:
        ctx.prog.notes.append(f"{node.kind} + {len(fused.members)} pointwise node(s) fused")
    if node.kind == TRAIN:
        _emit_bn_train(ctx.prog, ctx.graph, r, ctx.loc, tag, fused, ctx.stats.get(r["x"].uid), ctx.sms)
    elif node.kind == BWD:
        _emit_bn_bwd(ctx.prog, ctx.graph, r, ctx.loc, tag, ctx.sms)
    else:
        _emit_bn_inf(ctx.prog, ctx.graph, r, ctx.loc, tag, fused)


def fusable_output(node, r):
    """y of an inference / training forward node: a following pointwise run may be fused into
    the kernel that computes it (not for DOUBLE batchnorm: its kernels compute in double, a fused
    run's seed value is a float)."""
    return None if node.kind == BWD or _wide(r) else r["y"].uid


def _launch_y(prog, name, domain, ins, args, stmts, y, loc, fused, wide=False):
    """The elementwise kernel computing ``yv`` (``stmts``) for every element of ``domain``,
    storing y - or, with a fused pointwise run, running it on yv (rounded to y's type, as a
    stored y would be) and storing its outputs, and y where it is still needed."""
    ins, args = list(ins), list(args)
    outs = [EwOut("yv", dt(y), strides(y), "py", wide=wide)]
    oargs = [loc[y.uid]] if not fused or fused.stored(y) else []
    _need(not (fused and wide), "DOUBLE batchnorm with a fused pointwise run")
    if fused:
        stmts = stmts + [f"const float v = {'yv' if dt(y) == 'FLOAT' else f'hdn_round<{cg.CTYPE[dt(y)]}>(yv)'};"]
        f_ins, f_args, f_stmts, f_outs, f_oargs = fused.elementwise(domain, loc, seed=y.uid)
        ins += f_ins
        args += f_args
        stmts = stmts + f_stmts
        outs = f_outs + (outs if fused.stored(y) else [])
        oargs = f_oargs + oargs
        _need(outs, "batchnorm with a fused pointwise run writes nothing")
    order = cg.dense_order(domain, outs[0].strides)
    src, grid, block = cg.elementwise_source(name, domain, order, ins, stmts, outs)
    prog.steps.append(("launch", src, name, grid, block, args + oargs))


def _wide(r):
    """DOUBLE tensors: the kernels compute in double."""
    return any(dt(t) == "DOUBLE" for t in r.values() if t.value is None)


def _chan_in(t, domain, var, loc, ins, args, wide=False):
    s = cg.per_channel_strides(t, domain)
    _need(s is not None, f"tensor {t.uid}: per-channel layout")
    ins.append(EwIn(var, dt(t), s, param=f"p_{var}", wide=wide))
    args.append(loc[t.uid])


def _emit_bn_inf(prog, graph, r, loc, tag, fused=None):
    """y = (x - mean) * inv_variance * scale + bias; with ``variance`` (the VarianceExt node)
    inv_variance = 1 / sqrt(variance + epsilon), epsilon baked, a device scalar or a runtime
    pass-by-value one."""
    x, y = r["x"], r["y"]
    domain = dims(x)
    wide = _wide(r)
    ins, args = [EwIn("xv", dt(x), strides(x), param="px", wide=wide)], [loc[x.uid]]
    var = "variance" in r
    for role, v in (("mean", "mu"), ("variance" if var else "inv_variance", "iv"),
                    ("scale", "sc"), ("bias", "bi")):
        _chan_in(r[role], domain, v, loc, ins, args, wide)
    if var:
        e = r["epsilon"]
        ev = _scalar(e)
        if ev is not None:
            ins.append(EwIn("ep", const=ev, wide=wide))
        elif e.is_runtime_pass_by_value:
            ctype, src = scalar_arg(e, loc, wide)
            ins.append(EwIn("ep", scalar=True, param="p_ep", wide=ctype == "double"))
            args.append(src)
        else:
            ins.append(EwIn("ep", dt(e), [0] * len(domain), param="p_ep", wide=wide))
            args.append(loc[e.uid])
        stmts = ["const float yv = (xv - mu) * (1.0f / sqrtf(iv + ep)) * sc + bi;"]
    else:
        stmts = ["const float yv = (xv - mu) * iv * sc + bi;"]
    if wide:     # the CPU reference's float64 order: (x - mean) * (inv_variance * scale) + bias
        stmts = ["const double yv = (xv - mu) * ((1.0 / sqrt(iv + (double)ep)) * sc) + bi;" if var
                 else "const double yv = (xv - mu) * (iv * sc) + bi;"]
    _launch_y(prog, f"hdn_bn_inf_{tag}", domain, ins, args, stmts, y, loc, fused, wide)


def _scalar(t):
    if t is None:
        return None
    v = t.value
    if v is None:
        return None
    return float(v[0] if isinstance(v, (list, tuple)) else v)


def stats_wanted(node, r):
    """x of a training forward node: the tensor whose per-channel sum and sum of squares a
    producing GEMM's epilogue may accumulate for it (genstats; not for DOUBLE data)."""
    return r["x"].uid if node.kind == TRAIN and not _wide(r) else None


def _emit_bn_train(prog, graph, r, loc, tag, fused=None, sums=None, sms=132):
    """``sums``: where the kernel that wrote x accumulated its per-channel sum and sum of
    squares (double [2 C], gemm.emit ``stats``): then no statistics pass of its own."""
    x, y = r["x"], r["y"]
    domain = dims(x)
    C = domain[1]
    M = math.prod(domain) // max(1, C)
    xs = strides(x)
    # channels-last packed: x viewed as [M, C]
    cl = xs[1] == 1 and cg.is_dense(domain, xs) and cg.dense_order(domain, xs)[-1] == 1
    wide = _wide(r)
    cb = 8 if wide else 4
    clk = cl and not wide and bn_cl_on()
    ws = sums if sums is not None or clk else prog.small_alloc(16 * C)   # double sum[C], sumsq[C]
    ab = prog.small_alloc(2 * cb * C)    # A[C], B[C] (float; double with DOUBLE tensors)
    slabs = None
    if sums is not None:
        prog.notes.append(f"{TRAIN}: statistics from the producing GEMM's epilogue (no statistics pass)")
    elif clk:
        # channels-last: partial sums per slab of rows (coalesced 16-byte loads), summed in the
        # finalize kernel - no memset, no atomics
        geo = ClGeometry(C, M, [dt(x)], sms)
        slabs = geo.slabs
        ws = prog.small_alloc(geo.part_bytes())
        src, grid, block = bn_cl_part_source(geo, dt(x))
        prog.steps.append(("launch", src, "hdn_bn_cl_part", grid, block, [loc[x.uid], ws]))
    else:
        prog.steps.append(("memset", ws, 16 * C))
        src, grid, block = bn_stats_source(x, C, cl, M, wide)
        prog.steps.append(("launch", src, "hdn_bn_stats", grid, block, [loc[x.uid], ws]))
    outs = [ro for ro in ("mean", "inv_variance", "next_running_mean", "next_running_variance") if ro in r]
    eps, mom = _scalar(r.get("epsilon")), _scalar(r.get("momentum"))
    run = "next_running_mean" in outs or "next_running_variance" in outs
    sptr = {}
    fargs = [ws, ab, loc[r["scale"].uid], loc[r["bias"].uid]]
    if run:
        fargs += [loc[r["prev_running_mean"].uid], loc[r["prev_running_variance"].uid]]
    for ro in ("mean", "inv_variance", "next_running_mean", "next_running_variance"):
        if ro in r:
            fargs.append(loc[r[ro].uid])
    # a scalar without a baked value: a runtime pass-by-value scalar (host, passed by value
    # as a kernel argument: "ARG", "ARG double" for a DOUBLE one the double kernels read) or a
    # 1-element device tensor (pointer)
    for role, v in (("epsilon", eps), ("momentum", mom if run else 0.0)):
        if v is None:
            t = r[role]
            if t.is_runtime_pass_by_value:
                ctype, src = scalar_arg(t, loc, wide)
                sptr[role] = "ARG" if ctype == "float" else "ARG double"
                fargs.append(src)
            else:
                sptr[role] = cg.CTYPE[dt(t)]
                fargs.append(loc[t.uid])
    ptypes = {q: dt(r[q]) for q in ("scale", "bias", "prev_running_mean", "prev_running_variance",
                                     "mean", "inv_variance", "next_running_mean",
                                     "next_running_variance") if q in r}
    src, grid, block = bn_finalize_source(C, M, ptypes, eps, mom, outs, sptr, wide, slabs)
    prog.steps.append(("launch", src, "hdn_bn_finalize", grid, block, fargs))
    # apply: y = x * A[c] + B[c]
    if not fused and clk and strides(y) == xs:
        name = f"hdn_bn_apply_{tag}"
        geo = ClGeometry(C, M, [dt(x), dt(y)], sms)
        src, grid, block = bn_cl_train_apply_source(name, geo, dt(x), dt(y))
        prog.steps.append(("launch", src, name, grid, block, [loc[x.uid], ab, loc[y.uid]]))
        return
    cs = [0] * len(domain)
    cs[1] = 1
    ct = "DOUBLE" if wide else "FLOAT"
    ins = [EwIn("xv", dt(x), xs, param="px", wide=wide), EwIn("fa", ct, cs, param="pa"),
           EwIn("fb", ct, cs, param="pb")]
    _launch_y(prog, f"hdn_bn_apply_{tag}", domain, ins, [loc[x.uid], ab, (ab[0], ab[1] + cb * C)],
              ["const double yv = fma(xv, fa, fb);" if wide else "const float yv = fmaf(xv, fa, fb);"],
              y, loc, fused, wide)


def _emit_bn_bwd(prog, graph, r, loc, tag, sms=132):
    """dbias = sum(dy), dscale = sum(dy * xhat), dx = scale * iv * (dy - dbias / M -
    xhat * dscale / M) with xhat = (x - mean) * iv: memset + sums + finalize + apply."""
    x, dy, dx = r["x"], r["dy"], r["dx"]
    domain = dims(x)
    C = domain[1]
    M = math.prod(domain) // max(1, C)
    wide = _wide(r)
    cb = 8 if wide else 4           # coefficient bytes: double with DOUBLE tensors
    ms, ivs = cg.per_channel_strides(r["mean"], domain), cg.per_channel_strides(r["inv_variance"], domain)
    _need(ms is not None and ivs is not None, "batchnorm backward: per-channel layout")
    if not wide and bn_cl_on() and channels_last(x) and strides(dy) == strides(x):
        _emit_bn_bwd_cl(prog, r, loc, tag, sms, ms[1] if C > 1 else 0, ivs[1] if C > 1 else 0)
        return
    ws = prog.small_alloc(16 * C)   # double sum(dy)[C], sum(dy * xhat)[C]
    co = prog.small_alloc(5 * cb * C)   # mean, iv, scale*iv, dbias/M, dscale/M [C each]
    prog.steps.append(("memset", ws, 16 * C))
    src, grid, block = bn_bwd_sums_source(x, dy, r["mean"], r["inv_variance"], C, domain, wide)
    prog.steps.append(("launch", src, "hdn_bn_bwd_sums", grid, block,
                       [loc[dy.uid], loc[x.uid], loc[r["mean"].uid], loc[r["inv_variance"].uid],
                        ws]))
    src, grid, block = bn_bwd_finalize_source(C, M, r, wide)
    prog.steps.append(("launch", src, "hdn_bn_bwd_finalize", grid, block,
                       [ws, co, loc[r["mean"].uid], loc[r["inv_variance"].uid],
                        loc[r["scale"].uid], loc[r["dscale"].uid], loc[r["dbias"].uid]]))
    _bn_bwd_apply(prog, r, loc, tag, co, cb, wide)


def _bn_bwd_apply(prog, r, loc, tag, co, cb, wide):
    """dx = a * (dy - k1 - (x - mu) * iv * k2): the elementwise kernel over any layout."""
    x, dy, dx = r["x"], r["dy"], r["dx"]
    domain = dims(x)
    C = domain[1]
    cs = [0] * len(domain)
    cs[1] = 1
    ins = [EwIn("dyv", dt(dy), strides(dy), param="pdy", wide=wide),
           EwIn("xv", dt(x), strides(x), param="px", wide=wide)]
    args = [loc[dy.uid], loc[x.uid]]
    for k, var in enumerate(("mu", "iv", "a", "k1", "k2")):
        ins.append(EwIn(var, "DOUBLE" if wide else "FLOAT", cs, param=f"p_{var}"))
        args.append((co[0], co[1] + cb * C * k))
    name = f"hdn_bn_bwd_apply_{tag}"
    src, grid, block = cg.elementwise_source(
        name, domain, cg.dense_order(domain, strides(dx)), ins,
        [f"const {'double' if wide else 'float'} dxv = a * (dyv - k1 - (xv - mu) * iv * k2);"],
        [EwOut("dxv", dt(dx), strides(dx), "pdx", wide=wide)])
    args.append(loc[dx.uid])
    prog.steps.append(("launch", src, name, grid, block, args))


def _emit_bn_bwd_cl(prog, r, loc, tag, sms, mstride, istride):
    """Channels-last x and dy: hdn_bn_cl_part (partial sums per slab of rows, 16-byte loads)
    + hdn_bn_bwd_finish (partials summed per channel, dbias, dscale, coefficients) + the apply
    (16-byte vectors when dx is channels-last too, else the elementwise kernel)."""
    x, dy, dx = r["x"], r["dy"], r["dx"]
    domain = dims(x)
    C = domain[1]
    M = math.prod(domain) // max(1, C)
    same = channels_last(dx) and strides(dx) == strides(x)
    geo = ClGeometry(C, M, [dt(x), dt(dy)] + ([dt(dx)] if same else []), sms)
    part = prog.small_alloc(geo.part_bytes())
    co = prog.small_alloc(5 * 4 * C)    # mean, iv, scale*iv, dbias/M, dscale/M [C each]
    src, grid, block = bn_cl_part_source(geo, dt(x), dt(dy), dt(r["mean"]), dt(r["inv_variance"]),
                                         mstride, istride)
    prog.steps.append(("launch", src, "hdn_bn_cl_part", grid, block,
                       [loc[dy.uid], loc[x.uid], loc[r["mean"].uid], loc[r["inv_variance"].uid], part]))
    src, grid, block = bn_bwd_finish_source(C, M, r, geo.slabs)
    prog.steps.append(("launch", src, "hdn_bn_bwd_finish", grid, block,
                       [part, co, loc[r["mean"].uid], loc[r["inv_variance"].uid],
                        loc[r["scale"].uid], loc[r["dscale"].uid], loc[r["dbias"].uid]]))
    if not same:
        _bn_bwd_apply(prog, r, loc, tag, co, 4, False)
        return
    name = f"hdn_bn_bwd_apply_{tag}"
    src, grid, block = bn_cl_apply_source(name, geo, dt(dy), dt(x), dt(dx))
    prog.steps.append(("launch", src, name, grid, block, [loc[dy.uid], loc[x.uid], co, loc[dx.uid]]))


# --------------------------------------------------------------------------- training sources
def bn_stats_source(x, C, channels_last, rows, wide=False):
    """Per-channel sum and sum of squares into double ws[0:C], ws[C:2C] (zeroed before);
    ``wide``: per-thread sums in double too (DOUBLE data), else float."""
    A, ld, z, fma = ("double", "hdn_to_double", "0.0", "fma") if wide else \
        ("float", "hdn_to_float", "0.f", "fmaf")
    T = cg.CTYPE[cg.dtype_name(x.dtype)]
    dims, strides = [int(d) for d in x.dims], [int(s) for s in x.strides]
    if channels_last:
        # x viewed as [rows, C] with row stride C (packed NHWC-like)
        src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void __launch_bounds__(256) hdn_bn_stats(const {T}* __restrict__ x, double* __restrict__ ws) {{
  __shared__ {A} ss[8][33], sq[8][33];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const int c = blockIdx.x * 32 + tx;
  {A} s = {z}, q = {z};
  if (c < {C}) {{
    for (long long r = (long long)blockIdx.y * 8 + ty; r < {rows}; r += (long long)gridDim.y * 8) {{
      const {A} v = {ld}(x[r * {C} + c]);
      s += v; q = {fma}(v, v, q);
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
  __shared__ {A} ss[256], sq[256];
  const int c = blockIdx.x;
  const {T}* xc = x + (long long)c * {strides[1]};
  {A} s = {z}, q = {z};
  for (long long e = (long long)blockIdx.y * 256 + threadIdx.x; e < {per}; e += (long long)gridDim.y * 256) {{
    {' '.join(lines)}
    const {A} v = {ld}(xc[{offs}]);
    s += v; q = {fma}(v, v, q);
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


def bn_finalize_source(C, M, ptypes, eps, mom, outs, scalar_ptrs, wide=False, slabs=None):
    """One thread per channel: mean/inv_variance (+ running stats) and the affine
    (A_c, B_c) used by the apply pass.  ``ptypes``: role -> data type of each per-channel tensor
    (each may be the data type or FLOAT: mixed precision).  ``outs``: roles present among mean,
    inv_variance, next_running_mean, next_running_variance.  ``eps``/``mom``: float constants or
    None (then by-value arguments or device pointers ``eps_p`` / ``mom_p``).  ``slabs``: the sums
    come as hdn_bn_cl_part's float partials part[slabs][2C] (summed here, 32 channels x 8 lanes
    per block) instead of double ws[2C]."""
    T = {q: cg.CTYPE[v] for q, v in ptypes.items()}
    params = [f"const double* __restrict__ ws", "float* __restrict__ ab",
              f"const {T['scale']}* __restrict__ scale", f"const {T['bias']}* __restrict__ bias"]
    run = "next_running_mean" in outs or "next_running_variance" in outs
    if run:
        params += [f"const {T['prev_running_mean']}* __restrict__ prm",
                   f"const {T['prev_running_variance']}* __restrict__ prv"]
    for r in ("mean", "inv_variance", "next_running_mean", "next_running_variance"):
        if r in outs:
            params.append(f"{T[r]}* __restrict__ o_{r}")
    eps_e = cg.flit(eps) if eps is not None else "hdn_to_float(eps_p[0])"
    mom_e = (cg.flit(mom) if mom is not None else "hdn_to_float(mom_p[0])") if run else "0.f"
    # "ARG" / "ARG double": a runtime pass-by-value scalar, passed by value as a float / double
    # (read from the host at execute)
    if eps is None:
        if scalar_ptrs["epsilon"].startswith("ARG"):
            params.append(f"const {'double' if scalar_ptrs['epsilon'] == 'ARG double' else 'float'} eps_p")
            eps_e = "eps_p"
        else:
            params.append(f"const {scalar_ptrs['epsilon']}* __restrict__ eps_p")
    if run and mom is None:
        if scalar_ptrs["momentum"].startswith("ARG"):
            params.append(f"const {'double' if scalar_ptrs['momentum'] == 'ARG double' else 'float'} mom_p")
            mom_e = "mom_p"
        else:
            params.append(f"const {scalar_ptrs['momentum']}* __restrict__ mom_p")
    if wide:
        params[1] = "double* __restrict__ ab"
        return _bn_finalize_wide(C, M, T, params, eps, mom, eps_e, mom_e, outs, run)
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
        body += f"  o_mean[c] = hdn_from_float<{T['mean']}>((float)mean);\n"
    if "inv_variance" in outs:
        body += f"  o_inv_variance[c] = hdn_from_float<{T['inv_variance']}>(inv);\n"
    if run:
        unb = f"var * {float(M) / max(1.0, M - 1.0)!r}" if M > 1 else "var"
        body += f"  const float mo = {mom_e};\n"
        if "next_running_mean" in outs:
            body += (f"  o_next_running_mean[c] = hdn_from_float<{T['next_running_mean']}>("
                     f"(1.f - mo) * hdn_to_float(prm[c])"
                     f" + mo * (float)mean);\n")
        if "next_running_variance" in outs:
            body += (f"  o_next_running_variance[c] = hdn_from_float<{T['next_running_variance']}>("
                     f"(1.f - mo) * hdn_to_float(prv[c])"
                     f" + mo * (float)({unb}));\n")
    if slabs is not None:
        head = f"\n  const int c = blockIdx.x * blockDim.x + threadIdx.x;\n  if (c >= {C}) return;\n"
        assert body.startswith(head)
        body = ("\n" + _part_sum_prologue(C, slabs) + body[len(head):]).replace(
            "ws[c]", "s0").replace(f"ws[{C} + c]", "s1")
        params[0] = "const float* __restrict__ part"
        src = ("#define HDN_GENERATED 1\n#include \"hdn_compat.h\"\n#include \"hdn_reduce.h\"\n"
               f'extern "C" __global__ void __launch_bounds__({CL_NT}) hdn_bn_finalize({", ".join(params)}) {{{body}}}\n')
        return src, (-(-C // 32), 1, 1), (CL_NT, 1, 1)
    src = ("#define HDN_GENERATED 1\n#include \"hdn_compat.h\"\n"
           f'extern "C" __global__ void hdn_bn_finalize({", ".join(params)}) {{{body}}}\n')
    return src, ((C + 127) // 128, 1, 1), (128, 1, 1)


def _bn_finalize_wide(C, M, T, params, eps, mom, eps_e, mom_e, outs, run):
    """bn_finalize_source in double throughout (DOUBLE tensors): the CPU reference's float64
    statistics, A = inv * scale, B = bias - mean * A (double)."""
    if eps is not None:
        eps_e = cg.dlit(eps)
    if run and mom is not None:
        mom_e = cg.dlit(mom)
    eps_e, mom_e = eps_e.replace("hdn_to_float", "hdn_to_double"), mom_e.replace("hdn_to_float", "hdn_to_double")
    body = f"""
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= {C}) return;
  const double mean = ws[c] / {float(M)!r};
  double var = ws[{C} + c] / {float(M)!r} - mean * mean;
  if (var < 0.0) var = 0.0;
  const double inv = 1.0 / sqrt(var + (double){eps_e});
  const double sc = hdn_to_double(scale[c]), bi = hdn_to_double(bias[c]);
  ab[c] = inv * sc;
  ab[{C} + c] = bi - mean * (inv * sc);
"""
    if "mean" in outs:
        body += f"  o_mean[c] = hdn_from_double<{T['mean']}>(mean);\n"
    if "inv_variance" in outs:
        body += f"  o_inv_variance[c] = hdn_from_double<{T['inv_variance']}>(inv);\n"
    if run:
        unb = f"var * {float(M) / max(1.0, M - 1.0)!r}" if M > 1 else "var"
        body += f"  const double mo = (double){mom_e};\n"
        if "next_running_mean" in outs:
            body += (f"  o_next_running_mean[c] = hdn_from_double<{T['next_running_mean']}>("
                     f"(1.0 - mo) * hdn_to_double(prm[c]) + mo * mean);\n")
        if "next_running_variance" in outs:
            body += (f"  o_next_running_variance[c] = hdn_from_double<{T['next_running_variance']}>("
                     f"(1.0 - mo) * hdn_to_double(prv[c]) + mo * ({unb}));\n")
    src = ("#define HDN_GENERATED 1\n#include \"hdn_compat.h\"\n"
           f'extern "C" __global__ void hdn_bn_finalize({", ".join(params)}) {{{body}}}\n')
    return src, ((C + 127) // 128, 1, 1), (128, 1, 1)


# --------------------------------------------------------------------------- backward sources
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


def bn_bwd_sums_source(x, dy, mean, inv, C, dims, wide=False):
    """Per channel: sum(dy) -> ws[c], sum(dy * (x - mean) * iv) -> ws[C + c] (double, zeroed).
    ``wide``: per-thread sums in double too (DOUBLE tensors), else float."""
    A, ld, z, fma = ("double", "hdn_to_double", "0.0", "fma") if wide else \
        ("float", "hdn_to_float", "0.f", "fmaf")
    Tx, Tdy = cg.CTYPE[cg.dtype_name(x.dtype)], cg.CTYPE[cg.dtype_name(dy.dtype)]
    Tm, Ti = cg.CTYPE[cg.dtype_name(mean.dtype)], cg.CTYPE[cg.dtype_name(inv.dtype)]
    xs, ys = [int(s) for s in x.strides], [int(s) for s in dy.strides]
    ms, ivs = cg.per_channel_strides(mean, dims), cg.per_channel_strides(inv, dims)
    per = 1
    for d, n in enumerate(dims):
        if d != 1:
            per *= n
    lines = _chan_offset_lines(dims, [xs, ys], ["x", "dy"])
    src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void __launch_bounds__(256) hdn_bn_bwd_sums(const {Tdy}* __restrict__ dy, const {Tx}* __restrict__ x,
    const {Tm}* __restrict__ mean, const {Ti}* __restrict__ inv, double* __restrict__ ws) {{
  __shared__ {A} ss[256], sq[256];
  const int c = blockIdx.x;
  const {Tx}* xc = x + (long long)c * {xs[1]};
  const {Tdy}* dyc = dy + (long long)c * {ys[1]};
  const {A} mu = {ld}(mean[(long long)c * {ms[1]}]), iv = {ld}(inv[(long long)c * {ivs[1]}]);
  {A} s = {z}, q = {z};
  for (long long e = (long long)blockIdx.y * 256 + threadIdx.x; e < {per}; e += (long long)gridDim.y * 256) {{
    {' '.join(lines)}
    const {A} g = {ld}(dyc[off_dy]);
    s += g; q = {fma}(g, ({ld}(xc[off_x]) - mu) * iv, q);
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


def bn_bwd_finalize_source(C, M, r, wide=False):
    """dbias, dscale (outputs) and the per-channel coefficients of the apply pass:
    co = [mean, iv, scale * iv, dbias / M, dscale / M] (float, C each; ``wide``: double)."""
    A, ld, st_ = ("double", "hdn_to_double", "hdn_from_double") if wide else \
        ("float", "hdn_to_float", "hdn_from_float")
    cast = "" if wide else "(float)"
    T = {k: cg.CTYPE[cg.dtype_name(r[k].dtype)] for k in ("mean", "inv_variance", "scale", "dscale", "dbias")}
    dims = [int(d) for d in r["x"].dims]
    st = {k: cg.per_channel_strides(r[k], dims)[1] if C > 1 else 0
          for k in ("mean", "inv_variance", "scale", "dscale", "dbias")}
    src = f"""#define HDN_GENERATED 1
#include "hdn_compat.h"
extern "C" __global__ void hdn_bn_bwd_finalize(const double* __restrict__ ws, {A}* __restrict__ co,
    const {T['mean']}* __restrict__ mean, const {T['inv_variance']}* __restrict__ inv,
    const {T['scale']}* __restrict__ scale, {T['dscale']}* __restrict__ dscale, {T['dbias']}* __restrict__ dbias) {{
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= {C}) return;
  const double db = ws[c], ds = ws[{C} + c];
  const {A} iv = {ld}(inv[(long long)c * {st['inv_variance']}]);
  dbias[(long long)c * {st['dbias']}] = {st_}<{T['dbias']}>({cast}db);
  dscale[(long long)c * {st['dscale']}] = {st_}<{T['dscale']}>({cast}ds);
  co[c] = {ld}(mean[(long long)c * {st['mean']}]);
  co[{C} + c] = iv;
  co[{2 * C} + c] = {ld}(scale[(long long)c * {st['scale']}]) * iv;
  co[{3 * C} + c] = {cast}(db / {float(M)!r});
  co[{4 * C} + c] = {cast}(ds / {float(M)!r});
}}
"""
    return src, ((C + 127) // 128, 1, 1), (128, 1, 1)



# --------------------------------------------------------------------------- channels-last sources
CL_NT, CL_U = 256, 4     # threads per block; rows whose loads each thread issues together


def bn_cl_on():
    """``HIPDNN_CABI_HIP_BN_CL`` = 1 (default): channels-last batchnorm on the partial-sum
    kernels (hdn_bn_cl_part, the 16-byte applies); 0: the statistics kernels with atomics
    (hdn_bn_stats)."""
    return knob("BN_CL", "1") not in ("0", "off")


def channels_last(t):
    """True when ``t`` is packed with the channel dimension innermost: viewed as [rows, C]."""
    d, s = dims(t), strides(t)
    return len(d) >= 2 and s[1] == 1 and cg.is_dense(d, s) and cg.dense_order(d, s)[-1] == 1


class ClGeometry:
    """The channels-last partial reduction's launch: x viewed as [rows, C]; a thread owns one
    vector of ``vec`` channels (one 16-byte load per row when the data tensors share a 16-bit or
    float type and C divides, else one element), ``bx`` vectors side by side (a power of two up to
    32: one warp reads ``bx`` consecutive vectors of a row), ``by`` = 256 / bx rows of the block
    apart; grid (ceil(C / vec / bx), slabs), slab s reads rows s*by + y, stepping slabs*by."""

    def __init__(self, C, rows, dtypes, sms):
        same = len(set(dtypes)) == 1 and dtypes[0] in ("HALF", "BFLOAT16", "FLOAT")
        v = 16 // cg.ELEM_SIZE[dtypes[0]] if same else 1
        self.C, self.rows = C, rows
        self.vec = v if C % v == 0 else 1
        self.nv = C // self.vec
        self.bx = 1
        while self.bx < 32 and self.bx < self.nv:
            self.bx *= 2
        self.by = CL_NT // self.bx
        self.gx = -(-self.nv // self.bx)
        # about two blocks per SM in all (each thread at least CL_U rows): the loads in flight
        # cover the memory latency, and the partials stay small (slabs x 2C floats)
        self.slabs = max(1, min(-(-rows // (self.by * CL_U)), max(1, 2 * sms // self.gx)))

    def part_bytes(self):
        return 4 * self.slabs * 2 * self.C


def _cl_load(var, ptr, T, vec, off):
    """C lines: float ``var``[vec] from ``ptr`` + ``off`` (one 16-byte load, or one element)."""
    if vec == 1:
        return [f"{var}[0] = hdn_to_float({ptr}[{off}]);"]
    return [f"hdn_unpack(*(const uint4*)({ptr} + {off}), ({T}*)0, {var});"]


def bn_cl_part_source(geo, tx, tdy=None, tmean=None, tinv=None, mstride=1, istride=1):
    """hdn_bn_cl_part: per-channel partial sums of a channels-last tensor over one slab of rows
    into part[slab][2C] (float): statistics (``tdy`` None) sum(x), sum(x * x); backward
    sum(dy), sum(dy * (x - mean) * iv).  Each thread sums its rows in registers, the block sums
    its rows with hdn_block_colsum (fixed order: deterministic, no atomics, no memset)."""
    g = geo
    V, N, C = g.vec, 2 * g.vec, g.C
    Tx = cg.CTYPE[tx]
    bwd = tdy is not None
    if bwd:
        Tdy, Tm, Ti = cg.CTYPE[tdy], cg.CTYPE[tmean], cg.CTYPE[tinv]
        params = (f"const {Tdy}* __restrict__ dy, const {Tx}* __restrict__ x, const {Tm}* __restrict__ mean, "
                  f"const {Ti}* __restrict__ inv, float* __restrict__ part")
    else:
        params = f"const {Tx}* __restrict__ x, float* __restrict__ part"
    step = g.slabs * g.by
    L = ["#define HDN_GENERATED 1", '#include "hdn_compat.h"', '#include "hdn_reduce.h"',
         f'extern "C" __global__ void __launch_bounds__({CL_NT}) hdn_bn_cl_part({params}) {{',
         f"  __shared__ float sh[{N * CL_NT}];",
         f"  const int tx = threadIdx.x % {g.bx}, ty = threadIdx.x / {g.bx};",
         f"  const int v = blockIdx.x * {g.bx} + tx;",
         f"  float a[{N}];",
         "#pragma unroll",
         f"  for (int k = 0; k < {N}; ++k) a[k] = 0.f;",
         f"  if (v < {g.nv}) {{"]
    if bwd:
        L += [f"    float mu[{V}], iv[{V}];",
              "#pragma unroll",
              f"    for (int k = 0; k < {V}; ++k) {{",
              f"      mu[k] = hdn_to_float(mean[(long long)(v * {V} + k) * {mstride}]);",
              f"      iv[k] = hdn_to_float(inv[(long long)(v * {V} + k) * {istride}]);",
              "    }"]
    L += [f"    for (long long r = (long long)blockIdx.y * {g.by} + ty; r < {g.rows}LL; r += {CL_U * step}LL) {{",
          f"      float xv[{CL_U}][{V}];" + (f" float gv[{CL_U}][{V}];" if bwd else ""),
          "#pragma unroll",
          f"      for (int u = 0; u < {CL_U}; ++u) {{",
          f"        const long long o = (r + (long long)u * {step}) * {C} + (long long)v * {V};",
          f"        if (r + (long long)u * {step} < {g.rows}LL) {{",
          "          " + " ".join(_cl_load("xv[u]", "x", Tx, V, "o"))
          + ((" " + " ".join(_cl_load("gv[u]", "dy", Tdy, V, "o"))) if bwd else ""),
          "        }",
          "      }",
          "#pragma unroll",
          f"      for (int u = 0; u < {CL_U}; ++u) {{",
          f"        if (r + (long long)u * {step} < {g.rows}LL) {{",
          "#pragma unroll",
          f"          for (int k = 0; k < {V}; ++k) {{"]
    if bwd:
        L += [f"            a[k] += gv[u][k]; a[{V} + k] = fmaf(gv[u][k], (xv[u][k] - mu[k]) * iv[k], a[{V} + k]);"]
    else:
        L += [f"            a[k] += xv[u][k]; a[{V} + k] = fmaf(xv[u][k], xv[u][k], a[{V} + k]);"]
    L += ["          }", "        }", "      }", "    }", "  }",
          f"  hdn_block_colsum<{CL_NT}, {g.bx}, {N}>(a, sh);",
          f"  for (int i = threadIdx.x; i < {N * g.bx}; i += {CL_NT}) {{",
          f"    const int k = i / {g.bx}, c = i % {g.bx}, vv = blockIdx.x * {g.bx} + c;",
          f"    if (vv < {g.nv}) part[(long long)blockIdx.y * {2 * C} + (k / {V}) * {C} + vv * {V} + k % {V}]"
          f" = sh[hdn_colsum_at<{CL_NT}, {g.bx}>(k, c)];",
          "  }", "}", ""]
    return "\n".join(L), (g.gx, g.slabs, 1), (CL_NT, 1, 1)


def _part_sum_prologue(C, slabs):
    """Kernel lines of a finish over part[slabs][2C]: 32 channels x 8 lanes per block, each lane
    sums every 8th slab in double, hdn_block_colsum adds the lanes (fixed order); then the
    threads of lane 0 go on with channel c and its sums s0, s1."""
    return (f"  __shared__ double sh[{2 * CL_NT}];\n"
            "  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;\n"
            "  const int c = blockIdx.x * 32 + tx;\n"
            "  double a[2] = {0.0, 0.0};\n"
            f"  if (c < {C}) {{\n"
            f"    for (int s = ty; s < {slabs}; s += {CL_NT // 32}) {{\n"
            f"      a[0] += (double)part[(long long)s * {2 * C} + c];\n"
            f"      a[1] += (double)part[(long long)s * {2 * C} + {C} + c];\n"
            "    }\n"
            "  }\n"
            f"  hdn_block_colsum<{CL_NT}, 32, 2>(a, sh);\n"
            f"  if (ty != 0 || c >= {C}) return;\n"
            f"  const double s0 = sh[hdn_colsum_at<{CL_NT}, 32>(0, tx)], s1 = sh[hdn_colsum_at<{CL_NT}, 32>(1, tx)];\n")


def bn_bwd_finish_source(C, M, r, slabs):
    """hdn_bn_bwd_finish: the partials of hdn_bn_cl_part (backward) summed per channel, then
    what bn_bwd_finalize_source computes (dbias, dscale, the apply coefficients co)."""
    src, _, _ = bn_bwd_finalize_source(C, M, r)
    head = f"  const int c = blockIdx.x * blockDim.x + threadIdx.x;\n  if (c >= {C}) return;\n  const double db = ws[c], ds = ws[{C} + c];\n"
    assert head in src
    src = src.replace(head, _part_sum_prologue(C, slabs) + "  const double db = s0, ds = s1;\n")
    src = src.replace('#include "hdn_compat.h"\n', '#include "hdn_compat.h"\n#include "hdn_reduce.h"\n')
    src = src.replace("hdn_bn_bwd_finalize(const double* __restrict__ ws,", "hdn_bn_bwd_finish(const float* __restrict__ part,")
    return src, (-(-C // 32), 1, 1), (CL_NT, 1, 1)


def bn_cl_apply_source(name, geo, tdy, tx, tdx):
    """dx = a * (dy - k1 - (x - mu) * iv * k2) per element of a channels-last backward, one
    16-byte vector (or element) of dy, x and dx per thread; co = [mu, iv, a, k1, k2] (float, C
    each; float4 loads when vec > 1)."""
    return _cl_ew_source(name, geo, [("dy", tdy, "g"), ("x", tx, "xv")], ("dx", tdx), 5,
                         "d[k] = f[2][k] * (g[k] - f[3][k] - (xv[k] - f[0][k]) * f[1][k] * f[4][k]);")


def bn_cl_train_apply_source(name, geo, tx, ty):
    """y = x * A[c] + B[c] per element of a channels-last training forward (no fused run), one
    16-byte vector (or element) of x and y per thread; ab = [A, B] (float, C each)."""
    return _cl_ew_source(name, geo, [("x", tx, "xv")], ("y", ty), 2, "d[k] = fmaf(xv[k], f[0][k], f[1][k]);")


def _cl_ew_source(name, geo, ins, out, ncoef, stmt):
    """An elementwise kernel over channels-last [rows, C] tensors sharing their strides: one
    16-byte vector (or element) per thread of each input (``ins``: (pointer, data type, float
    array)), ``ncoef`` per-channel float coefficient rows ``co`` [ncoef][C] in ``f``, ``stmt``
    computing d[k], stored to ``out`` (pointer, data type)."""
    g = geo
    V, C = g.vec, g.C
    n = g.rows * g.nv
    params = [f"const {cg.CTYPE[t]}* __restrict__ {p}" for p, t, _ in ins]
    params += ["const float* __restrict__ co", f"{cg.CTYPE[out[1]]}* __restrict__ {out[0]}"]
    L = ["#define HDN_GENERATED 1", '#include "hdn_compat.h"', '#include "hdn_reduce.h"',
         f'extern "C" __global__ void __launch_bounds__({CL_NT}) {name}({", ".join(params)}) {{',
         f"  const long long i = (long long)blockIdx.x * {CL_NT} + threadIdx.x;",
         f"  if (i >= {n}LL) return;",
         f"  const int c0 = (int)(i % {g.nv}) * {V};",
         f"  const long long o = i * {V};",
         "  float " + ", ".join(f"{v}[{V}]" for _, _, v in ins) + f", f[{ncoef}][{V}], d[{V}];"]
    L += ["  " + " ".join(_cl_load(v, p, cg.CTYPE[t], V, "o")) for p, t, v in ins]
    if V == 1:
        L += [f"  for (int j = 0; j < {ncoef}; ++j) f[j][0] = co[j * {C} + c0];"]
    else:
        L += ["#pragma unroll", f"  for (int j = 0; j < {ncoef}; ++j) {{", "#pragma unroll",
              f"    for (int q = 0; q < {V // 4}; ++q) {{",
              f"      const float4 t = *(const float4*)(co + j * {C} + c0 + 4 * q);",
              "      f[j][4 * q] = t.x; f[j][4 * q + 1] = t.y; f[j][4 * q + 2] = t.z; f[j][4 * q + 3] = t.w;",
              "    }", "  }"]
    L += ["#pragma unroll", f"  for (int k = 0; k < {V}; ++k)", "    " + stmt]
    T = cg.CTYPE[out[1]]
    L += [f"  {out[0]}[o] = hdn_from_float<{T}>(d[0]);" if V == 1 else f"  *(uint4*)({out[0]} + o) = hdn_pack<{T}>(d);"]
    L += ["}", ""]
    return "\n".join(L), (-(-n // CL_NT), 1, 1), (CL_NT, 1, 1)
