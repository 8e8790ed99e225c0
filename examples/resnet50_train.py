"""A ResNet-50 training step (forward + backward) run entirely on hipDNN graphs, channels-last.

The network is torchvision's ResNet-50 (v1.5: the stride on the 3 x 3 convolution of a
bottleneck): a 7 x 7 / 2 stem convolution, batchnorm, ReLU and 3 x 3 / 2 max pooling; bottleneck
blocks [3, 4, 6, 3] (1 x 1 -> 3 x 3 -> 1 x 1 convolutions, each followed by batchnorm, the
residual added before the last ReLU, a 1 x 1 projection + batchnorm on the shortcut of each
stage's first block); global average pooling; a fully connected layer.  53 convolutions in all.
``width`` (64 in ResNet-50), ``layers``, ``image`` and ``batch`` are parameters, so the CPU
reference engine can run the same structure small.

Parameters use torchvision's names (``conv1.weight``, ``bn1.weight`` / ``bias`` /
``running_mean`` / ``running_var``, ``layer2.0.conv3.weight``, ``layer2.0.downsample.0.weight``,
``layer2.0.downsample.1.*``, ``fc.weight`` [classes, C], ``fc.bias``): :func:`init_params`
makes a set, :func:`param_shapes` lists them.  Convolution weights are [K, C, R, S] kept
channels-last (K R S C in memory), activations [N, C, H, W] channels-last (N H W C in memory);
batchnorm parameters and statistics are float32 (float64 for a float64 model).

Graphs (each built once; batchnorm in training mode: batch statistics, running statistics
updated with ``momentum``):

* stem forward: conv -> batchnorm -> ReLU -> max pool (with the winners' index);
  stem backward: max-pool backward (index) -> ReLU backward -> batchnorm backward -> conv wgrad
  (and, with ``input_grad=True``, the image's gradient: the 53rd dgrad)
* per bottleneck block, forward: the three convolutions with batchnorm and ReLU, the projection
  shortcut, the residual add and the last ReLU - one graph; backward: ReLU backward, three
  batchnorm backwards, three conv dgrads and wgrads, the shortcut's, and the sum of the two input
  gradients - one graph
* head forward: global average pooling (a window of the whole image); the fully connected layer
  with its bias fused into the matmul epilogue; head backward: the matmul's two gradients and
  the bias gradient (a reduction), then average-pooling backward.

``step(x, dlogits)`` runs the forward and the backward for the gradient ``dlogits`` of the loss
with respect to the logits and returns the logits; ``grads`` then holds a gradient per parameter
(``running_*`` excluded) and ``running`` the updated running statistics.  Buffers follow the
parameters: numpy arrays run on the CPU reference engine, torch tensors on their device run on a
GPU engine.  ``python3 examples/resnet50_train.py`` checks a small float64 network's gradients
against finite differences of its own forward pass.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nn_graphs import (INT32, Arrays, Graphs, directional_check, nhwc_strides,  # noqa: E402
                       param_type_name, type_name)

LAYERS = (3, 4, 6, 3)
BN_FIELDS = ("weight", "bias", "running_mean", "running_var")


def block_names(layers=LAYERS, width=64):
    """[(prefix, in channels, mid channels, stride, has projection)] of every bottleneck."""
    out, cin = [], width
    for i, n in enumerate(layers):
        mid = width * 2 ** i
        for j in range(n):
            stride = 2 if (j == 0 and i > 0) else 1
            out.append((f"layer{i + 1}.{j}", cin, mid, stride, j == 0))
            cin = mid * 4
    return out


def param_shapes(layers=LAYERS, width=64, classes=1000, in_channels=3):
    """{name: shape} in torchvision's order."""
    shapes = {"conv1.weight": (width, in_channels, 7, 7)}
    shapes.update({f"bn1.{f}": (width,) for f in BN_FIELDS})
    for pre, cin, mid, _, proj in block_names(layers, width):
        for k, (ci, co, r) in enumerate(((cin, mid, 1), (mid, mid, 3), (mid, mid * 4, 1)), 1):
            shapes[f"{pre}.conv{k}.weight"] = (co, ci, r, r)
            shapes.update({f"{pre}.bn{k}.{f}": (co,) for f in BN_FIELDS})
        if proj:
            shapes[f"{pre}.downsample.0.weight"] = (mid * 4, cin, 1, 1)
            shapes.update({f"{pre}.downsample.1.{f}": (mid * 4,) for f in BN_FIELDS})
    c = width * 2 ** (len(layers) - 1) * 4
    shapes["fc.weight"] = (classes, c)
    shapes["fc.bias"] = (classes,)
    return shapes


