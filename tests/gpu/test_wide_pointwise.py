"""Pointwise nodes (and DOUBLE reductions) the CPU reference computes in float64 - 32 / 64-bit integer tensors, DOUBLE
data, compute type DOUBLE - and integer outputs (conversions, saturation, NaN -> 0): CI runs the
generated elementwise kernels on the host (host_emu) against the CPU reference engine, and
compiles them with NVRTC (sm_90a); ``-m gpu`` runs the same graphs on the device."""
from __future__ import annotations

import functools
import re
import types

import numpy as np
import pytest

import ext_samples
import host_emu
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program, io_uids
from gpu_testlib import (FB, T, bn_bwd, bn_inf, bn_inf_var, bn_train, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes, matmul, node, pw,
                         reduction)
from hipdnn_cabi.plugin_sdk import parse_graph

HDR = codegen.headers()
GEMM_BODIES = {"hdn_gemm_mma": codegen.read_kernel("gemm_mma.hip"),
               "hdn_gemm_simt": codegen.read_kernel("gemm_simt.hip")}
STORE = {"FLOAT": np.float32, "HALF": np.float16, "DOUBLE": np.float64, "INT32": np.int32,
         "INT64": np.int64, "INT8": np.int8, "UNSET": np.uint8}
I32 = np.iinfo(np.int32)


def _np(t):
    return STORE[t.dtype]


def _span(t):
    return 1 + sum((d - 1) * abs(s) for d, s in zip(t.dims, t.strides))


def _lo(t):
    """Bytes from the buffer start to element 0 (negative strides address elements below it)."""
    return -sum((d - 1) * s for d, s in zip(t.dims, t.strides) if s < 0) * np.dtype(_np(t)).itemsize


def _nbytes(t):
    return _span(t) * np.dtype(_np(t)).itemsize


def _pw(mode, a, out, b=None, c=None, compute="FLOAT", **params):
    n = pw(mode, a, out, b, c, **params)
    return node("PointwiseAttributes", n["attributes"][1], compute=compute, name=n["name"])


def _vals(t, rng):
    n = _span(t)
    if t.dtype == "INT32":
        v = rng.integers(-(1 << 30), 1 << 30, n)
        v[:4] = [I32.max, I32.min, 16777217, -16777217]       # beyond float32's exact range
        return v.astype(np.int32)
    if t.dtype == "INT64":
        v = rng.integers(-(1 << 62), 1 << 62, n)
        v[:3] = [(1 << 53) + 1, -(1 << 53) - 3, 123456789012345]
        return v.astype(np.int64)
    if t.dtype == "UNSET":
        return rng.integers(0, 2, n).astype(np.uint8)
    v = rng.standard_normal(n) * (3e9 if t.dtype != "HALF" else 3)
    v[:3] = [np.nan, 2.5, -3.5]                               # NaN -> 0, ties to even
    return v.astype(_np(t))


