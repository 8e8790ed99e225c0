"""The process-wide engine-plugin host (spec §3, §6).

State (one lock, :data:`_lock`): the configured plugin paths (sorted, de-duplicated), the loading
mode, the unloading mode, the live :class:`PluginManager` (shared by every handle) and, in LAZY
mode, a "persistent" pin that keeps it loaded after the last handle is destroyed.

``entry.create_handle`` calls :func:`attach_handle`, which loads the plugins on the first handle
and returns a :class:`HandlePlugins` (one plugin handle per plugin) stored in ``handle.plugins``.
"""
from __future__ import annotations

import importlib.util
import os
import threading
import weakref

from ...errors import (BadParamError, HipdnnError, InternalError, NotSupportedError,
                       NullPointerError, PluginError)
from ...plugin_sdk import loader as pyloader
from .. import env, log, runtime
from . import heuristics, loader
from .discovery import DEFAULT_ENGINE_DIR, DEFAULT_HEURISTIC_DIR, candidate_paths
from .loader import EnginePlugin, fnv1a64, hex_id
from ._logs import err as _err, info as _info, warn as _warn

ADDITIVE, ABSOLUTE = 0, 1
LAZY, EAGER = 0, 1
BUILTIN_ENGINE_NAMES = ("HIP_MLOPS_ENGINE", "HIPBLASLT_ENGINE", "MIOPEN_ENGINE",
                        "MIOPEN_ENGINE_DETERMINISTIC", "ASM_SDPA_ENGINE", "ROCKE_ENGINE")
BUILTIN_NAME_BY_ID = {fnv1a64(n): n for n in BUILTIN_ENGINE_NAMES}

_lock = threading.RLock()
_paths: tuple = ()
_mode = ADDITIVE
_unload_mode = LAZY
_manager = None       # the live PluginManager (None when unloaded)
_persistent = None    # LAZY pin


def _note(sev, msg):
    """Log a line the plugin loader reports (hipDNN's wording) at its severity."""
    if log.enabled(sev):
        log.log(sev, msg)


def set_plugin_log_level(level: int) -> None:
    """hipdnnBackendSetGlobalLogLevel_ext's hook (hipDNN: EnginePluginResourceManager::
    setPluginLogLevel): every loaded plugin gets hipdnnPluginSetLogLevel(level).  A plugin that
    fails is logged (WARN), never fatal, and the others still get the call."""
    with _lock:  # held: no unload (dlclose) while a plugin is being called
        for p in list(_manager.plugins) if _manager is not None else []:
            try:
                failure = p.set_log_level(level)
            except Exception as e:  # a misbehaving plugin must not fail the API call
                failure = f"Failed to set log level {int(level)} on plugin '{p.name}': {e}"
            if failure:
                _warn(failure)
    heuristics.set_log_level(level)   # heuristic plugins too (each failure logged)


log.add_level_listener(set_plugin_log_level)


def engine_name(plugin: EnginePlugin | None, eid: int) -> str:
    """§3.10: plugin GetEngineName → built-in registry → 0x hex."""
    if plugin is not None:
        nm = plugin.names.get(eid)
        if nm:
            return nm
    return BUILTIN_NAME_BY_ID.get(eid) or hex_id(eid)


