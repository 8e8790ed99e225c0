"""Graph builders and helpers for the HIP engine tests (no GPU needed to build graphs)."""
from __future__ import annotations

import math

import numpy as np

from hipdnn_cabi.backend import graph_fb
from hipdnn_cabi.schemas._generated.schema_table import ENUMS, UNIONS

FB = {e: {n: v for n, v in ENUMS[e][1]} for e in ("DataType", "PointwiseMode", "ConvMode", "ReductionMode")}
UNION = {m[2]: i for i, m in UNIONS["NodeAttributes"].items() if i}
TV = {"FLOAT": 1, "HALF": 2, "BFLOAT16": 3, "INT32": 5, "DOUBLE": 6, "INT64": 7}
NP = {"FLOAT": np.float32, "HALF": np.float16, "BFLOAT16": np.uint16, "INT32": np.int32,
      "INT64": np.int64, "DOUBLE": np.float64, "FP8_E4M3": np.uint8, "FP8_E5M2": np.uint8,
      "INT8": np.int8}
TOL = {"FLOAT": 2e-5, "HALF": 4e-3, "BFLOAT16": 3e-2}


def strides_for(dims, lay="nchw"):
    nd = len(dims)
    order = [0] + list(range(2, nd)) + [1] if (lay == "nhwc" and nd >= 3) else list(range(nd))
    st = [0] * nd
    s = 1
    for ax in reversed(order):
        st[ax] = s
        s *= max(int(dims[ax]), 1)
    return st


class T:
    def __init__(self, uid, dims, dtype="FLOAT", lay="nchw", virtual=False, value=None, strides=None,
                 runtime=False):
        self.uid, self.dims, self.dtype, self.lay = uid, list(dims), dtype, lay
        self.virtual, self.value, self.runtime = virtual, value, runtime
        self.strides = list(strides) if strides is not None else strides_for(dims, lay)

    def fb(self):
        d = {"uid": self.uid, "name": f"t{self.uid}", "data_type": FB["DataType"][self.dtype],
             "dims": self.dims, "strides": self.strides}
        if self.virtual:
            d["virtual"] = True
        if self.value is not None:
            d["value"] = (TV[self.dtype], {"value": self.value})
        if self.runtime:
            d["is_runtime_pass_by_value"] = True
        return d

    @property
    def span(self):
        return 1 + sum((d - 1) * s for d, s in zip(self.dims, self.strides))


def node(kind, attrs, compute="FLOAT", name="n"):
    return {"name": name, "compute_data_type": FB["DataType"][compute], "attributes": (UNION[kind], attrs)}


def pw(mode, in0, out, in1=None, in2=None, **params):
    a = {"operation": FB["PointwiseMode"][mode], "in_0_tensor_uid": in0, "out_0_tensor_uid": out}
    if in1 is not None:
        a["in_1_tensor_uid"] = in1
    if in2 is not None:
        a["in_2_tensor_uid"] = in2
    a.update(params)
    return node("PointwiseAttributes", a, name=f"pw_{mode}")


def matmul(a, b, c):
    return node("MatmulAttributes", {"a_tensor_uid": a, "b_tensor_uid": b, "c_tensor_uid": c}, name="mm")


def _conv_attrs(pad, stride, dil, mode, post=None):
    """pad: the pre padding (and the post padding unless ``post`` gives it)."""
    return {"pre_padding": list(pad), "post_padding": list(pad if post is None else post),
            "stride": list(stride), "dilation": list(dil), "conv_mode": FB["ConvMode"][mode]}


def conv_fwd(x, w, y, pad, stride, dil, mode="CROSS_CORRELATION", post=None, name="conv"):
    a = {"x_tensor_uid": x, "w_tensor_uid": w, "y_tensor_uid": y}
    a.update(_conv_attrs(pad, stride, dil, mode, post))
    return node("ConvolutionFwdAttributes", a, name=name)