# name -> (tensors, nodes, input uids): every graph is one pointwise run
CASES = {
    "int32_add_sat": ([T(1, [4, 37], "INT32"), T(2, [1, 37], "INT32"), T(3, [4, 37], "INT32")],
                      [_pw("ADD", 1, 3, 2, compute="INT32")]),
    "int32_mul_sat": ([T(1, [4, 37], "INT32"), T(2, [4, 37], "INT32"), T(3, [4, 37], "INT32")],
                      [_pw("MUL", 1, 3, 2, compute="INT32")]),
    "int32_max_neg_abs": ([T(1, [3, 41], "INT32"), T(2, [3, 41], "INT32"), T(4, [3, 41], "INT32", virtual=True),
                           T(5, [3, 41], "INT32", virtual=True), T(3, [3, 41], "INT32")],
                          [_pw("MAX_OP", 1, 4, 2), _pw("NEG", 4, 5), _pw("ABS", 5, 3)]),
    "int32_cmp_bool": ([T(1, [5, 33], "INT32"), T(2, [5, 33], "INT32"), T(3, [5, 33], "UNSET")],
                       [_pw("CMP_GT", 1, 3, 2, compute="INT32")]),
    "int32_cmp_float": ([T(1, [5, 33], "INT32"), T(2, [5, 33], "INT32"), T(3, [5, 33], "FLOAT")],
                        [_pw("CMP_EQ", 1, 3, 1)]),
    "int32_to_float_relu": ([T(1, [6, 29], "INT32"), T(2, [6, 29], "FLOAT", virtual=True), T(3, [6, 29], "FLOAT")],
                            [_pw("IDENTITY", 1, 2), _pw("RELU_FWD", 2, 3)]),
    "int32_to_half": ([T(1, [6, 29], "INT32"), T(2, [6, 29], "HALF")], [_pw("IDENTITY", 1, 2)]),
    "int64_identity": ([T(1, [3, 50], "INT64"), T(2, [3, 50], "INT64")], [_pw("IDENTITY", 1, 2)]),
    "int64_to_double": ([T(1, [3, 50], "INT64"), T(2, [3, 50], "DOUBLE")], [_pw("IDENTITY", 1, 2)]),
    "float_to_int32": ([T(1, [4, 40], "FLOAT"), T(2, [4, 40], "INT32")], [_pw("IDENTITY", 1, 2)]),
    "double_to_int64": ([T(1, [4, 40], "DOUBLE"), T(2, [4, 40], "INT64")], [_pw("IDENTITY", 1, 2)]),
    "select_int32_mask": ([T(1, [4, 40], "FLOAT"), T(2, [4, 40], "FLOAT"), T(4, [4, 40], "INT32"),
                           T(3, [4, 40], "FLOAT")], [_pw("BINARY_SELECT", 1, 3, 2, 4)]),
    "double_chain": ([T(1, [2, 3, 17], "DOUBLE"), T(2, [1, 3, 1], "DOUBLE"),
                      T(4, [2, 3, 17], "DOUBLE", virtual=True), T(5, [2, 3, 17], "DOUBLE", virtual=True),
                      T(6, [1, 1, 1], "DOUBLE", value=1e-300), T(3, [2, 3, 17], "DOUBLE")],
                     [_pw("DIV", 1, 4, 2, compute="DOUBLE"), _pw("MUL", 4, 5, 4, compute="DOUBLE"),
                      _pw("ADD", 5, 3, 6, compute="DOUBLE")]),
    "double_to_float_half": ([T(1, [2, 45], "DOUBLE"), T(2, [2, 45], "FLOAT"), T(3, [2, 45], "HALF")],
                             [_pw("MUL", 1, 2, 1, compute="DOUBLE"), _pw("IDENTITY", 1, 3, compute="DOUBLE")]),
    "float_compute_double": ([T(1, [4, 33], "FLOAT"), T(2, [4, 33], "FLOAT"), T(3, [4, 33], "FLOAT")],
                             [_pw("DIV", 1, 3, 2, compute="DOUBLE")]),
    "double_relu_default_clip": ([T(1, [4, 33], "DOUBLE"), T(2, [4, 33], "DOUBLE")],
                                 [_pw("RELU_FWD", 1, 2, compute="DOUBLE")]),
}


def _red(mode, x, y, compute):
    n = reduction(mode, x, y)
    return node("ReductionAttributes", n["attributes"][1], compute=compute, name=n["name"])


# DOUBLE reductions: result rounded to float32 unless the compute type is DOUBLE (CPU reference)
for _m, _o, _c, _shape in (("ADD", "DOUBLE", "DOUBLE", [3, 200]), ("ADD", "DOUBLE", "FLOAT", [3, 200]),
                           ("NORM2", "FLOAT", "DOUBLE", [4, 90]), ("MAX_OP", "DOUBLE", "UNSET", [5, 70]),
                           ("AVG", "DOUBLE", "DOUBLE", [2, 5000])):        # the last: two kernels
    CASES[f"red_{_m}_{_o}_{_c}_{_shape[1]}"] = (
        [T(1, _shape, "DOUBLE"), T(2, [_shape[0], 1], _o)], [_red(_m, 1, 2, _c)])


def _with_compute(n, compute):
    return dict(n, compute_data_type=FB["DataType"][compute])


