"""Lowering a ``Graph`` to backend descriptors: tensors, operations and the finalized
OPERATIONGRAPH (spec/backend-behavior.md §2.2)."""
from __future__ import annotations

from ..._generated.enums import AttributeName as A
from ..._generated.enums import AttributeType as T
from ..._generated.enums import DescriptorType as D
from ...errors import BadParamError
from .. import _infer
from .._ops import SPECS, lower_value
from ..handle import Handle
from ..tensor import scalar_bytes


class LoweringMixin:
    """Mixin of :class:`Graph`."""

    # ================================================================== lowering (§2.2)
    def _tensor_desc(self, t, tdesc=None):
        a = self.api
        d = a.create(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
        try:
            a.set(d, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64, [t.uid])
            if t.name:
                a.set(d, A.HIPDNN_ATTR_TENSOR_NAME_EXT, T.HIPDNN_TYPE_CHAR, t.name)
            a.set(d, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE, [int(t.data_type)])
            a.set(d, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, list(t.dim))
            a.set(d, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, list(t.stride))
            a.set(d, A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, T.HIPDNN_TYPE_BOOLEAN, [t.is_virtual])
            if t.byte_alignment != 16:
                a.set(d, A.HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT, T.HIPDNN_TYPE_INT64, [t.byte_alignment])
            if t._ragged is not None:
                a.set(d, A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR,
                      [tdesc[id(t._ragged)]])
            if t.ragged_offset_multiplier != 1:
                a.set(d, A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER, T.HIPDNN_TYPE_INT64,
                      [t.ragged_offset_multiplier])
            if t.has_value:
                a.set(d, A.HIPDNN_ATTR_TENSOR_VALUE_EXT, T.HIPDNN_TYPE_CHAR,
                      scalar_bytes(t._value, t.data_type))
            if t._runtime:
                a.set(d, A.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, T.HIPDNN_TYPE_BOOLEAN, [True])
            a.finalize(d, f"finalize tensor {t.name or t.uid}")
        except BaseException:
            a.destroy(d)
            raise
        return d

    def _op_params(self, n):
        """(attribute, type, values) of the node's parameters, in the catalog's order."""
        spec = SPECS[n.kind]
        at = _infer.lowered_attrs(n)
        out = []
        for p in spec.params:
            v = at.get(p.key)
            if v is not None:
                out.append((A(p.attr), p.attr_type, lower_value(p, v)))
        if n.compute_data_type is not None and spec.comp is not None:
            out.append((spec.comp, T.HIPDNN_TYPE_DATA_TYPE, [int(n.compute_data_type)]))
        return out

    def _op_desc(self, n, tdesc):
        a = self.api
        spec = SPECS[n.kind]
        d = a.create(spec.dtype)
        try:
            for role, attr in spec.inputs:
                t = n.inputs.get(role)
                if t is not None:
                    a.set(d, attr, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [tdesc[id(t)]])
            for role, attr in spec.outputs:
                t = n.outputs.get(role)
                if t is not None:
                    a.set(d, attr, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [tdesc[id(t)]])
            for role, attr in spec.arrays:
                ts = n.arrays.get(role)
                if ts:
                    a.set(d, attr, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, [tdesc[id(t)] for t in ts])
            for attr, atype, values in self._op_params(n):
                a.set(d, attr, atype, values)
            if n.name:
                a.set(d, A.HIPDNN_ATTR_OPERATION_NAME_EXT, T.HIPDNN_TYPE_CHAR, n.name)
            a.finalize(d, f"finalize operation {n.name}")
        except BaseException:
            a.destroy(d)
            raise
        return d

    def _lower(self, handle_raw):
        """§2.2 steps 1–3 (with HANDLE + Finalize when ``handle_raw`` is given); returns the graph
        descriptor; step 4 (destroy tensor/op wrappers) always."""
        a = self.api
        tdesc, wrappers, ops = {}, [], []
        g = None
        try:
            for n in self._order:
                for t in n.tensors():
                    if id(t) not in tdesc:
                        tdesc[id(t)] = self._tensor_desc(t, tdesc)
                        wrappers.append(tdesc[id(t)])
                ops.append(self._op_desc(n, tdesc))
            g = a.create(D.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
            a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, ops)
            for attr, v in ((A.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, self.compute_data_type),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT,
                             self.intermediate_data_type),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, self.io_data_type)):
                if v is not None:
                    a.set(g, attr, T.HIPDNN_TYPE_DATA_TYPE, [int(v)])
            if self.preferred_engine_id is not None:
                a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.HIPDNN_TYPE_INT64,
                      [int(self.preferred_engine_id)])
            a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, T.HIPDNN_TYPE_BOOLEAN,
                  [bool(self.override_shape_enabled)])
            if self.name:
                a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT, T.HIPDNN_TYPE_CHAR, self.name)
            if handle_raw is not None:
                a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, T.HIPDNN_TYPE_HANDLE, [handle_raw])
                a.finalize(g, "finalize operation graph")
        except BaseException:
            a.destroy(g)
            raise
        finally:
            for d in ops + wrappers:
                a.destroy(d)
        return g

    def _ensure_handle(self, handle=None):
        if handle is not None:
            if self.handle is not None and handle is not self.handle and self._gdesc is not None:
                raise BadParamError("the graph was built with another handle")
            self.handle = handle
        if self.handle is None:
            self.handle = Handle(_api_obj=self.api)
            self._own_handle = True
        return self.handle

    def build_operation_graph(self, handle: Handle | None = None):
        """Assign uids, validate, lower to backend descriptors (spec §2.2)."""
        h = self._ensure_handle(handle)
        if self._from_bytes:
            return self
        self.validate()
        self._release_plans()
        if self._gdesc is not None:
            self.api.destroy(self._gdesc)
            self._gdesc = None
        self._gdesc = self._lower(h.raw)
        self._lowered = True
        # What execute() must be given is fixed by what was lowered: setters called after the
        # build (which only warn, RFC 0016 §4.3) must not change it.
        self._required_uids = {t.uid for t in self._graph_tensors()
                               if not t.is_virtual and not t.has_value}
        return self

