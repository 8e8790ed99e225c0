"""The Python plugin SDK classes (RFC 0002): EnginePluginBase (the plugin), EnginePluginContainer
(one per plugin handle), EngineManager, EngineBase, PlanBuilderBase, PlanBase, ExecutionContext,
DeviceBuffers.  Nothing here touches C; the C surface lives in :mod:`.cabi`.
"""
from __future__ import annotations

import threading

from . import serialization as ser
from .errors import BAD_PARAM, INVALID_VALUE, NOT_APPLICABLE, PluginError
from .graph import OpGraph, build_engine_details, parse_engine_config, parse_graph
from .serialization import ScalarTable, parse_api_version
from .spans import graph_span_problem
from . import knobs

SEV_INFO = 0   # HIPDNN_SEV_INFO

SUPPORTS_PLAN_SERIALIZATION = 4   # HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION
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

    def release(self) -> None:
        """Free what the plan owns (device scratch, ...): called once when its execution
        context is destroyed.  Default: nothing."""

    def serialize_plan(self):
        """Plan serialization hook (RFC 0009): return the plan's own bytes, restored later by
        the plan builder's :meth:`PlanBuilderBase.deserialize_plan`, or None (the default) to let
        the SDK store the op graph + engine config and re-derive the plan from them."""
        return None

    def execute(self, handle, buffers: "DeviceBuffers", workspace: int) -> None:
        raise NotImplementedError


class PlanBuilderBase:
    """Builds plans for one family of graphs."""

    def is_applicable(self, handle, graph: OpGraph) -> bool:
        raise NotImplementedError

    def get_max_workspace_size(self, handle, graph: OpGraph, config) -> int:
        return 0

    def decline_reason(self, handle, graph: OpGraph) -> str:
        """Why :meth:`is_applicable` is False for ``graph`` (asked only then): the plugin reports
        it to the host (last error + info log) so a user whose graph lands on another engine,
        or on none, learns why.  Default: "" (no reason given)."""
        return ""

    def build_plan(self, handle, graph: OpGraph, config) -> PlanBase:
        raise NotImplementedError

    def deserialize_plan(self, handle, data: bytes, config, scalars) -> PlanBase:
        """Restore a plan from the bytes its :meth:`PlanBase.serialize_plan` returned (no op
        graph is available; ``scalars`` is the restored pass-by-value ScalarTable)."""
        raise PluginError(INVALID_VALUE, f"{type(self).__name__} cannot restore plan-owned "
                                         "serialized data")


