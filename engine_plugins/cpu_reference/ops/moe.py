"""MoE grouped matmul: forward (NONE / GATHER / SCATTER routing) and weight gradient.

Structural problems (ranks, shapes, parameters, routing tensors of the wrong shape or type)
make the node - and so the engine - not applicable.  Data dependent problems (offsets out of
range or decreasing, routed rows out of range) are found at execute and returned as
INVALID_VALUE with a message naming the entry.  The choices are in docs/operations.md
("Execution semantics").
"""
from __future__ import annotations

from hipdnn_cabi.plugin_sdk.errors import INVALID_VALUE, PluginError
from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas.catalog import FB_NAMES

from ..kernels import moe as kmoe
from ..signature import FLOATS, STRIDED, SignatureKey, dtype_name
from ._base import NodeBuilder, NodePlan, _dims, _float_compute, _need, _np_compute, load, store


def _routing_error(kind, e):
    return PluginError(INVALID_VALUE, f"{kind}: {e}")


class MoeGroupedMatmulBuilder(NodeBuilder):
    OP = catalog.by_table("MoeGroupedMatmulAttributes")
    TYPES = FLOATS + ("INT32",)

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        mode = FB_NAMES["MoeGroupedMatmulMode"].get(node.attrs.get("mode") or 0)
        _need(mode in (kmoe.NONE, kmoe.GATHER, kmoe.SCATTER), f"{self.KIND}: mode {mode}")
        tok, w, off, out = (_dims(ts[r]) for r in ("token", "weight", "first_token_offset", "output"))
        _need(len(tok) == 3 and tok[0] == 1, f"{self.KIND}: token must be [1, tokens, K]")
        _need(len(w) == 3 and w[0] >= 1, f"{self.KIND}: weight must be [experts, K, N]")
        _need(tok[2] == w[1], f"{self.KIND}: token K {tok[2]} != weight K {w[1]}")
        _need(len(off) == 3 and off[1:] == (1, 1) and off[0] % w[0] == 0 and off[0] >= 1,
              f"{self.KIND}: first_token_offset must be [batch * experts, 1, 1]")
        for r in self.OP.roles_of(catalog.INDEX):
            if r in ts:
                _need(dtype_name(ts[r].dtype) == "INT32", f"{self.KIND}: {r} must be INT32")
        top_k = int(node.attrs.get("top_k") or 0)
        rows = tok[1]
        if mode in (kmoe.GATHER, kmoe.SCATTER):
            _need("token_index" in ts, f"{self.KIND}: {mode} mode needs token_index")
            ti = _dims(ts["token_index"])
            _need(len(ti) == 3 and ti[0] == 1 and ti[2] == 1,
                  f"{self.KIND}: token_index must be [1, routed rows, 1]")
            if mode == kmoe.GATHER:
                rows = ti[1]
        if mode == kmoe.SCATTER:
            _need("token_ks" in ts and _dims(ts["token_ks"]) == _dims(ts["token_index"]),
                  f"{self.KIND}: SCATTER mode needs token_ks shaped like token_index")
            _need(0 < top_k <= w[0], f"{self.KIND}: SCATTER needs 0 < top_k <= experts")
            _need(_dims(ts["token_index"])[1] == tok[1],
                  f"{self.KIND}: SCATTER routes every token row (token_index rows == token rows)")
        _need(out == (1, rows, w[2]), f"{self.KIND}: output dims {out} != {(1, rows, w[2])}")
        for r in self.KEY_ROLES:
            _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} must be a float type")
        return ts, mode, top_k

    def signature(self, node, graph):
        ts, _, _ = self.check(node, graph)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype))
                                          for r in self.KEY_ROLES])

    @classmethod
    def supported_keys(cls):
        a, b, out = cls.KEY_ROLES
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, ((a, t), (b, t), (out, o)), c, STRIDED)

    def build(self, node, graph):
        ts, mode, top_k = self.check(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["token"].dtype)]))
        out = ts["output"]
        rows = _dims(out)[1]

        def fn(env):
            g = lambda r: load(env, ts[r]) if r in ts else None  # noqa: E731
            try:
                r = kmoe.forward(load(env, ts["token"]), load(env, ts["weight"]),
                                 g("first_token_offset"), rows, mode, g("token_index"),
                                 g("token_ks"), top_k, compute_dtype=cdt)
            except kmoe.RoutingError as e:
                raise _routing_error(self.KIND, e) from None
            store(env, out, r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


class MoeGroupedMatmulBwdBuilder(NodeBuilder):
    OP = catalog.by_table("MoeGroupedMatmulBwdAttributes")
    TYPES = FLOATS + ("INT32",)

    def check(self, node, graph):
        ts = self.tensors(node, graph)
        do, tok, off, dw = (_dims(ts[r]) for r in ("doutput", "token", "first_token_offset",
                                                    "dweight"))
        _need(len(tok) == 3 and tok[0] == 1, f"{self.KIND}: token must be [1, tokens, K]")
        _need(len(do) == 3 and do[:2] == tok[:2], f"{self.KIND}: doutput must be [1, tokens, N]")
        _need(len(dw) == 3 and dw[1:] == (tok[2], do[2]) and dw[0] >= 1,
              f"{self.KIND}: dweight must be [experts, K, N]")
        _need(off == (dw[0], 1, 1), f"{self.KIND}: first_token_offset must be [experts, 1, 1]")
        _need(dtype_name(ts["first_token_offset"].dtype) == "INT32",
              f"{self.KIND}: first_token_offset must be INT32")
        for r in self.KEY_ROLES:
            _need(dtype_name(ts[r].dtype) in FLOATS, f"{self.KIND}: {r} must be a float type")
        return ts

    def signature(self, node, graph):
        ts = self.check(node, graph)
        return self.key(node, graph, ts, [(r, dtype_name(ts[r].dtype))
                                          for r in self.KEY_ROLES])

    @classmethod
    def supported_keys(cls):
        a, b, out = cls.KEY_ROLES
        for t in FLOATS:
            for o in sorted({t, "FLOAT"}):
                for c in _float_compute(t):
                    yield SignatureKey(cls.KIND, ((a, t), (b, t), (out, o)), c, STRIDED)

    def build(self, node, graph):
        ts = self.check(node, graph)
        cdt = _np_compute(self.compute_name(node, [dtype_name(ts["token"].dtype)]))
        dw = ts["dweight"]
        E = _dims(dw)[0]

        def fn(env):
            try:
                r = kmoe.backward_weight(load(env, ts["doutput"]), load(env, ts["token"]),
                                         load(env, ts["first_token_offset"]), E, compute_dtype=cdt)
            except kmoe.RoutingError as e:
                raise _routing_error(self.KIND, e) from None
            store(env, dw, r)
        return NodePlan(node, *self.io_uids(node, graph), fn)


BUILDERS = [MoeGroupedMatmulBuilder, MoeGroupedMatmulBwdBuilder]
