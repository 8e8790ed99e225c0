"""deserialize() rebuilds op parameters through the op descriptors' getters (spec §2.9), so a
deserialized graph re-lowers (``relower()``) and re-serializes to the same graph."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fe_util import close, conv2d_ref, rand, rng
from hipdnn_cabi import frontend as hf

F32 = hf.DataType.HIPDNN_DATA_FLOAT
PW = hf.PointwiseMode
RED = hf.ReduceTensorOp


def new_graph(handle, name):
    return hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32,
                    name=name)


def conv_fprop(g):
    x, w = g.tensor(name="x", dim=[1, 2, 7, 7]), g.tensor(name="w", dim=[3, 2, 3, 3])
    g.conv_fprop(x, w, pre_padding=[1, 2], post_padding=[0, 1], stride=[2, 1], dilation=[1, 2],
                 convolution_mode=hf.ConvolutionMode.HIPDNN_CONVOLUTION, name="cf").set_output(True)


def conv_dgrad(g):
    dy, w = g.tensor(name="dy", dim=[1, 3, 4, 4]), g.tensor(name="w", dim=[3, 2, 3, 3])
    g.conv_dgrad(dy, w, padding=1, stride=2, name="cd").set_output(True)


def conv_wgrad(g):
    x, dy = g.tensor(name="x", dim=[1, 2, 6, 6]), g.tensor(name="dy", dim=[1, 3, 3, 3])
    g.conv_wgrad(x, dy, padding=[1, 1], stride=[2, 2], dilation=[1, 1], name="cw").set_output(True)


def batchnorm(g):
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    sc, b = g.tensor(name="scale", dim=[1, 3, 1, 1]), g.tensor(name="bias", dim=[1, 3, 1, 1])
    rm, rv = g.tensor(name="rm", dim=[1, 3, 1, 1]), g.tensor(name="rv", dim=[1, 3, 1, 1])
    peer = g.tensor(name="peer", dim=[1, 3, 1, 1])
    outs = g.batchnorm(x, sc, b, 1e-3, in_running_mean=rm, in_running_var=rv, momentum=0.25,
                       peer_stats=[peer], name="bn")
    for t in outs:
        t.set_output(True)


def batchnorm_inference(g):
    ts = [g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("mean", "iv", "scale", "bias")]
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    g.batchnorm_inference(x, *ts, name="bni").set_output(True)


def batchnorm_inference_variance(g):
    ts = [g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("mean", "var", "scale", "bias")]
    x = g.tensor(name="x", dim=[2, 3, 4, 4])
    g.batchnorm_inference_variance(x, *ts, 1e-3, name="bniv").set_output(True)


def batchnorm_backward(g):
    x, dy = g.tensor(name="x", dim=[2, 3, 4, 4]), g.tensor(name="dy", dim=[2, 3, 4, 4])
    sc, m, iv = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("scale", "mean", "iv"))
    for t in g.batchnorm_backward(dy, x, sc, m, iv, name="bnb"):
        t.set_output(True)


def matmul(g):
    a, b = g.tensor(name="a", dim=[2, 4, 5]), g.tensor(name="b", dim=[1, 5, 3])
    g.matmul(a, b, name="mm").set_output(True)


def pointwise(g):
    x, y = g.tensor(name="x", dim=[2, 8]), g.tensor(name="y", dim=[1, 8])
    t = g.relu(x, negative_slope=0.1, lower_clip=-0.5, upper_clip=2.0, name="r")
    t = g.add(t, y, name="add")
    t = g.swish(t, 1.5, name="sw")
    t = g.elu(t, 0.7, name="elu")
    t = g.softplus(t, 2.0, name="sp")
    t = g.pointwise(t, 3.0, mode="MUL", name="mulc")
    g.gen_index(t, 1, name="gi").set_output(True).set_data_type(hf.DataType.HIPDNN_DATA_INT32)


def reduction(g):
    x = g.tensor(name="x", dim=[2, 3, 4])
    g.reduction(x, RED.HIPDNN_REDUCE_TENSOR_MAX, is_deterministic=True, name="red") \
        .set_output(True).set_dim([2, 1, 4])


def layernorm(g):
    x = g.tensor(name="x", dim=[2, 3, 4])
    sc, b = g.tensor(name="scale", dim=[1, 1, 4]), g.tensor(name="bias", dim=[1, 1, 4])
    y, m, iv = g.layernorm(x, sc, b, 1e-5, normalized_dim_count=1, name="ln")
    for t in (y, m, iv):
        t.set_output(True)


def layernorm_inference(g):
    x = g.tensor(name="x", dim=[2, 3, 4])
    sc, b = g.tensor(name="scale", dim=[1, 3, 4]), g.tensor(name="bias", dim=[1, 3, 4])
    g.layernorm(x, sc, b, 2e-5, norm_forward_phase=hf.NormFwdPhase.INFERENCE, name="lni")[0] \
        .set_output(True)


def rmsnorm(g):
    x = g.tensor(name="x", dim=[2, 3, 4])
    sc, b = g.tensor(name="scale", dim=[1, 1, 4]), g.tensor(name="bias", dim=[1, 1, 4])
    y, r = g.rmsnorm(x, sc, 1e-6, bias=b, name="rms")
    y.set_output(True)
    r.set_output(True)


def runtime_scalar(g):
    x = g.tensor(name="x", dim=[4])
    s = g.tensor(0.5, hf.ScalarType.RUNTIME_PARAM, name="s")
    u = g.scalar(None, hf.ScalarType.RUNTIME_PARAM, name="u", data_type=F32)
    g.add(g.mul(x, s, name="m"), u, name="a").set_output(True)


FAMILIES = [conv_fprop, conv_dgrad, conv_wgrad, batchnorm, batchnorm_inference,
            batchnorm_inference_variance, batchnorm_backward,
            matmul, pointwise, reduction, layernorm, layernorm_inference, rmsnorm, runtime_scalar]


def node_params(g):
    """(kind, name, attrs, compute type, array roles) per node, attrs normalised for comparison."""
    out = []
    for n in g._order or g._nodes:
        attrs = {}
        for k, v in n.attrs.items():
            if v is None or k == "padding":
                continue
            if isinstance(v, float):
                v = float(np.float32(v))          # FLOAT attributes: float32 on the wire
            elif not isinstance(v, bool) and hasattr(v, "__index__"):
                v = int(v)
            attrs[k] = v
        out.append((n.kind, n.name, attrs, n.compute_data_type,
                    {r: [t.uid for t in ts] for r, ts in n.arrays.items()}))
    return out


def sem(js: str) -> dict:
    """The JSON graph without its per-graph uuid (``id``, cache_ignore in the schema)."""
    doc = json.loads(js)
    doc.pop("id", None)
    return doc


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_round_trip_rebuilds_parameters(handle, family):
    g = new_graph(handle, family.__name__)
    family(g)
    blob = g.serialize()
    doc1 = sem(g.serialize_json())

    g2 = hf.Graph(handle=handle).deserialize(blob)
    p1 = {n[1]: n for n in node_params(g)}
    p2 = {n[1]: n for n in node_params(g2)}
    assert p1.keys() == p2.keys()
    for name, (kind, _, a1, comp1, arr1) in p1.items():
        kind2, _, a2, comp2, arr2 = p2[name]
        assert kind2 == kind and comp2 == comp1 and arr2 == arr1, name
        if kind.startswith("conv_"):
            n1 = next(n for n in g._order if n.name == name)
            nsp = len((n1.inputs.get("x") or n1.inputs.get("dy")).dim) - 2
            from hipdnn_cabi.frontend._infer import conv_params
            pre, post, st, dil = conv_params(n1, nsp)
            assert (a2["pre_padding"], a2["post_padding"], a2["stride"], a2["dilation"]) == \
                (pre, post, st, dil)
            assert a2["conv_mode"] == a1["conv_mode"]
        else:
            assert a2 == a1, name
    # scalars (epsilon, momentum, constants, runtime parameters) come back with their states
    for t in g.get_tensors():
        t2 = g2.get_tensor_by_uid(t.uid)
        assert t2 is not None and t2.get_name() == t.get_name()
        assert (t2.get_dim(), t2.get_stride(), t2.get_data_type(), t2.get_is_virtual()) == \
            (t.get_dim(), t.get_stride(), t.get_data_type(), t.get_is_virtual())
        f32 = lambda v: None if v is None else float(np.float32(v))  # noqa: E731
        assert (f32(t2.get_compile_time_constant()), f32(t2.get_pass_by_value()),
                t2.get_is_pass_by_value()) == \
            (f32(t.get_compile_time_constant()), f32(t.get_pass_by_value()), t.get_is_pass_by_value()), t.name

    # re-lower from the Python nodes: the backend graph is the same graph
    g2.relower(handle)
    assert not g2._from_bytes
    assert sem(g2.serialize_json()) == doc1
    g3 = hf.Graph(handle=handle).deserialize(g2.serialize())
    assert sem(g3.serialize_json()) == doc1


@pytest.mark.needs_cpu_engine
def test_relowered_graph_builds_and_executes(handle):
    g = new_graph(handle, "conv_relu")
    x, w = g.tensor(name="x", dim=[1, 2, 7, 7]), g.tensor(name="w", dim=[3, 2, 3, 3])
    y = g.relu(g.conv_fprop(x, w, padding=1, stride=2, name="c"), upper_clip=0.5, name="r")
    y.set_output(True).set_name("y")
    g.build()
    r = rng(5)
    xa, wa = rand(r, (1, 2, 7, 7)), rand(r, (3, 2, 3, 3))
    ref = np.clip(conv2d_ref(xa, wa, (1, 1), (2, 2)), 0, 0.5)
    g2 = hf.Graph.from_bytes(g.serialize(), handle=handle)
    g2.relower()
    g2.build()
    ya = np.empty((1, 3, 4, 4), np.float32)
    g2.execute({"x": xa, "w": wa, "y": ya})
    close(ya, ref)
