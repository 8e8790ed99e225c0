"""HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_DATA_EXT,
FlatBuffers table (NodeAttributes member) ConvolutionBwdAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import OpSpec, OperationDescriptor, conv_params, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_DATA_EXT, "ConvolutionBwdAttributes",
              [_t("OPERATION_CONVOLUTION_BWD_DATA_DY", "dy"), _t("OPERATION_CONVOLUTION_BWD_DATA_W", "w"),
               _t("OPERATION_CONVOLUTION_BWD_DATA_DX", "dx"), *conv_params()])


class ConvolutionBwdOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