class EngineBase:
    """An engine: a name (its id is FNV-1a-64 of the name), one plan builder, behaviour notes.

    ``supports_plan_serialization`` (default True): the SDK serializes this engine's execution
    contexts (see :mod:`.serialization`) and adds behaviour note 4
    (SUPPORTS_EXECUTION_PLAN_SERIALIZATION) to its EngineDetails; set False to opt out (the
    serialize hook then answers NOT_APPLICABLE and the note is not reported)."""
    name: str = ""
    behavior_notes: tuple = ()
    plan_builder: PlanBuilderBase | None = None
    supports_plan_serialization: bool = True
    # the knobs the engine offers (knobs.KnobSpec; knobs.GLOBAL_KNOBS for hipDNN's global knobs):
    # written into EngineDetails, and the knob settings of a config are checked against them at
    # plan build (an unknown id is ignored, a wrong value type refused)
    knob_specs: tuple = ()

    def __init__(self):
        if not self.name:
            raise ValueError(f"{type(self).__name__} has no engine name")
        self.id = engine_id_of(self.name)

    def get_plan_builder(self) -> PlanBuilderBase:
        pb = self.plan_builder
        if pb is None:
            raise PluginError(NOT_APPLICABLE, f"engine {self.name} has no plan builder")
        return pb() if isinstance(pb, type) else pb

    def not_applicable_reason(self, handle, graph: OpGraph) -> str | None:
        """Why this engine cannot run ``graph`` (None: it can).  The SDK's own checks come first
        - every tensor must be addressable (:mod:`.spans`) - then the plan builder's
        ``is_applicable``."""
        why = span_problem(graph)
        if why:
            return f"engine {self.name} declines the graph: {why}"
        if not self.get_plan_builder().is_applicable(handle, graph):
            return f"engine {self.name} is not applicable to the graph"
        return None

    def is_applicable(self, handle, graph: OpGraph) -> bool:
        why = span_problem(graph)
        if why:
            _log(handle, SEV_INFO, f"engine {self.name} declines the graph: {why}")
            return False
        return bool(self.get_plan_builder().is_applicable(handle, graph))

    def decline_reason(self, handle, graph: OpGraph) -> str:
        return str(self.get_plan_builder().decline_reason(handle, graph) or "")

    def knobs(self, builder):  # -> list of Knob offsets (those of knob_specs by default)
        return [spec.build(builder) for spec in self.knob_specs]

    def knob_values(self, handle, config, strict: bool = True) -> dict:
        """{knob id: value} of ``config`` for this engine's knob_specs (knobs.resolve)."""
        return knobs.resolve(config, self.knob_specs, strict=strict, engine=self.name,
                             log=lambda sev, msg: _log(handle, sev, msg))

    def reported_behavior_notes(self) -> list:
        notes = [int(n) for n in self.behavior_notes]
        if self.supports_plan_serialization and SUPPORTS_PLAN_SERIALIZATION not in notes:
            notes.append(SUPPORTS_PLAN_SERIALIZATION)
        return notes

    def get_details(self, handle, graph: OpGraph) -> bytes:
        return build_engine_details(self.id, self.reported_behavior_notes(), self.name,
                                    self.knobs)

    def _require(self, handle, graph):
        why = self.not_applicable_reason(handle, graph)
        if why:
            raise PluginError(NOT_APPLICABLE, why)

    def get_max_workspace_size(self, handle, graph: OpGraph, config) -> int:
        self._require(handle, graph)
        return int(self.get_plan_builder().get_max_workspace_size(handle, graph, config))

    def initialize_execution_context(self, handle, graph: OpGraph, config) -> "ExecutionContext":
        self._require(handle, graph)
        self.knob_values(handle, config, strict=True)   # a knob of the wrong type: refused here
        plan = self.get_plan_builder().build_plan(handle, graph, config)
        return ExecutionContext(self.id, plan, graph, config)

    # -------------------------------------------------------------- serialization (RFC 0009)
    def serialize_execution_context(self, handle, ctx: "ExecutionContext") -> bytes:
        if not self.supports_plan_serialization:
            raise PluginError(NOT_APPLICABLE, f"engine {self.name} does not serialize its "
                                              "execution contexts")
        own = ctx.plan.serialize_plan()
        config = ctx.config.raw if ctx.config is not None else b""
        if own is not None:
            return ser.pack(ser.KIND_PLAN, self.id, ctx.scalars, bytes(own), config)
        if ctx.graph is None:
            raise PluginError(INVALID_VALUE, f"engine {self.name}: the execution context has no "
                                             "op graph to serialize (restored from a plan-owned "
                                             "payload whose plan has no serialize_plan)")
        return ser.pack(ser.KIND_REDERIVE, self.id, ctx.scalars, ctx.graph.raw, config)

    def restore_execution_context(self, handle, payload) -> "ExecutionContext":
        """Rebuild a context from a checked :class:`.serialization.Payload`."""
        if not self.supports_plan_serialization:
            raise PluginError(NOT_APPLICABLE, f"engine {self.name} does not restore serialized "
                                              "execution contexts")
        config = parse_engine_config(payload.config) if payload.config else None
        if config is not None and config.engine_id != self.id:
            raise PluginError(INVALID_VALUE, "serialized execution context: the engine config is "
                                             "for another engine")
        if payload.kind == ser.KIND_REDERIVE:
            graph = parse_graph(payload.blob)
            check_restored_graph(graph, getattr(handle, "plugin", None))
            table = ser.ScalarTable.from_graph(graph)
            if table.runtime_uids != payload.scalars.runtime_uids:
                raise PluginError(BAD_PARAM, "serialized execution context: the stored runtime "
                                             "pass-by-value uid set does not match the op graph")
            ctx = self.initialize_execution_context(handle, graph, config)
            return ctx
        plan = self.get_plan_builder().deserialize_plan(handle, payload.blob, config,
                                                        payload.scalars)
        if not isinstance(plan, PlanBase):
            raise PluginError(INVALID_VALUE, "deserialize_plan did not return a plan")
        return ExecutionContext(self.id, plan, None, config, payload.scalars)


