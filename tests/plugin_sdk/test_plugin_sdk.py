"""Python engine plugins through the plugin C surface: in-process (slot function pointers inside
libhipdnn_backend.so, called through the backend's trampolines) and exported (.so driven by a C
program), with identical results; faults become status codes plus a last error."""
from __future__ import annotations

import os
import subprocess
import sys

import flatbuffers
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "plugins"))
PY = sys.executable
SAMPLE = os.path.join(ROOT, "engine_plugins", "py_sample")
N = 7


def _engine_config(name):
    from hipdnn_cabi.plugin_sdk import engine_id_of
    from hipdnn_cabi.schemas._generated import EngineConfig as EC
    b = flatbuffers.Builder(64)
    EC.Start(b)
    EC.AddEngineId(b, engine_id_of(name))
    b.Finish(EC.End(b))
    return bytes(b.Output())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from standin_graph import pointwise_graph_bytes
    d = tmp_path_factory.mktemp("pysdk")
    out = {}
    for mode in (2, 30, 34):
        p = d / f"g{mode}.bin"
        p.write_bytes(pointwise_graph_bytes(mode, N))
        out[mode] = str(p)
    c = d / "cfg.bin"
    c.write_bytes(_engine_config("HIPDNN_CABI_PY_SAMPLE_ENGINE"))
    out["cfg"] = str(c)
    c2 = d / "cfg_faulty.bin"
    c2.write_bytes(_engine_config("FAULTY_ENGINE"))
    out["cfg_faulty"] = str(c2)
    out["dir"] = d
    return out


@pytest.fixture(scope="module")
def exported(files):
    from hipdnn_cabi.plugin_sdk.export import build
    return build(SAMPLE, str(files["dir"] / "libpy_sample.so"))


@pytest.fixture(scope="module")
def driver(c_build):
    return c_build(os.path.join(HERE, "drive_exported.c"), link=False)


