"""CI (no GPU): grouped and depthwise convolutions (C of x = groups * C of w) on the GEMM
cores, one GEMM per group (the grid's batch index), checked by host emulation of the generated
operand gathers and epilogue against the CPU reference kernels (float64) - forward, backward
data, backward filter; NCHW / NHWC; 1-D, 2-D, 3-D; the fused bias + relu epilogue."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import (TOL, T, conv_bias_relu_graph, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes,
                         quantize, relerr)
from test_host_emulation import HDR, _defs, check_conv_direction, rnd, run_host

pytestmark = pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")

CASES = [  # N, C, G, K, spatial extents, R, pad, stride, dil, mode
    (2, 16, 2, 16, [7, 7], 3, 1, 1, 1, "CROSS_CORRELATION"),      # 8 channels a group: chunk loads
    (2, 8, 8, 8, [9, 9], 3, 1, 2, 1, "CONVOLUTION"),              # depthwise
    (1, 6, 6, 12, [10, 10], 3, 2, 1, 2, "CROSS_CORRELATION"),     # depthwise, multiplier 2
    (2, 12, 3, 6, [11], 3, 1, 2, 1, "CROSS_CORRELATION"),          # 1-D
    (1, 8, 4, 8, [4, 5, 5], 3, 1, 1, 1, "CROSS_CORRELATION"),      # 3-D
]


def _tensors(case, dtp, lay):
    N, C, G, K, S, R, pad, st, dil, mode = case
    nsp = len(S)
    P = [(h + 2 * pad - (dil * (R - 1) + 1)) // st + 1 for h in S]
    return (T(1, [N, C] + S, dtp, lay), T(2, [K, C // G] + [R] * nsp, dtp, lay), T(3, [N, K] + P, dtp, lay),
            [pad] * nsp, [st] * nsp, [dil] * nsp, mode)


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_grouped_conv_directions(dtp, lay, case, op):
    check_conv_direction(op, dtp, *_tensors(CASES[case], dtp, lay))


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(1, len(CASES)))
@pytest.mark.parametrize("op", ["fwd", "bwd_data"])
def test_grouped_conv_tiled_cores_for_narrow_groups(dtp, lay, case, op, monkeypatch):
    """Knob GROUPED_DIRECT=0: narrow groups (depthwise) on the tiled GEMM cores instead of the
    direct core - same results."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_GROUPED_DIRECT", "0")
    x, w, y, pad, st, dil, mode = _tensors(CASES[case], dtp, lay)
    xv, wv, yv = rnd(x.dims, dtp), rnd(w.dims, dtp), rnd(y.dims, dtp)
    ins, out = ({x: xv, w: wv}, y) if op == "fwd" else ({y: yv, w: wv}, x)
    res, names = run_host(_graph(op, x, w, y, pad, st, dil, mode), ins, [out])
    assert "hdn_gemm_direct" not in names
    assert relerr(res[out.uid], quantize(_ref(op, CASES[case], xv, wv, yv, x, w), dtp)) < TOL[dtp]


def _ref(op, case, xv, wv, yv, x, w):
    _, _, _, _, S, _, pad, st, dil, mode = case
    pad, st, dil = [pad] * len(S), [st] * len(S), [dil] * len(S)
    if op == "fwd":
        return kconv.conv_fwd(xv, wv, pad, pad, st, dil, mode, compute_dtype=np.float64)
    if op == "bwd_data":
        return kconv.conv_bwd_data(yv, wv, x.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    return kconv.conv_bwd_filter(xv, yv, w.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)


def _graph(op, x, w, y, pad, st, dil, mode):
    if op == "fwd":
        return graph_bytes([x, w, y], [conv_fwd(1, 2, 3, pad, st, dil, mode)])
    if op == "bwd_data":
        return graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, pad, st, dil, mode)])
    return graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, pad, st, dil, mode)])


BODIES = {n: codegen.read_kernel(n[4:] + ".hip")
          for n in ("hdn_gemm_wgmma", "hdn_gemm_mma", "hdn_gemm_simt", "hdn_gemm_direct")}


