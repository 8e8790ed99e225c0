"""A Python engine plugin for the frontend tests: ``HIPDNN_CABI_FE_TEST_GPU_ENGINE``.

It stands in for a GPU engine on a CPU-only machine (the frontend classifies it as a "device"
engine by name; it really dereferences host memory): one float32 pointwise node (ADD, MUL,
RELU_FWD; py_sample's program), with knobs:

* ``FE_TEST_OFFSET`` (double, default 0.0, range [-10, 10]): added to the output, so a knob
  choice made through ``create_execution_plan_ext`` is visible in the numbers;
* ``FE_TEST_TILE`` (int, default 4, range [1, 64], step 1);
* ``FE_TEST_ALGO`` (string, default "direct", valid "direct" / "tiled", max length 16).

Loaded from a plugin directory (``HIPDNN_PLUGIN_DIR=tests/frontend/plugins``) in a child process.
"""
from __future__ import annotations

import os
import sys

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from engine_plugins.py_sample import PointwisePlan, PointwisePlanBuilder, _program  # noqa: E402
from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase  # noqa: E402
from hipdnn_cabi.schemas._generated import (FloatConstraint, FloatValue, IntConstraint,  # noqa: E402
                                            IntValue, Knob, StringConstraint, StringValue)

ENGINE_NAME = "HIPDNN_CABI_FE_TEST_GPU_ENGINE"
INT, FLOAT, STRING = 1, 2, 3


def _value(v):
    """A KnobSetting value as the SDK decodes it (nested union/table dicts) -> the scalar."""
    while isinstance(v, dict) and v:
        v = v["value"] if "value" in v else next(iter(v.values()))
    return v


class Plan(PointwisePlan):
    def __init__(self, graph, mode, ins, out, offset):
        super().__init__(graph, mode, ins, out)
        self.offset = np.float32(offset)

    def execute(self, handle, buffers, workspace):
        super().execute(handle, buffers, workspace)
        if self.offset:
            buffers.view(self.out, np.float32)[...] += self.offset


class Builder(PointwisePlanBuilder):
    def build_plan(self, handle, graph, config):
        knobs = getattr(config, "knobs", None) or {}
        off = _value(knobs.get("FE_TEST_OFFSET", 0.0)) or 0.0
        return Plan(graph, *_program(graph), float(off))


def _knob(b, kid, desc, kind, default, constraint=None):
    if kind == INT:
        IntValue.Start(b); IntValue.AddValue(b, int(default)); dv = IntValue.End(b)
    elif kind == FLOAT:
        FloatValue.Start(b); FloatValue.AddValue(b, float(default)); dv = FloatValue.End(b)
    else:
        s = b.CreateString(default)
        StringValue.Start(b); StringValue.AddValue(b, s); dv = StringValue.End(b)
    con = constraint(b) if constraint else None
    kid_o, desc_o = b.CreateString(kid), b.CreateString(desc)
    Knob.Start(b)
    Knob.AddKnobId(b, kid_o)
    Knob.AddDescription(b, desc_o)
    Knob.AddDefaultValueType(b, kind)
    Knob.AddDefaultValue(b, dv)
    if con is not None:
        Knob.AddConstraintType(b, kind)
        Knob.AddConstraint(b, con)
    return Knob.End(b)


def _float_range(lo, hi):
    def build(b):
        FloatConstraint.Start(b); FloatConstraint.AddMinValue(b, lo); FloatConstraint.AddMaxValue(b, hi)
        return FloatConstraint.End(b)
    return build


def _int_range(lo, hi, step):
    def build(b):
        IntConstraint.Start(b); IntConstraint.AddMinValue(b, lo); IntConstraint.AddMaxValue(b, hi)
        IntConstraint.AddStep(b, step)
        return IntConstraint.End(b)
    return build


def _strings(values, max_len):
    def build(b):
        offs = [b.CreateString(v) for v in values]
        StringConstraint.StartValidValuesVector(b, len(offs))
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        vv = b.EndVector()
        StringConstraint.Start(b); StringConstraint.AddMaxLength(b, max_len)
        StringConstraint.AddValidValues(b, vv)
        return StringConstraint.End(b)
    return build


class FeTestGpuEngine(EngineBase):
    name = ENGINE_NAME
    plan_builder = Builder()

    def knobs(self, b):
        return [_knob(b, "FE_TEST_OFFSET", "added to the output", FLOAT, 0.0, _float_range(-10.0, 10.0)),
                _knob(b, "FE_TEST_TILE", "tile size", INT, 4, _int_range(1, 64, 1)),
                _knob(b, "FE_TEST_ALGO", "algorithm", STRING, "direct", _strings(["direct", "tiled"], 16))]


class FeTestPlugin(EnginePluginBase):
    name = "hipdnn_cabi_fe_test_gpu"
    version = "0.1.0"
    api_version = "1.0.0"
    engines = [FeTestGpuEngine]


hipdnn_plugin = FeTestPlugin
