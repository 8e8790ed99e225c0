"""Layer normalization and RMS normalization, forward and backward."""
from __future__ import annotations

import numpy as np

from hipdnn_cabi.schemas import catalog

from ..kernels import norms as knorm
from ._base import NodePlan, Unsupported, _NormBase, _dims, _need, _scalar_value, load, store


class _LnBase(_NormBase):
    def signature(self, node, graph):
        ts = self.tensors(node, graph)
        x = ts["x"]
        for r in self.KEY_ROLES[1:]:
            _need(_dims(ts[r]) == _dims(x), f"{self.KIND}: {r} shape differs from x")
        k = node.attrs.get("normalized_dim_count")
        _need(k is None or 0 <= int(k) <= len(x.dims), "normalized_dim_count out of range")
        for r in self.PARAMS:
            if r in ts:
                _need(len(ts[r].dims) == len(x.dims), f"{self.KIND}: {r} rank differs from x")
                try:
                    np.broadcast_shapes(_dims(ts[r]), _dims(x))
                except ValueError:
                    raise Unsupported(f"{self.KIND}: {r} does not broadcast to x") from None
        return self.common_key(node, graph, ts)

    @staticmethod
    def ndc(node):
        k = node.attrs.get("normalized_dim_count")
        return int(k) if k else None


class LayernormFwdBuilder(_LnBase):
    OP = catalog.by_table("LayernormAttributes")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        ndc = self.ndc(node)
        stats = _dims(ts["mean"]) if "mean" in ts else (
            _dims(ts["inv_variance"]) if "inv_variance" in ts else None)

        def fn(env):
            r = knorm.layernorm_fwd(load(env, ts["x"]), load(env, ts["scale"]),
                                    load(env, ts["bias"]), _scalar_value(env, ts["epsilon"]),
                                    ndc, stats)
            store(env, ts["y"], r.y)
            for role, v in (("mean", r.mean), ("inv_variance", r.inv_variance)):
                if role in ts:
                    store(env, ts[role], v.reshape(_dims(ts[role])))
        return NodePlan(node, *self.io_uids(node, graph), fn)


class LayernormBwdBuilder(_LnBase):
    OP = catalog.by_table("LayernormBackwardAttributes")

    def signature(self, node, graph):
        k = super().signature(node, graph)
        ts = self.tensors(node, graph)
        _need("inv_variance" in ts or "epsilon" in ts, "layernorm backward needs inv_variance or epsilon")
        return k

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        ndc = self.ndc(node)

        def fn(env):
            g = lambda r: load(env, ts[r]) if r in ts else None  # noqa: E731
            eps = _scalar_value(env, ts["epsilon"]) if "epsilon" in ts else None
            r = knorm.layernorm_bwd(load(env, ts["dy"]), load(env, ts["x"]), g("scale"), g("mean"),
                                    g("inv_variance"), eps, ndc, _dims(ts["dbias"]))
            store(env, ts["dx"], r.dx)
            store(env, ts["dscale"], r.dscale)
            store(env, ts["dbias"], r.dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class RmsnormFwdBuilder(_LnBase):
    OP = catalog.by_table("RMSNormAttributes")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        stats = _dims(ts["inv_rms"]) if "inv_rms" in ts else None

        def fn(env):
            r = knorm.rmsnorm_fwd(load(env, ts["x"]), load(env, ts["scale"]),
                                  _scalar_value(env, ts["epsilon"]),
                                  load(env, ts["bias"]) if "bias" in ts else None, None, stats)
            store(env, ts["y"], r.y)
            if "inv_rms" in ts:
                store(env, ts["inv_rms"], r.inv_rms.reshape(_dims(ts["inv_rms"])))
        return NodePlan(node, *self.io_uids(node, graph), fn)


class RmsnormBwdBuilder(_LnBase):
    OP = catalog.by_table("RMSNormBackwardAttributes")

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        def fn(env):
            r = knorm.rmsnorm_bwd(load(env, ts["dy"]), load(env, ts["x"]), load(env, ts["scale"]),
                                  load(env, ts["inv_rms"]), None,
                                  _dims(ts["dbias"]) if "dbias" in ts else None)
            store(env, ts["dx"], r.dx)
            store(env, ts["dscale"], r.dscale)
            if "dbias" in ts:
                store(env, ts["dbias"], r.dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


BUILDERS = [LayernormFwdBuilder, LayernormBwdBuilder, RmsnormFwdBuilder, RmsnormBwdBuilder]
