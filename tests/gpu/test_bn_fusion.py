"""Batchnorm + pointwise fusion in the HIP engine: a pointwise run after a batchnorm inference or
training forward node (BN -> ReLU, BN -> add residual -> ReLU, two batchnorms -> add -> ReLU)
runs in the batchnorm's normalise / apply kernel.

CI (no GPU): the programs (one kernel fewer, y stored only where a graph tensor or read by
another unit, run outputs read elsewhere stored, no fusion that would make a kernel depend on
its own output) and their numbers under host emulation (tests/gpu/host_emu.py; the statistics
kernel as its numpy contract) against numpy.  GPU (``-m gpu``): the same graphs on the device."""
from __future__ import annotations

import numpy as np
import pytest

from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import (TOL, T, bn_inf, bn_inf_var, bn_train, conv_fwd, graph_bytes, pw, quantize,
                         relerr)
from test_fusion_topologies import dataflow_problems

D, CD = [2, 8, 5, 3], [1, 8, 1, 1]
EPS = 1e-5
rng = np.random.default_rng(5)


def case(kind, dtype="FLOAT", lay="nchw", y_stored=False, residual=True):
    """(tensors, nodes, inputs {T: values}, reference {uid: values}) of
    x -> batchnorm (``kind``: inf | inf_var | train) -> y [-> + r] -> relu -> out."""
    x, y = T(1, D, dtype, lay), T(2, D, dtype if y_stored else "FLOAT", lay, virtual=not y_stored)
    mu, iv, sc, bi = (T(u, CD) for u in (3, 4, 5, 6))
    eps = T(7, [1, 1, 1, 1], value=EPS)
    r, s, out = T(8, D, dtype, lay), T(9, D, "FLOAT", lay, virtual=True), T(10, D, dtype, lay)
    xv = quantize(rng.standard_normal(D) * 1.5 + 0.3, dtype)
    scv, biv = rng.standard_normal(CD).astype(np.float32), rng.standard_normal(CD).astype(np.float32)
    ins = {x: xv, sc: scv, bi: biv}
    ts = [x, y, mu, iv, sc, bi, eps, out]
    if kind == "train":
        node = bn_train(1, 5, 6, 7, 2, 3, 4)
        m = xv.mean(axis=(0, 2, 3), keepdims=True)
        ivv = 1 / np.sqrt(xv.var(axis=(0, 2, 3), keepdims=True) + EPS)
    else:
        m = rng.standard_normal(CD).astype(np.float32)
        var = rng.uniform(0.5, 2.0, CD).astype(np.float32)
        ivv = 1 / np.sqrt(var + EPS)
        ins[mu] = m
        if kind == "inf":
            ins[iv] = ivv.astype(np.float32)
            node = bn_inf(1, 3, 4, 5, 6, 2)
        else:
            ins[iv] = var
            node = bn_inf_var(1, 3, 4, 5, 6, 7, 2)
    yv = (xv - m) * ivv * scv + biv
    want = {}
    if y_stored:
        want[2] = quantize(yv, dtype)
        yv = want[2]
    nodes = [node]
    if residual:
        rv = quantize(rng.standard_normal(D), dtype)
        ins[r] = rv
        ts += [r, s]
        nodes += [pw("ADD", 2, 9, 8), pw("RELU_FWD", 9, 10)]
        want[10] = quantize(np.maximum(yv + rv, 0), dtype)
    else:
        nodes += [pw("RELU_FWD", 2, 10)]
        want[10] = quantize(np.maximum(yv, 0), dtype)
    if kind == "train":
        want[3], want[4] = m, ivv
    return ts, nodes, ins, want


def _prog(ts, nodes, **kw):
    p = build_program(parse_graph(graph_bytes(ts, nodes)), **kw)
    assert not dataflow_problems(p), dataflow_problems(p)
    return p


def _launches(p):
    return [st[2] for st in p.steps if st[0] == "launch"]


