"""Compiled-plan API (spec §2.9): serialize_compiled_plan / deserialize_compiled_plan, plan tensor
uids, engine id and override flag; a plan restored in a fresh process gives the same numbers."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from fe_util import CPU_ENGINE, ROOT, close, conv2d_ref, rand, rng
from hipdnn_cabi import errors
from hipdnn_cabi import frontend as hf

F32 = hf.DataType.HIPDNN_DATA_FLOAT


def cbr(handle):
    g = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32,
                 name="cbr")
    x, w = g.tensor(name="x", dim=[2, 3, 8, 8]), g.tensor(name="w", dim=[4, 3, 3, 3])
    b = g.tensor(name="b", dim=[1, 4, 1, 1])
    y = g.relu(g.add(g.conv_fprop(x, w, padding=1), b)).set_output(True).set_name("y")
    return g, x, w, b, y


@pytest.mark.needs_cpu_engine
def test_compiled_plan_fresh_process(handle, tmp_path):
    g, x, w, b, y = cbr(handle)
    g.set_preferred_engine_name_ext(CPU_ENGINE).build()
    r = rng(11)
    xa, wa, ba = rand(r, (2, 3, 8, 8)), rand(r, (4, 3, 3, 3)), rand(r, (1, 4, 1, 1))
    ya = np.empty((2, 4, 8, 8), np.float32)
    g.execute({x: xa, w: wa, b: ba, y: ya})
    close(ya, np.maximum(conv2d_ref(xa, wa, (1, 1)) + ba, 0))

    blob = g.serialize_compiled_plan()
    assert isinstance(blob, bytes) and blob
    uids = g.get_compiled_plan_tensor_uids()
    assert {x.get_uid(), w.get_uid(), b.get_uid(), y.get_uid()} <= set(uids)
    assert g.get_compiled_plan_engine_id() == g.engine_id
    assert g.get_compiled_plan_override_shape_enabled() is False

    # same process: a graph-less Graph executes it with uid keys
    p = hf.Graph.from_compiled_plan(blob, handle=handle)
    assert p.engine_id == g.engine_id and p.engine_name == CPU_ENGINE
    assert p.get_compiled_plan_tensor_uids() == uids
    assert p.get_workspace_size() == g.get_workspace_size()
    yb = np.empty_like(ya)
    p.execute({x.get_uid(): xa, w.get_uid(): wa, b.get_uid(): ba, y.get_uid(): yb})
    assert np.array_equal(ya, yb)
    assert p.serialize_compiled_plan()            # a restored plan serializes again

    # a fresh process: restore, execute, same numbers (bit for bit)
    np.savez(tmp_path / "io.npz", x=xa, w=wa, b=ba)
    (tmp_path / "plan.bin").write_bytes(blob)
    code = f"""
import numpy as np
from hipdnn_cabi import frontend as hf
d = np.load({str(tmp_path / 'io.npz')!r})
blob = open({str(tmp_path / 'plan.bin')!r}, 'rb').read()
with hf.Handle() as h:
    p = hf.Graph(handle=h).deserialize_compiled_plan(h, blob)
    y = np.empty((2, 4, 8, 8), np.float32)
    p.execute({{{x.get_uid()}: d['x'], {w.get_uid()}: d['w'], {b.get_uid()}: d['b'], {y.get_uid()}: y}})
    np.save({str(tmp_path / 'y.npy')!r}, y)
    print('ENGINE', p.engine_id, p.engine_name, p.get_compiled_plan_tensor_uids())
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ENGINE {g.engine_id} {CPU_ENGINE} {uids}" in res.stdout
    assert np.array_equal(np.load(tmp_path / "y.npy"), ya)


def test_compiled_plan_errors(handle):
    g, *_ = cbr(handle)
    with pytest.raises(errors.BadParamError, match="no built execution plan"):
        g.serialize_compiled_plan()
    with pytest.raises(errors.BadParamError, match="no bytes"):
        hf.Graph(handle=handle).deserialize_compiled_plan(handle)
    with pytest.raises(errors.HipdnnError) as ei:
        hf.Graph(handle=handle).deserialize_compiled_plan(handle, b"\x01" * 32)
    assert ei.value.message
