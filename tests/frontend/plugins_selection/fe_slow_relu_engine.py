"""A host-memory Python engine plugin for the frontend selection/autotune tests:
``HIPDNN_CABI_FE_TEST_SLOW_ENGINE`` runs float32 pointwise (py_sample's program) and sleeps 30 ms
per execute (knob ``fe_test.sleep_ms``, int 0..100); it reports behaviour note RUNTIME_COMPILATION.  Loaded through
``HIPDNN_PLUGIN_DIR=tests/frontend/plugins_selection`` in a child process."""
from __future__ import annotations

import os
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from engine_plugins.py_sample import PointwisePlan, PointwisePlanBuilder, _program  # noqa: E402
from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, knobs  # noqa: E402

ENGINE_NAME = "HIPDNN_CABI_FE_TEST_SLOW_ENGINE"
SLEEP = knobs.KnobSpec("fe_test.sleep_ms", knobs.INT, 30, "milliseconds slept per execute", 0, 100)


class Plan(PointwisePlan):
    sleep_ms = 30

    def execute(self, handle, buffers, workspace):
        time.sleep(self.sleep_ms / 1e3)
        super().execute(handle, buffers, workspace)


class Builder(PointwisePlanBuilder):
    def build_plan(self, handle, graph, config):
        p = Plan(graph, *_program(graph))
        p.sleep_ms = knobs.resolve(config, (SLEEP,), strict=False)[SLEEP.knob_id]
        return p


class SlowEngine(EngineBase):
    name = ENGINE_NAME
    plan_builder = Builder()
    behavior_notes = (0,)   # HIPDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION
    knob_specs = (SLEEP,)


class SlowPlugin(EnginePluginBase):
    name = "hipdnn_cabi_fe_test_slow"
    version = "0.1.0"
    api_version = "1.0.0"
    engines = [SlowEngine]


hipdnn_plugin = SlowPlugin
