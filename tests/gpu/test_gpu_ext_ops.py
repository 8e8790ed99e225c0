"""GPU (HIP engine) vs the CPU reference engine for the issue-17 families: layernorm / RMSnorm
forward + backward (mixed 16-bit / float parameter types), resample forward / backward (2-D / 3-D,
NCHW / NHWC, index), block-scale quantize / dequantize (bit-exact).  Both engines run the same
graph on the same raw input bytes; also checks that every generated source compiles (CI)."""
from __future__ import annotations

import types

import numpy as np
import pytest

from ext_samples import bsdq, bsq, ext_sample_graphs, ln_bwd, ln_fwd, ln_pw, pool_bwd, pool_fwd
from gpu_testlib import bf16_bits

rng = np.random.default_rng(17)
STORE = {"FLOAT": np.float32, "HALF": np.float16, "BFLOAT16": np.uint16, "INT32": np.int32,
         "INT8": np.int8}


def _np(t):
    return STORE.get(t.dtype, np.uint8)


def nbytes(t):
    return (1 + sum((d - 1) * s for d, s in zip(t.dims, t.strides))) * np.dtype(_np(t)).itemsize


def as_float(t, raw):
    a = np.frombuffer(raw, _np(t))
    if t.dtype == "BFLOAT16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def fill(t, kind="normal", scale=1.0):
    n = nbytes(t) // np.dtype(_np(t)).itemsize
    if t.dtype in ("FLOAT", "HALF"):
        return (rng.standard_normal(n) * scale).astype(_np(t)).tobytes()
    if t.dtype == "BFLOAT16":
        return bf16_bits(rng.standard_normal(n) * scale).tobytes()
    if t.dtype == "INT32":
        return rng.integers(-1, 81, n).astype(np.int32).tobytes()
    if t.dtype == "INT8":
        return rng.integers(-128, 128, n).astype(np.int8).tobytes()
    if t.dtype == "FP8_E8M0":
        return rng.integers(120, 135, n).astype(np.uint8).tobytes()
    return rng.integers(0, 256, n).astype(np.uint8).tobytes()


class Both:
    """Runs one graph on the CPU reference (host buffers) and on the HIP engine (device)."""

    def __init__(self):
        from engine_plugins.cpu_reference import create_plugin as cpu_plugin
        from engine_plugins.hip_kernels import create_plugin as gpu_plugin
        from engine_plugins.hip_kernels.engine import ENGINE_NAME as GN
        from engine_plugins.cpu_reference.engine import ENGINE_NAME as CN
        from hipdnn_cabi import device
        from hipdnn_cabi.plugin_sdk import engine_id_of
        self.rt = device.get_runtime()
        self.cpu = cpu_plugin().create_container()
        self.gpu = gpu_plugin().create_container()
        self.stream = self.rt.stream_create()
        self.gpu.set_stream(self.stream)
        self.ccfg = types.SimpleNamespace(engine_id=engine_id_of(CN), knobs={})
        self.gcfg = types.SimpleNamespace(engine_id=engine_id_of(GN), knobs={})

    def run(self, tensors, gbytes, inputs):
        import cffi
        from hipdnn_cabi.plugin_sdk import DeviceBuffers, parse_graph
        g = parse_graph(gbytes)
        assert self.gpu.get_applicable_engine_ids(g) == [self.gcfg.engine_id]
        outs = [t for t in tensors if t.uid not in inputs]
        # CPU
        host = {t.uid: np.frombuffer(bytearray(inputs[t.uid] if t.uid in inputs else
                                               b"\xee" * nbytes(t)), np.uint8) for t in tensors}
        ctx = self.cpu.create_execution_context(self.ccfg, g)
        self.cpu.execute(ctx, 0, DeviceBuffers({u: a.ctypes.data for u, a in host.items()},
                                               ffi=cffi.FFI()))
        # GPU
        ptrs = {}
        for t in tensors:
            p = self.rt.malloc(nbytes(t))
            ptrs[t.uid] = p
            if t.uid in inputs:
                b = np.frombuffer(inputs[t.uid], np.uint8)
                self.rt.memcpy_htod(p, b.ctypes.data, b.nbytes)
            else:
                self.rt.memset(p, 0xEE, nbytes(t), 0)
        self.rt.synchronize()
        gctx = self.gpu.create_execution_context(self.gcfg, g)
        wsz = self.gpu.get_workspace_size_from_context(gctx)
        ws = self.rt.malloc(wsz) if wsz else 0
        self.gpu.execute(gctx, ws, DeviceBuffers(ptrs, ffi=cffi.FFI()))
        self.rt.stream_synchronize(self.stream)
        res = {}
        for t in outs:
            h = np.empty(nbytes(t), np.uint8)
            self.rt.memcpy_dtoh(h.ctypes.data, ptrs[t.uid], h.nbytes)
            res[t.uid] = (host[t.uid].tobytes(), h.tobytes())
        for p in ptrs.values():
            self.rt.free(p)
        if ws:
            self.rt.free(ws)
        return res


