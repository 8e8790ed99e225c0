"""Generic attribute helpers: the shared set/get rules of spec §1.3.

Set helpers decode the bytes the C shim passed (``arr`` is a ``const char*`` cdata or NULL, ``nbytes``
the byte count the shim computed from the element type) after checking, in order: attributeType,
NULL array, element count.  Get helpers implement the two-call size query and the truncation rules.
Every helper raises a :mod:`hipdnn_cabi.errors` exception; nothing returns a status.
"""
from __future__ import annotations

import struct

from .._generated.enums import AttributeType, DataType
from ..errors import BadParamError, NotFinalizedError, NullPointerError
from . import registry, runtime
from .descriptors.base import Descriptor
from .handle import Handle
from .names import attr_name, type_name  # noqa: F401  (attrs.attr_name: the descriptors' spelling)

T = AttributeType
# Plain ints for the hot comparisons (IntEnum members compare slower).
_INT64, _BOOL, _CHAR = int(T.HIPDNN_TYPE_INT64), int(T.HIPDNN_TYPE_BOOLEAN), int(T.HIPDNN_TYPE_CHAR)

_i64 = struct.Struct("<q")
_i32 = struct.Struct("<i")
_f32 = struct.Struct("<f")
_f64 = struct.Struct("<d")
_u64 = struct.Struct("<Q")

# Enum-valued attribute types: 4-byte C enums.
ENUM_TYPES = frozenset({
    T.HIPDNN_TYPE_DATA_TYPE, T.HIPDNN_TYPE_HEUR_MODE, T.HIPDNN_TYPE_ATTRIB_NAME,
    T.HIPDNN_TYPE_BEHAVIOR_NOTE, T.HIPDNN_TYPE_CONVOLUTION_MODE, T.HIPDNN_TYPE_POINTWISE_MODE,
    T.HIPDNN_TYPE_DIAGONAL_ALIGNMENT_EXT, T.HIPDNN_TYPE_ATTENTION_IMPLEMENTATION_EXT,
    T.HIPDNN_TYPE_REDUCTION_OPERATOR_TYPE, T.HIPDNN_TYPE_RESAMPLE_MODE, T.HIPDNN_TYPE_PADDING_MODE,
    T.HIPDNN_TYPE_MOE_GROUPED_MATMUL_MODE, T.HIPDNN_TYPE_OPERATION_TYPE_EXT,
})

# Byte size of one element of each data type (None: not a byte-addressable scalar type).
DATA_TYPE_SIZE = {
    DataType.HIPDNN_DATA_FLOAT: 4, DataType.HIPDNN_DATA_DOUBLE: 8, DataType.HIPDNN_DATA_HALF: 2,
    DataType.HIPDNN_DATA_INT8: 1, DataType.HIPDNN_DATA_INT32: 4, DataType.HIPDNN_DATA_UINT8: 1,
    DataType.HIPDNN_DATA_BFLOAT16: 2, DataType.HIPDNN_DATA_FP8_E4M3: 1, DataType.HIPDNN_DATA_FP8_E5M2: 1,
    DataType.HIPDNN_DATA_FP8_E8M0: 1, DataType.HIPDNN_DATA_INT64: 8, DataType.HIPDNN_DATA_BOOLEAN: 1,
    DataType.HIPDNN_DATA_FP8_E4M3_FNUZ: 1, DataType.HIPDNN_DATA_FP8_E5M2_FNUZ: 1,
}


# Bound once the embedded module is attached (entry.install → bind): the hot paths call these
# without going through runtime.ffi attribute lookups.
_ffi_unpack = None
_ffi_memmove = None
_VEC: dict = {}


def bind(ffi) -> None:
    global _ffi_unpack, _ffi_memmove
    _ffi_unpack, _ffi_memmove = ffi.unpack, ffi.memmove


def _vec(n: int, code: str = "q") -> struct.Struct:
    """Cached struct for n little-endian elements of ``code``."""
    key = (n, code)
    s = _VEC.get(key)
    if s is None:
        s = _VEC[key] = struct.Struct(f"<{n}{code}")
    return s


# ----------------------------------------------------------------------------------- set side
def _check(ctx, atype, want, arr):
    if atype != want:
        want = T(want)
        raise BadParamError(f"{ctx}: attributeType mismatch (expected {type_name(want)}, "
                            f"got {type_name(atype)})")
    if not arr:
        raise NullPointerError(f"{ctx}: arrayOfElements is nullptr")


