"""HIPDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR_EXT (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_SDPA_BACKWARD_EXT,
FlatBuffers table (NodeAttributes member) SdpaBackwardAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import DIAG_ALIGN, A, OpSpec, OperationDescriptor, _t

_SDPA_BWD_OPT = [("SCALE_EXT", "scale"), ("ATTN_MASK_EXT", "attn_mask"), ("SEQ_LEN_Q_EXT", "seq_len_q"),
                 ("SEQ_LEN_KV_EXT", "seq_len_kv"), ("SEED_EXT", "seed"), ("OFFSET_EXT", "offset"),
                 ("DROPOUT_MASK_EXT", "dropout_mask"), ("DROPOUT_SCALE_EXT", "dropout_scale"),
                 ("DROPOUT_SCALE_INV_EXT", "dropout_scale_inv"), ("DBIAS_EXT", "dbias")]

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR_EXT,
              OT.HIPDNN_OPERATION_TYPE_SDPA_BACKWARD_EXT, "SdpaBackwardAttributes",
              [_t("OPERATION_SDPA_BWD_Q_EXT", "q"), _t("OPERATION_SDPA_BWD_K_EXT", "k"),
               _t("OPERATION_SDPA_BWD_V_EXT", "v"), _t("OPERATION_SDPA_BWD_O_EXT", "o"),
               _t("OPERATION_SDPA_BWD_DO_EXT", "do"), _t("OPERATION_SDPA_BWD_STATS_EXT", "stats"),
               _t("OPERATION_SDPA_BWD_DQ_EXT", "dq"), _t("OPERATION_SDPA_BWD_DK_EXT", "dk"),
               _t("OPERATION_SDPA_BWD_DV_EXT", "dv"),
               *[_t("OPERATION_SDPA_BWD_" + n, f, False) for n, f in _SDPA_BWD_OPT],
               A("SDPA_BWD_ALIBI_MASK_EXT", "bool", "alibi_mask"),
               A("SDPA_BWD_PADDING_MASK_EXT", "bool", "padding_mask"),
               A("SDPA_BWD_CAUSAL_MASK_EXT", "bool", "causal_mask"),
               A("SDPA_BWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT", "bool", "causal_mask_bottom_right"),
               A("SDPA_BWD_DROPOUT_PROBABILITY_EXT", "float", "dropout_probability"),
               A("SDPA_BWD_ATTN_SCALE_VALUE_EXT", "float", "attn_scale_value"),
               A("SDPA_BWD_LEFT_BOUND_EXT", "i64", "left_bound"),
               A("SDPA_BWD_RIGHT_BOUND_EXT", "i64", "right_bound"),
               A("SDPA_BWD_DIAGONAL_ALIGNMENT_EXT", "enum", "diagonal_alignment", False, DIAG_ALIGN),
               A("SDPA_BWD_COMP_TYPE_EXT", "dtype", "@compute")])


class SdpaBackwardOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
