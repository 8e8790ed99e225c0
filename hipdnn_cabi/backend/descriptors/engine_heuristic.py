"""HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR (spec §1.6).

Finalize asks the plugins which engines apply to the graph, then orders them with the first
heuristic policy that succeeds.  Built-in policies: ``SelectionHeuristic::Config`` (JSON rules;
not implemented here, so it always declines) and ``SelectionHeuristic::StaticOrdering``.
Policy ids are FNV-1a-64 hashes of the policy names (our choice; the real hash is unconfirmed).
"""
from __future__ import annotations

import os

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType
from ...errors import (BadParamError, InternalError, NotFinalizedError, NotSupportedError,
                       NullPointerError)
from .. import attrs, registry
from .base import Descriptor, getter, setter

GRAPH_KINDS = (DescriptorType.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,)
CFG_TYPE = DescriptorType.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR
FALLBACK = 0

POLICY_CONFIG = "SelectionHeuristic::Config"
POLICY_STATIC = "SelectionHeuristic::StaticOrdering"


def _fnv(s):
    from ...plugins.loader import fnv1a64
    return fnv1a64(s)


def policy_ids():
    return {_fnv(POLICY_CONFIG): POLICY_CONFIG, _fnv(POLICY_STATIC): POLICY_STATIC}


def parse_policy_env(text: str) -> list[int]:
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        try:
            out.append(int(tok, 10))
        except ValueError:
            out.append(_fnv(tok))
    return out


# Reference engines rank after every other engine (after MIOPEN_ENGINE_DETERMINISTIC too): they are
# the fallback that makes a graph run anywhere, never the fast path (see docs/plugins.md).
REFERENCE_ENGINES = ("HIPDNN_CABI_CPU_REFERENCE_ENGINE",)


def static_ordering(candidates: list[int], names) -> list[int] | None:
    """MIOPEN_ENGINE first, the others in candidate order, MIOPEN_ENGINE_DETERMINISTIC last, our
    reference engines after that; or the HIPDNN_HEUR_FALLBACK_ENGINE_ORDER list (names, 0x-hex or
    decimal ids) when set."""
    env = os.environ.get("HIPDNN_HEUR_FALLBACK_ENGINE_ORDER")
    if env and env.strip():
        out = []
        for tok in env.split(","):
            tok = tok.strip()
            if not tok:
                continue
            want = None
            try:
                want = int(tok, 16) if tok.lower().startswith("0x") else int(tok, 10)
                if want >= 1 << 63:
                    want -= 1 << 64
            except ValueError:
                pass
            for eid in candidates:
                if eid in out:
                    continue
                if (want is not None and eid == want) or names(eid) == tok:
                    out.append(eid)
        return out or None
    first = [e for e in candidates if names(e) == "MIOPEN_ENGINE"]
    last = [e for e in candidates if names(e) == "MIOPEN_ENGINE_DETERMINISTIC"]
    reference = [e for e in candidates if names(e) in REFERENCE_ENGINES]
    mid = [e for e in candidates if e not in first and e not in last and e not in reference]
    return first + mid + last + reference


class EngineHeuristicDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR
    NAME = "EngineHeuristicDescriptor"
    GET_BEFORE_FINALIZE = NotFinalizedError

    def __init__(self):
        super().__init__()
        self.graph = None
        self.mode = None
        self.find_first = False
        self.policy_order = None      # attribute value (None = unset)
        self.resolved_policies: list[int] = []
        self.results: list[int] = []

    @setter(A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)
    def _set_graph(self, ctx, atype, count, arr, nbytes):
        self.graph = attrs.set_descriptor(ctx, atype, count, arr, nbytes, GRAPH_KINDS)

    @setter(A.HIPDNN_ATTR_ENGINEHEUR_MODE)
    def _set_mode(self, ctx, atype, count, arr, nbytes):
        v = attrs.set_enum(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_HEUR_MODE)
        if v != FALLBACK:
            raise NotSupportedError(f"{ctx}: heuristic mode {v} is not supported")
        self.mode = v

    @setter(A.HIPDNN_ATTR_ENGINEHEUR_FIND_FIRST_EXT)
    def _set_ff(self, ctx, atype, count, arr, nbytes):
        self.find_first = attrs.set_bool(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT)
    def _set_policy(self, ctx, atype, count, arr, nbytes):
        self.policy_order = list(attrs.set_int64_vector(ctx, atype, count, arr, nbytes,
                                                        allow_empty=True))

    def _finalize(self):
        ctx = "EngineHeuristicDescriptor::finalize() failed"
        if self.graph is None:
            raise BadParamError(f"{ctx}: operation graph not set")
        if self.mode is None:
            raise BadParamError(f"{ctx}: heuristic mode not set")
        from .engine import handle_plugins
        hp = handle_plugins(self.graph)
        cands = hp.applicable(self.graph, self.find_first)
        env = os.environ.get("HIPDNN_HEUR_POLICY_ORDER")
        if env is not None and env.strip():
            order = parse_policy_env(env)
        elif self.policy_order is not None:
            order = list(self.policy_order)
        else:
            order = [_fnv(POLICY_CONFIG), _fnv(POLICY_STATIC)]
        self.resolved_policies = order
        if not cands:
            self.results = []
            return
        if self.find_first:
            self.results = cands
            return
        from ...plugins.host import engine_name

        def name_of(eid):
            r = hp.owner(eid)
            return engine_name(r[0] if r else None, eid)

        known = policy_ids()
        for pid in order:
            name = known.get(pid)
            if name == POLICY_STATIC:
                res = static_ordering(cands, name_of)
                if res:
                    self.results = res
                    return
            # POLICY_CONFIG (no HIPDNN_HEUR_CONFIG_PATH rules engine) and unknown ids decline
        raise InternalError(f"{ctx}: No heuristic policy succeeded.")

    @getter(A.HIPDNN_ATTR_ENGINEHEUR_RESULTS)
    def _get_results(self, ctx, atype, req, cnt, arr):
        attrs._type(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        n = len(self.results)
        if req == 0:
            attrs._size_query(ctx, cnt, n)
            return
        if not arr or not cnt:
            raise NullPointerError(f"{ctx}: arrayOfElements/elementCount is nullptr")
        if req < 0:
            raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
        from .engine import EngineDescriptor
        k = min(req, n)
        ids = attrs.runtime.ffi.cast("uint64_t*", arr)
        cfgs = []
        for i in range(k):
            obj = registry.resolve(int(ids[i])) if ids[i] else None
            if obj is None:
                raise NullPointerError(f"{ctx}: result descriptor {i} is nullptr or invalid")
            if getattr(obj, "DESCRIPTOR_TYPE", None) != CFG_TYPE:
                raise BadParamError("Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch.")
            cfgs.append(obj)
        for i, cfg in enumerate(cfgs):
            if cfg.finalized:
                raise BadParamError(f"{ctx}: result descriptor {i} is already finalized")
            cfg.set_engine(EngineDescriptor.prebuilt(self.graph, self.results[i]))
        cnt[0] = k

    @getter(A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)
    def _get_graph(self, ctx, atype, req, cnt, arr):
        attrs.get_descriptor_one(ctx, atype, req, cnt, arr, self.graph)

    @getter(A.HIPDNN_ATTR_ENGINEHEUR_MODE)
    def _get_mode(self, ctx, atype, req, cnt, arr):
        attrs.get_exact_one(ctx, atype, T.HIPDNN_TYPE_HEUR_MODE, req, cnt, arr, attrs.pack_i32(self.mode))

    @getter(A.HIPDNN_ATTR_ENGINEHEUR_FIND_FIRST_EXT)
    def _get_ff(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.find_first)

    @getter(A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT)
    def _get_policy(self, ctx, atype, req, cnt, arr):
        attrs._type(ctx, atype, T.HIPDNN_TYPE_INT64)
        if not cnt:
            raise NullPointerError(f"{ctx}: elementCount is nullptr")
        if req < 0:
            raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
        attrs.get_int64_vector(ctx, atype, req, cnt, arr, self.resolved_policies)
