"""Scaled dot-product attention (SDPA): forward and backward."""
from __future__ import annotations

import itertools

import numpy as np

from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas.catalog import FB_NAMES

from ..kernels import philox as kphilox
from ..kernels import sdpa as ksdpa
from ..signature import BOOL, FLOATS, STRIDED, SignatureKey, dtype_name
from ._base import (NodeBuilder, NodePlan, _dims, _float_compute, _need, _np_compute, _scalar_ok,
                    _scalar_value, load, store)


_IDX = ("INT32", "INT64")
_RNG = ("seed", "offset")   # the dropout RNG's integer scalars


def _scalar_int(env, t):
    return int(np.asarray(env[t.uid]).reshape(-1)[0])


class _SdpaBase(NodeBuilder):
    # roles the engine does not implement (docs/cpu_reference.md): paged K/V, block masks, sink
    # tokens, fp8 descale/scale/amax tensors; a node that sets one is not applicable
    DECLINED = ("page_table_k", "page_table_v", "block_mask", "sink_token", "descale_q",
                "descale_k", "descale_v", "descale_s", "scale_s", "scale_o", "amax_s", "amax_o")
    DATA_IN = ()         # q, k, v (and o, do): one data type
    DATA_OUT = ()        # the mandatory outputs: that type or FLOAT
    FLOAT_SCALARS = ()   # 1-element float inputs (scale, dropout scales)
    INDEX = ()           # per-batch INT32/INT64 sequence lengths

    @classmethod
    def from_catalog(cls, op):
        super().from_catalog(op)
        cls.DATA_IN = op.roles_of(catalog.DATA)
        cls.DATA_OUT = tuple(r for r in cls.KEY_ROLES if r not in cls.DATA_IN)
        cls.FLOAT_SCALARS = tuple(r for r in cls.INPUTS if r in op.scalar_roles and r not in _RNG)
        cls.INDEX = tuple(r for r in cls.INPUTS if r in op.roles_of(catalog.INDEX))

    @classmethod
    def supported_keys(cls):
        for t in FLOATS:
            outs = tuple(sorted({t, "FLOAT"}))
            for combo in itertools.product(outs, repeat=len(cls.DATA_OUT)):
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, tuple((r, t) for r in cls.DATA_IN)
                                       + tuple(zip(cls.DATA_OUT, combo)), c, STRIDED)

    def check(self, node, graph):
        a = node.attrs
        ts = self.tensors(node, graph)
        for r in self.DECLINED:
            _need(a.get(r + "_tensor_uid") in (None, 0), f"{self.KIND}: {r} tensors are not "
                  f"applicable on the CPU reference engine")
        for r in self.DATA_IN + self.DATA_OUT:
            _need(len(ts[r].dims) == 4, f"{self.KIND}: {r} must be 4-d [B, H, S, D]")
        q, k, v = _dims(ts["q"]), _dims(ts["k"]), _dims(ts["v"])
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
        if a.get("padding_mask") or "seq_len_q" in ts:
            for r in ("seq_len_q", "seq_len_kv"):
                if r in ts:
                    setattr(P, r, np.asarray(env[ts[r].uid]).reshape(-1).astype(np.int64))
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
        return P


class SdpaFwdBuilder(_SdpaBase):
    OP = catalog.by_table("SdpaAttributes")

    def extra_checks(self, node, ts):
        B, H, Sq, _ = _dims(ts["q"])
        want = [B, H, Sq, _dims(ts["v"])[3]]
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

        def fn(env):
            P = self.params(node, ts, env, cdt)
            o, stats, mx, se = ksdpa.sdpa_fwd(load(env, ts["q"]), load(env, ts["k"]),
                                              load(env, ts["v"]), P, cdt)
            store(env, ts["o"], o)
            for r, val in (("stats", stats), ("max", mx), ("sum_exp", se)):
                if r in ts:
                    store(env, ts[r], val)
            if "rng_dump" in ts:
                B, H, Sq, _ = o.shape
                Skv = int(ts["k"].dims[2])
                _, prob, seed, off = P.dropout
                z = np.stack([np.stack([kphilox.keep_mask(seed, off, b, h, H, Sq, Skv, prob)
                                        for h in range(H)]) for b in range(B)])
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

    def build(self, node, graph):
        ts = self.tensors(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["q"].dtype)]))
        dbs = _dims(ts["dbias"]) if "dbias" in ts else None

        def fn(env):
            P = self.params(node, ts, env, cdt)
            dq, dk, dv, dbias = ksdpa.sdpa_bwd(
                load(env, ts["q"]), load(env, ts["k"]), load(env, ts["v"]), load(env, ts["o"]),
                load(env, ts["do"]), load(env, ts["stats"]), P, cdt, dbs)
            store(env, ts["dq"], dq)
            store(env, ts["dk"], dk)
            store(env, ts["dv"], dv)
            if dbias is not None:
                store(env, ts["dbias"], dbias)
        return NodePlan(node, *self.io_uids(node, graph), fn)


BUILDERS = [SdpaFwdBuilder, SdpaBwdBuilder]
