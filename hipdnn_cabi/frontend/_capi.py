"""Thin helpers over the backend C API (cffi ABI mode, :func:`hipdnn_cabi.capi.load`).

Everything the frontend does to the backend goes through :class:`Api`: create/destroy/finalize
descriptors, set/get attributes with the element C types of spec §0.3, and turn a non-success
status into the :mod:`hipdnn_cabi.errors` exception of that status carrying the backend's
last-error text (read with ``hipdnnGetLastErrorString``, which clears it, like the C++ frontend).
"""
from __future__ import annotations

import threading

from .. import capi
from .._generated.enums import AttributeType as T
from ..errors import error_for_status

# attribute type -> cffi element type (spec §0.3)
CTYPE = {
    T.HIPDNN_TYPE_HANDLE: "hipdnnHandle_t",
    T.HIPDNN_TYPE_DATA_TYPE: "int32_t",
    T.HIPDNN_TYPE_BOOLEAN: "bool",
    T.HIPDNN_TYPE_INT64: "int64_t",
    T.HIPDNN_TYPE_FLOAT: "float",
    T.HIPDNN_TYPE_DOUBLE: "double",
    T.HIPDNN_TYPE_VOID_PTR: "void*",
    T.HIPDNN_TYPE_HEUR_MODE: "int32_t",
    T.HIPDNN_TYPE_BACKEND_DESCRIPTOR: "hipdnnBackendDescriptor_t",
    T.HIPDNN_TYPE_BEHAVIOR_NOTE: "int32_t",
    T.HIPDNN_TYPE_CHAR: "char",
    T.HIPDNN_TYPE_NORM_FWD_PHASE: "int32_t",
    T.HIPDNN_TYPE_CONVOLUTION_MODE: "int32_t",
    T.HIPDNN_TYPE_POINTWISE_MODE: "int32_t",
    T.HIPDNN_TYPE_REDUCTION_OPERATOR_TYPE: "int32_t",
    T.HIPDNN_TYPE_OPERATION_TYPE_EXT: "int32_t",
    T.HIPDNN_TYPE_INT32: "int32_t",
    T.HIPDNN_TYPE_DIAGONAL_ALIGNMENT_EXT: "int32_t",
    T.HIPDNN_TYPE_ATTENTION_IMPLEMENTATION_EXT: "int32_t",
    T.HIPDNN_TYPE_RESAMPLE_MODE: "int32_t",
    T.HIPDNN_TYPE_PADDING_MODE: "int32_t",
    T.HIPDNN_TYPE_MOE_GROUPED_MATMUL_MODE: "int32_t",
}

_apis: dict = {}
_apis_lock = threading.Lock()


