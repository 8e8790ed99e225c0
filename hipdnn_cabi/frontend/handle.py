"""``Handle`` (hipdnnCreate / hipdnnDestroy / hipdnnSetStream) and the engine listing."""
from __future__ import annotations

from dataclasses import dataclass

from .. import device
from ..errors import BadParamError
from ._capi import Api, api as _api


def _current_device() -> int:
    try:
        return device.current_device()
    except Exception:  # noqa: BLE001
        return -1


class Handle:
    """A ``hipdnnHandle_t``.  Use as a context manager, or call :meth:`close`.

    ``Handle(stream=None, library=None)``: ``stream`` is passed to :meth:`set_stream`;
    ``library`` selects a backend library (default ``HIPDNN_CABI_BACKEND_LIB`` or the embedded one).
    """

    def __init__(self, stream=None, library: str | None = None, *, _api_obj: Api | None = None):
        self.api = _api_obj or _api(library)
        ffi, lib = self.api.ffi, self.api.lib
        p = ffi.new("hipdnnHandle_t*")
        self.api.check(lib.hipdnnCreate(p), "hipdnnCreate")
        self._h = p[0]
        # the device the backend bound the handle to (the current one, as hipdnnCreate saw it;
        # -1 without a GPU runtime): where the frontend allocates device workspaces for it
        self.device = _current_device()
        if stream is not None:
            self.set_stream(stream)

    @property
    def raw(self):
        """The cffi ``hipdnnHandle_t``."""
        if self._h is None:
            raise BadParamError("the handle is closed")
        return self._h

    def set_stream(self, stream):
        """``hipdnnSetStream``: ``stream`` is an int (address), a cffi pointer, or an object with
        ``.handle`` / ``.ptr`` / ``.cuda_stream`` (PyTorch / CuPy stream objects)."""
        ffi = self.api.ffi
        for attr in ("cuda_stream", "handle", "ptr"):
            if not isinstance(stream, int) and hasattr(stream, attr):
                stream = getattr(stream, attr)
                break
        s = ffi.cast("hipStream_t", stream if stream is not None else 0)
        self.api.check(self.api.lib.hipdnnSetStream(self.raw, s), "hipdnnSetStream")

    def get_stream(self) -> int:
        ffi = self.api.ffi
        p = ffi.new("hipStream_t*")
        self.api.check(self.api.lib.hipdnnGetStream(self.raw, p), "hipdnnGetStream")
        return int(ffi.cast("uintptr_t", p[0]))

    def close(self):
        if self._h is not None:
            h, self._h = self._h, None
            self.api.check(self.api.lib.hipdnnDestroy(h), "hipdnnDestroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_h", None) is not None:
                self.api.lib.hipdnnDestroy(self._h)
                self._h = None
        except Exception:
            pass

    def engines(self):
        return engines(self)


@dataclass(frozen=True)
class EngineInfo:
    id: int
    name: str
    plugin_name: str
    version: str
    type: str


def engines(handle: Handle | None = None) -> list[EngineInfo]:
    """The engines loaded for ``handle`` (hipdnnGetEngineCount_ext / hipdnnGetEngineInfo_ext),
    in the backend's order.  With no handle a temporary one is created."""
    own = handle is None
    h = Handle() if own else handle
    try:
        a = h.api
        ffi, lib = a.ffi, a.lib
        n = ffi.new("size_t*")
        a.check(lib.hipdnnGetEngineCount_ext(h.raw, n), "hipdnnGetEngineCount_ext")
        out = []
        for i in range(n[0]):
            eid = ffi.new("int64_t*")
            lens = [ffi.new("size_t*") for _ in range(4)]
            a.check(lib.hipdnnGetEngineInfo_ext(h.raw, i, eid, ffi.NULL, lens[0], ffi.NULL, lens[1],
                                                ffi.NULL, lens[2], ffi.NULL, lens[3]),
                    "hipdnnGetEngineInfo_ext")
            bufs = [ffi.new("char[]", max(int(x[0]), 1)) for x in lens]
            a.check(lib.hipdnnGetEngineInfo_ext(h.raw, i, eid, bufs[0], lens[0], bufs[1], lens[1],
                                                bufs[2], lens[2], bufs[3], lens[3]),
                    "hipdnnGetEngineInfo_ext")
            s = [ffi.string(b).decode("utf-8", "replace") for b in bufs]
            out.append(EngineInfo(int(eid[0]), s[0], s[1], s[2], s[3]))
        return out
    finally:
        if own:
            h.close()


