"""Paged K/V and ragged (packed THD) tensors in the HIP engine's flash attention.  CI (no GPU): the
programs (the mma.sync kernels on every target, sm_90 included), their sources compile for
sm_90a with NVRTC without spills, and the declines (AMD, page sizes, a pool without its table,
ragged tensors of other operations, sub-16-byte alignments).  GPU (`pytest -m gpu`): forward
(paged: decode and prefill, pages out of order, page sizes 16 / 64 / 128, GQA 1 / 4 / 8, only k
or only v paged; ragged: empty and length-1 sequences, odd lengths, offset multipliers) and the
ragged backward against the CPU reference's float64 formulas on the same quantised inputs.

On sm_90 the forward of the prefill-shaped graphs (ragged tensors, paged pools of >= 64-row
pages) runs on the wgmma kernel through per-batch / per-page tensor maps (opt-in
HIPDNN_CABI_HIP_ATTN_VARLEN, which tests/gpu turns on; PAGED_WG / RAGGED_WG add such cases); the
CI tests here check those programs, their sm_90a compiles and a host model of their tile loads
(the maps, coordinates and out-of-range rows), the mma.sync programs with the knob off.  The
ragged backward's main kernel is the wgmma one where HIPDNN_CABI_HIP_ATTN_BWD is opted in too
(tests/gpu: both)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa
from gpu_testlib import T, assert_sdpa_close, graph_bytes, node, paged_pools, quantize, relerr

rng = np.random.default_rng(2024)


class RT(T):
    """A tensor whose batches are packed: batch b starts offsets[b] * mult elements in."""

    def __init__(self, uid, dims, dtype, strides, off_uid, mult=1):
        super().__init__(uid, dims, dtype, strides=strides)
        self.off_uid, self.mult = off_uid, mult

    def fb(self):
        d = super().fb()
        d["ragged_offset_tensor_uid"] = self.off_uid
        if self.mult != 1:
            d["ragged_offset_multiplier"] = self.mult
        return d


def _no_spills(log):
    lines = [ln for ln in log.splitlines() if "spill stores" in ln]
    return lines and all(" 0 bytes spill stores" in ln for ln in lines)


def _flat(uid, n, dt):
    """The storage of a packed tensor as a 1-d tensor (what the runner allocates and reads)."""
    return T(uid, [int(n)], dt)


# ------------------------------------------------------------------------------ paged K / V
def paged_graph(dt, B, H, Hkv, Sq, D, PS, NP, MP, skv=None, stats=True, only=None, **attrs):
    """q [B, H, Sq, D]; k / v pools [NP, Hkv, PS, D]; page tables [B, 1, MP, 1] INT32 (uids 8, 9);
    lengths uids 6 / 7; stats uid 5.  ``only`` ("k" / "v"): only that one paged, the other
    dense [B, Hkv, skv, D] (no table)."""
    pool = [NP, Hkv, PS, D]
    ts = [T(1, [B, H, Sq, D], dt), T(2, pool if only != "v" else [B, Hkv, skv, D], dt),
          T(3, pool if only != "k" else [B, Hkv, skv, D], dt),
          T(4, [B, H, Sq, D], dt), T(6, [B, 1, 1, 1], "INT32"), T(7, [B, 1, 1, 1], "INT32")]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "seq_len_q_tensor_uid": 6, "seq_len_kv_tensor_uid": 7, "padding_mask": True,
         "attn_scale_value": 1 / math.sqrt(D)}
    for uid, role in ((8, "k"), (9, "v")):
        if only in (None, role):
            ts.append(T(uid, [B, 1, MP, 1], "INT32"))
            a[f"page_table_{role}_tensor_uid"] = uid
    if skv is not None:
        a["max_seq_len_kv"] = skv
    if stats:
        ts.append(T(5, [B, H, Sq, 1], "FLOAT"))
        a.update(stats_tensor_uid=5, generate_stats=True)
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaAttributes", a)])


PAGED = [   # decode (Sq 1 / 4) and prefill; page sizes 16 / 64 / 128; GQA 4 / 8 / 1
    dict(dt="HALF", B=3, H=8, Hkv=2, Sq=1, D=128, PS=16, lq=[1, 1, 1], lkv=[37, 1, 100]),
    dict(dt="BFLOAT16", B=2, H=8, Hkv=1, Sq=1, D=64, PS=64, lq=[1, 1], lkv=[200, 65]),
    dict(dt="HALF", B=2, H=4, Hkv=1, Sq=4, D=64, PS=16, lq=[4, 3], lkv=[70, 3],
         causal_mask_bottom_right=True),
    dict(dt="HALF", B=2, H=4, Hkv=4, Sq=77, D=64, PS=128, lq=[77, 30], lkv=[300, 30],
         causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=2, Sq=40, D=128, PS=16, lq=[40, 1], lkv=[50, 17],
         causal_mask=True),
    dict(dt="HALF", B=2, H=2, Hkv=2, Sq=65, D=96, PS=32, lq=[65, 64], lkv=[129, 1], Dv=None),
    # long context, few blocks: the keys split over blocks (KV_SPLIT) and merged
    dict(dt="HALF", B=2, H=8, Hkv=2, Sq=1, D=128, PS=64, lq=[1, 1], lkv=[1000, 77]),
    dict(dt="BFLOAT16", B=1, H=4, Hkv=1, Sq=2, D=64, PS=16, lq=[2], lkv=[613],
         causal_mask_bottom_right=True),
]

# prefill shapes with pages of >= 64 rows: the wgmma forward on sm_90 (PS 64 < the 128-key tile:
# two page slices per tile; 128; 256 > the tile); GQA 4 / 1 / 8, D 128 / 64
PAGED_WG = [
    dict(dt="HALF", B=3, H=8, Hkv=2, Sq=200, D=128, PS=64, lq=[200, 1, 77], lkv=[300, 64, 129],
         causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=4, Sq=130, D=64, PS=128, lq=[130, 0], lkv=[130, 200]),
    dict(dt="HALF", B=2, H=8, Hkv=1, Sq=96, D=64, PS=256, lq=[96, 50], lkv=[700, 3],
         causal_mask=True),
    dict(dt="BFLOAT16", B=2, H=8, Hkv=8, Sq=150, D=128, PS=64, lq=[150, 33], lkv=[150, 257],
         causal_mask=True),
]
PAGED_ALL = PAGED + PAGED_WG


def _paged_case(c):
    c = {k: v for k, v in c.items() if k != "Dv"}
    lq, lkv = np.array(c.pop("lq")), np.array(c.pop("lkv"))
    B, PS = c["B"], c["PS"]
    pages = [-(-int(n) // PS) for n in lkv]
    MP = max(pages) + 1                       # one spare entry per batch (never read)
    NP = sum(pages) + 2                       # + a NaN page the spare entries name
    skv = MP * PS - PS // 2                   # max_seq_len_kv below the tables' reach
    return c, lq, lkv, pages, MP, NP, skv


def _paged_inputs(c, lq, lkv, pages, MP, NP, skv):
    """Dense q / k / v (k / v zero past each length), the pools with the pages in shuffled order
    (unreferenced page and rows: NaN) and the tables."""
    dt, B, H, Hkv, Sq, D, PS = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "D", "PS"))
    q = quantize(rng.uniform(-2, 2, (B, H, Sq, D)), dt)
    k = quantize(rng.uniform(-2, 2, (B, Hkv, skv, D)), dt)
    v = quantize(rng.uniform(-1, 1, (B, Hkv, skv, D)), dt)
    for b in range(B):
        k[b, :, lkv[b]:] = 0
        v[b, :, lkv[b]:] = 0
    kp, vp, tab = paged_pools(k, v, lkv, pages, PS, NP, MP, rng)
    return q, k, v, kp, vp, tab


def _p(D, lq, lkv, c):
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(D))))
    p.causal = bool(c.get("causal_mask"))
    p.causal_bottom_right = bool(c.get("causal_mask_bottom_right"))
    p.bottom_right = p.causal_bottom_right and not p.causal
    p.seq_len_q, p.seq_len_kv = np.asarray(lq), np.asarray(lkv)
    return p


def test_paged_programs_use_the_mma_kernel_and_compile_sm90a(monkeypatch):
    """With HIPDNN_CABI_HIP_ATTN_VARLEN=mma every paged case builds the mma.sync forward (sm_90
    too) with the page-table loads; the sources compile for sm_90a without spills."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", "mma")
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    c = _compiler()
    for i, case in enumerate(PAGED):
        cc, lq, lkv, pages, MP, NP, skv = _paged_case(case)
        _, g = paged_graph(NP=NP, MP=MP, skv=skv, **cc)
        for arch in (None, "sm_90"):
            prog = build_program(parse_graph(g), arch=arch)
            names = [st[2] for st in prog.steps if st[0] == "launch"]
            assert names in (["hdn_attn_fwd"], ["hdn_attn_fwd", "hdn_attn_fwd_combine"]), names
            assert (len(names) == 2) == (i >= 6), names       # the long-context cases split
            src = prog.steps[0][1]
            assert f"#define K_PAGED {int(cc['PS']).bit_length() - 1}" in src
            assert f"#define SKV {skv}" in src
        if c is not None:
            c.compile(src, f"paged{i}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
            assert _no_spills(c.last_log), c.last_log


# the decode-shaped cases ((Hq / Hkv) x Sq <= 16) also with HIPDNN_CABI_HIP_ATTN_DECODE=0 (the
# GQA_PACK kernel; tests/gpu turns the decode kernel on)
PAGED_RUNS = [(i, None) for i in range(len(PAGED_ALL))] + \
    [(i, "0") for i, c in enumerate(PAGED_ALL) if c["H"] // c["Hkv"] * c["Sq"] <= 16]


@pytest.mark.gpu
@pytest.mark.parametrize("i, dec", PAGED_RUNS)
def test_paged_forward_vs_cpu_reference(R, i, dec, monkeypatch):
    if dec is not None:
        monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", dec)
    cc, lq, lkv, pages, MP, NP, skv = _paged_case(PAGED_ALL[i])
    ts, g = paged_graph(NP=NP, MP=MP, skv=skv, **cc)
    q, k, v, kp, vp, tab = _paged_inputs(cc, lq, lkv, pages, MP, NP, skv)
    B = cc["B"]
    by = {t.uid: t for t in ts}
    res = R.run(g, {by[1]: q, by[2]: kp, by[3]: vp, by[6]: lq.reshape(B, 1, 1, 1),
                    by[7]: lkv.reshape(B, 1, 1, 1), by[8]: tab, by[9]: tab}, [by[4], by[5]])
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, _p(cc["D"], lq, lkv, cc), np.float64)
    tol = 1e-2 if cc["dt"] == "HALF" else 3e-2
    assert np.all(np.isfinite(res[4])), "NaN in O: a page or row past the length was read"
    assert relerr(res[4], O) < tol, relerr(res[4], O)
    fin = np.isfinite(st)
    assert np.array_equal(np.isfinite(res[5]), fin)
    assert np.max(np.abs(res[5][fin] - st[fin])) < 2e-2


# one of k / v paged, the other dense: decode, prefill with a causal mask (mma.sync; wgmma with
# 64-row pages), the split keys
ONE_PAGED = [(i, only) for i in (0, 3, 6, len(PAGED)) for only in ("k", "v")]


def _one_paged_inputs(i, only):
    """(graph tensors, graph, the engine's inputs by uid, the dense q / k / v, case, lengths)."""
    cc, lq, lkv, pages, MP, NP, skv = _paged_case(PAGED_ALL[i])
    ts, g = paged_graph(NP=NP, MP=MP, skv=skv, only=only, **cc)
    q, k, v, kp, vp, tab = _paged_inputs(cc, lq, lkv, pages, MP, NP, skv)
    B = cc["B"]
    ins = {1: q, 2: kp if only == "k" else k, 3: vp if only == "v" else v,
           6: lq.reshape(B, 1, 1, 1), 7: lkv.reshape(B, 1, 1, 1), 8 if only == "k" else 9: tab}
    return ts, g, ins, (q, k, v), cc, lq, lkv


def test_one_paged_programs_and_compile_sm90a(monkeypatch):
    """Only k or only v paged: the mma.sync forward (HIPDNN_CABI_HIP_ATTN_VARLEN=mma) loads that
    one through its table and the other as a dense [B, Hkv, Skv, D] tensor; the sources compile
    for sm_90a without spills."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", "mma")
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    c = _compiler()
    for i, only in ONE_PAGED:
        _, g, _, _, cc, _, _ = _one_paged_inputs(i, only)
        other = "v" if only == "k" else "k"
        for arch in (None, "sm_90"):
            prog = build_program(parse_graph(g), arch=arch)
            names = [st[2] for st in prog.steps if st[0] == "launch"]
            assert names[0] == "hdn_attn_fwd", names
            src = prog.steps[0][1]
            lg = int(cc["PS"]).bit_length() - 1
            assert f"#define {only.upper()}_PAGED {lg}" in src
            assert f"#define {other.upper()}_PAGED" not in src
            assert f"__restrict__ {only}pt" in src and f"__restrict__ {other}pt" not in src
        if c is not None:
            c.compile(src, f"paged_{only}{i}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
            assert _no_spills(c.last_log), c.last_log


def test_one_paged_inputs_on_the_cpu_reference():
    """CI self-check of the one-paged device test's construction: the CPU reference engine on
    those graphs and inputs gives the float64 formulas' result on the dense k / v."""
    import types

    import cffi
    from engine_plugins.cpu_reference import create_plugin
    from engine_plugins.cpu_reference.engine import ENGINE_NAME
    from gpu_testlib import from_storage, to_storage
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, engine_id_of, parse_graph
    c = create_plugin().create_container()
    cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})
    for i, only in ONE_PAGED[:2]:
        ts, g, ins, (q, k, v), cc, lq, lkv = _one_paged_inputs(i, only)
        by = {t.uid: t for t in ts}
        host = {u: to_storage(by[u], ins[u]) for u in ins}
        host.update({u: to_storage(by[u], np.zeros(by[u].dims)) for u in (4, 5)})
        ctx = c.create_execution_context(cfg, parse_graph(g))
        c.execute(ctx, 0, DeviceBuffers({u: a.ctypes.data for u, a in host.items()}, ffi=cffi.FFI()))
        O, _, _, _ = ksdpa.sdpa_fwd(q, k, v, _p(cc["D"], lq, lkv, cc), np.float64)
        assert relerr(from_storage(by[4], host[4]), O) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("i, only", ONE_PAGED)
