"""Heuristic plugins (``include/hipdnn_plugin_sdk/HeuristicsPluginApi.h``) and the policy pipeline
of ENGINEHEUR finalize (spec §1.6, docs/plugins.md "Heuristic plugins").

A heuristic plugin is a ``.so`` (or a Python plugin bound to a slot of libhipdnn_backend.so, see
:mod:`hipdnn_cabi.plugin_sdk.heuristics`) that offers one or more *policies*: each policy orders
the engines the engine plugins found applicable to a graph.  The process-wide
:class:`HeuristicManager` loads the plugins found on the heuristic plugin paths (same path rules
and modes as engine plugins; ``HIPDNN_HEURISTIC_PLUGIN_DIR`` replaces the default directory
``hipdnn_plugins/heuristics/``); each hipdnn handle gets one heuristic plugin handle per plugin
(:class:`HandleHeuristics`).  At ENGINEHEUR finalize a plugin policy runs:

    PolicyDescriptorCreate → SetSerializedGraph → SetEngineIds → HandleSetDeviceProperties
    (once per plugin handle and finalize) → FinalizeWithHost (when exported) or Finalize →
    GetSortedEngineIds (count, then ids) → GetEngineConfig per engine (when exported) →
    GetTrace (when exported; logged at info) → PolicyDescriptorDestroy.

Anything a policy does wrong (a failing call, ids that are not candidates, duplicates, an empty
order) is logged as an error and the policy is skipped: the next policy in the order decides.
"""
from __future__ import annotations

import os
import platform
import threading

from ..._generated.enums import (HIPDNN_HEURISTIC_API_VERSION_MAJOR,
                                HIPDNN_HEURISTIC_API_VERSION_MINOR,
                                HIPDNN_HEURISTIC_API_VERSION_PATCH, Severity)
from ... import __version__, device
from ...errors import BadParamError, HipdnnError, NotSupportedError, PluginError
from ...plugin_sdk import loader as pyloader
from .. import env, graph_fb, log, runtime
from .discovery import candidate_paths
from .loader import PluginLibrary, fnv1a64, hex_id, parse_version, status_name
from ._logs import err as _err, info as _info

HIPDNN_HEURISTIC_API_VERSION = (f"{HIPDNN_HEURISTIC_API_VERSION_MAJOR}."
                                f"{HIPDNN_HEURISTIC_API_VERSION_MINOR}."
                                f"{HIPDNN_HEURISTIC_API_VERSION_PATCH}")
ADDITIVE, ABSOLUTE = 0, 1
PLUGIN_TYPE_HEURISTIC = 2
DEFAULT_HEURISTIC_DIR = "hipdnn_plugins/heuristics/"
POLICY_CONFIG = "SelectionHeuristic::Config"
POLICY_STATIC = "SelectionHeuristic::StaticOrdering"
BUILTIN_POLICIES = (POLICY_CONFIG, POLICY_STATIC)
BUILTIN_POLICY_IDS = {fnv1a64(n): n for n in BUILTIN_POLICIES}

BASE_REQUIRED = ("hipdnnPluginGetName", "hipdnnPluginGetVersion", "hipdnnPluginGetApiVersion",
                 "hipdnnPluginGetType", "hipdnnPluginSetLoggingCallback",
                 "hipdnnPluginGetLastErrorString")
BASE_OPTIONAL = ("hipdnnPluginSetLogLevel",)
HEUR_REQUIRED = (
    "hipdnnHeuristicPluginGetAllPolicyIds", "hipdnnHeuristicPluginGetPolicyName",
    "hipdnnHeuristicHandleCreate", "hipdnnHeuristicHandleDestroy",
    "hipdnnHeuristicHandleSetDeviceProperties", "hipdnnHeuristicPolicyDescriptorCreate",
    "hipdnnHeuristicPolicyDescriptorDestroy", "hipdnnHeuristicPolicySetEngineIds",
    "hipdnnHeuristicPolicySetSerializedGraph", "hipdnnHeuristicPolicyFinalize",
    "hipdnnHeuristicPolicyGetSortedEngineIds",
)
HEUR_OPTIONAL = ("hipdnnHeuristicPolicyFinalizeWithHost", "hipdnnHeuristicPolicyGetEngineConfig",
                 "hipdnnHeuristicPolicyGetTrace")
