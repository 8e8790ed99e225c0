"""Node plan builders for resample (pooling), block-scale quantize / dequantize and MoE grouped
matmul (forward and weight gradient).  Wired into :data:`.nodes.BUILDERS`; the numerics are in
:mod:`.kernels.resample`, :mod:`.kernels.block_scale` and :mod:`.kernels.moe`, the choices in
docs/operations.md ("Execution semantics").

Structural problems (ranks, shapes, parameters, a window larger than the padded input, a block
size that does not divide its axis) make the node - and so the engine - not applicable.  Data
dependent problems (MoE offsets out of range or decreasing, routed rows out of range) are found
at execute and returned as INVALID_VALUE with a message naming the entry.
"""
from __future__ import annotations

import itertools

from hipdnn_cabi.plugin_sdk.errors import INVALID_VALUE, PluginError
from hipdnn_cabi.schemas._generated.schema_table import ENUMS

from ..kernels import block_scale as kbs
from ..kernels import moe as kmoe
from ..kernels import resample as krs
from ._base import NodeBuilder, NodePlan, Unsupported, _dims, _need, _np_compute, load, store
from ..signature import FLOATS, STRIDED, SignatureKey, dtype_name

_E = {e: {v: n for n, v in ENUMS[e][1]} for e in
      ("ResampleMode", "PaddingMode", "MoeGroupedMatmulMode")}

MINI_ELEM = ("FP8_E4M3", "FP8_E5M2", "FP8_E4M3_FNUZ", "FP8_E5M2_FNUZ", "FP4_E2M1", "FP6_E2M3",
             "FP6_E3M2")
Q_INTS = ("INT8", "UINT8", "INT32")
Q_ELEM = MINI_ELEM + Q_INTS + ("HALF", "BFLOAT16", "FLOAT")
SCALE_TYPES = ("FLOAT", "HALF", "BFLOAT16", "FP8_E8M0", "FP8_E4M3")
IO16 = ("FLOAT", "HALF", "BFLOAT16")
ABSENT = "ABSENT"


def _comp(io):
    return ("DOUBLE", "FLOAT") if io == "DOUBLE" else ("FLOAT",)


def _vec(node, key, n, default=None):
    v = node.attrs.get(key)
    if v is None:
        _need(default is not None, f"{key} not set")
        return (default,) * n
    v = tuple(int(e) for e in v)
    _need(len(v) == n, f"{key} has {len(v)} entries for {n} spatial dims")
    return v


# =========================================================================== resample
class _ResampleBase(NodeBuilder):
    TYPES = FLOATS + ("INT32", "INT64")
    DATA = ()       # (input role, output role)

    def params(self, node, nsp):
        mode = _E["ResampleMode"].get(node.attrs.get("resample_mode"))
        _need(mode in (krs.MAXPOOL, krs.AVG_EXCLUDE, krs.AVG_INCLUDE),
              f"{self.KIND}: resample mode {mode} is not supported")
        pm = _E["PaddingMode"].get(node.attrs.get("padding_mode") or 0, "PADDING_NOT_SET")
        p = dict(mode=mode, padding_mode=pm,
                 window=_vec(node, "window", nsp), stride=_vec(node, "stride", nsp, 1),
                 pre=_vec(node, "pre_padding", nsp, 0), post=_vec(node, "post_padding", nsp, 0))
        _need(all(w >= 1 for w in p["window"]), "window dims must be >= 1")
        _need(all(s >= 1 for s in p["stride"]), "strides must be >= 1")
        _need(all(e >= 0 for e in p["pre"] + p["post"]), "negative padding")
        return p

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        a, o = ts[self.DATA[0]], ts[self.DATA[1]]
        small, big = (o, a) if self.DATA[0] == "x" else (a, o)   # (y-like, x-like)
        _need(4 <= len(big.dims) <= 5 and len(small.dims) == len(big.dims),
              f"{self.KIND}: tensors must be 4-D or 5-D of one rank")
        p = self.params(node, len(big.dims) - 2)
        try:
            exp = krs.output_shape(_dims(big), p["window"], p["stride"], p["pre"], p["post"])
        except ValueError as e:
            raise Unsupported(f"{self.KIND}: {e}") from None
        _need(exp == _dims(small), f"{self.KIND}: pooled shape {_dims(small)} != expected {exp}")
        idx = ts.get("index")
        if idx is not None:
            _need(p["mode"] == krs.MAXPOOL, f"{self.KIND}: an index tensor needs MAXPOOL")
            _need(_dims(idx) == _dims(small), f"{self.KIND}: index shape must be the pooled shape")
            _need(dtype_name(idx.dtype) in ("INT32", "INT64"), "index must be INT32 or INT64")
        for r in self.DATA:
            _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} must be a float type")
        return ts, p

    def signature(self, node, graph):
        ts, _ = self.check(node, graph)
        idx = ts.get("index")
        dts = [(r, dtype_name(ts[r].dtype)) for r in self.DATA]
        dts.append(("index", dtype_name(idx.dtype) if idx is not None else ABSENT))
        return self.key(node, graph, ts, dts)

    @classmethod
    def supported_keys(cls):
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for it in (ABSENT, "INT32", "INT64"):
                    for c in _comp(t):
                        yield SignatureKey(cls.KIND, ((cls.DATA[0], t), (cls.DATA[1], o),
                                                      ("index", it)), c, STRIDED)


