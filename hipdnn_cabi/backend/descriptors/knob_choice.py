"""HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR ("knob setting", spec §1.11)."""
from __future__ import annotations

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType
from ...errors import BadParamError
from .. import attrs
from .base import Descriptor, getter, setter

# Limits of the real backend are unconfirmed (spec §1.11); these are our choices (docs/plugins.md).
MAX_KNOB_ID_LENGTH = 256
MAX_KNOB_STRING_VALUE_LENGTH = 1024

INT, FLOAT, STRING = 1, 2, 3  # = KnobValue union tags (knob_value.fbs)


class KnobChoiceDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR
    NAME = "KnobSettingDescriptor"

    def __init__(self):
        super().__init__()
        self.knob_id: str | None = None
        self.kind = None      # INT / FLOAT / STRING
        self.value = None

    @setter(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
    def _set_type(self, ctx, atype, count, arr, nbytes):
        s = attrs.set_string(ctx, atype, count, arr, nbytes)
        if not s:
            raise BadParamError(f"{ctx}: knob id must not be empty")
        if len(s.encode()) > MAX_KNOB_ID_LENGTH:
            raise BadParamError(f"{ctx}: knob id longer than {MAX_KNOB_ID_LENGTH}")
        self.knob_id = s

    @setter(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)
    def _set_value(self, ctx, atype, count, arr, nbytes):
        if atype == T.HIPDNN_TYPE_INT64:
            self.value, self.kind = attrs.set_int64(ctx, atype, count, arr, nbytes), INT
        elif atype == T.HIPDNN_TYPE_DOUBLE:
            self.value, self.kind = attrs.set_double(ctx, atype, count, arr, nbytes), FLOAT
        elif atype == T.HIPDNN_TYPE_CHAR:
            s = attrs.set_string(ctx, atype, count, arr, nbytes)
            if len(s.encode()) > MAX_KNOB_STRING_VALUE_LENGTH:
                raise BadParamError(f"{ctx}: string value longer than {MAX_KNOB_STRING_VALUE_LENGTH}")
            self.value, self.kind = s, STRING
        else:
            raise BadParamError(f"{ctx}: attributeType mismatch (INT64, DOUBLE or CHAR expected)")

    def _finalize(self):
        if self.knob_id is None:
            raise BadParamError("KnobSettingDescriptor::finalize() failed: knob id not set")
        if self.kind is None:
            raise BadParamError("KnobSettingDescriptor::finalize() failed: knob value not set")

    @getter(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)
    def _get_type(self, ctx, atype, req, cnt, arr):
        attrs.get_string(ctx, atype, req, cnt, arr, self.knob_id)

    @getter(A.HIPDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)
    def _get_value(self, ctx, atype, req, cnt, arr):
        want = {INT: T.HIPDNN_TYPE_INT64, FLOAT: T.HIPDNN_TYPE_DOUBLE, STRING: T.HIPDNN_TYPE_CHAR}[self.kind]
        if atype != want:
            raise BadParamError(f"{ctx}: attributeType mismatch")
        if self.kind == STRING:
            attrs.get_string(ctx, atype, req, cnt, arr, self.value)
        else:
            attrs.get_exact_one(ctx, atype, want, req, cnt, arr,
                                attrs.pack_i64(self.value) if self.kind == INT else attrs.pack_f64(self.value))
