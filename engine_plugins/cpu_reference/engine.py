"""The CPU reference graph executor as a Python engine plugin (RFC 004 on the plugin SDK).

* :func:`analyse` turns an op graph into the node plan builders that handle its nodes (one
  SignatureKey per node, looked up in the PlanBuilderRegistry) in topological order - or a
  reason why the engine is not applicable.
* :class:`GraphPlan` (the plan of an execution context) executes the node plans sequentially;
  virtual tensors are allocated on demand (when the node producing them runs) for that execute
  call only and never exposed; by-value scalars are baked from the graph; runtime pass-by-value
  scalars are read from the host pointer bound to their uid at execute.
"""
from __future__ import annotations

import collections
import threading

import numpy as np

from hipdnn_cabi._generated.enums import BehaviorNote
from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBase, PlanBuilderBase, knobs
from hipdnn_cabi.plugin_sdk.errors import (ALLOC_FAILED, INTERNAL_ERROR, INVALID_VALUE,
                                           NOT_APPLICABLE, PluginError)
from hipdnn_cabi.plugin_sdk.spans import graph_span_problem

from . import hostmem
from .kernels import blocked
from .kernels import dtypes as kdt
from .kernels import layout as klayout
from .ops import BUILDERS, BY_KIND, RaggedRef, Unsupported
from .signature import PlanBuilderRegistry, dtype_name, kernel_type

ENGINE_NAME = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
PLUGIN_NAME = "hipdnn_cabi_cpu_reference"
PLUGIN_VERSION = "1.0.0"
API_VERSION = "1.3.0"   # runtime pass-by-value scalars (1.2.0), ragged tensors and alignment (1.3.0)

REGISTRY = PlanBuilderRegistry(BUILDERS)


class Analysis:
    __slots__ = ("ok", "reason", "steps", "keys")

    def __init__(self, ok, reason="", steps=(), keys=()):
        self.ok, self.reason, self.steps, self.keys = ok, reason, list(steps), list(keys)


def _analyse(graph) -> Analysis:
    if not graph.nodes:
        return Analysis(False, "graph has no nodes")
    if graph.is_override_shape_enabled:
        return Analysis(False, "shape overrides are not supported")
    why = graph_span_problem(graph, _itemsize)
    if why:
        return Analysis(False, why)
    entries = []
    for i, node in enumerate(graph.nodes):
        cls = BY_KIND.get(node.kind)
        if cls is None:
            return Analysis(False, f"node {i} ({node.kind}) is not supported")
        try:
            key = cls().signature(node, graph)
            ins, outs = cls.io_uids(node, graph)
        except Unsupported as e:
            return Analysis(False, f"node {i} ({node.kind}): {e}")
        if not getattr(cls, "READS_RAGGED", False):
            for u in ins + outs:
                if getattr(graph.tensors[u], "ragged_offset_uid", None) is not None:
                    return Analysis(False, f"node {i} ({node.kind}): tensor uid {u} is ragged; "
                                           f"only SDPA nodes read ragged tensors")
        builder = REGISTRY.get_plan_builder(key)
        if builder is None:
            return Analysis(False, f"node {i}: no plan builder for {key.describe()}")
        entries.append((node, builder, key, ins, outs))
    # producers and topological order (Kahn, stable in graph order)
    producer = {}
    for i, (_, _, _, _, outs) in enumerate(entries):
        for u in outs:
            if u in producer:
                return Analysis(False, f"tensor uid {u} is written by two nodes")
            producer[u] = i
    deps = [{producer[u] for u in ins if u in producer and producer[u] != i}
            for i, (_, _, _, ins, _) in enumerate(entries)]
    for i, (_, _, _, ins, outs) in enumerate(entries):
        if set(ins) & set(outs):
            return Analysis(False, f"node {i} reads and writes the same tensor")
    done, order = set(), []
    while len(order) < len(entries):
        ready = [i for i in range(len(entries)) if i not in done and deps[i] <= done]
        if not ready:
            return Analysis(False, "the graph has a cycle")
        order.append(ready[0])
        done.add(ready[0])
    for i, (_, _, _, ins, _) in enumerate(entries):
        for u in ins:
            t = graph.tensors[u]
            if t.virtual and u not in producer:
                return Analysis(False, f"virtual tensor uid {u} is read but no node writes it")
    steps = [(entries[i][1], entries[i][0]) for i in order]
    return Analysis(True, "", steps, [entries[i][2] for i in order])


