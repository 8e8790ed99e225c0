"""SDPA's newer roles through the frontend (the backend C API underneath) on the CPU reference
engine: sink tokens, block masks, paged K/V, ragged (packed) tensors, the fp8 scales and amax,
score_max / score_sum_exp, dBias - alone and combined - against the float64 row-by-row formulas
of sdpa_ref.py; serialization round trips of every field; what hipDNN cannot express."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sdpa_ref as R
from fe_util import CPU_ENGINE
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.errors import NotSupportedError
from test_frontend_sdpa import check, check_stats, dec, enc, graph, inputs

pytestmark = pytest.mark.needs_cpu_engine
DT = hf.DataType
I32, I64, F32, U8 = (DT.HIPDNN_DATA_INT32, DT.HIPDNN_DATA_INT64, DT.HIPDNN_DATA_FLOAT,
                     DT.HIPDNN_DATA_UINT8)


def lens(a):
    return np.asarray(a, np.int32).reshape(-1, 1, 1, 1)


class Run:
    """One forward graph: tensors made from arrays, outputs collected after execute."""

    def __init__(self, handle, t="FLOAT"):
        self.g = graph(handle, t)
        self.pack = {}
        self.outs = {}

    def inp(self, name, arr, dt=None, dim=None, stride=None):
        x = self.g.tensor(name=name, dim=list(dim or arr.shape), stride=stride, data_type=dt)
        self.pack[x] = arr
        return x

    def out(self, name, tensor, np_dtype):
        tensor.set_output(True)
        self.outs[name] = (tensor, np_dtype)

    def go(self):
        self.g.build()
        assert self.g.engine_name == CPU_ENGINE
        res = {}
        for name, (x, npd) in self.outs.items():
            res[name] = np.full(x.get_dim(), np.nan, npd) if npd != np.uint8 else \
                np.zeros(x.get_dim(), npd)
            self.pack[x] = res[name]
        self.g.execute(self.pack)
        return res


def run_plain(handle, qa, ka, va, *, stats=True, extras=False, **opts):
    """o, stats (and max / sum_exp) of one forward with array-valued options."""
    r = Run(handle)
    q, k, v = r.inp("q", qa), r.inp("k", ka), r.inp("v", va)
    for key, val in list(opts.items()):
        if isinstance(val, tuple) and val and val[0] == "t":
            opts[key] = r.inp(key, val[1], val[2])
    if extras:
        opts["score_max"] = r.g.tensor(name="mx", data_type=F32)
        opts["score_sum_exp"] = r.g.tensor(name="se", data_type=F32)
    o, st = r.g.sdpa(q, k, v, generate_stats=stats, **opts)
    r.out("o", o, np.float32)
    if st is not None:
        r.out("stats", st, np.float32)
    if extras:
        r.out("max", opts["score_max"], np.float32)
        r.out("sum_exp", opts["score_sum_exp"], np.float32)
    return r.go()


def check_all(res, ref, what=""):
    O, lse, mx, se = ref[:4]
    check(np.asarray(res["o"], np.float64), O, "FLOAT", what + " o")
    if "stats" in res:
        check_stats(res["stats"].astype(np.float64), lse, what + " stats")
    if "max" in res:
        m = res["max"].astype(np.float64)
        assert np.array_equal(np.isneginf(m), np.isneginf(mx)), what
        fin = np.isfinite(mx)
        np.testing.assert_allclose(m[fin], mx[fin], rtol=1e-5, atol=1e-5, err_msg=what + " max")
        np.testing.assert_allclose(res["sum_exp"], se, rtol=1e-5, atol=1e-6,
                                   err_msg=what + " sum_exp")


# ============================================================================ sink token
@pytest.mark.parametrize("H,Hkv", [(4, 4), (4, 1), (8, 1)])
def test_sink_token(handle, H, Hkv):
    qa, ka, va = inputs(31, 2, H, Hkv, 9, 13, 16, scale=3.0)
    sink = np.linspace(-1.0, 2.5, H).astype(np.float32).reshape(1, H, 1, 1)
    res = run_plain(handle, qa, ka, va, extras=True, attn_scale=0.5, sink_token=("t", sink, F32))
    check_all(res, R.forward_full(qa, ka, va, 0.5, sink=sink.reshape(-1)), "sink")


def test_sink_token_rows_without_keys(handle):
    """A row the bands leave without keys still has the sink: O = 0, stats = max = sink."""
    qa, ka, va = inputs(32, 1, 2, 2, 6, 5, 8)
    sink = np.array([0.75, -0.5], np.float32).reshape(1, 2, 1, 1)
    opts = dict(diagonal_band_left_bound=1, diagonal_band_right_bound=0,
                diagonal_alignment=0)   # row i keeps only j = i: rows 5 have no key
    res = run_plain(handle, qa, ka, va, extras=True, sink_token=("t", sink, F32), **opts)
    ref = R.forward_full(qa, ka, va, sink=sink.reshape(-1), left=1, right=0)
    check_all(res, ref, "sink empty rows")
    assert np.all(res["o"][0, :, 5] == 0)
    np.testing.assert_allclose(res["stats"][0, :, 5, 0], [0.75, -0.5], rtol=1e-6)


def test_sink_token_with_padding(handle):
    qa, ka, va = inputs(33, 3, 2, 1, 7, 9, 8)
    sink = np.array([0.3, 1.7], np.float32).reshape(1, 2, 1, 1)
    lq, lkv = [7, 1, 0], [9, 1, 4]
    res = run_plain(handle, qa, ka, va, extras=True, sink_token=("t", sink, F32),
                    use_padding_mask=True, seq_len_q=("t", lens(lq), I32),
                    seq_len_kv=("t", lens(lkv), I32))
    ref = R.forward_full(qa, ka, va, sink=sink.reshape(-1), sq=lq, skv=lkv)
    check_all(res, ref, "sink padding")
    assert np.all(np.isinf(res["stats"][2])) and np.all(res["o"][2] == 0)


# ============================================================================ block mask
def block_mask(seed, B, H, Sq, Skv):
    rt, ct = -(-Sq // 128), -(-Skv // 128)
    r = np.random.default_rng(seed)
    return r.integers(0, 256, (B, H, rt, -(-ct // 8))).astype(np.uint8)


@pytest.mark.parametrize("Sq,Skv", [(130, 261), (129, 1030), (5, 7)])
def test_block_mask(handle, Sq, Skv):
    B, H = 1, 2
    qa, ka, va = inputs(34, B, H, 1, Sq, Skv, 8)
    bm = block_mask(Sq + Skv, B, H, Sq, Skv)
    bm[0, 0, 0, 0] = 0          # a whole row tile of head 0 without keys (when one byte)
    res = run_plain(handle, qa, ka, va, extras=True, attn_scale=0.25, block_mask=("t", bm, U8))
    ref = R.forward_full(qa, ka, va, 0.25, block=bm)
    check_all(res, ref, "block mask")


def test_block_mask_shape_is_checked(handle):
    qa, ka, va = inputs(35, 1, 2, 2, 5, 7, 8)
    with pytest.raises(hf.HipdnnError, match="block_mask"):
        run_plain(handle, qa, ka, va, block_mask=("t", np.zeros((1, 2, 1, 2), np.uint8), U8))


# ============================================================================ paged K/V
def paginate(x, lens_, page, rng, spare=3):
    """A page pool [pages, H, page, D] holding x [B, H, S, D] in shuffled pages and the page
    table [B, 1, max_pages, 1] (entries past a batch's length point nowhere valid)."""
    B, H, S, D = x.shape
    per = -(-S // page)
    n = B * per + spare
    order = rng.permutation(n)
    pool = rng.uniform(-9, 9, (n, H, page, D)).astype(x.dtype)   # garbage in unused slots
    table = np.full((B, 1, per, 1), 10 ** 6, np.int32)
    used = 0
    for b in range(B):
        for lp in range(-(-int(lens_[b]) // page)):
            phys = int(order[used])
            used += 1
            table[b, 0, lp, 0] = phys
            m = min(page, S - lp * page)
            pool[phys, :, :m] = x[b, :, lp * page:lp * page + m]
    return pool, table


@pytest.mark.parametrize("which", ["both", "k", "v"])
@pytest.mark.parametrize("H,Hkv", [(4, 4), (8, 2), (8, 1)])
def test_paged_kv(handle, which, H, Hkv):
    B, Sq, Skv, D, page = 3, 5, 11, 16, 4
    qa, ka, va = inputs(36, B, H, Hkv, Sq, Skv, D)
    lkv = np.array([11, 1, 6])
    rng = np.random.default_rng(7)
    r = Run(handle)
    q = r.inp("q", qa)
    opts = dict(seq_len_kv=r.inp("lkv", lens(lkv), I32), paged_attention_max_seq_len_kv=Skv,
                use_padding_mask=True, seq_len_q=r.inp("lq", lens([Sq] * B), I32))
    kv = {}
    for name, x in (("k", ka), ("v", va)):
        if which in ("both", name):
            pool, table = paginate(x, lkv, page, rng)
            kv[name] = r.inp(name, pool)
            opts[f"paged_attention_{name}_table"] = r.inp(name + "_table", table, I32)
        else:
            kv[name] = r.inp(name, x)
    o, st = r.g.sdpa(q, kv["k"], kv["v"], attn_scale=0.3, **opts)
    assert o.get_dim() == [B, H, Sq, D]
    r.out("o", o, np.float32)
    r.out("stats", st, np.float32)
    res = r.go()
    check_all(res, R.forward_full(qa, ka, va, 0.3, skv=lkv), "paged " + which)


def test_paged_kv_needs_seq_len_kv(handle):
    g = graph(handle)
    q = g.tensor(name="q", dim=[1, 2, 3, 8])
    k = g.tensor(name="k", dim=[4, 2, 4, 8])
    tab = g.tensor(name="t", dim=[1, 1, 2, 1], data_type=I32)
    with pytest.raises(hf.HipdnnError, match="seq_len_kv"):
        g.sdpa(q, k, k, paged_attention_k_table=tab)


def test_paged_page_out_of_range_fails_at_execute(handle):
    qa, ka, va = inputs(37, 1, 1, 1, 2, 4, 8)
    r = Run(handle)
    q, k = r.inp("q", qa), r.inp("k", np.zeros((2, 1, 4, 8), np.float32))
    tab = r.inp("t", np.array([5], np.int32).reshape(1, 1, 1, 1), I32)
    o, _ = r.g.sdpa(q, k, r.inp("v", va), generate_stats=False, paged_attention_k_table=tab,
                    seq_len_kv=r.inp("l", lens([4]), I32))
    r.out("o", o, np.float32)
    with pytest.raises(hf.HipdnnError, match="page"):
        r.go()


# ============================================================================ ragged tensors
def pack_rows(x, lens_, mult=1):
    """x [B, H, S, D] packed as THD (each batch's first lens[b] rows, [S, H, D] order) and the
    offsets [B + 1] in units of ``mult`` elements."""
    B, H, S, D = x.shape
    parts, offs, tot = [], [0], 0
    for b in range(B):
        n = int(lens_[b])
        parts.append(np.swapaxes(x[b, :, :n], 0, 1).reshape(-1))
        tot += n * H * D
        assert tot % mult == 0
        offs.append(tot // mult)
    flat = np.concatenate(parts + [np.zeros(H * D, x.dtype)])   # slack after the last batch
    return flat, np.asarray(offs, np.int64).reshape(-1, 1, 1, 1)


def unpack_rows(flat, offs, lens_, shape, mult=1):
    B, H, S, D = shape
    offs = np.asarray(offs).reshape(-1)
    out = np.zeros(shape)
    for b in range(B):
        n = int(lens_[b])
        seg = flat[int(offs[b]) * mult:int(offs[b]) * mult + n * H * D]
        out[b, :, :n] = np.swapaxes(seg.reshape(n, H, D), 0, 1)
    return out


def ragged(r, name, x, lens_, mult=1):
    B, H, S, D = x.shape
    flat, offs = pack_rows(x, lens_, mult)
    t = r.g.tensor(name=name, dim=[B, H, S, D], stride=[S * H * D, D, H * D, 1])
    ot = r.g.tensor(name=name + "_off", dim=[B + 1, 1, 1, 1], data_type=I64)
    t.set_ragged_offset(ot)
    if mult != 1:
        t.set_ragged_offset_multiplier(mult)
    r.pack[ot] = offs
    return t, flat, offs


@pytest.mark.parametrize("mult", [1, "HD"])
def test_ragged_forward(handle, mult):
    B, H, Hkv, S, D = 4, 4, 2, 7, 8
    lq, lkv = np.array([7, 0, 1, 4]), np.array([5, 3, 1, 7])
    qa, ka, va = inputs(38, B, H, Hkv, S, S, D)
    r = Run(handle)
    mq = H * D if mult == "HD" else 1
    mk = Hkv * D if mult == "HD" else 1
    q, qf, _ = ragged(r, "q", qa, lq, mq)
    k, kf, _ = ragged(r, "k", ka, lkv, mk)
    v, vf, _ = ragged(r, "v", va, lkv, mk)
    r.pack.update({q: qf, k: kf, v: vf})
    o, st = r.g.sdpa(q, k, v, attn_scale=0.4, use_padding_mask=True, use_causal_mask=True,
                     seq_len_q=r.inp("lq", lens(lq), I32), seq_len_kv=r.inp("lkv", lens(lkv), I32))
    o_off = r.g.tensor(name="o_off", dim=[B + 1, 1, 1, 1], data_type=I64)
    o.set_stride([S * H * D, D, H * D, 1]).set_ragged_offset(o_off)
    if mq != 1:
        o.set_ragged_offset_multiplier(mq)
    of, offs = pack_rows(np.zeros((B, H, S, D), np.float32), lq, mq)
    of[:] = np.nan
    r.pack[o_off] = offs
    o.set_output(True)
    st.set_output(True)
    sa = np.full(st.get_dim(), np.nan, np.float32)
    r.pack.update({o: of, st: sa})
    r.g.build()
    r.g.execute(r.pack)
    ref = R.forward_full(qa, ka, va, 0.4, sq=lq, skv=lkv, causal=True)
    got = unpack_rows(of, offs, lq, (B, H, S, D), mq)
    check(got, ref[0], "FLOAT", "ragged o")
    # nothing past the packed rows was written
    assert np.all(np.isnan(of[int(offs[-1, 0, 0, 0]) * mq:]))
    for b in range(B):
        check_stats(sa[b, :, :lq[b]].astype(np.float64), ref[1][b, :, :lq[b]], "ragged stats")


def test_ragged_backward(handle):
    """dq/dk/dv of packed q/k/v/o/dO against the analytic float64 gradients."""
    B, H, Hkv, S, D = 3, 2, 1, 5, 8
    lq, lkv = np.array([5, 1, 0]), np.array([4, 1, 5])
    qa, ka, va = inputs(39, B, H, Hkv, S, S, D)
    doa = np.random.default_rng(40).uniform(-1, 1, (B, H, S, D)).astype(np.float32)
    kw = dict(scale=0.5, seq_q=lq, seq_kv=lkv)
    O, lse, _ = R.forward(qa, ka, va, **kw)
    for b in range(B):                       # padded rows: zero gradients flow
        doa[b, :, lq[b]:] = 0
    dq_ref, dk_ref, dv_ref = R.backward(qa, ka, va, doa, **kw)
    r = Run(handle)
    ts = {}
    for name, x, ln in (("q", qa, lq), ("k", ka, lkv), ("v", va, lkv),
                        ("o", O.astype(np.float32), lq), ("do", doa, lq)):
        t, flat, _ = ragged(r, name, x, ln)
        r.pack[t] = flat
        ts[name] = t
    st = r.inp("st", np.where(np.isinf(lse), np.inf, lse).astype(np.float32), F32)
    dq, dk, dv = r.g.sdpa_backward(ts["q"], ts["k"], ts["v"], ts["o"], ts["do"], st,
                                   attn_scale=0.5, use_padding_mask=True,
                                   seq_len_q=r.inp("lq", lens(lq), I32),
                                   seq_len_kv=r.inp("lkv", lens(lkv), I32))
    got = {}
    for name, g, like, ln in (("dq", dq, ts["q"], lq), ("dk", dk, ts["k"], lkv),
                              ("dv", dv, ts["v"], lkv)):
        g.set_ragged_offset(like.get_ragged_offset()).set_output(True)
        flat, offs = pack_rows(np.zeros(g.get_dim(), np.float32), ln)
        r.pack[g] = flat
        got[name] = (flat, offs, ln, g.get_dim())
    r.g.build()
    r.g.execute(r.pack)
    for name, ref in (("dq", dq_ref), ("dk", dk_ref), ("dv", dv_ref)):
        flat, offs, ln, dims = got[name]
        np.testing.assert_allclose(unpack_rows(flat, offs, ln, tuple(dims)), ref, rtol=1e-4,
                                   atol=1e-5, err_msg=name)


# ============================================================================ fp8
@pytest.mark.parametrize("t", ["FP8_E4M3", "FP8_E5M2"])
@pytest.mark.parametrize("o_type", ["same", "FLOAT"])
def test_fp8_forward_scales_and_amax(handle, t, o_type):
    B, H, Hkv, Sq, Skv, D = 2, 4, 2, 9, 13, 16
    rng = np.random.default_rng(41)
    qc, kc, vc = (R.fp8_codes(rng.uniform(-3, 3, s), t)
                  for s in ((B, H, Sq, D), (B, Hkv, Skv, D), (B, Hkv, Skv, D)))
    sc = dict(descale_q=0.5, descale_k=0.25, descale_v=2.0, descale_s=1 / 64, scale_s=64.0,
              scale_o=4.0)
    dtype = DT["HIPDNN_DATA_" + t]
    g = hf.Graph(handle=handle, io_data_type=dtype, intermediate_data_type=F32,
                 compute_data_type=F32)
    pack = {}
    q, k, v = (g.tensor(name=n, dim=list(a.shape), data_type=dtype) for n, a in
               zip("qkv", (qc, kc, vc)))
    pack.update({q: qc, k: kc, v: vc})
    scl = {}
    for name, val in sc.items():
        x = g.tensor(name=name, dim=[1, 1, 1, 1], data_type=F32)
        pack[x] = np.array([val], np.float32).reshape(1, 1, 1, 1)
        scl[name] = x
    o, st, amax_s, amax_o = g.sdpa_fp8(q, k, v, scl["descale_q"], scl["descale_k"],
                                       scl["descale_v"], scl["descale_s"], scl["scale_s"],
                                       scl["scale_o"], attn_scale=0.125, use_causal_mask=True,
                                       generate_stats=True,
                                       o_data_type=None if o_type == "same" else F32)
    for x in (o, st, amax_s, amax_o):
        x.set_output(True)
    assert amax_s.get_dim() == [1, 1, 1, 1] and o.get_dim() == [B, H, Sq, D]
    g.build()
    assert g.engine_name == CPU_ENGINE
    oa = np.zeros(o.get_dim(), np.uint8 if o_type == "same" else np.float32)
    sa = np.zeros(st.get_dim(), np.float32)
    am = [np.zeros((1, 1, 1, 1), np.float32) for _ in range(2)]
    pack.update({o: oa, st: sa, amax_s: am[0], amax_o: am[1]})
    g.execute(pack)
    ref = R.forward_full(R.fp8_values(qc, t), R.fp8_values(kc, t), R.fp8_values(vc, t), 0.125,
                         causal=True, fp8=dict(sc, fmt=t))
    O, lse, _, _, ams, amo = ref
    check_stats(sa.astype(np.float64), lse, "fp8 stats")
    np.testing.assert_allclose(am[0].item(), ams, rtol=1e-6)
    np.testing.assert_allclose(am[1].item(), amo, rtol=1e-5)
    if o_type == "same":
        got = R.fp8_values(oa, t)
        want = R.fp8_values(R.fp8_codes(O, t), t)
        # the float32 engine may round a value near a code boundary the other way: one code
        ulp = 2.0 ** (-3 if t == "FP8_E4M3" else -2)
        assert np.all(np.abs(got - want) <= ulp * np.abs(want) + 1e-9)
        assert np.mean(got == want) > 0.97
    else:
        check(oa.astype(np.float64), O, "HALF", "fp8 o float")


def test_fp8_scales_need_fp8_data(handle):
    qa, ka, va = inputs(42, 1, 2, 2, 3, 4, 8)
    with pytest.raises(hf.HipdnnError, match="FP8"):
        _scale_on_float(handle, qa, ka, va)


def _scale_on_float(handle, qa, ka, va):
    r = Run(handle)
    q, k, v = r.inp("q", qa), r.inp("k", ka), r.inp("v", va)
    one = r.inp("one", np.ones((1, 1, 1, 1), np.float32), F32)
    o, _, _, _ = r.g.sdpa_fp8(q, k, v, one, one, one, one, one, one, generate_stats=False)
    r.out("o", o, np.float32)
    return r.go()


def test_fp8_backward_is_not_expressible(handle):
    g = graph(handle)
    with pytest.raises(NotSupportedError, match="SdpaBackwardAttributes"):
        g.sdpa_fp8_backward(*([None] * 18))
    q = g.tensor(name="q", dim=[1, 1, 2, 8])
    with pytest.raises(NotSupportedError, match="sink"):
        g.sdpa_backward(q, q, q, q, q, q, sink_token=q)


# ============================================================================ combinations
@pytest.mark.parametrize("D", [8, 64, 80, 128, 256])
def test_everything_combined(handle, D):
    """Sink + block mask + paged K/V + padding + bottom-right causal band + ALiBi + bias, GQA,
    odd lengths, every head-size class."""
    B, H, Hkv, Sq, Skv, page = 2, 8, 2, 7, 133, 16
    qa, ka, va = inputs(43 + D, B, H, Hkv, Sq, Skv, D, scale=1 / math.sqrt(D))
    lq, lkv = np.array([7, 1]), np.array([133, 40])
    rng = np.random.default_rng(D)
    sink = rng.uniform(-1, 1, H).astype(np.float32).reshape(1, H, 1, 1)
    bm = np.array([[[[0b11]], [[0b01]], [[0b10]], [[0b11]]] * 2], np.uint8).reshape(1, H, 1, 1)
    bias = rng.uniform(-1, 1, (1, H, Sq, Skv)).astype(np.float32)
    r = Run(handle)
    kp, kt = paginate(ka, lkv, page, rng)
    vp, vt = paginate(va, lkv, page, rng)
    q, k, v = r.inp("q", qa), r.inp("k", kp), r.inp("v", vp)
    o, st = r.g.sdpa(q, k, v, attn_scale=0.7, use_padding_mask=True,
                     seq_len_q=r.inp("lq", lens(lq), I32), seq_len_kv=r.inp("lkv", lens(lkv), I32),
                     paged_attention_k_table=r.inp("kt", kt, I32),
                     paged_attention_v_table=r.inp("vt", vt, I32),
                     paged_attention_max_seq_len_kv=Skv, use_alibi_mask=True,
                     diagonal_alignment=1, diagonal_band_right_bound=0,
                     diagonal_band_left_bound=50, bias=r.inp("bias", bias),
                     block_mask=r.inp("bm", bm, U8), sink_token=r.inp("sink", sink, F32))
    r.out("o", o, np.float32)
    r.out("stats", st, np.float32)
    res = r.go()
    ref = R.forward_full(qa, ka, va, 0.7, sq=lq, skv=lkv, br=True, right=0, left=50, alibi=True,
                         mask=bias, block=bm, sink=sink.reshape(-1))
    check_all(res, ref, f"combined D={D}")


# ============================================================================ dBias
@pytest.mark.parametrize("shape", [(1, 4, 5, 7), (2, 1, 5, 7), (2, 4, 5, 7)])
def test_backward_dbias(handle, shape):
    B, H, Hkv, Sq, Skv, D = 2, 4, 2, 5, 7, 8
    qa, ka, va = inputs(44, B, H, Hkv, Sq, Skv, D)
    rng = np.random.default_rng(45)
    bias = rng.uniform(-1, 1, shape).astype(np.float32)
    doa = rng.uniform(-1, 1, (B, H, Sq, D)).astype(np.float32)
    O, lse, _ = R.forward(qa, ka, va, scale=0.5, mask=bias)
    r = Run(handle)
    q, k, v = r.inp("q", qa), r.inp("k", ka), r.inp("v", va)
    o, do = r.inp("o", O.astype(np.float32)), r.inp("do", doa)
    st = r.inp("st", lse.astype(np.float32), F32)
    db = r.g.tensor(name="dbias", data_type=F32)
    dq, dk, dv = r.g.sdpa_backward(q, k, v, o, do, st, attn_scale=0.5, bias=r.inp("b", bias),
                                   dBias=db)
    assert db.get_dim() == list(shape)
    for x in (dq, dk, dv):
        x.set_output(True)
    r.out("dbias", db, np.float32)
    for name, x in (("dq", dq), ("dk", dk), ("dv", dv)):
        r.out(name, x, np.float32)
    res = r.go()
    dS = R.backward_dS(qa, ka, va, doa, scale=0.5, mask=bias)
    axes = tuple(a for a in range(4) if shape[a] == 1)
    np.testing.assert_allclose(res["dbias"], dS.sum(axis=axes, keepdims=True), rtol=1e-4,
                               atol=1e-5)


# ============================================================================ serialization
def test_serialization_round_trips_every_new_field(handle):
    g = graph(handle)
    B, H, Sq, D = 2, 4, 5, 8
    q = g.tensor(name="q", dim=[B, H, Sq, D], stride=[Sq * H * D, D, H * D, 1])
    qoff = g.tensor(name="q_off", dim=[B + 1, 1, 1, 1], data_type=I64)
    q.set_ragged_offset(qoff).set_ragged_offset_multiplier(H * D)
    k = g.tensor(name="k", dim=[6, 2, 4, D])
    v = g.tensor(name="v", dim=[6, 2, 4, D])
    mk = lambda n, d, t: g.tensor(name=n, dim=d, data_type=t)  # noqa: E731
    tabk, tabv = mk("tk", [B, 1, 3, 1], I32), mk("tv", [B, 1, 3, 1], I32)
    lq, lkv = mk("lq", [B, 1, 1, 1], I32), mk("lkv", [B, 1, 1, 1], I32)
    sink, bm = mk("sink", [1, H, 1, 1], F32), mk("bm", [B, H, 1, 1], U8)
    mx, se, dump = mk("mx", None, F32), mk("se", None, F32), mk("dump", None, F32)
    seed, off = mk("seed", [1, 1, 1, 1], I64), mk("off", [1, 1, 1, 1], I64)
    o, st = g.sdpa(q, k, v, attn_scale=0.5, use_padding_mask=True, seq_len_q=lq, seq_len_kv=lkv,
                   paged_attention_k_table=tabk, paged_attention_v_table=tabv,
                   paged_attention_max_seq_len_kv=11, sink_token=sink, block_mask=bm,
                   score_max=mx, score_sum_exp=se, dropout=(0.25, seed, off), rng_dump=dump,
                   name="attn")
    assert dump.get_dim() == [B, H, Sq, 11] and mx.get_dim() == [B, H, Sq, 1]
    for x in (o, st, mx, se, dump):
        x.set_output(True)
    blob = g.serialize()
    g2 = hf.Graph(handle=handle).deserialize(handle, blob)
    node = g2._nodes[0]
    a = node.attrs
    assert a["max_seq_len_kv"] == 11 and a["padding_mask"]
    ins = node.inputs
    for role, name in (("page_table_k", "tk"), ("page_table_v", "tv"), ("sink_token", "sink"),
                       ("block_mask", "bm"), ("seq_len_q", "lq"), ("seq_len_kv", "lkv")):
        assert ins[role] is not None and ins[role].name == name, role
    assert node.outputs["max"].name == "mx" and node.outputs["sum_exp"].name == "se"
    assert node.outputs["rng_dump"].name == "dump" and abs(a["dropout_probability"] - 0.25) < 1e-7
    assert ins["seed"].name == "seed" and ins["offset"].name == "off"
    q2 = ins["q"]
    assert q2.get_ragged_offset() is not None and q2.get_ragged_offset().name == "q_off"
    assert q2.get_ragged_offset().get_dim() == [B + 1, 1, 1, 1]
    assert q2.get_ragged_offset_multiplier() == H * D


def test_serialization_round_trips_fp8_and_dbias(handle):
    e4 = DT.HIPDNN_DATA_FP8_E4M3
    g = hf.Graph(handle=handle, io_data_type=e4, intermediate_data_type=F32, compute_data_type=F32)
    q = g.tensor(name="q", dim=[1, 2, 3, 8])
    sc = [g.tensor(name=f"s{i}", dim=[1, 1, 1, 1], data_type=F32) for i in range(6)]
    o, st, ams, amo = g.sdpa_fp8(q, q, q, *sc, generate_stats=True, name="f8")
    for x in (o, st, ams, amo):
        x.set_output(True)
    blob = g.serialize()
    node = hf.Graph(handle=handle).deserialize(handle, blob)._nodes[0]
    for n, role in enumerate(("descale_q", "descale_k", "descale_v", "descale_s", "scale_s",
                              "scale_o")):
        assert node.inputs[role].name == f"s{n}", role
    assert node.outputs["amax_s"] is not None and node.outputs["amax_o"] is not None

    g = graph(handle)
    x = g.tensor(name="x", dim=[1, 2, 3, 8])
    b = g.tensor(name="b", dim=[1, 2, 3, 3])
    db = g.tensor(name="db")
    st = g.tensor(name="st", dim=[1, 2, 3, 1], data_type=F32)
    outs = g.sdpa_backward(x, x, x, x, x, st, bias=b, dBias=db)
    for t in outs + (db,):
        t.set_output(True)
    node = hf.Graph(handle=handle).deserialize(handle, g.serialize())._nodes[0]
    assert node.outputs["dbias"].name == "db" and node.outputs["dbias"].get_dim() == [1, 2, 3, 3]


def test_backward_from_sink_forward_stats(handle):
    """hipDNN's backward has no sink role, but its P = exp(s - stats) with the stats of a
    forward that had a sink token is that forward's P: dq/dk/dv match finite differences of
    the sink forward."""
    B, H, Hkv, Sq, Skv, D = 1, 2, 1, 3, 4, 4
    qa, ka, va = inputs(46, B, H, Hkv, Sq, Skv, D, scale=2.0)
    sink = np.array([0.9, -0.4], np.float32).reshape(1, H, 1, 1)
    doa = np.random.default_rng(47).uniform(-1, 1, (B, H, Sq, D)).astype(np.float32)
    res = run_plain(handle, qa, ka, va, attn_scale=0.5, sink_token=("t", sink, F32))
    r = Run(handle)
    q, k, v = r.inp("q", qa), r.inp("k", ka), r.inp("v", va)
    dq, dk, dv = r.g.sdpa_backward(q, k, v, r.inp("o", res["o"]), r.inp("do", doa),
                                   r.inp("st", res["stats"], F32), attn_scale=0.5)
    for name, x in (("dq", dq), ("dk", dk), ("dv", dv)):
        r.out(name, x, np.float32)
    got = r.go()

    def loss(x):
        return float(np.sum(R.forward_full(*x, 0.5, sink=sink.reshape(-1))[0] * doa))
    base = [np.array(x, np.float64) for x in (qa, ka, va)]
    for idx, name in enumerate(("dq", "dk", "dv")):
        fd = np.zeros_like(base[idx])
        for pos in np.ndindex(*fd.shape):
            vals = []
            for sgn in (1, -1):
                xs = [b.copy() for b in base]
                xs[idx][pos] += sgn * 1e-6
                vals.append(loss(xs))
            fd[pos] = (vals[0] - vals[1]) / 2e-6
        np.testing.assert_allclose(got[name], fd, rtol=1e-3, atol=1e-4, err_msg=name)
