"""HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR (spec §1.6).

Finalize asks the plugins which engines apply to the graph, then orders them with the first
heuristic policy that succeeds.  Built-in policies: ``SelectionHeuristic::Config`` (the exact-match
autotune ranking cache, :mod:`..autotune_cache`, then the rules of HIPDNN_HEUR_CONFIG_PATH,
:mod:`..autotune_config`; with neither it declines) and ``SelectionHeuristic::StaticOrdering``;
every other id names a policy of a loaded heuristic plugin (:mod:`hipdnn_cabi.backend.plugins.heuristics`).
Policy ids are the FNV-1a-64 hashes of the policy names (hipDNN's policyNameToId).

A policy may give an engine config per engine (a plugin policy's GetEngineConfig, the knobs of the
configuration file's rule): RESULTS puts its knob settings on the engine's ENGINECFG, and an
engine whose workspace under that config exceeds the config's ``global.workspace_size_limit`` is
left out of the results.
"""
from __future__ import annotations

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType, Severity
from ...errors import (BadParamError, HipdnnError, InternalError, NotFinalizedError,
                       NotSupportedError, NullPointerError)
from .. import attrs, autotune_cache, autotune_config, env, graph_fb, log, registry, runtime
from ..plugins.heuristics import device_properties_blob
from ..plugins.host import ConstData, describe_declines, graph_const_data
from ..plugins.loader import fnv1a64
from .base import Descriptor, getter, setter
from .engine import EngineDescriptor, handle_plugins
from .engine_config import serialize_engine_config
from .knob_setting import engine_config_knobs

GRAPH_KINDS = (DescriptorType.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,)
CFG_TYPE = DescriptorType.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR
FALLBACK = 0

POLICY_CONFIG = "SelectionHeuristic::Config"        # also in plugins/heuristics.py BUILTIN_POLICIES
POLICY_STATIC = "SelectionHeuristic::StaticOrdering"


def _env(name):
    return env.get(name)


def _info(msg):
    if log.enabled(Severity.HIPDNN_SEV_INFO):
        log.log(Severity.HIPDNN_SEV_INFO, msg)


def _cached_order(graph, cands, name_of):
    """The cached autotune ranking for this graph and device: its still-applicable engines first,
    in the cached order, then the other candidates in StaticOrdering order; None without one."""
    try:
        ranked = autotune_cache.lookup(graph)
    except Exception as e:  # noqa: BLE001 - a broken cache never breaks the heuristics
        log.log(Severity.HIPDNN_SEV_WARN, f"Autotune cache lookup failed: {e}")
        return None
    if not ranked:
        return None
    first = [e for e in ranked if e in cands]
    if not first:
        return None
    rest = static_ordering([e for e in cands if e not in first], name_of) or []
    return first + [e for e in rest if e not in first]


def _engine_knob_kinds(graph, eid) -> dict | None:
    """{knob id: value kind} of an engine's knobs for the graph (None when unknown)."""
    try:
        return {k.knob_id: k.default[0] for k in EngineDescriptor.prebuilt(graph, eid).details()[0]}
    except Exception:  # noqa: BLE001 - the engine's own finalize reports its errors
        return None


def _config_rule(graph, cands, name_of):
    """The HIPDNN_HEUR_CONFIG_PATH rule that matches the graph and names a candidate, or None
    (every other outcome is logged: a warning for an unusable file, info otherwise)."""
    rules, path = autotune_config.load_from_env()
    if not rules:
        return None
    try:
        gdict = graph_fb.read(graph.serialized(), "Graph")
        rule = autotune_config.select(rules, gdict)
    except Exception as e:  # noqa: BLE001 - a graph the matcher cannot read: no rule applies
        log.log(Severity.HIPDNN_SEV_WARN, f"SelectionHeuristic::Config: cannot match the graph "
                f"against {path}: {type(e).__name__}: {e}")
        return None
    if rule is None:
        _info(f"SelectionHeuristic::Config: no rule of {path} matches the graph")
        return None
    if rule.engine_id not in cands:
        _info(f"SelectionHeuristic::Config: the rule of {path} names engine {rule.engine_name}, "
              f"which is not a candidate for the graph")
        return None
    kinds = _engine_knob_kinds(graph, rule.engine_id) if rule.knobs else None
    if kinds is not None:
        kinds = {**GLOBAL_KNOB_KINDS, **kinds}   # hipDNN's global knobs: honoured here too
        bad = [k for k in rule.knobs if kinds.get(k[0]) != k[1]]
        for kid, kind, _ in bad:
            log.log(Severity.HIPDNN_SEV_WARN, f"SelectionHeuristic::Config: engine "
                    f"{name_of(rule.engine_id)} has no {autotune_config.KNOB_TYPE_NAMES[kind]} "
                    f"knob {kid}; the setting of {path} is left out")
        rule.knobs = [k for k in rule.knobs if k not in bad]
    return rule