@pytest.fixture(scope="module")
def B():
    return Both()


def close(t, pair, tol):
    c, g = as_float(t, pair[0]), as_float(t, pair[1])
    assert np.all(np.isfinite(g)), f"uid {t.uid}: non-finite / unwritten GPU output"
    err = np.max(np.abs(c - g)) / max(1e-6, np.max(np.abs(c)))
    assert err < tol, f"uid {t.uid}: rel err {err:.3g}"


TOL = {"FLOAT": 2e-5, "HALF": 2e-3, "BFLOAT16": 1.6e-2}


def test_generated_sources_compile_sm90a():
    try:
        from hipdnn_cabi.device import compiler
        c = compiler("cuda")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    hdr = codegen.headers()
    n = 0
    for name, g in ext_sample_graphs()[::7]:      # a seventh of them: the CI budget
        for st in build_program(parse_graph(g)).steps:
            if st[0] == "launch":
                c.compile(st[1], f"{name}.hip", (), "sm_90a", hdr)
                n += 1
    assert n > 10


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("gather", [False, True])
def test_norm_pointwise_run_fuses_into_one_kernel(rms, gather):
    """CI (no GPU): a norm whose virtual y feeds a pointwise run becomes one kernel (the run's
    body from the pointwise generator in the norm's store), statistics still written."""
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    ts, g = ln_pw("HALF", "FLOAT", 16, 1024, rms=rms, gather=gather)
    prog = build_program(parse_graph(g), arch="sm_90")
    launches = [st for st in prog.steps if st[0] == "launch"]
    assert len(launches) == 1, prog.notes
    assert any("pointwise node(s) fused" in n for n in prog.notes)
    assert ("t", 12) in launches[0][5] and ("t", 7) in launches[0][5]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("shape", [(64, 1000), (32, 4096)])
