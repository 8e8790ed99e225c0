"""Python frontend: build and run hipDNN graphs over the backend C API.

Shaped like hipDNN's Python bindings and cudnn-frontend's ``pygraph``::

    import numpy as np
    from hipdnn_cabi import frontend as hf
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    xa = np.ones((1, 3, 8, 8), np.float32); wa = np.ones((4, 3, 3, 3), np.float32)
    ya = np.empty((1, 4, 8, 8), np.float32)
    with hf.Handle() as h:
        g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
        x = g.tensor(name="x", dim=[1, 3, 8, 8])
        w = g.tensor(name="w", dim=[4, 3, 3, 3])
        y = g.relu(g.conv_fprop(x, w, padding=1)).set_output(True)
        g.build()
        g.execute({x: xa, w: wa, y: ya})

The frontend talks to the backend only through the C API (cffi ABI mode on
``libhipdnn_backend.so``; ``HIPDNN_CABI_BACKEND_LIB`` selects another library), with the call
sequences of hipDNN's C++ frontend.  Errors raise :mod:`hipdnn_cabi.errors` exceptions carrying
the backend's last-error text.
"""
from __future__ import annotations

from .._generated.enums import (BehaviorNote, ConvolutionMode, DataType, MoeGroupedMatmulMode,
                                PaddingMode, PointwiseMode, ReduceTensorOp, ResampleMode)
from ..errors import (BadParamError, ExecutionFailedError, HipdnnError, InternalError,
                      NotFinalizedError, NotInitializedError, NotSupportedError, NullPointerError,
                      PluginError)
from ._ops import NormFwdPhase
from .graph.autotune import (AutotuneConfig, AutotuneResult, AutotuneStorageConfig,
                             AutotuneStrategy, EngineSweepSpec, PrimingFailurePolicy, TuneMode)
from .graph.selection import HeurMode
from .graph import BuildPlanPolicy, EngineConfigInfo, Graph, GraphNotSupportedError, KnobInfo
from .handle import (EngineInfo, Handle, engine_memory_kind, engines, loaded_plugin_paths,
                     set_engine_memory_kind, set_engine_plugin_paths, version_string)
from .tensor import ScalarType, Tensor, from_numpy_dtype, to_numpy_dtype
from .compat import (behavior_note, convolution_mode, create_handle, data_type, destroy_handle,
                     diagonal_alignment, get_stream, moe_grouped_matmul_mode, pointwise_mode,
                     reduction_mode, resample_mode, set_stream)

TensorAttributes = Tensor
pygraph = Graph
heur_mode = HeurMode
build_plan_policy = BuildPlanPolicy
# cudnn-frontend's names for the same things (docs/frontend.md, "Porting from cudnn-frontend")
tensor = Tensor
norm_forward_phase = NormFwdPhase
scalar_type = ScalarType
cudnnGraphNotSupportedError = GraphNotSupportedError
backend_version_string = version_string

__all__ = [
    "Graph", "pygraph", "Handle", "Tensor", "TensorAttributes", "ScalarType", "NormFwdPhase",
    "BuildPlanPolicy", "build_plan_policy", "heur_mode", "HeurMode", "DataType", "PointwiseMode",
    "ReduceTensorOp", "ConvolutionMode", "BehaviorNote", "EngineInfo", "engines",
    "set_engine_plugin_paths", "loaded_plugin_paths", "version_string", "from_numpy_dtype",
    "to_numpy_dtype", "GraphNotSupportedError", "HipdnnError", "BadParamError", "NullPointerError",
    "NotFinalizedError", "NotInitializedError", "NotSupportedError", "InternalError",
    "ExecutionFailedError", "PluginError", "KnobInfo", "EngineConfigInfo", "engine_memory_kind",
    "set_engine_memory_kind", "ResampleMode", "PaddingMode", "MoeGroupedMatmulMode",
    "AutotuneConfig", "AutotuneResult", "AutotuneStorageConfig", "AutotuneStrategy",
    "EngineSweepSpec", "PrimingFailurePolicy", "TuneMode",
    "tensor", "norm_forward_phase", "scalar_type", "cudnnGraphNotSupportedError",
    "backend_version_string", "data_type", "reduction_mode", "behavior_note", "pointwise_mode",
    "convolution_mode", "diagonal_alignment", "moe_grouped_matmul_mode", "resample_mode",
    "create_handle", "destroy_handle", "set_stream", "get_stream",
]
