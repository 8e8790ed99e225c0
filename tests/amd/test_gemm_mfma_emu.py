"""The GEMM-core programs the engine emits for gfx942 - matmul, convolution forward (with a fused
bias + ReLU epilogue), backward data, backward filter, split-K, and the MoE grouped matmul - run
under the wave64 host emulation (wave_emu.py: gemm_mfma.hip's LDS tiles, barriers and MFMA
fragments) against the CPU reference engine on the same input bytes.  Needs clang 19;
skipped without it."""
from __future__ import annotations

import cffi
import numpy as np
import pytest

import wave_emu
from gpu_testlib import sample_graphs

pytestmark = pytest.mark.skipif(wave_emu.clang() is None, reason="clang 19 not installed (make check-amd installs it)")
rng = np.random.default_rng(5)
STORE = {"FLOAT": np.float32, "HALF": np.float16, "BFLOAT16": np.uint16, "INT32": np.int32}


def _dt(t):
    from engine_plugins.hip_kernels.codegen import dtype_name
    return dtype_name(t.dtype)


def _nbytes(t):
    span = 1 + sum((int(d) - 1) * int(s) for d, s in zip(t.dims, t.strides))
    return span * np.dtype(STORE.get(_dt(t), np.uint8)).itemsize


def _floats(t, raw):
    a = np.frombuffer(raw, STORE[_dt(t)])
    if _dt(t) == "BFLOAT16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def _fill(t):
    from gpu_testlib import bf16_bits
    n = _nbytes(t) // np.dtype(STORE[_dt(t)]).itemsize
    v = rng.standard_normal(n).astype(np.float32)
    return bf16_bits(v).tobytes() if _dt(t) == "BFLOAT16" else v.astype(STORE[_dt(t)]).tobytes()


def _headers():
    import os
    from engine_plugins import hip_kernels
    kd = os.path.join(os.path.dirname(hip_kernels.__file__), "kernels")
    return {n: open(os.path.join(kd, n)).read() for n in os.listdir(kd) if n.endswith(".h")}


def run_both(gbytes, ins=None):
    """The graph on the CPU reference engine and, as the engine emits it for gfx942, under the
    wave64 emulation: {uid: (cpu bytes, emulated bytes)} of its outputs, and the program."""
    import types
    from engine_plugins.cpu_reference import create_plugin
    from engine_plugins.cpu_reference.engine import ENGINE_NAME
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, engine_id_of, parse_graph
    g = parse_graph(gbytes)
    written = {u for n in g.nodes for u in _outs(n, g)}
    ts = {u: t for u, t in g.tensors.items() if not t.virtual and t.value is None}
    ins = dict(ins or {})
    for u, t in ts.items():
        if u not in written and u not in ins:
            ins[u] = _fill(t)
    cpu = create_plugin().create_container()
    cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})
    host = {u: np.frombuffer(bytearray(ins[u] if u in ins else b"\xee" * _nbytes(t)), np.uint8)
            for u, t in ts.items()}
    ctx = cpu.create_execution_context(cfg, g)
    cpu.execute(ctx, 0, DeviceBuffers({u: a.ctypes.data for u, a in host.items()}, ffi=cffi.FFI()))
    prog = build_program(g, arch="gfx942", sms=304)
    mem = wave_emu.Memory()
    bufs, views = {}, {}
    for u, t in ts.items():
        p, view = mem.alloc(_nbytes(t), 0xEE)
        if u in ins:
            view[:] = np.frombuffer(ins[u], np.uint8)
        bufs[u], views[u] = p, view
    wave_emu.run_program(prog, bufs, _headers())
    return prog, {u: (host[u].tobytes(), views[u].tobytes()) for u in written if u in ts}


def _outs(node, g):
    from engine_plugins.hip_kernels.program import io_uids
    return io_uids(node, g)[1]


def close(t, pair, tol):
    c, e = _floats(t, pair[0]), _floats(t, pair[1])
    assert np.all(np.isfinite(e)), "non-finite / unwritten emulated output"
    err = np.max(np.abs(c - e)) / max(1e-6, np.max(np.abs(c)))
    assert err < tol, f"rel err {err:.3g}"


CASES = ["matmul_HALF_nchw", "matmul_BFLOAT16_t", "conv_HALF_nhwc", "conv_BFLOAT16_nchw",
         "conv_bias_relu_HALF_nhwc", "conv_bwd_data_BFLOAT16_nhwc", "conv_bwd_filter_HALF_nchw",
         "conv_splitk_BFLOAT16_nhwc"]


@pytest.mark.parametrize("name", CASES)
def test_gemm_core_programs_mfma(name):
    from hipdnn_cabi.plugin_sdk import parse_graph
    g = dict(sample_graphs())[name]
    prog, res = run_both(g)
    names = [s[2] for s in prog.steps if s[0] == "launch"]
    assert "hdn_gemm_mfma" in names, names
    pg = parse_graph(g)
    for u, pair in res.items():
        close(pg.tensors[u], pair, 4e-3 if "HALF" in name else 2e-2)


@pytest.mark.parametrize("dt,mode", [("HALF", "NONE"), ("BFLOAT16", "GATHER"), ("HALF", "SCATTER")])
def test_moe_grouped_matmul_mfma(dt, mode):
    from ext_samples import moe
    from hipdnn_cabi.plugin_sdk import parse_graph
    from test_ext_host_emulation import _moe_inputs
    S, K, N, E, G, k = 150, 64, 40, 4, 8, 2
    ts, g = moe(dt, mode, S, K, N, E, G=G, top_k=k)
    prog, res = run_both(g, _moe_inputs(ts, mode, S, E, G, k))
    src = [s[1] for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_mfma"]
    assert src and "hdn_moe_tile_active" in src[0]
    close(parse_graph(g).tensors[4], res[4], 2e-2)
