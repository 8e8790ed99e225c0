"""CI (no GPU): the generated kernels' index arithmetic, run on the host (see host_emu.py) and
compared with the CPU reference kernels - conv forward / backward data / backward filter
(NCHW, NHWC, strides, dilation, both conv modes, split-K finish, fused epilogue, 16-byte
epilogue stores), matmul, batchnorm backward (finalize + apply), reduction, runtime scalars.
Barrier kernels (batchnorm statistics and backward sums, transposes) run as numpy stand-ins of
their contract."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import batchnorm as kbn
from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.cpu_reference.kernels import reduction as kred
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import (NP, TOL, T, bn_bwd, conv_bias_relu_graph, conv_bwd_data, conv_bwd_filter, conv_fwd,
                         from_storage, graph_bytes, pw, quantize, reduction, relerr, to_storage)

pytestmark = pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
rng = np.random.default_rng(7)
HDR = codegen.headers()


def _defs(src):
    return {k: int(v) for k, v in re.findall(r"#define (G\w+|C_VEC) (\d+)", src)}


def run_host(gbytes, inputs, outputs, scalars=None, sms=132, vec8=True, arch=None, prog_out=None):
    prog = build_program(parse_graph(gbytes), use_mma=True, sms=sms, arch=arch)
    if prog_out is not None:
        prog_out.append(prog)
    mem = host_emu.HostMem()
    ptr, host = {}, {}
    for t, v in list(inputs.items()) + [(t, None) for t in outputs]:
        st = to_storage(t, v if v is not None else np.zeros(t.dims))
        p, raw = mem.alloc(st.nbytes)
        if v is not None:
            raw[:] = st.view(np.uint8)
        ptr[t.uid], host[t.uid] = p, (raw, st.dtype, t)
    wsp, wsraw = mem.alloc(max(16, prog.ws_size))
    scp, scraw = mem.alloc(max(16, prog.scratch_size))   # the plan's own scratch
    base = {"ws": (wsp, wsraw), "sc": (scp, scraw)}
    scalars = scalars or {}
    bodies = {"hdn_gemm_wgmma": codegen.read_kernel("gemm_wgmma.hip"),
              "hdn_gemm_mma": codegen.read_kernel("gemm_mma.hip"),
              "hdn_gemm_simt": codegen.read_kernel("gemm_simt.hip")}
    names = []
    for st in prog.steps:
        if st[0] == "memset":
            if st[1][0] == "t":          # a bound tensor (strided 1 x 1 backward data: dx)
                host[st[1][1]][0][:st[2]] = 0
                continue
            raw = base[st[1][0]][1]
            raw[st[1][1]:st[1][1] + st[2]] = 0
            continue
        _, src, name, grid, block, args = st[:6]      # (launch options: the device's business)
        names.append(name)
        args = [a for a in args if a[0] != "tmap"]     # the emulated preludes gather every operand
        vals = [ptr[a[1]] if a[0] == "t" else base[a[0]][0] + a[1] if a[0] in base
                else ctypes.c_double(scalars[a[1]]) if a[2:] == ("double",)
                else float(scalars[a[1]]) for a in args]
        if name in bodies:
            prelude = src[:src.index(bodies[name])]
            d = _defs(prelude)
            host_emu.run_gemm_prelude(prelude, vals, HDR, vec8 and d["C_VEC"] and d["GSPLIT"] == 1,
                                      d["GBATCH"], d["GM"], d["GN"], d["GK"], d["GSPLIT"])
        elif name.startswith("hdn_s8_"):     # the INT8 WMMA GEMM: its prelude, serially
            host_emu.run_int8_gemm(src, vals, HDR)
        elif name == "hdn_transpose":
            _transpose_numpy(src, vals)
        elif '#include "hdn_mma.h"' in src:     # cp.async / warp shuffles (the norm backward V2): per lane
            host_emu.run_mma_kernel(src, name, grid, block, vals, HDR)
        elif re.search(r"hdn_block_(colsum|sum)<", src):     # barriers + lane exchanges: threads per block
            host_emu.run_kernel_threads(src, name, grid, block, vals, HDR)
        elif name == "hdn_bn_bwd_sums":
            _bn_bwd_sums_numpy(gbytes, ptr, host, vals)
        elif name == "hdn_bn_stats":
            _bn_stats_numpy(gbytes, ptr, host, vals)
        elif name.startswith("hdn_reduce_part"):
            pytest.skip(f"{name} uses barriers (GPU only)")
        else:
            host_emu.run_kernel(src, name, grid, block, vals, HDR)
    res = {}
    for t in outputs:
        raw, dtp, _ = host[t.uid]
        res[t.uid] = from_storage(t, raw.view(dtp).copy())
    return res, names


def _transpose_numpy(src, vals):
    """transpose.hip's contract (it uses shared memory + a barrier): Y[b][c][r] = X[b][r][c],
    X rows at TR_SR, batches at TR_SB, Y packed."""
    import ctypes
    d = {}
    for k, v in re.findall(r"#define (TR_\w+) (\d+)", src):
        d.setdefault(k, int(v))          # the generated prelude, not the body's defaults
    es = {"unsigned": 4, "hdn_u16": 2, "unsigned char": 1}[re.search(r"typedef (.+) TR_T;", src).group(1)]
    B, R_, C, SR, SB = d["TR_B"], d["TR_R"], d["TR_C"], d["TR_SR"], d["TR_SB"]
    span = (B - 1) * SB + (R_ - 1) * SR + C
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * (span * es)).from_address(vals[0]))
    dt_ = {4: np.uint32, 2: np.uint16, 1: np.uint8}[es]
    x = np.lib.stride_tricks.as_strided(raw.view(dt_), (B, R_, C), (SB * es, SR * es, es))
    out = np.ctypeslib.as_array((ctypes.c_uint8 * (B * R_ * C * es)).from_address(vals[1])).view(dt_)
    out[:] = np.ascontiguousarray(x.transpose(0, 2, 1)).reshape(-1)


def _read_at(addr, t):
    """The logical values of graph tensor ``t`` stored at host address ``addr``."""
    import ctypes
    dtp = codegen.dtype_name(t.dtype)
    tt = T(t.uid, [int(d) for d in t.dims], dtp, strides=[int(s) for s in t.strides])
    itemsize = np.dtype(NP[dtp]).itemsize
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * (tt.span * itemsize)).from_address(addr))
    return from_storage(tt, raw.view(NP[dtp]))


def _bn_bwd_sums_numpy(gbytes, ptr, host, vals):
    """hdn_bn_bwd_sums' contract: ws[c] = sum(dy), ws[C + c] = sum(dy * (x - mean) * iv) over
    channel c; operands read where the step's arguments point (bound or workspace)."""
    g = parse_graph(gbytes)
    n = next(n for n in g.nodes if n.kind == "BatchnormBackwardAttributes")
    get = lambda role, k: _read_at(vals[k], g.tensors[n.attrs[role + "_tensor_uid"]])  # noqa: E731
    dy, x = get("dy", 0), get("x", 1)
    mu, iv = get("mean", 2).reshape(-1), get("inv_variance", 3).reshape(-1)
    C = x.shape[1]
    ax = (0,) + tuple(range(2, x.ndim))
    shp = [1, C] + [1] * (x.ndim - 2)
    s1 = dy.sum(axis=ax)
    s2 = (dy * (x - mu.reshape(shp)) * iv.reshape(shp)).sum(axis=ax)
    import ctypes
    arr = (ctypes.c_double * (2 * C)).from_address(vals[4])
    for c in range(C):
        arr[c], arr[C + c] = float(s1[c]), float(s2[c])


