"""Pointwise: every hipDNN pointwise mode, keyed per mode (``PointwiseAttributes:<MODE>``)."""
from __future__ import annotations

import itertools

import numpy as np

from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas.catalog import FB_NAMES

from ..kernels import blocked as kblocked
from ..kernels import pointwise as kpw
from ..signature import BOOL, FLOATS, INTS, STRIDED, SignatureKey, dtype_name
from ._base import (F8, NodeBuilder, NodePlan, Unsupported, _dims, _f8_outs, _need, _np_compute,
                    load, store)


_PW_EXACT_INT = {"ADD", "SUB", "MUL", "MAX_OP", "MIN_OP", "ABS", "NEG", "IDENTITY"}
_PW_CMP = {"CMP_EQ", "CMP_GE", "CMP_GT", "CMP_LE", "CMP_LT", "CMP_NEQ"}
_PW_LOGIC = {"LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"}
_LOGIC_TYPES = (BOOL,) + INTS + FLOATS
_ALL_TYPES = FLOATS + INTS + ("INT64", BOOL) + F8
# float32 in -> float32 out, default parameters: computed straight into the output
_FAST_F32 = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
             "MAX_OP": np.maximum, "MIN_OP": np.minimum}


class PointwiseBuilder(NodeBuilder):
    OP = catalog.by_table("PointwiseAttributes")
    # the modes' float parameters (relu clips and slope, swish / softplus beta, elu alpha)
    MODE_PARAMS = tuple(a.field for a in OP.params if a.kind == "float")

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
            roles = cls.INPUTS[:info.arity] + cls.OUTPUTS
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
        roles = self.INPUTS[:info.arity]
        _need(all(r in ts for r in roles), f"pointwise {mode} needs {info.arity} inputs")
        out = ts[self.OUTPUTS[0]]
        try:
            shape = np.broadcast_shapes(*[_dims(ts[r]) for r in roles], _dims(out))
        except ValueError:
            raise Unsupported("pointwise inputs do not broadcast to the output") from None
        _need(tuple(shape) == _dims(out), "pointwise output shape is not the broadcast shape")
        if mode == "GEN_INDEX":
            ax = node.attrs.get("axis_tensor_uid")
            _need(ax is not None and -len(out.dims) <= int(ax) < len(out.dims), "GEN_INDEX axis")
        dtypes = [(r, dtype_name(ts[r].dtype)) for r in roles + self.OUTPUTS]
        return self.key(node, graph, ts, dtypes)._replace(op=f"{self.KIND}:{mode}")

    def build(self, node, graph):
        a = node.attrs
        mode = FB_NAMES["PointwiseMode"][a["operation"]]
        info = self.info(mode)
        ts = self.tensors(node, graph)
        ins = [ts[r] for r in self.INPUTS[:info.arity]]
        out = ts[self.OUTPUTS[0]]
        types = [dtype_name(t.dtype) for t in ins]
        otype = dtype_name(out.dtype)
        params = {k: a.get(k) for k in self.MODE_PARAMS if a.get(k) is not None}
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


BUILDERS = [PointwiseBuilder]
