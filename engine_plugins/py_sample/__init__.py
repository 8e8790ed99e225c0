"""py_sample: a Python engine plugin built on hipdnn_cabi.plugin_sdk.

One engine, HIPDNN_CABI_PY_SAMPLE_ENGINE: a single float32 pointwise node (ADD, MUL — with numpy
broadcasting of the inputs — or RELU_FWD) on host-accessible memory, vectorised with numpy views
built straight from the device-buffer pointers.  No workspace, no knobs; execution contexts are
serialized by the SDK (REDERIVE payload, behaviour note 4).

Load it in-process (hipdnn_cabi.plugin_sdk.loader.load_python_plugin) or export it as a
standalone shared library:  hipdnn-cabi export-plugin engine_plugins/py_sample -o libpy_sample.so
"""
from __future__ import annotations

import numpy as np

from hipdnn_cabi._generated.enums import PointwiseMode
from hipdnn_cabi.plugin_sdk import (EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase)
from hipdnn_cabi.schemas._generated.DataType import DataType

ENGINE_NAME = "HIPDNN_CABI_PY_SAMPLE_ENGINE"
ADD = int(PointwiseMode.HIPDNN_POINTWISE_ADD)
MUL = int(PointwiseMode.HIPDNN_POINTWISE_MUL)
RELU_FWD = int(PointwiseMode.HIPDNN_POINTWISE_RELU_FWD)
BINARY = {ADD: np.add, MUL: np.multiply}
FLOAT = DataType.FLOAT


def _program(graph):
    """(mode, input uids, output uid) or None when the graph is not for this engine."""
    if len(graph.nodes) != 1:
        return None
    n = graph.nodes[0]
    if n.kind != "PointwiseAttributes":
        return None
    a = n.attrs
    mode = a.get("operation")
    if mode in BINARY:
        ins = (a.get("in_0_tensor_uid"), a.get("in_1_tensor_uid"))
    elif mode == RELU_FWD:
        if a.get("relu_lower_clip") not in (None, 0.0) or a.get("relu_upper_clip") is not None \
                or a.get("relu_lower_clip_slope") not in (None, 0.0):
            return None
        ins = (a.get("in_0_tensor_uid"),)
    else:
        return None
    out = a.get("out_0_tensor_uid")
    uids = ins + (out,)
    if any(u is None or u not in graph.tensors for u in uids):
        return None
    ts = [graph.tensors[u] for u in uids]
    if any(t.dtype != FLOAT or t.virtual or t.by_value or len(t.dims) != len(t.strides)
           for t in ts):
        return None
    try:
        if tuple(np.broadcast_shapes(*[tuple(t.dims) for t in ts[:-1]])) != tuple(ts[-1].dims):
            return None
    except ValueError:
        return None
    return mode, ins, out


class PointwisePlan(PlanBase):
    def __init__(self, graph, mode, ins, out):
        self.mode = mode
        self.ins = [graph.tensors[u] for u in ins]
        self.out = graph.tensors[out]

    def get_workspace_size(self, handle) -> int:
        return 0

    def execute(self, handle, buffers, workspace):
        xs = [buffers.view(t, np.float32) for t in self.ins]
        y = buffers.view(self.out, np.float32)
        if self.mode == RELU_FWD:
            np.maximum(xs[0], np.float32(0), out=y)
        else:
            BINARY[self.mode](xs[0], xs[1], out=y)


class PointwisePlanBuilder(PlanBuilderBase):
    def is_applicable(self, handle, graph) -> bool:
        return _program(graph) is not None

    def get_max_workspace_size(self, handle, graph, config) -> int:
        return 0

    def build_plan(self, handle, graph, config):
        mode, ins, out = _program(graph)
        return PointwisePlan(graph, mode, ins, out)


class PySampleEngine(EngineBase):
    name = ENGINE_NAME
    plan_builder = PointwisePlanBuilder()


class PySamplePlugin(EnginePluginBase):
    name = "hipdnn_cabi_py_sample"
    version = "0.1.0"
    api_version = "1.0.0"
    engines = [PySampleEngine]


hipdnn_plugin = PySamplePlugin
