"""HIPDNN_BACKEND_OPERATION_LAYERNORM_BACKWARD_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_LAYERNORM_BACKWARD_EXT,
FlatBuffers table (NodeAttributes member) LayernormBackwardAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_LAYERNORM_BACKWARD_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_LAYERNORM_BACKWARD_EXT, "LayernormBackwardAttributes",
              [_t("OPERATION_LAYERNORM_BACKWARD_DY_EXT", "dy"), _t("OPERATION_LAYERNORM_BACKWARD_X_EXT", "x"),
               _t("OPERATION_LAYERNORM_BACKWARD_SCALE_EXT", "scale"),
               _t("OPERATION_LAYERNORM_BACKWARD_MEAN_EXT", "mean", False),
               _t("OPERATION_LAYERNORM_BACKWARD_INV_VARIANCE_EXT", "inv_variance", False),
               _t("OPERATION_LAYERNORM_BACKWARD_EPSILON_EXT", "epsilon", False),
               _t("OPERATION_LAYERNORM_BACKWARD_DX_EXT", "dx"),
               _t("OPERATION_LAYERNORM_BACKWARD_DSCALE_EXT", "dscale"),
               _t("OPERATION_LAYERNORM_BACKWARD_DBIAS_EXT", "dbias"),
               A("LAYERNORM_BACKWARD_NORMALIZED_DIM_COUNT_EXT", "i64", "normalized_dim_count"),
               A("LAYERNORM_BACKWARD_COMP_TYPE_EXT", "dtype", "@compute")])


class LayernormBackwardOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
