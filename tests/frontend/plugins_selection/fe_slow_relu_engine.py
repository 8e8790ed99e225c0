"""A host-memory Python engine plugin for the frontend selection/autotune tests:
``HIPDNN_CABI_FE_TEST_SLOW_ENGINE`` runs float32 pointwise (py_sample's program) and sleeps 30 ms
per execute; it reports behaviour note RUNTIME_COMPILATION.  Loaded through
``HIPDNN_PLUGIN_DIR=tests/frontend/plugins_selection`` in a child process."""
from __future__ import annotations

import os
import sys
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from engine_plugins.py_sample import BINARY, RELU_FWD, _program  # noqa: E402
from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase  # noqa: E402

ENGINE_NAME = "HIPDNN_CABI_FE_TEST_SLOW_ENGINE"


class Plan(PlanBase):
    def __init__(self, graph, mode, ins, out):
        self.mode = mode
        self.ins = [graph.tensors[u] for u in ins]
        self.out = graph.tensors[out]

    def get_workspace_size(self, handle) -> int:
        return 0

    def execute(self, handle, buffers, workspace):
        time.sleep(0.03)
        xs = [buffers.view(t, np.float32) for t in self.ins]
        y = buffers.view(self.out, np.float32)
        if self.mode == RELU_FWD:
            np.maximum(xs[0], np.float32(0), out=y)
        else:
            BINARY[self.mode](xs[0], xs[1], out=y)


class Builder(PlanBuilderBase):
    def is_applicable(self, handle, graph) -> bool:
        return _program(graph) is not None

    def get_max_workspace_size(self, handle, graph, config) -> int:
        return 0

    def build_plan(self, handle, graph, config):
        return Plan(graph, *_program(graph))


class SlowEngine(EngineBase):
    name = ENGINE_NAME
    plan_builder = Builder()
    behavior_notes = (0,)   # HIPDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION


class SlowPlugin(EnginePluginBase):
    name = "hipdnn_cabi_fe_test_slow"
    version = "0.1.0"
    api_version = "1.0.0"
    engines = [SlowEngine]


hipdnn_plugin = SlowPlugin
