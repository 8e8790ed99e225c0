"""CI (no GPU): 16-bit convolutions whose channel counts are not multiples of 8 on the Hopper
wgmma core through the pad pre-pass (layout.pad_conv, kernels/pack.hip).

* plans: the ResNet first layer (C = 3) pads x and w (two pack launches) and the GEMM loads
  both operands as 16-byte chunks / tensor maps instead of element gathers; backward data pads
  dy (K odd) and w (CRSK, K padded); backward filter pads x / dy and writes a padded dw that
  one copy kernel moves into dw; the copies count in the workspace size; knob PAD = 0 / 1;
* the generated sources (pack, GEMM, copy-back) compile with NVRTC for sm_90a without spills;
* host emulation (host_emu: the pack kernel as it is, the GEMM's generated gathers and
  epilogue under a serial loop) of every direction, NCHW and NHWC, C = 3 / 5 / 12, odd K,
  strides, dilation, both conv modes, against the CPU reference's float64 result.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels import gemm_core as gc
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import (TOL, T, conv_bias_relu_graph, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes,
                         nvrtc_or_skip, quantize, relerr)

KNOBS = ("PAD", "CONV_IM2COL", "SPLITK", "TILE", "TMA", "TMA_STORE", "GEMM", "WGRAD_SWAP")
rng = np.random.default_rng(2243)


@pytest.fixture(autouse=True)
def _clean_knobs(monkeypatch):
    for k in KNOBS:
        monkeypatch.delenv("HIPDNN_CABI_HIP_" + k, raising=False)


def conv_graph(op, N, C, H, K, R, pad=0, st=1, dil=1, dt="HALF", lay="nhwc", mode="CROSS_CORRELATION"):
    """(graph, x, w, y, conv args) of one direction: x uid 1, w 2, y 3."""
    P = (H + 2 * pad - (dil * (R - 1) + 1)) // st + 1
    x, w, y = T(1, [N, C, H, H], dt, lay), T(2, [K, C, R, R], dt, lay), T(3, [N, K, P, P], dt, lay)
    a = ([pad, pad], [st, st], [dil, dil], mode)
    if op == "fwd":
        g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, *a)])
    elif op == "bwd_data":
        g = graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, *a)])
    else:
        g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, *a)])
    return g, x, w, y, a


def plan(g, sms=132):
    return build_program(parse_graph(g), use_mma=True, sms=sms, arch="sm_90")


def launches(prog, name):
    return [s for s in prog.steps if s[0] == "launch" and s[2] == name]


def modes(prog):
    src = launches(prog, "hdn_gemm_wgmma")[0][1]
    return tuple(int(re.search(rf"#define {m}_MODE (\d+)", src).group(1)) for m in ("A", "B"))


def pads(prog):
    return [n for n in prog.notes if n.startswith("pad pre-pass")]


# ---------------------------------------------------------------- plan choices
@pytest.mark.parametrize("lay", ["nhwc", "nchw"])
def test_resnet_first_layer_pads_x_and_w(lay):
    """32 x 3 x 224 x 224 -> 64, 7 x 7 / 2, pad 3: the cost model pads both operands to 8
    channels; the GEMM (K = 49 taps x 8 channels) loads A as 16-byte chunks and the KRSC
    weights on the tensor copy engine."""
    g = conv_graph("fwd", 32, 3, 224, 64, 7, 3, 2, lay=lay)[0]
    prog = plan(g)
    assert len(launches(prog, "hdn_pack")) == 2 and len(pads(prog)) == 2, prog.notes
    assert all("3 -> 8" in p for p in pads(prog))
    assert not launches(prog, "hdn_transpose")          # the pad copies are the NHWC copies
    assert modes(prog) == (1, 1)
    assert any("TMA B" in n for n in prog.notes), prog.notes
    src = launches(prog, "hdn_gemm_wgmma")[0][1]
    assert "#define GK 392" in src
    assert prog.ws_size >= (32 * 224 * 224 + 64 * 49) * 8 * 2


def test_pad_knob(monkeypatch):
    g = conv_graph("fwd", 32, 3, 224, 64, 7, 3, 2)[0]
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "0")
    prog = plan(g)
    assert not pads(prog) and modes(prog) == (0, 0)       # element gathers, as before
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    prog = plan(conv_graph("fwd", 2, 3, 9, 5, 3, 1)[0])    # tiny: the model alone would not pad
    assert len(pads(prog)) == 2 and modes(prog) == (1, 1)


def test_aligned_channels_never_pad(monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    for op in ("fwd", "bwd_data", "bwd_filter"):
        assert not pads(plan(conv_graph(op, 2, 16, 9, 24, 3, 1)[0])), op
    # forward with odd K: the epilogue stores any K (element stores), no padding needed
    assert not pads(plan(conv_graph("fwd", 2, 16, 9, 20, 3, 1)[0]))


def test_grouped_and_fp32_not_padded(monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    x, w, y = T(1, [2, 6, 9, 9], "HALF", "nhwc"), T(2, [6, 3, 3, 3], "HALF", "nhwc"), T(3, [2, 6, 9, 9], "HALF", "nhwc")
    prog = plan(graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1])]))
    assert not pads(prog)
    prog = build_program(parse_graph(conv_graph("fwd", 2, 3, 9, 5, 3, 1, dt="FLOAT")[0]), use_mma=True,
                         sms=132, arch="sm_90", tf32=True)
    assert not pads(prog)


def test_backward_data_pads_dy_and_crsk_weights(monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    prog = plan(conv_graph("bwd_data", 2, 3, 9, 5, 3, 1)[0])
    p = pads(prog)
    assert len(p) == 2 and "tensor 3" in p[0] and "5 -> 8" in p[0], p     # dy: K 5 -> 8
    assert "tensor 2" in p[1] and "dim 0 innermost" in p[1], p             # w: CRSK, K padded
    assert modes(prog) == (1, 1)                                           # both K-major chunks
    # K aligned, C odd: only w (CRSK, K as is) - B K-major instead of element gathers
    prog = plan(conv_graph("bwd_data", 2, 3, 9, 16, 3, 1)[0])
    assert len(pads(prog)) == 1 and "16 -> 16" in pads(prog)[0] and modes(prog) == (1, 1)


def test_backward_filter_pads_and_copies_dw_back(monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    prog = plan(conv_graph("bwd_filter", 2, 3, 9, 5, 3, 1)[0])
    assert len(launches(prog, "hdn_pack")) == 2
    names = [s[2] for s in prog.steps if s[0] == "launch"]
    assert names[-1].startswith("hdn_unpad"), names                        # the copy back last
    assert any("(8, 8, 3, 3)" in n for n in pads(prog)), prog.notes
    assert modes(prog) == (2, 2)


def test_auto_pads_the_large_odd_channel_convs():
    """The cost model pads where the copies are cheap next to the GEMM: a 3 x 3 over 20 -> 20
    channels (56 x 56, batch 32) in every direction."""
    for op in ("fwd", "bwd_data", "bwd_filter"):
        prog = plan(conv_graph(op, 32, 20, 56, 20, 3, 1)[0])
        assert pads(prog), (op, prog.notes)


def test_padded_im2col_choice():
    # C = 3 -> 8 of a 7 x 7: 49 x 64-channel boxes lose to 392 deep chunk gathers
    assert not gc.padded_im2col_choice(401408, 64, 392, 49 * 64, 132, 2)
    # 56 -> 56 of a 3 x 3: the map's 9 boxes of 64 beat 504 deep chunk gathers
    assert gc.padded_im2col_choice(100352, 64, 9 * 56, 9 * 64, 132, 2)


# ---------------------------------------------------------------- NVRTC
def test_padded_sources_compile_sm90a_without_spills(monkeypatch):
    """The pack, GEMM (chunk gathers, im2col map, backward filter on M/N-major chunks) and
    copy-back sources of padded convolutions compile for sm_90a; the GEMMs spill nothing."""
    from test_kernel_sources import _compile_v
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    cases = [("fwd", 32, 3, 224, 64, 7, 3, 2, "nhwc", {}), ("fwd", 8, 5, 32, 20, 3, 1, 1, "nchw", {}),
             ("fwd", 8, 3, 32, 24, 3, 1, 1, "nhwc", {"CONV_IM2COL": "1"}),
             ("bwd_data", 8, 3, 32, 20, 3, 1, 1, "nhwc", {}), ("bwd_filter", 8, 3, 32, 20, 3, 1, 1, "nhwc", {})]
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    for op, N, C, H, K, R, pad, st, lay, knobs in cases:
        for k, v in knobs.items():
            monkeypatch.setenv("HIPDNN_CABI_HIP_" + k, v)
        prog = plan(conv_graph(op, N, C, H, K, R, pad, st, lay=lay)[0])
        assert pads(prog), op
        if knobs:
            assert any("im2col" in n for n in prog.notes), prog.notes
        for s in prog.steps:
            if s[0] != "launch":
                continue
            if s[2] == "hdn_gemm_wgmma":
                _compile_v(c, s[1], s[2], s[6]["arch"], hdr)
            else:
                c.compile(s[1], f"{s[2]}.hip", (), "sm_90a", hdr)
        for k in knobs:
            monkeypatch.delenv("HIPDNN_CABI_HIP_" + k)


# ---------------------------------------------------------------- host emulation
HOST = [  # op, N, C, H, K, R, pad, stride, dil, mode, layout, dtype
    ("fwd", 2, 3, 9, 8, 3, 1, 2, 1, "CROSS_CORRELATION", "nhwc", "HALF"),
    ("fwd", 1, 5, 8, 7, 3, 1, 1, 2, "CONVOLUTION", "nchw", "BFLOAT16"),
    ("fwd", 2, 12, 6, 5, 1, 0, 1, 1, "CROSS_CORRELATION", "nhwc", "HALF"),
    ("bwd_data", 2, 3, 9, 5, 3, 1, 1, 1, "CROSS_CORRELATION", "nhwc", "HALF"),
    ("bwd_data", 1, 7, 9, 16, 3, 1, 2, 1, "CONVOLUTION", "nchw", "BFLOAT16"),
    ("bwd_data", 2, 3, 8, 5, 1, 0, 2, 1, "CROSS_CORRELATION", "nhwc", "HALF"),   # strided 1 x 1
    ("bwd_filter", 2, 3, 9, 5, 3, 1, 1, 1, "CROSS_CORRELATION", "nhwc", "HALF"),
    ("bwd_filter", 1, 12, 7, 20, 3, 1, 2, 1, "CONVOLUTION", "nchw", "BFLOAT16"),
    ("bwd_filter", 2, 16, 6, 3, 1, 0, 1, 1, "CROSS_CORRELATION", "nhwc", "HALF"),  # K odd only
]


def _gemm_host_steps(the, monkeypatch):
    """build_program for run_host: a split-K GEMM summed in the kernel (WG_FIXUP, GPU-only
    code) runs as one part (the tensor-map arguments are dropped by run_host); no im2col
    tensor map (its producer has no gathers to emulate: tests/gpu/test_conv_pad.py runs it)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_IM2COL", "0")
    real = the.build_program

    def steps(*args, **kw):
        prog = real(*args, **kw)
        out = []
        for s in prog.steps:
            if s[0] == "launch" and "#define WG_FIXUP 1" in s[1]:
                src = re.sub(r"#define GSPLIT \d+", "#define GSPLIT 1", s[1].replace("#define WG_FIXUP 1", ""))
                s = (s[0], src) + s[2:5] + (s[5][:2] + s[5][4:],) + s[6:]
            out.append(s)
        prog.steps = out
        return prog
    monkeypatch.setattr(the, "build_program", steps)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("case", range(len(HOST)))