# =========================================================================== manager
class PluginManager:
    """The loaded plugins (shared by all handles)."""

    def __init__(self, search_paths, entry_points=False):
        self.plugins: list[EnginePlugin] = []
        self.loaded_paths: list[str] = []
        self.owner: dict[int, EnginePlugin] = {}
        self.dropped: set[int] = set()
        self.users = 0
        self.errors: list[str] = []
        self._load(search_paths, entry_points)

    def _candidates(self, search_paths, entry_points=False):
        out = set(_entry_point_paths()) if entry_points else set()
        return sorted(out | set(candidate_paths(search_paths)))

    def _load(self, search_paths, entry_points=False):
        cb = runtime.lib.hipdnn_cabi_backend_logging_callback()
        for path in self._candidates(search_paths, entry_points):
            _info(f"Attempting to load plugin from [{path}]")
            try:
                if pyloader.is_python_plugin_path(path):
                    # A Python plugin: the SDK binds it to C function pointers with the exact
                    # plugin signatures, and from here on it takes the same path as a .so.
                    table = pyloader.load_python_plugin(path)
                    plugin = EnginePlugin(path, table, 0)
                    plugin.python_table = table
                else:
                    if os.path.splitext(path)[1] != ".so":
                        raise BadParamError("Invalid file extension. Expected .so")
                    if not os.path.exists(path):
                        raise PluginError(f"Shared libary: plugin file does not exist: {path}")
                    h, table = loader.load_shared_object(path)
                    plugin = EnginePlugin(path, table, h)
                try:
                    # the backend's current level, as hipDNN hands it over at load (§3.5)
                    plugin.initialize(cb, log.get_global_level(), _note)
                except BaseException:
                    plugin.close()
                    table = getattr(plugin, "python_table", None)
                    if table is not None:  # free the slot: 8 rejected plugins would fill them
                        pyloader.unload_python_plugin(table)
                    raise
            except HipdnnError as e:
                self._load_error(path, e.message)
                continue
            except Exception as e:  # a misbehaving plugin must not take the host down
                self._load_error(path, f"{type(e).__name__}: {e}")
                continue
            self.plugins.append(plugin)
            self.loaded_paths.append(path)
            _info(f"Plugin loaded successfully: {path}")
            _info(f"Plugin info: name={plugin.name}, version={plugin.version}, "
                  f"type=HIPDNN_PLUGIN_TYPE_ENGINE({loader.PLUGIN_TYPE_ENGINE})")
            self._admit(plugin)

    def _admit(self, plugin):
        """Per-engine admission (spec §3.5 step 7, hipDNN's EnginePluginManager wording): an
        engine whose reported name does not hash to its id, whose name cannot be fetched, or whose
        id an earlier plugin already provides is dropped (logged); the plugin stays loaded."""
        names_engines = "hipdnnEnginePluginGetEngineName" in plugin.fn
        named = 0
        ids = plugin.engine_ids  # sorted
        for eid in ids:
            nm = None
            if names_engines:
                try:
                    nm = plugin.engine_name_of(eid)
                except HipdnnError as e:
                    _err(f"Plugin '{plugin.name}' failed to report a name for engine "
                         f"{hex_id(eid)}: {e.message}. Dropping the engine.")
                    self.dropped.add(eid)
                    continue
            if nm is not None:
                named += 1
            name_id = fnv1a64(nm) if nm is not None else eid
            if name_id != eid:
                claimant = self.owner.get(name_id)
                if claimant is not None:
                    holder = f"plugin '{claimant.name}' provides that engine"
                elif name_id in plugin.known:
                    holder = "this plugin also declares that engine"
                else:
                    holder = "no loaded engine claims that ID"
                _err(f"Plugin '{plugin.name}' reports engine name '{nm}' for engine {hex_id(eid)}, "
                     f"but that name is the name of engine {hex_id(name_id)} ({holder}). An engine "
                     "ID must equal the hash of its name; dropping the engine.")
                self.dropped.add(eid)
                continue
            first = self.owner.get(eid)
            if first is not None:
                _err(f"Plugin '{plugin.name}' declares engine {hex_id(eid)}, which plugin "
                     f"'{first.name}' already provides. The first plugin to declare an engine "
                     "keeps it; dropping the duplicate.")
                continue
            self.owner[eid] = plugin
            if nm is not None:
                plugin.names[eid] = nm
        if named == 0:
            remedy = ("Its engine container supplies no name for any of them; give it a static "
                      "getEngineName." if names_engines else
                      "It does not export hipdnnEnginePluginGetEngineName, which engine plugin API "
                      "1.4.0 added.")
            _warn(f"Plugin '{plugin.name}' names none of its engines, so they are identified by "
                  f"their IDs. {remedy}")

    def _load_error(self, path, msg):
        text = f"Error loading plugin from [{path}]: {msg}"
        self.errors.append(text)
        _err(text)
        runtime.set_last_error(text)

    def accepted(self, plugin, eid) -> bool:
        return self.owner.get(eid) is plugin

    def engine_entries(self):
        out = []
        for eid, p in self.owner.items():
            out.append((engine_name(p, eid), eid, p.name, p.version, "HIPDNN_PLUGIN_TYPE_ENGINE"))
        out.sort(key=lambda e: (e[0].encode(), e[1], e[2].encode()))
        return out

    def unload(self):
        for p in self.plugins:
            p.close()
            table = getattr(p, "python_table", None)
            if table is not None:
                pyloader.unload_python_plugin(table)
        self.plugins = []


