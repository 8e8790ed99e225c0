"""Heuristic plugins in Python (HeuristicsPluginApi.h), on the pattern of the engine SDK.

Write a class::

    from hipdnn_cabi.plugin_sdk import HeuristicPluginBase

    class PreferSmall(HeuristicPluginBase):
        name = "prefer_small"
        version = "1.0.0"
        policy_names = ("Example::PreferSmall",)

        def sorted_engine_ids(self, graph, engine_ids, device):
            return sorted(engine_ids)      # or None to decline

    hipdnn_plugin = PreferSmall

``graph`` is the parsed :class:`~hipdnn_cabi.plugin_sdk.graph.OpGraph`, ``engine_ids`` the applicable
engines in candidate order, ``device`` the DeviceProperties as a dict (``device_id``,
``multi_processor_count``, ``total_global_mem``, ``architecture_name``).  A method that also takes
``policy`` receives the policy name (for plugins with several policies); ``engine_config(policy,
engine_id)`` (EngineConfig bytes or None) and ``trace(policy, engine_id)`` (JSON text or None) are
optional.  The host reaches the plugin through the same C function-pointer surface as a ``.so``
(a slot of libhipdnn_backend.so), and ``hipdnn-cabi export-plugin`` builds a standalone ``.so``
that exports exactly PluginApi.h + HeuristicsPluginApi.h.
"""
from __future__ import annotations

import inspect
import itertools

from ..schemas._generated.DeviceProperties import DeviceProperties
from ..schemas.verifier import VerificationError, verify
from .cabi import CAdapter, PluginApiAdapter, _entry
from .errors import BAD_PARAM, NOT_APPLICABLE, NOT_INITIALIZED, PluginError
from .graph import parse_graph
from .signatures import signatures

HEURISTIC_TYPE = 2   # HIPDNN_PLUGIN_TYPE_HEURISTIC
HEURISTIC_HEADERS = ("hipdnn_plugin_sdk/PluginApi.h", "hipdnn_plugin_sdk/HeuristicsPluginApi.h")
_ids = itertools.count(1)


