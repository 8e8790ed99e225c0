"""Block-scale quantize / dequantize on the GPU, bit-exact with the CPU reference
(kernels/block_scale.py + kernels/minifloat.py) through kernels/hdn_minifloat.h.

Quantize: one thread per block (``block_size`` elements along ``axis``): float amax, the double
quotient amax / max(y) rounded *up* to the scale type (``__double2float_ru`` first: the smallest
float >= q, then the smallest scale-type value >= that float - the same value as rounding q up
directly), the float division x / scale, clamp, round-to-nearest-even with saturation.  A block
with a NaN / Inf gets the NaN scale and NaN (or 0) elements.  Dequantize: one thread per element.
When the axis is unit-stride and the block spans whole 16-byte vectors, loads are 16 bytes.
"""
from __future__ import annotations

import math
import os

from .. import codegen as cg
from ._base import check_storage_types, check_tensors, declines, kinds

KINDS = kinds("block_scale")
IO16 = ("FLOAT", "HALF", "BFLOAT16")
# name -> (EB, MB, BIAS, K) of hdn_minifloat.h
MINI = {"FP8_E4M3": (4, 3, 7, 1), "FP8_E5M2": (5, 2, 15, 2), "FP8_E4M3_FNUZ": (4, 3, 8, 3),
        "FP8_E5M2_FNUZ": (5, 2, 16, 3), "FP4_E2M1": (2, 1, 1, 0), "FP6_E2M3": (2, 3, 1, 0),
        "FP6_E3M2": (3, 2, 3, 0)}
INTS = {"INT8": (-128, 127, "signed char"), "UINT8": (0, 255, "unsigned char"),
        "INT32": (-2147483648, 2147483647, "int")}
ELEM = tuple(MINI) + tuple(INTS) + IO16
SCALES = ("FLOAT", "HALF", "BFLOAT16", "FP8_E8M0", "FP8_E4M3")
TYPES = IO16 + tuple(MINI) + tuple(INTS) + ("FP8_E8M0",)
_MAX = {"FLOAT": 3.4028234663852886e38, "HALF": 65504.0, "BFLOAT16": 3.3895313892515355e38}
# NaN bit patterns the CPU reference (numpy) stores
_NAN = {"FLOAT": "0x7fc00000u", "HALF": "0x7e00u", "BFLOAT16": "0x7fc0u"}


def check(node, graph, r):
    check_tensors(node, r)
    check_storage_types(node, r, TYPES)
    with declines(node.kind):
        _check(node, graph, r)


def emit(ctx, node, r, tag, fused=None):
    with declines(node.kind):
        _emit(ctx.prog, ctx.graph, node, r, ctx.loc, tag, ctx.sms, ctx.use_mma)


def _d(t):
    return [int(v) for v in t.dims]


def _s(t):
    return [int(v) for v in t.strides]


def _dt(t):
    return cg.dtype_name(t.dtype)


def ymax(name):
    if name in MINI:
        eb, mb, bias, k = MINI[name]
        emax = (1 << eb) - 2 if k == 2 else (1 << eb) - 1
        mmax = (1 << mb) - 2 if k == 1 else (1 << mb) - 1
        return (1 + mmax / (1 << mb)) * 2.0 ** (emax - bias)
    if name in INTS:
        return float(INTS[name][1])
    return _MAX[name]


