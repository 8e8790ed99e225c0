"""Loading one engine plugin (spec §3.5) and calling into it (§3.8, §3.9).

A plugin is described by a *function table*: ``{symbol name: function pointer as uint64}``.
:func:`load_shared_object` builds that table with dlopen(RTLD_LOCAL)/dlsym; a later in-process
(Python) plugin can hand :class:`EnginePlugin` its own table of C-callable pointers and go
through exactly the same validation and call path.  Every call goes through the C trampolines
of the embedded module (``lib.tramp_<symbol>(fnptr, args...)``), never through libffi.
"""
from __future__ import annotations

import re

from ...errors import BadParamError, NotSupportedError, PluginError
from .. import runtime

PLUGIN_STATUS_NAMES = {
    0: "HIPDNN_PLUGIN_STATUS_SUCCESS", 1: "HIPDNN_PLUGIN_STATUS_BAD_PARAM",
    2: "HIPDNN_PLUGIN_STATUS_INVALID_VALUE", 3: "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR",
    4: "HIPDNN_PLUGIN_STATUS_ALLOC_FAILED", 5: "HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE",
    6: "HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED",
}
NOT_APPLICABLE = 5
PLUGIN_TYPE_ENGINE = 1
PLUGIN_TYPE_NAMES = {0: "HIPDNN_PLUGIN_TYPE_UNSPECIFIED", 1: "HIPDNN_PLUGIN_TYPE_ENGINE",
                     2: "HIPDNN_PLUGIN_TYPE_HEURISTIC"}
EXPECTED_API_MAJOR = 1

BASE_REQUIRED = ("hipdnnPluginGetName", "hipdnnPluginGetVersion", "hipdnnPluginGetType",
                 "hipdnnPluginGetLastErrorString")
BASE_OPTIONAL = ("hipdnnPluginGetApiVersion", "hipdnnPluginSetLoggingCallback",
                 "hipdnnPluginSetLogLevel")
ENGINE_REQUIRED = (
    "hipdnnEnginePluginGetAllEngineIds", "hipdnnEnginePluginCreate", "hipdnnEnginePluginDestroy",
    "hipdnnEnginePluginSetStream", "hipdnnEnginePluginGetApplicableEngineIds",
    "hipdnnEnginePluginGetEngineDetails", "hipdnnEnginePluginDestroyEngineDetails",
    "hipdnnEnginePluginGetWorkspaceSize", "hipdnnEnginePluginCreateExecutionContext",
    "hipdnnEnginePluginDestroyExecutionContext",
    "hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext", "hipdnnEnginePluginExecuteOpGraph",
)
# The plan-serialization trio (RFC 0009).  The save hook has two shapes: the newest SDK's
# hipdnnEnginePluginSerializeExecutionContextWithEngineId(handle, engine_id, ctx, &out) and the
# legacy 3-argument hipdnnEnginePluginSerializeExecutionContext(handle, ctx, &out) exported by
# plugins built before WithEngineId existed.  WithEngineId is used when exported, else the legacy
# hook; a plugin is serializable when it has one save hook plus the destroy and restore hooks
# (docs/contracts.md).
SAVE_WITH_ID = "hipdnnEnginePluginSerializeExecutionContextWithEngineId"
SAVE_LEGACY = "hipdnnEnginePluginSerializeExecutionContext"
SERIALIZATION_SYMBOLS = (
    SAVE_WITH_ID,
    "hipdnnEnginePluginDestroySerializedExecutionContext",
    "hipdnnEnginePluginCreateExecutionContextFromSerialized",
)
ENGINE_OPTIONAL = SERIALIZATION_SYMBOLS + (
    "hipdnnEnginePluginExecuteOpGraphWithOverrides", "hipdnnEnginePluginGetEngineName",
    SAVE_LEGACY,
)

