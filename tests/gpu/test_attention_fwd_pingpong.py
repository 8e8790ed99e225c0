"""The Hopper flash-attention forward's scheduling variants (attention_fwd_wgmma.hip): ping-pong
consumer warpgroups (AW_PP, ``HIPDNN_CABI_HIP_ATTN_PINGPONG``) and the attention scale folded
into the exp2 FFMA, O's rescale skipped where no row max grew (AW_FOLD,
``HIPDNN_CABI_HIP_ATTN_EXPFOLD``).  CI (no GPU): which graphs get
them, the sources with both off are the ones without them, the named-barrier hand-over of the
two consumer warpgroups emulated on the host (every phase completes, none overflows, none left
open), the folded softmax's arithmetic in float32 against float64, and the sm_90a compiles of
every variant without spills.  GPU (`pytest -m gpu`): each variant against the CPU reference."""
from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.ops import sdpa as osdpa
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

from gpu_testlib import assert_sdpa_close, nvrtc_or_skip, quantize
import test_attention as ta
import test_attention_roles as tr

# (PINGPONG, EXPFOLD, ATTN_STAGES) of each variant; "on" is the default
VARIANTS = {"on": ("1", "1", ""), "off": ("0", "0", ""), "pp": ("1", "0", ""), "fold": ("0", "1", ""),
            "st3": ("1", "1", "3")}


def _set(monkeypatch, variant):
    pp, fold, st = VARIANTS[variant]
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_PINGPONG", pp)
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_EXPFOLD", fold)
    if st:
        monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_STAGES", st)
    else:
        monkeypatch.delenv("HIPDNN_CABI_HIP_ATTN_STAGES", raising=False)


def _wg_step(g):
    prog = build_program(parse_graph(g), arch="sm_90")
    steps = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_attn_fwd_wg"]
    assert len(steps) == 1, [s[2] for s in prog.steps]
    return steps[0], prog.notes


def _defined(src, name):
    return re.search(rf"^#define {name} 1$", src, re.M) is not None


def test_default_plan_has_both(monkeypatch):
    _set(monkeypatch, "on")
    for c in ta.WG_CONFIGS:
        _, g = ta.fwd_graph(**c)
        st, notes = _wg_step(g)
        runtime = c.get("scale_mode") == "runtime"
        assert _defined(st[1], "AW_PP"), c
        assert _defined(st[1], "AW_FOLD") == (not runtime), c
        assert any("ping-pong consumers" in n for n in notes)
        assert any("scale folded into exp2" in n for n in notes) == (not runtime)


def test_knobs_off_drop_the_blocks(monkeypatch):
    """Both knobs off: the AW_PP / AW_FOLD blocks are dropped from the source (ops/sdpa.py
    OPTIONAL), so it is the kernel without them - no named barrier, the scale multiplied in."""
    _set(monkeypatch, "off")
    for c in ta.WG_CONFIGS[:3]:
        _, g = ta.fwd_graph(**c)
        st, notes = _wg_step(g)
        assert "AW_PP" not in st[1] and "AW_FOLD" not in st[1] and "bar.arrive" not in st[1]
        assert "__any_sync" not in st[1]
        assert "s[4 * j + e] * sl2" in st[1]
        assert not any("ping-pong" in n or "folded" in n for n in notes)
    _set(monkeypatch, "pp")
    _, g = ta.fwd_graph(**ta.WG_CONFIGS[0])
    st, _ = _wg_step(g)
    assert _defined(st[1], "AW_PP") and "AW_FOLD" not in st[1]


