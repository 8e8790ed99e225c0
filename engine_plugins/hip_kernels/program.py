"""Op graph -> program: kernels (generated source, launch shape, argument sources) in order.

:func:`build_program` needs no GPU (CI compiles every generated source with NVRTC alone).  A
program is a list of steps; each step is ``("launch", source, kernel, grid, block, args)`` or
``("memset", where, nbytes)``; an arg (and ``where``) is ``("t", uid)`` (a bound pointer),
``("s", uid)`` (a runtime scalar, by value), ``("ws", off)`` (the caller's workspace + offset)
or ``("sc", off)`` (the plan's own scratch + offset: small buffers such as batchnorm statistics,
allocated once at plan build, so small plans need no workspace).  Units:

* a connected run of pointwise nodes -> ONE elementwise kernel (broadcast operands baked in);
* matmul / convolution forward -> one GEMM kernel (SIMT, or the 16-bit matrix-unit kernel on
  NVIDIA), with a following pointwise run fused into its epilogue when the GEMM output is
  virtual and only that run reads it (conv -> bias -> relu, matmul -> bias -> activation);
* batchnorm inference (also with variance + epsilon) -> one elementwise kernel; training
  forward -> memset + statistics + finalize + apply (4 stream operations).
Virtual tensors that cross units live in the workspace.
"""
from __future__ import annotations

import math

from . import attention as attn
from . import codegen as cg
from . import ext_ops, implicit, layout
from .codegen import CTYPE, GemmSpec, EwIn, EwOut
from .gemm_core import choose_core, knob

FLOATS = ("FLOAT", "HALF", "BFLOAT16", "FP8_E4M3", "FP8_E5M2")
IO = {
    "PointwiseAttributes": (("in_0", "in_1", "in_2"), ("out_0",)),
    "MatmulAttributes": (("a", "b"), ("c",)),
    "ConvolutionFwdAttributes": (("x", "w"), ("y",)),
    "BatchnormInferenceAttributes": (("x", "mean", "inv_variance", "scale", "bias"), ("y",)),
    "BatchnormInferenceAttributesVarianceExt": (("x", "mean", "variance", "scale", "bias",
                                                 "epsilon"), ("y",)),
    "BatchnormAttributes": (("x", "scale", "bias", "epsilon", "prev_running_mean",
                             "prev_running_variance", "momentum"),
                            ("y", "mean", "inv_variance", "next_running_mean",
                             "next_running_variance")),
    "ConvolutionBwdAttributes": (("dy", "w"), ("dx",)),
    "ConvolutionWrwAttributes": (("x", "dy"), ("dw",)),
    "BatchnormBackwardAttributes": (("dy", "x", "mean", "inv_variance", "scale"),
                                    ("dx", "dscale", "dbias")),
    "ReductionAttributes": (("in",), ("out",)),
    **attn.IO,
    **ext_ops.IO,   # issue 17: norms, resample, block scale, MoE (ext_ops.py)
}
GEMM_KINDS = ("MatmulAttributes", "ConvolutionFwdAttributes", "ConvolutionBwdAttributes",
              "ConvolutionWrwAttributes")
FUSE_KINDS = ("MatmulAttributes", "ConvolutionFwdAttributes")   # epilogue fusion
NORM_FUSE_KINDS = ("LayernormAttributes", "RMSNormAttributes")   # norm + pointwise (rownorm.py)
CONV_ROLES = {"ConvolutionFwdAttributes": ("x", "w", "y"),       # (x, w, y) roles
              "ConvolutionBwdAttributes": ("dx", "w", "dy"),
              "ConvolutionWrwAttributes": ("x", "dw", "dy")}
