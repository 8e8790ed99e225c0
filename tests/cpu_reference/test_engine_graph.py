"""CPU reference engine: multi-node graphs, virtual tensors, by-value / runtime scalars,
not-applicable signatures, engine details, the host-memory check, and end to end through the
backend C API (a C program: descriptors -> heuristics -> plan -> execute)."""
from __future__ import annotations

import math
import os
import subprocess

import numpy as np
import pytest

from engine_testutil import (FB, PLUGIN_DIR, ROOT, CabiBatch, Tensor, applicable, conv_attrs,
                             graph_bytes, node, pw, quantize, run_inprocess)

HERE = os.path.dirname(os.path.abspath(__file__))


def _close(a, r, tol):
    np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(1e-3, float(np.max(np.abs(r)))))


# --------------------------------------------------------------------------- multi-node graphs
def conv_bias_relu(rng, t, lay):
    x, w = Tensor(1, [2, 3, 6, 6], t, lay), Tensor(2, [4, 3, 3, 3], t, lay)
    y = Tensor(3, [2, 4, 3, 3], "FLOAT", lay, virtual=True)
    b = Tensor(4, [1, 4, 1, 1], "FLOAT")
    z = Tensor(5, [2, 4, 3, 3], "FLOAT", virtual=True)
    r = Tensor(6, [2, 4, 3, 3], t, lay).alloc()
    xv, wv, bv = x.set(rng.standard_normal(x.dims)), w.set(rng.standard_normal(w.dims)), b.set(rng.standard_normal(b.dims))
    k = "ConvolutionFwdAttributes"
    # nodes listed out of order: the engine sorts them topologically
    g = graph_bytes([x, w, y, b, z, r], [pw("RELU_FWD", 5, 6), pw("ADD", 3, 5, in1=4),
                                         node(k, conv_attrs(k, 1, 2, 3, [1, 0], [0, 1], [2, 2], [1, 1]))])
    xp = np.pad(xv, ((0, 0), (0, 0), (1, 0), (0, 1)))
    ref = np.zeros((2, 4, 3, 3))
    for i in range(3):
        for j in range(3):
            ref[:, :, i, j] = np.einsum("nchw,kchw->nk", xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3], wv)
    ref = quantize(np.maximum(quantize(quantize(ref, "FLOAT") + bv, "FLOAT"), 0), t)
    return [x, w, y, b, z, r], g, r, ref


def bn_relu(rng, t, lay):
    xs, cs = [2, 3, 4, 4], [1, 3, 1, 1]
    x = Tensor(1, xs, t, lay)
    m, iv, s, b = (Tensor(u, cs, "FLOAT") for u in (2, 3, 4, 5))
    y = Tensor(6, xs, "FLOAT", lay, virtual=True)
    o = Tensor(7, xs, t, lay).alloc()
    xv = x.set(rng.standard_normal(xs))
    mv, ivv, sv, bv = (a.set(rng.uniform(0.5, 1.5, cs)) for a in (m, iv, s, b))
    g = graph_bytes([x, m, iv, s, b, y, o], [node("BatchnormInferenceAttributes", {
        "x_tensor_uid": 1, "mean_tensor_uid": 2, "inv_variance_tensor_uid": 3, "scale_tensor_uid": 4,
        "bias_tensor_uid": 5, "y_tensor_uid": 6}), pw("RELU_FWD", 6, 7)])
    return [x, m, iv, s, b, y, o], g, o, quantize(np.maximum((xv - mv) * ivv * sv + bv, 0), t)


def matmul_add_gelu(rng, t, lay):
    a, b = Tensor(1, [2, 3, 8], t), Tensor(2, [1, 8, 5], t)
    c = Tensor(3, [2, 3, 5], "FLOAT", virtual=True)
    bias = Tensor(4, [1, 1, 5], t)
    d = Tensor(5, [2, 3, 5], "FLOAT", virtual=True)
    o = Tensor(6, [2, 3, 5], t).alloc()
    av, bv, biv = a.set(rng.standard_normal(a.dims)), b.set(rng.standard_normal(b.dims)), bias.set(rng.standard_normal(bias.dims))
    g = graph_bytes([a, b, c, bias, d, o], [
        node("MatmulAttributes", {"a_tensor_uid": 1, "b_tensor_uid": 2, "c_tensor_uid": 3}),
        pw("ADD", 3, 5, in1=4), pw("GELU_FWD", 5, 6)])
    h = np.einsum("bmk,kn->bmn", av, bv[0]) + biv
    erf = np.vectorize(math.erf)
    return [a, b, c, bias, d, o], g, o, quantize(0.5 * h * (1 + erf(h / math.sqrt(2))), t)


