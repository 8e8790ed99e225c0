"""HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_BWD_EXT,
FlatBuffers table (NodeAttributes member) MoeGroupedMatmulBwdAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_BWD_EXT, "MoeGroupedMatmulBwdAttributes",
              [_t("OPERATION_MOE_GROUPED_MATMUL_BWD_DOUTPUT_DESC", "doutput"),
               _t("OPERATION_MOE_GROUPED_MATMUL_BWD_TOKEN_DESC", "token"),
               _t("OPERATION_MOE_GROUPED_MATMUL_BWD_FIRST_TOKEN_OFFSET_DESC", "first_token_offset"),
               _t("OPERATION_MOE_GROUPED_MATMUL_BWD_DWEIGHT_DESC", "dweight"),
               A("OPERATION_MOE_GROUPED_MATMUL_BWD_MATH_PREC", "dtype", "@compute")])


class MoeGroupedMatmulBwdOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
