"""Matmul: batched, broadcasting ``c = a @ b``."""
from __future__ import annotations

import numpy as np

from hipdnn_cabi.schemas import catalog

from ..kernels import matmul as kmm
from ..signature import FLOATS, STRIDED, SignatureKey, dtype_name
from ._base import (F8, NodeBuilder, NodePlan, Unsupported, _dims, _f8_outs, _float_compute, _need,
                    _np_compute, load, store)


def _strip1(shape):
    """shape without leading size-1 dims (kept: the last two)."""
    shape = tuple(int(d) for d in shape)
    i = 0
    while i < len(shape) - 2 and shape[i] == 1:
        i += 1
    return shape[i:]


class MatmulBuilder(NodeBuilder):
    OP = catalog.by_table("MatmulAttributes")

    @classmethod
    def supported_keys(cls):
        ra, rb, rc = cls.KEY_ROLES
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, ((ra, t), (rb, t), (rc, o)), c, STRIDED)
        for t in F8:
            for o in _f8_outs(t):
                yield SignatureKey(cls.KIND, ((ra, t), (rb, t), (rc, o)), "FLOAT", STRIDED)
        for o in ("INT32", "FLOAT", "INT8"):      # INT8: the exact sum saturated
            for c in ("INT32", "FLOAT"):
                yield SignatureKey(cls.KIND, ((ra, "INT8"), (rb, "INT8"), (rc, o)), c, STRIDED)

    def signature(self, node, graph):
        ts = self.tensors(node, graph)
        try:
            shape = kmm.matmul_output_shape(_dims(ts["a"]), _dims(ts["b"]))
        except ValueError as e:
            raise Unsupported(str(e)) from None
        cs = _dims(ts["c"])
        _need(_strip1(cs) == _strip1(shape), f"matmul output {cs} does not hold {tuple(shape)}")
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in self.KEY_ROLES])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        a, b, c = ts["a"], ts["b"], ts["c"]
        ints = dtype_name(a.dtype) == "INT8"
        cdt = np.float64 if ints else _np_compute(self.compute_name(node, [dtype_name(a.dtype)]))
        cs = _dims(c)

        def fn(env):
            r = kmm.matmul(load(env, a), load(env, b), compute_dtype=cdt)
            store(env, c, r.reshape(cs))
        return NodePlan(node, [a.uid, b.uid], [c.uid], fn)


BUILDERS = [MatmulBuilder]
