"""DOUBLE runtime pass-by-value scalars (pointwise operands, norm / batchnorm epsilon, batchnorm
momentum) in graphs whose kernels compute in double: the kernels take them as ``double``
arguments (the value keeps its float64 precision, as in the CPU reference); float kernels keep
``float`` arguments.  CI checks the generated programs, runs the elementwise / row kernels on the
host (host_emu) against the CPU reference and compiles them with NVRTC (sm_90a); ``-m gpu``
runs the same graphs on the device."""
from __future__ import annotations

import ctypes
import functools
import re

import numpy as np
import pytest

import ext_samples
import host_emu
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program, io_uids
from gpu_testlib import T, bn_inf_var, bn_train, graph_bytes, node, pw
from hipdnn_cabi.plugin_sdk import parse_graph
from test_wide_pointwise import _bn_sums_numpy, _lo, _nbytes, _np

HDR = codegen.headers()
# not representable in float32: a float argument would change the results at ~1e-8 relative
S_MUL = 1.0 / 3.0
EPS = 1e-12 + 1.0 / 300.0
MOM = 0.1 + 1e-13


def _pw(mode, a, out, b=None, compute="DOUBLE"):
    n = pw(mode, a, out, b)
    return node("PointwiseAttributes", n["attributes"][1], compute=compute, name=n["name"])


def _runtime(t):
    t.runtime = True
    t.value = None
    return t


def _ln(dt, rms):
    ts, _ = ext_samples.ln_fwd(dt, dt, 5, 40, rms=rms)
    eps = next(t for t in ts if t.uid == 4)
    eps.dtype = dt
    _runtime(eps)
    a = {"x_tensor_uid": 1, "scale_tensor_uid": 2, "epsilon_tensor_uid": 4, "y_tensor_uid": 5,
         "forward_phase": 2}
    if rms:
        a.update(bias_tensor_uid=3, inv_rms_tensor_uid=7)
        return ts, [node("RMSNormAttributes", a)]
    a.update(bias_tensor_uid=3, normalized_dim_count=1, mean_tensor_uid=6, inv_variance_tensor_uid=7)
    return ts, [node("LayernormAttributes", a)]


def _cases(dt):
    cd = [1, 3, 1, 1]
    bx = [T(1, [2, 3, 5, 7], dt), T(2, cd, dt), T(3, cd, dt), T(4, cd, dt), T(5, cd, dt),
          T(6, [2, 3, 5, 7], dt), _runtime(T(7, [1, 1, 1, 1], dt))]
    return {
        "pw_mul_add": ([T(1, [4, 37], dt), _runtime(T(2, [1, 1], dt)), T(3, [4, 37], dt, virtual=True),
                        _runtime(T(4, [1, 1], dt)), T(5, [4, 37], dt)],
                       [_pw("MUL", 1, 3, 2, compute=dt), _pw("ADD", 3, 5, 4, compute=dt)]),
        "ln_fwd": _ln(dt, False),
        "rms_fwd": _ln(dt, True),
        "bn_inf_var": (bx, [bn_inf_var(1, 2, 3, 4, 5, 7, 6)]),
        "bn_train": ([T(1, [3, 4, 5, 6], dt, "nhwc"), T(2, [1, 4, 1, 1], dt), T(3, [1, 4, 1, 1], dt),
                      _runtime(T(4, [1, 1, 1, 1], dt)), T(5, [3, 4, 5, 6], dt, "nhwc"),
                      T(6, [1, 4, 1, 1], dt), T(7, [1, 4, 1, 1], dt), T(8, [1, 4, 1, 1], dt),
                      T(9, [1, 4, 1, 1], dt), _runtime(T(10, [1, 1, 1, 1], dt)),
                      T(11, [1, 4, 1, 1], dt), T(12, [1, 4, 1, 1], dt)],
                     [bn_train(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)]),
    }


# the runtime scalar values of each case (uid -> value)
SCALARS = {"pw_mul_add": {2: S_MUL, 4: EPS}, "ln_fwd": {4: EPS}, "rms_fwd": {4: EPS},
           "bn_inf_var": {7: EPS}, "bn_train": {4: EPS, 10: MOM}}
NAMES = sorted(SCALARS)


