"""Direct (one thread per output element) matmul and convolution kernels for DOUBLE data: plain
FP64 (or, for compute type FLOAT, FP32) multiply-adds on the FMA units - there is no FP64
tensor-core path - with the CPU reference's arithmetic: operands rounded to the compute type,
products accumulated in it, the result stored through :func:`hdn_from_double` (so a FLOAT
compute type rounds to float32 first, as the CPU does).  Slow but exact in what it computes;
any strides, broadcast batch dims, padding, stride, dilation, CONVOLUTION mode (flipped taps) and
grouped convolution (C of x = groups x C of w).
"""
from __future__ import annotations

import math

from . import codegen as cg

THREADS = 256


def acc_type(compute, data):
    """The accumulation type of the CPU reference: double for compute DOUBLE (UNSET with DOUBLE
    data), else float."""
    return "double" if compute == "DOUBLE" or (compute == "UNSET" and data == "DOUBLE") else "float"


def _head(name, params):
    return (f'#define HDN_GENERATED 1\n#include "hdn_compat.h"\n'
            f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}({", ".join(params)}) {{\n')


def _decode(var, ddims, prefix):
    """C lines: logical row-major coordinates ``<prefix><d>`` of linear index ``var``."""
    lines, rem = [], var
    for d in reversed(range(len(ddims))):
        if d == 0:
            lines.append(f"const long long {prefix}{d} = {rem};")
        else:
            lines.append(f"const long long {prefix}{d} = {rem} % {ddims[d]}; "
                         f"const long long r{prefix}{d} = {rem} / {ddims[d]};")
            rem = f"r{prefix}{d}"
    return lines


def _fma(acc):
    return "fma" if acc == "double" else "fmaf"


def _launch(total):
    return (max(1, (total + THREADS - 1) // THREADS), 1, 1), (THREADS, 1, 1)


def matmul_source(name, M, N, K, bdims, sa, sb, sta, stb, stc, ta, tb, tc, acc):
    """C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]; ``sa`` / ``sb``: a's / b's strides over the
    batch dims (0: broadcast), ``sta`` / ``stb``: their (m, k) / (k, n) strides, ``stc``: c's
    strides; ``ta`` / ``tb`` / ``tc``: C types; ``acc``: 'double' or 'float'."""
    batch = math.prod(bdims) if bdims else 1
    total = batch * M * N
    (sAm, sAk), (sBk, sBn) = sta, stb
    L = [_head(name, [f"const {ta}* __restrict__ A", f"const {tb}* __restrict__ B",
                      f"{tc}* __restrict__ C"]),
         f"  const long long o = (long long)blockIdx.x * {THREADS} + threadIdx.x;",
         f"  if (o >= {total}LL) return;",
         f"  const int n = (int)(o % {N}); const long long rm = o / {N};",
         f"  const int m = (int)(rm % {M}); const int b = (int)(rm / {M});",
         "  " + cg.batch_offset_code("boa", bdims, sa),
         "  " + cg.batch_offset_code("bob", bdims, sb),
         "  " + cg.batch_offset_code("boc", bdims, stc[:-2]),
         f"  const {ta}* pa = A + boa + (long long)m * {sAm};",
         f"  const {tb}* pb = B + bob + (long long)n * {sBn};",
         f"  {acc} s = 0;",
         f"  for (int k = 0; k < {K}; ++k)",
         f"    s = {_fma(acc)}(({acc})hdn_to_double(pa[(long long)k * {sAk}]), "
         f"({acc})hdn_to_double(pb[(long long)k * {sBk}]), s);",
         f"  C[boc + (long long)m * {stc[-2]} + (long long)n * {stc[-1]}] = hdn_from_double<{tc}>((double)s);",
         "}"]
    return "\n".join(L) + "\n", *_launch(total)


def conv_source(name, kind, x, w, y, p, tx, tw, ty, acc):
    """One direct convolution kernel.  ``kind``: 'fwd' (y from x, w), 'bwd_data' (dx from dy,
    w: ``x`` is dx, ``y`` is dy) or 'bwd_filter' (dw from x, dy: ``w`` is dw); ``x`` / ``w`` /
    ``y``: (dims, strides) of the forward roles; ``p``: conv_params; ``tx`` / ``tw`` / ``ty``:
    C types; the output of the kind is the thread's element."""
    (xd, xs), (wd, ws), (yd, ys) = x, w, y
    nsp = len(xd) - 2
    G = xd[1] // wd[1]
    Cg, Kg = wd[1], wd[0] // G
    st, pad, dil, flip = p["stride"], p["pre_padding"], p["dilation"], p["flip"]

    def tap(j, r):          # the stored filter index of tap r along spatial dim j
        return f"({wd[2 + j] - 1} - {r})" if flip else r

    def off(strides, coords):
        return " + ".join(f"(long long)({c}) * {s}" for c, s in zip(coords, strides) if s != 0) or "0"
    ld = f"({acc})hdn_to_double"
    if kind == "fwd":
        out, od, os_, tout = "Y", yd, ys, ty
        params = [f"const {tx}* __restrict__ X", f"const {tw}* __restrict__ W", f"{ty}* __restrict__ Y"]
        body = [f"const long long g = o1 / {Kg};",
                f"for (int c = 0; c < {Cg}; ++c) {{"]
        for j in range(nsp):
            body.append(f"for (int r{j} = 0; r{j} < {wd[2 + j]}; ++r{j}) {{")
            body.append(f"const long long h{j} = o{2 + j} * {st[j]} - {pad[j]} + r{j} * {dil[j]};")
            body.append(f"if (h{j} < 0 || h{j} >= {xd[2 + j]}) continue;")
        xo = off(xs, ["o0", f"g * {Cg} + c"] + [f"h{j}" for j in range(nsp)])
        wo = off(ws, ["o1", "c"] + [tap(j, f"r{j}") for j in range(nsp)])
        body.append(f"s = {_fma(acc)}({ld}(X[{xo}]), {ld}(W[{wo}]), s);")
        body += ["}"] * (nsp + 1)
    elif kind == "bwd_data":
        out, od, os_, tout = "DX", xd, xs, tx
        params = [f"const {ty}* __restrict__ DY", f"const {tw}* __restrict__ W", f"{tx}* __restrict__ DX"]
        body = [f"const long long g = o1 / {Cg}; const long long c = o1 % {Cg};",
                f"for (int kk = 0; kk < {Kg}; ++kk) {{", f"const long long k = g * {Kg} + kk;"]
        for j in range(nsp):
            body.append(f"for (int r{j} = 0; r{j} < {wd[2 + j]}; ++r{j}) {{")
            body.append(f"const long long t{j} = o{2 + j} + {pad[j]} - r{j} * {dil[j]};")
            body.append(f"if (t{j} < 0 || t{j} % {st[j]} != 0) continue;")
            body.append(f"const long long q{j} = t{j} / {st[j]};")
            body.append(f"if (q{j} >= {yd[2 + j]}) continue;")
        yo = off(ys, ["o0", "k"] + [f"q{j}" for j in range(nsp)])
        wo = off(ws, ["k", "c"] + [tap(j, f"r{j}") for j in range(nsp)])
        body.append(f"s = {_fma(acc)}({ld}(DY[{yo}]), {ld}(W[{wo}]), s);")
        body += ["}"] * (nsp + 1)
    else:
        out, od, os_, tout = "DW", wd, ws, tw
        params = [f"const {tx}* __restrict__ X", f"const {ty}* __restrict__ DY", f"{tw}* __restrict__ DW"]
        # o2.. are stored tap indices: the tap r that reads them
        body = [f"const long long g = o0 / {Kg};"]
        for j in range(nsp):
            body.append(f"const long long r{j} = {tap(j, f'o{2 + j}')};")
        body.append(f"for (int nn = 0; nn < {xd[0]}; ++nn) {{")
        for j in range(nsp):
            body.append(f"for (int q{j} = 0; q{j} < {yd[2 + j]}; ++q{j}) {{")
            body.append(f"const long long h{j} = q{j} * {st[j]} - {pad[j]} + r{j} * {dil[j]};")
            body.append(f"if (h{j} < 0 || h{j} >= {xd[2 + j]}) continue;")
        xo = off(xs, ["nn", f"g * {Cg} + o1"] + [f"h{j}" for j in range(nsp)])
        yo = off(ys, ["nn", "o0"] + [f"q{j}" for j in range(nsp)])
        body.append(f"s = {_fma(acc)}({ld}(X[{xo}]), {ld}(DY[{yo}]), s);")
        body += ["}"] * (nsp + 1)
    total = math.prod(od)
    L = [_head(name, params),
         f"  const long long o = (long long)blockIdx.x * {THREADS} + threadIdx.x;",
         f"  if (o >= {total}LL) return;"]
    L += ["  " + s for s in _decode("o", od, "o")]
    L.append(f"  {acc} s = 0;")
    L += ["  " + s for s in body]
    L.append(f"  {out}[{off(os_, [f'o{d}' for d in range(len(od))])}] = hdn_from_double<{tout}>((double)s);")
    L.append("}")
    return "\n".join(L) + "\n", *_launch(total)