def test_norm_pointwise_fused(B, dt, rms, shape):
    pt = "FLOAT" if dt != "FLOAT" else dt
    ts, g = ln_pw(dt, pt, *shape, rms=rms, gather=shape[1] == 1000)
    ins = {t.uid: fill(t, scale=2.0) for t in ts if t.uid in (1, 2, 3, 8, 11, 13)}
    res = B.run(ts, g, ins)
    close(ts[-1] if ts[-1].uid == 12 else [t for t in ts if t.uid == 12][0], res[12], TOL[dt] * 4)
    for u in (6, 7):
        if u in res:
            close([t for t in ts if t.uid == u][0], res[u], 1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("shape", [(64, 1000), (32, 4096)])
def test_norm_fwd(B, dt, rms, shape):
    pt = "FLOAT" if dt != "FLOAT" else dt
    ts, g = ln_fwd(dt, pt, *shape, rms=rms)
    ins = {t.uid: fill(t, scale=2.0) for t in ts if t.uid in (1, 2, 3)}
    res = B.run(ts, g, ins)
    for t in ts:
        if t.uid in res:
            close(t, res[t.uid], 4 * TOL[t.dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("rms", [False, True])
def test_norm_bwd(B, dt, rms):
    check_norm_bwd(B, dt, rms, 300, 768)


def check_norm_bwd(B, dt, rms, M, D):
    """Layernorm / RMSnorm backward of an M x D ``dt`` input (FLOAT statistics computed here)
    on the engine under test against the CPU reference (``B.run``)."""
    ts, g = ln_bwd(dt, "FLOAT", M, D, rms=rms)
    ins = {t.uid: fill(t) for t in ts if t.uid in (1, 2, 3)}
    x = as_float(ts[1], ins[2]).reshape(M, D)
    mu = x.mean(1)
    ins[4] = mu.astype(np.float32).tobytes()
    ins[5] = ((1 / np.sqrt(((x - mu[:, None]) ** 2).mean(1) + 1e-5)) if not rms else
              (1 / np.sqrt((x * x).mean(1) + 1e-5))).astype(np.float32).tobytes()
    ins = {u: b for u, b in ins.items() if any(t.uid == u for t in ts)}
    res = B.run(ts, g, ins)
    for t in ts:
        if t.uid in res:
            close(t, res[t.uid], 8 * TOL[t.dtype] if t.uid == 6 else 1e-4 if t.dtype == "FLOAT"
                  else 4 * TOL[t.dtype])


POOLS = [([2, 16, 13, 11], [3, 3], [2, 2], [1, 1], [1, 0], "MAXPOOL", "NEG_INF_PAD"),
         ([2, 16, 13, 11], [2, 3], [1, 2], [1, 1], [1, 1], "MAXPOOL", "ZERO_PAD"),
         ([2, 8, 6, 7, 5], [2, 2, 3], [2, 1, 2], [1, 0, 1], [0, 1, 1], "AVGPOOL_EXCLUDE_PADDING", None),
         ([2, 8, 9, 9], [3, 3], [2, 2], [1, 1], [1, 1], "AVGPOOL_INCLUDE_PADDING", "ZERO_PAD")]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("lay", ["nchw", "nhwc"])
@pytest.mark.parametrize("pi", range(len(POOLS)))
def test_pool(B, dt, lay, pi):
    xd, win, st, pre, post, mode, pm = POOLS[pi]
    ts, g = pool_fwd(dt, lay, xd, win, st, pre, post, mode, pm)
    res = B.run(ts, g, {1: fill(ts[0])})
    for t in ts:
        if t.uid in res:
            if mode == "MAXPOOL":
                assert res[t.uid][0] == res[t.uid][1], f"uid {t.uid} differs"
            else:
                close(t, res[t.uid], TOL[dt])
    ts, g = pool_bwd(dt, lay, xd, win, st, pre, post, mode, pm)
    ins = {1: fill(ts[0])}
    if mode == "MAXPOOL":
        ins[3] = fill(ts[2])
    res = B.run(ts, g, ins)
    close(ts[1], res[2], TOL[dt] * 2)


QS = [("FLOAT", "FP8_E4M3", "FP8_E8M0", [64, 256], 32, None),
      ("BFLOAT16", "FP8_E4M3", "FP8_E8M0", [128, 512], 32, None),
      ("HALF", "FP8_E5M2", "FP8_E8M0", [32, 96], 32, None),
      ("BFLOAT16", "FP4_E2M1", "FP8_E4M3", [64, 128], 16, None),
      ("FLOAT", "FP4_E2M1", "FP8_E8M0", [64, 32], 32, 0),
      ("HALF", "INT8", "FLOAT", [16, 64], 8, None),
      ("FLOAT", "FP8_E4M3_FNUZ", "HALF", [16, 64], 16, None),
      ("BFLOAT16", "FP6_E2M3", "BFLOAT16", [16, 64], 32, None)]


@pytest.mark.gpu
@pytest.mark.parametrize("qi", range(len(QS)))
def test_block_scale_quantize_bit_exact(B, qi):
    xt, yt, stp, dims, bs, ax = QS[qi]
    ts, g = bsq(xt, yt, stp, dims, bs, axis=ax)
    n = int(np.prod(dims))
    v = rng.standard_normal(n) * np.exp(rng.uniform(-12, 12, n))
    v[:bs] = 0.0
    v[3 * bs + 5] = np.nan
    v[5 * bs + 1] = -np.inf
    raw = v.astype(np.float32)
    raw = (bf16_bits(raw).tobytes() if xt == "BFLOAT16" else raw.astype(STORE[xt]).tobytes())
    res = B.run(ts, g, {1: raw})
    for u in (2, 3):
        c, gg = res[u]
        assert c == gg, f"uid {u}: {sum(a != b for a, b in zip(c, gg))} bytes differ"


@pytest.mark.gpu
@pytest.mark.parametrize("lanes", ["1", "0"])
def test_block_scale_quantize_e8m0_extremes(B, lanes, monkeypatch):
    """Blocks whose E8M0 scale lands on the ends of its range (amax near float max and in the
    subnormals: scale codes 254 and 0, the reciprocal 2^-127 a subnormal), both kernels
    (the lane-group kernel multiplies by the exact reciprocal, the generic one divides)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_BSQ_LANES", lanes)
    ts, g = bsq("FLOAT", "FP8_E4M3", "FP8_E8M0", [16, 256], 32)
    v = rng.standard_normal(16 * 256)
    for b in range(0, 16 * 256, 32):
        v[b:b + 32] *= [3e38 / 4, 1e-39, 1e-44, 1.0, 2.0 ** -126, 1e30][(b // 32) % 6]
    raw = v.astype(np.float32).tobytes()
    res = B.run(ts, g, {1: raw})
    for u in (2, 3):
        c, gg = res[u]
        assert c == gg, f"uid {u}: {sum(a != b for a, b in zip(c, gg))} bytes differ"


@pytest.mark.gpu
@pytest.mark.parametrize("case", [("FP8_E4M3", "FP8_E8M0", "FLOAT", [64, 256], [32], False),
                                  ("FP4_E2M1", "FP8_E8M0", "BFLOAT16", [8, 64, 32], [2, 16], False),
                                  ("INT8", "FLOAT", "HALF", [16, 64], [8], False),
                                  ("FP8_E5M2", "FLOAT", "FLOAT", [16, 64], [16], True)])
def test_block_scale_dequantize_bit_exact(B, case):
    xt, stp, yt, dims, bsv, neg = case
    ts, g = bsdq(xt, stp, yt, dims, bsv, neg)
    ins = {1: fill(ts[0]), 2: fill(ts[1])}
    if stp == "FLOAT":
        ins[2] = rng.integers(-6, 6, len(ins[2]) // 4).astype(np.float32).tobytes()
    res = B.run(ts, g, ins)
    c, gg = res[3]
    cf, gf = as_float(ts[2], c), as_float(ts[2], gg)
    same = (cf == gf) | (np.isnan(cf) & np.isnan(gf))
    assert same.all(), f"{int((~same).sum())} elements differ"


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("mode", ["NONE", "GATHER", "SCATTER"])
def test_moe_grouped_matmul(B, dt, mode):
    from ext_samples import moe
    from test_ext_host_emulation import _moe_inputs
    S, K, N, E, G, k = 300, 136, 200, 4, 8, 2
    ts, g = moe(dt, mode, S, K, N, E, G=G, top_k=k)
    ins = _moe_inputs(ts, mode, S, E, G, k)
    res = B.run(ts, g, ins)
    close(ts[3], res[4], 2e-5 if dt == "FLOAT" else 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["HALF", "BFLOAT16"])
def test_moe_grouped_matmul_k_contiguous_and_large(B, dt):
    """cuDNN's K-contiguous weights ([E, N, K] storage; the token-gradient GEMM of the backward
    pass reads the same transposed view) over several 128 x 256 tiles per group, with an empty
    group: the wgmma core's grouped tile scheduler."""
    from ext_samples import moe
    from gpu_testlib import bf16_bits
    S, K, N, E = 1100, 192, 520, 4
    ts, g = moe(dt, "NONE", S, K, N, E, w_k_contig=True)
    ins = {}
    for t in ts[:2]:
        v = rng.standard_normal(nbytes(t) // 2).astype(np.float32)
        ins[t.uid] = bf16_bits(v).tobytes() if dt == "BFLOAT16" else v.astype(np.float16).tobytes()
    ins[3] = np.array([5, 400, 400, 700], np.int32).tobytes()
    res = B.run(ts, g, ins)
    close(ts[3], res[4], 2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["FLOAT", "HALF", "BFLOAT16"])
@pytest.mark.parametrize("offs", [(0, 37, 37, 190), (0, 0, 0, 0)])
def test_moe_weight_gradient(B, dt, offs):
    """dweight[e] = token[rows of e]^T doutput[rows of e] (wgmma K-grouped scheduler for 16-bit
    on Hopper, a per-element kernel otherwise) vs the CPU engine; empty experts give zeros."""
    from ext_samples import moe_bwd
    S, K, N, E = 300, 136, 200, 4
    ts, g = moe_bwd(dt, S, K, N, E)
    ins = {1: fill(ts[0]), 2: fill(ts[1]), 3: np.array(offs, np.int32).tobytes()}
    res = B.run(ts, g, ins)
    close(ts[3], res[4], 2e-5 if dt == "FLOAT" else 2e-2)


@pytest.mark.gpu
def test_moe_weight_gradient_bad_offsets_nan(B):
    import cffi
    from ext_samples import moe_bwd
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, parse_graph
    ts, g = moe_bwd("HALF", 64, 32, 16, 2)
    ins = {1: fill(ts[0]), 2: fill(ts[1]), 3: np.array([0, 70], np.int32).tobytes()}
    gg = parse_graph(g)
    ptrs = {}
    for t in ts:
        p = B.rt.malloc(nbytes(t))
        ptrs[t.uid] = p
        if t.uid in ins:
            b = np.frombuffer(ins[t.uid], np.uint8)
            B.rt.memcpy_htod(p, b.ctypes.data, b.nbytes)
    ctx = B.gpu.create_execution_context(B.gcfg, gg)
    wsz = B.gpu.get_workspace_size_from_context(ctx)
    ws = B.rt.malloc(wsz) if wsz else 0
    B.gpu.execute(ctx, ws, DeviceBuffers(ptrs, ffi=cffi.FFI()))
    B.rt.stream_synchronize(B.stream)
    h = np.empty(nbytes(ts[3]), np.uint8)
    B.rt.memcpy_dtoh(h.ctypes.data, ptrs[4], h.nbytes)
    assert np.isnan(as_float(ts[3], h.tobytes())).all()


@pytest.mark.gpu
def test_moe_bad_offsets_give_nan_not_a_crash(B):
    from ext_samples import moe
    ts, g = moe("HALF", "NONE", 64, 32, 16, 2)
    ins = {1: fill(ts[0]), 2: fill(ts[1]), 3: np.array([5, 2], np.int32).tobytes()}
    # the CPU engine returns INVALID_VALUE here; the GPU engine marks the output with NaN
    import cffi
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, parse_graph
    gg = parse_graph(g)
    ptrs = {}
    for t in ts:
        p = B.rt.malloc(nbytes(t))
        ptrs[t.uid] = p
        if t.uid in ins:
            b = np.frombuffer(ins[t.uid], np.uint8)
            B.rt.memcpy_htod(p, b.ctypes.data, b.nbytes)
    ctx = B.gpu.create_execution_context(B.gcfg, gg)
    wsz = B.gpu.get_workspace_size_from_context(ctx)
    ws = B.rt.malloc(wsz) if wsz else 0
    B.gpu.execute(ctx, ws, DeviceBuffers(ptrs, ffi=cffi.FFI()))
    B.rt.stream_synchronize(B.stream)
    h = np.empty(nbytes(ts[3]), np.uint8)
    B.rt.memcpy_dtoh(h.ctypes.data, ptrs[4], h.nbytes)
    assert np.isnan(as_float(ts[3], h.tobytes())).all()