class Api:
    """One backend library, opened in ABI mode."""

    def __init__(self, path: str | None = None):
        self.ffi, self.lib = capi.load(path)

    # ------------------------------------------------------------------ errors
    def last_error(self) -> str:
        return capi.last_error(self.lib, self.ffi, clear=True)

    def check(self, status: int, what: str = ""):
        if status != 0:
            msg = self.last_error()
            if what:
                msg = f"{what}: {msg}" if msg else what
            raise error_for_status(status, msg)

    # ------------------------------------------------------------------ descriptors
    def create(self, dtype: int):
        d = self.ffi.new("hipdnnBackendDescriptor_t*")
        self.check(self.lib.hipdnnBackendCreateDescriptor(int(dtype), d),
                   f"hipdnnBackendCreateDescriptor({getattr(dtype, 'name', dtype)})")
        return d[0]

    def destroy(self, d):
        if d is not None and d != self.ffi.NULL:
            self.lib.hipdnnBackendDestroyDescriptor(d)

    def finalize(self, d, what="hipdnnBackendFinalize"):
        self.check(self.lib.hipdnnBackendFinalize(d), what)

    def set(self, d, name, atype, values, what=None):
        """Set ``name`` to ``values`` (a list of elements, or bytes/str for CHAR)."""
        atype = T(atype)
        if atype == T.HIPDNN_TYPE_CHAR:
            data = values.encode() if isinstance(values, str) else bytes(values)
            arr = self.ffi.new("char[]", data)
            n = len(data)
        else:
            if not isinstance(values, (list, tuple)):
                values = [values]
            arr = self.ffi.new(f"{CTYPE[atype]}[]", list(values))
            n = len(values)
        self.check(self.lib.hipdnnBackendSetAttribute(d, int(name), int(atype), n, arr),
                   what or f"hipdnnBackendSetAttribute({getattr(name, 'name', name)})")

    def get_count(self, d, name, atype, what=None) -> int:
        """Size query: (req 0, &count, NULL)."""
        n = self.ffi.new("int64_t*")
        self.check(self.lib.hipdnnBackendGetAttribute(d, int(name), int(atype), 0, n, self.ffi.NULL),
                   what or f"hipdnnBackendGetAttribute({getattr(name, 'name', name)})")
        return n[0]

    def get(self, d, name, atype, count=1, what=None, want_count=True):
        """Fetch ``count`` elements; returns the list of elements actually written."""
        atype = T(atype)
        arr = self.ffi.new(f"{CTYPE[atype]}[]", max(count, 1))
        n = self.ffi.new("int64_t*")
        self.check(self.lib.hipdnnBackendGetAttribute(d, int(name), int(atype), count,
                                                      n if want_count else self.ffi.NULL, arr),
                   what or f"hipdnnBackendGetAttribute({getattr(name, 'name', name)})")
        k = n[0] if want_count else count
        return [arr[i] for i in range(min(k, count))]

    def try_get(self, d, name, atype, count=1):
        """Like :meth:`get` but returns None on failure (clears the error)."""
        arr = self.ffi.new(f"{CTYPE[T(atype)]}[]", max(count, 1))
        n = self.ffi.new("int64_t*")
        st = self.lib.hipdnnBackendGetAttribute(d, int(name), int(atype), count, n, arr)
        if st != 0:
            self.last_error()
            return None
        return [arr[i] for i in range(min(n[0], count))]

    def get_string(self, d, name, what=None) -> str:
        """CHAR two-call: size query, then fetch."""
        n = self.get_count(d, name, T.HIPDNN_TYPE_CHAR, what)
        if n <= 0:
            return ""
        buf = self.ffi.new("char[]", n + 1)
        cnt = self.ffi.new("int64_t*")
        self.check(self.lib.hipdnnBackendGetAttribute(d, int(name), int(T.HIPDNN_TYPE_CHAR), n, cnt, buf),
                   what or f"hipdnnBackendGetAttribute({getattr(name, 'name', name)})")
        return self.ffi.string(buf, n).decode("utf-8", "replace")


    def get_bytes(self, d, name, what=None) -> bytes:
        """CHAR two-call returning the raw bytes (NUL-separated lists keep their NULs)."""
        n = self.get_count(d, name, T.HIPDNN_TYPE_CHAR, what)
        if n <= 0:
            return b""
        buf = self.ffi.new("char[]", n + 1)
        cnt = self.ffi.new("int64_t*")
        self.check(self.lib.hipdnnBackendGetAttribute(d, int(name), int(T.HIPDNN_TYPE_CHAR), n, cnt, buf),
                   what or f"hipdnnBackendGetAttribute({getattr(name, 'name', name)})")
        return bytes(self.ffi.buffer(buf, min(n, max(cnt[0], 0))))


def api(path: str | None = None) -> Api:
    """The (cached) :class:`Api` of the backend at ``path`` (default: ``HIPDNN_CABI_BACKEND_LIB`` or
    the embedded library)."""
    key = capi.backend_library_path() if path is None else path
    import os
    key = os.path.abspath(key)
    with _apis_lock:
        a = _apis.get(key)
        if a is None:
            a = _apis[key] = Api(key)
        return a
