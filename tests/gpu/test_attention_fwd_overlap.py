"""The 16-bit wgmma attention forward with the softmax of S(n) overlapped with O += P(n-1) V(n-1)
(``HIPDNN_CABI_HIP_ATTN_FWD_OVL`` = 1 / xch; attention_fwd_wgmma.hip AW_XCH / AW_OVL): the rows'
max / sum go between the four threads of a row through a small shared-memory exchange instead of
warp shuffles, because ptxas waits for every wgmma in flight before a shuffle; with 128-key
tiles and no score roles (knob 1) P(n) is rounded in the overlap too, into a second P register
set.

CI (no GPU): the knob's programs (the define, the exchange, the plan note; knob off: the source
the digests pin), the knob in the plan-cache key and engine.OPT_IN; the exchange's sum order is
the shuffles' order (float32 emulation); the sources compile for sm_90a without spills (D 64 /
96 / 128 / 256, with and without ping-pong / exp2 folding, the score roles, ragged / paged
tensor maps) and their SASS keeps every step's exp2s between the wait for S(n) and the wait
for P(n-1) V(n-1), no shuffle there.  GPU (``-m gpu``): the overlapped kernel against the
default kernel on the same inputs (the same operations in the same order) and against the CPU
reference - fp16 / bf16, causal / full, D 64 / 128 / 256, odd Skv, GQA, padding, bands, a
runtime scale, with and without ping-pong / folding."""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.ops import sdpa as osdpa
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

from gpu_testlib import assert_opt_in_knob, sass_overlap_windows, assert_sdpa_close, nvrtc_or_skip, plan_notes, quantize, relerr
import test_attention as ta
import test_attention_roles as tr

KNOB = "HIPDNN_CABI_HIP_ATTN_FWD_OVL"
NOTE = "softmax overlapped with P V"
# (PINGPONG, EXPFOLD) of each scheduling variant; "on" is the default
VARIANTS = {"on": ("1", "1"), "off": ("0", "0"), "pp": ("1", "0"), "fold": ("0", "1")}


def _set(monkeypatch, ovl, variant="on"):
    pp, fold = VARIANTS[variant]
    monkeypatch.setenv(KNOB, ovl)
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_PINGPONG", pp)
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_EXPFOLD", fold)
    monkeypatch.delenv("HIPDNN_CABI_HIP_ATTN_STAGES", raising=False)


def _wg(g):
    prog = build_program(parse_graph(g), arch="sm_90")
    steps = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_attn_fwd_wg"]
    assert len(steps) == 1, [s[2] for s in prog.steps]
    return steps[0], prog.notes


# ---------------------------------------------------------------------------- CI (no GPU)
def test_knob_programs(monkeypatch):
    for var in VARIANTS:
        for c in (ta.WG_CONFIGS[0], ta.WG_CONFIGS[5]):
            _, g = ta.fwd_graph(**c)
            _set(monkeypatch, "0", var)
            off, notes = _wg(g)
            assert "AW_OVL" not in off[1] and "AW_XCH" not in off[1] and "aw_xch" not in off[1]
            assert not any(NOTE in n for n in notes)
            monkeypatch.delenv(KNOB)
            assert _wg(g)[0][1] == off[1]        # unset = 0: the source the digests pin
            _set(monkeypatch, "1", var)
            on, notes = _wg(g)
            assert re.search(r"^#define AW_XCH 1$", on[1], re.M) and "aw_xch" in on[1]
            # the second P register set (conversions in the overlap) with 128-key tiles
            assert re.search(r"^#define AW_OVL 1$", on[1], re.M)
            assert any(NOTE in n for n in notes), notes
            assert on[6]["shmem"] == off[6]["shmem"]     # (the exchange is static shared memory)
            assert on[3:6] == off[3:6]
            # the only differences: the define and the AW_OVL blocks
            keep = {f: 1 for f in osdpa.OPTIONAL if f not in ("AW_XCH", "AW_OVL")}
            bare = on[1].replace("#define AW_XCH 1\n", "").replace("#define AW_OVL 1\n", "")
            assert osdpa._drop_off(bare, keep) == off[1]
    # heads wider than 128 (64-key tiles) or score roles: the exchange only, P rounded after
    # the wait (registers)
    _set(monkeypatch, "1")
    _, g = ta.fwd_graph(dt="HALF", B=1, H=2, Hkv=2, Sq=200, Skv=200, D=256)
    on, _ = _wg(g)
    assert re.search(r"^#define AW_XCH 1$", on[1], re.M) and "#define AW_OVL" not in on[1]
    # xch: the exchange alone everywhere
    _set(monkeypatch, "xch")
    _, g = ta.fwd_graph(**ta.WG_CONFIGS[0])
    on, notes = _wg(g)
    assert re.search(r"^#define AW_XCH 1$", on[1], re.M) and "#define AW_OVL" not in on[1]
    assert any(NOTE in n for n in notes), notes
    _set(monkeypatch, "1")
    _, g = tr.fwd_graph(**tr.FWD_CONFIGS[1])
    on, _ = _wg(g)
    assert re.search(r"^#define AW_XCH 1$", on[1], re.M) and "#define AW_OVL" not in on[1]


