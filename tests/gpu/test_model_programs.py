"""CI (no GPU): the HIP engine accepts every graph of the model examples (examples/llama_block.py,
examples/resnet50_train.py) at the sizes `make bench-gpu --only models` and tests/gpu/
test_models_gpu.py run, and plans them as expected (fused epilogues, one kernel per pointwise
run): the graphs are lowered by the frontend on host stand-ins (bench/models_bench.py
`twin_graphs`) and handed to the engine's program builder for the Hopper target."""
from __future__ import annotations

import os
import sys

import pytest

from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bench"), os.path.join(ROOT, "examples")]

import models_bench as mb  # noqa: E402

GPU_TEST_LLAMA = dict(batch=1, seq=128, hidden=256, heads=2, ffn=512)
GPU_TEST_RESNET = dict(batch=4, image=64, width=16, layers=(1, 1, 1, 1), classes=10)


def _programs(kind, cfg, dtype, arch="sm_90", **model_args):
    twin = mb.twin_graphs(kind, cfg, dtype, **model_args)
    try:
        return {g.name: build_program(parse_graph(mb.graph_bytes(g)), arch=arch) for g in twin.G.graphs}
    finally:
        twin.close()


def _launches(p):
    return [st[2] for st in p.steps if st[0] == "launch"]


@pytest.mark.parametrize("cfg", [mb.LLAMA, GPU_TEST_LLAMA], ids=["bench", "gpu_test"])
def test_llama_graphs_plan_on_the_hip_engine(cfg):
    progs = _programs("llama", cfg, "bfloat16")
    assert len(progs) == 9
    # the residual adds and the SwiGLU backward ride in the GEMM epilogues
    assert "MatmulAttributes + 1 pointwise node(s) fused" in progs["llama.oproj_norm2_gateup"].notes
    assert "MatmulAttributes + 1 pointwise node(s) fused" in progs["llama.swiglu_down"].notes
    assert any("pointwise node(s) fused" in n for n in progs["llama.down_swiglu_bwd"].notes)
    assert _launches(progs["llama.down_swiglu_bwd"]) == ["hdn_gemm_wgmma"] * 2
    assert _launches(progs["llama.sdpa"]) == ["hdn_attn_fwd_wg"]
    assert "hdn_attn_bwd_wg" in _launches(progs["llama.sdpa_bwd"])     # the wgmma backward


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cfg", [mb.RESNET, GPU_TEST_RESNET], ids=["bench", "gpu_test"])
def test_resnet_graphs_plan_on_the_hip_engine(cfg, dtype):
    progs = _programs("resnet", cfg, dtype)
    assert len(progs) == 2 * sum(cfg["layers"]) + 6
    assert "MatmulAttributes + 1 pointwise node(s) fused" in progs["resnet50.fc"].notes
    for name, p in progs.items():
        assert _launches(p), name
    # batchnorm -> relu and batchnorm -> add -> relu run in the batchnorm's apply kernel: no
    # pointwise kernel of its own in any forward graph (the projection block's add reads the
    # downsample batchnorm's y and is fused into bn3)
    assert progs["resnet50.stem"].notes.count("BatchnormAttributes + 1 pointwise node(s) fused") == 1
    for name, p in progs.items():
        if name.endswith(".fwd"):
            assert not any(n.startswith("hdn_pw_") for n in _launches(p)), name
            assert p.notes.count("BatchnormAttributes + 2 pointwise node(s) fused") == 1, name
    # an identity block's backward reuses the ReLU backward feeding bn3 in the final sum: that
    # ReLU backward and the sum are pointwise kernels (the sum after the last batchnorm
    # backward); the two ReLU backwards after the conv2 / conv3 backward data ride in those
    # GEMMs' epilogues
    for name, p in progs.items():
        if name.endswith(".bwd") and ".0." not in name:
            L = _launches(p)
            pws = [i for i, n in enumerate(L) if n.startswith("hdn_pw_")]
            last_bn = max(i for i, n in enumerate(L) if n.startswith("hdn_bn_bwd_apply"))
            assert len(pws) == 2 and pws[-1] > last_bn, (name, L)
            assert p.notes.count("ConvolutionBwdAttributes + 1 pointwise node(s) fused") == 2, (name, p.notes)


def test_resnet_fp32_graphs_plan_on_the_hip_engine():
    progs = _programs("resnet", dict(GPU_TEST_RESNET, batch=2), "float32", input_grad=True)
    assert len(progs) == 14
    gemms = [st[2] for st in progs["resnet50.stem_bwd"].steps
             if st[0] == "launch" and st[2].startswith("hdn_gemm_") and "splitk" not in st[2]]
    assert len(gemms) == 2              # the stem's wgrad and the image's dgrad


def test_dry_run_of_the_models_bench():
    """bench/models_bench.py --dry-run: the hipDNN side of every row at tiny sizes on the CPU
    reference engine, and the HIP engine's analysis of the same graphs (none declined)."""
    rows = mb.dry_run()
    assert set(rows) == {"llama_fwd", "llama_train", "resnet50_train"}
    assert rows["llama_fwd"]["declined"] == {} and rows["resnet50_train"]["declined"] == {}
    assert rows["resnet50_train"]["convolutions"] == 17
    assert all(r["ours_ms"] > 0 for r in rows.values())
