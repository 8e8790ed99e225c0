"""Operation builders: every ``Graph`` method that adds a node (conv, batchnorm, matmul,
reduction, norms, pointwise and its named shortcuts)."""
from __future__ import annotations

from ..._generated.enums import (ConvolutionMode, DataType, DiagonalAlignment, MoeGroupedMatmulMode,
                                 PaddingMode, ReduceTensorOp, ResampleMode)
from ...errors import BadParamError, NotSupportedError
from ...schemas.catalog import NormFwdPhase
from .. import _infer
from ..tensor import Tensor, data_type_of
from ._types import _enum_arg, _pw


def _sdpa_attrs(what, attn_scale, use_causal_mask, use_causal_mask_bottom_right,
                sliding_window_length, diagonal_alignment, left_bound, right_bound,
                use_padding_mask, seq_len_q, seq_len_kv, attn_mask, use_alibi_mask, dropout):
    """Inputs and attributes shared by sdpa / sdpa_backward (cudnn-frontend pygraph's options)."""
    ins, attrs = {}, {}
    if isinstance(attn_scale, Tensor):
        ins["scale"] = attn_scale
    elif attn_scale is not None:
        attrs["attn_scale_value"] = float(attn_scale)
    if sliding_window_length is not None:
        # cudnn-frontend: a sliding window of w keys ending at the (causal) diagonal
        if left_bound is not None:
            raise BadParamError(f"{what}: sliding_window_length and diagonal_band_left_bound")
        left_bound = int(sliding_window_length)
        if right_bound is None and not use_causal_mask_bottom_right:
            use_causal_mask = True
    if use_padding_mask and (seq_len_q is None or seq_len_kv is None):
        raise BadParamError(f"{what}: use_padding_mask needs seq_len_q and seq_len_kv")
    ins.update(seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, attn_mask=attn_mask)
    attrs.update(causal_mask=bool(use_causal_mask),
                 causal_mask_bottom_right=bool(use_causal_mask_bottom_right),
                 padding_mask=bool(use_padding_mask), alibi_mask=bool(use_alibi_mask),
                 left_bound=None if left_bound is None else int(left_bound),
                 right_bound=None if right_bound is None else int(right_bound))
    if diagonal_alignment is not None:
        attrs["diagonal_alignment"] = DiagonalAlignment(diagonal_alignment)
    if dropout is not None:
        dropout = tuple(dropout)
        if len(dropout) == 3:
            p, seed, offset = dropout
            if not 0.0 <= float(p) < 1.0:
                raise BadParamError(f"{what}: dropout probability {p} not in [0, 1)")
            attrs["dropout_probability"] = float(p)
            ins.update(seed=seed, offset=offset)
        elif len(dropout) == 2:
            mask, scale = dropout
            ins.update(dropout_mask=mask, dropout_scale=scale)
        else:
            raise BadParamError(f"{what}: dropout is (probability, seed, offset) or (mask, scale)")
    return ins, attrs


def _alias(what, key, value, alias, other):
    """``value`` of argument ``key``, also given as cudnn-frontend's ``alias`` (one of them)."""
    if value is not None and other is not None:
        raise TypeError(f"{what}(): {key} and {alias} are the same argument")
    if value is None and other is None:
        raise TypeError(f"{what}() needs {key} (or {alias})")
    return value if value is not None else other


def _two(what, args, kw, names, compute_data_type, name):
    """(x, y, compute_data_type, name) of a binary shortcut called with cudnn-frontend's
    positions / names (``names``) or this frontend's earlier keywords ``a`` / ``b``."""
    first, second = names
    args = list(args)
    if len(args) > 4:
        raise TypeError(f"{what}() takes at most 4 positional arguments ({len(args)} given)")
    vals = {}
    for key, alias in ((first, "a"), (second, "b")):
        v = kw.pop(key, None)
        if alias != key:
            w = kw.pop(alias, None)
            if v is not None and w is not None:
                raise TypeError(f"{what}(): {key} and {alias} are the same argument")
            v = v if v is not None else w
        vals[key] = v
    if kw:
        raise TypeError(f"{what}() got an unexpected keyword argument {next(iter(kw))!r}")
    for key in (first, second):
        if vals[key] is None and args:
            vals[key] = args.pop(0)
    if args:
        compute_data_type = args.pop(0) if compute_data_type is None else compute_data_type
    if args:
        name = args.pop(0) if not name else name
    if vals[first] is None or vals[second] is None:
        raise TypeError(f"{what}() needs {first} and {second}")
    return vals[first], vals[second], compute_data_type, name