def required_api_version(graph) -> tuple:
    """The engine API a graph's content needs (shipped §3.6 order: ragged offsets / alignment
    other than 16 -> 1.3.0, runtime pass-by-value -> 1.2.0, shape overrides -> 1.1.0)."""
    ts = list(graph.tensors.values())
    if any(getattr(t, "alignment", 16) not in (16, 0)
           or getattr(t, "ragged_offset_uid", None) is not None for t in ts):
        return (1, 3, 0)
    if any(getattr(t, "is_runtime_pass_by_value", False) for t in ts):
        return (1, 2, 0)
    if graph.is_override_shape_enabled:
        return (1, 1, 0)
    return (1, 0, 0)


def check_restored_graph(graph, plugin) -> None:
    """The version guards a fresh graph passes in the host before any plugin sees it, for a graph
    that arrives inside a serialized execution context instead: its stamped
    ``min_required_engine_api_version`` and the version its content needs must both be within
    the plugin's reported API version.  (Span checks follow through ``_require``.)"""
    api = parse_api_version(getattr(plugin, "api_version", "1.0.0")) if plugin is not None \
        else (1, 0, 0)
    stamp = getattr(graph, "min_api_version", None)
    if stamp is not None and tuple(stamp) > api:
        raise PluginError(INVALID_VALUE, "serialized execution context: the op graph requires "
                                         "engine API %d.%d.%d; this plugin reports %d.%d.%d"
                                         % (tuple(stamp) + tuple(api)))
    need = required_api_version(graph)
    if need > api:
        raise PluginError(INVALID_VALUE, "serialized execution context: the op graph uses "
                                         "features of engine API %d.%d.%d; this plugin reports "
                                         "%d.%d.%d" % (need + tuple(api)))
    if stamp is not None and tuple(stamp) < need:
        raise PluginError(BAD_PARAM, "serialized execution context: the op graph is stamped "
                                     "engine API %d.%d.%d but uses features of %d.%d.%d"
                                     % (tuple(stamp) + need))


def span_problem(graph) -> str | None:
    """:func:`.spans.graph_span_problem`, remembered on the parsed graph (asked several times)."""
    if getattr(graph, "tensors", None) is None:
        return None   # not an OpGraph (direct use of the classes with a stand-in)
    try:
        cached = graph._span_problem
    except AttributeError:
        cached = None
    if cached is not None:
        return cached or None
    why = graph_span_problem(graph)
    try:
        graph._span_problem = why or ""
    except AttributeError:
        pass
    return why


def _log(handle, severity: int, message: str) -> None:
    plugin = getattr(handle, "plugin", None)
    if plugin is not None and hasattr(plugin, "log"):
        try:
            plugin.log(severity, message)
        except Exception:  # noqa: BLE001 - logging never fails a query
            pass


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

    def decline_reasons(self, handle, graph, applicable_ids) -> list:
        """[(engine name, reason)] for the engines not among ``applicable_ids``."""
        declined = []
        for e in self.engines:
            if e.id in applicable_ids:
                continue
            try:
                why = e.decline_reason(handle, graph)
            except Exception as ex:  # noqa: BLE001 - a reason must never break the query
                why = f"(no reason: {type(ex).__name__}: {ex})"
            declined.append((e.name, why or "not applicable (no reason given)"))
        return declined

    def get_engine_details(self, handle, graph, engine_id) -> bytes:
        return self.engine(engine_id).get_details(handle, graph)

    def get_max_workspace_size(self, handle, graph, config) -> int:
        return self.engine(config.engine_id).get_max_workspace_size(handle, graph, config)

    def initialize_execution_context(self, handle, graph, config):
        return self.engine(config.engine_id).initialize_execution_context(handle, graph, config)


class ExecutionContext:
    """What an hipdnnEnginePluginExecutionContext_t stands for: the plan plus what built it, and
    the pass-by-value scalar table (from the op graph, or restored from a serialized payload)."""

    def __init__(self, engine_id, plan, graph, config, scalars=None):
        self.engine_id, self.plan, self.graph, self.config = engine_id, plan, graph, config
        if scalars is None:
            scalars = ScalarTable.from_graph(graph) if graph is not None else ScalarTable()
        self.scalars = scalars


