"""The Hopper flash-attention backward (kernels/attention_bwd_wgmma.hip).  CI (no GPU): which
graphs the planner puts on it (sm_90, head sizes padded to 64 / 128, the
``HIPDNN_CABI_HIP_ATTN_BWD`` knob), its sources compile for sm_90a without spills into HGMMA /
UTMALDG code, and the index arithmetic of its shared-memory dSᵀ / dQ staging tiles.  GPU
(`pytest -m gpu`, sm_90 only): dq / dk / dv against the CPU reference (float64) on the same
quantised inputs - full, causal, bottom-right causal, padding, band, dropout, GQA 2 / 4, fp16 /
bf16, D 64 / 96 / 128 - with the wgmma kernel checked to be the one planned."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from engine_plugins.hip_kernels.ops import sdpa as hsdpa
from gpu_testlib import T, graph_bytes, node, quantize, relerr
from test_attention import _compiler, _lens, _params, bwd_graph

rng = np.random.default_rng(2027)
NOTE = "wgmma flash attention backward"

# B2 H4, S 128 / 197 / 512, D 64 / 128 (96: a padded head), the masks, dropout, GQA 2 / 4
CASES = [
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=128, Skv=128, D=64),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=197, Skv=197, D=128),
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=197, Skv=197, D=128, causal_mask=True),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=1, Sq=512, Skv=512, D=64, causal_mask=True),
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=512, Skv=512, D=128, left_bound=100, right_bound=37),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=128, Skv=197, D=64, causal_mask_bottom_right=True),
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=197, Skv=197, D=128, seq=True),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=197, Skv=512, D=64, seq=True, causal_mask=True),
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=197, Skv=197, D=64, drop=0.2),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=1, Sq=128, Skv=128, D=128, drop=0.3, causal_mask=True),
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=197, Skv=197, D=96),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=128, Skv=128, D=64, Dv=128),
]


def graph(c):
    """The backward graph of one case (seed / offset uids 9 / 10 with dropout)."""
    kw = {k: v for k, v in c.items() if k != "drop"}
    ts, g = bwd_graph(**kw)
    if not c.get("drop"):
        return ts, g
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "do_tensor_uid": 5, "stats_tensor_uid": 6, "dq_tensor_uid": 11, "dk_tensor_uid": 12,
         "dv_tensor_uid": 13, "attn_scale_value": 1 / math.sqrt(c["D"]),
         "seed_tensor_uid": 9, "offset_tensor_uid": 10, "dropout_probability": c["drop"]}
    a.update({k: v for k, v in c.items() if k.endswith("_mask") or k.endswith("_bound")})
    ts = ts + [T(9, [1, 1, 1, 1], "INT64"), T(10, [1, 1, 1, 1], "INT64")]
    return ts, graph_bytes(ts, [node("SdpaBackwardAttributes", a)])


def _prog(c, arch="sm_90"):
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    return build_program(parse_graph(graph(c)[1]), arch=arch)


def test_selection(monkeypatch):
    """sm_90 + head sizes padded to 64 / 128: the wgmma main kernel between attention_bwd.hip's
    pre / dq kernels (HIPDNN_CABI_HIP_ATTN_BWD unset or auto: the default); D = 256, no sm_90
    or the knob mma: the mma.sync kernel."""
    monkeypatch.delenv("HIPDNN_CABI_HIP_ATTN_BWD", raising=False)
    names = [s[2] for s in _prog(CASES[0]).steps if s[0] == "launch"]
    assert names == ["hdn_attn_bwd_pre", "hdn_attn_bwd_wg", "hdn_attn_bwd_dq"], names
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "auto")
    for c in CASES:
        prog = _prog(c)
        names = [s[2] for s in prog.steps if s[0] == "launch"]
        assert names == ["hdn_attn_bwd_pre", "hdn_attn_bwd_wg", "hdn_attn_bwd_dq"], (c, names)
        assert any(NOTE in n for n in prog.notes)
        st = next(s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_attn_bwd_wg")
        assert st[4] == (256, 1, 1) and st[6]["arch"] == "sm_90a"
        assert st[6]["shmem"] <= hsdpa.SMEM_MAX
        assert st[3] == (-(-c["Skv"] // 128), c["Hkv"], c["B"])
    old = ["hdn_attn_bwd_pre", "hdn_attn_bwd", "hdn_attn_bwd_dq"]
    c = CASES[1]
    assert [s[2] for s in _prog(c, None).steps if s[0] == "launch"] == old
    assert [s[2] for s in _prog(dict(c, D=256), "sm_90").steps if s[0] == "launch"] == old
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "mma")
    prog = _prog(c)
    assert [s[2] for s in prog.steps if s[0] == "launch"] == old
    assert not any(NOTE in n for n in prog.notes)
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "wgmma")
    assert any(NOTE in n for n in _prog(c).notes)


def test_pre_and_dq_kernels_shared_with_the_mma_path(monkeypatch):
    """The Dsum / dQ kernels come from the very source the mma.sync path launches."""
    c = CASES[2]
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "mma")
    ref = [s for s in _prog(c).steps if s[0] == "launch" and s[2] != "hdn_attn_bwd"]
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "auto")
    got = [s for s in _prog(c).steps if s[0] == "launch" and s[2] != "hdn_attn_bwd_wg"]
    assert got == ref


def test_smem_config():
    for D, Dv, st in ((64, 64, 4), (128, 128, 2), (96, 128, 2), (64, 128, 4), (128, 64, 4)):
        smem, s = hsdpa.bwd_wg_config(D, Dv)
        assert s == st and smem <= hsdpa.SMEM_MAX, (D, Dv, smem, s)
    smem, s = hsdpa.bwd_wg_config(64, 64, 128)
    assert s == 2 and smem <= hsdpa.SMEM_MAX, smem


def test_query_tile_knob(monkeypatch):
    """128-query tiles where D and Dv pad to 64 (the default, and HIPDNN_CABI_HIP_ATTN_BWD_BM=128:
    tensor-map boxes of 128 Q / dO rows, BW_BM in the source, two ring stages); wider heads keep
    64-query tiles, and every head with the knob at 64; the knob is part of the plan cache key."""
    from engine_plugins.hip_kernels.engine import gemm_knobs
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "auto")
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_BM", "64")
    assert hsdpa.bwd_wg_bm(64, 64) == 64 and "64" in gemm_knobs()
    base = {i: _prog(CASES[i]) for i in (0, 1)}
    monkeypatch.delenv("HIPDNN_CABI_HIP_ATTN_BWD_BM")
    assert hsdpa.bwd_wg_bm(64, 64) == 128
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_BM", "128")
    assert "128" in gemm_knobs()
    assert (hsdpa.bwd_wg_bm(64, 64), hsdpa.bwd_wg_bm(40, 64), hsdpa.bwd_wg_bm(64, 128),
            hsdpa.bwd_wg_bm(128, 128)) == (128, 128, 64, 64)
    for i in range(len(CASES)):
        c = CASES[i]
        prog = _prog(c)
        st = next(s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_attn_bwd_wg")
        big = -(-c["D"] // 64) == -(-c.get("Dv", c["D"]) // 64) == 1
        assert any(f"{128 if big else 64}-query tiles" in n for n in prog.notes), (c, prog.notes)
        assert ("#define BW_BM 128" in st[1]) == big
        if big:
            assert "#define BW_ST 2" in st[1] and st[6]["shmem"] == hsdpa.bwd_wg_config(64, 64, 128)[0]
            maps = [a for a in st[5] if isinstance(a, tuple) and a[0] == "tmap"]
            assert [m[5][1] for m in maps] == [128, 128, 128, 128], maps     # Q, K, V, dO boxes
    # heads wider than 64: the very program of the default
    assert _prog(CASES[1]).steps == base[1].steps


def test_sched_knob(monkeypatch):
    """HIPDNN_CABI_HIP_ATTN_BWD_SCHED=0 (and unset: the default; the overlapped order measured
    2-3 % slower on an H100) defines BW_SCHED 0 (the earlier issue order); 1: the kernel's own BW_SCHED 1; part of the
    cache key."""
    from engine_plugins.hip_kernels.engine import gemm_knobs
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "auto")
    monkeypatch.delenv("HIPDNN_CABI_HIP_ATTN_BWD_SCHED", raising=False)
    src_unset = next(s for s in _prog(CASES[1]).steps if s[0] == "launch" and s[2] == "hdn_attn_bwd_wg")[1]
    assert "#define BW_SCHED 0" in src_unset
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_SCHED", "1")
    src = next(s for s in _prog(CASES[1]).steps if s[0] == "launch" and s[2] == "hdn_attn_bwd_wg")[1]
    assert "#define BW_SCHED 0" not in src and "#define BW_SCHED 1" in src
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_SCHED", "0")
    assert "0" in gemm_knobs()
    src0 = next(s for s in _prog(CASES[1]).steps if s[0] == "launch" and s[2] == "hdn_attn_bwd_wg")[1]
    assert src0.replace("#define BW_SCHED 0\n", "", 1) == src
    # 128-query tiles: always the new order (the earlier one spills there with dropout)
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_BM", "128")
    src1 = next(s for s in _prog(CASES[8]).steps if s[0] == "launch" and s[2] == "hdn_attn_bwd_wg")[1]
    assert "#define BW_BM 128" in src1 and "#define BW_SCHED 0" not in src1


def test_staging_index_maps():
    """The register -> shared-memory maps of the kernel, replayed on the host: the dSᵀ stores
    (sa[ks][2 hh + rr] of thread (warpgroup, warp w4, lane g / t4)) fill every (key, query) of
    the 128 x 64 tile once, at the 128-byte-swizzled address the copy engine / wgmma use
    (16-byte chunk c of row R at chunk c ^ (R & 7)), and the fp32 dQ staging stores cover
    64 x 64 once, inside the padded rows."""
    seen = {}
    for wgc in range(2):
        for w4 in range(4):
            for lane in range(32):
                g, t4 = lane >> 2, lane & 3
                rk = 64 * wgc + 16 * w4 + g
                for ks in range(4):
                    for hh in range(2):
                        for rr in range(2):
                            addr = (rk + 8 * rr) * 128 + (((2 * ks + hh) ^ g) << 4) + 4 * t4
                            # the accumulator element of sa[ks][2 hh + rr]: dp[8 ks + 2 q], q = 2 hh + rr
                            q = 2 * hh + rr
                            idx = 8 * ks + 2 * q           # = 4 j + e, j = 8-column group, e < 4
                            j, e = idx // 4, idx % 4
                            key = rk + 8 * (e >> 1)
                            query = 8 * j + 2 * t4 + (e & 1)
                            R, byte = addr // 128, addr % 128
                            chunk = (byte >> 4) ^ (R & 7)
                            assert R == key and chunk * 8 + (byte & 15) // 2 == query
                            assert (key, query) not in seen
                            seen[(key, query)] = addr
    assert len(seen) == 128 * 64 // 2      # pairs: each 32-bit store holds queries q, q + 1
    assert len(set(seen.values())) == len(seen)
    cells = set()
    for w4 in range(4):
        for lane in range(32):
            g, t4 = lane >> 2, lane & 3
            for j in range(8):
                for rr in range(2):
                    for c in range(2):
                        row, col = 16 * w4 + g + 8 * rr, 8 * j + 2 * t4 + c
                        cells.add(row * 72 + col)
                        assert col < 64
    assert len(cells) == 64 * 64


def test_sources_compile_sm90a_hgmma(tmp_path):
    """A sample of the configurations: NVRTC sm_90a, no spills, HGMMA + UTMALDG, no mma.sync."""
    from engine_plugins.hip_kernels import codegen
    from test_kernel_sources import _cuobjdump, _sass
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    for i, bm, late in ((1, "64", "1"), (3, "64", "1"), (8, "64", "1"), (10, "64", "1"), (3, "128", "1"),
                        (5, "128", "1"), (8, "128", "1"), (9, "64", "0"), (5, "64", "0")):
        os.environ["HIPDNN_CABI_HIP_ATTN_BWD_BM"] = bm
        os.environ["HIPDNN_CABI_HIP_ATTN_BWD_SCHED"] = late
        try:
            st = next(s for s in _prog(CASES[i]).steps if s[0] == "launch" and s[2] == "hdn_attn_bwd_wg")
        finally:
            os.environ.pop("HIPDNN_CABI_HIP_ATTN_BWD_BM")
            os.environ.pop("HIPDNN_CABI_HIP_ATTN_BWD_SCHED")
        assert ("#define BW_BM 128" in st[1]) == (bm == "128")
        img = c.compile(st[1], f"bwdwg{i}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
        assert " 0 bytes spill stores" in c.last_log, c.last_log
        if exe is None:
            continue
        sass = _sass(exe, env, tmp_path, f"bwdwg{i}", img)
        assert "HGMMA" in sass and "UTMALDG" in sass, i
        assert "HMMA" not in sass.replace("HGMMA", ""), i


def test_ragged_128_query_tiles_compile_sm90a(monkeypatch):
    """Ragged D 64 backward graphs on 128-query tiles (both varlen knobs on): 128-row Q / dO
    templates for the per-batch maps, NVRTC sm_90a without spills."""
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    from test_attention_paged_ragged import RAGGED_BWD, ragged_bwd_graph
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "auto")
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", "auto")
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_BM", "128")
    c = _compiler()
    cases = [x for x in RAGGED_BWD if x["D"] == 64]
    assert cases
    for i, case in enumerate(cases):
        cc = {k: v for k, v in case.items() if k not in ("lq", "lkv")}
        prog = build_program(parse_graph(ragged_bwd_graph(**cc)[1]), arch="sm_90")
        main = next(st for st in prog.steps if st[0] == "launch" and st[2] == "hdn_attn_bwd_wg")
        assert "#define BW_BM 128" in main[1]
        tm = [a for a in main[5] if isinstance(a, tuple) and a[0] == "tmap"]
        assert [t[5][1] for t in tm] == [128, 128, 128, 128], tm
        if c is not None:
            c.compile(main[1], f"ragged_bwd128_{i}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
            assert " 0 bytes spill stores" in c.last_log, c.last_log


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(CASES)))
def test_backward_wgmma_vs_cpu_reference(R, i, monkeypatch):
    _check_vs_cpu_reference(R, CASES[i], monkeypatch)


@pytest.mark.gpu
@pytest.mark.parametrize("i", [i for i, c in enumerate(CASES) if c["D"] <= 64 and c.get("Dv", 64) <= 64])
def test_backward_wgmma_128_query_tiles_vs_cpu_reference(R, i, monkeypatch):
    """The D 64 cases on 128-query tiles (HIPDNN_CABI_HIP_ATTN_BWD_BM=128)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_BM", "128")
    _check_vs_cpu_reference(R, CASES[i], monkeypatch, "128-query tiles")