ALL_SYMBOLS = BASE_REQUIRED + BASE_OPTIONAL + HEUR_REQUIRED + HEUR_OPTIONAL
MAX_POLICIES = 4096
HOST_CALLBACKS_VERSION = 1
NOT_APPLICABLE = 5

_lock = threading.RLock()
_paths: tuple = ()
_mode = ADDITIVE
_manager = None


def _env(name: str):
    return env.get(name)   # the C environment (docs/plugins.md)


# =========================================================================== one plugin
class HeuristicPlugin(PluginLibrary):
    """One loaded heuristic plugin: its function table and the answers validated at load."""

    def __init__(self, path: str, table: dict, dl_handle: int = 0):
        super().__init__(path, table, dl_handle)
        self.api_version_text = ""
        self.policies: dict[int, str] = {}     # policy id -> name (validated)
        self.python_table = None

    # ---------------------------------------------------------------- load-time validation
    def initialize(self, logging_callback: int | None = None) -> None:
        ffi = runtime.ffi
        for name in BASE_REQUIRED + HEUR_REQUIRED:
            if name not in self.fn:
                raise PluginError(
                    "ERROR: HEURISTIC PLUGIN ABI INCOMPLETE\n"
                    f"Plugin: {self.path}\nMissing required symbol: {name}\n"
                    "This plugin does not implement the complete heuristic plugin C ABI.\n"
                    "See plugin_sdk/include/hipdnn_plugin_sdk/HeuristicsPluginApi.h for the full API.\n"
                    f"Original error: undefined symbol: {name}")
        tp = ffi.new("hipdnnPluginType_t*")
        self.call("get plugin type", "hipdnnPluginGetType", tp)
        if int(tp[0]) != PLUGIN_TYPE_HEURISTIC:
            raise PluginError("Plugin type mismatch: expected HIPDNN_PLUGIN_TYPE_HEURISTIC, got "
                              f"{int(tp[0])}")
        try:
            self.name = self._string("get plugin name", "hipdnnPluginGetName")
        except PluginError:
            self.name = ""
        if not self.name:
            raise PluginError("Cannot load heuristic plugin: plugin name is empty")
        self.version = self._string("get plugin version", "hipdnnPluginGetVersion")
        text = self._string("get API version", "hipdnnPluginGetApiVersion")
        self.api_version_text = text
        v = parse_version(text)
        if v is None or v[0] != HIPDNN_HEURISTIC_API_VERSION_MAJOR:
            raise PluginError(
                "ERROR: HEURISTIC PLUGIN ABI VALIDATION FAILED\n"
                f"Plugin {self.name}'s major API version ({text}) does not match expected "
                f"heuristic API major version ({HIPDNN_HEURISTIC_API_VERSION_MAJOR})\n"
                f"Expected API version: {HIPDNN_HEURISTIC_API_VERSION}")
        if logging_callback:
            st = runtime.lib.tramp_hipdnnPluginSetLoggingCallback(
                self.fn["hipdnnPluginSetLoggingCallback"], ffi.cast("hipdnnCallback_t", logging_callback))
            if st:
                _err(f"Heuristic plugin {self.name}: SetLoggingCallback failed with "
                     f"{status_name(st)}({st})")
        self.set_log_level(log.get_global_level())
        # policies: two calls, count then ids; names must hash to the ids
        n = ffi.new("uint32_t*")
        self.call("get number of policies", "hipdnnHeuristicPluginGetAllPolicyIds", ffi.NULL, 0, n)
        count = int(n[0])
        if count == 0:
            raise PluginError("No policies found in the plugin")
        if count > MAX_POLICIES:
            raise PluginError(f"Implausible policy count {count} reported by the plugin")
        buf = ffi.new("int64_t[]", count)
        m = ffi.new("uint32_t*")
        self.call("get all policy IDs", "hipdnnHeuristicPluginGetAllPolicyIds", buf, count, m)
        if int(m[0]) != count:
            raise PluginError("Number of policies returned does not match the number reported "
                              "by the plugin")
        ids = list(buf)
        if len(set(ids)) != len(ids):
            raise PluginError("Duplicate policy IDs found")
        for pid in sorted(ids):
            try:
                name = self._string("get policy name", "hipdnnHeuristicPluginGetPolicyName", pid)
            except PluginError:
                name = ""
            if not name:
                raise PluginError(f"Heuristic plugin returned empty name for policy ID {pid}")
            if fnv1a64(name) != pid:
                raise PluginError(f"Policy ID/name mismatch: plugin reported policy '{name}' with "
                                  f"ID {pid} but policyNameToId yields {fnv1a64(name)}")
            self.policies[pid] = name

    def set_log_level(self, level: int) -> None:
        """hipdnnPluginSetLogLevel (optional): a failure is logged (WARN), never fatal."""
        try:
            failure = super().set_log_level(level)
        except Exception as e:  # noqa: BLE001
            failure = f"Failed to set log level {int(level)} on plugin '{self.name}': {e}"
        if failure and log.enabled(Severity.HIPDNN_SEV_WARN):
            log.log(Severity.HIPDNN_SEV_WARN, failure)

    def close(self):
        if self.dl_handle:
            runtime.lib.hipdnn_cabi_dlclose(self.dl_handle)
            self.dl_handle = 0
        if self.python_table is not None:
            pyloader.unload_python_plugin(self.python_table)
            self.python_table = None


