"""fp32 3 x 3 convolution forward as Winograd F(2x2, 3x3) (engine_plugins/hip_kernels/winograd.py,
ops/conv._emit_winograd; knob HIPDNN_CABI_HIP_CONV_WINOGRAD, opt-in: engine.OPT_IN turns it on
here).

* the transform algebra in float64 numpy (winograd.transforms_numpy) equals the direct
  convolution (odd sizes, pad 0 / 1, asymmetric padding, both conv modes);
* plans: the four steps (input transform, filter transform, 16-batch SIMT GEMM, output
  transform), the note, the workspace counted; what declines keeps today's path (stride,
  dilation, filter size, padding 2, groups, 16-bit, TF32, AMD, knob off);
* host emulation (host_emu: the transform kernels as they are, the GEMM's generated gathers and
  epilogue under a serial loop, split-K too) against the CPU reference's float64 result, NCHW
  and NHWC, C / K not multiples of 4, batch > 1, bias + ReLU and a residual add fused into the
  output transform;
* the generated sources compile with NVRTC for sm_90a without spills;
* on a GPU (``-m gpu``): the same cases against the CPU reference.

Tolerance: F(2x2, 3x3) adds a few roundings per output (transforms with entries 0, +-1, +-1/2)
on top of the fp32 GEMM's; the norm-relative error against float64 stays ~1e-7 .. 1e-6 for
unit-variance data at these sizes, well inside the suite's fp32 tolerance TOL["FLOAT"] = 2e-5.
"""
from __future__ import annotations

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.hip_kernels import codegen, winograd
from engine_plugins.hip_kernels.engine import OPT_IN, gemm_knobs
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import TOL, T, conv_fwd, graph_bytes, nvrtc_or_skip, pw, relerr

KNOB = "HIPDNN_CABI_HIP_CONV_WINOGRAD"
NOTE = "Winograd F(2x2, 3x3)"
rng = np.random.default_rng(3311)

# N, C, H, W, K, (pre h, pre w), (post h, post w), mode, layout
CASES = [
    (2, 5, 7, 9, 6, (1, 1), (1, 1), "CROSS_CORRELATION", "nchw"),    # odd H / W, C / K % 4 != 0
    (1, 8, 6, 6, 12, (0, 0), (0, 0), "CONVOLUTION", "nhwc"),          # pad 0, flipped taps
    (3, 3, 5, 8, 5, (1, 0), (0, 1), "CROSS_CORRELATION", "nhwc"),    # asymmetric padding
    (2, 16, 4, 5, 8, (0, 1), (1, 0), "CONVOLUTION", "nchw"),
    (1, 40, 3, 3, 7, (1, 1), (1, 1), "CROSS_CORRELATION", "nchw"),   # 4 tiles, long reduction
]


def out_hw(c):
    return c[2] + c[5][0] + c[6][0] - 2, c[3] + c[5][1] + c[6][1] - 2


def tensors(c, fused=False):
    N, C, H, W, K, pre, post, mode, lay = c
    Ho, Wo = out_hw(c)
    return T(1, [N, C, H, W], "FLOAT", lay), T(2, [K, C, 3, 3], "FLOAT", lay), \
        T(3, [N, K, Ho, Wo], "FLOAT", lay, virtual=fused)


def plain_graph(c):
    x, w, y = tensors(c)
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, list(c[5]), [1, 1], [1, 1], c[7], post=list(c[6]))])
    return g, x, w, y


def fused_graph(c):
    """conv -> + bias -> relu -> + residual (y uid 9)."""
    x, w, cv = tensors(c, fused=True)
    K = c[4]
    b = T(4, [1, K, 1, 1], "FLOAT")
    bv = T(5, cv.dims, "FLOAT", virtual=True)
    rv = T(6, cv.dims, "FLOAT", virtual=True)
    res = T(7, cv.dims, "FLOAT", c[8])
    y = T(9, cv.dims, "FLOAT", c[8])
    g = graph_bytes([x, w, cv, b, bv, rv, res, y],
                    [conv_fwd(1, 2, 3, list(c[5]), [1, 1], [1, 1], c[7], post=list(c[6])),
                     pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6), pw("ADD", 6, 9, 7)])
    return g, x, w, b, res, y


def reference(c, xv, wv):
    return kconv.conv_fwd(xv, wv, list(c[5]), list(c[6]), [1, 1], [1, 1], c[7], compute_dtype=np.float64)


def rnd(dims):
    return rng.standard_normal(dims).astype(np.float32)


def plan(g, **kw):
    kw.setdefault("arch", "sm_90")
    return build_program(parse_graph(g), use_mma=True, sms=132, **kw)