def _entry_point_paths():
    """Plugins registered under the ``hipdnn_cabi.engine_plugins`` entry-point group (loaded in
    ADDITIVE mode, like the default directory), as the paths of their modules."""
    out = []
    try:
        eps = pyloader.entry_point_plugins()
    except Exception as e:  # broken metadata must not break hipdnnCreate
        _warn(f"Cannot read {pyloader.ENTRY_POINT_GROUP} entry points: {e}")
        return out
    for name, ep in eps:
        try:
            spec = importlib.util.find_spec(ep.value.split(":")[0])
        except Exception as e:
            _warn(f"Engine plugin entry point {name} ({ep.value}) cannot be found: {e}")
            continue
        if spec is None or not spec.origin:
            _warn(f"Engine plugin entry point {name} ({ep.value}) cannot be found")
            continue
        origin = spec.origin
        if os.path.basename(origin) == "__init__.py":
            origin = os.path.dirname(origin)
        out.append(os.path.realpath(origin))
    return out


def _entry_points_enabled() -> bool:
    return _mode == ADDITIVE and env.get("HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS", "") in ("", "0")


def _search_paths():
    """The paths a new plugin manager loads from; HIPDNN_PLUGIN_DIR is read now (spec §3.4: when
    the manager is constructed), from the C environment."""
    pdir = env.get("HIPDNN_PLUGIN_DIR")
    default = {pdir} if pdir else {DEFAULT_ENGINE_DIR}
    if pdir:  # hipDNN's rule: it replaces the default directory (docs/plugins.md) -- say so
        _warn(f"HIPDNN_PLUGIN_DIR={pdir} replaces the default engine plugin directory "
              f"({DEFAULT_ENGINE_DIR}): the default engines load only if that directory holds them")
    if _mode != ADDITIVE:  # ABSOLUTE, or an unknown mode (spec §3.2: only the stored paths)
        return sorted(_paths)
    return sorted(set(_paths) | default)


def _drop_manager_if_unused():
    global _manager
    if _manager is not None and _manager.users == 0 and _persistent is None:
        _manager.unload()
        _manager = None


