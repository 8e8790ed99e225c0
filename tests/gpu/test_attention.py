"""Flash attention on the HIP engine.  CI (no GPU): the generated forward / backward sources of
many configurations compile for sm_90a with NVRTC.  GPU (`pytest -m gpu`): forward and backward
against the CPU reference kernels (the oracle) on the same quantised inputs, and the dropout
mask bit for bit against the CPU reference's Philox stream."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import philox as kphilox
from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from gpu_testlib import (T, assert_sdpa_close, distinct_launches, graph_bytes, node, nvrtc_or_skip, quantize,
                         relerr, sdpa_bwd_tensors, sdpa_optional)

rng = np.random.default_rng(77)


def fwd_graph(dt, B, H, Hkv, Sq, Skv, D, bshd=False, stats=True, seq=False, drop=None,
              scale_mode="attr", Dv=None, **attrs):
    """Dv: V / O head size (default D)."""
    Dv = D if Dv is None else Dv

    def st(b, h, s, d):
        return [s * h * d, d, h * d, 1] if bshd else None
    q = T(1, [B, H, Sq, D], dt, strides=st(B, H, Sq, D))
    k = T(2, [B, Hkv, Skv, D], dt, strides=st(B, Hkv, Skv, D))
    v = T(3, [B, Hkv, Skv, Dv], dt, strides=st(B, Hkv, Skv, Dv))
    o = T(4, [B, H, Sq, Dv], dt, strides=st(B, H, Sq, Dv))
    ts = [q, k, v, o]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4}
    sdpa_optional(ts, a, B, H, Sq, stats, seq, drop)
    if scale_mode == "runtime":
        ts.append(T(10, [1], "FLOAT", runtime=True))
        a.update(scale_tensor_uid=10)
    else:
        a.update(attn_scale_value=1 / math.sqrt(D))
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaAttributes", a)])


def bwd_graph(dt, B, H, Hkv, Sq, Skv, D, Dv=None, seq=False, **attrs):
    """Dv: V / O / dO head size (default D); seq: padding mask (lengths uids 7 / 8)."""
    ts, a = sdpa_bwd_tensors(dt, B, H, Hkv, Sq, Skv, D, Dv, seq)
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaBackwardAttributes", a)])


CONFIGS = [
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=100, Skv=77, D=64),
    dict(dt="BFLOAT16", B=1, H=8, Hkv=2, Sq=130, Skv=130, D=128, causal_mask=True),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=70, Skv=140, D=128, causal_mask_bottom_right=True,
         bshd=True),
    dict(dt="HALF", B=1, H=2, Hkv=2, Sq=96, Skv=96, D=64, left_bound=17, right_bound=5),
    dict(dt="BFLOAT16", B=3, H=2, Hkv=1, Sq=90, Skv=90, D=64, seq=True, causal_mask=True),
    dict(dt="HALF", B=1, H=2, Hkv=2, Sq=64, Skv=64, D=64, drop=0.2, stats=True),
    dict(dt="HALF", B=1, H=2, Hkv=1, Sq=65, Skv=64, D=128, scale_mode="runtime", stats=False),
]


# forward only, sized for the Hopper kernel's 128 x 128 tiles and its K / V ring: odd lengths
# over several tiles (ring wrap-around), GQA 8, bottom-right causal with Sq > Skv, padding masks
WG_CONFIGS = [
    dict(dt="HALF", B=1, H=8, Hkv=1, Sq=300, Skv=700, D=128),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=257, Skv=1100, D=64),
    dict(dt="HALF", B=1, H=8, Hkv=2, Sq=390, Skv=390, D=128, causal_mask=True),
    dict(dt="BFLOAT16", B=1, H=4, Hkv=1, Sq=260, Skv=150, D=128, causal_mask_bottom_right=True),
    dict(dt="HALF", B=3, H=2, Hkv=2, Sq=300, Skv=333, D=128, seq=True),
    dict(dt="HALF", B=3, H=4, Hkv=1, Sq=200, Skv=520, D=64, seq=True, causal_mask=True,
         bshd=True),
    dict(dt="BFLOAT16", B=1, H=2, Hkv=2, Sq=333, Skv=333, D=64, left_bound=100, right_bound=37),
    dict(dt="HALF", B=1, H=2, Hkv=1, Sq=129, Skv=255, D=128, scale_mode="runtime"),
]


def _lens(B, Sq, Skv):
    return (np.array([Sq, max(1, Sq * 45 // 100), 7][:B]),
            np.array([Skv, Skv * 7 // 10, 1][:B]))


_compiler = nvrtc_or_skip


def _programs():
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    for i, c in enumerate(CONFIGS):
        _, g = fwd_graph(**c)
        yield f"fwd{i}", build_program(parse_graph(g))
        cb = {k: v for k, v in c.items() if k not in ("bshd", "seq", "drop", "stats", "scale_mode")}
        _, g = bwd_graph(**cb)
        yield f"bwd{i}", build_program(parse_graph(g))


def test_attention_sources_compile_sm90a():
    from engine_plugins.hip_kernels import codegen
    c = _compiler()
    hdr = codegen.headers()
    launches = list(distinct_launches(_programs()))
    for name, st in launches:
        assert c.compile(st[1], f"{name}_{st[2]}.hip", (), "sm_90a", hdr)
    assert len(launches) >= 10


def test_not_applicable_on_the_hip_engine():
    from engine_plugins.hip_kernels.program import NotApplicable, build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    for kw in (dict(D=100), dict(D=264), dict(Dv=36), dict(dt="FLOAT")):
        c = dict(dt="HALF", B=1, H=2, Hkv=2, Sq=64, Skv=64, D=64)
        c.update(kw)
        _, g = fwd_graph(**c)
        with pytest.raises(NotApplicable):
            build_program(parse_graph(g))


def _params(c, D, lq=None, lkv=None, drop=None, seed=0, off=0, scale=None):
    p = ksdpa.SdpaParams(scale=scale if scale is not None else float(np.float32(1 / math.sqrt(D))))
    p.causal = bool(c.get("causal_mask"))
    p.causal_bottom_right = bool(c.get("causal_mask_bottom_right"))
    p.bottom_right = p.causal_bottom_right and not p.causal
    p.left_bound, p.right_bound = c.get("left_bound"), c.get("right_bound")
    if lq is not None:
        p.seq_len_q, p.seq_len_kv = lq, lkv
    if drop:
        p.dropout = ("philox", drop, seed, off)
    return p


def test_wgmma_forward_chosen_and_hgmma_sm90a(tmp_path):
    """With an sm_90 device the forward of every non-dropout graph runs on the wgmma kernel
    (dropout graphs stay on mma.sync); its sources compile for sm_90a without spills and their
    SASS holds HGMMA and the tensor copy engine's loads (UTMALDG), no mma.sync (HMMA)."""
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    from test_kernel_sources import _cuobjdump, _sass
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    seen = 0
    for i, cfg in enumerate(CONFIGS + WG_CONFIGS):
        _, g = fwd_graph(**cfg)
        prog = build_program(parse_graph(g), arch="sm_90")
        names = [st[2] for st in prog.steps if st[0] == "launch"]
        if cfg.get("drop"):
            assert names == ["hdn_attn_fwd"], names
            continue
        assert names == ["hdn_attn_fwd_wg"], names
        assert any("wgmma flash attention" in n for n in prog.notes)
        if i not in (1, 4, len(CONFIGS) + 1, len(CONFIGS) + 6):   # a sample: f16/bf16, D 64/128
            continue
        st = prog.steps[0]
        img = c.compile(st[1], f"attn{i}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
        assert " 0 bytes spill stores" in c.last_log, c.last_log
        seen += 1
        if exe is None:
            continue
        sass = _sass(exe, env, tmp_path, f"attn{i}", img)
        assert "HGMMA" in sass and "UTMALDG" in sass, i
        assert "HMMA" not in sass.replace("HGMMA", ""), i
    assert seen == 4
    # no sm_90: the mma.sync kernel; HIPDNN_CABI_HIP_ATTN=mma forces it on sm_90 too
    _, g = fwd_graph(**CONFIGS[0])
    assert [s[2] for s in build_program(parse_graph(g)).steps] == ["hdn_attn_fwd"]
    import os
    os.environ["HIPDNN_CABI_HIP_ATTN"] = "mma"
    try:
        assert [s[2] for s in build_program(parse_graph(g), arch="sm_90").steps] == ["hdn_attn_fwd"]
    finally:
        del os.environ["HIPDNN_CABI_HIP_ATTN"]


@pytest.fixture(params=["auto", "mma"])
def fwd_path(request, monkeypatch):
    """The forward kernel: auto (wgmma on the H200) or the mma.sync kernel forced."""
    if request.param == "mma":
        monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN", "mma")
    return request.param


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(CONFIGS) + len(WG_CONFIGS)))
def test_forward_vs_cpu_reference(R, i, fwd_path):
    c = (CONFIGS + WG_CONFIGS)[i]
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = fwd_graph(**c)
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    lq = lkv = None
    seed, off = 1234567, 3
    byuid = {t.uid: t for t in ts}
    if c.get("seq"):
        lq, lkv = _lens(B, Sq, Skv)
        ins[byuid[6]] = lq.reshape(B, 1, 1, 1)
        ins[byuid[7]] = lkv.reshape(B, 1, 1, 1)
    if c.get("drop"):
        ins[byuid[8]] = np.array([seed]).reshape(1, 1, 1, 1)
        ins[byuid[9]] = np.array([off]).reshape(1, 1, 1, 1)
    scalars = {10: 0.3} if c.get("scale_mode") == "runtime" else None
    outs = [ts[3]] + ([byuid[5]] if 5 in byuid else [])
    res = R.run(g, ins, outs, scalars=scalars)
    p = _params(c, D, lq, lkv, c.get("drop"), seed, off,
                scale=float(np.float32(0.3)) if scalars else None)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert_sdpa_close(res, O, st, dt)


