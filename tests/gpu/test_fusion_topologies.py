"""CI (no GPU): the HIP engine's scheduler on shared-consumer topologies - a pointwise output read
by another pointwise node AND by a node of another unit (batchnorm, convolution, reduction) whose
result meets it again (pointwise -> {non-fusible op, pointwise} -> pointwise, the identity
shortcut of a ResNet bottleneck's backward graph).  Joining such pointwise nodes into one kernel
would make the kernel depend on its own output: the program must build, every step must read
only what earlier steps wrote, and (all-elementwise graphs, host emulation) the numbers must
match a numpy reference."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from engine_plugins.cpu_reference.kernels import batchnorm as kbn
from engine_plugins.cpu_reference.kernels import conv as kconv
from gpu_testlib import (T, bn_bwd, bn_inf, conv_fwd, graph_bytes, pw, reduction, relerr)

D, CD = [2, 8, 3, 3], [1, 8, 1, 1]
rng = np.random.default_rng(11)


def _params(src, name, nargs):
    """The kernel's parameter declarations; the GEMM kernels (a signature chosen by the
    preprocessor): the A and B operands, then the generated epilogue's parameters."""
    epi = re.search(r"#define HDN_EPI_PARAMS (.*)", src)
    if name.startswith("hdn_gemm") and epi:
        ps = ["const A", "const B"] + [p.strip() for p in epi.group(1).split(",")]
        return ps if len(ps) == nargs else ps[:2] + ["C"] * (nargs - 2)
    m = re.search(r"\b" + re.escape(name) + r"\((.*?)\)\s*\{", src, re.S)
    assert m, name
    return [p.strip() for p in m.group(1).split(",")]


def _key(a):
    return (a[0], a[1]) if a[0] in ("t", "ws", "sc") else None


def dataflow_problems(prog):
    """Steps that read a location (bound tensor, workspace, scratch) before the step writing it:
    kernel parameters declared ``const`` are read, the others written (memsets write)."""
    steps = []
    for st in prog.steps:
        if st[0] == "memset":
            w = st[1] if isinstance(st[1], tuple) else ("ws", st[1])
            steps.append(("memset", set(), {_key(w)}))
            continue
        src, name, args = st[1], st[2], st[5]
        params = _params(src, name, len(args))
        assert len(params) == len(args), (name, params, args)
        rd, wr = set(), set()
        for p, a in zip(params, args):
            k = _key(a)
            if k is None or "*" not in p:
                continue
            (rd if p.startswith("const") else wr).add(k)
        steps.append((name, rd, wr))
    writes = [w for _, _, ws in steps for w in ws]

    def base(k):       # a read inside a written region (a per-channel array at an offset)
        if k[0] == "t":
            return k if k in writes else None
        bs = [w for w in writes if w[0] == k[0] and w[1] <= k[1]]
        return max(bs, key=lambda w: w[1]) if bs else None
    done, bad = set(), []
    for name, rd, wr in steps:
        for k in rd:
            b = base(k)
            if b is not None and b not in done and b not in wr:
                bad.append(f"{name} reads {k} before it is written")
        done |= wr
    return bad


def _launches(prog):
    return [st[2] for st in prog.steps if st[0] == "launch"]


def _build(ts, ns, **kw):
    prog = build_program(parse_graph(graph_bytes(ts, ns)), **kw)
    assert not dataflow_problems(prog), dataflow_problems(prog)
    return prog


def _bn_inf_tensors(base):
    return [T(base + k, CD) for k in range(4)]      # mean, inv_variance, scale, bias


# --------------------------------------------------------------------------- topologies
def topo_bn_bwd_identity():
    """ResNet identity block backward: d = relu_bwd(dy, y); dx = bn_bwd(d) + d."""
    dy, x, d = T(1, D), T(2, D), T(3, D, virtual=True)
    mu, iv, sc, ds, db = T(4, CD), T(5, CD), T(6, CD), T(7, CD), T(8, CD)
    dxm, out = T(9, D, virtual=True), T(10, D)
    return ([dy, x, d, mu, iv, sc, ds, db, dxm, out],
            [pw("RELU_BWD", 1, 3, 2), bn_bwd(3, 2, 4, 5, 6, 9, 7, 8), pw("ADD", 9, 10, 3)])


def topo_conv():
    """a = relu(x); out = conv(a) + a."""
    x, a, cv, out = T(1, D), T(2, D, virtual=True), T(4, D, virtual=True), T(5, D)
    w = T(3, [8, 8, 3, 3])
    return ([x, a, w, cv, out],
            [pw("RELU_FWD", 1, 2), conv_fwd(2, 3, 4, [1, 1], [1, 1], [1, 1]), pw("ADD", 4, 5, 2)])


