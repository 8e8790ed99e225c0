"""Variant-pack buffers → data pointers.

* numpy arrays: host memory (``__array_interface__``), size-checked against the tensor;
* objects with ``__cuda_array_interface__`` (CuPy, PyTorch CUDA/ROCm tensors, Numba): device pointer;
* objects with ``__dlpack__`` (PyTorch, JAX, ...): the DLTensor's ``data + byte_offset``;
* ``int``: a raw address; cffi pointers;
* a Python / numpy number: a host scalar of the tensor's type (runtime pass-by-value scalars).

Every buffer is checked against its tensor before the backend sees it (:func:`check_layout`):
element type, size (the tensor's span must fit), strides (the buffer's layout must be the tensor's,
or the buffer must be a flat C-contiguous run of memory) and, for outputs, writability — from what
numpy, the CUDA array interface or the DLTensor says.  A mismatch is a ``BadParamError`` naming the
tensor (docs/frontend.md, "Buffers").

:func:`memory_kind` says where a buffer lives ("host", "device" or None = either / unknown); the
graph uses it to run the plan of an engine that can reach the memory (docs/frontend.md).
"""
from __future__ import annotations

import ctypes

import numpy as np

from .. import device
from .._generated.enums import DataType
from ..errors import BadParamError
from ._capi import api
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


_DL_KIND = {0: "i", 1: "u", 2: "f", 4: "bf", 5: "c", 6: "b"}
DLPACK_FLAG_READ_ONLY = 1


def dlpack_pointer(obj, describe=False):
    """(address, device_type, capsule) of an object exporting DLPack; with ``describe``, a fourth
    item: {"kind", "bits", "shape", "strides" (elements, None = C-contiguous), "readonly"}."""
    cap = obj.__dlpack__()
    for name in (b"dltensor", b"dltensor_versioned"):
        p = _capsule_pointer(cap, name)
        if p is not None:
            readonly = False
            if name == b"dltensor_versioned":
                # DLManagedTensorVersioned: {DLPackVersion version (2x u32); void* manager_ctx;
                # void (*deleter)(...); uint64 flags; DLTensor dl_tensor}
                flags = ctypes.c_uint64.from_address(p + 8 + 2 * ctypes.sizeof(ctypes.c_void_p)).value
                readonly = bool(flags & DLPACK_FLAG_READ_ONLY)
                p += 8 + 2 * ctypes.sizeof(ctypes.c_void_p) + 8
            t = _DLTensor.from_address(p)
            ptr = (t.data or 0) + t.byte_offset
            if not describe:
                return ptr, t.device.device_type, cap
            nd = int(t.ndim)
            if nd < 0 or nd > 64:
                raise BadParamError(f"DLPack tensor with ndim {nd}")
            shape = [int(t.shape[i]) for i in range(nd)] if nd else []
            strides = [int(t.strides[i]) for i in range(nd)] if (nd and t.strides) else None
            bits = int(t.dtype.bits) * max(1, int(t.dtype.lanes))
            desc = {"kind": _DL_KIND.get(int(t.dtype.code), "?"), "bits": bits, "shape": shape,
                    "strides": strides, "readonly": readonly, "what": "DLPack tensor"}
            return ptr, t.device.device_type, cap, desc
    raise BadParamError("object's __dlpack__ did not return a DLPack capsule")


# ----------------------------------------------------------------------------- layout checks
_EXPECT = {  # hipDNN data type -> (kind, bits) a buffer must have
    "HIPDNN_DATA_FLOAT": ("f", 32), "HIPDNN_DATA_DOUBLE": ("f", 64), "HIPDNN_DATA_HALF": ("f", 16),
    "HIPDNN_DATA_BFLOAT16": ("bf", 16), "HIPDNN_DATA_INT8": ("i", 8), "HIPDNN_DATA_INT32": ("i", 32),
    "HIPDNN_DATA_INT64": ("i", 64), "HIPDNN_DATA_UINT8": ("u", 8), "HIPDNN_DATA_BOOLEAN": ("b", 8),
}
# Element types numpy has no dtype for: any same-width "bag of bits" type stands in for them.
_OPAQUE_KINDS = {"V", "u", "i", "?", "bf", "fp8"}


