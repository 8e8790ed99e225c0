"""Convolution nodes (forward, backward data, backward filter): implicit GEMMs on the shared
GEMM core (gemm.py) - the builders below give each node's GemmSpec: the operand gathers (filter
taps, padding, stride, dilation decoded from GEMM k / m / n), the load modes, dense views for the
tensor copy engine (1 x 1, KRSC weights, im2col maps, 4-D backward-filter boxes) and the output
coordinates.  Forward / backward data: a following pointwise run fuses into the epilogue when y
/ dx is virtual and only that run reads it (conv -> bias -> relu, dgrad -> dReLU).  Unit-stride
backward data runs as the forward convolution of dy with the transposed, flipped filter (the
forward's im2col tensor-map path) where that path applies.
"""
from __future__ import annotations

import math

from hipdnn_cabi.schemas.catalog import FB_NAMES

from .. import codegen as cg
from .. import direct, gemm, implicit, layout, winograd
from ..codegen import GemmSpec
from ..gemm import aligned
from ..gemm_core import choose_core, im2col_wanted, knob, padded_im2col_choice
from ._base import (COMPUTE_TYPES, _need, check_tensors, check_types, dims, dt, kinds,
                    non_overlapping, span_elems, strides)

KINDS = kinds("conv")
FWD, BWD_DATA, BWD_FILTER = ("ConvolutionFwdAttributes", "ConvolutionBwdAttributes",
                             "ConvolutionWrwAttributes")
# the roles of each kind as (activations x, filter w, output-side y) of the forward convolution
XWY = {FWD: ("x", "w", "y"), BWD_DATA: ("dx", "w", "dy"), BWD_FILTER: ("x", "dw", "dy")}
# the input whose type picks the GEMM core (and so the layout copies)
_TYPE_ROLE = {FWD: "x", BWD_DATA: "dy", BWD_FILTER: "x"}


# INT8 data in every direction (the CPU reference's keys): both inputs INT8, INT32 compute (or
# UNSET), the output INT8 (saturated), INT32 or FLOAT - the integer tensor-core GEMM
# (gemm.int8_source), NVIDIA only
INT8_OUT = ("INT8", "INT32", "FLOAT")
# each direction's (inputs, output)
_IO = {FWD: (("x", "w"), "y"), BWD_DATA: (("dy", "w"), "dx"), BWD_FILTER: (("x", "dy"), "dw")}
INT8_COMPUTE = ("INT32", "UNSET")


def is_int8(node, r):
    return any(dt(r[q]) == "INT8" for q in _IO[node.kind][0] if q in r)


