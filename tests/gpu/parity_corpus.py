"""The applicability-parity corpus: over 2,000 small graphs over every operation family, for the
check that the HIP engine accepts every graph the CPU reference accepts or declines it with a
reason from the documented decline list (docs/gpu.md "Decline list").

Each entry is a :class:`Case` - name, family, the tensors (``P``: typed like gpu_testlib.T, any
data type, by-value / runtime pass-by-value scalars of any float type) and the graph bytes.  The
corpus is deterministic (fixed seeds, fixed order); the GPU test runs a deterministic subset.

Axes: data types (FLOAT, HALF, BFLOAT16, DOUBLE, INT8 / INT32 where the CPU has keys), output
types, compute types (FLOAT, UNSET, ...), layouts (NCHW, NHWC, padded and permuted strides), the
scalar roles in every form (by-value FLOAT / DOUBLE, runtime pass-by-value FLOAT / DOUBLE, a
1-element device tensor), mixed-precision batchnorm parameters, virtual intermediates left UNSET
(they take the graph's intermediate type), pointwise tails.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from gpu_testlib import (FB, T, bn_bwd, bn_inf, bn_inf_var, bn_train, conv_bwd_data,
                         conv_bwd_filter, conv_fwd, graph_bytes, matmul, node, pw, reduction)

FLOATS = ("FLOAT", "HALF", "BFLOAT16")
ALLF = FLOATS + ("DOUBLE",)
# the forms a scalar role takes: (name, data type, by-value value?, runtime?)
SCALAR_FORMS = (("bv32", "FLOAT", True, False), ("bv64", "DOUBLE", True, False),
                ("rt32", "FLOAT", False, True), ("rt64", "DOUBLE", False, True),
                ("dev32", "FLOAT", False, False))


class P(T):
    """gpu_testlib.T for every data type (UNSET too: a virtual tensor typed by the graph) and
    by-value scalars of every float / integer type (its fb() serves them all)."""


@dataclass
class Case:
    name: str
    family: str
    tensors: list
    graph: bytes
    scalars: dict      # uid -> value of a runtime pass-by-value scalar (bound at execute)


def _g(tensors, nodes, io=None, inter="FLOAT"):
    return graph_bytes(tensors, nodes, io=io, intermediate=inter, compute="FLOAT")


def scalar(uid, form, v):
    """A scalar-role tensor in one of SCALAR_FORMS; returns (tensor, runtime value or None)."""
    _, dt, byval, rt = next(f for f in SCALAR_FORMS if f[0] == form)
    t = P(uid, [1], dt, value=v if byval else None,
          runtime=rt)
    return t, (v if rt else None)


def layout_strides(dims, lay):
    """Strides for a layout name: nchw / nhwc (packed), pad (NCHW with a padded innermost
    row), perm (the first two dims swapped in memory)."""
    nd = len(dims)
    if lay in ("nchw", "nhwc"):
        return P(0, dims, "FLOAT", lay).strides
    if lay == "pad":
        st, s = [0] * nd, 1
        for ax in reversed(range(nd)):
            st[ax] = s
            s *= dims[ax] + (3 if ax == nd - 1 else 0)
        return st
    order = [1, 0] + list(range(2, nd))          # perm: dim 1 outermost
    st, s = [0] * nd, 1
    for ax in reversed(order):
        st[ax] = s
        s *= dims[ax]
    return st


def _ten(uid, dims, dt, lay="nchw", **kw):
    return P(uid, dims, dt, strides=layout_strides(dims, lay), **kw)


def _with_compute(n, comp):
    n["compute_data_type"] = FB["DataType"][comp]
    return n


# ------------------------------------------------------------------------------- families
PW_UNARY = ("ABS", "CEIL", "ELU_FWD", "ERF", "EXP", "FLOOR", "GELU_APPROX_TANH_FWD", "GELU_FWD",
            "IDENTITY", "LOG", "LOGICAL_NOT", "NEG", "RECIPROCAL", "RELU_FWD", "RSQRT",
            "SIGMOID_FWD", "SIN", "SOFTPLUS_FWD", "SQRT", "SWISH_FWD", "TAN", "TANH_FWD")
PW_BINARY = ("ADD", "ADD_SQUARE", "CMP_EQ", "CMP_GE", "CMP_GT", "CMP_LE", "CMP_LT", "CMP_NEQ",
             "DIV", "ELU_BWD", "GELU_APPROX_TANH_BWD", "GELU_BWD", "LOGICAL_AND", "LOGICAL_OR",
             "MAX_OP", "MIN_OP", "MUL", "RELU_BWD", "SIGMOID_BWD", "SOFTPLUS_BWD", "SUB",
             "SWISH_BWD", "TANH_BWD")
PW_PARAMS = {"RELU_FWD": [{}, {"relu_lower_clip": -0.5, "relu_upper_clip": 0.75},
                          {"relu_lower_clip_slope": 0.1}],
             "ELU_FWD": [{}, {"elu_alpha": 0.5}], "SWISH_FWD": [{}, {"swish_beta": 1.5}],
             "SOFTPLUS_FWD": [{}, {"softplus_beta": 2.0}],
             "RELU_BWD": [{}, {"relu_lower_clip": 0.25}]}
# the second operand of a binary node: a full tensor, a broadcast row, a scalar in each form
OPERAND_FORMS = ("full", "row", "bv32", "bv64", "rt32", "rt64")


def pointwise_cases():
    out = []
    M, N = 6, 40
    for mode in PW_UNARY:
        for dt, ot in [(d, d) for d in ALLF] + [("HALF", "FLOAT"), ("FLOAT", "BFLOAT16")]:
            for k, prm in enumerate(PW_PARAMS.get(mode, [{}])):
                for lay in ("nchw", "perm"):
                    x = _ten(1, [2, 3, M, N], dt, lay)
                    y = _ten(2, [2, 3, M, N], ot, lay)
                    out.append(Case(f"pw/{mode}/{dt}>{ot}/p{k}/{lay}", "pointwise", [x, y],
                                    _g([x, y], [pw(mode, 1, 2, **prm)]), {}))
    for mode in PW_BINARY:
        for dt in ALLF:
            for form in OPERAND_FORMS:
                x = _ten(1, [M, N], dt)
                sc = {}
                if form == "full":
                    b = _ten(2, [M, N], dt)
                elif form == "row":
                    b = _ten(2, [1, N], "FLOAT")
                else:
                    b, v = scalar(2, form, 0.375)
                    sc = {2: v} if v is not None else {}
                ot = "FLOAT" if mode.startswith(("CMP", "LOGICAL")) else dt
                y = _ten(3, [M, N], ot)
                for k, prm in enumerate(PW_PARAMS.get(mode, [{}])):
                    out.append(Case(f"pw/{mode}/{dt}/{form}/p{k}", "pointwise", [x, b, y],
                                    _g([x, b, y], [pw(mode, 1, 3, 2, **prm)]), sc))
    # integer data (the CPU reference's exact saturating modes)
    for mode in ("ADD", "SUB", "MUL", "MAX_OP", "MIN_OP", "ABS", "NEG", "IDENTITY"):
        for dt in ("INT8", "UINT8", "INT32"):
            x, b, y = _ten(1, [M, N], dt), _ten(2, [M, N], dt), _ten(3, [M, N], dt)
            ts = [x, y] if mode in PW_UNARY else [x, b, y]
            n = pw(mode, 1, 3) if mode in PW_UNARY else pw(mode, 1, 3, 2)
            out.append(Case(f"pw/{mode}/{dt}", "pointwise", ts, _g(ts, [n]), {}))
    # integers with other modes / types: comparisons to BOOLEAN, conversions, integer masks
    for dt in ("INT8", "UINT8", "INT32"):
        a, b = _ten(1, [M, N], dt), _ten(2, [M, N], dt)
        for mode, ot in (("CMP_GT", "UNSET"), ("CMP_EQ", "FLOAT"), ("IDENTITY", "FLOAT")):
            y = _ten(3, [M, N], ot)
            ts = [a, y] if mode == "IDENTITY" else [a, b, y]
            n = pw(mode, 1, 3) if mode == "IDENTITY" else pw(mode, 1, 3, 2)
            out.append(Case(f"pw/{mode}/{dt}>{ot}", "pointwise", ts, _g(ts, [n]), {}))
        fa, fb, m, y = _ten(1, [M, N], "FLOAT"), _ten(2, [M, N], "FLOAT"), _ten(3, [M, N], dt), _ten(4, [M, N], "FLOAT")
        out.append(Case(f"pw/SELECT/FLOAT/mask{dt}", "pointwise", [fa, fb, m, y],
                        _g([fa, fb, m, y], [pw("BINARY_SELECT", 1, 4, 2, 3)]), {}))
    for dt in ("INT8", "UINT8"):       # exact 8-bit chains (virtual intermediates of the type)
        a, b, c = _ten(1, [M, N], dt), _ten(2, [M, N], dt), _ten(3, [M, N], dt)
        v, y = _ten(4, [M, N], dt, virtual=True), _ten(5, [M, N], dt)
        out.append(Case(f"pw/int_chain/{dt}", "pointwise", [a, b, c, v, y],
                        _g([a, b, c, v, y], [pw("MUL", 1, 4, 2), pw("SUB", 4, 5, 3)]), {}))
    # BINARY_SELECT, a comparison mask (BOOLEAN written UNSET, or FLOAT), chains with virtual
    # intermediates left UNSET
    for dt in ALLF:
        for mt in ("FLOAT", "UNSET"):
            a, b = _ten(1, [M, N], dt), _ten(2, [M, N], dt)
            m = _ten(3, [M, N], mt)
            y = _ten(4, [M, N], dt)
            out.append(Case(f"pw/SELECT/{dt}/mask{mt}", "pointwise", [a, b, m, y],
                            _g([a, b, m, y], [pw("BINARY_SELECT", 1, 4, 2, 3)]), {}))
            y2 = _ten(3, [M, N], mt)
            out.append(Case(f"pw/CMP_GT/{dt}/out{mt}", "pointwise", [a, b, y2],
                            _g([a, b, y2], [pw("CMP_GT", 1, 3, 2)]), {}))
    for dt, vt, form in itertools.product(FLOATS + ("DOUBLE",), ("UNSET", "FLOAT"),
                                          ("full", "rt32", "bv64")):
        x = _ten(1, [M, N], dt)
        b = _ten(2, [1, N], dt) if form == "full" else scalar(2, form, 1.25)[0]
        sc = {2: 1.25} if form == "rt32" else {}
        v1, v2 = _ten(3, [M, N], vt, virtual=True), _ten(4, [M, N], vt, virtual=True)
        y = _ten(5, [M, N], dt)
        ts = [x, b, v1, v2, y]
        out.append(Case(f"pw/chain/{dt}/{vt}/{form}", "pointwise", ts,
                        _g(ts, [pw("MUL", 1, 3, 2), pw("TANH_FWD", 3, 4), pw("ADD", 4, 5, 1)]), sc))
    return out


def conv_geoms():
    """(name, x dims, w dims, pad, stride, dilation)."""
    return [("3x3", [2, 8, 7, 6], [12, 8, 3, 3], [1, 1], [1, 1], [1, 1]),
            ("s2d2", [1, 4, 9, 9], [8, 4, 3, 3], [2, 1], [2, 2], [2, 1]),
            ("1x1", [2, 16, 5, 5], [8, 16, 1, 1], [0, 0], [1, 1], [1, 1]),
            ("3d", [1, 4, 4, 5, 5], [8, 4, 3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
            ("g2", [2, 8, 7, 6], [12, 4, 3, 3], [1, 1], [1, 1], [1, 1]),        # 2 groups
            ("dw", [1, 8, 9, 9], [16, 1, 3, 3], [1, 1], [2, 2], [1, 1]),        # depthwise x 2
            ("dw1d", [2, 6, 11], [6, 1, 5], [2], [1], [1]),                     # 1-D depthwise
            ("c3", [2, 3, 9, 9], [5, 3, 3, 3], [1, 1], [2, 2], [1, 1]),        # C = 3, K odd: padded
            ("c12", [1, 12, 7, 7], [20, 12, 3, 3], [1, 1], [1, 1], [1, 1])]    # C, K % 8 != 0


def _out_sp(xd, wd, pad, st, dil):
    return [(xd[2 + k] + 2 * pad[k] - dil[k] * (wd[2 + k] - 1) - 1) // st[k] + 1
            for k in range(len(xd) - 2)]


def conv_cases():
    out = []
    types = [(d, d, "FLOAT") for d in FLOATS] + [("HALF", "FLOAT", "FLOAT"), ("DOUBLE", "DOUBLE", "DOUBLE"),
             ("INT8", "INT32", "INT32"), ("INT8", "FLOAT", "INT32"), ("INT8", "INT8", "INT32")]
    for (gname, xd, wd, pad, st, dil), (dt, ot, comp), lay in itertools.product(
            conv_geoms(), types, ("nchw", "nhwc", "pad")):
        yd = [xd[0], wd[0]] + _out_sp(xd, wd, pad, st, dil)
        for kind in ("fwd", "bwd_data", "bwd_filter"):
            if kind == "fwd":
                x, w, y = _ten(1, xd, dt, lay), _ten(2, wd, dt, lay), _ten(3, yd, ot, lay)
                n = conv_fwd(1, 2, 3, pad, st, dil)
            elif kind == "bwd_data":
                x, w, y = _ten(1, yd, dt, lay), _ten(2, wd, dt, lay), _ten(3, xd, ot, lay)
                n = conv_bwd_data(1, 2, 3, pad, st, dil)
            else:
                x, w, y = _ten(1, xd, dt, lay), _ten(2, yd, dt, lay), _ten(3, wd, ot, lay)
                n = conv_bwd_filter(1, 2, 3, pad, st, dil)
            for c in (comp, "UNSET"):
                ts = [x, w, y]
                out.append(Case(f"conv/{kind}/{gname}/{dt}>{ot}/{c}/{lay}", "conv", ts,
                                _g(ts, [_with_compute(n, c)]), {}))
    # conv -> bias -> relu with virtual intermediates (typed or UNSET), scale as a scalar;
    # grouped (4 groups) and depthwise filters too
    for dt, vt, form, cw in itertools.product(FLOATS, ("FLOAT", "UNSET"), ("full", "rt32", "bv64"), (8, 2, 1)):
        xd, wd = [2, 8, 6, 6], [16, cw, 3, 3]
        x, w = _ten(1, xd, dt, "nhwc"), _ten(2, wd, dt, "nhwc")
        c = _ten(3, [2, 16, 6, 6], vt, "nhwc", virtual=True)
        b = _ten(4, [1, 16, 1, 1], dt) if form == "full" else scalar(4, form, 0.5)[0]
        v = _ten(5, [2, 16, 6, 6], vt, "nhwc", virtual=True)
        y = _ten(6, [2, 16, 6, 6], dt, "nhwc")
        ts = [x, w, c, b, v, y]
        out.append(Case(f"conv/fused/{dt}/{vt}/{form}" + ("" if cw == 8 else f"/g{8 // cw}"), "conv", ts,
                        _g(ts, [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1]), pw("ADD", 3, 5, 4),
                                pw("RELU_FWD", 5, 6)]), {4: 0.5} if form == "rt32" else {}))
    return out


def matmul_cases():
    out = []
    shapes = [("2d", [5, 24], [24, 9], [5, 9]), ("batch", [3, 5, 16], [3, 16, 7], [3, 5, 7]),
              ("bcast", [2, 3, 4, 16], [1, 1, 16, 8], [2, 3, 4, 8])]
    types = [(d, d) for d in ALLF] + [("HALF", "FLOAT"), ("BFLOAT16", "FLOAT"), ("INT8", "INT32"),
                                      ("INT8", "FLOAT"), ("INT8", "INT8")]
    for (sname, ad, bd, cd), (dt, ot), tr, comp in itertools.product(
            shapes, types, ("nn", "tn", "nt"), ("FLOAT", "UNSET", "INT32")):
        if (comp == "INT32") != (dt == "INT8") and comp != "UNSET":
            continue
        a = P(1, ad, dt, strides=_mstrides(ad, tr[0] == "t"))
        b = P(2, bd, dt, strides=_mstrides(bd, tr[1] == "t"))
        c = P(3, cd, ot)
        ts = [a, b, c]
        out.append(Case(f"matmul/{sname}/{dt}>{ot}/{tr}/{comp}", "matmul", ts,
                        _g(ts, [_with_compute(matmul(1, 2, 3), comp)]), {}))
    for dt, vt in itertools.product(FLOATS, ("FLOAT", "UNSET")):
        a, b = P(1, [8, 32], dt), P(2, [32, 16], dt)
        c, bias, v = P(3, [8, 16], vt, virtual=True), P(4, [1, 16], dt), P(5, [8, 16], vt, virtual=True)
        y = P(6, [8, 16], dt)
        ts = [a, b, c, bias, v, y]
        out.append(Case(f"matmul/fused/{dt}/{vt}", "matmul", ts,
                        _g(ts, [matmul(1, 2, 3), pw("ADD", 3, 5, 4), pw("GELU_FWD", 5, 6)]), {}))
    return out


def _mstrides(dims, trans):
    """Row-major strides; ``trans``: the last two dims stored transposed (column-major)."""
    nd = len(dims)
    order = list(range(nd - 2)) + ([nd - 1, nd - 2] if trans else [nd - 2, nd - 1])
    st, s = [0] * nd, 1
    for ax in reversed(order):
        st[ax] = s
        s *= dims[ax]
    return st


def reduction_cases():
    out = []
    modes = ("ADD", "MUL", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS")
    axes = [("last", [4, 6, 20], [4, 6, 1]), ("first", [4, 6, 20], [1, 6, 20]),
            ("all", [4, 6, 20], [1, 1, 1]), ("mid", [4, 6, 20], [4, 1, 20])]
    for mode, (an, xd, yd), dt, oft in itertools.product(modes, axes, ALLF, (False, True)):
        ot = "FLOAT" if oft else dt
        if oft and dt == "FLOAT":
            continue
        x, y = P(1, xd, dt), P(2, yd, ot)
        for comp in ("FLOAT", "UNSET"):
            out.append(Case(f"reduction/{mode}/{an}/{dt}>{ot}/{comp}", "reduction", [x, y],
                            _g([x, y], [_with_compute(reduction(mode, 1, 2), comp)]), {}))
    return out


def batchnorm_cases():
    out = []
    N, C, H, W = 2, 8, 5, 3
    xd, cd = [N, C, H, W], [1, C, 1, 1]
    # parameter precision: "data" (every per-channel tensor the data type), "float" (all FLOAT:
    # hipDNN's BnTraining sample), "mixed" (FLOAT scale / bias / previous running statistics,
    # saved and next running statistics / dscale / dbias the data type, as frameworks build it)
    pmodes = ("data", "float", "mixed")
    for dt, lay, pm in itertools.product(ALLF, ("nchw", "nhwc"), pmodes):
        def ptype(role, out_stat=False):
            if pm == "data":
                return dt
            if pm == "float":
                return "FLOAT"
            return dt if out_stat else "FLOAT"
        # inference
        x, y = _ten(0, xd, dt, lay), _ten(5, xd, dt, lay)
        ps = [P(i, cd, ptype(r, r in ("mean", "inv_variance")))
              for i, r in zip((1, 2, 3, 4), ("mean", "inv_variance", "scale", "bias"))]
        ts = [x] + ps + [y]
        for comp in ("FLOAT", "UNSET"):
            out.append(Case(f"bn/inf/{dt}/{lay}/{pm}/{comp}", "batchnorm", ts,
                            _g(ts, [_with_compute(bn_inf(0, 1, 2, 3, 4, 5), comp)], io=dt), {}))
        # inference with variance, epsilon in every form
        for form in (f[0] for f in SCALAR_FORMS):
            eps, v = scalar(5, form, 1e-5)
            y = _ten(6, xd, dt, lay)
            ts = [x] + ps + [eps, y]
            out.append(Case(f"bn/inf_var/{dt}/{lay}/{pm}/{form}", "batchnorm", ts,
                            _g(ts, [bn_inf_var(0, 1, 2, 3, 4, 5, 6)], io=dt),
                            {5: v} if v is not None else {}))
        # training: epsilon and momentum in every form, with and without running statistics
        for form, run in itertools.product((f[0] for f in SCALAR_FORMS), (True, False)):
            eps, ve = scalar(3, form, 1e-5)
            mom, vm = scalar(4, form, 0.125)
            sc, bi = P(1, cd, ptype("scale")), P(2, cd, ptype("bias"))
            prm, prv = P(5, cd, ptype("prm")), P(6, cd, ptype("prv"))
            y = _ten(7, xd, dt, lay)
            mean, inv = P(8, cd, ptype("mean", True)), P(9, cd, ptype("inv", True))
            nrm, nrv = P(10, cd, ptype("nrm", True)), P(11, cd, ptype("nrv", True))
            if run:
                ts = [x, sc, bi, eps, mom, prm, prv, y, mean, inv, nrm, nrv]
                n = bn_train(0, 1, 2, 3, 7, 8, 9, 5, 6, 4, 10, 11)
            else:
                ts = [x, sc, bi, eps, y, mean, inv]
                n = bn_train(0, 1, 2, 3, 7, 8, 9)
            sc_vals = {u: v for u, v in ((3, ve), (4, vm if run else None)) if v is not None}
            out.append(Case(f"bn/train/{dt}/{lay}/{pm}/{form}/{'run' if run else 'norun'}",
                            "batchnorm", ts, _g(ts, [n], io=dt), sc_vals))
        # backward
        dy, xb = _ten(0, xd, dt, lay), _ten(1, xd, dt, lay)
        mean, inv, sc = P(2, cd, ptype("mean", True)), P(3, cd, ptype("inv", True)), P(4, cd, ptype("scale"))
        dx = _ten(5, xd, dt, lay)
        ds, db = P(6, cd, ptype("ds", True)), P(7, cd, ptype("db", True))
        ts = [dy, xb, mean, inv, sc, dx, ds, db]
        out.append(Case(f"bn/bwd/{dt}/{lay}/{pm}", "batchnorm", ts,
                        _g(ts, [bn_bwd(0, 1, 2, 3, 4, 5, 6, 7)], io=dt), {}))
    # a third parameter type (declined by both engines)
    x, y = _ten(0, xd, "HALF"), _ten(5, xd, "HALF")
    ps = [P(1, cd, "FLOAT"), P(2, cd, "BFLOAT16"), P(3, cd, "HALF"), P(4, cd, "HALF")]
    out.append(Case("bn/inf/third_type", "batchnorm", [x] + ps + [y],
                    _g([x] + ps + [y], [bn_inf(0, 1, 2, 3, 4, 5)]), {}))
    # batchnorm with a pointwise tail through virtual tensors left UNSET
    for dt, vt in itertools.product(FLOATS, ("UNSET", "FLOAT")):
        x = _ten(0, xd, dt, "nhwc")
        ps = [P(i, cd, "FLOAT") for i in (1, 2, 3, 4)]
        v = _ten(5, xd, vt, "nhwc", virtual=True)
        r, v2, y = _ten(6, xd, dt, "nhwc"), _ten(7, xd, vt, "nhwc", virtual=True), _ten(8, xd, dt, "nhwc")
        ts = [x] + ps + [v, r, v2, y]
        out.append(Case(f"bn/inf_tail/{dt}/{vt}", "batchnorm", ts,
                        _g(ts, [bn_inf(0, 1, 2, 3, 4, 5), pw("ADD", 5, 7, 6), pw("RELU_FWD", 7, 8)],
                           io=dt), {}))
    return out


def norms_cases():
    out = []
    shapes = [("row", [6, 64], 1), ("4d", [2, 3, 4, 16], 2)]
    combos = [(sh, dt, pt, form, "nchw") for sh, dt, pt, form in itertools.product(
        shapes, ALLF, ("data", "FLOAT"), [f[0] for f in SCALAR_FORMS])]
    # x-shaped tensors in other layouts (padded rows, permuted, channels-last)
    combos += [(sh, dt, "FLOAT", form, lay) for sh, dt, form, lay in itertools.product(
        shapes, FLOATS, ("bv32", "rt64"), ("pad", "perm", "nhwc"))]
    for (sn, xd, k), dt, pt, form, lay in combos:
        ptt = dt if pt == "data" else pt
        pd = [1] * (len(xd) - k) + xd[-k:]
        sd = xd[:len(xd) - k] + [1] * k
        sn = sn if lay == "nchw" else f"{sn}_{lay}"

        def X(uid, dtype):
            return _ten(uid, xd, dtype, lay)
        for rms in (False, True):
            eps, v = scalar(4, form, 1e-5)
            x, sc, b, y = X(1, dt), P(2, pd, ptt), P(3, pd, ptt), X(5, dt)
            m, iv = P(6, sd, ptt), P(7, sd, ptt)
            if rms:
                ts = [x, sc, eps, y, b, iv]
                a = {"x_tensor_uid": 1, "scale_tensor_uid": 2, "epsilon_tensor_uid": 4,
                     "y_tensor_uid": 5, "bias_tensor_uid": 3, "inv_rms_tensor_uid": 7,
                     "forward_phase": 2}
                kind = "RMSNormAttributes"
            else:
                ts = [x, sc, b, eps, y, m, iv]
                a = {"x_tensor_uid": 1, "scale_tensor_uid": 2, "bias_tensor_uid": 3,
                     "epsilon_tensor_uid": 4, "y_tensor_uid": 5, "normalized_dim_count": k,
                     "forward_phase": 2, "mean_tensor_uid": 6, "inv_variance_tensor_uid": 7}
                kind = "LayernormAttributes"
            out.append(Case(f"norms/{'rms' if rms else 'ln'}_fwd/{sn}/{dt}/{pt}/{form}", "norms", ts,
                            _g(ts, [node(kind, a)]), {4: v} if v is not None else {}))
        # backward (layernorm backward carries an epsilon role too)
        dy, x, sc = X(1, dt), X(2, dt), P(3, pd, ptt)
        m, iv = P(4, sd, ptt), P(5, sd, ptt)
        dx, ds, db = X(6, dt), P(7, pd, ptt), P(8, pd, ptt)
        eps, v = scalar(9, form, 1e-5)
        ts = [dy, x, sc, m, iv, dx, ds, db, eps]
        a = {"dy_tensor_uid": 1, "x_tensor_uid": 2, "scale_tensor_uid": 3, "mean_tensor_uid": 4,
             "inv_variance_tensor_uid": 5, "dx_tensor_uid": 6, "dscale_tensor_uid": 7,
             "dbias_tensor_uid": 8, "epsilon_tensor_uid": 9, "normalized_dim_count": k}
        out.append(Case(f"norms/ln_bwd/{sn}/{dt}/{pt}/{form}", "norms", ts,
                        _g(ts, [node("LayernormBackwardAttributes", a)]),
                        {9: v} if v is not None else {}))
        if form in ("bv32", "rt64") and (form == "bv32" or lay != "nchw"):
            ts = [dy, x, sc, iv, dx, ds, db]
            a = {"dy_tensor_uid": 1, "x_tensor_uid": 2, "scale_tensor_uid": 3,
                 "inv_rms_tensor_uid": 5, "dx_tensor_uid": 6, "dscale_tensor_uid": 7,
                 "dbias_tensor_uid": 8}
            out.append(Case(f"norms/rms_bwd/{sn}/{dt}/{pt}/{form}", "norms", ts,
                            _g(ts, [node("RMSNormBackwardAttributes", a)]), {}))
    return out


def resample_cases():
    from ext_samples import pool_bwd, pool_fwd
    out = []
    geoms = [("2d", [2, 4, 9, 9], [3, 3], [2, 2], [1, 1], [1, 1]),
             ("3d", [1, 4, 5, 6, 6], [2, 2, 2], [2, 2, 2], [0, 1, 1], [1, 0, 1])]
    for (gn, xd, win, st, pre, post), dt, lay, mode in itertools.product(
            geoms, ALLF, ("nchw", "nhwc"), ("MAXPOOL", "AVGPOOL_EXCLUDE_PADDING",
                                            "AVGPOOL_INCLUDE_PADDING")):
        pm = "NEG_INF_PAD" if mode == "MAXPOOL" else None
        ts, g = pool_fwd(dt, lay, xd, win, st, pre, post, mode, pm)
        out.append(Case(f"resample/fwd/{gn}/{dt}/{lay}/{mode}", "resample", ts, g, {}))
        if mode == "MAXPOOL":
            continue       # backward max pooling needs a valid index tensor (GPU test inputs)
        ts, g = pool_bwd(dt, lay, xd, win, st, pre, post, mode, pm)
        out.append(Case(f"resample/bwd/{gn}/{dt}/{lay}/{mode}", "resample", ts, g, {}))
    return out


def block_scale_cases():
    from ext_samples import bsdq, bsq
    out = []
    for dt in ALLF:
        for yt, st in (("FP8_E4M3", "FP8_E8M0"), ("FP8_E5M2", "FP8_E8M0"), ("FP4_E2M1", "FP8_E4M3"),
                       ("INT8", "FLOAT"), ("FP8_E4M3_FNUZ", "HALF"), ("FP6_E3M2", "BFLOAT16"),
                       ("FP6_E2M3", "FLOAT")):
            for lay in ("nchw", "nhwc"):
                ts, g = bsq(dt, yt, st, [2, 4, 64], 32, lay=lay)
                out.append(Case(f"block_scale/q/{dt}/{yt}/{st}/{lay}", "block_scale", ts, g, {}))
                ts, g = bsdq(yt, st, dt, [2, 4, 64], [32], lay=lay)
                out.append(Case(f"block_scale/dq/{yt}/{st}/{dt}/{lay}", "block_scale", ts, g, {}))
    return out


def moe_cases():
    from ext_samples import moe, moe_bwd
    out = []
    for dt, ot in [(d, d) for d in ALLF] + [("HALF", "FLOAT")]:
        for mode in ("NONE", "GATHER", "SCATTER"):
            for kc in (False, True):
                ts, g = moe(dt, mode, 12, 32, 16, 3, ot=ot, w_k_contig=kc)
                out.append(Case(f"moe/{mode}/{dt}>{ot}/{'kc' if kc else 'nc'}", "moe", ts, g, {}))
        ts, g = moe_bwd(dt, 12, 32, 16, 3, ot=ot)
        out.append(Case(f"moe/bwd/{dt}>{ot}", "moe", ts, g, {}))
    return out


def sdpa_cases():
    from test_attention import bwd_graph, fwd_graph
    out = []
    for dt, D, causal, sm in itertools.product(("HALF", "BFLOAT16", "FLOAT"), (64, 128),
                                               (False, True), ("attr", "runtime")):
        kw = {"causal_mask": True} if causal else {}
        ts, g = fwd_graph(dt, 1, 2, 1, 33, 40, D, scale_mode=sm, **kw)
        sc = {t.uid: 0.125 for t in ts if getattr(t, "runtime", False)}
        out.append(Case(f"sdpa/fwd/{dt}/d{D}/{'causal' if causal else 'full'}/{sm}", "sdpa",
                        ts, g, sc))
        if sm == "attr":
            ts, g = bwd_graph(dt, 1, 2, 1, 33, 40, D, **kw)
            out.append(Case(f"sdpa/bwd/{dt}/d{D}/{'causal' if causal else 'full'}", "sdpa", ts, g, {}))
    return out


FAMILY_BUILDERS = {"pointwise": pointwise_cases, "conv": conv_cases, "matmul": matmul_cases,
                   "reduction": reduction_cases, "batchnorm": batchnorm_cases,
                   "norms": norms_cases, "resample": resample_cases,
                   "block_scale": block_scale_cases, "moe": moe_cases, "sdpa": sdpa_cases}


def corpus():
    out = []
    for fam, build in FAMILY_BUILDERS.items():
        out.extend(build())
    names = [c.name for c in out]
    assert len(names) == len(set(names)), "duplicate corpus names"
    return out


def gpu_subset(cases, budget=110, always=(), seed=1234):
    """A deterministic subset for the device run: the cases named in ``always``, then about
    ``budget`` / families cases of every family, drawn with a fixed seed."""
    rnd = random.Random(seed)
    must = [c for c in cases if c.name in set(always)]
    by_fam = {}
    for c in cases:
        if c.name not in set(always):
            by_fam.setdefault(c.family, []).append(c)
    per = max(1, (budget - len(must)) // max(1, len(by_fam)))
    out = list(must)
    for fam, cs in by_fam.items():
        out.extend(cs if len(cs) <= per else sorted(rnd.sample(cs, per), key=cs.index))
    return out
