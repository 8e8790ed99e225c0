"""``Graph``: build, compile and run hipDNN operation graphs over the backend C API.

The call sequences are those of hipDNN's C++ frontend (spec/backend-behavior.md §2):
``validate`` (no backend calls), ``build_operation_graph`` (§2.2), ``create_execution_plans``
(§2.3), ``check_support`` (§2.4), ``build_plans`` (§2.5), ``get_workspace_size`` (§2.6),
``execute`` (§2.7), ``serialize`` / ``deserialize`` (§2.9).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..._generated.enums import DataType
from ...errors import BadParamError
from .. import _infer
from .. import buffers as _buffers
from .._ops import output_label
from .._capi import Api
from .._capi import api as _api
from ..handle import Handle
from ..tensor import _UNSET, ScalarType, Tensor, packed_strides
from ._types import _Node
from .execution import ExecutionMixin
from .lowering import LoweringMixin
from .ops import OpsMixin
from .autotune import AutotuneMixin
from .plan_list import PlanListMixin
from .plans import PlansMixin
from .selection import SelectionMixin
from .serialization import SerializationMixin


# cudnn-frontend pygraph constructor options without a hipDNN counterpart (accepted unset)
_CUDNN_GRAPH_OPTIONS = ("sm_count", "sm_version", "kernel_cache", "device_property",
                        "is_dynamic_shape_enabled")


class Graph(OpsMixin, LoweringMixin, PlansMixin, PlanListMixin, AutotuneMixin, SelectionMixin,
            ExecutionMixin, SerializationMixin):
    """A hipDNN operation graph (shaped like hipDNN's Python bindings / cudnn-frontend ``pygraph``).

    ``Graph(handle=None, io_data_type=None, intermediate_data_type=None, compute_data_type=None,
    name="", library=None)``.  Without a handle, one is created (and owned) at build time.
    """

    def __init__(self, handle: Handle | None = None, io_data_type=None, intermediate_data_type=None,
                 compute_data_type=None, name: str = "", library: str | None = None, *,
                 is_override_shape_enabled=False, **cudnn_options):
        if isinstance(handle, str):
            # cudnn-frontend's positional order: (name, io, intermediate, compute, handle)
            handle, name = (name if isinstance(name, Handle) else None), handle
        for key, value in cudnn_options.items():
            if key not in _CUDNN_GRAPH_OPTIONS:
                raise TypeError(f"Graph() got an unexpected keyword argument {key!r}")
            if value not in (None, False):
                raise BadParamError(f"Graph({key}=...): cudnn-frontend's {key} has no hipDNN "
                                    "counterpart")
        self.handle = handle
        self._own_handle = False
        self._library = library
        self.api: Api = handle.api if handle is not None else _api(library)
        self.io_data_type = DataType(io_data_type) if io_data_type is not None else None
        self.intermediate_data_type = (DataType(intermediate_data_type)
                                       if intermediate_data_type is not None else None)
        self.compute_data_type = DataType(compute_data_type) if compute_data_type is not None else None
        self.name = name or ""
        self.preferred_engine_id = None
        self.preferred_engine_name = None
        self.override_shape_enabled = bool(is_override_shape_enabled)
        self._tensors: list[Tensor] = []
        self._nodes: list[_Node] = []
        self._order: list[_Node] | None = None
        self._lowered = False
        self._from_bytes = False
        self._gdesc = None          # finalized OPERATIONGRAPH
        self._cfgs: list = []
        self._engine_ids: list[int] = []
        self._plans: list = []
        self._plan_ok: list[bool] = []
        self._active = None
        self._workspace = None
        self.engine_id = None
        self._engine_name = None
        #: run the plan of an engine that reaches the variant pack's memory (see execute)
        self.select_engine_by_memory = True
        self._mem_plan: dict = {}       # memory kind -> plan index (None: no engine reaches it)
        self._mem_why: dict = {}        # memory kind -> why no engine reaches it
        self._declines = ""             # the backend's decline reasons of the last heuristics
        self._ws_sizes: dict = {}       # plan index -> workspace size
        self._engine_names: dict = {}   # engine id -> name
        self._explicit_engine = False   # plan made by create_execution_plan_ext / compiled plan
        self._dev_ws = None             # (size, pointer, runtime) of a device workspace we own

    # ================================================================== tensors
    def tensor(self, value=_UNSET, scalar_type: ScalarType | None = None, *, name="", dim=None,
               stride=None, data_type=None, is_virtual=False, uid=None, is_pass_by_value=False) -> Tensor:
        """A graph tensor; ``graph.tensor(v, ScalarType.X)`` makes a by-value scalar:
        ``COMPILE_TIME_CONST`` (default for a plain value) or ``RUNTIME_PARAM`` (runtime with
        default).  cudnn-frontend's positional ``graph.tensor(dim, stride)`` works too."""
        if isinstance(value, (list, tuple)):
            dim, value = value, _UNSET
            if isinstance(scalar_type, (list, tuple)):
                stride, scalar_type = scalar_type, None
        t = Tensor(self, name, dim, stride, data_type, is_virtual, uid)
        if value is not _UNSET and value is not None:
            t.set_value(value)
            if scalar_type == ScalarType.RUNTIME_PARAM:
                t._runtime = True
        elif scalar_type == ScalarType.RUNTIME_PARAM or is_pass_by_value:
            t.set_as_runtime_parameter()
        if t.dim is not None and t.stride is None:
            t.stride = packed_strides(t.dim)
        self._tensors.append(t)
        return t

    def scalar(self, value=None, scalar_type: ScalarType = ScalarType.COMPILE_TIME_CONST, *,
               name="", data_type=None, uid=None) -> Tensor:
        """A 1-element by-value scalar.  ``value=None`` with RUNTIME_PARAM = user-supplied at
        execute."""
        if value is None:
            t = self.tensor(name=name, dim=[1], stride=[1], data_type=data_type, uid=uid)
            return t.set_as_runtime_parameter()
        return self.tensor(value, scalar_type, name=name, data_type=data_type, uid=uid)

    def tensor_like(self, like, name="") -> Tensor:
        """A tensor with the dims/strides/data type of a Tensor or an array: a torch tensor (any
        dtype: bf16, fp8, fp4 too), a numpy array, an object with ``__cuda_array_interface__``
        or ``__dlpack__``, or anything with ``shape``/``strides``/``dtype``."""
        if isinstance(like, Tensor):
            return self.tensor(name=name or like.name, dim=like.dim, stride=like.stride,
                               data_type=like.data_type, is_virtual=like.is_virtual)
        dims, strides, dt = _buffers.describe_for_tensor(like)
        return self.tensor(name=name, dim=dims, stride=strides, data_type=dt)

    def _as_tensor(self, v, what):
        if v is None or isinstance(v, Tensor):
            return v
        if isinstance(v, (int, float, np.generic)):
            return self.tensor(v, ScalarType.COMPILE_TIME_CONST, name="")
        raise TypeError(f"{what}: expected a Tensor or a number, got {type(v).__name__}")

    def _out(self, node_name, role, data_type=None, kind=None):
        label = output_label(kind, role) if kind is not None else role
        t = Tensor(self, f"{node_name}::{label}", is_virtual=True, data_type=data_type)
        self._tensors.append(t)
        return t

    def _add(self, kind, inputs, out_roles, attrs, compute_data_type, name, arrays=None):
        name = name or f"{kind}_{len(self._nodes)}"
        if self._lowered:
            raise BadParamError("cannot add operations after the graph was built")
        inputs = {r: self._as_tensor(t, f"{name}.{r}") for r, t in inputs.items()}
        outputs = {r: self._out(name, r, kind=kind) for r in out_roles}
        node = _Node(kind, inputs, outputs, attrs, compute_data_type, name, arrays)
        for t in outputs.values():
            t._producer = node
        self._nodes.append(node)
        self._order = None
        try:
            _infer.INFER[kind](node)
        except BadParamError:
            raise
        except Exception:
            pass
        return node

    # ================================================================== validate (§2.1)
    def _assign_uids(self):
        used = {t.uid for t in self._tensors if t.uid is not None}
        counter = itertools.count(0)   # hipDNN's frontend numbers tensors from 0
        for t in self._graph_tensors():
            if t.uid is None:
                u = next(counter)
                while u in used:
                    u = next(counter)
                t.uid = u
                used.add(u)

    def _graph_tensors(self):
        seen, out = set(), []
        for n in self._nodes:
            for t in n.tensors():
                if id(t) not in seen:
                    seen.add(id(t))
                    out.append(t)
        return out

    def validate(self):
        """Frontend checks only (no backend calls): shapes inferred/filled, tensor checks, duplicate
        uids, topological order, a single connected component."""
        if self._from_bytes:
            return self
        if not self._nodes:
            raise BadParamError("graph has no operations")
        # topological order (stable: insertion order among ready nodes)
        producer = {}
        for n in self._nodes:
            for t in n.output_tensors():
                if id(t) in producer and producer[id(t)] is not n:
                    raise BadParamError(f"tensor {t.name!r} is written by two operations")
                producer[id(t)] = n
        deps = {id(n): {id(producer[id(t)]) for t in n.input_tensors() if id(t) in producer}
                for n in self._nodes}
        order, done = [], set()
        while len(order) < len(self._nodes):
            ready = [n for n in self._nodes if id(n) not in done and deps[id(n)] <= done]
            if not ready:
                raise BadParamError("graph has a cycle")
            order.append(ready[0])
            done.add(id(ready[0]))
        # shape inference (in topological order), then defaults from the graph context
        for n in order:
            _infer.INFER[n.kind](n)
        for n in order:
            if n.compute_data_type is None:
                n.compute_data_type = self.compute_data_type
        self._assign_uids()
        by_uid = {}
        for t in self._graph_tensors():
            if t.data_type is None:
                t.data_type = self.intermediate_data_type if t.is_virtual else self.io_data_type
            what = f"tensor {t.name!r} (uid {t.uid})"
            if t.dim is None:
                raise BadParamError(f"{what}: dims are not set")
            if t.stride is None:
                t.stride = packed_strides(t.dim)
            if len(t.dim) != len(t.stride) or not t.dim:
                raise BadParamError(f"{what}: {len(t.dim)} dims but {len(t.stride)} strides")
            if t.data_type is None:
                raise BadParamError(f"{what}: data type is not set (and the graph has no "
                                    f"{'intermediate' if t.is_virtual else 'io'} data type)")
            if t.is_virtual and t._runtime:
                raise BadParamError(f"{what}: a virtual tensor cannot be a runtime pass-by-value scalar")
            if t.is_virtual and t.has_value:
                raise BadParamError(f"{what}: a virtual tensor cannot carry a value")
            if t.is_virtual and t._producer is None:
                raise BadParamError(f"{what}: a virtual tensor must be produced by an operation")
            other = by_uid.setdefault(t.uid, t)
            if other is not t:
                raise BadParamError(f"duplicate tensor uid {t.uid} ({other.name!r} and {t.name!r})")
        # single component
        if len(order) > 1:
            parent = {id(n): id(n) for n in order}

            def find(x):
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                return x
            owner = {}
            for n in order:
                for t in n.tensors():
                    if id(t) in owner:
                        parent[find(id(n))] = find(owner[id(t)])
                    else:
                        owner[id(t)] = id(n)
            if len({find(id(n)) for n in order}) > 1:
                raise BadParamError("graph is not connected (more than one component)")
        self._order = order
        return self

    # ================================================================== misc
    def get_tensors(self) -> list[Tensor]:
        return self._graph_tensors()

    def get_tensor_by_uid(self, uid):
        for t in self._graph_tensors():
            if t.uid == uid:
                return t
        return None

    query_tensor_attributes_of_uid = get_tensor_by_uid      # cudnn-frontend pygraph's name

    def get_tensor_by_name(self, name):
        for t in self._graph_tensors():
            if t.name == name:
                return t
        return None

    @property
    def nodes(self):
        return [(n.kind, n.name) for n in (self._order or self._nodes)]

    def close(self):
        """Destroy the backend descriptors (and the handle, when the graph created it)."""
        api = getattr(self, "api", None)
        if api is None:
            return
        try:
            self._release_plans()
            self._free_device_workspace()
            if self._gdesc is not None:
                api.destroy(self._gdesc)
                self._gdesc = None
            if self._own_handle and self.handle is not None:
                self.handle.close()
                self.handle = None
                self._own_handle = False
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        ops = ", ".join(k for k, _ in self.nodes)
        return f"Graph(name={self.name!r}, ops=[{ops}], engine={self._engine_name or self.engine_id})"