def _bn_stats_numpy(gbytes, ptr, host, vals):
    """hdn_bn_stats' contract (shared memory + barriers): double ws[c] += sum of channel c of x,
    ws[C + c] += its sum of squares; x is the bound input at vals[0]."""
    import ctypes
    uid = next(u for u, p in ptr.items() if p == vals[0])
    raw, dtp, t = host[uid]
    x = from_storage(t, raw.view(dtp)).astype(np.float64)
    C = x.shape[1]
    ax = (0,) + tuple(range(2, x.ndim))
    arr = (ctypes.c_double * (2 * C)).from_address(vals[1])
    for c, (s1, s2) in enumerate(zip(x.sum(axis=ax), (x * x).sum(axis=ax))):
        arr[c] += float(s1)
        arr[C + c] += float(s2)


def rnd(dims, dtype):
    return quantize(rng.standard_normal(dims), dtype)


CASES = [  # N, C, H, K, R, pad, stride, dil, mode
    (2, 16, 9, 24, 3, 1, 1, 1, "CROSS_CORRELATION"),
    (2, 8, 10, 16, 3, 1, 2, 1, "CONVOLUTION"),
    (1, 8, 11, 8, 3, 2, 2, 2, "CROSS_CORRELATION"),
    (2, 3, 9, 8, 1, 0, 2, 1, "CROSS_CORRELATION"),
]