def on_path(prog):
    return any(NOTE in n for n in prog.notes)


@pytest.fixture(autouse=True)
def _knob(monkeypatch):
    monkeypatch.setenv(KNOB, "1")


# ---------------------------------------------------------------- algebra
@pytest.mark.parametrize("case", range(len(CASES)))
def test_transforms_numpy_equal_direct_conv(case):
    c = CASES[case]
    x, w, _ = tensors(c)
    xv, wv = rng.standard_normal(x.dims), rng.standard_normal(w.dims)
    V, U, Mw, y = winograd.transforms_numpy(xv, wv, c[5], c[6], flip=c[7] == "CONVOLUTION")
    assert V.shape[:2] == U.shape[:2] == (4, 4)
    np.testing.assert_allclose(y, reference(c, xv, wv), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- plans
def test_knob_opt_in_and_cache_key(monkeypatch):
    assert OPT_IN[KNOB] == "1"
    a = gemm_knobs()
    monkeypatch.setenv(KNOB, "0")
    assert gemm_knobs() != a


@pytest.mark.parametrize("case", range(len(CASES)))
def test_plan_steps(case):
    c = CASES[case]
    g, x, w, y = plain_graph(c)
    prog = plan(g)
    names = [s[2] for s in prog.steps if s[0] == "launch"]
    assert on_path(prog), prog.notes
    assert names[0].startswith("hdn_wino_in_") and names[1].startswith("hdn_wino_filter_"), names
    assert names[-1].startswith("hdn_wino_out_"), names
    gemms = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_simt"]
    assert len(gemms) == 1 and "#define GBATCH 16" in gemms[0][1]
    N, C, K = c[0], c[1], c[4]
    a_mode = 2 if c[8] == "nchw" else 1 if C % 4 == 0 else 0      # channels-last x: K-major V
    assert f"#define A_MODE {a_mode}" in gemms[0][1] and "#define B_MODE 2" in gemms[0][1]
    _, _, P, Pp = winograd.tiling(N, *out_hw(c))
    assert f"#define GM {P}" in gemms[0][1] and f"#define GN {K}" in gemms[0][1] and f"#define GK {C}" in gemms[0][1]
    need = winograd.workspace_bytes(C, K, P, Pp, winograd.round4(K), c[8] == "nhwc")
    assert prog.ws_size >= need


def test_knob_off_keeps_direct_gemm(monkeypatch):
    monkeypatch.setenv(KNOB, "0")
    prog = plan(plain_graph(CASES[0])[0])
    assert not on_path(prog)
    assert not any(s[2].startswith("hdn_wino") for s in prog.steps if s[0] == "launch")


@pytest.mark.parametrize("what", ["stride", "dilation", "5x5", "pad2", "half", "tf32", "groups"])
def test_declines_keep_todays_path(what):
    N, C, H, K = 2, 8, 9, 8
    pad, st, dil, R, dtp, kw, Cw = [1, 1], [1, 1], [1, 1], 3, "FLOAT", {}, C
    if what == "stride":
        st = [2, 2]
    elif what == "dilation":
        dil = [2, 2]
    elif what == "5x5":
        R = 5
    elif what == "pad2":
        pad = [2, 2]
    elif what == "half":
        dtp = "HALF"
    elif what == "tf32":
        kw = {"tf32": True}
    else:
        Cw = C // 2
    P = (H + 2 * pad[0] - dil[0] * (R - 1) - 1) // st[0] + 1
    x, w, y = T(1, [N, C, H, H], dtp), T(2, [K, Cw, R, R], dtp), T(3, [N, K, P, P], dtp)
    prog = plan(graph_bytes([x, w, y], [conv_fwd(1, 2, 3, pad, st, dil)]), **kw)
    assert not on_path(prog), (what, prog.notes)


# ---------------------------------------------------------------- host emulation
pytest_host = pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")


def _run_host(g, inputs, outputs):
    from test_host_emulation import run_host
    progs = []
    res, names = run_host(g, inputs, outputs, arch="sm_90", prog_out=progs)
    assert on_path(progs[0]), progs[0].notes
    return res, names


@pytest_host
@pytest.mark.parametrize("case", range(len(CASES)))
def test_host_emulation_plain(case):
    c = CASES[case]
    g, x, w, y = plain_graph(c)
    xv, wv = rnd(x.dims), rnd(w.dims)
    res, names = _run_host(g, {x: xv, w: wv}, [y])
    out, ref = res[3], reference(c, xv, wv)
    assert np.all(np.isfinite(out))
    assert relerr(out, ref) < 2e-6, relerr(out, ref)


@pytest_host
@pytest.mark.parametrize("case", [0, 2, 3])
def test_host_emulation_fused_bias_relu_residual(case):
    c = CASES[case]
    g, x, w, b, res_t, y = fused_graph(c)
    xv, wv, bv, rv = rnd(x.dims), rnd(w.dims), rnd(b.dims), rnd(res_t.dims)
    res, names = _run_host(g, {x: xv, w: wv, b: bv, res_t: rv}, [y])
    assert not any(n.startswith("hdn_ew") or n.startswith("hdn_pw") for n in names), names
    ref = np.maximum(reference(c, xv, wv) + bv, 0) + rv
    assert relerr(res[9], ref) < 2e-6


@pytest_host
@pytest.mark.parametrize("form", ["bv32", "bv64", "rt32", "rt64", "dev32"])
def test_host_emulation_fused_scalar_bias(form):
    """conv -> + scalar bias (by value / runtime / device, float or double) -> relu: the
    scalar forms of the fused run reach the output transform as they reach a GEMM epilogue."""
    from parity_corpus import scalar
    c = (2, 8, 6, 6, 16, (1, 1), (1, 1), "CROSS_CORRELATION", "nhwc")
    x, w, cv = tensors(c, fused=True)
    b, rtv = scalar(4, form, 0.5)
    v = T(5, cv.dims, "FLOAT", "nhwc", virtual=True)
    y = T(6, cv.dims, "FLOAT", "nhwc")
    g = graph_bytes([x, w, cv, b, v, y], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1]), pw("ADD", 3, 5, 4),
                                          pw("RELU_FWD", 5, 6)])
    xv, wv = rnd(x.dims), rnd(w.dims)
    from test_host_emulation import run_host
    progs = []
    ins = {x: xv, w: wv}
    if form == "dev32":
        ins[b] = np.full([1], 0.5, np.float32)
    res = run_host(g, ins, [y], scalars={4: rtv} if rtv is not None else None, arch="sm_90", prog_out=progs)[0]
    assert on_path(progs[0]), progs[0].notes
    ref = np.maximum(reference(c, xv, wv) + 0.5, 0)
    assert relerr(res[6], ref) < 2e-6


