"""Graph (de)serialization entry points (spec §1.5, §2.9, §5.1 graph parts).

Bodies of hipdnnBackendCreateAndDeserializeGraph_ext, …CreateAndDeserializeJsonGraph_ext,
…GetSerializedBinaryGraph_ext, …GetSerializedJsonGraph_ext and
…GetSerializedBinaryContents_ext (``entry``'s bodies call them with cffi cdata).  Every failure
is a :mod:`hipdnn_cabi.errors` exception with a message naming what was wrong; untrusted bytes are
verified before anything reads them.
"""
from __future__ import annotations

import struct

import flatbuffers

from .._generated.enums import SerializedContentFlags as SCF
from ..errors import (BadParamError, HipdnnError, HostAllocationFailedError, InternalError,
                      NotInitializedError, NotSupportedError, NullPointerError,
                      SizeInsufficientError)
from ..schemas._generated import SerializedGraphAndPlan as C
from ..schemas._generated.SerializedExecutionPlan import SerializedExecutionPlan
from ..schemas.verifier import VerificationError, verify
from . import graph_fb, registry, runtime
from .descriptors.base import Descriptor
from .descriptors.execution_plan import PLAN_SERIALIZATION_VERSION, ExecutionPlanDescriptor
from .descriptors.graph import GraphDescriptor, graph_to_json
from .handle import handle_of

HDGP = b"HDGP"


def _graph_of(d) -> GraphDescriptor:
    obj = registry.resolve(d)
    if not isinstance(obj, Descriptor):
        raise NullPointerError("hipdnnBackendDescriptor_t is invalid or was destroyed")
    if not isinstance(obj, GraphDescriptor):
        raise BadParamError("Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch.")
    return obj


def _copy_out(fn, data: bytes, req, size, buf):
    if not size:
        raise NullPointerError(f"{fn}: size pointer is nullptr")
    size[0] = len(data)
    if buf:
        if req < len(data):
            raise SizeInsufficientError(f"{fn}: requested size {req} is smaller than the "
                                        f"{len(data)} bytes needed")
        runtime.ffi.memmove(buf, data, len(data))
    return 0


def _container_blob(data: bytes, field: str, what: str) -> bytes:
    """``data`` itself, or its ``field`` when it is an HDGP graph-and-plan container (verified
    first; a missing or empty blob is BAD_PARAM "...carries no <what>.")."""
    if len(data) >= 8 and data[4:8] == HDGP:
        try:
            verify(data, "SerializedGraphAndPlan", HDGP)
        except VerificationError as e:
            raise BadParamError(f"Invalid serialized graph-and-plan container: {e}") from None
        blob = graph_fb.read(data, "SerializedGraphAndPlan").get(field)
        if not blob:
            raise BadParamError(f"Serialized graph-and-plan container carries no {what}.")
        return bytes(blob)
    return data


def _graph_blob(data: bytes) -> bytes:
    return _container_blob(data, "graph_blob", "graph")


def graph_from_bytes(data: bytes) -> GraphDescriptor:
    """Verify + read a serialized Graph (or HDGP container) into a new unfinalized descriptor."""
    data = _graph_blob(bytes(data))
    try:
        verify(data, "Graph")
    except VerificationError as e:
        raise BadParamError(f"Invalid serialized graph: {e}") from None
    try:
        g = graph_fb.read(data, "Graph")
    except HipdnnError:
        raise
    except Exception as e:  # verified buffers should never get here; keep the contract anyway
        raise BadParamError(f"Invalid serialized graph: {type(e).__name__}: {e}") from None
    return GraphDescriptor.from_fb(g, data)


# A FlatBuffer cannot exceed 2 GiB; a larger byte size is a caller error (garbage, or a negative
# value turned size_t), refused before the buffer is read.
MAX_SERIALIZED_BYTES = (1 << 31) - 1


