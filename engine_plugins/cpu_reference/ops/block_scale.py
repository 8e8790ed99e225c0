"""Block-scale quantize and dequantize (microscaling: fp8 / fp6 / fp4 / int elements, one scale
per block).

Structural problems (ranks, shapes, parameters, a block size that does not divide its axis)
make the node - and so the engine - not applicable.  The choices are in docs/operations.md
("Execution semantics").
"""
from __future__ import annotations

import itertools

from hipdnn_cabi.schemas import catalog

from ..kernels import block_scale as kbs
from ..signature import STRIDED, SignatureKey, dtype_name
from ._base import NodeBuilder, NodePlan, _dims, _need, _np_compute, load, store

MINI_ELEM = ("FP8_E4M3", "FP8_E5M2", "FP8_E4M3_FNUZ", "FP8_E5M2_FNUZ", "FP4_E2M1", "FP6_E2M3",
             "FP6_E3M2")
Q_INTS = ("INT8", "UINT8", "INT32")
Q_ELEM = MINI_ELEM + Q_INTS + ("HALF", "BFLOAT16", "FLOAT")
SCALE_TYPES = ("FLOAT", "HALF", "BFLOAT16", "FP8_E8M0", "FP8_E4M3")
IO16 = ("FLOAT", "HALF", "BFLOAT16")


class BlockScaleQuantizeBuilder(NodeBuilder):
    OP = catalog.by_table("BlockScaleQuantizeAttributes")
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
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in self.KEY_ROLES])

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
    OP = catalog.by_table("BlockScaleDequantizeAttributes")
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
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in self.KEY_ROLES])

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


BUILDERS = [BlockScaleQuantizeBuilder, BlockScaleDequantizeBuilder]
