"""Engine selection of a ``Graph`` beyond the heuristic order (cudnn-frontend pygraph's API):
heuristic modes, behaviour-note filters, deselected engines, and the timed execute autotuning
(autotune.py) uses (docs/frontend.md).

* ``heur_mode.A`` — the backend's default policy order (the autotune cache
  ``SelectionHeuristic::Config``, then ``SelectionHeuristic::StaticOrdering``);
  ``heur_mode.B`` — every loaded heuristic-plugin policy first (enumeration order), then A's;
  ``heur_mode.FALLBACK`` — ``SelectionHeuristic::StaticOrdering`` only (no cache, no plugins).
  All three set ENGINEHEUR_MODE = FALLBACK (the only backend mode) plus POLICY_ORDER_EXT; the
  first mode given wins (``create_execution_plans([heur_mode.B, heur_mode.FALLBACK])``).
* ``select_behavior_notes(notes)`` keeps the engine configs whose behaviour notes include every
  note given; ``deselect_behavior_notes(notes)`` drops configs that have any of them;
  ``deselect_engines(names_or_ids)`` drops engines.  The filters apply at
  ``create_execution_plans``, before plans are built.
"""
from __future__ import annotations

import enum

from ..._generated.enums import AttributeName as A
from ..._generated.enums import AttributeType as T
from ..._generated.enums import BehaviorNote
from ..._generated.enums import DescriptorType as D
from ...errors import BadParamError
from ._types import GraphNotSupportedError

POLICY_CONFIG = "SelectionHeuristic::Config"
POLICY_STATIC = "SelectionHeuristic::StaticOrdering"


class HeurMode(enum.IntEnum):
    """cudnn-frontend's heuristic modes (pygraph ``heur_mode``), mapped onto hipDNN's policies."""
    A = 0
    B = 1
    FALLBACK = 2


def _fnv(name: str) -> int:
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & ((1 << 64) - 1)
    return h - (1 << 64) if h >= (1 << 63) else h


def _note(v):
    if isinstance(v, str):
        key = v if v.startswith("HIPDNN_BEHAVIOR_NOTE_") else "HIPDNN_BEHAVIOR_NOTE_" + v.upper()
        try:
            return BehaviorNote[key]
        except KeyError:
            raise BadParamError(f"unknown behaviour note {v!r}") from None
    try:
        return BehaviorNote(int(v))
    except (ValueError, TypeError):
        raise BadParamError(f"unknown behaviour note {v!r}") from None