def conv_bwd_data(dy, w, dx, pad, stride, dil, mode="CROSS_CORRELATION", post=None, name="conv_bwd_data"):
    a = {"dy_tensor_uid": dy, "w_tensor_uid": w, "dx_tensor_uid": dx}
    a.update(_conv_attrs(pad, stride, dil, mode, post))
    return node("ConvolutionBwdAttributes", a, name=name)


def conv_bwd_filter(x, dy, dw, pad, stride, dil, mode="CROSS_CORRELATION"):
    a = {"x_tensor_uid": x, "dy_tensor_uid": dy, "dw_tensor_uid": dw}
    a.update(_conv_attrs(pad, stride, dil, mode))
    return node("ConvolutionWrwAttributes", a, name="conv_bwd_filter")


def bn_bwd(dy, x, mean, inv, scale, dx, dscale, dbias):
    return node("BatchnormBackwardAttributes", {
        "dy_tensor_uid": dy, "x_tensor_uid": x, "mean_tensor_uid": mean,
        "inv_variance_tensor_uid": inv, "scale_tensor_uid": scale, "dx_tensor_uid": dx,
        "dscale_tensor_uid": dscale, "dbias_tensor_uid": dbias}, name="bn_bwd")


def reduction(mode, x, y):
    return node("ReductionAttributes", {"mode": FB["ReductionMode"][mode], "in_tensor_uid": x,
                                        "out_tensor_uid": y}, name=f"red_{mode}")


def bn_train(x, scale, bias, eps, y, mean=None, inv=None, prm=None, prv=None, mom=None, nrm=None, nrv=None):
    a = {"x_tensor_uid": x, "scale_tensor_uid": scale, "bias_tensor_uid": bias,
         "epsilon_tensor_uid": eps, "y_tensor_uid": y}
    for k, v in (("mean", mean), ("inv_variance", inv), ("prev_running_mean", prm),
                 ("prev_running_variance", prv), ("momentum", mom), ("next_running_mean", nrm),
                 ("next_running_variance", nrv)):
        if v is not None:
            a[f"{k}_tensor_uid"] = v
    return node("BatchnormAttributes", a, name="bn")


def bn_inf(x, mean, inv, scale, bias, y):
    return node("BatchnormInferenceAttributes", {
        "x_tensor_uid": x, "mean_tensor_uid": mean, "inv_variance_tensor_uid": inv,
        "scale_tensor_uid": scale, "bias_tensor_uid": bias, "y_tensor_uid": y}, name="bninf")


def bn_inf_var(x, mean, var, scale, bias, eps, y):
    return node("BatchnormInferenceAttributesVarianceExt", {
        "x_tensor_uid": x, "mean_tensor_uid": mean, "variance_tensor_uid": var,
        "scale_tensor_uid": scale, "bias_tensor_uid": bias, "epsilon_tensor_uid": eps,
        "y_tensor_uid": y}, name="bninf_var")


def _graph_bytes(tensors, nodes, io=None, intermediate=None, compute="FLOAT"):
    """A Graph FlatBuffer; ``io`` / ``intermediate`` / ``compute``: graph-level data types (as
    the hipDNN frontend sets them; None leaves a field out)."""
    g = {"name": "hip_test", "tensors": [t.fb() for t in tensors], "nodes": nodes}
    for k, v in (("io_data_type", io), ("intermediate_data_type", intermediate),
                 ("compute_data_type", compute)):
        if v is not None:
            g[k] = FB["DataType"][v]
    return graph_fb.build("Graph", g)


graph_bytes = _graph_bytes