def _np_kind(dtype) -> tuple:
    d = np.dtype(dtype)
    if d.name == "bfloat16":
        return ("bf", 16)
    if d.name.startswith("float8"):
        return ("fp8", 8)
    return (d.kind, d.itemsize * 8)


def _tname(t) -> str:
    return f"tensor {t.name!r} (uid {t.uid})" if t.name else f"tensor uid {t.uid}"


def _type_ok(t, kind, bits) -> bool:
    name = DataType(t.data_type).name
    want = _EXPECT.get(name)
    if want is None:  # fp8 / fp4 / fp6 / int4: only the width can be checked
        return bits == element_size(t.data_type) * 8 and kind in _OPAQUE_KINDS
    if (kind, bits) == want:
        return True
    if want == ("bf", 16):
        return bits == 16 and kind in _OPAQUE_KINDS
    return False


def _c_contiguous(shape, strides) -> bool:
    """strides in elements; None means C-contiguous."""
    if strides is None:
        return True
    expect = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != expect:
            return False
        expect *= d
    return True


def check_layout(t, desc: dict, nbytes: int | None, is_output: bool) -> None:
    """Raise BadParamError unless a buffer described by ``desc`` fits tensor ``t``.

    ``desc``: kind/bits of the element type ("u"/8 = raw bytes), shape and strides in elements
    (strides None = C-contiguous), readonly; ``nbytes``: the bytes the buffer holds (None: only
    its description is known)."""
    if t is None or t.data_type is None or t.dim is None:
        return
    what = desc.get("what", "buffer")
    kind, bits = desc["kind"], desc["bits"]
    shape, strides = list(desc["shape"]), desc["strides"]
    raw_bytes = (kind, bits) == ("u", 8) and not _type_ok(t, kind, bits)
    if not raw_bytes and not _type_ok(t, kind, bits):
        raise BadParamError(f"{what} for {_tname(t)} has element type {kind}{bits}, the tensor is "
                            f"{DataTypeName(t.data_type)}")
    if is_output and desc.get("readonly"):
        raise BadParamError(f"{what} for {_tname(t)} is read-only, but the tensor is an output the "
                            "plan writes")
    dims = [int(d) for d in t.dim]
    tstr = [int(s) for s in t.stride] if t.stride is not None else None
    esz = element_size(t.data_type)
    need = span_bytes(t)
    if strides is not None and any(s < 0 for s in strides):
        raise BadParamError(f"{what} for {_tname(t)} has negative strides {strides}")
    if raw_bytes or shape != dims or tstr is None:
        # a flat run of memory: it must be contiguous and hold the tensor's span
        if not _c_contiguous(shape, strides):
            raise BadParamError(
                f"{what} for {_tname(t)} is not contiguous (shape {shape}, strides {strides} "
                f"elements) and its shape differs from the tensor's {dims}: pass a contiguous "
                f"buffer (numpy: np.ascontiguousarray) or one shaped like the tensor")
        have = nbytes if nbytes is not None else int(np.prod(shape, dtype=np.int64)) * (bits // 8)
        if have < need:
            raise BadParamError(f"{what} for {_tname(t)} holds {have} bytes, the tensor spans {need} "
                                f"(dims {dims}, strides {tstr}, {esz}-byte elements)")
        return
    # shaped like the tensor: its strides must be the tensor's (size-1 dims do not matter)
    actual = strides
    if actual is None:
        actual, acc = [0] * len(shape), 1
        for i in range(len(shape) - 1, -1, -1):
            actual[i] = acc
            acc *= shape[i]
    bad = [i for i, (d, a, s) in enumerate(zip(dims, actual, tstr)) if d > 1 and a != s]
    if bad:
        raise BadParamError(
            f"{what} for {_tname(t)} has strides {list(actual)} (elements), the tensor's are "
            f"{tstr}: the data would be misread.  Pass a buffer in the tensor's layout (numpy: "
            f"np.ascontiguousarray for packed row-major strides) or set the tensor's strides to "
            f"the buffer's")
    if nbytes is not None and nbytes < need:
        raise BadParamError(f"{what} for {_tname(t)} holds {nbytes} bytes, the tensor spans {need}")


def DataTypeName(dt) -> str:  # noqa: N802
    return DataType(dt).name


def _numpy_desc(a: np.ndarray) -> dict:
    kind, bits = _np_kind(a.dtype)
    strides = None
    if a.itemsize and all(s % a.itemsize == 0 for s in a.strides):
        strides = [s // a.itemsize for s in a.strides]
        if a.flags.c_contiguous:
            strides = None
    else:
        strides = [-1]  # byte strides that are not whole elements: never a tensor layout
    return {"kind": kind, "bits": bits, "shape": list(a.shape), "strides": strides,
            "readonly": not a.flags.writeable, "what": "numpy array"}


def _cai_desc(iface: dict) -> tuple[dict, int | None]:
    try:
        d = np.dtype(iface["typestr"])
        kind, bits = _np_kind(d)
        shape = [int(x) for x in iface["shape"]]
        st = iface.get("strides")
        if st is not None:
            if any(int(s) % d.itemsize for s in st):
                raise BadParamError("__cuda_array_interface__ strides are not whole elements")
            st = [int(s) // d.itemsize for s in st]
        readonly = bool(iface["data"][1]) if len(iface["data"]) > 1 else False
    except BadParamError:
        raise
    except Exception as e:
        raise BadParamError(f"malformed __cuda_array_interface__: {type(e).__name__}: {e}") from None
    return {"kind": kind, "bits": bits, "shape": shape, "strides": st, "readonly": readonly,
            "what": "__cuda_array_interface__ buffer"}, None


def span_bytes(t) -> int:
    if t is None or t.dim is None or t.stride is None:
        return 0
    if any(int(d) == 0 for d in t.dim):
        return 0
    n = 1 + sum((int(d) - 1) * int(s) for d, s in zip(t.dim, t.stride))
    return n * element_size(t.data_type)


def resolve_pointer(value, tensor, is_output=False):
    """(address, keep-alive object) for one variant-pack entry; the buffer is checked against
    ``tensor`` first (:func:`check_layout`)."""
    if isinstance(value, np.ndarray):
        check_layout(tensor, _numpy_desc(value), value.nbytes if value.flags.c_contiguous else None,
                     is_output)
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
        desc, nbytes = _cai_desc(iface)
        check_layout(tensor, desc, nbytes, is_output)
        return int(iface["data"][0]), value
    if hasattr(value, "__dlpack__"):
        try:
            ptr, _dev, cap, desc = dlpack_pointer(value, describe=True)
        except BadParamError:
            raise
        except Exception as e:  # e.g. numpy refuses to export a read-only array
            raise BadParamError(f"buffer for {_tname(tensor) if tensor is not None else 'a tensor'}"
                                f": __dlpack__ failed: {type(e).__name__}: {e}") from None
        check_layout(tensor, desc, None, is_output)
        return ptr, (value, cap)
    if hasattr(value, "__array_interface__"):
        return resolve_pointer(np.asarray(value), tensor, is_output)[0], value
    try:
        ffi = api().ffi
        if isinstance(value, ffi.CData):
            return int(ffi.cast("uintptr_t", value)), value
    except Exception:
        pass
    try:
        mv = memoryview(value)
    except TypeError:
        mv = None
    if mv is not None:
        if is_output and mv.readonly:
            raise BadParamError(f"buffer for {_tname(tensor) if tensor is not None else 'a tensor'}"
                                f" ({type(value).__name__}) is read-only, but the tensor is an "
                                "output the plan writes")
        arr = np.frombuffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv, dtype=np.uint8)
        if tensor is not None and tensor.dim is not None and tensor.data_type is not None \
                and arr.nbytes < span_bytes(tensor):
            raise BadParamError(f"buffer for {_tname(tensor)} holds {arr.nbytes} bytes, the tensor "
                                f"spans {span_bytes(tensor)}")
        return arr.__array_interface__["data"][0], (value, arr)
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
        if not device.available():
            return HOST
        k = device.pointer_info(int(ptr))[0]   # process-wide: creates no context
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
