"""Python bodies of the internal ``extern "Python"`` entry points of libhipdnn_backend.so.

:func:`install` attaches one body per name in :data:`._externs.EXTERNS` (and refuses to mark the
library ready if any is missing).  Bodies raise :mod:`hipdnn_cabi.errors` exceptions; the shared
``onerror`` handler turns an exception into its status plus the thread's last-error message, and
any other exception into HIPDNN_STATUS_INTERNAL_ERROR with the exception text.  Success returns 0
and never touches the last-error slot.
"""
from __future__ import annotations

import os
import struct

from .._generated.enums import Severity, Status
from ..errors import HipdnnError, NotSupportedError, NullPointerError
from ..plugin_sdk import slots as _plugin_slots
from . import attrs, autotune_cache, log, registry, runtime, serialization
from ._externs import EXTERNS, ID_RETURNING, VOID_RETURNING
from .descriptors import factory
from .descriptors import variant_pack as _vp  # noqa: F401  (registry.resolve sees C packs)
from .descriptors.base import Descriptor, _store as _as_store
from .devices import current_device as _current_device
from .execute import FAST_KINDS as _FAST_KINDS, execute as _run_execute, forget as _forget
from .handle import Handle, handle_of
from .plugins import host

INTERNAL = int(Status.HIPDNN_STATUS_INTERNAL_ERROR)
_BODIES: dict = {}


def body(name):
    def mark(fn):
        _BODIES[name] = fn
        return fn
    return mark


def _message(exc_type, exc) -> tuple[int, str]:
    if isinstance(exc, HipdnnError):
        return int(exc.status), exc.message
    return INTERNAL, f"{exc_type.__name__}: {exc}"


def _onerror(exc_type, exc, tb):
    status, msg = _message(exc_type, exc)
    runtime.set_last_error(msg)
    if log.enabled(Severity.HIPDNN_SEV_ERROR):
        log.log(Severity.HIPDNN_SEV_ERROR, msg)
    return status


def _onerror_id(exc_type, exc, tb):
    return -_onerror(exc_type, exc, tb)


def _onerror_void(exc_type, exc, tb):
    _onerror(exc_type, exc, tb)
    return None


def not_implemented(fn: str):
    raise NotSupportedError(f"{fn} is not implemented by hipdnn-cabi yet")


# ------------------------------------------------------------------------ lookups
_objects = registry.objects


def descriptor_of(d: int, fn: str = "", _resolve=registry.resolve) -> Descriptor:
    obj = _resolve(d)
    if not isinstance(obj, Descriptor):
        raise NullPointerError("hipdnnBackendDescriptor_t is invalid or was destroyed"
                               + (f" ({fn})" if fn else ""))
    return obj


# ------------------------------------------------------------------------ handles
@body("hpy_create_handle")
def create_handle(_current_device=_current_device):
    h = Handle(_current_device())   # bound to the calling thread's current device (-1: none)
    h.plugins = host.attach_handle(h)
    return registry.register(h)


@body("hpy_destroy_handle")
def destroy_handle(h):
    obj = handle_of(h, "hipdnnDestroy")
    registry.release(h)
    _forget(h)  # the C execute fast path: unregister, wait for executes in flight
    obj.close()
    return 0


@body("hpy_set_stream")
def set_stream(h, stream):
    handle_of(h, "hipdnnSetStream").set_stream(stream)
    return 0


@body("hpy_get_stream")
def get_stream(h, out):
    out[0] = handle_of(h, "hipdnnGetStream").stream
    return 0


# ------------------------------------------------------------------------ descriptors
_AS_ON = [False]  # the C attribute store (cdef/astore.c) is on: set by install()


@body("hpy_create_descriptor")
def create_descriptor(dtype, _create=factory.create, _register=registry.register):
    # (TENSOR and operation descriptors are created in C while the store is on: cdef/astore.c)
    return _register(_create(dtype))


@body("hpy_materialize_descriptor")
def materialize_descriptor(d, dtype, _create=factory.create, _objects=_objects):
    """The Python object of C-resident descriptor ``d`` (cdef/astore.c), built on first need; its
    plain fields stay in the C record (``_cid``) until finalize.  Idempotent (two threads may race
    here: dict.setdefault keeps the first)."""
    if d in _objects:
        return 0
    obj = _create(dtype)
    if obj.FAST_FIELDS:
        obj.__class__ = obj._c_class  # its fast fields are read from C (descriptors/base.py)
    obj.__dict__["_cid"] = d
    _objects.setdefault(d, obj)
    return 0