def test_one_paged_forward_vs_cpu_reference(R, i, only):
    ts, g, ins, (q, k, v), cc, lq, lkv = _one_paged_inputs(i, only)
    by = {t.uid: t for t in ts}
    res = R.run(g, {by[u]: x for u, x in ins.items()}, [by[4], by[5]])
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, _p(cc["D"], lq, lkv, cc), np.float64)
    tol = 1e-2 if cc["dt"] == "HALF" else 3e-2
    assert np.all(np.isfinite(res[4])), "NaN in O: a page or row past the length was read"
    assert relerr(res[4], O) < tol, relerr(res[4], O)
    fin = np.isfinite(st)
    assert np.array_equal(np.isfinite(res[5]), fin)
    assert np.max(np.abs(res[5][fin] - st[fin])) < 2e-2


def _run_outside_the_pool(R, case, past, negative, v_too):
    """Paged ``case`` run with K's page table naming a page past the pool at index ``past`` and
    page -3 at index ``negative`` (V's table too where ``v_too``); returns the outputs
    {uid: O / stats} and the float64 reference's O."""
    cc, lq, lkv, pages, MP, NP, skv = _paged_case(case)
    ts, g = paged_graph(NP=NP, MP=MP, skv=skv, **cc)
    q, k, v, kp, vp, tab = _paged_inputs(cc, lq, lkv, pages, MP, NP, skv)
    bad = tab.copy()
    bad[past] = NP + 1000
    bad[negative] = -3
    B = cc["B"]
    by = {t.uid: t for t in ts}
    res = R.run(g, {by[1]: q, by[2]: kp, by[3]: vp, by[6]: lq.reshape(B, 1, 1, 1),
                    by[7]: lkv.reshape(B, 1, 1, 1), by[8]: bad, by[9]: bad if v_too else tab}, [by[4], by[5]])
    O, _, _, _ = ksdpa.sdpa_fwd(q, k, v, _p(cc["D"], lq, lkv, cc), np.float64)
    return res, O