class SelectionMixin:
    """Mixin of :class:`Graph`."""

    # ------------------------------------------------------------------ filters
    def select_behavior_notes(self, notes):
        self._sel_notes = [_note(n) for n in notes]
        return self

    def deselect_behavior_notes(self, notes):
        self._desel_notes = [_note(n) for n in notes]
        return self

    def deselect_engines(self, engines):
        out = []
        for e in engines:
            if isinstance(e, str):
                out.append(e)
            else:
                try:
                    out.append(int(e))
                except (TypeError, ValueError):
                    raise BadParamError(f"deselect_engines: {e!r} is neither a name nor an id") from None
        self._desel_engines = out
        return self

    def deselect_workspace_greater_than(self, limit: int):
        """Drop engine configurations whose workspace (ENGINECFG_WORKSPACE_SIZE) exceeds
        ``limit`` bytes (cudnn-frontend pygraph's filter)."""
        try:
            self._ws_limit = int(limit)
        except (TypeError, ValueError):
            raise BadParamError(f"deselect_workspace_greater_than: {limit!r} is not a byte count") from None
        return self

    def get_execution_plan_count(self) -> int:
        return len(getattr(self, "_plans", []) or [])

    def get_behavior_notes(self) -> list:
        """Behaviour notes of the engine of the active plan."""
        if self.engine_id is None:
            raise BadParamError("no execution plan: call create_execution_plans() first")
        return self.get_behavior_notes_for_engine(self.engine_id)

    # ------------------------------------------------------------------ used by plans.py
    def _policy_order_for(self, modes):
        """POLICY_ORDER_EXT for the requested heuristic modes (None: leave the attribute unset)."""
        if not modes:
            return None
        if not isinstance(modes, (list, tuple)):
            modes = [modes]
        try:
            mode = HeurMode(int(modes[0]))
        except (ValueError, TypeError):
            raise BadParamError(f"unknown heuristic mode {modes[0]!r} (heur_mode.A, .B or "
                                ".FALLBACK)") from None
        if mode == HeurMode.A:
            return None
        if mode == HeurMode.FALLBACK:
            return [_fnv(POLICY_STATIC)]
        plugin = [pid for pid, name in self._loaded_policies()
                  if name not in (POLICY_CONFIG, POLICY_STATIC)]
        return plugin + [_fnv(POLICY_CONFIG), _fnv(POLICY_STATIC)]

    def _loaded_policies(self):
        a, h = self.api, self.handle
        if h is None:
            return []
        ffi = a.ffi
        n = ffi.new("size_t*")
        if a.lib.hipdnnGetHeuristicPolicyCount_ext(h.raw, n) != 0:
            return []
        out = []
        for i in range(n[0]):
            pid = ffi.new("int64_t*")
            L = [ffi.new("size_t*") for _ in range(4)]
            if a.lib.hipdnnGetHeuristicPolicyInfo_ext(h.raw, i, pid, ffi.NULL, L[0], ffi.NULL, L[1],
                                                      ffi.NULL, L[2], ffi.NULL, L[3]) != 0:
                continue
            bufs = [ffi.new("char[]", x[0]) for x in L]
            if a.lib.hipdnnGetHeuristicPolicyInfo_ext(h.raw, i, pid, bufs[0], L[0], bufs[1], L[1],
                                                      bufs[2], L[2], bufs[3], L[3]) != 0:
                continue
            out.append((int(pid[0]), ffi.string(bufs[0]).decode()))
        return out

    def _filter_configs(self, cfgs, ids):
        """Apply the behaviour-note and engine filters; destroys the configs it drops."""
        sel = getattr(self, "_sel_notes", None) or []
        desel = getattr(self, "_desel_notes", None) or []
        engines = getattr(self, "_desel_engines", None) or []
        ws_limit = getattr(self, "_ws_limit", None)
        if not (sel or desel or engines or ws_limit is not None):
            return cfgs, ids
        keep_c, keep_i, why = [], [], []
        for cfg, eid in zip(cfgs, ids):
            name = self._engine_name_of(eid)
            if eid in engines or (name is not None and name in engines):
                why.append(f"{name or eid}: deselected")
                self.api.destroy(cfg)
                continue
            if ws_limit is not None:
                ws = self.api.try_get(cfg, A.HIPDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, T.HIPDNN_TYPE_INT64)
                if ws and int(ws[0]) > ws_limit:
                    why.append(f"{name or eid}: workspace {int(ws[0])} > {ws_limit} bytes")
                    self.api.destroy(cfg)
                    continue
            notes = set(self.get_behavior_notes_for_engine(eid)) if (sel or desel) else set()
            missing = [n.name for n in sel if n not in notes]
            banned = [n.name for n in desel if n in notes]
            if missing or banned:
                why.append(f"{name or eid}: " + ("lacks " + ", ".join(missing) if missing else
                                                 "has " + ", ".join(banned)))
                self.api.destroy(cfg)
                continue
            keep_c.append(cfg)
            keep_i.append(eid)
        if not keep_c:
            raise GraphNotSupportedError("No engine configurations available for the graph after "
                                         "the engine/behaviour-note/workspace filters (" +
                                         "; ".join(why) + ").")
        return keep_c, keep_i

    # ------------------------------------------------------------------ autotune (autotune.py)
    def _timed_execute(self, variant_pack, workspace) -> float:
        a = self.api
        pc = a.create(D.HIPDNN_BACKEND_PROFILING_CONTROL_EXT)
        try:
            a.set(pc, A.HIPDNN_ATTR_PROFILING_HANDLE_EXT, T.HIPDNN_TYPE_HANDLE, [self.handle.raw])
            a.set(pc, A.HIPDNN_ATTR_PROFILING_START_EXT, T.HIPDNN_TYPE_BOOLEAN, [True])
            self.execute(variant_pack, workspace)
            a.set(pc, A.HIPDNN_ATTR_PROFILING_STOP_EXT, T.HIPDNN_TYPE_BOOLEAN, [True])
            a.finalize(pc, "finalize profiling control")
            return float(a.get(pc, A.HIPDNN_ATTR_PROFILING_ELAPSED_MS_EXT, T.HIPDNN_TYPE_FLOAT)[0])
        finally:
            a.destroy(pc)

    def _write_ranking(self, ids):
        a = self.api
        ffi = a.ffi
        arr = ffi.new("int64_t[]", ids)
        oc = ffi.new("hipdnnAutotuneCacheWriteOutcome_ext_t*")
        a.check(a.lib.hipdnnBackendWriteEngineRankingResults_ext(self.handle.raw, self._gdesc, arr,
                                                                 len(ids), oc),
                "hipdnnBackendWriteEngineRankingResults_ext")
        return int(oc[0])