# =========================================================================== per handle
class HandlePlugins:
    """One hipdnnHandle_t's view of the plugins: one plugin handle per loaded plugin."""

    def __init__(self, manager: PluginManager):
        ffi = runtime.ffi
        self.manager = manager
        self.closed = False
        self.device = -1                 # the hipdnn handle's device (set by attach_handle)
        self.entries: list[tuple] = []   # (plugin, plugin handle cdata)
        self.by_plugin: dict = {}
        self._engines = None
        self.heuristics = None           # heuristics.HandleHeuristics (heuristic plugin handles)
        self.lock = threading.Lock()
        seen = set()
        for p in manager.plugins:
            out = ffi.new("hipdnnEnginePluginHandle_t*")
            try:
                p.call("create engine plugin handle", "hipdnnEnginePluginCreate", out)
            except HipdnnError as e:
                _err(e.message)
                continue
            h = out[0]
            key = int(ffi.cast("uintptr_t", h))
            if not key:
                _err(f"Plugin {p.name} returned a null engine plugin handle")
                continue
            if key in seen:
                _err(f"Plugin {p.name} returned an engine plugin handle already used by another plugin")
                try:
                    p.call("destroy engine plugin handle", "hipdnnEnginePluginDestroy", h)
                except HipdnnError as e:
                    _err(e.message)
                continue
            seen.add(key)
            self.entries.append((p, h))
            self.by_plugin[p] = h

    # ---------------------------------------------------------------- lifecycle
    def set_stream(self, stream: int) -> None:
        s = runtime.ffi.cast("hipStream_t", stream)
        for p, h in self.entries:
            p.call("set stream for engine plugin handle", "hipdnnEnginePluginSetStream", h, s)

    def close(self) -> None:
        global _manager
        with _lock:
            if self.closed:
                return
            self.closed = True
            for p, h in self.entries:
                try:
                    p.call("destroy engine plugin handle", "hipdnnEnginePluginDestroy", h)
                except HipdnnError as e:
                    _err(e.message)
            self.entries = []
            self.manager.users -= 1
            if self.heuristics is not None:
                self.heuristics.close()
                self.heuristics = None
            if _manager is self.manager:
                _drop_manager_if_unused()

    # ---------------------------------------------------------------- lookups
    def owner(self, eid: int):
        """(plugin, plugin handle) owning engine ``eid`` here, or None."""
        p = self.manager.owner.get(eid)
        if p is None or self.closed:
            return None
        h = self.by_plugin.get(p)
        return None if h is None else (p, h)

    def require(self, eid: int):
        r = self.owner(eid)
        if r is None:
            raise InternalError(f"Invalid engine ID: {eid}")
        return r

    def engines(self):
        if self._engines is None:
            self._engines = self.manager.engine_entries()
        return self._engines

    def engine_name(self, eid: int) -> str:
        """Engine ``eid``'s name here (§3.10: its owning plugin's name for it, else the built-in
        registry, else 0x hex)."""
        r = self.owner(eid)
        return engine_name(r[0] if r else None, eid)

    # ---------------------------------------------------------------- engine calls (§3.8, §3.9)
    def engine_details(self, eid: int, graph, owner) -> tuple:
        """hipdnnEnginePluginGetEngineDetails of engine ``eid`` for ``graph``: (plugin, a copy of
        the EngineDetails bytes).  The plugin's buffer stays alive until ``owner`` dies; then
        DestroyEngineDetails runs."""
        plugin, ph = self.require(eid)
        ffi = runtime.ffi
        gd = graph_const_data(graph)
        out = ffi.new("hipdnnPluginConstData_t*")
        plugin.call("get engine details", "hipdnnEnginePluginGetEngineDetails", ph, eid, gd.c, out)
        if not out.ptr or not out.size:
            if out.ptr:
                weakref.finalize(owner, _destroy_details, self, plugin, ph, out)
            raise PluginError(f"Engine details for engine ID {eid} are empty or null")
        weakref.finalize(owner, _destroy_details, self, plugin, ph, out)
        return plugin, ffi.buffer(out.ptr, out.size)[:]

    def workspace_size(self, eid: int, config: bytes, graph) -> int:
        """hipdnnEnginePluginGetWorkspaceSize of engine ``eid`` for EngineConfig bytes ``config``
        and ``graph``."""
        plugin, ph = self.require(eid)
        cfg = ConstData(config)
        gd = graph_const_data(graph)
        out = runtime.ffi.new("size_t*")
        plugin.call("get workspace size", "hipdnnEnginePluginGetWorkspaceSize", ph, cfg.c, gd.c, out)
        return int(out[0])

    def create_execution_context(self, eid: int, config: bytes, graph) -> tuple:
        """hipdnnEnginePluginCreateExecutionContext of engine ``eid``: (plugin, plugin handle,
        the context; NULL when the plugin returned none)."""
        plugin, ph = self.require(eid)
        cd = ConstData(config)
        gd = graph_const_data(graph)
        out = runtime.ffi.new("hipdnnEnginePluginExecutionContext_t*")
        plugin.call("create execution context", "hipdnnEnginePluginCreateExecutionContext",
                    ph, cd.c, gd.c, out)
        return plugin, ph, out[0]

    def restore_execution_context(self, eid: int, payload: bytes) -> tuple:
        """hipdnnEnginePluginCreateExecutionContextFromSerialized of engine ``eid``'s plugin:
        (plugin, plugin handle, the context; NULL when the plugin returned none)."""
        plugin, ph = self.require(eid)
        if not plugin.has_serialization:
            raise NotSupportedError("Engine plugin does not support execution context serialization")
        cd = ConstData(payload)
        out = runtime.ffi.new("hipdnnEnginePluginExecutionContext_t*")
        plugin.call("create execution context from serialized data",
                    "hipdnnEnginePluginCreateExecutionContextFromSerialized", ph, cd.c, out)
        return plugin, ph, out[0]

    @staticmethod
    def context_workspace_size(plugin, ph, context) -> int:
        """hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext."""
        ws = runtime.ffi.new("size_t*")
        plugin.call("get workspace size from execution context",
                    "hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext", ph, context, ws)
        return int(ws[0])

    def destroy_execution_context(self, plugin, ph, context) -> None:
        """hipdnnEnginePluginDestroyExecutionContext (a finalizer: logs, never raises; nothing to
        do once this handle's plugin handles are gone)."""
        if self.closed:
            return
        try:
            plugin.call("destroy execution context", "hipdnnEnginePluginDestroyExecutionContext",
                        ph, context)
        except HipdnnError as e:
            log.log(2, e.message)
        except Exception:
            pass

    @staticmethod
    def serialize_execution_context(plugin, ph, eid: int, context) -> bytes:
        """The plugin's serialized execution context (spec §3.8 "plan serialize"): the plugin owns
        the bytes for the duration of the call; they are copied, then the plugin's destroy hook
        runs (also when the save hook failed)."""
        ffi, lib = runtime.ffi, runtime.lib
        out = ffi.new("hipdnnPluginConstData_t*")
        if plugin.save_hook == "hipdnnEnginePluginSerializeExecutionContextWithEngineId":
            st = lib.tramp_hipdnnEnginePluginSerializeExecutionContextWithEngineId(
                plugin.fn[plugin.save_hook], ph, eid, context, out)
        else:  # a plugin built before WithEngineId existed: the legacy 3-argument hook
            st = lib.tramp_hipdnnEnginePluginSerializeExecutionContext(
                plugin.fn[plugin.save_hook], ph, context, out)
        if st:
            err = None
            try:
                plugin.fail("serialize execution context", st)
            except HipdnnError as e:
                err = e
            _destroy_payload(plugin, ph, out, quiet=True)
            raise err
        try:
            if not out.ptr or not out.size:
                raise PluginError("Failed to serialize execution context: the plugin returned an "
                                  "empty or null payload")
            data = ffi.buffer(ffi.cast("char*", out.ptr), out.size)[:]
        except BaseException:
            _destroy_payload(plugin, ph, out, quiet=True)
            raise
        _destroy_payload(plugin, ph, out, quiet=False)
        return data

    # ---------------------------------------------------------------- applicability (§3.6, §3.7)
    def applicable(self, graph, find_first: bool = False) -> list[int]:
        ffi = runtime.ffi
        required = tuple(graph.required_api_version())
        override = bool(getattr(graph, "override_shape_enabled", False))
        data = graph_const_data(graph)
        result: list[int] = []
        declines: list[tuple] = []   # (plugin name, the plugin's decline reasons)
        for p, h in self.entries:
            if p.api_version < required:
                _info(f"Skipping plugin {p.name}: API {p.api_version} < required {required}")
                declines.append((p.name, f"plugin API {p.api_version} < required {required}"))
                continue
            if override and not p.has_overrides:
                _info(f"Skipping plugin {p.name}: no ExecuteOpGraphWithOverrides")
                declines.append((p.name, "no ExecuteOpGraphWithOverrides (graph uses override shapes)"))
                continue
            mx = len(p.engine_ids)
            buf = ffi.new("int64_t[]", mx)
            n = ffi.new("uint32_t*")
            before = p.last_error()
            p.call("get applicable engine IDs", "hipdnnEnginePluginGetApplicableEngineIds",
                   h, data.c, buf, mx, n)
            k = int(n[0])
            why = ""
            if k < mx:
                why = _decline_text(p, before)
                if why:
                    declines.append((p.name, why))
                    _info(f"Plugin {p.name}: {why}")
            if k == 0:
                if not why:   # a reason already kept above is not repeated
                    try:
                        why = p.last_error()
                    except Exception:
                        pass
                    declines.append((p.name, why or "declined (no reason given)"))
                _info(f"Plugin {p.name} has no engine for the graph: {why or 'no reason given'}")
                continue
            if k > mx:
                raise PluginError("More applicable engines than expected")
            ids = list(buf[0:k])
            if len(set(ids)) != k:
                raise PluginError("Duplicate engine IDs returned as applicable by the plugin")
            mine = []
            for eid in sorted(ids):
                if eid not in p.known:
                    raise PluginError("Engine ID not found in the plugin's known IDs")
                own = self.manager.owner.get(eid)
                if own is None:
                    _info(f"Engine {hex_id(eid)} was dropped at load time; skipped")
                    continue
                if own is not p:
                    if eid in p.known:  # duplicate dropped at load: silently skipped
                        continue
                    raise PluginError(f"Engine ID {eid} is already associated with a different plugin")
                mine.append(eid)
            result.extend(mine)
            if find_first and mine:
                break
        try:
            graph.declines = declines   # read by the heuristics, plans and execute errors
        except AttributeError:
            pass
        return result