def _case(name, dt="DOUBLE"):
    ts, ns = _cases(dt)[name]
    g = graph_bytes(ts, ns)
    pg = parse_graph(g)
    outs = {u for n in pg.nodes for u in io_uids(n, pg)[1]}
    ins = [t for t in ts if t.uid not in outs and t.value is None and not t.runtime]
    rng = np.random.default_rng(sum(map(ord, name)))
    vals = {}
    for t in ins:
        v = rng.standard_normal(_span(t)) * 0.1        # variances ~ epsilon: epsilon matters
        if name.startswith("bn_inf") and t.uid == 3:
            v = np.abs(v) * 0.05 + 1e-3                # variance > 0
        vals[t.uid] = v.astype(_np(t))
    return ts, g, {u: v.tobytes() for u, v in vals.items()}, \
        [t for t in ts if t.uid in outs and not t.virtual]


def _span(t):
    return 1 + sum((d - 1) * abs(s) for d, s in zip(t.dims, t.strides))


def _scalar_bufs(name, dt):
    return {u: np.array([v], _np(T(0, [1], dt))) for u, v in SCALARS[name].items()}


def cpu_run(ts, g, ins, scal):
    import types

    import cffi
    from engine_plugins.cpu_reference import create_plugin
    from engine_plugins.cpu_reference.engine import ENGINE_NAME
    from hipdnn_cabi.plugin_sdk import DeviceBuffers, engine_id_of
    c = create_plugin().create_container()
    host = {t.uid: np.frombuffer(bytearray(ins.get(t.uid, b"\xee" * _nbytes(t))), np.uint8)
            for t in ts if not t.virtual and t.value is None and not t.runtime}
    cfg = types.SimpleNamespace(engine_id=engine_id_of(ENGINE_NAME), knobs={})
    ctx = c.create_execution_context(cfg, parse_graph(g))
    ptrs = {u: a.ctypes.data + _lo(t) for t in ts for u, a in host.items() if u == t.uid}
    ptrs.update({u: a.ctypes.data for u, a in scal.items()})
    c.execute(ctx, 0, DeviceBuffers(ptrs, ffi=cffi.FFI()))
    return {u: a.tobytes() for u, a in host.items() if u not in ins}


def emu_run(ts, g, ins, scal):
    prog = build_program(parse_graph(g))
    mem = host_emu.HostMem()
    ptr, raw = {}, {}
    for t in ts:
        if t.virtual or t.value is not None or t.runtime:
            continue
        p, r = mem.alloc(_nbytes(t), 0xEE)
        if t.uid in ins:
            r[:] = np.frombuffer(ins[t.uid], np.uint8)
        ptr[t.uid], raw[t.uid] = p + _lo(t), r
    base = {"ws": mem.alloc(max(16, prog.ws_size)), "sc": mem.alloc(max(16, prog.scratch_size))}

    def val(a):
        if a[0] == "t":
            return ptr[a[1]]
        if a[0] == "s":         # the executor's packing: a double or a float argument
            v = float(scal[a[1]][0])
            return ctypes.c_double(v) if a[2:] == ("double",) else float(np.float32(v))
        return base[a[0]][0] + a[1]
    for st in prog.steps:
        if st[0] == "memset":
            buf = raw[st[1][1]] if st[1][0] == "t" else base[st[1][0]][1][st[1][1]:]
            buf[:st[2]] = 0
            continue
        _, src, name, grid, block, args = st[:6]
        vals = [val(a) for a in args]
        if name in ("hdn_bn_stats", "hdn_bn_bwd_sums"):
            _bn_sums_numpy(name, vals, {ptr[u]: (t, raw[u]) for t in ts for u in [t.uid] if u in ptr})
            continue
        host_emu.run_kernel(src, name, grid, block, vals, HDR)
    return {u: raw[u].tobytes() for u in raw if u not in ins}


def _check(outs, ref, got, tol):
    for t in outs:
        r, g = np.frombuffer(ref[t.uid], _np(t)), np.frombuffer(got[t.uid], _np(t))
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol * float(np.max(np.abs(r))),
                                   err_msg=f"uid {t.uid}")