def _c_lookup(i, _objects=_objects):
    """registry.resolve of an id Python has not seen: a live C-resident descriptor is
    materialised; else a C-resident variant pack's view, or None."""
    lib = runtime.lib
    if lib is not None and _AS_ON[0]:
        t = lib.hipdnn_cabi_as_live(i)
        if t >= 0:
            materialize_descriptor(i, t)
            lib.hipdnn_cabi_as_set_py(i)
            return _objects.get(i)
    return _vp_view(i) if _vp_view is not None else None


_vp_view = None


@body("hpy_destroy_descriptor")
def destroy_descriptor(d, _objects=_objects):
    obj = _objects.pop(d, None)
    if not isinstance(obj, Descriptor):
        if obj is not None:  # a handle id given as a descriptor: put it back
            _objects[d] = obj
        raise NullPointerError("hipdnnBackendDescriptor_t is invalid or was destroyed")
    if obj.DESCRIPTOR_TYPE in _FAST_KINDS:
        _forget(d)  # the C execute fast path: unregister, wait for executes in flight
    if obj.FAST_FIELDS:
        obj._c_detach(d)  # the shim drops the C record of id d when this returns
    obj.destroy()
    return 0


@body("hpy_finalize")
def finalize(d):
    descriptor_of(d).finalize()
    return 0


_I64 = struct.Struct("<q")
_FAST_I64, _FAST_I64VEC, _FAST_BOOL = 0, 1, 2  # kinds of Descriptor.FAST_FIELDS entries
_ffi_unpack = _ffi_memmove = None           # bound by install()


@body("hpy_set_attribute")
def set_attribute(d, name, atype, count, arr, nbytes, _objects=_objects, _D=Descriptor,
                  _i64=_I64.unpack, _vec=attrs._vec, _MAX_ELEMENTS=attrs.MAX_ELEMENTS):
    # The hot path: plain fields (Descriptor.FAST_FIELDS) are stored here directly when every
    # check of §1.3 passes; anything else (and every error) takes the descriptor's own path.
    obj = _objects.get(d)
    if not isinstance(obj, _D):
        raise NullPointerError("hipdnnBackendDescriptor_t is invalid or was destroyed")
    if not obj.finalized:
        f = obj.FAST_FIELDS.get(name)
        if f is not None and atype == f[0] and arr:
            kind = f[1]
            if kind == _FAST_I64 and count == 1:
                setattr(obj, f[2], _i64(_ffi_unpack(arr, 8))[0])
                return 0
            if kind == _FAST_I64VEC and 0 < count <= _MAX_ELEMENTS:
                setattr(obj, f[2], _vec(count).unpack(_ffi_unpack(arr, nbytes)))
                return 0
            if kind == _FAST_BOOL and count == 1:
                setattr(obj, f[2], _ffi_unpack(arr, 1) != b"\x00")
                return 0
        if obj._fast_set:
            try:
                fn, ctx = obj._setters[name]
            except KeyError:
                fn = None
            if fn is not None:
                fn(obj, ctx, atype, count, arr, nbytes)
                return 0
    obj.set_attribute(name, atype, count, arr, nbytes)  # the general path (and its errors)
    return 0


