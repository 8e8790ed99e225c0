"""HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_BLOCK_SCALE_QUANTIZE_EXT,
FlatBuffers table (NodeAttributes member) BlockScaleQuantizeAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_BLOCK_SCALE_QUANTIZE_EXT, "BlockScaleQuantizeAttributes",
              [_t("OPERATION_BLOCK_SCALE_QUANTIZE_XDESC", "x"), _t("OPERATION_BLOCK_SCALE_QUANTIZE_YDESC", "y"),
               _t("OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC", "scale"),
               A("OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE", "i64", "block_size", True),
               A("OPERATION_BLOCK_SCALE_QUANTIZE_AXIS_EXT", "i64", "axis"),
               A("OPERATION_BLOCK_SCALE_QUANTIZE_TRANSPOSE_EXT", "bool", "transpose"),
               A("OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC", "dtype", "@compute")])


class BlockScaleQuantizeOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
