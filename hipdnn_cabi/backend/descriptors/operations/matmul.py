"""HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_MATMUL_EXT,
FlatBuffers table (NodeAttributes member) MatmulAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_MATMUL_EXT, "MatmulAttributes",
              [_t("OPERATION_MATMUL_ADESC", "a"), _t("OPERATION_MATMUL_BDESC", "b"),
               _t("OPERATION_MATMUL_CDESC", "c"), A("MATMUL_COMP_TYPE", "dtype", "@compute")])


class MatmulOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
