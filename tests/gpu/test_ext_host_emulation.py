"""CI (no GPU): the issue-17 barrier-free GPU kernels (resample forward / backward, block-scale
quantize / dequantize) run on the host through host_emu and must match the CPU reference
engine - bit for bit for block scaling and max pooling."""
from __future__ import annotations

import types

import numpy as np
import pytest

import host_emu
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program
from ext_samples import bsdq, bsq, pool_bwd, pool_fwd
from hipdnn_cabi.plugin_sdk import parse_graph
from test_gpu_ext_ops import STORE, as_float, fill, nbytes

pytestmark = pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
# host stand-ins of the device intrinsics the kernels use beyond host_emu's shim
EXTRA = r"""
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
static inline float __double2float_ru(double d) { float f = (float)d; if ((double)f < d) f = nextafterf(f, INFINITY); return f; }
"""
HDR = dict(codegen.headers())
HDR["hdn_compat.h"] = EXTRA + HDR["hdn_compat.h"]
rng = np.random.default_rng(170)


def cpu_run(ts, g, ins):
    import cffi
    from engine_plugins.cpu_reference import create_plugin
    from engine_plugins.cpu_reference.engine import ENGINE_NAME
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, engine_id_of
    c = create_plugin().create_container()
    host = {t.uid: np.frombuffer(bytearray(ins.get(t.uid, b"\xee" * nbytes(t))), np.uint8) for t in ts}
    cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})
    ctx = c.create_execution_context(cfg, parse_graph(g))
    c.execute(ctx, 0, DeviceBuffers({u: a.ctypes.data for u, a in host.items()}, ffi=cffi.FFI()))
    return {u: a.tobytes() for u, a in host.items() if u not in ins}


def emu_run(ts, g, ins):
    prog = build_program(parse_graph(g))
    mem = host_emu.HostMem()
    ptr, raw = {}, {}
    for t in ts:
        p, r = mem.alloc(nbytes(t), 0xEE)
        if t.uid in ins:
            r[:] = np.frombuffer(ins[t.uid], np.uint8)
        ptr[t.uid], raw[t.uid] = p, r
    wsp, _ = mem.alloc(max(16, prog.ws_size))
    for st in prog.steps:
        assert st[0] == "launch"
        _, src, name, grid, block, args = st
        vals = [ptr[a[1]] if a[0] == "t" else wsp + a[1] for a in args]
        host_emu.run_kernel(src, name, grid, block, vals, HDR)
    return {u: raw[u].tobytes() for u in raw if u not in ins}


def both(ts, g, ins):
    return cpu_run(ts, g, ins), emu_run(ts, g, ins)


