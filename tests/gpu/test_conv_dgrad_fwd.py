"""Unit-stride convolution backward data as the forward convolution of dy with the transposed,
flipped filter (ops/conv._dgrad_fwd_wanted / _spec_conv_bwd_data_as_fwd; knob
``HIPDNN_CABI_HIP_DGRAD_IM2COL``) on the forward's im2col tensor-map path, and a following
pointwise run (dReLU) fused into the dgrad epilogue (knob ``HIPDNN_CABI_HIP_DGRAD_FUSE``).

* CPU-side program tests: which shapes take the path (unit stride, padding <= (R - 1) * dil,
  more than one tap or padding), the declines (stride 2, padding past the filter span, the
  unpadded 1 x 1), the knobs, the filter copy's layout and the forward padding / mode.
* host emulation (host_emu, no GPU): the generated programs - the filter relayout kernel and
  the GEMM's gathers at the flipped-filter indices - against the CPU reference.
* GPU (``-m gpu``): the same graphs on the device (im2col tensor map, TMA-store epilogue),
  fp16 / bf16, against the CPU reference in float64; outputs start poisoned (NaN)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import (TOL, T, conv_bwd_data, graph_bytes, node, pw, quantize, quantized_normal,
                         relerr)

rng = np.random.default_rng(2027)
rnd = functools.partial(quantized_normal, rng)


def dgrad(dy, w, dx, pre, post, stride, dil, mode="CROSS_CORRELATION"):
    return conv_bwd_data(dy, w, dx, pre, stride, dil, mode, post=post, name="dgrad")


# N, C, spatial, K, filter, pre pad, post pad, dilation, mode
CASES = [
    (2, 64, (7, 7), 64, (3, 3), (1, 1), (1, 1), (1, 1), "CROSS_CORRELATION"),
    # the ResNet 3 x 3 shape in small: M = 98 (a tail tile, images crossing it)
    (1, 40, (9, 7), 24, (5, 3), (2, 1), (2, 1), (1, 1), "CONVOLUTION"),
    # odd channel counts (C = 40 output channels, K = 24 < one 64-channel block), R != S,
    # CONVOLUTION mode (the forward then reads the taps unflipped)
    (2, 32, (8, 9), 16, (3, 3), (2, 2), (2, 2), (2, 2), "CROSS_CORRELATION"),
    # dilation 2: forward padding 2 * 2 - 2 = 2
    (2, 16, (6, 5), 32, (3, 3), (0, 0), (0, 0), (1, 1), "CROSS_CORRELATION"),
    # padding 0: the full convolution (forward padding 2)
    (1, 24, (7, 8), 40, (5, 5), (2, 1), (1, 2), (1, 1), "CROSS_CORRELATION"),
    # 5 x 5, asymmetric padding (pre != post, per dim)
    (2, 16, (5, 6), 16, (3, 3), (2, 0), (2, 1), (1, 1), "CONVOLUTION"),
    # padding 2 = the span on H (forward padding 0), 0 on W
    (1, 40, (9, 7), 64, (5, 3), (2, 1), (2, 1), (1, 1), "CONVOLUTION"),
    (2, 24, (8, 9), 64, (3, 3), (2, 2), (2, 2), (2, 2), "CROSS_CORRELATION"),
    (1, 16, (7, 8), 64, (5, 5), (2, 1), (1, 2), (1, 1), "CROSS_CORRELATION"),
    (2, 8, (5, 6), 64, (3, 3), (2, 0), (2, 1), (1, 1), "CONVOLUTION"),
    (1, 32, (6, 5), 128, (3, 3), (0, 0), (0, 0), (1, 1), "CROSS_CORRELATION"),
    # the shapes above with dy's channels (the forward's reduction) a multiple of 64 - what
    # host emulation describes faithfully (its gathers decode k without the 64-channel blocks
    # of the im2col map, so it cannot emulate a partial block; the GPU tests cover those)
]
HOST_CASES = [i for i, c in enumerate(CASES) if c[3] % 64 == 0]


def shapes(case, dtype, uid0=1):
    N, C, H, K, Rk, pre, post, dil, mode = case
    P = [H[j] + pre[j] + post[j] - ((Rk[j] - 1) * dil[j] + 1) + 1 for j in range(len(H))]
    dy = T(uid0, [N, K] + P, dtype, "nhwc" if len(H) == 2 else "nchw",
           strides=None if len(H) == 2 else [P[0] * K, 1, K])
    w = T(uid0 + 1, [K, C] + list(Rk), dtype, "nhwc" if len(H) == 2 else "nchw",
          strides=None if len(H) == 2 else [Rk[0] * C, 1, C])
    dx = T(uid0 + 2, [N, C] + list(H), dtype, "nhwc" if len(H) == 2 else "nchw",
           strides=None if len(H) == 2 else [H[0] * C, 1, C])
    return dy, w, dx


CASE_1D = (2, 16, (11,), 24, (3,), (1,), (1,), (2,), "CROSS_CORRELATION")


def plain_graph(case, dtype):
    dy, w, dx = shapes(case, dtype)
    pre, post, dil, mode = case[5], case[6], case[7], case[8]
    g = graph_bytes([dy, w, dx], [dgrad(1, 2, 3, pre, post, [1] * len(pre), dil, mode)])
    return g, dy, w, dx


def drelu_graph(case, dtype):
    """dx = relu_backward(dgrad(dy, w), xa): dgrad's output virtual (fp32), xa the forward
    activation."""
    dy, w, dx = shapes(case, dtype)
    pre, post, dil, mode = case[5], case[6], case[7], case[8]
    dxv = T(4, dx.dims, "FLOAT", "nhwc" if len(dx.dims) == 4 else "nchw", virtual=True,
            strides=None if len(dx.dims) == 4 else dx.strides)
    xa = T(5, dx.dims, dtype, "nhwc" if len(dx.dims) == 4 else "nchw",
           strides=None if len(dx.dims) == 4 else dx.strides)
    g = graph_bytes([dy, w, dxv, xa, dx], [dgrad(1, 2, 4, pre, post, [1] * len(pre), dil, mode),
                                           pw("RELU_BWD", 4, 3, 5)])
    return g, dy, w, dx, xa


def reference(case, dyv, wv, dx_dims):
    pre, post, dil, mode = case[5], case[6], case[7], case[8]
    return kconv.conv_bwd_data(dyv, wv, dx_dims, list(pre), list(post), [1] * len(pre), list(dil), mode,
                               compute_dtype=np.float64)


def program(g, arch="sm_90"):
    return build_program(parse_graph(g), use_mma=True, sms=132, arch=arch)


def on_path(prog):
    return any("dgrad as a forward convolution" in n for n in prog.notes)


# ---------------------------------------------------------------- CPU-side program tests

@pytest.mark.parametrize("case", range(len(CASES)))
def test_dgrad_fwd_planned(case):
    """Every case plans the filter copy ([C, R, S, K]: dim order (1, 2, 3, 0); not an operand
    layout transform: NHWC graphs report none), then the forward GEMM with dy on the im2col
    tensor map, both operands on the copy engine."""
    g = plain_graph(CASES[case], "HALF")[0]
    prog = program(g)
    assert on_path(prog), prog.notes
    assert any("workspace copy" in n and "dim order (1, 2, 3, 0)" in n for n in prog.notes), prog.notes
    assert not getattr(prog, "layout_transforms", 0)
    assert any("im2col tensor map" in n for n in prog.notes), prog.notes
    assert any("TMA AB" in n for n in prog.notes), prog.notes
    launches = [s for s in prog.steps if s[0] == "launch"]
    assert [s[2] for s in launches][-1] == "hdn_gemm_wgmma" and len(launches) == 2
    gemm = launches[-1]
    N, C, H, K, Rk, pre, post, dil, mode = CASES[case]
    src = gemm[1]
    # the forward's padding (R - 1) * dil - pre, the dilation kept, the other conv mode's taps
    for j, nm in enumerate("HW"):
        assert f"#define I2C_PAD{nm} {(Rk[j] - 1) * dil[j] - pre[j]}" in src
        assert f"#define I2C_DIL{nm} {dil[j]}" in src
    assert f"#define I2C_FLIP {int(mode == 'CROSS_CORRELATION')}" in src
    # the filter map reads the workspace copy: (K, S, R, C) packed
    tm = [a for a in gemm[5] if a[0] == "tmap"]
    assert tm[1][1][0] == "ws" and tm[1][3] == (K, Rk[1], Rk[0], C), tm[1]
    assert tm[1][4] == (2 * K, 2 * K * Rk[1], 2 * K * Rk[1] * Rk[0]), tm[1]


def test_dgrad_fwd_1d_planned():
    prog = program(plain_graph(CASE_1D, "HALF")[0])
    assert on_path(prog) and any("im2col tensor map" in n for n in prog.notes), prog.notes


@pytest.mark.parametrize("what", ["stride2", "pad_past_span", "1x1", "knob_off", "no_arch", "fp32"])
def test_dgrad_fwd_declines(what, monkeypatch):
    """The gathered backward-data GEMM stays for: stride 2 (the strided path), a padding past
    (R - 1) * dil (negative forward padding), the unpadded 1 x 1 (one tap: dy is read as a
    dense matrix anyway), the knob 0, no device target (SIMT), fp32 data."""
    case = CASES[0]
    dtype = "FLOAT" if what == "fp32" else "HALF"
    dy, w, dx = shapes(case, dtype)
    if what == "stride2":
        dy = T(1, [2, 64, 4, 4], dtype, "nhwc")
        g = graph_bytes([dy, w, dx], [dgrad(1, 2, 3, [1, 1], [1, 1], [2, 2], [1, 1])])
    elif what == "pad_past_span":
        dy = T(1, [2, 64, 11, 7], dtype, "nhwc")
        g = graph_bytes([dy, w, dx], [dgrad(1, 2, 3, [3, 1], [3, 1], [1, 1], [1, 1])])
    elif what == "1x1":
        w = T(2, [64, 64, 1, 1], dtype, "nhwc")
        dy = T(1, [2, 64, 7, 7], dtype, "nhwc")
        g = graph_bytes([dy, w, dx], [dgrad(1, 2, 3, [0, 0], [0, 0], [1, 1], [1, 1])])
    else:
        g = graph_bytes([dy, w, dx], [dgrad(1, 2, 3, [1, 1], [1, 1], [1, 1], [1, 1])])
    if what == "knob_off":
        monkeypatch.setenv("HIPDNN_CABI_HIP_DGRAD_IM2COL", "0")
    prog = program(g, arch=None if what == "no_arch" else "sm_90")
    assert not on_path(prog), prog.notes
    assert not any("workspace copy" in n for n in prog.notes), prog.notes


def test_dgrad_drelu_fused_and_knob(monkeypatch):
    """dgrad -> RELU_BWD: one GEMM kernel (the run in its epilogue, xa read there); the knob
    DGRAD_FUSE=0 keeps the separate elementwise kernel (dx through the workspace)."""
    g = drelu_graph(CASES[0], "HALF")[0]
    prog = program(g)
    assert any("1 pointwise node(s) fused" in n for n in prog.notes), prog.notes
    assert [s[2] for s in prog.steps if s[0] == "launch"][-1] == "hdn_gemm_wgmma"
    assert not any(s[2].startswith("hdn_pw") for s in prog.steps if s[0] == "launch")
    monkeypatch.setenv("HIPDNN_CABI_HIP_DGRAD_FUSE", "0")
    prog = program(g)
    assert not any("fused" in n for n in prog.notes), prog.notes
    assert any(s[2].startswith("hdn_pw") for s in prog.steps if s[0] == "launch")


def test_dgrad_fwd_knob_in_cache_key(monkeypatch):
    from engine_plugins.hip_kernels.engine import gemm_knobs
    a = gemm_knobs()
    monkeypatch.setenv("HIPDNN_CABI_HIP_DGRAD_IM2COL", "0")
    b = gemm_knobs()
    monkeypatch.setenv("HIPDNN_CABI_HIP_DGRAD_FUSE", "0")
    assert len({a, b, gemm_knobs()}) == 3


def test_flipped_filter_index_math():
    """The identity the path rests on, in numpy: unit-stride dgrad == the forward convolution of
    dy with w'[c, k, r] = w[k, c, R - 1 - r] (CROSS_CORRELATION; CONVOLUTION: unflipped),
    padding (R - 1) * dil - pad, the dilation kept - for every case, both modes."""
    for case in CASES + [CASE_1D]:
        for mode in ("CROSS_CORRELATION", "CONVOLUTION"):
            N, C, H, K, Rk, pre, post, dil, _ = case
            c = case[:8] + (mode,)
            dy, w, dx = shapes(c, "FLOAT")
            dyv, wv = rng.standard_normal(dy.dims), rng.standard_normal(w.dims)
            ref = reference(c, dyv, wv, dx.dims)
            nsp = len(H)
            wt = np.swapaxes(wv, 0, 1)
            fmode = "CONVOLUTION" if mode == "CROSS_CORRELATION" else "CROSS_CORRELATION"
            span = [(Rk[j] - 1) * dil[j] for j in range(nsp)]
            out = kconv.conv_fwd(dyv, wt, [span[j] - pre[j] for j in range(nsp)],
                                 [span[j] - post[j] for j in range(nsp)], [1] * nsp, list(dil), fmode,
                                 compute_dtype=np.float64)
            assert out.shape == ref.shape
            np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)


def test_dgrad_fwd_sources_compile_sm90a():
    """The plans' kernels (the filter relayout, the im2col GEMM with and without the fused dReLU)
    compile for sm_90a with NVRTC: no spills, no serialised wgmma."""
    from gpu_testlib import nvrtc_or_skip
    from engine_plugins.hip_kernels import codegen
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    graphs = [plain_graph(cs, dt)[0] for cs in CASES + [CASE_1D] for dt in ("HALF", "BFLOAT16")]
    graphs += [drelu_graph(CASES[0], "HALF")[0], drelu_graph((32, 64, (56, 56), 64, (3, 3), (1, 1), (1, 1), (1, 1),
                                                              "CROSS_CORRELATION"), "HALF")[0]]
    seen = set()
    for g in graphs:
        for st in program(g).steps:
            if st[0] != "launch" or st[1] in seen:
                continue
            seen.add(st[1])
            arch = st[6]["arch"] if len(st) > 6 else "sm_90"
            c.compile(st[1], f"{st[2]}.hip", ("--ptxas-options=-v",), arch, hdr)
            ptxas = [ln for ln in c.last_log.splitlines() if "spill" in ln or "registers" in ln]
            assert " 0 bytes spill stores" in c.last_log, (st[2], ptxas or c.last_log[-2000:])
            assert "C7514" not in c.last_log and "C7508" not in c.last_log, (st[2], c.last_log)


# ---------------------------------------------------------------- host emulation

needs_cc = pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")


@needs_cc
@pytest.mark.parametrize("case", HOST_CASES)
def test_dgrad_fwd_host_emulation(case):
    from test_host_emulation import run_host
    g, dy, w, dx = plain_graph(CASES[case], "HALF")
    dyv, wv = rnd(dy.dims, "HALF"), rnd(w.dims, "HALF", 0.2)
    progs = []
    out = run_host(g, {dy: dyv, w: wv}, [dx], arch="sm_90", prog_out=progs)[0][3]
    assert on_path(progs[0]), progs[0].notes
    ref = reference(CASES[case], dyv, wv, dx.dims)
    assert relerr(out, quantize(ref, "HALF")) < TOL["HALF"]


@needs_cc
def test_dgrad_fwd_drelu_host_emulation():
    from test_host_emulation import run_host
    case = CASES[6]
    g, dy, w, dx, xa = drelu_graph(case, "HALF")
    dyv, wv, xav = rnd(dy.dims, "HALF"), rnd(w.dims, "HALF", 0.2), rnd(dx.dims, "HALF")
    progs = []
    out = run_host(g, {dy: dyv, w: wv, xa: xav}, [dx], arch="sm_90", prog_out=progs)[0][3]
    assert on_path(progs[0]) and any("fused" in n for n in progs[0].notes), progs[0].notes
    ref = np.where(xav > 0, reference(case, dyv, wv, dx.dims), 0.0)
    assert relerr(out, quantize(ref, "HALF")) < TOL["HALF"]


# ---------------------------------------------------------------- GPU

GPU_CASES = CASES + [CASE_1D, (4, 64, (14, 14), 64, (3, 3), (1, 1), (1, 1), (1, 1), "CROSS_CORRELATION")]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_dgrad_fwd_gpu(R, dtype, case):
    c = GPU_CASES[case]
    g, dy, w, dx = plain_graph(c, dtype)
    assert on_path(program(g)), program(g).notes
    scale = (c[3] * int(np.prod(c[4]))) ** -0.5
    dyv, wv = rnd(dy.dims, dtype), rnd(w.dims, dtype, scale)
    out = R.run(g, {dy: dyv, w: wv}, [dx])[3]
    ref = reference(c, dyv, wv, dx.dims)
    assert np.all(np.isfinite(out)), f"{c}: non-finite / unwritten output"
    assert relerr(out, quantize(ref, dtype)) < TOL[dtype], c


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", [("1", "1"), ("0", "1"), ("1", "0"), ("0", "0")])
@pytest.mark.parametrize("case", [0, 1, 6, len(CASES)])
def test_dgrad_drelu_gpu(R, case, knobs, monkeypatch):
    """dReLU fused into the new path, into the gathered dgrad GEMM (DGRAD_IM2COL=0) and unfused
    (DGRAD_FUSE=0): all against the reference."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_DGRAD_IM2COL", knobs[0])
    monkeypatch.setenv("HIPDNN_CABI_HIP_DGRAD_FUSE", knobs[1])
    c = (CASES + [CASE_1D])[case]
    dtype = "HALF"
    g, dy, w, dx, xa = drelu_graph(c, dtype)
    scale = (c[3] * int(np.prod(c[4]))) ** -0.5
    dyv, wv, xav = rnd(dy.dims, dtype), rnd(w.dims, dtype, scale), rnd(dx.dims, dtype)
    out = R.run(g, {dy: dyv, w: wv, xa: xav}, [dx])[3]
    ref = np.where(xav > 0, reference(c, dyv, wv, dx.dims), 0.0)
    assert np.all(np.isfinite(out))
    assert relerr(out, quantize(ref, dtype)) < TOL[dtype], (c, knobs)


@needs_cc
def test_dgrad_fwd_nchw_host_emulation():
    """NCHW dy / w / dx: dy and w reach channels-last workspace copies first, the filter copy
    then reads the KRSC copy, and the register epilogue writes the NCHW dx."""
    from test_host_emulation import run_host
    case = CASES[6]
    N, C, H, K, Rk, pre, post, dil, mode = case
    P = [H[j] + pre[j] + post[j] - ((Rk[j] - 1) * dil[j] + 1) + 1 for j in range(2)]
    dy, w, dx = T(1, [N, K] + P, "HALF"), T(2, [K, C] + list(Rk), "HALF"), T(3, [N, C] + list(H), "HALF")
    g = graph_bytes([dy, w, dx], [dgrad(1, 2, 3, pre, post, [1, 1], dil, mode)])
    dyv, wv = rnd(dy.dims, "HALF"), rnd(w.dims, "HALF", 0.2)
    progs = []
    out = run_host(g, {dy: dyv, w: wv}, [dx], arch="sm_90", prog_out=progs)[0][3]
    assert on_path(progs[0]), progs[0].notes
    assert relerr(out, quantize(reference(case, dyv, wv, dx.dims), "HALF")) < TOL["HALF"]