def from_zero(tensors, nodes):
    """The same graph with tensor uids renumbered 0, 1, 2, ... in the tensors' order (the
    hipDNN frontend numbers tensors from 0; uid 0 is a valid uid).  Returns (tensors, nodes)."""
    import copy
    remap = {t.uid: i for i, t in enumerate(tensors)}
    ts = []
    for t in tensors:
        c = copy.copy(t)
        c.uid = remap[t.uid]
        ts.append(c)
    ns = []
    for n in nodes:
        n = copy.deepcopy(n)
        kind, attrs = n["attributes"]
        for k, v in list(attrs.items()):
            if k.endswith("_tensor_uid") and v in remap:
                attrs[k] = remap[v]
        ns.append(n)
    return ts, ns


# ---------------------------------------------------------------- host values <-> storage
def bf16_bits(a):
    f = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    up = ((u & 0xFFFF) > 0x8000) | (((u & 0xFFFF) == 0x8000) & (((u >> 16) & 1) == 1))
    return ((u >> 16) + up.astype(np.uint64)).astype(np.uint16)


def encode(vals, dtype):
    if dtype in ("FP8_E4M3", "FP8_E5M2"):
        return fp8_encode(vals, dtype)
    if dtype == "BFLOAT16":
        return bf16_bits(vals)
    return np.asarray(vals).astype(NP[dtype])