class DeviceBuffers:
    """uid → device pointer (int).  ``buffers[uid]`` fails with INVALID_VALUE naming the uid.

    ``buffers.scalar(uid)`` is the pass-by-value provider contract (RFC 0016 §4.6): the baked
    value of a compile-time constant or runtime-with-default tensor (a variant-pack entry for it
    is inert), or the value read through the **host** pointer of a runtime user-supplied tensor
    (missing → INVALID_VALUE)."""

    def __init__(self, mapping: dict, ffi=None, scalars=None):
        self._m = mapping
        self._ffi = ffi
        self.scalars = scalars

    def scalar(self, uid):
        table = self.scalars if self.scalars is not None else ScalarTable()
        return table.value(uid, self._m, self._ffi)

    def is_runtime_scalar(self, uid) -> bool:
        s = self.scalars.get(uid) if self.scalars is not None else None
        return bool(s is not None and s.runtime)

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


def _h(container, handle):
    return container if handle is None else handle


class EnginePluginContainer:
    """RFC 0002 §4.2: passes engine queries to the EngineManager and runs execution contexts
    itself.  One container is shared by every live hipdnnEnginePluginHandle_t of a plugin (the
    RFC's shared_ptr on each handle + a weak_ptr at global scope, here
    :meth:`EnginePluginBase.acquire_container` / :meth:`~EnginePluginBase.release_container`):
    the first hipdnnEnginePluginCreate makes it, later ones share it, and the last
    hipdnnEnginePluginDestroy closes it.  Per-handle state (the stream) lives on the
    :class:`PluginHandle`, which every method receives as ``handle`` and passes on to the engines
    (``handle=None``: the container itself, for direct use outside the C surface)."""

    def __init__(self, plugin):
        self.plugin = plugin
        self.engine_manager = plugin.engine_manager
        # used only when the container is driven directly (handle=None)
        self.stream = 0
        self.device = plugin.handle_device()
        self.stream_info = None

    def set_stream(self, stream: int):
        self.stream_info = self.plugin.check_stream(self, stream)
        self.stream = stream

    def get_applicable_engine_ids(self, graph, handle=None):
        return self.engine_manager.get_applicable_engine_ids(_h(self, handle), graph)

    def decline_reasons(self, graph, applicable_ids, handle=None) -> list:
        """[(engine name, why)] of the engines that declined ``graph``."""
        return self.engine_manager.decline_reasons(_h(self, handle), graph, set(applicable_ids))

    def get_engine_details(self, engine_id, graph, handle=None) -> bytes:
        return self.engine_manager.get_engine_details(_h(self, handle), graph, engine_id)

    def get_workspace_size(self, config, graph, handle=None) -> int:
        return self.engine_manager.get_max_workspace_size(_h(self, handle), graph, config)

    def create_execution_context(self, config, graph, handle=None) -> ExecutionContext:
        return self.engine_manager.initialize_execution_context(_h(self, handle), graph, config)

    def get_workspace_size_from_context(self, ctx: ExecutionContext, handle=None) -> int:
        return int(ctx.plan.get_workspace_size(_h(self, handle)))

    def destroy_execution_context(self, ctx: ExecutionContext, handle=None) -> None:
        """The context is gone: its plan releases what it owns (:meth:`PlanBase.release`)."""
        rel = getattr(ctx.plan, "release", None)
        if rel is not None:
            rel()

    def execute(self, ctx: ExecutionContext, workspace: int, buffers: DeviceBuffers,
                handle=None) -> None:
        buffers.scalars = ctx.scalars
        ctx.plan.execute(self if handle is None else handle, buffers, workspace)

    def serialize_execution_context(self, ctx: ExecutionContext, handle=None) -> bytes:
        return self.engine_manager.engine(ctx.engine_id).serialize_execution_context(
            _h(self, handle), ctx)

    def create_execution_context_from_serialized(self, data: bytes,
                                                 handle=None) -> ExecutionContext:
        em = self.engine_manager
        p = ser.unpack(data, known_engine_ids=set(em.by_id),
                       api_version=ser.parse_api_version(self.plugin.api_version))
        return em.engine(p.engine_id).restore_execution_context(_h(self, handle), p)

    def close(self):
        pass