def _input_bytes(fn, what, data, size) -> bytes:
    if size > MAX_SERIALIZED_BYTES:
        raise BadParamError(f"{fn}: {what} {size} is too large (at most {MAX_SERIALIZED_BYTES} bytes)")
    try:
        return runtime.ffi.unpack(data, size)
    except MemoryError:
        raise HostAllocationFailedError(f"{fn}: cannot allocate {size} bytes for the input") from None


def _register_out(out, g):
    out[0] = registry.register(g)
    return 0


def create_and_deserialize_graph(out, data, size):
    if not out:
        raise NullPointerError("hipdnnBackendCreateAndDeserializeGraph_ext: descriptor is nullptr")
    if not data:
        raise NullPointerError("hipdnnBackendCreateAndDeserializeGraph_ext: serializedGraph is nullptr")
    if size == 0:
        raise BadParamError("hipdnnBackendCreateAndDeserializeGraph_ext: graphByteSize is 0")
    return _register_out(out, graph_from_bytes(_input_bytes("hipdnnBackendCreateAndDeserializeGraph_ext", "graphByteSize", data, size)))


def graph_from_json(text: bytes) -> GraphDescriptor:
    if text.endswith(b"\x00"):
        text = text[:-1]
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadParamError(f"Invalid JSON graph: not UTF-8 ({e})") from None
    try:
        d = graph_fb.from_json("Graph", s)
        blob = graph_fb.build("Graph", d)
    except graph_fb.SchemaError as e:
        raise BadParamError(f"Invalid JSON graph: {e}") from None
    return graph_from_bytes(blob)


def create_and_deserialize_json_graph(out, data, size):
    if not out:
        raise NullPointerError("hipdnnBackendCreateAndDeserializeJsonGraph_ext: descriptor is nullptr")
    if not data:
        raise NullPointerError("hipdnnBackendCreateAndDeserializeJsonGraph_ext: jsonGraph is nullptr")
    if size == 0:
        raise BadParamError("hipdnnBackendCreateAndDeserializeJsonGraph_ext: jsonByteSize is 0")
    return _register_out(out, graph_from_json(_input_bytes("hipdnnBackendCreateAndDeserializeJsonGraph_ext", "jsonByteSize", data, size)))


def get_serialized_binary_graph(d, req, size, buf):
    g = _graph_of(d)
    return _copy_out("hipdnnBackendGetSerializedBinaryGraph_ext", g.serialized(), req, size, buf)


def get_serialized_json_graph(d, req, size, buf):
    g = _graph_of(d)
    data = graph_to_json(g).encode("utf-8") + b"\x00"
    return _copy_out("hipdnnBackendGetSerializedJsonGraph_ext", data, req, size, buf)


def get_serialized_binary_contents(data, size, flags):
    if not data or not flags:
        raise NullPointerError("hipdnnBackendGetSerializedBinaryContents_ext: argument is nullptr")
    if size < 8:
        flags[0] = int(SCF.HIPDNN_SERIALIZED_CONTENT_GRAPH)
        return 0
    raw = _input_bytes("hipdnnBackendGetSerializedBinaryContents_ext", "blobByteSize", data, size)
    if raw[4:8] != HDGP:
        flags[0] = int(SCF.HIPDNN_SERIALIZED_CONTENT_GRAPH)
        return 0
    try:
        verify(raw, "SerializedGraphAndPlan", HDGP)
    except VerificationError as e:
        raise BadParamError(f"Invalid serialized graph-and-plan container: {e}") from None
    c = graph_fb.read(raw, "SerializedGraphAndPlan")
    f = 0
    if c.get("graph_blob"):
        f |= int(SCF.HIPDNN_SERIALIZED_CONTENT_GRAPH)
    if c.get("plan_blob"):
        f |= int(SCF.HIPDNN_SERIALIZED_CONTENT_EXECUTION_PLAN)
    flags[0] = f
    return 0


# =========================================================================== compiled plans (RFC 0009)
# Spec §5.1: the envelope is a SerializedExecutionPlan FlatBuffer without a file identifier; the
# graph+plan container is an HDGP SerializedGraphAndPlan whose two embedded blobs are 8-byte
# aligned.  Checks run in the shipped order, and nothing reaches a plugin before the envelope has
# been verified and every required field checked.

