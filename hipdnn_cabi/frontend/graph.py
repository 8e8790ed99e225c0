"""``Graph``: build, compile and run hipDNN operation graphs over the backend C API.

The call sequences are those of hipDNN's C++ frontend (spec/backend-behavior.md §2):
``validate`` (no backend calls), ``build_operation_graph`` (§2.2), ``create_execution_plans``
(§2.3), ``check_support`` (§2.4), ``build_plans`` (§2.5), ``get_workspace_size`` (§2.6),
``execute`` (§2.7), ``serialize`` / ``deserialize`` (§2.9).
"""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass

import numpy as np

from .._generated.enums import AttributeName as A
from .._generated.enums import AttributeType as T
from .._generated.enums import BehaviorNote, ConvolutionMode, DataType
from .._generated.enums import DescriptorType as D
from .._generated.enums import PointwiseMode, ReduceTensorOp
from ..errors import BadParamError, HipdnnError, NotSupportedError
from . import _infer
from ._capi import Api, api as _api
from ._ops import BY_OPTYPE, SPECS, NormFwdPhase
from . import buffers as _buffers
from .buffers import resolve_pointer
from .handle import Handle, engine_memory_kind, engine_name_by_id
from .tensor import ScalarType, Tensor, _UNSET, element_size, from_numpy_dtype, packed_strides, \
    scalar_bytes


class GraphNotSupportedError(NotSupportedError):
    """No engine configuration supports the graph (a frontend-only condition)."""


@dataclass(frozen=True)
class KnobInfo:
    """One tunable knob of an engine (KNOB_INFO descriptor, spec §1.12 / §2.8).  ``type`` is
    "int", "float" or "string"; unset optional fields are None (lists: empty)."""
    id: str
    description: str
    type: str
    default: object
    deprecated: bool = False
    minimum: object = None
    maximum: object = None
    stride: int | None = None
    valid_values: tuple = ()
    max_length: int | None = None


@dataclass(frozen=True)
class EngineConfigInfo:
    """One engine configuration the heuristics proposes (``get_engine_configs``)."""
    engine_id: int
    name: str | None
    workspace_size: int
    knobs: tuple


class BuildPlanPolicy(enum.Enum):
    HEURISTICS_CHOICE = "heuristics_choice"
    ALL = "all"


NO_ENGINE_MSG = "No engine configurations available for the graph."
_SERIALIZE_PLAN_NOTE = int(BehaviorNote.HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION)
_CONTENT_PLAN = 2  # HIPDNN_SERIALIZED_CONTENT_EXECUTION_PLAN


_PW_FLOATS = (("relu_lower_clip", A.HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP),
              ("relu_upper_clip", A.HIPDNN_ATTR_POINTWISE_RELU_UPPER_CLIP),
              ("relu_lower_clip_slope", A.HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE),
              ("swish_beta", A.HIPDNN_ATTR_POINTWISE_SWISH_BETA),
              ("elu_alpha", A.HIPDNN_ATTR_POINTWISE_ELU_ALPHA),
              ("softplus_beta", A.HIPDNN_ATTR_POINTWISE_SOFTPLUS_BETA))


def _pw(name):
    return PointwiseMode["HIPDNN_POINTWISE_" + name]


class _Node:
    __slots__ = ("kind", "inputs", "outputs", "arrays", "attrs", "compute_data_type", "name")

    def __init__(self, kind, inputs, outputs, attrs, compute_data_type, name, arrays=None):
        self.kind = kind
        self.inputs = inputs          # role -> Tensor | None
        self.outputs = outputs        # role -> Tensor | None
        self.arrays = arrays or {}    # role -> [Tensor]
        self.attrs = attrs
        self.compute_data_type = DataType(compute_data_type) if compute_data_type is not None else None
        self.name = name

    def tensors(self):
        spec = SPECS[self.kind]
        out = []
        for role, _ in spec.inputs:
            if self.inputs.get(role) is not None:
                out.append(self.inputs[role])
        for role, _ in spec.outputs:
            if self.outputs.get(role) is not None:
                out.append(self.outputs[role])
        for role, _ in spec.arrays:
            out.extend(self.arrays.get(role) or ())
        return out

    def input_tensors(self):
        return [t for t in self.inputs.values() if t is not None] + \
            [t for ts in self.arrays.values() for t in ts]

    def output_tensors(self):
        return [t for t in self.outputs.values() if t is not None]


