"""HIPDNN_BACKEND_OPERATION_CUSTOM_OP_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_CUSTOM_OP_EXT,
FlatBuffers table (NodeAttributes member) CustomOpAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import A, OpSpec, OperationDescriptor

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_CUSTOM_OP_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_CUSTOM_OP_EXT, "CustomOpAttributes",
              [A("OPERATION_CUSTOM_OP_INPUTS_EXT", "tensors", "input_tensor_uids", True),
               A("OPERATION_CUSTOM_OP_OUTPUTS_EXT", "tensors", "output_tensor_uids", True),
               A("OPERATION_CUSTOM_OP_ID_EXT", "string", "custom_op_id", True),
               A("OPERATION_CUSTOM_OP_DATA_EXT", "bytes", "data"),
               A("CUSTOM_OP_COMP_TYPE_EXT", "dtype", "@compute")])


class CustomOpOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