# DOUBLE matmul / convolution: the direct FP64 kernels (FP32 for compute type FLOAT)
for _c in ("DOUBLE", "FLOAT"):
    CASES[f"mm_double_{_c}"] = ([T(1, [2, 1, 9, 13], "DOUBLE"), T(2, [3, 13, 7], "DOUBLE", strides=[1, 1, 13]),
                                 T(3, [2, 3, 9, 7], "DOUBLE")], [_with_compute(matmul(1, 2, 3), _c)])
for _lay, _mode in (("nchw", "CROSS_CORRELATION"), ("nhwc", "CONVOLUTION")):
    _x, _w, _y = T(1, [2, 5, 9, 8], "DOUBLE", _lay), T(2, [6, 5, 3, 2], "DOUBLE", _lay), \
        T(3, [2, 6, 5, 4], "DOUBLE", _lay)
    _a = ([1, 1], [2, 2], [1, 2], _mode)      # padding, stride, dilation, mode
    CASES[f"conv_fwd_double_{_lay}"] = ([_x, _w, _y], [_with_compute(conv_fwd(1, 2, 3, *_a), "DOUBLE")])
    CASES[f"conv_bwd_data_double_{_lay}"] = ([_y, _w, _x], [_with_compute(conv_bwd_data(3, 2, 1, *_a), "DOUBLE")])
    CASES[f"conv_bwd_filter_double_{_lay}"] = ([_x, _y, _w], [_with_compute(conv_bwd_filter(1, 3, 2, *_a), "UNSET")])
CASES["conv_fwd_double_float_compute_1d"] = (
    [T(1, [2, 4, 11], "DOUBLE"), T(2, [3, 4, 3], "DOUBLE"), T(3, [2, 3, 11], "FLOAT")],
    [_with_compute(conv_fwd(1, 2, 3, [1], [1], [1]), "FLOAT")])


# DOUBLE batchnorm: inference, inference with variance + epsilon, training (running statistics),
# backward; per-channel parameters DOUBLE or FLOAT (mixed precision)
_bx = [T(1, [2, 3, 5, 7], "DOUBLE"), T(2, [1, 3, 1, 1], "DOUBLE"), T(3, [1, 3, 1, 1], "DOUBLE"),
       T(4, [1, 3, 1, 1], "FLOAT"), T(5, [1, 3, 1, 1], "DOUBLE"), T(6, [2, 3, 5, 7], "DOUBLE")]
CASES["bn_inf_double"] = (_bx, [bn_inf(1, 2, 3, 4, 5, 6)])
CASES["bn_inf_var_double"] = (_bx + [T(7, [1, 1, 1, 1], "DOUBLE", value=1e-5)], [bn_inf_var(1, 2, 3, 4, 5, 7, 6)])
CASES["bn_train_double"] = (
    [T(1, [3, 4, 5, 6], "DOUBLE", "nhwc"), T(2, [1, 4, 1, 1], "DOUBLE"), T(3, [1, 4, 1, 1], "FLOAT"),
     T(4, [1, 1, 1, 1], "DOUBLE", value=1e-5), T(5, [3, 4, 5, 6], "DOUBLE", "nhwc"),
     T(6, [1, 4, 1, 1], "DOUBLE"), T(7, [1, 4, 1, 1], "DOUBLE"), T(8, [1, 4, 1, 1], "DOUBLE"),
     T(9, [1, 4, 1, 1], "DOUBLE"), T(10, [1, 1, 1, 1], "DOUBLE", value=0.1),
     T(11, [1, 4, 1, 1], "DOUBLE"), T(12, [1, 4, 1, 1], "DOUBLE")],
    [bn_train(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)])
CASES["bn_bwd_double"] = (
    [T(1, [2, 3, 5, 7], "DOUBLE"), T(2, [2, 3, 5, 7], "DOUBLE"), T(3, [1, 3, 1, 1], "DOUBLE"),
     T(4, [1, 3, 1, 1], "DOUBLE"), T(5, [1, 3, 1, 1], "DOUBLE"), T(6, [2, 3, 5, 7], "DOUBLE"),
     T(7, [1, 3, 1, 1], "DOUBLE"), T(8, [1, 3, 1, 1], "DOUBLE")], [bn_bwd(1, 2, 3, 4, 5, 6, 7, 8)])


