"""Scaled dot-product attention (SDPA): forward and backward."""
from __future__ import annotations

import itertools

import numpy as np

from hipdnn_cabi.plugin_sdk.errors import INVALID_VALUE, PluginError
from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas.catalog import FB_NAMES

from ..kernels import dtypes as kdt
from ..kernels import layout as klayout
from ..kernels import philox as kphilox
from ..kernels import sdpa as ksdpa
from ..signature import BOOL, FLOATS, STRIDED, SignatureKey, dtype_name, kernel_type
from ._base import (F8, NodeBuilder, NodePlan, _dims, _f8_outs, _float_compute, _need,
                    _np_compute, _scalar_ok, _scalar_value, load, store)


_IDX = ("INT32", "INT64")
_RNG = ("seed", "offset")   # the dropout RNG's integer scalars
_FP8_SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
_PAGED = {"k": "page_table_k", "v": "page_table_v"}
_ROW_LEN = {"q": "seq_len_q", "o": "seq_len_q", "do": "seq_len_q", "dq": "seq_len_q",
            "stats": "seq_len_q", "max": "seq_len_q", "sum_exp": "seq_len_q",
            "k": "seq_len_kv", "v": "seq_len_kv", "dk": "seq_len_kv", "dv": "seq_len_kv"}


def _scalar_int(env, t):
    return int(np.asarray(env[t.uid]).reshape(-1)[0])


def _ints(env, t):
    return np.asarray(env[t.uid]).reshape(-1).astype(np.int64)


def _ragged_rows(env, t, lens):
    """Per-batch views [H, n_b, D] of ragged tensor t: batch b starts offset[b] * multiplier
    elements after the base and holds its first n_b = lens[b] rows (the batch stride unused)."""
    ref = env[t.uid]
    off = _ints(env, ref.offsets) * ref.multiplier
    dims, strides = [int(d) for d in t.dims], [int(x) for x in t.strides]
    isz = np.dtype(ref.dtype).itemsize
    views = []
    for b in range(dims[0]):
        n = max(0, min(int(lens[b]), dims[2]))
        d = [dims[1], n] + dims[3:]
        lo, hi = klayout.element_extent(d, strides[1:])
        if hi < lo:
            views.append(np.zeros(d, ref.dtype))
            continue
        start = int(off[b]) + lo
        if start < 0:
            raise PluginError(INVALID_VALUE, f"tensor uid {t.uid}: ragged offset of batch {b} "
                                             f"({int(off[b])} elements) is negative")
        raw = klayout.from_address(ref.ptr + start * isz, (hi - lo + 1) * isz)
        views.append(klayout.view(raw, d, strides[1:], ref.dtype, offset=-lo))
    return views