@pytest_host
def test_host_emulation_split_k(monkeypatch):
    """A small tile grid with a long reduction: the batched GEMM splits k (finish kernel)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_SPLITK", "3")
    c = (1, 70, 4, 4, 6, (1, 1), (1, 1), "CROSS_CORRELATION", "nhwc")
    g, x, w, y = plain_graph(c)
    xv, wv = rnd(x.dims), rnd(w.dims)
    res, names = _run_host(g, {x: xv, w: wv}, [y])
    assert "hdn_gemm_splitk" in names, names
    assert relerr(res[3], reference(c, xv, wv)) < 2e-6


@pytest_host
@pytest.mark.parametrize("case", [0, 1, 2, 4])
def test_gemm_vector_loads_are_contiguous(case):
    """The SIMT core loads A (V) as 4-float m-vectors and B (U) as 4-float n-vectors: every
    vector starting at a multiple of 4 inside the operand is 4 contiguous, 16-byte aligned
    elements (a vector starting below P / K may run into the zero columns up to Pp / Kp)."""
    c = CASES[case]
    prog = plan(plain_graph(c)[0])
    src = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_simt"][0][1]
    prelude = src[:src.index(codegen.read_kernel("gemm_simt.hip"))]
    N, C, K = c[0], c[1], c[4]
    _, _, P, _ = winograd.tiling(N, *out_hw(c))
    a_mode = int(prelude.split("#define A_MODE ")[1].split()[0])
    if a_mode == 2:
        assert host_emu.mvec_violations(prelude, codegen.headers(), 16, P, C) == 0
    assert host_emu.chunk_violations(prelude, codegen.headers(), 16, P, K, C, a_mode, 2, width=4) == 0


@pytest_host
@pytest.mark.parametrize("c_fast", [False, True])
def test_transform_kernels_match_numpy_stages(c_fast):
    """The input / filter kernels' workspace arrays equal transforms_numpy's V and U (the
    padded columns zero); V in both layouts (``c_fast``: V[16][Pp][C])."""
    c = CASES[0]
    N, C, H, W, K, pre, post, mode, lay = c
    x, w, _ = tensors(c)
    xv, wv = rnd(x.dims), rnd(w.dims)
    Ho, Wo = out_hw(c)
    TH, TW, P, Pp = winograd.tiling(N, Ho, Wo)
    Kp = winograd.round4(K)
    V, U, _, _ = winograd.transforms_numpy(xv.astype(np.float64), wv.astype(np.float64), pre, post)
    src, grid, block = winograd.input_kernel("wi", x.dims, x.strides, pre, (Ho, Wo), Pp, c_fast)
    mem = host_emu.HostMem()
    px, rx = mem.alloc(xv.nbytes)
    rx[:] = np.ascontiguousarray(xv).view(np.uint8).ravel()
    pv, rv = mem.alloc(16 * C * Pp * 4)
    rv[:] = 0xFF
    host_emu.run_kernel(src, "wi", grid, block, [px, pv], codegen.headers())
    got = rv.view(np.float32).reshape((4, 4, Pp, C) if c_fast else (4, 4, C, Pp))
    if c_fast:
        got = got.transpose(0, 1, 3, 2)
    want = V.transpose(0, 1, 3, 2, 4, 5).reshape(4, 4, C, P)
    np.testing.assert_allclose(got[..., :P], want, rtol=1e-6, atol=1e-5)
    assert np.all(got[..., P:] == 0)
    src, grid, block = winograd.filter_kernel("wf", w.dims, w.strides, False, Kp)
    pw_, rw = mem.alloc(wv.nbytes)
    rw[:] = np.ascontiguousarray(wv).view(np.uint8).ravel()
    pu, ru = mem.alloc(16 * C * Kp * 4)
    ru[:] = 0xFF
    host_emu.run_kernel(src, "wf", grid, block, [pw_, pu], codegen.headers())
    got = ru.view(np.float32).reshape(4, 4, C, Kp)
    np.testing.assert_allclose(got[..., :K], U.transpose(0, 1, 3, 2), rtol=1e-6, atol=1e-6)
    assert np.all(got[..., K:] == 0)


# ---------------------------------------------------------------- NVRTC
def test_sources_compile_sm90a_without_spills():
    from test_kernel_sources import _compile_v
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    graphs = [plain_graph(CASES[0])[0], plain_graph(CASES[1])[0], fused_graph(CASES[2])[0],
              plain_graph((32, 128, 28, 28, 128, (1, 1), (1, 1), "CROSS_CORRELATION", "nchw"))[0]]
    for g in graphs:
        prog = plan(g)
        assert on_path(prog)
        for s in prog.steps:
            if s[0] == "launch":
                _compile_v(c, s[1], s[2], "sm_90a", hdr)


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_sources_compile_amd_without_scratch(arch, tmp_path):
    """On AMD targets the same plan (SIMT GEMM) is built; its sources compile with hiprtc's
    options (tools/amd_toolchain.py), no spills / scratch (skipped without the toolchain)."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import amd_toolchain as tc
    if tc.missing():
        pytest.skip("AMD toolchain not installed (make check-amd --install)")
    chain = tc.Toolchain(str(tmp_path))
    for g in (plain_graph(CASES[0])[0], fused_graph(CASES[2])[0]):
        prog = plan(g, arch=arch)
        assert on_path(prog), prog.notes
        for s in prog.steps:
            if s[0] != "launch":
                continue
            co = tmp_path / f"{s[2]}.co"
            co.write_bytes(chain.compile(s[1], f"{s[2]}.hip", (), arch, codegen.headers()))
            md = chain.metadata(str(co))["kernels"][s[2]]
            assert md.get("vgpr_spill_count", 0) == 0 and md.get("sgpr_spill_count", 0) == 0, md
            assert md.get("private_segment_fixed_size", 0) == 0, md


