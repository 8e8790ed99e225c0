"""INT8 x INT8 convolution - forward, backward data, backward filter - (INT32 compute; INT8
saturated / INT32 / FLOAT output) on the HIP engine: an implicit GEMM (the direction's
gathers) on the INT8 WMMA kernel (gemm.int8_source, shared with INT8 matmul; Hopper runs the
channels-last forward on the s8 wgmma core instead: tests/gpu/test_int8_wgmma.py).  CI (no GPU): the
kernel's prelude - gathers, output offsets, output conversion - runs under a serial integer
loop (host_emu.run_int8_gemm) and must match the CPU reference exactly; the plan declines on
AMD targets and for a FLOAT compute type.  GPU (``-m gpu``): the same cases on the device."""
from __future__ import annotations

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.hip_kernels.program import NotApplicable, build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import FB, T, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes, matmul
from test_host_emulation import run_host

CASES = [  # N, C, G, K, spatial extents, R, pad, stride, dil, mode
    (2, 16, 1, 24, [9, 9], 3, 1, 1, 1, "CROSS_CORRELATION"),
    (2, 8, 1, 40, [10, 7], 3, 2, 2, 1, "CONVOLUTION"),
    (1, 12, 3, 9, [11, 9], 3, 1, 1, 2, "CROSS_CORRELATION"),     # 3 groups, dilated
    (2, 6, 1, 5, [13], 5, 2, 3, 1, "CROSS_CORRELATION"),          # 1-D, strided
    (1, 4, 2, 6, [4, 5, 5], 3, 1, 1, 1, "CONVOLUTION"),           # 3-D, 2 groups
    (3, 64, 1, 33, [5, 5], 1, 0, 1, 1, "CROSS_CORRELATION"),      # 1 x 1, K over several tiles
]
RUNS = [(op, c, o, lay) for op in ("fwd", "bwd_data", "bwd_filter") for c in range(len(CASES))
        for o, lay in (("INT32", "nhwc"), ("INT8", "nchw"), ("FLOAT", "nhwc"))]
IDS = [f"{op}-case{c}-{o}-{lay}" for op, c, o, lay in RUNS]


