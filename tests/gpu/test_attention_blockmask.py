"""SDPA forward on the HIP engine: block-mask tile skipping (the kernels walk only the key tiles
the block mask keeps), max / sum_exp outputs in HALF / BFLOAT16 / DOUBLE, rng_dump of any shape
broadcasting to [B, Hq, Sq, Skv] (an extent-1 dimension receives index 0 of it, as the CPU
reference) and any strides.  CI (no GPU): the programs (block-mask graphs skip tiles, other graphs'
sources carry none of it), the live-tile walk of hdn_attention.h under host emulation against the
CPU reference's block_keep, the 16-bit row outputs and the broadcast keep-mask kernel under host
emulation against the CPU reference engine, NVRTC sm_90a compiles without spills.  GPU
(`pytest -m gpu`): both forward kernels against the CPU reference kernels in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import philox as kphilox
from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from engine_plugins.hip_kernels.ops import sdpa as hsdpa
from gpu_testlib import NP, distinct_launches, from_storage, graph_bytes, node, nvrtc_or_skip, quantize, relerr
from test_attention_roles import U, _build, _close_rows, _emu_src, _host_emu, fwd_graph
from test_attention_roles import fwd_path  # noqa: F401 - the fixture: auto (wgmma on sm_90) / mma
rng = np.random.default_rng(77)


# ------------------------------------------------------------------------ block masks
def pack_blocks(live, Skv):
    """Bool [b, h, row tiles, column tiles] -> the UINT8 block mask (bit c % 8 of byte c // 8,
    least significant first); the bits past the last column tile are set (never read)."""
    nb = -(-(-(-Skv // 128)) // 8)
    full = np.ones(live.shape[:3] + (nb * 8,), bool)
    full[..., :live.shape[3]] = live
    return np.packbits(full, axis=-1, bitorder="little")


def pattern(name, dims, Sq, Skv):
    """A block mask of [b, h] dims: random (half the tiles), causal-like (column tile <= row
    tile), sparse (about 10% live, the second row tile of head 0 empty), ones, zeros."""
    rt, ct = -(-Sq // 128), -(-Skv // 128)
    shape = tuple(dims) + (rt, ct)
    if name == "random":
        live = rng.uniform(0, 1, shape) < 0.5
    elif name == "causal":
        live = np.broadcast_to(np.arange(ct)[None, :] <= np.arange(rt)[:, None], shape).copy()
    elif name == "sparse":
        live = rng.uniform(0, 1, shape) < 0.1
        live[..., 0, :, 0] |= True            # (some rows keep a tile)
        live[:, 0, min(1, rt - 1)] = False
    elif name == "ones":
        live = np.ones(shape, bool)
    else:
        live = np.zeros(shape, bool)
    return pack_blocks(live, Skv)


def test_block_mask_programs_walk_live_tiles():
    """A block-mask graph's forward (wgmma at sm_90, mma.sync otherwise) walks the live key tiles
    (ATT_BLKSKIP) and tests no score against the block mask (its tiles lie inside one 128 x 128
    block-mask tile); a graph without one carries none of that code."""
    _, g = fwd_graph("HALF", 2, 4, 2, 300, 1100, 64, block=[2, 4])
    for arch, kern in (("sm_90", "hdn_attn_fwd_wg"), (None, "hdn_attn_fwd")):
        st = [s for s in _build(g, arch=arch).steps if s[0] == "launch"]
        assert [s[2] for s in st] == [kern]
        src = st[0][1]
        assert "#define ATT_BLKSKIP 1" in src and "#define ATT_BLOCK" not in src
        assert src.count("hdn_attn_blk_next(") >= 2
    _, g = fwd_graph("HALF", 2, 4, 2, 300, 1100, 64, causal_mask=True, maxsum=True)
    for arch in ("sm_90", None):
        for s in _build(g, arch=arch).steps:
            assert "ATT_BLKSKIP" not in s[1] and "RD_SQ" not in s[1]


def test_block_tiles_fall_back_per_score():
    """Tiles that do not lie inside one block-mask tile also mask per score (ATT_BLOCK)."""
    for bm, bn, per in ((64, 64, False), (128, 128, False), (128, 64, False), (96, 64, True),
                        (128, 256, True)):
        d = {"ATT_BLKSKIP": 1}
        hsdpa._block_tiles(d, bm, bn)
        assert ("ATT_BLOCK" in d) == per, (bm, bn)


def test_drop_off_keeps_else_parts():
    body = "\n".join(["a", "#if ATT_BLKSKIP", "b", "#if X", "c", "#else", "d", "#endif", "#else",
                      "e", "#if Y", "f", "#endif", "#endif", "#ifdef RD_SQ", "g", "#endif", "h"])
    assert hsdpa._drop_off(body, {}) == "\n".join(["a", "e", "#if Y", "f", "#endif", "h"])
    assert hsdpa._drop_off(body, {"ATT_BLKSKIP": 1, "RD_SQ": 3}) == body


PROBE_TILES = r"""
#define __constant__
#include "hdn_attention.h"
// per (query tile, h, b): the key tiles the kernels walk, in the producer / consumer form of
// attention_fwd_wgmma.hip (n = next(n) at the loop head) and the look-ahead form of
// attention_fwd.hip (the next live tile found while the current one is processed)
extern "C" __global__ void hdn_probe_tiles(const unsigned char* att_blk, const int* prm, int* out) {
    const int bm = prm[0], bn = prm[1], nqt = prm[2], w = prm[3];
    const int qt = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, b = blockIdx.z;
    if (qt >= nqt) return;
    const unsigned char* bk = HDN_ATTN_BLK(b, h);
    const int q0 = qt * bm, nb1 = (SKV + bn - 1) / bn;
    int* o = out + (((long long)b * HQ + h) * nqt + qt) * 2 * w;
    const int nb0 = hdn_attn_blk_next(bk, q0, bm, 0, nb1, bn);
    int c = 0;
    for (int n = nb0; n < nb1; ++n) {
        n = hdn_attn_blk_next(bk, q0, bm, n, nb1, bn);
        if (n >= nb1) break;
        o[1 + c++] = n;
    }
    o[0] = c;
    c = 0;
    int nbn = nb0;
    for (int n = nb0; n < nb1; ++n) {
        n = nbn;
        if (n >= nb1) break;
        o[w + 1 + c++] = n;
        nbn = hdn_attn_blk_next(bk, q0, bm, n + 1, nb1, bn);
    }
    o[w] = c;
}
"""


@pytest.mark.parametrize("pat", ["random", "causal", "sparse", "ones", "zeros"])
@pytest.mark.parametrize("dims", [[2, 3], [1, 3], [2, 1]])
def test_live_tiles_host_emulation(pat, dims):
    """hdn_attn_blk_next under a block-mask graph's defines (strides, broadcast) walks exactly the
    key tiles where the CPU reference's block_keep keeps a score, for the kernels' tiles (64 x 64
    mma.sync, 128 x 128 / 128 x 64 wgmma) and tiles spanning several block-mask tiles; for the
    kernels' tiles block_keep is all-or-nothing on every tile (skipping = masking)."""
    emu, hdr = _host_emu()
    B, H, Sq, Skv = 2, 3, 300, 1100
    ts, g = fwd_graph("HALF", B, H, H, Sq, Skv, 64, block=dims)
    t = [x for x in ts if x.uid == U["block"]][0]
    bm_val = pattern(pat, dims, Sq, Skv)
    src = [s for s in _build(g).steps if s[0] == "launch"][0][1]
    src = _emu_src(src[:src.index("// attention_fwd.hip")] + PROBE_TILES)
    keep = np.broadcast_to(ksdpa.block_keep(bm_val, Sq, Skv), (B, H, Sq, Skv))
    buf = np.ascontiguousarray(bm_val.reshape(t.dims))
    for bm, bn, nested in ((64, 64, True), (128, 128, True), (128, 64, True), (192, 320, False)):
        nqt, nkt = -(-Sq // bm), -(-Skv // bn)
        w = nkt + 1
        out = np.full((B, H, nqt, 2, w), -1, np.int32)
        prm = np.array([bm, bn, nqt, w], np.int32)
        emu.run_kernel(src, "hdn_probe_tiles", (1, H, B), (nqt, 1, 1),
                       [buf.ctypes.data, prm.ctypes.data, out.ctypes.data], hdr)
        for b in range(B):
            for h in range(H):
                for qt in range(nqt):
                    tiles = [keep[b, h, qt * bm:(qt + 1) * bm, n * bn:(n + 1) * bn] for n in range(nkt)]
                    want = [n for n in range(nkt) if tiles[n].any()]
                    for form in range(2):
                        o = out[b, h, qt, form]
                        assert list(o[1:1 + o[0]]) == want, (bm, bn, b, h, qt, form, list(o), want)
                    if nested:
                        assert all(x.all() or not x.any() for x in tiles), (bm, bn, b, h, qt)


# ------------------------------------------------------------- 16-bit max / sum_exp outputs
PROBE_ROWOUT = r"""
#define __constant__
#include "hdn_attention.h"
// hdn_attn_row_out of every (b, h, i) from (m2, l, empty) triples
extern "C" __global__ void hdn_probe_rowout(const float* v, void* mx, void* se) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= NB * HQ * SQ) return;
    const int i = n % SQ, h = (n / SQ) % HQ, b = n / (SQ * HQ);
    hdn_attn_row_out(b, h, i, v[3 * n + 2] != 0.f, v[3 * n], v[3 * n + 1], (PROBE_T*)mx, (PROBE_T*)se);
}
"""


@pytest.mark.parametrize("mt", ["HALF", "BFLOAT16", "DOUBLE", "FLOAT"])
def test_maxsum_row_out_host_emulation(mt):
    """The max / sum_exp of a row in each output type: the float values rounded to nearest even
    (as the CPU reference stores its float32 results), -inf / 0 for rows without keys."""
    emu, hdr = _host_emu()
    B, H, Sq = 2, 3, 37
    ts, g = fwd_graph("HALF", B, H, H, Sq, 64, 64, maxsum=mt)
    byuid = {t.uid: t for t in ts}
    src = [s for s in _build(g).steps if s[0] == "launch"][0][1]
    assert f"{hsdpa.STAT_T[mt]}* __restrict__ att_max" in src
    src = _emu_src(src[:src.index("// attention_fwd.hip")].replace(
        '#include "hdn_compat.h"\n', f'#include "hdn_compat.h"\n#define PROBE_T {hsdpa.STAT_T[mt]}\n', 1)
        + PROBE_ROWOUT)
    n = B * H * Sq
    m2 = rng.uniform(-30, 30, n).astype(np.float32)
    lv = rng.uniform(0.5, 3000, n).astype(np.float32)
    emp = (rng.uniform(0, 1, n) < 0.2).astype(np.float32)
    v = np.ascontiguousarray(np.stack([m2, lv, emp], 1))
    mx = np.zeros(byuid[U["max"]].span, NP[mt])
    se = np.zeros_like(mx)
    emu.run_kernel(src, "hdn_probe_rowout", ((n + 127) // 128, 1, 1), (128, 1, 1),
                   [v.ctypes.data, mx.ctypes.data, se.ctypes.data], hdr)
    want_m = np.where(emp != 0, -np.inf, m2 * np.float32(0.6931471805599453)).astype(np.float32)
    want_s = np.where(emp != 0, np.float32(0), lv).astype(np.float32)
    shape = (B, H, Sq, 1)
    got_m = from_storage(byuid[U["max"]], mx)
    got_s = from_storage(byuid[U["sum_exp"]], se)
    assert np.array_equal(got_m, quantize(want_m.reshape(shape).astype(np.float64), mt)), mt
    assert np.array_equal(got_s, quantize(want_s.reshape(shape).astype(np.float64), mt)), mt


# ------------------------------------------------------------------ rng_dump shapes / strides
RNG_DIMS = [([1, 3, 13, 21], None), ([2, 1, 13, 21], None), ([1, 1, 1, 21], None),
            ([2, 3, 13, 1], None), ([2, 3, 1, 1], None),
            ([2, 3, 13, 21], [3 * 13 * 32, 32, 3 * 32, 1])]      # strided: BSHD-like, padded rows


def _rng_graph(dims, strides, dump="FLOAT", B=2, H=3, Sq=13, Skv=21, D=64, pr=0.3):
    ts, g = fwd_graph("HALF", B, H, H, Sq, Skv, D, drop=pr, rng_dump=dump, stats=False, rng_dims=dims)
    if strides is not None:
        t = [x for x in ts if x.uid == U["rng"]][0]
        t.strides = list(strides)
        a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
             "attn_scale_value": 1 / math.sqrt(D), "seed_tensor_uid": 8, "offset_tensor_uid": 9,
             "dropout_probability": pr, "rng_dump_tensor_uid": U["rng"]}
        g = graph_bytes(ts, [node("SdpaAttributes", a)])
    return ts, g


def _rng_want(dims, seed, off, H=3, Sq=13, Skv=21, pr=0.3):
    """The CPU reference's dump: the keep mask at index 0 of each broadcast dimension."""
    return np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, Skv, pr)[:dims[2], :dims[3]]
                               for h in range(dims[1])]) for b in range(dims[0])]).astype(np.float64)


