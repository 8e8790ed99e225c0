"""HIPDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_RESAMPLE_FWD,
FlatBuffers table (NodeAttributes member) ResampleFwdAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import OpSpec, OperationDescriptor, resample_params, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_RESAMPLE_FWD, "ResampleFwdAttributes",
              [_t("OPERATION_RESAMPLE_FWD_XDESC", "x"), _t("OPERATION_RESAMPLE_FWD_YDESC", "y"),
               _t("OPERATION_RESAMPLE_FWD_IDXDESC", "index", False), *resample_params(True)])


class ResampleFwdOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