def load_shared_object(path: str) -> tuple[int, dict]:
    lib, ffi = runtime.lib, runtime.ffi
    h = lib.hipdnn_cabi_dlopen(path.encode(), 1)
    if not h:
        raise BadParamError(ffi.string(lib.hipdnn_cabi_dlerror()).decode("utf-8", "replace"))
    table = {}
    for name in ALL_SYMBOLS:
        p = lib.hipdnn_cabi_dlsym(h, name.encode())
        if p:
            table[name] = p
    return h, table


# =========================================================================== manager
class HeuristicManager:
    """The loaded heuristic plugins (shared by every handle) and their policies."""

    def __init__(self, search_paths):
        self.plugins: list[HeuristicPlugin] = []
        self.policy_owner: dict[int, HeuristicPlugin] = {}
        self.errors: list[str] = []
        self.users = 0
        self._load(search_paths)

    def _candidates(self, search_paths):
        return candidate_paths(search_paths)   # the engine plugins' path rules

    def _load(self, search_paths):
        cb = runtime.lib.hipdnn_cabi_backend_logging_callback()
        for path in self._candidates(search_paths):
            plugin = None
            try:
                if pyloader.is_python_plugin_path(path):
                    table = pyloader.load_python_plugin(path)   # a heuristic plugin binds alike
                    plugin = HeuristicPlugin(path, table, 0)
                    plugin.python_table = table
                else:
                    if os.path.splitext(path)[1] != ".so":
                        raise BadParamError("Invalid file extension. Expected .so")
                    if not os.path.exists(path):
                        raise PluginError(f"Shared libary: plugin file does not exist: {path}")
                    h, table = load_shared_object(path)
                    plugin = HeuristicPlugin(path, table, h)
                plugin.initialize(cb)
            except HipdnnError as e:
                self._load_error(path, e.message, plugin)
                continue
            except Exception as e:  # noqa: BLE001 - a misbehaving plugin must not take the host down
                self._load_error(path, f"{type(e).__name__}: {e}", plugin)
                continue
            self.plugins.append(plugin)
            for pid, name in sorted(plugin.policies.items()):
                if pid in BUILTIN_POLICY_IDS:
                    _err(f"Heuristic plugin '{plugin.name}' declares policy '{name}', which is a "
                         "built-in policy; the built-in policy is kept.")
                    continue
                first = self.policy_owner.get(pid)
                if first is not None:
                    _err(f"Heuristic plugin '{plugin.name}' declares policy '{name}' "
                         f"({hex_id(pid)}), which plugin '{first.name}' already provides. The "
                         "first plugin to declare a policy keeps it; dropping the duplicate.")
                    continue
                self.policy_owner[pid] = plugin
            _info(f"Loaded heuristic plugin {plugin.name} {plugin.version} from {path} "
                  f"(policies: {', '.join(plugin.policies.values())})")

    def _load_error(self, path, msg, plugin):
        if plugin is not None:
            try:
                plugin.close()
            except Exception:  # noqa: BLE001
                pass
        text = f"Error loading heuristic plugin from [{path}]: {msg}"
        self.errors.append(text)
        _err(text)

    def set_log_level(self, level):
        for p in self.plugins:
            p.set_log_level(level)

    def unload(self):
        for p in self.plugins:
            p.close()
        self.plugins = []
        self.policy_owner = {}