DECLINE_MARK = " declined the graph: "


def _decline_text(p, before: str) -> str:
    """The reasons a plugin gives for the engines it left out of an applicability answer: its
    last error after the (successful) query, when the query set it - the plugin SDK writes
    "<engine> declined the graph: <why>" there.  A message left over from an
    earlier failure (unchanged, without that mark) is not taken for a reason."""
    try:
        after = p.last_error()
    except Exception:  # noqa: BLE001 - a reason is optional
        return ""
    if not after or (after == before and DECLINE_MARK not in after):
        return ""
    return after


def describe_declines(declines) -> str:
    """"; "-joined "<engine> declined the graph: <why>" texts (plugin name added when the text
    does not say which engine declined)."""
    parts = []
    for plugin_name, why in declines or ():
        parts.append(why if DECLINE_MARK in why else f"plugin {plugin_name}: {why}")
    return "; ".join(parts)


def _destroy_details(hp, plugin, ph, details):
    if hp.closed:
        return  # the plugin handle is gone and took its allocations with it
    try:
        plugin.call("destroy engine details", "hipdnnEnginePluginDestroyEngineDetails", ph, details)
    except HipdnnError as e:
        log.log(2, e.message)
    except Exception:  # never raise from a finalizer
        pass


def _destroy_payload(plugin, ph, out, quiet):
    try:
        plugin.call("destroy serialized execution context",
                    "hipdnnEnginePluginDestroySerializedExecutionContext", ph, out)
    except HipdnnError as e:
        if not quiet:
            raise
        log.log(2, e.message)