class OpsMixin:
    """Mixin of :class:`Graph`."""

    # ================================================================== operations
    def _conv(self, kind, a, b, out_role, padding, pre_padding, post_padding, stride, dilation,
              convolution_mode, compute_data_type, name, roles):
        attrs = dict(padding=padding, pre_padding=pre_padding, post_padding=post_padding,
                     stride=stride, dilation=dilation,
                     conv_mode=_enum_arg(ConvolutionMode, convolution_mode, "HIPDNN_", "convolution mode")
                     if convolution_mode is not None
                     else ConvolutionMode.HIPDNN_CROSS_CORRELATION)
        n = self._add(kind, {roles[0]: a, roles[1]: b}, (out_role,), attrs, compute_data_type, name)
        return n.outputs[out_role]

    def conv_fprop(self, image, weight, padding=None, stride=None, dilation=None, *, pre_padding=None,
                   post_padding=None, convolution_mode=None, compute_data_type=None, name=""):
        """y = conv(image x, weight w); y dims are inferred."""
        return self._conv("conv_fprop", image, weight, "y", padding, pre_padding, post_padding,
                          stride, dilation, convolution_mode, compute_data_type, name, ("x", "w"))

    def conv_dgrad(self, loss, filter, padding=None, stride=None, dilation=None, *, pre_padding=None,
                   post_padding=None, convolution_mode=None, compute_data_type=None, name=""):
        """dx from dy (loss) and w; dx dims are inferred (the smallest consistent input; set them
        with ``set_dim`` when the forward had a remainder)."""
        return self._conv("conv_dgrad", loss, filter, "dx", padding, pre_padding, post_padding,
                          stride, dilation, convolution_mode, compute_data_type, name, ("dy", "w"))

    def conv_wgrad(self, image, loss, padding=None, stride=None, dilation=None, *, pre_padding=None,
                   post_padding=None, convolution_mode=None, compute_data_type=None, name=""):
        """dw from x (image) and dy (loss); dw dims are inferred."""
        return self._conv("conv_wgrad", image, loss, "dw", padding, pre_padding, post_padding,
                          stride, dilation, convolution_mode, compute_data_type, name, ("x", "dy"))

    def batchnorm_inference(self, input, mean, inv_variance, scale, bias, compute_data_type=None,
                            name=""):
        n = self._add("batchnorm_inference", dict(x=input, mean=mean, inv_variance=inv_variance,
                                                  scale=scale, bias=bias), ("y",), {},
                      compute_data_type, name)
        return n.outputs["y"]

    def batchnorm_inference_variance(self, input, mean, variance, scale, bias, epsilon, *,
                                     compute_data_type=None, name=""):
        """Inference batchnorm from the running variance: y = scale * (x - mean) /
        sqrt(variance + epsilon) + bias (epsilon: a tensor or a by-value scalar)."""
        n = self._add("batchnorm_inference_variance",
                      dict(x=input, mean=mean, variance=variance, scale=scale, bias=bias,
                           epsilon=epsilon), ("y",), {}, compute_data_type, name)
        return n.outputs["y"]

    def batchnorm(self, input, scale, bias, epsilon, *, in_running_mean=None, in_running_var=None,
                  momentum=None, peer_stats=None, compute_data_type=None, name=""):
        """Training-mode batchnorm.  Returns ``(y, mean, inv_variance, next_running_mean,
        next_running_var)``; the running outputs are None without running inputs."""
        running = in_running_mean is not None
        if running and (in_running_var is None or momentum is None):
            raise BadParamError("batchnorm: running statistics need in_running_mean, in_running_var "
                                "and momentum")
        outs = ("y", "mean", "inv_variance") + (("next_running_mean", "next_running_variance")
                                                if running else ())
        n = self._add("batchnorm", dict(x=input, scale=scale, bias=bias, epsilon=epsilon,
                                        prev_running_mean=in_running_mean,
                                        prev_running_variance=in_running_var, momentum=momentum),
                      outs, {}, compute_data_type, name,
                      arrays={"peer_stats": list(peer_stats)} if peer_stats else None)
        o = n.outputs
        return (o["y"], o["mean"], o["inv_variance"], o.get("next_running_mean"),
                o.get("next_running_variance"))

    def batchnorm_backward(self, grad, input, scale, mean, inv_variance, peer_stats=None,
                           compute_data_type=None, name=""):
        """Returns ``(dx, dscale, dbias)``."""
        n = self._add("batchnorm_backward", dict(dy=grad, x=input, mean=mean,
                                                 inv_variance=inv_variance, scale=scale),
                      ("dx", "dscale", "dbias"), {}, compute_data_type, name,
                      arrays={"peer_stats": list(peer_stats)} if peer_stats else None)
        o = n.outputs
        return o["dx"], o["dscale"], o["dbias"]

    def matmul(self, A, B, compute_data_type=None, padding=0.0, name=""):
        """C = A @ B with batch broadcasting; C dims are inferred.  ``padding`` (cudnn-frontend's
        value for the rows/columns of M/N/K overrides) has no hipDNN attribute: only 0."""
        if padding:
            raise BadParamError(f"matmul: padding {padding!r}: hipDNN's matmul has no padding "
                                "value (only 0.0)")
        return self._add("matmul", dict(a=A, b=B), ("c",), {}, compute_data_type, name).outputs["c"]

    def _sdpa_outputs(self, node, given):
        """Attach caller-made output tensors (``score_max``, ``rng_dump``, ``dBias``...) to a
        node, as cudnn-frontend's pygraph takes them; their unset dims are inferred."""
        for role, t in given.items():
            if t is None:
                continue
            if not isinstance(t, Tensor):
                raise TypeError(f"{node.name}: {role} must be a Tensor")
            if t._producer is not None:
                raise BadParamError(f"{node.name}: {role} tensor {t.name!r} is already written "
                                    f"by {t._producer.name}")
            t._producer = node
            node.outputs[role] = t
        _infer.INFER[node.kind](node)

    def _sdpa_fwd(self, what, q, k, v, ins, attrs, generate_stats, outs_given, compute_data_type,
                  name, extra_outs=()):
        attrs["generate_stats"] = bool(generate_stats)
        outs = ("o", "stats") if generate_stats else ("o",)
        n = self._add("sdpa", dict(q=q, k=k, v=v, **ins), outs + tuple(extra_outs), attrs,
                      compute_data_type, name)
        self._sdpa_outputs(n, outs_given)
        st = n.outputs.get("stats")
        if st is not None and st.data_type is None:
            st.data_type = DataType.HIPDNN_DATA_FLOAT
        return n

    @staticmethod
    def _paged(what, ins, attrs, k_table, v_table, max_seq_len_kv):
        if (k_table is not None or v_table is not None) and ins.get("seq_len_kv") is None:
            raise BadParamError(f"{what}: paged attention needs seq_len_kv")
        ins.update(page_table_k=k_table, page_table_v=v_table)
        if max_seq_len_kv is not None:
            attrs["max_seq_len_kv"] = int(max_seq_len_kv)

    def sdpa(self, q, k, v, attn_scale=None, is_inference=None, *, generate_stats=None,
             use_causal_mask=False, use_causal_mask_bottom_right=False, sliding_window_length=None,
             diagonal_alignment=None, diagonal_band_left_bound=None,
             diagonal_band_right_bound=None, use_padding_mask=False, seq_len_q=None,
             seq_len_kv=None, attn_mask=None, bias=None, block_mask=None, use_alibi_mask=False,
             dropout=None, rng_dump=None, paged_attention_k_table=None,
             paged_attention_v_table=None, paged_attention_max_seq_len_kv=None,
             score_max=None, score_sum_exp=None, sink_token=None, implementation=None,
             compute_data_type=None, name=""):
        """Scaled dot-product attention: ``o, stats = g.sdpa(q, k, v, ...)`` with q [B, Hq, Sq, D],
        k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv].  ``attn_scale`` is a float (baked attribute) or
        a scalar Tensor (by value or runtime); ``dropout`` is ``(probability, seed, offset)`` or
        ``(mask, scale)``; ``attn_mask`` (alias ``bias``) is additive, or a boolean keep mask;
        ``block_mask`` a UINT8 bit mask of 128 x 128 tiles; ``sink_token`` [1, Hq, 1, 1] float
        logits; ``paged_attention_k/v_table`` [B, 1, pages, 1] page tables (k / v then being
        [pages, Hkv, page_size, D] pools); ``score_max`` / ``score_sum_exp`` / ``rng_dump``
        caller-made output tensors.  ``stats`` ([B, Hq, Sq, 1] float32 log-sum-exp) is None when
        ``is_inference`` (or ``generate_stats=False``)."""
        if attn_mask is not None and bias is not None:
            raise BadParamError("sdpa: attn_mask and bias are the same input; pass one")
        if generate_stats is None:
            generate_stats = not bool(is_inference) if is_inference is not None else True
        ins, attrs = _sdpa_attrs("sdpa", attn_scale, use_causal_mask, use_causal_mask_bottom_right,
                                 sliding_window_length, diagonal_alignment,
                                 diagonal_band_left_bound, diagonal_band_right_bound,
                                 use_padding_mask, seq_len_q, seq_len_kv,
                                 attn_mask if attn_mask is not None else bias, use_alibi_mask,
                                 dropout)
        self._paged("sdpa", ins, attrs, paged_attention_k_table, paged_attention_v_table,
                    paged_attention_max_seq_len_kv)
        ins.update(block_mask=block_mask, sink_token=sink_token)
        if implementation is not None:
            attrs["implementation"] = implementation
        if rng_dump is not None and not attrs.get("dropout_probability"):
            raise BadParamError("sdpa: rng_dump needs a (probability, seed, offset) dropout")
        n = self._sdpa_fwd("sdpa", q, k, v, ins, attrs, generate_stats,
                           {"max": score_max, "sum_exp": score_sum_exp, "rng_dump": rng_dump},
                           compute_data_type, name)
        return n.outputs["o"], n.outputs.get("stats")

    def sdpa_fp8(self, q, k, v, descale_q, descale_k, descale_v, descale_s, scale_s, scale_o,
                 is_inference=None, attn_scale=None, bias=None, use_alibi_mask=False,
                 use_padding_mask=False, seq_len_q=None, seq_len_kv=None, use_causal_mask=False,
                 use_causal_mask_bottom_right=False, sliding_window=None, diagonal_alignment=None,
                 left_bound=None, right_bound=None, dropout=None, rng_dump=None,
                 paged_attention_k_table=None, paged_attention_v_table=None,
                 paged_attention_max_seq_len_kv=None, compute_data_type=None, name="",
                 generate_stats=None, score_max=None, score_sum_exp=None, sink_token=None,
                 *, attn_mask=None, block_mask=None, o_data_type=None):
        """FP8 attention: ``o, stats, amax_s, amax_o = g.sdpa_fp8(q, k, v, descale_q, descale_k,
        descale_v, descale_s, scale_s, scale_o, ...)`` (cudnn-frontend's order).  The scores use
        the descaled q·k; P is encoded to q's fp8 format after ``scale_s``; O = descale_s *
        descale_v * P8·V, written times ``scale_o``; amax_s / amax_o ([1, 1, 1, 1] FLOAT) are
        max |P| and max |O| before scaling.  ``o`` takes q's type unless ``o_data_type``."""
        if score_max is not None or score_sum_exp is not None:
            raise BadParamError("sdpa_fp8: score_max / score_sum_exp are not produced by FP8 "
                                "attention")
        if attn_mask is not None and bias is not None:
            raise BadParamError("sdpa_fp8: attn_mask and bias are the same input; pass one")
        if generate_stats is None:
            generate_stats = not bool(is_inference) if is_inference is not None else True
        ins, attrs = _sdpa_attrs("sdpa_fp8", attn_scale, use_causal_mask,
                                 use_causal_mask_bottom_right, sliding_window, diagonal_alignment,
                                 left_bound, right_bound, use_padding_mask, seq_len_q, seq_len_kv,
                                 attn_mask if attn_mask is not None else bias, use_alibi_mask,
                                 dropout)
        self._paged("sdpa_fp8", ins, attrs, paged_attention_k_table, paged_attention_v_table,
                    paged_attention_max_seq_len_kv)
        ins.update(block_mask=block_mask, sink_token=sink_token, descale_q=descale_q,
                   descale_k=descale_k, descale_v=descale_v, descale_s=descale_s, scale_s=scale_s,
                   scale_o=scale_o)
        if rng_dump is not None and not attrs.get("dropout_probability"):
            raise BadParamError("sdpa_fp8: rng_dump needs a (probability, seed, offset) dropout")
        n = self._sdpa_fwd("sdpa_fp8", q, k, v, ins, attrs, generate_stats,
                           {"rng_dump": rng_dump}, compute_data_type, name,
                           extra_outs=("amax_s", "amax_o"))
        o = n.outputs["o"]
        if o.data_type is None:
            o.data_type = data_type_of(o_data_type) if o_data_type is not None else q.data_type
        for r in ("amax_s", "amax_o"):
            n.outputs[r].data_type = DataType.HIPDNN_DATA_FLOAT
        return o, n.outputs.get("stats"), n.outputs["amax_s"], n.outputs["amax_o"]

    def sdpa_backward(self, q, k, v, o, dO, stats, attn_scale=None, *, use_causal_mask=False,
                      use_causal_mask_bottom_right=False, sliding_window_length=None,
                      diagonal_alignment=None, diagonal_band_left_bound=None,
                      diagonal_band_right_bound=None, use_padding_mask=False, seq_len_q=None,
                      seq_len_kv=None, attn_mask=None, bias=None, dBias=None,
                      use_alibi_mask=False, dropout=None, sink_token=None, dSink_token=None,
                      compute_data_type=None, name=""):
        """SDPA backward: ``dq, dk, dv = g.sdpa_backward(q, k, v, o, dO, stats, ...)`` with the
        options of :meth:`sdpa` (the same values the forward used); ``dBias`` a caller-made
        output tensor receiving the bias gradient (summed to its broadcast shape)."""
        if sink_token is not None or dSink_token is not None:
            raise NotSupportedError("sdpa_backward: hipDNN's SdpaBackwardAttributes has no sink "
                                    "token roles (sink_token / dSink_token)")
        if attn_mask is not None and bias is not None:
            raise BadParamError("sdpa_backward: attn_mask and bias are the same input; pass one")
        ins, attrs = _sdpa_attrs("sdpa_backward", attn_scale, use_causal_mask,
                                 use_causal_mask_bottom_right, sliding_window_length,
                                 diagonal_alignment, diagonal_band_left_bound,
                                 diagonal_band_right_bound, use_padding_mask, seq_len_q,
                                 seq_len_kv, attn_mask if attn_mask is not None else bias,
                                 use_alibi_mask, dropout)
        n = self._add("sdpa_backward", dict(q=q, k=k, v=v, o=o, do=dO, stats=stats, **ins),
                      ("dq", "dk", "dv"), attrs, compute_data_type, name)
        self._sdpa_outputs(n, {"dbias": dBias})
        out = n.outputs
        return out["dq"], out["dk"], out["dv"]

    def sdpa_fp8_backward(self, *args, **kwargs):
        """cudnn-frontend's FP8 attention backward: not expressible in hipDNN, whose
        SdpaBackwardAttributes has no descale / scale / amax roles."""
        raise NotSupportedError("sdpa_fp8_backward: hipDNN's SdpaBackwardAttributes has no fp8 "
                                "descale_q/k/v/o/dO/s/dP, scale_s/dQ/dK/dV/dP or amax roles; "
                                "FP8 attention backward cannot be expressed")

    def reduction(self, input, mode, compute_data_type=None, name="", *, is_deterministic=None):
        """Reduction (``mode``: ReduceTensorOp); set the output dims with ``set_dim``."""
        attrs = {"mode": _enum_arg(ReduceTensorOp, mode, "HIPDNN_REDUCE_TENSOR_", "reduction mode"),
                 "is_deterministic": is_deterministic}
        return self._add("reduction", {"in": input}, ("out",), attrs, compute_data_type,
                         name).outputs["out"]

    def layernorm(self, input, scale, bias, epsilon, *, norm_forward_phase=NormFwdPhase.TRAINING,
                  normalized_dim_count=None, compute_data_type=None, name=""):
        """Returns ``(y, mean, inv_variance)`` (mean/inv_variance None in the inference phase)."""
        phase = NormFwdPhase(norm_forward_phase)
        outs = ("y", "mean", "inv_variance") if phase == NormFwdPhase.TRAINING else ("y",)
        n = self._add("layernorm", dict(x=input, scale=scale, bias=bias, epsilon=epsilon), outs,
                      {"phase": phase, "normalized_dim_count": normalized_dim_count},
                      compute_data_type, name)
        o = n.outputs
        return o["y"], o.get("mean"), o.get("inv_variance")

    def rmsnorm(self, input, scale, epsilon, *, bias=None, norm_forward_phase=NormFwdPhase.TRAINING,
                compute_data_type=None, name=""):
        """Returns ``(y, inv_rms)`` (inv_rms None in the inference phase)."""
        phase = NormFwdPhase(norm_forward_phase)
        outs = ("y", "inv_rms") if phase == NormFwdPhase.TRAINING else ("y",)
        n = self._add("rmsnorm", dict(x=input, scale=scale, epsilon=epsilon, bias=bias), outs,
                      {"phase": phase}, compute_data_type, name)
        o = n.outputs
        return o["y"], o.get("inv_rms")

    def pointwise(self, input0, input1=None, input2=None, *, mode, compute_data_type=None, name="",
                  relu_lower_clip=None, relu_upper_clip=None, relu_lower_clip_slope=None,
                  swish_beta=None, elu_alpha=None, softplus_beta=None, axis=None):
        """Any pointwise mode (PointwiseMode or its short name, e.g. ``"ADD"``); output dims are the
        broadcast of the inputs."""
        attrs = dict(mode=_pw(mode), relu_lower_clip=relu_lower_clip,
                     relu_upper_clip=relu_upper_clip, relu_lower_clip_slope=relu_lower_clip_slope,
                     swish_beta=swish_beta, elu_alpha=elu_alpha, softplus_beta=softplus_beta,
                     axis=axis)
        n = self._add("pointwise", dict(in_0=input0, in_1=input1, in_2=input2), ("out_0",), attrs,
                      compute_data_type, name)
        return n.outputs["out_0"]

    # named pointwise shortcuts --------------------------------------------------
    # Parameter names and positions are cudnn-frontend pygraph's ((a, b), (input0, input1),
    # (input, comparison), (input, bias), (loss, input), then compute_data_type, name); the
    # names this frontend used before stay accepted as keywords (a, b for every binary op).
    def _binary(mode, first="a", second="b"):
        def op(self, *args, compute_data_type=None, name="", **kw):
            x, y, compute_data_type, name = _two(mode.lower(), args, kw, (first, second),
                                                  compute_data_type, name)
            return self.pointwise(x, y, mode=_pw(mode), compute_data_type=compute_data_type,
                                  name=name)
        op.__name__ = mode.lower()
        op.__doc__ = (f"Pointwise {mode}: ``({first}, {second}, compute_data_type=None, "
                      f"name='')``.")
        return op

    def _unary(mode):
        def op(self, input, compute_data_type=None, name=""):
            return self.pointwise(input, mode=_pw(mode), compute_data_type=compute_data_type, name=name)
        op.__name__ = mode.lower()
        op.__doc__ = f"Pointwise {mode}."
        return op

    def _backward(mode):
        def op(self, loss, input, compute_data_type=None, name=""):
            return self.pointwise(loss, input, mode=_pw(mode), compute_data_type=compute_data_type,
                                  name=name)
        op.__doc__ = f"Pointwise {mode}: in_0 = loss (dy), in_1 = the forward input (x)."
        return op

    add, sub, mul, div = _binary("ADD"), _binary("SUB"), _binary("MUL"), _binary("DIV")
    add_square = _binary("ADD_SQUARE")
    bias = _binary("ADD", "input", "bias")
    bias.__name__, bias.__doc__ = "bias", "Pointwise ADD of a bias: ``(input, bias, ...)``."
    scale = _binary("MUL", "input", "scale")
    scale.__name__, scale.__doc__ = "scale", "Pointwise MUL by a scale: ``(input, scale, ...)``."
    max, min = _binary("MAX", "input0", "input1"), _binary("MIN", "input0", "input1")
    cmp_eq, cmp_neq = _binary("CMP_EQ", "input", "comparison"), _binary("CMP_NEQ", "input", "comparison")
    cmp_gt, cmp_ge = _binary("CMP_GT", "input", "comparison"), _binary("CMP_GE", "input", "comparison")
    cmp_lt, cmp_le = _binary("CMP_LT", "input", "comparison"), _binary("CMP_LE", "input", "comparison")
    logical_and, logical_or = _binary("LOGICAL_AND"), _binary("LOGICAL_OR")
    logical_not = _unary("LOGICAL_NOT")
    abs, neg, exp, log = _unary("ABS"), _unary("NEG"), _unary("EXP"), _unary("LOG")
    sqrt, rsqrt, reciprocal = _unary("SQRT"), _unary("RSQRT"), _unary("RECIPROCAL")
    sin, tan, erf = _unary("SIN"), _unary("TAN"), _unary("ERF")
    ceil, floor, identity = _unary("CEIL"), _unary("FLOOR"), _unary("IDENTITY")
    sigmoid, tanh = _unary("SIGMOID_FWD"), _unary("TANH_FWD")
    gelu, gelu_approx_tanh = _unary("GELU_FWD"), _unary("GELU_APPROX_TANH_FWD")
    sigmoid_backward = _backward("SIGMOID_BWD")
    tanh_backward, gelu_backward = _backward("TANH_BWD"), _backward("GELU_BWD")
    gelu_approx_tanh_backward = _backward("GELU_APPROX_TANH_BWD")
    elu_backward, softplus_backward = _backward("ELU_BWD"), _backward("SOFTPLUS_BWD")
    del _binary, _unary, _backward

    def relu(self, input, negative_slope=None, lower_clip=None, upper_clip=None,
             compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("RELU_FWD"), relu_lower_clip=lower_clip,
                              relu_upper_clip=upper_clip, relu_lower_clip_slope=negative_slope,
                              compute_data_type=compute_data_type, name=name)

    def leaky_relu(self, input, negative_slope, compute_data_type=None, name=""):
        return self.relu(input, negative_slope=negative_slope, compute_data_type=compute_data_type,
                         name=name)

    def relu_backward(self, loss, input, negative_slope=None, lower_clip=None, upper_clip=None,
                      compute_data_type=None, name=""):
        """Pointwise RELU_BWD: in_0 = loss (dy), in_1 = the forward input (x), with the forward's
        clips and slope."""
        return self.pointwise(loss, input, mode=_pw("RELU_BWD"), relu_lower_clip=lower_clip,
                              relu_upper_clip=upper_clip, relu_lower_clip_slope=negative_slope,
                              compute_data_type=compute_data_type, name=name)

    def leaky_relu_backward(self, loss, input, negative_slope, compute_data_type=None, name=""):
        return self.relu_backward(loss, input, negative_slope=negative_slope,
                                  compute_data_type=compute_data_type, name=name)

    def elu(self, input, alpha=None, compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("ELU_FWD"), elu_alpha=alpha,
                              compute_data_type=compute_data_type, name=name)

    def softplus(self, input, beta=None, compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("SOFTPLUS_FWD"), softplus_beta=beta,
                              compute_data_type=compute_data_type, name=name)

    def swish(self, input, swish_beta=None, compute_data_type=None, name="", *, beta=None):
        """Pointwise SWISH_FWD; ``swish_beta`` (cudnn-frontend's name) or ``beta``."""
        return self.pointwise(input, mode=_pw("SWISH_FWD"),
                              swish_beta=swish_beta if swish_beta is not None else beta,
                              compute_data_type=compute_data_type, name=name)

    def swish_backward(self, loss, input, compute_data_type=None, swish_beta=None, name=""):
        """Pointwise SWISH_BWD (cudnn-frontend's parameter order: compute_data_type, swish_beta,
        name)."""
        return self.pointwise(loss, input, mode=_pw("SWISH_BWD"), swish_beta=swish_beta,
                              compute_data_type=compute_data_type, name=name)

    def binary_select(self, input0, input1, mask, compute_data_type=None, name=""):
        return self.pointwise(input0, input1, mask, mode=_pw("BINARY_SELECT"),
                              compute_data_type=compute_data_type, name=name)

    def gen_index(self, input, axis, compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("GEN_INDEX"), axis=axis,
                              compute_data_type=compute_data_type, name=name)


    # ------------------------------------------------------------------ norm backward, pooling,
    # block-scale quantize / dequantize, MoE grouped matmul
    def layernorm_backward(self, grad, input, scale, mean=None, inv_variance=None,
                           compute_data_type=None, name="", *, epsilon=None,
                           normalized_dim_count=None):
        """Returns ``(dx, dscale, dbias)``; statistics (mean, inv_variance) or epsilon."""
        n = self._add("layernorm_backward", dict(dy=grad, x=input, scale=scale, mean=mean,
                                                 inv_variance=inv_variance, epsilon=epsilon),
                      ("dx", "dscale", "dbias"), {"normalized_dim_count": normalized_dim_count},
                      compute_data_type, name)
        o = n.outputs
        return o["dx"], o["dscale"], o["dbias"]

    def rmsnorm_backward(self, grad, input, scale, inv_rms=None, has_dbias=False,
                         compute_data_type=None, name="", *, inv_variance=None):
        """Returns ``(dx, dscale, dbias)`` (dbias None unless ``has_dbias``).  ``inv_variance``
        is cudnn-frontend's name for ``inv_rms``."""
        inv_rms = _alias("rmsnorm_backward", "inv_rms", inv_rms, "inv_variance", inv_variance)
        outs = ("dx", "dscale") + (("dbias",) if has_dbias else ())
        n = self._add("rmsnorm_backward", dict(dy=grad, x=input, scale=scale, inv_rms=inv_rms),
                      outs, {}, compute_data_type, name)
        o = n.outputs
        return o["dx"], o["dscale"], o.get("dbias")

    @staticmethod
    def _enum(cls, v, prefix):
        if isinstance(v, str):
            key = v.upper()
            return cls[key if key.startswith(prefix) else prefix + key]
        return cls(v)

    def _resample_attrs(self, mode, window, stride, pre_padding, post_padding, padding_mode):
        if window is None:
            raise BadParamError("resample: window is required")
        window = [int(w) for w in window]
        nsp = len(window)

        def vec(v, default):
            if v is None:
                return [default] * nsp
            v = [int(v)] * nsp if isinstance(v, int) else [int(e) for e in v]
            if len(v) != nsp:
                raise BadParamError(f"resample: {len(v)} entries for {nsp} window dims")
            return v
        return {"mode": self._enum(ResampleMode, mode, "HIPDNN_RESAMPLE_"), "window": window,
                "stride": vec(stride, 1), "pre_padding": vec(pre_padding, 0),
                "post_padding": vec(post_padding, 0),
                "padding_mode": None if padding_mode is None else
                self._enum(PaddingMode, padding_mode, "HIPDNN_PADDING_")}

    def resample(self, input, *, mode, window, stride=None, pre_padding=None, post_padding=None,
                 padding_mode=None, generate_index=False, compute_data_type=None, name=""):
        """Pooling (``mode``: ResampleMode or "MAXPOOL" / "AVGPOOL_INCLUDE_PADDING" /
        "AVGPOOL_EXCLUDE_PADDING").  Returns ``(y, index)``; index (INT32 unless set) only with
        ``generate_index``."""
        attrs = self._resample_attrs(mode, window, stride, pre_padding, post_padding, padding_mode)
        attrs["generate_index"] = True if generate_index else None
        n = self._add("resample", {"x": input}, ("y", "index") if generate_index else ("y",),
                      attrs, compute_data_type, name)
        idx = n.outputs.get("index")
        if idx is not None and idx.data_type is None:
            idx.data_type = DataType.HIPDNN_DATA_INT32
        return n.outputs["y"], idx

    def resample_backward(self, grad, *, index=None, mode, window, stride=None, pre_padding=None,
                          post_padding=None, padding_mode=None, compute_data_type=None, name=""):
        """dx from dy (``grad``) and, for max pooling, the forward's ``index``; dx dims are
        inferred as the smallest consistent input (``set_dim`` when the forward had a
        remainder)."""
        attrs = self._resample_attrs(mode, window, stride, pre_padding, post_padding, padding_mode)
        n = self._add("resample_backward", {"dy": grad, "index": index}, ("dx",), attrs,
                      compute_data_type, name)
        return n.outputs["dx"]

    def block_scale_quantize(self, input, block_size=None, axis=None, transpose=False,
                             compute_data_type=None, name="", *, y_type=None, scale_type=None):
        """MX-style block quantization.  Returns ``(y, scale)``: y has x's dims (``y_type``,
        e.g. HIPDNN_DATA_FP8_E4M3), scale has x's dims with ``axis`` (default: the last) divided
        by ``block_size`` (``scale_type``, e.g. HIPDNN_DATA_FP8_E8M0).  ``transpose`` makes the
        blocked axis the innermost (unit-stride) one of y and scale."""
        if block_size is None:
            raise BadParamError("block_scale_quantize: block_size is required")
        attrs = {"block_size": int(block_size), "axis": None if axis is None else int(axis),
                 "transpose": True if transpose else None}
        n = self._add("block_scale_quantize", {"x": input}, ("y", "scale"), attrs,
                      compute_data_type, name)
        for role, dt in (("y", y_type), ("scale", scale_type)):
            if dt is not None:
                n.outputs[role].data_type = DataType(dt)
        return n.outputs["y"], n.outputs["scale"]

    def block_scale_dequantize(self, input, scale=None, block_size=None, is_negative_scale=False,
                               compute_data_type=None, name="", *, descale=None):
        """y = x * scale per block (``block_size``: int or one entry per trailing dim);
        ``descale`` is cudnn-frontend's name for ``scale``."""
        scale = _alias("block_scale_dequantize", "scale", scale, "descale", descale)
        if block_size is None:
            raise BadParamError("block_scale_dequantize: block_size is required")
        bs = [int(block_size)] if isinstance(block_size, int) else [int(b) for b in block_size]
        n = self._add("block_scale_dequantize", {"x": input, "scale": scale}, ("y",),
                      {"block_size": bs, "is_negative_scale": True if is_negative_scale else None},
                      compute_data_type, name)
        return n.outputs["y"]

    def moe_grouped_matmul(self, token, weight, first_token_offset, token_index=None,
                           token_ks=None, *, mode="NONE", top_k=None, compute_data_type=None,
                           name=""):
        """Grouped GEMM per expert: token [1, T, K], weight [E, K, N], first_token_offset
        [B*E, 1, 1] INT32; ``mode`` NONE / GATHER (token_index) / SCATTER (token_index,
        token_ks, top_k).  Output [1, rows, N] is inferred."""
        m = self._enum(MoeGroupedMatmulMode, mode, "HIPDNN_MOE_GROUPED_MATMUL_MODE_")
        n = self._add("moe_grouped_matmul", dict(token=token, weight=weight,
                                                 first_token_offset=first_token_offset,
                                                 token_index=token_index, token_ks=token_ks),
                      ("output",), {"mode": m, "top_k": top_k}, compute_data_type, name)
        return n.outputs["output"]

    def moe_grouped_matmul_backward(self, doutput, token, first_token_offset,
                                    compute_data_type=None, name=""):
        """dweight [E, K, N] = per expert token^T @ doutput (E = first_token_offset rows)."""
        n = self._add("moe_grouped_matmul_backward", dict(doutput=doutput, token=token,
                                                          first_token_offset=first_token_offset),
                      ("dweight",), {}, compute_data_type, name)
        return n.outputs["dweight"]

    moe_grouped_matmul_bwd = moe_grouped_matmul_backward       # cudnn-frontend pygraph's name