# ---------------------------------------------------------------- GPU
GPU_CASES = CASES + [(4, 64, 14, 14, 64, (1, 1), (1, 1), "CROSS_CORRELATION", "nchw"),
                     (2, 32, 15, 13, 48, (1, 1), (1, 1), "CROSS_CORRELATION", "nhwc")]


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_winograd_gpu(R, case):
    c = GPU_CASES[case]
    g, x, w, y = plain_graph(c)
    assert on_path(plan(g))
    xv, wv = rnd(x.dims), rnd(w.dims)
    out = R.run(g, {x: xv, w: wv}, [y])[3]
    assert np.all(np.isfinite(out)), f"{c}: non-finite / unwritten output"
    assert relerr(out, reference(c, xv, wv)) < TOL["FLOAT"], c


@pytest.mark.gpu
@pytest.mark.parametrize("case", [0, 3, 5])
def test_winograd_fused_gpu(R, case):
    c = GPU_CASES[case]
    g, x, w, b, res_t, y = fused_graph(c)
    xv, wv, bv, rv = rnd(x.dims), rnd(w.dims), rnd(b.dims), rnd(res_t.dims)
    out = R.run(g, {x: xv, w: wv, b: bv, res_t: rv}, [y])[9]
    ref = np.maximum(reference(c, xv, wv) + bv, 0) + rv
    assert np.all(np.isfinite(out)) and relerr(out, ref) < TOL["FLOAT"], c