def test_knob_is_in_the_cache_key_and_opt_in(monkeypatch):
    assert_opt_in_knob(monkeypatch, KNOB, "xch")


def test_quad_sum_order_is_the_shuffles():
    """Shuffles: v += v^1; v += v^2 gives (v + v^1) + (v^2 + v^3) in every lane (float addition
    commutes); the exchange computes (v + a) + (b + c) with a, b, c the values of lanes ^1, ^2,
    ^3: bit for bit the same sums (and maxima: max is exact in any order)."""
    rs = np.random.default_rng(7)
    f = np.float32
    for scale in (1.0, 1e-3, 3e4):
        v = (rs.standard_normal((4096, 32)) * scale * rs.choice([1, 1e-6, 1e6], (4096, 32))).astype(f)
        lanes = np.arange(32)
        s1 = (v + v[:, lanes ^ 1]).astype(f)
        shfl = (s1 + s1[:, lanes ^ 2]).astype(f)
        xch = ((v + v[:, lanes ^ 1]).astype(f) + (v[:, lanes ^ 2] + v[:, lanes ^ 3]).astype(f)).astype(f)
        assert np.array_equal(shfl.view(np.uint32), xch.view(np.uint32))
        m1 = np.maximum(v, v[:, lanes ^ 1])
        mx = np.maximum(m1, m1[:, lanes ^ 2])
        assert np.array_equal(mx, np.maximum(np.maximum(v, v[:, lanes ^ 1]),
                                             np.maximum(v[:, lanes ^ 2], v[:, lanes ^ 3])))


def _sass_windows(sass):
    return sass_overlap_windows(sass, "hdn_attn_fwd_wg")


def _varlen():
    """One ragged and one paged forward graph the wgmma kernel runs (test_attention_paged_ragged)."""
    import test_attention_paged_ragged as tpr
    gs = [x for x in tpr._varlen_graphs() if x[2]]
    return [next(g for t, g, _ in gs if t.startswith("ragged")), next(g for t, g, _ in gs if t.startswith("paged"))]


# (variant, graph builder, config): the bench shape's kernel (D 128 full), D 64 / 256, causal,
# bands, GQA + padding, a runtime scale (no folding), the score roles (mask, ALiBi, block mask
# with tile skipping, sink), every scheduling variant
SPILL_CASES = [
    ("on", ta, dict(dt="BFLOAT16", B=1, H=2, Hkv=2, Sq=512, Skv=512, D=128)),
    ("on", ta, ta.WG_CONFIGS[0]), ("on", ta, ta.WG_CONFIGS[3]), ("on", ta, ta.WG_CONFIGS[4]),
    ("on", ta, ta.WG_CONFIGS[1]), ("on", ta, ta.WG_CONFIGS[2]), ("on", ta, ta.WG_CONFIGS[5]),
    ("on", ta, ta.WG_CONFIGS[6]), ("on", ta, ta.WG_CONFIGS[7]),
    ("on", ta, dict(dt="HALF", B=1, H=2, Hkv=2, Sq=200, Skv=200, D=256)),
    ("on", ta, dict(dt="HALF", B=1, H=2, Hkv=2, Sq=200, Skv=200, D=192)),
    ("off", ta, ta.WG_CONFIGS[0]), ("off", ta, ta.WG_CONFIGS[1]),
    ("off", ta, dict(dt="HALF", B=1, H=2, Hkv=2, Sq=200, Skv=200, D=256)),
    ("pp", ta, ta.WG_CONFIGS[2]), ("fold", ta, ta.WG_CONFIGS[1]),
    ("on", tr, tr.FWD_CONFIGS[1]), ("on", tr, tr.FWD_CONFIGS[2]), ("on", tr, tr.FWD_CONFIGS[4]),
    ("on", tr, tr.FWD_CONFIGS[6]), ("on", tr, tr.FWD_CONFIGS[9]),
    ("on", ta, dict(dt="BFLOAT16", B=1, H=2, Hkv=2, Sq=512, Skv=512, D=128), "xch"),
    ("off", ta, ta.WG_CONFIGS[1], "xch"),
]


