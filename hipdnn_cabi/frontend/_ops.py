"""Per-operation lowering table: descriptor type, tensor slots (role -> attribute), compute-type
attribute.  Role names are the FlatBuffers schema field stems (``x``, ``w``, ``in_0``, ...)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .._generated.enums import AttributeName as A
from .._generated.enums import DescriptorType as D
from .._generated.enums import OperationType as O


class NormFwdPhase(enum.IntEnum):
    """hipdnnNormFwdPhase_t (values of hipDNN's public header; not in the pinned ABI enums)."""
    INFERENCE = 1
    TRAINING = 2


@dataclass(frozen=True)
class OpSpec:
    kind: str
    dtype: D
    optype: O
    inputs: tuple          # ((role, attr), ...)
    outputs: tuple
    comp: A | None
    arrays: tuple = ()     # ((role, attr), ...) descriptor-array slots (peer stats)

    def slots(self):
        return self.inputs + self.outputs


def _a(n):
    return A["HIPDNN_ATTR_" + n]


def _slots(prefix, roles, suffix=""):
    return tuple((r, _a(f"{prefix}{up}{suffix}")) for r, up in roles)


_CONV = "HIPDNN_ATTR_CONVOLUTION_"
SPECS = {s.kind: s for s in [
    OpSpec("conv_fprop", D.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_CONVOLUTION_FORWARD_EXT,
           _slots("OPERATION_CONVOLUTION_FORWARD_", [("x", "X"), ("w", "W")]),
           _slots("OPERATION_CONVOLUTION_FORWARD_", [("y", "Y")]), _a("CONVOLUTION_COMP_TYPE")),
    OpSpec("conv_dgrad", D.HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_DATA_EXT,
           _slots("OPERATION_CONVOLUTION_BWD_DATA_", [("dy", "DY"), ("w", "W")]),
           _slots("OPERATION_CONVOLUTION_BWD_DATA_", [("dx", "DX")]), _a("CONVOLUTION_COMP_TYPE")),
    OpSpec("conv_wgrad", D.HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_WEIGHTS_EXT,
           _slots("OPERATION_CONVOLUTION_BWD_FILTER_", [("x", "X"), ("dy", "DY")]),
           _slots("OPERATION_CONVOLUTION_BWD_FILTER_", [("dw", "DW")]), _a("CONVOLUTION_COMP_TYPE")),
    OpSpec("batchnorm_inference", D.HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_BATCHNORM_INFERENCE_EXT,
           _slots("OPERATION_BATCHNORM_INFERENCE_", [("x", "X"), ("mean", "MEAN"),
                                                     ("inv_variance", "INV_VARIANCE"),
                                                     ("scale", "SCALE"), ("bias", "BIAS")], "_EXT"),
           _slots("OPERATION_BATCHNORM_INFERENCE_", [("y", "Y")], "_EXT"),
           _a("BATCHNORM_INF_COMP_TYPE_EXT")),
    OpSpec("batchnorm", D.HIPDNN_BACKEND_OPERATION_BATCHNORM_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_BATCHNORM_EXT,
           _slots("OPERATION_BATCHNORM_", [("x", "X"), ("scale", "SCALE"), ("bias", "BIAS"),
                                           ("epsilon", "EPSILON"),
                                           ("prev_running_mean", "PREV_RUNNING_MEAN"),
                                           ("prev_running_variance", "PREV_RUNNING_VARIANCE"),
                                           ("momentum", "MOMENTUM")], "_EXT"),
           _slots("OPERATION_BATCHNORM_", [("y", "Y"), ("mean", "MEAN"), ("inv_variance", "INV_VARIANCE"),
                                           ("next_running_mean", "NEXT_RUNNING_MEAN"),
                                           ("next_running_variance", "NEXT_RUNNING_VARIANCE")], "_EXT"),
           _a("BATCHNORM_COMP_TYPE_EXT"),
           arrays=(("peer_stats", _a("OPERATION_BATCHNORM_PEER_STATS_EXT")),)),
    OpSpec("batchnorm_backward", D.HIPDNN_BACKEND_OPERATION_BATCHNORM_BACKWARD_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_BATCHNORM_BACKWARD_EXT,
           _slots("OPERATION_BATCHNORM_BACKWARD_", [("dy", "DY"), ("x", "X"), ("mean", "MEAN"),
                                                    ("inv_variance", "INV_VARIANCE"),
                                                    ("scale", "SCALE")], "_EXT"),
           _slots("OPERATION_BATCHNORM_BACKWARD_", [("dx", "DX"), ("dscale", "DSCALE"),
                                                    ("dbias", "DBIAS")], "_EXT"),
           _a("BATCHNORM_BACKWARD_COMP_TYPE_EXT"),
           arrays=(("peer_stats", _a("OPERATION_BATCHNORM_BACKWARD_PEER_STATS_EXT")),)),
    OpSpec("pointwise", D.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_POINTWISE_EXT,
           _slots("OPERATION_POINTWISE_", [("in_0", "IN_0"), ("in_1", "IN_1"), ("in_2", "IN_2")], "_EXT"),
           _slots("OPERATION_POINTWISE_", [("out_0", "OUT_0")], "_EXT"), _a("POINTWISE_MATH_PREC")),
    OpSpec("matmul", D.HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, O.HIPDNN_OPERATION_TYPE_MATMUL_EXT,
           _slots("OPERATION_MATMUL_", [("a", "ADESC"), ("b", "BDESC")]),
           _slots("OPERATION_MATMUL_", [("c", "CDESC")]), _a("MATMUL_COMP_TYPE")),
    OpSpec("reduction", D.HIPDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_REDUCTION_EXT,
           _slots("OPERATION_REDUCTION_", [("in", "XDESC")]),
           _slots("OPERATION_REDUCTION_", [("out", "YDESC")]), _a("REDUCTION_COMP_TYPE")),
    OpSpec("layernorm", D.HIPDNN_BACKEND_OPERATION_LAYERNORM_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_LAYERNORM_EXT,
           _slots("OPERATION_LAYERNORM_", [("x", "X"), ("scale", "SCALE"), ("bias", "BIAS"),
                                           ("epsilon", "EPSILON")], "_EXT"),
           _slots("OPERATION_LAYERNORM_", [("y", "Y"), ("mean", "MEAN"),
                                           ("inv_variance", "INV_VARIANCE")], "_EXT"),
           _a("LAYERNORM_COMP_TYPE_EXT")),
    OpSpec("rmsnorm", D.HIPDNN_BACKEND_OPERATION_RMSNORM_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_RMSNORM_EXT,
           _slots("OPERATION_RMSNORM_", [("x", "X"), ("scale", "SCALE"), ("epsilon", "EPSILON"),
                                         ("bias", "BIAS")], "_EXT"),
           _slots("OPERATION_RMSNORM_", [("y", "Y"), ("inv_rms", "INV_RMS")], "_EXT"),
           _a("RMSNORM_COMP_TYPE_EXT")),
    OpSpec("sdpa", D.HIPDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_SDPA_FORWARD_EXT,
           _slots("OPERATION_SDPA_FWD_", [("q", "QDESC"), ("k", "KDESC"), ("v", "VDESC"),
                                          ("attn_mask", "ATTN_MASK_EXT"), ("scale", "SCALEDESC"),
                                          ("seq_len_q", "SEQ_LEN_QDESC"),
                                          ("seq_len_kv", "SEQ_LEN_KVDESC"), ("seed", "SEED_EXT"),
                                          ("offset", "OFFSET_EXT"),
                                          ("dropout_mask", "DROPOUT_MASK_EXT"),
                                          ("dropout_scale", "DROPOUT_SCALE_EXT")]),
           _slots("OPERATION_SDPA_FWD_", [("o", "ODESC"), ("stats", "STATSDESC"),
                                          ("max", "MAX_EXT"), ("sum_exp", "SUM_EXP_EXT"),
                                          ("rng_dump", "RNG_DUMP_EXT")]),
           _a("SDPA_FWD_COMP_TYPE_EXT")),
    OpSpec("sdpa_backward", D.HIPDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_SDPA_BACKWARD_EXT,
           _slots("OPERATION_SDPA_BWD_", [("q", "Q"), ("k", "K"), ("v", "V"), ("o", "O"),
                                          ("do", "DO"), ("stats", "STATS"), ("scale", "SCALE"),
                                          ("attn_mask", "ATTN_MASK"), ("seq_len_q", "SEQ_LEN_Q"),
                                          ("seq_len_kv", "SEQ_LEN_KV"), ("seed", "SEED"),
                                          ("offset", "OFFSET"), ("dropout_mask", "DROPOUT_MASK"),
                                          ("dropout_scale", "DROPOUT_SCALE"),
                                          ("dropout_scale_inv", "DROPOUT_SCALE_INV")], "_EXT"),
           _slots("OPERATION_SDPA_BWD_", [("dq", "DQ"), ("dk", "DK"), ("dv", "DV"),
                                          ("dbias", "DBIAS")], "_EXT"),
           _a("SDPA_BWD_COMP_TYPE_EXT")),
    # ---- issue 17: norm backward, resample, block scale, MoE (one contiguous block) ----
    OpSpec("layernorm_backward", D.HIPDNN_BACKEND_OPERATION_LAYERNORM_BACKWARD_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_LAYERNORM_BACKWARD_EXT,
           _slots("OPERATION_LAYERNORM_BACKWARD_", [("dy", "DY"), ("x", "X"), ("scale", "SCALE"),
                                                    ("mean", "MEAN"),
                                                    ("inv_variance", "INV_VARIANCE"),
                                                    ("epsilon", "EPSILON")], "_EXT"),
           _slots("OPERATION_LAYERNORM_BACKWARD_", [("dx", "DX"), ("dscale", "DSCALE"),
                                                    ("dbias", "DBIAS")], "_EXT"),
           _a("LAYERNORM_BACKWARD_COMP_TYPE_EXT")),
    OpSpec("rmsnorm_backward", D.HIPDNN_BACKEND_OPERATION_RMSNORM_BACKWARD_DESCRIPTOR_EXT,
           O.HIPDNN_OPERATION_TYPE_RMSNORM_BACKWARD_EXT,
           _slots("OPERATION_RMSNORM_BACKWARD_", [("dy", "DY"), ("x", "X"), ("scale", "SCALE"),
                                                  ("inv_rms", "INV_RMS")], "_EXT"),
           _slots("OPERATION_RMSNORM_BACKWARD_", [("dx", "DX"), ("dscale", "DSCALE"),
                                                  ("dbias", "DBIAS")], "_EXT"),
           _a("RMSNORM_BACKWARD_COMP_TYPE_EXT")),
    OpSpec("resample", D.HIPDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_RESAMPLE_FWD,
           _slots("OPERATION_RESAMPLE_FWD_", [("x", "XDESC")]),
           _slots("OPERATION_RESAMPLE_FWD_", [("y", "YDESC"), ("index", "IDXDESC")]),
           _a("RESAMPLE_COMP_TYPE")),
    OpSpec("resample_backward", D.HIPDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_RESAMPLE_BWD_EXT,
           _slots("OPERATION_RESAMPLE_BWD_", [("dy", "DYDESC"), ("index", "IDXDESC")]),
           _slots("OPERATION_RESAMPLE_BWD_", [("dx", "DXDESC")]), _a("RESAMPLE_COMP_TYPE")),
    OpSpec("block_scale_quantize", D.HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_BLOCK_SCALE_QUANTIZE_EXT,
           _slots("OPERATION_BLOCK_SCALE_QUANTIZE_", [("x", "XDESC")]),
           _slots("OPERATION_BLOCK_SCALE_QUANTIZE_", [("y", "YDESC"), ("scale", "SCALE_DESC")]),
           _a("OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC")),
    OpSpec("block_scale_dequantize", D.HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_BLOCK_SCALE_DEQUANTIZE_EXT,
           _slots("OPERATION_BLOCK_SCALE_DEQUANTIZE_", [("x", "XDESC"), ("scale", "SCALE_DESC")]),
           _slots("OPERATION_BLOCK_SCALE_DEQUANTIZE_", [("y", "YDESC")]),
           _a("OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC")),
    OpSpec("moe_grouped_matmul", D.HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_EXT,
           _slots("OPERATION_MOE_GROUPED_MATMUL_", [("token", "TOKEN_DESC"), ("weight", "WEIGHT_DESC"),
                                                    ("first_token_offset", "FIRST_TOKEN_OFFSET_DESC"),
                                                    ("token_index", "TOKEN_INDEX_DESC"),
                                                    ("token_ks", "TOKEN_KS_DESC")]),
           _slots("OPERATION_MOE_GROUPED_MATMUL_", [("output", "OUTPUT_DESC")]),
           _a("OPERATION_MOE_GROUPED_MATMUL_MATH_PREC")),
    OpSpec("moe_grouped_matmul_backward",
           D.HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR,
           O.HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_BWD_EXT,
           _slots("OPERATION_MOE_GROUPED_MATMUL_BWD_", [("doutput", "DOUTPUT_DESC"),
                                                        ("token", "TOKEN_DESC"),
                                                        ("first_token_offset",
                                                         "FIRST_TOKEN_OFFSET_DESC")]),
           _slots("OPERATION_MOE_GROUPED_MATMUL_BWD_", [("dweight", "DWEIGHT_DESC")]),
           _a("OPERATION_MOE_GROUPED_MATMUL_BWD_MATH_PREC")),
    # ---- end issue 17 block ----
]}

# ---- issue 17: parameters of the ops above, lowered and read back generically ----------------
# kind -> ((attrs key, attribute, attribute type, value kind), ...); value kinds: "vec" (INT64
# vector), "int" (INT64 scalar), "bool", or an IntEnum class (lowered with its attribute type).
from .._generated.enums import AttributeType as _T  # noqa: E402
from .._generated.enums import MoeGroupedMatmulMode, PaddingMode, ResampleMode  # noqa: E402

_RS = (("mode", _a("RESAMPLE_MODE"), _T.HIPDNN_TYPE_RESAMPLE_MODE, ResampleMode),
       ("pre_padding", _a("RESAMPLE_PRE_PADDINGS"), _T.HIPDNN_TYPE_INT64, "vec"),
       ("post_padding", _a("RESAMPLE_POST_PADDINGS"), _T.HIPDNN_TYPE_INT64, "vec"),
       ("stride", _a("RESAMPLE_STRIDES"), _T.HIPDNN_TYPE_INT64, "vec"),
       ("window", _a("RESAMPLE_WINDOW_DIMS"), _T.HIPDNN_TYPE_INT64, "vec"),
       ("padding_mode", _a("RESAMPLE_PADDING_MODE"), _T.HIPDNN_TYPE_PADDING_MODE, PaddingMode))
PARAMS = {
    "layernorm_backward": (("normalized_dim_count", _a("LAYERNORM_BACKWARD_NORMALIZED_DIM_COUNT_EXT"),
                            _T.HIPDNN_TYPE_INT64, "int"),),
    "rmsnorm_backward": (),
    "resample": _RS + (("generate_index", _a("RESAMPLE_GENERATE_INDEX_EXT"),
                        _T.HIPDNN_TYPE_BOOLEAN, "bool"),),
    "resample_backward": _RS,
    "block_scale_quantize": (
        ("block_size", _a("OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE"), _T.HIPDNN_TYPE_INT64, "int"),
        ("axis", _a("OPERATION_BLOCK_SCALE_QUANTIZE_AXIS_EXT"), _T.HIPDNN_TYPE_INT64, "int"),
        ("transpose", _a("OPERATION_BLOCK_SCALE_QUANTIZE_TRANSPOSE_EXT"), _T.HIPDNN_TYPE_BOOLEAN,
         "bool")),
    "block_scale_dequantize": (
        ("block_size", _a("OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE"), _T.HIPDNN_TYPE_INT64, "vec"),
        ("is_negative_scale", _a("OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE"),
         _T.HIPDNN_TYPE_BOOLEAN, "bool")),
    "moe_grouped_matmul": (
        ("mode", _a("OPERATION_MOE_GROUPED_MATMUL_MODE"), _T.HIPDNN_TYPE_MOE_GROUPED_MATMUL_MODE,
         MoeGroupedMatmulMode),
        ("top_k", _a("OPERATION_MOE_GROUPED_MATMUL_TOP_K"), _T.HIPDNN_TYPE_INT64, "int")),
    "moe_grouped_matmul_backward": (),
}


def lower_params(node):
    """(attribute, type, values) for a node of a PARAMS kind (unset values are skipped)."""
    out = []
    for key, attr, atype, vk in PARAMS[node.kind]:
        v = node.attrs.get(key)
        if v is None:
            continue
        if vk == "vec":
            out.append((attr, atype, [int(e) for e in v]))
        elif vk == "int":
            out.append((attr, atype, [int(v)]))
        elif vk == "bool":
            out.append((attr, atype, [bool(v)]))
        else:
            out.append((attr, atype, [int(vk(v))]))
    return out
# ---- end issue 17 parameters ----

BY_OPTYPE = {int(s.optype): s for s in SPECS.values()}

# SDPA parameters: (key, forward attribute, backward attribute or None, attribute type name)
SDPA_PARAMS = (
    ("generate_stats", "SDPA_FWD_GENERATE_STATS_EXT", None, "BOOLEAN"),
    ("alibi_mask", "SDPA_FWD_ALIBI_MASK_EXT", "SDPA_BWD_ALIBI_MASK_EXT", "BOOLEAN"),
    ("padding_mask", "SDPA_FWD_PADDING_MASK_EXT", "SDPA_BWD_PADDING_MASK_EXT", "BOOLEAN"),
    ("causal_mask", "SDPA_FWD_CAUSAL_MASK_EXT", "SDPA_BWD_CAUSAL_MASK_EXT", "BOOLEAN"),
    ("causal_mask_bottom_right", "SDPA_FWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT",
     "SDPA_BWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT", "BOOLEAN"),
    ("dropout_probability", "SDPA_FWD_DROPOUT_PROBABILITY_EXT",
     "SDPA_BWD_DROPOUT_PROBABILITY_EXT", "FLOAT"),
    ("attn_scale_value", "SDPA_FWD_ATTN_SCALE_VALUE_EXT", "SDPA_BWD_ATTN_SCALE_VALUE_EXT", "FLOAT"),
    ("left_bound", "SDPA_FWD_LEFT_BOUND_EXT", "SDPA_BWD_LEFT_BOUND_EXT", "INT64"),
    ("right_bound", "SDPA_FWD_RIGHT_BOUND_EXT", "SDPA_BWD_RIGHT_BOUND_EXT", "INT64"),
    ("diagonal_alignment", "SDPA_FWD_DIAGONAL_ALIGNMENT_EXT", "SDPA_BWD_DIAGONAL_ALIGNMENT_EXT",
     "DIAGONAL_ALIGNMENT_EXT"),
)