# GEN_INDEX: integer index outputs (a size-1 axis of x broadcasts index 0)
CASES["gen_index_axis1_int32"] = ([T(1, [3, 5, 7], "HALF"), T(2, [3, 5, 7], "INT32")],
                                  [_pw("GEN_INDEX", 1, 2, axis_tensor_uid=1)])
CASES["gen_index_last_int64_nhwc"] = ([T(1, [2, 3, 4, 5], "FLOAT"), T(2, [2, 3, 4, 5], "INT64", "nhwc")],
                                      [_pw("GEN_INDEX", 1, 2, axis_tensor_uid=-1, compute="INT32")])
CASES["gen_index_bcast_chain"] = ([T(1, [3, 1, 7], "FLOAT"), T(2, [3, 5, 7], "INT32"),
                                   T(3, [3, 5, 7], "INT32", virtual=True), T(4, [3, 5, 7], "INT32")],
                                  [_pw("GEN_INDEX", 1, 3, axis_tensor_uid=1), _pw("ADD", 3, 4, 2),
                                   _pw("GEN_INDEX", 2, 5, axis_tensor_uid=0)])
CASES["gen_index_bcast_chain"][0].append(T(5, [3, 5, 7], "INT64"))


# negative strides (elementwise kernels, reductions, batchnorm inference): element 0 at the
# pointer, the others at signed offsets from it
CASES["neg_strides_pw_chain"] = (
    [T(1, [4, 6, 5], "FLOAT", strides=[30, -5, 1]), T(2, [1, 6, 1], "FLOAT", strides=[6, -1, 1]),
     T(3, [4, 6, 5], "FLOAT", virtual=True, strides=[-30, 5, 1]), T(4, [4, 6, 5], "HALF", strides=[-1, -4, 24])],
    [_pw("ADD", 1, 3, 2), _pw("RELU_FWD", 3, 5), _pw("MUL", 5, 4, 1)])
CASES["neg_strides_pw_chain"][0].append(T(5, [4, 6, 5], "FLOAT", virtual=True))
CASES["neg_strides_two_runs"] = (      # a virtual tensor between two kernels (workspace)
    [T(1, [3, 8], "FLOAT", strides=[-8, 1]), T(2, [3, 8], "FLOAT", virtual=True, strides=[1, -3]),
     T(3, [3, 1], "FLOAT")],
    [_pw("NEG", 1, 2), _red("MAX_OP", 2, 3, "FLOAT")])
CASES["neg_strides_reduction"] = ([T(1, [5, 40], "FLOAT", strides=[-40, -1]), T(2, [5, 1], "FLOAT", strides=[-1, 1])],
                                  [_red("ADD", 1, 2, "FLOAT")])
CASES["neg_strides_bn_inf"] = (
    [T(1, [2, 3, 4, 5], "FLOAT", strides=[60, -20, -5, 1]), T(2, [1, 3, 1, 1], "FLOAT", strides=[3, -1, 1, 1]),
     T(3, [1, 3, 1, 1], "FLOAT"), T(4, [1, 3, 1, 1], "FLOAT"), T(5, [1, 3, 1, 1], "FLOAT"),
     T(6, [2, 3, 4, 5], "FLOAT", strides=[-60, 20, 5, 1])], [bn_inf(1, 2, 3, 4, 5, 6)])


# DOUBLE layernorm / RMSnorm forward and backward: the double row / column kernels
CASES["ln_fwd_double"] = ext_samples.ln_fwd("DOUBLE", "DOUBLE", 5, 40)
CASES["rms_fwd_double_float_params"] = ext_samples.ln_fwd("DOUBLE", "FLOAT", 3, 33, rms=True)
CASES["ln_bwd_double"] = ext_samples.ln_bwd("DOUBLE", "DOUBLE", 4, 24)
CASES["rms_bwd_double_float_params"] = ext_samples.ln_bwd("DOUBLE", "FLOAT", 3, 16, rms=True)

