"""FP8 attention forward on the HIP engine (attention_fwd_fp8_wgmma.hip).

CI (no GPU): the programs an sm_90 device gets (amax zeroed, V transposed into the workspace,
the wgmma kernel; the score roles' and dropout's defines and parameters, the K / Vt ring depth
of wide heads) and the declines elsewhere (no sm_90, AMD, the backward, max / sum_exp,
rng_dump, paged K/V, heads past 256...); the sources compile for sm_90a with NVRTC without
spills; host emulation of the key order of the transposed V (hdn_attn_f8_key: the order the P
register fragment holds), of the V transpose pre-pass, and of one thread's fragment of scores
(hdn_attn_wg_mask with the score modifiers, hdn_attn_wg_keep_bits) under a generated prelude
against the CPU reference's scores and Philox keep mask.  GPU (``-m gpu``): against the CPU
reference's fp8 path (the oracle) on the same fp8 inputs - O, the statistics, amax_s / amax_o -
over full / causal / padded / banded attention, D 64..256 with Dv != D, GQA, e4m3 / e5m2 and
fp8 / fp16 / bf16 / fp32 outputs, the scales as device tensors, constants and runtime scalars,
and the score roles (additive / boolean attn_mask, ALiBi, block mask, sink token, dropout)
alone and combined, in both the exact two-sweep and the one-sweep mode."""
from __future__ import annotations

import math
import os
import shutil
import subprocess

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.ops.sdpa import fp8_smem_bytes
from engine_plugins.hip_kernels.program import NotApplicable, build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import gpu_testlib
from engine_plugins.cpu_reference.kernels import philox as kphilox
from gpu_testlib import T, graph_bytes, node, nvrtc_or_skip, quantize, relerr, sdpa_mod_inputs, sdpa_optional

gpu_testlib.NP.setdefault("UINT8", np.uint8)
gpu_testlib.NP.setdefault("UNSET", np.uint8)     # BOOLEAN: one byte, 0 / 1
rng = np.random.default_rng(808)
SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
# the scale values the tests use (descale_s = 1 / scale_s, as a calibrated pipeline has it)
VALUES = dict(descale_q=0.5, descale_k=0.75, descale_v=1.25, descale_s=1 / 256.0, scale_s=256.0,
              scale_o=4.0)
UID = {r: 20 + i for i, r in enumerate(SCALES + ("amax_s", "amax_o"))}
MOD = dict(mask=30, block=31, sink=32)      # the score roles' uids


