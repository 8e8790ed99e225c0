"""HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_VARIANCE_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_BATCHNORM_INFERENCE_VARIANCE_EXT,
FlatBuffers table (NodeAttributes member) BatchnormInferenceAttributesVarianceExt. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor, _t

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_VARIANCE_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_BATCHNORM_INFERENCE_VARIANCE_EXT, "BatchnormInferenceAttributesVarianceExt",
              [_t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_X_EXT", "x"),
               _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_MEAN_EXT", "mean"),
               _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_VARIANCE_EXT", "variance"),
               _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_SCALE_EXT", "scale"),
               _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_BIAS_EXT", "bias"),
               _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_Y_EXT", "y"),
               _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_EPSILON_EXT", "epsilon"),
               A("BATCHNORM_INF_VAR_COMP_TYPE_EXT", "dtype", "@compute")])


class BatchnormInferenceVarianceExtOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
