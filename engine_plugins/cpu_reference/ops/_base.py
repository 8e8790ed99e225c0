"""Node plan builders and node plan executors of the CPU reference engine (RFC 004).

One builder class per operation.  A builder

* names the tensor roles the node reads and writes (``INPUTS`` / ``OUTPUTS``: schema field
  names without ``_tensor_uid``) and which of them are optional;
* ``signature(node, graph)`` checks the node's structure (ranks, shapes, parameters) and returns
  its :class:`SignatureKey` - or ``None`` when the node cannot run here;
* ``supported_keys()`` lists every key it handles (registered in the PlanBuilderRegistry);
* ``build(node, graph)`` returns a :class:`NodePlan` whose ``run(env)`` reads its inputs from and
  writes its outputs to ``env`` (uid -> numpy array in *storage* dtype, any strides).

Numerics are those of :mod:`.kernels` (16-bit types compute in float32; statistics accumulate in
float64); results are rounded once to the output tensor's type.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..kernels import batchnorm as kbn
from ..kernels import blocked as kblocked
from ..kernels import conv as kconv
from ..kernels import dtypes as kdt
from ..kernels import layout as klayout
from ..kernels import matmul as kmm
from ..kernels import norms as knorm
from ..kernels import pointwise as kpw
from ..kernels import reduction as kred
from ..kernels import philox as kphilox
from ..kernels import sdpa as ksdpa
from ..signature import (BOOL, FB_NAMES, FLOATS, INTS, STRIDED, SignatureKey, default_compute,
                        dtype_name, kernel_type, layout_class)

FP16 = ("HALF", "BFLOAT16")


class Unsupported(Exception):
    """The node cannot run on this engine (becomes 'not applicable')."""


def _need(cond, why):
    if not cond:
        raise Unsupported(why)


# --------------------------------------------------------------------------- tensor access
def load(env, t):
    """Tensor t from env, decoded to its compute dtype (bf16/half -> float32)."""
    return kdt.decode(env[t.uid], kernel_type(dtype_name(t.dtype)))


def store(env, t, values):
    """Round values to t's type and write them into t's (strided) storage."""
    dst = env[t.uid]
    v = np.asarray(values)
    if v.shape != dst.shape:
        v = v.reshape(dst.shape) if v.size == dst.size else np.broadcast_to(v, dst.shape)
    klayout.write(dst, kdt.encode(v, kernel_type(dtype_name(t.dtype))))


def _np_compute(name):
    return np.float64 if name == "DOUBLE" else np.float32


class NodePlan:
    """A node ready to run: ``fn(env)`` does the work."""
    __slots__ = ("name", "kind", "inputs", "outputs", "fn")

    def __init__(self, node, inputs, outputs, fn):
        self.name, self.kind = node.name, node.kind
        self.inputs, self.outputs, self.fn = list(inputs), list(outputs), fn

    def run(self, env):
        self.fn(env)


# --------------------------------------------------------------------------- base builder
class NodeBuilder:
    KIND = ""
    INPUTS: tuple = ()
    OUTPUTS: tuple = ()
    OPTIONAL: frozenset = frozenset()
    KEY_ROLES: tuple = ()
    TYPES: tuple = ()      # data types its tensors may have (default: kdt_names())

    # -- structure
    @classmethod
    def tensors(cls, node, graph):
        """role -> Tensor for the roles present; raises Unsupported for a missing mandatory one."""
        out = {}
        for role in cls.INPUTS + cls.OUTPUTS:
            uid = node.attrs.get(role + "_tensor_uid")
            if uid is None or uid not in graph.tensors:
                _need(role in cls.OPTIONAL or (uid is not None and uid in graph.tensors),
                      f"{cls.KIND}: {role} tensor missing")
                continue
            out[role] = graph.tensors[uid]
        for r, t in out.items():
            _need(len(t.dims) == len(t.strides) and len(t.dims) > 0,
                  f"{cls.KIND}: {r} tensor has {len(t.dims)} dims and {len(t.strides)} strides")
            _need(all(int(d) >= 0 for d in t.dims), f"{cls.KIND}: negative dim in {r}")
            _need(dtype_name(t.dtype) in (cls.TYPES or kdt_names()),
                  f"{cls.KIND}: {r} type {dtype_name(t.dtype)} unsupported")
        return out

    @classmethod
    def io_uids(cls, node, graph):
        ts = cls.tensors(node, graph)
        return ([ts[r].uid for r in cls.INPUTS if r in ts], [ts[r].uid for r in cls.OUTPUTS if r in ts])

    @classmethod
    def compute_name(cls, node, types):
        c = dtype_name(node.compute_dtype)
        return default_compute(types) if c == BOOL else c   # UNSET (read as BOOLEAN) -> default

    def key(self, node, graph, ts, dtypes):
        outs = [ts[r] for r in self.OUTPUTS if r in ts]
        comp = self.compute_name(node, [t for _, t in dtypes])
        return SignatureKey(self.KIND, tuple(dtypes), comp, layout_class(outs))

    def signature(self, node, graph):
        raise NotImplementedError

    def build(self, node, graph) -> NodePlan:
        raise NotImplementedError

    @classmethod
    def supported_keys(cls):
        raise NotImplementedError


def kdt_names():
    # FP8_E4M3 / FP8_E5M2: the signature keys of matmul, convolution and pointwise take them
    return ("FLOAT", "DOUBLE", "HALF", "BFLOAT16", "INT8", "UINT8", "INT32", "INT64", BOOL,
            "FP8_E4M3", "FP8_E5M2")


def _scalar_ok(t):
    return t.numel == 1 and dtype_name(t.dtype) in FLOATS


def _per_channel_ok(t, C):
    return t.numel == C


def _float_compute(io):
    return ("DOUBLE", "FLOAT") if io == "DOUBLE" else ("FLOAT",)


def _dims(t):
    return tuple(int(d) for d in t.dims)


# =========================================================================== convolution
class _ConvBase(NodeBuilder):
    ROLES = ()   # (a, b, out) roles

    @classmethod
    def supported_keys(cls):
        a, b, o = cls.ROLES
        for t in FLOATS:
            outs = tuple(sorted({t, "FLOAT"}))
            for ot in outs:
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, ((a, t), (b, t), (o, ot)), c, STRIDED)
        for t in F8:
            for ot in _f8_outs(t):
                yield SignatureKey(cls.KIND, ((a, t), (b, t), (o, ot)), "FLOAT", STRIDED)

    def params(self, node, nsp):
        a = node.attrs
        p = {}
        for f, default in (("pre_padding", 0), ("post_padding", 0), ("stride", 1), ("dilation", 1)):
            v = a.get(f)
            v = [default] * nsp if v is None else list(v)
            _need(len(v) == nsp, f"{self.KIND}: {f} has {len(v)} entries for {nsp} spatial dims")
            p[f] = tuple(int(e) for e in v)
        _need(all(e >= 0 for e in p["pre_padding"] + p["post_padding"]), "negative padding")
        _need(all(e >= 1 for e in p["stride"] + p["dilation"]), "stride/dilation < 1")
        mode = FB_NAMES["ConvMode"].get(a.get("conv_mode"))
        _need(mode in ("CONVOLUTION", "CROSS_CORRELATION"), f"{self.KIND}: conv_mode {mode}")
        p["conv_mode"] = mode
        return p

    def shapes(self, ts):
        raise NotImplementedError

    def signature(self, node, graph):
        ts = self.tensors(node, graph)
        xs, ws, ys = self.shapes(ts)
        _need(3 <= len(xs) <= 5 and len(ws) == len(xs) and len(ys) == len(xs), "conv ranks")
        p = self.params(node, len(xs) - 2)
        try:
            exp = kconv.conv_output_shape(xs, ws, p["pre_padding"], p["post_padding"],
                                          p["stride"], p["dilation"])
            kconv._groups(xs[1], ws[0], ws[1])
        except ValueError as e:
            raise Unsupported(str(e)) from None
        _need(tuple(exp) == tuple(ys), f"{self.KIND}: output shape {ys} != expected {exp}")
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in self.ROLES])


class ConvFwdBuilder(_ConvBase):
    KIND = "ConvolutionFwdAttributes"
    INPUTS, OUTPUTS, ROLES = ("x", "w"), ("y",), ("x", "w", "y")

    def shapes(self, ts):
        return _dims(ts["x"]), _dims(ts["w"]), _dims(ts["y"])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        p = self.params(node, len(ts["x"].dims) - 2)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["x"].dtype)]))
        x, w, y = ts["x"], ts["w"], ts["y"]

        def fn(env):
            r = kconv.conv_fwd(load(env, x), load(env, w), p["pre_padding"], p["post_padding"],
                               p["stride"], p["dilation"], p["conv_mode"], compute_dtype=cdt)
            store(env, y, r)
        return NodePlan(node, [x.uid, w.uid], [y.uid], fn)


class ConvBwdDataBuilder(_ConvBase):
    KIND = "ConvolutionBwdAttributes"
    INPUTS, OUTPUTS, ROLES = ("dy", "w"), ("dx",), ("dy", "w", "dx")

    def shapes(self, ts):
        return _dims(ts["dx"]), _dims(ts["w"]), _dims(ts["dy"])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        p = self.params(node, len(ts["dx"].dims) - 2)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["dy"].dtype)]))
        dy, w, dx = ts["dy"], ts["w"], ts["dx"]
        xs = _dims(dx)

        def fn(env):
            r = kconv.conv_bwd_data(load(env, dy), load(env, w), xs, p["pre_padding"],
                                    p["post_padding"], p["stride"], p["dilation"], p["conv_mode"],
                                    compute_dtype=cdt)
            store(env, dx, r)
        return NodePlan(node, [dy.uid, w.uid], [dx.uid], fn)


class ConvBwdFilterBuilder(_ConvBase):
    KIND = "ConvolutionWrwAttributes"
    INPUTS, OUTPUTS, ROLES = ("x", "dy"), ("dw",), ("x", "dy", "dw")

    def shapes(self, ts):
        return _dims(ts["x"]), _dims(ts["dw"]), _dims(ts["dy"])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        p = self.params(node, len(ts["x"].dims) - 2)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["x"].dtype)]))
        x, dy, dw = ts["x"], ts["dy"], ts["dw"]
        ws = _dims(dw)

        def fn(env):
            r = kconv.conv_bwd_filter(load(env, x), load(env, dy), ws, p["pre_padding"],
                                      p["post_padding"], p["stride"], p["dilation"],
                                      p["conv_mode"], compute_dtype=cdt)
            store(env, dw, r)
        return NodePlan(node, [x.uid, dy.uid], [dw.uid], fn)


# =========================================================================== batchnorm
def _scalar_value(env, t):
    a = np.asarray(load(env, t), dtype=np.float64).reshape(-1)
    return float(a[0])


class _NormBase(NodeBuilder):
    """Shared key logic: (data roles..., param=<common type of the per-channel/affine tensors>)."""
    DATA = ()      # roles with the activation type (key roles)
    PARAMS = ()    # per-channel / affine / statistics roles: one common type
    SCALARS = ()   # 1-element float tensors (epsilon, momentum)

    @classmethod
    def supported_keys(cls):
        # data inputs: the io type t; data outputs: t or FLOAT; parameters: t or FLOAT
        for t in FLOATS:
            choices = [(t,) if r in cls.INPUTS else tuple(sorted({t, "FLOAT"})) for r in cls.DATA]
            for data in itertools.product(*choices):
                # "MIXED": each parameter is t or FLOAT (frameworks' 16-bit graphs: FLOAT
                # scale/bias/running stats beside 16-bit saved statistics or gradients)
                for pt in sorted({t, "FLOAT"}) + (["MIXED"] if t != "FLOAT" else []):
                    for c in _float_compute(t):
                        yield SignatureKey(cls.KIND, tuple(zip(cls.DATA, data)) + (("param", pt),),
                                           c, STRIDED)

    def common_key(self, node, graph, ts):
        ptypes = {dtype_name(ts[r].dtype) for r in self.PARAMS if r in ts}
        dtypes = [(r, dtype_name(ts[r].dtype)) for r in self.DATA]
        io = dtypes[0][1]
        if len(ptypes) > 1:
            _need(ptypes <= {io, "FLOAT"},
                  f"{self.KIND}: parameter tensors of mixed types {sorted(ptypes)} (each must be "
                  f"the data type {io} or FLOAT)")
            pt = "MIXED"
        else:
            pt = ptypes.pop() if ptypes else io
        for r in self.SCALARS:
            if r in ts:
                _need(_scalar_ok(ts[r]), f"{self.KIND}: {r} must be a 1-element float tensor")
        return self.key(node, graph, ts, dtypes + [("param", pt)])


class _BatchnormBase(_NormBase):
    def check_channels(self, ts, xrole="x"):
        x = ts[xrole]
        _need(len(x.dims) >= 2, "batchnorm needs (N, C, ...)")
        C = int(x.dims[1])
        for r in self.PARAMS:
            if r in ts:
                _need(_per_channel_ok(ts[r], C), f"{self.KIND}: {r} must hold C={C} elements")
        return C

    def signature(self, node, graph):
        if node.attrs.get("peer_stats_tensor_uid"):
            raise Unsupported("peer statistics (multi-device batchnorm) are not supported")
        ts = self.tensors(node, graph)
        self.check_channels(ts, self.DATA[0])
        for r in self.DATA[1:]:
            _need(_dims(ts[r]) == _dims(ts[self.DATA[0]]), f"{self.KIND}: {r} shape differs")
        self.extra_checks(ts)
        return self.common_key(node, graph, ts)

    def extra_checks(self, ts):
        pass


class BatchnormInferenceBuilder(_BatchnormBase):
    KIND = "BatchnormInferenceAttributes"
    INPUTS, OUTPUTS = ("x", "mean", "inv_variance", "scale", "bias"), ("y",)
    DATA, PARAMS = ("x", "y"), ("mean", "inv_variance", "scale", "bias")

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        y32 = dtype_name(ts["y"].dtype) == "FLOAT"

        def fn(env):
            dst = env[ts["y"].uid] if y32 else None
            r = kbn.batchnorm_inference(load(env, ts["x"]), load(env, ts["scale"]),
                                        load(env, ts["bias"]), load(env, ts["mean"]),
                                        load(env, ts["inv_variance"]), out=dst)
            if r is not dst:
                store(env, ts["y"], r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class BatchnormInferenceVarianceBuilder(_BatchnormBase):
    KIND = "BatchnormInferenceAttributesVarianceExt"
    INPUTS, OUTPUTS = ("x", "mean", "variance", "scale", "bias", "epsilon"), ("y",)
    DATA, PARAMS, SCALARS = ("x", "y"), ("mean", "variance", "scale", "bias"), ("epsilon",)

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        y32 = dtype_name(ts["y"].dtype) == "FLOAT"

        def fn(env):
            dst = env[ts["y"].uid] if y32 else None
            r = kbn.batchnorm_inference_variance(
                load(env, ts["x"]), load(env, ts["scale"]), load(env, ts["bias"]),
                load(env, ts["mean"]), load(env, ts["variance"]), _scalar_value(env, ts["epsilon"]),
                out=dst)
            if r is not dst:
                store(env, ts["y"], r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class BatchnormTrainBuilder(_BatchnormBase):
    KIND = "BatchnormAttributes"
    INPUTS = ("x", "scale", "bias", "epsilon", "prev_running_mean", "prev_running_variance",
              "momentum")
    OUTPUTS = ("y", "mean", "inv_variance", "next_running_mean", "next_running_variance")
    OPTIONAL = frozenset({"prev_running_mean", "prev_running_variance", "momentum", "mean",
                          "inv_variance", "next_running_mean", "next_running_variance"})
    DATA = ("x", "y")
    PARAMS = ("scale", "bias", "prev_running_mean", "prev_running_variance", "mean",
              "inv_variance", "next_running_mean", "next_running_variance")
    SCALARS = ("epsilon", "momentum")

    def extra_checks(self, ts):
        running = [r in ts for r in ("prev_running_mean", "prev_running_variance", "momentum",
                                     "next_running_mean", "next_running_variance")]
        _need(all(running) or not any(running[3:]),
              "next running statistics need prev running mean/variance and momentum")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        run = "next_running_mean" in ts or "next_running_variance" in ts

        def fn(env):
            kw = {}
            if run:
                kw = dict(momentum=_scalar_value(env, ts["momentum"]),
                          prev_running_mean=load(env, ts["prev_running_mean"]),
                          prev_running_variance=load(env, ts["prev_running_variance"]))
            r = kbn.batchnorm_train_fwd(load(env, ts["x"]), load(env, ts["scale"]),
                                        load(env, ts["bias"]), _scalar_value(env, ts["epsilon"]),
                                        **kw)
            store(env, ts["y"], r.y)
            for role, v in (("mean", r.mean), ("inv_variance", r.inv_variance),
                            ("next_running_mean", r.next_running_mean),
                            ("next_running_variance", r.next_running_variance)):
                if role in ts:
                    store(env, ts[role], v)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class BatchnormBwdBuilder(_BatchnormBase):
    KIND = "BatchnormBackwardAttributes"
    INPUTS, OUTPUTS = ("dy", "x", "mean", "inv_variance", "scale"), ("dx", "dscale", "dbias")
    OPTIONAL = frozenset({"mean", "inv_variance"})
    DATA = ("x", "dy", "dx")
    PARAMS = ("mean", "inv_variance", "scale", "dscale", "dbias")

    def extra_checks(self, ts):
        _need("mean" in ts and "inv_variance" in ts,
              "batchnorm backward without saved mean/inv_variance needs epsilon (not in the node)")

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        def fn(env):
            r = kbn.batchnorm_bwd(load(env, ts["dy"]), load(env, ts["x"]), load(env, ts["scale"]),
                                  load(env, ts["mean"]), load(env, ts["inv_variance"]))
            store(env, ts["dx"], r.dx)
            store(env, ts["dscale"], r.dscale)
            store(env, ts["dbias"], r.dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


# =========================================================================== layer / rms norm
class _LnBase(_NormBase):
    def signature(self, node, graph):
        ts = self.tensors(node, graph)
        x = ts["x"]
        for r in self.DATA[1:]:
            _need(_dims(ts[r]) == _dims(x), f"{self.KIND}: {r} shape differs from x")
        k = node.attrs.get("normalized_dim_count")
        _need(k is None or 0 <= int(k) <= len(x.dims), "normalized_dim_count out of range")
        for r in self.PARAMS:
            if r in ts:
                _need(len(ts[r].dims) == len(x.dims), f"{self.KIND}: {r} rank differs from x")
                try:
                    np.broadcast_shapes(_dims(ts[r]), _dims(x))
                except ValueError:
                    raise Unsupported(f"{self.KIND}: {r} does not broadcast to x") from None
        return self.common_key(node, graph, ts)

    @staticmethod
    def ndc(node):
        k = node.attrs.get("normalized_dim_count")
        return int(k) if k else None


class LayernormFwdBuilder(_LnBase):
    KIND = "LayernormAttributes"
    INPUTS, OUTPUTS = ("x", "scale", "bias", "epsilon"), ("y", "mean", "inv_variance")
    OPTIONAL = frozenset({"mean", "inv_variance"})
    DATA, PARAMS, SCALARS = ("x", "y"), ("scale", "bias", "mean", "inv_variance"), ("epsilon",)

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        ndc = self.ndc(node)
        stats = _dims(ts["mean"]) if "mean" in ts else (
            _dims(ts["inv_variance"]) if "inv_variance" in ts else None)

        def fn(env):
            r = knorm.layernorm_fwd(load(env, ts["x"]), load(env, ts["scale"]),
                                    load(env, ts["bias"]), _scalar_value(env, ts["epsilon"]),
                                    ndc, stats)
            store(env, ts["y"], r.y)
            for role, v in (("mean", r.mean), ("inv_variance", r.inv_variance)):
                if role in ts:
                    store(env, ts[role], v.reshape(_dims(ts[role])))
        return NodePlan(node, *self.io_uids(node, graph), fn)


class LayernormBwdBuilder(_LnBase):
    KIND = "LayernormBackwardAttributes"
    INPUTS = ("dy", "x", "scale", "mean", "inv_variance", "epsilon")
    OUTPUTS = ("dx", "dscale", "dbias")
    OPTIONAL = frozenset({"mean", "inv_variance", "epsilon"})
    DATA, PARAMS, SCALARS = ("x", "dy", "dx"), ("scale", "mean", "inv_variance", "dscale", "dbias"), ("epsilon",)

    def signature(self, node, graph):
        k = super().signature(node, graph)
        ts = self.tensors(node, graph)
        _need("inv_variance" in ts or "epsilon" in ts, "layernorm backward needs inv_variance or epsilon")
        return k

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        ndc = self.ndc(node)

        def fn(env):
            g = lambda r: load(env, ts[r]) if r in ts else None  # noqa: E731
            eps = _scalar_value(env, ts["epsilon"]) if "epsilon" in ts else None
            r = knorm.layernorm_bwd(load(env, ts["dy"]), load(env, ts["x"]), g("scale"), g("mean"),
                                    g("inv_variance"), eps, ndc, _dims(ts["dbias"]))
            store(env, ts["dx"], r.dx)
            store(env, ts["dscale"], r.dscale)
            store(env, ts["dbias"], r.dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class RmsnormFwdBuilder(_LnBase):
    KIND = "RMSNormAttributes"
    INPUTS, OUTPUTS = ("x", "scale", "epsilon", "bias"), ("y", "inv_rms")
    OPTIONAL = frozenset({"bias", "inv_rms"})
    DATA, PARAMS, SCALARS = ("x", "y"), ("scale", "bias", "inv_rms"), ("epsilon",)

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        stats = _dims(ts["inv_rms"]) if "inv_rms" in ts else None

        def fn(env):
            r = knorm.rmsnorm_fwd(load(env, ts["x"]), load(env, ts["scale"]),
                                  _scalar_value(env, ts["epsilon"]),
                                  load(env, ts["bias"]) if "bias" in ts else None, None, stats)
            store(env, ts["y"], r.y)
            if "inv_rms" in ts:
                store(env, ts["inv_rms"], r.inv_rms.reshape(_dims(ts["inv_rms"])))
        return NodePlan(node, *self.io_uids(node, graph), fn)


class RmsnormBwdBuilder(_LnBase):
    KIND = "RMSNormBackwardAttributes"
    INPUTS, OUTPUTS = ("dy", "x", "scale", "inv_rms"), ("dx", "dscale", "dbias")
    OPTIONAL = frozenset({"dbias"})
    DATA, PARAMS = ("x", "dy", "dx"), ("scale", "inv_rms", "dscale", "dbias")

    def build(self, node, graph):
        ts = self.tensors(node, graph)

        def fn(env):
            r = knorm.rmsnorm_bwd(load(env, ts["dy"]), load(env, ts["x"]), load(env, ts["scale"]),
                                  load(env, ts["inv_rms"]), None,
                                  _dims(ts["dbias"]) if "dbias" in ts else None)
            store(env, ts["dx"], r.dx)
            store(env, ts["dscale"], r.dscale)
            if "dbias" in ts:
                store(env, ts["dbias"], r.dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


# =========================================================================== pointwise
_PW_EXACT_INT = {"ADD", "SUB", "MUL", "MAX_OP", "MIN_OP", "ABS", "NEG", "IDENTITY"}
_PW_CMP = {"CMP_EQ", "CMP_GE", "CMP_GT", "CMP_LE", "CMP_LT", "CMP_NEQ"}
_PW_LOGIC = {"LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"}
_LOGIC_TYPES = (BOOL,) + INTS + FLOATS
# FP8 data (stored one code per byte, computed in float32 through kernels/dtypes.py's minifloat
# decode/encode) in matmul, convolution and pointwise nodes, as the GPU engine runs them: inputs
# of one fp8 type, outputs that type or HALF/BFLOAT16/FLOAT.
F8 = ("FP8_E4M3", "FP8_E5M2")
_ALL_TYPES = FLOATS + INTS + ("INT64", BOOL) + F8


def _f8_outs(t):
    return (t, "HALF", "BFLOAT16", "FLOAT")
_PW_PARAMS = ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "swish_beta",
              "elu_alpha", "softplus_beta")
# float32 in -> float32 out, default parameters: computed straight into the output
_FAST_F32 = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
             "MAX_OP": np.maximum, "MIN_OP": np.minimum}


def _pw_roles(arity):
    return ("in_0", "in_1", "in_2")[:arity]


class PointwiseBuilder(NodeBuilder):
    KIND = "PointwiseAttributes"
    INPUTS, OUTPUTS = ("in_0", "in_1", "in_2"), ("out_0",)
    OPTIONAL = frozenset({"in_1", "in_2"})

    @staticmethod
    def info(mode):
        return kpw.POINTWISE_MODES[kpw.canonical_mode(mode)]

    @classmethod
    def supported_keys(cls):
        for mode in FB_NAMES["PointwiseMode"].values():
            if mode == "UNSET":
                continue
            info = cls.info(mode)
            op = f"{cls.KIND}:{mode}"
            roles = _pw_roles(info.arity) + ("out_0",)
            for combo, comps in cls._combos(mode, info.arity):
                for c in comps:
                    yield SignatureKey(op, tuple(zip(roles, combo)), c, STRIDED)

    @staticmethod
    def _combos(mode, arity):
        fc = ("FLOAT", "DOUBLE")
        if mode == "IDENTITY":
            for a, o in itertools.product(_ALL_TYPES, _ALL_TYPES):
                yield (a, o), fc
            return
        if mode == "GEN_INDEX":
            for a, o in itertools.product(_ALL_TYPES, ("INT32", "INT64")):
                yield (a, o), fc + ("INT32",)
            return
        if mode in _PW_LOGIC:
            for combo in itertools.product(_LOGIC_TYPES, repeat=arity + 1):
                yield combo, fc + ("INT32",)
            for t in F8:
                for o in _f8_outs(t):
                    yield (t,) * arity + (o,), fc + ("INT32",)
            return
        if mode in _PW_CMP:
            for ins in itertools.product(FLOATS, repeat=arity):
                for o in (BOOL,) + FLOATS + INTS:
                    yield ins + (o,), fc
            for t in INTS:
                for o in (BOOL,) + FLOATS + INTS:
                    yield (t, t, o), fc + ("INT32",)
            for t in F8:
                for o in (BOOL,) + FLOATS + INTS + (t,):
                    yield (t,) * arity + (o,), fc
            return
        if mode == "BINARY_SELECT":
            for a, b, o in itertools.product(FLOATS, repeat=3):
                for m in (BOOL,) + INTS + FLOATS:
                    yield (a, b, m, o), fc
            for t in INTS:
                for m in (BOOL,) + INTS:
                    yield (t, t, m, t), fc + ("INT32",)
            for t in F8:
                for o in _f8_outs(t):
                    for m in (BOOL,) + INTS + FLOATS + (t,):
                        yield (t, t, m, o), fc
            return
        for combo in itertools.product(FLOATS, repeat=arity + 1):
            yield combo, fc
        for t in F8:
            for o in _f8_outs(t):
                yield (t,) * arity + (o,), fc
        if mode in _PW_EXACT_INT:
            for t in INTS:
                yield (t,) * (arity + 1), fc + ("INT32",)

    def signature(self, node, graph):
        mode = FB_NAMES["PointwiseMode"].get(node.attrs.get("operation"))
        _need(mode not in (None, "UNSET"), "pointwise mode unset/unknown")
        info = self.info(mode)
        ts = self.tensors(node, graph)
        roles = _pw_roles(info.arity)
        _need(all(r in ts for r in roles), f"pointwise {mode} needs {info.arity} inputs")
        out = ts["out_0"]
        try:
            shape = np.broadcast_shapes(*[_dims(ts[r]) for r in roles], _dims(out))
        except ValueError:
            raise Unsupported("pointwise inputs do not broadcast to the output") from None
        _need(tuple(shape) == _dims(out), "pointwise output shape is not the broadcast shape")
        if mode == "GEN_INDEX":
            ax = node.attrs.get("axis_tensor_uid")
            _need(ax is not None and -len(out.dims) <= int(ax) < len(out.dims), "GEN_INDEX axis")
        dtypes = [(r, dtype_name(ts[r].dtype)) for r in roles + ("out_0",)]
        return self.key(node, graph, ts, dtypes)._replace(op=f"{self.KIND}:{mode}")

    def build(self, node, graph):
        a = node.attrs
        mode = FB_NAMES["PointwiseMode"][a["operation"]]
        info = self.info(mode)
        ts = self.tensors(node, graph)
        ins = [ts[r] for r in _pw_roles(info.arity)]
        out = ts["out_0"]
        types = [dtype_name(t.dtype) for t in ins]
        otype = dtype_name(out.dtype)
        params = {k: a.get(k) for k in _PW_PARAMS if a.get(k) is not None}
        if mode == "GEN_INDEX":
            params["axis"] = int(a["axis_tensor_uid"])
        comp = self.compute_name(node, types + [otype])
        all_int = all(t in INTS + ("INT64", BOOL) for t in types)
        cdt = None if all_int else _np_compute(comp)
        oshape = _dims(out)

        if (not params and mode in _FAST_F32 and types == ["FLOAT", "FLOAT"] and otype == "FLOAT"
                and comp == "FLOAT"):
            uf = _FAST_F32[mode]

            def fast(env):
                with np.errstate(all="ignore"):
                    kblocked.par_ufunc(uf, env[ins[0].uid], env[ins[1].uid], out=env[out.uid])
            return NodePlan(node, [t.uid for t in ins], [out.uid], fast)
        if (mode == "RELU_FWD" and not params and types == ["FLOAT"] and otype == "FLOAT"
                and comp == "FLOAT"):
            def relu(env):
                kpw.relu_f32_into(env[out.uid], env[ins[0].uid])
            return NodePlan(node, [ins[0].uid], [out.uid], relu)

        f32_out = otype == "FLOAT" and cdt == np.float32 and info.output == "compute"

        def fn(env):
            dst = env[out.uid] if f32_out else None
            r = kpw.pointwise(mode, *[load(env, t) for t in ins], compute_dtype=cdt,
                              out_shape=oshape, out=dst, **params)
            if r is not dst:
                store(env, out, r)
        return NodePlan(node, [t.uid for t in ins], [out.uid], fn)


# =========================================================================== matmul
def _strip1(shape):
    """shape without leading size-1 dims (kept: the last two)."""
    shape = tuple(int(d) for d in shape)
    i = 0
    while i < len(shape) - 2 and shape[i] == 1:
        i += 1
    return shape[i:]


class MatmulBuilder(NodeBuilder):
    KIND = "MatmulAttributes"
    INPUTS, OUTPUTS = ("a", "b"), ("c",)

    @classmethod
    def supported_keys(cls):
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, (("a", t), ("b", t), ("c", o)), c, STRIDED)
        for t in F8:
            for o in _f8_outs(t):
                yield SignatureKey(cls.KIND, (("a", t), ("b", t), ("c", o)), "FLOAT", STRIDED)
        for o in ("INT32", "FLOAT"):
            for c in ("INT32", "FLOAT"):
                yield SignatureKey(cls.KIND, (("a", "INT8"), ("b", "INT8"), ("c", o)), c, STRIDED)

    def signature(self, node, graph):
        ts = self.tensors(node, graph)
        try:
            shape = kmm.matmul_output_shape(_dims(ts["a"]), _dims(ts["b"]))
        except ValueError as e:
            raise Unsupported(str(e)) from None
        cs = _dims(ts["c"])
        _need(_strip1(cs) == _strip1(shape), f"matmul output {cs} does not hold {tuple(shape)}")
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype)) for r in ("a", "b", "c")])

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        a, b, c = ts["a"], ts["b"], ts["c"]
        ints = dtype_name(a.dtype) == "INT8"
        cdt = np.float64 if ints else _np_compute(self.compute_name(node, [dtype_name(a.dtype)]))
        cs = _dims(c)

        def fn(env):
            r = kmm.matmul(load(env, a), load(env, b), compute_dtype=cdt)
            store(env, c, r.reshape(cs))
        return NodePlan(node, [a.uid, b.uid], [c.uid], fn)


# =========================================================================== reduction
class ReductionBuilder(NodeBuilder):
    KIND = "ReductionAttributes"
    INPUTS, OUTPUTS = ("in",), ("out",)

    @classmethod
    def supported_keys(cls):
        for mode in FB_NAMES["ReductionMode"].values():
            if mode == "NOT_SET":
                continue
            for t in FLOATS:
                for o in sorted({t, "FLOAT"}):
                    for c in _float_compute(t):
                        yield SignatureKey(f"{cls.KIND}:{mode}", (("in", t), ("out", o)), c, STRIDED)

    def signature(self, node, graph):
        mode = FB_NAMES["ReductionMode"].get(node.attrs.get("mode"))
        _need(mode not in (None, "NOT_SET"), "reduction mode unset/unknown")
        ts = self.tensors(node, graph)
        try:
            kred.reduced_axes(_dims(ts["in"]), _dims(ts["out"]))
        except ValueError as e:
            raise Unsupported(str(e)) from None
        k = self.key(node, graph, ts, [("in", dtype_name(ts["in"].dtype)),
                                        ("out", dtype_name(ts["out"].dtype))])
        return k._replace(op=f"{self.KIND}:{mode}")

    def build(self, node, graph):
        mode = FB_NAMES["ReductionMode"][node.attrs["mode"]]
        ts = self.tensors(node, graph)
        x, y = ts["in"], ts["out"]
        cdt = _np_compute(self.compute_name(node, [dtype_name(x.dtype)]))
        ys = _dims(y)

        def fn(env):
            store(env, y, kred.reduce(mode, load(env, x), ys, compute_dtype=cdt))
        return NodePlan(node, [x.uid], [y.uid], fn)


# =========================================================================== attention (SDPA)
# roles the engine does not implement (docs/cpu_reference.md): paged K/V, block masks, sink
# tokens, fp8 descale/scale/amax tensors
_SDPA_NA = ("page_table_k", "page_table_v", "block_mask", "sink_token", "descale_q", "descale_k",
            "descale_v", "descale_s", "scale_s", "scale_o", "amax_s", "amax_o")
_IDX = ("INT32", "INT64")


def _scalar_int(env, t):
    return int(np.asarray(env[t.uid]).reshape(-1)[0])


class _SdpaBase(NodeBuilder):
    DATA_IN = ()
    DATA_OUT = ()

    @classmethod
    def supported_keys(cls):
        for t in FLOATS:
            outs = tuple(sorted({t, "FLOAT"}))
            for combo in itertools.product(outs, repeat=len(cls.DATA_OUT)):
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, tuple((r, t) for r in cls.DATA_IN)
                                       + tuple(zip(cls.DATA_OUT, combo)), c, STRIDED)

    def check(self, node, graph):
        a = node.attrs
        ts = self.tensors(node, graph)
        for r in _SDPA_NA:
            _need(a.get(r + "_tensor_uid") in (None, 0), f"{self.KIND}: {r} tensors are not "
                  f"applicable on the CPU reference engine")
        for r in self.DATA_IN + self.DATA_OUT:
            _need(len(ts[r].dims) == 4, f"{self.KIND}: {r} must be 4-d [B, H, S, D]")
        q, k, v = _dims(ts["q"]), _dims(ts["k"]), _dims(ts["v"])
        B, H, Sq, D = q
        _need(k[0] == B and v[0] == B and k[3] == D and k[1] == v[1] and k[2] == v[2],
              f"{self.KIND}: k {k} / v {v} do not match q {q}")
        _need(k[1] >= 1 and H % k[1] == 0, f"{self.KIND}: Hq={H} is not a multiple of Hkv={k[1]}")
        _need(len({dtype_name(ts[r].dtype) for r in self.DATA_IN}) == 1,
              f"{self.KIND}: {'/'.join(self.DATA_IN)} types differ")
        for r in ("scale", "dropout_scale", "dropout_scale_inv"):
            if r in ts:
                _need(_scalar_ok(ts[r]), f"{self.KIND}: {r} must be a 1-element float tensor")
        for r in ("seed", "offset"):
            if r in ts:
                _need(ts[r].numel == 1 and dtype_name(ts[r].dtype) in _IDX,
                      f"{self.KIND}: {r} must be a 1-element INT32/INT64 tensor")
        for r in ("seq_len_q", "seq_len_kv"):
            if r in ts:
                _need(ts[r].numel == B and dtype_name(ts[r].dtype) in _IDX,
                      f"{self.KIND}: {r} must hold B={B} INT32/INT64 lengths")
        if a.get("padding_mask"):
            _need("seq_len_q" in ts and "seq_len_kv" in ts,
                  f"{self.KIND}: the padding mask needs seq_len_q and seq_len_kv")
        full = (B, H, Sq, k[2])
        for r in ("attn_mask", "dropout_mask", "dbias", "rng_dump"):
            if r in ts:
                d = _dims(ts[r])
                _need(len(d) == 4 and all(x in (1, f) for x, f in zip(d, full)),
                      f"{self.KIND}: {r} {d} does not broadcast to {list(full)}")
        if "attn_mask" in ts:
            _need(dtype_name(ts["attn_mask"].dtype) in FLOATS + (BOOL,), "attn_mask type")
        p = a.get("dropout_probability")
        if p is not None and float(p) != 0.0:
            _need(0.0 < float(p) < 1.0, f"{self.KIND}: dropout probability {p} not in [0, 1)")
            _need("seed" in ts and "offset" in ts, f"{self.KIND}: dropout needs seed and offset")
        if "dropout_mask" in ts:
            _need(not p, f"{self.KIND}: a dropout mask and a dropout probability together")
        for r in ("left_bound", "right_bound"):
            if a.get(r) is not None:
                _need(int(a[r]) >= 0, f"{self.KIND}: {r} must be >= 0")
        return ts

    def signature(self, node, graph):
        ts = self.check(node, graph)
        self.extra_checks(node, ts)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype))
                                          for r in self.DATA_IN + self.DATA_OUT])

    def extra_checks(self, node, ts):
        pass

    @staticmethod
    def params(node, ts, env, cdt):
        a = node.attrs
        P = ksdpa.SdpaParams()
        if "scale" in ts:
            P.scale = _scalar_value(env, ts["scale"])
        elif a.get("attn_scale_value") is not None:
            P.scale = float(a["attn_scale_value"])
        P.alibi = bool(a.get("alibi_mask"))
        P.causal = bool(a.get("causal_mask"))
        P.causal_bottom_right = bool(a.get("causal_mask_bottom_right"))
        P.left_bound = a.get("left_bound")
        P.right_bound = a.get("right_bound")
        P.bottom_right = FB_NAMES["DiagonalAlignment"].get(a.get("diagonal_alignment")) == "BOTTOM_RIGHT"
        if P.causal_bottom_right and not P.causal:
            P.bottom_right = True
        if a.get("padding_mask") or "seq_len_q" in ts:
            for r in ("seq_len_q", "seq_len_kv"):
                if r in ts:
                    setattr(P, r, np.asarray(env[ts[r].uid]).reshape(-1).astype(np.int64))
        if "attn_mask" in ts:
            P.mask_is_bool = dtype_name(ts["attn_mask"].dtype) == BOOL
            P.attn_mask = np.asarray(load(env, ts["attn_mask"]))
        if "dropout_scale" in ts:
            P.dropout_scale = _scalar_value(env, ts["dropout_scale"])
        prob = a.get("dropout_probability")
        if prob:
            P.dropout = ("philox", float(prob), _scalar_int(env, ts["seed"]),
                         _scalar_int(env, ts["offset"]))
        elif "dropout_mask" in ts:
            P.dropout = ("mask", np.asarray(load(env, ts["dropout_mask"]), dtype=cdt),
                         P.dropout_scale)
        return P


class SdpaFwdBuilder(_SdpaBase):
    KIND = "SdpaAttributes"
    INPUTS = ("q", "k", "v", "attn_mask", "scale", "seq_len_q", "seq_len_kv", "seed", "offset",
              "dropout_mask", "dropout_scale")
    OUTPUTS = ("o", "stats", "max", "sum_exp", "rng_dump")
    OPTIONAL = frozenset(INPUTS[3:] + OUTPUTS[1:])
    DATA_IN, DATA_OUT = ("q", "k", "v"), ("o",)

    def extra_checks(self, node, ts):
        B, H, Sq, _ = _dims(ts["q"])
        want = [B, H, Sq, _dims(ts["v"])[3]]
        _need(list(_dims(ts["o"])) == want, f"{self.KIND}: o must be {want}")
        for r in ("stats", "max", "sum_exp"):
            if r in ts:
                _need(list(_dims(ts[r])) == [B, H, Sq, 1], f"{self.KIND}: {r} must be "
                      f"[{B}, {H}, {Sq}, 1]")
                _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} type")
        if node.attrs.get("generate_stats"):
            _need("stats" in ts, f"{self.KIND}: generate_stats without a stats tensor")
        if "rng_dump" in ts:
            _need(node.attrs.get("dropout_probability"), f"{self.KIND}: rng_dump without dropout")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["q"].dtype)]))

        def fn(env):
            P = self.params(node, ts, env, cdt)
            o, stats, mx, se = ksdpa.sdpa_fwd(load(env, ts["q"]), load(env, ts["k"]),
                                              load(env, ts["v"]), P, cdt)
            store(env, ts["o"], o)
            for r, val in (("stats", stats), ("max", mx), ("sum_exp", se)):
                if r in ts:
                    store(env, ts[r], val)
            if "rng_dump" in ts:
                B, H, Sq, _ = o.shape
                Skv = int(ts["k"].dims[2])
                _, prob, seed, off = P.dropout
                z = np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, Skv, prob)
                                        for h in range(H)]) for b in range(B)])
                store(env, ts["rng_dump"], z.astype(cdt))
        return NodePlan(node, *self.io_uids(node, graph), fn)


class SdpaBwdBuilder(_SdpaBase):
    KIND = "SdpaBackwardAttributes"
    INPUTS = ("q", "k", "v", "o", "do", "stats", "scale", "attn_mask", "seq_len_q",
              "seq_len_kv", "seed", "offset", "dropout_mask", "dropout_scale",
              "dropout_scale_inv")
    OUTPUTS = ("dq", "dk", "dv", "dbias")
    OPTIONAL = frozenset(INPUTS[6:] + ("dbias",))
    DATA_IN, DATA_OUT = ("q", "k", "v", "o", "do"), ("dq", "dk", "dv")

    def extra_checks(self, node, ts):
        B, H, Sq, _ = _dims(ts["q"])
        want_o = [B, H, Sq, _dims(ts["v"])[3]]
        for r in ("o", "do"):
            _need(list(_dims(ts[r])) == want_o, f"{self.KIND}: {r} must be {want_o}")
        _need(list(_dims(ts["stats"])) == [B, H, Sq, 1], f"{self.KIND}: stats must be "
              f"[{B}, {H}, {Sq}, 1]")
        _need(dtype_name(ts["stats"].dtype) in FLOATS, f"{self.KIND}: stats type")
        for g, x in (("dq", "q"), ("dk", "k"), ("dv", "v")):
            _need(_dims(ts[g]) == _dims(ts[x]), f"{self.KIND}: {g} shape differs from {x}")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["q"].dtype)]))
        dbs = _dims(ts["dbias"]) if "dbias" in ts else None

        def fn(env):
            P = self.params(node, ts, env, cdt)
            dq, dk, dv, dbias = ksdpa.sdpa_bwd(
                load(env, ts["q"]), load(env, ts["k"]), load(env, ts["v"]), load(env, ts["o"]),
                load(env, ts["do"]), load(env, ts["stats"]), P, cdt, dbs)
            store(env, ts["dq"], dq)
            store(env, ts["dk"], dk)
            store(env, ts["dv"], dv)
            if dbias is not None:
                store(env, ts["dbias"], dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)