def graph_const_data(graph) -> "ConstData":
    """hipdnnPluginConstData_t for the graph's serialized bytes; pass ``.c`` to the plugin."""
    return ConstData(graph.serialized())


class ConstData:
    """A hipdnnPluginConstData_t* (``.c``) plus the bytes it points into (kept alive)."""
    __slots__ = ("c", "raw", "_keep")

    def __init__(self, raw: bytes):
        ffi = runtime.ffi
        self.raw = raw
        self._keep = ffi.from_buffer(raw)
        self.c = ffi.new("hipdnnPluginConstData_t*")
        self.c.ptr = self._keep
        self.c.size = len(raw)


# =========================================================================== C entry points
def attach_handle(handle):
    global _manager, _persistent
    with _lock:
        if _manager is None:
            _manager = PluginManager(_search_paths(), _entry_points_enabled())
        m = _manager
        if _unload_mode == LAZY:
            _persistent = m
        m.users += 1
        hp = HandlePlugins(m)
        hp.device = getattr(handle, "device", -1)   # plans built through it are bound to it
    try:
        hp.heuristics = heuristics.attach()
    except Exception as e:  # noqa: BLE001 - heuristic plugins never break hipdnnCreate
        _err(f"Heuristic plugins unavailable: {e}")
    return hp


