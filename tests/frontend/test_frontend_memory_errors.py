"""Errors where they belong: a handle whose stream is a device stream makes ``build()`` run a
device engine (the first in heuristic order) and, when none accepts the graph, raise
GraphNotSupportedError with their decline reasons; a zero-size workspace (what
``torch.empty(get_workspace_size())`` gives for a workspace of 0) has no memory kind, so device
buffers with it run on the device engine.  In a child process with
``tests/frontend/plugins/fe_test_gpu_engine.py`` (a host-memory plugin named like a GPU engine,
float32 ADD / MUL / RELU_FWD only) beside the CPU reference engine."""
from __future__ import annotations

import pytest

from test_frontend_engines import run_child

pytestmark = pytest.mark.needs_cpu_engine


def test_device_stream_prefers_device_engines():
    res = run_child('''
    from hipdnn_cabi.frontend.handle import set_engine_memory_kind

    def graph(h, op="relu", name="g"):
        g = hf.Graph(handle=h, io_data_type=F32, compute_data_type=F32, name=name)
        x = g.tensor(name="x", dim=[6])
        y = getattr(g, op)(x).set_output(True).set_name("y")
        return g, x, y

    h = hf.Handle()
    g, x, y = graph(h)
    g.build()
    out["order"] = [g._engine_name_of(e) for e in g.get_engine_ids()]
    out["null_stream"] = g.engine_name
    # the CPU engine declared a device engine: with a device stream the first device engine in
    # heuristic order runs even when it is not the heuristics' first choice
    set_engine_memory_kind(GPU, "host"); set_engine_memory_kind(CPU, "device")
    h.set_stream(0x5000)
    g, x, y = graph(h)
    g.build()
    out["stream"] = g.engine_name
    set_engine_memory_kind(GPU, None); set_engine_memory_kind(CPU, None)
    g, x, y = graph(h)
    g.set_preferred_engine_name_ext(CPU).build()
    out["preferred"] = g.engine_name
    # NEG: only the CPU engine accepts; with a device stream build() says why the device
    # engines declined
    g, x, y = graph(h, "neg")
    try:
        g.build()
        out["neg"] = g.engine_name
    except hf.GraphNotSupportedError as e:
        out["neg"] = str(e)
    g, x, y = graph(h, "neg")
    g.select_engine_by_memory = False
    g.build()
    out["neg_off"] = g.engine_name
    h.set_stream(0)
    g, x, y = graph(h, "neg")
    g.build()
    out["neg_null"] = g.engine_name
    ''')
    assert res["order"][0] == "HIPDNN_CABI_FE_TEST_GPU_ENGINE", res
    cpu = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
    assert res["null_stream"] == "HIPDNN_CABI_FE_TEST_GPU_ENGINE"
    assert res["stream"] == cpu                       # the first "device" engine, index 1
    assert res["preferred"] == cpu
    msg = res["neg"]
    assert "stream 0x5000 is a device stream" in msg and "no device engine accepted" in msg, msg
    assert "HIPDNN_CABI_FE_TEST_GPU_ENGINE declined the graph" in msg
    assert f"Accepted by {cpu}" in msg
    assert res["neg_off"] == cpu and res["neg_null"] == cpu


def test_zero_size_workspace_with_device_buffers():
    res = run_child('''
    class ZeroWs:
        """torch.empty(0, device="cuda"): data pointer 0, shape (0,)."""
        __cuda_array_interface__ = {"shape": (0,), "typestr": "|u1", "data": (0, False),
                                    "version": 3, "strides": None}

    # the runtime's answer for address 0: not device memory (pageable host)
    buffers.device_pointer_kind = lambda ptr: "device" if ptr else "host"
    h = hf.Handle()
    g, x, y = relu_graph(h)
    g.set_preferred_engine_name_ext(CPU).build()      # built on the CPU engine
    g.preferred_engine_name = None                    # ... then the memory decides
    out["ws"] = g.get_workspace_size()
    xa = np.arange(-3, 3, dtype=np.float32)
    yb = np.zeros(6, np.float32)
    g.execute({x: Dev(xa), y: Dev(yb)}, ZeroWs())
    out["run"] = (g.engine_name, yb.tolist())
    try:
        g.execute({x: Dev(xa), y: Dev(yb)}, np.zeros(16, np.uint8))
        out["host_ws"] = "ran"
    except errors.BadParamError as e:
        out["host_ws"] = str(e)
    ''')
    assert res["ws"] == 0
    assert res["run"] == ["HIPDNN_CABI_FE_TEST_GPU_ENGINE", [0, 0, 0, 0, 1, 2]]
    assert "mixes host memory (workspace) and device memory" in res["host_ws"]