def init_params(rng, layers=LAYERS, width=64, classes=1000, dtype=np.float32):
    """He-initialised convolutions, batchnorm scale ~1 and bias ~0 (slightly perturbed, so their
    gradients are exercised), zero running means, unit running variances; numpy arrays."""
    pt = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    p = {}
    for name, shp in param_shapes(layers, width, classes).items():
        if name.endswith("running_mean"):
            p[name] = np.zeros(shp, pt)
        elif name.endswith("running_var"):
            p[name] = np.ones(shp, pt)
        elif len(shp) == 4:
            fan_in = shp[1] * shp[2] * shp[3]
            p[name] = (rng.standard_normal(shp) * math.sqrt(2.0 / fan_in)).astype(dtype)
        elif name == "fc.weight":
            p[name] = (rng.standard_normal(shp) / math.sqrt(shp[1])).astype(dtype)
        elif name == "fc.bias":
            p[name] = (0.1 * rng.standard_normal(shp)).astype(dtype)
        elif name.endswith("weight"):
            p[name] = (1.0 + 0.1 * rng.standard_normal(shp)).astype(pt)
        else:
            p[name] = (0.1 * rng.standard_normal(shp)).astype(pt)
    return p


def _pool_out(n, k, s, p):
    return (n + 2 * p - k) // s + 1