def decode(mem, dtype):
    if dtype in ("FP8_E4M3", "FP8_E5M2"):
        return fp8_decode(mem, dtype)
    if dtype == "BFLOAT16":
        return (np.asarray(mem).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(mem).astype(np.float64)


def to_storage(t: T, logical):
    """Logical values -> flat storage array of t's span (strided placement)."""
    buf = np.zeros(t.span, NP[t.dtype])
    view = np.lib.stride_tricks.as_strided(buf, shape=t.dims, strides=[s * buf.itemsize for s in t.strides])
    view[...] = encode(np.broadcast_to(logical, t.dims), t.dtype)
    return buf


def from_storage(t: T, buf):
    view = np.lib.stride_tricks.as_strided(buf, shape=t.dims, strides=[s * buf.itemsize for s in t.strides])
    return decode(view, t.dtype)


def quantize(vals, dtype):
    return decode(encode(vals, dtype), dtype)


def relerr(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm((out - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-30))


# ---------------------------------------------------------------- sample graphs (CI compile test)
def sample_graphs():
    """(name, graph bytes) covering every kernel family, dtype and layout.  The NHWC graphs and
    the reductions number their tensors from 0 (as the hipDNN frontend does)."""
    out = []

    def graph_bytes(ts, ns, zero=False):
        return _graph_bytes(*from_zero(ts, ns)) if zero else _graph_bytes(ts, ns)
    for dtp in ("FLOAT", "HALF", "BFLOAT16"):
        for lay in ("nchw", "nhwc"):
            x = T(1, [2, 16, 9, 9], dtp, lay)
            b = T(2, [1, 16, 1, 1], dtp, lay)
            v1 = T(3, [2, 16, 9, 9], "FLOAT", lay, virtual=True)
            v2 = T(4, [2, 16, 9, 9], "FLOAT", lay, virtual=True)
            s = T(5, [1, 1, 1, 1], "FLOAT", value=0.5)
            y = T(6, [2, 16, 9, 9], dtp, lay)
            out.append((f"pw_{dtp}_{lay}", graph_bytes([x, b, v1, v2, s, y], [
                pw("ADD", 1, 3, 2), pw("RELU_FWD", 3, 4), pw("MUL", 4, 6, 5)], zero=lay == "nhwc")))
            w = T(11, [32, 16, 3, 3], dtp, lay)
            cy = T(12, [2, 32, 9, 9], dtp, lay)
            out.append((f"conv_{dtp}_{lay}", graph_bytes([x, w, cy], [conv_fwd(1, 11, 12, [1, 1], [1, 1], [1, 1])], zero=lay == "nhwc")))
            cv = T(13, [2, 32, 9, 9], "FLOAT", lay, virtual=True)
            bb = T(14, [1, 32, 1, 1], dtp, lay)
            bv = T(15, [2, 32, 9, 9], "FLOAT", lay, virtual=True)
            out.append((f"conv_bias_relu_{dtp}_{lay}", graph_bytes([x, w, cv, bb, bv, cy], [
                conv_fwd(1, 11, 13, [1, 1], [1, 1], [1, 1]), pw("ADD", 13, 15, 14), pw("RELU_FWD", 15, 12)], zero=lay == "nhwc")))
            sc = T(21, [1, 16, 1, 1], "FLOAT")
            bi = T(22, [1, 16, 1, 1], "FLOAT")
            eps = T(23, [1, 1, 1, 1], "FLOAT", value=1e-5)
            mom = T(24, [1, 1, 1, 1], "FLOAT", value=0.1)
            mu = T(25, [1, 16, 1, 1], "FLOAT")
            iv = T(26, [1, 16, 1, 1], "FLOAT")
            prm = T(27, [1, 16, 1, 1], "FLOAT")
            prv = T(28, [1, 16, 1, 1], "FLOAT")
            nrm = T(29, [1, 16, 1, 1], "FLOAT")
            nrv = T(30, [1, 16, 1, 1], "FLOAT")
            out.append((f"bn_train_{dtp}_{lay}", graph_bytes(
                [x, sc, bi, eps, mom, mu, iv, prm, prv, nrm, nrv, y],
                [bn_train(1, 21, 22, 23, 6, 25, 26, 27, 28, 24, 29, 30)], zero=lay == "nhwc")))
            out.append((f"bn_inf_{dtp}_{lay}", graph_bytes([x, mu, iv, sc, bi, y], [bn_inf(1, 25, 26, 21, 22, 6)], zero=lay == "nhwc")))
            var = T(31, [1, 16, 1, 1], "FLOAT")
            out.append((f"bn_inf_var_{dtp}_{lay}", graph_bytes([x, mu, var, sc, bi, eps, y],
                                                               [bn_inf_var(1, 25, 31, 21, 22, 23, 6)],
                                                               zero=lay == "nhwc")))
        for lay in ("nchw", "nhwc"):
            # conv backward data / filter (stride 2: non-integral taps), split-K sized
            x = T(1, [2, 16, 9, 9], dtp, lay)
            w = T(2, [32, 16, 3, 3], dtp, lay)
            dy = T(3, [2, 32, 5, 5], dtp, lay)
            out.append((f"conv_bwd_data_{dtp}_{lay}", graph_bytes([dy, w, x], [conv_bwd_data(3, 2, 1, [1, 1], [2, 2], [1, 1])], zero=lay == "nhwc")))
            out.append((f"conv_bwd_filter_{dtp}_{lay}", graph_bytes([x, dy, w], [conv_bwd_filter(1, 3, 2, [1, 1], [2, 2], [1, 1])], zero=lay == "nhwc")))
            xs = T(1, [2, 64, 7, 7], dtp, lay)
            ws = T(2, [64, 64, 3, 3], dtp, lay)
            ys = T(3, [2, 64, 7, 7], dtp, lay)
            out.append((f"conv_splitk_{dtp}_{lay}", graph_bytes([xs, ws, ys], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1])], zero=lay == "nhwc")))
            cd = [1, 16, 1, 1]
            out.append((f"bn_bwd_{dtp}_{lay}", graph_bytes(
                [T(1, [2, 16, 9, 9], dtp, lay), T(2, [2, 16, 9, 9], dtp, lay), T(3, cd), T(4, cd), T(5, cd),
                 T(6, [2, 16, 9, 9], dtp, lay), T(7, cd), T(8, cd)], [bn_bwd(1, 2, 3, 4, 5, 6, 7, 8)], zero=lay == "nhwc")))
        out.append((f"reduce_rows_{dtp}", graph_bytes([T(1, [64, 300], dtp), T(2, [64, 1], dtp)],
                                                       [reduction("NORM2", 1, 2)], zero=True)))
        out.append((f"reduce_all_{dtp}", graph_bytes([T(1, [4, 8, 300, 30], dtp), T(2, [1, 1, 1, 1], dtp)],
                                                      [reduction("MAX_OP", 1, 2)], zero=True)))
        out.append((f"pw_runtime_scalar_{dtp}", graph_bytes(
            [T(1, [8, 40], dtp), T(2, [1, 1], "FLOAT", runtime=True), T(3, [8, 40], dtp)],
            [pw("MUL", 1, 3, 2)], zero=True)))
        for ta, tb in (("nchw", "nchw"), ("nchw", "t")):
            a = T(1, [3, 40, 24], dtp)
            bdims = [3, 24, 56]
            bst = [24 * 56, 56, 1] if tb == "nchw" else [24 * 56, 1, 24]
            b = T(2, bdims, dtp, strides=bst)
            c = T(3, [3, 40, 56], dtp)
            out.append((f"matmul_{dtp}_{tb}", graph_bytes([a, b, c], [matmul(1, 2, 3)], zero=True)))
    return out


