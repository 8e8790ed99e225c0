"""Layernorm / RMSnorm backward, the V2 row kernel (ops/norms.py, HIPDNN_CABI_HIP_NORM_BWD_V2,
opt-in): persistent blocks, x / dy staged through shared memory by cp.async, dscale / dbias
partials in registers, the float4 column finish.  CI (no GPU): the knob, the kernel geometry and
its fallbacks, sm_90a compiles without spills, and host emulation against float64 numpy - the
row kernel lane by lane (host_emu.run_mma_kernel: per-warp shuffles, a real block barrier,
cp.async copies performed only at the wait that must see them) and the column finish with
threads.  GPU (``-m gpu``): the HIP engine with the knob on and off against the CPU reference
engine and float64 numpy."""
from __future__ import annotations

import numpy as np
import pytest

import host_emu
from ext_samples import ln_bwd
from engine_plugins.hip_kernels import codegen, engine
from engine_plugins.hip_kernels.ops import norms
from engine_plugins.hip_kernels.program import build_program
from gpu_testlib import TOL, assert_opt_in_knob, nvrtc_or_skip, quantize, relerr
from hipdnn_cabi.plugin_sdk import parse_graph
from test_norm_backward_host import reference

KNOB = "HIPDNN_CABI_HIP_NORM_BWD_V2"
rng = np.random.default_rng(29)


def _prog(monkeypatch, v2, dt, pt, M, D, rms, dbias=True, sms=132, arch=None):
    monkeypatch.setenv(KNOB, v2)
    return build_program(parse_graph(ln_bwd(dt, pt, M, D, rms=rms, dbias=dbias)[1]), sms=sms, arch=arch)


def test_knob_is_opt_in_and_in_the_plan_key(monkeypatch):
    assert_opt_in_knob(monkeypatch, KNOB)
    monkeypatch.setenv(KNOB, "9")
    with pytest.raises(ValueError):
        norms.v2_stages()


@pytest.mark.parametrize("v2", ["0", "1", "3"])
def test_kernels_chosen(monkeypatch, v2):
    p = _prog(monkeypatch, v2, "BFLOAT16", "BFLOAT16", 16384, 4096, False)
    names = [st[2] for st in p.steps]
    if v2 == "0":
        assert names == ["hdn_ln_bwd_u0", "hdn_norm_colsum_u0"]
        return
    assert names == ["hdn_ln_bwd2_u0", "hdn_norm_colsum4_u0"]
    st = p.steps[0]
    G = norms.v2_geometry(16384, 4096, {"x": "BFLOAT16", "dy": "BFLOAT16", "dx": "BFLOAT16"}, 132,
                          int(v2) if v2 != "1" else 0)
    # 512 threads a row, 2 blocks an SM, one wave of 264 persistent blocks; S stages of 16 KB
    assert (G["TPR"], G["R"], G["NT"], G["BPS"], G["NB"], G["keep"]) == (512, 1, 512, 2, 264, True)
    assert G["S"] == (4 if v2 == "1" else 3) and st[6] == {"shmem": G["S"] * 16384}
    assert st[3] == (264, 1, 1) and st[4] == (512, 1, 1)
    assert "__launch_bounds__(512, 2)" in st[1] and f"hdn_cp_wait<{G['S'] - 1}>" in st[1]
    # the V1 kernel on AMD targets (cp.async), for 16-bit rows of odd length and rows too wide
    assert "hdn_ln_bwd_u0" in [s[2] for s in _prog(monkeypatch, v2, "BFLOAT16", "BFLOAT16", 64, 4096,
                                                       False, arch="gfx942").steps]
    assert "hdn_rms_bwd_u0" in [s[2] for s in _prog(monkeypatch, v2, "HALF", "FLOAT", 64, 4095, True).steps]
    assert "hdn_ln_bwd_u0" in [s[2] for s in _prog(monkeypatch, v2, "BFLOAT16", "FLOAT", 64, 8200, False).steps]


