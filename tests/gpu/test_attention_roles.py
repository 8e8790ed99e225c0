"""SDPA score-modifying roles on the HIP engine: additive / boolean attn_mask (broadcast, any
strides), ALiBi, block masks, sink tokens, the max / sum_exp outputs, rng_dump, and in the
backward the mask / ALiBi with dbias (summed over its broadcast dimensions).  CI (no GPU): which
roles the program accepts / declines (AMD: declined with the reason), and the generated sources
compile for sm_90a without spills.  GPU (`pytest -m gpu`): forward (wgmma and mma.sync) and
backward against the CPU reference kernels in float64 on the same quantised inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest

import gpu_testlib
from engine_plugins.cpu_reference.kernels import philox as kphilox
from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from gpu_testlib import (T, graph_bytes, node, nvrtc_or_skip, quantize, relerr, sdpa_bwd_tensors, sdpa_mod_inputs,
                         sdpa_optional)

gpu_testlib.NP.setdefault("UINT8", np.uint8)
gpu_testlib.NP.setdefault("UNSET", np.uint8)     # BOOLEAN: one byte, 0 / 1

rng = np.random.default_rng(2024)
U = dict(mask=20, block=21, sink=22, max=23, sum_exp=24, rng=25, dbias=26)


def _mask_t(B, H, Sq, Skv, mask):
    """mask: (kind "bias" | "bool", dims, dtype, strides or None) -> T."""
    _, dims, dt, st = mask
    return T(U["mask"], dims, dt, strides=st)


def fwd_graph(dt, B, H, Hkv, Sq, Skv, D, mask=None, alibi=False, block=None, sink=None,
              maxsum=False, seq=False, drop=None, rng_dump=None, stats=True, rng_dims=None, **attrs):
    """block: block-mask dims [B|1, H|1] ; sink: the sink tensor's type; maxsum: True (FLOAT)
    or the max / sum_exp type; rng_dump: its type (rng_dims: its dims, default [B, H, Sq, Skv])."""
    ts = [T(1, [B, H, Sq, D], dt), T(2, [B, Hkv, Skv, D], dt), T(3, [B, Hkv, Skv, D], dt),
          T(4, [B, H, Sq, D], dt)]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "attn_scale_value": 1 / math.sqrt(D)}
    sdpa_optional(ts, a, B, H, Sq, stats, seq, drop)
    if mask is not None:
        ts.append(_mask_t(B, H, Sq, Skv, mask))
        a.update(attn_mask_tensor_uid=U["mask"])
    if alibi:
        a.update(alibi_mask=True)
    if block is not None:
        ts.append(T(U["block"], list(block) + [-(-Sq // 128), -(-(-(-Skv // 128)) // 8)], "UINT8"))
        a.update(block_mask_tensor_uid=U["block"])
    if sink is not None:
        ts.append(T(U["sink"], [1, H, 1, 1], sink))
        a.update(sink_token_tensor_uid=U["sink"])
    if maxsum:
        mt = maxsum if isinstance(maxsum, str) else "FLOAT"
        ts += [T(U["max"], [B, H, Sq, 1], mt), T(U["sum_exp"], [B, H, Sq, 1], mt)]
        a.update(max_tensor_uid=U["max"], sum_exp_tensor_uid=U["sum_exp"])
    if rng_dump is not None:
        ts.append(T(U["rng"], list(rng_dims or [B, H, Sq, Skv]), rng_dump))
        a.update(rng_dump_tensor_uid=U["rng"])
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaAttributes", a)])


def bwd_graph(dt, B, H, Hkv, Sq, Skv, D, mask=None, alibi=False, dbias=None, seq=False, **attrs):
    """dbias: its (dims, dtype)."""
    ts, a = sdpa_bwd_tensors(dt, B, H, Hkv, Sq, Skv, D, seq=seq)
    if mask is not None:
        ts.append(_mask_t(B, H, Sq, Skv, mask))
        a.update(attn_mask_tensor_uid=U["mask"])
    if alibi:
        a.update(alibi_mask=True)
    if dbias is not None:
        ts.append(T(U["dbias"], dbias[0], dbias[1]))
        a.update(dbias_tensor_uid=U["dbias"])
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaBackwardAttributes", a)])


def _strided(dims, inner=2):
    """Strides of a [.., Skv] tensor whose rows hold every other element (padding in between)."""
    st, s = [0] * 4, 1
    for ax in (3, 2, 1, 0):
        st[ax] = s * (inner if ax == 3 else 1)
        s = s * dims[ax] * (inner if ax == 3 else 1)
    return st


FWD_CONFIGS = [
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=77, Skv=131, D=64,
         mask=("bias", [2, 4, 77, 131], "HALF", None)),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=77, Skv=131, D=128, causal_mask=True,
         mask=("bias", [1, 4, 77, 131], "FLOAT", None)),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=77, Skv=131, D=96,
         mask=("bias", [2, 1, 1, 131], "BFLOAT16", _strided([2, 1, 1, 131]))),
    dict(dt="HALF", B=3, H=6, Hkv=2, Sq=77, Skv=131, D=64, alibi=True, seq=True),
    dict(dt="BFLOAT16", B=1, H=8, Hkv=8, Sq=77, Skv=131, D=128, alibi=True, causal_mask=True),
    dict(dt="HALF", B=2, H=2, Hkv=2, Sq=77, Skv=131, D=128, mask=("bool", [2, 1, 77, 131], "UNSET", None)),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=200, Skv=300, D=64, block=[1, 4]),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=260, Skv=131, D=96, block=[2, 1], causal_mask_bottom_right=True),
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=77, Skv=131, D=64, sink="FLOAT", causal_mask=True,
         maxsum=True),
    dict(dt="BFLOAT16", B=3, H=2, Hkv=1, Sq=77, Skv=131, D=128, sink="HALF", seq=True,
         causal_mask_bottom_right=True, maxsum=True),
    dict(dt="HALF", B=1, H=3, Hkv=3, Sq=77, Skv=131, D=96, maxsum=True, stats=False),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=150, Skv=300, D=128, mask=("bias", [2, 4, 150, 300], "BFLOAT16", None),
         alibi=True, block=[2, 4], sink="BFLOAT16", causal_mask_bottom_right=True, maxsum=True),
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=77, Skv=131, D=64, mask=("bool", [1, 4, 77, 131], "UNSET", None),
         alibi=True, left_bound=40, right_bound=10, maxsum=True),
]
BWD_CONFIGS = [
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=77, Skv=131, D=64,
         mask=("bias", [2, 4, 77, 131], "HALF", None), dbias=([2, 4, 77, 131], "HALF")),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=77, Skv=131, D=128, causal_mask=True,
         mask=("bias", [1, 4, 77, 131], "FLOAT", None), dbias=([1, 4, 77, 131], "FLOAT")),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=77, Skv=131, D=96,
         mask=("bias", [2, 1, 77, 131], "BFLOAT16", None), dbias=([2, 1, 77, 131], "BFLOAT16")),
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=77, Skv=131, D=64,
         mask=("bias", [2, 4, 1, 131], "FLOAT", _strided([2, 4, 1, 131])), dbias=([1, 4, 1, 131], "FLOAT")),
    dict(dt="HALF", B=3, H=6, Hkv=2, Sq=77, Skv=131, D=64, alibi=True, seq=True),
    dict(dt="BFLOAT16", B=2, H=2, Hkv=2, Sq=77, Skv=131, D=128, causal_mask=True,
         mask=("bool", [2, 2, 77, 131], "UNSET", None)),
    dict(dt="HALF", B=1, H=4, Hkv=2, Sq=150, Skv=200, D=128, alibi=True, dbias=([1, 4, 150, 200], "FLOAT"),
         causal_mask_bottom_right=True),
    # the forward had a sink (its statistics hold it; the backward schema has no sink role)
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=77, Skv=131, D=64, causal_mask=True, ref_sink=True),
]


_compiler = nvrtc_or_skip


def _build(g, **kw):
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    return build_program(parse_graph(g), **kw)


def _all_programs():
    """(name, head size, program) of every configuration."""
    for i, c in enumerate(FWD_CONFIGS):
        _, g = fwd_graph(**c)
        yield f"fwd{i}", c["D"], _build(g, arch="sm_90")
        yield f"fwd{i}_mma", c["D"], _build(g)
    _, g = fwd_graph("HALF", 2, 2, 2, 77, 131, 64, drop=0.3, rng_dump="FLOAT", sink="FLOAT")
    yield "rng", 64, _build(g, arch="sm_90")
    for i, c in enumerate(BWD_CONFIGS):
        _, g = bwd_graph(**{k: v for k, v in c.items() if k != "ref_sink"})
        yield f"bwd{i}", c["D"], _build(g, arch="sm_90")


def test_role_programs_build():
    """Every configuration builds (the forward on wgmma at sm_90 unless dropout); rng_dump adds
    its launch; dbias adds its memset and conversion launch."""
    for name, _, prog in _all_programs():
        names = [s[2] for s in prog.steps if s[0] == "launch"]
        if name == "rng":
            assert names == ["hdn_attn_fwd", "hdn_attn_rng_dump"], names
        elif name.startswith("fwd"):
            assert names == (["hdn_attn_fwd"] if name.endswith("_mma") else ["hdn_attn_fwd_wg"]), names
        else:
            c = BWD_CONFIGS[int(name[3:])]
            # the score roles keep the mma.sync main kernel; without them sm_90 takes the wgmma one
            mods = any(c.get(x) for x in ("mask", "alibi", "dbias"))
            want = ["hdn_attn_bwd_pre", "hdn_attn_bwd" if mods else "hdn_attn_bwd_wg", "hdn_attn_bwd_dq"]
            assert names == want + (["hdn_attn_dbias_out"] if c.get("dbias") else []), names


@pytest.mark.slow
def test_role_sources_compile_sm90a_without_spills():
    """The generated sources compile for sm_90a; the wgmma forward, and the backward's main
    kernel at D <= 96, without spills (the mma.sync forward at D = 64 and the backward at
    D = 128 spill a few bytes with or without the roles)."""
    from engine_plugins.hip_kernels import codegen
    c = _compiler()
    hdr = codegen.headers()
    seen = set()
    for name, D, prog in _all_programs():
        for st in prog.steps:
            if st[0] == "launch" and st[1] not in seen:
                seen.add(st[1])
                assert c.compile(st[1], f"{name}_{st[2]}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
                if st[2] == "hdn_attn_fwd_wg" or (st[2] == "hdn_attn_bwd" and D <= 96):
                    assert " 0 bytes spill stores" in c.last_log, (name, c.last_log)
    assert len(seen) >= 20


def _analyse(g):
    from engine_plugins.hip_kernels.program import NotApplicable
    try:
        _build(g, arch="sm_90")
        return ""
    except NotApplicable as e:
        return str(e)


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_roles_declined_on_amd(arch):
    from engine_plugins.hip_kernels.program import NotApplicable
    for kw, role in ((dict(mask=("bias", [1, 2, 64, 64], "HALF", None)), "attn_mask"),
                     (dict(alibi=True), "ALiBi"), (dict(sink="FLOAT"), "sink_token"),
                     (dict(block=[1, 1]), "block_mask"), (dict(maxsum=True), "max")):
        _, g = fwd_graph("HALF", 1, 2, 2, 64, 64, 64, **kw)
        with pytest.raises(NotApplicable, match=f"{role}.*AMD MFMA"):
            _build(g, arch=arch)
    _, g = bwd_graph("HALF", 1, 2, 2, 64, 64, 64, dbias=([1, 2, 64, 64], "FLOAT"))
    with pytest.raises(NotApplicable, match="dbias.*AMD MFMA"):
        _build(g, arch=arch)


@pytest.mark.parametrize("kw,why", [
    (dict(mask=("bias", [1, 2, 64, 32], "HALF", None)), "does not broadcast"),
    (dict(mask=("bias", [1, 2, 64, 64], "INT32", None)), "attn_mask type"),
    (dict(block=[1, 1], _bm_dtype="INT32"), "block_mask"),
    (dict(maxsum=True, _max_dtype="INT32"), "max must be FLOAT / HALF / BFLOAT16 / DOUBLE"),
    (dict(drop=0.2, rng_dump="INT32"), "rng_dump type"),
    (dict(rng_dump="FLOAT"), "rng_dump without dropout"),
])
def test_role_declines_name_the_reason(kw, why):
    kw = dict(kw)
    bm, mx = kw.pop("_bm_dtype", None), kw.pop("_max_dtype", None)
    ts, _ = fwd_graph("HALF", 1, 2, 2, 64, 64, 64, **kw)
    for t in ts:
        if bm and t.uid == U["block"]:
            t.dtype = bm
        if mx and t.uid == U["max"]:
            t.dtype = mx
    g = graph_bytes(ts, [node("SdpaAttributes", _fwd_attrs(kw))])
    assert why in _analyse(g)


def _fwd_attrs(kw):
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "attn_scale_value": 0.125, "stats_tensor_uid": 5, "generate_stats": True}
    if "mask" in kw:
        a["attn_mask_tensor_uid"] = U["mask"]
    if "block" in kw:
        a["block_mask_tensor_uid"] = U["block"]
    if kw.get("maxsum"):
        a.update(max_tensor_uid=U["max"], sum_exp_tensor_uid=U["sum_exp"])
    if "drop" in kw:
        a.update(seed_tensor_uid=8, offset_tensor_uid=9, dropout_probability=kw["drop"])
    if "rng_dump" in kw:
        a["rng_dump_tensor_uid"] = U["rng"]
    return a


# ------------------------------------------------------------------------------------ GPU
def _lens(B, Sq, Skv):
    return (np.array([Sq, max(1, Sq * 45 // 100), 7][:B]),
            np.array([Skv, Skv * 7 // 10, 1][:B]))


def _inputs(c, ts, p):
    """Random quantised inputs for the role tensors of config c, set on the reference params p;
    returns {T: logical values}."""
    byuid = {t.uid: t for t in ts}
    ins = {}
    B, Sq, Skv = c["B"], c["Sq"], c["Skv"]
    if c.get("seq"):
        lq, lkv = _lens(B, Sq, Skv)
        p.seq_len_q, p.seq_len_kv = lq, lkv
        u0 = 7 if 11 in byuid else 6          # the backward graph's lengths: uids 7 / 8
        ins[byuid[u0]] = lq.reshape(B, 1, 1, 1)
        ins[byuid[u0 + 1]] = lkv.reshape(B, 1, 1, 1)
    m = c.get("mask")
    ins.update(sdpa_mod_inputs(rng, c, lambda name: byuid[U[name]], p,
                               m[2] if m is not None and m[0] == "bias" else None))
    return ins


def _params(c):
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(c["D"]))))
    p.causal = bool(c.get("causal_mask"))
    p.causal_bottom_right = bool(c.get("causal_mask_bottom_right"))
    p.bottom_right = p.causal_bottom_right and not p.causal
    p.left_bound, p.right_bound = c.get("left_bound"), c.get("right_bound")
    return p


@pytest.fixture(params=["auto", "mma"])
def fwd_path(request, monkeypatch):
    """The forward kernel: auto (wgmma on an sm_90 device) or the mma.sync kernel forced."""
    if request.param == "mma":
        monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN", "mma")
    return request.param


def _close_rows(got, ref, atol, name):
    fin = np.isfinite(ref)
    assert np.array_equal(np.isfinite(got), fin), (name, int((np.isfinite(got) != fin).sum()))
    assert np.array_equal(got[~fin], ref[~fin]), name
    if fin.any():
        err = np.max(np.abs(got[fin] - ref[fin]) / np.maximum(1.0, np.abs(ref[fin])))
        assert err < atol, (name, err)


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(FWD_CONFIGS)))
def test_forward_roles_vs_cpu_reference(R, i, fwd_path):
    c = FWD_CONFIGS[i]
    dt, D = c["dt"], c["D"]
    ts, g = fwd_graph(**c)
    byuid = {t.uid: t for t in ts}
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    p = _params(c)
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    ins.update(_inputs(c, ts, p))
    outs = [ts[3]] + [byuid[u] for u in (5, U["max"], U["sum_exp"]) if u in byuid]
    res = R.run(g, ins, outs)
    O, st, mx, se = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    tol = 1e-2 if dt == "HALF" else 3e-2
    assert relerr(res[4], O) < tol, relerr(res[4], O)
    if 5 in res:
        _close_rows(res[5], st, 2e-3, "stats")
    if U["max"] in res:
        _close_rows(res[U["max"]], mx, 2e-3, "max")
        _close_rows(res[U["sum_exp"]], se, 5e-3, "sum_exp")


@pytest.mark.gpu
@pytest.mark.parametrize("dump", ["FLOAT", "HALF", "BFLOAT16"])
def test_rng_dump_bit_exact(R, dump):
    """rng_dump holds the Philox keep mask (1 / 0) of every element; O as the CPU reference's."""
    B, H, Sq, Skv, D, pr, seed, off = 2, 3, 77, 131, 64, 0.3, 987654321, 17
    ts, g = fwd_graph("HALF", B, H, H, Sq, Skv, D, drop=pr, rng_dump=dump, stats=False)
    byuid = {t.uid: t for t in ts}
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims), "HALF") for t in ts[:3])
    res = R.run(g, {ts[0]: q, ts[1]: k, ts[2]: v, byuid[8]: np.array([seed]).reshape(1, 1, 1, 1),
                    byuid[9]: np.array([off]).reshape(1, 1, 1, 1)}, [ts[3], byuid[U["rng"]]])
    want = np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, Skv, pr) for h in range(H)])
                     for b in range(B)])
    assert np.array_equal(res[U["rng"]], want.astype(np.float64))
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(D))), dropout=("philox", pr, seed, off))
    O = ksdpa.sdpa_fwd(q, k, v, p, np.float64)[0]
    assert relerr(res[4], O) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(BWD_CONFIGS)))
