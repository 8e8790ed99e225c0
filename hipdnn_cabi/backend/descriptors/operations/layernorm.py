"""HIPDNN_BACKEND_OPERATION_LAYERNORM_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_LAYERNORM_EXT,
FlatBuffers table (NodeAttributes member) LayernormAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import NORM_PHASE, A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_LAYERNORM_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_LAYERNORM_EXT, "LayernormAttributes",
              [_t("OPERATION_LAYERNORM_X_EXT", "x"), _t("OPERATION_LAYERNORM_SCALE_EXT", "scale"),
               _t("OPERATION_LAYERNORM_BIAS_EXT", "bias"), _t("OPERATION_LAYERNORM_EPSILON_EXT", "epsilon"),
               _t("OPERATION_LAYERNORM_Y_EXT", "y"), _t("OPERATION_LAYERNORM_MEAN_EXT", "mean", False),
               _t("OPERATION_LAYERNORM_INV_VARIANCE_EXT", "inv_variance", False),
               A("OPERATION_LAYERNORM_FWD_PHASE_EXT", "enum", "forward_phase", True, NORM_PHASE),
               A("OPERATION_LAYERNORM_NORMALIZED_DIM_COUNT_EXT", "i64", "normalized_dim_count"),
               A("LAYERNORM_COMP_TYPE_EXT", "dtype", "@compute")])


class LayernormOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
