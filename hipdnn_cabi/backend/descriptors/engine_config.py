"""HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR (spec §1.8).

Finalize serializes an ``EngineConfig`` FlatBuffer (engine_id + knob settings) and asks the owning
plugin for the workspace size (through the graph's handle, ``handle.plugins``).  Knob settings come from ENGINECFG_KNOB_CHOICES (KNOB_CHOICE
descriptors), from HIPDNN_ATTR_KNOB_CHOICE_SERIALIZED_VALUE (serialized ``KnobSetting``
FlatBuffers, :mod:`.knob_setting`) and, for configs filled by ENGINEHEUR_RESULTS, from the engine
config of the heuristic policy that ordered the engines.
"""
from __future__ import annotations

import struct

import flatbuffers

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType
from ...errors import BadParamError, InternalError, NullPointerError
from .. import attrs
from .base import Descriptor, getter, setter
from .engine import handle_plugins
from .knob_choice import INT, STRING, KnobChoiceDescriptor
from .knob_setting import parse_knob_setting

ENGINE_KINDS = (DescriptorType.HIPDNN_BACKEND_ENGINE_DESCRIPTOR,)
KNOB_KINDS = (DescriptorType.HIPDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,)
INT64_MAX = (1 << 63) - 1


def serialize_engine_config(engine_id: int, knobs=(), ranking_metric: str | None = None) -> bytes:
    """EngineConfig {engine_id:long(0), knobs:[KnobSetting](1), ranking_metric:string(2)};
    KnobSetting {knob_id:string(0), value_type:ubyte(1), value:KnobValue(2)};
    IntValue/FloatValue/StringValue {value(0)}."""
    b = flatbuffers.Builder(64 + 64 * len(knobs))
    settings = []
    for kid, kind, val in knobs:
        if kind == STRING:
            s = b.CreateString(val)
            b.StartObject(1); b.PrependUOffsetTRelativeSlot(0, s, 0)
        else:
            b.StartObject(1)
            if kind == INT:
                b.PrependInt64Slot(0, int(val), 0)
            else:
                b.PrependFloat64Slot(0, float(val), 0.0)
        v = b.EndObject()
        k = b.CreateString(kid)
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, k, 0)
        b.PrependUint8Slot(1, kind, 0)
        b.PrependUOffsetTRelativeSlot(2, v, 0)
        settings.append(b.EndObject())
    vec = None
    if settings:
        b.StartVector(4, len(settings), 4)
        for s in reversed(settings):
            b.PrependUOffsetTRelative(s)
        vec = b.EndVector()
    metric = b.CreateString(ranking_metric) if ranking_metric else None
    b.StartObject(3)
    b.PrependInt64Slot(0, engine_id, 0)
    if vec is not None:
        b.PrependUOffsetTRelativeSlot(1, vec, 0)
    if metric is not None:
        b.PrependUOffsetTRelativeSlot(2, metric, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


class EngineConfigDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR
    NAME = "EngineConfigDescriptor"

    def __init__(self):
        super().__init__()
        self.engine = None
        self.knob_choices: list = []
        self.extra_knobs: list = []   # (knob id, kind, value): serialized knob settings, in order
        self.policy_knobs: list = []  # the same, from the heuristic policy's config (RESULTS)
        self.workspace_size = 0
        self._serialized = None

    def set_engine(self, engine):
        """Used by ENGINEHEUR_RESULTS to fill a caller-created config."""
        self.engine = engine
        self._serialized = None

    @setter(A.HIPDNN_ATTR_ENGINECFG_ENGINE)
    def _set_engine(self, ctx, atype, count, arr, nbytes):
        self.set_engine(attrs.set_descriptor(ctx, atype, count, arr, nbytes, ENGINE_KINDS))

    @setter(A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES)
    def _set_knobs(self, ctx, atype, count, arr, nbytes):
        attrs._check(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, arr)
        if count < 0:
            raise BadParamError(f"{ctx}: elementCount must not be negative")
        ids = attrs.set_pointer_vector(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        objs = [attrs.resolve_descriptor(ctx, i, KNOB_KINDS) for i in ids]
        seen = {k[0] for k in self.extra_knobs}
        for o in objs:
            if o.knob_id in seen:
                raise BadParamError(f"{ctx}: knob {o.knob_id} is set twice")
            seen.add(o.knob_id)
        self.knob_choices = objs
        self._serialized = None

    @setter(A.HIPDNN_ATTR_KNOB_CHOICE_SERIALIZED_VALUE)
    def _set_serialized_knobs(self, ctx, atype, count, arr, nbytes):
        """hipDNN's EngineConfigDescriptor::setKnobChoice: an array of ``{ptr, size}`` serialized
        KnobSetting FlatBuffers, appended to the config's knobs in order."""
        what = "EngineConfigDescriptor failed to set knob choice"
        if atype != T.HIPDNN_TYPE_FLATBUFFER_DATA_STRUCT_EXT:
            raise BadParamError(f"{what}: Invalid attribute type. (attributeType mismatch: "
                                f"expected HIPDNN_TYPE_FLATBUFFER_DATA_STRUCT_EXT)")
        if count < 1:
            raise BadParamError(f"{what}: Element count must be > 0.")
        if not arr:
            raise NullPointerError(f"{what}: Null pointer.")
        attrs._check_count(ctx, count)
        words = struct.unpack(f"<{2 * count}Q", attrs._raw(arr, nbytes))
        have = {k.knob_id for k in self.knob_choices} | {k[0] for k in self.extra_knobs}
        new = []
        for i in range(count):
            ptr, size = words[2 * i], words[2 * i + 1]
            setting = parse_knob_setting(what, ptr, size)
            if setting[0] in have:
                raise BadParamError(f"{what}: knob {setting[0]} is set twice.")
            have.add(setting[0])
            new.append(setting)
        self.extra_knobs.extend(new)
        self._serialized = None

    def apply_policy_config(self, knobs) -> None:
        """The knob settings of the heuristic policy's engine config for this engine (RESULTS;
        replaces those of an earlier RESULTS call); a knob the caller sets keeps its value."""
        self.policy_knobs = list(knobs)
        self._serialized = None

    def knob_settings(self) -> list:
        """Every knob setting of the config, (knob id, kind, value), in the order sent: the
        caller's (descriptors, then serialized), then the policy's for the other knobs."""
        own = [(k.knob_id, k.kind, k.value) for k in self.knob_choices] + list(self.extra_knobs)
        have = {k[0] for k in own}
        return own + [k for k in self.policy_knobs if k[0] not in have]

    def serialized(self) -> bytes:
        s = self._serialized
        if s is None:
            s = self._serialized = serialize_engine_config(self.engine.engine_id,
                                                           self.knob_settings())
        return s

    def _finalize(self):
        if self.engine is None:
            raise BadParamError("EngineConfigDescriptor::finalize() failed: engine not set")
        engine = self.engine
        ws = handle_plugins(engine.graph).workspace_size(engine.engine_id, self.serialized(),
                                                         engine.graph)
        if ws > INT64_MAX:
            raise InternalError("EngineConfigDescriptor::finalize() failed: negative workspace size")
        self.workspace_size = ws

    @getter(A.HIPDNN_ATTR_ENGINECFG_ENGINE)
    def _get_engine(self, ctx, atype, req, cnt, arr):
        attrs.get_descriptor_one(ctx, atype, req, cnt, arr, self.engine)

    @getter(A.HIPDNN_ATTR_ENGINECFG_WORKSPACE_SIZE)
    def _get_ws(self, ctx, atype, req, cnt, arr):
        attrs.get_exact_one(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                            attrs.pack_i64(self.workspace_size))

    @getter(A.HIPDNN_ATTR_ENGINECFG_KNOB_CHOICES)
    def _get_knobs(self, ctx, atype, req, cnt, arr):
        extra = []
        for kid, kind, value in self.knob_settings()[len(self.knob_choices):]:
            k = KnobChoiceDescriptor()
            k.knob_id, k.kind, k.value, k.finalized = kid, kind, value, True
            extra.append(k)
        attrs.get_descriptor_array(ctx, atype, req, cnt, arr, self.knob_choices + extra)