class ResampleFwdBuilder(_ResampleBase):
    KIND = "ResampleFwdAttributes"
    INPUTS, OUTPUTS, OPTIONAL = ("x",), ("y", "index"), frozenset({"index"})
    DATA = ("x", "y")

    def signature(self, node, graph):
        k = super().signature(node, graph)
        ts = self.tensors(node, graph)
        if node.attrs.get("generate_index"):
            _need("index" in ts, f"{self.KIND}: generate_index is set but no index tensor")
        return k

    def build(self, node, graph):
        ts, p = self.check(node, graph)
        x, y, idx = ts["x"], ts["y"], ts.get("index")
        cdt = _np_compute(self.compute_name(node, [dtype_name(x.dtype)]))
        ys = _dims(y)

        def fn(env):
            r, index = krs.forward(load(env, x), ys, p["window"], p["stride"], p["pre"],
                                   p["mode"], p["padding_mode"], compute_dtype=cdt)
            store(env, y, r)
            if idx is not None:
                store(env, idx, index)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class ResampleBwdBuilder(_ResampleBase):
    KIND = "ResampleBwdAttributes"
    INPUTS, OUTPUTS, OPTIONAL = ("dy", "index"), ("dx",), frozenset({"index"})
    DATA = ("dy", "dx")

    def check(self, node, graph):
        ts, p = super().check(node, graph)
        _need(p["mode"] != krs.MAXPOOL or "index" in ts,
              f"{self.KIND}: max-pooling backward needs the forward's index tensor")
        _need(_dims(ts["dy"])[:2] == _dims(ts["dx"])[:2], f"{self.KIND}: N and C must match")
        return ts, p

    def build(self, node, graph):
        ts, p = self.check(node, graph)
        dy, dx, idx = ts["dy"], ts["dx"], ts.get("index")
        cdt = _np_compute(self.compute_name(node, [dtype_name(dy.dtype)]))
        xs = _dims(dx)

        def fn(env):
            r = krs.backward(load(env, dy), xs, p["window"], p["stride"], p["pre"], p["mode"],
                             index=load(env, idx) if idx is not None else None,
                             compute_dtype=cdt)
            store(env, dx, r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


# =========================================================================== block scale
class BlockScaleQuantizeBuilder(NodeBuilder):
    KIND = "BlockScaleQuantizeAttributes"
    INPUTS, OUTPUTS = ("x",), ("y", "scale")
    TYPES = IO16 + Q_ELEM + SCALE_TYPES

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        x, y, s = ts["x"], ts["y"], ts["scale"]
        xs = _dims(x)
        _need(_dims(y) == xs, f"{self.KIND}: y must have x's dims")
        ax = node.attrs.get("axis")
        ax = len(xs) - 1 if ax is None else int(ax)
        _need(0 <= ax < len(xs), f"{self.KIND}: axis {ax} out of range for rank {len(xs)}")
        bs = int(node.attrs.get("block_size") or 0)
        _need(bs > 0, f"{self.KIND}: block_size must be positive")
        _need(xs[ax] % bs == 0, f"{self.KIND}: block_size {bs} does not divide dim {ax} "
                                f"({xs[ax]})")
        exp = tuple(d // bs if i == ax else d for i, d in enumerate(xs))
        _need(_dims(s) == exp, f"{self.KIND}: scale dims {_dims(s)} != expected {exp}")
        return ts, ax, bs

    def signature(self, node, graph):
        ts, _, _ = self.check(node, graph)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in ("x", "y", "scale")])

    @classmethod
    def supported_keys(cls):
        for x, y, s in itertools.product(IO16, Q_ELEM, SCALE_TYPES):
            for c in ("FLOAT", "DOUBLE"):
                yield SignatureKey(cls.KIND, (("x", x), ("y", y), ("scale", s)), c, STRIDED)

    def build(self, node, graph):
        ts, ax, bs = self.check(node, graph)
        x, y, s = ts["x"], ts["y"], ts["scale"]
        yt, st = dtype_name(y.dtype), dtype_name(s.dtype)
        cdt = _np_compute(self.compute_name(node, [dtype_name(x.dtype)]))

        def fn(env):
            q, sc = kbs.quantize(load(env, x), bs, ax, yt, st, compute_dtype=cdt)
            store(env, y, q)
            store(env, s, sc)
        return NodePlan(node, [x.uid], [y.uid, s.uid], fn)


