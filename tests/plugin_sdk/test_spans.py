"""Tensors no engine can address are declined when engines are asked for
applicable ids (SDK span checks for every Python engine, CPU reference, GPU engine analysis on
the CPU, the backend C API end to end), with a logged reason; execute never surfaces a raw Python
exception text."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hipdnn_cabi.backend import graph_fb
from hipdnn_cabi.plugin_sdk import parse_graph, spans
from hipdnn_cabi.plugin_sdk.errors import INTERNAL_ERROR, NOT_APPLICABLE, PluginError
from hipdnn_cabi.schemas._generated.schema_table import ENUMS, UNIONS

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FLOAT = dict(ENUMS["DataType"][1])["FLOAT"]
RELU = dict(ENUMS["PointwiseMode"][1])["RELU_FWD"]
PW = {m[2]: i for i, m in UNIONS["NodeAttributes"].items() if i}["PointwiseAttributes"]
BIG = 2 ** 62


def relu_graph(xdims=(4, 8), xstrides=(8, 1), ydims=None, ystrides=None, yvirtual=False):
    ydims = list(ydims or xdims)
    ystrides = list(ystrides) if ystrides is not None else [ydims[1], 1]
    ts = [{"uid": 1, "name": "x", "data_type": FLOAT, "dims": list(xdims),
           "strides": list(xstrides)},
          {"uid": 2, "name": "y", "data_type": FLOAT, "dims": ydims, "strides": ystrides,
           "virtual": yvirtual}]
    nodes = [{"name": "relu", "compute_data_type": FLOAT,
              "attributes": (PW, {"operation": RELU, "in_0_tensor_uid": 1,
                                  "out_0_tensor_uid": 2})}]
    if yvirtual:
        ts.append({"uid": 3, "name": "z", "data_type": FLOAT, "dims": ydims, "strides": ystrides})
        nodes.append({"name": "relu2", "compute_data_type": FLOAT,
                      "attributes": (PW, {"operation": RELU, "in_0_tensor_uid": 2,
                                          "out_0_tensor_uid": 3})})
    return graph_fb.build("Graph", {"name": "spans", "compute_data_type": FLOAT,
                                    "tensors": ts, "nodes": nodes})


UNADDRESSABLE = {
    "offset_overflows_int64": dict(xstrides=(BIG, 1)),                    # the case
    "negative_offset_overflows": dict(xstrides=(-BIG, 1)),
    "byte_offset_overflows": dict(xstrides=(2 ** 61, 1)),                 # 3*2^61 * 4 bytes
    "span_beyond_address_space": dict(xstrides=(2 ** 47, 1)),             # 3*2^47 * 4 > 2^48
    "element_count_overflows": dict(xdims=(2 ** 32, 2 ** 32), xstrides=(0, 0),
                                    ydims=(2 ** 32, 2 ** 32), ystrides=(0, 0)),
    "huge_virtual": dict(xdims=(2 ** 30, 2 ** 30), xstrides=(0, 0), ydims=(2 ** 30, 2 ** 30),
                         ystrides=(2 ** 30, 1), yvirtual=True),
}


# ------------------------------------------------------------------------- the helper itself
class _T:
    def __init__(self, dims, strides, dtype=FLOAT, virtual=False, uid=7):
        self.dims, self.strides, self.dtype, self.virtual, self.uid = dims, strides, dtype, virtual, uid


@pytest.mark.parametrize("dims,strides,ok", [
    ((4, 8), (8, 1), True),
    ((4, 8), (-8, 1), True),                      # negative strides are addressable
    ((2, 0), (BIG, BIG), True),                   # empty: touches nothing
    ((), (), True),                               # a scalar
    ((4, 8), (BIG, 1), False),
    ((4, 8), (-BIG, 1), False),
    ((3,), (2 ** 62 + 1,), False),                # 2 * stride overflows
    ((4, 8), (2 ** 44, 1), True),                 # 3 * 2^44 * 4 bytes < 2^48
    ((4, 8), (2 ** 47, 1), False),
    ((-1, 8), (8, 1), False),
    ((4, 8), (1,), False),
])
def test_tensor_span_problem(dims, strides, ok):
    why = spans.tensor_span_problem(_T(dims, strides))
    assert (why is None) == ok, why
    if not ok:
        assert "tensor uid 7" in why


def test_element_extent_matches_numpy_bounds():
    assert spans.element_extent((4, 8), (8, 1)) == (0, 31)
    assert spans.element_extent((4, 8), (-8, 2)) == (-24, 14)
    assert spans.element_extent((0, 8), (8, 1)) == (0, -1)


# ------------------------------------------------------------------------- the engines
def _cpu_plugin():
    from hipdnn_cabi.plugin_sdk.loader import resolve
    return resolve(os.path.join(ROOT, "engine_plugins", "cpu_reference"))


@pytest.mark.parametrize("case", sorted(UNADDRESSABLE))
def test_cpu_reference_declines_with_a_logged_reason(case):
    from engine_plugins.cpu_reference import engine as cpu
    g = parse_graph(relu_graph(**UNADDRESSABLE[case]))
    a = cpu.analyse(g)
    assert not a.ok and "tensor uid" in a.reason, a.reason
    plugin = _cpu_plugin()
    logged = []
    plugin.log_callback, plugin.log_level = (lambda s, m: logged.append((s, m))), 0
    try:
        c = plugin.create_container()
        assert c.get_applicable_engine_ids(g) == []
        assert any("declines the graph" in m and "tensor uid" in m for _, m in logged), logged
        eng = plugin.engine_manager.engines[0]
        from hipdnn_cabi.plugin_sdk import parse_engine_config
        sys.path.insert(0, os.path.join(ROOT, "tests", "cpu_reference"))
        from engine_testutil import engine_config
        cfg = parse_engine_config(engine_config(eng.id))
        with pytest.raises(PluginError) as ei:    # building a plan anyway: NOT_APPLICABLE + why
            c.create_execution_context(cfg, g)
        assert ei.value.status == NOT_APPLICABLE and "tensor uid" in ei.value.message
    finally:
        plugin.log_callback, plugin.log_level = None, 4


def test_cpu_reference_still_accepts_addressable_strides():
    from engine_plugins.cpu_reference import engine as cpu
    assert cpu.analyse(parse_graph(relu_graph(xstrides=(-8, 1)))).ok
    assert cpu.analyse(parse_graph(relu_graph(xstrides=(2 ** 40, 1)))).ok


@pytest.mark.parametrize("case", sorted(UNADDRESSABLE))
def test_gpu_engine_analysis_declines_on_cpu(case):
    """The GPU engine's graph analysis needs no device."""
    from engine_plugins.hip_kernels import engine as gpu
    a = gpu.analyse(parse_graph(relu_graph(**UNADDRESSABLE[case])))
    assert not a.ok and "tensor uid" in a.reason, a.reason
    assert gpu.analyse(parse_graph(relu_graph())).ok


