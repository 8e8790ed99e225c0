"""HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_POINTWISE_EXT,
FlatBuffers table (NodeAttributes member) PointwiseAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import POINTWISE_MODE, A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_POINTWISE_EXT, "PointwiseAttributes",
              [_t("OPERATION_POINTWISE_IN_0_EXT", "in_0"), _t("OPERATION_POINTWISE_IN_1_EXT", "in_1", False),
               _t("OPERATION_POINTWISE_IN_2_EXT", "in_2", False), _t("OPERATION_POINTWISE_OUT_0_EXT", "out_0"),
               A("POINTWISE_MODE", "enum", "operation", True, POINTWISE_MODE),
               A("POINTWISE_RELU_LOWER_CLIP", "float", "relu_lower_clip"),
               A("POINTWISE_RELU_UPPER_CLIP", "float", "relu_upper_clip"),
               A("POINTWISE_RELU_LOWER_CLIP_SLOPE", "float", "relu_lower_clip_slope"),
               A("POINTWISE_SWISH_BETA", "float", "swish_beta"),
               A("POINTWISE_ELU_ALPHA", "float", "elu_alpha"),
               A("POINTWISE_SOFTPLUS_BETA", "float", "softplus_beta"),
               A("POINTWISE_AXIS", "i64", "axis_tensor_uid"),
               A("POINTWISE_MATH_PREC", "dtype", "@compute")])


class PointwiseOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