def test_backward_roles_vs_cpu_reference(R, i):
    c = dict(BWD_CONFIGS[i])
    ref_sink = c.pop("ref_sink", False)
    dt, B, H, Sq, Skv = c["dt"], c["B"], c["H"], c["Sq"], c["Skv"]
    ts, g = bwd_graph(**c)
    byuid = {t.uid: t for t in ts}
    q, k, v, do = (quantize(rng.uniform(-1, 1, t.dims) * s, dt)
                   for t, s in zip((ts[0], ts[1], ts[2], ts[4]), (2, 2, 1, 1)))
    p = _params(c)
    ins = _inputs(c, ts, p)
    if ref_sink:
        p.sink = rng.uniform(0, 3, [H])
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    O = quantize(O, dt)
    ins.update({ts[0]: q, ts[1]: k, ts[2]: v, ts[3]: O, ts[4]: do, ts[5]: st.astype(np.float32)})
    outs = ts[6:9] + ([byuid[U["dbias"]]] if U["dbias"] in byuid else [])
    res = R.run(g, ins, outs)
    dbs = c["dbias"][0] if c.get("dbias") else None
    dq, dk, dv, dbias = ksdpa.sdpa_bwd(q, k, v, O, do, st, p, np.float64, dbs)
    tol = 2e-2 if dt == "HALF" else 5e-2
    for uid, ref in ((11, dq), (12, dk), (13, dv)):
        assert relerr(res[uid], ref) < tol, (uid, relerr(res[uid], ref))
    if dbs is not None:
        dtb = c["dbias"][1]
        assert relerr(res[U["dbias"]], dbias) < (tol if dtb != "BFLOAT16" else 5e-2), \
            relerr(res[U["dbias"]], dbias)


