"""(De)serialization of a ``Graph`` and of its compiled plan, and rebuilding the Python graph
from backend descriptors (spec §2.9)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..._generated.enums import AttributeName as A
from ..._generated.enums import AttributeType as T
from ..._generated.enums import DataType
from ...errors import BadParamError, NotSupportedError
from .. import _infer
from .._ops import BY_OPTYPE, read_value
from ..handle import Handle
from ..tensor import Tensor, element_size, to_numpy_dtype
from ._types import _CONTENT_PLAN, _SERIALIZE_PLAN_NOTE, _Node

if TYPE_CHECKING:
    from .core import Graph


class SerializationMixin:
    """Mixin of :class:`Graph`."""

    # ================================================================== serialization (§2.9)
    def _two_call_bytes(self, fn, *args) -> bytes:
        a = self.api
        ffi = a.ffi
        sz = ffi.new("size_t*")
        a.check(fn(*args, 0, sz, ffi.NULL), fn.__name__ if hasattr(fn, "__name__") else "serialize")
        if sz[0] == 0:
            raise BadParamError("the backend returned an empty serialization")
        buf = ffi.new("uint8_t[]", sz[0])
        a.check(fn(*args, sz[0], sz, buf), "serialize")
        return bytes(ffi.buffer(buf, sz[0]))

    def serialize(self) -> bytes:
        """The graph (and, when the engine supports it, the compiled plan) as bytes."""
        a = self.api
        lib = a.lib
        plan = self._active_plan()
        if plan is not None and self._gdesc is not None and self.engine_id is not None:
            try:
                notes = self.get_behavior_notes_for_engine(self.engine_id)
            except NotSupportedError:
                notes = []
            if _SERIALIZE_PLAN_NOTE in [int(x) for x in notes]:
                return self._two_call_bytes(lib.hipdnnBackendGetSerializedBinaryGraphAndPlan_ext,
                                            self._gdesc, plan)
        if self._gdesc is not None:
            return self._two_call_bytes(lib.hipdnnBackendGetSerializedBinaryGraph_ext, self._gdesc)
        self.validate()
        g = self._lower(None)
        try:
            return self._two_call_bytes(lib.hipdnnBackendGetSerializedBinaryGraph_ext, g)
        finally:
            a.destroy(g)

    def serialize_json(self) -> str:
        a = self.api
        ffi = a.ffi
        g = self._gdesc
        tmp = None
        if g is None:
            self.validate()
            g = tmp = self._lower(None)
        try:
            sz = ffi.new("size_t*")
            a.check(a.lib.hipdnnBackendGetSerializedJsonGraph_ext(g, 0, sz, ffi.NULL), "serialize_json")
            buf = ffi.new("char[]", sz[0])
            a.check(a.lib.hipdnnBackendGetSerializedJsonGraph_ext(g, sz[0], sz, buf), "serialize_json")
            return ffi.string(buf).decode()
        finally:
            if tmp is not None:
                a.destroy(tmp)

    # ---------------------------------------------------------------- compiled plans (§2.9)
    def serialize_compiled_plan(self) -> bytes:
        """The active (built) plan alone: hipdnnBackendGetSerializedExecutionPlan_ext, two-call.
        Restore it with :meth:`deserialize_compiled_plan` (no graph needed)."""
        return self._two_call_bytes(self.api.lib.hipdnnBackendGetSerializedExecutionPlan_ext,
                                    self._need_plan())

    def deserialize_compiled_plan(self, *args):
        """``deserialize_compiled_plan(handle, data)`` (either order; the handle is optional
        when the graph has one): hipdnnBackendCreateAndDeserializeExecutionPlan_ext, then
        EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT and IS_OVERRIDE_SHAPE_ENABLED_EXT (failures
        tolerated).  The plan is graph-less: :meth:`execute` takes uids as keys
        (:meth:`get_compiled_plan_tensor_uids` lists them)."""
        handle = next((x for x in args if isinstance(x, Handle)), None)
        data = next((x for x in args if isinstance(x, (bytes, bytearray, memoryview))), None)
        if data is None:
            raise BadParamError("deserialize_compiled_plan: no bytes given")
        if self._nodes or self._gdesc is not None or self._plans:
            raise BadParamError("deserialize_compiled_plan into an empty Graph")
        data = bytes(data)
        a = self.api
        ffi, lib = a.ffi, a.lib
        h = self._ensure_handle(handle)
        pp = ffi.new("hipdnnBackendDescriptor_t*")
        src = ffi.new("uint8_t[]", data)
        a.check(lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h.raw, pp, src, len(data)),
                "hipdnnBackendCreateAndDeserializeExecutionPlan_ext")
        self._plans, self._plan_ok, self._active, self._cfgs = [pp[0]], [True], 0, [None]
        eid = a.try_get(pp[0], A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT, T.HIPDNN_TYPE_INT64)
        self.engine_id = int(eid[0]) if eid else None
        self._engine_ids = [self.engine_id]
        ov = a.try_get(pp[0], A.HIPDNN_ATTR_EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT,
                       T.HIPDNN_TYPE_BOOLEAN)
        self.override_shape_enabled = bool(ov[0]) if ov else False
        self._from_bytes = True
        self._explicit_engine = True
        self._workspace = None
        return self

    @classmethod
    def from_compiled_plan(cls, data, handle: Handle | None = None, library: str | None = None):
        return cls(handle=handle, library=library).deserialize_compiled_plan(data)

    def get_compiled_plan_tensor_uids(self) -> list[int]:
        """EXECUTION_PLAN_TENSOR_UIDS_EXT of the active plan (size query, then fetch)."""
        a = self.api
        plan = self._need_plan()
        n = a.get_count(plan, A.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT, T.HIPDNN_TYPE_INT64)
        if n <= 0:
            return []
        return [int(v) for v in a.get(plan, A.HIPDNN_ATTR_EXECUTION_PLAN_TENSOR_UIDS_EXT,
                                      T.HIPDNN_TYPE_INT64, n)]

    def get_compiled_plan_engine_id(self):
        """EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT of the active plan (None when unsupported)."""
        v = self.api.try_get(self._need_plan(), A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT,
                             T.HIPDNN_TYPE_INT64)
        return int(v[0]) if v else None

    def get_compiled_plan_override_shape_enabled(self):
        """EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT of the active plan (None when
        unsupported)."""
        v = self.api.try_get(self._need_plan(), A.HIPDNN_ATTR_EXECUTION_PLAN_IS_OVERRIDE_SHAPE_ENABLED_EXT,
                             T.HIPDNN_TYPE_BOOLEAN)
        return bool(v[0]) if v else None

    def deserialize(self, *args):
        """``deserialize(data)`` or ``deserialize(handle, data)`` (either order): rebuild this graph
        from bytes made by :meth:`serialize`.  With a handle (or the graph's own) the graph is
        finalized, and an embedded compiled plan is restored so :meth:`execute` works at once;
        without an embedded plan call :meth:`build`."""
        handle = next((x for x in args if isinstance(x, Handle)), None)
        data = next((x for x in args if isinstance(x, (bytes, bytearray, memoryview))), None)
        if data is None:
            raise BadParamError("deserialize: no bytes given")
        if self._nodes or self._gdesc is not None:
            raise BadParamError("deserialize into an empty Graph")
        data = bytes(data)
        a = self.api
        ffi, lib = a.ffi, a.lib
        h = self._ensure_handle(handle)
        p = ffi.new("hipdnnBackendDescriptor_t*")
        src = ffi.new("uint8_t[]", data)
        a.check(lib.hipdnnBackendCreateAndDeserializeGraph_ext(p, src, len(data)),
                "hipdnnBackendCreateAndDeserializeGraph_ext")
        g = p[0]
        try:
            a.set(g, A.HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, T.HIPDNN_TYPE_HANDLE, [h.raw])
            a.finalize(g, "finalize deserialized graph")
            self._unpack(g)
        except BaseException:
            a.destroy(g)
            raise
        self._gdesc = g
        self._lowered = True
        self._from_bytes = True
        flags = ffi.new("int*")
        a.check(lib.hipdnnBackendGetSerializedBinaryContents_ext(src, len(data), flags),
                "hipdnnBackendGetSerializedBinaryContents_ext")
        if flags[0] & _CONTENT_PLAN:
            pp = ffi.new("hipdnnBackendDescriptor_t*")
            a.check(lib.hipdnnBackendCreateAndDeserializeExecutionPlan_ext(h.raw, pp, src, len(data)),
                    "hipdnnBackendCreateAndDeserializeExecutionPlan_ext")
            self._plans, self._plan_ok, self._active, self._cfgs = [pp[0]], [True], 0, [None]
            eid = a.try_get(pp[0], A.HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_GLOBAL_INDEX_EXT, T.HIPDNN_TYPE_INT64)
            self.engine_id = int(eid[0]) if eid else None
            self._engine_ids = [self.engine_id]
            self._workspace = None
        return self

    @classmethod
    def from_bytes(cls, data, handle: Handle | None = None, library: str | None = None) -> "Graph":
        return cls(handle=handle, library=library).deserialize(data)

    def _unpack(self, g):
        """Rebuild frontend tensors / nodes (tensor roles only) from a backend graph (§2.9)."""
        a = self.api
        ffi = a.ffi
        n = a.get_count(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        ops = a.get(g, A.HIPDNN_ATTR_OPERATIONGRAPH_OPS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, n) if n else []
        tensors = {}
        try:
            for op in ops:
                ot = a.get(op, A.HIPDNN_ATTR_OPERATION_TYPE_EXT, T.HIPDNN_TYPE_OPERATION_TYPE_EXT)[0]
                spec = BY_OPTYPE.get(int(ot))
                if spec is None:
                    raise NotSupportedError(f"deserialize: operation type {ot} is not supported by "
                                            f"the Python frontend")
                roles = {}
                for role, attr in spec.slots():
                    arr = ffi.new("hipdnnBackendDescriptor_t[1]")
                    cnt = ffi.new("int64_t*")
                    st = a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR),
                                                         1, cnt, arr)
                    if st != 0:
                        a.last_error()
                        continue
                    if cnt[0] < 1 or arr[0] == ffi.NULL:
                        continue
                    try:
                        roles[role] = self._unpack_tensor(arr[0], tensors)
                    finally:
                        a.destroy(arr[0])
                name = ""
                try:
                    name = a.get_string(op, A.HIPDNN_ATTR_OPERATION_NAME_EXT)
                except Exception:
                    pass
                arrays = {}
                for role, attr in spec.arrays:
                    ts = self._unpack_tensor_array(op, attr, tensors)
                    if ts:
                        arrays[role] = ts
                attrs, comp = self._unpack_params(op, spec)
                ins = {r: roles.get(r) for r, _ in spec.inputs}
                outs = {r: roles.get(r) for r, _ in spec.outputs}
                node = _Node(spec.kind, ins, outs, attrs, comp, name, arrays)
                for t in node.output_tensors():
                    t._producer = node
                self._nodes.append(node)
        finally:
            for op in ops:
                a.destroy(op)
        self._order = list(self._nodes)
        for attr, field in ((A.HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, "compute_data_type"),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT,
                             "intermediate_data_type"),
                            (A.HIPDNN_ATTR_OPERATIONGRAPH_IO_DATA_TYPE_EXT, "io_data_type")):
            v = a.try_get(g, attr, T.HIPDNN_TYPE_DATA_TYPE)
            if v and v[0] in DataType._value2member_map_:
                setattr(self, field, DataType(v[0]))
        v = a.try_get(g, A.HIPDNN_ATTR_OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.HIPDNN_TYPE_INT64)
        if v:
            self.preferred_engine_id = int(v[0])
        try:
            self.name = a.get_string(g, A.HIPDNN_ATTR_OPERATIONGRAPH_NAME_EXT)
        except Exception:
            pass

    def _unpack_tensor_array(self, op, attr, tensors):
        """A descriptor-array slot (peer stats): count query, fetch, unpack, destroy."""
        a = self.api
        ffi = a.ffi
        cnt = ffi.new("int64_t*")
        st = a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR), 0,
                                             cnt, ffi.NULL)
        if st != 0:
            a.last_error()
            return []
        if cnt[0] <= 0:
            return []
        arr = ffi.new("hipdnnBackendDescriptor_t[]", cnt[0])
        n = ffi.new("int64_t*")
        a.check(a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_BACKEND_DESCRIPTOR),
                                                cnt[0], n, arr), "deserialize: peer stats")
        out = []
        try:
            for i in range(min(n[0], cnt[0])):
                out.append(self._unpack_tensor(arr[i], tensors))
        finally:
            for i in range(cnt[0]):
                a.destroy(arr[i])
        return out

    def _get_vec(self, op, attr):
        """INT64 vector getter: count query, then fetch (None when unset / unsupported)."""
        a = self.api
        n = a.ffi.new("int64_t*")
        st = a.lib.hipdnnBackendGetAttribute(op, int(attr), int(T.HIPDNN_TYPE_INT64), 0, n, a.ffi.NULL)
        if st != 0:
            a.last_error()
            return None
        if n[0] <= 0:
            return []
        return [int(v) for v in a.get(op, attr, T.HIPDNN_TYPE_INT64, n[0])]

    def _get_one(self, op, attr, atype):
        """Scalar getter (req 1, &count, &v); None when unset (count 0) or unsupported."""
        v = self.api.try_get(op, attr, atype)
        return v[0] if v else None

    def _unpack_params(self, op, spec):
        """The op's parameters through its getters (the catalog's attributes); the inverse of
        :meth:`_op_params`."""
        attrs = {}
        for p in spec.params:
            if p.kind == "i64vec":
                v = self._get_vec(op, p.attr)
                attrs[p.key] = v if v else None
            else:
                attrs[p.key] = read_value(p, self._get_one(op, p.attr, p.attr_type))
        comp = None
        if spec.comp is not None:
            v = self._get_one(op, spec.comp, T.HIPDNN_TYPE_DATA_TYPE)
            if v is not None and v in DataType._value2member_map_:
                comp = DataType(v)
        return _infer.read_attrs(spec.kind, attrs), comp

    def relower(self, handle: Handle | None = None):
        """Lower a deserialized graph again from its Python nodes (ops, parameters, tensors read
        back by :meth:`deserialize`): the backend graph and plans from the bytes are destroyed,
        and the graph is validated and lowered like one built in Python (§2.2).  Call
        :meth:`build` (or the steps) afterwards to get plans."""
        if not self._from_bytes:
            return self.build_operation_graph(handle)
        self._release_plans()
        if self._gdesc is not None:
            self.api.destroy(self._gdesc)
            self._gdesc = None
        self._from_bytes = False
        self._lowered = False
        self._order = None
        return self.build_operation_graph(handle)

    def _unpack_tensor(self, d, tensors):
        a = self.api
        uid = a.get(d, A.HIPDNN_ATTR_TENSOR_UNIQUE_ID, T.HIPDNN_TYPE_INT64)[0]
        if uid in tensors:
            return tensors[uid]
        dt = a.get(d, A.HIPDNN_ATTR_TENSOR_DATA_TYPE, T.HIPDNN_TYPE_DATA_TYPE)[0]
        nd = a.get_count(d, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64)
        dims = a.get(d, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, nd)
        ns = a.get_count(d, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64)
        strides = a.get(d, A.HIPDNN_ATTR_TENSOR_STRIDES, T.HIPDNN_TYPE_INT64, ns)
        virt = a.get(d, A.HIPDNN_ATTR_TENSOR_IS_VIRTUAL, T.HIPDNN_TYPE_BOOLEAN)[0]
        try:
            name = a.get_string(d, A.HIPDNN_ATTR_TENSOR_NAME_EXT)
        except Exception:
            name = ""
        t = Tensor(self, name, dims, strides, dt if dt in DataType._value2member_map_ else None,
                   bool(virt), int(uid))
        byv = a.try_get(d, A.HIPDNN_ATTR_TENSOR_IS_BY_VALUE, T.HIPDNN_TYPE_BOOLEAN)
        if byv and byv[0]:
            try:
                raw = a.get(d, A.HIPDNN_ATTR_TENSOR_VALUE_EXT, T.HIPDNN_TYPE_CHAR,
                            element_size(t.data_type))
                b = bytes(bytearray(ord(c) if isinstance(c, bytes) else c for c in raw))
                npd = to_numpy_dtype(t.data_type)
                t._value = np.frombuffer(b, dtype=npd)[0].item() if npd is not None else b
            except Exception:
                pass
        rt = a.try_get(d, A.HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, T.HIPDNN_TYPE_BOOLEAN)
        if rt and rt[0]:
            t._runtime = True
        m = a.try_get(d, A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER, T.HIPDNN_TYPE_INT64)
        if m:
            t.ragged_offset_multiplier = int(m[0])
        aux = a.try_get(d, A.HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR)
        tensors[uid] = t
        if aux and aux[0] != a.ffi.NULL:
            try:
                t._ragged = self._unpack_tensor(aux[0], tensors)
            finally:
                a.destroy(aux[0])
        self._tensors.append(t)
        return t

