"""Pointwise nodes: a connected run of them becomes ONE elementwise kernel (broadcast operands
and constants baked in, runtime pass-by-value scalars as kernel arguments); the same run body is
the epilogue of a GEMM or a norm kernel the scheduler fuses it into (program.py decides).
"""
from __future__ import annotations

import re

from hipdnn_cabi.schemas.catalog import FB_NAMES

from .. import codegen as cg
from ..codegen import EwIn, EwOut
from ._base import (COMPUTE_TYPES, _need, NotApplicable, check_tensors, check_types, dims, dt,
                    kinds, op, roles, strides)

KINDS = kinds("pointwise")
BOOL = "UNSET"        # a non-virtual UNSET tensor is a BOOLEAN one (stored 0 / 1, one byte)
INT8S = ("INT8", "UINT8")
INTS = INT8S + ("INT32", "INT64")
# types a fused GEMM / norm epilogue does not store: the pointwise kernel only
NOT_FUSED = (BOOL,) + INT8S + cg.WIDE
DBL_MAX = 1.7976931348623157e308
_OP = op(KINDS[0])
INS, (OUT,) = _OP.inputs, _OP.outputs
# every by-value scalar role of the catalog may be a runtime pass-by-value scalar here
RUNTIME_SCALARS = {k: op(k).scalar_roles for k in KINDS}

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
    # comparisons and logic produce 1 / 0 (stored as BOOLEAN, or as a number in any float type)
    "CMP_EQ": (2, "((a == b) ? 1.0f : 0.0f)"), "CMP_NEQ": (2, "((a != b) ? 1.0f : 0.0f)"),
    "CMP_GT": (2, "((a > b) ? 1.0f : 0.0f)"), "CMP_GE": (2, "((a >= b) ? 1.0f : 0.0f)"),
    "CMP_LT": (2, "((a < b) ? 1.0f : 0.0f)"), "CMP_LE": (2, "((a <= b) ? 1.0f : 0.0f)"),
    "LOGICAL_AND": (2, "((a != 0.0f && b != 0.0f) ? 1.0f : 0.0f)"),
    "LOGICAL_OR": (2, "((a != 0.0f || b != 0.0f) ? 1.0f : 0.0f)"),
    "LOGICAL_NOT": (1, "((a == 0.0f) ? 1.0f : 0.0f)"),
    # backward activations: a = dy, b = x (the CPU reference's formulas)
    "GELU_BWD": (2, "(a * (0.5f * (1.0f + erff(b * 0.70710678118654752f)) + "
                    "b * 0.39894228040143268f * expf(-0.5f * b * b)))"),
    "GELU_APPROX_TANH_BWD": (2, "(a * (0.5f * (1.0f + tanhf(0.79788456080286536f * (b + 0.044715f * b * b * b)))"
                               " + 0.5f * b * (1.0f - tanhf(0.79788456080286536f * (b + 0.044715f * b * b * b))"
                               " * tanhf(0.79788456080286536f * (b + 0.044715f * b * b * b)))"
                               " * 0.79788456080286536f * (1.0f + 0.134145f * b * b)))"),
    "ELU_BWD": (2, None), "SOFTPLUS_BWD": (2, None), "SWISH_BWD": (2, None),
    # each element's index along an axis of x (integer outputs; run_body writes it)
    "GEN_INDEX": (1, None),
}
PW_PARAMS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "swish_beta",
             "elu_alpha", "softplus_beta")


def pw_mode_name(node) -> str | None:
    return FB_NAMES["PointwiseMode"].get(node.attrs.get("operation"))


# float spellings of the expressions -> their double ones (64-bit compute)
_F_LIT = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)f\b")
_F_FUN = re.compile(r"\b(exp|log|sqrt|fabs|ceil|floor|sin|tan|erf|tanh|expm1|fmin|fmax|log1p)f\(")


def widen(expr: str) -> str:
    """A float expression of :func:`pw_expression` in double: literals and math functions in
    their double spellings, the NaN-propagating min / max as hdn_fmin_d / hdn_fmax_d."""
    expr = _F_LIT.sub(r"\1", expr)
    expr = _F_FUN.sub(r"\1(", expr)
    return expr.replace("hdn_fmax(", "hdn_fmax_d(").replace("hdn_fmin(", "hdn_fmin_d(")


