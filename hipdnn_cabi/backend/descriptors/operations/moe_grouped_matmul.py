"""HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_EXT,
FlatBuffers table (NodeAttributes member) MoeGroupedMatmulAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import MOE_MODE, A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_EXT, "MoeGroupedMatmulAttributes",
              [_t("OPERATION_MOE_GROUPED_MATMUL_TOKEN_DESC", "token"),
               _t("OPERATION_MOE_GROUPED_MATMUL_WEIGHT_DESC", "weight"),
               _t("OPERATION_MOE_GROUPED_MATMUL_FIRST_TOKEN_OFFSET_DESC", "first_token_offset"),
               _t("OPERATION_MOE_GROUPED_MATMUL_TOKEN_INDEX_DESC", "token_index", False),
               _t("OPERATION_MOE_GROUPED_MATMUL_TOKEN_KS_DESC", "token_ks", False),
               _t("OPERATION_MOE_GROUPED_MATMUL_OUTPUT_DESC", "output"),
               A("OPERATION_MOE_GROUPED_MATMUL_MODE", "enum", "mode", False, MOE_MODE),
               A("OPERATION_MOE_GROUPED_MATMUL_TOP_K", "i64", "top_k"),
               A("OPERATION_MOE_GROUPED_MATMUL_MATH_PREC", "dtype", "@compute")])


class MoeGroupedMatmulOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