class BlockScaleDequantizeBuilder(NodeBuilder):
    KIND = "BlockScaleDequantizeAttributes"
    INPUTS, OUTPUTS = ("x", "scale"), ("y",)
    TYPES = IO16 + Q_ELEM + SCALE_TYPES

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        x, y, s = ts["x"], ts["y"], ts["scale"]
        xs = _dims(x)
        _need(_dims(y) == xs, f"{self.KIND}: y must have x's dims")
        bsv = node.attrs.get("block_size")
        _need(bsv is not None and 1 <= len(bsv) <= len(xs),
              f"{self.KIND}: block_size needs 1..rank entries")
        bsv = [int(b) for b in bsv]
        _need(all(b > 0 for b in bsv), f"{self.KIND}: block sizes must be positive")
        full = [1] * (len(xs) - len(bsv)) + bsv
        for i, (d, b) in enumerate(zip(xs, full)):
            _need(d % b == 0, f"{self.KIND}: block size {b} does not divide dim {i} ({d})")
        exp = tuple(d // b for d, b in zip(xs, full))
        _need(_dims(s) == exp, f"{self.KIND}: scale dims {_dims(s)} != expected {exp}")
        return ts, bsv

    def signature(self, node, graph):
        ts, _ = self.check(node, graph)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in ("x", "scale", "y")])

    @classmethod
    def supported_keys(cls):
        for x, s, y in itertools.product(Q_ELEM, SCALE_TYPES, IO16):
            for c in ("FLOAT", "DOUBLE"):
                yield SignatureKey(cls.KIND, (("x", x), ("scale", s), ("y", y)), c, STRIDED)

    def build(self, node, graph):
        ts, bsv = self.check(node, graph)
        x, s, y = ts["x"], ts["scale"], ts["y"]
        neg = bool(node.attrs.get("is_negative_scale"))
        cdt = _np_compute(self.compute_name(node, ["FLOAT"]))

        def fn(env):
            store(env, y, kbs.dequantize(load(env, x), load(env, s), bsv, neg, compute_dtype=cdt))
        return NodePlan(node, [x.uid, s.uid], [y.uid], fn)


# =========================================================================== MoE grouped matmul
def _routing_error(kind, e):
    return PluginError(INVALID_VALUE, f"{kind}: {e}")


