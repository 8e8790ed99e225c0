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
from hipdnn_cabi.frontend.handle import (engine_memory_declared, engine_memory_kind,
                                         set_engine_memory_kind)

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
    assert engine_memory_declared(CPU_ENGINE) and not engine_memory_declared("MY_CPU_ENGINE")
    set_engine_memory_kind("MY_CPU_ENGINE", "device")
    try:
        assert engine_memory_kind("MY_CPU_ENGINE") == "device"
        assert engine_memory_declared("MY_CPU_ENGINE")
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
def test_no_engine_for_memory_is_an_error_before_execute(handle, monkeypatch):
    """Device buffers but no applicable device engine: GraphNotSupportedError before anything
    runs, naming the device engines that declined the graph and why (never the host engine's
    own pointer error); with select_engine_by_memory = False the active plan runs (the engine
    then checks its pointers itself)."""
    monkeypatch.setattr(buffers, "device_pointer_kind", lambda p: "device")
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    g = hf.Graph(handle=handle, io_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[3])
    y = g.neg(x).set_output(True)
    g.build()
    if [e for e in g.get_engine_ids() if engine_memory_kind(g._engine_name_of(e)) == "device"]:
        pytest.skip("a device engine accepts the graph here")
    assert g.engine_name == CPU_ENGINE
    xa, ya = np.arange(3, dtype=np.float32), np.zeros(3, np.float32)
    for _ in range(2):                                   # the second answer comes from the cache
        with pytest.raises(hf.GraphNotSupportedError) as e:
            g.execute({x: _CAI(xa), y: _CAI(ya)})
        msg = str(e.value)
        assert "holds device memory (tensor 'x'" in msg and "no engine that reaches device memory" in msg
        assert "declined the graph:" in msg or "no engine that reaches device memory is loaded" in msg
        assert CPU_ENGINE + " declined" not in msg and "device-only" not in msg
        assert not ya.any()
    assert g._mem_plan == {"device": None}
    g.select_engine_by_memory = False
    g.execute({x: _CAI(xa), y: _CAI(ya)})
    assert g.engine_name == CPU_ENGINE and ya.tolist() == [0, -1, -2]


# ----------------------------------------------------------------------------- knobs (§2.8)
RECORDER = '''
from hipdnn_cabi._generated.enums import AttributeName as A
from hipdnn_cabi.frontend._capi import Api


class Recorder:
    def __init__(self, lib, log):
        self._lib, self._log = lib, log
    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        def call(*args):
            if name in ("hipdnnBackendSetAttribute", "hipdnnBackendGetAttribute"):
                self._log.append([name[len("hipdnnBackend"):], A(args[1]).name[len("HIPDNN_ATTR_"):],
                                  int(args[3])])
            elif name.startswith("hipdnnBackend") and name != "hipdnnBackendDestroyDescriptor":
                self._log.append([name[len("hipdnnBackend"):], None, None])
            elif name == "hipdnnBackendDestroyDescriptor":
                self._log.append(["Destroy", None, None])
            return fn(*args)
        return call


def recording(g):
    log = []
    api = Api.__new__(Api)
    api.ffi, api.lib = g.api.ffi, Recorder(g.api.lib, log)
    real = g.api
    g.api = api
    return log, real
'''