def check(node, graph, r):
    check_tensors(node, r)
    rx, rw, ry = XWY[node.kind]
    if is_int8(node, r):
        _need(all(x in r for x in (rx, rw, ry)), "conv operands missing")
        ins, out = _IO[node.kind]
        _need(all(dt(r[q]) == "INT8" for q in ins), f"INT8 convolution: {' and '.join(ins)} must both be INT8")
        _need(dt(r[out]) in INT8_OUT, f"INT8 convolution: {out} is {dt(r[out])} (INT8, INT32 or FLOAT)")
        cd = cg.dtype_name(node.compute_dtype)
        _need(cd in INT8_COMPUTE, f"INT8 convolution: compute type {cd} (INT32 or UNSET)")
    else:
        # compute type DOUBLE with DOUBLE data only (the CPU reference's keys)
        dbl = _TYPE_ROLE[node.kind] in r and dt(r[_TYPE_ROLE[node.kind]]) == "DOUBLE"
        check_types(node, r, extra=("DOUBLE",), computes=COMPUTE_TYPES + (("DOUBLE",) if dbl else ()))
    _need(all(x in r for x in (rx, rw, ry)), "conv operands missing")
    x, w, y = dims(r[rx]), dims(r[rw]), dims(r[ry])
    _need(3 <= len(x) <= 5 and len(w) == len(x) == len(y), "conv ranks")
    _need(w[1] >= 1 and x[1] % w[1] == 0 and y[1] == w[0] and y[0] == x[0], "conv channel counts")
    _need(w[0] % (x[1] // w[1]) == 0, "conv output channels not a multiple of the group count")
    _need(all(r[q].value is None for q in (rx, rw, ry)), "conv operand is a constant")
    p = conv_params(node, len(x) - 2)
    for j in range(len(x) - 2):
        eff = (w[2 + j] - 1) * p["dilation"][j] + 1
        o = (x[2 + j] + p["pre_padding"][j] + p["post_padding"][j] - eff) // p["stride"][j] + 1
        _need(o == y[2 + j], "conv output shape")


def groups(node, r):
    """The group count G = C of x / C of w (1: an ungrouped convolution)."""
    rx, rw, _ = XWY[node.kind]
    return dims(r[rx])[1] // dims(r[rw])[1]


def _direct(node, r):
    """Depthwise-like forward / backward data (grouped, at most 4 GEMM columns a group, a short
    reduction): the direct core, one thread per output (codegen ``spec.direct``) - a tiled GEMM
    would waste all but N of its 64 / 128 columns.  Knob ``HIPDNN_CABI_HIP_GROUPED_DIRECT=0``
    keeps the tiled cores."""
    if node.kind == BWD_FILTER or groups(node, r) == 1 or knob("GROUPED_DIRECT", "1") in ("0", "off"):
        return False
    wd = dims(r[XWY[node.kind][1]])
    n_cols = wd[0] // groups(node, r) if node.kind == FWD else wd[1]
    red = (wd[1] if node.kind == FWD else wd[0] // groups(node, r)) * math.prod(wd[2:])
    return n_cols <= 4 and red <= 2048


def emit(ctx, node, r, tag, fused=None):
    if is_double(node, r):
        return _emit_double(ctx, node, r, tag)
    if is_int8(node, r):
        return _emit_int8(ctx, node, r, tag, fused)
    if winograd_choice(ctx, node, r):
        return _emit_winograd(ctx, node, r, tag, fused)
    prog, arch = ctx.prog, ctx.arch
    spec = GemmSpec()
    G = groups(node, r)
    direct = _direct(node, r)
    if direct:    # operands read in place: no layout copies
        core0 = None
        out = r[XWY[node.kind][2] if node.kind == FWD else XWY[node.kind][0]]
        spec.direct = {"cl": strides(out)[1] == 1 and dims(out)[1] > 1}
        prog.notes.append(f"{node.kind}: {G} groups, direct core (one thread per output)")
    else:
        r, core0 = gemm.prepare(ctx, node, r, tag, r[_TYPE_ROLE[node.kind]])
    if G > 1 and not direct:
        prog.notes.append(f"{node.kind}: {G} groups, one GEMM per group (grid z), generic operand gathers")
    if core0 is not None and node.kind == FWD and not _fwd_mvec(node, r):
        # fp32 NCHW on the FFMA core: NHWC copies when the cost model says so (layout.py)
        r = layout.prepare_simt(prog, node, r, ctx.loc, tag, core0, ctx.sms)
    c_layout = None
    stats = False
    if node.kind == FWD:
        built = _spec_conv_fwd(spec, node, r)
        if spec.im2col is not None and getattr(r["x"], "chan_pad", None) is not None and \
                not padded_im2col_choice(spec.M, spec.N, spec.K, spec.im2col["k"], ctx.sms,
                                         cg.ELEM_SIZE[spec.ta]):
            spec.im2col = None      # a few padded channels: chunk gathers beat 64-channel boxes
        c_layout = _c_layout if G == 1 else None
        # a batchnorm over y may take its statistics from the epilogue (n = output channel)
        stats = G == 1 and not direct and r["y"].uid in ctx.stats_wanted
    elif node.kind == BWD_DATA and G == 1 and not fused and _strided_1x1(node, r) \
            and span_elems(r["dx"]) == math.prod(dims(r["dx"])) and non_overlapping(r["dx"]) \
            and all(v >= 0 for v in strides(r["dx"])) and knob("STRIDED_DGRAD", "1") not in ("0", "off"):
        built = _spec_conv_bwd_data_strided(spec, node, r)
        out = built[0]
        # the positions the stride skips are zero: clear dx, the GEMM then writes the rest
        prog.steps.append(("memset", ctx.loc[out.uid], span_elems(out) * cg.ELEM_SIZE[dt(out)]))
        prog.notes.append(f"{node.kind}: strided 1x1 decomposition (dx cleared, GEMM over dy positions)")
    elif node.kind == BWD_DATA and G == 1 and core0 == "wgmma" and _dgrad_fwd_wanted(node, r):
        built = _spec_conv_bwd_data_as_fwd(ctx, spec, node, r, tag)
        c_layout = _c_layout
    elif node.kind == BWD_DATA:
        built = _spec_conv_bwd_data(spec, node, r)
    elif G == 1 and _wgrad_swap_wanted(node, r, choose_core(dt(r["x"]), dt(r["dy"]), arch, ctx.use_mma, ctx.tf32)
                            if arch is not None else "mma"):
        built = _spec_conv_bwd_filter_swapped(spec, node, r)
        prog.notes.append(f"{node.kind}: dw^T GEMM (M = C*R*S = {spec.M}, N = K = {spec.N})")
    else:
        built = _spec_conv_bwd_filter(spec, node, r)
    gemm.emit(ctx, node, spec, built, tag, fused, c_layout, stats)
    if getattr(built[0], "unpad", None) is not None:
        layout.emit_unpad(prog, built[0], ctx.loc, tag)     # padded dw -> dw


def winograd_reason(ctx, node, r):
    """None when the fp32 3 x 3 forward runs as Winograd F(2x2, 3x3) (:func:`_emit_winograd`),
    else why not: knob ``HIPDNN_CABI_HIP_CONV_WINOGRAD=1`` (opt-in until measured on a device;
    default 0), FLOAT x / w / y with FLOAT (or UNSET) compute, 2-D, one group, 3 x 3, unit
    stride and dilation, each padding 0 or 1 (winograd.applicable_reason), FFMA math (not the
    TF32 engine knob).  Any target: the transforms and the SIMT GEMM compile for gfx942 /
    gfx90a too (tools/check_amd.py)."""
    if knob("CONV_WINOGRAD", "0") not in ("1", "on"):
        return "knob CONV_WINOGRAD off"
    if node.kind != FWD or is_int8(node, r) or is_double(node, r):
        return "not an fp32 forward convolution"
    if ctx.tf32:
        return "TF32 math (tensor-core GEMM)"
    cd = cg.dtype_name(node.compute_dtype)
    types = [dt(r[q]) for q in ("x", "w", "y")] + ["FLOAT" if cd == "UNSET" else cd]
    xd, wd, yd = dims(r["x"]), dims(r["w"]), dims(r["y"])
    return winograd.applicable_reason(xd, wd, yd, conv_params(node, len(xd) - 2), groups(node, r), types)


def winograd_choice(ctx, node, r):
    return winograd_reason(ctx, node, r) is None


class _WsBuf:
    """A workspace array as the GEMM emitter sees a tensor: ``uid`` (its key in ctx.loc),
    dims, element strides, data type."""

    def __init__(self, uid, dims_, strides_, dtype):
        self.uid, self.dims, self.strides, self.dtype = uid, list(dims_), list(strides_), dtype
        self.value, self.virtual = None, True


def _emit_winograd(ctx, node, r, tag, fused=None):
    """fp32 3 x 3 forward as Winograd F(2x2, 3x3) (winograd.py; :func:`winograd_reason`): the
    input transform x -> V[16][C][Pp] (channels-last x: V[16][Pp][C]), the filter transform
    w -> U[16][C][Kp] (every execute), 16 batched GEMMs Mw[t] = V[t]^T U[t] on the shared GEMM
    core (SIMT FFMA: A = V M-major (K-major), B = U N-major, as 16-byte vectors), the output
    transform Mw -> y with the fused pointwise run (bias / activation / residual) on each
    output value."""
    prog, loc = ctx.prog, ctx.loc
    x, w, y = r["x"], r["w"], r["y"]
    xd, wd, yd = dims(x), dims(w), dims(y)
    p = conv_params(node, 2)
    N, C, K = xd[0], xd[1], wd[0]
    _, _, P, Pp = winograd.tiling(N, yd[2], yd[3])
    Kp = winograd.round4(K)
    cl = strides(y)[1] == 1 and K > 1
    xcl = strides(x)[1] == 1 and C > 1         # channels-last x: V[16][Pp][C] (A K-major)
    vst = winograd.v_strides(C, Pp, xcl)
    mst, k_fast = winograd.m_layout(cl, P, Pp, K, Kp)
    keys = {q: f"_wino{q}_{tag}" for q in "VUM"}      # (the epilogue names its output o<uid>)
    sizes = {"V": C * Pp, "U": C * Kp, "M": P * Kp if cl else K * Pp}
    for q in "VUM":
        loc[keys[q]] = ("ws", prog.ws_alloc(4 * winograd.TILES * sizes[q]))
    name = f"hdn_wino_in_{tag}"
    src, grid, block = winograd.input_kernel(name, xd, strides(x), p["pre_padding"], yd[2:], Pp, xcl)
    prog.steps.append(("launch", src, name, grid, block, [loc[x.uid], loc[keys["V"]]]))
    name = f"hdn_wino_filter_{tag}"
    src, grid, block = winograd.filter_kernel(name, wd, strides(w), p["flip"], Kp)
    prog.steps.append(("launch", src, name, grid, block, [loc[w.uid], loc[keys["U"]]]))
    prog.notes.append(f"{node.kind}: Winograd F(2x2, 3x3): input / filter transforms, 16 batched GEMMs "
                      f"(M = {P} tiles, N = {K}, K = {C}), output transform")
    spec = GemmSpec()
    spec.M, spec.N, spec.K, spec.batch = P, K, C, winograd.TILES
    spec.ta = spec.tb = "FLOAT"
    spec.load_a = f"return (long long)b * {vst[0]} + (long long)k * {vst[1]} + (long long)m * {vst[2]};"
    spec.load_b = f"return (long long)b * {C * Kp} + (long long)k * {Kp} + n;"
    spec.a_kcontig, spec.b_kcontig = xcl, False
    # 16-byte vectors: 4 consecutive m (Pp % 4 == 0) / n (Kp % 4 == 0), or for the K-major V 4
    # consecutive k (C % 4 == 0; else element loads)
    spec.a_mode = (1 if C % 4 == 0 else 0) if xcl else 2
    spec.b_mode = 2
    mbuf = _WsBuf(keys["M"], [winograd.TILES, P, K], mst, y.dtype)
    built = (mbuf, ["const int c0 = b; const int c1 = m; const int c2 = n;"], [winograd.TILES, P, K], 2, True,
             [_WsBuf(keys["V"], [winograd.TILES, C, Pp], vst, x.dtype),
              _WsBuf(keys["U"], [winograd.TILES, C, Kp], [C * Kp, Kp, 1], w.dtype)])
    gemm.emit(ctx, node, spec, built, tag)
    params, args, lines = gemm.epilogue(ctx, node, y, yd, fused)
    name = f"hdn_wino_out_{tag}"
    src, grid, block = winograd.output_kernel(name, yd, Pp, mst, k_fast, params, lines)
    prog.steps.append(("launch", src, name, grid, block, [loc[keys["M"]]] + args))


def fusable_output(node, r):
    """Forward: a following pointwise run may become the GEMM's epilogue (INT8: on the float
    value of a FLOAT y - program.py keeps runs that touch integer tensors unfused).  Backward
    data (16-bit / fp32 data): dx, the same epilogue (dgrad -> dReLU / bias); knob
    ``HIPDNN_CABI_HIP_DGRAD_FUSE=0`` keeps the run in its own elementwise kernel."""
    if node.kind == BWD_DATA:
        ok = not is_double(node, r) and not is_int8(node, r) and knob("DGRAD_FUSE", "1") not in ("0", "off")
        return r["dx"].uid if ok else None
    if node.kind == FWD and is_int8(node, r):
        return r["y"].uid if dt(r["y"]) == "FLOAT" else None
    return r["y"].uid if node.kind == FWD and not is_double(node, r) else None


def stats_output(node, r):
    """Forward: y, whose per-channel sums the epilogue can accumulate (genstats)."""
    return fusable_output(node, r) if node.kind == FWD else None


def stats_sure(node, r, arch, use_mma):
    """Whether the epilogue is certain to accumulate y's per-channel sums (so a graph's
    reductions of y can be left to it): one group, 16-bit operands on the wgmma core."""
    return node.kind == FWD and groups(node, r) == 1 and dt(r["x"]) in ("HALF", "BFLOAT16") and \
        dt(r["w"]) == dt(r["x"]) and choose_core(dt(r["x"]), dt(r["w"]), arch, use_mma) == "wgmma" \
        and arch is not None and knob("GENSTATS", "0") not in ("0", "off")


def _emit_int8(ctx, node, r, tag, fused=None):
    """INT8 data: an implicit GEMM on the integer tensor cores.  Ungrouped forward with
    channels-last x and w (c innermost: both operands K-major, no copies) on Hopper: the GEMM
    core's s8 wgmma
    (:func:`_spec_conv_fwd`: precomputed addressing for C % 128 == 0, the 1 x 1 / dense
    weights on the tensor copy engine; split-K; fused epilogue); everything else - other
    layouts, groups (the element gathers of both operands would spill in the producer),
    backward data / filter, other devices - the WMMA kernel (gemm.int8_source) with
    the direction's generic gathers (:func:`_spec_conv_fwd`, :func:`_spec_conv_bwd_data`,
    :func:`_spec_conv_bwd_filter`: operands read in place, one GEMM per group)."""
    _need(not (ctx.arch or "").startswith("gfx"),
          "INT8 convolution: the integer tensor-core kernels (wgmma / WMMA) are NVIDIA only")
    spec = GemmSpec()
    if node.kind == FWD and gemm.int8_core(ctx) == "wgmma" and groups(node, r) == 1 and \
            _channels_last(r["x"]) and _channels_last(r["w"]):
        gemm.emit(ctx, node, spec, _spec_conv_fwd(spec, node, r), tag, fused, _c_layout)
        return
    build = {FWD: _spec_conv_fwd, BWD_DATA: _spec_conv_bwd_data, BWD_FILTER: _spec_conv_bwd_filter}
    built = build[node.kind](spec, node, r)
    _need(spec.batch <= 65535, "INT8 convolution: more than 65535 groups")
    gemm.emit_int8(ctx, spec, built, tag, node, fused)


def _channels_last(t):
    """Channel dim (1) innermost: stride 1, or a single channel."""
    return int(dims(t)[1]) == 1 or int(strides(t)[1]) == 1


def is_double(node, r):
    return dt(r[_TYPE_ROLE[node.kind]]) == "DOUBLE"


def _emit_double(ctx, node, r, tag):
    """DOUBLE data: the direct kernels (direct.py; FP64 FMA, no tensor cores), groups too."""
    rx, rw, ry = XWY[node.kind]
    x, w, y = r[rx], r[rw], r[ry]
    _need(dims(x)[1] % dims(w)[1] == 0 and dims(w)[0] % (dims(x)[1] // dims(w)[1]) == 0,
          "conv groups do not divide the channels")
    kind = {FWD: "fwd", BWD_DATA: "bwd_data", BWD_FILTER: "bwd_filter"}[node.kind]
    p = conv_params(node, len(dims(x)) - 2)
    acc = direct.acc_type(cg.dtype_name(node.compute_dtype), dt(r[_TYPE_ROLE[node.kind]]))
    name = f"hdn_conv_f64_{tag}"
    src, grid, block = direct.conv_source(
        name, kind, (dims(x), strides(x)), (dims(w), strides(w)), (dims(y), strides(y)), p,
        cg.CTYPE[dt(x)], cg.CTYPE[dt(w)], cg.CTYPE[dt(y)], acc)
    ins = {"fwd": (x, w, y), "bwd_data": (y, w, x), "bwd_filter": (x, y, w)}[kind]
    ctx.prog.steps.append(("launch", src, name, grid, block, [ctx.loc[t.uid] for t in ins]))


def _c_layout(spec, domain, st):
    """The TMA-store layout (sm, 0) of y: m over (image, output positions) at one stride."""
    sm = gemm.linear([domain[0]] + list(domain[2:]), [st[0]] + list(st[2:]))
    return (sm, 0) if sm is not None else None


def conv_params(node, nsp):
    a = node.attrs
    p = {}
    for f, default in (("pre_padding", 0), ("post_padding", 0), ("stride", 1), ("dilation", 1)):
        v = a.get(f)
        v = [default] * nsp if v is None else [int(e) for e in v]
        _need(len(v) == nsp, f"conv {f} length")
        p[f] = v
    _need(all(e >= 1 for e in p["stride"] + p["dilation"]), "conv stride/dilation")
    _need(all(e >= 0 for e in p["pre_padding"] + p["post_padding"]), "conv padding")
    mode = FB_NAMES["ConvMode"].get(a.get("conv_mode"))
    _need(mode in ("CONVOLUTION", "CROSS_CORRELATION"), f"conv mode {mode}")
    p["flip"] = mode == "CONVOLUTION"
    return p


def _x_tap_address(xs, p, H, nsp, G=1, Cg=0):
    """The implicit-GEMM address statements of one activation element (image nn, channel cc,
    output position p*, filter tap r*, already decoded): the input position of each spatial dim
    (-1, i.e. zero, in the padding) and the element offset with the strides xs.  Grouped (G >
    1): cc is the channel within group b (channel b * Cg + cc)."""
    la, offs = [], [f"(long long)nn * {xs[0]}", f"(long long)cc * {xs[1]}"] + _goff(G, Cg, xs[1])
    for j in range(nsp):
        la.append(f"const int h{j} = p{j} * {p['stride'][j]} - {p['pre_padding'][j]} + r{j} * {p['dilation'][j]};")
        la.append(f"if (h{j} < 0 || h{j} >= {H[j]}) return -1;")
        offs.append(f"(long long)h{j} * {xs[2 + j]}")
    return la + ["return " + " + ".join(offs) + ";"]


def _goff(G, per, stride):
    """The group's offset term (group b = the GEMM batch index, ``per`` channels a group) as a
    one-element list, empty for an ungrouped convolution."""
    return [f"(long long)b * {per * stride}"] if G > 1 else []


def _kdec(rem, sizes, names):
    """C lines splitting ``rem`` into coordinates (innermost first in ``sizes``/``names``); the
    last name takes what is left."""
    out = []
    for i, (sz, nm) in enumerate(zip(sizes, names)):
        if i == len(sizes) - 1:
            out.append(f"const int {nm} = {rem};")
        else:
            out.append(f"const int {nm} = {rem} % {sz}; const int r_{nm} = {rem} / {sz};")
            rem = f"r_{nm}"
    return out


def _spec_conv_fwd(spec, node, r):
    x, w, y = r["x"], r["w"], r["y"]
    xd, wd, yd = dims(x), dims(w), dims(y)
    xs, ws_, ys = strides(x), strides(w), strides(y)
    nsp = len(xd) - 2
    p = conv_params(node, nsp)
    G = xd[1] // wd[1]
    N, C, K = xd[0], wd[1], wd[0] // G     # per group: C input, K output channels
    P, Rk, H = yd[2:], wd[2:], xd[2:]
    spec.M, spec.N, spec.K, spec.batch = N * math.prod(P), K, C * math.prod(Rk), G
    KG = spec.K
    spec.ta, spec.tb = dt(x), dt(w)
    cl = xs[1] == 1 and C > 1   # channels-last: reduction order (r..., c)
    mdec = _kdec("m", P[::-1] + [0], [f"p{j}" for j in reversed(range(nsp))] + ["nn"])
    if cl:
        kdec = _kdec("k", [C] + Rk[::-1] + [0], ["cc"] + [f"r{j}" for j in reversed(range(nsp))] + ["rlast"])
    else:
        kdec = _kdec("k", Rk[::-1] + [0], [f"r{j}" for j in reversed(range(nsp))] + ["cc"])
    la = list(mdec) + list(kdec)
    spec.load_a = " ".join(la + _x_tap_address(xs, p, H, nsp, G, C))
    lb = list(kdec)
    boffs = [f"(long long)n * {ws_[0]}", f"(long long)cc * {ws_[1]}"] + _goff(G, K, ws_[0])
    for j in range(nsp):
        rj = f"({Rk[j] - 1} - r{j})" if p["flip"] else f"r{j}"
        boffs.append(f"(long long){rj} * {ws_[2 + j]}")
    lb.append("return " + " + ".join(boffs) + ";")
    spec.load_b = " ".join(lb)
    spec.a_kcontig = cl
    spec.b_kcontig = True
    spec.chunk16 = (cl and C % 16 == 0 and aligned([xs[0]] + xs[2:], 16),
                    cl and ws_[1] == 1 and C % 16 == 0 and aligned([ws_[0]] + ws_[2:], 16))
    if cl and C % 8 == 0 and aligned([xs[0]] + xs[2:]):
        spec.a_mode = 1
        if G == 1:
            spec.a_rows = lambda bk: implicit.conv_fwd_rows(spec, xd, xs, P, Rk, p, bk)
    if G > 1:     # grouped: the generic gathers (per-group bases), chunk loads where aligned
        if cl and ws_[1] == 1 and C % 8 == 0 and aligned([ws_[0]] + ws_[2:]):
            spec.b_mode = 1
        coord = list(mdec) + [f"const int c0 = nn; const int c1 = b * {K} + n;"] + \
            [f"const int c{2 + j} = p{j};" for j in range(nsp)]
        return y, coord, yd, 1, True, [x, w]
    if not cl and _nchw_mvec(spec.ta, spec.tb, xd, xs, P, Rk, p):
        # fp32 NCHW 1 x 1, unit stride, no padding: 4 consecutive m (output positions of one
        # image) are 4 contiguous x elements - the SIMT core's 16-byte m-vector A loads
        spec.a_mode = 2
    elif not cl:     # NCHW: (channel, tap) k; channels-last keeps its cheaper generic decode (fewer registers)
        spec.simt_rows = lambda: implicit.conv_fwd_rows_simt(spec, xd, xs, P, Rk, p, cl)
    if cl and ws_[1] == 1 and C % 8 == 0 and aligned([ws_[0]] + ws_[2:]):
        spec.b_mode = 1
    elif not cl and not p["flip"] and ws_[-1] == 1 and KG % 8 == 0 and ws_[0] % 8 == 0:
        packed = all(ws_[2 + j] == math.prod(Rk[j + 1:]) for j in range(nsp)) and ws_[1] == math.prod(Rk)
        if packed:
            spec.b_mode = 1
            spec.b_dense = (ws_[0], 1, 0, 1)      # w as a dense [K, C*R] matrix
    if spec.b_mode == 1 and cl and not p["flip"] and \
            all(Rk[j] == 1 or ws_[2 + j] == C * math.prod(Rk[j + 1:]) for j in range(nsp)):
        spec.b_dense = (ws_[0], 1, 0, 1)          # KRSC weights: a dense [K, R*C] matrix
    if spec.a_mode == 1 and all(e == 1 for e in Rk) and all(e == 1 for e in p["stride"]) and \
            not any(p["pre_padding"]) and list(P) == list(H) and knob("CONV1X1_TMA", "1") not in ("0", "off"):
        sm = gemm.linear([N] + list(P), [xs[0]] + list(xs[2:]))
        if sm is not None:                        # unit-stride 1 x 1: x is a dense [N*H*W, C] matrix
            spec.a_dense = (sm, 1, 0, 1)
    if spec.a_mode == 1 and spec.b_mode == 1:
        spec.im2col = _fwd_im2col(spec, xd, xs, wd, ws_, P, Rk, H, p)
    coord = list(mdec) + ["const int c0 = nn; const int c1 = n;"] + \
        [f"const int c{2 + j} = p{j};" for j in range(nsp)]
    return y, coord, yd, 1, True, [x, w]


def _fwd_im2col(spec, xd, xs, wd, ws_, P, Rk, H, p):
    """Convolution forward with the activations on an im2col tensor map (``WG_IM2COL`` in
    gemm_wgmma.hip), or None where the copy engine cannot describe the operands.

    GEMM m = (image, output row, output column) as usual; a k tile is one filter tap (r, s) x 64
    input channels (channel block inner), so GEMM k is virtual: taps x ceil(C / 64) x 64.  A:
    per k tile one im2col-mode load of the unit's 128 consecutive output pixels (the copy
    engine walks the bounding box of the output pixels' input positions - lower corner -pad,
    upper corner (P - 1) * stride + 1 - H - pad per spatial dim, traversal step = the conv
    stride - shifted by the tap's offset (s * dil, r * dil); pixels outside the tensor, images
    past the last and channels >= C read zeros).  B: the tap's 64 channels x BN output
    channels as a 4-D (C, S, R, K) box of the weights (flipped taps for CONVOLUTION mode).
    Needs 16-bit channels-last operands with 16-byte strides, C % 8 == 0, 1 or 2 spatial dims,
    strides <= 8 and bounding-box corners in [-128, 127] (4-D im2col maps)."""
    nsp = len(P)
    N, C, K = xd[0], xd[1], wd[0]
    if nsp not in (1, 2) or spec.ta not in ("HALF", "BFLOAT16") or spec.tb != spec.ta:
        return None
    if xs[1] != 1 or ws_[1] != 1 or C % 8:
        return None
    if nsp == 1:      # a 1-D conv is a 2-D one with a unit H
        P, Rk, H = [1] + list(P), [1] + list(Rk), [1] + list(H)
        xsp, wsp = [xs[0]] + list(xs[2:]), [ws_[0]] + list(ws_[2:])
        st, pad, dil = [1] + list(p["stride"]), [0] + list(p["pre_padding"]), [1] + list(p["dilation"])
    else:
        xsp, wsp = list(xs[2:]), list(ws_[2:])
        st, pad, dil = list(p["stride"]), list(p["pre_padding"]), list(p["dilation"])
    if any(v < 1 or v > 8 for v in st) or any(d < 1 for d in dil):
        return None
    lower = [-pad[1], -pad[0]]                                        # (W, H)
    upper = [(P[1] - 1) * st[1] + 1 - H[1] - pad[1], (P[0] - 1) * st[0] + 1 - H[0] - pad[0]]
    if any(v < -128 or v > 127 for v in lower + upper):
        return None
    if any((Rk[j] - 1) * dil[j] > 32767 for j in range(2)):
        return None
    # byte strides of dims 1.. (innermost first); a unit dim takes the batch stride
    xst = [2 * (xsp[1] if H[1] > 1 else xs[0]), 2 * (xsp[0] if H[0] > 1 else xs[0]), 2 * xs[0]]
    wst = [2 * (wsp[1] if Rk[1] > 1 else ws_[0]), 2 * (wsp[0] if Rk[0] > 1 else ws_[0]), 2 * ws_[0]]
    if any(v <= 0 or v % 16 for v in xst + wst):
        return None
    cb = -(-C // 64)
    taps = Rk[0] * Rk[1]
    tm_a = (spec.ta, (C, H[1], H[0], N), tuple(xst), None, (1, st[1], st[0], 1),
            (tuple(lower), tuple(upper), 64, 128))
    tm_b = (spec.tb, (C, Rk[1], Rk[0], K), tuple(wst))
    defs = ["#define WG_IM2COL 1", f"#define I2C_P {P[0]}", f"#define I2C_Q {P[1]}",
            f"#define I2C_R {Rk[0]}", f"#define I2C_S {Rk[1]}", f"#define I2C_CB {cb}",
            f"#define I2C_STH {st[0]}", f"#define I2C_STW {st[1]}",
            f"#define I2C_PADH {pad[0]}", f"#define I2C_PADW {pad[1]}",
            f"#define I2C_DILH {dil[0]}", f"#define I2C_DILW {dil[1]}",
            f"#define I2C_FLIP {int(bool(p['flip']))}"]
    return {"k": taps * cb * 64, "A": tm_a, "B": tm_b, "defs": defs, "taps": taps, "cb": cb}


def _nchw_mvec(ta, tb, xd, xs, P, Rk, p):
    """fp32 NCHW (channel stride != 1) forward with a 1 x 1 filter, unit stride, no padding and
    spatially packed x, whose output positions per image are a multiple of 4: the GEMM's A
    (m = (n, position), k = channel) is M-major with 4-aligned contiguous runs of m, so the SIMT
    core loads it as 16-byte m-vectors (A_MODE 2) instead of element gathers.  Knob
    ``HIPDNN_CABI_HIP_SIMT_MVEC=0`` turns it off."""
    nsp = len(P)
    if knob("SIMT_MVEC", "1") in ("0", "off") or ta != "FLOAT" or tb != "FLOAT" or nsp == 0:
        return False
    if any(e != 1 for e in Rk) or any(e != 1 for e in p["stride"]) or any(p["pre_padding"]):
        return False
    H = xd[2:]
    if list(P) != list(H) or math.prod(P) % 4:
        return False
    packed = all(xs[2 + j] == math.prod(H[j + 1:]) or H[j] == 1 for j in range(nsp))
    return packed and xs[0] % 4 == 0 and xs[1] % 4 == 0 and xs[0] > 0 and xs[1] > 0


def _fwd_mvec(node, r):
    """:func:`_nchw_mvec` for a forward convolution node's operand roles."""
    x, w, y = r["x"], r["w"], r["y"]
    nsp = len(dims(x)) - 2
    if dims(x)[1] != dims(w)[1]:
        return False
    return _nchw_mvec(dt(x), dt(w), dims(x), strides(x), dims(y)[2:], dims(w)[2:], conv_params(node, nsp))


def _strided_1x1(node, r):
    """Backward data of a 1 x 1, unpadded, strided convolution: only the dx positions that are
    multiples of the stride receive a value (dy there times w), the rest are zero."""
    nsp = len(dims(r["dx"])) - 2
    p = conv_params(node, nsp)
    return nsp >= 1 and all(e == 1 for e in dims(r["w"])[2:]) and not any(p["pre_padding"]) and \
        any(st > 1 for st in p["stride"])


def _spec_conv_bwd_data_strided(spec, node, r):
    """The strided 1 x 1 decomposition (``_strided_1x1``): GEMM M = N * prod(P) (dy positions,
    not dx's), N = C, K = K; the epilogue stores at dx[n, c, p * stride]; the plan zeroes dx
    first (one memset).  A quarter of the generic GEMM's work for stride 2 in 2-D."""
    dy, w, dx = r["dy"], r["w"], r["dx"]
    xd, wd, yd = dims(dx), dims(w), dims(dy)
    xs, ws_, ys = strides(dx), strides(w), strides(dy)
    nsp = len(xd) - 2
    p = conv_params(node, nsp)
    N, C, K = xd[0], xd[1], wd[0]
    P = yd[2:]
    spec.M, spec.N, spec.K, spec.batch = N * math.prod(P), C, K, 1
    spec.ta, spec.tb = dt(dy), dt(w)
    mdec = _kdec("m", P[::-1] + [0], [f"p{j}" for j in reversed(range(nsp))] + ["nn"])
    offs = [f"(long long)nn * {ys[0]}", f"(long long)k * {ys[1]}"] + \
        [f"(long long)p{j} * {ys[2 + j]}" for j in range(nsp)]
    spec.load_a = " ".join(list(mdec) + ["return " + " + ".join(offs) + ";"])
    spec.load_b = f"return (long long)k * {ws_[0]} + (long long)n * {ws_[1]};"
    cl = ys[1] == 1 and K > 1
    spec.a_kcontig = cl
    spec.b_kcontig = ws_[0] == 1
    if cl and K % 8 == 0 and aligned([ys[0]] + ys[2:]):
        spec.a_mode = 1
        # packed NHWC dy: a dense [N * P, K] matrix (the tensor copy engine)
        want, packed = K, True
        for j in reversed(range(nsp)):
            packed = packed and (P[j] == 1 or ys[2 + j] == want)
            want *= P[j]
        if packed and (N == 1 or ys[0] == want):
            spec.a_dense = (K, 1, 0, 1)
    if ws_[1] == 1 and C % 8 == 0 and aligned([ws_[0]]):
        spec.b_mode = 2
        spec.b_dense = (1, ws_[0], 0, 1)
    elif ws_[0] == 1 and K % 8 == 0 and aligned([ws_[1]]):
        spec.b_mode = 1
        spec.b_kcontig = True
        spec.b_dense = (ws_[1], 1, 0, 1)
    coord = list(mdec) + ["const int c0 = nn; const int c1 = n;"] + \
        [f"const int c{2 + j} = p{j} * {p['stride'][j]};" for j in range(nsp)]
    return dx, coord, xd, 1, True, [dy, w]


class _FwdOf:
    """The forward convolution node equivalent to a unit-stride backward data node
    (:func:`_dgrad_fwd_attrs`): what :func:`_spec_conv_fwd` reads of a node."""

    kind = FWD

    def __init__(self, node, attrs):
        self.attrs = attrs
        self.compute_dtype = node.compute_dtype


class _Operand:
    """A GEMM operand seen with other dims / strides (the transposed filter in the workspace)."""

    def __init__(self, dims_, strides_, dtype, uid):
        self.dims, self.strides, self.dtype, self.uid = list(dims_), list(strides_), dtype, uid
        self.value = None
        self.virtual = True


_MODE_ID = {v: k for k, v in FB_NAMES["ConvMode"].items()}


def _dgrad_fwd_attrs(node, r):
    """Unit-stride backward data as a forward convolution: dx = conv(dy, w'), w'[c, k, r] =
    w[k, c, R - 1 - r] (the taps flipped, the channels exchanged), padding (R - 1) * dil - pad
    on each side, the dilation kept, stride 1.  Returns the forward's attributes, or None
    (a stride > 1, or a padding past (R - 1) * dil: a negative forward padding)."""
    nsp = len(dims(r["dx"])) - 2
    p = conv_params(node, nsp)
    Rk = dims(r["w"])[2:]
    if nsp == 0 or any(e != 1 for e in p["stride"]):
        return None
    span = [(Rk[j] - 1) * p["dilation"][j] for j in range(nsp)]
    pre = [span[j] - p["pre_padding"][j] for j in range(nsp)]
    post = [span[j] - p["post_padding"][j] for j in range(nsp)]
    if any(v < 0 for v in pre + post):
        return None
    attrs = dict(node.attrs)
    attrs.update(pre_padding=pre, post_padding=post, stride=[1] * nsp, dilation=list(p["dilation"]),
                 conv_mode=_MODE_ID["CROSS_CORRELATION" if p["flip"] else "CONVOLUTION"])
    return attrs


def _wt_view(r, uid):
    """w' = the filter [K, C, R...] transposed to [C, R..., K] (k innermost, packed) as the
    forward's w [C, K, R...]: strides (R... * K, 1, ...)."""
    wd = dims(r["w"])
    nd = len(wd)
    st = layout.packed_strides(wd, [1] + list(range(2, nd)) + [0])
    return _Operand([wd[1], wd[0]] + wd[2:], [st[1], st[0]] + st[2:], r["w"].dtype, uid)


def _dgrad_fwd_wanted(node, r):
    """Whether backward data runs as the forward convolution of dy with the transposed, flipped
    filter (:func:`_spec_conv_bwd_data_as_fwd`): unit stride, padding <= (R - 1) * dil, one
    group, channels-last operands that the forward's im2col tensor map describes
    (:func:`_fwd_im2col`, ``im2col_wanted``: 16-bit data, 1 or 2 spatial dims, K % 8 == 0,
    more than one tap or padding).  Knob ``HIPDNN_CABI_HIP_DGRAD_IM2COL=1`` (opt-in until
    measured on a device; by default the gathered backward-data GEMM)."""
    if knob("DGRAD_IM2COL", "0") in ("0", "off"):
        return False
    if any(getattr(r[q], "chan_pad", None) is not None or getattr(r[q], "unpad", None) is not None
           for q in ("dy", "w", "dx")):
        return False
    attrs = _dgrad_fwd_attrs(node, r)
    if attrs is None:
        return False
    probe = GemmSpec()
    _spec_conv_fwd(probe, _FwdOf(node, attrs), {"x": r["dy"], "w": _wt_view(r, None), "y": r["dx"]})
    return probe.a_mode == 1 and probe.b_mode == 1 and im2col_wanted(probe)


def _spec_conv_bwd_data_as_fwd(ctx, spec, node, r, tag):
    """Backward data on the forward's im2col path (:func:`_dgrad_fwd_wanted`): the filter is
    copied once per execution into the workspace as [C, R..., K] (layout.emit_copy), then
    dx = conv_fwd(dy, w') with the forward's GemmSpec, epilogue and fused runs."""
    nd = len(dims(r["w"]))
    v = layout.emit_copy(ctx.prog, r["w"], [1] + list(range(2, nd)) + [0], ctx.loc, f"{tag}_wt", counted=False)
    ctx.prog.notes.append(f"{node.kind}: unit-stride dgrad as a forward convolution of dy with the "
                          f"transposed, flipped filter")
    fr = {"x": r["dy"], "w": _wt_view(r, v.uid), "y": r["dx"]}
    return _spec_conv_fwd(spec, _FwdOf(node, _dgrad_fwd_attrs(node, r)), fr)


def _spec_conv_bwd_data(spec, node, r):
    """dx[n, c, h] = sum_{k, r} dy[n, k, (h + pad - r * dil) / stride] * w[k, c, r]:
    GEMM M = N * prod(H) (dx positions), N = C, K = K * prod(R); taps whose output position is
    not integral or out of range load zero."""
    dy, w, dx = r["dy"], r["w"], r["dx"]
    xd, wd, yd = dims(dx), dims(w), dims(dy)
    xs, ws_, ys = strides(dx), strides(w), strides(dy)
    nsp = len(xd) - 2
    p = conv_params(node, nsp)
    G = xd[1] // wd[1]
    N, C, K = xd[0], wd[1], wd[0] // G     # per group
    P, Rk, H = yd[2:], wd[2:], xd[2:]
    spec.M, spec.N, spec.K, spec.batch = N * math.prod(H), C, K * math.prod(Rk), G
    spec.ta, spec.tb = dt(dy), dt(w)
    cl = ys[1] == 1 and K > 1
    mdec = _kdec("m", H[::-1] + [0], [f"h{j}" for j in reversed(range(nsp))] + ["nn"])
    if cl:
        kdec = _kdec("k", [K] + Rk[::-1] + [0], ["kc"] + [f"r{j}" for j in reversed(range(nsp))] + ["rlast"])
    else:
        kdec = _kdec("k", Rk[::-1] + [0], [f"r{j}" for j in reversed(range(nsp))] + ["kc"])
    la = list(mdec) + list(kdec)
    offs = [f"(long long)nn * {ys[0]}", f"(long long)kc * {ys[1]}"] + _goff(G, K, ys[1])
    for j in range(nsp):
        st, pre, dil = p["stride"][j], p["pre_padding"][j], p["dilation"][j]
        la.append(f"const int t{j} = h{j} + {pre} - r{j} * {dil};")
        if st == 1:
            la.append(f"if (t{j} < 0 || t{j} >= {P[j]}) return -1;")
            la.append(f"const int q{j} = t{j};")
        else:
            la.append(f"if (t{j} < 0 || (t{j} % {st}) != 0) return -1;")
            la.append(f"const int q{j} = t{j} / {st};")
            la.append(f"if (q{j} >= {P[j]}) return -1;")
        offs.append(f"(long long)q{j} * {ys[2 + j]}")
    la.append("return " + " + ".join(offs) + ";")
    spec.load_a = " ".join(la)
    lb = list(kdec)
    boffs = [f"(long long)kc * {ws_[0]}", f"(long long)n * {ws_[1]}"] + _goff(G, K, ws_[0])
    for j in range(nsp):
        rj = f"({Rk[j] - 1} - r{j})" if p["flip"] else f"r{j}"
        boffs.append(f"(long long){rj} * {ws_[2 + j]}")
    lb.append("return " + " + ".join(boffs) + ";")
    spec.load_b = " ".join(lb)
    spec.a_kcontig = cl
    spec.b_kcontig = False
    if cl and K % 8 == 0 and aligned([ys[0]] + ys[2:]):
        spec.a_mode = 1
        if G == 1:
            spec.a_rows = lambda bk: implicit.conv_bwd_data_rows(spec, yd, ys, H, Rk, p, bk)
    if G > 1:     # grouped: the generic gathers (per-group bases), chunk loads where aligned
        if ws_[1] == 1 and C % 8 == 0 and aligned([ws_[0]] + ws_[2:]):
            spec.b_mode = 2
        elif cl and ws_[0] == 1 and K % 8 == 0 and aligned([ws_[1]] + ws_[2:]):
            spec.b_mode = 1
            spec.b_kcontig = True
        coord = list(mdec) + [f"const int c0 = nn; const int c1 = b * {C} + n;"] + \
            [f"const int c{2 + j} = h{j};" for j in range(nsp)]
        return dx, coord, xd, 1, True, [dy, w]
    if ws_[1] == 1 and C % 8 == 0 and aligned([ws_[0]] + ws_[2:]):
        spec.b_mode = 2
        # KRSC weights: per filter tap a dense [K, C] matrix at a uniform tap stride, so a
        # 64-deep k tile (64 output channels of one tap when K % 64 == 0) is one box of a
        # 3-D tensor map (C, K, tap) - the copy engine instead of producer gathers
        tap_st = ws_[1 + nsp] if nsp else 0
        uniform = all(ws_[2 + j] == Rk[j + 1] * ws_[3 + j] for j in range(nsp - 1))
        if cl and K % 64 == 0 and uniform and ws_[0] > 0 and tap_st > 0 and \
                (2 * ws_[0]) % 16 == 0 and (2 * tap_st) % 16 == 0:
            T = math.prod(Rk)
            spec.b_tap = {"K": K, "taps": T, "flip": bool(p["flip"]),
                          "tmap": (dt(w), (C, K, T), (2 * ws_[0], 2 * tap_st if T > 1 else 2 * ws_[0] * K),
                                   (64, 64, 1))}
    elif cl and ws_[0] == 1 and K % 8 == 0 and aligned([ws_[1]] + ws_[2:]):
        spec.b_mode = 1                 # k-contiguous weights (CRSK: the TF32 layout)
        spec.b_kcontig = True
    coord = list(mdec) + ["const int c0 = nn; const int c1 = n;"] + \
        [f"const int c{2 + j} = h{j};" for j in range(nsp)]
    return dx, coord, xd, 1, True, [dy, w]


def _spec_conv_bwd_filter(spec, node, r):
    """dw[k, c, r] = sum_{n, p} dy[n, k, p] * x[n, c, p * stride - pad + r * dil]:
    GEMM M = K, N = C * prod(R), K = N * prod(P) (long: split-K)."""
    x, dy, dw = r["x"], r["dy"], r["dw"]
    xd, wd, yd = dims(x), dims(dw), dims(dy)
    xs, ws_, ys = strides(x), strides(dw), strides(dy)
    nsp = len(xd) - 2
    p = conv_params(node, nsp)
    G = xd[1] // wd[1]
    N, C, K = xd[0], wd[1], wd[0] // G     # per group
    P, Rk, H = yd[2:], wd[2:], xd[2:]
    spec.M, spec.N, spec.K, spec.batch = K, C * math.prod(Rk), N * math.prod(P), G
    spec.ta, spec.tb = dt(dy), dt(x)
    cl = xs[1] == 1 and C > 1
    kdec = _kdec("k", P[::-1] + [0], [f"p{j}" for j in reversed(range(nsp))] + ["nn"])
    if cl:
        ndec = _kdec("n", [C] + Rk[::-1] + [0], ["cc"] + [f"r{j}" for j in reversed(range(nsp))] + ["rlast"])
    else:
        ndec = _kdec("n", Rk[::-1] + [0], [f"r{j}" for j in reversed(range(nsp))] + ["cc"])
    la = list(kdec) + ["return (long long)nn * %d + (long long)m * %d" % (ys[0], ys[1]) +
                       "".join(f" + {e}" for e in _goff(G, K, ys[1])) +
                       "".join(f" + (long long)p{j} * {ys[2 + j]}" for j in range(nsp)) + ";"]
    spec.load_a = " ".join(la)
    lb = list(kdec) + list(ndec)
    offs = [f"(long long)nn * {xs[0]}", f"(long long)cc * {xs[1]}"] + _goff(G, C, xs[1])
    for j in range(nsp):
        lb.append(f"const int h{j} = p{j} * {p['stride'][j]} - {p['pre_padding'][j]} + r{j} * {p['dilation'][j]};")
        lb.append(f"if (h{j} < 0 || h{j} >= {H[j]}) return -1;")
        offs.append(f"(long long)h{j} * {xs[2 + j]}")
    lb.append("return " + " + ".join(offs) + ";")
    spec.load_b = " ".join(lb)
    spec.a_kcontig = abs(ys[-1]) <= abs(ys[1])
    spec.b_kcontig = not cl
    if ys[1] == 1 and K % 8 == 0 and aligned([ys[0]] + ys[2:]):
        spec.a_mode = 2
    if cl and C % 8 == 0 and aligned([xs[0]] + xs[2:]):
        spec.b_mode = 2
    coord = list(ndec) + ["const int c0 = m; const int c1 = cc;" if G == 1 else
                          f"const int c0 = b * {K} + m; const int c1 = cc;"]
    for j in range(nsp):
        rj = f"({Rk[j] - 1} - r{j})" if p["flip"] else f"r{j}"
        coord.append(f"const int c{2 + j} = {rj};")
    run_ok = (cl or math.prod(Rk) == 1) and C % 8 == 0
    spec.wgrad = _wgrad_tma(spec, xd, xs, yd, ys, P, Rk, H, p) if G == 1 else None
    return dw, coord, wd, 1, run_ok, [dy, x]


def _wgrad_swap_wanted(node, r, core):
    """Compute dw^T (GEMM M = C * R * S, N = K) instead of dw (M = K): when the output channels
    fill at most half of the 128-row wgmma tile (K <= 64 < C * R * S) and the tensor-map
    backward filter applies (:func:`_wgrad_tma`).  Knob ``HIPDNN_CABI_HIP_WGRAD_SWAP``: ``auto``
    (default) | ``0`` (off) | ``1`` (whenever the operands allow it, on any core: the swapped
    GEMM's gathers are complete, so host emulation checks them too)."""
    want = knob("WGRAD_SWAP", "auto")
    if want in ("0", "off"):
        return False
    x, dy, dw = r["x"], r["dy"], r["dw"]
    xd, xs, ys, wd = dims(x), strides(x), strides(dy), dims(dw)
    C, K = xd[1], wd[0]
    if not (xs[1] == 1 and ys[1] == 1 and C % 8 == 0 and K % 8 == 0 and C > 1 and K > 1):
        return False
    if want in ("1", "on"):
        return True
    if core != "wgmma" or not (K <= 64 < C * math.prod(wd[2:])):
        return False
    probe = GemmSpec()
    _spec_conv_bwd_filter(probe, node, r)
    return probe.wgrad is not None and knob("WGRAD_TMA", "1") not in ("0", "off")


def _spec_conv_bwd_filter_swapped(spec, node, r):
    """dw^T: GEMM M = C * prod(R) ((tap, channel), channel innermost), N = K, k = N * prod(P):
    A = x gathered per tap (M-major: channels contiguous in channels-last x), B = dy (N-major);
    the epilogue writes dw[n, c, r] (any strides).  On the tensor-map path (``WGR_SWAP``) A is
    the per-tap x box and B the dy box - the same boxes as the plain form, roles exchanged."""
    x, dy, dw = r["x"], r["dy"], r["dw"]
    xd, wd, yd = dims(x), dims(dw), dims(dy)
    xs, ys = strides(x), strides(dy)
    nsp = len(xd) - 2
    p = conv_params(node, nsp)
    N, C, K = xd[0], xd[1], wd[0]
    P, Rk, H = yd[2:], wd[2:], xd[2:]
    spec.M, spec.N, spec.K, spec.batch = C * math.prod(Rk), K, N * math.prod(P), 1
    spec.ta, spec.tb = dt(x), dt(dy)
    kdec = _kdec("k", P[::-1] + [0], [f"p{j}" for j in reversed(range(nsp))] + ["nn"])
    mdec = _kdec("m", [C] + Rk[::-1] + [0], ["cc"] + [f"r{j}" for j in reversed(range(nsp))] + ["rlast"])
    la = list(kdec) + list(mdec)
    spec.load_a = " ".join(la + _x_tap_address(xs, p, H, nsp))
    spec.load_b = " ".join(list(kdec) + ["return (long long)nn * %d + (long long)n * %d" % (ys[0], ys[1]) +
                                         "".join(f" + (long long)p{j} * {ys[2 + j]}" for j in range(nsp)) + ";"])
    spec.a_kcontig = spec.b_kcontig = False
    if aligned([xs[0]] + xs[2:]):
        spec.a_mode = 2           # 8 consecutive m = 8 channels of one tap: one 16-byte chunk
    if aligned([ys[0]] + ys[2:]):
        spec.b_mode = 2
    coord = list(mdec) + ["const int c0 = n; const int c1 = cc;"]
    for j in range(nsp):
        rj = f"({Rk[j] - 1} - r{j})" if p["flip"] else f"r{j}"
        coord.append(f"const int c{2 + j} = {rj};")
    spec.wgrad = _wgrad_tma(spec, xd, xs, yd, ys, P, Rk, H, p, swap=True)
    return dw, coord, wd, 0, False, [x, dy]


def _box(Q, P):
    """(bq, bp) with bq * bp = 64 positions per k tile covering the P x Q output plane with the
    least overhang (ties: the wider box, contiguous rows)."""
    best = None
    for e in range(7):
        bq, bp = 2 ** e, 64 // 2 ** e
        cover = -(-Q // bq) * bq * -(-P // bp) * bp
        if best is None or cover < best[0] or (cover == best[0] and bq > best[1]):
            best = (cover, bq, bp)
    return best[1], best[2]


def _wgrad_tma(spec, xd, xs, yd, ys, P, Rk, H, p, swap=False):
    """Backward filter on the tensor copy engine (``WG_WGRAD`` in gemm_wgmma.hip), or None.

    The reduction runs over (n, output position); a k tile is a bq x bp box of output
    positions of one image, so both operands are 4-D tensor-map boxes: dy[n, box, 64 of K] and,
    per filter tap (r, s) and 64 input channels, x[n, box * stride - pad + tap * dil, 64 of C]
    (traversal stride = the conv stride, out-of-range = padding = zeros).  GEMM k is virtual:
    N * #boxes * 64 (the box overhang past P / Q reads zero dy).  Needs channels-last 16-bit
    operands, 1 or 2 spatial dims, C % 64 == 0, K % 8 == 0, 16-byte strides, stride <= 8."""
    nsp = len(P)
    N, C, K = xd[0], xd[1], yd[1]
    if nsp not in (1, 2) or spec.ta not in ("HALF", "BFLOAT16") or spec.tb != spec.ta:
        return None
    if xs[1] != 1 or ys[1] != 1 or C % 64 or K % 8:
        return None
    if any(st > 8 for st in p["stride"]):
        return None
    if nsp == 1:      # a 1-D conv is a 2-D one with a unit H
        P, Rk, H = [1] + list(P), [1] + list(Rk), [1] + list(H)
        xsp, ysp = [0] + list(xs[2:]), [0] + list(ys[2:])
        st, pad, dil = [1] + p["stride"], [0] + p["pre_padding"], [1] + p["dilation"]
    else:
        xsp, ysp = list(xs[2:]), list(ys[2:])
        st, pad, dil = p["stride"], p["pre_padding"], p["dilation"]
    for v in [xs[0], ys[0]] + [s for s, e in zip(xsp + ysp, H + P) if e > 1]:
        if v <= 0 or (2 * v) % 16:
            return None
    bq, bp = _box(P[1], P[0])
    if bq * st[1] > 256 or bp * st[0] > 256:
        return None
    nqb, npb = -(-P[1] // bq), -(-P[0] // bp)

    # byte strides (innermost dim excluded); a unit spatial dim takes the batch stride
    tm_a = (spec.ta, (K, P[1], P[0], N),
            tuple(2 * v if e > 1 else 2 * ys[0] for v, e in zip(ysp[::-1], P[::-1])) + (2 * ys[0],),
            (64, bq, bp, 1), (1, 1, 1, 1))
    tm_b = (spec.tb, (C, H[1], H[0], N),
            tuple(2 * v if e > 1 else 2 * xs[0] for v, e in zip(xsp[::-1], H[::-1])) + (2 * xs[0],),
            (64, bq * st[1], bp * st[0], 1), (1, st[1], st[0], 1))
    if swap:      # dw^T: A = the per-tap x boxes, B = the dy boxes (WGR_SWAP in gemm_wgmma.hip)
        tm_a, tm_b = tm_b, tm_a
    defs = ["#define WG_WGRAD 1", f"#define WGR_SWAP {int(swap)}", f"#define WGR_C {C}", f"#define WGR_S {Rk[1]}",
            f"#define WGR_NQB {nqb}", f"#define WGR_NPB {npb}", f"#define WGR_BQ {bq}",
            f"#define WGR_BP {bp}", f"#define WGR_STW {st[1]}", f"#define WGR_STH {st[0]}",
            f"#define WGR_PADW {pad[1]}", f"#define WGR_PADH {pad[0]}",
            f"#define WGR_DILW {dil[1]}", f"#define WGR_DILH {dil[0]}"]
    return {"k": N * nqb * npb * 64, "tmaps": {"A": tm_a, "B": tm_b}, "defs": defs,
            "box": (bq, bp)}