def f8_graph(fmt="FP8_E4M3", odt="HALF", B=2, H=4, Hkv=2, Sq=200, Skv=300, D=128, Dv=None,
             stats=True, seq=False, scales="tensor", amax=True, extra=(), mask=None, alibi=False,
             block=None, sink=None, drop=None, **attrs):
    """scales: "tensor" (1-element device tensors), "const" (by-value constants in the graph),
    "runtime" (runtime pass-by-value scalars) or "none" (all 1).  The score roles: mask (its
    dims, dtype - UNSET: boolean), alibi, block (the block mask's [B|1, H|1]), sink (the sink
    logits' dtype), drop (the dropout probability; seed / offset device tensors)."""
    Dv = D if Dv is None else Dv
    ts = [T(1, [B, H, Sq, D], fmt), T(2, [B, Hkv, Skv, D], fmt), T(3, [B, Hkv, Skv, Dv], fmt),
          T(4, [B, H, Sq, Dv], odt), *extra]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "attn_scale_value": 1 / math.sqrt(D)}
    sdpa_optional(ts, a, B, H, Sq, stats, seq, drop)
    if mask is not None:
        ts.append(T(MOD["mask"], mask[0], mask[1]))
        a.update(attn_mask_tensor_uid=MOD["mask"])
    if alibi:
        a.update(alibi_mask=True)
    if block is not None:
        ts.append(T(MOD["block"], list(block) + [-(-Sq // 128), -(-(-(-Skv // 128)) // 8)],
                    "UINT8"))
        a.update(block_mask_tensor_uid=MOD["block"])
    if sink is not None:
        ts.append(T(MOD["sink"], [1, H, 1, 1], sink))
        a.update(sink_token_tensor_uid=MOD["sink"])
    if scales != "none":
        for r in SCALES:
            if scales == "const":
                ts.append(T(UID[r], [1, 1, 1, 1], "FLOAT", value=float(VALUES[r])))
            else:
                ts.append(T(UID[r], [1, 1, 1, 1], "FLOAT", runtime=scales == "runtime"))
            a[f"{r}_tensor_uid"] = UID[r]
    if amax:
        for r in ("amax_s", "amax_o"):
            ts.append(T(UID[r], [1, 1, 1, 1], "FLOAT"))
            a[f"{r}_tensor_uid"] = UID[r]
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaAttributes", a)])


_compiler = nvrtc_or_skip


# ---------------------------------------------------------------------------- CI (no GPU)
def test_program_on_sm90(monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", "exact")
    B, Hkv, Skv, Dv = 2, 2, 300, 64
    _, g = f8_graph(D=128, Dv=Dv)
    prog = build_program(parse_graph(g), arch="sm_90")
    kinds = [(st[0], st[2] if st[0] == "launch" else st[2]) for st in prog.steps]
    assert kinds == [("memset", 4), ("memset", 4), ("launch", "hdn_attn_f8_vt"),
                     ("launch", "hdn_attn_fwd_f8")], kinds
    assert [st[1] for st in prog.steps[:2]] == [("t", UID["amax_s"]), ("t", UID["amax_o"])]
    vt = prog.steps[2]
    assert vt[3] == (3, 1, B * Hkv) and vt[4] == (256, 1, 1)
    main = prog.steps[3]
    assert main[3] == (2, 4, 2) and main[4] == (384, 1, 1) and main[6]["arch"] == "sm_90a"
    assert prog.ws_size >= B * Hkv * Dv * 384
    assert any("fp8 wgmma flash attention" in n and "two sweeps" in n for n in prog.notes)
    # the scales as device tensors are pointer arguments, runtime scalars by value
    assert ("t", UID["descale_q"]) in main[5]
    _, g = f8_graph(scales="runtime")
    main = build_program(parse_graph(g), arch="sm_90").steps[-1]
    assert ("s", UID["scale_s"]) in main[5]
    _, g = f8_graph(scales="const", amax=False, stats=False)
    prog = build_program(parse_graph(g), arch="sm_90")
    assert [st[0] for st in prog.steps] == ["launch", "launch"]
    assert "#define F8_SCALE_S 256.0f" in prog.steps[1][1] or "F8_SCALE_S 256" in prog.steps[1][1]


def test_one_sweep_knob(monkeypatch):
    monkeypatch.delenv("HIPDNN_CABI_HIP_ATTN_FP8", raising=False)      # (the default)
    _, g = f8_graph()
    prog = build_program(parse_graph(g), arch="sm_90")
    assert "#define F8_TWO_PASS 0" in prog.steps[-1][1]
    assert any("one sweep" in n for n in prog.notes)


MAXSUM = [T(40, [2, 4, 200, 1], "FLOAT"), T(41, [2, 4, 200, 1], "FLOAT")]
RNG_DUMP = [T(42, [2, 4, 200, 300], "FLOAT")]


@pytest.mark.parametrize("case, why", [
    (dict(), "sm_90"),
    (dict(arch="gfx942"), "sm_90"),
    (dict(D=272, arch="sm_90"), "up to 256"),
    (dict(D=72, arch="sm_90"), "multiples of 16 up to 256"),
    (dict(Dv=264, arch="sm_90"), "up to 256"),
    (dict(odt="FP8_E5M2", arch="sm_90"), "must be FP8_E4M3, HALF"),
    (dict(extra=MAXSUM[:1], max_tensor_uid=40, arch="sm_90"),
     "max is not supported by the HIP engine with FP8 data \\(the CPU reference declines"),
    (dict(extra=MAXSUM[1:], sum_exp_tensor_uid=41, arch="sm_90"), "sum_exp is not supported"),
    (dict(extra=RNG_DUMP, rng_dump_tensor_uid=42, drop=0.1, arch="sm_90"),
     "rng_dump is not supported by the HIP engine with FP8 data"),
    (dict(mask=([2, 4, 200, 300], "INT32"), arch="sm_90"), "attn_mask type INT32"),
    (dict(mask=([2, 4, 200, 299], "HALF"), arch="sm_90"), "does not broadcast"),
    (dict(sink="FLOAT", arch="gfx942"), "sm_90"),
])
def test_declines(case, why):
    case = dict(case)
    arch = case.pop("arch", None)
    _, g = f8_graph(**case)
    with pytest.raises(NotApplicable, match=why):
        build_program(parse_graph(g), arch=arch)


def test_cpu_reference_declines_max_sum_exp_with_fp8():
    """The GPU engine's max / sum_exp decline follows the oracle's: it declines them too."""
    from engine_plugins.cpu_reference import engine as cpu_engine
    _, g = f8_graph(extra=MAXSUM, max_tensor_uid=40, sum_exp_tensor_uid=41)
    cpu_engine._cache.clear()
    a = cpu_engine._analyse(parse_graph(g))
    assert not a.ok and "max / sum_exp with FP8 data" in a.reason, a.reason


def _main_src(prog):
    st = prog.steps[-1]
    assert st[0] == "launch" and st[2] == "hdn_attn_fwd_f8"
    return st


def test_role_programs_on_sm90():
    """The score roles and dropout put their defines (hdn_attention.h, hdn_philox.h) in the fp8
    kernel's prelude and their tensors in its arguments, as on the 16-bit kernels."""
    B, H, Sq, Skv = 2, 4, 200, 300
    _, g = f8_graph(mask=([B, 1, Sq, Skv], "BFLOAT16"), alibi=True, block=[1, H], sink="HALF",
                    drop=0.25)
    st = _main_src(build_program(parse_graph(g), arch="sm_90"))
    src = st[1]
    for d in ("ATT_MASK 1", "ATT_MASK_T hdn_bf16", "AM_SH 0", "ATT_ALIBI 1", "ATT_BLOCK 1",
              "BMK_SB 0", "ATT_SINK 1", "ATT_SINK_T hdn_half", "DROPOUT 1", "F8_ST 4"):
        assert f"#define {d}\n" in src, d
    assert "ATT_BLKSKIP" not in src     # (the fp8 kernel walks every key tile)
    assert "HDN_ALIBI_SLOPES {0.25f, 0.0625f" in src
    for uid in (MOD["mask"], MOD["block"], MOD["sink"], 8, 9):
        assert ("t", uid) in st[5], uid
    # the boolean mask, and graphs without roles keep their arguments
    _, g = f8_graph(mask=([1, 1, Sq, Skv], "UNSET"))
    src = _main_src(build_program(parse_graph(g), arch="sm_90"))[1]
    assert "#define ATT_MASK 2\n" in src and "#define ATT_MASK_T unsigned char\n" in src
    _, g = f8_graph()
    src = _main_src(build_program(parse_graph(g), arch="sm_90"))[1]
    assert "#define DROPOUT 0\n" in src and "ATT_MASK" not in src.split("// attention_fwd_fp8")[0]


@pytest.mark.parametrize("mode", ["exact", "flash"])
def test_every_role_config_builds(mode, monkeypatch):
    """Each GPU configuration is a program of the fp8 kernel on sm_90, in both modes."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", mode)
    for c in CONFIGS + ROLE_CONFIGS:
        _, g = f8_graph(**c)
        src = _main_src(build_program(parse_graph(g), arch="sm_90"))[1]
        assert f"#define F8_TWO_PASS {int(mode == 'exact')}\n" in src
        assert ("#define DROPOUT 1\n" in src) == bool(c.get("drop"))


@pytest.mark.parametrize("D, Dv, st", [(256, 256, 3), (256, 128, 4), (64, 256, 4), (192, 192, 3),
                                       (256, 192, 3)])
def test_wide_heads_fit_shared_memory(D, Dv, st):
    """D, Dv up to 256: Q / K rows of two 128-byte atoms, the K / Vt ring as deep as fits (the
    16-bit kernel's rule); the tensor maps' boxes stay 128 columns, Vt's HDVP rows."""
    _, g = f8_graph(D=D, Dv=Dv)
    prog = build_program(parse_graph(g), arch="sm_90")
    main = _main_src(prog)
    assert f"#define F8_ST {st}\n" in main[1]
    assert main[6]["shmem"] <= 227 * 1024
    assert main[6]["shmem"] == fp8_smem_bytes(Dv, st, D)
    assert main[5][0][5] == (128, 128, 1, 1) and main[5][2][5] == (128, (Dv + 63) // 64 * 64, 1, 1)
    assert any(f"{st} K/Vt stages" in n for n in prog.notes)


def test_backward_declines():
    B, H, S, D = 1, 2, 64, 64
    f8 = "FP8_E4M3"
    ts = [T(1, [B, H, S, D], f8), T(2, [B, H, S, D], f8), T(3, [B, H, S, D], f8),
          T(4, [B, H, S, D], f8), T(5, [B, H, S, D], f8), T(6, [B, H, S, 1], "FLOAT"),
          T(11, [B, H, S, D], f8), T(12, [B, H, S, D], f8), T(13, [B, H, S, D], f8)]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "do_tensor_uid": 5, "stats_tensor_uid": 6, "dq_tensor_uid": 11, "dk_tensor_uid": 12,
         "dv_tensor_uid": 13}
    g = graph_bytes(ts, [node("SdpaBackwardAttributes", a)])
    with pytest.raises(NotApplicable, match="FP8"):
        build_program(parse_graph(g), arch="sm_90")


def test_sources_compile_sm90a_without_spills(tmp_path):
    from test_kernel_sources import _cuobjdump, _sass
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    for i, kw in enumerate([dict(), dict(fmt="FP8_E5M2", odt="FP8_E5M2", D=64, causal_mask=True),
                            dict(odt="FLOAT", D=96, Dv=64, seq=True, scales="runtime"),
                            dict(odt="BFLOAT16", D=64, Dv=128, scales="const", left_bound=9,
                                 right_bound=3)]):
        _, g = f8_graph(**kw)
        st = build_program(parse_graph(g), arch="sm_90").steps[-1]
        img = c.compile(st[1], f"f8attn{i}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
        assert c.last_log.count(" 0 bytes spill stores") == 2, c.last_log
        if exe is not None:
            sass = _sass(exe, env, tmp_path, f"f8attn{i}", img)
            assert "QGMMA" in sass and "UTMALDG" in sass, i


def _compile_no_spills(c, src, name, hdr):
    c.compile(src, name, ("--ptxas-options=-v",), "sm_90a", hdr)
    assert c.last_log.count(" 0 bytes spill stores") == 2, (name, c.last_log)


@pytest.mark.parametrize("mode", ["exact", "flash"])
def test_role_sources_compile_sm90a_without_spills(mode, monkeypatch):
    """The heaviest role variants (every role with dropout, D = 256 / Dv = 192; ALiBi, the
    additive mask and a sink at D = Dv = 256; dropout at D = 128) compile for sm_90a within the
    register budget in both modes; the full set: the slow test below."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", mode)
    c = _compiler()
    hdr = codegen.headers()
    for i, kw in enumerate([ROLE_CONFIGS[12], dict(ROLE_CONFIGS[11], D=256, Dv=256), ROLE_CONFIGS[7]]):
        _, g = f8_graph(**kw)
        _compile_no_spills(c, _main_src(build_program(parse_graph(g), arch="sm_90"))[1],
                           f"f8role{mode}{i}.hip", hdr)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exact", "flash"])
def test_all_role_sources_compile_sm90a_without_spills(mode, monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", mode)
    c = _compiler()
    hdr = codegen.headers()
    for i, kw in enumerate(ROLE_CONFIGS):
        _, g = f8_graph(**kw)
        _compile_no_spills(c, _main_src(build_program(parse_graph(g), arch="sm_90"))[1],
                           f"f8roles{mode}{i}.hip", hdr)


def test_transposed_v_key_order_matches_the_p_fragment(tmp_path):
    """Byte i of A register q (q = 0..3) of the thread with t4 in a 32-key step is key
    k = 16 (q >> 1) + 4 t4 + i of the m64nNk32 fp8 fragment; pack_p puts there the score of
    accumulator column 8 (e >> 2) + 2 t4 + (e & 1), e = c + (0, 1, 4, 5)[i], c = 8 (q >> 1) +
    2 (q & 1) - and Vt's key k must be that column: hdn_attn_f8_key(k)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    hdr = codegen.read_kernel("hdn_attention.h")
    i0 = hdr.index("__device__ __forceinline__ int hdn_attn_f8_key")
    body = hdr[i0:hdr.index("}", i0) + 1].replace("__device__ __forceinline__", "static inline")
    src = "#include <cstdio>\n" + body + \
        "\nint main() { for (int k = 0; k < 64; ++k) printf(\"%d\\n\", hdn_attn_f8_key(k)); }\n"
    f = tmp_path / "key.cpp"
    f.write_text(src)
    subprocess.run([cxx, "-O1", "-o", str(tmp_path / "key"), str(f)], check=True)
    got = [int(x) for x in subprocess.run([str(tmp_path / "key")], capture_output=True,
                                          text=True, check=True).stdout.split()]
    want = [0] * 64
    for step in range(2):
        for t4 in range(4):
            for q in range(4):
                c = 8 * (q >> 1) + 2 * (q & 1)
                for i in range(4):
                    e = c + (0, 1, 4, 5)[i]
                    assert (e >> 1) & 1 == q & 1          # the register's row (r0 / r0 + 8)
                    k = 16 * (q >> 1) + 4 * t4 + i
                    want[32 * step + k] = 32 * step + 8 * (e >> 2) + 2 * t4 + (e & 1)
    assert sorted(want) == list(range(64))
    assert got == want


# ---------------------------------------------------------------------------- GPU
CONFIGS = [
    dict(fmt="FP8_E4M3", odt="HALF", B=2, H=4, Hkv=2, Sq=200, Skv=300, D=128),
    dict(fmt="FP8_E4M3", odt="FP8_E4M3", B=1, H=8, Hkv=1, Sq=260, Skv=260, D=64,
         causal_mask=True, scales="const"),
    dict(fmt="FP8_E5M2", odt="BFLOAT16", B=3, H=2, Hkv=2, Sq=150, Skv=333, D=64, seq=True,
         scales="runtime"),
    dict(fmt="FP8_E4M3", odt="FLOAT", B=1, H=4, Hkv=2, Sq=130, Skv=257, D=128, Dv=64,
         causal_mask_bottom_right=True),
    dict(fmt="FP8_E5M2", odt="FP8_E5M2", B=1, H=2, Hkv=1, Sq=333, Skv=333, D=128,
         left_bound=100, right_bound=37),
    dict(fmt="FP8_E4M3", odt="HALF", B=3, H=4, Hkv=1, Sq=200, Skv=520, D=128, seq=True,
         causal_mask=True, scales="none", stats=False),
]


def _lens(B, Sq, Skv):
    return (np.array([Sq, max(1, Sq * 45 // 100), 7][:B]),
            np.array([Skv, Skv * 7 // 10, 1][:B]))


def _params(c, lq, lkv):
    """The CPU reference's parameters of config c (masks, lengths, the fp8 scales)."""
    D = c.get("D", 128)
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(D))))
    p.causal = bool(c.get("causal_mask"))
    p.causal_bottom_right = bool(c.get("causal_mask_bottom_right"))
    p.bottom_right = p.causal_bottom_right and not p.causal
    p.left_bound, p.right_bound = c.get("left_bound"), c.get("right_bound")
    if lq is not None:
        p.seq_len_q, p.seq_len_kv = lq, lkv
    vals = {r: 1.0 for r in SCALES} if c.get("scales") == "none" else \
        {r: float(np.float32(x)) for r, x in VALUES.items()}
    p.fp8 = ksdpa.Fp8Scales(p_format=c.get("fmt", "FP8_E4M3"), **vals)
    return p


SEED, OFFSET = 20240607, 1001      # the dropout tests' Philox seed / offset (device tensors)


def _role_inputs(c, by, p):
    """Random inputs for the score-role tensors of config c, set on the reference params p too;
    returns {T: logical values}."""
    m = c.get("mask")
    ins = sdpa_mod_inputs(rng, c, lambda name: by[MOD[name]], p,
                          None if m is None or m[1] == "UNSET" else m[1])
    if c.get("drop"):
        p.dropout = ("philox", float(c["drop"]), SEED, OFFSET)
        ins[by[8]] = np.array([SEED]).reshape(1, 1, 1, 1)
        ins[by[9]] = np.array([OFFSET]).reshape(1, 1, 1, 1)
    return ins


def _run(R, c):
    rt = getattr(R, "rt", None)         # (None: the CPU stand-in, tests/gpu/cpu_stand_in.py)
    arch = getattr(rt, "arch", "") if rt is not None else "sm_90"
    if not arch.startswith("sm_9"):
        pytest.skip(f"fp8 attention runs on Hopper (sm_90) only; this device is {arch}")
    fmt, odt = c.get("fmt", "FP8_E4M3"), c.get("odt", "HALF")
    ts, g = f8_graph(**c)
    by = {t.uid: t for t in ts}
    q, k, v = (quantize(rng.standard_normal(t.dims), fmt) for t in ts[:3])
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    lq = lkv = None
    if c.get("seq"):
        lq, lkv = _lens(c["B"], c["Sq"], c["Skv"])
        ins[by[6]] = lq.reshape(-1, 1, 1, 1)
        ins[by[7]] = lkv.reshape(-1, 1, 1, 1)
    p = _params(c, lq, lkv)
    ins.update(_role_inputs(c, by, p))
    scalars = None
    mode = c.get("scales", "tensor")
    if mode == "tensor":
        for r in SCALES:
            ins[by[UID[r]]] = np.array([VALUES[r]]).reshape(1, 1, 1, 1)
    elif mode == "runtime":
        scalars = {UID[r]: VALUES[r] for r in SCALES}
    outs = [ts[3]] + [by[u] for u in (5, UID["amax_s"], UID["amax_o"]) if u in by]
    res = R.run(g, ins, outs, scalars=scalars)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float32)
    return res, O.astype(np.float64), st, p.extra["amax_s"], p.extra["amax_o"], odt


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(CONFIGS)))
def test_forward_vs_cpu_reference(R, i, monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", "exact")
    _check_exact(R, CONFIGS[i])


def _check_exact(R, c):
    res, O, st, am_s, am_o, odt = _run(R, c)
    # the reference's P quantisation: O differs by float rounding, by the P codes of scores
    # that sit at a rounding boundary of fp8 (the fp8 wgmma's accumulation is not exact fp32:
    # a few in a thousand P codes one step apart, ~1 % of O for e4m3, twice that for e5m2),
    # and by one output code where the two O land on either side of an output boundary
    ref = quantize(O, odt) if odt != "FLOAT" else O
    tol = {"FP8_E4M3": 0.02, "FP8_E5M2": 0.04}[c.get("fmt", "FP8_E4M3")] + \
        {"FLOAT": 0.0, "HALF": 0.002, "BFLOAT16": 0.008}.get(odt, 0.02)
    assert np.isfinite(res[4]).all()
    assert relerr(res[4], ref) < tol, relerr(res[4], ref)
    if 5 in res:
        fin = np.isfinite(st)
        assert np.array_equal(np.isfinite(res[5]), fin)
        assert np.max(np.abs(res[5][fin] - st[fin])) < 5e-3
    if UID["amax_s"] in res:
        assert abs(float(res[UID["amax_s"]].ravel()[0]) - am_s) <= 3e-3 * am_s, (res, am_s)
        assert abs(float(res[UID["amax_o"]].ravel()[0]) - am_o) <= 3e-2 * am_o, (res, am_o)


@pytest.mark.gpu
@pytest.mark.parametrize("i", [0, 1, 2])
def test_one_sweep_vs_cpu_reference(R, i, monkeypatch):
    """HIPDNN_CABI_HIP_ATTN_FP8=flash: P quantised relative to the running row max - the
    reference's O up to the fp8 rounding of P (a few per cent), amax_s exactly."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", "flash")
    c = CONFIGS[i]
    res, O, st, am_s, am_o, odt = _run(R, c)
    tol = 0.15 if c.get("fmt") == "FP8_E5M2" else 0.1
    assert relerr(res[4], O) < tol, relerr(res[4], O)
    if UID["amax_s"] in res:
        assert abs(float(res[UID["amax_s"]].ravel()[0]) - am_s) <= 3e-3 * am_s
        assert abs(float(res[UID["amax_o"]].ravel()[0]) - am_o) <= 0.2 * am_o


# the score roles alone, two combinations, wide heads (D 256, Dv != D), causal, GQA
ROLE_CONFIGS = [
    dict(B=2, H=4, Hkv=2, Sq=150, Skv=200, D=64, mask=([2, 4, 150, 200], "HALF")),
    dict(B=2, H=4, Hkv=1, Sq=150, Skv=200, D=128, odt="BFLOAT16", causal_mask=True,
         mask=([1, 4, 150, 200], "BFLOAT16")),
    dict(fmt="FP8_E5M2", odt="FLOAT", B=3, H=2, Hkv=2, Sq=130, Skv=257, D=64, seq=True,
         mask=([3, 1, 1, 257], "FLOAT")),
    dict(B=2, H=2, Hkv=2, Sq=77, Skv=131, D=128, mask=([2, 1, 77, 131], "UNSET")),
    dict(odt="FP8_E4M3", B=1, H=6, Hkv=2, Sq=140, Skv=300, D=64, alibi=True,
         causal_mask_bottom_right=True),
    dict(B=2, H=4, Hkv=2, Sq=200, Skv=300, D=64, block=[1, 4]),
    dict(B=3, H=4, Hkv=2, Sq=150, Skv=200, D=128, sink="FLOAT", seq=True, causal_mask=True),
    dict(B=2, H=4, Hkv=2, Sq=150, Skv=260, D=64, drop=0.2),
    dict(odt="BFLOAT16", B=1, H=4, Hkv=2, Sq=200, Skv=300, D=256, causal_mask=True),
    dict(fmt="FP8_E5M2", B=2, H=4, Hkv=1, Sq=130, Skv=200, D=64, Dv=192),
    dict(B=2, H=4, Hkv=2, Sq=150, Skv=300, D=256, Dv=128, scales="runtime", left_bound=90,
         right_bound=20),
    # combinations: additive mask + ALiBi + sink, GQA, causal; dropout + boolean mask + block
    # mask + sink on wide heads with padding
    dict(B=2, H=4, Hkv=2, Sq=150, Skv=200, D=128, mask=([2, 4, 150, 200], "HALF"), alibi=True,
         sink="BFLOAT16", causal_mask=True),
    dict(odt="FLOAT", B=2, H=4, Hkv=2, Sq=150, Skv=300, D=256, Dv=192, seq=True,
         mask=([2, 1, 150, 300], "UNSET"), block=[2, 1], sink="HALF", drop=0.1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(ROLE_CONFIGS)))
def test_roles_vs_cpu_reference(R, i, monkeypatch):
    """The score roles, dropout and wide heads: O, the statistics and amax_s / amax_o as the
    exact-mode configurations (the P quantisation the reference does)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", "exact")
    _check_exact(R, ROLE_CONFIGS[i])


@pytest.mark.gpu
@pytest.mark.parametrize("i", [0, 3, 6, 7, 8, 11, 12])
def test_roles_one_sweep_vs_cpu_reference(R, i, monkeypatch):
    """The roles in the one-sweep mode: O up to the fp8 rounding of P relative to the running
    max, the statistics and amax_s as the reference's."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_FP8", "flash")
    c = ROLE_CONFIGS[i]
    res, O, st, am_s, am_o, odt = _run(R, c)
    tol = 0.15 if c.get("fmt") == "FP8_E5M2" else 0.1
    assert np.isfinite(res[4]).all()
    assert relerr(res[4], O) < tol, relerr(res[4], O)
    fin = np.isfinite(st)
    assert np.array_equal(np.isfinite(res[5]), fin)
    assert np.max(np.abs(res[5][fin] - st[fin])) < 5e-3
    assert abs(float(res[UID["amax_s"]].ravel()[0]) - am_s) <= 3e-3 * am_s
    assert abs(float(res[UID["amax_o"]].ravel()[0]) - am_o) <= 0.2 * am_o


def test_v_transpose_pre_pass_on_the_host():
    """hdn_attn_f8_vt run on the host (host_emu's shim; its thread loops made serial, so one
    host thread does a block's work across its barrier): Vt[b, hk, d, k] = V[b, hk,
    key(k), d] for keys inside the batch's length (padding mask) and 0 past it - strided BSHD V,
    GQA, Skv not a multiple of 128, Dv = 80 (two column blocks, the second partial)."""
    import host_emu
    if host_emu.compiler() is None:
        pytest.skip("no host C++ compiler")
    B, H, Hkv, Sq, Skv, Dv = 2, 4, 2, 40, 150, 80
    v_t = T(3, [B, Hkv, Skv, Dv], "FP8_E4M3", strides=[Skv * Hkv * Dv, Dv, Hkv * Dv, 1])
    ts, g = f8_graph(B=B, H=H, Hkv=Hkv, Sq=Sq, Skv=Skv, D=64, Dv=Dv, seq=True, extra=())
    gb = parse_graph(g)
    gb.tensors[3].strides = list(v_t.strides)
    prog = build_program(gb, arch="sm_90")
    st = next(s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_attn_f8_vt")
    src = st[1]
    prelude = src[:src.index("// attention_fwd_fp8_wgmma.hip")]
    defines = [ln for ln in prelude.splitlines()
               if ln.startswith("#define") and "HDN_GENERATED" not in ln]
    hdr = codegen.read_kernel("hdn_attention.h")
    i0 = hdr.index("__device__ __forceinline__ int hdn_attn_f8_key")
    key_fn = hdr[i0:hdr.index("}", i0) + 1]
    body = src[src.index('extern "C" __global__ void __launch_bounds__(256) hdn_attn_f8_vt'):]
    body = body[:body.index("// -----")].replace("w += 256", "w += 1").replace(
        "__shared__ __align__(4)", "alignas(4) static")
    code = "\n".join(defines + [
        "#define __syncthreads()",
        "static inline int hdn_imin(int a, int b) { return a < b ? a : b; }",
        "static inline int hdn_imax(int a, int b) { return a > b ? a : b; }",
        key_fn.replace("__device__ __forceinline__", "static inline"), body])
    span = 1 + sum((d - 1) * s for d, s in zip(v_t.dims, v_t.strides))
    codes = rng.integers(0, 256, span, dtype=np.uint8)
    lkv = np.array([Skv, 97], np.int32)
    lq = np.array([Sq, 9], np.int32)
    skvp = (Skv + 127) // 128 * 128
    mem = host_emu.HostMem()
    vp, vbuf = mem.alloc(span)
    vbuf[:] = codes
    tp, tbuf = mem.alloc(B * Hkv * Dv * skvp, fill=0xAB)
    qp, qbuf = mem.alloc(4 * B)
    qbuf[:] = lq.view(np.uint8)
    kp, kbuf = mem.alloc(4 * B)
    kbuf[:] = lkv.view(np.uint8)
    host_emu.run_kernel(code, "hdn_attn_f8_vt", st[3], (1, 1, 1), [vp, tp, qp, kp], {})
    V = np.lib.stride_tricks.as_strided(codes, shape=v_t.dims, strides=v_t.strides)
    got = tbuf.reshape(B, Hkv, Dv, skvp)
    want = np.zeros_like(got)
    k = np.arange(skvp)
    c, h, t, i = k & ~31, (k >> 4) & 1, (k >> 2) & 3, k & 3
    key = c + 16 * h + 8 * (i >> 1) + 2 * t + (i & 1)
    for b in range(B):
        ok = key < lkv[b]
        want[b][:, :, ok] = np.swapaxes(V[b][:, key[ok]], 1, 2)
    assert np.array_equal(got, want)


# the fragment probe: one thread of a consumer warpgroup holds its part of an m64nSUB tile of raw
# q.k (the wgmma accumulator layout), runs the kernel's score path and draws its keep bits
F8_PROBE = r"""
#define __constant__
#include "hdn_attention.h"
extern "C" __global__ void hdn_probe_f8(const float* qk, const void* att_mask,
                                        const unsigned char* att_blk, const long long* seedp,
                                        const long long* offp, float* out, float* keep HDN_ATTN_LEN_PARAMS) {
    const int kv0 = blockIdx.x * F8P_SUB, q0w = blockIdx.y * 64, b = blockIdx.z / HQ, h = blockIdx.z % HQ;
    const int t = threadIdx.x, lane = t & 31, t4 = lane & 3, r0 = q0w + 16 * (t >> 5) + (lane >> 2);
    (void)att_mask; (void)att_blk; (void)seedp; (void)offp;
    float s[F8P_SUB / 2], mx[2];
    for (int i = 0; i < F8P_SUB / 2; ++i) {
        const int row = r0 + 8 * ((i >> 1) & 1), col = kv0 + 8 * (i >> 2) + 2 * t4 + (i & 1);
        s[i] = row < SQ && col < SKV ? qk[(((long long)b * HQ + h) * SQ + row) * SKV + col] : 0.f;
    }
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    HDN_ATTN_MOD_INIT(b, h);
    const float sl2 = SCALE_VALUE * (F8_DESCALE_Q) * (F8_DESCALE_K) * HDN_LOG2E;
    hdn_attn_wg_mask<F8P_SUB>(s, L, kv0, q0w, r0, t4, sl2, mx HDN_ATTN_MOD_REF);
#if DROPOUT
    const unsigned long long kb = hdn_attn_wg_keep_bits<F8P_SUB>(
        (unsigned long long)*seedp, (unsigned long long)b * HQ + h, (unsigned long long)*offp, r0, kv0,
        t4, DTHR, SKV);
#else
    const unsigned long long kb = ~0ull;
#endif
    for (int i = 0; i < F8P_SUB / 2; ++i) {
        const int row = r0 + 8 * ((i >> 1) & 1), col = kv0 + 8 * (i >> 2) + 2 * t4 + (i & 1);
        if (row >= SQ || col >= SKV) continue;
        const long long n = (((long long)b * HQ + h) * SQ + row) * SKV + col;
        out[n] = s[i] * HDN_LN2;
        keep[n] = (float)((kb >> i) & 1);
    }
}
"""


@pytest.mark.parametrize("sub", [128, 64])
@pytest.mark.parametrize("i", [0, 3, 4, 5, 12])
def test_score_fragment_host_emulation(i, sub):
    """hdn_attn_wg_mask (the score modifiers of the generated fp8 prelude) and
    hdn_attn_wg_keep_bits on every thread's part of m64n``sub`` tiles, run on the host: the
    scores (natural scale) are the CPU reference's _scores - q.k times scale and the q / k
    descales, + mask + ALiBi, -inf where the masks drop them - and the keep bits its Philox keep
    mask, element by element."""
    from test_attention_roles import _emu_src, _host_emu
    emu, hdr = _host_emu()
    c = dict(ROLE_CONFIGS[i], scales="const")
    if i == 0:
        c.update(drop=0.3, seq=True, left_bound=70, right_bound=5)
    B, H, Hkv, Sq, Skv = c["B"], c["H"], c["Hkv"], c["Sq"], c["Skv"]
    fmt = c.get("fmt", "FP8_E4M3")
    ts, g = f8_graph(**c)
    by = {t.uid: t for t in ts}
    src = _main_src(build_program(parse_graph(g), arch="sm_90"))[1]
    src = _emu_src(src[:src.index("// attention_fwd_fp8_wgmma.hip")] + f"#define F8P_SUB {sub}\n"
                   + F8_PROBE)
    q, k = (quantize(rng.standard_normal(t.dims), fmt) for t in ts[:2])
    lq = lkv = None
    if c.get("seq"):
        lq, lkv = _lens(B, Sq, Skv)
    p = _params(c, lq, lkv)
    ins = _role_inputs(c, by, p)
    bufs = {t.uid: gpu_testlib.to_storage(t, v) for t, v in ins.items()}
    G = H // Hkv
    qk = np.einsum("bhqd,bhkd->bhqk", q, np.repeat(k, G, axis=1)).astype(np.float32)
    out = np.full((B, H, Sq, Skv), np.nan, np.float32)
    keep = np.full((B, H, Sq, Skv), np.nan, np.float32)
    dummy = np.zeros(1, np.int64)
    ptr = [qk.ctypes.data] + [bufs.get(u, dummy).ctypes.data for u in (MOD["mask"], MOD["block"], 8, 9)] \
        + [out.ctypes.data, keep.ctypes.data]
    if lq is not None:
        lens = [lq.astype(np.int32), lkv.astype(np.int32)]
        ptr += [x.ctypes.data for x in lens]
    emu.run_kernel(src, "hdn_probe_f8", (-(-Skv // sub), -(-Sq // 64), B * H), (128, 1, 1), ptr, hdr)
    for b in range(B):
        for hk in range(Hkv):
            ref, _ = ksdpa._scores(q, k[b, hk], p, b, hk * G, G, H, np.float64)
            got = out[b, hk * G:(hk + 1) * G].astype(np.float64)
            dropped = ref == -np.inf
            assert np.array_equal(got == -np.inf, dropped), (b, hk, int(np.sum((got == -np.inf) != dropped)))
            if (~dropped).any():        # (a head whose every score is masked has nothing to compare)
                err = np.max(np.abs(got[~dropped] - ref[~dropped]) / np.maximum(1.0, np.abs(ref[~dropped])))
                assert err < 1e-5, (b, hk, err)
    if c.get("drop"):
        want = np.stack([np.stack([kphilox.keep_mask(SEED, OFFSET, b, h, H, Sq, Skv, c["drop"])
                                   for h in range(H)]) for b in range(B)])
        assert np.array_equal(keep, want.astype(np.float32))
    else:
        assert np.all(keep == 1)


def test_philox_pair_host_emulation():
    """hdn_philox_word2 (outputs n, n + 1: one Philox call, two when n & 3 = 3) is the stream
    of the CPU reference at every residue of n mod 4, 64-bit counters and subsequences."""
    from test_attention_roles import UMULHI, _host_emu
    emu, hdr = _host_emu()
    code = '#include "hdn_compat.h"\n' + UMULHI + '#include "hdn_philox.h"\n' + r"""
extern "C" __global__ void hdn_probe_pair(const unsigned long long* a, unsigned* out) {
    const int t = threadIdx.x;
    hdn_philox_word2(a[0], a[1], a[2] + t, out[2 * t], out[2 * t + 1]);
}
"""
    for seed, sub, n0 in ((987654321, 5, 0), (2 ** 40 + 3, 2 ** 33 + 7, 2 ** 34 - 2)):
        a = np.array([seed, sub, n0], np.uint64)
        out = np.zeros(16, np.uint32)
        emu.run_kernel(code, "hdn_probe_pair", (1, 1, 1), (8, 1, 1), [a.ctypes.data, out.ctypes.data], hdr)
        want = kphilox.stream(seed, sub, n0, 9)
        assert np.array_equal(out.reshape(8, 2), np.stack([want[:8], want[1:]], axis=1))