@pytest.mark.parametrize("dims,ok", [(d, True) for d, _ in RNG_DIMS] +
                         [([2, 3, 13, 5], False), ([3, 3, 13, 21], False), ([2, 3, 13], False)])
@pytest.mark.parametrize("mt", ["HALF", "BFLOAT16", "DOUBLE", "INT32"])
def test_gpu_accepts_what_the_cpu_reference_accepts(dims, ok, mt):
    """The rng_dump shapes and the max / sum_exp types the CPU reference takes build on the
    HIP engine (mma.sync and sm_90); the others both decline."""
    from engine_plugins.cpu_reference import engine as cpu_engine
    from engine_plugins.hip_kernels.program import NotApplicable, build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    _, g = fwd_graph("HALF", 2, 3, 3, 13, 21, 64, drop=0.3, rng_dump="FLOAT", rng_dims=dims, maxsum=mt)
    cpu_engine._cache.clear()
    cpu = cpu_engine._analyse(parse_graph(g))
    assert cpu.ok == (ok and mt != "INT32"), cpu.reason
    for arch in (None, "sm_90"):
        try:
            build_program(parse_graph(g), arch=arch)
            gpu = True
        except NotApplicable:
            gpu = False
        assert gpu == cpu.ok, (arch, dims, mt)


