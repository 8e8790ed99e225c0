"""HIPDNN_BACKEND_KNOB_INFO_DESCRIPTOR ("knob", spec §1.12).

Callers normally only read these: the engine descriptor builds finalized ones from the plugin's
EngineDetails (:func:`from_flatbuffer`).
"""
from __future__ import annotations

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType
from ...errors import BadParamError
from ...schemas._generated.FloatConstraint import FloatConstraint
from ...schemas._generated.FloatValue import FloatValue
from ...schemas._generated.IntConstraint import IntConstraint
from ...schemas._generated.IntValue import IntValue
from ...schemas._generated.StringConstraint import StringConstraint
from ...schemas._generated.StringValue import StringValue
from .. import attrs
from .base import Descriptor, getter, setter
from .knob_choice import FLOAT, INT, MAX_KNOB_ID_LENGTH, MAX_KNOB_STRING_VALUE_LENGTH, STRING

MAX_DESCRIPTION_LENGTH = 4096
_KIND_TYPE = {INT: T.HIPDNN_TYPE_INT64, FLOAT: T.HIPDNN_TYPE_DOUBLE, STRING: T.HIPDNN_TYPE_CHAR}


class KnobInfoDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_KNOB_INFO_DESCRIPTOR
    NAME = "KnobDescriptor"

    def __init__(self):
        super().__init__()
        self.knob_id = None
        self.description = ""
        self.default = None          # (kind, value)
        self.minimum = None          # (kind, value)
        self.maximum = None
        self.stride = None
        self.deprecated = False
        self.valid_ints: list = []
        self.valid_strings: list = []
        self.string_max_length = None
        self.serialized = b""        # the Knob FlatBuffer (when built from EngineDetails)

    # ------------------------------------------------------------------ set
    @setter(A.HIPDNN_ATTR_KNOB_INFO_TYPE)
    def _set_type(self, ctx, atype, count, arr, nbytes):
        s = attrs.set_string(ctx, atype, count, arr, nbytes)
        if not s or len(s.encode()) > MAX_KNOB_ID_LENGTH:
            raise BadParamError(f"{ctx}: knob id must be 1..{MAX_KNOB_ID_LENGTH} bytes")
        self.knob_id = s

    def _num(self, ctx, atype, count, arr, nbytes):
        if atype == T.HIPDNN_TYPE_INT64:
            return INT, attrs.set_int64(ctx, atype, count, arr, nbytes)
        if atype == T.HIPDNN_TYPE_DOUBLE:
            return FLOAT, attrs.set_double(ctx, atype, count, arr, nbytes)
        raise BadParamError(f"{ctx}: attributeType mismatch (INT64 or DOUBLE expected)")

    @setter(A.HIPDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE)
    def _set_max(self, ctx, atype, count, arr, nbytes):
        self.maximum = self._num(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_KNOB_INFO_MINIMUM_VALUE)
    def _set_min(self, ctx, atype, count, arr, nbytes):
        self.minimum = self._num(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_KNOB_INFO_STRIDE)
    def _set_stride(self, ctx, atype, count, arr, nbytes):
        self.stride = attrs.set_int64(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_KNOB_INFO_DESCRIPTION)
    def _set_desc(self, ctx, atype, count, arr, nbytes):
        s = attrs.set_string(ctx, atype, count, arr, nbytes)
        if len(s.encode()) > MAX_DESCRIPTION_LENGTH:
            raise BadParamError(f"{ctx}: description longer than {MAX_DESCRIPTION_LENGTH}")
        self.description = s

    @setter(A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE)
    def _set_default(self, ctx, atype, count, arr, nbytes):
        if atype == T.HIPDNN_TYPE_CHAR:
            s = attrs.set_string(ctx, atype, count, arr, nbytes)
            if len(s.encode()) > MAX_KNOB_STRING_VALUE_LENGTH:
                raise BadParamError(f"{ctx}: string value too long")
            self.default = (STRING, s)
        else:
            self.default = self._num(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_KNOB_INFO_DEPRECATED)
    def _set_depr(self, ctx, atype, count, arr, nbytes):
        self.deprecated = attrs.set_bool(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_INT)
    def _set_vint(self, ctx, atype, count, arr, nbytes):
        if atype == T.HIPDNN_TYPE_INT64 and count == 0:
            self.valid_ints = []
            return
        self.valid_ints = list(attrs.set_int64_vector(ctx, atype, count, arr, nbytes))

    @setter(A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_STRING)
    def _set_vstr(self, ctx, atype, count, arr, nbytes):
        if atype == T.HIPDNN_TYPE_CHAR and count == 0 and not arr:
            self.valid_strings = []
            return
        self.valid_strings.append(attrs.set_string(ctx, atype, count, arr, nbytes))

    @setter(A.HIPDNN_ATTR_KNOB_INFO_STRING_MAX_LENGTH)
    def _set_smax(self, ctx, atype, count, arr, nbytes):
        if atype == T.HIPDNN_TYPE_INT32:
            _check = attrs._check
            _check(ctx, atype, T.HIPDNN_TYPE_INT32, arr)
            if count != 1:
                raise BadParamError(f"{ctx}: elementCount is not 1")
            self.string_max_length = attrs._i32.unpack(attrs._raw(arr, nbytes))[0]
        else:
            self.string_max_length = attrs.set_int64(ctx, atype, count, arr, nbytes)

    # ------------------------------------------------------------------ finalize
    def _finalize(self):
        ctx = "KnobDescriptor::finalize() failed"
        if self.knob_id is None:
            raise BadParamError(f"{ctx}: knob id not set")
        if self.default is None:
            raise BadParamError(f"{ctx}: default value not set")
        kind = self.default[0]
        if (self.minimum is None) != (self.maximum is None):
            raise BadParamError(f"{ctx}: minimum and maximum must be set together")
        if self.minimum is not None:
            if kind == STRING or self.minimum[0] != kind or self.maximum[0] != kind:
                raise BadParamError(f"{ctx}: min/max type does not match the default value")
            if self.minimum[1] > self.maximum[1]:
                raise BadParamError(f"{ctx}: minimum > maximum")
        if self.stride is not None and (kind != INT or self.stride <= 0):
            raise BadParamError(f"{ctx}: stride must be positive and needs an integer knob")
        if self.valid_ints and kind != INT:
            raise BadParamError(f"{ctx}: integer valid values need an integer knob")
        if (self.valid_strings or self.string_max_length is not None) and kind != STRING:
            raise BadParamError(f"{ctx}: string constraints need a string knob")

    # ------------------------------------------------------------------ get
    @getter(A.HIPDNN_ATTR_KNOB_INFO_TYPE)
    def _get_type(self, ctx, atype, req, cnt, arr):
        attrs.get_string(ctx, atype, req, cnt, arr, self.knob_id)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_DESCRIPTION)
    def _get_desc(self, ctx, atype, req, cnt, arr):
        attrs.get_string(ctx, atype, req, cnt, arr, self.description)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_DEPRECATED)
    def _get_depr(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.deprecated)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE_TYPE)
    def _get_dtype(self, ctx, atype, req, cnt, arr):
        attrs.get_int64(ctx, atype, req, cnt, arr, int(_KIND_TYPE[self.default[0]]))

    def _get_value(self, ctx, atype, req, cnt, arr, v, optional):
        if v is None:
            if not optional:
                raise BadParamError(f"{ctx}: not set")
            attrs.get_optional(ctx, atype, atype, req, cnt, arr, None)
            return
        kind, val = v
        want = _KIND_TYPE[kind]
        if kind == STRING:
            attrs.get_string(ctx, atype, req, cnt, arr, val)
        else:
            packed = attrs.pack_i64(val) if kind == INT else attrs.pack_f64(val)
            attrs.get_packed_scalar(ctx, atype, want, req, cnt, arr, packed)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_DEFAULT_VALUE)
    def _get_default(self, ctx, atype, req, cnt, arr):
        self._get_value(ctx, atype, req, cnt, arr, self.default, False)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_MINIMUM_VALUE)
    def _get_min(self, ctx, atype, req, cnt, arr):
        self._get_value(ctx, atype, req, cnt, arr, self.minimum, True)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE)
    def _get_max(self, ctx, atype, req, cnt, arr):
        self._get_value(ctx, atype, req, cnt, arr, self.maximum, True)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_STRIDE)
    def _get_stride(self, ctx, atype, req, cnt, arr):
        attrs.get_optional(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                           None if self.stride is None else attrs.pack_i64(self.stride))

    @getter(A.HIPDNN_ATTR_KNOB_INFO_STRING_MAX_LENGTH)
    def _get_smax(self, ctx, atype, req, cnt, arr):
        v = self.string_max_length
        if atype == T.HIPDNN_TYPE_INT32:
            attrs.get_optional(ctx, atype, T.HIPDNN_TYPE_INT32, req, cnt, arr,
                               None if v is None else attrs.pack_i32(v))
        else:
            attrs.get_optional(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                               None if v is None else attrs.pack_i64(v))

    @getter(A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_INT)
    def _get_vint(self, ctx, atype, req, cnt, arr):
        attrs.get_int64_vector(ctx, atype, req, cnt, arr, self.valid_ints)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_VALID_VALUES_STRING)
    def _get_vstr(self, ctx, atype, req, cnt, arr):
        buf = b"".join(s.encode() + b"\0" for s in self.valid_strings)
        attrs.get_string(ctx, atype, req, cnt, arr, buf[:-1] if buf else b"")


