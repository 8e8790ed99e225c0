"""CI (no GPU): every kernel source - the .hip bodies and the sources generated for a sample of
graphs (every op family x dtype x layout) - compiles for sm_90 with NVRTC, where the NVRTC
wheel is importable; skipped cleanly otherwise."""
from __future__ import annotations

import glob
import os

import pytest

from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

from gpu_testlib import int8_sample_graphs, nvrtc_or_skip, sample_graphs


_compiler = nvrtc_or_skip


def test_hip_sources_compile_sm90():
    c = _compiler()
    hdr = codegen.headers()
    files = sorted(glob.glob(os.path.join(codegen.KDIR, "*.hip")))
    assert files
    for f in files:
        with open(f) as fh:
            img = c.compile(fh.read(), os.path.basename(f), (), "sm_90", hdr)
        assert len(img) > 0, f


@pytest.mark.parametrize("mma", [False, True])
def test_generated_sources_compile_sm90(mma):
    c = _compiler()
    hdr = codegen.headers()
    n = 0
    for name, g in sample_graphs() + int8_sample_graphs():
        prog = build_program(parse_graph(g), use_mma=mma)
        for st in prog.steps:
            if st[0] == "launch":
                c.compile(st[1], f"{name}_{st[2]}.hip", (), "sm_90", hdr)
                n += 1
    assert n > 20


def test_programs_without_compiler():
    # program generation itself needs no GPU and no compiler
    for name, g in sample_graphs() + int8_sample_graphs():
        prog = build_program(parse_graph(g))
        assert prog.steps, name
        if name.startswith("conv_bias_relu"):
            launches = [s[2] for s in prog.steps if s[0] == "launch"]
            if any("Winograd" in n for n in prog.notes):     # fused into the output transform
                assert len(launches) == 4 and launches[-1].startswith("hdn_wino_out_"), launches
            else:
                assert len(launches) == 1, "epilogue not fused"
        if name.startswith("pw_"):
            assert len(prog.steps) == 1, "pointwise chain not fused into one kernel"


# ---------------------------------------------------------------- the Hopper GEMM core (sm_90a)
def _cuobjdump():
    """cuobjdump (+ the nvdisasm it runs) from PATH or the nvidia-cuda-cuobjdump /
    nvidia-cuda-nvdisasm wheels (the [test] extra); None when neither is installed."""
    import shutil
    import sysconfig
    dirs = []
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        dirs += glob.glob(os.path.join(base, "nvidia", "*", "bin"))
        dirs += glob.glob(os.path.join(base, "nvidia", "cuda_cuobjdump", "bin"))
        dirs += glob.glob(os.path.join(base, "nvidia", "cuda_nvdisasm", "bin"))
    path = os.pathsep.join(dirs + [os.environ.get("PATH", "")])
    exe = shutil.which("cuobjdump", path=path)
    if exe is None or shutil.which("nvdisasm", path=path) is None:
        return None, None
    return exe, dict(os.environ, PATH=path)



def _compile_v(c, src, name, arch, hdr):
    """NVRTC with ptxas -v: the image; the kernel spills nothing and (wgmma kernels) ptxas did not
    serialise its wgmma (warnings C7514 / C7508)."""
    img = c.compile(src, f"{name}.hip", ("--ptxas-options=-v",), arch, hdr)
    assert " 0 bytes spill stores" in c.last_log, (name, c.last_log)
    assert "C7514" not in c.last_log and "C7508" not in c.last_log, (name, "wgmma serialised", c.last_log)
    return img


def _sass(exe, env, tmp_path, name, img):
    """The SASS text of a compiled cubin image (cuobjdump ``exe`` from :func:`_cuobjdump`)."""
    import subprocess
    cub = tmp_path / f"{name}.cubin"
    cub.write_bytes(img)
    return subprocess.run([exe, "-sass", str(cub)], capture_output=True, text=True, env=env,
                          check=True).stdout

def _wgmma_steps():
    from engine_plugins.hip_kernels.gemm_core import choose_core
    assert choose_core("HALF", "HALF", "sm_90") == "wgmma"
    out = []
    for name, g in sample_graphs():
        prog = build_program(parse_graph(g), use_mma=True, arch="sm_90")
        for st in prog.steps:
            if st[0] == "launch" and st[2] == "hdn_gemm_wgmma":
                out.append((name, st))
        # fp32 with the TF32_MATH knob: the same core with tf32 wgmma (NCHW through transposes)
        if "_FLOAT_" in name + "_" and name.startswith(("matmul", "conv_FLOAT", "conv_bwd_data")):
            prog = build_program(parse_graph(g), use_mma=True, arch="sm_90", tf32=True)
            for st in prog.steps:
                if st[0] == "launch" and st[2] == "hdn_gemm_wgmma":
                    out.append(("tf32_" + name, st))
    return out


