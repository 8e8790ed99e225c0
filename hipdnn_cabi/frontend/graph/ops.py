"""Operation builders: every ``Graph`` method that adds a node (conv, batchnorm, matmul,
reduction, norms, pointwise and its named shortcuts)."""
from __future__ import annotations

from ..._generated.enums import ConvolutionMode, ReduceTensorOp
from ...errors import BadParamError
from .._ops import NormFwdPhase
from ._types import _enum_arg, _pw


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

    def batchnorm_inference(self, input, mean, inv_variance, scale, bias, *, compute_data_type=None,
                            name=""):
        n = self._add("batchnorm_inference", dict(x=input, mean=mean, inv_variance=inv_variance,
                                                  scale=scale, bias=bias), ("y",), {},
                      compute_data_type, name)
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

    def batchnorm_backward(self, grad, input, scale, mean, inv_variance, *, peer_stats=None,
                           compute_data_type=None, name=""):
        """Returns ``(dx, dscale, dbias)``."""
        n = self._add("batchnorm_backward", dict(dy=grad, x=input, mean=mean,
                                                 inv_variance=inv_variance, scale=scale),
                      ("dx", "dscale", "dbias"), {}, compute_data_type, name,
                      arrays={"peer_stats": list(peer_stats)} if peer_stats else None)
        o = n.outputs
        return o["dx"], o["dscale"], o["dbias"]

    def matmul(self, A, B, *, compute_data_type=None, name=""):
        """C = A @ B with batch broadcasting; C dims are inferred."""
        return self._add("matmul", dict(a=A, b=B), ("c",), {}, compute_data_type, name).outputs["c"]

    def reduction(self, input, mode, *, compute_data_type=None, is_deterministic=None, name=""):
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
    def _binary(mode):
        def op(self, a, b, *, compute_data_type=None, name=""):
            return self.pointwise(a, b, mode=_pw(mode), compute_data_type=compute_data_type, name=name)
        op.__name__ = mode.lower()
        op.__doc__ = f"Pointwise {mode}."
        return op

    def _unary(mode):
        def op(self, input, *, compute_data_type=None, name=""):
            return self.pointwise(input, mode=_pw(mode), compute_data_type=compute_data_type, name=name)
        op.__name__ = mode.lower()
        op.__doc__ = f"Pointwise {mode}."
        return op

    def _backward(mode):
        def op(self, loss, input, *, compute_data_type=None, name=""):
            return self.pointwise(loss, input, mode=_pw(mode), compute_data_type=compute_data_type,
                                  name=name)
        op.__doc__ = f"Pointwise {mode}: in_0 = loss (dy), in_1 = the forward input (x)."
        return op

    add, sub, mul, div = _binary("ADD"), _binary("SUB"), _binary("MUL"), _binary("DIV")
    add_square = _binary("ADD_SQUARE")
    max, min = _binary("MAX"), _binary("MIN")
    cmp_eq, cmp_neq, cmp_gt = _binary("CMP_EQ"), _binary("CMP_NEQ"), _binary("CMP_GT")
    cmp_ge, cmp_lt, cmp_le = _binary("CMP_GE"), _binary("CMP_LT"), _binary("CMP_LE")
    logical_and, logical_or = _binary("LOGICAL_AND"), _binary("LOGICAL_OR")
    logical_not = _unary("LOGICAL_NOT")
    abs, neg, exp, log = _unary("ABS"), _unary("NEG"), _unary("EXP"), _unary("LOG")
    sqrt, rsqrt, reciprocal = _unary("SQRT"), _unary("RSQRT"), _unary("RECIPROCAL")
    sin, tan, erf = _unary("SIN"), _unary("TAN"), _unary("ERF")
    ceil, floor, identity = _unary("CEIL"), _unary("FLOOR"), _unary("IDENTITY")
    sigmoid, tanh = _unary("SIGMOID_FWD"), _unary("TANH_FWD")
    gelu, gelu_approx_tanh = _unary("GELU_FWD"), _unary("GELU_APPROX_TANH_FWD")
    relu_backward, sigmoid_backward = _backward("RELU_BWD"), _backward("SIGMOID_BWD")
    tanh_backward, gelu_backward = _backward("TANH_BWD"), _backward("GELU_BWD")
    gelu_approx_tanh_backward = _backward("GELU_APPROX_TANH_BWD")
    elu_backward, softplus_backward = _backward("ELU_BWD"), _backward("SOFTPLUS_BWD")
    swish_backward = _backward("SWISH_BWD")
    del _binary, _unary, _backward

    def relu(self, input, *, negative_slope=None, lower_clip=None, upper_clip=None,
             compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("RELU_FWD"), relu_lower_clip=lower_clip,
                              relu_upper_clip=upper_clip, relu_lower_clip_slope=negative_slope,
                              compute_data_type=compute_data_type, name=name)

    def leaky_relu(self, input, negative_slope, *, compute_data_type=None, name=""):
        return self.relu(input, negative_slope=negative_slope, compute_data_type=compute_data_type,
                         name=name)

    def elu(self, input, alpha=None, *, compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("ELU_FWD"), elu_alpha=alpha,
                              compute_data_type=compute_data_type, name=name)

    def softplus(self, input, beta=None, *, compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("SOFTPLUS_FWD"), softplus_beta=beta,
                              compute_data_type=compute_data_type, name=name)

    def swish(self, input, beta=None, *, compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("SWISH_FWD"), swish_beta=beta,
                              compute_data_type=compute_data_type, name=name)

    def binary_select(self, input0, input1, mask, *, compute_data_type=None, name=""):
        return self.pointwise(input0, input1, mask, mode=_pw("BINARY_SELECT"),
                              compute_data_type=compute_data_type, name=name)

    def gen_index(self, input, axis, *, compute_data_type=None, name=""):
        return self.pointwise(input, mode=_pw("GEN_INDEX"), axis=axis,
                              compute_data_type=compute_data_type, name=name)

