"""FlatBuffer helpers: op graph → friendly objects, EngineConfig parsing, EngineDetails building.

Every buffer is verified (hipdnn_cabi.schemas.verifier) before it is read; a malformed buffer
raises PluginError(BAD_PARAM).
"""
from __future__ import annotations

import flatbuffers

from ..schemas import tensor_value
from ..schemas._generated import EngineDetails as _ED
from ..schemas._generated.EngineConfig import EngineConfig as _EngineConfig
from ..schemas._generated.Graph import Graph as _Graph
from ..schemas._generated.NodeAttributes import NodeAttributes
from ..schemas.dump import gen_class, table_to_dict
from ..schemas.verifier import VerificationError, verify
from .errors import BAD_PARAM, PluginError

_FB_FLOAT = 1          # the FlatBuffers DataType of FLOAT (UNSET = 0)
_UNION_NAMES = {v: k for k, v in vars(NodeAttributes).items()
                if not k.startswith("_") and isinstance(v, int) and v}


def _verified(buf: bytes, root: str, what: str) -> bytes:
    if not buf:
        raise PluginError(BAD_PARAM, f"{what} is empty")
    try:
        verify(buf, root)
    except VerificationError as e:
        raise PluginError(BAD_PARAM, f"invalid {what}: {e}") from None
    return buf


class Tensor:
    """One tensor of the op graph.  ``dtype`` is the schema DataType value
    (hipdnn_cabi.schemas._generated.DataType); ``value`` is the by-value scalar or None;
    ``ragged_offset_uid`` the uid of a ragged tensor's offsets tensor (element offset of batch b
    = offsets[b] * ``ragged_offset_multiplier``) or None."""
    __slots__ = ("uid", "name", "dtype", "dims", "strides", "virtual", "value", "value_type",
                 "is_runtime_pass_by_value", "alignment", "ragged_offset_uid",
                 "ragged_offset_multiplier")

    def __repr__(self):
        return (f"Tensor(uid={self.uid}, dtype={self.dtype}, dims={self.dims}, "
                f"strides={self.strides}, virtual={self.virtual}, value={self.value})")

    @property
    def by_value(self) -> bool:
        return self.value is not None

    @property
    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


class Node:
    """One node: ``kind`` is the NodeAttributes member name (e.g. "PointwiseAttributes"),
    ``attrs`` its attribute table decoded to a dict (snake_case schema field names)."""
    __slots__ = ("name", "compute_dtype", "kind", "kind_index", "attrs")

    def __repr__(self):
        return f"Node({self.name!r}, {self.kind}, {self.attrs})"


class OpGraph:
    __slots__ = ("raw", "name", "compute_dtype", "intermediate_dtype", "io_dtype", "tensors",
                 "nodes", "preferred_engine_id", "is_override_shape_enabled", "min_api_version",
                 "_span_problem")

    def tensor(self, uid: int) -> Tensor:
        try:
            return self.tensors[uid]
        except KeyError:
            raise PluginError(BAD_PARAM, f"op graph has no tensor with uid {uid}") from None