_cache = collections.OrderedDict()
_cache_lock = threading.Lock()


def analyse(graph) -> Analysis:
    """Cached by the serialized graph bytes (the host asks several questions per graph)."""
    raw = getattr(graph, "raw", None)
    if raw is not None:
        with _cache_lock:
            a = _cache.get(raw)
            if a is not None:
                _cache.move_to_end(raw)
                return a
    a = _analyse(graph)
    if raw is not None:
        with _cache_lock:
            _cache[raw] = a
            while len(_cache) > 64:
                _cache.popitem(last=False)
    return a


# --------------------------------------------------------------------------- buffers
def storage(t):
    return kdt.storage_dtype(kernel_type(dtype_name(t.dtype)))


def _itemsize(t):
    try:
        return np.dtype(storage(t)).itemsize
    except Exception:  # noqa: BLE001 - an unsupported type is declined later, by the node
        return None


def host_view(ptr: int, t, dt) -> np.ndarray:
    """A strided numpy view of host memory at ptr for tensor t (any strides, also negative)."""
    dims = tuple(int(d) for d in t.dims)
    strides = tuple(int(s) for s in t.strides)
    lo, hi = klayout.element_extent(dims, strides)
    if hi < lo:
        return np.zeros(dims, dt)
    isz = np.dtype(dt).itemsize
    raw = klayout.from_address(int(ptr) + lo * isz, (hi - lo + 1) * isz)
    return klayout.view(raw, dims, strides, dt, offset=-lo)


def constant(t) -> np.ndarray:
    dt = storage(t)
    v = kdt.encode(np.asarray(t.value, dtype=np.float64 if not isinstance(t.value, bool)
                              else np.bool_), kernel_type(dtype_name(t.dtype)))
    a = np.full(tuple(int(d) for d in t.dims), v, dtype=dt)
    a.flags.writeable = False
    return a


