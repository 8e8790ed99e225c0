"""Winograd F(2x2, 3x3) for fp32 2-D convolution forward (3 x 3 filter, unit stride and
dilation, one group): the generated transform kernels and the workspace layout of the plan
that ops/conv.py builds from them.

The plan, per execute (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks"):

1. input transform (:func:`input_kernel`): every 4 x 4 input tile d (tiles overlap by 2; the
   output is cut into 2 x 2 tiles, P = N x ceil(Ho / 2) x ceil(Wo / 2) of them; positions in the
   padding or past the edge read zero) -> V = B^T d B, stored as ``V[16][C][Pp]`` (Pp = P
   rounded up to 4; the columns past P are written as zeros), or ``V[16][Pp][C]`` for
   channels-last x (:func:`v_strides`);
2. filter transform (:func:`filter_kernel`): g = w[k, c] (taps flipped for CONVOLUTION mode)
   -> U = G g G^T, stored as ``U[16][C][Kp]`` (Kp = K rounded up to 4, zero columns past K) -
   every execute (filters are inputs; the transform is small next to the GEMMs);
3. 16 batched fp32 GEMMs on the shared GEMM core (SIMT FFMA): ``Mw[t][p][k] = sum_c V[t][c][p]
   U[t][c][k]`` - GEMM m = tile p (A M-major, 16-byte m-vectors; channels-last V:
   K-major, 16-byte k-vectors where C % 4 == 0), n = output channel k (B N-major, 16-byte n-vectors), reduction = input channels c; the result stored as
   ``Mw[16][K][Pp]`` for channel-strided outputs (NCHW) or ``Mw[16][P][Kp]`` for channels-last;
4. output transform (:func:`output_kernel`): y tile = A^T m A (2 x 2 outputs per tile and
   channel; outputs past Ho / Wo skipped), then the plan's fused pointwise run (bias,
   activation, residual) on each output value, as the GEMM epilogue would run it.

Multiplies per output: 16 / 4 = 4 per (c, k) against 9 of the direct convolution (2.25x
fewer).  Numerics: the transforms add a few roundings (the entries of B, G, A are 0, +-1,
+-1/2: V and the output transform are exact sums of 4 terms per stage, U scales by halves);
the relative error against the float64 convolution stays a small multiple of the direct fp32
GEMM's (bounded by ~ C x 2^-24 x the transforms' growth, 4 x 2.25 x 4); cuDNN accepts the same
for FLOAT (its WINOGRAD algorithms).
"""
from __future__ import annotations

from . import codegen as cg

THREADS = 256
TILES = 16          # (4 x 4) transformed elements per tile