@pytest.mark.parametrize("dims,strides", RNG_DIMS)
def test_rng_dump_shapes_host_emulation(dims, strides):
    """hdn_attn_rng_dump for a broadcast / strided dump writes what the CPU reference engine
    writes for the same graph (and nothing outside the dump's elements)."""
    emu, hdr = _host_emu()
    from cpu_stand_in import CpuRunner
    seed, off = 987654321, 17
    ts, g = _rng_graph(dims, strides)
    byuid = {t.uid: t for t in ts}
    st = [s for s in _build(g).steps if s[0] == "launch" and s[2] == "hdn_attn_rng_dump"][0]
    assert st[3] == (-(-dims[2] * dims[3] // 256), dims[1], dims[0])
    t = byuid[U["rng"]]
    buf = np.full(t.span, 7.0, np.float32)
    bufs = {8: np.array([seed], np.int64), 9: np.array([off], np.int64), U["rng"]: buf}
    emu.run_kernel(_emu_src(st[1]), st[2], st[3], st[4], [bufs[a[1]].ctypes.data for a in st[5]], hdr)
    got = from_storage(t, buf)
    assert np.array_equal(got, _rng_want(dims, seed, off))
    mark = np.zeros(t.span, bool)
    np.lib.stride_tricks.as_strided(mark, shape=t.dims, strides=[s for s in t.strides])[...] = True
    assert np.all(buf[~mark] == 7.0)
    q, k, v = (quantize(rng.uniform(-1, 1, x.dims), "HALF") for x in ts[:3])
    cpu = CpuRunner().run(g, {ts[0]: q, ts[1]: k, ts[2]: v,
                              byuid[8]: np.array([seed]).reshape(1, 1, 1, 1),
                              byuid[9]: np.array([off]).reshape(1, 1, 1, 1)}, [ts[3], t])
    assert np.array_equal(cpu[U["rng"]], got)


# ------------------------------------------------------------------------ NVRTC (sm_90a)
def _programs():
    """(name, program) of the block-mask, 16-bit max / sum_exp and rng_dump configurations."""
    for i, c in enumerate(BLOCK_CONFIGS):
        _, g = fwd_graph(**c)
        yield f"blk{i}", _build(g, arch="sm_90")
        yield f"blk{i}_mma", _build(g)
    for mt in ("HALF", "BFLOAT16", "DOUBLE"):
        _, g = fwd_graph("BFLOAT16", 2, 4, 2, 77, 131, 128, maxsum=mt, causal_mask=True)
        yield f"max_{mt}", _build(g, arch="sm_90")
        yield f"max_{mt}_mma", _build(g)
    for i, (dims, strides) in enumerate(RNG_DIMS):
        yield f"rng{i}", _build(_rng_graph(dims, strides)[1], arch="sm_90")


@pytest.mark.slow
def test_sources_compile_sm90a_without_spills():
    from engine_plugins.hip_kernels import codegen
    c = nvrtc_or_skip()
    hdr = codegen.headers()
    for name, st in distinct_launches(_programs()):
        assert c.compile(st[1], f"{name}_{st[2]}.hip", ("--ptxas-options=-v",), "sm_90a", hdr), name
        if st[2] in ("hdn_attn_fwd_wg", "hdn_attn_fwd"):
            assert " 0 bytes spill stores" in c.last_log, (name, c.last_log)


# ------------------------------------------------------------------------------------ GPU
BLOCK_CONFIGS = [
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=300, Skv=1100, D=64, block=[2, 4]),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=260, Skv=700, D=128, block=[1, 4], maxsum=True),
    dict(dt="HALF", B=2, H=2, Hkv=1, Sq=200, Skv=900, D=256, block=[2, 1]),
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=300, Skv=1100, D=64, block=[2, 4], sink="FLOAT", maxsum=True),
    dict(dt="BFLOAT16", B=3, H=2, Hkv=2, Sq=300, Skv=600, D=64, block=[3, 2], seq=True,
         causal_mask_bottom_right=True, maxsum=True),
    dict(dt="HALF", B=2, H=4, Hkv=2, Sq=300, Skv=1100, D=96, block=[1, 1], causal_mask=True,
         mask=("bias", [1, 4, 300, 1100], "HALF", None), alibi=True),
]
PATTERNS = ["random", "causal", "sparse", "ones", "zeros"]