def _raw(arr, nbytes) -> bytes:
    return _ffi_unpack(arr, nbytes) if nbytes else b""


# No hipDNN attribute holds anywhere near this many elements: a larger elementCount is a caller
# error (a garbage or negative-turned-huge count), refused before the array is read (reading
# count elements from a real, smaller array would crash; 8 * 2**62 bytes overflows).
MAX_ELEMENTS = 1 << 24


def _check_count(ctx, count):
    if count > MAX_ELEMENTS:
        raise BadParamError(f"{ctx}: elementCount {count} is too large (at most {MAX_ELEMENTS})")


def set_int64(ctx, atype, count, arr, nbytes, _unpack=_i64.unpack, _T=_INT64) -> int:
    if atype != _T or not arr:
        _check(ctx, atype, _T, arr)
    if count != 1:
        raise BadParamError(f"{ctx}: elementCount is not 1")
    return _unpack(_ffi_unpack(arr, 8))[0]


def set_int64_vector(ctx, atype, count, arr, nbytes, allow_empty=False, _T=_INT64) -> tuple:
    if atype != _T or not arr:
        _check(ctx, atype, _T, arr)
    if count < 0 or (count == 0 and not allow_empty):
        raise BadParamError(f"{ctx}: elementCount must be positive")
    if count > MAX_ELEMENTS:
        _check_count(ctx, count)
    return _vec(count).unpack(_ffi_unpack(arr, nbytes)) if count else ()


def set_bool(ctx, atype, count, arr, nbytes) -> bool:
    _check(ctx, atype, T.HIPDNN_TYPE_BOOLEAN, arr)
    if count != 1:
        raise BadParamError(f"{ctx}: elementCount is not 1")
    return _raw(arr, nbytes) != b"\x00"


def set_enum(ctx, atype, count, arr, nbytes, want) -> int:
    _check(ctx, atype, want, arr)
    if count != 1:
        raise BadParamError(f"{ctx}: elementCount is not 1")
    return _i32.unpack(_raw(arr, nbytes))[0]


def set_float(ctx, atype, count, arr, nbytes) -> float:
    _check(ctx, atype, T.HIPDNN_TYPE_FLOAT, arr)
    if count != 1:
        raise BadParamError(f"{ctx}: elementCount is not 1")
    return _f32.unpack(_raw(arr, nbytes))[0]


def set_double(ctx, atype, count, arr, nbytes) -> float:
    _check(ctx, atype, T.HIPDNN_TYPE_DOUBLE, arr)
    if count != 1:
        raise BadParamError(f"{ctx}: elementCount is not 1")
    return _f64.unpack(_raw(arr, nbytes))[0]


def set_string(ctx, atype, count, arr, nbytes) -> str:
    """CHAR: exactly ``count`` bytes (no NUL needed); count 0 = empty string."""
    _check(ctx, atype, T.HIPDNN_TYPE_CHAR, arr)
    if count < 0:
        raise BadParamError(f"{ctx}: elementCount must not be negative")
    _check_count(ctx, count)
    return _raw(arr, nbytes).decode("utf-8", "replace")


def set_bytes(ctx, atype, count, arr, nbytes) -> bytes:
    _check(ctx, atype, T.HIPDNN_TYPE_CHAR, arr)
    if count < 0:
        raise BadParamError(f"{ctx}: elementCount must not be negative")
    _check_count(ctx, count)
    return _raw(arr, nbytes)


def set_pointer(ctx, atype, count, arr, nbytes, want=T.HIPDNN_TYPE_HANDLE) -> int:
    _check(ctx, atype, want, arr)
    if count != 1:
        raise BadParamError(f"{ctx}: elementCount is not 1")
    return _u64.unpack(_raw(arr, nbytes))[0]


def handle_attribute(ctx, atype, count, arr, nbytes):
    """A HANDLE-typed attribute value → the live :class:`~hipdnn_cabi.backend.handle.Handle`
    (null, destroyed or not a handle → BAD_PARAM_NULL_POINTER)."""
    h = set_pointer(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_HANDLE)
    if not h:
        raise NullPointerError(f"{ctx}: handle is nullptr")
    obj = registry.objects.get(h)
    if not isinstance(obj, Handle):
        raise NullPointerError(f"{ctx}: invalid or destroyed hipdnnHandle_t")
    return obj


