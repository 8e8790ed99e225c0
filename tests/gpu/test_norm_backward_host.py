"""Layernorm / RMSnorm backward of the HIP engine (ops/norms.py) under host emulation: the row
kernel (rows per block, dscale / dbias partials per block in the workspace; hdn_block_sum) and
the column finish (32 columns x 8 lanes a block, hdn_block_colsum) run with one OS thread per
GPU thread (tests/gpu/host_emu.py ``run_kernel_threads``, 32 and 64 lanes) and are compared
with float64 numpy formulas.  CI, no GPU.  GPU (``-m gpu``): more rows than row blocks (several
rows per block: the loads issued one row ahead), odd widths (also test_gpu_ext_ops.py)."""
from __future__ import annotations

import numpy as np
import pytest

import host_emu
from ext_samples import ln_bwd
from gpu_testlib import TOL, quantize, relerr

pytestmark = pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
rng = np.random.default_rng(23)


def reference(dyv, xv, scv, mu, iv, rms):
    xh = (xv - (0.0 if rms else mu)) * iv
    g = dyv * scv
    mg = 0.0 if rms else g.mean(axis=1, keepdims=True)
    dx = iv * (g - mg - xh * (g * xh).mean(axis=1, keepdims=True))
    return dx, (dyv * xh).sum(axis=0, keepdims=True), dyv.sum(axis=0, keepdims=True)


# (dt, pt, M, D, lane width); D = 1037: 1024-thread blocks (loads in place, not one row ahead)
HOST = [(dt, pt, M, D, w) for dt, pt, M, D in [("BFLOAT16", "BFLOAT16", 37, 64), ("HALF", "FLOAT", 9, 200),
                                              ("FLOAT", "FLOAT", 300, 40), ("BFLOAT16", "FLOAT", 5, 37)]
        for w in (32, 64)] + [("BFLOAT16", "FLOAT", 20, 1037, 32)]


@pytest.mark.parametrize("dt,pt,M,D,warp", HOST)
@pytest.mark.parametrize("rms", [False, True])
def test_norm_backward_on_the_host(dt, pt, M, D, rms, warp, monkeypatch):
    from test_host_emulation import run_host
    monkeypatch.setattr(host_emu, "EMU_WARP", warp)
    run_case(lambda g, ins, outs: run_host(g, ins, outs, sms=2), dt, pt, M, D, rms)   # 8 row blocks


def run_case(run, dt, pt, M, D, rms):
    """``run(graph, inputs, outputs)`` -> ({uid: result}, kernel names or None)."""
    ts, g = ln_bwd(dt, pt, M, D, rms=rms)
    by = {t.uid: t for t in ts}
    xv = quantize(rng.standard_normal((M, D)) * 1.2 + 0.3, dt)
    dyv = quantize(rng.standard_normal((M, D)), dt)
    scv = quantize(rng.standard_normal((1, D)), pt)
    mu = quantize(xv.mean(axis=1, keepdims=True), pt)
    iv = quantize(1 / np.sqrt((xv * xv).mean(axis=1, keepdims=True) if rms
                              else xv.var(axis=1, keepdims=True) + 1e-5), pt)
    ins = {by[1]: dyv, by[2]: xv, by[3]: scv, by[5]: iv}
    if not rms:
        ins[by[4]] = mu
    outs = [by[u] for u in (6, 7, 8) if u in by]
    res, names = run(g, ins, outs)
    dx, ds, db = reference(dyv.astype(np.float64), xv.astype(np.float64), scv.astype(np.float64),
                           mu.astype(np.float64), iv.astype(np.float64), rms)
    assert names is None or any(n.startswith("hdn_norm_colsum") for n in names), names
    assert relerr(res[6], quantize(dx, dt)) < (TOL[dt] * 2 if dt != "FLOAT" else 1e-4)
    ptol = TOL[pt] * 2 if pt != "FLOAT" else 1e-4
    assert relerr(res[7], ds) < ptol and relerr(res[8], db) < ptol


@pytest.mark.gpu
@pytest.mark.parametrize("dt,pt,M,D", [("BFLOAT16", "BFLOAT16", 1300, 256), ("HALF", "FLOAT", 1100, 200),
                                       ("FLOAT", "FLOAT", 2000, 40), ("BFLOAT16", "FLOAT", 700, 1037)])
@pytest.mark.parametrize("rms", [False, True])
def test_norm_backward_on_the_device(R, dt, pt, M, D, rms):
    run_case(lambda g, ins, outs: (R.run(g, ins, outs), None), dt, pt, M, D, rms)