def _search_paths():
    pdir = _env("HIPDNN_HEURISTIC_PLUGIN_DIR")
    default = {pdir} if pdir else {DEFAULT_HEURISTIC_DIR}
    if _mode != ADDITIVE:
        return sorted(_paths)
    return sorted(set(_paths) | default)


def manager() -> HeuristicManager | None:
    return _manager


def attach() -> "HandleHeuristics":
    """A new hipdnn handle: load the heuristic plugins (first handle) and make its plugin handles."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = HeuristicManager(_search_paths())
        _manager.users += 1
        return HandleHeuristics(_manager)


def set_paths(new: list, mode: int) -> None:
    global _paths, _mode, _manager
    with _lock:
        s = tuple(sorted(set(new)))
        if s == _paths and mode == _mode:
            return
        if _manager is not None and _manager.users > 0:
            raise NotSupportedError("Cannot set heuristic plugin paths with an active handle.")
        if _manager is not None:
            _manager.unload()
            _manager = None
        _paths = s if mode == ABSOLUTE else tuple(sorted(set(_paths) | set(s)))
        _mode = mode


def set_log_level(level: int) -> None:
    with _lock:
        if _manager is not None:
            _manager.set_log_level(level)


# =========================================================================== per handle
class HandleHeuristics:
    """One hipdnn handle's heuristic plugin handles (one per loaded plugin)."""

    def __init__(self, mgr: HeuristicManager):
        ffi = runtime.ffi
        self.manager = mgr
        self.closed = False
        self.handles: dict = {}      # plugin -> hipdnnHeuristicHandle_t
        self.lock = threading.Lock()
        for p in mgr.plugins:
            out = ffi.new("hipdnnHeuristicHandle_t*")
            try:
                p.call("create heuristic handle", "hipdnnHeuristicHandleCreate", out)
            except HipdnnError as e:
                _err(f"Heuristic plugin {p.name}: {e.message}")
                continue
            if not out[0]:
                _err(f"Heuristic plugin {p.name} returned a null heuristic handle")
                continue
            self.handles[p] = out[0]

    def close(self):
        global _manager
        with _lock:
            if self.closed:
                return
            self.closed = True
            for p, h in self.handles.items():
                try:
                    p.call("destroy heuristic handle", "hipdnnHeuristicHandleDestroy", h)
                except HipdnnError as e:
                    _err(f"Heuristic plugin {p.name}: {e.message}")
            self.handles = {}
            self.manager.users -= 1

    def policies(self) -> list[tuple]:
        """[(policy id, policy name, plugin name, plugin version, api version)] of the policies
        usable on this handle, built-ins first, then by (name, id) byte-wise."""
        out = builtin_entries()
        plug = []
        for pid, p in self.manager.policy_owner.items():
            if p in self.handles:
                plug.append((pid, p.policies[pid], p.name, p.version, p.api_version_text))
        plug.sort(key=lambda e: (e[1].encode(), e[0]))
        return out + plug

    def owner(self, pid: int):
        p = self.manager.policy_owner.get(pid)
        if p is None or self.closed:
            return None
        h = self.handles.get(p)
        return None if h is None else (p, h)

    # ---------------------------------------------------------------- the policy pipeline
    def run_policy(self, pid: int, graph_bytes: bytes, candidates: list[int], device_blob: bytes,
                   ranking_metric: str | None, props_done: set):
        """Run plugin policy ``pid``.  Returns (ordered ids, {engine id: config bytes}) when the
        policy applied, None when it declined; raises on misbehaviour."""
        ffi = runtime.ffi
        p, h = self.owner(pid)
        pname = p.policies[pid]
        with self.lock:  # a plugin handle is single-threaded (HeuristicsPluginApi contract)
            if p not in props_done:
                dev = ffi.new("hipdnnPluginConstData_t*")
                keep = ffi.from_buffer(device_blob)
                dev.ptr, dev.size = keep, len(device_blob)
                p.call("set device properties", "hipdnnHeuristicHandleSetDeviceProperties", h, dev)
                props_done.add(p)
            out = ffi.new("hipdnnHeuristicPolicyDescriptor_t*")
            p.call("create policy descriptor", "hipdnnHeuristicPolicyDescriptorCreate", h, pid, out)
            d = out[0]
            if not d:
                raise PluginError(f"Policy '{pname}' returned a null policy descriptor")
            try:
                return self._drive(p, pname, d, graph_bytes, candidates, ranking_metric)
            finally:
                try:
                    p.call("destroy policy descriptor", "hipdnnHeuristicPolicyDescriptorDestroy", d)
                except HipdnnError as e:
                    _err(f"Heuristic policy '{pname}': {e.message}")

    def _drive(self, p, pname, d, graph_bytes, candidates, ranking_metric):
        ffi = runtime.ffi
        g = ffi.new("hipdnnPluginConstData_t*")
        gkeep = ffi.from_buffer(graph_bytes)
        g.ptr, g.size = gkeep, len(graph_bytes)
        p.call("set serialized graph", "hipdnnHeuristicPolicySetSerializedGraph", d, g)
        ids = ffi.new("int64_t[]", max(1, len(candidates)))
        for i, e in enumerate(candidates):
            ids[i] = e
        p.call("set engine IDs", "hipdnnHeuristicPolicySetEngineIds", d, ids, len(candidates))
        applied = ffi.new("int32_t*")
        fwh = p.fn.get("hipdnnHeuristicPolicyFinalizeWithHost")
        if fwh:
            host = ffi.new("hipdnnHeuristicHostCallbacks_t*")
            host.version = HOST_CALLBACKS_VERSION
            host.struct_size = ffi.sizeof("hipdnnHeuristicHostCallbacks_t")
            host.context = ffi.NULL
            host.get_prediction = _no_prediction()
            metric = ffi.new("char[]", ranking_metric.encode()) if ranking_metric else ffi.NULL
            host.ranking_metric = metric
            p.call("finalize policy", "hipdnnHeuristicPolicyFinalizeWithHost", d, host, applied)
        else:
            p.call("finalize policy", "hipdnnHeuristicPolicyFinalize", d, applied)
        if not int(applied[0]):
            return None
        n = ffi.new("size_t*")
        p.call("get sorted engine IDs count", "hipdnnHeuristicPolicyGetSortedEngineIds", d, ffi.NULL, n)
        k = int(n[0])
        if k == 0:
            raise PluginError(f"Heuristic policy '{pname}' applied but returned no engine IDs")
        if k > len(candidates):
            raise PluginError(f"Heuristic policy '{pname}' returned {k} engine IDs for "
                              f"{len(candidates)} candidates")
        buf = ffi.new("int64_t[]", k)
        n[0] = k
        p.call("get sorted engine IDs", "hipdnnHeuristicPolicyGetSortedEngineIds", d, buf, n)
        got = list(buf[0:min(k, int(n[0]))])
        if not got:
            raise PluginError(f"Heuristic policy '{pname}' applied but returned no engine IDs")
        if len(set(got)) != len(got):
            raise PluginError(f"Heuristic policy '{pname}' returned duplicate engine IDs")
        cand = set(candidates)
        bad = [e for e in got if e not in cand]
        if bad:
            raise PluginError(f"Heuristic policy '{pname}' returned engine ID {hex_id(bad[0])}, "
                              "which is not an applicable engine")
        configs = {}
        gec = p.fn.get("hipdnnHeuristicPolicyGetEngineConfig")
        if gec:
            cd = ffi.new("hipdnnPluginConstData_t*")
            for eid in got:
                cd.ptr, cd.size = ffi.NULL, 0
                st = runtime.lib.tramp_hipdnnHeuristicPolicyGetEngineConfig(gec, d, eid, cd)
                if st == NOT_APPLICABLE or (st == 0 and (not cd.ptr or not cd.size)):
                    continue
                if st:
                    _err(f"Heuristic policy '{pname}': GetEngineConfig({hex_id(eid)}) failed: "
                         f"{status_name(st)}({st}), Error: {p.last_error()}")
                    continue
                configs[eid] = bytes(ffi.buffer(cd.ptr, cd.size))
        gt = p.fn.get("hipdnnHeuristicPolicyGetTrace")
        if gt and log.enabled(Severity.HIPDNN_SEV_INFO):
            tr = ffi.new("const char**")
            for eid in got:
                tr[0] = ffi.NULL
                st = runtime.lib.tramp_hipdnnHeuristicPolicyGetTrace(gt, d, eid, tr)
                if st == 0 and tr[0]:
                    _info(f"Heuristic policy '{pname}' trace for engine {hex_id(eid)}: "
                          f"{ffi.string(tr[0]).decode('utf-8', 'replace')}")
        return got, configs


