"""Flash attention on the HIP engine at head sizes other than 64 / 128: D and Dv multiples of 8 up
to 256, Dv != D, GQA / MQA, causal / bottom-right / band / padding masks (the kernels compute on
tiles padded to a multiple of 64 columns; the padding loads as zeros and is never stored).

CI (no GPU): applicability accepts these sizes and declines others with a reason; every kernel
variant the GPU tests run compiles for sm_90a with NVRTC (the wgmma forward without spills).
GPU (`pytest -m gpu`): forward (wgmma kernel and the mma.sync kernel forced) and backward
against the CPU reference kernels in float64 on the same quantised inputs, and the dropout keep
mask bit for bit at a padded head size."""
from __future__ import annotations

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from gpu_testlib import assert_sdpa_close, nvrtc_or_skip, quantize, relerr
from test_attention import _lens, _params, bwd_graph, fwd_graph

rng = np.random.default_rng(2026)

# forward: every head size of the task, Dv != D both ways (Dv 192: the P V product split in two),
# GQA 4 / 2 / MQA, odd lengths over several 64 / 128-key tiles, BSHD (a row overrun would
# clobber the next head), masks of every kind
FWD = [
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=129, Skv=300, D=40, causal_mask=True),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=257, Skv=190, D=56, seq=True),
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=150, Skv=151, D=96, causal_mask_bottom_right=True,
         bshd=True),
    dict(dt="BFLOAT16", B=1, H=2, Hkv=2, Sq=200, Skv=261, D=160, bshd=True),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=131, Skv=300, D=192, Dv=128, seq=True,
         causal_mask=True),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=1, Sq=100, Skv=277, D=256, causal_mask=True),
    dict(dt="HALF", B=1, H=4, Hkv=2, Sq=99, Skv=133, D=128, Dv=64, left_bound=40,
         right_bound=9, bshd=True),
    dict(dt="BFLOAT16", B=1, H=4, Hkv=1, Sq=77, Skv=211, D=64, Dv=192, seq=True),
    dict(dt="HALF", B=1, H=2, Hkv=1, Sq=65, Skv=129, D=256, Dv=256, scale_mode="runtime",
         stats=False),
]
# the mma.sync forward (dropout graphs, non-Hopper devices) forced on a sample: zero fill, Q
# fragments from shared memory (D > 128), Dv != D
MMA_FWD = [1, 4, 5, 7]

# backward: NSPLIT 1 and 2 (dK / dQ / dV column slices), HDP != HDVP, GQA 4, padding masks
BWD = [
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=129, Skv=150, D=40, causal_mask=True),
    dict(dt="BFLOAT16", B=2, H=2, Hkv=2, Sq=200, Skv=131, D=96, seq=True),
    dict(dt="HALF", B=1, H=4, Hkv=2, Sq=150, Skv=190, D=160, causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=1, H=4, Hkv=1, Sq=130, Skv=100, D=192, Dv=128, causal_mask=True),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=111, Skv=300, D=256, seq=True),
    dict(dt="BFLOAT16", B=1, H=2, Hkv=1, Sq=140, Skv=140, D=128, Dv=64, left_bound=50,
         right_bound=10),
    dict(dt="HALF", B=1, H=2, Hkv=2, Sq=90, Skv=257, D=56, Dv=256),
]


def _bwd_cfg(c):
    return {k: v for k, v in c.items() if k not in ("bshd", "drop", "stats", "scale_mode")}


def _build(g, arch="sm_90"):
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    return build_program(parse_graph(g), arch=arch)


def _names(prog):
    return [st[2] for st in prog.steps if st[0] == "launch"]


