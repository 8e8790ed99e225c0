"""Helpers for the CPU reference *engine* tests: op-graph FlatBuffers built from dicts
(hipdnn_cabi.backend.graph_fb), host buffers laid out by hand (NCHW / NHWC / any permutation),
and two ways to run a graph:

* :func:`run_inprocess` - the plugin object directly (plugin SDK classes, no C);
* :class:`CabiBatch` - many cases through the plugin C ABI in ONE subprocess
  (drive_engine.py: load_python_plugin -> slot function pointers -> backend trampolines).

Reference values are always computed by the tests themselves (float64 formulas on the
quantised inputs), never with the engine's kernels.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from hipdnn_cabi.backend import graph_fb
from hipdnn_cabi.schemas._generated.schema_table import ENUMS, UNIONS

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLUGIN_DIR = os.path.join(ROOT, "engine_plugins", "cpu_reference")
ENGINE_NAME = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"

FB = {e: {n: v for n, v in ENUMS[e][1]} for e in
      ("DataType", "PointwiseMode", "ConvMode", "ReductionMode", "NormFwdPhase")}
UNION = {m[2]: i for i, m in UNIONS["NodeAttributes"].items() if i}
TV = {"FLOAT": 1, "HALF": 2, "BFLOAT16": 3, "INT32": 5, "DOUBLE": 6, "INT64": 7}

STORAGE = {"FLOAT": np.float32, "DOUBLE": np.float64, "HALF": np.float16, "BFLOAT16": np.uint16,
           "INT8": np.int8, "UINT8": np.uint8, "INT32": np.int32, "INT64": np.int64,
           "BOOLEAN": np.bool_}
# relative tolerance per output type
TOL = {"FLOAT": 1e-5, "DOUBLE": 1e-12, "HALF": 2e-3, "BFLOAT16": 1.6e-2}


# --------------------------------------------------------------------------- quantisation
def bf16_bits(a):
    """float -> bf16 bit patterns, round to nearest even (integer maths, independent)."""
    f = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    up = ((u & 0xFFFF) > 0x8000) | (((u & 0xFFFF) == 0x8000) & (((u >> 16) & 1) == 1))
    return ((u >> 16) + up.astype(np.uint64)).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def quantize(a, t):
    a = np.asarray(a, dtype=np.float64)
    if t == "BFLOAT16":
        return bf16_value(bf16_bits(a))
    if t == "BOOLEAN":
        return (a != 0).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):   # out-of-range inputs are deliberate
        return a.astype(STORAGE[t]).astype(np.float64)


def encode(a, t):
    a = np.asarray(a, dtype=np.float64)
    if t == "BFLOAT16":
        return bf16_bits(a)
    if t == "BOOLEAN":
        return a != 0
    with np.errstate(invalid="ignore", over="ignore"):   # out-of-range inputs are deliberate
        return a.astype(STORAGE[t])


def decode(m, t):
    if t == "BFLOAT16":
        return bf16_value(m)
    return np.asarray(m).astype(np.float64)


# --------------------------------------------------------------------------- tensors
def order_for(ndim, lay):
    """Memory order (outermost first) of the logical dims for a layout name."""
    if lay == "nhwc" and ndim >= 3:
        return [0] + list(range(2, ndim)) + [1]
    if isinstance(lay, (list, tuple)):
        return list(lay)
    return list(range(ndim))


def strides_for(dims, lay):
    order = order_for(len(dims), lay)
    st = [0] * len(dims)
    s = 1
    for ax in reversed(order):
        st[ax] = s
        s *= max(int(dims[ax]), 1)
    return st


class Tensor:
    """A graph tensor plus (for non-virtual ones) its host buffer."""

    def __init__(self, uid, dims, dtype="FLOAT", lay="nchw", virtual=False, value=None,
                 runtime=False, strides=None):
        self.uid, self.dims, self.dtype, self.lay = uid, list(dims), dtype, lay
        self.virtual, self.value, self.runtime = virtual, value, runtime
        self.strides = list(strides) if strides is not None else strides_for(dims, lay)
        self.buf = None

    def fb(self):
        d = {"uid": self.uid, "name": f"t{self.uid}", "data_type": FB["DataType"].get(
            self.dtype, 0), "dims": self.dims, "strides": self.strides}
        if self.virtual:
            d["virtual"] = True
        if self.value is not None:
            d["value"] = (TV[self.dtype], {"value": self.value})
        if self.runtime:
            d["is_runtime_pass_by_value"] = True
        return d

    # memory order helpers
    def _mem_shape(self):
        return [self.dims[a] for a in order_for(len(self.dims), self.lay)]

    def set(self, values):
        """Store float64 logical values (quantised to the type) into a fresh buffer."""
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), self.dims)
        mem = np.transpose(values, order_for(len(self.dims), self.lay))
        self.buf = np.ascontiguousarray(encode(mem, self.dtype))
        return quantize(values, self.dtype)

    def alloc(self, fill=np.nan):
        mem = np.full(self._mem_shape(), fill, dtype=np.float64)
        self.buf = np.ascontiguousarray(encode(mem, self.dtype)) if self.dtype != "BOOLEAN" \
            else np.zeros(self._mem_shape(), np.bool_)
        return self

    def get(self, buf=None):
        """Logical float64 values read back from the buffer."""
        m = self.buf if buf is None else buf
        m = np.asarray(m).reshape(self._mem_shape())
        inv = np.argsort(order_for(len(self.dims), self.lay))
        return np.transpose(decode(m, self.dtype), inv)


def node(kind, attrs, compute="FLOAT", name="n"):
    return {"name": name, "compute_data_type": FB["DataType"][compute],
            "attributes": (UNION[kind], attrs)}


def graph_bytes(tensors, nodes, compute="FLOAT"):
    g = {"name": "cpuref_test", "compute_data_type": FB["DataType"][compute],
         "tensors": [t.fb() for t in tensors], "nodes": nodes}
    return graph_fb.build("Graph", g)


def pw(mode, in0, out, in1=None, in2=None, compute="FLOAT", **params):
    a = {"operation": FB["PointwiseMode"][mode], "in_0_tensor_uid": in0, "out_0_tensor_uid": out}
    if in1 is not None:
        a["in_1_tensor_uid"] = in1
    if in2 is not None:
        a["in_2_tensor_uid"] = in2
    a.update(params)
    return node("PointwiseAttributes", a, compute, name=f"pw_{mode}")


def conv_attrs(kind, a, b, o, pre, post, stride, dil, mode="CROSS_CORRELATION"):
    roles = {"ConvolutionFwdAttributes": ("x", "w", "y"),
             "ConvolutionBwdAttributes": ("dy", "w", "dx"),
             "ConvolutionWrwAttributes": ("x", "dy", "dw")}[kind]
    d = {f"{r}_tensor_uid": u for r, u in zip(roles, (a, b, o))}
    d.update(pre_padding=list(pre), post_padding=list(post), stride=list(stride),
             dilation=list(dil), conv_mode=FB["ConvMode"][mode])
    return d


# --------------------------------------------------------------------------- in-process run
_plugin = None


def plugin():
    global _plugin
    if _plugin is None:
        from hipdnn_cabi.plugin_sdk.loader import resolve
        _plugin = resolve(PLUGIN_DIR)
    return _plugin


def applicable(gbytes) -> bool:
    from hipdnn_cabi.plugin_sdk import parse_graph
    c = plugin().create_container()
    return bool(c.get_applicable_engine_ids(parse_graph(gbytes)))


def run_inprocess(gbytes, tensors, extra=None):
    """Execute through the SDK container; buffers are the tensors' numpy buffers."""
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, parse_engine_config, parse_graph
    from hipdnn_cabi.plugin_sdk import engine_id_of
    g = parse_graph(gbytes)
    c = plugin().create_container()
    cfg = parse_engine_config(engine_config(engine_id_of(ENGINE_NAME)))
    ctx = c.create_execution_context(cfg, g)
    m = {t.uid: t.buf.ctypes.data for t in tensors if t.buf is not None}
    m.update(extra or {})
    c.execute(ctx, 0, DeviceBuffers(m))