_NO_PREDICTION = None


def _no_prediction():
    """The host's get_prediction callback: engine plugins of this ABI publish no predictions,
    so every query answers NOT_APPLICABLE (the plugin falls back to its own model)."""
    global _NO_PREDICTION
    if _NO_PREDICTION is None:
        ffi = runtime.ffi

        def get_prediction(context, engine_id, kind, prediction):
            if prediction != ffi.NULL:
                prediction.ptr, prediction.size = ffi.NULL, 0
            return NOT_APPLICABLE
        _NO_PREDICTION = ffi.callback("hipdnnPluginStatus_t(void*, int64_t, "
                                      "hipdnnEnginePredictionKind_t, hipdnnPluginConstData_t*)",
                                      get_prediction, error=3)
    return _NO_PREDICTION


def runtime_version() -> str:
    return str(__version__)


def builtin_entries() -> list[tuple]:
    """:meth:`HandleHeuristics.policies` entries of the built-in policies."""
    return [(fnv1a64(n), n, "hipdnn_backend", runtime_version(), HIPDNN_HEURISTIC_API_VERSION)
            for n in BUILTIN_POLICIES]


# =========================================================================== device properties
def device_properties(handle=None) -> dict:
    """The DeviceProperties table for the handle's device (the device layer's GPU when one is
    present, else a description of the host CPU with device_id -1)."""
    try:
        if device.available():
            rt = device.get_runtime()
            props = getattr(rt, "properties", None)
            if callable(props):
                d = props()
                return {"device_id": int(d.get("device_id", 0)),
                        "multi_processor_count": int(d.get("multi_processor_count", 0)),
                        "total_global_mem": int(d.get("total_global_mem", 0)),
                        "architecture_name": str(d.get("architecture_name", ""))}
    except Exception:  # noqa: BLE001 - a broken device layer must not break the heuristics
        pass
    mem = 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    return {"device_id": -1, "multi_processor_count": os.cpu_count() or 1,
            "total_global_mem": int(mem), "architecture_name": "cpu-" + platform.machine()}


def device_properties_blob(handle=None) -> bytes:
    return graph_fb.build("DeviceProperties", device_properties(handle), b"HDDP")
