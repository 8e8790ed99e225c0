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