class _SdpaBase(NodeBuilder):
    DATA_IN = ()         # q, k, v (and o, do): one data type
    DATA_OUT = ()        # the mandatory outputs: that type or FLOAT
    FLOAT_SCALARS = ()   # 1-element float inputs (scale, dropout scales, fp8 scales)
    INDEX = ()           # per-batch INT32/INT64 sequence lengths
    FP8_DATA = False     # fp8 q/k/v run (the forward: with the fp8 scale roles)
    READS_RAGGED = True  # q/k/v/o/do/stats and the gradients may be ragged

    @classmethod
    def from_catalog(cls, op):
        super().from_catalog(op)
        cls.DATA_IN = op.roles_of(catalog.DATA)
        cls.DATA_OUT = tuple(r for r in cls.KEY_ROLES if r not in cls.DATA_IN)
        cls.FLOAT_SCALARS = tuple(r for r in cls.INPUTS if r in op.scalar_roles and r not in _RNG)
        cls.INDEX = tuple(r for r in cls.INPUTS if r in op.roles_of(catalog.INDEX)
                          and r not in _PAGED.values())

    @classmethod
    def supported_keys(cls):
        for t in FLOATS + (F8 if cls.FP8_DATA else ()):
            outs = _f8_outs(t) if t in F8 else tuple(sorted({t, "FLOAT"}))
            for combo in itertools.product(outs, repeat=len(cls.DATA_OUT)):
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, tuple((r, t) for r in cls.DATA_IN)
                                       + tuple(zip(cls.DATA_OUT, combo)), c, STRIDED)

    @staticmethod
    def kv_dims(node, ts):
        """The logical [B, Hkv, Skv, D] of k and v (a paged one: from its page pool, its page
        table and max_seq_len_kv)."""
        B = int(ts["q"].dims[0])
        cap = {}
        for r, pt in _PAGED.items():
            if pt in ts:
                c, tab = _dims(ts[r]), _dims(ts[pt])
                _need(len(c) == 4, f"{node.kind}: the {r} page pool must be 4-d "
                      f"[pages, Hkv, page_size, D]")
                _need(len(tab) == 4 and tab[0] == B and tab[1] == 1 and tab[3] == 1,
                      f"{node.kind}: {pt} {list(tab)} must be [B={B}, 1, max_pages, 1]")
                _need(dtype_name(ts[pt].dtype) in _IDX, f"{node.kind}: {pt} must be INT32/INT64")
                cap[r] = tab[2] * c[2]
        skv = node.attrs.get("max_seq_len_kv")
        if skv is None:
            plain = [int(ts[r].dims[2]) for r in ("k", "v") if r not in cap and len(ts[r].dims) == 4]
            skv = plain[0] if plain else min(cap.values()) if cap else None
        out = {}
        for r in ("k", "v"):
            d = _dims(ts[r])
            if r in cap:
                _need(skv is not None and int(skv) <= cap[r], f"{node.kind}: max_seq_len_kv "
                      f"{skv} exceeds the {cap[r]} positions {_PAGED[r]} can address")
                out[r] = (B, d[1], int(skv), d[3])
            else:
                out[r] = d
        return out["k"], out["v"]

    def check(self, node, graph):
        a = node.attrs
        ts = self.tensors(node, graph)
        for r in self.DATA_IN + self.DATA_OUT:
            _need(len(ts[r].dims) == 4, f"{self.KIND}: {r} must be 4-d [B, H, S, D]")
        q = _dims(ts["q"])
        k, v = self.kv_dims(node, ts)
        B, H, Sq, D = q
        _need(k[0] == B and v[0] == B and k[3] == D and k[1] == v[1] and k[2] == v[2],
              f"{self.KIND}: k {k} / v {v} do not match q {q}")
        _need(k[1] >= 1 and H % k[1] == 0, f"{self.KIND}: Hq={H} is not a multiple of Hkv={k[1]}")
        _need(len({dtype_name(ts[r].dtype) for r in self.DATA_IN}) == 1,
              f"{self.KIND}: {'/'.join(self.DATA_IN)} types differ")
        for r in self.FLOAT_SCALARS:
            if r in ts:
                _need(_scalar_ok(ts[r]), f"{self.KIND}: {r} must be a 1-element float tensor")
        for r in _RNG:
            if r in ts:
                _need(ts[r].numel == 1 and dtype_name(ts[r].dtype) in _IDX,
                      f"{self.KIND}: {r} must be a 1-element INT32/INT64 tensor")
        for r in self.INDEX:
            if r in ts:
                _need(ts[r].numel == B and dtype_name(ts[r].dtype) in _IDX,
                      f"{self.KIND}: {r} must hold B={B} INT32/INT64 lengths")
        if a.get("padding_mask"):
            _need("seq_len_q" in ts and "seq_len_kv" in ts,
                  f"{self.KIND}: the padding mask needs seq_len_q and seq_len_kv")
        if any(p in ts for p in _PAGED.values()):
            _need("seq_len_kv" in ts, f"{self.KIND}: paged K/V needs seq_len_kv")
        for r, t in ts.items():
            if getattr(t, "ragged_offset_uid", None) is None:
                continue
            _need(r in _ROW_LEN, f"{self.KIND}: {r} cannot be ragged")
            _need(_ROW_LEN[r] in ts, f"{self.KIND}: ragged {r} needs {_ROW_LEN[r]}")
            _need(r not in _PAGED or _PAGED[r] not in ts, f"{self.KIND}: {r} is paged and ragged")
            _need(not t.virtual, f"{self.KIND}: ragged {r} is virtual")
            ot = graph.tensors.get(t.ragged_offset_uid)
            _need(ot is not None and not ot.virtual and dtype_name(ot.dtype) in _IDX
                  and ot.numel >= B and getattr(ot, "ragged_offset_uid", None) is None,
                  f"{self.KIND}: the ragged offsets of {r} (uid {t.ragged_offset_uid}) must be "
                  f"a non-virtual INT32/INT64 tensor of B + 1 = {B + 1} elements")
        full = (B, H, Sq, k[2])
        for r in ("attn_mask", "dropout_mask", "dbias", "rng_dump"):
            if r in ts:
                d = _dims(ts[r])
                _need(len(d) == 4 and all(x in (1, f) for x, f in zip(d, full)),
                      f"{self.KIND}: {r} {d} does not broadcast to {list(full)}")
        if "attn_mask" in ts:
            _need(dtype_name(ts["attn_mask"].dtype) in FLOATS + (BOOL,), "attn_mask type")
        p = a.get("dropout_probability")
        if p is not None and float(p) != 0.0:
            _need(0.0 < float(p) < 1.0, f"{self.KIND}: dropout probability {p} not in [0, 1)")
            _need("seed" in ts and "offset" in ts, f"{self.KIND}: dropout needs seed and offset")
        if "dropout_mask" in ts:
            _need(not p, f"{self.KIND}: a dropout mask and a dropout probability together")
        for r in ("left_bound", "right_bound"):
            if a.get(r) is not None:
                _need(int(a[r]) >= 0, f"{self.KIND}: {r} must be >= 0")
        return ts

    def signature(self, node, graph):
        ts = self.check(node, graph)
        self.extra_checks(node, ts)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype))
                                          for r in self.DATA_IN + self.DATA_OUT])

    def extra_checks(self, node, ts):
        pass

    @staticmethod
    def params(node, ts, env, cdt):
        a = node.attrs
        P = ksdpa.SdpaParams()
        if "scale" in ts:
            P.scale = _scalar_value(env, ts["scale"])
        elif a.get("attn_scale_value") is not None:
            P.scale = float(a["attn_scale_value"])
        P.alibi = bool(a.get("alibi_mask"))
        P.causal = bool(a.get("causal_mask"))
        P.causal_bottom_right = bool(a.get("causal_mask_bottom_right"))
        P.left_bound = a.get("left_bound")
        P.right_bound = a.get("right_bound")
        P.bottom_right = FB_NAMES["DiagonalAlignment"].get(a.get("diagonal_alignment")) == "BOTTOM_RIGHT"
        if P.causal_bottom_right and not P.causal:
            P.bottom_right = True
        for r in ("seq_len_q", "seq_len_kv"):
            if r in ts:
                setattr(P, r, _ints(env, ts[r]))
        if "attn_mask" in ts:
            P.mask_is_bool = dtype_name(ts["attn_mask"].dtype) == BOOL
            P.attn_mask = np.asarray(load(env, ts["attn_mask"]))
        if "dropout_scale" in ts:
            P.dropout_scale = _scalar_value(env, ts["dropout_scale"])
        prob = a.get("dropout_probability")
        if prob:
            P.dropout = ("philox", float(prob), _scalar_int(env, ts["seed"]),
                         _scalar_int(env, ts["offset"]))
        elif "dropout_mask" in ts:
            P.dropout = ("mask", np.asarray(load(env, ts["dropout_mask"]), dtype=cdt),
                         P.dropout_scale)
        if "block_mask" in ts:
            P.block_mask = np.asarray(env[ts["block_mask"].uid]).astype(np.uint8)
        if "sink_token" in ts:
            P.sink = np.asarray(load(env, ts["sink_token"]), np.float64).reshape(-1)
        t = dtype_name(ts["q"].dtype)
        if t in F8:
            P.fp8 = ksdpa.Fp8Scales(p_format=t, **{r: _scalar_value(env, ts[r])
                                                   for r in _FP8_SCALES if r in ts})
        return P

    @staticmethod
    def get(env, ts, r, cdt):
        """Role r as a dense [B, H, S, D] array in the compute dtype: a ragged tensor gathered
        by its offsets (rows past the batch's length are 0), a paged k/v gathered page by page
        from its pool through its page table."""
        t = ts[r]
        if getattr(t, "ragged_offset_uid", None) is not None:
            lens = _ints(env, ts[_ROW_LEN[r]])
            dims = [int(d) for d in t.dims]
            out = np.zeros(dims, cdt)
            for b, vw in enumerate(_ragged_rows(env, t, lens)):
                out[b, :, :vw.shape[1]] = kdt.decode(vw, kernel_type(dtype_name(t.dtype)))
            return out
        if r in _PAGED and _PAGED[r] in ts:
            pool = load(env, t)
            tab = _ints(env, ts[_PAGED[r]]).reshape(ts[_PAGED[r]].dims[0], -1)
            lens = _ints(env, ts["seq_len_kv"])
            NP, Hkv, PS, D = pool.shape
            skv = int(ts["__skv__"]) if "__skv__" in ts else tab.shape[1] * PS
            out = np.zeros((tab.shape[0], Hkv, skv, D), cdt)
            for b in range(tab.shape[0]):
                n = max(0, min(int(lens[b]), skv))
                for lp in range(-(-n // PS)):
                    page = int(tab[b, lp])
                    if not 0 <= page < NP:
                        raise PluginError(INVALID_VALUE, f"{_PAGED[r]}[{b}, 0, {lp}, 0] = {page} "
                                                         f"is not a page of the {NP}-page pool")
                    m = min(PS, n - lp * PS)
                    out[b, :, lp * PS:lp * PS + m] = pool[page, :, :m]
            return out
        return load(env, t)

    @staticmethod
    def put(env, ts, r, values):
        """Write role r (a ragged tensor: only each batch's first rows, at its offset)."""
        t = ts[r]
        if getattr(t, "ragged_offset_uid", None) is None:
            store(env, t, values)
            return
        lens = _ints(env, ts[_ROW_LEN[r]])
        values = np.asarray(values)
        for b, vw in enumerate(_ragged_rows(env, t, lens)):
            klayout.write(vw, kdt.encode(values[b, :, :vw.shape[1]],
                                         kernel_type(dtype_name(t.dtype))))

    @staticmethod
    def ragged_inputs(ts):
        """The ragged offset tensors the node's ragged tensors read."""
        return sorted({t.ragged_offset_uid for t in ts.values()
                       if getattr(t, "ragged_offset_uid", None) is not None})

    @classmethod
    def io_uids(cls, node, graph):
        ins, outs = super().io_uids(node, graph)
        extra = [u for u in cls.ragged_inputs(cls.tensors(node, graph)) if u not in ins]
        return ins + extra, outs


class SdpaFwdBuilder(_SdpaBase):
    OP = catalog.by_table("SdpaAttributes")
    FP8_DATA = True

    def extra_checks(self, node, ts):
        B, H, Sq, _ = _dims(ts["q"])
        _, _, Skv, _ = self.kv_dims(node, ts)[0]
        want = [B, H, Sq, _dims(ts["v"])[3]]
        if "block_mask" in ts:
            tiles = [-(-Sq // ksdpa.TILE), -(-(-(-Skv // ksdpa.TILE)) // 8)]
            d = list(_dims(ts["block_mask"]))
            _need(len(d) == 4 and d[0] in (1, B) and d[1] in (1, H) and d[2:] == tiles
                  and dtype_name(ts["block_mask"].dtype) == "UINT8",
                  f"{self.KIND}: block_mask {d} must be UINT8 [B, Hq, ceil(Sq/128), "
                  f"ceil(ceil(Skv/128)/8)] = [{B}, {H}, {tiles[0]}, {tiles[1]}]")
        if "sink_token" in ts:
            _need(ts["sink_token"].numel == H and dtype_name(ts["sink_token"].dtype) in FLOATS,
                  f"{self.KIND}: sink_token must hold Hq={H} float logits ([1, Hq, 1, 1])")
        fp8 = dtype_name(ts["q"].dtype) in F8
        for r in _FP8_SCALES + ("amax_s", "amax_o"):
            if r in ts:
                _need(fp8, f"{self.KIND}: {r} needs FP8 q/k/v")
        for r in ("amax_s", "amax_o"):
            if r in ts:
                _need(ts[r].numel == 1 and dtype_name(ts[r].dtype) in FLOATS,
                      f"{self.KIND}: {r} must be a 1-element float tensor")
        if any(r in ts for r in ("max", "sum_exp")):
            _need(not fp8, f"{self.KIND}: max / sum_exp with FP8 data")
        _need(list(_dims(ts["o"])) == want, f"{self.KIND}: o must be {want}")
        for r in ("stats", "max", "sum_exp"):
            if r in ts:
                _need(list(_dims(ts[r])) == [B, H, Sq, 1], f"{self.KIND}: {r} must be "
                      f"[{B}, {H}, {Sq}, 1]")
                _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} type")
        if node.attrs.get("generate_stats"):
            _need("stats" in ts, f"{self.KIND}: generate_stats without a stats tensor")
        if "rng_dump" in ts:
            _need(node.attrs.get("dropout_probability"), f"{self.KIND}: rng_dump without dropout")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["q"].dtype)]))

        skv = self.kv_dims(node, ts)[0][2]

        def fn(env):
            P = self.params(node, ts, env, cdt)
            tk = dict(ts, __skv__=skv)
            o, stats, mx, se = ksdpa.sdpa_fwd(self.get(env, ts, "q", cdt),
                                              self.get(env, tk, "k", cdt),
                                              self.get(env, tk, "v", cdt), P, cdt)
            self.put(env, ts, "o", o)
            for r, val in (("stats", stats), ("max", mx), ("sum_exp", se)):
                if r in ts:
                    self.put(env, ts, r, val)
            for r in ("amax_s", "amax_o"):
                if r in ts:
                    store(env, ts[r], np.full((1,), P.extra[r]))
            if "rng_dump" in ts:
                # the keep mask of every (b, h, i, j) the dump addresses: a broadcast (extent 1)
                # dimension receives index 0 of that dimension
                _, H, Sq, _ = o.shape
                db, dh, di, dj = _dims(ts["rng_dump"])
                _, prob, seed, off = P.dropout
                z = np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, skv, prob)[:di, :dj]
                                        for h in range(dh)]) for b in range(db)])
                store(env, ts["rng_dump"], z.astype(cdt))
        return NodePlan(node, *self.io_uids(node, graph), fn)