@pytest.mark.gpu
def test_paged_page_outside_the_pool_gives_nan_not_a_fault(R):
    """A table entry naming no page of the pool (the CPU reference: INVALID_VALUE) makes that
    batch's rows NaN; the other batches are unaffected."""
    res, O = _run_outside_the_pool(R, PAGED[0], (2, 0, 1, 0), (0, 0, 0, 0), v_too=True)
    assert np.all(np.isnan(res[4][0])) and np.all(np.isnan(res[4][2]))
    assert relerr(res[4][1], O[1]) < 1e-2


# ------------------------------------------------------------------------ ragged (packed) THD
def pack(x, lens, off_tokens):
    """x [B, H, S, D] -> THD storage (batch b's row s, head h at (off[b] + s) * H * D + h * D),
    one slack row past the end."""
    B, H, S, D = x.shape
    flat = np.full((int(off_tokens[-1]) + 1) * H * D, np.nan)
    for b in range(B):
        n = int(lens[b])
        o = int(off_tokens[b]) * H * D
        flat[o:o + n * H * D] = np.swapaxes(x[b, :, :n], 0, 1).reshape(-1)
    return flat


def unpack(flat, lens, off_tokens, shape):
    B, H, S, D = shape
    out = np.zeros(shape)
    for b in range(B):
        n = int(lens[b])
        o = int(off_tokens[b]) * H * D
        out[b, :, :n] = np.swapaxes(flat[o:o + n * H * D].reshape(n, H, D), 0, 1)
    return out


def _offsets(lens, pad=0):
    """Token offsets [B + 1] (``pad`` spare tokens after every batch: gaps between them)."""
    return np.concatenate([[0], np.cumsum(np.asarray(lens) + pad)]).astype(np.int64)


def ragged_tensors(dt, B, H, Hkv, Sq, Skv, D, elem_offsets=False, bwd=False):
    """Packed q / k / v / o (and do / dq / dk / dv, stats) with THD strides; q / o / do / dq and
    stats share the offsets uid 20, k / v / dk / dv uid 21 (token counts times a multiplier of
    H * D, Hkv * D, H), or - ``elem_offsets`` - q / o (uid 22) and k / v (uid 23) INT64 element
    offsets (multiplier 1)."""
    def thd(uid, h, s, d, off, m):
        return RT(uid, [B, h, s, d], dt, [s * h * d, d, h * d, 1], off, m)
    qo, kv = (22, 23) if elem_offsets else (20, 21)
    mq, mk = (1, 1) if elem_offsets else (H * D, Hkv * D)
    ts = [thd(1, H, Sq, D, qo, mq), thd(2, Hkv, Skv, D, kv, mk), thd(3, Hkv, Skv, D, kv, mk),
          thd(4, H, Sq, D, qo, mq)]
    if bwd:
        ts += [thd(5, H, Sq, D, qo, mq), thd(11, H, Sq, D, qo, mq), thd(12, Hkv, Skv, D, kv, mk),
               thd(13, Hkv, Skv, D, kv, mk)]
    ts.append(RT(10, [B, H, Sq, 1], "FLOAT", [Sq * H, 1, H, 1], 20, H) if not elem_offsets
              else T(10, [B, H, Sq, 1], "FLOAT"))
    ts += [T(6, [B, 1, 1, 1], "INT32"), T(7, [B, 1, 1, 1], "INT32")]
    if elem_offsets:
        ts += [T(22, [B + 1, 1, 1, 1], "INT64"), T(23, [B + 1, 1, 1, 1], "INT64")]
    else:
        ts += [T(20, [B + 1, 1, 1, 1], "INT32"), T(21, [B + 1, 1, 1, 1], "INT32")]
    return ts