def from_flatbuffer(knob, serialized: bytes = b"") -> KnobInfoDescriptor:
    """A finalized KnobInfoDescriptor from a generated ``Knob`` table object."""
    k = KnobInfoDescriptor()
    k.knob_id = (knob.KnobId() or b"").decode("utf-8", "replace")
    k.description = (knob.Description() or b"").decode("utf-8", "replace")
    k.deprecated = bool(knob.Deprecated())
    t = knob.DefaultValueType()
    tab = knob.DefaultValue()
    if t == INT:
        v = IntValue(); v.Init(tab.Bytes, tab.Pos); k.default = (INT, v.Value())
    elif t == FLOAT:
        v = FloatValue(); v.Init(tab.Bytes, tab.Pos); k.default = (FLOAT, v.Value())
    elif t == STRING:
        v = StringValue(); v.Init(tab.Bytes, tab.Pos)
        k.default = (STRING, (v.Value() or b"").decode("utf-8", "replace"))
    else:
        raise BadParamError(f"Knob {k.knob_id}: unknown default value type {t}")
    ct = knob.ConstraintType()
    if ct:
        tab = knob.Constraint()
        if ct == 1:
            c = IntConstraint(); c.Init(tab.Bytes, tab.Pos)
            k.minimum, k.maximum = (INT, c.MinValue()), (INT, c.MaxValue())
            k.stride = c.Step()
            k.valid_ints = [c.ValidValues(i) for i in range(c.ValidValuesLength())]
            if k.minimum[1] == 0 and k.maximum[1] == 0 and k.valid_ints:
                k.minimum = k.maximum = None
        elif ct == 2:
            c = FloatConstraint(); c.Init(tab.Bytes, tab.Pos)
            k.minimum, k.maximum = (FLOAT, c.MinValue()), (FLOAT, c.MaxValue())
        elif ct == 3:
            c = StringConstraint(); c.Init(tab.Bytes, tab.Pos)
            k.string_max_length = c.MaxLength()
            k.valid_strings = [c.ValidValues(i).decode("utf-8", "replace")
                               for i in range(c.ValidValuesLength())]
    k.serialized = serialized
    k.finalized = True
    return k


