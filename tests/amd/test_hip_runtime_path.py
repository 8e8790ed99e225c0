"""The ROCm runtime path (hipdnn_cabi/device/hip.py) against a recording stand-in of hip-python
(fake_hip_python.py), as tests/foundation/test_rtc_compilers.py does for the compile sequence:

* hiprtc gets the source, the in-memory headers and exactly the options ``make check-amd``
  compiles with (``hip.hiprtc_options`` after hiprtc's own);
* with the offline toolchain installed, the stand-in's hiprtc compiles for real, so the engine
  plans graphs on a gfx942 device end to end: every program compiles, its code object loads
  (an amdgcn ELF for the device's target) and every kernel the plan looks up is found;
* a code object built offline (check-amd's way) loads through the same module path; one for
  another target is refused;
* on an AMD device the engine only accepts what has compiled: other gfx targets decline with
  the reason.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import amd_toolchain as tc
import fake_hip_python as fhp

SRC = '#include "hdn_compat.h"\nextern "C" __global__ void hdn_t(float* p) { p[threadIdx.x] = hdn_to_float(1.f); }\n'


def _headers():
    from engine_plugins import hip_kernels
    kd = os.path.join(os.path.dirname(hip_kernels.__file__), "kernels")
    return {n: open(os.path.join(kd, n)).read() for n in sorted(os.listdir(kd)) if n.endswith(".h")}


@pytest.fixture
def chain(tmp_path_factory):
    if tc.missing():
        pytest.skip(f"offline AMD toolchain missing ({' '.join(tc.missing())}; make check-amd installs it)")
    return tc.Toolchain(os.environ.get("CHECK_AMD_CACHE") or str(tmp_path_factory.mktemp("amdtc")))


@pytest.fixture
def fresh_device(monkeypatch, tmp_path):
    """Device probing reset around the test; kernel cache in a temporary folder."""
    from hipdnn_cabi import device
    monkeypatch.setenv("HIPDNN_CABI_KERNEL_CACHE", str(tmp_path / "kcache"))
    device._reset_for_tests()
    yield device
    device._reset_for_tests()


def test_hiprtc_steps_and_options(monkeypatch):
    pkg, calls = fhp.make("gfx90a")
    fhp.install(monkeypatch, pkg)
    from hipdnn_cabi.device import compiler
    from hipdnn_cabi.device.hip import HiprtcCompiler, hiprtc_options
    c = compiler("hip")
    assert isinstance(c, HiprtcCompiler) and c.version == "hiprtc-6.2"
    img = c.compile(SRC, "k.hip", ["-DX=1"], "gfx90a", {"hdn_compat.h": "//"})
    assert img.startswith(b"\x7fELF")
    assert calls[0] == ("hiprtcCreateProgram", b"k.hip", 1, (b"hdn_compat.h",), (b"//",))
    assert calls[1] == ("hiprtcCompileProgram", tuple(hiprtc_options("gfx90a") + ["-DX=1"]))
    assert calls[-1] == ("hiprtcDestroyProgram",)
    assert hiprtc_options("gfx942") == ["--offload-arch=gfx942", "-std=c++17", "-DHDN_PLATFORM_HIP=1", "-O3"]


def test_check_amd_compiles_with_the_runtime_options():
    """check-amd's command line = driver + hiprtc's own options + what hip.py hands hiprtc."""
    from hipdnn_cabi.device.hip import hiprtc_options
    t = object.__new__(tc.Toolchain)
    t.clang, t.devlibs, t.incdir = "clang-19", "/devlibs", "/inc"
    argv = t.argv("gfx942")
    tail = tc.hiprtc_internal_options() + hiprtc_options("gfx942")
    assert argv[-len(tail):] == tail
    assert argv[:5] == ["clang-19", "-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output"]
    # the offline compile of a program = hiprtc_argv of exactly the options hip.py passes
    assert t.argv("gfx90a", ["-DQ"]) == t.hiprtc_argv(hiprtc_options("gfx90a") + ["-DQ"])
    assert "-D__HIPCC_RTC__" in argv and argv[argv.index("-include") + 1] == "hiprtc_runtime.h"


def _platform(monkeypatch, fresh_device, arch="gfx942", chain=None):
    pkg, calls = fhp.make(arch, chain.compile_hiprtc if chain else None)
    fhp.install(monkeypatch, pkg)
    monkeypatch.setenv("HIPDNN_CABI_DEVICE", "hip")
    assert fresh_device.available(), fresh_device.unavailable_reason()
    return calls


def test_engine_plans_compile_load_and_launch_on_gfx942(monkeypatch, fresh_device, chain):
    """Pointwise, a 16-bit matmul (MFMA core) and flash attention forward + backward planned on
    the stand-in gfx942: hiprtc compiles each program with the engine's options, the code
    objects load, every kernel is found, executes launch them."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "gpu"))
    from gpu_run import Runner
    from gpu_testlib import T, graph_bytes, matmul, pw
    from hipdnn_cabi.device.hip import hiprtc_options
    from test_attention import bwd_graph, fwd_graph
    calls = _platform(monkeypatch, fresh_device, chain=chain)
    R = Runner()
    assert R.rt.kind == "hip" and R.rt.arch == "gfx942" and R.rt.sm_count == 304
    x, y = T(1, [4, 40], "HALF"), T(2, [4, 40], "HALF")
    a, b, c = T(1, [2, 64, 40], "HALF"), T(2, [2, 40, 72], "HALF"), T(3, [2, 64, 72], "HALF")
    fts, fg = fwd_graph("BFLOAT16", 1, 2, 1, 40, 50, 64, causal_mask=True)
    bts, bg = bwd_graph("HALF", 1, 2, 2, 33, 33, 64)
    R.run(graph_bytes([x, y], [pw("RELU_FWD", 1, 2)]), {x: np.ones(x.dims)}, [y])
    R.run(graph_bytes([a, b, c], [matmul(1, 2, 3)]), {a: np.ones(a.dims), b: np.ones(b.dims)}, [c])
    R.run(fg, {t: np.zeros(t.dims) for t in fts[:3]}, fts[3:])
    R.run(bg, {t: np.zeros(t.dims) for t in bts[:6]}, bts[6:])
    opts = [c_[1] for c_ in calls if c_[0] == "hiprtcCompileProgram"]
    assert opts and all(o == tuple(hiprtc_options("gfx942")) for o in opts)
    looked = [c_[2] for c_ in calls if c_[0] == "hipModuleGetFunction"]
    launched = [c_[1] for c_ in calls if c_[0] == "hipModuleLaunchKernel"]
    for k in ("hdn_gemm_mfma", "hdn_attn_fwd_mfma", "hdn_attn_bwd_pre", "hdn_attn_bwd_mfma", "hdn_attn_bwd_dq"):
        assert k in looked and k in launched, (k, launched)
    assert len([c_ for c_ in calls if c_[0] == "hipModuleLoadData"]) >= 4