def test_every_python_engine_gets_the_sdk_check():
    """A third-party Python engine whose plan builder accepts everything is still protected."""
    from hipdnn_cabi.plugin_sdk import EngineBase, EnginePluginBase, PlanBuilderBase

    class Yes(PlanBuilderBase):
        def is_applicable(self, handle, graph):
            return True

    class E(EngineBase):
        name = "SPAN_TEST_ENGINE"
        plan_builder = Yes()

    p = EnginePluginBase(name="span_test", engines=[E])
    c = p.create_container()
    assert c.get_applicable_engine_ids(parse_graph(relu_graph())) == [E().id]
    assert c.get_applicable_engine_ids(parse_graph(relu_graph(xstrides=(BIG, 1)))) == []


def test_cpu_execute_failure_is_an_engine_message_not_a_python_error():
    from engine_plugins.cpu_reference import engine as cpu
    g = parse_graph(relu_graph())
    plan = cpu.GraphPlan(g, cpu.analyse(g))

    class Boom:
        inputs, outputs = [1], [2]

        def run(self, env):
            raise OverflowError("cannot fit 'int' into an index-sized integer")
    plan.nodes = [Boom()]
    x = np.zeros(32, np.float32)
    from hipdnn_cabi.plugin_sdk import DeviceBuffers
    with pytest.raises(PluginError) as ei:
        plan.execute(None, DeviceBuffers({1: x.ctypes.data, 2: x.ctypes.data}), 0)
    assert ei.value.status == INTERNAL_ERROR
    assert "cannot fit" not in ei.value.message and cpu.ENGINE_NAME in ei.value.message