def int8_sample_graphs():
    """(name, graph bytes): INT8 x INT8 (INT32 compute) on the integer tensor-core GEMM (NVIDIA
    only: an AMD target declines them) - matmul, convolution in every direction (plain,
    grouped, strided / dilated) with each output type."""
    out = []

    def graph_bytes(ts, ns, zero=False):
        return _graph_bytes(*from_zero(ts, ns)) if zero else _graph_bytes(ts, ns)
    for yt, lay in (("INT32", "nhwc"), ("INT8", "nchw"), ("FLOAT", "nhwc")):
        x, w, y = T(1, [2, 16, 9, 9], "INT8", lay), T(2, [24, 16, 3, 3], "INT8", lay), T(3, [2, 24, 9, 9], yt, lay)
        n = conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1])
        n["compute_data_type"] = FB["DataType"]["INT32"]
        out.append((f"conv_int8_{yt}_{lay}", graph_bytes([x, w, y], [n], zero=lay == "nhwc")))
    x, w, y = T(1, [2, 8, 11, 10], "INT8"), T(2, [12, 4, 3, 2], "INT8"), T(3, [2, 12, 5, 3], "INT32")
    n = conv_fwd(1, 2, 3, [1, 0], [2, 3], [2, 2])
    n["compute_data_type"] = FB["DataType"]["INT32"]
    out.append(("conv_int8_grouped_strided", graph_bytes([x, w, y], [n])))
    for lay in ("nchw", "nhwc"):
        x, w, dy = T(1, [2, 16, 9, 9], "INT8", lay), T(2, [24, 16, 3, 3], "INT8", lay), T(3, [2, 24, 5, 5], "INT8", lay)
        dx, dw = T(1, [2, 16, 9, 9], "INT32", lay), T(2, [24, 16, 3, 3], "FLOAT", lay)
        n = conv_bwd_data(3, 2, 1, [1, 1], [2, 2], [1, 1])
        n["compute_data_type"] = FB["DataType"]["INT32"]
        out.append((f"conv_int8_bwd_data_{lay}", graph_bytes([dy, w, dx], [n], zero=lay == "nhwc")))
        n = conv_bwd_filter(1, 3, 2, [1, 1], [2, 2], [1, 1])
        n["compute_data_type"] = FB["DataType"]["INT32"]
        out.append((f"conv_int8_bwd_filter_{lay}", graph_bytes([x, dy, dw], [n], zero=lay == "nhwc")))
    a, b, c = T(1, [3, 40, 24], "INT8"), T(2, [3, 24, 56], "INT8", strides=[24 * 56, 1, 24]), T(3, [3, 40, 56], "INT32")
    n = matmul(1, 2, 3)
    n["compute_data_type"] = FB["DataType"]["INT32"]
    out.append(("matmul_int8", graph_bytes([a, b, c], [n], zero=True)))
    return out


