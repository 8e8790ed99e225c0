"""The C ABI adapter: one object per Python plugin whose methods are the plugin C API functions,
taking and returning cffi cdata exactly as the C signatures do.

It is reached through the ``extern "Python"`` dispatchers ``hpy_plugin_<Fn>(int slot, ...)``
(:mod:`.slots`), either from the static slot functions inside libhipdnn_backend.so or from the
exported entry points of a library built by :mod:`.export`.  Every entry point turns exceptions
into plugin status codes and sets the per-thread last error; nothing ever propagates into C.
"""
from __future__ import annotations

import functools
import itertools
import struct
import threading

from .errors import ALLOC_FAILED, BAD_PARAM, INTERNAL_ERROR, INVALID_VALUE, NOT_APPLICABLE, \
    PluginError
from .core import DeviceBuffers as _DeviceBuffers
from .core import PluginHandle as _PluginHandle
from .graph import parse_engine_config, parse_graph
from .signatures import ENGINE_HEADERS, signatures

ENGINE_TYPE = 1  # HIPDNN_PLUGIN_TYPE_ENGINE
_ids = itertools.count(1)


def _fail(adapter, e: BaseException) -> int:
    """An exception at the plugin boundary → its plugin status plus the thread's last error."""
    if isinstance(e, PluginError):
        adapter.set_error(e.message or f"plugin error {e.status}")
        return e.status
    if isinstance(e, MemoryError):
        adapter.set_error(f"plugin {getattr(adapter.plugin, 'name', '?')}: out of memory")
        return ALLOC_FAILED
    try:
        msg = f"{type(e).__name__}: {e}"
    except BaseException:  # noqa: BLE001 - an unprintable exception
        msg = type(e).__name__
    adapter.set_error(msg)
    return INTERNAL_ERROR


def _entry(fn):
    @functools.wraps(fn)
    def wrapper(self, *args):
        try:
            st = fn(self, *args)
            return 0 if st is None else int(st)
        except BaseException as e:  # noqa: BLE001 - never let anything reach C
            return _fail(self, e)
    wrapper.is_entry = True
    return wrapper


class PluginApiAdapter:
    """The PluginApi.h part every Python plugin adapter shares (engine: :class:`CAdapter`;
    heuristic: :class:`.heuristics.HeuristicCAdapter`): metadata strings, plugin type, the
    per-thread last error, logging callback and level."""
    PLUGIN_TYPE = ENGINE_TYPE

    def __init__(self, plugin, ffi):
        self.plugin = plugin
        self.ffi = ffi
        self._tls = threading.local()
        self._empty = ffi.new("char[]", b"")
        self._strings = {}
        for key in ("name", "version", "api_version"):
            self._strings[key] = ffi.new("char[]", str(getattr(plugin, key)).encode())
        self._lock = threading.Lock()

    def set_error(self, msg: str):
        self._tls.buf = self.ffi.new("char[]", msg.encode("utf-8", "replace")[:2047])

    def last_error(self) -> str:
        buf = getattr(self._tls, "buf", None)
        return self.ffi.string(buf).decode("utf-8", "replace") if buf is not None else ""

    def _addr(self, p) -> int:
        return int(self.ffi.cast("uintptr_t", p))

    def _null(self, p, what):
        if p == self.ffi.NULL:
            raise PluginError(BAD_PARAM, f"{what} is NULL")

    def _string(self, out, key):
        self._null(out, key.replace("_", " "))
        out[0] = self._strings[key]

    # ------------------------------------------------------------------ PluginApi.h
    @_entry
    def hipdnnPluginGetName(self, name):
        self._string(name, "name")

    @_entry
    def hipdnnPluginGetVersion(self, version):
        self._string(version, "version")

    @_entry
    def hipdnnPluginGetApiVersion(self, version):
        self._string(version, "api_version")

    @_entry
    def hipdnnPluginGetType(self, type_):
        self._null(type_, "type")
        type_[0] = self.PLUGIN_TYPE

    def hipdnnPluginGetLastErrorString(self, error_str):
        if error_str != self.ffi.NULL:
            buf = getattr(self._tls, "buf", None)
            error_str[0] = buf if buf is not None else self._empty

    @_entry
    def hipdnnPluginSetLoggingCallback(self, callback):
        if callback == self.ffi.NULL:
            self.plugin.log_callback = None
            return
        cb = callback

        def log(sev, msg, _cb=cb, _ffi=self.ffi):
            _cb(sev, msg.encode("utf-8", "replace"))
        self.plugin.log_callback = log

    @_entry
    def hipdnnPluginSetLogLevel(self, level):
        self.plugin.log_level = int(level)