def config_policy(graph, cands, name_of):
    """``SelectionHeuristic::Config``: (order, {engine id: knob settings}) or (None, {}).  The
    exact-match cache decides the order when it has the graph (hipDNN's precedence: a cache hit
    preempts a matching file rule); otherwise a matching rule of HIPDNN_HEUR_CONFIG_PATH puts its
    engine first, the other candidates after it in StaticOrdering order.  The rule's knobs are the
    config of its engine wherever that lands."""
    rule = _config_rule(graph, cands, name_of)
    order = _cached_order(graph, cands, name_of)
    if order is None and rule is not None:
        rest = static_ordering([e for e in cands if e != rule.engine_id], name_of) or []
        order = [rule.engine_id] + [e for e in rest if e != rule.engine_id]
        _info(f"SelectionHeuristic::Config: {name_of(rule.engine_id)} first (rule of "
              f"{rule.op}" + (f", {len(rule.knobs)} knob(s))" if rule.knobs else ")"))
    if order is None:
        return None, {}
    configs = {rule.engine_id: list(rule.knobs)} if rule is not None and rule.knobs else {}
    return order, configs


def _workspace(graph, eid, knobs) -> int | None:
    """The engine's workspace for the graph under a config with ``knobs`` (None when the plugin
    cannot say)."""
    try:
        plugin, ph = handle_plugins(graph).require(eid)
        cfg = ConstData(serialize_engine_config(eid, knobs))
        out = runtime.ffi.new("size_t*")
        plugin.call("get workspace size", "hipdnnEnginePluginGetWorkspaceSize", ph, cfg.c,
                    graph_const_data(graph).c, out)
        return int(out[0])
    except HipdnnError:
        return None


WORKSPACE_LIMIT_KNOB = "global.workspace_size_limit"
# hipDNN's global knobs (its plugin SDK's GlobalKnobDefines.hpp) and their value kind (1: int)
GLOBAL_KNOB_KINDS = {"global.benchmarking": 1, WORKSPACE_LIMIT_KNOB: 1}


def within_workspace_limits(graph, ids, configs, name_of) -> list:
    """``ids`` without the engines whose workspace under their policy config exceeds that
    config's global.workspace_size_limit."""
    out = []
    for eid in ids:
        limit = next((v for k, kind, v in configs.get(eid, ()) if k == WORKSPACE_LIMIT_KNOB
                      and kind == 1), None)
        if limit is not None:
            ws = _workspace(graph, eid, configs[eid])
            if ws is not None and ws > limit:
                _info(f"Heuristics: {name_of(eid)} needs {ws} bytes of workspace, more than its "
                      f"{WORKSPACE_LIMIT_KNOB} {limit}; left out")
                continue
        out.append(eid)
    return out