# DOUBLE pooling: max (with indices, float32's lowest as the start value) and average forward,
# average backward
CASES["pool_max_fwd_double"] = ext_samples.pool_fwd("DOUBLE", "nchw", [2, 3, 7, 6], [3, 2], [2, 2], [1, 0], [1, 1],
                                                    "MAXPOOL", "NEG_INF_PAD")
CASES["pool_avg_fwd_double_nhwc"] = ext_samples.pool_fwd("DOUBLE", "nhwc", [2, 3, 7, 6], [3, 3], [2, 1], [1, 1],
                                                         [1, 1], "AVGPOOL_EXCLUDE_PADDING", None)
CASES["pool_avg_bwd_double"] = ext_samples.pool_bwd("DOUBLE", "nchw", [2, 3, 7, 6], [3, 2], [2, 2], [1, 0], [1, 1],
                                                    "AVGPOOL_INCLUDE_PADDING", None)

# a compute-DOUBLE pointwise node fused into a FLOAT GEMM's epilogue (double statements in the
# GEMM's store, float loads and stores)
CASES["mm_float_fused_double_pw"] = (
    [T(1, [2, 24, 16]), T(2, [2, 16, 40]), T(3, [2, 24, 40], virtual=True), T(4, [1, 1, 40]),
     T(5, [2, 24, 40], virtual=True), T(6, [2, 24, 40])],
    [matmul(1, 2, 3), _pw("MUL", 3, 5, 4, compute="DOUBLE"), _pw("TANH_FWD", 5, 6, compute="DOUBLE")])


def _graph(name):
    ts, ns = CASES[name]
    gb = ns if isinstance(ns, bytes) else graph_bytes(ts, ns)
    g = parse_graph(gb)
    outs = {u for n in g.nodes for u in io_uids(n, g)[1]}
    ins = [t for t in ts if t.uid not in outs and t.value is None]
    return ts, gb, ins, [t for t in ts if t.uid in outs and not t.virtual]


def _inputs(name):
    ts, gb, ins, outs = _graph(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    vals = {t.uid: _vals(t, rng) for t in ins}
    if name.startswith(("mm_", "conv_", "bn_", "ln_", "rms_", "neg_strides", "pool_")):
        rng = np.random.default_rng(sum(map(ord, name)))
        vals = {u: rng.standard_normal(v.size).astype(v.dtype) for u, v in vals.items()}
    if "bwd" in name and name.startswith(("ln_", "rms_")):
        vals[5] = np.abs(vals[5]) + 0.5                  # inverse variance / rms
    if name == "neg_strides_bn_inf":
        vals[3] = np.abs(vals[3]) + 0.5
    if name.startswith("bn_inf"):
        vals[3] = np.abs(vals[3]) + 0.5                  # inverse variance / variance > 0
    if name == "bn_bwd_double":
        vals[4] = np.abs(vals[4]) + 0.5
    if name == "double_chain":
        vals[1][:] = np.abs(vals[1]) * 1e290             # beyond float32's range
        vals[1][0] = 1e-310                              # a double denormal
    if name == "double_relu_default_clip":
        vals[1][5] = 1e300                               # above FLT_MAX: no clip in double
    if name == "double_to_float_half":
        vals[1][:] = vals[1] / 3e9
        vals[1][5] = 1.0 + 2.0 ** -11 + 2.0 ** -40       # rounds up to half only when rounded once
    return ts, gb, {u: v.tobytes() for u, v in vals.items()}, outs


def cpu_run(ts, g, ins):
    import cffi
    from engine_plugins.cpu_reference import create_plugin
    from engine_plugins.cpu_reference.engine import ENGINE_NAME
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, engine_id_of
    c = create_plugin().create_container()
    host = {t.uid: np.frombuffer(bytearray(ins.get(t.uid, b"\xee" * _nbytes(t))), np.uint8)
            for t in ts if not t.virtual and t.value is None}
    cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})
    ctx = c.create_execution_context(cfg, parse_graph(g))
    lo = {t.uid: _lo(t) for t in ts}
    c.execute(ctx, 0, DeviceBuffers({u: a.ctypes.data + lo[u] for u, a in host.items()}, ffi=cffi.FFI()))
    return {u: a.tobytes() for u, a in host.items() if u not in ins}