def ragged_fwd_graph(dt, B, H, Hkv, Sq, Skv, D, elem_offsets=False, **attrs):
    ts = ragged_tensors(dt, B, H, Hkv, Sq, Skv, D, elem_offsets)
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "stats_tensor_uid": 10, "generate_stats": True, "seq_len_q_tensor_uid": 6,
         "seq_len_kv_tensor_uid": 7, "padding_mask": True, "attn_scale_value": 1 / math.sqrt(D)}
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaAttributes", a)])


def ragged_bwd_graph(dt, B, H, Hkv, Sq, Skv, D, **attrs):
    ts = ragged_tensors(dt, B, H, Hkv, Sq, Skv, D, bwd=True)
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "do_tensor_uid": 5, "stats_tensor_uid": 10, "dq_tensor_uid": 11, "dk_tensor_uid": 12,
         "dv_tensor_uid": 13, "seq_len_q_tensor_uid": 6, "seq_len_kv_tensor_uid": 7,
         "padding_mask": True, "attn_scale_value": 1 / math.sqrt(D)}
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaBackwardAttributes", a)])


RAGGED = [   # empty and length-1 sequences, odd lengths, GQA 1 / 4 / 8
    dict(dt="HALF", B=4, H=4, Hkv=2, Sq=70, Skv=70, D=64, lq=[70, 0, 1, 33], lkv=[65, 20, 1, 0],
         causal_mask=True),
    dict(dt="BFLOAT16", B=3, H=8, Hkv=1, Sq=100, Skv=150, D=128, lq=[1, 99, 50],
         lkv=[150, 1, 77], causal_mask_bottom_right=True),
    dict(dt="HALF", B=3, H=4, Hkv=4, Sq=130, Skv=130, D=64, lq=[129, 5, 64], lkv=[130, 7, 63]),
    dict(dt="BFLOAT16", B=2, H=4, Hkv=1, Sq=67, Skv=67, D=128, lq=[67, 13], lkv=[3, 67],
         elem_offsets=True),
    dict(dt="HALF", B=3, H=8, Hkv=2, Sq=5, Skv=90, D=64, lq=[5, 0, 1], lkv=[90, 3, 0],
         causal_mask_bottom_right=True),     # decode-sized: GQA_PACK
    dict(dt="HALF", B=3, H=4, Hkv=1, Sq=3, Skv=700, D=64, lq=[3, 1, 2], lkv=[700, 0, 301],
         causal_mask_bottom_right=True),     # GQA_PACK with the keys split (KV_SPLIT)
]
# prefill shapes on the wgmma forward (sm_90): empty / length-1 / odd lengths, keys shorter and
# longer than the queries, several 128-row tiles, GQA 8 / 1 / 4, D 128 / 64, causal both ways
RAGGED_WG = [
    dict(dt="HALF", B=5, H=8, Hkv=1, Sq=300, Skv=300, D=128, lq=[0, 1, 129, 300, 77],
         lkv=[3, 1, 129, 300, 0], causal_mask=True),
    dict(dt="BFLOAT16", B=4, H=4, Hkv=4, Sq=260, Skv=256, D=64, lq=[200, 1, 0, 260],
         lkv=[5, 256, 3, 255]),
    dict(dt="HALF", B=3, H=8, Hkv=2, Sq=257, Skv=257, D=64, lq=[130, 5, 257], lkv=[250, 133, 257],
         causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=3, H=4, Hkv=1, Sq=140, Skv=140, D=128, lq=[140, 64, 65],
         lkv=[140, 127, 1], elem_offsets=True, causal_mask=True),
]
RAGGED_ALL = RAGGED + RAGGED_WG
RAGGED_BWD = [
    dict(dt="HALF", B=3, H=4, Hkv=2, Sq=70, Skv=70, D=64, lq=[70, 1, 0], lkv=[64, 1, 33],
         causal_mask=True),
    dict(dt="BFLOAT16", B=2, H=8, Hkv=2, Sq=100, Skv=100, D=128, lq=[100, 37], lkv=[77, 100]),
    dict(dt="HALF", B=3, H=2, Hkv=2, Sq=65, Skv=65, D=64, lq=[65, 0, 17], lkv=[1, 9, 65],
         causal_mask_bottom_right=True),
]


def _compiler():
    try:
        from hipdnn_cabi.device import compiler
        return compiler("cuda")
    except Exception:  # noqa: BLE001
        return None