class ResNet50:
    """``ResNet50(params, batch, image, layers=LAYERS, width=None, eps=1e-5, momentum=0.1)``.

    ``params``: {torchvision name: array} (numpy or torch, one kind), convolution / fc weights in
    the model's data type (which they define), batchnorm tensors float32 (float64 for a float64
    model); ``width`` and ``classes`` are read from them.  The model keeps channels-last copies of
    the convolution weights (``weights``, the same values); ``step(x, dlogits)``.  ``dtype``
    overrides the data type (numpy bfloat16 as raw uint16 bits, where ml_dtypes is missing);
    ``plans=False`` only lowers the graphs (``G.graphs``: to inspect or serialise them);
    ``input_grad=True`` adds the stem convolution's data gradient (``d_x``, the image's
    gradient; a training step needs none)."""

    def __init__(self, params, batch, image, layers=LAYERS, eps=1e-5, momentum=0.1, handle=None,
                 dtype=None, plans=True, input_grad=False):
        self.arr = A = Arrays(params["conv1.weight"])
        self.dtype = dt = type_name(dtype if dtype is not None else params["conv1.weight"].dtype)
        self.pt = pt = param_type_name(dt)
        self.width = params["conv1.weight"].shape[0]
        self.classes = params["fc.weight"].shape[0]
        self.N, self.image, self.layers = batch, image, tuple(layers)
        self.eps, self.momentum = float(eps), float(momentum)
        self.input_grad, self.d_x = bool(input_grad), None
        self.blocks = block_names(self.layers, self.width)
        shapes = param_shapes(self.layers, self.width, self.classes, params["conv1.weight"].shape[1])
        missing = sorted(set(shapes) - set(params))
        if missing:
            raise ValueError(f"missing parameters: {missing[:4]}{'...' if len(missing) > 4 else ''}")
        # parameters: conv weights channels-last; running statistics double-buffered (a step reads
        # one set and writes the other, so no tensor is both read and written by one graph)
        self.weights = {}
        for k, shp in shapes.items():
            v = params[k]
            if len(shp) == 4:
                w = self._nhwc(shp, dt)
                self._copy(w, v)
                v = w
            self.weights[k] = v
        self.running = {k: v for k, v in self.weights.items() if "running_" in k}
        self._run_sets = (self.running, {k: A.empty(v.shape, pt) for k, v in self.running.items()})
        self.grads = {}
        for k, shp in shapes.items():
            if "running_" in k:
                continue
            self.grads[k] = (self._nhwc(shp, dt) if len(shp) == 4 else
                             A.empty(shp, dt if k.startswith("fc.") else pt))
        self.saved = {}       # activations of the forward pass, by name
        self.G = Graphs(dt, handle=handle, name="resnet50", plans=plans)
        self._parity = 0
        self._build()

    # ---------------------------------------------------------------------- buffers
    def _nhwc(self, dims, dt):
        """An [N, C, spatial...] buffer laid out channels-last."""
        A = self.arr
        n, c, *sp = dims
        if A.torch is not None:
            return A.empty((n, *sp, c), dt).permute(0, len(dims) - 1, *range(1, len(dims) - 1))
        return A.empty((n, *sp, c), dt).transpose(0, len(dims) - 1, *range(1, len(dims) - 1))

    def _copy(self, dst, src):
        if self.arr.torch is not None:
            dst.copy_(src)
        else:
            dst[...] = src

    def _act(self, name, dims, dt=None):
        buf = self._nhwc(dims, dt or self.dtype)
        self.saved[name] = buf
        return buf

    # ---------------------------------------------------------------------- graph pieces
    def _conv(self, g, x, w, stride, pad, name):
        y = g.conv_fprop(x, w, padding=pad, stride=stride, dilation=1, name=name)
        return y

    def _bn(self, g, y, prefix, c, ins):
        """Training batchnorm of ``y``; registers its parameter tensors in ``ins``."""
        T, P = self.G.t, self.G.param
        sh = [1, c, 1, 1]
        t = {f: T(g, f"{prefix}.{f}", sh, dtype=P) for f in BN_FIELDS}
        z, mean, iv, nrm, nrv = g.batchnorm(y, t["weight"], t["bias"], self.G.scalar(self.eps),
                                            in_running_mean=t["running_mean"],
                                            in_running_var=t["running_var"],
                                            momentum=self.G.scalar(self.momentum),
                                            name=prefix)
        for s, nm in ((mean, "mean"), (iv, "inv_var"), (nrm, "next_running_mean"),
                      (nrv, "next_running_var")):
            s.set_data_type(P).set_name(f"{prefix}.{nm}")
        ins[prefix] = dict(t, mean=mean, inv_var=iv, next_running_mean=nrm, next_running_var=nrv)
        return z

    def _bn_bwd(self, g, dz, y, prefix, c, ins):
        T, P = self.G.t, self.G.param
        sh = [1, c, 1, 1]
        s, m, iv = (T(g, f"{prefix}.{f}", sh, dtype=P) for f in ("weight", "mean", "inv_var"))
        dy, ds, db = g.batchnorm_backward(dz, y, s, m, iv, name=f"{prefix}.bwd")
        ds.set_data_type(P).set_name(f"{prefix}.d_weight")
        db.set_data_type(P).set_name(f"{prefix}.d_bias")
        ins[prefix] = {"weight": s, "mean": m, "inv_var": iv, "d_weight": ds, "d_bias": db}
        return dy

    def _dgrad(self, g, dy, w, stride, pad, xdims, name):
        dx = g.conv_dgrad(dy, w, padding=pad, stride=stride, dilation=1, name=name)
        return dx.set_dim(list(xdims)).set_stride(nhwc_strides(xdims))

    def _wgrad(self, g, x, dy, wdims, stride, pad, name):
        dw = g.conv_wgrad(x, dy, padding=pad, stride=stride, dilation=1, name=name)
        return dw.set_dim(list(wdims)).set_stride(nhwc_strides(wdims)).set_name(name)

    # ---------------------------------------------------------------------- graphs
    def _build(self):
        G, T, N = self.G, self.G.t, self.N
        W = self.weights
        w0 = self.width
        cin = W["conv1.weight"].shape[1]
        H0 = self.image
        H1 = _pool_out(H0, 7, 2, 3)
        H2 = _pool_out(H1, 3, 2, 1)
        self.x_dims = [N, cin, H0, H0]
        self.plan = []          # (graph, pack builder) in execution order, forward then backward

        # ---- stem forward
        g = G.new("stem")
        x = T(g, "x", self.x_dims, nhwc_strides(self.x_dims))
        w = T(g, "conv1.weight", W["conv1.weight"].shape, nhwc_strides(W["conv1.weight"].shape))
        y0 = self._conv(g, x, w, 2, 3, "conv1").set_name("conv1.y")
        bn = {}
        a0 = g.relu(self._bn(g, y0, "bn1", w0, bn), name="relu").set_name("stem.a")
        p, idx = g.resample(a0, mode="MAXPOOL", window=[3, 3], stride=[2, 2], pre_padding=[1, 1],
                            post_padding=[1, 1], padding_mode="NEG_INF_PAD", generate_index=True,
                            name="maxpool")
        p.set_name("stem.out")
        idx.set_name("maxpool.index")
        outs = [y0, a0, p, idx] + [bn["bn1"][k] for k in ("mean", "inv_var", "next_running_mean",
                                                           "next_running_var")]
        G.done(g, *outs)
        d1 = [N, w0, H1, H1]
        d2 = [N, w0, H2, H2]
        bufs = {y0: self._act("conv1.y", d1), a0: self._act("stem.a", d1),
                p: self._act("stem.out", d2), idx: self._act("maxpool.index", d2, "int32")}
        self.stem_f = (g, x, bufs, {"conv1.weight": w}, bn)
        self.saved_stats = {}
        self._stats_bufs(bn)

        # ---- bottleneck blocks
        self.block_f, self.block_b = [], []
        self.act_grads = {}     # gradient buffers of the block inputs, by the input's name
        hw, inp = H2, "stem.out"
        for pre, ci, mid, st, proj in self.blocks:
            ho = _pool_out(hw, 3, st, 1)
            self.block_f.append(self._block_fwd(pre, ci, mid, st, proj, hw, ho, inp))
            self.block_b.append(self._block_bwd(pre, ci, mid, st, proj, hw, ho, inp))
            hw, inp = ho, f"{pre}.out"
        self.last_hw = hw
        c = self.blocks[-1][2] * 4
        self.feat = c

        # ---- head forward: global average pooling, then fc (+ bias in the epilogue)
        g = G.new("avgpool")
        a = T(g, "features", [N, c, hw, hw], nhwc_strides([N, c, hw, hw]))
        pooled, _ = g.resample(a, mode="AVGPOOL_INCLUDE_PADDING", window=[hw, hw], stride=[hw, hw],
                               pre_padding=[0, 0], post_padding=[0, 0], name="avgpool")
        pooled.set_stride(nhwc_strides([N, c, 1, 1])).set_name("pooled")
        G.done(g, pooled)
        self.pooled = self.arr.empty((N, c), self.dtype)
        self.avg_f = (g, a, pooled)
        g = G.new("fc")
        xp, wt = T(g, "pooled", [N, c]), T(g, "fc.weight_t", [c, self.classes], [1, c])
        b = T(g, "fc.bias", [1, self.classes])
        logits = g.add(g.matmul(xp, wt, name="fc"), b, name="fc.bias").set_name("logits")
        G.done(g, logits)
        self.logits = self.arr.empty((N, self.classes), self.dtype)
        self.fc_f = (g, xp, wt, b, logits)

        # ---- head backward: fc gradients (two matmuls, a reduction), average-pooling backward
        g = G.new("fc_bwd")
        dl, wfc = T(g, "d_logits", [N, self.classes]), T(g, "fc.weight", [self.classes, c])
        xpT = T(g, "pooled_t", [c, N], [1, c])
        dp = g.matmul(dl, wfc, name="fc.dx").set_name("d_pooled")
        # d weight [classes, c] written through its transposed view: (pooledᵀ @ d_logits)
        dwT = g.matmul(xpT, dl, name="fc.dw").set_stride([1, c]).set_name("fc.d_weight_t")
        db = g.reduction(dl, "ADD", name="fc.d_bias").set_dim([1, self.classes]).set_name("fc.d_bias")
        G.done(g, dp, dwT, db)
        self.d_pooled = self.arr.empty((N, c), self.dtype)
        self.fc_b = (g, dl, wfc, xpT, dp, dwT, db)
        g = G.new("avgpool_bwd")
        dpt = T(g, "d_pooled", [N, c, 1, 1], nhwc_strides([N, c, 1, 1]))
        da = g.resample_backward(dpt, mode="AVGPOOL_INCLUDE_PADDING", window=[hw, hw],
                                 stride=[hw, hw], pre_padding=[0, 0], post_padding=[0, 0],
                                 name="avgpool.bwd")
        da.set_dim([N, c, hw, hw]).set_stride(nhwc_strides([N, c, hw, hw])).set_name("d_features")
        G.done(g, da)
        self.d_feat = self.act_grads[self.blocks[-1][0] + ".out"] = self._nhwc([N, c, hw, hw], self.dtype)
        self.avg_b = (g, dpt, da)

        # ---- stem backward: max-pool backward -> ReLU backward -> batchnorm backward -> wgrad
        g = G.new("stem_bwd")
        dpo = T(g, "d_stem.out", d2, nhwc_strides(d2))
        ix = T(g, "maxpool.index", d2, nhwc_strides(d2), dtype=INT32)
        a0t, y0t = T(g, "stem.a", d1, nhwc_strides(d1)), T(g, "conv1.y", d1, nhwc_strides(d1))
        xt = T(g, "x", self.x_dims, nhwc_strides(self.x_dims))
        da0 = g.resample_backward(dpo, index=ix, mode="MAXPOOL", window=[3, 3], stride=[2, 2],
                                  pre_padding=[1, 1], post_padding=[1, 1], padding_mode="NEG_INF_PAD",
                                  name="maxpool.bwd")
        da0.set_dim(d1).set_stride(nhwc_strides(d1))
        dz0 = g.relu_backward(da0, a0t, name="relu.bwd")
        bnb = {}
        dy0 = self._bn_bwd(g, dz0, y0t, "bn1", w0, bnb)
        dw0 = self._wgrad(g, xt, dy0, W["conv1.weight"].shape, 2, 3, "conv1.d_weight")
        wt = dxi = None
        if self.input_grad:
            wt = T(g, "conv1.weight", W["conv1.weight"].shape, nhwc_strides(W["conv1.weight"].shape))
            dxi = self._dgrad(g, dy0, wt, 2, 3, self.x_dims, "conv1.dgrad").set_name("d_x")
            self.d_x = self._nhwc(self.x_dims, self.dtype)
        G.done(g, dw0, bnb["bn1"]["d_weight"], bnb["bn1"]["d_bias"], *([dxi] if dxi is not None else []))
        self.stem_b = (g, dpo, ix, a0t, y0t, xt, dw0, bnb, wt, dxi)
        self._packs = {}

    def _stats_bufs(self, bn):
        for prefix, t in bn.items():
            c = t["weight"].get_dim()[1]
            self.saved_stats[prefix] = {"mean": self.arr.empty((c,), self.pt),
                                        "inv_var": self.arr.empty((c,), self.pt)}

    def _block_fwd(self, pre, ci, mid, st, proj, hw, ho, inp):
        G, T, N, W = self.G, self.G.t, self.N, self.weights
        g = G.new(f"{pre}.fwd")
        xd = [N, ci, hw, hw]
        x = T(g, inp, xd, nhwc_strides(xd))
        ws = {}
        for k in ("conv1", "conv2", "conv3") + (("downsample.0",) if proj else ()):
            shp = W[f"{pre}.{k}.weight"].shape
            ws[f"{pre}.{k}.weight"] = T(g, f"{pre}.{k}.weight", shp, nhwc_strides(shp))
        bn = {}
        y1 = self._conv(g, x, ws[f"{pre}.conv1.weight"], 1, 0, f"{pre}.conv1").set_name(f"{pre}.y1")
        a1 = g.relu(self._bn(g, y1, f"{pre}.bn1", mid, bn)).set_name(f"{pre}.a1")
        y2 = self._conv(g, a1, ws[f"{pre}.conv2.weight"], st, 1, f"{pre}.conv2").set_name(f"{pre}.y2")
        a2 = g.relu(self._bn(g, y2, f"{pre}.bn2", mid, bn)).set_name(f"{pre}.a2")
        y3 = self._conv(g, a2, ws[f"{pre}.conv3.weight"], 1, 0, f"{pre}.conv3").set_name(f"{pre}.y3")
        z3 = self._bn(g, y3, f"{pre}.bn3", mid * 4, bn)
        outs = [y1, a1, y2, a2, y3]
        if proj:
            ys = self._conv(g, x, ws[f"{pre}.downsample.0.weight"], st, 0,
                            f"{pre}.downsample.0").set_name(f"{pre}.ys")
            short = self._bn(g, ys, f"{pre}.downsample.1", mid * 4, bn)
            outs.append(ys)
        else:
            short = x
        out = g.relu(g.add(z3, short, name=f"{pre}.residual"), name=f"{pre}.relu3").set_name(f"{pre}.out")
        outs.append(out)
        for t in bn.values():
            outs += [t[k] for k in ("mean", "inv_var", "next_running_mean", "next_running_var")]
        G.done(g, *outs)
        d_mid_in, d_mid, d_out = [N, mid, hw, hw], [N, mid, ho, ho], [N, mid * 4, ho, ho]
        bufs = {y1: self._act(f"{pre}.y1", d_mid_in), a1: self._act(f"{pre}.a1", d_mid_in),
                y2: self._act(f"{pre}.y2", d_mid), a2: self._act(f"{pre}.a2", d_mid),
                y3: self._act(f"{pre}.y3", d_out), out: self._act(f"{pre}.out", d_out)}
        if proj:
            bufs[outs[5]] = self._act(f"{pre}.ys", d_out)
        self._stats_bufs(bn)
        return (g, x, inp, bufs, ws, bn)

    def _block_bwd(self, pre, ci, mid, st, proj, hw, ho, inp):
        G, T, N, W = self.G, self.G.t, self.N, self.weights
        g = G.new(f"{pre}.bwd")
        xd, d_mid_in, d_mid, d_out = [N, ci, hw, hw], [N, mid, hw, hw], [N, mid, ho, ho], [N, mid * 4, ho, ho]
        t = {}
        for nm, d in ((inp, xd), (f"{pre}.y1", d_mid_in), (f"{pre}.a1", d_mid_in), (f"{pre}.y2", d_mid),
                      (f"{pre}.a2", d_mid), (f"{pre}.y3", d_out), (f"{pre}.out", d_out),
                      (f"d_{pre}.out", d_out)) + (((f"{pre}.ys", d_out),) if proj else ()):
            t[nm] = T(g, nm, d, nhwc_strides(d))
        ws = {}
        for k in ("conv1", "conv2", "conv3") + (("downsample.0",) if proj else ()):
            shp = W[f"{pre}.{k}.weight"].shape
            ws[f"{pre}.{k}.weight"] = T(g, f"{pre}.{k}.weight", shp, nhwc_strides(shp))
        bnb, dws = {}, {}
        x = t[inp]
        d3 = g.relu_backward(t[f"d_{pre}.out"], t[f"{pre}.out"], name=f"{pre}.relu3.bwd")
        dy3 = self._bn_bwd(g, d3, t[f"{pre}.y3"], f"{pre}.bn3", mid * 4, bnb)
        da2 = self._dgrad(g, dy3, ws[f"{pre}.conv3.weight"], 1, 0, d_mid, f"{pre}.conv3.dgrad")
        dws["conv3"] = self._wgrad(g, t[f"{pre}.a2"], dy3, W[f"{pre}.conv3.weight"].shape, 1, 0,
                                   f"{pre}.conv3.d_weight")
        dy2 = self._bn_bwd(g, g.relu_backward(da2, t[f"{pre}.a2"], name=f"{pre}.relu2.bwd"),
                           t[f"{pre}.y2"], f"{pre}.bn2", mid, bnb)
        da1 = self._dgrad(g, dy2, ws[f"{pre}.conv2.weight"], st, 1, d_mid_in, f"{pre}.conv2.dgrad")
        dws["conv2"] = self._wgrad(g, t[f"{pre}.a1"], dy2, W[f"{pre}.conv2.weight"].shape, st, 1,
                                   f"{pre}.conv2.d_weight")
        dy1 = self._bn_bwd(g, g.relu_backward(da1, t[f"{pre}.a1"], name=f"{pre}.relu1.bwd"),
                           t[f"{pre}.y1"], f"{pre}.bn1", mid, bnb)
        dxm = self._dgrad(g, dy1, ws[f"{pre}.conv1.weight"], 1, 0, xd, f"{pre}.conv1.dgrad")
        dws["conv1"] = self._wgrad(g, x, dy1, W[f"{pre}.conv1.weight"].shape, 1, 0,
                                   f"{pre}.conv1.d_weight")
        if proj:
            dys = self._bn_bwd(g, d3, t[f"{pre}.ys"], f"{pre}.downsample.1", mid * 4, bnb)
            dxs = self._dgrad(g, dys, ws[f"{pre}.downsample.0.weight"], st, 0, xd,
                              f"{pre}.downsample.0.dgrad")
            dws["downsample.0"] = self._wgrad(g, x, dys, W[f"{pre}.downsample.0.weight"].shape, st, 0,
                                              f"{pre}.downsample.0.d_weight")
        else:
            dxs = d3          # the identity path: the block output's gradient through the ReLU
        dx = g.add(dxm, dxs, name=f"{pre}.d_input").set_stride(nhwc_strides(xd)).set_name(f"d_{inp}")
        self.act_grads[inp] = self._nhwc(xd, self.dtype)
        outs = [dx] + list(dws.values())
        for b in bnb.values():
            outs += [b["d_weight"], b["d_bias"]]
        G.done(g, *outs)
        return (g, t, inp, dx, ws, dws, bnb)

    # ---------------------------------------------------------------------- packs
    def _bn_pack(self, pack, bn, parity, forward):
        """Batchnorm tensors of one graph: parameters, saved statistics, running statistics (read
        from one buffer set and written to the other, alternating per step)."""
        Wt, Gr = self.weights, self.grads
        cur, nxt = self._run_sets[parity], self._run_sets[1 - parity]
        for prefix, t in bn.items():
            sv = self.saved_stats[prefix]
            pack[t["weight"]] = Wt[f"{prefix}.weight"]
            pack[t["mean"]] = sv["mean"]
            pack[t["inv_var"]] = sv["inv_var"]
            if forward:
                pack[t["bias"]] = Wt[f"{prefix}.bias"]
                pack[t["running_mean"]] = cur[f"{prefix}.running_mean"]
                pack[t["running_var"]] = cur[f"{prefix}.running_var"]
                pack[t["next_running_mean"]] = nxt[f"{prefix}.running_mean"]
                pack[t["next_running_var"]] = nxt[f"{prefix}.running_var"]
            else:
                pack[t["d_weight"]] = Gr[f"{prefix}.weight"]
                pack[t["d_bias"]] = Gr[f"{prefix}.bias"]

    def _make_packs(self, x, parity):
        """[(graph, pack)] of one step in execution order (built once per input and parity)."""
        S, Wt, Gr, A = self.saved, self.weights, self.grads, self.arr
        N, c = self.N, self.feat
        run = []
        g, xt, bufs, ws, bn = self.stem_f
        pk = {xt: x, **bufs, ws["conv1.weight"]: Wt["conv1.weight"]}
        self._bn_pack(pk, bn, parity, True)
        run.append((g, pk))
        for g, xin, inp, bufs, ws, bn in self.block_f:
            pk = {xin: S[inp], **bufs, **{v: Wt[k] for k, v in ws.items()}}
            self._bn_pack(pk, bn, parity, True)
            run.append((g, pk))
        g, a, pooled = self.avg_f
        run.append((g, {a: S[self.blocks[-1][0] + ".out"],
                        pooled: A.view(self.pooled, [N, c, 1, 1], nhwc_strides([N, c, 1, 1]))}))
        g, xp, wt, b, logits = self.fc_f
        run.append((g, {xp: self.pooled, wt: A.view(Wt["fc.weight"], [c, self.classes], [1, c]),
                        b: Wt["fc.bias"], logits: self.logits}))
        n_fwd = len(run)
        g, dl, wfc, xpT, dp, dwT, db = self.fc_b
        run.append((g, {dl: None, wfc: Wt["fc.weight"], xpT: A.view(self.pooled, [c, N], [1, c]),
                        dp: self.d_pooled, dwT: A.view(Gr["fc.weight"], [c, self.classes], [1, c]),
                        db: Gr["fc.bias"]}))
        g, dpt, da = self.avg_b
        run.append((g, {dpt: A.view(self.d_pooled, [N, c, 1, 1], nhwc_strides([N, c, 1, 1])),
                        da: self.d_feat}))
        grad_of = self.act_grads
        for (g, t, inp, dx, ws, dws, bnb), (pre, *_rest) in zip(reversed(self.block_b), reversed(self.blocks)):
            pk = {}
            for nm, tt in t.items():
                pk[tt] = grad_of[nm[2:]] if nm.startswith("d_") else S[nm]
            pk[dx] = grad_of[inp]
            pk.update({v: Wt[k] for k, v in ws.items()})
            pk.update({v: Gr[f"{pre}.{k}.weight"] for k, v in dws.items()})
            self._bn_pack(pk, bnb, parity, False)
            run.append((g, pk))
        g, dpo, ix, a0t, y0t, xt, dw0, bnb, wt, dxi = self.stem_b
        pk = {dpo: grad_of["stem.out"], ix: S["maxpool.index"], a0t: S["stem.a"], y0t: S["conv1.y"],
              xt: x, dw0: Gr["conv1.weight"]}
        if dxi is not None:
            pk.update({wt: Wt["conv1.weight"], dxi: self.d_x})
        self._bn_pack(pk, bnb, parity, False)
        run.append((g, pk))
        return run, n_fwd

    # ---------------------------------------------------------------------- running
    def step(self, x, dlogits):
        """One training step's forward and backward: returns the logits [N, classes]; ``grads``
        holds every parameter's gradient, ``running`` the updated running statistics."""
        key = (id(x), id(dlogits), self._parity)
        hit = self._packs.get(key)
        if hit is None or hit[0] is not x or hit[1] is not dlogits:
            run, n_fwd = self._make_packs(x, self._parity)
            g, dl, *_ = self.fc_b
            run[n_fwd][1][dl] = dlogits
            self._packs = {k: v for k, v in self._packs.items() if k[2] != self._parity}
            self._packs[key] = hit = (x, dlogits, run)
        for g, pk in hit[2]:
            self.G.run(g, pk)
        self._parity ^= 1
        self.running = self._run_sets[self._parity]
        return self.logits

    def forward(self, x):
        """Forward only (training mode, as in ``step``; running statistics not swapped): the
        logits.  Used by gradient checks."""
        run, n_fwd = self._make_packs(x, self._parity)
        for g, pk in run[:n_fwd]:
            self.G.run(g, pk)
        return self.logits

    def n_convolutions(self):
        return 1 + sum(3 + int(b[4]) for b in self.blocks)

    def engines(self):
        return self.G.engines()

    def close(self):
        self.G.close()