class MoeGroupedMatmulBuilder(NodeBuilder):
    KIND = "MoeGroupedMatmulAttributes"
    INPUTS = ("token", "weight", "first_token_offset", "token_index", "token_ks")
    OUTPUTS = ("output",)
    OPTIONAL = frozenset({"token_index", "token_ks"})
    TYPES = FLOATS + ("INT32",)

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        mode = _E["MoeGroupedMatmulMode"].get(node.attrs.get("mode") or 0)
        _need(mode in (kmoe.NONE, kmoe.GATHER, kmoe.SCATTER), f"{self.KIND}: mode {mode}")
        tok, w, off, out = (_dims(ts[r]) for r in ("token", "weight", "first_token_offset", "output"))
        _need(len(tok) == 3 and tok[0] == 1, f"{self.KIND}: token must be [1, tokens, K]")
        _need(len(w) == 3 and w[0] >= 1, f"{self.KIND}: weight must be [experts, K, N]")
        _need(tok[2] == w[1], f"{self.KIND}: token K {tok[2]} != weight K {w[1]}")
        _need(len(off) == 3 and off[1:] == (1, 1) and off[0] % w[0] == 0 and off[0] >= 1,
              f"{self.KIND}: first_token_offset must be [batch * experts, 1, 1]")
        for r in ("first_token_offset", "token_index", "token_ks"):
            if r in ts:
                _need(dtype_name(ts[r].dtype) == "INT32", f"{self.KIND}: {r} must be INT32")
        top_k = int(node.attrs.get("top_k") or 0)
        rows = tok[1]
        if mode in (kmoe.GATHER, kmoe.SCATTER):
            _need("token_index" in ts, f"{self.KIND}: {mode} mode needs token_index")
            ti = _dims(ts["token_index"])
            _need(len(ti) == 3 and ti[0] == 1 and ti[2] == 1,
                  f"{self.KIND}: token_index must be [1, routed rows, 1]")
            if mode == kmoe.GATHER:
                rows = ti[1]
        if mode == kmoe.SCATTER:
            _need("token_ks" in ts and _dims(ts["token_ks"]) == _dims(ts["token_index"]),
                  f"{self.KIND}: SCATTER mode needs token_ks shaped like token_index")
            _need(0 < top_k <= w[0], f"{self.KIND}: SCATTER needs 0 < top_k <= experts")
            _need(_dims(ts["token_index"])[1] == tok[1],
                  f"{self.KIND}: SCATTER routes every token row (token_index rows == token rows)")
        _need(out == (1, rows, w[2]), f"{self.KIND}: output dims {out} != {(1, rows, w[2])}")
        for r in ("token", "weight", "output"):
            _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} must be a float type")
        return ts, mode, top_k

    def signature(self, node, graph):
        ts, _, _ = self.check(node, graph)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype))
                                          for r in ("token", "weight", "output")])

    @classmethod
    def supported_keys(cls):
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for c in _comp(t):
                    yield SignatureKey(cls.KIND, (("token", t), ("weight", t), ("output", o)), c,
                                       STRIDED)

    def build(self, node, graph):
        ts, mode, top_k = self.check(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["token"].dtype)]))
        out = ts["output"]
        rows = _dims(out)[1]

        def fn(env):
            g = lambda r: load(env, ts[r]) if r in ts else None  # noqa: E731
            try:
                r = kmoe.forward(load(env, ts["token"]), load(env, ts["weight"]),
                                 g("first_token_offset"), rows, mode, g("token_index"),
                                 g("token_ks"), top_k, compute_dtype=cdt)
            except kmoe.RoutingError as e:
                raise _routing_error(self.KIND, e) from None
            store(env, out, r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class MoeGroupedMatmulBwdBuilder(NodeBuilder):
    KIND = "MoeGroupedMatmulBwdAttributes"
    INPUTS, OUTPUTS = ("doutput", "token", "first_token_offset"), ("dweight",)
    TYPES = FLOATS + ("INT32",)

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        do, tok, off, dw = (_dims(ts[r]) for r in ("doutput", "token", "first_token_offset",
                                                    "dweight"))
        _need(len(tok) == 3 and tok[0] == 1, f"{self.KIND}: token must be [1, tokens, K]")
        _need(len(do) == 3 and do[:2] == tok[:2], f"{self.KIND}: doutput must be [1, tokens, N]")
        _need(len(dw) == 3 and dw[1:] == (tok[2], do[2]) and dw[0] >= 1,
              f"{self.KIND}: dweight must be [experts, K, N]")
        _need(off == (dw[0], 1, 1), f"{self.KIND}: first_token_offset must be [experts, 1, 1]")
        _need(dtype_name(ts["first_token_offset"].dtype) == "INT32",
              f"{self.KIND}: first_token_offset must be INT32")
        for r in ("doutput", "token", "dweight"):
            _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} must be a float type")
        return ts

    def signature(self, node, graph):
        ts = self.check(node, graph)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype))
                                          for r in ("doutput", "token", "dweight")])

    @classmethod
    def supported_keys(cls):
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for c in _comp(t):
                    yield SignatureKey(cls.KIND, (("doutput", t), ("token", t), ("dweight", o)),
                                       c, STRIDED)

    def build(self, node, graph):
        ts = self.check(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["token"].dtype)]))
        dw = ts["dweight"]
        E = _dims(dw)[0]

        def fn(env):
            try:
                r = kmoe.backward_weight(load(env, ts["doutput"]), load(env, ts["token"]),
                                         load(env, ts["first_token_offset"]), E, compute_dtype=cdt)
            except kmoe.RoutingError as e:
                raise _routing_error(self.KIND, e) from None
            store(env, dw, r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


EXT_BUILDERS = [ResampleFwdBuilder, ResampleBwdBuilder, BlockScaleQuantizeBuilder,
                BlockScaleDequantizeBuilder, MoeGroupedMatmulBuilder, MoeGroupedMatmulBwdBuilder]
