"""A Llama-style decoder layer, forward and backward, run entirely on hipDNN graphs.

    y = x2 + down(swiglu(gate_up(rmsnorm(x2))))        x2 = x + o_proj(sdpa(qkv(rmsnorm(x))))

with causal attention (no rotary embedding: the layer as benchmarked), a SwiGLU feed-forward
(silu(gate) * up) and pre-norm RMSnorm.  Tokens are the rows of [M = batch * seq, D] matrices.
Weights ``[in, out]`` (y = x @ W):

=============  ===============  ============================================================
name           shape            meaning
=============  ===============  ============================================================
``attn_norm``  [D] float32      RMSnorm scale before attention
``w_qkv``      [D, 3D]          packed Q | K | V projection (heads of ``D / heads`` columns)
``w_o``        [D, D]           attention output projection
``ffn_norm``   [D] float32      RMSnorm scale before the feed-forward
``w_gate_up``  [D, 2F]          packed gate | up projection
``w_down``     [F, D]           down projection
=============  ===============  ============================================================

Nine graphs, each built once (:class:`nn_graphs.Graphs`), are executed per training step:

forward
  1. RMSnorm -> QKV matmul (the normalised rows are kept for the weight gradient)
  2. SDPA on three strided views of the packed QKV buffer (Q, K, V: [B, H, S, Dh] with row
     stride 3D), O written straight into [M, D] row order
  3. output matmul with the residual add fused into its epilogue -> RMSnorm -> gate/up matmul
  4. SwiGLU (pointwise, on the two halves of the gate/up buffer) -> down matmul + residual
backward (``dy`` in, ``dx`` and every weight gradient out)
  5. dact = dy @ w_downᵀ with the SwiGLU backward fused in (d gate, d up written into the two
     halves of one buffer); d w_down = actᵀ @ dy
  6. dh2 = d(gate|up) @ w_gate_upᵀ -> RMSnorm backward -> + dy (residual); d w_gate_up
  7. d attn = dx2 @ w_oᵀ; d w_o = attnᵀ @ dx2
  8. SDPA backward (dQ, dK, dV written into the three views of one packed buffer)
  9. dh1 = dqkv @ w_qkvᵀ -> RMSnorm backward -> + dx2 (residual); d w_qkv

Transposed operands are strided views (a [K, M] matrix read as [M, K] with strides [1, M]), so no
copy is made.  Buffers follow the weights: numpy arrays run on the CPU reference engine, torch
tensors on their device run on a GPU engine.  ``python3 examples/llama_block.py`` checks a tiny
float64 layer's gradients against finite differences of its own forward pass.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nn_graphs import Arrays, Graphs, directional_check, param_type_name, type_name  # noqa: E402

WEIGHTS = ("attn_norm", "w_qkv", "w_o", "ffn_norm", "w_gate_up", "w_down")
GRADS = {"attn_norm": "d_attn_norm", "w_qkv": "d_w_qkv", "w_o": "d_w_o", "ffn_norm": "d_ffn_norm",
         "w_gate_up": "d_w_gate_up", "w_down": "d_w_down"}


class LlamaBlock:
    """``LlamaBlock(weights, batch, seq, heads, eps=1e-5)``; ``forward(x) -> y``;
    ``backward(dy) -> (dx, grads)`` with ``grads[name]`` the gradient of ``weights[name]``.

    ``weights`` maps the names of :data:`WEIGHTS` to arrays (numpy or torch, all of one kind;
    the matmul weights in the model's data type, which they define; the norm scales float32).
    ``x`` / ``dy`` are [batch, seq, D] (or [batch * seq, D]) arrays of that type and kind.  The
    returned arrays are the block's own buffers, overwritten by the next call.  ``dtype``
    overrides the data type (numpy bfloat16 as raw uint16 bits, where ml_dtypes is missing);
    ``plans=False`` only lowers the graphs (``G.graphs``: to inspect or serialise them)."""

    def __init__(self, weights, batch, seq, heads, eps=1e-5, handle=None, causal=True, dtype=None,
                 plans=True):
        self.w = {k: weights[k] for k in WEIGHTS}
        self.arr = A = Arrays(self.w["w_qkv"])
        self.dtype = type_name(dtype if dtype is not None else self.w["w_qkv"].dtype)
        D = self.w["w_qkv"].shape[0]
        F = self.w["w_down"].shape[0]
        if D % heads:
            raise ValueError(f"hidden {D} is not a multiple of {heads} heads")
        self.B, self.S, self.D, self.F, self.H, self.Dh = batch, seq, D, F, heads, D // heads
        self.M = M = batch * seq
        self.eps, self.causal = float(eps), causal
        self.scale = 1.0 / math.sqrt(self.Dh)
        dt = self.dtype
        # activations kept for the backward pass, and gradients
        self.h1, self.qkv, self.attn = A.empty((M, D), dt), A.empty((M, 3 * D), dt), A.empty((M, D), dt)
        self.x2, self.h2 = A.empty((M, D), dt), A.empty((M, D), dt)
        self.gu, self.act, self.y = A.empty((M, 2 * F), dt), A.empty((M, F), dt), A.empty((M, D), dt)
        pt = param_type_name(dt)
        self.r1, self.r2 = A.empty((M, 1), pt), A.empty((M, 1), pt)
        self.stats = A.empty((batch, heads, seq, 1), pt)
        self.dgu, self.dx2, self.dattn = A.empty((M, 2 * F), dt), A.empty((M, D), dt), A.empty((M, D), dt)
        self.dqkv, self.dx = A.empty((M, 3 * D), dt), A.empty((M, D), dt)
        self.grads = {GRADS[k]: A.empty(self.w[k].shape, dt if k.startswith("w_") else pt)
                      for k in WEIGHTS}
        # strided views: Q, K, V in the packed projection, O in token order, gate / up halves
        B, S, H, Dh = batch, seq, heads, self.Dh
        self.qkv_dims = [B, H, S, Dh]
        self.qkv_strides = [S * 3 * D, Dh, 3 * D, 1]
        self.o_strides = [S * D, Dh, D, 1]
        self.q, self.k, self.v = (A.view(self.qkv, self.qkv_dims, self.qkv_strides, i * D) for i in range(3))
        self.dq, self.dk, self.dv = (A.view(self.dqkv, self.qkv_dims, self.qkv_strides, i * D) for i in range(3))
        self.o = A.view(self.attn, self.qkv_dims, self.o_strides)
        self.do = A.view(self.dattn, self.qkv_dims, self.o_strides)
        self.gate, self.up = A.view(self.gu, [M, F], [2 * F, 1]), A.view(self.gu, [M, F], [2 * F, 1], F)
        self.dgate, self.dup = A.view(self.dgu, [M, F], [2 * F, 1]), A.view(self.dgu, [M, F], [2 * F, 1], F)
        self.G = Graphs(dt, handle=handle, name="llama", plans=plans)
        self._x = None
        self._build()

    # ------------------------------------------------------------------------------ graphs
    def _build(self):
        G, M, D, F = self.G, self.M, self.D, self.F
        T = G.t
        P = G.param
        qs, os_ = self.qkv_strides, self.o_strides
        sdpa_opts = dict(attn_scale=self.scale, use_causal_mask=self.causal)

        # 1: RMSnorm -> QKV projection
        g = G.new("norm1_qkv")
        x, s1, w = T(g, "x", [M, D]), T(g, "attn_norm", [1, D], dtype=P), T(g, "w_qkv", [D, 3 * D])
        h1, r1 = g.rmsnorm(x, s1, G.scalar(self.eps), name="attn_norm")
        r1.set_data_type(P)
        qkv = g.matmul(h1, w, name="qkv")
        self.f1 = (G.done(g, h1.set_name("h1"), r1.set_name("inv_rms1"), qkv.set_name("qkv")),
                   x, s1, w, h1, r1, qkv)

        # 2: attention on the packed QKV
        g = G.new("sdpa")
        q, k, v = (T(g, n, self.qkv_dims, qs) for n in "qkv")
        o, st = g.sdpa(q, k, v, generate_stats=True, name="attn", **sdpa_opts)
        o.set_dim(self.qkv_dims).set_stride(os_)
        st.set_data_type(P)
        self.f2 = (G.done(g, o, st), q, k, v, o, st)

        # 3: output projection + residual (epilogue) -> RMSnorm -> gate/up projection
        g = G.new("oproj_norm2_gateup")
        a, wo, x = T(g, "attn", [M, D]), T(g, "w_o", [D, D]), T(g, "x", [M, D])
        s2, wgu = T(g, "ffn_norm", [1, D], dtype=P), T(g, "w_gate_up", [D, 2 * F])
        x2 = g.add(g.matmul(a, wo, name="o_proj"), x, name="residual1")
        h2, r2 = g.rmsnorm(x2, s2, G.scalar(self.eps), name="ffn_norm")
        r2.set_data_type(P)
        gu = g.matmul(h2, wgu, name="gate_up")
        self.f3 = (G.done(g, x2.set_name("x2"), h2.set_name("h2"), r2.set_name("inv_rms2"),
                          gu.set_name("gate_up")), a, wo, x, s2, wgu, x2, h2, r2, gu)

        # 4: SwiGLU -> down projection + residual (epilogue)
        g = G.new("swiglu_down")
        gt, up = T(g, "gate", [M, F], [2 * F, 1]), T(g, "up", [M, F], [2 * F, 1])
        wd, x2 = T(g, "w_down", [F, D]), T(g, "x2", [M, D])
        act = g.mul(g.swish(gt, 1.0, name="silu"), up, name="swiglu").set_stride([F, 1])
        y = g.add(g.matmul(act, wd, name="down"), x2, name="residual2")
        self.f4 = (G.done(g, act.set_name("act"), y.set_name("y")), gt, up, wd, x2, act, y)

        # 5: down projection backward with the SwiGLU backward in its epilogue; d w_down
        g = G.new("down_swiglu_bwd")
        dy, wdT = T(g, "dy", [M, D]), T(g, "w_down_t", [D, F], [1, D])
        gt, up = T(g, "gate", [M, F], [2 * F, 1]), T(g, "up", [M, F], [2 * F, 1])
        actT = T(g, "act_t", [F, M], [1, F])
        dact = g.matmul(dy, wdT, name="down_dx")
        # silu'(g) = s (1 + g - g s), s = sigmoid(g), from SIGMOID / MUL / SUB / ADD nodes (the
        # catalog's SWISH_BWD says the same, but not every engine implements that mode)
        sg = g.sigmoid(gt, name="sigmoid")
        silu = g.mul(gt, sg, name="silu")
        dup = g.mul(dact, silu, name="d_up")
        dsilu = g.mul(g.mul(dact, up, name="d_silu"), sg, name="d_silu_s")
        dgate = g.mul(dsilu, g.add(g.sub(gt, silu, name="g_minus_silu"), 1.0, name="plus_one"),
                      name="d_gate")
        dgate.set_stride([2 * F, 1])
        dup.set_stride([2 * F, 1])
        dwd = g.matmul(actT, dy, name="down_dw").set_stride([D, 1])
        self.b5 = (G.done(g, dgate.set_name("d_gate"), dup.set_name("d_up"), dwd.set_name("d_w_down")),
                   dy, wdT, gt, up, actT, dgate, dup, dwd)

        # 6: gate/up backward -> RMSnorm backward -> + dy; d w_gate_up, d ffn_norm
        g = G.new("gateup_norm2_bwd")
        dgu, wguT = T(g, "d_gate_up", [M, 2 * F]), T(g, "w_gate_up_t", [2 * F, D], [1, 2 * F])
        h2T, x2, s2 = T(g, "h2_t", [D, M], [1, D]), T(g, "x2", [M, D]), T(g, "ffn_norm", [1, D], dtype=P)
        r2, dy = T(g, "inv_rms2", [M, 1], dtype=P), T(g, "dy", [M, D])
        dh2 = g.matmul(dgu, wguT, name="gate_up_dx")
        dn, ds2, _ = g.rmsnorm_backward(dh2, x2, s2, r2, name="ffn_norm_bwd")
        ds2.set_data_type(P)
        dx2 = g.add(dn, dy, name="residual2_bwd")
        dwgu = g.matmul(h2T, dgu, name="gate_up_dw").set_stride([2 * F, 1])
        self.b6 = (G.done(g, dx2.set_name("dx2"), ds2.set_name("d_ffn_norm"), dwgu.set_name("d_w_gate_up")),
                   dgu, wguT, h2T, x2, s2, r2, dy, dx2, ds2, dwgu)

        # 7: output projection backward
        g = G.new("oproj_bwd")
        dx2, woT, aT = T(g, "dx2", [M, D]), T(g, "w_o_t", [D, D], [1, D]), T(g, "attn_t", [D, M], [1, D])
        da = g.matmul(dx2, woT, name="o_proj_dx")
        dwo = g.matmul(aT, dx2, name="o_proj_dw").set_stride([D, 1])
        self.b7 = (G.done(g, da.set_name("d_attn"), dwo.set_name("d_w_o")), dx2, woT, aT, da, dwo)

        # 8: attention backward into the packed dQKV
        g = G.new("sdpa_bwd")
        q, k, v = (T(g, n, self.qkv_dims, qs) for n in "qkv")
        o, do = T(g, "o", self.qkv_dims, os_), T(g, "d_o", self.qkv_dims, os_)
        st = T(g, "stats", [self.B, self.H, self.S, 1], dtype=P)
        dq, dk, dv = g.sdpa_backward(q, k, v, o, do, st, name="attn_bwd", **sdpa_opts)
        for t in (dq, dk, dv):
            t.set_dim(self.qkv_dims).set_stride(qs)
        self.b8 = (G.done(g, dq, dk, dv), q, k, v, o, do, st, dq, dk, dv)

        # 9: QKV backward -> RMSnorm backward -> + dx2; d w_qkv, d attn_norm
        g = G.new("qkv_norm1_bwd")
        dqkv, wqkvT = T(g, "d_qkv", [M, 3 * D]), T(g, "w_qkv_t", [3 * D, D], [1, 3 * D])
        h1T, x, s1 = T(g, "h1_t", [D, M], [1, D]), T(g, "x", [M, D]), T(g, "attn_norm", [1, D], dtype=P)
        r1, dx2 = T(g, "inv_rms1", [M, 1], dtype=P), T(g, "dx2", [M, D])
        dh1 = g.matmul(dqkv, wqkvT, name="qkv_dx")
        dn, ds1, _ = g.rmsnorm_backward(dh1, x, s1, r1, name="attn_norm_bwd")
        ds1.set_data_type(P)
        dx = g.add(dn, dx2, name="residual1_bwd")
        dwqkv = g.matmul(h1T, dqkv, name="qkv_dw").set_stride([3 * D, 1])
        self.b9 = (G.done(g, dx.set_name("dx"), ds1.set_name("d_attn_norm"), dwqkv.set_name("d_w_qkv")),
                   dqkv, wqkvT, h1T, x, s1, r1, dx2, dx, ds1, dwqkv)

        # the packs: the same buffer objects every step (the frontend's execute cache keeps them)
        A, W, Gr = self.arr, self.w, self.grads
        tv = A.view   # transposed views
        self._wt = {"w_down": tv(W["w_down"], [D, F], [1, D]),
                    "w_gate_up": tv(W["w_gate_up"], [2 * F, D], [1, 2 * F]),
                    "w_o": tv(W["w_o"], [D, D], [1, D]),
                    "w_qkv": tv(W["w_qkv"], [3 * D, D], [1, 3 * D])}
        self._act_t = tv(self.act, [F, M], [1, F])
        self._h2_t = tv(self.h2, [D, M], [1, D])
        self._attn_t = tv(self.attn, [D, M], [1, D])
        self._h1_t = tv(self.h1, [D, M], [1, D])
        g, q, k, v, o, st = self.f2
        self.p2 = {q: self.q, k: self.k, v: self.v, o: self.o, st: self.stats}
        g, dy, wdT, gt, up, actT, dgate, dup, dwd = self.b5
        self._p5 = {wdT: self._wt["w_down"], gt: self.gate, up: self.up, actT: self._act_t,
                    dgate: self.dgate, dup: self.dup, dwd: Gr["d_w_down"]}
        g, dgu, wguT, h2T, x2, s2, r2, dy6, dx2, ds2, dwgu = self.b6
        self._p6 = {dgu: self.dgu, wguT: self._wt["w_gate_up"], h2T: self._h2_t, x2: self.x2,
                    s2: W["ffn_norm"], r2: self.r2, dx2: self.dx2, ds2: Gr["d_ffn_norm"],
                    dwgu: Gr["d_w_gate_up"]}
        g, dx2, woT, aT, da, dwo = self.b7
        self.p7 = {dx2: self.dx2, woT: self._wt["w_o"], aT: self._attn_t, da: self.dattn,
                   dwo: Gr["d_w_o"]}
        g, q, k, v, o, do, st, dq, dk, dv = self.b8
        self.p8 = {q: self.q, k: self.k, v: self.v, o: self.o, do: self.do, st: self.stats,
                   dq: self.dq, dk: self.dk, dv: self.dv}
        g, dqkv, wqkvT, h1T, x, s1, r1, dx2, dx, ds1, dwqkv = self.b9
        self._p9 = {dqkv: self.dqkv, wqkvT: self._wt["w_qkv"], h1T: self._h1_t, s1: W["attn_norm"],
                    r1: self.r1, dx2: self.dx2, dx: self.dx, ds1: Gr["d_attn_norm"],
                    dwqkv: Gr["d_w_qkv"]}
        self._fwd_packs = {}

    def _rows(self, a):
        return a.reshape(self.M, self.D) if tuple(a.shape) != (self.M, self.D) else a

    def _packs_for(self, x):
        """The forward packs for input ``x`` (kept per input object: same objects, same packs)."""
        key = id(x)
        hit = self._fwd_packs.get(key)
        if hit is not None and hit[0] is x:
            return hit[1]
        W = self.w
        xr = self._rows(x)
        g, xt, s1, w, h1, r1, qkv = self.f1
        p1 = {xt: xr, s1: W["attn_norm"], w: W["w_qkv"], h1: self.h1, r1: self.r1, qkv: self.qkv}
        g, a, wo, xt3, s2, wgu, x2, h2, r2, gu = self.f3
        p3 = {a: self.attn, wo: W["w_o"], xt3: xr, s2: W["ffn_norm"], wgu: W["w_gate_up"],
              x2: self.x2, h2: self.h2, r2: self.r2, gu: self.gu}
        g, gt, up, wd, x2b, act, y = self.f4
        p4 = {gt: self.gate, up: self.up, wd: W["w_down"], x2b: self.x2, act: self.act, y: self.y}
        g, dqkv, wqkvT, h1T, xt9, *_ = self.b9
        p9 = dict(self._p9)
        p9[xt9] = xr
        self._fwd_packs = {key: (x, (p1, p3, p4, p9))}
        return p1, p3, p4, p9

    # ------------------------------------------------------------------------------ running
    def forward(self, x):
        """y = block(x); keeps what the backward needs (x itself is referenced, not copied)."""
        p1, p3, p4, _ = self._packs_for(x)
        self._x = x
        self.G.run(self.f1[0], p1)
        self.G.run(self.f2[0], self.p2)
        self.G.run(self.f3[0], p3)
        self.G.run(self.f4[0], p4)
        return self.y.reshape(tuple(x.shape))

    def backward(self, dy):
        """(dx, grads) for the last forward's input; ``grads`` maps GRADS' names to arrays."""
        if self._x is None:
            raise RuntimeError("backward() before forward()")
        *_, p9 = self._packs_for(self._x)
        dyr = self._rows(dy)
        g, dy5, *_ = self.b5
        p5 = dict(self._p5)
        p5[dy5] = dyr
        g6, _, _, _, _, _, _, dy6, *_ = self.b6
        p6 = dict(self._p6)
        p6[dy6] = dyr
        self.G.run(self.b5[0], p5)
        self.G.run(g6, p6)
        self.G.run(self.b7[0], self.p7)
        self.G.run(self.b8[0], self.p8)
        self.G.run(self.b9[0], p9)
        return self.dx.reshape(tuple(dy.shape)), self.grads

    def engines(self):
        return self.G.engines()

    def close(self):
        self.G.close()


def random_weights(D, F, rng, dtype=np.float32):
    """Weights scaled like a trained layer (unit-variance activations), as numpy arrays; the
    norm scales float32 (float64 for a float64 model)."""
    pt = np.float64 if dtype == np.float64 else np.float32
    def mat(i, o):
        return (rng.standard_normal((i, o)) / math.sqrt(i)).astype(dtype)
    return {"attn_norm": (1.0 + 0.1 * rng.standard_normal(D)).astype(pt),
            "w_qkv": mat(D, 3 * D), "w_o": mat(D, D),
            "ffn_norm": (1.0 + 0.1 * rng.standard_normal(D)).astype(pt),
            "w_gate_up": mat(D, 2 * F), "w_down": mat(F, D)}


def main() -> int:
    """A tiny float64 layer: the gradient of L = <y, dy> along a random direction of x and of
    each weight, from backward() and from central differences of forward()."""
    B, S, D, H, F = 2, 8, 64, 4, 96
    rng = np.random.default_rng(0)
    w = random_weights(D, F, rng, np.float64)
    x = rng.standard_normal((B, S, D))
    dy = rng.standard_normal((B, S, D))
    blk = LlamaBlock(w, B, S, H)
    blk.forward(x)
    dx, grads = blk.backward(dy)
    print(f"Llama block B={B} S={S} D={D} heads={H} FFN={F} float64: {len(blk.G.graphs)} graphs on "
          f"{blk.engines()}")
    worst = 0.0
    for name, arr, grad in [("x", x, dx)] + [(k, w[k], grads[GRADS[k]]) for k in WEIGHTS]:
        v = rng.standard_normal(arr.shape)
        worst = max(worst, directional_check(name, arr, grad, v,
                                             lambda: float(np.sum(blk.forward(x) * dy)), 1e-6))
    blk.close()
    ok = worst < 1e-6
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