class CAdapter(PluginApiAdapter):
    """The plugin C API over a Python plugin object (see :class:`.core.EnginePluginBase`)."""

    def __init__(self, plugin, ffi):
        super().__init__(plugin, ffi)
        self._engine_names = {}
        self._handles = {}
        self._contexts = {}
        # The execute hot path: the same objects keyed by the handle/context cdata (cffi pointer
        # cdata hash and compare by address, so no ffi.cast per call), the uid → pointer maps of
        # the device-buffer arrays seen (keyed by the raw array bytes) and the workspace ints.
        self._handles_c = {}
        self._contexts_c = {}
        self._bufmaps = {}
        self._ws_ints = {}
        self._fbuf = ffi.buffer
        self._unpack = {}
        self._details = {}
        self._payloads = {}
        self._graphs = {}   # graph bytes -> OpGraph (see _graph)

    # ------------------------------------------------------------------ helpers
    def _container(self, handle):
        c = self._handles.get(self._addr(handle))
        if c is None:
            raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnEnginePluginHandle_t")
        return c

    def _context(self, ctx):
        c = self._contexts.get(self._addr(ctx))
        if c is None:
            raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnEnginePluginExecutionContext_t")
        return c

    def _data(self, d, what):
        if d == self.ffi.NULL:
            raise PluginError(BAD_PARAM, f"{what} is NULL")
        if d.ptr == self.ffi.NULL or d.size == 0:
            raise PluginError(BAD_PARAM, f"{what} is empty")
        return self.ffi.buffer(self.ffi.cast("char*", d.ptr), d.size)[:]

    def _graph(self, d):
        """The parsed OpGraph, once per distinct graph byte content: the host passes the same
        bytes to GetApplicableEngineIds, GetEngineDetails, GetWorkspaceSize and
        CreateExecutionContext, and pure-Python verify + parse costs ~0.5 ms a graph.  The
        OpGraph is shared by those calls, so plugin code treats it as read-only."""
        raw = self._data(d, "op graph")
        g = self._graphs.get(raw)
        if g is None:
            g = parse_graph(raw)
            if len(self._graphs) >= 64:
                self._graphs.clear()
            self._graphs[raw] = g
        return g

    def _config(self, d):
        return parse_engine_config(self._data(d, "engine config"))

    def _fill_ids(self, ids, engine_ids, max_engines, num_engines):
        self._null(num_engines, "num_engines")
        if engine_ids == self.ffi.NULL and max_engines > 0:
            raise PluginError(BAD_PARAM, f"engine_ids is NULL but max_engines is {max_engines}")
        for i, eid in enumerate(ids[:max_engines]):
            engine_ids[i] = eid
        num_engines[0] = len(ids)

    # ------------------------------------------------------------------ EnginePluginApi.h
    @_entry
    def hipdnnEnginePluginGetAllEngineIds(self, engine_ids, max_engines, num_engines):
        self._fill_ids(list(self.plugin.get_all_engine_ids()), engine_ids, max_engines, num_engines)

    @_entry
    def hipdnnEnginePluginGetEngineName(self, engine_id, name):
        self._null(name, "name")
        s = self._engine_names.get(engine_id)
        if s is None:
            s = self._engine_names[engine_id] = self.ffi.new(
                "char[]", self.plugin.get_engine_name(engine_id).encode())
        name[0] = s

    @_entry
    def hipdnnEnginePluginCreate(self, handle):
        self._null(handle, "handle")
        # RFC 0002 §4.2: every plugin handle shares the plugin's one container (created by the
        # first live handle, closed with the last); the handle itself carries its stream.
        c = _PluginHandle(self.plugin.acquire_container())
        key = next(_ids) << 4
        cd = self.ffi.cast("hipdnnEnginePluginHandle_t", key)
        with self._lock:
            self._handles[key] = c
            self._handles_c[cd] = c
        handle[0] = cd

    @_entry
    def hipdnnEnginePluginDestroy(self, handle):
        c = self._container(handle)
        with self._lock:
            self._handles.pop(self._addr(handle), None)
            self._handles_c.pop(handle, None)
        self.plugin.release_container(c.container)

    @_entry
    def hipdnnEnginePluginSetStream(self, handle, stream):
        self._container(handle).set_stream(self._addr(stream))

    @_entry
    def hipdnnEnginePluginGetApplicableEngineIds(self, handle, op_graph, engine_ids, max_engines,
                                                 num_engines):
        c = self._container(handle)
        self._null(num_engines, "num_engines")
        g = self._graph(op_graph)
        ids = list(c.get_applicable_engine_ids(g))
        why = getattr(c, "decline_reasons", None)
        declined = why(g, ids) if why is not None else []
        # Decline reasons: the thread's last error holds "<engine> declined the
        # graph: <why>" (the host reads it after a query that left engines out) and they are
        # logged at info level through the host's logging callback.
        if declined:
            msg = "; ".join(f"{name} declined the graph: {why}" for name, why in declined)
            self.set_error(msg)
            self.plugin.log(0, f"{self.plugin.name}: {msg}")   # HIPDNN_SEV_INFO
        else:
            self.set_error("")
        self._fill_ids(list(ids), engine_ids, max_engines, num_engines)

    @_entry
    def hipdnnEnginePluginGetEngineDetails(self, handle, engine_id, op_graph, engine_details):
        c = self._container(handle)
        self._null(engine_details, "engine_details")
        data = bytes(c.get_engine_details(engine_id, self._graph(op_graph)))
        buf = self.ffi.new("char[]", data)
        with self._lock:
            self._details[self._addr(buf)] = buf
        engine_details.ptr = buf
        engine_details.size = len(data)

    @_entry
    def hipdnnEnginePluginDestroyEngineDetails(self, handle, engine_details):
        self._container(handle)
        self._null(engine_details, "engine_details")
        with self._lock:
            buf = self._details.pop(self._addr(engine_details.ptr), None)
        if buf is None:
            raise PluginError(BAD_PARAM, "engine_details were not created by this plugin")
        engine_details.ptr = self.ffi.NULL
        engine_details.size = 0

    @_entry
    def hipdnnEnginePluginGetWorkspaceSize(self, handle, engine_config, op_graph, workspace_size):
        c = self._container(handle)
        self._null(workspace_size, "workspace_size")
        workspace_size[0] = int(c.get_workspace_size(self._config(engine_config),
                                                     self._graph(op_graph)))

    @_entry
    def hipdnnEnginePluginCreateExecutionContext(self, handle, engine_config, op_graph,
                                                 execution_context):
        c = self._container(handle)
        self._null(execution_context, "execution_context")
        ctx = c.create_execution_context(self._config(engine_config), self._graph(op_graph))
        self._add_context(ctx, execution_context)

    @_entry
    def hipdnnEnginePluginDestroyExecutionContext(self, handle, execution_context):
        c = self._container(handle)
        ctx = self._context(execution_context)
        with self._lock:
            self._contexts.pop(self._addr(execution_context), None)
            self._contexts_c.pop(execution_context, None)
        c.destroy_execution_context(ctx)

    @_entry
    def hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext(self, handle, execution_context,
                                                               workspace_size):
        c = self._container(handle)
        ctx = self._context(execution_context)
        self._null(workspace_size, "workspace_size")
        workspace_size[0] = int(c.get_workspace_size_from_context(ctx))

    def _add_context(self, ctx, out):
        key = next(_ids) << 4
        cd = self.ffi.cast("hipdnnEnginePluginExecutionContext_t", key)
        with self._lock:
            self._contexts[key] = ctx
            self._contexts_c[cd] = ctx
        out[0] = cd

    def _buffers(self, device_buffers, n):
        """DeviceBuffers over the C array: the uid → pointer map is built once per distinct
        array content (the raw bytes are the cache key) and shared, read-only, by the calls."""
        if n:
            if not device_buffers:
                raise PluginError(BAD_PARAM, f"device_buffers is NULL but num_device_buffers is {n}")
            raw = self._fbuf(device_buffers, 16 * n)[:]
            m = self._bufmaps.get(raw)
            if m is None:
                m = self._bufmap(raw, n)
        else:
            m = {}
        return _DeviceBuffers(m, self.ffi)

    def _bufmap(self, raw: bytes, n: int) -> dict:
        """uid → pointer of one device-buffer array (its raw bytes), kept for the next calls."""
        st = self._unpack.get(n)
        if st is None:
            st = self._unpack[n] = struct.Struct("<" + "qQ" * n).unpack
        v = st(raw)
        m = dict(zip(v[0::2], v[1::2]))
        if len(self._bufmaps) >= 256:
            self._bufmaps.clear()
        self._bufmaps[raw] = m
        return m

    def execute_op_graph_ints(self, handle, execution_context, workspace, raw, n):
        """hipdnnEnginePluginExecuteOpGraph as the backend's execute slots call it (through the
        CPython API, signatures.EXECUTE_SLOT_C): the handle, context and workspace addresses as
        ints, the device-buffer array as its bytes (None when NULL); the same checks, errors and
        call as the cdata spelling below."""
        try:
            c = self._handles.get(handle)
            if c is None:
                raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnEnginePluginHandle_t")
            ctx = self._contexts.get(execution_context)
            if ctx is None:
                raise PluginError(BAD_PARAM,
                                  "invalid or destroyed hipdnnEnginePluginExecutionContext_t")
            if n:
                if raw is None:
                    raise PluginError(BAD_PARAM,
                                      f"device_buffers is NULL but num_device_buffers is {n}")
                m = self._bufmaps.get(raw)
                if m is None:
                    m = self._bufmap(raw, n)
            else:
                m = {}
            c.container.execute(ctx, workspace, _DeviceBuffers(m, self.ffi), c)
            return 0
        except BaseException as e:  # noqa: BLE001 - never let anything reach C
            return _fail(self, e)

    def _workspace(self, ws):
        if not ws:
            return 0
        w = self._ws_ints.get(ws)
        if w is None:
            if len(self._ws_ints) >= 256:
                self._ws_ints.clear()
            w = self._ws_ints[ws] = self._addr(ws)
        return w

    def hipdnnEnginePluginExecuteOpGraph(self, handle, execution_context, workspace, device_buffers,
                                         num_device_buffers):
        # The hot path (spelled out rather than through @_entry: one Python frame less).
        try:
            c = self._handles_c.get(handle)
            if c is None:
                c = self._container(handle)
            ctx = self._contexts_c.get(execution_context)
            if ctx is None:
                ctx = self._context(execution_context)
            ws = self._ws_ints.get(workspace, None) if workspace else 0
            if ws is None:
                ws = self._workspace(workspace)
            m = None
            if num_device_buffers and device_buffers:  # (inlined _buffers: its cache hit)
                m = self._bufmaps.get(self._fbuf(device_buffers, 16 * num_device_buffers)[:])
            if m is None:
                c.container.execute(ctx, ws, self._buffers(device_buffers, num_device_buffers), c)
            else:
                c.container.execute(ctx, ws, _DeviceBuffers(m, self.ffi), c)
            return 0
        except BaseException as e:  # noqa: BLE001 - never let anything reach C
            return _fail(self, e)

    @_entry
    def hipdnnEnginePluginExecuteOpGraphWithOverrides(self, handle, execution_context, workspace,
                                                      device_buffers, num_device_buffers,
                                                      num_overrides, *rest):
        self._container(handle)
        self._context(execution_context)
        raise PluginError(NOT_APPLICABLE, "this Python plugin does not support shape overrides")

    # ------------------------------------------------------------------ serialization (RFC 0009)
    def _serialize(self, handle, ctx_handle, serialized, engine_id=None):
        c = self._container(handle)
        ctx = self._context(ctx_handle)
        self._null(serialized, "serialized_context")
        if engine_id is not None and int(engine_id) != ctx.engine_id:
            raise PluginError(INVALID_VALUE, f"engine id {engine_id} does not match the execution "
                                             f"context's engine {ctx.engine_id}")
        data = bytes(c.serialize_execution_context(ctx))
        if not data:
            raise PluginError(INTERNAL_ERROR, "the engine produced an empty serialized context")
        buf = self.ffi.new("char[]", data)
        with self._lock:
            self._payloads[self._addr(buf)] = buf
        serialized.ptr = buf
        serialized.size = len(data)

    @_entry
    def hipdnnEnginePluginSerializeExecutionContextWithEngineId(self, handle, engine_id,
                                                                execution_context, serialized):
        self._serialize(handle, execution_context, serialized, engine_id)

    @_entry
    def hipdnnEnginePluginSerializeExecutionContext(self, handle, execution_context, serialized):
        self._serialize(handle, execution_context, serialized)

    @_entry
    def hipdnnEnginePluginDestroySerializedExecutionContext(self, handle, serialized):
        self._container(handle)
        self._null(serialized, "serialized_context")
        if serialized.ptr == self.ffi.NULL:
            serialized.size = 0
            return  # already destroyed
        with self._lock:
            buf = self._payloads.pop(self._addr(serialized.ptr), None)
        if buf is None:
            raise PluginError(BAD_PARAM, "serialized_context was not created by this plugin")
        serialized.ptr = self.ffi.NULL
        serialized.size = 0

    @_entry
    def hipdnnEnginePluginCreateExecutionContextFromSerialized(self, handle, serialized,
                                                               execution_context):
        c = self._container(handle)
        self._null(execution_context, "execution_context")
        self._null(serialized, "serialized_context")
        if serialized.ptr == self.ffi.NULL or serialized.size == 0:
            raise PluginError(BAD_PARAM, "serialized_context is empty")
        data = self.ffi.buffer(self.ffi.cast("char*", serialized.ptr), serialized.size)[:]
        ctx = c.create_execution_context_from_serialized(data)
        self._add_context(ctx, execution_context)

    # ------------------------------------------------------------------ table
    SERIALIZATION = ("hipdnnEnginePluginSerializeExecutionContext",
                     "hipdnnEnginePluginSerializeExecutionContextWithEngineId",
                     "hipdnnEnginePluginDestroySerializedExecutionContext",
                     "hipdnnEnginePluginCreateExecutionContextFromSerialized")
    UNSUPPORTED = ("hipdnnEnginePluginExecuteOpGraphWithOverrides",)

    def provided(self) -> list:
        """The C functions this plugin provides (what a host's function table should hold).
        The serialization trio is provided unless the plugin opts out
        (``supports_plan_serialization = False`` on the plugin class)."""
        skip = set(self.UNSUPPORTED)
        if not getattr(self.plugin, "supports_plan_serialization", True):
            skip.update(self.SERIALIZATION)
        return [s.name for s in signatures()
                if s.header in ENGINE_HEADERS and s.name not in skip]