def test_wgmma_header_not_stale():
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, os.path.join(root, "tools", "gen_wgmma.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_source_compiles_sm90a_and_gemm_core_is_hgmma(tmp_path):
    """Every .hip body compiles for sm_90a, and so do the GEMM-core sources generated for the
    sample graphs (each GEMM family x layout); their SASS holds HGMMA (the wgmma tensor
    core instructions), the matmul ones the tensor copy engine (UTMALDG), and none spills - so
    no change can fall back to a slower path unnoticed."""
    c = _compiler()
    hdr = codegen.headers()
    for f in sorted(glob.glob(os.path.join(codegen.KDIR, "*.hip"))):
        with open(f) as fh:
            assert c.compile(fh.read(), os.path.basename(f), (), "sm_90a", hdr)
    steps = _wgmma_steps()
    assert len(steps) >= 10
    # every GEMM family x layout in half, matmul in bfloat16 too (the rest differs only in types)
    steps = [(n, st) for n, st in steps if "HALF" in n or n.startswith(("matmul", "tf32_"))]
    assert any(n.startswith("tf32_") for n, _ in steps)
    exe, env = _cuobjdump()
    seen = set()
    for name, st in steps:
        if st[1] in seen:
            continue
        seen.add(st[1])
        img = _compile_v(c, st[1], name, st[6]["arch"], hdr)
        if exe is None:
            continue
        sass = _sass(exe, env, tmp_path, name, img)
        assert "HGMMA" in sass, f"{name}: the GEMM core compiled without wgmma"
        assert "HMMA" not in sass.replace("HGMMA", ""), name
        if name.startswith(("matmul", "tf32_matmul")):
            assert "UTMALDG" in sass, f"{name}: dense operands not on the tensor copy engine"
        if name.startswith("tf32_"):
            assert "TF32" in sass, f"{name}: not the tf32 wgmma"
    if exe is None:
        pytest.skip("cuobjdump/nvdisasm not installed (pip install nvidia-cuda-cuobjdump "
                    "nvidia-cuda-nvdisasm): SASS not inspected")


def test_small_plans_need_no_workspace():
    """Batchnorm (all kinds) and reductions keep their statistics/partials in the plan's own
    scratch: workspace 0, as hipDNN's batchnorm samples expect (they pass none)."""
    seen = set()
    for name, g in sample_graphs():
        if name.startswith(("bn_", "reduce_")):
            prog = build_program(parse_graph(g))
            assert prog.ws_size == 0, (name, prog.ws_size)
            if name.startswith(("bn_train", "bn_bwd", "reduce_all")):
                assert prog.scratch_size > 0, name
            seen.add(name.split("_FLOAT")[0].split("_HALF")[0].split("_BFLOAT16")[0])
    assert {"bn_train", "bn_inf", "bn_inf_var", "bn_bwd", "reduce_rows", "reduce_all"} <= seen, seen


# ---------------------------------------------------------------- grouped GEMM users (MoE)
def test_moe_on_the_wgmma_core_is_hgmma_and_tma(tmp_path):
    """MoE grouped matmul (forward, every routing mode) and its weight gradient on Hopper run
    on the wgmma core with the grouped tile scheduler: the sources compile for sm_90a without
    spills, HGMMA in SASS, and the forward's dense operands on the tensor copy engine."""
    from ext_samples import moe, moe_bwd
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    graphs = [(f"moe_{m}_{dt}", moe(dt, m, 300, 136, 200, 4, G=8)[1])
              for m in ("NONE", "GATHER", "SCATTER") for dt in ("HALF", "BFLOAT16")]
    graphs += [("moe_kcontig", moe("BFLOAT16", "NONE", 300, 136, 200, 4, w_k_contig=True)[1]),
               ("moe_bwd", moe_bwd("HALF", 300, 136, 200, 4)[1])]
    for name, g in graphs:
        prog = build_program(parse_graph(g), use_mma=True, arch="sm_90")
        st = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"]
        assert len(st) == 1, (name, prog.notes)
        st = st[0]
        assert "#define WG_SCHED_GROUPED" in st[1], name
        img = _compile_v(c, st[1], name, st[6]["arch"], hdr)
        if exe is None:
            continue
        sass = _sass(exe, env, tmp_path, name, img)
        assert "HGMMA" in sass, name
        if "bwd" not in name:
            assert "UTMALDG" in sass, f"{name}: dense operands not on the tensor copy engine"


def test_grouped_tile_scheduler_covers_every_row_once(tmp_path):
    """The M-grouped scheduler of gemm_wgmma.hip (compiled for the host): over random group
    sizes (empty groups included) its units visit every (row tile of a group, n tile) exactly
    once, with m0 inside the unit's group."""
    import shutil
    import subprocess
    import numpy as np
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    body = codegen.read_kernel("gemm_wgmma.hip")
    unit = body[body.index("__device__ __forceinline__ void wg_unit("):]
    unit = unit[:unit.index("\n}\n") + 3]
    sched = body[body.index("// ---- grouped tile scheduler"):body.index("// ---- producer gathers")]
    G, BN, GN, GM = 7, 256, 1000, 3000
    rng = np.random.default_rng(5)
    cuts = np.sort(rng.integers(0, GM + 1, G - 1))
    cuts[2] = cuts[1]                       # an empty group
    off = [13] + [int(max(13, v)) for v in cuts]
    src = f"""
#include <cstdio>
#define __device__
#define __forceinline__ inline
#define __restrict__
#define GM {GM}
#define GN {GN}
#define GK 64
#define GSPLIT 1
#define GKSPLIT GK
#define WG_BM 128
#define WG_BN {BN}
#define WG_TM ((GM + WG_BM - 1) / WG_BM)
#define WG_TN ((GN + WG_BN - 1) / WG_BN)
#define WG_TILES (WG_TM * WG_TN)
#define WG_UNITS (WG_TILES * 1 * GSPLIT)
#define WG_GROUP 8
#define WG_SCHED_GROUPED 1
#define WG_SCHED_G {G}
#define WG_SCHED_OFF off
#define WG_SCHED_OK 1
#define WG_SCHED_TILES tiles
{unit}
{sched}
int main() {{
  const int off[{G}] = {{{", ".join(map(str, off))}}};
  int tiles[{G} + 1]; int acc = 0;
  for (int g = 0; g < {G}; ++g) {{ tiles[g] = acc; const int hi = g + 1 < {G} ? off[g + 1] : GM;
    acc += (hi - off[g] + 127) / 128; }}
  tiles[{G}] = acc;
  const int n = WG_NUNITS;
  for (int u = 0; u < n; ++u) {{ int b, m0, n0, kb, ke; WG_UNIT(u, b, m0, n0, kb, ke);
    printf("%d %d %d\\n", b, m0, n0); }}
  return 0;
}}
"""
    (tmp_path / "s.cpp").write_text(src)
    subprocess.run([cxx, "-O1", "-o", str(tmp_path / "s"), str(tmp_path / "s.cpp")], check=True)
    out = subprocess.run([str(tmp_path / "s")], capture_output=True, text=True, check=True).stdout
    seen = [tuple(map(int, ln.split())) for ln in out.split("\n") if ln]
    want = set()
    for g in range(G):
        lo, hi = off[g], off[g + 1] if g + 1 < G else GM
        for m0 in range(lo, hi, 128):
            for n0 in range(0, GN, BN):
                want.add((g, m0, n0))
    assert len(seen) == len(set(seen)) and set(seen) == want


def test_wgrad_tensor_maps_and_strided_dgrad_compile_sm90a(tmp_path):
    """Backward filter on 4-D tensor maps (ResNet conv3 3 x 3 and a stride-2 1 x 1, fp16 NHWC)
    and the strided 1 x 1 backward-data decomposition: planned as such (notes), compiled for
    sm_90a without spills, HGMMA + UTMALDG (both operands on the copy engine) in the SASS."""
    from gpu_testlib import T, conv_bwd_data, conv_bwd_filter, graph_bytes

    def nhwc(d):
        return [d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]]
    cases = []
    for C, K, H, R, st, pad in ((128, 128, 28, 3, 1, 1), (512, 1024, 28, 1, 2, 0)):
        P = (H + 2 * pad - R) // st + 1
        tx = T(1, [32, C, H, H], "HALF", strides=nhwc([32, C, H, H]))
        tw = T(2, [K, C, R, R], "HALF", strides=nhwc([K, C, R, R]))
        ty = T(3, [32, K, P, P], "HALF", strides=nhwc([32, K, P, P]))
        cases.append((f"wgrad_{C}_{R}_{st}", "4-D tensor maps",
                      graph_bytes([tx, ty, tw], [conv_bwd_filter(1, 3, 2, [pad, pad], [st, st], [1, 1])])))
        cases.append((f"dgrad_{C}_{R}_{st}", "strided 1x1" if st > 1 else "im2col tensor map",
                      graph_bytes([ty, tw, tx], [conv_bwd_data(3, 2, 1, [pad, pad], [st, st], [1, 1])])))
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    for name, note, g in cases:
        prog = build_program(parse_graph(g), use_mma=True, arch="sm_90")
        assert any(note in n for n in prog.notes), (name, prog.notes)
        st = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"][0]
        img = _compile_v(c, st[1], name, st[6]["arch"], hdr)
        if exe is None:
            continue
        sass = _sass(exe, env, tmp_path, name, img)
        assert "HGMMA" in sass and "UTMALDG" in sass, name
        if "TMA AB" in " ".join(prog.notes):
            assert "LDGSTS" not in sass, f"{name}: an operand is still gathered by the producer"