@body("hpy_get_attribute")
def get_attribute(d, name, atype, req, count, arr, _objects=_objects, _D=Descriptor,
                  _p64=_I64.pack, _vec=attrs._vec):
    obj = _objects.get(d)
    if not isinstance(obj, _D):
        raise NullPointerError("hipdnnBackendDescriptor_t is invalid or was destroyed")
    if obj.finalized:
        f = obj.FAST_FIELDS.get(name)
        if f is not None and atype == f[0] and req >= 0:
            kind = f[1]
            v = getattr(obj, f[2])
            n = len(v) if kind == _FAST_I64VEC else 1
            if not arr or req == 0:            # size query (§1.3)
                if count:
                    count[0] = n
                    return 0
            elif kind == _FAST_I64VEC:
                k = req if req < n else n
                _ffi_memmove(arr, _vec(k).pack(*v[:k]) if k < n else _vec(n).pack(*v), 8 * k)
                if count:
                    count[0] = k
                return 0
            else:
                _ffi_memmove(arr, _p64(v) if kind == _FAST_I64 else (b"\x01" if v else b"\x00"),
                             8 if kind == _FAST_I64 else 1)
                if count:
                    count[0] = 1
                return 0
        if obj._fast_get:
            try:
                fn, ctx = obj._getters[name]
            except KeyError:
                fn = None
            if fn is not None:
                fn(obj, ctx, atype, req, count, arr)
                return 0
    obj.get_attribute(name, atype, req, count, arr)
    return 0


@body("hpy_execute")
def execute(h, plan, vp, _run=_run_execute):
    _run(handle_of(h, "hipdnnBackendExecute"), plan, vp, h)
    return 0


# ------------------------------------------------------------------------ serialization
@body("hpy_create_and_deserialize_graph")
def create_and_deserialize_graph(out, data, size):
    return serialization.create_and_deserialize_graph(out, data, size)


@body("hpy_create_and_deserialize_json_graph")
def create_and_deserialize_json_graph(out, data, size):
    return serialization.create_and_deserialize_json_graph(out, data, size)


@body("hpy_get_serialized_binary_graph")
def get_serialized_binary_graph(d, req, size, buf):
    return serialization.get_serialized_binary_graph(d, req, size, buf)


@body("hpy_get_serialized_json_graph")
def get_serialized_json_graph(d, req, size, buf):
    return serialization.get_serialized_json_graph(d, req, size, buf)


@body("hpy_get_serialized_execution_plan")
def get_serialized_execution_plan(d, req, size, buf):
    return serialization.get_serialized_execution_plan(d, req, size, buf)


@body("hpy_create_and_deserialize_execution_plan")
def create_and_deserialize_execution_plan(h, out, data, size):
    return serialization.create_and_deserialize_execution_plan(h, out, data, size)


@body("hpy_get_serialized_binary_graph_and_plan")
def get_serialized_binary_graph_and_plan(g, p, req, size, buf):
    return serialization.get_serialized_binary_graph_and_plan(g, p, req, size, buf)


@body("hpy_get_serialized_binary_contents")
def get_serialized_binary_contents(data, size, flags):
    return serialization.get_serialized_binary_contents(data, size, flags)


# ------------------------------------------------------------------------ logging
@body("hpy_logging_callback")
def logging_callback(severity, msg):
    log.plugin_message(severity, runtime.ffi.string(msg).decode("utf-8", "replace"))


@body("hpy_log_api")
def log_api(fn, phase, status):
    text = runtime.ffi.string(fn).decode("utf-8", "replace")
    if phase == 0:
        log.log(Severity.HIPDNN_SEV_INFO, f"API called: [{text}]")
    elif phase == 1:
        log.log(Severity.HIPDNN_SEV_INFO, f"API success: [{text}]")
    else:
        log.log(Severity.HIPDNN_SEV_ERROR, text)


@body("hpy_set_user_log_callback")
def set_user_log_callback(cb, min_level, mode, user):
    log.set_user_callback(cb, min_level, mode, user)
    return 0


@body("hpy_set_global_log_level")
def set_global_log_level(level):
    return log.set_global_level(level)


# ------------------------------------------------------------------------ plugins and engines
# The plugin host (hipdnn_cabi.backend.plugins.host) does the C-side marshalling of these calls.
@body("hpy_set_engine_plugin_paths")
def set_engine_plugin_paths(n, paths, mode):
    return host.set_engine_plugin_paths(n, paths, mode)


@body("hpy_set_heuristic_plugin_paths")
def set_heuristic_plugin_paths(n, paths, mode):
    return host.set_heuristic_plugin_paths(n, paths, mode)


@body("hpy_set_plugin_unload_mode")
def set_plugin_unload_mode(mode):
    return host.set_plugin_unload_mode(mode)


@body("hpy_get_loaded_engine_plugin_paths")
def get_loaded_engine_plugin_paths(h, n, paths, maxlen):
    handle = handle_of(h, "hipdnnGetLoadedEnginePluginPaths_ext")
    return host.get_loaded_engine_plugin_paths(handle, n, paths, maxlen)