# ------------------------------------------------------------------------------ CI (no GPU)
def test_head_sizes_applicable_and_declined_with_a_reason():
    from engine_plugins.hip_kernels.program import NotApplicable, build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    for D, Dv in ((8, 8), (40, 40), (56, 56), (96, 96), (160, 160), (192, 192), (256, 256),
                  (128, 64), (192, 128), (64, 256), (256, 8)):
        c = dict(dt="HALF", B=1, H=4, Hkv=1, Sq=33, Skv=70, D=D, Dv=Dv)
        for arch in (None, "sm_90"):
            prog = build_program(parse_graph(fwd_graph(**c)[1]), arch=arch)
            assert _names(prog) == (["hdn_attn_fwd_wg"] if arch else ["hdn_attn_fwd"])
        prog = build_program(parse_graph(bwd_graph(**c)[1]), arch="sm_90")
        wg = max(D, Dv) <= 128      # the wgmma backward's padded head sizes: 64, 128
        assert _names(prog) == ["hdn_attn_bwd_pre", "hdn_attn_bwd_wg" if wg else "hdn_attn_bwd",
                                "hdn_attn_bwd_dq"]
    for D, Dv, why in ((100, 100, "head dim D = 100"), (264, 264, "head dim D = 264"),
                       (64, 36, "head dim Dv = 36"), (64, 320, "head dim Dv = 320")):
        for g in (fwd_graph("HALF", 1, 2, 2, 33, 40, D, Dv=Dv)[1],
                  bwd_graph("HALF", 1, 2, 2, 33, 40, D, Dv=Dv)[1]):
            with pytest.raises(NotApplicable, match=why + ": the HIP engine takes multiples of 8 up to 256"):
                build_program(parse_graph(g), arch="sm_90")
    # AMD: the MFMA kernels keep D = Dv in {64, 128}
    for D, Dv in ((96, 96), (128, 64)):
        with pytest.raises(NotApplicable, match="AMD MFMA attention kernels take D = Dv in"):
            build_program(parse_graph(fwd_graph("HALF", 1, 2, 2, 33, 40, D, Dv=Dv)[1]),
                          arch="gfx942")
    assert _names(build_program(parse_graph(fwd_graph("HALF", 1, 2, 2, 33, 40, 128)[1]),
                                arch="gfx942")) == ["hdn_attn_fwd_mfma"]


def test_launch_shapes_of_wide_heads():
    """The wgmma forward takes 64-key tiles and 2 stages above 128 columns, within 227 KB of
    shared memory; the backward splits the dK / dQ / dV columns in two above 256 padded
    columns (D + Dv) and its dQ accumulator rows are the padded width."""
    from engine_plugins.hip_kernels.ops import sdpa
    for D, Dv, bn, st in ((40, 40, 128, 4), (128, 128, 128, 2), (128, 64, 128, 2),
                          (160, 160, 64, 2), (256, 256, 64, 2), (64, 192, 64, 2)):
        smem, s, b = sdpa.wg_config(D, Dv)
        assert (b, s) == (bn, st) and smem <= sdpa.SMEM_MAX, (D, Dv, smem)
    for D, Dv, n in ((64, 64, 1), (128, 128, 1), (192, 64, 1), (192, 128, 2), (256, 256, 2),
                     (56, 256, 2)):
        assert sdpa.bwd_split(D, Dv) == n
        assert sdpa.bwd_smem_bytes(D, Dv) <= sdpa.SMEM_MAX
    c = dict(dt="HALF", B=2, H=4, Hkv=2, Sq=100, Skv=130, D=160)
    p = _build(fwd_graph(**c)[1])
    step = p.steps[0]
    assert step[3] == (1, 4, 2) and step[6]["shmem"] == sdpa.wg_config(160, 160)[0]
    assert [a[5] for a in step[5][:3]] == [(64, 128, 1, 1), (64, 64, 1, 1), (64, 64, 1, 1)]
    assert [a[3][0] for a in step[5][:3]] == [160, 160, 160]      # innermost extent: D, not 192
    p = _build(bwd_graph(**c)[1])
    main = next(st for st in p.steps if st[0] == "launch" and st[2] == "hdn_attn_bwd")
    assert main[3] == (3 * 2, 2, 2)
    assert ("memset", p.steps[0][1], 2 * 4 * 100 * 192 * 4) == p.steps[0]


_compiler = nvrtc_or_skip


def programs(build):
    """(kind, program) of every graph the GPU tests below plan, built by ``build(graph bytes)``
    (also used by prewarm_attention.py)."""
    import os
    out = [("fwd_wg", build(fwd_graph(**c)[1])) for c in FWD]
    os.environ["HIPDNN_CABI_HIP_ATTN"] = "mma"
    try:
        out += [("fwd_mma", build(fwd_graph(**FWD[i])[1])) for i in MMA_FWD]
    finally:
        del os.environ["HIPDNN_CABI_HIP_ATTN"]
    out.append(("fwd_drop", build(fwd_graph("HALF", 2, 3, 3, 77, 56, 56, drop=0.35,
                                            stats=False)[1])))
    out += [("bwd", build(bwd_graph(**_bwd_cfg(c))[1])) for c in BWD]
    return out