# ------------------------------------------------------------------ host emulation (no GPU)
PROBE = r"""
#define __constant__
#include "hdn_attention.h"
// the modified score of every (b, h, i, j) on the natural scale, for q·k = 0
extern "C" __global__ void hdn_probe(const void* att_mask, const unsigned char* att_blk, float* out) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, b = blockIdx.z;
    if (n >= SQ * SKV) return;
    const int i = n / SKV, j = n % SKV;
    (void)att_mask; (void)att_blk;
    HDN_ATTN_MOD_INIT(b, h);
    out[(((long long)b * HQ + h) * SQ + i) * SKV + j] = HDN_ATTN_SCORE(0.f, i, j) * HDN_LN2;
}
#if ATT_SINK
// the running max (natural scale) and sum a row of head h starts from
extern "C" __global__ void hdn_probe_sink(const ATT_SINK_T* att_sink, float* out) {
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
    const int h = threadIdx.x;
    HDN_ATTN_SINK_INIT(h, mrow, lrow);
    out[h] = mrow[0] * HDN_LN2;
    out[HQ + h] = lrow[1];
}
#endif
"""


def _host_emu():
    """host_emu and the headers, hdn_attention.h without its hdn_compat.h include (the generated
    prelude has it; the emulation inlines headers without include guards)."""
    import host_emu
    if host_emu.compiler() is None:
        pytest.skip("no host C++ compiler")
    from engine_plugins.hip_kernels import codegen
    hdr = dict(codegen.headers())
    hdr["hdn_attention.h"] = hdr["hdn_attention.h"].replace('#include "hdn_compat.h"', "")
    return host_emu, hdr


