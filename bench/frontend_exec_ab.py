#!/usr/bin/env python3
"""Interleaved A/B in one process: Graph.execute of an older revision (its
hipdnn_cabi/frontend/graph/execution.py, taken with `git show REV:...`) against this tree, with the
by-value lookup in C (hipdnn_cabi.frontend._fastexec) and in Python; on the Python engine also
with the execute slots' CPython callables off ("before": the old frontend through cffi's extern
"Python" dispatcher, plugin_sdk/signatures.py) and on ("old fe, new slot"); a tiny relu 4x8 float32 graph
on the C sample engine (engine_plugins/c_sample: a host .so plugin, so the plugin's own time is
~0.1 µs) or on an empty Python-plugin engine (--engine py: a plan.execute that does nothing, the
C -> Python plugin crossing a GPU engine pays).

Rows (µs per call, this thread's CPU time, min / median of 7 interleaved rounds): numpy arrays,
the same objects; new numpy arrays each call; torch-like stand-ins (data_ptr(), dtype, shape,
stride(), device) new each call; with torch importable, torch CPU tensors (same objects; new view
objects each call).  Baselines: building each call's dict alone.

Usage: python bench/frontend_exec_ab.py [--old REV] [--engine c|py]
"""
import argparse
import importlib.util
import statistics
import time
import os
import subprocess
import sys
import tempfile

from python_plugin_bench import EMPTY_PLUGIN   # the empty SDK plugin (bench/ is this script's dir)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--old", default="d4b67de", help="revision whose execution.py is 'old'")
ap.add_argument("--engine", default="c", choices=["c", "py"])
args = ap.parse_args()
tmp = tempfile.mkdtemp(prefix="fe_ab_")
plugdir = os.path.join(tmp, "plugins")
os.makedirs(plugdir)
subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"), f"OUT={plugdir}"],
               check=True)
with open(os.path.join(plugdir, "bench_empty_py.py"), "w") as f:
    f.write(EMPTY_PLUGIN.format(engine="HIPDNN_CABI_BENCH_EMPTY_PY", plugin="bench_empty_py"))
old_src = os.path.join(tmp, "execution_old.py")
with open(old_src, "w") as f:
    f.write(subprocess.run(["git", "-C", ROOT, "show", f"{args.old}:hipdnn_cabi/frontend/graph/execution.py"],
                           check=True, capture_output=True, text=True).stdout)
