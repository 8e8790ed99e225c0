"""HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_BATCHNORM_INFERENCE_EXT,
FlatBuffers table (NodeAttributes member) BatchnormInferenceAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_BATCHNORM_INFERENCE_EXT, "BatchnormInferenceAttributes",
              [_t("OPERATION_BATCHNORM_INFERENCE_X_EXT", "x"), _t("OPERATION_BATCHNORM_INFERENCE_MEAN_EXT", "mean"),
               _t("OPERATION_BATCHNORM_INFERENCE_INV_VARIANCE_EXT", "inv_variance"),
               _t("OPERATION_BATCHNORM_INFERENCE_SCALE_EXT", "scale"),
               _t("OPERATION_BATCHNORM_INFERENCE_BIAS_EXT", "bias"), _t("OPERATION_BATCHNORM_INFERENCE_Y_EXT", "y"),
               A("BATCHNORM_INF_COMP_TYPE_EXT", "dtype", "@compute")])


class BatchnormInferenceOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