def test_tma_store_staging_matches_the_swizzled_box(tmp_path):
    """The TMA-store epilogue's staging offsets (wg_cs_off in gemm_wgmma.hip, compiled on the
    host) put every accumulator element (row r = 16 w + g (+ 8), columns 8 j + 2 t4 (+ 1) of the
    wgmma m64nN fragment) where the tensor copy engine's 128-byte swizzle reads that element of
    the 64 x 64 box (16-byte chunk c of row r at chunk c ^ (r & 7)), each element once, and the
    32 lanes of one shared store hit 32 different banks."""
    import shutil
    import subprocess
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    body = codegen.read_kernel("gemm_wgmma.hip")
    fn = body[body.index("__device__ __forceinline__ unsigned wg_cs_off("):]
    fn = fn[:fn.index("\n}\n") + 3]
    src = ("#include <cstdio>\n#define __device__\n#define __forceinline__ inline\n" + fn +
           "int main() { for (int w = 0; w < 4; ++w) for (int l = 0; l < 32; ++l) for (int j = 0; j < 32; ++j)"
           " for (int h = 0; h < 2; ++h) { const int r = 16 * w + (l >> 2) + 8 * h;"
           " printf(\"%d %d %d %d %u\\n\", w, l, j, h, wg_cs_off(r, j, l & 3)); } return 0; }\n")
    (tmp_path / "c.cpp").write_text(src)
    subprocess.run([cxx, "-O1", "-o", str(tmp_path / "c"), str(tmp_path / "c.cpp")], check=True)
    out = subprocess.run([str(tmp_path / "c")], capture_output=True, text=True, check=True).stdout
    seen, banks = set(), {}
    for ln in out.split("\n"):
        if not ln:
            continue
        w, lane, j, h, off = map(int, ln.split())
        box, rem = divmod(off, 8192)
        row, pos = divmod(rem, 128)
        chunk = (pos >> 4) ^ (row & 7)                 # the 128-byte swizzle, undone
        col = box * 64 + chunk * 8 + (pos & 15) // 2
        assert off % 4 == 0 and (row, col) == (16 * w + (lane >> 2) + 8 * h, 8 * j + 2 * (lane & 3)), ln
        seen.add((row, col))
        banks.setdefault((w, j, h), set()).add((off // 4) % 32)
    assert len(seen) == 64 * 128                       # 64 rows x 256 columns in column pairs
    assert all(len(b) == 32 for b in banks.values())


def test_tma_store_epilogue_planned_and_compiled_sm90a(tmp_path):
    """The ResNet-50 1 x 1 expand (fp16 / bf16 NHWC, plain and with bias + ReLU fused) plans the
    TMA-store epilogue with both operands on the copy engine; its kernel compiles for sm_90a with
    no spills and no serialised wgmma (C7514), HGMMA + UTMALDG + UTMASTG and no producer
    gathers (LDGSTS) or plain global stores in the SASS.  The 3 x 3 layers keep the register
    epilogue when gathered (``CONV_IM2COL=0``; on the im2col map they take the TMA store too:
    test_conv_fwd_im2col_planned_and_compiled_sm90a); the knob 0 turns it off."""
    import re
    from gpu_testlib import T, conv_fwd, graph_bytes, pw

    def nhwc(d):
        return [d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]]

    def graph(C, K, H, R, dtype, fused):
        x = T(1, [32, C, H, H], dtype, strides=nhwc([32, C, H, H]))
        w = T(2, [K, C, R, R], dtype, strides=nhwc([K, C, R, R]))
        y = T(6, [32, K, H, H], dtype, strides=nhwc([32, K, H, H]))
        pad = [R // 2] * 2
        if not fused:
            return graph_bytes([x, w, y], [conv_fwd(1, 2, 6, pad, [1, 1], [1, 1])])
        cv = T(3, [32, K, H, H], "FLOAT", strides=nhwc([32, K, H, H]), virtual=True)
        bv = T(5, [32, K, H, H], "FLOAT", strides=nhwc([32, K, H, H]), virtual=True)
        b = T(4, [1, K, 1, 1], dtype, strides=[K, 1, K, K])
        return graph_bytes([x, w, cv, b, bv, y], [conv_fwd(1, 2, 3, pad, [1, 1], [1, 1]),
                                                 pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    for dtype in ("HALF", "BFLOAT16"):
        for fused in (False, True):
            prog = build_program(parse_graph(graph(64, 256, 56, 1, dtype, fused)), use_mma=True, arch="sm_90")
            assert any("TMA-store epilogue" in n for n in prog.notes), prog.notes
            assert any("TMA AB" in n for n in prog.notes), prog.notes
            st = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"][0]
            assert st[6].get("tstore") and st[6]["shmem"] <= 227 * 1024
            assert sum(1 for a in st[5] if a[0] == "tmap") == 3
            name = f"tstore_{dtype}_{int(fused)}"
            img = _compile_v(c, st[1], name, st[6]["arch"], hdr)
            if exe is None:
                continue
            sass = _sass(exe, env, tmp_path, name, img)
            assert "HGMMA" in sass and "UTMALDG" in sass and "UTMASTG" in sass, name
            assert "LDGSTS" not in sass and not re.search(r"\bSTG\.", sass), name
    old_i2c = os.environ.get("HIPDNN_CABI_HIP_CONV_IM2COL")
    os.environ["HIPDNN_CABI_HIP_CONV_IM2COL"] = "0"     # the gathered 3 x 3 layers: register epilogue
    try:
        for C, K, H in ((64, 64, 56), (128, 128, 28), (256, 256, 14), (512, 512, 7)):
            prog = build_program(parse_graph(graph(C, K, H, 3, "HALF", False)), use_mma=True, arch="sm_90")
            assert not any("TMA-store" in n for n in prog.notes), (C, prog.notes)
    finally:
        if old_i2c is None:
            del os.environ["HIPDNN_CABI_HIP_CONV_IM2COL"]
        else:
            os.environ["HIPDNN_CABI_HIP_CONV_IM2COL"] = old_i2c
    old = os.environ.get("HIPDNN_CABI_HIP_TMA_STORE")
    os.environ["HIPDNN_CABI_HIP_TMA_STORE"] = "0"
    try:
        prog = build_program(parse_graph(graph(64, 256, 56, 1, "HALF", False)), use_mma=True, arch="sm_90")
        assert not any("TMA-store" in n for n in prog.notes), prog.notes
    finally:
        if old is None:
            del os.environ["HIPDNN_CABI_HIP_TMA_STORE"]
        else:
            os.environ["HIPDNN_CABI_HIP_TMA_STORE"] = old


# ------------------------------------------- SIMT NCHW paths, dw^T wgrad
def test_s20b_sources_compile_sm90a_without_spills(tmp_path):
    """The ResNet-50 sources of the new paths compile for sm_90a with no spills: fp32 NCHW
    forward on NHWC copies (conv2 3x3, conv3) and on m-vectors (1x1 expand, <= 128 registers:
    two CTAs per SM, as the NHWC kernel), and the fp16 backward filter as dw^T on tensor maps
    (conv2 3x3: HGMMA + UTMALDG in SASS, no serialised wgmma pipeline)."""
    import re
    from test_tile_model import _resnet_prog
    c = _compiler()
    hdr = codegen.headers()
    for name in ("conv2_3x3", "conv3_3x3", "conv2_1x1_expand"):
        prog = _resnet_prog(name, "FLOAT", "nchw")
        for st in prog.steps:
            if st[0] != "launch":
                continue
            _compile_v(c, st[1], f"{name}_{st[2]}", "sm_90a", hdr)
            if st[2] == "hdn_gemm_simt" and name == "conv2_1x1_expand":
                regs = int(re.search(r"Used (\d+) registers", c.last_log).group(1))
                assert regs <= 128, (name, regs)
    prog = _resnet_prog("conv2_3x3", "HALF", "nhwc", op="wgrad")
    assert any("dw^T GEMM" in n for n in prog.notes), prog.notes
    st = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"][0]
    assert "#define WGR_SWAP 1" in st[1]
    img = _compile_v(c, st[1], "wgrad_swap", st[6]["arch"], hdr)
    exe, env = _cuobjdump()
    if exe is None:
        pytest.skip("cuobjdump/nvdisasm not installed: SASS not inspected")
    sass = _sass(exe, env, tmp_path, "wgrad_swap", img)
    assert "HGMMA" in sass and "UTMALDG" in sass


# ------------------------------------------- conv forward on im2col maps
def test_conv_fwd_im2col_planned_and_compiled_sm90a(tmp_path):
    """fp16 / bf16 NHWC convolution forward plans the activations on an im2col tensor map with
    the TMA-store epilogue (the ResNet-50 3 x 3 layers and the 1 x 1 stride-2 one; a stride-2,
    C = 96 case); the kernels compile for sm_90a with no spills and no serialised wgmma (C7514),
    HGMMA + UTMALDG (im2col mode for A) + UTMASTG and no producer gathers (LDGSTS) in the SASS.
    The unit-stride 1 x 1 expand keeps its dense-matrix A by default; the knob 0 restores the
    gathers and the register epilogue."""
    from gpu_testlib import T, conv_fwd, graph_bytes

    def nhwc(d):
        return [d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]]

    def graph(N, C, K, H, R, st, pad, dtype="HALF"):
        P = (H + 2 * pad - R) // st + 1
        x = T(1, [N, C, H, H], dtype, strides=nhwc([N, C, H, H]))
        w = T(2, [K, C, R, R], dtype, strides=nhwc([K, C, R, R]))
        y = T(3, [N, K, P, P], dtype, strides=nhwc([N, K, P, P]))
        return graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [pad, pad], [st, st], [1, 1])])
    cases = [("i2c_conv2", graph(32, 64, 64, 56, 3, 1, 1), "auto"),
             ("i2c_conv2_bf16", graph(32, 64, 64, 56, 3, 1, 1, "BFLOAT16"), "auto"),
             ("i2c_conv3", graph(32, 128, 128, 28, 3, 1, 1), "auto"),
             ("i2c_conv4", graph(32, 256, 256, 14, 3, 1, 1), "auto"),
             ("i2c_conv5", graph(32, 512, 512, 7, 3, 1, 1), "auto"),
             ("i2c_s2_c96", graph(2, 96, 64, 11, 3, 2, 2), "auto"),
             ("i2c_1x1_s2", graph(32, 512, 1024, 28, 1, 2, 0), "auto"),
             ("i2c_1x1_expand_knob1", graph(32, 64, 256, 56, 1, 1, 0), "1")]
    c = _compiler()
    hdr = codegen.headers()
    exe, env = _cuobjdump()
    old = os.environ.get("HIPDNN_CABI_HIP_CONV_IM2COL")
    try:
        for name, g, knob in cases:
            os.environ["HIPDNN_CABI_HIP_CONV_IM2COL"] = knob
            prog = build_program(parse_graph(g), use_mma=True, arch="sm_90")
            assert any("im2col tensor map" in n for n in prog.notes), (name, prog.notes)
            assert any("TMA AB" in n for n in prog.notes), (name, prog.notes)
            assert any("TMA-store epilogue" in n for n in prog.notes), (name, prog.notes)
            st = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"][0]
            tm = [a for a in st[5] if a[0] == "tmap"]
            assert len(tm[0]) == 8 and tm[0][7][2:] == (64, 128), tm[0]     # im2col: 64 channels x 128 pixels
            img = _compile_v(c, st[1], name, st[6]["arch"], hdr)
            if exe is None:
                continue
            sass = _sass(exe, env, tmp_path, name, img)
            assert "HGMMA" in sass and "UTMALDG.4D.IM2COL" in sass and "UTMASTG" in sass, name
            assert "LDGSTS" not in sass, f"{name}: the producer still gathers"
        os.environ["HIPDNN_CABI_HIP_CONV_IM2COL"] = "auto"
        prog = build_program(parse_graph(graph(32, 64, 256, 56, 1, 1, 0)), use_mma=True, arch="sm_90")
        assert not any("im2col" in n for n in prog.notes), prog.notes
        os.environ["HIPDNN_CABI_HIP_CONV_IM2COL"] = "0"
        prog = build_program(parse_graph(cases[0][1]), use_mma=True, arch="sm_90")
        assert not any("im2col" in n for n in prog.notes) and any("TMA B" in n for n in prog.notes), prog.notes
        assert not any("TMA-store" in n for n in prog.notes), prog.notes
    finally:
        if old is None:
            os.environ.pop("HIPDNN_CABI_HIP_CONV_IM2COL", None)
        else:
            os.environ["HIPDNN_CABI_HIP_CONV_IM2COL"] = old


