"""Variant-pack buffers → data pointers.

* numpy arrays: host memory (``__array_interface__``), size-checked against the tensor;
* objects with ``__cuda_array_interface__`` (CuPy, PyTorch CUDA/ROCm tensors, Numba): device pointer;
* objects with ``__dlpack__`` (PyTorch, JAX, ...): the DLTensor's ``data + byte_offset``;
* ``int``: a raw address; cffi pointers;
* a Python / numpy number: a host scalar of the tensor's type (runtime pass-by-value scalars).

:func:`memory_kind` says where a buffer lives ("host", "device" or None = either / unknown); the
graph uses it to run the plan of an engine that can reach the memory (docs/frontend.md).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import BadParamError
from .tensor import element_size, to_numpy_dtype

DLPACK_CPU = 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _capsule_pointer(cap, name: bytes):
    """The pointer stored in a PyCapsule named ``name``, or None.  Reads the capsule object
    directly (CPython layout: PyObject_HEAD, pointer, name, ...): calling the PyCapsule C API
    through ctypes.pythonapi inside the embedding process made a later hipdnnCreate hang."""
    if type(cap).__name__ != "PyCapsule":
        return None
    base = id(cap) + ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    ptr = ctypes.c_void_p.from_address(base).value
    nm = ctypes.c_void_p.from_address(base + ctypes.sizeof(ctypes.c_void_p)).value
    if not ptr or not nm or ctypes.string_at(nm) != name:
        return None
    return ptr


def dlpack_pointer(obj):
    """(address, device_type, capsule) of an object exporting DLPack."""
    cap = obj.__dlpack__()
    for name in (b"dltensor", b"dltensor_versioned"):
        p = _capsule_pointer(cap, name)
        if p is not None:
            if name == b"dltensor_versioned":
                # DLManagedTensorVersioned: {DLPackVersion version (2x u32); void* manager_ctx;
                # void (*deleter)(...); uint64 flags; DLTensor dl_tensor}
                p += 8 + 2 * ctypes.sizeof(ctypes.c_void_p) + 8
            t = _DLTensor.from_address(p)
            return (t.data or 0) + t.byte_offset, t.device.device_type, cap
    raise BadParamError("object's __dlpack__ did not return a DLPack capsule")


def span_bytes(t) -> int:
    if t is None or t.dim is None or t.stride is None:
        return 0
    if any(int(d) == 0 for d in t.dim):
        return 0
    n = 1 + sum((int(d) - 1) * int(s) for d, s in zip(t.dim, t.stride))
    return n * element_size(t.data_type)


def resolve_pointer(value, tensor):
    """(address, keep-alive object) for one variant-pack entry."""
    if isinstance(value, np.ndarray):
        if tensor is not None and tensor.data_type is not None:
            need = span_bytes(tensor)
            if value.flags.c_contiguous or value.flags.f_contiguous:
                if value.nbytes < need:
                    raise BadParamError(f"buffer for tensor {tensor.name!r} (uid {tensor.uid}) holds "
                                        f"{value.nbytes} bytes, the tensor spans {need}")
            if value.itemsize != element_size(tensor.data_type) and value.dtype != np.uint8:
                raise BadParamError(f"buffer for tensor {tensor.name!r} (uid {tensor.uid}) has element "
                                    f"type {value.dtype}, the tensor is {tensor.data_type.name}")
        return value.__array_interface__["data"][0], value
    if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, np.ndarray):
        if isinstance(value, int) and not isinstance(value, bool) and \
                (tensor is None or not tensor.get_is_pass_by_value()):
            return value, None            # a raw address
        npd = to_numpy_dtype(tensor.data_type) if tensor is not None else None
        if npd is None:
            npd = np.dtype(np.float32)
        arr = np.array([value], dtype=npd)
        return arr.__array_interface__["data"][0], arr
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is not None:
        return int(iface["data"][0]), value
    if hasattr(value, "__dlpack__"):
        ptr, _dev, cap = dlpack_pointer(value)
        return ptr, (value, cap)
    if hasattr(value, "__array_interface__"):
        return int(value.__array_interface__["data"][0]), value
    try:
        import cffi  # noqa: F401
        from ._capi import api
        ffi = api().ffi
        if isinstance(value, ffi.CData):
            return int(ffi.cast("uintptr_t", value)), value
    except Exception:
        pass
    try:
        mv = memoryview(value)
        arr = np.frombuffer(mv, dtype=np.uint8)
        return arr.__array_interface__["data"][0], (value, arr)
    except TypeError:
        pass
    raise BadParamError(f"cannot use a {type(value).__name__} as a tensor buffer")


# ----------------------------------------------------------------------------- memory kinds
HOST, DEVICE = "host", "device"
# DLPack DLDeviceType: kDLCPU = 1 -> host; kDLCUDAHost 3, kDLROCMHost 11, kDLCUDAManaged 13 ->
# reachable from both sides (None); every other device type -> device.
_DL_EITHER = {3, 11, 13}


def device_pointer_kind(ptr: int):
    """Where the GPU runtime says ``ptr`` lives: "device", "host" or None (either: managed or
    pinned memory).  Without a GPU runtime (hipdnn_cabi.device) there is no device memory in the
    process, so every pointer is host memory.  Tests monkeypatch this probe."""
    try:
        from .. import device
        if not device.available():
            return HOST
        k = device.get_runtime().pointer_kind(int(ptr))
    except Exception:
        return HOST
    if k == "device":
        return DEVICE
    if k in ("managed", "host"):
        return None
    return HOST        # unknown to the runtime: pageable host memory


def _dl_kind(device_type: int):
    if int(device_type) == 1:
        return HOST
    if int(device_type) in _DL_EITHER:
        return None
    return DEVICE


def memory_kind(value):
    """"host", "device" or None (a raw address / cffi pointer, managed or pinned memory: either
    side can reach it) for one variant-pack buffer."""
    if isinstance(value, (np.ndarray, np.generic, float, bytes, bytearray, memoryview)):
        return HOST
    if isinstance(value, int):
        return None          # raw address (or a runtime scalar: callers skip those)
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is not None:
        return device_pointer_kind(int(iface["data"][0]))
    dev = getattr(value, "__dlpack_device__", None)
    if dev is not None:
        try:
            return _dl_kind(dev()[0])
        except Exception:
            pass
    if hasattr(value, "__dlpack__"):
        try:
            return _dl_kind(dlpack_pointer(value)[1])
        except Exception:
            return None
    if hasattr(value, "__array_interface__"):
        return HOST
    return None


# ----------------------------------------------------------------------------- execute cache
# Graph.execute caches, per buffer identity, the variant pack it built (frontend/graph/execution.py):
# every check of resolve_pointer runs once per new buffer; later executes with the same objects
# only compare this fingerprint — a cheap snapshot of what the pointer and the checks depend on.
_IMMUTABLE = (int, float, bool)


def _np_fingerprint(v):
    return (v.shape, v.strides, v.dtype, v.flags.writeable)


def _torch_fingerprint(v):
    return (v.data_ptr(), v.dtype, v.shape, v.stride(), v.device, v.requires_grad)


def _const_fingerprint(v):
    return ()


def fingerprint_fn(value):
    """The fingerprint function for ``value``'s type, or None when such a buffer is not cached
    (resolved again on every execute).  Cached: numpy arrays (shape, strides, dtype, writability;
    their data pointer cannot move while they keep that shape — ``resize(refcheck=False)`` to the
    same shape aside), torch tensors (data_ptr, dtype, shape, strides, device) and immutable
    numbers (raw addresses, runtime scalars)."""
    t = type(value)
    if t is np.ndarray:
        return _np_fingerprint
    if t in _IMMUTABLE or isinstance(value, np.generic):
        return _const_fingerprint
    if t.__module__ == "torch" and t.__name__ in ("Tensor", "Parameter"):
        return _torch_fingerprint
    return None
