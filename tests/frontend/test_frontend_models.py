"""Whole models on hipDNN graphs (examples/llama_block.py, examples/resnet50_train.py) on the CPU
reference engine: outputs and every gradient against float64 numpy references written by hand
(tests/frontend/models_ref.py), the references against finite differences, and - when torch is
installed - both against torch autograd."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from fe_util import CPU_ENGINE, ROOT

EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)

import llama_block  # noqa: E402
import models_ref  # noqa: E402
import nn_graphs  # noqa: E402
import resnet50_train  # noqa: E402

pytestmark = pytest.mark.needs_cpu_engine

# the Llama test layer: hidden 64, 4 heads of 16, FFN 96, 8 tokens, batch 2
B, S, D, H, F = 2, 8, 64, 4, 96


def rel(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-30))


def nchw(a):
    return np.asarray(a, np.float64)


# --------------------------------------------------------------------------------- Llama block
def _llama(dtype, seed=0):
    r = np.random.default_rng(seed)
    w = llama_block.random_weights(D, F, r, dtype)
    x = r.standard_normal((B, S, D)).astype(dtype)
    dy = r.standard_normal((B, S, D)).astype(dtype)
    return w, x, dy


def test_llama_reference_matches_finite_differences():
    """The hand-written backward of the numpy reference, element by element."""
    w, x, dy = _llama(np.float64, 1)
    _, dx, g = models_ref.llama_reference(w, x, dy, H)
    loss = lambda: float(np.sum(models_ref.llama_reference(w, x, dy, H)[0] * dy))  # noqa: E731
    r = np.random.default_rng(2)
    for name, arr, grad in [("x", x, dx)] + [(k, w[k], g[llama_block.GRADS[k]]) for k in llama_block.WEIGHTS]:
        for _ in range(3):
            i = tuple(int(r.integers(n)) for n in arr.shape)
            old = arr[i]
            arr[i] = old + 1e-6
            lp = loss()
            arr[i] = old - 1e-6
            lm = loss()
            arr[i] = old
            num = (lp - lm) / 2e-6
            assert abs(num - grad[i]) <= 1e-6 * max(1.0, abs(num)), (name, i, num, grad[i])


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-11)])
def test_llama_block_forward_backward(dtype, tol):
    w, x, dy = _llama(dtype)
    blk = llama_block.LlamaBlock(w, B, S, H)
    try:
        assert len(blk.G.graphs) == 9
        assert blk.engines() == {CPU_ENGINE: 9}
        y = blk.forward(x)
        dx, grads = blk.backward(dy)
        ry, rdx, rg = models_ref.llama_reference(w, x, dy, H)
        assert rel(y, ry) < tol
        assert rel(dx, rdx) < tol
        assert set(grads) == set(rg)
        for k in rg:
            assert grads[k].shape == w[next(n for n, v in llama_block.GRADS.items() if v == k)].shape
            assert rel(grads[k], rg[k]) < tol, k
        # a second step with new data reuses the graphs (and the kept variant packs)
        x[...] = np.random.default_rng(5).standard_normal(x.shape)
        y = blk.forward(x)
        dx, grads = blk.backward(dy)
        ry, rdx, rg = models_ref.llama_reference(w, x, dy, H)
        assert rel(y, ry) < tol and rel(dx, rdx) < tol and rel(grads["d_w_qkv"], rg["d_w_qkv"]) < tol
        assert len(blk.G.graphs) == 9
    finally:
        blk.close()


def test_llama_block_non_causal_and_flat_rows():
    w, x, dy = _llama(np.float64, 3)
    blk = llama_block.LlamaBlock(w, B, S, H, causal=False)
    try:
        y = blk.forward(x.reshape(B * S, D))
        assert y.shape == (B * S, D)
        dx, g = blk.backward(dy.reshape(B * S, D))
        ry, rdx, rg = models_ref.llama_reference(w, x, dy, H, causal=False)
        assert rel(y, ry.reshape(B * S, D)) < 1e-11
        assert rel(dx, rdx.reshape(B * S, D)) < 1e-11
        assert rel(g["d_w_o"], rg["d_w_o"]) < 1e-11
    finally:
        blk.close()


def test_llama_block_rejects_bad_heads():
    w, _, _ = _llama(np.float32)
    with pytest.raises(ValueError, match="multiple of 5 heads"):
        llama_block.LlamaBlock(w, B, S, 5)


def test_llama_block_against_torch():
    torch = pytest.importorskip("torch")
    w, x, dy = _llama(np.float64, 4)
    tw = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    tx = torch.tensor(x, requires_grad=True)
    y = _torch_llama(torch, tw, tx, H)
    y.backward(torch.tensor(dy))
    blk = llama_block.LlamaBlock(w, B, S, H)
    try:
        assert rel(blk.forward(x), y.detach().numpy()) < 1e-10
        dx, g = blk.backward(dy)
        assert rel(dx, tx.grad.numpy()) < 1e-10
        for k, gk in llama_block.GRADS.items():
            assert rel(g[gk], tw[k].grad.numpy()) < 1e-10, k
    finally:
        blk.close()


def _torch_llama(torch, w, x, heads, eps=1e-5):
    import torch.nn.functional as Fn
    Bx, Sx, Dx = x.shape
    Fx = w["w_down"].shape[0]

    def rms(z, s):
        return z * torch.rsqrt((z * z).mean(-1, keepdim=True) + eps) * s
    qkv = rms(x, w["attn_norm"]) @ w["w_qkv"]
    q, k, v = (t.reshape(Bx, Sx, heads, Dx // heads).transpose(1, 2) for t in qkv.split(Dx, -1))
    o = Fn.scaled_dot_product_attention(q, k, v, is_causal=True)
    x2 = x + o.transpose(1, 2).reshape(Bx, Sx, Dx) @ w["w_o"]
    gate, up = (rms(x2, w["ffn_norm"]) @ w["w_gate_up"]).split(Fx, -1)
    return x2 + (Fn.silu(gate) * up) @ w["w_down"]


# --------------------------------------------------------------------------------- ResNet-50
def test_resnet50_structure_full_depth():
    """The full network: 53 convolutions (stem, 16 x 3 in the blocks, 4 projections), 25.6 M
    parameters at width 64, and the graphs of a full-depth model (one per block and direction)."""
    shapes = resnet50_train.param_shapes()
    convs = [k for k, s in shapes.items() if len(s) == 4]
    assert len(convs) == 53
    assert sum(int(np.prod(s)) for k, s in shapes.items() if "running" not in k) == 25_557_032
    blocks = resnet50_train.block_names()
    assert len(blocks) == 16 and sum(b[4] for b in blocks) == 4
    assert [b[3] for b in blocks].count(2) == 3
    assert shapes["fc.weight"] == (1000, 2048)


def _resnet(layers, width, image, n, classes, dtype, seed=0):
    r = np.random.default_rng(seed)
    p = resnet50_train.init_params(r, layers, width, classes, dtype)
    x = r.standard_normal((n, image, image, 3)).astype(dtype).transpose(0, 3, 1, 2)   # NHWC memory
    dl = r.standard_normal((n, classes)).astype(dtype)
    return p, x, dl


def _check_resnet(net, p, x, dl, layers, tol, steps=1):
    ref_p = {k: v.copy() for k, v in p.items()}
    for step in range(steps):
        logits = net.step(x, dl)
        rl, rg, rrun = models_ref.resnet_reference(ref_p, nchw(x), dl, layers)
        dx = rg.pop("x")
        if net.input_grad:
            assert rel(net.d_x, dx) < tol, step
        assert rel(logits, rl) < tol, step
        assert set(net.grads) == set(rg)
        for k in rg:
            assert net.grads[k].shape == p[k].shape, k
            assert rel(net.grads[k], rg[k]) < tol, (step, k, rel(net.grads[k], rg[k]))
        for k, v in rrun.items():
            assert rel(net.running[k], v) < tol, (step, k)
            ref_p[k] = v


def test_resnet50_full_depth_training_step_float32():
    """[3, 4, 6, 3] bottlenecks at width 8 (ResNet-50 / 8), 64 x 64 images, batch 2, float32:
    logits, all 161 parameter gradients and the running statistics, two steps (the running
    statistics alternate between two buffer sets)."""
    layers = resnet50_train.LAYERS
    p, x, dl = _resnet(layers, 8, 64, 2, 10, np.float32)
    net = resnet50_train.ResNet50(p, 2, 64, layers)
    try:
        assert net.n_convolutions() == 53
        assert len(net.G.graphs) == 2 * 16 + 6
        assert net.engines() == {CPU_ENGINE: 38}
        assert len(net.grads) == 53 + 2 * 53 + 2
        _check_resnet(net, p, x, dl, layers, 5e-4, steps=2)
    finally:
        net.close()


def test_resnet50_float64_matches_reference_exactly():
    """64 x 64 images: the last stage's batchnorm sees 8 values per channel (at 32 x 32 only 2,
    which turns rounding differences of 1e-16 into 1e-9)."""
    layers = (1, 2, 1, 1)
    p, x, dl = _resnet(layers, 4, 64, 2, 5, np.float64, seed=1)
    net = resnet50_train.ResNet50(p, 2, 64, layers, input_grad=True)
    try:
        assert net.n_convolutions() == 20
        _check_resnet(net, p, x, dl, layers, 1e-9)
    finally:
        net.close()


def test_resnet_reference_matches_finite_differences():
    layers = (1, 1, 1, 1)
    p, x, dl = _resnet(layers, 4, 32, 2, 5, np.float64, seed=2)
    x = nchw(x)
    _, g, _ = models_ref.resnet_reference(p, x, dl, layers)
    loss = lambda: float(np.sum(models_ref.resnet_reference(p, x, dl, layers)[0] * dl))  # noqa: E731
    r = np.random.default_rng(3)
    p = dict(p, x=x)
    for name in ("x", "conv1.weight", "bn1.weight", "layer1.0.conv2.weight", "layer2.0.downsample.0.weight",
                 "layer3.0.bn1.bias", "layer4.0.conv3.weight", "fc.weight", "fc.bias"):
        v = r.standard_normal(p[name].shape)
        arr = p[name]
        h = 1e-7
        arr += h * v
        lp = loss()
        arr -= 2 * h * v
        lm = loss()
        arr += h * v
        num, ana = (lp - lm) / (2 * h), float(np.sum(g[name] * v))
        assert abs(num - ana) <= 1e-5 * max(1.0, abs(num)), (name, num, ana)


def test_resnet_against_torch():
    torch = pytest.importorskip("torch")
    layers = (1, 1, 1, 1)
    p, x, dl = _resnet(layers, 4, 64, 2, 5, np.float64, seed=4)
    tp = {k: torch.tensor(v, requires_grad="running" not in k) for k, v in p.items()}
    logits = _torch_resnet(torch, tp, torch.tensor(nchw(x)), layers)
    logits.backward(torch.tensor(dl))
    net = resnet50_train.ResNet50(p, 2, 64, layers)
    try:
        assert rel(net.step(x, dl), logits.detach().numpy()) < 1e-8
        for k, t in tp.items():
            if t.grad is not None:
                assert rel(net.grads[k], t.grad.numpy()) < 1e-8, k
    finally:
        net.close()


def _torch_resnet(torch, p, x, layers):
    import torch.nn.functional as Fn

    def bn(z, pre):
        return Fn.batch_norm(z, p[pre + ".running_mean"].clone(), p[pre + ".running_var"].clone(),
                             p[pre + ".weight"], p[pre + ".bias"], training=True, momentum=0.1, eps=1e-5)
    h = Fn.max_pool2d(Fn.relu(bn(Fn.conv2d(x, p["conv1.weight"], stride=2, padding=3), "bn1")), 3, 2, 1)
    for pre, _, _, st, proj in resnet50_train.block_names(layers, p["conv1.weight"].shape[0]):
        a = Fn.relu(bn(Fn.conv2d(h, p[pre + ".conv1.weight"]), pre + ".bn1"))
        a = Fn.relu(bn(Fn.conv2d(a, p[pre + ".conv2.weight"], stride=st, padding=1), pre + ".bn2"))
        a = bn(Fn.conv2d(a, p[pre + ".conv3.weight"]), pre + ".bn3")
        sc = bn(Fn.conv2d(h, p[pre + ".downsample.0.weight"], stride=st), pre + ".downsample.1") if proj else h
        h = Fn.relu(a + sc)
    return h.mean((2, 3)) @ p["fc.weight"].T + p["fc.bias"]


def test_resnet_rejects_missing_parameters():
    p, _, _ = _resnet((1, 1, 1, 1), 4, 32, 2, 5, np.float32)
    del p["layer2.0.bn2.bias"]
    with pytest.raises(ValueError, match="layer2.0.bn2.bias"):
        resnet50_train.ResNet50(p, 2, 32, (1, 1, 1, 1))


# --------------------------------------------------------------------------------- helpers, CLI
def test_nn_graphs_views_and_layouts():
    A = nn_graphs.Arrays(np.zeros(1, np.float32))
    buf = np.arange(24, dtype=np.float32).reshape(2, 12)
    v = A.view(buf, [2, 3], [12, 4], 1)
    assert v.tolist() == [[1, 5, 9], [13, 17, 21]]
    assert nn_graphs.nhwc_strides([2, 3, 4, 5]) == [60, 1, 15, 3]
    assert nn_graphs.packed_strides([2, 3, 4]) == [12, 4, 1]
    assert nn_graphs.type_name("bf16") == "bfloat16" and nn_graphs.param_type_name("float16") == "float32"
    with pytest.raises(TypeError):
        nn_graphs.Arrays([1, 2])


@pytest.mark.parametrize("script", ["llama_block.py", "resnet50_train.py"])
def test_example_scripts_pass(script):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.rstrip().endswith("PASS")
