"""HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR (spec §1.5) and its FlatBuffers Graph.

Public interface used by the plugin host (and the execution-plan code):

* ``GraphDescriptor.handle``: the :class:`~hipdnn_cabi.backend.handle.Handle` or None;
* ``.ops``: list of operation descriptors (OPS order);
* ``.serialized() -> bytes``: the FlatBuffers ``Graph`` (cached; built when needed);
* ``.required_api_version() -> (major, minor, patch)`` (spec §3.6);
* ``.tensor_uids() -> list[int]`` (graph tensor order), ``.tensors() -> list[TensorDescriptor]``,
  ``.tensor_alignments() -> {uid: alignment}``;
* ``.override_shape_enabled: bool``, ``.preferred_engine_id: int | None``.
"""
from __future__ import annotations

import os
import struct
import uuid as _uuid

from ..._generated.enums import (AttributeName as A, AttributeType as T, DataType, DescriptorType,
                                 Severity)
from ...errors import BadParamError, NotFinalizedError, NotSupportedError, NullPointerError
from .. import attrs, env, graph_fb, log, registry
from ..handle import Handle
from .base import Descriptor, getter, setter
from .operations import BY_UNION, OperationDescriptor, dtype_from_fb, dtype_to_fb
from .tensor import DEFAULT_ALIGNMENT, TensorDescriptor

SUPPORTED_API_VERSION = (1, 3, 0)

# TensorValue union member per data type (flatbuffers_sdk numbering), and how the value is kept.
_TV_FLOAT32, _TV_FLOAT16, _TV_BFLOAT16, _TV_FLOAT8, _TV_INT32, _TV_FLOAT64, _TV_INT64, _TV_BOOL = range(1, 9)
_VALUE_KIND = {
    DataType.HIPDNN_DATA_FLOAT: (_TV_FLOAT32, "<f"),
    DataType.HIPDNN_DATA_HALF: (_TV_FLOAT16, "<e"),
    DataType.HIPDNN_DATA_BFLOAT16: (_TV_BFLOAT16, "bf16"),
    DataType.HIPDNN_DATA_DOUBLE: (_TV_FLOAT64, "<d"),
    DataType.HIPDNN_DATA_INT32: (_TV_INT32, "<i"),
    DataType.HIPDNN_DATA_INT64: (_TV_INT64, "<q"),
    DataType.HIPDNN_DATA_BOOLEAN: (_TV_BOOL, "<?"),
}
for _dt in (DataType.HIPDNN_DATA_INT8, DataType.HIPDNN_DATA_UINT8, DataType.HIPDNN_DATA_FP8_E4M3,
            DataType.HIPDNN_DATA_FP8_E5M2, DataType.HIPDNN_DATA_FP8_E8M0,
            DataType.HIPDNN_DATA_FP8_E4M3_FNUZ, DataType.HIPDNN_DATA_FP8_E5M2_FNUZ):
    _VALUE_KIND[_dt] = (_TV_FLOAT8, "<B")


def _value_to_fb(dt, raw: bytes):
    """Tensor by-value bytes -> (TensorValue index, {"value": x})."""
    idx, fmt = _VALUE_KIND[dt]
    if fmt == "bf16":
        x = struct.unpack("<f", b"\x00\x00" + raw[:2])[0]
    else:
        x = struct.unpack(fmt, raw)[0]
        if fmt == "<e":
            x = float(x)
    return idx, {"value": x}


