"""The HIP GPU engine (engine_plugins/hip_kernels) and the three contracts, without a GPU: its
behaviour notes and plugin API version, and its plan-serialization hooks through the backend C API
(the SDK's versioned payload: every malformed payload is rejected before anything is built; a
well-formed one gets as far as the plan builder, which needs a GPU).  The GPU round trip itself
(serialize → fresh process → restore → same numbers) is tests/gpu/test_serialization_gpu.py."""
from __future__ import annotations

import os

import pytest

from ct_support import BAD, PLUGIN, ROOT, plugin_dir, py

SRC = os.path.join(ROOT, "engine_plugins", "hip_kernels")


@pytest.fixture(scope="module")
def hip_dir(ct_base):
    if not os.path.exists(os.path.join(SRC, "engine.py")):
        pytest.skip("engine_plugins/hip_kernels has not landed")
    return plugin_dir(ct_base, "d_hip_kernels", [SRC])


def test_notes_and_api_version():
    """True notes only: runtime compilation (NVRTC/hiprtc at plan build), graph capture (tested
    in tests/gpu/test_gpu_ops.py::test_cuda_graph_capture), plan serialization (added by the SDK);
    plugin API >= 1.2.0 because it honours runtime pass-by-value scalars."""
    if not os.path.exists(os.path.join(SRC, "engine.py")):
        pytest.skip("engine_plugins/hip_kernels has not landed")
    from engine_plugins.hip_kernels.engine import HipKernelsEngine, HipKernelsPlugin
    from hipdnn_cabi._generated.enums import BehaviorNote as B
    assert sorted(HipKernelsEngine().reported_behavior_notes()) == sorted([
        int(B.HIPDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION),
        int(B.HIPDNN_BEHAVIOR_NOTE_SUPPORTS_GRAPH_CAPTURE),
        int(B.HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION)])
    assert HipKernelsEngine.supports_plan_serialization
    assert tuple(int(v) for v in HipKernelsPlugin.api_version.split(".")) >= (1, 2, 0)


RESTORE = """
import struct, zlib
import fuzz_plans as fp
from hipdnn_cabi import device
from hipdnn_cabi.backend.plugins.loader import fnv1a64
from hipdnn_cabi.plugin_sdk import parse_graph
from hipdnn_cabi.plugin_sdk import serialization as ser
EID = fnv1a64("HIPDNN_CABI_HIP_KERNELS_ENGINE")
h = handle()
st, g = scale_shift_graph(h, RUNTIME, DEFAULT); ok(st)
st, gbytes = two_call(lib.hipdnnBackendGetSerializedBinaryGraph_ext, g); ok(st)
table = ser.ScalarTable.from_graph(parse_graph(gbytes))
good = ser.pack(ser.KIND_REDERIVE, EID, table, gbytes, b"")

def patch(off, fmt, v):
    b = bytearray(good)
    struct.pack_into(fmt, b, off, v)
    return bytes(b)

wrong_set = ser.pack(ser.KIND_REDERIVE, EID, ser.ScalarTable([]), gbytes, b"")
cases = {"good": good, "magic": b"XXXXXXXX" + good[8:], "major": patch(8, "<H", 2),
         "kind": patch(12, "<I", 9), "flags": patch(20, "<I", 4), "other_engine": patch(28, "<q", EID + 1),
         "truncated": good[:-7], "header_only": good[:20], "checksum": good[:-1] + bytes([good[-1] ^ 1]),
         "uid_set": wrong_set, "empty": b""}
out = {"device": device.available(), "table": sorted(table.runtime_uids)}
for k, payload in cases.items():
    st, p = deserialize_plan(h, fp.envelope(1, EID, 0, [1, 3, 4, 10, 11], payload))
    out[k] = [st, err()]
print(json.dumps(out))
"""


def test_serialization_hooks_reject_malformed_payloads(hip_dir):
    """The engine exports the serialization trio (restoring is not NOT_SUPPORTED), reads the
    SDK's versioned header and rejects unknown magic, a newer major, an unknown kind or flag,
    another engine's id, truncated / checksum-damaged payloads and a runtime uid set that does
    not match the stored graph — all before the plan builder runs.  A well-formed payload with a
    runtime scalar is accepted (API 1.2.0) and reaches the plan builder, which needs a GPU."""
    r = py(RESTORE, hip_dir)
    assert r["table"] == [10, 11]                  # both runtime scalars travel in the payload
    inv = "HIPDNN_PLUGIN_STATUS_INVALID_VALUE"
    bad = "HIPDNN_PLUGIN_STATUS_BAD_PARAM"
    want = {"magic": (inv, "unknown magic"), "major": (inv, "format 2.0"), "kind": (inv, "kind"),
            "flags": (inv, "flag"), "other_engine": (inv, "this plugin does not provide"),
            "truncated": (bad, "header says"), "header_only": (bad, "truncated"), "checksum": (bad, "checksum mismatch"),
            "uid_set": (bad, "runtime pass-by-value uid set")}
    for k, (status, needle) in want.items():
        st, msg = r[k]
        assert st == PLUGIN, (k, st, msg)
        assert "Failed to create execution context from serialized data" in msg, (k, msg)
        assert status in msg and needle in msg, (k, msg)
    assert r["empty"][0] == BAD                    # empty plugin_payload: the backend's own check
    st, msg = r["good"]
    if r["device"]:
        assert st == 0, msg
    else:                                          # got past every payload check
        assert st == PLUGIN and "HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE" in msg, msg