KINDS = ["inf", "inf_var", "train"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("y_stored", [False, True])
@pytest.mark.parametrize("residual", [False, True])
def test_program_fuses_the_run(kind, y_stored, residual):
    ts, nodes, _, _ = case(kind, y_stored=y_stored, residual=residual)
    p = _prog(ts, nodes)
    names = _launches(p)
    assert not any(n.startswith("hdn_pw_") for n in names), names
    assert names[-1].startswith("hdn_bn_apply_" if kind == "train" else "hdn_bn_inf_")
    n = 2 if residual else 1
    assert any(f"pointwise node(s) fused" in x and f"+ {n} " in x for x in p.notes), p.notes
    last = [st for st in p.steps if st[0] == "launch"][-1]
    assert (("t", 2) in last[5]) == y_stored          # y stored only where a graph tensor
    assert ("t", 10) in last[5]
    assert p.ws_size == 0


def test_run_the_fused_kernel_cannot_take_stays_separate():
    """A following run with a negative-stride output (or GEN_INDEX) is not fused: the graph still
    builds, the batchnorm and the run as two kernels."""
    x, y = T(1, D), T(2, D, virtual=True)
    mu, iv, sc, bi = (T(u, CD) for u in (3, 4, 5, 6))
    out = T(10, D)
    out.strides = [-s for s in out.strides]      # reversed in every dim (element 0 last in memory)
    p = _prog([x, y, mu, iv, sc, bi, out], [bn_inf(1, 3, 4, 5, 6, 2), pw("RELU_FWD", 2, 10)])
    names = _launches(p)
    assert names[0].startswith("hdn_bn_inf_") and names[-1].startswith("hdn_pw_"), names


def test_y_read_by_another_unit_is_stored():
    """y -> relu -> out, and y -> conv: the fused kernel stores y (workspace) for the conv."""
    ts, nodes, _, _ = case("inf", residual=False)
    w, c = T(20, [8, 8, 3, 3]), T(21, [2, 8, 5, 3])
    p = _prog(ts + [w, c], nodes + [conv_fwd(2, 20, 21, [1, 1], [1, 1], [1, 1])])
    first = [st for st in p.steps if st[0] == "launch"][0]
    assert first[2].startswith("hdn_bn_inf_") and ("t", 10) in first[5]
    assert any(a[0] == "ws" for a in first[5])
    assert not any(n.startswith("hdn_pw_") for n in _launches(p))


def test_run_output_read_elsewhere_is_stored():
    """y -> relu -> a (virtual) -> add(a, r) -> out, a also read by a conv: a is stored."""
    x, y, a = T(1, D), T(2, D, virtual=True), T(11, D, virtual=True)
    mu, iv, sc, bi = (T(u, CD) for u in (3, 4, 5, 6))
    r, out, w, c = T(8, D), T(10, D), T(20, [8, 8, 3, 3]), T(21, D)
    p = _prog([x, y, a, mu, iv, sc, bi, r, out, w, c],
              [bn_inf(1, 3, 4, 5, 6, 2), pw("RELU_FWD", 2, 11), pw("ADD", 11, 10, 8),
               conv_fwd(11, 20, 21, [1, 1], [1, 1], [1, 1])])
    first = [st for st in p.steps if st[0] == "launch"][0]
    assert first[2].startswith("hdn_bn_inf_")
    assert ("t", 10) in first[5] and sum(a_[0] == "ws" for a_ in first[5]) == 1


def test_no_fusion_through_a_cycle():
    """out = y + conv(y): the run reads the conv, which reads y - fused into the batchnorm, the
    kernel would need its own output; the run stays a kernel of its own after the conv."""
    x, y = T(1, D), T(2, D, virtual=True)
    mu, iv, sc, bi = (T(u, CD) for u in (3, 4, 5, 6))
    w, c, out = T(20, [8, 8, 3, 3]), T(21, D, virtual=True), T(10, D)
    p = _prog([x, y, mu, iv, sc, bi, w, c, out],
              [bn_inf(1, 3, 4, 5, 6, 2), conv_fwd(2, 20, 21, [1, 1], [1, 1], [1, 1]), pw("ADD", 2, 10, 21)])
    names = _launches(p)
    assert names[0].startswith("hdn_bn_inf_") and names[-1].startswith("hdn_pw_")
    assert not any("Batchnorm" in n for n in p.notes)


def projection_case(dtype="FLOAT", lay="nhwc"):
    """Two training batchnorms meet in one add -> relu (a ResNet projection block's end): the run
    is fused into one of them; the other's y is stored for it."""
    x1, x2 = T(1, D, dtype, lay), T(11, D, dtype, lay)
    y1, y2 = T(2, D, "FLOAT", lay, virtual=True), T(12, D, "FLOAT", lay, virtual=True)
    p1 = [T(u, CD) for u in (3, 4, 5, 6)]
    p2 = [T(u, CD) for u in (13, 14, 15, 16)]
    eps = T(7, [1, 1, 1, 1], value=EPS)
    s, out = T(9, D, "FLOAT", lay, virtual=True), T(10, D, dtype, lay)
    ts = [x1, x2, y1, y2, *p1, *p2, eps, s, out]
    nodes = [bn_train(1, 5, 6, 7, 2, 3, 4), bn_train(11, 15, 16, 7, 12, 13, 14),
             pw("ADD", 2, 9, 12), pw("RELU_FWD", 9, 10)]
    ins, ys = {}, []
    for xt, (mu, iv, sc, bi) in ((x1, p1), (x2, p2)):
        xv = quantize(rng.standard_normal(D) + 0.2, dtype)
        scv, biv = rng.standard_normal(CD).astype(np.float32), rng.standard_normal(CD).astype(np.float32)
        ins.update({xt: xv, sc: scv, bi: biv})
        m = xv.mean(axis=(0, 2, 3), keepdims=True)
        ys.append((xv - m) / np.sqrt(xv.var(axis=(0, 2, 3), keepdims=True) + EPS) * scv + biv)
    return ts, nodes, ins, {10: quantize(np.maximum(ys[0] + ys[1], 0), dtype)}


def test_projection_block_end_fuses_once():
    ts, nodes, _, _ = projection_case()
    p = _prog(ts, nodes)
    names = _launches(p)
    assert sum(n in ("hdn_bn_stats", "hdn_bn_cl_part") for n in names) == 2 and not any(n.startswith("hdn_pw_") for n in names)
    assert sum("pointwise node(s) fused" in n for n in p.notes) == 1


# --------------------------------------------------------------------------- host emulation
NUM = [(k, d, lay, ys, res) for k in KINDS for d, lay in (("FLOAT", "nchw"), ("HALF", "nhwc"),
                                                           ("BFLOAT16", "nchw"))
       for ys, res in ((False, True), (True, False))]


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("kind,dtype,lay,y_stored,residual", NUM)
def test_fused_numbers_on_the_host(kind, dtype, lay, y_stored, residual):
    from test_host_emulation import run_host
    ts, nodes, ins, want = case(kind, dtype, lay, y_stored, residual)
    by = {t.uid: t for t in ts}
    res = run_host(graph_bytes(ts, nodes), ins, [by[u] for u in want])[0]
    for u, ref in want.items():
        tol = 1e-5 if by[u].dtype == "FLOAT" else TOL[by[u].dtype] * 2
        assert relerr(res[u], ref) < tol, (u, relerr(res[u], ref))


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
def test_projection_numbers_on_the_host():
    from test_host_emulation import run_host
    ts, nodes, ins, want = projection_case()
    res = run_host(graph_bytes(ts, nodes), ins, [t for t in ts if t.uid in (3, 4, 13, 14, 10)])[0]
    assert relerr(res[10], want[10]) < 1e-5


# --------------------------------------------------------------------------- device
@pytest.mark.gpu
@pytest.mark.parametrize("kind,dtype,lay,y_stored,residual",
                         [("inf", "HALF", "nhwc", False, True), ("inf_var", "FLOAT", "nchw", True, False),
                          ("train", "BFLOAT16", "nhwc", False, True), ("train", "FLOAT", "nchw", True, True)])
def test_fused_numbers_on_the_device(R, kind, dtype, lay, y_stored, residual):
    ts, nodes, ins, want = case(kind, dtype, lay, y_stored, residual)
    by = {t.uid: t for t in ts}
    res = R.run(graph_bytes(ts, nodes), ins, [by[u] for u in want])
    for u, ref in want.items():
        tol = 1e-5 if by[u].dtype == "FLOAT" else TOL[by[u].dtype] * 2
        assert relerr(res[u], ref) < tol, (u, relerr(res[u], ref))


@pytest.mark.gpu
def test_projection_numbers_on_the_device(R):
    ts, nodes, ins, want = projection_case("HALF")
    res = R.run(graph_bytes(ts, nodes), ins, [t for t in ts if t.uid in (3, 4, 13, 14, 10)])
    assert relerr(res[10], want[10]) < TOL["HALF"] * 2