def _lens(B, Sq, Skv):
    return (np.array([Sq, max(1, Sq * 45 // 100), 7][:B]), np.array([Skv, Skv * 7 // 10, 1][:B]))


def _run_block(R, c, pat):
    dt, B, H, Sq, Skv = c["dt"], c["B"], c["H"], c["Sq"], c["Skv"]
    ts, g = fwd_graph(**c)
    byuid = {t.uid: t for t in ts}
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(c["D"]))))
    p.causal = bool(c.get("causal_mask"))
    p.causal_bottom_right = bool(c.get("causal_mask_bottom_right"))
    p.bottom_right = p.causal_bottom_right and not p.causal
    p.alibi = bool(c.get("alibi"))
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    bm_val = pattern(pat, c["block"], Sq, Skv)
    p.block_mask = bm_val
    ins[byuid[U["block"]]] = bm_val
    if c.get("seq"):
        p.seq_len_q, p.seq_len_kv = _lens(B, Sq, Skv)
        ins[byuid[6]], ins[byuid[7]] = p.seq_len_q.reshape(B, 1, 1, 1), p.seq_len_kv.reshape(B, 1, 1, 1)
    if c.get("sink"):
        p.sink = quantize(rng.uniform(-1, 4, [H]), c["sink"])
        ins[byuid[U["sink"]]] = p.sink.reshape(1, H, 1, 1)
    if c.get("mask"):
        t = byuid[U["mask"]]
        p.attn_mask = quantize(rng.uniform(-3, 3, t.dims), c["mask"][2])
        ins[t] = p.attn_mask
    outs = [ts[3]] + [byuid[u] for u in (5, U["max"], U["sum_exp"]) if u in byuid]
    res = R.run(g, ins, outs)
    O, st, mx, se = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    tol = 1e-2 if dt == "HALF" else 3e-2
    if np.linalg.norm(O) > 0:
        assert relerr(res[4], O) < tol, relerr(res[4], O)
    else:
        assert np.all(res[4] == 0)
    _close_rows(res[5], st, 2e-3, "stats")
    if U["max"] in res:
        _close_rows(res[U["max"]], mx, 2e-3, "max")
        _close_rows(res[U["sum_exp"]], se, 5e-3, "sum_exp")


@pytest.mark.gpu
@pytest.mark.parametrize("pat", PATTERNS)
def test_block_mask_patterns_vs_cpu_reference(R, pat, fwd_path):
    """Random, causal-like, 90%-sparse (with empty rows), all-ones and all-zero block masks."""
    _run_block(R, BLOCK_CONFIGS[0], pat)


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(1, len(BLOCK_CONFIGS)))
@pytest.mark.parametrize("pat", ["sparse", "causal"])
def test_block_mask_configs_vs_cpu_reference(R, i, pat, fwd_path):
    """Broadcast block masks, D = 128 / 256 (wgmma: 64-key tiles), a sink (rows without live
    tiles keep the sink's statistics), padding with bottom-right causal, an additive mask and
    ALiBi on the live tiles."""
    _run_block(R, BLOCK_CONFIGS[i], pat)


