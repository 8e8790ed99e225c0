"""The ``extern "Python"`` dispatchers ``hpy_plugin_<Fn>(int slot, ...)`` and the slot table.

Inside libhipdnn_backend.so there are NUM_SLOTS sets of static C functions ``slot<K>_<Fn>`` with
the exact plugin API signatures; each calls ``hpy_plugin_<Fn>(K, ...)``.  Binding a
:class:`.cabi.CAdapter` to slot K makes those C function pointers the plugin's function table
(``hipdnn_cabi_plugin_slot_fn(K, name)`` gives an address).  An exported plugin library
(:mod:`.export`) uses the same dispatchers with slot 0 behind its exported entry points.
"""
from __future__ import annotations

import threading

from .cabi import CAdapter
from .errors import INTERNAL_ERROR, NOT_INITIALIZED
from .heuristics import install_stubs
from .signatures import EXECUTE, NUM_SLOTS, dispatcher_name, signatures


class SlotTable:
    def __init__(self, n: int):
        self.adapters = [None] * n
        self.lock = threading.Lock()

    def bind(self, adapter) -> int:
        with self.lock:
            for k, a in enumerate(self.adapters):
                if a is None:
                    self.adapters[k] = adapter
                    return k
        raise RuntimeError(f"all {len(self.adapters)} Python plugin slots are in use")

    def unbind(self, k: int):
        with self.lock:
            self.adapters[k] = None


def _body(table: SlotTable, sig):
    name = sig.name
    if name == EXECUTE:
        # The execute hot path: exact arity, no getattr by name, no *args tuple.
        adapters, n = table.adapters, len(table.adapters)

        def execute(slot, handle, ctx, workspace, buffers, count):
            a = adapters[slot] if 0 <= slot < n else None
            if a is None:
                return NOT_INITIALIZED
            return a.hipdnnEnginePluginExecuteOpGraph(handle, ctx, workspace, buffers, count)
        return execute
    if sig.is_void:
        def body(slot, *args):
            a = table.adapters[slot] if 0 <= slot < len(table.adapters) else None
            if a is not None:
                getattr(a, name)(*args)
    else:
        def body(slot, *args):
            a = table.adapters[slot] if 0 <= slot < len(table.adapters) else None
            if a is None:
                return NOT_INITIALIZED
            return getattr(a, name)(*args)
    return body


def _onerror_status(exc_type, exc, tb):
    return INTERNAL_ERROR


def _onerror_void(exc_type, exc, tb):
    return None


def check_complete() -> None:
    """Every plugin function has a body on both adapter kinds (a slot holds either kind)."""
    install_stubs()
    missing = [s.name for s in signatures() if not hasattr(CAdapter, s.name)]
    if missing:
        raise RuntimeError(f"CAdapter lacks: {', '.join(missing)}")


def attach(ffi, table: SlotTable) -> None:
    """def_extern every dispatcher of ``ffi`` onto ``table``."""
    for sig in signatures():
        fn = _body(table, sig)
        if sig.is_void:
            ffi.def_extern(name=dispatcher_name(sig.name), onerror=_onerror_void)(fn)
        else:
            ffi.def_extern(name=dispatcher_name(sig.name), error=INTERNAL_ERROR,
                           onerror=_onerror_status)(fn)


# ------------------------------------------------------------------ inside libhipdnn_backend.so
BACKEND = SlotTable(NUM_SLOTS)
_backend = None   # (ffi, lib) of libhipdnn_backend.so, handed over by install()


def install(ffi, lib) -> None:
    """Called by hipdnn_cabi.backend.entry.install(): attach the backend's dispatchers and keep
    the library's ``ffi``/``lib``, which bind Python plugins to its slot functions."""
    global _backend
    check_complete()
    attach(ffi, BACKEND)
    _backend = (ffi, lib)


def set_fast_execute(k: int, adapter) -> None:
    """Point the execute slot K of libhipdnn_backend.so at ``adapter.execute_op_graph_ints``
    (None: back to the extern "Python" dispatcher).  The C side holds its own reference."""
    if _backend is None:
        return
    lib = _backend[1]
    setter = getattr(lib, "hipdnn_cabi_plugin_slot_set_execute", None)
    if setter is None:
        return
    fn = getattr(adapter, "execute_op_graph_ints", None) if adapter is not None else None
    setter(k, id(fn) if fn is not None else 0)   # CPython: id() is the object's address


def installed() -> bool:
    return _backend is not None


def backend():
    """(ffi, lib) of libhipdnn_backend.so once :func:`install` ran, else None."""
    return _backend