@pytest.mark.gpu
@pytest.mark.parametrize("i", [1, 2, 9, 11])
def test_backward_wgmma_sched0_vs_cpu_reference(R, i, monkeypatch):
    """A sample on the earlier issue order (HIPDNN_CABI_HIP_ATTN_BWD_SCHED=0)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD_SCHED", "0")
    _check_vs_cpu_reference(R, CASES[i], monkeypatch)


def _check_vs_cpu_reference(R, c, monkeypatch, note=NOTE):
    from engine_plugins.hip_kernels.engine import analyse, device_arch
    from hipdnn_cabi.plugin_sdk import parse_graph
    if not (device_arch() or "").startswith("sm_9"):
        pytest.skip("the wgmma backward needs an sm_90 device")
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "wgmma")
    dt, B, H, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Sq", "Skv", "D"))
    ts, g = graph(c)
    a = analyse(parse_graph(g))
    assert a.ok and any(note in n for n in a.program.notes), (a.reason, a.program and a.program.notes)
    byuid = {t.uid: t for t in ts}
    q, k, v, do = (quantize(rng.uniform(-1, 1, byuid[u].dims) * s, dt)
                   for u, s in ((1, 2), (2, 2), (3, 1), (5, 1)))
    lq = lkv = None
    seed, off = 987654321, 17
    ins = {}
    if c.get("seq"):
        lq, lkv = _lens(B, Sq, Skv)
        ins[byuid[7]] = lq.reshape(B, 1, 1, 1)
        ins[byuid[8]] = lkv.reshape(B, 1, 1, 1)
    if c.get("drop"):
        ins[byuid[9]] = np.array([seed]).reshape(1, 1, 1, 1)
        ins[byuid[10]] = np.array([off]).reshape(1, 1, 1, 1)
    p = _params(c, D, lq, lkv, c.get("drop"), seed, off)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    O = quantize(np.nan_to_num(O), dt)
    ins.update({byuid[1]: q, byuid[2]: k, byuid[3]: v, byuid[4]: O, byuid[5]: do,
                byuid[6]: st.astype(np.float32)})
    res = R.run(g, ins, [byuid[11], byuid[12], byuid[13]])
    dq, dk, dv, _ = ksdpa.sdpa_bwd(q, k, v, O, do, st.astype(np.float32).astype(np.float64), p,
                                   np.float64)
    tol = 2e-2 if dt == "HALF" else 5e-2
    for uid, ref in ((11, dq), (12, dk), (13, dv)):
        assert np.all(np.isfinite(res[uid])), (uid, _where(res[uid], ref))
        assert relerr(res[uid], ref) < tol, (uid, relerr(res[uid], ref), _where(res[uid], ref))


def _where(got, ref):
    """Where a mismatch sits: max |error| / max |ref| per 32 rows x 32 columns of [b 0, h 0]."""
    d = np.nan_to_num(np.abs(got - ref)[0, 0], nan=np.inf) / max(1e-30, float(np.abs(ref).max()))
    nr, nc = -(-d.shape[0] // 32), -(-d.shape[1] // 32)
    return np.array([[d[32 * i:32 * i + 32, 32 * j:32 * j + 32].max() for j in range(nc)]
                     for i in range(nr)]).round(3).tolist()


def _emu_forward_model_check(E, r):
    """The model against the proven forward (attention_fwd_wgmma.hip issue_s / issue_pv at
    HDP = HDVP = 128, 128-key tiles): S = Q Kᵀ and O = P V for warpgroup 1's 64 rows."""
    Q, K, V = (r.standard_normal((128, 128)) for _ in range(3))
    sm = E.Smem(3 * 32768)
    sQ, sK, sV = 0, 32768, 65536
    for a in range(2):
        sm.tma_load(sQ + a * 16384, Q, 0, 64 * a, 128)
        sm.tma_load(sK + a * 16384, K, 0, 64 * a, 128)
        sm.tma_load(sV + a * 16384, V, 0, 64 * a, 128)
    qa = sQ + 1 * 8192
    S = np.zeros((64, 128))
    for kk in range(8):
        off = (kk & 3) * 32
        S = E.wgmma(S, sm.operand(E.desc(qa + (kk >> 2) * 16384 + off, 16, 1024), 64, False),
                    sm.operand(E.desc(sK + (kk >> 2) * 16384 + off, 16, 1024), 128, False))
    assert np.allclose(S, Q[64:] @ K.T)
    s = E.to_acc(S)
    O = np.zeros((64, 128))
    for ks in range(8):
        O = E.wgmma(O, E.pack_a(s, ks), sm.operand(E.desc(sV + ks * 2048, 16384, 1024), 128, True))
    assert np.allclose(O, S @ V)