def test_padded_conv_on_host(case, monkeypatch):
    import test_host_emulation as the
    _gemm_host_steps(the, monkeypatch)
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    op, N, C, H, K, R, pad, st, dil, mode, lay, dt = HOST[case]
    g, x, w, y, a = conv_graph(op, N, C, H, K, R, pad, st, dil, dt, lay, mode)
    xv, wv, yv = (quantize(rng.standard_normal(t.dims), dt) for t in (x, w, y))
    padv, stv, dilv = a[0], a[1], a[2]
    progs = []
    if op == "fwd":
        out = the.run_host(g, {x: xv, w: wv}, [y], arch="sm_90", prog_out=progs)[0][3]
        ref = kconv.conv_fwd(xv, wv, padv, padv, stv, dilv, mode, compute_dtype=np.float64)
    elif op == "bwd_data":
        out = the.run_host(g, {y: yv, w: wv}, [x], arch="sm_90", prog_out=progs)[0][1]
        ref = kconv.conv_bwd_data(yv, wv, x.dims, padv, padv, stv, dilv, mode, compute_dtype=np.float64)
    else:
        out = the.run_host(g, {x: xv, y: yv}, [w], arch="sm_90", prog_out=progs)[0][2]
        ref = kconv.conv_bwd_filter(xv, yv, w.dims, padv, padv, stv, dilv, mode, compute_dtype=np.float64)
    assert pads(progs[0]) and any("wgmma core" in n for n in progs[0].notes), progs[0].notes
    assert np.all(np.isfinite(out))
    e = relerr(out, quantize(ref, dt))
    assert e < TOL[dt], (HOST[case], e)