def _value_from_fb(dt, idx, val, where):
    """(TensorValue index, {"value": x}) -> raw bytes in the tensor's data type."""
    x = val.get("value") if isinstance(val, dict) else None
    if x is None:
        raise BadParamError(f"{where}: tensor value of unknown TensorValue type {idx}")
    try:
        if dt in (DataType.HIPDNN_DATA_FLOAT,):
            return struct.pack("<f", float(x))
        if dt == DataType.HIPDNN_DATA_HALF:
            return struct.pack("<e", float(x))
        if dt == DataType.HIPDNN_DATA_BFLOAT16:
            return struct.pack("<f", float(x))[2:]
        if dt == DataType.HIPDNN_DATA_DOUBLE:
            return struct.pack("<d", float(x))
        if dt == DataType.HIPDNN_DATA_INT32:
            return struct.pack("<i", int(x))
        if dt == DataType.HIPDNN_DATA_INT64:
            return struct.pack("<q", int(x))
        if dt == DataType.HIPDNN_DATA_BOOLEAN:
            return b"\x01" if x else b"\x00"
        if attrs.DATA_TYPE_SIZE.get(dt) == 1:
            return struct.pack("<B", int(x) & 0xFF)
    except (struct.error, OverflowError, ValueError, TypeError) as e:
        raise BadParamError(f"{where}: tensor value does not fit its data type ({e})") from None
    raise BadParamError(f"{where}: data type {getattr(dt, 'name', dt)} cannot carry a by-value scalar")


def tensor_to_fb(t: TensorDescriptor) -> dict:
    d = {"uid": t.uid}
    if t.name:
        d["name"] = t.name
    d["data_type"] = dtype_to_fb(t.data_type)
    d["strides"] = list(t.strides)
    d["dims"] = list(t.dims)
    if t.is_virtual:
        d["virtual"] = True
    if t.value is not None and t.data_type in _VALUE_KIND:
        d["value"] = _value_to_fb(t.data_type, t.value)
    if t.is_runtime_pass_by_value:
        d["is_runtime_pass_by_value"] = True
    if t.ragged_offset_uid is not None:
        d["ragged_offset_tensor_uid"] = t.ragged_offset_uid
    if t.byte_alignment != DEFAULT_ALIGNMENT:
        d["alignment"] = t.byte_alignment
    if t.ragged_offset_multiplier is not None and t.ragged_offset_multiplier != 1:
        d["ragged_offset_multiplier"] = t.ragged_offset_multiplier
    return d


def tensor_from_fb(d: dict, where: str) -> TensorDescriptor:
    t = TensorDescriptor()
    t.uid = d.get("uid", 0)
    t.name = d.get("name", "")
    fb_dt = d.get("data_type", 0)
    dt = dtype_from_fb(fb_dt)
    value = d.get("value")
    if dt is None and fb_dt == 0:
        # BOOLEAN is the one hipdnnDataType_t without a FlatBuffers DataType: tensor_to_fb writes it
        # as UNSET, so UNSET reads back as BOOLEAN (with or without a value) and the bytes round-trip.
        dt = DataType.HIPDNN_DATA_BOOLEAN
    if dt is None:
        raise BadParamError(f"{where}: tensor uid {t.uid} has no (or an unknown) data type "
                            f"{d.get('data_type', 0)}")
    t.data_type = dt
    t.dims = tuple(d.get("dims") or ())
    t.strides = tuple(d.get("strides") or ())
    if not t.dims or len(t.dims) != len(t.strides):
        raise BadParamError(f"{where}: tensor uid {t.uid} has {len(t.dims)} dims and "
                            f"{len(t.strides)} strides")
    t.is_virtual = bool(d.get("virtual", False))
    if value is not None:
        t.value = _value_from_fb(dt, value[0], value[1], where)
    t.is_runtime_pass_by_value = bool(d.get("is_runtime_pass_by_value", False))
    t.ragged_offset_uid = d.get("ragged_offset_tensor_uid")
    t.byte_alignment = d.get("alignment", DEFAULT_ALIGNMENT)
    if t.byte_alignment < 0:
        raise BadParamError(f"{where}: tensor uid {t.uid} has a negative alignment")
    m = d.get("ragged_offset_multiplier")
    t.ragged_offset_multiplier = m if m is not None and m != 1 else None
    t.finalized = True
    return t


class GraphDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
    NAME = "GraphDescriptor"
    GET_BEFORE_FINALIZE = None
    REFINALIZE_ALLOWED = True

    def __init__(self):
        super().__init__()
        self.handle: Handle | None = None
        self.ops: list = []
        self.compute_data_type = None
        self.intermediate_data_type = None
        self.io_data_type = None
        self.preferred_engine_id: int | None = None
        self.override_shape_enabled = False
        self.name = ""
        self.uuid: bytes | None = None
        self._serialized: bytes | None = None
        self._tensors: list | None = None   # cached graph tensor order

    # ---------------------------------------------------------------- cache
    def _invalidate(self):
        self._serialized = None
        self._tensors = None
        self.uuid = None

    # ---------------------------------------------------------------- set
    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE)
    def _set_handle(self, ctx, atype, count, arr, nbytes):
        self.handle = attrs.handle_attribute(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
    def _set_ops(self, ctx, atype, count, arr, nbytes):
        ids = attrs.set_pointer_vector(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        new = []
        for i in ids:
            obj = registry.resolve(i) if i else None
            if not isinstance(obj, Descriptor):
                raise NullPointerError(f"{ctx}: operation descriptor is nullptr or invalid")
            if not obj.finalized:
                raise NotFinalizedError(f"{ctx}: operation descriptor is not finalized")
            if not isinstance(obj, OperationDescriptor):
                raise NotSupportedError("Descriptor does not implement IGraphOperation")
            new.append(obj)
        self.ops.extend(new)
        self._invalidate()

    def _set_dt(self, ctx, atype, count, arr, nbytes):
        v = attrs.set_enum(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_DATA_TYPE)
        if v not in DataType._value2member_map_:
            raise BadParamError(f"{ctx}: invalid data type {v}")
        self._invalidate()
        return DataType(v)

    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT)
    def _set_compute(self, ctx, atype, count, arr, nbytes):
        self.compute_data_type = self._set_dt(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT)
    def _set_intermediate(self, ctx, atype, count, arr, nbytes):
        self.intermediate_data_type = self._set_dt(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT)
    def _set_io(self, ctx, atype, count, arr, nbytes):
        self.io_data_type = self._set_dt(ctx, atype, count, arr, nbytes)

    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT)
    def _set_preferred(self, ctx, atype, count, arr, nbytes):
        self.preferred_engine_id = attrs.set_int64(ctx, atype, count, arr, nbytes)
        self._invalidate()

    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT)
    def _set_override(self, ctx, atype, count, arr, nbytes):
        self.override_shape_enabled = attrs.set_bool(ctx, atype, count, arr, nbytes)
        self._invalidate()

    @setter(A.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT)
    def _set_name(self, ctx, atype, count, arr, nbytes):
        self.name = attrs.set_string(ctx, atype, count, arr, nbytes)
        self._invalidate()

    # ---------------------------------------------------------------- finalize
    def _finalize(self):
        ctx = "GraphDescriptor::finalize() failed"
        if self.handle is None:
            raise BadParamError(f"{ctx}: handle not set")
        if not self.ops:
            raise BadParamError(f"{ctx}: no operations set")
        if self.uuid is None:
            self.uuid = _uuid.uuid4().bytes
            self._serialized = None
        self._tensors = None
        self.tensors()      # uid checks
        self.serialized()   # (re)built unless the cache is still valid
        _log_graph(self)


    # ---------------------------------------------------------------- get
    @getter(A.HIPDNN_ATTR_OPERATIONGRAPH_OPS)
    def _get_ops(self, ctx, atype, req, cnt, arr):
        attrs.get_descriptor_array(ctx, atype, req, cnt, arr, self.ops, require_full=True)

    def _get_dt(self, ctx, atype, req, cnt, arr, v):
        attrs.get_optional(ctx, atype, T.HIPDNN_TYPE_DATA_TYPE, req, cnt, arr,
                           None if v is None else attrs.pack_i32(int(v)))

    @getter(A.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT)
    def _get_compute(self, ctx, atype, req, cnt, arr):
        self._get_dt(ctx, atype, req, cnt, arr, self.compute_data_type)

    @getter(A.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT)
    def _get_intermediate(self, ctx, atype, req, cnt, arr):
        self._get_dt(ctx, atype, req, cnt, arr, self.intermediate_data_type)

    @getter(A.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT)
    def _get_io(self, ctx, atype, req, cnt, arr):
        self._get_dt(ctx, atype, req, cnt, arr, self.io_data_type)

    @getter(A.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT)
    def _get_preferred(self, ctx, atype, req, cnt, arr):
        v = self.preferred_engine_id
        attrs.get_optional(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                           None if v is None else attrs.pack_i64(v))

    @getter(A.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT)
    def _get_override(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.override_shape_enabled)

    @getter(A.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT)
    def _get_name(self, ctx, atype, req, cnt, arr):
        attrs.get_string(ctx, atype, req, cnt, arr, self.name)

    # ---------------------------------------------------------------- public interface
    def tensors(self) -> list:
        """Graph tensors: collected from the ops in OPS order, de-duplicated by uid."""
        if self._tensors is None:
            seen: dict = {}
            order = []
            for op in self.ops:
                for t in op.tensors():
                    prev = seen.get(t.uid)
                    if prev is None:
                        seen[t.uid] = t
                        order.append(t)
                    elif prev is not t:
                        raise BadParamError(f"GraphDescriptor: tensor uid {t.uid} is used by two "
                                            f"different tensor descriptors")
            for t in list(order):   # ragged offsets given as tensor descriptors
                aux = getattr(t, "ragged_offset_tensor", None)
                if aux is None:
                    continue
                if aux.is_virtual:
                    raise BadParamError(f"GraphDescriptor: the ragged offsets (uid {aux.uid}) of "
                                        f"tensor uid {t.uid} are virtual")
                if aux.ragged_offset_uid is not None:
                    raise BadParamError(f"GraphDescriptor: the ragged offsets (uid {aux.uid}) of "
                                        f"tensor uid {t.uid} are ragged themselves")
                prev = seen.get(aux.uid)
                if prev is None:
                    seen[aux.uid] = aux
                    order.append(aux)
                elif prev is not aux:
                    raise BadParamError(f"GraphDescriptor: tensor uid {aux.uid} is used by two "
                                        f"different tensor descriptors")
            self._tensors = order
        return list(self._tensors)

    def tensor_uids(self) -> list:
        return [t.uid for t in self.tensors()]

    def tensor_alignments(self) -> dict:
        return {t.uid: t.byte_alignment for t in self.tensors()}

    def required_api_version(self) -> tuple:
        ts = self.tensors()
        if any(t.ragged_offset_uid is not None for t in ts):
            return (1, 3, 0)
        if any(t.byte_alignment != DEFAULT_ALIGNMENT for t in ts):
            return (1, 3, 0)
        if any(t.is_runtime_pass_by_value for t in ts):
            return (1, 2, 0)
        if self.override_shape_enabled:
            return (1, 1, 0)
        return (1, 0, 0)

    def to_fb(self) -> dict:
        g = {}
        if self.name:
            g["name"] = self.name
        for key, v in (("compute_data_type", self.compute_data_type),
                       ("intermediate_data_type", self.intermediate_data_type),
                       ("io_data_type", self.io_data_type)):
            if v is not None:
                g[key] = dtype_to_fb(v)
        g["tensors"] = [tensor_to_fb(t) for t in self.tensors()]
        g["nodes"] = [op.to_node() for op in self.ops]
        if self.preferred_engine_id is not None:
            g["preferred_engine_id"] = self.preferred_engine_id
        if self.override_shape_enabled:
            g["is_override_shape_enabled"] = True
        major, minor, patch = self.required_api_version()
        g["min_required_engine_api_version"] = {"major": major, "minor": minor, "patch": patch}
        if self.uuid is not None:
            g["id"] = {"bytes": list(self.uuid)}
        return g

    def serialized(self) -> bytes:
        if self._serialized is None:
            try:
                self._serialized = graph_fb.build("Graph", self.to_fb())
            except graph_fb.SchemaError as e:
                raise BadParamError(f"GraphDescriptor: cannot serialize the graph: {e}") from None
        return self._serialized

    # ---------------------------------------------------------------- deserialization
    @classmethod
    def from_fb(cls, g: dict, blob: bytes | None = None) -> "GraphDescriptor":
        """Rebuild an unfinalized graph (real tensor and op descriptors) from a Graph dict.

        ``blob``: the verified bytes ``g`` was read from.  They become the cached serialization
        when they carry an id and the version stamp this graph requires (so plugins see exactly
        what the caller serialized); any later set other than HANDLE discards them.
        """
        self = cls()
        v = g.get("min_required_engine_api_version")
        if v is not None:
            ver = (v["major"], v["minor"], v["patch"])
            if ver > SUPPORTED_API_VERSION:
                raise NotSupportedError(
                    "Graph requires engine API version %d.%d.%d; this backend supports up to %d.%d.%d"
                    % (ver + SUPPORTED_API_VERSION))
        self.name = g.get("name", "")
        self.compute_data_type = dtype_from_fb(g.get("compute_data_type", 0))
        self.intermediate_data_type = dtype_from_fb(g.get("intermediate_data_type", 0))
        self.io_data_type = dtype_from_fb(g.get("io_data_type", 0))
        self.preferred_engine_id = g.get("preferred_engine_id")
        self.override_shape_enabled = bool(g.get("is_override_shape_enabled", False))
        by_uid = {}
        for i, td in enumerate(g.get("tensors") or ()):
            t = tensor_from_fb(td, f"Graph.tensors[{i}]")
            if t.uid in by_uid:
                raise BadParamError(f"Graph.tensors[{i}]: duplicate tensor uid {t.uid}")
            by_uid[t.uid] = t
        for t in by_uid.values():   # link ragged tensors to their offsets tensors
            if t.ragged_offset_uid is not None:
                t.ragged_offset_tensor = by_uid.get(t.ragged_offset_uid)
        for i, nd in enumerate(g.get("nodes") or ()):
            where = f"Graph.nodes[{i}]"
            att = nd.get("attributes")
            if att is None:
                raise BadParamError(f"{where}: node has no attributes")
            op_cls = BY_UNION.get(att[0])
            if op_cls is None or att[1] is None:
                raise NotSupportedError(f"{where}: unsupported node type {att[0]}")
            self.ops.append(op_cls.from_node(nd, by_uid, where))
        uid = g.get("id")
        if uid is not None:
            self.uuid = bytes(uid["bytes"])
            if blob is not None and v is not None and \
                    (v["major"], v["minor"], v["patch"]) == self.required_api_version():
                self._serialized = bytes(blob)
        return self


def graph_to_json(g: GraphDescriptor) -> str:
    return graph_fb.to_json("Graph", graph_fb.read(g.serialized(), "Graph"))


def _log_graph(g) -> None:
    """HIPDNN_LOG_GRAPH_DIR (spec §7): write graph_<uuid>.json for every finalized graph.
    Best effort: a write failure is logged, never an API failure."""
    d = env.get_stripped("HIPDNN_LOG_GRAPH_DIR")
    if not d:
        return
    try:
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"graph_{_uuid.UUID(bytes=g.uuid)}.json")
        with open(path, "w") as fh:
            fh.write(graph_to_json(g))
    except Exception as e:  # noqa: BLE001 - logging must not fail the finalize
        log.log(Severity.HIPDNN_SEV_WARN, f"HIPDNN_LOG_GRAPH_DIR: cannot write the graph: {e}")