UMULHI = ("static inline unsigned __umulhi(unsigned a, unsigned b) "
          "{ return (unsigned)(((unsigned long long)a * b) >> 32); }\n")


def _emu_src(src):
    """A generated source for the host: __umulhi (hdn_philox.h) defined after the prelude's
    hdn_compat.h."""
    k = src.index('#include "hdn_compat.h"\n') + len('#include "hdn_compat.h"\n')
    return src[:k] + UMULHI + src[k:]


def _buf(t, val):
    from gpu_testlib import to_storage
    return to_storage(t, val)


@pytest.mark.parametrize("i", [0, 2, 3, 5, 6, 11, 12])
def test_score_modifiers_host_emulation(i):
    """hdn_attn_mod under the generated defines of a configuration (mask strides / types /
    broadcast, ALiBi slopes; block-mask bits where the kernel tests them per score) against the
    CPU reference's additive terms and keep masks."""
    emu, hdr = _host_emu()
    c = FWD_CONFIGS[i]
    B, H, Sq, Skv = c["B"], c["H"], c["Sq"], c["Skv"]
    ts, g = fwd_graph(**c)
    byuid = {t.uid: t for t in ts}
    src = [s for s in _build(g).steps if s[0] == "launch"][0][1]
    src = _emu_src(src[:src.index("// attention_fwd.hip")] + PROBE)
    p = _params(c)
    ins = _inputs(c, ts, p)
    bufs = {t.uid: _buf(t, v) for t, v in ins.items()}
    dummy = np.zeros(1, np.uint8)
    out = np.full((B, H, Sq, Skv), np.nan, np.float32)
    ptr = [bufs.get(U["mask"], dummy).ctypes.data, bufs.get(U["block"], dummy).ctypes.data,
           out.ctypes.data]
    emu.run_kernel(src, "hdn_probe", ((Sq * Skv + 255) // 256, H, B), (256, 1, 1), ptr, hdr)
    p.causal = p.causal_bottom_right = False
    p.left_bound = p.right_bound = p.seq_len_q = p.seq_len_kv = None
    for b in range(B):
        add, keep = ksdpa._bias(p, b, 0, H, Sq, Skv, H, np.float64)
        add = np.zeros((H, Sq, Skv)) if add is None else np.broadcast_to(add, (H, Sq, Skv))
        ok = np.ones((H, Sq, Skv), bool) if keep is None else np.broadcast_to(keep, (H, Sq, Skv))
        if p.block_mask is not None and "#define ATT_BLOCK 1" in src:
            # (the kernels' tiles inside one block-mask tile: no per-score test, the kernels
            # skip the dropped tiles whole - test_attention_blockmask.py)
            bk = p.block_mask[b if p.block_mask.shape[0] > 1 else 0][None]
            ok = ok & np.broadcast_to(ksdpa.block_keep(bk, Sq, Skv)[0], (H, Sq, Skv))
        got = out[b].astype(np.float64)
        assert np.all(got[~ok] == -np.inf), (b, int(np.sum(got[~ok] != -np.inf)))
        assert np.all(np.isfinite(got[ok]))
        err = np.max(np.abs(got[ok] - add[ok]) / np.maximum(1.0, np.abs(add[ok]))) if ok.any() else 0
        assert err < 1e-5, (b, err)
    assert byuid  # the graph built


@pytest.mark.parametrize("i", [8, 9, 11])
def test_sink_start_host_emulation(i):
    """The running (max, sum) of every row of head h start at (sink_h, 1)."""
    emu, hdr = _host_emu()
    c = FWD_CONFIGS[i]
    H = c["H"]
    ts, g = fwd_graph(**c)
    src = [s for s in _build(g).steps if s[0] == "launch"][0][1]
    src = _emu_src(src[:src.index("// attention_fwd.hip")] + PROBE)
    p = _params(c)
    ins = _inputs(c, ts, p)
    sink = [_buf(t, v) for t, v in ins.items() if t.uid == U["sink"]][0]
    out = np.zeros(2 * H, np.float32)
    emu.run_kernel(src, "hdn_probe_sink", (1, 1, 1), (H, 1, 1), [sink.ctypes.data, out.ctypes.data], hdr)
    assert np.allclose(out[:H], p.sink, rtol=1e-6, atol=1e-6), (out[:H], p.sink)
    assert np.all(out[H:] == 1.0)


@pytest.mark.parametrize("dump", ["FLOAT", "HALF", "BFLOAT16"])
def test_rng_dump_kernel_host_emulation(dump):
    emu, hdr = _host_emu()
    B, H, Sq, Skv, pr, seed, off = 2, 3, 13, 21, 0.3, 987654321, 17
    ts, g = fwd_graph("HALF", B, H, H, Sq, Skv, 64, drop=pr, rng_dump=dump, stats=False)
    byuid = {t.uid: t for t in ts}
    st = [s for s in _build(g).steps if s[0] == "launch" and s[2] == "hdn_attn_rng_dump"][0]
    bufs = {8: np.array([seed], np.int64), 9: np.array([off], np.int64),
            U["rng"]: _buf(byuid[U["rng"]], np.full((B, H, Sq, Skv), 7.0))}
    emu.run_kernel(_emu_src(st[1]), st[2], st[3], st[4], [bufs[a[1]].ctypes.data for a in st[5]], hdr)
    from gpu_testlib import from_storage
    got = from_storage(byuid[U["rng"]], bufs[U["rng"]])
    want = np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, Skv, pr) for h in range(H)])
                     for b in range(B)])
    assert np.array_equal(got, want.astype(np.float64))