def _fnv(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & ((1 << 64) - 1)
    return h - (1 << 64) if h >= (1 << 63) else h


class HeuristicPluginBase:
    """Base class of a Python heuristic plugin (see the module docstring)."""
    name = "python_heuristic_plugin"
    version = "1.0.0"
    api_version = "0.1.0"          # HIPDNN_HEURISTIC_API_VERSION
    policy_names: tuple = ()       # default: (name,)
    log_callback = None
    log_level = None

    def policies(self) -> tuple:
        return tuple(self.policy_names) or (self.name,)

    def sorted_engine_ids(self, graph, engine_ids, device):  # pragma: no cover - abstract
        raise NotImplementedError

    def engine_config(self, policy, engine_id):
        return None

    def trace(self, policy, engine_id):
        return None


def is_heuristic_plugin(obj) -> bool:
    return isinstance(obj, HeuristicPluginBase)


class _Policy:
    __slots__ = ("handle", "policy", "graph", "ids", "sorted", "finalized")

    def __init__(self, handle, policy):
        self.handle, self.policy = handle, policy
        self.graph = None
        self.ids = None
        self.sorted = None
        self.finalized = False


class HeuristicCAdapter(PluginApiAdapter):
    """The heuristic plugin C API over a :class:`HeuristicPluginBase` (cdata in, status out)."""
    PLUGIN_TYPE = HEURISTIC_TYPE

    def __init__(self, plugin, ffi):
        super().__init__(plugin, ffi)
        self._policies = {_fnv(n): n for n in plugin.policies()}
        self._policy_names = {pid: ffi.new("char[]", n.encode()) for pid, n in self._policies.items()}
        self._handles: dict = {}     # address -> {"device": dict | None}
        self._descs: dict = {}       # address -> _Policy
        self._keep: dict = {}        # address -> strings handed out (traces, configs)
        sig = inspect.signature(plugin.sorted_engine_ids)
        self._wants_policy = "policy" in sig.parameters

    def _desc(self, d) -> _Policy:
        pol = self._descs.get(self._addr(d))
        if pol is None:
            raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnHeuristicPolicyDescriptor_t")
        return pol

    def _bytes(self, d, what) -> bytes:
        self._null(d, what)
        if d.ptr == self.ffi.NULL or d.size == 0:
            raise PluginError(BAD_PARAM, f"{what} is empty")
        return self.ffi.buffer(self.ffi.cast("char*", d.ptr), d.size)[:]

    # ------------------------------------------------------------------ HeuristicsPluginApi.h
    @_entry
    def hipdnnHeuristicPluginGetAllPolicyIds(self, policy_ids, max_policies, num_policies):
        self._null(num_policies, "num_policies")
        ids = sorted(self._policies)
        if policy_ids == self.ffi.NULL:
            num_policies[0] = len(ids)
            return
        k = min(int(max_policies), len(ids))
        for i in range(k):
            policy_ids[i] = ids[i]
        num_policies[0] = k

    @_entry
    def hipdnnHeuristicPluginGetPolicyName(self, policy_id, name):
        self._null(name, "name")
        s = self._policy_names.get(policy_id)
        if s is None:
            raise PluginError(BAD_PARAM, f"unknown policy id {policy_id}")
        name[0] = s

    @_entry
    def hipdnnHeuristicHandleCreate(self, out_handle):
        self._null(out_handle, "out_handle")
        key = next(_ids) << 4
        with self._lock:
            self._handles[key] = {"device": None}
        out_handle[0] = self.ffi.cast("hipdnnHeuristicHandle_t", key)

    @_entry
    def hipdnnHeuristicHandleDestroy(self, handle):
        with self._lock:
            if self._handles.pop(self._addr(handle), None) is None:
                raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnHeuristicHandle_t")

    @_entry
    def hipdnnHeuristicHandleSetDeviceProperties(self, handle, device_props_serialized):
        h = self._handles.get(self._addr(handle))
        if h is None:
            raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnHeuristicHandle_t")
        h["device"] = parse_device_properties(self._bytes(device_props_serialized,
                                                          "device properties"))

    @_entry
    def hipdnnHeuristicPolicyDescriptorCreate(self, plugin_handle, policy_id, out_desc):
        self._null(out_desc, "out_desc")
        h = self._handles.get(self._addr(plugin_handle))
        if h is None:
            raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnHeuristicHandle_t")
        if policy_id not in self._policies:
            raise PluginError(BAD_PARAM, f"unknown policy id {policy_id}")
        key = next(_ids) << 4
        with self._lock:
            self._descs[key] = _Policy(h, policy_id)
        out_desc[0] = self.ffi.cast("hipdnnHeuristicPolicyDescriptor_t", key)

    @_entry
    def hipdnnHeuristicPolicyDescriptorDestroy(self, desc):
        with self._lock:
            if self._descs.pop(self._addr(desc), None) is None:
                raise PluginError(BAD_PARAM, "invalid or destroyed hipdnnHeuristicPolicyDescriptor_t")
            self._keep.pop(self._addr(desc), None)

    @_entry
    def hipdnnHeuristicPolicySetEngineIds(self, desc, engine_ids, engine_id_count):
        pol = self._desc(desc)
        if engine_id_count and engine_ids == self.ffi.NULL:
            raise PluginError(BAD_PARAM, "engine_ids is NULL")
        pol.ids = [int(engine_ids[i]) for i in range(int(engine_id_count))]

    @_entry
    def hipdnnHeuristicPolicySetSerializedGraph(self, desc, serialized_graph):
        pol = self._desc(desc)
        pol.graph = parse_graph(self._bytes(serialized_graph, "serialized graph"))

    def _finalize(self, desc, out_applied):
        pol = self._desc(desc)
        self._null(out_applied, "out_applied")
        if pol.graph is None or pol.ids is None:
            raise PluginError(BAD_PARAM, "the serialized graph and the engine ids must be set first")
        name = self._policies[pol.policy]
        kw = {"policy": name} if self._wants_policy else {}
        res = self.plugin.sorted_engine_ids(pol.graph, list(pol.ids), pol.handle["device"], **kw)
        if res is None:
            out_applied[0] = 0
            return
        pol.sorted = [int(x) for x in res]
        pol.finalized = True
        out_applied[0] = 1

    @_entry
    def hipdnnHeuristicPolicyFinalize(self, desc, out_applied):
        self._finalize(desc, out_applied)

    @_entry
    def hipdnnHeuristicPolicyFinalizeWithHost(self, desc, host, out_applied):
        self._finalize(desc, out_applied)

    @_entry
    def hipdnnHeuristicPolicyGetSortedEngineIds(self, desc, engine_ids, num_engines):
        pol = self._desc(desc)
        self._null(num_engines, "num_engines")
        if not pol.finalized:
            raise PluginError(NOT_INITIALIZED, "the policy descriptor is not finalized")
        if engine_ids == self.ffi.NULL:
            num_engines[0] = len(pol.sorted)
            return
        k = min(int(num_engines[0]), len(pol.sorted))
        for i in range(k):
            engine_ids[i] = pol.sorted[i]
        num_engines[0] = k

    @_entry
    def hipdnnHeuristicPolicyGetEngineConfig(self, desc, engine_id, engine_config):
        pol = self._desc(desc)
        self._null(engine_config, "engine_config")
        data = self.plugin.engine_config(self._policies[pol.policy], int(engine_id))
        if not data:
            return NOT_APPLICABLE
        buf = self.ffi.new("char[]", bytes(data))
        self._keep.setdefault(self._addr(desc), []).append(buf)
        engine_config.ptr, engine_config.size = buf, len(data)

    @_entry
    def hipdnnHeuristicPolicyGetTrace(self, desc, engine_id, trace_json):
        pol = self._desc(desc)
        self._null(trace_json, "trace_json")
        text = self.plugin.trace(self._policies[pol.policy], int(engine_id))
        if text is None:
            return NOT_APPLICABLE
        buf = self.ffi.new("char[]", str(text).encode())
        self._keep.setdefault(self._addr(desc), []).append(buf)
        trace_json[0] = buf

    # ------------------------------------------------------------------ table
    def provided(self) -> list:
        return [s.name for s in signatures() if s.header in HEURISTIC_HEADERS]


def parse_device_properties(raw: bytes) -> dict:
    """DeviceProperties ("HDDP") FlatBuffer → dict (verified: a bad buffer is BAD_PARAM)."""
    try:
        verify(raw, "DeviceProperties")
        d = DeviceProperties.GetRootAs(raw, 0)
        arch = d.ArchitectureName()
        return {"device_id": d.DeviceId(), "multi_processor_count": d.MultiProcessorCount(),
                "total_global_mem": d.TotalGlobalMem(),
                "architecture_name": arch.decode("utf-8", "replace") if arch else ""}
    except (VerificationError, Exception) as e:  # noqa: BLE001
        raise PluginError(BAD_PARAM, f"device properties are not a valid DeviceProperties buffer: {e}")


def _stub(name):
    def stub(self, *args):
        try:
            self.set_error(f"{name} is not part of this plugin's API")
        except Exception:  # noqa: BLE001
            pass
        return BAD_PARAM
    stub.__name__ = name
    return stub


def install_stubs() -> None:
    """Give each adapter class a stub for the functions of the other plugin kind, so any slot can
    hold either (the slot dispatchers call every name)."""
    for s in signatures():
        for cls in (CAdapter, HeuristicCAdapter):
            if not hasattr(cls, s.name):
                setattr(cls, s.name, _stub(s.name))
