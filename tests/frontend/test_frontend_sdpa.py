"""Scaled dot-product attention through the frontend (the backend C API underneath) on the CPU
reference engine: every option alone and in combination against the float64 formulas of
sdpa_ref.py (written from cuDNN's semantics, no engine code), backward against finite
differences, dropout against an independent Philox, serialization round trips."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sdpa_ref as R
from fe_util import CPU_ENGINE
from hipdnn_cabi import frontend as hf

pytestmark = pytest.mark.needs_cpu_engine
DT = hf.DataType
NP = {"FLOAT": np.float32, "DOUBLE": np.float64, "HALF": np.float16, "BFLOAT16": np.uint16}
TOL = {"FLOAT": 2e-5, "DOUBLE": 1e-10, "HALF": 4e-3, "BFLOAT16": 3e-2}


def bf16(a):
    f = np.ascontiguousarray(np.asarray(a, np.float32)).view(np.uint32).astype(np.uint64)
    up = ((f & 0xFFFF) > 0x8000) | (((f & 0xFFFF) == 0x8000) & (((f >> 16) & 1) == 1))
    return ((f >> 16) + up).astype(np.uint16)


def enc(a, t):
    return bf16(a) if t == "BFLOAT16" else np.asarray(a).astype(NP[t])


def dec(a, t):
    if t == "BFLOAT16":
        return (np.asarray(a).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(a, np.float64)


def graph(handle, t="FLOAT"):
    d = DT["HIPDNN_DATA_" + t]
    c = DT.HIPDNN_DATA_DOUBLE if t == "DOUBLE" else DT.HIPDNN_DATA_FLOAT
    return hf.Graph(handle=handle, io_data_type=d, intermediate_data_type=c, compute_data_type=c)


def inputs(seed, B, H, Hkv, Sq, Skv, D, Dv=None, t="FLOAT", scale=1.0):
    r = np.random.default_rng(seed)
    Dv = Dv or D
    q = r.uniform(-1, 1, (B, H, Sq, D)) * scale
    k = r.uniform(-1, 1, (B, Hkv, Skv, D))
    v = r.uniform(-1, 1, (B, Hkv, Skv, Dv))
    return [enc(x, t) for x in (q, k, v)]


def run_fwd(handle, qa, ka, va, t="FLOAT", layout="bhsd", extra=None, stats=True, **opts):
    """Build + execute one forward graph; returns (o, stats) decoded to float64."""
    g = graph(handle, t)

    def tens(name, a):
        if layout == "bshd":   # [B, H, S, D] logical dims over a [B, S, H, D] buffer
            B, H, S, D = a.shape
            return g.tensor(name=name, dim=[B, H, S, D], stride=[S * H * D, D, H * D, 1])
        return g.tensor(name=name, dim=list(a.shape))
    q, k, v = tens("q", qa), tens("k", ka), tens("v", va)
    pack = {}
    for key, val in list(opts.items()):     # arrays become graph tensors
        if isinstance(val, tuple) and val and val[0] == "tensor":
            _, arr, dt = val
            tt = g.tensor(name=key, dim=list(arr.shape), data_type=dt)
            pack[tt] = arr
            opts[key] = tt
    if "dropout" in opts and isinstance(opts["dropout"], list):
        parts = []
        for j, val in enumerate(opts["dropout"]):
            if isinstance(val, tuple):
                _, arr, dt = val
                tt = g.tensor(name=f"drop{j}", dim=list(arr.shape), data_type=dt)
                pack[tt] = arr
                parts.append(tt)
            else:
                parts.append(val)
        opts["dropout"] = tuple(parts)
    o, st = g.sdpa(q, k, v, generate_stats=stats, **opts)
    o.set_output(True)
    if st is not None:
        st.set_output(True)
    g.build()
    assert g.engine_name == CPU_ENGINE
    oa = np.empty(o.get_dim(), NP[t])
    sa = np.empty(st.get_dim(), np.float32) if st is not None else None

    def buf(a):
        if layout == "bshd":
            return np.ascontiguousarray(np.swapaxes(a, 1, 2))
        return a
    ob = buf(oa)
    pack.update({q: buf(qa), k: buf(ka), v: buf(va), o: ob})
    if st is not None:
        pack[st] = sa
    if extra:
        pack.update(extra(g))
    g.execute(pack)
    if layout == "bshd":
        oa = np.swapaxes(ob, 1, 2)
    return dec(oa, t), (None if sa is None else sa.astype(np.float64)), g


def check(actual, ref, t, what=""):
    ref = np.asarray(ref, np.float64)
    assert actual.shape == ref.shape, (what, actual.shape, ref.shape)
    err = np.abs(actual - ref)
    bound = TOL[t] * (1 + np.abs(ref))
    assert np.all(err <= bound), f"{what} {t}: worst {float(np.max(err - bound)):.3g}"


def check_stats(sa, lse, what=""):
    fin = np.isfinite(lse)
    assert np.array_equal(np.isfinite(sa), fin) and np.all(sa[~fin] == np.inf), what
    np.testing.assert_allclose(sa[fin], lse[fin], rtol=1e-5, atol=1e-5, err_msg=what)


def ref_of(qa, ka, va, t, drop=None, **kw):
    return R.forward(dec(qa, t), dec(ka, t), dec(va, t), drop, **kw)


# ============================================================================ forward
@pytest.mark.parametrize("t", ["FLOAT", "HALF", "BFLOAT16", "DOUBLE"])
@pytest.mark.parametrize("H,Hkv", [(4, 4), (4, 1), (8, 1), (8, 2)])
def test_forward_dtypes_gqa(handle, t, H, Hkv):
    qa, ka, va = inputs(1, 2, H, Hkv, 13, 21, 16, t=t)
    o, st, _ = run_fwd(handle, qa, ka, va, t, attn_scale=0.375)
    O, lse, _ = ref_of(qa, ka, va, t, scale=0.375)
    check(o, O, t, "o")
    check_stats(st, lse)


@pytest.mark.parametrize("D", [64, 128])
def test_forward_head_dims_and_value_dim(handle, D):
    qa, ka, va = inputs(2, 1, 2, 1, 9, 17, D, Dv=D // 2)
    o, st, _ = run_fwd(handle, qa, ka, va, attn_scale=1 / math.sqrt(D))
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", scale=1 / math.sqrt(D))
    assert o.shape == (1, 2, 9, D // 2)
    check(o, O, "FLOAT")
    check_stats(st, lse)


def test_forward_bshd_layout(handle):
    qa, ka, va = inputs(3, 2, 4, 2, 11, 11, 8)
    o, st, _ = run_fwd(handle, qa, ka, va, layout="bshd", use_causal_mask=True)
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", causal=True)
    check(o, O, "FLOAT")
    check_stats(st, lse)


MASKS = {
    "causal": (dict(use_causal_mask=True), dict(causal=True)),
    "causal_br": (dict(use_causal_mask_bottom_right=True), dict(causal_br=True)),
    "window": (dict(sliding_window_length=4), dict(causal=True, left=4)),
    "bands_tl": (dict(diagonal_band_left_bound=3, diagonal_band_right_bound=2),
                 dict(left=3, right=2)),
    "bands_br": (dict(diagonal_band_left_bound=2, diagonal_band_right_bound=1,
                      diagonal_alignment=1), dict(left=2, right=1, br=True)),
    "window_br": (dict(use_causal_mask_bottom_right=True, diagonal_band_left_bound=5,
                       diagonal_alignment=1), dict(causal_br=True, left=5, br=True)),
    "alibi": (dict(use_alibi_mask=True), dict(alibi=True)),
    "alibi_causal": (dict(use_alibi_mask=True, use_causal_mask=True), dict(alibi=True, causal=True)),
}


@pytest.mark.parametrize("name", sorted(MASKS))
@pytest.mark.parametrize("sq,skv", [(7, 12), (12, 7), (10, 10)])
def test_forward_masks(handle, name, sq, skv):
    fe, ref = MASKS[name]
    H = 6 if "alibi" in name else 2     # 6: the non-power-of-two ALiBi slopes
    qa, ka, va = inputs(4, 2, H, H // 2 if H == 2 else 3, sq, skv, 8)
    o, st, _ = run_fwd(handle, qa, ka, va, attn_scale=0.5, **fe)
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", scale=0.5, **ref)
    check(o, O, "FLOAT", name)
    check_stats(st, lse, name)


@pytest.mark.parametrize("combo", ["plain", "causal", "causal_br", "bands_br"])
def test_forward_padding(handle, combo):
    B, H, Sq, Skv = 3, 2, 9, 11
    lq = np.array([9, 4, 6], np.int32).reshape(B, 1, 1, 1)
    lkv = np.array([11, 7, 2], np.int32).reshape(B, 1, 1, 1)
    fe, ref = {"plain": ({}, {}), "causal": MASKS["causal"], "causal_br": MASKS["causal_br"],
               "bands_br": MASKS["bands_br"]}[combo]
    qa, ka, va = inputs(5, B, H, 1, Sq, Skv, 8)
    o, st, _ = run_fwd(handle, qa, ka, va, use_padding_mask=True,
                       seq_len_q=("tensor", lq, DT.HIPDNN_DATA_INT32),
                       seq_len_kv=("tensor", lkv, DT.HIPDNN_DATA_INT32), **fe)
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", seq_q=lq.ravel(), seq_kv=lkv.ravel(), **ref)
    check(o, O, "FLOAT", combo)
    check_stats(st, lse, combo)
    assert np.all(o[1, :, 4:] == 0) and np.all(o[2, :, 6:] == 0)   # padded rows are zero


@pytest.mark.parametrize("shape", [(1, 1, 7, 10), (2, 1, 1, 10), (1, 2, 7, 1), (2, 2, 7, 10)])
def test_forward_additive_mask_broadcast(handle, shape):
    qa, ka, va = inputs(6, 2, 2, 2, 7, 10, 8)
    m = np.random.default_rng(7).uniform(-2, 2, shape).astype(np.float32)
    o, st, _ = run_fwd(handle, qa, ka, va, attn_mask=("tensor", m, DT.HIPDNN_DATA_FLOAT))
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", mask=m.astype(np.float64))
    check(o, O, "FLOAT")
    check_stats(st, lse)


def test_forward_boolean_mask_with_causal(handle):
    qa, ka, va = inputs(8, 1, 2, 1, 8, 8, 8)
    m = np.random.default_rng(9).uniform(0, 1, (1, 2, 8, 8)) > 0.3
    m[..., 0] = True
    o, st, _ = run_fwd(handle, qa, ka, va, use_causal_mask=True,
                       bias=("tensor", m, DT.HIPDNN_DATA_BOOLEAN))
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", causal=True, mask=m, mask_bool=True)
    check(o, O, "FLOAT")
    check_stats(st, lse)


def test_forward_everything_combined(handle):
    B, H, Hkv, Sq, Skv = 2, 4, 2, 9, 13
    qa, ka, va = inputs(10, B, H, Hkv, Sq, Skv, 16, t="HALF")
    lq = np.array([9, 5], np.int64).reshape(B, 1, 1, 1)
    lkv = np.array([13, 8], np.int64).reshape(B, 1, 1, 1)
    m = np.random.default_rng(11).uniform(-1, 1, (1, H, Sq, Skv)).astype(np.float16)
    o, st, _ = run_fwd(handle, qa, ka, va, "HALF", attn_scale=0.25, use_alibi_mask=True,
                       use_causal_mask_bottom_right=True, diagonal_band_left_bound=6,
                       diagonal_alignment=1, use_padding_mask=True,
                       seq_len_q=("tensor", lq, DT.HIPDNN_DATA_INT64),
                       seq_len_kv=("tensor", lkv, DT.HIPDNN_DATA_INT64),
                       attn_mask=("tensor", m, DT.HIPDNN_DATA_HALF))
    O, lse, _ = ref_of(qa, ka, va, "HALF", scale=0.25, alibi=True, causal_br=True, left=6,
                       br=True, seq_q=lq.ravel(), seq_kv=lkv.ravel(), mask=m.astype(np.float64))
    check(o, O, "HALF")
    check_stats(st, lse)


def test_forward_inference_has_no_stats(handle):
    qa, ka, va = inputs(12, 1, 2, 2, 5, 5, 8)
    o, st, _ = run_fwd(handle, qa, ka, va, stats=False)
    assert st is None
    check(o, ref_of(qa, ka, va, "FLOAT")[0], "FLOAT")
    g = graph(handle)
    q = g.tensor(name="q", dim=[1, 2, 5, 8])
    _, st = g.sdpa(q, q, q, is_inference=True)
    assert st is None


@pytest.mark.parametrize("how", ["by_value", "runtime"])
def test_forward_scale_tensor(handle, how):
    qa, ka, va = inputs(13, 1, 2, 1, 6, 9, 8)
    g = graph(handle)
    q, k, v = (g.tensor(name=n, dim=list(a.shape)) for n, a in zip("qkv", (qa, ka, va)))
    if how == "by_value":
        s = g.tensor(0.7, hf.ScalarType.COMPILE_TIME_CONST, name="s")
    else:
        s = g.tensor(name="s", dim=[1], data_type=DT.HIPDNN_DATA_FLOAT).set_as_runtime_parameter()
    o, st = g.sdpa(q, k, v, attn_scale=s)
    o.set_output(True)
    st.set_output(True)
    g.build()
    oa = np.empty(o.get_dim(), np.float32)
    sa = np.empty(st.get_dim(), np.float32)
    for val in ((0.7,) if how == "by_value" else (0.7, -1.3)):   # read at execute, never baked
        pack = {q: qa, k: ka, v: va, o: oa, st: sa}
        if how == "runtime":
            pack[s] = val
        g.execute(pack)
        O, lse, _ = ref_of(qa, ka, va, "FLOAT", scale=val)
        check(oa.astype(np.float64), O, "FLOAT")
        check_stats(sa.astype(np.float64), lse)


# ============================================================================ dropout
def _dropout_graph(handle, qa, ka, va, p, seed, offset, rng_dump=True):
    g = graph(handle)
    q, k, v = (g.tensor(name=n, dim=list(a.shape)) for n, a in zip("qkv", (qa, ka, va)))
    sd = g.tensor(name="seed", dim=[1, 1, 1, 1], data_type=DT.HIPDNN_DATA_INT64)
    of = g.tensor(name="offset", dim=[1, 1, 1, 1], data_type=DT.HIPDNN_DATA_INT64)
    o, st = g.sdpa(q, k, v, attn_scale=0.5, dropout=(p, sd, of))
    o.set_output(True)
    st.set_output(True)
    dump = None
    if rng_dump:   # the rng_dump output is not in pygraph's signature: attach it to the node
        node = g._nodes[-1]
        dump = g._out(node.name, "rng_dump")
        dump._producer = node
        node.outputs["rng_dump"] = dump
        B, H, Sq, _ = qa.shape
        dump.set_dim([B, H, Sq, ka.shape[2]]).set_stride(
            [H * Sq * ka.shape[2], Sq * ka.shape[2], ka.shape[2], 1]).set_output(True)
    g.build()
    outs = dict(o=np.empty(o.get_dim(), np.float32), st=np.empty(st.get_dim(), np.float32))
    pack = {q: qa, k: ka, v: va, o: outs["o"], st: outs["st"],
            sd: np.array([seed], np.int64), of: np.array([offset], np.int64)}
    if dump is not None:
        outs["dump"] = np.empty(dump.get_dim(), np.float32)
        pack[dump] = outs["dump"]
    g.execute(pack)
    return outs


def test_dropout_philox_stream_and_output(handle):
    B, H, Sq, Skv, p, seed, off = 2, 3, 9, 13, 0.25, 0x1234_5678_9ABC, 7
    qa, ka, va = inputs(14, B, H, 1, Sq, Skv, 8)
    out = _dropout_graph(handle, qa, ka, va, p, seed, off)
    z = out["dump"]
    # the mask is the independent Philox stream of sdpa_ref.py, element by element
    want = np.array([[[[R.keep(seed, off, b, h, H, i, j, Skv, p) for j in range(Skv)]
                       for i in range(Sq)] for h in range(H)] for b in range(B)], np.float32)
    assert np.array_equal(z, want)
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", drop=z / (1 - p), scale=0.5)
    check(out["o"].astype(np.float64), O, "FLOAT")
    check_stats(out["st"].astype(np.float64), lse)       # stats: the undropped softmax
    # same seed/offset -> same mask; another offset -> another mask
    again = _dropout_graph(handle, qa, ka, va, p, seed, off)
    assert np.array_equal(again["o"], out["o"])
    other = _dropout_graph(handle, qa, ka, va, p, seed, off + 1)
    assert not np.array_equal(other["dump"], z)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keep_rate(handle, p):
    qa, ka, va = inputs(15, 1, 4, 4, 64, 96, 4)
    z = _dropout_graph(handle, qa, ka, va, p, 2024, 0)["dump"]
    n = z.size
    rate = float(z.mean())
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(rate - (1 - p)) < 5 * sigma, (rate, 1 - p, sigma)


def test_dropout_user_mask_and_scale(handle):
    qa, ka, va = inputs(16, 1, 2, 2, 6, 8, 8)
    m = (np.random.default_rng(17).uniform(0, 1, (1, 2, 6, 8)) > 0.4).astype(np.float32)
    sc = np.array([1 / 0.6], np.float32).reshape(1, 1, 1, 1)
    o, st, _ = run_fwd(handle, qa, ka, va, dropout=[("t", m, DT.HIPDNN_DATA_FLOAT),
                                                   ("t", sc, DT.HIPDNN_DATA_FLOAT)])
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", drop=m.astype(np.float64) * float(sc.ravel()[0]))
    check(o, O, "FLOAT")
    check_stats(st, lse)


# ============================================================================ backward
def run_bwd(handle, qa, ka, va, doa, t="FLOAT", tensors=None, fwd=None, **opts):
    """Forward (for O and stats) then backward through two graphs; returns dq, dk, dv."""
    tensors = tensors or {}
    g = graph(handle, t)
    q, k, v = (g.tensor(name=n, dim=list(a.shape)) for n, a in zip("qkv", (qa, ka, va)))
    pack = {}
    made = {}
    for key, (arr, dt) in tensors.items():
        tt = g.tensor(name=key, dim=list(arr.shape), data_type=dt)
        made[key] = tt
        pack[tt] = arr
    o_opts = dict(opts)
    for key in list(o_opts):
        if isinstance(o_opts[key], str) and o_opts[key] in made:
            o_opts[key] = made[o_opts[key]]
    if "dropout" in o_opts:
        o_opts["dropout"] = tuple(made.get(x, x) if isinstance(x, str) else x
                                  for x in o_opts["dropout"])
    o, st = g.sdpa(q, k, v, **o_opts)
    o.set_output(True)
    st.set_output(True)
    g.build()
    oa = np.empty(o.get_dim(), NP[t])
    sa = np.empty(st.get_dim(), np.float32)
    g.execute({**pack, q: qa, k: ka, v: va, o: oa, st: sa})

    g2 = graph(handle, t)
    q2, k2, v2 = (g2.tensor(name=n, dim=list(a.shape)) for n, a in zip("qkv", (qa, ka, va)))
    o2 = g2.tensor(name="o", dim=list(oa.shape))
    do2 = g2.tensor(name="do", dim=list(doa.shape))
    st2 = g2.tensor(name="stats", dim=list(sa.shape), data_type=DT.HIPDNN_DATA_FLOAT)
    pack2 = {}
    made2 = {}
    for key, (arr, dt) in tensors.items():
        tt = g2.tensor(name=key, dim=list(arr.shape), data_type=dt)
        made2[key] = tt
        pack2[tt] = arr
    b_opts = dict(opts)
    b_opts.pop("generate_stats", None)
    for key in list(b_opts):
        if isinstance(b_opts[key], str) and b_opts[key] in made2:
            b_opts[key] = made2[b_opts[key]]
    if "dropout" in b_opts:
        b_opts["dropout"] = tuple(made2.get(x, x) if isinstance(x, str) else x
                                  for x in b_opts["dropout"])
    dq, dk, dv = g2.sdpa_backward(q2, k2, v2, o2, do2, st2, **b_opts)
    for x in (dq, dk, dv):
        x.set_output(True)
    g2.build()
    assert g2.engine_name == CPU_ENGINE
    outs = [np.empty(x.get_dim(), NP[t]) for x in (dq, dk, dv)]
    g2.execute({**pack2, q2: qa, k2: ka, v2: va, o2: oa, do2: doa, st2: sa,
                dq: outs[0], dk: outs[1], dv: outs[2]})
    return [dec(x, t) for x in outs]


def fd_grads(qa, ka, va, doa, drop=None, h=1e-6, **kw):
    """Central finite differences of sum(O * dO) of the sdpa_ref forward (float64)."""
    base = [np.array(x, np.float64) for x in (qa, ka, va)]
    grads = []
    for idx in range(3):
        g = np.zeros_like(base[idx])
        for pos in np.ndindex(*g.shape):
            vals = []
            for sgn in (1, -1):
                xs = [b.copy() for b in base]
                xs[idx][pos] += sgn * h
                vals.append(float(np.sum(R.forward(*xs, drop, **kw)[0] * doa)))
            g[pos] = (vals[0] - vals[1]) / (2 * h)
        grads.append(g)
    return grads


BWD = {
    "plain": ({}, {}),
    "gqa_causal": (dict(use_causal_mask=True), dict(causal=True)),
    "alibi_mask_br": (dict(use_alibi_mask=True, use_causal_mask_bottom_right=True,
                           attn_mask="mask"), dict(alibi=True, causal_br=True, mask="mask")),
    "padding_window": (dict(use_padding_mask=True, seq_len_q="lq", seq_len_kv="lkv",
                            diagonal_band_left_bound=3, diagonal_band_right_bound=1),
                       dict(seq_q="lq", seq_kv="lkv", left=3, right=1)),
    "dropout_mask": (dict(dropout=("dm", "ds")), dict(drop="drop")),
}


@pytest.mark.parametrize("name", sorted(BWD))
def test_backward_finite_differences(handle, name):
    fe, ref = BWD[name]
    B, H, Hkv, Sq, Skv, D = 2, 2, (1 if name == "gqa_causal" else 2), 5, 6, 4
    qa, ka, va = inputs(20, B, H, Hkv, Sq, Skv, D, t="DOUBLE", scale=2.0)
    doa = np.random.default_rng(21).uniform(-1, 1, (B, H, Sq, D))
    r = np.random.default_rng(22)
    arrays = {"mask": (r.uniform(-1, 1, (1, H, Sq, Skv)), DT.HIPDNN_DATA_DOUBLE),
              "lq": (np.array([5, 3], np.int32).reshape(B, 1, 1, 1), DT.HIPDNN_DATA_INT32),
              "lkv": (np.array([6, 4], np.int32).reshape(B, 1, 1, 1), DT.HIPDNN_DATA_INT32),
              "dm": ((r.uniform(0, 1, (B, H, Sq, Skv)) > 0.3).astype(np.float64),
                     DT.HIPDNN_DATA_DOUBLE),
              "ds": (np.array([1.25]).reshape(1, 1, 1, 1), DT.HIPDNN_DATA_DOUBLE)}
    used = {k: v for k, v in arrays.items()
            if k in str(fe.values()) or k in str(fe.get("dropout", ""))}
    got = run_bwd(handle, qa, ka, va, doa, "DOUBLE", used, attn_scale=0.75, **fe)
    kw = {}
    drop = None
    for key, val in ref.items():
        if key == "drop":
            drop = arrays["dm"][0] * 1.25
        elif isinstance(val, str):
            kw[key] = arrays[val][0].ravel() if key.startswith("seq") else arrays[val][0]
        else:
            kw[key] = val
    want = fd_grads(qa, ka, va, doa, drop, scale=0.75, **kw)
    ana = R.backward(qa, ka, va, doa, drop, scale=0.75, **kw)
    for n, g, w, a in zip(("dq", "dk", "dv"), got, want, ana):
        np.testing.assert_allclose(a, w, rtol=1e-6, atol=1e-6, err_msg=f"ref {n}")
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"{name} {n}")


@pytest.mark.parametrize("t", ["FLOAT", "HALF", "BFLOAT16"])
def test_backward_dtypes_gqa(handle, t):
    B, H, Hkv, Sq, Skv, D = 1, 8, 2, 11, 19, 16
    qa, ka, va = inputs(23, B, H, Hkv, Sq, Skv, D, t=t)
    doa = enc(np.random.default_rng(24).uniform(-1, 1, (B, H, Sq, D)), t)
    got = run_bwd(handle, qa, ka, va, doa, t, attn_scale=0.25, use_causal_mask=True)
    want = R.backward(dec(qa, t), dec(ka, t), dec(va, t), dec(doa, t), scale=0.25, causal=True)
    for n, g, w in zip(("dq", "dk", "dv"), got, want):
        err = np.max(np.abs(g - w)) / max(1e-3, np.max(np.abs(w)))
        assert err < {"FLOAT": 1e-5, "HALF": 5e-3, "BFLOAT16": 4e-2}[t], (n, err)


def test_backward_philox_dropout_matches_forward_mask(handle):
    B, H, Sq, Skv, D, p, seed, off = 1, 2, 6, 9, 4, 0.3, 99, 5
    qa, ka, va = inputs(25, B, H, H, Sq, Skv, D, t="DOUBLE")
    doa = np.random.default_rng(26).uniform(-1, 1, (B, H, Sq, D))
    tens = {"seed": (np.array([seed], np.int64).reshape(1, 1, 1, 1), DT.HIPDNN_DATA_INT64),
            "off": (np.array([off], np.int64).reshape(1, 1, 1, 1), DT.HIPDNN_DATA_INT64)}
    got = run_bwd(handle, qa, ka, va, doa, "DOUBLE", tens, dropout=(p, "seed", "off"))
    z = np.array([[[[R.keep(seed, off, 0, h, H, i, j, Skv, p) for j in range(Skv)]
                    for i in range(Sq)] for h in range(H)]], np.float64) / (1 - p)
    want = R.backward(qa, ka, va, doa, z)
    for n, g, w in zip(("dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=n)   # stats: float32


# ============================================================================ serialization
def test_serialization_round_trip(handle):
    qa, ka, va = inputs(27, 2, 4, 2, 7, 9, 8)
    lq = np.array([7, 3], np.int32).reshape(2, 1, 1, 1)
    lkv = np.array([9, 5], np.int32).reshape(2, 1, 1, 1)
    g = graph(handle)
    q, k, v = (g.tensor(name=n, dim=list(a.shape)) for n, a in zip("qkv", (qa, ka, va)))
    sq = g.tensor(name="lq", dim=[2, 1, 1, 1], data_type=DT.HIPDNN_DATA_INT32)
    skv = g.tensor(name="lkv", dim=[2, 1, 1, 1], data_type=DT.HIPDNN_DATA_INT32)
    o, st = g.sdpa(q, k, v, attn_scale=0.375, use_causal_mask_bottom_right=True,
                   diagonal_band_left_bound=4, diagonal_alignment=1, use_alibi_mask=True,
                   use_padding_mask=True, seq_len_q=sq, seq_len_kv=skv, name="attn")
    o.set_output(True).set_name("o")
    st.set_output(True).set_name("stats")
    g.build()
    blob = g.serialize()
    g2 = hf.Graph(handle=handle).deserialize(handle, blob)
    node = g2._nodes[0]
    assert node.kind == "sdpa" and node.name == "attn"
    a = node.attrs
    assert a["causal_mask_bottom_right"] and a["alibi_mask"] and a["padding_mask"]
    assert not a["causal_mask"] and a["generate_stats"]
    assert a["left_bound"] == 4 and a["right_bound"] is None and int(a["diagonal_alignment"]) == 1
    assert abs(a["attn_scale_value"] - 0.375) < 1e-7
    if g2.engine_id is None:
        g2.build()
    oa = np.empty((2, 4, 7, 8), np.float32)
    sa = np.empty((2, 4, 7, 1), np.float32)
    g2.execute({"q": qa, "k": ka, "v": va, "lq": lq, "lkv": lkv, "o": oa, "stats": sa})
    O, lse, _ = ref_of(qa, ka, va, "FLOAT", scale=0.375, causal_br=True, left=4, br=True,
                       alibi=True, seq_q=lq.ravel(), seq_kv=lkv.ravel())
    check(oa.astype(np.float64), O, "FLOAT")
    check_stats(sa.astype(np.float64), lse)
    # relowering the Python graph from the read-back parameters gives the same graph
    g3 = hf.Graph(handle=handle).deserialize(handle, blob).relower()
    assert [n.kind for n in g3._nodes] == ["sdpa"]


def test_backward_serialization_round_trip(handle):
    g = graph(handle)
    q, k, v, o, do = (g.tensor(name=n, dim=[1, 2, 5, 8]) for n in ("q", "k", "v", "o", "do"))
    st = g.tensor(name="st", dim=[1, 2, 5, 1], data_type=DT.HIPDNN_DATA_FLOAT)
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, st, attn_scale=0.5, use_causal_mask=True,
                                 diagonal_band_right_bound=0, name="attn_bwd")
    for x in (dq, dk, dv):
        x.set_output(True)
    blob = g.serialize()
    g2 = hf.Graph(handle=handle).deserialize(handle, blob)
    n = g2._nodes[0]
    assert n.kind == "sdpa_backward" and n.attrs["causal_mask"] and n.attrs["right_bound"] == 0
    assert sorted(r for r, t in n.outputs.items() if t is not None) == ["dk", "dq", "dv"]


def test_frontend_shape_inference(handle):
    g = graph(handle)
    q = g.tensor(name="q", dim=[2, 8, 33, 64], stride=[8 * 33 * 64, 64, 8 * 64, 1])
    k = g.tensor(name="k", dim=[2, 2, 40, 64])
    v = g.tensor(name="v", dim=[2, 2, 40, 32])
    o, st = g.sdpa(q, k, v)
    assert o.get_dim() == [2, 8, 33, 32] and st.get_dim() == [2, 8, 33, 1]
    assert o.get_stride() == [8 * 33 * 32, 32, 8 * 32, 1]     # q's (BSHD) stride order
    assert st.get_data_type() == DT.HIPDNN_DATA_FLOAT
    dq, dk, dv = g.sdpa_backward(q, k, v, o, o, st)
    assert dq.get_dim() == q.get_dim() and dk.get_dim() == k.get_dim() and dv.get_dim() == v.get_dim()
    with pytest.raises(hf.BadParamError if hasattr(hf, "BadParamError") else Exception):
        g.sdpa(q, k, v, dropout=(0.1,))