@pytest.mark.needs_cpu_engine
def test_knobs_engine_configs_and_plan_ext():
    res = run_child(RECORDER + textwrap.dedent('''
    h = hf.Handle()
    g, x, y = relu_graph(h)
    g.build_operation_graph()
    ids = g.get_ranked_engine_ids()
    names = [g._engine_name_of(e) for e in ids]
    gpu, cpu = ids[names.index(GPU)], ids[names.index(CPU)]
    out["ranked"] = names
    out["knobs"] = [k.__dict__ for k in g.get_knobs_for_engine(gpu)]
    out["cpu_knobs"] = [k.__dict__ for k in g.get_knobs_for_engine(cpu)]
    out["configs"] = [(c.name, c.workspace_size, [k.id for k in c.knobs]) for c in g.get_engine_configs()]
    g.create_execution_plans()
    out["same_order"] = g.get_engine_ids() == ids

    # the §2.8 call sequences
    log, real = recording(g)
    g.get_knobs_for_engine(gpu)
    out["knob_log"] = log[:]
    del log[:]
    g.create_execution_plan_ext(gpu, {"FE_TEST_OFFSET": 1.5, "FE_TEST_TILE": 8, "FE_TEST_ALGO": "tiled"})
    out["plan_log"] = log[:]
    g.api = real

    g.build_plans()
    xa = np.arange(-3, 3, dtype=np.float32)
    ya = np.zeros(6, np.float32); g.execute({x: xa, y: ya})        # host arrays: explicit engine wins
    out["knobbed"] = (g.engine_name, ya.tolist())
    g.create_execution_plan_ext(gpu).build_plans()
    yb = np.zeros(6, np.float32); g.execute({x: xa, y: yb})
    out["default"] = (g.engine_name, yb.tolist())
    g.create_execution_plan_ext(cpu, []).build_plans()
    yc = np.zeros(6, np.float32); g.execute({x: xa, y: yc})
    out["cpu"] = (g.engine_name, yc.tolist())
    try:
        g.create_execution_plan_ext(gpu, {"FE_TEST_TILE": [1, 2]})
        out["bad"] = "no error"
    except errors.BadParamError as e:
        out["bad"] = str(e)
    try:
        g.create_execution_plan_ext(gpu, {"": 1})
        out["empty_id"] = "no error"
    except errors.HipdnnError as e:
        out["empty_id"] = type(e).__name__
    '''))
    assert res["ranked"][0] == GPU and CPU_ENGINE in res["ranked"]
    k = {d["id"]: d for d in res["knobs"]}
    assert list(k) == ["FE_TEST_OFFSET", "FE_TEST_TILE", "FE_TEST_ALGO"]
    assert k["FE_TEST_OFFSET"] == {"id": "FE_TEST_OFFSET", "description": "added to the output",
                                   "type": "float", "default": 0.0, "deprecated": False, "minimum": -10.0,
                                   "maximum": 10.0, "stride": None, "valid_values": [], "max_length": None}
    assert (k["FE_TEST_TILE"]["type"], k["FE_TEST_TILE"]["default"], k["FE_TEST_TILE"]["minimum"],
            k["FE_TEST_TILE"]["maximum"], k["FE_TEST_TILE"]["stride"]) == ("int", 4, 1, 64, 1)
    assert (k["FE_TEST_ALGO"]["type"], k["FE_TEST_ALGO"]["default"], k["FE_TEST_ALGO"]["valid_values"],
            k["FE_TEST_ALGO"]["max_length"]) == ("string", "direct", ["direct", "tiled"], 16)
    # the CPU reference engine offers hipDNN's global knobs
    assert [d["id"] for d in res["cpu_knobs"]] == ["global.benchmarking", "global.workspace_size_limit"]
    assert res["configs"][0] == [GPU, 0, ["FE_TEST_OFFSET", "FE_TEST_TILE", "FE_TEST_ALGO"]]
    assert [CPU_ENGINE, 0, ["global.benchmarking", "global.workspace_size_limit"]] in res["configs"]
    assert res["same_order"]

    # get_knobs_for_engine: engine descriptor, ENGINE_KNOB_INFO count query + fetch, per knob
    # TYPE, DESCRIPTION (two-call), DEPRECATED, DEFAULT_VALUE_TYPE, then by type; wrappers destroyed
    log = [tuple(e) for e in res["knob_log"]]
    gets = [(a, n) for f, a, n in log if f == "GetAttribute"]
    assert log[:5] == [("CreateDescriptor", None, None), ("SetAttribute", "ENGINE_OPERATION_GRAPH", 1),
                       ("SetAttribute", "ENGINE_GLOBAL_INDEX", 1), ("Finalize", None, None),
                       ("GetAttribute", "ENGINE_KNOB_INFO", 0)]
    assert gets[1] == ("ENGINE_KNOB_INFO", 3)
    first = [a for a, _ in gets[2:]][:9]
    assert first == ["KNOB_INFO_TYPE", "KNOB_INFO_TYPE", "KNOB_INFO_DESCRIPTION", "KNOB_INFO_DESCRIPTION",
                     "KNOB_INFO_DEPRECATED", "KNOB_INFO_DEFAULT_VALUE_TYPE", "KNOB_INFO_DEFAULT_VALUE",
                     "KNOB_INFO_MINIMUM_VALUE", "KNOB_INFO_MAXIMUM_VALUE"]
    assert ("KNOB_INFO_STRIDE", 1) in gets and ("KNOB_INFO_VALID_VALUES_INT", 0) in gets
    assert ("KNOB_INFO_STRING_MAX_LENGTH", 1) in gets and ("KNOB_INFO_VALID_VALUES_STRING", 0) in gets
    assert [f for f, _, _ in log].count("Destroy") == 3 + 1           # 3 knob wrappers + the engine

    # create_execution_plan_ext: engine descriptor, ENGINECFG + ENGINE, per knob a KNOB_CHOICE
    # (TYPE, VALUE, Finalize), KNOB_CHOICES (n = 3), Finalize(cfg), EXECUTION_PLAN created
    plog = [tuple(e) for e in res["plan_log"]]
    steps = [(f, a, n) for f, a, n in plog if f != "Destroy"]
    choice = [("CreateDescriptor", None, None), ("SetAttribute", "KNOB_CHOICE_KNOB_TYPE", None),
              ("SetAttribute", "KNOB_CHOICE_KNOB_VALUE", None), ("Finalize", None, None)]
    norm = [(f, a, None if a and a.startswith("KNOB_CHOICE") else n) for f, a, n in steps]
    assert norm == [("CreateDescriptor", None, None), ("SetAttribute", "ENGINE_OPERATION_GRAPH", 1),
                    ("SetAttribute", "ENGINE_GLOBAL_INDEX", 1), ("Finalize", None, None),
                    ("CreateDescriptor", None, None), ("SetAttribute", "ENGINECFG_ENGINE", 1)] + \
        choice * 3 + [("SetAttribute", "ENGINECFG_KNOB_CHOICES", 3), ("Finalize", None, None),
                      ("CreateDescriptor", None, None)]
    values = [n for f, a, n in steps if a == "KNOB_CHOICE_KNOB_VALUE"]
    assert values == [1, 1, len("tiled")]                             # DOUBLE 1, INT64 1, CHAR len

    ref = [0, 0, 0, 0, 1, 2]
    assert res["knobbed"] == [GPU, [v + 1.5 for v in ref]]            # the knob reached the engine
    assert res["default"] == [GPU, ref]
    assert res["cpu"] == [CPU_ENGINE, ref]
    assert "must be int, float or str" in res["bad"]
    assert res["empty_id"] == "BadParamError"


@pytest.mark.needs_cpu_engine
def test_knobs_in_process(handle):
    """In process: the CPU reference engine offers hipDNN's global knobs and nothing else; an
    engine config with no knob settings plans and runs."""
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    g = hf.Graph(handle=handle, io_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[4])
    y = g.neg(x).set_output(True)
    g.build_operation_graph()
    ids = g.get_ranked_engine_ids()
    cfgs = g.get_engine_configs()
    assert [c.engine_id for c in cfgs] == ids
    cpu = next(c.engine_id for c in cfgs if c.name == CPU_ENGINE)
    assert [k.id for k in g.get_knobs_for_engine(cpu)] == ["global.benchmarking",
                                                           "global.workspace_size_limit"]
    g.create_execution_plan_ext(cpu, {}).build_plans()
    ya = np.zeros(4, np.float32)
    g.execute({x: np.arange(4, dtype=np.float32), y: ya})
    assert ya.tolist() == [0, -1, -2, -3] and g.engine_name == CPU_ENGINE
    with pytest.raises(errors.BadParamError, match="build_operation_graph"):
        hf.Graph(handle=handle).get_knobs_for_engine(cpu)