def node_wide(node, graph) -> bool:
    """Whether the CPU reference computes the node in float64: integer / BOOLEAN inputs only,
    one of them 32 / 64-bit; else compute type DOUBLE, or UNSET with a DOUBLE tensor.  Host
    scalars (by-value, runtime pass-by-value) do not count: they reach the kernel as values."""
    r = roles(node, graph)
    if pw_mode_name(node) == "GEN_INDEX":
        return True         # an index is exact in double (float32 holds 2^24 at most)
    ar = PW_EXPR[pw_mode_name(node)][0]
    dev = {q: dt(t) for q, t in r.items()
           if t.value is None and not t.is_runtime_pass_by_value}
    ins = [dev[q] for q in INS[:ar] if q in dev]
    if ins and all(t in INTS + (BOOL,) for t in ins):
        return any(t in ("INT32", "INT64") for t in ins)
    cd = cg.dtype_name(node.compute_dtype)
    if cd == "UNSET":
        return "DOUBLE" in dev.values()
    return cd == "DOUBLE"


def pw_expression(node, args, wide=False) -> str:
    """C expression of one pointwise node over its input expressions ``args`` (``wide``: in
    double, else float)."""
    e = _pw_expression(node, args, wide)
    return widen(e) if wide else e


def _pw_expression(node, args, wide) -> str:
    mode = pw_mode_name(node)
    ar, tmpl = PW_EXPR[mode]
    a = node.attrs
    env = dict(zip("abc", args))
    if mode == "RELU_FWD":
        lo = a.get("relu_lower_clip") or 0.0
        hi = a.get("relu_upper_clip")
        sl = a.get("relu_lower_clip_slope") or 0.0
        hi = (DBL_MAX if wide else cg.FLT_MAX) if hi is None else hi
        x = env["a"]
        if sl == 0.0 and lo <= hi:
            return f"hdn_fmax(hdn_fmin({x}, {cg.flit(hi)}), {cg.flit(lo)})"
        return (f"(({x}) <= {cg.flit(lo)} ? {cg.flit(sl)} * (({x}) - {cg.flit(lo)}) + {cg.flit(lo)} : "
                f"hdn_fmin({x}, {cg.flit(hi)}))")
    if mode == "RELU_BWD":
        lo = a.get("relu_lower_clip") or 0.0
        hi = a.get("relu_upper_clip")
        hi = (DBL_MAX if wide else cg.FLT_MAX) if hi is None else hi
        sl = a.get("relu_lower_clip_slope") or 0.0
        return (f"(({env['a']}) * (({env['b']}) <= {cg.flit(lo)} ? {cg.flit(sl)} : "
                f"(({env['b']}) > {cg.flit(hi)} ? 0.0f : 1.0f)))")
    if mode == "SWISH_FWD":
        be = a.get("swish_beta") or 1.0
        return f"(({env['a']}) / (1.0f + expf(-{cg.flit(be)} * ({env['a']}))))"
    if mode == "ELU_FWD":
        al = a.get("elu_alpha")
        al = 1.0 if al is None else al
        return f"(({env['a']}) > 0.0f ? ({env['a']}) : {cg.flit(al)} * expm1f(fminf({env['a']}, 0.0f)))"
    if mode == "ELU_BWD":
        al = a.get("elu_alpha")
        al = 1.0 if al is None else al
        dy, x = env["a"], env["b"]
        return f"(({dy}) * (({x}) > 0.0f ? 1.0f : {cg.flit(al)} * expf(fminf({x}, 0.0f))))"
    if mode in ("SOFTPLUS_BWD", "SWISH_BWD"):
        be = a.get("softplus_beta" if mode == "SOFTPLUS_BWD" else "swish_beta") or 1.0
        dy, x = env["a"], env["b"]
        sg = f"(1.0f / (1.0f + expf(-{cg.flit(be)} * ({x}))))"
        if mode == "SOFTPLUS_BWD":
            return f"(({dy}) * {sg})"
        return f"(({dy}) * ({sg} + {cg.flit(be)} * ({x}) * {sg} * (1.0f - {sg})))"
    if mode == "SOFTPLUS_FWD":
        be = a.get("softplus_beta") or 1.0
        z = f"({cg.flit(be)} * ({env['a']}))"
        return f"((fmaxf({z}, 0.0f) + log1pf(expf(-fabsf({z})))) / {cg.flit(be)})"
    return re.sub(r"\b([abc])\b", lambda m: f"({env[m.group(1)]})", tmpl)