@pytest.mark.parametrize("case", [
    ("FLOAT", "FP8_E4M3", "FP8_E8M0", [4, 64], 32, None),
    ("BFLOAT16", "FP8_E5M2", "FP8_E8M0", [2, 96], 32, None),
    ("HALF", "FP4_E2M1", "FP8_E4M3", [4, 32], 16, None),
    ("FLOAT", "INT8", "FLOAT", [4, 16], 8, None),
    ("BFLOAT16", "FP8_E4M3_FNUZ", "HALF", [64, 4], 32, 0),
    ("HALF", "FP6_E3M2", "BFLOAT16", [2, 64], 32, None),
    ("FLOAT", "INT32", "FLOAT", [2, 32], 16, None),
])
def test_block_scale_quantize_emulated_bit_exact(case, monkeypatch):
    # the generic one-thread-per-block kernel (the lane-group kernel exchanges amax by warp
    # shuffles, which thread-by-thread emulation cannot run: it is checked on the GPU)
    monkeypatch.setenv("HIPDNN_CABI_HIP_BSQ_LANES", "0")
    xt, yt, stp, dims, bs, ax = case
    ts, g = bsq(xt, yt, stp, dims, bs, axis=ax)
    n = int(np.prod(dims))
    v = rng.standard_normal(n) * np.exp(rng.uniform(-14, 14, n))
    v[:bs] = 0.0
    v[-1] = np.nan
    v[n // 2] = np.inf
    v[5] = 2.5 * 2.0 ** -20      # ties
    f32 = v.astype(np.float32)
    from gpu_testlib import bf16_bits
    with np.errstate(over="ignore"):      # NaN/inf and huge inputs are deliberate
        raw = bf16_bits(f32).tobytes() if xt == "BFLOAT16" else f32.astype(STORE[xt]).tobytes()
    c, e = both(ts, g, {1: raw})
    for u in (2, 3):
        a, b = np.frombuffer(c[u], np.uint8), np.frombuffer(e[u], np.uint8)
        assert np.array_equal(a, b), (u, np.nonzero(a != b)[0][:8], a[a != b][:8], b[a != b][:8])


@pytest.mark.parametrize("case", [("FP8_E4M3", "FP8_E8M0", "FLOAT", [4, 64], [32], False),
                                  ("FP4_E2M1", "FP8_E8M0", "BFLOAT16", [2, 4, 32], [2, 16], False),
                                  ("INT8", "FLOAT", "HALF", [4, 32], [8], False),
                                  ("FP8_E5M2", "FLOAT", "FLOAT", [4, 32], [16], True)])
def test_block_scale_dequantize_emulated(case):
    xt, stp, yt, dims, bsv, neg = case
    ts, g = bsdq(xt, stp, yt, dims, bsv, neg)
    ins = {1: fill(ts[0]), 2: fill(ts[1])}
    if stp == "FLOAT":
        ins[2] = rng.integers(-6, 6, len(ins[2]) // 4).astype(np.float32).tobytes()
    c, e = both(ts, g, ins)
    cf, ef = as_float(ts[2], c[3]), as_float(ts[2], e[3])
    assert np.array_equal(cf, ef, equal_nan=True)


POOLS = [([1, 3, 7, 6], [3, 3], [2, 2], [1, 1], [1, 0], "MAXPOOL", "NEG_INF_PAD"),
         ([1, 3, 5, 6], [2, 3], [1, 2], [1, 1], [1, 1], "MAXPOOL", "ZERO_PAD"),
         ([1, 2, 4, 5, 4], [2, 2, 3], [2, 1, 2], [1, 0, 1], [0, 1, 1], "AVGPOOL_EXCLUDE_PADDING", None),
         ([2, 2, 5, 5], [3, 3], [2, 2], [1, 1], [1, 1], "AVGPOOL_INCLUDE_PADDING", "ZERO_PAD")]


@pytest.mark.parametrize("dt,lay", [("FLOAT", "nchw"), ("BFLOAT16", "nhwc")])
@pytest.mark.parametrize("pi", range(len(POOLS)))
def test_pool_emulated(dt, lay, pi):
    xd, win, st, pre, post, mode, pm = POOLS[pi]
    ts, g = pool_fwd(dt, lay, xd, win, st, pre, post, mode, pm)
    c, e = both(ts, g, {1: fill(ts[0])})
    for u in c:
        assert c[u] == e[u], f"forward uid {u} differs"
    ts, g = pool_bwd(dt, lay, xd, win, st, pre, post, mode, pm)
    ins = {1: fill(ts[0])}
    if mode == "MAXPOOL":
        plane = int(np.prod(xd[2:]))
        ins[3] = rng.integers(-1, plane, nbytes(ts[2]) // 4).astype(np.int32).tobytes()
    c, e = both(ts, g, ins)
    a, b = as_float(ts[1], c[2]), as_float(ts[1], e[2])
    assert np.allclose(a, b, rtol=1e-6, atol=1e-6), np.max(np.abs(a - b))


# ----------------------------------------------------------------------------- MoE
def _moe_inputs(ts, mode, S, E, G, top_k):
    from gpu_testlib import bf16_bits
    tok, w, off = ts[0], ts[1], ts[2]
    ins = {}
    for t in (tok, w):
        v = rng.standard_normal(int(np.prod(t.dims))).astype(np.float32)
        ins[t.uid] = bf16_bits(v).tobytes() if t.dtype == "BFLOAT16" else v.astype(STORE[t.dtype]).tobytes()
    rows = S * top_k if mode == "GATHER" else S
    cuts = np.sort(rng.integers(0, rows + 1, G - 1))
    o = np.concatenate([[min(3, int(cuts[0]) if len(cuts) else 0)], cuts]).astype(np.int32)
    o = np.maximum.accumulate(o)
    ins[3] = o.tobytes()
    if mode == "GATHER":
        ins[5] = rng.integers(0, S, rows).astype(np.int32).tobytes()
    if mode == "SCATTER":
        T_ = S // top_k
        pairs = rng.permutation([(s, k) for s in range(T_) for k in range(top_k)])
        ins[5] = pairs[:, 0].astype(np.int32).tobytes()
        ins[6] = pairs[:, 1].astype(np.int32).tobytes()
    return ins


@pytest.mark.parametrize("mode", ["NONE", "GATHER", "SCATTER"])
@pytest.mark.parametrize("dt", ["FLOAT", "BFLOAT16"])
def test_moe_gemm_prelude_emulated(mode, dt):
    """Routing prologue / epilogue index maths of the grouped GEMM (the one-block routing check
    uses barriers: its effect - flag and zero rows - is applied here in numpy)."""
    from ext_samples import moe
    import re
    S, K, N, E, G, k = 12, 16, 8, 3, 6, 2
    ts, g = moe(dt, mode, S, K, N, E, G=G, top_k=k)
    ins = _moe_inputs(ts, mode, S, E, G, k)
    cpu = cpu_run(ts, g, ins)
    prog = build_program(parse_graph(g), use_mma=True)
    mem = host_emu.HostMem()
    ptr, raw = {}, {}
    for t in ts:
        p, r = mem.alloc(nbytes(t), 0xEE)
        if t.uid in ins:
            r[:] = np.frombuffer(ins[t.uid], np.uint8)
        ptr[t.uid], raw[t.uid] = p, r
    wsp, wsraw = mem.alloc(max(16, prog.ws_size), 0)
    out = ts[3]
    cref = np.frombuffer(cpu[4], np.uint8)
    for st in prog.steps:
        if st[0] == "memset":
            continue
        _, src, name, grid, block, args = st
        vals = [ptr[a[1]] if a[0] == "t" else wsp + a[1] for a in args]
        if name.startswith("hdn_moe_route"):
            wsraw[args[1][1]:args[1][1] + 4] = np.frombuffer(np.int32(1).tobytes(), np.uint8)
            raw[4][:] = 0          # the CPU reference writes zeros to every unrouted row
            continue
        if name.startswith("hdn_gemm"):
            body = codegen.read_kernel("gemm_mma.hip" if "mma" in name else "gemm_simt.hip")
            prelude = src[:src.index(body)]
            d = {k_: int(v) for k_, v in re.findall(r"#define (G\w+|C_VEC) (\d+)", prelude)}
            host_emu.run_gemm_prelude(prelude, vals, HDR, False, d["GBATCH"], d["GM"], d["GN"],
                                      d["GK"], 1)
            continue
        host_emu.run_kernel(src, name, grid, block, vals, HDR)
    a, b = as_float(out, cref.tobytes()), as_float(out, raw[4].tobytes())
    tol = 1e-5 if dt == "FLOAT" else 1e-2
    assert np.allclose(a, b, rtol=tol, atol=tol * np.max(np.abs(a))), np.max(np.abs(a - b))


def test_e8m0_scale_from_bits_matches_the_double_quotient():
    """The lane-group quantizer's E8M0 scale comes from amax's exponent / mantissa bits
    (ops/block_scale._e8m0_exact); the reference rounds the double quotient amax / ymax up.  Both
    agree for every element type whose ymax has a short mantissa (INT32's does not: it keeps
    the double path)."""
    import math
    import struct
    from engine_plugins.hip_kernels.ops.block_scale import INTS, MINI, _e8m0_exact, ymax

    def ref(a, ym):
        q = float(a) / ym
        fu = np.float32(q)
        if float(fu) < q:
            fu = np.nextafter(fu, np.float32(np.inf))
        f = float(fu)
        if f <= 2.0 ** -127:
            return 0
        m, ex = math.frexp(f)
        return max(0, min(254, (ex - 1 if m == 0.5 else ex) + 127))
    for yt in list(MINI) + list(INTS):
        ym = ymax(yt)
        ex = _e8m0_exact(ym)
        if ex is None:
            assert yt == "INT32"
            continue
        ey, my = ex
        vals = np.abs(np.concatenate([
            (rng.standard_normal(3000) * np.exp(rng.uniform(-80, 80, 3000))).astype(np.float32),
            (np.float32(ym) * np.exp2(rng.integers(-135, 110, 300)).astype(np.float32)),
            np.array([0, 1e-45, 1e-40, 3.4e38, 2.0 ** -126], np.float32)]))
        for a in vals[np.isfinite(vals)]:
            au = struct.unpack("<I", struct.pack("<f", float(a)))[0]
            pe = (au >> 23) - ey + (1 if (au & 0x7fffff) > my else 0)
            pe = 0 if au < 0x00800000 else max(0, min(254, pe))
            assert pe == ref(a, ym), (yt, float(a))
