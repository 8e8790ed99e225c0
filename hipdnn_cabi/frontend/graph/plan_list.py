"""cudnn-frontend pygraph's per-plan API on a ``Graph``: the plans ``create_execution_plans``
made (one per engine configuration, heuristic order) addressed by index — build, workspace size,
engine, knobs, behaviour notes, name, execute — and the loaded engine count."""
from __future__ import annotations

from ..._generated.enums import AttributeName as A
from ..._generated.enums import AttributeType as T
from ...errors import BadParamError
from ..handle import engines


class PlanListMixin:
    """Mixin of :class:`Graph`."""

    def _plan_at(self, index) -> int:
        try:
            i = int(index)
        except (TypeError, ValueError):
            raise BadParamError(f"plan index {index!r} is not an integer") from None
        n = len(self._plans)
        if not n:
            raise BadParamError("no execution plans: call create_execution_plans() first")
        if not 0 <= i < n:
            raise BadParamError(f"plan index {i} out of range: the graph has {n} execution "
                                f"plan{'s' if n != 1 else ''} (0..{n - 1})")
        return i

    def build_plan_at_index(self, index: int):
        """Build (finalize) the plan at ``index``; the active plan stays the same."""
        i = self._plan_at(index)
        if not self._plan_ok[i]:
            if self._cfgs[i] is None:
                raise BadParamError(f"plan {i} was restored from bytes and cannot be rebuilt")
            active_ws = self._workspace
            self._build_plan(i)
            if i != self._active:
                self._workspace = active_ws
        return self

    def get_workspace_size_plan_at_index(self, index: int) -> int:
        """Workspace bytes of the plan at ``index``: the built plan's WORKSPACE_SIZE, else its
        engine configuration's ENGINECFG_WORKSPACE_SIZE (known once the heuristics finalized
        it; cudnn-frontend answers 0 for a plan it has not built)."""
        i = self._plan_at(index)
        a = self.api
        if self._plan_ok[i]:
            return int(a.get(self._plans[i], A.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                             T.HIPDNN_TYPE_INT64, want_count=False)[0])
        if self._cfgs[i] is None:
            return 0
        v = a.try_get(self._cfgs[i], A.HIPDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, T.HIPDNN_TYPE_INT64)
        return int(v[0]) if v else 0

    def get_engine_and_knobs_at_index(self, index: int):
        """``(engine_id, {knob id: value})`` of the plan at ``index``: its engine configuration's
        ENGINE and KNOB_CHOICES (empty: the engine's defaults).  ``create_execution_plan`` with
        them rebuilds the same plan."""
        i = self._plan_at(index)
        cfg = self._cfgs[i]
        return self._engine_ids[i], (self._cfg_knob_settings(cfg) if cfg is not None else {})

    def get_plan_name_at_index(self, index: int) -> str:
        """The engine's name followed by its knob choices (``NAME_KNOB=value_...``)."""
        eid, knobs = self.get_engine_and_knobs_at_index(index)
        name = self._engine_name_of(eid) or f"0x{eid & (2**64 - 1):016x}"
        return name + "".join(f"_{k}={v}" for k, v in knobs.items())

    def get_behavior_notes_for_plan_at_index(self, index: int) -> list:
        """Behaviour notes of the engine of the plan at ``index`` (built or not)."""
        return self.get_behavior_notes_for_engine(self._engine_ids[self._plan_at(index)])

    def get_engine_count(self) -> int:
        """The number of loaded engines (hipdnnGetEngineCount_ext), the count of engines a graph
        can be planned on.  Their ids are 64-bit values (``hf.engines()``), not 0..count-1."""
        return len(engines(self.handle))

    def execute_plan_at_index(self, variant_pack: dict, workspace=None, index: int = 0,
                              handle=None):
        """Run the plan at ``index`` (built first when it is not): an explicit choice, so the
        memory rule does not move it to another engine.  The active plan stays the same."""
        i = self._plan_at(index)
        if not self._plan_ok[i]:
            self.build_plan_at_index(i)
        saved = (self._active, self.select_engine_by_memory, self._workspace)
        self._activate(i)
        self.select_engine_by_memory = False
        try:
            return self.execute(variant_pack, workspace, handle)
        finally:
            active, self.select_engine_by_memory, ws = saved
            if active is not None and active != i:
                self._activate(active)
            self._workspace = ws
