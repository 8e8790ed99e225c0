"""The graph corpus the conformance checks feed to a plugin, with an independent numpy reference.

Each :class:`CorpusGraph` is a hipDNN ``Graph`` FlatBuffer (built with the generated schema
classes) plus a reference evaluator.  ``runnable`` graphs are ordinary graphs a plugin may or may
not support; ``degenerate`` graphs are well-formed graphs no engine can run (no nodes, an unknown
node kind, a dangling tensor uid) — a plugin must answer them with SUCCESS and no (or known) ids.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import flatbuffers
import numpy as np

from ..backend import graph_fb
from ..plugin_sdk import DeviceBuffers, engine_id_of, parse_engine_config, parse_graph
from ..plugin_sdk.loader import resolve
from ..schemas._generated import (DeviceProperties, EngineApiVersion, EngineConfig, Graph,
                                  MatmulAttributes, Node, PointwiseAttributes, TensorAttributes)
from ..schemas.tensor_value import add_tensor_value, create_tensor_value

FLOAT32_VALUE = 1    # TensorValue union index of Float32Value

FLOAT, HALF = 1, 2
NP_DTYPE = {FLOAT: np.float32, HALF: np.float16}
# per-type tolerance (rtol, atol)
TOLERANCE = {FLOAT: (1e-5, 1e-6), HALF: (2e-3, 2e-3)}
PW, MATMUL, UNKNOWN_KIND = 2, 9, 200
ADD, MUL, RELU_FWD = 2, 30, 34


@dataclass
class T:
    uid: int
    dims: list
    dtype: int = FLOAT
    virtual: bool = False
    value: Optional[float] = None    # a by-value scalar (baked constant or runtime default)
    runtime: bool = False             # is_runtime_pass_by_value (RFC 0016)

    @property
    def strides(self):
        s, out = 1, []
        for d in reversed(self.dims):
            out.append(s)
            s *= d
        return list(reversed(out))

    @property
    def nbytes(self):
        return int(np.prod(self.dims)) * np.dtype(NP_DTYPE[self.dtype]).itemsize


@dataclass
class Op:
    kind: int            # NodeAttributes index
    ins: tuple
    out: int
    mode: int = 0        # pointwise mode


@dataclass
class CorpusGraph:
    name: str
    tensors: list
    ops: list
    degenerate: bool = False
    seed: int = 0
    override_shape: bool = False      # Graph.is_override_shape_enabled
    min_api: Optional[tuple] = None   # Graph.min_required_engine_api_version stamp
    _bytes: bytes = field(default=b"", repr=False)

    # ------------------------------------------------------------------ FlatBuffer
    def to_bytes(self) -> bytes:
        if self._bytes:
            return self._bytes
        b = flatbuffers.Builder(1024)
        toffs = []
        for t in self.tensors:
            TensorAttributes.StartStridesVector(b, len(t.dims))
            for s in reversed(t.strides):
                b.PrependInt64(s)
            strides = b.EndVector()
            TensorAttributes.StartDimsVector(b, len(t.dims))
            for d in reversed(t.dims):
                b.PrependInt64(d)
            dims = b.EndVector()
            nm = b.CreateString(f"t{t.uid}")
            voff = create_tensor_value(b, FLOAT32_VALUE, t.value) if t.value is not None else None
            TensorAttributes.Start(b)
            TensorAttributes.AddUid(b, t.uid)
            TensorAttributes.AddName(b, nm)
            TensorAttributes.AddDataType(b, t.dtype)
            TensorAttributes.AddStrides(b, strides)
            TensorAttributes.AddDims(b, dims)
            TensorAttributes.AddVirtual(b, t.virtual)
            if voff is not None:
                add_tensor_value(b, FLOAT32_VALUE, voff)
            if t.runtime:
                TensorAttributes.AddIsRuntimePassByValue(b, True)
            toffs.append(TensorAttributes.End(b))
        noffs = []
        for i, op in enumerate(self.ops):
            if op.kind == PW:
                PointwiseAttributes.Start(b)
                PointwiseAttributes.AddOperation(b, op.mode)
                PointwiseAttributes.AddIn0TensorUid(b, op.ins[0])
                if len(op.ins) > 1:
                    PointwiseAttributes.AddIn1TensorUid(b, op.ins[1])
                PointwiseAttributes.AddOut0TensorUid(b, op.out)
                attrs = PointwiseAttributes.End(b)
            elif op.kind == MATMUL:
                MatmulAttributes.Start(b)
                MatmulAttributes.AddATensorUid(b, op.ins[0])
                MatmulAttributes.AddBTensorUid(b, op.ins[1])
                MatmulAttributes.AddCTensorUid(b, op.out)
                attrs = MatmulAttributes.End(b)
            else:  # an unknown union member: an empty table behind an unknown type index
                b.StartObject(0)
                attrs = b.EndObject()
            nm = b.CreateString(f"node{i}")
            Node.Start(b)
            Node.AddName(b, nm)
            Node.AddComputeDataType(b, FLOAT)
            Node.AddAttributesType(b, op.kind)
            Node.AddAttributes(b, attrs)
            noffs.append(Node.End(b))
        Graph.StartTensorsVector(b, len(toffs))
        for o in reversed(toffs):
            b.PrependUOffsetTRelative(o)
        tv = b.EndVector()
        Graph.StartNodesVector(b, len(noffs))
        for o in reversed(noffs):
            b.PrependUOffsetTRelative(o)
        nv = b.EndVector()
        gname = b.CreateString(self.name)
        Graph.Start(b)
        Graph.AddName(b, gname)
        Graph.AddComputeDataType(b, FLOAT)
        Graph.AddTensors(b, tv)
        Graph.AddNodes(b, nv)
        if self.override_shape:
            Graph.AddIsOverrideShapeEnabled(b, True)
        if self.min_api is not None:
            Graph.AddMinRequiredEngineApiVersion(b, EngineApiVersion.CreateEngineApiVersion(b, *self.min_api))
        b.Finish(Graph.End(b))
        self._bytes = bytes(b.Output())
        return self._bytes

    # ------------------------------------------------------------------ data and reference
    def tensor(self, uid) -> T:
        return next(t for t in self.tensors if t.uid == uid)

    def io(self):
        """(inputs, outputs): non-virtual tensors read / written by the graph, in uid order."""
        produced = {op.out for op in self.ops}
        inputs = [t for t in self.tensors if not t.virtual and t.uid not in produced]
        outputs = [t for t in self.tensors if not t.virtual and t.uid in produced]
        return inputs, outputs

    def inputs(self) -> dict:
        rng = np.random.default_rng(1234 + self.seed)
        ins, _ = self.io()
        return {t.uid: rng.uniform(-2.0, 2.0, size=t.dims).astype(NP_DTYPE[t.dtype]) for t in ins}

    def reference(self, inputs: dict) -> dict:
        """Independent numpy evaluation (float64 accumulation, cast to each output's type)."""
        vals = {u: a.astype(np.float64) for u, a in inputs.items()}
        for op in self.ops:
            xs = [vals[u] for u in op.ins]
            if op.kind == PW and op.mode == ADD:
                y = xs[0] + xs[1]
            elif op.kind == PW and op.mode == MUL:
                y = xs[0] * xs[1]
            elif op.kind == PW and op.mode == RELU_FWD:
                y = np.maximum(xs[0], 0.0)
            elif op.kind == MATMUL:
                y = np.matmul(xs[0], xs[1])
            else:
                raise NotImplementedError(f"no reference for node kind {op.kind} mode {op.mode}")
            t = self.tensor(op.out)
            vals[op.out] = np.broadcast_to(y, t.dims).astype(NP_DTYPE[t.dtype]).astype(np.float64)
        _, outs = self.io()
        return {t.uid: vals[t.uid].astype(NP_DTYPE[t.dtype]) for t in outs}


def _pw(name, mode, shapes, out_shape, dtype=FLOAT, seed=0):
    ts = [T(i + 1, list(s), dtype) for i, s in enumerate(shapes)]
    out = T(len(shapes) + 1, list(out_shape), dtype)
    return CorpusGraph(name, ts + [out], [Op(PW, tuple(t.uid for t in ts), out.uid, mode)], seed=seed)


def build_corpus() -> list:
    g = [
        _pw("pw_add_f32", ADD, [[1, 7], [1, 7]], [1, 7], seed=1),
        _pw("pw_mul_f32", MUL, [[2, 3, 4], [2, 3, 4]], [2, 3, 4], seed=2),
        _pw("pw_relu_f32", RELU_FWD, [[4, 5]], [4, 5], seed=3),
        _pw("pw_add_bcast_f32", ADD, [[2, 3, 4], [1, 3, 1]], [2, 3, 4], seed=4),
        _pw("pw_mul_nchw_f32", MUL, [[2, 3, 4, 5], [2, 3, 4, 5]], [2, 3, 4, 5], seed=5),
        CorpusGraph("pw_add_relu_chain_f32",
                    [T(1, [3, 4]), T(2, [3, 4]), T(3, [3, 4], virtual=True), T(4, [3, 4])],
                    [Op(PW, (1, 2), 3, ADD), Op(PW, (3,), 4, RELU_FWD)], seed=6),
        _pw("pw_add_f16", ADD, [[1, 8], [1, 8]], [1, 8], dtype=HALF, seed=7),
        CorpusGraph("matmul_f32", [T(1, [1, 4, 3]), T(2, [1, 3, 5]), T(3, [1, 4, 5])],
                    [Op(MATMUL, (1, 2), 3)], seed=8),
        # tensor uids from 0, as hipDNN's frontend numbers them (uid 0 is a valid uid)
        CorpusGraph("pw_add_relu_uid0_f32",
                    [T(0, [3, 4]), T(1, [3, 4]), T(2, [3, 4], virtual=True), T(3, [3, 4])],
                    [Op(PW, (0, 1), 2, ADD), Op(PW, (2,), 3, RELU_FWD)], seed=9),
        CorpusGraph("pw_mul_uid0_out_f32", [T(2, [2, 5]), T(1, [2, 5]), T(0, [2, 5])],
                    [Op(PW, (2, 1), 0, MUL)], seed=10),
        # degenerate: well-formed, but nothing can run them
        CorpusGraph("degenerate_no_nodes", [T(1, [1, 4])], [], degenerate=True),
        CorpusGraph("degenerate_unknown_node_kind", [T(1, [1, 4]), T(2, [1, 4])],
                    [Op(UNKNOWN_KIND, (1,), 2)], degenerate=True),
        CorpusGraph("degenerate_dangling_uid", [T(1, [1, 4]), T(2, [1, 4])],
                    [Op(PW, (1, 77), 2, ADD)], degenerate=True),
    ]
    return g


def engine_config(engine_id: int) -> bytes:
    b = flatbuffers.Builder(64)
    EngineConfig.Start(b)
    EngineConfig.AddEngineId(b, int(engine_id))
    b.Finish(EngineConfig.End(b))
    return bytes(b.Output())


def device_properties_blob(gpu: bool = False) -> bytes:
    """A DeviceProperties FlatBuffer (file identifier "HDDP") as a host hands it to a heuristic
    plugin: the host CPU (device_id -1, as our backend describes it without a GPU) or a GPU."""
    b = flatbuffers.Builder(256)
    b.ForceDefaults(True)
    arch = b.CreateString("gfx942" if gpu else "cpu-x86_64")
    DeviceProperties.Start(b)
    DeviceProperties.AddDeviceId(b, 0 if gpu else -1)
    DeviceProperties.AddMultiProcessorCount(b, 304 if gpu else 8)
    DeviceProperties.AddTotalGlobalMem(b, (192 if gpu else 16) << 30)
    DeviceProperties.AddArchitectureName(b, arch)
    b.Finish(DeviceProperties.End(b), b"HDDP")
    return bytes(b.Output())


def write_case(workdir: str, g: CorpusGraph, engine_id: int) -> str:
    """Write graph/config/input files and the case file the driver reads; returns its path."""
    d = os.path.join(workdir, f"case_{g.name}_{engine_id & 0xFFFFFFFFFFFFFFFF:016x}")
    case = os.path.join(d, "case.txt")
    if os.path.exists(case):
        return case
    os.makedirs(d, exist_ok=True)
    lines = []
    gp = os.path.join(d, "graph.bin")
    with open(gp, "wb") as f:
        f.write(g.to_bytes())
    cp = os.path.join(d, "config.bin")
    with open(cp, "wb") as f:
        f.write(engine_config(engine_id))
    lines += [f"graph {gp}", f"config {cp}", f"engine {engine_id}"]
    ins, outs = g.io()
    data = g.inputs()
    for t in ins:
        p = os.path.join(d, f"in_{t.uid}.bin")
        with open(p, "wb") as f:
            f.write(np.ascontiguousarray(data[t.uid]).tobytes())
        lines.append(f"in {t.uid} {t.nbytes} {p}")
    for t in outs:
        lines.append(f"out {t.uid} {t.nbytes}")
    with open(case + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(case + ".tmp", case)
    return case


def decode_output(g: CorpusGraph, uid: int, hexstr: str) -> np.ndarray:
    t = g.tensor(uid)
    a = np.frombuffer(bytes.fromhex(hexstr), dtype=NP_DTYPE[t.dtype])
    return a if isinstance(t, UT) else a.reshape(t.dims)   # user graphs: memory order, flat


# ---------------------------------------------------------------------------------- runtime pass-by-value
# RFC 0016 graphs: a pointwise MUL / ADD with a [1, 1] float32 scalar operand (uid 2).  Stamped
# min_required_engine_api_version 1.2.0, as a backend stamps any graph with a runtime scalar.
SCALAR_UID = 2


def _scalar_graph(name, mode, *, value=None, runtime=True, seed=0):
    return CorpusGraph(name, [T(1, [3, 4]), T(SCALAR_UID, [1, 1], value=value, runtime=runtime), T(3, [3, 4])],
                       [Op(PW, (1, SCALAR_UID), 3, mode)], seed=seed,
                       min_api=(1, 2, 0) if runtime else None)


def pbv_corpus() -> dict:
    """name -> graph: user-supplied (flag, no value) MUL and ADD, runtime-with-default MUL (default 1.5)."""
    gs = [_scalar_graph("pbv_mul_user_f32", MUL, seed=11),
          _scalar_graph("pbv_add_user_f32", ADD, seed=12),
          _scalar_graph("pbv_mul_default_f32", MUL, value=1.5, seed=13)]
    return {g.name: g for g in gs}


# ---------------------------------------------------------------------------------- shape overrides
def override_graph() -> CorpusGraph:
    """An override-enabled float32 ADD (declared [4, 6]); stamped 1.1.0 as a backend stamps it."""
    return CorpusGraph("ovr_add_f32", [T(1, [4, 6]), T(2, [4, 6]), T(3, [4, 6])], [Op(PW, (1, 2), 3, ADD)],
                       seed=21, override_shape=True, min_api=(1, 1, 0))


def write_custom_case(workdir: str, tag: str, g: CorpusGraph, engine_id: int, inputs: dict, outputs: dict,
                      in2: dict = None, overrides=()) -> str:
    """A case with explicit buffers.  inputs/in2: {uid: bytes}; outputs: {uid: nbytes};
    overrides: [(uid, dims, strides)].  Returns the case path (written once per tag)."""
    d = os.path.join(workdir, f"case_{tag}_{engine_id & 0xFFFFFFFFFFFFFFFF:016x}")
    case = os.path.join(d, "case.txt")
    if os.path.exists(case):
        return case
    os.makedirs(d, exist_ok=True)
    gp, cp = os.path.join(d, "graph.bin"), os.path.join(d, "config.bin")
    with open(gp, "wb") as f:
        f.write(g.to_bytes())
    with open(cp, "wb") as f:
        f.write(engine_config(engine_id))
    lines = [f"graph {gp}", f"config {cp}", f"engine {engine_id}"]
    for uid, data in sorted(inputs.items()):
        p = os.path.join(d, f"in_{uid}.bin")
        with open(p, "wb") as f:
            f.write(data)
        lines.append(f"in {uid} {len(data)} {p}")
    for uid, data in sorted((in2 or {}).items()):
        p = os.path.join(d, f"in2_{uid}.bin")
        with open(p, "wb") as f:
            f.write(data)
        lines.append(f"in2 {uid} {len(data)} {p}")
    for uid, n in sorted(outputs.items()):
        lines.append(f"out {uid} {n}")
    for uid, dims, strides in overrides:
        lines.append(f"ovr {uid} {len(dims)} " + " ".join(map(str, list(dims) + list(strides))))
    with open(case + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(case + ".tmp", case)
    return case


# ---------------------------------------------------------------------------------- user graphs
# `hipdnn-cabi conform --graph FILE` adds the user's own graphs to the corpus: a hipDNN `Graph`
# FlatBuffer (.bin) or its JSON form (.json: the dict hipdnn_cabi.backend.graph_fb.build("Graph",
# d) takes, as graph_fb.read(buf, "Graph") returns it).  Inputs are random; the expected outputs
# are computed by the CPU reference engine (hipdnn_cabi.engines.cpu_reference, through the plugin
# SDK like any plugin).  Outputs are the tensors a node writes: fields marked `umd_output_tensor`
# in the schemas (hipdnn_cabi/schemas/fbs).
DOUBLE = 4
NP_DTYPE.setdefault(DOUBLE, np.float64)
TOLERANCE.setdefault(DOUBLE, (1e-12, 1e-12))
CPU_REFERENCE_MODULE = "hipdnn_cabi.engines.cpu_reference"
CPU_REFERENCE_ENGINE = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"


def _output_fields() -> dict:
    """NodeAttributes table name -> names of its output tensor-uid fields (from the .fbs files)."""
    import glob
    import re
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas", "fbs")
    out = {}
    for f in glob.glob(os.path.join(here, "*.fbs")):
        text = open(f, encoding="utf-8").read()
        for m in re.finditer(r"table\s+(\w+)[^{]*\{(.*?)\}", text, re.S):
            fields = [fm.group(1) for fm in re.finditer(r"(\w+)\s*:[^;]*?umd_output_tensor[^;]*;", m.group(2))]
            out[m.group(1)] = fields
    return out


@dataclass
class UT(T):
    """A user-graph tensor: explicit strides (memory order), span-sized buffers."""
    explicit_strides: list = field(default_factory=list)

    @property
    def strides(self):
        return self.explicit_strides

    @property
    def span(self) -> int:
        if any(d == 0 for d in self.dims):
            return 0
        return 1 + sum((d - 1) * s for d, s in zip(self.dims, self.explicit_strides))

    @property
    def nbytes(self):
        return self.span * np.dtype(NP_DTYPE[self.dtype]).itemsize


class UserGraph(CorpusGraph):
    """A graph from a file; the CPU reference engine computes the expected outputs."""

    def __init__(self, name, buf, tensors, outputs):
        super().__init__(name, tensors, [], seed=len(name))
        self._bytes = buf
        self._outputs = set(outputs)

    def io(self):
        ins = [t for t in self.tensors if not t.virtual and t.uid not in self._outputs
               and t.value is None]
        outs = [t for t in self.tensors if not t.virtual and t.uid in self._outputs]
        return ins, outs

    def inputs(self) -> dict:
        rng = np.random.default_rng(1234 + self.seed)
        ins, _ = self.io()
        return {t.uid: rng.uniform(-2.0, 2.0, size=t.span).astype(NP_DTYPE[t.dtype]) for t in ins}

    def reference(self, inputs: dict) -> dict:
        plugin = resolve(CPU_REFERENCE_MODULE)
        c = plugin.create_container()
        g = parse_graph(self._bytes)
        if not c.get_applicable_engine_ids(g):
            raise ValueError(f"graph {self.name}: the CPU reference engine cannot compute its "
                             "expected outputs (it does not support this graph)")
        cfg = parse_engine_config(engine_config(engine_id_of(CPU_REFERENCE_ENGINE)))
        ctx = c.create_execution_context(cfg, g)
        _, outs = self.io()
        bufs = {u: np.ascontiguousarray(a).copy() for u, a in inputs.items()}
        for t in outs:
            bufs[t.uid] = np.zeros(t.span, NP_DTYPE[t.dtype])
        ws = int(c.get_workspace_size_from_context(ctx))
        wsb = np.zeros(max(ws, 1), np.uint8)
        c.execute(ctx, wsb.ctypes.data if ws else 0,
                  DeviceBuffers({u: a.ctypes.data for u, a in bufs.items()}))
        return {t.uid: bufs[t.uid] for t in outs}


def _unions(o):
    """JSON has no tuples: graph_fb's union values are (type, table) pairs -> back to tuples."""
    if isinstance(o, dict):
        return {k: _unions(v) for k, v in o.items()}
    if isinstance(o, list):
        if len(o) == 2 and isinstance(o[0], (str, int)) and isinstance(o[1], dict):
            return (o[0], _unions(o[1]))
        return [_unions(v) for v in o]
    return o


def load_user_graph(path: str) -> UserGraph:
    """A UserGraph from a .bin (Graph FlatBuffer) or .json file; ValueError with the reason."""
    if path.endswith(".json"):
        import json
        with open(path, encoding="utf-8") as f:
            d = _unions(json.load(f))
        try:
            buf = graph_fb.build("Graph", d)
        except Exception as e:
            raise ValueError(f"{path}: not a Graph in JSON form: {type(e).__name__}: {e}") from None
    else:
        with open(path, "rb") as f:
            buf = f.read()
    try:
        g = parse_graph(buf)
    except Exception as e:
        raise ValueError(f"{path}: not a valid hipDNN Graph FlatBuffer: {e}") from None
    outs_by_kind = _output_fields()
    outputs = set()
    for n in g.nodes:
        for fld in outs_by_kind.get(n.kind, ()):
            u = n.attrs.get(fld)
            if isinstance(u, int) and u in g.tensors:
                outputs.add(u)
    ts = []
    for t in g.tensors.values():
        if t.dtype not in NP_DTYPE:
            raise ValueError(f"{path}: tensor uid {t.uid} has data type {t.dtype}; user graphs "
                             "support FLOAT, HALF and DOUBLE tensors")
        ts.append(UT(t.uid, list(t.dims), t.dtype, t.virtual, t.value, t.is_runtime_pass_by_value,
                     explicit_strides=list(t.strides)))
    if not outputs:
        raise ValueError(f"{path}: the graph writes no tensor")
    name = "user_" + os.path.splitext(os.path.basename(path))[0]
    return UserGraph(name, bytes(buf), ts, outputs)