@pytest.mark.parametrize("i", range(len(SPILL_CASES) + 2))
def test_overlap_sources_compile_sm90a_without_spills(i, monkeypatch, tmp_path):
    from test_kernel_sources import _cuobjdump, _sass
    c = nvrtc_or_skip()
    mod = None
    knob = "1"
    if i < len(SPILL_CASES):
        var, mod, kw = SPILL_CASES[i][:3]
        knob = SPILL_CASES[i][3] if len(SPILL_CASES[i]) > 3 else "1"
        _set(monkeypatch, knob, var)
        _, g = mod.fwd_graph(**kw)
    else:
        _set(monkeypatch, "1")
        monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", "auto")
        g = _varlen()[i - len(SPILL_CASES)]
    st, notes = _wg(g)
    assert any(NOTE in n for n in notes), notes
    bn = int(re.search(r"^#define AW_BN (\d+)$", st[1], re.M).group(1))
    two = re.search(r"^#define AW_OVL 1$", st[1], re.M) is not None    # (the second P set)
    assert two == (bn == 128 and mod is not tr and knob == "1"), i
    img = c.compile(st[1], f"awovl{i}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
    log = c.last_log
    fwd = log[log.index("'hdn_attn_fwd_wg'"):]
    fwd = fwd[:fwd.index("'hdn_attn_wg_maps'")] if "'hdn_attn_wg_maps'" in fwd else fwd
    assert " 0 bytes spill stores" in fwd and " 0 bytes spill loads" in fwd, (i, log)
    assert all(" 0 bytes spill stores" in ln for ln in log.splitlines() if "spill stores" in ln), log
    assert not re.search(r"C75(08|13|14)", log), (i, "wgmma serialised", log)
    assert "1024 bytes smem" in fwd, fwd                 # (aw_xch)
    exe, env = _cuobjdump()
    if exe is None:
        return
    win = _sass_windows(_sass(exe, env, tmp_path, f"awovl{i}", img))
    assert win, i
    # every step's softmax exp2s (128-key tiles: and P's conversions) run while P(n-1) V(n-1)
    # is in flight, no shuffle there (the loop of two steps: one window each, or one where the
    # compiler folds the two into one body)
    for ex2, f2fp, shfl in win:
        assert ex2 >= bn // 2 and shfl == 0, (i, win)
        assert f2fp >= (bn // 4 if two else 0), (i, win)


def test_sass_window_without_the_knob_has_no_exp2(monkeypatch, tmp_path):
    """The kernel without AW_OVL: the shuffles of the row max pull the wait for P V above the
    exp2s (what the knob changes; if a ptxas stops doing so this documents it)."""
    from test_kernel_sources import _cuobjdump, _sass
    c = nvrtc_or_skip()
    exe, env = _cuobjdump()
    if exe is None:
        pytest.skip("cuobjdump / nvdisasm not installed")
    _set(monkeypatch, "0")
    _, g = ta.fwd_graph(**SPILL_CASES[0][2])
    st, _ = _wg(g)
    img = c.compile(st[1], "awovl_off.hip", (), "sm_90a", codegen.headers())
    win = _sass_windows(_sass(exe, env, tmp_path, "awovl_off", img))
    assert win and all(shfl > 0 for _, _, shfl in win), win


# ---------------------------------------------------------------------------- GPU
GPU_CASES = [
    ("on", dict(dt="HALF", B=1, H=4, Hkv=2, Sq=300, Skv=333, D=128, causal_mask=True)),
    ("on", dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=257, Skv=1100, D=64)),
    ("on", dict(dt="HALF", B=3, H=2, Hkv=2, Sq=300, Skv=333, D=128, seq=True)),
    ("on", dict(dt="BFLOAT16", B=3, H=4, Hkv=1, Sq=200, Skv=520, D=64, seq=True, causal_mask=True)),
    ("on", dict(dt="BFLOAT16", B=1, H=4, Hkv=1, Sq=260, Skv=150, D=128, causal_mask_bottom_right=True)),
    ("on", dict(dt="BFLOAT16", B=1, H=2, Hkv=2, Sq=333, Skv=333, D=64, left_bound=100, right_bound=37)),
    ("on", dict(dt="HALF", B=1, H=2, Hkv=1, Sq=129, Skv=255, D=128, scale_mode="runtime")),
    ("on", dict(dt="HALF", B=1, H=2, Hkv=2, Sq=200, Skv=391, D=256)),
    ("on", dict(dt="BFLOAT16", B=1, H=2, Hkv=1, Sq=64, Skv=128, D=128)),    # one tile
    ("off", dict(dt="HALF", B=1, H=4, Hkv=2, Sq=300, Skv=333, D=128, causal_mask=True)),
    ("off", dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=257, Skv=1100, D=64, seq=True)),
    ("pp", dict(dt="BFLOAT16", B=1, H=8, Hkv=2, Sq=390, Skv=777, D=128)),
    ("fold", dict(dt="HALF", B=2, H=4, Hkv=4, Sq=257, Skv=700, D=64, causal_mask=True)),
]