# ---------------------------------------------------------------- fp8 (OCP e4m3 "FN" / e5m2)
FP8_FMT = {"FP8_E4M3": (3, 7, 0x7E), "FP8_E5M2": (2, 15, 0x7B)}   # mantissa bits, bias, max code


def fp8_decode(codes, dtype):
    """fp8 codes (uint8) -> float64 values."""
    mb, bias, _ = FP8_FMT[dtype]
    c = np.asarray(codes).astype(np.int64)
    s = np.where(c & 0x80, -1.0, 1.0)
    e = (c >> mb) & ((1 << (7 - mb)) - 1)
    m = c & ((1 << mb) - 1)
    v = np.where(e == 0, m * 2.0 ** (1 - bias - mb), (1 + m / 2.0 ** mb) * 2.0 ** (e - bias))
    if dtype == "FP8_E4M3":
        v = np.where((e == 15) & (m == 7), np.nan, v)
    else:
        v = np.where(e == 31, np.where(m == 0, np.inf, np.nan), v)
    return s * v


def fp8_encode(vals, dtype):
    """float values -> fp8 codes: round to nearest even, saturating (as hdn_compat.h)."""
    mb, bias, maxc = FP8_FMT[dtype]
    v = np.asarray(vals, np.float64)
    sgn = np.where(np.signbit(v), 0x80, 0)
    a = np.minimum(np.abs(v), 131072.0)
    _, ex = np.frexp(a)
    E = np.maximum(ex - 1, 1 - bias)
    E = np.where(a == 0, 1 - bias, E)
    q = np.rint(a * 2.0 ** (mb - E))
    c = np.minimum(((E + bias) << mb) + q.astype(np.int64) - (1 << mb), maxc)
    c = np.where(np.isnan(v), 0x7F, c)
    return (sgn | c).astype(np.uint8)


def quantized_normal(rng, dims, dtype, scale=1.0):
    """Standard-normal values times ``scale``, rounded to ``dtype`` (the tests' random inputs)."""
    return quantize(rng.standard_normal(dims) * scale, dtype)


def nvrtc_or_skip():
    """The NVRTC compiler (compile-only, no GPU needed), or skip the test where it is unusable."""
    import pytest
    try:
        from hipdnn_cabi.device import compiler
        return compiler("cuda")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")


def conv_bias_relu_graph(N, C, K, H, dt, lay, groups=1):
    """conv 3 x 3 (pad 1, stride 1, ``groups``) -> + bias -> relu on an N x C x H x H input of
    type ``dt`` in layout ``lay`` (x uid 1, w 2, bias 4, y 6; FLOAT intermediates 3 and 5):
    (x, w, bias, y, graph bytes)."""
    x = T(1, [N, C, H, H], dt, lay)
    w = T(2, [K, C // groups, 3, 3], dt, lay)
    cv = T(3, [N, K, H, H], "FLOAT", lay, virtual=True)
    b = T(4, [1, K, 1, 1], dt, lay)
    bv = T(5, [N, K, H, H], "FLOAT", lay, virtual=True)
    y = T(6, [N, K, H, H], dt, lay)
    g = graph_bytes([x, w, cv, b, bv, y], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1]),
                                           pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])
    return x, w, b, y, g


def plan_notes(g):
    """The notes of the plan the HIP engine builds for the serialized graph ``g`` on this machine
    (its arch, SM count, knobs); the engine must accept the graph."""
    from engine_plugins.hip_kernels.engine import analyse
    from hipdnn_cabi.plugin_sdk import parse_graph
    a = analyse(parse_graph(g))
    assert a.ok, a.reason
    return a.program.notes


