"""The decode attention kernel (attention_fwd.hip ATT_DECODE, ops/sdpa.py decode_ok; opt-in
HIPDNN_CABI_HIP_ATTN_DECODE=1, which tests/gpu turns on): GQA-packed decode rows ((Hq / Hkv) x
Sq <= 16) with every warp of a block streaming its own 16-key K / V tiles.  CI (no GPU): the
programs (note, defines, launch shapes, the key split), the sources compile for sm_90a with
NVRTC without spills, the knob off leaves today's GQA_PACK source, and a host model of the
kernel's schedule (the slices, each warp's tiles, the page-table addressing, the per-warp
online softmax and the merges) against the float64 formulas.  GPU (`pytest -m gpu`): paged
(pages out of order, 16 / 64 rows) and contiguous K/V, lengths 1 and non-multiples of 64, Sq 1
and 2, group sizes 1 / 4 / 8, D = Dv 64 / 128 and D != Dv, stats on / off, fp16 and bf16,
against the CPU reference's float64 formulas on the same quantised inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from engine_plugins.hip_kernels.ops import sdpa as hsdpa
from gpu_testlib import T, assert_sdpa_close, graph_bytes, node, paged_pools, plan_notes, quantize

NOTE = "mma.sync decode attention (ATT_DECODE)"

# PS None: contiguous K / V [B, Hkv, Skv, D(v)] (lens: the padding mask, None: none); else
# paged pools [pages, Hkv, PS, D(v)] through tables with the pages in shuffled order
CASES = [
    dict(dt="HALF", B=3, H=8, Hkv=2, Sq=1, D=128, PS=16, lkv=[37, 1, 100]),
    dict(dt="BFLOAT16", B=2, H=8, Hkv=1, Sq=1, D=64, PS=64, lkv=[1000, 65], stats=False),
    dict(dt="HALF", B=2, H=16, Hkv=4, Sq=2, D=64, PS=16, lq=[2, 1], lkv=[70, 3],
         causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=2, H=8, Hkv=8, Sq=2, D=128, PS=64, lkv=[129, 64]),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=1, D=64, Dv=128, PS=16, lkv=[300, 17]),
    dict(dt="BFLOAT16", B=1, H=16, Hkv=2, Sq=2, D=128, PS=64, lkv=[777]),
    dict(dt="HALF", B=2, H=8, Hkv=2, Sq=1, D=128, lkv=[513, 1]),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=2, D=96, Dv=64, lq=[2, 1], lkv=[200, 2],
         causal_mask=True, stats=False),
    dict(dt="HALF", B=1, H=8, Hkv=1, Sq=1, D=64, Skv=2000),
    dict(dt="BFLOAT16", B=2, H=32, Hkv=4, Sq=1, D=128, PS=64, lkv=[4000, 250]),
]


def _case(c):
    """(case with defaults, lq, lkv, Skv, Dv)."""
    c = dict(c)
    c.setdefault("PS", None)
    c.setdefault("stats", True)
    Dv = c.get("Dv") or c["D"]
    lkv = c.get("lkv")
    Skv = c.get("Skv") or max(lkv)
    lq = c.get("lq") or ([c["Sq"]] * c["B"] if lkv is not None else None)
    return c, (None if lq is None else np.array(lq)), (None if lkv is None else np.array(lkv)), Skv, Dv


def _pages(c, lkv):
    PS = c["PS"]
    pages = [-(-int(n) // PS) for n in lkv]
    MP = max(pages) + 1                       # a spare entry per batch (never read)
    NP = sum(pages) + 2                       # + a NaN page the spare entries name
    return pages, MP, NP


def decode_graph(c):
    """q [B, H, Sq, D] (uid 1), k (2), v (3), o [B, H, Sq, Dv] (4), stats (5), lengths (6, 7),
    page tables [B, 1, MP, 1] INT32 (8, 9); returns (tensors, graph bytes)."""
    c, lq, lkv, Skv, Dv = _case(c)
    dt, B, H, Hkv, Sq, D, PS = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "D", "PS"))
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "attn_scale_value": 1 / math.sqrt(D)}
    if PS is None:
        ts = [T(2, [B, Hkv, Skv, D], dt), T(3, [B, Hkv, Skv, Dv], dt)]
    else:
        pages, MP, NP = _pages(c, lkv)
        ts = [T(2, [NP, Hkv, PS, D], dt), T(3, [NP, Hkv, PS, Dv], dt),
              T(8, [B, 1, MP, 1], "INT32"), T(9, [B, 1, MP, 1], "INT32")]
        a.update(page_table_k_tensor_uid=8, page_table_v_tensor_uid=9, max_seq_len_kv=Skv)
    ts = [T(1, [B, H, Sq, D], dt)] + ts + [T(4, [B, H, Sq, Dv], dt)]
    if lkv is not None:
        ts += [T(6, [B, 1, 1, 1], "INT32"), T(7, [B, 1, 1, 1], "INT32")]
        a.update(seq_len_q_tensor_uid=6, seq_len_kv_tensor_uid=7, padding_mask=True)
    if c["stats"]:
        ts.append(T(5, [B, H, Sq, 1], "FLOAT"))
        a.update(stats_tensor_uid=5, generate_stats=True)
    for x in ("causal_mask", "causal_mask_bottom_right"):
        if c.get(x):
            a[x] = True
    return ts, graph_bytes(ts, [node("SdpaAttributes", a)])


def decode_inputs(c, seed=7, pad=np.nan):
    """(engine inputs {uid: values}, dense q / k / v for the reference (zeros past each length),
    SdpaParams).  Contiguous K / V hold ``pad`` past each batch's length (NaN: the kernel must
    not read them; the device tests: finite values the masks must drop) and paged pools NaN in
    every row no table entry reaches."""
    rng = np.random.default_rng(seed)
    c, lq, lkv, Skv, Dv = _case(c)
    dt, B, H, Hkv, Sq, D, PS = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "D", "PS"))
    q = quantize(rng.uniform(-2, 2, (B, H, Sq, D)), dt)
    k = quantize(rng.uniform(-2, 2, (B, Hkv, Skv, D)), dt)
    v = quantize(rng.uniform(-1, 1, (B, Hkv, Skv, Dv)), dt)
    ins = {1: q}
    if lkv is not None:
        for b in range(B):
            k[b, :, lkv[b]:] = 0
            v[b, :, lkv[b]:] = 0
        ins[6], ins[7] = lq.reshape(B, 1, 1, 1), lkv.reshape(B, 1, 1, 1)
    if PS is None:
        kd, vd = k.copy(), v.copy()
        if lkv is not None:
            for b in range(B):
                kd[b, :, lkv[b]:] = pad
                vd[b, :, lkv[b]:] = pad
        ins[2], ins[3] = kd, vd
    else:
        pages, MP, NP = _pages(c, lkv)
        kp, vp, tab = paged_pools(k, v, lkv, pages, PS, NP, MP, rng)
        ins[2], ins[3], ins[8], ins[9] = kp, vp, tab, tab
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(D))))
    p.causal = bool(c.get("causal_mask"))
    p.causal_bottom_right = bool(c.get("causal_mask_bottom_right"))
    p.bottom_right = p.causal_bottom_right and not p.causal
    if lkv is not None:
        p.seq_len_q, p.seq_len_kv = lq, lkv
    return ins, (q, k, v), p


def _build(g, arch=None, sms=132):
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    return build_program(parse_graph(g), arch=arch, sms=sms)


def _compiler():
    try:
        from hipdnn_cabi.device import compiler
        return compiler("cuda")
    except Exception:  # noqa: BLE001
        return None


def _ptxas(log):
    """{kernel: (registers, spill store bytes)} from a ptxas -v log."""
    import re
    out, cur = {}, None
    for ln in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", ln)
        if m:
            cur = m.group(1)
        m = re.search(r"(\d+) bytes spill stores", ln)
        if m and cur:
            out.setdefault(cur, [0, 0])[1] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", ln)
        if m and cur:
            out.setdefault(cur, [0, 0])[0] = int(m.group(1))
    return out


# --------------------------------------------------------------------------------- CI (no GPU)
def test_decode_programs_and_compile_sm90a(monkeypatch):
    """Every case builds the decode kernel (sm_90 too: before the wgmma forward) with the note,
    grid (slices, Hkv, B), 128 threads and the combine kernel exactly where the keys split; the
    sources compile for sm_90a without spills."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    from engine_plugins.hip_kernels import codegen
    comp = _compiler()
    for i, case in enumerate(CASES):
        c, lq, lkv, Skv, Dv = _case(case)
        _, g = decode_graph(case)
        for arch in (None, "sm_90"):
            prog = _build(g, arch)
            assert any(NOTE in n for n in prog.notes), prog.notes
            launches = [st for st in prog.steps if st[0] == "launch"]
            st, smem, per_sm = hsdpa.decode_config(c["D"], Dv)
            ns = hsdpa.decode_split(c["B"] * c["Hkv"], Skv, 132, per_sm)
            assert [x[2] for x in launches] == ["hdn_attn_fwd"] + (["hdn_attn_fwd_combine"] if ns > 1 else [])
            main = launches[0]
            assert main[3] == (ns, c["Hkv"], c["B"]) and main[4] == (128, 1, 1) and main[6] == smem
            src = main[1]
            assert "#define ATT_DECODE 1" in src and f"#define DEC_ST {st}" in src
            assert ("#define K_PAGED" in src) == (c["PS"] is not None)
        if comp is not None:
            comp.compile(src, f"decode{i}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
            info = _ptxas(comp.last_log)
            assert info and all(sp == 0 for _, sp in info.values()), comp.last_log
            assert info["hdn_attn_fwd"][0] <= 255


def test_decode_knob_off_and_declines(monkeypatch):
    """HIPDNN_CABI_HIP_ATTN_DECODE=0: today's GQA_PACK kernel, its source without the decode
    block; with the knob on, graphs the decode kernel does not take keep their kernels (more than
    16 rows per kv head, dropout, a score role, sm_90 prefill)."""
    from test_attention import fwd_graph
    _, g = decode_graph(CASES[0])
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "0")
    prog = _build(g, "sm_90")
    src = prog.steps[0][1]
    assert "#define GQA_PACK 1" in src and "ATT_DECODE" not in src and "hdn_dec_" not in src
    assert not any(NOTE in n for n in prog.notes)
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    assert any(NOTE in n for n in _build(g, "sm_90").notes)
    for gb, kernel in ((fwd_graph("HALF", 2, 8, 1, 3, 300, 64)[1], "hdn_attn_fwd_wg"),        # 24 rows
                       (fwd_graph("HALF", 2, 8, 2, 1, 300, 64, drop=0.1)[1], "hdn_attn_fwd"),
                       (fwd_graph("HALF", 2, 8, 2, 1, 300, 64, alibi_mask=True)[1], "hdn_attn_fwd_wg"),
                       (fwd_graph("HALF", 1, 4, 4, 200, 300, 64)[1], "hdn_attn_fwd_wg")):
        prog = _build(gb, "sm_90")
        assert not any(NOTE in n for n in prog.notes), prog.notes
        assert prog.steps[-1][2] == kernel or prog.steps[0][2] == kernel
    # contiguous decode on sm_90: the decode kernel instead of the 128-row wgmma tiles
    prog = _build(fwd_graph("BFLOAT16", 64, 32, 8, 1, 4096, 128)[1], "sm_90")
    assert [st[2] for st in prog.steps] == ["hdn_attn_fwd"] and any(NOTE in n for n in prog.notes)


