"""Frontend tensors (``TensorAttributes``) and pass-by-value scalars (RFC 0016 §4.2–4.3)."""
from __future__ import annotations

import enum
import struct
import warnings

import numpy as np

from .._generated.enums import DataType
from ..errors import BadParamError

# hipdnnDataType_t <-> numpy (types numpy has)
_NP = {
    DataType.HIPDNN_DATA_FLOAT: np.dtype(np.float32),
    DataType.HIPDNN_DATA_DOUBLE: np.dtype(np.float64),
    DataType.HIPDNN_DATA_HALF: np.dtype(np.float16),
    DataType.HIPDNN_DATA_INT8: np.dtype(np.int8),
    DataType.HIPDNN_DATA_INT32: np.dtype(np.int32),
    DataType.HIPDNN_DATA_UINT8: np.dtype(np.uint8),
    DataType.HIPDNN_DATA_INT64: np.dtype(np.int64),
    DataType.HIPDNN_DATA_BOOLEAN: np.dtype(np.bool_),
}
_FROM_NP = {v: k for k, v in _NP.items()}
# element sizes of the types numpy lacks
_SIZE = {DataType.HIPDNN_DATA_BFLOAT16: 2, DataType.HIPDNN_DATA_FP8_E4M3: 1,
         DataType.HIPDNN_DATA_FP8_E5M2: 1, DataType.HIPDNN_DATA_FP8_E8M0: 1,
         DataType.HIPDNN_DATA_FP8_E4M3_FNUZ: 1, DataType.HIPDNN_DATA_FP8_E5M2_FNUZ: 1}


# element type names (torch dtypes "torch.<name>", ml_dtypes / numpy / DLPack names) -> hipDNN
# data type; the 6-bit floats are the DLPack names
_BY_NAME = {
    "float32": DataType.HIPDNN_DATA_FLOAT, "float64": DataType.HIPDNN_DATA_DOUBLE,
    "float16": DataType.HIPDNN_DATA_HALF, "bfloat16": DataType.HIPDNN_DATA_BFLOAT16,
    "int8": DataType.HIPDNN_DATA_INT8, "int32": DataType.HIPDNN_DATA_INT32,
    "int64": DataType.HIPDNN_DATA_INT64, "uint8": DataType.HIPDNN_DATA_UINT8,
    "bool": DataType.HIPDNN_DATA_BOOLEAN,
    "float8_e4m3fn": DataType.HIPDNN_DATA_FP8_E4M3, "float8_e4m3": DataType.HIPDNN_DATA_FP8_E4M3,
    "float8_e5m2": DataType.HIPDNN_DATA_FP8_E5M2,
    "float8_e4m3fnuz": DataType.HIPDNN_DATA_FP8_E4M3_FNUZ,
    "float8_e5m2fnuz": DataType.HIPDNN_DATA_FP8_E5M2_FNUZ,
    "float8_e8m0fnu": DataType.HIPDNN_DATA_FP8_E8M0,
    "float4_e2m1fn_x2": DataType.HIPDNN_DATA_FP4_E2M1, "float4_e2m1fn": DataType.HIPDNN_DATA_FP4_E2M1,
    "float6_e2m3fn": DataType.HIPDNN_DATA_FP6_E2M3_EXT, "float6_e3m2fn": DataType.HIPDNN_DATA_FP6_E3M2_EXT,
}


def dtype_name(dt) -> str:
    """The bare element type name of a torch dtype (``torch.float8_e4m3fn`` -> ``float8_e4m3fn``),
    a numpy dtype or a string."""
    return str(dt).rsplit(".", 1)[-1]


def data_type_of_name(dt):
    """The hipDNN data type of a torch dtype / element type name, else None."""
    return _BY_NAME.get(dtype_name(dt))


def int_vector(what: str, v, *, minimum: int) -> list[int]:
    """``v`` as a list of ints >= ``minimum``, else BadParamError (never a bare ValueError)."""
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise BadParamError(f"{what} must be a sequence of integers, got {v!r}")
    out = []
    for e in v:
        if isinstance(e, bool) or not isinstance(e, (int, np.integer)):
            if isinstance(e, float) and e.is_integer():
                e = int(e)
            else:
                raise BadParamError(f"{what} must be integers, got {list(v)!r}")
        if int(e) < minimum:
            raise BadParamError(f"{what} must be >= {minimum}, got {list(v)!r}")
        out.append(int(e))
    return out