def engine_config(eid):
    import flatbuffers
    from hipdnn_cabi.schemas._generated import EngineConfig as EC
    b = flatbuffers.Builder(64)
    EC.Start(b)
    EC.AddEngineId(b, eid)
    b.Finish(EC.End(b))
    return bytes(b.Output())


# --------------------------------------------------------------------------- C ABI batch
class CabiBatch:
    """Collects cases, runs them all through the plugin C ABI in one subprocess, then gives
    each case its output buffers and status codes back."""

    def __init__(self, tmpdir):
        self.dir = str(tmpdir)
        self.cases = []

    def add(self, gbytes, tensors, omit=()):
        i = len(self.cases)
        arrays = {"graph": np.frombuffer(gbytes, np.uint8)}
        uids = []
        for t in tensors:
            if t.buf is None or t.uid in omit:
                continue
            arrays[f"buf_{t.uid}"] = np.ascontiguousarray(t.buf).view(np.uint8).reshape(-1)
            uids.append(t.uid)
        arrays["uids"] = np.array(uids, np.int64)
        np.savez(os.path.join(self.dir, f"case_{i}.npz"), **arrays)
        self.cases.append(tensors)
        return i

    def run(self, timeout=120):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, os.path.join(HERE, "drive_engine.py"), PLUGIN_DIR,
                            self.dir, str(len(self.cases))], capture_output=True, text=True,
                           timeout=timeout, env=env)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        self.results = []
        for i, tensors in enumerate(self.cases):
            with open(os.path.join(self.dir, f"result_{i}.json")) as f:
                meta = json.load(f)
            out = np.load(os.path.join(self.dir, f"result_{i}.npz"))
            for t in tensors:
                k = f"buf_{t.uid}"
                if t.buf is not None and k in out.files:
                    t.buf = out[k].view(t.buf.dtype).reshape(t.buf.shape)
            self.results.append(meta)
        return self.results