def _plan_of(d, fn):
    obj = registry.resolve(d)
    if not isinstance(obj, Descriptor):
        raise NullPointerError(f"{fn}: execution plan descriptor is invalid or was destroyed")
    if not isinstance(obj, ExecutionPlanDescriptor):
        raise BadParamError("Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch.")
    if not obj.finalized:
        raise NotInitializedError(f"{fn}: the execution plan is not finalized")
    return obj


def get_serialized_execution_plan(d, req, size, buf):
    fn = "hipdnnBackendGetSerializedExecutionPlan_ext"
    plan = _plan_of(d, fn)
    if not size:
        raise NullPointerError(f"{fn}: planByteSize is nullptr")
    return _copy_out(fn, plan.serialize(), req, size, buf)


def _aligned_blob(b, data: bytes):
    b.StartVector(1, len(data), 8)
    b.head -= len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    return b.EndVector()


def build_container(graph_blob: bytes, plan_blob: bytes | None) -> bytes:
    """An HDGP SerializedGraphAndPlan with 8-byte-aligned blobs (plan_blob omitted when None)."""
    b = flatbuffers.Builder(len(graph_blob) + len(plan_blob or b"") + 64)
    pv = _aligned_blob(b, plan_blob) if plan_blob else None
    gv = _aligned_blob(b, graph_blob)
    C.Start(b)
    C.AddGraphBlob(b, gv)
    if pv is not None:
        C.AddPlanBlob(b, pv)
    b.Finish(C.End(b), file_identifier=HDGP)
    return bytes(b.Output())


def get_serialized_binary_graph_and_plan(g, p, req, size, buf):
    fn = "hipdnnBackendGetSerializedBinaryGraphAndPlan_ext"
    graph = _graph_of(g)
    if not size:
        raise NullPointerError(f"{fn}: blobByteSize is nullptr")
    plan_blob = _plan_of(p, fn).serialize() if p else None
    return _copy_out(fn, build_container(graph.serialized(), plan_blob), req, size, buf)


def _plan_blob(data: bytes) -> bytes:
    return _container_blob(data, "plan_blob", "execution plan")


def read_envelope(data: bytes) -> dict:
    """Verify + check a SerializedExecutionPlan (or the plan of an HDGP container): returns
    {engine_id, workspace_size, tensor_uids, plugin_payload, is_override_shape_enabled}."""
    data = _plan_blob(bytes(data))
    try:
        verify(data, "SerializedExecutionPlan")
    except VerificationError as e:
        raise BadParamError(f"Invalid serialized execution plan: {e}") from None
    e = SerializedExecutionPlan.GetRootAs(data, 0)
    version = e.Version()
    if version != PLAN_SERIALIZATION_VERSION:
        raise NotSupportedError(f"Unsupported serialized execution plan version {version} "
                                f"(this backend reads version {PLAN_SERIALIZATION_VERSION})")
    if e.PluginPayloadIsNone() or e.PluginPayloadLength() == 0:
        raise BadParamError("Serialized execution plan has an empty plugin payload.")
    if e.TensorUidsIsNone() or e.TensorUidsLength() == 0:
        raise BadParamError("Serialized execution plan has no tensor uids.")
    ws = e.WorkspaceSize()
    if ws < 0:
        raise BadParamError(f"Serialized execution plan has a negative workspace size ({ws}).")
    _check_envelope_layout(data, e)
    uids = [int(x) for x in e.TensorUidsAsNumpy()]
    if len(set(uids)) != len(uids):
        dup = next(u for i, u in enumerate(uids) if u in uids[:i])
        raise BadParamError(f"Serialized execution plan lists tensor uid {dup} more than once.")
    return {
        "engine_id": e.EngineId(),
        "workspace_size": ws,
        "tensor_uids": uids,
        "plugin_payload": e.PluginPayloadAsNumpy().tobytes(),
        "is_override_shape_enabled": bool(e.IsOverrideShapeEnabled()),
    }


