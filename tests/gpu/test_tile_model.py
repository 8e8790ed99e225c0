"""CI (no GPU): the GEMM core's tile / split choice (gemm_core.tile_config with the cost model,
simt_config) - big GEMMs keep the 128 x 256 tile and no split, skinny ones split, callers that
pass sms = 0 (MoE groups) never split, and every split covers k in whole stage tiles."""
from __future__ import annotations

import pytest

from engine_plugins.hip_kernels import gemm_core as gc


@pytest.mark.parametrize("gather", [None, (0.0, 0.0), (gc.GATHER_ROWS, 0.0)])
def test_big_gemm_keeps_wide_tile(gather):
    for M, N, K in ((4096, 4096, 4096), (8192, 4096, 11008), (8192, 14336, 4096)):
        bn, st, S, per = gc.tile_config(M, N, K, 1, 132, 2, gather)
        assert (bn, S) == (256, 1), (M, N, K, bn, S)


@pytest.mark.parametrize("shape", [(256, 256, 65536), (16, 512, 8192), (200, 136, 10000), (1, 8, 3000)])
def test_skinny_gemm_splits_in_whole_tiles(shape):
    M, N, K = shape
    for gather in (None, (0.0, 0.0)):
        bn, st, S, per = gc.tile_config(M, N, K, 1, 132, 2, gather)
        assert S > 1, shape
        assert per % gc.bk(2) == 0 and (S - 1) * per < K <= S * per, (shape, S, per)


def test_sms_zero_never_splits():
    assert gc.tile_config(256, 256, 65536, 4, 0, 2, (0.0, 0.0))[2] == 1
    assert gc.simt_config(256, 256, 65536, 4, 0) == (128, 1, 65536)


def test_simt_config():
    # N = 64 -> 128 x 64 tiles; a 1.5-wave grid of 128 x 128 tiles -> 128 x 64; splits whole k steps
    assert gc.simt_config(100352, 64, 576, 1, 132)[0] == 64
    assert gc.simt_config(25088, 128, 1152, 1, 132)[0] == 64
    assert gc.simt_config(4096, 4096, 4096, 1, 132) == (128, 1, 4096)
    bn, S, per = gc.simt_config(6272, 256, 2304, 1, 132)
    assert S > 1 and per % gc.SIMT_BK == 0 and (S - 1) * per < 2304 <= S * per


def test_tma_store_epilogue_only_for_epilogue_bound_shapes(monkeypatch):
    monkeypatch.delenv("HIPDNN_CABI_HIP_TMA_STORE", raising=False)
    monkeypatch.delenv("HIPDNN_CABI_HIP_TILE", raising=False)

    def pick(M, N, K, gather):
        bn, st, S, per = gc.tile_config(M, N, K, 1, 132, 2, gather)
        return gc.tma_store_config(M, N, K, 1, 132, 2, gather, bn, S)
    # ResNet-50 conv2 1 x 1 expand (one k step per tile, both operands on the copy engine)
    ts = pick(100352, 256, 64, (0.0, 0.0))
    assert ts is not None and gc.smem_bytes(ts[0], ts[1], True) <= gc.SMEM_LIMIT and ts[1] >= 3
    # 3 x 3 layers (A gathered), the 1 x 1 stride 2 layer, big GEMMs: the register epilogue
    for M, N, K, g in ((100352, 64, 576, gc.GATHER_ROWS), (25088, 128, 1152, gc.GATHER_ROWS),
                       (6272, 256, 2304, gc.GATHER_ROWS), (6272, 1024, 512, gc.GATHER_ROWS),
                       (4096, 4096, 4096, 0.0), (8192, 4096, 11008, 0.0)):
        assert pick(M, N, K, (g, 0.0)) is None, (M, N, K)
    monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", "0")
    assert pick(100352, 256, 64, (0.0, 0.0)) is None
    monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", "1")
    assert pick(4096, 4096, 4096, (0.0, 0.0)) is not None
    for bn in (256, 128, 64):
        st = gc._stages(bn, True)
        assert st >= 3 and gc.smem_bytes(bn, st, True) <= gc.SMEM_LIMIT


# ---------------------------------------------------------------- plan choices (no GPU)
RESNET = [  # name, C, K, H, R, stride, pad (bench/gpu_bench.py RESNET)
    ("conv2_3x3", 64, 64, 56, 3, 1, 1), ("conv2_1x1_expand", 64, 256, 56, 1, 1, 0),
    ("conv3_3x3", 128, 128, 28, 3, 1, 1), ("conv4_3x3", 256, 256, 14, 3, 1, 1),
    ("conv5_3x3", 512, 512, 7, 3, 1, 1), ("conv4_1x1_s2", 512, 1024, 28, 1, 2, 0)]