SEV_INFO, SEV_WARN, SEV_ERROR = 0, 1, 2
# Optional symbols whose absence hipDNN notes at INFO while resolving symbols (its wording).
OPTIONAL_NOTES = (
    ("hipdnnPluginGetApiVersion", "Plugin does not support returning plugin API version"),
    ("hipdnnPluginSetLoggingCallback", "Plugin does not support logging callback"),
    ("hipdnnPluginSetLogLevel", "Plugin does not support log level synchronization"),
    ("hipdnnEnginePluginExecuteOpGraphWithOverrides",
     "Plugin does not support override-aware execute "
     "(hipdnnEnginePluginExecuteOpGraphWithOverrides not exported)"),
    ("hipdnnEnginePluginGetEngineName",
     "Plugin does not supply engine names (hipdnnEnginePluginGetEngineName not exported)"),
)

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1


def fnv1a64(data) -> int:
    """FNV-1a-64 of ``data`` as a signed int64 (the engine-id convention)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & _M64
    return h - (1 << 64) if h >= (1 << 63) else h


def hex_id(eid: int) -> str:
    return "0x%016X" % (eid & _M64)


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
# What a C++ stream reads for `>> int >> char >> int >> char >> int` with both chars '.': before
# each item whitespace is skipped; an int is an optional sign and decimal digits; the rest of the
# string is not looked at.
_VERSION = re.compile(r"\s*([+-]?[0-9]+)\s*\.\s*([+-]?[0-9]+)\s*\.\s*([+-]?[0-9]+)", re.ASCII)


def parse_version_checked(text: str):
    """hipDNN's version parsing (``hipdnn_data_sdk::utilities::Version(string)``): three signed
    int32 components read as ``int . int . int`` by a C++ stream — whitespace before each item is
    skipped, anything after the third number is ignored.  → ((major, minor, patch), None), or
    (None, hipDNN's error text) when the string does not have that form.  "-1.0.0" parses (major
    -1) and is then rejected by the major-version check, not as malformed."""
    m = _VERSION.match(text)
    if m:
        v = tuple(int(x) for x in m.groups())
        if all(_INT_MIN <= x <= _INT_MAX for x in v):  # an out-of-range int fails the stream
            return v, None
    return None, (f"Version string does not match required format. String = {text} "
                  'Required format: "MAJOR.MINOR.PATCH"')


def parse_version(text: str):
    """'MAJOR.MINOR.PATCH' → (major, minor, patch) as hipDNN parses it, or None when malformed."""
    return parse_version_checked(text)[0]


def status_name(st: int) -> str:
    return PLUGIN_STATUS_NAMES.get(st, "HIPDNN_PLUGIN_STATUS_UNKNOWN")


def load_shared_object(path: str) -> tuple[int, dict]:
    """dlopen(RTLD_LOCAL) ``path``; returns (dl handle, function table).  Missing required base
    symbols raise PLUGIN "Failed to get symbol: ..." (the handle is closed again)."""
    lib, ffi = runtime.lib, runtime.ffi
    h = lib.hipdnn_cabi_dlopen(path.encode(), 1)
    if not h:
        raise BadParamError(ffi.string(lib.hipdnn_cabi_dlerror()).decode("utf-8", "replace"))
    table = {}
    try:
        for name in BASE_REQUIRED + BASE_OPTIONAL + ENGINE_REQUIRED + ENGINE_OPTIONAL:
            p = lib.hipdnn_cabi_dlsym(h, name.encode())
            if p:
                table[name] = p
            elif name in BASE_REQUIRED:
                err = ffi.string(lib.hipdnn_cabi_dlerror()).decode("utf-8", "replace")
                raise PluginError(f"Failed to get symbol: {name} (Error: {err})")
    except BaseException:
        lib.hipdnn_cabi_dlclose(h)
        raise
    return h, table


class PluginLibrary:
    """A loaded plugin library of either kind (engine or heuristic): its function table and the
    calls every plugin answers the same way (PluginApi.h)."""

    def __init__(self, path: str, table: dict, dl_handle: int = 0):
        self.path = path
        self.fn = dict(table)
        self.dl_handle = dl_handle
        self.name = "?"
        self.version = ""

    def last_error(self) -> str:
        ffi, lib = runtime.ffi, runtime.lib
        out = ffi.new("const char**")
        lib.tramp_hipdnnPluginGetLastErrorString(self.fn["hipdnnPluginGetLastErrorString"], out)
        return ffi.string(out[0]).decode("utf-8", "replace") if out[0] else ""

    def fail(self, action: str, st: int):
        raise PluginError(f"Failed to {action}. Status: {status_name(st)}({st}), "
                          f"Error: {self.last_error()}")

    def call(self, action: str, symbol: str, *args) -> None:
        st = getattr(runtime.lib, "tramp_" + symbol)(self.fn[symbol], *args)
        if st:
            self.fail(action, st)

    def _string(self, action, symbol, *args) -> str:
        out = runtime.ffi.new("const char**")
        self.call(action, symbol, *args, out)
        if not out[0]:
            raise PluginError(f"Failed to {action}: the plugin returned a null string")
        return runtime.ffi.string(out[0]).decode("utf-8", "replace")

    def set_log_level(self, level: int):
        """hipdnnPluginSetLogLevel(level) when the plugin exports it.  Returns None on success (or
        when the symbol is absent), else the failure text; never raises for a plugin's answer."""
        fn = self.fn.get("hipdnnPluginSetLogLevel")
        if not fn:
            return None
        st = runtime.lib.tramp_hipdnnPluginSetLogLevel(fn, int(level))
        if st == 0:
            return None
        return (f"Failed to set log level {int(level)} on plugin '{self.name}'. Status: "
                f"{status_name(st)}({st}), Error: {self.last_error()}")