def _conv_tensors(case, dtp, lay):
    N, C, H, K, R, pad, st, dil, mode = case
    P = (H + 2 * pad - (dil * (R - 1) + 1)) // st + 1
    return (T(1, [N, C, H, H], dtp, lay), T(2, [K, C, R, R], dtp, lay), T(3, [N, K, P, P], dtp, lay),
            [pad, pad], [st, st], [dil, dil], mode)


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
def test_conv_directions(dtp, lay, case, op):
    check_conv_direction(op, dtp, *_conv_tensors(CASES[case], dtp, lay))


def check_conv_direction(op, dtp, x, w, y, pad, st, dil, mode):
    """One convolution direction (x uid 1, w 2, y 3) under host emulation against the CPU
    reference's float64 result."""
    xv, wv, yv = rnd(x.dims, dtp), rnd(w.dims, dtp), rnd(y.dims, dtp)
    if op == "fwd":
        g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, pad, st, dil, mode)])
        out = run_host(g, {x: xv, w: wv}, [y])[0][3]
        ref = kconv.conv_fwd(xv, wv, pad, pad, st, dil, mode, compute_dtype=np.float64)
    elif op == "bwd_data":
        g = graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, pad, st, dil, mode)])
        out = run_host(g, {y: yv, w: wv}, [x])[0][1]
        ref = kconv.conv_bwd_data(yv, wv, x.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    else:
        g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, pad, st, dil, mode)])
        out = run_host(g, {x: xv, y: yv}, [w])[0][2]
        ref = kconv.conv_bwd_filter(xv, yv, w.dims, pad, pad, st, dil, mode, compute_dtype=np.float64)
    e = relerr(out, quantize(ref, dtp))
    assert np.all(np.isfinite(out)) and e < TOL[dtp], (op, e)


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
def test_conv_splitk_and_fused_epilogue(dtp, lay, monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_WINOGRAD", "0")     # the direct GEMM's split-K
    # K = 64 * 9 = 576 and one 128x128 tile: split-K; bias + relu run in the split-K finish
    x, w, b, y, g = conv_bias_relu_graph(2, 64, 32, 6, dtp, lay)
    xv, wv, bvv = rnd(x.dims, dtp), rnd(w.dims, dtp), rnd(b.dims, dtp)
    res, names = run_host(g, {x: xv, w: wv, b: bvv}, [y])
    assert "hdn_gemm_splitk" in names
    ref = np.maximum(kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bvv, 0)
    assert relerr(res[6], quantize(ref, dtp)) < TOL[dtp]


@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
def test_conv_vector_epilogue(lay):
    x = T(1, [2, 16, 5, 5], "HALF", lay)
    w = T(2, [64, 16, 1, 1], "HALF", lay)
    y = T(3, [2, 64, 5, 5], "HALF", lay)
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [0, 0], [1, 1], [1, 1])])
    xv, wv = rnd(x.dims, "HALF"), rnd(w.dims, "HALF")
    out = run_host(g, {x: xv, w: wv}, [y], vec8=True)[0][3]
    ref = kconv.conv_fwd(xv, wv, [0, 0], [0, 0], [1, 1], [1, 1], compute_dtype=np.float64)
    assert relerr(out, quantize(ref, "HALF")) < TOL["HALF"]


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
def test_bn_backward_finalize_apply(dtp, lay):
    dims = [3, 16, 5, 7]
    cd = [1, 16, 1, 1]
    dy, x, dx = T(1, dims, dtp, lay), T(2, dims, dtp, lay), T(6, dims, dtp, lay)
    mu, iv, sc, ds, db = T(3, cd), T(4, cd), T(5, cd), T(7, cd), T(8, cd)
    g = graph_bytes([dy, x, mu, iv, sc, dx, ds, db], [bn_bwd(1, 2, 3, 4, 5, 6, 7, 8)])
    xv, dyv = rnd(dims, dtp), rnd(dims, dtp)
    muv = xv.mean(axis=(0, 2, 3), keepdims=True)
    ivv = 1 / np.sqrt(xv.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    scv = rnd(cd, "FLOAT")
    res = run_host(g, {dy: dyv, x: xv, mu: muv, iv: ivv, sc: scv}, [dx, ds, db])[0]
    r = kbn.batchnorm_bwd(dyv, xv, scv, muv, ivv)
    assert relerr(res[6], quantize(r.dx, dtp)) < TOL[dtp] * 2
    assert relerr(res[7], r.dscale) < 1e-5 and relerr(res[8], r.dbias) < 1e-5


@pytest.mark.parametrize("mode", ["ADD", "MUL", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS"])
def test_reduction_thread_per_output(mode):
    x = T(1, [6, 5, 40], "FLOAT")
    y = T(2, [6, 1, 40], "FLOAT")
    xv = rnd(x.dims, "FLOAT") * 0.7
    if mode == "MUL_NO_ZEROS":
        xv[0, 1, :] = 0
    out = run_host(graph_bytes([x, y], [reduction(mode, 1, 2)]), {x: xv}, [y])[0][2]
    ref = kred.reduce(mode, xv, y.dims)
    assert relerr(out, ref) < 1e-6, mode


def test_pointwise_runtime_scalar():
    x, s, y = T(1, [8, 40]), T(2, [1, 1], "FLOAT", runtime=True), T(3, [8, 40])
    g = graph_bytes([x, s, y], [pw("MUL", 1, 3, 2)])
    xv = rnd(x.dims, "FLOAT")
    out = run_host(g, {x: xv}, [y], scalars={2: 2.5})[0][3]
    assert relerr(out, xv * 2.5) < 1e-7


def test_conv_epilogue_runtime_scalar():
    x = T(1, [2, 16, 6, 6], "HALF", "nhwc")
    w = T(2, [32, 16, 3, 3], "HALF", "nhwc")
    cv = T(3, [2, 32, 6, 6], "FLOAT", "nhwc", virtual=True)
    b = T(4, [1, 32, 1, 1], "HALF", "nhwc")
    bv = T(5, [2, 32, 6, 6], "FLOAT", "nhwc", virtual=True)
    y = T(6, [2, 32, 6, 6], "HALF", "nhwc")
    s = T(7, [1, 1, 1, 1], "FLOAT", runtime=True)
    g = graph_bytes([x, w, cv, b, bv, y, s], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1]),
                                              pw("ADD", 3, 5, 4), pw("MUL", 5, 6, 7)])
    xv, wv, bvv = rnd(x.dims, "HALF"), rnd(w.dims, "HALF"), rnd(b.dims, "HALF")
    out = run_host(g, {x: xv, w: wv, b: bvv}, [y], scalars={7: 0.5})[0][6]
    ref = (kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bvv) * 0.5
    assert relerr(out, quantize(ref, "HALF")) < TOL["HALF"]