def test_host_cases_wrap_the_stages():
    """Some host cases run more row blocks per block than stages (the ring and the parity wrap)."""
    wraps = 0
    for dt, pt, M, D, sms, v2 in HOST:
        G = norms.v2_geometry(M, D, {"x": dt, "dy": dt, "dx": dt}, sms, int(v2) if v2 != "1" else 0)
        wraps += -(-G["NRB"] // G["NB"]) > G["S"] and G["TPR"] > 32
    assert wraps >= 3


def test_geometry_invariants():
    """Every shape: whole warps a row group, the chunks cover the row, the smem fits the SM budget,
    the persistent grid covers every row block once."""
    for tn in ({"x": "BFLOAT16", "dy": "BFLOAT16", "dx": "BFLOAT16"}, {"x": "FLOAT", "dy": "FLOAT", "dx": "FLOAT"},
               {"x": "BFLOAT16", "dy": "FLOAT", "dx": "HALF"}):
        for D in (1, 2, 3, 8, 40, 64, 96, 200, 768, 1000, 1024, 4095, 4096, 6144, 8192, 8200, 16384):
            for M in (1, 5, 37, 16384):
                G = norms.v2_geometry(M, D, tn, 132)
                if G is None:
                    continue
                assert G["TPR"] % 32 == 0 and G["TPR"] <= 1024 and G["NT"] <= 1024
                assert G["NCH"] * G["TPR"] >= G["DQ"] > (G["NCH"] - 1) * G["TPR"]
                assert G["DQ"] * G["VEC"] == D and G["NCH"] * G["VEC"] <= norms.V2_MAX_COLS
                assert G["BX"] in (4, 8, 16) and G["BDY"] in (4, 8, 16)
                assert G["BPS"] * G["smem"] <= norms.V2_SMEM_SM and 2 <= G["S"] <= 8
                assert G["NT"] * G["BPS"] <= 1024
                assert G["NB"] <= G["NRB"] and G["NRB"] * G["R"] >= M


SPILL_CASES = [(dt, pt, D, rms, db) for dt, pt in [("BFLOAT16", "BFLOAT16"), ("HALF", "FLOAT"), ("FLOAT", "FLOAT"),
                                                    ("BFLOAT16", "FLOAT")]
               for D in (40, 200, 768, 1000, 4095, 4096, 6144, 8192) for rms, db in [(False, True), (True, False)]]


def test_sources_compile_sm90a_without_spills(monkeypatch):
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    seen = 0
    for dt, pt, D, rms, db in SPILL_CASES:
        p = _prog(monkeypatch, "1", dt, pt, 16384, D, rms, db)
        for st in p.steps:
            if "bwd2" not in st[2] and "colsum4" not in st[2]:
                continue
            seen += 1
            c.compile(st[1], f"{st[2]}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
            assert " 0 bytes spill stores" in c.last_log and "bytes stack frame" in c.last_log, \
                (dt, pt, D, rms, c.last_log)
            assert " 0 bytes stack frame" in c.last_log, (dt, pt, D, rms, c.last_log)
    assert seen >= 40


# (dt, pt, M, D, sms, knob): one warp a row (8 rows a block), 96-thread rows, 4-chunk fp32 rows
# (4095: 4-byte copies), 8-byte copies (1026), 1024-thread rows, rows fewer than blocks x
# stages, mixed element sizes; several row blocks per block past the last stage (the stages
# and the reduction's parity wrap around: forced 2 / 3 stages, one SM)
HOST = [("BFLOAT16", "BFLOAT16", 37, 64, 2, "1"), ("HALF", "FLOAT", 9, 200, 2, "1"), ("FLOAT", "FLOAT", 30, 40, 2, "1"),
        ("BFLOAT16", "FLOAT", 11, 768, 2, "1"), ("HALF", "HALF", 7, 1000, 3, "1"), ("FLOAT", "FLOAT", 5, 4095, 2, "1"),
        ("FLOAT", "FLOAT", 6, 1026, 1, "1"), ("BFLOAT16", "BFLOAT16", 5, 8192, 2, "1"), ("FLOAT", "FLOAT", 3, 64, 8, "1"),
        ("BFLOAT16", "BFLOAT16", 64, 1024, 1, "2"), ("FLOAT", "FLOAT", 12, 4095, 1, "3"),
        ("HALF", "FLOAT", 200, 200, 1, "2"), ("BFLOAT16", "FLOAT", 41, 768, 1, "3")]


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dt,pt,M,D,sms,v2", HOST)
@pytest.mark.parametrize("rms,dbias", [(False, True), (True, False), (True, True)])   # LN: dbias required
def test_v2_on_the_host(dt, pt, M, D, sms, v2, rms, dbias, monkeypatch):
    from test_host_emulation import run_host
    monkeypatch.setenv(KNOB, v2)
    run_case(lambda g, ins, outs: run_host(g, ins, outs, sms=sms), dt, pt, M, D, rms, dbias, v2=True)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dt,pt,M,D", [("BFLOAT16", "BFLOAT16", 37, 64), ("FLOAT", "FLOAT", 30, 40)])
@pytest.mark.parametrize("rms", [False, True])
def test_v1_on_the_host(dt, pt, M, D, rms, monkeypatch):
    """The knob off: the V1 row kernel (tests/gpu's OPT_IN turns V2 on elsewhere)."""
    from test_host_emulation import run_host
    monkeypatch.setenv(KNOB, "0")
    run_case(lambda g, ins, outs: run_host(g, ins, outs, sms=2), dt, pt, M, D, rms, True, v2=False)


def run_case(run, dt, pt, M, D, rms, dbias, v2):
    ts, g = ln_bwd(dt, pt, M, D, rms=rms, dbias=dbias)
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
    if names is not None:
        assert any("bwd2" in n for n in names) == v2, names
    dx, ds, db = reference(dyv.astype(np.float64), xv.astype(np.float64), scv.astype(np.float64),
                           mu.astype(np.float64), iv.astype(np.float64), rms)
    assert relerr(res[6], quantize(dx, dt)) < (TOL[dt] * 2 if dt != "FLOAT" else 1e-4)
    ptol = TOL[pt] * 2 if pt != "FLOAT" else 1e-4
    assert relerr(res[7], ds) < ptol
    if 8 in res:
        assert relerr(res[8], db) < ptol


# ------------------------------------------------------------------------------------ GPU
DEV = [("BFLOAT16", "BFLOAT16", 1300, 4096), ("HALF", "FLOAT", 1100, 1000), ("FLOAT", "FLOAT", 2000, 4095),
       ("BFLOAT16", "FLOAT", 700, 768), ("FLOAT", "FLOAT", 3000, 40), ("HALF", "HALF", 257, 8192),
       ("BFLOAT16", "BFLOAT16", 600, 8200), ("HALF", "FLOAT", 300, 4095)]


@pytest.mark.gpu
@pytest.mark.parametrize("v2", ["1", "0", "2"])
@pytest.mark.parametrize("dt,pt,M,D", DEV)
@pytest.mark.parametrize("rms,dbias", [(False, True), (True, False), (True, True)])
def test_v2_on_the_device(R, monkeypatch, v2, dt, pt, M, D, rms, dbias):
    monkeypatch.setenv(KNOB, v2)
    G = norms.v2_geometry(M, D, {"x": dt, "dy": dt, "dx": dt}, 132)
    # the kernels of the plan that ran (the engine's analysis cache: the same graph and knobs)
    run_case(lambda g, ins, outs: (R.run(g, ins, outs), [s[2] for s in engine.analyse(parse_graph(g)).program.steps]),
             dt, pt, M, D, rms, dbias, v2=v2 != "0" and G is not None)


@pytest.fixture(scope="module")
def B():
    from test_gpu_ext_ops import Both
    return Both()


@pytest.mark.gpu
@pytest.mark.parametrize("v2", ["1", "0"])
@pytest.mark.parametrize("dt", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("rms", [False, True])
def test_v2_against_the_cpu_reference(B, monkeypatch, v2, dt, rms):
    """The HIP engine (knob on / off) against the CPU reference engine, bf16 / fp16 / fp32 x 4096."""
    from test_gpu_ext_ops import check_norm_bwd
    monkeypatch.setenv(KNOB, v2)
    check_norm_bwd(B, dt, rms, 1500, 4096)


def test_sass_of_the_bench_shape(monkeypatch, tmp_path):
    """bf16 16384 x 4096 layernorm: 16-byte cp.async (L1 bypass), the wait for all but the newest
    S - 1 groups before the shared-memory reads, one block barrier (the row sums), 16-byte dx
    stores, no local memory."""
    from test_kernel_sources import _cuobjdump, _sass
    c = nvrtc_or_skip()
    p = _prog(monkeypatch, "1", "BFLOAT16", "BFLOAT16", 16384, 4096, False)
    st = p.steps[0]
    img = c.compile(st[1], f"{st[2]}.hip", (), "sm_90a", codegen.headers())
    exe, env = _cuobjdump()
    if exe is None:
        pytest.skip("no cuobjdump")
    sass = _sass(exe, env, tmp_path, st[2], img)
    assert sass.count("LDGSTS.E.BYPASS.128") == 8          # prologue 3 stages + the loop, x and dy
    assert "DEPBAR.LE SB0, 0x3" in sass and sass.count("BAR.SYNC") == 1
    assert "STG.E.128" in sass and "LDL" not in sass and "STL" not in sass


def _mixed_graph(M, D):
    """Layernorm backward with x / dx bf16 and dy, scale, statistics fp32 (element sizes differ)."""
    from ext_samples import node
    from gpu_testlib import T, graph_bytes
    dy, x, sc = T(1, [M, D], "FLOAT"), T(2, [M, D], "BFLOAT16"), T(3, [1, D], "FLOAT")
    m, iv = T(4, [M, 1], "FLOAT"), T(5, [M, 1], "FLOAT")
    dx, ds, db = T(6, [M, D], "BFLOAT16"), T(7, [1, D], "FLOAT"), T(8, [1, D], "FLOAT")
    a = {"dy_tensor_uid": 1, "x_tensor_uid": 2, "scale_tensor_uid": 3, "mean_tensor_uid": 4,
         "inv_variance_tensor_uid": 5, "dx_tensor_uid": 6, "dscale_tensor_uid": 7, "dbias_tensor_uid": 8,
         "normalized_dim_count": 1}
    ts = [dy, x, sc, m, iv, dx, ds, db]
    return ts, graph_bytes(ts, [node("LayernormBackwardAttributes", a)])


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("v2", ["0", "1"])
def test_mixed_element_sizes_on_the_host(v2, monkeypatch):
    """x bf16, dy fp32: V1 on one element a vector (a 16-byte vector is 8 bf16 but 4 floats),
    V2 on 8-byte x / 16-byte dy copies of 4 elements."""
    from test_host_emulation import run_host
    monkeypatch.setenv(KNOB, v2)
    M, D = 16, 256
    ts, g = _mixed_graph(M, D)
    dy, x, sc, m, iv, dx, ds, db = ts
    xv = quantize(rng.standard_normal((M, D)), "BFLOAT16")
    dyv = rng.standard_normal((M, D)).astype(np.float32)
    scv = rng.standard_normal((1, D)).astype(np.float32)
    mu = xv.mean(1, keepdims=True).astype(np.float32)
    ivv = (1 / np.sqrt(xv.var(1, keepdims=True) + 1e-5)).astype(np.float32)
    res, names = run_host(g, {dy: dyv, x: xv, sc: scv, m: mu, iv: ivv}, [dx, ds, db], sms=2)
    assert any("bwd2" in n for n in names) == (v2 == "1"), names
    rdx, rds, rdb = reference(dyv.astype(np.float64), xv.astype(np.float64), scv.astype(np.float64),
                              mu.astype(np.float64), ivv.astype(np.float64), False)
    assert relerr(res[6], rdx) < 2 * TOL["BFLOAT16"]
    assert relerr(res[7], rds) < 1e-4 and relerr(res[8], rdb) < 1e-4


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("dt,gather", [("BFLOAT16", False), ("HALF", True)])
def test_fused_forward_16bit_vectors_on_the_host(dt, gather):
    """RMSnorm -> pointwise run (virtual fp32 y) on 16-bit x: 8-element vectors (16-byte loads of
    x, the run's inputs and outputs) against float64 numpy."""
    from ext_samples import ln_pw
    from test_host_emulation import run_host
    M, D = 8, 1024
    ts, g = ln_pw(dt, "FLOAT", M, D, rms=True, gather=gather)
    by = {t.uid: t for t in ts}
    x = quantize(rng.standard_normal((M, D)), dt)
    sc = rng.standard_normal((1, D)).astype(np.float32)
    rb, rs = quantize(rng.standard_normal((1, D)), dt), quantize(rng.standard_normal((M, D)), dt)
    col = rng.standard_normal((M, 1)).astype(np.float32)
    ins = {by[1]: x, by[2]: sc, by[8]: rb, by[11]: rs}
    if gather:
        ins[by[13]] = col
    res, names = run_host(g, ins, [by[12], by[7]], sms=2)
    p = build_program(parse_graph(g), sms=2)
    assert "uint4*>(px + rb + (long long)q * 8)" in p.steps[0][1]
    iv = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-5)
    out = np.maximum(x * iv * sc + rb, 0) * rs * (col if gather else 1.0)
    assert relerr(res[12], out) < 2 * TOL[dt] and relerr(res[7], iv) < 1e-5