def set_pointer_vector(ctx, atype, count, arr, nbytes, want=T.HIPDNN_TYPE_VOID_PTR) -> tuple:
    _check(ctx, atype, want, arr)
    if count < 0:
        raise BadParamError(f"{ctx}: elementCount must not be negative")
    _check_count(ctx, count)
    return struct.unpack(f"<{count}Q", _raw(arr, nbytes)) if count else ()


def resolve_descriptor(ctx, ident: int, kinds, *, null_status=NullPointerError, require_finalized=True):
    """Look up a descriptor id passed as an attribute value; check kind and finalization."""
    if not ident:
        raise null_status(f"{ctx}: descriptor is nullptr")
    obj = registry.resolve(ident)
    if not isinstance(obj, Descriptor):
        raise null_status(f"{ctx}: invalid or destroyed hipdnnBackendDescriptor_t")
    if kinds is not None and obj.DESCRIPTOR_TYPE not in kinds:
        raise BadParamError("Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch.")
    if require_finalized and not obj.finalized:
        raise NotFinalizedError(f"{ctx}: descriptor is not finalized")
    return obj


def set_descriptor(ctx, atype, count, arr, nbytes, kinds, *, null_status=NullPointerError,
                   require_finalized=True):
    _check(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, arr)
    if count != 1:
        raise BadParamError(f"{ctx}: elementCount is not 1")
    ident = _u64.unpack(_raw(arr, nbytes))[0]
    return resolve_descriptor(ctx, ident, kinds, null_status=null_status,
                              require_finalized=require_finalized)


# ----------------------------------------------------------------------------------- get side
def _type(ctx, atype, want):
    if atype != want:
        want = T(want)
        raise BadParamError(f"{ctx}: attributeType mismatch (expected {type_name(want)}, "
                            f"got {type_name(atype)})")


def _size_query(ctx, count_ptr, n):
    if not count_ptr:
        raise NullPointerError(f"{ctx}: elementCount is nullptr")
    count_ptr[0] = n


def _write(arr, data: bytes):
    _ffi_memmove(arr, data, len(data))


def get_packed_scalar(ctx, atype, want, req, count_ptr, arr, packed: bytes):
    """Scalar/enum/data type: size query → 1; fetch needs req ≥ 1 and writes one element."""
    if atype != want:
        _type(ctx, atype, want)
    if not arr or req == 0:
        _size_query(ctx, count_ptr, 1)
        return
    if req < 1:
        raise BadParamError(f"{ctx}: requestedElementCount must be at least 1")
    _ffi_memmove(arr, packed, len(packed))
    if count_ptr:
        count_ptr[0] = 1


def get_int64(ctx, atype, req, count_ptr, arr, value: int):
    get_packed_scalar(ctx, atype, _INT64, req, count_ptr, arr, _i64.pack(value))


def get_bool(ctx, atype, req, count_ptr, arr, value: bool):
    get_packed_scalar(ctx, atype, T.HIPDNN_TYPE_BOOLEAN, req, count_ptr, arr, b"\x01" if value else b"\x00")


def get_enum(ctx, atype, req, count_ptr, arr, value: int, want):
    get_packed_scalar(ctx, atype, want, req, count_ptr, arr, _i32.pack(int(value)))


def get_float(ctx, atype, req, count_ptr, arr, value: float):
    get_packed_scalar(ctx, atype, T.HIPDNN_TYPE_FLOAT, req, count_ptr, arr, _f32.pack(value))


def get_double(ctx, atype, req, count_ptr, arr, value: float):
    get_packed_scalar(ctx, atype, T.HIPDNN_TYPE_DOUBLE, req, count_ptr, arr, _f64.pack(value))


def get_optional(ctx, atype, want, req, count_ptr, arr, packed):
    """An optional scalar: unset → success with count 0 (nothing written, even with an array)."""
    _type(ctx, atype, want)
    if packed is None:
        if count_ptr:
            count_ptr[0] = 0
        return
    get_packed_scalar(ctx, atype, want, req, count_ptr, arr, packed)