class Graph:
    """A hipDNN operation graph (shaped like hipDNN's Python bindings / cudnn-frontend ``pygraph``).

    ``Graph(handle=None, io_data_type=None, intermediate_data_type=None, compute_data_type=None,
    name="", library=None)``.  Without a handle, one is created (and owned) at build time.
    """

    def __init__(self, handle: Handle | None = None, io_data_type=None, intermediate_data_type=None,
                 compute_data_type=None, name: str = "", library: str | None = None):
        self.handle = handle
        self._own_handle = False
        self._library = library
        self.api: Api = handle.api if handle is not None else _api(library)
        self.io_data_type = DataType(io_data_type) if io_data_type is not None else None
        self.intermediate_data_type = (DataType(intermediate_data_type)
                                       if intermediate_data_type is not None else None)
        self.compute_data_type = DataType(compute_data_type) if compute_data_type is not None else None
        self.name = name or ""
        self.preferred_engine_id = None
        self.preferred_engine_name = None
        self.override_shape_enabled = False
        self._tensors: list[Tensor] = []
        self._nodes: list[_Node] = []
        self._order: list[_Node] | None = None
        self._lowered = False
        self._from_bytes = False
        self._gdesc = None          # finalized OPERATIONGRAPH
        self._cfgs: list = []
        self._engine_ids: list[int] = []
        self._plans: list = []
        self._plan_ok: list[bool] = []
        self._active = None
        self._workspace = None
        self.engine_id = None
        self._engine_name = None
        #: run the plan of an engine that reaches the variant pack's memory (see execute)
        self.select_engine_by_memory = True
        self._mem_plan: dict = {}       # memory kind -> plan index (None: no engine reaches it)
        self._ws_sizes: dict = {}       # plan index -> workspace size
        self._engine_names: dict = {}   # engine id -> name
        self._explicit_engine = False   # plan made by create_execution_plan_ext / compiled plan
        self._dev_ws = None             # (size, pointer, runtime) of a device workspace we own

    # ================================================================== tensors
    def tensor(self, value=_UNSET, scalar_type: ScalarType | None = None, *, name="", dim=None,
               stride=None, data_type=None, is_virtual=False, uid=None, is_pass_by_value=False) -> Tensor:
        """A graph tensor; ``graph.tensor(v, ScalarType.X)`` makes a by-value scalar:
        ``COMPILE_TIME_CONST`` (default for a plain value) or ``RUNTIME_PARAM`` (runtime with
        default)."""
        t = Tensor(self, name, dim, stride, data_type, is_virtual, uid)
        if value is not _UNSET and value is not None:
            t.set_value(value)
            if scalar_type == ScalarType.RUNTIME_PARAM:
                t._runtime = True
        elif scalar_type == ScalarType.RUNTIME_PARAM or is_pass_by_value:
            t.set_as_runtime_parameter()
        if t.dim is not None and t.stride is None:
            t.stride = packed_strides(t.dim)
        self._tensors.append(t)
        return t

    def scalar(self, value=None, scalar_type: ScalarType = ScalarType.COMPILE_TIME_CONST, *,
               name="", data_type=None, uid=None) -> Tensor:
        """A 1-element by-value scalar.  ``value=None`` with RUNTIME_PARAM = user-supplied at
        execute."""
        if value is None:
            t = self.tensor(name=name, dim=[1], stride=[1], data_type=data_type, uid=uid)
            return t.set_as_runtime_parameter()
        return self.tensor(value, scalar_type, name=name, data_type=data_type, uid=uid)

    def tensor_like(self, like, name="") -> Tensor:
        """A tensor with the dims/strides/data type of a Tensor or an array (numpy, or anything with
        ``shape``/``strides``/``dtype`` or ``__cuda_array_interface__``)."""
        if isinstance(like, Tensor):
            return self.tensor(name=name or like.name, dim=like.dim, stride=like.stride,
                               data_type=like.data_type, is_virtual=like.is_virtual)
        iface = getattr(like, "__cuda_array_interface__", None)
        if iface is not None:
            dims = list(iface["shape"])
            dt = np.dtype(iface["typestr"])
            st = iface.get("strides")
            strides = [s // dt.itemsize for s in st] if st else packed_strides(dims)
            return self.tensor(name=name, dim=dims, stride=strides, data_type=from_numpy_dtype(dt))
        dims = list(like.shape)
        dt = like.dtype
        if not isinstance(dt, np.dtype):   # torch dtype etc.
            dt = np.dtype(str(dt).replace("torch.", ""))
        try:
            strides = list(like.stride()) if callable(getattr(like, "stride", None)) else \
                [s // dt.itemsize for s in like.strides]
        except AttributeError:
            strides = packed_strides(dims)
        return self.tensor(name=name, dim=dims, stride=strides, data_type=from_numpy_dtype(dt))

    def _as_tensor(self, v, what):
        if v is None or isinstance(v, Tensor):
            return v
        if isinstance(v, (int, float, np.generic)):
            return self.tensor(v, ScalarType.COMPILE_TIME_CONST, name="")
        raise TypeError(f"{what}: expected a Tensor or a number, got {type(v).__name__}")

    def _out(self, node_name, role, data_type=None):
        t = Tensor(self, f"{node_name}::{role}", is_virtual=True, data_type=data_type)
        self._tensors.append(t)
        return t

    def _add(self, kind, inputs, out_roles, attrs, compute_data_type, name, arrays=None):
        name = name or f"{kind}_{len(self._nodes)}"
        if self._lowered:
            raise BadParamError("cannot add operations after the graph was built")
        inputs = {r: self._as_tensor(t, f"{name}.{r}") for r, t in inputs.items()}
        outputs = {r: self._out(name, r) for r in out_roles}
        node = _Node(kind, inputs, outputs, attrs, compute_data_type, name, arrays)
        for t in outputs.values():
            t._producer = node
        self._nodes.append(node)
        self._order = None
        try:
            _infer.INFER[kind](node)
        except BadParamError:
            raise
        except Exception:
            pass
        return node

    # ================================================================== operations
    def _conv(self, kind, a, b, out_role, padding, pre_padding, post_padding, stride, dilation,
              convolution_mode, compute_data_type, name, roles):
        attrs = dict(padding=padding, pre_padding=pre_padding, post_padding=post_padding,
                     stride=stride, dilation=dilation,
                     conv_mode=ConvolutionMode(convolution_mode) if convolution_mode is not None
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
        attrs = {"mode": ReduceTensorOp(mode), "is_deterministic": is_deterministic}
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
        if isinstance(mode, str):
            mode = _pw(mode.upper())
        attrs = dict(mode=PointwiseMode(mode), relu_lower_clip=relu_lower_clip,
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

    # ================================================================== validate (§2.1)
    def _assign_uids(self):
        used = {t.uid for t in self._tensors if t.uid is not None}
        counter = itertools.count(1)
        for t in self._graph_tensors():
            if t.uid is None:
                u = next(counter)
                while u in used:
                    u = next(counter)
                t.uid = u
                used.add(u)

    def _graph_tensors(self):
        seen, out = set(), []
        for n in self._nodes:
            for t in n.tensors():
                if id(t) not in seen:
                    seen.add(id(t))
                    out.append(t)
        return out

    def validate(self):
        """Frontend checks only (no backend calls): shapes inferred/filled, tensor checks, duplicate
        uids, topological order, a single connected component."""
        if self._from_bytes:
            return self
        if not self._nodes:
            raise BadParamError("graph has no operations")
        # topological order (stable: insertion order among ready nodes)
        producer = {}
        for n in self._nodes:
            for t in n.output_tensors():
                if id(t) in producer and producer[id(t)] is not n:
                    raise BadParamError(f"tensor {t.name!r} is written by two operations")
                producer[id(t)] = n
        deps = {id(n): {id(producer[id(t)]) for t in n.input_tensors() if id(t) in producer}
                for n in self._nodes}
        order, done = [], set()
        while len(order) < len(self._nodes):
            ready = [n for n in self._nodes if id(n) not in done and deps[id(n)] <= done]
            if not ready:
                raise BadParamError("graph has a cycle")
            order.append(ready[0])
            done.add(id(ready[0]))
        # shape inference (in topological order), then defaults from the graph context
        for n in order:
            _infer.INFER[n.kind](n)
        for n in order:
            if n.compute_data_type is None:
                n.compute_data_type = self.compute_data_type
        self._assign_uids()
        by_uid = {}
        for t in self._graph_tensors():
            if t.data_type is None:
                t.data_type = self.intermediate_data_type if t.is_virtual else self.io_data_type
            what = f"tensor {t.name!r} (uid {t.uid})"
            if t.dim is None:
                raise BadParamError(f"{what}: dims are not set")
            if t.stride is None:
                t.stride = packed_strides(t.dim)
            if len(t.dim) != len(t.stride) or not t.dim:
                raise BadParamError(f"{what}: {len(t.dim)} dims but {len(t.stride)} strides")
            if t.data_type is None:
                raise BadParamError(f"{what}: data type is not set (and the graph has no "
                                    f"{'intermediate' if t.is_virtual else 'io'} data type)")
            if t.is_virtual and t._runtime:
                raise BadParamError(f"{what}: a virtual tensor cannot be a runtime pass-by-value scalar")
            if t.is_virtual and t.has_value:
                raise BadParamError(f"{what}: a virtual tensor cannot carry a value")
            if t.is_virtual and t._producer is None:
                raise BadParamError(f"{what}: a virtual tensor must be produced by an operation")
            other = by_uid.setdefault(t.uid, t)
            if other is not t:
                raise BadParamError(f"duplicate tensor uid {t.uid} ({other.name!r} and {t.name!r})")
        # single component
        if len(order) > 1:
            parent = {id(n): id(n) for n in order}

            def find(x):
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                return x
            owner = {}
            for n in order:
                for t in n.tensors():
                    if id(t) in owner:
                        parent[find(id(n))] = find(owner[id(t)])
                    else:
                        owner[id(t)] = id(n)
            if len({find(id(n)) for n in order}) > 1:
                raise BadParamError("graph is not connected (more than one component)")
        self._order = order
        return self

    # ================================================================== lowering (§2.2)
    def _tensor_desc(self, t):
        a = self.api
        d = a.create(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
        try:
            a.set(d, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, [t.uid])
            if t.name:
                a.set(d, A.HIPDNN_ATTR_TENSOR_NAME_EXT, T.HIPDNN_TYPE_CHAR, t.name)
            a.set(d, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE, [int(t.data_type)])
            a.set(d, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, list(t.dim))
            a.set(d, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, list(t.stride))
            a.set(d, A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, T.HIPDNN_TYPE_BOOLEAN, [t.is_virtual])
            if t.byte_alignment != 16:
                a.set(d, A.HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT, T.HIPDNN_TYPE_INT64, [t.byte_alignment])
            if t.has_value:
                a.set(d, A.HIPDNN_ATTR_TENSOR_VALUE_EXT, T.HIPDNN_TYPE_CHAR,
                      scalar_bytes(t._value, t.data_type))
            if t._runtime:
                a.set(d, A.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, T.HIPDNN_TYPE_BOOLEAN, [True])
            a.finalize(d, f"finalize tensor {t.name or t.uid}")
        except BaseException:
            a.destroy(d)
            raise
        return d

    def _op_params(self, n):
        """(attribute, type, values) of the node's parameters, in a fixed order."""
        at = n.attrs
        out = []
        if n.kind.startswith("conv_"):
            ref = n.inputs.get("x") or n.inputs.get("dy")
            nsp = len(ref.dim) - 2
            pre, post, st, dil = _infer.conv_params(n, nsp)
            out += [(A.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, T.HIPDNN_TYPE_CONVOLUTION_MODE, [int(at["conv_mode"])]),
                    (A.HIPDNN_ATTR_CONVOLUTION_DILATIONS, T.HIPDNN_TYPE_INT64, dil),
                    (A.HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES, T.HIPDNN_TYPE_INT64, st),
                    (A.HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS, T.HIPDNN_TYPE_INT64, post),
                    (A.HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS, T.HIPDNN_TYPE_INT64, pre)]
        elif n.kind == "pointwise":
            out.append((A.HIPDNN_ATTR_POINTWISE_MODE, T.HIPDNN_TYPE_POINTWISE_MODE, [int(at["mode"])]))
            for key, attr in _PW_FLOATS:
                if at.get(key) is not None:
                    out.append((attr, T.HIPDNN_TYPE_FLOAT, [float(at[key])]))
            if at.get("axis") is not None:
                out.append((A.HIPDNN_ATTR_POINTWISE_AXIS, T.HIPDNN_TYPE_INT64, [int(at["axis"])]))
        elif n.kind == "reduction":
            out.append((A.HIPDNN_ATTR_REDUCTION_OPERATOR, T.HIPDNN_TYPE_REDUCTION_OPERATOR_TYPE,
                        [int(at["mode"])]))
            if at.get("is_deterministic") is not None:
                out.append((A.HIPDNN_ATTR_REDUCTION_IS_DETERMINISTIC, T.HIPDNN_TYPE_BOOLEAN,
                            [bool(at["is_deterministic"])]))
        elif n.kind == "layernorm":
            out.append((A.HIPDNN_ATTR_OPERATION_LAYERNORM_FWD_PHASE_EXT, T.HIPDNN_TYPE_NORM_FWD_PHASE,
                        [int(at["phase"])]))
            if at.get("normalized_dim_count") is not None:
                out.append((A.HIPDNN_ATTR_OPERATION_LAYERNORM_NORMALIZED_DIM_COUNT_EXT,
                            T.HIPDNN_TYPE_INT64, [int(at["normalized_dim_count"])]))
        elif n.kind == "rmsnorm":
            out.append((A.HIPDNN_ATTR_OPERATION_RMSNORM_FWD_PHASE_EXT, T.HIPDNN_TYPE_NORM_FWD_PHASE,
                        [int(at["phase"])]))
        spec = SPECS[n.kind]
        if n.compute_data_type is not None and spec.comp is not None:
            out.append((spec.comp, T.HIPDNN_TYPE_DATA_TYPE, [int(n.compute_data_type)]))
        return out

    def _op_desc(self, n, tdesc):
        a = self.api
        spec = SPECS[n.kind]
        d = a.create(spec.dtype)
        try:
            for role, attr in spec.inputs:
                t = n.inputs.get(role)
                if t is not None:
                    a.set(d, attr, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [tdesc[id(t)]])
            for role, attr in spec.outputs:
                t = n.outputs.get(role)
                if t is not None:
                    a.set(d, attr, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [tdesc[id(t)]])
            for role, attr in spec.arrays:
                ts = n.arrays.get(role)
                if ts:
                    a.set(d, attr, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [tdesc[id(t)] for t in ts])
            for attr, atype, values in self._op_params(n):
                a.set(d, attr, atype, values)
            if n.name:
                a.set(d, A.HIPDNN_ATTR_OPERATION_NAME_EXT, T.HIPDNN_TYPE_CHAR, n.name)
            a.finalize(d, f"finalize operation {n.name}")
        except BaseException:
            a.destroy(d)
            raise
        return d

    def _lower(self, handle_raw):
        """§2.2 steps 1–3 (with HANDLE + Finalize when ``handle_raw`` is given); returns the graph
        descriptor; step 4 (destroy tensor/op wrappers) always."""
        a = self.api
        tdesc, wrappers, ops = {}, [], []
        g = None
        try:
            for n in self._order:
                for t in n.tensors():
                    if id(t) not in tdesc:
                        tdesc[id(t)] = self._tensor_desc(t)
                        wrappers.append(tdesc[id(t)])
                ops.append(self._op_desc(n, tdesc))
            g = a.create(D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
            a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, ops)
            for attr, v in ((A.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, self.compute_data_type),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT,
                             self.intermediate_data_type),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, self.io_data_type)):
                if v is not None:
                    a.set(g, attr, T.HIPDNN_TYPE_DATA_TYPE, [int(v)])
            if self.preferred_engine_id is not None:
                a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.HIPDNN_TYPE_INT64,
                      [int(self.preferred_engine_id)])
            a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, T.HIPDNN_TYPE_BOOLEAN,
                  [bool(self.override_shape_enabled)])
            if self.name:
                a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, T.HIPDNN_TYPE_CHAR, self.name)
            if handle_raw is not None:
                a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, T.HIPDNN_TYPE_HANDLE, [handle_raw])
                a.finalize(g, "finalize operation graph")
        except BaseException:
            a.destroy(g)
            raise
        finally:
            for d in ops + wrappers:
                a.destroy(d)
        return g

    def _ensure_handle(self, handle=None):
        if handle is not None:
            if self.handle is not None and handle is not self.handle and self._gdesc is not None:
                raise BadParamError("the graph was built with another handle")
            self.handle = handle
        if self.handle is None:
            self.handle = Handle(_api_obj=self.api)
            self._own_handle = True
        return self.handle

    def build_operation_graph(self, handle: Handle | None = None):
        """Assign uids, validate, lower to backend descriptors (spec §2.2)."""
        h = self._ensure_handle(handle)
        if self._from_bytes:
            return self
        self.validate()
        self._release_plans()
        if self._gdesc is not None:
            self.api.destroy(self._gdesc)
            self._gdesc = None
        self._gdesc = self._lower(h.raw)
        self._lowered = True
        # What execute() must be given is fixed by what was lowered: setters called after the
        # build (which only warn, RFC 0016 §4.3) must not change it.
        self._required_uids = {t.uid for t in self._graph_tensors()
                               if not t.is_virtual and not t.has_value}
        return self

    # ================================================================== plans (§2.3–2.6)
    def _release_plans(self):
        a = self.api
        for d in self._plans + self._cfgs:
            a.destroy(d)
        self._plans, self._cfgs, self._engine_ids, self._plan_ok = [], [], [], []
        self._active = None
        self.engine_id = None
        self._engine_name = None
        self._mem_plan, self._ws_sizes = {}, {}
        self._explicit_engine = False
        for d in getattr(self, "_knob_descs", ()):
            a.destroy(d)
        self._knob_descs = []

    def _need_graph(self):
        if self._gdesc is None:
            raise BadParamError("build_operation_graph() has not been called")

    def _engine_desc(self, engine_id):
        a = self.api
        e = a.create(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
        try:
            a.set(e, A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [self._gdesc])
            a.set(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64, [int(engine_id)])
            a.finalize(e, f"finalize engine {engine_id}")
        except BaseException:
            a.destroy(e)
            raise
        return e

    def _engine_desc_name(self, e):
        try:
            return self.api.get_string(e, A.HIPDNN_ATTR_ENGINE_NAME_EXT)
        except NotSupportedError:
            return None

    def _run_heuristic(self):
        """§2.3: ENGINEHEUR (graph, FALLBACK) → finalized ENGINECFGs and their engine ids."""
        a = self.api
        heur = a.create(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
        cfgs, ids = [], []
        try:
            a.set(heur, A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                  [self._gdesc])
            a.set(heur, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, [0])
            a.finalize(heur, "finalize engine heuristic")
            count = a.get_count(heur, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
            if count <= 0:
                raise GraphNotSupportedError(NO_ENGINE_MSG)
            cfgs = [a.create(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR) for _ in range(count)]
            arr = a.ffi.new("hipdnnBackendDescriptor_t[]", cfgs)
            n = a.ffi.new("int64_t*")
            a.check(a.lib.hipdnnBackendGetAttribute(heur, int(A.HIPDNN_ATTR_ENGINEHEUR_RESULTS),
                                                    int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR), count, n, arr),
                    "hipdnnBackendGetAttribute(ENGINEHEUR_RESULTS)")
            if n[0] <= 0:
                raise GraphNotSupportedError(NO_ENGINE_MSG)
            for extra in cfgs[n[0]:]:
                a.destroy(extra)
            cfgs = cfgs[: n[0]]
            for cfg in cfgs:
                a.finalize(cfg, "finalize engine config")
                ids.append(self._cfg_engine_id(cfg))
        except BaseException:
            for c in cfgs:
                a.destroy(c)
            raise
        finally:
            a.destroy(heur)
        return cfgs, ids

    def _cfg_engine_id(self, cfg) -> int:
        a = self.api
        e = a.get(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                  want_count=False)[0]
        try:
            return int(a.get(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64,
                             want_count=False)[0])
        finally:
            a.destroy(e)

    def create_execution_plans(self, modes=None):
        """Heuristics → one engine config and one (unfinalized) plan per applicable engine."""
        self._need_graph()
        self._release_plans()
        a = self.api
        cfgs, ids = self._run_heuristic()
        self._cfgs, self._engine_ids = cfgs, ids
        try:
            # active index: preferred name -> preferred id -> 0
            active = 0
            if self.preferred_engine_name:
                for i, eid in enumerate(self._engine_ids):
                    if self._engine_name_of(eid) == self.preferred_engine_name:
                        active = i
                        break
            elif self.preferred_engine_id is not None and self.preferred_engine_id in self._engine_ids:
                active = self._engine_ids.index(self.preferred_engine_id)
            self._active = active
            self._plans = [a.create(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) for _ in cfgs]
            self._plan_ok = [False] * len(cfgs)
        except BaseException:
            self._release_plans()
            raise
        return self

    def _engine_name_of(self, eid):
        """Engine name by id (hipdnnGetEngineNameById_ext, else ENGINE_NAME_EXT), cached."""
        if eid in self._engine_names:
            return self._engine_names[eid]
        name = engine_name_by_id(self.handle, eid) if self.handle is not None else None
        if name is None and self._gdesc is not None:
            try:
                ed = self._engine_desc(eid)
            except Exception:
                ed = None
            if ed is not None:
                try:
                    name = self._engine_desc_name(ed)
                finally:
                    self.api.destroy(ed)
        self._engine_names[eid] = name
        return name

    def check_support(self, handle=None):
        if not self._plans or self._active is None:
            raise GraphNotSupportedError(NO_ENGINE_MSG)
        return self

    def _build_plan(self, i):
        a = self.api
        a.set(self._plans[i], A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
              T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [self._cfgs[i]])
        a.finalize(self._plans[i], "finalize execution plan")
        self._workspace = a.get(self._plans[i], A.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                T.HIPDNN_TYPE_INT64, want_count=False)[0]
        self._ws_sizes[i] = int(self._workspace)
        self._plan_ok[i] = True

    def build_plans(self, policy: BuildPlanPolicy = BuildPlanPolicy.HEURISTICS_CHOICE):
        self.check_support()
        if policy == BuildPlanPolicy.ALL:
            first, last_err = None, None
            for i in range(len(self._plans)):
                try:
                    self._build_plan(i)
                    if first is None:
                        first = i
                except Exception as e:  # logged and skipped, like the C++ frontend
                    last_err = e
            if first is None:
                raise last_err
            self._active = first
            self._workspace = self._ws_sizes.get(first)
        else:
            self._build_plan(self._active)
        self.engine_id = self._engine_ids[self._active]
        self._engine_name = None
        return self

    def build(self, modes=None, handle: Handle | None = None):
        """build_operation_graph → create_execution_plans → check_support → build_plans."""
        self.build_operation_graph(handle)
        if self._from_bytes and self._active_plan() is not None:
            return self
        self.create_execution_plans(modes)
        self.check_support()
        self.build_plans()
        return self

    def _active_plan(self):
        if self._active is None or not self._plans or not self._plan_ok[self._active]:
            return None
        return self._plans[self._active]

    def _need_plan(self):
        p = self._active_plan()
        if p is None:
            raise BadParamError("no built execution plan: call build() (or build_plans()) first")
        return p

    def get_workspace_size(self) -> int:
        p = self._need_plan()
        return int(self.api.get(p, A.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.HIPDNN_TYPE_INT64,
                                want_count=False)[0])

    @property
    def engine_name(self) -> str | None:
        """Name of the engine of the active plan (the one ``execute`` runs)."""
        if self.engine_id is None:
            return None
        if self._engine_name is None:
            name = self._engine_name_of(self.engine_id)
            self._engine_name = name or f"0x{self.engine_id & (2**64 - 1):016x}"
        return self._engine_name

    def get_engine_ids(self) -> list[int]:
        """Ids of the applicable engines, in heuristic order (after create_execution_plans)."""
        return [e for e in self._engine_ids if e is not None]

    def set_preferred_engine_id_ext(self, engine_id: int):
        self.preferred_engine_id = int(engine_id)
        return self

    def set_preferred_engine_name_ext(self, name: str):
        self.preferred_engine_name = name
        return self

    def get_behavior_notes_for_engine(self, engine_id: int) -> list:
        """ENGINE_BEHAVIOR_NOTE of an engine for this graph (§2.8)."""
        self._need_graph()
        a = self.api
        e = self._engine_desc(engine_id)
        try:
            n = a.get_count(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE)
            if n <= 0:
                return []
            vals = a.get(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE, n)
            if len(vals) != n:
                raise BadParamError("behaviour-note count changed between the two calls")
            return [BehaviorNote(v) if v in BehaviorNote._value2member_map_ else int(v) for v in vals]
        finally:
            a.destroy(e)

    # ---------------------------------------------------------------- knobs and configs (§2.8)
    def get_knobs_for_engine(self, engine_id: int) -> list[KnobInfo]:
        """The knobs of an engine for this graph: engine descriptor, ENGINE_KNOB_INFO (count
        query, then fetch into new wrappers, all destroyed), and per knob the KNOB_INFO_*
        getters in the order of spec §2.8."""
        self._need_graph()
        a = self.api
        ffi = a.ffi
        e = self._engine_desc(engine_id)
        try:
            count = a.get_count(e, A.HIPDNN_ATTR_ENGINE_KNOB_INFO, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
            if count <= 0:
                return []
            arr = ffi.new("hipdnnBackendDescriptor_t[]", count)
            n = ffi.new("int64_t*")
            try:
                a.check(a.lib.hipdnnBackendGetAttribute(e, int(A.HIPDNN_ATTR_ENGINE_KNOB_INFO),
                                                        int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR), count, n,
                                                        arr), "hipdnnBackendGetAttribute(ENGINE_KNOB_INFO)")
                return [self._read_knob(arr[i]) for i in range(min(n[0], count))]
            finally:
                for i in range(count):       # the fetched wrappers, and any extra entries
                    if arr[i] != ffi.NULL:
                        a.destroy(arr[i])
        finally:
            a.destroy(e)

    def _read_knob(self, k) -> KnobInfo:
        a = self.api
        kid = a.get_string(k, A.HIPDNN_ATTR_KNOB_INFO_TYPE)
        desc = a.get_string(k, A.HIPDNN_ATTR_KNOB_INFO_DESCRIPTION)
        dep = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_DEPRECATED, T.HIPDNN_TYPE_BOOLEAN)
        vt = a.get(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE_TYPE, T.HIPDNN_TYPE_INT64)[0]
        lo = hi = stride = max_len = None
        valid = ()
        if vt == int(T.HIPDNN_TYPE_CHAR):
            kind = "string"
            default = a.get_string(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE)
            max_len = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_STRING_MAX_LENGTH, T.HIPDNN_TYPE_INT32)
            try:
                raw = a.get_bytes(k, A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_STRING)
                valid = tuple(x.decode("utf-8", "replace") for x in raw.split(b"\0") if x) if raw else ()
            except NotSupportedError:
                valid = ()
        else:
            vtype = T.HIPDNN_TYPE_INT64 if vt == int(T.HIPDNN_TYPE_INT64) else T.HIPDNN_TYPE_DOUBLE
            kind = "int" if vtype == T.HIPDNN_TYPE_INT64 else "float"
            default = a.get(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE, vtype)[0]
            lo = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, vtype)
            hi = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, vtype)
            if kind == "int":
                stride = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_STRIDE, T.HIPDNN_TYPE_INT64)
                valid = tuple(self._get_vec(k, A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_INT) or ())
        conv = int if kind == "int" else float if kind == "float" else (lambda v: v)
        return KnobInfo(kid, desc, kind, conv(default) if default is not None else None, bool(dep),
                        None if lo is None else conv(lo), None if hi is None else conv(hi),
                        None if stride is None else int(stride), valid,
                        None if max_len is None else int(max_len))

    def create_execution_plan_ext(self, engine_id: int, knobs=None):
        """One plan for ``engine_id`` with knob settings (§2.8): engine descriptor, ENGINECFG
        with ENGINECFG_ENGINE and, per setting, a finalized KNOB_CHOICE (KNOB_TYPE, KNOB_VALUE:
        int → INT64, float → DOUBLE, str → CHAR) set as ENGINECFG_KNOB_CHOICES; Finalize(cfg);
        an EXECUTION_PLAN.  It replaces the heuristic's plans and wins over the memory rule;
        call :meth:`build_plans` next.  ``knobs``: {knob id: value} or [(id, value)]."""
        self._need_graph()
        self._release_plans()
        a = self.api
        items = list(knobs.items()) if isinstance(knobs, dict) else list(knobs or ())
        keep = []
        cfg = None
        try:
            e = self._engine_desc(engine_id)
            keep.append(e)
            cfg = a.create(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR)
            a.set(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [e])
            choices = []
            for kid, value in items:
                kc = a.create(D.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
                keep.append(kc)
                a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.HIPDNN_TYPE_CHAR, str(kid))
                if isinstance(value, str):
                    a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_CHAR, value)
                elif isinstance(value, (bool, int, np.integer)):
                    a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_INT64, [int(value)])
                elif isinstance(value, (float, np.floating)):
                    a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_DOUBLE, [float(value)])
                else:
                    raise BadParamError(f"knob {kid!r}: value must be int, float or str, "
                                        f"got {type(value).__name__}")
                a.finalize(kc, f"finalize knob choice {kid}")
                choices.append(kc)
            if choices:
                a.set(cfg, A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, choices)
            a.finalize(cfg, "finalize engine config")
            plan = a.create(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
        except BaseException:
            for d in keep:
                a.destroy(d)
            a.destroy(cfg)
            raise
        self._knob_descs = keep
        self._cfgs, self._engine_ids, self._plans, self._plan_ok = [cfg], [int(engine_id)], [plan], [False]
        self._active = 0
        self._explicit_engine = True
        return self

    def get_ranked_engine_ids(self) -> list[int]:
        """Engine ids in heuristic order (§2.8: heuristic + getAll; the graph's plans untouched)."""
        self._need_graph()
        cfgs, ids = self._run_heuristic()
        for c in cfgs:
            self.api.destroy(c)
        return ids

    def get_engine_configs(self) -> list[EngineConfigInfo]:
        """Every configuration the heuristics proposes, in order: engine id, name, knobs (engine
        descriptor) and ENGINECFG_WORKSPACE_SIZE of the finalized config (§2.8)."""
        self._need_graph()
        a = self.api
        cfgs, ids = self._run_heuristic()
        out = []
        try:
            for c, eid in zip(cfgs, ids):
                ws = a.get(c, A.HIPDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, T.HIPDNN_TYPE_INT64)[0]
                out.append(EngineConfigInfo(eid, self._engine_name_of(eid), int(ws),
                                            tuple(self.get_knobs_for_engine(eid))))
        finally:
            for c in cfgs:
                a.destroy(c)
        return out

    # ================================================================== execute (§2.7)
    def _uid_of(self, key):
        if isinstance(key, Tensor):
            if key.uid is None:
                raise BadParamError(f"tensor {key.name!r} has no uid (build the graph first)")
            return key.uid
        if isinstance(key, str):
            for t in self._graph_tensors():
                if t.name == key:
                    return t.uid
            raise BadParamError(f"no tensor named {key!r}")
        return int(key)

    # ---------------------------------------------------------------- engine from memory
    def engine_memory_kind(self, engine_id=None):
        """"host" / "device": the memory the engine (default: the active plan's) reaches."""
        eid = self.engine_id if engine_id is None else engine_id
        return None if eid is None else engine_memory_kind(self._engine_name_of(eid))

    def _engine_pinned(self) -> bool:
        return bool(self.preferred_engine_name) or self.preferred_engine_id is not None or \
            self._explicit_engine

    def _activate(self, i):
        self._active = i
        self.engine_id = self._engine_ids[i]
        self._engine_name = None
        self._workspace = self._ws_sizes.get(i)

    def _plan_for_memory(self, kind):
        """Make active the plan of an engine that reaches ``kind`` memory ("host"/"device").
        Rule: an explicit engine (preferred name/id, create_execution_plan_ext, a compiled plan)
        always wins; else keep the active plan when its engine reaches the memory; else the first
        engine in heuristic order that does (plan built once, cached per memory kind); else keep
        the active plan (the engine then checks its pointers itself)."""
        self._need_plan()
        if kind is None or not self.select_engine_by_memory or self._engine_pinned():
            return
        if self.engine_memory_kind() in (None, kind):
            self._mem_plan.setdefault(kind, self._active)
            return
        if kind in self._mem_plan:
            i = self._mem_plan[kind]
            if i is not None and i != self._active:
                self._activate(i)
            return
        if self._gdesc is not None and not any(c is not None for c in self._cfgs):
            # a deserialized plan: find the other applicable engines (keeps the loaded plan)
            try:
                cfgs, ids = self._run_heuristic()
            except NotSupportedError:
                cfgs, ids = [], []
            for c, eid in zip(cfgs, ids):
                if eid in self._engine_ids:
                    self.api.destroy(c)
                    continue
                self._cfgs.append(c)
                self._engine_ids.append(eid)
                self._plans.append(self.api.create(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR))
                self._plan_ok.append(False)
        found = None
        keep = self._active
        for i, eid in enumerate(self._engine_ids):
            if i == keep or engine_memory_kind(self._engine_name_of(eid)) != kind:
                continue
            if not self._plan_ok[i]:
                if self._cfgs[i] is None:
                    continue
                try:
                    self._build_plan(i)
                except HipdnnError:
                    continue
            found = i
            break
        self._mem_plan[kind] = found
        if found is not None:
            self._activate(found)
        else:
            self._workspace = self._ws_sizes.get(keep, self._workspace)

    def _device_workspace(self, size):
        """A device workspace of ``size`` bytes (hipdnn_cabi.device), owned by the graph."""
        if self._dev_ws is not None and self._dev_ws[0] >= size:
            return self._dev_ws[1]
        try:
            from .. import device
            rt = device.get_runtime()
            ptr = int(rt.malloc(size))
        except Exception as e:
            raise BadParamError(f"the plan runs on a device engine and needs a {size}-byte device "
                                f"workspace: pass workspace= ({e})") from None
        self._free_device_workspace()
        self._dev_ws = (size, ptr, rt)
        return ptr

    def _free_device_workspace(self):
        if self._dev_ws is not None:
            _, ptr, rt = self._dev_ws
            self._dev_ws = None
            try:
                rt.free(ptr)
            except Exception:
                pass

    def execute(self, variant_pack: dict, workspace=None, handle: Handle | None = None):
        """Run the active plan.  ``variant_pack``: {Tensor | uid | name: buffer}; buffers are numpy
        arrays (host), objects with ``__cuda_array_interface__`` or ``__dlpack__`` (device
        pointers), ints (raw addresses) or numbers (runtime pass-by-value scalars).

        The engine follows the memory: when the buffers live where the active plan's engine
        cannot reach them (device buffers and a host engine, or host arrays and a GPU engine),
        the plan of an engine that can is built (once, cached per memory kind) and run
        instead — unless an engine was chosen explicitly.  See :meth:`_plan_for_memory`."""
        self._need_plan()
        h = handle or self.handle
        a = self.api
        ffi = a.ffi
        by_uid = {t.uid: t for t in self._graph_tensors()}
        keep, uids, ptrs = [], [], []
        kinds = {}
        for key, value in variant_pack.items():
            uid = self._uid_of(key)
            t = by_uid.get(uid)
            if t is None or not t.get_is_pass_by_value():
                k = _buffers.memory_kind(value)
                if k is not None:
                    kinds.setdefault(k, uid)
            ptr, holder = resolve_pointer(value, t)
            keep.append(holder)
            uids.append(uid)
            ptrs.append(ptr)
        if workspace is not None:
            k = _buffers.memory_kind(workspace)
            if k is not None:
                kinds.setdefault(k, "workspace")
        if not self._from_bytes:
            required = getattr(self, "_required_uids", None)
            missing = [t for t in by_uid.values()
                       if (t.uid in required if required is not None
                           else not t.is_virtual and not t.has_value) and t.uid not in uids]
            if missing:
                raise BadParamError("variant pack lacks tensors: " +
                                    ", ".join(f"{t.name or '?'} (uid {t.uid})" for t in missing))
        if not uids:
            raise BadParamError("empty variant pack")
        if len(kinds) > 1 and self.select_engine_by_memory and not self._engine_pinned():
            raise BadParamError(f"variant pack mixes host memory ({kinds['host']}) and device memory "
                                f"({kinds['device']}): no single engine reaches both")
        self._plan_for_memory(next(iter(kinds)) if len(kinds) == 1 else None)
        plan = self._need_plan()
        if workspace is None:
            ws = self._workspace if self._workspace is not None else self.get_workspace_size()
            if ws > 0:
                if self.engine_memory_kind() == "device":
                    workspace = self._device_workspace(ws)
                else:
                    workspace = np.empty(ws, dtype=np.uint8)
        wptr = 0
        if workspace is not None:
            wptr, wh = resolve_pointer(workspace, None)
            keep.append(wh)
        vp = a.create(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        try:
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR,
                  [ffi.cast("void*", p) for p in ptrs])
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, uids)
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR,
                  [ffi.cast("void*", wptr)])
            a.finalize(vp, "finalize variant pack")
            a.check(a.lib.hipdnnBackendExecute(h.raw, plan, vp), "hipdnnBackendExecute")
        finally:
            a.destroy(vp)
            del keep
        return self

    # ================================================================== serialization (§2.9)
    def _two_call_bytes(self, fn, *args) -> bytes:
        a = self.api
        ffi = a.ffi
        sz = ffi.new("size_t*")
        a.check(fn(*args, 0, sz, ffi.NULL), fn.__name__ if hasattr(fn, "__name__") else "serialize")
        if sz[0] == 0:
            raise BadParamError("the backend returned an empty serialization")
        buf = ffi.new("uint8_t[]", sz[0])
        a.check(fn(*args, sz[0], sz, buf), "serialize")
        return bytes(ffi.buffer(buf, sz[0]))

    def serialize(self) -> bytes:
        """The graph (and, when the engine supports it, the compiled plan) as bytes."""
        a = self.api
        lib = a.lib
        plan = self._active_plan()
        if plan is not None and self._gdesc is not None and self.engine_id is not None:
            try:
                notes = self.get_behavior_notes_for_engine(self.engine_id)
            except NotSupportedError:
                notes = []
            if _SERIALIZE_PLAN_NOTE in [int(x) for x in notes]:
                return self._two_call_bytes(lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext,
                                            self._gdesc, plan)
        if self._gdesc is not None:
            return self._two_call_bytes(lib.hipdnnBackendGetSerializedBinaryGraph_ext, self._gdesc)
        self.validate()
        g = self._lower(None)
        try:
            return self._two_call_bytes(lib.hipdnnBackendGetSerializedBinaryGraph_ext, g)
        finally:
            a.destroy(g)

    def serialize_json(self) -> str:
        a = self.api
        ffi = a.ffi
        g = self._gdesc
        tmp = None
        if g is None:
            self.validate()
            g = tmp = self._lower(None)
        try:
            sz = ffi.new("size_t*")
            a.check(a.lib.hipdnnBackendGetSerializedJsonGraph_ext(g, 0, sz, ffi.NULL), "serialize_json")
            buf = ffi.new("char[]", sz[0])
            a.check(a.lib.hipdnnBackendGetSerializedJsonGraph_ext(g, sz[0], sz, buf), "serialize_json")
            return ffi.string(buf).decode()
        finally:
            if tmp is not None:
                a.destroy(tmp)

    # ---------------------------------------------------------------- compiled plans (§2.9)
    def serialize_compiled_plan(self) -> bytes:
        """The active (built) plan alone: hipdnnBackendGetSerializedExecutionPlan_ext, two-call.
        Restore it with :meth:`deserialize_compiled_plan` (no graph needed)."""
        return self._two_call_bytes(self.api.lib.hipdnnBackendGetSerializedExecutionPlan_ext,
                                    self._need_plan())

    def deserialize_compiled_plan(self, *args):
        """``deserialize_compiled_plan(handle, data)`` (either order; the handle is optional
        when the graph has one): hipdnnBackendCreateAndDeserializeExecutionPlan_ext, then
        EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT and IS_OVERRIDE_SHAPE_ENABLED_EXT (failures
        tolerated).  The plan is graph-less: :meth:`execute` takes uids as keys
        (:meth:`get_compiled_plan_tensor_uids` lists them)."""
        handle = next((x for x in args if isinstance(x, Handle)), None)
        data = next((x for x in args if isinstance(x, (bytes, bytearray, memoryview))), None)
        if data is None:
            raise BadParamError("deserialize_compiled_plan: no bytes given")
        if self._nodes or self._gdesc is not None or self._plans:
            raise BadParamError("deserialize_compiled_plan into an empty Graph")
        data = bytes(data)
        a = self.api
        ffi, lib = a.ffi, a.lib
        h = self._ensure_handle(handle)
        pp = ffi.new("hipdnnBackendDescriptor_t*")
        src = ffi.new("uint8_t[]", data)
        a.check(lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h.raw, pp, src, len(data)),
                "hipdnnBackendCreateAndDeserializeExecutionPlan_ext")
        self._plans, self._plan_ok, self._active, self._cfgs = [pp[0]], [True], 0, [None]
        eid = a.try_get(pp[0], A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT, T.HIPDNN_TYPE_INT64)
        self.engine_id = int(eid[0]) if eid else None
        self._engine_ids = [self.engine_id]
        ov = a.try_get(pp[0], A.HIPDNN_ATTR_EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT,
                       T.HIPDNN_TYPE_BOOLEAN)
        self.override_shape_enabled = bool(ov[0]) if ov else False
        self._from_bytes = True
        self._explicit_engine = True
        self._workspace = None
        return self

    @classmethod
    def from_compiled_plan(cls, data, handle: Handle | None = None, library: str | None = None):
        return cls(handle=handle, library=library).deserialize_compiled_plan(data)

    def get_compiled_plan_tensor_uids(self) -> list[int]:
        """EXECUTION_PLAN_TENSOR_UIDS_EXT of the active plan (size query, then fetch)."""
        a = self.api
        plan = self._need_plan()
        n = a.get_count(plan, A.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT, T.HIPDNN_TYPE_INT64)
        if n <= 0:
            return []
        return [int(v) for v in a.get(plan, A.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT,
                                      T.HIPDNN_TYPE_INT64, n)]

    def get_compiled_plan_engine_id(self):
        """EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT of the active plan (None when unsupported)."""
        v = self.api.try_get(self._need_plan(), A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT,
                             T.HIPDNN_TYPE_INT64)
        return int(v[0]) if v else None

    def get_compiled_plan_override_shape_enabled(self):
        """EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT of the active plan (None when
        unsupported)."""
        v = self.api.try_get(self._need_plan(), A.HIPDNN_ATTR_EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT,
                             T.HIPDNN_TYPE_BOOLEAN)
        return bool(v[0]) if v else None

    def deserialize(self, *args):
        """``deserialize(data)`` or ``deserialize(handle, data)`` (either order): rebuild this graph
        from bytes made by :meth:`serialize`.  With a handle (or the graph's own) the graph is
        finalized, and an embedded compiled plan is restored so :meth:`execute` works at once;
        without an embedded plan call :meth:`build`."""
        handle = next((x for x in args if isinstance(x, Handle)), None)
        data = next((x for x in args if isinstance(x, (bytes, bytearray, memoryview))), None)
        if data is None:
            raise BadParamError("deserialize: no bytes given")
        if self._nodes or self._gdesc is not None:
            raise BadParamError("deserialize into an empty Graph")
        data = bytes(data)
        a = self.api
        ffi, lib = a.ffi, a.lib
        h = self._ensure_handle(handle)
        p = ffi.new("hipdnnBackendDescriptor_t*")
        src = ffi.new("uint8_t[]", data)
        a.check(lib.hipdnnBackendCreateAndDeserializeGraph_ext(p, src, len(data)),
                "hipdnnBackendCreateAndDeserializeGraph_ext")
        g = p[0]
        try:
            a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, T.HIPDNN_TYPE_HANDLE, [h.raw])
            a.finalize(g, "finalize deserialized graph")
            self._unpack(g)
        except BaseException:
            a.destroy(g)
            raise
        self._gdesc = g
        self._lowered = True
        self._from_bytes = True
        flags = ffi.new("int*")
        a.check(lib.hipdnnBackendGetSerializedBinaryContents_ext(src, len(data), flags),
                "hipdnnBackendGetSerializedBinaryContents_ext")
        if flags[0] & _CONTENT_PLAN:
            pp = ffi.new("hipdnnBackendDescriptor_t*")
            a.check(lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h.raw, pp, src, len(data)),
                    "hipdnnBackendCreateAndDeserializeExecutionPlan_ext")
            self._plans, self._plan_ok, self._active, self._cfgs = [pp[0]], [True], 0, [None]
            eid = a.try_get(pp[0], A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT, T.HIPDNN_TYPE_INT64)
            self.engine_id = int(eid[0]) if eid else None
            self._engine_ids = [self.engine_id]
            self._workspace = None
        return self

    @classmethod
    def from_bytes(cls, data, handle: Handle | None = None, library: str | None = None) -> "Graph":
        return cls(handle=handle, library=library).deserialize(data)

    def _unpack(self, g):
        """Rebuild frontend tensors / nodes (tensor roles only) from a backend graph (§2.9)."""
        a = self.api
        ffi = a.ffi
        n = a.get_count(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        ops = a.get(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, n) if n else []
        tensors = {}
        try:
            for op in ops:
                ot = a.get(op, A.HIPDNN_ATTR_OPERATION_TYPE_EXT, T.HIPDNN_TYPE_OPERATION_TYPE_EXT)[0]
                spec = BY_OPTYPE.get(int(ot))
                if spec is None:
                    raise NotSupportedError(f"deserialize: operation type {ot} is not supported by "
                                            f"the Python frontend")
                roles = {}
                for role, attr in spec.slots():
                    arr = ffi.new("hipdnnBackendDescriptor_t[1]")
                    cnt = ffi.new("int64_t*")
                    st = a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR),
                                                         1, cnt, arr)
                    if st != 0:
                        a.last_error()
                        continue
                    if cnt[0] < 1 or arr[0] == ffi.NULL:
                        continue
                    try:
                        roles[role] = self._unpack_tensor(arr[0], tensors)
                    finally:
                        a.destroy(arr[0])
                name = ""
                try:
                    name = a.get_string(op, A.HIPDNN_ATTR_OPERATION_NAME_EXT)
                except Exception:
                    pass
                arrays = {}
                for role, attr in spec.arrays:
                    ts = self._unpack_tensor_array(op, attr, tensors)
                    if ts:
                        arrays[role] = ts
                attrs, comp = self._unpack_params(op, spec)
                ins = {r: roles.get(r) for r, _ in spec.inputs}
                outs = {r: roles.get(r) for r, _ in spec.outputs}
                node = _Node(spec.kind, ins, outs, attrs, comp, name, arrays)
                for t in node.output_tensors():
                    t._producer = node
                self._nodes.append(node)
        finally:
            for op in ops:
                a.destroy(op)
        self._order = list(self._nodes)
        for attr, field in ((A.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, "compute_data_type"),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT,
                             "intermediate_data_type"),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, "io_data_type")):
            v = a.try_get(g, attr, T.HIPDNN_TYPE_DATA_TYPE)
            if v and v[0] in DataType._value2member_map_:
                setattr(self, field, DataType(v[0]))
        v = a.try_get(g, A.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.HIPDNN_TYPE_INT64)
        if v:
            self.preferred_engine_id = int(v[0])
        try:
            self.name = a.get_string(g, A.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT)
        except Exception:
            pass

    def _unpack_tensor_array(self, op, attr, tensors):
        """A descriptor-array slot (peer stats): count query, fetch, unpack, destroy."""
        a = self.api
        ffi = a.ffi
        cnt = ffi.new("int64_t*")
        st = a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR), 0,
                                             cnt, ffi.NULL)
        if st != 0:
            a.last_error()
            return []
        if cnt[0] <= 0:
            return []
        arr = ffi.new("hipdnnBackendDescriptor_t[]", cnt[0])
        n = ffi.new("int64_t*")
        a.check(a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR),
                                                cnt[0], n, arr), "deserialize: peer stats")
        out = []
        try:
            for i in range(min(n[0], cnt[0])):
                out.append(self._unpack_tensor(arr[i], tensors))
        finally:
            for i in range(cnt[0]):
                a.destroy(arr[i])
        return out

    def _get_vec(self, op, attr):
        """INT64 vector getter: count query, then fetch (None when unset / unsupported)."""
        a = self.api
        n = a.ffi.new("int64_t*")
        st = a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_INT64), 0, n, a.ffi.NULL)
        if st != 0:
            a.last_error()
            return None
        if n[0] <= 0:
            return []
        return [int(v) for v in a.get(op, attr, T.HIPDNN_TYPE_INT64, n[0])]

    def _get_one(self, op, attr, atype):
        """Scalar getter (req 1, &count, &v); None when unset (count 0) or unsupported."""
        v = self.api.try_get(op, attr, atype)
        return v[0] if v else None

    def _unpack_params(self, op, spec):
        """The op's parameters through its getters (the attribute table of
        backend/descriptors/operations/); the inverse of :meth:`_op_params`."""
        kind = spec.kind
        attrs = {}
        if kind.startswith("conv_"):
            mode = self._get_one(op, A.HIPDNN_ATTR_CONVOLUTION_CONV_MODE, T.HIPDNN_TYPE_CONVOLUTION_MODE)
            attrs["conv_mode"] = ConvolutionMode(mode) if mode is not None else \
                ConvolutionMode.HIPDNN_CROSS_CORRELATION
            attrs["padding"] = None
            for key, attr in (("pre_padding", A.HIPDNN_ATTR_CONVOLUTION_PRE_PADDINGS),
                              ("post_padding", A.HIPDNN_ATTR_CONVOLUTION_POST_PADDINGS),
                              ("stride", A.HIPDNN_ATTR_CONVOLUTION_FILTER_STRIDES),
                              ("dilation", A.HIPDNN_ATTR_CONVOLUTION_DILATIONS)):
                attrs[key] = self._get_vec(op, attr)
        elif kind == "pointwise":
            attrs["mode"] = PointwiseMode(self._get_one(op, A.HIPDNN_ATTR_POINTWISE_MODE,
                                                        T.HIPDNN_TYPE_POINTWISE_MODE))
            for key, attr in _PW_FLOATS:
                v = self._get_one(op, attr, T.HIPDNN_TYPE_FLOAT)
                attrs[key] = float(v) if v is not None else None
            attrs["axis"] = self._get_one(op, A.HIPDNN_ATTR_POINTWISE_AXIS, T.HIPDNN_TYPE_INT64)
        elif kind == "reduction":
            attrs["mode"] = ReduceTensorOp(self._get_one(op, A.HIPDNN_ATTR_REDUCTION_OPERATOR,
                                                         T.HIPDNN_TYPE_REDUCTION_OPERATOR_TYPE))
            v = self._get_one(op, A.HIPDNN_ATTR_REDUCTION_IS_DETERMINISTIC, T.HIPDNN_TYPE_BOOLEAN)
            attrs["is_deterministic"] = bool(v) if v is not None else None
        elif kind == "layernorm":
            ph = self._get_one(op, A.HIPDNN_ATTR_OPERATION_LAYERNORM_FWD_PHASE_EXT,
                               T.HIPDNN_TYPE_NORM_FWD_PHASE)
            attrs["phase"] = NormFwdPhase(ph) if ph is not None else NormFwdPhase.TRAINING
            attrs["normalized_dim_count"] = self._get_one(
                op, A.HIPDNN_ATTR_OPERATION_LAYERNORM_NORMALIZED_DIM_COUNT_EXT, T.HIPDNN_TYPE_INT64)
        elif kind == "rmsnorm":
            ph = self._get_one(op, A.HIPDNN_ATTR_OPERATION_RMSNORM_FWD_PHASE_EXT,
                               T.HIPDNN_TYPE_NORM_FWD_PHASE)
            attrs["phase"] = NormFwdPhase(ph) if ph is not None else NormFwdPhase.TRAINING
        comp = None
        if spec.comp is not None:
            v = self._get_one(op, spec.comp, T.HIPDNN_TYPE_DATA_TYPE)
            if v is not None and v in DataType._value2member_map_:
                comp = DataType(v)
        return attrs, comp

    def relower(self, handle: Handle | None = None):
        """Lower a deserialized graph again from its Python nodes (ops, parameters, tensors read
        back by :meth:`deserialize`): the backend graph and plans from the bytes are destroyed,
        and the graph is validated and lowered like one built in Python (§2.2).  Call
        :meth:`build` (or the steps) afterwards to get plans."""
        if not self._from_bytes:
            return self.build_operation_graph(handle)
        self._release_plans()
        if self._gdesc is not None:
            self.api.destroy(self._gdesc)
            self._gdesc = None
        self._from_bytes = False
        self._lowered = False
        self._order = None
        return self.build_operation_graph(handle)

    def _unpack_tensor(self, d, tensors):
        a = self.api
        uid = a.get(d, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64)[0]
        if uid in tensors:
            return tensors[uid]
        dt = a.get(d, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE)[0]
        nd = a.get_count(d, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64)
        dims = a.get(d, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, nd)
        ns = a.get_count(d, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64)
        strides = a.get(d, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, ns)
        virt = a.get(d, A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, T.HIPDNN_TYPE_BOOLEAN)[0]
        try:
            name = a.get_string(d, A.HIPDNN_ATTR_TENSOR_NAME_EXT)
        except Exception:
            name = ""
        t = Tensor(self, name, dims, strides, dt if dt in DataType._value2member_map_ else None,
                   bool(virt), int(uid))
        byv = a.try_get(d, A.HIPDNN_ATTR_TENSOR_IS_BY_VALUE, T.HIPDNN_TYPE_BOOLEAN)
        if byv and byv[0]:
            try:
                raw = a.get(d, A.HIPDNN_ATTR_TENSOR_VALUE_EXT, T.HIPDNN_TYPE_CHAR,
                            element_size(t.data_type))
                b = bytes(bytearray(ord(c) if isinstance(c, bytes) else c for c in raw))
                from .tensor import to_numpy_dtype
                npd = to_numpy_dtype(t.data_type)
                t._value = np.frombuffer(b, dtype=npd)[0].item() if npd is not None else b
            except Exception:
                pass
        rt = a.try_get(d, A.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, T.HIPDNN_TYPE_BOOLEAN)
        if rt and rt[0]:
            t._runtime = True
        tensors[uid] = t
        self._tensors.append(t)
        return t

    # ================================================================== misc
    def get_tensors(self) -> list[Tensor]:
        return self._graph_tensors()

    def get_tensor_by_uid(self, uid):
        for t in self._graph_tensors():
            if t.uid == uid:
                return t
        return None

    def get_tensor_by_name(self, name):
        for t in self._graph_tensors():
            if t.name == name:
                return t
        return None

    @property
    def nodes(self):
        return [(n.kind, n.name) for n in (self._order or self._nodes)]

    def close(self):
        """Destroy the backend descriptors (and the handle, when the graph created it)."""
        api = getattr(self, "api", None)
        if api is None:
            return
        try:
            self._release_plans()
            self._free_device_workspace()
            if self._gdesc is not None:
                api.destroy(self._gdesc)
                self._gdesc = None
            if self._own_handle and self.handle is not None:
                self.handle.close()
                self.handle = None
                self._own_handle = False
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        ops = ", ".join(k for k, _ in self.nodes)
        return f"Graph(name={self.name!r}, ops=[{ops}], engine={self._engine_name or self.engine_id})"
