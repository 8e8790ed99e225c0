"""Graph (de)serialization entry points (spec §1.5, §2.9, §5.1 graph parts).

Bodies of hipdnnBackendCreateAndDeserializeGraph_ext, …CreateAndDeserializeJsonGraph_ext,
…GetSerializedBinaryGraph_ext, …GetSerializedJsonGraph_ext and
…GetSerializedBinaryContents_ext (``entry._delegate`` calls them with cffi cdata).  Every failure
is a :mod:`hipdnn_cabi.errors` exception with a message naming what was wrong; untrusted bytes are
verified before anything reads them.
"""
from __future__ import annotations

from .._generated.enums import SerializedContentFlags as SCF
from ..errors import BadParamError, HipdnnError, NullPointerError, SizeInsufficientError
from ..schemas.verifier import VerificationError, verify
from . import graph_fb, registry, runtime
from .descriptors.base import Descriptor
from .descriptors.graph import GraphDescriptor

HDGP = b"HDGP"


def _graph_of(d) -> GraphDescriptor:
    obj = registry.objects.get(d)
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


def _graph_blob(data: bytes) -> bytes:
    """The Graph bytes of ``data``: the bare graph, or the graph_blob of an HDGP container."""
    if len(data) >= 8 and data[4:8] == HDGP:
        try:
            verify(data, "SerializedGraphAndPlan", HDGP)
        except VerificationError as e:
            raise BadParamError(f"Invalid serialized graph-and-plan container: {e}") from None
        c = graph_fb.read(data, "SerializedGraphAndPlan")
        blob = c.get("graph_blob")
        if not blob:
            raise BadParamError("Serialized graph-and-plan container carries no graph.")
        return bytes(blob)
    return data


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
    return _register_out(out, graph_from_bytes(runtime.ffi.unpack(data, size)))


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
    return _register_out(out, graph_from_json(runtime.ffi.unpack(data, size)))


def get_serialized_binary_graph(d, req, size, buf):
    g = _graph_of(d)
    return _copy_out("hipdnnBackendGetSerializedBinaryGraph_ext", g.serialized(), req, size, buf)


def graph_to_json(g: GraphDescriptor) -> str:
    return graph_fb.to_json("Graph", graph_fb.read(g.serialized(), "Graph"))


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
    raw = runtime.ffi.unpack(data, size)
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