def sdpa_mod_inputs(rng, c, tensor, p, mask_dtype=None):
    """Random inputs (from ``rng``) for the score modifiers of SDPA config ``c``, set on the CPU
    reference's params ``p`` too: its mask (additive in ``mask_dtype``, boolean where None), ALiBi
    (a flag), block mask and sinks; ``tensor(name)`` is the graph's tensor of each (name "mask",
    "block", "sink").  Returns {T: logical values}."""
    ins = {}
    if c.get("mask") is not None:
        t = tensor("mask")
        if mask_dtype is None:
            val = (rng.uniform(0, 1, t.dims) < 0.7).astype(np.uint8)
            val.reshape(-1)[: t.dims[3]] = 0          # a row (or more) with every key masked
            p.attn_mask, p.mask_is_bool = val.astype(bool), True
        else:
            val = quantize(rng.uniform(-3, 3, t.dims), mask_dtype)
            p.attn_mask, p.mask_is_bool = val, False
        ins[t] = val
    p.alibi = bool(c.get("alibi"))
    if c.get("block") is not None:
        t = tensor("block")
        val = rng.integers(0, 256, t.dims).astype(np.uint8)
        val.reshape(-1)[0] = 0                       # a row tile with its first byte of tiles dropped
        p.block_mask = val
        ins[t] = val
    if c.get("sink") is not None:
        t = tensor("sink")
        val = quantize(rng.uniform(-1, 4, [c["H"]]), c["sink"])
        p.sink = val
        ins[t] = val.reshape(t.dims)
    return ins


def distinct_launches(programs):
    """``(name, launch step)`` for each kernel source that ``programs`` (``(name, program)``
    pairs) launch, at its first launch only."""
    seen = set()
    for name, prog in programs:
        for st in prog.steps:
            if st[0] == "launch" and st[1] not in seen:
                seen.add(st[1])
                yield name, st


def sdpa_optional(ts, a, B, H, Sq, stats=True, seq=False, drop=None):
    """Append an SDPA forward's optional tensors at the test graphs' usual uids: stats (5),
    seq_len_q / seq_len_kv with the padding mask (6, 7), dropout seed / offset (8, 9)."""
    if stats:
        ts.append(T(5, [B, H, Sq, 1], "FLOAT"))
        a.update(stats_tensor_uid=5, generate_stats=True)
    if seq:
        ts += [T(6, [B, 1, 1, 1], "INT32"), T(7, [B, 1, 1, 1], "INT32")]
        a.update(seq_len_q_tensor_uid=6, seq_len_kv_tensor_uid=7, padding_mask=True)
    if drop is not None:
        ts += [T(8, [1, 1, 1, 1], "INT64"), T(9, [1, 1, 1, 1], "INT64")]
        a.update(seed_tensor_uid=8, offset_tensor_uid=9, dropout_probability=drop)


def assert_sdpa_close(res, O, st, dt):
    """An SDPA forward's outputs (``res``: uid -> array; o at uid 4, stats at 5 if present)
    against the float64 reference O / stats: 16-bit tolerances, the same infinite stats."""
    tol = 1e-2 if dt == "HALF" else 3e-2
    assert relerr(res[4], O) < tol, relerr(res[4], O)
    if 5 in res:
        fin = np.isfinite(st)
        assert np.array_equal(np.isfinite(res[5]), fin)
        assert np.max(np.abs(res[5][fin] - st[fin])) < 2e-2