def _path_list(n, paths, fn):
    ffi = runtime.ffi
    if n > 0 and not paths:
        raise NullPointerError(f"{fn}: paths is nullptr")
    out = []
    for i in range(n):
        if not paths[i]:
            raise NullPointerError(f"{fn}: paths[{i}] is nullptr")
        out.append(ffi.string(paths[i]).decode("utf-8", "replace"))
    return out


def set_engine_plugin_paths(n, paths, mode):
    global _paths, _mode, _persistent
    new = _path_list(n, paths, "hipdnnSetEnginePluginPaths_ext")
    with _lock:
        new_set = tuple(sorted(set(new)))
        if new_set == _paths and mode == _mode:
            return 0
        _persistent = None
        if _manager is not None and _manager.users > 0:
            raise NotSupportedError("Cannot set engine plugin paths with an active handle.")
        _drop_manager_if_unused()
        if mode == ABSOLUTE:
            _paths = new_set
        else:
            _paths = tuple(sorted(set(_paths) | set(new_set)))
        _mode = mode
    return 0


def set_heuristic_plugin_paths(n, paths, mode):
    """Heuristic plugin paths (same rules as engine plugin paths; loaded at the next handle)."""
    new = _path_list(n, paths, "hipdnnSetHeuristicPluginPaths_ext")
    heuristics.set_paths(new, mode)
    return 0


def set_plugin_unload_mode(mode):
    global _unload_mode, _persistent
    with _lock:
        if mode == EAGER:
            _unload_mode = EAGER
            _persistent = None
            _drop_manager_if_unused()
        elif mode == LAZY:
            _unload_mode = LAZY
            if _manager is not None:
                _persistent = _manager
        else:
            raise BadParamError(f"Invalid plugin unloading mode for engine plugins: {mode}")
    return 0


def _plugins_of(handle) -> HandlePlugins | None:
    return getattr(handle, "plugins", None)


def get_loaded_engine_plugin_paths(handle, n, paths, maxlen):
    ffi = runtime.ffi
    if not n or not maxlen:
        raise NullPointerError("hipdnnGetLoadedEnginePluginPaths_ext: null pointer argument")
    hp = _plugins_of(handle)
    # hipDNN lists the plugin manager's loaded files: every plugin that loaded, also one whose
    # hipdnnEnginePluginCreate failed for this handle (it stays loaded, just unused here).
    loaded = [os.fsencode(p) for p in hp.manager.loaded_paths] if hp is not None else []
    loaded = sorted(set(loaded))
    need = max((len(x) for x in loaded), default=-1) + 1
    if not paths:
        n[0] = len(loaded)
        maxlen[0] = need
        return 0
    if n[0] < len(loaded) or (loaded and maxlen[0] < need):
        raise BadParamError("Insufficient buffer space provided.")
    ml = int(maxlen[0])
    for i, x in enumerate(loaded):
        if not paths[i]:
            raise BadParamError(f"hipdnnGetLoadedEnginePluginPaths_ext: paths[{i}] is nullptr")
    for i, x in enumerate(loaded):
        data = x[:ml - 1] + b"\0"
        ffi.memmove(paths[i], data, len(data))
    n[0] = len(loaded)
    return 0


def _entries(handle):
    hp = _plugins_of(handle)
    return hp.engines() if hp is not None else []