def test_fold_only_without_score_roles(monkeypatch):
    """The fold needs the raw scores' row max: no score roles (masks, ALiBi, block mask, sink)
    and a positive baked scale; the rest keep the multiplied scores."""
    _set(monkeypatch, "on")
    _, g = tr.fwd_graph("HALF", 1, 2, 2, 256, 256, 128, mask=("bias", [1, 2, 256, 256], "HALF", None))
    st, _ = _wg_step(g)
    assert _defined(st[1], "AW_PP") and "AW_FOLD" not in st[1]
    _, g = tr.fwd_graph("HALF", 1, 2, 2, 256, 256, 128, alibi=True)
    st, _ = _wg_step(g)
    assert "AW_FOLD" not in st[1]
    for v, ok in ((0.125, True), (-0.125, False), (0.0, False), (1e-40, False), (1e31, False)):
        _, g = ta.fwd_graph("HALF", 1, 2, 2, 256, 256, 64, attn_scale_value=v)
        st, _ = _wg_step(g)
        assert _defined(st[1], "AW_FOLD") == ok, v


def test_three_stages_fit_d128(monkeypatch):
    _set(monkeypatch, "st3")
    smem, st, bn = osdpa.wg_config(128, 128, 3)
    assert (st, bn) == (3, 128) and smem <= osdpa.SMEM_MAX
    _, g = ta.fwd_graph(**ta.WG_CONFIGS[0])
    step, notes = _wg_step(g)
    assert step[6]["shmem"] == smem and any("3 K/V stages" in n for n in notes)


# ------------------------------------------------------------------ named-barrier hand-over
def _pp_program(wgc, turns):
    """The named-barrier operations of consumer warpgroup ``wgc`` over ``turns`` GEMM turns, as
    the kernel issues them: warpgroup 0 arrives once on its own barrier first; every turn is
    bar.sync on barrier 1 + wgc, then bar.arrive on barrier 2 - wgc, except warpgroup 1's last."""
    ops = [("arrive", 1)] if wgc == 0 else []
    for t in range(turns):
        ops.append(("sync", 1 + wgc))
        if wgc == 0 or t < turns - 1:
            ops.append(("arrive", 2 - wgc))
    return ops


def _run_barriers(progs, order):
    """Executes the warpgroups' operations (each warpgroup = 128 threads = one unit of a
    256-thread barrier) under the scheduling ``order`` (a warpgroup index per step; a blocked
    warpgroup is skipped).  Returns the barriers' open arrivals at the end; raises on a
    deadlock or an overfull phase."""
    pc = [0] * len(progs)
    waiting = [None] * len(progs)       # (barrier, phase) a warpgroup waits on
    count = {1: 0, 2: 0}
    phase = {1: 0, 2: 0}
    order = iter(order)
    while any(pc[i] < len(progs[i]) or waiting[i] for i in range(len(progs))):
        live = [i for i in range(len(progs))
                if (waiting[i] and phase[waiting[i][0]] > waiting[i][1]) or
                (not waiting[i] and pc[i] < len(progs[i]))]
        if not live:
            raise AssertionError(f"deadlock at {pc}, counts {count}")
        i = next(order) % len(progs)
        if i not in live:
            i = live[0]
        if waiting[i]:
            waiting[i] = None
            continue
        op, bar = progs[i][pc[i]]
        pc[i] += 1
        count[bar] += 1
        assert count[bar] <= 2, "more than 256 threads arrived in one phase"
        ph = phase[bar]
        if count[bar] == 2:
            count[bar], phase[bar] = 0, phase[bar] + 1
        if op == "sync":
            waiting[i] = (bar, ph)
    return count


def test_pingpong_handover_balanced():
    """Both warpgroups take the same number of turns (they walk the CTA's tiles); under any
    interleaving every bar.sync completes, no phase gets more than its 256 threads, the turns
    alternate, and no barrier is left with open arrivals."""
    rs = np.random.default_rng(3)
    for turns in range(1, 9):
        progs = [_pp_program(0, turns), _pp_program(1, turns)]
        for pat in itertools.chain(([0] * 64, [1] * 64), (rs.integers(0, 2, 400) for _ in range(40))):
            order = itertools.chain(pat, itertools.cycle([0, 1]))
            assert _run_barriers(progs, order) == {1: 0, 2: 0}, turns