def test_offline_code_object_loads_through_the_module_path(monkeypatch, fresh_device, chain):
    from hipdnn_cabi.device import DeviceError, KernelCache
    hdr = _headers()
    img = chain.compile(SRC, "t.hip", (), "gfx942", hdr)          # check-amd's compile
    assert tc.code_object_target(img) == "gfx942" and tc.kernels_defined(img) == ["hdn_t"]

    def no_compile(*a):
        raise AssertionError("hiprtc must not run: the offline object is in the cache")
    pkg, calls = fhp.make("gfx942")
    pkg.hiprtc.hiprtcCompileProgram = no_compile
    fhp.install(monkeypatch, pkg)
    monkeypatch.setenv("HIPDNN_CABI_DEVICE", "hip")
    from hipdnn_cabi.device import get_runtime
    rt = get_runtime(0)
    key = KernelCache.key(SRC + "".join(f"\0{k}\0{v}" for k, v in hdr.items()), [], "gfx942",
                          rt.compiler.version)
    rt.cache.put(key, img)
    # the stand-in loader checks images when it has a compiler: give it the real checks
    pkg2, calls2 = fhp.make("gfx942", chain.compile_hiprtc)
    rt.hip.hipModuleLoadData = pkg2.hip.hipModuleLoadData
    rt.hip.hipModuleGetFunction = pkg2.hip.hipModuleGetFunction
    m = rt.module(SRC, "t.hip", (), hdr)
    assert m.function("hdn_t") == ("fn", 1, "hdn_t")
    assert ("hipModuleLoadData", len(img)) in calls2
    with pytest.raises(DeviceError, match=r"hipModuleGetFunction\(hdn_missing\)"):
        m.function("hdn_missing")
    # an object for another target is refused by the loader
    other = chain.compile(SRC.replace("void hdn_t(", "void hdn_u("), "u.hip", (), "gfx90a", hdr)
    assert tc.code_object_target(other) == "gfx90a"
    rt.cache.put(KernelCache.key(SRC.replace("void hdn_t(", "void hdn_u(") + "".join(f"\0{k}\0{v}" for k, v in hdr.items()),
                                 [], "gfx942", rt.compiler.version), other)
    with pytest.raises(DeviceError, match="hipModuleLoadData"):
        rt.module(SRC.replace("void hdn_t(", "void hdn_u("), "u.hip", (), hdr)


def test_other_amd_targets_and_unsupported_graphs_decline_with_a_reason(monkeypatch, fresh_device):
    from engine_plugins.hip_kernels import create_plugin
    from gpu_testlib import T, graph_bytes, pw
    from hipdnn_cabi.plugin_sdk import parse_graph
    from test_attention import fwd_graph
    _platform(monkeypatch, fresh_device, arch="gfx1100")
    c = create_plugin().create_container()
    x, y = T(1, [4, 40]), T(2, [4, 40])
    g = parse_graph(graph_bytes([x, y], [pw("RELU_FWD", 1, 2)]))
    assert c.get_applicable_engine_ids(g) == []
    builder = create_plugin().engines[0].plan_builder
    assert "AMD target gfx1100" in builder.decline_reason(None, g)
    fresh_device._reset_for_tests()
    _platform(monkeypatch, fresh_device, arch="gfx942")
    assert create_plugin().create_container().get_applicable_engine_ids(g) != []
    _, fg = fwd_graph("HALF", 1, 2, 2, 40, 40, 96)                # head dim 96: no kernel
    assert "head dim 96" in builder.decline_reason(None, parse_graph(fg))
