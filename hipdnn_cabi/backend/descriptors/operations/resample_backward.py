"""HIPDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_RESAMPLE_BWD_EXT,
FlatBuffers table (NodeAttributes member) ResampleBwdAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import OpSpec, OperationDescriptor, resample_params, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_RESAMPLE_BWD_EXT, "ResampleBwdAttributes",
              [_t("OPERATION_RESAMPLE_BWD_DYDESC", "dy"), _t("OPERATION_RESAMPLE_BWD_DXDESC", "dx"),
               _t("OPERATION_RESAMPLE_BWD_IDXDESC", "index", False), *resample_params(False)])


class ResampleBwdOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
