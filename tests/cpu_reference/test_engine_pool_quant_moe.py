"""CPU reference engine: resample (pooling), block-scale quantize / dequantize and MoE grouped
matmul, through the plugin C ABI (one CabiBatch subprocess for all cases).

References are written here, independently of the engine's kernels: pooling and MoE as plain
Python loops in float64 over the quantised inputs; narrow float formats from their bit-field
definitions (sign, exponent, mantissa), nearest-even rounding by mantissa parity.  Malformed
attributes must make the engine decline; bad MoE routing data must fail execute with a status.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine_testutil import CabiBatch, Tensor, graph_bytes, node, order_for, quantize

FLOATS = ["FLOAT", "DOUBLE", "HALF", "BFLOAT16"]
LAYS = ["nchw", "nhwc"]
TOL = {"FLOAT": 2e-6, "DOUBLE": 1e-12, "HALF": 1e-3, "BFLOAT16": 8e-3}
CASES = {}
RM = {"MAXPOOL": 1, "AVGPOOL_EXCLUDE_PADDING": 2, "AVGPOOL_INCLUDE_PADDING": 3}
PM = {"NEG_INF_PAD": 1, "ZERO_PAD": 2}


def case(name, expect="ok"):
    def deco(fn):
        CASES[name] = (fn, expect)
        return fn
    return deco


def rng_for(name):
    return np.random.default_rng(sum(map(ord, name)) * 31 + 7)


def close(actual, ref, t, what=""):
    actual, ref = np.asarray(actual, np.float64), np.asarray(ref, np.float64)
    assert actual.shape == ref.shape, (what, actual.shape, ref.shape)
    bound = TOL[t] * (np.abs(ref) + max(1e-3, float(np.max(np.abs(ref))) if ref.size else 1))
    with np.errstate(invalid="ignore"):
        bad = ~((actual == ref) | (np.abs(actual - ref) <= bound))
    assert not bad.any(), (what, t, int(bad.sum()), actual.ravel()[np.argmax(bad)],
                           ref.ravel()[np.argmax(bad)])


class Raw(Tensor):
    """A tensor whose buffer holds raw uint8 codes (narrow float formats)."""

    def set_codes(self, codes):
        mem = np.transpose(np.broadcast_to(codes, self.dims), order_for(len(self.dims), self.lay))
        self.buf = np.ascontiguousarray(mem.astype(np.uint8))

    def alloc(self, fill=0):
        self.buf = np.full([self.dims[a] for a in order_for(len(self.dims), self.lay)], 0xEE,
                           np.uint8)
        return self

    def codes(self):
        inv = np.argsort(order_for(len(self.dims), self.lay))
        m = self.buf.reshape([self.dims[a] for a in order_for(len(self.dims), self.lay)])
        return np.transpose(m, inv).astype(np.int64)


# =========================================================================== pooling references
def ref_pool(x, window, stride, pre, post, mode, pmode):
    N, C = x.shape[:2]
    sp = x.shape[2:]
    out = [(sp[k] + pre[k] + post[k] - window[k]) // stride[k] + 1 for k in range(len(sp))]
    y = np.zeros([N, C] + out)
    idx = np.full([N, C] + out, -1, np.int64)
    for n, c in itertools.product(range(N), range(C)):
        for o in itertools.product(*[range(d) for d in out]):
            best, bi, s, cnt = -3.4028234663852886e38, -1, 0.0, 0
            for w in itertools.product(*[range(d) for d in window]):
                p = [o[k] * stride[k] + w[k] - pre[k] for k in range(len(sp))]
                inside = all(0 <= p[k] < sp[k] for k in range(len(sp)))
                if inside:
                    v = x[(n, c) + tuple(p)]
                    flat = 0
                    for k in range(len(sp)):
                        flat = flat * sp[k] + p[k]
                    cnt += 1
                    s += v
                elif mode == "MAXPOOL" and pmode == "ZERO_PAD":
                    v, flat = 0.0, -1
                else:
                    continue
                if v > best:
                    best, bi = v, flat
            if mode == "MAXPOOL":
                y[(n, c) + o], idx[(n, c) + o] = best, bi
            elif mode == "AVGPOOL_INCLUDE_PADDING":
                y[(n, c) + o] = s / math.prod(window)
            else:
                y[(n, c) + o] = s / max(cnt, 1)
    return y, idx


def ref_pool_bwd(dy, xs, window, stride, pre, mode, idx=None):
    """dx by linearity: dx[i] = sum over (o, w) that read i of dy[o] * d y[o] / d x[i]."""
    dx = np.zeros(xs)
    sp = xs[2:]
    N, C = xs[:2]
    for n, c in itertools.product(range(N), range(C)):
        for o in itertools.product(*[range(d) for d in dy.shape[2:]]):
            cells = []
            for w in itertools.product(*[range(d) for d in window]):
                p = [o[k] * stride[k] + w[k] - pre[k] for k in range(len(sp))]
                if all(0 <= p[k] < sp[k] for k in range(len(sp))):
                    cells.append(tuple(p))
            g = dy[(n, c) + o]
            if mode == "MAXPOOL":
                f = idx[(n, c) + o]
                if f >= 0:
                    p = np.unravel_index(f, sp)
                    dx[(n, c) + tuple(p)] += g
                continue
            div = math.prod(window) if mode == "AVGPOOL_INCLUDE_PADDING" else max(len(cells), 1)
            for p in cells:
                dx[(n, c) + p] += g / div
    return dx


def resample_attrs(kind, io, window, stride, pre, post, mode, pmode, index=None, gen=None,
                   comp="FLOAT"):
    a = dict(io)
    a.update(window=list(window), stride=list(stride), pre_padding=list(pre),
             post_padding=list(post), resample_mode=RM[mode])
    if pmode:
        a["padding_mode"] = PM[pmode]
    if index is not None:
        a["index_tensor_uid"] = index
    if gen is not None:
        a["generate_index"] = gen
    return node(kind, a, comp)


POOLS = [  # (mode, padding mode, window, stride, pre, post, spatial)
    ("MAXPOOL", "NEG_INF_PAD", (3, 3), (2, 2), (1, 1), (1, 0), (7, 6)),
    ("MAXPOOL", "ZERO_PAD", (2, 3, 2), (1, 2, 2), (1, 0, 1), (0, 1, 1), (3, 5, 4)),
    ("AVGPOOL_EXCLUDE_PADDING", "ZERO_PAD", (3, 3), (2, 1), (1, 1), (1, 1), (6, 5)),
    ("AVGPOOL_INCLUDE_PADDING", None, (2, 2, 2), (2, 2, 1), (0, 1, 1), (1, 1, 0), (4, 4, 3)),
]


def _pool_cases(t, lay, pi):
    mode, pmode, win, st, pre, post, sp = POOLS[pi]
    comp = "DOUBLE" if t == "DOUBLE" else "FLOAT"
    xs = [2, 3] + list(sp)
    ys = [2, 3] + [(sp[k] + pre[k] + post[k] - win[k]) // st[k] + 1 for k in range(len(sp))]
    it = "INT64" if pi % 2 else "INT32"

    @case(f"resample_fwd_{mode}_{pmode}_{len(sp)}d_{t}_{lay}")
    def fwd(rng):
        x = Tensor(1, xs, t, lay)
        y = Tensor(2, ys, t, lay).alloc()
        xv = x.set(np.round(rng.standard_normal(xs) * 64) / 16)   # ties happen
        ts = [x, y]
        idx = None
        if mode == "MAXPOOL":
            idx = Tensor(3, ys, it, lay).alloc(99)
            ts.append(idx)
        a = {"x_tensor_uid": 1, "y_tensor_uid": 2}
        g = graph_bytes(ts, [resample_attrs("ResampleFwdAttributes", a, win, st, pre, post, mode,
                                            pmode, 3 if idx else None, True if idx else None,
                                            comp)], comp)

        def check():
            ry, ri = ref_pool(xv, win, st, pre, post, mode, pmode)
            close(y.get(), quantize(ry, t), t, "y")
            if idx is not None:
                assert np.array_equal(idx.get().astype(np.int64), ri)
        return ts, g, check

    @case(f"resample_bwd_{mode}_{pmode}_{len(sp)}d_{t}_{lay}")
    def bwd(rng):
        dy = Tensor(1, ys, t, lay)
        dx = Tensor(2, xs, t, lay).alloc()
        dyv = dy.set(rng.standard_normal(ys))
        ts = [dy, dx]
        ri = None
        a = {"dy_tensor_uid": 1, "dx_tensor_uid": 2}
        if mode == "MAXPOOL":
            xv = quantize(rng.standard_normal(xs), t)
            ri = ref_pool(xv, win, st, pre, post, mode, pmode)[1]
            idx = Tensor(3, ys, it, lay)
            idx.set(ri)
            ts.append(idx)
            a["index_tensor_uid"] = 3
        g = graph_bytes(ts, [resample_attrs("ResampleBwdAttributes", a, win, st, pre, post, mode,
                                            pmode, comp=comp)], comp)

        def check():
            close(dx.get(), ref_pool_bwd(dyv, xs, win, st, pre, mode, ri), t, "dx")
        return ts, g, check


for _t in FLOATS:
    for _lay in LAYS:
        for _pi in range(len(POOLS)):
            _pool_cases(_t, _lay, _pi)


# =========================================================================== narrow formats
def fmt_values(name):
    """code -> value for every code, from the bit-field definition."""
    spec = {"FP8_E4M3": (4, 3, 7), "FP8_E5M2": (5, 2, 15), "FP4_E2M1": (2, 1, 1),
            "FP8_E8M0": (8, 0, 127)}[name]
    e_bits, m_bits, bias = spec
    if name == "FP8_E8M0":
        return np.array([2.0 ** (c - 127) if c != 255 else np.nan for c in range(256)])
    vals = []
    for c in range(1 << (1 + e_bits + m_bits)):
        s, e, m = c >> (e_bits + m_bits), (c >> m_bits) & ((1 << e_bits) - 1), c & ((1 << m_bits) - 1)
        if e == 0:
            v = m / 2 ** m_bits * 2.0 ** (1 - bias)
        else:
            v = (1 + m / 2 ** m_bits) * 2.0 ** (e - bias)
        if name == "FP8_E4M3" and e == 15 and m == 7:
            v = np.nan
        if name == "FP8_E5M2" and e == 31:
            v = np.inf if m == 0 else np.nan
        vals.append(-v if s else v)
    return np.array(vals)


def fmt_max(name):
    v = fmt_values(name)
    return float(np.max(v[np.isfinite(v)]))


def ref_round(v, name):
    """Nearest value of the format, ties to the even mantissa, saturating: (value, code)."""
    vals = fmt_values(name)
    sign_bit = 0 if name == "FP8_E8M0" else len(vals) // 2
    out_v, out_c = [], []
    for a in np.ravel(v):
        mag = min(abs(a), fmt_max(name))
        cands = [(abs(vals[c] - mag), c & 1, c) for c in range(sign_bit or len(vals))
                 if np.isfinite(vals[c])]
        _, _, c = min(cands)
        if a < 0 and sign_bit:
            c |= sign_bit
        out_v.append(vals[c])
        out_c.append(c)
    return np.array(out_v).reshape(np.shape(v)), np.array(out_c).reshape(np.shape(v))


def ref_round_up_scale(v, stype):
    if stype == "FP8_E8M0":
        return 2.0 ** np.clip(np.ceil(np.log2(np.maximum(v, 2.0 ** -127))), -127, 127)
    # float scale: the smallest float32 >= v
    f = np.float32(v)
    return np.where(f < v, np.nextafter(f, np.float32(np.inf)), f).astype(np.float64)


QUANT = [  # (x type, y type, scale type, dims, axis, block, layout)
    ("FLOAT", "FP8_E4M3", "FP8_E8M0", [4, 64], None, 32, "nchw"),
    ("BFLOAT16", "FP8_E4M3", "FP8_E8M0", [2, 3, 32], 1, 3, "nhwc"),
    ("HALF", "FP8_E5M2", "FP8_E8M0", [3, 2, 48], None, 16, "nchw"),
    ("FLOAT", "FP4_E2M1", "FP8_E8M0", [8, 32], 0, 4, [1, 0]),
    ("BFLOAT16", "FP4_E2M1", "FLOAT", [2, 64], None, 16, "nchw"),
    ("FLOAT", "INT8", "FLOAT", [4, 40], None, 8, "nchw"),
    ("HALF", "FP8_E4M3", "FLOAT", [5, 32], None, 32, [1, 0]),
]


def _quant_case(qi):
    xt, yt, stp, dims, axis, bs, lay = QUANT[qi]
    ax = len(dims) - 1 if axis is None else axis
    sdims = [d // bs if i == ax else d for i, d in enumerate(dims)]

    @case(f"bsq_{qi}_{xt}_{yt}_{stp}")
    def q(rng):
        x = Tensor(1, dims, xt, lay)
        raw = rng.standard_normal(dims) * np.exp(rng.uniform(-6, 6, dims))
        raw.reshape(-1)[:bs] = 0.0                      # an all-zero block
        xv = x.set(raw)
        y = (Raw if yt.startswith("FP") else Tensor)(2, dims, yt, lay).alloc()
        s = (Raw if stp.startswith("FP") else Tensor)(3, sdims, stp, lay).alloc()
        a = {"x_tensor_uid": 1, "y_tensor_uid": 2, "scale_tensor_uid": 3, "block_size": bs}
        if axis is not None:
            a["axis"] = axis
        ts = [x, y, s]
        g = graph_bytes(ts, [node("BlockScaleQuantizeAttributes", a)])

        def check():
            xb = np.moveaxis(xv, ax, -1)
            xb = xb.reshape(xb.shape[:-1] + (xb.shape[-1] // bs, bs))
            vmax = fmt_max(yt) if yt.startswith("FP") else 127.0
            sc = ref_round_up_scale(np.abs(xb).max(-1) / vmax, stp)
            got_s = fmt_values(stp)[s.codes()] if isinstance(s, Raw) else s.get()
            assert np.array_equal(got_s, np.moveaxis(sc, -1, ax)), "scale"
            with np.errstate(invalid="ignore", divide="ignore"):
                qv = np.where(sc[..., None] > 0, (xb.astype(np.float32) /
                                                  sc[..., None].astype(np.float32)), 0.0)
            if yt.startswith("FP"):
                ev, ec = ref_round(qv, yt)
                got = np.moveaxis(y.codes(), ax, -1).reshape(ec.shape)
                # codes equal, except +0 / -0 which are both zero
                assert np.array_equal(fmt_values(yt)[got], ev), "y values"
            else:
                ev = np.clip(np.rint(qv), -128, 127)
                got = np.moveaxis(y.get(), ax, -1).reshape(ev.shape)
                assert np.array_equal(got, ev), "y int8"
        return ts, g, check


for _qi in range(len(QUANT)):
    _quant_case(_qi)


@case("bsq_nan_block")
def bsq_nan(rng):
    x = Tensor(1, [2, 8], "FLOAT")
    raw = rng.standard_normal([2, 8])
    raw[0, 2] = np.nan
    raw[1, 5] = np.inf
    raw[1, 0:4] = [1, 2, 3, 4]
    x.set(raw)
    y, s = Raw(2, [2, 8], "FP8_E4M3").alloc(), Raw(3, [2, 2], "FP8_E8M0").alloc()
    ts = [x, y, s]
    g = graph_bytes(ts, [node("BlockScaleQuantizeAttributes", {
        "x_tensor_uid": 1, "y_tensor_uid": 2, "scale_tensor_uid": 3, "block_size": 4})])

    def check():
        sc = s.codes()
        assert sc[0, 0] == 0xFF and sc[1, 1] == 0xFF and sc[1, 0] != 0xFF
        yc = y.codes()
        assert np.all(yc[0, :4] & 0x7F == 0x7F) and np.all(yc[1, 4:] & 0x7F == 0x7F)
        # block [1,2,3,4]: scale 2^ceil(log2(4/448)) = 2^-6; y = 64, 128, 192, 256
        assert sc[1, 0] == 127 - 6
        assert list(fmt_values("FP8_E4M3")[yc[1, :4]]) == [64, 128, 192, 256]
    return ts, g, check


DEQ = [  # (x type, scale type, y type, dims, block sizes, negative scale, layout)
    ("FP8_E4M3", "FP8_E8M0", "FLOAT", [4, 64], [32], False, "nchw"),
    ("FP4_E2M1", "FP8_E8M0", "BFLOAT16", [2, 4, 32], [2, 16], False, "nhwc"),
    ("FP8_E5M2", "FLOAT", "HALF", [3, 48], [16], False, [1, 0]),
    ("INT8", "FLOAT", "FLOAT", [4, 40], [8], False, "nchw"),
    ("FP8_E4M3", "FLOAT", "FLOAT", [2, 32], [8], True, "nchw"),
]


def _deq_case(di):
    xt, stp, yt, dims, bsv, neg, lay = DEQ[di]
    full = [1] * (len(dims) - len(bsv)) + bsv
    sdims = [d // b for d, b in zip(dims, full)]

    @case(f"bsdq_{di}_{xt}_{stp}_{yt}")
    def dq(rng):
        if xt.startswith("FP"):
            x = Raw(1, dims, xt, lay)
            fin = np.nonzero(np.isfinite(fmt_values(xt)))[0]
            xc = rng.choice(fin, size=dims)
            x.set_codes(xc)
            xv = fmt_values(xt)[xc]
        else:
            x = Tensor(1, dims, xt, lay)
            xv = x.set(rng.integers(-128, 128, dims))
        if stp == "FP8_E8M0":
            s = Raw(2, sdims, stp, lay)
            scd = rng.integers(127 - 20, 127 + 20, sdims)
            s.set_codes(scd)
            sv = fmt_values(stp)[scd]
        else:
            s = Tensor(2, sdims, stp, lay)
            sv = s.set(rng.integers(-8, 8, sdims) if neg else rng.standard_normal(sdims))
        y = Tensor(3, dims, yt, lay).alloc()
        ts = [x, s, y]
        g = graph_bytes(ts, [node("BlockScaleDequantizeAttributes", {
            "x_tensor_uid": 1, "scale_tensor_uid": 2, "y_tensor_uid": 3, "block_size": bsv,
            "is_negative_scale": neg})])

        def check():
            se = sv
            for axn, b in enumerate(full):
                se = np.repeat(se, b, axis=axn)
            ref = xv * (2.0 ** -se if neg else se)
            close(y.get(), quantize(ref.astype(np.float32), yt), yt, "y")
        return ts, g, check


for _di in range(len(DEQ)):
    _deq_case(_di)


# =========================================================================== MoE
def ref_moe(tok, w, off, mode, rows_out, ti=None, tk=None, top_k=0):
    E = w.shape[0]
    rows_total = tok.shape[1] if mode != "GATHER" else ti.shape[1]
    out = np.zeros((1, rows_out, w.shape[2]))
    G = len(off)
    for g in range(G):
        end = off[g + 1] if g + 1 < G else rows_total
        for r in range(off[g], end):
            src, dst = r, r
            if mode == "GATHER":
                src = ti[0, r, 0]
            elif mode == "SCATTER":
                dst = ti[0, r, 0] * top_k + tk[0, r, 0]
            out[0, dst] = tok[0, src] @ w[g % E]
    return out


MOE_MODE = {"NONE": 0, "GATHER": 1, "SCATTER": 2}


def moe_graph(t, mode, S, K, N, E, off, ti=None, tk=None, top_k=0, ot=None, rng=None):
    rows = ti.shape[1] if mode == "GATHER" else S
    tok = Tensor(1, [1, S, K], t)
    w = Tensor(2, [E, K, N], t)
    o = Tensor(3, [len(off), 1, 1], "INT32")
    out = Tensor(4, [1, rows, N], ot or t).alloc()
    tv = tok.set(rng.standard_normal([1, S, K]))
    wv = w.set(rng.standard_normal([E, K, N]) / np.sqrt(K))
    o.set(np.array(off).reshape(-1, 1, 1))
    ts = [tok, w, o, out]
    a = {"token_tensor_uid": 1, "weight_tensor_uid": 2, "first_token_offset_tensor_uid": 3,
         "output_tensor_uid": 4, "mode": MOE_MODE[mode], "top_k": top_k}
    if ti is not None:
        tit = Tensor(5, list(ti.shape), "INT32")
        tit.set(ti)
        ts.append(tit)
        a["token_index_tensor_uid"] = 5
    if tk is not None:
        tkt = Tensor(6, list(tk.shape), "INT32")
        tkt.set(tk)
        ts.append(tkt)
        a["token_ks_tensor_uid"] = 6
    comp = "DOUBLE" if t == "DOUBLE" else "FLOAT"
    return ts, graph_bytes(ts, [node("MoeGroupedMatmulAttributes", a, comp)], comp), tv, wv, out


def _moe_cases(t):
    @case(f"moe_none_{t}")
    def none(rng):
        off = [0, 3, 3, 7, 9, 9, 12, 15]           # B=2, E=4; an empty group
        ts, g, tv, wv, out = moe_graph(t, "NONE", 17, 12, 10, 4, off, rng=rng)

        def check():
            close(out.get(), ref_moe(tv, wv, off, "NONE", 17), t, "out")
        return ts, g, check

    @case(f"moe_gather_{t}")
    def gather(rng):
        S, k, E = 9, 2, 3
        ti = rng.integers(0, S, (1, S * k, 1))
        off = [0, 5, 11]
        ts, g, tv, wv, out = moe_graph(t, "GATHER", S, 8, 6, E, off, ti=ti, rng=rng,
                                       ot="FLOAT")

        def check():
            close(out.get(), ref_moe(tv, wv, off, "GATHER", S * k, ti=ti), "FLOAT", "out")
        return ts, g, check

    @case(f"moe_scatter_{t}")
    def scatter(rng):
        S, k, E = 6, 2, 4
        pairs = rng.permutation([(s, j) for s in range(S) for j in range(k)])
        ti = pairs[:, 0].reshape(1, -1, 1)
        tk = pairs[:, 1].reshape(1, -1, 1)
        off = [0, 2, 2, 7]
        ts, g, tv, wv, out = moe_graph(t, "SCATTER", S * k, 8, 5, E, off, ti=ti, tk=tk,
                                       top_k=k, rng=rng)

        def check():
            close(out.get(), ref_moe(tv, wv, off, "SCATTER", S * k, ti, tk, k), t, "out")
        return ts, g, check

    @case(f"moe_bwd_{t}")
    def bwd(rng):
        T, K, N, E = 13, 7, 5, 3
        off = [0, 4, 4]
        do, tok = Tensor(1, [1, T, N], t), Tensor(2, [1, T, K], t)
        o, dw = Tensor(3, [E, 1, 1], "INT32"), Tensor(4, [E, K, N], t).alloc()
        dov, tv = do.set(rng.standard_normal([1, T, N])), tok.set(rng.standard_normal([1, T, K]))
        o.set(np.array(off).reshape(-1, 1, 1))
        ts = [do, tok, o, dw]
        comp = "DOUBLE" if t == "DOUBLE" else "FLOAT"
        g = graph_bytes(ts, [node("MoeGroupedMatmulBwdAttributes", {
            "doutput_tensor_uid": 1, "token_tensor_uid": 2, "first_token_offset_tensor_uid": 3,
            "dweight_tensor_uid": 4}, comp)], comp)

        def check():
            ref = np.zeros((E, K, N))
            for e in range(E):
                end = off[e + 1] if e + 1 < E else T
                for r in range(off[e], end):
                    ref[e] += np.outer(tv[0, r], dov[0, r])
            close(dw.get(), ref, t, "dweight")
        return ts, g, check


for _t in FLOATS:
    _moe_cases(_t)


# =========================================================================== malformed
@case("bad_pool_window_too_large", expect="decline")
def bad_window(rng):
    x, y = Tensor(1, [1, 1, 3, 3]), Tensor(2, [1, 1, 1, 1]).alloc()
    x.set(np.zeros([1, 1, 3, 3]))
    ts = [x, y]
    return ts, graph_bytes(ts, [resample_attrs("ResampleFwdAttributes", {
        "x_tensor_uid": 1, "y_tensor_uid": 2}, (5, 5), (1, 1), (0, 0), (1, 1), "MAXPOOL",
        "NEG_INF_PAD")]), None


@case("bad_pool_max_bwd_without_index", expect="decline")
def bad_maxbwd(rng):
    dy, dx = Tensor(1, [1, 1, 2, 2]), Tensor(2, [1, 1, 4, 4]).alloc()
    dy.set(np.zeros([1, 1, 2, 2]))
    ts = [dy, dx]
    return ts, graph_bytes(ts, [resample_attrs("ResampleBwdAttributes", {
        "dy_tensor_uid": 1, "dx_tensor_uid": 2}, (2, 2), (2, 2), (0, 0), (0, 0), "MAXPOOL",
        None)]), None


@case("bad_bsq_block_not_dividing", expect="decline")
def bad_block(rng):
    x, y, s = Tensor(1, [2, 30]), Raw(2, [2, 30], "FP8_E4M3").alloc(), Raw(3, [2, 1], "FP8_E8M0").alloc()
    x.set(np.zeros([2, 30]))
    ts = [x, y, s]
    return ts, graph_bytes(ts, [node("BlockScaleQuantizeAttributes", {
        "x_tensor_uid": 1, "y_tensor_uid": 2, "scale_tensor_uid": 3, "block_size": 32})]), None


@case("bad_bsq_zero_block", expect="decline")
def bad_block0(rng):
    x, y, s = Tensor(1, [2, 32]), Raw(2, [2, 32], "FP8_E4M3").alloc(), Raw(3, [2, 1], "FP8_E8M0").alloc()
    x.set(np.zeros([2, 32]))
    ts = [x, y, s]
    return ts, graph_bytes(ts, [node("BlockScaleQuantizeAttributes", {
        "x_tensor_uid": 1, "y_tensor_uid": 2, "scale_tensor_uid": 3, "block_size": 0})]), None


@case("bad_bsdq_scale_shape", expect="decline")
def bad_deq(rng):
    x, s, y = Raw(1, [2, 32], "FP8_E4M3"), Tensor(2, [2, 3]), Tensor(3, [2, 32]).alloc()
    x.set_codes(np.zeros([2, 32]))
    s.set(np.ones([2, 3]))
    ts = [x, s, y]
    return ts, graph_bytes(ts, [node("BlockScaleDequantizeAttributes", {
        "x_tensor_uid": 1, "scale_tensor_uid": 2, "y_tensor_uid": 3, "block_size": [16]})]), None


@case("bad_moe_offsets_out_of_range", expect="execute_error")
def bad_moe_range(rng):
    ts, g, *_ = moe_graph("FLOAT", "NONE", 5, 4, 3, 2, [0, 9], rng=rng)
    return ts, g, None


@case("bad_moe_offsets_decreasing", expect="execute_error")
def bad_moe_mono(rng):
    ts, g, *_ = moe_graph("FLOAT", "NONE", 5, 4, 3, 2, [3, 1], rng=rng)
    return ts, g, None


@case("bad_moe_gather_index_out_of_range", expect="execute_error")
def bad_moe_gidx(rng):
    ti = np.array([0, 7, 1]).reshape(1, 3, 1)
    ts, g, *_ = moe_graph("FLOAT", "GATHER", 5, 4, 3, 1, [0], ti=ti, rng=rng)
    return ts, g, None


@case("bad_moe_scatter_duplicate", expect="execute_error")
def bad_moe_dup(rng):
    ti = np.array([0, 0, 1, 1]).reshape(1, 4, 1)
    tk = np.array([0, 0, 0, 1]).reshape(1, 4, 1)
    ts, g, *_ = moe_graph("FLOAT", "SCATTER", 4, 4, 3, 2, [0, 2], ti=ti, tk=tk, top_k=2, rng=rng)
    return ts, g, None


@case("bad_moe_k_mismatch", expect="decline")
def bad_moe_k(rng):
    tok, w = Tensor(1, [1, 4, 5]), Tensor(2, [2, 6, 3])
    o, out = Tensor(3, [2, 1, 1], "INT32"), Tensor(4, [1, 4, 3]).alloc()
    tok.set(np.zeros([1, 4, 5]))
    w.set(np.zeros([2, 6, 3]))
    o.set(np.zeros([2, 1, 1]))
    ts = [tok, w, o, out]
    return ts, graph_bytes(ts, [node("MoeGroupedMatmulAttributes", {
        "token_tensor_uid": 1, "weight_tensor_uid": 2, "first_token_offset_tensor_uid": 3,
        "output_tensor_uid": 4})]), None


# =========================================================================== the batch
@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    b = CabiBatch(tmp_path_factory.mktemp("cpuref_pqm"))
    out = {}
    for name, (make, expect) in CASES.items():
        tensors, g, check = make(rng_for(name))
        out[name] = (b.add(g, tensors), check, expect)
    results = b.run(timeout=300)
    return {n: (results[i], chk, ex) for n, (i, chk, ex) in out.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(batch, name):
    res, check, expect = batch[name]
    if expect == "decline":
        assert res["applicable"] == [], res
        return
    assert res["applicable"] == [res["engine_id"]], res
    assert res["context_status"] == 0, res
    if expect == "execute_error":
        assert res["execute_status"] != 0, res
        assert "MoeGroupedMatmul" in res["execute_error"], res
        return
    assert res["execute_status"] == 0, res["execute_error"]
    check()
