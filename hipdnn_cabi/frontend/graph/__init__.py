"""``Graph``: build, compile and run hipDNN operation graphs over the backend C API.

One class assembled from one module per concern: ``core`` (construction, tensors, validation),
``ops`` (node builders), ``lowering`` (backend descriptors), ``plans`` (heuristics, engines, knobs,
plans), ``execution`` (execute) and ``serialization``.
"""
from ._types import (
                     NO_ENGINE_MSG,
                     BuildPlanPolicy,
                     EngineConfigInfo,
                     GraphNotSupportedError,
                     KnobInfo,
)
from .core import Graph

__all__ = ["Graph", "BuildPlanPolicy", "EngineConfigInfo", "GraphNotSupportedError", "KnobInfo",
           "NO_ENGINE_MSG"]
