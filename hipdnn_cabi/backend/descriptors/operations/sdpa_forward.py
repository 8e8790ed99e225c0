"""HIPDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR (spec §1.13).

One declaration: operation type HIPDNN_OPERATION_TYPE_SDPA_FORWARD_EXT,
FlatBuffers table (NodeAttributes member) SdpaAttributes. The generic machinery is in
:mod:`._base`.
"""
from __future__ import annotations

from ...._generated.enums import DescriptorType as DT, OperationType as OT
from ._base import ATTN_IMPL, DIAG_ALIGN, A, OpSpec, OperationDescriptor, _t

_SDPA_FWD_OPT = [("ATTN_MASK_EXT", "attn_mask"), ("SCALEDESC", "scale"), ("SEQ_LEN_QDESC", "seq_len_q"),
                 ("SEQ_LEN_KVDESC", "seq_len_kv"), ("SEED_EXT", "seed"), ("OFFSET_EXT", "offset"),
                 ("DROPOUT_MASK_EXT", "dropout_mask"), ("DROPOUT_SCALE_EXT", "dropout_scale"),
                 ("PAGE_TABLE_KDESC", "page_table_k"), ("PAGE_TABLE_VDESC", "page_table_v"),
                 ("BLOCK_MASK_DESC", "block_mask"), ("SINK_TOKEN_EXT", "sink_token"),
                 ("DESCALE_Q_EXT", "descale_q"), ("DESCALE_K_EXT", "descale_k"),
                 ("DESCALE_V_EXT", "descale_v"), ("DESCALE_S_EXT", "descale_s"),
                 ("SCALE_S_EXT", "scale_s"), ("SCALE_O_EXT", "scale_o"), ("STATSDESC", "stats"),
                 ("MAX_EXT", "max"), ("SUM_EXP_EXT", "sum_exp"), ("RNG_DUMP_EXT", "rng_dump"),
                 ("AMAX_S_EXT", "amax_s"), ("AMAX_O_EXT", "amax_o")]

SPEC = OpSpec(DT.HIPDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
              OT.HIPDNN_OPERATION_TYPE_SDPA_FORWARD_EXT, "SdpaAttributes",
              [_t("OPERATION_SDPA_FWD_QDESC", "q"), _t("OPERATION_SDPA_FWD_KDESC", "k"),
               _t("OPERATION_SDPA_FWD_VDESC", "v"), _t("OPERATION_SDPA_FWD_ODESC", "o"),
               *[_t("OPERATION_SDPA_FWD_" + n, f, False) for n, f in _SDPA_FWD_OPT],
               A("SDPA_FWD_GENERATE_STATS_EXT", "bool", "generate_stats"),
               A("SDPA_FWD_ALIBI_MASK_EXT", "bool", "alibi_mask"),
               A("SDPA_FWD_PADDING_MASK_EXT", "bool", "padding_mask"),
               A("SDPA_FWD_CAUSAL_MASK_EXT", "bool", "causal_mask"),
               A("SDPA_FWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT", "bool", "causal_mask_bottom_right"),
               A("SDPA_FWD_DROPOUT_PROBABILITY_EXT", "float", "dropout_probability"),
               A("SDPA_FWD_ATTN_SCALE_VALUE_EXT", "float", "attn_scale_value"),
               A("SDPA_FWD_LEFT_BOUND_EXT", "i64", "left_bound"),
               A("SDPA_FWD_RIGHT_BOUND_EXT", "i64", "right_bound"),
               A("SDPA_FWD_MAX_SEQ_LEN_KV_EXT", "i64", "max_seq_len_kv"),
               A("SDPA_FWD_DIAGONAL_ALIGNMENT_EXT", "enum", "diagonal_alignment", False, DIAG_ALIGN),
               A("SDPA_FWD_MMA_CORE_MODE_EXT", "dtype", "mma_core_mode"),
               A("SDPA_FWD_IMPLEMENTATION_EXT", "enum", "implementation", False, ATTN_IMPL),
               A("SDPA_FWD_COMP_TYPE_EXT", "dtype", "@compute")])


class SdpaOperationDescriptor(OperationDescriptor):
    SPEC = SPEC
    DESCRIPTOR_TYPE = SPEC.dtype
    NAME = SPEC.cls_name