def check(node, graph, r):
    check_tensors(node, r, RUNTIME_SCALARS[node.kind], negative=True)
    mode = pw_mode_name(node)
    # integers: 8-bit ones compute in float32 (exact), 32 / 64-bit ones, DOUBLE data and compute
    # type DOUBLE in double (node_wide), as the CPU reference; stores round and saturate as it
    # encodes; integer graphs may name an INT32 compute type
    ints = any(dt(t) in INTS for t in r.values())
    check_types(node, r, extra=(BOOL,) + INTS + ("DOUBLE",),
                computes=COMPUTE_TYPES + ("DOUBLE",) + (("INT32",) if ints else ()))
    _need(not any(dt(t) == BOOL and t.value is not None for t in r.values()),
          "BOOLEAN by-value scalars not supported")
    _need(mode in PW_EXPR, f"pointwise mode {mode} not supported")
    ar = PW_EXPR[mode][0]
    _need(all(x in r for x in INS[:ar]) and OUT in r, f"pointwise {mode}: operands missing")
    _need(r[OUT].value is None, "pointwise output cannot be a constant")
    if mode == "GEN_INDEX":
        ax = node.attrs.get("axis_tensor_uid")
        _need(ax is not None and -len(r[INS[0]].dims) <= int(ax) < len(r[INS[0]].dims),
              "GEN_INDEX axis out of range")
        _need(dt(r[OUT]) in ("INT32", "INT64"), "GEN_INDEX output must be INT32 or INT64")


def gen_index_expr(node, x, domain) -> str:
    """GEN_INDEX: the element's coordinate along the axis of x (the CPU reference indexes x's
    shape and broadcasts the result: a size-1 axis of x gives 0), over the run's domain
    coordinates ``c<d>`` of the elementwise kernel."""
    xd = dims(x)
    ax = int(node.attrs["axis_tensor_uid"]) % len(xd)
    od = ax + len(domain) - len(xd)
    return "0.0" if xd[ax] == 1 and domain[od] != 1 else f"(double)c{od}"


class Run:
    """A connected run of pointwise nodes (``members``: node indices) as the scheduler placed
    it: the graph's nodes and their (input uids, output uids), each tensor's consumers and each
    node's unit; ``ui`` is the unit the run is emitted in (its own, or the
    one it is fused into): outputs read only inside that unit stay in registers."""

    def __init__(self, graph, nodes, members, IOs, consumers, node_unit, ui):
        self.graph, self.nodes, self.members, self.IOs = graph, nodes, members, IOs
        self.consumers, self.node_unit, self.ui = consumers, node_unit, ui

    def body(self, domain, seed=None):
        return run_body(self, domain, seed)

    def stored(self, t) -> bool:
        """Whether tensor ``t`` made in this run's unit must reach memory: a graph tensor, or
        one a node of another unit reads."""
        return (not t.virtual) or any(self.node_unit[j] != self.ui for j in self.consumers.get(t.uid, []))

    def elementwise(self, domain, loc, seed=None):
        """The run as parts of an elementwise kernel (codegen.elementwise_source) seeded with
        the variable ``v``: (EwIn inputs, their args, statements, EwOut outputs, their args)."""
        ins, stmts, outs = self.body(domain, seed)
        ew_ins, in_args = ew_inputs(ins, loc)
        ew_outs, out_args = ew_outputs(outs, loc)
        return ew_ins, in_args, stmts, ew_outs, out_args


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