# ------------------------------------- fp32 NCHW forward on the SIMT core: NHWC copies, m-vectors
SIMT_NCHW = [  # N, C, H, W, K, R, pad, stride, dil, mode
    (2, 16, 9, 9, 24, 3, 1, 1, 1, "CROSS_CORRELATION"),
    (2, 5, 10, 7, 12, 3, 1, 2, 1, "CONVOLUTION"),        # C = 5 (no vector multiple), stride 2
    (1, 8, 11, 11, 8, 3, 2, 2, 2, "CROSS_CORRELATION"),  # dilation 2, pad 2
    (3, 12, 6, 6, 20, 1, 0, 1, 1, "CROSS_CORRELATION"),  # 1 x 1: m-vectors (36 positions)
]


def _simt_case(case):
    N, C, H, W, K, R, pad, st, dil, mode = case
    P = (H + 2 * pad - (dil * (R - 1) + 1)) // st + 1
    Q = (W + 2 * pad - (dil * (R - 1) + 1)) // st + 1
    return (T(1, [N, C, H, W], "FLOAT"), T(2, [K, C, R, R], "FLOAT"), T(3, [N, K, P, Q], "FLOAT"),
            [pad, pad], [st, st], [dil, dil], mode)


@pytest.mark.parametrize("case", range(len(SIMT_NCHW)))
@pytest.mark.parametrize("fused", [False, True])
def test_simt_nchw_on_nhwc_copies(case, fused, monkeypatch):
    """HIPDNN_CABI_HIP_SIMT_NHWC=1 (arch sm_90, TF32 off): x and w are transposed into the
    workspace (the transpose's contract in numpy), the channels-last SIMT GEMM writes the NCHW
    y (or the fused bias + relu output) in place."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_SIMT_NHWC", "1")
    monkeypatch.setenv("HIPDNN_CABI_HIP_SIMT_MVEC", "0")
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_WINOGRAD", "0")     # the direct GEMM on NHWC copies
    x, w, y, pad, st, dil, mode = _simt_case(SIMT_NCHW[case])
    xv, wv = rnd(x.dims, "FLOAT"), rnd(w.dims, "FLOAT")
    ref = kconv.conv_fwd(xv, wv, pad, pad, st, dil, mode, compute_dtype=np.float64)
    progs = []
    if fused:
        K = y.dims[1]
        cv = T(4, y.dims, "FLOAT", virtual=True)
        b = T(5, [1, K, 1, 1], "FLOAT")
        bv = T(6, y.dims, "FLOAT", virtual=True)
        g = graph_bytes([x, w, cv, b, bv, y], [conv_fwd(1, 2, 4, pad, st, dil, mode),
                                               pw("ADD", 4, 6, 5), pw("RELU_FWD", 6, 3)])
        bvv = rnd(b.dims, "FLOAT")
        out = run_host(g, {x: xv, w: wv, b: bvv}, [y], arch="sm_90", prog_out=progs)[0][3]
        ref = np.maximum(ref + bvv, 0)
    else:
        g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, pad, st, dil, mode)])
        out = run_host(g, {x: xv, w: wv}, [y], arch="sm_90", prog_out=progs)[0][3]
    prog = progs[0]
    assert any("SIMT core on NHWC copies" in n for n in prog.notes), prog.notes
    assert prog.layout_transforms == (1 if w.dims[2] == 1 else 2), prog.notes
    gemm = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_simt"][0]
    assert "#define A_K_CONTIG 1" in gemm[1]
    assert relerr(out, ref) < TOL["FLOAT"]


@pytest.mark.parametrize("split", ["1", "3"])
def test_simt_nchw_1x1_mvec(split, monkeypatch):
    """fp32 NCHW 1 x 1 (unit stride, no padding, positions % 4 == 0): A_MODE 2 (16-byte
    m-vectors) with no workspace copy; every vector's four a_off are contiguous and aligned, and
    the result matches the reference (with a forced split-K too)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_SPLITK", split)
    x, w, y, pad, st, dil, mode = _simt_case(SIMT_NCHW[3])
    g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, pad, st, dil, mode)])
    xv, wv = rnd(x.dims, "FLOAT"), rnd(w.dims, "FLOAT")
    progs = []
    out = run_host(g, {x: xv, w: wv}, [y], arch="sm_90", prog_out=progs)[0][3]
    prog = progs[0]
    assert prog.ws_size == 0 or split != "1"
    assert not getattr(prog, "layout_transforms", 0)
    src = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_simt"][0][1]
    assert "#define A_MODE 2" in src and "#define A_ROWS" not in src.split("gemm_simt.hip")[0]
    prelude = src[:src.index(codegen.read_kernel("gemm_simt.hip"))]
    d = _defs(prelude)
    assert host_emu.mvec_violations(prelude, HDR, d["GBATCH"], d["GM"], d["GK"]) == 0
    ref = kconv.conv_fwd(xv, wv, pad, pad, st, dil, mode, compute_dtype=np.float64)
    assert relerr(out, ref) < TOL["FLOAT"]