def test_im2col_tensor_map_encode_arguments():
    """CudaRuntime._encode_im2col hands cuTensorMapEncodeIm2col the plan's im2col map (the
    ops/conv._fwd_im2col tuple of the ResNet conv3 layer) in the driver's order: rank 4, dims and
    byte strides innermost first, the (W, H) corners, 64 channels per pixel, 128 pixels per
    column, the traversal steps, 128-byte swizzle, zero fill - checked against a recording
    stand-in for the driver module (no GPU, no libcuda)."""
    import types
    from engine_plugins.hip_kernels.codegen import GemmSpec
    from engine_plugins.hip_kernels.ops.conv import _fwd_im2col
    from hipdnn_cabi.device.cuda import CudaRuntime
    seen = {}

    class E:           # enum namespace: attribute name -> itself
        def __getattr__(self, k):
            return k

    class Res:
        CUDA_SUCCESS = 0

    def enc(*a):
        seen["args"] = a
        return (0, "map")
    d = types.SimpleNamespace(CUtensorMapDataType=E(), CUtensorMapInterleave=E(), CUtensorMapSwizzle=E(),
                              CUtensorMapL2promotion=E(), CUtensorMapFloatOOBfill=E(), CUresult=Res,
                              cuuint64_t=int, cuuint32_t=int, cuTensorMapEncodeIm2col=enc)
    spec = GemmSpec()
    spec.ta = spec.tb = "HALF"
    N, C, H, K = 32, 128, 28, 128
    xs = [H * H * C, 1, H * C, C]
    ws = [9 * C, 1, 3 * C, C]
    p = {"stride": [1, 2], "pre_padding": [1, 0], "dilation": [1, 1], "flip": False}
    P = [(H + 2 - 3) // 1 + 1, (H - 3) // 2 + 1]
    i2c = _fwd_im2col(spec, [N, C, H, H], xs, [K, C, 3, 3], ws, P, [3, 3], [H, H], p)
    dtype, dims, strides, _, steps, (lower, upper, cpp, ppc) = i2c["A"]
    CudaRuntime._encode_im2col(d, d.CUtensorMapDataType, dtype, 4096, dims, strides, steps, lower, upper, cpp, ppc)
    a = seen["args"]
    assert a[0] == "CU_TENSOR_MAP_DATA_TYPE_FLOAT16" and a[1] == 4 and a[2] == 4096
    assert list(a[3]) == [C, H, H, N] and list(a[4]) == [2 * C, 2 * H * C, 2 * H * H * C]
    # corners (W, H): W unpadded with stride 2, H padded by 1 with stride 1
    assert list(a[5]) == [0, -1] and list(a[6]) == [(P[1] - 1) * 2 + 1 - H, (P[0] - 1) + 1 - H - 1]
    assert a[7:9] == (64, 128) and list(a[9]) == [1, 2, 1, 1]
    assert a[10:] == ("CU_TENSOR_MAP_INTERLEAVE_NONE", "CU_TENSOR_MAP_SWIZZLE_128B",
                      "CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")
    assert i2c["B"] == ("HALF", (C, 3, 3, K), (2 * C, 2 * 3 * C, 2 * 9 * C))