def _problem(case, ot, lay, compute="INT32", op="fwd"):
    """(a, b, output, graph): the direction's two INT8 inputs and its output."""
    N, C, G, K, S, R, pad, st, dil, mode = case
    nsp = len(S)
    P = [(h + 2 * pad - (dil * (R - 1) + 1)) // st + 1 for h in S]
    xd, wd, yd = [N, C] + S, [K, C // G] + [R] * nsp, [N, K] + P
    args = ([pad] * nsp, [st] * nsp, [dil] * nsp, mode)
    if op == "fwd":
        a, b, o = T(1, xd, "INT8", lay), T(2, wd, "INT8", lay), T(3, yd, ot, lay)
        n = conv_fwd(1, 2, 3, *args)
    elif op == "bwd_data":
        a, b, o = T(1, yd, "INT8", lay), T(2, wd, "INT8", lay), T(3, xd, ot, lay)
        n = conv_bwd_data(1, 2, 3, *args)
    else:
        a, b, o = T(1, xd, "INT8", lay), T(2, yd, "INT8", lay), T(3, wd, ot, lay)
        n = conv_bwd_filter(1, 2, 3, *args)
    n["compute_data_type"] = FB["DataType"][compute]
    return a, b, o, graph_bytes([a, b, o], [n])


def _values(a, b, seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, a.dims).astype(np.float64),
            rng.integers(-128, 128, b.dims).astype(np.float64))


def _ref(case, ot, av, bv, op="fwd", out_dims=None):
    """The CPU reference kernel's exact int64 sums, converted like the CPU engine's store."""
    S, pad, st, dil, mode = case[4], case[6], case[7], case[8], case[9]
    nsp = len(S)
    prm = ([pad] * nsp, [pad] * nsp, [st] * nsp, [dil] * nsp, mode)
    a, b = av.astype(np.int64), bv.astype(np.int64)
    if op == "fwd":
        r = kconv.conv_fwd(a, b, *prm, compute_dtype=np.int32)
    elif op == "bwd_data":
        r = kconv.conv_bwd_data(a, b, out_dims, *prm, compute_dtype=np.int32)
    else:
        r = kconv.conv_bwd_filter(a, b, out_dims, *prm, compute_dtype=np.int32)
    if ot == "INT8":
        return np.clip(r, -128, 127).astype(np.float64)
    if ot == "FLOAT":
        return r.astype(np.float32).astype(np.float64)
    return r.astype(np.float64)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_int8_conv_host_emulation(run):
    op, c, ot, lay = run
    a, b, o, g = _problem(CASES[c], ot, lay, op=op)
    av, bv = _values(a, b, c)
    res, names = run_host(g, {a: av, b: bv}, [o], arch="sm_80")
    assert names and all(n.startswith("hdn_s8_") for n in names), names
    np.testing.assert_array_equal(res[o.uid], _ref(CASES[c], ot, av, bv, op, o.dims))


def test_int8_conv_saturates_int8_outputs():
    """Large sums: the INT8 output saturates at -128 / 127 (emulated, or planned only)."""
    case = (1, 32, 1, 4, [3, 3], 3, 0, 1, 1, "CROSS_CORRELATION")
    x, w, y, g = _problem(case, "INT8", "nhwc")
    xv, wv = np.full(x.dims, 100.0), np.full(w.dims, 100.0)
    wv[1] = -100.0
    ref = _ref(case, "INT8", xv, wv)
    assert set(np.unique(ref)) == {-128.0, 127.0}
    if host_emu.compiler() is not None:
        res, _ = run_host(g, {x: xv, w: wv}, [y], arch="sm_80")
        np.testing.assert_array_equal(res[y.uid], ref)


def test_int8_matmul_host_emulation():
    """INT8 matmul runs on the same kernel (batched, b column-major, FLOAT output)."""
    if host_emu.compiler() is None:
        pytest.skip("no host C++ compiler")
    a, b, c = T(1, [3, 20, 40], "INT8"), T(2, [3, 40, 37], "INT8", strides=[40 * 37, 1, 40]), T(3, [3, 20, 37], "FLOAT")
    n = matmul(1, 2, 3)
    n["compute_data_type"] = FB["DataType"]["INT32"]
    rng = np.random.default_rng(5)
    av, bv = rng.integers(-128, 128, a.dims).astype(np.float64), rng.integers(-128, 128, b.dims).astype(np.float64)
    res, names = run_host(graph_bytes([a, b, c], [n]), {a: av, b: bv}, [c], arch="sm_80")
    assert names == ["hdn_s8_u0"] or all(x.startswith("hdn_s8_") for x in names)
    np.testing.assert_array_equal(res[3], np.einsum("bmk,bkn->bmn", av, bv))


def _decline(g, arch="sm_90"):
    with pytest.raises(NotApplicable) as e:
        build_program(parse_graph(g), arch=arch)
    return str(e.value)


def test_int8_conv_declines():
    assert "NVIDIA only" in _decline(_problem(CASES[0], "INT32", "nhwc")[3], arch="gfx942")
    assert "compute type FLOAT" in _decline(_problem(CASES[0], "INT32", "nhwc", compute="FLOAT")[3])
    assert "y is HALF" in _decline(_problem(CASES[0], "HALF", "nhwc")[3])
    assert "dx is HALF" in _decline(_problem(CASES[0], "HALF", "nhwc", op="bwd_data")[3])
    assert "NVIDIA only" in _decline(_problem(CASES[0], "INT32", "nhwc", op="bwd_filter")[3], arch="gfx942")
    dy, w, dx = T(1, [1, 4, 5, 5], "INT8"), T(2, [4, 3, 3, 3], "HALF"), T(3, [1, 3, 5, 5], "INT32")
    n = conv_bwd_data(1, 2, 3, [1, 1], [1, 1], [1, 1])
    n["compute_data_type"] = FB["DataType"]["INT32"]
    assert "must both be INT8" in _decline(graph_bytes([dy, w, dx], [n]))


@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_int8_conv_one_kernel_in_place(op, lay):
    """One launch of the INT8 WMMA kernel per grouped node, operands read in place (no layout
    copies, no workspace), on Hopper and on the portable plan alike (ungrouped channels-last
    forward convolutions run on the s8 wgmma core on Hopper: test_int8_wgmma.py)."""
    g = _problem(CASES[2], "INT32", lay, op=op)[3]
    for arch in ("sm_90", None):
        prog = build_program(parse_graph(g), arch=arch)
        assert [s[2] for s in prog.steps] == ["hdn_s8_u0"] and prog.ws_size == 0


@pytest.mark.gpu
@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_int8_conv_gpu(R, run):
    op, c, ot, lay = run
    a, b, o, g = _problem(CASES[c], ot, lay, op=op)
    av, bv = _values(a, b, c)
    got = R.run(g, {a: av, b: bv}, [o])[o.uid]
    np.testing.assert_array_equal(np.asarray(got, np.float64), _ref(CASES[c], ot, av, bv, op, o.dims))
