"""Claiming CUSTOM_OP nodes by name (``hipdnn-cabi custom-ops`` prints :data:`GUIDE`).

The built-in engines never run ``HIPDNN_BACKEND_OPERATION_CUSTOM_OP_DESCRIPTOR_EXT``: a custom op
has no meaning the library could know, so the CPU reference and HIP engines answer "not
applicable" for any graph holding one, and only a plugin that recognises the op's id runs it.
"""
from __future__ import annotations

GUIDE = """\
Custom operations (HIPDNN_BACKEND_OPERATION_CUSTOM_OP_DESCRIPTOR_EXT)

An application describes a custom op with
  HIPDNN_ATTR_OPERATION_CUSTOM_OP_ID_EXT      (CHAR)  the op's name, e.g. "acme.fused_rope.v1"
  HIPDNN_ATTR_OPERATION_CUSTOM_OP_INPUTS_EXT  (BACKEND_DESCRIPTOR array) input tensors
  HIPDNN_ATTR_OPERATION_CUSTOM_OP_OUTPUTS_EXT (BACKEND_DESCRIPTOR array) output tensors
  HIPDNN_ATTR_OPERATION_CUSTOM_OP_DATA_EXT    (CHAR) opaque parameter bytes (any bytes, no NUL
                                               terminator; the size query answers the byte count)
  HIPDNN_ATTR_CUSTOM_OP_COMP_TYPE_EXT         (DATA_TYPE, optional)
The graph serialises it as a CustomOpAttributes node: custom_op_id, input_tensor_uids,
output_tensor_uids, data.

No built-in engine claims custom ops: the CPU reference and the HIP engine are not applicable
to a graph that holds one.  A plugin claims an op BY NAME in its applicability check:

  * C/C++ plugin (hipDNN plugin headers): in hipdnnEnginePluginGetApplicableEngineIds, walk the
    serialized graph's nodes; for a node whose attributes are CustomOpAttributes, compare
    custom_op_id with the names you implement; report your engine id only when you know every
    node of the graph.  Read `data` for the parameters and the uid arrays for the tensors;
    the device buffers of those uids arrive in hipdnnEnginePluginExecuteOpGraph.
  * Python plugin (hipdnn_cabi.plugin_sdk):

        from hipdnn_cabi.plugin_sdk import custom_ops
        class MyBuilder(PlanBuilderBase):
            def is_applicable(self, handle, graph):
                return custom_ops.claims(graph, {"acme.fused_rope.v1"})
            def build_plan(self, handle, graph, config):
                (node,) = custom_ops.nodes(graph, "acme.fused_rope.v1")
                ins, outs = custom_ops.io_uids(node)
                params = custom_ops.data(node)      # the opaque bytes
                ...

    `hipdnn-cabi export-plugin` turns such a module into a .so; load it with
    hipdnnSetEnginePluginPaths_ext like any engine plugin.

Choose ids that cannot collide (a reverse-DNS or vendor prefix and a version suffix).  A graph
with an op id that no loaded plugin claims has no applicable engine: the heuristics offer no
engine configuration for it - it is never run as a silent no-op.
"""

KIND = "CustomOpAttributes"


def nodes(graph, op_id=None):
    """The graph's custom-op nodes (with ``op_id``: only those of that name)."""
    return [n for n in graph.nodes if n.kind == KIND
            and (op_id is None or _id(n) == op_id)]


def _id(node):
    v = node.attrs.get("custom_op_id")
    return v.decode() if isinstance(v, (bytes, bytearray)) else v


def claims(graph, op_ids, allow_other_kinds=()):
    """True when every node of the graph is a custom op named in ``op_ids`` (or of a kind in
    ``allow_other_kinds``) and at least one custom op is present."""
    ids = set(op_ids)
    seen = False
    for n in graph.nodes:
        if n.kind == KIND:
            if _id(n) not in ids:
                return False
            seen = True
        elif n.kind not in allow_other_kinds:
            return False
    return seen


def io_uids(node):
    a = node.attrs
    return ([int(u) for u in (a.get("input_tensor_uids") or [])],
            [int(u) for u in (a.get("output_tensor_uids") or [])])


def data(node) -> bytes:
    v = node.attrs.get("data")
    return bytes(v) if v is not None else b""