class SdpaBwdBuilder(_SdpaBase):
    OP = catalog.by_table("SdpaBackwardAttributes")

    def extra_checks(self, node, ts):
        B, H, Sq, _ = _dims(ts["q"])
        want_o = [B, H, Sq, _dims(ts["v"])[3]]
        for r in ("o", "do"):
            _need(list(_dims(ts[r])) == want_o, f"{self.KIND}: {r} must be {want_o}")
        _need(list(_dims(ts["stats"])) == [B, H, Sq, 1], f"{self.KIND}: stats must be "
              f"[{B}, {H}, {Sq}, 1]")
        _need(dtype_name(ts["stats"].dtype) in FLOATS, f"{self.KIND}: stats type")
        for g, x in (("dq", "q"), ("dk", "k"), ("dv", "v")):
            _need(_dims(ts[g]) == _dims(ts[x]), f"{self.KIND}: {g} shape differs from {x}")
        _need(dtype_name(ts["q"].dtype) not in F8,
              f"{self.KIND}: FP8 data (hipDNN's SdpaBackwardAttributes has no fp8 descale / "
              f"scale / amax roles)")

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["q"].dtype)]))
        dbs = _dims(ts["dbias"]) if "dbias" in ts else None

        def fn(env):
            P = self.params(node, ts, env, cdt)
            g = [self.get(env, ts, r, cdt) for r in ("q", "k", "v", "o", "do", "stats")]
            dq, dk, dv, dbias = ksdpa.sdpa_bwd(*g, P, cdt, dbs)
            self.put(env, ts, "dq", dq)
            self.put(env, ts, "dk", dk)
            self.put(env, ts, "dv", dv)
            if dbias is not None:
                store(env, ts["dbias"], dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


BUILDERS = [SdpaFwdBuilder, SdpaBwdBuilder]
