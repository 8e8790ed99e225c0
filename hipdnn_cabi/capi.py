"""ABI-mode access to any hipDNN backend library through its C API (cffi, no compilation).

``load()`` opens ``libhipdnn_backend.so`` — ours by default, or the one named by
``HIPDNN_CABI_BACKEND_LIB`` — with the declarations generated from include/.  The frontend and the
tests use it; nothing here reaches into the backend's Python internals.
"""
from __future__ import annotations

import os
import threading

from . import library_path
from ._cdef import load as _load_cdef

_lock = threading.Lock()
_cache: dict[str, tuple] = {}


def backend_library_path() -> str:
    return os.environ.get("HIPDNN_CABI_BACKEND_LIB") or library_path()


def load(path: str | None = None):
    """Return ``(ffi, lib)`` for the backend library at ``path``."""
    import cffi
    path = os.path.abspath(path or backend_library_path())
    with _lock:
        if path not in _cache:
            gen = _load_cdef()
            ffi = cffi.FFI()
            ffi.cdef(gen.types(gen.BACKEND_HEADERS))
            ffi.cdef(gen.functions(gen.BACKEND_HEADERS))
            lib = ffi.dlopen(path)
            _cache[path] = (ffi, lib)
        return _cache[path]


def last_error(lib, ffi, clear: bool = True) -> str:
    buf = ffi.new("char[]", 2048)
    (lib.hipdnnGetLastErrorString if clear else lib.hipdnnPeekLastErrorString_ext)(buf, 2048)
    return ffi.string(buf).decode("utf-8", "replace")
