"""HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_BLOCK_SCALE_DEQUANTIZE_EXT,
FlatBuffers table (NodeAttributes member) BlockScaleDequantizeAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_BLOCK_SCALE_DEQUANTIZE_EXT, "BlockScaleDequantizeAttributes",
              [_t("OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC", "x"),
               _t("OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC", "scale"),
               _t("OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC", "y"),
               A("OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE", "i64vec", "block_size", True),
               A("OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE", "bool", "is_negative_scale"),
               A("OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC", "dtype", "@compute")])


class BlockScaleDequantizeOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