def sdpa_bwd_tensors(dt, B, H, Hkv, Sq, Skv, D, Dv=None, seq=False):
    """The tensors and attributes of an SDPA backward graph: q / k / v / o / dO / stats uids 1-6,
    dq / dk / dv 11-13, the scale 1 / sqrt(D); Dv: V / O / dO head size (default D); seq: padding
    mask (lengths uids 7 / 8)."""
    Dv = D if Dv is None else Dv
    ts = [T(1, [B, H, Sq, D], dt), T(2, [B, Hkv, Skv, D], dt), T(3, [B, Hkv, Skv, Dv], dt),
          T(4, [B, H, Sq, Dv], dt), T(5, [B, H, Sq, Dv], dt), T(6, [B, H, Sq, 1], "FLOAT"),
          T(11, [B, H, Sq, D], dt), T(12, [B, Hkv, Skv, D], dt), T(13, [B, Hkv, Skv, Dv], dt)]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "do_tensor_uid": 5, "stats_tensor_uid": 6, "dq_tensor_uid": 11, "dk_tensor_uid": 12,
         "dv_tensor_uid": 13, "attn_scale_value": 1 / math.sqrt(D)}
    if seq:
        ts += [T(7, [B, 1, 1, 1], "INT32"), T(8, [B, 1, 1, 1], "INT32")]
        a.update(seq_len_q_tensor_uid=7, seq_len_kv_tensor_uid=8, padding_mask=True)
    return ts, a


def paged_pools(k, v, lkv, pages, PS, NP, MP, rng):
    """K / V [B, Hkv, S, D] (V: Dv) cut into pages of PS rows placed in a pool in shuffled order
    (``rng``): (K pool [NP, Hkv, PS, D], V pool, page table [B, 1, MP, 1] int32).  Batch b keeps
    ``pages[b]`` pages of its first ``lkv[b]`` rows; pool page NP - 1, unreferenced table
    entries (pointing at it) and rows past each length stay NaN."""
    B, Hkv = k.shape[:2]
    kp = np.full((NP, Hkv, PS, k.shape[3]), np.nan)
    vp = np.full((NP, Hkv, PS, v.shape[3]), np.nan)
    order = rng.permutation(NP - 1)            # page NP - 1 stays NaN
    tab = np.full((B, 1, MP, 1), NP - 1, np.int32)
    n = 0
    for b in range(B):
        for lp in range(pages[b]):
            pg = int(order[n])
            n += 1
            tab[b, 0, lp, 0] = pg
            m = min(PS, int(lkv[b]) - lp * PS)
            kp[pg, :, :m] = k[b, :, lp * PS:lp * PS + m]
            vp[pg, :, :m] = v[b, :, lp * PS:lp * PS + m]
    return kp, vp, tab


def assert_opt_in_knob(monkeypatch, knob, *others):
    """``knob`` (a full HIPDNN_CABI_HIP_* name) is in engine.OPT_IN as "1" and part of the plan
    cache key: "1" and each of ``others`` give another engine.gemm_knobs() than "0"."""
    from engine_plugins.hip_kernels import engine
    assert engine.OPT_IN[knob] == "1"
    monkeypatch.setenv(knob, "0")
    off = engine.gemm_knobs()
    for v in ("1",) + others:
        monkeypatch.setenv(knob, v)
        assert engine.gemm_knobs() != off, v


def sass_overlap_windows(sass, kernel):
    """(exp2s, 16-bit / fp8 conversions, shuffles) between each ``WARPGROUP.DEPBAR.LE gsb0, 0x1``
    (one wgmma group landed, the next still in flight) and the following wait, in the SASS of
    ``kernel`` (cuobjdump -sass text)."""
    import re
    s = sass[sass.index(f"Function : {kernel}"):]
    s = s[:s.index("Function : ", 20)] if "Function : " in s[20:] else s
    lines = [ln for ln in s.splitlines() if re.search(r"/\*[0-9a-f]{4,6}\*/", ln)]
    dep = [i for i, ln in enumerate(lines) if "WARPGROUP.DEPBAR" in ln]
    out = []
    for i1 in dep:
        if re.search(r"DEPBAR\.LE\s+gsb0,\s*0x1\b", lines[i1]):
            i0 = next(i for i in dep if i > i1)
            seg = lines[i1:i0]
            out.append((sum("MUFU.EX2" in ln for ln in seg), sum("F2FP" in ln for ln in seg),
                        sum("SHFL" in ln for ln in seg)))
    return out
