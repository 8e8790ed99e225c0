"""Operation descriptors (spec §1.13): one module per operation kind.

* :mod:`._base`: the shared, table-driven machinery: :class:`OpSpec` / :class:`A` (the
  declaration vocabulary), the enum maps, the C <-> FlatBuffers data type mapping, the generic
  :class:`OperationDescriptor` (set / finalize / get, ``to_node`` / ``from_node``) and the
  per-kind setters and getters.
* one module per operation (``convolution_forward.py``, ``pointwise.py``, ...), each holding its
  single declaration ``SPEC = OpSpec(...)`` and its descriptor class
  (``class ConvolutionFwdOperationDescriptor(OperationDescriptor)`` with ``SPEC``,
  ``DESCRIPTOR_TYPE`` and ``NAME``).

This package imports every op module in the table's order and rebuilds :data:`OPS` (the ordered
list of declarations), :data:`BY_DESCRIPTOR` (descriptor type -> class) and :data:`BY_UNION`
(NodeAttributes union index -> class); it re-exports the public names of :mod:`._base` and every
descriptor class, so ``from hipdnn_cabi.backend.descriptors.operations import X`` works as before
the split.  The descriptor factory finds the classes by walking the Descriptor subclasses after
importing this package.

Adding an operation = one small module (its ``SPEC`` and its class) plus its line in
:data:`_MODULE_NAMES` below (and the import of its class), plus tests.
"""
from __future__ import annotations

import importlib

from ._base import *  # noqa: F401,F403  (the public names of the former single module)
from ._base import OpSpec, OperationDescriptor
from .convolution_forward import ConvolutionFwdOperationDescriptor
from .convolution_backward_data import ConvolutionBwdOperationDescriptor
from .convolution_backward_filter import ConvolutionWrwOperationDescriptor
from .batchnorm_inference import BatchnormInferenceOperationDescriptor
from .batchnorm_inference_variance import BatchnormInferenceVarianceExtOperationDescriptor
from .batchnorm import BatchnormOperationDescriptor
from .batchnorm_backward import BatchnormBackwardOperationDescriptor
from .pointwise import PointwiseOperationDescriptor
from .matmul import MatmulOperationDescriptor
from .reduction import ReductionOperationDescriptor
from .resample_forward import ResampleFwdOperationDescriptor
from .resample_backward import ResampleBwdOperationDescriptor
from .layernorm import LayernormOperationDescriptor
from .layernorm_backward import LayernormBackwardOperationDescriptor
from .rmsnorm import RMSNormOperationDescriptor
from .rmsnorm_backward import RMSNormBackwardOperationDescriptor
from .sdpa_forward import SdpaOperationDescriptor
from .sdpa_backward import SdpaBackwardOperationDescriptor
from .block_scale_quantize import BlockScaleQuantizeOperationDescriptor
from .block_scale_dequantize import BlockScaleDequantizeOperationDescriptor
from .custom_op import CustomOpOperationDescriptor
from .moe_grouped_matmul import MoeGroupedMatmulOperationDescriptor
from .moe_grouped_matmul_backward import MoeGroupedMatmulBwdOperationDescriptor

# The op modules, in the table's order (the order of OPS).
_MODULE_NAMES = (
    "convolution_forward",
    "convolution_backward_data",
    "convolution_backward_filter",
    "batchnorm_inference",
    "batchnorm_inference_variance",
    "batchnorm",
    "batchnorm_backward",
    "pointwise",
    "matmul",
    "reduction",
    "resample_forward",
    "resample_backward",
    "layernorm",
    "layernorm_backward",
    "rmsnorm",
    "rmsnorm_backward",
    "sdpa_forward",
    "sdpa_backward",
    "block_scale_quantize",
    "block_scale_dequantize",
    "custom_op",
    "moe_grouped_matmul",
    "moe_grouped_matmul_backward",
)
_MODULES = tuple(importlib.import_module(f".{n}", __name__) for n in _MODULE_NAMES)

OPS: list[OpSpec] = [m.SPEC for m in _MODULES]
BY_DESCRIPTOR: dict[int, type] = {}
BY_UNION: dict[int, type] = {}
for _m in _MODULES:
    _cls = getattr(_m, _m.SPEC.cls_name)
    assert issubclass(_cls, OperationDescriptor) and _cls.SPEC is _m.SPEC, _m.__name__
    BY_DESCRIPTOR[int(_m.SPEC.dtype)] = _cls
    BY_UNION[_m.SPEC.union_index] = _cls
del _m, _cls
