"""The TF32_MATH engine knob and the NCHW -> NHWC layout transform of the tensor-core paths.

No GPU: the knob is reported in the engine details with a description that says it changes
numerics; programs built for sm_90 put fp32 GEMMs on the wgmma core only with the knob, and
NCHW 16-bit convolutions get workspace transposes (counted in the workspace size).
GPU (``-m gpu``): fp32 matmul / conv fwd / dgrad / wgrad with TF32 against the float64 CPU
reference (TF32 tolerance), and the REQUIRES_LAYOUT_TRANSFORM note for an NCHW fp16 conv."""
from __future__ import annotations

import math
import types

import numpy as np
import pytest

from engine_plugins.hip_kernels import engine as hk
from engine_plugins.hip_kernels.program import build_program
from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.cpu_reference.kernels import matmul as kmm
from hipdnn_cabi.plugin_sdk import parse_graph
from gpu_testlib import T, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes, matmul, quantize, relerr

TF32_TOL = 5e-3
rng = np.random.default_rng(77)


def _conv_graph(kind, dtype, lay, N=2, C=16, H=11, K=32, Rr=3, pad=1, st=1):
    P = (H + 2 * pad - Rr) // st + 1
    x, w, y = T(1, [N, C, H, H], dtype, lay), T(2, [K, C, Rr, Rr], dtype, lay), T(3, [N, K, P, P], dtype, lay)
    args = ([pad, pad], [st, st], [1, 1])
    if kind == "fwd":
        return x, w, y, graph_bytes([x, w, y], [conv_fwd(1, 2, 3, *args)])
    if kind == "data":
        return x, w, y, graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, *args)])
    return x, w, y, graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, *args)])


# ------------------------------------------------------------------------- no GPU needed
def _details():
    from hipdnn_cabi.schemas._generated.EngineDetails import EngineDetails
    eng = hk.HipKernelsEngine()
    eng.id = 1
    from hipdnn_cabi.plugin_sdk.graph import build_engine_details
    buf = build_engine_details(1, eng.reported_behavior_notes(), eng.name, eng.knobs)
    return EngineDetails.GetRootAs(buf, 0)


def test_tf32_knob_reported():
    d = _details()
    ids = [d.Knobs(i).KnobId().decode() for i in range(d.KnobsLength())]
    assert ids == ["TF32_MATH", "global.benchmarking", "global.workspace_size_limit"]
    desc = d.Knobs(0).Description().decode()
    assert "CHANGES NUMERICS" in desc and "default" in desc


def test_tf32_knob_values():
    assert hk.tf32_of(types.SimpleNamespace(knobs={})) is False
    assert hk.tf32_of(types.SimpleNamespace(knobs={"TF32_MATH": {"value": 1}})) is True
    assert hk.tf32_of(types.SimpleNamespace(knobs={"TF32_MATH": 0})) is False
    from hipdnn_cabi.plugin_sdk.errors import PluginError
    for bad in (2, -1, "x"):
        with pytest.raises(PluginError):
            hk.tf32_of(types.SimpleNamespace(knobs={"TF32_MATH": bad}))


def _kernels(prog):
    return [st[2] for st in prog.steps if st[0] == "launch"]


@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
def test_fp32_programs_follow_the_knob(lay):
    a, b, c = T(1, [3, 130, 72]), T(2, [3, 72, 200]), T(3, [3, 130, 200])
    g = parse_graph(graph_bytes([a, b, c], [matmul(1, 2, 3)]))
    assert _kernels(build_program(g, arch="sm_90")) == ["hdn_gemm_simt"]          # default: FFMA
    p = build_program(g, arch="sm_90", tf32=True)
    assert _kernels(p) == ["hdn_transpose", "hdn_gemm_wgmma"]                      # N-major B -> K-major
    assert "#define WG_TF32 1" in [st for st in p.steps if st[2] == "hdn_gemm_wgmma"][0][1]
    assert p.ws_size >= 3 * 72 * 200 * 4
    x, w, y, gb = _conv_graph("fwd", "FLOAT", lay)
    g = parse_graph(gb)
    assert "hdn_gemm_wgmma" not in _kernels(build_program(g, arch="sm_90"))
    p = build_program(g, arch="sm_90", tf32=True)
    assert _kernels(p)[-1] == "hdn_gemm_wgmma"
    assert getattr(p, "layout_transforms", 0) == (2 if lay == "nchw" else 0)
    # no Hopper: TF32 is not available, the knob leaves fp32 on FFMA
    assert "hdn_gemm_wgmma" not in _kernels(build_program(g, arch="sm_80", tf32=True))


@pytest.mark.parametrize("kind", ["fwd", "data", "filter"])
def test_nchw_16bit_conv_transposed_to_nhwc(kind):
    x, w, y, gb = _conv_graph(kind, "HALF", "nchw")
    p = build_program(parse_graph(gb), arch="sm_90")
    ks = _kernels(p)
    assert ks.count("hdn_transpose") == 2 and "hdn_gemm_wgmma" in ks, ks
    assert p.layout_transforms == 2
    # the copies (2-byte elements) are in the workspace size
    copied = {"fwd": (x, w), "data": (y, w), "filter": (x, y)}[kind]
    assert p.ws_size >= sum(2 * math.prod(t.dims) for t in copied)
    # NHWC: no transform
    _, _, _, gb = _conv_graph(kind, "HALF", "nhwc")
    assert not getattr(build_program(parse_graph(gb), arch="sm_90"), "layout_transforms", 0)


# ------------------------------------------------------------------------- on the GPU
@pytest.fixture(scope="module")
def R():
    from gpu_run import Runner
    r = Runner()
    r.cfg = types.SimpleNamespace(engine_id=r.cfg.engine_id, knobs={"TF32_MATH": {"value": 1}})
    return r