def test_head_size_sources_compile_sm90a():
    """Every source the GPU tests below run compiles for sm_90a; the wgmma forward and backward
    without register spills."""
    from engine_plugins.hip_kernels import codegen
    c = _compiler()
    hdr = codegen.headers()
    seen = set()
    for name, prog in programs(_build):
        for st in prog.steps:
            if st[0] != "launch" or st[1] in seen:
                continue
            seen.add(st[1])
            wg = name == "fwd_wg" or st[2] == "hdn_attn_bwd_wg"
            opts = ("--ptxas-options=-v",) if wg else ()
            assert c.compile(st[1], f"{name}_{st[2]}.hip", opts, "sm_90a", hdr)
            if wg:
                assert " 0 bytes spill stores" in c.last_log, c.last_log
    n_bwd_wg = sum(max(c["D"], c.get("Dv") or c["D"]) <= 128 for c in BWD)   # + attention_bwd_wgmma.hip
    assert len(seen) == len(FWD) + len(MMA_FWD) + 1 + len(BWD) + n_bwd_wg


# ------------------------------------------------------------------------------------- GPU
@pytest.fixture(autouse=True)
def _nvidia_only(request):
    """The AMD MFMA attention kernels keep D = Dv in {64, 128}: the GPU tests here run on NVIDIA."""
    if request.node.get_closest_marker("gpu") is not None:
        from engine_plugins.hip_kernels.engine import device_arch
        if (device_arch() or "").startswith("gfx"):
            pytest.skip("AMD: the MFMA attention kernels take D = Dv in {64, 128} only")


@pytest.fixture(params=["auto", "mma"])
def fwd_path(request, monkeypatch):
    if request.param == "mma":
        monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN", "mma")
    return request.param


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(FWD)))
def test_forward_head_sizes_vs_cpu_reference(R, i, fwd_path):
    if fwd_path == "mma" and i not in MMA_FWD:
        pytest.skip("mma.sync forward: a sample of the configurations")
    c = FWD[i]
    dt, B, Sq, Skv, D = (c[k] for k in ("dt", "B", "Sq", "Skv", "D"))
    ts, g = fwd_graph(**c)
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    byuid = {t.uid: t for t in ts}
    lq = lkv = None
    if c.get("seq"):
        lq, lkv = _lens(B, Sq, Skv)
        ins[byuid[6]] = lq.reshape(B, 1, 1, 1)
        ins[byuid[7]] = lkv.reshape(B, 1, 1, 1)
    scalars = {10: 0.07} if c.get("scale_mode") == "runtime" else None
    outs = [ts[3]] + ([byuid[5]] if 5 in byuid else [])
    res = R.run(g, ins, outs, scalars=scalars)
    p = _params(c, D, lq, lkv, scale=float(np.float32(0.07)) if scalars else None)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert res[4].shape == O.shape
    assert_sdpa_close(res, O, st, dt)


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(BWD)))
def test_backward_head_sizes_vs_cpu_reference(R, i):
    c = _bwd_cfg(BWD[i])
    dt, B, Sq, Skv, D = (c[k] for k in ("dt", "B", "Sq", "Skv", "D"))
    ts, g = bwd_graph(**c)
    q, k, v, do = (quantize(rng.uniform(-1, 1, t.dims) * s, dt)
                   for t, s in zip((ts[0], ts[1], ts[2], ts[4]), (2, 2, 1, 1)))
    lq = lkv = None
    ins = {}
    if c.get("seq"):
        byuid = {t.uid: t for t in ts}
        lq, lkv = _lens(B, Sq, Skv)
        ins[byuid[7]] = lq.reshape(B, 1, 1, 1)
        ins[byuid[8]] = lkv.reshape(B, 1, 1, 1)
    p = _params(c, D, lq, lkv)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    O = quantize(O, dt)
    ins.update({ts[0]: q, ts[1]: k, ts[2]: v, ts[3]: O, ts[4]: do, ts[5]: st.astype(np.float32)})
    res = R.run(g, ins, ts[6:9])
    dq, dk, dv, _ = ksdpa.sdpa_bwd(q, k, v, O, do, st, p, np.float64)
    tol = 2e-2 if dt == "HALF" else 5e-2
    for uid, ref in ((11, dq), (12, dk), (13, dv)):
        assert res[uid].shape == ref.shape
        assert relerr(res[uid], ref) < tol, (uid, relerr(res[uid], ref))
