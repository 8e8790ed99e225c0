"""HIPDNN_BACKEND_ENGINE_DESCRIPTOR (spec §1.7).

Finalize re-queries the plugins for the graph's applicable engines, then fetches the engine's
EngineDetails from the owning plugin (through the graph's handle, ``handle.plugins``); the
details stay alive (plugin-owned memory) until the engine implementation dies, when
DestroyEngineDetails is called.
"""
from __future__ import annotations

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType
from ...errors import BadParamError, NotInitializedError, NullPointerError
from ...schemas import verifier
from ...schemas._generated.EngineDetails import EngineDetails
from .. import attrs, runtime
from . import knob_info
from .base import Descriptor, getter, setter

GRAPH_KINDS = (DescriptorType.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,)
RANGE_MSG = "EngineDescriptor::finalize() failed: Engine id is not in a valid range of engine IDs"


def handle_plugins(graph):
    h = getattr(graph, "handle", None)
    hp = getattr(h, "plugins", None) if h is not None else None
    if hp is None:
        raise BadParamError("The operation graph has no handle with engine plugins")
    return hp


class EngineDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_ENGINE_DESCRIPTOR
    NAME = "EngineDescriptor"

    def __init__(self):
        super().__init__()
        self.graph = None
        self.engine_id = None
        self._details = None     # parsed: (knobs, notes)
        self.plugin = None
        self._knob_blobs = None

    @classmethod
    def prebuilt(cls, graph, engine_id: int):
        """A finalized engine for an id the heuristics just got from the plugins (details lazy)."""
        e = cls()
        e.graph, e.engine_id, e.finalized = graph, engine_id, True
        return e

    # ------------------------------------------------------------------ set
    @setter(A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH)
    def _set_graph(self, ctx, atype, count, arr, nbytes):
        self.graph = attrs.set_descriptor(ctx, atype, count, arr, nbytes, GRAPH_KINDS)

    @setter(A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX)
    def _set_id(self, ctx, atype, count, arr, nbytes):
        self.engine_id = attrs.set_int64(ctx, atype, count, arr, nbytes)

    # ------------------------------------------------------------------ finalize
    def _finalize(self):
        if self.graph is None:
            raise BadParamError("EngineDescriptor::finalize() failed: operation graph not set")
        if self.engine_id is None:
            raise BadParamError("EngineDescriptor::finalize() failed: engine id not set")
        hp = handle_plugins(self.graph)
        if self.engine_id not in hp.applicable(self.graph):
            raise BadParamError(RANGE_MSG)
        bad = [n for n in self.details()[1] if n < 0]
        if bad:  # RFC 0010 §4.2: invalid raw note values are rejected when the engine finalizes
            raise BadParamError(f"EngineDescriptor::finalize() failed: engine {self.engine_id} "
                                f"reports invalid behaviour note value(s) {bad}")

    # ------------------------------------------------------------------ details
    def details(self):
        """(knob descriptors, behaviour notes) from the plugin's EngineDetails (fetched once)."""
        d = self._details
        if d is not None:
            return d
        plugin, raw = handle_plugins(self.graph).engine_details(self.engine_id, self.graph, self)
        try:
            verifier.verify(raw, "EngineDetails")
        except verifier.VerificationError as e:
            raise BadParamError(f"Engine details for engine ID {self.engine_id} failed "
                                f"verification: {e}") from None
        ed = EngineDetails.GetRootAs(raw, 0)
        knobs = []
        for i in range(ed.KnobsLength()):
            knobs.append(knob_info.from_flatbuffer(ed.Knobs(i)))
        notes = [ed.BehaviorNotes(i) for i in range(ed.BehaviorNotesLength())]
        self.plugin = plugin
        self._details = d = (knobs, notes)
        return d

    # ------------------------------------------------------------------ get
    @getter(A.HIPDNN_ATTR_ENGINE_OPERATION_GRAPH)
    def _get_graph(self, ctx, atype, req, cnt, arr):
        attrs.get_descriptor_one(ctx, atype, req, cnt, arr, self.graph)

    @getter(A.HIPDNN_ATTR_ENGINE_GLOBAL_INDEX)
    def _get_id(self, ctx, atype, req, cnt, arr):
        attrs.get_exact_one(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                            attrs.pack_i64(self.engine_id))

    @getter(A.HIPDNN_ATTR_ENGINE_KNOB_INFO)
    def _get_knobs(self, ctx, atype, req, cnt, arr):
        attrs._type(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        knobs = self.details()[0]
        attrs.get_descriptor_array(ctx, atype, req, cnt, arr, knobs, require_full=True)

    @getter(A.HIPDNN_ATTR_KNOB_INFO_SERIALIZED_VALUE)
    def _get_knob_blobs(self, ctx, atype, req, cnt, arr):
        attrs._type(ctx, atype, T.HIPDNN_TYPE_FLATBUFFER_DATA_STRUCT_EXT)
        knobs = self.details()[0]
        if req == 0:
            if cnt:
                cnt[0] = len(knobs)
            return
        if not arr:
            raise NullPointerError(f"{ctx}: arrayOfElements is nullptr")
        if req < 0:
            raise BadParamError(f"{ctx}: requestedElementCount must not be negative")
        blobs = self._knob_blobs
        if blobs is None:
            ffi = runtime.ffi
            raws = [knob_info.serialize_knob(k) for k in knobs]
            blobs = self._knob_blobs = [(ffi.new("char[]", r), len(r)) for r in raws]
        k = min(req, len(blobs))
        ffi = runtime.ffi
        packed = b"".join(attrs.pack_u64(int(ffi.cast("uintptr_t", c))) + attrs.pack_u64(n)
                          for c, n in blobs[:k])
        attrs._write(arr, packed)
        if cnt:
            cnt[0] = k

    @getter(A.HIPDNN_ATTR_ENGINE_BEHAVIOR_NOTE)
    def _get_notes(self, ctx, atype, req, cnt, arr):
        attrs._type(ctx, atype, T.HIPDNN_TYPE_BEHAVIOR_NOTE)
        notes = self.details()[1]
        if arr and req != 0 and any(n < 0 for n in notes):
            raise BadParamError(f"{ctx}: the plugin reported a negative behaviour note")
        attrs.get_packed_vector(ctx, atype, T.HIPDNN_TYPE_BEHAVIOR_NOTE, req, cnt, arr, notes, "i",
                                require_full=True)

    @getter(A.HIPDNN_ATTR_ENGINE_NAME_EXT)
    def _get_name(self, ctx, atype, req, cnt, arr):
        attrs.get_string(ctx, atype, req, cnt, arr,
                         handle_plugins(self.graph).engine_name(self.engine_id))


def require_finalized_engine(e):
    if not e.finalized:
        raise NotInitializedError("EngineDescriptor is not finalized")
