"""Convolution: forward, backward data and backward filter (weight gradient)."""
from __future__ import annotations

import numpy as np

from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas.catalog import FB_NAMES

from ..kernels import conv as kconv
from ..signature import BOOL, FLOATS, STRIDED, SignatureKey, dtype_name
from ._base import (F8, NodeBuilder, NodePlan, Unsupported, _dims, _f8_outs, _float_compute, _need,
                    _np_compute, load, store)


# INT8 x INT8 convolution (every direction), INT32 accumulation: outputs INT8 (round to
# nearest even + saturate), INT32 or FLOAT.
INT8_OUTS = ("INT8", "INT32", "FLOAT")


def _store(env, t, r):
    """Store a convolution result; exact int64 sums go through float64 (exact below 2**53) so
    that an integer output saturates the way dtypes.encode rounds integers."""
    store(env, t, r.astype(np.float64) if r.dtype.kind == "i" else r)


class _ConvBase(NodeBuilder):
    @classmethod
    def supported_keys(cls):
        a, b, o = cls.KEY_ROLES
        for t in FLOATS:
            outs = tuple(sorted({t, "FLOAT"}))
            for ot in outs:
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, ((a, t), (b, t), (o, ot)), c, STRIDED)
        for t in F8:
            for ot in _f8_outs(t):
                yield SignatureKey(cls.KIND, ((a, t), (b, t), (o, ot)), "FLOAT", STRIDED)
        for ot in INT8_OUTS:
            yield SignatureKey(cls.KIND, ((a, "INT8"), (b, "INT8"), (o, ot)), "INT32", STRIDED)

    @classmethod
    def compute_name(cls, node, types):
        """INT8 data with the compute type left UNSET accumulates in INT32."""
        if dtype_name(node.compute_dtype) == BOOL and "INT8" in types:
            return "INT32"
        return super().compute_name(node, types)

    def compute(self, node, t):
        """numpy accumulation dtype for data type ``t``: int64 (exact) for INT32 compute."""
        c = self.compute_name(node, [t])
        return np.int64 if c == "INT32" else _np_compute(c)

    def params(self, node, nsp):
        a = node.attrs
        p = {}
        for f, default in (("pre_padding", 0), ("post_padding", 0), ("stride", 1), ("dilation", 1)):
            v = a.get(f)
            v = [default] * nsp if v is None else list(v)
            _need(len(v) == nsp, f"{self.KIND}: {f} has {len(v)} entries for {nsp} spatial dims")
            p[f] = tuple(int(e) for e in v)
        _need(all(e >= 0 for e in p["pre_padding"] + p["post_padding"]), "negative padding")
        _need(all(e >= 1 for e in p["stride"] + p["dilation"]), "stride/dilation < 1")
        mode = FB_NAMES["ConvMode"].get(a.get("conv_mode"))
        _need(mode in ("CONVOLUTION", "CROSS_CORRELATION"), f"{self.KIND}: conv_mode {mode}")
        p["conv_mode"] = mode
        return p

    def shapes(self, ts):
        raise NotImplementedError

    def signature(self, node, graph):
        ts = self.tensors(node, graph)
        xs, ws, ys = self.shapes(ts)
        _need(3 <= len(xs) <= 5 and len(ws) == len(xs) and len(ys) == len(xs), "conv ranks")
        p = self.params(node, len(xs) - 2)
        try:
            exp = kconv.conv_output_shape(xs, ws, p["pre_padding"], p["post_padding"],
                                          p["stride"], p["dilation"])
            kconv._groups(xs[1], ws[0], ws[1])
        except ValueError as e:
            raise Unsupported(str(e)) from None
        _need(tuple(exp) == tuple(ys), f"{self.KIND}: output shape {ys} != expected {exp}")
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in self.KEY_ROLES])


class ConvFwdBuilder(_ConvBase):
    OP = catalog.by_table("ConvolutionFwdAttributes")

    def shapes(self, ts):
        return _dims(ts["x"]), _dims(ts["w"]), _dims(ts["y"])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        p = self.params(node, len(ts["x"].dims) - 2)
        cdt = self.compute(node, dtype_name(ts["x"].dtype))
        x, w, y = ts["x"], ts["w"], ts["y"]

        def fn(env):
            r = kconv.conv_fwd(load(env, x), load(env, w), p["pre_padding"], p["post_padding"],
                               p["stride"], p["dilation"], p["conv_mode"], compute_dtype=cdt)
            _store(env, y, r)
        return NodePlan(node, [x.uid, w.uid], [y.uid], fn)


class ConvBwdDataBuilder(_ConvBase):
    OP = catalog.by_table("ConvolutionBwdAttributes")

    def shapes(self, ts):
        return _dims(ts["dx"]), _dims(ts["w"]), _dims(ts["dy"])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        p = self.params(node, len(ts["dx"].dims) - 2)
        cdt = self.compute(node, dtype_name(ts["dy"].dtype))
        dy, w, dx = ts["dy"], ts["w"], ts["dx"]
        xs = _dims(dx)

        def fn(env):
            r = kconv.conv_bwd_data(load(env, dy), load(env, w), xs, p["pre_padding"],
                                    p["post_padding"], p["stride"], p["dilation"], p["conv_mode"],
                                    compute_dtype=cdt)
            _store(env, dx, r)
        return NodePlan(node, [dy.uid, w.uid], [dx.uid], fn)


class ConvBwdFilterBuilder(_ConvBase):
    OP = catalog.by_table("ConvolutionWrwAttributes")

    def shapes(self, ts):
        return _dims(ts["x"]), _dims(ts["dw"]), _dims(ts["dy"])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        p = self.params(node, len(ts["x"].dims) - 2)
        cdt = self.compute(node, dtype_name(ts["x"].dtype))
        x, dy, dw = ts["x"], ts["dy"], ts["dw"]
        ws = _dims(dw)

        def fn(env):
            r = kconv.conv_bwd_filter(load(env, x), load(env, dy), ws, p["pre_padding"],
                                      p["post_padding"], p["stride"], p["dilation"],
                                      p["conv_mode"], compute_dtype=cdt)
            _store(env, dw, r)
        return NodePlan(node, [x.uid, dy.uid], [dw.uid], fn)


BUILDERS = [ConvFwdBuilder, ConvBwdDataBuilder, ConvBwdFilterBuilder]