def _check(node, graph, r):
    if node.kind == "BlockScaleQuantizeAttributes":
        x, y, s = r.get("x"), r.get("y"), r.get("scale")
        if x is None or y is None or s is None:
            raise ValueError("block scale quantize operands missing")
        xd = _d(x)
        ax = node.attrs.get("axis")
        ax = len(xd) - 1 if ax is None else int(ax)
        bs = int(node.attrs.get("block_size") or 0)
        if not (0 <= ax < len(xd)) or bs <= 0 or xd[ax] % bs or _d(y) != xd:
            raise ValueError("block scale quantize: axis / block size / shapes")
        if _d(s) != [d // bs if k == ax else d for k, d in enumerate(xd)]:
            raise ValueError("block scale quantize: scale dims")
        if _dt(x) not in IO16 or _dt(y) not in ELEM or _dt(s) not in SCALES:
            raise ValueError("block scale quantize: types")
        return ax, bs
    x, s, y = r.get("x"), r.get("scale"), r.get("y")
    if x is None or y is None or s is None:
        raise ValueError("block scale dequantize operands missing")
    xd = _d(x)
    bsv = [int(b) for b in (node.attrs.get("block_size") or [])]
    if not bsv or len(bsv) > len(xd) or min(bsv) <= 0 or _d(y) != xd:
        raise ValueError("block scale dequantize: block sizes / shapes")
    full = [1] * (len(xd) - len(bsv)) + bsv
    if any(d % b for d, b in zip(xd, full)) or _d(s) != [d // b for d, b in zip(xd, full)]:
        raise ValueError("block scale dequantize: scale dims")
    if _dt(x) not in ELEM or _dt(s) not in SCALES or _dt(y) not in IO16:
        raise ValueError("block scale dequantize: types")
    return full, None


HEAD = '#define HDN_GENERATED 1\n#include "hdn_compat.h"\n#include "hdn_minifloat.h"\n'
_UNPACK = ("__device__ __forceinline__ void hdn_unpack_any(const uint4 q, const float*, float* v) "
           "{ v[0] = __uint_as_float(q.x); v[1] = __uint_as_float(q.y); v[2] = __uint_as_float(q.z); v[3] = __uint_as_float(q.w); }\n"
           "__device__ __forceinline__ void hdn_unpack_any(const uint4 q, const hdn_half*, float* v) "
           "{ const unsigned w[4] = {q.x, q.y, q.z, q.w}; for (int i = 0; i < 4; ++i) { v[2*i] = hdn_half_bits_to_float((hdn_u16)(w[i] & 0xffffu)); v[2*i+1] = hdn_half_bits_to_float((hdn_u16)(w[i] >> 16)); } }\n"
           "__device__ __forceinline__ void hdn_unpack_any(const uint4 q, const hdn_bf16*, float* v) "
           "{ const unsigned w[4] = {q.x, q.y, q.z, q.w}; for (int i = 0; i < 4; ++i) { v[2*i] = __uint_as_float(w[i] << 16); v[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); } }\n")


def _decode(name, expr):
    """C float expression of one stored element of type name."""
    if name in MINI:
        eb, mb, bias, k = MINI[name]
        return f"hdn_mini_decode<{eb}, {mb}, {bias}, {k}>((unsigned)({expr}))"
    if name == "FP8_E8M0":
        return f"hdn_e8m0_decode((unsigned)({expr}))"
    if name in INTS:
        return f"(float)({expr})"
    return f"hdn_to_float({expr})"


def _ctype(name):
    """C storage type: the narrow formats are bytes here (this module encodes/decodes them)."""
    return "unsigned char" if name in MINI or name == "FP8_E8M0" else cg.CTYPE[name]


def _scale_code(st):
    """C lines: from float fu (>= q, rounded up) compute `sv` (float value) and `sc` (stored)."""
    if st == "FP8_E8M0":
        return ["const unsigned char sc = hdn_e8m0_round_up(fu);", "const float sv = hdn_e8m0_decode(sc);"]
    if st == "FP8_E4M3":
        return ["unsigned c8 = hdn_mini_encode<4, 3, 7, 1>(fminf(fu, 448.f));",
                "if (hdn_mini_decode<4, 3, 7, 1>(c8) < fu && c8 < 0x7eu) ++c8;",
                "const unsigned char sc = (unsigned char)c8;", "const float sv = hdn_mini_decode<4, 3, 7, 1>(sc);"]
    if st == "FLOAT":
        return [f"const float sv = fminf(fu, {cg.flit(_MAX['FLOAT'])});", "const float sc = sv;"]
    T = _ctype(st)
    return [f"{T} sc = hdn_from_float<{T}>(fminf(fu, {cg.flit(_MAX[st])}));",
            f"if (hdn_to_float(sc) < fu) sc.bits = (hdn_u16)(sc.bits + 1);",
            "const float sv = hdn_to_float(sc);"]


def _store_nan_scale(st):
    if st == "FP8_E8M0":
        return "0xffu"
    if st == "FP8_E4M3":
        return "0x7fu"
    return None


def _elem_store(yt, var):
    """C expression: the stored y element for float var (already clamped)."""
    if yt in MINI:
        eb, mb, bias, k = MINI[yt]
        return f"hdn_mini_encode<{eb}, {mb}, {bias}, {k}>({var})"
    if yt in INTS:
        lo, hi, T = INTS[yt]
        return (f"({T})({var} <= {float(lo)!r}f ? {lo}LL : {var} >= {float(hi)!r}f ? {hi}LL : "
                f"(long long)rintf({var}))")
    return f"hdn_from_float<{_ctype(yt)}>({var})"


def _elem_nan(yt):
    if yt in MINI:
        return "(unsigned char)" + ("0x80u" if MINI[yt][3] == 3 else "0x7fu" if MINI[yt][3] in (1, 2) else "0u")
    if yt in INTS:
        return f"({INTS[yt][2]})0"
    if yt == "FLOAT":
        return "__uint_as_float(0x7fc00000u)"
    return None    # 16-bit: set .bits


def _emit(prog, graph, node, r, loc, tag, sms, use_mma=True):
    a, b = _check(node, graph, r)
    if node.kind == "BlockScaleQuantizeAttributes":
        return _quant(prog, r, loc, tag, a, b)
    return _dequant(prog, node, r, loc, tag, a)


def _quant(prog, r, loc, tag, ax, bs):
    x, y, s = r["x"], r["y"], r["scale"]
    xt, yt, st = _dt(x), _dt(y), _dt(s)
    sd = _d(s)
    n = len(sd)
    xs, ys, ss = _s(x), _s(y), _s(s)
    total = math.prod(sd)
    order = cg.dense_order(sd, ss)
    name = f"hdn_bsq_{tag}"
    Tx, Ty, Ts = _ctype(xt), _ctype(yt), _ctype(st)
    ymx = ymax(yt)
    ylo = float(INTS[yt][0]) if yt in INTS else -ymx
    esz = cg.ELEM_SIZE[xt]
    vec = 16 // esz
    vload = xs[ax] == 1 and (bs * esz) % 16 == 0 and all(
        (xs[k] * esz) % 16 == 0 for k in range(n) if k != ax and sd[k] > 1)
    yvec = (ys[ax] == 1 and cg.ELEM_SIZE[yt] == 1 and bs % 16 == 0 and all(
        ys[k] % 16 == 0 for k in range(n) if k != ax and sd[k] > 1))
    head = HEAD if os.environ.get("HIPDNN_CABI_HIP_FP8_CVT", "1") not in ("0", "off") else \
        "#define HDN_FP8_CVT 0\n" + HEAD
    lanes = bs * esz // 16
    if (ax == n - 1 and _rowmajor(_d(x), xs) and _rowmajor(_d(y), ys) and _rowmajor(sd, ss)
            and (bs * esz) % 16 == 0 and lanes in (1, 2, 4, 8, 16, 32)
            and cg.ELEM_SIZE.get(yt, 1) == 1 and os.environ.get("HIPDNN_CABI_HIP_BSQ_LANES", "1") != "0"):
        return _quant_lanes(prog, r, loc, tag, bs, head, total * bs, lanes)
    L = [head, f'extern "C" __global__ void __launch_bounds__(256) {name}(const {Tx}* __restrict__ px, '
               f'{Ty}* __restrict__ py, {Ts}* __restrict__ ps) {{',
         "  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;",
         f"  if (i >= {total}LL) return;"]
    L += ["  " + c for c in cg.coord_code(sd, order, "i", "long long")]
    xb = " + ".join(f"(long long)c{k} * {xs[k] * (bs if k == ax else 1)}" for k in range(n))
    yb = " + ".join(f"(long long)c{k} * {ys[k] * (bs if k == ax else 1)}" for k in range(n))
    soff = " + ".join(f"(long long)c{k} * {ss[k]}" for k in range(n))
    L += [f"  const long long xb = {xb};", f"  const long long yb = {yb};",
          f"  float v[{bs}];"]
    if vload:
        L += [f"#pragma unroll\n  for (int q = 0; q < {bs // vec}; ++q) {{",
              f"    const uint4 u = *reinterpret_cast<const uint4*>(px + xb + q * {vec});",
              f"    hdn_unpack_any(u, ({Tx}*)0, &v[q * {vec}]);", "  }"]
    else:
        L += [f"#pragma unroll\n  for (int e = 0; e < {bs}; ++e) v[e] = hdn_to_float(px[xb + (long long)e * {xs[ax]}]);"]
    L += ["  float amax = 0.f; bool fin = true;",
          f"#pragma unroll\n  for (int e = 0; e < {bs}; ++e) {{ const float a = fabsf(v[e]); "
          "if (!(a <= 3.402823466e38f)) fin = false; else amax = fmaxf(amax, a); }",
          f"  const double qd = (double)amax / {ymx!r};",
          "  const float fu = __double2float_ru(qd);"]
    L += ["  " + c for c in _scale_code(st)]
    nan_s = _store_nan_scale(st)
    if nan_s is not None:
        L.append(f"  ps[{soff}] = fin ? sc : (unsigned char){nan_s};")
    elif st == "FLOAT":
        L.append(f"  ps[{soff}] = fin ? sc : __uint_as_float({_NAN['FLOAT']});")
    else:
        L.append(f"  {{ {Ts} o = sc; if (!fin) o.bits = (hdn_u16){_NAN[st]}; ps[{soff}] = o; }}")
    if yvec:
        L.append(f"  unsigned char ob[{bs}];")
    L += [f"#pragma unroll\n  for (int e = 0; e < {bs}; ++e) {{",
          "    float q = sv != 0.f ? v[e] / sv : 0.f;",
          f"    q = q < {cg.flit(ylo)} ? {cg.flit(ylo)} : (q > {cg.flit(ymx)} ? {cg.flit(ymx)} : q);",
          f"    {Ty} o = {_elem_store(yt, 'q')};"]
    en = _elem_nan(yt)
    if en is not None:
        L.append(f"    if (!fin) o = {en};")
    else:
        L.append(f"    if (!fin) o.bits = (hdn_u16){_NAN[yt]};")
    if yvec:    # 1-byte elements, unit stride: 16-byte stores
        L += ["    ob[e] = (unsigned char)o;", "  }",
              f"#pragma unroll\n  for (int q = 0; q < {bs // 16}; ++q) {{",
              "    unsigned w[4];",
              "#pragma unroll\n    for (int j = 0; j < 4; ++j) w[j] = (unsigned)ob[q * 16 + 4 * j] | "
              "((unsigned)ob[q * 16 + 4 * j + 1] << 8) | ((unsigned)ob[q * 16 + 4 * j + 2] << 16) | "
              "((unsigned)ob[q * 16 + 4 * j + 3] << 24);",
              "    *reinterpret_cast<uint4*>(py + yb + q * 16) = make_uint4(w[0], w[1], w[2], w[3]);",
              "  }", "}"]
    else:
        L += [f"    py[yb + (long long)e * {ys[ax]}] = o;", "  }", "}"]
    helpers = _UNPACK
    src = L[0] + helpers + "\n".join(L[1:]) + "\n"
    prog.steps.append(("launch", src, name, (max(1, -(-total // 256)), 1, 1), (256, 1, 1),
                       [loc[x.uid], loc[y.uid], loc[s.uid]]))


def _rowmajor(dims, strides):
    acc = 1
    for d, st in zip(reversed(dims), reversed(strides)):
        if d != 1 and st != acc:
            return False
        acc *= d
    return True


UNROLL = 4        # 16-byte chunks per thread in the lane-group quantizer


def _e8m0_exact(ymx):
    """(EY, MY): ymax = (1 + MY / 2^23) * 2^EY, or None unless ymax is a float with at most 12
    significant bits (then amax / ymax is never within a double rounding of a power of two
    without being one, so the bit formula and the double quotient agree)."""
    import struct
    b = struct.unpack("<I", struct.pack("<f", ymx))[0]
    if struct.unpack("<f", struct.pack("<I", b))[0] != ymx or (b & 0x7ff) != 0:
        return None
    return ((b >> 23) & 0xff) - 127, b & 0x7fffff


def _quant_lanes(prog, r, loc, tag, bs, head, nel, lanes):
    """Quantize of packed row-major data along the last axis: one 16-byte chunk of x per thread
    (UNROLL chunks in flight each), ``lanes`` neighbouring lanes share one block (the largest
    magnitude as float bits - NaN / Inf above every finite value - by xor shuffles, so all of
    them compute the same scale; the first stores it), coalesced 16-byte loads and one wide
    store per chunk.  E8M0 scales: the smallest power of two >= amax / ymax straight from
    amax's exponent and mantissa bits (the same value as rounding the exact quotient up, which
    the generic kernel does in double), and x / scale as x times the exact reciprocal (the same
    correctly rounded quotient without a division); FP8 E4M3 / E5M2 elements two per hardware
    conversion (saturating: no clamp needed)."""
    x, y, s = r["x"], r["y"], r["scale"]
    xt, yt, st = _dt(x), _dt(y), _dt(s)
    Tx, Ty, Ts = _ctype(xt), _ctype(yt), _ctype(st)
    esz = cg.ELEM_SIZE[xt]
    vec = 16 // esz
    chunks = nel // vec
    ymx = ymax(yt)
    ylo = float(INTS[yt][0]) if yt in INTS else -ymx
    name = f"hdn_bsq_{tag}"
    per_block = 256 * UNROLL
    hwpair = yt in ("FP8_E4M3", "FP8_E5M2")
    L = [head + _UNPACK, f'extern "C" __global__ void __launch_bounds__(256) {name}(const {Tx}* __restrict__ px, '
         f'{Ty}* __restrict__ py, {Ts}* __restrict__ ps) {{',
         f"  const long long c0 = (long long)blockIdx.x * {per_block} + threadIdx.x;",
         f"  uint4 raw[{UNROLL}];",
         f"#pragma unroll\n  for (int u = 0; u < {UNROLL}; ++u) {{",
         f"    const long long c = c0 + u * 256;",
         f"    raw[u] = c < {chunks}LL ? reinterpret_cast<const uint4*>(px)[c] : make_uint4(0, 0, 0, 0);",
         "  }",
         f"#pragma unroll\n  for (int u = 0; u < {UNROLL}; ++u) {{",
         f"    const long long c = c0 + u * 256;",
         f"    float v[{vec}];",
         f"    hdn_unpack_any(raw[u], ({Tx}*)0, v);",
         "    unsigned au = 0u;",
         f"#pragma unroll\n    for (int e = 0; e < {vec}; ++e) au = max(au, __float_as_uint(v[e]) & 0x7fffffffu);"]
    for o in (1, 2, 4, 8, 16):
        if o < lanes:
            L.append(f"    au = max(au, hdn_lane_xor(au, {o}));")
    L += [f"    if (c >= {chunks}LL) continue;",
          "    const bool fin = au < 0x7f800000u;"]
    exact = _e8m0_exact(ymx) if st == "FP8_E8M0" else None
    if exact is not None:
        ey, my = exact
        L += [f"    int pe = (int)(au >> 23) - {ey} + ((au & 0x7fffffu) > {my}u ? 1 : 0);",
              "    pe = au < 0x00800000u ? 0 : (pe < 0 ? 0 : (pe > 254 ? 254 : pe));",
              "    const unsigned char sc = (unsigned char)pe;",
              # 1 / 2^(sc - 127) exactly (2^-127 is a float subnormal)
              "    const float rs = sc >= 254 ? __int_as_float(0x00400000) : __int_as_float((254 - (int)sc) << 23);"]
        quot = "v[e] * rs"
    else:
        L += ["    const float amax = __uint_as_float(au);",
              f"    const double qd = (double)amax / {ymx!r};",
              "    const float fu = __double2float_ru(qd);"]
        L += ["    " + q for q in _scale_code(st)]
        quot = "(sv != 0.f ? v[e] / sv : 0.f)"
    nan_s = _store_nan_scale(st)
    first = f"(threadIdx.x % {lanes}) == 0" if lanes > 1 else "true"
    if nan_s is not None:
        L.append(f"    if ({first}) ps[c / {lanes}] = fin ? sc : (unsigned char){nan_s};")
    elif st == "FLOAT":
        L.append(f"    if ({first}) ps[c / {lanes}] = fin ? sc : __uint_as_float({_NAN['FLOAT']});")
    else:
        L.append(f"    if ({first}) {{ {Ts} o = sc; if (!fin) o.bits = (hdn_u16){_NAN[st]}; ps[c / {lanes}] = o; }}")
    en = _elem_nan(yt)
    L += [f"#pragma unroll\n    for (int e = 0; e < {vec}; ++e) v[e] = {quot};",
          f"    unsigned wd[{vec // 4}];"]
    if hwpair:
        eb, mb, bias, k = MINI[yt]
        L += [f"#pragma unroll\n    for (int h = 0; h < {vec // 4}; ++h) wd[h] = "
              f"hdn_mini_encode2<{eb}, {mb}, {bias}, {k}>(v[4 * h], v[4 * h + 1]) | "
              f"(hdn_mini_encode2<{eb}, {mb}, {bias}, {k}>(v[4 * h + 2], v[4 * h + 3]) << 16);"]
    else:
        L += [f"    unsigned char ob[{vec}];",
              f"#pragma unroll\n    for (int e = 0; e < {vec}; ++e) {{",
              f"      float q = v[e];",
              f"      q = q < {cg.flit(ylo)} ? {cg.flit(ylo)} : (q > {cg.flit(ymx)} ? {cg.flit(ymx)} : q);",
              f"      ob[e] = (unsigned char)({_elem_store(yt, 'q')});", "    }",
              f"#pragma unroll\n    for (int h = 0; h < {vec // 4}; ++h) wd[h] = (unsigned)ob[4 * h] | "
              "((unsigned)ob[4 * h + 1] << 8) | ((unsigned)ob[4 * h + 2] << 16) | ((unsigned)ob[4 * h + 3] << 24);"]
    L.append(f"    if (!fin) {{ for (int h = 0; h < {vec // 4}; ++h) wd[h] = 0x01010101u * (unsigned)(unsigned char)({en}); }}")
    if vec == 8:
        L.append("    reinterpret_cast<uint2*>(py)[c] = make_uint2(wd[0], wd[1]);")
    else:   # 4 float elements -> 4 bytes
        L.append("    reinterpret_cast<unsigned*>(py)[c] = wd[0];")
    L += ["  }", "}"]
    prog.steps.append(("launch", "\n".join(L) + "\n", name, (max(1, -(-chunks // per_block)), 1, 1),
                       (256, 1, 1), [loc[x.uid], loc[y.uid], loc[s.uid]]))


def _dequant(prog, node, r, loc, tag, full):
    x, s, y = r["x"], r["scale"], r["y"]
    xt, st, yt = _dt(x), _dt(s), _dt(y)
    xd = _d(x)
    n = len(xd)
    xs, ss, ys = _s(x), _s(s), _s(y)
    total = math.prod(xd)
    order = cg.dense_order(xd, ys)
    neg = bool(node.attrs.get("is_negative_scale"))
    name = f"hdn_bsdq_{tag}"
    L = [HEAD, f'extern "C" __global__ void __launch_bounds__(256) {name}(const {_ctype(xt)}* __restrict__ px, '
               f'const {_ctype(st)}* __restrict__ ps, {_ctype(yt)}* __restrict__ py) {{',
         "  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;",
         f"  if (i >= {total}LL) return;"]
    L += ["  " + c for c in cg.coord_code(xd, order, "i", "long long")]
    xo = " + ".join(f"(long long)c{k} * {xs[k]}" for k in range(n))
    so = " + ".join(f"((long long)c{k} / {full[k]}) * {ss[k]}" for k in range(n))
    yo = " + ".join(f"(long long)c{k} * {ys[k]}" for k in range(n))
    L += [f"  const float xv = {_decode(xt, f'px[{xo}]')};",
          f"  float sv = {_decode(st, f'ps[{so}]')};"]
    if neg:
        L += ["  if (sv == sv) { const float e = -sv;",
              "    if (e == rintf(e)) { const float ec = fminf(fmaxf(e, -2000.f), 2000.f); sv = ldexpf(1.0f, (int)ec); }",
              "    else sv = exp2f(e); }"]
    L += [f"  py[{yo}] = hdn_from_float<{_ctype(yt)}>(xv * sv);", "}"]
    prog.steps.append(("launch", "\n".join(L) + "\n", name, (max(1, -(-total // 256)), 1, 1),
                       (256, 1, 1), [loc[x.uid], loc[s.uid], loc[y.uid]]))