def parse_graph(buf: bytes) -> OpGraph:
    buf = _verified(bytes(buf), "Graph", "op graph")
    g = _Graph.GetRootAs(buf, 0)
    out = OpGraph()
    out.raw = buf
    out.name = (g.Name() or b"").decode("utf-8", "replace")
    out.compute_dtype = g.ComputeDataType()
    out.intermediate_dtype = g.IntermediateDataType()
    out.io_dtype = g.IoDataType()
    out.preferred_engine_id = g.PreferredEngineId()
    out.is_override_shape_enabled = bool(g.IsOverrideShapeEnabled())
    v = g.MinRequiredEngineApiVersion()
    out.min_api_version = (v.Major(), v.Minor(), v.Patch()) if v is not None else None
    out.tensors = {}
    for i in range(g.TensorsLength()):
        ta = g.Tensors(i)
        t = Tensor()
        t.uid = ta.Uid()
        t.name = (ta.Name() or b"").decode("utf-8", "replace")
        t.dtype = ta.DataType()
        t.dims = [ta.Dims(j) for j in range(ta.DimsLength())]
        t.strides = [ta.Strides(j) for j in range(ta.StridesLength())]
        t.virtual = bool(ta.Virtual())
        tv = tensor_value.read_tensor_value(ta)
        t.value_type, t.value = (tv if tv is not None else (0, None))
        t.is_runtime_pass_by_value = bool(ta.IsRuntimePassByValue())
        t.alignment = ta.Alignment()
        t.ragged_offset_uid = ta.RaggedOffsetTensorUid()
        t.ragged_offset_multiplier = ta.RaggedOffsetMultiplier()
        if t.uid in out.tensors:
            raise PluginError(BAD_PARAM, f"invalid op graph: duplicate tensor uid {t.uid}")
        out.tensors[t.uid] = t
    # a virtual tensor whose data type is left UNSET takes the graph's intermediate type (FLOAT
    # when that is unset too), as hipDNN's frontend types it; a non-virtual UNSET tensor stays
    # UNSET (the FlatBuffers schema has no BOOLEAN: the backend writes BOOLEAN as UNSET)
    inter = out.intermediate_dtype or _FB_FLOAT
    for t in out.tensors.values():
        if t.virtual and t.dtype == 0:
            t.dtype = inter
    out.nodes = []
    for i in range(g.NodesLength()):
        nd = g.Nodes(i)
        n = Node()
        n.name = (nd.Name() or b"").decode("utf-8", "replace")
        n.compute_dtype = nd.ComputeDataType()
        n.kind_index = nd.AttributesType()
        n.kind = _UNION_NAMES.get(n.kind_index, n.kind_index)
        n.attrs = {}
        tab = nd.Attributes()
        if tab is not None and isinstance(n.kind, str):
            obj = gen_class(n.kind)()
            obj.Init(tab.Bytes, tab.Pos)
            n.attrs = table_to_dict(obj, n.kind)
        out.nodes.append(n)
    return out


class EngineConfigInfo:
    __slots__ = ("engine_id", "knobs", "raw")

    def __repr__(self):
        return f"EngineConfigInfo(engine_id={self.engine_id}, knobs={self.knobs})"


def parse_engine_config(buf: bytes) -> EngineConfigInfo:
    """EngineConfig FlatBuffer → engine_id + knobs {knob_id: value dict}."""
    buf = _verified(bytes(buf), "EngineConfig", "engine config")
    c = _EngineConfig.GetRootAs(buf, 0)
    out = EngineConfigInfo()
    out.raw = buf
    out.engine_id = c.EngineId()
    out.knobs = {}
    for i in range(c.KnobsLength()):
        k = table_to_dict(c.Knobs(i), "KnobSetting")
        out.knobs[k.get("knob_id")] = k.get("value")
    return out


def build_engine_details(engine_id: int, behavior_notes=(), name: str | None = None,
                         knobs=None) -> bytes:
    """An EngineDetails FlatBuffer.  ``knobs``: optional callable(builder) -> list of Knob table
    offsets (built with hipdnn_cabi.schemas._generated.Knob)."""
    b = flatbuffers.Builder(256)
    knob_offsets = list(knobs(b)) if knobs else []
    kv = None
    if knob_offsets:
        _ED.StartKnobsVector(b, len(knob_offsets))
        for o in reversed(knob_offsets):
            b.PrependUOffsetTRelative(o)
        kv = b.EndVector()
    notes = [int(n) for n in behavior_notes]
    nv = None
    if notes:
        _ED.StartBehaviorNotesVector(b, len(notes))
        for n in reversed(notes):
            b.PrependInt32(n)
        nv = b.EndVector()
    nm = b.CreateString(name) if name else None
    _ED.Start(b)
    _ED.AddEngineId(b, int(engine_id))
    if kv is not None:
        _ED.AddKnobs(b, kv)
    if nv is not None:
        _ED.AddBehaviorNotes(b, nv)
    if nm is not None:
        _ED.AddName(b, nm)
    b.Finish(_ED.End(b))
    return bytes(b.Output())