def test_simt_nchw_mvec_rejects_unaligned():
    """Positions per image not a multiple of 4 (9 x 9), padding, or stride 2: no m-vectors."""
    for case in ((2, 8, 9, 9, 16, 1, 0, 1, 1, "CROSS_CORRELATION"),
                 (2, 8, 8, 8, 16, 1, 1, 1, 1, "CROSS_CORRELATION"),
                 (2, 8, 8, 8, 16, 1, 0, 2, 1, "CROSS_CORRELATION")):
        x, w, y, pad, st, dil, mode = _simt_case(case)
        prog = build_program(parse_graph(graph_bytes([x, w, y], [conv_fwd(1, 2, 3, pad, st, dil, mode)])),
                             use_mma=True, arch="sm_90")
        src = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_simt"][0][1]
        assert "#define A_MODE 2" not in src, case


# ------------------------------------------------------ backward filter as dw^T (WGRAD_SWAP)
WGRAD_SWAP = [  # N, C, H, W, K, R, pad, stride, dil, mode (channels-last)
    (2, 64, 7, 7, 64, 3, 1, 1, 1, "CROSS_CORRELATION"),
    (2, 16, 9, 8, 8, 3, 1, 2, 1, "CONVOLUTION"),          # flipped taps, stride 2, K = 8
    (1, 24, 10, 10, 40, 3, 2, 1, 2, "CROSS_CORRELATION"), # C, K not multiples of 64, dilation 2
    (2, 32, 6, 6, 16, 1, 0, 2, 1, "CROSS_CORRELATION"),   # 1 x 1 stride 2
]