def run_body(run, domain, seed=None):
    """(inputs {uid: strides or const}, stmts, outputs [(uid, strides)]).  ``seed``: uid whose
    value is the variable ``v`` (the value of the kernel the run is fused into), or a dict
    {uid: variable}.  A node the CPU
    reference computes in float64 (:func:`node_wide`) computes in double; its variable, and that
    of a node with a 32 / 64-bit integer or DOUBLE output, is a double (rounded through its
    tensor's type); a float node reads a double variable rounded to float, as the CPU does."""
    graph, nodes, members, IOs = run.graph, run.nodes, run.members, run.IOs
    # seeds: uid -> variable (a paired GEMM seeds two tensors: gemm.emit_pair)
    seeds = seed if isinstance(seed, dict) else ({} if seed is None else {seed: "v"})
    order = _topo(members, IOs)
    made = {u for i in members for u in IOs[i][1]}
    ins, stmts, outs = {}, [], []
    dbl = set()          # variables that are doubles
    wides = {i: node_wide(nodes[i], graph) for i in order}
    # constants a double node reads are doubles (a fused epilogue declares them float)
    wconst = {u for i in order if wides[i] and seed is None for u in IOs[i][0]}
    for i in order:
        n = nodes[i]
        r = roles(n, graph)
        ar = PW_EXPR[pw_mode_name(n)][0]
        wide = wides[i]
        args = []
        for role in INS[:ar]:
            t = r[role]
            if t.uid in seeds:
                var = seeds[t.uid]
            elif t.uid in made:
                var = f"v{t.uid}"
            else:
                if t.value is not None:   # compile-time constant, or a runtime scalar's default
                    val = float(t.value) if not isinstance(t.value, (list, tuple)) else float(t.value[0])
                    cw = t.uid in wconst
                    ins[t.uid] = ("const", val) + ((True,) if cw else ())
                    if cw:
                        dbl.add(f"x{t.uid}")
                elif t.is_runtime_pass_by_value:
                    # a DOUBLE scalar a double node reads: a double argument (its precision kept)
                    sw = t.uid in wconst and dt(t) == "DOUBLE"
                    ins[t.uid] = ("scalar",) + ((True,) if sw else ())
                    if sw:
                        dbl.add(f"x{t.uid}")
                else:
                    s = cg.bcast_strides(dims(t), strides(t), domain)
                    _need(s is not None, f"tensor {t.uid} does not broadcast to {domain}")
                    ins[t.uid] = ("ptr", s, dt(t))
                    if dt(t) in cg.WIDE:
                        dbl.add(f"x{t.uid}")
                var = f"x{t.uid}"
            # a double node widens float operands (double math overloads), a float node rounds
            # double ones to float (the CPU reference's per-node compute type)
            args.append(f"(float)({var})" if var in dbl and not wide else
                        f"(double)({var})" if wide and var not in dbl else var)
        o = r[OUT]
        _need(dims(o) == list(domain), "pointwise outputs of different shapes in one run")
        _need(seed is None or all(v >= 0 for t in r.values() for v in strides(t)),
              "negative strides in a fused GEMM / norm epilogue")
        if pw_mode_name(n) == "GEN_INDEX":
            _need(seed is None, "GEN_INDEX in a fused epilogue")
            expr = gen_index_expr(n, r[INS[0]], domain)
        else:
            expr = pw_expression(n, args, wide)
        if wide or dt(o) in cg.WIDE:
            if not wide:
                expr = f"(double)({expr})"
            if dt(o) != "DOUBLE":
                expr = f"hdn_dround<{cg.CTYPE[dt(o)]}>({expr})"
            stmts.append(f"const double v{o.uid} = {expr};")
            dbl.add(f"v{o.uid}")
        else:
            if dt(o) != "FLOAT":
                expr = f"hdn_round<{cg.CTYPE[dt(o)]}>({expr})"
            stmts.append(f"const float v{o.uid} = {expr};")
        if run.stored(o):
            outs.append((o.uid, strides(o), dt(o)))
    return ins, stmts, outs


def ew_inputs(ins, loc):
    """EwIn operands (and their argument sources) of a run body's inputs."""
    ew_ins, args = [], []
    for u, spec in ins.items():
        if spec[0] == "const":       # (a third field: a double constant)
            ew_ins.append(EwIn(f"x{u}", const=spec[1], wide=len(spec) > 2))
        elif spec[0] == "scalar":    # (a second field: a double argument)
            wide = len(spec) > 1
            ew_ins.append(EwIn(f"x{u}", scalar=True, param=f"p{u}", wide=wide))
            args.append((tuple(loc[u]) + ("double",)) if wide else loc[u])
        else:
            ew_ins.append(EwIn(f"x{u}", spec[2], spec[1], param=f"p{u}"))
            args.append(loc[u])
    return ew_ins, args


def ew_outputs(outs, loc):
    """EwOut stores (and their argument sources) of a run body's outputs, the run's last output
    first (the kernel's primary enumeration)."""
    ordered = [outs[-1]] + outs[:-1] if outs else []
    return [EwOut(f"v{u}", d, s, f"o{u}") for u, s, d in ordered], [loc[u] for u, _, _ in ordered]


def emit(ctx, run, tag):
    """One elementwise kernel for a run of pointwise nodes (:class:`Run`): the family emits runs,
    not single nodes (program.py groups the nodes)."""
    prog, graph, loc = ctx.prog, ctx.graph, ctx.loc
    members, IOs = run.members, run.IOs
    first_out = graph.tensors[IOs[_topo(members, IOs)[-1]][1][0]]
    domain = dims(first_out)
    ins, stmts, outs = run_body(run, domain)
    _need(outs, "pointwise run writes nothing")
    prim = outs[-1]
    order = cg.dense_order(domain, prim[1])
    ew_ins, args = ew_inputs(ins, loc)
    ew_outs, out_args = ew_outputs(outs, loc)
    args += out_args
    name = f"hdn_pw_{tag}"
    src, grid, block = cg.elementwise_source(name, domain, order, ew_ins, stmts, ew_outs)
    prog.steps.append(("launch", src, name, grid, block, args))