def topo_reduction():
    """a = exp(x); out = a / sum_c(a) (a softmax-like normaliser)."""
    x, a, s, out = T(1, [4, 40]), T(2, [4, 40], virtual=True), T(3, [4, 1], virtual=True), T(4, [4, 40])
    return [x, a, s, out], [pw("EXP", 1, 2), reduction("ADD", 2, 3), pw("DIV", 2, 4, 3)]


def topo_bn_inf_diamond():
    """a = relu(x); out = bn(a) * a."""
    x, a, b, out = T(1, D), T(2, D, virtual=True), T(7, D, virtual=True), T(8, D)
    return ([x, a, *_bn_inf_tensors(3), b, out],
            [pw("RELU_FWD", 1, 2), bn_inf(2, 3, 4, 5, 6, 7), pw("MUL", 7, 8, 2)])


def topo_bn_inf_two_joins():
    """a = x + r; c = tanh(a); out = (bn(a) - c) * x: the add reaches the final product twice,
    once through the batchnorm, once through pointwise nodes only."""
    x, r, a, c = T(1, D), T(2, D), T(3, D, virtual=True), T(4, D, virtual=True)
    b, e, out = T(9, D, virtual=True), T(10, D, virtual=True), T(11, D)
    return ([x, r, a, c, *_bn_inf_tensors(5), b, e, out],
            [pw("ADD", 1, 3, 2), pw("TANH_FWD", 3, 4), bn_inf(3, 5, 6, 7, 8, 9),
             pw("SUB", 9, 10, 4), pw("MUL", 10, 11, 1)])


def topo_bn_inf_chain_of_shared():
    """Two diamonds in a row: a = relu(x); b = bn1(a) + a; out = bn2(b) * b."""
    x, a, b1, b = T(1, D), T(2, D, virtual=True), T(7, D, virtual=True), T(8, D, virtual=True)
    b2, out = T(13, D, virtual=True), T(14, D)
    return ([x, a, *_bn_inf_tensors(3), b1, b, *_bn_inf_tensors(9), b2, out],
            [pw("RELU_FWD", 1, 2), bn_inf(2, 3, 4, 5, 6, 7), pw("ADD", 7, 8, 2),
             bn_inf(8, 9, 10, 11, 12, 13), pw("MUL", 13, 14, 8)])


def topo_stored_shared():
    """The shared tensor is a graph output too: a = relu(x) (stored); out = bn(a) + a."""
    x, a, b, out = T(1, D), T(2, D), T(7, D, virtual=True), T(8, D)
    return ([x, a, *_bn_inf_tensors(3), b, out],
            [pw("RELU_FWD", 1, 2), bn_inf(2, 3, 4, 5, 6, 7), pw("ADD", 7, 8, 2)])


TOPOLOGIES = {f.__name__[5:]: f for f in (topo_bn_bwd_identity, topo_conv, topo_reduction,
                                           topo_bn_inf_diamond, topo_bn_inf_two_joins,
                                           topo_bn_inf_chain_of_shared, topo_stored_shared)}
OPTS = {"mma": {}, "simt": {"use_mma": False}, "sm90": {"arch": "sm_90"}}


@pytest.mark.parametrize("opts", list(OPTS))
@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_shared_consumer_topologies_build_in_dependency_order(name, opts):
    ts, ns = TOPOLOGIES[name]()
    prog = _build(ts, ns, **OPTS[opts])
    assert _launches(prog)


def test_identity_block_backward_keeps_two_runs():
    """The ReLU backward is stored once (workspace) and read by the batchnorm backward and by the
    final sum, which runs after the batchnorm's apply."""
    ts, ns = topo_bn_bwd_identity()
    names = _launches(_build(ts, ns))
    assert names[0].startswith("hdn_pw_") and names[-1].startswith("hdn_pw_")
    assert sum(n.startswith("hdn_pw_") for n in names) == 2
    assert names.index("hdn_bn_bwd_sums") < names.index(next(n for n in names if n.startswith("hdn_bn_bwd_apply")))


def test_dataflow_checker_sees_a_misordered_program():
    ts, ns = topo_bn_bwd_identity()
    prog = _build(ts, ns)
    prog.steps = prog.steps[-1:] + prog.steps[:-1]
    assert dataflow_problems(prog)


# --------------------------------------------------------------------------- numerics
def _bn(v, p):
    mu, iv, sc, bi = p
    return (v - mu) * iv * sc + bi


def _ref(name, vals, bnp):
    x = vals[1]
    if name == "bn_inf_diamond":
        a = np.maximum(x, 0)
        return {8: _bn(a, bnp[0]) * a}
    if name == "bn_inf_two_joins":
        a = x + vals[2]
        return {11: (_bn(a, bnp[0]) - np.tanh(a)) * x}
    if name == "bn_inf_chain_of_shared":
        a = np.maximum(x, 0)
        b = _bn(a, bnp[0]) + a
        return {14: _bn(b, bnp[1]) * b}
    if name == "stored_shared":
        a = np.maximum(x, 0)
        return {2: a, 8: _bn(a, bnp[0]) + a}
    raise KeyError(name)