def _launch_params(prog):
    """[(kernel name, its parameter list, its arguments)] of the program's launches."""
    out = []
    for st in prog.steps:
        if st[0] == "launch":
            m = re.search(re.escape(st[2]) + r"\s*\(([^)]*)\)", st[1])
            out.append((st[2], m.group(1) if m else "", st[5]))
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", ["DOUBLE", "FLOAT"])
def test_runtime_scalar_argument_type_follows_the_kernel(name, dt):
    ts, g, _, _ = _case(name, dt)
    prog = build_program(parse_graph(g))
    want = "double" if dt == "DOUBLE" else "float"
    seen = 0
    for kname, params, args in _launch_params(prog):
        for a in args:
            if a[0] != "s":
                continue
            seen += 1
            assert a[2:] == (("double",) if dt == "DOUBLE" else ()), (kname, a)
        n_s = sum(1 for a in args if a[0] == "s")
        if n_s:
            # the by-value parameters: no pointer
            byval = [p for p in params.split(",") if "*" not in p and p.strip().startswith("const")]
            assert len(byval) == n_s and all(p.split()[1] == want for p in byval), (kname, params)
    assert seen == len(SCALARS[name])


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("name", NAMES)
def test_double_runtime_scalars_host_emulation(name):
    ts, g, ins, outs = _case(name)
    scal = _scalar_bufs(name, "DOUBLE")
    ref = cpu_run(ts, g, ins, scal)
    _check(outs, ref, emu_run(ts, g, ins, scal), 1e-13)
    # the same kernels given float-rounded scalars do not match at double tolerance (the test
    # would catch a float argument)
    rounded = {u: a.astype(np.float32).astype(np.float64) for u, a in scal.items()}
    with pytest.raises(AssertionError):
        _check(outs, ref, emu_run(ts, g, ins, rounded), 1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_double_runtime_scalars_compile_sm90a(name):
    try:
        from hipdnn_cabi.device import compiler
        c = compiler("cuda")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")
    for dt in ("DOUBLE", "FLOAT"):
        ts, g, _, _ = _case(name, dt)
        for st in build_program(parse_graph(g), arch="sm_90").steps:
            if st[0] == "launch":
                c.compile(st[1], f"{st[2]}.hip", (), "sm_90a", HDR)


@functools.lru_cache(maxsize=1)
def _device_both():
    from test_parity_corpus import _Both
    return _Both()


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_double_runtime_scalars_on_the_device(name):
    from hipdnn_cabi import device
    if not device.available():
        pytest.skip("no GPU runtime found")
    _device_run(name, _device_both())


def test_device_harness_on_the_cpu_reference():
    """CI self-check of the device test's harness with the CPU reference on both sides."""
    from test_parity_corpus import _Both
    both = _Both(device=False)
    for name in NAMES:
        _device_run(name, both)


def _device_run(name, both):
    """One case on ``both``'s second engine (the HIP engine on the GPU, or the CPU reference on
    host memory) against the CPU reference; the runtime scalars bound as host pointers."""
    import cffi
    from hipdnn_cabi.plugin_sdk import DeviceBuffers
    rt = both.rt
    ts, g, ins, outs = _case(name)
    scal = _scalar_bufs(name, "DOUBLE")
    pg = parse_graph(g)
    ptrs, buf = {}, {}
    for t in ts:
        if t.virtual or t.value is not None or t.runtime:
            continue
        buf[t.uid] = rt.malloc(_nbytes(t))
        ptrs[t.uid] = buf[t.uid] + _lo(t)
        if t.uid in ins:
            b = np.frombuffer(ins[t.uid], np.uint8)
            rt.memcpy_htod(buf[t.uid], b.ctypes.data, b.nbytes)
        else:
            rt.memset(buf[t.uid], 0xEE, _nbytes(t), 0)
    rt.synchronize()
    ptrs.update({u: a.ctypes.data for u, a in scal.items()})     # host pointers (by value)
    assert both.gpu.get_applicable_engine_ids(pg) == [both.gcfg.engine_id], name
    ctx = both.gpu.create_execution_context(both.gcfg, pg)
    wsz = both.gpu.get_workspace_size_from_context(ctx)
    ws = rt.malloc(wsz) if wsz else 0
    both.gpu.execute(ctx, ws, DeviceBuffers(ptrs, ffi=cffi.FFI()))
    rt.stream_synchronize(both.stream)
    got = {}
    for t in outs:
        h = np.empty(_nbytes(t), np.uint8)
        rt.memcpy_dtoh(h.ctypes.data, buf[t.uid], h.nbytes)
        got[t.uid] = h.tobytes()
    for p in list(buf.values()) + ([ws] if ws else []):
        rt.free(p)
    # device sums in other orders (statistics: atomics): double tolerance, not bit equality
    _check(outs, cpu_run(ts, g, ins, scal), got, 1e-12)