GRAPHS = {"conv_bias_relu": conv_bias_relu, "bn_relu": bn_relu, "matmul_add_gelu": matmul_add_gelu}
TOLS = {"FLOAT": 2e-5, "DOUBLE": 2e-5, "HALF": 3e-3, "BFLOAT16": 2e-2}


@pytest.fixture(scope="module")
def graph_batch(tmp_path_factory):
    batch = CabiBatch(tmp_path_factory.mktemp("cpuref_graphs"))
    cases = {}
    for gname, make in GRAPHS.items():
        for t in ("FLOAT", "HALF", "BFLOAT16", "DOUBLE"):
            for lay in ("nchw", "nhwc"):
                ts, g, out, ref = make(np.random.default_rng(7), t, lay)
                cases[(gname, t, lay)] = (batch.add(g, ts), out, ref)
    res = batch.run()
    return {k: (res[i], out, ref) for k, (i, out, ref) in cases.items()}


@pytest.mark.parametrize("gname", sorted(GRAPHS))
@pytest.mark.parametrize("t", ["FLOAT", "HALF", "BFLOAT16", "DOUBLE"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
def test_multi_node(graph_batch, gname, t, lay):
    res, out, ref = graph_batch[(gname, t, lay)]
    assert res["execute_status"] == 0, res
    _close(out.get(), ref, TOLS[t])


def test_virtual_tensors_need_no_buffer_and_are_not_written():
    rng = np.random.default_rng(1)
    ts, g, out, ref = conv_bias_relu(rng, "FLOAT", "nhwc")
    assert all(t.buf is None for t in ts if t.virtual)
    run_inprocess(g, ts)   # the virtual uids 3 and 5 are not bound
    _close(out.get(), ref, 2e-5)


def test_missing_buffer_is_named_as_host_memory():
    """A variant pack without one of the graph's tensors: the CPU engine names the uid and the
    host memory it works on, never a "device buffer"."""
    from hipdnn_cabi.plugin_sdk import PluginError
    rng = np.random.default_rng(1)
    ts, g, out, ref = conv_bias_relu(rng, "FLOAT", "nhwc")
    gone = next(t for t in ts if t.buf is not None and t is not out)
    keep = [t for t in ts if t is not gone]
    with pytest.raises(PluginError) as e:
        run_inprocess(g, keep)
    msg = str(e.value)
    assert f"tensor uid {gone.uid}" in msg and "host memory" in msg, msg
    assert "device buffer" not in msg, msg


# --------------------------------------------------------------------------- scalars
def _bn_infvar(eps_tensor):
    xs, cs = [2, 3, 2, 2], [1, 3, 1, 1]
    x, y = Tensor(1, xs), Tensor(6, xs).alloc()
    m, v, s, b = (Tensor(u, cs) for u in (2, 3, 4, 5))
    rng = np.random.default_rng(3)
    xv = x.set(rng.standard_normal(xs))
    mv, vv, sv, bv = m.set(rng.standard_normal(cs)), v.set(rng.uniform(0.5, 2, cs)), s.set(rng.standard_normal(cs)), b.set(rng.standard_normal(cs))
    ts = [x, m, v, s, b, y, eps_tensor]
    g = graph_bytes(ts, [node("BatchnormInferenceAttributesVarianceExt", {
        "x_tensor_uid": 1, "mean_tensor_uid": 2, "variance_tensor_uid": 3, "scale_tensor_uid": 4,
        "bias_tensor_uid": 5, "y_tensor_uid": 6, "epsilon_tensor_uid": 7})])
    return ts, g, y, lambda e: (xv - mv) / np.sqrt(vv + e) * sv + bv


def test_runtime_pass_by_value_scalar_read_at_execute(tmp_path):
    """RFC 0016 provider contract: a user-supplied runtime scalar (no default) is read from its host
    pointer; unbound → INVALID_VALUE; a runtime-with-default keeps its baked value (override inert,
    the RFC 0016 §9 matrix)."""
    eps = Tensor(7, [1], "FLOAT", runtime=True)                # user-supplied, no default
    ts, g, y, ref = _bn_infvar(eps)
    eps.set([0.25])                                            # the value bound at execute
    eps2 = Tensor(7, [1], "FLOAT", runtime=True)
    ts2, g2, _, _ = _bn_infvar(eps2)                            # uid 7 left unbound
    eps3 = Tensor(7, [1], "FLOAT", value=0.5, runtime=True)    # runtime with default 0.5
    ts3, g3, y3, ref3 = _bn_infvar(eps3)
    eps3.set([0.25])                                           # an override: inert
    batch = CabiBatch(tmp_path)
    batch.add(g, ts)
    batch.add(g2, ts2)
    batch.add(g3, ts3)
    ok, missing, inert = batch.run()
    assert inert["execute_status"] == 0, inert
    _close(y3.get(), ref3(0.5), 2e-6)
    assert ok["api_version"] == "1.3.0"
    assert ok["execute_status"] == 0, ok
    _close(y.get(), ref(0.25), 2e-6)
    from hipdnn_cabi.schemas._generated.EngineDetails import EngineDetails
    d = EngineDetails.GetRootAs(bytes.fromhex(ok["details"]), 0)
    assert d.Name() == b"HIPDNN_CABI_CPU_REFERENCE_ENGINE" and d.EngineId() == ok["engine_id"]
    notes = [d.BehaviorNotes(i) for i in range(d.BehaviorNotesLength())]
    assert 3 in notes and not {0, 1, 2} & set(notes)   # EXTERNAL_LIBRARY_DEPENDENCY (numpy/BLAS)
    assert ok["workspace"] == 0
    assert missing["execute_status"] == 2   # HIPDNN_PLUGIN_STATUS_INVALID_VALUE
    assert "uid 7" in missing["execute_error"] and "runtime" in missing["execute_error"]


def test_by_value_scalar_baked_from_graph():
    eps = Tensor(7, [1], "FLOAT", value=0.5)
    ts, g, y, ref = _bn_infvar(eps)
    run_inprocess(g, ts)
    _close(y.get(), ref(0.5), 2e-6)


def test_epsilon_as_device_tensor():
    eps = Tensor(7, [1, 1, 1, 1], "DOUBLE")
    ts, g, y, ref = _bn_infvar(eps)
    eps.set([0.125])
    run_inprocess(g, ts)
    _close(y.get(), ref(0.125), 2e-6)


# --------------------------------------------------------------------------- not applicable
def _pw_graph(tin="FLOAT", tout="FLOAT", out_strides=None, mode="ADD", dims=(2, 3)):
    a, b = Tensor(1, dims, tin), Tensor(2, dims, tin)
    o = Tensor(3, dims, tout, strides=out_strides)
    return graph_bytes([a, b, o], [pw(mode, 1, 3, in1=2)])


def test_not_applicable_signatures():
    assert applicable(_pw_graph())
    assert not applicable(_pw_graph("FP4_E2M1", "FLOAT"))            # unsupported type
    assert not applicable(_pw_graph("FLOAT", "FP8_E5M2"))
    assert not applicable(_pw_graph(out_strides=[0, 1]))              # aliased output
    assert not applicable(_pw_graph("INT8", "INT8", mode="DIV"))     # no integer DIV builder
    assert not applicable(graph_bytes([Tensor(1, [2, 3]), Tensor(2, [4, 3]), Tensor(3, [2, 3])],
                                      [pw("ADD", 1, 3, in1=2)]))       # not broadcastable
    # batchnorm with peer statistics, and a convolution whose output shape is wrong
    x, s, b, e, y = Tensor(1, [2, 3, 2, 2]), Tensor(2, [1, 3, 1, 1]), Tensor(3, [1, 3, 1, 1]), \
        Tensor(4, [1], value=1e-5), Tensor(5, [2, 3, 2, 2])
    assert not applicable(graph_bytes([x, s, b, e, y], [node("BatchnormAttributes", {
        "x_tensor_uid": 1, "scale_tensor_uid": 2, "bias_tensor_uid": 3, "epsilon_tensor_uid": 4,
        "y_tensor_uid": 5, "peer_stats_tensor_uid": [2]})]))
    k = "ConvolutionFwdAttributes"
    assert not applicable(graph_bytes([Tensor(1, [1, 3, 5, 5]), Tensor(2, [4, 3, 3, 3]), Tensor(3, [1, 4, 5, 5])],
                                      [node(k, conv_attrs(k, 1, 2, 3, [0, 0], [0, 0], [1, 1], [1, 1]))]))
    # INT8 convolution: INT32 compute only (FLOAT compute and 16-bit outputs decline)
    i8 = [Tensor(1, [1, 3, 5, 5], "INT8"), Tensor(2, [4, 3, 3, 3], "INT8"), Tensor(3, [1, 4, 3, 3], "INT32")]
    assert applicable(graph_bytes(i8, [node(k, conv_attrs(k, 1, 2, 3, [0, 0], [0, 0], [1, 1], [1, 1]), "INT32")]))
    assert not applicable(graph_bytes(i8, [node(k, conv_attrs(k, 1, 2, 3, [0, 0], [0, 0], [1, 1], [1, 1]))]))
    i8[2] = Tensor(3, [1, 4, 3, 3], "HALF")
    assert not applicable(graph_bytes(i8, [node(k, conv_attrs(k, 1, 2, 3, [0, 0], [0, 0], [1, 1], [1, 1]), "INT32")]))
    # a virtual tensor that nothing produces
    assert not applicable(graph_bytes([Tensor(1, [2, 3], virtual=True), Tensor(2, [2, 3]), Tensor(3, [2, 3])],
                                      [pw("ADD", 1, 3, in1=2)]))


def test_registry_keys():
    from engine_plugins.cpu_reference.engine import REGISTRY
    from engine_plugins.cpu_reference.signature import SignatureKey
    assert SignatureKey("ConvolutionFwdAttributes", (("x", "HALF"), ("w", "HALF"), ("y", "HALF")),
                        "FLOAT") in REGISTRY
    assert SignatureKey("ConvolutionFwdAttributes", (("x", "HALF"), ("w", "HALF"), ("y", "HALF")),
                        "FLOAT", "aliased") not in REGISTRY
    ops = {k.op.split(":")[0] for k in REGISTRY.keys()}
    # every NodeAttributes member runs here except CUSTOM_OP (not applicable by design)
    from engine_testutil import UNION
    members = set(UNION) - {"CustomOpAttributes"}
    assert ops >= members, sorted(members - ops)
    assert "CustomOpAttributes" not in ops
    modes = {k.op.split(":")[1] for k in REGISTRY.keys() if k.op.startswith("PointwiseAttributes")}
    assert len(modes) == 47


# --------------------------------------------------------------------------- host memory
def test_device_pointer_rejected_with_uid():
    import sys
    from engine_testutil import plugin
    from hipdnn_cabi.plugin_sdk import PluginError
    hostmem = sys.modules[type(plugin()).__module__].hostmem   # the loaded plugin's own module
    a, b, o = Tensor(1, [4]), Tensor(2, [4]), Tensor(3, [4]).alloc()
    a.set([1, 2, 3, 4])
    b.set([1, 1, 1, 1])
    g = graph_bytes([a, b, o], [pw("ADD", 1, 3, in1=2)])
    dev = b.buf.ctypes.data
    hostmem.set_classifier(lambda p: "device" if p == dev else "host")
    try:
        with pytest.raises(PluginError) as e:
            run_inprocess(g, [a, b, o])
        assert e.value.status == 2 and "uid 2" in str(e.value)
        assert np.isnan(o.get()).all()          # nothing was touched
    finally:
        hostmem.set_classifier(None)
    run_inprocess(g, [a, b, o])
    np.testing.assert_array_equal(o.get(), [2, 3, 4, 5])


# --------------------------------------------------------------------------- end to end (C API)
def test_c_api_end_to_end(c_build):
    exe = c_build(os.path.join(HERE, "e2e_conv_bias_relu.c"), extra=["-lm"])
    r = subprocess.run([exe, PLUGIN_DIR], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "OK HIPDNN_CABI_CPU_REFERENCE_ENGINE"


# ------------------------------------------------------------------ ReLU fast path
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("big", [False, True])
def test_relu_default_clips_special_values(lay, big):
    """ReLU with no clip attributes (the engine's float32 fast path for large tensors, plain
    ufuncs for small ones): x <= 0 -> +0.0 (also -0.0 and -inf), NaN propagates, +inf -> the
    float32 max (hipDNN's default upper clip), everything else unchanged."""
    dims = (4, 64, 48, 48) if big else (2, 3, 4, 5)
    a, o = Tensor(1, dims, "FLOAT", lay), Tensor(2, dims, "FLOAT", lay)
    rng = np.random.default_rng(3)
    vals = rng.standard_normal(dims)
    flat = vals.reshape(-1)
    flat[:6] = [-0.0, np.nan, np.inf, -np.inf, -2.5, 7.0]
    a.set(vals)
    o.alloc()
    run_inprocess(graph_bytes([a, o], [pw("RELU_FWD", 1, 2)]), [a, o])
    got = o.get().reshape(-1)
    f32max = float(np.finfo(np.float32).max)
    ref = np.where(np.isnan(flat), np.nan, np.minimum(np.maximum(flat, 0.0), f32max))
    ref = ref.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(got, ref)
    assert not np.signbit(got[0]) and np.isnan(got[1]) and got[2] == f32max and got[3] == 0.0
    assert not np.signbit(got[np.where(flat < 0)]).any()


def test_relu_f32_into_shared_zeros_stay_zero():
    from engine_plugins.cpu_reference.kernels import blocked, pointwise as kpw
    x = np.full((3, 1 << 19), -1.0, np.float32)
    x[0, 0] = np.inf
    out = np.empty_like(x)
    kpw.relu_f32_into(out, x)
    assert out[0, 0] == np.finfo(np.float32).max and (out.reshape(-1)[1:] == 0).all()
    kpw.relu_f32_into(x, x)                       # in place
    np.testing.assert_array_equal(x, out)
    z = blocked.zeros_f32((x.size,))
    assert not z.flags.writeable and not z.any()
    with pytest.raises(ValueError):
        z[0] = 1