def test_pingpong_source_matches_emulation():
    """The kernel's AW_PP statements are the emulated protocol: barrier ids 1 + wgc / 2 - wgc
    over 256 threads, warpgroup 0's first arrival, a turn around the first S, each loop
    iteration's S + P V, and the last P V (warpgroup 1 keeps the last turn)."""
    src = codegen.read_kernel("attention_fwd_wgmma.hip")
    assert '"bar.sync %0, 256;" :: "r"(1 + wgc)' in src
    assert '"bar.arrive %0, 256;" :: "r"(2 - wgc)' in src
    body = src[src.index("    if (nb1 > nb0) {\n        wg_bar_wait(bq, 0);"):]
    seq = re.findall(r"bar\.arrive 1, 256|AW_PP_SYNC\(\)|if \(wgc == 0\) AW_PP_PASS\(\)|AW_PP_PASS\(\)|"
                     r"issue_s\(\w+\)|issue_pv\(\w+\)|for \(int n = nb0 \+ 1", body)
    assert seq == ["bar.arrive 1, 256", "AW_PP_SYNC()", "issue_s(0)", "AW_PP_PASS()",
                   "for (int n = nb0 + 1", "AW_PP_SYNC()", "issue_s(st)", "issue_pv(pst)", "AW_PP_PASS()",
                   "AW_PP_SYNC()", "issue_pv(pst)", "if (wgc == 0) AW_PP_PASS()"], seq


# ------------------------------------------------------------------ folded softmax arithmetic
def _online_softmax(S, sl2, fold, bn=128, mask=None):
    """Float32 emulation of the kernel's online softmax over key tiles of ``bn``: returns (P V
    weights normalised, row max on the exp2 scale, row sum).  ``fold``: the max of the raw
    scores times sl2 and p = exp2(fma(s, sl2, -base)); else s sl2 rounded first."""
    f = np.float32
    sl2 = f(sl2)
    rows, n = S.shape
    m = np.full(rows, -np.inf, f)
    lsum = np.zeros(rows, f)
    W = np.zeros((rows, n), f)
    for k0 in range(0, n, bn):
        s = S[:, k0:k0 + bn].astype(f)
        keep = np.ones_like(s, bool) if mask is None else mask[:, k0:k0 + bn]
        if fold:
            s = np.where(keep, s, f(-np.inf))
            mx = (s.max(axis=1) * sl2).astype(f)
        else:
            s = np.where(keep, (s * sl2).astype(f), f(-np.inf))
            mx = s.max(axis=1)
        mn = np.maximum(m, mx)
        base = np.where(mn == -np.inf, f(0), mn).astype(f)
        alpha = np.exp2((m - base).astype(f)).astype(f)
        if fold:   # one rounding of s sl2 - base (the float64 product of two float32 is exact)
            with np.errstate(invalid="ignore"):
                arg = (s.astype(np.float64) * np.float64(sl2) - base[:, None].astype(np.float64)).astype(f)
        else:
            arg = (s - base[:, None]).astype(f)
        p = np.exp2(arg).astype(f)
        W *= alpha[:, None]
        W[:, k0:k0 + bn] = p
        lsum = (lsum * alpha + p.sum(axis=1, dtype=f)).astype(f)
        m = mn
    with np.errstate(invalid="ignore", divide="ignore"):
        return W / lsum[:, None], m, lsum


def test_fold_max_equals_max_of_products():
    """max(s) sl2 rounded = max(s sl2 rounded) (rounding is monotone, sl2 > 0): the folded row
    max is the unfolded one bit for bit."""
    rs = np.random.default_rng(11)
    for sl2 in (np.float32(0.125 * math.log2(math.e)), np.float32(1 / math.sqrt(128) * math.log2(math.e)),
                np.float32(3.7e-3)):
        S = (rs.standard_normal((64, 128)) * rs.choice([1, 30, 1e4], (64, 1))).astype(np.float32)
        a = (S.max(axis=1) * sl2).astype(np.float32)
        b = (S * sl2).astype(np.float32).max(axis=1)
        assert np.array_equal(a, b)