@pytest.mark.gpu
@pytest.mark.parametrize("mt", ["HALF", "BFLOAT16", "DOUBLE"])
def test_maxsum_types_vs_cpu_reference(R, mt, fwd_path):
    """max / sum_exp in HALF / BFLOAT16 / DOUBLE: the reference rounded to the type (one unit of
    the last place of slack), -inf / 0 for rows without keys (padding)."""
    dt, B, H, Sq, Skv, D = "HALF", 3, 2, 77, 131, 64
    ts, g = fwd_graph(dt, B, H, H, Sq, Skv, D, maxsum=mt, seq=True, causal_mask=True)
    byuid = {t.uid: t for t in ts}
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(D))), causal=True)
    p.seq_len_q, p.seq_len_kv = _lens(B, Sq, Skv)
    ins = {ts[0]: q, ts[1]: k, ts[2]: v, byuid[6]: p.seq_len_q.reshape(B, 1, 1, 1),
           byuid[7]: p.seq_len_kv.reshape(B, 1, 1, 1)}
    res = R.run(g, ins, [ts[3], byuid[5], byuid[U["max"]], byuid[U["sum_exp"]]])
    O, st, mx, se = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    ulp = {"HALF": 2e-3, "BFLOAT16": 1.6e-2, "DOUBLE": 1e-4}[mt]
    _close_rows(res[U["max"]], quantize(mx, mt), 2e-3 + ulp, "max")
    _close_rows(res[U["sum_exp"]], quantize(se, mt), 5e-3 + ulp, "sum_exp")
    assert relerr(res[4], O) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dims,strides", RNG_DIMS)
def test_rng_dump_shapes_bit_exact(R, dims, strides):
    """A broadcast / strided rng_dump holds the keep mask as the CPU reference writes it."""
    seed, off = 1234567, 5
    ts, g = _rng_graph(dims, strides)
    byuid = {t.uid: t for t in ts}
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims), "HALF") for t in ts[:3])
    res = R.run(g, {ts[0]: q, ts[1]: k, ts[2]: v, byuid[8]: np.array([seed]).reshape(1, 1, 1, 1),
                    byuid[9]: np.array([off]).reshape(1, 1, 1, 1)}, [ts[3], byuid[U["rng"]]])
    assert np.array_equal(res[U["rng"]], _rng_want(dims, seed, off))
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(64))), dropout=("philox", 0.3, seed, off))
    assert relerr(res[4], ksdpa.sdpa_fwd(q, k, v, p, np.float64)[0]) < 1e-2