def data_type_of(dt):
    """DataType(dt), or BadParamError naming the valid types."""
    if dt is None:
        return None
    try:
        return DataType(dt)
    except (ValueError, TypeError):
        pass
    if isinstance(dt, str):
        key = dt.upper()
        for cand in (key, "HIPDNN_DATA_" + key):
            if cand in DataType.__members__:
                return DataType[cand]
    elif str(dt).startswith("torch."):       # a torch dtype, as cudnn-frontend accepts them
        hit = data_type_of_name(dt)
        if hit is not None:
            return hit
    elif hasattr(dt, "name") and hasattr(dt, "value"):   # another library's data-type enum member
        key = str(dt.name).upper()
        for cand in (key, "HIPDNN_DATA_" + key):
            if cand in DataType.__members__:
                return DataType[cand]
    raise BadParamError(f"unknown data type {dt!r} (one of: "
                        + ", ".join(m.name for m in DataType) + ")")


def to_numpy_dtype(dt) -> np.dtype | None:
    return _NP.get(DataType(dt)) if dt is not None else None


def from_numpy_dtype(d) -> DataType:
    d = np.dtype(d)
    if d.name == "bfloat16":
        return DataType.HIPDNN_DATA_BFLOAT16
    try:
        return _FROM_NP[d]
    except KeyError:
        raise TypeError(f"no hipDNN data type for numpy dtype {d}") from None


def element_size(dt) -> int:
    dt = DataType(dt)
    if dt in _NP:
        return _NP[dt].itemsize
    return _SIZE.get(dt, 1)


def scalar_bytes(value, dt) -> bytes:
    """The VALUE_EXT bytes of a scalar of type ``dt`` (little-endian, the type's byte size)."""
    dt = DataType(dt)
    if dt == DataType.HIPDNN_DATA_BFLOAT16:
        return struct.pack("<f", float(value))[2:]
    npd = _NP.get(dt)
    if npd is None:
        raise TypeError(f"cannot encode a scalar of type {dt.name}")
    return np.asarray(value, dtype=npd).tobytes()


def packed_strides(dims, order=None) -> list[int]:
    """Packed strides for ``dims``; ``order`` lists the axes from the innermost (stride-1) outwards
    (default: row-major, the last axis innermost)."""
    n = len(dims)
    order = list(range(n - 1, -1, -1)) if order is None else list(order)
    st = [0] * n
    acc = 1
    for ax in order:
        st[ax] = acc
        acc *= max(int(dims[ax]), 1)
    return st


def stride_order(strides) -> list[int]:
    """Axes from the innermost outwards (ties: the later axis is inner)."""
    n = len(strides)
    return sorted(range(n), key=lambda i: (strides[i], -i))


class ScalarType(enum.Enum):
    """How a scalar tensor's value is delivered (RFC 0016 §4.3)."""
    RUNTIME_PARAM = "runtime_param"
    COMPILE_TIME_CONST = "compile_time_const"


_UNSET = object()