ND = [  # op, x dims, w dims, pad, stride, dil, layout
    ("fwd", [2, 3, 11], [5, 3, 3], [1], [2], [1], "nhwc"),                      # 1-D
    ("bwd_filter", [2, 5, 10], [7, 5, 3], [2], [1], [2], "nchw"),
    ("fwd", [1, 3, 4, 5, 5], [5, 3, 3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1], "nhwc"),   # 3-D
    ("bwd_data", [1, 5, 4, 5, 5], [3, 5, 3, 3, 3], [1, 1, 1], [1, 2, 1], [1, 1, 1], "nchw"),
    ("bwd_filter", [1, 3, 4, 5, 5], [5, 3, 3, 1, 3], [1, 0, 1], [1, 1, 1], [1, 1, 1], "nhwc"),
]


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("case", range(len(ND)))
def test_padded_conv_1d_3d_on_host(case, monkeypatch):
    import test_host_emulation as the
    _gemm_host_steps(the, monkeypatch)
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    op, xd, wd, pad, st, dil, lay = ND[case]
    dt = "HALF"
    yd = [xd[0], wd[0]] + [(xd[2 + j] + 2 * pad[j] - dil[j] * (wd[2 + j] - 1) - 1) // st[j] + 1
                           for j in range(len(xd) - 2)]
    x, w, y = T(1, xd, dt, lay), T(2, wd, dt, lay), T(3, yd, dt, lay)
    xv, wv, yv = (quantize(rng.standard_normal(t.dims), dt) for t in (x, w, y))
    progs = []
    if op == "fwd":
        g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, pad, st, dil)])
        out = the.run_host(g, {x: xv, w: wv}, [y], arch="sm_90", prog_out=progs)[0][3]
        ref = kconv.conv_fwd(xv, wv, pad, pad, st, dil, compute_dtype=np.float64)
    elif op == "bwd_data":
        g = graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, pad, st, dil)])
        out = the.run_host(g, {y: yv, w: wv}, [x], arch="sm_90", prog_out=progs)[0][1]
        ref = kconv.conv_bwd_data(yv, wv, x.dims, pad, pad, st, dil, compute_dtype=np.float64)
    else:
        g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, pad, st, dil)])
        out = the.run_host(g, {x: xv, y: yv}, [w], arch="sm_90", prog_out=progs)[0][2]
        ref = kconv.conv_bwd_filter(xv, yv, w.dims, pad, pad, st, dil, compute_dtype=np.float64)
    assert pads(progs[0]) and any("wgmma core" in n for n in progs[0].notes), progs[0].notes
    assert np.all(np.isfinite(out))
    e = relerr(out, quantize(ref, dt))
    assert e < TOL[dt], (ND[case], e)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
def test_padded_conv_fused_bias_relu_on_host(lay, monkeypatch):
    """conv (C = 3, K = 5) -> + bias -> relu: the padded GEMM's fused epilogue stores K = 5
    columns element by element."""
    import test_host_emulation as the
    _gemm_host_steps(the, monkeypatch)
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    dt = "BFLOAT16"
    x, w, b, y, g = conv_bias_relu_graph(2, 3, 5, 8, dt, lay)
    xv, wv, bvv = (quantize(rng.standard_normal(t.dims), dt) for t in (x, w, b))
    progs = []
    out = the.run_host(g, {x: xv, w: wv, b: bvv}, [y], arch="sm_90", prog_out=progs)[0][6]
    assert len(pads(progs[0])) == 2 and any("fused" in n for n in progs[0].notes), progs[0].notes
    ref = np.maximum(kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bvv, 0)
    assert np.all(np.isfinite(out)) and relerr(out, quantize(ref, dt)) < TOL[dt]
