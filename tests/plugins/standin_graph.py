"""A stand-in OPERATIONGRAPH descriptor for Python-level plugin tests (runs inside the process that
loaded libhipdnn_backend.so through cffi ABI mode, so it shares the backend's registry).

It has the interface the engine/heuristic/plan descriptors rely on: ``handle``, ``finalized``,
``serialized()``, ``required_api_version()``, ``tensor_uids()``, ``tensor_alignments()``,
``override_shape_enabled``, ``preferred_engine_id``.
"""
from __future__ import annotations

import flatbuffers

from hipdnn_cabi._generated.enums import DescriptorType
from hipdnn_cabi.backend import registry
from hipdnn_cabi.backend.descriptors.base import Descriptor
from hipdnn_cabi.schemas._generated import (Graph, Node, PointwiseAttributes,
                                             TensorAttributes)

FLOAT = 1
ADD, MUL, RELU_FWD = 2, None, None


def pointwise_graph_bytes(op_mode: int = 2, n: int = 4, override=False, alignment=16) -> bytes:
    """y(3) = x(1) <op> b(2), float [1, n] tensors."""
    b = flatbuffers.Builder(512)
    tensors = []
    for uid in (1, 2, 3):
        TensorAttributes.StartStridesVector(b, 2)
        b.PrependInt64(1); b.PrependInt64(n)
        strides = b.EndVector()
        TensorAttributes.StartDimsVector(b, 2)
        b.PrependInt64(n); b.PrependInt64(1)
        dims = b.EndVector()
        nm = b.CreateString(f"t{uid}")
        TensorAttributes.Start(b)
        TensorAttributes.AddUid(b, uid)
        TensorAttributes.AddName(b, nm)
        TensorAttributes.AddDataType(b, FLOAT)
        TensorAttributes.AddStrides(b, strides)
        TensorAttributes.AddDims(b, dims)
        if alignment != 16:
            TensorAttributes.AddAlignment(b, alignment)
        tensors.append(TensorAttributes.End(b))
    PointwiseAttributes.Start(b)
    PointwiseAttributes.AddOperation(b, op_mode)
    PointwiseAttributes.AddIn0TensorUid(b, 1)
    PointwiseAttributes.AddIn1TensorUid(b, 2)
    PointwiseAttributes.AddOut0TensorUid(b, 3)
    attrs = PointwiseAttributes.End(b)
    nname = b.CreateString("pw")
    Node.Start(b)
    Node.AddName(b, nname)
    Node.AddComputeDataType(b, FLOAT)
    Node.AddAttributesType(b, 2)  # NodeAttributes.PointwiseAttributes
    Node.AddAttributes(b, attrs)
    node = Node.End(b)
    Graph.StartTensorsVector(b, 3)
    for t in reversed(tensors):
        b.PrependUOffsetTRelative(t)
    tv = b.EndVector()
    Graph.StartNodesVector(b, 1)
    b.PrependUOffsetTRelative(node)
    nv = b.EndVector()
    gname = b.CreateString("standin")
    Graph.Start(b)
    Graph.AddName(b, gname)
    Graph.AddComputeDataType(b, FLOAT)
    Graph.AddTensors(b, tv)
    Graph.AddNodes(b, nv)
    Graph.AddIsOverrideShapeEnabled(b, bool(override))
    b.Finish(Graph.End(b))
    return bytes(b.Output())


class StandInGraph(Descriptor):
    DESCRIPTOR_TYPE = None  # never created by the factory
    NAME = "StandInGraph"

    def __init__(self, handle, raw: bytes, version=(1, 0, 0), override=False, alignment=16):
        super().__init__()
        self.DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
        self.handle = handle
        self.raw = raw
        self.version = version
        self.override_shape_enabled = override
        self.preferred_engine_id = None
        self.alignment = alignment
        self.finalized = True

    def serialized(self):
        return self.raw

    def required_api_version(self):
        return self.version

    def tensor_uids(self):
        return [1, 2, 3]

    def tensor_alignments(self):
        return {1: self.alignment, 2: self.alignment, 3: self.alignment}


def register_graph(handle_ptr: int, **kw) -> int:
    """Register a stand-in graph bound to the hipdnnHandle_t ``handle_ptr``; returns its id."""
    handle = registry.objects[handle_ptr]
    raw = pointwise_graph_bytes(kw.pop("op_mode", 2), override=kw.get("override", False),
                                alignment=kw.get("alignment", 16))
    return registry.register(StandInGraph(handle, raw, **kw))