# ------------------------------------------------------------------------- through the C API
E2E = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{graph!r}, {plugins!r}]
    from hipdnn_cabi import capi
    ffi, lib = capi.load()
    from gutil import C
    import pyapi
    c, L = C(ffi, lib), lib
    msgs = []
    @ffi.callback("void(void*, hipdnnSeverity_t, const char*)")
    def cb(user, sev, msg):
        msgs.append(ffi.string(msg).decode())
    user = ffi.new("int*")
    assert lib.hipdnnSetUserLogCallback_ext(cb, L.HIPDNN_SEV_INFO, L.HIPDNN_LOG_CALLBACK_SYNC, user) == 0
    assert lib.hipdnnBackendSetGlobalLogLevel_ext(L.HIPDNN_SEV_INFO) == 0
    h = c.handle()
    def tensor(uid, dims, strides):
        t = c.create(L.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
        c.ok(c.set_i64(t, L.HIPDNN_ATTR_TENSOR_UNIQUE_ID, uid))
        c.ok(c.set_enum(t, L.HIPDNN_ATTR_TENSOR_DATA_TYPE, L.HIPDNN_TYPE_DATA_TYPE, L.HIPDNN_DATA_FLOAT))
        c.ok(c.set_i64v(t, L.HIPDNN_ATTR_TENSOR_DIMENSIONS, dims))
        c.ok(c.set_i64v(t, L.HIPDNN_ATTR_TENSOR_STRIDES, strides))
        c.ok(L.hipdnnBackendFinalize(t))
        return t
    out = {{}}
    for name, xs in (("good", [8, 1]), ("bad", [2**62, 1])):
        x, y = tensor(1, [4, 8], xs), tensor(2, [4, 8], [8, 1])
        relu = c.create(L.HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
        c.ok(c.set_desc(relu, L.HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, [x]))
        c.ok(c.set_desc(relu, L.HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, [y]))
        c.ok(c.set_enum(relu, L.HIPDNN_ATTR_POINTWISE_MODE, L.HIPDNN_TYPE_POINTWISE_MODE,
                        L.HIPDNN_POINTWISE_RELU_FWD))
        c.ok(L.hipdnnBackendFinalize(relu))
        g = c.create(L.HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
        c.ok(c.set_desc(g, L.HIPDNN_ATTR_OPERATIONGRAPH_OPS, [relu]))
        c.ok(c.set_handle(g, h))
        c.ok(L.hipdnnBackendFinalize(g))
        del msgs[:]
        st, cfgs = pyapi.heuristic_configs(g)
        out[name] = dict(st=st, n=len(cfgs), why=[m for m in msgs if "declines the graph" in m])
    print(json.dumps(out))
""")


def test_backend_offers_no_engine_for_unaddressable_tensors():
    code = E2E.format(graph=os.path.join(ROOT, "tests", "graph"),
                      plugins=os.path.join(ROOT, "tests", "plugins"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["good"]["n"] >= 1, out                      # the CPU reference runs it
    assert out["bad"]["st"] == 0 and out["bad"]["n"] == 0, out
    assert any("CPU_REFERENCE" in m and "overflow int64" in m for m in out["bad"]["why"]), out