def _uses_wgmma(gb, tf32=True):
    a = hk.analyse(parse_graph(gb), tf32)
    assert a.ok, a.reason
    return any("wgmma core" in n for n in a.program.notes)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(3, 130, 72, 200, False), (3, 130, 72, 200, True), (1, 77, 1, 33, False),
                                   (1, 64, 8192, 48, False), (2, 5, 40, 9, True)])
def test_matmul_tf32(R, shape):
    B, M, K, N, bt = shape
    a = T(1, [B, M, K])
    b = T(2, [B, K, N], strides=[K * N, 1, K] if bt else [K * N, N, 1])
    c = T(3, [B, M, N])
    gb = graph_bytes([a, b, c], [matmul(1, 2, 3)])
    av, bv = rng.standard_normal(a.dims), rng.standard_normal(b.dims)
    av, bv = quantize(av, "FLOAT"), quantize(bv, "FLOAT")
    out = R.run(gb, {a: av, b: bv}, [c])[3]
    ref = kmm.matmul(av, bv, compute_dtype=np.float64)
    e = relerr(out, ref)
    assert np.all(np.isfinite(out)) and e < TF32_TOL, e
    if K % 8 == 0 and K > 1:
        assert _uses_wgmma(gb)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fwd", "data", "filter"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("geo", [(2, 16, 11, 32, 3, 1, 1), (2, 24, 12, 40, 1, 0, 2), (1, 8, 9, 16, 3, 2, 2)])
def test_conv_tf32(R, kind, lay, geo):
    N, C, H, K, Rr, pad, st = geo
    x, w, y, gb = _conv_graph(kind, "FLOAT", lay, N, C, H, K, Rr, pad, st)
    xv, wv, yv = (quantize(rng.standard_normal(t.dims), "FLOAT") for t in (x, w, y))
    args = ([pad, pad], [pad, pad], [st, st], [1, 1], "CROSS_CORRELATION")
    if kind == "fwd":
        out = R.run(gb, {x: xv, w: wv}, [y])[3]
        ref = kconv.conv_fwd(xv, wv, *args, compute_dtype=np.float64)
    elif kind == "data":
        out = R.run(gb, {y: yv, w: wv}, [x])[1]
        ref = kconv.conv_bwd_data(yv, wv, x.dims, *args, compute_dtype=np.float64)
    else:
        out = R.run(gb, {x: xv, y: yv}, [w])[2]
        ref = kconv.conv_bwd_filter(xv, yv, w.dims, *args, compute_dtype=np.float64)
    e = relerr(out, ref)
    assert np.all(np.isfinite(out)) and e < TF32_TOL, (kind, lay, geo, e)


@pytest.mark.gpu
def test_layout_transform_note_and_workspace():
    from hipdnn_cabi.schemas._generated.EngineDetails import EngineDetails
    from gpu_run import Runner
    x, w, y, gb = _conv_graph("fwd", "HALF", "nchw")
    g = parse_graph(gb)
    eng = hk.HipKernelsEngine()
    eng.id = 1
    d = EngineDetails.GetRootAs(eng.get_details(None, g), 0)
    notes = [d.BehaviorNotes(i) for i in range(d.BehaviorNotesLength())]
    assert 1 in notes, notes                      # HIPDNN_BEHAVIOR_NOTE_REQUIRES_LAYOUT_TRANSFORM
    _, _, _, gb2 = _conv_graph("fwd", "HALF", "nhwc")
    d2 = EngineDetails.GetRootAs(eng.get_details(None, parse_graph(gb2)), 0)
    assert 1 not in [d2.BehaviorNotes(i) for i in range(d2.BehaviorNotesLength())]
    # numbers: NCHW fp16 through the transpose + wgmma path vs the reference
    r = Runner()
    xv, wv = quantize(rng.standard_normal(x.dims), "HALF"), quantize(rng.standard_normal(w.dims), "HALF")
    out = r.run(gb, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], "CROSS_CORRELATION", compute_dtype=np.float64)
    assert relerr(out, quantize(ref, "HALF")) < 4e-3


def test_amd_cdna_programs_use_the_mfma_kernel():
    """gfx90a / gfx942: 16-bit GEMMs go to kernels/gemm_mfma.hip (hiprtc; compiled offline by
    make check-amd, never run here), fp32 stays on SIMT; other AMD targets are declined (nothing
    is compiled for them); the NVRTC compile of the body is the stub."""
    a, b, c = T(1, [2, 64, 40], "HALF"), T(2, [2, 40, 72], "HALF"), T(3, [2, 64, 72], "HALF")
    g = parse_graph(graph_bytes([a, b, c], [matmul(1, 2, 3)]))
    p = build_program(g, arch="gfx942")
    st = [s for s in p.steps if s[0] == "launch"]
    assert [s[2] for s in st] == ["hdn_gemm_mfma"]
    assert "__builtin_amdgcn_mfma_f32_32x32x8f16" in st[0][1] and "#define MF_BF16 0" in st[0][1]
    from engine_plugins.hip_kernels.program import NotApplicable
    with pytest.raises(NotApplicable, match="AMD target gfx1100"):
        build_program(g, arch="gfx1100")
    x, w, y, gb = _conv_graph("fwd", "BFLOAT16", "nchw")
    p = build_program(parse_graph(gb), arch="gfx90a")
    st = [s for s in p.steps if s[0] == "launch"]
    assert st[-1][2] in ("hdn_gemm_mfma", "hdn_gemm_splitk") and "#define MF_BF16 1" in st[0][1]
    assert not getattr(p, "layout_transforms", 0)