def _elementwise_case(name, ts, ns):
    """(inputs {T: values}, reference {uid: values}, {uid: T}) of an all-elementwise topology."""
    by_uid = {t.uid: t for t in ts}
    produced = {n["attributes"][1].get(k) for n in ns for k in ("out_0_tensor_uid", "y_tensor_uid")} - {None}
    inputs, vals, bnp = {}, {}, []
    for n in ns:
        a = n["attributes"][1]
        if "mean_tensor_uid" in a:
            ps = [a["mean_tensor_uid"], a["inv_variance_tensor_uid"], a["scale_tensor_uid"], a["bias_tensor_uid"]]
            pv = [rng.standard_normal(CD), rng.uniform(0.5, 2.0, CD), rng.standard_normal(CD),
                  rng.standard_normal(CD)]
            bnp.append([v.astype(np.float32) for v in pv])
            vals.update(zip(ps, bnp[-1]))
    for t in ts:
        if t.virtual or t.uid in produced:
            continue
        if t.uid not in vals:
            vals[t.uid] = rng.standard_normal(t.dims).astype(np.float32)
        inputs[t] = vals[t.uid]
    return inputs, _ref(name, vals, bnp), by_uid


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("name", ["bn_inf_diamond", "bn_inf_two_joins", "bn_inf_chain_of_shared",
                                  "stored_shared"])
def test_all_elementwise_topologies_on_the_host(name):
    from test_host_emulation import run_host
    ts, ns = TOPOLOGIES[name]()
    inputs, want, by_uid = _elementwise_case(name, ts, ns)
    res = run_host(graph_bytes(ts, ns), inputs, [by_uid[u] for u in want])[0]
    for u, ref in want.items():
        assert relerr(res[u], ref) < 1e-5, (name, u)


def _identity_block_case():
    """The ResNet identity block backward's numbers: inputs and {uid: reference}."""
    ts, ns = topo_bn_bwd_identity()
    by = {t.uid: t for t in ts}
    dy, x = rng.standard_normal(D), rng.standard_normal(D)
    mu, sc = rng.standard_normal(CD) * 0.1, rng.standard_normal(CD)
    iv = rng.uniform(0.5, 2.0, CD)
    vals = {1: dy, 2: x, 4: mu, 5: iv, 6: sc}
    vals = {u: v.astype(np.float32).astype(np.float64) for u, v in vals.items()}
    d = vals[1] * (vals[2] > 0)
    r = kbn.batchnorm_bwd(d, vals[2], vals[6], vals[4], vals[5])
    want = {10: r.dx + d, 7: np.asarray(r.dscale).reshape(CD), 8: np.asarray(r.dbias).reshape(CD)}
    return ts, ns, {by[u]: v for u, v in vals.items()}, want, by


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
def test_identity_block_backward_on_the_host():
    """relu backward -> {batchnorm backward, sum} -> sum, the batchnorm sums as their numpy
    contract (barriers), the rest as generated."""
    from test_host_emulation import run_host
    ts, ns, ins, want, by = _identity_block_case()
    res = run_host(graph_bytes(ts, ns), ins, [by[u] for u in want])[0]
    for u, ref in want.items():
        assert relerr(res[u], ref) < 1e-5, u


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
def test_conv_diamond_on_the_host():
    """a = relu(x); out = conv(a) + a: the conv's GEMM (operand gathers and epilogue) emulated."""
    from test_host_emulation import run_host
    ts, ns = topo_conv()
    by = {t.uid: t for t in ts}
    xv = rng.standard_normal(D).astype(np.float32)
    wv = (rng.standard_normal([8, 8, 3, 3]) * 0.2).astype(np.float32)
    a = np.maximum(xv.astype(np.float64), 0)
    ref = kconv.conv_fwd(a, wv, [1, 1], [1, 1], [1, 1], [1, 1], "CROSS_CORRELATION",
                         compute_dtype=np.float64) + a
    res = run_host(graph_bytes(ts, ns), {by[1]: xv, by[3]: wv}, [by[5]])[0]
    assert relerr(res[5], ref) < 1e-5


@pytest.mark.gpu
def test_identity_block_backward_on_the_device(R):
    ts, ns, ins, want, by = _identity_block_case()
    res = R.run(graph_bytes(ts, ns), ins, [by[u] for u in want])
    for u, ref in want.items():
        assert relerr(res[u], ref) < 1e-5, u


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["bn_inf_two_joins", "bn_inf_chain_of_shared", "stored_shared"])
def test_all_elementwise_topologies_on_the_device(R, name):
    ts, ns = TOPOLOGIES[name]()
    ins, want, by = _elementwise_case(name, ts, ns)
    res = R.run(graph_bytes(ts, ns), ins, [by[u] for u in want])
    for u, ref in want.items():
        assert relerr(res[u], ref) < 1e-5, (name, u)