# backward only: several query / key tiles per block (the D = 64 kernel's Q / dO double buffer),
# GQA 4 with bottom-right causal, a band at D = 128
BWD_CONFIGS = CONFIGS[:-2] + [
    dict(dt="HALF", B=1, H=4, Hkv=1, Sq=300, Skv=260, D=64, causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=1, H=2, Hkv=2, Sq=200, Skv=333, D=128, left_bound=90, right_bound=20),
]


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(BWD_CONFIGS)))
def test_backward_vs_cpu_reference(R, i):
    c = {k: v for k, v in BWD_CONFIGS[i].items() if k not in ("bshd", "seq", "drop", "stats",
                                                               "scale_mode")}
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = bwd_graph(**c)
    q, k, v, do = (quantize(rng.uniform(-1, 1, t.dims) * s, dt)
                   for t, s in zip((ts[0], ts[1], ts[2], ts[4]), (2, 2, 1, 1)))
    p = _params(c, D)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    O = quantize(O, dt)
    res = R.run(g, {ts[0]: q, ts[1]: k, ts[2]: v, ts[3]: O, ts[4]: do,
                    ts[5]: st.astype(np.float32)}, ts[6:])
    dq, dk, dv, _ = ksdpa.sdpa_bwd(q, k, v, O, do, st, p, np.float64)
    tol = 2e-2 if dt == "HALF" else 5e-2
    for uid, ref in ((11, dq), (12, dk), (13, dv)):
        assert relerr(res[uid], ref) < tol, (uid, relerr(res[uid], ref))