def emu_run(ts, g, ins):
    prog = build_program(parse_graph(g))
    mem = host_emu.HostMem()
    ptr, raw = {}, {}
    for t in ts:
        if t.virtual or t.value is not None:
            continue
        p, r = mem.alloc(_nbytes(t), 0xEE)
        if t.uid in ins:
            r[:] = np.frombuffer(ins[t.uid], np.uint8)
        ptr[t.uid], raw[t.uid] = p + _lo(t), r
    base = {"ws": mem.alloc(max(16, prog.ws_size)), "sc": mem.alloc(max(16, prog.scratch_size))}
    for st in prog.steps:
        if st[0] == "memset":
            buf = raw[st[1][1]] if st[1][0] == "t" else base[st[1][0]][1][st[1][1]:]
            buf[:st[2]] = 0
            continue
        _, src, name, grid, block, args = st
        if name.startswith("hdn_reduce_part"):
            pytest.skip(f"{name} uses barriers (GPU only)")
        vals = [ptr[a[1]] if a[0] == "t" else base[a[0]][0] + a[1] for a in args]
        if name in GEMM_BODIES:        # the generated prelude under the serial GEMM loop
            prelude = src[:src.index(GEMM_BODIES[name])]
            d = {k: int(v) for k, v in re.findall(r"#define (G\w+|C_VEC) (\d+)", prelude)}
            host_emu.run_gemm_prelude(prelude, vals, HDR, d["C_VEC"] and d["GSPLIT"] == 1,
                                      d["GBATCH"], d["GM"], d["GN"], d["GK"], d["GSPLIT"])
            continue
        if name in ("hdn_bn_stats", "hdn_bn_bwd_sums"):
            _bn_sums_numpy(name, vals, {ptr[u]: (t, raw[u]) for t in ts for u in [t.uid] if u in ptr})
            continue
        host_emu.run_kernel(src, name, grid, block, vals, HDR)
    return {u: raw[u].tobytes() for u in raw if u not in ins}


def _bn_sums_numpy(name, vals, by_ptr):
    """The per-channel sums of the barrier kernels (GPU only) from their contract: hdn_bn_stats
    (x, ws): ws = [sum x, sum x^2]; hdn_bn_bwd_sums (dy, x, mean, inv, ws): ws = [sum dy,
    sum dy * (x - mean) * inv] (double, C each)."""
    import ctypes

    def arr(p):
        t, r = by_ptr[p]
        b = r.view(_np(t))
        return np.lib.stride_tricks.as_strided(b, t.dims, [s_ * b.itemsize for s_ in t.strides]).astype(np.float64)
    x = arr(vals[0]) if name == "hdn_bn_stats" else arr(vals[1])
    ax = (0,) + tuple(range(2, x.ndim))
    C = x.shape[1]
    if name == "hdn_bn_stats":
        s1, s2 = x.sum(axis=ax), (x * x).sum(axis=ax)
        wsp = vals[1]
    else:
        dy, mu, iv = arr(vals[0]), arr(vals[2]).reshape(-1), arr(vals[3]).reshape(-1)
        shp = [1, C] + [1] * (x.ndim - 2)
        s1 = dy.sum(axis=ax)
        s2 = (dy * (x - mu.reshape(shp)) * iv.reshape(shp)).sum(axis=ax)
        wsp = vals[4]
    out = (ctypes.c_double * (2 * C)).from_address(wsp)
    for c in range(C):
        out[c], out[C + c] = float(s1[c]), float(s2[c])