class GraphPlan(PlanBase):
    """Node plans in topological order plus the tensor bookkeeping of one op graph.
    ``threads``: the thread count of its element-wise work (None: the configured count)."""

    def __init__(self, graph, analysis: Analysis, threads=None):
        self.threads = threads
        self.nodes = [b.build(n, graph) for b, n in analysis.steps]
        self.keys = analysis.keys
        used = []
        seen = set()
        for np_ in self.nodes:
            for u in np_.inputs + np_.outputs:
                if u not in seen:
                    seen.add(u)
                    used.append(graph.tensors[u])
        # RFC 0016 provider contract (docs/contracts.md): a baked default wins (a variant-pack
        # entry for a defaulted runtime scalar is ignored); a runtime scalar without a default is
        # read through its host pointer at execute.
        self.runtime = [t for t in used if t.is_runtime_pass_by_value and t.value is None]
        self.constants = {t.uid: constant(t) for t in used if t.value is not None}
        self.virtual = {t.uid: t for t in used if t.virtual and t.uid not in self.constants
                        and not t.is_runtime_pass_by_value}
        self.external = [t for t in used if t.uid not in self.constants and t.uid not in self.virtual
                         and not t.is_runtime_pass_by_value]
        self.storage = {t.uid: storage(t) for t in used}
        self.tensors = graph.tensors

    def get_workspace_size(self, handle) -> int:
        return 0

    def bind(self, buffers) -> dict:
        env = dict(self.constants)
        check = hostmem.gpu_runtime_present()
        for t in self.external:
            if t.uid not in buffers:
                raise PluginError(INVALID_VALUE, f"the variant pack has no buffer for tensor uid "
                                                 f"{t.uid} (the CPU reference engine reads and "
                                                 f"writes host memory)")
            ptr = buffers[t.uid]
            if not ptr:
                raise PluginError(INVALID_VALUE, f"the buffer for tensor uid {t.uid} is NULL")
            if check and not hostmem.host_accessible(ptr):
                raise PluginError(INVALID_VALUE,
                                  f"tensor uid {t.uid}: buffer 0x{int(ptr):x} is device-only "
                                  f"memory; the CPU reference engine needs host-accessible "
                                  f"(host, pinned or managed) memory")
            if getattr(t, "ragged_offset_uid", None) is not None:
                env[t.uid] = RaggedRef(ptr, self.storage[t.uid], self.tensors[t.ragged_offset_uid],
                                       t.ragged_offset_multiplier)
            else:
                env[t.uid] = host_view(ptr, t, self.storage[t.uid])
        for t in self.runtime:
            if t.uid not in buffers or not buffers[t.uid]:
                raise PluginError(INVALID_VALUE,
                                  f"runtime pass-by-value scalar tensor uid {t.uid} has no host "
                                  f"pointer in the variant pack")
            v = host_view(buffers[t.uid], t, self.storage[t.uid])
            env[t.uid] = np.array(v)   # a private copy of the value
        return env

    def execute(self, handle, buffers, workspace):
        if self.threads:
            with blocked.threads(self.threads):
                return self._execute(buffers)
        return self._execute(buffers)

    def _execute(self, buffers):
        try:
            env = self.bind(buffers)
            for step in self.nodes:
                for u in step.outputs:
                    if u in self.virtual and u not in env:   # allocated on demand
                        t = self.virtual[u]
                        env[u] = np.empty(tuple(int(d) for d in t.dims), self.storage[u])
                step.run(env)
        except PluginError:
            raise
        except MemoryError:
            raise PluginError(ALLOC_FAILED, f"{ENGINE_NAME}: out of host memory for the "
                                            f"intermediate tensors of the graph") from None
        except Exception as e:  # noqa: BLE001 - a status and an engine message, never a traceback
            raise PluginError(INTERNAL_ERROR, f"{ENGINE_NAME}: execute failed "
                                              f"({type(e).__name__}); the graph passed the "
                                              f"engine's checks, so this is an engine bug") from e


class CpuReferencePlanBuilder(PlanBuilderBase):
    def is_applicable(self, handle, graph) -> bool:
        return analyse(graph).ok

    def decline_reason(self, handle, graph) -> str:
        return analyse(graph).reason

    def get_max_workspace_size(self, handle, graph, config) -> int:
        return 0

    def build_plan(self, handle, graph, config):
        a = analyse(graph)
        if not a.ok:
            raise PluginError(NOT_APPLICABLE, f"{ENGINE_NAME}: {a.reason}")
        k = knobs.resolve(config, knobs.GLOBAL_KNOBS, strict=False)
        why = knobs.workspace_limit_problem(ENGINE_NAME, 0, k[knobs.WORKSPACE_SIZE_LIMIT_KNOB_NAME])
        if why:   # never: the engine needs no workspace
            raise PluginError(NOT_APPLICABLE, why)
        if not k[knobs.BENCHMARKING_KNOB_NAME]:
            return GraphPlan(graph, a)
        # global.benchmarking: one thread against the configured count, timed on the first execute
        counts = sorted({1, blocked.num_threads()})
        return knobs.BenchmarkingPlan(ENGINE_NAME, [(f"{n} thread(s)", GraphPlan(graph, a, n))
                                                    for n in counts])


class CpuReferenceEngine(EngineBase):
    name = ENGINE_NAME
    # numpy (and the BLAS under it) does the work: an external library dependency.
    behavior_notes = (int(BehaviorNote.HIPDNN_BEHAVIOR_NOTE_EXTERNAL_LIBRARY_DEPENDENCY),)
    plan_builder = CpuReferencePlanBuilder()
    knob_specs = knobs.GLOBAL_KNOBS


class CpuReferencePlugin(EnginePluginBase):
    name = PLUGIN_NAME
    version = PLUGIN_VERSION
    api_version = API_VERSION
    engines = [CpuReferenceEngine]