def _fnv(s):
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
    order = _env("HIPDNN_HEUR_FALLBACK_ENGINE_ORDER")
    if order and order.strip():
        out = []
        for tok in order.split(","):
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
        self.configs: dict = {}       # engine id -> knob settings of the deciding policy
        self.policy_used = None

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
        hp = handle_plugins(self.graph)
        cands = hp.applicable(self.graph, self.find_first)
        policy_env = _env("HIPDNN_HEUR_POLICY_ORDER")
        if policy_env is not None and policy_env.strip():
            order = parse_policy_env(policy_env)
        elif self.policy_order is not None:
            order = list(self.policy_order)
        else:
            order = [_fnv(POLICY_CONFIG), _fnv(POLICY_STATIC)]
        self.resolved_policies = order
        self.configs = {}
        declined = describe_declines(getattr(self.graph, "declines", ()))
        if not cands:
            self.results = []
            # hipDNN's answer stays SUCCESS with no results; the reasons are kept for
            # hipdnnGetLastErrorString (the frontend reads it after "no engine configurations")
            msg = "No engine accepted the operation graph" + (f": {declined}" if declined else
                                                              " (no reasons given)")
            _info(f"Heuristics: {msg}")
            if declined:
                runtime.set_last_error(msg)
            return
        if declined:
            accepted = f"graph accepted by {self._names(hp, cands)}; {declined}"
            _info(f"Heuristics: {accepted}")
            # kept for hipdnnGetLastErrorString too (status SUCCESS): a frontend that finds no
            # accepting engine for its buffers' memory names these reasons
            runtime.set_last_error(f"Heuristics: {accepted}")
        if self.find_first:
            self.results = cands
            return
        name_of = hp.engine_name
        known = policy_ids()
        hh = getattr(hp, "heuristics", None)
        props_done: set = set()
        device_blob = None
        for pid in order:
            name = known.get(pid)
            if name == POLICY_STATIC:
                res = static_ordering(cands, name_of)
                if res:
                    self._decided(pid, name, res)
                    return
            elif name == POLICY_CONFIG:
                # the exact-match autotune cache, then the rules of HIPDNN_HEUR_CONFIG_PATH
                res, cfgs = config_policy(self.graph, cands, name_of)
                if res:
                    res = within_workspace_limits(self.graph, res, cfgs, name_of)
                if res:
                    self.configs = cfgs
                    self._decided(pid, name, res)
                    return
            elif hh is not None and hh.owner(pid) is not None:
                pname = hh.owner(pid)[0].policies[pid]
                if device_blob is None:
                    device_blob = device_properties_blob(self.graph.handle)
                try:
                    out = hh.run_policy(pid, self.graph.serialized(), cands, device_blob,
                                        _env("HIPDNN_HEUR_RANKING_METRIC") or None, props_done)
                except HipdnnError as e:
                    log.log(Severity.HIPDNN_SEV_ERROR,
                            f"Heuristic policy '{pname}' failed and is skipped: {e.message}")
                    continue
                except Exception as e:  # noqa: BLE001 - a misbehaving policy never breaks finalize
                    log.log(Severity.HIPDNN_SEV_ERROR, f"Heuristic policy '{pname}' failed and is "
                            f"skipped: {type(e).__name__}: {e}")
                    continue
                if out is None:
                    _info(f"Heuristic policy '{pname}' declined")
                    continue
                ids, raw_cfgs = out
                cfgs = self._policy_knobs(pname, raw_cfgs)
                ids = within_workspace_limits(self.graph, ids, cfgs, name_of)
                if not ids:
                    _info(f"Heuristic policy '{pname}': every engine it ordered exceeds its "
                          f"workspace limit; skipped")
                    continue
                self.configs = cfgs
                self._decided(pid, pname, ids)
                return
            else:
                _info(f"Heuristic policy {pid} is not loaded; skipped")
        raise InternalError(f"{ctx}: No heuristic policy succeeded.")

    @staticmethod
    def _policy_knobs(pname, raw_cfgs) -> dict:
        """{engine id: knob settings} of a plugin policy's engine configs; a malformed config is
        logged and left out (the engine keeps its place in the order)."""
        out = {}
        for eid, raw in (raw_cfgs or {}).items():
            got = engine_config_knobs(bytes(raw), eid)
            if isinstance(got, str):
                log.log(Severity.HIPDNN_SEV_WARN, f"The engine config that heuristic policy "
                        f"'{pname}' gave for engine {eid} is ignored (the engine keeps its place): "
                        f"{got}")
                continue
            if got:
                out[eid] = got
        return out

    @staticmethod
    def _names(hp, ids):
        return ", ".join(hp.engine_name(eid) for eid in ids)

    def _decided(self, pid, name, ids):
        self.results = list(ids)
        self.policy_used = pid
        _info(f"Heuristic policy '{name}' ordered {len(ids)} engine(s)")

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
            # the deciding policy's engine config for the engine (its knob settings), or none
            cfg.apply_policy_config(self.configs.get(self.results[i]) or ())
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
