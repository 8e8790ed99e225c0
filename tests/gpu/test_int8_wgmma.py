"""INT8 x INT8 on Hopper's integer wgmma (``m64nNk32.s32.s8.s8``): matmul and channels-last
convolution forward on the GEMM core (gemm_wgmma.hip with WG_S8 / HDN_ACC_INT: int32
accumulators, int32 split-K partials, the epilogue converting the exact sum to INT32 / INT8
(saturated) / FLOAT, a fused pointwise run on the float value of a FLOAT c).

CI (no GPU): the core choice (Hopper -> wgmma, others -> the INT8 WMMA kernel, AMD declines),
the sources compile for sm_90a without spills or serialised wgmma (IGMMA in SASS where
cuobjdump is installed), and the generated preludes - gathers, int epilogue, split-K finish -
run under the serial host emulation and match exact int64 sums.  GPU (``-m gpu``): the same
cases on the device against numpy int64 math, and the device plan is on the wgmma core."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import NotApplicable, build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import FB, T, conv_fwd, graph_bytes, matmul, pw
from test_host_emulation import run_host

# M, N, K, batch, b K-major (strides [.., 1, K]), output type
MM = [
    (256, 256, 512, 0, True, "INT32"),      # both operands on the tensor copy engine
    (130, 72, 96, 0, False, "FLOAT"),       # row-major b: copied K-major first; M / N tails
    (200, 136, 160, 0, True, "INT8"),       # saturated INT8 output
    (33, 17, 40, 0, False, "INT32"),        # odd M / N, K % 16 != 0: element gathers
    (64, 48, 24, 0, True, "INT32"),         # K % 16 != 0 with K % 8 == 0
    (100, 64, 128, 3, True, "INT32"),       # batched
    (100, 64, 128, 3, False, "FLOAT"),      # batched, row-major b
    (128, 128, 16384, 0, True, "INT32"),    # skinny: split-K with int32 partials
]
MM_IDS = [f"{M}x{N}x{K}-b{B}-{'kmaj' if bt else 'rowmaj'}-{o}" for M, N, K, B, bt, o in MM]

# N, C, K, H, R, pad, stride, groups, output type
CONV = [
    (2, 128, 64, 10, 3, 1, 1, 1, "INT32"),   # C % 128 == 0: precomputed addressing
    (2, 64, 72, 10, 3, 1, 1, 1, "INT8"),     # element gathers, saturated output
    (4, 64, 256, 8, 1, 0, 1, 1, "FLOAT"),    # 1 x 1: both operands on the copy engine
    (2, 32, 40, 9, 3, 1, 2, 1, "INT32"),     # stride 2, N tail
]
CONV_IDS = [f"n{c[0]}c{c[1]}k{c[2]}h{c[3]}r{c[4]}p{c[5]}s{c[6]}g{c[7]}-{c[8]}" for c in CONV]


def _mm(M, N, K, B, bt, out, bias_relu=None):
    """(a, b, output, graph): c = a @ b (INT32 compute); ``bias_relu``: c FLOAT virtual, then
    y = relu(c + bias) of that output type."""
    bd = [B] if B else []
    a = T(1, bd + [M, K], "INT8")
    b = T(2, bd + [K, N], "INT8", strides=([K * N] if B else []) + [1, K] if bt else None)
    n = matmul(1, 2, 3)
    n["compute_data_type"] = FB["DataType"]["INT32"]
    if bias_relu is None:
        c = T(3, bd + [M, N], out)
        return a, b, c, None, graph_bytes([a, b, c], [n])
    c = T(3, bd + [M, N], "FLOAT", virtual=True)
    bias = T(4, [1] * len(bd) + [1, N], "FLOAT")
    t = T(5, bd + [M, N], "FLOAT", virtual=True)
    y = T(6, bd + [M, N], bias_relu)
    return a, b, y, bias, graph_bytes([a, b, c, bias, t, y], [n, pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])


def _conv(N, C, K, H, R, pad, st, G, out):
    P = (H + 2 * pad - R) // st + 1
    x, w, y = T(1, [N, C, H, H], "INT8", "nhwc"), T(2, [K, C // G, R, R], "INT8", "nhwc"), \
        T(3, [N, K, P, P], out, "nhwc")
    n = conv_fwd(1, 2, 3, [pad, pad], [st, st], [1, 1])
    n["compute_data_type"] = FB["DataType"]["INT32"]
    return x, w, y, graph_bytes([x, w, y], [n])


def _ints(shape, seed, lo=-128, hi=128):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(np.float64)


def _store(r, out):
    """The exact int64 sums ``r`` stored as ``out``: INT8 saturates, FLOAT rounds to nearest."""
    if out == "INT8":
        return np.clip(r, -128, 127).astype(np.float64)
    if out == "FLOAT":
        return r.astype(np.float32).astype(np.float64)
    return r.astype(np.float64)


def _mm_ref(av, bv, out):
    return _store(np.matmul(av.astype(np.int64), bv.astype(np.int64)), out)


def _conv_ref(xv, wv, pad, st, G):
    """Exact int64 NCHW-logical cross-correlation (groups)."""
    x, w = xv.astype(np.int64), wv.astype(np.int64)
    N, C, H, _ = x.shape
    K, Cg, R, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    P = (H + 2 * pad - R) // st + 1
    y = np.zeros((N, K, P, P), np.int64)
    Kg = K // G
    for g in range(G):
        for r in range(R):
            for s in range(R):
                patch = xp[:, g * Cg:(g + 1) * Cg, r:r + st * P:st, s:s + st * P:st]   # N Cg P P
                y[:, g * Kg:(g + 1) * Kg] += np.einsum("ncpq,kc->nkpq", patch, w[g * Kg:(g + 1) * Kg, :, r, s])
    return y


def _launches(g, arch):
    return [s for s in build_program(parse_graph(g), arch=arch).steps if s[0] == "launch"]


# ------------------------------------------------------------------------- CI: planning
@pytest.mark.parametrize("case", MM, ids=MM_IDS)
def test_int8_matmul_core_choice(case):
    """Hopper: the s8 wgmma core (WG_S8, int epilogue; split-K finish with int partials);
    elsewhere the INT8 WMMA kernel; AMD declines."""
    g = _mm(*case)[4]
    st = _launches(g, "sm_90")
    names = [s[2] for s in st]
    assert "hdn_gemm_wgmma" in names and not any(n.startswith("hdn_s8_") for n in names), names
    src = [s for s in st if s[2] == "hdn_gemm_wgmma"][0][1]
    assert "#define WG_S8 1" in src and "#define HDN_ACC_INT 1" in src and "#define WG_FP8 0" in src
    if case[2] == 16384:
        assert names[-1] == "hdn_gemm_splitk", names
    for arch in ("sm_80", None):
        assert [s[2] for s in _launches(g, arch)] == ["hdn_s8_u0"]
    with pytest.raises(NotApplicable, match="NVIDIA only"):
        build_program(parse_graph(g), arch="gfx942")


@pytest.mark.parametrize("case", CONV, ids=CONV_IDS)
def test_int8_conv_fwd_core_choice(case):
    """Channels-last forward: wgmma on Hopper with no layout copies; NCHW and grouped
    convolutions stay on WMMA."""
    g = _conv(*case)[3]
    prog = build_program(parse_graph(g), arch="sm_90")
    assert [s[2] for s in prog.steps] == ["hdn_gemm_wgmma"] and prog.ws_size == 0, prog.notes
    assert [s[2] for s in _launches(_conv(2, 32, 24, 7, 3, 1, 1, 2, "INT32")[3], "sm_90")] == ["hdn_s8_u0"]
    x, w, y = T(1, [2, 16, 9, 9], "INT8"), T(2, [24, 16, 3, 3], "INT8"), T(3, [2, 24, 9, 9], "INT32")
    n = conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1])
    n["compute_data_type"] = FB["DataType"]["INT32"]
    assert [s[2] for s in _launches(graph_bytes([x, w, y], [n]), "sm_90")] == ["hdn_s8_u0"]


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_int8_bias_relu_fused(arch):
    """matmul -> FLOAT c -> + bias -> relu: one launch (wgmma epilogue / the WMMA kernel's
    generated store_c); an INT32 c keeps the run in its own kernel."""
    g = _mm(200, 136, 160, 0, True, None, bias_relu="FLOAT")[4]
    prog = build_program(parse_graph(g), arch=arch)
    assert len([s for s in prog.steps if s[0] == "launch"]) == 1, prog.notes
    assert any("pointwise node(s) fused" in x for x in prog.notes)


def test_int8_wgmma_sources_compile_sm90a(tmp_path):
    """Every planned s8 wgmma / split-K source compiles for sm_90a without spills or a
    serialised wgmma pipeline; the SASS issues IGMMA."""
    from test_kernel_sources import _compile_v, _compiler, _cuobjdump, _sass
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    graphs = [(f"mm{i}", _mm(*m)[4]) for i, m in enumerate(MM)] + \
        [(f"conv{i}", _conv(*cv)[3]) for i, cv in enumerate(CONV)] + \
        [("mm_bias_relu", _mm(200, 136, 160, 0, True, None, bias_relu="HALF")[4])]
    for name, g in graphs:
        for st in _launches(g, "sm_90"):
            if st[2] == "hdn_gemm_wgmma":
                img = _compile_v(c, st[1], name, st[6]["arch"], hdr)
                if exe is not None:
                    sass = _sass(exe, env, tmp_path, name, img)
                    assert "IGMMA" in sass, name
            else:
                c.compile(st[1], f"{name}_{st[2]}.hip", (), "sm_90", hdr)


# ------------------------------------------------------------------------- CI: host emulation
@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("case", [m for m in MM if m[2] <= 512], ids=[i for m, i in zip(MM, MM_IDS) if m[2] <= 512])
def test_int8_wgmma_prelude_host_emulation(case):
    """The s8 wgmma program's preludes (gathers, int epilogue) under a serial loop: exact."""
    a, b, c, _, g = _mm(*case)
    av, bv = _ints(a.dims, 1), _ints(b.dims, 2)
    res, names = run_host(g, {a: av, b: bv}, [c], arch="sm_90")
    assert "hdn_gemm_wgmma" in names, names
    np.testing.assert_array_equal(res[c.uid], _mm_ref(av, bv, case[5]))


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("case", CONV, ids=CONV_IDS)
def test_int8_wgmma_conv_host_emulation(case):
    """Channels-last forward on the s8 wgmma core: its preludes under a serial loop, exact."""
    x, w, y, g = _conv(*case)
    xv, wv = _ints(x.dims, 5), _ints(w.dims, 6)
    res, names = run_host(g, {x: xv, w: wv}, [y], arch="sm_90")
    assert names == ["hdn_gemm_wgmma"], names
    np.testing.assert_array_equal(res[y.uid], _store(_conv_ref(xv, wv, case[5], case[6], case[7]), case[8]))