@pytest.mark.parametrize("dims,dt", [([2, 4, 7, 9], "HALF"), ([1, 4, 1, 9], "FLOAT"),
                                     ([2, 1, 7, 1], "BFLOAT16")])
def test_dbias_out_kernel_host_emulation(dims, dt):
    """The dbias conversion reads the fp32 sums in dbias's dims (contiguous) and writes dbias's
    type and strides."""
    emu, hdr = _host_emu()
    c = dict(dt="HALF", B=2, H=4, Hkv=2, Sq=7, Skv=9, D=64,
             mask=("bias", [2, 4, 7, 9], "HALF", None), dbias=(dims, dt))
    ts, g = bwd_graph(**c)
    byuid = {t.uid: t for t in ts}
    st = [s for s in _build(g).steps if s[0] == "launch" and s[2] == "hdn_attn_dbias_out"][0]
    sums = quantize(rng.uniform(-4, 4, dims), dt).astype(np.float32)
    out = _buf(byuid[U["dbias"]], np.zeros(dims))
    ptr = [sums.ctypes.data if a[0] == "ws" else out.ctypes.data for a in st[5][:2]]
    ptr += [out.ctypes.data] * (len(st[5]) - 2)
    emu.run_kernel(_emu_src(st[1]), st[2], st[3], st[4], ptr, hdr)
    from gpu_testlib import from_storage
    assert np.array_equal(from_storage(byuid[U["dbias"]], out), sums.astype(np.float64))