def _direct_expected(case, op):
    """Forward / backward data with at most 4 GEMM columns a group take the direct core."""
    N, C, G, K = case[:4]
    return op != "bwd_filter" and (K // G if op == "fwd" else C // G) <= 4


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF", "FP8_E4M3"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_grouped_conv_hopper_chunk_loads(dtp, lay, case, op):
    """The Hopper plan (sm_90: layout copies, wgmma / SIMT cores): one GEMM per group, none of
    the tensor-map or precomputed-address paths, and every 16-byte chunk load of the generic
    gathers covers 8 contiguous, aligned elements (or 8 padding zeros)."""
    if dtp == "FP8_E4M3" and op != "fwd":
        pytest.skip("fp8 convolutions: forward only")
    g = _graph(op, *_tensors(CASES[case], dtp, lay))
    prog = build_program(parse_graph(g), use_mma=True, sms=132, arch="sm_90", tf32=dtp == "FLOAT")
    G = CASES[case][2]
    assert any(f"{G} groups" in n for n in prog.notes), prog.notes
    gemms = [s for s in prog.steps if s[0] == "launch" and s[2] in BODIES]
    assert len(gemms) == 1
    assert (gemms[0][2] == "hdn_gemm_direct") == _direct_expected(CASES[case], op), gemms[0][2]
    src = gemms[0][1]
    prelude = src[:src.index(BODIES[gemms[0][2]])]
    assert "WG_IM2COL" not in prelude and "WG_WGRAD" not in prelude and "A_ROWS" not in prelude
    d = _defs(prelude)
    assert d["GBATCH"] == G
    am, bm = (int(v) for v in re.search(r"#define A_MODE (\d+)\n#define B_MODE (\d+)", prelude).groups())
    if am or bm:
        assert host_emu.chunk_violations(prelude, HDR, G, d["GM"], d["GN"], d["GK"], am, bm) == 0
    if dtp in TOL:    # the plan's values: layout copies + the GEMM prelude, emulated
        x, w, y = _tensors(CASES[case], dtp, lay)[:3]
        xv, wv, yv = rnd(x.dims, dtp), rnd(w.dims, dtp), rnd(y.dims, dtp)
        ins, out = {"fwd": ({x: xv, w: wv}, y), "bwd_data": ({y: yv, w: wv}, x),
                    "bwd_filter": ({x: xv, y: yv}, w)}[op]
        got = run_host(g, ins, [out], arch="sm_90")[0][out.uid]
        assert relerr(got, quantize(_ref(op, CASES[case], xv, wv, yv, x, w), dtp)) < TOL[dtp]


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("G", [2, 32])
def test_grouped_conv_fused_epilogue_and_splitk(dtp, lay, G):
    # G = 2: 32 channels a group, K = 32 * 9 per GEMM (split-K); G = 32: depthwise
    x, w, b, y, g = conv_bias_relu_graph(2, 64, 64, 6, dtp, lay, groups=G)
    xv, wv, bvv = rnd(x.dims, dtp), rnd(w.dims, dtp), rnd(b.dims, dtp)
    prog = []
    res, names = run_host(g, {x: xv, w: wv, b: bvv}, [y], prog_out=prog)
    assert any("fused" in n for n in prog[0].notes)
    ref = np.maximum(kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bvv, 0)
    assert relerr(res[6], quantize(ref, dtp)) < TOL[dtp]


@pytest.mark.slow
def test_grouped_conv_sources_compile_sm90a():
    """Every kernel of the grouped / depthwise plans (Hopper, mma.sync, SIMT; 16-bit, fp32,
    TF32, fp8) compiles for sm_90a with NVRTC, where the NVRTC wheel is importable."""
    try:
        from hipdnn_cabi.device import compiler
        c = compiler("cuda")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")
    seen = set()
    for dtp, lay, case, op in ((d, lay, k, o) for d in ("HALF", "BFLOAT16", "FLOAT", "FP8_E4M3")
                               for lay in ("nchw", "nhwc") for k in range(len(CASES))
                               for o in ("fwd", "bwd_data", "bwd_filter")):
        if dtp == "FP8_E4M3" and op != "fwd":
            continue
        g = _graph(op, *_tensors(CASES[case], dtp, lay))
        for opts in ({"arch": "sm_90", "tf32": dtp == "FLOAT"}, {"arch": None}, {"use_mma": False}):
            prog = build_program(parse_graph(g), sms=132, **opts)
            for st in prog.steps:
                if st[0] == "launch" and st[1] not in seen:
                    seen.add(st[1])
                    assert c.compile(st[1], f"g_{st[2]}.hip", (), "sm_90a", HDR), (dtp, lay, case, op, opts)
    assert len(seen) > 50
