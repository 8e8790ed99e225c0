"""Cheaper implicit-GEMM addressing for the wgmma producer (``A_ROWS`` in gemm_wgmma.hip).

The generic gather calls ``a_off(b, m, k)`` per 16-byte chunk: it splits m into (n, p, q) and k
into (tap, c) with integer divisions and checks the padding each time.  For a channels-last
convolution whose channel count is a multiple of the k tile, one k tile lies inside one filter
tap, so the address splits into

    offset(m, k) = row_base(m) + tap_offset(k0) + chunk,   valid iff 0 <= row_start(m) + tap_shift(k0) < H

``row_base`` / ``row_start`` are computed once per work unit for the producer thread's rows
(``a_row``), ``tap_offset`` / ``tap_shift`` once per k tile (``a_tap``), and a chunk costs an add
and two compares (``a_in``).  Spatial starts and shifts are packed as two signed 16-bit halves
of one int (so at most two spatial dims, extents below 16384).

Used for convolution forward (x gathered at p * stride - pad + r * dil) and backward data with
unit stride (dy gathered at h + pad - r * dil).
"""
from __future__ import annotations

import math

LIMIT = 16383


def _mdec(names_sizes):
    """C lines splitting m into coordinates (innermost first)."""
    out, rem = [], "m"
    for i, (nm, sz) in enumerate(names_sizes):
        if i == len(names_sizes) - 1:
            out.append(f"const int {nm} = {rem};")
        else:
            out.append(f"const int {nm} = {rem} % {sz}; const int r_{nm} = {rem} / {sz};")
            rem = f"r_{nm}"
    return out


def rows_code(M, C, kchan_stride, row_dims, row_strides, n_stride, extent, start, shift_sign, Rk,
              dil, span, bk, tap_inner=False):
    """The prelude of ``A_ROWS`` or None when the fast path does not apply.

    ``row_dims``: the output-position extents the m index enumerates (innermost last, N first
    outside); ``extent``: the input spatial extents bounds are checked against; ``start(j,
    var)``: C expression of the start coordinate from the position ``var`` of dim j;
    ``shift_sign``: +1 (forward: start + r * dil) or -1 (backward data: start - r * dil);
    ``row_strides`` the input strides of the spatial dims, ``n_stride`` of the batch dim and
    ``kchan_stride`` of the channel (reduction) dim.  ``tap_inner``: the reduction index is
    (channel, tap) with the filter tap innermost (NCHW / KCRS order, the SIMT core's per-element
    k; ``bk`` = 1) instead of (tap, channel)."""
    nsp = len(row_dims)
    if nsp == 0 or nsp > 2 or C % bk:
        return None
    if any(e > LIMIT for e in extent) or any((r - 1) * d > LIMIT for r, d in zip(Rk, dil)):
        return None
    base_t = "int" if span < 2 ** 31 - 1 else "long long"
    L = ["#define A_ROWS 1", f"typedef {base_t} wg_base_t;",
         "struct wg_arow { wg_base_t base; int hp; };",
         "struct wg_atap { wg_base_t off; int dp; };",
         "__device__ __forceinline__ wg_arow a_row(int b, int m) {",
         "  wg_arow r;",
         f"  if (m >= {M}) {{ r.base = 0; r.hp = (int)0x80008000u; return r; }}"]
    names = [(f"p{j}", row_dims[j]) for j in reversed(range(nsp))] + [("nn", 0)]
    L += ["  " + x for x in _mdec(names)]
    for j in range(nsp):
        L.append(f"  const int s{j} = {start(j, f'p{j}')};")
    base = " + ".join([f"(wg_base_t)nn * {n_stride}"] + [f"(wg_base_t)s{j} * {row_strides[j]}" for j in range(nsp)])
    L.append(f"  r.base = {base};")
    if nsp == 1:
        L.append("  r.hp = (int)((unsigned)s0 & 0xffffu);")
    else:
        L.append("  r.hp = (int)(((unsigned)s0 & 0xffffu) | ((unsigned)s1 << 16));")
    L += ["  return r;", "}",
          "__device__ __forceinline__ wg_atap a_tap(int k0) {",
          "  wg_atap t;",
          (f"  const int tap = k0 % {math.prod(Rk)}; const int cc = k0 / {math.prod(Rk)};" if tap_inner
           else f"  const int cc = k0 % {C}; const int tap = k0 / {C};")]
    if nsp == 1:
        L.append("  const int r0 = tap;")
    else:
        L.append(f"  const int r1 = tap % {Rk[1]}; const int r0 = tap / {Rk[1]};")
    sg = "" if shift_sign > 0 else "-"
    for j in range(nsp):
        L.append(f"  const int d{j} = {sg}r{j} * {dil[j]};")
    off = " + ".join([f"(wg_base_t)cc * {kchan_stride}"] + [f"(wg_base_t)d{j} * {row_strides[j]}" for j in range(nsp)])
    L.append(f"  t.off = {off};")
    if nsp == 1:
        L.append("  t.dp = (int)((unsigned)d0 & 0xffffu);")
    else:
        L.append("  t.dp = (int)(((unsigned)d0 & 0xffffu) | ((unsigned)d1 << 16));")
    L += ["  return t;", "}",
          "__device__ __forceinline__ bool a_in(const wg_arow& r, const wg_atap& t) {",
          "  const int h0 = (int)(short)(r.hp & 0xffff) + (int)(short)(t.dp & 0xffff);"]
    if nsp == 1:
        L.append(f"  return (unsigned)h0 < {extent[0]}u;")
    else:
        L.append("  const int h1 = (r.hp >> 16) + (t.dp >> 16);")
        L.append(f"  return (unsigned)h0 < {extent[0]}u && (unsigned)h1 < {extent[1]}u;")
    L.append("}")
    return "\n".join(L)


def conv_fwd_rows(spec, xd, xs, P, Rk, p, bk):
    """A_ROWS prelude for convolution forward (channels-last x) or None."""
    nsp = len(P)
    C = xd[1]
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(xd, xs))
    return rows_code(spec.M, C, xs[1], P, xs[2:], xs[0], xd[2:],
                     lambda j, v: f"{v} * {p['stride'][j]} - {p['pre_padding'][j]}", +1, Rk,
                     p["dilation"], span, bk) if nsp else None


def conv_fwd_rows_simt(spec, xd, xs, P, Rk, p, cl):
    """A_ROWS prelude of the SIMT core for convolution forward in any layout (per-element k:
    (tap, channel) channels-last, (channel, tap) otherwise) or None."""
    nsp = len(P)
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(xd, xs))
    return rows_code(spec.M, xd[1], xs[1], P, xs[2:], xs[0], xd[2:],
                     lambda j, v: f"{v} * {p['stride'][j]} - {p['pre_padding'][j]}", +1, Rk,
                     p["dilation"], span, 1, tap_inner=not cl) if nsp else None


def conv_bwd_data_rows(spec, yd, ys, H, Rk, p, bk):
    """A_ROWS prelude for backward data with unit strides (channels-last dy) or None."""
    if any(s != 1 for s in p["stride"]):
        return None
    K = yd[1]
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(yd, ys))
    return rows_code(spec.M, K, ys[1], H, ys[2:], ys[0], yd[2:],
                     lambda j, v: f"{v} + {p['pre_padding'][j]}", -1, Rk, p["dilation"], span, bk)