RED_MODES = ("ADD", "MUL", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS")
# roles that may be runtime pass-by-value scalars (RFC 0016): read from the host at execute
SCALAR_ROLES = {"PointwiseAttributes": ("in_0", "in_1", "in_2"),
                "BatchnormAttributes": ("epsilon", "momentum")}
# Data-type rules, the same as the CPU reference engine's (issue 22: the engines accept the same
# graphs where this one implements the node): kind -> (data inputs: one type t, outputs: t or
# FLOAT, parameter/statistics tensors: one common type, t or FLOAT).  Pointwise: any mix of
# FLOAT/HALF/BFLOAT16.  Compute type: FLOAT or UNSET (16-bit data computes in float).
TYPE_RULES = {
    "MatmulAttributes": (("a", "b"), ("c",), ()),
    "ConvolutionFwdAttributes": (("x", "w"), ("y",), ()),
    "ConvolutionBwdAttributes": (("dy", "w"), ("dx",), ()),
    "ConvolutionWrwAttributes": (("x", "dy"), ("dw",), ()),
    "ReductionAttributes": (("in",), ("out",), ()),
    "BatchnormInferenceAttributes": (("x",), ("y",), ("mean", "inv_variance", "scale", "bias")),
    "BatchnormInferenceAttributesVarianceExt": (("x",), ("y",), ("mean", "variance", "scale",
                                                                 "bias")),
    "BatchnormAttributes": (("x",), ("y",), ("scale", "bias", "prev_running_mean",
                                             "prev_running_variance", "mean", "inv_variance",
                                             "next_running_mean", "next_running_variance")),
    "BatchnormBackwardAttributes": (("x", "dy"), ("dx",), ("mean", "inv_variance", "scale",
                                                           "dscale", "dbias")),
}
COMPUTE_TYPES = ("FLOAT", "UNSET")
# small per-plan scratch (statistics, partials of a few KB) lives in the execution context,
# allocated once at plan build: such plans need no workspace (issue 22)
SCRATCH_PIECE = 64 * 1024
SCRATCH_TOTAL = 256 * 1024
# AMD targets whose every kernel source compiles (make check-amd: tools/check_amd.py); any other
# gfx device is declined with a reason
AMD_TARGETS = ("gfx90a", "gfx942")


class NotApplicable(Exception):
    pass


def _need(c, why):
    if not c:
        raise NotApplicable(why)


def roles(node, graph):
    """role -> Tensor for the roles the node names.  Every uid is a valid uid, 0 included (the
    hipDNN frontend numbers tensors from 0): a required ``*_tensor_uid`` field has no "unset"
    value in the schema, only the optional ones (``= null``, read as None) can be absent."""
    ins, outs = IO[node.kind]
    r = {}
    for role in ins + outs:
        u = node.attrs.get(role + "_tensor_uid")
        if u is None:
            continue
        t = graph.tensors.get(u)
        if t is None:
            raise NotApplicable(f"{node.kind}: tensor uid {u} ({role}) is not in the graph")
        r[role] = t
    return r


def io_uids(node, graph):
    ins, outs = IO[node.kind]
    r = roles(node, graph)
    return [r[x].uid for x in ins if x in r], [r[x].uid for x in outs if x in r]


def dims(t):
    return [int(d) for d in t.dims]


def strides(t):
    return [int(s) for s in t.strides]


def dt(t):
    return cg.dtype_name(t.dtype)


def span_elems(t):
    return 1 + sum((d - 1) * abs(s) for d, s in zip(dims(t), strides(t)) if d > 0)


# =========================================================================== analysis
class Program:
    """``steps``; ``ws_size``: bytes of the caller's workspace (large scratch: virtual tensors
    between kernels, split-K partials); ``scratch_size``: bytes of the plan's own device scratch
    (small: statistics, reduction partials), args ``("sc", off)``."""

    def __init__(self):
        self.steps = []
        self.ws_size = 0
        self.scratch_size = 0
        self.external = []   # uids bound by the caller (checked at execute)
        self.notes = []
        self.arch, self.tf32 = None, False

    def ws_alloc(self, nbytes):
        off = self.ws_size
        self.ws_size += (int(nbytes) + 255) // 256 * 256
        return off

    def small_alloc(self, nbytes):
        """A location for a small buffer: the plan's scratch while it stays small, else the
        workspace.  Returns ("sc", off) or ("ws", off)."""
        n = (int(nbytes) + 255) // 256 * 256
        if n <= SCRATCH_PIECE and self.scratch_size + n <= SCRATCH_TOTAL:
            off = self.scratch_size
            self.scratch_size += n
            return ("sc", off)
        return ("ws", self.ws_alloc(n))


def non_overlapping(t) -> bool:
    """Every element of t has its own address (no zero or overlapping strides)."""
    pairs = sorted((abs(int(st)), int(d)) for d, st in zip(t.dims, t.strides) if int(d) > 1)
    need = 1
    for st, d in pairs:
        if st < need:
            return False
        need = st * d
    return True


def check_types(node, r):
    """The CPU reference engine's data-type rules (see TYPE_RULES)."""
    for role, t in r.items():
        _need(dt(t) in FLOATS, f"{role}: type {dt(t)} not supported")
    cd = cg.dtype_name(node.compute_dtype)
    _need(cd in COMPUTE_TYPES, f"compute type {cd} not supported (FLOAT or UNSET)")
    rule = TYPE_RULES.get(node.kind)
    if rule is None:
        return
    ins, outs, params = rule
    present = [q for q in ins if q in r]
    if not present:
        return
    t = dt(r[present[0]])
    _need(all(dt(r[q]) == t for q in present), f"{node.kind}: inputs {present} of different types")
    # fp8 data (a GPU-only type: the CPU reference has none) may produce 16-bit outputs too
    okout = (t, "FLOAT") + (("HALF", "BFLOAT16") if t in cg.FP8 else ())
    for q in outs:
        if q in r:
            _need(dt(r[q]) in okout, f"{node.kind}: {q} is {dt(r[q])} for {t} data "
                                     f"({' or '.join(okout)})")
    ptypes = {dt(r[q]) for q in params if q in r}
    _need(len(ptypes) <= 1, f"{node.kind}: parameter tensors of mixed types {sorted(ptypes)}")
    _need(ptypes <= {t, "FLOAT"}, f"{node.kind}: parameter tensors are {sorted(ptypes)} for {t} "
                                  f"data ({t} or FLOAT)")


def check_node(node, graph):
    _need(node.kind in IO, f"{node.kind} is not supported by the HIP engine")
    r = roles(node, graph)
    if node.kind in attn.IO:
        try:
            attn.check(node, r)
        except attn.NotApplicable as e:
            raise NotApplicable(str(e)) from None
        return r
    ins, outs = IO[node.kind]
    for role, t in r.items():
        _need(len(t.dims) == len(t.strides) and len(t.dims) > 0, f"{role}: bad rank")
        if t.is_runtime_pass_by_value:
            _need(role in SCALAR_ROLES.get(node.kind, ()),
                  f"{role}: runtime pass-by-value tensor in a role that takes no scalar")
            _need(t.numel == 1 and dt(t) in FLOATS[:3], f"{role}: runtime scalar must be 1 float")
        _need(all(s >= 0 for s in strides(t)), "negative strides are not supported")
        if role in outs:
            _need(non_overlapping(t), f"{role}: output elements share addresses (zero or "
                                      f"overlapping strides)")
    if node.kind in ext_ops.CHECK:   # issue 17 ops: their own type rules (ext_ops.py)
        for role, t in r.items():
            _need(t.value is not None or dt(t) in FLOATS + ext_ops.TYPES.get(node.kind, ()),
                  f"{role}: type {dt(t)} not supported")
        cd = cg.dtype_name(node.compute_dtype)
        _need(cd in ("FLOAT", "UNSET", "HALF", "BFLOAT16"), f"compute type {cd} not supported")
        try:
            ext_ops.CHECK[node.kind](node, graph, r)
        except ValueError as e:
            raise NotApplicable(f"{node.kind}: {e}") from None
        return r
    for role, t in r.items():
        _need(dt(t) not in cg.FP8 or node.kind in GEMM_KINDS + ("PointwiseAttributes",),
              f"{role}: fp8 tensors are supported in matmul, convolution and pointwise nodes only")
    check_types(node, r)
    if node.kind == "PointwiseAttributes":
        mode = cg.pw_mode_name(node)
        _need(mode in cg.PW_EXPR, f"pointwise mode {mode} not supported")
        ar = cg.PW_EXPR[mode][0]
        _need(all(x in r for x in ("in_0", "in_1", "in_2")[:ar]) and "out_0" in r,
              f"pointwise {mode}: operands missing")
        _need(r["out_0"].value is None, "pointwise output cannot be a constant")
    elif node.kind == "MatmulAttributes":
        _need(all(x in r for x in ("a", "b", "c")), "matmul operands missing")
        a, b, c = dims(r["a"]), dims(r["b"]), dims(r["c"])
        _need(len(a) >= 2 and len(b) >= 2 and len(c) >= 2, "matmul rank < 2")
        _need(a[-1] == b[-2] and c[-2] == a[-2] and c[-1] == b[-1], "matmul shapes")
    elif node.kind in CONV_ROLES:
        rx, rw, ry = CONV_ROLES[node.kind]
        _need(all(x in r for x in (rx, rw, ry)), "conv operands missing")
        x, w, y = dims(r[rx]), dims(r[rw]), dims(r[ry])
        _need(3 <= len(x) <= 5 and len(w) == len(x) == len(y), "conv ranks")
        _need(w[1] == x[1] and y[1] == w[0] and y[0] == x[0], "grouped conv not supported")
        _need(all(r[q].value is None for q in (rx, rw, ry)), "conv operand is a constant")
        p = conv_params(node, len(x) - 2)
        for j in range(len(x) - 2):
            eff = (w[2 + j] - 1) * p["dilation"][j] + 1
            o = (x[2 + j] + p["pre_padding"][j] + p["post_padding"][j] - eff) // p["stride"][j] + 1
            _need(o == y[2 + j], "conv output shape")
    elif node.kind == "ReductionAttributes":
        _need("in" in r and "out" in r, "reduction operands missing")
        mode = cg.FB_NAMES["ReductionMode"].get(node.attrs.get("mode"))
        _need(mode in RED_MODES, f"reduction mode {mode} not supported")
        xi, yo = dims(r["in"]), dims(r["out"])
        _need(len(xi) == len(yo) and all(b in (a, 1) for a, b in zip(xi, yo)), "reduction shapes")
        _need(all(a > 0 for a in xi), "empty reduction input")
        _need(r["in"].value is None and r["out"].value is None, "reduction of a constant")
    elif node.kind.startswith("Batchnorm"):
        _need(not node.attrs.get("peer_stats_tensor_uid"), "peer stats not supported")
        need = [q for q in ins + outs if q not in OPTIONAL_ROLES.get(node.kind, ())]
        missing = [q for q in need if q not in r]
        _need(not missing, f"{node.kind}: tensors {missing} missing")
        x = r["x"]
        yrole = "dx" if node.kind == "BatchnormBackwardAttributes" else "y"
        _need(len(x.dims) >= 2 and dims(r[yrole]) == dims(x), "batchnorm shapes")
        if node.kind == "BatchnormBackwardAttributes":
            _need(dims(r["dy"]) == dims(x), "batchnorm backward dy shape")
        C = dims(x)[1]
        for role, t in r.items():
            if role in ("epsilon", "momentum"):
                _need(t.numel == 1, f"batchnorm {role} must be a 1-element tensor")
            elif role not in ("x", "y", "dy", "dx"):
                _need(t.numel == C and t.value is None, f"batchnorm {role} must hold C elements")
        if node.kind == "BatchnormAttributes":
            run = [x in r for x in ("prev_running_mean", "prev_running_variance", "momentum")]
            nxt = [x in r for x in ("next_running_mean", "next_running_variance")]
            _need(all(run) or not any(nxt), "running stats need prev stats and momentum")
    return r


# optional tensor roles of the batchnorm nodes (the others must be present)
OPTIONAL_ROLES = {
    "BatchnormAttributes": ("prev_running_mean", "prev_running_variance", "momentum", "mean",
                            "inv_variance", "next_running_mean", "next_running_variance"),
}


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
    mode = cg.FB_NAMES["ConvMode"].get(a.get("conv_mode"))
    _need(mode in ("CONVOLUTION", "CROSS_CORRELATION"), f"conv mode {mode}")
    p["flip"] = mode == "CONVOLUTION"
    return p


def build_program(graph, use_mma=True, sms=132, arch=None, tf32=False) -> Program:
    """``arch``: the device's target (``sm_90`` puts 16-bit GEMMs on the wgmma core; None: the
    mma.sync / SIMT kernels).  ``tf32``: fp32 GEMMs may use TF32 tensor cores (engine knob
    TF32_MATH; default off = true fp32 FFMA)."""
    _need(graph.nodes, "graph has no nodes")
    _need(not (arch or "").startswith("gfx") or arch in AMD_TARGETS,
          f"AMD target {arch}: the HIP engine's kernels are compiled and checked for "
          f"{' / '.join(AMD_TARGETS)} only (make check-amd)")
    _need(not graph.is_override_shape_enabled, "shape overrides not supported")
    nodes = graph.nodes
    R = [check_node(n, graph) for n in nodes]
    IOs = [io_uids(n, graph) for n in nodes]
    producer = {}
    consumers = {}
    for i, (ins, outs) in enumerate(IOs):
        _need(not set(ins) & set(outs), f"node {i} reads and writes the same tensor")
        for u in outs:
            _need(u not in producer, f"tensor {u} written twice")
            producer[u] = i
        for u in ins:
            consumers.setdefault(u, []).append(i)
    for u, t in graph.tensors.items():
        if t.virtual and u in consumers:
            _need(u in producer, f"virtual tensor {u} read but never written")
    # pointwise groups (union-find over virtual tensors between pointwise nodes)
    parent = list(range(len(nodes)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    pw = [i for i, n in enumerate(nodes) if n.kind == "PointwiseAttributes"]
    for i in pw:
        for u in IOs[i][1]:
            if graph.tensors[u].virtual:
                for j in consumers.get(u, []):
                    if nodes[j].kind == "PointwiseAttributes":
                        parent[find(j)] = find(i)
    groups = {}
    for i in pw:
        groups.setdefault(find(i), []).append(i)
    # units: list of (kind, node indices)
    unit_of = {}
    units = []
    fused_into = {}
    for g, members in groups.items():
        units.append(["pw", sorted(members)])
        for i in members:
            unit_of[i] = len(units) - 1
    for i, n in enumerate(nodes):
        if n.kind != "PointwiseAttributes":
            units.append([n.kind, [i]])
            unit_of[i] = len(units) - 1
    # epilogue fusion: GEMM output virtual, read only by one pointwise unit that reads nothing
    # else produced by another node
    for ui, (kind, members) in enumerate(units):
        if kind not in FUSE_KINDS + NORM_FUSE_KINDS:
            continue
        y = IOs[members[0]][1][0] if kind in FUSE_KINDS else R[members[0]]["y"].uid
        if not graph.tensors[y].virtual:
            continue
        cons = consumers.get(y, [])
        cu = {unit_of[j] for j in cons}
        if len(cu) != 1:
            continue
        pu = cu.pop()
        if units[pu][0] != "pw":
            continue
        pmembers = units[pu][1]
        ok = True
        for j in pmembers:
            for u in IOs[j][0]:
                if u != y and u in producer and unit_of[producer[u]] != pu:
                    ok = False
            for u in IOs[j][1]:
                if dims(graph.tensors[u]) != dims(graph.tensors[y]):
                    ok = False
                elif kind in NORM_FUSE_KINDS and \
                        not ext_ops.rownorm.packed(dims(graph.tensors[u]), strides(graph.tensors[u])):
                    ok = False     # the fused norm stores the run's outputs packed, like y
        if ok:
            fused_into[pu] = ui
    # topological order of units
    live = [ui for ui in range(len(units)) if ui not in fused_into]
    merged = {ui: [ui] + [p for p, g in fused_into.items() if g == ui] for ui in live}
    node_unit = {}
    for ui, parts in merged.items():
        for p in parts:
            for i in units[p][1]:
                node_unit[i] = ui
    deps = {ui: set() for ui in live}
    for i, (ins, _) in enumerate(IOs):
        for u in ins:
            if u in producer and node_unit[producer[u]] != node_unit[i]:
                deps[node_unit[i]].add(node_unit[producer[u]])
    order, done = [], set()
    while len(order) < len(live):
        ready = [ui for ui in live if ui not in done and deps[ui] <= done]
        _need(ready, "graph has a cycle")
        order.append(ready[0])
        done.add(ready[0])
    # where each tensor lives
    prog = Program()
    prog.arch, prog.tf32 = arch, tf32     # read by ext_ops emitters (moe.py: the GEMM core)
    loc = {}
    ext = []
    for u, t in graph.tensors.items():
        used = u in consumers or u in producer
        if not used or t.value is not None:
            continue
        if t.is_runtime_pass_by_value:
            loc[u] = ("s", u)        # host scalar, read at execute and passed by value
            continue
        if not t.virtual:
            loc[u] = ("t", u)
            ext.append(u)
    for ui in order:
        for p in merged[ui]:
            for i in units[p][1]:
                for u in IOs[i][1]:
                    t = graph.tensors[u]
                    if t.virtual and u not in loc:
                        inside = all(node_unit[j] == ui for j in consumers.get(u, []))
                        if not inside:
                            loc[u] = ("ws", prog.ws_alloc(span_elems(t) * cg.ELEM_SIZE[dt(t)]))
    prog.external = ext
    for k, ui in enumerate(order):
        kind, members = units[ui]
        fused = [p for p in merged[ui] if p != ui]
        tag = f"u{k}"
        if kind == "pw":
            _emit_pw(prog, graph, nodes, members, IOs, loc, consumers, node_unit, ui, tag)
        elif kind in GEMM_KINDS:
            epi = units[fused[0]][1] if fused else []
            _emit_gemm(prog, graph, nodes[members[0]], R[members[0]], epi, nodes, IOs, loc,
                       consumers, node_unit, ui, tag, use_mma, sms, arch, tf32)
        elif kind in ("BatchnormInferenceAttributes", "BatchnormInferenceAttributesVarianceExt"):
            _emit_bn_inf(prog, graph, R[members[0]], loc, tag)
        elif kind == "BatchnormAttributes":
            _emit_bn_train(prog, graph, R[members[0]], loc, tag)
        elif kind == "BatchnormBackwardAttributes":
            _emit_bn_bwd(prog, graph, R[members[0]], loc, tag)
        elif kind == "ReductionAttributes":
            _emit_reduction(prog, nodes[members[0]], R[members[0]], loc, tag, sms)
        elif kind in attn.IO:
            attn.emit(prog, nodes[members[0]], R[members[0]], loc, tag, arch)
        elif kind in ext_ops.EMIT:
            kw = {}
            if fused:      # norm -> (virtual y) -> pointwise run: the run's body in the norm kernel
                y = R[members[0]]["y"]
                kw["epi"] = _pw_body(graph, nodes, units[fused[0]][1], IOs, loc, consumers,
                                     node_unit, ui, dims(y), seed=y.uid)
                prog.notes.append(f"{kind} + {len(units[fused[0]][1])} pointwise node(s) fused")
            try:
                ext_ops.EMIT[kind](prog, graph, nodes[members[0]], R[members[0]], loc, tag, sms,
                                   use_mma=use_mma, **kw)
            except ValueError as e:
                raise NotApplicable(f"{kind}: {e}") from None
    return prog


# =========================================================================== pointwise
def _topo(members, IOs):
    made = {u: i for i in members for u in IOs[i][1]}
    out, done = [], set()
    while len(out) < len(members):
        for i in members:
            if i in done:
                continue
            if all(made.get(u) in done or u not in made for u in IOs[i][0]):
                out.append(i)
                done.add(i)
                break
        else:
            raise NotApplicable("pointwise cycle")
    return out


def _pw_body(graph, nodes, members, IOs, loc, consumers, node_unit, ui, domain, seed=None):
    """(inputs {uid: strides or const}, stmts, outputs [(uid, strides)]).  ``seed``: uid whose
    value is the variable ``v`` (GEMM epilogue)."""
    order = _topo(members, IOs)
    made = {u for i in members for u in IOs[i][1]}
    ins, stmts, outs = {}, [], []
    for i in order:
        n = nodes[i]
        r = roles(n, graph)
        ar = cg.PW_EXPR[cg.pw_mode_name(n)][0]
        args = []
        for role in ("in_0", "in_1", "in_2")[:ar]:
            t = r[role]
            if t.uid == seed:
                args.append("v")
            elif t.uid in made:
                args.append(f"v{t.uid}")
            else:
                if t.value is not None:   # compile-time constant, or a runtime scalar's default
                    ins[t.uid] = ("const", float(t.value) if not isinstance(t.value, (list, tuple)) else float(t.value[0]))
                elif t.is_runtime_pass_by_value:
                    ins[t.uid] = ("scalar",)
                else:
                    s = cg.bcast_strides(dims(t), strides(t), domain)
                    _need(s is not None, f"tensor {t.uid} does not broadcast to {domain}")
                    ins[t.uid] = ("ptr", s, dt(t))
                args.append(f"x{t.uid}")
        o = r["out_0"]
        _need(dims(o) == list(domain), "pointwise outputs of different shapes in one run")
        expr = cg.pw_expression(n, args)
        if dt(o) != "FLOAT":
            expr = f"hdn_round<{CTYPE[dt(o)]}>({expr})"
        stmts.append(f"const float v{o.uid} = {expr};")
        needed = (not o.virtual) or any(node_unit[j] != ui for j in consumers.get(o.uid, []))
        if needed:
            outs.append((o.uid, strides(o), dt(o)))
    return ins, stmts, outs


def _emit_pw(prog, graph, nodes, members, IOs, loc, consumers, node_unit, ui, tag):
    first_out = graph.tensors[IOs[_topo(members, IOs)[-1]][1][0]]
    domain = dims(first_out)
    ins, stmts, outs = _pw_body(graph, nodes, members, IOs, loc, consumers, node_unit, ui, domain)
    _need(outs, "pointwise run writes nothing")
    prim = outs[-1]
    order = cg.dense_order(domain, prim[1])
    ew_ins = []
    args = []
    for u, spec in ins.items():
        if spec[0] == "const":
            ew_ins.append(EwIn(f"x{u}", const=spec[1]))
        elif spec[0] == "scalar":
            ew_ins.append(EwIn(f"x{u}", scalar=True, param=f"p{u}"))
            args.append(loc[u])
        else:
            ew_ins.append(EwIn(f"x{u}", spec[2], spec[1], param=f"p{u}"))
            args.append(loc[u])
    ew_outs = [EwOut(f"v{u}", d, s, f"o{u}") for u, s, d in [outs[-1]] + outs[:-1]]
    for u, s, d in [outs[-1]] + outs[:-1]:
        args.append(loc[u])
    name = f"hdn_pw_{tag}"
    src, grid, block = cg.elementwise_source(name, domain, order, ew_ins, stmts, ew_outs)
    prog.steps.append(("launch", src, name, grid, block, args))


# =========================================================================== GEMM
def _al(xs, q=8):
    return all(int(v) % q == 0 for v in xs)


def _x_tap_address(xs, p, H, nsp):
    """The implicit-GEMM address statements of one activation element (image nn, channel cc,
    output position p*, filter tap r*, already decoded): the input position of each spatial dim
    (-1, i.e. zero, in the padding) and the element offset with the strides xs."""
    la, offs = [], [f"(long long)nn * {xs[0]}", f"(long long)cc * {xs[1]}"]
    for j in range(nsp):
        la.append(f"const int h{j} = p{j} * {p['stride'][j]} - {p['pre_padding'][j]} + r{j} * {p['dilation'][j]};")
        la.append(f"if (h{j} < 0 || h{j} >= {H[j]}) return -1;")
        offs.append(f"(long long)h{j} * {xs[2 + j]}")
    return la + ["return " + " + ".join(offs) + ";"]


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


def _dense(bdims, bstrides, smn, sk, batch):
    """(smn, sk, sb, batch) when the batch dims fold into one stride sb, else None."""
    live = [(d, s) for d, s in zip(bdims, bstrides) if d > 1]
    for (d0, s0), (d1, s1) in zip(live, live[1:]):
        if s0 != s1 * d1:
            return None
    sb = live[-1][1] if live else 0
    return (smn, sk, sb, batch)


def _spec_matmul(spec, r):
    a, b, c = r["a"], r["b"], r["c"]
    cd = dims(c)
    M, K, N = dims(a)[-2], dims(a)[-1], dims(b)[-1]
    bdims = cd[:-2]
    batch = math.prod(bdims) if bdims else 1
    sa = cg.bcast_strides(dims(a)[:-2], strides(a)[:-2], bdims) if bdims else []
    sb = cg.bcast_strides(dims(b)[:-2], strides(b)[:-2], bdims) if bdims else []
    _need(sa is not None and sb is not None, "matmul batch dims do not broadcast")
    sAm, sAk = strides(a)[-2], strides(a)[-1]
    sBk, sBn = strides(b)[-2], strides(b)[-1]
    spec.M, spec.N, spec.K, spec.batch = M, N, K, batch
    spec.ta, spec.tb = dt(a), dt(b)
    spec.load_a = (cg.batch_offset_code("bo", bdims, sa) +
                   f" return bo + (long long)m * {sAm} + (long long)k * {sAk};")
    spec.load_b = (cg.batch_offset_code("bo", bdims, sb) +
                   f" return bo + (long long)k * {sBk} + (long long)n * {sBn};")
    spec.a_kcontig = abs(sAk) <= abs(sAm)
    spec.b_kcontig = abs(sBk) <= abs(sBn)
    if sAk == 1 and K % 8 == 0 and _al([sAm] + sa):
        spec.a_mode = 1
    elif sAm == 1 and M % 8 == 0 and _al([sAk] + sa):
        spec.a_mode = 2
    if sBk == 1 and K % 8 == 0 and _al([sBn] + sb):
        spec.b_mode = 1
    elif sBn == 1 and N % 8 == 0 and _al([sBk] + sb):
        spec.b_mode = 2
    spec.a_dense = _dense(bdims, sa, sAm, sAk, batch)
    spec.b_dense = _dense(bdims, sb, sBn, sBk, batch)
    coord = []
    rem = "b"
    for d in reversed(range(len(bdims))):
        coord.append(f"const int c{d} = {rem} % {bdims[d]}; const int rc{d} = {rem} / {bdims[d]};")
        rem = f"rc{d}"
    coord.append(f"const int c{len(cd) - 2} = m; const int c{len(cd) - 1} = n;")
    return c, coord, cd, len(cd) - 1, True, [a, b]


def _linear(radices, strides):
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


def _c_tma(spec, kind, domain, n_dim, out_strides):
    """(sm, sb) when the GEMM output over ``domain`` is element (b, m, n) at b * sb + m * sm + n
    (conv forward: m over (image, output positions); matmul: b over the batch dims), else None."""
    st = [v if domain[d] != 1 else 0 for d, v in enumerate(out_strides)]
    if domain[n_dim] > 1 and st[n_dim] != 1:
        return None
    if kind == "ConvolutionFwdAttributes":
        sm = _linear([domain[0]] + list(domain[2:]), [st[0]] + list(st[2:]))
        return (sm, 0) if sm is not None else None
    if kind == "MatmulAttributes":
        sm = st[-2] if domain[-2] > 1 else spec.N
        sb = _linear(domain[:-2], st[:-2]) if len(domain) > 2 else 0
        if sm is None or sb is None or sm <= 0:
            return None
        return sm, (sb if spec.batch > 1 else 0)
    return None


def _spec_conv_fwd(spec, node, r):
    x, w, y = r["x"], r["w"], r["y"]
    xd, wd, yd = dims(x), dims(w), dims(y)
    xs, ws_, ys = strides(x), strides(w), strides(y)
    nsp = len(xd) - 2
    p = conv_params(node, nsp)
    N, C, K = xd[0], xd[1], wd[0]
    P, Rk, H = yd[2:], wd[2:], xd[2:]
    spec.M, spec.N, spec.K, spec.batch = N * math.prod(P), K, C * math.prod(Rk), 1
    KG = spec.K
    spec.ta, spec.tb = dt(x), dt(w)
    cl = xs[1] == 1 and C > 1   # channels-last: reduction order (r..., c)
    mdec = _kdec("m", P[::-1] + [0], [f"p{j}" for j in reversed(range(nsp))] + ["nn"])
    if cl:
        kdec = _kdec("k", [C] + Rk[::-1] + [0], ["cc"] + [f"r{j}" for j in reversed(range(nsp))] + ["rlast"])
    else:
        kdec = _kdec("k", Rk[::-1] + [0], [f"r{j}" for j in reversed(range(nsp))] + ["cc"])
    la = list(mdec) + list(kdec)
    spec.load_a = " ".join(la + _x_tap_address(xs, p, H, nsp))
    lb = list(kdec)
    boffs = [f"(long long)n * {ws_[0]}", f"(long long)cc * {ws_[1]}"]
    for j in range(nsp):
        rj = f"({Rk[j] - 1} - r{j})" if p["flip"] else f"r{j}"
        boffs.append(f"(long long){rj} * {ws_[2 + j]}")
    lb.append("return " + " + ".join(boffs) + ";")
    spec.load_b = " ".join(lb)
    spec.a_kcontig = cl
    spec.b_kcontig = True
    if cl and C % 8 == 0 and _al([xs[0]] + xs[2:]):
        spec.a_mode = 1
        spec.a_rows = lambda bk: implicit.conv_fwd_rows(spec, xd, xs, P, Rk, p, bk)
    if not cl and _nchw_mvec(spec.ta, spec.tb, xd, xs, P, Rk, p):
        # fp32 NCHW 1 x 1, unit stride, no padding: 4 consecutive m (output positions of one
        # image) are 4 contiguous x elements - the SIMT core's 16-byte m-vector A loads
        spec.a_mode = 2
    elif not cl:     # NCHW: (channel, tap) k; channels-last keeps its cheaper generic decode (fewer registers)
        spec.simt_rows = lambda: implicit.conv_fwd_rows_simt(spec, xd, xs, P, Rk, p, cl)
    if cl and ws_[1] == 1 and C % 8 == 0 and _al([ws_[0]] + ws_[2:]):
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
        sm = _linear([N] + list(P), [xs[0]] + list(xs[2:]))
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
    if cl and K % 8 == 0 and _al([ys[0]] + ys[2:]):
        spec.a_mode = 1
        # packed NHWC dy: a dense [N * P, K] matrix (the tensor copy engine)
        want, packed = K, True
        for j in reversed(range(nsp)):
            packed = packed and (P[j] == 1 or ys[2 + j] == want)
            want *= P[j]
        if packed and (N == 1 or ys[0] == want):
            spec.a_dense = (K, 1, 0, 1)
    if ws_[1] == 1 and C % 8 == 0 and _al([ws_[0]]):
        spec.b_mode = 2
        spec.b_dense = (1, ws_[0], 0, 1)
    elif ws_[0] == 1 and K % 8 == 0 and _al([ws_[1]]):
        spec.b_mode = 1
        spec.b_kcontig = True
        spec.b_dense = (ws_[1], 1, 0, 1)
    coord = list(mdec) + ["const int c0 = nn; const int c1 = n;"] + \
        [f"const int c{2 + j} = p{j} * {p['stride'][j]};" for j in range(nsp)]
    return dx, coord, xd, 1, True, [dy, w]


def _spec_conv_bwd_data(spec, node, r):
    """dx[n, c, h] = sum_{k, r} dy[n, k, (h + pad - r * dil) / stride] * w[k, c, r]:
    GEMM M = N * prod(H) (dx positions), N = C, K = K * prod(R); taps whose output position is
    not integral or out of range load zero."""
    dy, w, dx = r["dy"], r["w"], r["dx"]
    xd, wd, yd = dims(dx), dims(w), dims(dy)
    xs, ws_, ys = strides(dx), strides(w), strides(dy)
    nsp = len(xd) - 2
    p = conv_params(node, nsp)
    N, C, K = xd[0], xd[1], wd[0]
    P, Rk, H = yd[2:], wd[2:], xd[2:]
    spec.M, spec.N, spec.K, spec.batch = N * math.prod(H), C, K * math.prod(Rk), 1
    spec.ta, spec.tb = dt(dy), dt(w)
    cl = ys[1] == 1 and K > 1
    mdec = _kdec("m", H[::-1] + [0], [f"h{j}" for j in reversed(range(nsp))] + ["nn"])
    if cl:
        kdec = _kdec("k", [K] + Rk[::-1] + [0], ["kc"] + [f"r{j}" for j in reversed(range(nsp))] + ["rlast"])
    else:
        kdec = _kdec("k", Rk[::-1] + [0], [f"r{j}" for j in reversed(range(nsp))] + ["kc"])
    la = list(mdec) + list(kdec)
    offs = [f"(long long)nn * {ys[0]}", f"(long long)kc * {ys[1]}"]
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
    boffs = [f"(long long)kc * {ws_[0]}", f"(long long)n * {ws_[1]}"]
    for j in range(nsp):
        rj = f"({Rk[j] - 1} - r{j})" if p["flip"] else f"r{j}"
        boffs.append(f"(long long){rj} * {ws_[2 + j]}")
    lb.append("return " + " + ".join(boffs) + ";")
    spec.load_b = " ".join(lb)
    spec.a_kcontig = cl
    spec.b_kcontig = False
    if cl and K % 8 == 0 and _al([ys[0]] + ys[2:]):
        spec.a_mode = 1
        spec.a_rows = lambda bk: implicit.conv_bwd_data_rows(spec, yd, ys, H, Rk, p, bk)
    if ws_[1] == 1 and C % 8 == 0 and _al([ws_[0]] + ws_[2:]):
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
    elif cl and ws_[0] == 1 and K % 8 == 0 and _al([ws_[1]] + ws_[2:]):
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
    N, C, K = xd[0], xd[1], wd[0]
    P, Rk, H = yd[2:], wd[2:], xd[2:]
    spec.M, spec.N, spec.K, spec.batch = K, C * math.prod(Rk), N * math.prod(P), 1
    spec.ta, spec.tb = dt(dy), dt(x)
    cl = xs[1] == 1 and C > 1
    kdec = _kdec("k", P[::-1] + [0], [f"p{j}" for j in reversed(range(nsp))] + ["nn"])
    if cl:
        ndec = _kdec("n", [C] + Rk[::-1] + [0], ["cc"] + [f"r{j}" for j in reversed(range(nsp))] + ["rlast"])
    else:
        ndec = _kdec("n", Rk[::-1] + [0], [f"r{j}" for j in reversed(range(nsp))] + ["cc"])
    la = list(kdec) + ["return (long long)nn * %d + (long long)m * %d" % (ys[0], ys[1]) +
                       "".join(f" + (long long)p{j} * {ys[2 + j]}" for j in range(nsp)) + ";"]
    spec.load_a = " ".join(la)
    lb = list(kdec) + list(ndec)
    offs = [f"(long long)nn * {xs[0]}", f"(long long)cc * {xs[1]}"]
    for j in range(nsp):
        lb.append(f"const int h{j} = p{j} * {p['stride'][j]} - {p['pre_padding'][j]} + r{j} * {p['dilation'][j]};")
        lb.append(f"if (h{j} < 0 || h{j} >= {H[j]}) return -1;")
        offs.append(f"(long long)h{j} * {xs[2 + j]}")
    lb.append("return " + " + ".join(offs) + ";")
    spec.load_b = " ".join(lb)
    spec.a_kcontig = abs(ys[-1]) <= abs(ys[1])
    spec.b_kcontig = not cl
    if ys[1] == 1 and K % 8 == 0 and _al([ys[0]] + ys[2:]):
        spec.a_mode = 2
    if cl and C % 8 == 0 and _al([xs[0]] + xs[2:]):
        spec.b_mode = 2
    coord = list(ndec) + ["const int c0 = m; const int c1 = cc;"]
    for j in range(nsp):
        rj = f"({Rk[j] - 1} - r{j})" if p["flip"] else f"r{j}"
        coord.append(f"const int c{2 + j} = {rj};")
    run_ok = (cl or math.prod(Rk) == 1) and C % 8 == 0
    spec.wgrad = _wgrad_tma(spec, xd, xs, yd, ys, P, Rk, H, p)
    return dw, coord, wd, 1, run_ok, [dy, x]


def _wgrad_swap_wanted(node, r, core):
    """Compute dw^T (GEMM M = C * R * S, N = K) instead of dw (M = K): when the output channels
    fill at most half of the 128-row wgmma tile (K <= 64 < C * R * S) and the tensor-map
    backward filter applies (program._wgrad_tma).  Knob ``HIPDNN_CABI_HIP_WGRAD_SWAP``: ``auto``
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
    if _al([xs[0]] + xs[2:]):
        spec.a_mode = 2           # 8 consecutive m = 8 channels of one tap: one 16-byte chunk
    if _al([ys[0]] + ys[2:]):
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
                loop.append(f"e{u}[j8] = hdn_from_float<{CTYPE[d]}>({var}).bits;")
                post.append(f"*reinterpret_cast<uint2*>(o{u} + {cg.offset_expr(st)}) = pk{u};")
            elif cg.ELEM_SIZE[d] == 2:
                pre.append(f"uint4 pk{u}; hdn_u16* e{u} = reinterpret_cast<hdn_u16*>(&pk{u});")
                loop.append(f"e{u}[j8] = hdn_bits(hdn_from_float<{CTYPE[d]}>({var}));")
                post.append(f"*reinterpret_cast<uint4*>(o{u} + {cg.offset_expr(st)}) = pk{u};")
            else:
                pre.append(f"float4 fa{u}, fb{u}; float* e{u} = &fa{u}.x; float* f{u} = &fb{u}.x;")
                loop.append(f"if (j8 < 4) e{u}[j8] = {var}; else f{u}[j8 - 4] = {var};")
                post.append(f"*reinterpret_cast<float4*>(o{u} + {cg.offset_expr(st)}) = fa{u}; "
                            f"*reinterpret_cast<float4*>(o{u} + {cg.offset_expr(st)} + 4) = fb{u};")
        else:
            loop.append(f"o{u}[{cg.offset_expr(st)}] = hdn_from_float<{CTYPE[d]}>({var});")
    body = pre + ["#pragma unroll", "for (int j8 = 0; j8 < 8; ++j8) { const int nj8 = n + j8; "
                  "{ const int n = nj8; const float v = vv[j8];"] + coord + ins_lines + stmts + \
        loop + ["} }"]
    if post:
        body += ["{"] + coord + post + ["}"]
    return "\n".join(body)


def _emit_gemm(prog, graph, node, r, epi_members, nodes, IOs, loc, consumers, node_unit, ui,
               tag, use_mma, sms=132, arch=None, tf32=False):
    spec = GemmSpec()
    # operands the wgmma core cannot read in place (NCHW, TF32 M/N-major) -> workspace copies
    tin = r[{"MatmulAttributes": "a", "ConvolutionFwdAttributes": "x",
             "ConvolutionBwdAttributes": "dy", "ConvolutionWrwAttributes": "x"}[node.kind]]
    if arch is not None:
        core0 = choose_core(dt(tin), dt(tin), arch, use_mma, tf32)
        r = layout.prepare(prog, node, r, loc, tag, core0, (tf32 and dt(tin) == "FLOAT") or dt(tin) in cg.FP8)
        if node.kind == "ConvolutionFwdAttributes" and not _fwd_mvec(node, r):
            # fp32 NCHW on the FFMA core: NHWC copies when the cost model says so (layout.py)
            r = layout.prepare_simt(prog, node, r, loc, tag, core0, sms)
    if node.kind == "MatmulAttributes":
        out, coord, domain, n_dim, run_ok, first = _spec_matmul(spec, r)
    elif node.kind == "ConvolutionFwdAttributes":
        out, coord, domain, n_dim, run_ok, first = _spec_conv_fwd(spec, node, r)
    elif node.kind == "ConvolutionBwdAttributes" and not epi_members and _strided_1x1(node, r) \
            and span_elems(r["dx"]) == math.prod(dims(r["dx"])) and non_overlapping(r["dx"]) \
            and all(v >= 0 for v in strides(r["dx"])) and knob("STRIDED_DGRAD", "1") not in ("0", "off"):
        out, coord, domain, n_dim, run_ok, first = _spec_conv_bwd_data_strided(spec, node, r)
        # the positions the stride skips are zero: clear dx, the GEMM then writes the rest
        prog.steps.append(("memset", loc[out.uid], span_elems(out) * cg.ELEM_SIZE[dt(out)]))
        prog.notes.append(f"{node.kind}: strided 1x1 decomposition (dx cleared, GEMM over dy positions)")
    elif node.kind == "ConvolutionBwdAttributes":
        out, coord, domain, n_dim, run_ok, first = _spec_conv_bwd_data(spec, node, r)
    elif _wgrad_swap_wanted(node, r, choose_core(dt(r["x"]), dt(r["dy"]), arch, use_mma, tf32)
                            if arch is not None else "mma"):
        out, coord, domain, n_dim, run_ok, first = _spec_conv_bwd_filter_swapped(spec, node, r)
        prog.notes.append(f"{node.kind}: dw^T GEMM (M = C*R*S = {spec.M}, N = K = {spec.N})")
    else:
        out, coord, domain, n_dim, run_ok, first = _spec_conv_bwd_filter(spec, node, r)
    # epilogue: the fused pointwise run (or a plain store)
    params = []
    args = []
    ins_lines = []
    if epi_members:
        ins, stmts, pouts = _pw_body(graph, nodes, epi_members, IOs, loc, consumers, node_unit,
                                     ui, domain, seed=out.uid)
        for u, s in ins.items():
            if s[0] == "const":
                ins_lines.append(f"const float x{u} = {cg.flit(s[1])};")
            elif s[0] == "scalar":
                params.append(f"const float p{u}")
                args.append(loc[u])
                ins_lines.append(f"const float x{u} = p{u};")
            else:
                params.append(f"const {CTYPE[s[2]]}* __restrict__ p{u}")
                args.append(loc[u])
                st = [v if domain[d] != 1 else 0 for d, v in enumerate(s[1])]
                ins_lines.append(f"const float x{u} = hdn_to_float(p{u}[{cg.offset_expr(st)}]);")
        outs = [(u, s, d, f"v{u}") for u, s, d in pouts]
        prog.notes.append(f"{node.kind} + {len(epi_members)} pointwise node(s) fused")
    else:
        stmts = []
        outs = [(out.uid, strides(out), dt(out), "v")]
    for u, s, d, var in outs:
        params.append(f"{CTYPE[d]}* __restrict__ o{u}")
        args.append(loc[u])
    body = list(coord) + ins_lines + stmts
    for u, s, d, var in outs:
        st = [v if domain[dd] != 1 else 0 for dd, v in enumerate(s)]
        body.append(f"o{u}[{cg.offset_expr(st)}] = hdn_from_float<{CTYPE[d]}>({var});")
    spec.epi_params = params
    spec.store = " ".join(body)
    if len(outs) == 1 and cg.ELEM_SIZE.get(outs[0][2]) == 2 and run_ok and \
            knob("TMA_STORE", "auto") not in ("0", "off"):
        lay = _c_tma(spec, node.kind, domain, n_dim, outs[0][1])
        if lay is not None:     # the wgmma core's TMA-store epilogue (codegen._c_tma_ok decides)
            spec.c_tma = {"uid": outs[0][0], "dtype": outs[0][2], "sm": lay[0], "sb": lay[1],
                          "value": "\n".join(list(coord) + ins_lines + stmts + [f"return {outs[0][3]};"])}
    if spec.N % 8 == 0:
        spec.store8 = _store8(coord, ins_lines, stmts, outs, domain, n_dim, run_ok)
    core = choose_core(spec.ta, spec.tb, arch, use_mma, tf32)
    if core == "wgmma" and (spec.ta == "FLOAT" or spec.ta in cg.FP8) and 2 in (spec.a_mode, spec.b_mode):
        core = "simt"       # tf32 / fp8 wgmma read K-major operands only
    if core == "wgmma" and spec.ta in cg.FP8:
        # 16-byte chunks are 16 fp8 elements: the 8-element checks of the builders are not
        # enough; keep a chunk gather only for operands the tensor copy engine or the
        # precomputed conv addressing (channels % 128) takes, else gather elements
        from .gemm_core import tma_ok
        if spec.a_mode == 1 and not tma_ok(spec.a_dense, spec.ta) and \
                not (spec.a_rows is not None and spec.a_rows(128)):
            spec.a_mode = 0
        if spec.b_mode == 1 and not tma_ok(spec.b_dense, spec.tb):
            spec.b_mode = 0
    if core == "wgmma" and arch is None:
        core = "mma"
    g = cg.gemm_source(spec, core != "simt", sms, core)
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
    if g["split"] > 1:
        part = ("ws", prog.ws_alloc(g["part_bytes"]))
        src, name, grid, block = g["gemm"]
        prog.steps.append(("launch", src, name, grid, block, ab + [part]) + ((opts,) if opts else ()))
        src, name, grid, block = g["reduce"]
        prog.steps.append(("launch", src, name, grid, block, [part] + args))
        prog.notes.append(f"{node.kind}: split-K x{g['split']}")
    else:
        src, name, grid, block = g["gemm"]
        prog.steps.append(("launch", src, name, grid, block, ab + args) + ((opts,) if opts else ()))


# =========================================================================== batchnorm
def _chan_in(t, domain, var, loc, ins, args):
    s = cg.per_channel_strides(t, domain)
    _need(s is not None, f"tensor {t.uid}: per-channel layout")
    ins.append(EwIn(var, dt(t), s, param=f"p_{var}"))
    args.append(loc[t.uid])


def _emit_bn_inf(prog, graph, r, loc, tag):
    """y = (x - mean) * inv_variance * scale + bias; with ``variance`` (the VarianceExt node)
    inv_variance = 1 / sqrt(variance + epsilon), epsilon baked, a device scalar or a runtime
    pass-by-value one."""
    x, y = r["x"], r["y"]
    domain = dims(x)
    ins, args = [EwIn("xv", dt(x), strides(x), param="px")], [loc[x.uid]]
    var = "variance" in r
    for role, v in (("mean", "mu"), ("variance" if var else "inv_variance", "iv"),
                    ("scale", "sc"), ("bias", "bi")):
        _chan_in(r[role], domain, v, loc, ins, args)
    if var:
        e = r["epsilon"]
        ev = _scalar(e)
        if ev is not None:
            ins.append(EwIn("ep", const=ev))
        elif e.is_runtime_pass_by_value:
            ins.append(EwIn("ep", scalar=True, param="p_ep"))
            args.append(loc[e.uid])
        else:
            ins.append(EwIn("ep", dt(e), [0] * len(domain), param="p_ep"))
            args.append(loc[e.uid])
        stmts = ["const float yv = (xv - mu) * (1.0f / sqrtf(iv + ep)) * sc + bi;"]
    else:
        stmts = ["const float yv = (xv - mu) * iv * sc + bi;"]
    outs = [EwOut("yv", dt(y), strides(y), "py")]
    args.append(loc[y.uid])
    name = f"hdn_bn_inf_{tag}"
    src, grid, block = cg.elementwise_source(name, domain, cg.dense_order(domain, strides(y)),
                                             ins, stmts, outs)
    prog.steps.append(("launch", src, name, grid, block, args))


def _scalar(t):
    if t is None:
        return None
    v = t.value
    if v is None:
        return None
    return float(v[0] if isinstance(v, (list, tuple)) else v)


def _emit_bn_train(prog, graph, r, loc, tag):
    x, y = r["x"], r["y"]
    domain = dims(x)
    C = domain[1]
    M = math.prod(domain) // max(1, C)
    xs = strides(x)
    # channels-last packed: x viewed as [M, C]
    cl = xs[1] == 1 and cg.is_dense(domain, xs) and cg.dense_order(domain, xs)[-1] == 1
    ws = prog.small_alloc(16 * C)   # double sum[C], sumsq[C]
    ab = prog.small_alloc(8 * C)    # float A[C], B[C]
    prog.steps.append(("memset", ws, 16 * C))
    src, grid, block = cg.bn_stats_source(x, C, cl, M)
    prog.steps.append(("launch", src, "hdn_bn_stats", grid, block, [loc[x.uid], ws]))
    pdt = dt(r["scale"])
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
    # as a kernel argument: "ARG") or a 1-element device tensor (pointer)
    if eps is None:
        t = r["epsilon"]
        sptr["epsilon"] = "ARG" if t.is_runtime_pass_by_value else CTYPE[dt(t)]
        fargs.append(loc[t.uid])
    if run and mom is None:
        t = r["momentum"]
        sptr["momentum"] = "ARG" if t.is_runtime_pass_by_value else CTYPE[dt(t)]
        fargs.append(loc[t.uid])
    src, grid, block = cg.bn_finalize_source(C, M, pdt, eps, mom, outs, sptr)
    prog.steps.append(("launch", src, "hdn_bn_finalize", grid, block, fargs))
    # apply: y = x * A[c] + B[c]
    cs = [0] * len(domain)
    cs[1] = 1
    ins = [EwIn("xv", dt(x), xs, param="px"), EwIn("fa", "FLOAT", cs, param="pa"),
           EwIn("fb", "FLOAT", cs, param="pb")]
    name = f"hdn_bn_apply_{tag}"
    src, grid, block = cg.elementwise_source(name, domain, cg.dense_order(domain, strides(y)), ins,
                                             ["const float yv = fmaf(xv, fa, fb);"],
                                             [EwOut("yv", dt(y), strides(y), "py")])
    prog.steps.append(("launch", src, name, grid, block,
                       [loc[x.uid], ab, (ab[0], ab[1] + 4 * C), loc[y.uid]]))


def _emit_bn_bwd(prog, graph, r, loc, tag):
    """dbias = sum(dy), dscale = sum(dy * xhat), dx = scale * iv * (dy - dbias / M -
    xhat * dscale / M) with xhat = (x - mean) * iv: memset + sums + finalize + apply."""
    x, dy, dx = r["x"], r["dy"], r["dx"]
    domain = dims(x)
    C = domain[1]
    M = math.prod(domain) // max(1, C)
    ws = prog.small_alloc(16 * C)   # double sum(dy)[C], sum(dy * xhat)[C]
    co = prog.small_alloc(20 * C)   # float mean, iv, scale*iv, dbias/M, dscale/M [C each]
    prog.steps.append(("memset", ws, 16 * C))
    ms, ivs = cg.per_channel_strides(r["mean"], domain), cg.per_channel_strides(r["inv_variance"], domain)
    _need(ms is not None and ivs is not None, "batchnorm backward: per-channel layout")
    src, grid, block = cg.bn_bwd_sums_source(x, dy, r["mean"], r["inv_variance"], C, domain)
    prog.steps.append(("launch", src, "hdn_bn_bwd_sums", grid, block,
                       [loc[dy.uid], loc[x.uid], loc[r["mean"].uid], loc[r["inv_variance"].uid],
                        ws]))
    src, grid, block = cg.bn_bwd_finalize_source(C, M, r)
    prog.steps.append(("launch", src, "hdn_bn_bwd_finalize", grid, block,
                       [ws, co, loc[r["mean"].uid], loc[r["inv_variance"].uid],
                        loc[r["scale"].uid], loc[r["dscale"].uid], loc[r["dbias"].uid]]))
    cs = [0] * len(domain)
    cs[1] = 1
    ins = [EwIn("dyv", dt(dy), strides(dy), param="pdy"), EwIn("xv", dt(x), strides(x), param="px")]
    args = [loc[dy.uid], loc[x.uid]]
    for k, var in enumerate(("mu", "iv", "a", "k1", "k2")):
        ins.append(EwIn(var, "FLOAT", cs, param=f"p_{var}"))
        args.append((co[0], co[1] + 4 * C * k))
    name = f"hdn_bn_bwd_apply_{tag}"
    src, grid, block = cg.elementwise_source(
        name, domain, cg.dense_order(domain, strides(dx)), ins,
        ["const float dxv = a * (dyv - k1 - (xv - mu) * iv * k2);"],
        [EwOut("dxv", dt(dx), strides(dx), "pdx")])
    args.append(loc[dx.uid])
    prog.steps.append(("launch", src, name, grid, block, args))


def _emit_reduction(prog, node, r, loc, tag, sms):
    x, y = r["in"], r["out"]
    mode = cg.FB_NAMES["ReductionMode"][node.attrs.get("mode")]
    steps, ws_bytes = cg.reduction_sources(mode, x, y, sms, tag)
    part = prog.small_alloc(ws_bytes) if ws_bytes else None
    for src, name, grid, block, argspec in steps:
        args = []
        for a in argspec:
            args.append(loc[x.uid] if a == "x" else loc[y.uid] if a == "y" else part)
        prog.steps.append(("launch", src, name, grid, block, args))