def test_fold_softmax_matches_float64():
    """The folded softmax over several key tiles (masked columns, fully masked rows, large
    logits) against float64; the unfolded emulation for comparison."""
    rs = np.random.default_rng(5)
    rows, n, D = 32, 384, 128
    sl2 = np.float32(1 / math.sqrt(D) * math.log2(math.e))
    S = (rs.standard_normal((rows, n)) * 40).astype(np.float32)
    mask = np.tril(np.ones((rows, n), bool), k=200)       # causal-like band
    mask[3] = False                                        # a row without keys
    mask[5, :130] = False                                  # first tile empty for a row
    ref = np.where(mask, S.astype(np.float64) * float(sl2), -np.inf)
    mref = ref.max(axis=1)
    with np.errstate(invalid="ignore"):
        e = np.exp2(ref - np.where(np.isfinite(mref), mref, 0)[:, None])
        Pref = e / e.sum(axis=1, keepdims=True)
    for fold in (True, False):
        P, m, lsum = _online_softmax(S, sl2, fold, mask=mask)
        ok = mask.any(axis=1)
        assert not ok[3] and lsum[3] == 0 and m[3] == -np.inf
        assert np.all(P[~mask & ok[:, None]] == 0)
        err = np.max(np.abs(P[ok] - Pref[ok]))
        assert err < 2e-6, (fold, err)
        assert np.max(np.abs(m[ok] - mref[ok])) < 1e-4


# ------------------------------------------------------------------ sm_90a compiles
def test_variants_compile_sm90a_without_spills(monkeypatch):
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    cases = [("on", ta.WG_CONFIGS[0]), ("on", ta.WG_CONFIGS[1]), ("pp", ta.WG_CONFIGS[2]),
             ("fold", ta.WG_CONFIGS[6]), ("st3", ta.WG_CONFIGS[0]),
             ("on", dict(dt="HALF", B=1, H=2, Hkv=2, Sq=200, Skv=200, D=256))]
    for i, (var, cfg) in enumerate(cases):
        _set(monkeypatch, var)
        _, g = ta.fwd_graph(**cfg)
        st, _ = _wg_step(g)
        assert c.compile(st[1], f"pp{i}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
        assert " 0 bytes spill stores" in c.last_log, (var, c.last_log)


# ------------------------------------------------------------------ GPU
GPU_CONFIGS = [ta.WG_CONFIGS[i] for i in (0, 1, 2, 3, 4, 6)] + [
    dict(dt="HALF", B=1, H=2, Hkv=2, Sq=130, Skv=1000, D=64, causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=1, H=2, Hkv=1, Sq=64, Skv=128, D=128),    # one tile, one turn each
]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["off", "pp", "fold", "st3"])
@pytest.mark.parametrize("i", range(len(GPU_CONFIGS)))
def test_forward_variant_vs_cpu_reference(R, i, variant, monkeypatch):
    c = GPU_CONFIGS[i]
    if variant == "st3" and c["D"] != 128:
        pytest.skip("three K/V stages: the D = 128 ring")
    _set(monkeypatch, variant)
    rng = np.random.default_rng(100 + i)
    dt, B, Sq, Skv, D = (c[k] for k in ("dt", "B", "Sq", "Skv", "D"))
    ts, g = ta.fwd_graph(**c)
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    byuid = {t.uid: t for t in ts}
    lq = lkv = None
    if c.get("seq"):
        lq, lkv = ta._lens(B, Sq, Skv)
        ins[byuid[6]] = lq.reshape(B, 1, 1, 1)
        ins[byuid[7]] = lkv.reshape(B, 1, 1, 1)
    outs = [ts[3]] + ([byuid[5]] if 5 in byuid else [])
    res = R.run(g, ins, outs)
    p = ta._params(c, D, lq, lkv)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert_sdpa_close(res, O, st, dt)