class Tensor:
    """A graph tensor (hipDNN ``TensorAttributes`` / cudnn-frontend ``Tensor_attributes``).

    Setters return ``self`` so they chain.  Tensors created by operations are virtual until
    ``set_output(True)``.
    """

    def __init__(self, graph=None, name="", dim=None, stride=None, data_type=None,
                 is_virtual=False, uid=None):
        self._graph = graph
        self.name = name or ""
        self.dim = int_vector(f"tensor {name!r}: dims", dim, minimum=1) if dim is not None else None
        self.stride = (int_vector(f"tensor {name!r}: strides", stride, minimum=0)
                       if stride is not None else None)
        self.data_type = data_type_of(data_type)
        self.is_virtual = bool(is_virtual)
        self.uid = uid
        self.byte_alignment = 16
        self._value = _UNSET
        self._runtime = False
        self._producer = None     # the node that writes it (None for graph inputs)
        self._ragged = None       # the offsets tensor of a ragged tensor
        self.ragged_offset_multiplier = 1

    # ------------------------------------------------------------------ repr
    def __repr__(self):
        dt = self.data_type.name[len("HIPDNN_DATA_"):] if self.data_type is not None else "?"
        return (f"Tensor(name={self.name!r}, uid={self.uid}, dim={self.dim}, stride={self.stride}, "
                f"data_type={dt}, virtual={self.is_virtual})")

    def _post_build(self, what):
        g = self._graph
        if g is not None and g._lowered:
            warnings.warn(f"Tensor {self.name or self.uid}: {what} after the graph was built has no "
                          f"effect on the compiled plan", RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ setters
    def set_name(self, name):
        self.name = name
        return self

    def set_uid(self, uid):
        self.uid = int(uid)
        return self

    def set_dim(self, dim):
        self.dim = int_vector(f"tensor {self.name!r}: dims", dim, minimum=1)
        return self

    def set_stride(self, stride):
        self.stride = int_vector(f"tensor {self.name!r}: strides", stride, minimum=0)
        return self

    def set_data_type(self, data_type):
        self.data_type = data_type_of(data_type)
        return self

    def set_is_virtual(self, v=True):
        self.is_virtual = bool(v)
        return self

    def set_output(self, v=True):
        self.is_virtual = not v
        return self

    def set_byte_alignment(self, n):
        self.byte_alignment = int(n)
        return self

    def set_ragged_offset(self, offsets):
        """Make this a ragged tensor: batch b starts ``offsets[b] * multiplier`` elements after
        the base address (``offsets``: a [B + 1, 1, 1, 1] INT32/INT64 graph input), its other
        strides as set; None makes it dense again."""
        if offsets is not None and not isinstance(offsets, Tensor):
            raise TypeError("set_ragged_offset takes a Tensor (or None)")
        if offsets is self:
            raise BadParamError("a tensor cannot hold its own ragged offsets")
        self._post_build("set_ragged_offset")
        self._ragged = offsets
        return self

    def get_ragged_offset(self):
        return self._ragged

    def set_ragged_offset_multiplier(self, n):
        """hipDNN's ``ragged_offset_multiplier``: the element offset of batch b is
        ``offsets[b] * n`` (default 1)."""
        if int(n) < 1:
            raise BadParamError(f"ragged offset multiplier {n} must be >= 1")
        self._post_build("set_ragged_offset_multiplier")
        self.ragged_offset_multiplier = int(n)
        return self

    def get_ragged_offset_multiplier(self):
        return self.ragged_offset_multiplier

    # ------------------------------------------------------------------ getters
    def get_name(self):
        return self.name

    def get_uid(self):
        return self.uid

    def get_dim(self):
        return list(self.dim) if self.dim is not None else None

    def get_stride(self):
        return list(self.stride) if self.stride is not None else None

    def get_data_type(self):
        return self.data_type

    def get_is_virtual(self):
        return self.is_virtual

    @property
    def shape(self):
        return tuple(self.dim) if self.dim is not None else None

    # ------------------------------------------------------------------ by-value scalars (RFC 0016)
    def _set_scalar_shape(self, value):
        if self.dim is None:
            self.dim = [1]
        if self.stride is None:
            self.stride = [1]
        if self.data_type is None:
            self.data_type = _scalar_dtype(value)

    def set_value(self, value):
        """Compile-time constant (value baked, runtime flag clear)."""
        self._post_build("set_value")
        self._value = value
        self._runtime = False
        self._set_scalar_shape(value)
        return self

    set_compile_time_constant = set_value

    def set_as_runtime_parameter(self):
        """Runtime user-supplied scalar: runtime flag set, any prior value cleared; the value is a
        host scalar given in the variant pack at execute."""
        self._post_build("set_as_runtime_parameter")
        self._runtime = True
        self._value = _UNSET
        if self.dim is None:
            self.dim = [1]
        if self.stride is None:
            self.stride = [1]
        return self

    def set_is_pass_by_value(self, v=True):
        """Sets only the runtime flag (a value, if any, is kept: runtime-with-default)."""
        self._post_build("set_is_pass_by_value")
        self._runtime = bool(v)
        return self

    def get_pass_by_value(self):
        """The value in the runtime-with-default state, else None."""
        return self._value if (self._runtime and self._value is not _UNSET) else None

    def get_compile_time_constant(self):
        """The value of a compile-time constant, else None."""
        return self._value if (not self._runtime and self._value is not _UNSET) else None

    def get_has_compile_time_constant(self) -> bool:
        return not self._runtime and self._value is not _UNSET

    def get_is_pass_by_value(self) -> bool:
        return self._runtime or self._value is not _UNSET

    def get_is_runtime_pass_by_value(self) -> bool:
        return self._runtime

    def get_value_variant(self):
        return None if self._value is _UNSET else self._value

    @property
    def has_value(self) -> bool:
        return self._value is not _UNSET


def _scalar_dtype(value) -> DataType:
    if isinstance(value, (bool, np.bool_)):
        return DataType.HIPDNN_DATA_BOOLEAN
    if isinstance(value, np.generic):
        return from_numpy_dtype(value.dtype)
    if isinstance(value, int):
        return DataType.HIPDNN_DATA_INT32
    return DataType.HIPDNN_DATA_FLOAT
