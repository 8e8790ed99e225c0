"""HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_CONVOLUTION_FORWARD_EXT,
FlatBuffers table (NodeAttributes member) ConvolutionFwdAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import OpSpec, OperationDescriptor, conv_params, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_CONVOLUTION_FORWARD_EXT, "ConvolutionFwdAttributes",
              [_t("OPERATION_CONVOLUTION_FORWARD_X", "x"), _t("OPERATION_CONVOLUTION_FORWARD_W", "w"),
               _t("OPERATION_CONVOLUTION_FORWARD_Y", "y"), *conv_params()])


class ConvolutionFwdOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