@pytest.mark.gpu
@pytest.mark.parametrize("D", [56, 64, 128])
def test_dropout_mask_bit_exact(R, D):
    """V = identity (Skv = D): O = dropout(P) exactly shows which elements the GPU kept (D = 56:
    tiles padded to 64)."""
    B, H, Sq, p, seed, off = 2, 3, 77, 0.35, 0xDEADBEEF12345, 1001
    ts, g = fwd_graph("HALF", B, H, H, Sq, D, D, drop=p, stats=False)
    q = quantize(rng.uniform(-0.5, 0.5, ts[0].dims), "HALF")
    k = quantize(rng.uniform(-0.5, 0.5, ts[1].dims), "HALF")
    v = np.broadcast_to(np.eye(D), (B, H, D, D)).copy()
    byuid = {t.uid: t for t in ts}
    res = R.run(g, {ts[0]: q, ts[1]: k, ts[2]: v, byuid[8]: np.array([seed]).reshape(1, 1, 1, 1),
                    byuid[9]: np.array([off]).reshape(1, 1, 1, 1)}, [ts[3]])
    kept = res[4] != 0
    want = np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, D, p) for h in range(H)])
                     for b in range(B)])
    assert np.array_equal(kept, want), int((kept != want).sum())
    assert abs(kept.mean() - (1 - p)) < 0.02