def engine_name_by_id(handle: Handle, engine_id: int) -> str | None:
    """hipdnnGetEngineNameById_ext; None when the id is not a loaded engine."""
    a = handle.api
    ffi, lib = a.ffi, a.lib
    n = ffi.new("size_t*")
    if lib.hipdnnGetEngineNameById_ext(handle.raw, int(engine_id), ffi.NULL, n) != 0:
        a.last_error()
        return None
    buf = ffi.new("char[]", max(int(n[0]), 1))
    a.check(lib.hipdnnGetEngineNameById_ext(handle.raw, int(engine_id), buf, n),
            "hipdnnGetEngineNameById_ext")
    return ffi.string(buf).decode("utf-8", "replace")


def set_engine_plugin_paths(paths, absolute: bool = False, library: str | None = None):
    """hipdnnSetEnginePluginPaths_ext (call before creating handles)."""
    a = _api(library)
    ffi = a.ffi
    keep = [ffi.new("char[]", str(p).encode()) for p in paths]
    arr = ffi.new("const char*[]", keep) if keep else ffi.NULL
    a.check(a.lib.hipdnnSetEnginePluginPaths_ext(len(keep), arr, 1 if absolute else 0),
            "hipdnnSetEnginePluginPaths_ext")


def loaded_plugin_paths(handle: Handle) -> list[str]:
    """hipdnnGetLoadedEnginePluginPaths_ext."""
    a = handle.api
    ffi, lib = a.ffi, a.lib
    n = ffi.new("size_t*")
    m = ffi.new("size_t*")
    a.check(lib.hipdnnGetLoadedEnginePluginPaths_ext(handle.raw, n, ffi.NULL, m),
            "hipdnnGetLoadedEnginePluginPaths_ext")
    if n[0] == 0:
        return []
    bufs = [ffi.new("char[]", int(m[0])) for _ in range(n[0])]
    arr = ffi.new("char*[]", bufs)
    a.check(lib.hipdnnGetLoadedEnginePluginPaths_ext(handle.raw, n, arr, m),
            "hipdnnGetLoadedEnginePluginPaths_ext")
    return [ffi.string(b).decode("utf-8", "replace") for b in bufs[: n[0]]]


def version_string(library: str | None = None) -> str:
    a = _api(library)
    s = a.lib.hipdnnVersionString_ext()
    return a.ffi.string(s).decode() if s != a.ffi.NULL else ""


# ----------------------------------------------------------------------------- engine memory kinds
ENGINE_MEMORY = {
    "HIPDNN_CABI_CPU_REFERENCE_ENGINE": "host",
    "HIPDNN_CABI_PY_SAMPLE_ENGINE": "host",
    "HIPDNN_CABI_C_SAMPLE_ENGINE": "host",
    "HIPDNN_CABI_HIP_KERNELS_ENGINE": "device",
}
"""Engine name -> the memory its kernels read ("host" or "device").  Names not listed: "host"
when they contain CPU or HOST, else "device" (hipDNN engines are GPU engines)."""


def engine_memory_kind(name: str | None) -> str | None:
    """"host" or "device" for an engine name (None for no name)."""
    if not name:
        return None
    k = ENGINE_MEMORY.get(name)
    if k is not None:
        return k
    up = name.upper()
    return "host" if ("CPU" in up or "HOST" in up) else "device"


def engine_memory_declared(name: str | None) -> bool:
    """Whether the memory an engine reaches is declared (``ENGINE_MEMORY``,
    :func:`set_engine_memory_kind`) rather than guessed from its name."""
    return bool(name) and name in ENGINE_MEMORY


def set_engine_memory_kind(name: str, kind: str | None):
    """Declare which memory an engine reaches ("host" / "device"; None removes the entry)."""
    if kind is None:
        ENGINE_MEMORY.pop(name, None)
    elif kind not in ("host", "device"):
        raise ValueError("kind must be 'host' or 'device'")
    else:
        ENGINE_MEMORY[name] = kind
