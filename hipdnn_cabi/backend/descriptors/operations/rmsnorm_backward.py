"""HIPDNN_BACKEND_OPERATION_RMSNORM_BACKWARD_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_RMSNORM_BACKWARD_EXT,
FlatBuffers table (NodeAttributes member) RMSNormBackwardAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_RMSNORM_BACKWARD_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_RMSNORM_BACKWARD_EXT, "RMSNormBackwardAttributes",
              [_t("OPERATION_RMSNORM_BACKWARD_DY_EXT", "dy"), _t("OPERATION_RMSNORM_BACKWARD_X_EXT", "x"),
               _t("OPERATION_RMSNORM_BACKWARD_SCALE_EXT", "scale"),
               _t("OPERATION_RMSNORM_BACKWARD_INV_RMS_EXT", "inv_rms"),
               _t("OPERATION_RMSNORM_BACKWARD_DX_EXT", "dx"), _t("OPERATION_RMSNORM_BACKWARD_DSCALE_EXT", "dscale"),
               _t("OPERATION_RMSNORM_BACKWARD_DBIAS_EXT", "dbias", False),
               A("RMSNORM_BACKWARD_COMP_TYPE_EXT", "dtype", "@compute")])


class RMSNormBackwardOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