def round4(v):
    return -(-int(v) // 4) * 4


def tiling(N, Ho, Wo):
    """(TH, TW, P, Pp): tile rows / columns per image, tiles in all, P rounded up to 4."""
    TH, TW = -(-Ho // 2), -(-Wo // 2)
    P = N * TH * TW
    return TH, TW, P, round4(P)


def _head(name, params):
    return ['#define HDN_GENERATED 1', '#include "hdn_compat.h"', cg.PRELUDE_MATH,
            f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}({", ".join(params)}) {{',
            f"  const long long i = (long long)blockIdx.x * {THREADS} + threadIdx.x;"]


def _grid(total):
    return (max(1, -(-total // THREADS)), 1, 1), (THREADS, 1, 1)


def v_strides(C, Pp, c_fast):
    """V's strides over (t, c, p): ``V[16][Pp][C]`` when ``c_fast`` (channels-last x: GEMM A
    K-major), else ``V[16][C][Pp]`` (A M-major)."""
    return (Pp * C, 1, C) if c_fast else (C * Pp, Pp, 1)


def input_kernel(name, xd, xs, pre, out_hw, Pp, c_fast=False):
    """The input transform: V[t][c][p] = (B^T d B)[t] of the input tile p of channel c, one
    thread per (c, p) - p fastest into ``V[16][C][Pp]`` (neighbouring threads read neighbouring
    input columns), or ``c_fast`` (channels-last x) c fastest into ``V[16][Pp][C]``; tiles
    p >= P written as zeros.  ``xd`` / ``xs``: x's (N, C, H, W) dims and element strides,
    ``pre``: (pad_h, pad_w), ``out_hw``: (Ho, Wo).  B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0;
    0 1 0 -1].  Params (x, V); (src, grid, block)."""
    N, C, H, W = xd
    TH, TW = -(-out_hw[0] // 2), -(-out_hw[1] // 2)
    P = N * TH * TW
    total = C * Pp
    vt, vc, vp = v_strides(C, Pp, c_fast)
    L = _head(name, ["const float* __restrict__ x", "float* __restrict__ V"])
    L += [f"  if (i >= {total}) return;",
          (f"  const int c = (int)(i % {C}); const int p = (int)(i / {C});" if c_fast else
           f"  const int p = (int)(i % {Pp}); const int c = (int)(i / {Pp});"),
          f"  float* v = V + (long long)c * {vc} + (long long)p * {vp};",
          f"  if (p >= {P}) {{",
          "#pragma unroll",
          f"    for (int t = 0; t < {TILES}; ++t) v[(long long)t * {vt}] = 0.f;",
          "    return;", "  }",
          f"  const int tw = p % {TW}; const int rp = p / {TW}; const int th = rp % {TH}; const int n = rp / {TH};",
          f"  const int h0 = 2 * th - {pre[0]}, w0 = 2 * tw - {pre[1]};",
          f"  const float* xb = x + (long long)n * {xs[0]} + (long long)c * {xs[1]};",
          "  float d[4][4];",
          "#pragma unroll",
          "  for (int a = 0; a < 4; ++a) {",
          "#pragma unroll",
          "    for (int e = 0; e < 4; ++e) {",
          "      const int h = h0 + a, w = w0 + e;",
          f"      d[a][e] = (h >= 0 && h < {H} && w >= 0 && w < {W}) ? "
          f"xb[(long long)h * {xs[2]} + (long long)w * {xs[3]}] : 0.f;",
          "    }", "  }",
          # d B (columns), then B^T (rows): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
          "  float q[4][4];",
          "#pragma unroll",
          "  for (int a = 0; a < 4; ++a) {",
          "    q[a][0] = d[a][0] - d[a][2]; q[a][1] = d[a][1] + d[a][2];",
          "    q[a][2] = d[a][2] - d[a][1]; q[a][3] = d[a][1] - d[a][3];",
          "  }",
          "#pragma unroll",
          "  for (int e = 0; e < 4; ++e) {",
          f"    v[(long long)(0 + e) * {vt}] = q[0][e] - q[2][e];",
          f"    v[(long long)(4 + e) * {vt}] = q[1][e] + q[2][e];",
          f"    v[(long long)(8 + e) * {vt}] = q[2][e] - q[1][e];",
          f"    v[(long long)(12 + e) * {vt}] = q[1][e] - q[3][e];",
          "  }", "}"]
    return ("\n".join(L) + "\n",) + _grid(total)


def filter_kernel(name, wd, ws, flip, Kp):
    """The filter transform: U[t][c][k] = (G g G^T)[t] of g = w[k, c] (3 x 3 taps, flipped for
    CONVOLUTION mode), one thread per (c, k) (k fastest, columns k >= K written as zeros).
    G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].  Params (w, U); (src, grid, block)."""
    K, C = wd[0], wd[1]
    total = C * Kp
    L = _head(name, ["const float* __restrict__ wt", "float* __restrict__ U"])
    L += [f"  if (i >= {total}) return;",
          f"  const int k = (int)(i % {Kp}); const int c = (int)(i / {Kp});",
          f"  float* u = U + (long long)c * {Kp} + k;",
          f"  if (k >= {K}) {{",
          "#pragma unroll",
          f"    for (int t = 0; t < {TILES}; ++t) u[(long long)t * {C * Kp}] = 0.f;",
          "    return;", "  }",
          f"  const float* wb = wt + (long long)k * {ws[0]} + (long long)c * {ws[1]};",
          "  float g[3][3];",
          "#pragma unroll",
          "  for (int a = 0; a < 3; ++a) {",
          "#pragma unroll",
          "    for (int e = 0; e < 3; ++e) "
          + ("g[a][e] = wb[(long long)(2 - a) * %d + (long long)(2 - e) * %d];" if flip else
             "g[a][e] = wb[(long long)a * %d + (long long)e * %d];") % (ws[2], ws[3]),
          "  }",
          # G g (rows: 4 x 3), then (G g) G^T (columns: 4 x 4)
          "  float q[4][3];",
          "#pragma unroll",
          "  for (int e = 0; e < 3; ++e) {",
          "    q[0][e] = g[0][e]; q[1][e] = 0.5f * (g[0][e] + g[1][e] + g[2][e]);",
          "    q[2][e] = 0.5f * (g[0][e] - g[1][e] + g[2][e]); q[3][e] = g[2][e];",
          "  }",
          "#pragma unroll",
          "  for (int a = 0; a < 4; ++a) {",
          f"    u[(long long)(4 * a + 0) * {C * Kp}] = q[a][0];",
          f"    u[(long long)(4 * a + 1) * {C * Kp}] = 0.5f * (q[a][0] + q[a][1] + q[a][2]);",
          f"    u[(long long)(4 * a + 2) * {C * Kp}] = 0.5f * (q[a][0] - q[a][1] + q[a][2]);",
          f"    u[(long long)(4 * a + 3) * {C * Kp}] = q[a][2];",
          "  }", "}"]
    return ("\n".join(L) + "\n",) + _grid(total)


def m_layout(channels_last, P, Pp, K, Kp):
    """(strides of Mw over (t, p, k), whether output-transform threads walk k fastest):
    ``Mw[16][P][Kp]`` for channels-last outputs, else ``Mw[16][K][Pp]``."""
    if channels_last:
        return (P * Kp, Kp, 1), True
    return (K * Pp, 1, Pp), False


def output_kernel(name, yd, Pp, mst, k_fast, epi_params, epi_lines):
    """The output transform: y = A^T m A per tile p and channel k (A^T = [1 1 1 0; 0 1 -1 -1]),
    one thread per (p, k) (``k_fast``: k fastest), the 2 x 2 outputs inside (Ho, Wo) each through
    ``epi_lines`` - C statements that read the output coordinates c0..c3 (n, k, oh, ow) and the
    value ``v`` and store it (the plain store or the fused pointwise run).  ``mst``: Mw's
    strides over (t, p, k).  Params (Mw, epilogue params...); (src, grid, block)."""
    N, K, Ho, Wo = yd
    TH, TW = -(-Ho // 2), -(-Wo // 2)
    P = N * TH * TW
    total = P * K
    L = _head(name, ["const float* __restrict__ Mw"] + list(epi_params))
    L += [f"  if (i >= {total}) return;"]
    if k_fast:
        L.append(f"  const int k = (int)(i % {K}); const int p = (int)(i / {K});")
    else:
        L.append(f"  const int p = (int)(i % {P}); const int k = (int)(i / {P});")
    L += [f"  const float* mb = Mw + (long long)p * {mst[1]} + (long long)k * {mst[2]};",
          "  float m[4][4];",
          "#pragma unroll",
          "  for (int a = 0; a < 4; ++a) {",
          "#pragma unroll",
          f"    for (int e = 0; e < 4; ++e) m[a][e] = mb[(long long)(4 * a + e) * {mst[0]}];",
          "  }",
          "  float q[2][4];",
          "#pragma unroll",
          "  for (int e = 0; e < 4; ++e) {",
          "    q[0][e] = m[0][e] + m[1][e] + m[2][e]; q[1][e] = m[1][e] - m[2][e] - m[3][e];",
          "  }",
          f"  const int tw = p % {TW}; const int rp = p / {TW}; const int th = rp % {TH}; const int n = rp / {TH};",
          "#pragma unroll",
          "  for (int a = 0; a < 2; ++a) {",
          "    const float r0 = q[a][0] + q[a][1] + q[a][2], r1 = q[a][1] - q[a][2] - q[a][3];",
          "#pragma unroll",
          "    for (int e = 0; e < 2; ++e) {",
          "      const int oh = 2 * th + a, ow = 2 * tw + e;",
          f"      if (oh >= {Ho} || ow >= {Wo}) continue;",
          "      const float v = e == 0 ? r0 : r1;",
          "      const int c0 = n; const int c1 = k; const int c2 = oh; const int c3 = ow;",
          "      {"] + ["        " + s for s in epi_lines] + ["      }", "    }", "  }", "}"]
    return ("\n".join(L) + "\n",) + _grid(total)


def workspace_bytes(C, K, P, Pp, Kp, channels_last):
    """Bytes of V, U and Mw (fp32)."""
    m = P * Kp if channels_last else K * Pp
    return 4 * TILES * (C * Pp + C * Kp + m)


def transforms_numpy(x, w, pre, post, flip=False):
    """The plan's arithmetic in float64 numpy (V, U, Mw, y): the reference the host emulation
    tests compare each stage with (x: N, C, H, W; w: K, C, 3, 3)."""
    import numpy as np
    Bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
    G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float64)
    At = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)
    N, C, H, W = x.shape
    K = w.shape[0]
    Ho, Wo = H + pre[0] + post[0] - 2, W + pre[1] + post[1] - 2
    TH, TW = -(-Ho // 2), -(-Wo // 2)
    xp = np.zeros((N, C, 2 * TH + 2, 2 * TW + 2))
    hh, ww = min(H, 2 * TH + 2 - pre[0]), min(W, 2 * TW + 2 - pre[1])
    xp[:, :, pre[0]:pre[0] + hh, pre[1]:pre[1] + ww] = x[:, :, :hh, :ww]
    d = np.stack([np.stack([xp[:, :, 2 * i:2 * i + 4, 2 * j:2 * j + 4] for j in range(TW)], 2)
                  for i in range(TH)], 2)                       # N, C, TH, TW, 4, 4
    V = np.einsum("ab,nchwbe,fe->afnchw", Bt, d, Bt)           # 4, 4, N, C, TH, TW
    g = w[:, :, ::-1, ::-1] if flip else w
    U = np.einsum("ab,kcbe,fe->afkc", G, g, G)                 # 4, 4, K, C
    Mw = np.einsum("afkc,afnchw->afnkhw", U, V)
    Y = np.einsum("ia,afnkhw,jf->nkhiwj", At, Mw, At).reshape(N, K, 2 * TH, 2 * TW)
    return V, U, Mw, Y[:, :, :Ho, :Wo]


def applicable_reason(xd, wd, yd, p, G, types):
    """None when the Winograd F(2x2, 3x3) plan applies, else why not: 2-D, one group, FLOAT
    x / w / y with FLOAT compute, a 3 x 3 filter, unit stride and dilation, each padding 0 or
    1, and fewer than 2^31 elements per workspace array."""
    if len(xd) != 4:
        return "not a 2-D convolution"
    if G != 1:
        return "grouped"
    if any(t != "FLOAT" for t in types):
        return "not fp32 data and compute"
    if list(wd[2:]) != [3, 3]:
        return "filter not 3 x 3"
    if any(v != 1 for v in p["stride"] + p["dilation"]):
        return "stride or dilation not 1"
    if any(v not in (0, 1) for v in p["pre_padding"] + p["post_padding"]):
        return "padding not 0 or 1"
    _, _, P, Pp = tiling(xd[0], yd[2], yd[3])
    if TILES * max(wd[1] * Pp, wd[1] * round4(wd[0]), round4(yd[1]) * Pp) >= 2 ** 31 or P * yd[1] >= 2 ** 31:
        return "workspace arrays past 2^31 elements"
    return None


__all__ = ["input_kernel", "filter_kernel", "output_kernel", "m_layout", "tiling", "round4",
           "workspace_bytes", "transforms_numpy", "applicable_reason"]
