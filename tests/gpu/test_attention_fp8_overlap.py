"""The one-sweep FP8 attention forward with S = Q K^T and P V overlapped inside the warpgroup
(``HIPDNN_CABI_HIP_ATTN_FP8_OVERLAP`` = 1 / pp; attention_fwd_fp8_wgmma.hip F8_OVL / F8_PP).

CI (no GPU): the knob's programs (the defines, the plan note; the exact two-sweep form and the
knob off keep the serial kernel), the knob in the plan-cache key and engine.OPT_IN; the
overlapped sources compile for sm_90a without spills, and their SASS keeps the exp2s and the
P conversions of a step between the wait for S(t) and the wait for P V(t-1) with no shuffle
there (ptxas waits for every wgmma in flight before a shuffle); a host model of the kernel's
step / ring-index arithmetic against the producer's K / Vt ring order.  GPU (``-m gpu``): the
overlapped kernel (and its ping-pong form) against the serial one-sweep kernel on the same inputs
(the same operations in the same order: equal up to rounding noise) and against the CPU
reference with the one-sweep tolerances of test_attention_fp8.py - causal and full, Skv not a
multiple of the 128-key tile, D 64 / 128 / 256, Dv 192 (two 64-key sub-tiles per tile), GQA,
padding, the score roles and dropout, amax_s / amax_o and the statistics."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import test_attention_fp8 as taf
from gpu_testlib import assert_opt_in_knob, sass_overlap_windows, nvrtc_or_skip, plan_notes, relerr
from test_attention_fp8 import CONFIGS, ROLE_CONFIGS, UID, f8_graph

KNOB = "HIPDNN_CABI_HIP_ATTN_FP8_OVERLAP"
NOTE = "S / P V overlapped"
BENCH = dict(fmt="FP8_E4M3", odt="FP8_E4M3", B=8, H=16, Hkv=16, Sq=4096, Skv=4096, D=128, stats=False)


def _main(prog):
    st = prog.steps[-1]
    assert st[0] == "launch" and st[2] == "hdn_attn_fwd_f8"
    return st


def _prog(monkeypatch, ovl, mode="flash", **c):
    monkeypatch.setenv(KNOB, ovl)
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", mode)
    _, g = f8_graph(**c)
    return build_program(parse_graph(g), arch="sm_90")


# ---------------------------------------------------------------------------- CI (no GPU)
def test_knob_programs(monkeypatch):
    prog = _prog(monkeypatch, "0")
    src = _main(prog)[1]
    assert "F8_OVL" not in src and "f8_xch" not in src and "#define F8_TWO_PASS 0\n" in src
    assert not any(NOTE in n for n in prog.notes)
    prog = _prog(monkeypatch, "1")
    src = _main(prog)[1]
    assert "#define F8_OVL 1\n" in src and "#define F8_PP 1" not in src and "f8_xch" in src
    assert any(n.endswith("one sweep, V transposed into the workspace, " + NOTE) for n in prog.notes), prog.notes
    prog = _prog(monkeypatch, "pp")
    src = _main(prog)[1]
    assert "#define F8_OVL 1\n" in src and "#define F8_PP 1\n" in src
    assert any(n.endswith(NOTE + ", ping-pong") for n in prog.notes), prog.notes
    # the exact two-sweep form keeps the serial kernel
    prog = _prog(monkeypatch, "1", "exact")
    assert "F8_OVL" not in _main(prog)[1] and not any(NOTE in n for n in prog.notes)
    # the same source as the knob off, the kernel the digests pin
    assert _main(prog)[1] == _main(_prog(monkeypatch, "0", "exact"))[1]


def test_knob_is_in_the_cache_key_and_opt_in(monkeypatch):
    assert_opt_in_knob(monkeypatch, KNOB)


def _sass_windows(sass):
    return sass_overlap_windows(sass, "hdn_attn_fwd_f8")


# the bench shape, the heaviest role mixes (every role with dropout at D 256 / Dv 192; mask +
# ALiBi + sink + causal; wide heads), D 64 causal and Dv 192 (64-key sub-tiles)
SPILL_CASES = [BENCH, ROLE_CONFIGS[12], ROLE_CONFIGS[11], dict(ROLE_CONFIGS[11], D=256, Dv=256),
               ROLE_CONFIGS[7], CONFIGS[1], ROLE_CONFIGS[9]]


@pytest.mark.parametrize("ovl", ["1", "pp"])
def test_overlap_sources_compile_sm90a_without_spills(ovl, monkeypatch, tmp_path):
    from test_kernel_sources import _cuobjdump, _sass
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    for i, kw in enumerate(SPILL_CASES):
        src = _main(_prog(monkeypatch, ovl, **kw))[1]
        img = c.compile(src, f"f8ovl{ovl}{i}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
        assert c.last_log.count(" 0 bytes spill stores") == 2, (i, c.last_log)
        fwd = c.last_log[c.last_log.index("'hdn_attn_fwd_f8'"):c.last_log.index("'hdn_attn_f8_vt'")]
        assert "1024 bytes smem" in fwd, fwd            # (f8_xch)
        # the turns' named barriers 1 and 2 with the CTA barrier
        assert f"used {1 if ovl == '1' else 3} barriers" in fwd, fwd
        if exe is None:
            continue
        win = _sass_windows(_sass(exe, env, tmp_path, f"f8ovl{ovl}{i}", img))
        sub = 64 if kw.get("Dv", kw.get("D", 128)) > 128 else 128
        assert win, i
        # every step's softmax exp2s and P conversions run while P V(t-1) is in flight
        for ex2, f2fp, shfl in win:
            assert ex2 >= sub // 2 and f2fp >= sub // 8 and shfl == 0, (i, win)


def _model(nb0, nb1, nsub, st, pp):
    """The consumer side of the overlapped sweep, as the kernel computes it: the events of one
    warpgroup in order - ("kw", item, phase), ("ka", item), ("vw", item, phase), ("va", item),
    ("s", item, sub-tile, kv0), ("pv", item, sub-tile, P set), ("turn",) - with step 0 serial
    (scores / pack_p) and steps 1.. in pairs (P in pa on even steps, pb on odd ones)."""
    ev = []
    bn, sub = 128, 128 // nsub
    nt, kit0 = (nb1 - nb0) * nsub, 0

    def scores(kit, u):
        s_ = kit % st
        if u == 0:
            ev.append(("kw", kit, (kit // st) & 1))
        ev.append(("s", kit, u, nb0 * bn + kit * bn + u * sub))
        if u == nsub - 1:
            ev.append(("ka", kit))
        return s_

    def step(t, u, pin):
        assert u == t % nsub
        pu = nsub - 1 if u == 0 else u - 1
        ki, vi = kit0 + t // nsub, (t - 1) // nsub
        if u == 0:
            ev.append(("kw", ki, (ki // st) & 1))
        if pp:
            ev.append(("turn",))
        ev.append(("s", ki, u, nb0 * bn + t * sub))
        if pu == 0:
            ev.append(("vw", vi, (vi // st) & 1))
        ev.append(("pv", vi, pu, pin))
        if u == nsub - 1:
            ev.append(("ka", ki))
        if pu == nsub - 1:
            ev.append(("va", vi))

    def last(p):
        vi = (nt - 1) // nsub
        if nsub == 1:
            ev.append(("vw", vi, (vi // st) & 1))
        if pp:
            ev.append(("turn",))
        ev.append(("pv", vi, nsub - 1, p))
        ev.append(("va", vi))

    scores(kit0, 0)
    t = 1
    while t + 1 < nt:
        step(t, 1 % nsub, "pa")
        step(t + 1, 0, "pb")
        t += 2
    if t < nt:
        step(t, 1 % nsub, "pa")
        last("pb")
    else:
        last("pa")
    return ev


@pytest.mark.parametrize("nsub", [1, 2])
@pytest.mark.parametrize("st", [2, 3, 4])
def test_step_schedule_host_model(nsub, st):
    """Every K / Vt ring item is waited for once, with the phase of its ring round, before its
    first product and released once after its last; S walks the keys in order, P V the same
    sub-tiles one step behind with the P set the previous step wrote; the ping-pong turns are
    one per step after the first plus one for the last P V in both warpgroups."""
    for nb0, nb1 in [(0, 1), (0, 2), (0, 3), (3, 4), (2, 9), (0, 32)]:
        for pp in (False, True):
            ev = _model(nb0, nb1, nsub, st, pp)
            n = nb1 - nb0
            assert [e[1] for e in ev if e[0] == "kw"] == list(range(n))
            assert [e[1] for e in ev if e[0] == "ka"] == list(range(n))
            assert [e[1] for e in ev if e[0] == "vw"] == list(range(n))
            assert [e[1] for e in ev if e[0] == "va"] == list(range(n))
            assert all(e[2] == (e[1] // st) & 1 for e in ev if e[0] in ("kw", "vw"))
            s = [e for e in ev if e[0] == "s"]
            assert [e[3] for e in s] == [nb0 * 128 + i * (128 // nsub) for i in range(n * nsub)]
            assert [(e[1], e[2]) for e in s] == [(i // nsub, i % nsub) for i in range(n * nsub)]
            pv = [e for e in ev if e[0] == "pv"]
            assert [(e[1], e[2]) for e in pv] == [(e[1], e[2]) for e in s]
            assert [e[3] for e in pv] == ["pa" if i % 2 == 0 else "pb" for i in range(n * nsub)]
            # each wait comes before the item's products, each release after them
            pos = {e: i for i, e in enumerate(ev)}
            for k in range(n):
                kw = pos[next(e for e in ev if e[0] == "kw" and e[1] == k)]
                ka = pos[("ka", k)]
                ks = [i for i, e in enumerate(ev) if e[0] == "s" and e[1] == k]
                assert kw < min(ks) and ka > max(ks)
                vw = pos[next(e for e in ev if e[0] == "vw" and e[1] == k)]
                va = pos[("va", k)]
                vs = [i for i, e in enumerate(ev) if e[0] == "pv" and e[1] == k]
                assert vw < min(vs) and va > max(vs)
            assert sum(e[0] == "turn" for e in ev) == (n * nsub if pp else 0)


def test_kernel_step_arithmetic_matches_the_model():
    """The model above follows the kernel's text: the step / ring-index lines it mirrors."""
    src = codegen.read_kernel("attention_fwd_fp8_wgmma.hip")
    body = src[src.index("#if F8_OVL\n"):src.index("#else\n    if (nb1 > nb0) {")]
    for line in ("const int pu = u == 0 ? F8_NSUB - 1 : u - 1;",
                 "const int ki = kit0 + t / F8_NSUB, vi = (t - 1) / F8_NSUB;",
                 "const int kv0 = nb0 * F8_BN + t * F8_SUB;",
                 "if (u == 0) wg_bar_wait(bkf + 8 * st, (unsigned)(ki / F8_ST) & 1u);",
                 "if (pu == 0) wg_bar_wait(bvf + 8 * sv, (unsigned)(vi / F8_ST) & 1u);",
                 "if (u == F8_NSUB - 1) wg_bar_arrive(bke + 8 * st);",
                 "if (pu == F8_NSUB - 1) wg_bar_arrive(bve + 8 * sv);",
                 "for (; t + 1 < nt; t += 2) {",
                 "step(t, 1 % F8_NSUB, pa, pb);",
                 "step(t + 1, 0, pb, pa);",
                 "if (F8_NSUB == 1) wg_bar_wait(bvf + 8 * sv, (unsigned)(vi / F8_ST) & 1u);",
                 "if (wgc == 1) asm volatile(\"bar.arrive 1, 256;\" ::: \"memory\");",
                 "if (wgc == 0) F8_PP_PASS();"):
        assert line in body, line


