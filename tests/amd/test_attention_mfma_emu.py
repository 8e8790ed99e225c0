"""The MFMA flash-attention kernels (attention_fwd_mfma.hip, attention_bwd_mfma.hip) as the engine
emits them for gfx942, run under the wave64 host emulation (wave_emu.py) against the CPU
reference kernels (the oracle of the GPU tests), on the configurations of
tests/gpu/test_attention.py: fp16 / bf16, D 64 / 128, GQA, causal (both alignments), bands,
padding masks, runtime scale, Philox dropout (the keep mask bit for bit).  Needs clang 19 (the
check-amd toolchain); skipped without it."""
from __future__ import annotations

import math

import numpy as np
import pytest

import wave_emu
from engine_plugins.cpu_reference.kernels import philox as kphilox
from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from gpu_testlib import from_storage, quantize, relerr, to_storage
from test_attention import BWD_CONFIGS, CONFIGS, _lens, _params, bwd_graph, fwd_graph

pytestmark = pytest.mark.skipif(wave_emu.clang() is None, reason="clang 19 not installed (make check-amd installs it)")
rng = np.random.default_rng(31)


def _headers():
    import os
    from engine_plugins import hip_kernels
    kd = os.path.join(os.path.dirname(hip_kernels.__file__), "kernels")
    return {n: open(os.path.join(kd, n)).read() for n in os.listdir(kd) if n.endswith(".h")}


def _program(g):
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    return build_program(parse_graph(g), arch="gfx942", sms=304)


def _run(g, ins, outs, scalars=None):
    prog = _program(g)
    mem = wave_emu.Memory()
    bufs, hosts = {}, {}
    for t, v in ins.items():
        h = to_storage(t, v)
        p, view = mem.alloc(h.nbytes)
        view[:] = np.frombuffer(h.tobytes(), np.uint8)
        bufs[t.uid] = p
    for t in outs:
        h = to_storage(t, np.zeros(t.dims))
        p, view = mem.alloc(h.nbytes, 0xFF)        # NaN in every float type: unwritten shows
        bufs[t.uid], hosts[t.uid] = p, (h, view)
    wave_emu.run_program(prog, bufs, _headers(), scalars)
    res = {}
    for uid, (h, view) in hosts.items():
        h.view(np.uint8).reshape(-1)[:] = view
        res[uid] = from_storage(next(t for t in outs if t.uid == uid), h)
    return prog, res


# the GPU tests' forward configurations, sequence lengths halved where they are long (time)
FWD = [dict(c) for c in CONFIGS]


@pytest.mark.parametrize("i", range(len(FWD)))
def test_forward_mfma_vs_cpu_reference(i):
    c = FWD[i]
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = fwd_graph(**c)
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    byuid = {t.uid: t for t in ts}
    lq = lkv = None
    seed, off = 1234567, 3
    if c.get("seq"):
        lq, lkv = _lens(B, Sq, Skv)
        ins[byuid[6]] = lq.reshape(B, 1, 1, 1)
        ins[byuid[7]] = lkv.reshape(B, 1, 1, 1)
    if c.get("drop"):
        ins[byuid[8]] = np.array([seed]).reshape(1, 1, 1, 1)
        ins[byuid[9]] = np.array([off]).reshape(1, 1, 1, 1)
    scalars = {10: 0.3} if c.get("scale_mode") == "runtime" else None
    outs = [ts[3]] + ([byuid[5]] if 5 in byuid else [])
    prog, res = _run(g, ins, outs, scalars)
    assert [s[2] for s in prog.steps if s[0] == "launch"] == ["hdn_attn_fwd_mfma"]
    p = _params(c, D, lq, lkv, c.get("drop"), seed, off,
                scale=float(np.float32(0.3)) if scalars else None)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    tol = 1e-2 if dt == "HALF" else 3e-2
    assert relerr(res[4], O) < tol, relerr(res[4], O)
    if 5 in res:
        fin = np.isfinite(st)
        assert np.array_equal(np.isfinite(res[5]), fin)
        assert np.max(np.abs(res[5][fin] - st[fin])) < 2e-2


BWD = [BWD_CONFIGS[0], BWD_CONFIGS[1], BWD_CONFIGS[3], BWD_CONFIGS[-2], BWD_CONFIGS[-1]]


