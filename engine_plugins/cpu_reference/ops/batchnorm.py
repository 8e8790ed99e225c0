"""Batch normalization: inference (saved inverse variance or variance), training forward
and backward.
"""
from __future__ import annotations

from hipdnn_cabi.schemas import catalog

from ..kernels import batchnorm as kbn
from ..signature import dtype_name
from ._base import (NodePlan, Unsupported, _NormBase, _dims, _need, _per_channel_ok,
                    _scalar_value, load, store)


class _BatchnormBase(_NormBase):
    def check_channels(self, ts, xrole="x"):
        x = ts[xrole]
        _need(len(x.dims) >= 2, "batchnorm needs (N, C, ...)")
        C = int(x.dims[1])
        for r in self.PARAMS:
            if r in ts:
                _need(_per_channel_ok(ts[r], C), f"{self.KIND}: {r} must hold C={C} elements")
        return C

    def signature(self, node, graph):
        if node.attrs.get("peer_stats_tensor_uid"):
            raise Unsupported("peer statistics (multi-device batchnorm) are not supported")
        ts = self.tensors(node, graph)
        x = self.KEY_ROLES[0]
        self.check_channels(ts, x)
        for r in self.KEY_ROLES[1:]:
            _need(_dims(ts[r]) == _dims(ts[x]), f"{self.KIND}: {r} shape differs")
        self.extra_checks(ts)
        return self.common_key(node, graph, ts)

    def extra_checks(self, ts):
        pass


class BatchnormInferenceBuilder(_BatchnormBase):
    OP = catalog.by_table("BatchnormInferenceAttributes")

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        y32 = dtype_name(ts["y"].dtype) == "FLOAT"

        def fn(env):
            dst = env[ts["y"].uid] if y32 else None
            r = kbn.batchnorm_inference(load(env, ts["x"]), load(env, ts["scale"]),
                                        load(env, ts["bias"]), load(env, ts["mean"]),
                                        load(env, ts["inv_variance"]), out=dst)
            if r is not dst:
                store(env, ts["y"], r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class BatchnormInferenceVarianceBuilder(_BatchnormBase):
    OP = catalog.by_table("BatchnormInferenceAttributesVarianceExt")

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        y32 = dtype_name(ts["y"].dtype) == "FLOAT"

        def fn(env):
            dst = env[ts["y"].uid] if y32 else None
            r = kbn.batchnorm_inference_variance(
                load(env, ts["x"]), load(env, ts["scale"]), load(env, ts["bias"]),
                load(env, ts["mean"]), load(env, ts["variance"]), _scalar_value(env, ts["epsilon"]),
                out=dst)
            if r is not dst:
                store(env, ts["y"], r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class BatchnormTrainBuilder(_BatchnormBase):
    OP = catalog.by_table("BatchnormAttributes")

    def extra_checks(self, ts):
        running = [r in ts for r in ("prev_running_mean", "prev_running_variance", "momentum",
                                     "next_running_mean", "next_running_variance")]
        _need(all(running) or not any(running[3:]),
              "next running statistics need prev running mean/variance and momentum")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        run = "next_running_mean" in ts or "next_running_variance" in ts

        def fn(env):
            kw = {}
            if run:
                kw = dict(momentum=_scalar_value(env, ts["momentum"]),
                          prev_running_mean=load(env, ts["prev_running_mean"]),
                          prev_running_variance=load(env, ts["prev_running_variance"]))
            r = kbn.batchnorm_train_fwd(load(env, ts["x"]), load(env, ts["scale"]),
                                        load(env, ts["bias"]), _scalar_value(env, ts["epsilon"]),
                                        **kw)
            store(env, ts["y"], r.y)
            for role, v in (("mean", r.mean), ("inv_variance", r.inv_variance),
                            ("next_running_mean", r.next_running_mean),
                            ("next_running_variance", r.next_running_variance)):
                if role in ts:
                    store(env, ts[role], v)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class BatchnormBwdBuilder(_BatchnormBase):
    OP = catalog.by_table("BatchnormBackwardAttributes")

    def extra_checks(self, ts):
        _need("mean" in ts and "inv_variance" in ts,
              "batchnorm backward without saved mean/inv_variance needs epsilon (not in the node)")

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        def fn(env):
            r = kbn.batchnorm_bwd(load(env, ts["dy"]), load(env, ts["x"]), load(env, ts["scale"]),
                                  load(env, ts["mean"]), load(env, ts["inv_variance"]))
            store(env, ts["dx"], r.dx)
            store(env, ts["dscale"], r.dscale)
            store(env, ts["dbias"], r.dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


BUILDERS = [BatchnormInferenceBuilder, BatchnormInferenceVarianceBuilder, BatchnormTrainBuilder,
            BatchnormBwdBuilder]