def test_ragged_programs_build_and_compile_sm90a(monkeypatch):
    """The mma.sync programs of the ragged graphs (HIPDNN_CABI_HIP_ATTN_VARLEN=mma)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", "mma")
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    c = _compiler()
    seen = set()
    for i, case in enumerate(RAGGED + RAGGED_BWD):
        cc = {k: v for k, v in case.items() if k not in ("lq", "lkv")}
        bwd = i >= len(RAGGED)
        _, g = (ragged_bwd_graph if bwd else ragged_fwd_graph)(**cc)
        for arch in (None, "sm_90"):
            prog = build_program(parse_graph(g), arch=arch)
            names = [st[2] for st in prog.steps if st[0] == "launch"]
            assert names == (["hdn_attn_bwd_pre", "hdn_attn_bwd", "hdn_attn_bwd_dq"] if bwd
                             else ["hdn_attn_fwd"] + (["hdn_attn_fwd_combine"] if i == 5 else [])), names
            assert 20 in prog.external or 22 in prog.external
        for st in prog.steps:
            if st[0] == "launch" and st[1] not in seen:
                seen.add(st[1])
                assert "#define Q_BOFF(b) ((long long)roff0[b]" in st[1]
                if c is not None:
                    c.compile(st[1], f"ragged{i}.hip", ("--ptxas-options=-v",), "sm_90a",
                              codegen.headers())
                    # (the backward at D = 128 spills a few bytes, dense or ragged)
                    assert _no_spills(c.last_log) or (bwd and cc["D"] == 128), c.last_log


def _ragged_run(R, ts, g, arrays, outs, lq, lkv, B):
    """Run with packed storages: arrays {uid: (dense, lens, offsets)}; outs {uid: (n elements)}."""
    by = {t.uid: t for t in ts}
    ins = {by[6]: np.asarray(lq).reshape(B, 1, 1, 1), by[7]: np.asarray(lkv).reshape(B, 1, 1, 1)}
    for u in (20, 21, 22, 23):
        if u in arrays:
            ins[by[u]] = arrays.pop(u)
    for u, flat in arrays.items():
        ins[_flat(u, flat.size, by[u].dtype)] = flat
    res = R.run(g, ins, [_flat(u, n, by[u].dtype) if isinstance(by[u], RT) else by[u]
                         for u, n in outs.items()])
    return res


def _ragged_qkv(dt, B, H, Hkv, Sq, Skv, D, lq, lkv):
    """Random q / k / v in ``dt`` with every row past a batch's length zero (the padded
    equivalent the float64 reference reads)."""
    q = quantize(rng.uniform(-2, 2, (B, H, Sq, D)), dt)
    k = quantize(rng.uniform(-2, 2, (B, Hkv, Skv, D)), dt)
    v = quantize(rng.uniform(-1, 1, (B, Hkv, Skv, D)), dt)
    for b in range(B):
        q[b, :, lq[b]:] = 0
        k[b, :, lkv[b]:] = 0
        v[b, :, lkv[b]:] = 0
    return q, k, v


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(RAGGED_ALL)))
def test_ragged_forward_vs_cpu_reference(R, i):
    c = dict(RAGGED_ALL[i])
    lq, lkv = np.array(c.pop("lq")), np.array(c.pop("lkv"))
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = ragged_fwd_graph(**c)
    q, k, v = _ragged_qkv(dt, B, H, Hkv, Sq, Skv, D, lq, lkv)
    elem = c.get("elem_offsets")
    oq, ok = _offsets(lq, 3 if elem else 0), _offsets(lkv, 1 if elem else 0)
    if elem:       # INT64 element offsets, 3 / 1 spare rows between batches
        arr = {22: (oq * H * D).reshape(-1, 1, 1, 1), 23: (ok * Hkv * D).reshape(-1, 1, 1, 1)}
    else:
        arr = {20: oq.reshape(-1, 1, 1, 1).astype(np.int32),
               21: ok.reshape(-1, 1, 1, 1).astype(np.int32)}
    arr.update({1: pack(q, lq, oq), 2: pack(k, lkv, ok), 3: pack(v, lkv, ok)})
    n_o = (int(oq[-1]) + 1) * H * D
    outs = {4: n_o, 10: None if elem else (int(oq[-1]) + 1) * H}
    res = _ragged_run(R, ts, g, arr, outs, lq, lkv, B)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, _p(D, lq, lkv, c), np.float64)
    got = unpack(res[4], lq, oq, (B, H, Sq, D))
    tol = 1e-2 if dt == "HALF" else 3e-2
    assert relerr(got, O) < tol, relerr(got, O)
    # the rows outside the batches (gaps, the slack row) were not written
    written = np.zeros(n_o, bool)
    for b in range(B):
        written[int(oq[b]) * H * D:(int(oq[b]) + int(lq[b])) * H * D] = True
    assert np.all(np.isnan(res[4][~written])) and np.all(np.isfinite(res[4][written]))
    if elem:
        sg = res[10]
    else:
        sg = unpack(res[10], lq, oq, (B, H, Sq, 1))
        for b in range(B):
            sg[b, :, lq[b]:] = st[b, :, lq[b]:]
    fin = np.isfinite(st)
    assert np.array_equal(np.isfinite(sg), fin)
    assert np.max(np.abs(sg[fin] - st[fin]), initial=0) < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(RAGGED_BWD)))
def test_ragged_backward_vs_cpu_reference(R, i):
    c = dict(RAGGED_BWD[i])
    lq, lkv = np.array(c.pop("lq")), np.array(c.pop("lkv"))
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = ragged_bwd_graph(**c)
    q, k, v = _ragged_qkv(dt, B, H, Hkv, Sq, Skv, D, lq, lkv)
    do = quantize(rng.uniform(-1, 1, (B, H, Sq, D)), dt)
    for b in range(B):
        do[b, :, lq[b]:] = 0
    p = _p(D, lq, lkv, c)
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    O = quantize(O, dt)
    oq, ok = _offsets(lq), _offsets(lkv)
    stp = np.full(((int(oq[-1]) + 1), H), np.nan)
    for b in range(B):
        stp[int(oq[b]):int(oq[b]) + int(lq[b])] = st[b, :, :lq[b], 0].T
    arr = {20: oq.reshape(-1, 1, 1, 1).astype(np.int32), 21: ok.reshape(-1, 1, 1, 1).astype(np.int32),
           1: pack(q, lq, oq), 2: pack(k, lkv, ok), 3: pack(v, lkv, ok), 4: pack(O, lq, oq),
           5: pack(do, lq, oq), 10: stp.reshape(-1)}
    nq, nk = (int(oq[-1]) + 1) * H * D, (int(ok[-1]) + 1) * Hkv * D
    res = _ragged_run(R, ts, g, arr, {11: nq, 12: nk, 13: nk}, lq, lkv, B)
    dq, dk, dv, _ = ksdpa.sdpa_bwd(q, k, v, O, do, st, p, np.float64)
    tol = 2e-2 if dt == "HALF" else 5e-2
    for uid, ref, lens, off, h in ((11, dq, lq, oq, H), (12, dk, lkv, ok, Hkv), (13, dv, lkv, ok, Hkv)):
        got = unpack(res[uid], lens, off, ref.shape)
        assert relerr(got, ref) < tol, (uid, relerr(got, ref))
        n = int(off[-1]) * h * D
        assert np.all(np.isfinite(res[uid][:n])) and np.all(np.isnan(res[uid][n:])), uid


def test_gqa_pack_is_used_for_decode_shapes(monkeypatch):
    """GQA with (Hq / Hkv) x Sq <= 64 and no dropout: one block per kv head (grid (1, Hkv, B));
    the GQA_PACK kernel (HIPDNN_CABI_HIP_ATTN_DECODE=0; test_attention_decode.py: the decode
    kernel)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", "0")
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    from test_attention import fwd_graph
    for case, packed in ((PAGED[0], True), (PAGED[2], True), (PAGED[3], False), (PAGED[4], False)):
        cc, lq, lkv, pages, MP, NP, skv = _paged_case(case)
        prog = build_program(parse_graph(paged_graph(NP=NP, MP=MP, skv=skv, **cc)[1]))
        st = prog.steps[0]
        assert ("#define GQA_PACK 1" in st[1]) == packed
        assert st[3] == ((1, cc["Hkv"], cc["B"]) if packed else
                         (-(-cc["Sq"] // 64), cc["H"], cc["B"]))
    _, g = fwd_graph("HALF", 2, 8, 2, 3, 100, 64, seq=True)
    assert "#define GQA_PACK 1" in build_program(parse_graph(g)).steps[0][1]
    _, g = fwd_graph("HALF", 2, 8, 2, 3, 100, 64, drop=0.1)
    assert "#define GQA_PACK 1" not in build_program(parse_graph(g)).steps[0][1]
    # long keys, few blocks: KV_SPLIT slices and the combine kernel (not with the knob off, nor
    # with blocks enough to fill the multiprocessors)
    _, g = fwd_graph("HALF", 2, 8, 2, 3, 1500, 64, seq=True)
    prog = build_program(parse_graph(g))
    assert [st[2] for st in prog.steps] == ["hdn_attn_fwd", "hdn_attn_fwd_combine"]
    assert "#define KV_SPLIT 5" in prog.steps[0][1] and prog.steps[0][3] == (5, 2, 2)
    assert len([st[2] for st in build_program(parse_graph(g), sms=4).steps]) == 1
    import os
    os.environ["HIPDNN_CABI_HIP_ATTN_SPLITKV"] = "0"
    try:
        assert len(build_program(parse_graph(g)).steps) == 1
    finally:
        del os.environ["HIPDNN_CABI_HIP_ATTN_SPLITKV"]


DENSE_DECODE = [   # the mma.sync kernel (forced) on dense decode graphs: GQA_PACK (+ KV_SPLIT)
    dict(dt="HALF", B=2, H=8, Hkv=2, Sq=3, Skv=100, D=64, seq=True, causal_mask_bottom_right=True),
    dict(dt="BFLOAT16", B=1, H=16, Hkv=2, Sq=1, Skv=257, D=128),
    dict(dt="HALF", B=2, H=8, Hkv=2, Sq=3, Skv=1500, D=64, seq=True),
    dict(dt="BFLOAT16", B=1, H=16, Hkv=2, Sq=1, Skv=777, D=128, stats=False),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dec", ["0", "1"])
@pytest.mark.parametrize("i", range(len(DENSE_DECODE)))
def test_dense_decode_gqa_pack_vs_cpu_reference(R, i, dec, monkeypatch):
    """Dense decode graphs on the mma.sync kernels: GQA_PACK (+ KV_SPLIT) with
    HIPDNN_CABI_HIP_ATTN_DECODE=0, the decode kernel (ATT_DECODE) with 1."""
    from test_attention import fwd_graph
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN", "mma")
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_DECODE", dec)
    c = DENSE_DECODE[i]
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = fwd_graph(**c)
    q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, dt) for t, s in zip(ts[:3], (2, 2, 1)))
    by = {t.uid: t for t in ts}
    ins = {ts[0]: q, ts[1]: k, ts[2]: v}
    lq = lkv = None
    if c.get("seq"):
        lq, lkv = np.array([Sq, 1][:B]), np.array([Skv, 40][:B])
        ins[by[6]], ins[by[7]] = lq.reshape(B, 1, 1, 1), lkv.reshape(B, 1, 1, 1)
    res = R.run(g, ins, [ts[3]] + ([by[5]] if 5 in by else []))
    p = ksdpa.SdpaParams(scale=float(np.float32(1 / math.sqrt(D))))
    p.causal_bottom_right = bool(c.get("causal_mask_bottom_right"))
    p.bottom_right = p.causal_bottom_right
    if lq is not None:
        p.seq_len_q, p.seq_len_kv = lq, lkv
    O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
    assert_sdpa_close(res, O, st, dt)


# ------------------------------------------------------------- the wgmma forward (sm_90)
def _varlen_graphs():
    """(tag, graph, wgmma expected) of every forward case here: the prefill shapes with pages of
    >= 64 rows or ragged tensors on the wgmma kernel, decode shapes (GQA_PACK) and smaller pages
    on the mma.sync one."""
    out = []
    def wg(c):
        return c["PS"] >= 64 and c["H"] // c["Hkv"] * c["Sq"] > 64
    for i, case in enumerate(PAGED_ALL):
        cc, lq, lkv, pages, MP, NP, skv = _paged_case(case)
        out.append((f"paged{i}", paged_graph(NP=NP, MP=MP, skv=skv, **cc)[1], wg(case)))
    for i, only in ONE_PAGED:
        _, g, _, _, cc, _, _ = _one_paged_inputs(i, only)
        out.append((f"paged_{only}{i}", g, wg(PAGED_ALL[i])))
    for i, case in enumerate(RAGGED_ALL):
        cc = {k: v for k, v in case.items() if k not in ("lq", "lkv")}
        wg = case["H"] // case["Hkv"] * case["Sq"] > 64
        out.append((f"ragged{i}", ragged_fwd_graph(**cc)[1], wg))
    return out


def test_varlen_wgmma_programs_and_compile_sm90a(monkeypatch):
    """Opted in, on sm_90: the prep kernel (hdn_attn_wg_maps, grid (B), its per-batch / per-page
    maps in the workspace) before the wgmma kernel for the prefill shapes; the mma.sync kernel for
    the rest, for every case with HIPDNN_CABI_HIP_ATTN_VARLEN=mma or HIPDNN_CABI_HIP_ATTN=mma, and
    off sm_90.  Both kernels compile for sm_90a without spills."""
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", "auto")
    c = _compiler()
    seen = set()
    n_wg = 0
    for tag, g, wg in _varlen_graphs():
        G = parse_graph(g)
        prog = build_program(G, arch="sm_90")
        names = [st[2] for st in prog.steps if st[0] == "launch"]
        assert (names == ["hdn_attn_wg_maps", "hdn_attn_fwd_wg"]) == wg, (tag, names)
        assert "hdn_attn_fwd_wg" not in [st[2] for st in build_program(G).steps]
        if not wg:
            continue
        n_wg += 1
        prep, main = prog.steps
        B = main[3][2]
        assert prep[3] == (B, 1, 1) and prep[4] == (128, 1, 1) and main[4] == (384, 1, 1)
        src = main[1]
        assert prep[1] == src
        modes = {x: int(src.split(f"#define AW_{x}MODE ")[1].split()[0]) for x in "QKV"}
        assert modes["Q"] in (0, 1) and (2 in modes.values()) == tag.startswith("paged")
        # the maps' workspace: 128 bytes a map, one flag a batch; the same location in both
        ws = [a for a in main[5] if isinstance(a, tuple) and a[0] == "ws"]
        assert len(ws) == 1 and ws[0] in prep[5]
        npg = int(src.split("#define AW_NPG ")[1].split()[0])
        nmaps = (4 * B if 1 in modes.values() else 0) + (2 * B * npg if 2 in modes.values() else 0)
        assert prog.ws_size >= nmaps * 128 + 4 * B
        # a ragged role's template map: one batch (the prep kernel moves it to each batch's rows)
        tm = [a for a in main[5] if isinstance(a, tuple) and a[0] == "tmap"]
        for x, t in zip("QKV", tm):
            assert (t[3][3] == 1) == (modes[x] == 1) or t[3][3] == 1, (tag, x, t)
            if modes[x] == 2:
                ps = int(src.split("#define AW_PS ")[1].split()[0])
                assert t[3][1] == ps and t[5][1] == min(ps, 128)
        if c is not None and src not in seen:       # (both kernels: one source)
            seen.add(src)
            c.compile(src, f"{tag}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
            assert _no_spills(c.last_log) and c.last_log.count("0 bytes stack frame") == 2, c.last_log
    assert n_wg >= 12
    for knob in ("HIPDNN_CABI_HIP_ATTN_VARLEN", "HIPDNN_CABI_HIP_ATTN"):
        with monkeypatch.context() as m:
            m.setenv(knob, "mma")
            for tag, g, wg in _varlen_graphs()[:1] + [x for x in _varlen_graphs() if x[2]][:3]:
                names = [st[2] for st in build_program(parse_graph(g), arch="sm_90").steps]
                assert names[0] == "hdn_attn_fwd", (knob, tag, names)


def test_ragged_wgmma_backward_programs_and_compile_sm90a(monkeypatch):
    """Opted in (HIPDNN_CABI_HIP_ATTN_BWD and HIPDNN_CABI_HIP_ATTN_VARLEN), on sm_90 the ragged
    backward's main kernel is the wgmma one after the prep kernel of its Q / K / V / dO maps,
    between the (ragged-aware) Dsum and dQ kernels; both compile for sm_90a without spills.
    Either knob at mma: the mma.sync main kernel."""
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_BWD", "auto")
    monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", "auto")
    c = _compiler()
    for i, case in enumerate(RAGGED_BWD):
        cc = {k: v for k, v in case.items() if k not in ("lq", "lkv")}
        g = parse_graph(ragged_bwd_graph(**cc)[1])
        prog = build_program(g, arch="sm_90")
        names = [st[2] for st in prog.steps if st[0] == "launch"]
        assert names == ["hdn_attn_bwd_pre", "hdn_attn_wg_maps", "hdn_attn_bwd_wg", "hdn_attn_bwd_dq"], names
        prep, main = [st for st in prog.steps if st[0] == "launch"][1:3]
        assert prep[1] == main[1] and prep[3] == (cc["B"], 1, 1)
        for x in "QKVG":
            assert f"#define AW_{x}MODE 1" in main[1]
        tm = [a for a in main[5] if isinstance(a, tuple) and a[0] == "tmap"]
        assert len(tm) == 4 and all(t[3][3] == 1 for t in tm)      # one-batch templates
        if c is not None:
            c.compile(main[1], f"ragged_bwd{i}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
            assert _no_spills(c.last_log), c.last_log
        for knob in ("HIPDNN_CABI_HIP_ATTN_BWD", "HIPDNN_CABI_HIP_ATTN_VARLEN"):
            with monkeypatch.context() as m:
                m.setenv(knob, "mma")
                names = [st[2] for st in build_program(g, arch="sm_90").steps if st[0] == "launch"]
                assert names == ["hdn_attn_bwd_pre", "hdn_attn_bwd", "hdn_attn_bwd_dq"], (knob, names)


def _tma_box(arr, start, box):
    """The tensor copy engine's tiled load of ``box`` rows from row ``start`` of ``arr`` [rows,
    ...]: rows outside [0, len(arr)) read zeros."""
    out = np.zeros((box,) + arr.shape[1:])
    for r in range(box):
        if 0 <= start + r < len(arr):
            out[r] = arr[start + r]
    return out


def _model_maps(kind, x, lens, off, tab, PS, NPG):
    """hdn_attn_wg_maps.h's prep kernel as a model: ragged - batch b's map is the rows
    [off[b], off[b] + lens[b]) of the packed ``x`` [T, ...]; paged - map (b, p) is the first
    min(PS, lens[b] - p PS) rows of pool page tab[b, p] (``x`` [pages, PS, ...]), for p PS <
    lens[b] (NPG slots a batch)."""
    maps = {}
    for b in range(len(lens)):
        if kind == "ragged":
            maps[b] = x[off[b]:off[b] + max(int(lens[b]), 1)] if lens[b] else x[off[b]:off[b]]
        else:
            for p in range(NPG):
                if p * PS < lens[b]:
                    maps[b, p] = x[tab[b][p]][:min(PS, int(lens[b]) - p * PS)]
    return maps


def _model_tile(kind, maps, b, r0, rows, nrows, PS):
    """hdn_attn_wg_maps.h aw_tile as a model: the ``rows`` rows of batch b from r0 (paged: a
    slice past the keys reloads the last page's first rows)."""
    if kind == "ragged":
        return _tma_box(maps[b], r0, rows)
    pb = min(PS, rows)
    parts = []
    for i in range(rows // pb):
        kr = r0 + i * pb if r0 + i * pb < nrows else (nrows - 1) // PS * PS
        parts.append(_tma_box(maps[b, kr // PS], kr % PS, pb))
    return np.concatenate(parts)


def test_varlen_tile_loads_host_model():
    """The maps and tile coordinates of the ragged / paged wgmma loads, modelled with the copy
    engine's out-of-range zeros: every tile the producer loads (keys [n BN, n BN + BN) up to the
    batch's length, the 128-row Q tiles) holds the padded dense tensor's rows below the length
    and finite values past it (zeros, or - paged, a slice past the keys - this batch's keys
    again; their scores are masked, and P = 0 times a finite V row adds nothing) - never another
    batch's rows, a gap's or a page's stale rows (NaN here)."""
    r = np.random.default_rng(7)
    for BN in (128, 64):
        lens = np.array([0, 1, 63, 64, 65, 127, 128, 129, 300, 513])
        S = int(lens.max())
        dense = r.uniform(-1, 1, (len(lens), S, 3))
        for b, n in enumerate(lens):
            dense[b, n:] = 0
        # ragged: packed with NaN gaps between the batches and after the last
        off = np.concatenate([[0], np.cumsum(lens + 2)])
        packed = np.full((int(off[-1]), 3), np.nan)
        for b, n in enumerate(lens):
            packed[off[b]:off[b] + n] = dense[b, :n]
        maps = _model_maps("ragged", packed, lens, off, None, 0, 0)
        for b, n in enumerate(lens):
            for rows in (BN, 128):
                for r0 in range(0, -(-int(n) // rows) * rows, rows):
                    got = _model_tile("ragged", maps, b, r0, rows, n, 0)
                    want = np.zeros((rows, 3))
                    m = min(rows, n - r0)
                    want[:m] = dense[b, r0:r0 + m]
                    assert np.array_equal(got, want), (b, r0)
        # paged: pages in shuffled order, NaN past each batch's keys and in unreferenced pages
        for PS in (64, 128, 256):
            npg = -(-S // PS)
            pages = [-(-int(n) // PS) for n in lens]
            NP = sum(pages) + 1
            pool = np.full((NP, PS, 3), np.nan)
            order = r.permutation(NP)
            tab = np.full((len(lens), npg), order[-1])
            k = 0
            for b, n in enumerate(lens):
                for p in range(pages[b]):
                    tab[b, p] = order[k]
                    m = min(PS, int(n) - p * PS)
                    pool[order[k], :m] = dense[b, p * PS:p * PS + m]
                    k += 1
            maps = _model_maps("paged", pool, lens, None, tab, PS, npg)
            assert all(bb < len(lens) and p < npg for bb, p in maps)
            for b, n in enumerate(lens):
                for r0 in range(0, -(-int(n) // BN) * BN, BN):
                    got = _model_tile("paged", maps, b, r0, BN, n, PS)
                    m = min(BN, n - r0)
                    assert np.array_equal(got[:m], dense[b, r0:r0 + m]), (PS, BN, b, r0)
                    assert np.all(np.isfinite(got[m:])), (PS, BN, b, r0)


@pytest.mark.gpu
def test_varlen_wgmma_matches_mma_sync(R, monkeypatch):
    """The same ragged and paged graphs on both forward kernels agree (O and stats)."""
    c = dict(RAGGED_WG[2])
    lq, lkv = np.array(c.pop("lq")), np.array(c.pop("lkv"))
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = ragged_fwd_graph(**c)
    q, k, v = _ragged_qkv(dt, B, H, Hkv, Sq, Skv, D, lq, lkv)
    oq, ok = _offsets(lq), _offsets(lkv)
    outs = {}
    for knob in ("mma", "auto"):
        monkeypatch.setenv("HIPDNN_CABI_HIP_ATTN_VARLEN", knob)
        arr = {20: oq.reshape(-1, 1, 1, 1).astype(np.int32), 21: ok.reshape(-1, 1, 1, 1).astype(np.int32),
               1: pack(q, lq, oq), 2: pack(k, lkv, ok), 3: pack(v, lkv, ok)}
        res = _ragged_run(R, ts, g, arr, {4: (int(oq[-1]) + 1) * H * D, 10: (int(oq[-1]) + 1) * H},
                          lq, lkv, B)
        outs[knob] = (unpack(res[4], lq, oq, (B, H, Sq, D)), unpack(res[10], lq, oq, (B, H, Sq, 1)))
    assert relerr(outs["auto"][0], outs["mma"][0]) < 1e-2
    assert np.max(np.abs(outs["auto"][1] - outs["mma"][1])) < 1e-2


@pytest.mark.gpu
def test_paged_wgmma_page_outside_the_pool_gives_nan_not_a_fault(R):
    """The wgmma forward: a table entry naming no page of the pool makes that batch's rows NaN
    (O and stats); the other batches match the reference."""
    res, O = _run_outside_the_pool(R, PAGED_WG[0], (0, 0, 3, 0), (2, 0, 0, 0), v_too=False)
    for b in (0, 2):
        assert np.all(np.isnan(res[4][b])) and np.all(np.isnan(res[5][b]))
    assert relerr(res[4][1], O[1]) < 1e-2


# -------------------------------------------------------------------------------- declines
def _why(g, **kw):
    from engine_plugins.hip_kernels.program import NotApplicable, build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    try:
        build_program(parse_graph(g), **kw)
    except NotApplicable as e:
        return str(e)
    return None


def test_paged_and_ragged_declines():
    base = dict(dt="HALF", B=2, H=4, Hkv=2, Sq=1, D=64, NP=9, MP=4)
    assert _why(paged_graph(PS=16, **base)[1]) is None
    for ps in (8, 48):
        assert "page size" in _why(paged_graph(PS=ps, **base)[1])
    assert "MFMA" in _why(paged_graph(PS=16, **base)[1], arch="gfx942")
    assert "max_seq_len_kv" in _why(paged_graph(PS=16, skv=65, **base)[1])
    ts, _ = paged_graph(PS=16, **base)
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "seq_len_q_tensor_uid": 6, "seq_len_kv_tensor_uid": 7, "page_table_k_tensor_uid": 8}
    # only k paged: v must then be dense [B, Hkv, Skv, D] (here a pool)
    assert "the dense v" in _why(graph_bytes(ts, [node("SdpaAttributes", a)]))
    cc = {k: v for k, v in RAGGED[0].items() if k not in ("lq", "lkv")}
    assert _why(ragged_fwd_graph(**cc)[1]) is None
    assert "MFMA" in _why(ragged_fwd_graph(**cc)[1], arch="gfx942")
    # a ragged tensor in another operation; a declared alignment below 16 bytes
    x = RT(1, [2, 4, 8, 8], "HALF", [256, 8, 32, 1], 3)
    y = T(2, [2, 4, 8, 8], "HALF")
    from gpu_testlib import pw
    why = _why(graph_bytes([x, y, T(3, [3, 1, 1, 1], "INT32")], [pw("RELU_FWD", 1, 2)]))
    assert "ragged tensors are not supported" in why

    class A(T):
        def fb(self):
            return dict(super().fb(), alignment=2)
    why = _why(graph_bytes([A(1, [2, 8], "HALF"), T(2, [2, 8], "HALF")], [pw("RELU_FWD", 1, 2)]))
    assert "2-byte alignment" in why


@pytest.mark.gpu
def test_ragged_offset_off_16_bytes_gives_nan_not_a_fault(R):
    """Element offsets (multiplier 1) that put one batch's q / o rows 4 elements off a 16-byte
    boundary: that batch's O is NaN (the kernels check rather than fault), the others match the
    reference.  (Last in the module: a fault would poison the context.)"""
    c = dict(RAGGED[3])
    lq, lkv = np.array(c.pop("lq")), np.array(c.pop("lkv"))
    dt, B, H, Hkv, Sq, Skv, D = (c[k] for k in ("dt", "B", "H", "Hkv", "Sq", "Skv", "D"))
    ts, g = ragged_fwd_graph(**c)
    q, k, v = _ragged_qkv(dt, B, H, Hkv, Sq, Skv, D, lq, lkv)
    oq, ok = _offsets(lq, 1), _offsets(lkv)
    eq = oq * H * D
    eq[1] += 4                                 # batch 1: 8 bytes off
    qf = pack(q, lq, oq)
    qf = np.concatenate([qf, np.full(8, np.nan)])
    qf[eq[1]:eq[1] + lq[1] * H * D] = np.swapaxes(q[1, :, :lq[1]], 0, 1).reshape(-1)
    arr = {22: eq.reshape(-1, 1, 1, 1), 23: (ok * Hkv * D).reshape(-1, 1, 1, 1),
           1: qf, 2: pack(k, lkv, ok), 3: pack(v, lkv, ok)}
    res = _ragged_run(R, ts, g, arr, {4: qf.size, 10: None}, lq, lkv, B)
    O, _, _, _ = ksdpa.sdpa_fwd(q, k, v, _p(D, lq, lkv, c), np.float64)
    n0 = int(lq[0]) * H * D
    got0 = np.swapaxes(res[4][:n0].reshape(int(lq[0]), H, D), 0, 1)
    assert relerr(got0, O[0, :, :lq[0]]) < 3e-2
    assert np.all(np.isnan(res[4][eq[1]:eq[1] + lq[1] * H * D]))
