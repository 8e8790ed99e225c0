"""The Python plugin SDK classes (RFC 0002): EnginePluginBase (the plugin), EnginePluginContainer
(one per plugin handle), EngineManager, EngineBase, PlanBuilderBase, PlanBase, ExecutionContext,
DeviceBuffers.  Nothing here touches C; the C surface lives in :mod:`.cabi`.
"""
from __future__ import annotations

import threading

from .errors import BAD_PARAM, INVALID_VALUE, NOT_APPLICABLE, PluginError
from .graph import OpGraph, build_engine_details

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1


def engine_id_of(name: str) -> int:
    """FNV-1a-64 of the engine name, as a signed int64 (hipDNN's engine-id convention)."""
    h = FNV_OFFSET
    for b in name.encode("utf-8"):
        h = ((h ^ b) * FNV_PRIME) & _M64
    return h - (1 << 64) if h >= (1 << 63) else h


# --------------------------------------------------------------------------- plans
class PlanBase:
    """A ready-to-execute plan, attached to an execution context.  Immutable after creation."""

    def get_workspace_size(self, handle) -> int:
        return 0

    def execute(self, handle, buffers: "DeviceBuffers", workspace: int) -> None:
        raise NotImplementedError


class PlanBuilderBase:
    """Builds plans for one family of graphs."""

    def is_applicable(self, handle, graph: OpGraph) -> bool:
        raise NotImplementedError

    def get_max_workspace_size(self, handle, graph: OpGraph, config) -> int:
        return 0

    def build_plan(self, handle, graph: OpGraph, config) -> PlanBase:
        raise NotImplementedError


class EngineBase:
    """An engine: a name (its id is FNV-1a-64 of the name), one plan builder, behaviour notes."""
    name: str = ""
    behavior_notes: tuple = ()
    plan_builder: PlanBuilderBase | None = None

    def __init__(self):
        if not self.name:
            raise ValueError(f"{type(self).__name__} has no engine name")
        self.id = engine_id_of(self.name)

    def get_plan_builder(self) -> PlanBuilderBase:
        pb = self.plan_builder
        if pb is None:
            raise PluginError(NOT_APPLICABLE, f"engine {self.name} has no plan builder")
        return pb() if isinstance(pb, type) else pb

    def is_applicable(self, handle, graph: OpGraph) -> bool:
        return bool(self.get_plan_builder().is_applicable(handle, graph))

    def knobs(self, builder):  # -> list of Knob offsets (none by default)
        return []

    def get_details(self, handle, graph: OpGraph) -> bytes:
        return build_engine_details(self.id, self.behavior_notes, self.name, self.knobs)

    def _require(self, handle, graph):
        if not self.is_applicable(handle, graph):
            raise PluginError(NOT_APPLICABLE, f"engine {self.name} is not applicable to the graph")

    def get_max_workspace_size(self, handle, graph: OpGraph, config) -> int:
        self._require(handle, graph)
        return int(self.get_plan_builder().get_max_workspace_size(handle, graph, config))

    def initialize_execution_context(self, handle, graph: OpGraph, config) -> "ExecutionContext":
        self._require(handle, graph)
        plan = self.get_plan_builder().build_plan(handle, graph, config)
        return ExecutionContext(self.id, plan, graph, config)


class EngineManager:
    """All engines of the plugin."""

    def __init__(self, engines):
        self.engines = [e() if isinstance(e, type) else e for e in engines]
        self.by_id = {}
        for e in self.engines:
            if e.id in self.by_id:
                raise ValueError(f"duplicate engine id for {e.name}")
            self.by_id[e.id] = e

    def get_all_engine_ids(self) -> list:
        return [e.id for e in self.engines]

    def engine(self, engine_id: int) -> EngineBase:
        try:
            return self.by_id[engine_id]
        except KeyError:
            raise PluginError(BAD_PARAM, f"unknown engine id {engine_id}") from None

    def get_applicable_engine_ids(self, handle, graph) -> list:
        return [e.id for e in self.engines if e.is_applicable(handle, graph)]

    def get_engine_details(self, handle, graph, engine_id) -> bytes:
        return self.engine(engine_id).get_details(handle, graph)

    def get_max_workspace_size(self, handle, graph, config) -> int:
        return self.engine(config.engine_id).get_max_workspace_size(handle, graph, config)

    def initialize_execution_context(self, handle, graph, config):
        return self.engine(config.engine_id).initialize_execution_context(handle, graph, config)


