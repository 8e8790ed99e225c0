"""float64 numpy references of the model examples (examples/llama_block.py,
examples/resnet50_train.py): forward passes and hand-written backward passes, no autograd."""
from __future__ import annotations

import math

import numpy as np


def llama_reference(w, x, dy, heads, eps=1e-5, causal=True):
    """float64 numpy forward and manual backward of the same layer: (y, dx, {grad name: array})."""
    f = {k: np.asarray(v, np.float64) for k, v in w.items()}
    B, S, D = x.shape
    H, Dh, F = heads, D // heads, f["w_down"].shape[0]
    M = B * S
    X = np.asarray(x, np.float64).reshape(M, D)
    dY = np.asarray(dy, np.float64).reshape(M, D)

    def rms(z, s):
        r = 1.0 / np.sqrt((z * z).mean(1, keepdims=True) + eps)
        return z * r * s, r

    def rms_bwd(dh, z, s, r):
        g = dh * s
        dz = r * g - z * r ** 3 * (g * z).mean(1, keepdims=True)
        return dz, (dh * z * r).sum(0)

    def heads_of(m):            # [M, D] -> [B, H, S, Dh]
        return m.reshape(B, S, H, Dh).transpose(0, 2, 1, 3)

    def rows_of(t):
        return t.transpose(0, 2, 1, 3).reshape(M, D)

    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    h1, r1 = rms(X, f["attn_norm"])
    qkv = h1 @ f["w_qkv"]
    q, k, v = (heads_of(qkv[:, i * D:(i + 1) * D]) for i in range(3))
    sc = q @ k.transpose(0, 1, 3, 2) / math.sqrt(Dh)
    if causal:
        sc = np.where(np.tril(np.ones((S, S), bool)), sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    attn = rows_of(o)
    x2 = X + attn @ f["w_o"]
    h2, r2 = rms(x2, f["ffn_norm"])
    gu = h2 @ f["w_gate_up"]
    gate, up = gu[:, :F], gu[:, F:]
    s = sig(gate)
    silu = gate * s
    act = silu * up
    y = x2 + act @ f["w_down"]
    # backward
    g = {}
    dact = dY @ f["w_down"].T
    g["d_w_down"] = act.T @ dY
    dup = dact * silu
    dgate = dact * up * (s + gate * s * (1 - s))
    dgu = np.concatenate([dgate, dup], 1)
    g["d_w_gate_up"] = h2.T @ dgu
    dx2n, g["d_ffn_norm"] = rms_bwd(dgu @ f["w_gate_up"].T, x2, f["ffn_norm"], r2)
    dx2 = dY + dx2n
    g["d_w_o"] = attn.T @ dx2
    do = heads_of(dx2 @ f["w_o"].T)
    dv = p.transpose(0, 1, 3, 2) @ do
    dp = do @ v.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / math.sqrt(Dh)
    dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
    dqkv = np.concatenate([rows_of(dq), rows_of(dk), rows_of(dv)], 1)
    g["d_w_qkv"] = h1.T @ dqkv
    dxn, g["d_attn_norm"] = rms_bwd(dqkv @ f["w_qkv"].T, X, f["attn_norm"], r1)
    dx = dx2 + dxn
    return y.reshape(B, S, D), dx.reshape(B, S, D), g


def round_fp16(a):
    """float64 values rounded to float16 (round to nearest even)."""
    return np.asarray(a, np.float64).astype(np.float16).astype(np.float64)


def round_bf16(a):
    """float64 values rounded to bfloat16 (through float32, round to nearest even)."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.view(np.float32).astype(np.float64)


# ------------------------------------------------------------------------------ ResNet-50 pieces
def conv(x, w, stride, pad):
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - S) // stride + 1
    y = np.zeros((N, K, oh, ow))
    for r in range(R):
        for s in range(S):
            y += np.einsum("nchw,kc->nkhw",
                           xp[:, :, r:r + stride * (oh - 1) + 1:stride, s:s + stride * (ow - 1) + 1:stride],
                           w[:, :, r, s])
    return y


def conv_bwd(dy, x, w, stride, pad):
    """(dx, dw) of conv(x, w)."""
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    _, _, oh, ow = dy.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for r in range(R):
        for s in range(S):
            sl = (slice(None), slice(None), slice(r, r + stride * (oh - 1) + 1, stride),
                  slice(s, s + stride * (ow - 1) + 1, stride))
            dxp[sl] += np.einsum("nkhw,kc->nchw", dy, w[:, :, r, s])
            dw[:, :, r, s] = np.einsum("nkhw,nchw->kc", dy, xp[sl])
    return dxp[:, :, pad:pad + H, pad:pad + W], dw


def bn(x, g, b, rm, rv, eps, mom):
    """Training batchnorm: (y, cache, new running mean, new running var)."""
    M = x.size / x.shape[1]
    mu = x.mean((0, 2, 3), keepdims=True)
    var = x.var((0, 2, 3), keepdims=True)
    inv = 1 / np.sqrt(var + eps)
    xh = (x - mu) * inv
    y = xh * g.reshape(1, -1, 1, 1) + b.reshape(1, -1, 1, 1)
    return y, (xh, inv, g), (1 - mom) * rm + mom * mu.ravel(), (1 - mom) * rv + mom * var.ravel() * M / (M - 1)


def bn_bwd(dy, cache):
    xh, inv, g = cache
    M = dy.size / dy.shape[1]
    db = dy.sum((0, 2, 3))
    dg = (dy * xh).sum((0, 2, 3))
    dxh = dy * g.reshape(1, -1, 1, 1)
    dx = inv / M * (M * dxh - dxh.sum((0, 2, 3), keepdims=True)
                    - xh * (dxh * xh).sum((0, 2, 3), keepdims=True))
    return dx, dg, db


def maxpool(x, k=3, s=2, p=1):
    """(y, winner index): first maximum in window order, padding never wins."""
    N, C, H, W = x.shape
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    y = np.full((N, C, oh, ow), -np.inf)
    idx = np.zeros((N, C, oh, ow), np.int64)
    for r in range(k):
        for q in range(k):
            v = xp[:, :, r:r + s * (oh - 1) + 1:s, q:q + s * (ow - 1) + 1:s]
            pos = ((np.arange(oh) * s + r - p)[:, None] * W + (np.arange(ow) * s + q - p)[None, :])
            better = v > y
            y = np.where(better, v, y)
            idx = np.where(better, pos, idx)
    return y, idx


def maxpool_bwd(dy, idx, shape):
    N, C, H, W = shape
    dx = np.zeros((N, C, H * W))
    for n in range(N):
        for c in range(C):
            np.add.at(dx[n, c], idx[n, c].ravel(), dy[n, c].ravel())
    return dx.reshape(shape)


def resnet_reference(p, x, dlogits, layers, eps=1e-5, mom=0.1, q=None):
    """float64 training step of examples/resnet50_train.py's network on NCHW arrays:
    (logits, {param name: gradient, "x": the image's gradient}, {running stat name: new value}).  ``q`` (optional) rounds
    every tensor the hipDNN graphs hold in the model's data type (outputs and intermediates of
    every node; batchnorm parameters and statistics stay float64), to emulate 16-bit data."""
    q = q or (lambda a: a)
    f = {k: np.asarray(v, np.float64) for k, v in p.items()}
    x = np.asarray(x, np.float64)
    width = f["conv1.weight"].shape[0]
    run, grads, tape = {}, {}, []

    def bnf(z, pre):
        y, cache, run[pre + ".running_mean"], run[pre + ".running_var"] = bn(
            z, f[pre + ".weight"], f[pre + ".bias"], f[pre + ".running_mean"], f[pre + ".running_var"], eps, mom)
        return q(y), cache

    def cv(a, w, st, pad):
        return q(conv(a, w, st, pad))

    def cvb(dy, a, w, st, pad):
        dx, dw = conv_bwd(dy, a, w, st, pad)
        return q(dx), q(dw)

    def bnb(dy, cache):
        dx, dg, db = bn_bwd(dy, cache)
        return q(dx), dg, db

    relu = lambda z: np.maximum(z, 0)  # noqa: E731
    y0 = cv(x, f["conv1.weight"], 2, 3)
    z0, c0 = bnf(y0, "bn1")
    a0 = relu(z0)
    h, idx = maxpool(a0)
    blocks = [(f"layer{i + 1}.{j}", width * 2 ** i, 2 if (j == 0 and i > 0) else 1, j == 0)
              for i, n in enumerate(layers) for j in range(n)]
    for pre, mid, st, proj in blocks:
        xin = h
        y1 = cv(xin, f[pre + ".conv1.weight"], 1, 0)
        z1, c1 = bnf(y1, pre + ".bn1")
        a1 = relu(z1)
        y2 = cv(a1, f[pre + ".conv2.weight"], st, 1)
        z2, c2 = bnf(y2, pre + ".bn2")
        a2 = relu(z2)
        y3 = cv(a2, f[pre + ".conv3.weight"], 1, 0)
        z3, c3 = bnf(y3, pre + ".bn3")
        if proj:
            ys = cv(xin, f[pre + ".downsample.0.weight"], st, 0)
            zs, cs = bnf(ys, pre + ".downsample.1")
        else:
            zs, cs = xin, None
        h = relu(q(z3 + zs))
        tape.append((pre, st, proj, xin, a1, a2, h, c1, c2, c3, cs))
    pooled = q(h.mean((2, 3)))
    logits = q(q(pooled @ f["fc.weight"].T) + f["fc.bias"])
    # backward
    dl = np.asarray(dlogits, np.float64)
    grads["fc.weight"] = q(dl.T @ pooled)
    grads["fc.bias"] = q(dl.sum(0))
    dp = q(dl @ f["fc.weight"])
    dh = q(np.broadcast_to(dp[:, :, None, None] / (h.shape[2] * h.shape[3]), h.shape))
    for pre, st, proj, xin, a1, a2, out, c1, c2, c3, cs in reversed(tape):
        d3 = dh * (out > 0)
        dy3, grads[pre + ".bn3.weight"], grads[pre + ".bn3.bias"] = bnb(d3, c3)
        da2, grads[pre + ".conv3.weight"] = cvb(dy3, a2, f[pre + ".conv3.weight"], 1, 0)
        dy2, grads[pre + ".bn2.weight"], grads[pre + ".bn2.bias"] = bnb(da2 * (a2 > 0), c2)
        da1, grads[pre + ".conv2.weight"] = cvb(dy2, a1, f[pre + ".conv2.weight"], st, 1)
        dy1, grads[pre + ".bn1.weight"], grads[pre + ".bn1.bias"] = bnb(da1 * (a1 > 0), c1)
        dxm, grads[pre + ".conv1.weight"] = cvb(dy1, xin, f[pre + ".conv1.weight"], 1, 0)
        if proj:
            dys, grads[pre + ".downsample.1.weight"], grads[pre + ".downsample.1.bias"] = bnb(d3, cs)
            dxs, grads[pre + ".downsample.0.weight"] = cvb(dys, xin, f[pre + ".downsample.0.weight"], st, 0)
        else:
            dxs = d3
        dh = q(dxm + dxs)
    da0 = maxpool_bwd(dh, idx, a0.shape) * (a0 > 0)
    dy0, grads["bn1.weight"], grads["bn1.bias"] = bnb(q(da0), c0)
    grads["x"], grads["conv1.weight"] = cvb(dy0, x, f["conv1.weight"], 2, 3)
    return logits, grads, run