@body("hpy_get_engine_count")
def get_engine_count(h, n):
    handle = handle_of(h, "hipdnnGetEngineCount_ext")
    return host.get_engine_count(handle, n)


@body("hpy_get_engine_info")
def get_engine_info(h, idx, eid, name, name_len, plugin, plugin_len, ver, ver_len, typ, typ_len):
    handle = handle_of(h, "hipdnnGetEngineInfo_ext")
    return host.get_engine_info(handle, idx, eid, name, name_len, plugin, plugin_len, ver, ver_len,
                                typ, typ_len)


@body("hpy_get_engine_id_by_name")
def get_engine_id_by_name(h, name, eid):
    handle = handle_of(h, "hipdnnGetEngineIdByName_ext")
    return host.get_engine_id_by_name(handle, name, eid)


@body("hpy_get_engine_name_by_id")
def get_engine_name_by_id(h, eid, name, length):
    handle = handle_of(h, "hipdnnGetEngineNameById_ext")
    return host.get_engine_name_by_id(handle, eid, name, length)


@body("hpy_get_heuristic_policy_count")
def get_heuristic_policy_count(h, n):
    handle = handle_of(h, "hipdnnGetHeuristicPolicyCount_ext")
    return host.get_heuristic_policy_count(handle, n)


@body("hpy_get_heuristic_policy_info")
def get_heuristic_policy_info(h, idx, pid, name, name_len, plugin, plugin_len, pver, pver_len,
                              aver, aver_len):
    handle = handle_of(h, "hipdnnGetHeuristicPolicyInfo_ext")
    return host.get_heuristic_policy_info(handle, idx, pid, name, name_len, plugin, plugin_len,
                                          pver, pver_len, aver, aver_len)


@body("hpy_write_engine_ranking_results")
def write_engine_ranking_results(h, g, ids, n, outcome):
    handle = handle_of(h, "hipdnnBackendWriteEngineRankingResults_ext")
    return autotune_cache.write_ranking_results(handle, g, ids, n, outcome)


# ------------------------------------------------------------------------ install
def install(ffi, lib) -> None:
    """Attach every extern "Python" body to the embedded module, then mark the library ready."""
    missing = sorted(set(EXTERNS) - set(_BODIES))
    if missing:
        raise RuntimeError(f"no Python body for: {', '.join(missing)}")
    runtime.attach(ffi, lib)
    attrs.bind(ffi)
    global _ffi_unpack, _ffi_memmove
    _ffi_unpack, _ffi_memmove = ffi.unpack, ffi.memmove
    for name, fn in _BODIES.items():
        if name in ID_RETURNING:
            ffi.def_extern(name=name, error=-INTERNAL, onerror=_onerror_id)(fn)
        elif name in VOID_RETURNING:
            ffi.def_extern(name=name, onerror=_onerror_void)(fn)
        else:
            ffi.def_extern(name=name, error=INTERNAL, onerror=_onerror)(fn)
    _plugin_slots.install(ffi, lib)   # hpy_plugin_* dispatchers (Python plugins)
    log.configure_from_env()
    # C-resident variant packs (cdef/vpack.c); HIPDNN_CABI_PY_VARIANT_PACK=1: the Python reference
    if os.environ.get("HIPDNN_CABI_PY_VARIANT_PACK", "").strip() not in ("", "0"):
        lib.hipdnn_cabi_vp_set_resident(0)
    # the C attribute store (cdef/astore.c); HIPDNN_CABI_PY_ATTRS=1: descriptors live in Python
    global _vp_view
    if _vp_view is None:
        _vp_view = registry.c_lookup  # variant_pack.c_view
    if os.environ.get("HIPDNN_CABI_PY_ATTRS", "").strip() not in ("", "0"):
        lib.hipdnn_cabi_as_set_enabled(0)
    else:
        _as_store.update(lib=lib, ffi=ffi)
        _AS_ON[0] = True
        registry.c_lookup = _c_lookup
    lib.hipdnn_cabi_mark_ready()


__all__ = ["install", "body", "not_implemented", "handle_of", "descriptor_of"]