def get_exact_one(ctx, atype, want, req, count_ptr, arr, packed: bytes):
    """Old-style getters: req must be exactly 1 and arr non-null (no size query)."""
    _type(ctx, atype, want)
    if req != 1:
        raise BadParamError(f"{ctx}: requestedElementCount must be 1")
    if not arr:
        raise NullPointerError(f"{ctx}: arrayOfElements is nullptr")
    _write(arr, packed)
    if count_ptr:
        count_ptr[0] = 1


def get_string(ctx, atype, req, count_ptr, arr, value):
    """CHAR: size query → len+1; fetch copies ≤ req-1 bytes + NUL (silent truncation)."""
    _type(ctx, atype, T.HIPDNN_TYPE_CHAR)
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if not arr or req == 0:
        _size_query(ctx, count_ptr, len(data) + 1)
        return
    if req < 0:
        raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
    n = min(len(data), req - 1)
    _write(arr, data[:n] + b"\x00")
    if count_ptr:
        count_ptr[0] = min(len(data) + 1, req)


def _fetch_count(ctx, req, count_ptr, arr, n, require_full,
                 short="requestedElementCount is smaller than the element count"):
    """A vector get's element count: None after answering a size query (null array or
    req == 0), else min(req, n); a negative req, or a short one with ``require_full``, is
    BAD_PARAM."""
    if not arr or req == 0:
        _size_query(ctx, count_ptr, n)
        return None
    if req < 0:
        raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
    if require_full and req < n:
        raise BadParamError(f"{ctx}: {short}")
    return min(req, n)


def get_int64_vector(ctx, atype, req, count_ptr, arr, values, *, require_full=False):
    """INT64 vector: size query → n; fetch copies min(req, n); count = number copied."""
    if atype != _INT64:
        _type(ctx, atype, _INT64)
    n = len(values)
    k = _fetch_count(ctx, req, count_ptr, arr, n, require_full)
    if k is None:
        return
    _ffi_memmove(arr, _vec(k).pack(*values[:k]) if k < n else _vec(n).pack(*values), k * 8)
    if count_ptr:
        count_ptr[0] = k


def get_packed_vector(ctx, atype, want, req, count_ptr, arr, items: list, fmt: str,
                      *, require_full=False):
    """Vector of fixed-size elements packed with ``fmt`` (e.g. 'i' for enums)."""
    _type(ctx, atype, want)
    n = len(items)
    k = _fetch_count(ctx, req, count_ptr, arr, n, require_full)
    if k is None:
        return
    _write(arr, struct.pack(f"<{k}{fmt}", *items[:k]))
    if count_ptr:
        count_ptr[0] = k


def get_descriptor_array(ctx, atype, req, count_ptr, arr, impls: list, *, require_full=False):
    """Descriptor array: writes min(req, n) NEW wrappers (caller destroys); count = full n."""
    _type(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    n = len(impls)
    k = _fetch_count(ctx, req, count_ptr, arr, n, require_full,
                     "requestedElementCount < operation count")
    if k is None:
        return
    ids = [registry.register(x) for x in impls[:k]]
    _write(arr, struct.pack(f"<{k}Q", *ids))
    if count_ptr:
        count_ptr[0] = n


def get_descriptor_one(ctx, atype, req, count_ptr, arr, impl):
    """A single descriptor value (req exactly 1, arr non-null) → one new wrapper."""
    _type(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    if req != 1:
        raise BadParamError(f"{ctx}: requestedElementCount must be 1")
    if not arr:
        raise NullPointerError(f"{ctx}: arrayOfElements is nullptr")
    _write(arr, _u64.pack(registry.register(impl)))
    if count_ptr:
        count_ptr[0] = 1


def get_optional_descriptor(ctx, atype, req, count_ptr, arr, impl):
    """An optional tensor slot: unset → count 0 (elementCount required); else one new wrapper."""
    _type(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
    if impl is None:
        if not count_ptr:
            raise NullPointerError(f"{ctx}: elementCount is nullptr")
        count_ptr[0] = 0
        return
    if not arr or req == 0:
        _size_query(ctx, count_ptr, 1)
        return
    if req < 1:
        raise BadParamError(f"{ctx}: requestedElementCount must be at least 1")
    _write(arr, _u64.pack(registry.register(impl)))
    if count_ptr:
        count_ptr[0] = 1


pack_i64 = _i64.pack
pack_i32 = _i32.pack
pack_u64 = _u64.pack
pack_f32 = _f32.pack
pack_f64 = _f64.pack
