"""GPU: the model examples (examples/llama_block.py, examples/resnet50_train.py) on the HIP engine
with torch CUDA tensors, small sizes, against the float64 numpy references of
tests/frontend/models_ref.py; then the rows of bench/models_bench.py at small sizes (the code
path of `make bench-gpu --only models`, torch.compile off).  The kernels are compiled in
parallel first (models_bench.prewarm_model).  Run: `pytest -m gpu tests/gpu/test_models_gpu.py`."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bench"), os.path.join(ROOT, "examples"),
                os.path.join(ROOT, "tests", "frontend")]

import llama_block  # noqa: E402
import models_bench as mb  # noqa: E402
import models_ref  # noqa: E402
import resnet50_train  # noqa: E402
from hipdnn_cabi import frontend as hf  # noqa: E402
from test_model_programs import GPU_TEST_LLAMA, GPU_TEST_RESNET  # noqa: E402

pytestmark = pytest.mark.gpu
HIP = "HIPDNN_CABI_HIP_KERNELS_ENGINE"


@pytest.fixture(scope="module")
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("torch without CUDA")
    return t


def _np(t):
    return t.detach().double().cpu().numpy()


def rel(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-30))


def fro(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / max(float(np.linalg.norm(ref)), 1e-30))


def _handle(torch):
    return hf.Handle(stream=torch.cuda.current_stream().cuda_stream)


def test_llama_block_bf16(torch):
    cfg = GPU_TEST_LLAMA
    mb.prewarm_model("llama", cfg, "bfloat16")
    nw, nx, ndy = mb.llama_weights(cfg)
    W = {k: torch.from_numpy(v).cuda().to(torch.bfloat16 if mb.is_low(k) else torch.float32)
         for k, v in nw.items()}
    x = torch.from_numpy(nx).cuda().to(torch.bfloat16)
    dy = torch.from_numpy(ndy).cuda().to(torch.bfloat16)
    h = _handle(torch)
    blk = llama_block.LlamaBlock(W, cfg["batch"], cfg["seq"], cfg["heads"], handle=h)
    try:
        y = blk.forward(x).clone()
        dx, g = blk.backward(dy)
        torch.cuda.synchronize()
        assert blk.engines() == {HIP: 9}
        ry, rdx, rg = models_ref.llama_reference({k: _np(v) for k, v in W.items()}, _np(x), _np(dy),
                                                 cfg["heads"])
        errs = {"y": rel(_np(y), ry), "dx": rel(_np(dx), rdx)}
        errs.update({k: rel(_np(v), rg[k]) for k, v in g.items()})
        # the CPU reference engine in bfloat16 stays below 1e-2 on this layer
        assert max(errs.values()) < 3e-2, errs
    finally:
        blk.close()
        h.close()


def _resnet_on_gpu(torch, cfg, dtype, tdt, input_grad=False):
    mb.prewarm_model("resnet", cfg, dtype, input_grad=input_grad)
    p, x, dl = mb.resnet_weights(cfg)
    cl = torch.channels_last
    P = {}
    for k, v in p.items():
        t = torch.from_numpy(v).cuda().to(tdt if mb.is_low(k) else torch.float32)
        P[k] = t.contiguous(memory_format=cl) if t.dim() == 4 else t
    xt = torch.from_numpy(np.ascontiguousarray(x)).cuda().to(tdt).contiguous(memory_format=cl)
    dlt = torch.from_numpy(dl).cuda().to(tdt)
    h = _handle(torch)
    net = resnet50_train.ResNet50(P, cfg["batch"], cfg["image"], cfg["layers"], handle=h,
                                  input_grad=input_grad)
    try:
        logits = net.step(xt, dlt).clone()
        torch.cuda.synchronize()
        assert net.engines() == {HIP: 2 * sum(cfg["layers"]) + 6}
        grads = {k: _np(v) for k, v in net.grads.items()}
        if input_grad:
            grads["x"] = _np(net.d_x)
        running = {k: _np(v) for k, v in net.running.items()}
        ins = ({k: _np(v) for k, v in P.items()}, _np(xt), _np(dlt))
        return _np(logits), grads, running, ins
    finally:
        net.close()
        h.close()


def test_resnet_float32(torch):
    """float32 (true FFMA, TF32 off): logits, every gradient (the image's too: 20 dgrads) and
    the running statistics."""
    cfg = dict(GPU_TEST_RESNET, batch=2)
    logits, grads, running, (p, x, dl) = _resnet_on_gpu(torch, cfg, "float32", torch.float32,
                                                        input_grad=True)
    rl, rg, rr = models_ref.resnet_reference(p, x, dl, cfg["layers"])
    assert rel(logits, rl) < 1e-4
    errs = {k: rel(grads[k], rg[k]) for k in rg}
    # the CPU reference engine: 3e-5 at most on this network (batchnorm over few values)
    assert max(errs.values()) < 2e-3, sorted(errs.items(), key=lambda kv: -kv[1])[:5]
    assert max(rel(running[k], v) for k, v in rr.items()) < 1e-4


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_resnet_16bit(torch, dtype):
    """16-bit data (batchnorm statistics float32) against the float64 reference that rounds the
    same tensors to the same type.  This small random network amplifies rounding: the CPU
    reference engine is 8.5 % (float16) and 10 % (bfloat16) off in the worst gradient, so the bound is
    loose - it catches wrong layouts, missing terms and non-finite values, not ulps."""
    tdt = getattr(torch, dtype)
    cfg = GPU_TEST_RESNET
    logits, grads, running, (p, x, dl) = _resnet_on_gpu(torch, cfg, dtype, tdt)
    q = models_ref.round_fp16 if dtype == "float16" else models_ref.round_bf16
    rl, rg, rr = models_ref.resnet_reference(p, x, dl, cfg["layers"], q=q)
    rg.pop("x")
    assert all(np.isfinite(v).all() for v in grads.values())
    assert rel(logits, rl) < (2e-2 if dtype == "float16" else 3e-2)
    errs = {k: fro(grads[k], rg[k]) for k in rg}
    assert max(errs.values()) < (0.35 if dtype == "float16" else 0.45), \
        sorted(errs.items(), key=lambda kv: -kv[1])[:5]
    assert max(rel(running[k], v) for k, v in rr.items()) < 2e-2


def test_models_bench_rows_small(torch, monkeypatch):
    """bench/models_bench.py's rows at small sizes: ours, eager PyTorch, errors vs float32."""
    monkeypatch.setenv("HIPDNN_BENCH_TORCH_COMPILE", "0")
    res = {}
    mb.bench_llama(torch, None, res, cfg=GPU_TEST_LLAMA)
    mb.bench_resnet(torch, None, res, cfg=GPU_TEST_RESNET, dtypes=["fp16"])
    rows = res["models"]
    assert set(rows) >= {"llama_fwd_bf16", "llama_train_bf16", "resnet50_train_fp16"}, rows
    for name, row in rows.items():
        assert row["ours_ms"] > 0 and row["eager_ms"] > 0 and row["ratio_eager"] > 0, (name, row)
        assert np.isfinite(row["err_max"]) and np.isfinite(row["torch_err_max"]), (name, row)
    assert rows["llama_train_bf16"]["err_max"] < 3e-2
