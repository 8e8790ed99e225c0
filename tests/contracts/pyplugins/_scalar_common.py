"""Shared code of the contract-test Python plugins: a pointwise engine (ADD / MUL / SUB chains,
float32, numpy broadcasting) whose scalar operands go through the SDK provider contract
(``buffers.scalar(uid)``, RFC 0016 §4.6).  ``ASKED`` records, per applicability query, whether
the graph had a runtime pass-by-value tensor (the version-filtering tests read it in-process)."""
from __future__ import annotations

import json

import numpy as np

from hipdnn_cabi._generated.enums import PointwiseMode
from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase

OPS = {int(PointwiseMode.HIPDNN_POINTWISE_ADD): np.add,
       int(PointwiseMode.HIPDNN_POINTWISE_MUL): np.multiply,
       int(PointwiseMode.HIPDNN_POINTWISE_SUB): np.subtract}
ASKED: list = []


def program(graph):
    steps = []
    for n in graph.nodes:
        if n.kind != "PointwiseAttributes":
            return None
        a = n.attrs
        mode = a.get("operation")
        if mode not in OPS:
            return None
        ins = [a.get("in_0_tensor_uid"), a.get("in_1_tensor_uid")]
        out = a.get("out_0_tensor_uid")
        if any(u is None or u not in graph.tensors for u in ins + [out]):
            return None
        steps.append((mode, ins, out))
    if not steps:
        return None
    tensors = {}
    for u, t in graph.tensors.items():
        scalar = t.value is not None or t.is_runtime_pass_by_value
        if t.dtype not in (0, 1):
            return None
        tensors[u] = {"dims": list(t.dims), "strides": list(t.strides), "virtual": t.virtual,
                      "scalar": scalar}
    return {"steps": steps, "tensors": tensors}


class _T:
    def __init__(self, uid, d):
        self.uid, self.dims, self.strides = int(uid), d["dims"], d["strides"]


class ProgramPlan(PlanBase):
    own_payload = False

    def __init__(self, prog):
        self.prog = prog

    def execute(self, handle, buffers, workspace):
        env = {}
        tensors = {int(u): d for u, d in self.prog["tensors"].items()}

        def get(u):
            if u in env:
                return env[u]
            d = tensors[u]
            if d["scalar"]:
                return np.float32(buffers.scalar(u))
            return buffers.view(_T(u, d), np.float32)
        for mode, ins, out in self.prog["steps"]:
            r = OPS[mode](get(ins[0]), get(ins[1])).astype(np.float32)
            d = tensors[out]
            if d["virtual"]:
                env[out] = r
            else:
                y = buffers.view(_T(out, d), np.float32)
                y[...] = r

    def serialize_plan(self):
        return json.dumps(self.prog).encode() if self.own_payload else None


class OwnPayloadPlan(ProgramPlan):
    own_payload = True


class Builder(PlanBuilderBase):
    plan_class = ProgramPlan

    def is_applicable(self, handle, graph):
        ASKED.append(any(t.is_runtime_pass_by_value for t in graph.tensors.values()))
        return program(graph) is not None

    def build_plan(self, handle, graph, config):
        return self.plan_class(program(graph))

    def deserialize_plan(self, handle, data, config, scalars):
        prog = json.loads(data.decode())
        for u, d in prog["tensors"].items():   # the scalar table travelled in the SDK payload
            if d["scalar"] and int(u) not in scalars:
                raise ValueError(f"uid {u} missing from the restored scalar table")
        return self.plan_class(prog)


class OwnBuilder(Builder):
    plan_class = OwnPayloadPlan


def make_plugin(api_version: str, own_engine: bool = True):
    class ScalarEngine(EngineBase):
        name = "CT_SCALAR_ENGINE"
        plan_builder = Builder()

    class OwnEngine(EngineBase):
        name = "CT_SCALAR_OWN_ENGINE"
        plan_builder = OwnBuilder()

    class Plugin(EnginePluginBase):
        name = "ct_scalar_" + api_version.replace(".", "_")
        version = "1.0.0"
        engines = [ScalarEngine] + ([OwnEngine] if own_engine else [])
    Plugin.api_version = api_version
    return Plugin