def test_decode_config_and_split():
    """Ring depth / shared memory / residency per head size, and the key split: none for the
    benchmark's 512 blocks (two resident per multiprocessor), slices of >= 256 keys filling the
    machine for few long sequences, at most 16, off with HIPDNN_CABI_HIP_ATTN_SPLITKV=0."""
    assert hsdpa.decode_config(128, 128) == (3, 16 * 128 * 2 + 4 * 3 * 16 * 256 * 2, 2)
    assert hsdpa.decode_config(64, 64) == (6, 16 * 64 * 2 + 4 * 6 * 16 * 128 * 2, 2)
    st, smem, per_sm = hsdpa.decode_config(256, 256)
    assert st == 2 and smem <= hsdpa.SMEM_MAX and per_sm == 1
    for D, Dv in ((64, 128), (96, 64), (128, 256), (256, 64)):
        st, smem, per_sm = hsdpa.decode_config(D, Dv)
        assert 2 <= st <= 8 and smem <= hsdpa.SMEM_MAX and per_sm >= 1
        # the warps' merge area (maxima, sums, O in fp32) fits the rings it reuses
        assert 4 * 16 * 2 * 4 + 4 * 16 * hsdpa.pad64(Dv) * 4 <= smem - 16 * hsdpa.pad64(D) * 2
    assert hsdpa.decode_split(512, 4096, 132, 2) == 1
    assert hsdpa.decode_split(4, 100, 132, 2) == 1
    assert hsdpa.decode_split(4, 1056, 132, 2) == 4
    assert hsdpa.decode_split(1, 100000, 132, 2) == 16
    for blocks in (1, 7, 64, 200, 600):
        for skv in (256, 700, 4096, 32768):
            ns = hsdpa.decode_split(blocks, skv, 132, 2)
            assert 1 <= ns <= 16 and (ns == 1 or skv // ns >= 256)
    import os
    os.environ["HIPDNN_CABI_HIP_ATTN_SPLITKV"] = "0"
    try:
        assert hsdpa.decode_split(1, 100000, 132, 2) == 1
    finally:
        del os.environ["HIPDNN_CABI_HIP_ATTN_SPLITKV"]


def _limits(c, b, Skv, lq, lkv):
    """hdn_attn_limits: (sq, skv, rlim, llim)."""
    BIG = 1 << 30
    sq = c["Sq"] if lq is None else max(0, min(c["Sq"], int(lq[b])))
    skv = Skv if lkv is None else max(0, min(Skv, int(lkv[b])))
    r = BIG
    if c.get("causal_mask"):
        r = 0
    if c.get("causal_mask_bottom_right"):
        r = min(r, skv - sq)
    return sq, skv, r, -BIG


def emulate(c, ins):
    """The decode kernel and its combine on the host in float64, step by step as the device runs
    them: each block's key slice, each warp's 16-key tiles (t0 + warp + 4 j) loaded through the
    page tables as hdn_dec_load addresses them (rows past the length: zeros), the masked online
    softmax per warp on the exp2 scale, the warps' merge and the slices' combine.  Returns (O,
    stats, the count of times each (b, kv head, key) was loaded)."""
    c, lq, lkv, Skv, Dv = _case(c)
    B, H, Hkv, Sq, D, PS = (c[k] for k in ("B", "H", "Hkv", "Sq", "D", "PS"))
    G, NW, BN = H // Hkv, 4, hsdpa.DEC_BN
    _, _, per_sm = hsdpa.decode_config(D, Dv)
    ns = hsdpa.decode_split(B * Hkv, Skv, 132, per_sm)
    sl2 = float(np.float32(1 / math.sqrt(D))) * math.log2(math.e)
    q = ins[1]
    O = np.zeros((B, H, Sq, Dv))
    st = np.zeros((B, H, Sq, 1))
    seen = np.zeros((B, Hkv, Skv), int)
    for b in range(B):
        sq, skv, rlim, llim = _limits(c, b, Skv, lq, lkv)
        ihi = min(Sq, sq) - 1
        lo, hi = 0, skv
        if rlim < (1 << 30):
            hi = min(hi, ihi + rlim + 1)
        if ihi < 0:
            hi = lo
        tba = lo // BN
        tbz = (hi + BN - 1) // BN if hi > lo else tba
        per = -(-(tbz - tba) // ns)
        for hk in range(Hkv):
            rows = [(hk * G + r // Sq, r % Sq) for r in range(G * Sq)]
            Q = np.array([q[b, h, i] for h, i in rows])
            spans = [(i + llim, min(skv, i + rlim + 1) if i < sq else i + llim) for _, i in rows]
            parts = []
            for s in range(ns):
                t0 = min(tbz, tba + s * per) if ns > 1 else tba
                t1 = min(tbz, t0 + per) if ns > 1 else tbz
                wm, wl, wa = [], [], []
                for w in range(NW):
                    nj = (t1 - t0 - w + NW - 1) // NW if t1 - t0 > w else 0
                    m = np.full(len(rows), -np.inf)
                    l = np.zeros(len(rows))
                    acc = np.zeros((len(rows), Dv))
                    for j in range(nj):
                        kv0 = (t0 + w + NW * j) * BN
                        Kt, Vt = np.zeros((BN, D)), np.zeros((BN, Dv))
                        for r in range(BN):
                            key = kv0 + r
                            if key >= skv:
                                continue
                            seen[b, hk, key] += 1
                            if PS is None:
                                Kt[r], Vt[r] = ins[2][b, hk, key], ins[3][b, hk, key]
                            else:
                                pk = int(ins[8][b, 0, kv0 >> (PS.bit_length() - 1), 0])
                                pv = int(ins[9][b, 0, kv0 >> (PS.bit_length() - 1), 0])
                                Kt[r] = ins[2][pk, hk, (kv0 & (PS - 1)) + r]
                                Vt[r] = ins[3][pv, hk, (kv0 & (PS - 1)) + r]
                        S = Q @ Kt.T * sl2
                        for x, (slo, shi) in enumerate(spans):
                            keys = kv0 + np.arange(BN)
                            S[x, (keys < slo) | (keys >= shi)] = -np.inf
                        mn = np.maximum(m, S.max(axis=1))
                        base = np.where(mn == -np.inf, 0.0, mn)
                        alpha = np.exp2(m - base)
                        P = np.exp2(S - base[:, None])
                        l = l * alpha + P.sum(axis=1)
                        acc = acc * alpha[:, None] + P @ Vt
                        m = mn
                    wm.append(m), wl.append(l), wa.append(acc)
                M = np.max(wm, axis=0)
                f = [np.where(M == -np.inf, 0.0, np.exp2(x - np.where(M == -np.inf, 0, M))) for x in wm]
                L = sum(x * y for x, y in zip(wl, f))
                A = sum(x * y[:, None] for x, y in zip(wa, f))
                inv = np.where(L > 0, 1 / np.where(L > 0, L, 1), 0.0)
                parts.append((A * inv[:, None], np.where(L > 0, M * math.log(2) + np.log(np.where(L > 0, L, 1)), -np.inf)))
            lse = np.array([p[1] for p in parts])
            mx = lse.max(axis=0)
            wts = np.where(mx == -np.inf, 0.0, np.exp(lse - np.where(mx == -np.inf, 0, mx)))
            ws = wts.sum(axis=0)
            o = sum(p[0] * wt[:, None] for p, wt in zip(parts, wts)) * np.where(ws > 0, 1 / np.where(ws > 0, ws, 1), 0)[:, None]
            for x, (h, i) in enumerate(rows):
                O[b, h, i] = o[x]
                st[b, h, i, 0] = mx[x] + math.log(ws[x]) if ws[x] > 0 else np.inf
    return O, st, seen


@pytest.mark.parametrize("i", range(len(CASES)))
def test_decode_host_model_vs_float64(i):
    """The host model of the kernel's schedule and addressing (:func:`emulate`) on each case's
    inputs: every key below a batch's length loaded exactly once per kv head (none past it), O
    and the statistics as the float64 formulas."""
    c, lq, lkv, Skv, Dv = _case(CASES[i])
    ins, (q, k, v), p = decode_inputs(CASES[i])
    O, st, seen = emulate(CASES[i], ins)
    for b in range(c["B"]):
        n = Skv if lkv is None else int(lkv[b])
        _, _, rlim, _ = _limits(c, b, Skv, lq, lkv)
        if rlim >= (1 << 30) and (lq is None or lq[b] > 0):
            assert np.all(seen[b, :, :n] == 1) and np.all(seen[b, :, n:] == 0)
        else:
            assert np.all(seen[b] <= 1) and np.all(seen[b, :, n:] == 0)
    Or, str_, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert np.all(np.isfinite(O))
    assert np.max(np.abs(O - Or)) < 1e-9
    fin = np.isfinite(str_)
    assert np.array_equal(np.isfinite(st), fin) and np.max(np.abs(st[fin] - str_[fin])) < 1e-9


# the host emulation of the kernel source itself (host_emu.run_mma_kernel: a thread per lane,
# ldmatrix / mma.sync / shuffles per the PTX fragment layouts, cp.async completing at the last
# moment its wait allows): small cases - paged with the keys split, contiguous D != Dv with a
# causal mask, a page outside the pool
EMU_CASES = [
    dict(dt="HALF", B=2, H=8, Hkv=2, Sq=1, D=64, PS=16, lkv=[37, 100]),
    dict(dt="BFLOAT16", B=1, H=4, Hkv=1, Sq=2, D=64, PS=16, lkv=[600], causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=2, H=2, Hkv=2, Sq=2, D=96, Dv=64, lq=[2, 1], lkv=[150, 2],
         causal_mask=True, stats=False),
    dict(dt="HALF", B=1, H=16, Hkv=1, Sq=1, D=128, Skv=90),
    dict(dt="BFLOAT16", B=1, H=16, Hkv=2, Sq=2, D=64, PS=64, lkv=[300]),
]


def run_emulated(g, ts, ins, lazy=True, scalars=None):
    """The program of graph g (sm_90, the decode kernel) run by host_emu.run_mma_kernel on the
    inputs {uid: values} (``scalars``: runtime pass-by-value values by uid); returns {uid: output
    values}."""
    import host_emu
    from engine_plugins.hip_kernels import codegen
    from gpu_testlib import from_storage, to_storage
    prog = _build(g, "sm_90")
    assert any(NOTE in n for n in prog.notes)
    mem = host_emu.HostMem()
    by = {t.uid: t for t in ts}
    ptr, host = {}, {}
    for uid, t in by.items():
        if getattr(t, "runtime", False):
            continue
        st = to_storage(t, ins[uid] if uid in ins else np.zeros(t.dims))
        p, raw = mem.alloc(st.nbytes)
        raw[:] = st.view(np.uint8)
        ptr[uid], host[uid] = p, (raw, st.dtype, t)
    wsp, _ = mem.alloc(max(16, prog.ws_size))
    for st in prog.steps:
        assert st[0] == "launch", st[0]
        _, src, name, grid, block, args = st[:6]
        vals = [ptr[a[1]] if a[0] == "t" else float(scalars[a[1]]) if a[0] == "s" else wsp + a[1]
                for a in args]
        host_emu.run_mma_kernel(src, name, grid, block, vals, codegen.headers(), lazy=lazy)
    return {u: from_storage(by[u], host[u][0].view(host[u][1]).copy()) for u in (4, 5) if u in by}


def _emu_ok():
    try:
        import host_emu
        return host_emu.compiler() is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _emu_ok(), reason="no host C++ compiler")
@pytest.mark.parametrize("i", range(len(EMU_CASES)))
def test_decode_kernel_source_host_emulated(i, monkeypatch):
    """The generated decode kernel (and the combine where the keys split) compiled for the host
    and run lane by lane: O and the statistics as the float64 formulas within the data type's
    tolerance, no NaN from rows past the lengths or unreached pages."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    c = EMU_CASES[i]
    ts, g = decode_graph(c)
    ins, (q, k, v), p = decode_inputs(c)
    res = run_emulated(g, ts, ins)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert np.all(np.isfinite(res[4]))
    assert_sdpa_close(res, O, st, c["dt"])


def _bshd_case():
    """A contiguous BSHD decode graph with a runtime scale (uid 10): (tensors, graph, inputs,
    scalars, reference O, stats)."""
    from test_attention import fwd_graph
    r = np.random.default_rng(3)
    ts, g = fwd_graph("HALF", 2, 8, 2, 1, 70, 64, bshd=True, scale_mode="runtime")
    by = {t.uid: t for t in ts}
    q, k, v = (quantize(r.uniform(-1.5, 1.5, by[u].dims), "HALF") for u in (1, 2, 3))
    p = ksdpa.SdpaParams(scale=0.2)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    return ts, g, {1: q, 2: k, 3: v}, {10: 0.2}, O, st


@pytest.mark.skipif(not _emu_ok(), reason="no host C++ compiler")
def test_decode_kernel_host_emulated_bshd_runtime_scale(monkeypatch):
    """BSHD strides and a runtime pass-by-value scale on the decode kernel (emulated)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    ts, g, ins, sc, O, st = _bshd_case()
    res = run_emulated(g, ts, ins, scalars=sc)
    assert_sdpa_close(res, O, st, "HALF")


@pytest.mark.skipif(not _emu_ok(), reason="no host C++ compiler")
def test_decode_kernel_host_emulated_page_outside_the_pool(monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    c = EMU_CASES[0]
    ts, g = decode_graph(c)
    ins, (q, k, v), p = decode_inputs(c)
    bad = ins[8].copy()
    bad[1, 0, 2, 0] = -3
    ins[8] = bad
    res = run_emulated(g, ts, ins)
    O, _, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert np.all(np.isnan(res[4][1]))
    assert np.max(np.abs(res[4][0] - O[0])) < 1e-2


# ------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(CASES)))
def test_decode_forward_vs_cpu_reference(R, i, monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    ts, g = decode_graph(CASES[i])
    assert any(NOTE in n for n in plan_notes(g))
    ins, (q, k, v), p = decode_inputs(CASES[i], pad=1e4)
    by = {t.uid: t for t in ts}
    outs = [by[4]] + ([by[5]] if 5 in by else [])
    res = R.run(g, {by[u]: x for u, x in ins.items()}, outs)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert np.all(np.isfinite(res[4])), "NaN in O: a page or row past the length was read"
    assert_sdpa_close(res, O, st, CASES[i]["dt"])


@pytest.mark.gpu
def test_decode_bshd_runtime_scale(R, monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    ts, g, ins, sc, O, st = _bshd_case()
    assert any(NOTE in n for n in plan_notes(g))
    by = {t.uid: t for t in ts}
    res = R.run(g, {by[u]: x for u, x in ins.items()}, [by[4], by[5]], scalars=sc)
    assert_sdpa_close(res, O, st, "HALF")


@pytest.mark.gpu
def test_decode_page_outside_the_pool_gives_nan(R, monkeypatch):
    """A table entry naming no page of the pool makes that batch's rows NaN (as the GQA_PACK
    kernel), the other batches are unaffected."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "1")
    ts, g = decode_graph(CASES[0])
    ins, (q, k, v), p = decode_inputs(CASES[0])
    bad = ins[8].copy()
    bad[0, 0, 1, 0] = ins[2].shape[0] + 1000
    bad[2, 0, 0, 0] = -3
    ins[8] = bad
    by = {t.uid: t for t in ts}
    res = R.run(g, {by[u]: x for u, x in ins.items()}, [by[4], by[5]])
    O, _, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert np.all(np.isnan(res[4][0])) and np.all(np.isnan(res[4][2]))
    from gpu_testlib import relerr
    assert relerr(res[4][1], O[1]) < 1e-2
