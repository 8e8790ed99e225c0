"""Operation descriptors (spec §1.13), table-driven.

Each operation is ONE declaration in :data:`OPS`: its descriptor type, its operation type (answered
by HIPDNN_ATTR_OPERATION_TYPE_EXT), the FlatBuffers attributes table it serializes to (the
NodeAttributes union member of the same name) and its attributes.  An attribute is
``A(name, kind, field, mandatory, ...)``:

* ``name``: the hipdnnBackendAttributeName_t member (without the ``HIPDNN_ATTR_`` prefix);
* ``kind``: ``tensor`` (one finalized TENSOR descriptor), ``tensors`` (n >= 1 of them), ``i64``,
  ``i64vec``, ``enum`` (``enum=`` the C enum class, ``atype=`` its attribute type), ``dtype``
  (hipdnnDataType_t), ``float`` (FLOAT or DOUBLE accepted), ``bool``, ``string`` (CHAR), ``bytes``
  (CHAR, opaque);
* ``field``: the schema field (``@compute`` = the Node's ``compute_data_type``);
* ``mandatory``: finalize fails with ``"<label> not set"`` (BAD) when unset.

Adding an operation = adding one entry to :data:`OPS`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field as dfield

from ..._generated import enums as E
from ..._generated.enums import AttributeName, AttributeType as T, DataType, DescriptorType as DT
from ..._generated.enums import OperationType as OT
from ...errors import BadParamError, NotInitializedError, NotSupportedError
from ...schemas._generated.schema_table import ENUMS, TABLES, UNIONS
from .. import attrs, graph_fb
from ..attrs import attr_name
from .base import Descriptor
from .tensor import TensorDescriptor

_TENSOR_KINDS = (DT.HIPDNN_BACKEND_TENSOR_DESCRIPTOR,)

# ----------------------------------------------------------------------------- enum mappings
# hipdnnDataType_t <-> FlatBuffers DataType (by name; BOOLEAN has no FlatBuffers value: UNSET).
_FB_DT = {n: v for n, v in ENUMS["DataType"][1]}
_DT_C2FB = {}
for _m in DataType:
    _short = _m.name[len("HIPDNN_DATA_"):]
    _short = _short[:-4] if _short.endswith("_EXT") else _short
    _DT_C2FB[int(_m)] = _FB_DT.get(_short, 0)
_DT_FB2C = {fb: c for c, fb in _DT_C2FB.items() if fb}


def dtype_to_fb(c):
    return _DT_C2FB.get(int(c), 0) if c is not None else 0


def dtype_from_fb(fb):
    """None for UNSET / unknown values."""
    return _DT_FB2C.get(fb)


class _NormFwdPhase:  # hipdnnNormFwdPhase_t (not in the pinned ABI facts; values from the header)
    _value2member_map_ = {1: "HIPDNN_NORM_FWD_INFERENCE", 2: "HIPDNN_NORM_FWD_TRAINING"}


@dataclass(frozen=True)
class EnumMap:
    atype: int
    valid: frozenset       # accepted C values
    offset: int = 0        # FlatBuffers value = C value + offset
    also_int64: bool = False


def _enum(cls, atype, offset=0, also_int64=False):
    return EnumMap(atype, frozenset(int(v) for v in cls._value2member_map_), offset, also_int64)


CONV_MODE = _enum(E.ConvolutionMode, T.HIPDNN_TYPE_CONVOLUTION_MODE, 1, True)
POINTWISE_MODE = _enum(E.PointwiseMode, T.HIPDNN_TYPE_POINTWISE_MODE)
REDUCTION_OP = _enum(E.ReduceTensorOp, T.HIPDNN_TYPE_REDUCTION_OPERATOR_TYPE)
RESAMPLE_MODE = _enum(E.ResampleMode, T.HIPDNN_TYPE_RESAMPLE_MODE)
PADDING_MODE = _enum(E.PaddingMode, T.HIPDNN_TYPE_PADDING_MODE)
NORM_PHASE = _enum(_NormFwdPhase, T.HIPDNN_TYPE_NORM_FWD_PHASE)
MOE_MODE = _enum(E.MoeGroupedMatmulMode, T.HIPDNN_TYPE_MOE_GROUPED_MATMUL_MODE)
DIAG_ALIGN = _enum(E.DiagonalAlignment, T.HIPDNN_TYPE_DIAGONAL_ALIGNMENT_EXT)
ATTN_IMPL = _enum(E.AttentionImplementation, T.HIPDNN_TYPE_ATTENTION_IMPLEMENTATION_EXT)


# ----------------------------------------------------------------------------- declarations
@dataclass
class A:
    name: str
    kind: str
    field: str
    mandatory: bool = False
    enum: EnumMap | None = None
    # filled in by OpSpec
    attr: int = 0
    label: str = ""
    optional: bool = False    # schema `= null` scalar: absent = unset
    stype: str = ""           # schema scalar / element type


@dataclass
class OpSpec:
    dtype: int
    optype: int
    table: str
    attrs: list
    cls_name: str = ""
    union_index: int = 0
    by_attr: dict = dfield(default_factory=dict)

    def __post_init__(self):
        self.union_index = next(i for i, m in UNIONS["NodeAttributes"].items() if m[2] == self.table)
        fields = {f[1]: f for f in TABLES[self.table]}
        opt = graph_fb.OPTIONAL_SCALARS.get(self.table, set())
        for a in self.attrs:
            a.attr = int(getattr(AttributeName, "HIPDNN_ATTR_" + a.name))
            if a.field != "@compute":
                f = fields[a.field]  # KeyError = a typo in the table: fail at import
                a.stype = graph_fb.scalar_type(f[5]) if f[5] else "string"
                a.optional = a.field in opt
            if a.kind == "tensor" or a.kind == "tensors":
                a.label = a.field.replace("_tensor_uids", "").replace("_tensor_uid", "").upper() + \
                    (" tensors" if a.kind == "tensors" else " tensor")
            elif a.field == "@compute":
                a.label = "compute data type"
            else:
                a.label = a.field
            self.by_attr[a.attr] = a
        self.cls_name = self.table.replace("Attributes", "") + "OperationDescriptor"


def conv_params(prefix="CONVOLUTION_"):
    return [A(prefix + "COMP_TYPE", "dtype", "@compute", True),
            A(prefix + "CONV_MODE", "enum", "conv_mode", True, CONV_MODE),
            A(prefix + "DILATIONS", "i64vec", "dilation", True),
            A(prefix + "FILTER_STRIDES", "i64vec", "stride", True),
            A(prefix + "POST_PADDINGS", "i64vec", "post_padding", True),
            A(prefix + "PRE_PADDINGS", "i64vec", "pre_padding", True)]


def resample_params(generate_index):
    p = [A("RESAMPLE_MODE", "enum", "resample_mode", True, RESAMPLE_MODE),
         A("RESAMPLE_PRE_PADDINGS", "i64vec", "pre_padding", True),
         A("RESAMPLE_POST_PADDINGS", "i64vec", "post_padding", True),
         A("RESAMPLE_STRIDES", "i64vec", "stride", True),
         A("RESAMPLE_WINDOW_DIMS", "i64vec", "window", True),
         A("RESAMPLE_PADDING_MODE", "enum", "padding_mode", False, PADDING_MODE),
         A("RESAMPLE_COMP_TYPE", "dtype", "@compute")]
    if generate_index:
        p.append(A("RESAMPLE_GENERATE_INDEX_EXT", "bool", "generate_index"))
    return p


def _t(name, fld, mandatory=True):
    return A(name, "tensor", fld + "_tensor_uid", mandatory)


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
_SDPA_BWD_OPT = [("SCALE_EXT", "scale"), ("ATTN_MASK_EXT", "attn_mask"), ("SEQ_LEN_Q_EXT", "seq_len_q"),
                 ("SEQ_LEN_KV_EXT", "seq_len_kv"), ("SEED_EXT", "seed"), ("OFFSET_EXT", "offset"),
                 ("DROPOUT_MASK_EXT", "dropout_mask"), ("DROPOUT_SCALE_EXT", "dropout_scale"),
                 ("DROPOUT_SCALE_INV_EXT", "dropout_scale_inv"), ("DBIAS_EXT", "dbias")]

OPS = [
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_CONVOLUTION_FORWARD_EXT, "ConvolutionFwdAttributes",
           [_t("OPERATION_CONVOLUTION_FORWARD_X", "x"), _t("OPERATION_CONVOLUTION_FORWARD_W", "w"),
            _t("OPERATION_CONVOLUTION_FORWARD_Y", "y"), *conv_params()]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_DATA_EXT, "ConvolutionBwdAttributes",
           [_t("OPERATION_CONVOLUTION_BWD_DATA_DY", "dy"), _t("OPERATION_CONVOLUTION_BWD_DATA_W", "w"),
            _t("OPERATION_CONVOLUTION_BWD_DATA_DX", "dx"), *conv_params()]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_CONVOLUTION_BACKWARD_WEIGHTS_EXT, "ConvolutionWrwAttributes",
           [_t("OPERATION_CONVOLUTION_BWD_FILTER_X", "x"), _t("OPERATION_CONVOLUTION_BWD_FILTER_DY", "dy"),
            _t("OPERATION_CONVOLUTION_BWD_FILTER_DW", "dw"), *conv_params()]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_DESCRIPTOR_EXT,
           OT.HIPDNN_OPERATION_TYPE_BATCHNORM_INFERENCE_EXT, "BatchnormInferenceAttributes",
           [_t("OPERATION_BATCHNORM_INFERENCE_X_EXT", "x"), _t("OPERATION_BATCHNORM_INFERENCE_MEAN_EXT", "mean"),
            _t("OPERATION_BATCHNORM_INFERENCE_INV_VARIANCE_EXT", "inv_variance"),
            _t("OPERATION_BATCHNORM_INFERENCE_SCALE_EXT", "scale"),
            _t("OPERATION_BATCHNORM_INFERENCE_BIAS_EXT", "bias"), _t("OPERATION_BATCHNORM_INFERENCE_Y_EXT", "y"),
            A("BATCHNORM_INF_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_INFERENCE_VARIANCE_DESCRIPTOR_EXT,
           OT.HIPDNN_OPERATION_TYPE_BATCHNORM_INFERENCE_VARIANCE_EXT, "BatchnormInferenceAttributesVarianceExt",
           [_t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_X_EXT", "x"),
            _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_MEAN_EXT", "mean"),
            _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_VARIANCE_EXT", "variance"),
            _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_SCALE_EXT", "scale"),
            _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_BIAS_EXT", "bias"),
            _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_Y_EXT", "y"),
            _t("OPERATION_BATCHNORM_INFERENCE_VARIANCE_EPSILON_EXT", "epsilon"),
            A("BATCHNORM_INF_VAR_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_DESCRIPTOR_EXT,
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
            A("BATCHNORM_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_BATCHNORM_BACKWARD_DESCRIPTOR_EXT,
           OT.HIPDNN_OPERATION_TYPE_BATCHNORM_BACKWARD_EXT, "BatchnormBackwardAttributes",
           [_t("OPERATION_BATCHNORM_BACKWARD_DY_EXT", "dy"), _t("OPERATION_BATCHNORM_BACKWARD_X_EXT", "x"),
            _t("OPERATION_BATCHNORM_BACKWARD_MEAN_EXT", "mean", False),
            _t("OPERATION_BATCHNORM_BACKWARD_INV_VARIANCE_EXT", "inv_variance", False),
            _t("OPERATION_BATCHNORM_BACKWARD_SCALE_EXT", "scale"),
            A("OPERATION_BATCHNORM_BACKWARD_PEER_STATS_EXT", "tensors", "peer_stats_tensor_uid"),
            _t("OPERATION_BATCHNORM_BACKWARD_DX_EXT", "dx"), _t("OPERATION_BATCHNORM_BACKWARD_DSCALE_EXT", "dscale"),
            _t("OPERATION_BATCHNORM_BACKWARD_DBIAS_EXT", "dbias"),
            A("BATCHNORM_BACKWARD_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_POINTWISE_EXT, "PointwiseAttributes",
           [_t("OPERATION_POINTWISE_IN_0_EXT", "in_0"), _t("OPERATION_POINTWISE_IN_1_EXT", "in_1", False),
            _t("OPERATION_POINTWISE_IN_2_EXT", "in_2", False), _t("OPERATION_POINTWISE_OUT_0_EXT", "out_0"),
            A("POINTWISE_MODE", "enum", "operation", True, POINTWISE_MODE),
            A("POINTWISE_RELU_LOWER_CLIP", "float", "relu_lower_clip"),
            A("POINTWISE_RELU_UPPER_CLIP", "float", "relu_upper_clip"),
            A("POINTWISE_RELU_LOWER_CLIP_SLOPE", "float", "relu_lower_clip_slope"),
            A("POINTWISE_SWISH_BETA", "float", "swish_beta"),
            A("POINTWISE_ELU_ALPHA", "float", "elu_alpha"),
            A("POINTWISE_SOFTPLUS_BETA", "float", "softplus_beta"),
            A("POINTWISE_AXIS", "i64", "axis_tensor_uid"),
            A("POINTWISE_MATH_PREC", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_MATMUL_EXT, "MatmulAttributes",
           [_t("OPERATION_MATMUL_ADESC", "a"), _t("OPERATION_MATMUL_BDESC", "b"),
            _t("OPERATION_MATMUL_CDESC", "c"), A("MATMUL_COMP_TYPE", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_REDUCTION_EXT, "ReductionAttributes",
           [_t("OPERATION_REDUCTION_XDESC", "in"), _t("OPERATION_REDUCTION_YDESC", "out"),
            A("REDUCTION_OPERATOR", "enum", "mode", True, REDUCTION_OP),
            A("REDUCTION_IS_DETERMINISTIC", "bool", "is_deterministic"),
            A("REDUCTION_COMP_TYPE", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_RESAMPLE_FWD, "ResampleFwdAttributes",
           [_t("OPERATION_RESAMPLE_FWD_XDESC", "x"), _t("OPERATION_RESAMPLE_FWD_YDESC", "y"),
            _t("OPERATION_RESAMPLE_FWD_IDXDESC", "index", False), *resample_params(True)]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_RESAMPLE_BWD_EXT, "ResampleBwdAttributes",
           [_t("OPERATION_RESAMPLE_BWD_DYDESC", "dy"), _t("OPERATION_RESAMPLE_BWD_DXDESC", "dx"),
            _t("OPERATION_RESAMPLE_BWD_IDXDESC", "index", False), *resample_params(False)]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_LAYERNORM_DESCRIPTOR_EXT,
           OT.HIPDNN_OPERATION_TYPE_LAYERNORM_EXT, "LayernormAttributes",
           [_t("OPERATION_LAYERNORM_X_EXT", "x"), _t("OPERATION_LAYERNORM_SCALE_EXT", "scale"),
            _t("OPERATION_LAYERNORM_BIAS_EXT", "bias"), _t("OPERATION_LAYERNORM_EPSILON_EXT", "epsilon"),
            _t("OPERATION_LAYERNORM_Y_EXT", "y"), _t("OPERATION_LAYERNORM_MEAN_EXT", "mean", False),
            _t("OPERATION_LAYERNORM_INV_VARIANCE_EXT", "inv_variance", False),
            A("OPERATION_LAYERNORM_FWD_PHASE_EXT", "enum", "forward_phase", True, NORM_PHASE),
            A("OPERATION_LAYERNORM_NORMALIZED_DIM_COUNT_EXT", "i64", "normalized_dim_count"),
            A("LAYERNORM_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_LAYERNORM_BACKWARD_DESCRIPTOR_EXT,
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
            A("LAYERNORM_BACKWARD_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_RMSNORM_DESCRIPTOR_EXT,
           OT.HIPDNN_OPERATION_TYPE_RMSNORM_EXT, "RMSNormAttributes",
           [_t("OPERATION_RMSNORM_X_EXT", "x"), _t("OPERATION_RMSNORM_SCALE_EXT", "scale"),
            _t("OPERATION_RMSNORM_EPSILON_EXT", "epsilon"), _t("OPERATION_RMSNORM_Y_EXT", "y"),
            _t("OPERATION_RMSNORM_BIAS_EXT", "bias", False), _t("OPERATION_RMSNORM_INV_RMS_EXT", "inv_rms", False),
            A("OPERATION_RMSNORM_FWD_PHASE_EXT", "enum", "forward_phase", True, NORM_PHASE),
            A("RMSNORM_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_RMSNORM_BACKWARD_DESCRIPTOR_EXT,
           OT.HIPDNN_OPERATION_TYPE_RMSNORM_BACKWARD_EXT, "RMSNormBackwardAttributes",
           [_t("OPERATION_RMSNORM_BACKWARD_DY_EXT", "dy"), _t("OPERATION_RMSNORM_BACKWARD_X_EXT", "x"),
            _t("OPERATION_RMSNORM_BACKWARD_SCALE_EXT", "scale"),
            _t("OPERATION_RMSNORM_BACKWARD_INV_RMS_EXT", "inv_rms"),
            _t("OPERATION_RMSNORM_BACKWARD_DX_EXT", "dx"), _t("OPERATION_RMSNORM_BACKWARD_DSCALE_EXT", "dscale"),
            _t("OPERATION_RMSNORM_BACKWARD_DBIAS_EXT", "dbias", False),
            A("RMSNORM_BACKWARD_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
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
            A("SDPA_FWD_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR_EXT,
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
            A("SDPA_BWD_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_BLOCK_SCALE_QUANTIZE_EXT, "BlockScaleQuantizeAttributes",
           [_t("OPERATION_BLOCK_SCALE_QUANTIZE_XDESC", "x"), _t("OPERATION_BLOCK_SCALE_QUANTIZE_YDESC", "y"),
            _t("OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC", "scale"),
            A("OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE", "i64", "block_size", True),
            A("OPERATION_BLOCK_SCALE_QUANTIZE_AXIS_EXT", "i64", "axis"),
            A("OPERATION_BLOCK_SCALE_QUANTIZE_TRANSPOSE_EXT", "bool", "transpose"),
            A("OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_BLOCK_SCALE_DEQUANTIZE_EXT, "BlockScaleDequantizeAttributes",
           [_t("OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC", "x"),
            _t("OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC", "scale"),
            _t("OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC", "y"),
            A("OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE", "i64vec", "block_size", True),
            A("OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE", "bool", "is_negative_scale"),
            A("OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_CUSTOM_OP_DESCRIPTOR_EXT,
           OT.HIPDNN_OPERATION_TYPE_CUSTOM_OP_EXT, "CustomOpAttributes",
           [A("OPERATION_CUSTOM_OP_INPUTS_EXT", "tensors", "input_tensor_uids", True),
            A("OPERATION_CUSTOM_OP_OUTPUTS_EXT", "tensors", "output_tensor_uids", True),
            A("OPERATION_CUSTOM_OP_ID_EXT", "string", "custom_op_id", True),
            A("OPERATION_CUSTOM_OP_DATA_EXT", "bytes", "data"),
            A("CUSTOM_OP_COMP_TYPE_EXT", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_EXT, "MoeGroupedMatmulAttributes",
           [_t("OPERATION_MOE_GROUPED_MATMUL_TOKEN_DESC", "token"),
            _t("OPERATION_MOE_GROUPED_MATMUL_WEIGHT_DESC", "weight"),
            _t("OPERATION_MOE_GROUPED_MATMUL_FIRST_TOKEN_OFFSET_DESC", "first_token_offset"),
            _t("OPERATION_MOE_GROUPED_MATMUL_TOKEN_INDEX_DESC", "token_index", False),
            _t("OPERATION_MOE_GROUPED_MATMUL_TOKEN_KS_DESC", "token_ks", False),
            _t("OPERATION_MOE_GROUPED_MATMUL_OUTPUT_DESC", "output"),
            A("OPERATION_MOE_GROUPED_MATMUL_MODE", "enum", "mode", False, MOE_MODE),
            A("OPERATION_MOE_GROUPED_MATMUL_TOP_K", "i64", "top_k"),
            A("OPERATION_MOE_GROUPED_MATMUL_MATH_PREC", "dtype", "@compute")]),
    OpSpec(DT.HIPDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR,
           OT.HIPDNN_OPERATION_TYPE_MOE_GROUPED_MATMUL_BWD_EXT, "MoeGroupedMatmulBwdAttributes",
           [_t("OPERATION_MOE_GROUPED_MATMUL_BWD_DOUTPUT_DESC", "doutput"),
            _t("OPERATION_MOE_GROUPED_MATMUL_BWD_TOKEN_DESC", "token"),
            _t("OPERATION_MOE_GROUPED_MATMUL_BWD_FIRST_TOKEN_OFFSET_DESC", "first_token_offset"),
            _t("OPERATION_MOE_GROUPED_MATMUL_BWD_DWEIGHT_DESC", "dweight"),
            A("OPERATION_MOE_GROUPED_MATMUL_BWD_MATH_PREC", "dtype", "@compute")]),
]

_OPNAME = int(AttributeName.HIPDNN_ATTR_OPERATION_NAME_EXT)
_OPTYPE = int(AttributeName.HIPDNN_ATTR_OPERATION_TYPE_EXT)
_F32 = struct.Struct("<f")


def _f32(v: float) -> float:
    """Round to float32 (what the schema stores)."""
    try:
        return _F32.unpack(_F32.pack(v))[0]
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


# ----------------------------------------------------------------------------- the descriptor
class OperationDescriptor(Descriptor):
    """Base of every operation descriptor (the IGraphOperation of the real backend)."""
    DESCRIPTOR_TYPE = None
    SPEC: OpSpec = None
    REFINALIZE_ALLOWED = True

    def __init__(self):
        super().__init__()
        self.name = ""
        self.values: dict = {}     # attribute name (int) -> value (tensors: TensorDescriptor / list)

    # ---------------------------------------------------------------- set
    def set_attribute(self, name, atype, count, arr, nbytes):
        if self.finalized:
            raise NotInitializedError(f"{self.NAME}::setAttribute() failed: Already finalized.")
        ctx = f"{self.NAME}::setAttribute({attr_name(name)})"
        if name == _OPNAME:
            self.name = attrs.set_string(ctx, atype, count, arr, nbytes)
            return
        a = self.SPEC.by_attr.get(name)
        if a is None:
            raise NotSupportedError(f"{self.NAME}::setAttribute() failed: {attr_name(name)} "
                                    f"is not supported.")
        self.values[name] = _SET[a.kind](a, ctx, atype, count, arr, nbytes)

    # ---------------------------------------------------------------- finalize
    def _finalize(self):
        for a in self.SPEC.attrs:
            if a.mandatory and self.values.get(a.attr) is None:
                raise BadParamError(f"{self.NAME}::finalize() failed: {a.label} not set")

    # ---------------------------------------------------------------- get
    def get_attribute(self, name, atype, req, count_ptr, arr):
        if not self.finalized:
            raise NotInitializedError(f"{self.NAME}::getAttribute() failed: Not finalized.")
        ctx = f"{self.NAME}::getAttribute({attr_name(name)})"
        if name == _OPTYPE:
            attrs.get_enum(ctx, atype, req, count_ptr, arr, self.SPEC.optype, T.HIPDNN_TYPE_OPERATION_TYPE_EXT)
            return
        if name == _OPNAME:
            attrs.get_string(ctx, atype, req, count_ptr, arr, self.name)
            return
        a = self.SPEC.by_attr.get(name)
        if a is None:
            raise NotSupportedError(f"{self.NAME}::getAttribute() failed: {attr_name(name)} "
                                    f"is not supported.")
        _GET[a.kind](a, ctx, atype, req, count_ptr, arr, self.values.get(name))

    # ---------------------------------------------------------------- graph support
    def tensors(self):
        """The tensor implementation objects this op references, in declaration order."""
        res = []
        for a in self.SPEC.attrs:
            v = self.values.get(a.attr)
            if v is None:
                continue
            if a.kind == "tensor":
                res.append(v)
            elif a.kind == "tensors":
                res.extend(v)
        return res

    def compute_data_type(self):
        for a in self.SPEC.attrs:
            if a.field == "@compute":
                return self.values.get(a.attr)
        return None

    def to_node(self) -> dict:
        """The FlatBuffers Node of this op (graph_fb dict form)."""
        t = {}
        compute = None
        for a in self.SPEC.attrs:
            v = self.values.get(a.attr)
            if a.field == "@compute":
                compute = v
                continue
            if v is None:
                continue
            k = a.kind
            if k == "tensor":
                t[a.field] = v.uid
            elif k == "tensors":
                t[a.field] = [x.uid for x in v]
            elif k == "enum":
                t[a.field] = v + a.enum.offset
            elif k == "dtype":
                t[a.field] = dtype_to_fb(v)
            elif k == "bytes":
                t[a.field] = list(v)
            elif k == "i64vec":
                t[a.field] = list(v)
            else:
                t[a.field] = v
        node = {}
        if self.name:
            node["name"] = self.name
        if compute is not None:
            node["compute_data_type"] = dtype_to_fb(compute)
        node["attributes"] = (self.SPEC.union_index, t)
        return node

    @classmethod
    def from_node(cls, node: dict, tensors_by_uid: dict, where: str):
        """Rebuild a finalized op from a Node dict; ``tensors_by_uid``: uid -> TensorDescriptor."""
        op = cls()
        op.name = node.get("name", "")
        _, t = node["attributes"]
        if t is None:
            t = {}

        def tensor(uid):
            x = tensors_by_uid.get(uid)
            if x is None:
                raise BadParamError(f"{where} references tensor uid {uid}, which the graph does not have")
            return x

        for a in cls.SPEC.attrs:
            if a.field == "@compute":
                v = dtype_from_fb(node.get("compute_data_type", 0))
                if v is not None:
                    op.values[a.attr] = v
                continue
            present = a.field in t
            if not present and (a.optional or a.kind not in ("tensor",) and not a.mandatory):
                continue
            raw = t.get(a.field)
            k = a.kind
            if k == "tensor":
                op.values[a.attr] = tensor(raw if raw is not None else 0)
            elif k == "tensors":
                if raw:
                    op.values[a.attr] = [tensor(u) for u in raw]
            elif k == "enum":
                raw = raw or 0
                c = raw - a.enum.offset
                if c in a.enum.valid:
                    op.values[a.attr] = c
            elif k == "dtype":
                v = dtype_from_fb(raw or 0)
                if v is not None:
                    op.values[a.attr] = v
            elif k == "bytes":
                op.values[a.attr] = bytes(raw or [])
            elif k == "i64vec":
                if raw is not None:
                    op.values[a.attr] = tuple(raw)
            elif k == "string":
                if raw is not None:
                    op.values[a.attr] = raw
            elif k == "bool":
                op.values[a.attr] = bool(raw)
            elif k == "float":
                op.values[a.attr] = float(raw or 0.0)
            else:
                op.values[a.attr] = int(raw or 0)
        op.finalized = True
        return op


# ----------------------------------------------------------------------------- per-kind set
def _fits(a, ctx, v):
    lo, hi = graph_fb.RANGE.get(a.stype, (-2 ** 63, 2 ** 63 - 1))
    if not lo <= v <= hi:
        raise BadParamError(f"{ctx}: value {v} out of range for the schema field {a.field} ({a.stype})")
    return v


def _set_tensor(a, ctx, atype, count, arr, nbytes):
    return attrs.set_descriptor(ctx, atype, count, arr, nbytes, _TENSOR_KINDS, null_status=BadParamError)


def _set_tensors(a, ctx, atype, count, arr, nbytes):
    ids = attrs.set_pointer_vector(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    if count < 1:
        raise BadParamError(f"{ctx}: elementCount must be positive")
    return [attrs.resolve_descriptor(ctx, i, _TENSOR_KINDS, null_status=BadParamError) for i in ids]


def _set_i64(a, ctx, atype, count, arr, nbytes):
    return _fits(a, ctx, attrs.set_int64(ctx, atype, count, arr, nbytes))


def _set_i64vec(a, ctx, atype, count, arr, nbytes):
    return tuple(_fits(a, ctx, v) for v in attrs.set_int64_vector(ctx, atype, count, arr, nbytes))


def _set_enum(a, ctx, atype, count, arr, nbytes):
    m = a.enum
    if m.also_int64 and atype == T.HIPDNN_TYPE_INT64:
        v = attrs.set_int64(ctx, atype, count, arr, nbytes)
    else:
        if atype == m.atype and arr and count == 1 and nbytes == 0:
            # the C shim does not know the element size of every enum type (NORM_FWD_PHASE):
            # all of them are 4-byte C enums
            nbytes = 4
        v = attrs.set_enum(ctx, atype, count, arr, nbytes, m.atype)
    if v not in m.valid:
        raise BadParamError(f"{ctx}: invalid value {v}")
    return v


def _set_dtype(a, ctx, atype, count, arr, nbytes):
    v = attrs.set_enum(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_DATA_TYPE)
    if v not in DataType._value2member_map_:
        raise BadParamError(f"{ctx}: invalid data type {v}")
    return DataType(v)


def _set_float(a, ctx, atype, count, arr, nbytes):
    if atype == T.HIPDNN_TYPE_DOUBLE:
        return _f32(attrs.set_double(ctx, atype, count, arr, nbytes))
    return attrs.set_float(ctx, atype, count, arr, nbytes)


def _set_bool(a, ctx, atype, count, arr, nbytes):
    return attrs.set_bool(ctx, atype, count, arr, nbytes)


def _set_string(a, ctx, atype, count, arr, nbytes):
    return attrs.set_string(ctx, atype, count, arr, nbytes)


def _set_bytes(a, ctx, atype, count, arr, nbytes):
    return attrs.set_bytes(ctx, atype, count, arr, nbytes)


_SET = {"tensor": _set_tensor, "tensors": _set_tensors, "i64": _set_i64, "i64vec": _set_i64vec,
        "enum": _set_enum, "dtype": _set_dtype, "float": _set_float, "bool": _set_bool,
        "string": _set_string, "bytes": _set_bytes}


# ----------------------------------------------------------------------------- per-kind get
def _get_tensor(a, ctx, atype, req, cnt, arr, v):
    """Tensor slot (spec §1.3 generic tensor-ref helper): size query (NULL array or req 0) -> 1;
    fetch needs req >= 1 and writes one new wrapper; an unset optional slot -> count 0."""
    attrs.get_optional_descriptor(ctx, atype, req, cnt, arr, v)


def _get_tensors(a, ctx, atype, req, cnt, arr, v):
    attrs.get_descriptor_array(ctx, atype, req, cnt, arr, list(v or ()))


def _opt(ctx, atype, want, req, cnt, arr, packed):
    attrs.get_optional(ctx, atype, want, req, cnt, arr, packed)


def _get_i64(a, ctx, atype, req, cnt, arr, v):
    _opt(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr, None if v is None else attrs.pack_i64(v))


def _get_i64vec(a, ctx, atype, req, cnt, arr, v):
    attrs.get_int64_vector(ctx, atype, req, cnt, arr, tuple(v or ()))


def _get_enum(a, ctx, atype, req, cnt, arr, v):
    if a.enum.also_int64 and atype == T.HIPDNN_TYPE_INT64:
        _opt(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr, None if v is None else attrs.pack_i64(v))
    else:
        _opt(ctx, atype, a.enum.atype, req, cnt, arr, None if v is None else attrs.pack_i32(v))


def _get_dtype(a, ctx, atype, req, cnt, arr, v):
    _opt(ctx, atype, T.HIPDNN_TYPE_DATA_TYPE, req, cnt, arr, None if v is None else attrs.pack_i32(int(v)))


def _get_float(a, ctx, atype, req, cnt, arr, v):
    if atype == T.HIPDNN_TYPE_DOUBLE:
        _opt(ctx, atype, T.HIPDNN_TYPE_DOUBLE, req, cnt, arr, None if v is None else attrs.pack_f64(v))
    else:
        _opt(ctx, atype, T.HIPDNN_TYPE_FLOAT, req, cnt, arr, None if v is None else attrs.pack_f32(v))


def _get_bool(a, ctx, atype, req, cnt, arr, v):
    _opt(ctx, atype, T.HIPDNN_TYPE_BOOLEAN, req, cnt, arr, None if v is None else (b"\x01" if v else b"\x00"))


def _get_string(a, ctx, atype, req, cnt, arr, v):
    attrs.get_string(ctx, atype, req, cnt, arr, v or "")


def _get_bytes(a, ctx, atype, req, cnt, arr, v):
    """Opaque CHAR payload: size query -> byte count; fetch copies min(req, n) bytes."""
    if atype != T.HIPDNN_TYPE_CHAR:
        raise BadParamError(f"{ctx}: attributeType mismatch (expected HIPDNN_TYPE_CHAR, "
                            f"got {attrs.type_name(atype)})")
    data = bytes(v or b"")
    if not arr or req == 0:
        attrs._size_query(ctx, cnt, len(data))
        return
    if req < 0:
        raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
    k = min(req, len(data))
    attrs._write(arr, data[:k])
    if cnt:
        cnt[0] = k


_GET = {"tensor": _get_tensor, "tensors": _get_tensors, "i64": _get_i64, "i64vec": _get_i64vec,
        "enum": _get_enum, "dtype": _get_dtype, "float": _get_float, "bool": _get_bool,
        "string": _get_string, "bytes": _get_bytes}


# ----------------------------------------------------------------------------- class creation
BY_DESCRIPTOR: dict[int, type] = {}
BY_UNION: dict[int, type] = {}
for _spec in OPS:
    _cls = type(_spec.cls_name, (OperationDescriptor,),
                {"DESCRIPTOR_TYPE": _spec.dtype, "SPEC": _spec, "NAME": _spec.cls_name,
                 "__module__": __name__})
    globals()[_spec.cls_name] = _cls
    BY_DESCRIPTOR[int(_spec.dtype)] = _cls
    BY_UNION[_spec.union_index] = _cls

assert isinstance(TensorDescriptor, type)