def get_engine_count(handle, n):
    if not n:
        raise NullPointerError("hipdnnGetEngineCount_ext: numEngines is nullptr")
    n[0] = len(_entries(handle))
    return 0


def _copy_out(ffi, buf, data: bytes):
    ffi.memmove(buf, data + b"\0", len(data) + 1)


def get_engine_info(handle, idx, eid, name, name_len, plugin, plugin_len, ver, ver_len, typ, typ_len):
    if not (name_len and plugin_len and ver_len and typ_len):
        raise NullPointerError("hipdnnGetEngineInfo_ext: null length pointer")
    ents = _entries(handle)
    if idx >= len(ents):
        raise BadParamError(f"Engine index {idx} out of range ({len(ents)} engines loaded).")
    nm, i, pname, pver, ptype = ents[idx]
    if eid:
        eid[0] = i
    return copy_string_set([nm, pname, pver, ptype], [name, plugin, ver, typ],
                           [name_len, plugin_len, ver_len, typ_len])


def copy_string_set(strings, bufs, lens) -> int:
    """The four-string query of hipdnnGetEngineInfo_ext / hipdnnGetHeuristicPolicyInfo_ext: any
    buffer NULL → every length = strlen + 1 (a size query); any length too small → BAD_PARAM
    "Insufficient buffer space provided." (nothing copied); else every string copied with its NUL."""
    ffi = runtime.ffi
    strs = [s.encode() for s in strings]
    if any(not b for b in bufs):
        for s, L in zip(strs, lens):
            L[0] = len(s) + 1
        return 0
    if any(L[0] < len(s) + 1 for s, L in zip(strs, lens)):
        raise BadParamError("Insufficient buffer space provided.")
    for s, b in zip(strs, bufs):
        _copy_out(ffi, b, s)
    return 0


def get_engine_id_by_name(handle, name, eid):
    ffi = runtime.ffi
    if not name or not eid:
        raise NullPointerError("hipdnnGetEngineIdByName_ext: null pointer argument")
    want = ffi.string(name).decode("utf-8", "replace")
    for nm, i, *_ in _entries(handle):
        if nm == want and want:
            eid[0] = i
            return 0
    raise NotSupportedError(f"No loaded engine is named '{want}'.")


def get_engine_name_by_id(handle, eid, name, length):
    ffi = runtime.ffi
    if not length:
        raise NullPointerError("hipdnnGetEngineNameById_ext: length is nullptr")
    for nm, i, *_ in _entries(handle):
        if i == eid:
            s = nm.encode()
            if not name:
                length[0] = len(s) + 1
                return 0
            if length[0] < len(s) + 1:
                raise BadParamError("hipdnnGetEngineNameById_ext: insufficient buffer space provided.")
            _copy_out(ffi, name, s)
            return 0
    raise NotSupportedError(f"No loaded engine has id {eid}.")


def _heuristics_of(handle):
    hp = _plugins_of(handle)
    return getattr(hp, "heuristics", None) if hp is not None else None


def _policies(handle):
    hh = _heuristics_of(handle)
    return hh.policies() if hh is not None else heuristics.builtin_entries()


def get_heuristic_policy_count(handle, n):
    if not n:
        raise NullPointerError("hipdnnGetHeuristicPolicyCount_ext: count is nullptr")
    n[0] = len(_policies(handle))
    return 0


def get_heuristic_policy_info(handle, idx, pid, name, name_len, plugin, plugin_len, pver, pver_len,
                              aver, aver_len):
    if not (name_len and plugin_len and pver_len and aver_len):
        raise NullPointerError("hipdnnGetHeuristicPolicyInfo_ext: null length pointer")
    ents = _policies(handle)
    if idx >= len(ents):
        raise BadParamError(f"Heuristic policy index {idx} out of range ({len(ents)} policies "
                            "loaded).")
    i, nm, pname, pv, av = ents[idx]
    if pid:
        pid[0] = i
    return copy_string_set([nm, pname, pv, av], [name, plugin, pver, aver],
                           [name_len, plugin_len, pver_len, aver_len])