def test_int8_conv_chunk_gathers():
    """C % 16 == 0 channels-last operands keep 16-byte chunk gathers (16 channels of one tap)
    on the s8 core; C % 16 != 0 falls back to element gathers."""
    def modes(C):
        st = _launches(_conv(2, C, 24, 9, 3, 1, 1, 1, "INT32")[3], "sm_90")[0][1]
        return [ln for ln in st.splitlines() if ln.startswith(("#define A_MODE", "#define B_MODE"))][:2]
    assert modes(64) == ["#define A_MODE 1", "#define B_MODE 1"]
    assert modes(24) == ["#define A_MODE 0", "#define B_MODE 0"]
    if host_emu.compiler() is None:
        return
    # every 16-element chunk the producer loads is 16 contiguous, 16-aligned elements (or all
    # padding): the generated gathers, checked on the host
    for case in [(2, 64, 24, 9, 3, 1, 1, 1, "INT32"), (2, 32, 40, 9, 3, 1, 2, 1, "INT32"),
                 (1, 48, 16, 6, 3, 2, 1, 1, "INT8")]:
        src = _launches(_conv(*case)[3], "sm_90")[0][1]
        prelude = src[:src.index(codegen.read_kernel("gemm_wgmma.hip"))]
        d = {k: int(v) for k, v in re.findall(r"#define (G\w+|A_MODE|B_MODE) (-?\d+)\n", prelude)}
        assert (d["A_MODE"], d["B_MODE"]) == (1, 1), case
        assert host_emu.chunk_violations(prelude, codegen.headers(), d["GBATCH"], d["GM"], d["GN"], d["GK"],
                                         1, 1, width=16) == 0, case


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
def test_int8_wgmma_splitk_host_emulation():
    """Split-K: int32 partials summed by the finish kernel (emulated), exact."""
    a, b, c, _, g = _mm(128, 64, 4096, 0, True, "INT32")
    av, bv = _ints(a.dims, 3), _ints(b.dims, 4)
    res, names = run_host(g, {a: av, b: bv}, [c], arch="sm_90", sms=132)
    assert names[-1] == "hdn_gemm_splitk", names
    np.testing.assert_array_equal(res[c.uid], _mm_ref(av, bv, "INT32"))


