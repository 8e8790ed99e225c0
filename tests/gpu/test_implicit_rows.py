"""CI (no GPU): the precomputed implicit-GEMM addressing (implicit.py, ``A_ROWS`` of the wgmma
producer) gives the same element offset / padding decision as the generic ``a_off`` for every
row and every 16-byte chunk of every k tile - compiled on the host with the C++ compiler
(skipped without one)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from engine_plugins.hip_kernels.codegen import GemmSpec
from engine_plugins.hip_kernels.ops.conv import _spec_conv_bwd_data, _spec_conv_fwd
from hipdnn_cabi.plugin_sdk import parse_graph
from gpu_testlib import T, conv_bwd_data, conv_fwd, graph_bytes

CASES = [  # kind, N, C, H, W, K, R, S, pad, stride, dil, bk
    ("fwd", 2, 64, 9, 7, 32, 3, 3, 1, 1, 1, 64),
    ("fwd", 1, 128, 8, 8, 16, 3, 3, 2, 2, 2, 64),
    ("fwd", 2, 32, 6, 5, 8, 1, 1, 0, 2, 1, 32),
    ("fwd", 1, 64, 11, 1, 8, 5, 1, 2, 1, 1, 64),
    ("data", 2, 64, 9, 7, 64, 3, 3, 1, 1, 1, 64),
    ("data", 1, 32, 7, 7, 128, 3, 3, 2, 1, 2, 64),
]


def _node_r(kind, N, C, H, W, K, R, S, pad, st, dil):
    P = (H + 2 * pad - dil * (R - 1) - 1) // st + 1
    Q = (W + 2 * pad - dil * (S - 1) - 1) // st + 1
    x, w, y = T(1, [N, C, H, W], "HALF", "nhwc"), T(2, [K, C, R, S], "HALF", "nhwc"), T(3, [N, K, P, Q], "HALF", "nhwc")
    a = ([pad, pad], [st, st], [dil, dil])
    if kind == "fwd":
        g = parse_graph(graph_bytes([x, w, y], [conv_fwd(1, 2, 3, *a)]))
        roles = {"x": g.tensors[1], "w": g.tensors[2], "y": g.tensors[3]}
    else:
        g = parse_graph(graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, *a)]))
        roles = {"dy": g.tensors[3], "w": g.tensors[2], "dx": g.tensors[1]}
    return g.nodes[0], roles


@pytest.mark.parametrize("case", CASES)
def test_rows_match_a_off(case, tmp_path):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    kind, *geo, bk = case
    node, r = _node_r(kind, *geo)
    spec = GemmSpec()
    (_spec_conv_fwd if kind == "fwd" else _spec_conv_bwd_data)(spec, node, r)
    assert spec.a_mode == 1 and spec.a_rows is not None
    rows = spec.a_rows(bk)
    assert rows
    chunk = 8 if bk == 64 else 4
    src = "\n".join([
        "#include <cstdio>", "#define __device__", "#define __forceinline__ inline",
        f"long long a_off(int b, int m, int k) {{ {spec.load_a} }}", rows,
        "int main() { long long bad = 0, n = 0;",
        f"  for (int m = 0; m < {spec.M + 5}; ++m) {{ wg_arow rw = a_row(0, m);",
        f"    for (int k0 = 0; k0 < {spec.K}; k0 += {bk}) {{ wg_atap tp = a_tap(k0);",
        f"      for (int c = 0; c < {bk}; c += {chunk}) {{",
        f"        long long ref = m < {spec.M} ? a_off(0, m, k0 + c) : -1;",
        "        bool ok = a_in(rw, tp); long long o = (long long)(rw.base + tp.off) + c;",
        "        ++n; if ((ref < 0) != !ok || (ok && o != ref)) { if (bad < 5) printf(\"m %d k %d ref %lld got %lld ok %d\\n\", m, k0 + c, ref, o, ok); ++bad; } } } }",
        "  printf(\"checked %lld bad %lld\\n\", n, bad); return bad != 0; }"])
    f = tmp_path / "rows.cpp"
    f.write_text(src)
    exe = tmp_path / "rows"
    subprocess.run([cxx, "-O1", "-std=c++17", "-w", str(f), "-o", str(exe)], check=True)
    res = subprocess.run([str(exe)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
    assert "bad 0" in res.stdout and "checked 0 " not in res.stdout, res.stdout
