"""Channels-last batchnorm statistics and backward in the HIP engine (ops/batchnorm.py): a
partial-sum kernel per slab of rows (hdn_bn_cl_part, 16-byte loads, hdn_reduce.h's block column
sums), a finish that sums the partials per channel (hdn_bn_bwd_finish / hdn_bn_finalize), and
for the backward a vectorised apply.

CI (no GPU): the programs (no memset, no atomics, the launches and their geometry), NVRTC
sm_90a compiles without spills, and the numbers under host emulation (tests/gpu/host_emu.py:
the barrier kernels run as one OS thread per GPU thread) against the CPU reference engine's
kernels - NHWC and NCHW, odd channel counts, C = 1, several slabs, fp16 / bf16 / fp32, with and
without running statistics, the mixed-precision graph (HALF x, FLOAT scale / bias / statistics).
GPU (``-m gpu``): the same graphs, larger, on the device."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import batchnorm as kbn
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.ops.batchnorm import ClGeometry
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import TOL, T, bn_bwd, bn_train, graph_bytes, nvrtc_or_skip, quantize, relerr

EPS, MOM = 1e-5, 0.1
rng = np.random.default_rng(11)


def bwd_case(dims, dtp, lay, sdt="FLOAT", dx_lay=None, graph_only=False):
    """(graph bytes, inputs, outputs, reference {uid: values}) of a batchnorm backward."""
    C = dims[1]
    cd = [1, C] + [1] * (len(dims) - 2)
    dy, x, dx = T(1, dims, dtp, lay), T(2, dims, dtp, lay), T(6, dims, dtp, dx_lay or lay)
    mu, iv, sc, ds, db = (T(u, cd, sdt) for u in (3, 4, 5, 7, 8))
    g = graph_bytes([dy, x, mu, iv, sc, dx, ds, db], [bn_bwd(1, 2, 3, 4, 5, 6, 7, 8)])
    if graph_only:
        return (g,)
    ax = (0,) + tuple(range(2, len(dims)))
    xv = quantize(rng.standard_normal(dims) * 1.3 + 0.4, dtp)
    dyv = quantize(rng.standard_normal(dims), dtp)
    muv = quantize(xv.mean(axis=ax, keepdims=True), sdt)
    ivv = quantize(1 / np.sqrt(xv.var(axis=ax, keepdims=True) + EPS), sdt)
    scv = quantize(rng.standard_normal(cd), sdt)
    r = kbn.batchnorm_bwd(dyv, xv, scv, muv, ivv)
    want = {6: quantize(r.dx, dtp), 7: r.dscale, 8: r.dbias}
    return g, {dy: dyv, x: xv, mu: muv, iv: ivv, sc: scv}, [dx, ds, db], want, sdt


def train_case(dims, dtp, lay, sdt="FLOAT", running=True, graph_only=False):
    C = dims[1]
    cd = [1, C] + [1] * (len(dims) - 2)
    x, y = T(1, dims, dtp, lay), T(2, dims, dtp, lay)
    mu, iv, sc, bi = (T(u, cd, sdt) for u in (3, 4, 5, 6))
    eps = T(7, [1] * len(dims), value=EPS)
    ts = [x, y, mu, iv, sc, bi, eps]
    if running:
        mom = T(8, [1] * len(dims), value=MOM)
        prm, prv, nrm, nrv = (T(u, cd, sdt) for u in (9, 10, 11, 12))
        ts += [mom, prm, prv, nrm, nrv]
        node = bn_train(1, 5, 6, 7, 2, 3, 4, 9, 10, 8, 11, 12)
    else:
        node = bn_train(1, 5, 6, 7, 2, 3, 4)
    g = graph_bytes(ts, [node])
    if graph_only:
        return (g,)
    xv = quantize(rng.standard_normal(dims) * 1.3 + 0.4, dtp)
    scv, biv = quantize(rng.standard_normal(cd), sdt), quantize(rng.standard_normal(cd), sdt)
    ins = {x: xv, sc: scv, bi: biv}
    if running:
        prmv, prvv = quantize(rng.standard_normal(cd), sdt), quantize(rng.random(cd) + 0.5, sdt)
        ins.update({prm: prmv, prv: prvv})
        r = kbn.batchnorm_train_fwd(xv, scv, biv, EPS, MOM, prmv, prvv)
        want = {2: quantize(r.y, dtp), 3: r.mean, 4: r.inv_variance, 11: r.next_running_mean,
                12: r.next_running_variance}
        outs = [y, mu, iv, nrm, nrv]
    else:
        r = kbn.batchnorm_train_fwd(xv, scv, biv, EPS)
        want = {2: quantize(r.y, dtp), 3: r.mean, 4: r.inv_variance}
        outs = [y, mu, iv]
    return g, ins, outs, want, sdt


def _tol(uid, dtp, sdt):
    if uid in (2, 6):       # y / dx: rounded to the data type
        return TOL[dtp] * 2 if dtp != "FLOAT" else 1e-4
    return 1e-4 if sdt == "FLOAT" else TOL[sdt] * 2


def _check(res, want, dtp, sdt):
    for u, ref in want.items():
        e = relerr(res[u], np.asarray(ref, np.float64).reshape(np.shape(res[u])))
        assert e < _tol(u, dtp, sdt), (u, e)


# shapes: (dims, dtype, layout); NHWC ones take the channels-last kernels
HOST = [([3, 16, 5, 7], "HALF", "nhwc"), ([2, 24, 40, 40], "HALF", "nhwc"),
        ([2, 33, 6, 5], "BFLOAT16", "nhwc"), ([2, 5, 7, 3], "FLOAT", "nhwc"),
        ([4, 12, 16, 16], "FLOAT", "nhwc"), ([2, 1, 9, 8], "HALF", "nhwc"),
        ([3, 16, 5, 7], "BFLOAT16", "nchw"), ([2, 40, 9, 9], "BFLOAT16", "nhwc"),
        ([2, 1, 9, 8], "FLOAT", "nchw")]


def _prog(g, **kw):
    return build_program(parse_graph(g), **kw)


def _launches(p):
    return [s[2] for s in p.steps if s[0] == "launch"]


# --------------------------------------------------------------------------- programs
def test_nhwc_backward_program():
    g = bwd_case([32, 256, 56, 56], "HALF", "nhwc", graph_only=True)[0]
    p = _prog(g, arch="sm_90")
    assert [s[0] for s in p.steps] == ["launch"] * 3          # no memset
    names = _launches(p)
    assert names[:2] == ["hdn_bn_cl_part", "hdn_bn_bwd_finish"] and names[2].startswith("hdn_bn_bwd_apply")
    part, apply_ = p.steps[0], p.steps[2]
    assert part[3] == (1, 264, 1) and part[4] == (256, 1, 1)
    assert "atomicAdd" not in part[1] and "*(const uint4*)(x + o)" in part[1]
    assert "*(uint4*)(dx + o) = hdn_pack<hdn_half>(d)" in apply_[1]
    assert p.ws_size + p.scratch_size < 2 << 20


def test_nchw_backward_and_double_keep_their_kernels():
    assert "hdn_bn_bwd_sums" in _launches(_prog(bwd_case([2, 16, 5, 7], "HALF", "nchw", graph_only=True)[0]))
    # DOUBLE data: every kernel in double (the CPU reference's float64), the atomic-sum path
    assert "hdn_bn_bwd_sums" in _launches(_prog(bwd_case([2, 16, 5, 7], "DOUBLE", "nhwc", "DOUBLE",
                                                         graph_only=True)[0]))


def test_nhwc_training_program():
    g = train_case([32, 256, 56, 56], "HALF", "nhwc", graph_only=True)[0]
    p = _prog(g, arch="sm_90")
    assert [s[0] for s in p.steps] == ["launch"] * 3
    names = _launches(p)
    assert names[:2] == ["hdn_bn_cl_part", "hdn_bn_finalize"]
    assert p.steps[1][4] == (256, 1, 1) and "hdn_block_colsum" in p.steps[1][1]


@pytest.mark.parametrize("C,dtp,vec", [(256, "HALF", 8), (64, "BFLOAT16", 8), (12, "FLOAT", 4),
                                       (33, "HALF", 1), (3, "FLOAT", 1), (1, "HALF", 1)])
def test_geometry(C, dtp, vec):
    g = ClGeometry(C, 10000, [dtp, dtp], 132)
    assert g.vec == vec and g.nv * g.vec == C and g.bx * g.by == 256 and g.bx <= 32
    assert g.gx * g.bx >= g.nv and 1 <= g.slabs <= max(1, 264 // g.gx)


def _sources():
    seen = {}
    for dims, dtp, lay in HOST + [([32, 256, 56, 56], "HALF", "nhwc"), ([8, 2048, 7, 7], "BFLOAT16", "nhwc"),
                                  ([32, 64, 56, 56], "FLOAT", "nhwc")]:
        for case in (bwd_case(dims, dtp, lay, graph_only=True), train_case(dims, dtp, lay, graph_only=True),
                     train_case(dims, dtp, lay, dtp, False, graph_only=True)):
            for st in _prog(case[0], arch="sm_90").steps:
                if st[0] == "launch" and re.match(r"hdn_bn_(cl_part|bwd_finish|bwd_apply|finalize)", st[2]):
                    seen[st[1]] = st[2]
    return seen


def test_sources_compile_sm90a_without_spills():
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    for i, (src, name) in enumerate(_sources().items()):
        assert c.compile(src, f"bn{i}_{name}.cu", ("--ptxas-options=-v",), "sm_90a", hdr), (name, c.last_log)
        assert " 0 bytes spill stores" in c.last_log or "spill" not in c.last_log, (name, c.last_log)


# --------------------------------------------------------------------------- host emulation
@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dims,dtp,lay", HOST)
def test_backward_on_the_host(dims, dtp, lay):
    from test_host_emulation import run_host
    g, ins, outs, want, sdt = bwd_case(dims, dtp, lay)
    _check(run_host(g, ins, outs)[0], want, dtp, sdt)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dims,dtp,lay", HOST[:6])
def test_training_on_the_host(dims, dtp, lay):
    from test_host_emulation import run_host
    g, ins, outs, want, sdt = train_case(dims, dtp, lay, running=dtp != "FLOAT")
    _check(run_host(g, ins, outs)[0], want, dtp, sdt)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
def test_mixed_precision_and_nchw_dx_on_the_host():
    from test_host_emulation import run_host
    g, ins, outs, want, sdt = bwd_case([2, 16, 6, 6], "HALF", "nhwc", dx_lay="nchw")
    _check(run_host(g, ins, outs)[0], want, "HALF", sdt)
    g, ins, outs, want, sdt = bwd_case([2, 16, 6, 6], "BFLOAT16", "nhwc", sdt="BFLOAT16")
    _check(run_host(g, ins, outs)[0], want, "BFLOAT16", sdt)


# --------------------------------------------------------------------------- device
DEVICE = [([8, 64, 28, 28], "HALF", "nhwc"), ([4, 96, 17, 13], "BFLOAT16", "nhwc"),
          ([4, 12, 33, 31], "FLOAT", "nhwc"), ([3, 7, 20, 20], "HALF", "nhwc"),
          ([2, 1, 64, 64], "HALF", "nhwc"), ([4, 33, 15, 15], "BFLOAT16", "nchw"),
          ([2, 40, 9, 9], "FLOAT", "nchw"), ([16, 256, 14, 14], "HALF", "nhwc")]


@pytest.mark.gpu
@pytest.mark.parametrize("dims,dtp,lay", DEVICE)
def test_backward_on_the_device(R, dims, dtp, lay):
    g, ins, outs, want, sdt = bwd_case(dims, dtp, lay)
    _check(R.run(g, ins, outs), want, dtp, sdt)


@pytest.mark.gpu
@pytest.mark.parametrize("dims,dtp,lay", DEVICE)
@pytest.mark.parametrize("running", [True, False])
def test_training_on_the_device(R, dims, dtp, lay, running):
    g, ins, outs, want, sdt = train_case(dims, dtp, lay, running=running)
    _check(R.run(g, ins, outs), want, dtp, sdt)


@pytest.mark.gpu
def test_mixed_precision_and_nchw_dx_on_the_device(R):
    g, ins, outs, want, sdt = bwd_case([4, 32, 10, 10], "HALF", "nhwc", dx_lay="nchw")
    _check(R.run(g, ins, outs), want, "HALF", sdt)
    g, ins, outs, want, sdt = bwd_case([4, 32, 10, 10], "BFLOAT16", "nhwc", sdt="BFLOAT16")
    _check(R.run(g, ins, outs), want, "BFLOAT16", sdt)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dims,dtp,lay", [([2, 24, 40, 40], "HALF", "nhwc"), ([2, 5, 7, 3], "FLOAT", "nhwc")])
def test_amd_lane_width_on_the_host(dims, dtp, lay, monkeypatch):
    """hdn_reduce.h's column sums with 64-lane wavefronts (AMD)."""
    from test_host_emulation import run_host
    monkeypatch.setattr(host_emu, "EMU_WARP", 64)
    g, ins, outs, want, sdt = bwd_case(dims, dtp, lay)
    _check(run_host(g, ins, outs)[0], want, dtp, sdt)
    g, ins, outs, want, sdt = train_case(dims, dtp, lay)
    _check(run_host(g, ins, outs)[0], want, dtp, sdt)
