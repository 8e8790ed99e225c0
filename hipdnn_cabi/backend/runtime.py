"""Process-wide state of the embedded backend: the cffi ``ffi``/``lib`` of libhipdnn_backend.so.

Set once by :func:`hipdnn_cabi.backend.entry.install`.  Tests that import the backend core without
the library (pure-Python unit tests) get a stand-in whose last-error slot is a thread-local.  This
module imports nothing of the backend: every other backend module may import it.
"""
from __future__ import annotations

import threading

ffi = None
lib = None
_tls = threading.local()


def attach(ffi_, lib_) -> None:
    global ffi, lib
    ffi, lib = ffi_, lib_


def set_last_error(msg: str) -> None:
    data = msg.encode("utf-8", "replace")
    if lib is not None:
        lib.hipdnn_cabi_set_last_error(data)
    else:
        _tls.last_error = data[:2047]


def peek_last_error() -> str:
    if lib is not None:
        return ffi.string(lib.hipdnn_cabi_peek_last_error()).decode("utf-8", "replace")
    return getattr(_tls, "last_error", b"").decode("utf-8", "replace")
