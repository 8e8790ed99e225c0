"""serialize() / deserialize() round trips (spec §2.9)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fe_util import CPU_ENGINE, close, conv2d_ref, rand, rng
from hipdnn_cabi import errors
from hipdnn_cabi import frontend as hf

F32 = hf.DataType.HIPDNN_DATA_FLOAT


def cbr(handle):
    g = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32,
                 name="cbr")
    x, w = g.tensor(name="x", dim=[1, 2, 6, 6]), g.tensor(name="w", dim=[3, 2, 3, 3])
    b = g.tensor(name="b", dim=[1, 3, 1, 1])
    y = g.relu(g.add(g.conv_fprop(x, w, padding=1), b)).set_output(True).set_name("y")
    return g, x, w, b, y


def test_serialize_before_build_and_json(handle):
    g, *_ = cbr(handle)
    blob = g.serialize()                       # lowered without a handle (no finalize)
    assert isinstance(blob, bytes) and len(blob) > 0
    doc = json.loads(g.serialize_json())
    assert json.dumps(doc).count('"x"') >= 1
    g2 = hf.Graph(handle=handle).deserialize(blob)
    assert [k for k, _ in g2.nodes] == ["conv_fprop", "pointwise", "pointwise"]
    names = {t.get_name(): t for t in g2.get_tensors()}
    assert names["x"].get_dim() == [1, 2, 6, 6] and names["y"].get_is_virtual() is False
    assert g2.name == "cbr" and g2.compute_data_type == F32


@pytest.mark.needs_cpu_engine
def test_round_trip_executes(handle):
    g, x, w, b, y = cbr(handle)
    g.build()
    blob = g.serialize()
    r = rng(30)
    xa, wa, ba = rand(r, (1, 2, 6, 6)), rand(r, (3, 2, 3, 3)), rand(r, (1, 3, 1, 1))
    ref = np.maximum(conv2d_ref(xa, wa, (1, 1)) + ba, 0)

    g2 = hf.Graph(handle=handle).deserialize(handle, blob)
    if g2.engine_id is None:          # graph-only blob (engine without plan serialization)
        g2.build()
    assert g2.engine_name == CPU_ENGINE
    ya = np.empty((1, 3, 6, 6), np.float32)
    g2.execute({"x": xa, "w": wa, "b": ba, "y": ya})
    close(ya, ref)

    # the same bytes again (graph-only path: rebuild plans from the deserialized graph)
    g3 = hf.Graph.from_bytes(blob, handle=handle)
    g3.create_execution_plans().check_support().build_plans()
    yb = np.empty_like(ya)
    g3.execute({x.get_uid(): xa, w.get_uid(): wa, b.get_uid(): ba, y.get_uid(): yb})
    close(yb, ref)
    assert g3.serialize()                       # re-serializable


@pytest.mark.needs_cpu_engine
def test_plan_embedded_when_engine_advertises_it(handle):
    g, *_ = cbr(handle)
    g.build()
    notes = [int(n) for n in g.get_behavior_notes_for_engine(g.engine_id)]
    blob = g.serialize()
    ffi, lib = g.api.ffi, g.api.lib
    flags = ffi.new("int*")
    assert lib.hipdnnBackendGetSerializedBinaryContents_ext(blob, len(blob), flags) == 0
    supports = int(hf.BehaviorNote.HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION) in notes
    assert bool(flags[0] & 2) == supports
    if supports:
        g2 = hf.Graph(handle=handle).deserialize(blob)
        assert g2.engine_id == g.engine_id          # ready to execute without build()


def test_deserialize_garbage_raises_backend_error(handle):
    with pytest.raises(errors.BadParamError) as ei:
        hf.Graph(handle=handle).deserialize(b"\x00" * 64)
    assert ei.value.message
    with pytest.raises(errors.BadParamError, match="empty Graph"):
        g, *_ = cbr(handle)
        g.deserialize(b"1234")