def _parse(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _inprocess(graph, cfg, plugin=SAMPLE, env=None):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([PY, os.path.join(HERE, "drive_inprocess.py"), plugin, graph, cfg, str(N)],
                       capture_output=True, text=True, timeout=120, env=e)
    assert r.returncode == 0, r.stderr
    return _parse(r.stdout)


def _expected(mode):
    import numpy as np
    x = np.array([i - 2.5 for i in range(N)], np.float32)
    b = np.array([0.5 * i + 1.0 for i in range(N)], np.float32)
    y = {2: x + b, 30: x * b, 34: np.maximum(x, 0)}[mode]
    return "0" + "".join(":%.6g" % v for v in y)


def test_export_exports_the_plugin_api(exported):
    from hipdnn_cabi.plugin_sdk.signatures import ENGINE_HEADERS, signatures
    out = subprocess.run(["nm", "-D", "--defined-only", exported], capture_output=True,
                         text=True).stdout
    syms = {ln.split()[-1] for ln in out.splitlines() if " T " in ln}
    assert {s.name for s in signatures() if s.header in ENGINE_HEADERS} <= syms
    # an engine plugin exports no heuristic-plugin entry points (a .so is one kind or the other)
    assert not [s for s in syms if s.startswith("hipdnnHeuristic")]
    assert not [s for s in syms if s.startswith(("hpy_", "slot", "hipdnn_cabi_"))]


@pytest.mark.parametrize("mode", [2, 30, 34])
def test_inprocess_and_exported_agree(files, exported, driver, mode):
    from hipdnn_cabi.plugin_sdk import engine_id_of
    from hipdnn_cabi.schemas._generated.EngineDetails import EngineDetails
    from hipdnn_cabi.schemas.verifier import verify
    r = subprocess.run([driver, exported, files[mode], files["cfg"], str(N)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    c = _parse(r.stdout)
    p = _inprocess(files[mode], files["cfg"])
    assert c == p
    eid = engine_id_of("HIPDNN_CABI_PY_SAMPLE_ENGINE")
    assert c["name"] == "0:hipdnn_cabi_py_sample" and c["version"] == "0:0.1.0"
    assert c["api_version"] == "0:1.0.0" and c["type"] == "0:1"
    assert c["all_count"] == "0:1" and c["all_max0"] == "0:1:1"
    assert c["all_ids"] == f"0:1:{eid}"
    assert set(c["applicable"].split(":")[2:]) <= set(c["all_ids"].split(":")[2:])
    assert c["applicable"] == f"0:1:{eid}"
    st, hexd = c["details"].split(":")
    raw = bytes.fromhex(hexd)
    verify(raw, "EngineDetails")
    assert st == "0" and EngineDetails.GetRootAs(raw, 0).EngineId() == eid
    assert c["destroy_details"] == "0:1"
    assert c["workspace"] == "0:0" and c["workspace_ctx"] == "0:0" and c["context"] == "0:1"
    assert c["execute"] == _expected(mode)
    assert c["execute_missing"] == "2:no device buffer for tensor uid 3"
    assert c["null_name"] == "1:name is NULL"
    for k in ("null_num", "null_ids", "null_create", "null_graph", "junk_graph", "null_ws",
              "null_ctx", "destroy_again"):
        assert c[k] == "1", k
    assert c["destroy"] == "0" and c["destroy_context"] == "0"


FAULT_SCRIPT = r'''
import os, sys
sys.path.insert(0, %(here)r)
from drive_inprocess import start_backend
ffi, lib = start_backend()
from hipdnn_cabi.plugin_sdk.loader import load_python_plugin, unload_python_plugin
from hipdnn_cabi.backend.plugins.loader import EnginePlugin
T = load_python_plugin(%(plugin)r)
p = EnginePlugin("faulty", T, 0)
try:
    p.initialize(None)
    print("init=ok")
except Exception as e:
    print("init=" + type(e).__name__ + ":" + str(e).replace("\n", " "))
g = open(%(graph)r, "rb").read(); c = open(%(cfg)r, "rb").read()
gk, ck = ffi.new("char[]", g), ffi.new("char[]", c)
graph = ffi.new("hipdnnPluginConstData_t*", (gk, len(g)))
cfg = ffi.new("hipdnnPluginConstData_t*", (ck, len(c)))
def C(n, *a): return getattr(lib, "tramp_" + n)(T[n], *a)
def err():
    e = ffi.new("const char**"); C("hipdnnPluginGetLastErrorString", e); return ffi.string(e[0]).decode()
h = ffi.new("hipdnnEnginePluginHandle_t*")
print("create=%%d:%%s" %% (C("hipdnnEnginePluginCreate", h), err()))
h = h[0]
ids = ffi.new("int64_t[4]"); n = ffi.new("uint32_t*")
print("applicable=%%d:%%s" %% (C("hipdnnEnginePluginGetApplicableEngineIds", h, graph, ids, 4, n), err()))
from hipdnn_cabi.plugin_sdk import engine_id_of
det = ffi.new("hipdnnPluginConstData_t*")
print("details=%%d:%%s" %% (C("hipdnnEnginePluginGetEngineDetails", h, engine_id_of("FAULTY_ENGINE"), graph, det), err()))
ws = ffi.new("size_t*")
print("workspace=%%d:%%s" %% (C("hipdnnEnginePluginGetWorkspaceSize", h, cfg, graph, ws), err()))
ctx = ffi.new("hipdnnEnginePluginExecutionContext_t*")
print("context=%%d:%%s" %% (C("hipdnnEnginePluginCreateExecutionContext", h, cfg, graph, ctx), err()))
print("plan_ws=%%d:%%s" %% (C("hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext", h, ctx[0], ws), err()))
print("execute=%%d:%%s" %% (C("hipdnnEnginePluginExecuteOpGraph", h, ctx[0], ffi.NULL, ffi.NULL, 0), err()))
print("last=" + err())
# the host keeps working: a second, healthy plugin in another slot
T2 = load_python_plugin(%(sample)r)
p2 = EnginePlugin("py_sample", T2, 0); p2.initialize(None)
print("healthy=" + p2.name)
unload_python_plugin(T)
s = ffi.new("const char**")
print("unloaded=%%d" %% lib.tramp_hipdnnPluginGetName(T["hipdnnPluginGetName"], s))
'''


@pytest.mark.parametrize("fault,key,status", [
    ("create", "create", 3), ("applicable", "applicable", 3), ("details", "details", 3),
    ("workspace", "workspace", 3), ("build", "context", 3), ("plan_ws", "plan_ws", 3),
    ("execute", "execute", 3), ("applicable:plugin_error", "applicable", 5),
    ("all_ids", "init", None), ("bad_ids", "init", None), ("missing_buffer", "execute", 2),
])
def test_faults_become_status_and_last_error(files, fault, key, status):
    plugin = os.path.join(HERE, "faulty_plugin.py")
    code = FAULT_SCRIPT % {"here": HERE, "plugin": plugin, "graph": files[2], "cfg": files["cfg_faulty"],
                           "sample": SAMPLE}
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, FAULT=fault))
    assert r.returncode == 0, r.stderr
    out = _parse(r.stdout)
    assert out["healthy"] == "hipdnn_cabi_py_sample"
    assert out["unloaded"] == "6"  # NOT_INITIALIZED once the slot is free
    if key == "init":
        assert out["init"].startswith("PluginError:"), out["init"]
        return
    assert out["init"] == "ok"
    assert int(out[key].split(":")[0]) == status, out
    if fault == "missing_buffer":
        assert "no device buffer for tensor uid 42" in out[key]
    elif status == 3:
        assert f"RuntimeError: boom in {fault}" in out[key]
    else:
        assert "declined in applicable" in out[key]
