"""HIPDNN_BACKEND_TENSOR_DESCRIPTOR (spec §1.4)."""
from __future__ import annotations

from ..._generated.enums import AttributeName as A, AttributeType as T, DataType, DescriptorType
from ...errors import BadParamError
from .. import attrs
from .base import Descriptor, getter, setter

DEFAULT_ALIGNMENT = 16


class TensorDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_TENSOR_DESCRIPTOR
    NAME = "TensorDescriptor"
    REFINALIZE_ALLOWED = True
    FAST_FIELDS = {
        int(A.HIPDNN_ATTR_TENSOR_UNIQUE_ID): (int(T.HIPDNN_TYPE_INT64), 0, "uid"),
        int(A.HIPDNN_ATTR_TENSOR_DIMENSIONS): (int(T.HIPDNN_TYPE_INT64), 1, "dims"),
        int(A.HIPDNN_ATTR_TENSOR_STRIDES): (int(T.HIPDNN_TYPE_INT64), 1, "strides"),
        int(A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL): (int(T.HIPDNN_TYPE_BOOLEAN), 2, "is_virtual"),
    }

    def __init__(self):
        super().__init__()
        self.uid = 0
        self.name = ""
        self.data_type = None
        self.dims: tuple = ()
        self.strides: tuple = ()
        self.is_virtual = False
        self.value: bytes | None = None          # by-value scalar (VALUE_EXT)
        self.byte_alignment = DEFAULT_ALIGNMENT
        self.ragged_offset_uid: int | None = None
        self.ragged_offset_tensor: "TensorDescriptor | None" = None   # set by descriptor
        self.ragged_offset_multiplier: int | None = None
        self.is_runtime_pass_by_value = False

    # ---------------------------------------------------------------- set
    @setter(A.HIPDNN_ATTR_TENSOR_UNIQUE_ID)
    def _set_uid(self, ctx, atype, count, arr, nbytes):
        self.uid = attrs.set_int64(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_TENSOR_NAME_EXT)
    def _set_name(self, ctx, atype, count, arr, nbytes):
        self.name = attrs.set_string(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_TENSOR_DATA_TYPE)
    def _set_data_type(self, ctx, atype, count, arr, nbytes):
        v = attrs.set_enum(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_DATA_TYPE)
        if v not in DataType._value2member_map_:
            raise BadParamError(f"{ctx}: invalid data type {v}")
        self.data_type = DataType(v)

    @setter(A.HIPDNN_ATTR_TENSOR_DIMENSIONS)
    def _set_dims(self, ctx, atype, count, arr, nbytes):
        self.dims = attrs.set_int64_vector(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_TENSOR_STRIDES)
    def _set_strides(self, ctx, atype, count, arr, nbytes):
        self.strides = attrs.set_int64_vector(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL)
    def _set_virtual(self, ctx, atype, count, arr, nbytes):
        self.is_virtual = attrs.set_bool(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_TENSOR_VALUE_EXT)
    def _set_value(self, ctx, atype, count, arr, nbytes):
        if atype != T.HIPDNN_TYPE_CHAR:
            raise BadParamError(f"{ctx}: attributeType mismatch (expected HIPDNN_TYPE_CHAR)")
        if self.data_type is None:
            raise BadParamError(f"{ctx}: the data type must be set before the value")
        size = attrs.DATA_TYPE_SIZE.get(self.data_type)
        if size is None:
            raise BadParamError(f"{ctx}: data type {self.data_type.name} cannot carry a by-value scalar")
        raw = attrs.set_bytes(ctx, atype, count, arr, nbytes)
        if count != size:
            raise BadParamError(f"{ctx}: elementCount {count} does not match the {size}-byte size "
                                f"of {self.data_type.name}")
        self.value = raw

    @setter(A.HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT)
    def _set_alignment(self, ctx, atype, count, arr, nbytes):
        v = attrs.set_int64(ctx, atype, count, arr, nbytes)
        if v < 0:
            raise BadParamError(f"{ctx}: byte alignment must not be negative")
        self.byte_alignment = v

    @setter(A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC)
    def _set_ragged(self, ctx, atype, count, arr, nbytes):
        # INT64: the offsets tensor's uid; BACKEND_DESCRIPTOR: the offsets tensor itself, which
        # the operation graph then gathers beside the operations' tensors
        if atype == T.HIPDNN_TYPE_BACKEND_DESCRIPTOR:
            aux = attrs.set_descriptor(ctx, atype, count, arr, nbytes,
                                       (DescriptorType.HIPDNN_BACKEND_TENSOR_DESCRIPTOR,),
                                       null_status=BadParamError)
            self.ragged_offset_tensor, self.ragged_offset_uid = aux, aux.uid
            return
        self.ragged_offset_uid = attrs.set_int64(ctx, atype, count, arr, nbytes)
        self.ragged_offset_tensor = None

    @setter(A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER)
    def _set_ragged_mult(self, ctx, atype, count, arr, nbytes):
        self.ragged_offset_multiplier = attrs.set_int64(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT)
    def _set_runtime_pbv(self, ctx, atype, count, arr, nbytes):
        self.is_runtime_pass_by_value = attrs.set_bool(ctx, atype, count, arr, nbytes)

    # ---------------------------------------------------------------- finalize
    def _finalize(self):
        ctx = "TensorDescriptor::finalize() failed"
        if not self.dims:
            raise BadParamError(f"{ctx}: dimensions not set")
        if not self.strides:
            raise BadParamError(f"{ctx}: strides not set")
        if len(self.dims) != len(self.strides):
            raise BadParamError(f"{ctx}: dimensions ({len(self.dims)}) and strides "
                                f"({len(self.strides)}) differ in length")
        if self.data_type is None:
            raise BadParamError(f"{ctx}: data type not set")

    # ---------------------------------------------------------------- get
    @getter(A.HIPDNN_ATTR_TENSOR_UNIQUE_ID)
    def _get_uid(self, ctx, atype, req, cnt, arr):
        attrs.get_int64(ctx, atype, req, cnt, arr, self.uid)

    @getter(A.HIPDNN_ATTR_TENSOR_NAME_EXT)
    def _get_name(self, ctx, atype, req, cnt, arr):
        attrs.get_string(ctx, atype, req, cnt, arr, self.name)

    @getter(A.HIPDNN_ATTR_TENSOR_DATA_TYPE)
    def _get_data_type(self, ctx, atype, req, cnt, arr):
        attrs.get_enum(ctx, atype, req, cnt, arr, self.data_type, T.HIPDNN_TYPE_DATA_TYPE)

    @getter(A.HIPDNN_ATTR_TENSOR_DIMENSIONS)
    def _get_dims(self, ctx, atype, req, cnt, arr):
        attrs.get_int64_vector(ctx, atype, req, cnt, arr, self.dims)

    @getter(A.HIPDNN_ATTR_TENSOR_STRIDES)
    def _get_strides(self, ctx, atype, req, cnt, arr):
        attrs.get_int64_vector(ctx, atype, req, cnt, arr, self.strides)

    @getter(A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL)
    def _get_virtual(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.is_virtual)

    @getter(A.HIPDNN_ATTR_TENSOR_IS_BY_VALUE)
    def _get_by_value(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.value is not None)

    @getter(A.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT)
    def _get_runtime_pbv(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.is_runtime_pass_by_value)

    @getter(A.HIPDNN_ATTR_TENSOR_VALUE_EXT)
    def _get_value(self, ctx, atype, req, cnt, arr):
        if atype != T.HIPDNN_TYPE_CHAR:
            raise BadParamError(f"{ctx}: attributeType mismatch (expected HIPDNN_TYPE_CHAR)")
        if self.value is None:
            raise BadParamError(f"{ctx}: the tensor has no value")
        size = len(self.value)
        if not arr or req == 0:
            attrs._size_query(ctx, cnt, size)
            return
        if req < size:
            raise BadParamError(f"{ctx}: requestedElementCount {req} is smaller than the value "
                                f"size {size}")
        attrs._write(arr, self.value)
        if cnt:
            cnt[0] = size

    @getter(A.HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT)
    def _get_alignment(self, ctx, atype, req, cnt, arr):
        attrs.get_int64(ctx, atype, req, cnt, arr, self.byte_alignment)

    @getter(A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC)
    def _get_ragged(self, ctx, atype, req, cnt, arr):
        if atype == T.HIPDNN_TYPE_BACKEND_DESCRIPTOR:   # the offsets tensor (a new wrapper)
            attrs.get_optional_descriptor(ctx, atype, req, cnt, arr, self.ragged_offset_tensor)
            return
        v = self.ragged_offset_uid
        attrs.get_optional(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                           None if v is None else attrs.pack_i64(v))

    @getter(A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER)
    def _get_ragged_mult(self, ctx, atype, req, cnt, arr):
        v = self.ragged_offset_multiplier
        attrs.get_optional(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                           None if v is None else attrs.pack_i64(v))
