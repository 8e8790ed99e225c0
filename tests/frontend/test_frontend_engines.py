"""Engine choice from where the memory lives; knobs; engine configs.

The multi-engine tests run in a child process that adds ``tests/frontend/plugins`` to the plugin
paths (hipdnnSetEnginePluginPaths_ext, ADDITIVE): there ``HIPDNN_CABI_FE_TEST_GPU_ENGINE``, a
host-memory Python plugin with knobs, stands in for a GPU engine next to the CPU reference engine.
Device memory is stood in for by objects exposing ``__cuda_array_interface__`` (or DLPack with a
CUDA device type) over host memory, with the frontend's pointer probe monkeypatched to say
"device".
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fe_util import CPU_ENGINE, ROOT
from hipdnn_cabi import errors
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.frontend import buffers
from hipdnn_cabi.frontend.handle import engine_memory_kind, set_engine_memory_kind

PLUGDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins")
GPU = "HIPDNN_CABI_FE_TEST_GPU_ENGINE"

PRELUDE = f'''
import json, sys
import numpy as np
from hipdnn_cabi import errors
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.frontend import buffers
hf.set_engine_plugin_paths([{PLUGDIR!r}])
F32 = hf.DataType.HIPDNN_DATA_FLOAT
GPU, CPU = {GPU!r}, {CPU_ENGINE!r}


class Dev:
    """Device-memory stand-in: __cuda_array_interface__ over a host array."""
    def __init__(self, a):
        self.a = a
        self.__cuda_array_interface__ = {{"shape": a.shape, "typestr": a.dtype.str, "strides": None,
                                         "data": (a.__array_interface__["data"][0], False),
                                         "version": 3}}


class DevDL:
    """Device-memory stand-in through DLPack: reports a CUDA device (kDLCUDA = 2)."""
    def __init__(self, a):
        self.a = a
    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)
    def __dlpack_device__(self):
        return (2, 0)


buffers.device_pointer_kind = lambda ptr: "device"     # the monkeypatched memory-kind probe
out = {{}}


def relu_graph(handle, name="g"):
    g = hf.Graph(handle=handle, io_data_type=F32, compute_data_type=F32, name=name)
    x = g.tensor(name="x", dim=[6])
    y = g.relu(x).set_output(True).set_name("y")
    return g, x, y
'''


def run_child(body: str, timeout=180):
    code = PRELUDE + textwrap.dedent(body) + "\nprint('RESULT=' + json.dumps(out))\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT=")][-1]
    return json.loads(line[len("RESULT="):])


# ----------------------------------------------------------------------------- classification
class _CAI:
    def __init__(self, a):
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str, "strides": None,
                                         "data": (a.__array_interface__["data"][0], False), "version": 3}


class _DL:
    def __init__(self, a, dev):
        self._a, self._dev = a, dev

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return (self._dev, 0)


def test_memory_kind_classification(monkeypatch):
    a = np.zeros(4, np.float32)
    assert buffers.memory_kind(a) == "host"
    assert buffers.memory_kind(np.float32(1)) == "host" and buffers.memory_kind(bytearray(4)) == "host"
    assert buffers.memory_kind(1234) is None                # raw address: unknown
    assert buffers.memory_kind(_DL(a, 1)) == "host"         # kDLCPU
    assert buffers.memory_kind(_DL(a, 2)) == "device"       # kDLCUDA
    assert buffers.memory_kind(_DL(a, 10)) == "device"      # kDLROCM
    assert buffers.memory_kind(_DL(a, 13)) is None          # kDLCUDAManaged: either side
    assert buffers.memory_kind(_DL(a, 3)) is None           # kDLCUDAHost (pinned)
    # __cuda_array_interface__: the pointer probe decides; without a GPU runtime it is host memory
    import hipdnn_cabi.device as device
    if not device.available():
        assert buffers.memory_kind(_CAI(a)) == "host"
    seen = []
    monkeypatch.setattr(buffers, "device_pointer_kind", lambda p: seen.append(p) or "device")
    assert buffers.memory_kind(_CAI(a)) == "device"
    assert seen == [a.__array_interface__["data"][0]]


def test_engine_memory_kind_rule():
    assert engine_memory_kind(CPU_ENGINE) == "host"
    assert engine_memory_kind("HIPDNN_CABI_HIP_KERNELS_ENGINE") == "device"
    assert engine_memory_kind("SOME_VENDOR_GEMM_ENGINE") == "device"
    assert engine_memory_kind("MY_CPU_ENGINE") == "host"
    assert engine_memory_kind(None) is None
    set_engine_memory_kind("MY_CPU_ENGINE", "device")
    try:
        assert engine_memory_kind("MY_CPU_ENGINE") == "device"
    finally:
        set_engine_memory_kind("MY_CPU_ENGINE", None)
    with pytest.raises(ValueError):
        set_engine_memory_kind("X", "gpu")


# ----------------------------------------------------------------------------- engine from memory
@pytest.mark.needs_cpu_engine
def test_engine_follows_memory():
    res = run_child('''
    h = hf.Handle()
    g, x, y = relu_graph(h)
    g.build()
    out["heur"] = [g._engine_name_of(e) for e in g.get_engine_ids()]
    out["built"] = g.engine_name
    builds = []
    orig = g._build_plan
    g._build_plan = lambda i: (builds.append(i), orig(i))[1]
    xa = np.arange(-3, 3, dtype=np.float32)
    ref = np.maximum(xa, 0).tolist()
    runs = []
    # host arrays while the plan runs on the (stand-in) GPU engine -> the CPU engine
    ya = np.zeros(6, np.float32); g.execute({x: xa, y: ya}); runs.append((g.engine_name, ya.tolist()))
    # device buffers while the plan runs on the CPU engine -> the GPU engine (already built)
    yb = np.zeros(6, np.float32); g.execute({x: Dev(xa), y: Dev(yb)}); runs.append((g.engine_name, yb.tolist()))
    yc = np.zeros(6, np.float32); g.execute({x: DevDL(xa), y: DevDL(yc)}); runs.append((g.engine_name, yc.tolist()))
    yd = np.zeros(6, np.float32); g.execute({"x": xa, "y": yd}); runs.append((g.engine_name, yd.tolist()))
    out["runs"], out["ref"], out["builds"] = runs, ref, builds
    out["kinds"] = {k: g._engine_name_of(g._engine_ids[i]) for k, i in g._mem_plan.items()}
    try:
        g.execute({x: xa, y: Dev(np.zeros(6, np.float32))})
        out["mixed"] = "no error"
    except errors.BadParamError as e:
        out["mixed"] = str(e)
    # explicit preferred engine wins over the memory rule
    g2, x2, y2 = relu_graph(h, "g2")
    g2.set_preferred_engine_name_ext(GPU).build()
    ye = np.zeros(6, np.float32); g2.execute({x2: xa, y2: ye}); out["pinned"] = (g2.engine_name, ye.tolist())
    # switch off
    g3, x3, y3 = relu_graph(h, "g3")
    g3.select_engine_by_memory = False
    g3.build(); first = g3.engine_name
    g3.execute({x3: xa, y3: np.zeros(6, np.float32)}); out["off"] = (first, g3.engine_name)
    ''')
    assert res["heur"][0] == GPU and CPU_ENGINE in res["heur"], res
    assert res["built"] == GPU
    names = [n for n, _ in res["runs"]]
    assert names == [CPU_ENGINE, GPU, GPU, CPU_ENGINE], res
    assert all(v == res["ref"] for _, v in res["runs"])
    assert len(res["builds"]) == 1          # the CPU plan built once; the GPU plan reused (cached)
    assert res["kinds"] == {"host": CPU_ENGINE, "device": GPU}
    assert "mixes host memory" in res["mixed"]
    assert res["pinned"] == [GPU, res["ref"]]
    assert res["off"] == [GPU, GPU]


@pytest.mark.needs_cpu_engine
def test_deserialized_plan_follows_memory():
    res = run_child('''
    h = hf.Handle()
    g, x, y = relu_graph(h)
    g.set_preferred_engine_name_ext(CPU).build()
    blob = g.serialize()
    g2 = hf.Graph(handle=h).deserialize(blob)
    out["loaded"] = g2.engine_name
    xa = np.arange(-3, 3, dtype=np.float32)
    ya = np.zeros(6, np.float32); g2.execute({"x": xa, "y": ya}); out["host"] = (g2.engine_name, ya.tolist())
    yb = np.zeros(6, np.float32); g2.execute({"x": Dev(xa), "y": Dev(yb)}); out["dev"] = (g2.engine_name, yb.tolist())
    yc = np.zeros(6, np.float32); g2.execute({"x": xa, "y": yc}); out["back"] = (g2.engine_name, yc.tolist())
    ''')
    ref = [0, 0, 0, 0, 1, 2]
    assert res["loaded"] == CPU_ENGINE
    assert res["host"] == [CPU_ENGINE, ref] and res["dev"] == [GPU, ref] and res["back"] == [CPU_ENGINE, ref]


@pytest.mark.needs_cpu_engine
def test_no_engine_for_memory_keeps_plan(handle, monkeypatch):
    """Device buffers but no applicable device engine: the active plan runs (the engine checks
    its pointers itself)."""
    monkeypatch.setattr(buffers, "device_pointer_kind", lambda p: "device")
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    g = hf.Graph(handle=handle, io_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[3])
    y = g.neg(x).set_output(True)
    g.build()
    assert g.engine_name == CPU_ENGINE
    xa, ya = np.arange(3, dtype=np.float32), np.zeros(3, np.float32)
    g.execute({x: _CAI(xa), y: _CAI(ya)})
    assert g.engine_name == CPU_ENGINE and ya.tolist() == [0, -1, -2]
    assert g._mem_plan == {"device": None}