def _run(R, c, seed):
    """(results, float64 reference O, stats) of the forward graph c on inputs from seed."""
    rng = np.random.default_rng(seed)
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
    scalars = {10: 0.3} if c.get("scale_mode") == "runtime" else None     # (test_attention.py)
    outs = [ts[3]] + ([byuid[5]] if 5 in byuid else [])
    res = R.run(g, ins, outs, scalars=scalars)
    p = ta._params(c, D, lq, lkv, scale=float(np.float32(0.3)) if scalars else None)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    return res, O, st, g


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(GPU_CASES)))
def test_overlap_vs_default_and_cpu_reference(R, i, monkeypatch):
    var, c = GPU_CASES[i]
    _set(monkeypatch, "0", var)
    base, O, st, g = _run(R, c, 900 + i)
    for ovl in ("1", "xch"):
        _set(monkeypatch, ovl, var)
        res, _, _, _ = _run(R, c, 900 + i)
        notes = plan_notes(g) if getattr(R, "rt", None) is not None else \
            build_program(parse_graph(g), arch="sm_90").notes
        assert any(NOTE in n for n in notes), notes
        # the default kernel's operations in its order: equal up to rounding noise
        assert np.isfinite(res[4]).all()
        assert relerr(res[4], base[4]) < 1e-3, (ovl, relerr(res[4], base[4]))
        if 5 in base:
            fin = np.isfinite(base[5])
            assert np.array_equal(np.isfinite(res[5]), fin)
            assert np.max(np.abs(res[5][fin] - base[5][fin]), initial=0) < 1e-4, ovl
        assert_sdpa_close(res, O, st, c["dt"])


