"""HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_WEIGHTS_EXT,
FlatBuffers table (NodeAttributes member) ConvolutionWrwAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import OpSpec, OperationDescriptor, conv_params, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_WEIGHTS_EXT, "ConvolutionWrwAttributes",
              [_t("OPERATION_CONVOLUTION_BWD_FILTER_X", "x"), _t("OPERATION_CONVOLUTION_BWD_FILTER_DY", "dy"),
               _t("OPERATION_CONVOLUTION_BWD_FILTER_DW", "dw"), *conv_params()])


class ConvolutionWrwOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