def test_emulated_visit():
    """One visit of attention_bwd_wgmma.hip on the host model (wgmma_emu.py, first checked
    against the proven forward kernel's descriptors): every shared-memory offset, descriptor,
    fragment and the dSᵀ store formula as the kernel writes them, at HDP = HDVP = 128 and
    64 / 64 (the warpgroups' dQ turns); dV, dK and dQ against the matrix formulas."""
    import wgmma_emu as E
    r = np.random.default_rng(3)
    _emu_forward_model_check(E, r)
    for HD, HDV in ((128, 128), (64, 64), (96, 128)):
        HDP, HDVP = -(-HD // 64) * 64, -(-HDV // 64) * 64
        NK, NV = HDP // 64, HDVP // 64
        Q, K = r.standard_normal((64, HD)), r.standard_normal((128, HD))
        V, dO = r.standard_normal((128, HDV)), r.standard_normal((64, HDV))
        lse, dsum = r.standard_normal(64), r.standard_normal(64)
        KATOM, QATOM = 16384, 8192
        sK = 0
        sV = sK + NK * KATOM
        sQ = sV + NV * KATOM
        sG = sQ + NK * QATOM
        sDS = sG + NV * QATOM
        sm = E.Smem(sDS + 2 * 16384)
        for a in range(NK):
            sm.tma_load(sK + a * KATOM, K, 0, 64 * a, 128)
            sm.tma_load(sQ + a * QATOM, Q, 0, 64 * a, 64)
        for a in range(NV):
            sm.tma_load(sV + a * KATOM, V, 0, 64 * a, 128)
            sm.tma_load(sG + a * QATOM, dO, 0, 64 * a, 64)
        sl2 = 0.1 * 1.4426950408889634
        P_all, dS_all = np.zeros((128, 64)), np.zeros((128, 64))
        dv_acc, dk_acc, pa_sa = [], [], []
        for it in range(2):                                  # it: the dSᵀ buffer / dQ turn
            dsb = sDS + (it & 1) * 16384
            for wgc in range(2):
                ka, va = sK + wgc * 8192, sV + wgc * 8192
                S = np.zeros((64, 64))
                for kk in range((HD + 15) // 16):
                    off = (kk & 3) * 32
                    S = E.wgmma(S, sm.operand(E.desc(ka + (kk >> 2) * KATOM + off, 16, 1024), 64, False),
                                sm.operand(E.desc(sQ + (kk >> 2) * QATOM + off, 16, 1024), 64, False), kk != 0)
                dP = np.zeros((64, 64))
                for kk in range((HDV + 15) // 16):
                    off = (kk & 3) * 32
                    dP = E.wgmma(dP, sm.operand(E.desc(va + (kk >> 2) * KATOM + off, 16, 1024), 64, False),
                                 sm.operand(E.desc(sG + (kk >> 2) * QATOM + off, 16, 1024), 64, False), kk != 0)
                s, dp = E.to_acc(S), E.to_acc(dP)
                _, col = E.acc_coords(64)
                s = np.exp2(s * sl2 - lse[col] * 1.4426950408889634)
                dp = s * (dp - dsum[col])
                keys = slice(64 * wgc, 64 * wgc + 64)
                P_all[keys], dS_all[keys] = E.from_acc(s, 64), E.from_acc(dp, 64)
                # dSᵀ stores, as the kernel: sa[ks][q] = (dp[8 ks + 2 q], dp[8 ks + 2 q + 1])
                for t in range(128):
                    w4, g, t4 = t // 32, (t % 32) // 4, t % 4
                    rk = 64 * wgc + 16 * w4 + g
                    for ks in range(4):
                        for hh in range(2):
                            for rr in range(2):
                                q = 2 * hh + rr
                                sm.st32(dsb + (rk + 8 * rr) * 128 + (((2 * ks + hh) ^ g) << 4) + 4 * t4,
                                        dp[t, 8 * ks + 2 * q], dp[t, 8 * ks + 2 * q + 1])
                dv = np.zeros((64, HDVP))
                dk = np.zeros((64, HDP))
                for ks in range(4):
                    dv = E.wgmma(dv, E.pack_a(s, ks), sm.operand(E.desc(sG + ks * 2048, QATOM, 1024), HDVP, True))
                    dk = E.wgmma(dk, E.pack_a(dp, ks), sm.operand(E.desc(sQ + ks * 2048, QATOM, 1024), HDP, True))
                if it == 0:
                    dv_acc.append(dv)
                    dk_acc.append(dk)
            dq = np.zeros((64, HDP))
            for wgc in range(2):
                if HDP == 128:
                    kc, dqc = sK + wgc * KATOM, 64 * wgc
                elif (it & 1) == wgc:
                    kc, dqc = sK, 0
                else:
                    continue
                acc = np.zeros((64, 64))
                for ks in range(8):
                    acc = E.wgmma(acc, sm.operand(E.desc(dsb + ks * 2048, 16384, 1024), 64, True),
                                  sm.operand(E.desc(kc + ks * 2048, KATOM, 1024), 64, True), ks != 0)
                # the staging copy (row 16 w4 + g + 8 rr, column 8 j + 2 t4 + c) is acc itself
                dq[:, dqc:dqc + 64] = acc
            Kp = np.pad(K, ((0, 0), (0, HDP - HD)))
            assert np.allclose(dq, dS_all.T @ Kp), (HD, HDV, it)
        S_ref = K @ Q.T
        P_ref = np.exp2(S_ref * sl2 - lse[None, :] * 1.4426950408889634)
        assert np.allclose(P_all, P_ref)
        dS_ref = P_ref * ((V @ dO.T) - dsum[None, :])
        assert np.allclose(dS_all, dS_ref)
        dV = np.concatenate(dv_acc)[:, :HDV]
        dK = np.concatenate(dk_acc)[:, :HD]
        assert np.allclose(dV, P_ref @ dO) and np.allclose(dK, dS_ref @ Q), (HD, HDV)


@pytest.mark.parametrize("BM,HD,HDV", [(64, 128, 128), (64, 64, 64), (64, 96, 128), (128, 64, 64), (128, 40, 64)])
def test_emulated_visit_halves(BM, HD, HDV):
    """One visit of attention_bwd_wgmma.hip as it runs now, on the host model: Sᵀ over the whole
    BW_BM-query tile (m64n<BW_BM>k16), then per 64-query half hq the dPᵀ product (dO rows 64 hq..),
    dSᵀ / Pᵀ into the register A operands ks = 4 hq .., dV / dK, and the dSᵀ stores into atom hq
    of the buffer; dQ per warpgroup (128-query tiles: its own 64 queries from atom wgc; 64:
    HDP 128 column halves or HDP 64 turns).  dV, dK, dQ against the matrix formulas, for the
    default 64-query tiles and the 128-query tiles of HIPDNN_CABI_HIP_ATTN_BWD_BM=128."""
    import wgmma_emu as E
    r = np.random.default_rng(5)
    HDP, HDVP = -(-HD // 64) * 64, -(-HDV // 64) * 64
    NK, NV, NH = HDP // 64, HDVP // 64, BM // 64
    Q, K = r.standard_normal((BM, HD)), r.standard_normal((128, HD))
    V, dO = r.standard_normal((128, HDV)), r.standard_normal((BM, HDV))
    lse, dsum = r.standard_normal(BM) + 3, r.standard_normal(BM)
    KATOM, QATOM, DATOM = 16384, BM * 128, 16384
    DST = DATOM * NH
    sK = 0
    sV = sK + NK * KATOM
    sQ = sV + NV * KATOM
    sG = sQ + NK * QATOM
    sDS = sG + NV * QATOM
    sm = E.Smem(sDS + 2 * DST)
    for a in range(NK):
        sm.tma_load(sK + a * KATOM, K, 0, 64 * a, 128)
        sm.tma_load(sQ + a * QATOM, Q, 0, 64 * a, BM)
    for a in range(NV):
        sm.tma_load(sV + a * KATOM, V, 0, 64 * a, 128)
        sm.tma_load(sG + a * QATOM, dO, 0, 64 * a, BM)
    L2E = 1.4426950408889634
    sl2 = 0.1 * L2E
    t = np.arange(128)
    w4, g, t4 = t // 32, (t % 32) // 4, t % 4
    for it in range(2):                                  # it: the dSᵀ buffer / dQ turn
        dsb = sDS + (it & 1) * DST
        P_all, dS_all = np.zeros((128, BM)), np.zeros((128, BM))
        dvs, dks = [], []
        for wgc in range(2):
            ka, va = sK + wgc * 8192, sV + wgc * 8192
            S = np.zeros((64, BM))
            for kk in range((HD + 15) // 16):
                off = (kk & 3) * 32
                S = E.wgmma(S, sm.operand(E.desc(ka + (kk >> 2) * KATOM + off, 16, 1024), 64, False),
                            sm.operand(E.desc(sQ + (kk >> 2) * QATOM + off, 16, 1024), BM, False), kk != 0)
            s = E.to_acc(S)
            _, col = E.acc_coords(BM)
            s = np.exp2(s * sl2 - lse[col] * L2E)
            dv, dk = np.zeros((64, HDVP)), np.zeros((64, HDP))
            rk = 64 * wgc + 16 * w4 + g
            for hq in range(NH):
                dP = np.zeros((64, 64))
                for kk in range((HDV + 15) // 16):
                    off = (kk & 3) * 32
                    dP = E.wgmma(dP, sm.operand(E.desc(va + (kk >> 2) * KATOM + off, 16, 1024), 64, False),
                                 sm.operand(E.desc(sG + hq * 8192 + (kk >> 2) * QATOM + off, 16, 1024), 64,
                                            False), kk != 0)
                dp = E.to_acc(dP)
                for jl in range(8):
                    j = 8 * hq + jl
                    for e in range(4):
                        dp[:, 4 * jl + e] = s[:, 4 * j + e] * (dp[:, 4 * jl + e] - dsum[8 * j + 2 * t4 + (e & 1)])
                for kl in range(4):
                    ks = 4 * hq + kl
                    dv = E.wgmma(dv, E.pack_a(s, ks), sm.operand(E.desc(sG + ks * 2048, QATOM, 1024), HDVP, True))
                    dk = E.wgmma(dk, E.pack_a(dp, kl), sm.operand(E.desc(sQ + ks * 2048, QATOM, 1024), HDP, True))
                for kl in range(4):
                    for hh in range(2):
                        for rr in range(2):
                            q = 2 * hh + rr
                            for tt in range(128):
                                sm.st32(dsb + hq * DATOM + (rk[tt] + 8 * rr) * 128
                                        + (((2 * kl + hh) ^ g[tt]) << 4) + 4 * t4[tt],
                                        dp[tt, 8 * kl + 2 * q], dp[tt, 8 * kl + 2 * q + 1])
                dS_all[64 * wgc:64 * wgc + 64, 64 * hq:64 * hq + 64] = E.from_acc(dp, 64)
            P_all[64 * wgc:64 * wgc + 64] = E.from_acc(s, BM)
            dvs.append(dv)
            dks.append(dk)
        dq = np.full((BM, HDP), np.nan)
        for wgc in range(2):
            if HDP == 128:
                kc, dqc, dqr = sK + wgc * KATOM, 64 * wgc, 0
            elif BM == 128:
                kc, dqc, dqr = sK, 0, 64 * wgc
            elif (it & 1) == wgc:
                kc, dqc, dqr = sK, 0, 0
            else:
                continue
            dsa = dsb + (wgc if BM == 128 else 0) * DATOM
            acc = np.zeros((64, 64))
            for ks in range(8):
                acc = E.wgmma(acc, sm.operand(E.desc(dsa + ks * 2048, DATOM, 1024), 64, True),
                              sm.operand(E.desc(kc + ks * 2048, KATOM, 1024), 64, True), ks != 0)
            dq[dqr:dqr + 64, dqc:dqc + 64] = acc
        S_ref = K @ Q.T
        P_ref = np.exp2(S_ref * sl2 - lse[None, :] * L2E)
        dS_ref = P_ref * ((V @ dO.T) - dsum[None, :])
        assert np.allclose(P_all, P_ref) and np.allclose(dS_all, dS_ref), (BM, HD, HDV)
        assert np.allclose(np.concatenate(dvs)[:, :HDV], P_ref @ dO), (BM, HD, HDV)
        assert np.allclose(np.concatenate(dks)[:, :HD], dS_ref @ Q), (BM, HD, HDV)
        Kp = np.pad(K, ((0, 0), (0, HDP - HD)))
        assert np.allclose(dq, dS_ref.T @ Kp), (BM, HD, HDV, it)


def test_mask_span_compare():
    """The masked tiles' test (unsigned)(q0 + 2 t4 - lo + 8 j + (e & 1)) < max(hi - lo, 0) in
    32-bit arithmetic equals lo <= i < hi for the spans hdn_attn_col yields (bounds up to
    HDN_BIG = 2^30 either side, empty spans included)."""
    big = 1 << 30
    r = np.random.default_rng(11)
    for _ in range(2000):
        j = int(r.integers(0, 5000))
        rlim = int(r.choice([big, -big, int(r.integers(-300, 300))]))
        llim = int(r.choice([-big, big, int(r.integers(-300, 300))]))
        sq, skv = int(r.integers(1, 5000)), int(r.integers(1, 5000))
        lo = j - rlim
        hi = min(sq, j - llim + 1) if j < skv else lo
        q0 = 128 * int(r.integers(0, 40))
        i = q0 + np.arange(128)
        m = np.int64(q0 - lo)
        n = np.uint32(max(hi - lo, 0))
        got = ((m + np.arange(128)) & 0xFFFFFFFF).astype(np.uint32) < n
        assert -2 ** 31 <= m and m + 127 < 2 ** 31
        assert np.array_equal(got, (i >= lo) & (i < hi)), (j, rlim, llim, sq, skv, q0)
