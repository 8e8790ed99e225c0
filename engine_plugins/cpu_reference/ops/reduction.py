"""Reduction: every hipDNN reduction mode, keyed per mode (``ReductionAttributes:<MODE>``)."""
from __future__ import annotations

from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas.catalog import FB_NAMES

from ..kernels import reduction as kred
from ..signature import FLOATS, STRIDED, SignatureKey, dtype_name
from ._base import (NodeBuilder, NodePlan, Unsupported, _dims, _float_compute, _np_compute, _need,
                    load, store)


class ReductionBuilder(NodeBuilder):
    OP = catalog.by_table("ReductionAttributes")

    @classmethod
    def supported_keys(cls):
        x, y = cls.KEY_ROLES
        for mode in FB_NAMES["ReductionMode"].values():
            if mode == "NOT_SET":
                continue
            for t in FLOATS:
                for o in sorted({t, "FLOAT"}):
                    for c in _float_compute(t):
                        yield SignatureKey(f"{cls.KIND}:{mode}", ((x, t), (y, o)), c, STRIDED)

    def signature(self, node, graph):
        mode = FB_NAMES["ReductionMode"].get(node.attrs.get("mode"))
        _need(mode not in (None, "NOT_SET"), "reduction mode unset/unknown")
        ts = self.tensors(node, graph)
        try:
            kred.reduced_axes(_dims(ts["in"]), _dims(ts["out"]))
        except ValueError as e:
            raise Unsupported(str(e)) from None
        k = self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in self.KEY_ROLES])
        return k._replace(op=f"{self.KIND}:{mode}")

    def build(self, node, graph):
        mode = FB_NAMES["ReductionMode"][node.attrs["mode"]]
        ts = self.tensors(node, graph)
        x, y = ts["in"], ts["out"]
        cdt = _np_compute(self.compute_name(node, [dtype_name(x.dtype)]))
        ys = _dims(y)

        def fn(env):
            store(env, y, kred.reduce(mode, load(env, x), ys, compute_dtype=cdt))
        return NodePlan(node, [x.uid], [y.uid], fn)


BUILDERS = [ReductionBuilder]
