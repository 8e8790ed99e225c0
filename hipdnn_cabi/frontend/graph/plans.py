"""Heuristics, engine configurations, knobs and execution plans of a ``Graph`` (spec §2.3–2.6, §2.8)."""
from __future__ import annotations

import numpy as np

from ..._generated.enums import AttributeName as A
from ..._generated.enums import AttributeType as T
from ..._generated.enums import BehaviorNote
from ..._generated.enums import DescriptorType as D
from ...errors import BadParamError, NotSupportedError
from ..handle import Handle, engine_memory_kind, engine_name_by_id, engines
from ._types import (
    DECLINE_MARK,
    NO_ENGINE_MSG,
    BuildPlanPolicy,
    EngineConfigInfo,
    GraphNotSupportedError,
    KnobInfo,
    decline_parts,
)


class PlansMixin:
    """Mixin of :class:`Graph`."""

    # ================================================================== plans (§2.3–2.6)
    def _release_plans(self):
        a = self.api
        self._xcache_clear()  # execution.py: the variant packs kept for the plans' executes
        for d in self._plans + self._cfgs:
            a.destroy(d)
        self._plans, self._cfgs, self._engine_ids, self._plan_ok = [], [], [], []
        self._active = None
        self.engine_id = None
        self._engine_name = None
        self._mem_plan, self._ws_sizes, self._mem_why = {}, {}, {}
        self._explicit_engine = False
        for d in getattr(self, "_knob_descs", ()):
            a.destroy(d)
        self._knob_descs = []

    def _need_graph(self):
        if self._gdesc is None:
            raise BadParamError("build_operation_graph() has not been called")

    def _engine_desc(self, engine_id):
        a = self.api
        e = a.create(D.HIPDNN_BACKEND_ENGINE_DESCRIPTOR)
        try:
            a.set(e, A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [self._gdesc])
            a.set(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64, [int(engine_id)])
            a.finalize(e, f"finalize engine {engine_id}")
        except BaseException:
            a.destroy(e)
            raise
        return e

    def _engine_desc_name(self, e):
        try:
            return self.api.get_string(e, A.HIPDNN_ATTR_ENGINE_NAME_EXT)
        except NotSupportedError:
            return None

    def _run_heuristic(self, modes=None):
        """§2.3: ENGINEHEUR (graph, FALLBACK[, POLICY_ORDER_EXT for heur_mode B/FALLBACK]) →
        finalized ENGINECFGs and their engine ids."""
        a = self.api
        order = self._policy_order_for(modes)
        heur = a.create(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
        cfgs, ids = [], []
        try:
            a.set(heur, A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                  [self._gdesc])
            a.set(heur, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, [0])
            if order is not None:
                a.set(heur, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, order)
            a.finalize(heur, "finalize engine heuristic")
            # the backend keeps why engines declined (hipdnnGetLastErrorString), also when others
            # accepted the graph: kept to name them when no accepting engine reaches the memory
            why = a.last_error()
            self._declines = why if DECLINE_MARK in why else ""
            count = a.get_count(heur, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
            if count <= 0:
                raise GraphNotSupportedError(f"{NO_ENGINE_MSG} {why}" if why else NO_ENGINE_MSG)
            cfgs = [a.create(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR) for _ in range(count)]
            arr = a.ffi.new("hipdnnBackendDescriptor_t[]", cfgs)
            n = a.ffi.new("int64_t*")
            a.check(a.lib.hipdnnBackendGetAttribute(heur, int(A.HIPDNN_ATTR_ENGINEHEUR_RESULTS),
                                                    int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR), count, n, arr),
                    "hipdnnBackendGetAttribute(ENGINEHEUR_RESULTS)")
            if n[0] <= 0:
                raise GraphNotSupportedError(NO_ENGINE_MSG)
            for extra in cfgs[n[0]:]:
                a.destroy(extra)
            cfgs = cfgs[: n[0]]
            for cfg in cfgs:
                a.finalize(cfg, "finalize engine config")
                ids.append(self._cfg_engine_id(cfg))
        except BaseException:
            for c in cfgs:
                a.destroy(c)
            raise
        finally:
            a.destroy(heur)
        return cfgs, ids

    def _cfg_engine_id(self, cfg) -> int:
        a = self.api
        e = a.get(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                  want_count=False)[0]
        try:
            return int(a.get(e, A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, T.HIPDNN_TYPE_INT64,
                             want_count=False)[0])
        finally:
            a.destroy(e)

    def create_execution_plans(self, modes=None):
        """Heuristics (``modes``: heur_mode A/B/FALLBACK, see selection.py) → one engine config
        and one (unfinalized) plan per applicable engine that passes the engine and behaviour-note
        filters."""
        self._need_graph()
        self._release_plans()
        a = self.api
        cfgs, ids = self._run_heuristic(modes)
        cfgs, ids = self._filter_configs(cfgs, ids)
        self._cfgs, self._engine_ids = cfgs, ids
        try:
            # active index: preferred name -> preferred id -> 0
            active = 0
            if self.preferred_engine_name:
                for i, eid in enumerate(self._engine_ids):
                    if self._engine_name_of(eid) == self.preferred_engine_name:
                        active = i
                        break
            elif self.preferred_engine_id is not None and self.preferred_engine_id in self._engine_ids:
                active = self._engine_ids.index(self.preferred_engine_id)
            elif self.select_engine_by_memory and self._device_stream():
                active = self._first_device_plan()
            self._active = active
            self._plans = [a.create(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) for _ in cfgs]
            self._plan_ok = [False] * len(cfgs)
        except BaseException:
            self._release_plans()
            raise
        return self

    # ---------------------------------------------------------------- device streams
    def _device_stream(self) -> int:
        """The handle's stream when it is a device stream (not the null stream), else 0."""
        h = self.handle
        if h is None or getattr(h, "_h", None) is None:
            return 0
        try:
            return h.get_stream()
        except Exception:  # noqa: BLE001 - a backend without streams: no preference
            return 0

    def _first_device_plan(self) -> int:
        """The first configuration, in heuristic order, of an engine that reaches device memory
        (a handle with a device stream runs there); GraphNotSupportedError naming the device
        engines that declined the graph when there is none."""
        for i, eid in enumerate(self._engine_ids):
            if engine_memory_kind(self._engine_name_of(eid)) == "device":
                return i
        accepted = ", ".join(str(self._engine_name_of(e) or e) for e in self._engine_ids)
        raise GraphNotSupportedError(
            f"{NO_ENGINE_MSG} The handle's stream 0x{self._device_stream():x} is a device stream, "
            f"but no device engine accepted the graph: {self._declined_by('device')}. "
            f"Accepted by {accepted} (host memory): set the handle's stream to 0, or "
            f"select_engine_by_memory = False, to run there")

    def _declined_by(self, kind) -> str:
        """Why the loaded engines that reach ``kind`` memory declined the graph (the backend's
        reasons from the last heuristic query), or that none is loaded."""
        parts = list(dict.fromkeys(decline_parts(getattr(self, "_declines", ""))))
        mine = [text for name, text in parts if name is None or engine_memory_kind(name) == kind]
        if mine:
            return "; ".join(mine)
        try:
            loaded = [e.name for e in engines(self.handle) if engine_memory_kind(e.name) == kind]
        except Exception:  # noqa: BLE001 - the listing is only for the message
            loaded = None
        if loaded == []:
            return f"no engine that reaches {kind} memory is loaded"
        return "; ".join(text for _, text in parts) or "(no reasons given)"

    def _engine_name_of(self, eid):
        """Engine name by id (hipdnnGetEngineNameById_ext, else ENGINE_NAME_EXT), cached."""
        if eid in self._engine_names:
            return self._engine_names[eid]
        name = engine_name_by_id(self.handle, eid) if self.handle is not None else None
        if name is None and self._gdesc is not None:
            try:
                ed = self._engine_desc(eid)
            except Exception:
                ed = None
            if ed is not None:
                try:
                    name = self._engine_desc_name(ed)
                finally:
                    self.api.destroy(ed)
        self._engine_names[eid] = name
        return name

    def check_support(self, handle=None):
        if not self._plans or self._active is None:
            raise GraphNotSupportedError(NO_ENGINE_MSG)
        return self

    def _build_plan(self, i):
        a = self.api
        a.set(self._plans[i], A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
              T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [self._cfgs[i]])
        a.finalize(self._plans[i], "finalize execution plan")
        self._workspace = a.get(self._plans[i], A.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                T.HIPDNN_TYPE_INT64, want_count=False)[0]
        self._ws_sizes[i] = int(self._workspace)
        self._plan_ok[i] = True

    def build_plans(self, policy: BuildPlanPolicy = BuildPlanPolicy.HEURISTICS_CHOICE):
        self.check_support()
        if policy == BuildPlanPolicy.ALL:
            first, last_err = None, None
            for i in range(len(self._plans)):
                try:
                    self._build_plan(i)
                    if first is None:
                        first = i
                except Exception as e:  # logged and skipped, like the C++ frontend
                    last_err = e
            if first is None:
                raise last_err
            self._active = first
            self._workspace = self._ws_sizes.get(first)
        else:
            self._build_plan(self._active)
        self.engine_id = self._engine_ids[self._active]
        self._engine_name = None
        return self

    def build(self, modes=None, handle: Handle | None = None):
        """build_operation_graph → create_execution_plans → check_support → build_plans."""
        self.build_operation_graph(handle)
        if self._from_bytes and self._active_plan() is not None:
            return self
        self.create_execution_plans(modes)
        self.check_support()
        self.build_plans()
        return self

    def _active_plan(self):
        if self._active is None or not self._plans or not self._plan_ok[self._active]:
            return None
        return self._plans[self._active]

    def _need_plan(self):
        p = self._active_plan()
        if p is None:
            raise BadParamError("no built execution plan: call build() (or build_plans()) first")
        return p

    def get_workspace_size(self) -> int:
        p = self._need_plan()
        return int(self.api.get(p, A.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, T.HIPDNN_TYPE_INT64,
                                want_count=False)[0])

    @property
    def engine_name(self) -> str | None:
        """Name of the engine of the active plan (the one ``execute`` runs)."""
        if self.engine_id is None:
            return None
        if self._engine_name is None:
            name = self._engine_name_of(self.engine_id)
            self._engine_name = name or f"0x{self.engine_id & (2**64 - 1):016x}"
        return self._engine_name

    def get_engine_ids(self) -> list[int]:
        """Ids of the applicable engines, in heuristic order (after create_execution_plans)."""
        return [e for e in self._engine_ids if e is not None]

    def set_preferred_engine_id_ext(self, engine_id: int):
        self.preferred_engine_id = int(engine_id)
        return self

    def set_preferred_engine_name_ext(self, name: str):
        self.preferred_engine_name = name
        return self

    def get_behavior_notes_for_engine(self, engine_id: int) -> list:
        """ENGINE_BEHAVIOR_NOTE of an engine for this graph (§2.8)."""
        self._need_graph()
        a = self.api
        e = self._engine_desc(engine_id)
        try:
            n = a.get_count(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE)
            if n <= 0:
                return []
            vals = a.get(e, A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_BEHAVIOR_NOTE, n)
            if len(vals) != n:
                raise BadParamError("behaviour-note count changed between the two calls")
            return [BehaviorNote(v) if v in BehaviorNote._value2member_map_ else int(v) for v in vals]
        finally:
            a.destroy(e)

    # ---------------------------------------------------------------- knobs and configs (§2.8)
    def get_knobs_for_engine(self, engine_id: int) -> list[KnobInfo]:
        """The knobs of an engine for this graph: engine descriptor, ENGINE_KNOB_INFO (count
        query, then fetch into new wrappers, all destroyed), and per knob the KNOB_INFO_*
        getters in the order of spec §2.8."""
        self._need_graph()
        a = self.api
        ffi = a.ffi
        e = self._engine_desc(engine_id)
        try:
            count = a.get_count(e, A.HIPDNN_ATTR_ENGINE_KNOB_INFO, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
            if count <= 0:
                return []
            arr = ffi.new("hipdnnBackendDescriptor_t[]", count)
            n = ffi.new("int64_t*")
            try:
                a.check(a.lib.hipdnnBackendGetAttribute(e, int(A.HIPDNN_ATTR_ENGINE_KNOB_INFO),
                                                        int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR), count, n,
                                                        arr), "hipdnnBackendGetAttribute(ENGINE_KNOB_INFO)")
                return [self._read_knob(arr[i]) for i in range(min(n[0], count))]
            finally:
                for i in range(count):       # the fetched wrappers, and any extra entries
                    if arr[i] != ffi.NULL:
                        a.destroy(arr[i])
        finally:
            a.destroy(e)

    def _read_knob(self, k) -> KnobInfo:
        a = self.api
        kid = a.get_string(k, A.HIPDNN_ATTR_KNOB_INFO_TYPE)
        desc = a.get_string(k, A.HIPDNN_ATTR_KNOB_INFO_DESCRIPTION)
        dep = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_DEPRECATED, T.HIPDNN_TYPE_BOOLEAN)
        vt = a.get(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE_TYPE, T.HIPDNN_TYPE_INT64)[0]
        lo = hi = stride = max_len = None
        valid = ()
        if vt == int(T.HIPDNN_TYPE_CHAR):
            kind = "string"
            default = a.get_string(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE)
            max_len = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_STRING_MAX_LENGTH, T.HIPDNN_TYPE_INT32)
            try:
                raw = a.get_bytes(k, A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_STRING)
                valid = tuple(x.decode("utf-8", "replace") for x in raw.split(b"\0") if x) if raw else ()
            except NotSupportedError:
                valid = ()
        else:
            vtype = T.HIPDNN_TYPE_INT64 if vt == int(T.HIPDNN_TYPE_INT64) else T.HIPDNN_TYPE_DOUBLE
            kind = "int" if vtype == T.HIPDNN_TYPE_INT64 else "float"
            default = a.get(k, A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE, vtype)[0]
            lo = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, vtype)
            hi = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, vtype)
            if kind == "int":
                stride = self._get_one(k, A.HIPDNN_ATTR_KNOB_INFO_STRIDE, T.HIPDNN_TYPE_INT64)
                valid = tuple(self._get_vec(k, A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_INT) or ())
        conv = int if kind == "int" else float if kind == "float" else (lambda v: v)
        return KnobInfo(kid, desc, kind, conv(default) if default is not None else None, bool(dep),
                        None if lo is None else conv(lo), None if hi is None else conv(hi),
                        None if stride is None else int(stride), valid,
                        None if max_len is None else int(max_len))

    def create_execution_plan_ext(self, engine_id: int, knobs=None):
        """One plan for ``engine_id`` with knob settings (§2.8): engine descriptor, ENGINECFG
        with ENGINECFG_ENGINE and, per setting, a finalized KNOB_CHOICE (KNOB_TYPE, KNOB_VALUE:
        int → INT64, float → DOUBLE, str → CHAR) set as ENGINECFG_KNOB_CHOICES; Finalize(cfg);
        an EXECUTION_PLAN.  It replaces the heuristic's plans and wins over the memory rule;
        call :meth:`build_plans` next.  ``knobs``: {knob id: value} or [(id, value)]."""
        self._need_graph()
        self._release_plans()
        cfg, plan, keep = self._engine_config(engine_id, knobs)
        self._knob_descs = keep
        self._cfgs, self._engine_ids, self._plans, self._plan_ok = [cfg], [int(engine_id)], [plan], [False]
        self._active = 0
        self._explicit_engine = True
        return self

    def create_execution_plan(self, engine_id: int, knobs=None):
        """cudnn-frontend pygraph's ``create_execution_plan(engine_id, knobs)``: appends a plan
        for ``engine_id`` with these knob settings to the graph's plans (the first one, after
        ``build_operation_graph``, is :meth:`create_execution_plan_ext`: an explicit engine);
        build it with :meth:`build_plans` or :meth:`build_plan_at_index`."""
        if not self._plans:
            return self.create_execution_plan_ext(engine_id, knobs)
        self._need_graph()
        cfg, plan, keep = self._engine_config(engine_id, knobs)
        self._knob_descs = list(getattr(self, "_knob_descs", ())) + keep
        self._cfgs.append(cfg)
        self._engine_ids.append(int(engine_id))
        self._plans.append(plan)
        self._plan_ok.append(False)
        return self

    def _engine_config(self, engine_id, knobs):
        """(finalized ENGINECFG, new EXECUTION_PLAN, descriptors to keep until the plans go) for
        ``engine_id`` with knob settings (§2.8)."""
        a = self.api
        cfg, keep = self._knob_config(engine_id, knobs)
        try:
            plan = a.create(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
        except BaseException:
            for d in keep:
                a.destroy(d)
            a.destroy(cfg)
            raise
        return cfg, plan, keep

    def _knob_config(self, engine_id, knobs):
        """A finalized ENGINECFG for ``engine_id`` with knob settings (§2.8): engine descriptor,
        ENGINECFG_ENGINE and, per setting, a finalized KNOB_CHOICE (int → INT64, float → DOUBLE,
        str → CHAR) set as ENGINECFG_KNOB_CHOICES; Finalize(cfg).  Returns (cfg, the engine and
        knob descriptors to destroy with it).  ``knobs``: {knob id: value} or [(id, value)]."""
        a = self.api
        items = list(knobs.items()) if isinstance(knobs, dict) else list(knobs or ())
        keep = []
        cfg = None
        try:
            e = self._engine_desc(engine_id)
            keep.append(e)
            cfg = a.create(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR)
            a.set(cfg, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [e])
            choices = []
            for kid, value in items:
                kc = a.create(D.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)
                keep.append(kc)
                a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, T.HIPDNN_TYPE_CHAR, str(kid))
                if isinstance(value, str):
                    a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_CHAR, value)
                elif isinstance(value, (bool, int, np.integer)):
                    a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_INT64, [int(value)])
                elif isinstance(value, (float, np.floating)):
                    a.set(kc, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, T.HIPDNN_TYPE_DOUBLE, [float(value)])
                else:
                    raise BadParamError(f"knob {kid!r}: value must be int, float or str, "
                                        f"got {type(value).__name__}")
                a.finalize(kc, f"finalize knob choice {kid}")
                choices.append(kc)
            if choices:
                a.set(cfg, A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, choices)
            a.finalize(cfg, "finalize engine config")
        except BaseException:
            for d in keep:
                a.destroy(d)
            a.destroy(cfg)
            raise
        return cfg, keep

    def get_knob_settings(self) -> dict:
        """{knob id: value} of the active plan's engine config (ENGINECFG_KNOB_CHOICES): the
        settings of create_execution_plan_ext, of the heuristic policy that chose the engine (an
        autotune configuration file's winner) or of an autotuned winner."""
        if self._active is None or not self._cfgs or self._cfgs[self._active] is None:
            raise BadParamError("no engine config: call create_execution_plans() first")
        return self._cfg_knob_settings(self._cfgs[self._active])

    def _cfg_knob_settings(self, cfg) -> dict:
        """{knob id: value} of a finalized engine config: ENGINECFG_KNOB_CHOICES (count query,
        fetch into new wrappers), KNOB_TYPE and KNOB_VALUE of each; the wrappers destroyed."""
        a = self.api
        ffi = a.ffi
        n = a.get_count(cfg, A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        if n <= 0:
            return {}
        arr = ffi.new("hipdnnBackendDescriptor_t[]", n)
        got = ffi.new("int64_t*")
        a.check(a.lib.hipdnnBackendGetAttribute(cfg, int(A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES),
                                                int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR), n, got, arr),
                "hipdnnBackendGetAttribute(ENGINECFG_KNOB_CHOICES)")
        out = {}
        try:
            for i in range(min(n, got[0])):
                k = arr[i]
                kid = a.get_string(k, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
                out[kid] = self._knob_choice_value(k)
        finally:
            for i in range(n):
                if arr[i] != ffi.NULL:
                    a.destroy(arr[i])
        return out

    def _knob_choice_value(self, k):
        """KNOB_CHOICE_KNOB_VALUE of a finalized KNOB_CHOICE, in the type it was set with (the
        getter refuses the other types: INT64, then DOUBLE, then CHAR)."""
        a = self.api
        ffi = a.ffi
        n = ffi.new("int64_t*")
        for atype, ctype, conv in ((T.HIPDNN_TYPE_INT64, "int64_t[1]", int),
                                   (T.HIPDNN_TYPE_DOUBLE, "double[1]", float)):
            v = ffi.new(ctype)
            if a.lib.hipdnnBackendGetAttribute(k, int(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE),
                                               int(atype), 1, n, v) == 0:
                return conv(v[0])
            a.last_error()   # the type mismatch is expected: clear it
        return a.get_string(k, A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)

    def get_ranked_engine_ids(self) -> list[int]:
        """Engine ids in heuristic order (§2.8: heuristic + getAll; the graph's plans untouched)."""
        self._need_graph()
        cfgs, ids = self._run_heuristic()
        for c in cfgs:
            self.api.destroy(c)
        return ids

    def get_engine_configs(self) -> list[EngineConfigInfo]:
        """Every configuration the heuristics proposes, in order: engine id, name, knobs (engine
        descriptor) and ENGINECFG_WORKSPACE_SIZE of the finalized config (§2.8)."""
        self._need_graph()
        a = self.api
        cfgs, ids = self._run_heuristic()
        out = []
        try:
            for c, eid in zip(cfgs, ids):
                ws = a.get(c, A.HIPDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, T.HIPDNN_TYPE_INT64)[0]
                out.append(EngineConfigInfo(eid, self._engine_name_of(eid), int(ws),
                                            tuple(self.get_knobs_for_engine(eid))))
        finally:
            for c in cfgs:
                a.destroy(c)
        return out