os.environ["HIPDNN_PLUGIN_DIR"] = plugdir
os.environ["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
sys.path.insert(0, ROOT)
import numpy as np
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.frontend.graph import execution as new
spec = importlib.util.spec_from_file_location("hipdnn_cabi.frontend.graph.execution_old", old_src)
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
try:
    import torch
except ImportError:
    torch = None
class OldGraph(hf.Graph):
    pass
for n, f in vars(old.ExecutionMixin).items():
    if callable(f) and not n.startswith("__"):
        setattr(OldGraph, n, f)
OldGraph._XCACHE_MAX = 8
class PyGraph(hf.Graph):
    def execute(self, variant_pack, workspace=None, handle=None):
        fc = self.__dict__.get("_fcache")
        if fc:
            st = new._py_fast_execute(self, fc, variant_pack, workspace, handle)
            if st is not None:
                if st:
                    self.api.check(st, "hipdnnBackendExecute")
                return self
        return self._execute_cached(variant_pack, workspace, handle)
class Tensor:   # a torch stand-in: cheap attributes, like torch's
    __module__ = "torch"
    def __init__(self, arr):
        self._p = arr.__array_interface__["data"][0]
        self.dtype, self.shape, self.device, self.requires_grad = arr.dtype, arr.shape, "cpu", False
        self._st = tuple(s // arr.itemsize for s in arr.strides)
    def data_ptr(self): return self._p
    def stride(self): return self._st
F32 = hf.DataType.HIPDNN_DATA_FLOAT
eng = {"c": "HIPDNN_CABI_C_SAMPLE_ENGINE", "py": "HIPDNN_CABI_BENCH_EMPTY_PY"}[args.engine]
h = hf.Handle()
def mk(cls):
    g = cls(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[4, 8]); y = g.relu(x).set_output(True)
    g.preferred_engine_name = eng
    g.build()
    return g, x, y
xa = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32); ya = np.empty((4, 8), np.float32)
from hipdnn_cabi.plugin_sdk import slots


def sdk_slot_callables(on):
    """The execute slots' CPython callables on (this tree) or off (cffi's dispatcher, as before)."""
    for k, a in enumerate(slots.BACKEND.adapters):
        if a is not None:
            slots.set_fast_execute(k, a if on else None)


# label -> (graph class, C lookup, slot callables)
SETUPS = {"before": (OldGraph, True, False), "old fe, new slot": (OldGraph, True, True),
          "new (C)": (hf.Graph, True, True), "new (Python)": (PyGraph, False, True)}
if args.engine == "c":   # a .so plugin: no slot involved
    del SETUPS["old fe, new slot"]
    SETUPS["before"] = (OldGraph, True, True)
rows = {}
for label, (cls, c_on, slot_on) in SETUPS.items():
    new.use_c_fast_path(c_on)
    g, x, y = mk(cls)
    vp = {x: xa, y: ya}
    g.execute(vp)
    assert "EMPTY" in eng or np.array_equal(ya, np.maximum(xa, 0))
    r = {"numpy same objects": (lambda g=g, vp=vp: g.execute(vp), 20000),
         "numpy new arrays": (lambda g=g, x=x, y=y: g.execute({x: np.empty((4, 8), np.float32), y: np.empty((4, 8), np.float32)}), 5000),
         "torch-like new objects": (lambda g=g, x=x, y=y: g.execute({x: Tensor(xa), y: Tensor(ya)}), 20000)}
    if torch is not None:
        xt, yt = torch.from_numpy(xa), torch.from_numpy(ya)
        vt = {x: xt, y: yt}
        r["torch same tensors"] = (lambda g=g, vt=vt: g.execute(vt), 20000)
        r["torch new tensor objects"] = (lambda g=g, x=x, y=y, xt=xt, yt=yt: g.execute({x: xt[:], y: yt[:]}), 20000)
    rows[label] = r
tx_, ty_ = (torch.from_numpy(xa), torch.from_numpy(ya)) if torch is not None else (None, None)
base = {"(making the two stand-ins)": (lambda: {1: Tensor(xa), 2: Tensor(ya)}, 20000),
        "(making two numpy arrays)": (lambda: {1: np.empty((4, 8), np.float32), 2: np.empty((4, 8), np.float32)}, 20000)}
if torch is not None:
    base["(two torch views xt[:])"] = (lambda: {1: tx_[:], 2: ty_[:]}, 20000)
rows_base = base
got = {}
for rnd in range(7):
    for label, r in rows.items():
        new.use_c_fast_path(SETUPS[label][1])
        sdk_slot_callables(SETUPS[label][2])
        for name, (fn, n) in r.items():
            for _ in range(100): fn()
            c0 = time.thread_time()
            for _ in range(n): fn()
            got.setdefault((name, label), []).append((time.thread_time() - c0) / n * 1e6)
for rnd in range(5):
    for name, (fn, n) in rows_base.items():
        c0 = time.thread_time()
        for _ in range(n): fn()
        got.setdefault(name, []).append((time.thread_time() - c0) / n * 1e6)
print(f"engine {eng}; us per call (thread CPU time), min / median of 7 interleaved rounds")
sdk_slot_callables(True)
new.use_c_fast_path(True)
names = list(rows["before"])
print("%-26s" % "" + "".join(" %16s" % lab for lab in rows))
for name in names:
    print("%-26s" % name + "".join(" %7.2f / %6.2f" % (min(got[(name, l)]), statistics.median(got[(name, l)])) for l in rows))
for name in rows_base:
    print("%-26s %7.2f (baseline: building the dict alone)" % (name, min(got[name])))
if torch is not None:
    bex = None
    t0 = time.thread_time()
    for _ in range(20000): torch.clamp_min(xt, 0, out=yt)
    print("torch.clamp_min(out=) CPU op call: %.2f us" % ((time.thread_time() - t0) / 20000 * 1e6))
