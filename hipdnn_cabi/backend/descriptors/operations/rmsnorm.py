"""HIPDNN_BACKEND_OPERATION_RMSNORM_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_RMSNORM_EXT,
FlatBuffers table (NodeAttributes member) RMSNormAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import NORM_PHASE, A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_RMSNORM_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_RMSNORM_EXT, "RMSNormAttributes",
              [_t("OPERATION_RMSNORM_X_EXT", "x"), _t("OPERATION_RMSNORM_SCALE_EXT", "scale"),
               _t("OPERATION_RMSNORM_EPSILON_EXT", "epsilon"), _t("OPERATION_RMSNORM_Y_EXT", "y"),
               _t("OPERATION_RMSNORM_BIAS_EXT", "bias", False), _t("OPERATION_RMSNORM_INV_RMS_EXT", "inv_rms", False),
               A("OPERATION_RMSNORM_FWD_PHASE_EXT", "enum", "forward_phase", True, NORM_PHASE),
               A("RMSNORM_COMP_TYPE_EXT", "dtype", "@compute")])


class RMSNormOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