@pytest.mark.parametrize("dtp", ["FLOAT", "HALF"])
@pytest.mark.parametrize("case", range(len(WGRAD_SWAP)))
def test_wgrad_swapped_gemm(dtp, case, monkeypatch):
    """HIPDNN_CABI_HIP_WGRAD_SWAP=1: the backward filter GEMM computed as dw^T (M = C*R*S,
    N = K: x is the M-major A, dy the N-major B, dw written through its strides) - gathers and
    epilogue on the host against the reference, with and without split-K."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_WGRAD_SWAP", "1")
    N, C, H, W, K, R, pad, st, dil, mode = WGRAD_SWAP[case]
    P = (H + 2 * pad - (dil * (R - 1) + 1)) // st + 1
    Q = (W + 2 * pad - (dil * (R - 1) + 1)) // st + 1
    x, w, y = T(1, [N, C, H, W], dtp, "nhwc"), T(2, [K, C, R, R], dtp, "nhwc"), T(3, [N, K, P, Q], dtp, "nhwc")
    padv, stv, dilv = [pad, pad], [st, st], [dil, dil]
    g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, padv, stv, dilv, mode)])
    xv, yv = rnd(x.dims, dtp), rnd(y.dims, dtp)
    ref = quantize(kconv.conv_bwd_filter(xv, yv, w.dims, padv, padv, stv, dilv, mode,
                                         compute_dtype=np.float64), dtp)
    for sms in (132, 1):          # 1 SM: no split-K
        progs = []
        out = run_host(g, {x: xv, y: yv}, [w], sms=sms, prog_out=progs)[0][2]
        assert any("dw^T GEMM" in n for n in progs[0].notes), progs[0].notes
        gemm = [s for s in progs[0].steps if s[0] == "launch" and s[2].startswith("hdn_gemm_")][0][1]
        assert f"#define GM {C * R * R}" in gemm and f"#define GN {K}" in gemm
        e = relerr(out, ref)
        assert np.all(np.isfinite(out)) and e < TOL[dtp], (sms, e)