# ---------------------------------------------------------------------------- GPU
# full / causal, Skv not a multiple of 128, D 64 / 128, GQA, padding; the roles: additive mask,
# boolean mask, ALiBi + bottom-right causal, block mask, sink + padding + causal, dropout, wide
# heads (D 256 causal; Dv 192: 64-key sub-tiles), every role with dropout at D 256 / Dv 192
GPU_CASES = [CONFIGS[0], CONFIGS[1], CONFIGS[2], CONFIGS[3], CONFIGS[5]] + \
    [ROLE_CONFIGS[i] for i in (0, 3, 4, 5, 6, 7, 8, 9, 11, 12)]


def _run_seeded(R, c, monkeypatch, ovl, seed):
    """taf._run with the knob at ovl and the module's generator reseeded: the same inputs for
    every knob value; returns taf._run's tuple."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", "flash")
    monkeypatch.setenv(KNOB, ovl)
    monkeypatch.setattr(taf, "rng", np.random.default_rng(seed))
    return taf._run(R, c)


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(GPU_CASES)))
def test_overlap_vs_serial_and_cpu_reference(R, i, monkeypatch):
    c = GPU_CASES[i]
    base, *_ = _run_seeded(R, c, monkeypatch, "0", 4000 + i)
    for ovl in ("1", "pp"):
        res, O, st, am_s, am_o, odt = _run_seeded(R, c, monkeypatch, ovl, 4000 + i)
        _, g = f8_graph(**c)
        # the engine's plan on the device (the CPU stand-in: the sm_90 program)
        notes = plan_notes(g) if getattr(R, "rt", None) is not None else \
            build_program(parse_graph(g), arch="sm_90").notes
        assert any(NOTE in n for n in notes), notes
        assert any(n.endswith("ping-pong") for n in notes) == (ovl == "pp"), notes
        # the serial kernel's operations in its order: equal up to rounding noise
        assert np.isfinite(res[4]).all()
        assert relerr(res[4], base[4]) < 5e-3, (ovl, relerr(res[4], base[4]))
        for u in (5, UID["amax_s"], UID["amax_o"]):
            if u in res:
                a, b = res[u], base[u]
                assert np.array_equal(np.isfinite(a), np.isfinite(b)), (ovl, u)
                fin = np.isfinite(b)
                assert np.allclose(a[fin], b[fin], rtol=1e-4, atol=1e-5), (ovl, u)
        # the CPU reference, as the serial one-sweep tests (test_attention_fp8.py)
        tol = 0.15 if c.get("fmt") == "FP8_E5M2" else 0.1
        assert relerr(res[4], O) < tol, (ovl, relerr(res[4], O))
        if 5 in res:
            fin = np.isfinite(st)
            assert np.array_equal(np.isfinite(res[5]), fin)
            assert np.max(np.abs(res[5][fin] - st[fin])) < 5e-3
        if UID["amax_s"] in res:
            assert abs(float(res[UID["amax_s"]].ravel()[0]) - am_s) <= 3e-3 * am_s
            assert abs(float(res[UID["amax_o"]].ravel()[0]) - am_o) <= 0.2 * am_o