class PluginHandle:
    """What one hipdnnEnginePluginHandle_t stands for (RFC 0002 §4.6): a reference to the
    plugin's shared :class:`EnginePluginContainer` plus this handle's stream and device.
    Engines, plan builders and plans receive it as their ``handle`` argument (``handle.stream``,
    ``handle.device``, ``handle.container``, ``handle.plugin``).

    ``device``: what :meth:`EnginePluginBase.handle_device` answered when the handle was created
    (hipdnnEnginePluginCreate runs inside hipdnnCreate, on the caller's thread and current
    device); -1 for plugins that do not bind handles to devices.  ``stream_info``: what
    :meth:`EnginePluginBase.check_stream` answered for the current stream."""
    __slots__ = ("container", "stream", "plugin", "device", "stream_info")

    def __init__(self, container: EnginePluginContainer):
        self.container = container
        self.plugin = container.plugin
        self.stream = 0
        self.device = self.plugin.handle_device()
        self.stream_info = None

    def set_stream(self, stream: int):
        self.stream_info = self.plugin.check_stream(self, stream)
        self.stream = stream

    def get_applicable_engine_ids(self, graph):
        return self.container.get_applicable_engine_ids(graph, self)

    def decline_reasons(self, graph, applicable_ids):
        return self.container.decline_reasons(graph, applicable_ids, self)

    def get_engine_details(self, engine_id, graph) -> bytes:
        return self.container.get_engine_details(engine_id, graph, self)

    def get_workspace_size(self, config, graph) -> int:
        return self.container.get_workspace_size(config, graph, self)

    def create_execution_context(self, config, graph) -> ExecutionContext:
        return self.container.create_execution_context(config, graph, self)

    def get_workspace_size_from_context(self, ctx: ExecutionContext) -> int:
        return self.container.get_workspace_size_from_context(ctx, self)

    def destroy_execution_context(self, ctx: ExecutionContext) -> None:
        self.container.destroy_execution_context(ctx, self)

    def execute(self, ctx: ExecutionContext, workspace: int, buffers: DeviceBuffers) -> None:
        self.container.execute(ctx, workspace, buffers, self)

    def serialize_execution_context(self, ctx: ExecutionContext) -> bytes:
        return self.container.serialize_execution_context(ctx, self)

    def create_execution_context_from_serialized(self, data: bytes) -> ExecutionContext:
        return self.container.create_execution_context_from_serialized(data, self)


class EnginePluginBase:
    """Subclass (or instantiate) this to make a plugin: name, version, engines.

    ``api_version``: report "1.2.0" or higher only when every engine honours the runtime
    pass-by-value provider contract (read scalars with ``buffers.scalar(uid)``, RFC 0016 §4.6).
    ``supports_plan_serialization = False`` leaves the serialization trio out of the function
    table (the host then answers HIPDNN_STATUS_NOT_SUPPORTED for plans of this plugin)."""
    name: str = ""
    version: str = "1.0.0"
    api_version: str = "1.0.0"
    engines: list = []
    container_class = EnginePluginContainer
    supports_plan_serialization: bool = True

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
        self._container = None      # the shared container (RFC 0002 §4.2), while handles live
        self._container_refs = 0

    def get_all_engine_ids(self) -> list:
        return self.engine_manager.get_all_engine_ids()

    # -------------------------------------------------------------- devices (docs/gpu.md)
    def handle_device(self) -> int:
        """The device a new plugin handle (or a directly used container) binds to; the default,
        -1, binds none (host engines).  A GPU plugin answers the calling thread's current
        device (``hipdnn_cabi.device.current_device()``)."""
        return -1

    def check_stream(self, handle, stream: int):
        """hipdnnEnginePluginSetStream: raise :class:`PluginError` to refuse ``stream`` for
        ``handle`` (the handle keeps its old stream); the value returned is kept as
        ``handle.stream_info``.  Default: accept anything."""
        return None

    def get_engine_name(self, engine_id: int) -> str:
        return self.engine_manager.engine(engine_id).name

    def create_container(self) -> EnginePluginContainer:
        """A new container (override to customise; the C surface calls it through
        :meth:`acquire_container`, so once per group of overlapping plugin handles)."""
        return self.container_class(self)

    def acquire_container(self) -> EnginePluginContainer:
        """The container shared by all live plugin handles, created on first use."""
        with self._lock:
            c = self._container
            if c is None:
                c = self.create_container()
                self._container = c
            self._container_refs += 1
            return c

    def release_container(self, container: EnginePluginContainer) -> None:
        """Drop one handle's reference; the last one closes the container and forgets it."""
        with self._lock:
            if container is not self._container or self._container_refs <= 0:
                return
            self._container_refs -= 1
            if self._container_refs:
                return
            self._container = None
        container.close()

    def log(self, severity: int, message: str):
        cb = self.log_callback
        if cb is not None and int(severity) >= self.log_level:
            cb(int(severity), message)
