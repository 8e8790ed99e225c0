"""Python engine plugins for hipdnn-cabi, callable through the same C plugin API as a .so plugin.

    from hipdnn_cabi.plugin_sdk import (EnginePluginBase, EngineBase, PlanBuilderBase, PlanBase,
                                        PluginError)

See docs/plugin_sdk.md.
"""
from .core import (DeviceBuffers, EngineBase, EngineManager, EnginePluginBase,
                   EnginePluginContainer, ExecutionContext, PlanBase, PlanBuilderBase,
                   PluginHandle, engine_id_of)
from .errors import PluginError
from .knobs import GLOBAL_KNOBS, BenchmarkingPlan, KnobSpec
from .heuristics import HeuristicPluginBase
from .serialization import Scalar, ScalarTable
from .graph import EngineConfigInfo, Node, OpGraph, Tensor, build_engine_details, \
    parse_engine_config, parse_graph

__all__ = ["DeviceBuffers", "EngineBase", "EngineManager", "EnginePluginBase",
           "EnginePluginContainer", "ExecutionContext", "PlanBase", "PlanBuilderBase", "PluginHandle",
           "engine_id_of", "PluginError", "EngineConfigInfo", "Node", "OpGraph", "Tensor",
           "build_engine_details", "parse_engine_config", "parse_graph", "Scalar", "ScalarTable",
           "HeuristicPluginBase", "GLOBAL_KNOBS", "BenchmarkingPlan", "KnobSpec"]