# ------------------------------------------------------------------------- GPU
def _device_is_hopper():
    from hipdnn_cabi import device
    arch = getattr(device.get_runtime(), "arch", None)
    return str(arch or "").startswith("sm_9")


def _plan_notes(g):
    from engine_plugins.hip_kernels.engine import analyse
    a = analyse(parse_graph(g))
    assert a.ok, a.reason
    return a.program.notes


@pytest.mark.gpu
@pytest.mark.parametrize("case", MM, ids=MM_IDS)
def test_int8_matmul_gpu(R, case):
    a, b, c, _, g = _mm(*case)
    av, bv = _ints(a.dims, 11), _ints(b.dims, 12)
    got = R.run(g, {a: av, b: bv}, [c])[c.uid]
    np.testing.assert_array_equal(np.asarray(got, np.float64), _mm_ref(av, bv, case[5]))


@pytest.mark.gpu
def test_int8_matmul_extremes_gpu(R):
    """All -128 operands (the largest products): exact INT32 sums and INT8 saturation."""
    for out in ("INT32", "INT8"):
        a, b, c, _, g = _mm(128, 64, 1024, 0, True, out)
        av, bv = np.full(a.dims, -128.0), np.full(b.dims, -128.0)
        bv[:, 1::2] = 127.0
        got = R.run(g, {a: av, b: bv}, [c])[c.uid]
        np.testing.assert_array_equal(np.asarray(got, np.float64), _mm_ref(av, bv, out))


