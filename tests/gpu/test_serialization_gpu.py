"""GPU: plan serialization (behaviour note 4, added by the SDK) - serialize an execution context,
restore it in a fresh process (fresh, empty kernel cache: kernels are recompiled and loaded),
execute, compare.  Also the behaviour notes the engine reports."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpu_testlib import T, bn_train, conv_fwd, graph_bytes, pw

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CHILD = textwrap.dedent("""
    import sys, types, numpy as np
    sys.path[:0] = [{root!r}, {here!r}]
    from hipdnn_cabi import device
    from hipdnn_cabi.plugin_sdk import DeviceBuffers
    from engine_plugins.hip_kernels import create_plugin
    from gpu_testlib import T, to_storage, from_storage
    import cffi
    D = {npz!r}
    d = {{k: np.fromfile(D + "/" + k + ".f64", np.float64) for k in ("x", "w", "b", "scale")}}
    d["blob"] = open(D + "/blob.bin", "rb").read()
    rt = device.get_runtime()
    c = create_plugin().create_container()
    ctx = c.create_execution_context_from_serialized(d["blob"])
    ptrs = {{}}
    x = T(1, [2, 16, 10, 10], "HALF", "nhwc"); w = T(2, [32, 16, 3, 3], "HALF", "nhwc")
    b = T(4, [1, 32, 1, 1], "HALF", "nhwc"); y = T(6, [2, 32, 10, 10], "HALF", "nhwc")
    for t, key in ((x, "x"), (w, "w"), (b, "b")):
        h = to_storage(t, d[key].reshape(t.dims)); p = rt.malloc(h.nbytes); rt.memcpy_htod(p, h.ctypes.data, h.nbytes); ptrs[t.uid] = p
    hy = to_storage(y, np.zeros(y.dims)); py = rt.malloc(hy.nbytes); rt.memset(py, 0xFF, hy.nbytes, 0); ptrs[6] = py
    sc = np.array([float(d["scale"][0])], np.float32); ptrs[7] = sc.ctypes.data
    wsz = c.get_workspace_size_from_context(ctx)
    ws = rt.malloc(wsz) if wsz else 0
    c.execute(ctx, ws, DeviceBuffers(ptrs, ffi=cffi.FFI()))
    rt.synchronize()
    rt.memcpy_dtoh(hy.ctypes.data, py, hy.nbytes)
    out = from_storage(y, hy)
    print("CACHE_MISSES", rt.cache.misses)
    np.ascontiguousarray(out, np.float64).tofile({out!r})
""")


def test_behaviour_notes():
    from engine_plugins.hip_kernels.engine import HipKernelsEngine, HipKernelsPlugin
    from hipdnn_cabi._generated.enums import BehaviorNote as B
    notes = HipKernelsEngine().reported_behavior_notes()
    for n in (B.HIPDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION, B.HIPDNN_BEHAVIOR_NOTE_SUPPORTS_GRAPH_CAPTURE):
        assert int(n) in notes
    assert 4 in notes     # SUPPORTS_EXECUTION_PLAN_SERIALIZATION, added by the SDK
    assert tuple(int(v) for v in HipKernelsPlugin.api_version.split(".")) >= (1, 2, 0)


def test_serialize_restore_fresh_process(tmp_path):
    from gpu_run import Runner
    from gpu_testlib import quantize
    from engine_plugins.cpu_reference.kernels import conv as kconv
    R = Runner()
    x = T(1, [2, 16, 10, 10], "HALF", "nhwc")
    w = T(2, [32, 16, 3, 3], "HALF", "nhwc")
    cv = T(3, [2, 32, 10, 10], "FLOAT", "nhwc", virtual=True)
    b = T(4, [1, 32, 1, 1], "HALF", "nhwc")
    bv = T(5, [2, 32, 10, 10], "FLOAT", "nhwc", virtual=True)
    y = T(6, [2, 32, 10, 10], "HALF", "nhwc")
    s = T(7, [1, 1, 1, 1], "FLOAT", runtime=True)       # runtime scalar survives the round trip
    g = graph_bytes([x, w, cv, b, bv, y, s], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1]),
                                              pw("ADD", 3, 5, 4), pw("MUL", 5, 6, 7)])
    import types
    from hipdnn_cabi.plugin_sdk import parse_graph
    cfg = types.SimpleNamespace(engine_id=R.cfg.engine_id, knobs={}, raw=b"")  # no knobs
    ctx = R.container.create_execution_context(cfg, parse_graph(g))
    blob = R.container.serialize_execution_context(ctx)
    rng = np.random.default_rng(3)
    xv = quantize(rng.standard_normal(x.dims), "HALF")
    wv = quantize(rng.standard_normal(w.dims), "HALF")
    bvv = quantize(rng.standard_normal(b.dims), "HALF")
    npz = str(tmp_path)      # raw files (no numpy container format between the processes)
    outp = str(tmp_path / "out.f64")
    with open(os.path.join(npz, "blob.bin"), "wb") as f:
        f.write(bytes(blob))
    for k, v in (("x", xv), ("w", wv), ("b", bvv), ("scale", np.array([0.5]))):
        np.ascontiguousarray(v, np.float64).tofile(os.path.join(npz, k + ".f64"))
    env = dict(os.environ)
    env["HIPDNN_CABI_KERNEL_CACHE"] = str(tmp_path / "fresh_cache")   # force recompilation
    code = CHILD.format(root=ROOT, here=HERE, npz=npz, out=outp)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CACHE_MISSES" in r.stdout and int(r.stdout.split("CACHE_MISSES")[1].split()[0]) >= 1
    out = np.fromfile(outp, np.float64).reshape(y.dims)
    ref = (kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bvv) * 0.5
    from gpu_testlib import relerr
    assert np.all(np.isfinite(out)) and relerr(out, quantize(ref, "HALF")) < 4e-3
