"""RFC 0016 §4.3: a setter called after build only warns; it changes neither the compiled plan nor
what execute() demands (docs/contracts.md §5)."""
import warnings

import numpy as np
import pytest

from hipdnn_cabi import frontend as fe
from hipdnn_cabi._generated.enums import DataType


def _cpu_engine_loaded(h):
    return any("CPU_REFERENCE" in e.name for e in fe.engines(h))


def test_set_as_runtime_parameter_after_build_keeps_the_plan():
    with fe.Handle() as h:
        if not _cpu_engine_loaded(h):
            pytest.skip("CPU reference engine not loaded")
        g = fe.Graph(handle=h, io_data_type=DataType.HIPDNN_DATA_FLOAT,
                     compute_data_type=DataType.HIPDNN_DATA_FLOAT)
        x = g.tensor(name="x", dim=[2, 3], stride=[3, 1], data_type=DataType.HIPDNN_DATA_FLOAT)
        s = g.tensor(2.0, name="s")  # a compile-time constant
        y = g.mul(x, s)
        y.set_output(True)
        g.build()
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            s.set_as_runtime_parameter()
        xv = np.arange(6, dtype=np.float32).reshape(2, 3)
        yv = np.zeros_like(xv)
        g.execute({x: xv, y: yv})  # must not demand a value for s
        np.testing.assert_allclose(yv, xv * 2.0)