class EnginePlugin(PluginLibrary):
    """One loaded engine plugin: its function table plus the answers validated at load."""

    def __init__(self, path: str, table: dict, dl_handle: int = 0):
        super().__init__(path, table, dl_handle)
        self.api_version = (1, 0, 0)
        self.engine_ids: list[int] = []      # GetAllEngineIds, validated
        self.known: frozenset = frozenset()
        self.names: dict[int, str] = {}      # id -> name given by GetEngineName
        self.has_overrides = "hipdnnEnginePluginExecuteOpGraphWithOverrides" in table
        # Which save hook to call (None: the plugin cannot serialize its contexts).
        self.save_hook = SAVE_WITH_ID if SAVE_WITH_ID in table else (
            SAVE_LEGACY if SAVE_LEGACY in table else None)
        self.has_serialization = self.save_hook is not None and all(
            n in table for n in SERIALIZATION_SYMBOLS[1:])
        self.tramp_execute = None            # (trampoline, fn pointer), cached by execute

    def engine_name_of(self, eid: int):
        """hipDNN's EnginePlugin::getEngineName: the name the plugin reports for ``eid``, or None
        when it declines (NOT_APPLICABLE, a null or empty name).  Any other failure raises
        PLUGIN_ERROR "Failed to get engine name. Status: …, Error: …"."""
        ffi = runtime.ffi
        out = ffi.new("const char**")
        st = runtime.lib.tramp_hipdnnEnginePluginGetEngineName(
            self.fn["hipdnnEnginePluginGetEngineName"], eid, out)
        if st == NOT_APPLICABLE:
            return None
        if st:
            self.fail("get engine name", st)
        if not out[0]:
            return None
        return ffi.string(out[0]).decode("utf-8", "replace") or None

    # ---------------------------------------------------------------- load-time validation
    def initialize(self, logging_callback: int | None = None, log_level: int | None = None,
                   note=None) -> None:
        """Run the §3.5 checks in hipDNN's order; raises on rejection.  ``logging_callback`` is
        handed to hipdnnPluginSetLoggingCallback and ``log_level`` to hipdnnPluginSetLogLevel (a
        failure there is reported, never fatal).  ``note(severity, message)`` receives the log
        lines hipDNN writes while loading (hipDNN's wording)."""
        ffi = runtime.ffi
        note = note or (lambda sev, msg: None)
        for name in BASE_REQUIRED:
            if name not in self.fn:
                raise PluginError(f"Failed to get symbol: {name} (Error: not provided)")
        self.name = self._string("get plugin name", "hipdnnPluginGetName")
        self.version = self._string("get plugin version", "hipdnnPluginGetVersion")
        tp = ffi.new("hipdnnPluginType_t*")
        self.call("get plugin type", "hipdnnPluginGetType", tp)
        if int(tp[0]) != PLUGIN_TYPE_ENGINE:
            raise PluginError(f"Wrong plugin type: expected {PLUGIN_TYPE_NAMES[1]}, got "
                              f"{PLUGIN_TYPE_NAMES.get(int(tp[0]), int(tp[0]))}")
        for name in ENGINE_REQUIRED:
            if name not in self.fn:
                raise PluginError(f"Failed to get symbol: {name} (Error: undefined symbol: {name})")
        for name, text in OPTIONAL_NOTES:
            if name not in self.fn:
                note(SEV_INFO, text)
        if logging_callback and "hipdnnPluginSetLoggingCallback" in self.fn:
            runtime.lib.tramp_hipdnnPluginSetLoggingCallback(
                self.fn["hipdnnPluginSetLoggingCallback"], ffi.cast("hipdnnCallback_t", logging_callback))
        if log_level is not None:  # hipDNN: right after the logging callback, before validation
            failure = self.set_log_level(log_level)
            if failure:
                note(SEV_WARN, failure)
        if "hipdnnPluginGetApiVersion" in self.fn:
            text = self._string("get plugin api version", "hipdnnPluginGetApiVersion")
        else:
            text = "1.0.0"
        v, why = parse_version_checked(text)
        if v is None:
            note(SEV_WARN, f"Plugin '{self.name}' has malformed API version string '{text}': {why}")
            raise NotSupportedError(
                f"Plugin {self.name} reports an unparseable API version ('{text}'); rejecting at "
                "load time so dispatch is not exposed to the malformed string on every graph "
                "execute.")
        if v[0] not in (EXPECTED_API_MAJOR, 0):
            raise PluginError(
                "ERROR: ENGINE PLUGIN ABI VALIDATION FAILED\n"
                f"Plugin {self.name}'s major API version ({text}) does not match expected engine "
                f"API major version ({EXPECTED_API_MAJOR})\nExpected API version: 1.0.0")
        if v[0] == 0:
            note(SEV_INFO, f"Accepting legacy major-0 plugin '{self.name}' under transitional "
                           "shim; this will be removed in the next major version.")
        self.api_version = v
        # GetAllEngineIds, two calls
        fn = self.fn["hipdnnEnginePluginGetAllEngineIds"]
        n = ffi.new("uint32_t*")
        self.call("get number of engines", "hipdnnEnginePluginGetAllEngineIds", ffi.NULL, 0, n)
        count = int(n[0])
        if count == 0:
            raise PluginError("No engines found in the plugin")
        if count > 1 << 20:
            raise PluginError(f"Implausible engine count {count} reported by the plugin")
        buf = ffi.new("int64_t[]", count)
        m = ffi.new("uint32_t*")
        self.call("get all engine IDs", "hipdnnEnginePluginGetAllEngineIds", buf, count, m)
        del fn
        if int(m[0]) != count:
            raise PluginError("Number of engines returned does not match the number reported by "
                              "the plugin")
        ids = sorted(buf)  # hipDNN keeps a plugin's engine ids sorted
        if len(set(ids)) != len(ids):
            raise PluginError("Duplicate engine IDs found")
        self.engine_ids = ids
        self.known = frozenset(ids)
        # Engine names (GetEngineName) are asked per engine at admission, by the host.

    def close(self):
        if self.dl_handle:
            runtime.lib.hipdnn_cabi_dlclose(self.dl_handle)
            self.dl_handle = 0