# ---------------------------------------------------------------------------- host model
def _loop(nb0, nb1, live, st_n, ovl):
    """The consumer warpgroup's ring / GEMM events over the key tiles nb0..nb1 (``live``: the
    tiles the block mask keeps, hdn_attn_blk_next) as the kernel issues them: ("kw", stage,
    phase), ("ka", stage), ("vw", stage, phase), ("va", stage), ("s", tile), ("pv", tile),
    ("turn",); ``ovl``: the AW_OVL loop (two steps an iteration, P in pa / pb), checking that
    every P V reads the register set the step before wrote.  Returns the events."""
    ev, regs = [], {}

    def nxt(n):
        while n < nb1 and n not in live:
            n += 1
        return n

    n0 = nxt(nb0)
    if n0 >= nb1:
        return ev
    ev += [("kw", 0, 0), ("turn",), ("s", n0), ("ka", 0)]
    regs["pa"] = n0
    prev = n0

    def step(n, it, pin, pout):
        nonlocal prev
        st, pst = it % st_n, (it - 1) % st_n
        ev.extend([("kw", st, (it // st_n) & 1), ("turn",), ("s", n), ("vw", pst, ((it - 1) // st_n) & 1)])
        assert regs.get(pin) == prev, (pin, regs, prev)
        ev.extend([("pv", prev), ("ka", st)])
        regs[pout] = n
        ev.append(("va", pst))
        prev = n

    def last(it, p):
        pst = (it - 1) % st_n
        ev.append(("vw", pst, ((it - 1) // st_n) & 1))
        assert regs.get(p) == prev, (p, regs, prev)
        ev.extend([("turn",), ("pv", prev), ("va", pst)])

    if ovl:         # the kernel's AW_OVL loop
        n, it = n0 + 1, 1
        while True:
            n = nxt(n)
            if n >= nb1:
                break
            step(n, it, "pa", "pb")
            n, it = n + 1, it + 1
            n = nxt(n)
            if n >= nb1:
                break
            step(n, it, "pb", "pa")
            n, it = n + 1, it + 1
        last(it, "pa" if it & 1 else "pb")
    else:           # the loop without it (P always rounded into pa after the wait)
        it, n = 1, n0 + 1
        while n < nb1:
            n = nxt(n)
            if n >= nb1:
                break
            step(n, it, "pa", "pa")
            n, it = n + 1, it + 1
        last(it, "pa")
    return ev


def test_overlapped_loop_host_model():
    """The AW_OVL loop issues the same ring waits / releases (stage, phase), the same S / P V
    tiles and the same ping-pong turns in the same order as the loop without it, for any tile
    count and block-mask pattern, and each P V reads the P register set its step wrote."""
    rs = np.random.default_rng(12)
    cases = [(0, 1, None), (0, 2, None), (0, 3, None), (2, 9, None), (0, 32, None), (5, 6, None)]
    cases += [(0, int(m), set(np.flatnonzero(rs.random(int(m)) < 0.5).tolist())) for m in rs.integers(1, 20, 30)]
    for nb0, nb1, live in cases:
        lv = set(range(nb0, nb1)) if live is None else live
        for st_n in (2, 3, 4):
            a, b = _loop(nb0, nb1, lv, st_n, False), _loop(nb0, nb1, lv, st_n, True)
            assert a == b, (nb0, nb1, lv, st_n)
            tiles = sorted(t for t in lv if nb0 <= t < nb1)
            assert [e[1] for e in b if e[0] == "s"] == tiles
            assert [e[1] for e in b if e[0] == "pv"] == tiles
            assert sum(e == ("turn",) for e in b) == (len(tiles) + 1 if tiles else 0)


def test_kernel_loop_matches_the_model():
    """The model above follows the kernel's AW_OVL text: the lines it mirrors."""
    src = codegen.read_kernel("attention_fwd_wgmma.hip")
    body = src[src.index("    // AW_OVL (with AW_XCH"):src.index("    // epilogue")]
    for line in ("const int st = it % AW_ST, pst = (it - 1) % AW_ST;",
                 "const unsigned ph = (unsigned)(it / AW_ST) & 1u, pph = (unsigned)((it - 1) / AW_ST) & 1u;",
                 "wg_bar_wait(bkf + 8 * st, ph);", "issue_s(st);", "wg_bar_wait(bvf + 8 * pst, pph);",
                 "issue_pv2(pst, pin);", "wg_bar_arrive(bke + 8 * st);", "pack_into(pout);",
                 "wg_bar_arrive(bve + 8 * pst);",
                 "wg_bar_wait(bvf + 8 * pst, (unsigned)((it - 1) / AW_ST) & 1u);", "issue_pv2(pst, p);",
                 "int n = nb0 + 1, it = 1;", "n = AW_NEXT(n);", "if (n >= nb1) break;",
                 "step(n, it, pa, pb);", "step(n, it, pb, pa);", "++n, ++it;",
                 "if (it & 1) last_pv(it, pa);", "else last_pv(it, pb);",
                 "#define AW_NEXT(n) hdn_attn_blk_next(bkrow, q0, AW_BM, n, nb1, AW_BN)"):
        assert line in body, line
    assert body.count("step(n, it, pa, pb);") == 1 and body.count("++n, ++it;") == 2