def _resnet_prog(name, dtype, lay, op="fwd", batch=32):
    from gpu_testlib import T, conv_bwd_filter, conv_fwd, graph_bytes
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    _, C, K, H, R, st, pad = [r for r in RESNET if r[0] == name][0]
    P = (H + 2 * pad - R) // st + 1
    x, w, y = T(1, [batch, C, H, H], dtype, lay), T(2, [K, C, R, R], dtype, lay), T(3, [batch, K, P, P], dtype, lay)
    if op == "fwd":
        g = graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [pad] * 2, [st] * 2, [1, 1])])
    else:
        g = graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, [pad] * 2, [st] * 2, [1, 1])])
    return build_program(parse_graph(g), use_mma=True, sms=132, arch="sm_90")


def _simt_src(prog):
    return [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_simt"][0][1]


@pytest.mark.parametrize("name", [r[0] for r in RESNET])
def test_fp32_nchw_resnet_plan_choice(name, monkeypatch):
    """fp32 NCHW forward, TF32 off (SIMT core): conv2 3x3 and conv3 run on NHWC workspace copies
    (the cost model), the 1x1 expand on 16-byte m-vectors without copies, the rest as before
    (split-K grids, 1x1 stride 2: the NCHW gather, no copy)."""
    monkeypatch.delenv("HIPDNN_CABI_HIP_SIMT_NHWC", raising=False)
    monkeypatch.delenv("HIPDNN_CABI_HIP_SIMT_MVEC", raising=False)
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_WINOGRAD", "0")      # the direct GEMM's plan
    prog = _resnet_prog(name, "FLOAT", "nchw")
    nhwc = any("SIMT core on NHWC copies" in n for n in prog.notes)
    assert nhwc == (name in ("conv2_3x3", "conv3_3x3")), (name, prog.notes)
    assert bool(getattr(prog, "layout_transforms", 0)) == nhwc
    src = _simt_src(prog).split("gemm_simt.hip")[0]
    if nhwc:
        assert "#define A_MODE 1" in src and "#define B_MODE 1" in src
        C, K, H = [r for r in RESNET if r[0] == name][0][1:4]
        assert prog.ws_size >= 32 * C * H * H * 4            # the x copy is in the workspace size
    assert ("#define A_MODE 2" in src) == (name == "conv2_1x1_expand")
    # the knobs switch each path off (one default to change after a failed device run)
    monkeypatch.setenv("HIPDNN_CABI_HIP_SIMT_NHWC", "0")
    monkeypatch.setenv("HIPDNN_CABI_HIP_SIMT_MVEC", "0")
    prog = _resnet_prog(name, "FLOAT", "nchw")
    assert not getattr(prog, "layout_transforms", 0) and "#define A_MODE 2" not in _simt_src(prog)


def test_fp32_nchw_nhwc_knob_forces(monkeypatch):
    import os
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_WINOGRAD", "0")      # the direct GEMM's plan
    os.environ["HIPDNN_CABI_HIP_SIMT_NHWC"] = "1"
    try:
        prog = _resnet_prog("conv5_3x3", "FLOAT", "nchw")
    finally:
        del os.environ["HIPDNN_CABI_HIP_SIMT_NHWC"]
    assert any("SIMT core on NHWC copies" in n for n in prog.notes)


def test_fp32_nhwc_and_tf32_unchanged():
    """Channels-last fp32 and 16-bit NCHW never take the SIMT copies."""
    for name in ("conv2_3x3", "conv3_3x3"):
        prog = _resnet_prog(name, "FLOAT", "nhwc")
        assert not getattr(prog, "layout_transforms", 0), prog.notes
        prog = _resnet_prog(name, "HALF", "nchw")
        assert not any("SIMT core" in n for n in prog.notes)


@pytest.mark.parametrize("name", [r[0] for r in RESNET])
def test_fp16_wgrad_swap_choice(name, monkeypatch):
    """fp16 NHWC backward filter: only conv2 3x3 (K = 64 < C*R*S = 576) runs as dw^T (a 128 x 64
    tile over M = 576 instead of half-empty 128-row tiles); every layer stays on the tensor maps;
    WGRAD_SWAP=0 turns it off."""
    monkeypatch.delenv("HIPDNN_CABI_HIP_WGRAD_SWAP", raising=False)
    prog = _resnet_prog(name, "HALF", "nhwc", op="wgrad")
    assert any("4-D tensor maps" in n for n in prog.notes), prog.notes
    assert any("dw^T GEMM" in n for n in prog.notes) == (name == "conv2_3x3"), prog.notes
    monkeypatch.setenv("HIPDNN_CABI_HIP_WGRAD_SWAP", "0")
    prog = _resnet_prog(name, "HALF", "nhwc", op="wgrad")
    assert not any("dw^T GEMM" in n for n in prog.notes)