def main() -> int:
    """A float64 network with one block per stage at width 4 on 32 x 32 images: the gradient of
    L = <logits, dlogits> along random directions, from step()'s gradients and from central
    differences of forward()."""
    rng = np.random.default_rng(0)
    layers, width, N, image, classes = (1, 1, 1, 1), 4, 2, 32, 5
    p = init_params(rng, layers, width, classes, np.float64)
    net = ResNet50(p, N, image, layers)
    x = rng.standard_normal((N, image, image, 3)).transpose(0, 3, 1, 2)
    dl = rng.standard_normal((N, classes))
    net.step(x, dl)
    print(f"ResNet-50 structure, layers {layers}, width {width}, batch {N}, {image}x{image}, float64: "
          f"{net.n_convolutions()} convolutions, {len(net.G.graphs)} graphs on {net.engines()}")
    worst = 0.0
    for name in ("conv1.weight", "layer1.0.conv2.weight", "layer4.0.downsample.0.weight",
                 "layer3.0.bn2.weight", "layer2.0.bn3.bias", "fc.weight", "fc.bias"):
        v = rng.standard_normal(p[name].shape)
        w = net.weights[name]
        # h small: batchnorm over a batch of 2 is strongly curved
        worst = max(worst, directional_check(name, w, net.grads[name], v,
                                             lambda: float(np.sum(net.forward(x) * dl)), 1e-7, 30))
    net.close()
    ok = worst < 1e-5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
