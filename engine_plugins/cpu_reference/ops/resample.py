"""Resample (pooling): forward (max / average, optional index tensor) and backward.

Structural problems (ranks, shapes, parameters, a window larger than the padded input) make
the node - and so the engine - not applicable.  The choices are in docs/operations.md
("Execution semantics").
"""
from __future__ import annotations

from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas.catalog import FB_NAMES

from ..kernels import resample as krs
from ..signature import FLOATS, STRIDED, SignatureKey, dtype_name
from ._base import (NodeBuilder, NodePlan, Unsupported, _dims, _float_compute, _need, _np_compute,
                    load, store)

ABSENT = "ABSENT"


def _vec(node, key, n, default=None):
    v = node.attrs.get(key)
    if v is None:
        _need(default is not None, f"{key} not set")
        return (default,) * n
    v = tuple(int(e) for e in v)
    _need(len(v) == n, f"{key} has {len(v)} entries for {n} spatial dims")
    return v


class _ResampleBase(NodeBuilder):
    TYPES = FLOATS + ("INT32", "INT64")

    def params(self, node, nsp):
        mode = FB_NAMES["ResampleMode"].get(node.attrs.get("resample_mode"))
        _need(mode in (krs.MAXPOOL, krs.AVG_EXCLUDE, krs.AVG_INCLUDE),
              f"{self.KIND}: resample mode {mode} is not supported")
        pm = FB_NAMES["PaddingMode"].get(node.attrs.get("padding_mode") or 0, "PADDING_NOT_SET")
        p = dict(mode=mode, padding_mode=pm,
                 window=_vec(node, "window", nsp), stride=_vec(node, "stride", nsp, 1),
                 pre=_vec(node, "pre_padding", nsp, 0), post=_vec(node, "post_padding", nsp, 0))
        _need(all(w >= 1 for w in p["window"]), "window dims must be >= 1")
        _need(all(s >= 1 for s in p["stride"]), "strides must be >= 1")
        _need(all(e >= 0 for e in p["pre"] + p["post"]), "negative padding")
        return p

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        src, dst = self.KEY_ROLES
        a, o = ts[src], ts[dst]
        small, big = (o, a) if src == "x" else (a, o)   # (y-like, x-like)
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
        for r in self.KEY_ROLES:
            _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} must be a float type")
        return ts, p

    def signature(self, node, graph):
        ts, _ = self.check(node, graph)
        idx = ts.get("index")
        dts = [(r, dtype_name(ts[r].dtype)) for r in self.KEY_ROLES]
        dts.append(("index", dtype_name(idx.dtype) if idx is not None else ABSENT))
        return self.key(node, graph, ts, dts)

    @classmethod
    def supported_keys(cls):
        src, dst = cls.KEY_ROLES
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for it in (ABSENT, "INT32", "INT64"):
                    for c in _float_compute(t):
                        yield SignatureKey(cls.KIND, ((src, t), (dst, o), ("index", it)), c,
                                           STRIDED)


class ResampleFwdBuilder(_ResampleBase):
    OP = catalog.by_table("ResampleFwdAttributes")

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
    OP = catalog.by_table("ResampleBwdAttributes")

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


BUILDERS = [ResampleFwdBuilder, ResampleBwdBuilder]