def serialize_knob(k: KnobInfoDescriptor) -> bytes:
    """A standalone ``Knob`` FlatBuffer (knob_value.fbs) for KNOB_INFO_SERIALIZED_VALUE.
    Slots: knob_id 0, description 1, default_value_type 2, default_value 3, constraint_type 4,
    constraint 5, deprecated 6."""
    import flatbuffers
    b = flatbuffers.Builder(256)

    def value(kind, v):
        if kind == STRING:
            s = b.CreateString(v)
            b.StartObject(1); b.PrependUOffsetTRelativeSlot(0, s, 0)
        else:
            b.StartObject(1)
            if kind == INT:
                b.PrependInt64Slot(0, int(v), 0)
            else:
                b.PrependFloat64Slot(0, float(v), 0.0)
        return b.EndObject()

    def int_vec(vals):
        b.StartVector(8, len(vals), 8)
        for x in reversed(vals):
            b.PrependInt64(int(x))
        return b.EndVector()

    dv = value(*k.default)
    ctype, con = 0, None
    kind = k.default[0]
    if kind == INT and (k.minimum is not None or k.stride is not None or k.valid_ints):
        vv = int_vec(k.valid_ints) if k.valid_ints else None
        b.StartObject(4)
        if k.minimum is not None:
            b.PrependInt64Slot(0, int(k.minimum[1]), 0)
            b.PrependInt64Slot(1, int(k.maximum[1]), 0)
        b.PrependInt64Slot(2, int(k.stride if k.stride is not None else 1), 1)
        if vv is not None:
            b.PrependUOffsetTRelativeSlot(3, vv, 0)
        ctype, con = 1, b.EndObject()
    elif kind == FLOAT and k.minimum is not None:
        b.StartObject(2)
        b.PrependFloat64Slot(0, float(k.minimum[1]), 0.0)
        b.PrependFloat64Slot(1, float(k.maximum[1]), 0.0)
        ctype, con = 2, b.EndObject()
    elif kind == STRING and (k.valid_strings or k.string_max_length is not None):
        vs = None
        if k.valid_strings:
            offs = [b.CreateString(s) for s in k.valid_strings]
            b.StartVector(4, len(offs), 4)
            for o in reversed(offs):
                b.PrependUOffsetTRelative(o)
            vs = b.EndVector()
        b.StartObject(2)
        if k.string_max_length is not None:
            b.PrependInt32Slot(0, int(k.string_max_length), 0)
        if vs is not None:
            b.PrependUOffsetTRelativeSlot(1, vs, 0)
        ctype, con = 3, b.EndObject()
    kid = b.CreateString(k.knob_id or "")
    desc = b.CreateString(k.description or "")
    b.StartObject(7)
    b.PrependUOffsetTRelativeSlot(0, kid, 0)
    b.PrependUOffsetTRelativeSlot(1, desc, 0)
    b.PrependUint8Slot(2, k.default[0], 0)
    b.PrependUOffsetTRelativeSlot(3, dv, 0)
    if con is not None:
        b.PrependUint8Slot(4, ctype, 0)
        b.PrependUOffsetTRelativeSlot(5, con, 0)
    b.PrependBoolSlot(6, bool(k.deprecated), False)
    b.Finish(b.EndObject())
    return bytes(b.Output())