class ExecutionContext:
    """What an hipdnnEnginePluginExecutionContext_t stands for: the plan plus what built it."""

    def __init__(self, engine_id, plan, graph, config):
        self.engine_id, self.plan, self.graph, self.config = engine_id, plan, graph, config


class DeviceBuffers:
    """uid → device pointer (int).  ``buffers[uid]`` fails with INVALID_VALUE naming the uid."""

    def __init__(self, mapping: dict, ffi=None):
        self._m = mapping
        self._ffi = ffi

    def __getitem__(self, uid) -> int:
        try:
            return self._m[uid]
        except KeyError:
            raise PluginError(INVALID_VALUE, f"no device buffer for tensor uid {uid}") from None

    def __contains__(self, uid):
        return uid in self._m

    def __len__(self):
        return len(self._m)

    def items(self):
        return self._m.items()

    def view(self, tensor, np_dtype):
        """A strided numpy view of host-accessible memory at ``buffers[tensor.uid]``."""
        import numpy as np
        ptr = self[tensor.uid]
        if not ptr:
            raise PluginError(INVALID_VALUE, f"device buffer for tensor uid {tensor.uid} is NULL")
        dt = np.dtype(np_dtype)
        span = 1 + sum((d - 1) * s for d, s in zip(tensor.dims, tensor.strides) if d > 0)
        if any(d == 0 for d in tensor.dims):
            span = 0
        ffi = self._ffi
        raw = ffi.buffer(ffi.cast("char*", ptr), max(span, 1) * dt.itemsize)
        base = np.frombuffer(raw, dtype=dt, count=max(span, 1))
        return np.lib.stride_tricks.as_strided(
            base, shape=tuple(tensor.dims), strides=tuple(s * dt.itemsize for s in tensor.strides))


class EnginePluginContainer:
    """One per hipdnnEnginePluginHandle_t (RFC 0002 §4.2): passes engine queries to the
    EngineManager and runs execution contexts itself."""

    def __init__(self, plugin):
        self.plugin = plugin
        self.engine_manager = plugin.engine_manager
        self.stream = 0

    def set_stream(self, stream: int):
        self.stream = stream

    def get_applicable_engine_ids(self, graph):
        return self.engine_manager.get_applicable_engine_ids(self, graph)

    def get_engine_details(self, engine_id, graph) -> bytes:
        return self.engine_manager.get_engine_details(self, graph, engine_id)

    def get_workspace_size(self, config, graph) -> int:
        return self.engine_manager.get_max_workspace_size(self, graph, config)

    def create_execution_context(self, config, graph) -> ExecutionContext:
        return self.engine_manager.initialize_execution_context(self, graph, config)

    def get_workspace_size_from_context(self, ctx: ExecutionContext) -> int:
        return int(ctx.plan.get_workspace_size(self))

    def execute(self, ctx: ExecutionContext, workspace: int, buffers: DeviceBuffers) -> None:
        ctx.plan.execute(self, buffers, workspace)

    def close(self):
        pass


class EnginePluginBase:
    """Subclass (or instantiate) this to make a plugin: name, version, engines."""
    name: str = ""
    version: str = "1.0.0"
    api_version: str = "1.0.0"
    engines: list = []
    container_class = EnginePluginContainer

    def __init__(self, name=None, version=None, engines=None, api_version=None):
        if name is not None:
            self.name = name
        if version is not None:
            self.version = version
        if api_version is not None:
            self.api_version = api_version
        self.engine_manager = EngineManager(engines if engines is not None else type(self).engines)
        self.log_callback = None   # set by the adapter: callable(severity, message)
        self.log_level = 4         # HIPDNN_SEV_OFF until the host says otherwise
        self._lock = threading.Lock()

    def get_all_engine_ids(self) -> list:
        return self.engine_manager.get_all_engine_ids()

    def get_engine_name(self, engine_id: int) -> str:
        return self.engine_manager.engine(engine_id).name

    def create_container(self) -> EnginePluginContainer:
        return self.container_class(self)

    def log(self, severity: int, message: str):
        cb = self.log_callback
        if cb is not None and int(severity) >= self.log_level:
            cb(int(severity), message)