def _check_envelope_layout(data: bytes, e) -> None:
    """The FlatBuffers verifier only checks that each vector lies inside the buffer.  A lying
    vector length (the tensor-uid count raised from 2 to 29) still fits when the vector runs on
    over the payload, and would hand out payload bytes as uids.  Our writer lays out vtable, root
    table and the two vectors side by side, and so does any correct FlatBuffers builder: they
    must not overlap."""
    tab = e._tab
    pos = tab.Pos
    vt = pos - struct.unpack_from("<i", data, pos)[0]
    vt_size, obj_size = struct.unpack_from("<HH", data, vt)
    regions = [("root offset", 0, 4), ("vtable", vt, vt + vt_size), ("table", pos, pos + obj_size)]
    for name, slot, elem in (("tensor_uids", 10, 8), ("plugin_payload", 12, 1)):
        o = tab.Offset(slot)
        start = tab.Vector(o)
        n = tab.VectorLen(o)
        regions.append((name, start - 4, start + n * elem))
    regions.sort(key=lambda r: r[1])
    for (an, a0, a1), (bn, b0, b1) in zip(regions, regions[1:]):
        if b0 < a1:
            raise BadParamError(f"Invalid serialized execution plan: the {an} and {bn} overlap "
                                f"(bytes {a0}..{a1} and {b0}..{b1}); a vector length is wrong.")


def _container_graph_uids(data: bytes):
    """Tensor uids of the graph of an HDGP container that also carries one (None otherwise)."""
    if len(data) < 8 or data[4:8] != HDGP:
        return None
    blob = graph_fb.read(data, "SerializedGraphAndPlan").get("graph_blob")
    if not blob:
        return None
    blob = bytes(blob)
    try:
        verify(blob, "Graph")
    except VerificationError as e:
        raise BadParamError(f"Invalid serialized graph in the graph-and-plan container: {e}") from None
    return [int(t.get("uid", 0)) for t in graph_fb.read(blob, "Graph").get("tensors") or ()]


def plan_from_bytes(handle, data: bytes):
    """A finalized, graph-less ExecutionPlanDescriptor restored through the plugin owning the
    envelope's engine id in ``handle``."""
    env = read_envelope(data)
    graph_uids = _container_graph_uids(bytes(data))
    if graph_uids is not None and set(graph_uids) != set(env["tensor_uids"]):
        raise BadParamError("Serialized graph-and-plan container: the plan's tensor uids "
                            f"{sorted(env['tensor_uids'])} are not the graph's "
                            f"{sorted(graph_uids)}.")
    eid = env["engine_id"]
    hp = getattr(handle, "plugins", None)
    if hp is None:
        raise InternalError(f"Invalid engine ID: {eid}")
    plugin, ph, context = hp.restore_execution_context(eid, env["plugin_payload"])
    if not context:
        raise InternalError("hipdnnBackendCreateAndDeserializeExecutionPlan_ext: the plugin "
                            "returned a null execution context")
    p = ExecutionPlanDescriptor()
    p.adopt_context(hp, plugin, ph, context, eid, env["workspace_size"], env["tensor_uids"],
                    None, env["is_override_shape_enabled"])
    p.restored = True
    p.finalized = True
    return p


def create_and_deserialize_execution_plan(h, out, data, size):
    fn = "hipdnnBackendCreateAndDeserializeExecutionPlan_ext"
    handle = handle_of(h, fn)
    if not out:
        raise NullPointerError(f"{fn}: descriptor is nullptr")
    if not data:
        raise NullPointerError(f"{fn}: serializedPlan is nullptr")
    if size == 0:
        raise BadParamError(f"{fn}: planByteSize is 0")
    p = plan_from_bytes(handle, _input_bytes(fn, "planByteSize", data, size))
    out[0] = registry.register(p)
    return 0