@pytest.mark.gpu
@pytest.mark.parametrize("out", ["FLOAT", "HALF"])
def test_int8_matmul_bias_relu_gpu(R, out):
    """relu(float(a @ b) + bias) fused into the epilogue (sums below 2^24: exact in float)."""
    a, b, y, bias, g = _mm(200, 136, 160, 0, True, None, bias_relu=out)
    av, bv = _ints(a.dims, 21, -16, 16), _ints(b.dims, 22, -16, 16)
    biv = np.random.default_rng(23).standard_normal(bias.dims).astype(np.float32).astype(np.float64) * 500
    got = R.run(g, {a: av, b: bv, bias: biv}, [y])[y.uid]
    s = np.matmul(av.astype(np.int64), bv.astype(np.int64)).astype(np.float32)
    ref = np.maximum(s + biv.astype(np.float32), np.float32(0))
    if out == "HALF":
        np.testing.assert_array_equal(np.asarray(got, np.float64), ref.astype(np.float16).astype(np.float64))
    else:
        np.testing.assert_array_equal(np.asarray(got, np.float64), ref.astype(np.float64))


@pytest.mark.gpu
@pytest.mark.parametrize("case", CONV, ids=CONV_IDS)
def test_int8_conv_fwd_nhwc_gpu(R, case):
    x, w, y, g = _conv(*case)
    xv, wv = _ints(x.dims, 31), _ints(w.dims, 32)
    got = R.run(g, {x: xv, w: wv}, [y])[y.uid]
    ref = _store(_conv_ref(xv, wv, case[5], case[6], case[7]), case[8])
    np.testing.assert_array_equal(np.asarray(got, np.float64), ref)


@pytest.mark.gpu
def test_int8_device_plan_is_wgmma():
    """On an sm_90 device the engine's own plan runs INT8 GEMMs on the s8 wgmma core."""
    if not _device_is_hopper():
        pytest.skip("not a Hopper device")
    for g in (_mm(*MM[0])[4], _conv(*CONV[0])[3]):
        notes = _plan_notes(g)
        assert any("wgmma core" in x for x in notes), notes
