"""The backend's execute slots call a Python plugin's adapter through the CPython API
(plugin_sdk/signatures.py EXECUTE_SLOT_C → CAdapter.execute_op_graph_ints), in process: the CPU
reference engine (a Python plugin) runs a relu graph from the frontend

* through the slot's callable (counted), with right results;
* through cffi's extern "Python" dispatcher when the callable is cleared, with the same results;
* an exception escaping the callable is HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR reported as the
  backend's plugin error, and the next execute works again."""
from __future__ import annotations

import numpy as np
import pytest

from hipdnn_cabi import frontend as hf
from hipdnn_cabi.errors import HipdnnError
from hipdnn_cabi.plugin_sdk import slots

F32 = hf.DataType.HIPDNN_DATA_FLOAT


@pytest.fixture()
def relu():
    h = hf.Handle()
    g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[4, 8])
    y = g.relu(x).set_output(True)
    g.preferred_engine_name = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
    try:
        g.build()
    except HipdnnError as e:
        pytest.skip(f"the CPU reference engine is not loaded: {e}")
    xa = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    yield g, x, y, xa
    g.close()
    h.close()


def _slot_of_cpu_engine():
    for k, a in enumerate(slots.BACKEND.adapters):
        if a is not None and "HIPDNN_CABI_CPU_REFERENCE_ENGINE" in str(
                [getattr(e, "name", "") for e in getattr(a.plugin, "engines", [])]):
            return k, a
    pytest.skip("the CPU reference engine is not a Python plugin in a slot here")


def test_execute_slot_uses_the_cpython_callable_and_the_dispatcher_when_cleared(relu):
    g, x, y, xa = relu
    ya = np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    k, adapter = _slot_of_cpu_engine()
    calls = []
    real = adapter.execute_op_graph_ints

    def counting(*args):
        calls.append(args[4])
        return real(*args)
    adapter.execute_op_graph_ints = counting
    try:
        slots.set_fast_execute(k, adapter)
        ya[:] = -1
        g.execute({x: xa, y: ya})
        assert calls == [2]                       # the slot called it: two device buffers
        np.testing.assert_array_equal(ya, np.maximum(xa, 0))
        slots.set_fast_execute(k, None)           # cffi's extern "Python" dispatcher
        ya[:] = -1
        g.execute({x: xa, y: ya})
        assert calls == [2]
        np.testing.assert_array_equal(ya, np.maximum(xa, 0))
    finally:
        del adapter.execute_op_graph_ints
        slots.set_fast_execute(k, adapter)
    ya[:] = -1
    g.execute({x: xa, y: ya})
    np.testing.assert_array_equal(ya, np.maximum(xa, 0))


def test_an_exception_escaping_the_callable_is_an_internal_error(relu):
    g, x, y, xa = relu
    ya = np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    k, adapter = _slot_of_cpu_engine()

    def broken(*args):
        raise RuntimeError("escaped")
    adapter.execute_op_graph_ints = broken
    try:
        slots.set_fast_execute(k, adapter)
        with pytest.raises(HipdnnError, match="HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR"):
            g.execute({x: xa, y: ya})
    finally:
        del adapter.execute_op_graph_ints
        slots.set_fast_execute(k, adapter)
    ya[:] = -1
    g.execute({x: xa, y: ya})
    np.testing.assert_array_equal(ya, np.maximum(xa, 0))
