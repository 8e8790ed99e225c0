"""HIPDNN_BACKEND_OPERATION_BATCHNORM_BACKWARD_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_BATCHNORM_BACKWARD_EXT,
FlatBuffers table (NodeAttributes member) BatchnormBackwardAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_BACKWARD_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_BATCHNORM_BACKWARD_EXT, "BatchnormBackwardAttributes",
              [_t("OPERATION_BATCHNORM_BACKWARD_DY_EXT", "dy"), _t("OPERATION_BATCHNORM_BACKWARD_X_EXT", "x"),
               _t("OPERATION_BATCHNORM_BACKWARD_MEAN_EXT", "mean", False),
               _t("OPERATION_BATCHNORM_BACKWARD_INV_VARIANCE_EXT", "inv_variance", False),
               _t("OPERATION_BATCHNORM_BACKWARD_SCALE_EXT", "scale"),
               A("OPERATION_BATCHNORM_BACKWARD_PEER_STATS_EXT", "tensors", "peer_stats_tensor_uid"),
               _t("OPERATION_BATCHNORM_BACKWARD_DX_EXT", "dx"), _t("OPERATION_BATCHNORM_BACKWARD_DSCALE_EXT", "dscale"),
               _t("OPERATION_BATCHNORM_BACKWARD_DBIAS_EXT", "dbias"),
               A("BATCHNORM_BACKWARD_COMP_TYPE_EXT", "dtype", "@compute")])


class BatchnormBackwardOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