@pytest.mark.parametrize("i", range(len(BWD)))
def test_backward_mfma_vs_cpu_reference(i):
    c = {k: v for k, v in BWD[i].items() if k not in ("bshd", "seq", "drop", "stats", "scale_mode")}
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = bwd_graph(**c)
    q, k, v, do = (quantize(rng.uniform(-1, 1, t.dims) * s, dt)
                   for t, s in zip((ts[0], ts[1], ts[2], ts[4]), (2, 2, 1, 1)))
    p = _params(c, D)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    O = quantize(O, dt)
    prog, res = _run(g, {ts[0]: q, ts[1]: k, ts[2]: v, ts[3]: O, ts[4]: do,
                         ts[5]: st.astype(np.float32)}, ts[6:])
    assert [s[2] for s in prog.steps if s[0] == "launch"] == \
        ["hdn_attn_bwd_pre", "hdn_attn_bwd_mfma", "hdn_attn_bwd_dq"]
    dq, dk, dv, _ = ksdpa.sdpa_bwd(q, k, v, O, do, st, p, np.float64)
    tol = 2e-2 if dt == "HALF" else 5e-2
    for uid, ref in ((11, dq), (12, dk), (13, dv)):
        assert relerr(res[uid], ref) < tol, (uid, relerr(res[uid], ref))


def _bwd_drop_graph(dt, B, H, Hkv, Sq, Skv, D, drop, **attrs):
    from gpu_testlib import T, graph_bytes, node
    ts, _ = bwd_graph(dt, B, H, Hkv, Sq, Skv, D)
    ts = ts + [T(8, [1, 1, 1, 1], "INT64"), T(9, [1, 1, 1, 1], "INT64")]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "do_tensor_uid": 5, "stats_tensor_uid": 6, "dq_tensor_uid": 11, "dk_tensor_uid": 12,
         "dv_tensor_uid": 13, "attn_scale_value": 1 / math.sqrt(D), "seed_tensor_uid": 8,
         "offset_tensor_uid": 9, "dropout_probability": drop}
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaBackwardAttributes", a)])


@pytest.mark.parametrize("D", [64, 128])
def test_backward_dropout_mfma_vs_cpu_reference(D):
    dt, B, H, Hkv, Sq, Skv, drop = "HALF", 1, 2, 1, 70, 90, 0.25
    seed, off = 987654321, 17
    ts, g = _bwd_drop_graph(dt, B, H, Hkv, Sq, Skv, D, drop, causal_mask=True)
    q, k, v, do = (quantize(rng.uniform(-1, 1, t.dims) * s, dt)
                   for t, s in zip((ts[0], ts[1], ts[2], ts[4]), (2, 2, 1, 1)))
    p = _params({"causal_mask": True}, D, drop=drop, seed=seed, off=off)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    O = quantize(O, dt)
    byuid = {t.uid: t for t in ts}
    _, res = _run(g, {ts[0]: q, ts[1]: k, ts[2]: v, ts[3]: O, ts[4]: do,
                      ts[5]: st.astype(np.float32), byuid[8]: np.array([seed]).reshape(1, 1, 1, 1),
                      byuid[9]: np.array([off]).reshape(1, 1, 1, 1)}, [byuid[u] for u in (11, 12, 13)])
    dq, dk, dv, _ = ksdpa.sdpa_bwd(q, k, v, O, do, st, p, np.float64)
    for uid, ref in ((11, dq), (12, dk), (13, dv)):
        assert relerr(res[uid], ref) < 2e-2, (uid, relerr(res[uid], ref))


@pytest.mark.parametrize("D", [64, 128])
def test_dropout_mask_bit_exact_mfma(D):
    """V = identity (Skv = D): O = dropout(P) exactly shows which elements were kept."""
    B, H, Sq, p, seed, off = 2, 3, 45, 0.35, 0xDEADBEEF12345, 1001
    ts, g = fwd_graph("HALF", B, H, H, Sq, D, D, drop=p, stats=False)
    q = quantize(rng.uniform(-0.5, 0.5, ts[0].dims), "HALF")
    k = quantize(rng.uniform(-0.5, 0.5, ts[1].dims), "HALF")
    v = np.broadcast_to(np.eye(D), (B, H, D, D)).copy()
    byuid = {t.uid: t for t in ts}
    _, res = _run(g, {ts[0]: q, ts[1]: k, ts[2]: v, byuid[8]: np.array([seed]).reshape(1, 1, 1, 1),
                      byuid[9]: np.array([off]).reshape(1, 1, 1, 1)}, [ts[3]])
    kept = res[4] != 0
    want = np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, D, p) for h in range(H)])
                     for b in range(B)])
    assert np.array_equal(kept, want), int((kept != want).sum())
