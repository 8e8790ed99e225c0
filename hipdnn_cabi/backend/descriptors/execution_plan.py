"""HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR (spec §1.9).

Finalize creates the plugin's execution context (through the graph's handle, ``handle.plugins``);
the context is destroyed through the plugin (DestroyExecutionContext) when the plan
implementation dies (last wrapper and last reference).
"""
from __future__ import annotations

import weakref

import flatbuffers

from ..._generated.enums import AttributeName as A, AttributeType as T, DescriptorType
from ...errors import BadParamError, InternalError, NotSupportedError, NullPointerError
from ...schemas._generated import SerializedExecutionPlan as S
from .. import attrs
from .base import Descriptor, getter, setter
from .engine import handle_plugins

CFG_KINDS = (DescriptorType.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR,)
INT64_MAX = (1 << 63) - 1
PLAN_SERIALIZATION_VERSION = 1


class ExecutionPlanDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
    NAME = "ExecutionPlanDescriptor"

    def __init__(self):
        super().__init__()
        self.engine_config = None
        self.engine_id = None
        self.workspace_size = 0
        self.tensor_uids: list[int] = []
        self.alignments: dict[int, int] = {}
        self.override_shape_enabled = False
        self.context = None          # hipdnnEnginePluginExecutionContext_t cdata
        self.plugin = None
        self.plugin_handle = None
        self.handle_plugins = None
        self.restored = False        # True for a plan built from serialized bytes (graph-less)
        self.device = -1             # the device of the handle that built / restored it
        self._serialized = None      # cached SerializedExecutionPlan bytes (a plan never changes)

    @setter(A.HIPDNN_ATTR_EXECUTION_PLAN_HANDLE)
    def _set_handle(self, ctx, atype, count, arr, nbytes):
        if not attrs.set_pointer(ctx, atype, count, arr, nbytes, T.HIPDNN_TYPE_HANDLE):
            raise NullPointerError(f"{ctx}: handle is nullptr")

    @setter(A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)
    def _set_cfg(self, ctx, atype, count, arr, nbytes):
        self.engine_config = attrs.set_descriptor(ctx, atype, count, arr, nbytes, CFG_KINDS)

    def adopt_context(self, hp, plugin, ph, context, engine_id, workspace_size, tensor_uids,
                      alignments=None, override=False):
        """Install an execution context (also used by plan deserialization)."""
        if hp is not None:
            weakref.finalize(self, hp.destroy_execution_context, plugin, ph, context)
        self.handle_plugins, self.plugin, self.plugin_handle, self.context = hp, plugin, ph, context
        self.device = getattr(hp, "device", -1)   # bound to the building handle's device
        self.engine_id = engine_id
        self.workspace_size = workspace_size
        self.tensor_uids = list(tensor_uids)
        self.alignments = dict(alignments or {})
        self.override_shape_enabled = bool(override)

    def _finalize(self):
        if self.engine_config is None:
            raise BadParamError("ExecutionPlanDescriptor::finalize() failed: engine config not set")
        cfg = self.engine_config
        engine = cfg.engine
        graph = engine.graph
        hp = handle_plugins(graph)
        plugin, ph, context = hp.create_execution_context(engine.engine_id, cfg.serialized(), graph)
        if not context:
            raise InternalError("ExecutionPlanDescriptor::finalize() failed: the plugin returned a "
                                "null execution context")
        uids = list(graph.tensor_uids())
        aligns = dict(graph.tensor_alignments()) if hasattr(graph, "tensor_alignments") else {}
        self.adopt_context(hp, plugin, ph, context, engine.engine_id, 0, uids, aligns,
                           getattr(graph, "override_shape_enabled", False))
        # the engines that declined this graph and why (named by execute errors)
        self.declines = list(getattr(graph, "declines", ()) or ())
        ws = hp.context_workspace_size(plugin, ph, context)
        if ws > INT64_MAX:
            raise InternalError("ExecutionPlanDescriptor::finalize() failed: negative workspace size")
        self.workspace_size = ws

    # ------------------------------------------------------------------ serialization (RFC 0009)
    def plugin_payload(self) -> bytes:
        """The plugin's serialized execution context (spec §3.8 "plan serialize"): the plugin owns
        the bytes for the duration of the call; they are copied, then the plugin's destroy hook
        runs (also when the save hook failed)."""
        plugin = self.plugin
        if plugin is None or not plugin.has_serialization:
            raise NotSupportedError("Engine plugin does not support execution context serialization")
        return self.handle_plugins.serialize_execution_context(plugin, self.plugin_handle,
                                                               self.engine_id, self.context)

    def serialize(self) -> bytes:
        """The SerializedExecutionPlan envelope (no file identifier, version 1)."""
        if self._serialized is None:
            payload = self.plugin_payload()
            b = flatbuffers.Builder(len(payload) + 8 * len(self.tensor_uids) + 128)
            b.StartVector(1, len(payload), 8)
            b.head -= len(payload)
            b.Bytes[b.head:b.head + len(payload)] = payload
            pv = b.EndVector()
            S.StartTensorUidsVector(b, len(self.tensor_uids))
            for u in reversed(self.tensor_uids):
                b.PrependInt64(u)
            uv = b.EndVector()
            S.Start(b)
            S.AddVersion(b, PLAN_SERIALIZATION_VERSION)
            S.AddEngineId(b, self.engine_id)
            S.AddWorkspaceSize(b, self.workspace_size)
            S.AddTensorUids(b, uv)
            S.AddPluginPayload(b, pv)
            if self.override_shape_enabled:
                S.AddIsOverrideShapeEnabled(b, True)
            b.Finish(S.End(b))
            self._serialized = bytes(b.Output())
        return self._serialized

    @getter(A.HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)
    def _get_ws(self, ctx, atype, req, cnt, arr):
        attrs.get_exact_one(ctx, atype, T.HIPDNN_TYPE_INT64, req, cnt, arr,
                            attrs.pack_i64(self.workspace_size))

    @getter(A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)
    def _get_cfg(self, ctx, atype, req, cnt, arr):
        attrs._type(ctx, atype, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        if self.engine_config is None:
            raise NullPointerError(f"{ctx}: the execution plan was restored from serialized bytes "
                                   "and has no engine config (a serialized plan carries neither "
                                   "the source graph nor the engine config)")
        attrs.get_descriptor_one(ctx, atype, req, cnt, arr, self.engine_config)

    @getter(A.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT)
    def _get_uids(self, ctx, atype, req, cnt, arr):
        attrs.get_int64_vector(ctx, atype, req, cnt, arr, self.tensor_uids, require_full=True)

    @getter(A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT)
    def _get_eid(self, ctx, atype, req, cnt, arr):
        attrs.get_int64(ctx, atype, req, cnt, arr, self.engine_id)

    @getter(A.HIPDNN_ATTR_EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT)
    def _get_ovr(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.override_shape_enabled)