def _check(name, outs, ref, got):
    for t in outs:
        r, g = np.frombuffer(ref[t.uid], _np(t)), np.frombuffer(got[t.uid], _np(t))
        if name.startswith(("mm_", "conv_", "bn_", "neg_", "ln_", "rms_", "pool_")):     # sum orders differ
            tol = 1e-12 if "float" not in name.lower() else 2e-6
            if t.dtype != "DOUBLE":     # float32 formulas of different association
                tol = 2e-6
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol * float(np.max(np.abs(r))),
                                       err_msg=f"uid {t.uid}")
        elif t.dtype == "DOUBLE" or name.startswith("red_"):
            np.testing.assert_allclose(g, r, rtol=1e-14 if t.dtype == "DOUBLE" else 1e-6, atol=0,
                                       err_msg=f"uid {t.uid}")
        else:      # integers, BOOLEAN, float / half results of exact or correctly rounded ops
            if g.dtype.kind == "f":     # NaN in both, whatever the payload (CUDA's is 0x7fff...)
                nan = np.isnan(g) & np.isnan(r)
                g, r = np.where(nan, 0, g).astype(g.dtype), np.where(nan, 0, r).astype(r.dtype)
            np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8), err_msg=f"uid {t.uid}")


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("name", sorted(CASES))
def test_wide_pointwise_host_emulation_matches_cpu_reference(name):
    ts, g, ins, outs = _inputs(name)
    _check(name, outs, cpu_run(ts, g, ins), emu_run(ts, g, ins))


@pytest.mark.parametrize("name", sorted(CASES))
def test_wide_pointwise_compiles_sm90a(name):
    try:
        from hipdnn_cabi.device import compiler
        c = compiler("cuda")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")
    ts, g, ins, outs = _inputs(name)
    for st in build_program(parse_graph(g), arch="sm_90").steps:
        if st[0] == "launch":
            c.compile(st[1], f"{st[2]}.hip", (), "sm_90a", HDR)


def _device_run(name, both):
    """One case on ``both``'s second engine (test_parity_corpus._Both: the HIP engine on the
    GPU, or the CPU reference on host memory) against the CPU reference."""
    import cffi
    from hipdnn_cabi.plugin_sdk import DeviceBuffers
    ts, g, ins, outs = _inputs(name)
    rt = both.rt
    pg = parse_graph(g)
    ptrs, buf = {}, {}
    for t in ts:
        if t.virtual or t.value is not None:
            continue
        buf[t.uid] = rt.malloc(_nbytes(t))
        ptrs[t.uid] = buf[t.uid] + _lo(t)
        if t.uid in ins:
            b = np.frombuffer(ins[t.uid], np.uint8)
            rt.memcpy_htod(buf[t.uid], b.ctypes.data, b.nbytes)
        else:
            rt.memset(buf[t.uid], 0xEE, _nbytes(t), 0)
    rt.synchronize()
    assert both.gpu.get_applicable_engine_ids(pg) == [both.gcfg.engine_id], name
    ctx = both.gpu.create_execution_context(both.gcfg, pg)
    wsz = both.gpu.get_workspace_size_from_context(ctx)
    ws = rt.malloc(wsz) if wsz else 0
    both.gpu.execute(ctx, ws, DeviceBuffers(ptrs, ffi=cffi.FFI()))
    rt.stream_synchronize(both.stream)
    got = {}
    for t in outs:
        h = np.empty(_nbytes(t), np.uint8)
        rt.memcpy_dtoh(h.ctypes.data, buf[t.uid], h.nbytes)
        got[t.uid] = h.tobytes()
    for p in list(buf.values()) + ([ws] if ws else []):
        rt.free(p)
    _check(name, outs, cpu_run(ts, g, ins), got)


def test_device_harness_on_the_cpu_reference():
    """CI self-check of the device test's harness (buffers, negative-stride pointers, workspace,
    comparison) with the CPU reference engine on both sides, on host memory."""
    from test_parity_corpus import _Both
    both = _Both(device=False)
    for name in sorted(CASES):
        _device_run(name, both)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_wide_pointwise_on_the_device(name):
    from hipdnn_cabi import device
    if not device.available():
        pytest.skip("no GPU runtime found")
    _device_run(name, _device_both())


@functools.lru_cache(maxsize=1)
def _device_both():
    """One pair of engines (containers, stream) for every device case."""
    from test_parity_corpus import _Both
    return _Both()
