"""Numerical kernels of the CPU reference engine (pure numpy, vectorised).

Every kernel takes numpy arrays already viewed with their logical shape (see
:mod:`.layout` for viewing strided buffers, :mod:`.dtypes` for bf16/half) plus
scalar parameters, and returns new numpy arrays in the compute dtype (float32,
or float64 for double operands); the caller encodes them to the output type
and writes them into the output views.

``KERNELS`` maps an operation name to its function; ``POINTWISE_MODES`` and
``REDUCTION_OPS`` are keyed by hipDNN enum names.  (``pointwise`` and ``matmul``
at package level are the submodules; their functions are
``pointwise.pointwise`` / ``matmul.matmul`` and ``KERNELS["pointwise"]`` / ``KERNELS["matmul"]``.)
"""

from . import batchnorm, conv, dtypes, layout, matmul, norms, philox, pointwise, reduction, sdpa
from .batchnorm import (batchnorm_bwd, batchnorm_inference, batchnorm_inference_variance,
                        batchnorm_train_fwd)
from .conv import conv_bwd_data, conv_bwd_filter, conv_fwd, conv_output_shape
from .norms import layernorm_bwd, layernorm_fwd, rmsnorm_bwd, rmsnorm_fwd
from .pointwise import POINTWISE_MODES
from .reduction import REDUCTION_OPS, reduce

#: operation name -> kernel function
KERNELS = {
    "pointwise": pointwise.pointwise,
    "conv_fwd": conv_fwd,
    "conv_bwd_data": conv_bwd_data,
    "conv_bwd_filter": conv_bwd_filter,
    "batchnorm_inference": batchnorm_inference,
    "batchnorm_inference_variance": batchnorm_inference_variance,
    "batchnorm_train_fwd": batchnorm_train_fwd,
    "batchnorm_bwd": batchnorm_bwd,
    "matmul": matmul.matmul,
    "reduction": reduce,
    "layernorm_fwd": layernorm_fwd,
    "layernorm_bwd": layernorm_bwd,
    "rmsnorm_fwd": rmsnorm_fwd,
    "rmsnorm_bwd": rmsnorm_bwd,
    "sdpa_fwd": sdpa.sdpa_fwd,
    "sdpa_bwd": sdpa.sdpa_bwd,
}

__all__ = [
    "KERNELS", "POINTWISE_MODES", "REDUCTION_OPS",
    "batchnorm", "conv", "dtypes", "layout", "matmul", "norms", "philox", "pointwise", "reduction",
    "sdpa",
    "batchnorm_bwd", "batchnorm_inference", "batchnorm_inference_variance", "batchnorm_train_fwd",
    "conv_bwd_data", "conv_bwd_filter", "conv_fwd", "conv_output_shape",
    "layernorm_bwd", "layernorm_fwd", "rmsnorm_bwd", "rmsnorm_fwd",
    "reduce",
]
