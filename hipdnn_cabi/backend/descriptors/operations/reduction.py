"""HIPDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_REDUCTION_EXT,
FlatBuffers table (NodeAttributes member) ReductionAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import REDUCTION_OP, A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_REDUCTION_EXT, "ReductionAttributes",
              [_t("OPERATION_REDUCTION_XDESC", "in"), _t("OPERATION_REDUCTION_YDESC", "out"),
               A("REDUCTION_OPERATOR", "enum", "mode", True, REDUCTION_OP),
               A("REDUCTION_IS_DETERMINISTIC", "bool", "is_deterministic"),
               A("REDUCTION_COMP_TYPE", "dtype", "@compute")])


class ReductionOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
