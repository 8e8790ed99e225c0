"""HIPDNN_BACKEND_OPERATION_BATCHNORM_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_BATCHNORM_EXT,
FlatBuffers table (NodeAttributes member) BatchnormAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_BATCHNORM_EXT, "BatchnormAttributes",
              [_t("OPERATION_BATCHNORM_X_EXT", "x"), _t("OPERATION_BATCHNORM_SCALE_EXT", "scale"),
               _t("OPERATION_BATCHNORM_BIAS_EXT", "bias"), _t("OPERATION_BATCHNORM_EPSILON_EXT", "epsilon"),
               A("OPERATION_BATCHNORM_PEER_STATS_EXT", "tensors", "peer_stats_tensor_uid"),
               _t("OPERATION_BATCHNORM_PREV_RUNNING_MEAN_EXT", "prev_running_mean", False),
               _t("OPERATION_BATCHNORM_PREV_RUNNING_VARIANCE_EXT", "prev_running_variance", False),
               _t("OPERATION_BATCHNORM_MOMENTUM_EXT", "momentum", False),
               _t("OPERATION_BATCHNORM_Y_EXT", "y"),
               _t("OPERATION_BATCHNORM_MEAN_EXT", "mean", False),
               _t("OPERATION_BATCHNORM_INV_VARIANCE_EXT", "inv_variance", False),
               _t("OPERATION_BATCHNORM_NEXT_RUNNING_MEAN_EXT", "next_running_mean", False),
               _t("OPERATION_BATCHNORM_NEXT_RUNNING_VARIANCE_EXT", "next_running_variance", False),
               A("BATCHNORM_COMP_TYPE_EXT", "dtype", "@compute")])


class BatchnormOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
