"""fp8 (OCP FP8_E4M3 / FP8_E5M2) inputs on the wgmma core.

No GPU: the test-side codec matches the kernels' float -> fp8 rounding (hdn_compat.h, compiled
on the host) on every code and on random values; fp8 matmul / conv programs for sm_90 use the
e4m3 / e5m2 wgmma (SASS QGMMA checked where cuobjdump is installed).
GPU (``-m gpu``): fp8 matmul and conv forward against float64 on the decoded inputs."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program
from engine_plugins.cpu_reference.kernels import conv as kconv
from hipdnn_cabi.plugin_sdk import parse_graph
from gpu_testlib import T, conv_fwd, fp8_decode, fp8_encode, graph_bytes, matmul, quantize, relerr

FP8 = ("FP8_E4M3", "FP8_E5M2")
rng = np.random.default_rng(8)


@pytest.mark.parametrize("dtype", FP8)
def test_codec_roundtrip(dtype):
    codes = np.arange(256, dtype=np.uint8)
    vals = fp8_decode(codes, dtype)
    fin = np.isfinite(vals)
    back = fp8_encode(vals[fin], dtype)
    # +-0 both decode to 0 and re-encode with their sign
    assert np.array_equal(back, codes[fin])
    assert fp8_decode(fp8_encode([1e9, -1e9], dtype), dtype).tolist() == \
        ([448.0, -448.0] if dtype == "FP8_E4M3" else [57344.0, -57344.0])


@pytest.mark.parametrize("dtype", FP8)
def test_device_rounding_matches_codec(dtype, tmp_path):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    hdr = codegen.read_kernel("hdn_compat.h")
    body = hdr[hdr.index("struct __align__(1) hdn_fp8e4m3"):hdr.index("// raw 16-bit access")]
    vals = np.concatenate([rng.standard_normal(3000) * s for s in (1e-3, 0.1, 3, 100, 1e4)] +
                          [fp8_decode(np.arange(256, dtype=np.uint8), dtype)])
    vals = vals[np.isfinite(vals)].astype(np.float32)
    mb, bias, maxc = {"FP8_E4M3": (3, 7, 0x7E), "FP8_E5M2": (2, 15, 0x7B)}[dtype]
    src = "\n".join([
        "#include <cstdio>", "#include <cstring>", "#include <cmath>", "#define __device__",
        "#define __forceinline__ inline", "#define __align__(n) alignas(n)",
        "typedef unsigned short hdn_u16; struct hdn_half { hdn_u16 bits; };",
        "static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }",
        "static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }",
        "static inline float hdn_to_float(hdn_half) { return 0.f; }",
        "template <class T> T hdn_from_float(float f);", body,
        "int main() { float v; while (scanf(\"%f\", &v) == 1) "
        f"printf(\"%u\\n\", (unsigned)hdn_fp8_code<{mb}, {bias}, {maxc}u>(v)); return 0; }}"])
    f = tmp_path / "fp8.cpp"
    f.write_text(src)
    exe = tmp_path / "fp8"
    subprocess.run([cxx, "-O1", "-std=c++17", "-w", str(f), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], input="\n".join(repr(float(x)) for x in vals), capture_output=True,
                         text=True, check=True).stdout.split()
    got = np.array([int(x) for x in out], np.uint8)
    assert np.array_equal(got, fp8_encode(vals.astype(np.float64), dtype))


def _mm_graph(dtype, out_dtype, B=2, M=130, K=96, N=72, bt=False):
    a = T(1, [B, M, K], dtype)
    b = T(2, [B, K, N], dtype, strides=[K * N, 1, K] if bt else [K * N, N, 1])
    c = T(3, [B, M, N], out_dtype)
    return a, b, c, graph_bytes([a, b, c], [matmul(1, 2, 3)])


def _conv_graph(dtype, lay, C):
    x, w, y = T(1, [2, C, 10, 10], dtype, lay), T(2, [32, C, 3, 3], dtype, lay), T(3, [2, 32, 10, 10], "HALF", lay)
    return x, w, y, graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1])])


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_programs_on_wgmma(dtype):
    _, _, _, g = _mm_graph(dtype, "HALF")
    p = build_program(parse_graph(g), arch="sm_90")
    ks = [s[2] for s in p.steps if s[0] == "launch"]
    assert ks == ["hdn_transpose", "hdn_gemm_wgmma"], ks
    src = [s for s in p.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"][0][1]
    assert f"#define WG_FP8 {1 if dtype == 'FP8_E4M3' else 2}" in src
    for lay, C in (("nhwc", 128), ("nchw", 16)):
        _, _, _, g = _conv_graph(dtype, lay, C)
        p = build_program(parse_graph(g), arch="sm_90")
        assert "hdn_gemm_wgmma" in [s[2] for s in p.steps if s[0] == "launch"]
    # no Hopper: the SIMT core converts fp8 in its loads
    assert [s[2] for s in build_program(parse_graph(g), arch="sm_80").steps] == ["hdn_gemm_simt"]


def test_fp8_sources_compile_sm90a_with_fp8_qgmma(tmp_path):
    try:
        from hipdnn_cabi.device import compiler
        c = compiler("cuda")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")
    import test_kernel_sources as tks
    exe, env = tks._cuobjdump()
    hdr = codegen.headers()
    for dtype in FP8:
        graphs = [_mm_graph(dtype, "HALF")[3], _mm_graph(dtype, dtype, bt=True)[3],
                  _conv_graph(dtype, "nhwc", 128)[3], _conv_graph(dtype, "nchw", 16)[3]]
        for g in graphs:
            for st in build_program(parse_graph(g), arch="sm_90").steps:
                if st[0] != "launch":
                    continue
                arch = st[6]["arch"] if len(st) > 6 and isinstance(st[6], dict) and "arch" in st[6] else "sm_90"
                img = c.compile(st[1], "fp8.hip", ("--ptxas-options=-v",), arch, hdr)
                if st[2] != "hdn_gemm_wgmma":
                    continue
                assert " 0 bytes spill stores" in c.last_log, c.last_log
                if exe:
                    f = tmp_path / "k.cubin"
                    f.write_bytes(img)
                    sass = subprocess.run([exe, "-sass", str(f)], capture_output=True, text=True, env=env,
                                          check=True).stdout
                    tag = "E4M3" if dtype == "FP8_E4M3" else "E5M2"
                    assert re.search(r"QGMMA\.\S*" + tag, sass), f"{dtype}: no fp8 wgmma (QGMMA) in the SASS"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("out", ["HALF", "FLOAT", "same"])
@pytest.mark.parametrize("bt", [False, True])
def test_fp8_matmul(R, dtype, out, bt):
    od = dtype if out == "same" else out
    a, b, c, g = _mm_graph(dtype, od, bt=bt)
    av, bv = quantize(rng.standard_normal(a.dims), dtype), quantize(rng.standard_normal(b.dims), dtype)
    res = R.run(g, {a: av, b: bv}, [c])[3]
    ref = np.matmul(av, bv)
    tol = 4e-3 if od != dtype else (0.07 if dtype == "FP8_E4M3" else 0.14)
    e = relerr(res, quantize(ref, od) if od in FP8 else ref)
    assert np.all(np.isfinite(res)) and e < tol, e


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("lay,C", [("nhwc", 128), ("nchw", 16), ("nhwc", 24)])
def test_fp8_conv_fwd(R, dtype, lay, C):
    x, w, y, g = _conv_graph(dtype, lay, C)
    xv, wv = quantize(rng.standard_normal(x.dims), dtype), quantize(rng.standard_normal(w.dims) * 0.3, dtype)
    res = R.run(g, {x: xv, w: wv}, [y])[3]
    ref = kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], "CROSS_CORRELATION", compute_dtype=np.float64)
    e = relerr(res, quantize(ref, "HALF"))
    assert np.all(np.isfinite(res)) and e < 4e-3, e


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_output_epilogue_packs_bytes(dtype):
    """An fp8 GEMM output stores 8 packed bytes (uint2), never a float4 (the device run that
    found the misaligned float4 store: engine store8 for 1-byte outputs)."""
    _, _, _, g = _mm_graph(dtype, dtype, bt=True)
    p = build_program(parse_graph(g), arch="sm_90")
    src = [s for s in p.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"][0][1]
    body = src[src.index("void store_c8"):]
    body = body[:body.index("\n}\n")]
    assert "uint2" in body and "float4" not in body
